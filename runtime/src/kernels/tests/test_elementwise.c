/* test_elementwise.c - ADD, SUB, MUL and RELU: numerics (broadcasting, every activation),
 * prepare-time checks, execute-time shapes, and run() refusing buffers that do not fit. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "ktest.h"

/* Runs a binary op on float32 tensors a (ra dims da) and b with activation act; out gets the
 * result, shp its shape. */
static md_status binop(const char *op, uint32_t ra, const uint32_t *da, const float *a,
                       uint32_t rb, const uint32_t *db, const float *b, int32_t act, float *out,
                       uint64_t out_bytes, md_tensor *res, md_kernel_status *st) {
  md_tensor in[3] = {kt_f32(ra, da, (void *)a), kt_f32(rb, db, (void *)b), kt_i32(&act)};
  *res = kt_out(out, out_bytes);
  return kt_exec(op, in, 3, res, st);
}

/* ---- numerics -------------------------------------------------------------------------- */

Test(elementwise, add_same_shape) {
  const float a[] = {1, 2, 3, 4}, b[] = {10, 20, 30, 40}, want[] = {11, 22, 33, 44};
  float out[4];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("ADD", 2, D(2, 2), a, 2, D(2, 2), b, 0, out, sizeof out, &r, &st), st);
  cr_assert_eq(r.rank, 2);
  kt_assert_floats(out, want, 4, 0);
}

Test(elementwise, add_broadcasts_2x1x3_with_4x1) {
  const float a[] = {1, 2, 3, 4, 5, 6};        /* [2,1,3] */
  const float b[] = {10, 20, 30, 40};          /* [4,1] */
  const float want[] = {11, 12, 13, 21, 22, 23, 31, 32, 33, 41, 42, 43,   /* [2,4,3] */
                        14, 15, 16, 24, 25, 26, 34, 35, 36, 44, 45, 46};
  float out[24];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("ADD", 3, D(2, 1, 3), a, 2, D(4, 1), b, 0, out, sizeof out, &r, &st), st);
  cr_assert_eq(r.rank, 3);
  cr_assert_eq(r.dims[0], 2);
  cr_assert_eq(r.dims[1], 4);
  cr_assert_eq(r.dims[2], 3);
  kt_assert_floats(out, want, 24, 0);
}

Test(elementwise, sub_broadcasts_row_vector) {
  const float a[] = {10, 20, 30, 40, 50, 60}, b[] = {1, 2, 3}, want[] = {9, 18, 27, 39, 48, 57};
  float out[6];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("SUB", 2, D(2, 3), a, 1, D(3), b, 0, out, sizeof out, &r, &st), st);
  kt_assert_floats(out, want, 6, 0);
}

Test(elementwise, sub_broadcasts_first_operand) {
  const float a[] = {1, 2, 3}, b[] = {10, 20, 30, 1, 1, 1}, want[] = {-9, -18, -27, 0, 1, 2};
  float out[6];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("SUB", 1, D(3), a, 2, D(2, 3), b, 0, out, sizeof out, &r, &st), st);
  kt_assert_floats(out, want, 6, 0);
}

Test(elementwise, mul_broadcasts_column_with_row) {
  const float a[] = {2, 3}, b[] = {1, 10, 100}, want[] = {2, 20, 200, 3, 30, 300};
  float out[6];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("MUL", 2, D(2, 1), a, 2, D(1, 3), b, 0, out, sizeof out, &r, &st), st);
  cr_assert_eq(r.dims[0], 2);
  cr_assert_eq(r.dims[1], 3);
  kt_assert_floats(out, want, 6, 0);
}

Test(elementwise, add_broadcasts_rank1_into_rank4) {
  const float a[] = {5}, b[] = {1, 2, 3, 4}, want[] = {6, 7, 8, 9};
  float out[4];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("ADD", 1, D(1), a, 4, D(1, 2, 1, 2), b, 0, out, sizeof out, &r, &st), st);
  cr_assert_eq(r.rank, 4);
  cr_assert_eq(r.dims[1], 2);
  cr_assert_eq(r.dims[3], 2);
  kt_assert_floats(out, want, 4, 0);
}

Test(elementwise, add_rank8_broadcast) {
  float a[2] = {1, 2}, b[2] = {10, 20}, out[4];
  const float want[] = {11, 21, 12, 22};
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("ADD", 8, D(1, 1, 1, 1, 1, 1, 2, 1), a, 1, D(2), b, 0, out, sizeof out, &r,
                     &st), st);
  cr_assert_eq(r.rank, 8);
  kt_assert_floats(out, want, 4, 0);
}

