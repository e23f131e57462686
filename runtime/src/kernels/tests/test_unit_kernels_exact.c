/* test_unit_kernels_exact.c - the built-in kernels' checks, shapes and results at their
 * boundaries, at every operand position of every check, and at limits the driver ABI cannot
 * reach (element counts past 2^32 and 2^61, a dim sum past UINT32_MAX, no scratch memory). */

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels_int.h"
#include "ktest.h"

/* ---- kernels at limits the ABI cannot reach ------------------------------------------- */

Test(kexact, fully_connected_batch_past_uint32_is_refused) {
  int32_t act = 0;
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 3, D(1u << 20, 1u << 20, 1u << 10)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 1u << 10)),
                           kt_ti(MD_TENSOR_FLOAT32, 1, D(4)), kt_si(MD_INT32, &act)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  md_kernel_status st;
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "does not fit a dim");
  /* exactly UINT32_MAX + 1 rows fail, UINT32_MAX... rows would not: 2^32 / 2^0 */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 16, 1u << 16));
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 1));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "batch 4294967296 does not fit a dim");
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 16, 1u << 16));
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 2));
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 31, 4));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 30, 4));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 0");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 31, 5));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 1");

  /* execute time: the same batch check, then the output's 2^61 limit */
  float x = 0, w = 0, b[4] = {0};
  md_tensor t[4] = {kt_f32(2, D(1u << 16, 1u << 16), &x), kt_f32(2, D(4, 1), &w),
                    kt_f32(1, D(4), b), kt_i32(&act)};
  md_tensor_shape shp;
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "does not fit a dim");
  t[1] = kt_f32(2, D(4, 2), &w);
  kt_assert_ok(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st);
  cr_assert_eq(shp.rank, 2);
  cr_assert_eq(shp.dims[0], 1u << 31);
  cr_assert_eq(shp.dims[1], 4);
}

Test(kexact, fully_connected_check_infers_units_from_bias) {
  int32_t act = 0;
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 1, D(5)), kt_si(MD_INT32, &act)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  md_kernel_status st;
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 1");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 5));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 5));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 0");
  /* units known from weights, bias dim unknown */
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 3));
  in[2] = kt_ti(MD_TENSOR_FLOAT32, 1, D(0));
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 5));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [2,5] conflict with [2,4]");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  /* input of unknown rank: batch unknown */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(7, 4));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
  /* weights input_size unknown: nothing to divide by */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 5));
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 0));
  kt_assert_ok(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st);
  /* a quantized input with a TENSOR_INT32 bias: valid, unsupported */
  in[0] = kt_ti(MD_TENSOR_QUANT8_ASYMM, 2, D(2, 3));
  in[1] = kt_ti(MD_TENSOR_QUANT8_ASYMM, 2, D(4, 3));
  in[2] = kt_ti(MD_TENSOR_INT32, 1, D(4));
  out = kt_ti(MD_TENSOR_QUANT8_ASYMM, 2, D(2, 4));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_GENERAL_FAILURE,
                 "input 0 (input): TENSOR_QUANT8_ASYMM not supported");
  in[2] = kt_ti(MD_TENSOR_QUANT8_ASYMM, 1, D(4));
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (bias) must be TENSOR_INT32 for a TENSOR_QUANT8_ASYMM input, got "
                 "TENSOR_QUANT8_ASYMM");
}

Test(kexact, fully_connected_shape_rules_at_execution) {
  int32_t act = 1;
  float x[6] = {0}, w[12] = {0}, b[4] = {0};
  md_tensor_shape shp;
  md_kernel_status st;
  md_tensor t[4] = {kt_f32(1, D(6), x), kt_f32(2, D(4, 3), w), kt_f32(1, D(4), b),
                    kt_i32(&act)};
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 (input) must have rank >= 2, got 1");
  t[0] = kt_f32(2, D(2, 3), x);
  t[1] = kt_f32(3, D(4, 3, 1), w);
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (weights) must have rank 2, got 3");
  t[1] = kt_f32(2, D(4, 3), w);
  t[2] = kt_f32(2, D(4, 1), b);
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (bias) must have rank 1, got 2");
  t[2] = kt_f32(1, D(3), b);
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (bias) dims [3] do not match units 4");
  t[2] = kt_f32(1, D(4), b);
  t[0] = kt_f32(2, D(2, 2), x);
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 (input) dims [2,2] hold 4 elements, not a multiple of input_size 3 "
                 "(input 1 (weights) dims [4,3])");
  t[0] = kt_f32(3, D(1, 2, 3), x);
  kt_assert_ok(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st);
  cr_assert_eq(shp.rank, 2);
  cr_assert_eq(shp.dims[0], 2);
  cr_assert_eq(shp.dims[1], 4);
  int32_t bad = 4;
  t[3] = kt_i32(&bad);
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 3 (fused activation) is 4");
  /* run: the bias buffer one element short */
  t[3] = kt_i32(&act);
  t[0] = kt_f32(2, D(2, 3), x);
  t[2] = kt_f32(1, D(4), b);
  t[2].bytes = 12;
  float o[8];
  md_tensor ot = kt_f32(2, D(2, 4), o);
  kt_assert_fail(kt_run("FULLY_CONNECTED", t, 4, &ot, &st), st, MD_GENERAL_FAILURE,
                 "input 2 buffer is 12 bytes");
  t[2].bytes = 16;
  t[0].bytes = 20;
  kt_assert_fail(kt_run("FULLY_CONNECTED", t, 4, &ot, &st), st, MD_GENERAL_FAILURE,
                 "input 0 buffer is 20 bytes");
}

