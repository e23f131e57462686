/* store.c - the results store: runs and cases in one SQLite file (docs/results-schema.md).
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
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000
#define NOW MDC_STORE__NOW

/* The status CHECK of each version, frozen: a version's step writes what that version wrote,
 * whatever the map (mdc/store.h) holds now. v1's list is v2's (the v2 step rebuilds cases
 * anyway); v3 adds Interrupted. */
#define STATUSES_V2 "'Pass', 'Fail', 'Crash', 'Timeout', 'NotSupported', 'ExpectedFail', " \
                    "'UnexpectedPass', 'Flake', 'TraceError', 'Warn', 'Running'"
#define STATUSES_V3 STATUSES_V2 ", 'Interrupted'"
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
  "             CHECK (status IN (" STATUSES_V2 ")),\n"
  "  started_at TEXT NOT NULL,\n"
  "  ended_at   TEXT,\n"
  "  duration_s REAL,\n"
  "  line       INTEGER,\n"
  "  message    TEXT,\n"
  "  expected   TEXT,\n"
  "  actual     TEXT\n"
  ") STRICT;\n"
  "CREATE INDEX cases_by_run ON cases(run_id, name);\n";

/* Version 2: the interrupted flag, the case columns a report shows, and the fuzz tables. Every
 * new column has a default, so ALTER TABLE ADD COLUMN does it in place (no table rebuild). */
static const char schema_v2[] =
  "ALTER TABLE runs ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0\n"
  "  CHECK (interrupted IN (0, 1));\n"
  /* cases is rebuilt (SQLite's procedure: a new table, the rows copied, the old one dropped and
   * the new one renamed), because its status CHECK gains Warn, which ALTER cannot change; the
   * new columns come with it. */
  "CREATE TABLE cases_v2 (\n"
  "  id         INTEGER PRIMARY KEY,\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  name       TEXT NOT NULL,\n"
  "  path       TEXT,\n"
  "  status     TEXT NOT NULL DEFAULT 'Running'\n"
  "             CHECK (status IN (" STATUSES_V2 ")),\n"
  "  started_at TEXT NOT NULL,\n"
  "  ended_at   TEXT,\n"
  "  duration_s REAL,\n"
  "  line       INTEGER,\n"
  "  message    TEXT,\n"
  "  expected   TEXT,\n"
  "  actual     TEXT,\n"
  "  event      TEXT,\n"
  "  rule       TEXT,\n"
  "  driver_message TEXT,\n"
  "  advisory   TEXT,\n"
  "  details    TEXT CHECK (details IS NULL OR json_valid(details))\n"
  ") STRICT;\n"
  "INSERT INTO cases_v2 (id, run_id, name, path, status, started_at, ended_at, duration_s, line,\n"
  "                      message, expected, actual)\n"
  "  SELECT id, run_id, name, path, status, started_at, ended_at, duration_s, line, message,\n"
  "         expected, actual FROM cases;\n"
  "DROP TABLE cases;\n"
  "ALTER TABLE cases_v2 RENAME TO cases;\n"
  /* The index also carries the status, so a report reads names and statuses of a run (counts,
   * the baseline side of a comparison, verdict changes) from the index alone. */
  "CREATE INDEX cases_by_run ON cases(run_id, name, status);\n"
  "CREATE TABLE fuzz_campaigns (\n"
  "  run_id     INTEGER PRIMARY KEY REFERENCES runs(id),\n"
  "  target     TEXT NOT NULL,\n"
  "  jobs       INTEGER NOT NULL,\n"
  "  planned_s  REAL,\n"
  "  out_dir    TEXT,\n"
  "  resumed    INTEGER NOT NULL DEFAULT 0 CHECK (resumed IN (0, 1))\n"
  ") STRICT;\n"
  "CREATE TABLE fuzz_stats (\n"
  "  run_id        INTEGER NOT NULL REFERENCES runs(id),\n"
  "  instance      TEXT NOT NULL,\n"
  "  t_s           REAL NOT NULL,\n"
  "  execs         INTEGER,\n"
  "  execs_per_sec REAL,\n"
  "  edges         INTEGER,\n"
  "  corpus        INTEGER,\n"
  "  crashes       INTEGER,\n"
  "  hangs         INTEGER,\n"
  "  stability     REAL,\n"
  "  rss_kb        INTEGER,\n"
  "  PRIMARY KEY (run_id, instance, t_s)\n"
  ") STRICT;\n"
  "CREATE TABLE fuzz_findings (\n"
  "  id         INTEGER PRIMARY KEY,\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  target     TEXT NOT NULL,\n"
  "  signature  TEXT NOT NULL,\n"
  "  kind       TEXT NOT NULL CHECK (kind IN ('crash', 'hang', 'oracle')),\n"
  "  message    TEXT,\n"
  "  count      INTEGER NOT NULL,\n"
  "  first_seen TEXT NOT NULL,\n"
  "  last_seen  TEXT NOT NULL,\n"
  "  replays    INTEGER,\n"
  "  reproduced INTEGER,\n"
  "  reproducer TEXT,\n"
  "  minimized  TEXT,\n"
  "  trace      TEXT,\n"
  "  UNIQUE (run_id, signature)\n"
  ") STRICT;\n";

