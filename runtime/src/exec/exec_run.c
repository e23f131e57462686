/* exec_run.c - running a validated execution (SPEC section 4): its operands' state, the inputs
 * to the device, each operation's shapes and kernel on the device's backend, the outputs back,
 * and md__execute, which validates, runs and answers in the calling thread.
 *
 * The execution contexts (md__exec_ctx: per-operand state and device temporaries kept for the
 * next execution) are this file's layout; a prepared model caches them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mutant.h"
#include "error.h"
#include "exec_int.h"
#include "kernel_ctx.h"

/* Per operand, while an execution runs. */
typedef struct opnd_state {
  uint32_t rank;
  uint32_t dims[MD_MAX_RANK];
  bool has_value;
  bool host;                 /* a parameter: host memory */
  bool own_host;             /* a host temporary this execution frees */
  md_devptr dev;
  uint64_t dev_off;
  void *hptr;
  uint64_t bytes;
  md__write w;               /* a token output being written */
  int w_out;                 /* its output index, or -1 */
} opnd_state;

struct md__exec_ctx {
  md__exec_ctx *next;
  md_stream *stream;         /* for asynchronous executions; made on first use */
  uint32_t n;                /* operands */
  opnd_state *os;            /* n */
  md_devptr *tmp;            /* n: device temporaries kept between executions */
  uint64_t *tmp_cap;         /* n: their sizes */
};

/* The calling thread's context slot (threads are numbered once, in the order they first run
 * an execution). */
static unsigned my_slot(void) {
  static _Atomic unsigned next_thread;
  static _Thread_local unsigned me;   /* 0: not numbered yet */
  if (!me) me = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed) % MD__CTX_SLOTS + 1u;
  return me - 1u;
}

static md__exec_ctx *ctx_get(md__prepared *p) {
  /* The hit path: this thread's slot, one exchange on a line of its own. */
  md__exec_ctx *c = atomic_exchange_explicit(&p->slots[my_slot()].ctx, NULL, memory_order_acquire);
  if (c) return c;
  md__spin_lock(&p->ctx_lock);
  c = p->ctx_free;
  if (c) p->ctx_free = c->next;
  md__spin_unlock(&p->ctx_lock);
  if (c) return c;
  uint32_t n = p->model->n_operands ? p->model->n_operands : 1;
  c = calloc(1, sizeof *c + n * (sizeof(opnd_state) + sizeof(md_devptr) + sizeof(uint64_t)));
  if (!c) return NULL;
  c->n = n;
  c->os = (opnd_state *)(c + 1);
  c->tmp = (md_devptr *)(c->os + n);
  c->tmp_cap = (uint64_t *)(c->tmp + n);
  return c;
}

static void ctx_put(md__prepared *p, md__exec_ctx *c) {
  md__exec_ctx *none = NULL;
  if (atomic_compare_exchange_strong_explicit(&p->slots[my_slot()].ctx, &none, c, memory_order_release,
                                              memory_order_relaxed))
    return;
  md__spin_lock(&p->ctx_lock);
  c->next = p->ctx_free;
  p->ctx_free = c;
  md__spin_unlock(&p->ctx_lock);
}

static void ctx_free(md_device *d, md__exec_ctx *c) {
  for (uint32_t i = 0; i < c->n; i++)
    if (c->tmp[i]) d->be->free(d->bk, c->tmp[i]);
  if (c->stream) d->be->stream_destroy(d->bk, c->stream);
  free(c);
}

void md__exec_ctx_free_all(md_device *d, md__prepared *p) {
  for (unsigned i = 0; i < MD__CTX_SLOTS; i++) {
    md__exec_ctx *c = atomic_exchange_explicit(&p->slots[i].ctx, NULL, memory_order_acquire);
    if (c) ctx_free(d, c);
  }
  md__exec_ctx *c = p->ctx_free;
  p->ctx_free = NULL;
  while (c) {
    md__exec_ctx *next = c->next;
    ctx_free(d, c);
    c = next;
  }
}

