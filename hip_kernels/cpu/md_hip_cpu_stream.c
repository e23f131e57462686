/* md_hip_cpu_stream.c - the CPU execution layer's streams (a work queue and a thread each; the
 * NULL stream is made at first use) and events (see md_hip_cpu.h). */
#include "md_hip_cpu_rt_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_MAGIC 0x53544d48u /* "HMTS" */
#define EVENT_MAGIC 0x56454d48u  /* "HMEV" */

struct md__hipcpu_stream {
  uint32_t magic;
  unsigned flags;
  pthread_mutex_t lock;
  pthread_cond_t work;     /* an operation was queued, a hold released, quit */
  pthread_cond_t done;     /* done_seq advanced */
  op *head, *tail;
  uint64_t enq_seq, done_seq;
  int held, quit;
  int refs;                /* the list's reference + waiters in md__hipcpu_device_sync (under md__hipcpu_g.lock) */
  pthread_t thread;
  struct md__hipcpu_stream *next_all;
};

struct md__hipcpu_event {
  uint32_t magic;
  unsigned flags;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t recorded, done; /* records made, the latest one completed */
  double t_ms;             /* when the latest completed record completed (CLOCK_MONOTONIC) */
  int refs;                /* the user's + one per queued record or wait */
};

/* ---- streams ---- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void event_unref(hipEvent_t e) {
  pthread_mutex_lock(&e->lock);
  int last = --e->refs == 0;
  pthread_mutex_unlock(&e->lock);
  if (!last) return;
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  e->magic = 0;
  free(e);
}

static void run_op(op *o) {
  const int dead = sticky_error() != hipSuccess; /* a lost device does no more work */
  switch (o->kind) {
  case OP_COPY:
    if (!dead) memcpy(o->u.copy.dst, o->u.copy.src, o->u.copy.n);
    break;
  case OP_SET:
    if (!dead) memset(o->u.set.dst, o->u.set.value, o->u.set.n);
    break;
  case OP_KERNEL: {
    hipError_t e = dead ? hipSuccess : md__hipcpu_plan_take(MD_HIPCPU_KERNEL);
    if (e != hipSuccess) {
      lose(e); /* a kernel's error is the device's: sticky, seen at the next synchronization */
    } else if (!dead) {
      char msg[256];
      uint64_t b = 0, t = 0, r = 0;
      if (md__hipcpu_exec(o->u.kernel.name, o->u.kernel.grid, o->u.kernel.block, o->u.kernel.body,
                          o->u.kernel.ctx, &b, &t, &r, msg, sizeof msg) != 0) {
        fprintf(stderr, "hipcpu: kernel fault: %s\n", msg);
        pthread_mutex_lock(&md__hipcpu_g.lock);
        snprintf(md__hipcpu_g.fault, sizeof md__hipcpu_g.fault, "%s", msg);
        pthread_mutex_unlock(&md__hipcpu_g.lock);
        lose(hipErrorLaunchFailure);
      }
      atomic_fetch_add(&md__hipcpu_n_blocks, b);
      atomic_fetch_add(&md__hipcpu_n_threads, t);
      atomic_fetch_add(&md__hipcpu_n_barriers, r);
    }
    o->u.kernel.destroy(o->u.kernel.ctx);
    break;
  }
  case OP_RECORD: { /* even on a lost device, so nobody waits for it forever */
    hipEvent_t e = o->u.ev.e;
    pthread_mutex_lock(&e->lock);
    if (o->u.ev.seq > e->done) {
      e->done = o->u.ev.seq;
      e->t_ms = now_ms();
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    event_unref(e);
    break;
  }
  case OP_WAIT: {
    hipEvent_t e = o->u.ev.e;
    pthread_mutex_lock(&e->lock);
    while (e->done < o->u.ev.seq) pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
    event_unref(e);
    break;
  }
  }
}

static void *worker(void *arg) {
  hipStream_t s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while ((!s->head || s->held) && !(s->quit && !s->head)) pthread_cond_wait(&s->work, &s->lock);
    op *o = s->head;
    if (!o) break; /* quit, and nothing left */
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    run_op(o);
    pthread_mutex_lock(&s->lock);
    s->done_seq = o->seq;
    pthread_cond_broadcast(&s->done);
    free(o);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static hipStream_t stream_new(unsigned flags) {
  hipStream_t s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = STREAM_MAGIC;
  s->flags = flags;
  s->refs = 1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->done, NULL);
  if (pthread_create(&s->thread, NULL, worker, s) != 0) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    free(s);
    return NULL;
  }
  return s;
}

static void stream_unref_locked(hipStream_t s) { /* md__hipcpu_g.lock held */
  if (--s->refs > 0) return;
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  s->magic = 0;
  free(s);
}

/* The stream a call means: NULL is the NULL stream (made at its first use). NULL result:
 * an invalid handle or no memory for the NULL stream (e says which). */
