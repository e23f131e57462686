/* test_model_builder.h - private to the model tests: a small md_model builder, test kernels
 * and assertions shared by runtime/tests/base/test_model*.c.
 *
 * A builder holds every array the md_model points into, so a test edits one field of a valid
 * model and expects exactly one rule to fire. Functions are static inline: each test file
 * uses a different subset. */
#ifndef MD_TEST_MODEL_BUILDER_H
#define MD_TEST_MODEL_BUILDER_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "md/kernel.h"
#include "md/status.h"
#include "model.h"

#define MB_MAX_OPERANDS 32u
#define MB_MAX_OPS 8u
#define MB_MAX_OP_IO 16u
#define MB_MAX_ATTRS 8u

typedef struct mb {
  md_operand operands[MB_MAX_OPERANDS];
  uint32_t dims[MB_MAX_OPERANDS][MD_MAX_RANK];
  uint32_t n_operands;
  md_operation ops[MB_MAX_OPS];
  uint32_t op_in[MB_MAX_OPS][MB_MAX_OP_IO], op_out[MB_MAX_OPS][MB_MAX_OP_IO];
  uint32_t n_ops;
  uint32_t inputs[MB_MAX_OPERANDS], outputs[MB_MAX_OPERANDS];
  uint32_t n_inputs, n_outputs;
  _Alignas(16) uint8_t values[512];
  uint64_t values_size;
  md_memory pools[4];
  uint32_t n_pools;
  md_attr attrs[MB_MAX_OPS][MB_MAX_ATTRS];
  md_model model;
} mb;

static inline void mb_init(mb *b) { memset(b, 0, sizeof *b); }

/* Adds an operand; dims are copied into the builder. Lists it as a model input or output
 * when its lifetime says so. */
static inline uint32_t mb_operand(mb *b, md_operand_type type, md_lifetime lt, uint32_t rank,
                                  const uint32_t *dims) {
  cr_assert_lt(b->n_operands, MB_MAX_OPERANDS);
  uint32_t i = b->n_operands++;
  md_operand *o = &b->operands[i];
  memset(o, 0, sizeof *o);
  o->type = type;
  o->lifetime = lt;
  o->rank = rank;
  if (rank) memcpy(b->dims[i], dims, rank * sizeof *dims);
  o->dims = b->dims[i];
  if (type == MD_TENSOR_QUANT8_ASYMM || type == MD_TENSOR_QUANT8_ASYMM_SIGNED) o->scale = 0.5f;
  if (lt == MD_SUBGRAPH_INPUT) b->inputs[b->n_inputs++] = i;
  if (lt == MD_SUBGRAPH_OUTPUT) b->outputs[b->n_outputs++] = i;
  return i;
}

static inline uint32_t mb_input(mb *b, md_operand_type t, uint32_t rank, const uint32_t *dims) {
  return mb_operand(b, t, MD_SUBGRAPH_INPUT, rank, dims);
}
static inline uint32_t mb_output(mb *b, md_operand_type t, uint32_t rank, const uint32_t *dims) {
  return mb_operand(b, t, MD_SUBGRAPH_OUTPUT, rank, dims);
}
static inline uint32_t mb_temp(mb *b, md_operand_type t, uint32_t rank, const uint32_t *dims) {
  return mb_operand(b, t, MD_TEMPORARY_VARIABLE, rank, dims);
}

/* A CONSTANT_COPY operand holding `len` bytes of data, 8-byte aligned in operand_values. */
static inline uint32_t mb_const(mb *b, md_operand_type t, uint32_t rank, const uint32_t *dims,
                                const void *data, uint64_t len) {
  uint32_t i = mb_operand(b, t, MD_CONSTANT_COPY, rank, dims);
  uint64_t off = (b->values_size + 7u) & ~(uint64_t)7u;
  cr_assert_leq(off + len, sizeof b->values);
  memcpy(b->values + off, data, len);
  b->operands[i].offset = off;
  b->operands[i].length = len;
  b->values_size = off + len;
  return i;
}

static inline uint32_t mb_const_i32(mb *b, int32_t v) {
  return mb_const(b, MD_INT32, 0, NULL, &v, sizeof v);
}

static inline uint32_t mb_no_value(mb *b, md_operand_type t) {
  return mb_operand(b, t, MD_NO_VALUE, 0, NULL);
}

