/* sim_backend_int.h - private to the sim backend's files: the device, its streams, events and
 * queued commands, and what the files share. sim_backend.c: open, close, info, stats, the ops
 * table; sim_fault.c: fault plans; sim_copy.c: memory and copies; sim_launch.c: launches;
 * sim_sched.c: the scheduler, streams and events. Helpers of the copy and launch paths are static
 * inline here, so that those paths inline them as they did when the backend was one file. What
 * the device does: md/sim.h; its memory: sim_arena.h. */
#ifndef MD_SIM_BACKEND_INT_H
#define MD_SIM_BACKEND_INT_H

#include "md/sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sim_arena.h"

#define SIM_MAGIC 0x53494d44u               /* "SIMD" */
#define OFF_BITS 40u
#define OFF_MASK ((1ull << OFF_BITS) - 1u)
#define ID_MASK (MD_SIM_DEVPTR_TAG_MASK | (0xFFull << OFF_BITS))
#define MSG_MAX 256u

typedef enum fault_kind { F_ALLOC = 0, F_COPY = 1, F_KERNEL = 2, F_LOST = 3, F_STALL = 4, F_KINDS = 5 } fault_kind;

typedef struct fault {
  fault_kind kind;
  uint64_t n;
} fault;

/* A command queued on a stream: a copy, a kernel launch or an event marker. */
typedef enum cmd_kind { CMD_COPY = 0, CMD_LAUNCH = 1, CMD_EVENT = 2 } cmd_kind;

typedef struct cmd {
  struct cmd *next;
  cmd_kind kind;
  uint64_t seq;                 /* device-wide issue number (unseeded: oldest first) */
  uint64_t index;               /* its number on its stream, from 1 */
  uint64_t batch;               /* seeded: the flush that released it; 0 while held */
  /* CMD_COPY */
  uint8_t *dst;
  const uint8_t *src;
  uint64_t n;
  int overlap;
  /* CMD_LAUNCH: the caller keeps k, call and st valid until the stream is synchronized */
  const md_kernel_def *k;
  md_kernel_call *call;
  md_kernel_status *st;
  size_t n_ts;                  /* its tensors in device memory, for the red-zone checks */
  /* CMD_EVENT */
  md_event *ev;
  uint64_t gen;
  md__arena_tensor ts[];        /* n_ts */
} cmd;

struct md_stream {
  md_backend *dev;
  md_stream *prev, *next;       /* the device's streams in creation order (sched_lock) */
  uint64_t id;                  /* creation number on its device, from 1 */
  /* Under the device's sched_lock: */
  cmd *head, *tail;             /* issued, not yet run */
  uint64_t queued;              /* issued and not finished (the one running included) */
  uint64_t issued;              /* commands issued on it so far */
  int running;                  /* a worker runs its head now */
  unsigned owner;               /* unseeded: 1 + the worker that runs it when it is free (0: none
                                   yet), so that one stream's data stays in one core's caches */
  md_status error;              /* first error of accepted work since the last sync */
  char message[MSG_MAX];
  /* Written by the worker that runs the stream (one at a time): */
  uint64_t clock_ns;            /* simulated time of the work run on this stream */
};

struct md_event {
  md_backend *dev;
  md_event *prev, *next;        /* the device's events, for close (objs_lock) */
  uint64_t recorded, reached;   /* record generations (sched_lock) */
  _Atomic uint64_t reached_ns;  /* device clock when reached, + 1; 0: never recorded */
};

#define SIM_ORDER_LOG 4096u     /* entries of the executed-command log kept for tests */
#define SIM_MAX_WORKERS 2u

/* Counters that every call adds to, in stripes on cache lines of their own: threads that
 * work on one device at once would otherwise pass those lines (and the fields read by every
 * call next to them) back and forth on every call. A thread adds to the stripe of its own
 * number; readers add the stripes up. */
