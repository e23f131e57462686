/* fz_encode.c - a program into fuzzer bytes: every choice in its literal form (fz_codec.h), so
 * the bytes decode to the same program whatever the decoder's state model predicts. Models and
 * requests must be numbered in the order calls first use them (as the decoder and the trace
 * reader number them). */
#include <string.h>

#include "fz_codec.h"

typedef struct enc {
  uint8_t *p;
  size_t cap, n;
  int overflow;
} enc;

static void put8(enc *e, uint8_t v) {
  if (e->n < e->cap) e->p[e->n] = v;
  else e->overflow = 1;
  e->n++;
}
static void put32(enc *e, uint32_t v) {
  for (int b = 0; b < 4; b++) put8(e, (uint8_t)(v >> (8 * b)));
}
static void put64(enc *e, uint64_t v) {
  put32(e, (uint32_t)v);
  put32(e, (uint32_t)(v >> 32));
}
static void putf(enc *e, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put32(e, u);
}

static void enc_ref(enc *e, const fz_ref *r) {
  if (r->how == FZ_REF_ZERO || (r->how == FZ_REF_LITERAL && r->v == 0)) {
    put8(e, FZ_SEL_ZERO);
  } else if (r->how == FZ_REF_LITERAL) {
    put8(e, FZ_SEL_LITERAL);
    put64(e, r->v);
  } else if (r->forge == FZ_FORGE_NONE) {
    put8(e, FZ_SEL_INDEX);
    put8(e, (uint8_t)r->obj);
  } else {
    put8(e, r->forge == FZ_FORGE_XOR ? FZ_SEL_XOR : FZ_SEL_ADD);
    put8(e, (uint8_t)r->obj);
    put64(e, r->v);
  }
}

static void enc_dims_lit(enc *e, const fz_dims *d) {
  put8(e, d->rank);
  for (unsigned i = 0; i < d->rank; i++) put32(e, d->d[i]);
}

static void enc_mem(enc *e, const fz_mem *m) {
  put8(e, FZ_LIT);
  put8(e, m->fd);
  put32(e, (uint32_t)m->kind);
  put32(e, m->prot);
  put32(e, (uint32_t)m->size);
  put32(e, (uint32_t)m->offset);
  put32(e, (uint32_t)m->file_size);
  put32(e, m->seed);
}

static void enc_model(enc *e, const fz_model *m) {
  put8(e, FZ_LIT);
  put8(e, m->n_operands);
  for (unsigned i = 0; i < m->n_operands; i++) {
    const fz_operand *o = &m->opnd[i];
    put32(e, (uint32_t)o->type);
    put32(e, (uint32_t)o->lifetime);
    enc_dims_lit(e, &o->dims);
    putf(e, o->scale);
    put32(e, (uint32_t)o->zero_point);
    put32(e, o->offset);
    put32(e, o->length);
  }
  put8(e, m->n_ops);
  for (unsigned k = 0; k < m->n_ops; k++) {
    const fz_operation *op = &m->op[k];
    put32(e, (uint32_t)op->type);
    put8(e, op->n_in);
    for (unsigned j = 0; j < op->n_in; j++) put8(e, op->in[j]);
    put8(e, op->n_out);
    for (unsigned j = 0; j < op->n_out; j++) put8(e, op->out[j]);
  }
  put8(e, m->n_in);
  for (unsigned j = 0; j < m->n_in; j++) put8(e, m->in[j]);
  put8(e, m->n_out);
  for (unsigned j = 0; j < m->n_out; j++) put8(e, m->out[j]);
  put8(e, m->n_values);
  for (unsigned j = 0; j < m->n_values; j++) put8(e, m->values[j]);
}

static void enc_request(enc *e, const fz_request *r) {
  put8(e, FZ_LIT);
  put8(e, r->n_in);
  put8(e, r->n_out);
  put8(e, r->n_pools);
  for (unsigned j = 0; j < r->n_pools; j++) {
    put8(e, r->pools[j].is_token);
    if (r->pools[j].is_token) enc_ref(e, &r->pools[j].token);
    else enc_mem(e, &r->pools[j].mem);
  }
  for (unsigned a = 0; a < (unsigned)(r->n_in + r->n_out); a++) {
    const fz_rarg *ra = a < r->n_in ? &r->in[a] : &r->out[a - r->n_in];
    put8(e, ra->no_value);
    put8(e, ra->pool);
    put32(e, ra->offset);
    put32(e, ra->length);
    enc_dims_lit(e, &ra->dims);
  }
}