Test(kexact, fully_connected_exact_values_every_activation) {
  /* in [2,3], weights [2,3], bias [2]: pre-activation values -3.5, 0.5, 7, -0.75 */
  float x[6] = {1, 2, 3, -1, 0.5f, 2};
  float w[6] = {1, -1, -0.5f, 0.5f, 0.25f, 0};
  float b[2] = {-0.5f, -0.5f};
  /* row 0: 1-2-1.5-0.5 = -3 ; 0.5+0.5+0-0.5 = 0.5
   * row 1: -1-0.5-1-0.5 = -3 ; -0.5+0.125+0-0.5 = -0.875 */
  const float pre[4] = {-3, 0.5f, -3, -0.875f};
  for (int32_t act = 0; act <= 3; act++) {
    float o[4] = {99, 99, 99, 99};
    md_tensor t[4] = {kt_f32(2, D(2, 3), x), kt_f32(2, D(2, 3), w), kt_f32(1, D(2), b),
                      kt_i32(&act)};
    md_tensor ot = kt_out(o, sizeof o);
    md_kernel_status st;
    kt_assert_ok(kt_exec("FULLY_CONNECTED", t, 4, &ot, &st), st);
    for (int i = 0; i < 4; i++) {
      float want = pre[i];
      if (act == 1) want = want > 0 ? want : 0;
      if (act == 2) want = want < -1 ? -1 : (want > 1 ? 1 : want);
      if (act == 3) want = want < 0 ? 0 : (want > 6 ? 6 : want);
      cr_assert_float_eq(o[i], want, 1e-6, "act %d element %d: %g", act, i, (double)o[i]);
    }
  }
}

Test(kexact, softmax_axis_and_beta_at_execution) {
  float x[6] = {1, 2, 3, 4, 5, 6}, o[6];
  float beta = 1;
  int32_t axis = 2;
  md_tensor t[3] = {kt_f32(2, D(2, 3), x), kt_f32s(&beta), kt_i32(&axis)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (axis) is 2; must be in [-2, 2)");
  axis = -3;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (axis) is -3");
  axis = -2; /* axis 0: columns */
  md_tensor ot = kt_out(o, sizeof o);
  kt_assert_ok(kt_exec("SOFTMAX", t, 3, &ot, &st), st);
  float e3 = 1.0f / (1.0f + expf(3.0f));
  float want[6] = {e3, e3, e3, 1 - e3, 1 - e3, 1 - e3};
  kt_assert_floats(o, want, 6, 1e-6f);
  beta = NAN;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT, "beta");
  beta = INFINITY;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT, "beta");
  beta = -INFINITY;
  kt_assert_fail(kt_shape("SOFTMAX", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT, "beta");
  beta = 1e-30f;
  kt_assert_ok(kt_shape("SOFTMAX", t, 3, &shp, &st), st);
  /* a single element along the axis is 1 */
  beta = 2;
  axis = 1;
  float y[3] = {-5, 0, 7}, oy[3] = {0};
  md_tensor t1[3] = {kt_f32(2, D(3, 1), y), kt_f32s(&beta), kt_i32(&axis)};
  md_tensor oyt = kt_out(oy, sizeof oy);
  kt_assert_ok(kt_exec("SOFTMAX", t1, 3, &oyt, &st), st);
  float ones[3] = {1, 1, 1};
  kt_assert_floats(oy, ones, 3, 0);
}

Test(kexact, softmax_check_axis_ends) {
  float beta = 1;
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  md_kernel_status st;
  for (int32_t a = -4; a <= 3; a++) {
    md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 3, D(2, 3, 4)), kt_si(MD_FLOAT32, &beta),
                             kt_si(MD_INT32, &a)};
    md_status s = kt_check("SOFTMAX", in, 3, &out, 1, &st);
    cr_assert_eq(s, a >= -3 && a <= 2 ? MD_NONE : MD_INVALID_ARGUMENT, "axis %d: %s", a,
                 st.message);
  }
  /* unknown rank: the axis cannot be judged yet */
  int32_t a = 7;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 0, NULL), kt_si(MD_FLOAT32, &beta),
                           kt_si(MD_INT32, &a)};
  kt_assert_ok(kt_check("SOFTMAX", in, 3, &out, 1, &st), st);
  /* a model-input beta is judged at execution only */
  in[1] = kt_si(MD_FLOAT32, NULL);
  kt_assert_ok(kt_check("SOFTMAX", in, 3, &out, 1, &st), st);
  in[2] = kt_si(MD_FLOAT32, &beta);
  kt_assert_fail(kt_check("SOFTMAX", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 (axis) must be INT32, got FLOAT32");
  in[1] = kt_si(MD_INT32, &a);
  kt_assert_fail(kt_check("SOFTMAX", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (beta) must be FLOAT32, got INT32");
}

Test(kexact, reshape_check_constant_shape_rules) {
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  md_kernel_status st;
  int32_t sh[9] = {3, -1, 1, 1, 1, 1, 1, 1, 1};
  md_operand_info in[2] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ci(MD_TENSOR_INT32, 1, D(2), sh, 8)};
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 2));
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 3));
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 1");
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  in[1].length = 0;
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "constant is 0 bytes; must hold 1..8 INT32 entries");
  in[1].length = 6;
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "constant is 6 bytes");
  in[1].length = 36;
  in[1].dims = D(9);
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "has 9 entries; the output rank must be 1..8");
  in[1].rank = 0; /* dims unknown: the constant's length says 9 entries */
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "constant is 36 bytes; must hold 1..8");
  in[1].length = 12;
  in[1].rank = 1;
  in[1].dims = D(2);
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "constant has 3 entries, its dims say 2");
  /* the constant's length decides the rank when its dims are unknown */
  in[1].rank = 1;
  in[1].dims = D(0);
  in[1].length = 8;
  out = kt_ti(MD_TENSOR_FLOAT32, 3, D(3, 2, 1));
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "has rank 3, the inputs imply rank 2");
  /* 8 entries: the most */
  int32_t sh8[8] = {1, 1, 1, 1, 1, 1, 2, 3};
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(8), sh8, 32);
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  /* an unknown input count leaves -1 unknown and accepts any count */
  int32_t big[2] = {5, -1};
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3));
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(2), big, 8);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(5, 9));
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(4, 9));
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 0");
  /* a shape operand of rank 2, or one of another type */
  in[1] = kt_ci(MD_TENSOR_INT32, 2, D(1, 2), big, 8);
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) must have rank 1, got 2");
}

