/* colour.c - statuses in colour on a terminal: one colour per status, the same as the report's
 * (reports/report_html.c): green Pass, red Fail, magenta Crash, yellow-red Timeout, and the
 * statuses that are not failures in their own, dimmer colours (ExpectedFail, Warn, NotSupported,
 * Skipped), so a known failure never reads like a crash. Off a terminal, with NO_COLOR set or a
 * dumb terminal, nothing but the text. */
#include "colour.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads the environment; thread-safe as getenv is. */
int mdc_cli__colour_on(FILE *f) {
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  if (no && no[0]) return 0;
  if (term && !strcmp(term, "dumb")) return 0;
  return f && isatty(fileno(f));
}

/* Pure. */
const char *mdc_cli__status_sgr(mdc_status s) {
  switch (s) {
    case MDC_S_PASS: return "\033[32m";                  /* green */
    case MDC_S_FAIL: return "\033[1;31m";                /* bold red */
    case MDC_S_CRASH: return "\033[1;35m";               /* bold magenta */
    case MDC_S_TIMEOUT: return "\033[1;33m";             /* bold yellow */
    case MDC_S_TRACE_ERROR: return "\033[31m";           /* red */
    case MDC_S_UNEXPECTED_PASS: return "\033[1;36m";     /* bold cyan: unexpected, but a pass */
    case MDC_S_ORDER_DEPENDENT: return "\033[1;31m";
    case MDC_S_EXPECTED_FAIL: return "\033[34m";         /* blue: known, not a failure of this run */
    case MDC_S_WARN: return "\033[33m";                  /* yellow, not bold */
    case MDC_S_FLAKE: return "\033[36m";                 /* cyan */
    case MDC_S_NOT_SUPPORTED: case MDC_S_SKIPPED: return "\033[2m"; /* dim */
    case MDC_S_RUNNING: case MDC_S_INTERRUPTED: return "\033[1;34m";
    default: return "";
  }
}

/* Writes to f; never fails (write errors show in ferror). */
void mdc_cli__status_print(FILE *f, int on, mdc_status s, int width, const char *text) {
  const char *sgr = on ? mdc_cli__status_sgr(s) : "";
  if (sgr[0]) fprintf(f, "%s%-*s%s", sgr, width, text, MDC_SGR_RESET);
  else fprintf(f, "%-*s", width, text);
}
