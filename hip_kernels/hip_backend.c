/* hip_backend.c - the "hip" backend: a GPU behind md_backend_ops through the HIP runtime (AMD) or
 * its CUDA mapping (md_hip_compat.h, NVIDIA). See docs/hip.md.
 *
 * Memory: md_devptr values are the device addresses themselves (kernel_ptr is the identity),
 * handed out by a caching size-class pool over hipMalloc'd slabs (hip_pool.c): no hipMalloc or
 * hipFree on the execute path once warm. New blocks are zero-filled (hipMemsetAsync) so a buffer
 * never shows an earlier one's bytes; copies are bounded by the bytes requested, not the size
 * class, so the class's slack (which is not zero-filled) is never reachable.
 *
 * Streams: an md_stream is one non-blocking hipStream. Calls with a NULL stream are synchronous:
 * they borrow a "channel" (a stream with its own pinned staging buffers) from a small pool,
 * queue their work, synchronize it and give it back, so concurrent synchronous calls from many
 * threads neither share a stream nor serialize on one.
 *
 * Copies: host memory given to write/read is pageable (pool mappings), so bytes travel through
 * two pinned staging buffers (hipHostMalloc) per channel/stream, double-buffered: the host copy
 * of one chunk overlaps the DMA of the other; events guard a buffer's reuse. A write on a stream
 * returns once the source bytes are staged (the caller may reuse its memory at once); a read
 * returns when the bytes are in the destination, after the stream's earlier work. Host memory
 * the runtime registered (host_register: the mapping of a registered pool, SPEC 9) is
 * page-locked with hipHostRegister and copied from and to directly, one DMA without staging; on
 * a stream such a copy is queued like the sim's (a write reads its source when the stream gets
 * to it, a read is complete at the stream's synchronization), a synchronous one is done when the
 * call returns.
 *
 * Events: hipEvents without timing. event_wait with a finite timeout polls hipEventQuery with a
 * bounded back-off (yield, then sleeps growing from 2 us to 1 ms), so a deadline is kept within
 * about 1 ms without a helper thread; UINT64_MAX blocks in hipEventSynchronize.
 *
 * Errors: every HIP call's error becomes a status with a message naming the call
 * (hip_error.c). An error that means the device is lost makes the backend lost: every later
 * call fails with DEVICE_UNAVAILABLE and the first message. */
#include "hip_backend.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hip_error.h"
#include "hip_pool.h"
#include "md_hip_rt.h"

#define HIP_MAGIC 0x48495042u                 /* "HIPB" */
#define STAGE_BYTES (UINT64_C(8) << 20)       /* one staging buffer */
#define MAX_CHANNELS 16u

typedef struct stage {
  void *buf[2];
  hipEvent_t ev[2];
  int ready;
} stage;

typedef struct channel {
  hipStream_t s;
  stage st;
  struct channel *next_free, *next_all;
} channel;

struct md_stream {
  hipStream_t s;
  stage st;
};

struct md_event {
  hipEvent_t e;
};

struct md_backend {
  uint32_t magic;
  int device;
  char name[64];
  uint64_t mem_total;
  md__hpool *pool;
  atomic_int lost;
  pthread_mutex_t lost_lock;
  char lost_msg[256];
  pthread_mutex_t ch_lock;
  pthread_cond_t ch_cond;
  channel *ch_free, *ch_all;
  unsigned n_ch;
  _Atomic uint64_t copies, bytes_copied, launches;
  /* Host ranges page-locked for registered pools: sorted by start, never overlapping (each is a
   * mapping of its own). n_reg is read without the lock first: no range, no lookup. */
  pthread_rwlock_t reg_lock;
  struct reg_range { uintptr_t lo, len; } *reg;
  size_t cap_reg;
  _Atomic size_t n_reg;
};

/* Remembers the device as lost with the first loss's message. */
static void lose(md_backend *b, const char *msg) {
  pthread_mutex_lock(&b->lost_lock);
  if (!atomic_load(&b->lost)) {
    snprintf(b->lost_msg, sizeof b->lost_msg, "%s", msg);
    atomic_store_explicit(&b->lost, 1, memory_order_release);
  }
  pthread_mutex_unlock(&b->lost_lock);
}

