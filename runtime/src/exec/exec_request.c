/* exec_request.c - validating an execution request (SPEC section 4) and taking everything the
 * execution will use (exec_int.h's md__exec): the handles, the pools, each argument. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mutant.h"
#include "error.h"
#include "exec_int.h"

#define TOKFMT "0x%016llx"
#define TOK(t) ((unsigned long long)(t))

/* ---- lifetime of an md__exec ---- */

void md__exec_free(md__exec *x) {
  md_device *d = x->d;
  for (uint32_t i = 0; x->in && i < x->n_in; i++)
    if (!x->in[i].rd_pinned) md__storage_put(d, x->in[i].rd);
  for (uint32_t i = 0; x->maps && i < x->n_pools; i++) {
    if (x->maps[i].scope) md__mapping_release(&x->maps[i]);
    md__handle_unuse(&d->ht, &x->tok[i]);
    md__handle_unuse(&d->ht, &x->reg[i]);
  }
  if (x->ee) md__handle_put(&d->ht, x->ee);
  md__handle_unuse(&d->ht, &x->pe);
  md__handle_unuse(&d->ht, &x->ce);
  free(x);
}

/* One allocation for an execution and its per-argument and per-pool arrays. */
static md__exec *exec_alloc(uint32_t n_in, uint32_t n_out, uint32_t n_pools) {
#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)
  size_t off_in = ALIGN8(sizeof(md__exec));
  size_t off_out = off_in + ALIGN8((size_t)n_in * sizeof(io_arg));
  size_t off_maps = off_out + ALIGN8((size_t)n_out * sizeof(io_arg));
  size_t off_tok = off_maps + ALIGN8((size_t)n_pools * sizeof(md__mapping));
  size_t off_reg = off_tok + ALIGN8((size_t)n_pools * sizeof(md__use));
  size_t off_shapes = off_reg + ALIGN8((size_t)n_pools * sizeof(md__use));
  size_t off_plans = off_shapes + ALIGN8((size_t)n_out * sizeof(md_output_shape));
  size_t total = off_plans + (size_t)n_pools * sizeof(md__pool_plan);
#undef ALIGN8
  uint8_t *p = calloc(1, total);
  if (!p) return NULL;
  md__exec *x = (md__exec *)p;
  x->in = (io_arg *)(p + off_in);
  x->out = (io_arg *)(p + off_out);
  x->maps = (md__mapping *)(p + off_maps);
  x->tok = (md__use *)(p + off_tok);
  x->reg = (md__use *)(p + off_reg);
  x->shapes = (md_output_shape *)(p + off_shapes);
  x->plans = (md__pool_plan *)(p + off_plans);
  x->n_in = n_in;
  x->n_out = n_out;
  x->n_pools = n_pools;
  return x;
}

/* "execute: request pool 3" without formatting on every call: the first 64 names per entry
 * point are made once. */
static char pool_names[2][64][40];
static pthread_once_t pool_names_once = PTHREAD_ONCE_INIT;

static void make_pool_names(void) {
  for (uint32_t i = 0; i < 64; i++) {
    snprintf(pool_names[0][i], sizeof pool_names[0][i], "execute: request pool %u", i);
    snprintf(pool_names[1][i], sizeof pool_names[1][i], "execute_async: request pool %u", i);
  }
}

static const char *pool_what(const char *fn, uint32_t i, char *buf, size_t n) {
  int async = strcmp(fn, "execute_async") == 0;
  if (i < 64 && (async || strcmp(fn, "execute") == 0)) {
    pthread_once(&pool_names_once, make_pool_names);
    return pool_names[async][i];
  }
  snprintf(buf, n, "%s: request pool %u", fn, i);
  return buf;
}

/* ---- validation ---- */

/* The live handle h of `kind` owned by client, for request pool i (in *out: through the
 * thread's cache when x->cached, else a reference). A refusal names the pool: "<fn>: pool <i>:
 * <what> 0x..: <why>". */