/* Version 3: the status Interrupted, a case that was running when its run was stopped by a
 * signal (it was left Running, like one whose run never ended). cases is rebuilt for its CHECK,
 * as v2 did; no column changes; the Running cases of interrupted runs become Interrupted. */
static const char schema_v3[] =
  "CREATE TABLE cases_v3 (\n"
  "  id         INTEGER PRIMARY KEY,\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  name       TEXT NOT NULL,\n"
  "  path       TEXT,\n"
  "  status     TEXT NOT NULL DEFAULT 'Running'\n"
  "             CHECK (status IN (" STATUSES_V3 ")),\n"
  "  started_at TEXT NOT NULL,\n"
  "  ended_at   TEXT,\n"
  "  duration_s REAL,\n"
  "  line       INTEGER,\n"
  "  message    TEXT,\n"
  "  expected   TEXT,\n"
  "  actual     TEXT,\n"
  "  event      TEXT,\n"
  "  rule       TEXT,\n"
  "  driver_message TEXT,\n"
  "  advisory   TEXT,\n"
  "  details    TEXT CHECK (details IS NULL OR json_valid(details))\n"
  ") STRICT;\n"
  "INSERT INTO cases_v3 SELECT id, run_id, name, path, status, started_at, ended_at, duration_s, line,\n"
  "  message, expected, actual, event, rule, driver_message, advisory, details FROM cases;\n"
  "DROP TABLE cases;\n"
  "ALTER TABLE cases_v3 RENAME TO cases;\n"
  "CREATE INDEX cases_by_run ON cases(run_id, name, status);\n"
  /* What v2 left Running in a run that ended interrupted was interrupted: say so, ended when
   * its run ended. A run that never ended (killed) keeps its Running case. */
  "UPDATE cases SET status = 'Interrupted', ended_at = (SELECT ended_at FROM runs WHERE runs.id = cases.run_id)\n"
  "  WHERE status = 'Running' AND run_id IN (SELECT id FROM runs WHERE interrupted = 1 AND ended_at IS NOT NULL);\n";

/* upgrade[v] takes a database from schema version v to v + 1; version 0 is an empty database,
 * so a new file runs every step and ends exactly like an upgraded one. A future version N adds
 * upgrade[N - 1] (ALTER TABLE ..., or a table rebuild) and bumps MDC_STORE_SCHEMA_VERSION;
 * older files are upgraded in one transaction when opened for writing. */
static const char *const upgrade[MDC_STORE_SCHEMA_VERSION] = {schema_v1, schema_v2, schema_v3};

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

/* Checks that the file has every table and column of its schema version. A prepare names the
 * first missing table or column. */
static int check_tables(mdc_store *s, sqlite3 *db, int64_t version) {
  static const char *const probes_v1[] = {
    "SELECT id, " MDC_STORE__RUN_COLS_V1 " FROM runs LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__CASE_COLS_V1 " FROM cases LIMIT 0",
  };
  static const char *const probes_v2[] = {
    "SELECT id, " MDC_STORE__RUN_COLS " FROM runs LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__CASE_COLS " FROM cases LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS " FROM fuzz_campaigns LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings LIMIT 0",
  };
  const char *const *probes = version >= 2 ? probes_v2 : probes_v1;
  size_t n = version >= 2 ? sizeof probes_v2 / sizeof *probes_v2 : sizeof probes_v1 / sizeof *probes_v1;
  for (size_t i = 0; i < n; i++) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, probes[i], -1, &st, NULL) != SQLITE_OK)
      return fail(s, "corrupt results store, schema version %" PRId64 " but %s (left untouched)",
                  version, sqlite3_errmsg(db));
    sqlite3_finalize(st);
  }
  return 0;
}

/* Reads and judges the schema version; older_ok allows an older version (to be upgraded, or
 * read as it is). */
