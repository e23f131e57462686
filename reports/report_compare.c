/* report_compare.c - mdc_report_compare: what changed from one run to another, case by case, as
 * text or one JSON object; a CI gate (the result says whether anything regressed). The two runs
 * are walked side by side by name, and the output is built in memory first so that a store that
 * fails half-way leaves nothing on the caller's stream. */
#include "report_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct cmp_ctx {
  FILE *f;
  int json;
  uint64_t counts[RP_NCAT], unchanged, new_failing, listed;
} cmp_ctx;

static int on_pair(void *ctx, const mdc_case_row *cur, const char *bs, const mdc_case_row *base) {
  cmp_ctx *c = ctx;
  const char *now = cur ? cur->status : NULL;
  int cat = rp_classify(bs, now);
  if (cat < 0) {
    c->unchanged++;
    return 0;
  }
  c->counts[cat]++;
  if (cat == RP_NEW && rp_verdict_class(now) < 0) c->new_failing++;
  /* Failing before and after with the same status: not a change, only counted. */
  if (cat == RP_STILL_FAILING && !strcmp(bs, now)) return 0;
  const mdc_case_row *row = cur ? cur : base;
  const char *msg = cur && rp_verdict_class(now) < 0 ? cur->message : NULL;
  if (c->json) {
    fprintf(c->f, "%s\n    {\"name\": ", c->listed++ ? "," : "");
    rp_json_str(c->f, row->name);
    fprintf(c->f, ", \"change\": ");
    rp_json_str(c->f, rp_cat_name((rp_cat)cat));
    fprintf(c->f, ", \"before\": ");
    rp_json_str(c->f, bs);
    fprintf(c->f, ", \"after\": ");
    rp_json_str(c->f, now);
    fprintf(c->f, ", \"path\": ");
    rp_json_str(c->f, row->path);
    fprintf(c->f, ", \"message\": ");
    rp_json_str(c->f, msg);
    fprintf(c->f, "}");
  } else {
    fprintf(c->f, "%-13s %s: %s -> %s", rp_cat_name((rp_cat)cat), row->name, bs ? bs : "-", now ? now : "-");
    if (msg && msg[0]) {
      fprintf(c->f, ": ");
      for (const char *p = msg; *p && p - msg < 300; p++) fputc(*p == '\n' ? ' ' : *p, c->f);
    }
    fputc('\n', c->f);
    c->listed++;
  }
  return 0;
}

static void run_json(FILE *f, const mdc_run_row *r) {
  fprintf(f, "{\"uuid\": ");
  rp_json_str(f, r->uuid);
  fprintf(f, ", \"kind\": ");
  rp_json_str(f, r->kind);
  fprintf(f, ", \"started_at\": ");
  rp_json_str(f, r->started_at);
  fprintf(f, ", \"driver\": ");
  rp_json_str(f, r->driver_name);
  fprintf(f, ", \"driver_version\": ");
  rp_json_str(f, r->driver_version);
  fprintf(f, ", \"backend\": ");
  rp_json_str(f, r->backend);
  fprintf(f, ", \"revision\": ");
  rp_json_str(f, r->revision);
  fprintf(f, ", \"driver_build_id\": ");
  rp_json_str(f, r->driver_build_id);
  fprintf(f, ", \"driver_sha256\": ");
  rp_json_str(f, r->driver_sha256);
  fprintf(f, ", \"selection\": ");
  rp_json_str(f, r->selection);
  fprintf(f, "}");
}

static void run_text(FILE *f, const char *label, const mdc_run_row *r) {
  char when[32];
  rp_when(r->started_at, when, sizeof when);
  fprintf(f, "%s %s (%s %s, %s %s on %s, revision %s", label, r->uuid, r->kind, when,
          r->driver_name ? r->driver_name : "?", r->driver_version ? r->driver_version : "",
          r->backend ? r->backend : "?", r->revision ? r->revision : "?");
  if (r->driver_build_id || r->driver_sha256)
    fprintf(f, ", build-id %s, sha256 %.16s", r->driver_build_id ? r->driver_build_id : "-",
            r->driver_sha256 ? r->driver_sha256 : "-");
  if (r->selection) fprintf(f, ", %u traces (selection %.8s)", r->selection_n, r->selection);
  fprintf(f, ")\n");
}

/* Whether two runs judged the same driver build: 1 same, 0 different, -1 not known (a run did
 * not record it). The SHA-256 of the file decides when both have it, else the build-id. Pure. */
static int same_build(const mdc_run_row *a, const mdc_run_row *b) {
  if (a->driver_sha256 && b->driver_sha256) return strcmp(a->driver_sha256, b->driver_sha256) == 0;
  if (a->driver_build_id && b->driver_build_id) return strcmp(a->driver_build_id, b->driver_build_id) == 0;
  return -1;
}

/* Opens the store read-only and closes it; writes to out only when it succeeds (the text is
 * built in memory first); thread-safe for different outputs (report.h). */
