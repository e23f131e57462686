/* test_unit_kernel_util.c - exact results of the kernel helpers (kernel_util.c) at their
 * boundaries: type names and sets, dims formatting, operand counts, prepare-time operand checks
 * (tensor, scalar, rank, activation, output dims, unsupported types) and the execute-time slow
 * paths (known dims, scalar values, buffers, output dims), each with the status and the operand
 * its message names. */

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels_int.h"
#include "ktest.h"

#define TWO61 (UINT64_C(1) << 61)

static md_kernel_status st0(void) {
  md_kernel_status st;
  memset(&st, 0, sizeof st);
  return st;
}

/* ---- types ---------------------------------------------------------------------------- */

Test(kutil, type_names_of_every_type_and_unknown_ones) {
  cr_assert_str_eq(md_operand_type_name(MD_FLOAT32), "FLOAT32");
  cr_assert_str_eq(md_operand_type_name(MD_INT32), "INT32");
  cr_assert_str_eq(md_operand_type_name(MD_UINT32), "UINT32");
  cr_assert_str_eq(md_operand_type_name(MD_TENSOR_FLOAT32), "TENSOR_FLOAT32");
  cr_assert_str_eq(md_operand_type_name(MD_TENSOR_INT32), "TENSOR_INT32");
  cr_assert_str_eq(md_operand_type_name(MD_TENSOR_QUANT8_ASYMM), "TENSOR_QUANT8_ASYMM");
  cr_assert_str_eq(md_operand_type_name(MD_BOOL), "BOOL");
  cr_assert_str_eq(md_operand_type_name(MD_TENSOR_FLOAT16), "TENSOR_FLOAT16");
  cr_assert_str_eq(md_operand_type_name(MD_TENSOR_QUANT8_ASYMM_SIGNED),
                   "TENSOR_QUANT8_ASYMM_SIGNED");
  cr_assert_str_eq(md_operand_type_name((md_operand_type)7), "type 7");
  cr_assert_str_eq(md_operand_type_name((md_operand_type)-3), "type -3");
}

Test(kutil, tensor_and_quant_type_sets) {
  static const struct { md_operand_type t; int tensor, quant; } cases[] = {
      {MD_FLOAT32, 0, 0},          {MD_INT32, 0, 0},
      {MD_UINT32, 0, 0},           {MD_TENSOR_FLOAT32, 1, 0},
      {MD_TENSOR_INT32, 1, 0},     {MD_TENSOR_QUANT8_ASYMM, 1, 1},
      {MD_BOOL, 0, 0},             {(md_operand_type)7, 0, 0},
      {MD_TENSOR_FLOAT16, 1, 0},   {MD_TENSOR_QUANT8_ASYMM_SIGNED, 1, 1},
      {(md_operand_type)9, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_eq(!!md__ktype_is_tensor(cases[i].t), cases[i].tensor, "type %d", cases[i].t);
    cr_assert_eq(!!md__ktype_is_quant(cases[i].t), cases[i].quant, "type %d", cases[i].t);
  }
}

/* ---- dims formatting ------------------------------------------------------------------ */

Test(kutil, dims_str_exact_and_truncated) {
  char buf[64];
  cr_assert_str_eq(md__kdims_str(3, D(2, 0, 3), buf, sizeof buf), "[2,0,3]");
  cr_assert_str_eq(md__kdims_str(1, D(7), buf, sizeof buf), "[7]");
  cr_assert_str_eq(md__kdims_str(0, D(7), buf, sizeof buf), "[?]");
  cr_assert_str_eq(md__kdims_str(2, NULL, buf, sizeof buf), "[?]");
  cr_assert_str_eq(md__kdims_str(8, D(1, 2, 3, 4, 5, 6, 7, 8), buf, sizeof buf),
                   "[1,2,3,4,5,6,7,8]");
  /* "[12" fits 4 bytes, ",34" does not: no closing bracket */
  memset(buf, 'x', sizeof buf);
  cr_assert_str_eq(md__kdims_str(2, D(12, 34), buf, 4), "[12");
  /* exactly room for "[5]" */
  cr_assert_str_eq(md__kdims_str(1, D(5), buf, 4), "[5]");
  memset(buf, 'x', sizeof buf);
  cr_assert_str_eq(md__kdims_str(1, D(5), buf, 2), "[");
  memset(buf, 'x', sizeof buf);
  md__kdims_str(1, D(5), buf, 1);
  cr_assert_eq(buf[0], '\0');
  cr_assert_eq(buf[1], 'x');
  buf[0] = 'y';
  md__kdims_str(1, D(5), buf, 0);
  cr_assert_eq(buf[0], 'y');
}

/* ---- operand counts ------------------------------------------------------------------- */

Test(kutil, counts_slow_each_rule_and_its_message) {
  md_operand_info ops[4] = {{0}};
  md_kernel_status st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 3, ops, 1, ops, 3, 3, 1), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 1, ops, 2, 3, 1), MD_NONE);
  cr_assert_eq(md__kcounts_slow(&st, 0, NULL, 0, NULL, 0, 0, 0), MD_NONE);
  kt_assert_untouched(st);

  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 1, ops, 3, 3, 1), MD_INVALID_ARGUMENT);
  cr_assert_eq(st.code, MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 3 inputs, got 2");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 4, ops, 1, ops, 3, 3, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 3 inputs, got 4");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 1, ops, 1, 1, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 1 input, got 2");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 1, ops, 1, ops, 2, 3, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 2 to 3 inputs, got 1");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 1, ops, 1, ops, 2, UINT32_MAX, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects at least 2 inputs, got 1");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 2, ops, 2, 2, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 1 output, got 2");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 0, ops, 2, 2, 2), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "expects 2 outputs, got 0");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, NULL, 1, ops, 2, 2, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "operand array is NULL");
  st = st0();
  cr_assert_eq(md__kcounts_slow(&st, 2, ops, 1, NULL, 2, 2, 1), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "operand array is NULL");
}

