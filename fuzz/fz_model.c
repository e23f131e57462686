/* fz_model.c - the state model: what SPEC allows each call of a program to return, given
 * what the calls before it returned (fz_model.h). Each rule cites its SPEC section in the
 * `why` it leaves for a finding. */
#include "fz_model.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations above this may be refused (GENERAL_FAILURE or RESOURCE_EXHAUSTED_*) by a driver
 * that cannot serve them (SPEC 3); below it they must work on the fuzz device. */
#define BIG_BYTES (128ull << 10)

static const char *const status_names[] = {"NONE", "DEVICE_UNAVAILABLE", "GENERAL_FAILURE",
                                           "OUTPUT_INSUFFICIENT_SIZE", "INVALID_ARGUMENT",
                                           "MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT",
                                           "RESOURCE_EXHAUSTED_TRANSIENT", "RESOURCE_EXHAUSTED_PERSISTENT",
                                           "DEAD_OBJECT", "(other)"};

const char *mdc_fz_set_str(fz_set s, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < 11 && used < n; i++)
    if (s & (1u << i)) used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "|" : "", status_names[i]);
  if (!s) snprintf(buf, n, "(nothing)");
  return buf;
}

md_status mdc_fz_set_first(fz_set s) {
  for (unsigned i = 0; i < 9; i++)
    if (s & (1u << i)) return (md_status)i;
  return s & (1u << 9) ? MD_DEAD_OBJECT : MD_NONE;
}

/* ---- dims ----------------------------------------------------------------------------------- */

int mdc_fz_combine(const fz_dims *a, const fz_dims *b, fz_dims *out) {
  fz_dims r;
  if (a->rank == 0) r = *b;
  else if (b->rank == 0) r = *a;
  else {
    if (a->rank != b->rank) return -1;
    r = *a;
    for (unsigned i = 0; i < a->rank; i++) {
      if (a->d[i] == 0) r.d[i] = b->d[i];
      else if (b->d[i] != 0 && b->d[i] != a->d[i]) return -1;
    }
  }
  r.present = r.rank > 0;
  *out = r;
  return 0;
}

int mdc_fz_known(const fz_dims *d) {
  if (d->rank == 0) return 0;
  for (unsigned i = 0; i < d->rank; i++)
    if (d->d[i] == 0) return 0;
  return 1;
}

