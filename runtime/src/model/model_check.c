/* model_check.c - validating a caller's md_model against the structural rules of SPEC
 * sections 1, 2 and 7 (stage 1 of md__model_build, model.c): counts and pointers, operands,
 * model inputs/outputs, pools before mapping, constant ranges, operations and their data flow.
 * Nothing is allocated that outlives it; every rule broken is INVALID_ARGUMENT. Also the names
 * and message helpers of model_int.h.
 *
 * Decisions where SPEC.md is silent (each has a test in runtime/tests/base/test_model*.c):
 *   - Non-constant operands (TEMPORARY_VARIABLE, SUBGRAPH_INPUT/OUTPUT, NO_VALUE) must have
 *     pool, offset and length 0, and CONSTANT_COPY operands pool 0, as in the NN HAL.
 *   - A tensor constant needs fully known dims; a constant's length is then exactly its byte
 *     size (so never 0). Model pools must be readable (PROT_READ).
 *   - Unused operands are allowed: a temporary written but never read, a model input no
 *     operation reads, a constant or NO_VALUE operand nobody uses. A SUBGRAPH_OUTPUT may also
 *     be read by a later operation.
 *   - Non-CUSTOM operations must have n_attrs 0; their custom_name is ignored (never read).
 *     A CUSTOM operation may name any registered kernel, built-ins included.
 *   - Every model pool is validated, referenced or not (model.c maps them all).
 *   - Out of memory while validating: RESOURCE_EXHAUSTED_TRANSIENT. */
#include "model_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mutant.h"
#include "error.h"
#include "md/status.h"
#include "model.h"

typedef unsigned long long ull;

/* ---- names and messages (model_int.h) ------------------------------------------------- */

static const char *lifetime_name(md_lifetime l) {
  switch (l) {
    case MD_TEMPORARY_VARIABLE: return "TEMPORARY_VARIABLE";
    case MD_SUBGRAPH_INPUT: return "SUBGRAPH_INPUT";
    case MD_SUBGRAPH_OUTPUT: return "SUBGRAPH_OUTPUT";
    case MD_CONSTANT_COPY: return "CONSTANT_COPY";
    case MD_CONSTANT_REFERENCE: return "CONSTANT_REFERENCE";
    case MD_NO_VALUE: return "NO_VALUE";
  }
  return NULL;
}

const char *md__attr_kind_name(md_attr_kind k) {
  switch (k) {
    case MD_ATTR_I64: return "I64";
    case MD_ATTR_F64: return "F64";
    case MD_ATTR_STR: return "STR";
    case MD_ATTR_I64_ARRAY: return "I64_ARRAY";
  }
  return NULL;
}

static int is_constant(md_lifetime l) {
  return l == MD_CONSTANT_COPY || l == MD_CONSTANT_REFERENCE;
}
static int is_written(md_lifetime l) {
  return l == MD_TEMPORARY_VARIABLE || l == MD_SUBGRAPH_OUTPUT;
}

/* The name an operation goes by in messages and kernel lookups: the built-in name, the
 * custom_name of a CUSTOM operation, or a placeholder while those are not yet validated. */
const char *md__op_label(const md_operation *op) {
  if (op->type == MD_OP_CUSTOM)
    return op->custom_name && op->custom_name[0] ? op->custom_name : "CUSTOM";
  const char *n = md_operation_name(op->type);
  return n ? n : "unknown type";
}

md_status md__op_fail(md_status st, uint32_t i, const char *label, const char *fmt, ...) {
  char msg[MD__ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return md__fail(st, "operation %u (%s): %s", i, label, msg);
}

md_status md__model_oom(const char *what) {
  return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "model: out of memory for %s", what);
}

/* ---- stage 1: validation of the caller's model ---------------------------------------- */

