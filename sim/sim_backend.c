/* sim_backend.c - the "sim" backend: a simulated GPU behind md_backend_ops. Device memory is
 * an arena of its own (sim_arena.c); faults, streams, events and the clock are here. What the
 * device does, and what issue 3 will change: sim_backend.h. */
#include "sim_backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_arena.h"

#define SIM_MAGIC 0x53494d44u               /* "SIMD" */
#define OFF_BITS 40u
#define OFF_MASK ((1ull << OFF_BITS) - 1u)
#define ID_MASK (MD_SIM_DEVPTR_TAG_MASK | (0xFFull << OFF_BITS))
#define MSG_MAX 256u

typedef enum fault_kind { F_ALLOC = 0, F_COPY = 1, F_KERNEL = 2, F_LOST = 3, F_KINDS = 4 } fault_kind;
static const char *const fault_names[F_KINDS] = {"alloc_fail", "copy_fail", "kernel_fail", "device_lost"};

typedef struct fault {
  fault_kind kind;
  uint64_t n;
} fault;

struct md_stream {
  md_backend *dev;
  md_stream *prev, *next;       /* the device's streams, for close */
  pthread_mutex_t lock;
  md_status error;              /* first error of accepted work since the last sync */
  char message[MSG_MAX];
  uint64_t clock_ns;            /* simulated time of the work issued on this stream */
};

struct md_event {
  md_backend *dev;
  md_event *prev, *next;        /* the device's events, for close */
  _Atomic uint64_t reached_ns;  /* device clock when reached, + 1; 0: never recorded */
};

/* Counters that every call adds to, in stripes on cache lines of their own: threads that
 * work on one device at once would otherwise pass those lines (and the fields read by every
 * call next to them) back and forth on every call. A thread adds to the stripe of its own
 * number; readers add the stripes up. */
#define STRIPES 16u
typedef struct stripe {
  _Alignas(64) _Atomic uint64_t calls[3];   /* alloc, copy, launch calls (devices without a plan) */
  _Atomic uint64_t copies, bytes_copied;
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
  _Atomic uint64_t lost_at;     /* the launch that lost the device */
  /* With a fault plan, the numbers it counts: one sequence per kind, in call order. */
  _Alignas(64) _Atomic uint64_t calls[3];
  _Alignas(64) _Atomic uint64_t clock_ns;   /* added to only when latency_ns > 0 */
  _Atomic uint64_t faults_fired, bad_pointers;
  pthread_mutex_t objs_lock;    /* the two lists below */
  md_stream *streams;
  md_event *events;
  stripe stripes[STRIPES];
};

enum { C_ALLOC = 0, C_COPY = 1, C_LAUNCH = 2 };