static int dims_eq(const fz_dims *a, const fz_dims *b) {
  if (a->rank != b->rank) return 0;
  for (unsigned i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

/* ---- models --------------------------------------------------------------------------------- */

static int is_binary(int32_t t) { return t == MD_OP_ADD || t == MD_OP_SUB || t == MD_OP_MUL; }

/* Two declared dims that can describe one tensor: ranks equal or unknown, axes equal or 0. */
static int compatible(const fz_dims *a, const fz_dims *b) {
  fz_dims c;
  return mdc_fz_combine(a, b, &c) == 0;
}

int mdc_fz_model_class(const fz_model *m) {
  if (m->n_ops == 0 || m->n_in == 0 || m->n_out == 0) return FZ_MODEL_OTHER;
  if (m->n_operands > FZ_MAX_OPERANDS || m->n_ops > FZ_MAX_OPS) return FZ_MODEL_OTHER;
  uint8_t writer[FZ_MAX_OPERANDS], role[FZ_MAX_OPERANDS];
  memset(writer, 0xff, sizeof writer);
  memset(role, 0, sizeof role);
  for (unsigned i = 0; i < m->n_operands; i++) {
    const fz_operand *o = &m->opnd[i];
    if (o->scale != 0.0f || o->zero_point != 0) return FZ_MODEL_OTHER;
    if (o->type == MD_TENSOR_FLOAT32) {
      if (o->dims.rank > MD_MAX_RANK) return FZ_MODEL_OTHER;
      if (o->lifetime != MD_SUBGRAPH_INPUT && o->lifetime != MD_SUBGRAPH_OUTPUT &&
          o->lifetime != MD_TEMPORARY_VARIABLE)
        return FZ_MODEL_OTHER;
      if (o->offset || o->length) return FZ_MODEL_OTHER;
    } else if (o->type == MD_INT32) {
      if (o->dims.rank != 0 || o->lifetime != MD_CONSTANT_COPY || o->length != 4 || o->offset % 4 ||
          (uint64_t)o->offset + 4 > m->n_values)
        return FZ_MODEL_OTHER;
      int32_t v;
      memcpy(&v, m->values + o->offset, 4);
      if (v < 0 || v > 3) return FZ_MODEL_OTHER;
    } else {
      return FZ_MODEL_OTHER;
    }
  }
  /* Inputs and outputs: exactly the SUBGRAPH_INPUT / OUTPUT operands, each once. */
  for (int outp = 0; outp < 2; outp++) {
    uint8_t n = outp ? m->n_out : m->n_in;
    const uint8_t *list = outp ? m->out : m->in;
    int32_t want = outp ? MD_SUBGRAPH_OUTPUT : MD_SUBGRAPH_INPUT;
    unsigned seen = 0;
    for (unsigned k = 0; k < n; k++) {
      if (list[k] >= m->n_operands || m->opnd[list[k]].lifetime != want || (role[list[k]] & (1u << outp)))
        return FZ_MODEL_OTHER;
      role[list[k]] |= (uint8_t)(1u << outp);
      seen++;
    }
    for (unsigned i = 0; i < m->n_operands; i++)
      if (m->opnd[i].lifetime == want && !(role[i] & (1u << outp))) return FZ_MODEL_OTHER;
    (void)seen;
  }
  for (unsigned k = 0; k < m->n_ops; k++) {
    const fz_operation *op = &m->op[k];
    if (is_binary(op->type)) {
      if (op->n_in != 3 || op->n_out != 1) return FZ_MODEL_OTHER;
    } else if (op->type == MD_OP_RELU) {
      if (op->n_in != 1 || op->n_out != 1) return FZ_MODEL_OTHER;
    } else {
      return FZ_MODEL_OTHER;
    }
    for (unsigned j = 0; j < op->n_in; j++) {
      uint8_t idx = op->in[j];
      if (idx >= m->n_operands) return FZ_MODEL_OTHER;
      const fz_operand *o = &m->opnd[idx];
      int want_scalar = is_binary(op->type) && j == 2;
      if (want_scalar != (o->type == MD_INT32)) return FZ_MODEL_OTHER;
      if (o->lifetime == MD_TEMPORARY_VARIABLE || o->lifetime == MD_SUBGRAPH_OUTPUT) {
        if (writer[idx] == 0xff || writer[idx] >= k) return FZ_MODEL_OTHER;   /* read before written */
      }
    }
    uint8_t oi = op->out[0];
    if (oi >= m->n_operands) return FZ_MODEL_OTHER;
    const fz_operand *oo = &m->opnd[oi];
    if (oo->type != MD_TENSOR_FLOAT32 ||
        (oo->lifetime != MD_TEMPORARY_VARIABLE && oo->lifetime != MD_SUBGRAPH_OUTPUT) || writer[oi] != 0xff)
      return FZ_MODEL_OTHER;
    writer[oi] = (uint8_t)k;
    /* Declared dims that already disagree are left to the driver's judgement. */
    const fz_dims *a = &m->opnd[op->in[0]].dims;
    if (!compatible(a, &oo->dims)) return FZ_MODEL_OTHER;
    if (is_binary(op->type) && (!compatible(a, &m->opnd[op->in[1]].dims) ||
                                !compatible(&m->opnd[op->in[1]].dims, &oo->dims)))
      return FZ_MODEL_OTHER;
  }
  for (unsigned i = 0; i < m->n_operands; i++) {
    int32_t lt = m->opnd[i].lifetime;
    if ((lt == MD_TEMPORARY_VARIABLE || lt == MD_SUBGRAPH_OUTPUT) && writer[i] == 0xff) return FZ_MODEL_OTHER;
  }
  return FZ_MODEL_VALID;
}

/* numpy-style broadcast of two fully known dims. */
static int broadcast(const fz_dims *a, const fz_dims *b, fz_dims *out) {
  if (dims_eq(a, b)) {
    *out = *a;
    return 0;
  }
  unsigned r = a->rank > b->rank ? a->rank : b->rank;
  if (r > FZ_MAX_RANK) return -1;
  fz_dims o = {.present = 1, .rank = (uint8_t)r};
  for (unsigned i = 0; i < r; i++) {
    uint32_t x = i < a->rank ? a->d[a->rank - 1 - i] : 1, y = i < b->rank ? b->d[b->rank - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return -1;
    o.d[r - 1 - i] = x == 1 ? y : x;
  }
  *out = o;
  return 0;
}

int mdc_fz_infer(const fz_model *m, const fz_dims *in, fz_dims *out, uint64_t *largest) {
  fz_dims d[FZ_MAX_OPERANDS];
  uint64_t big = 0;
  if (largest) *largest = 0;
  memset(d, 0, sizeof d);
  for (unsigned i = 0; i < m->n_in; i++) d[m->in[i]] = in[i];
  for (unsigned k = 0; k < m->n_ops; k++) {
    const fz_operation *op = &m->op[k];
    fz_dims r;
    if (is_binary(op->type)) {
      if (broadcast(&d[op->in[0]], &d[op->in[1]], &r)) return -1;
    } else {
      r = d[op->in[0]];
    }
    uint64_t b = mdc_fz_bytes(m->opnd[op->out[0]].type, &r);
    if (b > big) big = b;
    if (largest) *largest = big;
    const fz_dims *decl = &m->opnd[op->out[0]].dims;
    fz_dims c;
    if (mdc_fz_combine(decl, &r, &c) || (decl->rank && decl->rank != r.rank)) return -2;
    d[op->out[0]] = r;
  }
  for (unsigned j = 0; j < m->n_out; j++) out[j] = d[m->out[j]];
  return 0;
}

/* ---- objects -------------------------------------------------------------------------------- */

void mdc_fz_state_init(fz_state *s, uint64_t mem_limit) {
  /* objects are cleared as they are made (new_obj) */
  s->n = 0;
  s->pressure = 0;
  s->mem_limit = mem_limit;
}

static uint8_t live3(uint8_t live) {
  return live == FZ_LIVE ? FZ_YES : live == FZ_MAYBE_LIVE ? FZ_MAYBE : FZ_NO;
}

/* Whether handle r is a live object of `kind` owned by `owner` (any owner for clients); *obj
 * gets the object when it may be. `what` says why not, for findings. */
static uint8_t ref3(const fz_state *s, const fz_ref *r, mdc_obj kind, uint16_t owner, uint16_t *obj,
                    const char **what) {
  *obj = FZ_NOBODY;
  *what = "";
  if (r->how == FZ_REF_ZERO) return *what = "0 is never a valid handle (SPEC 1)", FZ_NO;
  if (r->how == FZ_REF_LITERAL) return *what = "a value the driver never issued (SPEC 5)", FZ_NO;
  if (r->forge != FZ_FORGE_NONE && r->v != 0)
    return *what = "a forged value: a live handle with bits changed (SPEC 5: unforgeable)", FZ_NO;
  if (r->obj >= s->n) return *what = "a value the driver never issued (SPEC 5)", FZ_NO;
  const fz_obj *o = &s->o[r->obj];
  if (o->live == FZ_UNMADE) return *what = "0: the call that should have made it failed", FZ_NO;
  if (o->kind != kind) return *what = "a handle of another kind (SPEC 5)", FZ_NO;
  uint8_t t = live3(o->live);
  if (t == FZ_NO) return *what = "released (SPEC 5: a released handle is dead)", FZ_NO;
  if (kind != MDC_OBJ_CLIENT && o->owner != owner)
    return *what = "another client's (SPEC 5: bound to its client)", FZ_NO;
  *obj = r->obj;
  if (t == FZ_MAYBE) *what = "it may have been released by a racing call";
  return t;
}

uint16_t mdc_fz_call_client(const mdc_fz_prog *p, const fz_call *k) {
  (void)p;
  const fz_arg *a = mdc_fz_arg(k, MDC_A_CLIENT);
  if (!a || a->ref.how != FZ_REF_OBJ || (a->ref.forge && a->ref.v)) return FZ_NOBODY;
  return a->ref.obj;
}

const fz_model *mdc_fz_prepared_model(const fz_state *s, const mdc_fz_prog *p, uint16_t obj) {
  if (obj >= s->n || s->o[obj].kind != MDC_OBJ_PREPARED || s->o[obj].model >= p->n_models) return NULL;
  return &p->models[s->o[obj].model];
}

/* ---- predictions ---------------------------------------------------------------------------- */

static void why(fz_pred *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(fz_pred *pr, const char *fmt, ...) {
  if (pr->why[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pr->why, sizeof pr->why, fmt, ap);
  va_end(ap);
}

/* A condition that must hold for the call to go on: when it may not, `st` joins the set;
 * when it surely does not, the prediction ends there. */
#define GATE(pr, tri, st, ...)                        \
  do {                                                \
    uint8_t t_ = (tri);                               \
    if (t_ != FZ_YES) {                               \
      (pr)->set |= FZ_BIT(st);                        \
      if (t_ == FZ_NO) why((pr), __VA_ARGS__);        \
    }                                                 \
    if (t_ == FZ_NO) return;                          \
  } while (0)

static uint64_t file_size(const fz_mem *m) { return m->file_size ? m->file_size : m->offset + m->size; }

enum { USE_COPY = 0, USE_IO = 1 };

/* SPEC 2 / 8.2: a descriptor that breaks the validation rules is INVALID_ARGUMENT. */
static uint8_t mem_valid(const fz_mem *m, int use) {
  if (m->fd != FZ_FD_REAL) return FZ_NO;
  if (m->kind < MD_MEM_ASHMEM || m->kind > MD_MEM_HARDWARE_BUFFER) return FZ_NO;
  if (m->prot & ~(uint32_t)(PROT_READ | PROT_WRITE)) return FZ_NO;
  if (m->kind == MD_MEM_HARDWARE_BUFFER) return use == USE_COPY ? FZ_NO : m->prot ? FZ_YES : FZ_MAYBE;
  if (m->size == 0) return FZ_NO;
  if (m->kind == MD_MEM_MMAP_FD && m->offset + m->size > file_size(m)) return FZ_NO;
  /* prot 0 has "only READ/WRITE bits" (SPEC 2) but grants no access: a driver may refuse it as
   * invalid (the reference driver does) or accept a pool no argument uses. */
  return m->prot ? FZ_YES : FZ_MAYBE;
}

static uint64_t tok_bytes(const fz_tok *t, const fz_dims *d) {
  return t->scalar ? mdc_fz_type_size(t->type) : mdc_fz_bytes(t->type, d);
}

/* Sizes a driver may refuse: no size at all (dims whose byte size does not fit 64 bits:
 * INVALID_ARGUMENT, SPEC 8.17 v1.2, or as beyond the device), beyond the device
 * (RESOURCE_EXHAUSTED_PERSISTENT or GENERAL_FAILURE), big (also RESOURCE_EXHAUSTED_TRANSIENT),
 * else none. */
static fz_set size_refusals(const fz_state *s, uint64_t bytes) {
  if (bytes == UINT64_MAX)
    return FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) | FZ_BIT(MD_GENERAL_FAILURE);
  if (bytes > s->mem_limit)
    return FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) | FZ_BIT(MD_GENERAL_FAILURE);
  if (bytes > BIG_BYTES)
    return FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) | FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) |
           FZ_BIT(MD_GENERAL_FAILURE);
  return 0;
}

static int tok_busy(const fz_tok *t) { return t->writers || t->racy; }

/* RESOURCE_EXHAUSTED_TRANSIENT when what the run may already hold and `bytes` more may not fit
 * (device memory is also taken by executions' temporaries a driver keeps). */
static fz_set pressure(const fz_state *s, uint64_t bytes) {
  uint64_t sum = s->pressure + (bytes > s->mem_limit ? s->mem_limit : bytes);
  return sum + (4u << 10) > s->mem_limit ? FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) : 0;
}

static void press(fz_state *s, uint64_t bytes) {
  if (bytes == UINT64_MAX || s->pressure + bytes > s->mem_limit) s->pressure = s->mem_limit;
  else s->pressure += bytes + 512;   /* and an allocator's rounding and red zones */
}