/* A HIP error of `call`: the mapped status and message; a lost device is remembered. */
static md_status hip_fail(md_backend *b, hipError_t e, const char *call, char *err, size_t errlen) {
  char msg[256];
  md_status st = md__hip_status(e, call, msg, sizeof msg);
  if (st == MD_DEVICE_UNAVAILABLE && b) lose(b, msg);
  return md_backend_fail(err, errlen, st, "hip: %s", msg);
}

#define HIP_TRY(b, call, expr, err, errlen)                       \
  do {                                                            \
    hipError_t e_ = (expr);                                       \
    if (e_ != hipSuccess) return hip_fail(b, e_, call, err, errlen); \
  } while (0)

static md_status lost_check(md_backend *b, char *err, size_t errlen) {
  if (!atomic_load_explicit(&b->lost, memory_order_acquire)) return MD_NONE;
  pthread_mutex_lock(&b->lost_lock);
  md_status st = md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "hip: device lost earlier: %s", b->lost_msg);
  pthread_mutex_unlock(&b->lost_lock);
  return st;
}

/* Threads other than the opener use device 0 unless told; set it where another was chosen. */
static void use_device(md_backend *b) {
  if (b->device != 0) (void)hipSetDevice(b->device);
}

/* ---- staging buffers ---- */

static md_status stage_init(md_backend *b, stage *s, char *err, size_t errlen) {
  if (s->ready) return MD_NONE;
  for (int i = 0; i < 2; i++) {
    hipError_t e = hipHostMalloc(&s->buf[i], STAGE_BYTES, hipHostMallocDefault);
    if (e == hipSuccess) e = hipEventCreateWithFlags(&s->ev[i], hipEventDisableTiming);
    else s->buf[i] = NULL;
    if (e != hipSuccess) {
      if (s->buf[i]) (void)hipHostFree(s->buf[i]);
      for (int j = 0; j < i; j++) {
        (void)hipEventDestroy(s->ev[j]);
        (void)hipHostFree(s->buf[j]);
      }
      return hip_fail(b, e, e == hipErrorOutOfMemory ? "hipHostMalloc" : "hipEventCreateWithFlags", err, errlen);
    }
  }
  s->ready = 1;
  return MD_NONE;
}

static void stage_fini(stage *s) {
  if (!s->ready) return;
  for (int i = 0; i < 2; i++) {
    (void)hipEventSynchronize(s->ev[i]);
    (void)hipEventDestroy(s->ev[i]);
    (void)hipHostFree(s->buf[i]);
  }
  s->ready = 0;
}

/* Host -> device through the staging buffers, queued on hs. */
static md_status stage_write(md_backend *b, hipStream_t hs, stage *s, uint8_t *dst, const uint8_t *src,
                             uint64_t n, char *err, size_t errlen) {
  for (uint64_t done = 0, k = 0; done < n; k++) {
    int i = (int)(k & 1);
    uint64_t len = n - done < STAGE_BYTES ? n - done : STAGE_BYTES;
    HIP_TRY(b, "hipEventSynchronize", hipEventSynchronize(s->ev[i]), err, errlen);
    memcpy(s->buf[i], src + done, len);
    HIP_TRY(b, "hipMemcpyAsync", hipMemcpyAsync(dst + done, s->buf[i], len, hipMemcpyHostToDevice, hs), err, errlen);
    HIP_TRY(b, "hipEventRecord", hipEventRecord(s->ev[i], hs), err, errlen);
    done += len;
  }
  return MD_NONE;
}

/* Device -> host through the staging buffers: the DMA of chunk k overlaps the host copy of
 * chunk k-1. Returns when every byte is in dst. */
