/* test_store_crash.c - a process killed with SIGKILL mid-run leaves every finished case intact
 * and the interrupted case visibly 'Running'; the file reopens cleanly. */
#include "store_test.h"

#include <signal.h>
#include <sys/wait.h>

TestSuite(store_crash, .init = st_setup, .fini = st_teardown);

/* The child: never returns. Exit codes other than the kill say which step failed. */
static void child(const char *path) {
  mdc_store *s;
  char err[1024];
  if (mdc_store_open(path, &s, err, sizeof err) != 0) _exit(10);
  mdc_run_info ri = {.kind = "replay", .driver_name = "md-reference", .shard_count = 1};
  int64_t run, c;
  if (mdc_store_run_begin(s, &ri, &run, NULL) != 0) _exit(11);
  if (mdc_store_case_begin(s, run, "first", "t.jsonl", &c) != 0) _exit(12);
  if (mdc_store_case_end(s, c, "Pass", 0.1, 3, NULL, NULL, NULL) != 0) _exit(13);
  if (mdc_store_case_begin(s, run, "second", "t.jsonl", &c) != 0) _exit(14);
  if (mdc_store_case_end(s, c, "Fail", 0.2, 7, "boom", "OK", "OUT_OF_MEMORY") != 0) _exit(15);
  if (mdc_store_case_begin(s, run, "third", "t.jsonl", &c) != 0) _exit(16);
  raise(SIGKILL);  /* mid-case: no close, no checkpoint, the WAL is left as it is */
  _exit(17);
}

Test(store_crash, sigkill_mid_run_keeps_finished_cases_and_marks_the_interrupted_one) {
  const char *p = st_path(0, "crash.db");
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork");
  if (pid == 0) child(p);
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL,
            "child was not killed (exit status %d: a step before the kill failed)",
            WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
  cr_expect(st_exists(st_path(1, "crash.db-wal")), "the killed writer leaves its WAL behind");

  mdc_store *s = st_open(p);
  int64_t ids[4];
  size_t n = 0;
  cr_assert_eq(mdc_store_list_runs(s, ids, 4, &n), 0);
  cr_assert_eq(n, 1);
  uint32_t k = 0;
  cr_expect_eq(mdc_store_count_cases(s, ids[0], NULL, &k), 0);
  cr_expect_eq(k, 3);
  cr_expect_eq(mdc_store_count_cases(s, ids[0], "Pass", &k), 0);
  cr_expect_eq(k, 1);
  cr_expect_eq(mdc_store_count_cases(s, ids[0], "Fail", &k), 0);
  cr_expect_eq(k, 1);
  cr_expect_eq(mdc_store_count_cases(s, ids[0], "Running", &k), 0);
  cr_expect_eq(k, 1);
  mdc_store_close(s);

  cr_expect_str_eq(st_text(p, "SELECT group_concat(name || ':' || status || ':' || ifnull(line, '-') || ':' || "
                              "ifnull(actual, '-'), ' ') FROM (SELECT * FROM cases ORDER BY id)"),
                   "first:Pass:3:- second:Fail:7:OUT_OF_MEMORY third:Running:-:-");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Running' AND ended_at IS NULL "
                         "AND duration_s IS NULL"), 1);
  cr_expect_eq(st_int(p, "SELECT ended_at IS NULL FROM runs"), 1, "the killed run never ended");
  cr_expect_str_eq(st_text(p, "PRAGMA integrity_check"), "ok");
}