static void predict_allocate(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, uint16_t client,
                             fz_pred *pr) {
  const fz_arg *desc = mdc_fz_arg(k, MDC_A_DESC), *list = mdc_fz_arg(k, MDC_A_PREPARED_LIST);
  const fz_arg *ins = mdc_fz_arg(k, MDC_A_INPUT_ROLES), *outs = mdc_fz_arg(k, MDC_A_OUTPUT_ROLES);
  uint8_t n_prep = list ? list->refs.n : 0, n_in = ins ? ins->roles.n : 0, n_out = outs ? outs->roles.n : 0;
  GATE(pr, n_prep ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: allocate needs at least one prepared model");
  GATE(pr, n_in + n_out ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: allocate needs at least one role");
  fz_dims dims = desc ? desc->dims : (fz_dims){0};
  GATE(pr, dims.rank <= MD_MAX_RANK ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 1: desc rank over MD_MAX_RANK");
  uint16_t prep[FZ_MAX_LIST];
  for (unsigned i = 0; i < n_prep; i++) {
    const char *what;
    uint8_t t = ref3(s, &list->refs.v[i], MDC_OBJ_PREPARED, client, &prep[i], &what);
    GATE(pr, t, MD_INVALID_ARGUMENT, "SPEC 3: prepared model %u: %s", i, what);
  }
  fz_tok *tk = &pr->tok;
  memset(tk, 0, sizeof *tk);
  int lenient = 0, first = 1;
  for (unsigned i = 0; i < (unsigned)(n_in + n_out); i++) {
    int is_out = i >= n_in;
    const fz_role *r = is_out ? &outs->roles.r[i - n_in] : &ins->roles.r[i];
    const char *io = is_out ? "output" : "input";
    GATE(pr, r->model < n_prep ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: %s role %u: model_index %u out of range",
         io, is_out ? i - n_in : i, r->model);
    const fz_model *m = mdc_fz_prepared_model(s, p, prep[r->model]);
    if (!m) return;
    GATE(pr, r->io < (is_out ? m->n_out : m->n_in) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
         "SPEC 3: %s role: io_index %u out of range", io, r->io);
    GATE(pr, r->p > 0.0f && r->p <= 1.0f ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
         "SPEC 3: probability %g is not in (0, 1]", (double)r->p);
    for (unsigned j = 0; j < tk->n_roles; j++)
      GATE(pr, tk->roles[j].prepared == prep[r->model] && tk->roles[j].is_out == is_out && tk->roles[j].index == r->io
                   ? FZ_NO : FZ_YES,
           MD_INVALID_ARGUMENT, "SPEC 3: a role is listed twice");
    tk->roles[tk->n_roles].prepared = prep[r->model];
    tk->roles[tk->n_roles].is_out = (uint8_t)is_out;
    tk->roles[tk->n_roles].index = r->io;
    tk->n_roles++;
    if (s->o[prep[r->model]].model_class != FZ_MODEL_VALID) lenient = 1;
    uint8_t oi = is_out ? m->out[r->io] : m->in[r->io];
    if (oi >= m->n_operands) {
      lenient = 1;
      continue;
    }
    const fz_operand *o = &m->opnd[oi];
    if (first) {
      tk->type = o->type;
      tk->scale = o->scale;
      tk->zero_point = o->zero_point;
      tk->scalar = (uint8_t)mdc_fz_type_scalar(o->type);
      first = 0;
    } else {
      GATE(pr, o->type == tk->type && o->scale == tk->scale && o->zero_point == tk->zero_point ? FZ_YES : FZ_NO,
           MD_INVALID_ARGUMENT, "SPEC 3: role operands disagree on type, scale or zero point");
    }
    if (mdc_fz_type_scalar(o->type)) {
      GATE(pr, dims.rank == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: a scalar role takes no dims");
      continue;
    }
    GATE(pr, mdc_fz_combine(&dims, &o->dims, &dims) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
         "SPEC 3: desc and role dims do not combine");
  }
  if (lenient) {
    /* Roles on a model this oracle does not judge: only the handle checks above hold. */
    pr->set |= FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE) |
               FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) | FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT);
    tk->init = dims;
    tk->cur = dims;
    tk->cur_known = FZ_MAYBE;
    tk->bytes_known = 0;
    return;
  }
  tk->init = dims;
  tk->cur = dims;
  tk->cur_known = FZ_YES;
  tk->inited = FZ_NO;
  uint64_t bytes = 0;
  if (tk->scalar) bytes = mdc_fz_type_size(tk->type);
  else if (mdc_fz_known(&dims)) bytes = mdc_fz_bytes(tk->type, &dims);
  tk->bytes = bytes == UINT64_MAX ? 0 : bytes;
  tk->bytes_known = 1;
  /* SPEC 8.4: a type the driver has no kernel for may be refused. */
  if (tk->type != MD_TENSOR_FLOAT32) pr->set |= FZ_BIT(MD_GENERAL_FAILURE);
  fz_set refuse = size_refusals(s, bytes);
  if (bytes == UINT64_MAX || bytes > s->mem_limit) {
    pr->set |= refuse;
    why(pr, "SPEC 8.3: an allocation larger than the device's memory");
    return;
  }
  pr->set |= refuse | pressure(s, bytes) | FZ_BIT(MD_NONE);
}

static void predict_copy_from(const fz_state *s, const fz_call *k, uint16_t t, fz_pred *pr) {
  const fz_tok *tk = &s->o[t].tok;
  const fz_mem *src = &mdc_fz_arg(k, MDC_A_SRC)->mem;
  const fz_arg *da = mdc_fz_arg(k, MDC_A_DIMS);
  fz_dims dims = da ? da->dims : (fz_dims){0};
  GATE(pr, mem_valid(src, USE_COPY), MD_INVALID_ARGUMENT, "SPEC 2, 8.2: src descriptor is invalid");
  if (!(src->prot & PROT_READ)) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    why(pr, "SPEC 2: src is not readable");
    return;
  }
  GATE(pr, dims.rank <= MD_MAX_RANK ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 1: rank over MD_MAX_RANK");
  GATE(pr, !(tk->scalar && dims.rank) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: a scalar buffer takes no dims");
  for (unsigned i = 0; i < dims.rank; i++)
    GATE(pr, dims.d[i] ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 3: copy_from dims must have no 0");
  fz_dims c;
  GATE(pr, mdc_fz_combine(&tk->init, &dims, &c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
       "SPEC 3: copy_from dims must combine with the buffer's initial dims");
  GATE(pr, tk->scalar || mdc_fz_known(&c) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
       "SPEC 3: copy_from without dims needs fully known initial dims");
  uint64_t bytes = tok_bytes(tk, &c);
  GATE(pr, bytes == src->size ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
       "SPEC 3: the byte size of the combined dims must equal the src size");
  pr->dims = c;
  pr->bytes = bytes;
  pr->set |= FZ_BIT(MD_NONE) | size_refusals(s, bytes) | pressure(s, bytes);
  if (tok_busy(tk) || tk->readers) {
    /* SPEC 6: a write racing with another use returns NONE or an error. */
    pr->set |= FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_INVALID_ARGUMENT);
  }
}

static void predict_copy_to(const fz_state *s, const fz_call *k, uint16_t t, fz_pred *pr) {
  const fz_tok *tk = &s->o[t].tok;
  const fz_mem *dst = &mdc_fz_arg(k, MDC_A_DST)->mem;
  GATE(pr, mem_valid(dst, USE_COPY), MD_INVALID_ARGUMENT, "SPEC 2, 8.2: dst descriptor is invalid");
  if (!(dst->prot & PROT_WRITE)) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    why(pr, "SPEC 2: dst is not writable");
    return;
  }
  if (tok_busy(tk)) {
    /* SPEC 6: a read racing with a write returns NONE or an error; content indeterminate
     * (strict: one whole value of those written). */
    pr->set |= FZ_BIT(MD_NONE) | FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_INVALID_ARGUMENT);
    if (s->strict && tk->n_alt && !tk->writers) {
      pr->n_alt = tk->n_alt;
      memcpy(pr->alt, tk->alt, sizeof pr->alt);
    }
    return;
  }
  if (tk->cur_known == FZ_YES && (tk->scalar || mdc_fz_known(&tk->cur))) {
    uint64_t bytes = tok_bytes(tk, &tk->cur);
    GATE(pr, bytes == dst->size ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
         "SPEC 3: copy_to dst size must equal the byte size of the current dims (checked before initialization)");
  } else if (tk->cur_known != FZ_YES) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT);
  }
  GATE(pr, tk->inited, MD_GENERAL_FAILURE, "SPEC 3: copy_to of an uninitialized buffer");
  pr->set |= FZ_BIT(MD_NONE);
  if (tk->inited == FZ_YES && tk->cur_known == FZ_YES && tk->content == FZ_YES &&
      tk->content_bytes == dst->size) {
    pr->check = 1;
    pr->check_seed = tk->content_seed;
    pr->check_bytes = tk->content_bytes;
  }
}

