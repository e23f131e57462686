/* report_html.c - index.html: one self-contained page (inline CSS and SVG, no network, readable
 * with scripts off; a few lines of inline script only sort tables). The run header and the totals
 * come first so they are on the first screen; then areas, the baseline comparison, flaky and
 * slow cases, every non-passing case, history, the mutant matrix (report_mutants.c) and fuzz
 * campaigns. The page is well-formed XML as well as HTML (every element closed, attributes
 * quoted, only XML's five entities), so any XML parser can check it. Long tables stop at
 * max_rows with a count of what was left out. */
#include "report_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mdc/svg.h"

#define TEXT_CAP RP_TEXT_CAP
#define SLOWEST 20
#define CHANGES 20
#define CAMPAIGNS 5

static const char css[] =
  ":root{--pass:#1b7f3b;--fail:#c62828;--crash:#6a1b9a;--timeout:#e65100;--ns:#78909c;--xf:#8d6e63;"
  "--up:#ad1457;--flake:#b8860b;--te:#4e342e;--run:#1565c0;--warn:#c77c02;--skip:#b0bec5}\n"
  "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2125;"
  "background:#f4f5f7}\n"
  "header#run{background:#1f2937;color:#f3f4f6;padding:14px 24px 14px}\n"
  "header#run h1{margin:0 0 8px;font-size:20px;font-weight:600}\n"
  ".verdict{display:inline-block;padding:2px 10px;border-radius:4px;font-size:14px;margin-left:10px;"
  "vertical-align:2px;color:#fff}\n"
  ".v-ok{background:#1b7f3b}.v-fail{background:#c62828}.v-int{background:#e65100}\n"
  "dl.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(290px,1fr));gap:1px 20px;margin:0}\n"
  "dl.meta div{display:flex;gap:6px;min-width:0}dl.meta dt{color:#9ca3af;flex:none}"
  "dl.meta dd{margin:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\n"
  ".banner{margin:10px 0 0;padding:8px 12px;background:#9a3412;border-radius:4px;color:#fff}\n"
  "main{padding:4px 24px 40px;max-width:1500px}\n"
  "section{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:10px 16px 14px;margin:12px 0}\n"
  "h2{font-size:17px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}\n"
  ".chips{display:flex;flex-wrap:wrap;gap:8px;margin:0 0 8px}\n"
  ".chip{border-radius:6px;padding:5px 12px;color:#fff;min-width:92px;font-size:13px}"
  ".chip b{display:block;font-size:24px;line-height:1.2}.chip.zero{opacity:.3}\n"
  "nav{margin:10px 0 0;font-size:13px}nav a{margin-right:14px;color:#1565c0}\n"
  "table{border-collapse:collapse;width:100%;font-size:13px;margin:4px 0}\n"
  "th,td{border-bottom:1px solid #eceff1;padding:3px 8px;text-align:left;vertical-align:top}\n"
  "th{background:#f1f3f5;font-weight:600}table.sortable th{cursor:pointer}td.n,th.n{text-align:right;"
  "font-variant-numeric:tabular-nums}\n"
  "tfoot td{color:#555;font-style:italic;border:0}\n"
  ".st{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px;white-space:nowrap}\n"
  ".s-Pass{background:var(--pass)}.s-Fail{background:var(--fail)}.s-Crash{background:var(--crash)}"
  ".s-Timeout{background:var(--timeout)}.s-NotSupported{background:var(--ns)}"
  ".s-ExpectedFail{background:var(--xf)}.s-Warn{background:var(--warn)}.s-UnexpectedPass{background:var(--up)}"
  ".s-Flake{background:var(--flake)}.s-TraceError{background:var(--te)}.s-Running{background:var(--run)}.s-Interrupted{background:var(--run)}"
  ".s-Skipped{background:var(--skip)}.s-OrderDependent{background:var(--fail)}"
  ".s-none{background:#bbb}\n"
  "code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}\n"
  "td{overflow-wrap:break-word}td:first-child{min-width:16em;max-width:34em}\n"
  "table.matrix td,table.matrix th{padding:3px 4px;white-space:nowrap}table.matrix td:first-child{min-width:0}\n"
  ".msg{white-space:pre-wrap;word-break:break-word}.dim{color:#666}.good{color:#1b7f3b}.bad{color:#c62828}\n"
  ".charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{max-width:100%;height:auto;background:#fff}\n"
  "td.newbuild{background:#fff3cd}"
  "td.hit{background:#c62828;color:#fff;text-align:center}td.miss{text-align:center;color:#ccc}\n"
  "footer{color:#666;font-size:12px;padding:0 24px 24px}\n";


/* Sorts a table by the clicked column (numbers as numbers). Written without '<' and '&' so the
 * page stays well-formed XML. */
static const char script[] =
  "document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',"
  "function(){var t=th.closest('table'),b=t.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th),"
  "d=th.dataset.dir==='a'?'d':'a';th.dataset.dir=d;var rows=Array.prototype.slice.call(b.rows);"
  "rows.sort(function(x,y){var p=x.cells[i]?x.cells[i].textContent:'',q=y.cells[i]?y.cells[i].textContent:'',"
  "m=parseFloat(p),n=parseFloat(q),c=(isNaN(m)||isNaN(n))?p.localeCompare(q):m-n;return d==='a'?c:-c});"
  "rows.forEach(function(r){b.appendChild(r)})})});\n";

