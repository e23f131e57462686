/* test_concurrency.c - the sim device under threads (also run under ThreadSanitizer): threads
 * allocating, writing, copying, launching, reading and freeing at once never get overlapping
 * ranges, never see another thread's bytes, and leave the counters consistent. */
#include "sim_test.h"

#include <pthread.h>
#include <stdlib.h>

#define MIB (1024ull * 1024ull)
#define THREADS 4
#define ITERS 1500
#define LIVE 8

TestSuite(concurrency, .fini = simt_close);

/* Every range a thread holds, registered after alloc returns and removed before free, so two
 * registered ranges overlapping is the allocator's fault. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t lo, hi; int used; } reg[THREADS * LIVE];

static int reg_add(md_devptr p, uint64_t n) {
  int ok = 1, slot = -1;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < THREADS * LIVE; i++) {
    if (!reg[i].used) {
      if (slot < 0) slot = i;
      continue;
    }
    if (p < reg[i].hi && reg[i].lo < p + n) ok = 0;
  }
  if (slot >= 0) reg[slot].lo = p, reg[slot].hi = p + n, reg[slot].used = 1;
  pthread_mutex_unlock(&reg_lock);
  return ok && slot >= 0;
}

static void reg_remove(md_devptr p) {
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < THREADS * LIVE; i++)
    if (reg[i].used && reg[i].lo == p) reg[i].used = 0;
  pthread_mutex_unlock(&reg_lock);
}

typedef struct worker {
  int id;
  md_devptr shared;                /* read by every thread */
  uint64_t shared_n;
  _Atomic int *stop;
  /* results, checked by the test thread */
  int overlaps, bad_bytes, failures;
  uint64_t allocs, frees;
} worker;

static uint8_t pat(int tid, uint64_t serial, uint64_t i) { return (uint8_t)(tid * 31 + serial * 7 + i); }

static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static int verify(md_backend *d, md_devptr p, uint64_t n, int tid, uint64_t serial, uint8_t *buf) {
  if (simt_get()->ops->read(d, NULL, buf, p, 0, n, NULL, 0) != MD_NONE) return -1;
  for (uint64_t i = 0; i < n; i++)
    if (buf[i] != pat(tid, serial, i)) return 1;
  return 0;
}

static void *work(void *arg) {
  worker *w = arg;
  simt *t = simt_get();
  md_backend *d = t->dev;
  const md_backend_ops *ops = t->ops;
  md_devptr p[LIVE] = {0};
  uint64_t n[LIVE] = {0}, serial[LIVE] = {0}, next_serial = 1, seed = 0x9E3779B97F4A7C15ull * (uint64_t)(w->id + 1);
  uint8_t *buf = malloc(20000), *src = malloc(20000);
  md_stream *s = NULL;
  if (!buf || !src || ops->stream_create(d, &s) != MD_NONE) {
    w->failures++;
    return NULL;
  }
  md_kernel_def fill = simt_kernel("fill", simt_k_fill), inc = simt_kernel("inc", simt_k_inc);
  for (int it = 0; it < ITERS; it++) {
    int i = (int)(rnd(&seed) % LIVE);
    unsigned op = (unsigned)(rnd(&seed) % 6);
    if (!p[i]) {
      uint64_t size = 4 + rnd(&seed) % 20000 / 4 * 4;
      md_devptr q = 0;
      md_status st = ops->alloc(d, size, &q);
      if (st == MD_RESOURCE_EXHAUSTED_TRANSIENT) continue;
      if (st != MD_NONE) {
        w->failures++;
        continue;
      }
      w->allocs++;
      if (!reg_add(q, size)) w->overlaps++;
      p[i] = q;
      n[i] = size;
      serial[i] = next_serial++;
      for (uint64_t j = 0; j < size; j++) src[j] = pat(w->id, serial[i], j);
      if (ops->write(d, s, q, 0, src, size, NULL, 0) != MD_NONE) w->failures++;
    } else if (op == 0) {
      int r = verify(d, p[i], n[i], w->id, serial[i], buf);
      w->bad_bytes += r > 0;
      w->failures += r < 0;
      reg_remove(p[i]);
      ops->free(d, p[i]);
      w->frees++;
      p[i] = 0;
    } else if (op == 1) {
      int r = verify(d, p[i], n[i], w->id, serial[i], buf);
      w->bad_bytes += r > 0;
      w->failures += r < 0;
    } else if (op == 2) { /* device copy into another live buffer of this thread */
      int j = (int)(rnd(&seed) % LIVE);
      if (j == i || !p[j]) continue;
      uint64_t m = n[i] < n[j] ? n[i] : n[j];
      if (ops->copy(d, s, p[j], 0, p[i], 0, m, NULL, 0) != MD_NONE) w->failures++;
      /* p[j] now holds p[i]'s pattern for m bytes: rewrite the tail to keep one pattern. */
      serial[j] = serial[i];
      if (n[j] > m) {
        for (uint64_t k = m; k < n[j]; k++) src[k] = pat(w->id, serial[j], k);
        if (ops->write(d, s, p[j], m, src + m, n[j] - m, NULL, 0) != MD_NONE) w->failures++;
      }
    } else if (op == 3) { /* a kernel on this thread's buffer, then restore the pattern */
      md_tensor to = simt_tensor(ops->kernel_ptr(d, p[i]), n[i] / 4);
      md_kernel_status st;
      if (simt_launch(s, &fill, NULL, &to, &st) != MD_NONE) w->failures++;
      const float *f = to.data;
      for (uint64_t k = 0; k < n[i] / 4; k++)
        if (f[k] != 1.0f) {
          w->bad_bytes++;
          break;
        }
      for (uint64_t k = 0; k < n[i]; k++) src[k] = pat(w->id, serial[i], k);
      if (ops->write(d, s, p[i], 0, src, n[i], NULL, 0) != MD_NONE) w->failures++;
    } else if (op == 4) { /* everyone reads the shared buffer, as a copy and as a kernel input */
      if (ops->read(d, NULL, buf, w->shared, 0, w->shared_n, NULL, 0) != MD_NONE) w->failures++;
      for (uint64_t k = 0; k < w->shared_n; k++)
        if (buf[k] != (uint8_t)k) {
          w->bad_bytes++;
          break;
        }
      uint64_t floats = (n[i] < w->shared_n ? n[i] : w->shared_n) / 4;
      md_tensor ti = simt_tensor(ops->kernel_ptr(d, w->shared), floats);
      md_tensor to = simt_tensor(ops->kernel_ptr(d, p[i]), floats);
      md_kernel_status st;
      if (simt_launch(s, &inc, &ti, &to, &st) != MD_NONE) w->failures++;
      for (uint64_t k = 0; k < floats * 4; k++) src[k] = pat(w->id, serial[i], k);
      if (ops->write(d, s, p[i], 0, src, floats * 4, NULL, 0) != MD_NONE) w->failures++;
    } else {
      md_backend_stats bs;
      ops->stats(d, &bs);
      if (bs.frees > bs.allocs || bs.bytes_live > bs.bytes_peak) w->failures++;
    }
  }
  for (int i = 0; i < LIVE; i++)
    if (p[i]) {
      int r = verify(d, p[i], n[i], w->id, serial[i], buf);
      w->bad_bytes += r > 0;
      reg_remove(p[i]);
      ops->free(d, p[i]);
      w->frees++;
    }
  if (ops->stream_sync(d, s, NULL, 0) != MD_NONE) w->failures++;
  ops->stream_destroy(d, s);
  free(buf);
  free(src);
  return NULL;
}

