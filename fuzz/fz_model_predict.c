/* fz_model_predict.c - the state model's predictions: what SPEC allows each call of a program
 * to return, given what the calls before it returned (fz_model.h mdc_fz_predict). Each rule
 * cites its SPEC section in the `why` it leaves for a finding. Executions' requests are judged
 * in fz_model_exec.c; the rules both share are in fz_model_int.h. */
#include "fz_model_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations above this may be refused (GENERAL_FAILURE or RESOURCE_EXHAUSTED_*) by a driver
 * that cannot serve them (SPEC 3); below it they must work on the fuzz device. */
#define BIG_BYTES (128ull << 10)

/* ---- the rules predictions share (fz_model_int.h) ------------------------------------------- */

void mdc_fz__why(fz_pred *pr, const char *fmt, ...) {
  if (pr->why[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pr->why, sizeof pr->why, fmt, ap);
  va_end(ap);
}

static uint8_t live3(uint8_t live) {
  return live == FZ_LIVE ? FZ_YES : live == FZ_MAYBE_LIVE ? FZ_MAYBE : FZ_NO;
}

uint8_t mdc_fz__ref3(const fz_state *s, const fz_ref *r, mdc_obj kind, uint16_t owner, uint16_t *obj,
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

static uint64_t file_size(const fz_mem *m) { return m->file_size ? m->file_size : m->offset + m->size; }

/* SPEC 2 / 8.2: a descriptor that breaks the validation rules is INVALID_ARGUMENT. */
uint8_t mdc_fz__mem_valid(const fz_mem *m, int use) {
  if (m->fd != FZ_FD_REAL) return FZ_NO;
  if (m->kind < MD_MEM_ASHMEM || m->kind > MD_MEM_HARDWARE_BUFFER) return FZ_NO;
  if (m->prot & ~(uint32_t)(PROT_READ | PROT_WRITE)) return FZ_NO;
  if (m->kind == MD_MEM_HARDWARE_BUFFER) return use == FZ_USE_COPY ? FZ_NO : m->prot ? FZ_YES : FZ_MAYBE;
  if (m->size == 0) return FZ_NO;
  if (m->kind == MD_MEM_MMAP_FD && m->offset + m->size > file_size(m)) return FZ_NO;
  /* prot 0 has "only READ/WRITE bits" (SPEC 2) but grants no access: a driver may refuse it as
   * invalid (the reference driver does) or accept a pool no argument uses. */
  return m->prot ? FZ_YES : FZ_MAYBE;
}

/* Sizes a driver may refuse: no size at all (dims whose byte size does not fit 64 bits:
 * INVALID_ARGUMENT, SPEC 8.17 v1.2, or as beyond the device), beyond the device
 * (RESOURCE_EXHAUSTED_PERSISTENT or GENERAL_FAILURE), big (also RESOURCE_EXHAUSTED_TRANSIENT),
 * else none. */
fz_set mdc_fz__size_refusals(const fz_state *s, uint64_t bytes) {
  if (bytes == UINT64_MAX)
    return FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) | FZ_BIT(MD_GENERAL_FAILURE);
  if (bytes > s->mem_limit)
    return FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) | FZ_BIT(MD_GENERAL_FAILURE);
  if (bytes > BIG_BYTES)
    return FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) | FZ_BIT(MD_RESOURCE_EXHAUSTED_PERSISTENT) |
           FZ_BIT(MD_GENERAL_FAILURE);
  return 0;
}

/* RESOURCE_EXHAUSTED_TRANSIENT when what the run may already hold and `bytes` more may not fit
 * (device memory is also taken by executions' temporaries a driver keeps). */
fz_set mdc_fz__pressure(const fz_state *s, uint64_t bytes) {
  uint64_t sum = s->pressure + (bytes > s->mem_limit ? s->mem_limit : bytes);
  return sum + (4u << 10) > s->mem_limit ? FZ_BIT(MD_RESOURCE_EXHAUSTED_TRANSIENT) : 0;
}

/* ---- predictions per call ------------------------------------------------------------------- */

static uint64_t tok_bytes(const fz_tok *t, const fz_dims *d) {
  return t->scalar ? mdc_fz_type_size(t->type) : mdc_fz_bytes(t->type, d);
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
    uint8_t t = mdc_fz__ref3(s, &list->refs.v[i], MDC_OBJ_PREPARED, client, &prep[i], &what);
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
  fz_set refuse = mdc_fz__size_refusals(s, bytes);
  if (bytes == UINT64_MAX || bytes > s->mem_limit) {
    pr->set |= refuse;
    mdc_fz__why(pr, "SPEC 8.3: an allocation larger than the device's memory");
    return;
  }
  pr->set |= refuse | mdc_fz__pressure(s, bytes) | FZ_BIT(MD_NONE);
}