/* Request validation and, for VALID models, the execution's outcome (SPEC 4). */
static void predict_exec(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, uint16_t client,
                         fz_pred *pr) {
  fz_exec *ex = &pr->ex;
  memset(ex, 0, sizeof *ex);
  for (unsigned i = 0; i < FZ_MAX_ARGS; i++) ex->out_tok[i] = ex->in_tok[i] = FZ_NOBODY;
  ex->validated = FZ_NO;
  uint16_t pobj;
  const char *what;
  const fz_request *rq0 = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
  ex->n_out = rq0->n_out;
  for (unsigned i = 0; i < rq0->n_out; i++) {
    const fz_rarg *ra = &rq0->out[i];
    uint16_t t;
    if (!ra->no_value && ra->pool < rq0->n_pools && rq0->pools[ra->pool].is_token &&
        ref3(s, &rq0->pools[ra->pool].token, MDC_OBJ_TOKEN, client, &t, &what) != FZ_NO)
      ex->out_tok[i] = t;
  }
  GATE(pr, ref3(s, &mdc_fz_arg(k, MDC_A_PREPARED)->ref, MDC_OBJ_PREPARED, client, &pobj, &what),
       MD_INVALID_ARGUMENT, "SPEC 5: prepared model: %s", what);
  const fz_model *m = mdc_fz_prepared_model(s, p, pobj);
  const fz_request *rq = rq0;
  GATE(pr, rq->n_in == m->n_in && rq->n_out == m->n_out ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
       "SPEC 4: argument counts must match the model");
  int known = s->o[pobj].model_class == FZ_MODEL_VALID, racy = 0, lenient = !known;
  uint16_t pool_tok[FZ_MAX_REQ_POOLS];
  for (unsigned j = 0; j < rq->n_pools; j++) {
    const fz_rpool *pl = &rq->pools[j];
    pool_tok[j] = FZ_NOBODY;
    if (pl->is_token) {
      GATE(pr, ref3(s, &pl->token, MDC_OBJ_TOKEN, client, &pool_tok[j], &what), MD_INVALID_ARGUMENT,
           "SPEC 4, 5, 8.7: request pool %u: token %s", j, what);
    } else {
      GATE(pr, mem_valid(&pl->mem, USE_IO), MD_INVALID_ARGUMENT, "SPEC 2, 8.2: request pool %u: invalid descriptor", j);
      if (pl->mem.kind == MD_MEM_HARDWARE_BUFFER) lenient = 1;
    }
  }
  fz_dims in_dims[FZ_MAX_ARGS], req_out[FZ_MAX_ARGS];
  uint64_t out_cap[FZ_MAX_ARGS];
  uint8_t out_pool[FZ_MAX_ARGS];
  memset(in_dims, 0, sizeof in_dims);
  memset(req_out, 0, sizeof req_out);
  memset(out_pool, 0, sizeof out_pool);
  for (unsigned i = 0; i < FZ_MAX_ARGS; i++) out_cap[i] = UINT64_MAX;
  for (unsigned a = 0; a < (unsigned)(rq->n_in + rq->n_out); a++) {
    int is_out = a >= rq->n_in;
    unsigned i = is_out ? a - rq->n_in : a;
    const fz_rarg *ra = is_out ? &rq->out[i] : &rq->in[i];
    const char *io = is_out ? "output" : "input";
    if (ra->no_value) {
      lenient = 1;
      continue;
    }
    GATE(pr, ra->pool < rq->n_pools ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 4: %s %u: pool index out of range", io, i);
    GATE(pr, ra->dims.rank <= MD_MAX_RANK ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 1: %s %u: rank over MD_MAX_RANK", io, i);
    uint8_t oi = is_out ? m->out[i] : m->in[i];
    if (oi >= m->n_operands) {
      lenient = 1;
      continue;
    }
    const fz_operand *o = &m->opnd[oi];
    int scalar = mdc_fz_type_scalar(o->type);
    GATE(pr, !(scalar && ra->dims.rank) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 4: %s %u: a scalar takes no dims", io, i);
    fz_dims c;
    GATE(pr, mdc_fz_combine(&o->dims, &ra->dims, &c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
         "SPEC 4: %s %u: dims do not combine with the model's", io, i);
    const fz_rpool *pl = &rq->pools[ra->pool];
    if (pl->is_token) {
      uint16_t t = pool_tok[ra->pool];
      const fz_tok *tk = &s->o[t].tok;
      GATE(pr, ra->offset == 0 && ra->length == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
           "SPEC 2: %s %u: a token argument has offset and length 0", io, i);
      int has_role = 0;
      for (unsigned r = 0; r < tk->n_roles; r++)
        has_role |= tk->roles[r].prepared == pobj && tk->roles[r].is_out == is_out && tk->roles[r].index == i;
      GATE(pr, has_role ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 4: %s %u: the token was not allocated for this role", io, i);
      if (is_out) {
        GATE(pr, mdc_fz_combine(&c, &tk->init, &c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
             "SPEC 4, 8.6: output %u: dims must combine with the buffer's initial dims", i);
        ex->out_tok[i] = t;
        out_pool[i] = 2;
        if (tk->readers || tok_busy(tk)) racy = 1;
      } else {
        if (tk->cur_known == FZ_YES) {
          GATE(pr, mdc_fz_combine(&c, &tk->cur, &c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
               "SPEC 4, 8.6: input %u: dims must combine with the buffer's current dims", i);
        } else {
          pr->set |= FZ_BIT(MD_INVALID_ARGUMENT);
          lenient = 1;
        }
        ex->in_tok[i] = t;
        if (tok_busy(tk)) racy = 1;
      }
    } else {
      const fz_mem *mem = &pl->mem;
      uint32_t need = is_out ? PROT_WRITE : PROT_READ;
      if (!(mem->prot & need)) {
        pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
        why(pr, "SPEC 2: %s %u: pool %u is not %s", io, i, ra->pool, is_out ? "writable" : "readable");
        return;
      }
      if (mem->kind == MD_MEM_HARDWARE_BUFFER) {
        GATE(pr, ra->offset == 0 && ra->length == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
             "SPEC 2: %s %u: a hardware buffer argument has offset and length 0", io, i);
        if (is_out) out_pool[i] = 1;
        continue;
      }
      GATE(pr, (uint64_t)ra->offset + ra->length <= mem->size ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
           "SPEC 2: %s %u: offset + length past the end of pool %u", io, i, ra->pool);
      int kn = scalar || mdc_fz_known(&c);
      uint64_t bytes = kn ? (scalar ? mdc_fz_type_size(o->type) : mdc_fz_bytes(o->type, &c)) : 0;
      if (!is_out) {
        GATE(pr, kn ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 4: input %u: dims not fully known", i);
        GATE(pr, ra->length == bytes ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
             "SPEC 2, 8.1: input %u: length must equal the byte size of its dims", i);
      } else {
        GATE(pr, !(kn && ra->length && ra->length > bytes) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
             "SPEC 8.1: output %u: a length larger than the byte size of its known dims", i);
        out_cap[i] = ra->length;
        out_pool[i] = 1;
      }
    }
    if (is_out) req_out[i] = c;
    else in_dims[i] = c;
  }
  /* SPEC 4: a token written by the request appears nowhere else in it (by value: a "forgery"
   * that flips no bit or adds 0 is the same handle). */
  for (unsigned i = 0; i < rq->n_out; i++) {
    if (rq->out[i].no_value || rq->out[i].pool >= rq->n_pools || !rq->pools[rq->out[i].pool].is_token) continue;
    const fz_ref *t = &rq->pools[rq->out[i].pool].token;
    for (unsigned a = 0; a < (unsigned)(rq->n_in + rq->n_out); a++) {
      const fz_rarg *ra = a < rq->n_in ? &rq->in[a] : &rq->out[a - rq->n_in];
      if (ra == &rq->out[i] || ra->no_value || ra->pool >= rq->n_pools || !rq->pools[ra->pool].is_token) continue;
      const fz_ref *u = &rq->pools[ra->pool].token;
      int tf = t->forge && t->v, uf = u->forge && u->v;
      int same = u->how == t->how &&
                 (t->how == FZ_REF_OBJ ? u->obj == t->obj && tf == uf && (!tf || (u->forge == t->forge && u->v == t->v))
                                       : u->v == t->v);
      GATE(pr, same ? FZ_NO : FZ_YES, MD_INVALID_ARGUMENT, "SPEC 4: a token used as an output appears again in the request");
    }
  }
  /* SPEC 4, 8.5: inputs must be initialized; checked after every INVALID_ARGUMENT rule. */
  ex->past_ia = 1;
  for (unsigned i = 0; i < rq->n_in; i++) {
    if (ex->in_tok[i] == FZ_NOBODY) continue;
    const fz_tok *tk = &s->o[ex->in_tok[i]].tok;
    GATE(pr, tk->inited, MD_GENERAL_FAILURE, "SPEC 4, 8.5: input %u: the token is not initialized", i);
    if (tk->inited == FZ_YES && tk->cur_known == FZ_YES) in_dims[i] = tk->cur;
    else lenient = 1;
    /* combine once more with the model's and the argument's dims */
    uint8_t oi = m->in[i];
    fz_dims c;
    if (mdc_fz_combine(&m->opnd[oi].dims, &rq->in[i].dims, &c) || mdc_fz_combine(&c, &in_dims[i], &in_dims[i]))
      lenient = 1;
  }
  ex->validated = pr->set ? FZ_MAYBE : FZ_YES;
  /* Past validation: what the run gives. It needs device memory for its inputs before it finds
   * anything else (SPEC 8.3: not what is free now is RESOURCE_EXHAUSTED_TRANSIENT). */
  fz_set run = 0;
  uint64_t in_bytes = 0;
  for (unsigned i = 0; i < rq->n_in; i++) {
    uint64_t b = mdc_fz_bytes(MD_TENSOR_FLOAT32, &in_dims[i]);
    if (b != UINT64_MAX) in_bytes += b;
  }
  run |= pressure(s, in_bytes);
  if (lenient || racy) {
    run |= FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE) |
          FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE) | FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) |
          FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT);
  } else {
    fz_dims prod[FZ_MAX_ARGS];
    uint64_t largest;
    int r = mdc_fz_infer(m, in_dims, prod, &largest);
    /* SPEC 8.3: the operations run in order, each result allocated on the device, and SPEC sets
     * no order between running out of memory and finding that dims disagree: a result past
     * the device (or big, or with the device full) may be refused before the run finds any
     * fault of the shapes. (Found by a 30-minute shapes campaign: [4096] + [4096,1] broadcast
     * to a 64 MiB temporary on a 1 MiB device before a RELU's output rank disagreed.) */
    run |= (size_refusals(s, largest) & ~FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT)) | pressure(s, largest);
    if (largest == UINT64_MAX || largest > s->mem_limit) run |= size_refusals(s, largest);
    if (r == -1) {
      /* Inputs whose shapes the operation cannot take: the request's fault or the run's. */
      run |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
      why(pr, "SPEC 7: the inputs' dims do not broadcast");
    } else if (r == -2) {
      run |= FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_INVALID_ARGUMENT);
      why(pr, "SPEC 4: produced dims disagree with the model's declared output dims");
    } else {
      int gf = 0, short_out = 0;
      ex->shapes_known = 1;
      for (unsigned i = 0; i < rq->n_out; i++) {
        ex->out[i] = prod[i];
        ex->sufficient[i] = 1;
        fz_dims c;
        uint64_t bytes = mdc_fz_bytes(MD_TENSOR_FLOAT32, &prod[i]);
        if (mdc_fz_combine(&req_out[i], &prod[i], &c)) {
          gf = 1;
          if (out_pool[i] == 2) why(pr, "SPEC 3: output %u: a buffer with fixed dims cannot take the produced dims", i);
          else run |= FZ_BIT(MD_INVALID_ARGUMENT);
        }
        run |= (size_refusals(s, bytes) & ~FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT)) | pressure(s, 2 * bytes);
        if (bytes == UINT64_MAX || bytes > s->mem_limit) run |= size_refusals(s, bytes);
        if (out_pool[i] == 1 && bytes > out_cap[i] && out_cap[i] != UINT64_MAX) {
          ex->sufficient[i] = 0;
          short_out = 1;
        }
      }
      if (gf) {
        run |= FZ_BIT(MD_GENERAL_FAILURE);
        if (short_out) run |= FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE);
      } else if (short_out) {
        run |= FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE);
        why(pr, "SPEC 4, 8.1: an output pool is too small for what is produced");
      } else {
        run |= FZ_BIT(MD_NONE);
      }
    }
  }
  ex->set = run;
}

