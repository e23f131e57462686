/* test_report_cli.c - `mdc report` through the built `mdc`, after real `mdc replay` runs: the
 * page of a run just made (and the path printed), the v2 case columns replay fills (event, rule,
 * driver message), --compare as a CI gate, `mdc mutants` recorded and shown as a matrix, a run
 * stopped by SIGTERM marked interrupted, and every bad input with its exit status. */
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/syscall.h>

#include "test_cli_support.h"

static long db_long(const char *db, const char *sql) {
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

static char *db_text(const char *db, const char *sql) {
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "open %s", db);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  const unsigned char *t = sqlite3_column_text(st, 0);
  char *s = strdup(t ? (const char *)t : "(null)");
  sqlite3_finalize(st);
  sqlite3_close(h);
  return s;
}

/* A corpus: the open/close and add traces pass on the reference driver, the wrong sum fails. */
static void corpus3(char dir[64]) {
  tmpdir(dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, "c.jsonl", TRACE_WRONG, NULL);
}

Test(report_cli, replay_then_report_writes_the_page_and_prints_its_path) {
  char dir[64], db[128], out[128];
  corpus3(dir);
  snprintf(db, sizeof db, "%s/results/mdc.db", dir);
  snprintf(out, sizeof out, "%s/results/report", dir);
  mdc_out r = mdc("replay", "--quiet", "--no-rerun", "--db", db, "--config", "backend=sim", dir);
  cr_assert_eq(r.rc, 1, "the wrong sum fails: %s", r.err);
  mdc_out_free(&r);
  /* What replay wrote into the v2 columns: the failing event's op and the trace's rules. */
  char *v = db_text(db, "SELECT event || '|' || rule || '|' || line FROM cases WHERE name = 'cli/c_wrong_sum'");
  cr_expect(strncmp(v, "check|mdc CLI test|", 19) == 0, "%s", v);
  free(v);
  cr_expect_eq(db_long(db, "SELECT interrupted FROM runs"), 0);
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  char want[160];
  snprintf(want, sizeof want, "/results/report/index.html\n");
  cr_expect(strstr(r.out, "mdc report: /") && strstr(r.out, want), "prints the absolute path: %s", r.out);
  mdc_out_free(&r);
  char p[192];
  snprintf(p, sizeof p, "%s/index.html", out);
  char *html = slurp(p);
  cr_expect(strstr(html, "cli/c_wrong_sum") && strstr(html, "cli/b_execute_add"), "the run's cases");
  cr_expect(strstr(html, "FAILED: 1 unexpected"));
  cr_expect(strstr(html, "<span class=\"dim\">op</span> <code>check</code>"), "the failing event");
  cr_expect_null(strstr(html, "http"));
  free(html);
  snprintf(p, sizeof p, "%s/junit.xml", out);
  char *junit = slurp(p);
  cr_expect(strstr(junit, "<testcase classname=\"cli\" name=\"c_wrong_sum\""), "%s", junit);
  free(junit);
  snprintf(p, sizeof p, "%s/summary.md", out);
  char *md = slurp(p);
  cr_expect(strstr(md, "3 cases: 2 passed, 1 failed"), "%s", md);
  free(md);
}

