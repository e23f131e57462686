/* store.c - the results store: runs and cases in one SQLite file (docs/results-schema.md).
 *
 * Durability is the point: every case_begin and case_end is its own autocommit transaction, so
 * a process killed at any instant leaves every committed row. WAL with synchronous=NORMAL keeps
 * that cheap: a commit is an append to the -wal file, no fsync; a crash of the process (not the
 * machine) loses nothing committed. Every operation has one prepared statement, made at open and
 * reused. A file that is not ours (not a database, another program's database, a newer schema, a
 * corrupt one) is refused before anything is written to it. */
#include "mdc/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000
#define NOW "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* Every column but id, in one order shared by validation and merge. */
#define RUN_COLS                                                                                 \
  "uuid, started_at, ended_at, kind, driver_name, driver_version, driver_path, backend, "        \
  "device, config, seed, shard_index, shard_count, host, revision, cases, passed, failed, "      \
  "crashed, timed_out, unexpected"
#define RUN_NCOLS 21
#define CASE_COLS                                                                                \
  "name, path, status, started_at, ended_at, duration_s, line, message, expected, actual"
#define CASE_NCOLS 10

#define STATUS_LIST                                                                              \
  X(Pass) X(Fail) X(Crash) X(Timeout) X(NotSupported) X(ExpectedFail) X(UnexpectedPass)          \
  X(Flake) X(TraceError)

#define X(s) "'" #s "', "
static const char schema_v1[] =
  "CREATE TABLE runs (\n"
  "  id             INTEGER PRIMARY KEY,\n"
  "  uuid           TEXT NOT NULL UNIQUE,\n"
  "  started_at     TEXT NOT NULL,\n"
  "  ended_at       TEXT,\n"
  "  kind           TEXT NOT NULL,\n"
  "  driver_name    TEXT,\n"
  "  driver_version TEXT,\n"
  "  driver_path    TEXT,\n"
  "  backend        TEXT,\n"
  "  device         TEXT,\n"
  "  config         TEXT,\n"
  "  seed           INTEGER,\n"
  "  shard_index    INTEGER NOT NULL DEFAULT 0,\n"
  "  shard_count    INTEGER NOT NULL DEFAULT 1,\n"
  "  host           TEXT NOT NULL,\n"
  "  revision       TEXT NOT NULL,\n"
  "  cases          INTEGER,\n"
  "  passed         INTEGER,\n"
  "  failed         INTEGER,\n"
  "  crashed        INTEGER,\n"
  "  timed_out      INTEGER,\n"
  "  unexpected     INTEGER\n"
  ") STRICT;\n"
  "CREATE TABLE cases (\n"
  "  id         INTEGER PRIMARY KEY,\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  name       TEXT NOT NULL,\n"
  "  path       TEXT,\n"
  "  status     TEXT NOT NULL DEFAULT 'Running'\n"
  "             CHECK (status IN (" STATUS_LIST "'Running')),\n"
  "  started_at TEXT NOT NULL,\n"
  "  ended_at   TEXT,\n"
  "  duration_s REAL,\n"
  "  line       INTEGER,\n"
  "  message    TEXT,\n"
  "  expected   TEXT,\n"
  "  actual     TEXT\n"
  ") STRICT;\n"
  "CREATE INDEX cases_by_run ON cases(run_id, name);\n";
#undef X

/* upgrade[v] takes a database from schema version v to v + 1; version 0 is an empty database.
 * A future version N adds upgrade[N - 1] (ALTER TABLE ..., or a table rebuild) and bumps
 * MDC_STORE_SCHEMA_VERSION; older files are upgraded in one transaction when opened. */
static const char *const upgrade[MDC_STORE_SCHEMA_VERSION] = {schema_v1};

#define X(s) #s,
static const char *const statuses[] = {STATUS_LIST};
#undef X

struct mdc_store {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *run_insert, *run_end, *case_insert, *case_end, *count, *list_runs, *case_get;
  char *row;        /* mdc_case_row strings */
  size_t row_cap;
  char err[1024];
};