static md_status check_counts(const md_model *m) {
#define NEED(count, ptr)                                                                   \
  if (m->count && !m->ptr)                                                                 \
    return md__fail(MD_INVALID_ARGUMENT, "model: " #count " is %llu but " #ptr " is NULL", \
                    (ull)m->count);
  NEED(n_operands, operands)
  NEED(n_operations, operations)
  NEED(n_inputs, inputs)
  NEED(n_outputs, outputs)
  NEED(n_pools, pools)
  NEED(operand_values_size, operand_values)
#undef NEED
  if (m->n_operations == 0) return md__fail(MD_INVALID_ARGUMENT, "model: has no operations");
  if (m->n_inputs == 0) return md__fail(MD_INVALID_ARGUMENT, "model: has no inputs");
  if (m->n_outputs == 0) return md__fail(MD_INVALID_ARGUMENT, "model: has no outputs");
  return MD_NONE;
}

/* Validates every pool before anything is mapped; pool_size[p] is its logical size. */
static md_status check_pools(const md_model *m, uint64_t *pool_size) {
  for (uint32_t p = 0; p < m->n_pools; p++) {
    char what[32];
    snprintf(what, sizeof what, "model pool %u", p);
    md__pool_plan plan;
    md_status st = md__pool_validate(&m->pools[p], MD__POOL_CONSTANT, what, &plan);
    if (st != MD_NONE) return st;
    pool_size[p] = plan.logical;
    if (MD_MUTANT(constant_range_vs_file)) pool_size[p] = (uint64_t)plan.st.st_size; /* Mutant: the file's size. */
    /* The driver reads constants out of the mapping; a write-only mapping cannot serve. */
    if (!(m->pools[p].prot & PROT_READ))
      return md__fail(MD_INVALID_ARGUMENT, "%s: prot 0x%x lacks PROT_READ (constants are read)",
                      what, m->pools[p].prot);
  }
  return MD_NONE;
}

/* A constant's storage: [offset, offset+length) inside `size` bytes, length its byte size. */
static md_status check_constant_range(uint32_t i, const md_operand *o, uint64_t bytes,
                                      const char *where, uint64_t size) {
  const char *ln = lifetime_name(o->lifetime);
  if (o->length == 0) return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s length is 0", i, ln);
  if (o->offset > size || o->length > size - o->offset)
    return md__fail(MD_INVALID_ARGUMENT,
                    "operand %u: %s offset %llu + length %llu is past %s (%llu bytes)", i, ln,
                    (ull)o->offset, (ull)o->length, where, (ull)size);
  if (o->length != bytes) {
    char d[96] = "scalar";
    if (!md__type_is_scalar(o->type)) md__dims_str(o->rank, o->dims, d, sizeof d);
    return md__fail(MD_INVALID_ARGUMENT,
                    "operand %u: %s length %llu does not match its byte size %llu (%s %s)", i, ln,
                    (ull)o->length, (ull)bytes, md_operand_type_name(o->type), d);
  }
  return MD_NONE;
}