static md_status stage_read(md_backend *b, hipStream_t hs, stage *s, uint8_t *dst, const uint8_t *src,
                            uint64_t n, char *err, size_t errlen) {
  uint64_t prev_off = 0, prev_len = 0;
  int prev = -1;
  for (uint64_t done = 0, k = 0; done < n || prev >= 0; k++) {
    int i = (int)(k & 1);
    uint64_t len = 0;
    if (done < n) {
      len = n - done < STAGE_BYTES ? n - done : STAGE_BYTES;
      HIP_TRY(b, "hipMemcpyAsync", hipMemcpyAsync(s->buf[i], src + done, len, hipMemcpyDeviceToHost, hs), err, errlen);
      HIP_TRY(b, "hipEventRecord", hipEventRecord(s->ev[i], hs), err, errlen);
    }
    if (prev >= 0) {
      HIP_TRY(b, "hipEventSynchronize", hipEventSynchronize(s->ev[prev]), err, errlen);
      memcpy(dst + prev_off, s->buf[prev], prev_len);
    }
    if (len) {
      prev = i;
      prev_off = done;
      prev_len = len;
      done += len;
    } else {
      prev = -1;
    }
  }
  return MD_NONE;
}

/* ---- channels: streams for synchronous (NULL-stream) calls ---- */

static md_status channel_new(md_backend *b, channel **out, char *err, size_t errlen) {
  channel *c = calloc(1, sizeof *c);
  if (!c) return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "hip: out of host memory");
  hipError_t e = hipStreamCreateWithFlags(&c->s, hipStreamNonBlocking);
  if (e != hipSuccess) {
    free(c);
    return hip_fail(b, e, "hipStreamCreateWithFlags", err, errlen);
  }
  md_status st = stage_init(b, &c->st, err, errlen);
  if (st != MD_NONE) {
    (void)hipStreamDestroy(c->s);
    free(c);
    return st;
  }
  *out = c;
  return MD_NONE;
}

static void channel_free(channel *c) {
  (void)hipStreamSynchronize(c->s);
  stage_fini(&c->st);
  (void)hipStreamDestroy(c->s);
  free(c);
}

/* A channel for this call: a free one, a new one (up to MAX_CHANNELS), or wait for one. */
static md_status channel_get(md_backend *b, channel **out, char *err, size_t errlen) {
  use_device(b);
  pthread_mutex_lock(&b->ch_lock);
  for (;;) {
    if (b->ch_free) {
      channel *c = b->ch_free;
      b->ch_free = c->next_free;
      pthread_mutex_unlock(&b->ch_lock);
      *out = c;
      return MD_NONE;
    }
    if (b->n_ch < MAX_CHANNELS) break;
    pthread_cond_wait(&b->ch_cond, &b->ch_lock);
  }
  b->n_ch++; /* claimed before creating, so racing callers do not pass the cap */
  pthread_mutex_unlock(&b->ch_lock);
  channel *c = NULL;
  md_status st = channel_new(b, &c, err, errlen);
  pthread_mutex_lock(&b->ch_lock);
  if (st != MD_NONE) {
    b->n_ch--;
    pthread_cond_signal(&b->ch_cond);
  } else {
    c->next_all = b->ch_all;
    b->ch_all = c;
  }
  pthread_mutex_unlock(&b->ch_lock);
  *out = c;
  return st;
}

static void channel_put(md_backend *b, channel *c) {
  pthread_mutex_lock(&b->ch_lock);
  c->next_free = b->ch_free;
  b->ch_free = c;
  pthread_cond_signal(&b->ch_cond);
  pthread_mutex_unlock(&b->ch_lock);
}

/* Synchronizes a channel's stream after a NULL-stream call and gives it back. */
static md_status channel_done(md_backend *b, channel *c, md_status st, char *err, size_t errlen) {
  hipError_t e = hipStreamSynchronize(c->s);
  if (st == MD_NONE && e != hipSuccess) st = hip_fail(b, e, "hipStreamSynchronize", err, errlen);
  channel_put(b, c);
  return st;
}

/* ---- the pool's device reservations ---- */

static md_status pool_reserve(void *ctx, uint64_t bytes, uint64_t *addr, char *err, size_t errlen) {
  md_backend *b = ctx;
  void *p = NULL;
  hipError_t e = hipMalloc(&p, bytes);
  if (e != hipSuccess) {
    (void)hipGetLastError(); /* an out-of-memory error is not sticky; clear it */
    char call[64];
    snprintf(call, sizeof call, "hipMalloc(%" PRIu64 " bytes)", bytes);
    return hip_fail(b, e, call, err, errlen);
  }
  *addr = (uint64_t)(uintptr_t)p;
  return MD_NONE;
}

