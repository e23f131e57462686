/* test_store_read.c - reading a store for reports: read-only opening (missing, empty, other
 * programs' files, newer and older schemas; nothing is ever written), run lookup by uuid, prefix
 * and latest, runs of one driver and backend over time, case cursors and their orders, counts
 * from case rows, and verdict changes along runs. */
#include "store_test.h"

#include <grp.h>
#include <inttypes.h>
#include <sys/wait.h>

TestSuite(store_read, .init = st_setup, .fini = st_teardown);

static mdc_store *open_read(const char *path) {
  char err[1024];
  mdc_store *s = NULL;
  cr_assert_eq(mdc_store_open_read(path, &s, err, sizeof err), 0, "open_read %s: %s", path, err);
  return s;
}

static void expect_read_refused(const char *path, int rc, const char *problem) {
  char err[1024] = "";
  mdc_store *s = (mdc_store *)&err;
  cr_expect_eq(mdc_store_open_read(path, &s, err, sizeof err), rc, "%s: %s", path, err);
  cr_expect_null(s);
  cr_expect(strstr(err, path), "message does not name the file: %s", err);
  cr_expect(strstr(err, problem), "message does not say '%s': %s", problem, err);
}

Test(store_read, missing_empty_and_foreign_files_are_refused_and_never_created_or_changed) {
  const char *missing = st_path(0, "missing.db");
  expect_read_refused(missing, MDC_STORE_NOT_FOUND, "No such file");
  cr_expect(!st_exists(missing));
  const char *empty = st_path(1, "empty.db");
  FILE *f = fopen(empty, "w");
  fclose(f);
  expect_read_refused(empty, MDC_STORE_NOT_FOUND, "empty file");
  size_t len;
  free(st_slurp(empty, &len));
  cr_expect_eq(len, 0, "still empty");
  const char *junk = st_path(2, "junk.db");
  f = fopen(junk, "w");
  for (int i = 0; i < 300; i++) fputs("not sqlite ", f);
  fclose(f);
  expect_read_refused(junk, -1, "not a SQLite database");
  const char *other = st_path(3, "other.db");
  sqlite3 *db = st_raw_create(other);
  st_exec(db, "CREATE TABLE t(x)");
  sqlite3_close(db);
  expect_read_refused(other, -1, "not a results store");
  const char *future = st_path(4, "future.db");
  mdc_store_close(st_open(future));
  db = st_raw(future);
  st_exec(db, "PRAGMA user_version = 99");
  sqlite3_close(db);
  expect_read_refused(future, -1, "newer than this mdc");
  expect_read_refused(st_dir, -1, "is a directory");
}

