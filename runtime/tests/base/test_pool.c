/* test_pool.c - pool validation (SPEC 2) and the per-client mapping cache (pool.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "pool.h"
#include "refcount.h"
#include "scope_int.h"

#define WHAT "request pool 2"
#define RW (PROT_READ | PROT_WRITE)

/* ---- helpers ---- */

static uint8_t pattern(uint8_t seed, size_t i) { return (uint8_t)((i * 7 + seed) & 0xff); }

/* A memfd of n bytes with byte i = pattern(seed, i), written with pwrite. */
static int pattern_fd(size_t n, uint8_t seed) {
  int fd = memfd_create("pool-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
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

static md_memory mem(md_memory_kind kind, int fd, uint64_t offset, uint64_t size, uint32_t prot) {
  return (md_memory){.kind = kind, .fd = fd, .offset = offset, .size = size, .prot = prot};
}

static md_memory blob(int fd, uint32_t width) {
  return (md_memory){.kind = MD_MEM_HARDWARE_BUFFER_BLOB, .fd = fd, .size = width, .prot = RW,
                     .width = width, .height = 1, .layers = 1, .format = MD__HWB_FORMAT_BLOB};
}

static md_memory hwb(int fd, uint32_t format, uint32_t w, uint32_t h, uint32_t layers) {
  return (md_memory){.kind = MD_MEM_HARDWARE_BUFFER, .fd = fd, .prot = RW, .width = w,
                     .height = h, .layers = layers, .format = format};
}

/* Validation of m for use fails with st, a message starting with WHAT and containing sub. */
static void expect_invalid(md_memory m, md__pool_use use, md_status st, const char *sub) {
  md__pool_plan plan;
  plan.logical = 12345;
  md__clear_error();
  cr_assert_eq(md__pool_validate(&m, use, WHAT, &plan), st, "%s", md__last_error());
  cr_expect(strncmp(md__last_error(), WHAT ": ", strlen(WHAT) + 2) == 0, "%s", md__last_error());
  cr_expect(strstr(md__last_error(), sub), "want \"%s\" in \"%s\"", sub, md__last_error());
  cr_expect_eq(plan.logical, 12345, "failure leaves *plan alone");
  /* Acquire validates the same way, before any mapping. */
  md__pool_cache *c;
  md__mapping map = {0};
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  cr_expect_eq(md__pool_acquire(c, &m, use, WHAT, NULL, &map), st);
  cr_expect(strstr(md__last_error(), sub), "acquire: %s", md__last_error());
  cr_expect_eq(md__pool_cache_maps(c), 0);
  cr_expect_null(map.scope);
  md__pool_cache_destroy(c);
}

static uint64_t expect_valid(md_memory m, md__pool_use use) {
  md__pool_plan plan;
  cr_assert_eq(md__pool_validate(&m, use, WHAT, &plan), MD_NONE, "%s", md__last_error());
  return plan.logical;
}

static void count_cb(void *ctx) { (*(int *)ctx)++; }

/* True when no page of [addr, addr+len) is mapped (msync fails ENOMEM on unmapped ranges). */
static int unmapped(const void *addr, size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(page - 1);
  for (uintptr_t p = a; p < (uintptr_t)addr + len; p += (uintptr_t)page)
    if (msync((void *)p, (size_t)page, MS_ASYNC) == 0 || errno != ENOMEM) return 0;
  return 1;
}

/* ---- validation: every kind ---- */

Test(pool_validate, negative_fd_is_rejected) {
  expect_invalid(mem(MD_MEM_MMAP_FD, -1, 0, 16, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "fd -1 is negative");
}

Test(pool_validate, closed_fd_is_rejected) {
  int fd = pattern_fd(64, 1);
  close(fd);
  char want[32];
  snprintf(want, sizeof want, "fd %d is not open", fd);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, 0, 16, RW), MD__POOL_IO, MD_INVALID_ARGUMENT, want);
}

Test(pool_validate, size_zero_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, 0, 0, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "MMAP_FD size 0");
  expect_invalid(mem(MD_MEM_ASHMEM, fd, 0, 0, RW), MD__POOL_CONSTANT, MD_INVALID_ARGUMENT,
                 "ASHMEM size 0");
  close(fd);
}

Test(pool_validate, range_past_end_of_file_is_rejected) {
  int fd = pattern_fd(8192, 1);
  char want[96];
  snprintf(want, sizeof want, "offset 4096 + size 8192 is past the end of fd %d (8192 bytes)", fd);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, 4096, 8192, RW), MD__POOL_IO, MD_INVALID_ARGUMENT, want);
  expect_invalid(mem(MD_MEM_ASHMEM, fd, 0, 8193, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "size 8193 is past the end");
  close(fd);
}