static md_status owned_pool(md__exec *x, const char *fn, uint32_t i, md_handle h, md__kind kind, const char *what,
                            md__use *out) {
  md_device *d = x->d;
  md_status st;
  if (x->cached) {
    st = md__owned_use(d, fn, what, x->client, h, kind, out);
  } else {
    out->slot = -1;
    st = md__owned_get(d, fn, what, x->client, h, kind, &out->e);
  }
  if (st == MD_NONE) return st;
  out->e = NULL;
  char buf[64];
  snprintf(buf, sizeof buf, "pool %u: %s", i, what);
  /* Again with the pool named in the message (a dead handle cannot come back to life). */
  md__hentry *again;
  if (md__owned_get(d, fn, buf, x->client, h, kind, &again) == MD_NONE) md__handle_put(&d->ht, again);
  return st;
}

/* Whether an argument of req names pool i. */
static bool pool_used(const md_request *req, uint32_t i) {
  for (uint32_t k = 0; k < req->n_inputs + req->n_outputs; k++) {
    const md_request_arg *a = k < req->n_inputs ? &req->inputs[k] : &req->outputs[k - req->n_inputs];
    if (!a->has_no_value && a->pool == i) return true;
  }
  return false;
}

static md_status check_arg(md__exec *x, const char *fn, const md_request_arg *a, uint32_t is_out, uint32_t i,
                           io_arg *out) {
  const md__model *m = x->p->model;
  const md__operand *o = &m->operands[is_out ? m->outputs[i] : m->inputs[i]];
  const char *io = is_out ? "output" : "input";
  char s1[64], s2[64];
  if (a->has_no_value) {
    out->kind = ARG_NONE;
    return MD_NONE;
  }
  if (a->pool >= x->n_pools)
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: pool %u is out of range (%u pools)", fn, io, i, a->pool, x->n_pools);
  if (a->rank > MD_MAX_RANK || (a->rank && !a->dims))
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: rank %u %s", fn, io, i, a->rank,
                    a->rank > MD_MAX_RANK ? "exceeds MD_MAX_RANK (8)" : "has NULL dims");
  if (a->rank && md__type_is_scalar(o->type))
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: a scalar takes no dims (rank %u)", fn, io, i, a->rank);
  out->pool = a->pool;
  uint32_t axis;
  if (md__dims_combine(o->rank, o->dims, a->rank, a->dims, &out->rank, out->dims, &axis))
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: dims %s do not combine with the model's %s", fn, io, i,
                    md__dims_str(a->rank, a->dims, s1, sizeof s1), md__dims_str(o->rank, o->dims, s2, sizeof s2));

  md__hentry *te = x->tok[a->pool].e;
  if (te) {
    md__buffer *b = te->obj;
    md_token t = x->req->pools[a->pool].token;
    out->kind = ARG_TOKEN;
    out->buf = b;
    if ((a->offset || a->length) && !(MD_MUTANT(token_output_offlen_unchecked) && is_out)) /* Mutant: inputs only. */
      return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: token " TOKFMT ": offset %llu and length %llu must be 0", fn, io,
                      i, TOK(t), (unsigned long long)a->offset, (unsigned long long)a->length);
    /* (Mutant async_role_unchecked: execute_async leaves the role to the worker, which never checks.) */
    if (!md__buffer_has_role(te, x->prepared, is_out, i) && !(MD_MUTANT(async_role_unchecked) && !strcmp(fn, "execute_async")))
      return md__fail(MD_INVALID_ARGUMENT,
                      "%s: %s %u: token " TOKFMT " was not allocated for this role (prepared model 0x%016llx, %s %u)",
                      fn, io, i, TOK(t), (unsigned long long)x->prepared, io, i);
    /* Outputs combine with what the buffer may ever hold (its initial dims, which never change:
     * read without its lock); inputs with what it holds now, read once with their storage
     * (md__exec_create's snapshot) and combined there, still before any initialization check. */
    if (!is_out) return MD_NONE;
    uint32_t brank = b->init_rank, cur[MD_MAX_RANK];
    const uint32_t *bdims = md__buf_init_dims(b);
    if (MD_MUTANT(output_dims_vs_current)) { /* Mutant: the buffer's current dims. */
      md__spin_lock(&b->lock);
      brank = b->cur_rank;
      if (brank) memcpy(cur, md__buf_cur_dims(b), brank * sizeof *cur);
      md__spin_unlock(&b->lock);
      bdims = cur;
    }
    if (md__dims_combine(out->rank, out->dims, brank, bdims, &out->rank, out->dims, &axis))
      return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: token " TOKFMT ": dims %s do not combine with the buffer's %s",
                      fn, io, i, TOK(t), md__dims_str(out->rank, out->dims, s1, sizeof s1),
                      md__dims_str(b->init_rank, md__buf_init_dims(b), s2, sizeof s2));
    return MD_NONE;
  }

  /* A registered pool is used exactly as the descriptor it was registered with (SPEC 9). */
  const md_memory *mem = x->reg[a->pool].e ? &((const md__regpool *)x->reg[a->pool].e->obj)->mem
                                          : &x->req->pools[a->pool].memory;
  out->kind = ARG_POOL;
  out->offset = a->offset;
  out->length = a->length;
  uint32_t need_prot = is_out ? PROT_WRITE : PROT_READ;
  if (!(mem->prot & need_prot))
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: pool %u is not %s (prot %u)", fn, io, i, a->pool,
                    is_out ? "writable" : "readable", mem->prot);
  uint64_t size = x->plans[a->pool].logical;
  if (mem->kind == MD_MEM_HARDWARE_BUFFER) {
    /* Non-BLOB hardware buffers have no logical size: the argument is the whole buffer. */
    if (a->offset || a->length)
      return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: pool %u is a non-BLOB hardware buffer: offset and length must be 0",
                      fn, io, i, a->pool);
    out->whole = true;
  } else if ((a->offset > size || a->length > size - a->offset) &&
             !(MD_MUTANT(output_arg_range_unchecked) && is_out)) { /* Mutant: inputs only. */
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: offset %llu + length %llu is past the end of pool %u (%llu bytes)",
                    fn, io, i, (unsigned long long)a->offset, (unsigned long long)a->length, a->pool,
                    (unsigned long long)size);
  }
  bool known = md__type_is_scalar(o->type) || md__dims_known(out->rank, out->dims);
  uint64_t bytes = known ? md__opnd_bytes(o->type, out->rank, out->dims) : 0;
  if (!is_out && !known)
    return md__fail(MD_INVALID_ARGUMENT, "%s: input %u: dims %s are not fully known", fn, i,
                    md__dims_str(out->rank, out->dims, s1, sizeof s1));
  /* SPEC 8.17 (v1.2): dims whose byte size does not fit 64 bits have no size (md__type_bytes
   * saturates), so no length matches them; a saturated size taken for a large one made an
   * output "short" and failed it at execution instead. */
  if (known && bytes == UINT64_MAX && !MD_MUTANT(size_wrap_unchecked))
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: dims %s have no byte size: it does not fit 64 bits", fn, io, i,
                    md__dims_str(out->rank, out->dims, s1, sizeof s1));
  /* SPEC 8.1: an input's length is its byte size; an output's non-zero length may be short of
   * its fully known dims (OUTPUT_INSUFFICIENT_SIZE, decided at execution), never longer.
   * (Mutants output_/input_length_larger_accepted: a longer argument is taken for one that fits;
   * short_output_invalid: a short output is invalid.) */
  bool bad_length = is_out ? a->length > bytes && !MD_MUTANT(output_length_larger_accepted)
                           : a->length != bytes && !(MD_MUTANT(input_length_larger_accepted) && a->length > bytes);
  if (is_out && MD_MUTANT(short_output_invalid)) bad_length = a->length && a->length != bytes;
  if (mem->kind != MD_MEM_HARDWARE_BUFFER && known && bad_length)
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s %u: length %llu != %llu bytes of dims %s", fn, io, i,
                    (unsigned long long)a->length, (unsigned long long)bytes,
                    md__dims_str(out->rank, out->dims, s1, sizeof s1));
  return MD_NONE;
}

