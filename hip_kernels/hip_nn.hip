// hip_nn.hip - the HIP kernels of FULLY_CONNECTED (shared-memory tiles; no vendor BLAS) and
// SOFTMAX along an axis with beta (md_math.h's softmax term, as the host reference).
#include "hip_common.h"
#include "hip_launch.h"

#define FC_TILE 16
#define FC_DOT_MAX 256u  // at most this many outputs: fc_dot
// A strided softmax axis (inner > 1) of >= 64 elements with at most this many lines gets a block
// per line: a thread per line would be under 1/16 of a current GPU's threads; with more lines
// the thread-per-line kernel has enough threads and its reads coalesce across inner.
#define SOFTMAX_FEW_LINES 16384u

// Few outputs (batch * units <= FC_DOT_MAX): one thread per output, the dot product read
// straight from global memory in the host's order. fc_tiled would compute them with a handful
// of useful threads per block and two barriers per 16 inputs (a [1,65536] input: 8192 barriers
// for one output).
__global__ void fc_dot(const float *in, const float *w, const float *bias, float *o,
                       uint32_t batch, uint32_t units, uint32_t isz, int act) {
  const uint64_t i = MD_HIP_TID;
  if (i >= (uint64_t)batch * units) return;
  const uint64_t b = i / units, n = i % units;
  const float *x = in + b * isz, *wr = w + n * isz;
  float acc = 0.0f;
  for (uint64_t k = 0; k < isz; k++) acc = md__hip_mul_add_rn(acc, x[k], wr[k]);
  o[i] = md__act_apply(act, acc + bias[n]);
}

// o[b][n] = act(sum_k in[b][k] * w[n][k] + bias[n]). A block computes a FC_TILE x FC_TILE tile
// of o (threadIdx.y: batch row, threadIdx.x: unit), stepping through input_size in tiles of
// both operands staged in shared memory; the weight tile is padded by one column so reading
// it transposed does not hit one bank. Blocks loop over batch tiles past the grid's y limit.
// Indexes are 64-bit: batch, units and input_size go up to 2^32 - 1, where a 32-bit k0 + 16
// wraps (and the loop never ends) and blockIdx.x * 16 overflows.
__global__ void fc_tiled(const float *in, const float *w, const float *bias, float *o,
                         uint32_t batch, uint32_t units, uint32_t isz, int act) {
  __shared__ float as[FC_TILE][FC_TILE];
  __shared__ float ws[FC_TILE][FC_TILE + 1];
  const uint32_t tx = threadIdx.x, ty = threadIdx.y;
  const uint64_t n = (uint64_t)blockIdx.x * FC_TILE + tx;
  const uint64_t wn = (uint64_t)blockIdx.x * FC_TILE + ty;  // the weight row this thread loads
  const uint64_t n_tiles_b = ((uint64_t)batch + FC_TILE - 1) / FC_TILE;
  for (uint64_t tb = blockIdx.y; tb < n_tiles_b; tb += gridDim.y) {
    const uint64_t b = tb * FC_TILE + ty;
    float acc = 0.0f;
    for (uint64_t k0 = 0; k0 < isz; k0 += FC_TILE) {
      const uint64_t k = k0 + tx;
      as[ty][tx] = (b < batch && k < isz) ? in[b * isz + k] : 0.0f;
      ws[ty][tx] = (wn < units && k < isz) ? w[wn * isz + k] : 0.0f;
      __syncthreads();
      const uint32_t kn = isz - k0 < FC_TILE ? (uint32_t)(isz - k0) : FC_TILE;
      // The host's order (k ascending), every product and sum rounded: bit for bit the host.
      for (uint32_t kk = 0; kk < kn; kk++) acc = md__hip_mul_add_rn(acc, as[ty][kk], ws[tx][kk]);
      __syncthreads();
    }
    if (b < batch && n < units) o[b * units + n] = md__act_apply(act, acc + bias[n]);
  }
}

