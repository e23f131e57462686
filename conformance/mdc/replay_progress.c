/* replay_progress.c - what `mdc replay` says while it runs. On a terminal, a live line (redrawn
 * as cases start and end) with the counts, the ETA and the current case. Off a terminal (CI
 * logs), one status line every --progress-interval seconds (default 10): done/total, elapsed, the
 * ETA and the counts by status; the scheduler's poll() is capped at the next line's time
 * (mdc_cli__rp_progress_poll_ms), so a line comes on time even while one slow case runs. --quiet:
 * nothing. One run at a time per process (mdc mutants replays one mutant after another, quiet). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "colour.h"
#include "mdc_int.h"
#include "replay_int.h"

#define DEFAULT_INTERVAL_S 10.0

static struct {
  int lines;          /* off a terminal: status lines */
  int colour;         /* the live line in colour */
  double t0, interval, next;
  const char *who;
} P;

/* Writes at most len bytes; pure. */
void mdc_cli__duration_text(double s, char *out, size_t len) {
  if (!(s >= 0) || !isfinite(s)) snprintf(out, len, "-");
  else if (s < 10) snprintf(out, len, "%.1f s", s);
  else if (s < 60) snprintf(out, len, "%.0f s", s);
  else if (s < 3600) snprintf(out, len, "%d min %d s", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(out, len, "%d h %d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* "ETA 1 min 5 s" from the time the first `done` of `total` took; "ETA unknown" before the first
 * is done. Pure. */
void mdc_cli__eta_text(double elapsed, size_t done, size_t total, char *out, size_t len) {
  if (!done || done > total) {
    snprintf(out, len, "ETA %s", done ? "0 s" : "unknown");
    return;
  }
  char d[32];
  mdc_cli__duration_text(elapsed / (double)done * (double)(total - done), d, sizeof d);
  snprintf(out, len, "ETA %s", d);
}

void mdc_cli__rp_progress_begin(const mdc_cli__replay_opts *o, const char *who) {
  P.t0 = mdc_cli__now();
  P.interval = o->progress_interval_s > 0 ? o->progress_interval_s : DEFAULT_INTERVAL_S;
  P.next = P.t0 + P.interval;
  P.lines = !o->quiet && !isatty(STDERR_FILENO);
  P.colour = !o->quiet && mdc_cli__colour_on(stderr);
  P.who = who;
}

/* The off-terminal status line. */
static void status_line(const mdc_cli__run *run, size_t done, double now) {
  char el[32], eta[48];
  mdc_cli__duration_text(now - P.t0, el, sizeof el);
  mdc_cli__eta_text(now - P.t0, done, run->n, eta, sizeof eta);
  fprintf(stderr, "%s: [%zu/%zu] %s elapsed, %s", P.who ? P.who : "mdc replay", done, run->n, el, eta);
  const char *sep = ": ";
  for (int s = 0; s < MDC_S_COUNT; s++) {
    if (!run->count[s]) continue;
    fprintf(stderr, "%s%s %u", sep, mdc_cli__status_name((mdc_status)s), run->count[s]);
    sep = ", ";
  }
  fputc('\n', stderr);
  fflush(stderr);
  /* The next line one interval from now (a late wake-up does not bunch lines up). */
  P.next = now + P.interval;
}

static void count(int colour, mdc_status s, const char *label, uint32_t n) {
  const char *sgr = colour && n ? mdc_cli__status_sgr(s) : "";
  fprintf(stderr, " %s%s %u%s", sgr, label, n, sgr[0] ? MDC_SGR_RESET : "");
}

void mdc_cli__rp_progress(const mdc_cli__run *run, size_t done, const char *current, int on) {
  double now = mdc_cli__now();
  if (P.lines && now >= P.next) status_line(run, done, now);
  if (!on) return;
  char safe[256], eta[48];
  mdc_cli__terminal_safe(current ? current : "", safe, sizeof safe);
  mdc_cli__eta_text(now - P.t0, done, run->n, eta, sizeof eta);
  fprintf(stderr, "\r[%*zu/%zu]", run->n >= 100 ? 3 : 2, done, run->n);
  count(P.colour, MDC_S_PASS, "pass", run->count[MDC_S_PASS] + run->count[MDC_S_FLAKE]);
  count(P.colour, MDC_S_FAIL, "fail", run->count[MDC_S_FAIL] + run->count[MDC_S_UNEXPECTED_PASS]);
  count(P.colour, MDC_S_CRASH, "crash", run->count[MDC_S_CRASH]);
  count(P.colour, MDC_S_TIMEOUT, "timeout", run->count[MDC_S_TIMEOUT]);
  count(P.colour, MDC_S_NOT_SUPPORTED, "other",
        run->count[MDC_S_NOT_SUPPORTED] + run->count[MDC_S_TRACE_ERROR] + run->count[MDC_S_EXPECTED_FAIL] +
            run->count[MDC_S_WARN] + run->count[MDC_S_SKIPPED]);
  fprintf(stderr, "  %s  current: %.60s\033[K", eta, safe);
  fflush(stderr);
}

int mdc_cli__rp_progress_poll_ms(const mdc_cli__run *run, size_t done, int ms) {
  if (!P.lines) return ms;
  double now = mdc_cli__now();
  if (now >= P.next) status_line(run, done, now);
  double left = P.next - now;
  int cap = left <= 0 ? 0 : (int)ceil(left * 1000);
  return ms < 0 || cap < ms ? cap : ms;
}
