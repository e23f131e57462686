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
  /* Where: the line and op of the event that was running when the driver died. */
  cr_expect(strstr(jmessage(j, "cli/b_execute_add"), "at line 9 (execute)"), "message: %s",
            jmessage(j, "cli/b_execute_add"));
  json_decref(j);
  mdc_out_free(&r);
}

/* Every pid listed in the file is gone (killed and reaped). */
static void expect_all_dead(const char *pids_file, int at_least) {
  FILE *f = fopen(pids_file, "r");
  cr_assert_not_null(f, "the driver wrote no pids to %s", pids_file);
  int pid, n = 0;
  while (fscanf(f, "%d", &pid) == 1) {
    n++;
    cr_expect(kill(pid, 0) != 0 && errno == ESRCH, "helper %d outlived mdc", pid);
  }
  fclose(f);
  cr_expect_geq(n, at_least, "helpers forked");
}

/* A driver that forks helpers (one leaving the process group with setsid) in open_client or in
 * open_device (mdc's start-up probe too): every case still ends when its child exits, and
 * nothing the driver started outlives mdc. */
Test(cli, forking_drivers_cost_nothing_and_leave_nothing) {
  const char *drivers[] = {MDC_TEST_FORK_CLIENT_SO, MDC_TEST_FORK_DEVICE_SO};
  for (int k = 0; k < 2; k++) {
    char dir[64], pids[128], env[160];
    corpus(dir, 2);
    snprintf(pids, sizeof pids, "%s/pids", dir);
    snprintf(env, sizeof env, "MDC_TEST_PIDS=%s", pids);
    char *envv[] = {env, NULL};
    mdc_out r = mdc_env(envv, "replay", "--no-db", "--json", "--timeout", "60", "--driver", drivers[k], dir,
                        (char *)NULL);
    cr_expect_eq(r.rc, 0, "%s: rc %d\n%s", drivers[k], r.rc, r.err);
    json_t *j = out_json(&r);
    cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass", "%s", drivers[k]);
    cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Pass", "%s", drivers[k]);
    json_decref(j);
    mdc_out_free(&r);
    expect_all_dead(pids, k == 0 ? 4 : 6);
  }
}

/* A driver that writes into and truncates every descriptor it can find reaches none of mdc's:
 * the results store is intact and holds the run. */
