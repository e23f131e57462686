/* test_model.c - model validation: the model's arrays, operands, constants, constant pools,
 * model inputs/outputs (runtime/src/model/model_check.c), and the prepared model's deep copy
 * (runtime/src/model/model.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_model_builder.h"

TestSuite(model, .init = mb_register_kernels);

/* ---- arguments and the model's arrays ---------------------------------------------------- */

Test(model, null_model_rejected) { mb_expect_invalid(NULL, "model: NULL"); }

Test(model, null_platform_rejected) {
  mb b;
  mb_expect_fail_on(mb_add_model(&b), NULL, MD_INVALID_ARGUMENT, "no platform");
}

Test(model, null_out_rejected) {
  mb b;
  cr_assert_eq(md__model_build(mb_add_model(&b), "sim", NULL, NULL), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md__last_error(), "out is NULL"), "%s", md__last_error());
  cr_assert_eq(md__model_supported(mb_add_model(&b), "sim", NULL), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md__last_error(), "supported is NULL"), "%s", md__last_error());
}

typedef struct null_array_case {
  int field;
  char msg[192]; /* inline: parameters are copied into the test process, pointers are not */
} null_array_case;

ParameterizedTestParameters(model, null_array_with_count_rejected) {
  static null_array_case cases[] = {
      {0, "model: n_operands is 4 but operands is NULL"},
      {1, "model: n_operations is 1 but operations is NULL"},
      {2, "model: n_inputs is 2 but inputs is NULL"},
      {3, "model: n_outputs is 1 but outputs is NULL"},
      {4, "model: n_pools is 1 but pools is NULL"},
      {5, "model: operand_values_size is 4 but operand_values is NULL"},
  };
  return cr_make_param_array(null_array_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(null_array_case *c, model, null_array_with_count_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  switch (c->field) {
    case 0: m->operands = NULL; break;
    case 1: m->operations = NULL; break;
    case 2: m->inputs = NULL; break;
    case 3: m->outputs = NULL; break;
    case 4:
      m->n_pools = 1;
      m->pools = NULL;
      break;
    case 5: m->operand_values = NULL; break;
  }
  mb_expect_invalid(m, c->msg);
}

Test(model, model_without_operations_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  m->n_operations = 0;
  mb_expect_invalid(m, "model: has no operations");
}

Test(model, model_without_inputs_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  m->n_inputs = 0;
  mb_expect_invalid(m, "model: has no inputs");
}

Test(model, model_without_outputs_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  m->n_outputs = 0;
  mb_expect_invalid(m, "model: has no outputs");
}

/* ---- operands ----------------------------------------------------------------------------- */

/* Operand 0 of the ADD model (a SUBGRAPH_INPUT [2,2]) replaced by the case's fields. */
typedef struct bad_operand_case {
  md_operand_type type;
  uint32_t rank;
  int null_dims;
  float scale;
  int32_t zero_point;
  md_lifetime lifetime;
  uint32_t pool;
  uint64_t offset, length;
  char msg[192]; /* inline: parameters are copied into the test process, pointers are not */
} bad_operand_case;

#define IN MD_SUBGRAPH_INPUT
ParameterizedTestParameters(model, bad_operand_rejected) {
  static bad_operand_case cases[] = {
      {(md_operand_type)7, 2, 0, 0, 0, IN, 0, 0, 0, "operand 0: unknown type 7"},
      {(md_operand_type)-1, 2, 0, 0, 0, IN, 0, 0, 0, "operand 0: unknown type -1"},
      {MD_TENSOR_FLOAT32, 2, 0, 0, 0, (md_lifetime)6, 0, 0, 0, "operand 0: unknown lifetime 6"},
      {MD_INT32, 1, 0, 0, 0, IN, 0, 0, 0,
       "operand 0: INT32 is a scalar and must have rank 0, got 1"},
      {MD_FLOAT32, 2, 0, 0, 0, IN, 0, 0, 0,
       "operand 0: FLOAT32 is a scalar and must have rank 0, got 2"},
      {MD_BOOL, 1, 0, 0, 0, IN, 0, 0, 0, "operand 0: BOOL is a scalar"},
      {MD_UINT32, 1, 0, 0, 0, IN, 0, 0, 0, "operand 0: UINT32 is a scalar"},
      {MD_TENSOR_FLOAT32, 9, 0, 0, 0, IN, 0, 0, 0,
       "operand 0: TENSOR_FLOAT32 rank 9 is over the maximum 8"},
      {MD_TENSOR_FLOAT32, 2, 1, 0, 0, IN, 0, 0, 0,
       "operand 0: TENSOR_FLOAT32 has rank 2 but dims is NULL"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, 0, 0, IN, 0, 0, 0,
       "operand 0: TENSOR_QUANT8_ASYMM scale must be finite and > 0, got 0"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, -1.0f, 0, IN, 0, 0, 0, "scale must be finite and > 0, got -1"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, NAN, 0, IN, 0, 0, 0, "scale must be finite and > 0, got nan"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, INFINITY, 0, IN, 0, 0, 0,
       "scale must be finite and > 0, got inf"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, 0.5f, 256, IN, 0, 0, 0,
       "operand 0: TENSOR_QUANT8_ASYMM zero_point 256 is outside [0, 255]"},
      {MD_TENSOR_QUANT8_ASYMM, 2, 0, 0.5f, -1, IN, 0, 0, 0, "zero_point -1 is outside [0, 255]"},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, 0, 0.5f, 128, IN, 0, 0, 0,
       "operand 0: TENSOR_QUANT8_ASYMM_SIGNED zero_point 128 is outside [-128, 127]"},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, 0, 0.5f, -129, IN, 0, 0, 0,
       "zero_point -129 is outside [-128, 127]"},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, 0, 0.0f, 0, IN, 0, 0, 0,
       "scale must be finite and > 0, got 0"},
      {MD_TENSOR_FLOAT32, 2, 0, 0.5f, 0, IN, 0, 0, 0,
       "operand 0: TENSOR_FLOAT32 is not quantized: scale and zero_point must be 0, got 0.5 and 0"},
      {MD_TENSOR_INT32, 2, 0, 0, 3, IN, 0, 0, 0, "operand 0: TENSOR_INT32 zero_point must be 0, got 3"},
      {MD_TENSOR_INT32, 2, 0, 0.25f, -1, IN, 0, 0, 0, "TENSOR_INT32 zero_point must be 0, got -1"},
      {MD_TENSOR_INT32, 2, 0, -0.5f, 0, IN, 0, 0, 0, "TENSOR_INT32 scale must be finite and >= 0, got -0.5"},
      {MD_TENSOR_INT32, 2, 0, NAN, 0, IN, 0, 0, 0, "TENSOR_INT32 scale must be finite and >= 0, got nan"},
      {MD_TENSOR_INT32, 2, 0, INFINITY, 0, IN, 0, 0, 0, "TENSOR_INT32 scale must be finite and >= 0, got inf"},
      {MD_TENSOR_FLOAT16, 2, 0, NAN, 0, IN, 0, 0, 0, "TENSOR_FLOAT16 is not quantized"},
      {MD_INT32, 0, 0, 1.0f, 0, IN, 0, 0, 0, "INT32 is not quantized"},
      {MD_TENSOR_FLOAT32, 2, 0, 0, 0, IN, 1, 0, 0,
       "operand 0: SUBGRAPH_INPUT has no storage: pool, offset and length must be 0, got 1, 0 and "
       "0"},
      {MD_TENSOR_FLOAT32, 2, 0, 0, 0, IN, 0, 8, 0, "SUBGRAPH_INPUT has no storage"},
      {MD_TENSOR_FLOAT32, 2, 0, 0, 0, IN, 0, 0, 16, "got 0, 0 and 16"},
  };
  return cr_make_param_array(bad_operand_case, cases, sizeof cases / sizeof cases[0]);
}
#undef IN

