/* store_int.h - private to the results store (reports/store*.c): the store's struct, the column
 * lists of each schema version and the helpers its files share. Its files: store.c (open, close,
 * the shared helpers, small queries), store_schema.c (the schema of each version, its upgrades,
 * the checks of a file), store_write.c (runs, cases, batches), store_fuzz.c (the fuzz tables),
 * store_merge.c (merge), store_read.c (reads for reports). */
#ifndef MDC_STORE_INT_H
#define MDC_STORE_INT_H

#include <sqlite3.h>
#include <stdarg.h>

#include "mdc/store.h"

#define MDC_STORE__NOW "strftime('%Y-%m-%dT%H:%M:%fZ','now')"
#define MDC_STORE__BUSY_TIMEOUT_MS 5000

/* Every column but id, in one order shared by validation, reads and merge. An older file lacks
 * the trailing columns of later versions; reading one, the _AS lists put their defaults in their
 * place (mdc_store__run_cols / mdc_store__case_cols pick the list for a file's version). */
#define MDC_STORE__RUN_COLS_V1                                                                   \
  "uuid, started_at, ended_at, kind, driver_name, driver_version, driver_path, backend, "        \
  "device, config, seed, shard_index, shard_count, host, revision, cases, passed, failed, "      \
  "crashed, timed_out, unexpected"
#define MDC_STORE__RUN_COLS_V2 MDC_STORE__RUN_COLS_V1 ", interrupted"
#define MDC_STORE__RUN_COLS                                                                      \
  MDC_STORE__RUN_COLS_V2 ", driver_build_id, driver_sha256, selection, selection_n, "            \
  "shuffle_seed, group_size"
#define MDC_STORE__RUN_V4_NULLS ", NULL, NULL, NULL, NULL, NULL, NULL"
#define MDC_STORE__RUN_COLS_V1_AS MDC_STORE__RUN_COLS_V1 ", 0" MDC_STORE__RUN_V4_NULLS
#define MDC_STORE__RUN_COLS_V2_AS MDC_STORE__RUN_COLS_V2 MDC_STORE__RUN_V4_NULLS
#define MDC_STORE__RUN_NCOLS 28
#define MDC_STORE__CASE_COLS_V1                                                                  \
  "name, path, status, started_at, ended_at, duration_s, line, message, expected, actual"
#define MDC_STORE__CASE_COLS_V2                                                                  \
  MDC_STORE__CASE_COLS_V1 ", event, rule, driver_message, advisory, details"
#define MDC_STORE__CASE_COLS MDC_STORE__CASE_COLS_V2 ", signature, stack, reduced, preceded_by"
#define MDC_STORE__CASE_V4_NULLS ", NULL, NULL, NULL, NULL"
#define MDC_STORE__CASE_COLS_V1_AS MDC_STORE__CASE_COLS_V1 ", NULL, NULL, NULL, NULL, NULL" MDC_STORE__CASE_V4_NULLS
#define MDC_STORE__CASE_COLS_V2_AS MDC_STORE__CASE_COLS_V2 MDC_STORE__CASE_V4_NULLS
#define MDC_STORE__CASE_NCOLS 19
#define MDC_STORE__MUTATE_COLS                                                                   \
  "mutant, file, function, line, operator, status, killed_by, kill_kind, traces_run, "           \
  "duration_s, diff, reach"
#define MDC_STORE__FUZZ_CAMPAIGN_COLS "target, jobs, planned_s, out_dir, resumed"
#define MDC_STORE__FUZZ_STAT_COLS                                                                \
  "instance, t_s, execs, execs_per_sec, edges, corpus, crashes, hangs, stability, rss_kb"
#define MDC_STORE__FUZZ_FINDING_COLS                                                             \
  "target, signature, kind, message, count, first_seen, last_seen, replays, reproduced, "        \
  "reproducer, minimized, trace"

