/* model.c - model validation (SPEC sections 1, 2 and 7) and the prepared-model deep copy.
 *
 * md__model_build runs in four stages, each only on what the earlier ones proved sound:
 *   1. validate: the caller's md_model against every structural rule (counts and pointers,
 *      operands, model inputs/outputs, pools before mapping, constant ranges, operations and
 *      their data flow). Nothing is allocated that outlives it; every rule broken is
 *      INVALID_ARGUMENT.
 *   2. copy: a deep copy that owns everything (md__model), with the constant pools mapped and
 *      acquired through md__pool_acquire.
 *   3. kernels: each operation's kernel is resolved for the platform and checked (counts,
 *      optional inputs, attributes against the kernel's md_attr_spec list, kernel->check) on
 *      the copy, so a kernel sees exactly what will run.
 *   4. hand over, or free everything built and release every mapping acquired.
 * md__model_supported runs the same stages, borrowing the caller's operand_values instead of
 * copying them and releasing the mappings before it returns.
 *
 * Decisions where SPEC.md is silent (each has a test in runtime/tests/base/test_model*.c):
 *   - Non-constant operands (TEMPORARY_VARIABLE, SUBGRAPH_INPUT/OUTPUT, NO_VALUE) must have
 *     pool, offset and length 0, and CONSTANT_COPY operands pool 0, as in the NN HAL.
 *   - A tensor constant needs fully known dims; a constant's length is then exactly its byte
 *     size (so never 0). Model pools must be readable (PROT_READ).
 *   - Unused operands are allowed: a temporary written but never read, a model input no
 *     operation reads, a constant or NO_VALUE operand nobody uses. A SUBGRAPH_OUTPUT may also
 *     be read by a later operation.
 *   - NO_VALUE is allowed only as an operation input at a position >= the kernel's
 *     min_inputs (the optional inputs); this is checked once the kernel is known.
 *   - Non-CUSTOM operations must have n_attrs 0; their custom_name is ignored (never read).
 *     A CUSTOM operation may name any registered kernel, built-ins included.
 *   - An invalid operation outranks an unsupported one: prepare reports INVALID_ARGUMENT if
 *     any operation is invalid, else the first GENERAL_FAILURE (no kernel / unsupported), so
 *     prepare and the supported query agree on which models are invalid.
 *   - Every model pool is validated and mapped, referenced or not. The supported query maps
 *     them too (kernel checks may read constants): a pool it cannot map fails the query with
 *     GENERAL_FAILURE naming the pool, as prepare would.
 *   - A constant's value keeps the alignment the client gave it: CONSTANT_COPY values sit at
 *     their offsets in one malloc'ed copy of operand_values, CONSTANT_REFERENCE values at
 *     their offsets in the mapping. Kernels read parameters with memcpy, not casts.
 *   - Out of memory while validating or copying: RESOURCE_EXHAUSTED_TRANSIENT. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "error.h"
#include "md/status.h"

#define NO_INDEX UINT32_MAX

typedef unsigned long long ull;

/* ---- names --------------------------------------------------------------------------- */


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

