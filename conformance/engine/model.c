/* model.c - builds md_model and md_request values from a trace's JSON, every byte they point to
 * owned by an arena. Enum fields take driver.h's names or numbers, so invalid values can be
 * written on purpose; only what cannot be represented in the ABI is a trace error. */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

void mdc__model_free(mdc__model *m) {
  if (!m) return;
  mdc__arena_free(&m->arena);
  free(m);
}

static int get_array(mdc__where *w, json_t *obj, const char *key, size_t max, json_t **out,
                     size_t *n) {
  json_t *v = json_object_get(obj, key);
  *out = NULL;
  *n = 0;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v)) return mdc__terr(w, "'%s' must be an array", key);
  if (json_array_size(v) > max)
    return mdc__terr(w, "'%s' has %zu entries (limit %zu)", key, json_array_size(v), max);
  *out = v;
  *n = json_array_size(v);
  return 0;
}

static int operand(mdc__where *w, mdc__arena *a, json_t *o, int strict, size_t i, md_operand *op) {
  static const char *const keys[] = {"type", "dims", "scale", "zero_point", "lifetime", "pool",
                                     "offset", "length", NULL};
  char what[64];
  snprintf(what, sizeof what, "operands[%zu]", i);
  if (mdc__check_keys(w, o, keys, strict, what)) return -1;
  int64_t type, lifetime = MD_TEMPORARY_VARIABLE, zp, pool;
  json_t *tv = json_object_get(o, "type"), *lv = json_object_get(o, "lifetime");
  if (!tv) return mdc__terr(w, "%s: missing field 'type'", what);
  if (mdc__enum_value(w, tv, mdc__operand_types, "operand 'type'", &type)) return -1;
  if (lv && mdc__enum_value(w, lv, mdc__lifetimes, "operand 'lifetime'", &lifetime)) return -1;
  double scale;
  uint64_t off, len;
  if (mdc__get_u32_array(w, a, o, "dims", MDC__MAX_DIMS, &op->rank, (uint32_t **)&op->dims) ||
      mdc__get_num(w, o, "scale", 0.0, &scale) ||
      mdc__get_int(w, o, "zero_point", 0, 0, INT32_MIN, INT32_MAX, &zp) ||
      mdc__get_int(w, o, "pool", 0, 0, 0, UINT32_MAX, &pool) ||
      mdc__get_u64(w, o, "offset", 0, 0, UINT64_MAX, &off) ||
      mdc__get_u64(w, o, "length", 0, 0, UINT64_MAX, &len))
    return -1;
  op->type = (md_operand_type)type;
  op->lifetime = (md_lifetime)lifetime;
  op->scale = (float)scale;
  op->zero_point = (int32_t)zp;
  op->pool = (uint32_t)pool;
  op->offset = off;
  op->length = len;
  return 0;
}

static int attr(mdc__where *w, mdc__arena *a, json_t *o, int strict, md_attr *at) {
  static const char *const keys[] = {"name", "i64", "f64", "str", "i64_array", NULL};
  if (mdc__check_keys(w, o, keys, strict, "attr")) return -1;
  const char *name;
  if (mdc__get_str(w, o, "name", 1, &name)) return -1;
  if (!(at->name = mdc__arena_strdup(a, name))) return mdc__terr(w, "out of memory");
  json_t *v;
  int kinds = 0;
  if ((v = json_object_get(o, "i64"))) {
    kinds++;
    if (!json_is_integer(v)) return mdc__terr(w, "attr '%s': 'i64' must be an integer", name);
    at->kind = MD_ATTR_I64;
    at->i64 = json_integer_value(v);
  }
  if ((v = json_object_get(o, "f64"))) {
    kinds++;
    at->kind = MD_ATTR_F64;
    if (mdc__num_value(w, v, "f64", &at->f64)) return -1;
  }
  if ((v = json_object_get(o, "str"))) {
    kinds++;
    if (!json_is_string(v)) return mdc__terr(w, "attr '%s': 'str' must be a string", name);
    at->kind = MD_ATTR_STR;
    if (!(at->str = mdc__arena_strdup(a, json_string_value(v)))) return mdc__terr(w, "out of memory");
  }
  if ((v = json_object_get(o, "i64_array"))) {
    kinds++;
    if (!json_is_array(v) || json_array_size(v) > MDC__MAX_ARRAY)
      return mdc__terr(w, "attr '%s': 'i64_array' must be an array", name);
    size_t n = json_array_size(v);
    int64_t *arr = mdc__arena_alloc(a, sizeof *arr, n);
    if (!arr) return mdc__terr(w, "out of memory");
    for (size_t i = 0; i < n; i++) {
      if (!json_is_integer(json_array_get(v, i)))
        return mdc__terr(w, "attr '%s': i64_array[%zu] must be an integer", name, i);
      arr[i] = json_integer_value(json_array_get(v, i));
    }
    at->kind = MD_ATTR_I64_ARRAY;
    at->array = arr;
    at->count = (uint32_t)n;
  }
  if (kinds != 1) return mdc__terr(w, "attr '%s' needs exactly one of i64, f64, str, i64_array", name);
  return 0;
}

