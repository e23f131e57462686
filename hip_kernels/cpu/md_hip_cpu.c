/* md_hip_cpu.c - the CPU execution layer's runtime: device memory, streams (a work queue and a
 * thread each), events, copies, launches, the last-error model and error injection (see
 * md_hip_cpu.h; kernels run in md_hip_cpu_exec.c).
 *
 * Locking: one mutex (G.lock) guards the allocation tables, the injection plans, the stream
 * list and the launch log; each stream and each event has its own mutex and condition
 * variables for its queue and progress. G.lock is never held while waiting for a stream. */
#include "md_hip_cpu_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_MAGIC 0x53544d48u /* "HMTS" */
#define EVENT_MAGIC 0x56454d48u  /* "HMEV" */
#define DEVICE_ALIGN 256u
#define FRESH_BYTE 0xDB          /* what new device memory holds: not zero */
#define PINNED_MAX ((size_t)64 << 30) /* the largest hipHostMalloc served */
#define LOG_LEN 64

/* ---- state ---- */

typedef struct range {
  uintptr_t base;
  size_t size;
} range;

typedef struct ranges { /* sorted by base, non-overlapping */
  range *v;
  size_t n, cap;
} ranges;

typedef enum op_kind { OP_COPY, OP_SET, OP_KERNEL, OP_RECORD, OP_WAIT } op_kind;

typedef struct op {
  struct op *next;
  op_kind kind;
  uint64_t seq;
  union {
    struct { void *dst; const void *src; size_t n; } copy;
    struct { void *dst; int value; size_t n; } set;
    struct {
      char name[48];
      uint32_t grid[3], block[3];
      void (*body)(void *);
      void (*destroy)(void *);
      void *ctx;
    } kernel;
    struct { hipEvent_t e; uint64_t seq; } ev;
  } u;
} op;

struct md__hipcpu_stream {
  uint32_t magic;
  unsigned flags;
  pthread_mutex_t lock;
  pthread_cond_t work;     /* an operation was queued, a hold released, quit */
  pthread_cond_t done;     /* done_seq advanced */
  op *head, *tail;
  uint64_t enq_seq, done_seq;
  int held, quit;
  int refs;                /* the list's reference + waiters in device_sync (under G.lock) */
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

static struct {
  pthread_mutex_t lock;
  ranges dev, host;
  ranges reg;                        /* hipHostRegister'd host ranges */
  uint64_t mem_total, mem_used;
  struct { uint64_t nth; hipError_t e; } plan[MD_HIPCPU_SITES];
  struct md__hipcpu_stream *streams; /* every live stream, the NULL stream's included */
  struct md__hipcpu_stream *null_stream;
  md_hipcpu_launch log[LOG_LEN];
  unsigned log_next, log_n;
  char fault[256];
  int dry_run;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .mem_total = UINT64_C(4) << 30};

static atomic_int sticky;                 /* the device's fatal error, 0 while it works */
static atomic_uint_fast64_t n_launches, n_blocks, n_threads, n_barriers, n_streams, n_events, n_reg_copies;
static __thread hipError_t last_err;

/* ---- errors ---- */

int md_hipcpu_is_fatal(hipError_t e) {
  switch (e) {
  case hipErrorIllegalAddress:
  case hipErrorLaunchTimeOut:
  case hipErrorAssert:
  case hipErrorHardwareStackError:
  case hipErrorIllegalInstruction:
  case hipErrorMisalignedAddress:
  case hipErrorInvalidAddressSpace:
  case hipErrorInvalidPc:
  case hipErrorLaunchFailure:
  case hipErrorECCNotCorrectable:
  case hipErrorNoDevice:
  case hipErrorInsufficientDriver:
  case hipErrorDeinitialized:
    return 1;
  default:
    return 0;
  }
}

/* Records e (not success) as the calling thread's last error; returns it. */
static hipError_t rec(hipError_t e) {
  if (e != hipSuccess) last_err = e;
  return e;
}

static void lose(hipError_t e) {
  int none = 0;
  atomic_compare_exchange_strong(&sticky, &none, (int)e);
}

static hipError_t sticky_error(void) {
  return (hipError_t)atomic_load_explicit(&sticky, memory_order_acquire);
}

/* The injected error of the next call at site, or success. */
static hipError_t plan_take(md_hipcpu_site site) {
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&G.lock);
  if (G.plan[site].nth && --G.plan[site].nth == 0) e = G.plan[site].e;
  pthread_mutex_unlock(&G.lock);
  return e;
}

