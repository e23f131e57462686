/* memory_domain.c - the memory-domain calls (SPEC section 3): allocate, copy_from, copy_to and
 * free_buffer, on the buffers of buffer.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mutant.h"
#include "error.h"
#include "objects_int.h"

#define TOKFMT "0x%016llx"
#define TOK(t) ((unsigned long long)(t))

/* ---- allocate ---- */

static const char *io_name(uint32_t is_output) { return is_output ? "output" : "input"; }

/* Whether a role refers to prepared model `model`. */
static bool role_names(const md_buffer_role *in, uint32_t n_in, const md_buffer_role *out, uint32_t n_out,
                       uint32_t model) {
  for (uint32_t i = 0; i < n_in + n_out; i++)
    if ((i < n_in ? in[i] : out[i - n_in]).model_index == model) return true;
  return false;
}

/* The counts and pointers of an allocate call (before any handle is looked up). */
static md_status check_args(const md_handle *prepared, uint32_t n_prepared, const md_buffer_role *input_roles,
                            uint32_t n_input_roles, const md_buffer_role *output_roles, uint32_t n_output_roles,
                            uint32_t desc_rank, const uint32_t *desc_dims) {
  uint32_t n_roles = n_input_roles + n_output_roles;
  if (n_prepared == 0 || !prepared)
    return md__fail(MD_INVALID_ARGUMENT, "allocate: at least one prepared model is required (n_prepared %u)", n_prepared);
  if (n_roles == 0 || n_roles < n_input_roles) return md__fail(MD_INVALID_ARGUMENT, "allocate: at least one role is required");
  if ((n_input_roles && !input_roles) || (n_output_roles && !output_roles))
    return md__fail(MD_INVALID_ARGUMENT, "allocate: %s_roles is NULL with a count of %u",
                    n_input_roles && !input_roles ? "input" : "output",
                    n_input_roles && !input_roles ? n_input_roles : n_output_roles);
  if (desc_rank > MD_MAX_RANK || (desc_rank && !desc_dims))
    return md__fail(MD_INVALID_ARGUMENT, "allocate: desc rank %u %s", desc_rank,
                    desc_rank > MD_MAX_RANK ? "exceeds MD_MAX_RANK (8)" : "has NULL dims");
  return MD_NONE;
}

/* The roles of one allocate call, as md__allocate received them. */
typedef struct role_args {
  const md_handle *prepared;
  md__hentry **pes;          /* the prepared models' entries, looked up */
  uint32_t n_prepared;
  const md_buffer_role *input_roles, *output_roles;
  uint32_t n_input_roles, n_output_roles;
} role_args;

/* Fills b->roles and checks each role: ranges, probability, duplicates, then agreement of its
 * operand with the first role's (type, scale, zero point) and its dims combined into
 * *rank/dims (which start as the desc's). *first gets the first role's operand. */
