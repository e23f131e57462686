/* test_backend.c - the sim backend's ops table: copies and their bounds, kernel_ptr, launch
 * with red-zone and pointer checks, the simulated clock, streams and events. */
#include "sim_test.h"

#include <stdlib.h>
#include <time.h>

#define MIB (1024ull * 1024ull)

TestSuite(backend, .fini = simt_close);

Test(backend, ops_table_names_the_sim_backend_and_platform) {
  const md_backend_ops *ops = md_sim_backend();
  cr_assert_not_null(ops);
  cr_expect_eq(ops->version, MD_BACKEND_VERSION);
  cr_expect_eq(ops->struct_size, sizeof(md_backend_ops));
  cr_expect_str_eq(ops->name, "sim");
  cr_expect_str_eq(ops->platform, "sim");
  cr_expect_eq(md_sim_backend(), ops, "one static table");
}

Test(backend, open_rejects_a_params_struct_it_does_not_know) {
  const md_backend_ops *ops = md_sim_backend();
  md_backend_params p = {.struct_size = 8};
  md_backend *d = (md_backend *)0x1;
  char err[256] = "";
  cr_expect_eq(ops->open(&p, &d, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect_null(d);
  cr_expect(strstr(err, "struct_size") != NULL, "%s", err);
  cr_assert_eq(ops->open(NULL, &d, err, sizeof err), MD_NONE, "NULL params: defaults");
  md_backend_info info;
  ops->info(d, &info);
  cr_expect_eq(info.mem_total, MD_SIM_DEFAULT_MEM_LIMIT);
  ops->close(d);
}

Test(backend, info_reports_device_name_and_mem_limit) {
  md_backend *d = simt_open(3 * MIB + 5, NULL, 0);
  md_backend_info info;
  simt_get()->ops->info(d, &info);
  cr_expect_str_eq(info.device_name, "mdc simulated GPU");
  cr_expect_eq(info.mem_total, 3 * MIB + 5);
  cr_expect_eq(info.max_alloc, 3 * MIB + 5);
}

Test(backend, write_read_copy_round_trip_with_offsets) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(1000), b = simt_alloc(1000);
  uint8_t in[1000], out[1000];
  for (int i = 0; i < 1000; i++) in[i] = (uint8_t)(i * 7);
  cr_assert_eq(ops->write(d, NULL, a, 0, in, 1000, NULL, 0), MD_NONE);
  cr_assert_eq(ops->copy(d, NULL, b, 100, a, 0, 900, NULL, 0), MD_NONE);
  cr_assert_eq(ops->read(d, NULL, out, b, 100, 900, NULL, 0), MD_NONE);
  cr_expect_arr_eq(out, in, 900);
  /* An interior devptr is a devptr too; overlapping copies inside one allocation work. */
  cr_assert_eq(ops->read(d, NULL, out, a + 10, 5, 10, NULL, 0), MD_NONE);
  cr_expect_arr_eq(out, in + 15, 10);
  cr_assert_eq(ops->copy(d, NULL, a, 1, a, 0, 999, NULL, 0), MD_NONE);
  cr_assert_eq(ops->read(d, NULL, out, a, 1, 999, NULL, 0), MD_NONE);
  cr_expect_arr_eq(out, in, 999);
  cr_expect_eq(ops->write(d, NULL, a, 1000, in, 0, NULL, 0), MD_NONE, "an empty copy at the end is fine");
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.copies, 7);
  cr_expect_eq(s.common.bytes_copied, 1000 + 900 + 900 + 10 + 999 + 999 + 0);
  ops->free(d, a);
  ops->free(d, b);
}

