/* test_model_kernels.c - model validation against the kernel registry: resolution per
 * platform, input/output counts, custom attributes, kernel checks, and the supported-operations
 * query (runtime/src/model/model.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "test_model_builder.h"

TestSuite(model_kernels, .init = mb_register_kernels);

static const uint32_t D22[2] = {2, 2};

/* ---- resolution ----------------------------------------------------------------------------- */

Test(model_kernels, missing_kernel_is_general_failure) {
  mb b;
  mb_expect_fail(mb_unary_model(&b, "NO_SUCH_OP"), MD_GENERAL_FAILURE,
                 "operation 0: no kernel for NO_SUCH_OP on platform sim");
}

Test(model_kernels, sim_platform_falls_back_to_host_kernels) {
  mb b;
  md__model *c = mb_expect_build_on(mb_unary_model(&b, "T_UNARY"), "sim");
  cr_assert_str_eq(c->operations[0].name, "T_UNARY");
  cr_assert_str_eq(c->operations[0].kernel->platform, "host");
  md__model_free(c);
}

Test(model_kernels, host_platform_finds_host_kernels) {
  mb b;
  md__model *c = mb_expect_build_on(mb_unary_model(&b, "T_UNARY"), "host");
  cr_assert_str_eq(c->operations[0].kernel->platform, "host");
  md__model_free(c);
}

Test(model_kernels, hip_platform_does_not_fall_back_to_host) {
  mb b;
  mb_expect_fail_on(mb_unary_model(&b, "T_UNARY"), "hip", MD_GENERAL_FAILURE,
                    "operation 0: no kernel for T_UNARY on platform hip");
}

Test(model_kernels, sim_kernel_preferred_over_host) {
  md_kernel_def def = {.struct_size = sizeof def,
                       .name = "T_UNARY",
                       .platform = "sim",
                       .min_inputs = 1,
                       .max_inputs = 1,
                       .n_outputs = 1,
                       .run = mbk_run_nothing};
  cr_assert_eq(md_kernel_register(&def), MD_NONE, "%s", md_kernel_registry_error());
  mb b;
  md__model *c = mb_expect_build_on(mb_unary_model(&b, "T_UNARY"), "sim");
  cr_assert_str_eq(c->operations[0].kernel->platform, "sim");
  md__model_free(c);
}

Test(model_kernels, builtin_kernels_resolve_on_sim) {
  mb b;
  md__model *c = mb_expect_build_on(mb_add_model(&b), "sim");
  cr_assert_str_eq(c->operations[0].kernel->name, "ADD");
  md__model_free(c);
}

Test(model_kernels, custom_operation_may_name_a_builtin_kernel) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].type = MD_OP_CUSTOM;
  b.ops[0].custom_name = "ADD";
  md__model *c = mb_expect_build(m);
  cr_assert_eq(c->operations[0].type, MD_OP_CUSTOM);
  cr_assert_str_eq(c->operations[0].name, "ADD");
  md__model_free(c);
}

Test(model_kernels, unsupported_operation_reported_after_all_operations_are_validated) {
  /* Operation 0 has no kernel (unsupported), operation 1 is invalid: invalid wins. */
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "NO_SUCH_OP", 1, 1, x, t);
  uint32_t op = mb_custom(&b, "T_ATTR", 1, 1, t, y);
  mb_attr(&b, op, "alpha", MD_ATTR_F64);
  mb_attr(&b, op, "bogus", MD_ATTR_I64);
  mb_expect_invalid(mb_model(&b), "operation 1 (T_ATTR): unknown attribute 'bogus'");
}

Test(model_kernels, first_unsupported_operation_reported) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, t);
  mb_custom(&b, "NO_SUCH_A", 1, 1, t, y);
  uint32_t z = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "NO_SUCH_B", 1, 1, t, z);
  mb_expect_fail(mb_model(&b), MD_GENERAL_FAILURE,
                 "operation 1: no kernel for NO_SUCH_A on platform sim");
}

/* ---- input and output counts ------------------------------------------------------------ */

Test(model_kernels, too_few_inputs_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_CHECK", 1, 1, x, y);
  mb_expect_invalid(mb_model(&b), "operation 0 (T_CHECK): has 1 inputs, T_CHECK takes 2");
}

