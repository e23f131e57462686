/* store_read.c - reading the results store for reports: runs by uuid or latest, runs of one
 * driver and backend over time, the cases of a run as a cursor (one row at a time from SQLite,
 * so memory does not grow with the run), verdict changes along runs, and the fuzz tables. Every
 * query reads the file's own schema version: a v1 file opened read-only reads its missing
 * columns as their defaults and its missing fuzz tables as empty. */
#include "store_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fail mdc_store__fail
#define fail_db mdc_store__fail_db
#define text mdc_store__text

/* The run columns as the file has them, after id, plus the duration in seconds. */
static const char *run_select(const mdc_store *s) {
#define RUN_SELECT(cols)                                                                         \
  "SELECT id, " cols ", CASE WHEN ended_at IS NULL THEN -1.0 "                                   \
  "ELSE (julianday(ended_at) - julianday(started_at)) * 86400.0 END FROM runs "
  return s->version >= 4 ? RUN_SELECT(MDC_STORE__RUN_COLS)
         : s->version >= 2 ? RUN_SELECT(MDC_STORE__RUN_COLS_V2_AS)
                           : RUN_SELECT(MDC_STORE__RUN_COLS_V1_AS);
#undef RUN_SELECT
}

/* Points row's fields at the statement's columns (valid until its next step). */
static void run_from_stmt(sqlite3_stmt *st, mdc_run_row *r) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  const char **strs[] = {&r->uuid, &r->started_at, &r->ended_at, &r->kind, &r->driver_name,
                         &r->driver_version, &r->driver_path, &r->backend, &r->device, &r->config};
  for (int i = 0; i < 10; i++) *strs[i] = text(st, 1 + i);
  r->has_seed = sqlite3_column_type(st, 11) != SQLITE_NULL;
  r->seed = (uint64_t)sqlite3_column_int64(st, 11);
  r->shard_index = (uint32_t)sqlite3_column_int64(st, 12);
  r->shard_count = (uint32_t)sqlite3_column_int64(st, 13);
  r->host = text(st, 14);
  r->revision = text(st, 15);
  r->has_counts = sqlite3_column_type(st, 16) != SQLITE_NULL;
  uint32_t *counts[] = {&r->cases, &r->passed, &r->failed, &r->crashed, &r->timed_out, &r->unexpected};
  for (int i = 0; i < 6; i++) *counts[i] = (uint32_t)sqlite3_column_int64(st, 16 + i);
  r->interrupted = sqlite3_column_int(st, 22) != 0;
  r->driver_build_id = text(st, 23);
  r->driver_sha256 = text(st, 24);
  r->selection = text(st, 25);
  r->selection_n = (uint32_t)sqlite3_column_int64(st, 26);
  r->has_shuffle_seed = sqlite3_column_type(st, 27) != SQLITE_NULL;
  r->shuffle_seed = (uint64_t)sqlite3_column_int64(st, 27);
  r->group_size = (uint32_t)sqlite3_column_int64(st, 28);
  r->duration_s = sqlite3_column_double(st, 29);
}

/* Copies the strings of *src into one block owned by *dst. */
static int run_own(mdc_store *s, const mdc_run_row *src, mdc_run_row *dst) {
  mdc_run_row r = *src;
  const char **strs[] = {&r.uuid, &r.started_at, &r.ended_at, &r.kind, &r.driver_name,
                         &r.driver_version, &r.driver_path, &r.backend, &r.device, &r.config,
                         &r.host, &r.revision, &r.driver_build_id, &r.driver_sha256, &r.selection};
  enum { N = sizeof strs / sizeof strs[0] };
  size_t need = 1;
  for (int i = 0; i < N; i++) need += *strs[i] ? strlen(*strs[i]) + 1 : 0;
  char *mem = malloc(need), *p = mem;
  if (!mem) return fail(s, "run: out of memory");
  for (int i = 0; i < N; i++) {
    if (!*strs[i]) continue;
    size_t len = strlen(*strs[i]);
    memcpy(p, *strs[i], len + 1);
    *strs[i] = p;
    p += len + 1;
  }
  r.mem_ = mem;
  *dst = r;
  return 0;
}

