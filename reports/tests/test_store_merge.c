/* test_store_merge.c - mdc_store_merge: shards merged into one file with cases re-linked to the
 * new run ids, a run already there (same uuid) skipped so merging twice changes nothing, and a
 * bad input failing the whole merge without writing anything. */
#include <sys/stat.h>

#include "store_test.h"

TestSuite(store_merge, .init = st_setup, .fini = st_teardown);

/* A shard file holding one run of n cases. */
static void make_shard(const char *path, const char *kind, int n, const char *status, int leave_last) {
  mdc_store *s = st_open(path);
  int64_t run = st_run(s, kind, n, status, leave_last);
  if (!leave_last) cr_assert_eq(mdc_store_run_end(s, run, (uint32_t)n, 0, 0, 0, 0, 0), 0);
  mdc_store_close(s);
}

static int64_t count(const char *path, const char *table) {
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  return st_int(path, sql);
}

Test(store_merge, merges_shards_and_relinks_cases_to_new_run_ids) {
  const char *a = st_path(0, "a.db"), *b = st_path(1, "b.db"), *out = st_path(2, "out.db");
  make_shard(a, "replay", 3, "Pass", 0);
  make_shard(b, "fuzz", 2, "Crash", 1);
  /* out already has a run of its own, so the shards' run ids (1 and 1) are taken. */
  make_shard(out, "mutants", 4, "Fail", 0);
  const char *in[] = {a, b};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "runs"), 3);
  cr_expect_eq(count(out, "cases"), 4 + 3 + 2);
  /* Every case is under the run it was under in its shard, found by uuid. */
  char sql[512];
  const char *shards[] = {a, b};
  for (int i = 0; i < 2; i++) {
    char uuid[37];
    snprintf(uuid, sizeof uuid, "%s", st_text(shards[i], "SELECT uuid FROM runs"));
    snprintf(sql, sizeof sql, "SELECT group_concat(c.name || ':' || c.status, ' ') FROM "
             "(SELECT * FROM cases ORDER BY id) c JOIN runs r ON r.id = c.run_id WHERE r.uuid = '%s'", uuid);
    char want[512];
    snprintf(want, sizeof want, "%s", st_text(shards[i], "SELECT group_concat(name || ':' || status, ' ') "
                                                         "FROM (SELECT * FROM cases ORDER BY id)"));
    cr_expect_str_eq(st_text(out, sql), want, "shard %d", i);
    snprintf(sql, sizeof sql, "SELECT kind || driver_name || ifnull(ended_at, 'open') FROM runs WHERE uuid = '%s'", uuid);
    char got[256];
    snprintf(got, sizeof got, "%s", st_text(out, sql));
    cr_expect_str_eq(got, st_text(shards[i], "SELECT kind || driver_name || ifnull(ended_at, 'open') FROM runs"));
  }
  cr_expect_eq(st_int(out, "SELECT count(*) FROM cases c LEFT JOIN runs r ON r.id = c.run_id WHERE r.id IS NULL"), 0,
               "no orphan case");
  cr_expect_eq(st_int(out, "SELECT count(*) FROM cases WHERE status = 'Running'"), 1, "the interrupted case stays Running");
  cr_expect_eq(count(a, "runs"), 1, "inputs are not changed");
}

Test(store_merge, merging_twice_changes_nothing) {
  const char *a = st_path(0, "a.db"), *b = st_path(1, "b.db"), *out = st_path(2, "out.db");
  make_shard(a, "replay", 5, "Pass", 0);
  make_shard(b, "replay", 6, "Fail", 0);
  const char *in[] = {a, b};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  int64_t runs = count(out, "runs"), cases = count(out, "cases");
  cr_expect_eq(runs, 2);
  cr_expect_eq(cases, 11);
  char before[4096];
  snprintf(before, sizeof before, "%s", st_text(out, "SELECT group_concat(id || uuid, ',') FROM runs"));
  cr_assert_eq(mdc_store_merge(out, in, 2, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "runs"), runs);
  cr_expect_eq(count(out, "cases"), cases);
  cr_expect_str_eq(st_text(out, "SELECT group_concat(id || uuid, ',') FROM runs"), before);
  /* The same input twice in one call, and out merged into itself: still nothing new. */
  const char *twice[] = {a, a, out};
  cr_assert_eq(mdc_store_merge(out, twice, 3, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "runs"), runs);
  cr_expect_eq(count(out, "cases"), cases);
}

Test(store_merge, merge_into_a_new_file_and_of_no_inputs) {
  const char *a = st_path(0, "a.db"), *out = st_path(1, "new.db");
  make_shard(a, "fuzz", 2, "Timeout", 0);
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, NULL, 0, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "runs"), 0);
  const char *in[] = {a};
  cr_assert_eq(mdc_store_merge(out, in, 1, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "cases"), 2);
  cr_expect_eq(st_int(out, "PRAGMA user_version"), MDC_STORE_SCHEMA_VERSION);
}