Test(kexact, reshape_counts_past_32_and_64_bits) {
  md_kernel_status st;
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  /* 2^60 elements into [-1]: the inferred dim does not fit 32 bits */
  int32_t one[1] = {-1};
  md_operand_info in[2] = {kt_ti(MD_TENSOR_FLOAT32, 3, D(1u << 20, 1u << 20, 1u << 20)),
                           kt_ci(MD_TENSOR_INT32, 1, D(1), one, 4)};
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "do not fit");
  /* 2^32 elements into [-1, 2]: 2^31 fits */
  int32_t two[2] = {-1, 2};
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 16, 1u << 16));
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(2), two, 8);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(1u << 31, 2));
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
  /* UINT32_MAX + 1 elements into [-1]: one too many */
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(1), one, 4);
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "do not fit");
  /* the shape's own product overflows 64 bits */
  int32_t huge[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(3), huge, 12);
  kt_assert_fail(kt_check("RESHAPE", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "element count overflows");
  int32_t fits[2] = {INT32_MAX, INT32_MAX};
  in[1] = kt_ci(MD_TENSOR_INT32, 1, D(2), fits, 8);
  kt_assert_ok(kt_check("RESHAPE", in, 2, &out, 1, &st), st);
}

Test(kexact, reshape_shape_operand_at_execution) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  int32_t sh[2] = {-1, 2};
  md_tensor t[2] = {kt_f32(2, D(2, 3), x), kt_i32v(2, sh)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_ok(kt_shape("RESHAPE", t, 2, &shp, &st), st);
  cr_assert_eq(shp.rank, 2);
  cr_assert_eq(shp.dims[0], 3);
  cr_assert_eq(shp.dims[1], 2);
  t[1].type = MD_TENSOR_FLOAT32;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) must be TENSOR_INT32, got TENSOR_FLOAT32");
  t[1] = kt_i32v(2, sh);
  t[1].rank = 2;
  t[1].dims[0] = 1;
  t[1].dims[1] = 2;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) must have rank 1, got 2");
  int32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 2, 3};
  t[1] = kt_i32v(9, nine);
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "has 9 entries");
  t[1] = kt_i32v(8, nine + 1);
  kt_assert_ok(kt_shape("RESHAPE", t, 2, &shp, &st), st);
  cr_assert_eq(shp.rank, 8);
  t[1] = kt_i32v(2, sh);
  t[1].bytes = 7;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "value is 7 bytes, its 2 entries need 8");
  t[1].bytes = 8;
  t[1].data = NULL;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) has no value");
  /* run refuses an output of other dims and a short input buffer */
  t[1] = kt_i32v(2, sh);
  float o[6];
  md_tensor ot = kt_f32(2, D(2, 3), o);
  kt_assert_fail(kt_run("RESHAPE", t, 2, &ot, &st), st, MD_GENERAL_FAILURE, "differ");
  ot = kt_f32(2, D(3, 2), o);
  t[0].bytes = 20;
  kt_assert_fail(kt_run("RESHAPE", t, 2, &ot, &st), st, MD_GENERAL_FAILURE, "input 0 buffer");
  t[0].bytes = 24;
  kt_assert_ok(kt_run("RESHAPE", t, 2, &ot, &st), st);
  kt_assert_floats(o, x, 6, 0);
}

