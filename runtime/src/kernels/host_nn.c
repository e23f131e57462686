/* host_nn.c - the float32 host kernels FULLY_CONNECTED and SOFTMAX, with their prepare-time
 * checks and execute-time shapes (NN HAL semantics). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels_int.h"
#include "md_math.h"

#define TRY(x)                     \
  do {                             \
    md_status try_s_ = (x);        \
    if (try_s_ != MD_NONE) return try_s_; \
  } while (0)

/* ---- FULLY_CONNECTED ------------------------------------------------------------------ */
/* Inputs: input [batch..., input_size] (rank >= 2, flattened to [batch, input_size] where
 * input_size = weights dim 1), weights [units, input_size], bias [units], INT32 activation.
 * Output: [batch, units]. out = act(dot(input row, weights row) + bias). */

static md_status fc_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  char d1[128], d2[128];
  TRY(md__kcheck_counts(sig, st, 4, 4, 1));
  const md_operand_info *in = &sig->inputs[0], *w = &sig->inputs[1], *b = &sig->inputs[2];
  const md_operand_info *o = &sig->outputs[0];
  TRY(md__kcheck_tensor(st, "input", 0, "input", in, MD__T_FLOAT | MD__T_QUANT, &u));
  if (in->rank == 1)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 0 (input) must have rank >= 2, got 1");
  TRY(md__kcheck_tensor(st, "input", 1, "weights", w, MD__T_FLOAT | MD__T_QUANT, &u));
  TRY(md__kcheck_same_type(st, "input", 1, "weights", w, in->type, "input 0"));
  TRY(md__kcheck_rank(st, "input", 1, "weights", w, 2));
  TRY(md__kcheck_tensor(st, "input", 2, "bias", b, MD__T_ANY, &u));
  if (md__ktype_is_quant(in->type)) {
    if (b->type != MD_TENSOR_INT32)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 2 (bias) must be TENSOR_INT32 for a %s input, got %s",
                            md_operand_type_name(in->type), md_operand_type_name(b->type));
  } else {
    TRY(md__kcheck_same_type(st, "input", 2, "bias", b, in->type, "input 0"));
  }
  TRY(md__kcheck_rank(st, "input", 2, "bias", b, 1));
  TRY(md__kcheck_activation(st, 3, &sig->inputs[3]));
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_FLOAT | MD__T_QUANT, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, in->type, "input 0"));

  uint32_t units = w->rank ? w->dims[0] : 0, isz = w->rank ? w->dims[1] : 0;
  if (b->rank && units && b->dims[0] && b->dims[0] != units)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 2 (bias) dims %s do not match units %" PRIu32
                          " (input 1 (weights) dim 0)",
                          md__kdims_str(b->rank, b->dims, d1, sizeof d1), units);
  if (!units && b->rank) units = b->dims[0];
  uint32_t batch = 0;
  uint64_t cnt = md__kcount(in->rank, in->dims);
  if (cnt && cnt != UINT64_MAX && isz) {
    if (cnt % isz)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 0 (input) dims %s hold %" PRIu64 " elements, not a multiple "
                            "of input_size %" PRIu32 " (input 1 (weights) dims %s)",
                            md__kdims_str(in->rank, in->dims, d1, sizeof d1), cnt, isz,
                            md__kdims_str(w->rank, w->dims, d2, sizeof d2));
    if (cnt / isz > UINT32_MAX)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 0 (input): batch %" PRIu64
                            " does not fit a dim", cnt / isz);
    batch = (uint32_t)(cnt / isz);
  }
  uint32_t dims[2] = {batch, units};
  TRY(md__kcheck_output_dims(st, sig, 0, 2, dims));
  return md__kcheck_done(st, &u);
}

