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

static hipError_t binary(uint32_t ra, const uint32_t *da, uint32_t rb, const uint32_t *db) {
  md__bcast plan;
  uint32_t bad;
  cr_assert_eq(md__bcast_init(&plan, ra, da, rb, db, &bad), 0);
  uint64_t na = 1, nb = 1;
  for (uint32_t i = 0; i < ra; i++) na *= da[i];
  for (uint32_t i = 0; i < rb; i++) nb *= db[i];
  /* Dry run: the pointers are never dereferenced, but their alignment picks float4 paths. */
  return md__hip_binary(NULL, MD__BIN_ADD, 0, &plan, (const float *)(uintptr_t)256, na,
                        (const float *)(uintptr_t)512, nb, (float *)(uintptr_t)1024);
}

/* Broadcasting: the plan's axes are collapsed as the host does, so the common bias-add [N,C] +
 * [C] (and any broadcast) runs without a per-element index decomposition (it took the general
 * kernel: up to 16 64-bit divisions per element). */
Test(hip_launch, broadcasts_are_collapsed_and_run_without_per_element_division) {
  md_hipcpu_set_dry_run(1);
  static const struct {
    uint32_t ra, da[4], rb, db[4];
    const char *kernel;
  } cases[] = {
      {2, {64, 33}, 1, {33}, "bin_rows"},         /* bias add */
      {2, {64, 33}, 2, {64, 1}, "bin_rows"},      /* a column per row */
      {3, {64, 1, 33}, 2, {17, 1}, "bin_rows"},   /* outer product over a middle axis */
      {4, {2, 3, 4, 5}, 2, {4, 1}, "bin_rows"},
      {3, {1, 1, 6}, 1, {6}, "bin_vv4"},          /* collapses to the same shape */
      {2, {7, 9}, 2, {7, 9}, "bin_vv4"},
      {1, {5000}, 1, {1}, "bin_flat"},            /* a scalar */
      {3, {4, 1, 5}, 3, {1, 1, 1}, "bin_flat"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_eq(binary(cases[i].ra, cases[i].da, cases[i].rb, cases[i].db), hipSuccess, "case %zu", i);
    md_hipcpu_launch l = last_launch();
    cr_assert_str_eq(l.kernel, cases[i].kernel, "case %zu: %s", i, l.kernel);
  }
}

/* SOFTMAX along a long axis with few columns: a block per line, not a thread per column (4 x
 * 100000 x 3 ran 12 threads, each over 100000 elements three times). */
Test(hip_launch, softmax_over_a_long_axis_with_few_columns_uses_a_block_per_line) {
  md_hipcpu_set_dry_run(1);
  cr_assert_eq(md__hip_softmax(NULL, NULL, NULL, 4, 100000, 3, 1.0f), hipSuccess);
  md_hipcpu_launch l = last_launch();
  cr_assert_str_eq(l.kernel, "softmax_lines");
  cr_assert_eq((uint64_t)l.grid[0] * l.grid[1], 12, "one block per (outer, inner) line");
  cr_assert_eq(l.block[0], 256);
  /* Contiguous rows too; many short columns stay a thread each. */
  cr_assert_eq(md__hip_softmax(NULL, NULL, NULL, 7, 1000, 1, 1.0f), hipSuccess);
  cr_assert_str_eq(last_launch().kernel, "softmax_lines");
  cr_assert_eq(md__hip_softmax(NULL, NULL, NULL, 8, 33, 5, 1.0f), hipSuccess);
  cr_assert_str_eq(last_launch().kernel, "softmax_cols");
  cr_assert_eq(md__hip_softmax(NULL, NULL, NULL, 64, 1000, 512, 1.0f), hipSuccess);
  cr_assert_str_eq(last_launch().kernel, "softmax_cols", "32768 long columns: a thread each, reads coalesced");
}

/* CONCATENATION: one input's rows are copied by a 2-D grid (rows x elements), no division per
 * element (concat_part divided each element's index by the chunk). */
Test(hip_launch, concatenation_copies_rows_without_per_element_division) {
  md_hipcpu_set_dry_run(1);
  cr_assert_eq(md__hip_concat_part(NULL, NULL, NULL, 1000, 7, 21, 7), hipSuccess);
  md_hipcpu_launch l = last_launch();
  cr_assert_str_eq(l.kernel, "concat_rows");
  cr_assert((uint64_t)l.grid[1] * l.block[1] >= 1000 || l.grid[1] == 65535, "rows on y: %u x %u", l.grid[1],
            l.block[1]);
  cr_assert(l.block[0] >= 7 && l.block[0] <= 32, "a row's 7 elements on x: %u", l.block[0]);
}
