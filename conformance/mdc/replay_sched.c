/* replay_sched.c - the scheduler of `mdc replay`: each case runs in a forked child (which loads
 * the driver, runs the trace and writes its mdc_result to a pipe); up to --jobs children run at
 * once; poll() on their pipes waits for the nearest deadline (no sleeping); a failure not in the
 * baseline gets one re-run (a pass makes it a Flake); SIGINT/SIGTERM kills what runs. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mdc/store.h"
#include "md/config.h"
#include "md/status.h"
#include "mdc_int.h"
#include "replay_int.h"

/* The signal that asked the run to stop (0: none). Set by the handler, read by the loop. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) { stop_signal = sig; }

/* ---- cases in children ---------------------------------------------------------------------- */

int mdc_cli__rp_start_case(const mdc_cli__replay_opts *o, mdc_cli__case *c, size_t ci, slot *s) {
  memset(s, 0, sizeof *s);
  s->ci = ci;
  int in_parent = mdc_cli__child_start(&s->ch, sizeof s->res, mdc_cli__now() + o->timeout_s);
  if (in_parent < 0) return -1;
  if (in_parent) return 0;
  if (o->silence_children) {
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
  }
  mdc_result r;
  memset(&r, 0, sizeof r);
  void *dl = NULL;
  char err[512];
  const md_driver *d = mdc_driver_load(o->driver, &dl, err, sizeof err);
  if (!d) {
    r.verdict = MDC_FAIL;
    snprintf(r.message, sizeof r.message, "driver: %s", err);
  } else {
    mdc_trace_opts to = {.config = o->config, .line = &s->ch.page->line, .op = s->ch.page->op,
                         .op_len = sizeof s->ch.page->op, .verbose = o->verbose ? stderr : NULL,
                         .strict_messages = o->strict_messages};
    if (o->diff_a)
      mdc_cli__differential(d, c->path, &to, o->diff_a, o->diff_b, &r);
    else
      mdc_trace_run_opts(d, c->path, &to, &r);
  }
  mdc_cli__child_report(&s->ch, &r, sizeof r);
  _exit(0);
}

/* The child ended, or ran out of time: kill its group, reap it and say what happened. A crash
 * or a timeout names the event that was running (the child's progress page). */
mdc_status mdc_cli__rp_finish_case(slot *s, double timeout_s, mdc_result *r) {
  size_t got = mdc_cli__child_end(&s->ch, &s->res, sizeof s->res);
  memset(r, 0, sizeof *r);
  char where[128] = "";
  if (s->ch.line)
    snprintf(where, sizeof where, " at line %u (%s)", s->ch.line, s->ch.op[0] ? s->ch.op : "?");
  if (s->ch.timed_out) {
    r->verdict = MDC_FAIL;
    r->line = s->ch.line;
    snprintf(r->event, sizeof r->event, "%s", s->ch.op);
    snprintf(r->message, sizeof r->message, "no result after %g s%s: killed", timeout_s, where);
    return MDC_S_TIMEOUT;
  }
  int st = s->ch.status;
  if (got == sizeof s->res && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    *r = s->res;
    r->message[sizeof r->message - 1] = r->expected[sizeof r->expected - 1] = r->actual[sizeof r->actual - 1] = 0;
    r->event[sizeof r->event - 1] = r->rule[sizeof r->rule - 1] = r->driver_message[sizeof r->driver_message - 1] = 0;
    switch (r->verdict) {
      case MDC_PASS: return MDC_S_PASS;
      case MDC_NOT_SUPPORTED: return MDC_S_NOT_SUPPORTED;
      case MDC_TRACE_ERROR: return MDC_S_TRACE_ERROR;
      default: return MDC_S_FAIL;
    }
  }
  r->verdict = MDC_FAIL;
  r->line = s->ch.line;
  snprintf(r->event, sizeof r->event, "%s", s->ch.op);
  char why[160];
  mdc_cli__describe_exit(st, why, sizeof why);
  snprintf(r->message, sizeof r->message, "%s%s", why, where);
  return MDC_S_CRASH;
}