static void esc(FILE *f, const char *s) { rp_xml(f, s, TEXT_CAP); }


static void meta(FILE *f, const char *label, const char *value) {
  fprintf(f, "<div><dt>%s</dt><dd title=\"", label);
  rp_xml(f, value ? value : "-", 2000);
  fprintf(f, "\">");
  esc(f, value ? value : "-");
  fprintf(f, "</dd></div>\n");
}

/* A row saying how many were left out of a cut table. */
static void more_rows(FILE *f, uint64_t total, uint64_t shown, int cols) {
  if (total > shown)
    fprintf(f, "<tfoot><tr><td colspan=\"%d\">%llu more not shown (the table stops at %llu rows)</td></tr></tfoot>\n",
            cols, (unsigned long long)(total - shown), (unsigned long long)shown);
}

static void where(FILE *f, const char *path, uint32_t line) {
  if (!path) return;
  fprintf(f, "<div class=\"mono dim\">");
  esc(f, path);
  if (line) fprintf(f, ":%u", line);
  fprintf(f, "</div>");
}

static uint32_t unexpected_of(const uint32_t *k) { return mdc_store_unexpected_of(k); }

/* ---- header and totals ---- */

static void header(rp_report *r, FILE *f) {
  const mdc_run_row *run = &r->run;
  uint32_t unexpected = unexpected_of(r->counts);
  fprintf(f, "<header id=\"run\">\n<h1>mdc report · ");
  esc(f, run->driver_name ? run->driver_name : "unknown driver");
  fprintf(f, " ");
  esc(f, run->driver_version);
  fprintf(f, " on ");
  esc(f, run->backend ? run->backend : "?");
  if (!run->ended_at) fprintf(f, "<span class=\"verdict v-int\">KILLED: the run never ended</span>");
  else if (run->interrupted) fprintf(f, "<span class=\"verdict v-int\">INTERRUPTED</span>");
  else if (unexpected) fprintf(f, "<span class=\"verdict v-fail\">FAILED: %u unexpected</span>", unexpected);
  else fprintf(f, "<span class=\"verdict v-ok\">OK</span>");
  fprintf(f, "</h1>\n<dl class=\"meta\">\n");
  char when[32], dur[32], shard[32], seed[32];
  rp_when(run->started_at, when, sizeof when);
  strncat(when, " UTC", sizeof when - strlen(when) - 1);
  rp_duration(run->duration_s, dur, sizeof dur);
  snprintf(shard, sizeof shard, "%u of %u", run->shard_index, run->shard_count);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)run->seed);
  meta(f, "run", run->uuid);
  meta(f, "kind", run->kind);
  meta(f, "started", when);
  meta(f, "duration", run->ended_at ? dur : "never ended");
  meta(f, "driver", run->driver_path);
  meta(f, "build-id", run->driver_build_id ? run->driver_build_id : "not recorded");
  meta(f, "sha256", run->driver_sha256 ? run->driver_sha256 : "not recorded");
  char sel[96];
  if (run->selection) snprintf(sel, sizeof sel, "%u traces (%.12s)", run->selection_n, run->selection);
  meta(f, "selection", run->selection ? sel : "not recorded");
  meta(f, "device", run->device);
  meta(f, "config", run->config);
  meta(f, "seed", run->has_seed ? seed : "none");
  meta(f, "shard", run->shard_count > 1 ? shard : "not sharded");
  meta(f, "host", run->host);
  meta(f, "revision", run->revision);
  meta(f, "store", r->o->db);
  fprintf(f, "</dl>\n");
  if (!run->ended_at || run->interrupted) {
    fprintf(f, "<div class=\"banner\"><b>%s</b>", !run->ended_at
                ? "This run never ended: it was killed (or is still running)."
                : "This run was stopped early on a signal (interrupted).");
    if (r->running.total) {
      fprintf(f, " Running when it stopped: ");
      for (size_t i = 0; i < r->running.n && i < 5; i++) {
        fprintf(f, "%s<code>", i ? ", " : "");
        esc(f, r->running.v[i].name);
        fprintf(f, "</code>");
        if (r->running.v[i].path) {
          fprintf(f, " (");
          esc(f, r->running.v[i].path);
          fprintf(f, ")");
        }
      }
      if (r->running.total > 5) fprintf(f, " and %llu more", (unsigned long long)(r->running.total - 5));
      fprintf(f, ".");
    }
    fprintf(f, "</div>\n");
  }
  fprintf(f, "</header>\n");
}