static int check_version(mdc_store *s, sqlite3 *db, int64_t *version, int older_ok) {
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
  if (*version < MDC_STORE_SCHEMA_VERSION && !older_ok)
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
  /* An old file must really be that version before it is built upon. */
  if (v > 0 && check_tables(s, s->db, v) != 0) goto rollback;
  for (int64_t i = v; i < MDC_STORE_SCHEMA_VERSION; i++) {
    char what[64];
    snprintf(what, sizeof what, i ? "cannot upgrade the schema to version %d" : "cannot create the schema",
             (int)i + 1);
    if (exec(s, s->db, upgrade[i], what) != 0) goto rollback;
  }
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

/* The statements both modes use; their SQL reads the file's own version. */
static int prepare_reads(mdc_store *s) {
  const char *cols = s->version >= 2 ? MDC_STORE__CASE_COLS : MDC_STORE__CASE_COLS_V1_AS;
  char get[512];
  snprintf(get, sizeof get, "SELECT id, run_id, %s FROM cases WHERE id = ?1", cols);
  return prepare(s, &s->count,
                 "SELECT count(*) FROM cases WHERE (?1 = 0 OR run_id = ?1) "
                 "AND (?2 IS NULL OR status = ?2)") ||
         prepare(s, &s->list_runs, "SELECT id FROM runs ORDER BY id") ||
         prepare(s, &s->case_get, get)
           ? -1 : 0;
}

static int prepare_writes(mdc_store *s) {
  return prepare(s, &s->run_insert,
                 "INSERT INTO runs (uuid, started_at, kind, driver_name, driver_version, "
                 "driver_path, backend, device, config, seed, shard_index, shard_count, host, "
                 "revision) VALUES (?1, " NOW ", ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)") ||
         prepare(s, &s->run_end,
                 "UPDATE runs SET ended_at = " NOW ", cases = ?2, passed = ?3, failed = ?4, "
                 "crashed = ?5, timed_out = ?6, unexpected = ?7, interrupted = ?8 WHERE id = ?1") ||
         prepare(s, &s->case_interrupt,
                 "UPDATE cases SET status = 'Interrupted', ended_at = " NOW " "
                 "WHERE run_id = ?1 AND status = 'Running'") ||
         prepare(s, &s->case_insert,
                 "INSERT INTO cases (run_id, name, path, status, started_at) "
                 "VALUES (?1, ?2, ?3, 'Running', " NOW ")") ||
         prepare(s, &s->case_end,
                 "UPDATE cases SET status = ?2, ended_at = " NOW ", duration_s = ?3, line = ?4, "
                 "message = ?5, expected = ?6, actual = ?7, event = ?8, rule = ?9, "
                 "driver_message = ?10, advisory = ?11, details = ?12 "
                 "WHERE id = ?1 AND status = 'Running'") ||
         prepare(s, &s->campaign_put,
                 "INSERT INTO fuzz_campaigns (run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS ") "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (run_id) DO UPDATE SET "
                 "target = excluded.target, jobs = excluded.jobs, planned_s = excluded.planned_s, "
                 "out_dir = excluded.out_dir, resumed = excluded.resumed") ||
         prepare(s, &s->stat_put,
                 "INSERT INTO fuzz_stats (run_id, " MDC_STORE__FUZZ_STAT_COLS ") "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
                 "ON CONFLICT (run_id, instance, t_s) DO UPDATE SET execs = excluded.execs, "
                 "execs_per_sec = excluded.execs_per_sec, edges = excluded.edges, "
                 "corpus = excluded.corpus, crashes = excluded.crashes, hangs = excluded.hangs, "
                 "stability = excluded.stability, rss_kb = excluded.rss_kb") ||
         prepare(s, &s->finding_put,
                 "INSERT INTO fuzz_findings (run_id, " MDC_STORE__FUZZ_FINDING_COLS ") "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, coalesce(?7, " NOW "), coalesce(?7, " NOW "), "
                 "?8, ?9, ?10, ?11, ?12) "
                 "ON CONFLICT (run_id, signature) DO UPDATE SET count = count + excluded.count, "
                 "first_seen = min(first_seen, excluded.first_seen), "
                 "last_seen = max(last_seen, excluded.last_seen), "
                 "message = coalesce(excluded.message, message), "
                 "replays = coalesce(excluded.replays, replays), "
                 "reproduced = coalesce(excluded.reproduced, reproduced), "
                 "reproducer = coalesce(excluded.reproducer, reproducer), "
                 "minimized = coalesce(excluded.minimized, minimized), "
                 "trace = coalesce(excluded.trace, trace) RETURNING id")
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
static mdc_store *store_new(const char *path, char *err, size_t errlen) {
  mdc_store *s = calloc(1, sizeof *s);
  if (s) s->path = strdup(path);
  if (!s || !s->path) {
    free(s);
    if (err && errlen) snprintf(err, errlen, "results store '%s': out of memory", path);
    return NULL;
  }
  return s;
}

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
  if (version < MDC_STORE_SCHEMA_VERSION && upgrade_schema(s) != 0) goto fail;
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
  if (prepare_reads(s) != 0 || prepare_writes(s) != 0) goto fail;
  *out = s;
  return 0;
fail:
  if (err && errlen) snprintf(err, errlen, "%s", s->err);
  mdc_store_close(s);
  return -1;
}

