/* test_store_v2.c - schema v2: the upgrade of a v1 file (in place, once, nothing lost), the new
 * columns (interrupted, event, rule, driver_message, advisory, details), the fuzz tables and
 * their upserts, batches, and merge of all of it (idempotent, v1 inputs read as they are). */
#include "store_test.h"

#include <inttypes.h>
#include <math.h>

TestSuite(store_v2, .init = st_setup, .fini = st_teardown);

/* A results store as schema v1 wrote it (reports/store.c at e81a6bb): files like this exist in
 * the wild and must keep opening. */
static const char v1_schema[] =
  "CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,"
  " ended_at TEXT, kind TEXT NOT NULL, driver_name TEXT, driver_version TEXT, driver_path TEXT,"
  " backend TEXT, device TEXT, config TEXT, seed INTEGER, shard_index INTEGER NOT NULL DEFAULT 0,"
  " shard_count INTEGER NOT NULL DEFAULT 1, host TEXT NOT NULL, revision TEXT NOT NULL,"
  " cases INTEGER, passed INTEGER, failed INTEGER, crashed INTEGER, timed_out INTEGER,"
  " unexpected INTEGER) STRICT;"
  "CREATE TABLE cases (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
  " name TEXT NOT NULL, path TEXT, status TEXT NOT NULL DEFAULT 'Running' CHECK (status IN"
  " ('Pass', 'Fail', 'Crash', 'Timeout', 'NotSupported', 'ExpectedFail', 'UnexpectedPass',"
  " 'Flake', 'TraceError', 'Running')), started_at TEXT NOT NULL, ended_at TEXT,"
  " duration_s REAL, line INTEGER, message TEXT, expected TEXT, actual TEXT) STRICT;"
  "CREATE INDEX cases_by_run ON cases(run_id, name);"
  "INSERT INTO runs VALUES (1, '0badc0de-0000-4000-8000-000000000001', '2026-01-02T03:04:05.000Z',"
  " '2026-01-02T03:04:15.000Z', 'replay', 'old-driver', '0.0.9', NULL, 'sim', 'sim0', NULL, 7, 0, 1,"
  " 'h', 'r1', 2, 1, 1, 0, 0, 1);"
  "INSERT INTO cases VALUES (1, 1, 'domains/a', 'a.jsonl', 'Pass', '2026-01-02T03:04:06.000Z',"
  " '2026-01-02T03:04:07.000Z', 0.5, NULL, NULL, NULL, NULL);"
  "INSERT INTO cases VALUES (2, 1, 'tokens/b', 'b.jsonl', 'Fail', '2026-01-02T03:04:08.000Z',"
  " '2026-01-02T03:04:09.000Z', 1.5, 12, 'b.jsonl:12: execute: status', 'NONE', 'GENERAL_FAILURE');"
  "PRAGMA user_version = 1;";

static void make_v1(const char *p) {
  sqlite3 *db = st_raw_create(p);
  st_exec(db, v1_schema);
  sqlite3_close(db);
}

Test(store_v2, a_v1_file_is_upgraded_in_place_once_and_keeps_every_row) {
  const char *p = st_path(0, "old.db");
  make_v1(p);
  mdc_store *s = st_open(p);
  cr_expect_eq(mdc_store_version(s), MDC_STORE_SCHEMA_VERSION, "upgraded through every version");
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), MDC_STORE_SCHEMA_VERSION);
  cr_expect_str_eq(st_text(p, "SELECT group_concat(name || ':' || status, ' ') FROM cases"),
                   "domains/a:Pass tokens/b:Fail");
  cr_expect_eq(st_int(p, "SELECT interrupted FROM runs"), 0, "the new column has its default");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE event IS NULL AND details IS NULL"), 2);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name IN "
                         "('fuzz_campaigns', 'fuzz_stats', 'fuzz_findings')"), 3);
  cr_expect_eq(st_int(p, "SELECT seed FROM runs"), 7);
  /* Opening again changes nothing (no second upgrade: ADD COLUMN twice would fail). */
  s = st_open(p);
  int64_t run = st_run(s, "replay", 1, "Pass", 0);
  /* v2's status Warn (a trace that is not must-pass failed): the rebuilt table takes it. */
  int64_t warn_run = st_run(s, "replay", 1, "Warn", 0);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM runs"), 3);
  cr_expect_gt(run, 1);
  cr_expect_gt(warn_run, run);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Warn'"), 1);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'cases_by_run'"), 1, "the index is back");
  /* A new file and an upgraded one have the same tables and columns. */
  const char *q = st_path(1, "new.db");
  mdc_store_close(st_open(q));
  static const char cols[] = "SELECT group_concat(m.name || '.' || c.name || ':' || c.type, ',') FROM "
                             "sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' ORDER BY 1";
  char upgraded[4096];
  snprintf(upgraded, sizeof upgraded, "%s", st_text(p, cols));
  cr_expect_str_eq(st_text(q, cols), upgraded);
}

