/* test_shape.c - RESHAPE and CONCATENATION: results (-1 inference, negative axes), prepare-time
 * checks, execute-time shapes, and run() refusing small buffers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "ktest.h"

/* ---- RESHAPE -------------------------------------------------------------------------- */

Test(reshape, infers_minus_one) {
  float x[] = {1, 2, 3, 4, 5, 6}, out[6];
  int32_t shape[] = {3, -1};
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_i32v(2, shape)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RESHAPE", t, 2, &o, &st), st);
  cr_assert_eq(o.rank, 2);
  cr_assert_eq(o.dims[0], 3);
  cr_assert_eq(o.dims[1], 2);
  kt_assert_floats(out, x, 6, 0);
}

Test(reshape, flattens_with_single_minus_one) {
  float x[24], out[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  int32_t shape[] = {-1};
  md_tensor t[2] = {kt_f32(3, D(2, 3, 4), x), kt_i32v(1, shape)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RESHAPE", t, 2, &o, &st), st);
  cr_assert_eq(o.rank, 1);
  cr_assert_eq(o.dims[0], 24);
  kt_assert_floats(out, x, 24, 0);
}

Test(reshape, explicit_shape_raises_rank) {
  float x[] = {1, 2, 3, 4}, out[4];
  int32_t shape[] = {1, 2, 1, 2};
  md_tensor t[2] = {kt_f32(1, D(4), x), kt_i32v(4, shape)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RESHAPE", t, 2, &o, &st), st);
  cr_assert_eq(o.rank, 4);
  cr_assert_eq(o.dims[1], 2);
  cr_assert_eq(o.dims[3], 2);
  kt_assert_floats(out, x, 4, 0);
}

typedef struct reshape_case {
  int32_t shape[4];
  uint32_t n;
  char want[128];
} reshape_case;

ParameterizedTestParameters(reshape, shape_rejects_bad_values) {
  static reshape_case cases[] = {
      {{-1, -1}, 2, "input 1 (shape) [-1,-1] has -1 at entries 0 and 1; at most one is allowed"},
      {{2, 0, 3}, 3, "input 1 (shape) [2,0,3] entry 1 is 0; must be > 0 or -1"},
      {{-2, 3}, 2, "entry 0 is -2; must be > 0 or -1"},
      {{4, 2}, 2, "input 1 (shape) [4,2] holds 8 elements, input 0 has 6"},
      {{4, -1}, 2, "input 1 (shape) [4,-1]: the 6 elements of input 0 do not fit"},
  };
  return cr_make_param_array(reshape_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(reshape_case *c, reshape, shape_rejects_bad_values) {
  float x[6] = {0};
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_i32v(c->n, c->shape)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT, c->want);
}

Test(reshape, shape_rejects_more_than_max_rank_entries) {
  float x[1] = {0};
  int32_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  md_tensor t[2] = {kt_f32(1, D(1), x), kt_i32v(9, shape)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) has 9 entries; the output rank must be 1..8");
}

Test(reshape, shape_rejects_short_shape_value) {
  float x[6] = {0};
  int32_t shape[2] = {3, 2};
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_i32v(2, shape)};
  t[1].bytes = 4;
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) value is 4 bytes, its 2 entries need 8");
}

typedef struct reshape_check_case {
  int which;
  md_status code;
  char want[128];
} reshape_check_case;

static md_status reshape_check_case_run(int which, md_kernel_status *st) {
  static const int32_t ok[] = {3, -1}, two_neg[] = {-1, -1}, zero[] = {0, 6}, eight[] = {4, 2};
  static const uint32_t d2[] = {2}, d22[] = {2, 2}, d3[] = {3}, d9[] = {9}, d32[] = {3, 3};
  md_operand_info in[2] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ci(MD_TENSOR_INT32, 1, D(2), ok, sizeof ok)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 2));
  switch (which) {
  case 0: in[1] = kt_ci(MD_TENSOR_INT32, 1, d2, two_neg, sizeof two_neg); break;
  case 1: in[1] = kt_ci(MD_TENSOR_INT32, 1, d2, zero, sizeof zero); break;
  case 2: in[1] = kt_ci(MD_TENSOR_INT32, 1, d2, eight, sizeof eight); break;
  case 3: in[1] = kt_ci(MD_TENSOR_FLOAT32, 1, d2, ok, sizeof ok); break;
  case 4: in[1] = kt_ci(MD_TENSOR_INT32, 2, d22, ok, sizeof ok); break;
  case 5: out = kt_ti(MD_TENSOR_FLOAT32, 2, d32); break;
  case 6: out = kt_ti(MD_TENSOR_FLOAT32, 1, d3); break;
  case 7: in[1] = kt_ti(MD_TENSOR_INT32, 1, d9); break;
  case 8: in[1] = kt_ci(MD_TENSOR_INT32, 1, d3, ok, sizeof ok); break;
  case 9: in[0].type = out.type = MD_TENSOR_QUANT8_ASYMM_SIGNED; break;
  case 10: out.type = MD_TENSOR_INT32; break;
  }
  return kt_check("RESHAPE", in, 2, &out, 1, st);
}