ParameterizedTest(bad_operand_case *c, model, bad_operand_rejected) {
  static const uint32_t dims9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  mb b;
  md_model *m = mb_add_model(&b);
  md_operand *o = &b.operands[0];
  o->type = c->type;
  o->rank = c->rank;
  o->dims = c->null_dims ? NULL : dims9;
  o->scale = c->scale;
  o->zero_point = c->zero_point;
  o->lifetime = c->lifetime;
  o->pool = c->pool;
  o->offset = c->offset;
  o->length = c->length;
  mb_expect_invalid(m, c->msg);
}

Test(model, operand_of_every_known_type_accepted) {
  /* Unused model inputs of every type: validation accepts them (ADD's check never sees them). */
  static const md_operand_type types[] = {
      MD_FLOAT32,        MD_INT32,          MD_UINT32,
      MD_TENSOR_FLOAT32, MD_TENSOR_INT32,   MD_TENSOR_QUANT8_ASYMM,
      MD_BOOL,           MD_TENSOR_FLOAT16, MD_TENSOR_QUANT8_ASYMM_SIGNED};
  mb b;
  mb_add_model(&b);
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    uint32_t rank = md__type_is_scalar(types[i]) ? 0 : 2;
    uint32_t idx = mb_input(&b, types[i], rank, MB_D22);
    if (types[i] == MD_TENSOR_QUANT8_ASYMM_SIGNED) b.operands[idx].zero_point = -128;
    if (types[i] == MD_TENSOR_QUANT8_ASYMM) b.operands[idx].zero_point = 255;
  }
  mb_expect_valid(mb_model(&b));
}