Test(cli, a_scribbling_driver_cannot_reach_the_store) {
  char dir[64], db[128];
  corpus(dir, 2);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--quiet", "--db", db, "--driver", MDC_TEST_SCRIBBLE_SO, dir);
  cr_expect_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE status = 'Pass'"), 2);
  /* and the next run opens it as a store, not as "not a SQLite database" */
  r = mdc("replay", "--quiet", "--db", db, dir);
  cr_expect_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM runs WHERE ended_at IS NOT NULL"), 2);
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

/* deqp-runner's name filters: --include GLOBs (any), --exclude GLOBs (win), '*' across '/'. */
Test(cli, include_and_exclude_select_traces_by_name) {
  char dir[64];
  tmpdir(dir);
  static const char *const names[] = {"cli/tokens/forged", "cli/tokens/stale", "cli/pools/forged_fd", "cli/basic/open"};
  for (int i = 0; i < 4; i++) {
    char file[32], text[512];
    snprintf(file, sizeof file, "t%d.jsonl", i);
    snprintf(text, sizeof text, "{\"mdc_trace\": \"1.0\", \"name\": \"%s\", \"rules\": [\"x\"]}\n%s", names[i],
             strchr(TRACE_OPEN_CLOSE, '\n') + 1);
    write_traces(dir, file, text, NULL);
  }
  mdc_out r = mdc("replay", "--no-db", "--json", "--include", "cli/tokens/*", "--include", "*forged*", "--exclude",
                  "*/stale", dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  json_t *j = out_json(&r), *c;
  size_t i;
  char got[256] = "";
  json_array_foreach(json_object_get(j, "results"), i, c) {
    strcat(got, json_string_value(json_object_get(c, "name")));
    strcat(got, " ");
  }
  cr_expect_str_eq(got, "cli/tokens/forged cli/pools/forged_fd ", "selected, in path order: %s", got);
  cr_expect_eq(json_integer_value(json_object_get(j, "left_out")), 2);
  json_decref(j);
  cr_expect(strstr(r.err, "2 traces left out by --include/--exclude"), "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--exclude", "*", dir);
  cr_expect_eq(r.rc, 2, "nothing selected: %s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--include", "", dir);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "--include '': want a non-empty glob"), "%s", r.err);
  mdc_out_free(&r);
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

Test(cli, config_is_parsed_as_the_driver_parses_it_and_stored_canonical) {
  char dir[64], db[128];
  corpus(dir, 1);
  snprintf(db, sizeof db, "%s/r.db", dir);
  /* 0x10 is 16 for mdc and for the driver alike; the store holds the canonical text. */
  mdc_out r = mdc("replay", "--quiet", "--db", db, "--config", " seed = 0x10 ;backend=sim", dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM runs WHERE seed = 16 AND config = 'backend=sim;seed=16'"), 1);
  mdc_out_free(&r);
  /* What the driver would refuse is refused before anything runs: exit 2 naming the key. */
  /* The last one parses, but the driver cannot open a device with it (the probe): the same. */
  const char *bad[][2] = {{"frob=1", "unknown key 'frob'"}, {"seed=1K", "seed '1K'"}, {"backend=tpu", "backend 'tpu'"},
                          {"backend=sim;faults=melt@1", "cannot open a device with it"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    r = mdc("replay", "--no-db", "--config", bad[i][0], dir);
    cr_expect_eq(r.rc, 2, "%s: rc %d", bad[i][0], r.rc);
    cr_expect(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
    mdc_out_free(&r);
  }
}

/* mdc results: a stored run on the terminal and as JSON, without sqlite3. */
Test(cli, results_shows_a_stored_run) {
  char dir[64], db[128];
  corpus(dir, 3);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--quiet", "--no-rerun", "--db", db, dir);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  mdc_out_free(&r);
  r = mdc("results", "--db", db);
  cr_expect_eq(r.rc, 0, "%s", r.err);
  cr_expect(strstr(r.out, "Pass") && strstr(r.out, "Fail") && strstr(r.out, "cli/c_wrong_sum"), "%s", r.out);
  cr_expect(!strstr(r.out, "cli/a_open_close"), "only what did not pass, without --all: %s", r.out);
  mdc_out_free(&r);
  r = mdc("results", "--db", db, "--all", "--json");
  cr_expect_eq(r.rc, 0, "%s", r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 3);
  cr_expect_eq(jint(j, "unexpected"), 1);
  cr_expect_str_eq(jstatus(j, "cli/c_wrong_sum"), "Fail");
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("results", "--db", db, "--list");
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.out, "3 cases"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("results", "--db", db, "--run", "ffffffff");
  cr_expect_eq(r.rc, 2, "an unknown run: %s", r.err);
  mdc_out_free(&r);
  char missing[128];
  snprintf(missing, sizeof missing, "%s/none.db", dir);
  r = mdc("results", "--db", missing);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, missing), "%s", r.err);
  cr_expect(access(missing, F_OK) != 0, "a missing store is not created");
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

/* Paths that used to hang or loop: only regular files are traces, read without blocking or
 * unbounded memory, and a walk enters each folder and replays each file once. */
Test(cli, paths_that_are_not_traces_end_at_once) {
  char dir[64], fifo[128], loop[128], again[128];
  corpus(dir, 2);
  snprintf(fifo, sizeof fifo, "%s/pipe.jsonl", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  const char *bad[][2] = {{fifo, "a FIFO"}, {"/dev/zero", "a character device"}};
  for (int i = 0; i < 2; i++) {
    mdc_out r = mdc("replay", "--no-db", "--timeout", "5", bad[i][0]);
    cr_expect_eq(r.rc, 2, "%s: rc %d", bad[i][0], r.rc);
    cr_expect(strstr(r.err, bad[i][1]), "%s: %s", bad[i][0], r.err);
    mdc_out_free(&r);
  }
  /* /proc/self/fd holds links to pipes, ttys and the folder being read: nothing a trace. */
  mdc_out r = mdc("replay", "--no-db", "/proc/self/fd");
  cr_expect_eq(r.rc, 2, "rc %d", r.rc);
  cr_expect(strstr(r.err, "no traces"), "%s", r.err);
  mdc_out_free(&r);
  /* A symlink loop and a second link to the same folder: the folder's FIFO is skipped in a
   * walk, and each of its two traces runs once. */
  snprintf(loop, sizeof loop, "%s/loop", dir);
  snprintf(again, sizeof again, "%s/again", dir);
  cr_assert_eq(symlink(".", loop), 0);
  cr_assert_eq(symlink(dir, again), 0);
  r = mdc("replay", "--no-db", "--json", dir, again);
  cr_expect_eq(r.rc, 0, "rc %d: %s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 2);
  json_decref(j);
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

/* --driver NAME (no '/'): a file of that name in this folder is the driver, as a user means it;
 * a name that is no file here says where it was looked for. */
Test(cli, a_driver_named_without_a_slash_is_found_in_this_folder) {
  char dir[64], copy[128];
  corpus(dir, 1);
  snprintf(copy, sizeof copy, "%s/vendor.so", dir);
  FILE *in = fopen(MDC_TEST_REF_SO, "rb"), *out = fopen(copy, "wb");
  cr_assert(in && out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  fclose(in);
  fclose(out);
  cr_assert_eq(chdir(dir), 0);
  mdc_out r = mdc("replay", "--no-db", "--quiet", "--driver", "vendor.so", ".");
  cr_expect_eq(r.rc, 0, "rc %d: %s", r.rc, r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--driver", "missing-vendor.so", ".");
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "looked up in the library path"), "%s", r.err);
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
  r = mdc("--version");
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.out, "mdc ") && strstr(r.out, "trace format 1."), "%s", r.out);
  mdc_out_free(&r);
}

/* The small ones a hostile user found, each as it was reported. */
Test(cli, options_after_paths_quiet_json_verbose_and_bad_option_values) {
  char dir[64], base[128];
  corpus(dir, 2);
  /* options after a path are options */
  mdc_out r = mdc("replay", dir, "--no-db", "--json", "--driver", MDC_TEST_REF_SO);
  cr_expect_eq(r.rc, 0, "rc %d: %s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 2);
  json_decref(j);
  mdc_out_free(&r);
  /* a trailing option without its value */
  r = mdc("replay", dir, "--no-db", "--driver");
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "'--driver' needs a value"), "%s", r.err);
  mdc_out_free(&r);
  /* --json --quiet prints the JSON and nothing else */
  r = mdc("replay", "--no-db", "--json", "--quiet", dir);
  cr_expect_eq(r.rc, 0);
  j = out_json(&r);
  json_decref(j);
  cr_expect_eq(r.err[0], '\0', "quiet: %s", r.err);
  mdc_out_free(&r);
  /* -v prints each event, its arguments and each call's outcome */
  r = mdc("replay", "--no-db", "-v", dir);
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.err, ": execute {") && strstr(r.err, "-> NONE"), "%s", r.err);
  mdc_out_free(&r);
  /* a baseline that is a folder; one that names no trace */
  r = mdc("replay", "--no-db", "--baseline", dir, dir);
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "not a regular file"), "%s", r.err);
  mdc_out_free(&r);
  snprintf(base, sizeof base, "%s/base.txt", dir);
  spit(base, "cli/no_such_trace\n");
  r = mdc("replay", "--no-db", "--baseline", base, dir);
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.err, "lists 'cli/no_such_trace', which no trace of this run is named"), "%s", r.err);
  mdc_out_free(&r);
  /* --db that is empty or not a file, and nothing made beside /dev/null */
  r = mdc("replay", "--db", "", dir);
  cr_expect_eq(r.rc, 3);
  cr_expect(strstr(r.err, "needs a file name"), "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--db", "/dev/null", dir);
  cr_expect_eq(r.rc, 3);
  cr_expect(strstr(r.err, "not a regular file"), "%s", r.err);
  cr_expect(access("/dev/null-journal", F_OK) != 0 && access("/dev/null-wal", F_OK) != 0);
  mdc_out_free(&r);
}

