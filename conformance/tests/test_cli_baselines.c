/* test_cli_baselines.c - issue 27 through the built `mdc`: baselines compare like with like (a
 * run over other traces is no baseline, and the report says so), every run records the driver
 * build it judged (GNU build-id and SHA-256 of the file, checked against readelf and a SHA-256 of
 * our own reading), deqp-runner's --skips, --flakes and `mdc baseline write`, progress off a
 * terminal (counted lines, with a driver whose cases hang until --timeout) and for mdc mutants,
 * colour on a terminal only (a pty) and never with NO_COLOR. */
#include <pty.h>
#include <sqlite3.h>

#include "test_cli_support.h"

/* A trace that is not must-pass and fails (no execute: the same on every test driver): Warn. */
static const char TRACE_WARN[] =
    "{\"mdc_trace\": \"1.0\", \"name\": \"cli/w_optional\", \"rules\": [\"x\"], \"must_pass\": false}\n"
    "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\", \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n";

static char *db_text(const char *db, const char *sql) {
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "open %s", db);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  char *v = NULL;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) v = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

/* The output of a shell command (its first line, newline dropped), or NULL. */
static char *sh(const char *cmd) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char line[512] = "";
  char *got = fgets(line, sizeof line, p);
  pclose(p);
  if (!got || !line[0]) return NULL;
  line[strcspn(line, "\n")] = 0;
  return strdup(line);
}

static int count_lines(const char *text, const char *prefix) {
  int n = 0;
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, prefix, strlen(prefix))) n++;
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : NULL;
  }
  return n;
}

/* ---- like with like ------------------------------------------------------------------------ */