/* md__exec_create's steps, in SPEC 4's order. Each returns the status of what it checked (with
 * its message); what it took stays in x for md__exec_free. */

/* The client and the prepared model (from the thread's reference cache for a synchronous
 * execution, plain references for an asynchronous one), then the request's counts and arrays. */
static md_status take_handles(md__exec *x, const char *fn, const md_request *req) {
  md_device *d = x->d;
  md_status st = x->cached ? md__client_use(d, fn, x->client, &x->ce) : md__client_get(d, fn, x->client, &x->ce.e);
  if (st != MD_NONE) return st;
  st = x->cached ? md__owned_use(d, fn, "prepared model", x->client, x->prepared, MD__KIND_PREPARED, &x->pe)
                 : md__owned_get(d, fn, "prepared model", x->client, x->prepared, MD__KIND_PREPARED, &x->pe.e);
  if (st != MD_NONE) return st;
  x->p = x->pe.e->obj;
  const md__model *m = x->p->model;
  if (!req) return md__fail(MD_INVALID_ARGUMENT, "%s: request is NULL", fn);
  x->req = req;
  if (req->n_inputs != m->n_inputs || req->n_outputs != m->n_outputs)
    return md__fail(MD_INVALID_ARGUMENT, "%s: request has %u inputs and %u outputs, the model %u and %u", fn,
                    req->n_inputs, req->n_outputs, m->n_inputs, m->n_outputs);
  if ((req->n_inputs && !req->inputs) || (req->n_outputs && !req->outputs) || (req->n_pools && !req->pools))
    return md__fail(MD_INVALID_ARGUMENT, "%s: request %s is NULL with a non-zero count", fn,
                    req->n_inputs && !req->inputs ? "inputs" : req->n_outputs && !req->outputs ? "outputs" : "pools");
  x->n_pools = req->n_pools;
  return MD_NONE;
}

