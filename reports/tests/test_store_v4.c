/* test_store_v4.c - schema v4: the driver's identity, the trace selection, shuffle seed and group
 * size of a run; a case's cause signature, stack, reduced reproducer and the trace that preceded
 * it; the statuses Skipped and OrderDependent; the mutate_results table. The upgrade of a v3 file
 * (in place, once, every row kept, new columns NULL), the same tables as a new file, a v3 file
 * read without upgrading, the new columns written, read back and merged. */
#include "store_test.h"

TestSuite(store_v4, .init = st_setup, .fini = st_teardown);

/* A results store as schema v3 wrote it (reports/store_schema.c at 2487402): an interrupted run,
 * a killed run and a finished one with a Warn. */
static const char v3_file[] =
  "CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,"
  " ended_at TEXT, kind TEXT NOT NULL, driver_name TEXT, driver_version TEXT, driver_path TEXT, backend TEXT,"
  " device TEXT, config TEXT, seed INTEGER, shard_index INTEGER NOT NULL DEFAULT 0,"
  " shard_count INTEGER NOT NULL DEFAULT 1, host TEXT NOT NULL, revision TEXT NOT NULL, cases INTEGER,"
  " passed INTEGER, failed INTEGER, crashed INTEGER, timed_out INTEGER, unexpected INTEGER,"
  " interrupted INTEGER NOT NULL DEFAULT 0 CHECK (interrupted IN (0, 1))) STRICT;"
  "CREATE TABLE \"cases\" (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
  " name TEXT NOT NULL, path TEXT, status TEXT NOT NULL DEFAULT 'Running' CHECK (status IN ('Pass', 'Fail',"
  " 'Crash', 'Timeout', 'NotSupported', 'ExpectedFail', 'UnexpectedPass', 'Flake', 'TraceError', 'Warn',"
  " 'Running', 'Interrupted')), started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL, line INTEGER, message TEXT,"
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
  " (2, 1, 'a/stopped', 'b.jsonl', 'Interrupted', '2026-01-02T03:04:08.000Z', '2026-01-02T03:04:15.000Z', NULL, NULL),"
  " (3, 2, 'a/killed', 'b.jsonl', 'Running', '2026-01-03T03:04:08.000Z', NULL, NULL, NULL),"
  " (4, 3, 'a/warned', 'c.jsonl', 'Warn', '2026-01-04T03:04:06.000Z', '2026-01-04T03:04:07.000Z', 1.0,"
  "  'execute');"
  "PRAGMA user_version = 3;";

static void make_v3(const char *p) {
  sqlite3 *db = st_raw_create(p);
  st_exec(db, v3_file);
  sqlite3_close(db);
}

Test(store_v4, a_v3_file_is_upgraded_in_place_once_every_row_kept) {
  const char *p = st_path(0, "old.db");
  make_v3(p);
  mdc_store *s = st_open(p);
  cr_expect_eq(mdc_store_version(s), 4);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 4);
  cr_expect_str_eq(st_text(p, "SELECT group_concat(name || ':' || status, ' ') FROM (SELECT * FROM cases ORDER BY id)"),
                   "a/done:Pass a/stopped:Interrupted a/killed:Running a/warned:Warn");
  cr_expect_str_eq(st_text(p, "SELECT event FROM cases WHERE id = 4"), "execute", "columns kept");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE signature IS NULL AND stack IS NULL AND "
                         "reduced IS NULL AND preceded_by IS NULL"), 4, "the new case columns are NULL");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM runs WHERE driver_build_id IS NULL AND driver_sha256 IS NULL "
                         "AND selection IS NULL AND shuffle_seed IS NULL AND group_size IS NULL"), 3);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name IN ('cases_by_run', "
                         "'cases_by_signature', 'mutate_results')"), 3);
  /* Opened again: nothing changes. */
  mdc_store_close(st_open(p));
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases"), 4);
  /* A new file and an upgraded one have the same tables and columns. */
  const char *q = st_path(1, "new.db");
  mdc_store_close(st_open(q));
  static const char cols[] = "SELECT group_concat(m.name || '.' || c.name || ':' || c.type, ',') FROM "
                             "sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' ORDER BY 1";
  char upgraded[8192];
  snprintf(upgraded, sizeof upgraded, "%s", st_text(p, cols));
  cr_expect_str_eq(st_text(q, cols), upgraded);
}

Test(store_v4, a_v3_file_read_without_writing_is_left_at_v3_and_reads_the_new_fields_as_unknown) {
  const char *p = st_path(0, "old.db");
  make_v3(p);
  char err[1024];
  mdc_store *s = NULL;
  cr_assert_eq(mdc_store_open_read(p, &s, err, sizeof err), 0, "%s", err);
  cr_expect_eq(mdc_store_version(s), 3);
  mdc_run_row r;
  cr_assert_eq(mdc_store_run_get(s, 1, &r), 0, "%s", mdc_store_error(s));
  cr_expect_null(r.driver_build_id);
  cr_expect_null(r.selection);
  cr_expect_eq(r.has_shuffle_seed, 0);
  cr_expect_eq(r.group_size, 0);
  cr_expect(r.interrupted, "the older columns still read");
  mdc_store_run_row_free(&r);
  mdc_case_row c;
  cr_assert_eq(mdc_store_case_get(s, 4, &c), 0, "%s", mdc_store_error(s));
  cr_expect_str_eq(c.event, "execute");
  cr_expect_null(c.signature);
  cr_expect_null(c.preceded_by);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 3, "untouched");
}

