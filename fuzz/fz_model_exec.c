/* fz_model_exec.c - the state model's prediction for an execution (execute, execute_async):
 * request validation (SPEC 4) and, for the models the oracle judges (VALID), what the run
 * gives: its statuses, the produced shapes and which outputs are sufficient. Steps in the order
 * a driver checks: the prepared model, the pools, each argument, tokens written twice, inputs
 * initialized, then the run. */
#include "fz_model_int.h"

#include <string.h>
#include <sys/mman.h>

/* One execution's prediction in the making: what its steps share. */
typedef struct exec_pred {
  const fz_state *s;
  const fz_request *rq;
  const fz_model *m;
  fz_pred *pr;
  fz_exec *ex;
  uint16_t client, pobj;
  int lenient;                 /* the run's outcome is beyond the model: any status it may give */
  int racy;                    /* a token it uses is written by another call meanwhile */
  uint16_t pool_tok[FZ_MAX_REQ_POOLS];   /* each token pool's object */
  fz_dims in_dims[FZ_MAX_ARGS], req_out[FZ_MAX_ARGS];   /* the dims each argument combines to */
  uint64_t out_cap[FZ_MAX_ARGS];         /* a memory output's length (UINT64_MAX: none) */
  uint8_t out_pool[FZ_MAX_ARGS];         /* an output's pool: 1 a memory, 2 a token, 0 neither */
} exec_pred;

/* Before any check: no outputs known, and the output tokens the request may name (a racing
 * write disturbs them whatever validation finds). */
static void exec_begin(exec_pred *x) {
  fz_exec *ex = x->ex;
  const fz_request *rq0 = x->rq;
  const char *what;
  memset(ex, 0, sizeof *ex);
  for (unsigned i = 0; i < FZ_MAX_ARGS; i++) ex->out_tok[i] = ex->in_tok[i] = FZ_NOBODY;
  ex->validated = FZ_NO;
  ex->n_out = rq0->n_out;
  for (unsigned i = 0; i < rq0->n_out; i++) {
    const fz_rarg *ra = &rq0->out[i];
    uint16_t t;
    if (!ra->no_value && ra->pool < rq0->n_pools && rq0->pools[ra->pool].is_token &&
        mdc_fz__ref3(x->s, &rq0->pools[ra->pool].token, MDC_OBJ_TOKEN, x->client, &t, &what) != FZ_NO)
      ex->out_tok[i] = t;
  }
}

/* The request's pools: each token a live buffer of the client, each memory a valid descriptor. */
static int exec_pools(exec_pred *x) {
  const fz_request *rq = x->rq;
  fz_pred *pr = x->pr;
  const char *what;
  for (unsigned j = 0; j < rq->n_pools; j++) {
    const fz_rpool *pl = &rq->pools[j];
    x->pool_tok[j] = FZ_NOBODY;
    if (pl->is_token) {
      GATE_STEP(pr, mdc_fz__ref3(x->s, &pl->token, MDC_OBJ_TOKEN, x->client, &x->pool_tok[j], &what),
                MD_INVALID_ARGUMENT, "SPEC 4, 5, 8.7: request pool %u: token %s", j, what);
    } else {
      GATE_STEP(pr, mdc_fz__mem_valid(&pl->mem, FZ_USE_IO), MD_INVALID_ARGUMENT,
                "SPEC 2, 8.2: request pool %u: invalid descriptor", j);
      if (pl->mem.kind == MD_MEM_HARDWARE_BUFFER) x->lenient = 1;
    }
  }
  return 0;
}

/* Argument i (an input, or an output when is_out) in token pool ra->pool: its role, its dims
 * against the buffer's (*c: the combined dims). */