/* Pools: tokens and registered pools valid for this client, memories valid. */
static md_status take_pools(md__exec *x, const char *fn, const md_request *req) {
  md_status st = MD_NONE;
  for (uint32_t i = 0; i < x->n_pools && st == MD_NONE; i++) {
    const md_request_pool *rp = &req->pools[i];
    char buf[64];
    switch (rp->is_token) {
      case 1:
        if (MD_MUTANT(unused_token_unchecked) && !pool_used(req, i)) break; /* Mutant: not looked up. */
        st = owned_pool(x, fn, i, rp->token, MD__KIND_BUFFER, "token", &x->tok[i]);
        if (st == MD_NONE && MD_MUTANT(unused_token_init_checked) && !pool_used(req, i) &&
            !((md__buffer *)x->tok[i].e->obj)->initialized) /* Mutant: an unused token must be initialized. */
          st = md__fail(MD_GENERAL_FAILURE, "%s: pool %u: token is not initialized", fn, i);
        break;
      case 2:
        st = owned_pool(x, fn, i, rp->token, MD__KIND_POOL, "registered pool", &x->reg[i]);
        if (st == MD_NONE) x->plans[i] = ((const md__regpool *)x->reg[i].e->obj)->plan;
        break;
      case 0:
        st = md__pool_validate(&rp->memory, MD__POOL_IO, pool_what(fn, i, buf, sizeof buf), &x->plans[i]);
        break;
      default:
        st = md__fail(MD_INVALID_ARGUMENT, "%s: request pool %u: is_token %u is not 0 (memory), 1 (token) or 2 "
                      "(registered pool)", fn, i, rp->is_token);
    }
  }
  return st;
}