static void seterr(char *buf, size_t len, const char *path, const char *fmt, va_list ap) {
  if (!buf || !len) return;
  int n = snprintf(buf, len, "results store '%s': ", path);
  if (n >= 0 && (size_t)n < len) vsnprintf(buf + n, len - (size_t)n, fmt, ap);
}

static int fail(mdc_store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  seterr(s->err, sizeof s->err, s->path, fmt, ap);
  va_end(ap);
  return -1;
}

/* fail() with SQLite's message for the last error on db appended. */
static int fail_db(mdc_store *s, sqlite3 *db, const char *what) {
  return fail(s, "%s: %s", what, sqlite3_errmsg(db));
}

static int exec(mdc_store *s, sqlite3 *db, const char *sql, const char *what) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return fail_db(s, db, what);
  return 0;
}

/* *v gets the single integer that sql yields. */
static int query_int(mdc_store *s, sqlite3 *db, const char *sql, int64_t *v, const char *what) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, db, what);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return fail_db(s, db, what);
  return 0;
}

/* A hint to go with SQLite's "file is not a database" and friends. */
static int fail_read(mdc_store *s, sqlite3 *db) {
  int ec = sqlite3_extended_errcode(db);
  if (ec == SQLITE_NOTADB) return fail(s, "not a SQLite database (left untouched)");
  /* A WAL database needs its -shm beside it: a read-only directory or file lands here. */
  if ((ec & 0xff) == SQLITE_READONLY || (ec & 0xff) == SQLITE_CANTOPEN)
    return fail(s, "not writable (read-only file, directory or file system): %s", sqlite3_errmsg(db));
  if ((ec & 0xff) == SQLITE_CORRUPT) return fail(s, "corrupt database (left untouched): %s", sqlite3_errmsg(db));
  return fail_db(s, db, "cannot read the schema version");
}

/* Checks that schema (main or an attached one) has every table and column of this version. A
 * prepare names the first missing table or column. */
static int check_tables(mdc_store *s, sqlite3 *db) {
  static const char *const probes[] = {
    "SELECT id, " RUN_COLS " FROM runs LIMIT 0",
    "SELECT id, run_id, " CASE_COLS " FROM cases LIMIT 0",
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, probes[i], -1, &st, NULL) != SQLITE_OK)
      return fail(s, "corrupt results store, schema version %d but %s (left untouched)",
                  MDC_STORE_SCHEMA_VERSION, sqlite3_errmsg(db));
    sqlite3_finalize(st);
  }
  return 0;
}

/* Reads and judges the schema version; for_write allows an older version (to be upgraded). */
static int check_version(mdc_store *s, sqlite3 *db, int64_t *version, int for_write) {
  if (query_int(s, db, "PRAGMA user_version", version, "") != 0) return fail_read(s, db);
  if (*version > MDC_STORE_SCHEMA_VERSION)
    return fail(s, "schema version %" PRId64 " is newer than this mdc (reads up to %d); "
                "refused, left untouched", *version, MDC_STORE_SCHEMA_VERSION);
  if (*version < 0) return fail(s, "schema version %" PRId64 " is not ours; refused", *version);
  if (*version == 0) {
    int64_t objects = 0;
    if (query_int(s, db, "SELECT count(*) FROM sqlite_master", &objects, "") != 0)
      return fail_read(s, db);
    if (objects > 0)
      return fail(s, "not a results store: a SQLite database with %" PRId64 " schema objects "
                  "but no schema version (left untouched)", objects);
  }
  if (*version < MDC_STORE_SCHEMA_VERSION && !for_write)
    return fail(s, "schema version %" PRId64 " is older than %d; open it with mdc once to "
                "upgrade it", *version, MDC_STORE_SCHEMA_VERSION);
  return 0;
}

/* Creates or upgrades the schema in one write transaction, re-reading the version inside it so
 * two processes creating the same file do not both run the upgrade. */