Test(store_read, a_read_only_store_refuses_writes_and_leaves_a_v1_file_v1) {
  const char *p = st_path(0, "old.db");
  sqlite3 *db = st_raw_create(p);
  st_exec(db, "CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,"
              " ended_at TEXT, kind TEXT NOT NULL, driver_name TEXT, driver_version TEXT, driver_path TEXT,"
              " backend TEXT, device TEXT, config TEXT, seed INTEGER, shard_index INTEGER NOT NULL DEFAULT 0,"
              " shard_count INTEGER NOT NULL DEFAULT 1, host TEXT NOT NULL, revision TEXT NOT NULL,"
              " cases INTEGER, passed INTEGER, failed INTEGER, crashed INTEGER, timed_out INTEGER,"
              " unexpected INTEGER) STRICT;"
              "CREATE TABLE cases (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, name TEXT NOT NULL,"
              " path TEXT, status TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL,"
              " line INTEGER, message TEXT, expected TEXT, actual TEXT) STRICT;"
              "INSERT INTO runs (id, uuid, started_at, kind, host, revision) VALUES"
              " (1, 'abcdef01-0000-4000-8000-000000000000', '2026-01-01T00:00:00.000Z', 'replay', 'h', 'r');"
              "INSERT INTO cases VALUES (1, 1, 'a/b', NULL, 'Fail', '2026-01-01T00:00:01.000Z', NULL, 1.0,"
              " 3, 'msg', 'x', 'y');"
              "PRAGMA user_version = 1");
  sqlite3_close(db);
  mdc_store *s = open_read(p);
  cr_expect_eq(mdc_store_version(s), 1);
  mdc_run_row r;
  cr_assert_eq(mdc_store_run_find(s, "latest", NULL, &r), 0, "%s", mdc_store_error(s));
  cr_expect_eq(r.interrupted, 0);
  cr_expect_eq(r.has_counts, 0);
  cr_expect_lt(r.duration_s, 0, "never ended");
  mdc_case_query q = {.run_id = r.id};
  mdc_case_iter *it;
  cr_assert_eq(mdc_store_cases_open(s, &q, &it), 0, "%s", mdc_store_error(s));
  mdc_case_row c;
  cr_assert_eq(mdc_store_cases_next(it, &c), 1, "%s", mdc_store_error(s));
  cr_expect_str_eq(c.message, "msg");
  cr_expect_null(c.event);
  cr_expect_null(c.details);
  cr_expect_eq(mdc_store_cases_next(it, &c), 0);
  mdc_store_cases_close(it);
  uint32_t n = 9;
  cr_expect_eq(mdc_store_fuzz_findings_count(s, 0, &n), 0, "no fuzz tables: nothing, not an error");
  cr_expect_eq(n, 0);
  int64_t x;
  mdc_run_info ri = {.kind = "replay"};
  cr_expect_neq(mdc_store_run_begin(s, &ri, &x, NULL), 0);
  cr_expect(strstr(mdc_store_error(s), "read-only"), "%s", mdc_store_error(s));
  cr_expect_neq(mdc_store_case_begin(s, r.id, "z", NULL, &x), 0);
  cr_expect_neq(mdc_store_batch_begin(s), 0);
  mdc_store_run_row_free(&r);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 1, "never upgraded by a reader");
  cr_expect_str_eq(st_text(p, "PRAGMA journal_mode"), "delete", "never switched to WAL by a reader");
}

/* Runs started at known times: run_begin stamps now, so the tests rewrite started_at. */
static void set_started(const char *p, int64_t run, const char *when) {
  sqlite3 *db = st_raw(p);
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE runs SET started_at = '%s' WHERE id = %" PRId64, when, run);
  st_exec(db, sql);
  sqlite3_close(db);
}

static int64_t run_of(mdc_store *s, const char *kind, const char *driver, const char *backend) {
  mdc_run_info ri = {.kind = kind, .driver_name = driver, .backend = backend};
  int64_t id;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &id, NULL), 0, "%s", mdc_store_error(s));
  return id;
}

Test(store_read, runs_are_found_by_uuid_prefix_and_latest) {
  const char *p = st_path(0, "r.db");
  mdc_store *w = st_open(p);
  int64_t a = run_of(w, "replay", "drv", "sim"), b = run_of(w, "mutants", "drv", "sim"),
          c = run_of(w, "replay", "drv", "hip");
  mdc_store_close(w);
  set_started(p, a, "2026-01-01T00:00:00.000Z");
  set_started(p, b, "2026-01-03T00:00:00.000Z");
  set_started(p, c, "2026-01-02T00:00:00.000Z");
  mdc_store *s = open_read(p);
  mdc_run_row r;
  cr_assert_eq(mdc_store_run_find(s, "latest", NULL, &r), 0);
  cr_expect_eq(r.id, b, "latest of any kind");
  char uuid[37];
  snprintf(uuid, sizeof uuid, "%s", r.uuid);
  mdc_store_run_row_free(&r);
  cr_assert_eq(mdc_store_run_find(s, "latest", "replay", &r), 0);
  cr_expect_eq(r.id, c, "latest replay");
  cr_expect_str_eq(r.backend, "hip");
  mdc_store_run_row_free(&r);
  cr_assert_eq(mdc_store_run_find(s, uuid, NULL, &r), 0, "%s", mdc_store_error(s));
  cr_expect_eq(r.id, b);
  mdc_store_run_row_free(&r);
  char prefix[9];
  memcpy(prefix, uuid, 8);
  prefix[8] = 0;
  cr_assert_eq(mdc_store_run_find(s, prefix, NULL, &r), 0, "%s", mdc_store_error(s));
  cr_expect_eq(r.id, b);
  mdc_store_run_row_free(&r);
  cr_expect_eq(mdc_store_run_find(s, "00000000-0000-4000-8000-000000000000", NULL, &r), MDC_STORE_NOT_FOUND);
  cr_expect(strstr(mdc_store_error(s), "no run '00000000-"), "%s", mdc_store_error(s));
  cr_expect_eq(mdc_store_run_find(s, "not-a-uuid!", NULL, &r), MDC_STORE_NOT_FOUND);
  cr_expect_eq(mdc_store_run_find(s, "ab", NULL, &r), MDC_STORE_NOT_FOUND);
  cr_expect_eq(mdc_store_run_find(s, "latest", "fuzz", &r), MDC_STORE_NOT_FOUND);
  cr_expect(strstr(mdc_store_error(s), "no run of kind 'fuzz'"), "%s", mdc_store_error(s));
  cr_expect_eq(mdc_store_run_get(s, 999, &r), MDC_STORE_NOT_FOUND);
  mdc_store_run_row_free(&r);
  mdc_store_close(s);
}