/* SPEC 8.11: a message expectation the driver does not meet is advisory (reported in the JSON
 * and the summary), and a Fail only with --strict-messages. */
Test(cli, messages_are_advisory_unless_strict) {
  char dir[64];
  tmpdir(dir);
  write_traces(dir, "m.jsonl", T_HEADER("cli/m_message")
               "{\"op\": \"open_device\", \"config\": \"backend=sim;bogus=1\", \"expect\": {\"status\": \"INVALID_ARGUMENT\", \"message\": \"words it never says\"}}\n",
               NULL);
  mdc_out r = mdc("replay", "--no-db", "--json", dir);
  cr_expect_eq(r.rc, 0, "rc %d: %s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/m_message"), "Pass");
  json_t *c = json_array_get(json_object_get(j, "results"), 0);
  cr_expect(strstr(json_string_value(json_object_get(c, "advisory")), "lacks \"words it never says\""));
  cr_expect(strstr(r.err, "advisory"), "summary: %s", r.err);
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--json", "--no-rerun", "--strict-messages", dir);
  cr_expect_eq(r.rc, 1);
  j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/m_message"), "Fail");
  json_decref(j);
  mdc_out_free(&r);
}

/* must_pass: false marks a decision SPEC leaves open; such a trace that fails is Warn, reported
 * and not unexpected (exit 0), and a must-pass one that fails the same way is a Fail. */