/* Device memory of at least `bytes` for operand i: the context's temporary, grown if needed. */
static md_status ctx_dev(md_device *d, md__exec_ctx *c, uint32_t i, uint64_t bytes, md_devptr *out) {
  if (bytes == 0) bytes = 1;
  if (c->tmp_cap[i] < bytes) {
    if (c->tmp[i]) d->be->free(d->bk, c->tmp[i]);
    c->tmp[i] = 0;
    c->tmp_cap[i] = 0;
    md_status st = d->be->alloc(d->bk, bytes, &c->tmp[i]);
    if (st != MD_NONE) return st;
    c->tmp_cap[i] = bytes;
  }
  *out = c->tmp[i];
  return MD_NONE;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool is_param(md_operand_type t) { return md__type_is_scalar(t) || t == MD_TENSOR_INT32; }

/* ---- running ---- */

static void *dev_addr(md_device *d, const opnd_state *s) {
  return (uint8_t *)d->be->kernel_ptr(d->bk, s->dev) + s->dev_off;
}

/* Every device output of the request becomes uninitialized (SPEC 4: failures). */
/* Before an output's write to a token: this thread's pin on the buffer's storage (an earlier
 * execution read it) would send the write to fresh storage, so it goes -- unless an input of
 * this execution reads through the same pin. */
static void unpin_output(md__exec *x, const io_arg *a) {
  void **pin = x->cached ? md__use_pin(&x->tok[a->pool]) : NULL;
  if (!pin || !*pin) return;
  for (uint32_t i = 0; i < x->n_in; i++)
    if (x->in[i].rd_pinned && x->in[i].pool == a->pool) return;
  md__storage_put(x->d, *pin);
  *pin = NULL;
}

static void deinit_device_outputs(md__exec *x, opnd_state *os) {
  const md__model *m = x->p->model;
  for (uint32_t i = 0; i < x->n_out; i++) {
    if (x->out[i].kind != ARG_TOKEN) continue;
    opnd_state *s = &os[m->outputs[i]];
    if (MD_MUTANT(no_deinit)) {
      /* Mutant: a failed execution's output keeps (and publishes) what was written. */
      if (s->w.st) md__buffer_write_commit(x->d, x->out[i].buf, &s->w, x->out[i].buf->cur_rank, md__buf_cur_dims(x->out[i].buf));
      continue;
    }
    if (s->w.st) md__buffer_write_abort(x->d, x->out[i].buf, &s->w);
    else md__buffer_uninit(x->out[i].buf);
    if (MD_MUTANT(deinit_first_output_only)) break; /* Mutant: the other device outputs keep their state. */
  }
}

/* Whether the backend models device time (md_backend_ops.device_ns answers for a launch). */
static bool time_modelled(md_device *d) {
  return d->be->device_ns && d->be->device_ns(d->bk, 1, 0) != UINT64_MAX;
}

/* Device time of one launch (is_launch) or copy of `bytes` that took `wall` ns: the backend's
 * time model when it has one on (so timings look like a device's), else the wall time. */
static uint64_t dev_time(md_device *d, int is_launch, uint64_t bytes, uint64_t wall) {
  if (!d->be->device_ns) return wall;
  uint64_t ns = d->be->device_ns(d->bk, is_launch, bytes);
  return ns == UINT64_MAX ? wall : ns;
}

static md_status bind_inputs(md__exec *x, md__exec_ctx *ctx, md_stream *stream, uint64_t *dev_ns) {
  opnd_state *os = ctx->os;
  md_device *d = x->d;
  const md__model *m = x->p->model;
  char err[256];
  for (uint32_t i = 0; i < m->n_operands; i++) {
    const md__operand *o = &m->operands[i];
    opnd_state *s = &os[i];
    s->w_out = -1;
    s->host = is_param(o->type);
    if (o->lifetime == MD_CONSTANT_COPY || o->lifetime == MD_CONSTANT_REFERENCE) {
      s->rank = o->rank;
      memcpy(s->dims, o->dims, sizeof s->dims);
      s->has_value = true;
      s->bytes = o->length;
      if (s->host) s->hptr = (void *)o->value;
      else s->dev = x->p->dev_const[i];
    }
  }
  for (uint32_t i = 0; i < x->n_in; i++) {
    const io_arg *a = &x->in[i];
    const md__operand *o = &m->operands[m->inputs[i]];
    opnd_state *s = &os[m->inputs[i]];
    if (a->kind == ARG_NONE) continue;
    s->has_value = true;
    s->rank = a->rank;
    memcpy(s->dims, a->dims, sizeof s->dims);
    s->bytes = md__opnd_bytes(o->type, a->rank, a->dims);
    if (a->kind == ARG_POOL) {
      uint8_t *src = x->maps[a->pool].base + a->offset;
      if (x->maps[a->pool].size - a->offset < s->bytes)
        return md__fail(MD_INVALID_ARGUMENT, "input %u: %llu bytes do not fit in pool %u", i,
                        (unsigned long long)s->bytes, a->pool);
      if (s->host) {
        s->hptr = src;
        continue;
      }
      md_status st = ctx_dev(d, ctx, m->inputs[i], s->bytes, &s->dev);
      if (st != MD_NONE) return md__fail(st, "input %u: cannot allocate %llu bytes of device memory", i, (unsigned long long)s->bytes);
      err[0] = '\0';
      st = d->be->write(d->bk, stream, s->dev, 0, src, s->bytes, err, sizeof err);
      if (st != MD_NONE) return md__fail(st, "input %u: copying to the device: %s", i, err);
      *dev_ns += dev_time(d, 0, s->bytes, 0);
    } else {
      if (a->rd->capacity < s->bytes)
        return md__fail(MD_GENERAL_FAILURE, "input %u: buffer holds %llu bytes, %llu needed", i,
                        (unsigned long long)a->rd->capacity, (unsigned long long)s->bytes);
      if (!s->host) {
        s->dev = a->rd->mem;
        continue;
      }
      s->hptr = malloc(s->bytes ? s->bytes : 1);
      if (!s->hptr) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "input %u: out of host memory", i);
      s->own_host = true;
      err[0] = '\0';
      md_status st = d->be->read(d->bk, NULL, s->hptr, a->rd->mem, 0, s->bytes, err, sizeof err);
      if (st != MD_NONE) return md__fail(st, "input %u: reading the buffer: %s", i, err);
    }
  }
  return MD_NONE;
}