hipStream_t md__hipcpu_stream_of(hipStream_t s, hipError_t *e) {
  if (s) {
    if (s->magic != STREAM_MAGIC) {
      *e = hipErrorInvalidHandle;
      return NULL;
    }
    return s;
  }
  pthread_mutex_lock(&md__hipcpu_g.lock);
  if (!md__hipcpu_g.null_stream && (md__hipcpu_g.null_stream = stream_new(hipStreamDefault))) {
    md__hipcpu_g.null_stream->next_all = md__hipcpu_g.streams;
    md__hipcpu_g.streams = md__hipcpu_g.null_stream;
  }
  s = md__hipcpu_g.null_stream;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!s) *e = hipErrorOutOfMemory;
  return s;
}

/* Queues o on s (the stream's thread frees it once run); returns its sequence number. */
uint64_t md__hipcpu_enqueue(hipStream_t s, op *o) {
  pthread_mutex_lock(&s->lock);
  const uint64_t seq = o->seq = ++s->enq_seq;
  o->next = NULL;
  if (s->tail) s->tail->next = o;
  else s->head = o;
  s->tail = o;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  return seq;
}

void md__hipcpu_stream_wait(hipStream_t s, uint64_t seq) {
  pthread_mutex_lock(&s->lock);
  while (s->done_seq < seq) pthread_cond_wait(&s->done, &s->lock);
  pthread_mutex_unlock(&s->lock);
}

/* Waits for the work every stream had queued when called (hipDeviceSynchronize, and the
 * implicit synchronization of hipFree / hipHostFree). hipErrorOutOfMemory when the host has no
 * memory for the list of streams. */
hipError_t md__hipcpu_device_sync(void) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  size_t n = 0;
  for (hipStream_t s = md__hipcpu_g.streams; s; s = s->next_all) n++;
  hipStream_t *v = malloc((n ? n : 1) * sizeof *v);
  uint64_t *seq = malloc((n ? n : 1) * sizeof *seq);
  if (!v || !seq) {
    pthread_mutex_unlock(&md__hipcpu_g.lock);
    free(v);
    free(seq);
    return hipErrorOutOfMemory;
  }
  size_t i = 0;
  for (hipStream_t s = md__hipcpu_g.streams; s; s = s->next_all, i++) {
    v[i] = s;
    s->refs++; /* the stream outlives a concurrent hipStreamDestroy until we are done */
    pthread_mutex_lock(&s->lock);
    seq[i] = s->enq_seq;
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  for (i = 0; i < n; i++) md__hipcpu_stream_wait(v[i], seq[i]);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  for (i = 0; i < n; i++) stream_unref_locked(v[i]);
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  free(v);
  free(seq);
  return hipSuccess;
}

/* Thread-safe. A stream and its thread, owned by the caller until hipStreamDestroy. Fails with
 * the sticky or injected error, hipErrorInvalidValue (flags), hipErrorOutOfMemory. */
hipError_t hipStreamCreateWithFlags(hipStream_t *out, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_STREAM);
  if (e != hipSuccess) return e;
  if (!out || flags > hipStreamNonBlocking) return rec(hipErrorInvalidValue);
  hipStream_t s = stream_new(flags);
  if (!s) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  s->next_all = md__hipcpu_g.streams;
  md__hipcpu_g.streams = s;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  atomic_fetch_add(&md__hipcpu_n_streams, 1);
  *out = s;
  return hipSuccess;
}

/* Waits for the stream's work (the runtimes release it once done; waiting is the same to the
 * caller), then ends its thread. A lost device still releases it, and returns the error. */
hipError_t hipStreamDestroy(hipStream_t s) {
  if (!s || s->magic != STREAM_MAGIC) return rec(hipErrorInvalidHandle);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  hipStream_t *pp = &md__hipcpu_g.streams;
  while (*pp && *pp != s) pp = &(*pp)->next_all;
  if (*pp) *pp = s->next_all;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  pthread_mutex_lock(&s->lock);
  s->quit = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  stream_unref_locked(s);
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  atomic_fetch_sub(&md__hipcpu_n_streams, 1);
  return rec(sticky_error());
}

/* Thread-safe. Waits for what s had queued when called; then the sticky error, if the work
 * (or anything else) lost the device. */
hipError_t hipStreamSynchronize(hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_SYNC);
  if (e != hipSuccess) return e;
  if (!(s = md__hipcpu_stream_of(s, &e))) return rec(e);
  pthread_mutex_lock(&s->lock);
  uint64_t seq = s->enq_seq;
  pthread_mutex_unlock(&s->lock);
  md__hipcpu_stream_wait(s, seq);
  return rec(sticky_error()); /* what the stream's work did to the device */
}

/* Thread-safe. Waits for what every stream had queued when called. */
hipError_t hipDeviceSynchronize(void) {
  hipError_t e = enter(MD_HIPCPU_SYNC);
  if (e != hipSuccess) return e;
  if ((e = md__hipcpu_device_sync()) != hipSuccess) return rec(e);
  return rec(sticky_error());
}