static md_status fill_roles(const role_args *a, md__buffer *b, uint32_t desc_rank, const md__operand **first,
                            uint32_t *rank, uint32_t dims[MD_MAX_RANK]) {
  uint32_t n_roles = a->n_input_roles + a->n_output_roles;
  *first = NULL;
  for (uint32_t i = 0; i < n_roles; i++) {
    uint32_t is_out = i >= a->n_input_roles;
    uint32_t pos = is_out ? i - a->n_input_roles : i;
    const md_buffer_role *r = is_out ? &a->output_roles[pos] : &a->input_roles[pos];
    if (r->model_index >= a->n_prepared)
      return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u: model_index %u is out of range (%u prepared models)",
                      io_name(is_out), pos, r->model_index, a->n_prepared);
    const md__model *m = ((md__prepared *)a->pes[r->model_index]->obj)->model;
    uint32_t n_io = is_out ? m->n_outputs : m->n_inputs;
    if (r->io_index >= n_io)
      return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u: io_index %u is out of range (model %u has %u %ss)",
                      io_name(is_out), pos, r->io_index, r->model_index, n_io, io_name(is_out));
    /* (Mutant prob_nan_accepted: p <= 0 || p > 1, false for NaN; output_role_prob_unchecked: inputs only.) */
    bool p_bad = MD_MUTANT(prob_nan_accepted) ? r->probability <= 0.0f || r->probability > 1.0f
                                              : !(r->probability > 0.0f && r->probability <= 1.0f);
    if (p_bad && !(MD_MUTANT(output_role_prob_unchecked) && is_out))
      return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u: probability %g is not in (0, 1]",
                      io_name(is_out), pos, (double)r->probability);
    md__role *role = &b->roles[i];
    role->prepared = a->prepared[r->model_index];
    role->is_output = is_out;
    role->index = r->io_index;
    for (uint32_t j = 0; j < i && !(MD_MUTANT(duplicate_output_roles_unchecked) && is_out); j++) { /* Mutant: inputs. */
      md__role *o = &b->roles[j];
      if (o->prepared == role->prepared && o->is_output == is_out && o->index == role->index) {
        uint32_t opos = o->is_output ? j - a->n_input_roles : j;
        return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u (model %u, %s %u) repeats %s role %u",
                        io_name(is_out), pos, r->model_index, io_name(is_out), r->io_index, io_name(o->is_output),
                        opos);
      }
    }
    uint32_t opnd = is_out ? m->outputs[r->io_index] : m->inputs[r->io_index];
    const md__operand *op = &m->operands[opnd];
    if (!*first) {
      *first = op;
    } else if ((op->type != (*first)->type || (op->scale != (*first)->scale && !MD_MUTANT(scale_not_compared)) ||
                op->zero_point != (*first)->zero_point) &&
               !(MD_MUTANT(agree_across_directions_unchecked) && is_out != (a->n_input_roles == 0))) {
      /* (Mutants: scale_not_compared; agree_across_directions_unchecked compares only roles of the first's direction.) */
      return md__fail(MD_INVALID_ARGUMENT,
                      "allocate: %s role %u (model %u, %s %u): operand type %d scale %g zero point %d disagrees "
                      "with the first role's type %d scale %g zero point %d",
                      io_name(is_out), pos, r->model_index, io_name(is_out), r->io_index, op->type,
                      (double)op->scale, op->zero_point, (*first)->type, (double)(*first)->scale,
                      (*first)->zero_point);
    }
    if (md__type_is_scalar(op->type)) {
      if (desc_rank)
        return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u is a scalar and takes no dims (desc rank %u)",
                        io_name(is_out), pos, desc_rank);
      continue;
    }
    uint32_t axis;
    if (md__dims_combine(*rank, dims, op->rank, op->dims, rank, dims, &axis)) {
      char x[64], y[64];
      return md__fail(MD_INVALID_ARGUMENT, "allocate: %s role %u (model %u, %s %u): dims %s do not combine with %s",
                      io_name(is_out), pos, r->model_index, io_name(is_out), r->io_index,
                      md__dims_str(op->rank, op->dims, x, sizeof x), md__dims_str(*rank, dims, y, sizeof y));
    }
  }
  return MD_NONE;
}

/* The buffer's device memory: now when its dims are fully known (INVALID_ARGUMENT for dims with
 * no byte size, SPEC 8.17; RESOURCE_EXHAUSTED_PERSISTENT past the device's size; a fault plan's
 * alloc_fail), else with the first write. */
