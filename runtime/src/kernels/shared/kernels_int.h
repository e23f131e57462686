/* kernels_int.h - shared by md_kernels and the backends that register kernels of the built-in
 * operations (the hip backend), through the internal target md_kernels_shared: the built-in
 * kernel tables and the helpers the kernels share (type names, operand views, prepare/execute
 * checks that produce messages naming the operand). Not part of the public API. */
#ifndef MD_KERNELS_INT_H
#define MD_KERNELS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "md/kernel.h"

/* Built-in kernel tables. Their `platform` is NULL: the registry registers every entry once
 * for "host" and once for "sim" (the same functions; sim memory is host addressable). */
extern const md_kernel_def md__host_elementwise_kernels[]; /* ADD SUB MUL RELU */
extern const uint32_t md__host_elementwise_count;
extern const md_kernel_def md__host_nn_kernels[];          /* FULLY_CONNECTED SOFTMAX */
extern const uint32_t md__host_nn_count;
extern const md_kernel_def md__host_shape_kernels[];       /* RESHAPE CONCATENATION */
extern const uint32_t md__host_shape_count;

/* Registers `def` as a built-in: like md_kernel_register, but md_kernel_unregister refuses to
 * remove it. For backends that bring their own built-ins (the hip backend). Thread-safe;
 * INVALID_ARGUMENT (message in md_kernel_registry_error) as md_kernel_register. */
md_status md__kernel_register_builtin(const md_kernel_def *def);

/* Tensor type sets, as bit masks of md_operand_type values (all below 32). */
#define MD__TBIT(t) (UINT32_C(1) << (t))
#define MD__T_FLOAT (MD__TBIT(MD_TENSOR_FLOAT32) | MD__TBIT(MD_TENSOR_FLOAT16))
#define MD__T_QUANT (MD__TBIT(MD_TENSOR_QUANT8_ASYMM) | MD__TBIT(MD_TENSOR_QUANT8_ASYMM_SIGNED))
#define MD__T_ANY (MD__T_FLOAT | MD__T_QUANT | MD__TBIT(MD_TENSOR_INT32))

/* "TENSOR_FLOAT32", ...; "type <n>" (in a static per-thread buffer) for an unknown value. */
/* 1 if t is one of the tensor types of the v1 subset. */
int md__ktype_is_tensor(md_operand_type t);
int md__ktype_is_quant(md_operand_type t);
/* Formats dims as "[2,0,3]" ("[?]" for rank 0) into buf (n >= 2); returns buf. */
const char *md__kdims_str(uint32_t rank, const uint32_t *dims, char *buf, size_t n);
/* Element count of known dims; 0 if rank is 0 or a dim is 0 (unknown); UINT64_MAX when the
 * product overflows uint64_t. */
static inline uint64_t md__kcount(uint32_t rank, const uint32_t *dims) {
  if (rank == 0 || rank > MD_MAX_RANK || dims == NULL) return 0;
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) return 0;
    if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n)) return UINT64_MAX;
  }
  return n;
}

/* Element counts above this are refused at execute time, so count * element size (<= 4)
 * never overflows uint64_t. */
#define MD__KMAX_ELEMENTS (UINT64_C(1) << 61)

/* One operand, from either an md_operand_info (check/shape) or an md_tensor (run). `data` is
 * the constant value at prepare, the parameter value at execute (shape), the buffer in run;
 * NULL when absent. */
typedef struct md__kview {
  md_operand_type type;
  md_lifetime lifetime;   /* MD_TEMPORARY_VARIABLE for a tensor given to run() */
  uint32_t rank;
  const uint32_t *dims;
  const void *data;
  uint64_t bytes;
} md__kview;

static inline void md__kview_info(md__kview *v, const md_operand_info *o) {
  v->type = o->type;
  v->lifetime = o->lifetime;
  v->rank = o->rank;
  v->dims = o->dims;
  v->data = o->value;
  v->bytes = o->value ? o->length : 0;
}

static inline void md__kview_tensor(md__kview *v, const md_tensor *t) {
  v->type = t->type;
  v->lifetime = MD_TEMPORARY_VARIABLE;
  v->rank = t->rank;
  v->dims = t->dims;
  v->data = t->data;
  v->bytes = t->data ? t->bytes : 0;
}

/* ---- prepare time (check) ------------------------------------------------------------- */

/* Collects the first "valid but unsupported" finding of a check(): reported as GENERAL_FAILURE
 * by md__kcheck_done only when nothing invalid was found. */
typedef struct md__kunsup {
  int found;
  char what[64];             /* "input 0" */
  md_operand_type type;
} md__kunsup;

/* md__kcheck_counts (operand counts: min_in <= n_inputs <= max_in, n_outputs == n_out) is
 * defined below, with the execute-time checks (shape() uses it too). */
