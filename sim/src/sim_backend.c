/* sim_backend.c - the "sim" backend: a simulated GPU behind md_backend_ops. Device memory is
 * an arena of its own (sim_arena.c); faults, streams, events and the clock are here. What the
 * device does: md/sim.h. */
#include "md/sim.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sim_arena.h"

#define SIM_MAGIC 0x53494d44u               /* "SIMD" */
#define OFF_BITS 40u
#define OFF_MASK ((1ull << OFF_BITS) - 1u)
#define ID_MASK (MD_SIM_DEVPTR_TAG_MASK | (0xFFull << OFF_BITS))
#define MSG_MAX 256u

typedef enum fault_kind { F_ALLOC = 0, F_COPY = 1, F_KERNEL = 2, F_LOST = 3, F_STALL = 4, F_KINDS = 5 } fault_kind;
static const char *const fault_names[F_KINDS] = {"alloc_fail", "copy_fail", "kernel_fail", "device_lost", "stall"};

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

static void wake_all_locked(md_backend *b);

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

static md_status kfail(md_kernel_status *st, md_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static md_backend *sim_of(md_backend *b) { return b && b->magic == SIM_MAGIC ? b : NULL; }

/* ---- fault plans ------------------------------------------------------------------------ */

/* Parses `KIND@N[,KIND@N...]` into b->faults. INVALID_ARGUMENT naming the bad item. */
static md_status faults_parse(md_backend *b, const char *plan, char *err, size_t errlen) {
  if (!plan || !*plan) return MD_NONE;
  size_t cap = 1;
  for (const char *c = plan; *c; c++) cap += *c == ',';
  b->faults = calloc(cap, sizeof *b->faults);
  if (!b->faults) return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: out of host memory");
  const char *item = plan;
  for (size_t i = 0; i < cap; i++) {
    const char *end = strchr(item, ',');
    int len = (int)(end ? (size_t)(end - item) : strlen(item));
    const char *at = memchr(item, '@', (size_t)len);
    if (len == 0)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '' (item %zu): empty item", i + 1);
    if (!at)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing '@N'", len, item);
    int klen = (int)(at - item);
    int k = -1;
    for (int j = 0; j < F_KINDS; j++)
      if ((int)strlen(fault_names[j]) == klen && strncmp(item, fault_names[j], (size_t)klen) == 0) k = j;
    if (k < 0)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT,
                  "faults: '%.*s': unknown kind '%.*s' (alloc_fail, copy_fail, kernel_fail, device_lost, stall)", len,
                  item, klen, item);
    const char *num = at + 1, *stop = item + len;
    if (num == stop) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing count", len, item);
    uint64_t n = 0;
    for (const char *d = num; d < stop; d++) {
      if (*d < '0' || *d > '9')
        return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count '%.*s' is not a number", len, item,
                    (int)(stop - num), num);
      uint64_t digit = (uint64_t)(*d - '0');
      if (n > (UINT64_MAX - digit) / 10)
        return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count is out of range", len, item);
      n = n * 10 + digit;
    }
    if (n == 0) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count must be >= 1", len, item);
    b->faults[b->n_faults++] = (fault){(fault_kind)k, n};
    item = end ? end + 1 : stop;
  }
  return MD_NONE;
}

/* Whether the plan has kind@n; counts it as fired when it has. */
static int fault_fires(md_backend *b, fault_kind kind, uint64_t n) {
  for (size_t i = 0; i < b->n_faults; i++)
    if (b->faults[i].kind == kind && b->faults[i].n == n) {
      atomic_fetch_add_explicit(&b->faults_fired, 1, memory_order_relaxed);
      return 1;
    }
  return 0;
}

static int is_lost(md_backend *b) { return atomic_load_explicit(&b->lost, memory_order_acquire); }

static md_status lost_status(md_backend *b, const char *what, char *err, size_t errlen) {
  return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: %s: device lost (device_lost@%" PRIu64 ")", what,
              atomic_load_explicit(&b->lost_at, memory_order_relaxed));
}

/* The calling thread's stripe. */
static stripe *my_stripe(md_backend *b) {
  static _Atomic unsigned next_thread;
  static _Thread_local unsigned me;   /* 0: not numbered yet */
  if (!me) me = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed) % STRIPES + 1u;
  return &b->stripes[me - 1u];
}