/* The start of every call at a site: the device's sticky error, else an injected one (a fatal
 * injected error loses the device). Recorded as the last error. */
static hipError_t enter(md_hipcpu_site site) {
  hipError_t e = sticky_error();
  if (e != hipSuccess) return rec(e);
  if (site < MD_HIPCPU_SITES && (e = plan_take(site)) != hipSuccess) {
    if (md_hipcpu_is_fatal(e)) lose(e);
    return rec(e);
  }
  return hipSuccess;
}

/* Thread-safe (the calling thread's error): the sticky error if any (never cleared), else the
 * last error recorded on this thread, which it clears. */
hipError_t hipGetLastError(void) {
  hipError_t s = sticky_error();
  if (s != hipSuccess) return s;
  hipError_t e = last_err;
  last_err = hipSuccess;
  return e;
}

/* As hipGetLastError, without clearing. */
hipError_t hipPeekAtLastError(void) {
  hipError_t s = sticky_error();
  return s != hipSuccess ? s : last_err;
}

/* Thread-safe; static strings ("hipErrorUnknown" for a value not in the enum). */
const char *hipGetErrorName(hipError_t e) {
  switch (e) {
#define N(x) \
  case x:    \
    return #x;
    N(hipSuccess) N(hipErrorInvalidValue) N(hipErrorOutOfMemory) N(hipErrorNotInitialized)
    N(hipErrorDeinitialized) N(hipErrorInvalidConfiguration) N(hipErrorInsufficientDriver)
    N(hipErrorInvalidDeviceFunction) N(hipErrorNoDevice) N(hipErrorInvalidDevice)
    N(hipErrorECCNotCorrectable) N(hipErrorInvalidHandle) N(hipErrorNotReady) N(hipErrorIllegalAddress)
    N(hipErrorLaunchOutOfResources) N(hipErrorLaunchTimeOut) N(hipErrorAssert)
    N(hipErrorHardwareStackError) N(hipErrorIllegalInstruction) N(hipErrorMisalignedAddress)
    N(hipErrorInvalidAddressSpace) N(hipErrorInvalidPc) N(hipErrorLaunchFailure)
    N(hipErrorHostMemoryAlreadyRegistered) N(hipErrorHostMemoryNotRegistered) N(hipErrorNotSupported) N(hipErrorUnknown)
#undef N
  }
  return "hipErrorUnknown";
}

/* Thread-safe; static strings, worded as the CUDA runtime words them. */
const char *hipGetErrorString(hipError_t e) {
  switch (e) {
  case hipSuccess: return "no error";
  case hipErrorInvalidValue: return "invalid argument";
  case hipErrorOutOfMemory: return "out of memory";
  case hipErrorNotInitialized: return "initialization error";
  case hipErrorDeinitialized: return "driver shutting down";
  case hipErrorInvalidConfiguration: return "invalid configuration argument";
  case hipErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
  case hipErrorInvalidDeviceFunction: return "invalid device function";
  case hipErrorNoDevice: return "no CUDA-capable device is detected";
  case hipErrorInvalidDevice: return "invalid device ordinal";
  case hipErrorECCNotCorrectable: return "uncorrectable ECC error encountered";
  case hipErrorInvalidHandle: return "invalid resource handle";
  case hipErrorNotReady: return "device not ready";
  case hipErrorIllegalAddress: return "an illegal memory access was encountered";
  case hipErrorLaunchOutOfResources: return "too many resources requested for launch";
  case hipErrorLaunchTimeOut: return "the launch timed out and was terminated";
  case hipErrorAssert: return "device-side assert triggered";
  case hipErrorHardwareStackError: return "hardware stack error";
  case hipErrorIllegalInstruction: return "an illegal instruction was encountered";
  case hipErrorMisalignedAddress: return "misaligned address";
  case hipErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
  case hipErrorInvalidPc: return "invalid program counter";
  case hipErrorLaunchFailure: return "unspecified launch failure";
  case hipErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
  case hipErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
  case hipErrorNotSupported: return "operation not supported";
  case hipErrorUnknown: return "unknown error";
  }
  return "unknown error";
}

