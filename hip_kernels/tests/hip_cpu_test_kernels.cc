// hip_cpu_test_kernels.cc - kernels that pin down the CPU execution layer's execution model
// (every block and thread runs once, __syncthreads is a barrier, __shared__ is per block, locals
// are per thread, arguments are copied at the launch), with C launchers for test_hip_cpu.c.
#include "hip_cpu_test_kernels.h"

// out[linear thread id] += 1, and the thread's coordinates, so a test sees each ran once.
__global__ void k_index(uint32_t *count, uint32_t *coords) {
  const uint32_t b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const uint32_t t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const uint32_t id = b * blockDim.x * blockDim.y * blockDim.z + t;
  count[id] += 1;
  uint32_t *c = coords + (uint64_t)id * 6;
  c[0] = blockIdx.x;
  c[1] = blockIdx.y;
  c[2] = blockIdx.z;
  c[3] = threadIdx.x;
  c[4] = threadIdx.y;
  c[5] = threadIdx.z;
}

// A tree reduction in shared memory: out[block] = sum of the block's 256 inputs.
__global__ void k_block_sum(const uint32_t *in, uint64_t *out) {
  __shared__ uint64_t red[256];
  const uint32_t t = threadIdx.x;
  red[t] = in[(uint64_t)blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (uint32_t h = blockDim.x / 2; h > 0; h /= 2) {
    if (t < h) red[t] += red[t + h];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = red[0];
}

// Each block reverses its slice through shared memory; a local survives the barrier.
__global__ void k_reverse(const float *in, float *out) {
  __shared__ float s[128];
  const uint32_t t = threadIdx.x, n = blockDim.x;
  const uint64_t base = (uint64_t)blockIdx.x * n;
  const float mine = in[base + t];
  s[t] = mine;
  __syncthreads();
  const float other = s[n - 1 - t];
  __syncthreads();  // s is written again below only after everyone read
  s[t] = mine * 2.0f;
  __syncthreads();
  out[base + t] = other + s[t] - mine * 2.0f;  // == in[base + n-1-t]
}

// Threads below `quit` return early while the others wait at a barrier: a kernel fault.
__global__ void k_divergent(uint32_t quit, uint32_t *out) {
  if (threadIdx.x < quit) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

struct big_arg {
  uint32_t v[16];
};
// The argument struct is the one of the launch, whatever the caller did to its copy since.
__global__ void k_copy_arg(big_arg a, uint32_t *out) {
  if (threadIdx.x < 16) out[threadIdx.x] = a.v[threadIdx.x];
}

extern "C" void hct_index(hipStream_t s, const uint32_t grid[3], const uint32_t block[3], uint32_t *count,
                          uint32_t *coords) {
  hipLaunchKernelGGL(k_index, dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]), 0, s, count,
                     coords);
}

extern "C" void hct_block_sum(hipStream_t s, uint32_t blocks, const uint32_t *in, uint64_t *out) {
  hipLaunchKernelGGL(k_block_sum, dim3(blocks), dim3(256), 0, s, in, out);
}

extern "C" void hct_reverse(hipStream_t s, uint32_t blocks, const float *in, float *out) {
  hipLaunchKernelGGL(k_reverse, dim3(blocks), dim3(128), 0, s, in, out);
}

extern "C" void hct_divergent(hipStream_t s, uint32_t quit, uint32_t *out) {
  hipLaunchKernelGGL(k_divergent, dim3(1), dim3(64), 0, s, quit, out);
}

extern "C" void hct_copy_arg(hipStream_t s, uint32_t *out) {
  big_arg a;
  for (uint32_t i = 0; i < 16; i++) a.v[i] = 100 + i;
  hipLaunchKernelGGL(k_copy_arg, dim3(1), dim3(32), 0, s, a, out);
  for (uint32_t i = 0; i < 16; i++) a.v[i] = 0;  // after the launch: the kernel must not see it
}