ParameterizedTestParameters(reshape, check_rejects_with_message) {
  static reshape_check_case cases[] = {
      {0, MD_INVALID_ARGUMENT, "at most one is allowed"},
      {1, MD_INVALID_ARGUMENT, "input 1 (shape) [0,6] entry 0 is 0"},
      {2, MD_INVALID_ARGUMENT, "input 1 (shape) [4,2] holds 8 elements, input 0 has 6"},
      {3, MD_INVALID_ARGUMENT, "input 1 (shape) must be TENSOR_INT32, got TENSOR_FLOAT32"},
      {4, MD_INVALID_ARGUMENT, "input 1 (shape) must have rank 1, got 2"},
      {5, MD_INVALID_ARGUMENT, "output 0 dims [3,3] conflict with [3,2]"},
      {6, MD_INVALID_ARGUMENT, "output 0 has rank 1, the inputs imply rank 2"},
      {7, MD_INVALID_ARGUMENT, "input 1 (shape) has 9 entries; the output rank must be 1..8"},
      {8, MD_INVALID_ARGUMENT, "input 1 (shape) constant has 2 entries, its dims say 3"},
      {9, MD_GENERAL_FAILURE, "input 0: TENSOR_QUANT8_ASYMM_SIGNED not supported"},
      {10, MD_INVALID_ARGUMENT, "output 0 has type TENSOR_INT32, must match input 0"},
  };
  return cr_make_param_array(reshape_check_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(reshape_check_case *c, reshape, check_rejects_with_message) {
  md_kernel_status st;
  md_status s = reshape_check_case_run(c->which, &st);
  kt_assert_fail(s, st, c->code, c->want);
}

Test(reshape, check_accepts_non_constant_shape_and_unknown_input) {
  md_kernel_status st;
  static const int32_t shape[] = {-1, 4};
  md_operand_info in[2] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_INT32, 1, D(2))};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  /* 6 elements do not fit [-1, 4], but input dims unknown at prepare: judged at execution */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3));
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(2), shape, sizeof shape);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 4));
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
}