Test(kutil, kernels_refuse_wrong_counts_in_check_shape_and_run) {
  md_operand_info in[4] = {kt_ti(MD_TENSOR_FLOAT32, 1, D(2)), kt_ti(MD_TENSOR_FLOAT32, 1, D(2))};
  md_operand_info out = kt_ti(MD_TENSOR_FLOAT32, 1, D(2));
  md_kernel_status st;
  kt_assert_fail(kt_check("ADD", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects 3 inputs, got 2");
  kt_assert_fail(kt_check("RELU", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects 1 input, got 2");
  kt_assert_fail(kt_check("SOFTMAX", in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects 2 to 3 inputs, got 1");
  kt_assert_fail(kt_check("CONCATENATION", in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects at least 2 inputs, got 1");
  kt_assert_fail(kt_check("FULLY_CONNECTED", in, 2, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects 4 inputs, got 2");
  kt_assert_fail(kt_check("RESHAPE", in, 1, &out, 1, &st), st, MD_INVALID_ARGUMENT,
                 "expects 2 inputs, got 1");

  float x[2] = {1, 2}, o[2];
  md_tensor t[2] = {kt_f32(1, D(2), x), kt_f32(1, D(2), x)};
  md_tensor ot = kt_f32(1, D(2), o);
  static const char *const ops[] = {"ADD", "SUB", "MUL", "RELU", "FULLY_CONNECTED", "SOFTMAX",
                                    "RESHAPE", "CONCATENATION"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    uint32_t n = strcmp(ops[i], "RELU") == 0 ? 2 : 1;
    md_tensor_shape shp;
    cr_assert_eq(kt_run(ops[i], t, n, &ot, &st), MD_INVALID_ARGUMENT, "%s run", ops[i]);
    kt_assert_names(st, "expects");
    cr_assert_eq(kt_shape(ops[i], t, n, &shp, &st), MD_INVALID_ARGUMENT, "%s shape", ops[i]);
    kt_assert_names(st, "expects");
  }
}

/* ---- prepare-time operand checks ------------------------------------------------------ */

Test(kutil, check_tensor_rules_and_messages) {
  md_kernel_status st = st0();
  md__kunsup u = {0};
  md_operand_info o = kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3));
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &o, MD__T_ANY, &u), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(u.found, 0);

  o.lifetime = MD_NO_VALUE;
  cr_assert_eq(md__kcheck_tensor(&st, "input", 2, "bias", &o, MD__T_ANY, &u),
               MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (bias) is required, got no value");

  st = st0();
  o = kt_ti(MD_INT32, 0, NULL);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 1, NULL, &o, MD__T_ANY, &u), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "input 1 must be TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, "
                   "TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED, got INT32");
  st = st0();
  o = kt_ti(MD_TENSOR_INT32, 1, D(2));
  cr_assert_eq(md__kcheck_tensor(&st, "output", 0, NULL, &o, MD__T_FLOAT | MD__T_QUANT, &u),
               MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "output 0 must be TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or "
                   "TENSOR_QUANT8_ASYMM_SIGNED, got TENSOR_INT32");
  st = st0();
  o = kt_ti(MD_TENSOR_FLOAT32, 1, D(2));
  cr_assert_eq(md__kcheck_tensor(&st, "input", 1, "shape", &o, MD__TBIT(MD_TENSOR_INT32), NULL),
               MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 (shape) must be TENSOR_INT32, got TENSOR_FLOAT32");
  st = st0();
  o = kt_ti(MD_TENSOR_INT32, 1, D(2));
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &o,
                                 MD__TBIT(MD_TENSOR_FLOAT32) | MD__TBIT(MD_TENSOR_QUANT8_ASYMM), &u),
               MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "input 0 must be TENSOR_FLOAT32 or TENSOR_QUANT8_ASYMM, got TENSOR_INT32");
  /* a scalar type is never a tensor, even if its bit is allowed */
  st = st0();
  o = kt_ti(MD_FLOAT32, 0, NULL);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &o, 0xffffffffu, &u),
               MD_INVALID_ARGUMENT);

  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  st = st0();
  o = kt_ti(MD_TENSOR_FLOAT32, 9, nine);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &o, MD__T_ANY, &u), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 0 has rank 9, more than 8");
  st = st0();
  o = kt_ti(MD_TENSOR_FLOAT32, 8, nine);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &o, MD__T_ANY, &u), MD_NONE);
  o = kt_ti(MD_TENSOR_FLOAT32, 2, NULL);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 3, NULL, &o, MD__T_ANY, &u), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 3 has rank 2 but no dims");
  st = st0();
  o = kt_ti(MD_TENSOR_FLOAT32, 0, NULL);
  cr_assert_eq(md__kcheck_tensor(&st, "input", 3, NULL, &o, MD__T_ANY, &u), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(u.found, 0, "TENSOR_FLOAT32 is supported");
}