Test(store_v2, a_v1_file_whose_tables_are_broken_is_refused_not_upgraded) {
  const char *p = st_path(0, "bad.db");
  sqlite3 *db = st_raw_create(p);
  st_exec(db, "CREATE TABLE runs(id INTEGER PRIMARY KEY, uuid TEXT); PRAGMA user_version = 1");
  sqlite3_close(db);
  char err[1024] = "";
  mdc_store *s = NULL;
  cr_expect_eq(mdc_store_open(p, &s, err, sizeof err), -1);
  cr_expect(strstr(err, p) && strstr(err, "corrupt"), "%s", err);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 1, "left at version 1");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'fuzz%'"), 0);
}

Test(store_v2, run_finish_marks_interrupted_and_run_end_does_not) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t a = st_run(s, "replay", 2, "Pass", 1), b = st_run(s, "replay", 1, "Pass", 0);
  mdc_run_summary sum = {.cases = 2, .passed = 1, .interrupted = 1};
  cr_assert_eq(mdc_store_run_finish(s, a, &sum), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_run_end(s, b, 1, 1, 0, 0, 0, 0), 0, "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_run_finish(s, b + 10, &sum), 0);
  cr_expect(strstr(mdc_store_error(s), "no such run"), "%s", mdc_store_error(s));
  mdc_run_row r;
  cr_assert_eq(mdc_store_run_get(s, a, &r), 0, "%s", mdc_store_error(s));
  cr_expect(r.interrupted && r.has_counts && r.ended_at && r.duration_s >= 0);
  cr_expect_eq(r.cases, 2);
  mdc_store_run_row_free(&r);
  mdc_store_close(s);
  cr_expect_str_eq(st_text(p, "SELECT group_concat(interrupted) FROM (SELECT * FROM runs ORDER BY id)"), "1,0");
  /* v3: the interrupted run's case that never ended is Interrupted (with an end time); the
   * finished run has none. */
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Running'"), 0, "no case stays Running");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases WHERE status = 'Interrupted' AND ended_at IS NOT NULL "
                         "AND run_id = (SELECT id FROM runs WHERE interrupted = 1)"), 1, "its case is Interrupted");
}

Test(store_v2, case_finish_writes_every_v2_column_and_refuses_bad_json) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "mutants", 0, "Pass", 0), c;
  cr_assert_eq(mdc_store_case_begin(s, run, "mutants/init_unchecked", "mutants.txt", &c), 0);
  mdc_case_result bad = {.status = "Pass", .details = "{killed_by: [}"};
  cr_expect_neq(mdc_store_case_finish(s, c, &bad), 0);
  cr_expect(strstr(mdc_store_error(s), "not valid JSON"), "%s", mdc_store_error(s));
  cr_expect_str_eq(st_text(p, "SELECT status FROM cases"), "Running", "a refused end changes nothing");
  mdc_case_result r = {.status = "Fail", .duration_s = 2.5, .line = 9, .message = "m",
                       .expected = "NONE", .actual = "INVALID_ARGUMENT", .event = "execute",
                       .rule = "SPEC 4; SPEC 8.5", .driver_message = "token 0x1f: freed",
                       .advisory = "last_error lacks 'freed'",
                       .details = "{\"killed_by\": [\"tokens/forged\"]}"};
  cr_assert_eq(mdc_store_case_finish(s, c, &r), 0, "%s", mdc_store_error(s));
  mdc_case_row row;
  cr_assert_eq(mdc_store_case_get(s, c, &row), 0, "%s", mdc_store_error(s));
  cr_expect_str_eq(row.event, "execute");
  cr_expect_str_eq(row.rule, "SPEC 4; SPEC 8.5");
  cr_expect_str_eq(row.driver_message, "token 0x1f: freed");
  cr_expect_str_eq(row.advisory, "last_error lacks 'freed'");
  cr_expect_str_eq(row.details, "{\"killed_by\": [\"tokens/forged\"]}");
  cr_expect_str_eq(row.actual, "INVALID_ARGUMENT");
  cr_expect_eq(row.line, 9);
  mdc_store_close(s);
  cr_expect_str_eq(st_text(p, "SELECT details ->> '$.killed_by[0]' FROM cases"), "tokens/forged");
}

