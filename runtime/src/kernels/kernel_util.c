/* kernel_util.c - helpers shared by the host kernels: type names, operand views, and the
 * prepare/execute checks that fail with a message naming the operand (kernels_int.h).
 *
 * Each function is documented where it is declared, in kernels_int.h. All are thread-safe:
 * they write only the md_kernel_status and outputs they are given (md_operand_type_name uses a
 * per-thread buffer for unknown values), allocate nothing, and a failing check returns its
 * status after md_kernel_fail filled st. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernels_int.h"

#define MAX_ELEMENTS MD__KMAX_ELEMENTS

/* Failure paths only: the execute-time checks call the *_slow functions here only when their
 * inline fast test (kernels_int.h) failed. */
#define MD__COLD __attribute__((cold, noinline))

const char *md_operand_type_name(md_operand_type t) {
  switch (t) {
  case MD_FLOAT32: return "FLOAT32";
  case MD_INT32: return "INT32";
  case MD_UINT32: return "UINT32";
  case MD_TENSOR_FLOAT32: return "TENSOR_FLOAT32";
  case MD_TENSOR_INT32: return "TENSOR_INT32";
  case MD_TENSOR_QUANT8_ASYMM: return "TENSOR_QUANT8_ASYMM";
  case MD_BOOL: return "BOOL";
  case MD_TENSOR_FLOAT16: return "TENSOR_FLOAT16";
  case MD_TENSOR_QUANT8_ASYMM_SIGNED: return "TENSOR_QUANT8_ASYMM_SIGNED";
  }
  static _Thread_local char buf[32];
  snprintf(buf, sizeof buf, "type %d", (int)t);
  return buf;
}

int md__ktype_is_tensor(md_operand_type t) {
  return t == MD_TENSOR_FLOAT32 || t == MD_TENSOR_INT32 || t == MD_TENSOR_QUANT8_ASYMM ||
         t == MD_TENSOR_FLOAT16 || t == MD_TENSOR_QUANT8_ASYMM_SIGNED;
}

int md__ktype_is_quant(md_operand_type t) {
  return t == MD_TENSOR_QUANT8_ASYMM || t == MD_TENSOR_QUANT8_ASYMM_SIGNED;
}

const char *md__kdims_str(uint32_t rank, const uint32_t *dims, char *buf, size_t n) {
  if (n < 2) {
    if (n) buf[0] = '\0';
    return buf;
  }
  if (rank == 0 || dims == NULL) {
    snprintf(buf, n, "[?]");
    return buf;
  }
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < rank && used < n; i++) {
    int w = snprintf(buf + used, n - used, "%s%" PRIu32, i ? "," : "[", dims[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}

/* "input 2 (fused activation)" or "input 0". Called only on the way to a failure: every
 * check formats the operand's name in the branch that fails, never on success. */
static const char *opname(char *buf, size_t n, const char *io, uint32_t idx, const char *label) {
  if (label) snprintf(buf, n, "%s %" PRIu32 " (%s)", io, idx, label);
  else snprintf(buf, n, "%s %" PRIu32, io, idx);
  return buf;
}

/* The failing operand's name, formatted into the caller's `char nm[64]` from the caller's
 * io, idx and label: used only as an argument of md_kernel_fail. */
#define NM opname(nm, sizeof nm, io, idx, label)

static void counts_text(char *buf, size_t n, uint32_t min, uint32_t max, const char *what) {
  if (min == max) snprintf(buf, n, "%" PRIu32 " %s%s", min, what, min == 1 ? "" : "s");
  else if (max == UINT32_MAX) snprintf(buf, n, "at least %" PRIu32 " %ss", min, what);
  else snprintf(buf, n, "%" PRIu32 " to %" PRIu32 " %ss", min, max, what);
}

MD__COLD md_status md__kcounts_slow(md_kernel_status *st, uint32_t n_in, const void *in,
                                    uint32_t n_outs, const void *out, uint32_t min_in,
                                    uint32_t max_in, uint32_t n_out) {
  char want[64];
  if (n_in < min_in || n_in > max_in) {
    counts_text(want, sizeof want, min_in, max_in, "input");
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "expects %s, got %" PRIu32, want, n_in);
  }
  if (n_outs != n_out) {
    counts_text(want, sizeof want, n_out, n_out, "output");
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "expects %s, got %" PRIu32, want, n_outs);
  }
  if ((n_in && !in) || (n_outs && !out))
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "operand array is NULL");
  return MD_NONE;
}