Test(kutil, check_tensor_notes_the_first_unsupported_type_only) {
  md_kernel_status st = st0();
  md__kunsup u = {0};
  md_operand_info f16 = kt_ti(MD_TENSOR_FLOAT16, 1, D(2));
  md_operand_info q8 = kt_ti(MD_TENSOR_QUANT8_ASYMM, 1, D(2));
  cr_assert_eq(md__kcheck_tensor(&st, "input", 1, "weights", &f16, MD__T_ANY, &u), MD_NONE);
  cr_assert_eq(md__kcheck_tensor(&st, "output", 0, NULL, &q8, MD__T_ANY, &u), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(u.found, 1);
  cr_assert_str_eq(u.what, "input 1 (weights)");
  cr_assert_eq(u.type, MD_TENSOR_FLOAT16);
  /* NULL u: nothing recorded, no crash */
  cr_assert_eq(md__kcheck_tensor(&st, "input", 0, NULL, &q8, MD__T_ANY, NULL), MD_NONE);

  cr_assert_eq(md__kcheck_done(&st, &u), MD_GENERAL_FAILURE);
  cr_assert_eq(st.code, MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message,
                   "input 1 (weights): TENSOR_FLOAT16 not supported (only TENSOR_FLOAT32 kernels "
                   "exist)");
  md__kunsup none = {0};
  st = st0();
  cr_assert_eq(md__kcheck_done(&st, &none), MD_NONE);
  kt_assert_untouched(st);
}

Test(kutil, check_same_type_scalar_rank) {
  md_kernel_status st = st0();
  md_operand_info o = kt_ti(MD_TENSOR_FLOAT16, 1, D(2));
  cr_assert_eq(md__kcheck_same_type(&st, "output", 0, NULL, &o, MD_TENSOR_FLOAT16, "input 0"),
               MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(md__kcheck_same_type(&st, "output", 0, NULL, &o, MD_TENSOR_FLOAT32, "input 0"),
               MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "output 0 has type TENSOR_FLOAT16, must match input 0 (TENSOR_FLOAT32)");

  int32_t v = 1;
  uint64_t v8 = 0;
  md_operand_info s = kt_si(MD_INT32, &v);
  st = st0();
  cr_assert_eq(md__kcheck_scalar(&st, 3, "axis", &s, MD_INT32), MD_NONE);
  kt_assert_untouched(st);
  s.lifetime = MD_NO_VALUE;
  cr_assert_eq(md__kcheck_scalar(&st, 3, "axis", &s, MD_INT32), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 3 (axis) is required, got no value");
  st = st0();
  s = kt_si(MD_FLOAT32, &v);
  cr_assert_eq(md__kcheck_scalar(&st, 1, "beta", &s, MD_INT32), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 (beta) must be INT32, got FLOAT32");
  st = st0();
  s = kt_si(MD_INT32, &v);
  s.rank = 1;
  s.dims = D(1);
  cr_assert_eq(md__kcheck_scalar(&st, 2, "axis", &s, MD_INT32), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (axis) must be a scalar, got rank 1");
  st = st0();
  s = kt_si(MD_INT32, &v8);
  s.length = 8;
  cr_assert_eq(md__kcheck_scalar(&st, 2, "axis", &s, MD_INT32), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (axis) constant is 8 bytes, expected 4");
  st = st0();
  s.length = 3;
  cr_assert_eq(md__kcheck_scalar(&st, 2, "axis", &s, MD_INT32), MD_INVALID_ARGUMENT);
  /* a model input: no value, so no length to check */
  st = st0();
  s = kt_si(MD_INT32, NULL);
  s.length = 8;
  cr_assert_eq(md__kcheck_scalar(&st, 2, "axis", &s, MD_INT32), MD_NONE);
  kt_assert_untouched(st);

  md_operand_info r = kt_ti(MD_TENSOR_FLOAT32, 3, D(1, 2, 3));
  cr_assert_eq(md__kcheck_rank(&st, "input", 1, "weights", &r, 3), MD_NONE);
  r.rank = 0;
  cr_assert_eq(md__kcheck_rank(&st, "input", 1, "weights", &r, 2), MD_NONE);
  kt_assert_untouched(st);
  r.rank = 3;
  cr_assert_eq(md__kcheck_rank(&st, "input", 1, "weights", &r, 2), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 (weights) must have rank 2, got 3");
  st = st0();
  r.rank = 1;
  cr_assert_eq(md__kcheck_rank(&st, "input", 1, NULL, &r, 2), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 must have rank 2, got 1");
}

Test(kutil, check_activation_range_ends) {
  static const struct { int32_t v; md_status want; } cases[] = {
      {INT32_MIN, MD_INVALID_ARGUMENT}, {-1, MD_INVALID_ARGUMENT}, {0, MD_NONE}, {1, MD_NONE},
      {2, MD_NONE}, {3, MD_NONE}, {4, MD_INVALID_ARGUMENT}, {INT32_MAX, MD_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    md_kernel_status st = st0();
    md_operand_info a = kt_si(MD_INT32, &cases[i].v);
    cr_assert_eq(md__kcheck_activation(&st, 2, &a), cases[i].want, "activation %d", cases[i].v);
    if (cases[i].want == MD_NONE) {
      kt_assert_untouched(st);
    } else {
      char want[128];
      snprintf(want, sizeof want,
               "input 2 (fused activation) is %d; must be 0 (none), 1 (relu), 2 (relu1) or 3 "
               "(relu6)", cases[i].v);
      cr_assert_str_eq(st.message, want);
    }
  }
  md_kernel_status st = st0();
  md_operand_info a = kt_si(MD_INT32, NULL);
  cr_assert_eq(md__kcheck_activation(&st, 3, &a), MD_NONE);
  float f = 0;
  a = kt_si(MD_FLOAT32, &f);
  cr_assert_eq(md__kcheck_activation(&st, 3, &a), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 3 (fused activation) must be INT32, got FLOAT32");
}

Test(kutil, check_output_dims_each_case) {
  md_operand_info outs[2] = {kt_ti(MD_TENSOR_FLOAT32, 2, D(2, 3)),
                             kt_ti(MD_TENSOR_FLOAT32, 2, D(0, 4))};
  md_op_sig sig = {.n_outputs = 2, .outputs = outs};
  md_kernel_status st = st0();
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 2, D(2, 3)), MD_NONE);
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 2, D(0, 3)), MD_NONE);
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 2, D(2, 0)), MD_NONE);
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 0, NULL), MD_NONE);
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 1, 2, D(5, 4)), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 1, 2, D(5, 3)), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "output 1 dims [0,4] conflict with [5,3] implied by the inputs (axis 1)");
  st = st0();
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 2, D(3, 3)), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "output 0 dims [2,3] conflict with [3,3] implied by the inputs (axis 0)");
  st = st0();
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 3, D(1, 2, 3)), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "output 0 has rank 2, the inputs imply rank 3 ([1,2,3])");
  st = st0();
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 1, D(6)), MD_INVALID_ARGUMENT);
  outs[0].rank = 0;
  st = st0();
  cr_assert_eq(md__kcheck_output_dims(&st, &sig, 0, 1, D(6)), MD_NONE);
  kt_assert_untouched(st);
}