size_t mdc_fz_encode(mdc_fz_target t, const mdc_fz_prog *p, uint8_t *out, size_t cap) {
  enc e = {.p = out, .cap = cap};
  put32(&e, p->seed);
  if (t == FZ_CONCURRENCY) put8(&e, p->stall ? (uint8_t)(0x80 | (p->stall - 1)) : 0);
  unsigned cur_block = 0, models = 0;
  for (unsigned i = 0; i < p->n_calls; i++) {
    const fz_call *k = &p->calls[i];
    unsigned blk = t == FZ_CONCURRENCY ? k->block : 0;
    if (blk != cur_block) {
      if (cur_block) put8(&e, FZ_OP_BLOCK);
      if (blk) {
        put8(&e, FZ_OP_BLOCK);
        put8(&e, (uint8_t)(p->blocks[blk - 1].lanes - 2));
      }
      cur_block = blk;
    }
    put8(&e, (uint8_t)(FZ_OP_LIT + k->call));
    if (blk) {
      put8(&e, k->lane);
      put8(&e, (uint8_t)(k->pre | (k->pre_arg << 2)));
    }
    uint8_t order[MDC_CALL_MAX_ARGS];
    unsigned na = fz_arg_order((mdc_call)k->call, order);
    for (unsigned j = 0; j < na; j++) {
      const mdc_call_arg *ca = &mdc_calls[k->call].args[order[j]];
      const fz_arg *a = &k->a[order[j]];
      switch (mdc_args[ca->id].type) {
        case MDC_T_DEVICE:
        case MDC_T_TEXT: break;
        case MDC_T_HANDLE: enc_ref(&e, &a->ref); break;
        case MDC_T_HANDLES:
          if (!a->present) {
            put8(&e, FZ_ABSENT);
            break;
          }
          put8(&e, (uint8_t)(FZ_COUNT_LIT + a->refs.n));
          for (unsigned r = 0; r < a->refs.n; r++) enc_ref(&e, &a->refs.v[r]);
          break;
        case MDC_T_ROLES:
          if (!a->present) {
            put8(&e, FZ_ABSENT);
            break;
          }
          put8(&e, (uint8_t)(FZ_COUNT_LIT + a->roles.n));
          for (unsigned r = 0; r < a->roles.n; r++) {
            put8(&e, FZ_LIT);
            put8(&e, a->roles.r[r].model);
            put8(&e, a->roles.r[r].io);
            putf(&e, a->roles.r[r].p);
          }
          break;
        case MDC_T_MODEL:
          if (a->model < models) {
            put8(&e, FZ_ABSENT);
            put8(&e, a->model);
          } else if (a->model == models && models < FZ_MAX_MODELS) {
            enc_model(&e, &p->models[a->model]);
            models++;
          } else {
            return 0;   /* not numbered in order of first use */
          }
          break;
        case MDC_T_DESC:
        case MDC_T_DIMS:
          if (!a->present || !a->dims.rank) {
            put8(&e, FZ_ABSENT);
            break;
          }
          if (ca->id == MDC_A_DIMS) put8(&e, 3);   /* "dims given" (fz_decode.c) */
          put8(&e, FZ_LIT);
          enc_dims_lit(&e, &a->dims);
          break;
        case MDC_T_MEMORY: enc_mem(&e, &a->mem); break;
        case MDC_T_REQUEST: enc_request(&e, &p->requests[a->request]); break;
        case MDC_T_U64:
          if (!a->present) {
            put8(&e, FZ_ABSENT);
            break;
          }
          put8(&e, FZ_LIT);
          put64(&e, a->u64);
          break;
      }
    }
  }
  return e.overflow ? 0 : e.n;
}
