/* fz_eval.c - the value oracle's reference evaluator: what a model's outputs must hold for
 * known input values, computed here, independently of any driver (fz_eval.h). */
#include "fz_eval.h"

#include <string.h>

static int known_dims(const fz_dims *d, uint32_t *count) {
  if (!d->present || d->rank == 0 || d->rank > MD_MAX_RANK) return 0;
  uint64_t n = 1;
  for (unsigned i = 0; i < d->rank; i++) {
    if (d->d[i] == 0) return 0;
    n *= d->d[i];
    if (n > FZ_EVAL_MAX) return 0;
  }
  *count = (uint32_t)n;
  return 1;
}

static int same_dims(const fz_dims *a, const fz_dims *b) {
  if (a->rank != b->rank) return 0;
  for (unsigned i = 0; i < a->rank && i < FZ_MAX_RANK; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

uint32_t mdc_fz_eval_count(const fz_model *m, unsigned io, int is_out) {
  unsigned n = is_out ? m->n_out : m->n_in;
  if (io >= n) return 0;
  unsigned o = is_out ? m->out[io] : m->in[io];
  if (o >= m->n_operands || m->opnd[o].type != MD_TENSOR_FLOAT32) return 0;
  uint32_t c = 0;
  return known_dims(&m->opnd[o].dims, &c) ? c : 0;
}

/* An INT32 scalar CONSTANT_COPY operand's value (the fused activation), or -1. */
static int32_t const_i32(const fz_model *m, unsigned o) {
  if (o >= m->n_operands) return -1;
  const fz_operand *op = &m->opnd[o];
  if (op->type != MD_INT32 || op->lifetime != MD_CONSTANT_COPY || op->length != 4 ||
      (uint64_t)op->offset + 4 > m->n_values)
    return -1;
  int32_t v;
  memcpy(&v, m->values + op->offset, 4);
  return v;
}

static float act(int32_t a, float x) {
  switch (a) {
    case 1: return x < 0.0f ? 0.0f : x;
    case 2: return x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    case 3: return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
    default: return x;
  }
}

int mdc_fz_eval(const fz_model *m, const float *const *in, float *const *out, fz_eval_scratch *s) {
  if (m->n_operands > FZ_MAX_OPERANDS || m->n_in > FZ_MAX_IO || m->n_out > FZ_MAX_IO || m->n_ops > FZ_MAX_OPS)
    return -1;
  uint8_t have[FZ_MAX_OPERANDS] = {0};
  const float *val[FZ_MAX_OPERANDS] = {0};
  uint32_t cnt[FZ_MAX_OPERANDS] = {0};
  for (unsigned i = 0; i < m->n_in; i++) {
    unsigned o = m->in[i];
    if (o >= m->n_operands || m->opnd[o].lifetime != MD_SUBGRAPH_INPUT || have[o]) return -1;
    if (!(cnt[o] = mdc_fz_eval_count(m, i, 0))) return -1;
    val[o] = in[i];
    have[o] = 1;
  }
  for (unsigned k = 0; k < m->n_ops; k++) {
    const fz_operation *op = &m->op[k];
    if (op->n_out != 1 || op->out[0] >= m->n_operands) return -1;
    unsigned oo = op->out[0];
    const fz_operand *od = &m->opnd[oo];
    if (have[oo] || od->type != MD_TENSOR_FLOAT32 ||
        (od->lifetime != MD_TEMPORARY_VARIABLE && od->lifetime != MD_SUBGRAPH_OUTPUT))
      return -1;
    uint32_t n = 0;
    if (!known_dims(&od->dims, &n)) return -1;
    const float *a = NULL, *b = NULL;
    int32_t fused = 0;
    if (op->type == MD_OP_RELU) {
      if (op->n_in != 1 || op->in[0] >= m->n_operands || !have[op->in[0]] || cnt[op->in[0]] != n ||
          !same_dims(&m->opnd[op->in[0]].dims, &od->dims))
        return -1;
      a = val[op->in[0]];
      fused = 1;
    } else if (op->type == MD_OP_ADD || op->type == MD_OP_SUB || op->type == MD_OP_MUL) {
      if (op->n_in != 3) return -1;
      for (unsigned j = 0; j < 2; j++) {
        unsigned x = op->in[j];
        if (x >= m->n_operands || !have[x] || cnt[x] != n || !same_dims(&m->opnd[x].dims, &od->dims)) return -1;
      }
      a = val[op->in[0]];
      b = val[op->in[1]];
      fused = const_i32(m, op->in[2]);
      if (fused < 0 || fused > 3) return -1;
    } else {
      return -1;
    }
    float *r = s->v[k];
    for (uint32_t i = 0; i < n; i++) {
      float x = a[i];
      if (op->type == MD_OP_ADD) x = a[i] + b[i];
      else if (op->type == MD_OP_SUB) x = a[i] - b[i];
      else if (op->type == MD_OP_MUL) x = a[i] * b[i];
      r[i] = act(fused, x);
    }
    val[oo] = r;
    cnt[oo] = n;
    have[oo] = 1;
  }
  for (unsigned j = 0; j < m->n_out; j++) {
    unsigned o = m->out[j];
    if (o >= m->n_operands || !have[o] || m->opnd[o].lifetime != MD_SUBGRAPH_OUTPUT) return -1;
    if (cnt[o] != mdc_fz_eval_count(m, j, 1)) return -1;
    memcpy(out[j], val[o], cnt[o] * sizeof(float));
  }
  return 0;
}

int mdc_fz_eval_same(float want, float got) {
  /* A NaN result's payload and sign are not fixed (IEEE 754 leaves which operand's comes out
   * open), nor what a clamp makes of one: any value is taken where NaN is expected. +0 and -0
   * compare equal. */
  return want != want || want == got;
}
