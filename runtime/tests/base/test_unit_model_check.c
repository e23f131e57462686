/* test_unit_model_check.c - exact results of the model module's small functions at their
 * boundaries: operand byte sizes (shape.c: scalars, ranks 0/1/8/9, unknown dims, overflow in
 * any axis order), the dims combination rule of SPEC 3 with the axis it reports, dims
 * formatting, the names used in messages (model_int.h), and model validation rules met one at a
 * time on a valid model (quantized ranges at both ends, storage of every lifetime, the model's
 * NULL arrays). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model_int.h"
#include "test_model_builder.h"

TestSuite(unit_model, .init = mb_register_kernels);

#define DIMS(...) ((const uint32_t[]){__VA_ARGS__})

/* ---- shape.c -------------------------------------------------------------------------- */

Test(unit_model, type_is_scalar_for_each_type) {
  cr_assert(md__type_is_scalar(MD_FLOAT32));
  cr_assert(md__type_is_scalar(MD_INT32));
  cr_assert(md__type_is_scalar(MD_UINT32));
  cr_assert(md__type_is_scalar(MD_BOOL));
  cr_assert_not(md__type_is_scalar(MD_TENSOR_FLOAT32));
  cr_assert_not(md__type_is_scalar(MD_TENSOR_INT32));
  cr_assert_not(md__type_is_scalar(MD_TENSOR_QUANT8_ASYMM));
  cr_assert_not(md__type_is_scalar(MD_TENSOR_FLOAT16));
  cr_assert_not(md__type_is_scalar(MD_TENSOR_QUANT8_ASYMM_SIGNED));
  cr_assert_not(md__type_is_scalar((md_operand_type)7));
}

Test(unit_model, type_bytes_exact) {
  /* scalars: their size whatever the dims say */
  cr_assert_eq(md__type_bytes(MD_FLOAT32, 0, NULL), 4);
  cr_assert_eq(md__type_bytes(MD_INT32, 3, DIMS(5, 5, 5)), 4);
  cr_assert_eq(md__type_bytes(MD_BOOL, 0, NULL), 1);
  cr_assert_eq(md__type_bytes(MD_UINT32, 0, NULL), 4);
  /* unknown type */
  cr_assert_eq(md__type_bytes((md_operand_type)7, 1, DIMS(4)), 0);
  /* tensors */
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 2, DIMS(2, 3)), 24);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT16, 2, DIMS(2, 3)), 12);
  cr_assert_eq(md__type_bytes(MD_TENSOR_QUANT8_ASYMM, 3, DIMS(2, 3, 5)), 30);
  cr_assert_eq(md__type_bytes(MD_TENSOR_QUANT8_ASYMM_SIGNED, 1, DIMS(7)), 7);
  cr_assert_eq(md__type_bytes(MD_TENSOR_INT32, 1, DIMS(1)), 4);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 8, DIMS(1, 2, 1, 2, 1, 2, 1, 2)), 64);
  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 9, nine), 0);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 0, NULL), 0);
  /* not fully known: 0 wherever the unknown axis is, even after an overflow */
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 2, DIMS(0, 3)), 0);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 2, DIMS(3, 0)), 0);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 4, DIMS(UINT32_MAX, UINT32_MAX, UINT32_MAX, 0)),
               0);
  /* overflow of 64 bits */
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 3, DIMS(UINT32_MAX, UINT32_MAX, UINT32_MAX)),
               UINT64_MAX);
  /* 4 * 2^31 * 2^31 = 2^64: one past */
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 2, DIMS(1u << 31, 1u << 31)), UINT64_MAX);
  /* 1 * 2^32 * 2^31 = 2^63 fits; 2^31 * 2^31 * 2 = 2^63 fits for 2-byte elements */
  cr_assert_eq(md__type_bytes(MD_TENSOR_QUANT8_ASYMM, 3, DIMS(1u << 31, 1u << 31, 2)),
               UINT64_C(1) << 63);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT16, 2, DIMS(1u << 31, 1u << 31)), UINT64_C(1) << 63);
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT16, 3, DIMS(1u << 31, 1u << 31, 2)), UINT64_MAX);
  /* the largest exact value: 4 * (2^32-1) * (2^30) < 2^64 */
  cr_assert_eq(md__type_bytes(MD_TENSOR_FLOAT32, 2, DIMS(UINT32_MAX, 1u << 30)),
               (uint64_t)UINT32_MAX << 32);
}

