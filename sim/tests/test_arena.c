/* test_arena.c - the sim device's memory: its own address space, the allocator, counters,
 * zero-filled new memory, poisoned free memory, red zones at free, bad frees. */
#include "sim_test.h"

#include <malloc.h>
#include <stdlib.h>

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

TestSuite(arena, .fini = simt_close);

Test(arena, devptr_is_tagged_nonzero_aligned_and_never_a_host_address) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p[6];
  uint64_t sizes[6] = {1, 63, 256, 4097, 100000, 2 * MIB};
  for (int i = 0; i < 6; i++) {
    p[i] = simt_alloc(sizes[i]);
    cr_expect_eq(p[i] & MD_SIM_DEVPTR_TAG_MASK, MD_SIM_DEVPTR_TAG, "devptr 0x%" PRIx64 " lacks the sim tag", p[i]);
    uint8_t *h = ops->kernel_ptr(d, p[i]);
    cr_assert_not_null(h);
    cr_expect_neq((uint64_t)(uintptr_t)h, p[i], "devptr equals its host address");
    cr_expect_eq((uintptr_t)h % 256, 0, "allocation %d is not 256-byte aligned", i);
    /* Above the canonical user half on every 64-bit host: no host object can live there. */
    cr_expect_geq(p[i], 0x0000800000000000ull);
  }
  md_devptr z = 123;
  cr_expect_eq(ops->alloc(d, 0, &z), MD_INVALID_ARGUMENT);
  cr_expect_eq(z, 0, "a refused alloc leaves 0, never a devptr");
  cr_expect_null(ops->kernel_ptr(d, 0));
  for (int i = 0; i < 6; i++) ops->free(d, p[i]);
}

