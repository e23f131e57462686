/* report_mutate.c - the page's section "Generated mutants": the `mdc mutate` run shown (its
 * mutate_results rows, docs/mutate.md): the score, split by who killed (corpus alone, + unit
 * tests, + fuzz: kill_kind Test and fuzz are the later stages'), a per-file table, the survivors
 * (diff, nearest trace) and the kills, each with the trace, unit test or fuzz finding that made it. */
#include "report_int.h"

#include <stdlib.h>
#include <string.h>

static void esc(FILE *f, const char *s) { rp_xml(f, s, RP_TEXT_CAP); }

enum { BY_CORPUS, BY_TEST, BY_FUZZ };

typedef struct mu_file {
  char *file;
  uint32_t by[3], survived, equivalent;
} mu_file;

typedef struct mu_ctx {
  mu_file *v;
  size_t n;
  mu_file all;
  FILE *f;          /* second and third passes: the rows shown */
  uint32_t shown, cap;
} mu_ctx;

static int stage_of(const mdc_mutate_row *m) {
  if (m->kill_kind && (!strcmp(m->kill_kind, "Test") || !strcmp(m->kill_kind, "test"))) return BY_TEST;
  if (m->kill_kind && !strcmp(m->kill_kind, "fuzz")) return BY_FUZZ;
  return BY_CORPUS;
}

static uint32_t killed(const mu_file *x) { return x->by[BY_CORPUS] + x->by[BY_TEST] + x->by[BY_FUZZ]; }

static double pct(uint32_t k, const mu_file *x) {
  uint32_t d = killed(x) + x->survived;
  return d ? 100.0 * k / d : 100.0;
}

static void add(mu_file *x, const mdc_mutate_row *m) {
  if (!strcmp(m->status, "killed")) x->by[stage_of(m)]++;
  else if (!strcmp(m->status, "survived")) x->survived++;
  else if (!strcmp(m->status, "equivalent")) x->equivalent++;
}

static int on_tally(void *ctx, const mdc_mutate_row *m) {
  mu_ctx *c = ctx;
  mu_file *x = c->n && !strcmp(c->v[c->n - 1].file, m->file) ? &c->v[c->n - 1] : NULL; /* rows come by file */
  if (!x) {
    mu_file *v = realloc(c->v, (c->n + 1) * sizeof *v);
    if (!v) return -1;
    c->v = v;
    x = &v[c->n++];
    memset(x, 0, sizeof *x);
    if (!(x->file = strdup(m->file))) return -1;
  }
  add(x, m);
  add(&c->all, m);
  return 0;
}

static void where(FILE *f, const char *path, uint32_t line) {
  fprintf(f, "<div class=\"mono dim\">");
  esc(f, path);
  if (line) fprintf(f, ":%u", line);
  fprintf(f, "</div>");
}

static int on_survivor(void *ctx, const mdc_mutate_row *m) {
  mu_ctx *c = ctx;
  if (strcmp(m->status, "survived") || c->shown >= c->cap) return 0;
  c->shown++;
  fprintf(c->f, "<tr><td class=\"mono\">");
  esc(c->f, m->mutant);
  where(c->f, m->file, m->line);
  fprintf(c->f, "</td><td><pre>");
  esc(c->f, m->diff);
  fprintf(c->f, "</pre></td><td class=\"mono\">");
  esc(c->f, m->reach ? m->reach : "(no trace reaches its function)");
  fprintf(c->f, "</td></tr>\n");
  return 0;
}

static int on_kill(void *ctx, const mdc_mutate_row *m) {
  mu_ctx *c = ctx;
  if (strcmp(m->status, "killed") || c->shown >= c->cap) return 0;
  static const char *const stage[] = {"trace", "unit test", "fuzz"};
  c->shown++;
  fprintf(c->f, "<tr><td class=\"mono\">");
  esc(c->f, m->mutant);
  fprintf(c->f, "</td><td>%s</td><td class=\"mono\">", stage[stage_of(m)]);
  esc(c->f, m->killed_by ? m->killed_by : "?");
  fprintf(c->f, "</td><td>");
  esc(c->f, m->kill_kind ? m->kill_kind : "");
  fprintf(c->f, "</td></tr>\n");
  return 0;
}

