/* test_model_graph.c - model validation: operations, what they read and write, and their
 * order (runtime/src/model/model_check.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "test_model_builder.h"

TestSuite(model_graph, .init = mb_register_kernels);

static const uint32_t D22[2] = {2, 2};

/* ---- operation fields ------------------------------------------------------------------- */

Test(model_graph, unknown_operation_type_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].type = (md_operation_type)1;
  mb_expect_invalid(m, "operation 0: unknown operation type 1");
}

Test(model_graph, negative_operation_type_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].type = (md_operation_type)-5;
  mb_expect_invalid(m, "operation 0: unknown operation type -5");
}

Test(model_graph, custom_operation_without_name_rejected) {
  mb b;
  md_model *m = mb_unary_model(&b, NULL);
  mb_expect_invalid(m, "operation 0 (CUSTOM): custom_name is NULL");
}

Test(model_graph, custom_operation_with_empty_name_rejected) {
  mb b;
  md_model *m = mb_unary_model(&b, "");
  mb_expect_invalid(m, "operation 0 (CUSTOM): custom_name is empty");
}

Test(model_graph, operation_inputs_null_with_count_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].inputs = NULL;
  mb_expect_invalid(m, "operation 0 (ADD): n_inputs is 3 but inputs is NULL");
}

Test(model_graph, operation_outputs_null_with_count_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].outputs = NULL;
  mb_expect_invalid(m, "operation 0 (ADD): n_outputs is 1 but outputs is NULL");
}

Test(model_graph, operation_without_outputs_rejected) {
  mb b;
  mb_add_model(&b);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, 0u, y);
  md_model *m = mb_model(&b);
  b.ops[1].n_outputs = 0;
  mb_expect_invalid(m, "operation 1 (T_UNARY): has no outputs");
}

Test(model_graph, operation_input_out_of_range_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.op_in[0][2] = 9;
  mb_expect_invalid(m, "operation 0 (ADD): input 2 is operand 9, but the model has 4 operands");
}

Test(model_graph, operation_output_out_of_range_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.op_out[0][0] = UINT32_MAX;
  mb_expect_invalid(
      m, "operation 0 (ADD): output 0 is operand 4294967295, but the model has 4 operands");
}

Test(model_graph, builtin_operation_with_attributes_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  md_attr a = {.name = "alpha", .kind = MD_ATTR_F64, .f64 = 1.0};
  b.ops[0].n_attrs = 1;
  b.ops[0].attrs = &a;
  mb_expect_invalid(
      m, "operation 0 (ADD): has 1 attributes, but only CUSTOM operations take attributes");
}

Test(model_graph, builtin_operation_custom_name_ignored) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.ops[0].custom_name = "T_UNARY"; /* not a CUSTOM operation: never read */
  md__model *c = mb_expect_build(m);
  cr_assert_str_eq(c->operations[0].name, "ADD");
  cr_assert_str_eq(c->operations[0].kernel->name, "ADD");
  md__model_free(c);
}

/* ---- what an operation writes ------------------------------------------------------------ */

typedef struct bad_write_case {
  md_lifetime lifetime;
  char msg[192]; /* inline: parameters are copied into the test process, pointers are not */
} bad_write_case;

ParameterizedTestParameters(model_graph, operation_writing_a_non_writable_operand_rejected) {
  static bad_write_case cases[] = {
      {MD_SUBGRAPH_INPUT,
       "operation 1 (T_UNARY): output 0 is operand 4 (SUBGRAPH_INPUT), which an operation may not "
       "write"},
      {MD_CONSTANT_COPY,
       "operation 1 (T_UNARY): output 0 is operand 4 (CONSTANT_COPY), which an operation may not "
       "write"},
      {MD_CONSTANT_REFERENCE,
       "operation 1 (T_UNARY): output 0 is operand 4 (CONSTANT_REFERENCE), which an operation may "
       "not write"},
      {MD_NO_VALUE,
       "operation 1 (T_UNARY): output 0 is operand 4 (NO_VALUE), which an operation may not write"},
  };
  return cr_make_param_array(bad_write_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_write_case *c, model_graph,
                  operation_writing_a_non_writable_operand_rejected) {
  static const float w[4] = {1, 2, 3, 4};
  int fd = mb_memfd(w, sizeof w);
  mb b;
  mb_add_model(&b);
  uint32_t target = 0;
  switch (c->lifetime) {
    case MD_SUBGRAPH_INPUT: target = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22); break;
    case MD_CONSTANT_COPY: target = mb_const(&b, MD_TENSOR_FLOAT32, 2, D22, w, sizeof w); break;
    case MD_CONSTANT_REFERENCE:
      target = mb_const_ref(&b, MD_TENSOR_FLOAT32, 2, D22, mb_pool(&b, fd, sizeof w), 0, sizeof w);
      break;
    default: target = mb_no_value(&b, MD_TENSOR_FLOAT32); break;
  }
  cr_assert_eq(target, 4u);
  mb_custom(&b, "T_UNARY", 1, 1, 0u, target);
  mb_expect_invalid(mb_model(&b), c->msg);
  close(fd);
}

Test(model_graph, operand_written_by_two_operations_rejected) {
  mb b;
  mb_add_model(&b);
  mb_custom(&b, "T_UNARY", 1, 1, 0u, 3u);
  mb_expect_invalid(mb_model(&b),
                    "operation 1 (T_UNARY): output 0 is operand 3, already written by operation 0");
}