static fz_set exec_async_set(const fz_pred *pr) {
  /* SPEC 8.9: execute_async returns what validation finds; what needs the kernels may come
   * from wait_event, or at once (the trace format's "refuse at once or fail at the wait"). */
  fz_set at_once = pr->ex.set & ~(FZ_BIT(MD_NONE) | FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE));
  return at_once | FZ_BIT(MD_NONE);
}

void mdc_fz_predict(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, fz_pred *pr) {
  memset(pr, 0, sizeof *pr);
  mdc_call c = (mdc_call)k->call;
  uint16_t client = FZ_NOBODY, obj;
  const char *what;
  if (mdc_calls[c].flags & MDC_CALL_CLIENT) {
    uint8_t t = ref3(s, &mdc_fz_arg(k, MDC_A_CLIENT)->ref, MDC_OBJ_CLIENT, FZ_NOBODY, &client, &what);
    GATE(pr, t, MD_INVALID_ARGUMENT, "SPEC 5: client: %s", what);
  }
  switch (c) {
    case MDC_CALL_GET_CAPABILITIES:
    case MDC_CALL_OPEN_CLIENT:
      pr->set |= FZ_BIT(MD_NONE);
      return;
    case MDC_CALL_GET_SUPPORTED_OPERATIONS: {
      const fz_model *m = &p->models[mdc_fz_arg(k, MDC_A_MODEL)->model];
      if (mdc_fz_model_class(m) == FZ_MODEL_VALID) {
        pr->set |= FZ_BIT(MD_NONE);
        pr->supported_known = 1;
        pr->n_supported = m->n_ops;
      } else {
        pr->set |= FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
      }
      return;
    }
    case MDC_CALL_CLOSE_CLIENT: {
      pr->set |= FZ_BIT(MD_NONE);
      pr->leaks_known = s->o[client].racy ? 0 : 0xf;
      for (unsigned i = 0; i < s->n; i++) {
        const fz_obj *o = &s->o[i];
        if (o->kind == MDC_OBJ_CLIENT || o->owner != client || o->live == FZ_UNMADE || o->live == FZ_DEAD) continue;
        uint8_t bit = o->kind == MDC_OBJ_TOKEN ? 1 : o->kind == MDC_OBJ_PREPARED ? 2 : 4;
        if (o->live == FZ_MAYBE_LIVE) {
          pr->leaks_known &= (uint8_t)~bit;
          if (o->kind == MDC_OBJ_TOKEN) pr->leaks_known &= (uint8_t)~8u;
          continue;
        }
        if (o->kind == MDC_OBJ_TOKEN) {
          pr->leaks.buffers++;
          if (o->tok.bytes_known && !o->tok.writers && !o->tok.racy) pr->leaks.bytes += o->tok.bytes;
          else pr->leaks_known &= (uint8_t)~8u;
        } else if (o->kind == MDC_OBJ_PREPARED) {
          pr->leaks.prepared_models++;
        } else {
          pr->leaks.events++;
        }
      }
      return;
    }
    case MDC_CALL_PREPARE_MODEL: {
      const fz_model *m = &p->models[mdc_fz_arg(k, MDC_A_MODEL)->model];
      if (mdc_fz_model_class(m) == FZ_MODEL_VALID) pr->set |= FZ_BIT(MD_NONE);
      else pr->set |= FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
      return;
    }
    case MDC_CALL_RELEASE_PREPARED_MODEL:
      GATE(pr, ref3(s, &mdc_fz_arg(k, MDC_A_PREPARED)->ref, MDC_OBJ_PREPARED, client, &obj, &what),
           MD_INVALID_ARGUMENT, "SPEC 5: prepared model: %s", what);
      pr->set |= FZ_BIT(MD_NONE);
      return;
    case MDC_CALL_ALLOCATE:
      predict_allocate(s, p, k, client, pr);
      return;
    case MDC_CALL_COPY_FROM:
    case MDC_CALL_COPY_TO:
    case MDC_CALL_FREE_BUFFER:
      GATE(pr, ref3(s, &mdc_fz_arg(k, MDC_A_TOKEN)->ref, MDC_OBJ_TOKEN, client, &obj, &what),
           MD_INVALID_ARGUMENT, "SPEC 5: token: %s", what);
      if (c == MDC_CALL_FREE_BUFFER) pr->set |= FZ_BIT(MD_NONE);
      else if (c == MDC_CALL_COPY_FROM) predict_copy_from(s, k, obj, pr);
      else predict_copy_to(s, k, obj, pr);
      return;
    case MDC_CALL_EXECUTE:
      predict_exec(s, p, k, client, pr);
      if (pr->ex.validated != FZ_NO) pr->set |= pr->ex.set;
      return;
    case MDC_CALL_EXECUTE_ASYNC:
      predict_exec(s, p, k, client, pr);
      if (pr->ex.validated != FZ_NO) pr->set |= exec_async_set(pr);
      return;
    case MDC_CALL_WAIT_EVENT: {
      uint8_t ev = ref3(s, &mdc_fz_arg(k, MDC_A_EVENT)->ref, MDC_OBJ_EVENT, client, &obj, &what);
      pr->ev_valid = ev;
      GATE(pr, ev, MD_INVALID_ARGUMENT, "SPEC 4, 5: event: %s", what);
      pr->sure = ev == FZ_YES && s->o[client].live == FZ_LIVE;
      pr->ex = s->o[obj].ev.ex;
      pr->set |= pr->ex.set;
      const fz_arg *to = mdc_fz_arg(k, MDC_A_TIMEOUT_NS);
      if (to && to->u64 != UINT64_MAX) pr->set |= FZ_BIT(MD_MISSED_DEADLINE_TRANSIENT);
      return;
    }
    default:
      pr->set |= FZ_BIT(MD_NONE);
      return;
  }
}

/* ---- applying outcomes ---------------------------------------------------------------------- */

static fz_obj *obj_of(fz_state *s, const fz_ref *r, mdc_obj kind) {
  if (r->how != FZ_REF_OBJ || (r->forge && r->v) || r->obj >= s->n) return NULL;
  fz_obj *o = &s->o[r->obj];
  return o->kind == kind && (o->live == FZ_LIVE || o->live == FZ_MAYBE_LIVE) ? o : NULL;
}

/* An object the call may have killed: dead on success. */
static void kill(fz_obj *o, md_status got) {
  if (o && got == MD_NONE) o->live = FZ_DEAD;
}

/* Every device output of an execution: after a failure uninitialized (certainly when the
 * request passed validation, maybe when validation itself failed). */
static void outputs_after(fz_state *s, const fz_exec *ex, md_status got, int validated) {
  for (unsigned i = 0; i < ex->n_out; i++) {
    if (ex->out_tok[i] == FZ_NOBODY) continue;
    fz_tok *t = &s->o[ex->out_tok[i]].tok;
    if (got == MD_NONE) {
      t->inited = FZ_YES;
      t->content = FZ_NO;
      if (ex->shapes_known) {
        t->cur = ex->out[i];
        t->cur_known = FZ_YES;
        t->bytes = mdc_fz_bytes(t->type, &t->cur);
        t->bytes_known = t->bytes != UINT64_MAX;
      } else {
        t->cur_known = FZ_MAYBE;
        t->bytes_known = 0;
      }
    } else if (got == MD_OUTPUT_INSUFFICIENT_SIZE || !validated) {
      /* SPEC 4 names OUTPUT_INSUFFICIENT_SIZE apart from "every other failure". */
      if (t->inited == FZ_YES) t->inited = FZ_MAYBE;
    } else {
      t->inited = FZ_NO;
    }
  }
}