/* Thread-safe. A held stream's destroy or synchronization waits for the release. */
void md_hipcpu_stream_hold(hipStream_t s, int hold) {
  hipError_t e;
  if (!(s = md__hipcpu_stream_of(s, &e))) return;
  pthread_mutex_lock(&s->lock);
  s->held = hold != 0;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
}

/* ---- events ---- */

hipError_t hipEventCreateWithFlags(hipEvent_t *out, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_EVENT);
  if (e != hipSuccess) return e;
  if (!out || (flags & ~(hipEventBlockingSync | hipEventDisableTiming))) return rec(hipErrorInvalidValue);
  hipEvent_t v = calloc(1, sizeof *v);
  if (!v) return rec(hipErrorOutOfMemory);
  v->magic = EVENT_MAGIC;
  v->flags = flags;
  v->refs = 1;
  pthread_mutex_init(&v->lock, NULL);
  pthread_cond_init(&v->cond, NULL);
  atomic_fetch_add(&md__hipcpu_n_events, 1);
  *out = v;
  return hipSuccess;
}

hipError_t hipEventCreate(hipEvent_t *out) { return hipEventCreateWithFlags(out, hipEventDefault); }

/* Thread-safe. The handle dies now; the event is released once no queued record or wait
 * refers to it. */
hipError_t hipEventDestroy(hipEvent_t e) {
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  atomic_fetch_sub(&md__hipcpu_n_events, 1);
  event_unref(e);
  return rec(sticky_error());
}

/* Thread-safe. Queues a record of e on s; e is complete once s reaches it (its latest record
 * decides). */
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  hipError_t r = enter(MD_HIPCPU_EVENT);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  if (!(s = md__hipcpu_stream_of(s, &r))) return rec(r);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&e->lock);
  o->kind = OP_RECORD;
  o->u.ev.e = e;
  o->u.ev.seq = ++e->recorded;
  e->refs++;
  pthread_mutex_unlock(&e->lock);
  md__hipcpu_enqueue(s, o);
  return hipSuccess;
}

/* Thread-safe. What s queues next waits for e's latest record at this call (none: no wait). */
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags) {
  hipError_t r = enter(MD_HIPCPU_SITES);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  if (flags) return rec(hipErrorInvalidValue);
  if (!(s = md__hipcpu_stream_of(s, &r))) return rec(r);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&e->lock);
  uint64_t seq = e->recorded;
  if (seq) e->refs++;
  pthread_mutex_unlock(&e->lock);
  if (!seq) { /* never recorded: nothing to wait for */
    free(o);
    return hipSuccess;
  }
  o->kind = OP_WAIT;
  o->u.ev.e = e;
  o->u.ev.seq = seq;
  md__hipcpu_enqueue(s, o);
  return hipSuccess;
}

/* Thread-safe. hipSuccess once e's latest record completed, else hipErrorNotReady (recorded as
 * the last error, as every failing call's). */
hipError_t hipEventQuery(hipEvent_t e) {
  hipError_t r = enter(MD_HIPCPU_SYNC);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  pthread_mutex_lock(&e->lock);
  int ready = e->done >= e->recorded;
  pthread_mutex_unlock(&e->lock);
  return rec(ready ? sticky_error() : hipErrorNotReady);
}

/* Thread-safe. Waits for e's latest record at this call. */
hipError_t hipEventSynchronize(hipEvent_t e) {
  hipError_t r = enter(MD_HIPCPU_SYNC);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  pthread_mutex_lock(&e->lock);
  uint64_t seq = e->recorded;
  while (e->done < seq) pthread_cond_wait(&e->cond, &e->lock);
  pthread_mutex_unlock(&e->lock);
  return rec(sticky_error());
}

/* Thread-safe. Milliseconds between the two events' completions; hipErrorNotReady before,
 * hipErrorInvalidHandle for an event without timing. */
hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop) {
  hipError_t r = enter(MD_HIPCPU_SITES);
  if (r != hipSuccess) return r;
  if (!ms) return rec(hipErrorInvalidValue);
  if (!start || !stop || start->magic != EVENT_MAGIC || stop->magic != EVENT_MAGIC ||
      ((start->flags | stop->flags) & hipEventDisableTiming))
    return rec(hipErrorInvalidHandle);
  double t[2];
  int ready = 1;
  hipEvent_t ev[2] = {start, stop};
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&ev[i]->lock);
    if (!ev[i]->recorded || ev[i]->done < ev[i]->recorded) ready = 0;
    t[i] = ev[i]->t_ms;
    pthread_mutex_unlock(&ev[i]->lock);
  }
  if (!ready) return rec(hipErrorNotReady);
  *ms = (float)(t[1] - t[0]);
  return hipSuccess;
}

