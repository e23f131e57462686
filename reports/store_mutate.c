/* store_mutate.c - the mutate_results table (schema v4): mdc mutate's verdict per generated
 * mutant, read back for the report and for the order in which traces are tried. */
#include <math.h>
#include <sqlite3.h>
#include <string.h>

#include "store_int.h"

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

int mdc_store_mutate_put(mdc_store *s, int64_t run_id, const mdc_mutate_row *r) {
  if (!r || !r->mutant || !r->file || !r->op || !r->status)
    return mdc_store__fail(s, "mutate row: mutant, file, operator and status are required");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT OR REPLACE INTO mutate_results (run_id, " MDC_STORE__MUTATE_COLS
                         ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return mdc_store__fail_db(s, s->db, "mutate_results insert");
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, r->mutant);
  bind_text(st, 3, r->file);
  bind_text(st, 4, r->function);
  if (r->line) sqlite3_bind_int64(st, 5, r->line);
  else sqlite3_bind_null(st, 5);
  bind_text(st, 6, r->op);
  bind_text(st, 7, r->status);
  bind_text(st, 8, r->killed_by);
  bind_text(st, 9, r->kill_kind);
  if (r->traces_run >= 0) sqlite3_bind_int64(st, 10, r->traces_run);
  else sqlite3_bind_null(st, 10);
  if (r->duration_s >= 0 && !isnan(r->duration_s)) sqlite3_bind_double(st, 11, r->duration_s);
  else sqlite3_bind_null(st, 11);
  bind_text(st, 12, r->diff);
  bind_text(st, 13, r->reach);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : mdc_store__fail_db(s, s->db, "mutate_results insert");
}

static int has_table(mdc_store *s) {
  sqlite3_stmt *st = NULL;
  int yes = sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='mutate_results'", -1,
                               &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return yes;
}

static const char *col(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

int mdc_store_mutate_each(mdc_store *s, int64_t run_id, int (*fn)(void *ctx, const mdc_mutate_row *r), void *ctx) {
  if (!has_table(s)) return 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT " MDC_STORE__MUTATE_COLS " FROM mutate_results WHERE run_id = ? "
                         "ORDER BY file, line, mutant",
                         -1, &st, NULL) != SQLITE_OK)
    return mdc_store__fail_db(s, s->db, "mutate_results read");
  sqlite3_bind_int64(st, 1, run_id);
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    mdc_mutate_row r = {.mutant = col(st, 0), .file = col(st, 1), .function = col(st, 2),
                        .line = (uint32_t)sqlite3_column_int64(st, 3), .op = col(st, 4), .status = col(st, 5),
                        .killed_by = col(st, 6), .kill_kind = col(st, 7),
                        .traces_run = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 8),
                        .duration_s = sqlite3_column_type(st, 9) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 9),
                        .diff = col(st, 10), .reach = col(st, 11)};
    if ((ret = fn(ctx, &r)) != 0) break;
  }
  if (ret == 0 && rc != SQLITE_DONE) ret = mdc_store__fail_db(s, s->db, "mutate_results read");
  sqlite3_finalize(st);
  return ret;
}

int mdc_store_mutate_kill_counts(mdc_store *s, int (*fn)(void *ctx, const char *killed_by, uint32_t n), void *ctx) {
  if (!has_table(s)) return 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT killed_by, COUNT(*) AS n FROM mutate_results WHERE status = 'killed' AND "
                         "killed_by IS NOT NULL GROUP BY killed_by ORDER BY n DESC, killed_by",
                         -1, &st, NULL) != SQLITE_OK)
    return mdc_store__fail_db(s, s->db, "mutate_results read");
  int rc, ret = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if ((ret = fn(ctx, col(st, 0), (uint32_t)sqlite3_column_int64(st, 1))) != 0) break;
  if (ret == 0 && rc != SQLITE_DONE) ret = mdc_store__fail_db(s, s->db, "mutate_results read");
  sqlite3_finalize(st);
  return ret;
}