Test(backend, big_copies_are_plain_memcpy) {
  md_backend *d = simt_open(256 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  uint64_t n = 64 * MIB;
  uint8_t *buf = malloc(n), *back = malloc(n);
  cr_assert(buf && back);
  for (uint64_t i = 0; i < n; i++) buf[i] = (uint8_t)(i ^ (i >> 13));
  md_devptr p = simt_alloc(n), q = simt_alloc(n);
  cr_assert_eq(ops->write(d, NULL, p, 0, buf, n, NULL, 0), MD_NONE);
  cr_assert_eq(ops->copy(d, NULL, q, 0, p, 0, n, NULL, 0), MD_NONE);
  cr_assert_eq(ops->read(d, NULL, back, q, 0, n, NULL, 0), MD_NONE);
  cr_expect(memcmp(buf, back, n) == 0);
  free(buf);
  free(back);
  ops->free(d, p);
  ops->free(d, q);
}

Test(backend, copy_past_the_end_is_refused_naming_devptr_and_sizes) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(64), next = simt_alloc(64);
  uint8_t buf[200];
  memset(buf, 0xEE, sizeof buf);
  char err[256], hex[24];
  cr_expect_eq(ops->write(d, NULL, a, 0, buf, 65, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, simt_hex(a, hex)) && strstr(err, "65 bytes") && strstr(err, "size 64"), "%s", err);
  cr_expect_eq(ops->write(d, NULL, a, 60, buf, 5, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(ops->write(d, NULL, a, UINT64_MAX, buf, 2, err, sizeof err), MD_GENERAL_FAILURE, "offset wrap");
  cr_expect_eq(ops->read(d, NULL, buf, a, 1, 64, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(ops->copy(d, NULL, next, 0, a, 0, 65, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy source") != NULL, "%s", err);
  cr_expect_eq(ops->copy(d, NULL, a, 32, next, 0, 33, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "copy destination") != NULL, "%s", err);
  uint8_t z[64];
  cr_assert_eq(ops->read(d, NULL, z, next, 0, 64, NULL, 0), MD_NONE);
  for (int i = 0; i < 64; i++) cr_assert_eq(z[i], 0, "the neighbour was written");
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.copies, 1, "only the read of the neighbour happened");
  cr_expect_eq(s.bad_pointers, 6);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "no red zone touched");
  ops->free(d, a);
  cr_expect_eq(ops->read(d, NULL, buf, a, 0, 1, err, sizeof err), MD_GENERAL_FAILURE, "freed devptr");
  cr_expect(strstr(err, "not in a live allocation") != NULL, "%s", err);
  cr_expect_eq(ops->write(d, NULL, 0, 0, buf, 1, err, sizeof err), MD_GENERAL_FAILURE, "null devptr");
  ops->free(d, next);
}

Test(backend, kernel_ptr_maps_live_allocations_only) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(1000);
  uint8_t *h = ops->kernel_ptr(d, a);
  cr_assert_not_null(h);
  cr_expect_eq(ops->kernel_ptr(d, a + 999), h + 999);
  cr_expect_null(ops->kernel_ptr(d, a + 1000), "one past the end is not inside");
  cr_expect_null(ops->kernel_ptr(d, 0));
  cr_expect_null(ops->kernel_ptr(d, (md_devptr)(uintptr_t)h), "a host address is not a devptr");
  ops->free(d, a);
  cr_expect_null(ops->kernel_ptr(d, a));
}

static float *kp(md_devptr p) { return simt_get()->ops->kernel_ptr(simt_get()->dev, p); }

Test(backend, launch_runs_the_kernel_on_the_calling_thread_with_null_stream) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(64), out = simt_alloc(64);
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  cr_assert_eq(ops->write(d, NULL, in, 0, v, sizeof v, NULL, 0), MD_NONE);
  md_kernel_def k = simt_kernel("inc", simt_k_inc), f = simt_kernel("fill", simt_k_fill);
  md_tensor ti = simt_tensor(kp(in), 16), to = simt_tensor(kp(out), 16);
  md_kernel_status st;
  cr_assert_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_NONE, "%s", st.message);
  cr_assert_eq(ops->read(d, NULL, v, out, 0, sizeof v, NULL, 0), MD_NONE);
  for (int i = 0; i < 16; i++) cr_expect_eq(v[i], (float)i + 1.0f);
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_expect_eq(simt_launch(s, &f, NULL, &to, &st), MD_NONE, "%s", st.message); /* checks call->stream */
  cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
  cr_expect_null(ops->stream_native(d, s));
  ops->stream_destroy(d, s);
  cr_expect_eq(simt_stats().common.launches, 2);
  ops->free(d, in);
  ops->free(d, out);
}

Test(backend, out_of_bounds_kernel_is_caught_by_the_red_zone_naming_the_allocation) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64), next = simt_alloc(64);
  md_kernel_def k = simt_kernel("oob", simt_k_oob);
  md_tensor to = simt_tensor(kp(out), 16);
  md_kernel_status st;
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, NULL, &to, &st), MD_GENERAL_FAILURE);
  cr_expect_eq(st.code, MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "red zone") && strstr(st.message, simt_hex(out, hex)) && strstr(st.message, "size 64") &&
                strstr(st.message, "'oob'"),
            "message: %s", st.message);
  cr_expect_eq(simt_stats().common.redzone_hits, 1);
  float z[16];
  cr_assert_eq(ops->read(d, NULL, z, next, 0, sizeof z, NULL, 0), MD_NONE);
  for (int i = 0; i < 16; i++) cr_expect_eq(z[i], 0.0f, "the next allocation was not reached");
  ops->free(d, out); /* repaired when reported: not counted again */
  cr_expect_eq(simt_stats().common.redzone_hits, 1);
  ops->free(d, next);
}