static void totals(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"totals\">\n<h2>Totals</h2>\n<div class=\"chips\">\n");
  for (int i = 0; i < MDC_CS_COUNT; i++) {
    const char *n = mdc_store_status_name((mdc_case_status)i);
    if ((i == MDC_CS_RUNNING || i == MDC_CS_INTERRUPTED) && !r->counts[i]) continue;
    fprintf(f, "<div class=\"chip s-%s%s\">%s<b>%u</b></div>\n", n, r->counts[i] ? "" : " zero", n, r->counts[i]);
  }
  fprintf(f, "</div>\n<p>");
  double rate = rp_pass_rate(r->counts);
  char dur[32];
  rp_duration(r->sum_duration, dur, sizeof dur);
  fprintf(f, "<b>%llu</b> cases · pass rate <b>", (unsigned long long)r->n_cases);
  if (isnan(rate)) fprintf(f, "-");
  else fprintf(f, "%.1f%%", rate);
  fprintf(f, "</b> of those that ran · <b>%u</b> unexpected · cases took %s in all", unexpected_of(r->counts), dur);
  if (r->base.kind != RP_BASE_NONE)
    fprintf(f, "<br/>Against the baseline: <b class=\"%s\">%llu regression%s</b>, <b class=\"%s\">%llu fix%s</b>, "
               "%llu still failing, %llu new (%llu failing), %llu removed, %llu other changes",
            r->cat[RP_REGRESSION].total ? "bad" : "good", (unsigned long long)r->cat[RP_REGRESSION].total,
            r->cat[RP_REGRESSION].total == 1 ? "" : "s", r->cat[RP_FIX].total ? "good" : "dim",
            (unsigned long long)r->cat[RP_FIX].total, r->cat[RP_FIX].total == 1 ? "" : "es",
            (unsigned long long)r->cat[RP_STILL_FAILING].total, (unsigned long long)r->cat[RP_NEW].total,
            (unsigned long long)r->new_failing, (unsigned long long)r->cat[RP_REMOVED].total,
            (unsigned long long)r->cat[RP_CHANGED].total);
  fprintf(f, "</p>\n<nav><a href=\"#causes\">causes</a><a href=\"#areas\">areas</a><a href=\"#baseline\">baseline</a><a href=\"#flaky\">flaky</a>"
             "<a href=\"#slowest\">slowest</a><a href=\"#failures\">non-passing</a><a href=\"#history\">history</a>"
             "<a href=\"#mutants\">mutants</a>%s%s</nav>\n</section>\n",
             r->run.kind && !strcmp(r->run.kind, "mutate") ? "<a href=\"#mutate\">generated mutants</a>" : "",
             r->has_fuzz ? "<a href=\"#fuzz\">fuzz</a>" : "");
}

/* ---- areas ---- */

static void areas(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"areas\">\n<h2>Results by area</h2>\n");
  if (!r->n_areas) {
    fprintf(f, "<p class=\"dim\">No cases.</p>\n</section>\n");
    return;
  }
  /* The chart: passing, failing, known failures, warnings and the rest (not supported, skipped)
   * per area, stacked, each in its status's colour (a known failure is not painted as a
   * failure); at most 60 areas drawn. */
  size_t n = r->n_areas < 60 ? r->n_areas : 60;
  const char **names = calloc(n, sizeof *names);
  double *y[5];
  int ok = names != NULL;
  for (int k = 0; k < 5; k++) ok &= (y[k] = calloc(n ? n : 1, sizeof *y[k])) != NULL;
  if (ok) {
    for (size_t i = 0; i < n; i++) {
      const rp_area *a = &r->areas[i];
      names[i] = a->name;
      for (int s = 0; s < MDC_CS_COUNT; s++) {
        int c = rp_verdict_class(mdc_store_status_name((mdc_case_status)s));
        int k = c > 0 ? 0 : c < 0 ? 1 : s == MDC_CS_EXPECTED_FAIL ? 2 : s == MDC_CS_WARN ? 3 : 4;
        y[k][i] += a->counts[s];
      }
    }
    mdc_svg_series s[] = {{.name = "passing", .y = y[0], .n = n, .color = "#1b7f3b"},
                          {.name = "failing", .y = y[1], .n = n, .color = "#c62828"},
                          {.name = "known failure", .y = y[2], .n = n, .color = "#8d6e63"},
                          {.name = "warn", .y = y[3], .n = n, .color = "#c77c02"},
                          {.name = "not supported or skipped", .y = y[4], .n = n, .color = "#78909c"}};
    mdc_svg_chart c = {.title = "Cases by area", .y_label = "cases", .width = 900, .height = 260,
                       .y_min = NAN, .y_max = NAN, .x_names = names, .n_x_names = n, .stacked = 1};
    mdc_svg_bar_chart(f, &c, s, 5);
  }
  free(names);
  for (int k = 0; k < 5; k++) free(y[k]);
  /* The table: one column per status that occurs in the run. */
  int used[MDC_CS_COUNT], nused = 0;
  for (int s = 0; s < MDC_CS_COUNT; s++)
    if (r->counts[s]) used[nused++] = s;
  fprintf(f, "<table class=\"sortable\"><thead><tr><th>area</th><th class=\"n\">cases</th>");
  for (int i = 0; i < nused; i++) fprintf(f, "<th class=\"n\">%s</th>", mdc_store_status_name((mdc_case_status)used[i]));
  fprintf(f, "<th class=\"n\">pass rate</th></tr></thead>\n<tbody>\n");
  for (size_t i = 0; i < r->n_areas; i++) {
    const rp_area *a = &r->areas[i];
    fprintf(f, "<tr><td>");
    esc(f, a->name);
    fprintf(f, "</td><td class=\"n\">%u</td>", a->total);
    for (int k = 0; k < nused; k++) fprintf(f, "<td class=\"n\">%u</td>", a->counts[used[k]]);
    double rate = rp_pass_rate(a->counts);
    if (isnan(rate)) fprintf(f, "<td class=\"n\">-</td></tr>\n");
    else fprintf(f, "<td class=\"n\">%.1f%%</td></tr>\n", rate);
  }
  fprintf(f, "</tbody></table>\n");
  if (r->areas_lumped)
    fprintf(f, "<p class=\"dim\">More than %zu areas: %llu cases of the rest are counted under (other).</p>\n",
            r->n_areas, (unsigned long long)r->areas_lumped);
  fprintf(f, "</section>\n");
}

