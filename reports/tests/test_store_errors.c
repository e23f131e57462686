/* test_store_errors.c - files the store must refuse with a message naming the file and the
 * problem, returning -1 and leaving the file exactly as it was: not a database, another
 * program's database, a newer schema, a corrupt one (tables missing), paths it cannot write. */
#include "store_test.h"

#include <errno.h>
#include <grp.h>
#include <sys/wait.h>

TestSuite(store_errors, .init = st_setup, .fini = st_teardown);

/* Opens path expecting a refusal whose message names the file and contains problem. */
static void expect_refused(const char *path, const char *problem) {
  char err[1024] = "";
  mdc_store *s = (mdc_store *)&err;  /* must come back NULL */
  cr_expect_eq(mdc_store_open(path, &s, err, sizeof err), -1, "%s was opened", path);
  cr_expect_null(s);
  cr_expect(strstr(err, path), "message does not name the file: %s", err);
  cr_expect(strstr(err, problem), "message does not say '%s': %s", problem, err);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

Test(store_errors, a_file_that_is_not_a_database_is_refused_and_untouched) {
  const char *p = st_path(0, "results.db");
  /* Longer than a SQLite header, so it cannot pass for an empty file. */
  char text[2048];
  memset(text, 'x', sizeof text - 2);
  text[sizeof text - 2] = '\n';
  text[sizeof text - 1] = '\0';
  memcpy(text, "# my notes, not a database\n", 27);
  write_file(p, text);
  expect_refused(p, "not a SQLite database");
  size_t len;
  unsigned char *b = st_slurp(p, &len);
  cr_expect_eq(len, strlen(text));
  cr_expect(memcmp(b, text, len) == 0, "file contents changed");
  free(b);
  cr_expect(!st_exists(st_path(1, "results.db-wal")), "a WAL was made beside a non-database");
}

Test(store_errors, another_programs_database_is_refused_and_untouched) {
  const char *p = st_path(0, "other.db");
  sqlite3 *db = st_raw_create(p);
  st_exec(db, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('keep me')");
  sqlite3_close(db);
  expect_refused(p, "not a results store");
  cr_expect_str_eq(st_text(p, "SELECT x FROM notes"), "keep me");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master"), 1, "tables were added");
  cr_expect_str_eq(st_text(p, "PRAGMA journal_mode"), "delete");
}

Test(store_errors, a_newer_schema_version_is_refused_and_untouched) {
  const char *p = st_path(0, "future.db");
  sqlite3 *db = st_raw_create(p);
  st_exec(db, "CREATE TABLE runs(id INTEGER PRIMARY KEY, future TEXT); INSERT INTO runs VALUES (1, 'v99 data');"
              "PRAGMA user_version = 99");
  sqlite3_close(db);
  expect_refused(p, "schema version 99 is newer than this mdc");
  cr_expect_eq(st_int(p, "PRAGMA user_version"), 99);
  cr_expect_str_eq(st_text(p, "SELECT future FROM runs"), "v99 data");
  cr_expect_str_eq(st_text(p, "PRAGMA journal_mode"), "delete");
}

Test(store_errors, a_store_missing_a_table_is_corrupt_and_untouched) {
  const char *p = st_path(0, "r.db");
  mdc_store *s = st_open(p);
  st_run(s, "replay", 2, "Pass", 0);
  mdc_store_close(s);
  sqlite3 *db = st_raw(p);
  st_exec(db, "DROP TABLE cases");
  sqlite3_close(db);
  expect_refused(p, "corrupt");
  expect_refused(p, "no such table: cases");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM runs"), 1, "the run was lost");
  cr_expect_eq(st_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'cases'"), 0, "the table was re-created");
}

Test(store_errors, a_store_missing_a_column_is_corrupt) {
  const char *p = st_path(0, "r.db");
  sqlite3 *db = st_raw_create(p);
  st_exec(db, "CREATE TABLE runs(id INTEGER PRIMARY KEY, uuid TEXT);"
              "CREATE TABLE cases(id INTEGER PRIMARY KEY, run_id INTEGER);"
              "INSERT INTO runs VALUES (1, 'u'); PRAGMA user_version = 1");
  sqlite3_close(db);
  expect_refused(p, "corrupt");
  cr_expect_str_eq(st_text(p, "SELECT uuid FROM runs"), "u");
}

Test(store_errors, a_directory_is_refused) {
  const char *p = st_path(0, "adir");
  cr_assert_eq(mkdir(p, 0700), 0);
  expect_refused(p, "is a directory");
}

Test(store_errors, a_path_under_a_regular_file_is_refused) {
  const char *f = st_path(0, "plain");
  write_file(f, "x");
  const char *p = st_path(1, "plain/r.db");
  expect_refused(p, "Not a directory");
}

Test(store_errors, a_path_in_a_missing_directory_is_refused_and_nothing_is_created) {
  const char *p = st_path(0, "missing/r.db");
  expect_refused(p, "No such file or directory");
  cr_expect(!st_exists(st_path(1, "missing")));
}

/* File modes do not bind root, so as root a permission check runs in a child that has become
 * nobody (the test directory handed over to it first). fn returns 0 or the failing step. */
static void as_unprivileged(int (*fn)(void)) {
  if (geteuid() != 0) {
    int step = fn();
    cr_expect_eq(step, 0, "step %d failed", step);
    return;
  }
  cr_assert_eq(chown(st_dir, 65534, 65534), 0, "chown %s: %s", st_dir, strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(fn());
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFEXITED(ws), "child died (signal %d)", WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
  cr_expect_eq(WEXITSTATUS(ws), 0, "step %d failed (100: could not become nobody)", WEXITSTATUS(ws));
}

/* Exit-code versions of the checks, for the child. */
static char msg[1024];
static int refused(const char *path, const char *problem) {
  mdc_store *s = NULL;
  msg[0] = '\0';
  if (mdc_store_open(path, &s, msg, sizeof msg) != -1 || s) return 0;
  if (!strstr(msg, path) || !strstr(msg, problem)) {
    fprintf(stderr, "unexpected message: %s\n", msg);
    return 0;
  }
  return 1;
}

static int count_cases(const char *path, int64_t *n) {
  sqlite3 *db;
  sqlite3_stmt *st;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return -1;
  int ok = sqlite3_prepare_v2(db, "SELECT count(*) FROM cases", -1, &st, NULL) == SQLITE_OK &&
           sqlite3_step(st) == SQLITE_ROW;
  if (ok) *n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok ? 0 : -1;
}

/* A store with one run of two cases at path; 0 on success. */
static int make_store(const char *path) {
  mdc_store *s;
  char err[1024];
  mdc_run_info ri = {.kind = "replay"};
  int64_t run, c;
  if (mdc_store_open(path, &s, err, sizeof err) != 0) return -1;
  int rc = mdc_store_run_begin(s, &ri, &run, NULL) || mdc_store_case_begin(s, run, "a", NULL, &c) ||
           mdc_store_case_end(s, c, "Pass", 0, 0, NULL, NULL, NULL) ||
           mdc_store_case_begin(s, run, "b", NULL, &c);
  mdc_store_close(s);
  return rc ? -1 : 0;
}

static int read_only_store(void) {
  const char *p = st_path(0, "r.db");
  int64_t n = 0;
  if (make_store(p) != 0) return 1;
  if (chmod(p, 0444) != 0) return 2;
  if (!refused(p, "not writable")) return 3;
  if (chmod(p, 0644) != 0) return 4;
  if (count_cases(p, &n) != 0 || n != 2) return 5;
  return 0;
}

Test(store_errors, a_read_only_store_is_refused_and_untouched) { as_unprivileged(read_only_store); }

static int unwritable_directory(void) {
  const char *d = st_path(0, "ro");
  if (mkdir(d, 0500) != 0) return 1;
  if (!refused(st_path(1, "ro/r.db"), "Permission denied")) return 2;
  if (st_exists(st_path(1, "ro/r.db"))) return 3;
  return 0;
}

Test(store_errors, a_new_store_in_an_unwritable_directory_is_refused) { as_unprivileged(unwritable_directory); }

/* The -wal and -shm files cannot be made beside the store: refused, nothing lost. */
static int store_in_directory_made_unwritable(void) {
  const char *d = st_path(0, "dir"), *p = st_path(1, "dir/r.db");
  int64_t n = 0;
  if (mkdir(d, 0700) != 0) return 1;
  if (make_store(p) != 0) return 2;
  if (chmod(d, 0500) != 0) return 3;
  if (!refused(p, "not writable")) return 4;
  if (chmod(d, 0700) != 0) return 5;
  if (count_cases(p, &n) != 0 || n != 2) return 6;
  return 0;
}

Test(store_errors, a_store_in_a_directory_made_unwritable_is_refused_and_untouched) {
  as_unprivileged(store_in_directory_made_unwritable);
}

Test(store_errors, an_empty_file_becomes_a_store) {
  const char *p = st_path(0, "empty.db");
  write_file(p, "");
  mdc_store *s = st_open(p);
  mdc_store_close(s);
  cr_expect_eq(st_int(p, "PRAGMA user_version"), MDC_STORE_SCHEMA_VERSION);
}

Test(store_errors, a_null_error_buffer_and_path_are_safe) {
  mdc_store *s = NULL;
  cr_expect_eq(mdc_store_open(st_path(0, "missing/r.db"), &s, NULL, 0), -1);
  cr_expect_null(s);
  char err[64];
  cr_expect_eq(mdc_store_open(NULL, &s, err, sizeof err), -1);
  cr_expect(strstr(err, "no path"), "%s", err);
  /* A long message is cut, never overrun. */
  char tiny[8];
  cr_expect_eq(mdc_store_open(st_path(0, "missing/r.db"), &s, tiny, sizeof tiny), -1);
  cr_expect_eq(strlen(tiny), sizeof tiny - 1);
}
