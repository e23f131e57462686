/* test_hip_cpu.c - the CPU execution layer itself (hip_kernels/cpu): the HIP behaviour the
 * backend's tests rely on. Execution model (every block and thread once, barriers, shared
 * memory, argument copies, kernel faults), launch checks, memory and its errors, streams,
 * events, the last-error model (non-sticky vs sticky) and error injection. Each test runs in its
 * own process (Criterion), so a lost device ends with its test. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_cpu_test_kernels.h"
#include "md_hip_cpu.h"

#define OK(x) cr_assert_eq((x), hipSuccess, "%s: %s", #x, hipGetErrorName(hipGetLastError()))

/* Every test ends with nothing of the device left over. */
static void no_leaks(void) {
  md_hipcpu_stats s;
  md_hipcpu_stats_get(&s);
  cr_expect_eq(s.device_allocs, 0, "device allocations left: %llu", (unsigned long long)s.device_allocs);
  cr_expect_eq(s.host_allocs, 0, "pinned allocations left: %llu", (unsigned long long)s.host_allocs);
  cr_expect_eq(s.streams, 0, "streams left: %llu", (unsigned long long)s.streams);
  cr_expect_eq(s.events, 0, "events left: %llu", (unsigned long long)s.events);
}
TestSuite(hip_cpu, .fini = no_leaks);

Test(hip_cpu, every_block_and_thread_runs_once_with_its_coordinates) {
  const uint32_t grid[3] = {3, 2, 2}, block[3] = {8, 4, 2};
  const uint32_t n = 3 * 2 * 2 * 8 * 4 * 2;
  uint32_t *count, *coords;
  OK(hipMalloc((void **)&count, n * 4));
  OK(hipMalloc((void **)&coords, n * 24));
  OK(hipMemsetAsync(count, 0, n * 4, NULL));
  hct_index(NULL, grid, block, count, coords);
  OK(hipGetLastError());
  uint32_t *hc = malloc(n * 4), *hx = malloc(n * 24);
  OK(hipMemcpy(hc, count, n * 4, hipMemcpyDeviceToHost));
  OK(hipMemcpy(hx, coords, n * 24, hipMemcpyDeviceToHost));
  for (uint32_t id = 0; id < n; id++) {
    cr_assert_eq(hc[id], 1, "thread %u ran %u times", id, hc[id]);
    uint32_t t = id % 64, b = id / 64;
    const uint32_t *c = hx + id * 6;
    cr_assert(c[0] == b % 3 && c[1] == b / 3 % 2 && c[2] == b / 6 && c[3] == t % 8 && c[4] == t / 8 % 4 &&
                  c[5] == t / 32,
              "thread %u saw block (%u,%u,%u) thread (%u,%u,%u)", id, c[0], c[1], c[2], c[3], c[4], c[5]);
  }
  md_hipcpu_stats s;
  md_hipcpu_stats_get(&s);
  cr_assert_eq(s.blocks, 12);
  cr_assert_eq(s.threads, n);
  free(hc);
  free(hx);
  OK(hipFree(count));
  OK(hipFree(coords));
}

Test(hip_cpu, syncthreads_is_a_barrier_and_shared_memory_is_per_block) {
  enum { B = 37 };
  uint32_t *in, h[B * 256];
  uint64_t *out, got[B], want[B] = {0};
  for (uint32_t i = 0; i < B * 256; i++) {
    h[i] = i * 2654435761u >> 7;
    want[i / 256] += h[i];
  }
  OK(hipMalloc((void **)&in, sizeof h));
  OK(hipMalloc((void **)&out, sizeof got));
  OK(hipMemcpy(in, h, sizeof h, hipMemcpyHostToDevice));
  hct_block_sum(NULL, B, in, out);
  OK(hipGetLastError());
  OK(hipMemcpy(got, out, sizeof got, hipMemcpyDeviceToHost));
  for (int b = 0; b < B; b++) cr_assert_eq(got[b], want[b], "block %d", b);
  md_hipcpu_stats s;
  md_hipcpu_stats_get(&s);
  cr_assert_eq(s.barriers, (uint64_t)B * 9, "1 + log2(256) barriers per block, %llu",
               (unsigned long long)s.barriers);
  OK(hipFree(in));
  OK(hipFree(out));
}

