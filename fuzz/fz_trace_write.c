/* fz_trace_write.c - a fuzz program written as a trace (format 1.1): memories, models and
 * requests as the replayer's own events before the call that uses them, each call with its
 * arguments and, per mode, the statuses the driver returned or the ones SPEC allows. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fz_trace.h"

static const char *const status_names[] = {"NONE", "DEVICE_UNAVAILABLE", "GENERAL_FAILURE",
                                           "OUTPUT_INSUFFICIENT_SIZE", "INVALID_ARGUMENT",
                                           "MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT",
                                           "RESOURCE_EXHAUSTED_TRANSIENT", "RESOURCE_EXHAUSTED_PERSISTENT"};

static json_t *status_json(md_status s) {
  if ((unsigned)s <= 8) return json_string(status_names[s]);
  if (s == MD_DEAD_OBJECT) return json_string("DEAD_OBJECT");
  return json_integer((json_int_t)s);
}

static json_t *set_json(fz_set set) {
  unsigned n = 0;
  for (unsigned i = 0; i < 10; i++) n += (set >> i) & 1u;
  if (n == 1)
    for (unsigned i = 0; i < 10; i++)
      if (set & (1u << i)) return status_json(i == 9 ? MD_DEAD_OBJECT : (md_status)i);
  json_t *a = json_array();
  for (unsigned i = 0; i < 9; i++)
    if (set & (1u << i)) json_array_append_new(a, status_json((md_status)i));
  if (set & (1u << 9)) json_array_append_new(a, status_json(MD_DEAD_OBJECT));
  return a;
}

static json_t *hex64(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return json_string(b);
}

static json_t *u64_json(uint64_t v) { return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : hex64(v); }

static json_t *float_json(float f) {
  if (isnan(f)) return json_string("nan");
  if (isinf(f)) return json_string(f > 0 ? "inf" : "-inf");
  return json_real((double)f);
}

static json_t *dims_json(const fz_dims *d) {
  json_t *a = json_array();
  for (unsigned i = 0; i < d->rank; i++) json_array_append_new(a, json_integer(d->d[i]));
  return a;
}

static const char *enum_name(int32_t v, const char *const *names, size_t n) {
  return v >= 0 && (size_t)v < n ? names[v] : NULL;
}

static json_t *enum_json(int32_t v, const char *const *names, size_t n) {
  const char *s = enum_name(v, names, n);
  return s ? json_string(s) : json_integer(v);
}

static const char *const type_names[15] = {"FLOAT32", "INT32", "UINT32", "TENSOR_FLOAT32", "TENSOR_INT32",
                                           "TENSOR_QUANT8_ASYMM", "BOOL", NULL, "TENSOR_FLOAT16", NULL,
                                           NULL, NULL, NULL, NULL, "TENSOR_QUANT8_ASYMM_SIGNED"};
static const char *const lifetime_names[6] = {"TEMPORARY_VARIABLE", "SUBGRAPH_INPUT", "SUBGRAPH_OUTPUT",
                                              "CONSTANT_COPY", "CONSTANT_REFERENCE", "NO_VALUE"};
static const char *const op_names[37] = {[0] = "ADD", [2] = "CONCATENATION", [9] = "FULLY_CONNECTED",
                                         [18] = "MUL", [19] = "RELU", [22] = "RESHAPE", [25] = "SOFTMAX",
                                         [36] = "SUB"};
static const char *const mem_kinds[4] = {"ashmem", "mmap_fd", "blob", "hardware_buffer"};

typedef struct wr {
  FILE *f;
  const mdc_fz_prog *p;
  const fz_outcome *outs;
  const fz_trace_opts *o;
  int err;
  int v11;                      /* a 1.1 construct was written (when, id, tally, forge add) */
  uint8_t model_done[FZ_MAX_MODELS];
  uint8_t tally[FZ_MAX_OBJS];   /* objects whose kills in the running block are tallied */
} wr;

static void emit(wr *w, json_t *j) {
  static const char *const v11_keys[] = {"when", "id", "tally"};
  for (size_t i = 0; i < sizeof v11_keys / sizeof v11_keys[0]; i++) w->v11 |= json_object_get(j, v11_keys[i]) != NULL;
  const char *op = json_string_value(json_object_get(j, "op"));
  if (op && (!strcmp(op, "expect_tally") || !strcmp(op, "expect_unpredictable"))) w->v11 = 1;
  char *s = json_dumps(j, JSON_REAL_PRECISION(9));
  json_decref(j);
  if (!s || fprintf(w->f, "%s\n", s) < 0) w->err = 1;
  free(s);
}

