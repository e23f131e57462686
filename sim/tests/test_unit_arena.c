/* test_unit_arena.c - the arena's allocator, white-box (sim_arena.h): the reservation and the
 * limit, exact offsets and spans (payload + at least R bytes of red zone, rounded up to the
 * granule), placement in free blocks, coalescing, bad frees, lookups at every boundary, and the
 * statistics to the byte. A model of the live blocks checks every answer of random alloc/free
 * runs: an allocation succeeds exactly when a free block can hold its span, and starts where a
 * free block starts; the free blocks are the gaps between live spans. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_arena.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define GR 256ull   /* MD__ARENA_ALIGN */
#define RZ 64ull    /* MD__ARENA_REDZONE */

static uint64_t rup(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
static uint64_t span_of_size(uint64_t n) { return rup(n + RZ, GR); }

static md__arena *mk(uint64_t limit, uint64_t seed) {
  md__arena *a = NULL;
  char err[256] = "";
  cr_assert_eq(md__arena_create(limit, 0x5111000000000000ull, seed, &a, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_not_null(a);
  return a;
}

static md__arena_stats st_of(md__arena *a) {
  md__arena_stats s;
  md__arena_stats_get(a, &s);
  return s;
}

static uint64_t alloc_ok(md__arena *a, uint64_t n) {
  uint64_t off = 0;
  md_status st = md__arena_alloc(a, n, &off);
  cr_assert_eq(st, MD_NONE, "alloc(%" PRIu64 ") = %d", n, st);
  return off;
}

/* ---- create, the limit ------------------------------------------------------------------ */

Test(unit_arena, create_reserves_the_rounded_limit_plus_two_granules_as_one_free_block) {
  const uint64_t lims[] = {1, 64, 255, 256, 257, 1000, 4096, 1 * MIB, 1 * MIB + 1, 3 * MIB + 100};
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    uint64_t lim = lims[i];
    md__arena *a = mk(lim, 1);
    md__arena_stats s = st_of(a);
    uint64_t res = rup(lim, GR) + 2 * GR;
    cr_expect_eq(s.limit, lim, "limit %" PRIu64, lim);
    cr_expect_eq(s.reserved, res, "limit %" PRIu64 ": reserved %" PRIu64, lim, s.reserved);
    cr_expect_eq(md__arena_reserved(a), res);
    cr_expect_eq(s.bytes_free, res - GR, "limit %" PRIu64 ": the guard granule is not free", lim);
    cr_expect_eq(s.free_blocks, 1);
    cr_expect_eq(s.largest_free, res - GR);
    uint64_t fit = res - GR - RZ;
    cr_expect_eq(s.max_fit_now, fit < lim ? fit : lim, "limit %" PRIu64 ": max_fit_now %" PRIu64, lim,
                 s.max_fit_now);
    cr_expect_eq(s.fragmentation, 0.0);
    cr_expect_eq(s.allocs + s.frees + s.bytes_live + s.bytes_peak + s.span_live + s.live_blocks, 0);
    cr_expect_eq(s.refused_persistent + s.refused_transient + s.bad_frees + s.redzone_hits + s.poison_hits, 0);
    /* Exactly the limit fits an empty arena, at the first granule; one byte more never. */
    uint64_t off = 9;
    cr_expect_eq(md__arena_alloc(a, lim + 1, &off), MD_RESOURCE_EXHAUSTED_PERSISTENT, "limit %" PRIu64, lim);
    cr_expect_eq(off, 9, "a refusal leaves *off alone");
    off = alloc_ok(a, lim);
    cr_expect_eq(off, GR, "limit %" PRIu64 ": first allocation at %" PRIu64, lim, off);
    s = st_of(a);
    cr_expect_eq(s.span_live, span_of_size(lim));
    cr_expect_eq(s.bytes_free, res - GR - span_of_size(lim), "limit %" PRIu64, lim);
    cr_expect_eq(s.free_blocks, s.bytes_free ? 1u : 0u);
    cr_expect_eq(s.largest_free, s.bytes_free);
    cr_expect_eq(s.max_fit_now, s.bytes_free > RZ ? (s.bytes_free - RZ < lim ? s.bytes_free - RZ : lim) : 0);
    uint64_t off2 = 0;
    if (s.bytes_free >= span_of_size(lim)) {   /* a second one fits in what is left */
      cr_expect_eq(md__arena_alloc(a, lim, &off2), MD_NONE, "limit %" PRIu64, lim);
      cr_expect_eq(off2, GR + span_of_size(lim));
      cr_expect_eq(md__arena_free(a, off2), 0);
      cr_expect_eq(md__arena_alloc(a, s.bytes_free - RZ + 1, &off2),
                   s.bytes_free - RZ + 1 > lim ? MD_RESOURCE_EXHAUSTED_PERSISTENT : MD_RESOURCE_EXHAUSTED_TRANSIENT);
    } else {
      cr_expect_eq(md__arena_alloc(a, lim, &off2), MD_RESOURCE_EXHAUSTED_TRANSIENT, "limit %" PRIu64, lim);
    }
    cr_expect_eq(md__arena_free(a, GR), 0);
    s = st_of(a);
    cr_expect_eq(s.bytes_free, res - GR);
    cr_expect_eq(s.free_blocks, 1);
    cr_expect_eq(s.refused_persistent + s.refused_transient, 2, "limit %" PRIu64, lim);
    md__arena_destroy(a);
  }
}

Test(unit_arena, limit_zero_is_the_default_and_larger_limits_are_capped) {
  md__arena *a = mk(0, 1);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.limit, MD__ARENA_DEFAULT_LIMIT);
  cr_expect_eq(s.reserved, MD__ARENA_DEFAULT_LIMIT + 2 * GR);
  md__arena_destroy(a);
  const uint64_t big[] = {MD__ARENA_MAX_LIMIT, MD__ARENA_MAX_LIMIT + 1, 1ull << 40, UINT64_MAX};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    a = mk(big[i], 1);
    s = st_of(a);
    cr_expect_eq(s.limit, MD__ARENA_MAX_LIMIT, "limit %" PRIu64, big[i]);
    cr_expect_eq(s.reserved, MD__ARENA_MAX_LIMIT + 2 * GR);
    cr_expect_eq(s.max_fit_now, MD__ARENA_MAX_LIMIT);
    uint64_t off = 0;
    cr_expect_eq(md__arena_alloc(a, MD__ARENA_MAX_LIMIT + 1, &off), MD_RESOURCE_EXHAUSTED_PERSISTENT);
    cr_expect_eq(md__arena_alloc(a, UINT64_MAX, &off), MD_RESOURCE_EXHAUSTED_PERSISTENT);
    md__arena_destroy(a);
  }
}

Test(unit_arena, alloc_of_zero_bytes_is_invalid_and_counts_nothing) {
  md__arena *a = mk(1 * MIB, 1);
  uint64_t off = 5;
  cr_expect_eq(md__arena_alloc(a, 0, &off), MD_INVALID_ARGUMENT);
  cr_expect_eq(off, 5);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.refused_persistent + s.refused_transient + s.allocs, 0);
  md__arena_destroy(a);
}

/* ---- exact placement -------------------------------------------------------------------- */

/* Each allocation takes span = round_up(size + R, G) bytes at the start of the free block:
 * back to back from the first granule. */
