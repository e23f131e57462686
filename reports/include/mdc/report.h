/* mdc/report.h - reports from the results store (docs/reports.md): one self-contained HTML page,
 * a Markdown summary for a pull-request comment and a JUnit file, written atomically into a
 * folder; and the comparison of two runs, case by case, as text or JSON.
 *
 * Reading is streaming: the cases of a run come from a cursor one at a time and only capped
 * lists are kept, so a run of any size reports in bounded memory. Functions keep no global
 * state and may run in several threads at once on different outputs. */
#ifndef MDC_REPORT_H
#define MDC_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the functions return: the `mdc` exit codes (docs/mdc-cli.md). */
enum {
  MDC_REPORT_OK = 0,
  MDC_REPORT_REGRESSED = 1,  /* mdc_report_compare: a case regressed or a new case fails */
  MDC_REPORT_EINPUT = 2,     /* bad options, a missing or empty store, an unknown run, an unusable --out */
  MDC_REPORT_ESTORE = 3      /* the store cannot be read: not a store, corrupt, newer, a failed query */
};

typedef struct mdc_report_opts {
  const char *db;            /* the results store (required) */
  const char *run;           /* a uuid, a unique prefix, or "latest" (NULL: latest; see docs) */
  /* What the run is compared with. NULL or "previous": the newest earlier run of the same kind,
   * driver and backend. "none": nothing. Else an existing file (a results store: its newest run
   * of the same kind, driver and backend, or of the same kind; or a known-failures list, one
   * name a line as for mdc replay --baseline), or a run of db (uuid or unique prefix). */
  const char *baseline;
  const char *out_dir;       /* the folder to write (required); replaced whole, atomically */
  uint32_t max_rows;         /* rows of a long table before it is cut (0: 500) */
  uint32_t history;          /* earlier runs in the history charts (0: 50) */
  int quiet;                 /* no progress messages on stderr */
} mdc_report_opts;

/* Writes out_dir/index.html, summary.md and junit.xml. Everything is written into a new folder
 * beside out_dir and renamed over it at the end (renameat2 RENAME_EXCHANGE when out_dir exists,
 * so there is never a moment without a whole report); on any failure nothing is left behind and
 * out_dir is as it was. An existing out_dir that holds anything but a report's files is refused,
 * never deleted. Returns MDC_REPORT_OK, _EINPUT or _ESTORE with a message naming the file in err;
 * on success err gets the path of index.html. */
int mdc_report_write(const mdc_report_opts *o, char *err, size_t errlen);

typedef struct mdc_compare_opts {
  const char *db;            /* the results store (required) */
  const char *a, *b;         /* runs: before and after (uuid, unique prefix or "latest") */
  int json;                  /* one JSON object instead of text */
} mdc_compare_opts;

/* Writes to out what changed from run a to run b, case by case (every change, uncut): status
 * changes classed as REGRESSION, FIX, still failing, changed, new and removed cases, then the
 * counts. Returns MDC_REPORT_REGRESSED when a case regressed or a new case fails, MDC_REPORT_OK
 * when not, or an error code with a message in err (nothing written to out then). */
int mdc_report_compare(const mdc_compare_opts *o, FILE *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