static uint64_t sum_stripes(md_backend *b, size_t field_off) {
  uint64_t n = 0;
  for (unsigned i = 0; i < STRIPES; i++)
    n += atomic_load_explicit((_Atomic uint64_t *)(void *)((char *)&b->stripes[i] + field_off), memory_order_relaxed);
  return n;
}

/* Counts one backend call of a kind (for the stats). */
static void count_call(md_backend *b, int kind) {
  atomic_fetch_add_explicit(&my_stripe(b)->calls[kind], 1, memory_order_relaxed);
}

static uint64_t calls_of(md_backend *b, int kind) {
  return sum_stripes(b, offsetof(stripe, calls) + (size_t)kind * sizeof(uint64_t));
}

/* The fault plan's hook (md_backend_ops.fault_point): numbers the runtime's calls per site
 * and fires what the plan says for that number. */
static md_status sim_fault_point(md_backend *b, md_fault_site site, char *err, size_t errlen) {
  if (!sim_of(b) || (unsigned)site > MD_FAULT_EXECUTION)
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: fault_point: bad device or site");
  if (is_lost(b)) return lost_status(b, "device", err, errlen);
  if (!b->n_faults) {
    /* No plan to number the calls for: counted on the thread's stripe, so that executions on
     * several threads do not pass one counter's line back and forth (stats add them up). */
    atomic_fetch_add_explicit(&my_stripe(b)->sites[site], 1, memory_order_relaxed);
    return MD_NONE;
  }
  uint64_t n = atomic_fetch_add_explicit(&b->site_calls[site], 1, memory_order_relaxed) + 1;
  switch (site) {
    case MD_FAULT_ALLOCATE:
      if (fault_fires(b, F_ALLOC, n))
        return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT,
                    "sim: injected device allocation failure (alloc_fail@%" PRIu64 ")", n);
      break;
    case MD_FAULT_COPY:
      if (fault_fires(b, F_COPY, n))
        return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: injected copy failure (copy_fail@%" PRIu64 ")", n);
      break;
    case MD_FAULT_EXECUTION:
      if (fault_fires(b, F_LOST, n)) {
        atomic_store_explicit(&b->lost_at, n, memory_order_relaxed);
        atomic_store_explicit(&b->lost, 1, memory_order_release);
        pthread_mutex_lock(&b->sched_lock);   /* wake waiters: queued work now fails */
        wake_all_locked(b);
        pthread_cond_broadcast(&b->done_cond);
        pthread_mutex_unlock(&b->sched_lock);
        return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE,
                    "sim: device lost during execution %" PRIu64 " (device_lost@%" PRIu64 ")", n, n);
      }
      if (fault_fires(b, F_KERNEL, n))
        return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: injected kernel failure (kernel_fail@%" PRIu64 ")", n);
      if (fault_fires(b, F_STALL, n))
        return md_backend_fail(err, errlen, MD_MISSED_DEADLINE_TRANSIENT, "sim: execution %" PRIu64 " stalled (stall@%" PRIu64 ")", n, n);
      break;
  }
  return MD_NONE;
}

/* The modelled device time of a launch (is_launch) or of a copy of `bytes`; 0 with no model. */
static uint64_t model_ns(md_backend *b, int is_launch, uint64_t bytes) {
  if (is_launch) return b->latency_ns;
  return b->copy_gbps > 0 ? (uint64_t)((double)bytes / b->copy_gbps) : 0;
}

uint64_t md_sim_model_ns(md_backend *b, int is_launch, uint64_t bytes) {
  return sim_of(b) ? model_ns(b, is_launch, bytes) : 0;
}

/* md_backend_ops.device_ns: the model's time, or UINT64_MAX when neither latency_ns nor
 * copy_gbps is set (the runtime then reports measured time). */
static uint64_t device_ns(md_backend *b, int is_launch, uint64_t bytes) {
  if (!b->latency_ns && !(b->copy_gbps > 0)) return UINT64_MAX;
  return model_ns(b, is_launch, bytes);
}

