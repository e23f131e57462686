/* store_groups.c - the cause groups of a run (issue 26): its non-passing cases grouped by their
 * signature column (schema v4, index cases_by_signature), for `mdc results --groups` and the
 * report's causes table. NotSupported, Warn and Skipped cases are counted apart, never grouped. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#define NOT_GROUPED "('Pass', 'NotSupported', 'Warn', 'Skipped', 'Running', 'Interrupted')"

typedef struct grp {
  char *signature;
  uint32_t count, unexpected, counts[MDC_CS_COUNT];
} grp;

static int by_size(const void *x, const void *y) {
  const grp *a = x, *b = y;
  if ((a->unexpected > 0) != (b->unexpected > 0)) return a->unexpected > 0 ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(a->signature, b->signature);
}

int mdc_store_groups_each(mdc_store *s, int64_t run_id, uint32_t names, uint32_t limit,
                          int (*fn)(void *ctx, const mdc_case_group *g), void *ctx) {
  if (!s || !fn) return -1;
  if (s->version < 4) return 0; /* no signatures before schema v4 */
  sqlite3_stmt *st = NULL, *cs = NULL, *rs = NULL;
  grp *v = NULL;
  size_t n = 0, cap = 0;
  int ret = -1;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT signature, status, count(*) FROM cases WHERE run_id = ?1 AND signature IS NOT NULL "
                         "AND status NOT IN " NOT_GROUPED " GROUP BY signature, status ORDER BY signature",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db,
                         "SELECT name, path, status, stack FROM cases WHERE run_id = ?1 AND signature = ?2 AND "
                         "status NOT IN " NOT_GROUPED " ORDER BY name LIMIT ?3",
                         -1, &cs, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db,
                         "SELECT reduced FROM cases WHERE run_id = ?1 AND signature = ?2 AND reduced IS NOT NULL "
                         "ORDER BY name LIMIT 1",
                         -1, &rs, NULL) != SQLITE_OK) {
    mdc_store__fail_db(s, s->db, "groups");
    goto out;
  }
  sqlite3_bind_int64(st, 1, run_id);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *sig = mdc_store__text(st, 0);
    int k = mdc_store_status_parse(mdc_store__text(st, 1));
    uint32_t c = (uint32_t)sqlite3_column_int64(st, 2);
    if (!sig || k < 0) continue;
    if (!n || strcmp(v[n - 1].signature, sig)) {
      if (n == cap) {
        cap = cap ? 2 * cap : 16;
        grp *w = realloc(v, cap * sizeof *w);
        if (!w) {
          mdc_store__fail(s, "groups: out of memory");
          goto out;
        }
        v = w;
      }
      memset(&v[n], 0, sizeof v[n]);
      if (!(v[n].signature = strdup(sig))) {
        mdc_store__fail(s, "groups: out of memory");
        goto out;
      }
      n++;
    }
    v[n - 1].counts[k] += c;
    v[n - 1].count += c;
    if (mdc_store_status_unexpected((mdc_case_status)k)) v[n - 1].unexpected += c;
  }
  if (rc != SQLITE_DONE) {
    mdc_store__fail_db(s, s->db, "groups");
    goto out;
  }
  if (n) qsort(v, n, sizeof *v, by_size);
  ret = 0;
  for (size_t i = 0; i < n && (!limit || i < limit) && ret == 0; i++) {
    mdc_case_group g = {.signature = v[i].signature, .count = v[i].count, .unexpected = v[i].unexpected};
    memcpy(g.counts, v[i].counts, sizeof g.counts);
    g.n_total = (uint32_t)n;
    /* Its first cases by name (their strings copied: the statement steps on). */
    char *mem[64][3] = {{0}};
    const char *nm[64], *pt[64], *ss[64];
    uint32_t want = names < 64 ? names : 64, got = 0;
    sqlite3_reset(cs);
    sqlite3_bind_int64(cs, 1, run_id);
    sqlite3_bind_text(cs, 2, v[i].signature, -1, SQLITE_STATIC);
    sqlite3_bind_int64(cs, 3, want ? want : 1);
    while (got < want && (rc = sqlite3_step(cs)) == SQLITE_ROW) {
      const char *t[3] = {mdc_store__text(cs, 0), mdc_store__text(cs, 1), mdc_store__text(cs, 3)};
      for (int k = 0; k < 3; k++) mem[got][k] = t[k] ? strdup(t[k]) : NULL;
      nm[got] = mem[got][0] ? mem[got][0] : "?";
      pt[got] = mem[got][1];
      ss[got] = mem[got][2];
      got++;
    }
    g.names = nm;
    g.paths = pt;
    g.stacks = ss;
    g.n_names = got;
    sqlite3_reset(rs);
    sqlite3_bind_int64(rs, 1, run_id);
    sqlite3_bind_text(rs, 2, v[i].signature, -1, SQLITE_STATIC);
    char *reduced = sqlite3_step(rs) == SQLITE_ROW && mdc_store__text(rs, 0) ? strdup(mdc_store__text(rs, 0)) : NULL;
    g.reduced = reduced;
    ret = fn(ctx, &g);
    free(reduced);
    for (uint32_t k = 0; k < got; k++) free(mem[k][0]), free(mem[k][1]), free(mem[k][2]);
  }
out:
  for (size_t i = 0; i < n; i++) free(v[i].signature);
  free(v);
  sqlite3_finalize(st);
  sqlite3_finalize(cs);
  sqlite3_finalize(rs);
  return ret;
}

int mdc_store_case_set_reduced(mdc_store *s, int64_t run_id, const char *name, const char *path) {
  if (!s || !name || !path) return -1;
  if (mdc_store__writable(s, "set_reduced")) return -1;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "UPDATE cases SET reduced = ?3 WHERE run_id = ?1 AND name = ?2 AND status <> 'Pass'",
                         -1, &st, NULL) != SQLITE_OK)
    return mdc_store__fail_db(s, s->db, "set_reduced");
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return mdc_store__fail_db(s, s->db, "set_reduced: cannot record the reduced trace");
  if (sqlite3_changes(s->db) == 0) {
    mdc_store__fail(s, "set_reduced: run %lld has no case named '%s' that did not pass", (long long)run_id, name);
    return MDC_STORE_NOT_FOUND;
  }
  return 0;
}