/* ---- allocation tables ---- */

/* Index of the first range with base > p. */
static size_t ranges_upper(const ranges *r, uintptr_t p) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The range holding [p, p + n) entirely, or NULL. */
static const range *ranges_find(const ranges *r, const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  size_t i = ranges_upper(r, a);
  if (i == 0) return NULL;
  const range *g = &r->v[i - 1];
  if (a - g->base >= g->size || n > g->size - (a - g->base)) return NULL;
  return g;
}

static int ranges_add(ranges *r, void *p, size_t n) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    range *v = realloc(r->v, cap * sizeof *v);
    if (!v) return -1;
    r->v = v;
    r->cap = cap;
  }
  size_t i = ranges_upper(r, (uintptr_t)p);
  memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
  r->v[i] = (range){(uintptr_t)p, n};
  r->n++;
  return 0;
}

/* Removes the range starting exactly at p; its size, or 0 if there is none. */
static size_t ranges_del(ranges *r, void *p) {
  size_t i = ranges_upper(r, (uintptr_t)p);
  if (i == 0 || r->v[i - 1].base != (uintptr_t)p) return 0;
  size_t n = r->v[i - 1].size;
  memmove(&r->v[i - 1], &r->v[i], (r->n - i) * sizeof *r->v);
  r->n--;
  if (r->n == 0) { /* the tables empty out between tests: give the memory back */
    free(r->v);
    r->v = NULL;
    r->cap = 0;
  }
  return n;
}

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
    hipError_t e = dead ? hipSuccess : plan_take(MD_HIPCPU_KERNEL);
    if (e != hipSuccess) {
      lose(e); /* a kernel's error is the device's: sticky, seen at the next synchronization */
    } else if (!dead) {
      char msg[256];
      uint64_t b = 0, t = 0, r = 0;
      if (md__hipcpu_exec(o->u.kernel.name, o->u.kernel.grid, o->u.kernel.block, o->u.kernel.body,
                          o->u.kernel.ctx, &b, &t, &r, msg, sizeof msg) != 0) {
        fprintf(stderr, "hipcpu: kernel fault: %s\n", msg);
        pthread_mutex_lock(&G.lock);
        snprintf(G.fault, sizeof G.fault, "%s", msg);
        pthread_mutex_unlock(&G.lock);
        lose(hipErrorLaunchFailure);
      }
      atomic_fetch_add(&n_blocks, b);
      atomic_fetch_add(&n_threads, t);
      atomic_fetch_add(&n_barriers, r);
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

static void stream_unref_locked(hipStream_t s) { /* G.lock held */
  if (--s->refs > 0) return;
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  s->magic = 0;
  free(s);
}

/* The stream a call means: NULL is the NULL stream (made at its first use). NULL result:
 * an invalid handle or no memory for the NULL stream (e says which). */
static hipStream_t stream_of(hipStream_t s, hipError_t *e) {
  if (s) {
    if (s->magic != STREAM_MAGIC) {
      *e = hipErrorInvalidHandle;
      return NULL;
    }
    return s;
  }
  pthread_mutex_lock(&G.lock);
  if (!G.null_stream && (G.null_stream = stream_new(hipStreamDefault))) {
    G.null_stream->next_all = G.streams;
    G.streams = G.null_stream;
  }
  s = G.null_stream;
  pthread_mutex_unlock(&G.lock);
  if (!s) *e = hipErrorOutOfMemory;
  return s;
}

/* Queues o on s (the stream's thread frees it once run); returns its sequence number. */
static uint64_t enqueue(hipStream_t s, op *o) {
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

static void stream_wait(hipStream_t s, uint64_t seq) {
  pthread_mutex_lock(&s->lock);
  while (s->done_seq < seq) pthread_cond_wait(&s->done, &s->lock);
  pthread_mutex_unlock(&s->lock);
}

/* Waits for the work every stream had queued when called (hipDeviceSynchronize, and the
 * implicit synchronization of hipFree / hipHostFree). hipErrorOutOfMemory when the host has no
 * memory for the list of streams. */
static hipError_t device_sync(void) {
  pthread_mutex_lock(&G.lock);
  size_t n = 0;
  for (hipStream_t s = G.streams; s; s = s->next_all) n++;
  hipStream_t *v = malloc((n ? n : 1) * sizeof *v);
  uint64_t *seq = malloc((n ? n : 1) * sizeof *seq);
  if (!v || !seq) {
    pthread_mutex_unlock(&G.lock);
    free(v);
    free(seq);
    return hipErrorOutOfMemory;
  }
  size_t i = 0;
  for (hipStream_t s = G.streams; s; s = s->next_all, i++) {
    v[i] = s;
    s->refs++; /* the stream outlives a concurrent hipStreamDestroy until we are done */
    pthread_mutex_lock(&s->lock);
    seq[i] = s->enq_seq;
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&G.lock);
  for (i = 0; i < n; i++) stream_wait(v[i], seq[i]);
  pthread_mutex_lock(&G.lock);
  for (i = 0; i < n; i++) stream_unref_locked(v[i]);
  pthread_mutex_unlock(&G.lock);
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
  pthread_mutex_lock(&G.lock);
  s->next_all = G.streams;
  G.streams = s;
  pthread_mutex_unlock(&G.lock);
  atomic_fetch_add(&n_streams, 1);
  *out = s;
  return hipSuccess;
}

/* Waits for the stream's work (the runtimes release it once done; waiting is the same to the
 * caller), then ends its thread. A lost device still releases it, and returns the error. */
hipError_t hipStreamDestroy(hipStream_t s) {
  if (!s || s->magic != STREAM_MAGIC) return rec(hipErrorInvalidHandle);
  pthread_mutex_lock(&G.lock);
  hipStream_t *pp = &G.streams;
  while (*pp && *pp != s) pp = &(*pp)->next_all;
  if (*pp) *pp = s->next_all;
  pthread_mutex_unlock(&G.lock);
  pthread_mutex_lock(&s->lock);
  s->quit = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&G.lock);
  stream_unref_locked(s);
  pthread_mutex_unlock(&G.lock);
  atomic_fetch_sub(&n_streams, 1);
  return rec(sticky_error());
}

/* Thread-safe. Waits for what s had queued when called; then the sticky error, if the work
 * (or anything else) lost the device. */
hipError_t hipStreamSynchronize(hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_SYNC);
  if (e != hipSuccess) return e;
  if (!(s = stream_of(s, &e))) return rec(e);
  pthread_mutex_lock(&s->lock);
  uint64_t seq = s->enq_seq;
  pthread_mutex_unlock(&s->lock);
  stream_wait(s, seq);
  return rec(sticky_error()); /* what the stream's work did to the device */
}