struct mdc_store {
  sqlite3 *db;
  char *path;
  int version;      /* of the file; < MDC_STORE_SCHEMA_VERSION only when read-only */
  int readonly, in_batch;
  sqlite3_stmt *run_insert, *run_end, *case_interrupt, *case_insert, *case_end, *count, *list_runs, *case_get;
  sqlite3_stmt *campaign_put, *stat_put, *finding_put;
  char *row;        /* mdc_case_row strings of case_get */
  size_t row_cap;
  char err[1024];
};

/* Sets the store's message: "results store '<path>': " + fmt. Returns -1. */
int mdc_store__fail(mdc_store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* mdc_store__fail with SQLite's message for db's last error appended to what. Returns -1. */
int mdc_store__fail_db(mdc_store *s, sqlite3 *db, const char *what);
/* Binds v as text, or NULL when v is NULL (the string must outlive the step). */
void mdc_store__bind_text(sqlite3_stmt *st, int i, const char *v);
/* The text of column i, or NULL. */
const char *mdc_store__text(sqlite3_stmt *st, int i);
/* The run (case) columns of a file of schema version v, older ones with their defaults. */
const char *mdc_store__run_cols(int version);
const char *mdc_store__case_cols(int version);
/* Whether the file has the fuzz tables (schema v2 and later). */
int mdc_store__has_fuzz(const mdc_store *s);
/* Fills *row from a statement whose columns from `first` are id, run_id, then CASE_COLS (v2
 * order). Strings point into the statement: valid until its next step. */
void mdc_store__case_from_stmt(sqlite3_stmt *st, mdc_case_row *row);
/* Runs sql on db (no rows); -1 with what and SQLite's message in s on failure. */
int mdc_store__exec(mdc_store *s, sqlite3 *db, const char *sql, const char *what);
/* A write of several statements, all or nothing: savepoint_begin opens a savepoint named
 * `name` (also the messages' prefix) unless a batch is open, which is then the transaction, and
 * returns 1 when it opened one, 0 when not, -1 with the message; savepoint_end(own = what begin
 * returned, rc = the writes' result) releases it when rc is 0, else rolls it back, and returns 0
 * or -1. */
int mdc_store__savepoint_begin(mdc_store *s, const char *name);
int mdc_store__savepoint_end(mdc_store *s, const char *name, int own, int rc);
/* Prepares a statement on s->db kept for the store's life; -1 with the message on failure. */
int mdc_store__prepare(mdc_store *s, sqlite3_stmt **st, const char *sql);
/* A store for path, not open yet; NULL with the message in err (out of memory). */
mdc_store *mdc_store__new(const char *path, char *err, size_t errlen);
/* Opens path read-only as a file: URI (percent-encoded where URI syntax would take it apart)
 * with the given query ("?immutable=1"). A SQLite result code; *db may be set even on failure. */
int mdc_store__open_uri(const char *path, const char *query, sqlite3 **db);

/* store_schema.c. Reads and judges db's schema version into *version; older_ok allows an older
 * one (to be upgraded, or read as it is). 0, or -1 with the message in s. */
int mdc_store__check_version(mdc_store *s, sqlite3 *db, int64_t *version, int older_ok);
/* Whether db has every table and column of its schema version; -1 names the first missing. */
int mdc_store__check_tables(mdc_store *s, sqlite3 *db, int64_t version);
/* Creates or upgrades s->db's schema to MDC_STORE_SCHEMA_VERSION in one transaction; on failure
 * it is rolled back and -1 returned with the message. */
int mdc_store__upgrade_schema(mdc_store *s);

/* store_write.c. Prepares the run and case writes' statements; -1 with the message. */
int mdc_store__prepare_writes(mdc_store *s);
/* 0 when s may be written; else -1 saying that `what` was refused (a read-only store). */
int mdc_store__writable(mdc_store *s, const char *what);
/* Steps a write statement once and resets it (bindings cleared); -1 with what on error. */
int mdc_store__step_write(mdc_store *s, sqlite3_stmt *st, const char *what);

/* store_fuzz.c. Prepares the fuzz tables' writes; -1 with the message. */
int mdc_store__prepare_fuzz(mdc_store *s);

#endif