Test(model_kernels, too_many_inputs_rejected_with_the_range) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_OPT", 3, 1, x, x, x, y);
  mb_expect_invalid(mb_model(&b), "operation 0 (T_OPT): has 3 inputs, T_OPT takes 1 to 2");
}

Test(model_kernels, wrong_output_count_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t z = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 2, x, y, z);
  mb_expect_invalid(mb_model(&b), "operation 0 (T_UNARY): has 2 outputs, T_UNARY takes 1");
}

Test(model_kernels, builtin_input_count_checked) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].n_inputs = 2; /* ADD without its activation */
  mb_expect_invalid(m, "operation 0 (ADD): has 2 inputs, ADD takes 3");
}

/* ---- custom attributes: well-formed ------------------------------------------------------ */

static md_model *attr_model(mb *b) {
  mb_unary_model(b, "T_ATTR");
  return mb_model(b);
}

Test(model_kernels, attributes_null_with_count_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  b.ops[0].n_attrs = 2;
  b.ops[0].attrs = NULL;
  mb_expect_invalid(m, "operation 0 (T_ATTR): n_attrs is 2 but attrs is NULL");
}

Test(model_kernels, unsorted_attributes_rejected_naming_them) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "mode", MD_ATTR_STR)->str = "x";
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_expect_invalid(m,
                    "operation 0 (T_ATTR): attributes are not sorted by name: 'alpha' (attribute "
                    "1) comes after 'mode' (attribute 0)");
}

Test(model_kernels, duplicate_attribute_names_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_expect_invalid(
      m, "operation 0 (T_ATTR): attributes 0 and 1 are both named 'alpha' (names must be unique)");
}

Test(model_kernels, attributes_out_of_order_by_one_character_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "n", MD_ATTR_I64);
  mb_attr(&b, 0, "m", MD_ATTR_I64);
  mb_expect_invalid(
      m, "attributes are not sorted by name: 'm' (attribute 2) comes after 'n' (attribute 1)");
}

Test(model_kernels, attribute_without_name_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, NULL, MD_ATTR_I64);
  mb_expect_invalid(m, "operation 0 (T_ATTR): attribute 1 has no name");
}

Test(model_kernels, attribute_with_empty_name_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "", MD_ATTR_I64);
  mb_expect_invalid(m, "operation 0 (T_ATTR): attribute 0 has no name");
}

Test(model_kernels, attribute_of_unknown_kind_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", (md_attr_kind)4);
  mb_expect_invalid(m, "operation 0 (T_ATTR): attribute 0 'alpha' has unknown kind 4");
}

Test(model_kernels, string_attribute_with_null_string_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "mode", MD_ATTR_STR);
  mb_expect_invalid(m, "operation 0 (T_ATTR): attribute 1 'mode' is STR with a NULL string");
}

Test(model_kernels, array_attribute_with_null_array_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "axes", MD_ATTR_I64_ARRAY)->count = 3;
  mb_expect_invalid(
      m, "operation 0 (T_ATTR): attribute 1 'axes' is I64_ARRAY of count 3 with a NULL array");
}

Test(model_kernels, empty_array_attribute_accepted) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "axes", MD_ATTR_I64_ARRAY);
  md__model *c = mb_expect_build(m);
  cr_assert_eq(c->operations[0].attrs[1].count, 0u);
  md__model_free(c);
}

/* ---- custom attributes against the kernel's md_attr_spec list ------------------------------- */

Test(model_kernels, unknown_attribute_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_F64);
  mb_attr(&b, 0, "beta", MD_ATTR_F64);
  mb_expect_invalid(m, "operation 0 (T_ATTR): unknown attribute 'beta' (attribute 1)");
}

Test(model_kernels, attribute_of_the_wrong_kind_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "alpha", MD_ATTR_I64);
  mb_expect_invalid(m, "operation 0 (T_ATTR): attribute 'alpha' must be F64, got I64");
}