Test(unit_arena, allocations_are_back_to_back_spans_of_payload_plus_red_zone_rounded_to_the_granule) {
  md__arena *a = mk(1 * MIB, 3);
  const uint64_t sz[] = {1, 192, 193, 256, 448, 449, 4096, 65472, 65473, 100000};
  enum { N = sizeof sz / sizeof sz[0] };
  uint64_t off[N], expect = GR, live = 0, spans = 0;
  for (int i = 0; i < N; i++) {
    off[i] = alloc_ok(a, sz[i]);
    cr_expect_eq(off[i], expect, "size %" PRIu64 " at %" PRIu64 ", expected %" PRIu64, sz[i], off[i], expect);
    expect += span_of_size(sz[i]);
    live += sz[i];
    spans += span_of_size(sz[i]);
    md__arena_stats s = st_of(a);
    cr_expect_eq(s.bytes_live, live);
    cr_expect_eq(s.bytes_peak, live);
    cr_expect_eq(s.span_live, spans);
    cr_expect_eq(s.live_blocks, (uint64_t)i + 1);
    cr_expect_eq(s.allocs, (uint64_t)i + 1);
    cr_expect_eq(s.bytes_free, s.reserved - GR - spans);
    cr_expect_eq(s.free_blocks, 1);
    cr_expect_eq(s.largest_free, s.bytes_free);
  }
  cr_expect_eq(span_of_size(192), 256);
  cr_expect_eq(span_of_size(193), 512);
  for (int i = 0; i < N; i++) {
    md__arena_alloc_info in = {0, 0};
    uint64_t s = off[i], n = sz[i], e = s + span_of_size(n);
    cr_expect_eq(md__arena_locate(a, s, &in), MD__ARENA_AT_PAYLOAD, "block %d start", i);
    cr_expect_eq(in.off, s);
    cr_expect_eq(in.size, n);
    in = (md__arena_alloc_info){0, 0};
    cr_expect_eq(md__arena_locate(a, s + n - 1, &in), MD__ARENA_AT_PAYLOAD, "block %d last byte", i);
    cr_expect_eq(in.off, s);
    in = (md__arena_alloc_info){0, 0};
    cr_expect_eq(md__arena_locate(a, s + n, &in), MD__ARENA_AT_REDZONE, "block %d one past", i);
    cr_expect_eq(in.off, s);
    cr_expect_eq(in.size, n);
    in = (md__arena_alloc_info){0, 0};
    cr_expect_eq(md__arena_locate(a, e - 1, &in), MD__ARENA_AT_REDZONE, "block %d span end", i);
    cr_expect_eq(in.off, s);
    md__arena_alloc_info f = {0, 0};
    cr_expect_eq(md__arena_find(a, s, &f), 1);
    cr_expect_eq(f.off, s);
    cr_expect_eq(f.size, n);
    f = (md__arena_alloc_info){0, 0};
    cr_expect_eq(md__arena_find(a, s + n - 1, &f), 1, "block %d", i);
    cr_expect_eq(f.off, s);
    cr_expect_eq(md__arena_find(a, s + n, &f), 0, "block %d: red zone is not payload", i);
    cr_expect_eq(md__arena_find(a, e - 1, &f), 0);
    cr_expect_eq(md__arena_host(a, s), md__arena_base(a) + s);
  }
  md__arena_alloc_info in;
  for (uint64_t o = 0; o < GR; o += 17) cr_expect_eq(md__arena_locate(a, o, &in), MD__ARENA_AT_OUTSIDE, "%" PRIu64, o);
  cr_expect_eq(md__arena_locate(a, GR - 1, &in), MD__ARENA_AT_OUTSIDE);
  uint64_t res = md__arena_reserved(a);
  cr_expect_eq(md__arena_locate(a, res, &in), MD__ARENA_AT_OUTSIDE);
  cr_expect_eq(md__arena_locate(a, res - 1, &in), MD__ARENA_AT_FREE);
  cr_expect_eq(md__arena_locate(a, UINT64_MAX, &in), MD__ARENA_AT_OUTSIDE);
  cr_expect_eq(md__arena_locate(a, expect, &in), MD__ARENA_AT_FREE, "just past the last span");
  cr_expect_eq(md__arena_find(a, 0, &in), 0);
  cr_expect_eq(md__arena_find(a, res, &in), 0);
  cr_expect_eq(md__arena_find(a, expect, &in), 0);
  for (int i = 0; i < N; i++) cr_expect_eq(md__arena_free(a, off[i]), 0);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_live, 0);
  cr_expect_eq(s.bytes_peak, live);
  cr_expect_eq(s.frees, N);
  cr_expect_eq(s.live_blocks, 0);
  cr_expect_eq(s.span_live, 0);
  for (int i = 0; i < N; i++) cr_expect_eq(md__arena_locate(a, off[i], &in), MD__ARENA_AT_FREE);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  md__arena_destroy(a);
}

/* The payload is zero, the red zones hold the pattern, freed small spans the poison byte. */
Test(unit_arena, new_payload_is_zero_and_freed_small_payload_is_poison) {
  md__arena *a = mk(1 * MIB, 3);
  uint8_t *base = md__arena_base(a);
  uint64_t p = alloc_ok(a, 1000), q = alloc_ok(a, 100);
  for (uint64_t i = 0; i < 1000; i++) cr_assert_eq(base[p + i], 0);
  memset(base + p, 0x42, 1000);
  cr_expect_eq(md__arena_free(a, p), 0);
  for (uint64_t i = 0; i < 1000; i++) cr_assert_eq(base[p + i], MD__ARENA_POISON_BYTE, "byte %" PRIu64, i);
  /* The bytes between the payload's end and q's front red zone are poison too. */
  for (uint64_t i = p + 1000; i < q - RZ; i++) cr_assert_eq(base[i], MD__ARENA_POISON_BYTE, "byte %" PRIu64, i);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  uint64_t r = alloc_ok(a, 1000);
  cr_expect_eq(r, p);
  for (uint64_t i = 0; i < 1000; i++) cr_assert_eq(base[r + i], 0);
  cr_expect_eq(st_of(a).poison_hits, 0);
  cr_expect_eq(md__arena_free(a, r), 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  md__arena_destroy(a);
}

/* A write into freed memory is found when the span is handed out again: in the payload, or in
 * the last R bytes of the new span (the free block's bytes that become the next block's
 * front red zone); a write past the new span is not this allocation's business. */
Test(unit_arena, a_write_after_free_is_a_poison_hit_when_the_span_is_reused) {
  md__arena *a = mk(1 * MIB, 5);
  uint8_t *base = md__arena_base(a);
  uint64_t x = alloc_ok(a, 2000), y = alloc_ok(a, 64);
  cr_expect_eq(md__arena_free(a, x), 0);
  base[x + 50] = 0x11;
  uint64_t n = alloc_ok(a, 100);
  cr_expect_eq(n, x);
  cr_expect_eq(st_of(a).poison_hits, 1);
  char rep[MD__ARENA_REPORT_MAX];
  cr_expect_gt(md__arena_last_report(a, rep, sizeof rep), 0);
  cr_expect(strstr(rep, "poison hit") != NULL, "%s", rep);
  cr_expect_eq(base[x + 50], 0, "the new payload is zero");
  cr_expect_eq(md__arena_free(a, n), 0);
  /* The tail of the next span: [x + 256 - R, x + 256) holds poison now. */
  base[x + 256 - RZ + 3] = 0x22;
  n = alloc_ok(a, 100);
  cr_expect_eq(n, x);
  cr_expect_eq(st_of(a).poison_hits, 2);
  cr_expect_eq(md__arena_free(a, n), 0);
  /* Past the span of 100 bytes: found by a check, not by this alloc. */
  base[x + 700] = 0x33;
  n = alloc_ok(a, 100);
  cr_expect_eq(st_of(a).poison_hits, 2);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 1);
  cr_expect_eq(st_of(a).poison_hits, 3);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0, "repaired");
  cr_expect_eq(md__arena_free(a, n), 0);
  cr_expect_eq(md__arena_free(a, y), 0);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  md__arena_destroy(a);
}

