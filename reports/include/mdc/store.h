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

#define MDC_STORE_SCHEMA_VERSION 4

/* Returned (instead of -1) by the functions that say so: the file, run or row asked for is not
 * there. The message is in the error buffer as for -1. */
#define MDC_STORE_NOT_FOUND (-2)

/* X(enum suffix, name, unexpected): the one table of case statuses, in the order of the
 * schema's CHECK; then Running (a case that has begun and not ended: its run was killed, or is
 * still going) and Interrupted (schema v3: a case that was running when a signal stopped its
 * run; mdc_store_run_finish of an interrupted run turns its Running cases into it).
 * `unexpected`: whether a case ending so makes a run fail (mdc's exit status 1, the report's
 * "unexpected" count); Running and Interrupted count, a case that never ended. The harness (mdc_int.h)
 * and the reports take their statuses from here. Schema v4 adds Skipped (a --skips entry: never
 * run) and OrderDependent (passes alone, fails after another trace in the same process). */
#define MDC_STORE_STATUS_MAP(X)                                                                  \
  X(PASS, "Pass", 0) X(FAIL, "Fail", 1) X(CRASH, "Crash", 1) X(TIMEOUT, "Timeout", 1)            \
  X(NOT_SUPPORTED, "NotSupported", 0) X(EXPECTED_FAIL, "ExpectedFail", 0)                        \
  X(UNEXPECTED_PASS, "UnexpectedPass", 1) X(FLAKE, "Flake", 0) X(TRACE_ERROR, "TraceError", 1)   \
  X(WARN, "Warn", 0) X(RUNNING, "Running", 1) X(INTERRUPTED, "Interrupted", 1)                   \
  X(SKIPPED, "Skipped", 0) X(ORDER_DEPENDENT, "OrderDependent", 1)

typedef enum mdc_case_status {
#define X(e, n, u) MDC_CS_##e,
  MDC_STORE_STATUS_MAP(X)
#undef X
  MDC_CS_COUNT
} mdc_case_status;

/* "Pass" ... "Running"; NULL for a value out of range. Thread-safe (constant table). */
const char *mdc_store_status_name(mdc_case_status st);
/* The status named name, or -1 when it is not one. Thread-safe. */
int mdc_store_status_parse(const char *name);
/* Whether a case ending with st makes its run fail (MDC_STORE_STATUS_MAP's third column); 1 for
 * a value out of range. Thread-safe. */
int mdc_store_status_unexpected(mdc_case_status st);
/* The unexpected cases among counts[MDC_CS_COUNT]. */
uint32_t mdc_store_unexpected_of(const uint32_t *counts);

typedef struct mdc_store mdc_store;

/* Opens or creates path (":memory:" works) for writing; an older schema is upgraded in place
 * (one transaction). A file that is not a database, or has a newer schema version, is refused
 * with a clear message and left untouched. On failure *out is NULL and err gets the message. */
int mdc_store_open(const char *path, mdc_store **out, char *err, size_t errlen);
/* Opens an existing store read-only, for reports: never creates, upgrades or writes the file
 * (an older schema is read as it is: columns it lacks read as their defaults, tables it lacks
 * as empty). Returns MDC_STORE_NOT_FOUND when path does not exist, is an empty file or an
 * empty database (nothing to read), -1 when it is not a results store, is corrupt or newer;
 * err names the file either way. Write functions on such a store fail ("opened read-only"). */
int mdc_store_open_read(const char *path, mdc_store **out, char *err, size_t errlen);
void mdc_store_close(mdc_store *s);
const char *mdc_store_error(const mdc_store *s);
/* The schema version of the file as opened (older than MDC_STORE_SCHEMA_VERSION only for a
 * store opened read-only). */
int mdc_store_version(const mdc_store *s);

/* Groups the writes that follow into one transaction until mdc_store_batch_end (commit when
 * commit is non-zero, else roll back): for bulk writers (fuzz statistics, fixtures), where one
 * commit per row would cost a WAL append each. Not for replay, whose case rows must be
 * committed before each case runs. Batches do not nest. */
int mdc_store_batch_begin(mdc_store *s);
int mdc_store_batch_end(mdc_store *s, int commit);

