/* report_text.c - the report's text outputs: junit.xml (one testcase per case, written during
 * the pass; shaped after the JUnit schema CI systems read: testsuites > testsuite > properties,
 * testcase > skipped | error | failure, system-out), summary.md (the PR comment, counts in its
 * first line), and the small formatting helpers the other report files share. */
#include "report_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mdc/svg.h"

/* ---- helpers ---- */

/* Writes at most len bytes into the caller's buffer; pure. */
void rp_area_of(const char *name, char *out, size_t len) {
  if (!len) return;
  size_t n = strcspn(name ? name : "", "/");
  if (n >= len) n = len - 1;
  memcpy(out, name ? name : "", n);
  out[n] = 0;
  if (!n) snprintf(out, len, "(none)");
}

void rp_xml(FILE *f, const char *s, size_t max_chars) { mdc_svg_escape(f, s ? s : "", max_chars); }

/* An attribute value: as rp_xml, with tabs and newlines as spaces (a parser would fold them). */
static void xml_attr(FILE *f, const char *s, size_t max_chars) {
  if (!s) return;
  char buf[2048];
  size_t n = strlen(s);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, s, n);
  buf[n] = 0;
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\t' || *p == '\r') *p = ' ';
  mdc_svg_escape(f, buf, max_chars);
}