/* Thread-safe. Waits for what every stream had queued when called. */
hipError_t hipDeviceSynchronize(void) {
  hipError_t e = enter(MD_HIPCPU_SYNC);
  if (e != hipSuccess) return e;
  if ((e = device_sync()) != hipSuccess) return rec(e);
  return rec(sticky_error());
}

/* Thread-safe. A held stream's destroy or synchronization waits for the release. */
void md_hipcpu_stream_hold(hipStream_t s, int hold) {
  hipError_t e;
  if (!(s = stream_of(s, &e))) return;
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
  atomic_fetch_add(&n_events, 1);
  *out = v;
  return hipSuccess;
}

hipError_t hipEventCreate(hipEvent_t *out) { return hipEventCreateWithFlags(out, hipEventDefault); }

/* Thread-safe. The handle dies now; the event is released once no queued record or wait
 * refers to it. */
hipError_t hipEventDestroy(hipEvent_t e) {
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  atomic_fetch_sub(&n_events, 1);
  event_unref(e);
  return rec(sticky_error());
}

/* Thread-safe. Queues a record of e on s; e is complete once s reaches it (its latest record
 * decides). */
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  hipError_t r = enter(MD_HIPCPU_EVENT);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  if (!(s = stream_of(s, &r))) return rec(r);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&e->lock);
  o->kind = OP_RECORD;
  o->u.ev.e = e;
  o->u.ev.seq = ++e->recorded;
  e->refs++;
  pthread_mutex_unlock(&e->lock);
  enqueue(s, o);
  return hipSuccess;
}