// One block per line of the softmax axis (the len elements at p * len * inner + q + k * inner,
// for p < outer, q < inner): block reductions of the max and of the sum in shared memory. For
// contiguous rows (inner == 1), and for a long axis with few lines, where a thread per line
// would leave the GPU nearly idle (4 x 100000 x 3: 12 threads, each 300000 elements long).
__global__ void softmax_lines(const float *in, float *o, uint64_t outer, uint64_t len,
                              uint64_t inner, float beta) {
  __shared__ float red[MD_HIP_THREADS];
  const uint32_t t = threadIdx.x;
  const uint64_t lines = outer * inner;
  for (uint64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const uint64_t p = l / inner, q = l - p * inner;  // one division per line
    const float *x = in + p * len * inner + q;
    float *y = o + p * len * inner + q;
    float m = x[0];
    for (uint64_t k = t; k < len; k += blockDim.x) m = x[k * inner] > m ? x[k * inner] : m;
    red[t] = m;
    __syncthreads();
    for (uint32_t h = blockDim.x / 2; h > 0; h /= 2) {
      if (t < h && red[t + h] > red[t]) red[t] = red[t + h];
      __syncthreads();
    }
    const float max = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (uint64_t k = t; k < len; k += blockDim.x) {
      float e = md__softmax_term(x[k * inner], max, beta);
      y[k * inner] = e;
      sum += e;
    }
    red[t] = sum;
    __syncthreads();
    for (uint32_t h = blockDim.x / 2; h > 0; h /= 2) {
      if (t < h) red[t] += red[t + h];
      __syncthreads();
    }
    const float total = red[0];
    for (uint64_t k = t; k < len; k += blockDim.x) y[k * inner] = y[k * inner] / total;
    __syncthreads();  // red is reused by the next line
  }
}

// One thread per (outer, inner) column, the host reference's loop order exactly; neighbouring
// threads read neighbouring inner positions, so the accesses coalesce when inner > 1.
__global__ void softmax_cols(const float *in, float *o, uint64_t outer, uint64_t len,
                             uint64_t inner, float beta) {
  const uint64_t stride = MD_HIP_NTHREADS, cols = outer * inner;
  for (uint64_t c = MD_HIP_TID; c < cols; c += stride) {
    const uint64_t p = c / inner, q = c % inner, base = p * len * inner + q;
    float m = in[base];
    for (uint64_t k = 1; k < len; k++) {
      float x = in[base + k * inner];
      if (x > m) m = x;
    }
    float sum = 0.0f;
    for (uint64_t k = 0; k < len; k++) {
      float e = md__softmax_term(in[base + k * inner], m, beta);
      o[base + k * inner] = e;
      sum += e;
    }
    for (uint64_t k = 0; k < len; k++) o[base + k * inner] = o[base + k * inner] / sum;
  }
}

extern "C" hipError_t md__hip_fc(hipStream_t s, const float *in, const float *w, const float *bias,
                                 float *o, uint32_t batch, uint32_t units, uint32_t isz, int act) {
  if (batch == 0 || units == 0) return hipSuccess;
  md__hip_launch_begin();
  const uint64_t outs = (uint64_t)batch * units;
  if (outs <= FC_DOT_MAX) {
    hipLaunchKernelGGL(fc_dot, dim3(1), dim3((uint32_t)(outs + 31) / 32 * 32), 0, s, in, w, bias, o,
                       batch, units, isz, act);
    return hipGetLastError();
  }
  // 64-bit: (units + 15) in 32 bits wraps for units > 2^32 - 16, giving a grid of 0.
  const uint64_t gx = ((uint64_t)units + FC_TILE - 1) / FC_TILE;      // <= 2^28: fits grid.x
  const uint64_t gy = ((uint64_t)batch + FC_TILE - 1) / FC_TILE;
  hipLaunchKernelGGL(fc_tiled, dim3((uint32_t)gx, gy > 65535u ? 65535u : (uint32_t)gy),
                     dim3(FC_TILE, FC_TILE), 0, s, in, w, bias, o, batch, units, isz, act);
  return hipGetLastError();
}

extern "C" hipError_t md__hip_softmax(hipStream_t s, const float *in, float *o, uint64_t outer,
                                      uint64_t len, uint64_t inner, float beta) {
  if (outer == 0 || len == 0 || inner == 0) return hipSuccess;
  md__hip_launch_begin();
  const uint64_t lines = outer * inner;
  if (len >= 64 && (inner == 1 || lines <= SOFTMAX_FEW_LINES)) {
    hipLaunchKernelGGL(softmax_lines, dim3(md__hip_blocks(lines, 1)), dim3(MD_HIP_THREADS), 0, s,
                       in, o, outer, len, inner, beta);
  } else {
    hipLaunchKernelGGL(softmax_cols, dim3(md__hip_blocks(outer * inner, MD_HIP_THREADS)),
                       dim3(MD_HIP_THREADS), 0, s, in, o, outer, len, inner, beta);
  }
  return hipGetLastError();
}
