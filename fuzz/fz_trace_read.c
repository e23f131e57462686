/* fz_trace_read.c - a trace (docs/trace-format.md) read back into a fuzz program, for the
 * seed corpora and the round-trip tests. Only what changes what the driver is asked is read:
 * expectations, checks and tallies are the oracle's business and are skipped. What the
 * program cannot say (a fault plan, a second device, a fill, a model pool, a custom operation,
 * a pool over FZ_MAX_POOL_BYTES, more calls or objects than the limits) makes the trace
 * "beyond the encoding", with the reason. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fz_trace.h"

enum { N_OBJ = 1, N_MEM, N_MODEL, N_REQUEST };

typedef struct name {
  char *s;
  uint8_t kind;
  uint16_t idx;          /* object, memory slot, model index (+1, 0: not used yet) */
  json_t *def;           /* model / request definitions */
} name;

#define MAX_NAMES 512
#define MAX_MEMS 256

typedef struct rd {
  mdc_fz_target t;
  mdc_fz_prog *p;
  name names[MAX_NAMES];
  unsigned n_names;
  fz_mem mems[MAX_MEMS];
  unsigned n_mems;
  uint8_t client_open[FZ_MAX_OBJS];
  int devices;
  int in_block;
  uint16_t block_objs;   /* objects made before the running block */
  char *err;
  size_t errlen;
  unsigned line;
} rd;

static int fail(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(rd *r, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "line %u: %s", r->line, msg);
  return -1;
}

static name *find(rd *r, const char *s) {
  for (unsigned i = 0; i < r->n_names; i++)
    if (strcmp(r->names[i].s, s) == 0) return &r->names[i];
  return NULL;
}

static name *add(rd *r, const char *s, uint8_t kind, uint16_t idx) {
  name *n = find(r, s);
  if (!n) {
    if (r->n_names == MAX_NAMES) return NULL;
    n = &r->names[r->n_names++];
    n->s = strdup(s);
  } else {
    json_decref(n->def);
  }
  n->kind = kind;
  n->idx = idx;
  n->def = NULL;
  return n;
}

static int get_u64(json_t *v, uint64_t *out) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (!errno && *s && !*end) {
      *out = x;
      return 0;
    }
  }
  return -1;
}

static int get_float(json_t *v, float *out) {
  if (json_is_number(v)) {
    *out = (float)json_number_value(v);
    return 0;
  }
  const char *s = json_is_string(v) ? json_string_value(v) : "";
  if (!strcmp(s, "nan")) *out = NAN;
  else if (!strcmp(s, "inf")) *out = INFINITY;
  else if (!strcmp(s, "-inf")) *out = -INFINITY;
  else return -1;
  return 0;
}

static int dims_of(rd *r, json_t *v, fz_dims *d) {
  memset(d, 0, sizeof *d);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v) || json_array_size(v) > FZ_MAX_RANK) return fail(r, "dims beyond rank %d", FZ_MAX_RANK);
  d->rank = (uint8_t)json_array_size(v);
  for (unsigned i = 0; i < d->rank; i++) {
    json_t *x = json_array_get(v, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > UINT32_MAX)
      return fail(r, "a dim that is not a 32-bit unsigned number");
    d->d[i] = (uint32_t)json_integer_value(x);
  }
  d->present = d->rank > 0;
  return 0;
}

