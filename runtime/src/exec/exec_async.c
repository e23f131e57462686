/* exec_async.c - asynchronous executions (SPEC section 4): events, the device's worker threads
 * and their queue, execute_async and wait_event. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mutant.h"
#include "error.h"
#include "exec_int.h"
#include "mutant.h"

/* How many times a waiter yields, looking at the event, before it sleeps on it. */
#define SPIN_ROUNDS 64
/* How long a queued execution is left to its waiter before a worker finishes it, and how long a
 * worker keeps a deadline after the last execution was queued. */
#define REAP_NS 2000000ull
#define LINGER_NS 20000000ull

struct md__event {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  _Atomic bool done;         /* set under lock; read without it by a waiter's first spin */
  bool released;             /* a wait without deadline came: a stall (fault plan) no longer holds
                                it; under the device's q_lock */
  bool held;                 /* a fault plan's stall holds its execution (set before the handle
                                is issued, never changed) */
  md_status status;
  char message[MD__ERROR_MAX];
  uint32_t n_shapes;
  md_output_shape *shapes;
  md_timing timing;
};

void md__event_destroy(md_device *d, md__event *ev) {
  (void)d;
  pthread_mutex_destroy(&ev->lock);
  pthread_cond_destroy(&ev->cond);
  free(ev->shapes);
  free(ev);
}

/* Completes event ev of the finished execution x with its status st (the message is this
 * thread's last error), wakes its waiters, and frees x (dropping what it held, its reference on
 * the event included). */
static void finish_event(md__exec *x, md__event *ev, md_status st) {
  pthread_mutex_lock(&ev->lock);
  ev->status = st;
  snprintf(ev->message, sizeof ev->message, "%s", st == MD_NONE ? "" : md__last_error());
  /* (Mutant async_insufficient_no_shapes: the event keeps shapes of successes only.) */
  md__exec_results(x, MD_MUTANT(async_insufficient_no_shapes) && st == MD_OUTPUT_INSUFFICIENT_SIZE ? MD_GENERAL_FAILURE : st,
                   ev->shapes, ev->n_shapes, &ev->timing);
  atomic_store_explicit(&ev->done, true, memory_order_release);
  pthread_cond_broadcast(&ev->cond);
  pthread_mutex_unlock(&ev->lock);
  md__exec_free(x);
}

/* Finishes x (issued earlier, on whatever thread), completes its event with the result and
 * frees x (dropping what it held, its reference on the event included). The thread that calls
 * it took x off the queue, so nobody else touches x. */