static void more_rows(FILE *f, uint32_t total, uint32_t shown, int cols) {
  if (total > shown)
    fprintf(f, "<tfoot><tr><td colspan=\"%d\">%u more not shown (the table stops at %u rows)</td></tr></tfoot>\n", cols,
            total - shown, shown);
}

static void head(FILE *f, const mu_ctx *c) {
  const mu_file *a = &c->all;
  fprintf(f, "<section id=\"mutate\">\n<h2>Generated mutants (mdc mutate)</h2>\n<p>Score <b>%.1f%%</b>: %u killed, "
             "%u survived, %u equivalent (docs/mutate.md).",
          pct(killed(a), a), killed(a), a->survived, a->equivalent);
  if (a->by[BY_TEST] || a->by[BY_FUZZ]) {
    fprintf(f, " By who killed: corpus alone <b>%.1f%%</b> (%u), corpus + unit tests <b>%.1f%%</b> (+%u)",
            pct(a->by[BY_CORPUS], a), a->by[BY_CORPUS], pct(a->by[BY_CORPUS] + a->by[BY_TEST], a), a->by[BY_TEST]);
    if (a->by[BY_FUZZ]) fprintf(f, ", + fuzz <b>%.1f%%</b> (+%u)", pct(killed(a), a), a->by[BY_FUZZ]);
    fprintf(f, ".");
  }
  fprintf(f, "</p>\n<table class=\"sortable\"><thead><tr><th>file</th><th class=\"n\">killed</th><th class=\"n\">by "
             "corpus</th><th class=\"n\">by unit tests</th><th class=\"n\">by fuzz</th><th class=\"n\">survived</th>"
             "<th class=\"n\">equivalent</th><th class=\"n\">corpus score %%</th><th class=\"n\">score %%</th></tr>"
             "</thead>\n<tbody>\n");
  for (size_t i = 0; i < c->n; i++) {
    const mu_file *x = &c->v[i];
    fprintf(f, "<tr><td class=\"mono\">");
    esc(f, x->file);
    fprintf(f, "</td><td class=\"n\">%u</td><td class=\"n\">%u</td><td class=\"n\">%u</td><td class=\"n\">%u</td>"
               "<td class=\"n\">%u</td><td class=\"n\">%u</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>\n",
            killed(x), x->by[BY_CORPUS], x->by[BY_TEST], x->by[BY_FUZZ], x->survived, x->equivalent,
            pct(x->by[BY_CORPUS], x), pct(killed(x), x));
  }
  fprintf(f, "</tbody></table>\n");
}

int rp_write_mutate(rp_report *r, FILE *f) {
  if (!r->run.kind || strcmp(r->run.kind, "mutate")) return 0;
  mu_ctx c = {.f = f, .cap = r->max_rows};
  int rc = mdc_store_mutate_each(r->store, r->run.id, on_tally, &c);
  if (rc == 0) {
    head(f, &c);
    fprintf(f, "<h3>Survivors (%u)</h3>\n<table class=\"cases\"><thead><tr><th>mutant</th><th>change</th>"
               "<th>nearest trace</th></tr></thead>\n<tbody>\n", c.all.survived);
    rc = mdc_store_mutate_each(r->store, r->run.id, on_survivor, &c);
    fprintf(f, "</tbody>\n");
    more_rows(f, c.all.survived, c.shown, 3);
    fprintf(f, "</table>\n<h3>Killed (%u)</h3>\n<table class=\"sortable\"><thead><tr><th>mutant</th><th>by</th>"
               "<th>killer</th><th>kind</th></tr></thead>\n<tbody>\n", killed(&c.all));
    c.shown = 0;
    if (rc == 0) rc = mdc_store_mutate_each(r->store, r->run.id, on_kill, &c);
    fprintf(f, "</tbody>\n");
    more_rows(f, killed(&c.all), c.shown, 4);
    fprintf(f, "</table>\n</section>\n");
  }
  for (size_t i = 0; i < c.n; i++) free(c.v[i].file);
  free(c.v);
  return rc;
}
