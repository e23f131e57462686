/* report_causes.c - the page's causes (issue 26): the non-passing cases grouped by cause
 * signature, largest first, each opening to its cases, a crash's stack and a reduced reproducer
 * when `mdc reduce --db` recorded one; and the status badges and stacks the case table shares. */
#include "report_int.h"

#include <stdio.h>
#include <string.h>

static void esc(FILE *f, const char *s) { rp_xml(f, s, RP_TEXT_CAP); }

/* The causes table and the readable case table (issue 26). .cause-n is a colour of its own,
 * used nowhere else, so a screenshot can count the causes on the first screen (mdc_png_check). */
const char rp_css_causes[] =
  ".cause-n{display:inline-block;min-width:52px;padding:1px 8px;border-radius:4px;background:#3949ab;color:#fff;"
  "font-weight:600;text-align:right;font-variant-numeric:tabular-nums}\n"
  "table.causes td:first-child{min-width:0;width:70px}details.cause summary{cursor:pointer}"
  "details.cause ul{margin:4px 0;padding-left:20px;columns:2}\n"
  "pre.stack{font-size:12px;background:#f6f8fa;padding:6px 8px;margin:4px 0;overflow-x:auto;white-space:pre}\n"
  "table.cases td:first-child{max-width:none}table.cases tbody{border-bottom:2px solid #e1e4e8}"
  "table.cases tr.detail td{border:0;padding:0 8px 8px 24px}table.cases tr.head td{border:0}\n"
  ".ea{display:grid;grid-template-columns:max-content 1fr;gap:1px 10px}.ea code{white-space:pre-wrap;word-break:break-word}\n";

void rp_html_status_badge(FILE *f, const char *st) {
  if (!st) {
    fprintf(f, "<span class=\"st s-none\">-</span>");
    return;
  }
  int known = mdc_store_status_parse(st) >= 0;
  fprintf(f, "<span class=\"st s-%s\">", known ? st : "none");
  esc(f, st);
  fprintf(f, "</span>");
}


#define CAUSE_NAMES 20

typedef struct cause_ctx {
  FILE *f;
  uint32_t shown;
} cause_ctx;

/* A stack, at most max frames. */
void rp_html_stack(FILE *f, const char *stack, int max) {
  fprintf(f, "<pre class=\"stack\">");
  int k = 0;
  const char *p = stack;
  for (; p && *p && k < max; k++) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) + 1 : strlen(p);
    char line[1200];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
    rp_xml(f, line, 0);
    p = eol ? eol + 1 : NULL;
  }
  if (p && *p) fprintf(f, "...");
  fprintf(f, "</pre>");
}

static int on_cause(void *ctx, const mdc_case_group *g) {
  cause_ctx *cc = ctx;
  FILE *f = cc->f;
  cc->shown++;
  fprintf(f, "<tr><td class=\"n\"><span class=\"cause-n\">%u</span></td><td>", g->count);
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (g->counts[i]) {
      rp_html_status_badge(f, mdc_store_status_name((mdc_case_status)i));
      if (g->counts[i] != g->count) fprintf(f, " %u ", g->counts[i]);
    }
  fprintf(f, "</td><td><details class=\"cause\"><summary><code>");
  esc(f, g->signature);
  fprintf(f, "</code> <span class=\"dim\">(");
  for (uint32_t i = 0; i < g->n_names && i < 2; i++) {
    fprintf(f, "%s", i ? ", " : "");
    esc(f, g->names[i]);
  }
  if (g->count > 2) fprintf(f, " and %u more", g->count - 2);
  fprintf(f, ")</span></summary>\n");
  if (g->n_names && g->stacks[0]) rp_html_stack(f, g->stacks[0], 12);
  if (g->reduced) { /* mdc reduce --db: a few events that fail the same way */
    fprintf(f, "<p>Reduced reproducer: <a href=\"");
    rp_xml(f, g->reduced, 0);
    fprintf(f, "\"><code>");
    esc(f, g->reduced);
    fprintf(f, "</code></a></p>");
  }
  fprintf(f, "<ul>");
  for (uint32_t i = 0; i < g->n_names; i++) {
    fprintf(f, "<li><code>");
    esc(f, g->names[i]);
    fprintf(f, "</code></li>");
  }
  fprintf(f, "</ul>");
  if (g->count > g->n_names)
    fprintf(f, "<p class=\"dim\">%u more: every case is under <a href=\"#failures\">non-passing</a>.</p>", g->count - g->n_names);
  fprintf(f, "</details></td></tr>\n");
  return 0;
}

/* The causes: the non-passing cases grouped by signature, largest first, on the first screen;
 * each group opens to its cases (and a crash's stack). 0, or -1 on a store error. */
int rp_html_causes(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"causes\">\n<h2>Causes</h2>\n");
  uint32_t ns = r->counts[MDC_CS_NOT_SUPPORTED], warn = r->counts[MDC_CS_WARN];
  fprintf(f, "<table class=\"causes\"><thead><tr><th class=\"n\">cases</th><th>status</th><th>cause (click for its "
             "cases)</th></tr></thead>\n<tbody>\n");
  cause_ctx cc = {.f = f};
  if (mdc_store_groups_each(r->store, r->run.id, CAUSE_NAMES, r->max_rows, on_cause, &cc) < 0) return -1;
  fprintf(f, "</tbody></table>\n<p class=\"dim\">");
  if (!cc.shown)
    fprintf(f, "%s ", mdc_store_version(r->store) < 4 ? "No cause recorded (a store older than schema v4)."
                                                        : "No failing case.");
  else
    fprintf(f, "Cases that fail for one reason share a cause: the failing op, expected and actual, the rule when the "
               "driver owed a refusal, the driver's message (numbers, addresses and names masked), or a crash's "
               "signal and top frames. ");
  fprintf(f, "Not grouped: %u NotSupported, %u Warn.</p>\n</section>\n", ns, warn);
  return 0;
}