Test(reshape, run_refuses_too_small_output) {
  float x[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
  int32_t shape[] = {6};
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_i32v(1, shape)};
  md_tensor o = kt_out(out, 8);
  md_kernel_status st;
  kt_assert_fail(kt_exec("RESHAPE", t, 2, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 8 bytes, its dims [6] need 24");
  for (int i = 0; i < 6; i++) cr_assert_float_eq(out[i], 0.0f, 0);
}

/* ---- CONCATENATION -------------------------------------------------------------------- */

Test(concatenation, negative_axis_joins_last_dim) {
  float a[] = {1, 2}, b[] = {3, 4, 5, 6}, out[6];
  int32_t axis = -1;
  md_tensor t[3] = {kt_f32(2, D(2, 1), a), kt_f32(2, D(2, 2), b), kt_i32(&axis)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, 3, &o, &st), st);
  cr_assert_eq(o.rank, 2);
  cr_assert_eq(o.dims[0], 2);
  cr_assert_eq(o.dims[1], 3);
  const float want[] = {1, 3, 4, 2, 5, 6};
  kt_assert_floats(out, want, 6, 0);
}

Test(concatenation, axis_zero_of_three_inputs) {
  float a[] = {1, 2}, b[] = {3, 4, 5, 6}, c[] = {7, 8}, out[8];
  int32_t axis = 0;
  md_tensor t[4] = {kt_f32(2, D(1, 2), a), kt_f32(2, D(2, 2), b), kt_f32(2, D(1, 2), c),
                    kt_i32(&axis)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, 4, &o, &st), st);
  cr_assert_eq(o.dims[0], 4);
  cr_assert_eq(o.dims[1], 2);
  const float want[] = {1, 2, 3, 4, 5, 6, 7, 8};
  kt_assert_floats(out, want, 8, 0);
}

Test(concatenation, middle_axis_of_rank3) {
  /* a [2,1,2], b [2,2,2] along axis -2 (= 1) -> [2,3,2] */
  float a[] = {1, 2, 3, 4}, b[] = {10, 11, 12, 13, 14, 15, 16, 17}, out[12];
  int32_t axis = -2;
  md_tensor t[3] = {kt_f32(3, D(2, 1, 2), a), kt_f32(3, D(2, 2, 2), b), kt_i32(&axis)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, 3, &o, &st), st);
  cr_assert_eq(o.dims[1], 3);
  const float want[] = {1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17};
  kt_assert_floats(out, want, 12, 0);
}

Test(concatenation, single_input_is_a_copy) {
  float a[] = {1, 2, 3}, out[3];
  int32_t axis = 0;
  md_tensor t[2] = {kt_f32(1, D(3), a), kt_i32(&axis)};
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, 2, &o, &st), st);
  kt_assert_floats(out, a, 3, 0);
}

Test(concatenation, many_inputs_use_scratch) {
  enum { N = 12 };
  float vals[N], out[N];
  md_tensor t[N + 1];
  for (int i = 0; i < N; i++) {
    vals[i] = (float)i;
    t[i] = kt_f32(1, D(1), &vals[i]);
  }
  int32_t axis = 0;
  t[N] = kt_i32(&axis);
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, N + 1, &o, &st), st);
  cr_assert_eq(o.dims[0], N);
  kt_assert_floats(out, vals, N, 0);
  /* Without scratch memory it says so instead of failing some other way. */
  kt_assert_fail(kt_run_limit("CONCATENATION", t, N + 1, &o, &st, 0), st,
                 MD_RESOURCE_EXHAUSTED_TRANSIENT, "no scratch memory for 13 input views");
}

typedef struct concat_case {
  int which;
  md_status code;
  char want[160];
} concat_case;

static md_status concat_check_case(int which, md_kernel_status *st) {
  static const int32_t ax1 = 1, ax2 = 2, axm3 = -3;
  static const uint32_t d234[] = {2, 3, 4}, d33[] = {3, 3}, d24[] = {2, 4}, d25[] = {2, 5};
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 1)), kt_si(MD_INT32, &ax1)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  uint32_t n = 3;
  switch (which) {
  case 0: in[1] = kt_ti(MD_TENSOR_FLOAT32, 3, d234); break;
  case 1: in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, d33); break;
  case 2: in[2] = kt_si(MD_INT32, &ax2); break;
  case 3: in[2] = kt_si(MD_INT32, &axm3); break;
  case 4: in[1].type = MD_TENSOR_FLOAT16; break;
  case 5: in[2] = kt_ti(MD_TENSOR_INT32, 1, d24); break;
  case 6: out = kt_ti(MD_TENSOR_FLOAT32, 2, d25); break;
  case 7: n = 1; break;
  case 8: in[0].type = in[1].type = out.type = MD_TENSOR_QUANT8_ASYMM; break;
  }
  return kt_check("CONCATENATION", in, n, &out, 1, st);
}