/* The caller owns *out. Never writes the file; MDC_STORE_NOT_FOUND or -1 with err set on
 * failure (store.h). */
/* sqlite3_open_v2 of a file: URI with the path percent-encoded where URI syntax would take it
 * apart, and the given query. */
static int open_uri(const char *path, const char *query, sqlite3 **db) {
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

/* 0 when s may be written; else -1 saying what was refused. */
static int writable(mdc_store *s, const char *what) {
  if (s->readonly) return fail(s, "%s: the store was opened read-only", what);
  return 0;
}

/* Starts one write transaction on s (one store per thread); -1 and nothing started on failure. */
int mdc_store_batch_begin(mdc_store *s) {
  if (!s) return -1;
  if (writable(s, "batch_begin")) return -1;
  if (s->in_batch) return fail(s, "batch_begin: a batch is already open");
  if (exec(s, s->db, "BEGIN IMMEDIATE", "batch_begin: cannot start the transaction") != 0) return -1;
  s->in_batch = 1;
  return 0;
}

/* Commits (or rolls back) the batch; a failed commit rolls back and returns -1. */
int mdc_store_batch_end(mdc_store *s, int commit) {
  if (!s) return -1;
  if (!s->in_batch) return fail(s, "batch_end: no batch is open");
  s->in_batch = 0;
  if (commit && exec(s, s->db, "COMMIT", "batch_end: cannot commit") == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return commit ? -1 : 0;
}

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

/* Steps a write statement once and resets it; fails with what on error. */
static int step_write(mdc_store *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) fail_db(s, s->db, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

/* Inserts and commits the run row; on failure nothing is written (store.h). */
static int run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum);

int mdc_store_run_begin(mdc_store *s, const mdc_run_info *ri, int64_t *run_id, char uuid[37]) {
  if (!s) return -1;
  if (writable(s, "run_begin")) return -1;
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

/* Sets ended_at, the counts and interrupted, and for an interrupted run turns its Running cases
 * into Interrupted, all or nothing (a savepoint, or the open batch); -1 (no change) for no such
 * run. */
int mdc_store_run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum) {
  if (!s) return -1;
  if (writable(s, "run_end")) return -1;
  if (!sum) return fail(s, "run_end: run %" PRId64 ": no summary given", run_id);
  int own = !s->in_batch;
  if (own && exec(s, s->db, "SAVEPOINT run_end", "run_end: cannot start the transaction") != 0) return -1;
  int rc = run_finish(s, run_id, sum);
  if (!own) return rc;
  if (rc == 0 && exec(s, s->db, "RELEASE run_end", "run_end: cannot commit") == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK TO run_end; RELEASE run_end", NULL, NULL, NULL);
  return -1;
}

static int run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum) {
  if (sum->interrupted) {
    sqlite3_stmt *ci = s->case_interrupt;
    sqlite3_bind_int64(ci, 1, run_id);
    if (step_write(s, ci, "run_end: cannot mark the running cases interrupted") != 0) return -1;
  }
  sqlite3_stmt *st = s->run_end;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, sum->cases);
  sqlite3_bind_int64(st, 3, sum->passed);
  sqlite3_bind_int64(st, 4, sum->failed);
  sqlite3_bind_int64(st, 5, sum->crashed);
  sqlite3_bind_int64(st, 6, sum->timed_out);
  sqlite3_bind_int64(st, 7, sum->unexpected);
  sqlite3_bind_int64(st, 8, sum->interrupted ? 1 : 0);
  if (step_write(s, st, "run_end: cannot update the run") != 0) return -1;
  if (sqlite3_changes(s->db) != 1) return fail(s, "run_end: run %" PRId64 ": no such run", run_id);
  return 0;
}

/* mdc_store_run_finish with interrupted 0 (kept for v1 callers). */
int mdc_store_run_end(mdc_store *s, int64_t run_id, uint32_t cases, uint32_t passed,
                      uint32_t failed, uint32_t crashed, uint32_t timed_out, uint32_t unexpected) {
  mdc_run_summary sum = {cases, passed, failed, crashed, timed_out, unexpected, 0};
  return mdc_store_run_finish(s, run_id, &sum);
}

/* Inserts the case as Running and commits; -1 and nothing written on failure. */
int mdc_store_case_begin(mdc_store *s, int64_t run_id, const char *name, const char *path,
                         int64_t *case_id) {
  if (!s) return -1;
  if (writable(s, "case_begin")) return -1;
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

/* Completes a Running case in one statement; -1 and no change on a bad status, bad JSON
 * details, or a case that is not Running. */
int mdc_store_case_finish(mdc_store *s, int64_t case_id, const mdc_case_result *r) {
  if (!s) return -1;
  if (writable(s, "case_end")) return -1;
  if (!r) return fail(s, "case_end: case %" PRId64 ": no result given", case_id);
  int known = mdc_store_status_parse(r->status);
  if (known < 0 || known == MDC_CS_RUNNING)
    return fail(s, "case_end: case %" PRId64 ": unknown status '%s' (one of Pass, Fail, Crash, "
                "Timeout, NotSupported, ExpectedFail, UnexpectedPass, Flake, TraceError)",
                case_id, r->status ? r->status : "(null)");
  sqlite3_stmt *st = s->case_end;
  sqlite3_bind_int64(st, 1, case_id);
  bind_text(st, 2, r->status);
  sqlite3_bind_double(st, 3, r->duration_s);
  if (r->line) sqlite3_bind_int64(st, 4, r->line);
  else sqlite3_bind_null(st, 4);
  bind_text(st, 5, r->message);
  bind_text(st, 6, r->expected);
  bind_text(st, 7, r->actual);
  bind_text(st, 8, r->event);
  bind_text(st, 9, r->rule);
  bind_text(st, 10, r->driver_message);
  bind_text(st, 11, r->advisory);
  bind_text(st, 12, r->details);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_CONSTRAINT_CHECK)
    return fail(s, "case_end: case %" PRId64 ": details are not valid JSON: %.200s", case_id,
                r->details ? r->details : "");
  if (rc != SQLITE_DONE) return fail_db(s, s->db, "case_end: cannot update the case");
  if (sqlite3_changes(s->db) == 1) return 0;
  mdc_case_row row;
  if (mdc_store_case_get(s, case_id, &row) != 0) return fail(s, "case_end: case %" PRId64 ": no such case", case_id);
  return fail(s, "case_end: case %" PRId64 " ('%s'): already completed as %s", case_id, row.name,
              row.status);
}

/* mdc_store_case_finish with the v1 columns only. */
int mdc_store_case_end(mdc_store *s, int64_t case_id, const char *status, double duration_s,
                       uint32_t line, const char *message, const char *expected,
                       const char *actual) {
  mdc_case_result r = {.status = status, .duration_s = duration_s, .line = line,
                       .message = message, .expected = expected, .actual = actual};
  return mdc_store_case_finish(s, case_id, &r);
}

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
                          &r.advisory, &r.details};
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