Test(pool_validate, overflowing_offset_plus_size_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, UINT64_MAX - 1, 4, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "offset 18446744073709551614 + size 4 overflows");
  close(fd);
}

Test(pool_validate, prot_with_other_bits_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, 0, 16, PROT_READ | PROT_EXEC), MD__POOL_IO,
                 MD_INVALID_ARGUMENT, "prot 0x5 has bits other than PROT_READ|PROT_WRITE");
  close(fd);
}

Test(pool_validate, prot_zero_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(mem(MD_MEM_MMAP_FD, fd, 0, 16, 0), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "prot 0 grants no access");
  close(fd);
}

Test(pool_validate, unknown_kind_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(mem((md_memory_kind)9, fd, 0, 16, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "unknown memory kind 9");
  close(fd);
}

Test(pool_validate, ashmem_offset_must_be_zero) {
  int fd = pattern_fd(8192, 1);
  expect_invalid(mem(MD_MEM_ASHMEM, fd, 4096, 16, RW), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "ASHMEM offset 4096 must be 0");
  close(fd);
}

Test(pool_validate, ashmem_whole_file_is_accepted) {
  int fd = pattern_fd(8192, 1);
  cr_expect_eq(expect_valid(mem(MD_MEM_ASHMEM, fd, 0, 8192, RW), MD__POOL_CONSTANT), 8192);
  close(fd);
}

Test(pool_validate, ashmem_prefix_of_the_file_is_rejected) {
  int fd = pattern_fd(8192, 1);
  expect_invalid(mem(MD_MEM_ASHMEM, fd, 0, 100, PROT_READ), MD__POOL_COPY, MD_INVALID_ARGUMENT,
                 "ASHMEM size 100 must be the whole file (8192 bytes)");
  close(fd);
}

Test(pool_validate, mmap_fd_any_offset_inside_the_file_is_accepted) {
  int fd = pattern_fd(8192, 1);
  cr_expect_eq(expect_valid(mem(MD_MEM_MMAP_FD, fd, 4097, 4095, PROT_READ), MD__POOL_CONSTANT),
               4095);
  close(fd);
}

Test(pool_validate, blob_format_must_be_blob) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 64);
  m.format = 1;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER_BLOB format 0x1 must be BLOB");
  close(fd);
}

Test(pool_validate, blob_height_must_be_one) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 64);
  m.height = 2;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER_BLOB height 2 must be 1");
  close(fd);
}

Test(pool_validate, blob_layers_must_be_one) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 64);
  m.layers = 0;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER_BLOB layers 0 must be 1");
  close(fd);
}

Test(pool_validate, blob_width_must_be_positive) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 0);
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER_BLOB width 0 must be > 0");
  close(fd);
}

Test(pool_validate, blob_size_must_equal_width) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 64);
  m.size = 32;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "HARDWARE_BUFFER_BLOB size 32 must equal width 64");
  close(fd);
}

Test(pool_validate, blob_offset_must_be_zero) {
  int fd = pattern_fd(64, 1);
  md_memory m = blob(fd, 32);
  m.offset = 32;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER_BLOB offset 32 must be 0");
  close(fd);
}

Test(pool_validate, blob_wider_than_its_file_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(blob(fd, 65), MD__POOL_IO, MD_INVALID_ARGUMENT, "is past the end");
  close(fd);
}

