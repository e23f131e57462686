/* sim_sched.c - the sim's scheduler: streams, their command queues and the worker threads that
 * run them (unseeded, or in an order that a seed decides), events, and the log of the order in
 * which commands ran. */
#include "sim_backend_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the scheduler ------------------------------------------------------------------------
 *
 * Work issued on a stream is a command in the stream's queue. Worker threads (started with the
 * first stream) run the commands, one stream at a time per stream, in stream order.
 *
 * Unseeded: two workers, and a stream has an owner: the worker that first ran it. A worker takes
 * its own (or a new) stream whose next command was issued first, else one whose owner is busy
 * with another, and runs it until it has nothing queued; each sleeps on its own condition and
 * is woken for a stream that becomes runnable (its owner if it sleeps, else any that sleeps),
 * never once per command. So the buffers of a stream stay in one core's caches: two
 * executions kept in flight on two streams went from 0.54x to 0.87x the throughput of
 * back-to-back synchronous ones (bench/: async_throughput_2_streams). Commands are released as
 * they are issued.
 *
 * Seeded (seed=N): one worker, and the order is decided by the seed alone. Issued commands are
 * held until a flush (stream_sync, event_wait, event_query, close), which releases everything
 * held as one batch. The worker finishes a batch before it starts the next, and inside a batch
 * it picks the next stream with a splitmix64 draw over the streams (in creation order) whose
 * next command belongs to the batch. So a client that issues the same calls in the same order
 * gets the same interleaving of its streams, command for command, on every run; another seed
 * explores another. */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Keeps the first error of accepted work on s for stream_sync. Caller holds sched_lock. */
static void stream_note_locked(md_stream *s, md_status st, const char *msg) {
  if (!s || st == MD_NONE || s->error != MD_NONE) return;
  s->error = st;
  snprintf(s->message, sizeof s->message, "%s", msg ? msg : "");
}

/* Seeded: releases every held command as the next batch. Caller holds sched_lock. */
static void flush_locked(md_backend *b) {
  if (!b->has_seed || !b->held) return;
  b->batch_last++;
  for (md_stream *s = b->streams; s; s = s->next)
    for (cmd *c = s->head; c; c = c->next)
      if (!c->batch) c->batch = b->batch_last;
  b->held = 0;
  md__sim_wake_all_locked(b);
}

/* Wakes every worker (stopping, a seeded batch released, the device lost). Caller holds
 * sched_lock. */
void md__sim_wake_all_locked(md_backend *b) {
  for (unsigned i = 0; i < SIM_MAX_WORKERS; i++) pthread_cond_broadcast(&b->wcond[i]);
}

/* Unseeded: wakes a worker for the runnable stream s -- its owner when that one sleeps, else
 * (its owner is busy elsewhere, or it has none) any worker that sleeps. Caller holds
 * sched_lock. */
static void wake_for_locked(md_backend *b, const md_stream *s) {
  if (s->owner && b->widle[s->owner - 1]) {
    pthread_cond_signal(&b->wcond[s->owner - 1]);
    return;
  }
  for (unsigned i = 0; i < b->n_workers; i++)
    if (b->widle[i]) {
      pthread_cond_signal(&b->wcond[i]);
      return;
    }
}

/* Unseeded: the stream worker w runs next, or NULL. Its own streams (and ones nobody owns yet,
 * which become its own) first, the earliest issued; else one whose owner is busy running
 * another, so that no work waits while a worker sleeps. A stream stays with its owner: its
 * buffers stay in one core's caches (moving 1 MiB that another core just wrote costs as much
 * again as copying it, measured on this project's VMs). Caller holds sched_lock. */
static md_stream *pick_for_locked(md_backend *b, unsigned w) {
  md_stream *own = NULL, *other = NULL;
  for (md_stream *s = b->streams; s; s = s->next) {
    if (!s->head || s->running) continue;
    if (!s->owner || s->owner == w + 1) {
      if (!own || s->head->seq < own->head->seq) own = s;
    } else if (!b->widle[s->owner - 1] && (!other || s->head->seq < other->head->seq)) {
      other = s;
    }
  }
  md_stream *r = own ? own : other;
  if (r && !r->owner) r->owner = w + 1;
  return r;
}

/* The stream whose head worker w runs next, or NULL: unseeded, pick_for_locked; seeded, the
 * seed's draw within the current batch. Caller holds sched_lock. */