static void pool_release(void *ctx, uint64_t addr) {
  (void)ctx;
  (void)hipFree((void *)(uintptr_t)addr);
}

/* ---- lifetime ---- */

static void hip_close(md_backend *b);

static md_status hip_open(const md_backend_params *p, md_backend **out, char *err, size_t errlen) {
  *out = NULL;
  if (p->faults && p->faults[0])
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT,
                "hip: faults='%s' is a simulator fault plan; the hip backend injects no faults "
                "(use backend=sim)", p->faults);
  int count = 0;
  hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess) {
    char msg[200];
    (void)md__hip_status(e, "hipGetDeviceCount", msg, sizeof msg);
    return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "hip: no GPU: %s", msg);
  }
  if (count <= 0)
    return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "hip: no GPU: hipGetDeviceCount: 0 devices");
  int dev = 0;
  const char *env = getenv("MD_HIP_DEVICE");
  if (env && *env) {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (*end || errno || v < 0 || v >= count)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "hip: MD_HIP_DEVICE='%s': not a device index below %d",
                  env, count);
    dev = (int)v;
  }
  md_backend *b = calloc(1, sizeof *b);
  if (!b) return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "hip: out of host memory");
  b->magic = HIP_MAGIC;
  b->device = dev;
  pthread_mutex_init(&b->lost_lock, NULL);
  pthread_mutex_init(&b->ch_lock, NULL);
  pthread_cond_init(&b->ch_cond, NULL);
  pthread_rwlock_init(&b->reg_lock, NULL);
  md_status st = MD_NONE;
  size_t free_b = 0, total_b = 0;
  if ((e = hipSetDevice(dev)) != hipSuccess) st = hip_fail(b, e, "hipSetDevice", err, errlen);
  else if ((e = hipDeviceGetName(b->name, (int)sizeof b->name, dev)) != hipSuccess)
    st = hip_fail(b, e, "hipDeviceGetName", err, errlen);
  else if ((e = hipMemGetInfo(&free_b, &total_b)) != hipSuccess)
    st = hip_fail(b, e, "hipMemGetInfo", err, errlen);
  if (st == MD_NONE) {
    b->mem_total = p->mem_limit && p->mem_limit < total_b ? p->mem_limit : total_b;
    md__hpool_ops ops = {.reserve = pool_reserve, .release = pool_release, .ctx = b};
    b->pool = md__hpool_create(&ops, b->mem_total);
    if (!b->pool) st = md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "hip: out of host memory");
  }
  if (st == MD_NONE) { /* one channel up front: the first copy does not pay for pinned memory */
    channel *c = NULL;
    st = channel_get(b, &c, err, errlen);
    if (st == MD_NONE) channel_put(b, c);
  }
  if (st == MD_NONE) st = md__hip_register_kernels(err, errlen);
  if (st != MD_NONE) {
    /* A device that answers the count but fails here, or kernels that cannot be registered (a
     * user kernel holds a name), is still "no usable GPU"; out of memory stays transient. */
    if (st != MD_RESOURCE_EXHAUSTED_TRANSIENT) st = MD_DEVICE_UNAVAILABLE;
    hip_close(b);
    return st;
  }
  *out = b;
  return MD_NONE;
}

static void hip_close(md_backend *b) {
  if (!b) return;
  use_device(b);
  for (channel *c = b->ch_all, *n; c; c = n) {
    n = c->next_all;
    channel_free(c);
  }
  /* The runtime unregisters every range before it closes a device; anything left is let go. */
  for (size_t i = 0; i < atomic_load(&b->n_reg); i++) {
    (void)hipHostUnregister((void *)b->reg[i].lo);
    (void)hipGetLastError();
  }
  free(b->reg);
  pthread_rwlock_destroy(&b->reg_lock);
  md__hpool_destroy(b->pool);
  pthread_mutex_destroy(&b->lost_lock);
  pthread_mutex_destroy(&b->ch_lock);
  pthread_cond_destroy(&b->ch_cond);
  b->magic = 0;
  free(b);
}