/* Thread-safe. What s queues next waits for e's latest record at this call (none: no wait). */
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags) {
  hipError_t r = enter(MD_HIPCPU_SITES);
  if (r != hipSuccess) return r;
  if (!e || e->magic != EVENT_MAGIC) return rec(hipErrorInvalidHandle);
  if (flags) return rec(hipErrorInvalidValue);
  if (!(s = stream_of(s, &r))) return rec(r);
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
  enqueue(s, o);
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

/* ---- device ---- */

hipError_t hipGetDeviceCount(int *count) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!count) return rec(hipErrorInvalidValue);
  *count = 1;
  return hipSuccess;
}

/* Thread-safe. Device 0 only (hipErrorInvalidDevice). */
hipError_t hipSetDevice(int device) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  return device == 0 ? hipSuccess : rec(hipErrorInvalidDevice);
}

/* Thread-safe. Always device 0. */
hipError_t hipGetDevice(int *device) {
  hipError_t e = enter(MD_HIPCPU_SITES);
  if (e != hipSuccess) return e;
  if (!device) return rec(hipErrorInvalidValue);
  *device = 0;
  return hipSuccess;
}

/* Thread-safe. Writes the NUL-terminated name, truncated to len. */
hipError_t hipDeviceGetName(char *name, int len, int device) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!name || len <= 0) return rec(hipErrorInvalidValue);
  if (device != 0) return rec(hipErrorInvalidDevice);
  snprintf(name, (size_t)len, "%s", "hipcpu (CPU execution layer, test double)");
  return hipSuccess;
}

/* Thread-safe. The three attributes md_hip_compat.h maps. */
hipError_t hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device) {
  hipError_t e = enter(MD_HIPCPU_SITES);
  if (e != hipSuccess) return e;
  if (!value) return rec(hipErrorInvalidValue);
  if (device != 0) return rec(hipErrorInvalidDevice);
  switch (attr) {
  case hipDeviceAttributeMaxThreadsPerBlock: *value = 1024; return hipSuccess;
  case hipDeviceAttributeMaxGridDimX: *value = 2147483647; return hipSuccess;
  case hipDeviceAttributeMultiprocessorCount: *value = 1; return hipSuccess;
  }
  return rec(hipErrorInvalidValue);
}

/* Thread-safe. The capacity and what live allocations leave of it. */
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!free_bytes || !total_bytes) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&G.lock);
  *total_bytes = (size_t)G.mem_total;
  *free_bytes = G.mem_used < G.mem_total ? (size_t)(G.mem_total - G.mem_used) : 0;
  pthread_mutex_unlock(&G.lock);
  return hipSuccess;
}

/* Thread-safe; live allocations stay (free may read 0 until they go). */
void md_hipcpu_set_memory(uint64_t bytes) {
  pthread_mutex_lock(&G.lock);
  G.mem_total = bytes;
  pthread_mutex_unlock(&G.lock);
}

/* ---- memory ---- */