Test(model_graph, operand_written_twice_by_one_operation_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_NOCHECK", 1, 2, x, y, y);
  mb_expect_invalid(
      mb_model(&b),
      "operation 0 (T_NOCHECK): output 1 is operand 1, already written by operation 0");
}

Test(model_graph, temporary_never_written_rejected) {
  mb b;
  mb_add_model(&b);
  mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_expect_invalid(mb_model(&b), "operand 4 (TEMPORARY_VARIABLE) is not written by any operation");
}

Test(model_graph, model_output_never_written_rejected) {
  mb b;
  mb_add_model(&b);
  mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_expect_invalid(mb_model(&b), "operand 4 (SUBGRAPH_OUTPUT) is not written by any operation");
}

/* ---- what an operation reads, and order ---------------------------------------------------- */

Test(model_graph, reading_a_temporary_nobody_writes_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  (void)x;
  mb_custom(&b, "T_UNARY", 1, 1, t, y);
  mb_expect_invalid(mb_model(&b),
                    "operation 0 (T_UNARY): input 0 is operand 1 (TEMPORARY_VARIABLE), which no "
                    "operation writes");
}

Test(model_graph, operations_out_of_execution_order_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, t, y); /* reads t before ... */
  mb_custom(&b, "T_UNARY", 1, 1, x, t); /* ... it is written */
  mb_expect_invalid(mb_model(&b),
                    "operation 0 (T_UNARY): input 0 is operand 1, written by operation 1, which "
                    "does not come before it (operations must be in execution order)");
}

Test(model_graph, operations_in_execution_order_accepted) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, t);
  mb_custom(&b, "T_UNARY", 1, 1, t, y);
  md__model *c = mb_expect_build(mb_model(&b));
  cr_assert_eq(c->n_operations, 2u);
  cr_assert_eq(c->operations[0].outputs[0], t);
  cr_assert_eq(c->operations[1].inputs[0], t);
  cr_assert_eq(c->operands[t].io_index, UINT32_MAX);
  md__model_free(c);
}

Test(model_graph, operation_reading_its_own_output_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  (void)x;
  mb_custom(&b, "T_UNARY", 1, 1, t, t);
  mb_custom(&b, "T_UNARY", 1, 1, t, y);
  mb_expect_invalid(mb_model(&b),
                    "operation 0 (T_UNARY): input 0 is operand 1, written by operation 0, which "
                    "does not come before it");
}

Test(model_graph, unused_temporary_accepted) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, t); /* t is never read */
  mb_custom(&b, "T_UNARY", 1, 1, x, y);
  mb_expect_valid(mb_model(&b));
}

Test(model_graph, unused_model_input_and_constant_accepted) {
  mb b;
  mb_add_model(&b);
  mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_const_i32(&b, 42);
  mb_no_value(&b, MD_INT32);
  mb_expect_valid(mb_model(&b));
}

Test(model_graph, model_output_read_by_a_later_operation_accepted) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y0 = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y1 = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_UNARY", 1, 1, x, y0);
  mb_custom(&b, "T_UNARY", 1, 1, y0, y1);
  mb_expect_valid(mb_model(&b));
}

Test(model_graph, same_operand_twice_as_input_accepted) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.op_in[0][1] = 0; /* ADD(a, a): operand 1 is then an unused model input */
  mb_expect_valid(m);
}

Test(model_graph, constants_and_inputs_readable_by_any_operation) {
  static const float w[4] = {1, 2, 3, 4};
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t k = mb_const(&b, MD_TENSOR_FLOAT32, 2, D22, w, sizeof w);
  uint32_t act = mb_const_i32(&b, 0);
  uint32_t t = mb_temp(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_op(&b, MD_OP_ADD, 3, 1, x, k, act, t);
  mb_op(&b, MD_OP_MUL, 3, 1, t, k, act, y);
  mb_expect_valid(mb_model(&b));
}

/* ---- NO_VALUE ---------------------------------------------------------------------------- */

Test(model_graph, no_value_as_optional_input_accepted) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t nv = mb_no_value(&b, MD_INT32);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  mb_custom(&b, "T_OPT", 2, 1, x, nv, y);
  mb_expect_valid(mb_model(&b));
  cr_assert_eq(mbk_seen.n_inputs, 2u);
  cr_assert_eq(mbk_seen_in[1].lifetime, MD_NO_VALUE);
}

Test(model_graph, no_value_as_required_input_rejected) {
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, D22);
  uint32_t nv = mb_no_value(&b, MD_TENSOR_FLOAT32);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, D22);
  (void)x;
  mb_custom(&b, "T_OPT", 1, 1, nv, y);
  mb_expect_invalid(mb_model(&b),
                    "operation 0 (T_OPT): input 0 is operand 1 (NO_VALUE), but input 0 is not "
                    "optional (T_OPT requires its first 1 inputs)");
}

Test(model_graph, no_value_as_builtin_required_input_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].lifetime = MD_NO_VALUE; /* ADD's fused activation is required */
  b.operands[2].offset = 0;
  b.operands[2].length = 0;
  m->operand_values = NULL;
  m->operand_values_size = 0;
  mb_expect_invalid(
      m, "operation 0 (ADD): input 2 is operand 2 (NO_VALUE), but input 2 is not optional");
}

Test(model_graph, no_value_with_storage_rejected) {
  mb b;
  mb_add_model(&b);
  uint32_t nv = mb_no_value(&b, MD_INT32);
  b.operands[nv].length = 4;
  mb_expect_invalid(mb_model(&b), "operand 4: NO_VALUE has no storage");
}
