/* replay_sched.c - the scheduler of `mdc replay`: cases run in forked children, each child
 * loading the driver once and running a group of up to --group cases one after the other
 * (replay_group.c; --group 1: one child per case); up to --jobs children run at once; poll() on
 * their pidfds waits for the nearest deadline of a running case (no sleeping). A crash or timeout
 * ends a child: the case that was running is re-run alone, the rest of its group goes on in a
 * new child. A case that fails after another in its child is re-run alone: passing alone, it is
 * OrderDependent (preceded_by: the case before it; the pair is replayed to confirm it). A failure
 * not in the baseline gets one re-run (a pass makes it a Flake); SIGINT/SIGTERM kills what runs. */
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
#include <stdatomic.h>
#include <stdint.h>
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

/* A child that runs cases: mdc_cli__rp_start_group (replay_group.c). */

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
  k->grp_res = calloc(n, sizeof *k->grp_res);
  k->grp_status = calloc(n, sizeof *k->grp_status);
  k->grp_pred = calloc(n, sizeof *k->grp_pred);
  if (!k->slots || !k->pfds || !k->queue || !k->first || !k->first_status || !k->has_first || !k->grp_res ||
      !k->grp_status || !k->grp_pred)
    return -1;
  mdc_cli__rp_order(k->o, k->run, k->queue); /* path order, --keep-order or --shuffle */
  k->qtail = k->run->n;
  k->group = mdc_cli__rp_group_size(k->o, k->run);
  k->run->group_size = k->group;
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
  free(k->grp_res);
  free(k->grp_status);
  free(k->grp_pred);
  for (size_t i = k->items_head; i < k->n_items; i++) free(k->items[i].cis);
  free(k->items);
}

/* Queues a child to start before new groups are cut (a copy of cis). */
static void push_item(sched *k, const size_t *cis, uint32_t n, int kind) {
  if (k->items_head == k->n_items) k->items_head = k->n_items = 0;
  if (k->n_items == k->cap_items) {
    size_t cap = k->cap_items ? 2 * k->cap_items : 16;
    mdc_cli__item *v = realloc(k->items, cap * sizeof *v);
    if (!v) {
      fprintf(stderr, "%s: out of memory\n", k->who);
      exit(MDC_EXIT_USAGE);
    }
    k->items = v;
    k->cap_items = cap;
  }
  size_t *c = malloc(n * sizeof *c);
  if (!c) {
    fprintf(stderr, "%s: out of memory\n", k->who);
    exit(MDC_EXIT_USAGE);
  }
  memcpy(c, cis, n * sizeof *c);
  k->items[k->n_items++] = (mdc_cli__item){c, n, kind};
}

/* A case's final status: stored, counted, shown. */
static void finalize(sched *k, mdc_cli__case *c, mdc_status final) {
  final = mdc_cli__rp_known_flaky(k->o, c, final); /* --flakes (replay_lists.c) */
  final = mdc_cli__rp_not_must_pass(c, final);
  mdc_cli__rp_set_status(k->run, c, final);
  k->done++;
  mdc_cli__rp_store_case(k->store, &k->store_ok, c, final, k->who, k->tty);
}

/* Whether a verdict is a failure that a case run after another may owe to it. */
static int is_failure(mdc_status st) { return st == MDC_S_FAIL || st == MDC_S_CRASH || st == MDC_S_TIMEOUT; }

/* The status of a verdict a child reported. */
static mdc_status status_of(const mdc_result *r) {
  switch (r->verdict) {
    case MDC_PASS: return MDC_S_PASS;
    case MDC_NOT_SUPPORTED: return MDC_S_NOT_SUPPORTED;
    case MDC_TRACE_ERROR: return MDC_S_TRACE_ERROR;
    default: return MDC_S_FAIL;
  }
}

/* One attempt of case ci ended with st/res (`rerun`: its flake re-run): queue its one re-run (a
 * first failure, not in the baseline), or settle its final status: Flake (a re-run passed), the
 * first failure (a re-run failed too), ExpectedFail / UnexpectedPass (baseline), or st. A re-run
 * runs alone in a child of its own, as every first attempt of --group 1 does. */
