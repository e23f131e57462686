/* soak_cycles.c - the open/close cycle check of md_soak: open_device/close_device and
 * open_client/close_client, o->cycles times each after a warm-up, each cycle doing what a short
 * client does (a prepared model, a buffer written and read, a registered pool, asynchronous
 * executions; a device cycle also one large enough to go to the device's worker threads).
 * Afterwards the process must hold no more fds (/proc/self/fd) or threads (/proc/self/task)
 * than before, and its RSS (/proc/self/statm) may grow by at most a tolerance. Counted, not
 * timed; single-threaded. */
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soak.h"
#include "soak_table.h"
#include "support.h"

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#ifdef SOAK_ASAN
/* The sanitizer runtime's (sanitizer/allocator_interface.h, a header GCC does not install). */
void __sanitizer_purge_allocator(void);
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define WARMUP 20u
/* [128,128] float32: 64 KiB a tensor, more than the reference driver runs in the caller, so the
 * execution goes to the device's workers (docs/execution.md) and close_device must stop them. */
#define BIG 128u
/* RSS may grow this much over all the cycles: a leak of 4 KiB a cycle shows at 1,000 cycles.
 * Under ASan, RSS also holds what the runtime keeps of every thread that ever ran (each device
 * cycle starts two workers: about 22 MiB over 1,000 cycles, 29 MiB over 3,000, while the live
 * heap does not change by a byte), so there the tolerance is wide and the exact measure is
 * ASan's count of live heap bytes (quarantine excluded), which may grow by 1 MiB. */
#ifdef SOAK_ASAN
#define RSS_TOLERANCE_KIB (48L * 1024)
#define HEAP_TOLERANCE_BYTES (1L << 20)
#else
#define RSS_TOLERANCE_KIB 4096L
#endif

static const uint32_t D23[2] = {2, 3};

static long count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  long n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Resident KiB, after giving freed memory back: ASan's quarantine holds freed blocks (up to
 * 256 MiB) that would otherwise read as growth. */
static long heap_bytes(void) {
#ifdef SOAK_ASAN
  return (long)__sanitizer_get_current_allocated_bytes();
#else
  return -1;
#endif
}

static long rss_kib(void) {
#ifdef SOAK_ASAN
  __sanitizer_purge_allocator();
#else
  malloc_trim(0);
#endif
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef struct cyc {
  const soak_opts *o;
  soak_cycle_stats *s;
  unsigned n;   /* the cycle, for messages */
  bool failed;
} cyc;

/* A call of a cycle must return NONE. */
static bool ok(cyc *c, int ep, const char *op, md_device *d, md_status st) {
  c->s->calls[ep]++;
  if (st == MD_NONE) return true;
  c->s->calls[SOAK_EP_LAST_ERROR]++;
  soak_fail(op, -1, c->n, (int)st, soak_drv->last_error(d), "open/close cycle %u", c->n);
  c->failed = true;
  return false;
}

static void check_vals(cyc *c, const char *op, const float *got, const float *want, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      soak_fail(op, -1, c->n, MD_NONE, NULL, "open/close cycle %u: value[%u] = %g, want %g", c->n, i,
                (double)got[i], (double)want[i]);
      c->failed = true;
      return;
    }
  }
}