/* A write to token obj while async executions use it: their waits may fail (SPEC 6). */
static void disturb_events(fz_state *s, uint16_t tok) {
  for (unsigned i = 0; i < s->n; i++) {
    fz_obj *o = &s->o[i];
    if (o->kind != MDC_OBJ_EVENT || o->live == FZ_UNMADE || o->live == FZ_DEAD) continue;
    for (unsigned j = 0; j < FZ_MAX_ARGS; j++)
      if (o->ev.ex.out_tok[j] == tok || o->ev.ex.in_tok[j] == tok) {
        o->ev.ex.set |= FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_NONE);
        o->ev.ex.shapes_known = 0;
        if (o->ev.ex.out_tok[j] == tok) o->ev.ex.disturbed = 1;
      }
  }
}

static void new_obj(fz_state *s, const mdc_fz_prog *p, const fz_call *k, uint16_t client, md_status got) {
  if (k->obj >= FZ_MAX_OBJS) return;
  while (s->n <= k->obj) {
    memset(&s->o[s->n], 0, sizeof s->o[s->n]);
    s->o[s->n].kind = p->objs[s->n].kind;
    s->o[s->n].owner = FZ_NOBODY;
    s->n++;
  }
  fz_obj *o = &s->o[k->obj];
  o->kind = (uint8_t)mdc_fz_produces((mdc_call)k->call);
  o->live = got == MD_NONE ? FZ_LIVE : FZ_UNMADE;
  o->owner = o->kind == MDC_OBJ_CLIENT ? FZ_NOBODY : client;
}

void mdc_fz_apply(fz_state *s, const mdc_fz_prog *p, const fz_call *k, const fz_pred *pr, md_status got) {
  mdc_call c = (mdc_call)k->call;
  uint16_t client = (mdc_calls[c].flags & MDC_CALL_CLIENT) ? mdc_fz_call_client(p, k) : FZ_NOBODY;
  if (mdc_fz_produces(c) != MDC_OBJ_NONE) new_obj(s, p, k, client, got);
  fz_obj *o;
  switch (c) {
    case MDC_CALL_CLOSE_CLIENT:
      if (got != MD_NONE || !(o = obj_of(s, &mdc_fz_arg(k, MDC_A_CLIENT)->ref, MDC_OBJ_CLIENT))) return;
      o->live = FZ_DEAD;
      for (unsigned i = 0; i < s->n; i++)
        if (s->o[i].kind != MDC_OBJ_CLIENT && s->o[i].owner == client && s->o[i].live != FZ_UNMADE)
          s->o[i].live = FZ_DEAD;
      return;
    case MDC_CALL_PREPARE_MODEL:
      if (k->obj < s->n) {
        s->o[k->obj].model = mdc_fz_arg(k, MDC_A_MODEL)->model;
        s->o[k->obj].model_class = (uint8_t)mdc_fz_model_class(&p->models[s->o[k->obj].model]);
      }
      return;
    case MDC_CALL_RELEASE_PREPARED_MODEL:
      kill(obj_of(s, &mdc_fz_arg(k, MDC_A_PREPARED)->ref, MDC_OBJ_PREPARED), got);
      return;
    case MDC_CALL_FREE_BUFFER:
      kill(obj_of(s, &mdc_fz_arg(k, MDC_A_TOKEN)->ref, MDC_OBJ_TOKEN), got);
      return;
    case MDC_CALL_ALLOCATE:
      if (got == MD_NONE && k->obj < s->n) {
        press(s, pr->tok.bytes_known ? pr->tok.bytes : UINT64_MAX);
        s->o[k->obj].tok = pr->tok;
        if (!pr->tok.bytes_known) s->o[k->obj].tok.cur_known = FZ_MAYBE;
      }
      return;
    case MDC_CALL_COPY_FROM: {
      o = obj_of(s, &mdc_fz_arg(k, MDC_A_TOKEN)->ref, MDC_OBJ_TOKEN);
      if (!o || client == FZ_NOBODY || o->owner != client) return;
      fz_tok *t = &o->tok;
      uint16_t id = (uint16_t)(o - s->o);
      int sure = o->live == FZ_LIVE && s->o[client].live == FZ_LIVE && !t->racy;
      if (t->readers || t->writers) disturb_events(s, id);
      if (got == MD_NONE || got == MD_RESOURCE_EXHAUSTED_TRANSIENT) press(s, pr->bytes);
      if (got == MD_NONE) {
        t->inited = sure ? FZ_YES : FZ_MAYBE;
        t->cur = pr->dims;
        t->cur_known = sure ? FZ_YES : FZ_MAYBE;
        const fz_mem *src = &mdc_fz_arg(k, MDC_A_SRC)->mem;
        t->content = sure ? FZ_YES : FZ_NO;
        t->content_seed = src->seed;
        t->content_bytes = pr->bytes;
        t->bytes = pr->bytes;
        t->bytes_known = (uint8_t)sure;
      } else if (sure) {
        t->inited = FZ_NO;   /* SPEC 3: any failure leaves it uninitialized */
      } else if (t->inited != FZ_NO) {
        t->inited = FZ_MAYBE;
      }
      return;
    }
    case MDC_CALL_EXECUTE:
    case MDC_CALL_EXECUTE_ASYNC: {
      if (pr->ex.validated != FZ_NO) {
        /* outputs and the temporaries a driver may keep: twice the outputs, or all of it */
        uint64_t b = 0;
        for (unsigned i = 0; i < pr->ex.n_out && pr->ex.shapes_known; i++) {
          uint64_t x = mdc_fz_bytes(MD_TENSOR_FLOAT32, &pr->ex.out[i]);
          b = x == UINT64_MAX || b + 2 * x < b ? UINT64_MAX : b + 2 * x;
        }
        press(s, pr->ex.shapes_known ? b : UINT64_MAX);
      }
      /* SPEC 4: every failure but OUTPUT_INSUFFICIENT_SIZE uninitializes the request's device
       * outputs. Certain unless the request was refused (INVALID_ARGUMENT: which arguments are
       * its device outputs then is the driver's reading); any other failure passed every
       * INVALID_ARGUMENT rule, role checks included, whatever the model could not decide. */
      int validated = (pr->ex.validated != FZ_NO || pr->ex.past_ia) && got != MD_INVALID_ARGUMENT;
      if (c == MDC_CALL_EXECUTE || got != MD_NONE) {
        for (unsigned i = 0; i < pr->ex.n_out; i++)
          if (pr->ex.out_tok[i] != FZ_NOBODY && (s->o[pr->ex.out_tok[i]].tok.readers || s->o[pr->ex.out_tok[i]].tok.writers))
            disturb_events(s, pr->ex.out_tok[i]);
        outputs_after(s, &pr->ex, got, validated);
        return;
      }
      /* An async execution in flight: its outputs are written, its inputs read, until waited. */
      if (k->obj < s->n) {
        s->o[k->obj].ev.ex = pr->ex;
        s->o[k->obj].ev.ex.disturbed = 0;
        s->o[k->obj].ev.prepared = mdc_fz_arg(k, MDC_A_PREPARED)->ref.obj;
      }
      /* It may finish at any time before its wait (a driver may run it before execute_async
       * returns): until then a token it writes may be initialized or not, at its old dims or the
       * produced ones, with its old content or the new (SPEC 4). */
      for (unsigned i = 0; i < pr->ex.n_out; i++)
        if (pr->ex.out_tok[i] != FZ_NOBODY) {
          fz_tok *t = &s->o[pr->ex.out_tok[i]].tok;
          if (t->readers || t->writers) disturb_events(s, pr->ex.out_tok[i]);
          t->writers++;
          t->inited = FZ_MAYBE;
          t->cur_known = FZ_MAYBE;
          t->content = FZ_NO;
        }
      for (unsigned i = 0; i < FZ_MAX_ARGS; i++)
        if (pr->ex.in_tok[i] != FZ_NOBODY) s->o[pr->ex.in_tok[i]].tok.readers++;
      return;
    }
    case MDC_CALL_WAIT_EVENT: {
      o = obj_of(s, &mdc_fz_arg(k, MDC_A_EVENT)->ref, MDC_OBJ_EVENT);
      if (!o || got == MD_MISSED_DEADLINE_TRANSIENT) return;
      /* An INVALID_ARGUMENT the execution could not have returned is about the handles. */
      if (got == MD_INVALID_ARGUMENT && (!pr->sure || !(pr->ex.set & FZ_BIT(MD_INVALID_ARGUMENT)))) {
        /* Refused because another lane consumed it: dead. Refused whatever its state (another
         * client's handle, a forgery): it says nothing about the event. */
        if (!pr->sure && pr->ev_valid == FZ_MAYBE && o->live == FZ_MAYBE_LIVE) o->live = FZ_DEAD;
        /* ... or it is the status of an execution that may fail so, which consumed the event:
         * its fate is not known (a racing lane's view; sequentially `sure` decides) */
        else if (!pr->sure && (pr->ex.set & FZ_BIT(MD_INVALID_ARGUMENT)) && o->live == FZ_LIVE) o->live = FZ_MAYBE_LIVE;
        return;
      }
      o->live = FZ_DEAD;
      const fz_exec *ex = &o->ev.ex;
      for (unsigned i = 0; i < ex->n_out; i++)
        if (ex->out_tok[i] != FZ_NOBODY && s->o[ex->out_tok[i]].tok.writers) s->o[ex->out_tok[i]].tok.writers--;
      for (unsigned i = 0; i < FZ_MAX_ARGS; i++)
        if (ex->in_tok[i] != FZ_NOBODY && s->o[ex->in_tok[i]].tok.readers) s->o[ex->in_tok[i]].tok.readers--;
      outputs_after(s, ex, got, 1);
      if (ex->disturbed)
        for (unsigned i = 0; i < ex->n_out; i++)
          if (ex->out_tok[i] != FZ_NOBODY) {
            /* the other write may have come after this execution finished, or before */
            fz_tok *t = &s->o[ex->out_tok[i]].tok;
            t->inited = FZ_MAYBE;
            t->cur_known = FZ_MAYBE;
            t->content = FZ_NO;
            t->bytes_known = 0;
          }
      return;
    }
    default:
      return;
  }
}

