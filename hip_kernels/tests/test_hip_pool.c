/* test_hip_pool.c - the hip backend's size-class pool, on the CPU: reservations come from a
 * malloc-backed ops table that counts calls and can refuse (out of device memory). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_pool.h"

typedef struct fake {
  uint64_t reserves, releases, live_bytes;
  uint64_t fail_above;   /* refuse reservations once live_bytes would pass this (0: never) */
  uint64_t addr[64], size[64]; /* live reservations */
} fake;

static md_status fake_reserve(void *ctx, uint64_t bytes, uint64_t *addr, char *err, size_t errlen) {
  fake *f = ctx;
  if (f->fail_above && f->live_bytes + bytes > f->fail_above) {
    snprintf(err, errlen, "hipMalloc(%llu bytes): out of memory", (unsigned long long)bytes);
    return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  }
  void *p = aligned_alloc(MD__HPOOL_GRAIN, bytes);
  cr_assert_not_null(p);
  f->reserves++;
  f->live_bytes += bytes;
  for (int i = 0; i < 64; i++)
    if (!f->addr[i]) {
      f->addr[i] = (uint64_t)(uintptr_t)p;
      f->size[i] = bytes;
      break;
    }
  *addr = (uint64_t)(uintptr_t)p;
  return MD_NONE;
}

static void fake_release(void *ctx, uint64_t addr) {
  fake *f = ctx;
  f->releases++;
  for (int i = 0; i < 64; i++)
    if (f->addr[i] == addr) {
      f->live_bytes -= f->size[i];
      f->addr[i] = 0;
    }
  free((void *)(uintptr_t)addr);
}

static md__hpool *make(fake *f, uint64_t limit) {
  md__hpool_ops ops = {.reserve = fake_reserve, .release = fake_release, .ctx = f};
  md__hpool *p = md__hpool_create(&ops, limit);
  cr_assert_not_null(p);
  return p;
}

Test(hip_pool, class_sizes_round_up_by_at_most_a_quarter) {
  cr_assert_eq(md__hpool_class_size(1), 256);
  cr_assert_eq(md__hpool_class_size(256), 256);
  cr_assert_eq(md__hpool_class_size(257), 512);
  cr_assert_eq(md__hpool_class_size(1024), 1024);
  cr_assert_eq(md__hpool_class_size(1025), 1280);
  cr_assert_eq(md__hpool_class_size(2048), 2048);
  cr_assert_eq(md__hpool_class_size(2049), 2560);
  for (uint64_t n = 1; n < (UINT64_C(1) << 40); n = n * 3 + 1) {
    uint64_t c = md__hpool_class_size(n);
    cr_assert(c >= n && c % MD__HPOOL_GRAIN == 0, "n %llu class %llu", (unsigned long long)n, (unsigned long long)c);
    if (n > 1024) cr_assert(c - n <= n / 4 + 1, "n %llu class %llu", (unsigned long long)n, (unsigned long long)c);
  }
}