typedef struct mdc_run_info {
  const char *kind;            /* "replay", "fuzz", "mutants" */
  const char *driver_name, *driver_version, *driver_path;
  const char *backend, *device, *config;
  uint64_t seed; int has_seed;
  uint32_t shard_index, shard_count;   /* 0/1 when not sharded (a count of 0 is taken as 1) */
  const char *host, *revision;         /* NULL: filled by the store (gethostname, MDC_REVISION) */
  /* schema v4 (NULL / 0: not known) */
  const char *driver_build_id;         /* the driver file's GNU build-id, hex */
  const char *driver_sha256;           /* the driver file's SHA-256, hex */
  const char *selection;               /* a hash of the sorted set of the run's case names */
  uint32_t selection_n;                /* how many names */
  uint64_t shuffle_seed; int has_shuffle_seed;  /* --shuffle SEED */
  uint32_t group_size;                 /* cases per child (grouped replay); 0: not recorded */
} mdc_run_info;

/* Inserts the run row (uuid generated, started_at now). *run_id gets its row id; uuid (when
 * not NULL) gets the 36-character uuid. kind is required; other strings may be NULL. */
int mdc_store_run_begin(mdc_store *s, const mdc_run_info *ri, int64_t *run_id, char uuid[37]);
/* Sets ended_at and the summary counts (interrupted stays 0). */
int mdc_store_run_end(mdc_store *s, int64_t run_id, uint32_t cases, uint32_t passed,
                      uint32_t failed, uint32_t crashed, uint32_t timed_out, uint32_t unexpected);

typedef struct mdc_run_summary {
  uint32_t cases, passed, failed, crashed, timed_out, unexpected;
  int interrupted;       /* 1: the harness stopped the run early on a signal */
} mdc_run_summary;
/* mdc_store_run_end with the interrupted flag: sets ended_at, the counts and interrupted, and for
 * an interrupted run turns the cases still Running into Interrupted, all in one transaction. A
 * run that was killed outright never gets here (ended_at stays NULL, its case stays Running). */
int mdc_store_run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum);

/* Inserts a case row with status 'Running' and commits it. */
int mdc_store_case_begin(mdc_store *s, int64_t run_id, const char *name, const char *path,
                         int64_t *case_id);
/* Completes it: status ("Pass", "Fail", "Crash", "Timeout", "NotSupported", "ExpectedFail",
 * "UnexpectedPass", "Flake", "TraceError"), duration, message and mismatch details (NULL ok). */
int mdc_store_case_end(mdc_store *s, int64_t case_id, const char *status, double duration_s,
                       uint32_t line, const char *message, const char *expected,
                       const char *actual);

/* Everything case_finish writes. Strings may be NULL (stored as NULL). */
typedef struct mdc_case_result {
  const char *status;          /* as for mdc_store_case_end */
  double duration_s;
  uint32_t line;               /* 0: none */
  const char *message, *expected, *actual;
  const char *event;           /* the op of the event the verdict refers to ("execute") */
  const char *rule;            /* the SPEC rule(s) that event or trace pins ("SPEC 4; SPEC 8.5") */
  const char *driver_message;  /* the driver's last_error for the failing call */
  const char *advisory;        /* message expectations that did not match: reported, not judged */
  const char *details;         /* JSON text (refused when not valid JSON) */
  /* schema v4 */
  const char *signature;       /* the cause signature (cases with one cause share it) */
  const char *stack;           /* a crash's symbolized stack, one frame a line */
  const char *reduced;         /* path of a reduced reproducer */
  const char *preceded_by;     /* OrderDependent: the trace that ran before it in its process */
} mdc_case_result;
/* mdc_store_case_end with every column of schema v2. Fails (and changes nothing) for an unknown
 * status, a case that is not Running, or details that are not valid JSON. */
int mdc_store_case_finish(mdc_store *s, int64_t case_id, const mdc_case_result *r);

/* ---- fuzz campaigns: one run of kind "fuzz" per campaign (docs/results-schema.md) ---------- */

typedef struct mdc_fuzz_campaign {
  const char *target;          /* required: the fuzz target's name */
  uint32_t jobs;               /* parallel instances */
  double planned_s;            /* planned duration; NaN or < 0: none */
  const char *out_dir;         /* the campaign's output folder (NULL ok) */
  int resumed;                 /* 1: resumed an earlier campaign's output */
} mdc_fuzz_campaign;
/* Inserts (or, for a run that has one, replaces) the campaign row of run_id. */
int mdc_store_fuzz_campaign(mdc_store *s, int64_t run_id, const mdc_fuzz_campaign *c);