/* ---- concurrent blocks ---------------------------------------------------------------------- */

enum { EFF_KILL = 1, EFF_WRITE = 2, EFF_READ = 4, EFF_CLOSE = 8, EFF_MAKE = 16 };

/* What each call of block b may do to each object, by lane: eff[lane][obj]. */
static void block_effects(const mdc_fz_prog *p, const fz_block *b, uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS]) {
  memset(eff, 0, sizeof(uint8_t) * FZ_MAX_LANES * FZ_MAX_OBJS);
#define MARK(ref, e)                                                          \
  do {                                                                        \
    const fz_ref *r_ = (ref);                                                 \
    if (r_->how == FZ_REF_OBJ && !(r_->forge && r_->v) && r_->obj < FZ_MAX_OBJS) \
      eff[k->lane % FZ_MAX_LANES][r_->obj] |= (e);                            \
  } while (0)
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &p->calls[i];
    if (mdc_fz_produces((mdc_call)k->call) != MDC_OBJ_NONE && mdc_fz_arg(k, MDC_A_CLIENT))
      MARK(&mdc_fz_arg(k, MDC_A_CLIENT)->ref, EFF_MAKE);
    switch ((mdc_call)k->call) {
      case MDC_CALL_CLOSE_CLIENT: MARK(&mdc_fz_arg(k, MDC_A_CLIENT)->ref, EFF_KILL | EFF_CLOSE); break;
      case MDC_CALL_RELEASE_PREPARED_MODEL: MARK(&mdc_fz_arg(k, MDC_A_PREPARED)->ref, EFF_KILL); break;
      case MDC_CALL_FREE_BUFFER: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_KILL); break;
      case MDC_CALL_COPY_FROM: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_WRITE); break;
      case MDC_CALL_COPY_TO: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_READ); break;
      case MDC_CALL_WAIT_EVENT: MARK(&mdc_fz_arg(k, MDC_A_EVENT)->ref, EFF_KILL); break;
      case MDC_CALL_EXECUTE:
      case MDC_CALL_EXECUTE_ASYNC: {
        const fz_request *rq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
        for (unsigned j = 0; j < rq->n_pools; j++) {
          if (!rq->pools[j].is_token) continue;
          int written = 0;
          for (unsigned o = 0; o < rq->n_out; o++) written |= !rq->out[o].no_value && rq->out[o].pool == j;
          MARK(&rq->pools[j].token, written ? EFF_WRITE : EFF_READ);
        }
        break;
      }
      default: break;
    }
  }
#undef MARK
}

void mdc_fz_block_view(const fz_state *s0, const mdc_fz_prog *p, const fz_block *b, uint8_t lane, fz_state *out) {
  *out = *s0;
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  for (unsigned i = 0; i < out->n; i++) {
    uint8_t others = 0, mine = eff[lane % FZ_MAX_LANES][i];
    for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
      if (l != lane) others |= eff[l][i];
    fz_obj *o = &out->o[i];
    if ((others & EFF_KILL) && o->live == FZ_LIVE) o->live = FZ_MAYBE_LIVE;
    if (others & EFF_MAKE) o->racy = 1;
    if (others & EFF_CLOSE) {
      for (unsigned j = 0; j < out->n; j++)
        if (out->o[j].owner == i && out->o[j].live == FZ_LIVE) out->o[j].live = FZ_MAYBE_LIVE;
    }
    if (o->kind == MDC_OBJ_TOKEN && ((others & EFF_WRITE) || ((mine & EFF_WRITE) && (others & EFF_READ)))) {
      /* What a racing reader may see whole: the contents before the block and every copy_from's
       * source (none when an execution writes it: its contents are not modelled). */
      fz_tok *t = &o->tok;
      t->n_alt = 0;
      int known = 1;
      if (t->inited == FZ_YES && t->content == FZ_YES) t->alt[t->n_alt++] = (fz_content){t->content_seed, t->content_bytes};
      else if (t->inited != FZ_NO) known = 0;
      for (unsigned c = b->first; c < b->end && known; c++) {
        const fz_call *k = &p->calls[c];
        const fz_arg *ta = mdc_fz_arg(k, MDC_A_TOKEN);
        if (k->call == MDC_CALL_COPY_FROM && ta && ta->ref.how == FZ_REF_OBJ && !(ta->ref.forge && ta->ref.v) &&
            ta->ref.obj == i) {
          const fz_mem *m = &mdc_fz_arg(k, MDC_A_SRC)->mem;
          if (t->n_alt < sizeof t->alt / sizeof t->alt[0]) t->alt[t->n_alt++] = (fz_content){m->seed, m->size};
        } else if ((k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_EXECUTE_ASYNC)) {
          const fz_request *rq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
          for (unsigned q = 0; q < rq->n_out; q++) {
            const fz_rarg *ra = &rq->out[q];
            if (!ra->no_value && ra->pool < rq->n_pools && rq->pools[ra->pool].is_token &&
                rq->pools[ra->pool].token.how == FZ_REF_OBJ && rq->pools[ra->pool].token.obj == i)
              known = 0;
          }
        }
      }
      if (!known) t->n_alt = 0;
      o->tok.racy = 1;
      o->tok.content = FZ_NO;
      if (o->tok.inited != FZ_NO || (others & EFF_WRITE)) o->tok.inited = FZ_MAYBE;
      o->tok.cur_known = FZ_MAYBE;
      o->tok.bytes_known = 0;
    }
  }
}

/* What the calls of block b released, by their statuses got: kills[obj] the successful kills
 * (close_client, release, free_buffer, a wait that consumed the event), closes[obj] the
 * successful close_clients, unsure[obj] the events a wait may have consumed with INVALID_ARGUMENT
 * (s: the state before the block). */
static void block_kills(const fz_state *s, const mdc_fz_prog *p, const fz_block *b, const md_status *got,
                        unsigned kills[FZ_MAX_OBJS], unsigned closes[FZ_MAX_OBJS], uint8_t unsure[FZ_MAX_OBJS]) {
  memset(kills, 0, sizeof(unsigned) * FZ_MAX_OBJS);
  memset(closes, 0, sizeof(unsigned) * FZ_MAX_OBJS);
  memset(unsure, 0, FZ_MAX_OBJS);
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &p->calls[i];
    md_status st = got[i - b->first];
    const fz_ref *r = NULL;
    switch ((mdc_call)k->call) {
      case MDC_CALL_CLOSE_CLIENT: r = &mdc_fz_arg(k, MDC_A_CLIENT)->ref; break;
      case MDC_CALL_RELEASE_PREPARED_MODEL: r = &mdc_fz_arg(k, MDC_A_PREPARED)->ref; break;
      case MDC_CALL_FREE_BUFFER: r = &mdc_fz_arg(k, MDC_A_TOKEN)->ref; break;
      case MDC_CALL_WAIT_EVENT:
        r = &mdc_fz_arg(k, MDC_A_EVENT)->ref;
        /* INVALID_ARGUMENT is a refused handle, or the status of an execution that may fail
         * with it (a request valid at issue, not at run time), which consumes the event: which
         * one, racing lanes do not tell. */
        if (st == MD_INVALID_ARGUMENT && r->how == FZ_REF_OBJ && !(r->forge && r->v) && r->obj < s->n &&
            (s->o[r->obj].ev.ex.set & FZ_BIT(MD_INVALID_ARGUMENT)))
          unsure[r->obj] = 1;
        if (st == MD_INVALID_ARGUMENT || st == MD_MISSED_DEADLINE_TRANSIENT) r = NULL;
        else st = MD_NONE;   /* consumed, whatever the execution returned */
        break;
      default: break;
    }
    if (!r || r->how != FZ_REF_OBJ || (r->forge && r->v) || r->obj >= FZ_MAX_OBJS || st != MD_NONE) continue;
    kills[r->obj]++;
    if (k->call == MDC_CALL_CLOSE_CLIENT) closes[r->obj]++;
  }
}