static void tensor_of(md_device *d, const md__operand *o, const opnd_state *s, md_tensor *t) {
  memset(t, 0, sizeof *t);
  t->type = o->type;
  t->rank = s->rank;
  memcpy(t->dims, s->dims, sizeof t->dims);
  t->scale = o->scale;
  t->zero_point = o->zero_point;
  t->bytes = s->bytes;
  if (!s->has_value) t->data = NULL;
  else if (s->host) t->data = s->hptr;
  else t->data = dev_addr(d, s);
}

/* A kernel queued on an asynchronous execution's stream. Its call, tensors, scratch context and
 * status are read by the device's worker until the stream is synchronized, so they live here, not
 * on run_op's stack; md__exec_run synchronizes once for all of them (docs/execution.md). */
typedef struct pending {
  md_kernel_call call;
  md_kernel_status kst;
  md_kernel_ctx kctx;
  md_tensor *tt;
  uint32_t op;
  bool refused; /* failed before it was queued (injected fault, launch refused): nothing runs */
} pending;

/* Computes output dims, places the outputs and runs one operation.
 * With `pl` (asynchronous), the kernel is queued and left running: see `pending`. */
/* run_op's steps. */

/* What the kernel's check and shape function see of each operand of operation op: inputs as the
 * run has them (dims, and the value of a host operand), outputs as the model declares them. */
static void describe_operands(const md__model *m, const md__operation *op, const opnd_state *os, md_operand_info *ii) {
  for (uint32_t j = 0; j < op->n_inputs + op->n_outputs; j++) {
    uint32_t oi = j < op->n_inputs ? op->inputs[j] : op->outputs[j - op->n_inputs];
    const md__operand *o = &m->operands[oi];
    const opnd_state *s = &os[oi];
    md_operand_info *f = &ii[j];
    memset(f, 0, sizeof *f);
    f->type = o->type;
    f->scale = o->scale;
    f->zero_point = o->zero_point;
    f->lifetime = o->lifetime;
    if (j < op->n_inputs) {
      f->rank = s->has_value ? s->rank : 0;
      f->dims = s->dims;
      f->value = s->has_value && s->host ? s->hptr : NULL;
      f->length = s->has_value ? s->bytes : 0;
    } else {
      f->rank = o->rank;
      f->dims = o->dims;
    }
  }
}

/* The dims of op's outputs into sh: the kernel's shape function, or the model's dims (which must
 * then be fully known). */
