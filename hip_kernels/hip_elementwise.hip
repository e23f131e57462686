// hip_elementwise.hip - the HIP kernels of ADD, SUB, MUL (numpy broadcasting + fused activation)
// and RELU. Per-element math is md_math.h's (the host reference's), so both backends compute the
// same thing; the operator and activation are run-time values (uniform across a launch, so the
// branches cost nothing next to the memory traffic these kernels are bound by).
#include "hip_common.h"
#include "hip_launch.h"

// Both operands and the output have the same shape: four elements per thread step through
// float4 when all three are 16-byte aligned, the < 4 tail by the first threads.
__global__ void bin_vv4(int op, int act, const float4 *a, const float4 *b, float4 *o, uint64_t n4,
                        const float *at, const float *bt, float *ot, uint64_t tail) {
  const uint64_t stride = MD_HIP_NTHREADS;
  for (uint64_t i = MD_HIP_TID; i < n4; i += stride) {
    float4 x = a[i], y = b[i], r;
    r.x = md__act_apply(act, md__binop(op, x.x, y.x));
    r.y = md__act_apply(act, md__binop(op, x.y, y.y));
    r.z = md__act_apply(act, md__binop(op, x.z, y.z));
    r.w = md__act_apply(act, md__binop(op, x.w, y.w));
    o[i] = r;
  }
  uint64_t t = MD_HIP_TID;
  if (t < tail) ot[t] = md__act_apply(act, md__binop(op, at[t], bt[t]));
}

// Flat loops: va / vb say whether a / b is a full operand (1) or a single broadcast element (0).
__global__ void bin_flat(int op, int act, int va, int vb, const float *a, const float *b, float *o,
                         uint64_t n) {
  const uint64_t stride = MD_HIP_NTHREADS;
  const float a0 = a[0], b0 = b[0];
  for (uint64_t i = MD_HIP_TID; i < n; i += stride) {
    float x = va ? a[i] : a0, y = vb ? b[i] : b0;
    o[i] = md__act_apply(act, md__binop(op, x, y));
  }
}

// A broadcast plan with the output axes of dim 1 dropped and adjacent axes merged wherever both
// inputs step through them alike (both contiguous across them, or both broadcast along them):
// the host reference's collapse (host_elementwise.c), so same-shape operands become one row and
// [n,c] + [c] n rows of c. The innermost axis steps each input by 1 or 0 (broadcast).
struct md__hip_rows {
  uint32_t rank;                            // >= 1
  uint64_t rows;                            // product of dims[0 .. rank-2]
  uint64_t dims[MD_MAX_RANK];
  uint64_t sa[MD_MAX_RANK], sb[MD_MAX_RANK];
};

static int stride_merges(uint64_t outer, uint64_t inner, uint64_t inner_dim) {
  return outer == 0 ? inner == 0 : (inner != 0 && outer == inner * inner_dim);
}

static void rows_collapse(const md__bcast *p, md__hip_rows *q) {
  uint32_t r = 0;
  for (uint32_t k = 0; k < p->rank; k++) {
    const uint64_t d = p->dims[k];
    if (d == 1) continue;
    if (r && stride_merges(q->sa[r - 1], p->sa[k], d) && stride_merges(q->sb[r - 1], p->sb[k], d)) {
      q->dims[r - 1] *= d;
    } else {
      q->dims[r] = d;
      r++;
    }
    q->sa[r - 1] = p->sa[k];
    q->sb[r - 1] = p->sb[k];
  }
  if (r == 0) {  // a single element
    q->dims[0] = 1;
    q->sa[0] = q->sb[0] = 1;
    r = 1;
  }
  q->rank = r;
  q->rows = 1;
  for (uint32_t k = 0; k + 1 < r; k++) q->rows *= q->dims[k];
}