/* A tensor operand: not NO_VALUE, a type in `allowed` (else INVALID naming the accepted types),
 * rank <= MD_MAX_RANK with dims when rank > 0. A type other than TENSOR_FLOAT32 is noted in u. */
md_status md__kcheck_tensor(md_kernel_status *st, const char *io, uint32_t idx, const char *label,
                            const md_operand_info *o, uint32_t allowed, md__kunsup *u);
/* Operand idx of `io` has type `want` (message names both). */
md_status md__kcheck_same_type(md_kernel_status *st, const char *io, uint32_t idx,
                               const char *label, const md_operand_info *o, md_operand_type want,
                               const char *want_of);
/* A scalar operand of type `want` (rank 0, not NO_VALUE); a constant value must be 4 bytes. */
md_status md__kcheck_scalar(md_kernel_status *st, uint32_t idx, const char *label,
                            const md_operand_info *o, md_operand_type want);
/* Known rank of a tensor (0: unknown) must be `want` (INVALID otherwise). */
md_status md__kcheck_rank(md_kernel_status *st, const char *io, uint32_t idx, const char *label,
                          const md_operand_info *o, uint32_t want);
/* A fused activation operand: INT32 scalar and, when constant, 0..3. */
md_status md__kcheck_activation(md_kernel_status *st, uint32_t idx, const md_operand_info *o);
/* Output `idx` against what the inputs imply (rank 0: unknown rank; 0 entries: unknown dims):
 * a known declared rank or dim that differs is INVALID. */
md_status md__kcheck_output_dims(md_kernel_status *st, const md_op_sig *sig, uint32_t idx,
                                 uint32_t rank, const uint32_t *dims);
/* The end of a check(): GENERAL_FAILURE "<what>: <TYPE> not supported" if u found one. */
md_status md__kcheck_done(md_kernel_status *st, const md__kunsup *u);

/* ---- execute time (shape, run) -------------------------------------------------------- */

/* Every execute-time check below is an inline fast path that tests the condition and returns
 * MD_NONE without formatting anything, allocating anything or calling out of line; only when
 * the fast test fails does it call the matching md__k*_slow function (kernel_util.c, cold),
 * which runs the full check again and formats the message naming the operand. A slow function
 * is the complete check on its own (it returns MD_NONE, with the same outputs, whenever the
 * operand is fine), so the fast path only has to be exact in one direction: whatever it
 * accepts, the slow path would have accepted with the same results. */

md_status md__kcounts_slow(md_kernel_status *st, uint32_t n_in, const void *in, uint32_t n_outs,
                           const void *out, uint32_t min_in, uint32_t max_in, uint32_t n_out);
md_status md__kexec_known_slow(md_kernel_status *st, const char *io, uint32_t idx,
                               const char *label, const md__kview *v, uint64_t *count);
md_status md__kexec_scalar4_slow(md_kernel_status *st, uint32_t idx, const char *label,
                                 const md__kview *v, md_operand_type want, void *out);
md_status md__kexec_activation_slow(md_kernel_status *st, uint32_t idx, const md__kview *v,
                                    int32_t *act);
md_status md__krun_buffer_slow(md_kernel_status *st, const char *io, uint32_t idx,
                               const md_tensor *t, uint64_t count);
md_status md__krun_output_slow(md_kernel_status *st, uint32_t idx, const md_tensor *t,
                               uint32_t rank, const uint32_t *dims, uint64_t *count);

static inline int md__kcounts_ok(uint32_t n_in, const void *in, uint32_t n_outs,
                                 const void *out, uint32_t min_in, uint32_t max_in,
                                 uint32_t n_out) {
  return n_in >= min_in && n_in <= max_in && n_outs == n_out && (!n_in || in) &&
         (!n_outs || out);
}

/* Operand counts of a signature: min_in <= n_inputs <= max_in, n_outputs == n_out. */
static inline md_status md__kcheck_counts(const md_op_sig *sig, md_kernel_status *st,
                                          uint32_t min_in, uint32_t max_in, uint32_t n_out) {
  if (md__kcounts_ok(sig->n_inputs, sig->inputs, sig->n_outputs, sig->outputs, min_in, max_in,
                     n_out))
    return MD_NONE;
  return md__kcounts_slow(st, sig->n_inputs, sig->inputs, sig->n_outputs, sig->outputs, min_in,
                          max_in, n_out);
}

/* run(): operand counts of the call. */
static inline md_status md__krun_counts(const md_kernel_call *c, md_kernel_status *st,
                                        uint32_t min_in, uint32_t max_in, uint32_t n_out) {
  if (md__kcounts_ok(c->n_inputs, c->inputs, c->n_outputs, c->outputs, min_in, max_in, n_out))
    return MD_NONE;
  return md__kcounts_slow(st, c->n_inputs, c->inputs, c->n_outputs, c->outputs, min_in, max_in,
                          n_out);
}