static int enum_of(rd *r, json_t *v, const char *const *names, size_t n, int32_t *out) {
  if (json_is_integer(v)) {
    *out = (int32_t)json_integer_value(v);
    return 0;
  }
  const char *s = json_is_string(v) ? json_string_value(v) : "";
  for (size_t i = 0; i < n; i++)
    if (names[i] && !strcmp(names[i], s)) {
      *out = (int32_t)i;
      return 0;
    }
  return fail(r, "unknown enum value '%s'", s);
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

/* FNV-1a of a payload's JSON text: its bytes become the random bytes of this seed. */
static uint32_t seed_of(json_t *data) {
  char *s = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = s ? s : ""; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  free(s);
  uint32_t v = (uint32_t)(h ^ (h >> 32));
  return v ? v : 1;
}

static int read_memory(rd *r, json_t *ev, int bad) {
  const char *as = json_string_value(json_object_get(ev, "as"));
  if (!as) return fail(r, "memory without 'as'");
  if (r->n_mems == MAX_MEMS) return fail(r, "more than %d memories", MAX_MEMS);
  fz_mem *m = &r->mems[r->n_mems];
  memset(m, 0, sizeof *m);
  uint64_t v;
  if (!bad) {
    int32_t kind = 0;
    if (enum_of(r, json_object_get(ev, "kind"), mem_kinds, 4, &kind)) return -1;
    m->fd = FZ_FD_REAL;
    m->kind = kind;
    if (get_u64(json_object_get(ev, "size"), &m->size) || m->size == 0 || m->size > FZ_MAX_POOL_BYTES)
      return fail(r, "a pool of more than %u bytes", FZ_MAX_POOL_BYTES);
    if (json_object_get(ev, "offset") && !get_u64(json_object_get(ev, "offset"), &v)) m->offset = v;
    if (json_object_get(ev, "file_size") && !get_u64(json_object_get(ev, "file_size"), &v)) m->file_size = v;
    if (kind != MD_MEM_MMAP_FD && (m->offset || m->file_size)) return fail(r, "an offset on a memory that is not mmap_fd");
    if (m->offset > FZ_MAX_POOL_BYTES || m->file_size > 2 * FZ_MAX_POOL_BYTES) return fail(r, "a file over the limits");
    if (m->file_size == m->offset + m->size) m->file_size = 0;
    m->prot = PROT_READ | PROT_WRITE;
    json_t *pv = json_object_get(ev, "prot");
    if (json_is_integer(pv)) m->prot = (uint32_t)json_integer_value(pv);
    else if (json_is_string(pv)) m->prot = !strcmp(json_string_value(pv), "r") ? PROT_READ
                                        : !strcmp(json_string_value(pv), "w") ? PROT_WRITE : PROT_READ | PROT_WRITE;
    json_t *data = json_object_get(ev, "data"), *rnd = json_object_get(data, "random");
    uint64_t seed;
    if (rnd && json_object_size(rnd) == 3 && json_is_string(json_object_get(rnd, "type")) &&
        !strcmp(json_string_value(json_object_get(rnd, "type")), "u8") && !get_u64(json_object_get(rnd, "seed"), &seed) &&
        seed && seed <= UINT32_MAX)
      m->seed = (uint32_t)seed;   /* the program's own form: its seed as it is */
    else if (data)
      m->seed = seed_of(data);
  } else {
    json_t *kv = json_object_get(ev, "kind"), *fd = json_object_get(ev, "fd");
    int32_t kind = 0;
    if (kv && enum_of(r, kv, mem_kinds, 4, &kind)) return -1;
    m->kind = kind;
    m->fd = FZ_FD_NEG;
    if (json_is_string(fd)) m->fd = !strcmp(json_string_value(fd), "pipe") ? FZ_FD_PIPE : FZ_FD_CLOSED;
    else if (fd && (!json_is_integer(fd) || json_integer_value(fd) >= 0)) return fail(r, "bad_memory fd");
    if (json_object_get(ev, "offset") && !get_u64(json_object_get(ev, "offset"), &v)) m->offset = v;
    if (json_object_get(ev, "size") && !get_u64(json_object_get(ev, "size"), &v)) m->size = v;
    m->prot = PROT_READ | PROT_WRITE;
    json_t *pv = json_object_get(ev, "prot");
    if (json_is_integer(pv)) m->prot = (uint32_t)json_integer_value(pv);
    else if (json_is_string(pv)) m->prot = !strcmp(json_string_value(pv), "r") ? PROT_READ
                                        : !strcmp(json_string_value(pv), "w") ? PROT_WRITE : PROT_READ | PROT_WRITE;
    if (m->size > UINT32_MAX || m->offset > UINT32_MAX) return fail(r, "a bad_memory field over 32 bits");
  }
  if (!add(r, as, N_MEM, (uint16_t)r->n_mems)) return fail(r, "too many names");
  r->n_mems++;
  return 0;
}

static int model_of(rd *r, json_t *j, fz_model *m) {
  memset(m, 0, sizeof *m);
  json_t *ops = json_object_get(j, "operations"), *opnds = json_object_get(j, "operands");
  json_t *ins = json_object_get(j, "inputs"), *outs = json_object_get(j, "outputs");
  json_t *pools = json_object_get(j, "pools"), *vals = json_object_get(j, "operand_values");
  if (pools && json_array_size(pools)) return fail(r, "a model with constant pools");
  if (json_array_size(opnds) > FZ_MAX_OPERANDS || json_array_size(ops) > FZ_MAX_OPS ||
      json_array_size(ins) > FZ_MAX_IO || json_array_size(outs) > FZ_MAX_IO)
    return fail(r, "a model over the limits (%d operands, %d operations, %d inputs/outputs)", FZ_MAX_OPERANDS,
                FZ_MAX_OPS, FZ_MAX_IO);
  m->n_operands = (uint8_t)json_array_size(opnds);
  for (unsigned i = 0; i < m->n_operands; i++) {
    json_t *o = json_array_get(opnds, i);
    fz_operand *x = &m->opnd[i];
    if (enum_of(r, json_object_get(o, "type"), type_names, 15, &x->type) ||
        enum_of(r, json_object_get(o, "lifetime"), lifetime_names, 6, &x->lifetime) ||
        dims_of(r, json_object_get(o, "dims"), &x->dims))
      return -1;
    uint64_t v;
    if (json_object_get(o, "scale") && get_float(json_object_get(o, "scale"), &x->scale)) return fail(r, "scale");
    if (json_is_integer(json_object_get(o, "zero_point"))) x->zero_point = (int32_t)json_integer_value(json_object_get(o, "zero_point"));
    if (!get_u64(json_object_get(o, "offset"), &v)) x->offset = (uint32_t)v;
    if (!get_u64(json_object_get(o, "length"), &v)) x->length = (uint32_t)v;
    if (json_object_get(o, "pool")) return fail(r, "an operand in a model pool");
  }
  m->n_ops = (uint8_t)json_array_size(ops);
  for (unsigned k = 0; k < m->n_ops; k++) {
    json_t *o = json_array_get(ops, k);
    fz_operation *x = &m->op[k];
    if (json_object_get(o, "attrs") || json_object_get(o, "name")) return fail(r, "a custom operation");
    if (enum_of(r, json_object_get(o, "type"), op_names, 37, &x->type)) return -1;
    if (x->type == MD_OP_CUSTOM) return fail(r, "a custom operation");
    json_t *a = json_object_get(o, "inputs"), *b = json_object_get(o, "outputs");
    if (json_array_size(a) > FZ_MAX_OP_IN || json_array_size(b) > FZ_MAX_OP_OUT)
      return fail(r, "an operation with more than %d inputs or %d outputs", FZ_MAX_OP_IN, FZ_MAX_OP_OUT);
    x->n_in = (uint8_t)json_array_size(a);
    x->n_out = (uint8_t)json_array_size(b);
    for (unsigned q = 0; q < x->n_in; q++) x->in[q] = (uint8_t)json_integer_value(json_array_get(a, q));
    for (unsigned q = 0; q < x->n_out; q++) x->out[q] = (uint8_t)json_integer_value(json_array_get(b, q));
  }
  m->n_in = (uint8_t)json_array_size(ins);
  m->n_out = (uint8_t)json_array_size(outs);
  for (unsigned q = 0; q < m->n_in; q++) m->in[q] = (uint8_t)json_integer_value(json_array_get(ins, q));
  for (unsigned q = 0; q < m->n_out; q++) m->out[q] = (uint8_t)json_integer_value(json_array_get(outs, q));
  if (vals) {
    /* i32 and f32 inline values, hex bytes: the only forms small models use */
    json_t *v;
    if ((v = json_object_get(vals, "i32")) || (v = json_object_get(vals, "f32"))) {
      int f = json_object_get(vals, "f32") != NULL;
      if (json_array_size(v) * 4 > FZ_MAX_VALUES) return fail(r, "operand values over %d bytes", FZ_MAX_VALUES);
      for (unsigned i = 0; i < json_array_size(v); i++) {
        uint32_t u;
        if (f) {
          float x;
          if (get_float(json_array_get(v, i), &x)) return fail(r, "operand value");
          memcpy(&u, &x, 4);
        } else {
          u = (uint32_t)(int32_t)json_integer_value(json_array_get(v, i));
        }
        memcpy(m->values + m->n_values, &u, 4);
        m->n_values += 4;
      }
    } else if ((v = json_object_get(vals, "hex"))) {
      const char *s = json_string_value(v);
      size_t n = s ? strlen(s) / 2 : 0;
      if (n > FZ_MAX_VALUES) return fail(r, "operand values over %d bytes", FZ_MAX_VALUES);
      for (size_t i = 0; i < n; i++) {
        unsigned x;
        if (sscanf(s + 2 * i, "%2x", &x) != 1) return fail(r, "operand values hex");
        m->values[m->n_values++] = (uint8_t)x;
      }
    } else {
      return fail(r, "operand values in a form other than i32, f32 or hex");
    }
  }
  return 0;
}

static int model_index(rd *r, json_t *v, uint8_t *out) {
  name *n = NULL;
  fz_model m;
  if (json_is_string(v)) {
    n = find(r, json_string_value(v));
    if (!n || n->kind != N_MODEL) return fail(r, "'%s' is not a model", json_string_value(v));
    if (n->idx) {
      *out = (uint8_t)(n->idx - 1);
      return 0;
    }
    if (model_of(r, n->def, &m)) return -1;
  } else if (json_is_object(v)) {
    if (model_of(r, v, &m)) return -1;
  } else {
    return fail(r, "a model that is neither a name nor an object");
  }
  if (r->p->n_models == FZ_MAX_MODELS) return fail(r, "more than %d models", FZ_MAX_MODELS);
  r->p->models[r->p->n_models] = m;
  *out = r->p->n_models++;
  if (n) n->idx = *out + 1;
  return 0;
}

/* The object a name denotes, checking it may be named here. */
static int obj_named(rd *r, const char *s, uint16_t *obj) {
  name *n = find(r, s);
  if (!n || n->kind != N_OBJ) return fail(r, "'%s' is not a handle this program made", s);
  if (r->in_block && n->idx >= r->block_objs) return fail(r, "a block naming what it made itself");
  *obj = n->idx;
  return 0;
}

static int ref_of(rd *r, json_t *v, fz_ref *out) {
  memset(out, 0, sizeof *out);
  if (json_is_string(v)) return obj_named(r, json_string_value(v), &out->obj);
  if (!json_is_object(v)) return fail(r, "a handle that is neither a name nor an object");
  json_t *lit = json_object_get(v, "literal"), *fg = json_object_get(v, "forge");
  uint64_t x;
  if (lit) {
    if (get_u64(lit, &x)) return fail(r, "literal");
    out->how = x ? FZ_REF_LITERAL : FZ_REF_ZERO;
    out->v = x;
    return 0;
  }
  if (!json_is_string(fg) || obj_named(r, json_string_value(fg), &out->obj)) return fail(r, "forge");
  json_t *xo = json_object_get(v, "xor"), *ad = json_object_get(v, "add");
  if (xo) {
    if (get_u64(xo, &x)) return fail(r, "xor");
    out->forge = FZ_FORGE_XOR;
    out->v = x;
  } else if (json_is_integer(ad)) {
    out->forge = FZ_FORGE_ADD;
    out->v = (uint64_t)(int64_t)json_integer_value(ad);
  } else {
    return fail(r, "forge without xor or add");
  }
  return 0;
}

static int mem_named(rd *r, json_t *v, fz_mem *out) {
  name *n = json_is_string(v) ? find(r, json_string_value(v)) : NULL;
  if (!n || n->kind != N_MEM) return fail(r, "a memory that is not named");
  *out = r->mems[n->idx];
  return 0;
}

static int request_of(rd *r, json_t *v, fz_request *q) {
  memset(q, 0, sizeof *q);
  if (json_is_string(v)) {
    name *n = find(r, json_string_value(v));
    if (!n || n->kind != N_REQUEST) return fail(r, "'%s' is not a request", json_string_value(v));
    v = n->def;
  }
  json_t *ins = json_object_get(v, "inputs"), *outs = json_object_get(v, "outputs"), *pools = json_object_get(v, "pools");
  if (json_array_size(ins) > FZ_MAX_ARGS || json_array_size(outs) > FZ_MAX_ARGS ||
      json_array_size(pools) > FZ_MAX_REQ_POOLS)
    return fail(r, "a request over the limits");
  q->n_in = (uint8_t)json_array_size(ins);
  q->n_out = (uint8_t)json_array_size(outs);
  q->n_pools = (uint8_t)json_array_size(pools);
  for (unsigned j = 0; j < q->n_pools; j++) {
    json_t *pl = json_array_get(pools, j), *t = json_object_get(pl, "token");
    if (t) {
      q->pools[j].is_token = 1;
      if (ref_of(r, t, &q->pools[j].token)) return -1;
    } else if (mem_named(r, json_object_get(pl, "memory"), &q->pools[j].mem)) {
      return -1;
    }
  }
  for (unsigned a = 0; a < (unsigned)(q->n_in + q->n_out); a++) {
    json_t *x = a < q->n_in ? json_array_get(ins, a) : json_array_get(outs, a - q->n_in);
    fz_rarg *ra = a < q->n_in ? &q->in[a] : &q->out[a - q->n_in];
    uint64_t u;
    if (!get_u64(json_object_get(x, "pool"), &u)) ra->pool = (uint8_t)(u > 255 ? 255 : u);
    if (!get_u64(json_object_get(x, "offset"), &u)) {
      if (u > UINT32_MAX) return fail(r, "an offset over 32 bits");
      ra->offset = (uint32_t)u;
    }
    if (!get_u64(json_object_get(x, "length"), &u)) {
      if (u > UINT32_MAX) return fail(r, "a length over 32 bits");
      ra->length = (uint32_t)u;
    }
    ra->no_value = json_is_true(json_object_get(x, "no_value"));
    if (dims_of(r, json_object_get(x, "dims"), &ra->dims)) return -1;
  }
  return 0;
}

/* The client a call that omits `client` means: the only one open. */
static int only_client(rd *r, fz_ref *out) {
  int found = -1;
  for (unsigned i = 0; i < r->p->n_objs; i++)
    if (r->client_open[i]) {
      if (found >= 0) return fail(r, "a call without 'client' while two are open");
      found = (int)i;
    }
  if (found < 0) return fail(r, "a call without 'client' while none is open");
  memset(out, 0, sizeof *out);
  out->obj = (uint16_t)found;
  return 0;
}

static int read_call(rd *r, json_t *ev, mdc_call c, unsigned block_lanes) {
  mdc_fz_prog *p = r->p;
  if (p->n_calls == FZ_MAX_CALLS) return fail(r, "more than %d calls", FZ_MAX_CALLS);
  fz_call *k = &p->calls[p->n_calls];
  memset(k, 0, sizeof *k);
  k->call = (uint8_t)c;
  if (r->in_block && r->t == FZ_CONCURRENCY) {
    k->block = p->n_blocks;
    json_t *l = json_object_get(ev, "lane");
    k->lane = (uint8_t)(json_is_integer(l) ? json_integer_value(l) : 0);
    if (k->lane >= block_lanes) return fail(r, "lane out of range");
  }
  const mdc_call_desc *cd = &mdc_calls[c];
  for (unsigned a = 0; a < cd->n_args; a++) {
    const mdc_arg_desc *ad = &mdc_args[cd->args[a].id];
    fz_arg *x = &k->a[a];
    json_t *v = json_object_get(ev, ad->key);
    switch (ad->type) {
      case MDC_T_DEVICE:
      case MDC_T_TEXT: break;
      case MDC_T_HANDLE:
        if (!v && cd->args[a].id == MDC_A_CLIENT) {
          if (only_client(r, &x->ref)) return -1;
        } else if (!v) {
          return fail(r, "missing '%s'", ad->key);
        } else if (ref_of(r, v, &x->ref)) {
          return -1;
        }
        x->present = 1;
        break;
      case MDC_T_HANDLES:
        if (!v) break;
        if (!json_is_array(v) || json_array_size(v) > FZ_MAX_LIST) return fail(r, "more than %d prepared models", FZ_MAX_LIST);
        x->present = 1;
        x->refs.n = (uint8_t)json_array_size(v);
        for (unsigned i = 0; i < x->refs.n; i++)
          if (ref_of(r, json_array_get(v, i), &x->refs.v[i])) return -1;
        break;
      case MDC_T_ROLES:
        if (!v) break;
        if (!json_is_array(v) || json_array_size(v) > FZ_MAX_LIST) return fail(r, "more than %d roles", FZ_MAX_LIST);
        x->present = 1;
        x->roles.n = (uint8_t)json_array_size(v);
        for (unsigned i = 0; i < x->roles.n; i++) {
          json_t *o = json_array_get(v, i);
          uint64_t mi = 0, io = 0;
          float pr = 1.0f;
          if (get_u64(json_object_get(o, "model"), &mi) || get_u64(json_object_get(o, "io"), &io) ||
              (json_object_get(o, "p") && get_float(json_object_get(o, "p"), &pr)) || mi > 255 || io > 255)
            return fail(r, "a role");
          x->roles.r[i] = (fz_role){(uint8_t)mi, (uint8_t)io, pr};
        }
        break;
      case MDC_T_MODEL:
        if (!v || model_index(r, v, &x->model)) return v ? -1 : fail(r, "missing model");
        x->present = 1;
        break;
      case MDC_T_DESC:
        if (v && !json_is_null(v) && dims_of(r, json_object_get(v, "dims"), &x->dims)) return -1;
        x->present = x->dims.rank > 0;
        break;
      case MDC_T_DIMS:
        if (dims_of(r, v, &x->dims)) return -1;
        x->present = x->dims.rank > 0;
        break;
      case MDC_T_MEMORY:
        if (mem_named(r, v, &x->mem)) return -1;
        x->present = 1;
        break;
      case MDC_T_REQUEST:
        if (p->n_requests == FZ_MAX_REQUESTS) return fail(r, "more than %d executions", FZ_MAX_REQUESTS);
        if (!v || request_of(r, v, &p->requests[p->n_requests])) return v ? -1 : fail(r, "missing request");
        x->request = p->n_requests++;
        x->present = 1;
        break;
      case MDC_T_U64:
        if (!v) break;
        if (get_u64(v, &x->u64)) return fail(r, "'%s' is not a number", ad->key);
        x->present = 1;
        break;
    }
  }
  if (cd->produces != MDC_OBJ_NONE) {
    if (p->n_objs == FZ_MAX_OBJS) return fail(r, "more than %d objects", FZ_MAX_OBJS);
    k->obj = p->n_objs;
    p->objs[p->n_objs] = (fz_objinfo){(uint8_t)cd->produces, p->n_calls};
    const char *as = json_string_value(json_object_get(ev, "as"));
    if (as && !add(r, as, N_OBJ, p->n_objs)) return fail(r, "too many names");
    if (cd->produces == MDC_OBJ_CLIENT) r->client_open[p->n_objs] = 1;
    p->n_objs++;
  }
  if (c == MDC_CALL_CLOSE_CLIENT && k->a[mdc_fz_arg_pos(c, MDC_A_CLIENT)].ref.how == FZ_REF_OBJ &&
      !k->a[mdc_fz_arg_pos(c, MDC_A_CLIENT)].ref.forge)
    r->client_open[k->a[mdc_fz_arg_pos(c, MDC_A_CLIENT)].ref.obj] = 0;
  p->n_calls++;
  return 0;
}

static int read_line(rd *r, json_t *ev, unsigned *block_lanes) {
  const char *op = json_string_value(json_object_get(ev, "op"));
  if (!op) return fail(r, "an event without 'op'");
  mdc_fz_prog *p = r->p;
  if (!strcmp(op, "open_device")) {
    if (r->devices++) return fail(r, "a second open_device");
    const char *cfg = json_string_value(json_object_get(ev, "config"));
    const char *fp = cfg ? strstr(cfg, "faults=") : NULL;
    if (fp) {
      /* the one plan programs hold: stall@N (concurrency), alone */
      char *end = NULL;
      unsigned long n = strncmp(fp + 7, "stall@", 6) ? 0 : strtoul(fp + 13, &end, 10);
      if (r->t != FZ_CONCURRENCY || !n || n > FZ_MAX_STALL || (*end && *end != ';'))
        return fail(r, "a fault plan other than one stall@N (N <= %d) of a concurrency program", FZ_MAX_STALL);
      p->stall = (uint8_t)n;
    }
    if (cfg && strstr(cfg, "latency_ns")) return fail(r, "a latency");
    const char *s = cfg ? strstr(cfg, "seed=") : NULL;
    if (s) p->seed = (uint32_t)strtoull(s + 5, NULL, 0);
    return 0;
  }
  if (!strcmp(op, "close_device")) return 1;   /* the end of what runs */
  if (!strcmp(op, "memory")) return read_memory(r, ev, 0);
  if (!strcmp(op, "bad_memory")) return read_memory(r, ev, 1);
  if (!strcmp(op, "model") || !strcmp(op, "request")) {
    const char *as = json_string_value(json_object_get(ev, "as"));
    name *n = as ? add(r, as, !strcmp(op, "model") ? N_MODEL : N_REQUEST, 0) : NULL;
    if (!n) return fail(r, "%s without 'as'", op);
    n->def = json_incref(ev);
    return 0;
  }
  if (!strcmp(op, "check") || !strcmp(op, "expect_tally") || !strcmp(op, "expect_unpredictable")) return 0;
  if (!strcmp(op, "fill")) return fail(r, "a fill (contents the encoding does not track)");
  if (!strcmp(op, "concurrent")) {
    json_t *l = json_object_get(ev, "lanes");
    unsigned lanes = json_is_integer(l) ? (unsigned)json_integer_value(l) : 0;
    if (r->t == FZ_CONCURRENCY) {
      if (lanes < 2 || lanes > FZ_MAX_LANES) return fail(r, "a block of %u lanes (2..%d)", lanes, FZ_MAX_LANES);
      if (p->n_blocks == FZ_MAX_BLOCKS) return fail(r, "more than %d blocks", FZ_MAX_BLOCKS);
      fz_block *b = &p->blocks[p->n_blocks++];
      b->lanes = (uint8_t)lanes;
      b->first = p->n_calls;
    }
    *block_lanes = lanes;
    r->in_block = 1;
    r->block_objs = p->n_objs;
    return 0;
  }
  if (!strcmp(op, "end_concurrent")) {
    if (r->t == FZ_CONCURRENCY && p->n_blocks) {
      fz_block *b = &p->blocks[p->n_blocks - 1];
      b->end = p->n_calls;
      if (b->end == b->first) p->n_blocks--;
    }
    r->in_block = 0;
    return 0;
  }
  const mdc_call_desc *cd = mdc_call_find(op);
  if (!cd) return fail(r, "unknown op '%s'", op);
  if (!mdc_fz_call_encoded(cd->id)) return fail(r, "'%s': registered pools (SPEC 9) are not in the encoding", op);
  if (!(cd->flags & MDC_CALL_IN_BLOCK)) return fail(r, "'%s' is not a call a program makes", op);
  if (!r->devices) return fail(r, "a call before open_device");
  return read_call(r, ev, cd->id, *block_lanes);
}

int mdc_fz_trace_read(const char *path, mdc_fz_target t, mdc_fz_prog *out, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  rd *r = calloc(1, sizeof *r);
  if (!r) {
    fclose(f);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  r->t = t;
  r->p = out;
  r->err = err;
  r->errlen = errlen;
  memset(out, 0, sizeof *out);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int rc = 0, header = 0;
  unsigned lanes = 0;
  while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
    r->line++;
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '#' || *s == '\n' || *s == '\r' || !*s) continue;
    json_error_t je;
    json_t *ev = json_loads(s, 0, &je);
    if (!ev) {
      rc = fail(r, "not JSON: %s", je.text);
      break;
    }
    if (!header) {
      header = 1;
      const char *v = json_string_value(json_object_get(ev, "mdc_trace"));
      if (!v || v[0] != '1' || v[1] != '.') rc = fail(r, "not a trace of format 1.x");
    } else {
      rc = read_line(r, ev, &lanes);
    }
    json_decref(ev);
  }
  free(line);
  fclose(f);
  if (rc == 1) rc = 0;
  if (rc == 0 && !header) rc = fail(r, "empty");
  for (unsigned i = 0; i < r->n_names; i++) {
    free(r->names[i].s);
    json_decref(r->names[i].def);
  }
  free(r);
  if (rc >= 0) mdc_fz_finish(t, out);   /* as the decoder ends: decode(encode(p)) is p */
  return rc < 0 ? -1 : 0;
}