Test(report_cli, compare_is_a_ci_gate) {
  char dir[64], db[128];
  tmpdir(dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--json", "--no-rerun", "--db", db, dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  json_t *j = out_json(&r);
  char a[40];
  snprintf(a, sizeof a, "%s", json_string_value(json_object_get(j, "run_uuid")));
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("replay", "--quiet", "--no-rerun", "--driver", MDC_TEST_CRASH_SO, "--db", db, dir);
  cr_assert_eq(r.rc, 1, "the execute trace crashes: %s", r.err);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", a, "latest");
  cr_expect_eq(r.rc, 1, "a regression fails the gate: %s%s", r.out, r.err);
  cr_expect(strstr(r.out, "REGRESSION    cli/b_execute_add: Pass -> Crash: killed by signal SIGABRT"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", "--json", a, a);
  cr_expect_eq(r.rc, 0, "a run against itself: %s", r.err);
  j = out_json(&r);
  cr_expect(json_is_false(json_object_get(j, "regressed")));
  json_decref(j);
  mdc_out_free(&r);
  /* Options after the runs, as `mdc report --help` prints them (was exit 2 "want two runs"). */
  r = mdc("report", "--compare", a, "latest", "--json", "--db", db);
  cr_expect_eq(r.rc, 1, "options after the runs: %s%s", r.out, r.err);
  j = out_json(&r);
  cr_expect(json_is_true(json_object_get(j, "regressed")), "%s", r.out);
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", a);
  cr_expect_eq(r.rc, 2, "one run is not a comparison");
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", a, "ffffffff-ffff-4fff-bfff-ffffffffffff");
  cr_expect_eq(r.rc, 2);
  cr_expect(strstr(r.err, "no run 'ffffffff-"), "%s", r.err);
  mdc_out_free(&r);
}

Test(report_cli, bad_input_exits_2_or_3_naming_the_file_and_writes_nothing) {
  char dir[64], out[128], missing[128], junk[128];
  tmpdir(dir);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(missing, sizeof missing, "%s/missing.db", dir);
  snprintf(junk, sizeof junk, "%s/junk.db", dir);
  char text[2048];
  memset(text, 'x', sizeof text - 1);
  text[sizeof text - 1] = 0;
  spit(junk, text);
  struct { const char *args[8]; int rc; const char *says; } t[] = {
    {{"report", "--db", missing, NULL}, 2, "no --out"},
    {{"report", "--db", missing, "--out", out, NULL}, 2, missing},
    {{"report", "--db", junk, "--out", out, NULL}, 3, "not a SQLite database"},
    {{"report", "--db", junk, "--out", out, "--max-rows", "0", NULL}, 2, "--max-rows"},
    {{"report", "--bogus", NULL}, 2, "unknown option"},
    {{"report", "--db", junk, "--json", "--out", out, NULL}, 2, "--json goes with --compare"},
    {{"report", "--db", junk, "--out", out, "extra", NULL}, 2, "unexpected argument"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    char *argv[12] = {(char *)MDC_EXE};
    int n = 1;
    for (int k = 0; t[i].args[k]; k++) argv[n++] = (char *)t[i].args[k];
    argv[n] = NULL;
    mdc_out r = run_argv(argv, NULL);
    cr_expect_eq(r.rc, t[i].rc, "case %zu: rc %d: %s", i, r.rc, r.err);
    cr_expect(strstr(r.err, t[i].says), "case %zu: stderr lacks '%s': %s", i, t[i].says, r.err);
    mdc_out_free(&r);
  }
  struct stat sb;
  cr_expect_neq(stat(out, &sb), 0, "no report folder was made");
  cr_expect_neq(stat(missing, &sb), 0, "the missing store was not created");
  char *after = slurp(junk);
  cr_expect_str_eq(after, text, "the junk file is untouched");
  free(after);
  mdc_out r = mdc("report", "--help");
  cr_expect_eq(r.rc, 0);
  cr_expect(strstr(r.out, "--compare") && strstr(r.out, "--baseline"));
  mdc_out_free(&r);
}

/* SIGTERM while a case runs (synchronised on the fifo the hanging driver writes when its execute
 * has begun): mdc dies of SIGTERM, the run is marked interrupted with ended_at, the finished case
 * kept, the running one Interrupted; the report shows it. */
Test(report_cli, sigterm_marks_the_run_interrupted_and_keeps_the_running_case) {
  char dir[64], db[128], fifo[128], env[200], out[128];
  tmpdir(dir);
  /* 0.jsonl fails (no execute, so the hanging driver does not hang it) and waits for its re-run,
   * queued after b.jsonl, which hangs: the signal comes with a re-run pending. */
  write_traces(dir, "0.jsonl",
               T_HEADER("cli/0_fails_first") "{\"op\": \"open_device\", \"config\": \"backend=sim\", \"expect\": "
                                              "{\"status\": \"INVALID_ARGUMENT\"}}\n",
               "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  snprintf(db, sizeof db, "%s/t.db", dir);
  snprintf(out, sizeof out, "%s/report", dir);
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
    execl(MDC_EXE, MDC_EXE, "replay", "--jobs", "1", "--timeout", "600", "--driver", MDC_TEST_HANG_SO, "--db", db,
          dir, (char *)NULL);
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
  kill(pid, SIGTERM);
  int st;
  waitpid(pid, &st, 0);
  cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "mdc dies of the signal (status 0x%x)", st);
  cr_expect_eq(db_long(db, "SELECT interrupted FROM runs"), 1);
  cr_expect_eq(db_long(db, "SELECT ended_at IS NOT NULL AND cases = 2 AND passed = 1 AND failed = 1 FROM runs"), 1);
  /* The failure whose re-run was pending keeps its first result: no verdict is lost. */
  cr_expect_eq(db_long(db, "SELECT count(*) FROM cases WHERE name = 'cli/0_fails_first' AND status = 'Fail' "
                           "AND ended_at IS NOT NULL AND event = 'open_device'"), 1);
  cr_expect_eq(db_long(db, "SELECT count(*) FROM cases WHERE name = 'cli/a_open_close' AND status = 'Pass'"), 1);
  cr_expect_eq(db_long(db, "SELECT count(*) FROM cases WHERE name = 'cli/b_execute_add' AND status = 'Interrupted' "
                           "AND ended_at IS NOT NULL"), 1, "the running case is Interrupted (schema v3), not left Running");
  close(ff);
  close(pidfd);
  mdc_out r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  char page[160];
  snprintf(page, sizeof page, "%s/index.html", out);
  char *html = slurp(page);
  cr_expect(strstr(html, ">INTERRUPTED</span>") && strstr(html, "<code>cli/b_execute_add</code>"),
            "the banner names the case that was running");
  free(html);
}

/* Mutants recorded in the store (the stand-in mutants driver of test_cli: crashy is killed by the
 * execute trace, same survives, broken is a name the driver does not run), then shown by report. */
Test(report_cli, mutants_are_recorded_in_the_store_and_shown_as_a_matrix) {
  char dir[64], traces[96], list[96], db[128], out[128], p[256];
  tmpdir(dir);
  snprintf(traces, sizeof traces, "%s/traces", dir);
  snprintf(list, sizeof list, "%s/mutants.txt", dir);
  snprintf(db, sizeof db, "%s/m.db", dir);
  snprintf(out, sizeof out, "%s/report", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  spit(list, "crashy   execute aborts\nsame     the reference driver itself\nbroken   not runnable\n");
  const char *root = MDC_TEST_MUTANTS_SO;
  mdc_out r = mdc("mutants", "--json", "--corpus", traces, "--driver", root, "--list", list, "--db", db);
  cr_assert_eq(r.rc, 1, "a survivor: %s", r.err);
  json_t *j = out_json(&r);
  cr_expect(json_is_string(json_object_get(j, "run_uuid")));
  json_decref(j);
  mdc_out_free(&r);
  cr_expect_eq(db_long(db, "SELECT count(*) FROM runs WHERE kind = 'mutants' AND ended_at IS NOT NULL AND cases = 3 "
                           "AND passed = 1"), 1);
  char *v = db_text(db, "SELECT group_concat(name || ':' || status, ' ') FROM (SELECT * FROM cases ORDER BY name)");
  cr_expect_str_eq(v, "mutants/broken:TraceError mutants/crashy:Pass mutants/same:Fail");
  free(v);
  v = db_text(db, "SELECT details ->> '$.killed_by[0]' || '|' || rule FROM cases WHERE name = 'mutants/crashy'");
  cr_expect_str_eq(v, "cli/b_execute_add|execute aborts");
  free(v);
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  snprintf(p, sizeof p, "%s/index.html", out);
  char *html = slurp(p);
  cr_expect(strstr(html, "<b>1 of 3</b> mutants killed"), "the matrix heading");
  cr_expect(strstr(html, "SURVIVED") && strstr(html, "not built") && strstr(html, "cli/b_execute_add"));
  free(html);
  r = mdc("mutants", "--corpus", traces, "--driver", root, "--list", list, "--only", "crashy", "--no-db");
  cr_expect_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  cr_expect_eq(db_long(db, "SELECT count(*) FROM runs"), 1, "--no-db records nothing");
}