/* ---- execute-time slow paths ---------------------------------------------------------- */

static md__kview view(uint32_t rank, const uint32_t *dims) {
  md__kview v = {.type = MD_TENSOR_FLOAT32, .rank = rank, .dims = dims};
  return v;
}

Test(kutil, exec_known_slow_every_rule_and_the_2_61_limit) {
  md_kernel_status st = st0();
  uint64_t n = 99;
  md__kview v = view(2, D(2, 3));
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_NONE);
  cr_assert_eq(n, 6);
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, NULL), MD_NONE);
  kt_assert_untouched(st);
  /* exactly 2^61 elements is allowed, one more axis step is not */
  v = view(2, D(1u << 30, 1u << 31));
  n = 0;
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_NONE);
  cr_assert_eq(n, TWO61);
  cr_assert_eq(md__kexec_known(&st, "input", 0, NULL, &v, &n), MD_NONE);
  kt_assert_untouched(st);
  v = view(3, D(1u << 30, 1u << 31, 3));
  n = 7;
  cr_assert_eq(md__kexec_known_slow(&st, "input", 1, "bias", &v, &n), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message,
                   "input 1 (bias) dims [1073741824,2147483648,3] hold more than 2^61 elements");
  cr_assert_eq(n, 7, "count untouched on failure");
  st = st0();
  cr_assert_eq(md__kexec_known(&st, "input", 1, "bias", &v, &n), MD_INVALID_ARGUMENT);
  st = st0();
  v = view(2, D(2, 0));
  cr_assert_eq(md__kexec_known_slow(&st, "output", 0, NULL, &v, &n), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "output 0 dims [2,0] are not fully known at execution");
  st = st0();
  v = view(0, NULL);
  cr_assert_eq(md__kexec_known_slow(&st, "input", 1, NULL, &v, &n), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 has unknown rank at execution");
  st = st0();
  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  v = view(9, nine);
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 0 has rank 9, more than 8");
  st = st0();
  v = view(8, nine);
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_NONE);
  cr_assert_eq(n, 1);
  v = view(2, NULL);
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 0 has rank 2 but no dims");
  st = st0();
  /* a product that overflows 64 bits */
  v = view(3, D(UINT32_MAX, UINT32_MAX, UINT32_MAX));
  cr_assert_eq(md__kexec_known_slow(&st, "input", 0, NULL, &v, &n), MD_INVALID_ARGUMENT);
  kt_assert_names(st, "more than 2^61");
}