Test(arena, live_allocations_never_overlap_and_keep_their_bytes) {
  md_backend *d = simt_open(8 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  enum { N = 200 };
  md_devptr p[N];
  uint64_t n[N];
  uint8_t buf[3000];
  for (int i = 0; i < N; i++) {
    n[i] = 1 + (uint64_t)(i * 37) % 3000;
    p[i] = simt_alloc(n[i]);
    memset(buf, i, n[i]);
    cr_assert_eq(ops->write(d, NULL, p[i], 0, buf, n[i], NULL, 0), MD_NONE);
  }
  for (int i = 0; i < N; i++) {
    cr_assert_eq(ops->read(d, NULL, buf, p[i], 0, n[i], NULL, 0), MD_NONE);
    for (uint64_t j = 0; j < n[i]; j++) cr_assert_eq(buf[j], (uint8_t)i, "allocation %d byte %" PRIu64, i, j);
    for (int k = 0; k < i; k++) cr_assert(p[k] + n[k] <= p[i] || p[i] + n[i] <= p[k], "%d overlaps %d", i, k);
  }
  cr_expect_eq(simt_stats().common.redzone_hits, 0);
  for (int i = 0; i < N; i++) ops->free(d, p[i]);
}

/* xorshift64*: deterministic sizes and choices. */
static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

Test(arena, bytes_live_stays_exact_over_alloc_free_realloc_pattern) {
  md_backend *d = simt_open(64 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  enum { SLOTS = 64, OPS = 4000 };
  md_devptr p[SLOTS] = {0};
  uint64_t n[SLOTS] = {0}, live = 0, peak = 0, allocs = 0, frees = 0, blocks = 0, seed = 42;
  for (int op = 0; op < OPS; op++) {
    int i = (int)(rnd(&seed) % SLOTS);
    uint64_t size = 1 + rnd(&seed) % 100000;
    if (!p[i]) {
      p[i] = simt_alloc(size);
      n[i] = size;
      live += size;
      allocs++;
      blocks++;
    } else if (rnd(&seed) & 1) {
      ops->free(d, p[i]);
      live -= n[i];
      frees++;
      blocks--;
      p[i] = 0;
    } else { /* realloc: new block, copy what fits, free the old one */
      md_devptr q = simt_alloc(size);
      live += size;
      allocs++;
      if (live > peak) peak = live;
      uint64_t keep = size < n[i] ? size : n[i];
      cr_assert_eq(ops->copy(d, NULL, q, 0, p[i], 0, keep, NULL, 0), MD_NONE);
      ops->free(d, p[i]);
      live -= n[i];
      frees++;
      p[i] = q;
      n[i] = size;
    }
    if (live > peak) peak = live;
    if (op % 97 == 0 || op == OPS - 1) {
      md_sim_stats s = simt_stats();
      cr_assert_eq(s.common.bytes_live, live, "op %d: bytes_live %" PRIu64 " != %" PRIu64, op, s.common.bytes_live,
                   live);
      cr_assert_eq(s.common.bytes_peak, peak, "op %d: bytes_peak", op);
      cr_assert_eq(s.common.allocs, allocs);
      cr_assert_eq(s.common.frees, frees);
      cr_assert_eq(s.live_blocks, blocks);
      cr_assert_eq(s.span_live + s.bytes_free, s.arena_bytes - 256, "arena bytes unaccounted for");
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (p[i]) ops->free(d, p[i]);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.bytes_live, 0);
  cr_expect_eq(s.common.bytes_peak, peak);
  cr_expect_eq(s.free_blocks, 1, "everything freed coalesces into one block");
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees, 0);
}

Test(arena, coalescing_lets_a_freed_neighbourhood_satisfy_a_big_allocation) {
  md_backend *d = simt_open(1 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(200000), b = simt_alloc(200000), c = simt_alloc(200000), e = simt_alloc(200000);
  /* Fill the rest but a few KiB, so only the freed neighbourhood can serve a big request. */
  md_devptr rest = simt_alloc(simt_stats().max_alloc_now - 8 * KIB);
  md_devptr big = 0;
  ops->free(d, b);
  cr_expect_eq(ops->alloc(d, 390000, &big), MD_RESOURCE_EXHAUSTED_TRANSIENT, "only one 200000 hole yet");
  ops->free(d, c); /* merges with b, its free predecessor */
  cr_assert_eq(ops->alloc(d, 390000, &big), MD_NONE, "b+c coalesced should hold 390000 bytes");
  cr_expect_eq(big, b, "the big block starts where b was");
  ops->free(d, big);

  /* Free a and e on both sides of the b+c hole. */
  ops->free(d, a);  /* a merges forward into the b+c hole */
  ops->free(d, e);  /* e merges backward */
  cr_assert_eq(ops->alloc(d, 790000, &big), MD_NONE, "a+b+c+e should hold 790000 bytes");
  cr_expect_eq(big, a);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.free_blocks, 2, "what the big block left of the hole, and the tail");
  ops->free(d, big);
  ops->free(d, rest);
  s = simt_stats();
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.max_alloc_now, 1 * MIB, "an empty device fits one allocation of mem_limit");
}

Test(arena, middle_free_merges_both_neighbours) {
  md_backend *d = simt_open(1 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(100000), b = simt_alloc(100000), c = simt_alloc(100000);
  md_devptr rest = simt_alloc(simt_stats().max_alloc_now - 4 * KIB);
  ops->free(d, a);
  ops->free(d, c);
  cr_expect_eq(simt_stats().free_blocks, 3, "a, c and the tail are separate");
  ops->free(d, b);
  cr_expect_eq(simt_stats().free_blocks, 2, "a+b+c merged, plus the tail");
  md_devptr big = 0;
  cr_assert_eq(ops->alloc(d, 300000, &big), MD_NONE);
  cr_expect_eq(big, a);
  ops->free(d, big);
  ops->free(d, rest);
}

Test(arena, over_limit_is_persistent_over_free_is_transient_and_device_stays_usable) {
  md_backend *d = simt_open(1 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = 7;
  cr_expect_eq(ops->alloc(d, 1 * MIB + 1, &p), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  cr_expect_eq(p, 0);
  cr_expect_eq(ops->alloc(d, UINT64_MAX, &p), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  md_devptr all = simt_alloc(1 * MIB); /* exactly mem_limit fits an empty device */
  cr_expect_eq(ops->alloc(d, 1, &p), MD_RESOURCE_EXHAUSTED_TRANSIENT, "nothing is free now");
  cr_expect_eq(ops->alloc(d, 1 * MIB + 1, &p), MD_RESOURCE_EXHAUSTED_PERSISTENT, "too big is still persistent");
  ops->free(d, all);
  md_devptr half = simt_alloc(512 * KIB);
  cr_expect_eq(ops->alloc(d, 600 * KIB, &p), MD_RESOURCE_EXHAUSTED_TRANSIENT, "larger than what is free now");
  md_devptr other = simt_alloc(400 * KIB);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.refused_persistent, 3);
  cr_expect_eq(s.refused_transient, 2);
  cr_expect_eq(s.common.bytes_live, 912 * KIB);
  ops->free(d, half);
  ops->free(d, other);
}

static void expect_zero(md_backend *d, md_devptr p, uint64_t n) {
  uint8_t *buf = malloc(n);
  cr_assert_not_null(buf);
  cr_assert_eq(simt_get()->ops->read(d, NULL, buf, p, 0, n, NULL, 0), MD_NONE);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(buf[i], 0, "byte %" PRIu64 " of a new allocation is 0x%02x", i, buf[i]);
  free(buf);
}

static void write_pattern(md_backend *d, md_devptr p, uint64_t n, uint8_t v) {
  uint8_t *buf = malloc(n);
  cr_assert_not_null(buf);
  memset(buf, v, n);
  cr_assert_eq(simt_get()->ops->write(d, NULL, p, 0, buf, n, NULL, 0), MD_NONE);
  free(buf);
}

Test(arena, new_allocation_never_shows_bytes_of_a_freed_one) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  uint64_t sizes[] = {4096, 100, 1 * MIB, 3 * MIB + 17};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    md_devptr p = simt_alloc(sizes[i]);
    write_pattern(d, p, sizes[i], 0xAB);
    ops->free(d, p);
    md_devptr q = simt_alloc(sizes[i]);
    cr_expect_eq(q, p, "size %" PRIu64 ": the same block is reused", sizes[i]);
    expect_zero(d, q, sizes[i]);
    ops->free(d, q);
  }
  /* Several small freed blocks served to one larger allocation. */
  md_devptr s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = simt_alloc(1000);
    write_pattern(d, s[i], 1000, 0xCD);
  }
  for (int i = 0; i < 3; i++) ops->free(d, s[i]);
  md_devptr q = simt_alloc(2900);
  expect_zero(d, q, 2900);
  ops->free(d, q);
}

Test(arena, freed_memory_is_poisoned) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr keep = simt_alloc(256); /* a used neighbour after p */
  md_devptr p = simt_alloc(4096);
  md_devptr after = simt_alloc(256);
  write_pattern(d, p, 4096, 0x11);
  const uint8_t *h = ops->kernel_ptr(d, p); /* a stale kernel address, read after the free */
  ops->free(d, p);
  cr_expect_null(ops->kernel_ptr(d, p), "a freed devptr has no kernel address");
  for (int i = 0; i < 4096; i++) cr_assert_eq(h[i], 0xDB, "freed byte %d is 0x%02x, not poison", i, h[i]);
  ops->free(d, keep);
  ops->free(d, after);
}