static md_status buffer_storage(md_device *d, md__buffer *b, uint32_t rank, const uint32_t *dims) {
  uint64_t bytes = md__type_is_scalar(b->type) ? md_operand_type_size(b->type) : md__type_bytes(b->type, rank, dims);
  char s[96];
  if (bytes == UINT64_MAX && !MD_MUTANT(size_wrap_unchecked))
    return md__fail(MD_INVALID_ARGUMENT, "allocate: dims %s have no byte size: it does not fit 64 bits",
                    md__dims_str(rank, dims, s, sizeof s));
  if (bytes == UINT64_MAX || (bytes && bytes > d->info.mem_total))
    return md__fail(MD_MUTANT(mem_limit_always_transient) ? MD_RESOURCE_EXHAUSTED_TRANSIENT /* Mutant */
                                                          : MD_RESOURCE_EXHAUSTED_PERSISTENT,
                    "allocate: %llu bytes exceed the device's %llu bytes",
                    (unsigned long long)bytes, (unsigned long long)d->info.mem_total);
  md_status st = MD_MUTANT(fault_counts_refused_calls) ? MD_NONE : md__fault_point(d, MD_FAULT_ALLOCATE, "allocate");
  if (st != MD_NONE || !bytes) return st;
  st = d->be->alloc(d->bk, bytes, &b->first.mem);
  /* Out of device memory: storage that only idle threads' cached pins keep alive (buffers
   * that moved on to fresh storage) is not in use; take it back and try once more. */
  if (st == MD_RESOURCE_EXHAUSTED_TRANSIENT && md__htable_unpin_idle(&d->ht, NULL))
    st = d->be->alloc(d->bk, bytes, &b->first.mem);
  if (st != MD_NONE) return md__fail(st, "allocate: cannot allocate %llu bytes of device memory", (unsigned long long)bytes);
  b->first.capacity = bytes;
  b->st = &b->first;
  return MD_NONE;
}

md_status md__allocate(md_device *d, md_handle client, const md_buffer_desc *desc, const md_handle *prepared,
                       uint32_t n_prepared, const md_buffer_role *input_roles, uint32_t n_input_roles,
                       const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token) {
  if (!token) return md__fail(MD_INVALID_ARGUMENT, "allocate: token is NULL");
  *token = 0;
  md__hentry *ce;
  md_status st = md__client_get(d, "allocate", client, &ce);
  if (st != MD_NONE) return st;
  if (MD_MUTANT(fault_counts_refused_calls) && (st = md__fault_point(d, MD_FAULT_ALLOCATE, "allocate")) != MD_NONE) {
    md__handle_put(&d->ht, ce); /* Mutant: the fault point comes before the argument checks. */
    return st;
  }

  md__hentry **pes = NULL;
  md__buffer *b = NULL;
  uint32_t n_got = 0, n_roles = n_input_roles + n_output_roles;
  uint32_t desc_rank = desc ? desc->rank : 0;
  const uint32_t *desc_dims = desc ? desc->dims : NULL;
  st = check_args(prepared, n_prepared, input_roles, n_input_roles, output_roles, n_output_roles, desc_rank, desc_dims);
  if (st != MD_NONE) goto out;
  pes = calloc(n_prepared, sizeof *pes);
  if (!pes) {
    st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "allocate: out of memory");
    goto out;
  }
  for (; n_got < n_prepared; n_got++) {
    if (MD_MUTANT(unreferenced_prepared_unchecked) && !role_names(input_roles, n_input_roles, output_roles, n_output_roles, n_got)) {
      pes[n_got] = NULL; /* Mutant: a prepared model no role refers to is not looked up. */
      continue;
    }
    char what[48];
    snprintf(what, sizeof what, "prepared model %u", n_got);
    st = md__owned_get(d, "allocate", what, client, prepared[n_got], MD__KIND_PREPARED, &pes[n_got]);
    if (st != MD_NONE) goto out;
  }

  /* Sized for the largest rank until the dims are known, then shrunk (realloc) to fit. */
  b = calloc(1, md__buffer_size(n_roles, MD_MAX_RANK));
  if (!b) {
    st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "allocate: out of memory");
    goto out;
  }
  b->n_roles = n_roles;
  const md__operand *first;
  uint32_t rank = desc_rank;
  uint32_t dims[MD_MAX_RANK];
  if (rank) memcpy(dims, desc_dims, rank * sizeof *dims);
  const role_args ra = {prepared, pes, n_prepared, input_roles, output_roles, n_input_roles, n_output_roles};
  if ((st = fill_roles(&ra, b, desc_rank, &first, &rank, dims)) != MD_NONE) goto out;

  if (MD_MUTANT(nonfloat_alloc_invalid) && first->type != MD_TENSOR_FLOAT32) { /* Mutant: unsupported = invalid. */
    st = md__fail(MD_INVALID_ARGUMENT, "allocate: type %d is not supported", first->type);
    goto out;
  }
  b->type = first->type;
  b->scale = first->scale;
  b->zero_point = first->zero_point;
  md__buffer *fit = realloc(b, md__buffer_size(n_roles, rank));
  if (fit) b = fit;
  b->init_rank = b->cur_rank = (uint8_t)rank;
  if (rank) {
    memcpy(md__buf_init_dims(b), dims, rank * sizeof *dims);
    memcpy(md__buf_cur_dims(b), dims, rank * sizeof *dims);
  }
  md__ref_init(&b->first.ref, 1);
  b->first.embedded = true;
  if ((st = buffer_storage(d, b, rank, dims)) != MD_NONE) goto out;
  md__hentry *be;
  const uint64_t tag[2] = {b->roles[0].prepared, md__role_tag(b->roles[0].is_output, b->roles[0].index)};
  md__race_point("allocate", "issuing");
  st = md__handle_issue_tagged(&d->ht, MD__KIND_BUFFER, client, b, tag, token, &be);
  if (st != MD_NONE) {
    md__fail(st, "allocate: too many live buffers");
    goto out;
  }
  b = NULL;  /* owned by the table now */
  st = md__issued_settle(d, "allocate", ce, client, be, token);   /* a racing close_client */