/* ---- baseline ---- */

static void case_list(FILE *f, const rp_list *l, uint32_t cap, int with_base) {
  fprintf(f, "<table class=\"sortable\"><thead><tr><th>case</th>%s<th>now</th><th>message</th></tr></thead>\n<tbody>\n",
          with_base ? "<th>before</th>" : "");
  for (size_t i = 0; i < l->n; i++) {
    const rp_case *c = &l->v[i];
    fprintf(f, "<tr><td><code>");
    esc(f, c->name);
    fprintf(f, "</code>");
    where(f, c->path, c->line);
    fprintf(f, "</td>");
    if (with_base) {
      fprintf(f, "<td>");
      rp_html_status_badge(f, c->base_status);
      fprintf(f, "</td>");
    }
    fprintf(f, "<td>");
    rp_html_status_badge(f, c->status);
    fprintf(f, "</td><td class=\"msg\">");
    if (c->status) esc(f, c->message);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</tbody>\n");
  more_rows(f, l->total, l->n < cap ? l->n : cap, with_base ? 4 : 3);
  fprintf(f, "</table>\n");
}

static void baseline(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"baseline\">\n<h2>Against the baseline</h2>\n<p>Baseline: ");
  esc(f, r->base.desc);
  fprintf(f, ".</p>\n");
  if (r->base.kind == RP_BASE_NONE) {
    fprintf(f, "</section>\n");
    return;
  }
  int any = 0;
  static const rp_cat order[] = {RP_REGRESSION, RP_FIX, RP_NEW, RP_STILL_FAILING, RP_CHANGED, RP_REMOVED};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    const rp_list *l = &r->cat[order[i]];
    if (!l->total) continue;
    any = 1;
    fprintf(f, "<h3 id=\"cat-%d\">%s (%llu)</h3>\n", (int)order[i], rp_cat_title(order[i]), (unsigned long long)l->total);
    case_list(f, l, r->max_rows, order[i] != RP_NEW);
  }
  if (!any) fprintf(f, "<p class=\"good\">No case changed its status.</p>\n");
  fprintf(f, "</section>\n");
}

static void flaky(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"flaky\">\n<h2>Flaky (%llu)</h2>\n", (unsigned long long)r->flaky.total);
  if (!r->flaky.total)
    fprintf(f, "<p class=\"dim\">No case was flaky in this run (a case that fails, then passes when run again, is "
               "Flake). The cases whose status changed most often across runs are under history.</p>\n");
  else
    case_list(f, &r->flaky, r->max_rows, 0);
  fprintf(f, "</section>\n");
}

/* ---- queries that stream straight into the page ---- */

static int slowest(rp_report *r, FILE *f) {
  fprintf(f, "<section id=\"slowest\">\n<h2>Slowest cases</h2>\n");
  mdc_case_query q = {.run_id = r->run.id, .order = MDC_CASES_SLOWEST, .limit = SLOWEST};
  mdc_case_iter *it;
  if (mdc_store_cases_open(r->store, &q, &it) != 0) return -1;
  fprintf(f, "<table class=\"sortable\"><thead><tr><th>case</th><th>status</th><th class=\"n\">seconds</th></tr></thead>\n<tbody>\n");
  mdc_case_row c;
  int rc, n = 0;
  while ((rc = mdc_store_cases_next(it, &c)) == 1) {
    fprintf(f, "<tr><td><code>");
    esc(f, c.name);
    fprintf(f, "</code>");
    where(f, c.path, 0);
    fprintf(f, "</td><td>");
    rp_html_status_badge(f, c.status);
    fprintf(f, "</td><td class=\"n\">%.3f</td></tr>\n", c.duration_s);
    n++;
  }
  mdc_store_cases_close(it);
  if (rc < 0) return -1;
  fprintf(f, "</tbody></table>\n%s</section>\n", n ? "" : "<p class=\"dim\">No finished case.</p>\n");
  return 0;
}

static void cell(FILE *f, const char *label, const char *v, int code) {
  if (!v || !v[0]) return;
  fprintf(f, "<div><span class=\"dim\">%s</span> %s", label, code ? "<code>" : "");
  esc(f, v);
  fprintf(f, "%s</div>", code ? "</code>" : "");
}