/* One sample of one instance's statistics. Counts < 0 and rates that are NaN or < 0 are
 * stored as NULL (not measured). */
typedef struct mdc_fuzz_stat {
  const char *instance;        /* required: "main", "s1", ... */
  double t_s;                  /* seconds since the campaign started */
  int64_t execs;
  double execs_per_sec;
  int64_t edges, corpus, crashes, hangs;
  double stability;            /* percent */
  int64_t rss_kb;
} mdc_fuzz_stat;
/* Writes n samples of run_id in one transaction (inside a batch: in the batch's). A sample
 * already there (same instance and t_s) is replaced, so importing the same plot data twice
 * changes nothing. All or nothing. */
int mdc_store_fuzz_stats(mdc_store *s, int64_t run_id, const mdc_fuzz_stat *v, size_t n);

typedef struct mdc_fuzz_finding {
  const char *target;          /* required */
  const char *signature;       /* required: what identifies the finding (stack hash, oracle rule) */
  const char *kind;            /* required: "crash", "hang" or "oracle" */
  const char *message;
  uint32_t count;              /* times seen in this report (0 is taken as 1) */
  const char *seen_at;         /* ISO-8601 UTC time it was seen; NULL: now */
  int64_t replays, reproduced; /* reliability: replays tried, replays that reproduced; < 0: NULL */
  const char *reproducer;      /* path of the input that reproduces it */
  const char *minimized;       /* path of the minimized input */
  const char *trace;           /* path of the exported trace */
} mdc_fuzz_finding;
/* Upsert on (run_id, signature): a new finding is inserted with count and first_seen =
 * last_seen = seen_at; one seen before gets count += count, first_seen/last_seen widened, and
 * every non-NULL field given (message, replays, reproduced, paths) replacing the stored one;
 * its target and kind stay as first written. *finding_id (may be NULL) gets the row id. */
int mdc_store_fuzz_finding(mdc_store *s, int64_t run_id, const mdc_fuzz_finding *f,
                           int64_t *finding_id);

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
  const char *event, *rule, *driver_message, *advisory, *details;  /* schema v2 */
  const char *signature, *stack, *reduced, *preceded_by;           /* schema v4 */
} mdc_case_row;

/* Fetches case case_id into *row; -1 (message "no such case") when there is none. */
int mdc_store_case_get(mdc_store *s, int64_t case_id, mdc_case_row *row);

/* ---- reading for reports: runs, cases as a stream, history, fuzz ---------------------------- */

/* One run row. Strings are NULL when the column is NULL. */
typedef struct mdc_run_row {
  int64_t id;
  const char *uuid, *started_at, *ended_at, *kind;
  const char *driver_name, *driver_version, *driver_path, *backend, *device, *config;
  const char *host, *revision;
  uint64_t seed;
  int has_seed;
  uint32_t shard_index, shard_count;
  int has_counts;              /* the summary counts are set (run_end ran) */
  uint32_t cases, passed, failed, crashed, timed_out, unexpected;
  int interrupted;
  const char *driver_build_id, *driver_sha256, *selection;   /* schema v4; NULL: not known */
  uint32_t selection_n, group_size;
  uint64_t shuffle_seed;
  int has_shuffle_seed;
  double duration_s;           /* ended_at - started_at; < 0 when the run never ended */
  char *mem_;                  /* private: holds the strings */
} mdc_run_row;

/* Fills *row with run run_id; MDC_STORE_NOT_FOUND when there is none. The row owns its
 * strings: free it with mdc_store_run_row_free (also after a failure: it is then empty). */
int mdc_store_run_get(mdc_store *s, int64_t run_id, mdc_run_row *row);
/* Finds a run by ref: its uuid, a unique prefix of it (at least 4 characters), or "latest":
 * the run started last among those of kind (NULL: any kind). MDC_STORE_NOT_FOUND when there is
 * none or the prefix is ambiguous (the message says which). */
int mdc_store_run_find(mdc_store *s, const char *ref, const char *kind, mdc_run_row *row);
void mdc_store_run_row_free(mdc_run_row *row);