static int upgrade_schema(mdc_store *s) {
  if (exec(s, s->db, "BEGIN IMMEDIATE", "cannot start the schema transaction") != 0) return -1;
  int64_t v;
  if (check_version(s, s->db, &v, 1) != 0) goto rollback;
  for (int64_t i = v; i < MDC_STORE_SCHEMA_VERSION; i++)
    if (exec(s, s->db, upgrade[i], "cannot create the schema") != 0) goto rollback;
  if (v < MDC_STORE_SCHEMA_VERSION) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", MDC_STORE_SCHEMA_VERSION);
    if (exec(s, s->db, sql, "cannot set the schema version") != 0) goto rollback;
  }
  if (exec(s, s->db, "COMMIT", "cannot commit the schema") != 0) goto rollback;
  return 0;
rollback:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

static int prepare(mdc_store *s, sqlite3_stmt **st, const char *sql) {
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "cannot prepare a statement");
  return 0;
}

static int prepare_all(mdc_store *s) {
  return prepare(s, &s->run_insert,
                 "INSERT INTO runs (uuid, started_at, kind, driver_name, driver_version, "
                 "driver_path, backend, device, config, seed, shard_index, shard_count, host, "
                 "revision) VALUES (?1, " NOW ", ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)") ||
         prepare(s, &s->run_end,
                 "UPDATE runs SET ended_at = " NOW ", cases = ?2, passed = ?3, failed = ?4, "
                 "crashed = ?5, timed_out = ?6, unexpected = ?7 WHERE id = ?1") ||
         prepare(s, &s->case_insert,
                 "INSERT INTO cases (run_id, name, path, status, started_at) "
                 "VALUES (?1, ?2, ?3, 'Running', " NOW ")") ||
         prepare(s, &s->case_end,
                 "UPDATE cases SET status = ?2, ended_at = " NOW ", duration_s = ?3, line = ?4, "
                 "message = ?5, expected = ?6, actual = ?7 WHERE id = ?1 AND status = 'Running'") ||
         prepare(s, &s->count,
                 "SELECT count(*) FROM cases WHERE (?1 = 0 OR run_id = ?1) "
                 "AND (?2 IS NULL OR status = ?2)") ||
         prepare(s, &s->list_runs, "SELECT id FROM runs ORDER BY id") ||
         prepare(s, &s->case_get,
                 "SELECT id, run_id, " CASE_COLS " FROM cases WHERE id = ?1")
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

static int store_new(const char *path, mdc_store **out) {
  mdc_store *s = calloc(1, sizeof *s);
  if (s) s->path = strdup(path);
  if (!s || !s->path) {
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

int mdc_store_open(const char *path, mdc_store **out, char *err, size_t errlen) {
  if (out) *out = NULL;
  if (err && errlen) err[0] = '\0';
  if (!path || !out) {
    if (err && errlen) snprintf(err, errlen, "results store: no path given");
    return -1;
  }
  mdc_store *s;
  if (store_new(path, &s) != 0) {
    if (err && errlen) snprintf(err, errlen, "results store '%s': out of memory", path);
    return -1;
  }
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
  if (version < MDC_STORE_SCHEMA_VERSION && upgrade_schema(s) != 0) goto fail;
  if (check_tables(s, s->db) != 0) goto fail;
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
  if (prepare_all(s) != 0) goto fail;
  *out = s;
  return 0;
fail:
  if (err && errlen) snprintf(err, errlen, "%s", s->err);
  mdc_store_close(s);
  return -1;
}

void mdc_store_close(mdc_store *s) {
  if (!s) return;
  sqlite3_stmt *const sts[] = {s->run_insert, s->run_end, s->case_insert, s->case_end,
                               s->count, s->list_runs, s->case_get};
  for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) sqlite3_finalize(sts[i]);
  sqlite3_close(s->db);
  free(s->row);
  free(s->path);
  free(s);
}

const char *mdc_store_error(const mdc_store *s) { return s ? s->err : "results store: no store"; }

/* RFC 4122 version 4: 122 random bits, version nibble 4, variant bits 10. */
static int make_uuid(char out[37]) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    got += (size_t)n;
  }
  if (got < sizeof b) {  /* getrandom missing (ENOSYS): the device instead */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    for (got = 0; got < sizeof b;) {
      ssize_t n = read(fd, b + got, sizeof b - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    close(fd);
    if (got < sizeof b) return -1;
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
           b[13], b[14], b[15]);
  return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, i);
}

/* Steps a write statement once and resets it; fails with what on error. */
static int step_write(mdc_store *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) fail_db(s, s->db, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

int mdc_store_run_begin(mdc_store *s, const mdc_run_info *ri, int64_t *run_id, char uuid[37]) {
  if (!s) return -1;
  if (!ri || !ri->kind || !ri->kind[0]) return fail(s, "run_begin: a run needs a kind");
  uint32_t count = ri->shard_count ? ri->shard_count : 1;
  if (ri->shard_index >= count)
    return fail(s, "run_begin: shard %" PRIu32 "/%" PRIu32 ": the index must be below the count",
                ri->shard_index, count);
  char id[37], host[256];
  if (make_uuid(id) != 0) return fail(s, "run_begin: no random bytes for a uuid: %s", strerror(errno));
  const char *h = ri->host;
  if (!h) {
    h = "unknown";
    if (gethostname(host, sizeof host) == 0) {
      host[sizeof host - 1] = '\0';
      if (host[0]) h = host;
    }
  }
  const char *rev = ri->revision;
  if (!rev) rev = getenv("MDC_REVISION");
  if (!rev || !rev[0]) rev = "unknown";
  sqlite3_stmt *st = s->run_insert;
  bind_text(st, 1, id);
  bind_text(st, 2, ri->kind);
  bind_text(st, 3, ri->driver_name);
  bind_text(st, 4, ri->driver_version);
  bind_text(st, 5, ri->driver_path);
  bind_text(st, 6, ri->backend);
  bind_text(st, 7, ri->device);
  bind_text(st, 8, ri->config);
  /* SQLite integers are signed: a seed keeps its 64 bits (printf('%llu', seed) shows it). */
  if (ri->has_seed) sqlite3_bind_int64(st, 9, (int64_t)ri->seed);
  else sqlite3_bind_null(st, 9);
  sqlite3_bind_int64(st, 10, ri->shard_index);
  sqlite3_bind_int64(st, 11, count);
  bind_text(st, 12, h);
  bind_text(st, 13, rev);
  if (step_write(s, st, "run_begin: cannot insert the run") != 0) return -1;
  if (run_id) *run_id = sqlite3_last_insert_rowid(s->db);
  if (uuid) memcpy(uuid, id, 37);
  return 0;
}

int mdc_store_run_end(mdc_store *s, int64_t run_id, uint32_t cases, uint32_t passed,
                      uint32_t failed, uint32_t crashed, uint32_t timed_out, uint32_t unexpected) {
  if (!s) return -1;
  sqlite3_stmt *st = s->run_end;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, cases);
  sqlite3_bind_int64(st, 3, passed);
  sqlite3_bind_int64(st, 4, failed);
  sqlite3_bind_int64(st, 5, crashed);
  sqlite3_bind_int64(st, 6, timed_out);
  sqlite3_bind_int64(st, 7, unexpected);
  if (step_write(s, st, "run_end: cannot update the run") != 0) return -1;
  if (sqlite3_changes(s->db) != 1) return fail(s, "run_end: run %" PRId64 ": no such run", run_id);
  return 0;
}

int mdc_store_case_begin(mdc_store *s, int64_t run_id, const char *name, const char *path,
                         int64_t *case_id) {
  if (!s) return -1;
  if (!name) return fail(s, "case_begin: run %" PRId64 ": a case needs a name", run_id);
  sqlite3_stmt *st = s->case_insert;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, name);
  bind_text(st, 3, path);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
    return fail(s, "case_begin: case '%s': run %" PRId64 ": no such run", name, run_id);
  if (rc != SQLITE_DONE) return fail_db(s, s->db, "case_begin: cannot insert the case");
  if (case_id) *case_id = sqlite3_last_insert_rowid(s->db);
  return 0;
}