#define STRIPES 16u
typedef struct stripe {
  _Alignas(64) _Atomic uint64_t calls[3];   /* alloc, copy, launch calls (devices without a plan) */
  _Atomic uint64_t copies, bytes_copied;
  _Atomic uint64_t sites[3];                /* fault points seen on a device without a fault plan */
} stripe;

struct md_backend {
  /* Set at open, read by every call. */
  uint32_t magic;
  uint32_t id;                  /* 1..255, in every devptr */
  uint64_t tag;                 /* MD_SIM_DEVPTR_TAG | id << OFF_BITS */
  md__arena *arena;
  uint64_t limit;               /* the largest allocation (mem_limit after default and cap) */
  uint64_t latency_ns, seed;
  int has_seed;
  fault *faults;
  size_t n_faults;
  _Atomic int lost;             /* written once */
  _Atomic uint32_t debug;       /* written by md_sim_debug_set */
  _Atomic uint64_t lost_at;     /* the execution that lost the device */
  double copy_gbps;             /* copy bandwidth model; 0: off */
  /* Fault sites: the numbers a plan counts, one sequence per site, in call order. */
  _Alignas(64) _Atomic uint64_t site_calls[3];
  _Alignas(64) _Atomic uint64_t clock_ns;   /* added to only when a model is on */
  _Atomic uint64_t faults_fired, bad_pointers;
  pthread_mutex_t objs_lock;    /* the event list */
  md_event *events;
  /* The scheduler: streams, their queues, the workers. */
  _Alignas(64) pthread_mutex_t sched_lock;
  pthread_cond_t done_cond;     /* syncs and waits: a command finished */
  md_stream *streams, *streams_tail;
  uint64_t next_stream_id, next_seq;
  uint64_t held;                /* seeded: issued commands not yet released */
  uint64_t batch_cur, batch_last;   /* seeded: the batch being run, the last released */
  uint64_t rng;                 /* seeded: splitmix64 state */
  pthread_t workers[SIM_MAX_WORKERS];
  pthread_cond_t wcond[SIM_MAX_WORKERS];   /* worker i sleeps on wcond[i] */
  int widle[SIM_MAX_WORKERS];              /* worker i sleeps (sched_lock) */
  unsigned n_workers, worker_ids;
  int stopping;
  uint64_t order_hash, order_count;   /* every command run, in order (FNV-1a) */
  stripe stripes[STRIPES];
  /* Last: not zeroed at open (96 KiB, 3 % of a fuzz input that opens a device); an entry is
   * read only after it was written (md_sim_order reads the last order_count). */
  md_sim_order_entry order_log[SIM_ORDER_LOG];
};

enum { C_ALLOC = 0, C_COPY = 1, C_LAUNCH = 2 };

static inline md_backend *sim_of(md_backend *b) { return b && b->magic == SIM_MAGIC ? b : NULL; }

static inline int is_lost(md_backend *b) { return atomic_load_explicit(&b->lost, memory_order_acquire); }

/* The calling thread's stripe: threads are numbered at their first call on any device
 * (md__sim_next_thread counts them; md__sim_thread_stripe is 0 until then). Defined in
 * sim_backend.c; hidden, so that a thread-local access stays as cheap as a file's own. */
extern _Atomic unsigned md__sim_next_thread __attribute__((visibility("hidden")));
extern _Thread_local unsigned md__sim_thread_stripe __attribute__((visibility("hidden")));
static inline stripe *my_stripe(md_backend *b) {
  if (!md__sim_thread_stripe)
    md__sim_thread_stripe = atomic_fetch_add_explicit(&md__sim_next_thread, 1, memory_order_relaxed) % STRIPES + 1u;
  return &b->stripes[md__sim_thread_stripe - 1u];
}

/* Counts one backend call of a kind (for the stats). */
static inline void count_call(md_backend *b, int kind) {
  atomic_fetch_add_explicit(&my_stripe(b)->calls[kind], 1, memory_order_relaxed);
}