static void obj_name(const mdc_fz_prog *p, uint16_t obj, char *b, size_t n) {
  char letter = 'x';
  switch (obj < p->n_objs ? p->objs[obj].kind : MDC_OBJ_NONE) {
    case MDC_OBJ_CLIENT: letter = 'c'; break;
    case MDC_OBJ_PREPARED: letter = 'p'; break;
    case MDC_OBJ_TOKEN: letter = 't'; break;
    case MDC_OBJ_EVENT: letter = 'e'; break;
    default: break;
  }
  snprintf(b, n, "%c%u", letter, (unsigned)obj);
}

/* Whether object obj has a value in this run (its call was made and succeeded); always in a
 * static trace. */
static int made(const wr *w, uint16_t obj) {
  if (w->o->mode == FZ_TRACE_STATIC) return 1;
  if (obj >= w->p->n_objs) return 0;
  const fz_outcome *oc = &w->outs[w->p->objs[obj].call];
  return oc->ran == 1 && oc->got == MD_NONE;
}

/* Whether another driver might not make it (its call may fail by SPEC): uses then need `when`. */
static int uncertain(const wr *w, uint16_t obj) {
  if (w->o->mode != FZ_TRACE_ORACLE || obj >= w->p->n_objs) return 0;
  const fz_outcome *oc = &w->outs[w->p->objs[obj].call];
  return oc->pred.set != FZ_BIT(MD_NONE);
}

static json_t *ref_json(wr *w, const fz_ref *r, uint16_t *when) {
  if (r->how == FZ_REF_ZERO || (r->how == FZ_REF_LITERAL && !r->v)) return json_pack("{s:i}", "literal", 0);
  if (r->how == FZ_REF_LITERAL) return json_pack("{s:o}", "literal", hex64(r->v));
  if (!made(w, r->obj)) {
    /* the harness passed 0 (with the forgery applied) */
    uint64_t v = r->forge == FZ_FORGE_XOR ? r->v : r->forge == FZ_FORGE_ADD ? r->v : 0;
    return v ? json_pack("{s:o}", "literal", hex64(v)) : json_pack("{s:i}", "literal", 0);
  }
  if (uncertain(w, r->obj) && *when == FZ_NOBODY) *when = r->obj;
  char name[16];
  obj_name(w->p, r->obj, name, sizeof name);
  if (r->forge == FZ_FORGE_XOR) return json_pack("{s:s,s:o}", "forge", name, "xor", hex64(r->v));
  if (r->forge == FZ_FORGE_ADD) {
    w->v11 = 1;
    return json_pack("{s:s,s:I}", "forge", name, "add", (json_int_t)(int64_t)r->v);
  }
  return json_string(name);
}

static uint64_t data_count(const fz_mem *m) {
  uint64_t n = m->kind == MD_MEM_HARDWARE_BUFFER ? m->size : m->size;
  if (m->kind == MD_MEM_MMAP_FD && m->file_size && m->offset + n > m->file_size)
    n = m->file_size > m->offset ? m->file_size - m->offset : 0;
  return n;
}

static void emit_mem(wr *w, const fz_mem *m, const char *name) {
  json_t *j;
  if (m->fd == FZ_FD_REAL) {
    j = json_pack("{s:s,s:s,s:s,s:I}", "op", "memory", "as", name, "kind", mem_kinds[m->kind], "size",
                  (json_int_t)m->size);
    if (m->kind == MD_MEM_MMAP_FD && m->offset) json_object_set_new(j, "offset", json_integer((json_int_t)m->offset));
    if (m->kind == MD_MEM_MMAP_FD && m->file_size)
      json_object_set_new(j, "file_size", json_integer((json_int_t)m->file_size));
    if (m->prot != (PROT_READ | PROT_WRITE)) json_object_set_new(j, "prot", json_integer(m->prot));
    uint64_t n = data_count(m);
    if (m->seed && n)
      json_object_set_new(j, "data", json_pack("{s:{s:I,s:s,s:I}}", "random", "seed", (json_int_t)m->seed, "type",
                                               "u8", "count", (json_int_t)n));
  } else {
    j = json_pack("{s:s,s:s,s:I}", "op", "bad_memory", "as", name, "kind", (json_int_t)m->kind);
    if (m->fd == FZ_FD_NEG) json_object_set_new(j, "fd", json_integer(-1));
    else json_object_set_new(j, "fd", json_string(m->fd == FZ_FD_CLOSED ? "closed" : "pipe"));
    json_object_set_new(j, "offset", json_integer((json_int_t)m->offset));
    json_object_set_new(j, "size", json_integer((json_int_t)m->size));
    json_object_set_new(j, "prot", json_integer(m->prot));
  }
  emit(w, j);
}