Test(backend, kernel_writing_before_its_buffer_is_caught_by_the_front_red_zone) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr prev = simt_alloc(256), out = simt_alloc(64);
  md_kernel_def k = simt_kernel("under", simt_k_under);
  md_tensor to = simt_tensor(kp(out), 16);
  md_kernel_status st;
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, NULL, &to, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "before the start") && strstr(st.message, simt_hex(out, hex)), "message: %s",
            st.message);
  cr_expect_eq(simt_stats().common.redzone_hits, 1);
  ops->free(d, prev);
  ops->free(d, out);
  cr_expect_eq(simt_stats().common.redzone_hits, 1);
}

Test(backend, launch_refuses_tensors_that_are_not_inside_a_live_allocation) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64), gone = simt_alloc(64);
  float *gone_h = kp(gone);
  ops->free(d, gone);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_kernel_status st;
  md_tensor t = simt_tensor((void *)(uintptr_t)out, 16); /* forgot kernel_ptr() */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "device pointer") != NULL, "%s", st.message);
  t = simt_tensor(gone_h, 16); /* use after free */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "not in a live allocation") && strstr(st.message, "output 0"), "%s", st.message);
  t = simt_tensor(kp(out), 17); /* bigger than its allocation */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "runs past the end") && strstr(st.message, "size 64"), "%s", st.message);
  t = simt_tensor(kp(out) + 16, 1); /* just past the payload: its red zone */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "past the end of allocation") != NULL, "%s", st.message);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.bad_pointers, 4);
  cr_expect_eq(s.common.redzone_hits + s.common.poison_hits, 0, "nothing ran, nothing was damaged");
  /* Host memory (parameters, scratch) is not device memory and passes. */
  float host[4];
  t = simt_tensor(host, 4);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "%s", st.message);
  ops->free(d, out);
}

Test(backend, kernel_failure_comes_back_with_its_message) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_kernel_def k = simt_kernel("no", simt_k_fail);
  k.user = "first";
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect_str_eq(st.message, "test kernel says no (first)");
  ops->free(d, out);
}