hipError_t hipMalloc(void **ptr, size_t size) {
  hipError_t e = enter(MD_HIPCPU_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr) return rec(hipErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  const size_t rounded = (size + DEVICE_ALIGN - 1) / DEVICE_ALIGN * DEVICE_ALIGN;
  if (rounded < size) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&G.lock);
  int fits = G.mem_used <= G.mem_total && rounded <= G.mem_total - G.mem_used;
  if (fits) G.mem_used += rounded; /* claimed before allocating, so racing callers respect it */
  pthread_mutex_unlock(&G.lock);
  if (!fits) return rec(hipErrorOutOfMemory);
  void *p = aligned_alloc(DEVICE_ALIGN, rounded);
  int ok = p != NULL;
  if (ok) memset(p, FRESH_BYTE, rounded);
  pthread_mutex_lock(&G.lock);
  if (ok && ranges_add(&G.dev, p, rounded) != 0) ok = 0;
  if (!ok) G.mem_used -= rounded;
  pthread_mutex_unlock(&G.lock);
  if (!ok) {
    free(p);
    return rec(hipErrorOutOfMemory);
  }
  *ptr = p;
  return hipSuccess;
}

/* Synchronizes the device first (as the runtimes do), so no queued work uses what it frees. */
hipError_t hipFree(void *ptr) {
  if (!ptr) return rec(sticky_error());
  hipError_t e = device_sync();
  if (e != hipSuccess) return rec(e);
  pthread_mutex_lock(&G.lock);
  size_t n = ranges_del(&G.dev, ptr);
  if (n) G.mem_used -= n;
  pthread_mutex_unlock(&G.lock);
  if (!n) return rec(hipErrorInvalidValue);
  free(ptr);
  return rec(sticky_error());
}

/* Thread-safe. "Pinned" host memory owned by the caller until hipHostFree (up to PINNED_MAX). */
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_HOST_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr || flags != hipHostMallocDefault) return rec(hipErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  /* Pinned memory is bounded like the device's (the host's allocator is not asked for absurd
   * sizes: under ASan that aborts instead of failing). */
  const size_t page = 4096, rounded = (size + page - 1) / page * page;
  void *p = rounded >= size && rounded <= PINNED_MAX ? aligned_alloc(page, rounded) : NULL;
  pthread_mutex_lock(&G.lock);
  int ok = p && ranges_add(&G.host, p, size) == 0;
  pthread_mutex_unlock(&G.lock);
  if (!ok) {
    free(p);
    return rec(hipErrorOutOfMemory);
  }
  *ptr = p;
  return hipSuccess;
}

/* Thread-safe. As hipFree, for hipHostMalloc's memory. */
hipError_t hipHostFree(void *ptr) {
  if (!ptr) return rec(sticky_error());
  hipError_t e = device_sync();
  if (e != hipSuccess) return rec(e);
  pthread_mutex_lock(&G.lock);
  size_t n = ranges_del(&G.host, ptr);
  pthread_mutex_unlock(&G.lock);
  if (!n) return rec(hipErrorInvalidValue);
  free(ptr);
  return rec(sticky_error());
}

/* 1 when [p, p + n) lies inside one live device allocation. */
static int is_device(const void *p, size_t n) {
  pthread_mutex_lock(&G.lock);
  int r = ranges_find(&G.dev, p, n) != NULL;
  pthread_mutex_unlock(&G.lock);
  return r;
}

/* 1 when [p, p + n) lies inside one hipHostMalloc allocation, 2 inside one registered range. */
static int is_pinned(const void *p, size_t n) {
  pthread_mutex_lock(&G.lock);
  int r = ranges_find(&G.host, p, n) != NULL ? 1 : ranges_find(&G.reg, p, n) != NULL ? 2 : 0;
  pthread_mutex_unlock(&G.lock);
  return r;
}

/* Thread-safe. Page-locks the caller's host range [ptr, ptr + size) (here: remembers it), so
 * that async copies from and to it are asynchronous as with hipHostMalloc'd memory. A range
 * overlapping one registered already: hipErrorHostMemoryAlreadyRegistered. */
hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_HOST_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr || size == 0 || flags != hipHostRegisterDefault) return rec(hipErrorInvalidValue);
  uintptr_t a = (uintptr_t)ptr;
  if (size > UINTPTR_MAX - a) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&G.lock);
  int clash = 0;
  for (size_t i = 0; i < G.reg.n && !clash; i++)
    clash = a < G.reg.v[i].base + G.reg.v[i].size && G.reg.v[i].base < a + size;
  int ok = !clash && ranges_add(&G.reg, ptr, size) == 0;
  pthread_mutex_unlock(&G.lock);
  if (clash) return rec(hipErrorHostMemoryAlreadyRegistered);
  return ok ? hipSuccess : rec(hipErrorOutOfMemory);
}