static int arg_token(exec_pred *x, int is_out, unsigned i, const fz_rarg *ra, fz_dims *c) {
  fz_pred *pr = x->pr;
  const char *io = is_out ? "output" : "input";
  uint16_t t = x->pool_tok[ra->pool];
  const fz_tok *tk = &x->s->o[t].tok;
  GATE_STEP(pr, ra->offset == 0 && ra->length == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 2: %s %u: a token argument has offset and length 0", io, i);
  int has_role = 0;
  for (unsigned r = 0; r < tk->n_roles; r++)
    has_role |= tk->roles[r].prepared == x->pobj && tk->roles[r].is_out == is_out && tk->roles[r].index == i;
  GATE_STEP(pr, has_role ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 4: %s %u: the token was not allocated for this role", io, i);
  if (is_out) {
    GATE_STEP(pr, mdc_fz_combine(c, &tk->init, c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
              "SPEC 4, 8.6: output %u: dims must combine with the buffer's initial dims", i);
    x->ex->out_tok[i] = t;
    x->out_pool[i] = 2;
    if (tk->readers || fz_tok_busy(tk)) x->racy = 1;
  } else {
    if (tk->cur_known == FZ_YES) {
      GATE_STEP(pr, mdc_fz_combine(c, &tk->cur, c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
                "SPEC 4, 8.6: input %u: dims must combine with the buffer's current dims", i);
    } else {
      pr->set |= FZ_BIT(MD_INVALID_ARGUMENT);
      x->lenient = 1;
    }
    x->ex->in_tok[i] = t;
    if (fz_tok_busy(tk)) x->racy = 1;
  }
  return 0;
}

/* Argument i in memory pool ra->pool, of operand o: its access, its window, its length against
 * the size of its dims c. 1: a hardware buffer, whose dims the prediction does not keep. */
static int arg_mem(exec_pred *x, int is_out, unsigned i, const fz_rarg *ra, const fz_operand *o, const fz_dims *c) {
  fz_pred *pr = x->pr;
  const char *io = is_out ? "output" : "input";
  const fz_mem *mem = &x->rq->pools[ra->pool].mem;
  uint32_t need = is_out ? PROT_WRITE : PROT_READ;
  if (!(mem->prot & need)) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    mdc_fz__why(pr, "SPEC 2: %s %u: pool %u is not %s", io, i, ra->pool, is_out ? "writable" : "readable");
    return -1;
  }
  if (mem->kind == MD_MEM_HARDWARE_BUFFER) {
    GATE_STEP(pr, ra->offset == 0 && ra->length == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
              "SPEC 2: %s %u: a hardware buffer argument has offset and length 0", io, i);
    if (is_out) x->out_pool[i] = 1;
    return 1;
  }
  GATE_STEP(pr, (uint64_t)ra->offset + ra->length <= mem->size ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 2: %s %u: offset + length past the end of pool %u", io, i, ra->pool);
  int scalar = mdc_fz_type_scalar(o->type);
  int kn = scalar || mdc_fz_known(c);
  uint64_t bytes = kn ? (scalar ? mdc_fz_type_size(o->type) : mdc_fz_bytes(o->type, c)) : 0;
  if (!is_out) {
    GATE_STEP(pr, kn ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT, "SPEC 4: input %u: dims not fully known", i);
    GATE_STEP(pr, ra->length == bytes ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
              "SPEC 2, 8.1: input %u: length must equal the byte size of its dims", i);
  } else {
    GATE_STEP(pr, !(kn && ra->length && ra->length > bytes) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
              "SPEC 8.1: output %u: a length larger than the byte size of its known dims", i);
    x->out_cap[i] = ra->length;
    x->out_pool[i] = 1;
  }
  return 0;
}

/* Argument a of the request (inputs first, then outputs): its pool, rank and dims against the
 * model's operand, then by the kind of its pool. */
static int exec_arg(exec_pred *x, unsigned a) {
  const fz_request *rq = x->rq;
  const fz_model *m = x->m;
  fz_pred *pr = x->pr;
  int is_out = a >= rq->n_in;
  unsigned i = is_out ? a - rq->n_in : a;
  const fz_rarg *ra = is_out ? &rq->out[i] : &rq->in[i];
  const char *io = is_out ? "output" : "input";
  if (ra->no_value) {
    x->lenient = 1;
    return 0;
  }
  GATE_STEP(pr, ra->pool < rq->n_pools ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 4: %s %u: pool index out of range", io, i);
  GATE_STEP(pr, ra->dims.rank <= MD_MAX_RANK ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 1: %s %u: rank over MD_MAX_RANK", io, i);
  uint8_t oi = is_out ? m->out[i] : m->in[i];
  if (oi >= m->n_operands) {
    x->lenient = 1;
    return 0;
  }
  const fz_operand *o = &m->opnd[oi];
  int scalar = mdc_fz_type_scalar(o->type);
  GATE_STEP(pr, !(scalar && ra->dims.rank) ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 4: %s %u: a scalar takes no dims", io, i);
  fz_dims c;
  GATE_STEP(pr, mdc_fz_combine(&o->dims, &ra->dims, &c) == 0 ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
            "SPEC 4: %s %u: dims do not combine with the model's", io, i);
  int rc = rq->pools[ra->pool].is_token ? arg_token(x, is_out, i, ra, &c) : arg_mem(x, is_out, i, ra, o, &c);
  if (rc) return rc < 0 ? -1 : 0;
  if (is_out) x->req_out[i] = c;
  else x->in_dims[i] = c;
  return 0;
}

/* SPEC 4: a token written by the request appears nowhere else in it (by value: a "forgery"
 * that flips no bit or adds 0 is the same handle). */
static int exec_aliases(exec_pred *x) {
  const fz_request *rq = x->rq;
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
      GATE_STEP(x->pr, same ? FZ_NO : FZ_YES, MD_INVALID_ARGUMENT,
                "SPEC 4: a token used as an output appears again in the request");
    }
  }
  return 0;
}

/* SPEC 4, 8.5: inputs must be initialized; checked after every INVALID_ARGUMENT rule. An input
 * token's dims are its current ones. */
static int exec_inputs_inited(exec_pred *x) {
  const fz_request *rq = x->rq;
  fz_exec *ex = x->ex;
  x->ex->past_ia = 1;
  for (unsigned i = 0; i < rq->n_in; i++) {
    if (ex->in_tok[i] == FZ_NOBODY) continue;
    const fz_tok *tk = &x->s->o[ex->in_tok[i]].tok;
    GATE_STEP(x->pr, tk->inited, MD_GENERAL_FAILURE, "SPEC 4, 8.5: input %u: the token is not initialized", i);
    if (tk->inited == FZ_YES && tk->cur_known == FZ_YES) x->in_dims[i] = tk->cur;
    else x->lenient = 1;
    /* combine once more with the model's and the argument's dims */
    uint8_t oi = x->m->in[i];
    fz_dims c;
    if (mdc_fz_combine(&x->m->opnd[oi].dims, &rq->in[i].dims, &c) || mdc_fz_combine(&c, &x->in_dims[i], &x->in_dims[i]))
      x->lenient = 1;
  }
  return 0;
}

/* The run's statuses when the operations produced dims prod: each output's dims against the
 * request's and its pool's size, and the memory it takes. */
static fz_set exec_outputs(exec_pred *x, const fz_dims *prod) {
  const fz_state *s = x->s;
  fz_pred *pr = x->pr;
  fz_exec *ex = x->ex;
  fz_set run = 0;
  int gf = 0, short_out = 0;
  ex->shapes_known = 1;
  for (unsigned i = 0; i < x->rq->n_out; i++) {
    ex->out[i] = prod[i];
    ex->sufficient[i] = 1;
    fz_dims c;
    uint64_t bytes = mdc_fz_bytes(MD_TENSOR_FLOAT32, &prod[i]);
    if (mdc_fz_combine(&x->req_out[i], &prod[i], &c)) {
      gf = 1;
      if (x->out_pool[i] == 2)
        mdc_fz__why(pr, "SPEC 3: output %u: a buffer with fixed dims cannot take the produced dims", i);
      else
        run |= FZ_BIT(MD_INVALID_ARGUMENT);
    }
    run |= (mdc_fz__size_refusals(s, bytes) & ~FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT)) |
           mdc_fz__pressure(s, 2 * bytes);
    if (bytes == UINT64_MAX || bytes > s->mem_limit) run |= mdc_fz__size_refusals(s, bytes);
    if (x->out_pool[i] == 1 && bytes > x->out_cap[i] && x->out_cap[i] != UINT64_MAX) {
      ex->sufficient[i] = 0;
      short_out = 1;
    }
  }
  if (gf) {
    run |= FZ_BIT(MD_GENERAL_FAILURE);
    if (short_out) run |= FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE);
  } else if (short_out) {
    run |= FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE);
    mdc_fz__why(pr, "SPEC 4, 8.1: an output pool is too small for what is produced");
  } else {
    run |= FZ_BIT(MD_NONE);
  }
  return run;
}

/* Past validation: what the run gives. It needs device memory for its inputs before it finds
 * anything else (SPEC 8.3: not what is free now is RESOURCE_EXHAUSTED_TRANSIENT). */
static fz_set exec_run(exec_pred *x) {
  const fz_state *s = x->s;
  fz_pred *pr = x->pr;
  fz_set run = 0;
  uint64_t in_bytes = 0;
  for (unsigned i = 0; i < x->rq->n_in; i++) {
    uint64_t b = mdc_fz_bytes(MD_TENSOR_FLOAT32, &x->in_dims[i]);
    if (b != UINT64_MAX) in_bytes += b;
  }
  run |= mdc_fz__pressure(s, in_bytes);
  if (x->lenient || x->racy)
    return run | FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE) |
           FZ_BIT(MD_OUTPUT_INSUFFICIENT_SIZE) | FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) |
           FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT);
  fz_dims prod[FZ_MAX_ARGS];
  uint64_t largest;
  int r = mdc_fz_infer(x->m, x->in_dims, prod, &largest);
  /* SPEC 8.3: the operations run in order, each result allocated on the device, and SPEC sets
   * no order between running out of memory and finding that dims disagree: a result past
   * the device (or big, or with the device full) may be refused before the run finds any
   * fault of the shapes. (Found by a 30-minute shapes campaign: [4096] + [4096,1] broadcast
   * to a 64 MiB temporary on a 1 MiB device before a RELU's output rank disagreed.) */
  run |= (mdc_fz__size_refusals(s, largest) & ~FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT)) | mdc_fz__pressure(s, largest);
  if (largest == UINT64_MAX || largest > s->mem_limit) run |= mdc_fz__size_refusals(s, largest);
  if (r == -1) {
    /* Inputs whose shapes the operation cannot take: the request's fault or the run's. */
    run |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    mdc_fz__why(pr, "SPEC 7: the inputs' dims do not broadcast");
  } else if (r == -2) {
    run |= FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_INVALID_ARGUMENT);
    mdc_fz__why(pr, "SPEC 4: produced dims disagree with the model's declared output dims");
  } else {
    run |= exec_outputs(x, prod);
  }
  return run;
}