static void hip_info(md_backend *b, md_backend_info *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->device_name, sizeof out->device_name, "%s", b->name);
  out->mem_total = b->mem_total;
  out->max_alloc = b->mem_total;
}

static void hip_stats(md_backend *b, md_backend_stats *out) {
  memset(out, 0, sizeof *out);
  md__hpool_stats ps;
  md__hpool_stats_get(b->pool, &ps);
  out->allocs = ps.allocs;
  out->frees = ps.frees;
  out->bytes_live = ps.bytes_live;
  out->bytes_peak = ps.bytes_peak;
  out->copies = atomic_load(&b->copies);
  out->bytes_copied = atomic_load(&b->bytes_copied);
  out->launches = atomic_load(&b->launches);
}

/* ---- memory ---- */

static md_status hip_alloc(md_backend *b, uint64_t bytes, md_devptr *out) {
  char err[256];
  if (lost_check(b, err, sizeof err) != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  if (bytes == 0) return MD_INVALID_ARGUMENT;
  use_device(b);
  uint64_t addr = 0;
  md_status st = md__hpool_alloc(b->pool, bytes, &addr, err, sizeof err);
  if (st != MD_NONE) return st;
  /* Zero-fill: a block handed out again must not show the previous owner's bytes. The
   * requested bytes are all a copy can reach (span() bounds by md__hpool_block_size). */
  channel *c;
  st = channel_get(b, &c, err, sizeof err);
  if (st == MD_NONE) {
    hipError_t e = hipMemsetAsync((void *)(uintptr_t)addr, 0, bytes, c->s);
    if (e != hipSuccess) st = hip_fail(b, e, "hipMemsetAsync", err, sizeof err);
    st = channel_done(b, c, st, err, sizeof err);
  }
  if (st != MD_NONE) {
    (void)md__hpool_free(b->pool, addr);
    return st;
  }
  *out = addr;
  return MD_NONE;
}

static void hip_free(md_backend *b, md_devptr p) {
  if (p) (void)md__hpool_free(b->pool, p);
}

/* The device address of [p + off, + n) after checking it lies inside p's block. */
static md_status span(md_backend *b, const char *what, md_devptr p, uint64_t off, uint64_t n, uint8_t **addr,
                      char *err, size_t errlen) {
  uint64_t size = md__hpool_block_size(b->pool, p);
  if (!size)
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "hip: %s: 0x%" PRIx64 " is not a live allocation", what, p);
  if (off > size || n > size - off)
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE,
                "hip: %s: [%" PRIu64 ", +%" PRIu64 ") is outside the %" PRIu64 "-byte allocation 0x%" PRIx64,
                what, off, n, size, p);
  *addr = (uint8_t *)(uintptr_t)p + off;
  return MD_NONE;
}

static void count_copy(md_backend *b, uint64_t n) {
  atomic_fetch_add_explicit(&b->copies, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&b->bytes_copied, n, memory_order_relaxed);
}

/* ---- registered (page-locked) host memory ---- */

