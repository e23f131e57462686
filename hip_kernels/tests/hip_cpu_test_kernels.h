/* hip_cpu_test_kernels.h - private to the hip tests: launchers of the kernels that pin down the
 * CPU execution layer's execution model (hip_cpu_test_kernels.cc). Each queues one kernel on s;
 * errors are the thread's last error (hipGetLastError), as with hipLaunchKernelGGL. */
#ifndef MD_HIP_CPU_TEST_KERNELS_H
#define MD_HIP_CPU_TEST_KERNELS_H

#include <stdint.h>

#include "md_hip_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* count[id] += 1 and coords[id*6..] = block x,y,z, thread x,y,z for every GPU thread. */
void hct_index(hipStream_t s, const uint32_t grid[3], const uint32_t block[3], uint32_t *count, uint32_t *coords);
/* out[b] = sum of in[b*256 .. +256), a shared-memory tree reduction per block. */
void hct_block_sum(hipStream_t s, uint32_t blocks, const uint32_t *in, uint64_t *out);
/* out = in with each 128-element slice reversed, through shared memory and three barriers. */
void hct_reverse(hipStream_t s, uint32_t blocks, const float *in, float *out);
/* One block of 64: threads below quit return before a __syncthreads the others wait at. */
void hct_divergent(hipStream_t s, uint32_t quit, uint32_t *out);
/* out[0..16) = 100..115, from a struct argument the launcher clears right after launching. */
void hct_copy_arg(hipStream_t s, uint32_t *out);

#ifdef __cplusplus
}
#endif
#endif