static void emit_model(wr *w, unsigned mi) {
  if (w->model_done[mi]) return;
  w->model_done[mi] = 1;
  const fz_model *m = &w->p->models[mi];
  char name[16];
  snprintf(name, sizeof name, "mo%u", mi);
  json_t *ops = json_array(), *opnds = json_array(), *ins = json_array(), *outs = json_array();
  for (unsigned i = 0; i < m->n_operands; i++) {
    const fz_operand *o = &m->opnd[i];
    json_t *x = json_pack("{s:o}", "type", enum_json(o->type, type_names, 15));
    if (o->dims.rank) json_object_set_new(x, "dims", dims_json(&o->dims));
    json_object_set_new(x, "lifetime", enum_json(o->lifetime, lifetime_names, 6));
    if (o->scale != 0.0f) json_object_set_new(x, "scale", float_json(o->scale));
    if (o->zero_point) json_object_set_new(x, "zero_point", json_integer(o->zero_point));
    if (o->offset) json_object_set_new(x, "offset", json_integer(o->offset));
    if (o->length) json_object_set_new(x, "length", json_integer(o->length));
    json_array_append_new(opnds, x);
  }
  for (unsigned k = 0; k < m->n_ops; k++) {
    const fz_operation *op = &m->op[k];
    json_t *a = json_array(), *b = json_array();
    for (unsigned j = 0; j < op->n_in; j++) json_array_append_new(a, json_integer(op->in[j]));
    for (unsigned j = 0; j < op->n_out; j++) json_array_append_new(b, json_integer(op->out[j]));
    json_array_append_new(ops, json_pack("{s:o,s:o,s:o}", "type", enum_json(op->type, op_names, 37), "inputs", a,
                                         "outputs", b));
  }
  for (unsigned j = 0; j < m->n_in; j++) json_array_append_new(ins, json_integer(m->in[j]));
  for (unsigned j = 0; j < m->n_out; j++) json_array_append_new(outs, json_integer(m->out[j]));
  json_t *j = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o}", "op", "model", "as", name, "operands", opnds, "operations", ops,
                        "inputs", ins, "outputs", outs);
  if (m->n_values) {
    char hex[2 * FZ_MAX_VALUES + 1];
    for (unsigned i = 0; i < m->n_values; i++) snprintf(hex + 2 * i, 3, "%02x", m->values[i]);
    json_object_set_new(j, "operand_values", json_pack("{s:s}", "hex", hex));
  }
  emit(w, j);
}

