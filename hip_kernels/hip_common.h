/* hip_common.h - private to the .hip sources: launch geometry shared by the kernels. */
#ifndef MD_HIP_COMMON_H
#define MD_HIP_COMMON_H

#include <stdint.h>

#include "md_hip_rt.h"

#define MD_HIP_THREADS 256u
/* Grid-stride loops: enough blocks to fill any current GPU many times over, few enough that a
 * huge tensor does not need a grid over the x limit. */
#define MD_HIP_MAX_BLOCKS (1u << 16)

static inline unsigned md__hip_blocks(uint64_t work, unsigned per_block) {
  uint64_t b = (work + per_block - 1) / per_block;
  if (b == 0) b = 1;
  return b > MD_HIP_MAX_BLOCKS ? MD_HIP_MAX_BLOCKS : (unsigned)b;
}

/* Launch geometry for a kernel over `rows` rows of `cols` elements (bin_rows, concat_rows): a
 * row's elements on x (the smallest power of two up to 256 that covers them), rows on y, 256
 * threads a block; grid-stride loops cover what the grid limits leave out. */
static inline void md__hip_rows_geometry(uint64_t rows, uint64_t cols, dim3 *grid, dim3 *block) {
  uint32_t bx = 1;
  while (bx < cols && bx < MD_HIP_THREADS) bx *= 2;
  const uint32_t by = MD_HIP_THREADS / bx;
  const uint64_t gx = (cols + bx - 1) / bx, gy = (rows + by - 1) / by;
  *block = dim3(bx, by);
  *grid = dim3(gx > MD_HIP_MAX_BLOCKS ? MD_HIP_MAX_BLOCKS : (uint32_t)gx, gy > 65535u ? 65535u : (uint32_t)gy);
}

/* acc + a * b with the product and the sum each rounded to float: never contracted into an FMA
 * (both GPU compilers contract a*b+c by default), so a dot product accumulated in the host
 * reference's order is the host's result bit for bit (docs/hip.md, "FULLY_CONNECTED and FMA").
 * CUDA guarantees __fmul_rn / __fadd_rn are never merged into an FMA; HIP's are the plain
 * operators, so on AMD contraction is turned off for this expression instead; the CPU layer's
 * go through a volatile. */
#if defined(__HIPCC__) && !defined(__CUDACC__) && !defined(MD_HIP_CPU)
static __device__ inline float md__hip_mul_add_rn(float acc, float a, float b) {
#pragma clang fp contract(off)
  return acc + a * b;
}
#else
static __device__ inline float md__hip_mul_add_rn(float acc, float a, float b) {
  return __fadd_rn(acc, __fmul_rn(a, b));
}
#endif

/* Call before a launch: clears the calling thread's last error, so the hipGetLastError() after
 * the launch reports that launch only and not an earlier, unrelated failure of the thread (a
 * failed hipHostMalloc, hipEventQuery's not-ready: the CUDA runtime keeps them until read). A
 * sticky error is not cleared by reading: it still comes back after the launch. */
static inline void md__hip_launch_begin(void) { (void)hipGetLastError(); }

/* 64-bit global thread index and stride for grid-stride loops. */
#define MD_HIP_TID ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define MD_HIP_NTHREADS ((uint64_t)gridDim.x * blockDim.x)

#endif