/* Advances the clocks by `ns` of work done on s (NULL: synchronous work). */
static void clock_advance(md_backend *b, md_stream *s, uint64_t ns) {
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

/* ---- open / close / info / stats -------------------------------------------------------- */

static _Atomic uint32_t next_id;

/* A seed for an unseeded device's red-zone canary: from the kernel's generator, or (should it
 * fail) the clock, the device's address and a count. */
static uint64_t random_seed(const md_backend *b) {
  static _Atomic uint64_t opened;
  uint64_t x = 0;
  if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x) return x;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return x ^ (uint64_t)(uintptr_t)b ^ atomic_fetch_add_explicit(&opened, 1, memory_order_relaxed) << 48;
}

static void sim_close(md_backend *b);

static md_status sim_open(const md_backend_params *p, md_backend **out, char *err, size_t errlen) {
  if (!out) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: out is NULL");
  *out = NULL;
  md_backend_params defaults = {.struct_size = sizeof defaults};
  if (!p) p = &defaults;
  if (p->struct_size < sizeof *p)
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: md_backend_params.struct_size %u < %zu",
                p->struct_size, sizeof *p);
  md_backend *b = aligned_alloc(_Alignof(md_backend), sizeof *b);
  if (!b) return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: out of host memory");
  memset(b, 0, offsetof(md_backend, order_log));
  b->magic = SIM_MAGIC;
  b->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) % 255u + 1u;
  b->tag = MD_SIM_DEVPTR_TAG | (uint64_t)b->id << OFF_BITS;
  b->latency_ns = p->latency_ns;
  b->seed = p->seed;
  b->has_seed = p->has_seed;
  uint64_t canary_seed = p->has_seed ? p->seed : random_seed(b);
  b->copy_gbps = p->copy_gbps > 0 ? p->copy_gbps : 0;
  b->rng = p->seed ^ 0x6d64632d73696d21ull;   /* "mdc-sim!" */
  b->batch_cur = 1;
  pthread_mutex_init(&b->objs_lock, NULL);
  pthread_mutex_init(&b->sched_lock, NULL);
  for (unsigned i = 0; i < SIM_MAX_WORKERS; i++) pthread_cond_init(&b->wcond[i], NULL);
  pthread_cond_init(&b->done_cond, NULL);
  const char *env = getenv("MD_SIM_CHECK_ALL");
  if (env && *env && strcmp(env, "0") != 0) atomic_store(&b->debug, MD_SIM_DEBUG_CHECK_ALL);
  md_status st = faults_parse(b, p->faults, err, errlen);
  if (st == MD_NONE) st = md__arena_create(p->mem_limit, b->tag, canary_seed, &b->arena, err, errlen);
  if (st != MD_NONE) {
    sim_close(b);
    return st;
  }
  md__arena_stats as;
  md__arena_stats_get(b->arena, &as);
  b->limit = as.limit;
  *out = b;
  return MD_NONE;
}

static void sim_close(md_backend *b) {
  if (!sim_of(b)) return;
  pthread_mutex_lock(&b->sched_lock);
  b->stopping = 1;
  wake_all_locked(b);
  pthread_cond_broadcast(&b->done_cond);
  pthread_mutex_unlock(&b->sched_lock);
  for (unsigned i = 0; i < b->n_workers; i++) pthread_join(b->workers[i], NULL);
  for (md_stream *s = b->streams, *n; s; s = n) {   /* work never run is dropped */
    n = s->next;
    for (cmd *c = s->head, *cn; c; c = cn) {
      cn = c->next;
      free(c);
    }
    free(s);
  }
  for (md_event *e = b->events, *n; e; e = n) {
    n = e->next;
    free(e);
  }
  md__arena_destroy(b->arena);
  free(b->faults);
  pthread_mutex_destroy(&b->objs_lock);
  pthread_mutex_destroy(&b->sched_lock);
  for (unsigned i = 0; i < SIM_MAX_WORKERS; i++) pthread_cond_destroy(&b->wcond[i]);
  pthread_cond_destroy(&b->done_cond);
  b->magic = 0;
  free(b);
}

static void sim_info(md_backend *b, md_backend_info *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!sim_of(b)) return;
  md__arena_stats as;
  md__arena_stats_get(b->arena, &as);
  snprintf(out->device_name, sizeof out->device_name, "mdc simulated GPU");
  out->mem_total = as.limit;
  out->max_alloc = as.limit;
}

