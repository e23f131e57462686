/* test_nn.c - FULLY_CONNECTED and SOFTMAX: numerics (batch flattening, activation, axis and
 * beta), prepare-time checks, execute-time shapes, and run() refusing small buffers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "ktest.h"

/* ---- FULLY_CONNECTED numerics --------------------------------------------------------- */

Test(fully_connected, computes_dot_plus_bias) {
  float in[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b[] = {10, -1}, out[4];
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(2, D(2, 3), in), kt_f32(2, D(2, 3), w), kt_f32(1, D(2), b),
                    kt_i32(&act)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("FULLY_CONNECTED", t, 4, &o, &st), st);
  cr_assert_eq(o.rank, 2);
  cr_assert_eq(o.dims[0], 2);
  cr_assert_eq(o.dims[1], 2);
  const float want[] = {8, 2, 8, 6.5f};
  kt_assert_floats(out, want, 4, 0);
}

Test(fully_connected, applies_fused_activation) {
  float in[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b[] = {-10, -1}, out[4];
  int32_t act = 1;
  md_tensor t[4] = {kt_f32(2, D(2, 3), in), kt_f32(2, D(2, 3), w), kt_f32(1, D(2), b),
                    kt_i32(&act)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("FULLY_CONNECTED", t, 4, &o, &st), st);
  const float want[] = {0, 2, 0, 6.5f};
  kt_assert_floats(out, want, 4, 0);
}

Test(fully_connected, flattens_leading_dims_into_batch) {
  float in[12], w[] = {1, 1, 1}, b[] = {0}, out[4];
  for (int i = 0; i < 12; i++) in[i] = (float)(i + 1);
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(3, D(2, 2, 3), in), kt_f32(2, D(1, 3), w), kt_f32(1, D(1), b),
                    kt_i32(&act)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("FULLY_CONNECTED", t, 4, &o, &st), st);
  cr_assert_eq(o.dims[0], 4);
  cr_assert_eq(o.dims[1], 1);
  const float want[] = {6, 15, 24, 33};
  kt_assert_floats(out, want, 4, 0);
}

Test(fully_connected, input_size_may_span_several_dims) {
  float in[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}, b[] = {0, 100};
  float out[2];
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(2, D(2, 3), in), kt_f32(2, D(2, 6), w), kt_f32(1, D(2), b),
                    kt_i32(&act)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("FULLY_CONNECTED", t, 4, &o, &st), st);
  cr_assert_eq(o.dims[0], 1);
  cr_assert_eq(o.dims[1], 2);
  const float want[] = {21, 101};
  kt_assert_floats(out, want, 2, 0);
}

/* ---- FULLY_CONNECTED check / shape / run ---------------------------------------------- */

typedef struct fc_case {
  int which;
  md_status code;
  char want[160];
} fc_case;

static md_status fc_check_case(int which, md_kernel_status *st) {
  static const int32_t act0 = 0;
  static const uint32_t d5[] = {5}, d25[] = {2, 5}, d233[] = {2, 3, 3}, d6[] = {6};
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 1, D(4)), kt_si(MD_INT32, &act0)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  switch (which) {
  case 0: in[1] = kt_ti(MD_TENSOR_FLOAT32, 3, d233); break;
  case 1: in[2] = kt_ti(MD_TENSOR_FLOAT32, 1, d5); break;
  case 2: in[0] = kt_ti(MD_TENSOR_FLOAT32, 1, d6); break;
  case 3: in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, d25); break;
  case 4: in[0].type = in[1].type = out.type = MD_TENSOR_QUANT8_ASYMM; break;
  case 5:
    in[0].type = in[1].type = out.type = MD_TENSOR_QUANT8_ASYMM;
    in[2].type = MD_TENSOR_INT32;
    break;
  case 6: in[3] = kt_si(MD_FLOAT32, NULL); break;
  case 7: out = kt_ti(MD_TENSOR_FLOAT32, 2, d25); break;
  case 8: in[2].type = MD_TENSOR_INT32; break;
  case 9: in[1].type = MD_TENSOR_FLOAT16; break;
  }
  return kt_check("FULLY_CONNECTED", in, 4, &out, 1, st);
}

