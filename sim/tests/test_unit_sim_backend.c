/* test_unit_sim_backend.c - the sim backend's calls one by one (sim_backend.c, sim_copy.c,
 * sim_launch.c, sim_fault.c): open's parameters and defaults, device ids and devptr tags, info
 * and every counter of md_sim_stats to the unit, copies at the exact bounds of an allocation
 * and what each refusal returns and counts, launches' tensor checks at their bounds, fault
 * plans and the fault hook's numbering. */
#include "sim_test.h"

#include <stdlib.h>

#include "sim_backend_int.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

TestSuite(unit_sim, .fini = simt_close);

static const md_backend_ops *O(void) { return md_sim_backend(); }
static md_backend *not_sim(void) {
  static _Alignas(64) uint64_t fake[64];   /* magic 0 */
  return (md_backend *)fake;
}

/* ---- open / close / info ---------------------------------------------------------------- */

Test(unit_sim, open_checks_its_arguments_and_takes_defaults_from_null_params) {
  char err[256] = "";
  md_backend *d = (md_backend *)0x1;
  cr_expect_eq(O()->open(NULL, NULL, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect(strstr(err, "out is NULL") != NULL, "%s", err);
  md_backend_params p = {.struct_size = sizeof p - 1, .mem_limit = MIB};
  cr_expect_eq(O()->open(&p, &d, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_null(d, "a refused open leaves NULL");
  cr_expect(strstr(err, "struct_size") != NULL, "%s", err);
  p.struct_size = 0;
  cr_expect_eq(O()->open(&p, &d, NULL, 0), MD_INVALID_ARGUMENT);
  p.struct_size = sizeof p;
  cr_assert_eq(O()->open(&p, &d, err, sizeof err), MD_NONE, "%s", err);
  O()->close(d);
  /* NULL params: every default (1 GiB, no model, no plan). */
  d = NULL;
  cr_assert_eq(O()->open(NULL, &d, err, sizeof err), MD_NONE, "%s", err);
  md_backend_info info;
  O()->info(d, &info);
  cr_expect_eq(info.mem_total, MD_SIM_DEFAULT_MEM_LIMIT);
  cr_expect_eq(info.max_alloc, MD_SIM_DEFAULT_MEM_LIMIT);
  cr_expect_str_eq(info.device_name, "mdc simulated GPU");
  cr_expect_eq(O()->device_ns(d, 1, 0), UINT64_MAX, "no model: measured time");
  cr_expect_eq(O()->device_ns(d, 0, 1000), UINT64_MAX);
  cr_expect_eq(md_sim_model_ns(d, 1, 0), 0);
  O()->close(d);
  /* A malformed fault plan fails the open. */
  p.faults = "alloc_fail@0";
  d = (md_backend *)0x1;
  cr_expect_eq(O()->open(&p, &d, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_null(d);
  /* A bigger (newer) params struct is accepted. */
  struct {
    md_backend_params p;
    uint64_t extra[4];
  } big = {.p = {.struct_size = sizeof big, .mem_limit = MIB}};
  cr_assert_eq(O()->open(&big.p, &d, err, sizeof err), MD_NONE, "%s", err);
  O()->close(d);
  O()->close(NULL);
  O()->close(not_sim());
}

Test(unit_sim, info_stats_and_checks_of_something_that_is_not_a_sim_device_are_zero) {
  md_backend_info info;
  memset(&info, 0x55, sizeof info);
  O()->info(not_sim(), &info);
  cr_expect_eq(info.mem_total, 0);
  cr_expect_eq(info.device_name[0], 0);
  O()->info(not_sim(), NULL);
  md_sim_stats s;
  memset(&s, 0x55, sizeof s);
  md_sim_stats_get(not_sim(), &s);
  cr_expect_eq(s.common.allocs + s.mem_limit + s.arena_bytes + s.workers, 0);
  md_sim_stats_get(NULL, &s);
  md_sim_stats_get(not_sim(), NULL);
  md_backend_stats c;
  memset(&c, 0x55, sizeof c);
  O()->stats(not_sim(), &c);
  cr_expect_eq(c.allocs + c.bytes_live + c.launches, 0);
  O()->stats(not_sim(), NULL);
  cr_expect_eq(md_sim_clock_ns(not_sim()), 0);
  cr_expect_eq(md_sim_model_ns(not_sim(), 1, 100), 0);
  char msg[32] = "junk";
  cr_expect_eq(md_sim_check(not_sim(), msg, sizeof msg), 0);
  cr_expect_str_eq(msg, "");
  strcpy(msg, "junk");
  cr_expect_eq(md_sim_report_last(not_sim(), msg, sizeof msg), 0);
  cr_expect_str_eq(msg, "");
  md_sim_debug_set(not_sim(), MD_SIM_DEBUG_CHECK_ALL);
  md_devptr p = 5;
  cr_expect_eq(O()->alloc(not_sim(), 64, &p), MD_INVALID_ARGUMENT);
  O()->free(not_sim(), 5);
  cr_expect_null(O()->kernel_ptr(not_sim(), MD_SIM_DEVPTR_TAG | 256));
  char err[128] = "";
  uint8_t b[4] = {0};
  cr_expect_eq(O()->write(not_sim(), NULL, 1, 0, b, 4, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->read(not_sim(), NULL, b, 1, 0, 4, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->copy(not_sim(), NULL, 1, 0, 1, 0, 4, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->fault_point(not_sim(), MD_FAULT_ALLOCATE, err, sizeof err), MD_INVALID_ARGUMENT);
}

/* Every device has an id 1..255 in its devptrs; ids go up by one per open and wrap to 1. */
Test(unit_sim, device_ids_count_up_from_one_and_wrap_after_255) {
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = 64 * KIB};
  uint64_t prev = 0;
  for (int i = 0; i < 300; i++) {
    md_backend *d = NULL;
    cr_assert_eq(O()->open(&p, &d, NULL, 0), MD_NONE);
    md_devptr x = 0;
    cr_assert_eq(O()->alloc(d, 1, &x), MD_NONE);
    cr_assert_eq(x & MD_SIM_DEVPTR_TAG_MASK, MD_SIM_DEVPTR_TAG);
    uint64_t id = (x >> 40) & 0xFF;
    cr_assert(id >= 1 && id <= 255, "open %d: id %" PRIu64, i, id);
    cr_assert_eq(x & 0xFFFFFFFFFFull, 256, "the first allocation is at offset 256");
    if (prev) cr_assert_eq(id, prev % 255 + 1, "open %d: id %" PRIu64 " after %" PRIu64, i, id, prev);
    prev = id;
    O()->free(d, x);
    O()->close(d);
  }
}

/* MD_SIM_CHECK_ALL at open: set and not "0", every launch checks the whole arena. */
Test(unit_sim, the_check_all_environment_variable_turns_full_checks_on) {
  const char *vals[] = {"1", "yes", "0", "", NULL};
  const int on[] = {1, 1, 0, 0, 0};
  for (int v = 0; v < 5; v++) {
    if (vals[v]) setenv("MD_SIM_CHECK_ALL", vals[v], 1);
    else unsetenv("MD_SIM_CHECK_ALL");
    md_backend *d = simt_open(MIB, NULL, 0);
    md_devptr out = simt_alloc(64), freed = simt_alloc(1000), keep = simt_alloc(64);
    uint8_t *h = O()->kernel_ptr(d, freed);
    O()->free(d, freed);
    h[10] = 0x01;   /* a write into freed memory that only a full check sees */
    md_kernel_def k = simt_kernel("fill", simt_k_fill);
    md_tensor t = simt_tensor(O()->kernel_ptr(d, out), 16);
    md_kernel_status st;
    md_status rc = simt_launch(NULL, &k, NULL, &t, &st);
    cr_expect_eq(rc, on[v] ? MD_GENERAL_FAILURE : MD_NONE, "MD_SIM_CHECK_ALL=%s", vals[v] ? vals[v] : "(unset)");
    cr_expect_eq(simt_stats().common.poison_hits, (uint64_t)on[v]);
    if (on[v]) cr_expect(strstr(st.message, "poison hit") != NULL, "%s", st.message);
    md_sim_check(d, NULL, 0);
    O()->free(d, out);
    O()->free(d, keep);
    simt_close();
  }
  unsetenv("MD_SIM_CHECK_ALL");
}

/* ---- counters --------------------------------------------------------------------------- */

Test(unit_sim, every_counter_counts_exactly_what_it_says) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.mem_limit, MIB);
  cr_expect_eq(s.arena_bytes, MIB + 512);
  cr_expect_eq(s.workers, 0, "no stream yet: no worker");
  cr_expect_eq(s.max_alloc_now, MIB);
  cr_expect_eq(s.bytes_free, MIB + 256);
  cr_expect_eq(s.free_blocks, 1);
  cr_expect_eq(s.largest_free, MIB + 256);
  md_devptr a = simt_alloc(1000), b = simt_alloc(3000), x = 0;
  cr_expect_eq(O()->alloc(d, 0, &x), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->alloc(d, 2 * MIB, &x), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  cr_expect_eq(O()->alloc(d, MIB, &x), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect_eq(O()->alloc(d, 64, NULL), MD_INVALID_ARGUMENT);
  uint8_t buf[4096];
  memset(buf, 1, sizeof buf);
  cr_assert_eq(O()->write(d, NULL, a, 0, buf, 1000, NULL, 0), MD_NONE);
  cr_assert_eq(O()->read(d, NULL, buf, b, 100, 2900, NULL, 0), MD_NONE);
  cr_assert_eq(O()->copy(d, NULL, b, 0, a, 0, 1000, NULL, 0), MD_NONE);
  cr_assert_eq(O()->write(d, NULL, a, 0, buf, 0, NULL, 0), MD_NONE, "an empty copy");
  cr_expect_eq(O()->read(d, NULL, buf, a, 0, 1001, NULL, 0), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->read(d, NULL, buf, 0, 0, 1, NULL, 0), MD_GENERAL_FAILURE);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(O()->kernel_ptr(d, a), 250);
  md_kernel_status st;
  cr_assert_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_assert_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  t.bytes = 1004;
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  O()->free(d, a);
  O()->free(d, a);
  s = simt_stats();
  cr_expect_eq(s.common.allocs, 2);
  cr_expect_eq(s.common.frees, 1);
  cr_expect_eq(s.common.bytes_live, 3000);
  cr_expect_eq(s.common.bytes_peak, 4000);
  cr_expect_eq(s.common.copies, 4, "write, read, copy, the empty write");
  cr_expect_eq(s.common.bytes_copied, 1000 + 2900 + 1000);
  cr_expect_eq(s.common.launches, 3);
  cr_expect_eq(s.launch_calls, 3);
  cr_expect_eq(s.alloc_calls, 5, "alloc calls on a live device, refused ones included (not NULL out)");
  cr_expect_eq(s.copy_calls, 6);
  cr_expect_eq(s.bad_pointers, 3, "read past the end, a null devptr, the launch past the end");
  cr_expect_eq(s.refused_persistent, 1);
  cr_expect_eq(s.refused_transient, 1);
  cr_expect_eq(s.bad_frees, 1);
  cr_expect_eq(s.live_blocks, 1);
  cr_expect_eq(s.span_live, 3072);
  cr_expect_eq(s.common.faults_fired, 0);
  cr_expect_eq(s.lost, 0);
  cr_expect_eq(s.clock_ns, 0);
  cr_expect_eq(s.commands_run, 0);
  cr_expect_eq(s.order_hash, 0);
  md_backend_stats c;
  O()->stats(d, &c);
  cr_expect_eq(memcmp(&c, &s.common, sizeof c), 0, "stats() is md_sim_stats' common part");
  /* fault points without a plan are counted per site */
  cr_expect_eq(O()->fault_point(d, MD_FAULT_ALLOCATE, NULL, 0), MD_NONE);
  cr_expect_eq(O()->fault_point(d, MD_FAULT_COPY, NULL, 0), MD_NONE);
  cr_expect_eq(O()->fault_point(d, MD_FAULT_COPY, NULL, 0), MD_NONE);
  for (int i = 0; i < 3; i++) cr_expect_eq(O()->fault_point(d, MD_FAULT_EXECUTION, NULL, 0), MD_NONE);
  cr_expect_eq(O()->fault_point(d, (md_fault_site)3, NULL, 0), MD_INVALID_ARGUMENT);
  s = simt_stats();
  cr_expect_eq(s.site_calls[MD_FAULT_ALLOCATE], 1);
  cr_expect_eq(s.site_calls[MD_FAULT_COPY], 2);
  cr_expect_eq(s.site_calls[MD_FAULT_EXECUTION], 3);
  O()->free(d, b);
}

Test(unit_sim, the_time_model_per_launch_and_per_byte) {
  simt *t = simt_get();
  t->ops = O();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = MIB, .latency_ns = 700, .copy_gbps = 4.0};
  cr_assert_eq(O()->open(&p, &t->dev, NULL, 0), MD_NONE);
  md_backend *d = t->dev;
  cr_expect_eq(O()->device_ns(d, 1, 12345), 700);
  cr_expect_eq(O()->device_ns(d, 0, 4000), 1000);
  cr_expect_eq(md_sim_model_ns(d, 0, 4000), 1000);
  cr_expect_eq(md_sim_model_ns(d, 1, 0), 700);
  md_devptr a = simt_alloc(8000);
  static uint8_t buf[8000];
  cr_assert_eq(O()->write(d, NULL, a, 0, buf, 8000, NULL, 0), MD_NONE);
  cr_expect_eq(md_sim_clock_ns(d), 2000);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor tt = simt_tensor(O()->kernel_ptr(d, a), 4);
  md_kernel_status st;
  cr_assert_eq(simt_launch(NULL, &k, NULL, &tt, &st), MD_NONE);
  cr_expect_eq(md_sim_clock_ns(d), 2700);
  cr_expect_eq(simt_stats().clock_ns, 2700);
  O()->free(d, a);
  simt_close();
  /* Only latency: copies take no modelled time; a negative bandwidth is off. */
  p = (md_backend_params){.struct_size = sizeof p, .mem_limit = MIB, .latency_ns = 5, .copy_gbps = -3.0};
  cr_assert_eq(O()->open(&p, &t->dev, NULL, 0), MD_NONE);
  cr_expect_eq(O()->device_ns(t->dev, 0, 4000), 0);
  cr_expect_eq(O()->device_ns(t->dev, 1, 0), 5);
  simt_close();
  p = (md_backend_params){.struct_size = sizeof p, .mem_limit = MIB, .copy_gbps = 1.0};
  cr_assert_eq(O()->open(&p, &t->dev, NULL, 0), MD_NONE);
  cr_expect_eq(O()->device_ns(t->dev, 0, 4000), 4000);
  cr_expect_eq(O()->device_ns(t->dev, 1, 0), 0);
}

/* ---- copies at the bounds --------------------------------------------------------------- */

Test(unit_sim, copies_at_the_exact_bounds_of_an_allocation) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_devptr a = simt_alloc(1000), b = simt_alloc(500);
  uint8_t buf[2000];
  char err[256];
  for (int i = 0; i < 2000; i++) buf[i] = (uint8_t)i;
  /* dst + off + n == end: fine; one more: refused. Offsets inside the pointer add up. */
  cr_expect_eq(O()->write(d, NULL, a, 0, buf, 1000, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(O()->write(d, NULL, a, 999, buf, 1, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(O()->write(d, NULL, a + 600, 399, buf, 1, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(O()->write(d, NULL, a + 999, 0, buf, 1, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(O()->write(d, NULL, a, 1000, buf, 0, err, sizeof err), MD_NONE, "an empty copy at the end");
  cr_expect_eq(O()->write(d, NULL, a, 0, buf, 1001, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "1001 bytes at offset 0") && strstr(err, "size 1000"), "%s", err);
  cr_expect_eq(O()->write(d, NULL, a, 1000, buf, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->write(d, NULL, a, 1001, buf, 0, err, sizeof err), MD_GENERAL_FAILURE, "offset past the end");
  cr_expect_eq(O()->write(d, NULL, a + 600, 400, buf, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->write(d, NULL, a, UINT64_MAX, buf, 2, err, sizeof err), MD_GENERAL_FAILURE, "wrap");
  cr_expect_eq(O()->write(d, NULL, a, 2, buf, UINT64_MAX, err, sizeof err), MD_GENERAL_FAILURE, "wrap");
  cr_expect_eq(O()->write(d, NULL, a + 1000, 0, buf, 0, err, sizeof err), MD_GENERAL_FAILURE,
               "a pointer one past the end is in no allocation");
  cr_expect(strstr(err, "not in a live allocation") != NULL, "%s", err);
  cr_expect_eq(O()->write(d, NULL, a, 0, NULL, 1, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->write(d, NULL, a, 0, NULL, 0, err, sizeof err), MD_NONE, "NULL source of 0 bytes");
  cr_expect_eq(O()->read(d, NULL, NULL, a, 0, 1, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->read(d, NULL, NULL, a, 0, 0, err, sizeof err), MD_NONE);
  cr_expect_eq(O()->read(d, NULL, buf, a, 0, 1000, err, sizeof err), MD_NONE);
  cr_expect_eq(O()->read(d, NULL, buf, a, 1, 1000, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->read(d, NULL, buf, a + 1, 0, 1000, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->read(d, NULL, buf, a + 1, 0, 999, err, sizeof err), MD_NONE);
  cr_expect_eq(O()->read(d, NULL, buf, 0, 0, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "null device pointer") != NULL, "%s", err);
  cr_expect_eq(O()->read(d, NULL, buf, 0xdeadbeef, 0, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "not a device pointer of this device") != NULL, "%s", err);
  /* copy: source and destination each checked; the source first. */
  cr_expect_eq(O()->copy(d, NULL, b, 0, a, 500, 500, err, sizeof err), MD_NONE, "%s", err);
  cr_expect_eq(O()->copy(d, NULL, b, 0, a, 501, 500, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy source") != NULL, "%s", err);
  cr_expect_eq(O()->copy(d, NULL, b, 1, a, 0, 500, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy destination") != NULL, "%s", err);
  cr_expect_eq(O()->copy(d, NULL, b, 0, 0, 0, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy source") != NULL, "%s", err);
  cr_expect_eq(O()->copy(d, NULL, 0, 0, a, 0, 1, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy destination") != NULL, "%s", err);
  cr_expect_eq(simt_stats().bad_pointers, 15);
  uint8_t back[1000];
  cr_assert_eq(O()->read(d, NULL, back, b, 0, 500, NULL, 0), MD_NONE);
  for (int i = 0; i < 499; i++) cr_assert_eq(back[i], (uint8_t)(500 + i), "byte %d", i);
  cr_expect_eq(back[499], 0, "a's last byte was written with buf[0]");
  O()->free(d, a);
  O()->free(d, b);
}

/* Overlapping copies inside one allocation behave as memmove, both directions. */
Test(unit_sim, overlapping_copies_inside_one_allocation_are_memmove) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_devptr a = simt_alloc(4096);
  uint8_t buf[4096], ref[4096];
  for (int i = 0; i < 4096; i++) buf[i] = (uint8_t)(i * 7 + 1);
  const struct {
    uint64_t dst, src, n;
  } cases[] = {{1, 0, 4000}, {0, 1, 4000}, {100, 0, 3000}, {0, 100, 3000}, {8, 0, 4088}, {0, 0, 4096}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cr_assert_eq(O()->write(d, NULL, a, 0, buf, 4096, NULL, 0), MD_NONE);
    memcpy(ref, buf, 4096);
    memmove(ref + cases[c].dst, ref + cases[c].src, cases[c].n);
    cr_assert_eq(O()->copy(d, NULL, a, cases[c].dst, a, cases[c].src, cases[c].n, NULL, 0), MD_NONE);
    uint8_t got[4096];
    cr_assert_eq(O()->read(d, NULL, got, a, 0, 4096, NULL, 0), MD_NONE);
    cr_expect_eq(memcmp(got, ref, 4096), 0, "case %zu", c);
  }
  /* The same on a stream. */
  md_stream *s;
  cr_assert_eq(O()->stream_create(d, &s), MD_NONE);
  cr_assert_eq(O()->write(d, NULL, a, 0, buf, 4096, NULL, 0), MD_NONE);
  memcpy(ref, buf, 4096);
  memmove(ref + 3, ref, 4000);
  cr_assert_eq(O()->copy(d, s, a, 3, a, 0, 4000, NULL, 0), MD_NONE);
  cr_assert_eq(O()->stream_sync(d, s, NULL, 0), MD_NONE);
  uint8_t got[4096];
  cr_assert_eq(O()->read(d, NULL, got, a, 0, 4096, NULL, 0), MD_NONE);
  cr_expect_eq(memcmp(got, ref, 4096), 0, "on a stream");
  O()->stream_destroy(d, s);
  O()->free(d, a);
}

/* kernel_ptr: live payload only; frees of foreign pointers are bad frees and change nothing. */
Test(unit_sim, kernel_ptr_and_free_take_only_this_devices_live_pointers) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_devptr a = simt_alloc(100);
  uint8_t *h = O()->kernel_ptr(d, a);
  cr_assert_not_null(h);
  cr_expect_eq((uint8_t *)O()->kernel_ptr(d, a + 99), h + 99);
  cr_expect_null(O()->kernel_ptr(d, a + 100));
  cr_expect_null(O()->kernel_ptr(d, a - 1));
  cr_expect_null(O()->kernel_ptr(d, a & 0xFFFFFFFFFFull));
  cr_expect_null(O()->kernel_ptr(d, (a & ~0xFF0000000000ull) | ((((a >> 40) & 0xFF) % 255 + 1) << 40)));
  O()->free(d, 0);
  O()->free(d, a ^ (1ull << 40));
  O()->free(d, a & 0xFFFFFFFFFFull);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.bad_frees, 2, "a zero devptr is no bad free");
  cr_expect_eq(s.common.frees, 0);
  char rep[256];
  cr_expect_gt(md_sim_report_last(d, rep, sizeof rep), 0);
  cr_expect(strstr(rep, "not a device pointer of this device") != NULL, "%s", rep);
  O()->free(d, a);
  cr_expect_eq(simt_stats().common.frees, 1);
  cr_expect_null(O()->kernel_ptr(d, a));
}

/* ---- launches --------------------------------------------------------------------------- */

Test(unit_sim, launch_checks_its_arguments_and_each_tensor_at_its_bounds) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_devptr a = simt_alloc(1024), b = simt_alloc(64);
  float *ha = O()->kernel_ptr(d, a), *hb = O()->kernel_ptr(d, b);
  md_kernel_def k = simt_kernel("fill", simt_k_fill), inc = simt_kernel("inc", simt_k_inc);
  md_kernel_status st;
  md_tensor t = simt_tensor(ha, 256);
  md_kernel_call call;
  memset(&call, 0, sizeof call);
  call.struct_size = sizeof call;
  call.n_outputs = 1;
  call.outputs = &t;
  cr_expect_eq(O()->launch(d, NULL, NULL, &call, &st), MD_INVALID_ARGUMENT);
  cr_expect_eq(st.code, MD_INVALID_ARGUMENT);
  md_kernel_def norun = k;
  norun.run = NULL;
  cr_expect_eq(O()->launch(d, NULL, &norun, &call, &st), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->launch(d, NULL, &k, NULL, &st), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->launch(d, NULL, &k, &call, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(O()->launch(not_sim(), NULL, &k, &call, &st), MD_INVALID_ARGUMENT);
  call.outputs = NULL;
  cr_expect_eq(O()->launch(d, NULL, &k, &call, &st), MD_INVALID_ARGUMENT);
  cr_expect(strstr(st.message, "NULL tensor array") != NULL, "%s", st.message);
  call.outputs = &t;
  call.n_inputs = 1;
  cr_expect_eq(O()->launch(d, NULL, &k, &call, &st), MD_INVALID_ARGUMENT);
  call.n_inputs = 0;
  md_kernel_def anon = k;
  anon.name = NULL;
  cr_expect_eq(O()->launch(d, NULL, &anon, &call, &st), MD_NONE, "%s", st.message);
  /* Whole allocation: fine; 4 bytes more: refused; the last float alone: fine. */
  t = simt_tensor(ha, 256);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  cr_expect_eq(ha[255], 1.0f);
  t = simt_tensor(ha, 257);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "runs past the end") && strstr(st.message, "output 0"), "%s", st.message);
  t = simt_tensor(ha + 255, 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  t = simt_tensor(ha + 255, 2);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  t = simt_tensor(ha + 256, 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "past the end of allocation") != NULL, "%s", st.message);
  t = simt_tensor((float *)((uint8_t *)ha - 1), 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE, "in the red zone before a");
  /* Inputs are checked too, and named as inputs. */
  md_tensor in = simt_tensor(hb, 17), out = simt_tensor(ha, 17);
  cr_expect_eq(simt_launch(NULL, &inc, &in, &out, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "input 0") != NULL, "%s", st.message);
  in = simt_tensor(hb, 16);
  out = simt_tensor(ha, 16);
  cr_expect_eq(simt_launch(NULL, &inc, &in, &out, &st), MD_NONE, "%s", st.message);
  cr_expect_eq(ha[0], 1.0f, "0 + 1");
  /* A devptr as data is refused; NULL data or 0 bytes, and host memory, are not checked. */
  t = simt_tensor((void *)(uintptr_t)a, 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "holds device pointer") != NULL, "%s", st.message);
  float host[16];
  t = simt_tensor(host, 16);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  cr_expect_eq(host[15], 1.0f);
  t = simt_tensor(NULL, 0);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  /* Freed memory. */
  O()->free(d, b);
  t = simt_tensor(hb, 1);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "not in a live allocation") != NULL, "%s", st.message);
  /* One past the arena's reservation is host memory as far as the device knows. */
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.bad_pointers, 7);
  cr_expect_eq(s.launch_calls, 2 + 1 + 12, "a launch with a NULL tensor array is still a call");
  O()->free(d, a);
}

/* Checks after a kernel ran: the zones of the allocations its tensors point into. On a stream
 * the failure comes from stream_sync, with the kernel status filled. */
Test(unit_sim, a_red_zone_hit_fails_the_launch_sync_or_on_a_stream) {
  md_backend *d = simt_open(MIB, NULL, 0);
  md_devptr a = simt_alloc(64);
  md_kernel_def oob = simt_kernel("oob", simt_k_oob);
  md_tensor t = simt_tensor(O()->kernel_ptr(d, a), 16);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &oob, NULL, &t, &st), MD_GENERAL_FAILURE);
  const char *pre = "sim: kernel 'oob': red zone hit: ";
  cr_expect(strncmp(st.message, pre, strlen(pre)) == 0, "%s", st.message);
  cr_expect_eq(simt_stats().common.redzone_hits, 1);
  md_stream *s;
  cr_assert_eq(O()->stream_create(d, &s), MD_NONE);
  cr_expect_eq(simt_launch(s, &oob, NULL, &t, &st), MD_NONE);
  char err[256] = "";
  cr_expect_eq(O()->stream_sync(d, s, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strncmp(err, pre, strlen(pre)) == 0, "%s", err);
  cr_expect_eq(st.code, MD_GENERAL_FAILURE);
  cr_expect_eq(simt_stats().common.redzone_hits, 2);
  /* Refused before it is accepted: returned at once, nothing queued. */
  t = simt_tensor(O()->kernel_ptr(d, a), 17);
  cr_expect_eq(simt_launch(s, &oob, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect_eq(O()->stream_sync(d, s, err, sizeof err), MD_NONE);
  cr_expect_eq(simt_stats().commands_run, 1);
  O()->stream_destroy(d, s);
  O()->free(d, a);
}

/* ---- fault plans ------------------------------------------------------------------------ */

static md_status open_plan(const char *plan, char *err, size_t n) {
  simt *t = simt_get();
  t->ops = O();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = MIB, .faults = plan};
  return O()->open(&p, &t->dev, err, n);
}

Test(unit_sim, fault_plans_are_parsed_exactly) {
  const struct {
    const char *plan, *msg;
  } bad[] = {
      {",", "faults: '' (item 1): empty item"},
      {"alloc_fail@1,", "faults: '' (item 2): empty item"},
      {"alloc_fail@1,,copy_fail@2", "faults: '' (item 2): empty item"},
      {"alloc_fail", "faults: 'alloc_fail': missing '@N'"},
      {"alloc_fail@", "faults: 'alloc_fail@': missing count"},
      {"alloc_fail@0", "faults: 'alloc_fail@0': count must be >= 1"},
      {"alloc_fail@1x", "faults: 'alloc_fail@1x': count '1x' is not a number"},
      {"alloc_fail@-1", "faults: 'alloc_fail@-1': count '-1' is not a number"},
      {"alloc_fail@/", "faults: 'alloc_fail@/': count '/' is not a number"},
      {"alloc_fail@:", "faults: 'alloc_fail@:': count ':' is not a number"},
      {"alloc_fail@18446744073709551616", "faults: 'alloc_fail@18446744073709551616': count is out of range"},
      {"alloc_fai@1", "faults: 'alloc_fai@1': unknown kind 'alloc_fai'"},
      {"alloc_faill@1", "faults: 'alloc_faill@1': unknown kind 'alloc_faill'"},
      {"@1", "faults: '@1': unknown kind ''"},
      {"stall@2,bogus@3", "faults: 'bogus@3': unknown kind 'bogus'"},
      {"copy_fail@1,stall", "faults: 'stall': missing '@N'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char err[256] = "";
    cr_expect_eq(open_plan(bad[i].plan, err, sizeof err), MD_INVALID_ARGUMENT, "'%s'", bad[i].plan);
    cr_expect(strncmp(err, bad[i].msg, strlen(bad[i].msg)) == 0, "'%s': %s, expected %s", bad[i].plan, err,
              bad[i].msg);
    cr_expect_null(simt_get()->dev);
  }
  const char *good[] = {"alloc_fail@1",  "copy_fail@9",  "kernel_fail@18446744073709551615", "device_lost@4",
                        "stall@3,stall@4", "alloc_fail@007", ""};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    char err[256] = "";
    cr_expect_eq(open_plan(good[i], err, sizeof err), MD_NONE, "'%s': %s", good[i], err);
    simt_close();
  }
}

Test(unit_sim, each_kind_fires_at_its_site_and_number_only) {
  char err[256] = "";
  cr_assert_eq(open_plan("alloc_fail@2,copy_fail@1,kernel_fail@2,stall@3,device_lost@5,alloc_fail@007", err,
                         sizeof err),
               MD_NONE, "%s", err);
  md_backend *d = simt_get()->dev;
  md_status want_a[] = {MD_NONE, MD_RESOURCE_EXHAUSTED_TRANSIENT, MD_NONE, MD_NONE, MD_NONE, MD_NONE,
                        MD_RESOURCE_EXHAUSTED_TRANSIENT, MD_NONE};
  for (int i = 0; i < 8; i++)
    cr_expect_eq(O()->fault_point(d, MD_FAULT_ALLOCATE, err, sizeof err), want_a[i], "allocate %d", i + 1);
  cr_expect_eq(O()->fault_point(d, MD_FAULT_COPY, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_str_eq(err, "sim: injected copy failure (copy_fail@1)");
  cr_expect_eq(O()->fault_point(d, MD_FAULT_COPY, err, sizeof err), MD_NONE);
  md_status want_e[] = {MD_NONE, MD_GENERAL_FAILURE, MD_MISSED_DEADLINE_TRANSIENT, MD_NONE, MD_DEVICE_UNAVAILABLE};
  for (int i = 0; i < 5; i++)
    cr_expect_eq(O()->fault_point(d, MD_FAULT_EXECUTION, err, sizeof err), want_e[i], "execution %d", i + 1);
  cr_expect_str_eq(err, "sim: device lost during execution 5 (device_lost@5)");
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.faults_fired, 6);
  cr_expect_eq(s.lost, 1);
  cr_expect_eq(s.site_calls[MD_FAULT_ALLOCATE], 8);
  cr_expect_eq(s.site_calls[MD_FAULT_COPY], 2);
  cr_expect_eq(s.site_calls[MD_FAULT_EXECUTION], 5);
  /* Lost: every site says so, and counts nothing more. */
  cr_expect_eq(O()->fault_point(d, MD_FAULT_ALLOCATE, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_str_eq(err, "sim: device: device lost (device_lost@5)");
  md_devptr p = 7;
  cr_expect_eq(O()->alloc(d, 64, &p), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(p, 0);
  uint8_t b[4];
  cr_expect_eq(O()->write(d, NULL, 1, 0, b, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_str_eq(err, "sim: write: device lost (device_lost@5)");
  cr_expect_eq(O()->read(d, NULL, b, 1, 0, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(O()->copy(d, NULL, 1, 0, 1, 0, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  float host[4];
  md_tensor t = simt_tensor(host, 4);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_DEVICE_UNAVAILABLE);
  cr_expect(strstr(st.message, "device lost (device_lost@5)") != NULL, "%s", st.message);
  s = simt_stats();
  cr_expect_eq(s.site_calls[MD_FAULT_ALLOCATE], 8);
  cr_expect_eq(s.alloc_calls + s.copy_calls + s.launch_calls, 0, "calls on a lost device are not counted");
}
