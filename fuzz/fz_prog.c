/* fz_prog.c - small helpers over a fuzz program: the targets' names, argument lookup through
 * the call table (mdc/calls.h), operand type sizes. */
#include "fz_prog.h"

#include <string.h>

static const char *const target_names[FZ_TARGETS] = {"tokens", "shapes", "concurrency"};

const char *mdc_fz_target_name(mdc_fz_target t) { return (unsigned)t < FZ_TARGETS ? target_names[t] : "?"; }

int mdc_fz_target_parse(const char *name, mdc_fz_target *t) {
  for (unsigned i = 0; i < FZ_TARGETS; i++)
    if (strcmp(name, target_names[i]) == 0) {
      *t = (mdc_fz_target)i;
      return 0;
    }
  return -1;
}

int mdc_fz_arg_pos(mdc_call c, mdc_arg_id id) {
  const mdc_call_desc *d = &mdc_calls[c];
  for (unsigned i = 0; i < d->n_args; i++)
    if (d->args[i].id == id) return (int)i;
  return -1;
}

const fz_arg *mdc_fz_arg(const fz_call *k, mdc_arg_id id) {
  int pos = mdc_fz_arg_pos((mdc_call)k->call, id);
  return pos >= 0 && k->a[pos].present ? &k->a[pos] : NULL;
}

int mdc_fz_call_encoded(mdc_call c) { return (unsigned)c < MDC_CALL_COUNT && !(mdc_calls[c].flags & MDC_CALL_OPTIONAL); }

mdc_obj mdc_fz_produces(mdc_call c) { return (unsigned)c < MDC_CALL_COUNT ? mdc_calls[c].produces : MDC_OBJ_NONE; }

uint32_t mdc_fz_type_size(int32_t type) {
  switch (type) {
    case MD_FLOAT32: case MD_INT32: case MD_UINT32: case MD_TENSOR_FLOAT32: case MD_TENSOR_INT32: return 4;
    case MD_TENSOR_QUANT8_ASYMM: case MD_BOOL: case MD_TENSOR_QUANT8_ASYMM_SIGNED: return 1;
    case MD_TENSOR_FLOAT16: return 2;
    default: return 0;
  }
}

int mdc_fz_type_scalar(int32_t type) {
  return type == MD_FLOAT32 || type == MD_INT32 || type == MD_UINT32 || type == MD_BOOL;
}

uint64_t mdc_fz_bytes(int32_t type, const fz_dims *d) {
  uint64_t n = mdc_fz_type_size(type);
  if (!n) return UINT64_MAX;
  if (mdc_fz_type_scalar(type)) return n;
  if (d->rank == 0) return UINT64_MAX;
  for (unsigned i = 0; i < d->rank; i++) {
    if (d->d[i] == 0) return UINT64_MAX;
    if (n > UINT64_MAX / d->d[i]) return UINT64_MAX;
    n *= d->d[i];
  }
  return n;
}