static int known_status(const char *status) {
  for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
    if (strcmp(status, statuses[i]) == 0) return 1;
  return 0;
}

int mdc_store_case_end(mdc_store *s, int64_t case_id, const char *status, double duration_s,
                       uint32_t line, const char *message, const char *expected,
                       const char *actual) {
  if (!s) return -1;
  if (!status || !known_status(status))
    return fail(s, "case_end: case %" PRId64 ": unknown status '%s' (one of Pass, Fail, Crash, "
                "Timeout, NotSupported, ExpectedFail, UnexpectedPass, Flake, TraceError)",
                case_id, status ? status : "(null)");
  sqlite3_stmt *st = s->case_end;
  sqlite3_bind_int64(st, 1, case_id);
  bind_text(st, 2, status);
  sqlite3_bind_double(st, 3, duration_s);
  if (line) sqlite3_bind_int64(st, 4, line);
  else sqlite3_bind_null(st, 4);
  bind_text(st, 5, message);
  bind_text(st, 6, expected);
  bind_text(st, 7, actual);
  if (step_write(s, st, "case_end: cannot update the case") != 0) return -1;
  if (sqlite3_changes(s->db) == 1) return 0;
  mdc_case_row row;
  if (mdc_store_case_get(s, case_id, &row) != 0) return fail(s, "case_end: case %" PRId64 ": no such case", case_id);
  return fail(s, "case_end: case %" PRId64 " ('%s'): already completed as %s", case_id, row.name,
              row.status);
}

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

