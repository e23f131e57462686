/* test_concurrency_pool.c - many threads acquiring pools through one per-client cache (pool.h).
 * Runs under ThreadSanitizer. No sleeps: threads meet at barriers and are joined. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "pool.h"

#define THREADS 8
#define ROUNDS 1000
#define FILES 4
#define BYTES 8192

static uint8_t pattern(uint8_t seed, size_t i) { return (uint8_t)((i * 7 + seed) & 0xff); }

static int pattern_fd(size_t n, uint8_t seed) {
  int fd = memfd_create("pool-conc", MFD_CLOEXEC);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, (off_t)n), 0);
  uint8_t buf[4096];
  for (size_t at = 0; at < n; at += sizeof buf) {
    size_t k = n - at < sizeof buf ? n - at : sizeof buf;
    for (size_t i = 0; i < k; i++) buf[i] = pattern(seed, at + i);
    cr_assert_eq(pwrite(fd, buf, k, (off_t)at), (ssize_t)k);
  }
  return fd;
}

typedef struct shared {
  md__pool_cache *c;
  md_memory m[FILES];
  int n_files;
  pthread_barrier_t start, held;
  int tid_next;
  pthread_mutex_t tid_lock;
} shared;

static int next_tid(shared *sh) {
  pthread_mutex_lock(&sh->tid_lock);
  int t = sh->tid_next++;
  pthread_mutex_unlock(&sh->tid_lock);
  return t;
}

/* Checks a few bytes of file f's mapping. */
static int content_ok(const md__mapping *map, int f, int round) {
  size_t at[] = {0, (size_t)round % BYTES, BYTES - 1};
  for (size_t k = 0; k < 3; k++)
    if (map->base[at[k]] != pattern((uint8_t)(f * 40 + 1), at[k])) return 0;
  return 1;
}

/* Each round: acquire file (tid + round) % n_files, check its bytes, release. */
static void *churn(void *p) {
  shared *sh = p;
  int tid = next_tid(sh);
  pthread_barrier_wait(&sh->start);
  for (int r = 0; r < ROUNDS; r++) {
    int f = (tid + r) % sh->n_files;
    md__mapping map;
    if (md__pool_acquire(sh->c, &sh->m[f], MD__POOL_IO, "request pool 0", NULL, &map) != MD_NONE)
      return (void *)1;
    if (!content_ok(&map, f, r)) return (void *)2;
    md__mapping_release(&map);
  }
  return NULL;
}

static void setup(shared *sh, int n_files, uint32_t max_idle) {
  cr_assert_eq(md__pool_cache_create(max_idle, &sh->c), MD_NONE);
  sh->n_files = n_files;
  for (int f = 0; f < n_files; f++)
    sh->m[f] = (md_memory){.kind = MD_MEM_MMAP_FD, .fd = pattern_fd(BYTES, (uint8_t)(f * 40 + 1)),
                           .size = BYTES, .prot = PROT_READ};
  cr_assert_eq(pthread_barrier_init(&sh->start, NULL, THREADS), 0);
  cr_assert_eq(pthread_barrier_init(&sh->held, NULL, THREADS + 1), 0);
  cr_assert_eq(pthread_mutex_init(&sh->tid_lock, NULL), 0);
}

static void teardown(shared *sh) {
  if (sh->c) md__pool_cache_destroy(sh->c);
  for (int f = 0; f < sh->n_files; f++) close(sh->m[f].fd);
  pthread_barrier_destroy(&sh->start);
  pthread_barrier_destroy(&sh->held);
  pthread_mutex_destroy(&sh->tid_lock);
}

static void run(shared *sh, void *(*fn)(void *)) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, fn, sh), 0);
  for (int i = 0; i < THREADS; i++) {
    void *ret;
    cr_assert_eq(pthread_join(t[i], &ret), 0);
    cr_expect_null(ret, "thread %d failed at step %ld: %s", i, (long)(intptr_t)ret,
                   md__last_error());
  }
}

Test(pool_concurrency, warm_cache_maps_one_pool_once_for_all_threads) {
  static shared sh;
  setup(&sh, 1, 4);
  md__mapping warm;
  cr_assert_eq(md__pool_acquire(sh.c, &sh.m[0], MD__POOL_IO, "warm", NULL, &warm), MD_NONE);
  md__mapping_release(&warm);
  run(&sh, churn);
  cr_expect_eq(md__pool_cache_maps(sh.c), 1);
  cr_expect_eq(md__pool_cache_size(sh.c), 1);
  teardown(&sh);
}

Test(pool_concurrency, cold_cache_keeps_one_entry_when_threads_race_to_map) {
  static shared sh;
  setup(&sh, 1, 4);
  run(&sh, churn);   /* losers of the first-miss race unmap their copy */
  cr_expect_geq(md__pool_cache_maps(sh.c), 1);
  cr_expect_leq(md__pool_cache_maps(sh.c), THREADS);
  cr_expect_eq(md__pool_cache_size(sh.c), 1);
  teardown(&sh);
}

Test(pool_concurrency, eviction_under_churn_never_unmaps_a_mapping_in_use) {
  static shared sh;
  setup(&sh, FILES, 2);   /* four files, room for two: constant eviction */
  run(&sh, churn);
  cr_expect_leq(md__pool_cache_size(sh.c), 2);
  teardown(&sh);
}

/* Acquires every file, waits while the main thread destroys the cache, then reads and
 * releases: destroy must leave in-flight mappings alone. */
static void *hold_across_destroy(void *p) {
  shared *sh = p;
  md__mapping map[FILES];
  for (int f = 0; f < sh->n_files; f++)
    if (md__pool_acquire(sh->c, &sh->m[f], MD__POOL_IO, "request pool 1", NULL, &map[f]) != MD_NONE)
      return (void *)1;
  pthread_barrier_wait(&sh->held);   /* main destroys the cache */
  pthread_barrier_wait(&sh->held);
  for (int f = 0; f < sh->n_files; f++) {
    if (!content_ok(&map[f], f, f * 1000)) return (void *)2;
    md__mapping_release(&map[f]);
  }
  return NULL;
}

static void *destroyer(void *p) {
  shared *sh = p;
  pthread_barrier_wait(&sh->held);
  md__pool_cache_destroy(sh->c);
  sh->c = NULL;
  pthread_barrier_wait(&sh->held);
  return NULL;
}

Test(pool_concurrency, destroy_while_threads_hold_mappings_defers_to_their_release) {
  static shared sh;
  setup(&sh, FILES, 8);
  pthread_t d;
  cr_assert_eq(pthread_create(&d, NULL, destroyer, &sh), 0);
  run(&sh, hold_across_destroy);
  cr_assert_eq(pthread_join(d, NULL), 0);
  cr_expect_null(sh.c);
  teardown(&sh);
}
