/* fz_run_call.c - the harness core's one call (fz_run_int.h mdc_fz__run_call): the call's
 * arguments in the ABI's terms, the driver called, and what it returned judged against the
 * state model's prediction. */
#include "fz_run_int.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* ---- a call's arguments in the ABI's terms -------------------------------------------------- */

static uint64_t value(const fz_runner *r, const fz_ref *x) {
  if (x->how == FZ_REF_ZERO) return 0;
  if (x->how == FZ_REF_LITERAL) return x->v;
  uint64_t v = x->obj < FZ_MAX_OBJS ? r->vals[x->obj] : 0;
  if (x->forge == FZ_FORGE_XOR) v ^= x->v;
  else if (x->forge == FZ_FORGE_ADD) v += x->v;
  return v;
}

static void to_dims(const fz_dims *d, uint32_t *out) { memcpy(out, d->d, sizeof d->d); }

/* What md_model an fz_model is, in caller storage. */
typedef struct abi_model {
  md_model m;
  md_operand opnd[FZ_MAX_OPERANDS];
  uint32_t dims[FZ_MAX_OPERANDS][FZ_MAX_RANK];
  md_operation op[FZ_MAX_OPS];
  uint32_t op_in[FZ_MAX_OPS][FZ_MAX_OP_IN], op_out[FZ_MAX_OPS][FZ_MAX_OP_OUT];
  uint32_t in[FZ_MAX_IO], out[FZ_MAX_IO];
} abi_model;

static void model_abi(const fz_model *fm, abi_model *a) {
  memset(a, 0, sizeof *a);
  for (unsigned i = 0; i < fm->n_operands; i++) {
    const fz_operand *o = &fm->opnd[i];
    to_dims(&o->dims, a->dims[i]);
    a->opnd[i] = (md_operand){.type = (md_operand_type)o->type, .rank = o->dims.rank, .dims = o->dims.rank ? a->dims[i] : NULL,
                              .scale = o->scale, .zero_point = o->zero_point, .lifetime = (md_lifetime)o->lifetime,
                              .offset = o->offset, .length = o->length};
  }
  for (unsigned k = 0; k < fm->n_ops; k++) {
    const fz_operation *op = &fm->op[k];
    for (unsigned j = 0; j < op->n_in; j++) a->op_in[k][j] = op->in[j];
    for (unsigned j = 0; j < op->n_out; j++) a->op_out[k][j] = op->out[j];
    a->op[k] = (md_operation){.type = (md_operation_type)op->type, .n_inputs = op->n_in, .inputs = a->op_in[k],
                              .n_outputs = op->n_out, .outputs = a->op_out[k]};
  }
  for (unsigned j = 0; j < fm->n_in; j++) a->in[j] = fm->in[j];
  for (unsigned j = 0; j < fm->n_out; j++) a->out[j] = fm->out[j];
  a->m = (md_model){.n_operands = fm->n_operands, .operands = a->opnd, .n_operations = fm->n_ops, .operations = a->op,
                    .n_inputs = fm->n_in, .inputs = a->in, .n_outputs = fm->n_out, .outputs = a->out,
                    .operand_values = fm->values, .operand_values_size = fm->n_values};
}

typedef struct abi_request {
  md_request q;
  md_request_arg in[FZ_MAX_ARGS], out[FZ_MAX_ARGS];
  uint32_t in_dims[FZ_MAX_ARGS][FZ_MAX_RANK], out_dims[FZ_MAX_ARGS][FZ_MAX_RANK];
  md_request_pool pools[FZ_MAX_REQ_POOLS];
} abi_request;

static void arg_abi(const fz_rarg *ra, uint32_t *dims, md_request_arg *a) {
  to_dims(&ra->dims, dims);
  *a = (md_request_arg){.has_no_value = ra->no_value, .pool = ra->pool, .offset = ra->offset, .length = ra->length,
                        .rank = ra->dims.rank, .dims = ra->dims.rank ? dims : NULL};
}