void md_sim_stats_get(md_backend *b, md_sim_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!sim_of(b)) return;
  md__arena_stats as;
  md__arena_stats_get(b->arena, &as);
  md_backend_stats *c = &out->common;
  c->allocs = as.allocs;
  c->frees = as.frees;
  c->bytes_live = as.bytes_live;
  c->bytes_peak = as.bytes_peak;
  c->copies = sum_stripes(b, offsetof(stripe, copies));
  c->bytes_copied = sum_stripes(b, offsetof(stripe, bytes_copied));
  c->launches = calls_of(b, C_LAUNCH);
  c->faults_fired = atomic_load_explicit(&b->faults_fired, memory_order_relaxed);
  c->redzone_hits = as.redzone_hits;
  c->poison_hits = as.poison_hits;
  out->redzone_reads = as.redzone_reads;
  out->mem_limit = as.limit;
  out->arena_bytes = as.reserved;
  out->live_blocks = as.live_blocks;
  out->span_live = as.span_live;
  out->bytes_free = as.bytes_free;
  out->free_blocks = as.free_blocks;
  out->largest_free = as.largest_free;
  out->max_alloc_now = as.max_fit_now;
  out->fragmentation = as.fragmentation;
  out->refused_persistent = as.refused_persistent;
  out->refused_transient = as.refused_transient;
  out->bad_frees = as.bad_frees;
  out->bad_pointers = atomic_load_explicit(&b->bad_pointers, memory_order_relaxed);
  out->alloc_calls = calls_of(b, C_ALLOC);
  out->copy_calls = calls_of(b, C_COPY);
  out->launch_calls = c->launches;
  out->clock_ns = atomic_load_explicit(&b->clock_ns, memory_order_relaxed);
  out->lost = (uint32_t)is_lost(b);
  for (int i = 0; i < 3; i++)
    out->site_calls[i] = atomic_load_explicit(&b->site_calls[i], memory_order_relaxed) +
                         sum_stripes(b, offsetof(stripe, sites) + (size_t)i * sizeof(uint64_t));
  pthread_mutex_lock(&b->sched_lock);
  out->commands_run = b->order_count;
  out->order_hash = b->order_hash;
  out->workers = b->n_workers;
  pthread_mutex_unlock(&b->sched_lock);
}

static void sim_stats(md_backend *b, md_backend_stats *out) {
  if (!out) return;
  md_sim_stats s;
  md_sim_stats_get(b, &s);
  *out = s.common;
}

uint64_t md_sim_clock_ns(md_backend *b) {
  return sim_of(b) ? atomic_load_explicit(&b->clock_ns, memory_order_relaxed) : 0;
}

void md_sim_debug_set(md_backend *b, uint32_t flags) {
  if (sim_of(b)) atomic_store_explicit(&b->debug, flags, memory_order_relaxed);
}

uint64_t md_sim_check(md_backend *b, char *msg, size_t len) {
  if (msg && len) msg[0] = '\0';
  return sim_of(b) ? md__arena_check_all(b->arena, msg, len) : 0;
}

size_t md_sim_report_last(md_backend *b, char *buf, size_t len) {
  if (!sim_of(b)) {
    if (buf && len) buf[0] = '\0';
    return 0;
  }
  return md__arena_last_report(b->arena, buf, len);
}

/* ---- memory ----------------------------------------------------------------------------- */

static md_status sim_alloc(md_backend *b, uint64_t bytes, md_devptr *out) {
  if (!sim_of(b) || !out) return MD_INVALID_ARGUMENT;
  *out = 0;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  count_call(b, C_ALLOC);
  if (bytes == 0) return MD_INVALID_ARGUMENT;
  uint64_t off;
  md_status st = md__arena_alloc(b->arena, bytes, &off);
  if (st == MD_NONE) *out = b->tag | off;
  return st;
}

static void sim_free(md_backend *b, md_devptr p) {
  if (!sim_of(b) || p == 0) return;
  if ((p & ID_MASK) != b->tag) {
    md__arena_report(b->arena, MD__ARENA_COUNT_BAD_FREE,
                     "sim: bad free of 0x%" PRIx64 ": not a device pointer of this device (0x%" PRIx64 "...)", p,
                     b->tag);
    return;
  }
  md__arena_free(b->arena, p & OFF_MASK);
}