Test(unit_arena, large_spans_are_zeroed_on_reuse_including_their_unaligned_edges) {
  md__arena *a = mk(8 * MIB, 5);
  uint8_t *base = md__arena_base(a);
  uint64_t p0 = alloc_ok(a, 3000);   /* so that the large one starts off a page boundary */
  uint64_t n = 300000 + 13, p = alloc_ok(a, n);
  cr_expect_eq(p, GR + span_of_size(3000));
  memset(base + p, 0x7E, n);
  cr_expect_eq(md__arena_free(a, p), 0);
  for (uint64_t i = 0; i < n; i++)
    cr_assert(base[p + i] == 0 || base[p + i] == MD__ARENA_POISON_BYTE, "byte %" PRIu64 " = 0x%02x", i, base[p + i]);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  uint64_t q = alloc_ok(a, n);
  cr_expect_eq(q, p);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(base[q + i], 0, "byte %" PRIu64, i);
  cr_expect_eq(st_of(a).poison_hits, 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(md__arena_free(a, p0), 0);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  md__arena_destroy(a);
}

/* ---- free, coalescing ------------------------------------------------------------------- */

Test(unit_arena, bad_frees_return_minus_one_count_and_change_nothing) {
  md__arena *a = mk(1 * MIB, 7);
  uint64_t p = alloc_ok(a, 1000), q = alloc_ok(a, 100);   /* p: span 1280 */
  md__arena_stats s0 = st_of(a);
  char rep[MD__ARENA_REPORT_MAX];
  cr_expect_eq(md__arena_last_report(a, rep, sizeof rep), 0);
  cr_expect_str_eq(rep, "");
  const uint64_t bad[] = {0, 1, GR - 1, p + 1, p + GR, p + 1024, q + 128, q + GR, md__arena_reserved(a),
                          md__arena_reserved(a) - GR, md__arena_reserved(a) + GR, UINT64_MAX & ~(GR - 1)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(md__arena_free(a, bad[i]), -1, "free(%" PRIu64 ")", bad[i]);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.bad_frees, sizeof bad / sizeof bad[0]);
  cr_expect_eq(s.frees, 0);
  cr_expect_eq(s.bytes_live, s0.bytes_live);
  cr_expect_eq(s.bytes_free, s0.bytes_free);
  cr_expect_eq(s.free_blocks, s0.free_blocks);
  /* Aligned inside p's payload: named as inside it; in its red zone: not a live allocation. */
  cr_expect_eq(md__arena_free(a, p + 512), -1);
  md__arena_last_report(a, rep, sizeof rep);
  cr_expect(strstr(rep, "bad free") && strstr(rep, "inside allocation"), "%s", rep);
  cr_expect_eq(md__arena_free(a, q + 256), -1);
  md__arena_last_report(a, rep, sizeof rep);
  cr_expect(strstr(rep, "bad free") && strstr(rep, "not a live allocation"), "%s", rep);
  cr_expect_eq(md__arena_free(a, p), 0);
  cr_expect_eq(md__arena_free(a, p), -1, "double free");
  cr_expect_eq(st_of(a).bad_frees, sizeof bad / sizeof bad[0] + 3);
  cr_expect_eq(md__arena_free(a, q), 0);
  s = st_of(a);
  cr_expect_eq(s.frees, 2);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_free, s.reserved - GR);
  md__arena_report(a, MD__ARENA_COUNT_BAD_FREE, "x %d", 1);
  md__arena_report(a, MD__ARENA_COUNT_POISON, "y %d", 2);
  md__arena_report(a, MD__ARENA_COUNT_REDZONE, "z %d", 3);
  md__arena_report(a, MD__ARENA_COUNT_NONE, "w %d", 4);
  s = st_of(a);
  cr_expect_eq(s.bad_frees, sizeof bad / sizeof bad[0] + 4);
  cr_expect_eq(s.poison_hits, 1);
  cr_expect_eq(s.redzone_hits, 1);
  cr_expect_eq(md__arena_last_report(a, rep, sizeof rep), 3);
  cr_expect_str_eq(rep, "w 4");
  char small[2];
  cr_expect_eq(md__arena_last_report(a, small, sizeof small), 3);
  cr_expect_str_eq(small, "w");
  md__arena_destroy(a);
}

/* Blocks A B C D then the tail: every order of frees ends in one free block, and the number of
 * free blocks and the largest one are exact at every step. */
Test(unit_arena, frees_coalesce_with_free_neighbours_on_both_sides) {
  const uint64_t n = 1000, sp = 1280;   /* span_of_size(1000) */
  const int orders[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 2, 0}, {2, 0, 1, 3}, {0, 2, 1, 3}, {1, 2, 0, 3}};
  for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
    md__arena *a = mk(64 * KIB, 11);
    uint64_t res = md__arena_reserved(a), tail0 = res - GR - 4 * sp;
    uint64_t b[4];
    for (int i = 0; i < 4; i++) b[i] = alloc_ok(a, n);
    for (int i = 0; i < 4; i++) cr_assert_eq(b[i], GR + (uint64_t)i * sp);
    int fr[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
      int i = orders[o][k];
      cr_assert_eq(md__arena_free(a, b[i]), 0);
      fr[i] = 1;
      /* The model: runs of freed blocks, the last run joined to the tail. */
      uint64_t blocks = 0, largest = 0, run = 0, total = 0;
      for (int j = 0; j <= 4; j++) {
        uint64_t len = j < 4 ? (fr[j] ? sp : 0) : tail0;
        if (len) {
          run += len;
          total += len;
        }
        if (!len || j == 4) {
          if (run) {
            blocks++;
            if (run > largest) largest = run;
          }
          run = 0;
        }
      }
      md__arena_stats s = st_of(a);
      cr_expect_eq(s.free_blocks, blocks, "order %zu step %d: %" PRIu64 " free blocks, expected %" PRIu64, o, k,
                   s.free_blocks, blocks);
      cr_expect_eq(s.largest_free, largest, "order %zu step %d: largest %" PRIu64 ", expected %" PRIu64, o, k,
                   s.largest_free, largest);
      cr_expect_eq(s.bytes_free, total);
      cr_expect_eq(s.max_fit_now, largest - RZ < s.limit ? largest - RZ : s.limit);
      cr_expect_eq(s.fragmentation, 1.0 - (double)largest / (double)total);
      cr_expect_eq(md__arena_check_all(a, NULL, 0), 0, "order %zu step %d", o, k);
    }
    /* One block again: the whole limit fits at the first granule. */
    cr_expect_eq(alloc_ok(a, 64 * KIB), GR, "order %zu", o);
    md__arena_destroy(a);
  }
}

/* Holes of known spans and no other free space: an allocation takes a hole that fits (the
 * smallest class that is sure to fit, or the first fit in its own class), and fails
 * (transient) only when no hole can hold its span. */