static int collect_ids(void *ctx, const mdc_run_row *r) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 256 - n, "%" PRId64 ",", r->id);
  return 0;
}

static int stop_at_first(void *ctx, const mdc_run_row *r) {
  *(int64_t *)ctx = r->id;
  return 42;
}

Test(store_read, runs_each_filters_by_driver_backend_kind_and_time_oldest_first) {
  const char *p = st_path(0, "r.db");
  mdc_store *w = st_open(p);
  int64_t id[6];
  const char *when[6] = {"2026-01-05", "2026-01-01", "2026-01-03", "2026-01-02", "2026-01-04", "2026-01-06"};
  for (int i = 0; i < 6; i++) id[i] = run_of(w, i == 5 ? "fuzz" : "replay", i == 4 ? "other" : "drv", "sim");
  mdc_store_close(w);
  for (int i = 0; i < 6; i++) set_started(p, id[i], when[i]);
  mdc_store *s = open_read(p);
  char buf[256] = "", want[256];
  mdc_run_filter f = {.kind = "replay", .driver_name = "drv", .backend = "sim"};
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  snprintf(want, sizeof want, "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", id[1], id[3], id[2], id[0]);
  cr_expect_str_eq(buf, want);
  buf[0] = 0;
  f.limit = 2;
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  snprintf(want, sizeof want, "%" PRId64 ",%" PRId64 ",", id[2], id[0]);
  cr_expect_str_eq(buf, want, "the newest two, oldest first");
  buf[0] = 0;
  f.limit = 0;
  f.started_before = "2026-01-03";
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  snprintf(want, sizeof want, "%" PRId64 ",%" PRId64 ",", id[1], id[3]);
  cr_expect_str_eq(buf, want);
  int64_t first = 0;
  cr_expect_eq(mdc_store_runs_each(s, NULL, stop_at_first, &first), 42, "the callback's value");
  cr_expect_eq(first, id[1]);
  mdc_store_close(s);
}

Test(store_read, a_run_started_in_the_same_millisecond_is_before_when_its_id_is_lower) {
  const char *p = st_path(0, "r.db");
  mdc_store *w = st_open(p);
  int64_t a = run_of(w, "replay", "drv", "sim"), b = run_of(w, "replay", "drv", "sim");
  mdc_store_close(w);
  set_started(p, a, "2026-01-01T10:00:00.123Z");
  set_started(p, b, "2026-01-01T10:00:00.123Z");
  mdc_store *s = open_read(p);
  char buf[256] = "", want[256];
  mdc_run_filter f = {.kind = "replay", .started_before = "2026-01-01T10:00:00.123Z", .before_id = b};
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  snprintf(want, sizeof want, "%" PRId64 ",", a);
  cr_expect_str_eq(buf, want, "the run of the same millisecond with the lower id is the previous one");
  buf[0] = 0;
  f.before_id = 0;
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  cr_expect_str_eq(buf, "", "without before_id: strictly earlier only");
  buf[0] = 0;
  f.before_id = a;
  cr_assert_eq(mdc_store_runs_each(s, &f, collect_ids, buf), 0);
  cr_expect_str_eq(buf, "", "nothing came before the first");
  mdc_store_close(s);
}

