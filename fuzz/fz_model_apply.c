/* fz_model_apply.c - the state model after a call (fz_model.h mdc_fz_apply): how the status the
 * driver returned moves the state: objects made and killed, a buffer's dims, initialization
 * and contents, async executions in flight and the device memory the run may hold. */
#include "fz_model.h"

#include <string.h>

/* The run may now hold `bytes` more of device memory (UINT64_MAX: whatever is left). */
static void press(fz_state *s, uint64_t bytes) {
  if (bytes == UINT64_MAX || s->pressure + bytes > s->mem_limit) s->pressure = s->mem_limit;
  else s->pressure += bytes + 512;   /* and an allocator's rounding and red zones */
}

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

/* copy_from: on success the buffer holds the source's bytes at its dims (certainly when nothing
 * races it); any failure leaves it uninitialized (SPEC 3). */
static void apply_copy_from(fz_state *s, const fz_call *k, uint16_t client, const fz_pred *pr, md_status got) {
  fz_obj *o = obj_of(s, &mdc_fz_arg(k, MDC_A_TOKEN)->ref, MDC_OBJ_TOKEN);
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
}

/* execute, execute_async: the memory it takes; a finished execution's outputs, or an async one
 * in flight until its wait. */
static void apply_exec(fz_state *s, const fz_call *k, const fz_pred *pr, md_status got) {
  mdc_call c = (mdc_call)k->call;
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
}

/* wait_event: the event consumed (unless the wait timed out or was refused), its execution's
 * outputs as it ended. */
static void apply_wait(fz_state *s, const fz_call *k, const fz_pred *pr, md_status got) {
  fz_obj *o = obj_of(s, &mdc_fz_arg(k, MDC_A_EVENT)->ref, MDC_OBJ_EVENT);
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
    case MDC_CALL_COPY_FROM:
      apply_copy_from(s, k, client, pr, got);
      return;
    case MDC_CALL_EXECUTE:
    case MDC_CALL_EXECUTE_ASYNC:
      apply_exec(s, k, pr, got);
      return;
    case MDC_CALL_WAIT_EVENT:
      apply_wait(s, k, pr, got);
      return;
    default:
      return;
  }
}