Test(hip_pool, freed_blocks_are_reused_without_reserving) {
  fake f = {0};
  md__hpool *p = make(&f, UINT64_C(1) << 30);
  char err[256];
  uint64_t a, b;
  cr_assert_eq(md__hpool_alloc(p, 1000, &a, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 5u << 20, &b, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(a % MD__HPOOL_GRAIN, 0);
  uint64_t r = f.reserves;
  for (int i = 0; i < 100; i++) {
    cr_assert_eq(md__hpool_free(p, a), 0);
    cr_assert_eq(md__hpool_free(p, b), 0);
    cr_assert_eq(md__hpool_alloc(p, 900, &a, err, sizeof err), MD_NONE, "%s", err);
    cr_assert_eq(md__hpool_alloc(p, (5u << 20) - 7, &b, err, sizeof err), MD_NONE, "%s", err);
  }
  cr_assert_eq(f.reserves, r, "a steady workload reserves nothing after warm-up");
  cr_assert_eq(md__hpool_block_size(p, b), (5u << 20) - 7, "the requested size, not the class's");
  md__hpool_destroy(p);
  cr_assert_eq(f.reserves, f.releases, "destroy releases every slab, live blocks included");
}

Test(hip_pool, small_blocks_share_a_slab_and_never_overlap) {
  fake f = {0};
  md__hpool *p = make(&f, UINT64_C(1) << 30);
  char err[256];
  enum { N = 300 };
  uint64_t a[N];
  for (int i = 0; i < N; i++) {
    cr_assert_eq(md__hpool_alloc(p, 4096, &a[i], err, sizeof err), MD_NONE, "%s", err);
    memset((void *)(uintptr_t)a[i], i & 0xff, 4096);
  }
  cr_assert_eq(f.reserves, 1, "300 x 4 KiB fit one 4 MiB slab");
  for (int i = 0; i < N; i++) {
    const unsigned char *q = (const unsigned char *)(uintptr_t)a[i];
    cr_assert(q[0] == (i & 0xff) && q[4095] == (i & 0xff), "block %d was overwritten", i);
  }
  cr_assert_eq(md__hpool_free(p, a[7] + 256), -1, "an interior address is not a block");
  cr_assert_eq(md__hpool_free(p, 12345), -1);
  for (int i = 0; i < N; i++) cr_assert_eq(md__hpool_free(p, a[i]), 0);
  cr_assert_eq(md__hpool_free(p, a[0]), -1, "a double free is refused");
  md__hpool_stats s;
  md__hpool_stats_get(p, &s);
  cr_assert_eq(s.bytes_live, 0);
  cr_assert_eq(s.bytes_peak, (uint64_t)N * 4096);
  md__hpool_destroy(p);
}

Test(hip_pool, the_limit_is_persistent_for_one_block_and_transient_for_the_sum) {
  fake f = {0};
  md__hpool *p = make(&f, 64u << 20);
  char err[256];
  uint64_t a, b, c;
  cr_assert_eq(md__hpool_alloc(p, 65u << 20, &a, err, sizeof err), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  cr_assert(strstr(err, "limit"), "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 40u << 20, &a, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 40u << 20, &b, err, sizeof err), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  /* Freed, the 40 MiB block is cached; a request of another class trims it to make room. */
  cr_assert_eq(md__hpool_free(p, a), 0);
  cr_assert_eq(md__hpool_alloc(p, 50u << 20, &c, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(f.releases, 1);
  md__hpool_destroy(p);
}

Test(hip_pool, device_out_of_memory_trims_the_cache_and_retries) {
  fake f = {.fail_above = 48u << 20};
  md__hpool *p = make(&f, UINT64_C(1) << 30);
  char err[256];
  uint64_t a, b;
  cr_assert_eq(md__hpool_alloc(p, 32u << 20, &a, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 24u << 20, &b, err, sizeof err), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert(strstr(err, "out of memory"), "%s", err);
  cr_assert_eq(md__hpool_free(p, a), 0);
  cr_assert_eq(md__hpool_alloc(p, 24u << 20, &b, err, sizeof err), MD_NONE, "%s", err);
  md__hpool_stats s;
  md__hpool_stats_get(p, &s);
  cr_assert_eq(s.reserved, md__hpool_class_size(24u << 20));
  md__hpool_destroy(p);
  cr_assert_eq(f.reserves, f.releases);
}

Test(hip_pool, trim_releases_only_slabs_without_live_blocks) {
  fake f = {0};
  md__hpool *p = make(&f, UINT64_C(1) << 30);
  char err[256];
  uint64_t a, b, big;
  cr_assert_eq(md__hpool_alloc(p, 512, &a, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 512, &b, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_alloc(p, 8u << 20, &big, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(md__hpool_free(p, a), 0);
  cr_assert_eq(md__hpool_free(p, big), 0);
  cr_assert_eq(md__hpool_trim(p), 8u << 20, "the small slab still holds b");
  cr_assert_eq(md__hpool_block_size(p, b), 512);
  cr_assert_eq(md__hpool_free(p, b), 0);
  cr_assert_eq(md__hpool_trim(p), MD__HPOOL_SLAB / 512 * 512);
  cr_assert_eq(md__hpool_alloc(p, 512, &a, err, sizeof err), MD_NONE, "%s", err);
  md__hpool_destroy(p);
  cr_assert_eq(f.reserves, f.releases);
}

/* Frees every block of one class after it grew a second slab, then takes them all again. The
 * free list must hold every block of the class, not only the newest slab's (it was sized for
 * the newest slab: 17 blocks of 256 KiB, or 16,385 of 256 B, freed, wrote past its end). */
static void fill_two_slabs_and_free_all(uint64_t size) {
  fake f = {0};
  md__hpool *p = make(&f, UINT64_C(1) << 30);
  char err[256];
  const uint64_t per_slab = MD__HPOOL_SLAB / md__hpool_class_size(size), n = per_slab + 1;
  uint64_t *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
  cr_assert(a && b);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(md__hpool_alloc(p, size, &a[i], err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(f.reserves, 2, "%llu blocks take a second slab", (unsigned long long)n);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(md__hpool_free(p, a[i]), 0);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(md__hpool_alloc(p, size, &b[i], err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(f.reserves, 2, "every freed block is handed out again");
  for (uint64_t i = 0; i < n; i++) {
    cr_assert_eq(md__hpool_block_size(p, a[i]), size, "block %llu is live again",
                 (unsigned long long)i);
    cr_assert_eq(md__hpool_free(p, a[i]), 0);
  }
  md__hpool_stats s;
  md__hpool_stats_get(p, &s);
  cr_assert_eq(s.bytes_live, 0);
  md__hpool_destroy(p);
  free(a);
  free(b);
}

Test(hip_pool, freeing_a_large_class_over_two_slabs_stays_in_the_free_list) {
  fill_two_slabs_and_free_all(256u << 10);
}

Test(hip_pool, freeing_a_small_class_over_two_slabs_stays_in_the_free_list) {
  fill_two_slabs_and_free_all(256);
}