/* ---- the scheduler ------------------------------------------------------------------------ */

int mdc_cli__rp_sched_init(sched *k) {
  k->jobs = k->o->jobs > 0 ? k->o->jobs : 1;
  size_t n = k->run->n ? k->run->n : 1;
  k->slots = calloc((size_t)k->jobs, sizeof *k->slots);
  k->pfds = calloc((size_t)k->jobs, sizeof *k->pfds);
  k->queue = calloc(2 * n + 1, sizeof *k->queue);
  k->first = calloc(n, sizeof *k->first);
  k->first_status = calloc(n, sizeof *k->first_status);
  k->has_first = calloc(n, 1);
  if (!k->slots || !k->pfds || !k->queue || !k->first || !k->first_status || !k->has_first) return -1;
  for (size_t i = 0; i < k->run->n; i++) k->queue[k->qtail++] = i;
  k->tty = !k->o->quiet && isatty(STDERR_FILENO);
  return 0;
}

void mdc_cli__rp_sched_free(sched *k) {
  free(k->slots);
  free(k->pfds);
  free(k->queue);
  free(k->first);
  free(k->first_status);
  free(k->has_first);
}

/* A case's final status: stored, counted, shown. */
static void finalize(sched *k, mdc_cli__case *c, mdc_status final) {
  final = mdc_cli__rp_not_must_pass(c, final);
  mdc_cli__rp_set_status(k->run, c, final);
  k->done++;
  mdc_cli__rp_store_case(k->store, &k->store_ok, c, final, k->who, k->tty);
}

/* Stop (SIGINT/SIGTERM): kill what runs (a first attempt killed has no verdict: it stays
 * Running, the case the signal interrupted); a failure waiting for, or in, its re-run keeps its
 * first result, which is written: no verdict mdc has is lost. */
static void sched_stop(sched *k) {
  for (int i = 0; i < k->active; i++) mdc_cli__child_end(&k->slots[i].ch, NULL, 0);
  k->active = 0;
  for (size_t ci = 0; ci < k->run->n; ci++) {
    mdc_cli__case *c = &k->run->cases[ci];
    if (c->finished || !k->has_first[ci]) continue;
    c->res = k->first[ci];
    finalize(k, c, k->first_status[ci]);
  }
}

/* Starts queued cases while a slot is free (a case's store row is committed first). */
static void sched_fill(sched *k) {
  while (k->active < k->jobs && k->qhead < k->qtail && k->store_ok) {
    size_t ci = k->queue[k->qhead++];
    mdc_cli__case *c = &k->run->cases[ci];
    if (k->store && c->attempts == 0 && mdc_store_case_begin(k->store, k->run_id, c->name, c->path, &c->case_id)) {
      fprintf(stderr, "%s%s: %s (stopping; results written so far are kept)\n", k->tty ? "\n" : "", k->who,
              mdc_store_error(k->store));
      k->store_ok = 0;
      break;
    }
    if (mdc_cli__rp_start_case(k->o, c, ci, &k->slots[k->active])) {
      fprintf(stderr, "%s: fork: %s\n", k->who, strerror(errno));
      exit(MDC_EXIT_USAGE);
    }
    c->attempts++;
    k->active++;
    mdc_cli__rp_progress(k->run, k->done, c->name, k->tty);
  }
}

/* Waits for a child to write or exit, or for the nearest deadline (no sleeping). */
static void sched_wait(sched *k) {
  double next = k->slots[0].ch.deadline;
  int cap = -1;
  for (int i = 0; i < k->active; i++) {
    k->pfds[i] = (struct pollfd){.fd = mdc_cli__child_poll_fd(&k->slots[i].ch), .events = POLLIN};
    if (k->slots[i].ch.deadline < next) next = k->slots[i].ch.deadline;
    int c = mdc_cli__child_poll_ms(&k->slots[i].ch);
    if (c >= 0 && (cap < 0 || c < cap)) cap = c;
  }
  double left = next - mdc_cli__now();
  int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
  if (cap >= 0 && cap < ms) ms = cap;
  if (poll(k->pfds, (nfds_t)k->active, ms) < 0 && errno != EINTR) {
    fprintf(stderr, "%s: poll: %s\n", k->who, strerror(errno));
    exit(MDC_EXIT_USAGE);
  }
}

