/* sim_backend.c - the "sim" backend: a simulated GPU behind md_backend_ops. Device memory is
 * an arena of its own (sim_arena.c); fault plans: sim_fault.c; memory and copies: sim_copy.c;
 * launches: sim_launch.c; the scheduler, streams and events: sim_sched.c. Here: open, close,
 * info, stats, the clock, and the ops table. What the device does: md/sim.h. */
#include "sim_backend_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- counters and the clock ------------------------------------------------------------- */

/* The stripes' thread numbering (sim_backend_int.h: my_stripe). */
_Atomic unsigned md__sim_next_thread;
_Thread_local unsigned md__sim_thread_stripe;

static uint64_t sum_stripes(md_backend *b, size_t field_off) {
  uint64_t n = 0;
  for (unsigned i = 0; i < STRIPES; i++)
    n += atomic_load_explicit((_Atomic uint64_t *)(void *)((char *)&b->stripes[i] + field_off), memory_order_relaxed);
  return n;
}

static uint64_t calls_of(md_backend *b, int kind) {
  return sum_stripes(b, offsetof(stripe, calls) + (size_t)kind * sizeof(uint64_t));
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

/* The start-up cost model (config init_ns): a GPU runtime initializes once per process, on its
 * first device open, and a forked child cannot use its parent's (so it pays again). The first
 * open in each process waits init_ns for real (as an init would: this is the cost being modelled,
 * not a test wait); opens that come meanwhile on other threads wait for it on the lock. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t init_pid;   /* the process that paid the start-up (0: none yet) */

static void pay_init(uint64_t init_ns) {
  if (!init_ns) return;
  pthread_mutex_lock(&init_lock);
  if (init_pid != getpid()) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t end = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec + init_ns;
    t.tv_sec = (time_t)(end / 1000000000ull);
    t.tv_nsec = (long)(end % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
    init_pid = getpid();
  }
  pthread_mutex_unlock(&init_lock);
}

static md_status sim_open(const md_backend_params *p, md_backend **out, char *err, size_t errlen) {
  if (!out) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: out is NULL");
  *out = NULL;
  md_backend_params defaults = {.struct_size = sizeof defaults};
  if (!p) p = &defaults;
  if (p->struct_size < sizeof *p)
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: md_backend_params.struct_size %u < %zu",
                p->struct_size, sizeof *p);
  pay_init(p->init_ns);
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
  md_status st = md__sim_faults_parse(b, p->faults, err, errlen);
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
  md__sim_wake_all_locked(b);
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

/* ---- the ops table ---------------------------------------------------------------------- */

static const md_backend_ops sim_ops = {
    .version = MD_BACKEND_VERSION,
    .struct_size = sizeof(md_backend_ops),
    .name = "sim",
    .platform = "sim",
    .open = sim_open,
    .close = sim_close,
    .info = sim_info,
    .stats = sim_stats,
    .alloc = md__sim_alloc,
    .free = md__sim_free,
    .write = md__sim_write,
    .read = md__sim_read,
    .copy = md__sim_copy,
    .kernel_ptr = md__sim_kernel_ptr,
    .launch = md__sim_launch,
    .stream_create = md__sim_stream_create,
    .stream_destroy = md__sim_stream_destroy,
    .stream_sync = md__sim_stream_sync,
    .stream_native = md__sim_stream_native,
    .event_create = md__sim_event_create,
    .event_destroy = md__sim_event_destroy,
    .event_record = md__sim_event_record,
    .event_wait = md__sim_event_wait,
    .fault_point = md__sim_fault_point,
    .device_ns = device_ns,
};

const md_backend_ops *md_sim_backend(void) { return &sim_ops; }