static void complete(md_device *d, md__exec *x) {
  md__event *ev = x->ee->obj;
  md__clear_error();
  /* A failure found while issuing left its message in the event (the issuing thread's); a
   * stalled execution is issued here, once released, and its message is this thread's. */
  const char *issue_msg = NULL;
  if (!x->issued) md__exec_issue(x, true);
  else if (x->run.st != MD_NONE) issue_msg = ev->message;
  finish_event(x, ev, md__exec_finish(x, issue_msg));
  atomic_fetch_sub_explicit(&d->async_queued, 1, memory_order_release);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps on q_cond until `due` (monotonic ns). Called with q_lock. */
static void sleep_until(md_device *d, uint64_t due) {
  struct timespec ts = {.tv_sec = (time_t)(due / 1000000000ull), .tv_nsec = (long)(due % 1000000000ull)};
  d->timed_waiters++;
  pthread_cond_timedwait(&d->q_cond, &d->q_lock, &ts);
  d->timed_waiters--;
}

/* A device worker: finishes the queued executions nobody waits for. A waiter that waits for good
 * finishes its own execution (wait_event), so the worker leaves each one REAP_NS to its waiter
 * before it takes it: an execution that is waited for costs no hand-off to a worker and back.
 * Queuing does not wake a worker that sleeps with a deadline; one that has seen no execution
 * queued for LINGER_NS sleeps without one, and the next execution queued wakes it. */
static void *worker_main(void *arg) {
  md_device *d = arg;
  pthread_mutex_lock(&d->q_lock);
  for (;;) {
    md__exec *x = d->q_head;
    if (!x && d->stopping) break;   /* stopping and drained */
    uint64_t now = now_ns();
    if (!x) {
      if (now - d->last_queued_ns < LINGER_NS) sleep_until(d, d->last_queued_ns + LINGER_NS);
      else pthread_cond_wait(&d->q_cond, &d->q_lock);
      continue;
    }
    if (!d->stopping && now - x->queued_ns < REAP_NS) {
      sleep_until(d, x->queued_ns + REAP_NS);
      continue;
    }
    d->q_head = x->next;
    if (!d->q_head) d->q_tail = NULL;
    if (x->stall && !((md__event *)x->ee->obj)->released && !d->stopping &&
        atomic_load(&x->ce.e->handle) == x->client) {
      /* A stalled execution waits, holding everything it holds, on the parked list; the
       * worker goes on with the queue. What releases it (a wait without deadline, close_client,
       * close_device) either came before this check, under the same lock, or finds it parked. */
      x->stall = false;
      x->next = d->parked;
      d->parked = x;
      continue;
    }
    pthread_mutex_unlock(&d->q_lock);
    complete(d, x);
    pthread_mutex_lock(&d->q_lock);
  }
  pthread_mutex_unlock(&d->q_lock);
  return NULL;
}

/* The queued execution of event entry ee, taken off the queue (its finish is then the caller's),
 * or NULL when a worker took it first. */
static md__exec *unqueue(md_device *d, const md__hentry *ee) {
  pthread_mutex_lock(&d->q_lock);
  md__exec *prev = NULL, *x = d->q_head;
  while (x && x->ee != ee) prev = x, x = x->next;
  if (x) {
    if (prev) prev->next = x->next;
    else d->q_head = x->next;
    if (d->q_tail == x) d->q_tail = prev;
  }
  pthread_mutex_unlock(&d->q_lock);
  return x;
}

/* Puts the parked executions that `match` selects back at the head of the queue, due at once,
 * where the workers (or a waiter) finish them as any other. Called with q_lock held. */
static void release_parked(md_device *d, int (*match)(const md__exec *x, const void *arg), const void *arg) {
  for (md__exec **pp = &d->parked; *pp;) {
    md__exec *x = *pp;
    if (!match(x, arg)) {
      pp = &x->next;
      continue;
    }
    *pp = x->next;
    x->queued_ns = 0;
    x->next = d->q_head;
    d->q_head = x;
    if (!d->q_tail) d->q_tail = x;
  }
  pthread_cond_broadcast(&d->q_cond);
}

static int match_all(const md__exec *x, const void *arg) { return (void)x, (void)arg, 1; }
static int match_event(const md__exec *x, const void *arg) { return x->ee == arg; }
static int match_client(const md__exec *x, const void *arg) { return x->client == *(const md_handle *)arg; }

void md__stall_release_client(md_device *d, md_handle client) {
  pthread_mutex_lock(&d->q_lock);
  if (d->parked) release_parked(d, match_client, &client);
  pthread_mutex_unlock(&d->q_lock);
}

void md__executor_stop(md_device *d) {
  pthread_mutex_lock(&d->q_lock);
  d->stopping = true;
  /* Nothing is left parked: a stalled execution runs before the device closes. */
  if (d->parked) release_parked(d, match_all, NULL);
  pthread_cond_broadcast(&d->q_cond);
  uint32_t n = d->n_workers;
  pthread_mutex_unlock(&d->q_lock);
  for (uint32_t i = 0; i < n; i++) pthread_join(d->workers[i], NULL);
}

/* An execution worth no hand-off: every kernel a built-in one (it cannot block), at most
 * md__async_inline_bytes moved between pools and the device and computed by its
 * FULLY_CONNECTEDs (4 bytes a multiply-add: the one built-in kernel whose work its inputs and
 * outputs do not bound, so a small-in, small-out model that computes for milliseconds is not
 * run in the caller), and no other asynchronous execution of this device queued or running (so
 * it cannot overtake one, and an application that keeps several in flight still has them run
 * on the device's streams). It runs in the calling thread, as execute does, before
 * execute_async returns (docs/execution.md). */
_Atomic uint64_t md__async_inline_bytes = 64u << 10;

static bool runs_inline(md_device *d, const md__exec *x) {
  uint64_t limit = atomic_load_explicit(&md__async_inline_bytes, memory_order_relaxed);
  if (!limit || x->stall || !x->p->all_builtin || atomic_load_explicit(&d->async_queued, memory_order_acquire) != 0) return false;
  if (x->p->mac_bytes > limit) return false;
  uint64_t bytes = x->p->mac_bytes;
  for (uint32_t i = 0; i < x->n_in + x->n_out; i++) {
    const io_arg *a = i < x->n_in ? &x->in[i] : &x->out[i - x->n_in];
    if (a->kind != ARG_POOL) continue;
    if (a->whole || (i >= x->n_in && a->length == 0)) return false;   /* size known only when it runs */
    bytes += a->length;
  }
  return bytes <= limit;
}

/* Runs x now, in this thread, and completes its event. The thread's last error stays what it
 * was (execute_async succeeds; the execution's message is the event's). */
static void run_inline(md__exec *x, md__event *ev) {
  char saved[MD__ERROR_MAX];
  snprintf(saved, sizeof saved, "%s", md__last_error());
  md__clear_error();
  finish_event(x, ev, md__exec_run(x, false));
  md__fail(MD_NONE, "%s", saved);
}

md_status md__execute_async(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                            md_handle *event) {
  if (!event) return md__fail(MD_INVALID_ARGUMENT, "execute_async: event is NULL");
  *event = 0;
  md__exec *x;
  md_status st = md__exec_create(d, "execute_async", client, prepared, req, &x);
  if (st != MD_NONE) return st;
  md__event *ev = calloc(1, sizeof *ev);
  if (ev) ev->shapes = calloc(x->n_out + 1, sizeof *ev->shapes);
  if (!ev || !ev->shapes) {
    if (ev) free(ev);
    md__exec_free(x);
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "execute_async: out of memory");
  }
  ev->n_shapes = x->n_out;
  ev->held = x->stall;
  pthread_mutex_init(&ev->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ev->cond, &ca);
  pthread_condattr_destroy(&ca);
  md_handle h;
  /* The execution's own reference on the event is taken with the handle: a close_client
   * sweep may kill the handle the moment it exists, and the event must outlive it. */
  md__race_point("execute_async", "issuing");
  st = md__handle_issue_held(&d->ht, MD__KIND_EVENT, client, ev, &h, &x->ee);
  if (st != MD_NONE) {
    md__event_destroy(d, ev);
    md__exec_free(x);
    return md__fail(st, "execute_async: too many live handles");
  }
  /* A close of the client that came between its lookup and the issue: the execution runs only
   * if the close's sweep counted its event (SPEC 4: then it finishes on its own). */
  if ((st = md__issued_settle(d, "execute_async", x->ce.e, client, x->ee, &h)) != MD_NONE) {
    md__exec_free(x);   /* drops the last reference on the event */
    return st;
  }
  if (runs_inline(d, x)) {
    run_inline(x, ev);
    *event = h;
    return MD_NONE;
  }

  atomic_fetch_add_explicit(&d->async_queued, 1, memory_order_acq_rel);
  pthread_mutex_lock(&d->q_lock);
  md_status refuse = MD_NONE;
  if (d->stopping) {
    refuse = md__fail(MD_DEVICE_UNAVAILABLE, "execute_async: the device is closing");
  } else if (d->n_workers < 2) {
    /* Workers start with the first asynchronous execution. */
    if (pthread_create(&d->workers[d->n_workers], NULL, worker_main, d) == 0) d->n_workers++;
    if (d->n_workers == 0) refuse = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "execute_async: cannot start a worker thread");
  }
  pthread_mutex_unlock(&d->q_lock);
  if (refuse != MD_NONE) {
    atomic_fetch_sub_explicit(&d->async_queued, 1, memory_order_release);
    md__handle_kill(&d->ht, x->ee, h);
    md__exec_free(x);
    return refuse;
  }
  /* The device work is issued from this thread, on the execution context's stream: the kernels
   * run on the device while execute_async returns; a worker (or the waiter, docs/execution.md)
   * synchronizes and finishes it. What the issue found goes to the event, not to this call. */
  char saved[MD__ERROR_MAX];
  snprintf(saved, sizeof saved, "%s", md__last_error());
  md__clear_error();
  if (!x->stall) {   /* a stalled one writes nothing before it is released */
    x->issued = true;
    if (md__exec_issue(x, true) != MD_NONE) snprintf(ev->message, sizeof ev->message, "%s", md__last_error());
  }
  md__fail(MD_NONE, "%s", saved);
  pthread_mutex_lock(&d->q_lock);
  x->next = NULL;
  x->queued_ns = now_ns();
  d->last_queued_ns = x->queued_ns;
  if (d->q_tail) d->q_tail->next = x;
  else d->q_head = x;
  d->q_tail = x;
  if (!d->timed_waiters) pthread_cond_signal(&d->q_cond);   /* else a worker reaps it in time */
  pthread_mutex_unlock(&d->q_lock);
  *event = h;
  return MD_NONE;
}