static const char *attr_kind_name(md_attr_kind k) {
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
static const char *op_label(const md_operation *op) {
  if (op->type == MD_OP_CUSTOM)
    return op->custom_name && op->custom_name[0] ? op->custom_name : "CUSTOM";
  const char *n = md_operation_name(op->type);
  return n ? n : "unknown type";
}

static md_status op_fail(md_status st, uint32_t i, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static md_status op_fail(md_status st, uint32_t i, const char *label, const char *fmt, ...) {
  char msg[MD__ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return md__fail(st, "operation %u (%s): %s", i, label, msg);
}

static md_status oom(const char *what) {
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
 * seen[operand] records its position, NO_INDEX when not listed. */
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
    if (seen[idx] != NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT, "model: %s %u is operand %u, which is already %s %u",
                      kind, k, idx, kind, seen[idx]);
    seen[idx] = k;
  }
  for (uint32_t i = 0; i < m->n_operands; i++)
    if (m->operands[i].lifetime == want && seen[i] == NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT,
                      "model: operand %u is %s but is not one of the model's %ss", i,
                      lifetime_name(want), kind);
  return MD_NONE;
}

static md_status check_attrs(uint32_t i, const md_operation *op) {
  const char *label = op_label(op);
  for (uint32_t a = 0; a < op->n_attrs; a++) {
    const md_attr *at = &op->attrs[a];
    if (!at->name || !at->name[0])
      return op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u has no name", a);
    if (!attr_kind_name(at->kind))
      return op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u '%s' has unknown kind %d", a,
                     at->name, (int)at->kind);
    if (at->kind == MD_ATTR_STR && !at->str)
      return op_fail(MD_INVALID_ARGUMENT, i, label, "attribute %u '%s' is STR with a NULL string",
                     a, at->name);
    if (at->kind == MD_ATTR_I64_ARRAY && at->count > 0 && !at->array)
      return op_fail(MD_INVALID_ARGUMENT, i, label,
                     "attribute %u '%s' is I64_ARRAY of count %u with a NULL array", a, at->name,
                     at->count);
    if (a > 0) {
      int c = strcmp(op->attrs[a - 1].name, at->name);
      if (c == 0)
        return op_fail(MD_INVALID_ARGUMENT, i, label,
                       "attributes %u and %u are both named '%s' (names must be unique)", a - 1, a,
                       at->name);
      if (c > 0)
        return op_fail(MD_INVALID_ARGUMENT, i, label,
                       "attributes are not sorted by name: '%s' (attribute %u) comes after '%s' "
                       "(attribute %u)",
                       at->name, a, op->attrs[a - 1].name, a - 1);
    }
  }
  return MD_NONE;
}

/* One operation on its own: type, name, pointers, attributes, operand indexes, what it
 * writes. writer[operand] records the writing operation (NO_INDEX: none yet). */
static md_status check_operation(const md_model *m, uint32_t i, uint32_t *writer) {
  const md_operation *op = &m->operations[i];
  if (op->type == MD_OP_CUSTOM) {
    if (!op->custom_name || !op->custom_name[0])
      return op_fail(MD_INVALID_ARGUMENT, i, "CUSTOM", "custom_name is %s",
                     op->custom_name ? "empty" : "NULL");
  } else if (!md_operation_name(op->type)) {
    return md__fail(MD_INVALID_ARGUMENT, "operation %u: unknown operation type %d", i,
                    (int)op->type);
  }
  const char *label = op_label(op);
  if (op->n_inputs && !op->inputs)
    return op_fail(MD_INVALID_ARGUMENT, i, label, "n_inputs is %u but inputs is NULL",
                   op->n_inputs);
  if (op->n_outputs && !op->outputs)
    return op_fail(MD_INVALID_ARGUMENT, i, label, "n_outputs is %u but outputs is NULL",
                   op->n_outputs);
  if (op->n_outputs == 0) return op_fail(MD_INVALID_ARGUMENT, i, label, "has no outputs");
  if (op->type != MD_OP_CUSTOM) {
    if (op->n_attrs != 0)
      return op_fail(MD_INVALID_ARGUMENT, i, label,
                     "has %u attributes, but only CUSTOM operations take attributes", op->n_attrs);
  } else {
    if (op->n_attrs && !op->attrs)
      return op_fail(MD_INVALID_ARGUMENT, i, label, "n_attrs is %u but attrs is NULL", op->n_attrs);
    md_status st = check_attrs(i, op);
    if (st != MD_NONE) return st;
  }
  for (uint32_t k = 0; k < op->n_inputs; k++)
    if (op->inputs[k] >= m->n_operands)
      return op_fail(MD_INVALID_ARGUMENT, i, label,
                     "input %u is operand %u, but the model has %u operands", k, op->inputs[k],
                     m->n_operands);
  for (uint32_t k = 0; k < op->n_outputs; k++) {
    uint32_t idx = op->outputs[k];
    if (idx >= m->n_operands)
      return op_fail(MD_INVALID_ARGUMENT, i, label,
                     "output %u is operand %u, but the model has %u operands", k, idx,
                     m->n_operands);
    md_lifetime lt = m->operands[idx].lifetime;
    if (!is_written(lt))
      return op_fail(MD_INVALID_ARGUMENT, i, label,
                     "output %u is operand %u (%s), which an operation may not write", k, idx,
                     lifetime_name(lt));
    if (writer[idx] != NO_INDEX)
      return op_fail(MD_INVALID_ARGUMENT, i, label,
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
      if (writer[idx] == NO_INDEX)
        return op_fail(MD_INVALID_ARGUMENT, i, op_label(op),
                       "input %u is operand %u (%s), which no operation writes", k, idx,
                       lifetime_name(lt));
      if (writer[idx] >= i)
        return op_fail(MD_INVALID_ARGUMENT, i, op_label(op),
                       "input %u is operand %u, written by operation %u, which does not come "
                       "before it (operations must be in execution order)",
                       k, idx, writer[idx]);
    }
  }
  for (uint32_t idx = 0; idx < m->n_operands; idx++)
    if (is_written(m->operands[idx].lifetime) && writer[idx] == NO_INDEX)
      return md__fail(MD_INVALID_ARGUMENT, "operand %u (%s) is not written by any operation", idx,
                      lifetime_name(m->operands[idx].lifetime));
  return MD_NONE;
}

static md_status validate(const md_model *m) {
  md_status st = check_counts(m);
  if (st != MD_NONE) return st;

  uint64_t *pool_size = calloc(m->n_pools ? m->n_pools : 1, sizeof *pool_size);
  uint32_t *scratch = malloc((size_t)(m->n_operands ? m->n_operands : 1) * sizeof *scratch);
  if (!pool_size || !scratch) {
    st = oom("validation");
    goto out;
  }
  if ((st = check_pools(m, pool_size)) != MD_NONE) goto out;
  for (uint32_t i = 0; i < m->n_operands; i++)
    if ((st = check_operand(m, i, pool_size)) != MD_NONE) goto out;

  /* Inputs and outputs have distinct lifetimes, so one `seen` table serves both. */
  for (uint32_t i = 0; i < m->n_operands; i++) scratch[i] = NO_INDEX;
  if ((st = check_io(m, 0, scratch)) != MD_NONE) goto out;
  if ((st = check_io(m, 1, scratch)) != MD_NONE) goto out;

  for (uint32_t i = 0; i < m->n_operands; i++) scratch[i] = NO_INDEX;
  for (uint32_t i = 0; i < m->n_operations; i++)
    if ((st = check_operation(m, i, scratch)) != MD_NONE) goto out;
  st = check_flow(m, scratch);
out:
  free(pool_size);
  free(scratch);
  return st;
}

/* ---- stage 2: the deep copy ----------------------------------------------------------- */

void md__model_free(md__model *c) {
  if (!c) return;
  for (uint32_t p = 0; p < c->n_pools; p++) md__mapping_release(&c->pools[p]);
  free(c->pools);
  if (c->operations) {
    for (uint32_t i = 0; i < c->n_operations; i++) {
      md__operation *op = &c->operations[i];
      free((void *)op->name);
      free(op->inputs);
      free(op->outputs);
      for (uint32_t a = 0; a < op->n_attrs; a++) {
        free((void *)op->attrs[a].name);
        free((void *)op->attrs[a].str);
        free((void *)op->attrs[a].array);
      }
      free(op->attrs);
    }
  }
  free(c->operations);
  free(c->operands);
  free(c->inputs);
  free(c->outputs);
  free(c->values);
  free(c);
}

static uint32_t *dup_u32(const uint32_t *src, uint32_t n) {
  uint32_t *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (d && n) memcpy(d, src, (size_t)n * sizeof *d);
  return d;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* Copies attrs into dst, which is zeroed; on failure the caller frees what was copied. */
static int copy_attrs(md_attr *dst, const md_attr *src, uint32_t n) {
  for (uint32_t a = 0; a < n; a++) {
    dst[a].kind = src[a].kind;
    dst[a].i64 = src[a].i64;
    dst[a].f64 = src[a].f64;
    if (!(dst[a].name = dup_str(src[a].name))) return -1;
    if (src[a].kind == MD_ATTR_STR && !(dst[a].str = dup_str(src[a].str))) return -1;
    if (src[a].kind == MD_ATTR_I64_ARRAY) {
      dst[a].count = src[a].count;
      if (src[a].count) {
        int64_t *arr = malloc((size_t)src[a].count * sizeof *arr);
        if (!arr) return -1;
        memcpy(arr, src[a].array, (size_t)src[a].count * sizeof *arr);
        dst[a].array = arr;
      }
    }
  }
  return 0;
}

/* Builds the copy of a validated model. borrow: CONSTANT_COPY values point into the caller's
 * operand_values (for md__model_supported, which frees the copy before returning). */
static md_status copy_model(const md_model *m, md__pool_cache *cache, int borrow, md__model **out) {
  md__model *c = calloc(1, sizeof *c);
  if (!c) return oom("the prepared model");
  md_status st = MD_NONE;
  const char *what = NULL;

  c->operands = calloc(m->n_operands ? m->n_operands : 1, sizeof *c->operands);
  c->operations = calloc(m->n_operations, sizeof *c->operations);
  c->inputs = dup_u32(m->inputs, m->n_inputs);
  c->outputs = dup_u32(m->outputs, m->n_outputs);
  c->pools = calloc(m->n_pools ? m->n_pools : 1, sizeof *c->pools);
  if (!c->operands || !c->operations || !c->inputs || !c->outputs || !c->pools) {
    what = "the model's tables";
    goto oom;
  }
  c->n_operands = m->n_operands;
  c->n_inputs = m->n_inputs;
  c->n_outputs = m->n_outputs;

  const uint8_t *values = m->operand_values;
  if (!borrow && m->operand_values_size) {
    if (m->operand_values_size > SIZE_MAX ||
        !(c->values = malloc((size_t)m->operand_values_size))) {
      what = "operand_values";
      goto oom;
    }
    memcpy(c->values, m->operand_values, (size_t)m->operand_values_size);
    c->values_size = m->operand_values_size;
    values = c->values;
  }

  for (uint32_t p = 0; p < m->n_pools; p++) {
    char pname[32];
    snprintf(pname, sizeof pname, "model pool %u", p);
    st = md__pool_acquire(cache, &m->pools[p], MD__POOL_CONSTANT, pname, NULL, &c->pools[p]);
    if (st != MD_NONE) goto fail;
    c->n_pools = p + 1;
  }

  for (uint32_t i = 0; i < m->n_operands; i++) {
    const md_operand *o = &m->operands[i];
    md__operand *d = &c->operands[i];
    d->type = o->type;
    d->lifetime = o->lifetime;
    d->rank = o->rank;
    if (o->rank) memcpy(d->dims, o->dims, o->rank * sizeof *o->dims);
    d->scale = o->scale;
    d->zero_point = o->zero_point;
    d->io_index = NO_INDEX;
    if (o->lifetime == MD_CONSTANT_COPY) {
      d->value = values + o->offset;
      d->length = o->length;
    } else if (o->lifetime == MD_CONSTANT_REFERENCE) {
      const md__mapping *mp = &c->pools[o->pool];
      /* Validated against the pool's logical size; the mapping is that size, but never
       * trust one module's arithmetic for another's memory. */
      if (o->offset > mp->size || o->length > mp->size - o->offset) {
        st = md__fail(MD_GENERAL_FAILURE,
                      "operand %u: model pool %u is mapped with %llu bytes, short of offset %llu "
                      "+ length %llu",
                      i, o->pool, (ull)mp->size, (ull)o->offset, (ull)o->length);
        goto fail;
      }
      d->value = mp->base + o->offset;
      d->length = o->length;
    }
  }
  for (uint32_t k = 0; k < m->n_inputs; k++) c->operands[m->inputs[k]].io_index = k;
  for (uint32_t k = 0; k < m->n_outputs; k++) c->operands[m->outputs[k]].io_index = k;

  c->n_operations = m->n_operations;
  for (uint32_t i = 0; i < m->n_operations; i++) {
    const md_operation *o = &m->operations[i];
    md__operation *d = &c->operations[i];
    d->type = o->type;
    d->name = dup_str(op_label(o));
    d->inputs = dup_u32(o->inputs, o->n_inputs);
    d->outputs = dup_u32(o->outputs, o->n_outputs);
    if (!d->name || !d->inputs || !d->outputs) {
      what = "an operation";
      goto oom;
    }
    d->n_inputs = o->n_inputs;
    d->n_outputs = o->n_outputs;
    if (o->type == MD_OP_CUSTOM && o->n_attrs) {
      if (!(d->attrs = calloc(o->n_attrs, sizeof *d->attrs))) {
        what = "attributes";
        goto oom;
      }
      d->n_attrs = o->n_attrs; /* before copying: a partial copy is freed entry by entry */
      if (copy_attrs(d->attrs, o->attrs, o->n_attrs) != 0) {
        what = "attributes";
        goto oom;
      }
    }
  }
  *out = c;
  return MD_NONE;

oom:
  st = oom(what);
fail:
  md__model_free(c);
  return st;
}

/* ---- stage 3: kernels ----------------------------------------------------------------- */

static const md_kernel_def *find_kernel(const char *name, const char *platform) {
  const md_kernel_def *k = md_kernel_find(name, platform);
  /* Simulated device memory is host addressable: "sim" runs "host" kernels (md/kernel.h). */
  if (!k && strcmp(platform, "sim") == 0) k = md_kernel_find(name, "host");
  return k;
}

static md_status check_attr_specs(const md__model *c, uint32_t i, const md_kernel_def *k) {
  const md__operation *op = &c->operations[i];
  for (uint32_t a = 0; a < op->n_attrs; a++) {
    const md_attr *at = &op->attrs[a];
    const md_attr_spec *spec = NULL;
    for (uint32_t s = 0; s < k->n_attr_specs && !spec; s++)
      if (k->attr_specs[s].name && strcmp(k->attr_specs[s].name, at->name) == 0)
        spec = &k->attr_specs[s];
    if (!spec)
      return op_fail(MD_INVALID_ARGUMENT, i, op->name, "unknown attribute '%s' (attribute %u)",
                     at->name, a);
    if (spec->kind != at->kind)
      return op_fail(MD_INVALID_ARGUMENT, i, op->name, "attribute '%s' must be %s, got %s",
                     at->name, attr_kind_name(spec->kind) ? attr_kind_name(spec->kind) : "?",
                     attr_kind_name(at->kind));
  }
  for (uint32_t s = 0; s < k->n_attr_specs; s++) {
    const md_attr_spec *spec = &k->attr_specs[s];
    if (!spec->required || !spec->name) continue;
    int found = 0;
    for (uint32_t a = 0; a < op->n_attrs && !found; a++)
      found = strcmp(op->attrs[a].name, spec->name) == 0;
    if (!found)
      return op_fail(MD_INVALID_ARGUMENT, i, op->name, "missing required attribute '%s' (%s)",
                     spec->name, attr_kind_name(spec->kind) ? attr_kind_name(spec->kind) : "?");
  }
  return MD_NONE;
}

static void operand_info(const md__model *c, uint32_t idx, md_operand_info *info) {
  const md__operand *o = &c->operands[idx];
  info->type = o->type;
  info->rank = o->rank;
  info->dims = o->dims;
  info->scale = o->scale;
  info->zero_point = o->zero_point;
  info->lifetime = o->lifetime;
  info->value = o->value;
  info->length = o->length;
}

/* Resolves and checks operation i. infos has room for its inputs and outputs. MD_NONE and
 * *kernel set; GENERAL_FAILURE when the platform cannot run it; INVALID_ARGUMENT when it is
 * invalid for its kernel; or whatever else the kernel's check returned. */
static md_status resolve_op(const md__model *c, uint32_t i, const char *platform,
                            md_operand_info *infos, const md_kernel_def **kernel) {
  const md__operation *op = &c->operations[i];
  const md_kernel_def *k = find_kernel(op->name, platform);
  if (!k)
    return md__fail(MD_GENERAL_FAILURE, "operation %u: no kernel for %s on platform %s", i,
                    op->name, platform);
  if (op->n_inputs < k->min_inputs || op->n_inputs > k->max_inputs) {
    if (k->min_inputs == k->max_inputs)
      return op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u inputs, %s takes %u", op->n_inputs,
                     op->name, k->min_inputs);
    return op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u inputs, %s takes %u to %u",
                   op->n_inputs, op->name, k->min_inputs, k->max_inputs);
  }
  if (op->n_outputs != k->n_outputs)
    return op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u outputs, %s takes %u", op->n_outputs,
                   op->name, k->n_outputs);
  for (uint32_t in = 0; in < op->n_inputs; in++)
    if (c->operands[op->inputs[in]].lifetime == MD_NO_VALUE && in < k->min_inputs)
      return op_fail(MD_INVALID_ARGUMENT, i, op->name,
                     "input %u is operand %u (NO_VALUE), but input %u is not optional (%s "
                     "requires its first %u inputs)",
                     in, op->inputs[in], in, op->name, k->min_inputs);
  md_status st = check_attr_specs(c, i, k);
  if (st != MD_NONE) return st;

  if (k->check) {
    for (uint32_t in = 0; in < op->n_inputs; in++) operand_info(c, op->inputs[in], &infos[in]);
    for (uint32_t o = 0; o < op->n_outputs; o++)
      operand_info(c, op->outputs[o], &infos[op->n_inputs + o]);
    md_op_sig sig = {.n_inputs = op->n_inputs,
                     .inputs = infos,
                     .n_outputs = op->n_outputs,
                     .outputs = infos + op->n_inputs,
                     .n_attrs = op->n_attrs,
                     .attrs = op->attrs};
    md_kernel_status ks;
    memset(&ks, 0, sizeof ks);
    st = k->check(&sig, &ks, k->user);
    if (st == MD_NONE) st = ks.code; /* a check that set st but returned NONE still failed */
    if (st != MD_NONE) {
      ks.message[sizeof ks.message - 1] = '\0';
      if (ks.message[0]) return op_fail(st, i, op->name, "%s", ks.message);
      return op_fail(st, i, op->name, "the kernel's check failed with %s", md_status_name(st));
    }
  }
  *kernel = k;
  return MD_NONE;
}