/* Element count of fully known dims (rank 1..MD_MAX_RANK, no 0 entry, at most
 * MD__KMAX_ELEMENTS elements) in *count; 0 (and *count untouched) otherwise. */
static inline int md__kdims_ok(uint32_t rank, const uint32_t *dims, uint64_t *count) {
  if (rank - 1u >= MD_MAX_RANK || !dims) return 0;   /* rank 0 wraps */
  uint64_t n = dims[0];
  for (uint32_t i = 1; i < rank; i++)
    if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n)) return 0;
  if (n - 1u >= MD__KMAX_ELEMENTS) return 0;          /* n == 0 (a 0 dim) wraps */
  *count = n;
  return 1;
}

/* A tensor whose dims must be fully known: rank 1..MD_MAX_RANK, no 0 entry, element count
 * below 2^61 (so byte sizes never overflow). INVALID otherwise. */
static inline md_status md__kexec_known(md_kernel_status *st, const char *io, uint32_t idx,
                                        const char *label, const md__kview *v,
                                        uint64_t *count) {
  uint64_t n;
  if (md__kdims_ok(v->rank, v->dims, &n)) {
    if (count) *count = n;
    return MD_NONE;
  }
  return md__kexec_known_slow(st, io, idx, label, v, count);
}

/* A scalar parameter value (4 bytes at v->data): INVALID when absent or short. */
static inline md_status md__kexec_i32(md_kernel_status *st, uint32_t idx, const char *label,
                                      const md__kview *v, int32_t *out) {
  if (v->type == MD_INT32 && v->data && v->bytes >= 4) {
    memcpy(out, v->data, 4);
    return MD_NONE;
  }
  return md__kexec_scalar4_slow(st, idx, label, v, MD_INT32, out);
}
static inline md_status md__kexec_f32(md_kernel_status *st, uint32_t idx, const char *label,
                                      const md__kview *v, float *out) {
  if (v->type == MD_FLOAT32 && v->data && v->bytes >= 4) {
    memcpy(out, v->data, 4);
    return MD_NONE;
  }
  return md__kexec_scalar4_slow(st, idx, label, v, MD_FLOAT32, out);
}

/* An activation value: INT32 0..3. */
static inline md_status md__kexec_activation(md_kernel_status *st, uint32_t idx,
                                             const md__kview *v, int32_t *act) {
  if (v->type == MD_INT32 && v->data && v->bytes >= 4) {
    memcpy(act, v->data, 4);
    if (*act >= 0 && *act <= 3) return MD_NONE;
  }
  return md__kexec_activation_slow(st, idx, v, act);
}

/* run(): a float32 tensor buffer holding `count` elements: type TENSOR_FLOAT32 (else
 * GENERAL_FAILURE "not supported"), data non-NULL when count > 0, bytes >= count * 4. */
static inline md_status md__krun_buffer(md_kernel_status *st, const char *io, uint32_t idx,
                                        const md_tensor *t, uint64_t count) {
  if (t->type == MD_TENSOR_FLOAT32 && count <= MD__KMAX_ELEMENTS && (t->data || !count) &&
      t->bytes >= count * 4)
    return MD_NONE;
  return md__krun_buffer_slow(st, io, idx, t, count);
}

/* run(): output idx must have exactly the computed shape `rank` x `dims` (GENERAL_FAILURE
 * otherwise) and a float32 buffer large enough for it; *count gets its element count. */
static inline md_status md__krun_output_dims(md_kernel_status *st, uint32_t idx,
                                             const md_tensor *t, uint32_t rank,
                                             const uint32_t *dims, uint64_t *count) {
  uint64_t n;
  if (t->rank == rank && md__kdims_ok(rank, dims, &n) && t->type == MD_TENSOR_FLOAT32 &&
      t->data && t->bytes >= n * 4) {
    int same = 1;
    for (uint32_t i = 0; i < rank; i++) same &= t->dims[i] == dims[i];
    if (same) {
      if (count) *count = n;
      return MD_NONE;
    }
  }
  return md__krun_output_slow(st, idx, t, rank, dims, count);
}

/* The same with the computed shape as an md_tensor_shape. */
static inline md_status md__krun_output(md_kernel_status *st, uint32_t idx, const md_tensor *t,
                                        const md_tensor_shape *want, uint64_t *count) {
  return md__krun_output_dims(st, idx, t, want->rank, want->dims, count);
}

/* Unaligned-safe element access: request offsets need not be 4-byte aligned, and a float
 * load through a misaligned pointer is undefined behaviour. Compiles to a plain load/store. */
static inline float md__kld(const void *base, uint64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)base + i * sizeof v, sizeof v);
  return v;
}
static inline void md__kst(void *base, uint64_t i, float v) {
  memcpy((unsigned char *)base + i * sizeof v, &v, sizeof v);
}

#endif