static int failures(rp_report *r, FILE *f) {
  uint64_t total = r->n_cases - r->counts[MDC_CS_PASS];
  fprintf(f, "<section id=\"failures\">\n<h2>Every non-passing case (%llu)</h2>\n<p class=\"dim\">Worst first: "
             "crashes, timeouts, failures, trace errors, unexpected passes, interrupted, flaky, known failures, not "
             "supported; by name within each.</p>\n", (unsigned long long)total);
  if (!total) {
    fprintf(f, "<p class=\"good\">Every case passed.</p>\n</section>\n");
    return 0;
  }
  mdc_case_query q = {.run_id = r->run.id, .order = MDC_CASES_WORST_FIRST, .not_passing = 1, .limit = r->max_rows};
  mdc_case_iter *it;
  if (mdc_store_cases_open(r->store, &q, &it) != 0) return -1;
  /* A case is a block of two rows: its name, status and failing op; then, across the whole
   * width, expected and actual, the driver's message, the verdict only where it says more than
   * those, and a crash's stack. */
  fprintf(f, "<table class=\"cases\"><thead><tr><th>case and trace</th><th>status</th><th>failing event and rule</th>"
             "</tr></thead>\n");
  mdc_case_row c;
  int rc;
  uint64_t n = 0;
  while ((rc = mdc_store_cases_next(it, &c)) == 1) {
    fprintf(f, "<tbody><tr class=\"head\"><td><code>");
    esc(f, c.name);
    fprintf(f, "</code>");
    where(f, c.path, c.line);
    fprintf(f, "</td><td>");
    rp_html_status_badge(f, c.status);
    fprintf(f, "</td><td>");
    cell(f, "op", c.event, 1);
    cell(f, "rule", c.rule, 0);
    fprintf(f, "</td></tr>\n<tr class=\"detail\"><td colspan=\"3\"><div class=\"ea\">");
    int ea = (c.expected && c.expected[0]) || (c.actual && c.actual[0]);
    const char *items[][2] = {{"expected", c.expected}, {"actual", c.actual}, {"driver said", c.driver_message},
                              {"verdict", ea ? NULL : c.message}};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
      const char *v = items[i][1];
      if (!v || !v[0]) continue;
      if (i == 3 && c.driver_message && c.driver_message[0] && strstr(c.driver_message, v)) continue;
      fprintf(f, "<span class=\"dim\">%s</span><code>", items[i][0]);
      esc(f, v);
      fprintf(f, "</code>");
    }
    if (c.advisory && c.advisory[0]) {
      fprintf(f, "<span class=\"dim\">advisory</span><span>not judged (SPEC 8.11): ");
      esc(f, c.advisory);
      fprintf(f, "</span>");
    }
    fprintf(f, "</div>");
    if (c.stack && c.stack[0]) rp_html_stack(f, c.stack, 8);
    fprintf(f, "</td></tr></tbody>\n");
    n++;
  }
  mdc_store_cases_close(it);
  if (rc < 0) return -1;
  more_rows(f, total, n, 3);
  fprintf(f, "</table>\n</section>\n");
  return 0;
}

/* ---- history ---- */

typedef struct hist_run {
  int64_t id;
  char uuid[9], when[20], revision[48];
  char build[20];  /* the driver build: build-id (else SHA-256) prefix, "" when not recorded */
  double rate, duration;
  uint32_t cases, unexpected;
  int state;  /* 0 finished, 1 interrupted, 2 never ended */
} hist_run;

typedef struct hist {
  rp_report *r;
  hist_run *v;
  size_t n, cap;
  int failed;
} hist;

static int add_hist(hist *h, const mdc_run_row *row) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 64;
    hist_run *v = realloc(h->v, cap * sizeof *v);
    if (!v) return -1;
    h->v = v;
    h->cap = cap;
  }
  hist_run *x = &h->v[h->n];
  memset(x, 0, sizeof *x);
  x->id = row->id;
  rp_short_uuid(row->uuid, x->uuid);
  /* "11-03 14:05": short enough for an axis. */
  snprintf(x->when, sizeof x->when, "%.5s %.5s", row->started_at && strlen(row->started_at) >= 16 ? row->started_at + 5 : "?",
           row->started_at && strlen(row->started_at) >= 16 ? row->started_at + 11 : "");
  snprintf(x->revision, sizeof x->revision, "%s", row->revision ? row->revision : "?");
  snprintf(x->build, sizeof x->build, "%.16s", row->driver_build_id ? row->driver_build_id
                                                 : row->driver_sha256 ? row->driver_sha256 : "");
  x->duration = row->duration_s >= 0 ? row->duration_s : NAN;
  x->state = !row->ended_at ? 2 : row->interrupted ? 1 : 0;
  uint32_t k[MDC_CS_COUNT];
  if (mdc_store_run_counts(h->r->store, row->id, k) != 0) return h->failed = 1, -1;
  x->rate = rp_pass_rate(k);
  for (int i = 0; i < MDC_CS_COUNT; i++) x->cases += k[i];
  x->unexpected = unexpected_of(k);
  h->n++;
  return 0;
}


static int on_change(void *ctx, const char *name, uint32_t changes, uint32_t runs, const char *last) {
  FILE *f = ctx;
  fprintf(f, "<tr><td><code>");
  esc(f, name);
  fprintf(f, "</code></td><td class=\"n\">%u</td><td class=\"n\">%u</td><td>", changes, runs);
  rp_html_status_badge(f, last);
  fprintf(f, "</td></tr>\n");
  return 0;
}

