/* test_cli.c - `mdc replay`, `mdc db merge` and the command line, through the built `mdc`:
 * verdicts, isolation (a crashing and a hanging driver cost one case), baselines, flakes, shards,
 * JSON, exit codes, the results store, and bad input. */
#include <signal.h>
#include <sqlite3.h>
#include <poll.h>
#include <sys/syscall.h>

#include "test_cli_support.h"

/* A folder with the pass, execute, wrong-sum and broken traces (or the first `n` of them). */
static void corpus(char dir[64], int n) {
  tmpdir(dir);
  const char *files[] = {"a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"};
  const char *texts[] = {TRACE_OPEN_CLOSE, TRACE_ADD, TRACE_WRONG, TRACE_BROKEN};
  for (int i = 0; i < n; i++) write_traces(dir, files[i], texts[i], NULL);
}

static long db_count(const char *db, const char *sql) {
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "open %s", db);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  long v = (long)sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

Test(cli, passing_traces_exit_0_with_json_counts) {
  char dir[64];
  corpus(dir, 2);
  mdc_out r = mdc("replay", "--no-db", "--json", dir);
  cr_assert_eq(r.rc, 0, "rc %d\n%s\n%s", r.rc, r.out, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 2);
  cr_expect_eq(jint(j, "passed"), 2);
  cr_expect_eq(jint(j, "failed"), 0);
  cr_expect_eq(jint(j, "crashed"), 0);
  cr_expect_eq(jint(j, "timed_out"), 0);
  cr_expect_eq(jint(j, "unexpected"), 0);
  cr_expect(json_is_null(json_object_get(j, "run_uuid")), "--no-db has no run");
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Pass");
  /* results in path order */
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "results"), 0), "name")),
                   "cli/a_open_close");
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, fail_and_trace_error_are_unexpected_exit_1) {
  char dir[64];
  corpus(dir, 4);
  mdc_out r = mdc("replay", "--no-db", "--json", "--no-rerun", dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/c_wrong_sum"), "Fail");
  cr_expect_str_eq(jstatus(j, "cli/d_broken"), "TraceError");
  cr_expect_eq(jint(j, "failed"), 1);
  cr_expect_eq(jint(j, "trace_errors"), 1);
  cr_expect_eq(jint(j, "unexpected"), 2);
  cr_expect(strstr(jmessage(j, "cli/c_wrong_sum"), "c.jsonl:"), "message names the file: %s",
            jmessage(j, "cli/c_wrong_sum"));
  /* the summary (stderr with --json) lists the non-passing cases */
  cr_expect(strstr(r.err, "cli/c_wrong_sum"), "summary: %s", r.err);
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, baseline_turns_known_failures_into_expected_and_passes_into_unexpected) {
  char dir[64], base[128];
  corpus(dir, 4);
  snprintf(base, sizeof base, "%s/baseline.txt", dir);
  spit(base, "# known failures\ncli/c_wrong_sum\n\ncli/d_broken   # broken on purpose\n");
  mdc_out r = mdc("replay", "--no-db", "--json", "--baseline", base, dir);
  cr_assert_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/c_wrong_sum"), "ExpectedFail");
  cr_expect_str_eq(jstatus(j, "cli/d_broken"), "ExpectedFail");
  cr_expect_eq(jint(j, "unexpected"), 0);
  json_decref(j);
  mdc_out_free(&r);

  spit(base, "cli/a_open_close\n");
  r = mdc("replay", "--no-db", "--json", "--baseline", base, dir);
  j = out_json(&r);
  cr_expect_eq(r.rc, 1);
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "UnexpectedPass");
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, crashing_driver_costs_one_case) {
  char dir[64];
  corpus(dir, 2);
  mdc_out r = mdc("replay", "--no-db", "--json", "--driver", MDC_TEST_CRASH_SO, dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Crash");
  cr_expect(strstr(jmessage(j, "cli/b_execute_add"), "SIGABRT"), "message: %s", jmessage(j, "cli/b_execute_add"));
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass", "the other case still ran");
  cr_expect_eq(jint(j, "crashed"), 1);
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, hanging_driver_times_out_and_the_run_goes_on) {
  char dir[64];
  corpus(dir, 2);
  mdc_out r = mdc("replay", "--no-db", "--json", "--timeout", "2", "--driver", MDC_TEST_HANG_SO, dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Timeout");
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  cr_expect_eq(jint(j, "timed_out"), 1);
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, crash_then_pass_on_rerun_is_a_flake) {
  char dir[64], env[160];
  corpus(dir, 2);
  snprintf(env, sizeof env, "MDC_TEST_FLAKY_MARKER=%s/marker", dir);
  char *envv[] = {env, NULL};
  mdc_out r = mdc_env(envv, "replay", "--no-db", "--json", "--driver", MDC_TEST_FLAKY_SO, dir, (char *)NULL);
  cr_assert_eq(r.rc, 0, "a flake is not unexpected: rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Flake");
  cr_expect(strstr(jmessage(j, "cli/b_execute_add"), "Crash"), "%s", jmessage(j, "cli/b_execute_add"));
  cr_expect_eq(jint(j, "flaky"), 1);
  json_decref(j);
  mdc_out_free(&r);
}

Test(cli, shards_partition_the_corpus) {
  char dir[64];
  tmpdir(dir);
  /* 12 traces named n00..n11, all passing */
  for (int i = 0; i < 12; i++) {
    char file[32], text[512];
    snprintf(file, sizeof file, "t%02d.jsonl", i);
    snprintf(text, sizeof text, "{\"mdc_trace\": \"1.0\", \"name\": \"cli/n%02d\", \"rules\": [\"x\"]}\n%s",
             i, strchr(TRACE_OPEN_CLOSE, '\n') + 1);
    write_traces(dir, file, text, NULL);
  }
  int seen[12] = {0}, total = 0;
  for (int s = 0; s < 3; s++) {
    char shard[8];
    snprintf(shard, sizeof shard, "%d/3", s);
    mdc_out r = mdc("replay", "--no-db", "--json", "--shard", shard, dir);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    json_t *j = out_json(&r), *c;
    size_t i;
    json_array_foreach(json_object_get(j, "results"), i, c) {
      int k = atoi(json_string_value(json_object_get(c, "name")) + 5);
      seen[k]++;
      total++;
    }
    json_decref(j);
    mdc_out_free(&r);
  }
  cr_expect_eq(total, 12);
  for (int k = 0; k < 12; k++) cr_expect_eq(seen[k], 1, "trace %d in %d shards", k, seen[k]);
}

Test(cli, store_holds_the_run_and_every_case) {
  char dir[64], db[128];
  corpus(dir, 3);
  snprintf(db, sizeof db, "%s/out/sub/r.db", dir); /* folders created */
  mdc_out r = mdc("replay", "--json", "--no-rerun", "--db", db, "--config", "backend=sim;seed=5", dir);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  json_t *j = out_json(&r);
  cr_expect(json_is_string(json_object_get(j, "run_uuid")));
  cr_expect_str_eq(json_string_value(json_object_get(j, "db")), db);
  json_decref(j);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM runs WHERE backend = 'sim' AND seed = 5 AND ended_at IS NOT NULL "
                            "AND driver_name IS NOT NULL AND config = 'backend=sim;seed=5'"), 1);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases"), 3);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE status = 'Pass'"), 2);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE status = 'Fail' AND name = 'cli/c_wrong_sum' "
                            "AND path LIKE '%/c.jsonl' AND line > 0 AND message <> ''"), 1);
  mdc_out_free(&r);
}