Test(model, tensor_of_unknown_rank_and_dims_accepted_as_input_and_output) {
  static const uint32_t d20[2] = {2, 0};
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 0, NULL);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, d20);
  mb_custom(&b, "T_UNARY", 1, 1, x, y);
  mb_expect_valid(mb_model(&b));
}

Test(model, tensor_of_max_rank_accepted) {
  static const uint32_t d8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 8, d8);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 8, d8);
  mb_custom(&b, "T_UNARY", 1, 1, x, y);
  mb_expect_valid(mb_model(&b));
}

/* ---- CONSTANT_COPY ------------------------------------------------------------------------ */

Test(model, constant_copy_past_operand_values_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].offset = 8;
  mb_expect_invalid(
      m, "operand 2: CONSTANT_COPY offset 8 + length 4 is past operand_values (4 bytes)");
}

Test(model, constant_copy_offset_overflow_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].offset = UINT64_MAX - 1;
  mb_expect_invalid(m, "offset 18446744073709551614 + length 4 is past operand_values (4 bytes)");
}

Test(model, constant_copy_length_overflow_rejected) {
  static const uint32_t d[1] = {UINT32_MAX};
  mb b;
  md_model *m = mb_add_model(&b);
  /* Offset 4 with a length of 2^64-4: offset + length wraps to 0 when added naively. */
  b.operands[2] = (md_operand){.type = MD_TENSOR_INT32,
                               .rank = 1,
                               .dims = d,
                               .lifetime = MD_CONSTANT_COPY,
                               .offset = 4,
                               .length = UINT64_MAX - 3};
  mb_expect_invalid(m,
                    "operand 2: CONSTANT_COPY offset 4 + length 18446744073709551612 is past "
                    "operand_values (4 bytes)");
}

Test(model, constant_copy_length_mismatch_rejected) {
  static const float w[4] = {1, 2, 3, 4};
  mb b;
  mb_add_model(&b);
  uint32_t k = mb_const(&b, MD_TENSOR_FLOAT32, 2, MB_D22, w, sizeof w);
  b.operands[k].length = 8;
  mb_expect_invalid(
      mb_model(&b),
      "operand 4: CONSTANT_COPY length 8 does not match its byte size 16 (TENSOR_FLOAT32 [2,2])");
}