Test(kexact, concatenation_axis_sum_past_uint32) {
  int32_t axis = 0;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 1, D(1u << 31)),
                           kt_ti(MD_TENSOR_FLOAT32, 1, D(1u << 31)), kt_si(MD_INT32, &axis)};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  md_kernel_status st;
  kt_assert_fail(kt_check("CONCATENATION", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "inputs sum to 4294967296 along axis 0, more than a dim holds");
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 1, D((1u << 31) - 1));
  out = kt_ti(MD_TENSOR_FLOAT32, 1, D(UINT32_MAX));
  kt_assert_ok(kt_check("CONCATENATION", in, 3, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 1, D(UINT32_MAX - 1));
  kt_assert_fail(kt_check("CONCATENATION", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "conflict");

  float a = 0;
  md_tensor t[3] = {kt_f32(1, D(1u << 31), &a), kt_f32(1, D(1u << 31), &a), kt_i32(&axis)};
  md_tensor_shape shp;
  kt_assert_fail(kt_shape("CONCATENATION", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "inputs 0..1 sum to 4294967296 along axis 0");
  t[1] = kt_f32(1, D((1u << 31) - 1), &a);
  kt_assert_ok(kt_shape("CONCATENATION", t, 3, &shp, &st), st);
  cr_assert_eq(shp.rank, 1);
  cr_assert_eq(shp.dims[0], UINT32_MAX);
}

Test(kexact, concatenation_check_rules) {
  int32_t axis = 1;
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  md_kernel_status st;
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 0, NULL), kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                           kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 4)), kt_si(MD_INT32, &axis)};
  /* rank from input 1; input 0 unknown; dims of axis 0 from input 1 */
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 0));
  kt_assert_ok(kt_check("CONCATENATION", in, 4, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 0));
  kt_assert_fail(kt_check("CONCATENATION", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 0");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 99));
  kt_assert_ok(kt_check("CONCATENATION", in, 4, &out, 1, &st), st); /* input 0's axis dim unknown */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 1));
  kt_assert_fail(kt_check("CONCATENATION", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "axis 1");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 8));
  kt_assert_ok(kt_check("CONCATENATION", in, 4, &out, 1, &st), st);
  in[2] = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 4));
  kt_assert_fail(kt_check("CONCATENATION", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 dims [3,4] and input 0 dims [2,1] differ on axis 0");
  in[2] = kt_ti(MD_TENSOR_FLOAT32, 3, D(2, 4, 1));
  kt_assert_fail(kt_check("CONCATENATION", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 has rank 3, input 0 has rank 2");
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  kt_assert_fail(kt_check("CONCATENATION", in, 4, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 2 has rank 3, input 1 has rank 2");
  /* axis ends */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  in[2] = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  out = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  for (int32_t a = -3; a <= 2; a++) {
    axis = a;
    md_status want = a >= -2 && a <= 1 ? MD_NONE : MD_INVALID_ARGUMENT;
    cr_assert_eq(kt_check("CONCATENATION", in, 4, &out, 1, &st), want, "axis %d: %s", a,
                 st.message);
  }
  /* a model-input axis: not judged at prepare */
  in[3] = kt_si(MD_INT32, NULL);
  kt_assert_ok(kt_check("CONCATENATION", in, 4, &out, 1, &st), st);
  /* every input of unknown rank: nothing to judge */
  axis = 9;
  in[0] = in[1] = in[2] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  in[3] = kt_si(MD_INT32, &axis);
  kt_assert_ok(kt_check("CONCATENATION", in, 4, &out, 1, &st), st);
}

Test(kexact, concatenation_many_inputs_without_scratch) {
  enum { N = 12 };
  float data[N][2], o[2 * N];
  md_tensor t[N + 1];
  int32_t axis = 0;
  for (int i = 0; i < N; i++) {
    data[i][0] = (float)(2 * i);
    data[i][1] = (float)(2 * i + 1);
    t[i] = kt_f32(1, D(2), data[i]);
  }
  t[N] = kt_i32(&axis);
  md_tensor ot = kt_out(o, sizeof o);
  md_kernel_status st;
  kt_assert_ok(kt_exec("CONCATENATION", t, N + 1, &ot, &st), st);
  for (int i = 0; i < 2 * N; i++) cr_assert_eq(o[i], (float)i);
  cr_assert_eq(kt_run_limit("CONCATENATION", t, N + 1, &ot, &st, 0),
               MD_RESOURCE_EXHAUSTED_TRANSIENT);
  kt_assert_names(st, "no scratch memory for 13 input views");
  /* 9 inputs (8 tensors and the axis) stay on the stack */
  md_tensor t9[9];
  for (int i = 0; i < 8; i++) t9[i] = t[i];
  t9[8] = kt_i32(&axis);
  md_tensor ot9 = kt_f32(1, D(16), o);
  kt_assert_ok(kt_run_limit("CONCATENATION", t9, 9, &ot9, &st, 0), st);
  md_tensor t10[10];
  for (int i = 0; i < 9; i++) t10[i] = t[i];
  t10[9] = kt_i32(&axis);
  md_tensor ot10 = kt_f32(1, D(18), o);
  cr_assert_eq(kt_run_limit("CONCATENATION", t10, 10, &ot10, &st, 0),
               MD_RESOURCE_EXHAUSTED_TRANSIENT);
}

Test(kexact, binary_check_broadcast_with_unknown_dims) {
  int32_t act = 0;
  md_kernel_status st;
  md_operand_info in[3] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 1)),
                           kt_ti(MD_TENSOR_FLOAT32, 3, D(4, 1, 5)), kt_si(MD_INT32, &act)};
  /* axis 2: 1 vs 5 -> 5; axis 1: unknown vs 1 -> unknown; axis 0: 4 */
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 3, D(4, 7, 5));
  kt_assert_ok(kt_check("ADD", in, 3, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 3, D(4, 7, 6));
  kt_assert_fail(kt_check("SUB", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 2");
  out = kt_ti(MD_TENSOR_FLOAT32, 3, D(3, 7, 5));
  kt_assert_fail(kt_check("MUL", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 0");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(7, 5));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "has rank 2, the inputs imply rank 3");
  /* unknown dim against n > 1 must be n */
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 2));
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 6));
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 5));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 dims [0,2] and input 1 dims [3,6] do not broadcast (output axis 1: 2 vs "
                 "6)");
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 1));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [0,5] conflict with [3,6]");
  in[0] = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 6));
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 6));
  kt_assert_ok(kt_check("ADD", in, 3, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 6));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 0");
  /* one operand of unknown rank: nothing implied */
  in[1] = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  out = kt_ti(MD_TENSOR_FLOAT32, 1, D(9));
  kt_assert_ok(kt_check("ADD", in, 3, &out, 1, &st), st);
  /* types */
  in[1] = kt_ti(MD_TENSOR_FLOAT16, 2, D(3, 6));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 has type TENSOR_FLOAT16, must match input 0 (TENSOR_FLOAT32)");
  in[0] = kt_ti(MD_TENSOR_FLOAT16, 2, D(3, 6));
  out = kt_ti(MD_TENSOR_FLOAT16, 2, D(3, 6));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_GENERAL_FAILURE,
                 "input 0: TENSOR_FLOAT16 not supported");
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(3, 6));
  kt_assert_fail(kt_check("ADD", in, 3, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 has type TENSOR_FLOAT32, must match input 0 (TENSOR_FLOAT16)");
}

Test(kexact, binary_shape_broadcast_failure_names_the_axis) {
  int32_t act = 0;
  float x[12] = {0};
  md_tensor t[3] = {kt_f32(3, D(2, 2, 3), x), kt_f32(2, D(4, 3), x), kt_i32(&act)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_fail(kt_shape("ADD", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 0 dims [2,2,3] and input 1 dims [4,3] do not broadcast (output axis 1: 2 "
                 "vs 4)");
  t[0] = kt_f32(1, D(3), x);
  t[1] = kt_f32(3, D(2, 2, 4), x);
  kt_assert_fail(kt_shape("SUB", t, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "(output axis 2: 3 vs 4)");
  t[1] = kt_f32(3, D(2, 1, 3), x);
  kt_assert_ok(kt_shape("MUL", t, 3, &shp, &st), st);
  cr_assert_eq(shp.rank, 3);
  cr_assert_eq(shp.dims[0], 2);
  cr_assert_eq(shp.dims[1], 1);
  cr_assert_eq(shp.dims[2], 3);
}

Test(kexact, relu_check_and_shape_rules) {
  md_kernel_status st;
  md_operand_info in = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 3));
  kt_assert_ok(kt_check("RELU", &in, 1, &out, 1, &st), st);
  out = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 4));
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT, "axis 1");
  out = kt_ti(MD_TENSOR_QUANT8_ASYMM, 2, D(2, 3));
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "must match input 0");
  in = kt_ti(MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, D(2, 3));
  out = kt_ti(MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, D(2, 3));
  kt_assert_fail(kt_check("RELU", &in, 1, &out, 1, &st), st, MD_GENERAL_FAILURE,
                 "input 0: TENSOR_QUANT8_ASYMM_SIGNED not supported");

  float x[6] = {-1, 2, -3, 4, -5, 6};
  md_tensor t = kt_f32(2, D(2, 3), x);
  md_tensor_shape shp;
  kt_assert_ok(kt_shape("RELU", &t, 1, &shp, &st), st);
  cr_assert_eq(shp.rank, 2);
  cr_assert_eq(shp.dims[0], 2);
  cr_assert_eq(shp.dims[1], 3);
  t.dims[1] = 0;
  kt_assert_fail(kt_shape("RELU", &t, 1, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "not fully known");
  t = kt_f32(2, D(2, 3), x);
  t.bytes = 20;
  float o[6];
  md_tensor ot = kt_f32(2, D(2, 3), o);
  kt_assert_fail(kt_run("RELU", &t, 1, &ot, &st), st, MD_GENERAL_FAILURE, "input 0 buffer");
  t.bytes = 24;
  ot = kt_f32(2, D(3, 2), o);
  kt_assert_fail(kt_run("RELU", &t, 1, &ot, &st), st, MD_GENERAL_FAILURE, "differ");
}