static void expect_combine(uint32_t ra, const uint32_t *da, uint32_t rb, const uint32_t *db,
                           uint32_t want_rank, const uint32_t *want) {
  uint32_t out[MD_MAX_RANK] = {0}, r = 99, axis = 77;
  cr_assert_eq(md__dims_combine(ra, da, rb, db, &r, out, &axis), 0);
  cr_assert_eq(r, want_rank);
  for (uint32_t i = 0; i < want_rank; i++) cr_assert_eq(out[i], want[i], "axis %u", i);
  cr_assert_eq(axis, 77, "axis written on success");
}

static void expect_no_combine(uint32_t ra, const uint32_t *da, uint32_t rb, const uint32_t *db,
                              uint32_t want_axis) {
  uint32_t out[MD_MAX_RANK] = {5, 5, 5, 5, 5, 5, 5, 5}, r = 99, axis = 77;
  cr_assert_eq(md__dims_combine(ra, da, rb, db, &r, out, &axis), -1);
  cr_assert_eq(axis, want_axis);
  cr_assert_eq(r, 99, "rank written on failure");
  for (uint32_t i = 0; i < MD_MAX_RANK; i++) cr_assert_eq(out[i], 5, "dims written on failure");
  /* a NULL axis is allowed */
  cr_assert_eq(md__dims_combine(ra, da, rb, db, &r, out, NULL), -1);
}

Test(unit_model, dims_combine_every_case) {
  expect_combine(0, NULL, 2, DIMS(2, 3), 2, DIMS(2, 3));
  expect_combine(2, DIMS(2, 3), 0, NULL, 2, DIMS(2, 3));
  expect_combine(0, NULL, 0, NULL, 0, NULL);
  expect_combine(2, DIMS(0, 3), 2, DIMS(2, 0), 2, DIMS(2, 3));
  expect_combine(2, DIMS(2, 0), 2, DIMS(0, 0), 2, DIMS(2, 0));
  expect_combine(3, DIMS(4, 5, 6), 3, DIMS(4, 5, 6), 3, DIMS(4, 5, 6));
  expect_combine(1, DIMS(1), 1, DIMS(0), 1, DIMS(1));
  expect_no_combine(2, DIMS(2, 3), 3, DIMS(2, 3, 1), MD_MAX_RANK);
  expect_no_combine(2, DIMS(2, 3), 2, DIMS(2, 4), 1);
  expect_no_combine(2, DIMS(2, 3), 2, DIMS(1, 3), 0);
  expect_no_combine(3, DIMS(0, 3, 7), 3, DIMS(5, 3, 8), 2);
  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_no_combine(9, nine, 9, nine, MD_MAX_RANK);
  expect_no_combine(9, nine, 0, NULL, MD_MAX_RANK);
  expect_no_combine(0, NULL, 9, nine, MD_MAX_RANK);
  expect_combine(8, nine, 8, nine, 8, nine);
  expect_combine(0, NULL, 8, nine, 8, nine);
  /* in place: the output may be one of the inputs */
  uint32_t a[2] = {0, 3};
  uint32_t r = 0;
  cr_assert_eq(md__dims_combine(2, a, 2, DIMS(2, 0), &r, a, NULL), 0);
  cr_assert_eq(a[0], 2);
  cr_assert_eq(a[1], 3);
}

Test(unit_model, dims_known_and_str) {
  cr_assert(md__dims_known(1, DIMS(1)));
  cr_assert(md__dims_known(8, DIMS(1, 2, 3, 4, 5, 6, 7, 8)));
  cr_assert_not(md__dims_known(0, NULL));
  cr_assert_not(md__dims_known(2, DIMS(2, 0)));
  cr_assert_not(md__dims_known(2, DIMS(0, 2)));
  uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  cr_assert_not(md__dims_known(9, nine));
  char buf[32];
  cr_assert_str_eq(md__dims_str(3, DIMS(2, 0, 3), buf, sizeof buf), "[2,0,3]");
  cr_assert_str_eq(md__dims_str(0, NULL, buf, sizeof buf), "[?]");
  cr_assert_str_eq(md__dims_str(1, DIMS(4294967295u), buf, sizeof buf), "[4294967295]");
  cr_assert_str_eq(md__dims_str(2, DIMS(12, 34), buf, 4), "[12");
  cr_assert_str_eq(md__dims_str(1, DIMS(5), buf, 4), "[5]");
  buf[0] = 'q';
  md__dims_str(1, DIMS(5), buf, 0);
  cr_assert_eq(buf[0], 'q');
}