Test(model, constant_copy_scalar_length_mismatch_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].length = 2;
  mb_expect_invalid(
      m, "operand 2: CONSTANT_COPY length 2 does not match its byte size 4 (INT32 scalar)");
}

Test(model, constant_copy_zero_length_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].length = 0;
  mb_expect_invalid(m, "operand 2: CONSTANT_COPY length is 0");
}

Test(model, constant_copy_nonzero_pool_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2].pool = 3;
  mb_expect_invalid(m, "operand 2: CONSTANT_COPY must have pool 0, got 3");
}

Test(model, constant_with_unknown_dim_rejected) {
  static const uint32_t d20[2] = {2, 0};
  static const float w[4] = {1, 2, 3, 4};
  mb b;
  mb_add_model(&b);
  mb_const(&b, MD_TENSOR_FLOAT32, 2, d20, w, 8);
  mb_expect_invalid(
      mb_model(&b),
      "operand 4: CONSTANT_COPY TENSOR_FLOAT32 constant must have fully known dims, got [2,0]");
}

Test(model, constant_with_unknown_rank_rejected) {
  static const float w[4] = {1, 2, 3, 4};
  mb b;
  mb_add_model(&b);
  mb_const(&b, MD_TENSOR_FLOAT32, 0, NULL, w, 16);
  mb_expect_invalid(
      mb_model(&b),
      "operand 4: CONSTANT_COPY TENSOR_FLOAT32 constant must have fully known dims, got [?]");
}

Test(model, constant_byte_size_overflow_rejected) {
  static const uint32_t huge[3] = {UINT32_MAX, UINT32_MAX, 4};
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[2] = (md_operand){.type = MD_TENSOR_FLOAT32,
                               .rank = 3,
                               .dims = huge,
                               .lifetime = MD_CONSTANT_COPY,
                               .length = 4};
  mb_expect_invalid(m,
                    "operand 2: byte size of TENSOR_FLOAT32 [4294967295,4294967295,4] overflows");
}

Test(model, constant_copy_at_the_end_of_operand_values_accepted) {
  static const float w[4] = {1, 2, 3, 4};
  mb b;
  mb_add_model(&b);
  uint32_t k = mb_const(&b, MD_TENSOR_FLOAT32, 2, MB_D22, w, sizeof w);
  md_model *m = mb_model(&b);
  cr_assert_eq(b.operands[k].offset + b.operands[k].length, m->operand_values_size);
  md__model *c = mb_expect_build(m);
  cr_assert_eq(memcmp(c->operands[k].value, w, sizeof w), 0);
  cr_assert_eq(c->operands[k].length, sizeof w);
  md__model_free(c);
}

/* ---- CONSTANT_REFERENCE and model pools -------------------------------------------------- */

Test(model, constant_reference_exposes_the_pool_bytes) {
  int32_t data[1024];
  for (int i = 0; i < 1024; i++) data[i] = i * 3 - 7;
  int fd = mb_memfd(data, sizeof data);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  uint32_t p = mb_pool(&b, fd, sizeof data);
  uint32_t k = mb_const_ref(&b, MD_TENSOR_INT32, 1, d, p, 400, 16);
  md__model *c = mb_expect_build(mb_model(&b));
  cr_assert_eq(c->n_pools, 1u);
  cr_assert_eq(c->operands[k].length, 16u);
  cr_assert_eq(memcmp(c->operands[k].value, &data[100], 16), 0);
  cr_assert_eq(c->operands[k].value, c->pools[0].base + 400);
  /* A reference, not a copy: a later write to the file shows through the mapping. */
  int32_t v = 12345;
  cr_assert_eq(pwrite(fd, &v, sizeof v, 400), (ssize_t)sizeof v);
  int32_t got;
  memcpy(&got, c->operands[k].value, sizeof got);
  cr_assert_eq(got, 12345);
  md__model_free(c);
  close(fd);
}