/* Everything call i needs defined first: its model, its memories, its request. */
static void emit_defs(wr *w, unsigned i) {
  const fz_call *k = &w->p->calls[i];
  const mdc_call_desc *cd = &mdc_calls[k->call];
  for (unsigned a = 0; a < cd->n_args; a++) {
    const fz_arg *x = &k->a[a];
    if (!x->present) continue;
    char name[24];
    switch (mdc_args[cd->args[a].id].type) {
      case MDC_T_MODEL: emit_model(w, x->model); break;
      case MDC_T_MEMORY:
        snprintf(name, sizeof name, "m%u", i);
        emit_mem(w, &x->mem, name);
        break;
      case MDC_T_REQUEST: {
        const fz_request *r = &w->p->requests[x->request];
        json_t *pools = json_array(), *ins = json_array(), *outs = json_array();
        uint16_t when = FZ_NOBODY;
        for (unsigned j = 0; j < r->n_pools; j++) {
          if (r->pools[j].is_token) {
            json_array_append_new(pools, json_pack("{s:o}", "token", ref_json(w, &r->pools[j].token, &when)));
          } else {
            snprintf(name, sizeof name, "m%u_%u", i, j);
            emit_mem(w, &r->pools[j].mem, name);
            json_array_append_new(pools, json_pack("{s:s}", "memory", name));
          }
        }
        for (unsigned q = 0; q < (unsigned)(r->n_in + r->n_out); q++) {
          const fz_rarg *ra = q < r->n_in ? &r->in[q] : &r->out[q - r->n_in];
          json_t *aj = json_pack("{s:i}", "pool", ra->pool);
          if (ra->offset) json_object_set_new(aj, "offset", json_integer(ra->offset));
          if (ra->length) json_object_set_new(aj, "length", json_integer(ra->length));
          if (ra->dims.rank) json_object_set_new(aj, "dims", dims_json(&ra->dims));
          if (ra->no_value) json_object_set_new(aj, "no_value", json_true());
          json_array_append_new(q < r->n_in ? ins : outs, aj);
        }
        snprintf(name, sizeof name, "r%u", i);
        emit(w, json_pack("{s:s,s:s,s:o,s:o,s:o}", "op", "request", "as", name, "inputs", ins, "outputs", outs,
                          "pools", pools));
        break;
      }
      default: break;
    }
  }
}

static json_t *shapes_json(const fz_exec *ex) {
  json_t *a = json_array();
  for (unsigned i = 0; i < ex->n_out; i++) {
    json_t *s = json_pack("{s:o}", "dims", dims_json(&ex->out[i]));
    if (!ex->sufficient[i]) json_object_set_new(s, "sufficient", json_false());
    json_array_append_new(a, s);
  }
  return a;
}

static json_t *observed_shapes(const fz_outcome *oc) {
  json_t *a = json_array();
  for (unsigned i = 0; i < oc->n_shapes; i++) {
    const md_output_shape *s = &oc->shapes[i];
    json_t *d = json_array();
    for (unsigned j = 0; j < s->rank && j < MD_MAX_RANK; j++) json_array_append_new(d, json_integer(s->dims[j]));
    json_t *x = json_pack("{s:o}", "dims", d);
    if (!s->is_sufficient) json_object_set_new(x, "sufficient", json_false());
    json_array_append_new(a, x);
  }
  return a;
}

static json_t *expect_json(wr *w, unsigned i) {
  const fz_call *k = &w->p->calls[i];
  const fz_outcome *oc = &w->outs[i];
  json_t *e = json_object();
  int n_shapes_given = mdc_fz_arg(k, MDC_A_N_SHAPES) != NULL;
  if (w->o->mode == FZ_TRACE_OBSERVED && oc->ran == 1) {
    json_object_set_new(e, "status", status_json(oc->got));
    if ((k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_WAIT_EVENT) && !n_shapes_given &&
        (oc->got == MD_NONE || oc->got == MD_OUTPUT_INSUFFICIENT_SIZE))
      json_object_set_new(e, "shapes", observed_shapes(oc));
    if (k->call == MDC_CALL_CLOSE_CLIENT && oc->got == MD_NONE)
      json_object_set_new(e, "leaks", json_pack("{s:i,s:i,s:i,s:I}", "buffers", oc->leaks.buffers, "prepared_models",
                                                oc->leaks.prepared_models, "events", oc->leaks.events, "bytes",
                                                (json_int_t)oc->leaks.bytes));
    return e;
  }
  const fz_pred *pr = &oc->pred;
  json_object_set_new(e, "status", set_json(pr->set));
  int only_none = pr->set == FZ_BIT(MD_NONE), only_short = pr->set == FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE);
  if ((k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_WAIT_EVENT) && !n_shapes_given && pr->ex.shapes_known &&
      (only_none || only_short))
    json_object_set_new(e, "shapes", shapes_json(&pr->ex));
  if (k->call == MDC_CALL_CLOSE_CLIENT && only_none && pr->leaks_known) {
    json_t *l = json_object();
    if (pr->leaks_known & 1) json_object_set_new(l, "buffers", json_integer(pr->leaks.buffers));
    if (pr->leaks_known & 2) json_object_set_new(l, "prepared_models", json_integer(pr->leaks.prepared_models));
    if (pr->leaks_known & 4) json_object_set_new(l, "events", json_integer(pr->leaks.events));
    if (pr->leaks_known & 8) json_object_set_new(l, "bytes", json_integer((json_int_t)pr->leaks.bytes));
    json_object_set_new(e, "leaks", l);
  }
  if (k->call == MDC_CALL_GET_SUPPORTED_OPERATIONS && only_none && pr->supported_known) {
    json_t *a = json_array();
    for (unsigned j = 0; j < pr->n_supported; j++) json_array_append_new(a, json_integer(1));
    json_object_set_new(e, "supported", a);
  }
  return e;
}