Test(store_read, case_cursors_stream_by_id_name_slowest_and_not_passing) {
  const char *p = st_path(0, "r.db");
  mdc_store *w = st_open(p);
  int64_t run = run_of(w, "replay", "drv", "sim"), other = run_of(w, "replay", "drv", "sim"), c;
  const char *names[] = {"b/two", "a/one", "c/three", "a/zero"};
  const char *sts[] = {"Pass", "Fail", "Crash", "Pass"};
  double durs[] = {0.5, 2.0, 1.0, 3.0};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(mdc_store_case_begin(w, run, names[i], NULL, &c), 0);
    cr_assert_eq(mdc_store_case_end(w, c, sts[i], durs[i], 0, NULL, NULL, NULL), 0);
  }
  cr_assert_eq(mdc_store_case_begin(w, run, "d/running", NULL, &c), 0);
  cr_assert_eq(mdc_store_case_begin(w, other, "a/one", NULL, &c), 0);
  mdc_store_close(w);
  mdc_store *s = open_read(p);
  struct { mdc_case_query q; const char *want; } t[] = {
    {{.run_id = run}, "b/two a/one c/three a/zero d/running "},
    {{.run_id = run, .order = MDC_CASES_BY_NAME}, "a/one a/zero b/two c/three d/running "},
    {{.run_id = run, .order = MDC_CASES_SLOWEST}, "a/zero a/one c/three b/two "},
    {{.run_id = run, .order = MDC_CASES_SLOWEST, .limit = 2}, "a/zero a/one "},
    {{.run_id = run, .order = MDC_CASES_BY_NAME, .not_passing = 1}, "a/one c/three d/running "},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    mdc_case_iter *it;
    cr_assert_eq(mdc_store_cases_open(s, &t[i].q, &it), 0, "%s", mdc_store_error(s));
    char buf[256] = "";
    mdc_case_row row;
    int rc;
    while ((rc = mdc_store_cases_next(it, &row)) == 1) {
      strcat(buf, row.name);
      strcat(buf, " ");
    }
    cr_expect_eq(rc, 0);
    mdc_store_cases_close(it);
    cr_expect_str_eq(buf, t[i].want, "query %zu", i);
  }
  /* Two cursors at once, as a report walks a run and its baseline side by side. */
  mdc_case_iter *i1, *i2;
  mdc_case_query q1 = {.run_id = run, .order = MDC_CASES_BY_NAME}, q2 = {.run_id = other, .order = MDC_CASES_BY_NAME};
  cr_assert_eq(mdc_store_cases_open(s, &q1, &i1), 0);
  cr_assert_eq(mdc_store_cases_open(s, &q2, &i2), 0);
  mdc_case_row r1, r2;
  cr_expect_eq(mdc_store_cases_next(i1, &r1), 1);
  cr_expect_eq(mdc_store_cases_next(i2, &r2), 1);
  cr_expect_str_eq(r1.name, r2.name);
  cr_expect_str_eq(r2.status, "Running");
  mdc_store_cases_close(i1);
  mdc_store_cases_close(i2);
  uint32_t counts[MDC_CS_COUNT];
  cr_assert_eq(mdc_store_run_counts(s, run, counts), 0);
  cr_expect_eq(counts[MDC_CS_PASS], 2);
  cr_expect_eq(counts[MDC_CS_FAIL], 1);
  cr_expect_eq(counts[MDC_CS_CRASH], 1);
  cr_expect_eq(counts[MDC_CS_RUNNING], 1);
  cr_expect_eq(counts[MDC_CS_TIMEOUT], 0);
  mdc_store_close(s);
}

static int collect_changes(void *ctx, const char *name, uint32_t changes, uint32_t runs, const char *last) {
  char *buf = ctx;
  size_t n = strlen(buf);
  snprintf(buf + n, 256 - n, "%s:%u/%u:%s ", name, changes, runs, last);
  return 0;
}