Test(pool_validate, blob_is_accepted_for_every_use_with_size_width) {
  int fd = pattern_fd(64, 1);
  cr_expect_eq(expect_valid(blob(fd, 64), MD__POOL_CONSTANT), 64);
  cr_expect_eq(expect_valid(blob(fd, 64), MD__POOL_COPY), 64);
  cr_expect_eq(expect_valid(blob(fd, 64), MD__POOL_IO), 64);
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_in_constant_pool_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(hwb(fd, 1, 4, 4, 1), MD__POOL_CONSTANT, MD_INVALID_ARGUMENT,
                 "only as an execution input or output, not as a model constant pool");
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_in_copy_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(hwb(fd, 1, 4, 4, 1), MD__POOL_COPY, MD_INVALID_ARGUMENT,
                 "not as copy_to/copy_from memory");
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_in_io_is_allowed_with_logical_size_zero) {
  int fd = pattern_fd(4 * 4 * 2 * 4, 1);
  cr_expect_eq(expect_valid(hwb(fd, 1, 4, 4, 2), MD__POOL_IO), 0);      /* RGBA8888: 128 B */
  cr_expect_eq(expect_valid(hwb(fd, 3, 4, 4, 2), MD__POOL_IO), 0);      /* RGB888: 96 B */
  cr_expect_eq(expect_valid(hwb(fd, 0x38, 4, 4, 2), MD__POOL_IO), 0);   /* R8: 32 B */
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_unknown_format_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(hwb(fd, 0x2b, 2, 2, 1), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "HARDWARE_BUFFER format 0x2b is not supported");
  expect_invalid(hwb(fd, MD__HWB_FORMAT_BLOB, 2, 1, 1), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "is BLOB; use HARDWARE_BUFFER_BLOB");
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_geometry_must_be_positive) {
  int fd = pattern_fd(64, 1);
  expect_invalid(hwb(fd, 1, 2, 0, 1), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "width 2, height 0 and layers 1 must all be > 0");
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_offset_and_size_must_be_zero) {
  int fd = pattern_fd(64, 1);
  md_memory m = hwb(fd, 1, 2, 2, 1);
  m.size = 16;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER size 16 must be 0");
  m.size = 0;
  m.offset = 8;
  expect_invalid(m, MD__POOL_IO, MD_INVALID_ARGUMENT, "HARDWARE_BUFFER offset 8 must be 0");
  close(fd);
}

Test(pool_validate, non_blob_hardware_buffer_larger_than_its_file_is_rejected) {
  int fd = pattern_fd(64, 1);
  expect_invalid(hwb(fd, 1, 4, 4, 2), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "4x4x2 of format 0x1 needs 128 bytes, past the end");
  expect_invalid(hwb(fd, 1, UINT32_MAX, UINT32_MAX, UINT32_MAX), MD__POOL_IO, MD_INVALID_ARGUMENT,
                 "overflows");
  close(fd);
}

/* ---- mapping ---- */

Test(pool_map, mmap_fd_with_unaligned_offset_maps_the_right_bytes) {
  long page = sysconf(_SC_PAGESIZE);
  int fd = pattern_fd((size_t)page * 3, 5);
  uint64_t off = (uint64_t)page + 77;
  md_memory m = mem(MD_MEM_MMAP_FD, fd, off, (uint64_t)page, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__pool_cache *caches[2] = {NULL, c};   /* uncached, then cached */
  for (int k = 0; k < 2; k++) {
    md__mapping map;
    cr_assert_eq(md__pool_acquire(caches[k], &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE, "%s",
                 md__last_error());
    cr_expect_eq(map.size, (uint64_t)page);
    cr_expect_eq(map.prot, PROT_READ);
    for (size_t i = 0; i < (size_t)page; i++)
      cr_assert_eq(map.base[i], pattern(5, off + i), "cache %d, byte %zu", k, i);
    md__mapping_release(&map);
  }
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_map, writes_through_a_mapping_reach_the_file) {
  int fd = pattern_fd(8192, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 100, 50, RW);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(NULL, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE, "%s",
               md__last_error());
  memset(map.base, 0x5A, 50);
  md__mapping_release(&map);
  uint8_t back[52];
  cr_assert_eq(pread(fd, back, sizeof back, 99), (ssize_t)sizeof back);
  cr_expect_eq(back[0], pattern(1, 99));
  for (int i = 1; i <= 50; i++) cr_expect_eq(back[i], 0x5A, "byte %d", 99 + i);
  cr_expect_eq(back[51], pattern(1, 150));
  close(fd);
}

Test(pool_map, non_blob_hardware_buffer_maps_its_computed_size) {
  int fd = pattern_fd(4096, 9);
  md_memory m = hwb(fd, 3, 5, 3, 2);   /* RGB888: 5*3*2*3 = 90 bytes */
  md__mapping map;
  cr_assert_eq(md__pool_acquire(NULL, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE, "%s",
               md__last_error());
  cr_expect_eq(map.size, 90);
  cr_expect_eq(map.base[89], pattern(9, 89));
  md__mapping_release(&map);
  close(fd);
}

static void *enomem_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  errno = ENOMEM;
  return MAP_FAILED;
}

Test(pool_map, mmap_failure_is_general_failure_naming_strerror) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__pool_cache *c;
  md__mapping map = {0};
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__scope_mmap = enomem_mmap;
  md_status st = md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map);
  md__scope_mmap = mmap;
  cr_assert_eq(st, MD_GENERAL_FAILURE);
  char want[128];
  snprintf(want, sizeof want, WHAT ": cannot map fd %d: %s", fd, strerror(ENOMEM));
  cr_expect_str_eq(md__last_error(), want);
  cr_expect_eq(md__pool_cache_size(c), 0);
  cr_expect_null(map.scope);
  md__pool_cache_destroy(c);
  close(fd);
}