/* What a short client does; leaves one model and one buffer live for close_client to report. */
static void client_work(cyc *c, md_device *d, md_handle client) {
  mdt_model b;
  md_handle p = 0, pool = 0, ev = 0;
  md_token tok = 0;
  if (!ok(c, SOAK_EP_PREPARE, "prepare_model", d,
          soak_drv->prepare_model(d, client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &p)))
    return;
  md_buffer_role role = {0, 0, 1.0f};
  md_buffer_desc desc = {2, D23};
  if (!ok(c, SOAK_EP_ALLOCATE, "allocate", d,
          soak_drv->allocate(d, client, &desc, &p, 1, &role, 1, &role, 1, &tok)))
    return;
  float v[2 * SOAK_N], got[SOAK_N], want[SOAK_N];
  mdt_iota(v, 2 * SOAK_N, (float)c->n);
  for (unsigned i = 0; i < SOAK_N; i++) want[i] = v[i] + v[SOAK_N + i];

  /* ADD of a registered pool's halves into the buffer, asynchronously; then copy_to. */
  int fd = mdt_memfd(v, sizeof v);
  md_memory mem = mdt_ashmem(fd, sizeof v);
  bool reg = soak_has_registered &&
             ok(c, SOAK_EP_REGISTER, "register_memory", d, soak_drv->register_memory(d, client, &mem, &pool));
  mdt_request r;
  mdt_req_init(&r);
  if (reg) {
    uint32_t ip = mdt_req_pool_registered(&r, pool);
    mdt_req_in_arg(&r, ip, 0, SOAK_BYTES, 0, NULL);
    mdt_req_in_arg(&r, ip, SOAK_BYTES, SOAK_BYTES, 0, NULL);
  } else {
    mdt_req_in_data(&r, v, SOAK_BYTES, 0, NULL);
    mdt_req_in_data(&r, v + SOAK_N, SOAK_BYTES, 0, NULL);
  }
  mdt_req_out_token(&r, tok, 0, NULL);
  if (ok(c, SOAK_EP_EXECUTE_ASYNC, "execute_async", d, soak_drv->execute_async(d, client, p, mdt_req(&r), &ev)) &&
      ok(c, SOAK_EP_WAIT, "wait_event", d, soak_drv->wait_event(d, client, ev, UINT64_MAX, NULL, 0, NULL))) {
    int ofd = mdt_memfd(NULL, SOAK_BYTES);
    md_memory out = mdt_ashmem(ofd, SOAK_BYTES);
    if (ok(c, SOAK_EP_COPY_TO, "copy_to", d, soak_drv->copy_to(d, client, tok, &out))) {
      mdt_read_fd(ofd, got, SOAK_BYTES);
      check_vals(c, "copy_to", got, want, SOAK_N);
    }
    close(ofd);
  }
  mdt_req_fini(&r);
  if (reg) ok(c, SOAK_EP_UNREGISTER, "unregister_memory", d, soak_drv->unregister_memory(d, client, pool));
  close(fd);
}

/* An ADD of two [BIG,BIG] pools: the device's workers run it. */
static void big_work(cyc *c, md_device *d, md_handle client) {
  static float a[BIG * BIG], b[BIG * BIG];
  static const uint32_t dims[2] = {BIG, BIG};
  const uint64_t bytes = sizeof a;
  for (unsigned i = 0; i < BIG * BIG; i++) {
    a[i] = (float)(i % 1000);
    b[i] = (float)c->n;
  }
  mdt_model mb;
  md_handle p = 0, ev = 0;
  if (!ok(c, SOAK_EP_PREPARE, "prepare_model", d,
          soak_drv->prepare_model(d, client, mdt_add_model(&mb, 2, dims, 2, dims, 2, dims, 0), &p)))
    return;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, bytes, 0, NULL);
  mdt_req_in_data(&r, b, bytes, 0, NULL);
  mdt_req_out_pool(&r, bytes, 0, NULL);
  if (ok(c, SOAK_EP_EXECUTE_ASYNC, "execute_async", d, soak_drv->execute_async(d, client, p, mdt_req(&r), &ev)) &&
      ok(c, SOAK_EP_WAIT, "wait_event", d, soak_drv->wait_event(d, client, ev, UINT64_MAX, NULL, 0, NULL))) {
    float got[4], want[4];
    uint32_t at[4] = {0, 1, BIG * BIG / 2, BIG * BIG - 1};
    for (int i = 0; i < 4; i++) {
      want[i] = a[at[i]] + b[at[i]];
      if (pread(r.fds[r.out[0].pool], &got[i], sizeof got[i], (off_t)at[i] * 4) != (ssize_t)sizeof got[i]) got[i] = -1;
    }
    check_vals(c, "wait_event", got, want, 4);
  }
  long th = count_dir("/proc/self/task");   /* the device's workers, for the report */
  if (th > c->s->threads_max) c->s->threads_max = th;
  mdt_req_fini(&r);
  ok(c, SOAK_EP_RELEASE, "release_prepared_model", d, soak_drv->release_prepared_model(d, client, p));
}