static void emit_call(wr *w, unsigned i) {
  const mdc_fz_prog *p = w->p;
  const fz_call *k = &p->calls[i];
  const mdc_call_desc *cd = &mdc_calls[k->call];
  json_t *j = json_pack("{s:s}", "op", cd->name);
  if (k->block && w->o->target == FZ_CONCURRENCY) json_object_set_new(j, "lane", json_integer(k->lane));
  uint16_t when = FZ_NOBODY;
  char name[24];
  for (unsigned a = 0; a < cd->n_args; a++) {
    const fz_arg *x = &k->a[a];
    if (!x->present) continue;
    const char *key = mdc_args[cd->args[a].id].key;
    switch (mdc_args[cd->args[a].id].type) {
      case MDC_T_DEVICE:
      case MDC_T_TEXT: break;
      case MDC_T_HANDLE: json_object_set_new(j, key, ref_json(w, &x->ref, &when)); break;
      case MDC_T_HANDLES: {
        json_t *arr = json_array();
        for (unsigned r = 0; r < x->refs.n; r++) json_array_append_new(arr, ref_json(w, &x->refs.v[r], &when));
        json_object_set_new(j, key, arr);
        break;
      }
      case MDC_T_ROLES: {
        json_t *arr = json_array();
        for (unsigned r = 0; r < x->roles.n; r++)
          json_array_append_new(arr, json_pack("{s:i,s:i,s:o}", "model", x->roles.r[r].model, "io", x->roles.r[r].io,
                                               "p", float_json(x->roles.r[r].p)));
        json_object_set_new(j, key, arr);
        break;
      }
      case MDC_T_MODEL:
        snprintf(name, sizeof name, "mo%u", x->model);
        json_object_set_new(j, key, json_string(name));
        break;
      case MDC_T_DESC: json_object_set_new(j, key, json_pack("{s:o}", "dims", dims_json(&x->dims))); break;
      case MDC_T_DIMS: json_object_set_new(j, key, dims_json(&x->dims)); break;
      case MDC_T_MEMORY:
        snprintf(name, sizeof name, "m%u", i);
        json_object_set_new(j, key, json_string(name));
        break;
      case MDC_T_REQUEST: {
        const fz_request *r = &p->requests[x->request];
        for (unsigned q = 0; q < r->n_pools; q++)
          if (r->pools[q].is_token) json_decref(ref_json(w, &r->pools[q].token, &when));
        snprintf(name, sizeof name, "r%u", i);
        json_object_set_new(j, key, json_string(name));
        break;
      }
      case MDC_T_U64:
        /* n_shapes: what the harness passed (it clamps to FZ_MAX_ARGS; the format's limit is 4096) */
        json_object_set_new(j, key, u64_json(cd->args[a].id == MDC_A_N_SHAPES && x->u64 > FZ_MAX_ARGS ? FZ_MAX_ARGS : x->u64));
        break;
    }
  }
  if (cd->produces != MDC_OBJ_NONE && (w->o->mode == FZ_TRACE_STATIC || made(w, k->obj))) {
    obj_name(p, k->obj, name, sizeof name);
    json_object_set_new(j, "as", json_string(name));
  }
  const fz_outcome *oc = w->outs ? &w->outs[i] : NULL;
  int check = w->o->mode == FZ_TRACE_ORACLE && oc && k->call == MDC_CALL_COPY_TO && oc->pred.check &&
              (oc->pred.set & FZ_BIT(MD_NONE));
  int vcheck = w->o->mode == FZ_TRACE_ORACLE && oc && oc->vc.n && (oc->pred.set & FZ_BIT(MD_NONE));
  if ((check || vcheck) && oc->pred.set != FZ_BIT(MD_NONE)) {
    snprintf(name, sizeof name, "k%u", i);
    json_object_set_new(j, "id", json_string(name));
  }
  if (when != FZ_NOBODY) {
    obj_name(p, when, name, sizeof name);
    json_object_set_new(j, "when", json_pack("{s:s}", "produced", name));
  }
  if (k->block && w->o->target == FZ_CONCURRENCY) {
    const fz_arg *h = mdc_fz_arg(k, k->call == MDC_CALL_FREE_BUFFER ? MDC_A_TOKEN
                                    : k->call == MDC_CALL_RELEASE_PREPARED_MODEL ? MDC_A_PREPARED
                                    : k->call == MDC_CALL_CLOSE_CLIENT ? MDC_A_CLIENT : MDC_A_COUNT);
    if (h && h->ref.how == FZ_REF_OBJ && !h->ref.forge && h->ref.obj < FZ_MAX_OBJS && w->tally[h->ref.obj]) {
      snprintf(name, sizeof name, "kill_%u", h->ref.obj);
      json_object_set_new(j, "tally", json_string(name));
    }
  }
  if (oc && w->o->mode != FZ_TRACE_STATIC) json_object_set_new(j, "expect", expect_json(w, i));
  emit(w, j);
  if (check) {
    const fz_pred *pr = &oc->pred;
    json_t *v = pr->check_seed
                    ? json_pack("{s:{s:I,s:s,s:I}}", "random", "seed", (json_int_t)pr->check_seed, "type", "u8",
                                "count", (json_int_t)pr->check_bytes)
                    : json_pack("{s:i,s:I}", "fill", 0, "bytes", (json_int_t)pr->check_bytes);
    snprintf(name, sizeof name, "m%u", i);
    json_t *c = json_pack("{s:s}", "op", "check");
    if (k->block && w->o->target == FZ_CONCURRENCY) json_object_set_new(c, "lane", json_integer(k->lane));
    json_object_set_new(c, "memory", json_string(name));
    json_object_set_new(c, "offset", json_integer(0));
    json_object_set_new(c, "type", json_string("u8"));
    json_object_set_new(c, "values", v);
    if (pr->set != FZ_BIT(MD_NONE)) {
      char id[24];
      snprintf(id, sizeof id, "k%u", i);
      json_object_set_new(c, "when", json_pack("{s:s,s:[s]}", "status", id, "in", "NONE"));
    }
    emit(w, c);
  }
  for (unsigned c = 0; vcheck && c < oc->vc.n; c++) {
    /* the value oracle's (fz_eval.h): the output pool after NONE; a value JSON cannot hold
     * (NaN: any value is right; infinities) leaves that output out */
    const float *v = oc->vc.v + oc->vc.o[c].at;
    unsigned n = oc->vc.o[c].count, finite = 1;
    for (unsigned x = 0; x < n; x++) finite &= isfinite(v[x]) != 0;
    if (!finite) continue;
    json_t *vals = json_array();
    for (unsigned x = 0; x < n; x++) json_array_append_new(vals, float_json(v[x]));
    snprintf(name, sizeof name, "m%u_%u", oc->vc.issue, oc->vc.o[c].pool);
    json_t *cj = json_pack("{s:s,s:s,s:i,s:s,s:{s:o}}", "op", "check", "memory", name, "offset",
                           (json_int_t)oc->vc.o[c].off, "type", "f32", "values", "f32", vals);
    if (k->block && w->o->target == FZ_CONCURRENCY) json_object_set_new(cj, "lane", json_integer(k->lane));
    if (oc->pred.set != FZ_BIT(MD_NONE)) {
      char id[24];
      snprintf(id, sizeof id, "k%u", i);
      json_object_set_new(cj, "when", json_pack("{s:s,s:[s]}", "status", id, "in", "NONE"));
    }
    emit(w, cj);
  }
}