Test(model, constant_reference_outlives_the_callers_fd) {
  int32_t data[4] = {10, 20, 30, 40};
  int fd = mb_memfd(data, sizeof data);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  uint32_t k = mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, sizeof data), 0, 16);
  md__model *c = mb_expect_build(mb_model(&b));
  close(fd);
  cr_assert_eq(memcmp(c->operands[k].value, data, sizeof data), 0);
  md__model_free(c);
}

Test(model, constant_reference_value_reaches_the_kernel_check) {
  int32_t data[2] = {0, 5};
  int fd = mb_memfd(data, sizeof data);
  mb b;
  mb_init(&b);
  uint32_t x = mb_input(&b, MD_TENSOR_FLOAT32, 2, MB_D22);
  uint32_t p = mb_pool(&b, fd, sizeof data);
  uint32_t k = mb_const_ref(&b, MD_INT32, 0, NULL, p, 4, 4);
  uint32_t y = mb_output(&b, MD_TENSOR_FLOAT32, 2, MB_D22);
  mb_custom(&b, "T_CHECK", 2, 1, x, k, y);
  mb_expect_valid(mb_model(&b));
  cr_assert_eq(mbk_seen_value, 5);
  close(fd);
}

Test(model, constant_reference_pool_out_of_range_rejected) {
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, 2, 0, 16);
  mb_expect_invalid(mb_model(&b),
                    "operand 4: CONSTANT_REFERENCE pool 2, but the model has 0 pools");
}

Test(model, constant_reference_past_pool_rejected) {
  int fd = mb_memfd(NULL, 64);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 64), 56, 16);
  mb_expect_invalid(
      mb_model(&b),
      "operand 4: CONSTANT_REFERENCE offset 56 + length 16 is past model pool 0 (64 bytes)");
  close(fd);
}

Test(model, constant_reference_offset_overflow_rejected) {
  int fd = mb_memfd(NULL, 64);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 64), UINT64_MAX - 8, 16);
  mb_expect_invalid(mb_model(&b), "is past model pool 0 (64 bytes)");
  close(fd);
}

Test(model, constant_reference_length_mismatch_rejected) {
  int fd = mb_memfd(NULL, 64);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 64), 0, 32);
  mb_expect_invalid(
      mb_model(&b),
      "operand 4: CONSTANT_REFERENCE length 32 does not match its byte size 16 (TENSOR_INT32 [4])");
  close(fd);
}

Test(model, constant_reference_zero_length_rejected) {
  int fd = mb_memfd(NULL, 64);
  static const uint32_t d[1] = {4};
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 64), 0, 0);
  mb_expect_invalid(mb_model(&b), "operand 4: CONSTANT_REFERENCE length is 0");
  close(fd);
}

Test(model, bad_fd_pool_rejected_naming_the_pool) {
  mb b;
  mb_add_model(&b);
  mb_pool(&b, -1, 64);
  mb_expect_invalid(mb_model(&b), "model pool 0");
}

Test(model, closed_fd_pool_rejected_naming_the_pool) {
  int keep = mb_memfd(NULL, 64);
  int closed = dup(keep);
  cr_assert_geq(closed, 0);
  close(closed);
  mb b;
  mb_add_model(&b);
  mb_pool(&b, keep, 64);
  mb_pool(&b, closed, 64);
  mb_expect_invalid(mb_model(&b), "model pool 1");
  close(keep);
}

Test(model, pool_past_the_end_of_its_file_rejected) {
  int fd = mb_memfd(NULL, 64);
  mb b;
  mb_add_model(&b);
  mb_pool(&b, fd, 128);
  mb_expect_invalid(mb_model(&b), "model pool 0");
  close(fd);
}

Test(model, zero_size_pool_rejected) {
  int fd = mb_memfd(NULL, 64);
  mb b;
  mb_add_model(&b);
  mb_pool(&b, fd, 0);
  mb_expect_invalid(mb_model(&b), "model pool 0");
  close(fd);
}