Test(cli, db_merge_twice_changes_nothing) {
  char dir[64], a[128], b[128], out[128];
  corpus(dir, 2);
  snprintf(a, sizeof a, "%s/a.db", dir);
  snprintf(b, sizeof b, "%s/b.db", dir);
  snprintf(out, sizeof out, "%s/merged.db", dir);
  mdc_out r = mdc("replay", "--db", a, dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--db", b, "--shard", "0/1", dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  for (int round = 0; round < 2; round++) {
    r = mdc("db", "merge", out, a, b);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    mdc_out_free(&r);
    cr_expect_eq(db_count(out, "SELECT count(*) FROM runs"), 2, "round %d", round);
    cr_expect_eq(db_count(out, "SELECT count(*) FROM cases"), 4, "round %d", round);
  }
  r = mdc("db", "merge", out);
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
  r = mdc("db", "frobnicate");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
}

Test(cli, corrupt_db_is_refused_and_left_untouched) {
  char dir[64], db[128];
  corpus(dir, 1);
  snprintf(db, sizeof db, "%s/corrupt.db", dir);
  const char *junk = "this is not an SQLite database, it is a text file that must survive\n";
  spit(db, junk);
  mdc_out r = mdc("replay", "--db", db, dir);
  cr_expect_eq(r.rc, 3, "rc %d: %s", r.rc, r.err);
  cr_expect(strstr(r.err, db), "the message names the file: %s", r.err);
  char *after = slurp(db);
  cr_expect_str_eq(after, junk);
  free(after);
  mdc_out_free(&r);
}