static md_status fail(char *err, size_t errlen, md_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static md_status fail(char *err, size_t errlen, md_status st, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return st;
}

static md_backend *sim_of(md_backend *b) { return b && b->magic == SIM_MAGIC ? b : NULL; }

/* ---- fault plans ------------------------------------------------------------------------ */

/* Parses `KIND@N[,KIND@N...]` into b->faults. INVALID_ARGUMENT naming the bad item. */
static md_status faults_parse(md_backend *b, const char *plan, char *err, size_t errlen) {
  if (!plan || !*plan) return MD_NONE;
  size_t cap = 1;
  for (const char *c = plan; *c; c++) cap += *c == ',';
  b->faults = calloc(cap, sizeof *b->faults);
  if (!b->faults) return fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: out of host memory");
  const char *item = plan;
  for (size_t i = 0; i < cap; i++) {
    const char *end = strchr(item, ',');
    int len = (int)(end ? (size_t)(end - item) : strlen(item));
    const char *at = memchr(item, '@', (size_t)len);
    if (len == 0)
      return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '' (item %zu): empty item", i + 1);
    if (!at)
      return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing '@N'", len, item);
    int klen = (int)(at - item);
    int k = -1;
    for (int j = 0; j < F_KINDS; j++)
      if ((int)strlen(fault_names[j]) == klen && strncmp(item, fault_names[j], (size_t)klen) == 0) k = j;
    if (k < 0)
      return fail(err, errlen, MD_INVALID_ARGUMENT,
                  "faults: '%.*s': unknown kind '%.*s' (alloc_fail, copy_fail, kernel_fail, device_lost)", len,
                  item, klen, item);
    const char *num = at + 1, *stop = item + len;
    if (num == stop) return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing count", len, item);
    uint64_t n = 0;
    for (const char *d = num; d < stop; d++) {
      if (*d < '0' || *d > '9')
        return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count '%.*s' is not a number", len, item,
                    (int)(stop - num), num);
      uint64_t digit = (uint64_t)(*d - '0');
      if (n > (UINT64_MAX - digit) / 10)
        return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count is out of range", len, item);
      n = n * 10 + digit;
    }
    if (n == 0) return fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count must be >= 1", len, item);
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
  return fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: %s: device lost (device_lost@%" PRIu64 ")", what,
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

/* The number of this call among the calls of its kind (1-based) when the device has a fault
 * plan (the plan needs the order); 0 otherwise (only the count is kept). */
static uint64_t count_call(md_backend *b, int kind) {
  if (b->n_faults) return atomic_fetch_add_explicit(&b->calls[kind], 1, memory_order_relaxed) + 1;
  atomic_fetch_add_explicit(&my_stripe(b)->calls[kind], 1, memory_order_relaxed);
  return 0;
}

static uint64_t calls_of(md_backend *b, int kind) {
  return atomic_load_explicit(&b->calls[kind], memory_order_relaxed) +
         sum_stripes(b, offsetof(stripe, calls) + (size_t)kind * sizeof(uint64_t));
}

/* ---- open / close / info / stats -------------------------------------------------------- */

static _Atomic uint32_t next_id;

static void sim_close(md_backend *b);

static md_status sim_open(const md_backend_params *p, md_backend **out, char *err, size_t errlen) {
  if (!out) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: out is NULL");
  *out = NULL;
  md_backend_params defaults = {.struct_size = sizeof defaults};
  if (!p) p = &defaults;
  if (p->struct_size < sizeof *p)
    return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: open: md_backend_params.struct_size %u < %zu",
                p->struct_size, sizeof *p);
  md_backend *b = aligned_alloc(_Alignof(md_backend), sizeof *b);
  if (!b) return fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: out of host memory");
  memset(b, 0, sizeof *b);
  b->magic = SIM_MAGIC;
  b->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) % 255u + 1u;
  b->tag = MD_SIM_DEVPTR_TAG | (uint64_t)b->id << OFF_BITS;
  b->latency_ns = p->latency_ns;
  b->seed = p->seed;
  b->has_seed = p->has_seed;
  pthread_mutex_init(&b->objs_lock, NULL);
  const char *env = getenv("MD_SIM_CHECK_ALL");
  if (env && *env && strcmp(env, "0") != 0) atomic_store(&b->debug, MD_SIM_DEBUG_CHECK_ALL);
  md_status st = faults_parse(b, p->faults, err, errlen);
  if (st == MD_NONE) st = md__arena_create(p->mem_limit, b->tag, &b->arena, err, errlen);
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
  for (md_stream *s = b->streams, *n; s; s = n) {
    n = s->next;
    pthread_mutex_destroy(&s->lock);
    free(s);
  }
  for (md_event *e = b->events, *n; e; e = n) {
    n = e->next;
    free(e);
  }
  md__arena_destroy(b->arena);
  free(b->faults);
  pthread_mutex_destroy(&b->objs_lock);
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
  uint64_t n = count_call(b, C_ALLOC);
  if (bytes == 0) return MD_INVALID_ARGUMENT;
  if (bytes <= b->limit && fault_fires(b, F_ALLOC, n)) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
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
    return fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: null device pointer", what);
  }
  if ((p & ID_MASK) != b->tag) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: 0x%" PRIx64 " is not a device pointer of this device",
                what, p);
  }
  uint64_t o = p & OFF_MASK;
  if (!md__arena_find(b->arena, o, &ai)) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: 0x%" PRIx64 " is not in a live allocation (freed, or never allocated)", what, p);
  }
  uint64_t avail = ai.off + ai.size - o;
  if (off > avail || n > avail - off) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: %" PRIu64 " bytes at offset %" PRIu64 " of 0x%" PRIx64
                " run past the end of allocation 0x%" PRIx64 " (size %" PRIu64 ")",
                what, n, off, p, b->tag | ai.off, ai.size);
  }
  *host = md__arena_host(b->arena, o + off);
  return MD_NONE;
}

