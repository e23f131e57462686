/* store.c - the results store: runs and cases in one SQLite file (docs/results-schema.md). This
 * file opens it (for writing: checked, created or upgraded, WAL; or read-only), closes it, and
 * holds the helpers and small queries its other files share: the schema and its upgrades in
 * store_schema.c, writes of runs and cases in store_write.c, the fuzz tables in store_fuzz.c,
 * merge in store_merge.c, reads for reports in store_read.c.
 *
 * Durability is the point: every case_begin and case_end is its own autocommit transaction, so
 * a process killed at any instant leaves every committed row. WAL with synchronous=NORMAL keeps
 * that cheap: a commit is an append to the -wal file, no fsync; a crash of the process (not the
 * machine) loses nothing committed. Every write has one prepared statement, made at open and
 * reused. A file that is not ours (not a database, another program's database, a newer schema, a
 * corrupt one) is refused before anything is written to it. Reports open the file read-only
 * (mdc_store_open_read) and read it as a stream of rows (store_read.c). */
#include "store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS MDC_STORE__BUSY_TIMEOUT_MS
#define check_version mdc_store__check_version
#define check_tables mdc_store__check_tables

#define X(e, s, u) s,
static const char *const statuses[] = {MDC_STORE_STATUS_MAP(X)};
#undef X
#define X(e, s, u) u,
static const unsigned char status_unexpected[] = {MDC_STORE_STATUS_MAP(X)};
#undef X

int mdc_store_status_unexpected(mdc_case_status st) { return (unsigned)st < MDC_CS_COUNT ? status_unexpected[st] : 1; }

uint32_t mdc_store_unexpected_of(const uint32_t *counts) {
  uint32_t n = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (status_unexpected[i]) n += counts[i];
  return n;
}

/* Constant table lookup; thread-safe; NULL out of range (store.h). */
const char *mdc_store_status_name(mdc_case_status st) {
  return (unsigned)st < MDC_CS_COUNT ? statuses[st] : NULL;
}

/* Constant table lookup; thread-safe; -1 for a name that is not a status (store.h). */
int mdc_store_status_parse(const char *name) {
  for (int i = 0; name && i < MDC_CS_COUNT; i++)
    if (strcmp(name, statuses[i]) == 0) return i;
  return -1;
}

static void seterr(char *buf, size_t len, const char *path, const char *fmt, va_list ap) {
  if (!buf || !len) return;
  int n = snprintf(buf, len, "results store '%s': ", path);
  if (n >= 0 && (size_t)n < len) vsnprintf(buf + n, len - (size_t)n, fmt, ap);
}

/* Formats into s->err (the store's own buffer); one store per thread; always -1. */
int mdc_store__fail(mdc_store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  seterr(s->err, sizeof s->err, s->path, fmt, ap);
  va_end(ap);
  return -1;
}
#define fail mdc_store__fail

/* mdc_store__fail with SQLite's message for db; one store per thread; always -1. */
int mdc_store__fail_db(mdc_store *s, sqlite3 *db, const char *what) {
  return fail(s, "%s: %s", what, sqlite3_errmsg(db));
}
#define fail_db mdc_store__fail_db

/* Binds without copying: v must outlive the statement's step. Never fails. */
void mdc_store__bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, i);
}
#define bind_text mdc_store__bind_text

const char *mdc_store__text(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

int mdc_store__has_fuzz(const mdc_store *s) { return s->version >= 2; }

const char *mdc_store__run_cols(int version) {
  return version >= 4 ? MDC_STORE__RUN_COLS : version >= 2 ? MDC_STORE__RUN_COLS_V2_AS : MDC_STORE__RUN_COLS_V1_AS;
}

const char *mdc_store__case_cols(int version) {
  return version >= 4 ? MDC_STORE__CASE_COLS : version >= 2 ? MDC_STORE__CASE_COLS_V2_AS : MDC_STORE__CASE_COLS_V1_AS;
}

/* Runs sql (no rows); -1 with what and SQLite's message on failure. */
int mdc_store__exec(mdc_store *s, sqlite3 *db, const char *sql, const char *what) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return fail_db(s, db, what);
  return 0;
}
#define exec mdc_store__exec

int mdc_store__savepoint_begin(mdc_store *s, const char *name) {
  if (s->in_batch) return 0;
  char sql[96], what[96];
  snprintf(sql, sizeof sql, "SAVEPOINT %s", name);
  snprintf(what, sizeof what, "%s: cannot start the transaction", name);
  return exec(s, s->db, sql, what) ? -1 : 1;
}

