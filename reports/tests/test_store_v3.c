/* test_store_v3.c - schema v3: the status Interrupted. The upgrade of a v2 file (in place, once,
 * every row kept, a v2 run's case left Running by a signal becomes Interrupted, a killed run's
 * stays Running), the same tables as a new file, and a v2 file read without upgrading. */
#include "store_test.h"

TestSuite(store_v3, .init = st_setup, .fini = st_teardown);

/* A results store as schema v2 wrote it (reports/store.c at ba65014, its v1 and v2 steps): an
 * interrupted run (ended, its last case left Running), a killed run (never ended, its case
 * Running) and a finished one with a Warn. */
static const char v2_file[] =
  "CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,"
  " ended_at TEXT, kind TEXT NOT NULL, driver_name TEXT, driver_version TEXT, driver_path TEXT, backend TEXT,"
  " device TEXT, config TEXT, seed INTEGER, shard_index INTEGER NOT NULL DEFAULT 0,"
  " shard_count INTEGER NOT NULL DEFAULT 1, host TEXT NOT NULL, revision TEXT NOT NULL, cases INTEGER,"
  " passed INTEGER, failed INTEGER, crashed INTEGER, timed_out INTEGER, unexpected INTEGER,"
  " interrupted INTEGER NOT NULL DEFAULT 0 CHECK (interrupted IN (0, 1))) STRICT;"
  "CREATE TABLE \"cases\" (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
  " name TEXT NOT NULL, path TEXT, status TEXT NOT NULL DEFAULT 'Running' CHECK (status IN ('Pass', 'Fail',"
  " 'Crash', 'Timeout', 'NotSupported', 'ExpectedFail', 'UnexpectedPass', 'Flake', 'TraceError', 'Warn',"
  " 'Running')), started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL, line INTEGER, message TEXT,"
  " expected TEXT, actual TEXT, event TEXT, rule TEXT, driver_message TEXT, advisory TEXT,"
  " details TEXT CHECK (details IS NULL OR json_valid(details))) STRICT;"
  "CREATE INDEX cases_by_run ON cases(run_id, name, status);"
  "CREATE TABLE fuzz_campaigns (run_id INTEGER PRIMARY KEY REFERENCES runs(id), target TEXT NOT NULL,"
  " jobs INTEGER NOT NULL, planned_s REAL, out_dir TEXT, resumed INTEGER NOT NULL DEFAULT 0"
  " CHECK (resumed IN (0, 1))) STRICT;"
  "CREATE TABLE fuzz_stats (run_id INTEGER NOT NULL REFERENCES runs(id), instance TEXT NOT NULL,"
  " t_s REAL NOT NULL, execs INTEGER, execs_per_sec REAL, edges INTEGER, corpus INTEGER, crashes INTEGER,"
  " hangs INTEGER, stability REAL, rss_kb INTEGER, PRIMARY KEY (run_id, instance, t_s)) STRICT;"
  "CREATE TABLE fuzz_findings (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
  " target TEXT NOT NULL, signature TEXT NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('crash', 'hang',"
  " 'oracle')), message TEXT, count INTEGER NOT NULL, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL,"
  " replays INTEGER, reproduced INTEGER, reproducer TEXT, minimized TEXT, trace TEXT,"
  " UNIQUE (run_id, signature)) STRICT;"
  "INSERT INTO runs (id, uuid, started_at, ended_at, kind, host, revision, cases, passed, failed, crashed,"
  " timed_out, unexpected, interrupted) VALUES"
  " (1, '0badc0de-0000-4000-8000-000000000001', '2026-01-02T03:04:05.000Z', '2026-01-02T03:04:15.000Z',"
  "  'replay', 'h', 'r1', 1, 1, 0, 0, 0, 0, 1),"
  " (2, '0badc0de-0000-4000-8000-000000000002', '2026-01-03T03:04:05.000Z', NULL, 'replay', 'h', 'r1',"
  "  NULL, NULL, NULL, NULL, NULL, NULL, 0),"
  " (3, '0badc0de-0000-4000-8000-000000000003', '2026-01-04T03:04:05.000Z', '2026-01-04T03:04:09.000Z',"
  "  'replay', 'h', 'r1', 1, 0, 0, 0, 0, 0, 0);"
  "INSERT INTO cases (id, run_id, name, path, status, started_at, ended_at, duration_s, event) VALUES"
  " (1, 1, 'a/done', 'a.jsonl', 'Pass', '2026-01-02T03:04:06.000Z', '2026-01-02T03:04:07.000Z', 1.0, NULL),"
  " (2, 1, 'a/stopped', 'b.jsonl', 'Running', '2026-01-02T03:04:08.000Z', NULL, NULL, NULL),"
  " (3, 2, 'a/killed', 'b.jsonl', 'Running', '2026-01-03T03:04:08.000Z', NULL, NULL, NULL),"
  " (4, 3, 'a/warned', 'c.jsonl', 'Warn', '2026-01-04T03:04:06.000Z', '2026-01-04T03:04:07.000Z', 1.0,"
  "  'execute');"
  "PRAGMA user_version = 2;";