Test(unit_arena, an_allocation_fits_whatever_hole_can_hold_its_span) {
  /* Holes of 2048 and 4096 bytes, and two of one size class (at 2^13 a class is 512 bytes
   * wide): 8448 and 8192, the smaller one at the head of the class's list. */
  md__arena *a = mk(256 * KIB, 13);
  const uint64_t hole_span[] = {8448, 2048, 8192, 4096};
  enum { H = sizeof hole_span / sizeof hole_span[0] };
  uint64_t hole[H], sep[H + 1];
  sep[0] = alloc_ok(a, 100);
  for (int i = 0; i < H; i++) {
    hole[i] = alloc_ok(a, hole_span[i] - RZ);
    sep[i + 1] = alloc_ok(a, 100);
  }
  uint64_t rest = alloc_ok(a, st_of(a).max_fit_now);
  md__arena_stats s = st_of(a);
  cr_assert_eq(s.free_blocks, 0, "the arena is full: %" PRIu64 " free bytes", s.bytes_free);
  cr_assert_eq(s.max_fit_now, 0);
  for (int i = 0; i < H; i++) cr_assert_eq(md__arena_free(a, hole[i]), 0);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, H);
  cr_expect_eq(s.largest_free, 8448);
  cr_expect_eq(s.max_fit_now, 8448 - RZ);
  cr_expect_eq(s.bytes_free, 8448 + 2048 + 8192 + 4096);
  uint64_t off = 0;
  cr_expect_eq(md__arena_alloc(a, 8448 - RZ + 1, &off), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  /* 8448: only hole 0 holds it (hole 2, 8192, is of the same class and may head its list). */
  cr_expect_eq(alloc_ok(a, 8448 - RZ), hole[0]);
  cr_expect_eq(md__arena_alloc(a, 8192 - RZ + 1, &off), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect_eq(alloc_ok(a, 8192 - RZ), hole[2]);
  /* 2304 fits only the 4096 hole; then 2048 the 2048 hole. */
  cr_expect_eq(alloc_ok(a, 2304 - RZ), hole[3]);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 2);
  cr_expect_eq(s.largest_free, 2048);
  cr_expect_eq(alloc_ok(a, 2048 - RZ), hole[1]);
  cr_expect_eq(alloc_ok(a, 4096 - 2304 - RZ), hole[3] + 2304);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 0);
  cr_expect_eq(s.bytes_free, 0);
  cr_expect_eq(s.largest_free, 0);
  cr_expect_eq(s.max_fit_now, 0);
  cr_expect_eq(s.fragmentation, 0.0);
  cr_expect_eq(md__arena_alloc(a, 1, &off), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  (void)rest;
  (void)sep;
  md__arena_destroy(a);
}

/* A smaller request goes to the smallest size class that is sure to hold it, not to a larger
 * block: with holes of 1024 and 4096 bytes and the tail, 1280 takes the 4096 hole, 1024 the
 * 1024 hole, and the tail stays whole. */
Test(unit_arena, a_request_takes_the_smallest_class_sure_to_fit) {
  md__arena *a = mk(1 * MIB, 17);
  uint64_t s0 = alloc_ok(a, 10), h1 = alloc_ok(a, 1024 - RZ), s1 = alloc_ok(a, 10), h2 = alloc_ok(a, 4096 - RZ),
           s2 = alloc_ok(a, 10);
  uint64_t tail = s2 + GR;
  cr_assert_eq(md__arena_free(a, h1), 0);
  cr_assert_eq(md__arena_free(a, h2), 0);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.free_blocks, 3);
  cr_expect_eq(s.largest_free, s.reserved - tail);
  cr_expect_eq(alloc_ok(a, 1280 - RZ), h2);
  cr_expect_eq(alloc_ok(a, 1024 - RZ), h1);
  cr_expect_eq(alloc_ok(a, 2816 - RZ), h2 + 1280);
  cr_expect_eq(alloc_ok(a, 1), tail);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_free, s.reserved - tail - GR);
  (void)s0;
  (void)s1;
  md__arena_destroy(a);
}

/* ---- the model --------------------------------------------------------------------------- */

typedef struct blk {
  uint64_t off, size;
} blk;

static int blk_cmp(const void *x, const void *y) {
  const blk *a = x, *b = y;
  return a->off < b->off ? -1 : a->off > b->off;
}

typedef struct model {
  blk *b;
  size_t n, cap;
  uint64_t res, limit, peak, live, allocs, frees, refused_p, refused_t;
} model;

typedef struct gaps {
  uint64_t n, total, largest;
} gaps;

/* The free blocks: the gaps between live spans in [G, reserved). Sorts m->b. If want != 0,
 * *fit_at collects whether `at` is the start of a gap of at least `want` bytes. */
static gaps model_gaps(model *m, uint64_t want, uint64_t at, int *fit_at, int *any_fit) {
  qsort(m->b, m->n, sizeof *m->b, blk_cmp);
  gaps g = {0, 0, 0};
  uint64_t cur = GR;
  if (fit_at) *fit_at = 0;
  if (any_fit) *any_fit = 0;
  for (size_t i = 0; i <= m->n; i++) {
    uint64_t next = i < m->n ? m->b[i].off : m->res;
    cr_assert_geq(next, cur, "blocks overlap at %" PRIu64, next);
    if (next > cur) {
      uint64_t len = next - cur;
      g.n++;
      g.total += len;
      if (len > g.largest) g.largest = len;
      if (want && len >= want) {
        if (any_fit) *any_fit = 1;
        if (fit_at && cur == at) *fit_at = 1;
      }
    }
    if (i < m->n) cur = m->b[i].off + span_of_size(m->b[i].size);
  }
  return g;
}

static void model_check_stats(md__arena *a, model *m, const char *when) {
  gaps g = model_gaps(m, 0, 0, NULL, NULL);
  md__arena_stats s = st_of(a);
  uint64_t spans = 0;
  for (size_t i = 0; i < m->n; i++) spans += span_of_size(m->b[i].size);
  cr_assert_eq(s.bytes_live, m->live, "%s: bytes_live", when);
  cr_assert_eq(s.bytes_peak, m->peak, "%s: bytes_peak", when);
  cr_assert_eq(s.live_blocks, m->n, "%s: live_blocks", when);
  cr_assert_eq(s.span_live, spans, "%s: span_live", when);
  cr_assert_eq(s.allocs, m->allocs, "%s", when);
  cr_assert_eq(s.frees, m->frees, "%s", when);
  cr_assert_eq(s.refused_persistent, m->refused_p, "%s", when);
  cr_assert_eq(s.refused_transient, m->refused_t, "%s", when);
  cr_assert_eq(s.free_blocks, g.n, "%s: free_blocks %" PRIu64 ", gaps %" PRIu64, when, s.free_blocks, g.n);
  cr_assert_eq(s.bytes_free, g.total, "%s: bytes_free", when);
  cr_assert_eq(s.largest_free, g.largest, "%s: largest_free %" PRIu64 ", gap %" PRIu64, when, s.largest_free,
               g.largest);
  uint64_t fit = g.largest > RZ ? (g.largest - RZ < m->limit ? g.largest - RZ : m->limit) : 0;
  cr_assert_eq(s.max_fit_now, fit, "%s: max_fit_now", when);
  cr_assert_eq(s.bad_frees + s.redzone_hits + s.poison_hits, 0, "%s", when);
}