Test(hip_cpu, locals_survive_barriers_per_thread) {
  enum { B = 5, N = B * 128 };
  float *in, *out, h[N], g[N];
  for (int i = 0; i < N; i++) h[i] = (float)i * 0.5f - 7.0f;
  OK(hipMalloc((void **)&in, sizeof h));
  OK(hipMalloc((void **)&out, sizeof g));
  OK(hipMemcpy(in, h, sizeof h, hipMemcpyHostToDevice));
  hct_reverse(NULL, B, in, out);
  OK(hipMemcpy(g, out, sizeof g, hipMemcpyDeviceToHost));
  for (int i = 0; i < N; i++) cr_assert_eq(g[i], h[i / 128 * 128 + 127 - i % 128], "element %d", i);
  OK(hipFree(in));
  OK(hipFree(out));
}

Test(hip_cpu, kernel_arguments_are_copied_at_the_launch) {
  uint32_t *out, g[16];
  OK(hipMalloc((void **)&out, sizeof g));
  md_hipcpu_stream_hold(NULL, 1); /* the kernel runs after the launcher changed its struct */
  hct_copy_arg(NULL, out);
  OK(hipGetLastError());
  md_hipcpu_stream_hold(NULL, 0);
  OK(hipMemcpy(g, out, sizeof g, hipMemcpyDeviceToHost));
  for (uint32_t i = 0; i < 16; i++) cr_assert_eq(g[i], 100 + i);
  OK(hipFree(out));
}

Test(hip_cpu, a_barrier_not_reached_by_every_thread_is_a_sticky_kernel_fault) {
  uint32_t *out;
  OK(hipMalloc((void **)&out, 256));
  hct_divergent(NULL, 8, out);
  cr_assert_eq(hipGetLastError(), hipSuccess, "the launch itself is fine");
  cr_assert_eq(hipStreamSynchronize(NULL), hipErrorLaunchFailure);
  cr_assert(strstr(md_hipcpu_fault_message(), "k_divergent"), "%s", md_hipcpu_fault_message());
  cr_assert(strstr(md_hipcpu_fault_message(), "56 of 64 threads wait"), "%s", md_hipcpu_fault_message());
  /* Sticky: every later call, and hipGetLastError keeps returning it. */
  void *p;
  cr_assert_eq(hipMalloc(&p, 64), hipErrorLaunchFailure);
  cr_assert_eq(hipGetLastError(), hipErrorLaunchFailure);
  cr_assert_eq(hipGetLastError(), hipErrorLaunchFailure);
  /* Releasing still releases, returning the error. */
  cr_assert_eq(hipFree(out), hipErrorLaunchFailure);
  /* The executor replaced the stuck threads: kernels still run (the device is lost, so only
   * their launch is accepted; that no thread is left mid-kernel shows in ASan/TSan runs). */
}

