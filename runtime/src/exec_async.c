/* exec_async.c - asynchronous executions (SPEC section 4): events, the device's worker threads
 * and their queue, execute_async and wait_event. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "exec_int.h"
#include "mutant.h"

struct md__event {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool done;
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

static void *worker_main(void *arg) {
  md_device *d = arg;
  pthread_mutex_lock(&d->q_lock);
  for (;;) {
    while (!d->q_head && !d->stopping) pthread_cond_wait(&d->q_cond, &d->q_lock);
    md__exec *x = d->q_head;
    if (!x) break;  /* stopping and drained */
    d->q_head = x->next;
    if (!d->q_head) d->q_tail = NULL;
    pthread_mutex_unlock(&d->q_lock);

    md__clear_error();
    md_status st = md__exec_run(x, true);
    md__event *ev = x->ee->obj;
    pthread_mutex_lock(&ev->lock);
    ev->status = st;
    snprintf(ev->message, sizeof ev->message, "%s", st == MD_NONE ? "" : md__last_error());
    md__exec_results(x, st, ev->shapes, ev->n_shapes, &ev->timing);
    ev->done = true;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
    md__exec_free(x);   /* drops the references the execution held, the event's included */

    pthread_mutex_lock(&d->q_lock);
  }
  pthread_mutex_unlock(&d->q_lock);
  return NULL;
}

void md__executor_stop(md_device *d) {
  pthread_mutex_lock(&d->q_lock);
  d->stopping = true;
  pthread_cond_broadcast(&d->q_cond);
  uint32_t n = d->n_workers;
  pthread_mutex_unlock(&d->q_lock);
  for (uint32_t i = 0; i < n; i++) pthread_join(d->workers[i], NULL);
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
  pthread_mutex_init(&ev->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ev->cond, &ca);
  pthread_condattr_destroy(&ca);
  md_handle h;
  st = md__handle_issue(&d->ht, MD__KIND_EVENT, client, ev, &h, &x->ee);
  if (st != MD_NONE) {
    md__event_destroy(d, ev);
    md__exec_free(x);
    return md__fail(st, "execute_async: too many live handles");
  }
  md__handle_ref(x->ee);   /* the execution's own reference; the table holds the other */

  pthread_mutex_lock(&d->q_lock);
  if (d->stopping) {
    pthread_mutex_unlock(&d->q_lock);
    md__handle_kill(&d->ht, x->ee, h);
    md__exec_free(x);
    return md__fail(MD_DEVICE_UNAVAILABLE, "execute_async: the device is closing");
  }
  if (d->n_workers < 2) {
    /* Workers start with the first asynchronous execution. */
    if (pthread_create(&d->workers[d->n_workers], NULL, worker_main, d) == 0) d->n_workers++;
  }
  if (d->n_workers == 0) {
    pthread_mutex_unlock(&d->q_lock);
    md__handle_kill(&d->ht, x->ee, h);
    md__exec_free(x);
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "execute_async: cannot start a worker thread");
  }
  x->next = NULL;
  if (d->q_tail) d->q_tail->next = x;
  else d->q_head = x;
  d->q_tail = x;
  pthread_cond_signal(&d->q_cond);
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
    st = md__fail(MD_MISSED_DEADLINE_TRANSIENT, "wait_event: event 0x%016llx: not finished within %llu ns",
                  (unsigned long long)event, (unsigned long long)timeout_ns);
  } else if (!md__handle_kill(&d->ht, ee, event) && !MD_MUTANT(wait_twice)) { /* Mutant: racing waits both consume it. */
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
