/* prepared.c - prepared models: building one from an md_model (validation and deep copy in
 * model_check.c and model.c, constants uploaded to the device), releasing it, destroying it. */
#include <stdlib.h>

#include "error.h"
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

md_status md__prepare_model(md_device *d, md_handle client, const md_model *model, md_handle *out) {
  if (!d || !model || !out)
    return md__fail(MD_INVALID_ARGUMENT, "prepare_model: %s is NULL", !d ? "device" : !model ? "model" : "prepared");
  *out = 0;
  md__hentry *ce;
  md_status st = md__client_get(d, "prepare_model", client, &ce);
  if (st != MD_NONE) return st;
  md__client *c = ce->obj;
  md__prepared *p = calloc(1, sizeof *p);
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
    md__hentry *pe;
    st = md__handle_issue(&d->ht, MD__KIND_PREPARED, client, p, out, &pe);
    if (st != MD_NONE) {
      md__prepared_destroy(d, p);
      md__fail(st, "prepare_model: too many live handles");
    } else if (atomic_load(&ce->handle) != client) {
      /* close_client ran meanwhile and may have missed this one: undo it. */
      md__handle_kill(&d->ht, pe, *out);
      *out = 0;
      st = md__fail(MD_INVALID_ARGUMENT, "prepare_model: client 0x%016llx was closed during the call",
                    (unsigned long long)client);
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
    md__handle_put(&d->ht, pe);
  }
  md__handle_put(&d->ht, ce);
  return st;
}