static void types_text(char *buf, size_t n, uint32_t allowed) {
  static const md_operand_type order[] = {MD_TENSOR_FLOAT32, MD_TENSOR_FLOAT16, MD_TENSOR_INT32,
                                          MD_TENSOR_QUANT8_ASYMM,
                                          MD_TENSOR_QUANT8_ASYMM_SIGNED};
  size_t used = 0;
  uint32_t total = 0, k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (allowed & MD__TBIT(order[i])) total++;
  for (size_t i = 0; i < sizeof order / sizeof order[0] && used < n; i++) {
    if (!(allowed & MD__TBIT(order[i]))) continue;
    k++;
    const char *sep = k == 1 ? "" : (k == total ? " or " : ", ");
    int w = snprintf(buf + used, n - used, "%s%s", sep, md_operand_type_name(order[i]));
    if (w < 0) break;
    used += (size_t)w;
  }
}

md_status md__kcheck_tensor(md_kernel_status *st, const char *io, uint32_t idx, const char *label,
                            const md_operand_info *o, uint32_t allowed, md__kunsup *u) {
  char nm[64], types[160];
  if (o->lifetime == MD_NO_VALUE)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s is required, got no value", NM);
  if (!md__ktype_is_tensor(o->type) || !(allowed & MD__TBIT(o->type))) {
    types_text(types, sizeof types, allowed);
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s must be %s, got %s", NM, types,
                          md_operand_type_name(o->type));
  }
  if (o->rank > MD_MAX_RANK)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has rank %" PRIu32 ", more than %u", NM,
                          o->rank, MD_MAX_RANK);
  if (o->rank && !o->dims)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has rank %" PRIu32 " but no dims", NM,
                          o->rank);
  if (o->type != MD_TENSOR_FLOAT32 && u && !u->found) {
    u->found = 1;
    opname(u->what, sizeof u->what, io, idx, label);
    u->type = o->type;
  }
  return MD_NONE;
}

md_status md__kcheck_same_type(md_kernel_status *st, const char *io, uint32_t idx,
                               const char *label, const md_operand_info *o, md_operand_type want,
                               const char *want_of) {
  char nm[64];
  if (o->type == want) return MD_NONE;
  return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has type %s, must match %s (%s)",
                        opname(nm, sizeof nm, io, idx, label), md_operand_type_name(o->type), want_of,
                        md_operand_type_name(want));
}

md_status md__kcheck_scalar(md_kernel_status *st, uint32_t idx, const char *label,
                            const md_operand_info *o, md_operand_type want) {
  char nm[64];
  const char *io = "input";
  if (o->lifetime == MD_NO_VALUE)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s is required, got no value", NM);
  if (o->type != want)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s must be %s, got %s", NM,
                          md_operand_type_name(want), md_operand_type_name(o->type));
  if (o->rank != 0)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s must be a scalar, got rank %" PRIu32, NM,
                          o->rank);
  if (o->value && o->length != 4)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s constant is %" PRIu64
                          " bytes, expected 4", NM, o->length);
  return MD_NONE;
}

md_status md__kcheck_rank(md_kernel_status *st, const char *io, uint32_t idx, const char *label,
                          const md_operand_info *o, uint32_t want) {
  char nm[64];
  if (o->rank == 0 || o->rank == want) return MD_NONE;
  return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s must have rank %" PRIu32 ", got %" PRIu32,
                        opname(nm, sizeof nm, io, idx, label), want, o->rank);
}

static const char act_rule[] = "must be 0 (none), 1 (relu), 2 (relu1) or 3 (relu6)";

md_status md__kcheck_activation(md_kernel_status *st, uint32_t idx, const md_operand_info *o) {
  md_status s = md__kcheck_scalar(st, idx, "fused activation", o, MD_INT32);
  if (s != MD_NONE || !o->value) return s;
  int32_t act;
  memcpy(&act, o->value, sizeof act);
  if (act < 0 || act > 3)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input %" PRIu32 " (fused activation) is %"
                          PRId32 "; %s", idx, act, act_rule);
  return MD_NONE;
}

md_status md__kcheck_output_dims(md_kernel_status *st, const md_op_sig *sig, uint32_t idx,
                                 uint32_t rank, const uint32_t *dims) {
  const md_operand_info *o = &sig->outputs[idx];
  char have[128], want[128];
  if (o->rank == 0 || rank == 0) return MD_NONE;
  if (o->rank != rank)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "output %" PRIu32 " has rank %" PRIu32 ", the inputs imply rank %"
                          PRIu32 " (%s)", idx, o->rank, rank,
                          md__kdims_str(rank, dims, want, sizeof want));
  for (uint32_t i = 0; i < rank; i++) {
    if (o->dims[i] && dims[i] && o->dims[i] != dims[i])
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "output %" PRIu32 " dims %s conflict with %s implied by the inputs "
                            "(axis %" PRIu32 ")", idx,
                            md__kdims_str(o->rank, o->dims, have, sizeof have),
                            md__kdims_str(rank, dims, want, sizeof want), i);
  }
  return MD_NONE;
}