/* Adds an operation: n_in inputs then n_out outputs, as operand indexes. */
static inline uint32_t mb_op(mb *b, md_operation_type type, uint32_t n_in, uint32_t n_out, ...) {
  cr_assert_lt(b->n_ops, MB_MAX_OPS);
  uint32_t i = b->n_ops++;
  md_operation *op = &b->ops[i];
  memset(op, 0, sizeof *op);
  op->type = type;
  va_list ap;
  va_start(ap, n_out);
  for (uint32_t k = 0; k < n_in; k++) b->op_in[i][k] = va_arg(ap, uint32_t);
  for (uint32_t k = 0; k < n_out; k++) b->op_out[i][k] = va_arg(ap, uint32_t);
  va_end(ap);
  op->n_inputs = n_in;
  op->inputs = b->op_in[i];
  op->n_outputs = n_out;
  op->outputs = b->op_out[i];
  return i;
}

static inline uint32_t mb_custom(mb *b, const char *name, uint32_t n_in, uint32_t n_out, ...) {
  cr_assert_lt(b->n_ops, MB_MAX_OPS);
  uint32_t i = b->n_ops++;
  md_operation *op = &b->ops[i];
  memset(op, 0, sizeof *op);
  op->type = MD_OP_CUSTOM;
  op->custom_name = name;
  va_list ap;
  va_start(ap, n_out);
  for (uint32_t k = 0; k < n_in; k++) b->op_in[i][k] = va_arg(ap, uint32_t);
  for (uint32_t k = 0; k < n_out; k++) b->op_out[i][k] = va_arg(ap, uint32_t);
  va_end(ap);
  op->n_inputs = n_in;
  op->inputs = b->op_in[i];
  op->n_outputs = n_out;
  op->outputs = b->op_out[i];
  op->attrs = b->attrs[i];
  return i;
}