Test(model_kernels, missing_required_attribute_rejected) {
  mb b;
  md_model *m = attr_model(&b);
  mb_attr(&b, 0, "n", MD_ATTR_I64);
  mb_expect_invalid(m, "operation 0 (T_ATTR): missing required attribute 'alpha' (F64)");
}

Test(model_kernels, attributes_on_a_kernel_without_specs_rejected) {
  mb b;
  md_model *m = mb_unary_model(&b, "T_UNARY");
  mb_attr(&b, 0, "x", MD_ATTR_I64);
  mb_expect_invalid(m, "operation 0 (T_UNARY): unknown attribute 'x'");
}

Test(model_kernels, attributes_are_deep_copied_and_reach_the_check) {
  mb b;
  md_model *m = attr_model(&b);
  char mode[] = "nearest";
  int64_t axes[3] = {0, -1, 7};
  char n_alpha[] = "alpha", n_axes[] = "axes", n_mode[] = "mode", n_n[] = "n";
  mb_attr(&b, 0, n_alpha, MD_ATTR_F64)->f64 = 0.125;
  md_attr *a = mb_attr(&b, 0, n_axes, MD_ATTR_I64_ARRAY);
  a->array = axes;
  a->count = 3;
  mb_attr(&b, 0, n_mode, MD_ATTR_STR)->str = mode;
  mb_attr(&b, 0, n_n, MD_ATTR_I64)->i64 = -42;
  md__model *c = mb_expect_build(m);

  cr_assert_eq(mbk_seen.n_attrs, 4u);
  cr_assert_eq(mbk_seen.attrs, c->operations[0].attrs,
               "check saw the caller's attrs, not the copy");

  memset(mode, 'X', sizeof mode - 1);
  memset(axes, 0x55, sizeof axes);
  memset(n_alpha, 'Z', sizeof n_alpha - 1);
  memset(n_axes, 'Z', sizeof n_axes - 1);
  memset(n_mode, 'Z', sizeof n_mode - 1);
  memset(n_n, 'Z', sizeof n_n - 1);
  memset(b.attrs, 0xEE, sizeof b.attrs);

  const md__operation *op = &c->operations[0];
  cr_assert_eq(op->n_attrs, 4u);
  cr_assert_str_eq(op->attrs[0].name, "alpha");
  cr_assert_eq(op->attrs[0].kind, MD_ATTR_F64);
  cr_assert_float_eq(op->attrs[0].f64, 0.125, 0);
  cr_assert_str_eq(op->attrs[1].name, "axes");
  cr_assert_eq(op->attrs[1].count, 3u);
  cr_assert_eq(op->attrs[1].array[0], 0);
  cr_assert_eq(op->attrs[1].array[1], -1);
  cr_assert_eq(op->attrs[1].array[2], 7);
  cr_assert_str_eq(op->attrs[2].name, "mode");
  cr_assert_str_eq(op->attrs[2].str, "nearest");
  cr_assert_str_eq(op->attrs[3].name, "n");
  cr_assert_eq(op->attrs[3].i64, -42);
  cr_assert_str_eq(op->name, "T_ATTR");
  md__model_free(c);
}

Test(model_kernels, custom_name_is_deep_copied) {
  char name[] = "T_UNARY";
  mb b;
  md__model *c = mb_expect_build(mb_unary_model(&b, name));
  memset(name, 'Q', sizeof name - 1);
  cr_assert_str_eq(c->operations[0].name, "T_UNARY");
  md__model_free(c);
}

/* ---- kernel checks ------------------------------------------------------------------------ */

static md_model *check_model(mb *b, int32_t v) {
  mb_init(b);
  uint32_t x = mb_input(b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t k = mb_const_i32(b, v);
  uint32_t y = mb_output(b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(b, "T_CHECK", 2, 1, x, k, y);
  return mb_model(b);
}

Test(model_kernels, check_sees_constant_values_and_declared_dims) {
  mb b;
  mb_expect_valid(check_model(&b, 5));
  cr_assert_eq(mbk_seen_value, 5);

  static const uint32_t d20[2] = {2, 0};
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 0, NULL);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, d20);
  mb_custom(&b, "T_UNARY", 1, 1, x, y);
  mbk_checks = 0;
  mb_expect_valid(mb_model(&b));
  cr_assert_eq(mbk_checks, 1);
  cr_assert_eq(mbk_seen.n_inputs, 1u);
  cr_assert_eq(mbk_seen.n_outputs, 1u);
  cr_assert_eq(mbk_seen.n_attrs, 0u);
}