static md_status infer_shapes(const md__model *m, const md__operation *op, const md_kernel_def *k,
                              const md_op_sig *sig, md_tensor_shape *sh, md_kernel_status *kst) {
  char s1[64];
  if (k->shape) {
    memset(sh, 0, op->n_outputs * sizeof *sh);
    md_status st = k->shape(sig, sh, kst, k->user);
    /* Inconsistent execution dims or parameters are the request's fault: INVALID_ARGUMENT
     * passes through (docs/execution.md). */
    if (st != MD_NONE) return md__fail(st, "%s", kst->message[0] ? kst->message : "output shape inference failed");
    return MD_NONE;
  }
  for (uint32_t j = 0; j < op->n_outputs; j++) {
    const md__operand *o = &m->operands[op->outputs[j]];
    if (!md__type_is_scalar(o->type) && !md__dims_known(o->rank, o->dims))
      return md__fail(MD_GENERAL_FAILURE, "output %u: kernel has no shape function and the model's dims %s are not fully known",
                      j, md__dims_str(o->rank, o->dims, s1, sizeof s1));
    sh[j].rank = o->rank;
    memcpy(sh[j].dims, o->dims, o->rank * sizeof *o->dims);
  }
  return MD_NONE;
}

/* Places output j of op with produced dims sh: the dims must agree with the model and the
 * request; a token output is written in its buffer, a host one in host memory, the others in
 * device memory of the context. */
static md_status place_output(md__exec *x, md__exec_ctx *ctx, const md__operation *op, uint32_t j,
                              const md_tensor_shape *sh) {
  md_device *d = x->d;
  const md__model *m = x->p->model;
  char s1[64], s2[64];
  uint32_t oi = op->outputs[j];
  const md__operand *o = &m->operands[oi];
  opnd_state *s = &ctx->os[oi];
  uint32_t rank = 0, dims[MD_MAX_RANK], axis;
  if (md__dims_combine(o->rank, o->dims, sh->rank, sh->dims, &rank, dims, &axis) ||
      (!md__type_is_scalar(o->type) && rank != sh->rank))
    return md__fail(MD_GENERAL_FAILURE, "output %u (operand %u): produced dims %s do not match the model's %s", j, oi,
                    md__dims_str(sh->rank, sh->dims, s1, sizeof s1), md__dims_str(o->rank, o->dims, s2, sizeof s2));
  s->rank = sh->rank;
  memcpy(s->dims, sh->dims, sizeof s->dims);
  s->bytes = md__opnd_bytes(o->type, s->rank, s->dims);
  s->has_value = true;
  if (s->bytes == UINT64_MAX)
    return md__fail(MD_GENERAL_FAILURE, "output %u (operand %u): dims %s overflow", j, oi, md__dims_str(s->rank, s->dims, s1, sizeof s1));
  if (o->lifetime == MD_SUBGRAPH_OUTPUT) {
    const io_arg *a = &x->out[o->io_index];
    /* (Mutant fixed_dims_resized: a buffer with fixed dims takes the produced ones.) */
    if (a->kind != ARG_NONE && md__dims_combine(a->rank, a->dims, s->rank, s->dims, &rank, dims, &axis) &&
        !MD_MUTANT(fixed_dims_resized))
      return md__fail(MD_GENERAL_FAILURE, "output %u: produced dims %s do not match the requested %s%s", o->io_index,
                      md__dims_str(s->rank, s->dims, s1, sizeof s1), md__dims_str(a->rank, a->dims, s2, sizeof s2),
                      a->kind == ARG_TOKEN ? " (the buffer's dims are fixed)" : "");
    if (a->kind == ARG_TOKEN && !s->host) {
      unpin_output(x, a);
      md_status st = md__buffer_write_begin(d, a->buf, s->bytes, &s->w);
      if (st != MD_NONE) return md__fail_prefix(st, "output %u", o->io_index);
      s->w_out = (int)o->io_index;
      s->dev = s->w.st->mem;
      return MD_NONE;
    }
  }
  if (s->host) {
    s->hptr = calloc(1, s->bytes ? s->bytes : 1);
    if (!s->hptr) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "operand %u: out of host memory", oi);
    s->own_host = true;
    return MD_NONE;
  }
  md_status st = ctx_dev(d, ctx, oi, s->bytes, &s->dev);
  if (st != MD_NONE)
    return md__fail(st, "operand %u: cannot allocate %llu bytes of device memory", oi, (unsigned long long)s->bytes);
  return MD_NONE;
}