static void make_v2(const char *p) {
  sqlite3 *db = st_raw_create(p);
  st_exec(db, v2_file);
  sqlite3_close(db);
}

Test(store_v3, a_v2_file_is_upgraded_in_place_once_and_its_stopped_case_becomes_interrupted) {
  const char *p = st_path(0, "old.db");
  make_v2(p);
  mdc_store *s = st_open(p);
  cr_expect_eq(mdc_store_version(s), MDC_STORE_SCHEMA_VERSION);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), MDC_STORE_SCHEMA_VERSION);
  cr_expect_str_eq(st_text(p, "SELECT group_concat(name || ':' || status, ' ') FROM (SELECT * FROM cases ORDER BY id)"),
                   "a/done:Pass a/stopped:Interrupted a/killed:Running a/warned:Warn",
                   "the interrupted run's case is Interrupted, the killed run's stays Running");
  cr_expect_str_eq(st_text(p, "SELECT ended_at FROM cases WHERE id = 2"), "2026-01-02T03:04:15.000Z",
                   "it ended when its run did");
  cr_expect_str_eq(st_text(p, "SELECT event FROM cases WHERE id = 4"), "execute", "columns kept");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'cases_by_run'"), 1, "the index is back");
  /* Opened again: nothing changes, and the rebuilt table takes Interrupted from a new run. */
  s = st_open(p);
  int64_t run = st_run(s, "replay", 2, "Pass", 1);
  mdc_run_summary sum = {.cases = 2, .passed = 1, .interrupted = 1};
  cr_assert_eq(mdc_store_run_finish(s, run, &sum), 0, "%s", mdc_store_error(s));
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM runs"), 4);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Interrupted'"), 2);
  /* A new file and an upgraded one have the same tables and columns. */
  const char *q = st_path(1, "new.db");
  mdc_store_close(st_open(q));
  static const char cols[] = "SELECT group_concat(m.name || '.' || c.name || ':' || c.type, ',') FROM "
                             "sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' ORDER BY 1";
  char upgraded[4096];
  snprintf(upgraded, sizeof upgraded, "%s", st_text(p, cols));
  cr_expect_str_eq(st_text(q, cols), upgraded);
}

Test(store_v3, a_v2_file_read_without_writing_is_left_at_v2) {
  const char *p = st_path(0, "old.db");
  make_v2(p);
  char err[1024];
  mdc_store *s = NULL;
  cr_assert_eq(mdc_store_open_read(p, &s, err, sizeof err), 0, "%s", err);
  cr_expect_eq(mdc_store_version(s), 2);
  uint32_t counts[MDC_CS_COUNT] = {0};
  cr_assert_eq(mdc_store_run_counts(s, 1, counts), 0, "%s", mdc_store_error(s));
  cr_expect_eq(counts[MDC_CS_RUNNING], 1, "read as v2 wrote it");
  cr_expect_eq(counts[MDC_CS_INTERRUPTED], 0);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 2, "untouched");
}

Test(store_v3, a_killed_run_keeps_its_running_case_and_only_run_finish_interrupts) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t a = st_run(s, "replay", 2, "Pass", 1), b = st_run(s, "replay", 2, "Pass", 1);
  mdc_run_summary sum = {.cases = 2, .passed = 1, .interrupted = 0};
  cr_assert_eq(mdc_store_run_finish(s, a, &sum), 0, "%s", mdc_store_error(s));
  mdc_store_close(s);
  (void)b;   /* never finished: killed */
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Running'"), 2,
               "a run that ended normally or never ended keeps what was Running");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Interrupted'"), 0);
}