md_status md__wait_event(md_device *d, md_handle client, md_handle event, uint64_t timeout_ns,
                         md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  md__hentry *ce, *ee;   /* shapes and timing were cleared by the entry point (driver.c) */
  md_status st = md__client_get(d, "wait_event", client, &ce);
  if (st != MD_NONE) return st;
  st = md__owned_get(d, "wait_event", "event", client, event, MD__KIND_EVENT, &ee);
  if (st != MD_NONE) {
    md__handle_put(&d->ht, ce);
    return st;
  }
  md__event *ev = ee->obj;
  if (timeout_ns != UINT64_MAX && ev->held) {
    /* A held execution runs only once a wait without deadline releases it: a wait with a
     * deadline cannot see it finish, so it returns MISSED_DEADLINE_TRANSIENT at once instead of
     * sleeping to its deadline (which may be centuries away). */
    pthread_mutex_lock(&d->q_lock);
    if (!ev->released) timeout_ns = 0;
    pthread_mutex_unlock(&d->q_lock);
  }
  if (timeout_ns == UINT64_MAX) {
    /* A wait without deadline releases its execution if a fault plan stalled it (parked, or
     * still queued: the flag keeps the worker from parking it). */
    pthread_mutex_lock(&d->q_lock);
    ev->released = true;
    if (d->parked) release_parked(d, match_event, ee);
    pthread_mutex_unlock(&d->q_lock);
  }
  if (timeout_ns == UINT64_MAX && !atomic_load_explicit(&ev->done, memory_order_acquire)) {
    /* Waiting for good: an execution no worker took yet is finished here, in this thread (its
     * synchronization is then the only hand-off, the device's to this thread). */
    md__exec *x = unqueue(d, ee);
    if (x) {
      char saved[MD__ERROR_MAX];
      snprintf(saved, sizeof saved, "%s", md__last_error());
      complete(d, x);
      md__fail(MD_NONE, "%s", saved);
    }
  }
  /* A hand-off that spins briefly before it sleeps: an execution about to finish is waited for
   * without a futex sleep and wake-up (which cost tens of microseconds on a busy machine). */
  for (int spin = 0; spin < SPIN_ROUNDS && timeout_ns && !atomic_load_explicit(&ev->done, memory_order_acquire); spin++)
    sched_yield();
  pthread_mutex_lock(&ev->lock);
  if (!ev->done && timeout_ns != UINT64_MAX) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + timeout_ns % 1000000000ull;
    uint64_t sec = (uint64_t)dl.tv_sec + timeout_ns / 1000000000ull + ns / 1000000000ull;
    dl.tv_sec = sec > (uint64_t)INT64_MAX ? INT64_MAX : (time_t)sec;
    dl.tv_nsec = (long)(ns % 1000000000ull);
    while (!ev->done && pthread_cond_timedwait(&ev->cond, &ev->lock, &dl) == 0) {}
  } else {
    while (!ev->done) pthread_cond_wait(&ev->cond, &ev->lock);
  }
  bool done = ev->done;
  md_status est = ev->status;
  char msg[MD__ERROR_MAX];
  snprintf(msg, sizeof msg, "%s", ev->message);
  if (done) {
    if (shapes && n_shapes)
      memcpy(shapes, ev->shapes, (n_shapes < ev->n_shapes ? n_shapes : ev->n_shapes) * sizeof *shapes);
    if (timing) *timing = ev->timing;
  }
  pthread_mutex_unlock(&ev->lock);
  if (!done) {
    /* Mutant: a wait that times out consumes the event (SPEC 4: it stays valid). */
    if (MD_MUTANT(timed_out_wait_consumes)) md__handle_kill(&d->ht, ee, event);
    st = md__fail(MD_MISSED_DEADLINE_TRANSIENT, "wait_event: event 0x%016llx: not finished within %llu ns",
                  (unsigned long long)event, (unsigned long long)timeout_ns);
  } else if (!(MD_MUTANT(failed_event_not_consumed) && est != MD_NONE) && /* Mutant: a failure stays to be read again. */
             !md__handle_kill(&d->ht, ee, event) && !MD_MUTANT(wait_twice)) { /* Mutant: racing waits both consume it. */
    /* Another wait consumed it first. */
    if (shapes && n_shapes) memset(shapes, 0, n_shapes * sizeof *shapes);
    if (timing) timing->on_device_ns = timing->in_driver_ns = UINT64_MAX;
    st = md__fail(MD_INVALID_ARGUMENT, "wait_event: event 0x%016llx: was already waited for", (unsigned long long)event);
  } else {
    st = est;
    if (st != MD_NONE) md__fail(st, "%s", msg);
  }
  md__handle_put(&d->ht, ee);
  md__handle_put(&d->ht, ce);
  return st;
}