Test(backend, full_checks_after_each_launch_when_the_debug_flag_is_set) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(64), b = simt_alloc(64);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(kp(a), 16);
  md_kernel_status st;
  ((uint8_t *)kp(b))[70] = 1; /* damage b, which the launch does not use */
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "b is not checked by default");
  md_sim_debug_set(d, MD_SIM_DEBUG_CHECK_ALL);
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, simt_hex(b, hex)) != NULL, "%s", st.message);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE, "repaired: reported once");
  md_sim_debug_set(d, 0);
  ops->free(d, a);
  ops->free(d, b);
}

Test(backend, latency_advances_the_simulated_clock_without_sleeping) {
  md_backend *d = simt_open(16 * MIB, NULL, 1000000); /* 1 ms per launch */
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  md_event *e;
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 200; i++) cr_assert_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, NULL), MD_NONE);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  cr_expect_eq(md_sim_clock_ns(d), 200000000ull);
  cr_expect_eq(md_sim_event_time_ns(d, e), 200000000ull);
  cr_expect_lt(wall, 0.1, "200 simulated ms took %.3f s of wall time", wall);
  ops->event_destroy(d, e);
  ops->free(d, out);
}

Test(backend, stream_sync_returns_the_first_error_since_the_last_sync) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_kernel_def k1 = simt_kernel("no", simt_k_fail), k2 = k1, ok = simt_kernel("fill", simt_k_fill);
  k1.user = "one";
  k2.user = "two";
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  md_stream *s, *other;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->stream_create(d, &other), MD_NONE);
  md_kernel_status st2, st3;
  cr_expect_eq(simt_launch(s, &k1, NULL, &t, &st), MD_NONE, "accepted: the failure comes from the sync");
  cr_expect_eq(simt_launch(s, &ok, NULL, &t, &st2), MD_NONE);
  cr_expect_eq(simt_launch(s, &k2, NULL, &t, &st3), MD_NONE);
  char err[256] = "";
  cr_expect_eq(ops->stream_sync(d, other, err, sizeof err), MD_NONE, "errors stay on their stream");
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_str_eq(err, "test kernel says no (one)");
  cr_expect_eq(st.code, MD_GENERAL_FAILURE, "the kernel status is filled too");
  cr_expect_eq(st2.code, MD_NONE);
  cr_expect_eq(st3.code, MD_GENERAL_FAILURE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_NONE, "cleared by the sync");
  /* An error found before the work is accepted is only returned. */
  char buf[8];
  cr_expect_eq(ops->read(d, s, buf, out, 64, 8, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_NONE);
  cr_expect_eq(ops->stream_sync(d, NULL, err, sizeof err), MD_NONE);
  ops->stream_destroy(d, s);
  ops->stream_destroy(d, other);
  ops->free(d, out);
}

Test(backend, events_are_reached_once_recorded) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  cr_expect_eq(ops->event_wait(d, e, 0), MD_NONE, "never recorded: counts as reached");
  cr_expect_eq(ops->event_record(d, e, s), MD_NONE);
  cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_NONE);
  cr_expect_eq(ops->event_wait(d, e, 0), MD_NONE, "stays reached");
  cr_expect_eq(ops->event_record(d, NULL, s), MD_INVALID_ARGUMENT);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
}

Test(backend, close_releases_allocations_streams_and_events_still_live) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  simt_get()->allow_live = 1;
  md_stream *s;
  md_event *e;
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
    cr_assert_eq(ops->event_create(d, &e), MD_NONE);
    simt_alloc(1000);
  }
  /* Leak sanitizer (ASan build) checks that close frees them all. */
}

/* Internal contracts no client reaches through the ABI (the runtime always passes an out
 * pointer): `mdc mutate --tests` found sim_sched.c:md__sim_stream_create:status_swap:1 alive. */
Test(backend, stream_and_event_create_refuse_a_null_out) {
  md_backend *d = simt_open(MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  cr_expect_eq(ops->stream_create(d, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_create(d, NULL), MD_INVALID_ARGUMENT);
  md_stream *s = (md_stream *)0x1;
  cr_expect_eq(ops->stream_create(NULL, &s), MD_INVALID_ARGUMENT, "not a sim device");
}
