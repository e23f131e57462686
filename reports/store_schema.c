/* store_schema.c - the results store's schema: the SQL of each version, frozen, the steps that
 * upgrade a file from one version to the next, and the checks that judge a file's version and
 * tables before anything is written to it (docs/results-schema.md). */
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>

#define fail mdc_store__fail
#define fail_db mdc_store__fail_db
#define exec mdc_store__exec

/* The status CHECK of each version, frozen: a version's step writes what that version wrote,
 * whatever the map (mdc/store.h) holds now. v1's list is v2's (the v2 step rebuilds cases
 * anyway); v3 adds Interrupted. */
#define STATUSES_V2 "'Pass', 'Fail', 'Crash', 'Timeout', 'NotSupported', 'ExpectedFail', " \
                    "'UnexpectedPass', 'Flake', 'TraceError', 'Warn', 'Running'"
#define STATUSES_V3 STATUSES_V2 ", 'Interrupted'"
#define STATUSES_V4 STATUSES_V3 ", 'Skipped', 'OrderDependent'"
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

/* Version 4 (docs/results-schema.md): what a run judged and how it was run, what a case's failure
 * was caused by, and generated mutants.
 * - runs: the driver file's GNU build-id and SHA-256 (the build judged, not only its name); the
 *   selection (a hash of the sorted set of case names) and its size, so a baseline compares like
 *   with like; the seed of --shuffle and the group size of grouped replay.
 * - cases: statuses Skipped (a --skips entry, never run) and OrderDependent (passes alone, fails
 *   after another trace in the same process; preceded_by names that trace); the cause signature,
 *   the symbolized stack of a crash, and the path of a reduced reproducer.
 * - mutate_results: one row per generated mutant of a run of kind "mutate".
 * cases is rebuilt for its CHECK, as v2 and v3 did; every other change is ADD COLUMN or new. */
static const char schema_v4[] =
  "ALTER TABLE runs ADD COLUMN driver_build_id TEXT;\n"
  "ALTER TABLE runs ADD COLUMN driver_sha256 TEXT;\n"
  "ALTER TABLE runs ADD COLUMN selection TEXT;\n"
  "ALTER TABLE runs ADD COLUMN selection_n INTEGER;\n"
  "ALTER TABLE runs ADD COLUMN shuffle_seed INTEGER;\n"
  "ALTER TABLE runs ADD COLUMN group_size INTEGER;\n"
  "CREATE TABLE cases_v4 (\n"
  "  id         INTEGER PRIMARY KEY,\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  name       TEXT NOT NULL,\n"
  "  path       TEXT,\n"
  "  status     TEXT NOT NULL DEFAULT 'Running'\n"
  "             CHECK (status IN (" STATUSES_V4 ")),\n"
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
  "  details    TEXT CHECK (details IS NULL OR json_valid(details)),\n"
  "  signature  TEXT,\n"
  "  stack      TEXT,\n"
  "  reduced    TEXT,\n"
  "  preceded_by TEXT\n"
  ") STRICT;\n"
  "INSERT INTO cases_v4 (id, run_id, name, path, status, started_at, ended_at, duration_s, line,\n"
  "                      message, expected, actual, event, rule, driver_message, advisory, details)\n"
  "  SELECT id, run_id, name, path, status, started_at, ended_at, duration_s, line, message,\n"
  "         expected, actual, event, rule, driver_message, advisory, details FROM cases;\n"
  "DROP TABLE cases;\n"
  "ALTER TABLE cases_v4 RENAME TO cases;\n"
  "CREATE INDEX cases_by_run ON cases(run_id, name, status);\n"
  "CREATE INDEX cases_by_signature ON cases(run_id, signature);\n"
  "CREATE TABLE mutate_results (\n"
  "  run_id     INTEGER NOT NULL REFERENCES runs(id),\n"
  "  mutant     TEXT NOT NULL,\n"
  "  file       TEXT NOT NULL,\n"
  "  function   TEXT,\n"
  "  line       INTEGER,\n"
  "  operator   TEXT NOT NULL,\n"
  "  status     TEXT NOT NULL\n"
  "             CHECK (status IN ('killed', 'survived', 'equivalent', 'build_failed', 'skipped')),\n"
  "  killed_by  TEXT,\n"
  "  kill_kind  TEXT,\n"
  "  traces_run INTEGER,\n"
  "  duration_s REAL,\n"
  "  diff       TEXT,\n"
  "  reach      TEXT,\n"
  "  PRIMARY KEY (run_id, mutant)\n"
  ") STRICT;\n";

/* upgrade[v] takes a database from schema version v to v + 1; version 0 is an empty database,
 * so a new file runs every step and ends exactly like an upgraded one. A future version N adds
 * upgrade[N - 1] (ALTER TABLE ..., or a table rebuild) and bumps MDC_STORE_SCHEMA_VERSION;
 * older files are upgraded in one transaction when opened for writing. */
static const char *const upgrade[MDC_STORE_SCHEMA_VERSION] = {schema_v1, schema_v2, schema_v3, schema_v4};

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
int mdc_store__check_tables(mdc_store *s, sqlite3 *db, int64_t version) {
  static const char *const probes_v1[] = {
    "SELECT id, " MDC_STORE__RUN_COLS_V1 " FROM runs LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__CASE_COLS_V1 " FROM cases LIMIT 0",
  };
  static const char *const probes_v2[] = {
    "SELECT id, " MDC_STORE__RUN_COLS_V2 " FROM runs LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__CASE_COLS_V2 " FROM cases LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS " FROM fuzz_campaigns LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings LIMIT 0",
  };
  static const char *const probes_v4[] = {
    "SELECT id, " MDC_STORE__RUN_COLS " FROM runs LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__CASE_COLS " FROM cases LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS " FROM fuzz_campaigns LIMIT 0",
    "SELECT run_id, " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats LIMIT 0",
    "SELECT id, run_id, " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings LIMIT 0",
    "SELECT run_id, " MDC_STORE__MUTATE_COLS " FROM mutate_results LIMIT 0",
  };
  const char *const *probes = version >= 4 ? probes_v4 : version >= 2 ? probes_v2 : probes_v1;
  size_t n = version >= 4   ? sizeof probes_v4 / sizeof *probes_v4
             : version >= 2 ? sizeof probes_v2 / sizeof *probes_v2
                            : sizeof probes_v1 / sizeof *probes_v1;
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
int mdc_store__check_version(mdc_store *s, sqlite3 *db, int64_t *version, int older_ok) {
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
int mdc_store__upgrade_schema(mdc_store *s) {
  if (exec(s, s->db, "BEGIN IMMEDIATE", "cannot start the schema transaction") != 0) return -1;
  int64_t v;
  if (mdc_store__check_version(s, s->db, &v, 1) != 0) goto rollback;
  /* An old file must really be that version before it is built upon. */
  if (v > 0 && mdc_store__check_tables(s, s->db, v) != 0) goto rollback;
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