/* Writes a JSON string literal to f; never fails (write errors show in ferror). */
void rp_json_str(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", f); break;
      case '\\': fputs("\\\\", f); break;
      case '\n': fputs("\\n", f); break;
      case '\t': fputs("\\t", f); break;
      case '\r': fputs("\\r", f); break;
      default:
        if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Writes a Markdown code span to f; never fails (write errors show in ferror). */
void rp_md_code(FILE *f, const char *s, size_t max_chars) {
  fputc('`', f);
  size_t k = 0;
  for (const char *p = s ? s : ""; *p; p++) {
    if (max_chars && k++ >= max_chars) {
      fputs("...", f);
      break;
    }
    char c = *p;
    if (c == '`') c = '\'';
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if ((unsigned char)c < 0x20) continue;
    fputc(c, f);
  }
  fputc('`', f);
}

/* Writes at most len bytes into the caller's buffer; pure. */
void rp_when(const char *iso, char *out, size_t len) {
  if (!iso || strlen(iso) < 19) {
    snprintf(out, len, "%s", iso ? iso : "-");
    return;
  }
  snprintf(out, len, "%.10s %.8s", iso, iso + 11);
}

/* Writes at most len bytes into the caller's buffer; pure. */
void rp_duration(double s, char *out, size_t len) {
  if (!(s >= 0)) snprintf(out, len, "-");
  else if (s < 10) snprintf(out, len, "%.2f s", s);
  else if (s < 120) snprintf(out, len, "%.1f s", s);
  else if (s < 3600 && (int)fmod(s, 60) == 0) snprintf(out, len, "%d min", (int)(s / 60));
  else if (s < 3600) snprintf(out, len, "%d min %d s", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(out, len, "%d h %d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

void rp_short_uuid(const char *uuid, char out[9]) { snprintf(out, 9, "%.8s", uuid ? uuid : "?"); }

/* Pure; NaN when no case ran. */
double rp_pass_rate(const uint32_t counts[MDC_CS_COUNT]) {
  uint64_t ran = 0, pass = counts[MDC_CS_PASS] + counts[MDC_CS_FLAKE] + counts[MDC_CS_UNEXPECTED_PASS];
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (i != MDC_CS_NOT_SUPPORTED && i != MDC_CS_SKIPPED) ran += counts[i];
  return ran ? 100.0 * (double)pass / (double)ran : NAN;
}

/* ---- junit.xml ---- */

static uint32_t sum(const uint32_t *c, const int *which, size_t n) {
  uint32_t k = 0;
  for (size_t i = 0; i < n; i++) k += c[which[i]];
  return k;
}

static const int junit_failures[] = {MDC_CS_FAIL, MDC_CS_UNEXPECTED_PASS, MDC_CS_ORDER_DEPENDENT};
static const int junit_errors[] = {MDC_CS_CRASH, MDC_CS_TIMEOUT, MDC_CS_TRACE_ERROR, MDC_CS_RUNNING, MDC_CS_INTERRUPTED};
static const int junit_skipped[] = {MDC_CS_NOT_SUPPORTED, MDC_CS_EXPECTED_FAIL, MDC_CS_WARN, MDC_CS_SKIPPED};
#define N_OF(a) (sizeof a / sizeof a[0])

static void property(FILE *f, const char *name, const char *value) {
  if (!value) return;
  fprintf(f, "      <property name=\"%s\" value=\"", name);
  xml_attr(f, value, 1000);
  fprintf(f, "\"/>\n");
}

/* Writes to f; reads r; never fails (write errors show in ferror). */
void rp_junit_head(rp_report *r, FILE *f) {
  const mdc_run_row *run = &r->run;
  uint32_t tests = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) tests += r->counts[i];
  uint32_t fl = sum(r->counts, junit_failures, N_OF(junit_failures));
  uint32_t er = sum(r->counts, junit_errors, N_OF(junit_errors));
  uint32_t sk = sum(r->counts, junit_skipped, N_OF(junit_skipped));
  double t = run->duration_s >= 0 ? run->duration_s : 0;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<testsuites name=\"mdc\" tests=\"%u\" failures=\"%u\" errors=\"%u\" skipped=\"%u\" time=\"%.3f\">\n",
          tests, fl, er, sk, t);
  fprintf(f, "  <testsuite name=\"mdc ");
  xml_attr(f, run->kind, 32);
  fprintf(f, ": ");
  xml_attr(f, run->driver_name ? run->driver_name : "?", 100);
  fprintf(f, " ");
  xml_attr(f, run->driver_version ? run->driver_version : "", 60);
  fprintf(f, " on ");
  xml_attr(f, run->backend ? run->backend : "?", 32);
  fprintf(f, "\" tests=\"%u\" failures=\"%u\" errors=\"%u\" skipped=\"%u\" time=\"%.3f\" timestamp=\"%.19s\" "
             "hostname=\"", tests, fl, er, sk, t, run->started_at ? run->started_at : "1970-01-01T00:00:00");
  xml_attr(f, run->host, 200);
  fprintf(f, "\" id=\"0\" package=\"mdc\">\n    <properties>\n");
  char shard[32], seed[32];
  snprintf(shard, sizeof shard, "%u/%u", run->shard_index, run->shard_count);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)run->seed);
  property(f, "run_uuid", run->uuid);
  property(f, "kind", run->kind);
  property(f, "driver_name", run->driver_name);
  property(f, "driver_version", run->driver_version);
  property(f, "driver_path", run->driver_path);
  /* The build judged (issue 27): not only its name and version. */
  property(f, "driver_build_id", run->driver_build_id);
  property(f, "driver_sha256", run->driver_sha256);
  char seln[16];
  snprintf(seln, sizeof seln, "%u", run->selection_n);
  property(f, "selection", run->selection);
  property(f, "selection_n", run->selection ? seln : NULL);
  property(f, "backend", run->backend);
  property(f, "device", run->device);
  property(f, "config", run->config);
  property(f, "seed", run->has_seed ? seed : NULL);
  property(f, "shard", shard);
  property(f, "revision", run->revision);
  property(f, "started_at", run->started_at);
  property(f, "ended_at", run->ended_at ? run->ended_at : "never: the run was killed");
  property(f, "interrupted", run->interrupted ? "yes: stopped early on a signal" : NULL);
  fprintf(f, "    </properties>\n");
}