Test(arena, write_after_free_is_a_poison_hit_when_reused) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(4096);
  md_devptr after = simt_alloc(256);
  uint8_t *h = ops->kernel_ptr(d, p);
  ops->free(d, p);
  h[100] = 0x42; /* a kernel holding a stale pointer */
  md_devptr q = simt_alloc(4096);
  cr_expect_eq(q, p);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.poison_hits, 1);
  char rep[256], hex[24];
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "poison hit") && strstr(rep, simt_hex(p + 100, hex)), "report: %s", rep);
  expect_zero(d, q, 4096);
  ops->free(d, q);
  ops->free(d, after);
}

Test(arena, full_check_finds_write_after_free_once) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(4096);
  md_devptr after = simt_alloc(256);
  uint8_t *h = ops->kernel_ptr(d, p);
  ops->free(d, p);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "clean arena");
  h[7] = 0x01;
  char msg[256];
  cr_expect_eq(md_sim_check(d, msg, sizeof msg), 1);
  cr_expect(strstr(msg, "poison hit") != NULL, "%s", msg);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "repaired after the report");
  cr_expect_eq(simt_stats().common.poison_hits, 1);
  ops->free(d, after);
}

Test(arena, red_zone_damage_is_reported_at_free_naming_the_allocation) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(100), q = simt_alloc(64);
  uint8_t *h = ops->kernel_ptr(d, p), *g = ops->kernel_ptr(d, q);
  h[100] = 0; /* one byte past the end */
  g[-1] = 0;  /* one byte before the start */
  char rep[256], hex[24];
  /* q first: the byte before q is also in p's trailing red zone, which p's free checks. */
  ops->free(d, q);
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "red zone hit") && strstr(rep, "before the start") && strstr(rep, simt_hex(q, hex)) &&
                strstr(rep, "size 64"),
            "report: %s", rep);
  ops->free(d, p);
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "red zone hit") && strstr(rep, simt_hex(p, hex)) && strstr(rep, "size 100") &&
                strstr(rep, "past the end"),
            "report: %s", rep);
  cr_expect_eq(simt_stats().common.redzone_hits, 2);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "freeing leaves a consistent arena");
}