Test(store_v2, status_names_round_trip) {
  for (int i = 0; i < MDC_CS_COUNT; i++) {
    const char *n = mdc_store_status_name((mdc_case_status)i);
    cr_assert_not_null(n);
    cr_expect_eq(mdc_store_status_parse(n), i, "%s", n);
  }
  cr_expect_null(mdc_store_status_name(MDC_CS_COUNT));
  cr_expect_eq(mdc_store_status_parse("Passed"), -1);
  cr_expect_eq(mdc_store_status_parse(NULL), -1);
  cr_expect_str_eq(mdc_store_status_name(MDC_CS_RUNNING), "Running");
}

Test(store_v2, fuzz_campaign_stats_and_findings_upsert) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "fuzz", 0, "Pass", 0), f1, f2;
  mdc_fuzz_campaign c = {.target = "fuzz_trace", .jobs = 2, .planned_s = 600, .out_dir = "out/fz"};
  cr_assert_eq(mdc_store_fuzz_campaign(s, run, &c), 0, "%s", mdc_store_error(s));
  c.resumed = 1;
  c.planned_s = NAN;
  cr_assert_eq(mdc_store_fuzz_campaign(s, run, &c), 0, "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_fuzz_campaign(s, run + 5, &c), 0);
  cr_expect(strstr(mdc_store_error(s), "no such run"), "%s", mdc_store_error(s));
  mdc_fuzz_stat v[3] = {
    {.instance = "main", .t_s = 0, .execs = 0, .execs_per_sec = 0, .edges = 10, .corpus = 1,
     .crashes = 0, .hangs = 0, .stability = 100, .rss_kb = -1},
    {.instance = "main", .t_s = 60, .execs = 60000, .execs_per_sec = 1000, .edges = 120, .corpus = 30,
     .crashes = 1, .hangs = 0, .stability = 99.5, .rss_kb = 20480},
    {.instance = "s1", .t_s = 60, .execs = 50000, .execs_per_sec = NAN, .edges = 100, .corpus = 25,
     .crashes = 0, .hangs = -1, .stability = NAN, .rss_kb = 19000},
  };
  cr_assert_eq(mdc_store_fuzz_stats(s, run, v, 3), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_fuzz_stats(s, run, v, 3), 0, "the same samples again: %s", mdc_store_error(s));
  mdc_fuzz_stat broken[2] = {v[0], {.instance = NULL, .t_s = 5}};
  cr_expect_neq(mdc_store_fuzz_stats(s, run, broken, 2), 0);
  mdc_fuzz_stat orphan = v[0];
  orphan.t_s = 999;
  mdc_fuzz_stat two[2] = {orphan, v[0]};
  cr_expect_neq(mdc_store_fuzz_stats(s, run + 9, two, 2), 0, "no such run: all or nothing");
  mdc_fuzz_finding f = {.target = "fuzz_trace", .signature = "asan:heap-use-after-free@buffer.c:120",
                        .kind = "crash", .message = "heap-use-after-free", .seen_at = "2026-11-03T10:00:00.000Z",
                        .replays = -1, .reproduced = -1, .reproducer = "out/fz/crashes/id:000000"};
  cr_assert_eq(mdc_store_fuzz_finding(s, run, &f, &f1), 0, "%s", mdc_store_error(s));
  f.seen_at = "2026-11-03T11:00:00.000Z";
  f.count = 3;
  f.message = NULL;
  f.replays = 10;
  f.reproduced = 9;
  f.trace = "out/fz/traces/uaf.jsonl";
  cr_assert_eq(mdc_store_fuzz_finding(s, run, &f, &f2), 0, "%s", mdc_store_error(s));
  cr_expect_eq(f1, f2, "the same finding");
  f.seen_at = "2026-11-03T09:00:00.000Z"; /* seen earlier by another instance */
  f.count = 0;
  cr_assert_eq(mdc_store_fuzz_finding(s, run, &f, NULL), 0, "%s", mdc_store_error(s));
  mdc_fuzz_finding hang = {.target = "fuzz_trace", .signature = "hang:wait_event", .kind = "hang"};
  cr_assert_eq(mdc_store_fuzz_finding(s, run, &hang, NULL), 0, "%s", mdc_store_error(s));
  hang.kind = "panic";
  cr_expect_neq(mdc_store_fuzz_finding(s, run, &hang, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "kind 'panic'"), "%s", mdc_store_error(s));
  mdc_store_close(s);
  cr_expect_str_eq(st_text(p, "SELECT target || jobs || ifnull(planned_s, '-') || out_dir || resumed FROM fuzz_campaigns"),
                   "fuzz_trace2-out/fz1");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM fuzz_stats"), 3);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM fuzz_stats WHERE rss_kb IS NULL OR execs_per_sec IS NULL OR hangs IS NULL"), 2);
  cr_expect_str_eq(st_text(p, "SELECT count || ' ' || first_seen || ' ' || last_seen || ' ' || message || ' ' || "
                              "replays || '/' || reproduced || ' ' || reproducer || ' ' || trace FROM fuzz_findings "
                              "WHERE kind = 'crash'"),
                   "5 2026-11-03T09:00:00.000Z 2026-11-03T11:00:00.000Z heap-use-after-free 10/9 "
                   "out/fz/crashes/id:000000 out/fz/traces/uaf.jsonl");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM fuzz_findings"), 2);
}