/* Objects that two or more calls of the block may release: their successes are tallied. */
static void block_tallies(wr *w, const fz_block *b) {
  uint8_t n[FZ_MAX_OBJS] = {0};
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &w->p->calls[i];
    mdc_arg_id id = k->call == MDC_CALL_FREE_BUFFER ? MDC_A_TOKEN : k->call == MDC_CALL_RELEASE_PREPARED_MODEL
                                                                      ? MDC_A_PREPARED
                                                                  : k->call == MDC_CALL_CLOSE_CLIENT ? MDC_A_CLIENT
                                                                                                     : MDC_A_COUNT;
    const fz_arg *h = id == MDC_A_COUNT ? NULL : mdc_fz_arg(k, id);
    if (h && h->ref.how == FZ_REF_OBJ && !h->ref.forge && h->ref.obj < FZ_MAX_OBJS && made(w, h->ref.obj)) n[h->ref.obj]++;
  }
  for (unsigned o = 0; o < FZ_MAX_OBJS; o++) w->tally[o] = n[o] >= 2;
}

int mdc_fz_trace_write(FILE *f, const mdc_fz_prog *p, const fz_outcome *outs, const fz_trace_opts *o) {
  /* The events first, into memory: the header says 1.0 unless a 1.1 construct was needed. */
  char *body = NULL;
  size_t body_len = 0;
  FILE *mem = open_memstream(&body, &body_len);
  if (!mem) return -1;
  wr w = {.f = mem, .p = p, .outs = outs, .o = o};
  if (o->mode != FZ_TRACE_STATIC && !outs) {
    fclose(mem);
    free(body);
    return -1;
  }
  unsigned upto = o->upto && o->upto < p->n_calls ? o->upto : p->n_calls;
  int allocates = 0;
  for (unsigned i = 0; i < upto; i++) allocates |= p->calls[i].call == MDC_CALL_ALLOCATE;
  char desc[256];
  snprintf(desc, sizeof desc, "fuzz program (target %s), %u calls", mdc_fz_target_name(o->target), upto);
  char config[128], stall[32] = "";
  if (p->stall) snprintf(stall, sizeof stall, ";faults=stall@%u", p->stall);
  if (o->mem_limit) snprintf(config, sizeof config, "seed=%u;mem_limit=%" PRIu64 "%s", p->seed, o->mem_limit, stall);
  else snprintf(config, sizeof config, "seed=%u%s", p->seed, stall);
  emit(&w, json_pack("{s:s,s:s,s:s}", "op", "open_device", "as", "dev", "config", config));
  for (unsigned i = 0; i < upto;) {
    const fz_call *k = &p->calls[i];
    if (k->block && o->target == FZ_CONCURRENCY) {
      const fz_block *b = &p->blocks[k->block - 1];
      unsigned end = b->end < upto ? b->end : upto;
      for (unsigned q = i; q < end; q++) emit_defs(&w, q);
      block_tallies(&w, b);
      emit(&w, json_pack("{s:s,s:i,s:i}", "op", "concurrent", "lanes", b->lanes, "repeat", 1));
      for (unsigned q = i; q < end; q++)
        if (o->mode == FZ_TRACE_STATIC || outs[q].ran) emit_call(&w, q);
      emit(&w, json_pack("{s:s}", "op", "end_concurrent"));
      for (unsigned ob = 0; ob < FZ_MAX_OBJS; ob++) {
        if (!w.tally[ob]) continue;
        char t[24];
        snprintf(t, sizeof t, "kill_%u", ob);
        emit(&w, json_pack("{s:s,s:s,s:{s:i}}", "op", "expect_tally", "tally", t, "at_most", "NONE", 1));
      }
      memset(w.tally, 0, sizeof w.tally);
      i = end;
      continue;
    }
    emit_defs(&w, i);
    if (o->mode == FZ_TRACE_STATIC || outs[i].ran) emit_call(&w, i);
    i++;
  }
  if (fclose(mem) != 0) w.err = 1;
  json_t *req = json_array();
  if (allocates) json_array_append_new(req, json_string("memory_domains"));
  if (p->stall) json_array_append_new(req, json_string("sim"));   /* a fault plan */
  json_t *h = json_pack("{s:s,s:s,s:s,s:[s],s:o,s:b,s:[s,s]}", "mdc_trace", w.v11 ? "1.1" : "1.0", "name", o->name,
                        "description", o->description ? o->description : desc, "rules",
                        o->rule ? o->rule : "SPEC 1-8: the fuzz oracle's state model", "requires", req, "must_pass", 1,
                        "tags", "fuzz", mdc_fz_target_name(o->target));
  w.f = f;
  emit(&w, h);
  if (body && fwrite(body, 1, body_len, f) != body_len) w.err = 1;
  free(body);
  return w.err || fflush(f) ? -1 : 0;
}