/* ---- every operand position of every check ------------------------------------------- */

/* A valid float32 signature of each built-in; tests break one operand at a time. */
typedef struct kx_sig {
  const char *op;
  uint32_t n_in;
  md_operand_info in[4];
  md_operand_info out;
  int tensor[4];     /* which inputs are tensors */
} kx_sig;

static int32_t kx_zero = 0;
static float kx_one = 1.0f;
static int32_t kx_shape[2] = {3, 2};

static const uint32_t kx_d23[2] = {2, 3}, kx_d43[2] = {4, 3}, kx_d4[1] = {4}, kx_d24[2] = {2, 4},
                      kx_d32[2] = {3, 2}, kx_d2[1] = {2};

static void kx_sigs(kx_sig s[8]) {
  memset(s, 0, 8 * sizeof *s);
  const char *bin[3] = {"ADD", "SUB", "MUL"};
  for (int i = 0; i < 3; i++) {
    s[i] = (kx_sig){.op = bin[i], .n_in = 3,
                    .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23),
                           kt_si(MD_INT32, &kx_zero)},
                    .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), .tensor = {1, 1, 0}};
  }
  s[3] = (kx_sig){.op = "RELU", .n_in = 1, .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23)},
                  .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), .tensor = {1}};
  s[4] = (kx_sig){.op = "FULLY_CONNECTED", .n_in = 4,
                  .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), kt_ti(MD_TENSOR_FLOAT32, 2, kx_d43),
                         kt_ti(MD_TENSOR_FLOAT32, 1, kx_d4), kt_si(MD_INT32, &kx_zero)},
                  .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d24), .tensor = {1, 1, 1, 0}};
  s[5] = (kx_sig){.op = "SOFTMAX", .n_in = 3,
                  .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), kt_si(MD_FLOAT32, &kx_one),
                         kt_si(MD_INT32, &kx_zero)},
                  .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), .tensor = {1, 0, 0}};
  s[6] = (kx_sig){.op = "RESHAPE", .n_in = 2,
                  .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23),
                         kt_ci(MD_TENSOR_INT32, 1, kx_d2, kx_shape, 8)},
                  .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d32), .tensor = {1, 1}};
  s[7] = (kx_sig){.op = "CONCATENATION", .n_in = 3,
                  .in = {kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23), kt_ti(MD_TENSOR_FLOAT32, 2, kx_d23),
                         kt_si(MD_INT32, &kx_zero)},
                  .out = kt_ti(MD_TENSOR_FLOAT32, 2, kx_d43), .tensor = {1, 1, 0}};
}