static md_status check_operand(const md_model *m, uint32_t i, const uint64_t *pool_size) {
  const md_operand *o = &m->operands[i];
  if (md_operand_type_size(o->type) == 0)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: unknown type %d", i, (int)o->type);
  const char *tn = md_operand_type_name(o->type);
  const char *ln = lifetime_name(o->lifetime);
  if (!ln)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: unknown lifetime %d", i, (int)o->lifetime);

  int scalar = md__type_is_scalar(o->type);
  if (scalar && o->rank != 0)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s is a scalar and must have rank 0, got %u",
                    i, tn, o->rank);
  if (o->rank > MD_MAX_RANK)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s rank %u is over the maximum %u", i, tn,
                    o->rank, MD_MAX_RANK);
  if (o->rank > 0 && !o->dims)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s has rank %u but dims is NULL", i, tn,
                    o->rank);

  if (o->type == MD_TENSOR_QUANT8_ASYMM || o->type == MD_TENSOR_QUANT8_ASYMM_SIGNED) {
    int32_t lo = o->type == MD_TENSOR_QUANT8_ASYMM ? 0 : -128;
    int32_t hi = o->type == MD_TENSOR_QUANT8_ASYMM ? 255 : 127;
    if (!(o->scale > 0.0f) || !isfinite(o->scale))
      return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s scale must be finite and > 0, got %g", i,
                      tn, (double)o->scale);
    if (o->zero_point < lo || o->zero_point > hi)
      return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s zero_point %d is outside [%d, %d]", i,
                      tn, (int)o->zero_point, (int)lo, (int)hi);
  } else if (o->type == MD_TENSOR_INT32 && !MD_MUTANT(int32_scale_refused)) {
    /* SPEC 7 (v1.2), as the NN HAL: a TENSOR_INT32 may carry a scale (a quantized
     * FULLY_CONNECTED's bias: input scale x weights scale), with zero point 0. */
    if (!(o->scale >= 0.0f) || !isfinite(o->scale))
      return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s scale must be finite and >= 0, got %g", i, tn,
                      (double)o->scale);
    if (o->zero_point != 0)
      return md__fail(MD_INVALID_ARGUMENT, "operand %u: %s zero_point must be 0, got %d", i, tn,
                      (int)o->zero_point);
  } else if (o->scale != 0.0f || o->zero_point != 0) {
    return md__fail(MD_INVALID_ARGUMENT,
                    "operand %u: %s is not quantized: scale and zero_point must be 0, got %g "
                    "and %d",
                    i, tn, (double)o->scale, (int)o->zero_point);
  }

  if (!is_constant(o->lifetime)) {
    if (o->pool != 0 || o->offset != 0 || o->length != 0)
      return md__fail(MD_INVALID_ARGUMENT,
                      "operand %u: %s has no storage: pool, offset and length must be 0, got "
                      "%u, %llu and %llu",
                      i, ln, o->pool, (ull)o->offset, (ull)o->length);
    return MD_NONE;
  }

  char d[96];
  if (!scalar && !md__dims_known(o->rank, o->dims))
    return md__fail(MD_INVALID_ARGUMENT,
                    "operand %u: %s %s constant must have fully known dims, got %s", i, ln, tn,
                    md__dims_str(o->rank, o->dims, d, sizeof d));
  uint64_t bytes = md__type_bytes(o->type, o->rank, o->dims);
  if (bytes == UINT64_MAX)
    return md__fail(MD_INVALID_ARGUMENT, "operand %u: byte size of %s %s overflows", i, tn,
                    md__dims_str(o->rank, o->dims, d, sizeof d));

  if (o->lifetime == MD_CONSTANT_COPY) {
    if (o->pool != 0)
      return md__fail(MD_INVALID_ARGUMENT, "operand %u: CONSTANT_COPY must have pool 0, got %u", i,
                      o->pool);
    return check_constant_range(i, o, bytes, "operand_values", m->operand_values_size);
  }
  if (o->pool >= m->n_pools)
    return md__fail(MD_INVALID_ARGUMENT,
                    "operand %u: CONSTANT_REFERENCE pool %u, but the model has %u pools", i,
                    o->pool, m->n_pools);
  char where[32];
  snprintf(where, sizeof where, "model pool %u", o->pool);
  return check_constant_range(i, o, bytes, where, pool_size[o->pool]);
}

/* Model inputs (or outputs) are exactly the SUBGRAPH_INPUT (OUTPUT) operands, each once.
 * seen[operand] records its position, MD__NO_INDEX when not listed. */