Test(arena, double_free_and_bad_free_are_reported_without_damage) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(1000), q = simt_alloc(1000);
  write_pattern(d, q, 1000, 0x77);
  ops->free(d, p);
  ops->free(d, p); /* double free */
  char rep[256], hex[24];
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "bad free") && strstr(rep, simt_hex(p, hex)), "report: %s", rep);
  ops->free(d, q + 256); /* inside a live allocation */
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "inside allocation") && strstr(rep, simt_hex(q, hex)), "report: %s", rep);
  ops->free(d, 0xdeadbeefull);                   /* not a devptr at all */
  ops->free(d, MD_SIM_DEVPTR_TAG | 0xFF0000000000ull | 256); /* another device's tag */
  ops->free(d, 0);                               /* ignored, not reported */
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.bad_frees, 4);
  cr_expect_eq(s.common.frees, 1);
  cr_expect_eq(s.common.bytes_live, 1000);
  uint8_t buf[1000];
  cr_assert_eq(ops->read(d, NULL, buf, q, 0, 1000, NULL, 0), MD_NONE);
  for (int i = 0; i < 1000; i++) cr_assert_eq(buf[i], 0x77, "q damaged at %d", i);
  md_devptr r = simt_alloc(1000); /* the arena still works */
  ops->free(d, r);
  ops->free(d, q);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0);
}

Test(arena, mem_limit_defaults_to_1gib_and_is_capped_at_64gib) {
  md_backend *d = simt_open(0, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_backend_info info;
  ops->info(d, &info);
  cr_expect_eq(info.mem_total, MD_SIM_DEFAULT_MEM_LIMIT);
  cr_expect_eq(info.max_alloc, MD_SIM_DEFAULT_MEM_LIMIT);
  simt_close();
  d = simt_open(1ull << 40, NULL, 0);
  ops->info(d, &info);
  cr_expect_eq(info.mem_total, MD_SIM_MAX_MEM_LIMIT);
  md_devptr p = 0;
  cr_expect_eq(ops->alloc(d, MD_SIM_MAX_MEM_LIMIT + 1, &p), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  p = simt_alloc(16ull << 30); /* reserved, not touched: costs no memory */
  cr_expect_eq(ops->write(d, NULL, p, (16ull << 30) - 4, "abcd", 4, NULL, 0), MD_NONE);
  ops->free(d, p);
}

Test(arena, stats_report_fragmentation_and_largest_free_block) {
  md_backend *d = simt_open(1 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p[8];
  for (int i = 0; i < 8; i++) p[i] = simt_alloc(100000);
  md_sim_stats s0 = simt_stats();
  for (int i = 0; i < 8; i += 2) ops->free(d, p[i]);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.free_blocks, 5, "four holes and the tail");
  cr_expect_gt(s.fragmentation, 0.5, "fragmentation %f", s.fragmentation);
  cr_expect_lt(s.max_alloc_now, s.bytes_free);
  cr_expect_eq(s.bytes_free, s0.bytes_free + 4 * (s0.span_live / 8));
  md_devptr big = 0;
  cr_expect_eq(ops->alloc(d, 300000, &big), MD_RESOURCE_EXHAUSTED_TRANSIENT, "fragmentation prevents it");
  for (int i = 1; i < 8; i += 2) ops->free(d, p[i]);
  s = simt_stats();
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.fragmentation, 0.0);
  cr_expect_eq(s.largest_free, s.bytes_free);
  cr_expect_eq(s.common.bytes_peak, 800000);
}

Test(arena, devptr_of_another_device_is_refused) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_backend *other = NULL;
  md_backend_params prm = {.struct_size = sizeof prm, .mem_limit = 16 * MIB};
  cr_assert_eq(ops->open(&prm, &other, NULL, 0), MD_NONE);
  md_devptr theirs = 0, mine = simt_alloc(64);
  cr_assert_eq(ops->alloc(other, 64, &theirs), MD_NONE);
  cr_expect_neq(theirs, mine, "two devices hand out different devptrs");
  char err[256];
  cr_expect_eq(ops->write(d, NULL, theirs, 0, "x", 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "not a device pointer of this device") != NULL, "%s", err);
  cr_expect_null(ops->kernel_ptr(d, theirs));
  ops->free(d, theirs);
  cr_expect_eq(simt_stats().bad_frees, 1);
  ops->free(other, theirs);
  ops->close(other);
  ops->free(d, mine);
}