Test(hip_cpu, bad_launch_configurations_are_a_non_sticky_last_error) {
  uint32_t *count, *coords;
  OK(hipMalloc((void **)&count, 4096));
  OK(hipMalloc((void **)&coords, 6 * 4096));
  static const uint32_t bad[][6] = {
      {0, 1, 1, 32, 1, 1}, {1, 1, 1, 1025, 1, 1}, {1, 1, 1, 64, 32, 1}, {1, 1, 1, 1, 1, 65},
      {1, 65536, 1, 32, 1, 1}, {1, 1, 1, 0, 1, 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hct_index(NULL, bad[i], bad[i] + 3, count, coords);
    cr_assert_eq(hipPeekAtLastError(), hipErrorInvalidConfiguration, "configuration %zu", i);
    cr_assert_eq(hipGetLastError(), hipErrorInvalidConfiguration, "configuration %zu", i);
    cr_assert_eq(hipGetLastError(), hipSuccess, "read once, the error is gone");
  }
  md_hipcpu_launch l[2];
  cr_assert_eq(md_hipcpu_launches(l, 2), 2);
  cr_assert_str_eq(l[0].kernel, "k_index", "refused launches are logged too");
  cr_assert_eq(l[0].block[0], 0);
  OK(hipStreamSynchronize(NULL));
  OK(hipFree(count));
  OK(hipFree(coords));
}

Test(hip_cpu, a_failed_call_stays_the_last_error_until_read) {
  md_hipcpu_set_memory(1u << 20);
  void *p = NULL, *q = NULL;
  cr_assert_eq(hipMalloc(&p, 2u << 20), hipErrorOutOfMemory);
  OK(hipMalloc(&q, 4096));
  cr_assert_eq(hipPeekAtLastError(), hipErrorOutOfMemory, "a good call does not clear it");
  cr_assert_eq(hipGetLastError(), hipErrorOutOfMemory);
  cr_assert_eq(hipGetLastError(), hipSuccess);
  /* "Not ready" is recorded like any error (the strict model). */
  hipEvent_t e;
  OK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
  md_hipcpu_stream_hold(NULL, 1);
  OK(hipEventRecord(e, NULL));
  cr_assert_eq(hipEventQuery(e), hipErrorNotReady);
  md_hipcpu_stream_hold(NULL, 0);
  OK(hipEventSynchronize(e));
  OK(hipEventQuery(e));
  cr_assert_eq(hipGetLastError(), hipErrorNotReady);
  OK(hipEventDestroy(e));
  OK(hipFree(q));
}

static void *read_last_error(void *arg) {
  *(hipError_t *)arg = hipGetLastError();
  return NULL;
}

Test(hip_cpu, the_last_error_is_per_thread) {
  void *p;
  cr_assert_eq(hipMalloc(&p, (size_t)1 << 62), hipErrorOutOfMemory);
  pthread_t t;
  hipError_t seen = hipErrorUnknown;
  cr_assert_eq(pthread_create(&t, NULL, read_last_error, &seen), 0);
  pthread_join(t, NULL);
  cr_assert_eq(seen, hipSuccess, "another thread starts with a clean slate");
  cr_assert_eq(hipGetLastError(), hipErrorOutOfMemory);
}

Test(hip_cpu, device_memory_has_a_capacity_and_checked_ranges) {
  md_hipcpu_set_memory(1u << 20);
  size_t fr, tot;
  OK(hipMemGetInfo(&fr, &tot));
  cr_assert_eq(tot, 1u << 20);
  uint8_t *a, *b;
  OK(hipMalloc((void **)&a, 1000));
  cr_assert_eq((uintptr_t)a % 256, 0);
  OK(hipMemGetInfo(&fr, &tot));
  cr_assert_eq(fr, (1u << 20) - 1024, "allocations are 256-byte granular");
  uint8_t h[2048];
  OK(hipMemcpy(h, a, 1000, hipMemcpyDeviceToHost));
  for (int i = 0; i < 1000; i++) cr_assert_eq(h[i], 0xDB, "new device memory is not zero");
  cr_assert_eq(hipMalloc((void **)&b, 1u << 20), hipErrorOutOfMemory);
  (void)hipGetLastError();
  /* Copies and memsets whose device side is not inside one allocation are refused. */
  cr_assert_eq(hipMemcpy(a + 512, h, 1024, hipMemcpyHostToDevice), hipErrorInvalidValue);
  cr_assert_eq(hipMemcpy(h, a - 16, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  cr_assert_eq(hipMemsetAsync(a + 1, 0, 1024, NULL), hipErrorInvalidValue);
  cr_assert_eq(hipMemcpy(h, h + 1024, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
  cr_assert_eq(hipFree(a + 256), hipErrorInvalidValue, "only an allocation's start frees it");
  OK(hipMemcpy(a + 24, h, 1000, hipMemcpyHostToDevice));
  OK(hipFree(a));
  cr_assert_eq(hipFree(a), hipErrorInvalidValue, "a double free is refused");
  (void)hipGetLastError();
  OK(hipMemGetInfo(&fr, &tot));
  cr_assert_eq(fr, tot);
}

Test(hip_cpu, injected_errors_fire_on_the_nth_call_once) {
  void *p[3];
  md_hipcpu_fail(MD_HIPCPU_MALLOC, 2, hipErrorOutOfMemory);
  OK(hipMalloc(&p[0], 64));
  cr_assert_eq(hipMalloc(&p[1], 64), hipErrorOutOfMemory);
  OK(hipMalloc(&p[2], 64));
  cr_assert_eq(hipGetLastError(), hipErrorOutOfMemory);
  md_hipcpu_fail(MD_HIPCPU_HOST_MALLOC, 1, hipErrorOutOfMemory);
  void *h;
  cr_assert_eq(hipHostMalloc(&h, 4096, 0), hipErrorOutOfMemory);
  OK(hipHostMalloc(&h, 4096, 0));
  OK(hipHostFree(h));
  md_hipcpu_fail(MD_HIPCPU_DEVICE, 1, hipErrorNoDevice);
  int n = 0;
  cr_assert_eq(hipGetDeviceCount(&n), hipErrorNoDevice);
  /* No device is fatal: the device is gone for good, for every call. */
  cr_assert_eq(hipGetDeviceCount(&n), hipErrorNoDevice);
  cr_assert_eq(hipFree(p[0]), hipErrorNoDevice);
  cr_assert_eq(hipFree(p[2]), hipErrorNoDevice);
}

Test(hip_cpu, a_kernel_fault_is_asynchronous_and_sticky) {
  uint32_t *count, *coords;
  OK(hipMalloc((void **)&count, 4096));
  OK(hipMalloc((void **)&coords, 6 * 4096));
  const uint32_t g[3] = {1, 1, 1}, bl[3] = {32, 1, 1};
  md_hipcpu_fail(MD_HIPCPU_KERNEL, 1, hipErrorMisalignedAddress);
  /* held, so the kernel cannot fault (the device's error, which hipGetLastError returns) before
   * the launch's own status is read: under load it did, and the test failed now and then */
  md_hipcpu_stream_hold(NULL, 1);
  hct_index(NULL, g, bl, count, coords);
  cr_assert_eq(hipGetLastError(), hipSuccess, "the launch was fine");
  md_hipcpu_stream_hold(NULL, 0);
  cr_assert_eq(hipStreamSynchronize(NULL), hipErrorMisalignedAddress);
  cr_assert_eq(hipGetLastError(), hipErrorMisalignedAddress);
  cr_assert_eq(hipGetLastError(), hipErrorMisalignedAddress, "sticky: not cleared by reading");
  hipStream_t s;
  cr_assert_eq(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), hipErrorMisalignedAddress);
  cr_assert(md_hipcpu_is_fatal(hipErrorMisalignedAddress));
  cr_assert(!md_hipcpu_is_fatal(hipErrorOutOfMemory));
  (void)hipFree(count);
  (void)hipFree(coords);
}

/* hipHostRegister: a registered range is page-locked host memory for copies (an async copy
 * from or to it is queued, not done at the call, as with hipHostMalloc's); overlapping ranges
 * and unknown pointers are refused with HIP's codes. */
Test(hip_cpu, registered_host_memory_copies_asynchronously) {
  float *host = aligned_alloc(4096, 8192), *d;
  cr_assert(host);
  for (int i = 0; i < 2048; i++) host[i] = (float)(i + 1);
  OK(hipMalloc((void **)&d, 8192));
  cr_assert_eq(hipHostRegister(NULL, 4096, hipHostRegisterDefault), hipErrorInvalidValue);
  cr_assert_eq(hipHostRegister(host, 0, hipHostRegisterDefault), hipErrorInvalidValue);
  OK(hipHostRegister(host, 8192, hipHostRegisterDefault));
  cr_assert_eq(hipHostRegister(host + 1024, 64, hipHostRegisterDefault), hipErrorHostMemoryAlreadyRegistered);
  (void)hipGetLastError();
  md_hipcpu_stats s0, s1;
  md_hipcpu_stats_get(&s0);
  cr_assert_eq(s0.host_registered, 1);
  hipStream_t s;
  OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  md_hipcpu_stream_hold(s, 1);
  /* Held: a pageable copy would wait for the stream here; a registered one is only queued. */
  OK(hipMemcpyAsync(d, host, 8192, hipMemcpyHostToDevice, s));
  OK(hipMemsetAsync(d, 0, 4, s));
  OK(hipMemcpyAsync(host, d, 4096, hipMemcpyDeviceToHost, s));
  cr_assert_eq(host[0], 1.0f, "nothing ran while the stream is held");
  md_hipcpu_stats_get(&s1);
  cr_assert_eq(s1.registered_copies - s0.registered_copies, 2);
  md_hipcpu_stream_hold(s, 0);
  OK(hipStreamSynchronize(s));
  cr_assert_eq(host[0], 0.0f, "the memset came back");
  cr_assert_eq(host[1], 2.0f);
  OK(hipStreamDestroy(s));
  cr_assert_eq(hipHostUnregister(host + 1), hipErrorHostMemoryNotRegistered, "not the range's start");
  (void)hipGetLastError();
  OK(hipHostUnregister(host));
  cr_assert_eq(hipHostUnregister(host), hipErrorHostMemoryNotRegistered);
  (void)hipGetLastError();
  md_hipcpu_stats_get(&s1);
  cr_assert_eq(s1.host_registered, 0);
  OK(hipFree(d));
  free(host);
}

Test(hip_cpu, streams_run_in_order_and_events_mark_points) {
  hipStream_t s1, s2;
  hipEvent_t e1, e2;
  OK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
  OK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
  OK(hipEventCreate(&e1));
  OK(hipEventCreateWithFlags(&e2, hipEventDisableTiming));
  float *d, *pin;
  OK(hipMalloc((void **)&d, 4096));
  OK(hipHostMalloc((void **)&pin, 4096, hipHostMallocDefault));
  for (int i = 0; i < 1024; i++) pin[i] = (float)i;
  OK(hipEventQuery(e1)); /* never recorded: complete */
  /* s1 is held: its copy, then its event, wait. s2 waits for the event, then copies back. */
  md_hipcpu_stream_hold(s1, 1);
  OK(hipMemcpyAsync(d, pin, 4096, hipMemcpyHostToDevice, s1));
  OK(hipEventRecord(e1, s1));
  OK(hipStreamWaitEvent(s2, e1, 0));
  cr_assert_eq(hipMemsetAsync(pin, 0, 1, s2), hipErrorInvalidValue, "pinned host memory is not device memory");
  (void)hipGetLastError();
  float *back;
  OK(hipHostMalloc((void **)&back, 4096, hipHostMallocDefault));
  OK(hipMemcpyAsync(back, d, 4096, hipMemcpyDeviceToHost, s2));
  OK(hipEventRecord(e2, s2));
  cr_assert_eq(hipEventQuery(e1), hipErrorNotReady);
  cr_assert_eq(hipEventQuery(e2), hipErrorNotReady, "s2 waits for s1's event");
  (void)hipGetLastError();
  md_hipcpu_stream_hold(s1, 0);
  OK(hipEventSynchronize(e2));
  OK(hipEventQuery(e1));
  for (int i = 0; i < 1024; i++) cr_assert_eq(back[i], (float)i);
  float ms = -1;
  cr_assert_eq(hipEventElapsedTime(&ms, e1, e2), hipErrorInvalidHandle, "e2 has no timing");
  (void)hipGetLastError();
  OK(hipEventRecord(e2, s1));
  OK(hipEventDestroy(e1)); /* released once its queued uses are done */
  OK(hipEventDestroy(e2));
  OK(hipStreamDestroy(s1));
  OK(hipStreamDestroy(s2));
  OK(hipFree(d));
  OK(hipHostFree(pin));
  OK(hipHostFree(back));
  cr_assert_eq(hipHostFree(back), hipErrorInvalidValue);
  (void)hipGetLastError();
}

Test(hip_cpu, a_copy_from_pageable_memory_is_done_when_it_returns) {
  hipStream_t s;
  OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  uint8_t *d, *h = malloc(1u << 20);
  OK(hipMalloc((void **)&d, 1u << 20));
  memset(h, 7, 1u << 20);
  OK(hipMemcpyAsync(d, h, 1u << 20, hipMemcpyHostToDevice, s));
  memset(h, 0, 1u << 20); /* the bytes were taken already */
  OK(hipMemcpyAsync(h, d, 1u << 20, hipMemcpyDeviceToHost, s));
  for (uint32_t i = 0; i < (1u << 20); i += 4093) cr_assert_eq(h[i], 7);
  free(h);
  OK(hipStreamDestroy(s));
  OK(hipFree(d));
}