Test(kexact, every_check_accepts_its_valid_signature) {
  kx_sig s[8];
  kx_sigs(s);
  for (int i = 0; i < 8; i++) {
    md_kernel_status st;
    cr_assert_eq(kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st), MD_NONE, "%s: %s",
                 s[i].op, st.message);
  }
}

Test(kexact, every_tensor_position_rejects_no_value_rank_9_and_missing_dims) {
  static const uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  kx_sig s[8];
  for (int i = 0; i < 8; i++) {
    for (uint32_t p = 0; p <= 4; p++) { /* p == 4: the output */
      kx_sigs(s);
      if (p < 4 && (p >= s[i].n_in || !s[i].tensor[p])) continue;
      md_operand_info *o = p == 4 ? &s[i].out : &s[i].in[p];
      char name[32];
      if (p == 4) snprintf(name, sizeof name, "output 0");
      else snprintf(name, sizeof name, "input %u", p);
      for (int defect = 0; defect < 4; defect++) {
        md_operand_info keep = *o;
        md_kernel_status st;
        if (defect == 0) o->lifetime = MD_NO_VALUE;
        if (defect == 1) { o->rank = 9; o->dims = nine; }
        if (defect == 2) { o->rank = 2; o->dims = NULL; }
        if (defect == 3) o->type = MD_BOOL;
        md_status r = kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st);
        cr_assert_eq(r, MD_INVALID_ARGUMENT, "%s %s defect %d: %d %s", s[i].op, name, defect, r,
                     st.message);
        cr_assert(strstr(st.message, name) != NULL, "%s %s defect %d: \"%s\"", s[i].op, name,
                  defect, st.message);
        *o = keep;
      }
    }
  }
}

Test(kexact, every_type_agreement_is_checked) {
  kx_sig s[8];
  for (int i = 0; i < 8; i++) {
    for (uint32_t p = 1; p <= 4; p++) {
      kx_sigs(s);
      if (p < 4 && (p >= s[i].n_in || !s[i].tensor[p])) continue;
      if (strcmp(s[i].op, "RESHAPE") == 0 && p == 1) continue; /* the shape is TENSOR_INT32 */
      md_operand_info *o = p == 4 ? &s[i].out : &s[i].in[p];
      o->type = MD_TENSOR_FLOAT16;
      md_kernel_status st;
      md_status r = kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st);
      cr_assert_eq(r, MD_INVALID_ARGUMENT, "%s position %u: %d %s", s[i].op, p, r, st.message);
      cr_assert(strstr(st.message, "must match input 0 (TENSOR_FLOAT32)") != NULL, "%s %u: %s",
                s[i].op, p, st.message);
      char name[48];
      if (p == 4) snprintf(name, sizeof name, "output 0");
      else snprintf(name, sizeof name, "input %u", p);
      cr_assert(strncmp(st.message, name, strlen(name)) == 0, "%s %u: %s", s[i].op, p, st.message);
    }
  }
}

Test(kexact, every_scalar_position_rejects_wrong_type_and_no_value) {
  kx_sig s[8];
  for (int i = 0; i < 8; i++) {
    for (uint32_t p = 0; p < 4; p++) {
      kx_sigs(s);
      if (p >= s[i].n_in || s[i].tensor[p]) continue;
      md_operand_info *o = &s[i].in[p];
      char name[32];
      snprintf(name, sizeof name, "input %u", p);
      md_kernel_status st;
      o->type = o->type == MD_INT32 ? MD_FLOAT32 : MD_INT32;
      md_status r = kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st);
      cr_assert_eq(r, MD_INVALID_ARGUMENT, "%s %s: %d %s", s[i].op, name, r, st.message);
      cr_assert(strstr(st.message, name) != NULL, "%s %s: %s", s[i].op, name, st.message);
      kx_sigs(s);
      o = &s[i].in[p];
      o->rank = 1;
      o->dims = D(1);
      r = kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st);
      cr_assert_eq(r, MD_INVALID_ARGUMENT, "%s %s rank: %d %s", s[i].op, name, r, st.message);
      cr_assert(strstr(st.message, "must be a scalar, got rank 1") != NULL, "%s", st.message);
      if (strcmp(s[i].op, "SOFTMAX") == 0 && p == 2) continue; /* optional: NO_VALUE allowed */
      kx_sigs(s);
      s[i].in[p].lifetime = MD_NO_VALUE;
      r = kt_check(s[i].op, s[i].in, s[i].n_in, &s[i].out, 1, &st);
      cr_assert_eq(r, MD_INVALID_ARGUMENT, "%s %s no value: %d %s", s[i].op, name, r, st.message);
      cr_assert(strstr(st.message, "is required, got no value") != NULL, "%s", st.message);
    }
  }
}