static md_status fc_infer(const md__kview *v, md_tensor_shape *out, int32_t *act,
                          md_kernel_status *st) {
  char d1[128], d2[128];
  uint64_t cin;
  TRY(md__kexec_known(st, "input", 0, "input", &v[0], &cin));
  if (v[0].rank < 2)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 0 (input) must have rank >= 2, got %" PRIu32, v[0].rank);
  TRY(md__kexec_known(st, "input", 1, "weights", &v[1], NULL));
  if (v[1].rank != 2)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (weights) must have rank 2, got %" PRIu32, v[1].rank);
  TRY(md__kexec_known(st, "input", 2, "bias", &v[2], NULL));
  if (v[2].rank != 1)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 2 (bias) must have rank 1, got %" PRIu32, v[2].rank);
  TRY(md__kexec_activation(st, 3, &v[3], act));
  uint32_t units = v[1].dims[0], isz = v[1].dims[1];
  if (v[2].dims[0] != units)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 2 (bias) dims %s do not match units %" PRIu32
                          " (input 1 (weights) dim 0)",
                          md__kdims_str(v[2].rank, v[2].dims, d1, sizeof d1), units);
  if (cin % isz)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 0 (input) dims %s hold %" PRIu64 " elements, not a multiple of "
                          "input_size %" PRIu32 " (input 1 (weights) dims %s)",
                          md__kdims_str(v[0].rank, v[0].dims, d1, sizeof d1), cin, isz,
                          md__kdims_str(v[1].rank, v[1].dims, d2, sizeof d2));
  if (cin / isz > UINT32_MAX)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 0 (input): batch %" PRIu64 " does not fit a dim", cin / isz);
  out->rank = 2;
  out->dims[0] = (uint32_t)(cin / isz);
  out->dims[1] = units;
  md__kview ov = {.type = v[0].type, .rank = 2, .dims = out->dims};
  return md__kexec_known(st, "output", 0, NULL, &ov, NULL);
}

static md_status fc_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                          void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 4, 4, 1));
  md__kview v[4];
  for (uint32_t i = 0; i < 4; i++) md__kview_info(&v[i], &sig->inputs[i]);
  int32_t act;
  return fc_infer(v, &out[0], &act, st);
}

static md_status fc_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 4, 4, 1));
  md__kview v[4];
  for (uint32_t i = 0; i < 4; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  md_tensor_shape want;
  int32_t act;
  TRY(fc_infer(v, &want, &act, st));
  uint64_t batch = want.dims[0], units = want.dims[1], isz = v[1].dims[1];
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], batch * isz));
  TRY(md__krun_buffer(st, "input", 1, &c->inputs[1], units * isz));
  TRY(md__krun_buffer(st, "input", 2, &c->inputs[2], units));
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, NULL));
  const void *in = c->inputs[0].data, *w = c->inputs[1].data, *bias = c->inputs[2].data;
  void *o = c->outputs[0].data;
  for (uint64_t b = 0; b < batch; b++) {
    for (uint64_t n = 0; n < units; n++) {
      /* float accumulation, bias added after the dot product: the NN HAL reference order */
      float acc = 0.0f;
      for (uint64_t i = 0; i < isz; i++) acc += md__kld(in, b * isz + i) * md__kld(w, n * isz + i);
      md__kst(o, b * units + n, md__act_apply(act, acc + md__kld(bias, n)));
    }
  }
  return MD_NONE;
}

static void fc_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)fc_do(c, st);
}

/* ---- SOFTMAX -------------------------------------------------------------------------- */
/* Inputs: input tensor, FLOAT32 beta (finite, > 0), optional INT32 axis (default -1, negative
 * counts from the end). out = exp((x - max) * beta) / sum over the axis. */

static md_status beta_rule(md_kernel_status *st, float beta) {
  if (beta > 0.0f && !isinf(beta)) return MD_NONE;
  return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1 (beta) is %g; must be finite and > 0",
                        (double)beta);
}

static md_status axis_rule(md_kernel_status *st, int32_t axis, uint32_t rank) {
  if (axis >= -(int64_t)rank && axis < (int64_t)rank) return MD_NONE;
  return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                        "input 2 (axis) is %" PRId32 "; must be in [-%" PRIu32 ", %" PRIu32
                        ") for input 0 of rank %" PRIu32, axis, rank, rank, rank);
}

static md_status softmax_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  TRY(md__kcheck_counts(sig, st, 2, 3, 1));
  const md_operand_info *in = &sig->inputs[0], *o = &sig->outputs[0];
  TRY(md__kcheck_tensor(st, "input", 0, NULL, in, MD__T_FLOAT | MD__T_QUANT, &u));
  const md_operand_info *beta = &sig->inputs[1];
  TRY(md__kcheck_scalar(st, 1, "beta", beta, MD_FLOAT32));
  if (beta->value) {
    float b;
    memcpy(&b, beta->value, sizeof b);
    TRY(beta_rule(st, b));
  }
  if (sig->n_inputs >= 3 && sig->inputs[2].lifetime != MD_NO_VALUE) { /* optional axis given */
    const md_operand_info *ax = &sig->inputs[2];
    TRY(md__kcheck_scalar(st, 2, "axis", ax, MD_INT32));
    if (ax->value && in->rank) {
      int32_t a;
      memcpy(&a, ax->value, sizeof a);
      TRY(axis_rule(st, a, in->rank));
    }
  }
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_FLOAT | MD__T_QUANT, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, in->type, "input 0"));
  TRY(md__kcheck_output_dims(st, sig, 0, in->rank, in->dims));
  return md__kcheck_done(st, &u);
}