/* Whether [p, p + n) lies inside one registered range. No range registered: one atomic load. */
static int reg_has(md_backend *b, const void *p, uint64_t n) {
  if (!atomic_load_explicit(&b->n_reg, memory_order_acquire)) return 0;
  uintptr_t a = (uintptr_t)p;
  int hit = 0;
  pthread_rwlock_rdlock(&b->reg_lock);
  size_t lo = 0, hi = atomic_load_explicit(&b->n_reg, memory_order_relaxed);
  while (lo < hi) {   /* the first range starting after a */
    size_t mid = lo + (hi - lo) / 2;
    if (b->reg[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  if (lo) {
    const struct reg_range *r = &b->reg[lo - 1];
    hit = a - r->lo < r->len && n <= r->len - (a - r->lo);
  }
  pthread_rwlock_unlock(&b->reg_lock);
  return hit;
}

/* host_register: hipHostRegister, then the range joins the table. A refusal (a read-only
 * mapping the platform will not lock, the host's limit on locked memory) is reported and the
 * runtime uses the pool unpinned, through the staging buffers. */
static md_status hip_host_register(md_backend *b, void *addr, uint64_t len, char *err, size_t errlen) {
  md_status st = lost_check(b, err, errlen);
  if (st != MD_NONE) return st;
  if (!addr || !len || len > UINTPTR_MAX - (uintptr_t)addr)
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "hip: host_register: an empty or wrapping range");
  use_device(b);
  pthread_rwlock_wrlock(&b->reg_lock);
  size_t n = atomic_load_explicit(&b->n_reg, memory_order_relaxed);
  if (n == b->cap_reg) {
    size_t cap = b->cap_reg ? b->cap_reg * 2 : 16;
    struct reg_range *v = realloc(b->reg, cap * sizeof *v);
    if (!v) {
      pthread_rwlock_unlock(&b->reg_lock);
      return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "hip: host_register: out of host memory");
    }
    b->reg = v;
    b->cap_reg = cap;
  }
  hipError_t e = hipHostRegister(addr, (size_t)len, hipHostRegisterDefault);
  if (e != hipSuccess) {
    pthread_rwlock_unlock(&b->reg_lock);
    (void)hipGetLastError();   /* not the thread's error for its next launch */
    return hip_fail(b, e, "hipHostRegister", err, errlen);
  }
  size_t i = n;
  while (i > 0 && b->reg[i - 1].lo > (uintptr_t)addr) {
    b->reg[i] = b->reg[i - 1];
    i--;
  }
  b->reg[i] = (struct reg_range){(uintptr_t)addr, (uintptr_t)len};
  atomic_store_explicit(&b->n_reg, n + 1, memory_order_release);
  pthread_rwlock_unlock(&b->reg_lock);
  return MD_NONE;
}

/* host_unregister: the range leaves the table, then hipHostUnregister (the runtime calls it
 * once no queued work uses the range). */
static void hip_host_unregister(md_backend *b, void *addr) {
  pthread_rwlock_wrlock(&b->reg_lock);
  size_t n = atomic_load_explicit(&b->n_reg, memory_order_relaxed), i = 0;
  while (i < n && b->reg[i].lo != (uintptr_t)addr) i++;
  int found = i < n;
  if (found) {
    memmove(&b->reg[i], &b->reg[i + 1], (n - i - 1) * sizeof *b->reg);
    atomic_store_explicit(&b->n_reg, n - 1, memory_order_release);
  }
  pthread_rwlock_unlock(&b->reg_lock);
  if (!found) return;
  use_device(b);
  if (hipHostUnregister(addr) != hipSuccess) (void)hipGetLastError();
}

/* One DMA between registered host memory and the device: queued on s, or synchronous on a
 * channel. */
static md_status direct_copy(md_backend *b, md_stream *s, void *dst, const void *src, uint64_t n, hipMemcpyKind kind,
                             char *err, size_t errlen) {
  if (s) {
    HIP_TRY(b, "hipMemcpyAsync", hipMemcpyAsync(dst, src, n, kind, s->s), err, errlen);
    return MD_NONE;
  }
  channel *c;
  md_status st = channel_get(b, &c, err, errlen);
  if (st != MD_NONE) return st;
  hipError_t e = hipMemcpyAsync(dst, src, n, kind, c->s);
  if (e != hipSuccess) st = hip_fail(b, e, "hipMemcpyAsync", err, errlen);
  return channel_done(b, c, st, err, errlen);
}

static md_status hip_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t n,
                           char *err, size_t errlen) {
  uint8_t *d = NULL;
  md_status st = lost_check(b, err, errlen);
  if (st == MD_NONE) st = span(b, "write", dst, off, n, &d, err, errlen);
  if (st != MD_NONE || n == 0) return st;
  count_copy(b, n);
  if (reg_has(b, src, n)) return direct_copy(b, s, d, src, n, hipMemcpyHostToDevice, err, errlen);
  if (s) {
    st = stage_init(b, &s->st, err, errlen);
    return st == MD_NONE ? stage_write(b, s->s, &s->st, d, src, n, err, errlen) : st;
  }
  channel *c;
  if ((st = channel_get(b, &c, err, errlen)) != MD_NONE) return st;
  st = stage_write(b, c->s, &c->st, d, src, n, err, errlen);
  return channel_done(b, c, st, err, errlen);
}