Test(cli, unwritable_db_is_a_clear_error) {
  char dir[64], db[160], file[128];
  corpus(dir, 1);
  snprintf(file, sizeof file, "%s/plainfile", dir);
  spit(file, "x");
  snprintf(db, sizeof db, "%s/sub/r.db", file); /* a folder inside a regular file */
  mdc_out r = mdc("replay", "--db", db, dir);
  cr_expect_eq(r.rc, 3, "rc %d: %s", r.rc, r.err);
  cr_expect(strstr(r.err, db), "the message names the file: %s", r.err);
  mdc_out_free(&r);
}

/* The store fails in the middle of a run (a trigger refuses the second case row, as a full disk
 * would): the run stops starting cases, exits 3 naming the store, and keeps every row and every
 * result it had written, in the file and in the JSON. */
Test(cli, store_failing_mid_run_keeps_what_was_written) {
  char dir[64], db[128];
  corpus(dir, 3);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--no-rerun", "--db", db, dir);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  mdc_out_free(&r);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
  char *msg = NULL;
  cr_assert_eq(sqlite3_exec(h,
                            "CREATE TRIGGER full BEFORE INSERT ON cases WHEN (SELECT count(*) FROM cases) >= 4 "
                            "BEGIN SELECT RAISE(FAIL, 'database or disk is full (test trigger)'); END;",
                            NULL, NULL, &msg),
               SQLITE_OK, "%s", msg ? msg : "");
  sqlite3_close(h);

  r = mdc("replay", "--json", "--no-rerun", "--jobs", "1", "--db", db, dir);
  cr_expect_eq(r.rc, 3, "rc %d: %s", r.rc, r.err);
  cr_expect(strstr(r.err, "results store") && strstr(r.err, "disk is full (test trigger)") &&
                strstr(r.err, "results written so far are kept"),
            "%s", r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 1, "only the case that ran is reported: %s", r.out);
  cr_expect_eq(jint(j, "passed"), 1);
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  json_decref(j);
  mdc_out_free(&r);
  /* the first run whole; the second: its run row and its one finished case */
  cr_expect_eq(db_count(db, "SELECT count(*) FROM runs"), 2);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE run_id = 1 AND status <> 'Running'"), 3);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE run_id = 2"), 1);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE run_id = 2 AND status = 'Pass' "
                            "AND ended_at IS NOT NULL"), 1);
}

Test(cli, bad_paths_are_usage_errors) {
  char dir[64], empty[128];
  corpus(dir, 1);
  mdc_out r = mdc("replay", "--no-db", "/nonexistent/mdc-traces");
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "/nonexistent/mdc-traces"), "%s", r.err);
  mdc_out_free(&r);
  snprintf(empty, sizeof empty, "%s/empty", dir);
  mkdir(empty, 0755);
  r = mdc("replay", "--no-db", empty);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "no traces"), "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db");
  cr_expect_eq(r.rc, 2, "no PATH");
  mdc_out_free(&r);
}

typedef struct bad_opt { char a[16], b[32]; } bad_opt;
ParameterizedTestParameters(cli, bad_option_values_are_usage_errors) {
  static bad_opt p[] = {{"--shard", "3/2"}, {"--shard", "x"},     {"--shard", "1/0"},
                        {"--shard", "-1/2"}, {"--timeout", "x"},  {"--timeout", "0"},
                        {"--timeout", "-5"}, {"--jobs", "0"},     {"--frobnicate", "1"},
                        {"--baseline", "/nonexistent/base"}};
  return cr_make_param_array(bad_opt, p, sizeof p / sizeof p[0]);
}
ParameterizedTest(bad_opt *p, cli, bad_option_values_are_usage_errors) {
  char dir[64];
  corpus(dir, 1);
  mdc_out r = mdc("replay", "--no-db", p->a, p->b, dir);
  cr_expect_eq(r.rc, 2, "%s %s: rc %d", p->a, p->b, r.rc);
  cr_expect(strlen(r.err) > 0, "a message on stderr");
  mdc_out_free(&r);
}

Test(cli, drivers_that_cannot_load_are_usage_errors) {
  char dir[64];
  corpus(dir, 1);
  mdc_out r = mdc("replay", "--no-db", "--driver", "/nonexistent/libdriver.so", dir);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "/nonexistent/libdriver.so"), "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--driver", MDC_TEST_NO_ENTRY_SO, dir);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "md_driver_entry"), "%s", r.err);
  mdc_out_free(&r);
}