/* ---- fuzz campaigns ---- */

static void bind_count(sqlite3_stmt *st, int i, int64_t v) {
  if (v >= 0) sqlite3_bind_int64(st, i, v);
  else sqlite3_bind_null(st, i);
}

static void bind_rate(sqlite3_stmt *st, int i, double v) {
  if (!isnan(v) && v >= 0) sqlite3_bind_double(st, i, v);
  else sqlite3_bind_null(st, i);
}

/* A write that names a run: the foreign key's failure said as "no such run". */
static int step_run_write(mdc_store *s, sqlite3_stmt *st, int64_t run_id, const char *what) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return 0;
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) return fail(s, "%s: run %" PRId64 ": no such run", what, run_id);
  return fail_db(s, s->db, what);
}

/* Upserts the campaign row of run_id (one statement); -1 and no change on failure. */
int mdc_store_fuzz_campaign(mdc_store *s, int64_t run_id, const mdc_fuzz_campaign *c) {
  if (!s) return -1;
  if (writable(s, "fuzz_campaign")) return -1;
  if (!c || !c->target || !c->target[0]) return fail(s, "fuzz_campaign: run %" PRId64 ": a campaign needs a target", run_id);
  sqlite3_stmt *st = s->campaign_put;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, c->target);
  sqlite3_bind_int64(st, 3, c->jobs);
  bind_rate(st, 4, c->planned_s);
  bind_text(st, 5, c->out_dir);
  sqlite3_bind_int64(st, 6, c->resumed ? 1 : 0);
  return step_run_write(s, st, run_id, "fuzz_campaign");
}

/* All n samples or none (a savepoint, or the open batch); -1 with the message on failure. */
int mdc_store_fuzz_stats(mdc_store *s, int64_t run_id, const mdc_fuzz_stat *v, size_t n) {
  if (!s) return -1;
  if (writable(s, "fuzz_stats")) return -1;
  for (size_t i = 0; i < n; i++)
    if (!v[i].instance || !v[i].instance[0] || isnan(v[i].t_s))
      return fail(s, "fuzz_stats: run %" PRId64 ": sample %zu needs an instance and a time", run_id, i);
  int own = !s->in_batch;
  if (own && exec(s, s->db, "SAVEPOINT fuzz_stats", "fuzz_stats: cannot start the transaction") != 0) return -1;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    sqlite3_stmt *st = s->stat_put;
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, v[i].instance);
    sqlite3_bind_double(st, 3, v[i].t_s);
    bind_count(st, 4, v[i].execs);
    bind_rate(st, 5, v[i].execs_per_sec);
    bind_count(st, 6, v[i].edges);
    bind_count(st, 7, v[i].corpus);
    bind_count(st, 8, v[i].crashes);
    bind_count(st, 9, v[i].hangs);
    bind_rate(st, 10, v[i].stability);
    bind_count(st, 11, v[i].rss_kb);
    rc = step_run_write(s, st, run_id, "fuzz_stats");
  }
  if (!own) return rc;
  if (rc == 0 && exec(s, s->db, "RELEASE fuzz_stats", "fuzz_stats: cannot commit") == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK TO fuzz_stats; RELEASE fuzz_stats", NULL, NULL, NULL);
  return -1;
}