/* One attempt of case ci ended with st/res: queue its one re-run (a first failure, not in the
 * baseline), or settle its final status: Flake (a re-run passed), the first failure (a re-run
 * failed too), ExpectedFail / UnexpectedPass (baseline), or st. */
static void attempt_done(sched *k, size_t ci, mdc_status st, const mdc_result *res) {
  const mdc_cli__replay_opts *o = k->o;
  mdc_cli__case *c = &k->run->cases[ci];
  int listed = mdc_cli__baseline_has(k->base, c->name) || mdc_cli__baseline_has(k->base, c->path);
  if (c->attempts == 1) {
    k->first[ci] = *res;
    k->first_status[ci] = st;
    k->has_first[ci] = 1;
    if (!listed && o->rerun_failures && (st == MDC_S_FAIL || st == MDC_S_CRASH) && k->store_ok) {
      k->queue[k->qtail++] = ci; /* one re-run: a pass then makes it a Flake */
      return;
    }
  }
  mdc_status final = st;
  c->res = *res;
  if (c->attempts > 1) {
    c->res = k->first[ci];
    final = st == MDC_S_PASS ? MDC_S_FLAKE : k->first_status[ci];
    if (st == MDC_S_PASS) {
      char m[sizeof c->res.message];
      snprintf(m, sizeof m, "passed on re-run; first run: %s: %.900s", mdc_cli__status_name(k->first_status[ci]),
               k->first[ci].message);
      snprintf(c->res.message, sizeof c->res.message, "%s", m);
    }
  } else if (listed) {
    if (st == MDC_S_PASS) {
      final = MDC_S_UNEXPECTED_PASS;
      snprintf(c->res.message, sizeof c->res.message, "listed in baseline %s as a known failure, but passed", o->baseline);
    } else if (st != MDC_S_NOT_SUPPORTED) {
      final = MDC_S_EXPECTED_FAIL;
    }
  }
  finalize(k, c, final);
  mdc_cli__rp_progress(k->run, k->done, c->name, k->tty);
}

/* Runs every queued case to its end (or until SIGINT/SIGTERM or a store failure stops it). */
void mdc_cli__rp_sched_run(sched *k) {
  /* No SA_RESTART, so poll() returns at once with EINTR. */
  struct sigaction stop_act = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop_act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop_act, &old_int);
  sigaction(SIGTERM, &stop_act, &old_term);
  while (k->active > 0 || (k->qhead < k->qtail && k->store_ok)) {
    if (stop_signal) {
      sched_stop(k);
      break;
    }
    sched_fill(k);
    if (!k->active) break;
    sched_wait(k);
    if (stop_signal) continue; /* a child the same signal ended is not a Crash: it was stopped */
    double t = mdc_cli__now();
    for (int i = 0; i < k->active;) {
      slot *s = &k->slots[i];
      if (!mdc_cli__child_step(&s->ch, t)) {
        i++;
        continue;
      }
      mdc_result res;
      mdc_status st = mdc_cli__rp_finish_case(s, k->o->timeout_s, &res);
      k->run->cases[s->ci].duration_s += mdc_cli__now() - s->ch.t0;
      attempt_done(k, s->ci, st, &res);
      k->slots[i] = k->slots[--k->active];
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  k->run->interrupted_by = stop_signal;
  if (k->tty) fprintf(stderr, "\r\033[K");
}

/* Cases the store or a signal stopped: not run (or not finished), counted as nothing. */
void mdc_cli__rp_drop_unfinished(mdc_cli__run *run) {
  size_t k = 0;
  for (size_t i = 0; i < run->n; i++)
    if (run->cases[i].finished) run->cases[k++] = run->cases[i];
    else {
      run->stopped_running += run->cases[i].attempts > 0;
      free(run->cases[i].path), free(run->cases[i].rules);
    }
  run->n = k;
}