Test(kexact, every_shape_and_run_rejects_unknown_input_dims) {
  /* shape() at execution: each tensor input with a 0 dim, then of unknown rank */
  float x[12] = {0};
  int32_t act = 0, axis = 0, shp2[2] = {3, 2};
  float beta = 1;
  struct { const char *op; uint32_t n; md_tensor t[4]; int tensor[4]; } c[] = {
      {"ADD", 3, {kt_f32(2, D(2, 3), x), kt_f32(2, D(2, 3), x), kt_i32(&act)}, {1, 1, 0}},
      {"RELU", 1, {kt_f32(2, D(2, 3), x)}, {1}},
      {"FULLY_CONNECTED", 4, {kt_f32(2, D(2, 3), x), kt_f32(2, D(4, 3), x), kt_f32(1, D(4), x),
                              kt_i32(&act)}, {1, 1, 1, 0}},
      {"SOFTMAX", 2, {kt_f32(2, D(2, 3), x), kt_f32s(&beta)}, {1, 0}},
      {"RESHAPE", 2, {kt_f32(2, D(2, 3), x), kt_i32v(2, shp2)}, {1, 0}},
      {"CONCATENATION", 3, {kt_f32(2, D(2, 3), x), kt_f32(2, D(2, 3), x), kt_i32(&axis)}, {1, 1, 0}},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    md_tensor_shape out;
    md_kernel_status st;
    kt_assert_ok(kt_shape(c[i].op, c[i].t, c[i].n, &out, &st), st);
    for (uint32_t p = 0; p < c[i].n; p++) {
      if (!c[i].tensor[p]) continue;
      md_tensor keep = c[i].t[p];
      c[i].t[p].dims[0] = 0;
      cr_assert_eq(kt_shape(c[i].op, c[i].t, c[i].n, &out, &st), MD_INVALID_ARGUMENT, "%s %u",
                   c[i].op, p);
      kt_assert_names(st, "not fully known at execution");
      c[i].t[p] = keep;
      c[i].t[p].rank = 0;
      cr_assert_eq(kt_shape(c[i].op, c[i].t, c[i].n, &out, &st), MD_INVALID_ARGUMENT, "%s %u",
                   c[i].op, p);
      kt_assert_names(st, "unknown rank at execution");
      c[i].t[p] = keep;
    }
    /* run(): every input buffer one element short, then an int32 buffer */
    md_tensor o = kt_f32(out.rank, out.dims, x);
    (void)o;
    for (uint32_t p = 0; p < c[i].n; p++) {
      if (!c[i].tensor[p]) continue;
      md_tensor keep = c[i].t[p];
      float big[16];
      md_tensor ot = kt_out(big, sizeof big);
      ot.rank = out.rank;
      memcpy(ot.dims, out.dims, sizeof out.dims);
      c[i].t[p].bytes -= 4;
      md_status r = kt_run(c[i].op, c[i].t, c[i].n, &ot, &st);
      cr_assert_eq(r, MD_GENERAL_FAILURE, "%s input %u short: %d %s", c[i].op, p, r, st.message);
      char want[32];
      snprintf(want, sizeof want, "input %u buffer is", p);
      kt_assert_names(st, want);
      c[i].t[p] = keep;
      c[i].t[p].type = MD_TENSOR_INT32;
      r = kt_run(c[i].op, c[i].t, c[i].n, &ot, &st);
      if (strcmp(c[i].op, "CONCATENATION") == 0 || strcmp(c[i].op, "ADD") == 0 ||
          strcmp(c[i].op, "RELU") == 0 || strcmp(c[i].op, "SOFTMAX") == 0 ||
          strcmp(c[i].op, "RESHAPE") == 0 || strcmp(c[i].op, "FULLY_CONNECTED") == 0) {
        cr_assert_eq(r, MD_GENERAL_FAILURE, "%s input %u int32: %d %s", c[i].op, p, r,
                     st.message);
        kt_assert_names(st, "TENSOR_INT32 not supported by the host kernels");
      }
      c[i].t[p] = keep;
    }
  }
}

