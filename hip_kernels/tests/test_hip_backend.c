/* test_hip_backend.c - the hip backend behind md_backend_ops: memory (zero-filled, bounded by
 * the bytes requested), copies, streams and events, launches, device loss, kernel
 * registration. Built on the CPU execution layer (hipcpu_test_hip_backend: every test runs, and
 * those needing the layer's hooks are compiled in) and on a GPU (hip_test_hip_backend: tests
 * skip where no GPU answers). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_test.h"
#include "md/status.h"
#ifdef MD_HIP_CPU
#include "md_hip_cpu.h" /* the CPU layer's test hooks: injected errors, held streams */
#endif

static const md_backend_ops *ops(void) { return md_hip_backend(); }

Test(hip_backend, without_a_gpu_open_is_device_unavailable_naming_the_call) {
#ifdef MD_HIP_CPU
  md_hipcpu_fail(MD_HIPCPU_DEVICE, 1, hipErrorInsufficientDriver); /* as a machine with no driver */
#endif
  md_backend_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  char err[256] = "";
  md_backend *b = NULL;
  md_status st = ops()->open(&p, &b, err, sizeof err);
  if (st == MD_NONE) {
    ops()->close(b);
    cr_skip_test("a GPU answered: this test is for machines without one");
  }
  cr_assert_eq(st, MD_DEVICE_UNAVAILABLE, "%s", err);
  cr_assert(strstr(err, "hip: no GPU: hipGetDeviceCount"), "%s", err);
}

Test(hip_backend, driver_backend_hip_and_auto_say_which_backend_runs) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = NULL;
  md_status st = drv->open_device("backend=hip", &dev);
  int gpu = st == MD_NONE;
  if (gpu) {
    drv->close_device(dev);
  } else {
    cr_assert_eq(st, MD_DEVICE_UNAVAILABLE);
    cr_assert(strstr(drv->last_error(NULL), "hip: no GPU"), "%s", drv->last_error(NULL));
  }
  cr_assert_eq(drv->open_device("backend=auto", &dev), MD_NONE, "%s", drv->last_error(NULL));
  md_capabilities caps = {.struct_size = sizeof caps};
  cr_assert_eq(drv->get_capabilities(dev, &caps), MD_NONE);
  cr_assert_str_eq(caps.backend, gpu ? "hip" : "sim");
  drv->close_device(dev);
}