static int request_abi(fz_runner *r, const fz_request *fq, abi_request *a, uint8_t *scratch) {
  memset(a, 0, sizeof *a);
  for (unsigned j = 0; j < fq->n_pools; j++) {
    if (fq->pools[j].is_token) {
      a->pools[j].is_token = 1;
      a->pools[j].token = value(r, &fq->pools[j].token);
    } else {
      int written = 0;
      for (unsigned o = 0; o < fq->n_out; o++) written |= fq->out[o].pool == j;
      if (mdc_fz__make_mem(r, &fq->pools[j].mem, !written, &a->pools[j].memory, scratch)) return -1;
    }
  }
  for (unsigned i = 0; i < fq->n_in; i++) arg_abi(&fq->in[i], a->in_dims[i], &a->in[i]);
  for (unsigned i = 0; i < fq->n_out; i++) arg_abi(&fq->out[i], a->out_dims[i], &a->out[i]);
  a->q = (md_request){.n_inputs = fq->n_in, .inputs = a->in, .n_outputs = fq->n_out, .outputs = a->out,
                      .n_pools = fq->n_pools, .pools = a->pools};
  return 0;
}

static int is_fill(const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != FZ_FILL) return 0;
  return 1;
}

/* SPEC 4: shapes and timing after an execution (or the wait of one). */
static void judge_exec(fz_runner *r, unsigned i, const fz_pred *pr, md_status got, const md_output_shape *sh,
                       uint32_t n_shapes, const md_timing *tm) {
  if (got != MD_NONE && got != MD_OUTPUT_INSUFFICIENT_SIZE) {
    for (unsigned s = 0; s < n_shapes; s++)
      if (sh[s].rank != 0)
        return mdc_fz__finding(r, (int)i, "shapes-on-failure",
                               "SPEC 4: on a failure other than OUTPUT_INSUFFICIENT_SIZE: no shapes",
                               "returned %s with output %u's shape of rank %u%s", mdc_fz__sname(got), s, sh[s].rank,
                               is_fill(&sh[s].rank, sizeof sh[s].rank) ? " (never written)" : "");
    if (tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX)
      return mdc_fz__finding(r, (int)i, "timing-on-failure", "SPEC 4: on a failure, timing is UINT64_MAX",
                             "returned %s with timing {%" PRIu64 ", %" PRIu64 "}", mdc_fz__sname(got),
                             tm->on_device_ns, tm->in_driver_ns);
    return;
  }
  unsigned n = n_shapes < pr->ex.n_out ? n_shapes : pr->ex.n_out;
  for (unsigned s = 0; s < n; s++) {
    if (got == MD_NONE && !sh[s].is_sufficient)
      return mdc_fz__finding(r, (int)i, "insufficient-on-success", "SPEC 4: on success every shape is sufficient",
                             "returned NONE with output %u marked insufficient", s);
    if (!pr->ex.shapes_known) continue;
    const fz_dims *want = &pr->ex.out[s];
    int same = sh[s].rank == want->rank;
    for (unsigned d = 0; same && d < want->rank && d < MD_MAX_RANK; d++) same = sh[s].dims[d] == want->d[d];
    if (!same) {
      char a[96] = "", b[96] = "";
      size_t ua = 0, ub = 0;
      for (unsigned d = 0; d < want->rank && ua < sizeof a; d++) ua += (size_t)snprintf(a + ua, sizeof a - ua, "%s%u", d ? "," : "", want->d[d]);
      for (unsigned d = 0; d < sh[s].rank && d < MD_MAX_RANK && ub < sizeof b; d++)
        ub += (size_t)snprintf(b + ub, sizeof b - ub, "%s%u", d ? "," : "", sh[s].dims[d]);
      return mdc_fz__finding(r, (int)i, "shape", "SPEC 4: a shape for every output with the produced dims",
                             "output %u: shape [%s] (rank %u), the model says [%s]", s, b, sh[s].rank, a);
    }
    if (got == MD_OUTPUT_INSUFFICIENT_SIZE && (sh[s].is_sufficient != 0) != (pr->ex.sufficient[s] != 0))
      return mdc_fz__finding(r, (int)i, "sufficient", "SPEC 4: is_sufficient = 0 exactly on the short outputs",
                             "output %u: is_sufficient %u, its pool %s", s, sh[s].is_sufficient,
                             pr->ex.sufficient[s] ? "holds it" : "is too small");
  }
}

/* ---- one call, step by step ----------------------------------------------------------------- */

/* One call in the making: what its steps share. The steps on the way to the driver are named
 * run_call*: `mdc fuzz`'s crash triage (boring_frame, conformance/mdc/) leaves out the harness's
 * frames by name prefix, so that a crash in the driver is signed by the driver's frames alone. */