static md_status check_io(const md_model *m, int outputs, uint32_t *seen) {
  const char *kind = outputs ? "output" : "input";
  md_lifetime want = outputs ? MD_SUBGRAPH_OUTPUT : MD_SUBGRAPH_INPUT;
  uint32_t n = outputs ? m->n_outputs : m->n_inputs;
  const uint32_t *list = outputs ? m->outputs : m->inputs;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t idx = list[k];
    if (idx >= m->n_operands)
      return md__fail(MD_INVALID_ARGUMENT,
                      "model: %s %u is operand %u, but the model has %u operands", kind, k, idx,
                      m->n_operands);
    if (m->operands[idx].lifetime != want)
      return md__fail(MD_INVALID_ARGUMENT, "model: %s %u is operand %u, which is %s, not %s", kind,
                      k, idx, lifetime_name(m->operands[idx].lifetime), lifetime_name(want));
    if (seen[idx] != MD__NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT, "model: %s %u is operand %u, which is already %s %u",
                      kind, k, idx, kind, seen[idx]);
    seen[idx] = k;
  }
  for (uint32_t i = 0; i < m->n_operands; i++)
    if (m->operands[i].lifetime == want && seen[i] == MD__NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT,
                      "model: operand %u is %s but is not one of the model's %ss", i,
                      lifetime_name(want), kind);
  return MD_NONE;
}

static md_status check_attrs(uint32_t i, const md_operation *op) {
  const char *label = md__op_label(op);
  for (uint32_t a = 0; a < op->n_attrs; a++) {
    const md_attr *at = &op->attrs[a];
    if (!at->name || !at->name[0])
      return md__op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u has no name", a);
    if (!md__attr_kind_name(at->kind))
      return md__op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u '%s' has unknown kind %d", a,
                         at->name, (int)at->kind);
    if (at->kind == MD_ATTR_STR && !at->str)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u '%s' is STR with a NULL string",
                         a, at->name);
    if (at->kind == MD_ATTR_I64_ARRAY && at->count > 0 && !at->array)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "attribute %u '%s' is I64_ARRAY of count %u with a NULL array", a, at->name,
                         at->count);
    if (a > 0) {
      int c = strcmp(op->attrs[a - 1].name, at->name);
      if (c == 0)
        return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                           "attributes %u and %u are both named '%s' (names must be unique)", a - 1, a,
                           at->name);
      if (c > 0)
        return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                           "attributes are not sorted by name: '%s' (attribute %u) comes after '%s' "
                           "(attribute %u)",
                           at->name, a, op->attrs[a - 1].name, a - 1);
    }
  }
  return MD_NONE;
}

/* One operation on its own: type, name, pointers, attributes, operand indexes, what it
 * writes. writer[operand] records the writing operation (MD__NO_INDEX: none yet). */
static md_status check_operation(const md_model *m, uint32_t i, uint32_t *writer) {
  const md_operation *op = &m->operations[i];
  if (op->type == MD_OP_CUSTOM) {
    if (!op->custom_name || !op->custom_name[0])
      return md__op_fail(MD_INVALID_ARGUMENT, i, "CUSTOM", "custom_name is %s",
                         op->custom_name ? "empty" : "NULL");
  } else if (!md_operation_name(op->type)) {
    return md__fail(MD_INVALID_ARGUMENT, "operation %u: unknown operation type %d", i,
                    (int)op->type);
  }
  const char *label = md__op_label(op);
  if (op->n_inputs && !op->inputs)
    return md__op_fail(MD_INVALID_ARGUMENT, i, label, "n_inputs is %u but inputs is NULL",
                       op->n_inputs);
  if (op->n_outputs && !op->outputs)
    return md__op_fail(MD_INVALID_ARGUMENT, i, label, "n_outputs is %u but outputs is NULL",
                       op->n_outputs);
  if (op->n_outputs == 0) return md__op_fail(MD_INVALID_ARGUMENT, i, label, "has no outputs");
  if (op->type != MD_OP_CUSTOM) {
    if (op->n_attrs != 0)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "has %u attributes, but only CUSTOM operations take attributes", op->n_attrs);
  } else {
    if (op->n_attrs && !op->attrs)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label, "n_attrs is %u but attrs is NULL", op->n_attrs);
    md_status st = check_attrs(i, op);
    if (st != MD_NONE) return st;
  }
  for (uint32_t k = 0; k < op->n_inputs; k++)
    if (op->inputs[k] >= m->n_operands)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "input %u is operand %u, but the model has %u operands", k, op->inputs[k],
                         m->n_operands);
  for (uint32_t k = 0; k < op->n_outputs; k++) {
    uint32_t idx = op->outputs[k];
    if (idx >= m->n_operands)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "output %u is operand %u, but the model has %u operands", k, idx,
                         m->n_operands);
    md_lifetime lt = m->operands[idx].lifetime;
    if (!is_written(lt))
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "output %u is operand %u (%s), which an operation may not write", k, idx,
                         lifetime_name(lt));
    if (writer[idx] != MD__NO_INDEX)
      return md__op_fail(MD_INVALID_ARGUMENT, i, label,
                         "output %u is operand %u, already written by operation %u", k, idx,
                         writer[idx]);
    writer[idx] = i;
  }
  return MD_NONE;
}

