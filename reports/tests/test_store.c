/* test_store.c - the store's API: schema and WAL on open, run rows (uuid, host, revision, seed,
 * shards), case rows committed before the case runs and completed after, queries, and misuse. */
#include "store_test.h"

#include <ctype.h>
#include <inttypes.h>

TestSuite(store, .init = st_setup, .fini = st_teardown);

static int is_uuid_v4(const char *u) {
  if (strlen(u) != 36) return 0;
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (u[i] != '-') return 0;
    } else if (!isxdigit((unsigned char)u[i]) || isupper((unsigned char)u[i])) {
      return 0;
    }
  }
  return u[14] == '4' && strchr("89ab", u[19]) != NULL;
}

/* YYYY-MM-DDTHH:MM:SS.sssZ */
static int is_iso_utc(const char *t) {
  static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (strlen(t) != sizeof shape - 1) return 0;
  for (size_t i = 0; shape[i]; i++)
    if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i]) return 0;
  return 1;
}

Test(store, new_file_gets_schema_version_wal_and_both_tables) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), MDC_STORE_SCHEMA_VERSION);
  cr_expect_str_eq(st_text(p, "PRAGMA journal_mode"), "wal");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('runs', 'cases')"), 2);
  mdc_store_close(s);
  /* Reopening an existing store neither recreates nor changes it. */
  s = st_open(p);
  int64_t run = st_run(s, "replay", 1, "Pass", 0);
  mdc_store_close(s);
  s = st_open(p);
  uint32_t n = 0;
  cr_expect_eq(mdc_store_count_cases(s, run, NULL, &n), 0);
  cr_expect_eq(n, 1);
  mdc_store_close(s);
}

Test(store, memory_store_works_end_to_end) {
  mdc_store *s = st_open(":memory:");
  int64_t run = st_run(s, "fuzz", 5, "Fail", 0);
  uint32_t n = 0;
  cr_expect_eq(mdc_store_count_cases(s, run, "Fail", &n), 0);
  cr_expect_eq(n, 5);
  cr_expect_eq(mdc_store_run_end(s, run, 5, 0, 5, 0, 0, 0), 0, "%s", mdc_store_error(s));
  mdc_store_close(s);
}

Test(store, run_row_has_uuid_v4_times_host_revision_and_null_seed) {
  setenv("MDC_REVISION", "abc1234", 1);
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  mdc_run_info ri = {.kind = "replay", .driver_name = "md-reference", .driver_version = "0.1.0",
                     .driver_path = "/x/libmd_driver.so", .backend = "sim", .device = "sim0",
                     .config = "{\"a\":1}", .shard_index = 2, .shard_count = 4};
  int64_t id1, id2;
  char u1[37], u2[37];
  cr_assert_eq(mdc_store_run_begin(s, &ri, &id1, u1), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_run_begin(s, &ri, &id2, u2), 0, "%s", mdc_store_error(s));
  cr_expect(is_uuid_v4(u1), "'%s' is not an RFC 4122 v4 uuid", u1);
  cr_expect(is_uuid_v4(u2), "'%s' is not an RFC 4122 v4 uuid", u2);
  cr_expect_str_neq(u1, u2);
  cr_expect_neq(id1, id2);
  char sql[256], host[256] = "";
  gethostname(host, sizeof host);
  snprintf(sql, sizeof sql, "SELECT uuid FROM runs WHERE id = %" PRId64, id1);
  cr_expect_str_eq(st_text(p, sql), u1);
  snprintf(sql, sizeof sql, "SELECT host FROM runs WHERE id = %" PRId64, id1);
  cr_expect_str_eq(st_text(p, sql), host);
  snprintf(sql, sizeof sql, "SELECT revision FROM runs WHERE id = %" PRId64, id1);
  cr_expect_str_eq(st_text(p, sql), "abc1234");
  snprintf(sql, sizeof sql, "SELECT seed IS NULL FROM runs WHERE id = %" PRId64, id1);
  cr_expect_eq(st_int(p, sql), 1);
  snprintf(sql, sizeof sql, "SELECT ended_at IS NULL AND cases IS NULL FROM runs WHERE id = %" PRId64, id1);
  cr_expect_eq(st_int(p, sql), 1);
  snprintf(sql, sizeof sql, "SELECT shard_index * 10 + shard_count FROM runs WHERE id = %" PRId64, id1);
  cr_expect_eq(st_int(p, sql), 24);
  snprintf(sql, sizeof sql, "SELECT kind || driver_name || driver_version || driver_path || backend || "
           "device || config FROM runs WHERE id = %" PRId64, id1);
  cr_expect_str_eq(st_text(p, sql), "replaymd-reference0.1.0/x/libmd_driver.sosimsim0{\"a\":1}");
  snprintf(sql, sizeof sql, "SELECT started_at FROM runs WHERE id = %" PRId64, id1);
  cr_expect(is_iso_utc(st_text(p, sql)), "started_at '%s'", st_text(p, sql));
  mdc_store_close(s);
}