/* Frees what the row owns and zeroes it; NULL and empty rows are fine. */
void mdc_store_run_row_free(mdc_run_row *row) {
  if (!row) return;
  free(row->mem_);
  memset(row, 0, sizeof *row);
}

/* Runs a run query whose parameters bind() sets, and owns its first row into *row. */
static int run_one(mdc_store *s, const char *where, const char *a, int64_t n, mdc_run_row *row,
                   const char *missing) {
  char sql[1024];
  snprintf(sql, sizeof sql, "%s%s", run_select(s), where);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, s->db, "run");
  if (a) sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
  else sqlite3_bind_int64(st, 1, n);
  int rc = sqlite3_step(st), ret;
  if (rc == SQLITE_ROW) {
    mdc_run_row tmp;
    run_from_stmt(st, &tmp);
    ret = run_own(s, &tmp, row);
  } else if (rc == SQLITE_DONE) {
    fail(s, "%s", missing);
    ret = MDC_STORE_NOT_FOUND;
  } else {
    ret = fail_db(s, s->db, "run");
  }
  sqlite3_finalize(st);
  return ret;
}

/* The row owns its strings (mdc_store_run_row_free); MDC_STORE_NOT_FOUND or -1 on failure. */
int mdc_store_run_get(mdc_store *s, int64_t run_id, mdc_run_row *row) {
  if (!s || !row) return -1;
  memset(row, 0, sizeof *row);
  char missing[64];
  snprintf(missing, sizeof missing, "run %" PRId64 ": no such run", run_id);
  return run_one(s, "WHERE id = ?1", NULL, run_id, row, missing);
}

/* The row owns its strings; MDC_STORE_NOT_FOUND for no such run or an ambiguous prefix. */
int mdc_store_run_find(mdc_store *s, const char *ref, const char *kind, mdc_run_row *row) {
  if (!s || !row) return -1;
  memset(row, 0, sizeof *row);
  if (!ref || !ref[0]) return fail(s, "no run given (a uuid, a prefix of one, or 'latest')");
  char missing[256];
  if (strcmp(ref, "latest") == 0) {
    if (kind) snprintf(missing, sizeof missing, "no run of kind '%.64s'", kind);
    else snprintf(missing, sizeof missing, "no runs");
    return run_one(s, kind ? "WHERE kind = ?1 ORDER BY started_at DESC, id DESC LIMIT 1"
                           : "WHERE ?1 IS NULL OR 1 ORDER BY started_at DESC, id DESC LIMIT 1",
                   kind, 0, row, missing);
  }
  size_t len = strlen(ref);
  for (size_t i = 0; i < len; i++)
    if (!strchr("0123456789abcdefABCDEF-", ref[i]) || len > 36) {
      fail(s, "'%.64s' is not a run uuid (nor 'latest')", ref);
      return MDC_STORE_NOT_FOUND;
    }
  snprintf(missing, sizeof missing, "no run '%s'", ref);
  if (len == 36) return run_one(s, "WHERE uuid = lower(?1)", ref, 0, row, missing);
  if (len < 4) {
    fail(s, "run '%s': a uuid prefix needs at least 4 characters", ref);
    return MDC_STORE_NOT_FOUND;
  }
  /* A prefix: exactly one run must start with it. */
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM runs WHERE substr(uuid, 1, length(?1)) = lower(?1)",
                         -1, &st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "run");
  sqlite3_bind_text(st, 1, ref, -1, SQLITE_STATIC);
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (n < 0) return fail_db(s, s->db, "run");
  if (n > 1) {
    fail(s, "run '%s': %" PRId64 " runs start with it; give more of the uuid", ref, n);
    return MDC_STORE_NOT_FOUND;
  }
  return run_one(s, "WHERE substr(uuid, 1, length(?1)) = lower(?1)", ref, 0, row, missing);
}

