/* store_fuzz.c - writing the fuzz tables of the results store (schema v2): a campaign's row,
 * its stats samples and its findings, each an upsert on its key (docs/results-schema.md). */
#include "store_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define NOW MDC_STORE__NOW
#define fail mdc_store__fail
#define fail_db mdc_store__fail_db
#define bind_text mdc_store__bind_text
#define prepare mdc_store__prepare
#define writable mdc_store__writable

/* The fuzz writes' statements, made at open and reused; -1 with the message. */
int mdc_store__prepare_fuzz(mdc_store *s) {
  return prepare(s, &s->campaign_put,
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
  int own = mdc_store__savepoint_begin(s, "fuzz_stats");
  if (own < 0) return -1;
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
  return mdc_store__savepoint_end(s, "fuzz_stats", own, rc);
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