Test(kexact, outputs_past_2_61_elements_refused_at_execution) {
  md_kernel_status st;
  md_tensor_shape shp;
  float x = 0;
  int32_t act = 0, axis = 0;
  /* FULLY_CONNECTED: batch 2^31 x units 2^31 = 2^62 elements */
  md_tensor t[4] = {kt_f32(2, D(1u << 31, 1), &x), kt_f32(2, D(1u << 31, 1), &x),
                    kt_f32(1, D(1u << 31), &x), kt_i32(&act)};
  kt_assert_fail(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [2147483648,2147483648] hold more than 2^61 elements");
  t[1] = kt_f32(2, D(1u << 30, 1), &x);
  t[2] = kt_f32(1, D(1u << 30), &x);
  kt_assert_ok(kt_shape("FULLY_CONNECTED", t, 4, &shp, &st), st);
  /* CONCATENATION: two [2^30, 2^31] on axis 0 make 2^62 elements */
  md_tensor c[3] = {kt_f32(2, D(1u << 30, 1u << 31), &x), kt_f32(2, D(1u << 30, 1u << 31), &x),
                    kt_i32(&axis)};
  kt_assert_fail(kt_shape("CONCATENATION", c, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [2147483648,2147483648] hold more than 2^61 elements");
  /* ADD: [2^31, 1] + [2^31] broadcast to 2^62 */
  md_tensor a[3] = {kt_f32(2, D(1u << 31, 1), &x), kt_f32(1, D(1u << 31), &x), kt_i32(&act)};
  kt_assert_fail(kt_shape("ADD", a, 3, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "output 0 dims [2147483648,2147483648] hold more than 2^61 elements");
}

Test(kexact, run_operand_counts_at_the_minimum) {
  md_kernel_status st;
  float x[4] = {1, 2, 3, 4}, o[4] = {0};
  int32_t axis = 0, act = 0;
  /* CONCATENATION of a single tensor: its copy */
  md_tensor c[2] = {kt_f32(1, D(4), x), kt_i32(&axis)};
  md_tensor oc = kt_out(o, sizeof o);
  kt_assert_ok(kt_exec("CONCATENATION", c, 2, &oc, &st), st);
  kt_assert_floats(o, x, 4, 0);
  /* FULLY_CONNECTED with 3 inputs */
  md_tensor f[3] = {kt_f32(2, D(1, 4), x), kt_f32(2, D(1, 4), x), kt_f32(1, D(1), x)};
  md_tensor of = kt_f32(2, D(1, 1), o);
  kt_assert_fail(kt_run("FULLY_CONNECTED", f, 3, &of, &st), st, MD_INVALID_ARGUMENT,
                 "expects 4 inputs, got 3");
  md_tensor a[2] = {kt_f32(1, D(4), x), kt_f32(1, D(4), x)};
  md_tensor oa = kt_f32(1, D(4), o);
  kt_assert_fail(kt_run("SUB", a, 2, &oa, &st), st, MD_INVALID_ARGUMENT, "expects 3 inputs, got 2");
  md_tensor sm[1] = {kt_f32(1, D(4), x)};
  kt_assert_fail(kt_run("SOFTMAX", sm, 1, &oa, &st), st, MD_INVALID_ARGUMENT,
                 "expects 2 to 3 inputs, got 1");
  md_tensor rs[1] = {kt_f32(1, D(4), x)};
  kt_assert_fail(kt_run("RESHAPE", rs, 1, &oa, &st), st, MD_INVALID_ARGUMENT,
                 "expects 2 inputs, got 1");
  md_tensor a4[4] = {kt_f32(1, D(4), x), kt_f32(1, D(4), x), kt_i32(&act), kt_i32(&act)};
  kt_assert_fail(kt_run("MUL", a4, 4, &oa, &st), st, MD_INVALID_ARGUMENT, "expects 3 inputs, got 4");
  kt_assert_fail(kt_run("RELU", a, 2, &oa, &st), st, MD_INVALID_ARGUMENT, "expects 1 input, got 2");
}

Test(kexact, reshape_shape_operand_of_unknown_dims_at_execution) {
  float x[1] = {5};
  int32_t sh[1] = {1};
  md_tensor t[2] = {kt_f32(1, D(1), x), kt_i32v(1, sh)};
  md_tensor_shape shp;
  md_kernel_status st;
  kt_assert_ok(kt_shape("RESHAPE", t, 2, &shp, &st), st);
  t[1].dims[0] = 0;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) dims [0] are not fully known at execution");
  t[1].rank = 0;
  kt_assert_fail(kt_shape("RESHAPE", t, 2, &shp, &st), st, MD_INVALID_ARGUMENT,
                 "input 1 (shape) has unknown rank at execution");
}

Test(kexact, run_names_the_output_whose_dims_differ) {
  float x[6] = {1, 2, 3, 4, 5, 6}, o[6];
  int32_t act = 0;
  md_tensor t[3] = {kt_f32(2, D(2, 3), x), kt_f32(1, D(3), x), kt_i32(&act)};
  md_tensor ot = kt_f32(2, D(3, 2), o);
  md_kernel_status st;
  kt_assert_fail(kt_run("ADD", t, 3, &ot, &st), st, MD_GENERAL_FAILURE,
                 "output 0 dims [3,2] differ from the computed [2,3]");
  kt_assert_fail(kt_run("RELU", t, 1, &ot, &st), st, MD_GENERAL_FAILURE,
                 "output 0 dims [3,2] differ from the computed [2,3]");
  ot = kt_f32(2, D(2, 3), o);
  ot.bytes = 20;
  kt_assert_fail(kt_run("SUB", t, 3, &ot, &st), st, MD_GENERAL_FAILURE,
                 "output 0 buffer is 20 bytes, its dims [2,3] need 24");
}

/* The first registry call of this process is a registration: the built-ins are there first. */