/* ---- names ---------------------------------------------------------------------------- */

Test(unit_model, attr_kind_names_and_op_labels) {
  cr_assert_str_eq(md__attr_kind_name(MD_ATTR_I64), "I64");
  cr_assert_str_eq(md__attr_kind_name(MD_ATTR_F64), "F64");
  cr_assert_str_eq(md__attr_kind_name(MD_ATTR_STR), "STR");
  cr_assert_str_eq(md__attr_kind_name(MD_ATTR_I64_ARRAY), "I64_ARRAY");
  cr_assert_null(md__attr_kind_name((md_attr_kind)4));
  cr_assert_null(md__attr_kind_name((md_attr_kind)-1));

  md_operation op = {.type = MD_OP_SOFTMAX, .custom_name = "ignored"};
  cr_assert_str_eq(md__op_label(&op), "SOFTMAX");
  op.type = (md_operation_type)77;
  cr_assert_str_eq(md__op_label(&op), "unknown type");
  op.type = MD_OP_CUSTOM;
  cr_assert_str_eq(md__op_label(&op), "ignored");
  op.custom_name = "";
  cr_assert_str_eq(md__op_label(&op), "CUSTOM");
  op.custom_name = NULL;
  cr_assert_str_eq(md__op_label(&op), "CUSTOM");

  md__clear_error();
  cr_assert_eq(md__op_fail(MD_GENERAL_FAILURE, 3, "ADD", "x=%d", 5), MD_GENERAL_FAILURE);
  cr_assert_str_eq(md__last_error(), "operation 3 (ADD): x=5");
  cr_assert_eq(md__model_oom("things"), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_str_eq(md__last_error(), "model: out of memory for things");
}

/* ---- validation, one rule at a time --------------------------------------------------- */

static md_status validate(const md_model *m) {
  md__clear_error();
  return md__model_validate(m);
}

#define expect_validate(m, want, msg)                                                         \
  do {                                                                                        \
    md_status s_ = validate(m);                                                               \
    cr_assert_eq(s_, (want), "status %s: %s", md_status_name(s_), md__last_error());        \
    if ((want) != MD_NONE)                                                                    \
      cr_assert(strstr(md__last_error(), (msg)) != NULL, "message \"%s\" lacks \"%s\"",      \
                md__last_error(), (msg));                                                     \
  } while (0)

Test(unit_model, null_arrays_with_counts_rejected_each) {
  mb b;
  md_model *m = mb_add_model(&b);
  expect_validate(m, MD_NONE, "");
  md_model c = *m;
  c.operands = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "n_operands is 4 but operands is NULL");
  c = *m;
  c.operations = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "n_operations is 1 but operations is NULL");
  c = *m;
  c.inputs = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "n_inputs is 2 but inputs is NULL");
  c = *m;
  c.outputs = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "n_outputs is 1 but outputs is NULL");
  c = *m;
  c.n_pools = 1;
  c.pools = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "n_pools is 1 but pools is NULL");
  c = *m;
  c.operand_values = NULL;
  expect_validate(&c, MD_INVALID_ARGUMENT, "operand_values_size is 4 but operand_values is NULL");
  /* a zero count with a NULL array is fine */
  c = *m;
  c.n_pools = 0;
  c.pools = NULL;
  expect_validate(&c, MD_NONE, "");
  c.n_operations = 0;
  expect_validate(&c, MD_INVALID_ARGUMENT, "model: has no operations");
  c = *m;
  c.n_inputs = 0;
  expect_validate(&c, MD_INVALID_ARGUMENT, "model: has no inputs");
  c = *m;
  c.n_outputs = 0;
  expect_validate(&c, MD_INVALID_ARGUMENT, "model: has no outputs");
}