static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* Probes: each live block's edges and some inside, and each gap's edges and middle. */
static void model_check_lookups(md__arena *a, model *m, uint64_t *seed) {
  model_gaps(m, 0, 0, NULL, NULL);
  uint64_t cur = GR;
  for (size_t i = 0; i <= m->n; i++) {
    uint64_t next = i < m->n ? m->b[i].off : m->res;
    if (next > cur) {
      uint64_t probes[4] = {cur, next - 1, cur + (next - cur) / 2, cur + rnd(seed) % (next - cur)};
      for (int k = 0; k < 4; k++) {
        md__arena_alloc_info in;
        cr_assert_eq(md__arena_locate(a, probes[k], &in), MD__ARENA_AT_FREE, "free %" PRIu64 " in gap [%" PRIu64
                     ", %" PRIu64 ")", probes[k], cur, next);
        cr_assert_eq(md__arena_find(a, probes[k], &in), 0);
      }
    }
    if (i == m->n) break;
    uint64_t s = m->b[i].off, n = m->b[i].size, e = s + span_of_size(n);
    uint64_t pay[4] = {s, s + n - 1, s + n / 2, s + rnd(seed) % n};
    for (int k = 0; k < 4; k++) {
      md__arena_alloc_info in = {0, 0};
      cr_assert_eq(md__arena_locate(a, pay[k], &in), MD__ARENA_AT_PAYLOAD, "payload %" PRIu64 " of block %" PRIu64
                   " size %" PRIu64, pay[k], s, n);
      cr_assert_eq(in.off, s);
      cr_assert_eq(in.size, n);
      in = (md__arena_alloc_info){0, 0};
      cr_assert_eq(md__arena_find(a, pay[k], &in), 1);
      cr_assert_eq(in.off, s);
      cr_assert_eq(in.size, n);
    }
    uint64_t rz[3] = {s + n, e - 1, s + n + rnd(seed) % (e - s - n)};
    for (int k = 0; k < 3; k++) {
      md__arena_alloc_info in = {0, 0};
      cr_assert_eq(md__arena_locate(a, rz[k], &in), MD__ARENA_AT_REDZONE, "red zone %" PRIu64 " of block %" PRIu64
                   " size %" PRIu64, rz[k], s, n);
      cr_assert_eq(in.off, s);
      cr_assert_eq(in.size, n);
      cr_assert_eq(md__arena_find(a, rz[k], &in), 0);
    }
    cur = e;
  }
}

/* Random allocs and frees against the model. sizes: 1 + rnd % max_size, or log-uniform up to
 * 2^log_max when log_max. */
static void model_run(uint64_t limit, uint64_t max_size, unsigned log_max, int ops, uint64_t seed, int check_every,
                      int touch) {
  md__arena *a = mk(limit, seed);
  model m = {0};
  m.cap = 4096;
  m.b = calloc(m.cap, sizeof *m.b);
  cr_assert_not_null(m.b);
  m.res = md__arena_reserved(a);
  m.limit = st_of(a).limit;
  uint8_t *base = md__arena_base(a);
  for (int op = 0; op < ops; op++) {
    int do_free = m.n && (rnd(&seed) % 100 < 45 || m.n == m.cap);
    if (do_free) {
      size_t i = rnd(&seed) % m.n;
      blk b = m.b[i];
      if (touch) {
        cr_assert_eq(base[b.off], (uint8_t)(b.off >> 8), "block %" PRIu64 " first byte", b.off);
        if (b.size > 1)
          cr_assert_eq(base[b.off + b.size - 1], (uint8_t)(b.off >> 8) ^ 0x5A, "block %" PRIu64 " last byte", b.off);
      }
      cr_assert_eq(md__arena_free(a, b.off), 0, "op %d: free %" PRIu64, op, b.off);
      m.b[i] = m.b[--m.n];
      m.live -= b.size;
      m.frees++;
    } else {
      uint64_t n;
      if (log_max) {
        unsigned lg = (unsigned)(rnd(&seed) % (log_max + 1));
        n = (1ull << lg) + rnd(&seed) % (1ull << lg);
      } else {
        n = 1 + rnd(&seed) % max_size;
      }
      if (rnd(&seed) % 8 == 0 && n > RZ) n = rup(n, GR) - RZ + rnd(&seed) % 2;   /* a span exactly, or one byte over */
      int fit_at = 0, any_fit = 0;
      uint64_t span = span_of_size(n), off = 0;
      model_gaps(&m, span, 0, NULL, &any_fit);
      md_status st = md__arena_alloc(a, n, &off);
      if (n > m.limit) {
        cr_assert_eq(st, MD_RESOURCE_EXHAUSTED_PERSISTENT, "op %d: alloc(%" PRIu64 ")", op, n);
        m.refused_p++;
      } else if (!any_fit) {
        cr_assert_eq(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "op %d: alloc(%" PRIu64 ") with no gap of %" PRIu64, op, n,
                     span);
        m.refused_t++;
      } else {
        cr_assert_eq(st, MD_NONE, "op %d: alloc(%" PRIu64 ") = %d, a gap of %" PRIu64 " exists", op, n, st, span);
        model_gaps(&m, span, off, &fit_at, NULL);
        cr_assert(fit_at, "op %d: alloc(%" PRIu64 ") at %" PRIu64 ", not the start of a gap that fits", op, n, off);
        m.b[m.n++] = (blk){off, n};
        m.live += n;
        if (m.live > m.peak) m.peak = m.live;
        m.allocs++;
        if (touch) {
          cr_assert_eq(base[off], 0);
          cr_assert_eq(base[off + n - 1], 0);
          base[off] = (uint8_t)(off >> 8);
          if (n > 1) base[off + n - 1] = (uint8_t)(off >> 8) ^ 0x5A;
        }
      }
    }
    if (op % check_every == 0 || op == ops - 1) {
      char when[64];
      snprintf(when, sizeof when, "op %d", op);
      model_check_stats(a, &m, when);
      model_check_lookups(a, &m, &seed);
    }
  }
  if (touch) cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  while (m.n) {
    cr_assert_eq(md__arena_free(a, m.b[m.n - 1].off), 0);
    m.live -= m.b[m.n - 1].size;
    m.frees++;
    m.n--;
  }
  model_check_stats(a, &m, "end");
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_free, m.res - GR);
  free(m.b);
  md__arena_destroy(a);
}

/* A small arena, often full: refusals and fits are exact. */
Test(unit_arena, model_small_arena_often_full) { model_run(64 * KIB, 6000, 0, 3000, 101, 7, 1); }
Test(unit_arena, model_medium_arena_mixed_sizes) { model_run(4 * MIB, 0, 17, 3000, 202, 11, 1); }

/* A 64 GiB arena (reserved, not touched): blocks from bytes to GiBs spread over many leaves of
 * the unit table and every level of its summary bitmaps; lookups deep inside a large block,
 * just past a small one, and in gaps left by freed blocks of other leaves. */
Test(unit_arena, model_huge_arena_every_level_of_the_lookup) { model_run(64 * GIB, 0, 34, 1500, 303, 5, 0); }

/* Blocks spread over leaves far apart, all freed, then one block over all of them: every
 * interior address resolves to it (a summary bit left behind by a freed block would hide it). */
