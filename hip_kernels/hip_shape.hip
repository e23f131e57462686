// hip_shape.hip - RESHAPE (a device-to-device copy) and CONCATENATION (one strided copy kernel
// per input) on HIP.
#include "hip_common.h"
#include "hip_launch.h"

// o[p*total + off + j] = in[p*chunk + j] for p < outer, j < chunk (elements): rows on y, a
// row's elements on x, so no element's index is divided by the chunk to find its row.
__global__ void concat_rows(float *o, const float *in, uint64_t outer, uint64_t chunk,
                            uint64_t total, uint64_t off) {
  const uint64_t rstep = (uint64_t)gridDim.y * blockDim.y, cstep = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t p = (uint64_t)blockIdx.y * blockDim.y + threadIdx.y; p < outer; p += rstep) {
    const float *src = in + p * chunk;
    float *dst = o + p * total + off;
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < chunk; j += cstep)
      dst[j] = src[j];
  }
}

extern "C" hipError_t md__hip_copy(hipStream_t s, void *dst, const void *src, uint64_t bytes) {
  if (bytes == 0 || dst == src) return hipSuccess;
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, s);
}

extern "C" hipError_t md__hip_concat_part(hipStream_t s, float *o, const float *in, uint64_t outer,
                                          uint64_t chunk, uint64_t total, uint64_t off) {
  if (outer == 0 || chunk == 0) return hipSuccess;
  md__hip_launch_begin();
  if (outer == 1) return hipMemcpyAsync(o + off, in, chunk * 4, hipMemcpyDeviceToDevice, s);
  dim3 grid, block;
  md__hip_rows_geometry(outer, chunk, &grid, &block);
  hipLaunchKernelGGL(concat_rows, grid, block, 0, s, o, in, outer, chunk, total, off);
  return hipGetLastError();
}