/* Appends an attribute to operation op (callers keep the names sorted, or not, on purpose). */
static inline md_attr *mb_attr(mb *b, uint32_t op, const char *name, md_attr_kind kind) {
  md_operation *o = &b->ops[op];
  cr_assert_lt(o->n_attrs, MB_MAX_ATTRS);
  md_attr *a = &b->attrs[op][o->n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->kind = kind;
  o->attrs = b->attrs[op];
  return a;
}

/* The md_model over the builder's arrays (call again after adding to the builder). */
static inline md_model *mb_model(mb *b) {
  md_model *m = &b->model;
  m->n_operands = b->n_operands;
  m->operands = b->operands;
  m->n_operations = b->n_ops;
  m->operations = b->ops;
  m->n_inputs = b->n_inputs;
  m->inputs = b->inputs;
  m->n_outputs = b->n_outputs;
  m->outputs = b->outputs;
  m->operand_values = b->values_size ? b->values : NULL;
  m->operand_values_size = b->values_size;
  m->n_pools = b->n_pools;
  m->pools = b->n_pools ? b->pools : NULL;
  return m;
}

static const uint32_t MB_D22[2] = {2, 2};

/* out(3) = ADD(a(0) [2,2], b(1) [2,2], activation(2) = 0), all TENSOR_FLOAT32. */
static inline md_model *mb_add_model(mb *b) {
  mb_init(b);
  uint32_t a = mb_input(b, MD_TENSOR_FLOAT32, 2, MB_D22);
  uint32_t c = mb_input(b, MD_TENSOR_FLOAT32, 2, MB_D22);
  uint32_t act = mb_const_i32(b, 0);
  uint32_t out = mb_output(b, MD_TENSOR_FLOAT32, 2, MB_D22);
  mb_op(b, MD_OP_ADD, 3, 1, a, c, act, out);
  return mb_model(b);
}

/* ---- memfd pools -------------------------------------------------------------------- */

static inline int mb_memfd(const void *data, size_t size) {
  int fd = memfd_create("mdc-model-test", MFD_CLOEXEC);
  cr_assert_geq(fd, 0, "memfd_create failed");
  cr_assert_eq(ftruncate(fd, (off_t)size), 0);
  if (data) cr_assert_eq(pwrite(fd, data, size, 0), (ssize_t)size);
  return fd;
}

static inline uint32_t mb_pool(mb *b, int fd, uint64_t size) {
  cr_assert_lt(b->n_pools, 4u);
  md_memory *p = &b->pools[b->n_pools];
  memset(p, 0, sizeof *p);
  p->kind = MD_MEM_ASHMEM;
  p->fd = fd;
  p->offset = 0;
  p->size = size;
  p->prot = PROT_READ | PROT_WRITE;
  return b->n_pools++;
}

static inline uint32_t mb_const_ref(mb *b, md_operand_type t, uint32_t rank, const uint32_t *dims,
                                    uint32_t pool, uint64_t offset, uint64_t length) {
  uint32_t i = mb_operand(b, t, MD_CONSTANT_REFERENCE, rank, dims);
  b->operands[i].pool = pool;
  b->operands[i].offset = offset;
  b->operands[i].length = length;
  return i;
}

/* ---- assertions --------------------------------------------------------------------- */

#define MB_PLATFORM "sim"

/* Builds m, expecting `want` and a message containing `msg`; the supported-operations query
 * must agree for invalid models (INVALID_ARGUMENT) and must leave its output untouched. */
static inline void mb_expect_fail_on(const md_model *m, const char *platform, md_status want,
                                     const char *msg) {
  md__model *c = (md__model *)(uintptr_t)1;
  md__clear_error();
  md_status st = md__model_build(m, platform, NULL, &c);
  cr_assert_eq(st, want, "build: status %s, want %s (%s)", md_status_name(st), md_status_name(want),
               md__last_error());
  cr_assert_eq(c, (md__model *)(uintptr_t)1, "build wrote *out on failure");
  cr_assert(strstr(md__last_error(), msg) != NULL, "build: message \"%s\" lacks \"%s\"",
            md__last_error(), msg);
  if (want != MD_INVALID_ARGUMENT || !m) return;
  uint8_t sup[MB_MAX_OPS + 1];
  memset(sup, 0xAA, sizeof sup);
  md__clear_error();
  st = md__model_supported(m, platform, sup);
  cr_assert_eq(st, MD_INVALID_ARGUMENT, "supported: status %s (%s)", md_status_name(st),
               md__last_error());
  cr_assert(strstr(md__last_error(), msg) != NULL, "supported: message \"%s\" lacks \"%s\"",
            md__last_error(), msg);
  for (size_t i = 0; i < sizeof sup; i++)
    cr_assert_eq(sup[i], 0xAA, "supported written on failure");
}

static inline void mb_expect_fail(const md_model *m, md_status want, const char *msg) {
  mb_expect_fail_on(m, MB_PLATFORM, want, msg);
}

static inline void mb_expect_invalid(const md_model *m, const char *msg) {
  mb_expect_fail(m, MD_INVALID_ARGUMENT, msg);
}

static inline md__model *mb_expect_build_on(const md_model *m, const char *platform) {
  md__model *c = NULL;
  md_status st = md__model_build(m, platform, NULL, &c);
  cr_assert_eq(st, MD_NONE, "build: %s: %s", md_status_name(st), md__last_error());
  cr_assert_not_null(c);
  return c;
}

static inline md__model *mb_expect_build(const md_model *m) {
  return mb_expect_build_on(m, MB_PLATFORM);
}

/* Builds and frees, for models that must be accepted. */
static inline void mb_expect_valid(const md_model *m) { md__model_free(mb_expect_build(m)); }

/* ---- test kernels (registered for "host"; the "sim" platform falls back to them) -------- */

static void mbk_run_nothing(const md_kernel_call *call, md_kernel_status *st) {
  (void)call;
  (void)st;
}

/* What the last check saw, for tests to inspect (each Criterion test is its own process). */
static md_op_sig mbk_seen;
static md_operand_info mbk_seen_in[4], mbk_seen_out[4]; /* copies: sig's arrays are scratch */
static uint32_t mbk_seen_dims[8][MD_MAX_RANK];
static int mbk_checks;
static int64_t mbk_seen_value;

static void mbk_record(const md_op_sig *sig) {
  mbk_checks++;
  mbk_seen = *sig;
  for (uint32_t k = 0; k < sig->n_inputs && k < 4; k++) {
    mbk_seen_in[k] = sig->inputs[k];
    if (sig->inputs[k].rank <= MD_MAX_RANK && sig->inputs[k].rank)
      memcpy(mbk_seen_dims[k], sig->inputs[k].dims, sig->inputs[k].rank * sizeof(uint32_t));
  }
  for (uint32_t k = 0; k < sig->n_outputs && k < 4; k++) {
    mbk_seen_out[k] = sig->outputs[k];
    if (sig->outputs[k].rank <= MD_MAX_RANK && sig->outputs[k].rank)
      memcpy(mbk_seen_dims[4 + k], sig->outputs[k].dims, sig->outputs[k].rank * sizeof(uint32_t));
  }
}

/* T_UNARY: one TENSOR_FLOAT32 in, one out; other types are valid but unsupported. */
static md_status mbk_unary_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  mbk_record(sig);
  if (sig->inputs[0].type != MD_TENSOR_FLOAT32)
    return md_kernel_fail(st, MD_GENERAL_FAILURE, "input 0: type %d is not supported",
                          (int)sig->inputs[0].type);
  return MD_NONE;
}