Test(model, non_blob_hardware_buffer_pool_rejected) {
  int fd = mb_memfd(NULL, 4096);
  mb b;
  mb_add_model(&b);
  uint32_t p = mb_pool(&b, fd, 0);
  b.pools[p].kind = MD_MEM_HARDWARE_BUFFER;
  b.pools[p].width = 16;
  b.pools[p].height = 16;
  b.pools[p].layers = 1;
  b.pools[p].format = 1;
  mb_expect_invalid(mb_model(&b), "model pool 0");
  close(fd);
}

Test(model, write_only_pool_rejected) {
  int fd = mb_memfd(NULL, 64);
  mb b;
  mb_add_model(&b);
  uint32_t p = mb_pool(&b, fd, 64);
  b.pools[p].prot = PROT_WRITE;
  mb_expect_invalid(mb_model(&b), "model pool 0: prot 0x2 lacks PROT_READ");
  close(fd);
}

Test(model, unreferenced_pool_still_validated) {
  mb b;
  mb_add_model(&b);
  int fd = mb_memfd(NULL, 64);
  mb_pool(&b, fd, 64);
  mb_pool(&b, fd, 64);
  b.pools[1].kind = (md_memory_kind)9;
  mb_expect_invalid(mb_model(&b), "model pool 1");
  close(fd);
}

Test(model, pool_that_cannot_be_mapped_is_general_failure) {
  /* A read-only fd passes validation (fstat) but cannot be mapped MAP_SHARED for writing. */
  char path[] = "/tmp/mdc-model-test-XXXXXX";
  int wfd = mkstemp(path);
  cr_assert_geq(wfd, 0);
  cr_assert_eq(ftruncate(wfd, 4096), 0);
  int rfd = open(path, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(rfd, 0);
  unlink(path);
  mb b;
  mb_add_model(&b);
  mb_pool(&b, rfd, 4096);
  md_model *m = mb_model(&b);
  mb_expect_fail(m, MD_GENERAL_FAILURE, "model pool 0");
  uint8_t sup[1];
  cr_assert_eq(md__model_supported(m, "sim", sup), MD_GENERAL_FAILURE);
  cr_assert(strstr(md__last_error(), "model pool 0"), "%s", md__last_error());
  close(rfd);
  close(wfd);
}

Test(model, pool_mapping_is_held_by_the_model_and_released_by_free) {
  int fd = mb_memfd(NULL, 4096);
  static const uint32_t d[1] = {4};
  md__pool_cache *cache = NULL;
  cr_assert_eq(md__pool_cache_create(4, &cache), MD_NONE);
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 4096), 0, 16);
  md__model *c = NULL;
  cr_assert_eq(md__model_build(mb_model(&b), "sim", cache, &c), MD_NONE, "%s", md__last_error());
  cr_assert_eq(md__pool_cache_maps(cache), 1u);
  md_scope *scope = c->pools[0].scope;
  uint32_t held = md__mapping_holders(&c->pools[0]);
  cr_assert_geq(held, 1u);
  md__model_free(c);
  /* The cache keeps the mapping; the model's use of it is gone. */
  md__mapping again;
  cr_assert_eq(md__pool_acquire(cache, &b.pools[0], MD__POOL_CONSTANT, "again", NULL, &again), MD_NONE);
  cr_assert_eq(again.scope, scope);
  cr_assert_eq(md__mapping_holders(&again), held);
  md__mapping_release(&again);
  md__pool_cache_destroy(cache);
  close(fd);
}