/* Rows are borrowed for the call; one store per thread; fn's non-zero value or -1. */
int mdc_store_runs_each(mdc_store *s, const mdc_run_filter *f,
                        int (*fn)(void *ctx, const mdc_run_row *row), void *ctx) {
  if (!s || !fn) return -1;
  mdc_run_filter none = {0};
  if (!f) f = &none;
  /* The newest `limit` in a subquery, then turned oldest first. */
  char sql[2048];
  snprintf(sql, sizeof sql,
           "SELECT * FROM (%s WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR driver_name = ?2) "
           "AND (?3 IS NULL OR backend = ?3) AND (?4 IS NULL OR started_at < ?4 OR (started_at = ?4 AND id < ?6)) "
           "ORDER BY started_at DESC, id DESC LIMIT ?5) ORDER BY 3, 1",
           run_select(s));
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, s->db, "runs");
  mdc_store__bind_text(st, 1, f->kind);
  mdc_store__bind_text(st, 2, f->driver_name);
  mdc_store__bind_text(st, 3, f->backend);
  mdc_store__bind_text(st, 4, f->started_before);
  sqlite3_bind_int64(st, 5, f->limit ? (int64_t)f->limit : -1);
  sqlite3_bind_int64(st, 6, f->before_id);
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    mdc_run_row r;
    run_from_stmt(st, &r);
    if ((ret = fn(ctx, &r)) != 0) break;
  }
  if (ret == 0 && rc != SQLITE_DONE) ret = fail_db(s, s->db, "runs");
  sqlite3_finalize(st);
  return ret;
}

/* Fills the caller's array from one index-only query; -1 with the message on failure. */
int mdc_store_run_counts(mdc_store *s, int64_t run_id, uint32_t counts[MDC_CS_COUNT]) {
  if (!s || !counts) return -1;
  memset(counts, 0, MDC_CS_COUNT * sizeof counts[0]);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT status, count(*) FROM cases WHERE run_id = ?1 GROUP BY status",
                         -1, &st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "run_counts");
  sqlite3_bind_int64(st, 1, run_id);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int k = mdc_store_status_parse(text(st, 0));
    if (k >= 0) counts[k] = (uint32_t)sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return fail_db(s, s->db, "run_counts");
  return 0;
}

/* ---- cases ---- */

struct mdc_case_iter {
  mdc_store *s;
  sqlite3_stmt *st;
};

/* The caller owns *it (mdc_store_cases_close) and must close it before the store. */
int mdc_store_cases_open(mdc_store *s, const mdc_case_query *q, mdc_case_iter **it) {
  if (!s || !q || !it) return -1;
  *it = NULL;
  static const char *const order[] = {
    "id", "name, status, id", "duration_s DESC, name, id",
    "CASE status WHEN 'Crash' THEN 0 WHEN 'Timeout' THEN 1 WHEN 'Fail' THEN 2 WHEN 'OrderDependent' THEN 2 WHEN 'TraceError' THEN 3 "
    "WHEN 'UnexpectedPass' THEN 4 WHEN 'Running' THEN 5 WHEN 'Interrupted' THEN 5 WHEN 'Flake' THEN 6 WHEN 'Warn' THEN 7 "
    "WHEN 'ExpectedFail' THEN 8 WHEN 'NotSupported' THEN 9 WHEN 'Skipped' THEN 9 ELSE 10 END, name, id"};
  if ((unsigned)q->order > MDC_CASES_WORST_FIRST) return fail(s, "cases: unknown order %d", (int)q->order);
  char sql[1536];
  snprintf(sql, sizeof sql, "SELECT id, run_id, %s FROM cases WHERE run_id = ?1%s%s ORDER BY %s LIMIT ?2",
           q->light ? "name, NULL, status, NULL, NULL, 0.0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
                      MDC_STORE__CASE_V4_NULLS
                    : mdc_store__case_cols(s->version),
           q->not_passing ? " AND status <> 'Pass'" : "",
           q->order == MDC_CASES_SLOWEST ? " AND status NOT IN ('Running', 'Interrupted')" : "", order[q->order]);
  mdc_case_iter *c = calloc(1, sizeof *c);
  if (!c) return fail(s, "cases: out of memory");
  c->s = s;
  if (sqlite3_prepare_v2(s->db, sql, -1, &c->st, NULL) != SQLITE_OK) {
    fail_db(s, s->db, "cases");
    free(c);
    return -1;
  }
  sqlite3_bind_int64(c->st, 1, q->run_id);
  sqlite3_bind_int64(c->st, 2, q->limit ? (int64_t)q->limit : -1);
  *it = c;
  return 0;
}