/* Resolves [p + off, p + off + n) to a host address inside one live allocation. */
static md_status resolve(md_backend *b, const char *what, md_devptr p, uint64_t off, uint64_t n, uint8_t **host,
                         char *err, size_t errlen) {
  md__arena_alloc_info ai;
  if (p == 0) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: null device pointer", what);
  }
  if ((p & ID_MASK) != b->tag) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: 0x%" PRIx64 " is not a device pointer of this device",
                what, p);
  }
  uint64_t o = p & OFF_MASK;
  if (!md__arena_find(b->arena, o, &ai)) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: 0x%" PRIx64 " is not in a live allocation (freed, or never allocated)", what, p);
  }
  uint64_t avail = ai.off + ai.size - o;
  if (off > avail || n > avail - off) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: %" PRIu64 " bytes at offset %" PRIu64 " of 0x%" PRIx64
                " run past the end of allocation 0x%" PRIx64 " (size %" PRIu64 ")",
                what, n, off, p, b->tag | ai.off, ai.size);
  }
  *host = md__arena_host(b->arena, o + off);
  return MD_NONE;
}

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
  wake_all_locked(b);
}

/* Wakes every worker (stopping, a seeded batch released, the device lost). Caller holds
 * sched_lock. */
static void wake_all_locked(md_backend *b) {
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

static md_status run_copy(md_backend *b, md_stream *s, const cmd *c) {
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

/* Runs a kernel whose tensors were checked, then the red zones of what it touched (written
 * over), and its outputs for red-zone bytes (read past an end). */
static md_status run_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                            md_kernel_status *st, const md__arena_tensor *ts, size_t n_ts) {
  const char *kname = k->name ? k->name : "?";
  call->stream = NULL;
  k->run(call, st);
  clock_advance(b, s, model_ns(b, 1, 0));
  char msg[MSG_MAX] = "";
  int all = (atomic_load_explicit(&b->debug, memory_order_relaxed) & MD_SIM_DEBUG_CHECK_ALL) != 0;
  uint64_t hits = md__arena_check(b->arena, ts, n_ts, msg, sizeof msg);
  if (all) hits += md__arena_check_all(b->arena, msg[0] ? NULL : msg, sizeof msg);
  hits += md__arena_check_reads(b->arena, ts, n_ts, all, msg[0] ? NULL : msg, sizeof msg);
  if (hits && st->code == MD_NONE)
    kfail(st, MD_GENERAL_FAILURE, "sim: kernel '%s': %s", kname, strncmp(msg, "sim: ", 5) ? msg : msg + 5);
  return st->code;
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
    st = lost_status(b, c->kind == CMD_COPY ? "queued copy" : "queued launch", msg, sizeof msg);
    if (c->kind == CMD_LAUNCH) kfail(c->st, st, "%s", msg);
  } else if (c->kind == CMD_COPY) {
    st = run_copy(b, s, c);
  } else if (c->kind == CMD_LAUNCH) {
    st = run_launch(b, s, c->k, c->call, c->st, c->ts, c->n_ts);
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

static md_status issue(md_backend *b, md_stream *s, cmd *c, char *err, size_t errlen) {
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

/* ---- copies ------------------------------------------------------------------------------ */

/* A copy whose pointers were resolved: runs now (NULL stream) or is queued on s. */
static md_status copy_accept(md_backend *b, md_stream *s, uint8_t *dst, const uint8_t *src, uint64_t n, int overlap,
                             char *err, size_t errlen) {
  if (!s) {
    cmd c = {.kind = CMD_COPY, .dst = dst, .src = src, .n = n, .overlap = overlap};
    return run_copy(b, NULL, &c);
  }
  cmd *c = calloc(1, sizeof *c);
  if (!c) return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "sim: out of host memory");
  *c = (cmd){.kind = CMD_COPY, .dst = dst, .src = src, .n = n, .overlap = overlap};
  return issue(b, s, c, err, errlen);
}

static md_status sim_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t n,
                           char *err, size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: not a sim device");
  if (!src && n) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: NULL host source");
  if (is_lost(b)) return lost_status(b, "write", err, errlen);
  count_call(b, C_COPY);
  uint8_t *to;
  md_status st = resolve(b, "write", dst, off, n, &to, err, errlen);
  return st != MD_NONE ? st : copy_accept(b, s, to, src, n, 0, err, errlen);
}

static md_status sim_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t n, char *err,
                          size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: not a sim device");
  if (!dst && n) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: NULL host destination");
  if (is_lost(b)) return lost_status(b, "read", err, errlen);
  count_call(b, C_COPY);
  uint8_t *from;
  md_status st = resolve(b, "read", src, off, n, &from, err, errlen);
  return st != MD_NONE ? st : copy_accept(b, s, dst, from, n, 0, err, errlen);
}