/* Arguments: counts, dims, bounds, roles; then a token written by this request is used nowhere
 * else in it (mutant output_alias_unchecked: not checked). */
static md_status check_args(md__exec *x, const char *fn, const md_request *req) {
  md_status st = MD_NONE;
  for (uint32_t i = 0; i < x->n_in && st == MD_NONE; i++) st = check_arg(x, fn, &req->inputs[i], 0, i, &x->in[i]);
  for (uint32_t i = 0; i < x->n_in && st == MD_NONE && MD_MUTANT(init_checked_before_outputs); i++)
    if (x->in[i].kind == ARG_TOKEN && !x->in[i].buf->initialized) /* Mutant: before the outputs are checked. */
      st = md__fail(MD_GENERAL_FAILURE, "%s: input %u: buffer is not initialized", fn, i);
  for (uint32_t i = 0; i < x->n_out && st == MD_NONE; i++) st = check_arg(x, fn, &req->outputs[i], 1, i, &x->out[i]);
  if (st != MD_NONE) return st;
  for (uint32_t i = 0; i < x->n_out && !MD_MUTANT(output_alias_unchecked); i++) {
    if (x->out[i].kind != ARG_TOKEN) continue;
    md_token t = req->pools[x->out[i].pool].token;
    for (uint32_t j = 0; j < x->n_in + x->n_out; j++) {
      const io_arg *o = j < x->n_in ? &x->in[j] : &x->out[j - x->n_in];
      if (o == &x->out[i] || o->kind != ARG_TOKEN || req->pools[o->pool].token != t) continue;
      return md__fail(MD_INVALID_ARGUMENT, "%s: output %u: token " TOKFMT " is also %s %u of the request", fn, i,
                      TOK(t), j < x->n_in ? "input" : "output", j < x->n_in ? j : j - x->n_in);
    }
  }
  return MD_NONE;
}

/* One token input's snapshot: its current dims combined with the argument's (*st, if still
 * NONE, becomes their INVALID_ARGUMENT), and its storage when it can be read; the read state. */
static md__read_state snapshot_input(md__exec *x, const char *fn, uint32_t i, md_status *st) {
  md_device *d = x->d;
  io_arg *a = &x->in[i];
  if (MD_MUTANT(init_unchecked)) {
    /* Mutant: an uninitialized buffer's storage is read as it is. */
    md__spin_lock(&a->buf->lock);
    a->rd = a->buf->st;
    if (a->rd) md__ref_get(&a->rd->ref);
    md__spin_unlock(&a->buf->lock);
    return a->rd ? MD__READ_OK : MD__READ_UNINITIALIZED;
  }
  uint32_t rank, dims[MD_MAX_RANK], axis;
  if (MD_MUTANT(async_init_deferred) && !strcmp(fn, "execute_async")) {
    /* Mutant: execute_async reads what the buffer holds and lets the run find it uninitialized. */
    md__spin_lock(&a->buf->lock);
    bool ready = a->buf->initialized;
    a->rd = a->buf->st;
    if (a->rd) md__ref_get(&a->rd->ref);
    md__spin_unlock(&a->buf->lock);
    if (a->rd && !ready) {
      x->inject = MD_GENERAL_FAILURE;
      snprintf(x->inject_msg, sizeof x->inject_msg, "input %u: buffer is not initialized", i);
      return MD__READ_OK;
    }
    md__storage_put(d, a->rd);
    a->rd = NULL;
  }
  /* A synchronous execution reads through its thread's pin on the storage (no shared
   * count moves); an async one, whose handles are plain references, takes a reference. */
  bool again = false;   /* the same pool read by an earlier input: its pin may not move */
  for (uint32_t j = 0; j < i; j++) again |= x->in[j].kind == ARG_TOKEN && x->in[j].pool == a->pool;
  void **pin = x->cached && !again ? md__use_pin(&x->tok[a->pool]) : NULL;
  md__read_state rs = md__buffer_read_pinned(d, a->buf, pin, &a->rd, &rank, dims);
  a->rd_pinned = pin && rs == MD__READ_OK;
  if (MD_MUTANT(input_dims_vs_initial)) { /* Mutant: combined with the buffer's initial dims. */
    rank = a->buf->init_rank;
    if (rank) memcpy(dims, md__buf_init_dims(a->buf), rank * sizeof *dims);
  }
  if (*st == MD_NONE && md__dims_combine(a->rank, a->dims, rank, dims, &a->rank, a->dims, &axis)) {
    char s1[64], s2[64];
    *st = md__fail(MD_INVALID_ARGUMENT, "%s: input %u: token " TOKFMT ": dims %s do not combine with the buffer's %s",
                   fn, i, TOK(x->req->pools[a->pool].token), md__dims_str(a->rank, a->dims, s1, sizeof s1),
                   md__dims_str(rank, dims, s2, sizeof s2));
  }
  return rs;
}