typedef struct call_ctx {
  fz_runner *r;
  unsigned i;                  /* the call's index in the program */
  const fz_call *k;
  fz_outcome *oc;
  fz_pred *pr;                 /* what the model allows, before the call */
  fz_state *st;
  uint8_t *scratch;            /* the calling thread's, 2 * FZ_MAX_POOL_BYTES */
  uint64_t client;             /* the call's client handle (0: none) */
  md_status got;
  uint64_t made;               /* the handle a creation returned */
  uint32_t n_shapes;
  md_output_shape shapes[FZ_MAX_ARGS + 4];
  md_timing timing;
} call_ctx;

/* The ABI's forms of a call's model and request: large, so one of each per thread. */
static _Thread_local abi_model call_model;
static _Thread_local abi_request call_request;
static _Thread_local fz_vexp call_vexp;

static void run_call_supported(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_pred *pr = c->pr;
  uint8_t sup[FZ_MAX_OPS + 4];
  memset(sup, FZ_FILL, sizeof sup);
  model_abi(&r->p->models[mdc_fz_arg(c->k, MDC_A_MODEL)->model], &call_model);
  c->got = r->drv->get_supported_operations(r->dev, &call_model.m, sup);
  if (c->got == MD_NONE && pr->supported_known)
    for (unsigned j = 0; j < pr->n_supported; j++)
      if (sup[j] != 1)
        mdc_fz__finding(r, (int)c->i, "supported", "SPEC 7: float32 ADD/SUB/MUL/RELU are supported",
                        "operation %u reported %s", j,
                        sup[j] == FZ_FILL ? "(never written)" : sup[j] ? "odd" : "unsupported");
}

/* close_client, its leak report judged where the model knows what the client left live. */
static void run_call_close_client(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_pred *pr = c->pr;
  md_leak_report lr;
  memset(&lr, FZ_FILL, sizeof lr);
  c->got = r->drv->close_client(r->dev, c->client, &lr);
  c->oc->leaks = lr;
  if (c->got != MD_NONE || !(pr->set & FZ_BIT(MD_NONE))) return;
  const md_leak_report *w = &pr->leaks;
  const char *what = (pr->leaks_known & 1) && lr.buffers != w->buffers ? "buffers"
                     : (pr->leaks_known & 2) && lr.prepared_models != w->prepared_models ? "prepared_models"
                     : (pr->leaks_known & 4) && lr.events != w->events ? "events"
                     : (pr->leaks_known & 8) && lr.bytes != w->bytes ? "bytes" : NULL;
  if (what)
    mdc_fz__finding(r, (int)c->i, "leaks", "SPEC 5, 8.9, 8.10: close_client reports what the client left live",
                    "leak report {buffers %u, prepared_models %u, events %u, bytes %" PRIu64 "}, the program left "
                    "{%u, %u, %u, %" PRIu64 "} live (%s differs)",
                    lr.buffers, lr.prepared_models, lr.events, lr.bytes, w->buffers, w->prepared_models, w->events,
                    w->bytes, what);
}

static void run_call_allocate(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_call *k = c->k;
  const fz_arg *desc = mdc_fz_arg(k, MDC_A_DESC), *list = mdc_fz_arg(k, MDC_A_PREPARED_LIST);
  const fz_arg *ri = mdc_fz_arg(k, MDC_A_INPUT_ROLES), *ro = mdc_fz_arg(k, MDC_A_OUTPUT_ROLES);
  uint32_t dims[FZ_MAX_RANK];
  md_buffer_desc bd = {0};
  if (desc) {
    to_dims(&desc->dims, dims);
    bd.rank = desc->dims.rank;
    bd.dims = dims;
  }
  md_handle prep[FZ_MAX_LIST];
  md_buffer_role in[FZ_MAX_LIST], out[FZ_MAX_LIST];
  unsigned np = list ? list->refs.n : 0, ni = ri ? ri->roles.n : 0, no = ro ? ro->roles.n : 0;
  for (unsigned j = 0; j < np; j++) prep[j] = value(r, &list->refs.v[j]);
  for (unsigned j = 0; j < ni; j++) in[j] = (md_buffer_role){ri->roles.r[j].model, ri->roles.r[j].io, ri->roles.r[j].p};
  for (unsigned j = 0; j < no; j++) out[j] = (md_buffer_role){ro->roles.r[j].model, ro->roles.r[j].io, ro->roles.r[j].p};
  md_token t = 0;
  c->got = r->drv->allocate(r->dev, c->client, desc ? &bd : NULL, np ? prep : NULL, np, ni ? in : NULL, ni,
                            no ? out : NULL, no, &t);
  c->made = t;
}