static md_status sim_copy(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src, uint64_t soff,
                          uint64_t n, char *err, size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: copy: not a sim device");
  if (is_lost(b)) return lost_status(b, "copy", err, errlen);
  count_call(b, C_COPY);
  uint8_t *from, *to;
  md_status st = resolve(b, "copy source", src, soff, n, &from, err, errlen);
  if (st == MD_NONE) st = resolve(b, "copy destination", dst, doff, n, &to, err, errlen);
  if (st != MD_NONE) return st;
  return copy_accept(b, s, to, from, n, to < from + n && from < to + n, err, errlen);
}

static void *sim_kernel_ptr(md_backend *b, md_devptr p) {
  if (!sim_of(b) || (p & ID_MASK) != b->tag) return NULL;
  md__arena_alloc_info ai;
  uint64_t o = p & OFF_MASK;
  return md__arena_find(b->arena, o, &ai) ? md__arena_host(b->arena, o) : NULL;
}

/* ---- launch ----------------------------------------------------------------------------- */

static md_status kfail(md_kernel_status *st, md_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static md_status kfail(md_kernel_status *st, md_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  st->code = code;
  vsnprintf(st->message, sizeof st->message, fmt, ap);
  va_end(ap);
  return code;
}

/* Checks that tensor t (index i of `side`) is host memory or lies inside one live allocation;
 * appends it to ts when it is device memory. */
static md_status tensor_check(md_backend *b, const char *kname, const char *side, uint32_t i, const md_tensor *t,
                              md__arena_tensor *ts, size_t *n_ts, md_kernel_status *st) {
  uintptr_t p = (uintptr_t)t->data;
  if (!p || !t->bytes) return MD_NONE;   /* nothing the kernel may touch */
  if (((uint64_t)p & MD_SIM_DEVPTR_TAG_MASK) == MD_SIM_DEVPTR_TAG) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return kfail(st, MD_GENERAL_FAILURE,
                 "sim: kernel '%s': %s %u holds device pointer 0x%" PRIx64 ", not a kernel_ptr() address", kname,
                 side, i, (uint64_t)p);
  }
  uintptr_t base = (uintptr_t)md__arena_base(b->arena);
  uint64_t reserved = md__arena_reserved(b->arena);
  if (p < base || p - base >= reserved) return MD_NONE;   /* host memory: parameters, scratch */
  uint64_t o = (uint64_t)(p - base);
  md__arena_alloc_info ai;
  md__arena_where w = md__arena_locate(b->arena, o, &ai);
  if (w != MD__ARENA_AT_PAYLOAD) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    if (w == MD__ARENA_AT_REDZONE)
      return kfail(st, MD_GENERAL_FAILURE,
                   "sim: kernel '%s': %s %u points at 0x%" PRIx64 ", past the end of allocation 0x%" PRIx64
                   " (size %" PRIu64 ")",
                   kname, side, i, b->tag | o, b->tag | ai.off, ai.size);
    return kfail(st, MD_GENERAL_FAILURE,
                 "sim: kernel '%s': %s %u points at 0x%" PRIx64 ", which is not in a live allocation (freed, or "
                 "never allocated)",
                 kname, side, i, b->tag | o);
  }
  if (t->bytes > ai.off + ai.size - o) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return kfail(st, MD_GENERAL_FAILURE,
                 "sim: kernel '%s': %s %u (%" PRIu64 " bytes at 0x%" PRIx64 ") runs past the end of allocation 0x%" PRIx64
                 " (size %" PRIu64 ")",
                 kname, side, i, t->bytes, b->tag | o, b->tag | ai.off, ai.size);
  }
  ts[(*n_ts)++] = (md__arena_tensor){.off = o, .bytes = t->bytes, .index = i, .output = side[0] == 'o'};
  return MD_NONE;
}