void mdc_fz__predict_exec(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, uint16_t client, fz_pred *pr) {
  exec_pred x = {.s = s, .rq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request], .pr = pr, .ex = &pr->ex,
                 .client = client};
  exec_begin(&x);
  const char *what;
  GATE(pr, mdc_fz__ref3(s, &mdc_fz_arg(k, MDC_A_PREPARED)->ref, MDC_OBJ_PREPARED, client, &x.pobj, &what),
       MD_INVALID_ARGUMENT, "SPEC 5: prepared model: %s", what);
  x.m = mdc_fz_prepared_model(s, p, x.pobj);
  GATE(pr, x.rq->n_in == x.m->n_in && x.rq->n_out == x.m->n_out ? FZ_YES : FZ_NO, MD_INVALID_ARGUMENT,
       "SPEC 4: argument counts must match the model");
  x.lenient = s->o[x.pobj].model_class != FZ_MODEL_VALID;
  if (exec_pools(&x)) return;
  for (unsigned i = 0; i < FZ_MAX_ARGS; i++) x.out_cap[i] = UINT64_MAX;
  for (unsigned a = 0; a < (unsigned)(x.rq->n_in + x.rq->n_out); a++)
    if (exec_arg(&x, a)) return;
  if (exec_aliases(&x) || exec_inputs_inited(&x)) return;
  x.ex->validated = pr->set ? FZ_MAYBE : FZ_YES;
  x.ex->set = exec_run(&x);
}
