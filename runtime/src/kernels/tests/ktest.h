/* ktest.h - helpers for the kernel tests: operand infos for check(), tensors for shape()/run(),
 * and one call that runs a built-in kernel as the runtime would (shape, then run). */
#ifndef MD_KTEST_H
#define MD_KTEST_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernel_ctx.h"
#include "md/kernel.h"

/* An array literal of dims: D(2, 3). */
#define D(...) ((const uint32_t[]){__VA_ARGS__})
#define NDIMS(...) ((uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)))
#define ARRAY_LEN(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* ---- prepare time ---------------------------------------------------------------------- */

/* A non-constant tensor operand (rank 0: unknown rank; 0 entries: unknown dims). */
static inline md_operand_info kt_ti(md_operand_type type, uint32_t rank, const uint32_t *dims) {
  md_operand_info o = {.type = type, .rank = rank, .dims = dims,
                       .lifetime = MD_TEMPORARY_VARIABLE};
  return o;
}

/* A scalar operand: constant when value is non-NULL, else a model input. */
static inline md_operand_info kt_si(md_operand_type type, const void *value) {
  md_operand_info o = {.type = type, .lifetime = value ? MD_CONSTANT_COPY : MD_SUBGRAPH_INPUT,
                       .value = value, .length = value ? 4 : 0};
  return o;
}

/* A constant tensor operand. */
static inline md_operand_info kt_ci(md_operand_type type, uint32_t rank, const uint32_t *dims,
                                    const void *value, uint64_t length) {
  md_operand_info o = {.type = type, .rank = rank, .dims = dims, .lifetime = MD_CONSTANT_COPY,
                       .value = value, .length = length};
  return o;
}

/* Runs `op`'s check() for the host platform. */
static inline md_status kt_check(const char *op, const md_operand_info *in, uint32_t n_in,
                                 const md_operand_info *out, uint32_t n_out,
                                 md_kernel_status *st) {
  const md_kernel_def *def = md_kernel_find(op, "host");
  cr_assert_not_null(def, "no host kernel %s", op);
  cr_assert_not_null(def->check);
  memset(st, 0, sizeof *st);
  md_op_sig sig = {.n_inputs = n_in, .inputs = in, .n_outputs = n_out, .outputs = out};
  md_status s = def->check(&sig, st, def->user);
  if (s != MD_NONE) cr_assert_eq(st->code, s, "check returned %d but set code %d", s, st->code);
  return s;
}

/* ---- execute time ---------------------------------------------------------------------- */

static inline uint64_t kt_count(uint32_t rank, const uint32_t *dims) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= dims[i];
  return n;
}