/* Opens fd's file again with `flags` (memfds have no other name). */
static int reopen(int fd, int flags) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int r = open(path, flags);
  cr_assert(r >= 0);
  return r;
}

Test(pool_map, write_prot_on_read_only_fd_fails_even_on_a_cache_hit) {
  int fd = pattern_fd(4096, 1);
  int ro = reopen(fd, O_RDONLY);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__mapping map;
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, RW);
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);   /* cached RW */
  m.fd = ro;
  md__mapping denied = {0};
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &denied), MD_GENERAL_FAILURE);
  char want[128];
  snprintf(want, sizeof want, WHAT ": cannot map fd %d: %s", ro, strerror(EACCES));
  cr_expect_str_eq(md__last_error(), want);
  cr_expect_null(denied.scope);
  m.prot = PROT_READ;   /* reading through the read-only fd is fine */
  md__mapping readonly;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &readonly), MD_NONE);
  md__mapping_release(&readonly);
  md__mapping_release(&map);
  md__pool_cache_destroy(c);
  close(ro);
  close(fd);
}

Test(pool_map, write_prot_on_write_sealed_memfd_fails) {
  int fd = pattern_fd(4096, 1);
  cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
  md_memory m = mem(MD_MEM_ASHMEM, fd, 0, 4096, RW);
  md__mapping map = {0};
  cr_assert_eq(md__pool_acquire(NULL, &m, MD__POOL_IO, WHAT, NULL, &map), MD_GENERAL_FAILURE);
  cr_expect(strstr(md__last_error(), strerror(EPERM)), "%s", md__last_error());
  close(fd);
}

Test(pool_map, release_twice_is_a_no_op) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(NULL, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  uint64_t before = atomic_load(&md__refcount_underflows);
  md__mapping_release(&map);
  md__mapping_release(&map);
  cr_expect_null(map.scope);
  cr_expect_eq(atomic_load(&md__refcount_underflows), before);
  close(fd);
}

Test(pool_map, uncached_mapping_is_freed_at_its_release) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(NULL, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  cr_expect_eq(md_scope_get_kind(map.scope), MD_SCOPE_SHARED);
  /* Closed deferred already: nothing can be added, and the release unmaps it. */
  cr_expect_eq(md_scope_attach(map.scope, count_cb, NULL), MD_INVALID_ARGUMENT);
  uint8_t *base = map.base;
  cr_expect(!unmapped(base, 4096));
  md__mapping_release(&map);
  cr_expect(unmapped(base, 4096));
  close(fd);
}

/* ---- cache ---- */