Test(store, given_host_and_revision_win_and_unset_revision_is_unknown) {
  unsetenv("MDC_REVISION");
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  mdc_run_info ri = {.kind = "fuzz"};  /* shard_count 0: taken as 1 */
  int64_t a, b;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &a, NULL), 0, "%s", mdc_store_error(s));
  ri.host = "builder-7";
  ri.revision = "v0.1.0-3-gdeadbee";
  cr_assert_eq(mdc_store_run_begin(s, &ri, &b, NULL), 0, "%s", mdc_store_error(s));
  mdc_store_close(s);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT revision || '/' || shard_index || '/' || shard_count FROM runs WHERE id = %" PRId64, a);
  cr_expect_str_eq(st_text(p, sql), "unknown/0/1");
  snprintf(sql, sizeof sql, "SELECT host || ' ' || revision FROM runs WHERE id = %" PRId64, b);
  cr_expect_str_eq(st_text(p, sql), "builder-7 v0.1.0-3-gdeadbee");
}

Test(store, seed_keeps_all_64_bits) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  mdc_run_info ri = {.kind = "fuzz", .seed = UINT64_MAX, .has_seed = 1, .shard_count = 1};
  int64_t a;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &a, NULL), 0, "%s", mdc_store_error(s));
  ri.seed = 0;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &a, NULL), 0, "%s", mdc_store_error(s));
  mdc_store_close(s);
  cr_expect_str_eq(st_text(p, "SELECT printf('%llu', seed) FROM runs ORDER BY id LIMIT 1"), "18446744073709551615");
  cr_expect_str_eq(st_text(p, "SELECT quote(seed) FROM runs ORDER BY id DESC LIMIT 1"), "0");
}

Test(store, run_end_sets_ended_at_and_summary_counts) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "replay", 0, "Pass", 0);
  cr_assert_eq(mdc_store_run_end(s, run, 10, 5, 2, 1, 1, 1), 0, "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_run_end(s, run + 100, 1, 1, 0, 0, 0, 0), 0);
  cr_expect(strstr(mdc_store_error(s), "no such run"), "%s", mdc_store_error(s));
  mdc_store_close(s);
  cr_expect_str_eq(st_text(p, "SELECT cases||passed||failed||crashed||timed_out||unexpected FROM runs"), "1052111");
  cr_expect(is_iso_utc(st_text(p, "SELECT ended_at FROM runs")));
}

Test(store, case_begin_is_committed_and_visible_before_the_case_ends) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "replay", 0, "Pass", 0), c;
  cr_assert_eq(mdc_store_case_begin(s, run, "domains/copy", "traces/copy.jsonl", &c), 0, "%s", mdc_store_error(s));
  /* Another connection sees it while this one is still open: it is committed, not buffered. */
  cr_expect_str_eq(st_text(p, "SELECT name || ' ' || path || ' ' || status FROM cases"),
                   "domains/copy traces/copy.jsonl Running");
  cr_assert_eq(mdc_store_case_end(s, c, "Fail", 0.25, 12, "copy_from: size mismatch", "OK", "INVALID_ARGUMENT"), 0,
               "%s", mdc_store_error(s));
  cr_expect_str_eq(st_text(p, "SELECT status || ' ' || duration_s || ' ' || line || ' ' || message || ' ' || "
                              "expected || ' ' || actual FROM cases"),
                   "Fail 0.25 12 copy_from: size mismatch OK INVALID_ARGUMENT");
  mdc_store_close(s);
}

Test(store, case_get_returns_every_column) {
  mdc_store *s = st_open(":memory:");
  int64_t run = st_run(s, "replay", 0, "Pass", 0), c;
  cr_assert_eq(mdc_store_case_begin(s, run, "a/b", NULL, &c), 0);
  mdc_case_row r;
  cr_assert_eq(mdc_store_case_get(s, c, &r), 0, "%s", mdc_store_error(s));
  cr_expect_eq(r.id, c);
  cr_expect_eq(r.run_id, run);
  cr_expect_str_eq(r.name, "a/b");
  cr_expect_null(r.path);
  cr_expect_str_eq(r.status, "Running");
  cr_expect(is_iso_utc(r.started_at));
  cr_expect_null(r.ended_at);
  cr_assert_eq(mdc_store_case_end(s, c, "ExpectedFail", 1.5, 0, "known bug #12", NULL, NULL), 0);
  cr_assert_eq(mdc_store_case_get(s, c, &r), 0, "%s", mdc_store_error(s));
  cr_expect_str_eq(r.status, "ExpectedFail");
  cr_expect_not_null(r.ended_at);
  cr_expect_eq(r.duration_s, 1.5);
  cr_expect_eq(r.line, 0);
  cr_expect_str_eq(r.message, "known bug #12");
  cr_expect_null(r.expected);
  cr_expect_null(r.actual);
  cr_expect_neq(mdc_store_case_get(s, c + 1, &r), 0);
  cr_expect(strstr(mdc_store_error(s), "no such case"), "%s", mdc_store_error(s));
  mdc_store_close(s);
}