/* Token inputs: one snapshot of each buffer (its current dims, and its storage when it can be
 * read), then every dims check (INVALID_ARGUMENT), then every initialization check
 * (GENERAL_FAILURE): the role comes first, SPEC 8.5. */
static md_status snapshot_inputs(md__exec *x, const char *fn, const md_request *req) {
  md__read_state *rs = NULL, rs_small[8];
  if (x->n_in) rs = x->n_in <= 8 ? rs_small : malloc(x->n_in * sizeof *rs);
  if (x->n_in && !rs) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "%s: out of memory", fn);
  md_status st = MD_NONE;
  for (uint32_t i = 0; i < x->n_in; i++)
    if (x->in[i].kind == ARG_TOKEN) rs[i] = snapshot_input(x, fn, i, &st);
  for (uint32_t i = 0; i < x->n_in && st == MD_NONE; i++) {
    io_arg *a = &x->in[i];
    if (a->kind != ARG_TOKEN || rs[i] == MD__READ_OK) continue;
    st = md__fail(MD_GENERAL_FAILURE, "%s: input %u: token " TOKFMT ": %s", fn, i, TOK(req->pools[a->pool].token),
                  MD_MUTANT(init_unchecked) ? "buffer has no storage"
                  : rs[i] == MD__READ_UNINITIALIZED ? "buffer is not initialized"
                                                    : "buffer is being written by another call");
  }
  if (rs != rs_small) free(rs);
  return st;
}

/* Maps the memory pools, last: a pool that cannot be mapped is GENERAL_FAILURE. */
static md_status map_pools(md__exec *x, const char *fn, const md_request *req) {
  md__client *c = x->ce.e->obj;
  for (uint32_t i = 0; i < x->n_pools; i++) {
    char buf[64];
    if (x->reg[i].e && MD_MUTANT(registered_pool_rereads_fd)) {
      /* Mutant: the pool is mapped again through the fd number it was registered with. */
      md_status st = md__pool_acquire(c->pools, &((const md__regpool *)x->reg[i].e->obj)->mem, MD__POOL_IO,
                                      pool_what(fn, i, buf, sizeof buf), NULL, &x->maps[i]);
      if (st != MD_NONE) return st;
      continue;
    }
    if (x->reg[i].e) {
      /* Mapped at registration; the entry this execution holds keeps the mapping. */
      x->maps[i] = ((const md__regpool *)x->reg[i].e->obj)->map;
      x->maps[i].scope = NULL;
      continue;
    }
    if (req->pools[i].is_token) continue;
    md_status st = md__pool_acquire(c->pools, &req->pools[i].memory, MD__POOL_IO, pool_what(fn, i, buf, sizeof buf),
                                    &x->plans[i], &x->maps[i]);
    if (st != MD_NONE) return st;
  }
  return MD_NONE;
}