/* Resolves every operation. supported == NULL (prepare): fails on the first invalid
 * operation, else on the first unsupported one; sets each operation's kernel. Otherwise
 * supported[i] says whether operation i can run, and only an invalid model fails. */
static md_status resolve_ops(md__model *c, const char *platform, uint8_t *supported) {
  uint32_t max_io = 0;
  for (uint32_t i = 0; i < c->n_operations; i++) {
    uint32_t n = c->operations[i].n_inputs + c->operations[i].n_outputs;
    if (n > max_io) max_io = n;
  }
  md_operand_info *infos = calloc(max_io ? max_io : 1, sizeof *infos);
  if (!infos) return oom("kernel checks");

  md_status st = MD_NONE, unsupported = MD_NONE;
  char saved[MD__ERROR_MAX];
  for (uint32_t i = 0; i < c->n_operations; i++) {
    const md_kernel_def *k = NULL;
    md_status r = resolve_op(c, i, platform, infos, &k);
    if (r == MD_NONE) {
      c->operations[i].kernel = k;
      if (supported) supported[i] = 1;
    } else if (r == MD_GENERAL_FAILURE) {
      if (supported) supported[i] = 0;
      if (unsupported == MD_NONE) {
        unsupported = r;
        snprintf(saved, sizeof saved, "%s", md__last_error());
      }
    } else {
      st = r;
      break;
    }
  }
  free(infos);
  if (st == MD_NONE && !supported && unsupported != MD_NONE)
    st = md__fail(unsupported, "%s", saved);
  return st;
}