static int history(rp_report *r, FILE *f) {
  const mdc_run_row *run = &r->run;
  fprintf(f, "<section id=\"history\">\n<h2>History: ");
  esc(f, run->kind);
  fprintf(f, " runs of ");
  esc(f, run->driver_name ? run->driver_name : "this driver");
  fprintf(f, " on ");
  esc(f, run->backend ? run->backend : "this backend");
  fprintf(f, "</h2>\n");
  /* Like with like (report_like.c): only runs over the same selection of traces, so the chart
   * plots the driver, not which traces happened to run. */
  hist h = {.r = r};
  rp_like like;
  char what[400];
  rp_like_what(run, what, sizeof what);
  if (rp_like_runs(r->store, run, r->history, 1, &like) != 0) return -1;
  int rc = 0;
  for (size_t i = 0; i < like.n && rc == 0; i++) {
    mdc_run_row row;
    rc = mdc_store_run_get(r->store, like.ids[i], &row) != 0 || add_hist(&h, &row) != 0 ? -1 : 0;
    mdc_store_run_row_free(&row);
  }
  if (rc < 0 || h.failed || add_hist(&h, run) != 0) {
    rp_like_free(&like);
    free(h.v);
    return -1;
  }
  fprintf(f, "<p class=\"dim\">The ");
  esc(f, what);
  fprintf(f, "; %zu shown.", h.n);
  if (like.other_selection || like.unrecorded)
    fprintf(f, " Left out: %llu earlier run%s of this driver and backend over other traces%s.",
            (unsigned long long)(like.other_selection + like.unrecorded),
            like.other_selection + like.unrecorded == 1 ? "" : "s", like.unrecorded ? " (or not recorded which)" : "");
  fprintf(f, "</p>\n");
  rp_like_free(&like);
  if (h.n < 2) {
    fprintf(f, "<p class=\"dim\">This is the first such run in the store: history starts with the next one.</p>\n</section>\n");
    free(h.v);
    return 0;
  }
  const char **names = calloc(h.n, sizeof *names);
  double *rate = calloc(h.n, sizeof *rate), *dur = calloc(h.n, sizeof *dur);
  int64_t *ids = calloc(h.n, sizeof *ids);
  if (!names || !rate || !dur || !ids) {
    free(names), free(rate), free(dur), free(ids), free(h.v);
    return -1;
  }
  for (size_t i = 0; i < h.n; i++) {
    names[i] = h.v[i].when;
    rate[i] = h.v[i].rate;
    dur[i] = h.v[i].duration;
    ids[i] = h.v[i].id;
  }
  fprintf(f, "<div class=\"charts\">\n");
  mdc_svg_series sr = {.name = "pass rate", .y = rate, .n = h.n, .color = "#1b7f3b"};
  mdc_svg_chart cr = {.title = "Pass rate per run", .y_label = "% of cases that ran", .y_unit = "%", .width = 560,
                      .height = 240, .y_min = NAN, .y_max = 100, .x_names = names, .n_x_names = h.n};
  mdc_svg_line_chart(f, &cr, &sr, 1);
  mdc_svg_series sd = {.name = "duration", .y = dur, .n = h.n, .color = "#1565c0"};
  mdc_svg_chart cd = {.title = "Duration per run", .y_label = "seconds", .y_unit = " s", .width = 560, .height = 240,
                      .y_min = 0, .y_max = NAN, .x_names = names, .n_x_names = h.n};
  mdc_svg_line_chart(f, &cd, &sd, 1);
  fprintf(f, "</div>\n<h3>Cases whose status changed most often over these %zu runs</h3>\n", h.n);
  fprintf(f, "<table class=\"sortable\"><thead><tr><th>case</th><th class=\"n\">changes</th><th class=\"n\">runs</th>"
             "<th>now</th></tr></thead>\n<tbody>\n");
  rc = mdc_store_verdict_changes(r->store, ids, h.n, CHANGES, on_change, f);
  fprintf(f, "</tbody></table>\n");
  fprintf(f, "<h3>Runs</h3>\n<table class=\"sortable\"><thead><tr><th>started (UTC)</th><th>run</th><th>revision</th>"
             "<th>driver build</th>"
             "<th class=\"n\">cases</th><th class=\"n\">pass rate</th><th class=\"n\">unexpected</th>"
             "<th class=\"n\">seconds</th><th>state</th></tr></thead>\n<tbody>\n");
  for (size_t i = h.n; i-- > 0;) {
    const hist_run *x = &h.v[i];
    fprintf(f, "<tr><td>%s</td><td><code>%s</code>%s</td><td><code>", x->when, x->uuid,
            x->id == run->id ? " <b>(this run)</b>" : r->base.kind == RP_BASE_RUN && x->id == r->base.run.id &&
                                                          r->base.store == r->store ? " (baseline)" : "");
    esc(f, x->revision);
    /* A change of driver build from the run before (oldest first) is marked. */
    int changed = i > 0 && strcmp(x->build, h.v[i - 1].build) != 0;
    fprintf(f, "</code></td><td%s><code>", changed ? " class=\"newbuild\"" : "");
    esc(f, x->build[0] ? x->build : "-");
    fprintf(f, "</code>%s</td><td class=\"n\">%u</td><td class=\"n\">",
            changed ? " <b>new build</b>" : "", x->cases);
    if (isnan(x->rate)) fprintf(f, "-");
    else fprintf(f, "%.1f%%", x->rate);
    fprintf(f, "</td><td class=\"n\">%u</td><td class=\"n\">", x->unexpected);
    if (isnan(x->duration)) fprintf(f, "-");
    else fprintf(f, "%.1f", x->duration);
    fprintf(f, "</td><td>%s</td></tr>\n", x->state == 2 ? "never ended" : x->state == 1 ? "interrupted" : "finished");
  }
  fprintf(f, "</tbody></table>\n</section>\n");
  free(names), free(rate), free(dur), free(ids), free(h.v);
  return rc < 0 ? -1 : 0;
}

