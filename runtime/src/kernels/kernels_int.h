/* kernels_int.h - private to md_kernels: the built-in kernel tables and the helpers the host
 * kernels share (type names, operand views, prepare/execute checks that produce messages
 * naming the operand). */
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
const char *md__ktype_name(md_operand_type t);
/* 1 if t is one of the tensor types of the v1 subset. */
int md__ktype_is_tensor(md_operand_type t);
int md__ktype_is_quant(md_operand_type t);
/* Formats dims as "[2,0,3]" ("[?]" for rank 0) into buf (n >= 2); returns buf. */
const char *md__kdims_str(uint32_t rank, const uint32_t *dims, char *buf, size_t n);
/* Element count of known dims; 0 if rank is 0 or a dim is 0 (unknown); UINT64_MAX when the
 * product overflows uint64_t. */
uint64_t md__kcount(uint32_t rank, const uint32_t *dims);

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

void md__kview_info(md__kview *v, const md_operand_info *o);
void md__kview_tensor(md__kview *v, const md_tensor *t);

/* ---- prepare time (check) ------------------------------------------------------------- */

/* Collects the first "valid but unsupported" finding of a check(): reported as GENERAL_FAILURE
 * by md__kcheck_done only when nothing invalid was found. */
typedef struct md__kunsup {
  int found;
  char what[64];             /* "input 0" */
  md_operand_type type;
} md__kunsup;

/* Operand counts: min_in <= n_inputs <= max_in, n_outputs == n_out. */
md_status md__kcheck_counts(const md_op_sig *sig, md_kernel_status *st, uint32_t min_in,
                            uint32_t max_in, uint32_t n_out);
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

/* A tensor whose dims must be fully known: rank 1..MD_MAX_RANK, no 0 entry, element count
 * below 2^61 (so byte sizes never overflow). INVALID otherwise. */
md_status md__kexec_known(md_kernel_status *st, const char *io, uint32_t idx, const char *label,
                          const md__kview *v, uint64_t *count);
/* A scalar parameter value (4 bytes at v->data): INVALID when absent or short. */
md_status md__kexec_i32(md_kernel_status *st, uint32_t idx, const char *label,
                        const md__kview *v, int32_t *out);
md_status md__kexec_f32(md_kernel_status *st, uint32_t idx, const char *label,
                        const md__kview *v, float *out);
/* An activation value: INT32 0..3. */
md_status md__kexec_activation(md_kernel_status *st, uint32_t idx, const md__kview *v,
                               int32_t *act);
/* run(): a float32 tensor buffer holding `count` elements: type TENSOR_FLOAT32 (else
 * GENERAL_FAILURE "not supported"), data non-NULL when count > 0, bytes >= count * 4. */
md_status md__krun_buffer(md_kernel_status *st, const char *io, uint32_t idx,
                          const md_tensor *t, uint64_t count);
/* run(): output idx must have exactly the computed shape (GENERAL_FAILURE otherwise) and a
 * float32 buffer large enough for it; *count gets its element count. */
md_status md__krun_output(md_kernel_status *st, uint32_t idx, const md_tensor *t,
                          const md_tensor_shape *want, uint64_t *count);
/* run(): operand counts of the call. */
md_status md__krun_counts(const md_kernel_call *c, md_kernel_status *st, uint32_t min_in,
                          uint32_t max_in, uint32_t n_out);

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