ParameterizedTestParameters(fully_connected, check_rejects_with_message) {
  static fc_case cases[] = {
      {0, MD_INVALID_ARGUMENT, "input 1 (weights) must have rank 2, got 3"},
      {1, MD_INVALID_ARGUMENT, "input 2 (bias) dims [5] do not match units 4"},
      {2, MD_INVALID_ARGUMENT, "input 0 (input) must have rank >= 2, got 1"},
      {3, MD_INVALID_ARGUMENT, "input 0 (input) dims [2,5] hold 10 elements, not a multiple of "
                               "input_size 3"},
      {4, MD_INVALID_ARGUMENT, "input 2 (bias) must be TENSOR_INT32 for a TENSOR_QUANT8_ASYMM "
                               "input, got TENSOR_FLOAT32"},
      {5, MD_GENERAL_FAILURE, "input 0 (input): TENSOR_QUANT8_ASYMM not supported"},
      {6, MD_INVALID_ARGUMENT, "input 3 (fused activation) must be INT32, got FLOAT32"},
      {7, MD_INVALID_ARGUMENT, "output 0 dims [2,5] conflict with [2,4]"},
      {8, MD_INVALID_ARGUMENT, "input 2 (bias) has type TENSOR_INT32, must match input 0"},
      {9, MD_INVALID_ARGUMENT, "input 1 (weights) has type TENSOR_FLOAT16, must match input 0"},
  };
  return cr_make_param_array(fc_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fc_case *c, fully_connected, check_rejects_with_message) {
  md_kernel_status st;
  md_status s = fc_check_case(c->which, &st);
  kt_assert_fail(s, st, c->code, c->want);
}

Test(fully_connected, check_accepts_unknown_batch) {
  md_kernel_status st;
  int32_t act = 1;
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 3, D(0, 2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 6)),
                           kt_ti(MD_TENSOR_FLOAT32, 1, D(0)), kt_si(MD_INT32, &act)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 4));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
}

Test(fully_connected, shape_rejects_input_not_multiple_of_input_size) {
  float x[10] = {0};
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(2, D(2, 5), x), kt_f32(2, D(2, 3), x), kt_f32(1, D(2), x),
                    kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "hold 10 elements, not a multiple of input_size 3");
}

Test(fully_connected, shape_rejects_bias_mismatch) {
  float x[10] = {0};
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(2, D(2, 3), x), kt_f32(2, D(2, 3), x), kt_f32(1, D(3), x),
                    kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (bias) dims [3] do not match units 2");
}