/* Thread-safe. Forgets the range hipHostRegister registered at ptr (its start):
 * hipErrorHostMemoryNotRegistered for any other pointer. */
hipError_t hipHostUnregister(void *ptr) {
  if (!ptr) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&G.lock);
  size_t n = ranges_del(&G.reg, ptr);
  pthread_mutex_unlock(&G.lock);
  return n ? hipSuccess : rec(hipErrorHostMemoryNotRegistered);
}

/* Thread-safe. Queues a copy on s; device sides must lie inside one live allocation
 * (hipErrorInvalidValue). With pageable host memory it returns once the copy is done. */
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_COPY);
  if (e != hipSuccess) return e;
  if (n == 0) return hipSuccess;
  if (!dst || !src) return rec(hipErrorInvalidValue);
  const int dd = is_device(dst, n), sd = is_device(src, n);
  if (kind == hipMemcpyDefault) kind = dd ? (sd ? hipMemcpyDeviceToDevice : hipMemcpyHostToDevice)
                                          : (sd ? hipMemcpyDeviceToHost : hipMemcpyHostToHost);
  int ok;
  switch (kind) {
  case hipMemcpyHostToDevice: ok = dd; break;
  case hipMemcpyDeviceToHost: ok = sd; break;
  case hipMemcpyDeviceToDevice: ok = dd && sd; break;
  case hipMemcpyHostToHost: ok = 1; break;
  default: ok = 0; break;
  }
  if (!ok) return rec(hipErrorInvalidValue);
  if (!(s = stream_of(s, &e))) return rec(e);
  /* Pageable host memory: the copy is done when the call returns (the runtimes stage it). */
  const int pin = kind == hipMemcpyHostToDevice ? is_pinned(src, n) : kind == hipMemcpyDeviceToHost ? is_pinned(dst, n) : 0;
  const int pageable = (kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToHost) ? !pin : kind == hipMemcpyHostToHost;
  if (pin == 2) atomic_fetch_add(&n_reg_copies, 1);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  o->kind = OP_COPY;
  o->u.copy.dst = dst;
  o->u.copy.src = src;
  o->u.copy.n = n;
  uint64_t seq = enqueue(s, o);
  if (pageable) stream_wait(s, seq);
  return hipSuccess;
}

/* Thread-safe. A copy on the NULL stream, then its synchronization. */
hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind) {
  hipError_t e = hipMemcpyAsync(dst, src, n, kind, NULL);
  if (e != hipSuccess) return e;
  return hipStreamSynchronize(NULL);
}

/* Thread-safe. Queues a memset of device memory on s (checked as copies are). */
hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_COPY);
  if (e != hipSuccess) return e;
  if (n == 0) return hipSuccess;
  if (!dst || !is_device(dst, n)) return rec(hipErrorInvalidValue);
  if (!(s = stream_of(s, &e))) return rec(e);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  o->kind = OP_SET;
  o->u.set.dst = dst;
  o->u.set.value = value;
  o->u.set.n = n;
  enqueue(s, o);
  return hipSuccess;
}

/* ---- launches ---- */

/* Thread-safe (see md_hip_cpu.h). Checks, logs and queues a launch; the error, if any, is the
 * calling thread's last error; ctx is destroyed once run or refused. */
