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

/* Work on a stream is queued: wait for it before looking at the bytes (or the status). */
static md_status synced(md_status st, md_backend *d, md_stream *s) {
  md_status t = simt_get()->ops->stream_sync(d, s, NULL, 0);
  return st != MD_NONE ? st : t;
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
      if (synced(ops->write(d, s, q, 0, src, size, NULL, 0), d, s) != MD_NONE) w->failures++;
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
      if (synced(ops->copy(d, s, p[j], 0, p[i], 0, m, NULL, 0), d, s) != MD_NONE) w->failures++;
      /* p[j] now holds p[i]'s pattern for m bytes: rewrite the tail to keep one pattern. */
      serial[j] = serial[i];
      if (n[j] > m) {
        for (uint64_t k = m; k < n[j]; k++) src[k] = pat(w->id, serial[j], k);
        if (synced(ops->write(d, s, p[j], m, src + m, n[j] - m, NULL, 0), d, s) != MD_NONE) w->failures++;
      }
    } else if (op == 3) { /* a kernel on this thread's buffer, then restore the pattern */
      md_tensor to = simt_tensor(ops->kernel_ptr(d, p[i]), n[i] / 4);
      md_kernel_status st;
      if (synced(simt_launch(s, &fill, NULL, &to, &st), d, s) != MD_NONE) w->failures++;
      const float *f = to.data;
      for (uint64_t k = 0; k < n[i] / 4; k++)
        if (f[k] != 1.0f) {
          w->bad_bytes++;
          break;
        }
      for (uint64_t k = 0; k < n[i]; k++) src[k] = pat(w->id, serial[i], k);
      if (synced(ops->write(d, s, p[i], 0, src, n[i], NULL, 0), d, s) != MD_NONE) w->failures++;
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
      if (synced(simt_launch(s, &inc, &ti, &to, &st), d, s) != MD_NONE) w->failures++;
      for (uint64_t k = 0; k < floats * 4; k++) src[k] = pat(w->id, serial[i], k);
      if (synced(ops->write(d, s, p[i], 0, src, floats * 4, NULL, 0), d, s) != MD_NONE) w->failures++;
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
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees + s.bad_pointers + s.redzone_reads, 0);
  cr_expect_leq(s.clock_ns, 100 * s.common.launches, "no launch advanced a clock twice");
  cr_expect_geq(s.clock_ns, 100, "launches advanced the clock");
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

/* Lookups take no lock. Threads resolving addresses inside live allocations (kernel_ptr of
 * interior devptrs, copies at offsets, a launch's tensor and red-zone checks) while other
 * threads allocate and free the blocks around those allocations (splitting and coalescing
 * their neighbours) always get the exact answer. */
enum { STABLE = 48, LOOKUPS = 6000, CHURN = 3000 };

typedef struct lookup_arg {
  md_devptr p[STABLE];
  uint64_t n[STABLE];
  uint8_t *h[STABLE];
  int id, wrong;
} lookup_arg;

static void *churn(void *arg) {
  lookup_arg *a = arg;
  simt *t = simt_get();
  md_devptr mine[16] = {0};
  uint64_t seed = 0xC0FFEEull + (uint64_t)a->id;
  for (int it = 0; it < CHURN; it++) {
    int i = (int)(rnd(&seed) % 16);
    if (mine[i]) {
      t->ops->free(t->dev, mine[i]);
      mine[i] = 0;
    } else if (t->ops->alloc(t->dev, 1 + rnd(&seed) % 3000, &mine[i]) != MD_NONE) {
      mine[i] = 0;
    }
  }
  for (int i = 0; i < 16; i++)
    if (mine[i]) t->ops->free(t->dev, mine[i]);
  return NULL;
}

static void *lookups(void *arg) {
  lookup_arg *a = arg;
  simt *t = simt_get();
  md_backend *d = t->dev;
  uint64_t seed = 0xBEEFull + (uint64_t)a->id;
  md_kernel_def inc = simt_kernel("inc", simt_k_inc);
  md_devptr out = 0;
  if (t->ops->alloc(d, 64, &out) != MD_NONE) {
    a->wrong++;
    return NULL;
  }
  md_tensor to = simt_tensor(t->ops->kernel_ptr(d, out), 1);
  for (int it = 0; it < LOOKUPS; it++) {
    int i = (int)(rnd(&seed) % STABLE);
    uint64_t k = rnd(&seed) % a->n[i];
    if (t->ops->kernel_ptr(d, a->p[i] + k) != a->h[i] + k) a->wrong++;
    if (t->ops->kernel_ptr(d, a->p[i] + a->n[i]) != NULL) a->wrong++;
    uint8_t b;
    if (t->ops->read(d, NULL, &b, a->p[i] + k, 0, 1, NULL, 0) != MD_NONE || b != (uint8_t)(i + k)) a->wrong++;
    uint64_t k4 = k & ~3ull;   /* a float-aligned interior address */
    if (k4 + 4 <= a->n[i]) {
      md_tensor ti = simt_tensor(a->h[i] + k4, 1);
      md_kernel_status st;
      if (simt_launch(NULL, &inc, &ti, &to, &st) != MD_NONE) a->wrong++;
    }
  }
  t->ops->free(d, out);
  return NULL;
}