/* The modelled device time of a launch (is_launch) or of a copy of `bytes`; 0 with no model. */
static inline uint64_t model_ns(md_backend *b, int is_launch, uint64_t bytes) {
  if (is_launch) return b->latency_ns;
  return b->copy_gbps > 0 ? (uint64_t)((double)bytes / b->copy_gbps) : 0;
}

/* Advances the clocks by `ns` of work done on s (NULL: synchronous work). */
static inline void clock_advance(md_backend *b, md_stream *s, uint64_t ns) {
  if (!ns) return;
  if (!s) {
    atomic_fetch_add_explicit(&b->clock_ns, ns, memory_order_relaxed);
    return;
  }
  s->clock_ns += ns;
  uint64_t cur = atomic_load_explicit(&b->clock_ns, memory_order_relaxed);
  while (cur < s->clock_ns &&
         !atomic_compare_exchange_weak_explicit(&b->clock_ns, &cur, s->clock_ns, memory_order_relaxed,
                                                memory_order_relaxed)) {}
}

static inline md_status run_copy(md_backend *b, md_stream *s, const cmd *c) {
  if (c->n) {
    if (c->overlap) memmove(c->dst, c->src, c->n);
    else memcpy(c->dst, c->src, c->n);
  }
  stripe *sp = my_stripe(b);
  atomic_fetch_add_explicit(&sp->copies, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&sp->bytes_copied, c->n, memory_order_relaxed);
  clock_advance(b, s, model_ns(b, 0, c->n));
  return MD_NONE;
}

/* ---- shared between the backend's files ------------------------------------------------- */

/* sim_fault.c */
/* Parses `KIND@N[,KIND@N...]` into b->faults. INVALID_ARGUMENT naming the bad item. */
md_status md__sim_faults_parse(md_backend *b, const char *plan, char *err, size_t errlen);
/* DEVICE_UNAVAILABLE naming `what` and the execution that lost the device. */
md_status md__sim_lost_status(md_backend *b, const char *what, char *err, size_t errlen);
md_status md__sim_fault_point(md_backend *b, md_fault_site site, char *err, size_t errlen);

/* sim_copy.c */
md_status md__sim_alloc(md_backend *b, uint64_t bytes, md_devptr *out);
void md__sim_free(md_backend *b, md_devptr p);
md_status md__sim_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t n,
                        char *err, size_t errlen);
md_status md__sim_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t n, char *err,
                       size_t errlen);
md_status md__sim_copy(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src, uint64_t soff,
                       uint64_t n, char *err, size_t errlen);
void *md__sim_kernel_ptr(md_backend *b, md_devptr p);

/* sim_launch.c */
/* Sets st's code and message; returns code. */
md_status md__sim_kfail(md_kernel_status *st, md_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
md_status md__sim_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                         md_kernel_status *st);
/* Runs a kernel whose tensors were checked, then the red zones of what it touched (written
 * over), and its outputs for red-zone bytes (read past an end). s: the stream it runs on (NULL:
 * synchronous), for the clock. */
md_status md__sim_run_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                             md_kernel_status *st, const md__arena_tensor *ts, size_t n_ts);

/* sim_sched.c */
/* Wakes every worker (stopping, a seeded batch released, the device lost). Caller holds
 * sched_lock. */
void md__sim_wake_all_locked(md_backend *b);
/* Queues c on s (c is freed there when the device is closing: DEVICE_UNAVAILABLE). */
md_status md__sim_issue(md_backend *b, md_stream *s, cmd *c, char *err, size_t errlen);
md_status md__sim_stream_create(md_backend *b, md_stream **out);
void md__sim_stream_destroy(md_backend *b, md_stream *s);
md_status md__sim_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen);
void *md__sim_stream_native(md_backend *b, md_stream *s);
md_status md__sim_event_create(md_backend *b, md_event **out);
void md__sim_event_destroy(md_backend *b, md_event *e);
md_status md__sim_event_record(md_backend *b, md_event *e, md_stream *s);
md_status md__sim_event_wait(md_backend *b, md_event *e, uint64_t timeout_ns);

#endif