static void attempt_done(sched *k, size_t ci, mdc_status st, const mdc_result *res, int rerun) {
  const mdc_cli__replay_opts *o = k->o;
  mdc_cli__case *c = &k->run->cases[ci];
  int listed = mdc_cli__baseline_has(k->base, c->name) || mdc_cli__baseline_has(k->base, c->path);
  if (!rerun) {
    k->first[ci] = *res;
    k->first_status[ci] = st;
    k->has_first[ci] = 1;
    if (!listed && o->rerun_failures && (st == MDC_S_FAIL || st == MDC_S_CRASH) && k->store_ok) {
      push_item(k, &ci, 1, MDC_CLI__RUN_RERUN); /* one re-run: a pass then makes it a Flake */
      return;
    }
  }
  mdc_status final = st;
  c->res = *res;
  if (rerun) {
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

/* Case ci failed after grp_pred[ci] in one child and passed alone: OrderDependent, naming the
 * case before it; `reproduced`: the two, replayed as a group of two, failed it again. */
static void order_dependent(sched *k, size_t ci, int reproduced) {
  mdc_cli__case *c = &k->run->cases[ci];
  const mdc_cli__case *p = &k->run->cases[k->grp_pred[ci]];
  c->res = k->grp_res[ci];
  snprintf(c->preceded_by, sizeof c->preceded_by, "%s", p->name);
  char m[2048];
  snprintf(m, sizeof m, "passes alone; %s after %s in the same process (%s: mdc replay%s%.200s --group 2 "
           "--keep-order %.200s %.200s): %.400s", mdc_cli__status_name(k->grp_status[ci]), p->name,
           reproduced ? "the two reproduce it" : "the two alone did not: an earlier case of its group, or chance",
           k->o->driver ? " --driver " : "", k->o->driver ? k->o->driver : "", p->path, c->path,
           k->grp_res[ci].message);
  snprintf(c->res.message, sizeof c->res.message, "%.*s", (int)sizeof c->res.message - 1, m);
  finalize(k, c, MDC_S_ORDER_DEPENDENT);
  mdc_cli__rp_progress(k->run, k->done, c->name, k->tty);
}

/* The verdict st/r of the i-th case of slot s's child. */
static void judge(sched *k, const slot *s, uint32_t i, mdc_status st, const mdc_result *r, int stopping) {
  size_t ci = s->cis[i];
  switch (s->kind) {
    case MDC_CLI__RUN_GROUP:
      if (i > 0 && is_failure(st)) {
        /* Maybe the case before left the driver in a state this one trips on: re-run alone. Kept
         * as its first result meanwhile, so a stop still writes it. */
        k->grp_res[ci] = k->first[ci] = *r;
        k->grp_status[ci] = k->first_status[ci] = st;
        k->grp_pred[ci] = s->cis[i - 1];
        k->has_first[ci] = 1;
        if (!stopping) push_item(k, &ci, 1, MDC_CLI__RUN_ALONE);
        return;
      }
      attempt_done(k, ci, st, r, 0);
      return;
    case MDC_CLI__RUN_ALONE:
      if (st == MDC_S_PASS || st == MDC_S_NOT_SUPPORTED) {
        size_t pair[2] = {k->grp_pred[ci], ci};
        if (!stopping) push_item(k, pair, 2, MDC_CLI__RUN_PAIR);
        return;
      }
      attempt_done(k, ci, st, r, 0); /* it fails alone too: its own verdict, as in --group 1 */
      return;
    case MDC_CLI__RUN_PAIR:
      if (i == 1) order_dependent(k, ci, is_failure(st));
      return;
    default:
      attempt_done(k, ci, st, r, 1);
      return;
  }
}

/* The running case's deadline: --timeout from when the child began it. */
static void refresh_deadline(const sched *k, slot *s) {
  double t0 = atomic_load(&s->gp->case_t0);
  if (t0 > 0) s->ch.deadline = t0 + k->o->timeout_s;
}

/* Slot s's child ended, or its running case ran out of time (or the run stops: `stopping`):
 * the verdicts of the cases it finished; the one it was running is a Crash or Timeout (judged as
 * any failure after another case); the rest of its group goes on in a new child. */
static void child_over(sched *k, slot *s, int stopping) {
  mdc_result end_res;
  mdc_status end_st = MDC_S_INTERRUPTED;
  if (stopping)
    mdc_cli__child_end(&s->ch, NULL, 0);
  else
    end_st = mdc_cli__rp_finish_case(s, k->o->timeout_s, &end_res); /* kills the group: gp is final */
  uint32_t done = atomic_load_explicit(&s->gp->done, memory_order_acquire);
  uint32_t started = atomic_load(&s->gp->started);
  int stopped = (int)atomic_load(&s->gp->stopped);
  if (done > s->n) done = s->n;
  for (uint32_t i = 0; i < done; i++) {
    mdc_result r = s->gp->out[i].res;
    r.message[sizeof r.message - 1] = r.expected[sizeof r.expected - 1] = r.actual[sizeof r.actual - 1] = 0;
    r.event[sizeof r.event - 1] = r.rule[sizeof r.rule - 1] = r.driver_message[sizeof r.driver_message - 1] = 0;
    r.advisory[sizeof r.advisory - 1] = 0;
    if (s->kind != MDC_CLI__RUN_PAIR || i == 1) k->run->cases[s->cis[i]].duration_s += s->gp->out[i].duration_s;
    judge(k, s, i, status_of(&r), &r, stopping);
  }
  uint32_t next = done;
  if (!stopping && done < s->n && started > done && !stopped && (end_st == MDC_S_CRASH || end_st == MDC_S_TIMEOUT)) {
    if (s->kind != MDC_CLI__RUN_PAIR || done == 1)
      k->run->cases[s->cis[done]].duration_s += mdc_cli__now() - atomic_load(&s->gp->case_t0);
    mdc_cli__rp_crash_stack(&k->run->cases[s->cis[done]], &s->ch, end_st, &end_res); /* its stack: signature.c */
    judge(k, s, done, end_st, &end_res, 0);
    next = done + 1;
  }
  if (stopping || next >= s->n) return;
  if (s->kind == MDC_CLI__RUN_GROUP)
    push_item(k, s->cis + next, s->n - next, MDC_CLI__RUN_GROUP); /* the rest, in a new child */
  else if (s->kind == MDC_CLI__RUN_PAIR && next <= 1)
    order_dependent(k, s->cis[1], 0); /* the case before it ended the pair's child first */
  else
    push_item(k, s->cis + next, s->n - next, s->kind);
}

/* Stop (SIGINT/SIGTERM): kill what runs (a first attempt killed has no verdict: it stays
 * Running, the case the signal interrupted; so do the cases of its group not yet begun); the
 * verdicts a child had written are taken; a failure waiting for, or in, its re-run keeps its
 * first result, which is written: no verdict mdc has is lost. */
static void sched_stop(sched *k) {
  for (int i = 0; i < k->active; i++) {
    child_over(k, &k->slots[i], 1);
    mdc_cli__rp_group_free(&k->slots[i]);
  }
  k->active = 0;
  for (size_t ci = 0; ci < k->run->n; ci++) {
    mdc_cli__case *c = &k->run->cases[ci];
    if (c->finished || !k->has_first[ci]) continue;
    c->res = k->first[ci];
    finalize(k, c, k->first_status[ci]);
  }
}

/* Starts children while a slot is free: queued items first (rests of groups, re-runs, pairs),
 * then a new group cut from the queue: --group cases, fewer near the end so that every slot
 * gets a share (guided self-scheduling; the cut depends only on how many cases are left, so a
 * seeded order makes the same groups every run). Each case's store row is committed first. */
static void sched_fill(sched *k) {
  while (k->active < k->jobs && k->store_ok) {
    slot *s = &k->slots[k->active];
    memset(s, 0, sizeof *s);
    if (k->items_head < k->n_items) {
      mdc_cli__item *it = &k->items[k->items_head++];
      s->cis = it->cis;
      s->n = it->n;
      s->kind = it->kind;
    } else if (k->qhead < k->qtail) {
      size_t left = k->qtail - k->qhead, share = (left + (size_t)k->jobs - 1) / (size_t)k->jobs;
      s->n = (uint32_t)(share < k->group ? share : k->group);
      s->cis = malloc(s->n * sizeof *s->cis);
      if (!s->cis) {
        fprintf(stderr, "%s: out of memory\n", k->who);
        exit(MDC_EXIT_USAGE);
      }
      memcpy(s->cis, k->queue + k->qhead, s->n * sizeof *s->cis);
      k->qhead += s->n;
      s->kind = MDC_CLI__RUN_GROUP;
    } else {
      break;
    }
    for (uint32_t i = 0; i < s->n; i++) {
      mdc_cli__case *c = &k->run->cases[s->cis[i]];
      if (k->store && c->case_id < 0 && mdc_store_case_begin(k->store, k->run_id, c->name, c->path, &c->case_id)) {
        fprintf(stderr, "%s%s: %s (stopping; results written so far are kept)\n", k->tty ? "\n" : "", k->who,
                mdc_store_error(k->store));
        k->store_ok = 0;
        mdc_cli__rp_group_free(s);
        return;
      }
    }
    if (mdc_cli__rp_start_group(k->o, k->run, s)) {
      fprintf(stderr, "%s: fork: %s\n", k->who, strerror(errno));
      exit(MDC_EXIT_USAGE);
    }
    for (uint32_t i = s->kind == MDC_CLI__RUN_PAIR ? 1 : 0; i < s->n; i++) k->run->cases[s->cis[i]].attempts++;
    k->run->children++;
    k->active++;
    mdc_cli__rp_progress(k->run, k->done, k->run->cases[s->ci].name, k->tty);
  }
}

/* Waits for a child to exit, or for the nearest deadline of a running case (no sleeping). */
static void sched_wait(sched *k) {
  for (int i = 0; i < k->active; i++) refresh_deadline(k, &k->slots[i]);
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
  ms = mdc_cli__rp_progress_poll_ms(k->run, k->done, ms); /* off a terminal: the next status line */
  if (poll(k->pfds, (nfds_t)k->active, ms) < 0 && errno != EINTR) {
    fprintf(stderr, "%s: poll: %s\n", k->who, strerror(errno));
    exit(MDC_EXIT_USAGE);
  }
}

/* Runs every queued case to its end (or until SIGINT/SIGTERM or a store failure stops it). */
void mdc_cli__rp_sched_run(sched *k) {
  /* No SA_RESTART, so poll() returns at once with EINTR. */
  struct sigaction stop_act = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop_act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop_act, &old_int);
  sigaction(SIGTERM, &stop_act, &old_term);
  while (k->active > 0 || ((k->qhead < k->qtail || k->items_head < k->n_items) && k->store_ok)) {
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
      refresh_deadline(k, s);
      if (!mdc_cli__child_step(&s->ch, t)) {
        i++;
        continue;
      }
      child_over(k, s, 0);
      mdc_cli__rp_group_free(s);
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
      free(run->cases[i].path), free(run->cases[i].rules), free(run->cases[i].stack);
    }
  run->n = k;
}
