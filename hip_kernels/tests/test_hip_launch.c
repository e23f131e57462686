/* test_hip_launch.c - the launchers (hip_launch.h) on the CPU execution layer, white-box: the
 * kernel each picks and its geometry (the layer's launch log; dry runs for sizes no test can
 * allocate), and that a launch reports its own error, never an earlier one of the thread. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_launch.h"
#include "md_hip_cpu.h"

/* The newest logged launch. */
static md_hipcpu_launch last_launch(void) {
  md_hipcpu_launch l;
  cr_assert_eq(md_hipcpu_launches(&l, 1), 1, "nothing was launched");
  return l;
}

/* FULLY_CONNECTED with batch or units near 2^32: the grid covers them ((x + 15) / 16 in 32 bits
 * wrapped to a grid of 0: an invalid launch, GENERAL_FAILURE where the host succeeds). */
Test(hip_launch, fully_connected_grid_covers_batch_and_units_up_to_uint32_max) {
  md_hipcpu_set_dry_run(1);
  static const uint32_t cases[][2] = {{UINT32_MAX, 1}, {1, UINT32_MAX}, {UINT32_MAX - 14, 3}, {300, UINT32_MAX - 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint32_t batch = cases[i][0], units = cases[i][1];
    hipError_t e = md__hip_fc(NULL, NULL, NULL, NULL, NULL, batch, units, 7, 0);
    cr_assert_eq(e, hipSuccess, "batch %u units %u: %s", batch, units, hipGetErrorName(e));
    md_hipcpu_launch l = last_launch();
    cr_assert_str_eq(l.kernel, "fc_tiled");
    cr_assert((uint64_t)l.grid[0] * l.block[0] >= units, "batch %u units %u: grid.x %u covers %llu units", batch,
              units, l.grid[0], (unsigned long long)l.grid[0] * l.block[0]);
    cr_assert(l.grid[1] >= 1 && l.grid[1] <= 65535, "grid.y %u", l.grid[1]);
  }
}

/* FULLY_CONNECTED with few outputs and a long input: one thread per output, no tiles (fc_tiled
 * ran one useful thread through two barriers per 16 inputs). */
Test(hip_launch, fully_connected_with_few_outputs_runs_one_thread_per_output) {
  md_hipcpu_set_dry_run(1);
  cr_assert_eq(md__hip_fc(NULL, NULL, NULL, NULL, NULL, 1, 1, 65536, 0), hipSuccess);
  md_hipcpu_launch l = last_launch();
  cr_assert_str_eq(l.kernel, "fc_dot");
  cr_assert_eq(l.grid[0] * l.block[0], 32);
  cr_assert_eq(md__hip_fc(NULL, NULL, NULL, NULL, NULL, 4, 64, 301, 0), hipSuccess);
  l = last_launch();
  cr_assert_str_eq(l.kernel, "fc_dot");
  cr_assert_eq(l.block[0], 256);
  cr_assert_eq(md__hip_fc(NULL, NULL, NULL, NULL, NULL, 4, 65, 301, 0), hipSuccess);
  cr_assert_str_eq(last_launch().kernel, "fc_tiled", "more than 256 outputs: tiles");
}

/* A launch reports its own error: an earlier failed call of the thread whose error nobody read
 * (a pinned allocation out of memory, an event not ready yet) is not a failed launch. */
Test(hip_launch, a_launch_reports_its_own_error_not_an_earlier_one) {
  float *a, *o;
  cr_assert_eq(hipMalloc((void **)&a, 4096), hipSuccess);
  cr_assert_eq(hipMalloc((void **)&o, 4096), hipSuccess);
  void *h;
  cr_assert_eq(hipHostMalloc(&h, (size_t)1 << 62, hipHostMallocDefault), hipErrorOutOfMemory);
  hipError_t e = md__hip_relu(NULL, a, o, 1024);
  cr_assert_eq(e, hipSuccess, "RELU after a failed hipHostMalloc: %s", hipGetErrorName(e));
  hipEvent_t ev;
  cr_assert_eq(hipEventCreate(&ev), hipSuccess);
  md_hipcpu_stream_hold(NULL, 1);
  cr_assert_eq(hipEventRecord(ev, NULL), hipSuccess);
  cr_assert_eq(hipEventQuery(ev), hipErrorNotReady);
  md_hipcpu_stream_hold(NULL, 0);
  e = md__hip_fc(NULL, a, a, a, o, 2, 2, 8, 0);
  cr_assert_eq(e, hipSuccess, "FULLY_CONNECTED after a not-ready event: %s", hipGetErrorName(e));
  cr_assert_eq(hipStreamSynchronize(NULL), hipSuccess);
  /* A sticky error still shows: the device is lost for every launch. */
  md_hipcpu_lose_device(hipErrorIllegalAddress);
  cr_assert_eq(md__hip_relu(NULL, a, o, 1024), hipErrorIllegalAddress);
  (void)hipEventDestroy(ev);
  (void)hipFree(a);
  (void)hipFree(o);
}