/* Upserts one finding (one statement); -1 and no change on failure. */
int mdc_store_fuzz_finding(mdc_store *s, int64_t run_id, const mdc_fuzz_finding *f,
                           int64_t *finding_id) {
  if (!s) return -1;
  if (writable(s, "fuzz_finding")) return -1;
  if (!f || !f->target || !f->target[0] || !f->signature || !f->signature[0])
    return fail(s, "fuzz_finding: run %" PRId64 ": a finding needs a target and a signature", run_id);
  if (!f->kind || (strcmp(f->kind, "crash") && strcmp(f->kind, "hang") && strcmp(f->kind, "oracle")))
    return fail(s, "fuzz_finding: run %" PRId64 ": finding '%s': kind '%s' is not crash, hang or oracle",
                run_id, f->signature, f->kind ? f->kind : "(null)");
  sqlite3_stmt *st = s->finding_put;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, f->target);
  bind_text(st, 3, f->signature);
  bind_text(st, 4, f->kind);
  bind_text(st, 5, f->message);
  sqlite3_bind_int64(st, 6, f->count ? f->count : 1);
  bind_text(st, 7, f->seen_at);
  bind_count(st, 8, f->replays);
  bind_count(st, 9, f->reproduced);
  bind_text(st, 10, f->reproducer);
  bind_text(st, 11, f->minimized);
  bind_text(st, 12, f->trace);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && finding_id) *finding_id = sqlite3_column_int64(st, 0);
  if (rc == SQLITE_ROW) rc = sqlite3_step(st); /* RETURNING: the row, then done */
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_DONE) return 0;
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) return fail(s, "fuzz_finding: run %" PRId64 ": no such run", run_id);
  return fail_db(s, s->db, "fuzz_finding: cannot write the finding");
}

/* ---- merge ---- */

/* Opens an input read-only and checks it is a results store (this version or older). Never
 * creates it. *version gets its schema version. */
/* A merge input, opened so that nothing is written beside it: as an immutable file when no -wal
 * beside it holds changes (no -shm, no locks, works in a read-only folder), else as a private
 * copy of the file and its -wal in a temporary folder (SQLite needs a -shm beside a -wal to
 * read it, which the input's folder may not allow, and which must not be left there). */
typedef struct merge_input {
  sqlite3 *db;
  char tmp[64];     /* the private copy's folder, "" when none */
} merge_input;