static md_status place_outputs(md__exec *x, md__exec_ctx *ctx, const md__operation *op, const md_tensor_shape *sh) {
  for (uint32_t j = 0; j < op->n_outputs; j++) {
    md_status st = place_output(x, ctx, op, j, &sh[j]);
    if (st != MD_NONE) return st;
  }
  return MD_NONE;
}

/* The mutants that change what a kernel is given (no-ops in the reference driver). */
static void mutate_args(const md__operation *op, md_tensor *tt) {
  if (MD_MUTANT(sub_first_broadcast_swapped) && !strcmp(op->name, "SUB") && tt[0].bytes < tt[1].bytes) {
    md_tensor sw = tt[0]; /* Mutant: the broadcast operand goes second, as if SUB commuted. */
    tt[0] = tt[1];
    tt[1] = sw;
  }
  static const int32_t mut_vals[10] = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  if (MD_MUTANT(fused_relu1_relu6_swapped) && tt[2].data &&
      (!strcmp(op->name, "ADD") || !strcmp(op->name, "SUB") || !strcmp(op->name, "MUL"))) {
    /* Mutant: ADD/SUB/MUL's fused activation codes 2 and 3 swapped. */
    int32_t a;
    memcpy(&a, tt[2].data, sizeof a);
    if (a == 2 || a == 3) tt[2].data = (void *)&mut_vals[6 - a];
  }
  if (MD_MUTANT(concat_negative_axis_off_by_one) && !strcmp(op->name, "CONCATENATION")) {
    int32_t a; /* Mutant: a negative axis normalized as axis + rank - 1. */
    memcpy(&a, tt[op->n_inputs - 1].data, sizeof a);
    if (a < 0 && a + (int32_t)tt[0].rank - 1 >= -1) tt[op->n_inputs - 1].data = (void *)&mut_vals[a + (int32_t)tt[0].rank];
  }
}

static md_status run_op(md__exec *x, md__exec_ctx *ctx, md_stream *stream, uint32_t n, pending *pl,
                        uint64_t *dev_ns) {
  opnd_state *os = ctx->os;
  md_device *d = x->d;
  const md__model *m = x->p->model;
  const md__operation *op = &m->operations[n];
  const md_kernel_def *k = op->kernel;
  md_operand_info info[2 * 64];
  md_operand_info *ii = op->n_inputs + op->n_outputs <= 128 ? info : malloc((op->n_inputs + op->n_outputs) * sizeof *ii);
  md_tensor tens[2 * 64];
  md_tensor *tt = !pl && op->n_inputs + op->n_outputs <= 128 ? tens : malloc((op->n_inputs + op->n_outputs) * sizeof *tt);
  md_tensor_shape shp[16];
  md_tensor_shape *sh = op->n_outputs <= 16 ? shp : malloc(op->n_outputs * sizeof *sh);
  md_status st = MD_NONE;
  md_kernel_status kst;
  if (!ii || !tt || !sh) {
    st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "out of host memory");
    goto out;
  }
  describe_operands(m, op, os, ii);
  md_op_sig sig = {op->n_inputs, ii, op->n_outputs, ii + op->n_inputs, op->n_attrs, op->attrs};
  memset(&kst, 0, sizeof kst);
  if ((st = infer_shapes(m, op, k, &sig, sh, &kst)) != MD_NONE) goto out;
  if ((st = place_outputs(x, ctx, op, sh)) != MD_NONE) goto out;
  for (uint32_t j = 0; j < op->n_inputs + op->n_outputs; j++) {
    uint32_t oi = j < op->n_inputs ? op->inputs[j] : op->outputs[j - op->n_inputs];
    tensor_of(d, &m->operands[oi], &os[oi], &tt[j]);
  }
  mutate_args(op, tt);
  md_kernel_ctx kctx_own;
  md_kernel_ctx *kctx = pl ? &pl->kctx : &kctx_own;
  md__kctx_init(kctx, MD__KCTX_DEFAULT_LIMIT);
  md_kernel_call call_own = {
      .struct_size = sizeof call_own, .platform = d->platform, .n_inputs = op->n_inputs, .inputs = tt,
      .n_outputs = op->n_outputs, .outputs = tt + op->n_inputs, .n_attrs = op->n_attrs, .attrs = op->attrs,
      .stream = NULL, .ctx = kctx, .user = k->user};
  md_kernel_call *call = &call_own;
  md_kernel_status *ks = &kst;
  if (pl) {
    pl->call = call_own;
    pl->tt = tt;
    pl->op = n;
    call = &pl->call;
    ks = &pl->kst;
    tt = tens; /* pl owns it now */
  }
  memset(ks, 0, sizeof *ks);
  uint64_t t0 = now_ns();
  bool injected = x->inject != MD_NONE;
  if (injected) {
    /* The fault plan's kernel_fail or device_lost: this kernel reports it instead of running. */
    ks->code = x->inject;
    x->inject = MD_NONE;
    snprintf(ks->message, sizeof ks->message, "%s", x->inject_msg);
    st = MD_NONE;
  } else {
    st = d->be->launch(d->bk, stream, k, call, ks);
  }
  if (pl) {
    /* Queued (or refused at once): md__exec_run synchronizes and reads ks for every pending kernel;
     * a launch the backend refused is reported the same way. */
    pl->refused = injected || st != MD_NONE; /* a queued kernel's ks is the worker's until the sync */
    if (st != MD_NONE && ks->code == MD_NONE) {
      ks->code = st;
      snprintf(ks->message, sizeof ks->message, "%s", md__last_error());
    }
    *dev_ns += dev_time(d, 1, 0, 0); /* modelled time; md__exec_run adds the wall time otherwise */
    st = MD_NONE;
    goto out;
  }
  *dev_ns += dev_time(d, 1, 0, now_ns() - t0);
  md__kctx_release(kctx);
  if (st == MD_NONE && kst.code != MD_NONE) st = kst.code;
  if (st != MD_NONE) {
    /* SPEC 4: a kernel that reports failure makes the execution GENERAL_FAILURE. */
    md_status ret = st == MD_DEVICE_UNAVAILABLE ? st : MD_GENERAL_FAILURE;
    st = md__fail(ret, "kernel failed: %s", kst.message[0] ? kst.message : md__last_error());
    if (ret == MD_DEVICE_UNAVAILABLE) md__device_lost(d, kst.message);
  }