/* strict: what a copy_to that raced writers returned NONE with is a whole value of one writer
 * (or of before the race), never a mix. */
static void judge_torn_read(call_ctx *c, const fz_mem *fm, const md_memory *mem) {
  const fz_pred *pr = c->pr;
  size_t n = (size_t)fm->size;
  uint8_t *want = c->scratch, *have = c->scratch + FZ_MAX_POOL_BYTES;
  int ok = 0;
  if (n <= FZ_MAX_POOL_BYTES && pread(mem->fd, have, n, (off_t)(fm->kind == MD_MEM_MMAP_FD ? fm->offset : 0)) == (ssize_t)n)
    for (unsigned a = 0; a < pr->n_alt && !ok; a++) {
      if (pr->alt[a].bytes != n) continue;
      if (pr->alt[a].seed) mdc_fz__fill(c->r, pr->alt[a].seed, want, n);
      else memset(want, 0, n);
      ok = !memcmp(want, have, n);
    }
  else ok = 1;
  int sized = 0;
  for (unsigned a = 0; a < pr->n_alt; a++) sized |= pr->alt[a].bytes == n;
  if (!ok && sized)
    mdc_fz__finding(c->r, (int)c->i, "torn-read",
                    "reference decision (docs/memory-domains.md): a read racing with writers sees one whole value",
                    "copy_to returned NONE with bytes that are none of the %u values written", pr->n_alt);
}

/* What a copy_to that returned NONE wrote, where the model knows the buffer's contents. */
static void judge_copy_data(call_ctx *c, const fz_mem *fm, const md_memory *mem) {
  const fz_pred *pr = c->pr;
  size_t n = (size_t)pr->check_bytes;
  uint8_t *want = c->scratch, *have = c->scratch + FZ_MAX_POOL_BYTES;
  if (n > FZ_MAX_POOL_BYTES) return;
  if (pr->check_seed) mdc_fz__fill(c->r, pr->check_seed, want, n);
  else memset(want, 0, n);
  ssize_t rd = pread(mem->fd, have, n, (off_t)(fm->kind == MD_MEM_MMAP_FD ? fm->offset : 0));
  if (rd != (ssize_t)n || memcmp(want, have, n) != 0) {
    size_t at = 0;
    while (rd == (ssize_t)n && at < n && want[at] == have[at]) at++;
    mdc_fz__finding(c->r, (int)c->i, "data",
                    "SPEC 3, 5: a buffer holds what was last copied into it (and nothing of another's)",
                    "copy_to wrote bytes that differ from the buffer's contents at byte %zu of %zu", at, n);
  }
}

/* copy_to, copy_from: -1 when the harness could not make the memory (the call was not made). */
static int run_call_copy(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_call *k = c->k;
  md_memory mem;
  const fz_mem *fm = &mdc_fz_arg(k, k->call == MDC_CALL_COPY_TO ? MDC_A_DST : MDC_A_SRC)->mem;
  if (mdc_fz__make_mem(r, fm, k->call == MDC_CALL_COPY_FROM, &mem, c->scratch)) {
    mdc_fz__finding(r, (int)c->i, "harness", "", "cannot make a memory of %" PRIu64 " bytes: %s", fm->size,
                    strerror(errno));
    return -1;
  }
  md_token t = value(r, &mdc_fz_arg(k, MDC_A_TOKEN)->ref);
  if (k->call == MDC_CALL_COPY_TO) {
    c->got = r->drv->copy_to(r->dev, c->client, t, &mem);
    if (c->got == MD_NONE && c->pr->n_alt) judge_torn_read(c, fm, &mem);
    if (c->got == MD_NONE && c->pr->check) judge_copy_data(c, fm, &mem);
  } else {
    const fz_arg *da = mdc_fz_arg(k, MDC_A_DIMS);
    uint32_t dims[FZ_MAX_RANK];
    if (da) to_dims(&da->dims, dims);
    c->got = r->drv->copy_from(r->dev, c->client, t, &mem, da ? da->dims.rank : 0, da ? dims : NULL);
  }
  return 0;
}

/* execute, execute_async: -1 when the harness could not make the request's memories (the call
 * was not made). The value oracle's expectation is judged now, or kept for the wait. */