/* Full checks and stats snapshots while the workers run. */
static void *checker(void *arg) {
  worker *w = arg;
  md_backend *d = simt_get()->dev;
  while (!atomic_load(w->stop)) {
    if (md_sim_check(d, NULL, 0) != 0) w->bad_bytes++;
    md_sim_stats s;
    md_sim_stats_get(d, &s);
    if (s.span_live + s.bytes_free != s.arena_bytes - 256) w->failures++;
    if (s.common.bytes_live > s.common.bytes_peak) w->failures++;
  }
  return NULL;
}

Test(concurrency, threads_allocating_copying_and_freeing_never_share_bytes) {
  md_backend *d = simt_open(8 * MIB, NULL, 100);
  const md_backend_ops *ops = simt_get()->ops;
  uint64_t shared_n = 4096;
  md_devptr shared = simt_alloc(shared_n);
  uint8_t init[4096];
  for (uint64_t k = 0; k < shared_n; k++) init[k] = (uint8_t)k;
  cr_assert_eq(ops->write(d, NULL, shared, 0, init, shared_n, NULL, 0), MD_NONE);

  _Atomic int stop = 0;
  worker w[THREADS + 1];
  pthread_t th[THREADS + 1];
  memset(w, 0, sizeof w);
  for (int i = 0; i <= THREADS; i++) {
    w[i].id = i;
    w[i].shared = shared;
    w[i].shared_n = shared_n;
    w[i].stop = &stop;
  }
  cr_assert_eq(pthread_create(&th[THREADS], NULL, checker, &w[THREADS]), 0);
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(th[THREADS], NULL);

  uint64_t allocs = 1, frees = 0;
  for (int i = 0; i <= THREADS; i++) {
    cr_expect_eq(w[i].overlaps, 0, "thread %d got overlapping ranges", i);
    cr_expect_eq(w[i].bad_bytes, 0, "thread %d saw bytes it did not write", i);
    cr_expect_eq(w[i].failures, 0, "thread %d had failing calls", i);
    allocs += w[i].allocs;
    frees += w[i].frees;
  }
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.allocs, allocs);
  cr_expect_eq(s.common.frees, frees);
  cr_expect_eq(s.common.bytes_live, shared_n);
  cr_expect_eq(s.live_blocks, 1);
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees + s.bad_pointers, 0);
  cr_expect_eq(s.clock_ns, 100 * s.common.launches, "every launch advanced the clock once");
  ops->free(d, shared);
  s = simt_stats();
  cr_expect_eq(s.free_blocks, 1, "everything coalesced back");
}

typedef struct free_arg {
  md_devptr p;
  pthread_barrier_t *go;
} free_arg;

static void *free_it(void *arg) {
  free_arg *a = arg;
  pthread_barrier_wait(a->go);
  simt_get()->ops->free(simt_get()->dev, a->p);
  return NULL;
}

Test(concurrency, racing_frees_of_one_pointer_free_it_once_and_report_the_other) {
  simt_open(8 * MIB, NULL, 0);
  enum { ROUNDS = 100 };
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  for (int r = 0; r < ROUNDS; r++) {
    free_arg a = {simt_alloc(1000 + (uint64_t)r), &go};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&th[i], NULL, free_it, &a), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  }
  pthread_barrier_destroy(&go);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.frees, ROUNDS);
  cr_expect_eq(s.bad_frees, ROUNDS);
  cr_expect_eq(s.common.bytes_live, 0);
  cr_expect_eq(s.free_blocks, 1);
}