out:
  if (ii != info) free(ii);
  if (tt != tens) free(tt);
  if (sh != shp) free(sh);
  return st;
}

static void release_states(md__exec *x, opnd_state *os) {
  const md__model *m = x->p->model;
  for (uint32_t i = 0; i < m->n_operands; i++) {
    opnd_state *s = &os[i];
    if (s->own_host) free(s->hptr);
    if (s->w.st) md__storage_put(x->d, s->w.st);
  }
}

/* Waits for everything queued on an asynchronous execution's stream, then judges the pending
 * kernels in order. A kernel that failed decides the status (it ran before anything that failed
 * after it was queued); else a failed synchronization does, over NONE or OUTPUT_INSUFFICIENT_SIZE. */
static md_status flush(md__exec *x, md_stream *stream, pending *pend, uint32_t *npend, uint64_t *t_queued,
                       uint64_t *dev_ns, md_status st) {
  md_device *d = x->d;
  const md__model *m = x->p->model;
  char err[256] = "";
  md_status ss = d->be->stream_sync(d->bk, stream, err, sizeof err);
  /* Unmodelled, the device time is the wall time from the first queued work to its end. */
  uint64_t now = now_ns();
  if (!time_modelled(d)) *dev_ns += now - *t_queued;
  *t_queued = now;
  bool kfailed = false;
  for (uint32_t i = 0; i < *npend; i++) {
    pending *q = &pend[i];
    md__kctx_release(&q->kctx);
    free(q->tt);
    q->tt = NULL;
    if (kfailed || q->kst.code == MD_NONE) continue;
    /* SPEC 4: a kernel that reports failure makes the execution GENERAL_FAILURE. */
    kfailed = true;
    md_status ret = q->kst.code == MD_DEVICE_UNAVAILABLE ? MD_DEVICE_UNAVAILABLE : MD_GENERAL_FAILURE;
    st = md__fail(ret, "execute: operation %u (%s): kernel failed: %s", q->op, m->operations[q->op].name,
                  q->kst.message);
  }
  *npend = 0;
  if (!kfailed && ss != MD_NONE && (st == MD_NONE || st == MD_OUTPUT_INSUFFICIENT_SIZE))
    st = md__fail(ss == MD_DEVICE_UNAVAILABLE ? ss : MD_GENERAL_FAILURE, "execute: device work failed: %s", err);
  return st;
}