Test(concurrency, lookups_never_miss_while_neighbouring_blocks_come_and_go) {
  md_backend *d = simt_open(32 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  lookup_arg a[4];
  memset(a, 0, sizeof a);
  /* Stable blocks with holes between them, for the churn to split and coalesce. */
  md_devptr holes[STABLE];
  uint64_t seed = 3;
  uint8_t *src = malloc(70000);
  cr_assert_not_null(src);
  for (int i = 0; i < STABLE; i++) {
    holes[i] = simt_alloc(1 + rnd(&seed) % 5000);
    a[0].n[i] = i % 8 == 0 ? 65536 + rnd(&seed) % 4000 : 1 + rnd(&seed) % 3000;  /* some span leaves */
    a[0].p[i] = simt_alloc(a[0].n[i]);
    a[0].h[i] = ops->kernel_ptr(d, a[0].p[i]);
    for (uint64_t k = 0; k < a[0].n[i]; k++) src[k] = (uint8_t)(i + k);
    cr_assert_eq(ops->write(d, NULL, a[0].p[i], 0, src, a[0].n[i], NULL, 0), MD_NONE);
  }
  free(src);
  for (int i = 0; i < STABLE; i++) ops->free(d, holes[i]);
  for (int i = 1; i < 4; i++) memcpy(&a[i], &a[0], sizeof a[0]);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    a[i].id = i;
    cr_assert_eq(pthread_create(&th[i], NULL, i < 2 ? lookups : churn, &a[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  cr_expect_eq(a[0].wrong + a[1].wrong, 0, "%d wrong lookups", a[0].wrong + a[1].wrong);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.live_blocks, STABLE);
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees + s.bad_pointers + s.redzone_reads, 0);
  for (int i = 0; i < STABLE; i++) ops->free(d, a[0].p[i]);
  cr_expect_eq(simt_stats().free_blocks, 1);
}

/* Reads past an end, found under threads: kernels that copy past their input's end into their
 * output (the red-zone canary read) run on some threads, clean ones on the same buffers in
 * between, while other threads allocate and free the blocks around them. Every over-read
 * fails naming its own input, no clean launch fails, and each finding is counted once. */
enum { OVERREADS = 400 };

typedef struct overread_arg {
  int id, wrong, found;
} overread_arg;

static void k_overread(const md_kernel_call *c, md_kernel_status *st) {
  memcpy(c->outputs[0].data, c->inputs[0].data, c->outputs[0].bytes);
}

static void *overreads(void *arg) {
  overread_arg *a = arg;
  simt *t = simt_get();
  md_backend *d = t->dev;
  md_kernel_def k = simt_kernel("overread", k_overread);
  md_devptr in = 0, out = 0;
  char hex[24];
  for (int it = 0; it < OVERREADS; it++) {
    if (it % 50 == 0) {   /* move to new blocks now and then */
      if (in) t->ops->free(d, in);
      if (out) t->ops->free(d, out);
      uint64_t n = 64 + 8 * (uint64_t)((it / 50 + a->id) % 8);
      if (t->ops->alloc(d, n, &in) != MD_NONE || t->ops->alloc(d, n + 64, &out) != MD_NONE) {
        a->wrong++;
        return NULL;
      }
      simt_hex(in, hex);
    }
    md_tensor ti = simt_tensor(t->ops->kernel_ptr(d, in), 16);
    md_tensor to = simt_tensor(t->ops->kernel_ptr(d, out), it % 2 ? ti.dims[0] + 16 : 16);
    memset(to.data, 0, to.bytes);   /* no copy left from the last over-read */
    md_kernel_status st;
    md_status rc = simt_launch(NULL, &k, &ti, &to, &st);
    if (it % 2 == 0) {
      a->wrong += rc != MD_NONE;
    } else if (rc == MD_GENERAL_FAILURE && strstr(st.message, "red zone read") && strstr(st.message, hex)) {
      a->found++;
    } else {
      a->wrong++;
    }
  }
  t->ops->free(d, in);
  t->ops->free(d, out);
  return NULL;
}

Test(concurrency, reads_past_an_end_are_found_once_each_while_neighbours_come_and_go) {
  simt_open(32 * MIB, NULL, 0);
  overread_arg o[2];
  lookup_arg c[2];
  memset(o, 0, sizeof o);
  memset(c, 0, sizeof c);
  pthread_t th[4];
  for (int i = 0; i < 2; i++) {
    o[i].id = i;
    c[i].id = 10 + i;
    cr_assert_eq(pthread_create(&th[i], NULL, overreads, &o[i]), 0);
    cr_assert_eq(pthread_create(&th[2 + i], NULL, churn, &c[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  cr_expect_eq(o[0].wrong + o[1].wrong, 0, "%d launches judged wrongly", o[0].wrong + o[1].wrong);
  cr_expect_eq(o[0].found + o[1].found, OVERREADS, "over-reads found: %d", o[0].found + o[1].found);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.redzone_reads, OVERREADS, "each counted once");
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees + s.bad_pointers, 0);
  cr_expect_eq(s.free_blocks, 1);
}
