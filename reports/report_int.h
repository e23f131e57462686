/* report_int.h - private to the report (reports/report*.c): the report being built, the capped
 * lists it keeps, the baseline it compares with, and the functions its files share.
 *   report.c         : options, the run and its baseline, the one pass over the cases, the folder
 *   report_html.c    : index.html
 *   report_mutants.c : its mutant matrix
 *   report_text.c    : summary.md and junit.xml, and text helpers (XML, Markdown, JSON, times)
 *   report_compare.c : mdc_report_compare */
#ifndef MDC_REPORT_INT_H
#define MDC_REPORT_INT_H

#include <stdint.h>
#include <stdio.h>

#include "mdc/report.h"
#include "mdc/store.h"

/* How a case moved from the baseline to the run. */
typedef enum rp_cat {
  RP_REGRESSION,     /* passing before, failing now */
  RP_FIX,            /* failing before, passing now */
  RP_STILL_FAILING,  /* failing both times */
  RP_NEW,            /* not in the baseline */
  RP_REMOVED,        /* in the baseline, not in the run */
  RP_CHANGED,        /* another change of status (to or from NotSupported, Fail to Crash ...) */
  RP_NCAT
} rp_cat;

/* "REGRESSION", "FIX", ... and a longer heading. */
const char *rp_cat_name(rp_cat c);
const char *rp_cat_title(rp_cat c);
/* 1 passing (Pass, Flake, UnexpectedPass), -1 failing (Fail, Crash, Timeout, TraceError,
 * OrderDependent, Running, Interrupted), 0 neither (NotSupported, Skipped, ExpectedFail, Warn:
 * never a regression or "new failing"; NULL). */
int rp_verdict_class(const char *status);
/* The category of a pair (base or cur NULL: absent), or -1 when nothing changed. */
int rp_classify(const char *base, const char *cur);

/* A case kept for a table: its own copies of what the page shows. */
typedef struct rp_case {
  char *name, *path, *status, *base_status, *message, *expected, *actual, *event, *rule,
       *driver_message, *advisory, *started_at;
  uint32_t line;
  double duration_s;
} rp_case;

/* The first `cap` cases added, and how many were added in all. */
typedef struct rp_list {
  rp_case *v;
  size_t n;
  uint64_t total;
} rp_list;

/* Adds a copy of cur (or, with cur NULL, a case known only by base) unless the list is full;
 * counts it either way. -1 when out of memory. */
int rp_list_add(rp_list *l, uint32_t cap, const mdc_case_row *cur, const char *base_status,
                const mdc_case_row *base);
void rp_list_free(rp_list *l);

typedef struct rp_area {
  char *name;
  uint32_t counts[MDC_CS_COUNT];
  uint32_t total;
} rp_area;

enum { RP_BASE_NONE, RP_BASE_RUN, RP_BASE_LIST };

typedef struct rp_baseline {
  int kind;
  mdc_store *store;          /* the run's store, or another one (own_store) */
  int own_store;
  mdc_run_row run;
  char **names;              /* RP_BASE_LIST: sorted */
  size_t n_names;
  unsigned char *seen;
  char desc[1024];           /* what it is and why it was chosen, for the page */
} rp_baseline;

/* Called for every pair of the join: cur NULL for a case only the baseline has, base_status
 * NULL for one only the run has; base is the baseline's row when it is a run. */
typedef int (*rp_pair_fn)(void *ctx, const mdc_case_row *cur, const char *base_status,
                          const mdc_case_row *base);
/* Walks run_id's cases and the baseline's side by side by name (both are cursors sorted by
 * name; a list is looked up). Returns 0, the callback's non-zero value, or -1 with a message in
 * err when a store fails. */
int rp_join(mdc_store *s, int64_t run_id, rp_baseline *b, rp_pair_fn fn, void *ctx, char *err,
            size_t errlen);
void rp_baseline_free(rp_baseline *b);

/* report_like.c: the earlier runs comparable with a run (same kind, driver, backend and, when
 * the run recorded one, the same selection of traces), oldest first, the newest `limit`; with
 * only_earlier, only runs started before it. 0, or -1 (a store error, or out of memory). */