out:
  if (b) {
    if (b->st) md__storage_put(d, b->st);
    free(b);
  }
  for (uint32_t i = 0; i < n_got; i++)
    if (pes[i]) md__handle_put(&d->ht, pes[i]);
  free(pes);
  md__handle_put(&d->ht, ce);
  return st;
}

/* ---- copy_from / copy_to / free ---- */

/* The client, then the token owned by it: both held on success. */
static md_status client_and_token(md_device *d, const char *fn, md_handle client, md_token token,
                                  md__hentry **ce, md__hentry **be) {
  md_status st = md__client_get(d, fn, client, ce);
  if (st != MD_NONE) return st;
  st = md__owned_get(d, fn, "token", client, token, MD__KIND_BUFFER, be);
  if (st != MD_NONE) md__handle_put(&d->ht, *ce);
  return st;
}

md_status md__copy_from(md_device *d, md_handle client, md_token token, const md_memory *src, uint32_t rank,
                        const uint32_t *dims) {
  md__hentry *ce, *be;
  md_status st = client_and_token(d, "copy_from", client, token, &ce, &be);
  if (st != MD_NONE) return st;
  md__buffer *b = be->obj;
  md__client *c = ce->obj;
  md__mapping map = {0};
  md__write w = {0};
  md__pool_plan plan;
  uint32_t crank = 0, cdims[MD_MAX_RANK];
  char a[64], bb[64];

  if (!src) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": src is NULL", TOK(token));
    goto fail;
  }
  if ((st = md__pool_validate(src, MD__POOL_COPY, "copy_from: src", &plan)) != MD_NONE) {
    if (MD_MUTANT(copy_from_bad_pool_keeps_init)) goto done; /* Mutant: the buffer is left as it was. */
    goto fail;
  }
  if (!(src->prot & PROT_READ)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: src: pool is not readable (prot %u)", src->prot);
    goto fail;
  }
  if (rank > MD_MAX_RANK || (rank && !dims)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": rank %u %s", TOK(token), rank,
                  rank > MD_MAX_RANK ? "exceeds MD_MAX_RANK (8)" : "has NULL dims");
    goto fail;
  }
  if (rank && md__type_is_scalar(b->type)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": the buffer holds a scalar, which takes no dims (rank %u)",
                  TOK(token), rank);
    goto fail;
  }
  for (uint32_t i = 0; i < rank; i++)
    if (dims[i] == 0) {
      st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": dims %s have an unknown (0) axis %u",
                    TOK(token), md__dims_str(rank, dims, a, sizeof a), i);
      goto fail;
    }
  /* The initial dims never change, so they are read without the lock. */
  uint32_t axis;
  if (md__dims_combine(b->init_rank, md__buf_init_dims(b), rank, dims, &crank, cdims, &axis)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": dims %s do not combine with the buffer's %s",
                  TOK(token), md__dims_str(rank, dims, a, sizeof a),
                  md__dims_str(b->init_rank, md__buf_init_dims(b), bb, sizeof bb));
    goto fail;
  }
  bool scalar = md__type_is_scalar(b->type);
  if (!scalar && !md__dims_known(crank, cdims)) {
    st = md__fail(MD_INVALID_ARGUMENT,
                  "copy_from: token " TOKFMT ": no dims given and the buffer's dims %s are not fully known",
                  TOK(token), md__dims_str(b->init_rank, md__buf_init_dims(b), a, sizeof a));
    goto fail;
  }
  uint64_t bytes = scalar ? md_operand_type_size(b->type) : md__type_bytes(b->type, crank, cdims);
  if (bytes == UINT64_MAX) {   /* SPEC 8.17: no size, whatever src's */
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": dims %s have no byte size: it does not fit 64 bits",
                  TOK(token), md__dims_str(crank, cdims, a, sizeof a));
    goto fail;
  }
  if (bytes != src->size) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_from: token " TOKFMT ": src size %llu != %llu bytes of dims %s",
                  TOK(token), (unsigned long long)src->size, (unsigned long long)bytes,
                  md__dims_str(crank, cdims, a, sizeof a));
    goto fail;
  }
  if ((st = md__pool_acquire(c->pools, src, MD__POOL_COPY, "copy_from: src", &plan, &map)) != MD_NONE) goto fail;
  /* This thread's own pin on the storage (an earlier execution read the buffer) would send the
   * write to fresh storage: drop it. */
  md__handle_unpin_mine(&d->ht, token);
  if ((st = md__buffer_write_begin(d, b, bytes, &w)) != MD_NONE) {
    md__fail_prefix(st, "copy_from: token " TOKFMT, TOK(token));
    goto fail;
  }
  if ((st = md__fault_point(d, MD_FAULT_COPY, "copy_from")) != MD_NONE) goto fail;
  char err[256] = "";
  st = d->be->write(d->bk, NULL, w.st->mem, 0, map.base, bytes, err, sizeof err);
  if (st != MD_NONE) {
    md__fail(st, "copy_from: token " TOKFMT ": device write failed: %s", TOK(token), err);
    goto fail;
  }
  md__buffer_write_commit(d, b, &w, crank, cdims);
  goto done;