static int collect_stat(void *ctx, const mdc_fuzz_stat *v) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 512 - n, "%s@%g:%" PRId64 "/%g;", v->instance, v->t_s, v->rss_kb, v->execs_per_sec);
  return 0;
}

static int collect_finding(void *ctx, const mdc_fuzz_finding_row *f) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 512 - n, "%s x%u %" PRId64 ";", f->signature, f->count, f->replays);
  return 0;
}

static int collect_campaign(void *ctx, const mdc_fuzz_campaign_row *c) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 512 - n, "%s/%u/%s;", c->target, c->jobs, isnan(c->planned_s) ? "-" : "p");
  return 0;
}

Test(store_v2, fuzz_tables_read_back_with_nulls_as_unmeasured) {
  mdc_store *s = st_open(":memory:");
  int64_t a = st_run(s, "fuzz", 0, "Pass", 0), b = st_run(s, "fuzz", 0, "Pass", 0);
  mdc_fuzz_campaign c = {.target = "t_a", .jobs = 1, .planned_s = -1};
  cr_assert_eq(mdc_store_fuzz_campaign(s, a, &c), 0);
  c.target = "t_b";
  c.jobs = 4;
  c.planned_s = 60;
  cr_assert_eq(mdc_store_fuzz_campaign(s, b, &c), 0);
  mdc_fuzz_stat v[2] = {{.instance = "s1", .t_s = 1, .rss_kb = -1, .execs_per_sec = NAN},
                        {.instance = "main", .t_s = 2, .rss_kb = 5, .execs_per_sec = 3}};
  cr_assert_eq(mdc_store_fuzz_stats(s, b, v, 2), 0);
  mdc_fuzz_finding f = {.target = "t_b", .signature = "one", .kind = "oracle", .replays = -1, .reproduced = -1};
  cr_assert_eq(mdc_store_fuzz_finding(s, b, &f, NULL), 0);
  f.signature = "two";
  f.count = 4;
  f.replays = 3;
  cr_assert_eq(mdc_store_fuzz_finding(s, b, &f, NULL), 0);
  char buf[512] = "";
  cr_assert_eq(mdc_store_fuzz_campaigns_each(s, 0, collect_campaign, buf), 0);
  cr_expect_str_eq(buf, "t_a/1/-;t_b/4/p;");
  buf[0] = 0;
  cr_assert_eq(mdc_store_fuzz_campaigns_each(s, 1, collect_campaign, buf), 0);
  cr_expect_str_eq(buf, "t_b/4/p;", "the newest one");
  buf[0] = 0;
  cr_assert_eq(mdc_store_fuzz_stats_each(s, b, collect_stat, buf), 0);
  cr_expect_str_eq(buf, "main@2:5/3;s1@1:-1/nan;");
  buf[0] = 0;
  cr_assert_eq(mdc_store_fuzz_findings_each(s, 0, 0, collect_finding, buf), 0);
  cr_expect_str_eq(buf, "two x4 3;one x1 -1;");
  uint32_t n = 0;
  cr_assert_eq(mdc_store_fuzz_findings_count(s, a, &n), 0);
  cr_expect_eq(n, 0);
  cr_assert_eq(mdc_store_fuzz_findings_count(s, 0, &n), 0);
  cr_expect_eq(n, 2);
  mdc_store_close(s);
}