/* Validates and returns beta and the non-negative axis. */
static md_status softmax_infer(const md__kview *v, uint32_t n, float *beta, uint32_t *axis,
                               md_kernel_status *st) {
  TRY(md__kexec_known(st, "input", 0, NULL, &v[0], NULL));
  TRY(md__kexec_f32(st, 1, "beta", &v[1], beta));
  TRY(beta_rule(st, *beta));
  int32_t a = -1;
  if (n >= 3 && v[2].lifetime != MD_NO_VALUE && v[2].data) {
    TRY(md__kexec_i32(st, 2, "axis", &v[2], &a));
    TRY(axis_rule(st, a, v[0].rank));
  }
  *axis = a < 0 ? (uint32_t)((int64_t)v[0].rank + a) : (uint32_t)a;
  return MD_NONE;
}

static md_status softmax_shape(const md_op_sig *sig, md_tensor_shape *out,
                               md_kernel_status *st, void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 2, 3, 1));
  md__kview v[3];
  for (uint32_t i = 0; i < sig->n_inputs; i++) md__kview_info(&v[i], &sig->inputs[i]);
  float beta;
  uint32_t axis;
  TRY(softmax_infer(v, sig->n_inputs, &beta, &axis, st));
  out[0].rank = v[0].rank;
  for (uint32_t i = 0; i < v[0].rank; i++) out[0].dims[i] = v[0].dims[i];
  return MD_NONE;
}

static md_status softmax_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 2, 3, 1));
  md__kview v[3];
  for (uint32_t i = 0; i < c->n_inputs; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  float beta;
  uint32_t axis;
  TRY(softmax_infer(v, c->n_inputs, &beta, &axis, st));
  md_tensor_shape want = {.rank = v[0].rank};
  uint64_t outer = 1, len = v[0].dims[axis], inner = 1;
  for (uint32_t i = 0; i < v[0].rank; i++) {
    want.dims[i] = v[0].dims[i];
    if (i < axis) outer *= v[0].dims[i];
    if (i > axis) inner *= v[0].dims[i];
  }
  uint64_t n = outer * len * inner;
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], n));
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, NULL));
  const void *in = c->inputs[0].data;
  void *o = c->outputs[0].data;
  /* Every input value of a row is read before the row's first store, so in == out works. */
  for (uint64_t p = 0; p < outer; p++) {
    for (uint64_t q = 0; q < inner; q++) {
      uint64_t base = p * len * inner + q;
      float max = md__kld(in, base);
      for (uint64_t k = 1; k < len; k++) {
        float x = md__kld(in, base + k * inner);
        if (x > max) max = x;
      }
      float sum = 0.0f;
      for (uint64_t k = 0; k < len; k++) {
        float e = md__softmax_term(md__kld(in, base + k * inner), max, beta);
        md__kst(o, base + k * inner, e);
        sum += e;
      }
      for (uint64_t k = 0; k < len; k++)
        md__kst(o, base + k * inner, md__kld(o, base + k * inner) / sum);
    }
  }
  return MD_NONE;
}

static void softmax_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)softmax_do(c, st);
}

#define DEF(nm, lo, hi, chk, shp, rn)                                                     \
  {.struct_size = sizeof(md_kernel_def), .name = nm, .min_inputs = lo, .max_inputs = hi,  \
   .n_outputs = 1, .check = chk, .shape = shp, .run = rn}

const md_kernel_def md__host_nn_kernels[] = {
    DEF("FULLY_CONNECTED", 4, 4, fc_check, fc_shape, fc_run),
    DEF("SOFTMAX", 2, 3, softmax_check, softmax_shape, softmax_run),
};
const uint32_t md__host_nn_count =
    (uint32_t)(sizeof md__host_nn_kernels / sizeof md__host_nn_kernels[0]);