/* Which runs mdc_store_runs_each visits. NULL strings match anything. */
typedef struct mdc_run_filter {
  const char *kind, *driver_name, *backend;
  const char *started_before;  /* ISO time: only runs started strictly before it */
  int64_t before_id;           /* with started_before: a run started in the same millisecond
                                  counts as before when its id is lower (0: it does not) */
  uint32_t limit;              /* the newest `limit` runs (0: all); visited oldest first */
} mdc_run_filter;
/* Calls fn for every matching run, oldest first (started_at, then id). The row and its strings
 * are valid during the call only. fn returns 0 to go on; a non-zero value stops the walk and is
 * returned. -1 on a store error. */
int mdc_store_runs_each(mdc_store *s, const mdc_run_filter *f,
                        int (*fn)(void *ctx, const mdc_run_row *row), void *ctx);

/* counts[st] gets the number of run_id's cases with status st, counted from the case rows
 * (right for a killed run too). */
int mdc_store_run_counts(mdc_store *s, int64_t run_id, uint32_t counts[MDC_CS_COUNT]);

typedef enum mdc_case_order {
  MDC_CASES_BY_ID = 0,         /* insertion order */
  MDC_CASES_BY_NAME,           /* name (then status, id: the index order, no sort): two runs walked
                                  side by side pair by name */
  MDC_CASES_SLOWEST,           /* finished cases by duration, longest first */
  MDC_CASES_WORST_FIRST        /* Crash, Timeout, Fail, TraceError, UnexpectedPass, Running and
                                  Interrupted, Flake,
                                  Warn, ExpectedFail, NotSupported, Pass; by name within each */
} mdc_case_order;
typedef struct mdc_case_query {
  int64_t run_id;
  mdc_case_order order;
  int not_passing;             /* only cases whose status is not Pass */
  uint32_t limit;              /* 0: all */
  int light;                   /* only id, run_id, name and status (the rest NULL or 0): read from
                                  the index alone, no seek into the table per row */
} mdc_case_query;

typedef struct mdc_case_iter mdc_case_iter;
/* A cursor over the cases of one run: rows come one at a time from SQLite, so a run of any
 * size costs the same memory. Several cursors may be open on one store at once. */
int mdc_store_cases_open(mdc_store *s, const mdc_case_query *q, mdc_case_iter **it);
/* 1 and *row filled (strings valid until the next call or close), 0 at the end, -1 on error
 * (message in mdc_store_error of the store). */
int mdc_store_cases_next(mdc_case_iter *it, mdc_case_row *row);
void mdc_store_cases_close(mdc_case_iter *it);

/* The cases whose status changed most often along runs (run ids in the order to compare them,
 * oldest first): fn gets each name with its number of changes between consecutive runs that
 * both ran it (> 0) and the number of runs that ran it, most changes first, at most limit
 * names (0: all). fn's return value as for mdc_store_runs_each. */
int mdc_store_verdict_changes(mdc_store *s, const int64_t *run_ids, size_t n_runs,
                              uint32_t limit,
                              int (*fn)(void *ctx, const char *name, uint32_t changes,
                                        uint32_t runs, const char *last_status),
                              void *ctx);

/* A campaign with its run. NaN planned_s: none. */
typedef struct mdc_fuzz_campaign_row {
  int64_t run_id;
  const char *uuid, *started_at, *ended_at, *revision, *host;
  const char *target, *out_dir;
  uint32_t jobs;
  double planned_s;
  int resumed, interrupted;
} mdc_fuzz_campaign_row;
/* The newest `limit` campaigns (0: all), oldest first. Nothing (and 0) for a store without fuzz
 * tables. Rows valid during the call only; fn's return value as for mdc_store_runs_each. */
int mdc_store_fuzz_campaigns_each(mdc_store *s, uint32_t limit,
                                  int (*fn)(void *ctx, const mdc_fuzz_campaign_row *row),
                                  void *ctx);
/* The samples of run_id by instance, then time. Unmeasured values: -1 (counts), NaN (rates). */
int mdc_store_fuzz_stats_each(mdc_store *s, int64_t run_id,
                              int (*fn)(void *ctx, const mdc_fuzz_stat *st), void *ctx);

typedef struct mdc_fuzz_finding_row {
  int64_t id, run_id;
  const char *target, *signature, *kind, *message, *first_seen, *last_seen;
  uint32_t count;
  int64_t replays, reproduced;  /* -1: NULL */
  const char *reproducer, *minimized, *trace;
} mdc_fuzz_finding_row;
/* The findings of run_id (0: of every run), most seen first, at most limit (0: all). */
int mdc_store_fuzz_findings_each(mdc_store *s, int64_t run_id, uint32_t limit,
                                 int (*fn)(void *ctx, const mdc_fuzz_finding_row *f), void *ctx);