Test(unit_arena, freed_starts_leave_no_trace_in_the_lookup) {
  md__arena *a = mk(64 * GIB, 23);
  uint64_t first = alloc_ok(a, 100);
  enum { N = 12 };
  uint64_t blk_off[N], pad[N];
  for (int i = 0; i < N; i++) {
    pad[i] = alloc_ok(a, (1ull << (20 + i)) + 7);   /* 1 MiB .. 2 GiB: leaves far apart */
    blk_off[i] = alloc_ok(a, 100);
  }
  uint64_t last = alloc_ok(a, 100);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(md__arena_free(a, pad[i]), 0);
    cr_assert_eq(md__arena_free(a, blk_off[i]), 0);
  }
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.live_blocks, 2);
  cr_expect_eq(s.free_blocks, 2);
  uint64_t hole = last - (first + GR);
  uint64_t big = alloc_ok(a, hole - RZ);
  cr_expect_eq(big, first + GR);
  md__arena_alloc_info in;
  for (int i = 0; i < N; i++) {
    uint64_t probes[3] = {pad[i], blk_off[i], blk_off[i] + 100};
    for (int k = 0; k < 3; k++) {
      in = (md__arena_alloc_info){0, 0};
      cr_assert_eq(md__arena_locate(a, probes[k], &in), MD__ARENA_AT_PAYLOAD, "%d/%d", i, k);
      cr_assert_eq(in.off, big, "%d/%d: probe %" PRIu64 " found %" PRIu64 " size %" PRIu64 ", big %" PRIu64
                   " size %" PRIu64, i, k, probes[k], in.off, in.size, big, hole - RZ);
    }
  }
  cr_expect_eq(md__arena_locate(a, big + hole - RZ, &in), MD__ARENA_AT_REDZONE);
  cr_expect_eq(md__arena_locate(a, last, &in), MD__ARENA_AT_PAYLOAD);
  cr_expect_eq(in.off, last);
  cr_expect_eq(md__arena_free(a, big), 0);
  for (int i = 0; i < N; i++) cr_expect_eq(md__arena_locate(a, blk_off[i], &in), MD__ARENA_AT_FREE, "%d", i);
  cr_expect_eq(md__arena_locate(a, last + 50, &in), MD__ARENA_AT_PAYLOAD);
  cr_expect_eq(md__arena_locate(a, first + 50, &in), MD__ARENA_AT_PAYLOAD);
  cr_expect_eq(in.off, first);
  cr_expect_eq(md__arena_free(a, first), 0);
  cr_expect_eq(md__arena_free(a, last), 0);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_free, s.reserved - GR);
  md__arena_destroy(a);
}

/* A closed arena's reservation (it used little) serves the next arena of the same size, read
 * as zero wherever the closed one wrote. */
Test(unit_arena, a_reservation_kept_for_the_next_arena_reads_zero) {
  md__arena *a = mk(4 * MIB, 29);
  uint8_t *b1 = md__arena_base(a);
  uint64_t p = alloc_ok(a, 1 * MIB - GR - RZ);   /* the high-water mark exactly 1 MiB */
  memset(b1 + p, 0x99, 1 * MIB - GR - RZ);
  md__arena_destroy(a);
  a = mk(4 * MIB, 29);
  uint8_t *b2 = md__arena_base(a);
  cr_expect_eq(b2, b1, "the spare reservation is reused");
  for (uint64_t i = GR; i < 2 * MIB; i++) cr_assert_eq(b2[i], 0, "byte %" PRIu64, i);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  uint64_t q = alloc_ok(a, 100);
  cr_expect_eq(q, GR);
  md__arena_destroy(a);
}

/* ---- red zones: checks and their reports, exactly ---------------------------------------- */

#define TAG ((uint64_t)0x5111000000000000ull)

/* A damaged back zone: one hit, the report counts the damaged bytes from the first one to the
 * zone's end and names the allocation, the offset and both bytes; repaired, it is not found
 * again. */
