/* mdc/store.h - the results store: one SQLite file shared by replay, fuzz and reports.
 *
 * Schema in docs/results-schema.md, versioned in PRAGMA user_version; WAL journal. A case row is
 * written (and committed) *before* the case runs, status 'Running', and completed after, so a
 * run killed with SIGKILL leaves every finished result intact and its interrupted case marked.
 * Every function returns 0 on success, -1 on failure with a message naming the file and the
 * problem in the store's error buffer (mdc_store_error). Not thread-safe: one store per thread. */
#ifndef MDC_STORE_H
#define MDC_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_STORE_SCHEMA_VERSION 1

typedef struct mdc_store mdc_store;

/* Opens or creates path (":memory:" works). A file that is not a database, or has a newer
 * schema version, is refused with a clear message and left untouched. On failure *out is NULL
 * and err gets the message. */
int mdc_store_open(const char *path, mdc_store **out, char *err, size_t errlen);
void mdc_store_close(mdc_store *s);
const char *mdc_store_error(const mdc_store *s);

typedef struct mdc_run_info {
  const char *kind;            /* "replay", "fuzz", "mutants" */
  const char *driver_name, *driver_version, *driver_path;
  const char *backend, *device, *config;
  uint64_t seed; int has_seed;
  uint32_t shard_index, shard_count;   /* 0/1 when not sharded (a count of 0 is taken as 1) */
  const char *host, *revision;         /* NULL: filled by the store (gethostname, MDC_REVISION) */
} mdc_run_info;

/* Inserts the run row (uuid generated, started_at now). *run_id gets its row id; uuid (when
 * not NULL) gets the 36-character uuid. kind is required; other strings may be NULL. */
int mdc_store_run_begin(mdc_store *s, const mdc_run_info *ri, int64_t *run_id, char uuid[37]);
/* Sets ended_at and the summary counts. */
int mdc_store_run_end(mdc_store *s, int64_t run_id, uint32_t cases, uint32_t passed,
                      uint32_t failed, uint32_t crashed, uint32_t timed_out, uint32_t unexpected);

/* Inserts a case row with status 'Running' and commits it. */
int mdc_store_case_begin(mdc_store *s, int64_t run_id, const char *name, const char *path,
                         int64_t *case_id);
/* Completes it: status ("Pass", "Fail", "Crash", "Timeout", "NotSupported", "ExpectedFail",
 * "UnexpectedPass", "Flake", "TraceError"), duration, message and mismatch details (NULL ok). */
int mdc_store_case_end(mdc_store *s, int64_t case_id, const char *status, double duration_s,
                       uint32_t line, const char *message, const char *expected,
                       const char *actual);

/* Queries, for reports and tests. */

/* *count gets the number of cases of run_id (0: of every run) whose status is status (NULL:
 * any status, 'Running' included). */
int mdc_store_count_cases(mdc_store *s, int64_t run_id, const char *status, uint32_t *count);

/* Fills ids[0..cap) with the run ids in insertion order; *n gets the total number of runs
 * (which may exceed cap, as with snprintf). */
int mdc_store_list_runs(mdc_store *s, int64_t *ids, size_t cap, size_t *n);

/* One case row. Strings are NULL when the column is NULL; they are owned by the store and
 * valid until the next mdc_store_case_get or mdc_store_close. */
typedef struct mdc_case_row {
  int64_t id, run_id;
  const char *name, *path, *status;
  const char *started_at, *ended_at;   /* ISO-8601 UTC; ended_at NULL while Running */
  double duration_s;                   /* 0 while Running */
  uint32_t line;
  const char *message, *expected, *actual;
} mdc_case_row;

/* Fetches case case_id into *row; -1 (message "no such case") when there is none. */
int mdc_store_case_get(mdc_store *s, int64_t case_id, mdc_case_row *row);

/* Merges the runs and cases of every input database into out (created when missing). A run
 * already in out (same uuid) is skipped, so merging twice changes nothing. Inputs are opened
 * read-only and never created or changed; every input is checked before anything is written, and
 * the whole merge is one transaction: on failure out is as it was. Cases get new ids in out. */
int mdc_store_merge(const char *out, const char *const *inputs, size_t n_inputs, char *err,
                    size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