/* ---- fuzz ---- */

typedef struct instance {
  char name[64];
  double *t, *eps, *edges;
  size_t n, cap;
} instance;

typedef struct stats {
  instance *v;
  size_t n;
  int oom;
} stats;

static int on_stat(void *ctx, const mdc_fuzz_stat *s) {
  stats *st = ctx;
  instance *in = st->n ? &st->v[st->n - 1] : NULL;
  if (!in || strncmp(in->name, s->instance, sizeof in->name - 1) != 0) {
    if (st->n == 16) return 0; /* a chart shows at most 16 series */
    instance *v = realloc(st->v, (st->n + 1) * sizeof *v);
    if (!v) return st->oom = 1, 1;
    st->v = v;
    in = &st->v[st->n++];
    memset(in, 0, sizeof *in);
    snprintf(in->name, sizeof in->name, "%s", s->instance);
  }
  if (in->n == in->cap) {
    size_t cap = in->cap ? 2 * in->cap : 256;
    double *t = realloc(in->t, cap * sizeof *t);
    if (t) in->t = t;
    double *e = t ? realloc(in->eps, cap * sizeof *e) : NULL;
    if (e) in->eps = e;
    double *g = e ? realloc(in->edges, cap * sizeof *g) : NULL;
    if (!g) return st->oom = 1, 1;
    in->edges = g;
    in->cap = cap;
  }
  in->t[in->n] = s->t_s / 60.0;
  in->eps[in->n] = s->execs_per_sec;
  in->edges[in->n] = s->edges >= 0 ? (double)s->edges : NAN;
  in->n++;
  return 0;
}

static void stats_free(stats *st) {
  for (size_t i = 0; i < st->n; i++) free(st->v[i].t), free(st->v[i].eps), free(st->v[i].edges);
  free(st->v);
}

typedef struct fuzz_ctx {
  rp_report *r;
  FILE *f;
  int failed;
} fuzz_ctx;

static int on_finding(void *ctx, const mdc_fuzz_finding_row *x) {
  FILE *f = ctx;
  fprintf(f, "<tr><td><span class=\"st %s\">", !strcmp(x->kind, "crash") ? "s-Crash" : !strcmp(x->kind, "hang") ? "s-Timeout" : "s-Fail");
  esc(f, x->kind);
  fprintf(f, "</span></td><td><code>");
  esc(f, x->signature);
  fprintf(f, "</code>");
  if (x->message) {
    fprintf(f, "<div class=\"msg\">");
    esc(f, x->message);
    fprintf(f, "</div>");
  }
  char first[32], last[32];
  rp_when(x->first_seen, first, sizeof first);
  rp_when(x->last_seen, last, sizeof last);
  fprintf(f, "</td><td class=\"n\">%u</td><td>%s</td><td>%s</td><td class=\"n\">", x->count, first, last);
  if (x->replays > 0) fprintf(f, "%lld/%lld (%.0f%%)", (long long)(x->reproduced > 0 ? x->reproduced : 0),
                              (long long)x->replays, 100.0 * (double)(x->reproduced > 0 ? x->reproduced : 0) / (double)x->replays);
  else fprintf(f, "not replayed");
  fprintf(f, "</td><td>");
  const char *paths[] = {x->reproducer, x->minimized, x->trace}, *labels[] = {"input", "minimized", "trace"};
  for (int i = 0; i < 3; i++) {
    if (!paths[i]) continue;
    fprintf(f, "<div><span class=\"dim\">%s</span> <code>", labels[i]);
    esc(f, paths[i]);
    fprintf(f, "</code></div>");
  }
  fprintf(f, "</td></tr>\n");
  return 0;
}