Test(store_read, verdict_changes_count_flips_between_consecutive_runs_in_the_given_order) {
  mdc_store *s = st_open(":memory:");
  /* flip: Pass Fail Pass Fail; once: Pass Pass Fail Fail; steady: Pass x4; late: -, -, Pass, Crash */
  const char *flip[] = {"Pass", "Fail", "Pass", "Fail"}, *once[] = {"Pass", "Pass", "Fail", "Fail"};
  int64_t runs[4], c;
  for (int i = 0; i < 4; i++) {
    runs[i] = run_of(s, "replay", "drv", "sim");
    struct { const char *name, *status; } cs[] = {
      {"t/flip", flip[i]}, {"t/once", once[i]}, {"t/steady", "Pass"}, {"t/late", i == 2 ? "Pass" : "Crash"}};
    for (int k = 0; k < 4; k++) {
      if (k == 3 && i < 2) continue;
      cr_assert_eq(mdc_store_case_begin(s, runs[i], cs[k].name, NULL, &c), 0);
      cr_assert_eq(mdc_store_case_end(s, c, cs[k].status, 0, 0, NULL, NULL, NULL), 0);
    }
  }
  char buf[256] = "";
  cr_assert_eq(mdc_store_verdict_changes(s, runs, 4, 0, collect_changes, buf), 0, "%s", mdc_store_error(s));
  cr_expect_str_eq(buf, "t/flip:3/4:Fail t/late:1/2:Crash t/once:1/4:Fail ");
  buf[0] = 0;
  cr_assert_eq(mdc_store_verdict_changes(s, runs, 4, 1, collect_changes, buf), 0);
  cr_expect_str_eq(buf, "t/flip:3/4:Fail ");
  /* Reversed order: the same counts, the other end's status last. */
  int64_t rev[4] = {runs[3], runs[2], runs[1], runs[0]};
  buf[0] = 0;
  cr_assert_eq(mdc_store_verdict_changes(s, rev, 4, 0, collect_changes, buf), 0);
  cr_expect_str_eq(buf, "t/flip:3/4:Pass t/late:1/2:Pass t/once:1/4:Pass ");
  buf[0] = 0;
  cr_assert_eq(mdc_store_verdict_changes(s, runs, 1, 0, collect_changes, buf), 0);
  cr_expect_str_eq(buf, "", "one run: nothing to compare");
  mdc_store_close(s);
}

/* A store in a folder the reader cannot write (a CI artifact, another user's results): SQLite
 * cannot make the -shm a WAL reader needs, so the store is read as an immutable file. Run as
 * nobody when the test runs as root (modes do not bind root). */
static int read_in_readonly_folder(void) {
  char err[1024];
  mdc_store *s = NULL;
  if (mdc_store_open_read(st_path(1, "ro/r.db"), &s, err, sizeof err) != 0) {
    fprintf(stderr, "open_read: %s\n", err);
    return 1;
  }
  mdc_run_row r;
  int rc = mdc_store_run_find(s, "latest", NULL, &r) == 0 && r.has_counts ? 0 : 2;
  uint32_t n = 0;
  if (rc == 0 && (mdc_store_count_cases(s, r.id, NULL, &n) != 0 || n != 3)) rc = 3;
  mdc_store_run_row_free(&r);
  mdc_store_close(s);
  if (st_exists(st_path(2, "ro/r.db-shm"))) rc = 4;
  return rc;
}

Test(store_read, a_store_in_a_folder_the_reader_cannot_write_is_read) {
  const char *d = st_path(0, "ro"), *p = st_path(1, "ro/r.db");
  cr_assert_eq(mkdir(d, 0755), 0);
  mdc_store *w = st_open(p);
  int64_t run = st_run(w, "replay", 3, "Pass", 0);
  cr_assert_eq(mdc_store_run_end(w, run, 3, 3, 0, 0, 0, 0), 0);
  mdc_store_close(w);
  cr_assert(!st_exists(st_path(2, "ro/r.db-wal")), "the writer's close removed its WAL");
  if (geteuid() != 0) {
    cr_assert_eq(chmod(d, 0555), 0);
    cr_expect_eq(read_in_readonly_folder(), 0);
    chmod(d, 0755);
    return;
  }
  cr_assert_eq(chown(st_dir, 65534, 65534), 0);
  cr_assert_eq(chown(d, 65534, 65534), 0);
  cr_assert_eq(chmod(d, 0555), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(read_in_readonly_folder());
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "step %d failed", WEXITSTATUS(ws));
  chmod(d, 0755);
}
