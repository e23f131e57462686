/* report_mutants.c - the page's mutant matrix: the newest `mdc mutants` run of the store, each
 * mutant (the reference driver with one rule broken) killed, SURVIVED or not built, and the
 * traces that kill it, as a grid of dots when they are few (docs/reports.md, section 9). */
#include "report_int.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MATRIX_COLS 40

static void esc(FILE *f, const char *s) { rp_xml(f, s, RP_TEXT_CAP); }

typedef struct mutant_row {
  char *name, *status, *rule, *message;
  char **killers;
  size_t n_killers;
} mutant_row;

/* The mutants of one run and the traces that kill any of them (the matrix's columns). */
typedef struct mutant_set {
  mutant_row *m;
  size_t n, cap;
  char **cols;
  size_t ncols, capcols;
} mutant_set;

static void mutant_set_free(mutant_set *ms) {
  for (size_t i = 0; i < ms->n; i++) {
    mutant_row *m = ms->m;
    free(m[i].name), free(m[i].status), free(m[i].rule), free(m[i].message);
    for (size_t k = 0; k < m[i].n_killers; k++) free(m[i].killers[k]);
    free(m[i].killers);
  }
  free(ms->m);
  for (size_t k = 0; k < ms->ncols; k++) free(ms->cols[k]);
  free(ms->cols);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A new zeroed row at the end of ms; NULL when the rows cannot grow. */
static mutant_row *mutant_new(mutant_set *ms) {
  if (ms->n == ms->cap) {
    ms->cap = ms->cap ? 2 * ms->cap : 32;
    mutant_row *v = realloc(ms->m, ms->cap * sizeof *v);
    if (!v) return NULL;
    ms->m = v;
  }
  mutant_row *x = &ms->m[ms->n++];
  memset(x, 0, sizeof *x);
  return x;
}

/* Adds trace t to the columns unless it is there; -1 when they cannot grow. */
static int killer_column(mutant_set *ms, const char *t) {
  int seen = 0;
  for (size_t k = 0; k < ms->ncols && !seen; k++) seen = !strcmp(ms->cols[k], t);
  if (seen) return 0;
  if (ms->ncols == ms->capcols) {
    ms->capcols = ms->capcols ? 2 * ms->capcols : 32;
    char **nc = realloc(ms->cols, ms->capcols * sizeof *nc);
    if (!nc) return -1;
    ms->cols = nc;
  }
  ms->cols[ms->ncols++] = strdup(t);
  return 0;
}

/* Fills x from case c (the mutant's name after its folder, its verdict, the rule it breaks and
 * details.killed_by); each killer also becomes a column. -1 when the columns cannot grow. */
static int mutant_fill(mutant_set *ms, mutant_row *x, const mdc_case_row *c) {
  int ok = 1;
  const char *slash = strchr(c->name, '/');
  x->name = strdup(slash ? slash + 1 : c->name);
  x->status = strdup(c->status);
  x->rule = c->rule ? strdup(c->rule) : NULL;
  x->message = c->message ? strdup(c->message) : NULL;
  json_t *d = c->details ? json_loads(c->details, 0, NULL) : NULL, *by = json_object_get(d, "killed_by"), *v;
  size_t i;
  x->killers = calloc(json_array_size(by) + 1, sizeof *x->killers);
  json_array_foreach(by, i, v) {
    if (!json_is_string(v) || !x->killers) continue;
    const char *t = json_string_value(v);
    x->killers[x->n_killers++] = strdup(t);
    if (killer_column(ms, t) != 0) {
      ok = 0;
      break;
    }
  }
  json_decref(d);
  return ok ? 0 : -1;
}

/* Reads the mutants of run run_id into ms. The mutants of one run are few (one per rule
 * broken): held whole for the matrix. Out of memory stops the reading, keeping what was read;
 * -1 when the store fails. */
static int mutants_read(rp_report *r, int64_t run_id, mutant_set *ms) {
  mdc_case_query q = {.run_id = run_id, .order = MDC_CASES_BY_NAME, .limit = r->max_rows};
  mdc_case_iter *it;
  if (mdc_store_cases_open(r->store, &q, &it) != 0) return -1;
  mdc_case_row c;
  int ok = 1, rc;
  while ((rc = mdc_store_cases_next(it, &c)) == 1 && ok) {
    mutant_row *x = mutant_new(ms);
    if (!x) break;
    ok = mutant_fill(ms, x, &c) == 0;
  }
  mdc_store_cases_close(it);
  return rc < 0 ? -1 : 0;
}

/* How many were killed, in which run, and what a mutant is. */
static void mutants_summary(FILE *f, const mdc_run_row *mr, const mutant_set *ms) {
  size_t killed = 0;
  for (size_t i = 0; i < ms->n; i++) killed += !strcmp(ms->m[i].status, "Pass");
  char when[32], id[9];
  rp_when(mr->started_at, when, sizeof when);
  rp_short_uuid(mr->uuid, id);
  fprintf(f, "<p><b>%zu of %zu</b> mutants killed (run <code>%s</code>, %s UTC, revision <code>", killed, ms->n, id, when);
  esc(f, mr->revision);
  fprintf(f, "</code>). A mutant is the reference driver with one rule broken; a trace kills it when it passes on "
             "the reference driver and not on the mutant. A survivor is a rule no trace checks.</p>\n");
}

/* One mutant's row: its verdict, the rule it breaks, its killers (a dot per column of the grid,
 * or their names, at most 50). */
static void mutant_tr(FILE *f, const mutant_row *x, const mutant_set *ms, int grid) {
  int k_ = !strcmp(x->status, "Pass"), built = strcmp(x->status, "TraceError") != 0;
  fprintf(f, "<tr><td><code>");
  esc(f, x->name);
  fprintf(f, "</code></td><td><span class=\"st %s\">%s</span></td><td>", k_ ? "s-Pass" : built ? "s-Fail" : "s-TraceError",
          k_ ? "killed" : built ? "SURVIVED" : "not built");
  rp_xml(f, x->rule, 90);
  if (!built) {
    fprintf(f, "<div class=\"dim\">");
    esc(f, x->message);
    fprintf(f, "</div>");
  }
  fprintf(f, "</td><td class=\"n\">%zu</td>", x->n_killers);
  if (grid) {
    for (size_t k = 0; k < ms->ncols; k++) {
      int hit = 0;
      for (size_t j = 0; j < x->n_killers && !hit; j++) hit = !strcmp(x->killers[j], ms->cols[k]);
      fprintf(f, hit ? "<td class=\"hit\">&#x25CF;</td>" : "<td class=\"miss\">·</td>");
    }
  } else {
    fprintf(f, "<td>");
    for (size_t j = 0; j < x->n_killers && j < 50; j++) {
      fprintf(f, "%s<code>", j ? " " : "");
      esc(f, x->killers[j]);
      fprintf(f, "</code>");
    }
    if (x->n_killers > 50) fprintf(f, " and %zu more", x->n_killers - 50);
    fprintf(f, "</td>");
  }
  fprintf(f, "</tr>\n");
}

/* The matrix: a row per mutant; a numbered column per killing trace when there are few enough
 * (grid), else one column naming them. */
static void mutants_table(FILE *f, const mutant_set *ms, int grid) {
  fprintf(f, "<table class=\"matrix\"><thead><tr><th>mutant</th><th>verdict</th><th>breaks</th><th class=\"n\">killers</th>");
  if (grid)
    for (size_t k = 0; k < ms->ncols; k++) {
      fprintf(f, "<th class=\"mono\" title=\"");
      esc(f, ms->cols[k]);
      fprintf(f, "\">%zu</th>", k + 1);
    }
  else
    fprintf(f, "<th>killed by</th>");
  fprintf(f, "</tr></thead>\n<tbody>\n");
  for (size_t i = 0; i < ms->n; i++) mutant_tr(f, &ms->m[i], ms, grid);
  fprintf(f, "</tbody></table>\n");
}

/* The grid's column numbers and the traces they stand for. */
static void mutants_legend(FILE *f, const mutant_set *ms) {
  fprintf(f, "<p class=\"dim\">Columns: ");
  for (size_t k = 0; k < ms->ncols; k++) {
    fprintf(f, "%s%zu <code>", k ? " · " : "", k + 1);
    esc(f, ms->cols[k]);
    fprintf(f, "</code>");
  }
  fprintf(f, "</p>\n");
}

/* The section: the newest mdc mutants run of the store, or a line saying there is none. 0, or
 * -1 when the store fails. */
int rp_write_mutants(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"mutants\">\n<h2>Mutant matrix</h2>\n");
  mdc_run_row mr;
  int rc = mdc_store_run_find(r->store, "latest", "mutants", &mr);
  if (rc == MDC_STORE_NOT_FOUND) {
    fprintf(f, "<p class=\"dim\">No <code>mdc mutants</code> run in this store yet: it builds the reference driver's "
               "mutants (each breaks one rule) and records which traces kill each.</p>\n</section>\n");
    mdc_store_run_row_free(&mr);
    return 0;
  }
  if (rc != 0) return -1;
  mutant_set ms = {0};
  if (mutants_read(r, mr.id, &ms) != 0) {
    mutant_set_free(&ms);
    mdc_store_run_row_free(&mr);
    return -1;
  }
  if (ms.ncols) qsort(ms.cols, ms.ncols, sizeof *ms.cols, str_cmp);
  int grid = ms.ncols > 0 && ms.ncols <= MATRIX_COLS;
  mutants_summary(f, &mr, &ms);
  mutants_table(f, &ms, grid);
  if (grid) mutants_legend(f, &ms);
  fprintf(f, "</section>\n");
  mutant_set_free(&ms);
  mdc_store_run_row_free(&mr);
  return 0;
}