/* Rows are borrowed until the next call; 1, 0 at the end, -1 with the store's message. */
int mdc_store_cases_next(mdc_case_iter *it, mdc_case_row *row) {
  if (!it || !row) return -1;
  int rc = sqlite3_step(it->st);
  if (rc == SQLITE_ROW) {
    mdc_store__case_from_stmt(it->st, row);
    return 1;
  }
  if (rc == SQLITE_DONE) return 0;
  return fail_db(it->s, it->s->db, "cases");
}

/* Frees the cursor; NULL is fine. */
void mdc_store_cases_close(mdc_case_iter *it) {
  if (!it) return;
  sqlite3_finalize(it->st);
  free(it);
}

/* A name whose status changed, with its count: an open-addressing table of the changed names
 * only (a stable case never enters it). */
typedef struct change {
  char *name;
  uint32_t changes;
} change;

typedef struct change_map {
  change *v;
  size_t cap, n;
} change_map;

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;  /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int change_add(change_map *m, const char *name) {
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 256;
    change *v = calloc(cap, sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->v[i].name) continue;
      size_t k = hash_name(m->v[i].name) & (cap - 1);
      while (v[k].name) k = (k + 1) & (cap - 1);
      v[k] = m->v[i];
    }
    free(m->v);
    m->v = v;
    m->cap = cap;
  }
  size_t k = hash_name(name) & (m->cap - 1);
  while (m->v[k].name && strcmp(m->v[k].name, name)) k = (k + 1) & (m->cap - 1);
  if (!m->v[k].name) {
    if (!(m->v[k].name = strdup(name))) return -1;
    m->n++;
  }
  m->v[k].changes++;
  return 0;
}