ParameterizedTestParameters(concatenation, check_rejects_with_message) {
  static concat_case cases[] = {
      {0, MD_INVALID_ARGUMENT, "input 1 has rank 3, input 0 has rank 2; all inputs must have "
                               "the same rank"},
      {1, MD_INVALID_ARGUMENT, "input 1 dims [3,3] and input 0 dims [2,3] differ on axis 0 "
                               "(concatenating along axis 1)"},
      {2, MD_INVALID_ARGUMENT, "input 2 (axis) is 2; must be in [-2, 2) for inputs of rank 2"},
      {3, MD_INVALID_ARGUMENT, "input 2 (axis) is -3"},
      {4, MD_INVALID_ARGUMENT, "input 1 has type TENSOR_FLOAT16, must match input 0 "
                               "(TENSOR_FLOAT32)"},
      {5, MD_INVALID_ARGUMENT, "input 2 (axis) must be INT32, got TENSOR_INT32"},
      {6, MD_INVALID_ARGUMENT, "output 0 dims [2,5] conflict with [2,4]"},
      {7, MD_INVALID_ARGUMENT, "expects at least 2 inputs, got 1"},
      {8, MD_GENERAL_FAILURE, "input 0: TENSOR_QUANT8_ASYMM not supported"},
  };
  return cr_make_param_array(concat_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(concat_case *c, concatenation, check_rejects_with_message) {
  md_kernel_status st;
  md_status s = concat_check_case(c->which, &st);
  kt_assert_fail(s, st, c->code, c->want);
}

Test(concatenation, check_accepts_unknown_dims_and_axis) {
  md_kernel_status st;
  int32_t axis = -1;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 0, NULL), kt_si(MD_INT32, &axis)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(7, 9));
  kt_assert_ok(kt_check("CONCATENATION", in, 3, &out, 1, &st), st);
  in[2] = kt_si(MD_INT32, NULL);
  kt_assert_ok(kt_check("CONCATENATION", in, 3, &out, 1, &st), st);
}

Test(concatenation, shape_rejects_mismatched_dims) {
  float x[8] = {0};
  int32_t axis = 0;
  md_tensor t[3] = {kt_f32(2, D(1, 2), x), kt_f32(2, D(1, 3), x), kt_i32(&axis)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("CONCATENATION", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 dims [1,3] and input 0 dims [1,2] differ on axis 1 (concatenating "
                 "along axis 0)");
  t[1] = kt_f32(1, D(2), x);
  kt_assert_fail(kt_shape("CONCATENATION", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 has rank 1, input 0 has rank 2");
  t[1] = kt_f32(2, D(1, 2), x);
  axis = 2;
  kt_assert_fail(kt_shape("CONCATENATION", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (axis) is 2; must be in [-2, 2)");
}

Test(concatenation, run_refuses_too_small_output_and_input) {
  float a[] = {1, 2}, b[] = {3, 4}, out[4] = {0};
  int32_t axis = 0;
  md_tensor t[3] = {kt_f32(1, D(2), a), kt_f32(1, D(2), b), kt_i32(&axis)};
  md_tensor o = kt_out(out, 12);
  md_kernel_status st;
  kt_assert_fail(kt_exec("CONCATENATION", t, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 12 bytes, its dims [4] need 16");
  o.bytes = 16;
  t[1].bytes = 7;
  kt_assert_fail(kt_run("CONCATENATION", t, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "input 1 buffer is 7 bytes");
  for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], 0.0f, 0);
}