/* The body of a failure: where, what, which rule, and what the driver said. */
static void details_text(FILE *f, const mdc_case_row *c) {
  if (c->path) {
    fprintf(f, "trace: ");
    rp_xml(f, c->path, 0);
    if (c->line) fprintf(f, ":%u", c->line);
    fprintf(f, "\n");
  }
  struct { const char *label, *v; } items[] = {{"message", c->message}, {"event", c->event},
                                               {"rule", c->rule},       {"expected", c->expected},
                                               {"actual", c->actual},   {"driver message", c->driver_message},
                                               {"advisory (not judged)", c->advisory}};
  for (size_t i = 0; i < N_OF(items); i++) {
    if (!items[i].v || !items[i].v[0]) continue;
    fprintf(f, "%s: ", items[i].label);
    rp_xml(f, items[i].v, 4000);
    fprintf(f, "\n");
  }
}

/* Writes one testcase to f; never fails (write errors show in ferror). */
void rp_junit_case(rp_report *r, FILE *f, const mdc_case_row *c) {
  (void)r;
  char area[256];
  rp_area_of(c->name, area, sizeof area);
  const char *rest = strchr(c->name, '/');
  rest = rest && rest[1] ? rest + 1 : c->name;
  fprintf(f, "    <testcase classname=\"");
  xml_attr(f, area, 0);
  fprintf(f, "\" name=\"");
  xml_attr(f, rest, 0);
  fprintf(f, "\" time=\"%.3f\"", c->duration_s > 0 ? c->duration_s : 0.0);
  int st = mdc_store_status_parse(c->status);
  const char *elem = NULL;
  for (size_t i = 0; i < N_OF(junit_failures); i++) if (st == junit_failures[i]) elem = "failure";
  for (size_t i = 0; i < N_OF(junit_errors); i++) if (st == junit_errors[i]) elem = "error";
  if (st == MDC_CS_NOT_SUPPORTED || st == MDC_CS_EXPECTED_FAIL || st == MDC_CS_WARN || st == MDC_CS_SKIPPED) {
    fprintf(f, ">\n      <skipped message=\"%s", st == MDC_CS_NOT_SUPPORTED ? "NotSupported"
                                              : st == MDC_CS_WARN ? "Warn (a trace that is not must-pass failed)"
                                              : st == MDC_CS_SKIPPED ? "Skipped (listed in a skips file: never run)"
                                                                  : "ExpectedFail (a known failure)");
    if (c->message && c->message[0]) {
      fprintf(f, ": ");
      xml_attr(f, c->message, 500);
    }
    fprintf(f, "\"/>\n    </testcase>\n");
  } else if (elem) {
    fprintf(f, ">\n      <%s message=\"", elem);
    xml_attr(f, c->message && c->message[0] ? c->message
                : st == MDC_CS_RUNNING ? "never ended: the run was killed while this case was running"
                : st == MDC_CS_INTERRUPTED ? "interrupted: a signal stopped the run while this case was running"
                                           : c->status, 500);
    fprintf(f, "\" type=\"%s\">", st == MDC_CS_RUNNING ? "Interrupted" : c->status);
    details_text(f, c);
    fprintf(f, "</%s>\n    </testcase>\n", elem);
  } else if (st == MDC_CS_FLAKE) {
    fprintf(f, ">\n      <system-out>flaky: ");
    rp_xml(f, c->message, 2000);
    fprintf(f, "</system-out>\n    </testcase>\n");
  } else {
    fprintf(f, "/>\n");
  }
}

void rp_junit_tail(FILE *f) { fprintf(f, "  </testsuite>\n</testsuites>\n"); }

/* ---- summary.md ---- */

typedef struct finding_sig {
  char *signature, *target, *kind, *message;
  char first_seen[32];
  uint64_t count;
} finding_sig;

typedef struct findings {
  finding_sig *v;
  size_t n, cap;
  int oom;
} findings;