// Broadcasting over collapsed rows (rank >= 2): threadIdx.y / blockIdx.y walk the rows,
// threadIdx.x / blockIdx.x a row's elements. A row's input offsets cost one division per outer
// axis beyond the first (none for [n,c] + [c]), nothing per element.
__global__ void bin_rows(int op, int act, md__hip_rows q, const float *a, const float *b,
                         float *o) {
  const uint32_t last = q.rank - 1;
  const uint64_t cols = q.dims[last], sa = q.sa[last], sb = q.sb[last];
  const uint64_t rstep = (uint64_t)gridDim.y * blockDim.y, cstep = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t r = (uint64_t)blockIdx.y * blockDim.y + threadIdx.y; r < q.rows; r += rstep) {
    uint64_t oa = 0, ob = 0, i = r;
    for (uint32_t k = last - 1; k > 0; k--) {
      const uint64_t c = i % q.dims[k];
      i /= q.dims[k];
      oa += c * q.sa[k];
      ob += c * q.sb[k];
    }
    oa += i * q.sa[0];
    ob += i * q.sb[0];
    const float *ar = a + oa, *br = b + ob;
    float *orow = o + r * cols;
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += cstep)
      orow[c] = md__act_apply(act, md__binop(op, ar[c * sa], br[c * sb]));
  }
}

__global__ void relu4(const float4 *a, float4 *o, uint64_t n4, const float *at, float *ot,
                      uint64_t tail) {
  const uint64_t stride = MD_HIP_NTHREADS;
  for (uint64_t i = MD_HIP_TID; i < n4; i += stride) {
    float4 x = a[i], r;
    r.x = md__act_apply(MD__ACT_RELU, x.x);
    r.y = md__act_apply(MD__ACT_RELU, x.y);
    r.z = md__act_apply(MD__ACT_RELU, x.z);
    r.w = md__act_apply(MD__ACT_RELU, x.w);
    o[i] = r;
  }
  uint64_t t = MD_HIP_TID;
  if (t < tail) ot[t] = md__act_apply(MD__ACT_RELU, at[t]);
}

__global__ void relu1(const float *a, float *o, uint64_t n) {
  const uint64_t stride = MD_HIP_NTHREADS;
  for (uint64_t i = MD_HIP_TID; i < n; i += stride) o[i] = md__act_apply(MD__ACT_RELU, a[i]);
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" hipError_t md__hip_binary(hipStream_t s, int op, int act, const md__bcast *plan,
                                     const float *a, uint64_t na, const float *b, uint64_t nb,
                                     float *o) {
  const uint64_t n = plan->count;
  if (n == 0) return hipSuccess;
  md__hip_launch_begin();
  const dim3 block(MD_HIP_THREADS);
  md__hip_rows q;
  rows_collapse(plan, &q);
  (void)na;
  (void)nb;
  if (q.rank == 1 && q.sa[0] && q.sb[0]) {  // the same shape
    if (aligned16(a) && aligned16(b) && aligned16(o)) {
      uint64_t n4 = n / 4, tail = n - n4 * 4;
      hipLaunchKernelGGL(bin_vv4, dim3(md__hip_blocks(n4 ? n4 : 1, MD_HIP_THREADS)), block, 0, s,
                         op, act, (const float4 *)a, (const float4 *)b, (float4 *)o, n4,
                         a + n4 * 4, b + n4 * 4, o + n4 * 4, tail);
    } else {
      hipLaunchKernelGGL(bin_flat, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, op, act,
                         1, 1, a, b, o, n);
    }
  } else if (q.rank == 1) {  // one operand is a single element
    hipLaunchKernelGGL(bin_flat, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, op, act,
                       q.sa[0] ? 1 : 0, q.sb[0] ? 1 : 0, a, b, o, n);
  } else {
    dim3 grid, rb;
    md__hip_rows_geometry(q.rows, q.dims[q.rank - 1], &grid, &rb);
    hipLaunchKernelGGL(bin_rows, grid, rb, 0, s, op, act, q, a, b, o);
  }
  return hipGetLastError();
}

extern "C" hipError_t md__hip_relu(hipStream_t s, const float *a, float *o, uint64_t n) {
  if (n == 0) return hipSuccess;
  md__hip_launch_begin();
  const dim3 block(MD_HIP_THREADS);
  if (aligned16(a) && aligned16(o)) {
    uint64_t n4 = n / 4, tail = n - n4 * 4;
    hipLaunchKernelGGL(relu4, dim3(md__hip_blocks(n4 ? n4 : 1, MD_HIP_THREADS)), block, 0, s,
                       (const float4 *)a, (float4 *)o, n4, a + n4 * 4, o + n4 * 4, tail);
  } else {
    hipLaunchKernelGGL(relu1, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, a, o, n);
  }
  return hipGetLastError();
}