/* Lookups take no lock: they find the nearest used block at or below an address through the
 * unit table's bitmaps. Addresses deep inside a block that spans many leaves and summary words
 * of that table, at its edges and just past it. */
Test(arena, interior_addresses_of_a_large_allocation_resolve_to_it) {
  md_backend *d = simt_open(256 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(1000), big = simt_alloc(100 * MIB), c = simt_alloc(5000);
  uint8_t *hb = ops->kernel_ptr(d, big);
  cr_assert_not_null(hb);
  uint64_t ks[] = {0, 1, 255, 256, 4095, 65535, 65536, 1 * MIB + 7, 37 * MIB + 256, 50 * MIB + 3, 100 * MIB - 1};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    cr_expect_eq(ops->kernel_ptr(d, big + ks[i]), hb + ks[i], "offset %" PRIu64, ks[i]);
  cr_expect_null(ops->kernel_ptr(d, big + 100 * MIB), "one past the end is its red zone");
  cr_expect_eq(ops->kernel_ptr(d, c), hb + 100 * MIB + 256, "c follows big's span");
  cr_expect_eq((uint8_t *)ops->kernel_ptr(d, c + 4999), hb + 100 * MIB + 256 + 4999);
  cr_expect_eq((uint8_t *)ops->kernel_ptr(d, a + 999) + 1, (uint8_t *)ops->kernel_ptr(d, a) + 1000);

  char err[256];
  uint8_t buf[4] = {0};
  cr_expect_eq(ops->write(d, NULL, big + 77 * MIB, 5, "xyz", 3, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(ops->read(d, NULL, buf, big, 77 * MIB + 5, 3, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(memcmp(buf, "xyz", 3), 0);
  cr_expect_eq(ops->read(d, NULL, buf, big + 100 * MIB - 2, 0, 4, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "run past the end") && strstr(err, "size 104857600"), "%s", err);

  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_kernel_status st;
  md_tensor t = simt_tensor(hb + 99 * MIB, MIB / 4);   /* the last MiB exactly */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  t = simt_tensor(hb + 99 * MIB + 4, MIB / 4);          /* four bytes too many */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "runs past the end") != NULL, "%s", st.message);
  t = simt_tensor(hb + 100 * MIB + 16, 1);              /* in its red zone */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "past the end of allocation") != NULL, "%s", st.message);

  ops->free(d, big);
  cr_expect_null(ops->kernel_ptr(d, big + 50 * MIB), "freed");
  cr_expect_null(ops->kernel_ptr(d, big));
  t = simt_tensor(hb + 50 * MIB, 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "not in a live allocation") != NULL, "%s", st.message);
  cr_expect_not_null(ops->kernel_ptr(d, c + 4999), "its neighbours stay");
  cr_expect_not_null(ops->kernel_ptr(d, a + 999));
  cr_expect_eq(md_sim_check(d, NULL, 0), 0);
  ops->free(d, a);
  ops->free(d, c);
}

/* Thousands of blocks (hundreds of unit-table leaves): every interior address finds its own
 * allocation, freed ones find none, and a bad free inside a block names it. */