/* Every distinct signature of the store with its earliest sighting and total count. */
static int add_finding(void *ctx, const mdc_fuzz_finding_row *f) {
  findings *fs = ctx;
  for (size_t i = 0; i < fs->n; i++)
    if (!strcmp(fs->v[i].signature, f->signature)) {
      if (strcmp(f->first_seen, fs->v[i].first_seen) < 0) snprintf(fs->v[i].first_seen, 32, "%s", f->first_seen);
      fs->v[i].count += f->count;
      return 0;
    }
  if (fs->n == fs->cap) {
    size_t cap = fs->cap ? 2 * fs->cap : 16;
    finding_sig *v = realloc(fs->v, cap * sizeof *v);
    if (!v) return fs->oom = 1, 1;
    fs->v = v;
    fs->cap = cap;
  }
  finding_sig *s = &fs->v[fs->n++];
  s->signature = strdup(f->signature);
  s->target = strdup(f->target);
  s->kind = strdup(f->kind);
  s->message = f->message ? strdup(f->message) : NULL;
  snprintf(s->first_seen, sizeof s->first_seen, "%s", f->first_seen);
  s->count = f->count;
  return 0;
}

static void findings_free(findings *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    free(fs->v[i].signature);
    free(fs->v[i].target);
    free(fs->v[i].kind);
    free(fs->v[i].message);
  }
  free(fs->v);
}

static void md_list(FILE *f, const rp_report *r, rp_cat cat, size_t cap) {
  const rp_list *l = &r->cat[cat];
  if (!l->total) return;
  fprintf(f, "\n### %s (%llu)\n\n", rp_cat_title(cat), (unsigned long long)l->total);
  size_t shown = 0;
  for (size_t i = 0; i < l->n && shown < cap; i++, shown++) {
    const rp_case *c = &l->v[i];
    fprintf(f, "- ");
    rp_md_code(f, c->name, 120);
    fprintf(f, " %s → %s", c->base_status ? c->base_status : "-", c->status ? c->status : "-");
    if (c->message && c->message[0] && c->status) {
      fprintf(f, ": ");
      rp_md_code(f, c->message, 200);
    }
    fprintf(f, "\n");
  }
  if (l->total > shown) fprintf(f, "- ... and %llu more (see index.html)\n", (unsigned long long)(l->total - shown));
}

/* ---- summary.md's causes (issue 26) ---- */

#define MD_CAUSES 10

typedef struct md_cause_ctx {
  FILE *f;
  uint32_t n;
} md_cause_ctx;

static int md_cause(void *ctx, const mdc_case_group *g) {
  md_cause_ctx *m = ctx;
  FILE *f = m->f;
  if (!m->n++)
    fprintf(f, "\n### Causes (%u)\n\n| cases | status | cause | first cases |\n| ---: | --- | --- | --- |\n", g->n_total);
  fprintf(f, "| %u | ", g->count);
  for (int i = 0, k = 0; i < MDC_CS_COUNT; i++)
    if (g->counts[i]) {
      fprintf(f, "%s%s", k++ ? ", " : "", mdc_store_status_name((mdc_case_status)i));
      if (g->counts[i] != g->count) fprintf(f, " %u", g->counts[i]);
    }
  fprintf(f, " | ");
  /* A table cell: no '|' (rp_md_code keeps it, and it would end the cell). */
  char sig[400];
  snprintf(sig, sizeof sig, "%s", g->signature);
  for (char *p = sig; *p; p++)
    if (*p == '|') *p = '/';
  rp_md_code(f, sig, 300);
  fprintf(f, " | ");
  for (uint32_t i = 0; i < g->n_names; i++) {
    fprintf(f, "%s", i ? ", " : "");
    rp_md_code(f, g->names[i], 80);
  }
  if (g->count > g->n_names) fprintf(f, " and %u more", g->count - g->n_names);
  if (g->reduced) {
    fprintf(f, "; reduced: ");
    rp_md_code(f, g->reduced, 200);
  }
  fprintf(f, " |\n");
  if (m->n == MD_CAUSES && g->n_total > MD_CAUSES)
    fprintf(f, "\n... and %u more causes (see index.html)\n", g->n_total - MD_CAUSES);
  return 0;
}