static int run_call_execute(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_call *k = c->k;
  const fz_request *fq = &r->p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
  if (request_abi(r, fq, &call_request, c->scratch)) {
    mdc_fz__finding(r, (int)c->i, "harness", "", "cannot make the request's memories: %s", strerror(errno));
    return -1;
  }
  md_handle pm = value(r, &mdc_fz_arg(k, MDC_A_PREPARED)->ref);
  fz_vexp *ve = &call_vexp;
  int seq = !(k->block && r->target == FZ_CONCURRENCY);   /* lanes race on contents */
  ve->vc.n = 0;
  if (seq) mdc_fz__vexpect(r, c->i, c->st, fq, &call_request.q, ve, c->scratch);
  if (k->call == MDC_CALL_EXECUTE) {
    const fz_arg *ns = mdc_fz_arg(k, MDC_A_N_SHAPES);
    c->n_shapes = ns ? (ns->u64 > FZ_MAX_ARGS ? FZ_MAX_ARGS : (uint32_t)ns->u64) : fq->n_out;
    c->got = r->drv->execute(r->dev, c->client, pm, &call_request.q, c->n_shapes ? c->shapes : NULL, c->n_shapes,
                             &c->timing);
    judge_exec(r, c->i, c->pr, c->got, c->shapes, c->n_shapes, &c->timing);
    if (c->got == MD_NONE && ve->vc.n) mdc_fz__vjudge(r, c->i, ve, c->scratch, 0);
  } else {
    md_handle ev = 0;
    c->got = r->drv->execute_async(r->dev, c->client, pm, &call_request.q, &ev);
    c->made = ev;
    if (c->got == MD_NONE && ve->vc.n && k->obj < FZ_MAX_OBJS) {
      r->vexp[k->obj] = *ve;
      r->vexp[k->obj].run = r->run_no;
    }
  }
  return 0;
}

/* After a wait that returned NONE: the values of its execution (issued by this run), unless a
 * call since its issue may have written one of its input tokens. */
static void wait_values(call_ctx *c, const fz_ref *er) {
  fz_runner *r = c->r;
  if (c->got != MD_NONE || er->how != FZ_REF_OBJ || er->forge || er->obj >= FZ_MAX_OBJS ||
      r->vexp[er->obj].run != r->run_no || !r->vexp[er->obj].vc.n)
    return;
  const fz_vexp *e = &r->vexp[er->obj];
  int written = 0, snapshot = 0;
  for (unsigned t = 0; t < e->n_tok && !written; t++) {
    written = mdc_fz__token_written(r->p, e->vc.issue, c->i, e->tok[t], r->strict);
    snapshot |= !written && r->strict && mdc_fz__token_written(r->p, e->vc.issue, c->i, e->tok[t], 0);
  }
  if (!written) mdc_fz__vjudge(r, c->i, e, c->scratch, snapshot);
}

static void run_call_wait(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_call *k = c->k;
  const fz_arg *ns = mdc_fz_arg(k, MDC_A_N_SHAPES), *to = mdc_fz_arg(k, MDC_A_TIMEOUT_NS);
  c->n_shapes = ns ? (ns->u64 > FZ_MAX_ARGS ? FZ_MAX_ARGS : (uint32_t)ns->u64) : c->pr->ex.n_out;
  const fz_ref *er = &mdc_fz_arg(k, MDC_A_EVENT)->ref;
  c->got = r->drv->wait_event(r->dev, c->client, value(r, er), to ? to->u64 : UINT64_MAX,
                              c->n_shapes ? c->shapes : NULL, c->n_shapes, &c->timing);
  judge_exec(r, c->i, c->pr, c->got, c->shapes, c->n_shapes, &c->timing);
  /* an execution's own status consumed the event: it ended (INVALID_ARGUMENT may be the
   * wait's refusal) */
  if (c->got != MD_MISSED_DEADLINE_TRANSIENT && c->got != MD_INVALID_ARGUMENT && er->how == FZ_REF_OBJ &&
      er->obj < FZ_MAX_OBJS && r->vals[er->obj] && value(r, er) == r->vals[er->obj])
    atomic_store_explicit(&r->settled[er->obj], 1, memory_order_relaxed);
  wait_values(c, er);
}

/* The driver called with the call's arguments: -1 when the harness could not make them (a
 * finding; the call was not made). */