Test(store, counts_by_status_and_lists_runs) {
  mdc_store *s = st_open(":memory:");
  int64_t a = st_run(s, "replay", 3, "Pass", 0);
  int64_t b = st_run(s, "fuzz", 4, "Crash", 1);
  uint32_t n = 99;
  cr_expect_eq(mdc_store_count_cases(s, a, "Pass", &n), 0);
  cr_expect_eq(n, 3);
  cr_expect_eq(mdc_store_count_cases(s, b, "Crash", &n), 0);
  cr_expect_eq(n, 3);
  cr_expect_eq(mdc_store_count_cases(s, b, "Running", &n), 0);
  cr_expect_eq(n, 1);
  cr_expect_eq(mdc_store_count_cases(s, 0, NULL, &n), 0);
  cr_expect_eq(n, 7);
  cr_expect_eq(mdc_store_count_cases(s, a, "Crash", &n), 0);
  cr_expect_eq(n, 0);
  int64_t ids[1];
  size_t k = 0;
  cr_expect_eq(mdc_store_list_runs(s, ids, 1, &k), 0);
  cr_expect_eq(k, 2, "the total, beyond cap");
  cr_expect_eq(ids[0], a);
  mdc_store_close(s);
}

Test(store, misuse_is_refused_with_a_message_and_changes_nothing) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  int64_t run = st_run(s, "replay", 0, "Pass", 0), c, x;
  cr_expect_neq(mdc_store_case_begin(s, run + 7, "orphan", NULL, &x), 0);
  cr_expect(strstr(mdc_store_error(s), "no such run"), "%s", mdc_store_error(s));
  cr_expect(strstr(mdc_store_error(s), p), "message names the file: %s", mdc_store_error(s));
  cr_assert_eq(mdc_store_case_begin(s, run, "c", NULL, &c), 0);
  cr_expect_neq(mdc_store_case_end(s, c, "Passed", 0, 0, NULL, NULL, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "unknown status 'Passed'"), "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_case_end(s, c, "Running", 0, 0, NULL, NULL, NULL), 0, "Running is not an end");
  cr_expect_neq(mdc_store_case_end(s, c + 1, "Pass", 0, 0, NULL, NULL, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "no such case"), "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_case_end(s, c, "Pass", 0, 0, NULL, NULL, NULL), 0, "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_case_end(s, c, "Fail", 0, 0, NULL, NULL, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "already completed as Pass"), "%s", mdc_store_error(s));
  mdc_run_info none = {0};
  cr_expect_neq(mdc_store_run_begin(s, &none, &x, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "kind"), "%s", mdc_store_error(s));
  mdc_run_info bad_shard = {.kind = "replay", .shard_index = 4, .shard_count = 4};
  cr_expect_neq(mdc_store_run_begin(s, &bad_shard, &x, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "shard 4/4"), "%s", mdc_store_error(s));
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "SELECT count(*) FROM runs"), 1);
  cr_expect_str_eq(st_text(p, "SELECT group_concat(name || ':' || status) FROM cases"), "c:Pass");
}

Test(store, every_status_of_the_header_is_accepted) {
  static const char *const all[] = {"Pass", "Fail", "Crash", "Timeout", "NotSupported",
                                    "ExpectedFail", "UnexpectedPass", "Flake", "TraceError"};
  mdc_store *s = st_open(":memory:");
  int64_t run = st_run(s, "replay", 0, "Pass", 0), c;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    cr_assert_eq(mdc_store_case_begin(s, run, all[i], NULL, &c), 0);
    cr_expect_eq(mdc_store_case_end(s, c, all[i], 0, 0, NULL, NULL, NULL), 0, "%s: %s", all[i], mdc_store_error(s));
    uint32_t n = 0;
    cr_expect_eq(mdc_store_count_cases(s, run, all[i], &n), 0);
    cr_expect_eq(n, 1, "%s", all[i]);
  }
  mdc_store_close(s);
}