/* Data flow: every operand an operation reads exists when it runs (operations are listed in
 * execution order), and every temporary and model output is written. */
static md_status check_flow(const md_model *m, const uint32_t *writer) {
  for (uint32_t i = 0; i < m->n_operations; i++) {
    const md_operation *op = &m->operations[i];
    for (uint32_t k = 0; k < op->n_inputs; k++) {
      uint32_t idx = op->inputs[k];
      md_lifetime lt = m->operands[idx].lifetime;
      if (!is_written(lt)) continue;
      if (writer[idx] == MD__NO_INDEX)
        return md__op_fail(MD_INVALID_ARGUMENT, i, md__op_label(op),
                           "input %u is operand %u (%s), which no operation writes", k, idx,
                           lifetime_name(lt));
      if (writer[idx] >= i)
        return md__op_fail(MD_INVALID_ARGUMENT, i, md__op_label(op),
                           "input %u is operand %u, written by operation %u, which does not come "
                           "before it (operations must be in execution order)",
                           k, idx, writer[idx]);
    }
  }
  for (uint32_t idx = 0; idx < m->n_operands; idx++)
    if (is_written(m->operands[idx].lifetime) && writer[idx] == MD__NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT, "operand %u (%s) is not written by any operation", idx,
                      lifetime_name(m->operands[idx].lifetime));
  return MD_NONE;
}

md_status md__model_validate(const md_model *m) {
  md_status st = check_counts(m);
  if (st != MD_NONE) return st;

  uint64_t *pool_size = calloc(m->n_pools ? m->n_pools : 1, sizeof *pool_size);
  uint32_t *scratch = malloc((size_t)(m->n_operands ? m->n_operands : 1) * sizeof *scratch);
  if (!pool_size || !scratch) {
    st = md__model_oom("validation");
    goto out;
  }
  if ((st = check_pools(m, pool_size)) != MD_NONE) goto out;
  for (uint32_t i = 0; i < m->n_operands; i++)
    if ((st = check_operand(m, i, pool_size)) != MD_NONE) goto out;

  /* Inputs and outputs have distinct lifetimes, so one `seen` table serves both. */
  for (uint32_t i = 0; i < m->n_operands; i++) scratch[i] = MD__NO_INDEX;
  if ((st = check_io(m, 0, scratch)) != MD_NONE) goto out;
  if ((st = check_io(m, 1, scratch)) != MD_NONE) goto out;

  for (uint32_t i = 0; i < m->n_operands; i++) scratch[i] = MD__NO_INDEX;
  for (uint32_t i = 0; i < m->n_operations; i++)
    if ((st = check_operation(m, i, scratch)) != MD_NONE) goto out;
  st = check_flow(m, scratch);
out:
  free(pool_size);
  free(scratch);
  return st;
}