void md__hipcpu_launch(const char *name, const uint32_t grid[3], const uint32_t block[3], size_t shmem,
                       hipStream_t s, void (*body)(void *), void (*destroy)(void *), void *ctx) {
  hipError_t e = enter(MD_HIPCPU_LAUNCH);
  const uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (e == hipSuccess && !body) e = rec(hipErrorLaunchOutOfResources); /* no memory for the arguments */
  if (e == hipSuccess &&
      (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > INT32_MAX || grid[1] > 65535 ||
       grid[2] > 65535 || threads == 0 || threads > 1024 || block[0] > 1024 || block[1] > 1024 ||
       block[2] > 64 || shmem > 48u * 1024))
    e = rec(hipErrorInvalidConfiguration);
  if (e == hipSuccess && !(s = stream_of(s, &e))) rec(e);
  pthread_mutex_lock(&G.lock);
  md_hipcpu_launch *l = &G.log[G.log_next];
  G.log_next = (G.log_next + 1) % LOG_LEN;
  if (G.log_n < LOG_LEN) G.log_n++;
  snprintf(l->kernel, sizeof l->kernel, "%s", name);
  memcpy(l->grid, grid, sizeof l->grid);
  memcpy(l->block, block, sizeof l->block);
  const int dry = G.dry_run;
  pthread_mutex_unlock(&G.lock);
  op *o = e == hipSuccess && !dry ? calloc(1, sizeof *o) : NULL;
  if (e == hipSuccess && !dry && !o) e = rec(hipErrorLaunchOutOfResources);
  if (!o) {
    if (destroy) destroy(ctx);
    return;
  }
  atomic_fetch_add(&n_launches, 1);
  o->kind = OP_KERNEL;
  snprintf(o->u.kernel.name, sizeof o->u.kernel.name, "%s", name);
  memcpy(o->u.kernel.grid, grid, sizeof o->u.kernel.grid);
  memcpy(o->u.kernel.block, block, sizeof o->u.kernel.block);
  o->u.kernel.body = body;
  o->u.kernel.destroy = destroy;
  o->u.kernel.ctx = ctx;
  enqueue(s, o);
}

/* ---- test hooks ---- */

void md_hipcpu_fail(md_hipcpu_site site, uint64_t nth, hipError_t e) {
  if ((unsigned)site >= MD_HIPCPU_SITES) return;
  pthread_mutex_lock(&G.lock);
  G.plan[site].nth = nth;
  G.plan[site].e = e;
  pthread_mutex_unlock(&G.lock);
}

/* Thread-safe; the first fatal error stays the device's. */
void md_hipcpu_lose_device(hipError_t e) { lose(e); }

/* Thread-safe; launches already queued still run. */
void md_hipcpu_set_dry_run(int on) {
  pthread_mutex_lock(&G.lock);
  G.dry_run = on != 0;
  pthread_mutex_unlock(&G.lock);
}

/* Thread-safe; a snapshot (counters of concurrent work may be mid-update). */
void md_hipcpu_stats_get(md_hipcpu_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&G.lock);
  out->device_allocs = G.dev.n;
  out->device_bytes = G.mem_used;
  out->host_allocs = G.host.n;
  out->host_registered = G.reg.n;
  pthread_mutex_unlock(&G.lock);
  out->streams = atomic_load(&n_streams);
  out->events = atomic_load(&n_events);
  out->launches = atomic_load(&n_launches);
  out->blocks = atomic_load(&n_blocks);
  out->threads = atomic_load(&n_threads);
  out->barriers = atomic_load(&n_barriers);
  out->registered_copies = atomic_load(&n_reg_copies);
}

/* Thread-safe. Copies; the log keeps the last LOG_LEN launches of the process. */
int md_hipcpu_launches(md_hipcpu_launch *out, int max) {
  pthread_mutex_lock(&G.lock);
  int n = 0;
  for (; n < max && (unsigned)n < G.log_n; n++)
    out[n] = G.log[(G.log_next + LOG_LEN - 1 - (unsigned)n) % LOG_LEN];
  pthread_mutex_unlock(&G.lock);
  return n;
}

/* Thread-safe. */
void md_hipcpu_launches_clear(void) {
  pthread_mutex_lock(&G.lock);
  G.log_n = 0;
  pthread_mutex_unlock(&G.lock);
}

/* Thread-safe: a copy in the calling thread's buffer, valid until its next call. */
const char *md_hipcpu_fault_message(void) {
  static __thread char copy[256];
  pthread_mutex_lock(&G.lock);
  snprintf(copy, sizeof copy, "%s", G.fault);
  pthread_mutex_unlock(&G.lock);
  return copy;
}