fail:
  /* SPEC 3: any failure of copy_from leaves the buffer uninitialized. */
  if (w.st) md__buffer_write_abort(d, b, &w);
  else md__buffer_uninit(b);
  if (MD_MUTANT(copy_from_failure_resets_dims)) md__buffer_reset_dims(b); /* Mutant: back to the initial dims. */
done:
  if (map.scope) md__mapping_release(&map);
  md__handle_put(&d->ht, be);
  md__handle_put(&d->ht, ce);
  return st;
}

md_status md__copy_to(md_device *d, md_handle client, md_token token, const md_memory *dst) {
  md__hentry *ce, *be;
  md_status st = client_and_token(d, "copy_to", client, token, &ce, &be);
  if (st != MD_NONE) return st;
  md__buffer *b = be->obj;
  md__client *c = ce->obj;
  md__mapping map = {0};
  md__storage *s = NULL;
  md__pool_plan plan;
  char a[64];

  if (!dst) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_to: token " TOKFMT ": dst is NULL", TOK(token));
    goto done;
  }
  if ((st = md__pool_validate(dst, MD__POOL_COPY, "copy_to: dst", &plan)) != MD_NONE) goto done;
  if (!(dst->prot & PROT_WRITE)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_to: dst: pool is not writable (prot %u)", dst->prot);
    goto done;
  }

  md__spin_lock(&b->lock);
  bool scalar = md__type_is_scalar(b->type);
  bool init_dims = MD_MUTANT(copy_to_size_initial_dims); /* Mutant: the initial dims, not the current ones. */
  uint32_t rank = init_dims ? b->init_rank : b->cur_rank, dims[MD_MAX_RANK];
  if (rank) memcpy(dims, init_dims ? md__buf_init_dims(b) : md__buf_cur_dims(b), rank * sizeof *dims);
  bool known = scalar || md__dims_known(rank, dims);
  uint64_t bytes = scalar ? md_operand_type_size(b->type) : md__type_bytes(b->type, rank, dims);
  md__spin_unlock(&b->lock);

  /* SPEC 3: the size is checked before initialization. */
  /* (Mutant copy_to_init_first: the size is never checked, so initialization answers first.) */
  if (known && dst->size != bytes && !MD_MUTANT(copy_to_init_first)) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_to: token " TOKFMT ": dst size %llu != %llu bytes of dims %s",
                  TOK(token), (unsigned long long)dst->size, (unsigned long long)bytes,
                  md__dims_str(rank, dims, a, sizeof a));
    goto done;
  }
  if ((st = md__buffer_read_begin(b, &s, &rank, dims)) != MD_NONE) {
    md__fail_prefix(st, "copy_to: token " TOKFMT, TOK(token));
    goto done;
  }
  /* The dims may have changed since the size check (a concurrent write): check again. */
  bytes = scalar ? md_operand_type_size(b->type) : md__type_bytes(b->type, rank, dims);
  if (dst->size != bytes) {
    st = md__fail(MD_INVALID_ARGUMENT, "copy_to: token " TOKFMT ": dst size %llu != %llu bytes of dims %s",
                  TOK(token), (unsigned long long)dst->size, (unsigned long long)bytes,
                  md__dims_str(rank, dims, a, sizeof a));
    goto done;
  }
  if (!s || s->capacity < bytes) {
    st = md__fail(MD_GENERAL_FAILURE, "copy_to: token " TOKFMT ": buffer has no storage of %llu bytes", TOK(token),
                  (unsigned long long)bytes);
    goto done;
  }
  if ((st = md__pool_acquire(c->pools, dst, MD__POOL_COPY, "copy_to: dst", &plan, &map)) != MD_NONE) goto done;
  if ((st = md__fault_point(d, MD_FAULT_COPY, "copy_to")) != MD_NONE) {
    /* A copy that failed on the device leaves the buffer's content unknown: uninitialized. */
    md__buffer_uninit(b);
    goto done;
  }
  char err[256] = "";
  st = d->be->read(d->bk, NULL, map.base, s->mem, 0, bytes, err, sizeof err);
  if (st != MD_NONE) md__fail(st, "copy_to: token " TOKFMT ": device read failed: %s", TOK(token), err);