int mdc_fz_block_merge(fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, char *why_out, size_t whylen) {
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  fz_state before = *s;
  /* Objects made inside the block come from the lane that made them. */
  uint16_t n = s->n;
  for (unsigned l = 0; l < b->lanes; l++)
    if (lanes[l].n > n) n = lanes[l].n;
  for (unsigned i = s->n; i < n; i++) {
    memset(&s->o[i], 0, sizeof s->o[i]);
    s->o[i].kind = p->objs[i].kind;
    s->o[i].owner = FZ_NOBODY;
    const fz_call *k = &p->calls[p->objs[i].call];
    if (k->block && p->calls[p->objs[i].call].lane < b->lanes && i < lanes[k->lane].n) s->o[i] = lanes[k->lane].o[i];
  }
  s->n = n;
  /* Successful kills per object: at most one (SPEC 5, 6: a handle dies once). */
  unsigned kills[FZ_MAX_OBJS], closes[FZ_MAX_OBJS];
  uint8_t unsure[FZ_MAX_OBJS];
  block_kills(&before, p, b, got, kills, closes, unsure);
  for (unsigned i = 0; i < s->n && i < before.n; i++) {
    if (kills[i] > 1) {
      snprintf(why_out, whylen, "SPEC 5, 6: object %u (%s) was released %u times by racing calls", i,
               mdc_obj_name((mdc_obj)s->o[i].kind), kills[i]);
      return -1;
    }
  }
  /* The state after: each object as its one writer left it, uncertain where lanes raced. */
  for (unsigned i = 0; i < before.n; i++) {
    fz_obj *o = &s->o[i];
    unsigned touched = 0, last = 0;
    uint8_t all = 0;
    for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
      if (eff[l][i]) touched++, last = l, all |= eff[l][i];
    int owner_closed = o->owner < FZ_MAX_OBJS && closes[o->owner];
    if (kills[i] || owner_closed) {
      o->live = FZ_DEAD;
      continue;
    }
    if (touched == 1 && !(o->kind == MDC_OBJ_TOKEN && before.o[i].tok.racy)) {
      fz_obj keep = lanes[last].o[i];
      *o = keep;
      if (o->live == FZ_MAYBE_LIVE && before.o[i].live == FZ_LIVE) o->live = FZ_LIVE;
      o->tok.racy = 0;
      continue;
    }
    if (!touched) {
      /* Untouched here, but events of the block may have started async work on it. */
      for (unsigned l = 0; l < b->lanes; l++) {
        const fz_tok *t = &lanes[l].o[i].tok;
        if (o->kind == MDC_OBJ_TOKEN && (t->writers != o->tok.writers || t->readers != o->tok.readers)) {
          o->tok.writers = t->writers > o->tok.writers ? t->writers : o->tok.writers;
          o->tok.readers = t->readers > o->tok.readers ? t->readers : o->tok.readers;
        }
      }
      continue;
    }
    if (o->kind == MDC_OBJ_TOKEN && (all & (EFF_WRITE))) {
      o->tok.inited = FZ_MAYBE;
      o->tok.cur_known = FZ_MAYBE;
      o->tok.content = FZ_NO;
      o->tok.bytes_known = 0;
    }
    if (o->kind == MDC_OBJ_TOKEN) {
      unsigned w = 0, r = 0;
      for (unsigned l = 0; l < b->lanes; l++) {
        const fz_tok *t = &lanes[l].o[i].tok;
        w += t->writers > before.o[i].tok.writers ? t->writers - before.o[i].tok.writers : 0;
        r += t->readers > before.o[i].tok.readers ? t->readers - before.o[i].tok.readers : 0;
      }
      o->tok.writers = (uint8_t)(before.o[i].tok.writers + w);
      o->tok.readers = (uint8_t)(before.o[i].tok.readers + r);
      o->tok.racy = 0;
    }
  }
  /* An object made in the block for a client the block closed was live at the close (its
   * creation returned NONE: the close released it and counts it) or was never made: dead. */
  for (unsigned i = before.n; i < s->n; i++)
    if (s->o[i].kind != MDC_OBJ_CLIENT && s->o[i].owner < FZ_MAX_OBJS && closes[s->o[i].owner] &&
        s->o[i].live != FZ_UNMADE)
      s->o[i].live = FZ_DEAD;
  for (unsigned i = 0; i < s->n; i++) {
    s->o[i].racy = 0;
    s->o[i].tok.n_alt = 0;
    if (i < FZ_MAX_OBJS && unsure[i] && !kills[i] && s->o[i].live == FZ_LIVE) s->o[i].live = FZ_MAYBE_LIVE;
  }
  return 0;
}

int mdc_fz_block_leaks(const fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, const md_leak_report *reports, char *why_out, size_t whylen) {
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  unsigned kills[FZ_MAX_OBJS], closes[FZ_MAX_OBJS];
  uint8_t unsure[FZ_MAX_OBJS];
  block_kills(s, p, b, got, kills, closes, unsure);
  uint16_t n = s->n;
  for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
    if (lanes[l].n > n) n = lanes[l].n;
  for (unsigned ci = b->first; ci < b->end; ci++) {
    const fz_call *kc = &p->calls[ci];
    if (kc->call != MDC_CALL_CLOSE_CLIENT || got[ci - b->first] != MD_NONE) continue;
    const fz_ref *cr = &mdc_fz_arg(kc, MDC_A_CLIENT)->ref;
    if (cr->how != FZ_REF_OBJ || (cr->forge && cr->v) || cr->obj >= s->n || s->o[cr->obj].kind != MDC_OBJ_CLIENT)
      continue;
    uint16_t c = cr->obj;
    /* [lo, hi] of buffers, prepared models, events; the bytes while every counted buffer's size
     * is known */
    unsigned lo[3] = {0}, hi[3] = {0};
    uint64_t bytes = 0;
    int bytes_known = 1;
    for (unsigned i = 0; i < n && i < FZ_MAX_OBJS; i++) {
      int made_here = i >= s->n;
      uint8_t kind = made_here ? p->objs[i].kind : s->o[i].kind;
      if (kind == MDC_OBJ_CLIENT) continue;
      unsigned x = kind == MDC_OBJ_TOKEN ? 0 : kind == MDC_OBJ_PREPARED ? 1 : 2;
      const fz_tok *t;
      int maybe;
      if (made_here) {
        /* made in the block: counted exactly when its creation returned NONE (contract: a
         * creation racing close_client either made a live object the close released, or was
         * refused and made nothing) */
        unsigned mk = p->objs[i].call;
        const fz_call *k = &p->calls[mk];
        if (mk < b->first || mk >= b->end || got[mk - b->first] != MD_NONE || mdc_fz_call_client(p, k) != c) continue;
        if (k->lane >= b->lanes || i >= lanes[k->lane].n) continue;
        /* a trace may name it in another lane (`when: produced`): freed there, as below */
        if (kills[i]) continue;
        t = &lanes[k->lane].o[i].tok;
        maybe = unsure[i];
      } else {
        const fz_obj *o = &s->o[i];
        if (o->owner != c || o->live == FZ_UNMADE || o->live == FZ_DEAD) continue;
        /* freed, released or consumed by a wait in the block: before the close (a handle dies
         * once; the close's report counts what it released) */
        if (kills[i]) continue;
        maybe = o->live == FZ_MAYBE_LIVE || unsure[i];
        t = &o->tok;
        if (kind == MDC_OBJ_TOKEN) {
          uint8_t all = 0;
          for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++) all |= eff[l][i];
          if ((all & EFF_WRITE) || t->writers || t->racy) bytes_known = 0;
        }
      }
      hi[x]++;
      if (!maybe) lo[x]++;
      if (kind == MDC_OBJ_TOKEN) {
        if (maybe || !t->bytes_known) bytes_known = 0;
        else bytes += t->bytes;
      }
    }
    const md_leak_report *rep = &reports[ci - b->first];
    const unsigned got_n[3] = {rep->buffers, rep->prepared_models, rep->events};
    static const char *const names[3] = {"buffers", "prepared_models", "events"};
    for (unsigned x = 0; x < 3; x++) {
      if (got_n[x] >= lo[x] && got_n[x] <= hi[x]) continue;
      int w = snprintf(why_out, whylen, "close_client of block %u reported %s %u, the lanes were told of ",
                       (unsigned)(b - p->blocks), names[x], got_n[x]);
      if (w >= 0 && (size_t)w < whylen) {
        if (lo[x] == hi[x]) snprintf(why_out + w, whylen - (size_t)w, "%u", lo[x]);
        else snprintf(why_out + w, whylen - (size_t)w, "%u to %u", lo[x], hi[x]);
      }
      return (int)ci;
    }
    if (bytes_known && lo[0] == hi[0] && rep->bytes != bytes) {
      snprintf(why_out, whylen, "close_client of block %u reported bytes %" PRIu64 ", the lanes left %" PRIu64,
               (unsigned)(b - p->blocks), rep->bytes, bytes);
      return (int)ci;
    }
  }
  return -1;
}