static md_status hip_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t n,
                          char *err, size_t errlen) {
  uint8_t *a = NULL;
  md_status st = lost_check(b, err, errlen);
  if (st == MD_NONE) st = span(b, "read", src, off, n, &a, err, errlen);
  if (st != MD_NONE || n == 0) return st;
  count_copy(b, n);
  if (reg_has(b, dst, n)) return direct_copy(b, s, dst, a, n, hipMemcpyDeviceToHost, err, errlen);
  if (s) {
    st = stage_init(b, &s->st, err, errlen);
    return st == MD_NONE ? stage_read(b, s->s, &s->st, dst, a, n, err, errlen) : st;
  }
  channel *c;
  if ((st = channel_get(b, &c, err, errlen)) != MD_NONE) return st;
  st = stage_read(b, c->s, &c->st, dst, a, n, err, errlen);
  return channel_done(b, c, st, err, errlen);
}

static md_status hip_copy(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src, uint64_t soff,
                          uint64_t n, char *err, size_t errlen) {
  uint8_t *d = NULL, *a = NULL;
  md_status st = lost_check(b, err, errlen);
  if (st == MD_NONE) st = span(b, "copy destination", dst, doff, n, &d, err, errlen);
  if (st == MD_NONE) st = span(b, "copy source", src, soff, n, &a, err, errlen);
  if (st != MD_NONE || n == 0) return st;
  count_copy(b, n);
  if (s) {
    HIP_TRY(b, "hipMemcpyAsync", hipMemcpyAsync(d, a, n, hipMemcpyDeviceToDevice, s->s), err, errlen);
    return MD_NONE;
  }
  channel *c;
  if ((st = channel_get(b, &c, err, errlen)) != MD_NONE) return st;
  hipError_t e = hipMemcpyAsync(d, a, n, hipMemcpyDeviceToDevice, c->s);
  if (e != hipSuccess) st = hip_fail(b, e, "hipMemcpyAsync", err, errlen);
  return channel_done(b, c, st, err, errlen);
}

static void *hip_kernel_ptr(md_backend *b, md_devptr p) {
  (void)b;
  return (void *)(uintptr_t)p;
}

/* ---- kernels ---- */

static md_status hip_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                            md_kernel_status *st) {
  char err[256];
  if (lost_check(b, err, sizeof err) != MD_NONE) return md_kernel_fail(st, MD_DEVICE_UNAVAILABLE, "%s", err);
  channel *c = NULL;
  if (!s) {
    md_status r = channel_get(b, &c, err, sizeof err);
    if (r != MD_NONE) return md_kernel_fail(st, r, "%s", err);
  } else {
    use_device(b);
  }
  call->stream = (void *)(s ? s->s : c->s);
  atomic_fetch_add_explicit(&b->launches, 1, memory_order_relaxed);
  k->run(call, st);
  if (st->code == MD_DEVICE_UNAVAILABLE) lose(b, st->message); /* a launcher saw a lost device */
  md_status r = st->code;
  if (c) {
    err[0] = '\0';
    md_status sync = channel_done(b, c, MD_NONE, err, sizeof err);
    if (r == MD_NONE && sync != MD_NONE) r = md_kernel_fail(st, sync, "%s: %s", k->name, err);
  }
  return r;
}

/* ---- streams and events ---- */

static md_status hip_stream_create(md_backend *b, md_stream **out) {
  char err[256];
  if (lost_check(b, err, sizeof err) != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  use_device(b);
  md_stream *s = calloc(1, sizeof *s);
  if (!s) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  hipError_t e = hipStreamCreateWithFlags(&s->s, hipStreamNonBlocking);
  if (e != hipSuccess) {
    free(s);
    return hip_fail(b, e, "hipStreamCreateWithFlags", err, sizeof err);
  }
  *out = s;
  return MD_NONE;
}

static void hip_stream_destroy(md_backend *b, md_stream *s) {
  if (!s) return;
  use_device(b);
  (void)hipStreamSynchronize(s->s);
  stage_fini(&s->st);
  (void)hipStreamDestroy(s->s);
  free(s);
}

static md_status hip_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen) {
  md_status st = lost_check(b, err, errlen);
  if (st != MD_NONE || !s) return st;
  use_device(b);
  HIP_TRY(b, "hipStreamSynchronize", hipStreamSynchronize(s->s), err, errlen);
  return MD_NONE;
}