/* Whether operation n writes a host operand (a parameter) that what follows reads on the host. */
static bool writes_host(const md__model *m, const opnd_state *os, uint32_t n) {
  const md__operation *op = &m->operations[n];
  for (uint32_t j = 0; j < op->n_outputs; j++)
    if (os[op->outputs[j]].host) return true;
  return false;
}

md_status md__exec_issue(md__exec *x, bool async) {
  md_device *d = x->d;
  const md__model *m = x->p->model;
  md__run *r = &x->run;
  r->t0 = now_ns();
  r->dev_ns = 0;
  r->ctx = ctx_get(x->p);
  if (!r->ctx) return r->st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "execute: out of host memory");
  md__exec_ctx *ctx = r->ctx;
  /* An asynchronous execution queues its device work on the context's stream, so its kernels
   * run on the device's workers, after execute_async has returned. */
  r->stream = NULL;
  if (async && !ctx->stream && d->be->stream_create(d->bk, &ctx->stream) != MD_NONE) ctx->stream = NULL;
  if (async) r->stream = ctx->stream;
  md_stream *stream = r->stream;
  opnd_state *os = ctx->os;
  memset(os, 0, ctx->n * sizeof *os);
  r->pend = NULL;
  r->npend = 0;
  r->t_queued = now_ns();
  if (stream && !(r->pend = calloc(m->n_operations ? m->n_operations : 1, sizeof(pending))))
    return r->st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "execute: out of host memory");
  pending *pend = r->pend;
  md_status st = bind_inputs(x, ctx, stream, &r->dev_ns);
  if (st != MD_NONE) md__fail_prefix(st, "execute");
  for (uint32_t n = 0; n < m->n_operations && st == MD_NONE; n++) {
    st = run_op(x, ctx, stream, n, pend ? &pend[r->npend] : NULL, &r->dev_ns);
    if (st != MD_NONE) {
      md__fail_prefix(st, "execute: operation %u (%s)", n, m->operations[n].name);
    } else if (pend) {
      /* `refused` is ours to read: nothing was queued that could write it */
      if (pend[r->npend++].refused || writes_host(m, os, n))
        st = flush(x, stream, pend, &r->npend, &r->t_queued, &r->dev_ns, st);
    }
  }
  bool short_out = false;
  if (st == MD_NONE) {
    for (uint32_t i = 0; i < x->n_out; i++) {
      const io_arg *a = &x->out[i];
      const opnd_state *s = &os[m->outputs[i]];
      md_output_shape *sh = &x->shapes[i];
      sh->rank = s->rank;
      memcpy(sh->dims, s->dims, sizeof sh->dims);
      sh->is_sufficient = 1;
      if (a->kind == ARG_POOL) {
        uint64_t cap = a->whole ? x->maps[a->pool].size : a->length;
        if (s->bytes > cap) {
          sh->is_sufficient = 0;
          short_out = true;
        }
      }
    }
    if (short_out && MD_MUTANT(insufficient_all_flagged))
      for (uint32_t i = 0; i < x->n_out; i++) x->shapes[i].is_sufficient = 0; /* Mutant: every output. */
    if (short_out && MD_MUTANT(short_output_overruns))
      for (uint32_t i = 0; i < x->n_out; i++) { /* Mutant: a short output gets what fits in its pool. */
        const io_arg *a = &x->out[i];
        const opnd_state *s = &os[m->outputs[i]];
        if (a->kind != ARG_POOL || a->whole || x->shapes[i].is_sufficient || s->host) continue;
        uint64_t n = x->maps[a->pool].size - a->offset < s->bytes ? x->maps[a->pool].size - a->offset : s->bytes;
        char err[256];
        d->be->read(d->bk, stream, x->maps[a->pool].base + a->offset, s->dev, s->dev_off, n, err, sizeof err);
      }
    if (short_out) {
      char msg[MD__ERROR_MAX];
      size_t used = (size_t)snprintf(msg, sizeof msg, "execute: outputs too small:");
      for (uint32_t i = 0; i < x->n_out && used < sizeof msg; i++)
        if (!x->shapes[i].is_sufficient)
          used += (size_t)snprintf(msg + used, sizeof msg - used, " output %u needs %llu bytes, has %llu;", i,
                                   (unsigned long long)os[m->outputs[i]].bytes, (unsigned long long)x->out[i].length);
      st = md__fail(MD_OUTPUT_INSUFFICIENT_SIZE, "%s", msg);
    }
  }
  if (st == MD_NONE) {
    /* Results to the pools; then the device outputs take their new dims. */
    for (uint32_t i = 0; i < x->n_out && st == MD_NONE; i++) {
      const io_arg *a = &x->out[i];
      opnd_state *s = &os[m->outputs[i]];
      if (a->kind != ARG_POOL || s->bytes == 0) continue;
      uint8_t *dst = x->maps[a->pool].base + a->offset;
      if (s->host) {
        memcpy(dst, s->hptr, s->bytes);
        continue;
      }
      char err[256] = "";
      st = d->be->read(d->bk, stream, dst, s->dev, s->dev_off, s->bytes, err, sizeof err);
      if (st != MD_NONE) md__fail(st, "execute: output %u: copying from the device: %s", i, err);
      r->dev_ns += dev_time(d, 0, s->bytes, 0);
    }
  }
  return r->st = st;
}