static int by_changes(const void *a, const void *b) {
  const change *x = a, *y = b;
  if (x->changes != y->changes) return x->changes > y->changes ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Counts changes between runs a and b: both walked by name from the index. */
static int pair_changes(mdc_store *s, int64_t a, int64_t b, change_map *m) {
  mdc_case_query qa = {.run_id = a, .order = MDC_CASES_BY_NAME, .light = 1}, qb = qa;
  qb.run_id = b;
  mdc_case_iter *ia = NULL, *ib = NULL;
  int ret = -1;
  if (mdc_store_cases_open(s, &qa, &ia) != 0 || mdc_store_cases_open(s, &qb, &ib) != 0) goto out;
  mdc_case_row x, y;
  int hx = mdc_store_cases_next(ia, &x), hy = mdc_store_cases_next(ib, &y);
  while (hx == 1 && hy == 1) {
    int c = strcmp(x.name, y.name);
    if (c == 0 && strcmp(x.status, y.status) != 0 && change_add(m, y.name) != 0) {
      fail(s, "verdict_changes: out of memory");
      goto out;
    }
    if (c <= 0) hx = mdc_store_cases_next(ia, &x);
    if (c >= 0) hy = mdc_store_cases_next(ib, &y);
  }
  ret = hx < 0 || hy < 0 ? -1 : 0;
out:
  mdc_store_cases_close(ia);
  mdc_store_cases_close(ib);
  return ret;
}

/* Holds only the changed names; one store per thread; fn's value, or -1 with the message. */
int mdc_store_verdict_changes(mdc_store *s, const int64_t *run_ids, size_t n_runs,
                              uint32_t limit,
                              int (*fn)(void *ctx, const char *name, uint32_t changes,
                                        uint32_t runs, const char *last_status),
                              void *ctx) {
  if (!s || !fn || (n_runs && !run_ids)) return -1;
  if (n_runs < 2) return 0;
  /* Consecutive runs side by side (index only, no table seeks), changed names counted. */
  change_map m = {0};
  int ret = 0;
  sqlite3_stmt *st = NULL;
  for (size_t i = 1; i < n_runs && ret == 0; i++) ret = pair_changes(s, run_ids[i - 1], run_ids[i], &m);
  if (ret != 0) goto out;
  size_t n = 0;
  for (size_t i = 0; i < m.cap; i++)
    if (m.v[i].name) m.v[n++] = m.v[i];
  if (n) qsort(m.v, n, sizeof *m.v, by_changes);
  if (limit && n > limit) {
    for (size_t i = limit; i < n; i++) free(m.v[i].name);
    n = limit;
  }
  m.n = n;
  m.cap = n; /* the entries are packed now: freed below as an array */
  /* For the names shown: how many of the runs ran each, and its status in the newest one. */
  if (sqlite3_prepare_v2(s->db, "SELECT status FROM cases WHERE run_id = ?1 AND name = ?2 ORDER BY id DESC LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK) {
    ret = fail_db(s, s->db, "verdict_changes");
    goto out;
  }
  for (size_t i = 0; i < n && ret == 0; i++) {
    uint32_t runs = 0;
    char last[32] = "";
    for (size_t r = 0; r < n_runs; r++) {
      sqlite3_bind_int64(st, 1, run_ids[r]);
      sqlite3_bind_text(st, 2, m.v[i].name, -1, SQLITE_STATIC);
      int rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        runs++;
        snprintf(last, sizeof last, "%s", text(st, 0));
      } else if (rc != SQLITE_DONE) {
        ret = fail_db(s, s->db, "verdict_changes");
      }
      sqlite3_reset(st);
    }
    if (ret == 0) ret = fn(ctx, m.v[i].name, m.v[i].changes, runs, last);
  }
out:
  sqlite3_finalize(st);
  for (size_t i = 0; i < m.cap; i++) free(m.v[i].name);
  free(m.v);
  return ret;
}

/* ---- fuzz ---- */

static double real_or_nan(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static int64_t int_or_neg(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

/* Rows borrowed for the call; nothing for a store without fuzz tables; fn's value or -1. */
int mdc_store_fuzz_campaigns_each(mdc_store *s, uint32_t limit,
                                  int (*fn)(void *ctx, const mdc_fuzz_campaign_row *row),
                                  void *ctx) {
  if (!s || !fn) return -1;
  if (!mdc_store__has_fuzz(s)) return 0;
  static const char sql[] =
    "SELECT * FROM (SELECT r.id, r.uuid, r.started_at, r.ended_at, r.revision, r.host, f.target, "
    "f.out_dir, f.jobs, f.planned_s, f.resumed, r.interrupted FROM fuzz_campaigns f "
    "JOIN runs r ON r.id = f.run_id ORDER BY r.started_at DESC, r.id DESC LIMIT ?1) "
    "ORDER BY 3, 1";
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, s->db, "fuzz_campaigns");
  sqlite3_bind_int64(st, 1, limit ? (int64_t)limit : -1);
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    mdc_fuzz_campaign_row r = {
      .run_id = sqlite3_column_int64(st, 0), .uuid = text(st, 1), .started_at = text(st, 2),
      .ended_at = text(st, 3), .revision = text(st, 4), .host = text(st, 5), .target = text(st, 6),
      .out_dir = text(st, 7), .jobs = (uint32_t)sqlite3_column_int64(st, 8),
      .planned_s = real_or_nan(st, 9), .resumed = sqlite3_column_int(st, 10) != 0,
      .interrupted = sqlite3_column_int(st, 11) != 0};
    if ((ret = fn(ctx, &r)) != 0) break;
  }
  if (ret == 0 && rc != SQLITE_DONE) ret = fail_db(s, s->db, "fuzz_campaigns");
  sqlite3_finalize(st);
  return ret;
}

/* Samples borrowed for the call; nothing without fuzz tables; fn's value or -1. */
int mdc_store_fuzz_stats_each(mdc_store *s, int64_t run_id,
                              int (*fn)(void *ctx, const mdc_fuzz_stat *st), void *ctx) {
  if (!s || !fn) return -1;
  if (!mdc_store__has_fuzz(s)) return 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats WHERE run_id = ?1 "
                         "ORDER BY instance, t_s", -1, &st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "fuzz_stats");
  sqlite3_bind_int64(st, 1, run_id);
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    mdc_fuzz_stat v = {.instance = text(st, 0), .t_s = sqlite3_column_double(st, 1),
                       .execs = int_or_neg(st, 2), .execs_per_sec = real_or_nan(st, 3),
                       .edges = int_or_neg(st, 4), .corpus = int_or_neg(st, 5),
                       .crashes = int_or_neg(st, 6), .hangs = int_or_neg(st, 7),
                       .stability = real_or_nan(st, 8), .rss_kb = int_or_neg(st, 9)};
    if ((ret = fn(ctx, &v)) != 0) break;
  }
  if (ret == 0 && rc != SQLITE_DONE) ret = fail_db(s, s->db, "fuzz_stats");
  sqlite3_finalize(st);
  return ret;
}