int mdc_store__savepoint_end(mdc_store *s, const char *name, int own, int rc) {
  if (!own) return rc;
  char sql[192], what[96];
  snprintf(sql, sizeof sql, "RELEASE %s", name);
  snprintf(what, sizeof what, "%s: cannot commit", name);
  if (rc == 0 && exec(s, s->db, sql, what) == 0) return 0;
  snprintf(sql, sizeof sql, "ROLLBACK TO %s; RELEASE %s", name, name);
  sqlite3_exec(s->db, sql, NULL, NULL, NULL);
  return -1;
}

/* A statement kept for the store's life (finalized by its owner); -1 with the message. */
int mdc_store__prepare(mdc_store *s, sqlite3_stmt **st, const char *sql) {
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "cannot prepare a statement");
  return 0;
}
#define prepare mdc_store__prepare

/* The statements both modes use; their SQL reads the file's own version. */
static int prepare_reads(mdc_store *s) {
  const char *cols = mdc_store__case_cols(s->version);
  char get[768];
  snprintf(get, sizeof get, "SELECT id, run_id, %s FROM cases WHERE id = ?1", cols);
  return prepare(s, &s->count,
                 "SELECT count(*) FROM cases WHERE (?1 = 0 OR run_id = ?1) "
                 "AND (?2 IS NULL OR status = ?2)") ||
         prepare(s, &s->list_runs, "SELECT id FROM runs ORDER BY id") ||
         prepare(s, &s->case_get, get)
           ? -1 : 0;
}

/* Why a path cannot be opened, found out by hand: SQLite's "unable to open database file" and
 * its last errno (often from a probe, not the failing call) do not say which part is wrong. */
static int fail_open(mdc_store *s, sqlite3 *db) {
  struct stat st;
  if (stat(s->path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fail(s, "cannot open: is a directory");
    if (access(s->path, R_OK | W_OK) != 0) return fail(s, "cannot open: %s", strerror(errno));
  } else if (errno == ENOENT) {
    /* Missing: can its directory take a new file? */
    char *dir = strdup(s->path);
    if (!dir) return fail(s, "out of memory");
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    int e = 0;
    if (stat(dir, &st) != 0) e = errno;
    else if (!S_ISDIR(st.st_mode)) e = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0) e = errno;
    if (e) fail(s, "cannot open: directory '%s': %s", dir, strerror(e));
    free(dir);
    if (e) return -1;
  } else {
    return fail(s, "cannot open: %s", strerror(errno));
  }
  return fail(s, "cannot open: %s", db ? sqlite3_errmsg(db) : "out of memory");
}

/* A store for path, not open yet; NULL with the message in err (out of memory). The openers
 * first check their arguments (check_open_args). */
mdc_store *mdc_store__new(const char *path, char *err, size_t errlen) {
  mdc_store *s = calloc(1, sizeof *s);
  if (s) s->path = strdup(path);
  if (!s || !s->path) {
    free(s);
    if (err && errlen) snprintf(err, errlen, "results store '%s': out of memory", path);
    return NULL;
  }
  return s;
}
#define store_new mdc_store__new

/* The openers' arguments: *out and err cleared; 0, or -1 with the message in err. */
static int check_open_args(const char *path, mdc_store **out, char *err, size_t errlen) {
  if (out) *out = NULL;
  if (err && errlen) err[0] = '\0';
  if (path && out) return 0;
  if (err && errlen) snprintf(err, errlen, "results store: no path given");
  return -1;
}

/* The caller owns *out (mdc_store_close). Thread-safe for different paths; on failure nothing
 * is written to the file and err gets the message (store.h). */
