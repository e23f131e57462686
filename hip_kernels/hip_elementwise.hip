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

// General broadcasting: md__bcast_offsets per element (the plan travels by value).
__global__ void bin_bcast(int op, int act, md__bcast plan, const float *a, const float *b,
                          float *o) {
  const uint64_t stride = MD_HIP_NTHREADS;
  for (uint64_t i = MD_HIP_TID; i < plan.count; i += stride) {
    uint64_t oa, ob;
    md__bcast_offsets(&plan, i, &oa, &ob);
    o[i] = md__act_apply(act, md__binop(op, a[oa], b[ob]));
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
  if (na == n && nb == n) {
    if (aligned16(a) && aligned16(b) && aligned16(o)) {
      uint64_t n4 = n / 4, tail = n - n4 * 4;
      hipLaunchKernelGGL(bin_vv4, dim3(md__hip_blocks(n4 ? n4 : 1, MD_HIP_THREADS)), block, 0, s,
                         op, act, (const float4 *)a, (const float4 *)b, (float4 *)o, n4,
                         a + n4 * 4, b + n4 * 4, o + n4 * 4, tail);
    } else {
      hipLaunchKernelGGL(bin_flat, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, op, act,
                         1, 1, a, b, o, n);
    }
  } else if ((na == n || na == 1) && (nb == n || nb == 1)) {
    hipLaunchKernelGGL(bin_flat, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, op, act,
                       na == n ? 1 : 0, nb == n ? 1 : 0, a, b, o, n);
  } else {
    hipLaunchKernelGGL(bin_bcast, dim3(md__hip_blocks(n, MD_HIP_THREADS)), block, 0, s, op, act,
                       *plan, a, b, o);
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