/* Copies src to dst (a new file). 0, or -1 with errno. */
static int copy_file(const char *src, const char *dst) {
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
  if (in >= 0) out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (in >= 0 && out >= 0) {
    char buf[65536];
    ssize_t n;
    rc = 0;
    while ((n = read(in, buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || write(out, buf, (size_t)n) != n) {
        rc = -1;
        break;
      }
    }
  }
  int e = errno;
  if (in >= 0) close(in);
  if (out >= 0 && close(out) != 0) rc = -1;
  errno = e;
  return rc;
}

static void close_input(merge_input *mi) {
  sqlite3_close(mi->db);
  mi->db = NULL;
  if (mi->tmp[0]) {
    static const char *const files[] = {"/in.db", "/in.db-wal", "/in.db-shm"};
    char p[128];
    for (int i = 0; i < 3; i++) {
      snprintf(p, sizeof p, "%s%s", mi->tmp, files[i]);
      unlink(p);
    }
    rmdir(mi->tmp);
    mi->tmp[0] = '\0';
  }
}

static int open_input(mdc_store *m, const char *path, merge_input *mi, int64_t *version) {
  memset(mi, 0, sizeof *mi);
  struct stat st, wst;
  if (stat(path, &st) != 0) return fail(m, "merge input '%s': %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(m, "merge input '%s': not a regular file", path);
  char wal[4200];
  if (snprintf(wal, sizeof wal, "%s-wal", path) >= (int)sizeof wal) return fail(m, "merge input '%s': path too long", path);
  int rc;
  if (stat(wal, &wst) == 0 && wst.st_size > 0) {
    snprintf(mi->tmp, sizeof mi->tmp, "/tmp/mdc-merge-XXXXXX");
    char db[128], dwal[128];
    if (!mkdtemp(mi->tmp)) {
      mi->tmp[0] = '\0';
      return fail(m, "merge input '%s': cannot make a private copy: %s", path, strerror(errno));
    }
    snprintf(db, sizeof db, "%s/in.db", mi->tmp);
    snprintf(dwal, sizeof dwal, "%s/in.db-wal", mi->tmp);
    if (copy_file(path, db) != 0 || copy_file(wal, dwal) != 0) {
      int e = errno;
      close_input(mi);
      return fail(m, "merge input '%s': cannot make a private copy: %s", path, strerror(e));
    }
    rc = sqlite3_open_v2(db, &mi->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  } else {
    rc = open_uri(path, "?immutable=1", &mi->db);
  }
  if (rc != SQLITE_OK) {
    fail(m, "merge input '%s': cannot open: %s", path, mi->db ? sqlite3_errmsg(mi->db) : "out of memory");
    close_input(mi);
    return -1;
  }
  sqlite3_busy_timeout(mi->db, BUSY_TIMEOUT_MS);
  /* Judge it with its own name in the messages: a scratch store whose path is the input's. */
  mdc_store in = {.db = mi->db, .path = (char *)path};
  if (check_version(&in, mi->db, version, 1) != 0 || (*version > 0 && check_tables(&in, mi->db, *version) != 0)) {
    /* in.err reads "results store 'input': problem"; say it as an input of this merge. */
    size_t skip = strlen("results store '") + strlen(path) + strlen("': ");
    fail(m, "merge input '%s': %s", path, strlen(in.err) >= skip ? in.err + skip : in.err);
    close_input(mi);
    return -1;
  }
  return 0;
}

typedef struct merge_sql {
  sqlite3_stmt *has_uuid, *ins_run, *ins_case, *ins_campaign, *ins_stat, *ins_finding;
} merge_sql;

/* Copies every row that `sel` (bound to the input's run id as ?1) yields into `ins`, whose ?1
 * is the run's new id and ?2.. the selected columns. */
static int copy_rows(mdc_store *m, sqlite3 *in, const char *path, sqlite3_stmt *sel, sqlite3_stmt *ins,
                     int64_t old_id, int64_t new_id, const char *what) {
  int rc;
  int ncol = sqlite3_column_count(sel);
  sqlite3_bind_int64(sel, 1, old_id);
  while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
    sqlite3_bind_int64(ins, 1, new_id);
    for (int i = 0; i < ncol; i++) sqlite3_bind_value(ins, i + 2, sqlite3_column_value(sel, i));
    if (step_write(m, ins, what) != 0) {
      sqlite3_reset(sel);
      return -1;
    }
  }
  sqlite3_reset(sel);
  if (rc != SQLITE_DONE) return fail(m, "merge input '%s': cannot read (%s): %s", path, what, sqlite3_errmsg(in));
  return 0;
}

static int copy_input(mdc_store *m, sqlite3 *in, const char *path, int64_t version, const merge_sql *q) {
  sqlite3_stmt *runs = NULL, *cases = NULL, *camp = NULL, *stats = NULL, *finds = NULL;
  int ret = -1, rc;
  const char *run_sql = version >= 2 ? "SELECT id, " MDC_STORE__RUN_COLS " FROM runs ORDER BY id"
                                     : "SELECT id, " MDC_STORE__RUN_COLS_V1_AS " FROM runs ORDER BY id";
  const char *case_sql = version >= 2
                           ? "SELECT " MDC_STORE__CASE_COLS " FROM cases WHERE run_id = ?1 ORDER BY id"
                           : "SELECT " MDC_STORE__CASE_COLS_V1_AS " FROM cases WHERE run_id = ?1 ORDER BY id";
  if (sqlite3_prepare_v2(in, run_sql, -1, &runs, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(in, case_sql, -1, &cases, NULL) != SQLITE_OK ||
      (version >= 2 &&
       (sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_CAMPAIGN_COLS " FROM fuzz_campaigns WHERE run_id = ?1",
                           -1, &camp, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats WHERE run_id = ?1 "
                           "ORDER BY instance, t_s", -1, &stats, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings WHERE run_id = ?1 "
                           "ORDER BY id", -1, &finds, NULL) != SQLITE_OK))) {
    fail(m, "merge input '%s': %s", path, sqlite3_errmsg(in));
    goto out;
  }
  while ((rc = sqlite3_step(runs)) == SQLITE_ROW) {
    sqlite3_bind_value(q->has_uuid, 1, sqlite3_column_value(runs, 1));
    int seen = sqlite3_step(q->has_uuid);
    sqlite3_reset(q->has_uuid);
    if (seen == SQLITE_ROW) continue;  /* merged before: skipped, so a second merge is a no-op */
    if (seen != SQLITE_DONE) {
      fail_db(m, m->db, "merge: cannot look up a run");
      goto out;
    }
    for (int i = 0; i < MDC_STORE__RUN_NCOLS; i++) sqlite3_bind_value(q->ins_run, i + 1, sqlite3_column_value(runs, i + 1));
    if (step_write(m, q->ins_run, "merge: cannot insert a run") != 0) goto out;
    int64_t old_id = sqlite3_column_int64(runs, 0), new_id = sqlite3_last_insert_rowid(m->db);
    if (copy_rows(m, in, path, cases, q->ins_case, old_id, new_id, "merge: cases") != 0) goto out;
    if (version >= 2 &&
        (copy_rows(m, in, path, camp, q->ins_campaign, old_id, new_id, "merge: fuzz campaign") != 0 ||
         copy_rows(m, in, path, stats, q->ins_stat, old_id, new_id, "merge: fuzz stats") != 0 ||
         copy_rows(m, in, path, finds, q->ins_finding, old_id, new_id, "merge: fuzz findings") != 0))
      goto out;
  }
  if (rc != SQLITE_DONE) {
    fail(m, "merge input '%s': cannot read runs: %s", path, sqlite3_errmsg(in));
    goto out;
  }
  ret = 0;
out:
  sqlite3_finalize(runs);
  sqlite3_finalize(cases);
  sqlite3_finalize(camp);
  sqlite3_finalize(stats);
  sqlite3_finalize(finds);
  return ret;
}

/* Opens out and reads the inputs read-only; one transaction on out, rolled back on any
 * failure (store.h). Thread-safe for different outputs. */
int mdc_store_merge(const char *out, const char *const *inputs, size_t n_inputs, char *err,
                    size_t errlen) {
  /* Every input is judged before OUT is made or written: a merge that fails on an input leaves no
   * OUT behind (and an OUT it made itself is removed if a later step fails). */
  mdc_store *m = store_new(out, err, errlen);
  if (!m) return -1;
  merge_sql q = {0};
  int ret = -1, in_txn = 0, made = 0;
  int64_t version;
  for (size_t i = 0; i < n_inputs; i++) {
    merge_input mi;
    if (open_input(m, inputs[i], &mi, &version) != 0) goto out;
    close_input(&mi);
  }
  struct stat ost;
  made = stat(out, &ost) != 0 || ost.st_size == 0;
  mdc_store_close(m);
  if (mdc_store_open(out, &m, err, errlen) != 0) {
    m = NULL;
    goto out;
  }
  if (prepare(m, &q.has_uuid, "SELECT 1 FROM runs WHERE uuid = ?1") != 0 ||
      prepare(m, &q.ins_run, "INSERT INTO runs (" MDC_STORE__RUN_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
              "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)") != 0 ||
      prepare(m, &q.ins_case, "INSERT INTO cases (run_id, " MDC_STORE__CASE_COLS ") VALUES (?1, ?2, ?3, "
              "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)") != 0 ||
      prepare(m, &q.ins_campaign, "INSERT INTO fuzz_campaigns (run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS
              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)") != 0 ||
      prepare(m, &q.ins_stat, "INSERT INTO fuzz_stats (run_id, " MDC_STORE__FUZZ_STAT_COLS ") VALUES "
              "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)") != 0 ||
      prepare(m, &q.ins_finding, "INSERT INTO fuzz_findings (run_id, " MDC_STORE__FUZZ_FINDING_COLS
              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)") != 0)
    goto out;
  if (exec(m, m->db, "BEGIN IMMEDIATE", "merge: cannot start the transaction") != 0) goto out;
  in_txn = 1;
  for (size_t i = 0; i < n_inputs; i++) {
    merge_input mi;
    if (open_input(m, inputs[i], &mi, &version) != 0) goto out;
    /* An empty database (version 0) holds nothing to copy. */
    int rc = version > 0 ? copy_input(m, mi.db, inputs[i], version, &q) : 0;
    close_input(&mi);
    if (rc != 0) goto out;
  }
  if (exec(m, m->db, "COMMIT", "merge: cannot commit") != 0) goto out;
  in_txn = 0;
  ret = 0;
out:
  if (m && in_txn) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
  if (m && ret != 0 && err && errlen) snprintf(err, errlen, "%s", m->err);
  sqlite3_stmt *const sts[] = {q.has_uuid, q.ins_run, q.ins_case, q.ins_campaign, q.ins_stat, q.ins_finding};
  for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) sqlite3_finalize(sts[i]);
  mdc_store_close(m);
  if (ret != 0 && m && made) {
    /* An OUT this merge made and could not fill: gone, with its WAL files. */
    char p[4200];
    unlink(out);
    snprintf(p, sizeof p, "%s-wal", out);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", out);
    unlink(p);
  }
  return ret;
}