Test(unit_model, quantized_ranges_both_ends) {
  static const struct { md_operand_type t; float scale; int32_t zp; int ok; } cases[] = {
      {MD_TENSOR_QUANT8_ASYMM, 0.5f, 0, 1},
      {MD_TENSOR_QUANT8_ASYMM, 0.5f, 255, 1},
      {MD_TENSOR_QUANT8_ASYMM, 0.5f, 256, 0},
      {MD_TENSOR_QUANT8_ASYMM, 0.5f, -1, 0},
      {MD_TENSOR_QUANT8_ASYMM, 0.0f, 0, 0},
      {MD_TENSOR_QUANT8_ASYMM, -0.5f, 0, 0},
      {MD_TENSOR_QUANT8_ASYMM, 1e-38f, 0, 1},
      {MD_TENSOR_QUANT8_ASYMM, INFINITY, 0, 0},
      {MD_TENSOR_QUANT8_ASYMM, NAN, 0, 0},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 0.5f, -128, 1},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 0.5f, 127, 1},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 0.5f, 128, 0},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 0.5f, -129, 0},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 0.0f, 0, 0},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, INFINITY, 0, 0},
      {MD_TENSOR_INT32, 0.0f, 0, 1},
      {MD_TENSOR_INT32, 0.25f, 0, 1},
      {MD_TENSOR_INT32, 0.25f, 1, 0},
      {MD_TENSOR_INT32, 0.25f, -1, 0},
      {MD_TENSOR_INT32, -0.25f, 0, 0},
      {MD_TENSOR_INT32, INFINITY, 0, 0},
      {MD_TENSOR_INT32, NAN, 0, 0},
      {MD_TENSOR_FLOAT32, 0.0f, 0, 1},
      {MD_TENSOR_FLOAT32, 0.5f, 0, 0},
      {MD_TENSOR_FLOAT32, -0.5f, 0, 0},
      {MD_TENSOR_FLOAT32, 0.0f, 1, 0},
      {MD_TENSOR_FLOAT32, 0.0f, -1, 0},
      {MD_TENSOR_FLOAT16, 0.0f, 2, 0},
      {MD_INT32, 0.5f, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mb b;
    md_model *m = mb_add_model(&b);
    /* an unused model input of the type under test */
    uint32_t k = cases[i].t == MD_INT32 ? mb_input(&b, MD_INT32, 0, NULL)
                                        : mb_input(&b, cases[i].t, 2, MB_D22);
    b.operands[k].scale = cases[i].scale;
    b.operands[k].zero_point = cases[i].zp;
    m = mb_model(&b);
    md_status s = validate(m);
    cr_assert_eq(s, cases[i].ok ? MD_NONE : MD_INVALID_ARGUMENT, "case %zu (type %d, %g, %d): %s",
                 i, cases[i].t, (double)cases[i].scale, cases[i].zp, md__last_error());
    if (!cases[i].ok) {
      char want[32];
      snprintf(want, sizeof want, "operand %u:", k);
      cr_assert(strstr(md__last_error(), want), "%s", md__last_error());
    }
  }
}

Test(unit_model, storage_of_each_lifetime) {
  static const md_lifetime non_const[] = {MD_TEMPORARY_VARIABLE, MD_SUBGRAPH_INPUT,
                                          MD_SUBGRAPH_OUTPUT, MD_NO_VALUE};
  for (size_t i = 0; i < sizeof non_const / sizeof non_const[0]; i++) {
    for (int field = 0; field < 3; field++) {
      mb b;
      mb_add_model(&b);
      uint32_t k = mb_operand(&b, MD_TENSOR_FLOAT32, non_const[i], 2, MB_D22);
      if (non_const[i] == MD_TEMPORARY_VARIABLE || non_const[i] == MD_SUBGRAPH_OUTPUT)
        mb_op(&b, MD_OP_RELU, 1, 1, 0u, k);
      md_model *m = mb_model(&b);
      expect_validate(m, MD_NONE, "");
      if (field == 0) b.operands[k].pool = 1;
      if (field == 1) b.operands[k].offset = 1;
      if (field == 2) b.operands[k].length = 1;
      expect_validate(m, MD_INVALID_ARGUMENT, "has no storage: pool, offset and length must be 0");
    }
  }
  /* lifetimes past the enum */
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[0].lifetime = (md_lifetime)6;
  expect_validate(m, MD_INVALID_ARGUMENT, "operand 0: unknown lifetime 6");
  b.operands[0].lifetime = (md_lifetime)-1;
  expect_validate(m, MD_INVALID_ARGUMENT, "unknown lifetime");
  b.operands[0].lifetime = MD_SUBGRAPH_INPUT;
  b.operands[0].type = (md_operand_type)7;
  expect_validate(m, MD_INVALID_ARGUMENT, "operand 0: unknown type 7");
  b.operands[0].type = MD_TENSOR_FLOAT32;
  b.operands[0].rank = 9;
  expect_validate(m, MD_INVALID_ARGUMENT, "rank 9 is over the maximum 8");
  b.operands[0].rank = 2;
  b.operands[0].dims = NULL;
  expect_validate(m, MD_INVALID_ARGUMENT, "has rank 2 but dims is NULL");
  b.operands[0].rank = 0;
  expect_validate(m, MD_NONE, "");
  b.operands[2].rank = 1;
  b.operands[2].dims = DIMS(1);
  expect_validate(m, MD_INVALID_ARGUMENT, "operand 2: INT32 is a scalar and must have rank 0, got 1");
}