/* A float32 tensor over `data`, its buffer exactly as large as the dims need. */
static inline md_tensor kt_f32(uint32_t rank, const uint32_t *dims, void *data) {
  md_tensor t = {.type = MD_TENSOR_FLOAT32, .rank = rank, .data = data};
  for (uint32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  t.bytes = kt_count(rank, dims) * 4;
  return t;
}

/* An output buffer of `bytes`; its dims are filled from the kernel's shape() by kt_exec. */
static inline md_tensor kt_out(void *data, uint64_t bytes) {
  md_tensor t = {.type = MD_TENSOR_FLOAT32, .data = data, .bytes = bytes};
  return t;
}

static inline md_tensor kt_i32(int32_t *v) {
  md_tensor t = {.type = MD_INT32, .data = v, .bytes = 4};
  return t;
}

static inline md_tensor kt_f32s(float *v) {
  md_tensor t = {.type = MD_FLOAT32, .data = v, .bytes = 4};
  return t;
}

static inline md_tensor kt_i32v(uint32_t n, int32_t *v) {
  md_tensor t = {.type = MD_TENSOR_INT32, .rank = 1, .dims = {n}, .data = v, .bytes = 4ull * n};
  return t;
}

/* The execute-time info of a tensor, as the runtime builds it: parameters carry their value. */
static inline md_operand_info kt_info_of(const md_tensor *t) {
  int param = t->type == MD_INT32 || t->type == MD_FLOAT32 || t->type == MD_UINT32 ||
              t->type == MD_BOOL || t->type == MD_TENSOR_INT32;
  md_operand_info o = {.type = t->type, .rank = t->rank, .dims = t->dims,
                       .lifetime = MD_SUBGRAPH_INPUT, .value = param ? t->data : NULL,
                       .length = param ? t->bytes : 0};
  return o;
}

/* Calls shape() only; out gets the computed shape. */
static inline md_status kt_shape(const char *op, const md_tensor *in, uint32_t n_in,
                                 md_tensor_shape *out, md_kernel_status *st) {
  const md_kernel_def *def = md_kernel_find(op, "host");
  cr_assert_not_null(def, "no host kernel %s", op);
  md_operand_info infos[16];
  cr_assert(n_in <= 16);
  for (uint32_t i = 0; i < n_in; i++) infos[i] = kt_info_of(&in[i]);
  md_operand_info oinfo = {.type = MD_TENSOR_FLOAT32, .lifetime = MD_SUBGRAPH_OUTPUT};
  md_op_sig sig = {.n_inputs = n_in, .inputs = infos, .n_outputs = 1, .outputs = &oinfo};
  memset(st, 0, sizeof *st);
  md_status s = def->shape(&sig, out, st, def->user);
  if (s != MD_NONE) cr_assert_eq(st->code, s);
  return s;
}

/* Calls run() only, with a scratch context of `limit` bytes. */
static inline md_status kt_run_limit(const char *op, const md_tensor *in, uint32_t n_in,
                                     md_tensor *out, md_kernel_status *st, uint64_t limit) {
  const md_kernel_def *def = md_kernel_find(op, "host");
  cr_assert_not_null(def, "no host kernel %s", op);
  md_kernel_ctx ctx;
  md__kctx_init(&ctx, limit);
  md_kernel_call call = {.struct_size = sizeof call, .platform = "host", .n_inputs = n_in,
                         .inputs = in, .n_outputs = 1, .outputs = out, .ctx = &ctx,
                         .user = def->user};
  memset(st, 0, sizeof *st);
  def->run(&call, st);
  md__kctx_release(&ctx);
  return st->code;
}

static inline md_status kt_run(const char *op, const md_tensor *in, uint32_t n_in, md_tensor *out,
                               md_kernel_status *st) {
  return kt_run_limit(op, in, n_in, out, st, MD__KCTX_DEFAULT_LIMIT);
}

/* shape(), then run() with the output's dims set from it (as the runtime does). */
static inline md_status kt_exec(const char *op, const md_tensor *in, uint32_t n_in,
                                md_tensor *out, md_kernel_status *st) {
  md_tensor_shape shp;
  md_status s = kt_shape(op, in, n_in, &shp, st);
  if (s != MD_NONE) return s;
  out->rank = shp.rank;
  memcpy(out->dims, shp.dims, sizeof shp.dims);
  return kt_run(op, in, n_in, out, st);
}

/* Asserts a failure with `code` whose message contains `want`. */
#define kt_assert_fail(s, st, want_code, want)                                                 \
  do {                                                                                         \
    cr_assert_eq((s), (want_code), "status %d, want %d; message: %s", (int)(s),                \
                 (int)(want_code), (st).message);                                              \
    cr_assert(strstr((st).message, (want)) != NULL, "message \"%s\" lacks \"%s\"", (st).message, \
              (want));                                                                         \
  } while (0)

#define kt_assert_ok(s, st) cr_assert_eq((s), MD_NONE, "failed: %s", (st).message)

/* The status's message names `want` (whatever its code). */
#define kt_assert_names(st, want)                                                                \
  cr_assert(strstr((st).message, (want)) != NULL, "message \"%s\" lacks \"%s\"", (st).message, \
            (want))
/* A status left as it was: MD_NONE and no message. */
#define kt_assert_untouched(st)                                                                \
  do {                                                                                         \
    cr_assert_eq((st).code, MD_NONE);                                                          \
    cr_assert_eq((st).message[0], '\0', "message \"%s\" on success", (st).message);           \
  } while (0)

/* Elementwise comparison with an absolute tolerance. */
static inline void kt_assert_floats(const float *got, const float *want, uint32_t n, float eps) {
  for (uint32_t i = 0; i < n; i++)
    cr_assert(fabsf(got[i] - want[i]) <= eps, "element %u: got %.9g, want %.9g", i,
              (double)got[i], (double)want[i]);
}

#endif