static void *hip_stream_native(md_backend *b, md_stream *s) {
  (void)b;
  return s ? (void *)s->s : NULL;
}

static md_status hip_event_create(md_backend *b, md_event **out) {
  char err[256];
  if (lost_check(b, err, sizeof err) != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  use_device(b);
  md_event *e = calloc(1, sizeof *e);
  if (!e) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  hipError_t r = hipEventCreateWithFlags(&e->e, hipEventDisableTiming);
  if (r != hipSuccess) {
    free(e);
    return hip_fail(b, r, "hipEventCreateWithFlags", err, sizeof err);
  }
  *out = e;
  return MD_NONE;
}

static void hip_event_destroy(md_backend *b, md_event *e) {
  if (!e) return;
  use_device(b);
  (void)hipEventDestroy(e->e);
  free(e);
}

static md_status hip_event_record(md_backend *b, md_event *e, md_stream *s) {
  char err[256];
  md_status st = lost_check(b, err, sizeof err);
  if (st != MD_NONE) return st;
  if (s) {
    use_device(b);
    HIP_TRY(b, "hipEventRecord", hipEventRecord(e->e, s->s), err, sizeof err);
    return MD_NONE;
  }
  /* NULL stream: everything before is complete; record on an idle channel stream and wait for
   * the record itself, so the event is reached when this returns (a record is asynchronous: a
   * wait with a zero timeout right after would otherwise find it not yet reached). */
  channel *c;
  if ((st = channel_get(b, &c, err, sizeof err)) != MD_NONE) return st;
  hipError_t r = hipEventRecord(e->e, c->s);
  if (r != hipSuccess) st = hip_fail(b, r, "hipEventRecord", err, sizeof err);
  return channel_done(b, c, st, err, sizeof err);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static md_status hip_event_wait(md_backend *b, md_event *e, uint64_t timeout_ns) {
  char err[256];
  md_status st = lost_check(b, err, sizeof err);
  if (st != MD_NONE) return st;
  use_device(b);
  if (timeout_ns == UINT64_MAX) {
    HIP_TRY(b, "hipEventSynchronize", hipEventSynchronize(e->e), err, sizeof err);
    return MD_NONE;
  }
  const uint64_t t0 = now_ns();
  uint64_t nap = 2000; /* ns */
  for (unsigned spin = 0;; spin++) {
    hipError_t r = hipEventQuery(e->e);
    if (r == hipSuccess) return MD_NONE;
    if (r != hipErrorNotReady) return hip_fail(b, r, "hipEventQuery", err, sizeof err);
    uint64_t waited = now_ns() - t0;
    if (waited >= timeout_ns) return MD_MISSED_DEADLINE_TRANSIENT;
    if (spin < 64) {
      sched_yield();
      continue;
    }
    uint64_t left = timeout_ns - waited, d = nap < left ? nap : left;
    struct timespec ts = {.tv_sec = (time_t)(d / 1000000000u), .tv_nsec = (long)(d % 1000000000u)};
    nanosleep(&ts, NULL);
    if (nap < 1000000) nap *= 2;
  }
}

static const md_backend_ops hip_ops = {
    .version = MD_BACKEND_VERSION,
    .struct_size = sizeof(md_backend_ops),
    .name = "hip",
    .platform = "hip",
    .open = hip_open,
    .close = hip_close,
    .info = hip_info,
    .stats = hip_stats,
    .alloc = hip_alloc,
    .free = hip_free,
    .write = hip_write,
    .read = hip_read,
    .copy = hip_copy,
    .kernel_ptr = hip_kernel_ptr,
    .launch = hip_launch,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .stream_native = hip_stream_native,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_wait = hip_event_wait,
    .host_register = hip_host_register,
    .host_unregister = hip_host_unregister,
};

const md_backend_ops *md_hip_backend(void) { return &hip_ops; }
