/* store_test.h - private to the store tests: a scratch directory per test, raw SQLite access to
 * check what is really in a file (not what the store says), and file comparison helpers. */
#ifndef MDC_STORE_TEST_H
#define MDC_STORE_TEST_H

#include "mdc/store.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char st_dir[256];

static inline int st_unlock(const char *p, const struct stat *sb, int type, struct FTW *f) {
  if (type == FTW_D) chmod(p, 0700);
  return 0;
}

static inline int st_remove(const char *p, const struct stat *sb, int type, struct FTW *f) {
  remove(p);
  return 0;
}

/* .init: a fresh directory; .fini: removes it and everything under it, read-only parts too. */
static inline void st_setup(void) {
  const char *t = getenv("TMPDIR");
  snprintf(st_dir, sizeof st_dir, "%s/mdc_store_test_XXXXXX", t && t[0] ? t : "/tmp");
  cr_assert_not_null(mkdtemp(st_dir), "mkdtemp %s", st_dir);
}

static inline void st_teardown(void) {
  nftw(st_dir, st_unlock, 16, FTW_PHYS);
  nftw(st_dir, st_remove, 16, FTW_PHYS | FTW_DEPTH);
}

/* A path in the test's directory; valid until the next call with the same slot (0..7). */
static inline const char *st_path(int slot, const char *name) {
  static char buf[8][512];
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", st_dir, name);
  return buf[slot];
}

static inline int st_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static inline mdc_store *st_open(const char *path) {
  char err[1024];
  mdc_store *s = NULL;
  cr_assert_eq(mdc_store_open(path, &s, err, sizeof err), 0, "open %s: %s", path, err);
  cr_assert_not_null(s);
  return s;
}

/* A raw connection, to check the file itself. */
static inline sqlite3 *st_raw(const char *path) {
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK, "raw open %s", path);
  return db;
}

/* A raw connection that may create the file, to build files the store must judge. */
static inline sqlite3 *st_raw_create(const char *path) {
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK,
               "raw create %s", path);
  return db;
}

static inline void st_exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  cr_assert_eq(rc, SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

/* The integer that sql yields on path (opened, queried, closed). */
static inline int64_t st_int(const char *path, const char *sql) {
  sqlite3 *db = st_raw(path);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s yields no row", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

/* The text that sql yields on path, copied into a static buffer ("(null)" for NULL). */
static inline const char *st_text(const char *path, const char *sql) {
  static char buf[4096];
  sqlite3 *db = st_raw(path);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s yields no row", sql);
  const unsigned char *t = sqlite3_column_text(st, 0);
  snprintf(buf, sizeof buf, "%s", t ? (const char *)t : "(null)");
  sqlite3_finalize(st);
  sqlite3_close(db);
  return buf;
}

/* Whole file into a malloc'd buffer; *len gets its size. */
static inline unsigned char *st_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  cr_assert_not_null(b);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* A run with n cases, all ended with status (the last one left Running when leave_last). */
static inline int64_t st_run(mdc_store *s, const char *kind, int n, const char *status,
                             int leave_last) {
  mdc_run_info ri = {.kind = kind, .driver_name = "md-reference", .driver_version = "0.1.0",
                     .backend = "sim", .shard_count = 1};
  int64_t run, c;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0, "%s", mdc_store_error(s));
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s/case_%d", kind, i);
    cr_assert_eq(mdc_store_case_begin(s, run, name, "t.jsonl", &c), 0, "%s", mdc_store_error(s));
    if (leave_last && i == n - 1) break;
    cr_assert_eq(mdc_store_case_end(s, c, status, 0.5, (uint32_t)i + 1, NULL, NULL, NULL), 0,
                 "%s", mdc_store_error(s));
  }
  return run;
}

#endif