typedef struct act_case {
  int32_t act;
  float want[6];
} act_case;

ParameterizedTestParameters(elementwise, each_fused_activation) {
  static act_case cases[] = {
      {0, {-2, -0.5f, 0, 0.5f, 3, 7}},
      {1, {0, 0, 0, 0.5f, 3, 7}},
      {2, {-1, -0.5f, 0, 0.5f, 1, 1}},
      {3, {0, 0, 0, 0.5f, 3, 6}},
  };
  return cr_make_param_array(act_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(act_case *c, elementwise, each_fused_activation) {
  const float x[] = {-2, -0.5f, 0, 0.5f, 3, 7}, zero[] = {0};
  float out[6];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("ADD", 1, D(6), x, 1, D(1), zero, c->act, out, sizeof out, &r, &st), st);
  kt_assert_floats(out, c->want, 6, 0);
}

Test(elementwise, activation_applies_after_mul) {
  const float a[] = {1, 2, 3}, b[] = {-1, 2, 3}, want[] = {0, 4, 6};
  float out[3];
  md_tensor r;
  md_kernel_status st;
  kt_assert_ok(binop("MUL", 1, D(3), a, 1, D(3), b, 3, out, sizeof out, &r, &st), st);
  kt_assert_floats(out, want, 3, 0);
}

Test(elementwise, activation_propagates_nan) {
  const float a[] = {NAN, 1}, b[] = {0, 0};
  float out[2];
  md_tensor r;
  md_kernel_status st;
  for (int32_t act = 1; act <= 3; act++) {
    kt_assert_ok(binop("ADD", 1, D(2), a, 1, D(2), b, act, out, sizeof out, &r, &st), st);
    cr_assert(isnan(out[0]), "activation %d", act);
    cr_assert_float_eq(out[1], 1.0f, 0);
  }
}

Test(elementwise, relu_numerics_and_nan) {
  float x[] = {-3, -0.25f, 0, 0.25f, 9, NAN}, out[6];
  const float want[] = {0, 0, 0, 0.25f, 9};
  md_tensor in = kt_f32(2, D(2, 3), x), o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RELU", &in, 1, &o, &st), st);
  cr_assert_eq(o.rank, 2);
  kt_assert_floats(out, want, 5, 0);
  cr_assert(isnan(out[5]));
}

Test(elementwise, unaligned_buffers_work) {
  /* Request offsets need not be 4-byte aligned: the kernels must not assume it. */
  _Alignas(16) unsigned char abuf[4 * 3 + 1], bbuf[4 * 3 + 3], obuf[4 * 3 + 2];
  const float a[] = {1, 2, 3}, b[] = {0.5f, 0.25f, 0.125f}, want[] = {1.5f, 2.25f, 3.125f};
  memcpy(abuf + 1, a, sizeof a);
  memcpy(bbuf + 3, b, sizeof b);
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(1, D(3), abuf + 1), kt_f32(1, D(3), bbuf + 3), kt_i32(&act)};
  md_tensor o = kt_out(obuf + 2, 12);
  md_kernel_status st;
  kt_assert_ok(kt_exec("ADD", in, 3, &o, &st), st);
  float got[3];
  memcpy(got, obuf + 2, sizeof got);
  kt_assert_floats(got, want, 3, 0);
}

/* ---- check() at prepare ---------------------------------------------------------------- */

typedef struct check_case {
  int which;
  md_status code;
  char want[160];
} check_case;

/* Builds an ADD signature broken in one way and runs check(). */
static md_status add_check_case(int which, md_kernel_status *st) {
  static const int32_t act0 = 0, act7 = 7;
  /* Dims used inside the switch live here: a compound literal there would die with it. */
  static const uint32_t d1[] = {1}, d4[] = {4}, d25[] = {2, 5}, d123[] = {1, 2, 3},
                        d9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)), kt_si(MD_INT32, &act0)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  uint32_t n_in = 3;
  switch (which) {
  case 0: in[2] = kt_ti(MD_TENSOR_FLOAT32, 1, d1); break;
  case 1: in[2] = kt_si(MD_INT32, &act7); break;
  case 2: in[1].type = MD_TENSOR_INT32; break;
  case 3: in[1] = kt_ti(MD_TENSOR_FLOAT32, 1, d4); break;
  case 4: out = kt_ti(MD_TENSOR_FLOAT32, 2, d25); break;
  case 5: out = kt_ti(MD_TENSOR_FLOAT32, 3, d123); break;
  case 6: n_in = 2; break;
  case 7: in[0].type = MD_INT32; in[0].rank = 0; break;
  case 8: in[0].type = in[1].type = out.type = MD_TENSOR_QUANT8_ASYMM; break;
  case 9: /* invalid beats unsupported */
    in[0].type = in[1].type = out.type = MD_TENSOR_QUANT8_ASYMM;
    in[2] = kt_si(MD_INT32, &act7);
    break;
  case 10: out.type = MD_TENSOR_FLOAT16; break;
  case 11: in[2].rank = 1; in[2].dims = d1; break;
  case 12: in[1].lifetime = MD_NO_VALUE; break;
  case 13: in[0] = kt_ti(MD_TENSOR_FLOAT32, 9, d9); break;
  case 14: in[0].type = in[1].type = out.type = MD_TENSOR_FLOAT16; break;
  }
  return kt_check("ADD", in, n_in, &out, 1, st);
}