Test(store_merge, a_bad_input_fails_the_whole_merge_and_writes_nothing) {
  const char *a = st_path(0, "a.db"), *junk = st_path(1, "junk.db"), *out = st_path(2, "out.db");
  make_shard(a, "replay", 3, "Pass", 0);
  make_shard(out, "replay", 1, "Pass", 0);
  FILE *f = fopen(junk, "w");
  cr_assert_not_null(f);
  fputs("this is a trace, not a database\n", f);
  fclose(f);
  const char *in[] = {a, junk};
  char err[1024] = "";
  cr_expect_eq(mdc_store_merge(out, in, 2, err, sizeof err), -1);
  cr_expect(strstr(err, junk) && strstr(err, "not a SQLite database"), "%s", err);
  cr_expect_eq(count(out, "runs"), 1, "the good input was not merged either");
  cr_expect_eq(count(out, "cases"), 1);
}

Test(store_merge, a_missing_input_is_refused_and_not_created) {
  const char *a = st_path(0, "a.db"), *gone = st_path(1, "gone.db"), *out = st_path(2, "out.db");
  make_shard(a, "replay", 1, "Pass", 0);
  const char *in[] = {a, gone};
  char err[1024] = "";
  cr_expect_eq(mdc_store_merge(out, in, 2, err, sizeof err), -1);
  cr_expect(strstr(err, gone) && strstr(err, "No such file"), "%s", err);
  cr_expect(!st_exists(gone), "the missing input was created");
  /* Inputs are judged before OUT is made: a merge that fails leaves no OUT behind. */
  cr_expect(!st_exists(out), "a failed merge made an empty OUT");
}

/* An input read as merge input gets nothing written beside it: no -wal, no -shm (it is read as
 * an immutable file when no -wal holds changes). */
Test(store_merge, inputs_get_no_files_written_beside_them) {
  const char *a = st_path(0, "a.db"), *out = st_path(1, "out.db");
  make_shard(a, "replay", 2, "Pass", 0);
  char aw[600], as[600];
  snprintf(aw, sizeof aw, "%s-wal", a);
  snprintf(as, sizeof as, "%s-shm", a);
  cr_assert(!st_exists(aw) && !st_exists(as), "a closed store leaves no WAL files");
  const char *in[] = {a};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 1, err, sizeof err), 0, "%s", err);
  cr_expect(!st_exists(aw) && !st_exists(as), "the merge left WAL files beside its input");
  cr_expect_eq(count(out, "cases"), 2);
}

/* An input whose -wal holds changes a writer has not checkpointed (a live store) is read with
 * them, through a private copy: the merge sees every committed row. */
Test(store_merge, an_input_with_changes_in_its_wal_is_read_whole) {
  const char *a = st_path(0, "live.db"), *out = st_path(1, "out.db");
  mdc_store *w = st_open(a);
  st_run(w, "replay", 3, "Pass", 0); /* committed, still in the WAL while w is open */
  char aw[600];
  snprintf(aw, sizeof aw, "%s-wal", a);
  struct stat sb;
  cr_assert(stat(aw, &sb) == 0 && sb.st_size > 0, "the live store's WAL holds its changes");
  const char *in[] = {a};
  char err[1024];
  cr_assert_eq(mdc_store_merge(out, in, 1, err, sizeof err), 0, "%s", err);
  cr_expect_eq(count(out, "cases"), 3);
  mdc_store_close(w);
}

Test(store_merge, an_input_of_a_newer_version_is_refused) {
  const char *a = st_path(0, "a.db"), *out = st_path(1, "out.db");
  make_shard(a, "replay", 1, "Pass", 0);
  sqlite3 *db = st_raw(a);
  st_exec(db, "PRAGMA user_version = 99");
  sqlite3_close(db);
  const char *in[] = {a};
  char err[1024] = "";
  cr_expect_eq(mdc_store_merge(out, in, 1, err, sizeof err), -1);
  cr_expect(strstr(err, a) && strstr(err, "newer"), "%s", err);
  cr_expect_eq(st_int(a, "PRAGMA user_version"), 99);
}

Test(store_merge, a_bad_output_is_refused) {
  const char *a = st_path(0, "a.db"), *out = st_path(1, "out.db");
  make_shard(a, "replay", 1, "Pass", 0);
  FILE *f = fopen(out, "w");
  cr_assert_not_null(f);
  fputs("notes\n", f);
  fclose(f);
  const char *in[] = {a};
  char err[1024] = "";
  cr_expect_eq(mdc_store_merge(out, in, 1, err, sizeof err), -1);
  cr_expect(strstr(err, out) && strstr(err, "not a SQLite database"), "%s", err);
  size_t len;
  unsigned char *b = st_slurp(out, &len);
  cr_expect(len == 6 && memcmp(b, "notes\n", 6) == 0, "output file changed");
  free(b);
}