/* ---- entry points --------------------------------------------------------------------- */

static md_status check_args(const md_model *m, const char *platform, const void *out,
                            const char *out_name) {
  if (!m) return md__fail(MD_INVALID_ARGUMENT, "model: NULL");
  if (!platform || !platform[0]) return md__fail(MD_INVALID_ARGUMENT, "model: no platform given");
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "model: %s is NULL", out_name);
  return MD_NONE;
}

md_status md__model_build(const md_model *m, const char *platform, md__pool_cache *cache,
                          md__model **out) {
  md_status st = check_args(m, platform, out, "out");
  if (st == MD_NONE) st = validate(m);
  if (st != MD_NONE) return st;
  md__model *c = NULL;
  if ((st = copy_model(m, cache, 0, &c)) != MD_NONE) return st;
  if ((st = resolve_ops(c, platform, NULL)) != MD_NONE) {
    md__model_free(c);
    return st;
  }
  *out = c;
  return MD_NONE;
}

md_status md__model_supported(const md_model *m, const char *platform, uint8_t *supported) {
  md_status st = check_args(m, platform, supported, "supported");
  if (st == MD_NONE) st = validate(m);
  if (st != MD_NONE) return st;
  uint8_t *result = malloc(m->n_operations);
  if (!result) return oom("the supported list");
  md__model *c = NULL;
  /* Kernel checks may read constants, so the pools are mapped, uncached, for this call only. */
  if ((st = copy_model(m, NULL, 1, &c)) == MD_NONE) {
    st = resolve_ops(c, platform, result);
    md__model_free(c);
  }
  if (st == MD_NONE) memcpy(supported, result, m->n_operations);
  free(result);
  return st;
}