md_status md__exec_finish(md__exec *x, const char *issue_msg) {
  md_device *d = x->d;
  const md__model *m = x->p->model;
  md__run *r = &x->run;
  md_status st = r->st;
  if (!r->ctx) {
    if (issue_msg) md__fail(st, "%s", issue_msg);
    x->timing.on_device_ns = x->timing.in_driver_ns = UINT64_MAX;
    memset(x->shapes, 0, x->n_out * sizeof *x->shapes);
    return st;
  }
  if (st != MD_NONE && issue_msg) md__fail(st, "%s", issue_msg);   /* issued on another thread */
  opnd_state *os = r->ctx->os;
  if (r->stream) {
    /* One synchronization for the whole execution, on every path: nothing is released while
     * the device may still use it. */
    st = flush(x, r->stream, r->pend, &r->npend, &r->t_queued, &r->dev_ns, st);
  }
  free(r->pend);
  r->pend = NULL;
  if (st == MD_DEVICE_UNAVAILABLE) md__device_lost(d, md__last_error());
  if (st == MD_NONE) {
    for (uint32_t i = 0; i < x->n_out; i++) {
      opnd_state *s = &os[m->outputs[i]];
      if (x->out[i].kind == ARG_TOKEN && s->w.st) md__buffer_write_commit(d, x->out[i].buf, &s->w, s->rank, s->dims);
    }
    x->timing.on_device_ns = r->dev_ns;
    x->timing.in_driver_ns = now_ns() - r->t0;
  } else {
    deinit_device_outputs(x, os);
    if (st != MD_OUTPUT_INSUFFICIENT_SIZE) memset(x->shapes, 0, x->n_out * sizeof *x->shapes);
    x->timing.on_device_ns = x->timing.in_driver_ns = UINT64_MAX;
  }
  release_states(x, os);
  ctx_put(x->p, r->ctx);
  r->ctx = NULL;
  return st;
}

md_status md__exec_run(md__exec *x, bool async) {
  md__exec_issue(x, async);
  return md__exec_finish(x, NULL);
}

void md__exec_results(const md__exec *x, md_status st, md_output_shape *shapes, uint32_t n_shapes,
                      md_timing *timing) {
  if (shapes && n_shapes) {
    memset(shapes, 0, n_shapes * sizeof *shapes);
    if (st == MD_NONE || st == MD_OUTPUT_INSUFFICIENT_SIZE)
      memcpy(shapes, x->shapes, (n_shapes < x->n_out ? n_shapes : x->n_out) * sizeof *shapes);
  }
  if (timing) *timing = x->timing;
}

md_status md__execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                      md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  md__exec *x;   /* shapes and timing were cleared by the entry point (driver.c) */
  md_status st = md__exec_create(d, "execute", client, prepared, req, &x);
  if (st != MD_NONE) return st;
  st = md__exec_run(x, false);
  md__exec_results(x, st, shapes, n_shapes, timing);
  md__exec_free(x);
  return st;
}