static int operation(mdc__where *w, mdc__arena *a, json_t *o, int strict, size_t i,
                     md_operation *op) {
  static const char *const keys[] = {"type", "inputs", "outputs", "name", "attrs", NULL};
  char what[64];
  snprintf(what, sizeof what, "operations[%zu]", i);
  if (mdc__check_keys(w, o, keys, strict, what)) return -1;
  int64_t type;
  json_t *tv = json_object_get(o, "type");
  if (!tv) return mdc__terr(w, "%s: missing field 'type'", what);
  if (mdc__enum_value(w, tv, mdc__operation_types, "operation 'type'", &type)) return -1;
  op->type = (md_operation_type)type;
  if (mdc__get_u32_array(w, a, o, "inputs", MDC__MAX_ARRAY, &op->n_inputs, (uint32_t **)&op->inputs) ||
      mdc__get_u32_array(w, a, o, "outputs", MDC__MAX_ARRAY, &op->n_outputs, (uint32_t **)&op->outputs))
    return -1;
  const char *name;
  if (mdc__get_str(w, o, "name", 0, &name)) return -1;
  if (name && !(op->custom_name = mdc__arena_strdup(a, name))) return mdc__terr(w, "out of memory");
  json_t *attrs;
  size_t n;
  if (get_array(w, o, "attrs", MDC__MAX_ARRAY, &attrs, &n)) return -1;
  if (n) {
    md_attr *at = mdc__arena_alloc(a, sizeof *at, n);
    if (!at) return mdc__terr(w, "out of memory");
    for (size_t k = 0; k < n; k++)
      if (attr(w, a, json_array_get(attrs, k), strict, &at[k])) return -1;
    op->attrs = at;
    op->n_attrs = (uint32_t)n;
  }
  return 0;
}

int mdc__model_build(mdc__where *w, mdc__names *t, json_t *obj, int strict, mdc__model **out) {
  *out = NULL;
  mdc__model *m = calloc(1, sizeof *m);
  if (!m) return mdc__terr(w, "out of memory");
  mdc__arena *a = &m->arena;
  md_model *md = &m->m;
  json_t *arr;
  size_t n;
  static const char *const keys[] = {"op", "as", "operands", "operations", "inputs", "outputs",
                                     "operand_values", "pools", NULL};
  if (mdc__check_keys(w, obj, keys, strict, "model")) goto fail;
  if (get_array(w, obj, "operands", MDC__MAX_ARRAY, &arr, &n)) goto fail;
  if (n) {
    md_operand *ops = mdc__arena_alloc(a, sizeof *ops, n);
    if (!ops) { mdc__terr(w, "out of memory"); goto fail; }
    for (size_t i = 0; i < n; i++)
      if (operand(w, a, json_array_get(arr, i), strict, i, &ops[i])) goto fail;
    md->operands = ops;
    md->n_operands = (uint32_t)n;
  }
  if (get_array(w, obj, "operations", MDC__MAX_ARRAY, &arr, &n)) goto fail;
  if (n) {
    md_operation *ops = mdc__arena_alloc(a, sizeof *ops, n);
    if (!ops) { mdc__terr(w, "out of memory"); goto fail; }
    for (size_t i = 0; i < n; i++)
      if (operation(w, a, json_array_get(arr, i), strict, i, &ops[i])) goto fail;
    md->operations = ops;
    md->n_operations = (uint32_t)n;
  }
  if (mdc__get_u32_array(w, a, obj, "inputs", MDC__MAX_ARRAY, &md->n_inputs, (uint32_t **)&md->inputs) ||
      mdc__get_u32_array(w, a, obj, "outputs", MDC__MAX_ARRAY, &md->n_outputs, (uint32_t **)&md->outputs))
    goto fail;
  json_t *vals = json_object_get(obj, "operand_values");
  if (vals && !json_is_null(vals)) {
    mdc__bytes b;
    if (mdc__payload(w, vals, strict, &b)) goto fail;
    uint8_t *p = mdc__arena_alloc(a, 1, b.len);
    if (p) memcpy(p, b.data, b.len);
    free(b.data);
    if (!p) { mdc__terr(w, "out of memory"); goto fail; }
    md->operand_values = p;
    md->operand_values_size = b.len;
  }
  if (get_array(w, obj, "pools", MDC__MAX_ARRAY, &arr, &n)) goto fail;
  if (n) {
    md_memory *pools = mdc__arena_alloc(a, sizeof *pools, n);
    if (!pools) { mdc__terr(w, "out of memory"); goto fail; }
    for (size_t i = 0; i < n; i++) {
      mdc__pool *p;
      if (mdc__resolve_memory(w, t, json_array_get(arr, i), "pools", &p)) goto fail;
      pools[i] = p->mem;
    }
    md->pools = pools;
    md->n_pools = (uint32_t)n;
  }
  *out = m;
  return 0;
fail:
  mdc__model_free(m);
  return -1;
}