Test(unit_model, constant_ranges_at_the_edges) {
  mb b;
  md_model *m = mb_add_model(&b);
  /* the activation constant is the last 4 bytes of operand_values */
  cr_assert_eq(b.operands[2].offset, 0);
  b.values_size = 8;
  m = mb_model(&b);
  b.operands[2].offset = 4;
  expect_validate(m, MD_NONE, "");
  b.operands[2].offset = 5;
  expect_validate(m, MD_INVALID_ARGUMENT, "offset 5 + length 4 is past operand_values (8 bytes)");
  b.operands[2].offset = 8;
  expect_validate(m, MD_INVALID_ARGUMENT, "is past operand_values");
  b.operands[2].offset = 9;
  expect_validate(m, MD_INVALID_ARGUMENT, "is past operand_values");
  b.operands[2].offset = UINT64_MAX;
  expect_validate(m, MD_INVALID_ARGUMENT, "is past operand_values");
  b.operands[2].offset = 0;
  b.operands[2].length = 5;
  expect_validate(m, MD_INVALID_ARGUMENT, "length 5 does not match its byte size 4 (INT32 scalar)");
  b.operands[2].length = 3;
  expect_validate(m, MD_INVALID_ARGUMENT, "length 3 does not match its byte size 4");
  b.operands[2].length = 0;
  expect_validate(m, MD_INVALID_ARGUMENT, "operand 2: CONSTANT_COPY length is 0");
  b.operands[2].length = 4;
  b.operands[2].pool = 1;
  expect_validate(m, MD_INVALID_ARGUMENT, "CONSTANT_COPY must have pool 0, got 1");
  b.operands[2].pool = 0;
  b.operands[2].lifetime = MD_CONSTANT_REFERENCE;
  expect_validate(m, MD_INVALID_ARGUMENT, "CONSTANT_REFERENCE pool 0, but the model has 0 pools");
}

Test(unit_model, custom_operation_name_messages) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].type = MD_OP_CUSTOM;
  b.ops[0].custom_name = NULL;
  expect_validate(m, MD_INVALID_ARGUMENT, "operation 0 (CUSTOM): custom_name is NULL");
  b.ops[0].custom_name = "";
  expect_validate(m, MD_INVALID_ARGUMENT, "operation 0 (CUSTOM): custom_name is empty");
  b.ops[0].custom_name = "x";
  b.ops[0].n_outputs = 1;
  b.ops[0].outputs = NULL;
  expect_validate(m, MD_INVALID_ARGUMENT, "operation 0 (x): n_outputs is 1 but outputs is NULL");
  b.ops[0].outputs = b.op_out[0];
  b.ops[0].n_inputs = 3;
  b.ops[0].inputs = NULL;
  expect_validate(m, MD_INVALID_ARGUMENT, "operation 0 (x): n_inputs is 3 but inputs is NULL");
  b.ops[0].inputs = b.op_in[0];
  b.ops[0].n_attrs = 1;
  b.ops[0].attrs = NULL;
  expect_validate(m, MD_INVALID_ARGUMENT, "operation 0 (x): n_attrs is 1 but attrs is NULL");
  md_attr at = {.name = "s", .kind = MD_ATTR_STR, .str = NULL};
  b.ops[0].attrs = &at;
  expect_validate(m, MD_INVALID_ARGUMENT, "attribute 0 's' is STR with a NULL string");
  at.str = "";
  expect_validate(m, MD_NONE, "");
}