Test(hip_backend, faults_are_refused_as_a_simulator_plan) {
  md_backend_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.faults = "alloc_fail@1";
  char err[256] = "";
  md_backend *b = NULL;
  cr_assert_eq(ops()->open(&p, &b, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_assert(strstr(err, "simulator fault plan"), "%s", err);
}

Test(hip_backend, new_memory_is_zero_also_when_reused) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const uint64_t n = 3u << 20;
  uint8_t *h = malloc(n);
  md_devptr p;
  cr_assert_eq(ops()->alloc(b, n, &p), MD_NONE);
  cr_assert_eq(ops()->read(b, NULL, h, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(h[i], 0, "byte %llu", (unsigned long long)i);
  memset(h, 0xA5, n);
  cr_assert_eq(ops()->write(b, NULL, p, 0, h, n, err, sizeof err), MD_NONE, "%s", err);
  ops()->free(b, p);
  cr_assert_eq(ops()->alloc(b, n, &p), MD_NONE);
  cr_assert_eq(ops()->read(b, NULL, h, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  for (uint64_t i = 0; i < n; i++) cr_assert_eq(h[i], 0, "reused byte %llu", (unsigned long long)i);
  ops()->free(b, p);
  free(h);
  ops()->close(b);
}

/* SPEC 5: a new buffer never shows an earlier one's bytes, the pool's rounding slack included:
 * the zero-fill covers the requested bytes, so copies may not reach past them either (they
 * were bounded by the rounded-up block: a write into the slack of a 1000-byte buffer (class
 * 1024) survived into the next buffer given that block). */
Test(hip_backend, a_new_buffer_never_shows_an_earlier_ones_bytes_in_the_slack) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  uint8_t h[1024], g[1024];
  md_devptr p, q;
  cr_assert_eq(ops()->alloc(b, 1000, &p), MD_NONE);
  memset(h, 0xAB, sizeof h);
  md_status w = ops()->write(b, NULL, p, 0, h, 1024, err, sizeof err);
  md_status w2 = ops()->write(b, NULL, p, 1000, h, 1, err, sizeof err);
  ops()->free(b, p);
  cr_assert_eq(ops()->alloc(b, 1000, &q), MD_NONE);
  cr_assert_eq(q, p, "the pool hands the same block out again");
  memset(g, 0x11, sizeof g);
  md_status r = ops()->read(b, NULL, g, q, 0, 1024, err, sizeof err);
  if (r == MD_NONE)
    for (int i = 0; i < 1024; i++)
      cr_assert_eq(g[i], 0, "byte %d of the new buffer is %#x, left by the earlier one", i, g[i]);
  cr_assert_eq(w, MD_GENERAL_FAILURE, "a write past the 1000 requested bytes is refused");
  cr_assert_eq(w2, MD_GENERAL_FAILURE);
  cr_assert_eq(r, MD_GENERAL_FAILURE, "a read past them too");
  cr_assert(strstr(err, "1000-byte allocation"), "%s", err);
  cr_assert_eq(ops()->read(b, NULL, g, q, 0, 1000, err, sizeof err), MD_NONE, "%s", err);
  for (int i = 0; i < 1000; i++) cr_assert_eq(g[i], 0, "byte %d", i);
  ops()->free(b, q);
  ops()->close(b);
}

Test(hip_backend, copies_round_trip_across_staging_chunks) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const uint64_t n = (19u << 20) + 13; /* more than two staging buffers, an odd tail */
  uint8_t *src = malloc(n), *dst = malloc(n);
  for (uint64_t i = 0; i < n; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
  md_devptr p, q;
  cr_assert_eq(ops()->alloc(b, n + 100, &p), MD_NONE);
  cr_assert_eq(ops()->alloc(b, n + 100, &q), MD_NONE);
  cr_assert_eq(ops()->write(b, NULL, p, 7, src, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(ops()->copy(b, NULL, q, 3, p, 7, n, err, sizeof err), MD_NONE, "%s", err);
  memset(dst, 0, n);
  cr_assert_eq(ops()->read(b, NULL, dst, q, 3, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(src, dst, n) == 0);
  /* Out of bounds and unknown pointers are refused, naming the allocation. */
  cr_assert_eq(ops()->write(b, NULL, p, 200, src, n, err, sizeof err), MD_GENERAL_FAILURE);
  cr_assert(strstr(err, "outside"), "%s", err);
  cr_assert_eq(ops()->read(b, NULL, dst, p + 512, 0, 4, err, sizeof err), MD_GENERAL_FAILURE);
  ops()->free(b, p);
  ops()->free(b, q);
  free(src);
  free(dst);
  ops()->close(b);
}

Test(hip_backend, streams_and_events_order_work) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const uint64_t n = 12u << 20;
  uint8_t *src = malloc(n), *dst = malloc(n);
  memset(src, 0x5C, n);
  md_stream *s;
  md_event *e;
  md_devptr p;
  cr_assert_eq(ops()->alloc(b, n, &p), MD_NONE);
  cr_assert_eq(ops()->stream_create(b, &s), MD_NONE);
  cr_assert_not_null(ops()->stream_native(b, s));
  cr_assert_eq(ops()->event_create(b, &e), MD_NONE);
  cr_assert_eq(ops()->write(b, s, p, 0, src, n, err, sizeof err), MD_NONE, "%s", err);
  memset(src, 0, n); /* the write staged its bytes already */
  cr_assert_eq(ops()->event_record(b, e, s), MD_NONE);
  cr_assert_eq(ops()->event_wait(b, e, 5000000000u), MD_NONE);
  cr_assert_eq(ops()->read(b, s, dst, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(ops()->stream_sync(b, s, err, sizeof err), MD_NONE, "%s", err);
  for (uint64_t i = 0; i < n; i += 4099) cr_assert_eq(dst[i], 0x5C);
  cr_assert_eq(ops()->event_record(b, e, NULL), MD_NONE);
  cr_assert_eq(ops()->event_wait(b, e, 0), MD_NONE, "a NULL-stream event is reached at once");
  ops()->event_destroy(b, e);
  ops()->stream_destroy(b, s);
  ops()->free(b, p);
  free(src);
  free(dst);
  ops()->close(b);
}

Test(hip_backend, mem_limit_refuses_persistently_and_transiently) {
  md_backend *b = hip_open_or_skip(64u << 20);
  md_backend_info info;
  ops()->info(b, &info);
  cr_assert_eq(info.mem_total, 64u << 20);
  md_devptr p, q;
  cr_assert_eq(ops()->alloc(b, 65u << 20, &p), MD_RESOURCE_EXHAUSTED_PERSISTENT);
  cr_assert_eq(ops()->alloc(b, 40u << 20, &p), MD_NONE);
  cr_assert_eq(ops()->alloc(b, 40u << 20, &q), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  ops()->free(b, p);
  cr_assert_eq(ops()->alloc(b, 40u << 20, &q), MD_NONE, "the freed block is reused");
  ops()->free(b, q);
  ops()->close(b);
}

/* Host memory the runtime registers (a registered pool's mapping, SPEC 9) is page-locked and
 * copied from and to directly: same bytes as through the staging buffers, synchronously and on
 * a stream, across chunk sizes; a copy reaching past the range is staged; after
 * host_unregister the range is staged again. On the CPU layer the direct copies are counted. */
Test(hip_backend, registered_host_memory_is_copied_directly) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const uint64_t n = (9u << 20) + 4093; /* more than one staging buffer, an odd tail */
  uint8_t *src = aligned_alloc(4096, (n + 4095) / 4096 * 4096), *dst = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  uint8_t *plain = malloc(n);
  cr_assert(src && dst && plain);
  for (uint64_t i = 0; i < n; i++) src[i] = (uint8_t)(i * 2654435761u >> 11);
  cr_assert_eq(ops()->host_register(b, src, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(ops()->host_register(b, dst, n, err, sizeof err), MD_NONE, "%s", err);
#ifdef MD_HIP_CPU
  md_hipcpu_stats s0, s1;
  md_hipcpu_stats_get(&s0);
  cr_assert_eq(s0.host_registered, 2);
  /* The same range twice is refused (the runtime then uses it unpinned). */
  cr_assert_neq(ops()->host_register(b, src + 4096, 4096, err, sizeof err), MD_NONE);
  cr_assert(strstr(err, "hipHostRegister"), "%s", err);
#endif
  md_devptr p;
  cr_assert_eq(ops()->alloc(b, n + 64, &p), MD_NONE);
  /* synchronous: write from and read into registered memory */
  cr_assert_eq(ops()->write(b, NULL, p, 5, src, n, err, sizeof err), MD_NONE, "%s", err);
  memset(dst, 0, n);
  cr_assert_eq(ops()->read(b, NULL, dst, p, 5, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(src, dst, n) == 0);
#ifdef MD_HIP_CPU
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.registered_copies - s0.registered_copies, 2, "direct copies: %llu",
               (unsigned long long)(s1.registered_copies - s0.registered_copies));
  s0 = s1;
#endif
  /* on a stream: queued, complete at the synchronization */
  md_stream *st;
  cr_assert_eq(ops()->stream_create(b, &st), MD_NONE);
  for (uint64_t i = 0; i < n; i += 7) src[i] ^= 0x5A;
  memset(dst, 0, n);
  cr_assert_eq(ops()->write(b, st, p, 0, src, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(ops()->read(b, st, dst, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(ops()->stream_sync(b, st, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(src, dst, n) == 0);
  ops()->stream_destroy(b, st);
  /* a copy reaching past the range (src's allocation has 3 bytes after it), and one from
   * unregistered memory, are staged */
  cr_assert_eq(ops()->write(b, NULL, p, 0, src + n - 8, 11, err, sizeof err), MD_NONE, "%s", err);
  uint8_t edge[11];
  cr_assert_eq(ops()->read(b, NULL, edge, p, 0, 11, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(edge, src + n - 8, 11) == 0);
  memcpy(plain, src, n);
  cr_assert_eq(ops()->write(b, NULL, p, 0, plain, n, err, sizeof err), MD_NONE, "%s", err);
  memset(plain, 0, n);
  cr_assert_eq(ops()->read(b, NULL, plain, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(src, plain, n) == 0);
#ifdef MD_HIP_CPU
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.registered_copies - s0.registered_copies, 2, "only the stream's two copies were direct");
  s0 = s1;
#endif
  ops()->host_unregister(b, dst);
  ops()->host_unregister(b, dst);            /* a second time: nothing registered there, no-op */
  ops()->host_unregister(b, plain);          /* never registered: no-op */
  memset(dst, 0, n);
  cr_assert_eq(ops()->read(b, NULL, dst, p, 0, n, err, sizeof err), MD_NONE, "%s", err);
  cr_assert(memcmp(src, dst, n) == 0);
#ifdef MD_HIP_CPU
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.registered_copies, s0.registered_copies, "an unregistered range is staged");
  cr_expect_eq(s1.host_registered, 1);
#endif
  ops()->free(b, p);
  ops()->close(b);   /* lets go of src's range, which was never unregistered */
#ifdef MD_HIP_CPU
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.host_registered, 0);
#endif
  free(src);
  free(dst);
  free(plain);
}

#ifdef MD_HIP_CPU
/* A kernel launched after an unrelated failure of the same thread (a pinned staging buffer that
 * could not be had, an event that was not reached yet) runs and succeeds: the launcher clears
 * the thread's last error before launching, so it reads its own launch's error only. */
Test(hip_backend, a_kernel_launch_is_not_failed_by_an_earlier_error_of_the_thread) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const md_kernel_def *relu = md_kernel_find("RELU", "hip");
  cr_assert_not_null(relu);
  md_devptr in, out;
  cr_assert_eq(ops()->alloc(b, 4096, &in), MD_NONE);
  cr_assert_eq(ops()->alloc(b, 4096, &out), MD_NONE);
  md_tensor t[2] = {{.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {1024}, .bytes = 4096},
                    {.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {1024}, .bytes = 4096}};
  t[0].data = ops()->kernel_ptr(b, in);
  t[1].data = ops()->kernel_ptr(b, out);
  md_kernel_call call = {.struct_size = sizeof call, .platform = "hip", .n_inputs = 1, .inputs = t,
                         .n_outputs = 1, .outputs = t + 1};
  md_kernel_status ks;
  /* 1. A write on a new stream whose staging buffers cannot be pinned. */
  md_stream *s;
  cr_assert_eq(ops()->stream_create(b, &s), MD_NONE);
  md_hipcpu_fail(MD_HIPCPU_HOST_MALLOC, 1, hipErrorOutOfMemory);
  uint8_t h[64] = {0};
  cr_assert_eq(ops()->write(b, s, in, 0, h, sizeof h, err, sizeof err), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  memset(&ks, 0, sizeof ks);
  cr_assert_eq(ops()->launch(b, NULL, relu, &call, &ks), MD_NONE, "RELU after a failed hipHostMalloc: %s",
               ks.message);
  /* 2. An event not reached yet (its stream is held). */
  md_event *e;
  cr_assert_eq(ops()->event_create(b, &e), MD_NONE);
  md_hipcpu_stream_hold(ops()->stream_native(b, s), 1);
  cr_assert_eq(ops()->event_record(b, e, s), MD_NONE);
  cr_assert_eq(ops()->event_wait(b, e, 0), MD_MISSED_DEADLINE_TRANSIENT);
  memset(&ks, 0, sizeof ks);
  cr_assert_eq(ops()->launch(b, NULL, relu, &call, &ks), MD_NONE, "RELU after a not-ready event: %s", ks.message);
  md_hipcpu_stream_hold(ops()->stream_native(b, s), 0);
  cr_assert_eq(ops()->event_wait(b, e, UINT64_MAX), MD_NONE);
  ops()->event_destroy(b, e);
  ops()->stream_destroy(b, s);
  ops()->free(b, in);
  ops()->free(b, out);
  ops()->close(b);
}
#endif /* MD_HIP_CPU */

#ifdef MD_HIP_CPU
/* Every fatal error a GPU reports for a faulting kernel loses the device: the launch's
 * synchronization is DEVICE_UNAVAILABLE, and so is every later call, naming the first error.
 * The NVIDIA-only ones (misaligned address, illegal instruction, ...) were GENERAL_FAILURE. */
static hipError_t fatal_errors[] = {
    hipErrorIllegalAddress, hipErrorLaunchFailure, hipErrorLaunchTimeOut, hipErrorECCNotCorrectable,
    hipErrorAssert, hipErrorHardwareStackError, hipErrorIllegalInstruction, hipErrorMisalignedAddress,
    hipErrorInvalidAddressSpace, hipErrorInvalidPc};
ParameterizedTestParameters(hip_backend, a_kernel_fault_loses_the_device) {
  return cr_make_param_array(hipError_t, fatal_errors, sizeof fatal_errors / sizeof fatal_errors[0]);
}
ParameterizedTest(hipError_t *fault, hip_backend, a_kernel_fault_loses_the_device) {
  md_backend *b = hip_open_or_skip(0);
  char err[256];
  const md_kernel_def *relu = md_kernel_find("RELU", "hip");
  md_devptr in, out;
  cr_assert_eq(ops()->alloc(b, 4096, &in), MD_NONE);
  cr_assert_eq(ops()->alloc(b, 4096, &out), MD_NONE);
  md_tensor t[2] = {{.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {1024}, .bytes = 4096},
                    {.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {1024}, .bytes = 4096}};
  t[0].data = ops()->kernel_ptr(b, in);
  t[1].data = ops()->kernel_ptr(b, out);
  md_kernel_call call = {.struct_size = sizeof call, .platform = "hip", .n_inputs = 1, .inputs = t,
                         .n_outputs = 1, .outputs = t + 1};
  md_kernel_status ks;
  memset(&ks, 0, sizeof ks);
  md_hipcpu_fail(MD_HIPCPU_KERNEL, 1, *fault);
  md_status st = ops()->launch(b, NULL, relu, &call, &ks);
  cr_assert_eq(st, MD_DEVICE_UNAVAILABLE, "%s: %s (%s)", hipGetErrorName(*fault), md_status_name(st), ks.message);
  cr_assert(strstr(ks.message, hipGetErrorName(*fault)), "%s", ks.message);
  /* Lost for good: memory, copies, streams, events. */
  md_devptr p;
  cr_assert_eq(ops()->alloc(b, 64, &p), MD_DEVICE_UNAVAILABLE);
  uint8_t h[16];
  cr_assert_eq(ops()->read(b, NULL, h, in, 0, 16, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_assert(strstr(err, "device lost earlier"), "%s", err);
  cr_assert(strstr(err, hipGetErrorName(*fault)), "%s", err);
  md_stream *s;
  cr_assert_eq(ops()->stream_create(b, &s), MD_DEVICE_UNAVAILABLE);
  md_event *e;
  cr_assert_eq(ops()->event_create(b, &e), MD_DEVICE_UNAVAILABLE);
  ops()->free(b, in);
  ops()->free(b, out);
  ops()->close(b);
}
#endif /* MD_HIP_CPU */

static void not_ours(const md_kernel_call *c, md_kernel_status *st) {
  (void)c;
  md_kernel_fail(st, MD_GENERAL_FAILURE, "a user kernel");
}

/* A kernel registration that fails is tried again at the next open, not remembered for the
 * life of the process: here a user kernel holds ("FULLY_CONNECTED", "hip") at the first open;
 * once it is unregistered, the next open registers the backend's (and keeps the ones the first
 * open registered). */
Test(hip_backend, a_failed_kernel_registration_is_tried_again_at_the_next_open) {
  md_kernel_def d = *md_kernel_find("FULLY_CONNECTED", "host");
  d.platform = "hip";
  d.run = not_ours;
  d.user = NULL;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  md_backend_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  char err[256] = "";
  md_backend *b = NULL;
  md_status st = ops()->open(&p, &b, err, sizeof err);
  if (st == MD_DEVICE_UNAVAILABLE && strstr(err, "no GPU")) cr_skip_test("GPU-only test skipped: %s", err);
  cr_assert_eq(st, MD_DEVICE_UNAVAILABLE, "%s", err);
  cr_assert(strstr(err, "registering FULLY_CONNECTED"), "%s", err);
  cr_assert_eq(md_kernel_unregister("FULLY_CONNECTED", "hip"), MD_NONE);
  b = hip_open_or_skip(0);
  cr_assert_not_null(md_kernel_find("FULLY_CONNECTED", "hip"));
  cr_assert_neq(md_kernel_find("FULLY_CONNECTED", "hip")->run, not_ours);
  cr_assert_not_null(md_kernel_find("CONCATENATION", "hip"));
  ops()->close(b);
}