/* The backend's fault point (fault plans count valid executions): kernel_fail is reported by
 * this execution's first kernel; stall parks an async execution until it is released
 * (exec_async.c; a synchronous one runs as usual); device_lost fails a synchronous call itself
 * and an async one from its wait (SPEC 8.9, v1.2: the device is lost during the execution; the
 * call returns NONE and an event). */
static md_status pass_fault_point(md__exec *x, const char *fn) {
  md_status st = md__fault_point(x->d, MD_FAULT_EXECUTION, fn);
  if (st == MD_GENERAL_FAILURE || (st == MD_DEVICE_UNAVAILABLE && !x->cached && !MD_MUTANT(async_device_lost_at_call))) {
    x->inject = st;
    snprintf(x->inject_msg, sizeof x->inject_msg, "%s", md__last_error());
    md__clear_error();
    return MD_NONE;
  }
  if (st == MD_MISSED_DEADLINE_TRANSIENT) {
    x->stall = true;
    md__clear_error();
    return MD_NONE;
  }
  return st;
}

/* SPEC 4: a failed execution leaves every device output of the request uninitialized, also when
 * it fails before running: the outputs whose tokens were resolved, and, when it failed before
 * resolving them (argument counts, the prepared model), every output naming a live token of
 * this client, looked up quietly (the failure's message stays). */
static void uninit_outputs(md__exec *x, const char *fn, const md_request *req) {
  md_device *d = x->d;
  if (!req || !x->ce.e || !req->outputs || !req->pools || MD_MUTANT(no_deinit) ||
      (MD_MUTANT(async_failure_keeps_outputs) && !strcmp(fn, "execute_async"))) /* Mutant: sync only. */
    return;
  for (uint32_t i = 0; i < req->n_outputs; i++) {
    const md_request_arg *a = &req->outputs[i];
    if (a->has_no_value || a->pool >= req->n_pools || req->pools[a->pool].is_token != 1) continue;
    if (a->pool < x->n_pools && x->tok[a->pool].e) {
      md__buffer_uninit(x->tok[a->pool].e->obj);
      continue;
    }
    md__hentry *te = md__handle_get(&d->ht, req->pools[a->pool].token, MD__KIND_BUFFER);
    if (!te) continue;
    if (te->owner == x->client) md__buffer_uninit(te->obj);
    md__handle_put(&d->ht, te);
  }
}

md_status md__exec_create(md_device *d, const char *fn, md_handle client, md_handle prepared,
                          const md_request *req, md__exec **out) {
  *out = NULL;
  /* Sized from the request; the counts are checked against the model (take_handles). */
  uint32_t n_in = req ? req->n_inputs : 0, n_out = req ? req->n_outputs : 0, n_pools = req ? req->n_pools : 0;
  md__exec *x = exec_alloc(n_in, n_out, n_pools);
  if (!x) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "%s: out of memory", fn);
  x->d = d;
  x->client = client;
  x->prepared = prepared;
  x->n_pools = 0;   /* nothing of the pools is held yet (md__exec_free walks n_pools) */
  /* A synchronous execution ends on this thread: its handles come from the thread's reference
   * cache (no shared write for a handle used again); an asynchronous one holds references. */
  x->cached = strcmp(fn, "execute") == 0;
  x->ce.slot = x->pe.slot = -1;
  md_status st;
  if ((st = take_handles(x, fn, req)) != MD_NONE || (st = take_pools(x, fn, req)) != MD_NONE ||
      (st = check_args(x, fn, req)) != MD_NONE || (st = snapshot_inputs(x, fn, req)) != MD_NONE ||
      (st = map_pools(x, fn, req)) != MD_NONE || (st = pass_fault_point(x, fn)) != MD_NONE) {
    uninit_outputs(x, fn, req);
    md__exec_free(x);
    return st;
  }
  if (MD_MUTANT(release_under_kernel) && strcmp(fn, "execute_async") == 0) { /* Mutant: an async execution drops its prepared model. */
    md__handle_unuse(&d->ht, &x->pe);
  }
  x->req = NULL;
  *out = x;
  return MD_NONE;
}
