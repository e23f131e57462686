/* prepared.c - prepared models: building one from an md_model (validation and deep copy in
 * model_check.c and model.c, constants uploaded to the device), releasing it, destroying it. */
#include <stdlib.h>
#include <string.h>

#include "mutant.h"
#include "error.h"
#include "kernel_ctx.h"
#include "objects_int.h"

void md__prepared_destroy(md_device *d, md__prepared *p) {
  md__exec_ctx_free_all(d, p);
  if (p->dev_const) {
    for (uint32_t i = 0; i < p->model->n_operands; i++)
      if (p->dev_const[i]) d->be->free(d->bk, p->dev_const[i]);
    free(p->dev_const);
  }
  md__model_free(p->model);
  free(p);
}

/* Constant tensors the kernels read from device memory are uploaded once, at prepare. */
static md_status upload_constants(md_device *d, md__prepared *p) {
  md__model *m = p->model;
  p->dev_const = calloc(m->n_operands ? m->n_operands : 1, sizeof *p->dev_const);
  if (!p->dev_const) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "prepare_model: out of memory");
  for (uint32_t i = 0; i < m->n_operands; i++) {
    md__operand *o = &m->operands[i];
    if ((o->lifetime != MD_CONSTANT_COPY && o->lifetime != MD_CONSTANT_REFERENCE) ||
        md__type_is_scalar(o->type) || o->type == MD_TENSOR_INT32 || o->length == 0)
      continue;
    md_status st = d->be->alloc(d->bk, o->length, &p->dev_const[i]);
    if (st != MD_NONE)
      return md__fail(st, "prepare_model: operand %u: cannot allocate %llu bytes of device memory for the constant",
                      i, (unsigned long long)o->length);
    p->dev_bytes += o->length;
    char err[256] = "";
    st = d->be->write(d->bk, NULL, p->dev_const[i], 0, o->value, o->length, err, sizeof err);
    if (st != MD_NONE) return md__fail(st, "prepare_model: operand %u: uploading the constant: %s", i, err);
  }
  return MD_NONE;
}

/* What the model's FULLY_CONNECTEDs compute, as 4 bytes per multiply-add (saturating;
 * UINT64_MAX when an input or weights dim is unknown until the model runs). Every other
 * built-in operation does work in proportion to the bytes it reads and writes, so the bytes an
 * execution moves bound it; a FULLY_CONNECTED does (input elements) x (units) multiply-adds,
 * which 64 KiB of inputs and outputs do not bound (execute_async's inline rule, exec_async.c). */
static uint64_t mac_bytes(const md__model *m) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < m->n_operations; i++) {
    const md__operation *op = &m->operations[i];
    if (op->type != MD_OP_FULLY_CONNECTED || op->n_inputs < 2) continue;
    const md__operand *in = &m->operands[op->inputs[0]], *w = &m->operands[op->inputs[1]];
    uint64_t in_bytes = md__type_bytes(in->type, in->rank, in->dims);
    uint64_t elem = md_operand_type_size(in->type);
    if (!in->rank || !in_bytes || in_bytes == UINT64_MAX || !elem || w->rank != 2 || !w->dims[0]) return UINT64_MAX;
    uint64_t macs = in_bytes / elem;
    if (macs > UINT64_MAX / 4 / w->dims[0]) return UINT64_MAX;
    macs *= 4ull * w->dims[0];
    sum = sum > UINT64_MAX - macs ? UINT64_MAX : sum + macs;
  }
  return sum;
}

md_status md__prepare_model(md_device *d, md_handle client, const md_model *model, md_handle *out) {
  if (!d || !model || !out)
    return md__fail(MD_INVALID_ARGUMENT, "prepare_model: %s is NULL", !d ? "device" : !model ? "model" : "prepared");
  *out = 0;
  md__hentry *ce;
  md_status st = md__client_get(d, "prepare_model", client, &ce);
  if (st != MD_NONE) return st;
  md__client *c = ce->obj;
  /* Cache-line aligned: its context slots are one line each (objects_int.h). */
  md__prepared *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
  if (p) memset(p, 0, sizeof *p);
  if (!p) {
    md__handle_put(&d->ht, ce);
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "prepare_model: out of memory");
  }
  st = md__model_build(model, d->platform, c->pools, &p->model);
  if (st != MD_NONE) {
    md__fail_prefix(st, "prepare_model");
    free(p);
  } else if ((st = upload_constants(d, p)) != MD_NONE) {
    md__prepared_destroy(d, p);
  } else {
    p->all_builtin = true;
    for (uint32_t i = 0; i < p->model->n_operations; i++)
      p->all_builtin &= md__kernel_is_builtin(p->model->operations[i].kernel) != 0;
    p->mac_bytes = mac_bytes(p->model);
    md__hentry *pe;
    md__race_point("prepare_model", "issuing");
    st = md__handle_issue(&d->ht, MD__KIND_PREPARED, client, p, out, &pe);
    if (st != MD_NONE) {
      md__prepared_destroy(d, p);
      md__fail(st, "prepare_model: too many live handles");
    } else {
      st = md__issued_settle(d, "prepare_model", ce, client, pe, out);   /* a racing close_client */
    }
  }
  md__handle_put(&d->ht, ce);
  return st;
}

md_status md__release_prepared_model(md_device *d, md_handle client, md_handle prepared) {
  md__hentry *ce, *pe;
  md_status st = md__client_get(d, "release_prepared_model", client, &ce);
  if (st != MD_NONE) return st;
  st = md__owned_get(d, "release_prepared_model", "prepared model", client, prepared, MD__KIND_PREPARED, &pe);
  if (st == MD_NONE) {
    if (!md__handle_kill(&d->ht, pe, prepared))
      st = md__fail(MD_INVALID_ARGUMENT, "release_prepared_model: prepared model 0x%016llx: was already released",
                    (unsigned long long)prepared);
    else if (MD_MUTANT(release_frees_constants_in_use)) { /* Mutant: the constants go with the handle. */
      md__prepared *mp = pe->obj;
      for (uint32_t i = 0; mp->dev_const && i < mp->model->n_operands; i++)
        if (mp->dev_const[i]) d->be->free(d->bk, mp->dev_const[i]), mp->dev_const[i] = 0;
    }
    md__handle_put(&d->ht, pe);
  }
  md__handle_put(&d->ht, ce);
  return st;
}