Test(cli, a_failing_trace_that_is_not_must_pass_is_a_warning) {
  char dir[64], db[128];
  tmpdir(dir);
  write_traces(dir, "w.jsonl",
               "{\"mdc_trace\": \"1.0\", \"name\": \"cli/w_optional\", \"rules\": [\"x\"], \"must_pass\": false}\n"
               "{\"op\": \"open_device\", \"config\": \"backend=sim\", \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n",
               NULL);
  snprintf(db, sizeof db, "%s/w.db", dir);
  mdc_out r = mdc("replay", "--json", "--db", db, dir);
  cr_expect_eq(r.rc, 0, "rc %d: %s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/w_optional"), "Warn");
  cr_expect_eq(jint(j, "warned"), 1);
  cr_expect_eq(jint(j, "unexpected"), 0);
  json_decref(j);
  mdc_out_free(&r);
  cr_expect_eq(db_count(db, "SELECT count(*) FROM cases WHERE status = 'Warn'"), 1);
}

/* A trace name with escape sequences does not reach the terminal raw. */
Test(cli, control_characters_in_names_are_escaped) {
  char dir[64];
  tmpdir(dir);
  write_traces(dir, "e.jsonl",
               "{\"mdc_trace\": \"1.0\", \"name\": \"cli/\\u001b[31mred\", \"rules\": [\"x\"]}\n"
               "{\"op\": \"open_device\", \"config\": \"backend=sim\", \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n",
               NULL);
  mdc_out r = mdc("replay", "--no-db", "--no-rerun", dir);
  cr_expect_eq(r.rc, 1);
  cr_expect(!strchr(r.out, '\033') && !strchr(r.err, '\033'), "raw ESC on the terminal");
  cr_expect(strstr(r.out, "\\x1b[31mred"), "%s", r.out);
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
/* The mutants driver (a stand-in for md_driver_mutants: MD_MUTANT=crashy aborts in execute, same
 * changes nothing) replayed once per mutant with MD_MUTANT set. */
Test(cli, mutants_kill_matrix_and_exit_status) {
  char dir[64], traces[96], list[96];
  tmpdir(dir);
  snprintf(traces, sizeof traces, "%s/traces", dir);
  snprintf(list, sizeof list, "%s/mutants.txt", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  spit(list, "# test mutants\ncrashy   execute aborts\nsame     the reference driver itself\n");
  const char *root = MDC_TEST_MUTANTS_SO;
  mdc_out r = mdc("mutants", "--json", "--corpus", traces, "--driver", root, "--list", list, "--no-db");
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
  r = mdc("mutants", "--corpus", traces, "--driver", root, "--list", list, "--only", "crashy", "--no-db");
  cr_expect_eq(r.rc, 0, "every selected mutant killed: rc %d\n%s", r.rc, r.err);
  cr_expect(strstr(r.out, "crashy") && strstr(r.out, "killed by"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("mutants", "--list", "/nonexistent/list.txt");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
  /* A mutant name that is not in the list is a usage error, not "0 of 0 killed" and exit 0. */
  r = mdc("mutants", "--corpus", traces, "--driver", root, "--list", list, "--only", "nosuch");
  cr_expect_eq(r.rc, 2, "rc %d", r.rc);
  cr_expect(strstr(r.err, "--only 'nosuch': no such mutant"), "%s", r.err);
  cr_expect(!strstr(r.err, "mdc replay:"), "a mutants error says mdc mutants: %s", r.err);
  mdc_out_free(&r);
}

/* --differential A,B: the skew test driver's "skew" backend is off by 1e-3 in every output. A
 * trace whose check allows 0.01 passes on each backend alone; only the comparison sees it. */
Test(cli, differential_replay_catches_backends_that_disagree_within_a_loose_check) {
  const char *loose = MDC_TEST_TRACES "/differential/relu_loose.jsonl";
  char *skew_all[] = {"MDC_TEST_SKEW_ALL=1", NULL};
  mdc_out r = mdc_env(skew_all, "replay", "--no-db", "--json", "--driver", MDC_TEST_SKEW_SO, loose, (char *)NULL);
  cr_assert_eq(r.rc, 0, "alone, skew passes the loose check: rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--json", "--no-rerun", "--driver", MDC_TEST_SKEW_SO, "--differential", "sim,skew", loose);
  cr_assert_eq(r.rc, 1, "rc %d\n%s\n%s", r.rc, r.out, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "differential/relu_loose"), "Fail");
  const char *m = jmessage(j, "differential/relu_loose");
  cr_expect(strstr(m, "relu_loose.jsonl:10: check: differential sim vs skew: values differ"), "message: %s", m);
  json_t *c = json_array_get(json_object_get(j, "results"), 0);
  cr_expect_str_eq(json_string_value(json_object_get(c, "expected")), "sim: f32[0] = 0");
  cr_expect_str_eq(json_string_value(json_object_get(c, "actual")), "skew: f32[0] = 0.00100000005");
  cr_expect_str_eq(json_string_value(json_object_get(c, "event")), "check");
  json_t *d = json_object_get(j, "differential");
  cr_expect_str_eq(json_string_value(json_array_get(d, 0)), "sim");
  cr_expect_str_eq(json_string_value(json_array_get(d, 1)), "skew");
  json_decref(j);
  mdc_out_free(&r);
}

/* Traces the backends agree on pass; a trace one backend fails is that backend's Fail, named. */
Test(cli, differential_replay_passes_agreement_and_names_the_backend_that_fails) {
  char dir[64];
  tmpdir(dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  mdc_out r = mdc("replay", "--no-db", "--json", "--no-rerun", "--driver", MDC_TEST_SKEW_SO, "--differential", "sim,skew", dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Fail");
  const char *m = jmessage(j, "cli/b_execute_add");
  cr_expect(strncmp(m, "on skew: ", 9) == 0, "message: %s", m);
  json_decref(j);
  mdc_out_free(&r);
  /* The same driver on its one real backend twice over agrees with itself (and the reference
   * driver's sim backend with the skew driver's sim: same code). */
  r = mdc("replay", "--no-db", "--json", "--driver", MDC_TEST_SKEW_SO, "--differential", "sim,auto", dir);
  cr_expect_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
}

Test(cli, differential_replay_refuses_bad_backend_pairs) {
  char dir[64];
  corpus(dir, 1);
  const char *bad[] = {"sim", "sim,sim", "sim,", ",hip", "sim,hip,x", "sim,h;ip", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mdc_out r = mdc("replay", "--no-db", "--differential", bad[i], dir);
    cr_expect_eq(r.rc, 2, "'%s': rc %d", bad[i], r.rc);
    cr_expect(strstr(r.err, "--differential"), "'%s': %s", bad[i], r.err);
    mdc_out_free(&r);
  }
  /* A backend the driver does not have is named before anything runs. */
  mdc_out r = mdc("replay", "--no-db", "--differential", "sim,nosuch", dir);
  cr_expect_eq(r.rc, 2, "rc %d", r.rc);
  cr_expect(strstr(r.err, "backend 'nosuch'"), "%s", r.err);
  mdc_out_free(&r);
}