Test(kutil, exec_scalar_and_activation_slow) {
  md_kernel_status st = st0();
  int32_t val = 42, out = 0;
  md__kview v = {.type = MD_INT32, .data = &val, .bytes = 4};
  cr_assert_eq(md__kexec_scalar4_slow(&st, 2, "axis", &v, MD_INT32, &out), MD_NONE);
  cr_assert_eq(out, 42);
  kt_assert_untouched(st);
  v.bytes = 8;
  out = 0;
  cr_assert_eq(md__kexec_scalar4_slow(&st, 2, "axis", &v, MD_INT32, &out), MD_NONE);
  cr_assert_eq(out, 42);
  v.bytes = 3;
  out = 5;
  cr_assert_eq(md__kexec_scalar4_slow(&st, 2, "axis", &v, MD_INT32, &out), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (axis) value is 3 bytes, expected 4");
  cr_assert_eq(out, 5);
  st = st0();
  v.bytes = 4;
  v.data = NULL;
  cr_assert_eq(md__kexec_scalar4_slow(&st, 2, "axis", &v, MD_INT32, &out), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (axis) has no value");
  st = st0();
  v.data = &val;
  v.type = MD_FLOAT32;
  cr_assert_eq(md__kexec_scalar4_slow(&st, 1, "beta", &v, MD_INT32, &out), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 1 (beta) must be INT32, got FLOAT32");

  for (int32_t a = -2; a <= 5; a++) {
    int32_t got = 77;
    st = st0();
    md__kview av = {.type = MD_INT32, .data = &a, .bytes = 4};
    md_status want = a >= 0 && a <= 3 ? MD_NONE : MD_INVALID_ARGUMENT;
    cr_assert_eq(md__kexec_activation_slow(&st, 2, &av, &got), want, "activation %d", a);
    cr_assert_eq(md__kexec_activation(&st, 2, &av, &got), want, "activation %d", a);
    if (want == MD_NONE) {
      cr_assert_eq(got, a);
      kt_assert_untouched(st);
    } else {
      kt_assert_names(st, "(fused activation) is ");
    }
  }
  st = st0();
  int32_t got;
  md__kview none = {.type = MD_INT32};
  cr_assert_eq(md__kexec_activation_slow(&st, 2, &none, &got), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 (fused activation) has no value");
}

Test(kutil, run_buffer_slow_each_rule) {
  md_kernel_status st = st0();
  float data[6];
  md_tensor t = kt_f32(2, D(2, 3), data);
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, 6), MD_NONE);
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, 5), MD_NONE);
  kt_assert_untouched(st);
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 1, &t, 7), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "input 1 buffer is 24 bytes, its dims [2,3] need 28");
  st = st0();
  t.bytes = 23;
  cr_assert_eq(md__krun_buffer_slow(&st, "output", 0, &t, 6), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "output 0 buffer is 23 bytes, its dims [2,3] need 24");
  st = st0();
  t.data = NULL;
  t.bytes = 0;
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, 0), MD_NONE);
  kt_assert_untouched(st);
  t.bytes = 24;
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, 6), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "input 0 has no buffer");
  st = st0();
  t.data = data;
  t.bytes = UINT64_MAX;
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, TWO61), MD_NONE);
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 0, &t, TWO61 + 1), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "input 0 holds more than 2^61 elements");
  st = st0();
  t.type = MD_TENSOR_INT32;
  cr_assert_eq(md__krun_buffer_slow(&st, "input", 2, &t, 1), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "input 2: TENSOR_INT32 not supported by the host kernels");
}