/* Rows borrowed for the call; nothing without fuzz tables; fn's value or -1. */
int mdc_store_fuzz_findings_each(mdc_store *s, int64_t run_id, uint32_t limit,
                                 int (*fn)(void *ctx, const mdc_fuzz_finding_row *f), void *ctx) {
  if (!s || !fn) return -1;
  if (!mdc_store__has_fuzz(s)) return 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT id, run_id, " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings "
                         "WHERE (?1 = 0 OR run_id = ?1) ORDER BY count DESC, first_seen, id LIMIT ?2",
                         -1, &st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "fuzz_findings");
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, limit ? (int64_t)limit : -1);
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    mdc_fuzz_finding_row f = {
      .id = sqlite3_column_int64(st, 0), .run_id = sqlite3_column_int64(st, 1),
      .target = text(st, 2), .signature = text(st, 3), .kind = text(st, 4), .message = text(st, 5),
      .count = (uint32_t)sqlite3_column_int64(st, 6), .first_seen = text(st, 7),
      .last_seen = text(st, 8), .replays = int_or_neg(st, 9), .reproduced = int_or_neg(st, 10),
      .reproducer = text(st, 11), .minimized = text(st, 12), .trace = text(st, 13)};
    if ((ret = fn(ctx, &f)) != 0) break;
  }
  if (ret == 0 && rc != SQLITE_DONE) ret = fail_db(s, s->db, "fuzz_findings");
  sqlite3_finalize(st);
  return ret;
}

/* One query; 0 for a store without fuzz tables; -1 with the message on failure. */
int mdc_store_fuzz_findings_count(mdc_store *s, int64_t run_id, uint32_t *n) {
  if (!s || !n) return -1;
  *n = 0;
  if (!mdc_store__has_fuzz(s)) return 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM fuzz_findings WHERE (?1 = 0 OR run_id = ?1)", -1,
                         &st, NULL) != SQLITE_OK)
    return fail_db(s, s->db, "fuzz_findings");
  sqlite3_bind_int64(st, 1, run_id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *n = (uint32_t)sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 0 : fail_db(s, s->db, "fuzz_findings");
}