Test(pool_cache, hit_does_not_map_again) {
  int fd = pattern_fd(8192, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 4096, 4096, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__mapping a, b;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &a), MD_NONE);
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &b), MD_NONE);
  cr_expect_eq(md__pool_cache_maps(c), 1);
  cr_expect_eq(md__pool_cache_size(c), 1);
  cr_expect_eq(a.base, b.base);
  cr_expect_eq(md__mapping_holders(&a), 2);
  md__mapping_release(&a);
  md__mapping_release(&b);
  /* A different fd to the same file and range hits too: the key is the file, not the fd. */
  m.fd = reopen(fd, O_RDWR);
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &a), MD_NONE);
  cr_expect_eq(md__pool_cache_maps(c), 1);
  md__mapping_release(&a);
  close(m.fd);
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_cache, different_range_prot_or_kind_is_another_entry) {
  int fd = pattern_fd(8192, 1);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(8, &c), MD_NONE);
  md_memory ms[] = {mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ),
                    mem(MD_MEM_MMAP_FD, fd, 0, 4096, RW),
                    mem(MD_MEM_MMAP_FD, fd, 0, 2048, PROT_READ),
                    mem(MD_MEM_MMAP_FD, fd, 1, 4096, PROT_READ),
                    mem(MD_MEM_ASHMEM, fd, 0, 8192, PROT_READ)};
  for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
    md__mapping map;
    cr_assert_eq(md__pool_acquire(c, &ms[i], MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
    md__mapping_release(&map);
  }
  cr_expect_eq(md__pool_cache_maps(c), 5);
  cr_expect_eq(md__pool_cache_size(c), 5);
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_cache, reused_fd_number_with_another_file_misses_the_stale_entry) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  cr_expect_eq(map.base[10], pattern(1, 10));
  md__mapping_release(&map);
  /* The same fd number now names another file with other bytes. */
  int other = pattern_fd(4096, 200);
  cr_assert_eq(dup2(other, fd), fd);
  close(other);
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  cr_expect_eq(md__pool_cache_maps(c), 2);
  for (size_t i = 0; i < 4096; i++) cr_assert_eq(map.base[i], pattern(200, i), "byte %zu", i);
  md__mapping_release(&map);
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_cache, file_shrunk_after_caching_is_rejected_on_a_hit) {
  int fd = pattern_fd(8192, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 8192, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  md__mapping_release(&map);
  cr_assert_eq(ftruncate(fd, 4096), 0);
  map = (md__mapping){0};
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md__last_error(), "is past the end"), "%s", md__last_error());
  cr_expect_null(map.scope);
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_cache, eviction_keeps_an_acquired_mapping_usable_until_its_release) {
  int fa = pattern_fd(4096, 1), fb = pattern_fd(4096, 2);
  md_memory ma = mem(MD_MEM_MMAP_FD, fa, 0, 4096, RW), mb = mem(MD_MEM_MMAP_FD, fb, 0, 4096, RW);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(1, &c), MD_NONE);
  md__mapping a, b;
  int freed = 0;
  cr_assert_eq(md__pool_acquire(c, &ma, MD__POOL_IO, WHAT, NULL, &a), MD_NONE);
  cr_assert_eq(md_scope_attach(a.scope, count_cb, &freed), MD_NONE);
  cr_assert_eq(md__pool_acquire(c, &mb, MD__POOL_IO, WHAT, NULL, &b), MD_NONE);   /* evicts a */
  cr_expect_eq(md__pool_cache_size(c), 1);
  cr_expect_eq(freed, 0);
  for (size_t i = 0; i < 4096; i++) cr_assert_eq(a.base[i], pattern(1, i));
  a.base[0] = 0xEE;   /* still writable */
  md__mapping_release(&a);
  cr_expect_eq(freed, 1, "the evicted mapping goes with its last user");
  /* a was evicted: acquiring it again maps again. */
  cr_assert_eq(md__pool_acquire(c, &ma, MD__POOL_IO, WHAT, NULL, &a), MD_NONE);
  cr_expect_eq(md__pool_cache_maps(c), 3);
  cr_expect_eq(a.base[0], 0xEE);
  md__mapping_release(&a);
  md__mapping_release(&b);
  md__pool_cache_destroy(c);
  close(fa);
  close(fb);
}

Test(pool_cache, eviction_is_least_recently_used) {
  int f[3] = {pattern_fd(4096, 1), pattern_fd(4096, 2), pattern_fd(4096, 3)};
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(2, &c), MD_NONE);
  md__mapping map;
  int order[] = {0, 1, 0, 2, 0};   /* 0 is used most recently when 2 comes in: 1 goes */
  for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
    md_memory m = mem(MD_MEM_MMAP_FD, f[order[i]], 0, 4096, PROT_READ);
    cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
    md__mapping_release(&map);
  }
  cr_expect_eq(md__pool_cache_maps(c), 3);
  cr_expect_eq(md__pool_cache_size(c), 2);
  md__pool_cache_destroy(c);
  for (int i = 0; i < 3; i++) close(f[i]);
}

Test(pool_cache, max_idle_zero_caches_nothing) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(0, &c), MD_NONE);
  md__mapping map;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  cr_expect_eq(md__pool_cache_size(c), 0);
  cr_expect_eq(map.base[5], pattern(1, 5));
  uint8_t *base = map.base;
  md__mapping_release(&map);
  cr_expect(unmapped(base, 4096));
  md__pool_cache_destroy(c);
  close(fd);
}

Test(pool_cache, destroy_keeps_in_flight_mappings_until_their_release) {
  int fd = pattern_fd(4096, 1);
  md_memory m = mem(MD_MEM_MMAP_FD, fd, 0, 4096, PROT_READ);
  md__pool_cache *c;
  cr_assert_eq(md__pool_cache_create(4, &c), MD_NONE);
  md__mapping map;
  int freed = 0;
  cr_assert_eq(md__pool_acquire(c, &m, MD__POOL_IO, WHAT, NULL, &map), MD_NONE);
  cr_assert_eq(md_scope_attach(map.scope, count_cb, &freed), MD_NONE);
  md__pool_cache_destroy(c);
  cr_expect_eq(freed, 0);
  cr_expect_eq(map.base[4095], pattern(1, 4095));
  md__mapping_release(&map);
  cr_expect_eq(freed, 1);
  close(fd);
}
