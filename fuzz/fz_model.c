/* fz_model.c - the state model's ground (fz_model.h): status sets, dims, which models the
 * oracle judges (VALID) and the dims their operations produce, and the objects of a state.
 * What SPEC allows each call is in fz_model_predict.c and fz_model_exec.c, how an outcome moves
 * the state in fz_model_apply.c, concurrent blocks in fz_model_blocks.c. */
#include "fz_model.h"

#include <stdio.h>
#include <string.h>

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
  /* objects are cleared as they are made (new_obj, fz_model_apply.c) */
  s->n = 0;
  s->pressure = 0;
  s->mem_limit = mem_limit;
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