int mdc_store_open(const char *path, mdc_store **out, char *err, size_t errlen) {
  mdc_store *s;
  if (check_open_args(path, out, err, errlen) != 0 || !(s = store_new(path, err, errlen))) return -1;
  int is_memory = strcmp(path, ":memory:") == 0;
  int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  int64_t version;
  char mode[16] = "";
  if (rc != SQLITE_OK) {
    fail_open(s, s->db);
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
  /* The first read: a file that is not a database fails here, before any write. */
  if (check_version(s, s->db, &version, 1) != 0) goto fail;
  if (sqlite3_db_readonly(s->db, "main") == 1) {
    fail(s, "not writable (read-only file, directory or file system)");
    goto fail;
  }
  if (version < MDC_STORE_SCHEMA_VERSION && mdc_store__upgrade_schema(s) != 0) goto fail;
  s->version = MDC_STORE_SCHEMA_VERSION;
  if (check_tables(s, s->db, s->version) != 0) goto fail;
  {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      snprintf(mode, sizeof mode, "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "?");
    else
      fail_db(s, s->db, "cannot set WAL journal mode");
    sqlite3_finalize(st);
    if (!mode[0]) goto fail;
    if (strcmp(mode, "wal") != 0 && !(is_memory && strcmp(mode, "memory") == 0)) {
      fail(s, "cannot use WAL journal mode (journal mode is '%s'; is the directory writable?)", mode);
      goto fail;
    }
  }
  if (exec(s, s->db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", "cannot configure") != 0)
    goto fail;
  if (prepare_reads(s) != 0 || mdc_store__prepare_writes(s) != 0 || mdc_store__prepare_fuzz(s) != 0)
    goto fail;
  *out = s;
  return 0;
fail:
  if (err && errlen) snprintf(err, errlen, "%s", s->err);
  mdc_store_close(s);
  return -1;
}

/* sqlite3_open_v2 of a file: URI with the path percent-encoded where URI syntax would take it
 * apart, and the given query. */
int mdc_store__open_uri(const char *path, const char *query, sqlite3 **db) {
  size_t n = strlen(path);
  char *uri = malloc(3 * n + strlen(query) + 16), *u = uri;
  if (!uri) return SQLITE_NOMEM;
  u += sprintf(u, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (*p == '%' || *p == '?' || *p == '#' || *p < 0x20 || *p >= 0x7f) u += sprintf(u, "%%%02X", *p);
    else *u++ = (char)*p;
  }
  sprintf(u, "%s", query);
  int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
  free(uri);
  return rc;
}
#define open_uri mdc_store__open_uri

/* Reopens s->path as an immutable file (no -shm, no locks) when its -wal is missing or empty:
 * then no writer holds changes outside the file. 0, or -1 with the reason in s->err. */
static int reopen_immutable(mdc_store *s) {
  char wal[4200];
  struct stat sb;
  if (snprintf(wal, sizeof wal, "%s-wal", s->path) >= (int)sizeof wal) return fail(s, "path too long");
  if (stat(wal, &sb) == 0 && sb.st_size > 0)
    return fail(s, "cannot read: its folder is not writable (SQLite needs a -shm file beside a -wal file that "
                "holds changes)");
  sqlite3_close(s->db);
  s->db = NULL;
  if (open_uri(s->path, "?immutable=1", &s->db) != SQLITE_OK)
    return fail(s, "cannot open: %s", s->db ? sqlite3_errmsg(s->db) : "out of memory");
  sqlite3_extended_result_codes(s->db, 1);
  return 0;
}

/* The caller owns *out. Never writes the file; MDC_STORE_NOT_FOUND or -1 with err set on
 * failure (store.h). */
int mdc_store_open_read(const char *path, mdc_store **out, char *err, size_t errlen) {
  mdc_store *s;
  if (check_open_args(path, out, err, errlen) != 0 || !(s = store_new(path, err, errlen))) return -1;
  int ret = -1;
  int64_t version;
  struct stat sb;
  s->readonly = 1;
  /* Judged by hand first: SQLite would take a missing or empty file for an empty database. */
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT) ret = MDC_STORE_NOT_FOUND;
    fail(s, "cannot read: %s", strerror(errno));
    goto fail;
  }
  if (S_ISDIR(sb.st_mode)) {
    fail(s, "cannot read: is a directory");
    goto fail;
  }
  if (sb.st_size == 0) {
    ret = MDC_STORE_NOT_FOUND;
    fail(s, "empty file: no results in it");
    goto fail;
  }
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    fail(s, "cannot open: %s", s->db ? sqlite3_errmsg(s->db) : "out of memory");
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
  if (check_version(s, s->db, &version, 1) != 0) {
    /* A WAL file in a folder we cannot write: SQLite cannot make the -shm it reads through. With
     * no -wal beside it (or an empty one) nobody can be writing it, so it is read as an
     * immutable file instead. */
    int ec = sqlite3_extended_errcode(s->db) & 0xff;
    if ((ec != SQLITE_READONLY && ec != SQLITE_CANTOPEN) || reopen_immutable(s) != 0) goto fail;
    if (check_version(s, s->db, &version, 1) != 0) goto fail;
  }
  if (version == 0) {
    ret = MDC_STORE_NOT_FOUND;
    fail(s, "an empty database: no results in it");
    goto fail;
  }
  if (check_tables(s, s->db, version) != 0) goto fail;
  {
    /* Reports walk a run by name through the (run_id, name) index, each row a seek into the
     * table: with SQLite's default 2 MB cache that is a pread per row. Reading through a bounded
     * memory map instead costs no system call per page. */
    const char *mm = getenv("MDC_STORE_MMAP_MB");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA mmap_size = %lld", (mm ? atoll(mm) : 128) * 1048576LL);
    exec(s, s->db, sql, "mmap");
  }
  s->version = (int)version;
  if (prepare_reads(s) != 0) goto fail;
  *out = s;
  return 0;
fail:
  if (err && errlen) snprintf(err, errlen, "%s", s->err);
  mdc_store_close(s);
  return ret;
}

/* Frees s and everything it owns (rolls back an open batch); NULL is fine. */
void mdc_store_close(mdc_store *s) {
  if (!s) return;
  if (s->in_batch) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_stmt *const sts[] = {s->run_insert, s->run_end,  s->case_insert,  s->case_end,
                               s->count,      s->list_runs, s->case_get,    s->campaign_put,
                               s->stat_put,   s->finding_put, s->case_interrupt};
  for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) sqlite3_finalize(sts[i]);
  sqlite3_close(s->db);
  free(s->row);
  free(s->path);
  free(s);
}

const char *mdc_store_error(const mdc_store *s) { return s ? s->err : "results store: no store"; }

int mdc_store_version(const mdc_store *s) { return s ? s->version : 0; }

/* One query on s; -1 with the message on failure. */
int mdc_store_count_cases(mdc_store *s, int64_t run_id, const char *status, uint32_t *count) {
  if (!s) return -1;
  sqlite3_stmt *st = s->count;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, status);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && count) *count = (uint32_t)sqlite3_column_int64(st, 0);
  if (rc != SQLITE_ROW) fail_db(s, s->db, "count_cases");
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_ROW ? 0 : -1;
}