int mdc_store_case_get(mdc_store *s, int64_t case_id, mdc_case_row *row) {
  if (!s || !row) return -1;
  sqlite3_stmt *st = s->case_get;
  sqlite3_bind_int64(st, 1, case_id);
  int rc = sqlite3_step(st);
  int ret = -1;
  /* Text columns of CASE_COLS after id and run_id, and where each goes in *row. */
  enum { NTEXT = 8 };
  static const int col[NTEXT] = {2, 3, 4, 5, 6, 9, 10, 11};
  const char **dst[NTEXT] = {&row->name, &row->path, &row->status, &row->started_at,
                             &row->ended_at, &row->message, &row->expected, &row->actual};
  if (rc == SQLITE_ROW) {
    size_t need = 0;
    for (int i = 0; i < NTEXT; i++) need += (size_t)sqlite3_column_bytes(st, col[i]) + 1;
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
      const unsigned char *t = sqlite3_column_text(st, col[i]);
      if (!t) {
        *dst[i] = NULL;
        continue;
      }
      size_t len = (size_t)sqlite3_column_bytes(st, col[i]);
      memcpy(p, t, len + 1);
      *dst[i] = p;
      p += len + 1;
    }
    row->id = sqlite3_column_int64(st, 0);
    row->run_id = sqlite3_column_int64(st, 1);
    row->duration_s = sqlite3_column_double(st, 7);
    row->line = (uint32_t)sqlite3_column_int64(st, 8);
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

/* ---- merge ---- */

/* Opens an input read-only and checks it is a results store of this version. Never creates it. */
static int open_input(mdc_store *m, const char *path, sqlite3 **out) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) != 0) return fail(m, "merge input '%s': %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(m, "merge input '%s': not a regular file", path);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    fail(m, "merge input '%s': cannot open: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return -1;
  }
  sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
  /* Judge it with its own name in the messages: a scratch store whose path is the input's. */
  mdc_store in = {.db = db, .path = (char *)path};
  int64_t version;
  if (check_version(&in, db, &version, 0) != 0 || check_tables(&in, db) != 0) {
    /* in.err reads "results store 'input': problem"; say it as an input of this merge. */
    size_t skip = strlen("results store '") + strlen(path) + strlen("': ");
    fail(m, "merge input '%s': %s", path, strlen(in.err) >= skip ? in.err + skip : in.err);
    sqlite3_close(db);
    return -1;
  }
  *out = db;
  return 0;
}