/* Keeps the first error of accepted work on s for stream_sync. */
static void stream_note(md_stream *s, md_status st, const char *msg) {
  if (!s || st == MD_NONE) return;
  pthread_mutex_lock(&s->lock);
  if (s->error == MD_NONE) {
    s->error = st;
    snprintf(s->message, sizeof s->message, "%s", msg ? msg : "");
  }
  pthread_mutex_unlock(&s->lock);
}

/* One copy command, resolved and accepted. This round it runs at once; issue 3 queues it on
 * its stream and runs it on a worker (the fault number was given at the call). */
typedef struct copy_cmd {
  uint8_t *dst;
  const uint8_t *src;
  uint64_t n, number;
  int overlap;
} copy_cmd;

static md_status copy_run(md_backend *b, md_stream *s, const copy_cmd *c, char *err, size_t errlen) {
  if (fault_fires(b, F_COPY, c->number)) {
    char msg[MSG_MAX];
    snprintf(msg, sizeof msg, "sim: injected copy failure (copy_fail@%" PRIu64 ")", c->number);
    stream_note(s, MD_GENERAL_FAILURE, msg);
    return fail(err, errlen, MD_GENERAL_FAILURE, "%s", msg);
  }
  if (c->n) {
    if (c->overlap) memmove(c->dst, c->src, c->n);
    else memcpy(c->dst, c->src, c->n);
  }
  stripe *sp = my_stripe(b);
  atomic_fetch_add_explicit(&sp->copies, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&sp->bytes_copied, c->n, memory_order_relaxed);
  return MD_NONE;
}

static md_status sim_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t n,
                           char *err, size_t errlen) {
  if (!sim_of(b)) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: not a sim device");
  if (!src && n) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: NULL host source");
  if (is_lost(b)) return lost_status(b, "write", err, errlen);
  copy_cmd c = {.src = src, .n = n, .number = count_call(b, C_COPY)};
  md_status st = resolve(b, "write", dst, off, n, &c.dst, err, errlen);
  return st != MD_NONE ? st : copy_run(b, s, &c, err, errlen);
}

static md_status sim_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t n, char *err,
                          size_t errlen) {
  if (!sim_of(b)) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: not a sim device");
  if (!dst && n) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: NULL host destination");
  if (is_lost(b)) return lost_status(b, "read", err, errlen);
  copy_cmd c = {.dst = dst, .n = n, .number = count_call(b, C_COPY)};
  uint8_t *from;
  md_status st = resolve(b, "read", src, off, n, &from, err, errlen);
  c.src = from;
  return st != MD_NONE ? st : copy_run(b, s, &c, err, errlen);
}