Test(model, failed_build_releases_acquired_pool_mappings) {
  int fd = mb_memfd(NULL, 4096);
  static const uint32_t d[1] = {4};
  md__pool_cache *cache = NULL;
  cr_assert_eq(md__pool_cache_create(4, &cache), MD_NONE);
  mb b;
  mb_add_model(&b);
  mb_const_ref(&b, MD_TENSOR_INT32, 1, d, mb_pool(&b, fd, 4096), 0, 16);
  b.ops[0].type = MD_OP_CUSTOM;
  b.ops[0].custom_name = "NO_SUCH_KERNEL"; /* fails after the pools are mapped */
  md__model *c = NULL;
  cr_assert_eq(md__model_build(mb_model(&b), "sim", cache, &c), MD_GENERAL_FAILURE);
  cr_assert_null(c);
  cr_assert_eq(md__pool_cache_maps(cache), 1u, "the pool was mapped before the kernel failed");
  md__mapping again;
  cr_assert_eq(md__pool_acquire(cache, &b.pools[0], MD__POOL_CONSTANT, "again", NULL, &again), MD_NONE);
  cr_assert_eq(md__mapping_holders(&again), 1u, "the failed build kept a use of the mapping");
  md__mapping_release(&again);
  md__pool_cache_destroy(cache);
  close(fd);
}

/* ---- model inputs and outputs ------------------------------------------------------------- */

Test(model, model_input_out_of_range_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.inputs[1] = 9;
  mb_expect_invalid(m, "model: input 1 is operand 9, but the model has 4 operands");
}

Test(model, model_output_out_of_range_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.outputs[0] = 4;
  mb_expect_invalid(m, "model: output 0 is operand 4, but the model has 4 operands");
}

Test(model, model_input_that_is_not_subgraph_input_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.inputs[1] = 2;
  mb_expect_invalid(m, "model: input 1 is operand 2, which is CONSTANT_COPY, not SUBGRAPH_INPUT");
}

Test(model, model_output_that_is_not_subgraph_output_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.outputs[0] = 0;
  mb_expect_invalid(m,
                    "model: output 0 is operand 0, which is SUBGRAPH_INPUT, not SUBGRAPH_OUTPUT");
}

Test(model, duplicate_model_input_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.inputs[1] = 0;
  mb_expect_invalid(m, "model: input 1 is operand 0, which is already input 0");
}

Test(model, duplicate_model_output_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.outputs[1] = 3;
  m->n_outputs = 2;
  mb_expect_invalid(m, "model: output 1 is operand 3, which is already output 0");
}

Test(model, subgraph_input_missing_from_model_inputs_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  m->n_inputs = 1;
  mb_expect_invalid(m, "model: operand 1 is SUBGRAPH_INPUT but is not one of the model's inputs");
}

Test(model, subgraph_output_missing_from_model_outputs_rejected) {
  mb b;
  mb_add_model(&b);
  uint32_t y2 = mb_output(&b, MD_TENSOR_FLOAT32, 2, MB_D22);
  mb_custom(&b, "T_UNARY", 1, 1, 0u, y2);
  md_model *m = mb_model(&b);
  m->n_outputs = 1;
  mb_expect_invalid(m, "model: operand 4 is SUBGRAPH_OUTPUT but is not one of the model's outputs");
}

Test(model, no_value_operand_as_model_input_rejected) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.operands[1].lifetime = MD_NO_VALUE;
  mb_expect_invalid(m, "model: input 1 is operand 1, which is NO_VALUE, not SUBGRAPH_INPUT");
}

Test(model, model_inputs_in_any_order_get_their_io_index) {
  mb b;
  md_model *m = mb_add_model(&b);
  b.inputs[0] = 1;
  b.inputs[1] = 0;
  md__model *c = mb_expect_build(m);
  cr_assert_eq(c->operands[0].io_index, 1u);
  cr_assert_eq(c->operands[1].io_index, 0u);
  cr_assert_eq(c->operands[3].io_index, 0u);
  cr_assert_eq(c->inputs[0], 1u);
  cr_assert_eq(c->inputs[1], 0u);
  md__model_free(c);
}

/* ---- the deep copy ------------------------------------------------------------------------ */