Test(arena, every_address_of_many_allocations_resolves_to_its_own) {
  md_backend *d = simt_open(64 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  enum { N = 20000 };
  md_devptr *p = calloc(N, sizeof *p);
  uint64_t *n = calloc(N, sizeof *n), seed = 7;
  cr_assert(p && n);
  for (int i = 0; i < N; i++) {
    n[i] = 1 + rnd(&seed) % 3000;
    p[i] = simt_alloc(n[i]);
  }
  for (int i = 0; i < N; i += 3) ops->free(d, p[i]);
  uint8_t *base = ops->kernel_ptr(d, p[1]) - (p[1] & 0xFFFFFFFFFFull);
  for (int i = 0; i < N; i++) {
    uint64_t k = rnd(&seed) % n[i];
    uint8_t *want = base + (p[i] & 0xFFFFFFFFFFull) + k;
    if (i % 3 == 0) {
      cr_assert_null(ops->kernel_ptr(d, p[i] + k), "freed %d", i);
    } else {
      cr_assert_eq(ops->kernel_ptr(d, p[i] + k), want, "allocation %d offset %" PRIu64, i, k);
      cr_assert_null(ops->kernel_ptr(d, p[i] + n[i]), "allocation %d: one past the end", i);
    }
  }
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.live_blocks, N - (N + 2) / 3);
  for (int i = 1; i < N; i++)
    if (i % 3) ops->free(d, p[i]);
  s = simt_stats();
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits + s.bad_frees, 0);
  free(p);
  free(n);
}

/* The allocator's host memory per live allocation (its unit-table word, its share of the
 * table's leaves, and the record room alloc keeps for it; the budget is at most 48 bytes),
 * as malloc counts it: untouched record room included. 0 where malloc is not glibc's (ASan). */
Test(arena, host_metadata_per_live_allocation_is_at_most_48_bytes) {
  md_backend *d = simt_open(64 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  enum { N = 1 << 16 };
  md_devptr *p = calloc(N, sizeof *p);
  cr_assert_not_null(p);
  struct mallinfo2 m0 = mallinfo2();
  for (int i = 0; i < N; i++) p[i] = simt_alloc(16);
  struct mallinfo2 m1 = mallinfo2();
  double per = ((double)m1.uordblks + (double)m1.hblkhd - (double)m0.uordblks - (double)m0.hblkhd) / N;
  cr_expect_leq(per, 48.0, "%.1f bytes of host memory per live allocation", per);
  for (int i = 0; i < N; i++) ops->free(d, p[i]);
  free(p);
}

/* A device's memory reservation may serve the next device of the process (sim_arena.c: a spare
 * for devices that used little): what the closed device wrote, freed or not, reads as zero in
 * the new one, as in a new mapping, inside and past what it hands out. */
Test(arena, a_new_device_reads_zero_where_a_closed_one_wrote) {
  md_backend *d = simt_open(8 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  enum { N = 16, SZ = 4096 };
  md_devptr p[N];
  uint8_t buf[SZ];
  memset(buf, 0x5A, sizeof buf);
  for (int i = 0; i < N; i++) {
    p[i] = simt_alloc(SZ);
    cr_assert_eq(ops->write(d, NULL, p[i], 0, buf, SZ, NULL, 0), MD_NONE);
  }
  const uint8_t *first = ops->kernel_ptr(d, p[0]);
  for (int i = 0; i < N / 2; i++) ops->free(d, p[i]);   /* freed: poisoned */
  simt_get()->allow_live = 1;                           /* the others stay live at close */
  simt_close();
  simt_get()->allow_live = 0;
  d = simt_open(8 * MIB, NULL, 0);
  md_devptr q = simt_alloc(16);
  const uint8_t *h = ops->kernel_ptr(d, q);
  cr_expect_eq(h, first, "the reservation of the closed device is reused");
  uint8_t got[16];
  cr_assert_eq(ops->read(d, NULL, got, q, 0, sizeof got, NULL, 0), MD_NONE);
  for (int i = 0; i < 16; i++) cr_assert_eq(got[i], 0, "new memory byte %d", i);
  /* past q's span (256 B with its red zone): nothing handed out yet, all zero */
  for (size_t i = 256; i < (size_t)N * (SZ + 256); i++) cr_assert_eq(h[i], 0, "byte %zu past the new allocation", i);
  ops->free(d, q);
}