Test(fully_connected, run_refuses_too_small_output_and_weights) {
  float x[6] = {0}, out[4] = {0};
  int32_t act = 0;
  md_tensor t[4] = {kt_f32(2, D(2, 3), x), kt_f32(2, D(2, 3), x), kt_f32(1, D(2), x),
                    kt_i32(&act)};
  md_tensor o = kt_out(out, 12);
  md_kernel_status st;
  kt_assert_fail(kt_exec("FULLY_CONNECTED", t, 4, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 12 bytes, its dims [2,2] need 16");
  o.bytes = 16;
  t[1].bytes = 20;
  kt_assert_fail(kt_run("FULLY_CONNECTED", t, 4, &o, &st), st, MD_GENERAL_FAILURE,
                 "input 1 buffer is 20 bytes");
}

/* ---- SOFTMAX numerics ----------------------------------------------------------------- */

static md_status softmax(uint32_t rank, const uint32_t *dims, float *x, float beta,
                         const int32_t *axis, float *out, uint64_t out_bytes,
                         md_kernel_status *st) {
  int32_t ax = axis ? *axis : 0;
  md_tensor t[3] = {kt_f32(rank, dims, x), kt_f32s(&beta), kt_i32(&ax)};
  md_tensor o = kt_out(out, out_bytes);
  return kt_exec("SOFTMAX", t, axis ? 3 : 2, &o, st);
}

Test(softmax, default_axis_is_last) {
  float x[] = {0, logf(3), 1000, 1000}, out[4];
  md_kernel_status st;
  kt_assert_ok(softmax(2, D(2, 2), x, 1.0f, NULL, out, sizeof out, &st), st);
  const float want[] = {0.25f, 0.75f, 0.5f, 0.5f}; /* 1000s: stable, no overflow */
  kt_assert_floats(out, want, 4, 1e-6f);
}

Test(softmax, beta_scales_the_logits) {
  float x[] = {0, logf(3)}, out[2];
  md_kernel_status st;
  kt_assert_ok(softmax(1, D(2), x, 0.5f, NULL, out, sizeof out, &st), st);
  /* exp(0.5 ln 3) = sqrt(3) */
  const float want[] = {0.36602540f, 0.63397460f};
  kt_assert_floats(out, want, 2, 1e-6f);
}

typedef struct axis_case {
  int32_t axis;
  float want[4];
} axis_case;

ParameterizedTestParameters(softmax, axis_selects_dimension) {
  /* x = [[0, 5], [ln 3, ln 12]]. Along axis 0 the columns are (0, ln 3) -> 1:3 and
   * (5, ln 12) -> e^5:12; along axis 1 the rows are (0, 5) -> 1:e^5 and (ln 3, ln 12) -> 3:12. */
  static axis_case cases[] = {
      {0, {0.25f, 0.92519317f, 0.75f, 0.07480683f}},
      {-2, {0.25f, 0.92519317f, 0.75f, 0.07480683f}},
      {1, {0.0066928509f, 0.9933071491f, 0.2f, 0.8f}},
      {-1, {0.0066928509f, 0.9933071491f, 0.2f, 0.8f}},
  };
  return cr_make_param_array(axis_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(axis_case *c, softmax, axis_selects_dimension) {
  float x[] = {0, 5, logf(3), logf(12)}, out[4];
  md_kernel_status st;
  kt_assert_ok(softmax(2, D(2, 2), x, 1.0f, &c->axis, out, sizeof out, &st), st);
  kt_assert_floats(out, c->want, 4, 1e-6f);
}

Test(softmax, middle_axis_of_rank3) {
  float x[] = {0, logf(3), 0, 0, logf(2), 0}, out[6]; /* [1,3,2], axis 1 */
  int32_t axis = 1;
  md_kernel_status st;
  kt_assert_ok(softmax(3, D(1, 3, 2), x, 1.0f, &axis, out, sizeof out, &st), st);
  const float want[] = {0.25f, 0.6f, 0.25f, 0.2f, 0.5f, 0.2f};
  kt_assert_floats(out, want, 6, 1e-6f);
}

Test(softmax, absent_axis_value_means_last) {
  float x[] = {0, logf(3)}, beta = 1, out[2];
  md_tensor t[3] = {kt_f32(1, D(2), x), kt_f32s(&beta), kt_i32(NULL)}; /* given as no value */
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("SOFTMAX", t, 3, &o, &st), st);
  const float want[] = {0.25f, 0.75f};
  kt_assert_floats(out, want, 2, 1e-6f);
}

/* ---- SOFTMAX check / shape / run ------------------------------------------------------ */

typedef struct sm_case {
  int which;
  md_status code;
  char want[160];
} sm_case;

static md_status softmax_check_case(int which, md_kernel_status *st) {
  static const float beta1 = 1, beta0 = 0, betaneg = -2, betainf = INFINITY, betanan = NAN;
  static const int32_t axis2 = 2, axism3 = -3, axis1 = 1;
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)), kt_si(MD_FLOAT32, &beta1),
                           kt_si(MD_INT32, &axis1), kt_si(MD_INT32, &axis1)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  uint32_t n = 3;
  switch (which) {
  case 0: in[1] = kt_si(MD_FLOAT32, &beta0); break;
  case 1: in[1] = kt_si(MD_FLOAT32, &betaneg); break;
  case 2: in[1] = kt_si(MD_FLOAT32, &betainf); break;
  case 3: in[1] = kt_si(MD_FLOAT32, &betanan); break;
  case 4: in[1] = kt_si(MD_INT32, &axis1); break;
  case 5: in[2] = kt_si(MD_INT32, &axis2); break;
  case 6: in[2] = kt_si(MD_INT32, &axism3); break;
  case 7: in[2] = kt_si(MD_FLOAT32, &beta1); break;
  case 8: n = 4; break;
  case 9: in[0].type = out.type = MD_TENSOR_QUANT8_ASYMM; break;
  case 10: in[0].type = out.type = MD_TENSOR_INT32; break;
  case 11: out.type = MD_TENSOR_FLOAT16; break;
  case 12: n = 1; break;
  }
  return kt_check("SOFTMAX", in, n, &out, 1, st);
}

ParameterizedTestParameters(softmax, check_rejects_with_message) {
  static sm_case cases[] = {
      {0, MD_INVALID_ARGUMENT, "input 1 (beta) is 0; must be finite and > 0"},
      {1, MD_INVALID_ARGUMENT, "input 1 (beta) is -2; must be finite and > 0"},
      {2, MD_INVALID_ARGUMENT, "input 1 (beta) is inf"},
      {3, MD_INVALID_ARGUMENT, "input 1 (beta) is nan"},
      {4, MD_INVALID_ARGUMENT, "input 1 (beta) must be FLOAT32, got INT32"},
      {5, MD_INVALID_ARGUMENT, "input 2 (axis) is 2; must be in [-2, 2) for input 0 of rank 2"},
      {6, MD_INVALID_ARGUMENT, "input 2 (axis) is -3"},
      {7, MD_INVALID_ARGUMENT, "input 2 (axis) must be INT32, got FLOAT32"},
      {8, MD_INVALID_ARGUMENT, "expects 2 to 3 inputs, got 4"},
      {9, MD_GENERAL_FAILURE, "input 0: TENSOR_QUANT8_ASYMM not supported"},
      {10, MD_INVALID_ARGUMENT, "got TENSOR_INT32"},
      {11, MD_INVALID_ARGUMENT, "output 0 has type TENSOR_FLOAT16, must match input 0"},
      {12, MD_INVALID_ARGUMENT, "expects 2 to 3 inputs, got 1"},
  };
  return cr_make_param_array(sm_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(sm_case *c, softmax, check_rejects_with_message) {
  md_kernel_status st;
  md_status s = softmax_check_case(c->which, &st);
  kt_assert_fail(s, st, c->code, c->want);
}

Test(softmax, check_accepts_no_value_axis_and_unknown_rank) {
  md_kernel_status st;
  float beta = 1;
  int32_t axis = 5;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)), kt_si(MD_FLOAT32, &beta),
                           kt_si(MD_INT32, NULL)};
  in[2].lifetime = MD_NO_VALUE;
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_ok(kt_check("SOFTMAX", in, 3, &out, 1, &st), st);
  /* axis 5 cannot be judged while the rank is unknown */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  in[2] = kt_si(MD_INT32, &axis);
  kt_assert_ok(kt_check("SOFTMAX", in, 3, &out, 1, &st), st);
  /* a non-constant beta is judged at execution */
  in[1] = kt_si(MD_FLOAT32, NULL);
  kt_assert_ok(kt_check("SOFTMAX", in, 2, &out, 1, &st), st);
}

Test(softmax, shape_rejects_axis_out_of_range) {
  float x[6] = {0}, beta = 1;
  int32_t axis = -3;
  md_tensor t[3] = {kt_f32(2, D(2, 3), x), kt_f32s(&beta), kt_i32(&axis)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (axis) is -3; must be in [-2, 2)");
}

Test(softmax, shape_rejects_non_positive_beta) {
  float x[6] = {0}, beta = -0.5f;
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_f32s(&beta)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("SOFTMAX", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (beta) is -0.5");
}

Test(softmax, run_refuses_too_small_output) {
  float x[6] = {0}, out[6] = {0};
  md_kernel_status st;
  kt_assert_fail(softmax(2, D(2, 3), x, 1.0f, NULL, out, 23, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 23 bytes, its dims [2,3] need 24");
}