Test(model_kernels, check_operand_info_describes_each_operand) {
  static const uint32_t d30[2] = {3, 0};
  mb b;
  mb_init(&b);
  uint32_t q = mb_input(&b, MD_TENSOR_QUANT8_ASYMM, 2, D22);
  b.operands[q].scale = 0.5f;
  b.operands[q].zero_point = 9;
  uint32_t nv = mb_no_value(&b, MD_INT32);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, d30);
  mb_custom(&b, "T_OPT", 2, 1, q, nv, y);
  md__model *c = mb_expect_build(mb_model(&b));
  cr_assert_eq(mbk_seen.n_inputs, 2u);
  cr_assert_eq(mbk_seen.n_outputs, 1u);
  cr_assert_eq(mbk_seen_in[0].type, MD_TENSOR_QUANT8_ASYMM);
  cr_assert_eq(mbk_seen_in[0].rank, 2u);
  cr_assert_eq(mbk_seen_dims[0][0], 2u);
  cr_assert_eq(mbk_seen_dims[0][1], 2u);
  cr_assert_float_eq(mbk_seen_in[0].scale, 0.5f, 0);
  cr_assert_eq(mbk_seen_in[0].zero_point, 9);
  cr_assert_eq(mbk_seen_in[0].lifetime, MD_SUBGRAPH_INPUT);
  cr_assert_null(mbk_seen_in[0].value);
  cr_assert_eq(mbk_seen_in[1].type, MD_INT32);
  cr_assert_eq(mbk_seen_in[1].lifetime, MD_NO_VALUE);
  cr_assert_null(mbk_seen_in[1].value);
  cr_assert_eq(mbk_seen_in[1].length, 0u);
  cr_assert_eq(mbk_seen_out[0].type, MD_TENSOR_FLOAT32);
  cr_assert_eq(mbk_seen_out[0].lifetime, MD_SUBGRAPH_OUTPUT);
  cr_assert_eq(mbk_seen_out[0].rank, 2u);
  cr_assert_eq(mbk_seen_dims[4][0], 3u);
  cr_assert_eq(mbk_seen_dims[4][1], 0u, "an unknown dim reaches the check as 0");
  md__model_free(c);
}

Test(model_kernels, check_sees_the_constant_in_the_models_own_copy) {
  mb b;
  md_model *m = check_model(&b, 5);
  md__model *c = mb_expect_build(m);
  cr_assert_eq(mbk_seen_in[1].value, c->operands[1].value);
  cr_assert_eq(mbk_seen_in[1].length, 4u);
  cr_assert_eq(mbk_seen_in[1].lifetime, MD_CONSTANT_COPY);
  md__model_free(c);
}

Test(model_kernels, check_invalid_argument_passed_through_with_prefix) {
  mb b;
  mb_expect_invalid(check_model(&b, 7), "operation 0 (T_CHECK): input 1: value 7 is forbidden");
}

Test(model_kernels, check_general_failure_passed_through_with_prefix) {
  mb b;
  mb_expect_fail(check_model(&b, 8), MD_GENERAL_FAILURE,
                 "operation 0 (T_CHECK): input 1: value 8 is unsupported");
}

Test(model_kernels, check_failing_without_message_still_named) {
  mb b;
  mb_expect_fail(check_model(&b, 9), MD_GENERAL_FAILURE,
                 "operation 0 (T_CHECK): the kernel's check failed with GENERAL_FAILURE");
}

Test(model_kernels, check_failure_set_in_status_but_not_returned_still_fails) {
  mb b;
  mb_expect_invalid(check_model(&b, 10),
                    "operation 0 (T_CHECK): input 1: value 10 is reported, not returned");
}

Test(model_kernels, kernel_without_check_accepted) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t z = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_NOCHECK", 1, 2, x, y, z);
  mb_expect_valid(mb_model(&b));
}