Test(unit_arena, a_damaged_back_zone_is_one_hit_reported_exactly_and_repaired) {
  md__arena *a = mk(1 * MIB, 41);
  uint8_t *base = md__arena_base(a);
  uint64_t p = alloc_ok(a, 100), q = alloc_ok(a, 200);
  cr_assert_eq(p, 256);
  cr_assert_eq(q, 512);
  md__arena_tensor t = {.off = p + 10, .bytes = 4, .index = 0, .output = 1};
  char msg[256] = "", want[256];
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 0);
  uint8_t orig = base[p + 105];
  base[p + 105] = (uint8_t)~orig;
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone hit: 1 byte(s) written past the end of allocation 0x%" PRIx64
           " (size 100), first at +105 (byte 0x%02x, not 0x%02x)",
           TAG | p, (uint8_t)~orig, orig);
  cr_expect_str_eq(msg, want);
  cr_expect_eq(base[p + 105], orig, "repaired");
  cr_expect_eq(st_of(a).redzone_hits, 1);
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 0);
  /* Three bytes: counted from the first to the zone's end. */
  uint8_t o100 = base[p + 100], o101 = base[p + 101], o150 = base[p + 150];
  base[p + 100] ^= 1;
  base[p + 101] ^= 2;
  base[p + 150] ^= 4;
  msg[0] = '\0';
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone hit: 3 byte(s) written past the end of allocation 0x%" PRIx64
           " (size 100), first at +100 (byte 0x%02x, not 0x%02x)",
           TAG | p, (uint8_t)(o100 ^ 1), o100);
  cr_expect_str_eq(msg, want);
  cr_expect_eq(base[p + 101], o101);
  cr_expect_eq(base[p + 150], o150);
  cr_expect_eq(st_of(a).redzone_hits, 2);
  char rep[256];
  md__arena_last_report(a, rep, sizeof rep);
  cr_expect_str_eq(rep, want, "the last report is the message");
  /* The last byte of p's span is q's front zone: from p, past its end; from q, before it. */
  uint8_t olast = base[q - 1];
  base[q - 1] ^= 0x80;
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone hit: 1 byte(s) written past the end of allocation 0x%" PRIx64
           " (size 100), first at +255 (byte 0x%02x, not 0x%02x)",
           TAG | p, (uint8_t)(olast ^ 0x80), olast);
  cr_expect_str_eq(msg, want);
  base[q - 2] ^= 0x80;
  base[q - 64] ^= 0x80;
  md__arena_tensor tq = {.off = q, .bytes = 200, .index = 3, .output = 0};
  cr_expect_eq(md__arena_check(a, &tq, 1, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone hit: 2 byte(s) written before the start of allocation 0x%" PRIx64
           " (size 200), first at -64 (or past the end of allocation 0x%" PRIx64 ", size 100)",
           TAG | q, TAG | p);
  cr_expect_str_eq(msg, want);
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 0, "repaired from either side");
  cr_expect_eq(st_of(a).redzone_hits, 4);
  /* The first block's front zone is the guard: no allocation before it. */
  base[200] ^= 1;
  cr_expect_eq(md__arena_check(a, &t, 1, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone hit: 1 byte(s) written before the start of allocation 0x%" PRIx64 " (size 100), first at -56",
           TAG | p);
  cr_expect_str_eq(msg, want);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  cr_expect_eq(md__arena_free(a, p), 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(st_of(a).redzone_hits, 5);
  md__arena_destroy(a);
}

/* md__arena_check: each allocation a tensor points into once, both zones; offsets outside
 * live allocations (red zones, free blocks, the guard) are skipped. */
Test(unit_arena, check_looks_at_each_pointed_to_allocation_once_and_both_its_zones) {
  md__arena *a = mk(1 * MIB, 43);
  uint8_t *base = md__arena_base(a);
  uint64_t p = alloc_ok(a, 1000), f = alloc_ok(a, 100), q = alloc_ok(a, 300), r = alloc_ok(a, 50);
  cr_assert_eq(md__arena_free(a, f), 0);
  base[p + 1000] ^= 1;             /* p's back zone */
  base[q - 1] ^= 1;                /* q's front zone (the tail of the free block) */
  base[q + 300] ^= 1;              /* q's back zone */
  base[r + 50] ^= 1;               /* r's: no tensor points into r */
  md__arena_tensor t[6] = {{.off = p}, {.off = p + 999}, {.off = q + 299}, {.off = f}, {.off = p + 1000}, {.off = 0}};
  cr_expect_eq(md__arena_check(a, t, 6, NULL, 0), 3);
  cr_expect_eq(st_of(a).redzone_hits, 3);
  cr_expect_eq(md__arena_check(a, t, 6, NULL, 0), 0);
  md__arena_tensor tr = {.off = r + 49};
  char msg[256] = "";
  cr_expect_eq(md__arena_check(a, &tr, 1, msg, sizeof msg), 1);
  cr_expect(strstr(msg, "past the end") != NULL, "%s", msg);
  cr_expect_eq(md__arena_check(a, t, 0, NULL, 0), 0);
  cr_expect_eq(md__arena_free(a, p), 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(md__arena_free(a, r), 0);
  cr_expect_eq(st_of(a).redzone_hits, 4);
  md__arena_destroy(a);
}

/* md__arena_check_all: every byte once: the guard as the first block's front zone, back zones,
 * front zones after free blocks, free bodies below the high-water mark. Each damage one hit,
 * the first one's message; counted by kind; repaired. */
Test(unit_arena, check_all_finds_each_damage_once_and_reports_the_first) {
  md__arena *a = mk(1 * MIB, 47);
  uint8_t *base = md__arena_base(a);
  uint64_t p = alloc_ok(a, 100), f = alloc_ok(a, 1000), q = alloc_ok(a, 64), r = alloc_ok(a, 64);
  cr_assert_eq(md__arena_free(a, f), 0);
  uint64_t hwm = r + 256;
  char msg[256] = "x";
  cr_expect_eq(md__arena_check_all(a, msg, sizeof msg), 0);
  base[250] ^= 1;       /* guard: p's front zone */
  base[p + 100] ^= 1;   /* p's back zone */
  base[f + 10] = 0x42;  /* freed memory */
  base[q - 3] ^= 1;     /* q's front zone, after a free block */
  base[q + 64] ^= 1;    /* q's back zone = nothing else */
  base[r - 1] ^= 1;     /* r's front zone = q's back zone: one hit (q's) */
  base[hwm + 5000] = 0x42;   /* above the high-water mark: never written, never checked */
  cr_expect_eq(md__arena_check_all(a, msg, sizeof msg), 5);
  char want[256];
  snprintf(want, sizeof want,
           "sim: red zone hit: 1 byte(s) written before the start of allocation 0x%" PRIx64 " (size 100), first at -6",
           TAG | p);
  cr_expect_str_eq(msg, want);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.redzone_hits, 4);
  cr_expect_eq(s.poison_hits, 1);
  cr_expect_eq(md__arena_check_all(a, msg, sizeof msg), 0, "all repaired");
  cr_expect_eq(base[f + 10], MD__ARENA_POISON_BYTE);
  /* A free block's poison hit, alone: its message. */
  base[f + 20] = 0x43;
  cr_expect_eq(md__arena_check_all(a, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: poison hit: freed device memory at 0x%" PRIx64 " was written after it was freed (byte 0x43, free "
           "block 0x%" PRIx64 " of 1280 bytes)",
           TAG | (f + 20), TAG | f);
  cr_expect_str_eq(msg, want);
  /* Many hits (more than the checker keeps locally): all found. */
  uint64_t b[20];
  for (int i = 0; i < 20; i++) b[i] = alloc_ok(a, 10);
  for (int i = 0; i < 20; i++) base[b[i] + 10 + (uint64_t)i] ^= 1;
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 20);
  cr_expect_eq(st_of(a).redzone_hits, 24);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  for (int i = 0; i < 20; i++) cr_expect_eq(md__arena_free(a, b[i]), 0);
  cr_expect_eq(md__arena_free(a, p), 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(md__arena_free(a, r), 0);
  s = st_of(a);
  cr_expect_eq(s.redzone_hits, 24, "the frees find nothing left");
  cr_expect_eq(s.free_blocks, 1);
  md__arena_destroy(a);
}

/* Reads past an end: an output holding red-zone bytes of an allocation the launch points into.
 * Element-wise: 4 or more bytes where an element-wise kernel puts the bytes past an input's
 * end; everywhere: whole canary words at 8-byte-aligned places (outputs up to 16 KiB, or all
 * with `full`). */
Test(unit_arena, reads_past_an_end_are_found_where_the_rules_say_and_reported_exactly) {
  md__arena *a = mk(1 * MIB, 53);
  uint8_t *base = md__arena_base(a);
  uint64_t in = alloc_ok(a, 64), out = alloc_ok(a, 128);
  uint64_t ez = in + 64;   /* in's back zone */
  md__arena_tensor t[2] = {{.off = in, .bytes = 64, .index = 0, .output = 0},
                           {.off = out, .bytes = 128, .index = 0, .output = 1}};
  char msg[256] = "", want[256];
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 0);
  /* 3 bytes at the element-wise place: not enough. */
  memcpy(base + out + 64, base + ez, 3);
  base[out + 67] = (uint8_t)~base[ez + 3];
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 0);
  /* 4: found, run 4. */
  memcpy(base + out + 64, base + ez, 4);
  base[out + 68] = (uint8_t)~base[ez + 4];
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone read: 4 byte(s) past the end of allocation 0x%" PRIx64
           " (size 64, input 0), from +64, are in output 0 at +64",
           TAG | in);
  cr_expect_str_eq(msg, want);
  cr_expect_eq(st_of(a).redzone_reads, 1);
  /* 12 bytes from an input that starts 16 bytes into its allocation: the place moves too. */
  memset(base + out, 0, 128);
  t[0].off = in + 16;
  t[0].bytes = 48;
  memcpy(base + out + 48, base + ez, 12);
  base[out + 60] = (uint8_t)~base[ez + 12];
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone read: 12 byte(s) past the end of allocation 0x%" PRIx64
           " (size 64, input 0), from +64, are in output 0 at +48",
           TAG | in);
  cr_expect_str_eq(msg, want);
  /* No input: no element-wise place; 12 bytes there hold one whole aligned canary word. */
  md__arena_tensor only_out = t[1];
  cr_expect_eq(md__arena_check_reads(a, &only_out, 1, 0, msg, sizeof msg), 0, "not the output's own zones");
  md__arena_tensor t2[2] = {t[1], t[0]};   /* output first: inputs need not come first */
  cr_expect_eq(md__arena_check_reads(a, t2, 2, 0, msg, sizeof msg), 1);
  memset(base + out, 0, 128);
  /* Everywhere: two whole canary words of in's back zone (from +72) at out + 16. */
  memcpy(base + out + 16, base + ez + 8, 16);
  base[out + 32] = (uint8_t)~base[ez + 24];
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 1);
  uint64_t v;
  memcpy(&v, base + ez + 24, 8);
  uint64_t v2;
  memcpy(&v2, base + out + 24 + 8, 8);
  snprintf(want, sizeof want,
           "sim: red zone read: 16 byte(s) past the end of allocation 0x%" PRIx64
           " (size 64, input 0), from +72, are in output 0 at +16",
           TAG | in);
  cr_expect_str_eq(msg, want);
  memset(base + out, 0, 128);
  /* Before the start: a word of in's front zone (from -64) at out + 120, the last word. */
  memcpy(base + out + 120, base + in - 64, 8);
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 1);
  snprintf(want, sizeof want,
           "sim: red zone read: 8 byte(s) before the start of allocation 0x%" PRIx64
           " (size 64, input 0), from -64, are in output 0 at +120",
           TAG | in);
  cr_expect_str_eq(msg, want);
  memset(base + out, 0, 128);
  /* Not aligned: not found by the word search. */
  memcpy(base + out + 20, base + ez + 8, 8);
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 0);
  memset(base + out, 0, 128);
  /* The red zone of an allocation no tensor points into: not searched for. */
  uint64_t other = alloc_ok(a, 64);
  memcpy(base + out + 16, base + other + 64, 8);
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 0);
  memset(base + out, 0, 128);
  cr_expect_eq(st_of(a).redzone_reads, 5);
  cr_expect_eq(md__arena_free(a, in), 0);
  cr_expect_eq(md__arena_free(a, out), 0);
  cr_expect_eq(md__arena_free(a, other), 0);
  (void)v;
  (void)v2;
  md__arena_destroy(a);
}