/* A run with the v4 fields and two cases: an OrderDependent one with a signature and the trace
 * before it, and a Skipped one. */
static int64_t v4_run(mdc_store *s) {
  mdc_run_info ri = {.kind = "replay", .driver_name = "vendor", .driver_version = "2.1",
                     .driver_build_id = "5f0c2b7e9d", .driver_sha256 = "ab12", .selection = "sel-1",
                     .selection_n = 2, .shuffle_seed = UINT64_MAX - 1, .has_shuffle_seed = 1,
                     .group_size = 64};
  int64_t run, a, b;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_case_begin(s, run, "t/after", "a.jsonl", &a), 0, "%s", mdc_store_error(s));
  mdc_case_result od = {.status = "OrderDependent", .message = "passes alone", .signature = "Fail|execute|NONE",
                        .stack = "#0 f (x.c:3)", .reduced = "r.jsonl", .preceded_by = "t/before"};
  cr_assert_eq(mdc_store_case_finish(s, a, &od), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_case_begin(s, run, "t/skipped", "b.jsonl", &b), 0, "%s", mdc_store_error(s));
  mdc_case_result sk = {.status = "Skipped", .message = "listed in skips.txt"};
  cr_assert_eq(mdc_store_case_finish(s, b, &sk), 0, "%s", mdc_store_error(s));
  mdc_run_summary sum = {.cases = 2, .failed = 1, .unexpected = 1};
  cr_assert_eq(mdc_store_run_finish(s, run, &sum), 0, "%s", mdc_store_error(s));
  return run;
}

static void expect_v4_run(mdc_store *s, int64_t run) {
  mdc_run_row r;
  cr_assert_eq(mdc_store_run_get(s, run, &r), 0, "%s", mdc_store_error(s));
  cr_expect_str_eq(r.driver_build_id, "5f0c2b7e9d");
  cr_expect_str_eq(r.driver_sha256, "ab12");
  cr_expect_str_eq(r.selection, "sel-1");
  cr_expect_eq(r.selection_n, 2);
  cr_expect(r.has_shuffle_seed && r.shuffle_seed == UINT64_MAX - 1, "the seed keeps its 64 bits");
  cr_expect_eq(r.group_size, 64);
  mdc_store_run_row_free(&r);
  uint32_t counts[MDC_CS_COUNT] = {0};
  cr_assert_eq(mdc_store_run_counts(s, run, counts), 0, "%s", mdc_store_error(s));
  cr_expect_eq(counts[MDC_CS_ORDER_DEPENDENT], 1);
  cr_expect_eq(counts[MDC_CS_SKIPPED], 1);
  cr_expect_eq(mdc_store_unexpected_of(counts), 1, "OrderDependent is unexpected, Skipped is not");
  mdc_case_query q = {.run_id = run, .order = MDC_CASES_BY_NAME};
  mdc_case_iter *it;
  cr_assert_eq(mdc_store_cases_open(s, &q, &it), 0, "%s", mdc_store_error(s));
  mdc_case_row c;
  cr_assert_eq(mdc_store_cases_next(it, &c), 1);
  cr_expect_str_eq(c.name, "t/after");
  cr_expect_str_eq(c.signature, "Fail|execute|NONE");
  cr_expect_str_eq(c.stack, "#0 f (x.c:3)");
  cr_expect_str_eq(c.reduced, "r.jsonl");
  cr_expect_str_eq(c.preceded_by, "t/before");
  cr_assert_eq(mdc_store_cases_next(it, &c), 1);
  cr_expect_str_eq(c.status, "Skipped");
  cr_expect_null(c.signature);
  mdc_store_cases_close(it);
}

Test(store_v4, the_new_columns_and_statuses_are_written_read_back_and_merged) {
  const char *p = st_path(0, "a.db"), *out = st_path(1, "m.db");
  mdc_store *s = st_open(p);
  int64_t run = v4_run(s);
  expect_v4_run(s, run);
  mdc_store_close(s);
  /* Merged, with a v3 file beside it: the v4 fields travel, the v3 runs get them unknown. */
  const char *old = st_path(2, "old.db");
  make_v3(old);
  const char *in[] = {p, old};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "merging twice changes nothing: %s", err);
  cr_expect_eq(st_int(out, "SELECT count(*) FROM runs"), 4);
  cr_expect_eq(st_int(out, "SELECT count(*) FROM runs WHERE driver_build_id IS NOT NULL"), 1);
  mdc_store *m = st_open(out);
  int64_t merged = st_int(out, "SELECT id FROM runs WHERE driver_build_id = '5f0c2b7e9d'");
  expect_v4_run(m, merged);
  mdc_store_close(m);
}

Test(store_v4, a_status_that_is_not_one_is_still_refused) {
  const char *p = st_path(0, "a.db");
  mdc_store *s = st_open(p);
  int64_t run, c;
  mdc_run_info ri = {.kind = "replay"};
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_case_begin(s, run, "x", NULL, &c), 0, "%s", mdc_store_error(s));
  mdc_case_result r = {.status = "Order-Dependent"};
  cr_expect_eq(mdc_store_case_finish(s, c, &r), -1);
  cr_expect(strstr(mdc_store_error(s), "OrderDependent") != NULL, "the message lists the statuses: %s",
            mdc_store_error(s));
  mdc_store_close(s);
}