ParameterizedTestParameters(elementwise, add_check_rejects_with_message) {
  static check_case cases[] = {
      {0, MD_INVALID_ARGUMENT, "input 2 (fused activation) must be INT32, got TENSOR_FLOAT32"},
      {1, MD_INVALID_ARGUMENT, "input 2 (fused activation) is 7; must be 0 (none)"},
      {2, MD_INVALID_ARGUMENT,
       "input 1 has type TENSOR_INT32, must match input 0 (TENSOR_FLOAT32)"},
      {3, MD_INVALID_ARGUMENT, "input 0 dims [2,3] and input 1 dims [4] do not broadcast"},
      {4, MD_INVALID_ARGUMENT, "output 0 dims [2,5] conflict with [2,3]"},
      {5, MD_INVALID_ARGUMENT, "output 0 has rank 3, the inputs imply rank 2"},
      {6, MD_INVALID_ARGUMENT, "expects 3 inputs, got 2"},
      {7, MD_INVALID_ARGUMENT, "input 0 must be TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, "
                               "TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED, got INT32"},
      {8, MD_GENERAL_FAILURE, "input 0: TENSOR_QUANT8_ASYMM not supported"},
      {9, MD_INVALID_ARGUMENT, "input 2 (fused activation) is 7"},
      {10, MD_INVALID_ARGUMENT, "output 0 has type TENSOR_FLOAT16, must match input 0"},
      {11, MD_INVALID_ARGUMENT, "input 2 (fused activation) must be a scalar, got rank 1"},
      {12, MD_INVALID_ARGUMENT, "input 1 is required, got no value"},
      {13, MD_INVALID_ARGUMENT, "input 0 has rank 9, more than 8"},
      {14, MD_GENERAL_FAILURE, "input 0: TENSOR_FLOAT16 not supported"},
  };
  return cr_make_param_array(check_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(check_case *c, elementwise, add_check_rejects_with_message) {
  md_kernel_status st;
  md_status s = add_check_case(c->which, &st);
  kt_assert_fail(s, st, c->code, c->want);
}

Test(elementwise, add_check_accepts_unknown_dims_and_non_constant_activation) {
  md_kernel_status st;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 0)), kt_si(MD_INT32, NULL)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  kt_assert_ok(kt_check("ADD", in, 3, &out, 1, &st), st);
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL); /* unknown rank */
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_ok(kt_check("SUB", in, 3, &out, 1, &st), st);
  /* An unknown dim against 1 leaves the output dim unknown: any declared value is fine. */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 1, D(0));
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 1, D(1));
  out = kt_ti(MD_TENSOR_FLOAT32, 1, D(17));
  kt_assert_ok(kt_check("MUL", in, 3, &out, 1, &st), st);
}

Test(elementwise, add_check_unknown_dim_against_n_implies_n) {
  md_kernel_status st;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 1, D(0)), kt_ti(MD_TENSOR_FLOAT32, 1, D(4)),
                           kt_si(MD_INT32, NULL)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 1, D(5));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [5] conflict with [4]");
}

Test(elementwise, relu_check_rejects_int_and_reports_quant_unsupported) {
  md_kernel_status st;
  md_operand_info in = kt_ti(MD_TENSOR_INT32, 1, D(3)), out = kt_ti(MD_TENSOR_INT32, 1, D(3));
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 must be TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or "
                 "TENSOR_QUANT8_ASYMM_SIGNED, got TENSOR_INT32");
  in.type = out.type = MD_TENSOR_QUANT8_ASYMM_SIGNED;
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_GENERAL_FAILURE,
                 "TENSOR_QUANT8_ASYMM_SIGNED not supported");
  in.type = out.type = MD_TENSOR_FLOAT32;
  out.dims = D(4);
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [4] conflict with [3]");
}