Test(unit_arena, large_outputs_are_searched_everywhere_only_when_full) {
  md__arena *a = mk(1 * MIB, 59);
  uint8_t *base = md__arena_base(a);
  const uint64_t big = MD__ARENA_READ_SCAN_MAX;
  uint64_t in = alloc_ok(a, 64), out = alloc_ok(a, big + 8);
  md__arena_tensor t[2] = {{.off = in, .bytes = 64, .index = 2, .output = 0},
                           {.off = out, .bytes = big, .index = 1, .output = 1}};
  memcpy(base + out + big - 8, base + in + 64, 8);   /* the last word of a 16 KiB output */
  char msg[256] = "";
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 1, "16 KiB exactly: searched");
  cr_expect(strstr(msg, "(size 64, input 2), from +64, are in output 1 at +16376") != NULL, "%s", msg);
  t[1].bytes = big + 8;
  cr_expect_eq(md__arena_check_reads(a, t, 2, 0, msg, sizeof msg), 0, "larger: only the element-wise place");
  cr_expect_eq(md__arena_check_reads(a, t, 2, 1, msg, sizeof msg), 1, "full");
  /* A 1-byte output and an empty list find nothing. */
  t[1].bytes = 1;
  cr_expect_eq(md__arena_check_reads(a, t, 2, 1, msg, sizeof msg), 0);
  cr_expect_eq(md__arena_check_reads(a, t, 0, 1, msg, sizeof msg), 0);
  cr_expect_eq(md__arena_check_reads(a, t, 1, 1, msg, sizeof msg), 0, "no output");
  cr_expect_eq(st_of(a).redzone_reads, 2);
  cr_expect_eq(md__arena_free(a, in), 0);
  memset(base + out, 0, big + 8);
  cr_expect_eq(md__arena_free(a, out), 0);
  md__arena_destroy(a);
}

/* The same seed, the same canary; another seed, another; never a word of one repeated byte. */
Test(unit_arena, the_canary_is_a_function_of_seed_and_offset) {
  md__arena *a = mk(64 * KIB, 61);
  uint8_t z1[256], z2[256];
  memcpy(z1, md__arena_base(a), 256);   /* the guard */
  md__arena_destroy(a);
  a = mk(64 * KIB, 61);
  memcpy(z2, md__arena_base(a), 256);
  cr_expect_eq(memcmp(z1, z2, 256), 0);
  md__arena_destroy(a);
  a = mk(64 * KIB, 62);
  memcpy(z2, md__arena_base(a), 256);
  int same = 0;
  for (int i = 0; i < 256; i++) same += z1[i] == z2[i];
  cr_expect_lt(same, 32, "%d of 256 bytes equal across seeds", same);
  for (int w = 0; w < 32; w++) {
    int eq = 1;
    for (int k = 1; k < 8; k++) eq &= z2[8 * w + k] == z2[8 * w];
    cr_expect(!eq, "word %d", w);
  }
  md__arena_destroy(a);
}

/* Tens of thousands of free blocks at once (every other block freed): the free blocks' records
 * span several chunks of the record table; counts stay exact and every hole is reused. */
Test(unit_arena, tens_of_thousands_of_free_blocks_at_once) {
  enum { N = 40000 };
  md__arena *a = mk(16 * MIB, 67);
  uint64_t *p = calloc(N, sizeof *p);
  cr_assert_not_null(p);
  for (int i = 0; i < N; i++) {
    p[i] = alloc_ok(a, 1 + (uint64_t)i % 192);
    cr_assert_eq(p[i], GR + (uint64_t)i * GR);
  }
  for (int i = 0; i < N; i += 2) cr_assert_eq(md__arena_free(a, p[i]), 0);
  md__arena_stats s = st_of(a);
  cr_expect_eq(s.free_blocks, N / 2 + 1, "every hole and the tail");
  cr_expect_eq(s.live_blocks, N / 2);
  cr_expect_eq(s.bytes_free, s.reserved - GR - (uint64_t)(N / 2) * GR);
  cr_expect_eq(md__arena_check_all(a, NULL, 0), 0);
  /* Every hole is one granule: N/2 allocations of one granule fill exactly them. */
  for (int i = 0; i < N; i += 2) {
    uint64_t q = alloc_ok(a, 100);
    cr_assert(q < GR + (uint64_t)N * GR && (q - GR) / GR % 2 == 0, "allocation %d at %" PRIu64 ": not a hole", i, q);
    p[i] = q;
  }
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  for (int i = 1; i < N; i += 2) cr_assert_eq(md__arena_free(a, p[i]), 0);
  cr_expect_eq(st_of(a).free_blocks, N / 2, "the last hole joins the tail");
  for (int i = 0; i < N; i += 2) cr_assert_eq(md__arena_free(a, p[i]), 0);
  s = st_of(a);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.bytes_free, s.reserved - GR);
  cr_expect_eq(s.bad_frees + s.redzone_hits + s.poison_hits, 0);
  free(p);
  md__arena_destroy(a);
}

/* A free block of a single granule: its body is checked for writes after free too. */
Test(unit_arena, a_one_granule_free_block_is_checked_for_writes_after_free) {
  md__arena *a = mk(1 * MIB, 71);
  uint8_t *base = md__arena_base(a);
  uint64_t p = alloc_ok(a, 100), f = alloc_ok(a, 100), q = alloc_ok(a, 100);
  cr_assert_eq(md__arena_free(a, f), 0);
  cr_expect_eq(st_of(a).free_blocks, 2);
  base[f + 7] = 0x42;
  char msg[256] = "";
  cr_expect_eq(md__arena_check_all(a, msg, sizeof msg), 1);
  cr_expect(strstr(msg, "poison hit") != NULL, "%s", msg);
  cr_expect_eq(st_of(a).poison_hits, 1);
  base[f + 9] = 0x43;
  uint64_t r = alloc_ok(a, 10);
  cr_expect_eq(r, f);
  cr_expect_eq(st_of(a).poison_hits, 2, "found when reused");
  cr_expect_eq(md__arena_free(a, r), 0);
  cr_expect_eq(md__arena_free(a, p), 0);
  cr_expect_eq(md__arena_free(a, q), 0);
  cr_expect_eq(st_of(a).free_blocks, 1);
  md__arena_destroy(a);
}

/* The last sub-class of a power of two: a request of the class below it finds a block there
 * when nothing larger is free (spans 7680 and 7936 are the classes 14 and 15 of 2^12). */
Test(unit_arena, a_request_finds_a_block_in_the_last_sub_class_of_its_power_of_two) {
  md__arena *a = mk(64 * KIB, 73);
  uint64_t s0 = alloc_ok(a, 10), h = alloc_ok(a, 7936 - RZ), s1 = alloc_ok(a, 10);
  uint64_t rest = alloc_ok(a, st_of(a).max_fit_now);
  cr_assert_eq(st_of(a).free_blocks, 0);
  cr_assert_eq(md__arena_free(a, h), 0);
  cr_expect_eq(alloc_ok(a, 7680 - RZ), h);
  cr_expect_eq(st_of(a).largest_free, 256);
  cr_expect_eq(alloc_ok(a, 100), h + 7680);
  cr_expect_eq(st_of(a).free_blocks, 0);
  (void)s0;
  (void)s1;
  (void)rest;
  md__arena_destroy(a);
}