Test(cli27, a_run_over_other_traces_is_no_baseline_and_the_report_says_so) {
  char dir[64], db[96], out[96], md[128], html[128];
  tmpdir(dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(out, sizeof out, "%s/report", dir);
  snprintf(md, sizeof md, "%s/summary.md", out);
  snprintf(html, sizeof html, "%s/index.html", out);
  char traces[96];
  snprintf(traces, sizeof traces, "%s/t", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, "w.jsonl", TRACE_WARN, NULL);
  /* First a run of part of the corpus (as basic/ was), then the whole of it. */
  mdc_out r = mdc("replay", "--db", db, "--include", "cli/a_*", traces);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--db", db, traces);
  cr_assert_eq(r.rc, 0, "a Warn is not unexpected: %s", r.err);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  char *t = slurp(md);
  cr_expect(strstr(t, "Baseline: none: no earlier replay runs of mdc-reference on sim over the same 3 traces"),
            "the 1-case run is no baseline for the 3-case run: %s", t);
  cr_expect(strstr(t, "1 run of this driver and backend ran other traces"), "%s", t);
  cr_expect_null(strstr(t, "new failing"), "no comparison, no 'new failing': %s", t);
  cr_expect(strstr(t, "1 warned"), "Warn counted as such: %s", t);
  free(t);
  t = slurp(html);
  cr_expect(strstr(t, "Left out: 1 earlier run of this driver and backend over other traces"), "history");
  cr_expect(strstr(t, "This is the first such run"), "the history chart does not mix selections");
  free(t);
  /* A second full run: its baseline is the first full run, named with the reason. */
  r = mdc("replay", "--db", db, traces);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  t = slurp(md);
  cr_expect(strstr(t, "the newest earlier of the replay runs of mdc-reference on sim over the same 3 traces"), "%s", t);
  cr_expect(strstr(t, "0 regressions, 0 fixes, 0 new failing"), "a Warn is never new failing: %s", t);
  free(t);
}

/* ---- driver identity ----------------------------------------------------------------------- */

Test(cli27, a_run_records_the_build_id_and_sha256_of_the_driver_file) {
  char dir[64], db[96];
  tmpdir(dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, NULL);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null | sed -n 's/.*Build ID: *//p'", MDC_TEST_CRASH_SO);
  char *want_id = sh(cmd);
  snprintf(cmd, sizeof cmd, "sha256sum '%s' | cut -d' ' -f1", MDC_TEST_CRASH_SO);
  char *want_sha = sh(cmd);
  cr_assert(want_sha, "sha256sum");
  mdc_out r = mdc("replay", "--db", db, "--json", "--driver", MDC_TEST_CRASH_SO, dir);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(json_string_value(json_object_get(j, "driver_sha256")), want_sha);
  if (want_id) cr_expect_str_eq(json_string_value(json_object_get(j, "driver_build_id")), want_id);
  json_decref(j);
  mdc_out_free(&r);
  char *id = db_text(db, "SELECT driver_build_id FROM runs"), *sha = db_text(db, "SELECT driver_sha256 FROM runs");
  cr_expect_str_eq(sha, want_sha);
  if (want_id) cr_expect_str_eq(id, want_id);
  /* Shown by mdc results and in the report's header and JUnit properties. */
  r = mdc("results", "--db", db);
  cr_expect(strstr(r.out, want_sha), "%s", r.out);
  mdc_out_free(&r);
  char out[96], p[128];
  snprintf(out, sizeof out, "%s/report", dir);
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  snprintf(p, sizeof p, "%s/junit.xml", out);
  char *junit = slurp(p), prop[256];
  snprintf(prop, sizeof prop, "<property name=\"driver_sha256\" value=\"%s\"/>", want_sha);
  cr_expect(strstr(junit, prop), "%s", junit);
  free(junit);
  snprintf(p, sizeof p, "%s/index.html", out);
  char *html = slurp(p);
  cr_expect(strstr(html, want_sha), "the page's header names the build");
  free(html);
  /* The reference driver linked in: the identity of the libmd_driver.so mdc links. */
  snprintf(cmd, sizeof cmd, "sha256sum '%s' | cut -d' ' -f1", MDC_TEST_REF_SO);
  char *ref_sha = sh(cmd);
  r = mdc("replay", "--no-db", "--json", dir);
  j = out_json(&r);
  cr_expect_str_eq(json_string_value(json_object_get(j, "driver_sha256")), ref_sha);
  json_decref(j);
  mdc_out_free(&r);
  free(ref_sha), free(id), free(sha), free(want_id), free(want_sha);
}

Test(cli27, compare_says_when_two_runs_judged_different_builds) {
  char dir[64], db[96];
  tmpdir(dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, NULL);
  mdc_out r = mdc("replay", "--db", db, dir);
  mdc_out_free(&r);
  r = mdc("replay", "--db", db, dir);
  mdc_out_free(&r);
  char *first = db_text(db, "SELECT uuid FROM runs ORDER BY id LIMIT 1");
  r = mdc("report", "--db", db, "--compare", first, "latest");
  cr_expect_eq(r.rc, 0, "%s", r.err);
  cr_expect(strstr(r.out, "Both runs judged the same driver build."), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("replay", "--db", db, "--driver", MDC_TEST_CRASH_SO, dir);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", first, "latest");
  cr_expect(strstr(r.out, "DIFFERENT DRIVER BUILDS"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("report", "--db", db, "--compare", "--json", first, "latest");
  json_t *j = out_json(&r);
  cr_expect(json_is_false(json_object_get(j, "same_build")), "%s", r.out);
  json_decref(j);
  mdc_out_free(&r);
  free(first);
}

/* ---- deqp-runner's conventions --------------------------------------------------------------- */

Test(cli27, skips_are_never_run_and_flakes_are_reported_not_unexpected) {
  char dir[64], skips[96], flakes[96], db[96];
  tmpdir(dir);
  char traces[96];
  snprintf(traces, sizeof traces, "%s/t", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  snprintf(skips, sizeof skips, "%s/skips.txt", dir);
  snprintf(flakes, sizeof flakes, "%s/flakes.txt", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  spit(skips, "# never run: it crashes the machine\ncli/b_*\n");
  spit(flakes, "cli/b_execute_add   # crashes now and then\n");
  /* The crashing driver crashes in b's execute: skipped, it never runs. */
  mdc_out r = mdc("replay", "--db", db, "--json", "--skips", skips, "--driver", MDC_TEST_CRASH_SO, traces);
  cr_expect_eq(r.rc, 0, "a skipped case is not unexpected: %s", r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Skipped");
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  cr_expect_eq(jint(j, "skipped"), 1);
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "results"), 1), "name")),
                   "cli/b_execute_add", "path order kept");
  json_decref(j);
  mdc_out_free(&r);
  char *st = db_text(db, "SELECT status FROM cases WHERE name = 'cli/b_execute_add'");
  cr_expect_str_eq(st, "Skipped");
  free(st);
  /* Known flaky: its crash is reported as a Flake, the run is not failed. */
  r = mdc("replay", "--no-db", "--json", "--no-rerun", "--flakes", flakes, "--driver", MDC_TEST_CRASH_SO, traces);
  cr_expect_eq(r.rc, 0, "%s", r.err);
  j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Flake");
  cr_expect(strstr(jmessage(j, "cli/b_execute_add"), "known flaky") && strstr(jmessage(j, "cli/b_execute_add"), "Crash"),
            "%s", jmessage(j, "cli/b_execute_add"));
  json_decref(j);
  mdc_out_free(&r);
  /* Without the list the same crash is unexpected. */
  r = mdc("replay", "--no-db", "--no-rerun", "--quiet", "--driver", MDC_TEST_CRASH_SO, traces);
  cr_expect_eq(r.rc, 1);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--skips", "/nonexistent/skips.txt", traces);
  cr_expect_eq(r.rc, 2, "%s", r.err);
  cr_expect(strstr(r.err, "--skips"), "%s", r.err);
  mdc_out_free(&r);
}

Test(cli27, baseline_write_lists_the_unexpected_failures_under_a_header) {
  char dir[64], db[96], base[96];
  tmpdir(dir);
  char traces[96];
  snprintf(traces, sizeof traces, "%s/t", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, "w.jsonl", TRACE_WARN, NULL);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(base, sizeof base, "%s/known/my-driver.baseline", dir);
  mdc_out r = mdc("replay", "--db", db, "--no-rerun", "--driver", MDC_TEST_CRASH_SO, traces);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  mdc_out_free(&r);
  char *uuid = db_text(db, "SELECT uuid FROM runs"), *sha = db_text(db, "SELECT driver_sha256 FROM runs");
  r = mdc("baseline", "write", "--db", db, "--out", base);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  char *b = slurp(base);
  cr_expect(strstr(b, uuid), "the header names the run: %s", b);
  cr_expect(strstr(b, sha), "and the driver build: %s", b);
  cr_expect(strstr(b, "# written 20"), "and the date: %s", b);
  cr_expect(strstr(b, "\ncli/b_execute_add  # Crash"), "%s", b);
  cr_expect_null(strstr(b, "\ncli/w_optional"), "a Warn is no known failure: %s", b);
  cr_expect_null(strstr(b, "\ncli/a_open_close"), "%s", b);
  free(b);
  /* The baseline makes the same run green. */
  r = mdc("replay", "--no-db", "--no-rerun", "--json", "--baseline", base, "--driver", MDC_TEST_CRASH_SO, traces);
  cr_expect_eq(r.rc, 0, "%s", r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "ExpectedFail");
  json_decref(j);
  mdc_out_free(&r);
  /* --run by prefix, to stdout; bad input. */
  char prefix[9];
  snprintf(prefix, sizeof prefix, "%.8s", uuid);
  r = mdc("baseline", "write", "--db", db, "--run", prefix);
  cr_expect_eq(r.rc, 0, "%s", r.err);
  cr_expect(strstr(r.out, "cli/b_execute_add"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("baseline", "write", "--db", db, "--run", "ffffffff");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
  r = mdc("baseline", "frobnicate");
  cr_expect_eq(r.rc, 2);
  mdc_out_free(&r);
  free(uuid), free(sha);
}

/* ---- progress and colour ------------------------------------------------------------------- */

Test(cli27, off_a_terminal_a_status_line_comes_every_progress_interval) {
  char dir[64];
  tmpdir(dir);
  write_traces(dir, "b.jsonl", TRACE_ADD, "c.jsonl", TRACE_WRONG, NULL);
  /* The hanging driver holds each case until --timeout: the run lasts at least 1.2 s, and a
   * line is due every 0.1 s. Lines are counted, not timed. */
  mdc_out r = mdc("replay", "--no-db", "--no-rerun", "--jobs", "1", "--timeout", "0.6", "--progress-interval", "0.1",
                  "--driver", MDC_TEST_HANG_SO, dir);
  cr_expect_eq(r.rc, 1);
  int lines = count_lines(r.err, "mdc replay: [");
  cr_expect_geq(lines, 2, "status lines: %d\n%s", lines, r.err);
  cr_expect(strstr(r.err, "mdc replay: [0/2] ") && strstr(r.err, "ETA unknown"), "%s", r.err);
  cr_expect(strstr(r.err, "mdc replay: [1/2] ") && strstr(r.err, "elapsed, ETA ") && strstr(r.err, ": Timeout 1"),
            "%s", r.err);
  cr_expect_null(strstr(r.err, "\033["), "no escape sequences off a terminal");
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--no-rerun", "--quiet", "--jobs", "1", "--timeout", "0.3", "--progress-interval", "0.05",
          "--driver", MDC_TEST_HANG_SO, dir);
  cr_expect_eq(count_lines(r.err, "mdc replay: ["), 0, "--quiet: %s", r.err);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--progress-interval", "0", dir);
  cr_expect_eq(r.rc, 2, "%s", r.err);
  mdc_out_free(&r);
}

Test(cli27, mutants_show_i_of_n_kills_and_eta_on_stderr_even_with_json) {
  char dir[64], traces[96], list[96];
  tmpdir(dir);
  snprintf(traces, sizeof traces, "%s/traces", dir);
  snprintf(list, sizeof list, "%s/mutants.txt", dir);
  mkdir(traces, 0755);
  write_traces(traces, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, NULL);
  spit(list, "crashy   execute aborts\nsame     the reference driver itself\n");
  mdc_out r = mdc("mutants", "--json", "--corpus", traces, "--driver", MDC_TEST_MUTANTS_SO, "--list", list, "--no-db");
  cr_expect_eq(r.rc, 1, "%s", r.err);
  cr_expect(strstr(r.err, "mdc mutants: [1/2] crashy (0 killed so far, ETA unknown)"), "%s", r.err);
  cr_expect(strstr(r.err, "mdc mutants: [2/2] same (1 killed so far, ETA "), "%s", r.err);
  json_decref(out_json(&r)); /* stdout is still only the JSON */
  mdc_out_free(&r);
}

/* Runs mdc on a pseudo-terminal; returns what it wrote there. */
static char *on_pty(char *const argv[], const char *env) {
  int fd;
  fflush(NULL);
  pid_t pid = forkpty(&fd, NULL, NULL, NULL);
  cr_assert(pid >= 0, "forkpty: %s", strerror(errno));
  if (pid == 0) {
    unsetenv("NO_COLOR");
    setenv("TERM", "xterm", 1);
    if (env) putenv((char *)env);
    execv(argv[0], argv);
    _exit(126);
  }
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t n;
  while ((n = read(fd, buf + len, cap - 1 - len)) > 0 && len + 1 < cap) len += (size_t)n; /* EIO at the end */
  buf[len] = 0;
  close(fd);
  int st;
  waitpid(pid, &st, 0);
  return buf;
}

Test(cli27, statuses_are_coloured_on_a_terminal_only_and_never_with_no_color) {
  char dir[64], db[96];
  tmpdir(dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, "w.jsonl", TRACE_WARN, NULL);
  mdc_out r = mdc("replay", "--db", db, dir);
  cr_expect_null(strstr(r.out, "\033["), "off a terminal: %s", r.out);
  mdc_out_free(&r);
  char *argv[] = {(char *)MDC_EXE, (char *)"results", (char *)"--db", db, NULL};
  char *t = on_pty(argv, NULL);
  cr_expect(strstr(t, "\033[32mPass"), "Pass in green on a terminal: %s", t);
  cr_expect(strstr(t, "\033[33mWarn"), "Warn in its own colour, not a failure's: %s", t);
  free(t);
  t = on_pty(argv, "NO_COLOR=1");
  cr_expect(strstr(t, "Pass") && !strstr(t, "\033["), "NO_COLOR: %s", t);
  free(t);
  r = mdc("results", "--db", db);
  cr_expect(strstr(r.out, "Warn") && !strstr(r.out, "\033["), "a pipe: %s", r.out);
  mdc_out_free(&r);
}