/* open_client, the work, close_client: the report must be exactly one model and one buffer. */
static void client_cycle(cyc *c, md_device *d, bool big) {
  md_handle client = 0;
  if (!ok(c, SOAK_EP_OPEN_CLIENT, "open_client", d, soak_drv->open_client(d, &client))) return;
  client_work(c, d, client);
  if (big) big_work(c, d, client);
  md_leak_report rep;
  memset(&rep, 0xff, sizeof rep);
  if (ok(c, SOAK_EP_CLOSE_CLIENT, "close_client", d, soak_drv->close_client(d, client, &rep)) && !c->failed &&
      (rep.buffers != 1 || rep.prepared_models != 1 || rep.events != 0 || rep.bytes != SOAK_BYTES)) {
    soak_fail("close_client", -1, c->n, MD_NONE, NULL,
              "open/close cycle %u: leak report {buffers %u, prepared_models %u, events %u, bytes %llu}, want {1, 1, 0, %u}",
              c->n, rep.buffers, rep.prepared_models, rep.events, (unsigned long long)rep.bytes, SOAK_BYTES);
    c->failed = true;
  }
}

static void device_cycle(cyc *c) {
  md_device *d = NULL;
  if (!ok(c, SOAK_EP_OPEN_DEVICE, "open_device", d, soak_drv->open_device(c->o->config, &d))) return;
  client_cycle(c, d, true);
  c->s->calls[SOAK_EP_CLOSE_DEVICE]++;
  soak_drv->close_device(d);
}

void soak_cycles(const soak_opts *o, soak_cycle_stats *s) {
  memset(s, 0, sizeof *s);
  s->rss_tolerance_kib = RSS_TOLERANCE_KIB;
  cyc c = {o, s, 0, false};
  md_device *d = NULL;

  /* Warm-up: first-use allocations (kernel registry, backends, thread-local buffers, the
   * allocator's arenas) happen here, not in the measured cycles. */
  for (c.n = 0; c.n < WARMUP && !c.failed; c.n++) device_cycle(&c);
  if (ok(&c, SOAK_EP_OPEN_DEVICE, "open_device", NULL, soak_drv->open_device(o->config, &d))) {
    for (c.n = 0; c.n < WARMUP && !c.failed; c.n++) client_cycle(&c, d, false);
    c.s->calls[SOAK_EP_CLOSE_DEVICE]++;
    soak_drv->close_device(d);
  }
  s->fds0 = count_dir("/proc/self/fd");
  s->threads0 = count_dir("/proc/self/task");
  s->rss0_kib = rss_kib();
  s->heap0 = heap_bytes();

  for (c.n = 0; c.n < o->cycles && !c.failed; c.n++, s->device_cycles++) device_cycle(&c);
  if (!c.failed && ok(&c, SOAK_EP_OPEN_DEVICE, "open_device", NULL, soak_drv->open_device(o->config, &d))) {
    for (c.n = 0; c.n < o->cycles && !c.failed; c.n++, s->client_cycles++) client_cycle(&c, d, false);
    c.s->calls[SOAK_EP_CLOSE_DEVICE]++;
    soak_drv->close_device(d);
  }

  s->fds1 = count_dir("/proc/self/fd");
  s->threads1 = count_dir("/proc/self/task");
  s->rss1_kib = rss_kib();
  s->heap1 = heap_bytes();
  if (c.failed) return;   /* a failed cycle leaves objects behind; the counts would say nothing more */
  if (s->fds1 > s->fds0)
    soak_fail("cycles", -1, o->cycles, -1, NULL, "open fds grew from %ld to %ld over %u device and %u client cycles",
              s->fds0, s->fds1, s->device_cycles, s->client_cycles);
  if (s->threads1 > s->threads0)
    soak_fail("cycles", -1, o->cycles, -1, NULL, "threads grew from %ld to %ld over %u device and %u client cycles",
              s->threads0, s->threads1, s->device_cycles, s->client_cycles);
  if (s->rss0_kib < 0 || s->rss1_kib < 0 || s->rss1_kib - s->rss0_kib > s->rss_tolerance_kib)
    soak_fail("cycles", -1, o->cycles, -1, NULL,
              "RSS grew from %ld to %ld KiB (more than %ld KiB) over %u device and %u client cycles", s->rss0_kib,
              s->rss1_kib, s->rss_tolerance_kib, s->device_cycles, s->client_cycles);
#ifdef SOAK_ASAN
  if (s->heap1 - s->heap0 > HEAP_TOLERANCE_BYTES)
    soak_fail("cycles", -1, o->cycles, -1, NULL,
              "live heap grew from %ld to %ld bytes (more than %ld) over %u device and %u client cycles", s->heap0,
              s->heap1, HEAP_TOLERANCE_BYTES, s->device_cycles, s->client_cycles);
#endif
}