static md_status sim_copy(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src, uint64_t soff,
                          uint64_t n, char *err, size_t errlen) {
  if (!sim_of(b)) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: copy: not a sim device");
  if (is_lost(b)) return lost_status(b, "copy", err, errlen);
  copy_cmd c = {.n = n, .number = count_call(b, C_COPY)};
  uint8_t *from;
  md_status st = resolve(b, "copy source", src, soff, n, &from, err, errlen);
  if (st == MD_NONE) st = resolve(b, "copy destination", dst, doff, n, &c.dst, err, errlen);
  if (st != MD_NONE) return st;
  c.src = from;
  c.overlap = c.dst < c.src + n && c.src < c.dst + n;
  return copy_run(b, s, &c, err, errlen);
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
 * appends its arena offset to offs. */
static md_status tensor_check(md_backend *b, const char *kname, const char *side, uint32_t i, const md_tensor *t,
                              uint64_t *offs, size_t *n_offs, md_kernel_status *st) {
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
  offs[(*n_offs)++] = o;
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
  uint64_t number = count_call(b, C_LAUNCH);
  if ((call->n_inputs && !call->inputs) || (call->n_outputs && !call->outputs))
    return kfail(st, MD_INVALID_ARGUMENT, "sim: launch of kernel '%s': NULL tensor array", kname);

  /* Checks before the work is accepted (issue 3: at the call, not on the worker). */
  size_t n_t = (size_t)call->n_inputs + call->n_outputs, n_offs = 0;
  uint64_t local[16], *offs = n_t <= 16 ? local : malloc(n_t * sizeof *offs);
  if (!offs) return kfail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "sim: launch: out of host memory");
  md_status rc = MD_NONE;
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_inputs; i++)
    rc = tensor_check(b, kname, "input", i, &call->inputs[i], offs, &n_offs, st);
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_outputs; i++)
    rc = tensor_check(b, kname, "output", i, &call->outputs[i], offs, &n_offs, st);

  /* The accepted work. */
  if (rc == MD_NONE && fault_fires(b, F_LOST, number)) {
    atomic_store_explicit(&b->lost_at, number, memory_order_relaxed);
    atomic_store_explicit(&b->lost, 1, memory_order_release);
    rc = kfail(st, MD_DEVICE_UNAVAILABLE, "sim: device lost while launching kernel '%s' (device_lost@%" PRIu64 ")",
               kname, number);
    stream_note(s, rc, st->message);
  } else if (rc == MD_NONE) {
    if (fault_fires(b, F_KERNEL, number)) {
      kfail(st, MD_GENERAL_FAILURE, "sim: injected kernel failure (kernel_fail@%" PRIu64 ")", number);
    } else {
      call->stream = NULL;
      k->run(call, st);
    }
    if (b->latency_ns) atomic_fetch_add_explicit(&b->clock_ns, b->latency_ns, memory_order_relaxed);
    if (s) s->clock_ns += b->latency_ns;
    char msg[MSG_MAX] = "";
    uint64_t hits = md__arena_check(b->arena, offs, n_offs, msg, sizeof msg);
    if (atomic_load_explicit(&b->debug, memory_order_relaxed) & MD_SIM_DEBUG_CHECK_ALL)
      hits += md__arena_check_all(b->arena, msg[0] ? NULL : msg, sizeof msg);
    if (hits && st->code == MD_NONE)
      kfail(st, MD_GENERAL_FAILURE, "sim: kernel '%s': %s", kname, strncmp(msg, "sim: ", 5) ? msg : msg + 5);
    rc = st->code;
    stream_note(s, rc, st->message);
  }
  if (offs != local) free(offs);
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
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_lock(&b->objs_lock);
  s->next = b->streams;
  if (s->next) s->next->prev = s;
  b->streams = s;
  pthread_mutex_unlock(&b->objs_lock);
  *out = s;
  return MD_NONE;
}

static void sim_stream_destroy(md_backend *b, md_stream *s) {
  if (!sim_of(b) || !s) return;
  pthread_mutex_lock(&b->objs_lock);
  if (s->prev) s->prev->next = s->next;
  else b->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  pthread_mutex_unlock(&b->objs_lock);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static md_status sim_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen) {
  if (!sim_of(b)) return fail(err, errlen, MD_INVALID_ARGUMENT, "sim: stream_sync: not a sim device");
  if (s) {
    pthread_mutex_lock(&s->lock);
    md_status st = s->error;
    if (st != MD_NONE) fail(err, errlen, st, "%s", s->message);
    s->error = MD_NONE;
    s->message[0] = '\0';
    pthread_mutex_unlock(&s->lock);
    if (st != MD_NONE) return st;
  }
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
  /* Everything issued before it has run: the event is reached now. */
  atomic_store_explicit(&e->reached_ns, atomic_load_explicit(&b->clock_ns, memory_order_relaxed) + 1,
                        memory_order_release);
  return MD_NONE;
}

static md_status sim_event_wait(md_backend *b, md_event *e, uint64_t timeout_ns) {
  if (!sim_of(b) || !e || e->dev != b) return MD_INVALID_ARGUMENT;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  return MD_NONE;   /* recorded: reached at record; never recorded: counts as reached */
}

uint64_t md_sim_event_time_ns(md_backend *b, md_event *e) {
  if (!sim_of(b) || !e) return 0;
  uint64_t r = atomic_load_explicit(&e->reached_ns, memory_order_acquire);
  return r ? r - 1 : 0;
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
};

const md_backend_ops *md_sim_backend(void) { return &sim_ops; }