static int run_call_driver(call_ctx *c) {
  fz_runner *r = c->r;
  const md_driver *d = r->drv;
  const fz_call *k = c->k;
  md_handle h = 0;
  switch ((mdc_call)k->call) {
    case MDC_CALL_GET_CAPABILITIES: {
      md_capabilities caps;
      memset(&caps, 0, sizeof caps);
      caps.struct_size = sizeof caps;
      c->got = d->get_capabilities(r->dev, &caps);
      return 0;
    }
    case MDC_CALL_GET_SUPPORTED_OPERATIONS:
      run_call_supported(c);
      return 0;
    case MDC_CALL_OPEN_CLIENT:
      c->got = d->open_client(r->dev, &h);
      c->made = h;
      return 0;
    case MDC_CALL_CLOSE_CLIENT:
      run_call_close_client(c);
      return 0;
    case MDC_CALL_PREPARE_MODEL:
      model_abi(&r->p->models[mdc_fz_arg(k, MDC_A_MODEL)->model], &call_model);
      c->got = d->prepare_model(r->dev, c->client, &call_model.m, &h);
      c->made = h;
      return 0;
    case MDC_CALL_RELEASE_PREPARED_MODEL:
      c->got = d->release_prepared_model(r->dev, c->client, value(r, &mdc_fz_arg(k, MDC_A_PREPARED)->ref));
      return 0;
    case MDC_CALL_ALLOCATE:
      run_call_allocate(c);
      return 0;
    case MDC_CALL_COPY_TO:
    case MDC_CALL_COPY_FROM:
      return run_call_copy(c);
    case MDC_CALL_FREE_BUFFER:
      c->got = d->free_buffer(r->dev, c->client, value(r, &mdc_fz_arg(k, MDC_A_TOKEN)->ref));
      return 0;
    case MDC_CALL_EXECUTE:
    case MDC_CALL_EXECUTE_ASYNC:
      return run_call_execute(c);
    case MDC_CALL_WAIT_EVENT:
      run_call_wait(c);
      return 0;
    default:
      return 0;
  }
}

/* After the call: its outcome kept, its status judged against the set the model allows, the
 * handle it made recorded, the state moved. */
static void call_end(call_ctx *c) {
  fz_runner *r = c->r;
  const fz_call *k = c->k;
  fz_outcome *oc = c->oc;
  md_status got = c->got;
  oc->ran = 1;
  oc->got = got;
  oc->n_shapes = c->n_shapes < FZ_MAX_ARGS ? c->n_shapes : FZ_MAX_ARGS;
  memcpy(oc->shapes, c->shapes, oc->n_shapes * sizeof *c->shapes);
  if (!(fz_bit(got) & c->pr->set)) {
    char set[160];
    mdc_fz__finding(r, (int)c->i, mdc_fz__sname(got), c->pr->why, "returned %s; SPEC allows %s here",
                    mdc_fz__sname(got), mdc_fz_set_str(c->pr->set, set, sizeof set));
  }
  if (mdc_calls[k->call].produces != MDC_OBJ_NONE && got == MD_NONE && !c->made)
    mdc_fz__finding(r, (int)c->i, "handle", "SPEC 1: 0 is never a valid handle",
                    "returned NONE and the handle 0 (a creation that succeeds gives a live handle)");
  if (mdc_calls[k->call].produces != MDC_OBJ_NONE && k->obj < FZ_MAX_OBJS) {
    r->vals[k->obj] = got == MD_NONE ? c->made : 0;
    r->ev_client[k->obj] = c->client;
  }
  mdc_fz_apply(c->st, r->p, k, c->pr, got);
}

void mdc_fz__run_call(fz_runner *r, unsigned i, fz_state *st, uint8_t *scratch) {
  call_ctx c = {.r = r, .i = i, .k = &r->p->calls[i], .oc = &r->outs[i], .st = st, .scratch = scratch,
                .got = MD_NONE};
  c.pr = &c.oc->pred;
  c.oc->vc.n = 0;
  mdc_fz_predict(st, r->p, c.k, c.pr);
  const fz_arg *ca = mdc_fz_arg(c.k, MDC_A_CLIENT);
  if (ca) c.client = value(r, &ca->ref);
  memset(c.shapes, FZ_FILL, sizeof c.shapes);
  memset(&c.timing, FZ_FILL, sizeof c.timing);
  atomic_store(&r->current, (int)i);
  if (run_call_driver(&c)) return;
  call_end(&c);
}
