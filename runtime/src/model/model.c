/* model.c - building a prepared model (md__model, model.h) from a caller's md_model, and the
 * supported-operations query (SPEC sections 1, 2 and 7).
 *
 * md__model_build runs in four stages, each only on what the earlier ones proved sound:
 *   1. validate: the caller's md_model against every structural rule (model_check.c).
 *   2. copy: a deep copy that owns everything (md__model), with the constant pools mapped and
 *      acquired through md__pool_acquire.
 *   3. kernels: each operation's kernel is resolved for the platform and checked (counts,
 *      optional inputs, attributes against the kernel's md_attr_spec list, kernel->check) on
 *      the copy, so a kernel sees exactly what will run.
 *   4. hand over, or free everything built and release every mapping acquired.
 * md__model_supported runs the same stages, borrowing the caller's operand_values instead of
 * copying them and releasing the mappings before it returns.
 *
 * Decisions where SPEC.md is silent (each has a test in runtime/tests/base/test_model*.c; the
 * validation's are in model_check.c):
 *   - NO_VALUE is allowed only as an operation input at a position >= the kernel's
 *     min_inputs (the optional inputs); this is checked once the kernel is known.
 *   - An invalid operation outranks an unsupported one: prepare reports INVALID_ARGUMENT if
 *     any operation is invalid, else the first GENERAL_FAILURE (no kernel / unsupported), so
 *     prepare and the supported query agree on which models are invalid.
 *   - Every model pool is mapped, referenced or not. The supported query maps them too
 *     (kernel checks may read constants): a pool it cannot map fails the query with
 *     GENERAL_FAILURE naming the pool, as prepare would.
 *   - A constant's value keeps the alignment the client gave it: CONSTANT_COPY values sit at
 *     their offsets in one malloc'ed copy of operand_values, CONSTANT_REFERENCE values at
 *     their offsets in the mapping. Kernels read parameters with memcpy, not casts.
 *   - Out of memory while copying: RESOURCE_EXHAUSTED_TRANSIENT. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "md/status.h"
#include "model_int.h"

typedef unsigned long long ull;

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
  if (!c) return md__model_oom("the prepared model");
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
    d->io_index = MD__NO_INDEX;
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
    d->name = dup_str(md__op_label(o));
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
  st = md__model_oom(what);
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
      return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "unknown attribute '%s' (attribute %u)",
                         at->name, a);
    if (spec->kind != at->kind)
      return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "attribute '%s' must be %s, got %s",
                         at->name, md__attr_kind_name(spec->kind) ? md__attr_kind_name(spec->kind) : "?",
                         md__attr_kind_name(at->kind));
  }
  for (uint32_t s = 0; s < k->n_attr_specs; s++) {
    const md_attr_spec *spec = &k->attr_specs[s];
    if (!spec->required || !spec->name) continue;
    int found = 0;
    for (uint32_t a = 0; a < op->n_attrs && !found; a++)
      found = strcmp(op->attrs[a].name, spec->name) == 0;
    if (!found)
      return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "missing required attribute '%s' (%s)",
                         spec->name, md__attr_kind_name(spec->kind) ? md__attr_kind_name(spec->kind) : "?");
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
      return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u inputs, %s takes %u", op->n_inputs,
                         op->name, k->min_inputs);
    return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u inputs, %s takes %u to %u",
                       op->n_inputs, op->name, k->min_inputs, k->max_inputs);
  }
  if (op->n_outputs != k->n_outputs)
    return md__op_fail(MD_INVALID_ARGUMENT, i, op->name, "has %u outputs, %s takes %u", op->n_outputs,
                       op->name, k->n_outputs);
  for (uint32_t in = 0; in < op->n_inputs; in++)
    if (c->operands[op->inputs[in]].lifetime == MD_NO_VALUE && in < k->min_inputs)
      return md__op_fail(MD_INVALID_ARGUMENT, i, op->name,
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
      if (ks.message[0]) return md__op_fail(st, i, op->name, "%s", ks.message);
      return md__op_fail(st, i, op->name, "the kernel's check failed with %s", md_status_name(st));
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
  if (!infos) return md__model_oom("kernel checks");

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
  if (st == MD_NONE) st = md__model_validate(m);
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
  if (st == MD_NONE) st = md__model_validate(m);
  if (st != MD_NONE) return st;
  uint8_t *result = malloc(m->n_operations);
  if (!result) return md__model_oom("the supported list");
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