static void predict_copy_from(const fz_state *s, const fz_call *k, uint16_t t, fz_pred *pr) {
  const fz_tok *tk = &s->o[t].tok;
  const fz_mem *src = &mdc_fz_arg(k, MDC_A_SRC)->mem;
  const fz_arg *da = mdc_fz_arg(k, MDC_A_DIMS);
  fz_dims dims = da ? da->dims : (fz_dims){0};
  GATE(pr, mdc_fz__mem_valid(src, FZ_USE_COPY), MD_INVALID_ARGUMENT, "SPEC 2, 8.2: src descriptor is invalid");
  if (!(src->prot & PROT_READ)) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    mdc_fz__why(pr, "SPEC 2: src is not readable");
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
  pr->set |= FZ_BIT(MD_NONE) | mdc_fz__size_refusals(s, bytes) | mdc_fz__pressure(s, bytes);
  if (fz_tok_busy(tk) || tk->readers) {
    /* SPEC 6: a write racing with another use returns NONE or an error. */
    pr->set |= FZ_BIT(MD_GENERAL_FAILURE) | FZ_BIT(MD_INVALID_ARGUMENT);
  }
}

static void predict_copy_to(const fz_state *s, const fz_call *k, uint16_t t, fz_pred *pr) {
  const fz_tok *tk = &s->o[t].tok;
  const fz_mem *dst = &mdc_fz_arg(k, MDC_A_DST)->mem;
  GATE(pr, mdc_fz__mem_valid(dst, FZ_USE_COPY), MD_INVALID_ARGUMENT, "SPEC 2, 8.2: dst descriptor is invalid");
  if (!(dst->prot & PROT_WRITE)) {
    pr->set |= FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
    mdc_fz__why(pr, "SPEC 2: dst is not writable");
    return;
  }
  if (fz_tok_busy(tk)) {
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

/* close_client: NONE, and the leak report of what the client certainly left live (SPEC 5, 8.10). */
static void predict_close_client(const fz_state *s, uint16_t client, fz_pred *pr) {
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
    uint8_t t = mdc_fz__ref3(s, &mdc_fz_arg(k, MDC_A_CLIENT)->ref, MDC_OBJ_CLIENT, FZ_NOBODY, &client, &what);
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
    case MDC_CALL_CLOSE_CLIENT:
      predict_close_client(s, client, pr);
      return;
    case MDC_CALL_PREPARE_MODEL: {
      const fz_model *m = &p->models[mdc_fz_arg(k, MDC_A_MODEL)->model];
      if (mdc_fz_model_class(m) == FZ_MODEL_VALID) pr->set |= FZ_BIT(MD_NONE);
      else pr->set |= FZ_BIT(MD_NONE) | FZ_BIT(MD_INVALID_ARGUMENT) | FZ_BIT(MD_GENERAL_FAILURE);
      return;
    }
    case MDC_CALL_RELEASE_PREPARED_MODEL:
      GATE(pr, mdc_fz__ref3(s, &mdc_fz_arg(k, MDC_A_PREPARED)->ref, MDC_OBJ_PREPARED, client, &obj, &what),
           MD_INVALID_ARGUMENT, "SPEC 5: prepared model: %s", what);
      pr->set |= FZ_BIT(MD_NONE);
      return;
    case MDC_CALL_ALLOCATE:
      predict_allocate(s, p, k, client, pr);
      return;
    case MDC_CALL_COPY_FROM:
    case MDC_CALL_COPY_TO:
    case MDC_CALL_FREE_BUFFER:
      GATE(pr, mdc_fz__ref3(s, &mdc_fz_arg(k, MDC_A_TOKEN)->ref, MDC_OBJ_TOKEN, client, &obj, &what),
           MD_INVALID_ARGUMENT, "SPEC 5: token: %s", what);
      if (c == MDC_CALL_FREE_BUFFER) pr->set |= FZ_BIT(MD_NONE);
      else if (c == MDC_CALL_COPY_FROM) predict_copy_from(s, k, obj, pr);
      else predict_copy_to(s, k, obj, pr);
      return;
    case MDC_CALL_EXECUTE:
      mdc_fz__predict_exec(s, p, k, client, pr);
      if (pr->ex.validated != FZ_NO) pr->set |= pr->ex.set;
      return;
    case MDC_CALL_EXECUTE_ASYNC:
      mdc_fz__predict_exec(s, p, k, client, pr);
      if (pr->ex.validated != FZ_NO) pr->set |= exec_async_set(pr);
      return;
    case MDC_CALL_WAIT_EVENT: {
      uint8_t ev = mdc_fz__ref3(s, &mdc_fz_arg(k, MDC_A_EVENT)->ref, MDC_OBJ_EVENT, client, &obj, &what);
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