/* The causes table, largest first (the first MD_CAUSES). 0, or -1 on a store error. */
static int md_causes(rp_report *r, FILE *f) {
  md_cause_ctx m = {.f = f};
  return mdc_store_groups_each(r->store, r->run.id, 3, MD_CAUSES, md_cause, &m) < 0 ? -1 : 0;
}

/* Writes summary.md to f; reads the store (fuzz findings); -1 with r->err on a store error. */
int rp_write_summary(rp_report *r, FILE *f) {
  const mdc_run_row *run = &r->run;
  const uint32_t *k = r->counts;
  uint32_t unexpected = mdc_store_unexpected_of(k);
  /* Everything the first line does not name: trace errors, unexpected passes, order-dependent,
   * interrupted. Known failures, warnings, not supported and skipped are named: none of them is
   * a failure of this run (issue 27). */
  uint32_t other = k[MDC_CS_TRACE_ERROR] + k[MDC_CS_UNEXPECTED_PASS] + k[MDC_CS_ORDER_DEPENDENT] +
                   k[MDC_CS_RUNNING] + k[MDC_CS_INTERRUPTED];
  /* New fuzz findings: signatures first seen after the baseline run began (all without one). */
  findings fs = {0};
  if (mdc_store_fuzz_findings_each(r->store, 0, 0, add_finding, &fs) < 0 || fs.oom) {
    snprintf(r->err, sizeof r->err, "%s", fs.oom ? "out of memory reading fuzz findings" : mdc_store_error(r->store));
    findings_free(&fs);
    return -1;
  }
  const char *since = r->base.kind == RP_BASE_RUN ? r->base.run.started_at : "";
  size_t fresh = 0;
  for (size_t i = 0; i < fs.n; i++) fresh += strcmp(fs.v[i].first_seen, since) > 0;
  char id[9], dur[32], when[32];
  rp_short_uuid(run->uuid, id);
  rp_duration(run->duration_s, dur, sizeof dur);
  rp_when(run->started_at, when, sizeof when);
  /* The first line carries every count: it is what a PR comment preview shows. */
  fprintf(f, "**mdc %s: %s** — %llu cases: %u passed, %u failed, %u crashed, %u timed out, %u flaky, %u other",
          run->kind, !run->ended_at ? "INTERRUPTED (killed)" : run->interrupted ? "INTERRUPTED" : unexpected ? "FAILED" : "OK",
          (unsigned long long)r->n_cases, k[MDC_CS_PASS], k[MDC_CS_FAIL], k[MDC_CS_CRASH], k[MDC_CS_TIMEOUT],
          k[MDC_CS_FLAKE], other);
  /* Not failures, each named when there are any. */
  static const struct { int st; const char *what; } known[] = {{MDC_CS_EXPECTED_FAIL, "known failing"},
      {MDC_CS_WARN, "warned"}, {MDC_CS_NOT_SUPPORTED, "not supported"}, {MDC_CS_SKIPPED, "skipped"}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (k[known[i].st]) fprintf(f, ", %u %s", k[known[i].st], known[i].what);
  if (r->base.kind != RP_BASE_NONE)
    fprintf(f, " · %llu regression%s, %llu fix%s, %llu new failing",
            (unsigned long long)r->cat[RP_REGRESSION].total, r->cat[RP_REGRESSION].total == 1 ? "" : "s",
            (unsigned long long)r->cat[RP_FIX].total, r->cat[RP_FIX].total == 1 ? "" : "es",
            (unsigned long long)r->new_failing);
  if (fs.n) fprintf(f, " · %zu new fuzz finding%s", fresh, fresh == 1 ? "" : "s");
  fprintf(f, "\n\n");
  fprintf(f, "Driver ");
  rp_md_code(f, run->driver_name ? run->driver_name : "?", 80);
  fprintf(f, " ");
  rp_md_code(f, run->driver_version ? run->driver_version : "?", 40);
  fprintf(f, " on ");
  rp_md_code(f, run->backend ? run->backend : "?", 32);
  fprintf(f, " (");
  rp_md_code(f, run->device ? run->device : "?", 64);
  fprintf(f, ")");
  if (run->driver_build_id || run->driver_sha256) {
    fprintf(f, ", build ");
    rp_md_code(f, run->driver_build_id ? run->driver_build_id : run->driver_sha256, 64);
  }
  fprintf(f, ", run ");
  rp_md_code(f, id, 0);
  fprintf(f, ", revision ");
  rp_md_code(f, run->revision, 40);
  fprintf(f, ", started %s UTC, %s. Baseline: %s.\n", when, dur, r->base.desc);
  if (!run->ended_at || run->interrupted) {
    fprintf(f, "\n**The run %s.**", !run->ended_at ? "never ended (killed, or still running)" : "was stopped early on a signal");
    for (size_t i = 0; i < r->running.n && i < 5; i++) {
      fprintf(f, "%s", i ? ", " : " Running when it stopped: ");
      rp_md_code(f, r->running.v[i].name, 120);
    }
    fprintf(f, "\n");
  }
  fprintf(f, "\n| status | cases |\n| --- | ---: |\n");
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (k[i]) fprintf(f, "| %s | %u |\n", mdc_store_status_name((mdc_case_status)i), k[i]);
  if (md_causes(r, f) != 0) {
    snprintf(r->err, sizeof r->err, "%s", mdc_store_error(r->store));
    findings_free(&fs);
    return -1;
  }
  md_list(f, r, RP_REGRESSION, 20);
  md_list(f, r, RP_FIX, 20);
  if (r->new_failing) {
    fprintf(f, "\n### New failing cases (%llu)\n\n", (unsigned long long)r->new_failing);
    size_t shown = 0;
    for (size_t i = 0; i < r->cat[RP_NEW].n && shown < 20; i++) {
      const rp_case *c = &r->cat[RP_NEW].v[i];
      if (rp_verdict_class(c->status) >= 0) continue;
      fprintf(f, "- ");
      rp_md_code(f, c->name, 120);
      fprintf(f, " %s: ", c->status);
      rp_md_code(f, c->message, 200);
      fprintf(f, "\n");
      shown++;
    }
    if (r->new_failing > shown) fprintf(f, "- ... and %llu more\n", (unsigned long long)(r->new_failing - shown));
  }
  if (r->cat[RP_STILL_FAILING].total)
    fprintf(f, "\nStill failing: %llu case%s (listed in index.html).\n", (unsigned long long)r->cat[RP_STILL_FAILING].total,
            r->cat[RP_STILL_FAILING].total == 1 ? "" : "s");
  if (fresh) {
    fprintf(f, "\n### New fuzz findings (%zu)\n\n", fresh);
    size_t shown = 0;
    for (size_t i = 0; i < fs.n && shown < 20; i++) {
      if (strcmp(fs.v[i].first_seen, since) <= 0) continue;
      fprintf(f, "- %s in ", fs.v[i].kind);
      rp_md_code(f, fs.v[i].target, 60);
      fprintf(f, ": ");
      rp_md_code(f, fs.v[i].signature, 120);
      fprintf(f, " ×%llu, first seen %.19s", (unsigned long long)fs.v[i].count, fs.v[i].first_seen);
      if (fs.v[i].message) {
        fprintf(f, ": ");
        rp_md_code(f, fs.v[i].message, 160);
      }
      fprintf(f, "\n");
      shown++;
    }
    if (fresh > shown) fprintf(f, "- ... and %zu more\n", fresh - shown);
  }
  findings_free(&fs);
  return 0;
}
