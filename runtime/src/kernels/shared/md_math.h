/* md_math.h - shared by the kernels of every backend (md_kernels_shared): per-element math
 * (activations, binary operators, softmax terms) and numpy-style broadcasting index math, used
 * by the host kernels and the HIP kernels so every backend computes the same thing.
 *
 * Plain C (also valid C++/HIP): `static inline` functions, no libc beyond <math.h>, no memory
 * access beyond the structs passed in. Each function is marked MD_HD, which is empty in C and
 * becomes `__host__ __device__` under hipcc/nvcc (or whatever an includer defines first).
 *
 * NaN policy: every activation (fused or the RELU operation) propagates a NaN input instead of
 * mapping it to a bound, so a NaN is never hidden from the conformance comparison. (The NN HAL
 * reference's std::max(0.f, x) maps NaN to 0 for RELU; we pick one rule for all backends.) */
#ifndef MD_MATH_H
#define MD_MATH_H

#include <math.h>
#include <stdint.h>

#include "md/driver.h" /* MD_MAX_RANK */

#ifndef MD_HD
#if defined(__HIPCC__) || defined(__CUDACC__)
#define MD_HD __host__ __device__
#else
#define MD_HD
#endif
#endif

/* Fused activation codes of ADD/SUB/MUL/FULLY_CONNECTED (NN HAL FusedActivationFunc). */
enum { MD__ACT_NONE = 0, MD__ACT_RELU = 1, MD__ACT_RELU1 = 2, MD__ACT_RELU6 = 3 };

/* Binary elementwise operators. */
enum { MD__BIN_ADD = 0, MD__BIN_SUB = 1, MD__BIN_MUL = 2 };

static inline MD_HD int md__act_valid(int32_t act) {
  return act >= MD__ACT_NONE && act <= MD__ACT_RELU6;
}

/* Clamps x to [lo, hi]; a NaN x stays NaN (both comparisons are false). */
static inline MD_HD float md__clampf(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

/* Applies fused activation `act` (assumed valid: md__act_valid) to x. */
static inline MD_HD float md__act_apply(int32_t act, float x) {
  switch (act) {
  case MD__ACT_RELU: return x < 0.0f ? 0.0f : x;
  case MD__ACT_RELU1: return md__clampf(x, -1.0f, 1.0f);
  case MD__ACT_RELU6: return md__clampf(x, 0.0f, 6.0f);
  default: return x;
  }
}

static inline MD_HD float md__binop(int op, float a, float b) {
  switch (op) {
  case MD__BIN_SUB: return a - b;
  case MD__BIN_MUL: return a * b;
  default: return a + b;
  }
}

/* One softmax numerator: exp((x - max) * beta). With max the row's maximum the argument is
 * <= 0, so this never overflows (NN HAL: out = exp((x - max) * beta) / sum). */
static inline MD_HD float md__softmax_term(float x, float max, float beta) {
  return expf((x - max) * beta);
}

/* Broadcasting plan for a binary operation: output dims and, per output axis, the element
 * stride of each input along that axis (0 where the input is broadcast along it). */
typedef struct md__bcast {
  uint32_t rank;                  /* output rank, 1..MD_MAX_RANK */
  uint32_t dims[MD_MAX_RANK];     /* output dims */
  uint64_t sa[MD_MAX_RANK];       /* strides of input a */
  uint64_t sb[MD_MAX_RANK];       /* strides of input b */
  uint64_t count;                 /* output element count */
} md__bcast;

/* Plans a broadcast of a (ra dims da) with b (rb dims db): trailing dims aligned, each pair
 * equal or one of them 1. All dims must be known (non-zero) and ranks in 1..MD_MAX_RANK.
 * Returns 0, or -1 with *bad_axis = the output axis that does not broadcast (MD_MAX_RANK for
 * a bad rank). Element counts are not checked for overflow here: callers bound them first. */
static inline MD_HD int md__bcast_init(md__bcast *p, uint32_t ra, const uint32_t *da, uint32_t rb,
                                       const uint32_t *db, uint32_t *bad_axis) {
  if (ra == 0 || rb == 0 || ra > MD_MAX_RANK || rb > MD_MAX_RANK) {
    *bad_axis = MD_MAX_RANK;
    return -1;
  }
  uint32_t r = ra > rb ? ra : rb;
  p->rank = r;
  uint64_t stride_a = 1, stride_b = 1, count = 1;
  for (uint32_t k = 0; k < r; k++) {
    uint32_t o = r - 1 - k; /* output axis, from the last */
    uint32_t a = k < ra ? da[ra - 1 - k] : 1;
    uint32_t b = k < rb ? db[rb - 1 - k] : 1;
    if (a == 0 || b == 0 || (a != b && a != 1 && b != 1)) {
      *bad_axis = o;
      return -1;
    }
    uint32_t d = a > b ? a : b;
    p->dims[o] = d;
    p->sa[o] = (a == 1 && d != 1) ? 0 : stride_a;
    p->sb[o] = (b == 1 && d != 1) ? 0 : stride_b;
    stride_a *= a;
    stride_b *= b;
    count *= d;
  }
  p->count = count;
  return 0;
}

/* Element offsets into a and b for output linear index i (row-major). */
static inline MD_HD void md__bcast_offsets(const md__bcast *p, uint64_t i, uint64_t *oa,
                                           uint64_t *ob) {
  uint64_t a = 0, b = 0;
  for (uint32_t k = p->rank; k-- > 0;) {
    uint64_t d = p->dims[k];
    uint64_t c = i % d;
    i /= d;
    a += c * p->sa[k];
    b += c * p->sb[k];
  }
  *oa = a;
  *ob = b;
}

#endif