/* *n gets the number of findings of run_id (0: every run). */
int mdc_store_fuzz_findings_count(mdc_store *s, int64_t run_id, uint32_t *n);

/* Merges the runs of every input database, with their cases and fuzz campaign, statistics and
 * findings, into out (created when missing). A run already in out (same uuid) is skipped with
 * everything under it, so merging twice changes nothing. Inputs are opened read-only and never
 * created or changed (an input at an older schema version is read as it is); every input is
 * checked before anything is written, and the whole merge is one transaction: on failure out is
 * as it was. Rows get new ids in out. */
int mdc_store_merge(const char *out, const char *const *inputs, size_t n_inputs, char *err,
                    size_t errlen);


/* ---- mdc mutate: one row per generated mutant of a run of kind "mutate" (schema v4) -------- */

typedef struct mdc_mutate_row {
  const char *mutant;          /* required: the stable id (file:function:operator:n) */
  const char *file;            /* required */
  const char *function;
  uint32_t line;               /* 0: NULL */
  const char *op;              /* required: the operator */
  const char *status;          /* required: killed, survived, equivalent, build_failed, skipped */
  const char *killed_by;       /* the trace, unit test or fuzz target that killed it */
  const char *kill_kind;       /* Fail, Crash, Timeout (a trace), Test (a unit test), fuzz */
  int64_t traces_run;          /* < 0: NULL */
  double duration_s;           /* < 0: NULL */
  const char *diff;            /* the line before and after */
  const char *reach;           /* the nearest trace that reaches the line */
} mdc_mutate_row;
/* Inserts (or replaces) the row of r->mutant in run_id. */
int mdc_store_mutate_put(mdc_store *s, int64_t run_id, const mdc_mutate_row *r);
/* The rows of run_id by file, line, mutant; rows valid during the call only; fn's return value
 * as for mdc_store_runs_each. Nothing (and 0) for a store without the table. */
int mdc_store_mutate_each(mdc_store *s, int64_t run_id, int (*fn)(void *ctx, const mdc_mutate_row *r),
                          void *ctx);
/* How often each trace (or test) killed a mutant in every stored mutate run, most first: the
 * order in which mdc mutate tries traces. */
int mdc_store_mutate_kill_counts(mdc_store *s, int (*fn)(void *ctx, const char *killed_by, uint32_t n),
                                 void *ctx);

/* ---- cause groups (issue 26; reports/store_groups.c) ---------------------------------------- */

/* One cause of a run: its non-passing cases (not NotSupported, Warn, Skipped) that share a
 * signature. Strings are valid during the callback only. */
typedef struct mdc_case_group {
  const char *signature;
  uint32_t count;                    /* its cases */
  uint32_t unexpected;               /* of them, with an unexpected status */
  uint32_t counts[MDC_CS_COUNT];     /* per status */
  const char *const *names;          /* its first n_names cases by name, their paths (NULL ok) */
  const char *const *paths;          /* and stacks (NULL when none) */
  const char *const *stacks;
  uint32_t n_names;
  uint32_t n_total;                  /* groups in the run */
  const char *reduced;               /* a reduced reproducer of one of its cases (mdc reduce --db),
                                        NULL when none */
} mdc_case_group;
/* Calls fn for each cause group of run_id: the groups with an unexpected case first, then the
 * largest first, then by signature; each with its first `names` cases (at most 64) by name. At
 * most limit groups (0: all). Nothing (and 0) for a store before schema v4. fn's return value as
 * for mdc_store_runs_each. */
int mdc_store_groups_each(mdc_store *s, int64_t run_id, uint32_t names, uint32_t limit,
                          int (*fn)(void *ctx, const mdc_case_group *g), void *ctx);
/* Records path as the reduced reproducer (`mdc reduce --db`) of run_id's cases named name that
 * did not pass. MDC_STORE_NOT_FOUND when the run has no such case. */
int mdc_store_case_set_reduced(mdc_store *s, int64_t run_id, const char *name, const char *path);

#ifdef __cplusplus
}
#endif
#endif