/* ---- shape() at execute ---------------------------------------------------------------- */

Test(elementwise, shape_rejects_dims_that_do_not_broadcast) {
  float a[6] = {0}, b[4] = {0};
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(2, 3), a), kt_f32(1, D(4), b), kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("ADD", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 dims [2,3] and input 1 dims [4] do not broadcast "
                 "(output axis 1: 3 vs 4)");
}

Test(elementwise, shape_rejects_activation_out_of_range) {
  float a[2] = {0};
  int32_t act = 4;
  md_tensor in[3] = {kt_f32(1, D(2), a), kt_f32(1, D(2), a), kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("MUL", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (fused activation) is 4");
  act = -1;
  kt_assert_fail(kt_shape("MUL", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (fused activation) is -1");
}

Test(elementwise, shape_rejects_unknown_dims) {
  float a[2] = {0};
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(2, 0), a), kt_f32(1, D(2), a), kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("ADD", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 dims [2,0] are not fully known at execution");
  in[0].rank = 0;
  kt_assert_fail(kt_shape("ADD", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 has unknown rank at execution");
}

Test(elementwise, shape_rejects_missing_activation_value) {
  float a[2] = {0};
  md_tensor in[3] = {kt_f32(1, D(2), a), kt_f32(1, D(2), a), kt_i32(NULL)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("ADD", in, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (fused activation) has no value");
}

/* ---- run() refuses buffers that do not fit ------------------------------------------- */

Test(elementwise, run_refuses_too_small_output_and_writes_nothing) {
  float a[6] = {1, 2, 3, 4, 5, 6}, out[6] = {-7, -7, -7, -7, -7, -7};
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(2, 3), a), kt_f32(2, D(2, 3), a), kt_i32(&act)};
  md_tensor o = kt_out(out, 20);
  md_kernel_status st;
  kt_assert_fail(kt_exec("ADD", in, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 20 bytes, its dims [2,3] need 24");
  for (int i = 0; i < 6; i++) cr_assert_float_eq(out[i], -7.0f, 0);
}

Test(elementwise, run_refuses_too_small_input) {
  float a[6] = {0}, out[6];
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(2, 3), a), kt_f32(2, D(2, 3), a), kt_i32(&act)};
  in[1].bytes = 23;
  md_tensor o = kt_out(out, sizeof out);
  md_kernel_status st;
  kt_assert_fail(kt_exec("SUB", in, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "input 1 buffer is 23 bytes, its dims [2,3] need 24");
}

Test(elementwise, run_refuses_output_dims_other_than_computed) {
  float a[6] = {0}, out[6];
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(2, 3), a), kt_f32(2, D(2, 3), a), kt_i32(&act)};
  md_tensor o = kt_f32(2, D(3, 2), out);
  md_kernel_status st;
  kt_assert_fail(kt_run("ADD", in, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 dims [3,2] differ from the computed [2,3]");
}

Test(elementwise, run_refuses_null_output_buffer) {
  float a[2] = {0};
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(1, D(2), a), kt_f32(1, D(2), a), kt_i32(&act)};
  md_tensor o = kt_f32(1, D(2), NULL);
  md_kernel_status st;
  kt_assert_fail(kt_run("ADD", in, 3, &o, &st), st, MD_GENERAL_FAILURE, "output 0 has no buffer");
}

Test(elementwise, run_reports_unsupported_type) {
  unsigned char q[4] = {0};
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(1, D(4), q), kt_f32(1, D(4), q), kt_i32(&act)};
  in[0].type = in[1].type = MD_TENSOR_QUANT8_ASYMM;
  md_tensor o = kt_f32(1, D(4), q);
  o.type = MD_TENSOR_QUANT8_ASYMM;
  md_kernel_status st;
  kt_assert_fail(kt_run("ADD", in, 3, &o, &st), st, MD_GENERAL_FAILURE,
                 "input 0: TENSOR_QUANT8_ASYMM not supported");
}

Test(elementwise, relu_run_refuses_too_small_output) {
  float x[4] = {0}, out[4];
  md_tensor in = kt_f32(1, D(4), x), o = kt_out(out, 15);
  md_kernel_status st;
  kt_assert_fail(kt_exec("RELU", &in, 1, &o, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 15 bytes");
}