/* T_OPT: input 0 required, input 1 optional (may be NO_VALUE). */
static md_status mbk_opt_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)st;
  (void)user;
  mbk_record(sig);
  return MD_NONE;
}

/* T_CHECK: (tensor, INT32 constant); value 7 is invalid, 8 is unsupported, 9 fails without
 * a message, 10 reports failure through st but returns MD_NONE; records the value it saw. */
static md_status mbk_value_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  mbk_record(sig);
  const md_operand_info *p = &sig->inputs[1];
  if (p->lifetime != MD_CONSTANT_COPY && p->lifetime != MD_CONSTANT_REFERENCE)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1: must be a constant");
  if (!p->value || p->length != 4)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1: no value");
  int32_t v;
  memcpy(&v, p->value, sizeof v);
  mbk_seen_value = v;
  if (v == 7) return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1: value 7 is forbidden");
  if (v == 8) return md_kernel_fail(st, MD_GENERAL_FAILURE, "input 1: value 8 is unsupported");
  if (v == 9) return MD_GENERAL_FAILURE;
  if (v == 10) {
    md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1: value 10 is reported, not returned");
    return MD_NONE;
  }
  return MD_NONE;
}

/* T_ATTR: attributes alpha (F64, required), axes (I64_ARRAY), mode (STR), n (I64). */
static md_status mbk_attr_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)st;
  (void)user;
  mbk_record(sig);
  return MD_NONE;
}

static const md_attr_spec mbk_attr_specs[] = {
    {"alpha", MD_ATTR_F64, 1},
    {"axes", MD_ATTR_I64_ARRAY, 0},
    {"mode", MD_ATTR_STR, 0},
    {"n", MD_ATTR_I64, 0},
};

static inline void mb_register_kernels(void) {
  md_kernel_def defs[] = {
      {.name = "T_UNARY",
       .min_inputs = 1,
       .max_inputs = 1,
       .n_outputs = 1,
       .check = mbk_unary_check},
      {.name = "T_OPT", .min_inputs = 1, .max_inputs = 2, .n_outputs = 1, .check = mbk_opt_check},
      {.name = "T_CHECK",
       .min_inputs = 2,
       .max_inputs = 2,
       .n_outputs = 1,
       .check = mbk_value_check},
      {.name = "T_ATTR",
       .min_inputs = 1,
       .max_inputs = 1,
       .n_outputs = 1,
       .attr_specs = mbk_attr_specs,
       .n_attr_specs = 4,
       .check = mbk_attr_check},
      {.name = "T_NOCHECK", .min_inputs = 1, .max_inputs = 3, .n_outputs = 2},
  };
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    defs[i].struct_size = sizeof defs[i];
    defs[i].platform = "host";
    defs[i].run = mbk_run_nothing;
    md_status st = md_kernel_register(&defs[i]);
    cr_assert_eq(st, MD_NONE, "register %s: %s", defs[i].name, md_kernel_registry_error());
  }
}

/* x(0) [2,2] -> T_UNARY -> y(1) [2,2]: the smallest valid model for the test kernels. */
static inline md_model *mb_unary_model(mb *b, const char *kernel) {
  mb_init(b);
  uint32_t x = mb_input(b, MD_TENSOR_FLOAT32, 2, MB_D22);
  uint32_t y = mb_output(b, MD_TENSOR_FLOAT32, 2, MB_D22);
  mb_custom(b, kernel, 1, 1, x, y);
  return mb_model(b);
}

#endif