typedef struct rp_like {
  int64_t *ids;
  size_t n;
  uint64_t matched;          /* comparable runs in all (n is at most limit) */
  uint64_t other_selection;  /* earlier runs of the kind, driver and backend over other traces */
  uint64_t unrecorded;       /* ... that did not record their selection */
  int by_selection;          /* the run recorded its selection: only runs of the same one match */
} rp_like;
int rp_like_runs(mdc_store *s, const mdc_run_row *run, uint32_t limit, int only_earlier, rp_like *out);
void rp_like_free(rp_like *l);
/* "replay runs of drv on sim over the same 992 traces (selection 3f2a9c01)". */
void rp_like_what(const mdc_run_row *run, char *out, size_t len);

typedef struct rp_report {
  const mdc_report_opts *o;
  mdc_store *store;
  mdc_run_row run;
  rp_baseline base;
  uint32_t max_rows, history;
  uint32_t counts[MDC_CS_COUNT];
  uint64_t n_cases;
  double sum_duration;
  rp_area *areas;            /* sorted by name */
  size_t n_areas, cap_areas;
  uint64_t areas_lumped;     /* cases of areas past the cap, counted under "(other)" */
  rp_list cat[RP_NCAT];
  uint64_t new_failing;
  rp_list flaky, running;
  FILE *junit;
  int has_fuzz;              /* the store holds a fuzz campaign: the page has a fuzz section */
  char generated_at[32];     /* ISO time the report was made */
  char err[1024];
} rp_report;

/* report_html.c: the page. 0, or -1 with r->err set. */
int rp_write_html(rp_report *r, FILE *f);
/* Characters of a message or value the page shows in a table cell. */
#define RP_TEXT_CAP 600
/* report_mutants.c: the page's mutant matrix section; 0 or -1. */
int rp_write_mutants(rp_report *r, FILE *f);
/* report_mutate.c: the page's section "Generated mutants" (a run of `mdc mutate`); 0 or -1. */
int rp_write_mutate(rp_report *r, FILE *f);
/* report_text.c: the PR summary; 0 or -1. */
int rp_write_summary(rp_report *r, FILE *f);
/* report_text.c: junit.xml, head before the pass (the totals are known from counts), one
 * testcase per case during it, tail after. */
void rp_junit_head(rp_report *r, FILE *f);
void rp_junit_case(rp_report *r, FILE *f, const mdc_case_row *c);
void rp_junit_tail(FILE *f);

/* ---- text helpers (report_text.c) ---- */

/* The area of a case name: the part before the first '/', or the whole name. Writes at most
 * len - 1 bytes. */
void rp_area_of(const char *name, char *out, size_t len);
/* XML/HTML text, cut at max_chars (0: whole). */
void rp_xml(FILE *f, const char *s, size_t max_chars);
/* A JSON string literal (quotes included); NULL is null. */
void rp_json_str(FILE *f, const char *s);
/* Markdown inline code: `s` with backticks and newlines made harmless, cut at max_chars. */
void rp_md_code(FILE *f, const char *s, size_t max_chars);
/* "2026-11-03 14:05:09" from an ISO time ("-" for NULL). */
void rp_when(const char *iso, char *out, size_t len);
/* "1.23 s", "4 min 5 s", "2 h 3 min" ("-" when < 0). */
void rp_duration(double s, char *out, size_t len);
/* The first 8 characters of a uuid. */
void rp_short_uuid(const char *uuid, char out[9]);
/* Percent of passing cases (Pass, Flake, UnexpectedPass) among those that ran (not NotSupported
 * or Skipped);
 * NaN when none ran. */
double rp_pass_rate(const uint32_t counts[MDC_CS_COUNT]);

/* ---- report_causes.c: the page's causes section and what the case table shares with it ---- */

extern const char rp_css_causes[];
/* A status as a coloured badge. */
void rp_html_status_badge(FILE *f, const char *st);
/* A stack, at most max frames, as <pre>. */
void rp_html_stack(FILE *f, const char *stack, int max);
/* The causes section; 0, or -1 on a store error. */
int rp_html_causes(rp_report *r, FILE *f);

#endif