Test(model, valid_add_model_builds) {
  mb b;
  md__model *c = mb_expect_build(mb_add_model(&b));
  cr_assert_eq(c->n_operands, 4u);
  cr_assert_eq(c->n_operations, 1u);
  cr_assert_str_eq(c->operations[0].name, "ADD");
  cr_assert_eq(c->operations[0].type, MD_OP_ADD);
  cr_assert_not_null(c->operations[0].kernel);
  cr_assert_str_eq(c->operations[0].kernel->name, "ADD");
  cr_assert_eq(c->operations[0].n_attrs, 0u);
  cr_assert_eq(c->n_pools, 0u);
  md__model_free(c);
}

Test(model, deep_copy_survives_the_callers_arrays_being_overwritten) {
  mb b;
  md_model *m = mb_add_model(&b);
  int32_t act = 3;
  memcpy(b.values, &act, sizeof act);
  md__model *c = mb_expect_build(m);
  memset(&b, 0xA5, sizeof b); /* every array the md_model pointed into */

  cr_assert_eq(c->n_operands, 4u);
  for (uint32_t i = 0; i < 4; i++) {
    cr_assert_eq(c->operands[i].type, i == 2 ? MD_INT32 : MD_TENSOR_FLOAT32);
    if (i == 2) continue;
    cr_assert_eq(c->operands[i].rank, 2u);
    cr_assert_eq(c->operands[i].dims[0], 2u);
    cr_assert_eq(c->operands[i].dims[1], 2u);
    cr_assert_eq(c->operands[i].dims[2], 0u);
    cr_assert_null(c->operands[i].value);
  }
  cr_assert_eq(c->operands[0].lifetime, MD_SUBGRAPH_INPUT);
  cr_assert_eq(c->operands[0].io_index, 0u);
  cr_assert_eq(c->operands[1].io_index, 1u);
  cr_assert_eq(c->operands[3].lifetime, MD_SUBGRAPH_OUTPUT);
  cr_assert_eq(c->operands[3].io_index, 0u);
  cr_assert_eq(c->operands[2].lifetime, MD_CONSTANT_COPY);
  cr_assert_eq(c->operands[2].rank, 0u);
  cr_assert_eq(c->operands[2].length, 4u);
  int32_t got;
  memcpy(&got, c->operands[2].value, sizeof got);
  cr_assert_eq(got, 3);
  cr_assert(
      c->operands[2].value >= c->values && c->operands[2].value + 4 <= c->values + c->values_size,
      "CONSTANT_COPY value points outside the model's own copy");
  cr_assert_eq(c->n_inputs, 2u);
  cr_assert_eq(c->inputs[0], 0u);
  cr_assert_eq(c->inputs[1], 1u);
  cr_assert_eq(c->n_outputs, 1u);
  cr_assert_eq(c->outputs[0], 3u);
  const md__operation *op = &c->operations[0];
  cr_assert_eq(op->n_inputs, 3u);
  cr_assert_eq(op->inputs[0], 0u);
  cr_assert_eq(op->inputs[1], 1u);
  cr_assert_eq(op->inputs[2], 2u);
  cr_assert_eq(op->n_outputs, 1u);
  cr_assert_eq(op->outputs[0], 3u);
  cr_assert_str_eq(op->name, "ADD");
  md__model_free(c);
}

Test(model, quantized_parameters_are_copied) {
  mb b;
  mb_add_model(&b);
  uint32_t q = mb_input(&b, MD_TENSOR_QUANT8_ASYMM_SIGNED, 2, MB_D22);
  b.operands[q].scale = 0.25f;
  b.operands[q].zero_point = -3;
  md__model *c = mb_expect_build(mb_model(&b));
  cr_assert_float_eq(c->operands[q].scale, 0.25f, 0);
  cr_assert_eq(c->operands[q].zero_point, -3);
  cr_assert_eq(c->operands[q].io_index, 2u);
  md__model_free(c);
}

Test(model, free_accepts_null) { md__model_free(NULL); }