md_status md__kcheck_done(md_kernel_status *st, const md__kunsup *u) {
  if (!u->found) return MD_NONE;
  return md_kernel_fail(st, MD_GENERAL_FAILURE,
                        "%s: %s not supported (only TENSOR_FLOAT32 kernels exist)", u->what,
                        md_operand_type_name(u->type));
}

MD__COLD md_status md__kexec_known_slow(md_kernel_status *st, const char *io, uint32_t idx,
                                        const char *label, const md__kview *v,
                                        uint64_t *count) {
  char nm[64], d[128];
  if (v->rank == 0)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has unknown rank at execution", NM);
  if (v->rank > MD_MAX_RANK)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has rank %" PRIu32 ", more than %u", NM,
                          v->rank, MD_MAX_RANK);
  if (!v->dims)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has rank %" PRIu32 " but no dims", NM,
                          v->rank);
  uint64_t n = md__kcount(v->rank, v->dims);
  if (n == 0)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s dims %s are not fully known at execution",
                          NM, md__kdims_str(v->rank, v->dims, d, sizeof d));
  if (n > MAX_ELEMENTS)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s dims %s hold more than 2^61 elements", NM,
                          md__kdims_str(v->rank, v->dims, d, sizeof d));
  if (count) *count = n;
  return MD_NONE;
}

MD__COLD md_status md__kexec_scalar4_slow(md_kernel_status *st, uint32_t idx,
                                          const char *label, const md__kview *v,
                                          md_operand_type want, void *out) {
  char nm[64];
  const char *io = "input";
  if (v->type != want)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s must be %s, got %s", NM,
                          md_operand_type_name(want), md_operand_type_name(v->type));
  if (!v->data) return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s has no value", NM);
  if (v->bytes < 4)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "%s value is %" PRIu64 " bytes, expected 4",
                          NM, v->bytes);
  memcpy(out, v->data, 4);
  return MD_NONE;
}

MD__COLD md_status md__kexec_activation_slow(md_kernel_status *st, uint32_t idx,
                                             const md__kview *v, int32_t *act) {
  md_status s = md__kexec_scalar4_slow(st, idx, "fused activation", v, MD_INT32, act);
  if (s != MD_NONE) return s;
  if (*act < 0 || *act > 3)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input %" PRIu32 " (fused activation) is %"
                          PRId32 "; %s", idx, *act, act_rule);
  return MD_NONE;
}

MD__COLD md_status md__krun_buffer_slow(md_kernel_status *st, const char *io, uint32_t idx,
                                        const md_tensor *t, uint64_t count) {
  char nm[64], d[128];
  const char *label = NULL;
  if (t->type != MD_TENSOR_FLOAT32)
    return md_kernel_fail(st, MD_GENERAL_FAILURE, "%s: %s not supported by the host kernels", NM,
                          md_operand_type_name(t->type));
  if (count > MAX_ELEMENTS)
    return md_kernel_fail(st, MD_GENERAL_FAILURE, "%s holds more than 2^61 elements", NM);
  if (count && !t->data) return md_kernel_fail(st, MD_GENERAL_FAILURE, "%s has no buffer", NM);
  if (t->bytes < count * 4)
    return md_kernel_fail(st, MD_GENERAL_FAILURE,
                          "%s buffer is %" PRIu64 " bytes, its dims %s need %" PRIu64, NM,
                          t->bytes, md__kdims_str(t->rank, t->dims, d, sizeof d), count * 4);
  return MD_NONE;
}
#undef NM

MD__COLD md_status md__krun_output_slow(md_kernel_status *st, uint32_t idx, const md_tensor *t,
                                        uint32_t rank, const uint32_t *dims, uint64_t *count) {
  char have[128], w[128];
  int same = t->rank == rank;
  for (uint32_t i = 0; same && i < rank; i++) same = t->dims[i] == dims[i];
  if (!same)
    return md_kernel_fail(st, MD_GENERAL_FAILURE,
                          "output %" PRIu32 " dims %s differ from the computed %s", idx,
                          md__kdims_str(t->rank > MD_MAX_RANK ? 0 : t->rank, t->dims, have,
                                        sizeof have),
                          md__kdims_str(rank, dims, w, sizeof w));
  uint64_t n = md__kcount(rank, dims);
  md_status s = md__krun_buffer_slow(st, "output", idx, t, n);
  if (s == MD_NONE && count) *count = n;
  return s;
}