Test(cli, help_and_unknown_commands) {
  mdc_out r = mdc("--help");
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.out, "replay") && strstr(r.out, "record") && strstr(r.out, "mutants"));
  mdc_out_free(&r);
  const char *cmds[] = {"replay", "record", "mutants", "db"};
  for (int i = 0; i < 4; i++) {
    r = mdc((char *)cmds[i], "--help");
    cr_expect_eq(r.rc, 0, "%s --help", cmds[i]);
    cr_expect(strstr(r.out, "usage"), "%s --help: %s", cmds[i], r.out);
    mdc_out_free(&r);
  }
  r = mdc("frobnicate");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
}

/* SIGKILL in the middle of a run: the finished case is in the store, the interrupted one is
 * 'Running'. Synchronised on a fifo the hanging driver writes to when its execute has begun
 * (so case a is complete and case b's row committed), and on a pidfd in case mdc exits first. */
Test(cli, sigkill_keeps_finished_cases_and_marks_the_interrupted_one_running) {
  char dir[64], db[128], fifo[128], env[200];
  corpus(dir, 2);
  snprintf(db, sizeof db, "%s/k.db", dir);
  snprintf(fifo, sizeof fifo, "%s/hang.fifo", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  snprintf(env, sizeof env, "MDC_TEST_HANG_FIFO=%s", fifo);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    putenv(env);
    execl(MDC_EXE, MDC_EXE, "replay", "--jobs", "1", "--timeout", "600", "--driver", MDC_TEST_HANG_SO,
          "--db", db, dir, (char *)NULL);
    _exit(126);
  }
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  cr_assert(pidfd >= 0, "pidfd_open: %s", strerror(errno));
  int ff = open(fifo, O_RDONLY | O_NONBLOCK);
  cr_assert(ff >= 0);
  struct pollfd p[2] = {{.fd = ff, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
  for (;;) {
    int n = poll(p, 2, -1);
    cr_assert(n > 0 || errno == EINTR);
    cr_assert(!(p[1].revents & POLLIN), "mdc ended before the hanging case began");
    if (p[0].revents & POLLIN) break;
  }
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases"), 2);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE name = 'cli/a_open_close' AND status = 'Pass'"), 1);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE name = 'cli/b_execute_add' AND status = 'Running'"), 1);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM runs WHERE ended_at IS NULL"), 1);
  close(ff);
  close(pidfd);
}

/* The kill matrix without building: a build root whose "mutants" are prebuilt drivers (the
 * crashing test driver kills the execute trace; the reference driver itself survives). */
static void fake_mutant(const char *root, const char *name, const char *so) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, name);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/runtime", root, name);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/runtime/libmd_driver.so", root, name);
  cr_assert_eq(symlink(so, p), 0, "symlink %s: %s", p, strerror(errno));
}

Test(cli, mutants_kill_matrix_and_exit_status) {
  char dir[64], traces[96], root[96], list[96];
  tmpdir(dir);
  snprintf(traces, sizeof traces, "%s/traces", dir);
  snprintf(root, sizeof root, "%s/mutants", dir);
  snprintf(list, sizeof list, "%s/mutants.txt", dir);
  mkdir(traces, 0755);
  mkdir(root, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  spit(list, "# test mutants\ncrashy   execute aborts\nsame     the reference driver itself\n");
  fake_mutant(root, "crashy", MDC_TEST_CRASH_SO);
  fake_mutant(root, "same", MDC_TEST_REF_SO);
  mdc_out r = mdc("mutants", "--json", "--corpus", traces, "--build-root", root, "--list", list, "--no-db");
  cr_assert_eq(r.rc, 1, "a survivor: rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "killed"), 1);
  json_t *m0 = json_array_get(json_object_get(j, "mutants"), 0), *m1 = json_array_get(json_object_get(j, "mutants"), 1);
  cr_expect_str_eq(json_string_value(json_object_get(m0, "name")), "crashy");
  cr_expect(json_is_true(json_object_get(m0, "killed")));
  cr_expect_eq(json_array_size(json_object_get(m0, "killed_by")), 1);
  cr_expect_str_eq(json_string_value(json_array_get(json_object_get(m0, "killed_by"), 0)), "cli/b_execute_add");
  cr_expect(json_is_false(json_object_get(m1, "killed")));
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("mutants", "--corpus", traces, "--build-root", root, "--list", list, "--only", "crashy", "--no-db");
  cr_expect_eq(r.rc, 0, "every selected mutant killed: rc %d\n%s", r.rc, r.err);
  cr_expect(strstr(r.out, "crashy") && strstr(r.out, "killed by"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("mutants", "--list", "/nonexistent/list.txt");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
}