static int on_campaign(void *ctx, const mdc_fuzz_campaign_row *c) {
  fuzz_ctx *fc = ctx;
  FILE *f = fc->f;
  rp_report *r = fc->r;
  char when[32], id[9], dur[32] = "-", planned[32] = "open-ended";
  rp_when(c->started_at, when, sizeof when);
  rp_short_uuid(c->uuid, id);
  fprintf(f, "<h3><code>");
  esc(f, c->target);
  fprintf(f, "</code> · run <code>%s</code> · %s UTC</h3>\n<p>", id, when);
  if (c->planned_s >= 0) rp_duration(c->planned_s, planned, sizeof planned);
  stats st = {0};
  if (mdc_store_fuzz_stats_each(r->store, c->run_id, on_stat, &st) < 0 || st.oom) {
    stats_free(&st);
    fc->failed = 1;
    return 1;
  }
  double last_t = 0;
  for (size_t i = 0; i < st.n; i++)
    if (st.v[i].n) last_t = fmax(last_t, st.v[i].t[st.v[i].n - 1] * 60);
  if (st.n) rp_duration(last_t, dur, sizeof dur);
  fprintf(f, "%u job%s · planned %s · sampled over %s%s%s · revision <code>", c->jobs, c->jobs == 1 ? "" : "s", planned,
          dur, c->resumed ? " · resumed an earlier campaign" : "", c->interrupted ? " · interrupted" : !c->ended_at ? " · never ended" : "");
  esc(f, c->revision);
  fprintf(f, "</code>");
  if (c->out_dir) {
    fprintf(f, " · output <code>");
    esc(f, c->out_dir);
    fprintf(f, "</code>");
  }
  fprintf(f, "</p>\n");
  if (st.n) {
    mdc_svg_series se[16], sg[16];
    for (size_t i = 0; i < st.n; i++) {
      se[i] = (mdc_svg_series){.name = st.v[i].name, .x = st.v[i].t, .y = st.v[i].eps, .n = st.v[i].n};
      sg[i] = (mdc_svg_series){.name = st.v[i].name, .x = st.v[i].t, .y = st.v[i].edges, .n = st.v[i].n};
    }
    fprintf(f, "<div class=\"charts\">\n");
    mdc_svg_chart ce = {.title = "Executions per second", .x_label = "minutes", .y_label = "execs/s", .width = 560,
                        .height = 240, .y_min = 0, .y_max = NAN};
    mdc_svg_line_chart(f, &ce, se, st.n);
    mdc_svg_chart cg = {.title = "Edges covered", .x_label = "minutes", .y_label = "edges", .width = 560,
                        .height = 240, .y_min = NAN, .y_max = NAN};
    mdc_svg_line_chart(f, &cg, sg, st.n);
    fprintf(f, "</div>\n");
  } else {
    fprintf(f, "<p class=\"dim\">No statistics recorded.</p>\n");
  }
  stats_free(&st);
  uint32_t nf = 0;
  if (mdc_store_fuzz_findings_count(r->store, c->run_id, &nf) != 0) {
    fc->failed = 1;
    return 1;
  }
  if (!nf) {
    fprintf(f, "<p class=\"good\">No findings.</p>\n");
    return 0;
  }
  fprintf(f, "<table class=\"sortable\"><thead><tr><th>kind</th><th>signature</th><th class=\"n\">count</th>"
             "<th>first seen</th><th>last seen</th><th class=\"n\">reproduced</th><th>files</th></tr></thead>\n<tbody>\n");
  if (mdc_store_fuzz_findings_each(r->store, c->run_id, r->max_rows, on_finding, f) < 0) {
    fc->failed = 1;
    return 1;
  }
  fprintf(f, "</tbody>\n");
  more_rows(f, nf, nf < r->max_rows ? nf : r->max_rows, 7);
  fprintf(f, "</table>\n");
  return 0;
}

static int any_campaign(void *ctx, const mdc_fuzz_campaign_row *c) {
  (void)c;
  *(int *)ctx = 1;
  return 1;
}

static int fuzz(rp_report *r, FILE *f) {
  /* No campaign in the store (or no fuzz tables): no section at all. */
  if (!r->has_fuzz) return 0;
  uint32_t total = 0;
  if (mdc_store_fuzz_findings_count(r->store, 0, &total) != 0) return -1;
  fuzz_ctx fc = {.r = r, .f = f};
  fprintf(f, "<section id=\"fuzz\">\n<h2>Fuzz campaigns</h2>\n");
  int rc = mdc_store_fuzz_campaigns_each(r->store, CAMPAIGNS, on_campaign, &fc);
  if (rc < 0 || fc.failed) return -1;
  fprintf(f, "<p class=\"dim\">The newest %d campaigns are shown, oldest first; the store holds %u findings in all.</p>\n"
             "</section>\n", CAMPAIGNS, total);
  return 0;
}

/* Writes index.html to f, querying r->store; -1 with r->err on a store error. */
int rp_write_html(rp_report *r, FILE *f) {
  if (mdc_store_fuzz_campaigns_each(r->store, 1, any_campaign, &r->has_fuzz) < 0) {
    snprintf(r->err, sizeof r->err, "%s", mdc_store_error(r->store));
    return -1;
  }
  char id[9];
  rp_short_uuid(r->run.uuid, id);
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>mdc report: ");
  esc(f, r->run.driver_name ? r->run.driver_name : "driver");
  fprintf(f, " on ");
  esc(f, r->run.backend ? r->run.backend : "?");
  fprintf(f, ", run %s</title>\n<style>\n%s%s</style>\n</head>\n<body>\n", id, css, rp_css_causes);
  header(r, f);
  fprintf(f, "<main>\n");
  totals(r, f);
  if (rp_html_causes(r, f) != 0) {
    snprintf(r->err, sizeof r->err, "%s", mdc_store_error(r->store));
    return -1;
  }
  areas(r, f);
  baseline(r, f);
  flaky(r, f);
  if (slowest(r, f) != 0 || failures(r, f) != 0 || history(r, f) != 0 || rp_write_mutants(r, f) != 0 || rp_write_mutate(r, f) != 0 ||
      fuzz(r, f) != 0) {
    snprintf(r->err, sizeof r->err, "%s", mdc_store_error(r->store));
    return -1;
  }
  fprintf(f, "</main>\n<footer>Written by <code>mdc report</code> at ");
  esc(f, r->generated_at);
  fprintf(f, " from <code>");
  esc(f, r->o->db);
  fprintf(f, "</code>. One file: no network, no external files; scripts only sort tables (click a heading).</footer>\n"
             "<script>\n%s</script>\n</body>\n</html>\n", script);
  return 0;
}