int mdc_report_compare(const mdc_compare_opts *o, FILE *out, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!o || !o->db || !o->a || !o->b || !out) {
    if (err && errlen) snprintf(err, errlen, "compare: want a store and two runs");
    return MDC_REPORT_EINPUT;
  }
  mdc_store *s;
  int rc = mdc_store_open_read(o->db, &s, err, errlen);
  if (rc != 0) return rc == MDC_STORE_NOT_FOUND ? MDC_REPORT_EINPUT : MDC_REPORT_ESTORE;
  rp_baseline base = {.kind = RP_BASE_RUN, .store = s};
  mdc_run_row b = {0};
  int code = MDC_REPORT_EINPUT;
  char *text = NULL;
  size_t len = 0;
  FILE *mem = NULL;
  const char *refs[2] = {o->a, o->b};
  mdc_run_row *rows[2] = {&base.run, &b};
  for (int i = 0; i < 2; i++) {
    rc = !strcmp(refs[i], "latest") ? mdc_store_run_find(s, "latest", "replay", rows[i])
                                    : mdc_store_run_find(s, refs[i], NULL, rows[i]);
    if (rc == MDC_STORE_NOT_FOUND && !strcmp(refs[i], "latest")) rc = mdc_store_run_find(s, "latest", NULL, rows[i]);
    if (rc != 0) {
      if (err && errlen) snprintf(err, errlen, "run %s ('%s'): %s", i ? "B" : "A", refs[i], mdc_store_error(s));
      code = rc == MDC_STORE_NOT_FOUND ? MDC_REPORT_EINPUT : MDC_REPORT_ESTORE;
      goto done;
    }
  }
  if (!(mem = open_memstream(&text, &len))) {
    if (err && errlen) snprintf(err, errlen, "compare: out of memory");
    goto done;
  }
  cmp_ctx c = {.f = mem, .json = o->json};
  if (o->json) {
    fprintf(mem, "{\n  \"a\": ");
    run_json(mem, &base.run);
    fprintf(mem, ",\n  \"b\": ");
    run_json(mem, &b);
    int sb = same_build(&base.run, &b);
    fprintf(mem, ",\n  \"same_build\": %s", sb < 0 ? "null" : sb ? "true" : "false");
    fprintf(mem, ",\n  \"same_selection\": %s", !base.run.selection || !b.selection ? "null"
                                                    : strcmp(base.run.selection, b.selection) ? "false" : "true");
    fprintf(mem, ",\n  \"changes\": [");
  } else {
    run_text(mem, "A", &base.run);
    run_text(mem, "B", &b);
    /* What a change of status may owe to something else than the driver's behaviour. */
    int sb = same_build(&base.run, &b);
    if (sb == 0)
      fprintf(mem, "The two runs judged DIFFERENT DRIVER BUILDS (A: build-id %s, sha256 %.16s; B: build-id %s, "
                   "sha256 %.16s).\n", base.run.driver_build_id ? base.run.driver_build_id : "-",
              base.run.driver_sha256 ? base.run.driver_sha256 : "-", b.driver_build_id ? b.driver_build_id : "-",
              b.driver_sha256 ? b.driver_sha256 : "-");
    else if (sb > 0)
      fprintf(mem, "Both runs judged the same driver build.\n");
    else
      fprintf(mem, "Whether the two runs judged the same driver build is not known (not recorded).\n");
    if (base.run.selection && b.selection && strcmp(base.run.selection, b.selection))
      fprintf(mem, "The two runs ran different selections of traces (%u and %u).\n", base.run.selection_n,
              b.selection_n);
    fprintf(mem, "\n");
  }
  if (rp_join(s, b.id, &base, on_pair, &c, err, errlen) != 0) {
    code = MDC_REPORT_ESTORE;
    goto done;
  }
  int regressed = c.counts[RP_REGRESSION] > 0 || c.new_failing > 0;
  if (o->json) {
    fprintf(mem, "%s],\n  \"counts\": {", c.listed ? "\n  " : "");
    for (int i = 0; i < RP_NCAT; i++) {
      char key[32];
      snprintf(key, sizeof key, "%s", rp_cat_name((rp_cat)i));
      for (char *p = key; *p; p++) if (*p == ' ') *p = '_';
      for (char *p = key; *p; p++) if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
      fprintf(mem, "\"%s\": %llu, ", key, (unsigned long long)c.counts[i]);
    }
    fprintf(mem, "\"new_failing\": %llu, \"unchanged\": %llu},\n  \"regressed\": %s\n}\n",
            (unsigned long long)c.new_failing, (unsigned long long)c.unchanged, regressed ? "true" : "false");
  } else {
    if (!c.listed) fprintf(mem, "no case changed its status\n");
    fprintf(mem, "\n%llu regression%s, %llu fix%s, %llu still failing, %llu changed, %llu new (%llu failing), "
                 "%llu removed, %llu unchanged: %s\n",
            (unsigned long long)c.counts[RP_REGRESSION], c.counts[RP_REGRESSION] == 1 ? "" : "s",
            (unsigned long long)c.counts[RP_FIX], c.counts[RP_FIX] == 1 ? "" : "es",
            (unsigned long long)c.counts[RP_STILL_FAILING], (unsigned long long)c.counts[RP_CHANGED],
            (unsigned long long)c.counts[RP_NEW], (unsigned long long)c.new_failing,
            (unsigned long long)c.counts[RP_REMOVED], (unsigned long long)c.unchanged,
            regressed ? "REGRESSED" : "no regression");
  }
  if (fclose(mem) != 0) {
    mem = NULL;
    if (err && errlen) snprintf(err, errlen, "compare: out of memory");
    goto done;
  }
  mem = NULL;
  if (fwrite(text, 1, len, out) != len || fflush(out) != 0) {
    if (err && errlen) snprintf(err, errlen, "compare: cannot write the result");
    goto done;
  }
  code = regressed ? MDC_REPORT_REGRESSED : MDC_REPORT_OK;
done:
  if (mem) fclose(mem);
  free(text);
  mdc_store_run_row_free(&b);
  rp_baseline_free(&base); /* closes nothing: the store is not its own */
  mdc_store_close(s);
  return code;
}