Test(store_v2, a_batch_commits_together_or_not_at_all) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "replay", 0, "Pass", 0), c;
  cr_assert_eq(mdc_store_batch_begin(s), 0, "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_batch_begin(s), 0, "no nesting");
  for (int i = 0; i < 100; i++) cr_assert_eq(mdc_store_case_begin(s, run, "x/y", NULL, &c), 0);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases"), 0, "not visible before the commit");
  cr_assert_eq(mdc_store_batch_end(s, 1), 0, "%s", mdc_store_error(s));
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases"), 100);
  cr_assert_eq(mdc_store_batch_begin(s), 0);
  cr_assert_eq(mdc_store_case_begin(s, run, "x/z", NULL, &c), 0);
  mdc_fuzz_stat v = {.instance = "main", .t_s = 1};
  cr_expect_neq(mdc_store_fuzz_stats(s, run + 3, &v, 1), 0);
  cr_assert_eq(mdc_store_batch_end(s, 0), 0);
  cr_expect_neq(mdc_store_batch_end(s, 1), 0, "no batch open");
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM cases"), 100, "the rolled-back batch left nothing");
}

/* Each shard: a fuzz run with a campaign, samples and a finding, and a replay run with v2 case
 * columns. */
static void make_fuzz_shard(const char *p, const char *target) {
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "fuzz", 1, "Crash", 0), c;
  mdc_fuzz_campaign camp = {.target = target, .jobs = 2, .planned_s = 30};
  cr_assert_eq(mdc_store_fuzz_campaign(s, run, &camp), 0);
  mdc_fuzz_stat v[2] = {{.instance = "main", .t_s = 0, .execs = 1}, {.instance = "main", .t_s = 10, .execs = 900}};
  cr_assert_eq(mdc_store_fuzz_stats(s, run, v, 2), 0);
  mdc_fuzz_finding f = {.target = target, .signature = target, .kind = "crash", .count = 2};
  cr_assert_eq(mdc_store_fuzz_finding(s, run, &f, NULL), 0);
  mdc_run_summary sum = {.cases = 1, .crashed = 1, .interrupted = 1};
  cr_assert_eq(mdc_store_run_finish(s, run, &sum), 0);
  int64_t r2 = st_run(s, "replay", 0, "Pass", 0);
  cr_assert_eq(mdc_store_case_begin(s, r2, "a/b", NULL, &c), 0);
  mdc_case_result r = {.status = "Fail", .event = "copy_to", .rule = "SPEC 3", .details = "{\"k\":1}"};
  cr_assert_eq(mdc_store_case_finish(s, c, &r), 0);
  mdc_store_close(s);
}

Test(store_v2, merge_copies_fuzz_tables_and_v2_columns_and_twice_changes_nothing) {
  const char *a = st_path(0, "a.db"), *b = st_path(1, "b.db"), *out = st_path(2, "out.db");
  make_fuzz_shard(a, "t_a");
  make_fuzz_shard(b, "t_b");
  const char *in[] = {a, b};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  static const char summary[] =
    "SELECT (SELECT count(*) FROM runs) || '/' || (SELECT count(*) FROM cases) || '/' || "
    "(SELECT count(*) FROM fuzz_campaigns) || '/' || (SELECT count(*) FROM fuzz_stats) || '/' || "
    "(SELECT count(*) FROM fuzz_findings) || '/' || (SELECT sum(interrupted) FROM runs)";
  cr_expect_str_eq(st_text(out, summary), "4/4/2/4/2/2");
  char before[256];
  snprintf(before, sizeof before, "%s", st_text(out, summary));
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  cr_expect_str_eq(st_text(out, summary), before, "a second merge adds nothing");
  /* Fuzz rows follow their run to its new id. */
  cr_expect_eq(st_int(out, "SELECT count(*) FROM fuzz_stats s JOIN fuzz_campaigns c ON c.run_id = s.run_id "
                           "JOIN fuzz_findings f ON f.run_id = s.run_id AND f.target = c.target"), 4);
  cr_expect_str_eq(st_text(out, "SELECT group_concat(event || rule || details) FROM cases WHERE status = 'Fail'"),
                   "copy_toSPEC 3{\"k\":1},copy_toSPEC 3{\"k\":1}");
}

Test(store_v2, merge_reads_a_v1_input_as_it_is_and_leaves_it_v1) {
  const char *old = st_path(0, "old.db"), *out = st_path(1, "out.db");
  make_v1(old);
  const char *in[] = {old};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 1, err, sizeof err), 0, "%s", err);
  cr_expect_eq(st_int(old, "PRAGMA user_version"), 1, "the input is not upgraded");
  cr_expect_eq(st_int(out, "SELECT count(*) FROM cases WHERE event IS NULL"), 2);
  cr_expect_str_eq(st_text(out, "SELECT driver_name || interrupted FROM runs"), "old-driver0");
}