static int copy_input(mdc_store *m, sqlite3 *in, const char *path, sqlite3_stmt *has_uuid,
                      sqlite3_stmt *ins_run, sqlite3_stmt *ins_case) {
  sqlite3_stmt *runs = NULL, *cases = NULL;
  int ret = -1, rc;
  if (sqlite3_prepare_v2(in, "SELECT id, " RUN_COLS " FROM runs ORDER BY id", -1, &runs, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(in, "SELECT " CASE_COLS " FROM cases WHERE run_id = ?1 ORDER BY id", -1,
                         &cases, NULL) != SQLITE_OK) {
    fail(m, "merge input '%s': %s", path, sqlite3_errmsg(in));
    goto out;
  }
  while ((rc = sqlite3_step(runs)) == SQLITE_ROW) {
    sqlite3_bind_value(has_uuid, 1, sqlite3_column_value(runs, 1));
    int seen = sqlite3_step(has_uuid);
    sqlite3_reset(has_uuid);
    if (seen == SQLITE_ROW) continue;  /* merged before: skipped, so a second merge is a no-op */
    if (seen != SQLITE_DONE) {
      fail_db(m, m->db, "merge: cannot look up a run");
      goto out;
    }
    for (int i = 0; i < RUN_NCOLS; i++) sqlite3_bind_value(ins_run, i + 1, sqlite3_column_value(runs, i + 1));
    if (step_write(m, ins_run, "merge: cannot insert a run") != 0) goto out;
    int64_t new_id = sqlite3_last_insert_rowid(m->db);
    sqlite3_bind_int64(cases, 1, sqlite3_column_int64(runs, 0));
    while ((rc = sqlite3_step(cases)) == SQLITE_ROW) {
      sqlite3_bind_int64(ins_case, 1, new_id);
      for (int i = 0; i < CASE_NCOLS; i++) sqlite3_bind_value(ins_case, i + 2, sqlite3_column_value(cases, i));
      if (step_write(m, ins_case, "merge: cannot insert a case") != 0) goto out;
    }
    sqlite3_reset(cases);
    if (rc != SQLITE_DONE) {
      fail(m, "merge input '%s': cannot read cases: %s", path, sqlite3_errmsg(in));
      goto out;
    }
  }
  if (rc != SQLITE_DONE) {
    fail(m, "merge input '%s': cannot read runs: %s", path, sqlite3_errmsg(in));
    goto out;
  }
  ret = 0;
out:
  sqlite3_finalize(runs);
  sqlite3_finalize(cases);
  return ret;
}

int mdc_store_merge(const char *out, const char *const *inputs, size_t n_inputs, char *err,
                    size_t errlen) {
  mdc_store *m;
  if (mdc_store_open(out, &m, err, errlen) != 0) return -1;
  sqlite3_stmt *has_uuid = NULL, *ins_run = NULL, *ins_case = NULL;
  int ret = -1, in_txn = 0;
  /* Every input is judged before anything is written. */
  for (size_t i = 0; i < n_inputs; i++) {
    sqlite3 *in;
    if (open_input(m, inputs[i], &in) != 0) goto out;
    sqlite3_close(in);
  }
  if (prepare(m, &has_uuid, "SELECT 1 FROM runs WHERE uuid = ?1") != 0 ||
      prepare(m, &ins_run, "INSERT INTO runs (" RUN_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
              "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)") != 0 ||
      prepare(m, &ins_case, "INSERT INTO cases (run_id, " CASE_COLS ") VALUES (?1, ?2, ?3, ?4, "
              "?5, ?6, ?7, ?8, ?9, ?10, ?11)") != 0)
    goto out;
  if (exec(m, m->db, "BEGIN IMMEDIATE", "merge: cannot start the transaction") != 0) goto out;
  in_txn = 1;
  for (size_t i = 0; i < n_inputs; i++) {
    sqlite3 *in;
    if (open_input(m, inputs[i], &in) != 0) goto out;
    int rc = copy_input(m, in, inputs[i], has_uuid, ins_run, ins_case);
    sqlite3_close(in);
    if (rc != 0) goto out;
  }
  if (exec(m, m->db, "COMMIT", "merge: cannot commit") != 0) goto out;
  in_txn = 0;
  ret = 0;
out:
  if (in_txn) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
  if (ret != 0 && err && errlen) snprintf(err, errlen, "%s", m->err);
  sqlite3_finalize(has_uuid);
  sqlite3_finalize(ins_run);
  sqlite3_finalize(ins_case);
  mdc_store_close(m);
  return ret;
}