/* Fills the caller's array (up to cap); -1 with the message on failure. */
int mdc_store_list_runs(mdc_store *s, int64_t *ids, size_t cap, size_t *n) {
  if (!s) return -1;
  sqlite3_stmt *st = s->list_runs;
  size_t k = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (ids && k < cap) ids[k] = sqlite3_column_int64(st, 0);
    k++;
  }
  if (rc != SQLITE_DONE) fail_db(s, s->db, "list_runs");
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return -1;
  if (n) *n = k;
  return 0;
}

/* Points *row into the statement's columns (valid until its next step). Never fails. */
void mdc_store__case_from_stmt(sqlite3_stmt *st, mdc_case_row *row) {
  row->id = sqlite3_column_int64(st, 0);
  row->run_id = sqlite3_column_int64(st, 1);
  row->name = mdc_store__text(st, 2);
  row->path = mdc_store__text(st, 3);
  row->status = mdc_store__text(st, 4);
  row->started_at = mdc_store__text(st, 5);
  row->ended_at = mdc_store__text(st, 6);
  row->duration_s = sqlite3_column_double(st, 7);
  row->line = (uint32_t)sqlite3_column_int64(st, 8);
  row->message = mdc_store__text(st, 9);
  row->expected = mdc_store__text(st, 10);
  row->actual = mdc_store__text(st, 11);
  row->event = mdc_store__text(st, 12);
  row->rule = mdc_store__text(st, 13);
  row->driver_message = mdc_store__text(st, 14);
  row->advisory = mdc_store__text(st, 15);
  row->details = mdc_store__text(st, 16);
  row->signature = mdc_store__text(st, 17);
  row->stack = mdc_store__text(st, 18);
  row->reduced = mdc_store__text(st, 19);
  row->preceded_by = mdc_store__text(st, 20);
}

/* Copies the row's strings into s's buffer (valid until the next case_get or close). */
int mdc_store_case_get(mdc_store *s, int64_t case_id, mdc_case_row *row) {
  if (!s || !row) return -1;
  sqlite3_stmt *st = s->case_get;
  sqlite3_bind_int64(st, 1, case_id);
  int rc = sqlite3_step(st);
  int ret = -1;
  if (rc == SQLITE_ROW) {
    /* The statement's strings die with its reset: copy them into the store's row buffer. */
    mdc_case_row r;
    mdc_store__case_from_stmt(st, &r);
    const char **src[] = {&r.name, &r.path, &r.status, &r.started_at, &r.ended_at, &r.message,
                          &r.expected, &r.actual, &r.event, &r.rule, &r.driver_message,
                          &r.advisory, &r.details, &r.signature, &r.stack, &r.reduced, &r.preceded_by};
    enum { NTEXT = sizeof src / sizeof src[0] };
    size_t need = 0;
    for (int i = 0; i < NTEXT; i++) need += *src[i] ? strlen(*src[i]) + 1 : 0;
    if (need > s->row_cap) {
      char *p = realloc(s->row, need);
      if (!p) {
        fail(s, "case_get: out of memory");
        goto out;
      }
      s->row = p;
      s->row_cap = need;
    }
    char *p = s->row;
    for (int i = 0; i < NTEXT; i++) {
      if (!*src[i]) continue;
      size_t len = strlen(*src[i]);
      memcpy(p, *src[i], len + 1);
      *src[i] = p;
      p += len + 1;
    }
    *row = r;
    ret = 0;
  } else if (rc == SQLITE_DONE) {
    fail(s, "case_get: case %" PRId64 ": no such case", case_id);
  } else {
    fail_db(s, s->db, "case_get");
  }
out:
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return ret;
}
