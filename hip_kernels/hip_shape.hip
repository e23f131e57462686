// hip_shape.hip - RESHAPE (a device-to-device copy) and CONCATENATION (one strided copy kernel
// per input) on HIP.
#include "hip_common.h"
#include "hip_launch.h"

// o[p*total + off + j] = in[p*chunk + j] for p < outer, j < chunk (elements).
__global__ void concat_part(float *o, const float *in, uint64_t outer, uint64_t chunk,
                            uint64_t total, uint64_t off) {
  const uint64_t stride = MD_HIP_NTHREADS, n = outer * chunk;
  for (uint64_t i = MD_HIP_TID; i < n; i += stride) {
    const uint64_t p = i / chunk, j = i - p * chunk;
    o[p * total + off + j] = in[i];
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
  hipLaunchKernelGGL(concat_part, dim3(md__hip_blocks(outer * chunk, MD_HIP_THREADS)),
                     dim3(MD_HIP_THREADS), 0, s, o, in, outer, chunk, total, off);
  return hipGetLastError();
}