static md_stream *pick_locked(md_backend *b, unsigned w) {
  if (!b->has_seed) return pick_for_locked(b, w);
  for (;;) {
    unsigned n = 0;
    for (md_stream *s = b->streams; s; s = s->next)
      if (s->head && !s->running && s->head->batch == b->batch_cur) n++;
    if (n) {
      unsigned k = (unsigned)(splitmix64(&b->rng) % n);
      for (md_stream *s = b->streams; s; s = s->next)
        if (s->head && !s->running && s->head->batch == b->batch_cur && k-- == 0) return s;
    }
    if (b->batch_cur > b->batch_last) return NULL;   /* nothing released */
    int busy = 0;   /* a command of this batch still running: its stream may have more */
    for (md_stream *s = b->streams; s; s = s->next) busy |= s->running;
    if (busy) return NULL;
    b->batch_cur++;
  }
}

static void order_note_locked(md_backend *b, const md_stream *s, const cmd *c) {
  uint64_t h = b->order_hash ? b->order_hash : 0xcbf29ce484222325ull;
  const uint64_t words[3] = {s->id, c->index, (uint64_t)c->kind};
  for (int w = 0; w < 3; w++)
    for (int i = 0; i < 8; i++) h = (h ^ ((words[w] >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
  b->order_hash = h;
  b->order_log[b->order_count % SIM_ORDER_LOG] =
      (md_sim_order_entry){.stream = s->id, .index = c->index, .kind = (uint32_t)c->kind};
  b->order_count++;
}

/* Runs the next command of s (runnable: a head, not running) on this worker. Called with
 * sched_lock, which it drops while the command runs; returns with it held, and held since the
 * command's bookkeeping, so the caller may look at s once more. */
static void run_next_locked(md_backend *b, md_stream *s) {
  cmd *c = s->head;
  s->head = c->next;
  if (!s->head) s->tail = NULL;
  s->running = 1;
  /* More work than this thread: wake a worker for each other runnable stream. A stream's next
   * command needs no wake-up, this thread comes back for it (and issue wakes one only for a
   * stream that was idle), so a stream of commands costs no futex call per command. */
  if (!b->has_seed)
    for (md_stream *t = b->streams; t; t = t->next)
      if (t != s && t->head && !t->running) wake_for_locked(b, t);
  pthread_mutex_unlock(&b->sched_lock);

  md_status st = MD_NONE;
  char msg[MSG_MAX] = "";
  if (c->kind != CMD_EVENT && is_lost(b)) {
    st = md__sim_lost_status(b, c->kind == CMD_COPY ? "queued copy" : "queued launch", msg, sizeof msg);
    if (c->kind == CMD_LAUNCH) md__sim_kfail(c->st, st, "%s", msg);
  } else if (c->kind == CMD_COPY) {
    st = run_copy(b, s, c);
  } else if (c->kind == CMD_LAUNCH) {
    st = md__sim_run_launch(b, s, c->k, c->call, c->st, c->ts, c->n_ts);
    if (st != MD_NONE) snprintf(msg, sizeof msg, "%s", c->st->message);
  }

  pthread_mutex_lock(&b->sched_lock);
  stream_note_locked(s, st, msg);
  if (c->kind == CMD_EVENT) {
    atomic_store_explicit(&c->ev->reached_ns, atomic_load_explicit(&b->clock_ns, memory_order_relaxed) + 1,
                          memory_order_release);
    if (c->ev->reached < c->gen) c->ev->reached = c->gen;
  }
  order_note_locked(b, s, c);
  s->running = 0;
  s->queued--;
  /* Whoever waits on done_cond waits for a stream to drain (stream_sync, stream_destroy) or for
   * an event: a command in the middle of a stream wakes nobody (one wake-up per drained
   * stream, not one per command). */
  if (!s->queued || c->kind == CMD_EVENT) pthread_cond_broadcast(&b->done_cond);
  /* Freed under the lock: the caller goes on with s only while the lock is still held (a
   * drained stream may be destroyed as soon as it is dropped). */
  free(c);
}

static void *worker_main(void *arg) {
  md_backend *b = arg;
  pthread_mutex_lock(&b->sched_lock);
  unsigned w = b->worker_ids++;
  for (;;) {
    md_stream *s = b->stopping ? NULL : pick_locked(b, w);
    if (!s) {
      if (b->stopping) break;
      b->widle[w] = 1;
      pthread_cond_wait(&b->wcond[w], &b->sched_lock);
      b->widle[w] = 0;
      continue;
    }
    /* Unseeded, a worker runs a stream it started to its end (a stream's next command is
     * nobody else's to wake up for). */
    do run_next_locked(b, s);
    while (!b->has_seed && !b->stopping && s->head && !s->running);
  }
  pthread_mutex_unlock(&b->sched_lock);
  return NULL;
}

/* Queues c on s. Caller holds sched_lock. */
static void issue_locked(md_backend *b, md_stream *s, cmd *c) {
  c->next = NULL;
  if (!s->queued) {   /* an idle stream's work starts no earlier than the device's time now */
    uint64_t now = atomic_load_explicit(&b->clock_ns, memory_order_relaxed);
    if (s->clock_ns < now) s->clock_ns = now;
  }
  c->seq = ++b->next_seq;
  c->index = ++s->issued;
  c->batch = 0;
  if (b->has_seed) b->held++;
  else c->batch = 1;
  if (s->tail) s->tail->next = c;
  else s->head = c;
  s->tail = c;
  s->queued++;
  /* Unseeded, a worker is woken for a stream that becomes runnable: one not running, with no
   * command queued before this one (else a worker already came or comes for it). */
  if (!b->has_seed && !s->running && s->queued == 1) wake_for_locked(b, s);
}

md_status md__sim_issue(md_backend *b, md_stream *s, cmd *c, char *err, size_t errlen) {
  pthread_mutex_lock(&b->sched_lock);
  if (b->stopping) {
    pthread_mutex_unlock(&b->sched_lock);
    free(c);
    return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: the device is closing");
  }
  issue_locked(b, s, c);
  pthread_mutex_unlock(&b->sched_lock);
  return MD_NONE;
}

/* ---- streams and events ----------------------------------------------------------------- */

md_status md__sim_stream_create(md_backend *b, md_stream **out) {
  if (!sim_of(b) || !out) return MD_INVALID_ARGUMENT;
  *out = NULL;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  md_stream *s = calloc(1, sizeof *s);
  if (!s) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  s->dev = b;
  pthread_mutex_lock(&b->sched_lock);
  if (b->stopping) {
    pthread_mutex_unlock(&b->sched_lock);
    free(s);
    return MD_DEVICE_UNAVAILABLE;
  }
  unsigned want = b->has_seed ? 1u : SIM_MAX_WORKERS;
  while (b->n_workers < want && pthread_create(&b->workers[b->n_workers], NULL, worker_main, b) == 0)
    b->n_workers++;
  if (!b->n_workers) {
    pthread_mutex_unlock(&b->sched_lock);
    free(s);
    return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  }
  s->id = ++b->next_stream_id;
  s->prev = b->streams_tail;
  if (s->prev) s->prev->next = s;
  else b->streams = s;
  b->streams_tail = s;
  pthread_mutex_unlock(&b->sched_lock);
  *out = s;
  return MD_NONE;
}

/* Waits until everything issued on s (NULL: on every stream) has run. Caller holds sched_lock. */
static void drain_locked(md_backend *b, md_stream *s) {
  flush_locked(b);
  for (;;) {
    int pending = 0;
    if (s) pending = s->queued != 0;
    else
      for (md_stream *t = b->streams; t && !pending; t = t->next) pending = t->queued != 0;
    if (!pending || b->stopping) return;
    pthread_cond_wait(&b->done_cond, &b->sched_lock);
  }
}

void md__sim_stream_destroy(md_backend *b, md_stream *s) {
  if (!sim_of(b) || !s) return;
  pthread_mutex_lock(&b->sched_lock);
  drain_locked(b, s);   /* a worker may still hold it */
  while (s->running) pthread_cond_wait(&b->done_cond, &b->sched_lock);
  if (s->prev) s->prev->next = s->next;
  else b->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  else b->streams_tail = s->prev;
  for (cmd *c = s->head, *n; c; c = n) {   /* only when stopping */
    n = c->next;
    free(c);
  }
  pthread_mutex_unlock(&b->sched_lock);
  free(s);
}

md_status md__sim_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: stream_sync: not a sim device");
  md_status st = MD_NONE;
  pthread_mutex_lock(&b->sched_lock);
  drain_locked(b, s);
  if (s) {
    st = s->error;
    if (st != MD_NONE) md_backend_fail(err, errlen, st, "%s", s->message);
    s->error = MD_NONE;
    s->message[0] = '\0';
  }
  pthread_mutex_unlock(&b->sched_lock);
  if (st != MD_NONE) return st;
  if (is_lost(b)) return md__sim_lost_status(b, "stream_sync", err, errlen);
  return MD_NONE;
}

void *md__sim_stream_native(md_backend *b, md_stream *s) { return NULL; }

md_status md__sim_event_create(md_backend *b, md_event **out) {
  if (!sim_of(b) || !out) return MD_INVALID_ARGUMENT;
  *out = NULL;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  md_event *e = calloc(1, sizeof *e);
  if (!e) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  e->dev = b;
  pthread_mutex_lock(&b->objs_lock);
  e->next = b->events;
  if (e->next) e->next->prev = e;
  b->events = e;
  pthread_mutex_unlock(&b->objs_lock);
  *out = e;
  return MD_NONE;
}

void md__sim_event_destroy(md_backend *b, md_event *e) {
  if (!sim_of(b) || !e) return;
  pthread_mutex_lock(&b->sched_lock);   /* a queued marker still points at it: let it run */
  flush_locked(b);
  while (e->reached < e->recorded && !b->stopping) pthread_cond_wait(&b->done_cond, &b->sched_lock);
  pthread_mutex_unlock(&b->sched_lock);
  pthread_mutex_lock(&b->objs_lock);
  if (e->prev) e->prev->next = e->next;
  else b->events = e->next;
  if (e->next) e->next->prev = e->prev;
  pthread_mutex_unlock(&b->objs_lock);
  free(e);
}

md_status md__sim_event_record(md_backend *b, md_event *e, md_stream *s) {
  if (!sim_of(b) || !e || e->dev != b) return MD_INVALID_ARGUMENT;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  if (!s) {   /* everything issued synchronously has run: reached now */
    pthread_mutex_lock(&b->sched_lock);
    e->reached = ++e->recorded;
    pthread_mutex_unlock(&b->sched_lock);
    atomic_store_explicit(&e->reached_ns, atomic_load_explicit(&b->clock_ns, memory_order_relaxed) + 1,
                          memory_order_release);
    return MD_NONE;
  }
  cmd *c = calloc(1, sizeof *c);
  if (!c) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  c->kind = CMD_EVENT;
  c->ev = e;
  pthread_mutex_lock(&b->sched_lock);
  if (b->stopping) {
    pthread_mutex_unlock(&b->sched_lock);
    free(c);
    return MD_DEVICE_UNAVAILABLE;
  }
  c->gen = ++e->recorded;
  issue_locked(b, s, c);
  pthread_mutex_unlock(&b->sched_lock);
  return MD_NONE;
}

md_status md__sim_event_wait(md_backend *b, md_event *e, uint64_t timeout_ns) {
  if (!sim_of(b) || !e || e->dev != b) return MD_INVALID_ARGUMENT;
  struct timespec dl;
  if (timeout_ns != UINT64_MAX) {
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + timeout_ns % 1000000000ull;
    uint64_t sec = (uint64_t)dl.tv_sec + timeout_ns / 1000000000ull + ns / 1000000000ull;
    dl.tv_sec = sec > (uint64_t)INT64_MAX ? INT64_MAX : (time_t)sec;
    dl.tv_nsec = (long)(ns % 1000000000ull);
  }
  md_status st = MD_NONE;
  pthread_mutex_lock(&b->sched_lock);
  flush_locked(b);
  while (e->reached < e->recorded && !b->stopping) {
    if (timeout_ns == UINT64_MAX) {
      pthread_cond_wait(&b->done_cond, &b->sched_lock);
    } else if (timeout_ns == 0 || pthread_cond_timedwait(&b->done_cond, &b->sched_lock, &dl) == ETIMEDOUT) {
      if (e->reached < e->recorded) st = MD_MISSED_DEADLINE_TRANSIENT;
      break;
    }
  }
  pthread_mutex_unlock(&b->sched_lock);
  if (st == MD_NONE && is_lost(b)) st = MD_DEVICE_UNAVAILABLE;
  return st;
}

uint64_t md_sim_event_time_ns(md_backend *b, md_event *e) {
  if (!sim_of(b) || !e) return 0;
  uint64_t r = atomic_load_explicit(&e->reached_ns, memory_order_acquire);
  return r ? r - 1 : 0;
}

size_t md_sim_order(md_backend *b, md_sim_order_entry *out, size_t max, uint64_t *hash) {
  if (hash) *hash = 0;
  if (!sim_of(b)) return 0;
  pthread_mutex_lock(&b->sched_lock);
  uint64_t n = b->order_count, first = n > SIM_ORDER_LOG ? n - SIM_ORDER_LOG : 0;
  size_t k = 0;
  for (uint64_t i = first; i < n && k < max; i++) out[k++] = b->order_log[i % SIM_ORDER_LOG];
  if (hash) *hash = b->order_hash;
  pthread_mutex_unlock(&b->sched_lock);
  return (size_t)n;
}