Test(kutil, run_output_slow_each_rule) {
  md_kernel_status st = st0();
  float data[6];
  md_tensor t = kt_f32(2, D(2, 3), data);
  uint64_t n = 0;
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 2, D(2, 3), &n), MD_NONE);
  cr_assert_eq(n, 6);
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 2, D(2, 3), NULL), MD_NONE);
  kt_assert_untouched(st);
  n = 9;
  cr_assert_eq(md__krun_output_slow(&st, 1, &t, 2, D(3, 2), &n), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "output 1 dims [2,3] differ from the computed [3,2]");
  cr_assert_eq(n, 9);
  st = st0();
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 2, D(2, 4), &n), MD_GENERAL_FAILURE);
  st = st0();
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 1, D(6), &n), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "output 0 dims [2,3] differ from the computed [6]");
  st = st0();
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 3, D(2, 3, 1), &n), MD_GENERAL_FAILURE);
  st = st0();
  t.rank = 9;
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 2, D(2, 3), &n), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "output 0 dims [?] differ from the computed [2,3]");
  st = st0();
  t = kt_f32(2, D(2, 3), data);
  t.bytes = 20;
  cr_assert_eq(md__krun_output_slow(&st, 0, &t, 2, D(2, 3), &n), MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "output 0 buffer is 20 bytes, its dims [2,3] need 24");
  cr_assert_eq(n, 9, "count untouched on failure");
}

Test(kutil, fail_sets_code_and_message) {
  md_kernel_status st = st0();
  cr_assert_eq(md_kernel_fail(&st, MD_NONE, "x %d", 1), MD_GENERAL_FAILURE);
  cr_assert_eq(st.code, MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "x 1");
  cr_assert_eq(md_kernel_fail(NULL, MD_INVALID_ARGUMENT, "y"), MD_INVALID_ARGUMENT);
  cr_assert_eq(md_kernel_fail(&st, MD_INVALID_ARGUMENT, NULL), MD_INVALID_ARGUMENT);
  cr_assert_eq(st.code, MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "");
}