static md_status sim_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                            md_kernel_status *st) {
  if (!sim_of(b) || !k || !k->run || !call || !st) {
    if (st) kfail(st, MD_INVALID_ARGUMENT, "sim: launch: NULL device, kernel, run, call or status");
    return MD_INVALID_ARGUMENT;
  }
  st->code = MD_NONE;
  st->message[0] = '\0';
  const char *kname = k->name ? k->name : "?";
  if (is_lost(b))
    return kfail(st, MD_DEVICE_UNAVAILABLE, "sim: launch of kernel '%s': device lost (device_lost@%" PRIu64 ")",
                 kname, atomic_load_explicit(&b->lost_at, memory_order_relaxed));
  count_call(b, C_LAUNCH);
  if ((call->n_inputs && !call->inputs) || (call->n_outputs && !call->outputs))
    return kfail(st, MD_INVALID_ARGUMENT, "sim: launch of kernel '%s': NULL tensor array", kname);

  /* Checks before the work is accepted, on the calling thread. */
  size_t n_t = (size_t)call->n_inputs + call->n_outputs, n_ts = 0;
  cmd *c = s ? calloc(1, sizeof *c + n_t * sizeof(md__arena_tensor)) : NULL;
  md__arena_tensor local[16], *ts = c ? c->ts : n_t <= 16 ? local : malloc(n_t * sizeof *ts);
  if ((s && !c) || !ts) {
    free(c);
    return kfail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "sim: launch: out of host memory");
  }
  md_status rc = MD_NONE;
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_inputs; i++)
    rc = tensor_check(b, kname, "input", i, &call->inputs[i], ts, &n_ts, st);
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_outputs; i++)
    rc = tensor_check(b, kname, "output", i, &call->outputs[i], ts, &n_ts, st);
  if (rc != MD_NONE || !s) {
    if (rc == MD_NONE) rc = run_launch(b, NULL, k, call, st, ts, n_ts);
    if (ts != local && !c) free(ts);
    free(c);
    return rc;
  }
  /* Accepted: the kernel runs on a worker; its failure comes from stream_sync. */
  c->kind = CMD_LAUNCH;
  c->k = k;
  c->call = call;
  c->st = st;
  c->n_ts = n_ts;
  char err[MSG_MAX];
  rc = issue(b, s, c, err, sizeof err);
  if (rc != MD_NONE) kfail(st, rc, "%s", err);
  return rc;
}

/* ---- streams and events ----------------------------------------------------------------- */

static md_status sim_stream_create(md_backend *b, md_stream **out) {
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

static void sim_stream_destroy(md_backend *b, md_stream *s) {
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

static md_status sim_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen) {
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
  if (is_lost(b)) return lost_status(b, "stream_sync", err, errlen);
  return MD_NONE;
}

static void *sim_stream_native(md_backend *b, md_stream *s) { return NULL; }

static md_status sim_event_create(md_backend *b, md_event **out) {
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

static void sim_event_destroy(md_backend *b, md_event *e) {
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

static md_status sim_event_record(md_backend *b, md_event *e, md_stream *s) {
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

static md_status sim_event_wait(md_backend *b, md_event *e, uint64_t timeout_ns) {
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

static const md_backend_ops sim_ops = {
    .version = MD_BACKEND_VERSION,
    .struct_size = sizeof(md_backend_ops),
    .name = "sim",
    .platform = "sim",
    .open = sim_open,
    .close = sim_close,
    .info = sim_info,
    .stats = sim_stats,
    .alloc = sim_alloc,
    .free = sim_free,
    .write = sim_write,
    .read = sim_read,
    .copy = sim_copy,
    .kernel_ptr = sim_kernel_ptr,
    .launch = sim_launch,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_sync = sim_stream_sync,
    .stream_native = sim_stream_native,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_wait = sim_event_wait,
    .fault_point = sim_fault_point,
    .device_ns = device_ns,
};

const md_backend_ops *md_sim_backend(void) { return &sim_ops; }