Test(model_kernels, builtin_check_rejects_a_bad_activation_operand) {
  mb b;
  md_model *m = mb_add_model(&b);
  /* ADD's third input must be an INT32 scalar; a float tensor there is an invalid model. */
  static const float w[4] = {1, 2, 3, 4};
  uint32_t k = mb_const(&b, MD_TENSOR_FLOAT32, 2, D22, w, sizeof w);
  b.op_in[0][2] = k;
  m = mb_model(&b);
  mb_expect_invalid(m, "operation 0 (ADD): ");
}

/* ---- md__model_supported ------------------------------------------------------------------ */

Test(model_kernels, supported_reports_a_valid_add_model) {
  mb b;
  uint8_t sup[1] = {0xAA};
  cr_assert_eq(md__model_supported(mb_add_model(&b), "sim", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(sup[0], 1);
}

Test(model_kernels, supported_reports_an_unsupported_tensor_type_as_0) {
  static const uint32_t d[2] = {2, 2};
  mb b;
  mb_init(&b);
  uint32_t a = mb_input(&b, MD_TENSOR_QUANT8_ASYMM, 2, d);
  uint32_t c = mb_input(&b, MD_TENSOR_QUANT8_ASYMM, 2, d);
  uint32_t act = mb_const_i32(&b, 0);
  uint32_t t = mb_temp(&b, MD_TENSOR_QUANT8_ASYMM, 2, d);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, d);
  uint32_t f = mb_input(&b, MD_TENSOR_FLOAT32, 2, d);
  mb_op(&b, MD_OP_ADD, 3, 1, a, c, act, t); /* quantized ADD: valid, no kernel support */
  mb_custom(&b, "T_UNARY", 1, 1, f, y);     /* float32: supported */
  md_model *m = mb_model(&b);
  uint8_t sup[2] = {0xAA, 0xAA};
  cr_assert_eq(md__model_supported(m, "sim", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(sup[0], 0);
  cr_assert_eq(sup[1], 1);
  md__model *out = NULL;
  cr_assert_eq(md__model_build(m, "sim", NULL, &out), MD_GENERAL_FAILURE);
  cr_assert(strstr(md__last_error(), "operation 0 (ADD): "), "%s", md__last_error());
}

Test(model_kernels, supported_reports_a_custom_unsupported_type_as_0) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT16, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT16, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, y);
  uint8_t sup[1] = {0xAA};
  cr_assert_eq(md__model_supported(mb_model(&b), "sim", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(sup[0], 0);
}

Test(model_kernels, supported_reports_a_missing_kernel_as_0) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, t);
  mb_custom(&b, "NO_SUCH_OP", 1, 1, t, y);
  uint8_t sup[2] = {0xAA, 0xAA};
  cr_assert_eq(md__model_supported(mb_model(&b), "sim", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(sup[0], 1);
  cr_assert_eq(sup[1], 0);
  cr_assert_eq(md__model_supported(mb_model(&b), "hip", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(sup[0], 0);
  cr_assert_eq(sup[1], 0);
}

Test(model_kernels, supported_rejects_a_model_its_kernel_calls_invalid) {
  mb b;
  uint8_t sup[1] = {0xAA};
  cr_assert_eq(md__model_supported(check_model(&b, 7), "sim", sup), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md__last_error(), "operation 0 (T_CHECK): input 1: value 7 is forbidden"), "%s",
            md__last_error());
  cr_assert_eq(sup[0], 0xAA);
}

Test(model_kernels, supported_sees_constant_reference_values) {
  int32_t data[4] = {0, 0, 8, 0};
  int fd = mb_memfd(data, sizeof data);
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t k = mb_const_ref(&b, MD_INT32, 0, NULL, mb_pool(&b, fd, sizeof data), 8, 4);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_CHECK", 2, 1, x, k, y);
  uint8_t sup[1] = {0xAA};
  cr_assert_eq(md__model_supported(mb_model(&b), "sim", sup), MD_NONE, "%s", md__last_error());
  cr_assert_eq(mbk_seen_value, 8);
  cr_assert_eq(sup[0], 0); /* value 8: the check's "unsupported" */
  close(fd);
}