static int request_arg(mdc__where *w, mdc__arena *a, json_t *o, int strict, const char *what,
                       md_request_arg *arg) {
  static const char *const keys[] = {"pool", "offset", "length", "dims", "no_value", NULL};
  if (mdc__check_keys(w, o, keys, strict, what)) return -1;
  int64_t pool;
  int no_value;
  if (mdc__get_int(w, o, "pool", 0, 0, 0, UINT32_MAX, &pool) ||
      mdc__get_u64(w, o, "offset", 0, 0, UINT64_MAX, &arg->offset) ||
      mdc__get_u64(w, o, "length", 0, 0, UINT64_MAX, &arg->length) ||
      mdc__get_u32_array(w, a, o, "dims", MDC__MAX_DIMS, &arg->rank, (uint32_t **)&arg->dims) ||
      mdc__get_bool(w, o, "no_value", 0, &no_value))
    return -1;
  arg->pool = (uint32_t)pool;
  arg->has_no_value = (uint32_t)no_value;
  return 0;
}

int mdc__request_build(mdc__where *w, mdc__names *t, json_t *obj, int strict, int minor, int resolve,
                       mdc__arena *a, md_request *out) {
  static const char *const keys[] = {"op", "as", "inputs", "outputs", "pools", NULL};
  memset(out, 0, sizeof *out);
  if (mdc__check_keys(w, obj, keys, strict, "request")) return -1;
  static const char *const which[] = {"inputs", "outputs"};
  for (int k = 0; k < 2; k++) {
    json_t *arr;
    size_t n;
    if (get_array(w, obj, which[k], MDC__MAX_ARRAY, &arr, &n)) return -1;
    md_request_arg *args = mdc__arena_alloc(a, sizeof *args, n);
    if (!args) return mdc__terr(w, "out of memory");
    for (size_t i = 0; i < n; i++) {
      char what[64];
      snprintf(what, sizeof what, "%s[%zu]", which[k], i);
      if (request_arg(w, a, json_array_get(arr, i), strict, what, &args[i])) return -1;
    }
    if (k == 0) { out->inputs = args; out->n_inputs = (uint32_t)n; }
    else { out->outputs = args; out->n_outputs = (uint32_t)n; }
  }
  json_t *arr;
  size_t n;
  if (get_array(w, obj, "pools", MDC__MAX_ARRAY, &arr, &n)) return -1;
  md_request_pool *pools = mdc__arena_alloc(a, sizeof *pools, n);
  if (!pools) return mdc__terr(w, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *p = json_array_get(arr, i), *mem = json_object_get(p, "memory"),
           *tok = json_object_get(p, "token"), *reg = json_object_get(p, "registered");
    if (!json_is_object(p) || (!!mem + !!tok + !!reg) != 1 || (strict && json_object_size(p) != 1))
      return mdc__terr(w, "pools[%zu] must be {\"memory\": NAME}, {\"token\": NAME} or {\"registered\": NAME}", i);
    if (reg) {
      /* SPEC 9: is_token 2, token = the registered pool's handle (1.1). */
      if (minor < 1)
        return mdc__terr(w, "pools[%zu]: 'registered' needs trace format 1.1 (the header says 1.%d)", i, minor);
      pools[i].is_token = 2;
      pools[i].memory.fd = -1;
      if (resolve && mdc__resolve_handle(w, t, reg, "pools", &pools[i].token)) return -1;
      if (!resolve && !json_is_string(reg) && !json_is_object(reg))
        return mdc__terr(w, "pools[%zu]: 'registered' takes a name or a literal", i);
    } else if (mem) {
      if (!json_is_string(mem)) return mdc__terr(w, "pools[%zu]: 'memory' takes a name", i);
      if (resolve) {
        mdc__pool *pool;
        if (mdc__resolve_memory(w, t, mem, "pools", &pool)) return -1;
        pools[i].memory = pool->mem;
      }
    } else {
      pools[i].is_token = 1;
      pools[i].memory.fd = -1;
      if (resolve && mdc__resolve_handle(w, t, tok, "pools", &pools[i].token)) return -1;
      if (!resolve && !json_is_string(tok) && !json_is_object(tok))
        return mdc__terr(w, "pools[%zu]: 'token' takes a name or a literal", i);
    }
  }
  out->pools = pools;
  out->n_pools = (uint32_t)n;
  return 0;
}