done:
  md__storage_put(d, s);
  if (map.scope) md__mapping_release(&map);
  md__handle_put(&d->ht, be);
  md__handle_put(&d->ht, ce);
  return st;
}

md_status md__free_buffer(md_device *d, md_handle client, md_token token) {
  md__hentry *ce, *be;
  if (MD_MUTANT(foreign_free_kills)) { /* Mutant: the token dies before its owner is checked. */
    md__hentry *fe = md__handle_get(&d->ht, token, MD__KIND_BUFFER);
    if (fe && fe->owner != client) md__handle_kill(&d->ht, fe, token);
    if (fe) md__handle_put(&d->ht, fe);
  }
  md_status st = client_and_token(d, "free_buffer", client, token, &ce, &be);
  if (st != MD_NONE) return st;
  /* The token dies now; the memory goes when the last call or execution using it ends. */
  if (!md__handle_kill(&d->ht, be, token))
    st = md__fail(MD_INVALID_ARGUMENT, "free_buffer: token " TOKFMT ": was already released", TOK(token));
  else if (MD_MUTANT(free_under_kernel)) {
    /* Mutant: the device memory goes with the token, whoever still uses it. */
    md__buffer *mb = be->obj;
    md__spin_lock(&mb->lock);
    md__storage *ms = mb->st;
    md__spin_unlock(&mb->lock);
    if (ms && ms->mem) d->be->free(d->bk, ms->mem);
  }
  md__handle_put(&d->ht, be);
  md__handle_put(&d->ht, ce);
  return st;
}
