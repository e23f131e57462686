/* host_shape.c - the float32 host kernels RESHAPE and CONCATENATION, with their prepare-time
 * checks and execute-time shapes (NN HAL semantics). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_int.h"

#define TRY(x)                     \
  do {                             \
    md_status try_s_ = (x);        \
    if (try_s_ != MD_NONE) return try_s_; \
  } while (0)

/* ---- RESHAPE -------------------------------------------------------------------------- */
/* Inputs: input tensor, TENSOR_INT32 shape [n] (1 <= n <= MD_MAX_RANK; entries > 0, or one
 * -1 inferred from the element count). Output: the input's elements with dims = shape. */

/* Formats INT32 values as "[2,-1,3]". */
static const char *ints_str(const void *val, uint32_t n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < n && used < cap; i++) {
    int32_t x;
    memcpy(&x, (const unsigned char *)val + 4u * i, sizeof x);
    int w = snprintf(buf + used, cap - used, "%s%" PRId32, i ? "," : "[", x);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}

/* Output dims from `n` shape values. in_count 0: unknown (a -1 then stays unknown, 0). */
static md_status reshape_resolve(const void *val, uint32_t n, uint64_t in_count, uint32_t *dims,
                                 md_kernel_status *st) {
  char sv[160];
  int32_t infer = -1;
  uint64_t product = 1;
  for (uint32_t i = 0; i < n; i++) {
    int32_t x;
    memcpy(&x, (const unsigned char *)val + 4u * i, sizeof x);
    if (x == -1) {
      if (infer >= 0)
        return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                              "input 1 (shape) %s has -1 at entries %" PRId32 " and %" PRIu32
                              "; at most one is allowed",
                              ints_str(val, n, sv, sizeof sv), infer, i);
      infer = (int32_t)i;
      dims[i] = 0;
      continue;
    }
    if (x <= 0)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 1 (shape) %s entry %" PRIu32 " is %" PRId32
                            "; must be > 0 or -1", ints_str(val, n, sv, sizeof sv), i, x);
    dims[i] = (uint32_t)x;
    if (product > UINT64_MAX / (uint32_t)x)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1 (shape) %s: element count overflows",
                            ints_str(val, n, sv, sizeof sv));
    product *= (uint32_t)x;
  }
  if (in_count == 0) return MD_NONE;
  if (infer >= 0) {
    if (in_count % product || in_count / product > UINT32_MAX)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 1 (shape) %s: the %" PRIu64 " elements of input 0 do not fit "
                            "(the other dims hold %" PRIu64 " per step of -1)",
                            ints_str(val, n, sv, sizeof sv), in_count, product);
    dims[infer] = (uint32_t)(in_count / product);
  } else if (product != in_count) {
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (shape) %s holds %" PRIu64 " elements, input 0 has %" PRIu64,
                          ints_str(val, n, sv, sizeof sv), product, in_count);
  }
  return MD_NONE;
}

static md_status reshape_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  TRY(md__kcheck_counts(sig, st, 2, 2, 1));
  const md_operand_info *in = &sig->inputs[0], *sh = &sig->inputs[1], *o = &sig->outputs[0];
  TRY(md__kcheck_tensor(st, "input", 0, NULL, in, MD__T_ANY, &u));
  TRY(md__kcheck_tensor(st, "input", 1, "shape", sh, MD__TBIT(MD_TENSOR_INT32), NULL));
  TRY(md__kcheck_rank(st, "input", 1, "shape", sh, 1));
  uint32_t n = sh->rank ? sh->dims[0] : 0;
  if (n > MD_MAX_RANK)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (shape) has %" PRIu32 " entries; the output rank must be 1..%u",
                          n, MD_MAX_RANK);
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_ANY, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, in->type, "input 0"));
  uint32_t dims[MD_MAX_RANK] = {0};
  if (sh->value) {
    uint64_t len = sh->length;
    if (len == 0 || len % 4 || len / 4 > MD_MAX_RANK)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 1 (shape) constant is %" PRIu64 " bytes; must hold 1..%u INT32 "
                            "entries", len, MD_MAX_RANK);
    if (n && len / 4 != n)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input 1 (shape) constant has %" PRIu64 " entries, its dims say %"
                            PRIu32, len / 4, n);
    n = (uint32_t)(len / 4);
    uint64_t cnt = md__kcount(in->rank, in->dims);
    TRY(reshape_resolve(sh->value, n, cnt == UINT64_MAX ? 0 : cnt, dims, st));
  }
  TRY(md__kcheck_output_dims(st, sig, 0, n, dims));
  return md__kcheck_done(st, &u);
}

static md_status reshape_infer(const md__kview *v, md_tensor_shape *out, uint64_t *count,
                               md_kernel_status *st) {
  TRY(md__kexec_known(st, "input", 0, NULL, &v[0], count));
  if (v[1].type != MD_TENSOR_INT32)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1 (shape) must be TENSOR_INT32, got %s",
                          md_operand_type_name(v[1].type));
  TRY(md__kexec_known(st, "input", 1, "shape", &v[1], NULL));
  if (v[1].rank != 1)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (shape) must have rank 1, got %" PRIu32, v[1].rank);
  uint32_t n = v[1].dims[0];
  if (n > MD_MAX_RANK)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (shape) has %" PRIu32 " entries; the output rank must be 1..%u",
                          n, MD_MAX_RANK);
  if (!v[1].data) return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 1 (shape) has no value");
  if (v[1].bytes < 4u * n)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 1 (shape) value is %" PRIu64 " bytes, its %" PRIu32
                          " entries need %" PRIu32, v[1].bytes, n, 4u * n);
  out->rank = n;
  return reshape_resolve(v[1].data, n, *count, out->dims, st);
}

static md_status reshape_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                               void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 2, 2, 1));
  md__kview v[2];
  for (uint32_t i = 0; i < 2; i++) md__kview_info(&v[i], &sig->inputs[i]);
  uint64_t count;
  return reshape_infer(v, &out[0], &count, st);
}

static md_status reshape_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 2, 2, 1));
  md__kview v[2];
  for (uint32_t i = 0; i < 2; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  md_tensor_shape want;
  uint64_t n;
  TRY(reshape_infer(v, &want, &n, st));
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], n));
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, NULL));
  memmove(c->outputs[0].data, c->inputs[0].data, n * 4);
  return MD_NONE;
}

static void reshape_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)reshape_do(c, st);
}

/* ---- CONCATENATION -------------------------------------------------------------------- */
/* Inputs: n >= 1 tensors of one type and rank, dims equal except along the axis, then an INT32
 * axis (negative counts from the end). Output: dims of the inputs, the axis dim summed. */

static md_status axis_rule(md_kernel_status *st, uint32_t idx, int32_t axis, uint32_t rank) {
  if (axis >= -(int64_t)rank && axis < (int64_t)rank) return MD_NONE;
  return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                        "input %" PRIu32 " (axis) is %" PRId32 "; must be in [-%" PRIu32
                        ", %" PRIu32 ") for inputs of rank %" PRIu32, idx, axis, rank, rank, rank);
}

static md_status concat_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  char d1[128], d2[128];
  TRY(md__kcheck_counts(sig, st, 2, UINT32_MAX, 1));
  const uint32_t nt = sig->n_inputs - 1;
  const md_operand_info *in = sig->inputs, *ax = &sig->inputs[nt], *o = &sig->outputs[0];
  uint32_t rank = 0, rank_from = 0;
  for (uint32_t i = 0; i < nt; i++) {
    TRY(md__kcheck_tensor(st, "input", i, NULL, &in[i], MD__T_ANY, &u));
    if (i) TRY(md__kcheck_same_type(st, "input", i, NULL, &in[i], in[0].type, "input 0"));
    if (in[i].rank && rank && in[i].rank != rank)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input %" PRIu32 " has rank %" PRIu32 ", input %" PRIu32
                            " has rank %" PRIu32 "; all inputs must have the same rank",
                            i, in[i].rank, rank_from, rank);
    if (in[i].rank && !rank) {
      rank = in[i].rank;
      rank_from = i;
    }
  }
  TRY(md__kcheck_scalar(st, nt, "axis", ax, MD_INT32));
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_ANY, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, in[0].type, "input 0"));
  if (!rank) return md__kcheck_done(st, &u);

  uint32_t dims[MD_MAX_RANK] = {0};
  if (ax->value) {
    int32_t a;
    memcpy(&a, ax->value, sizeof a);
    TRY(axis_rule(st, nt, a, rank));
    uint32_t axis = a < 0 ? (uint32_t)((int64_t)rank + a) : (uint32_t)a;
    for (uint32_t d = 0; d < rank; d++) {
      uint64_t sum = 0;
      int all_known = 1;
      uint32_t from = 0;
      for (uint32_t i = 0; i < nt; i++) {
        uint32_t x = in[i].rank ? in[i].dims[d] : 0;
        if (d == axis) {
          if (x == 0) all_known = 0;
          sum += x;
          continue;
        }
        if (x == 0) continue;
        if (dims[d] && x != dims[d])
          return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                                "input %" PRIu32 " dims %s and input %" PRIu32 " dims %s differ "
                                "on axis %" PRIu32 " (concatenating along axis %" PRIu32 ")",
                                i, md__kdims_str(in[i].rank, in[i].dims, d1, sizeof d1), from,
                                md__kdims_str(in[from].rank, in[from].dims, d2, sizeof d2), d,
                                axis);
        if (!dims[d]) {
          dims[d] = x;
          from = i;
        }
      }
      if (d == axis) {
        if (sum > UINT32_MAX)
          return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                                "inputs sum to %" PRIu64 " along axis %" PRIu32
                                ", more than a dim holds", sum, axis);
        dims[d] = all_known ? (uint32_t)sum : 0;
      }
    }
  }
  TRY(md__kcheck_output_dims(st, sig, 0, rank, dims));
  return md__kcheck_done(st, &u);
}

/* Execute-time shape; *axis_out gets the non-negative axis. */
static md_status concat_infer(const md__kview *v, uint32_t n_inputs, md_tensor_shape *out,
                              uint32_t *axis_out, md_kernel_status *st) {
  char d1[128], d2[128];
  const uint32_t nt = n_inputs - 1;
  for (uint32_t i = 0; i < nt; i++) {
    TRY(md__kexec_known(st, "input", i, NULL, &v[i], NULL));
    if (v[i].rank != v[0].rank)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "input %" PRIu32 " has rank %" PRIu32 ", input 0 has rank %" PRIu32
                            "; all inputs must have the same rank", i, v[i].rank, v[0].rank);
  }
  int32_t a;
  TRY(md__kexec_i32(st, nt, "axis", &v[nt], &a));
  const uint32_t rank = v[0].rank;
  TRY(axis_rule(st, nt, a, rank));
  uint32_t axis = a < 0 ? (uint32_t)((int64_t)rank + a) : (uint32_t)a;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < nt; i++) {
    for (uint32_t d = 0; d < rank; d++) {
      if (d != axis && v[i].dims[d] != v[0].dims[d])
        return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                              "input %" PRIu32 " dims %s and input 0 dims %s differ on axis %"
                              PRIu32 " (concatenating along axis %" PRIu32 ")",
                              i, md__kdims_str(rank, v[i].dims, d1, sizeof d1),
                              md__kdims_str(rank, v[0].dims, d2, sizeof d2), d, axis);
    }
    sum += v[i].dims[axis];
    if (sum > UINT32_MAX)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                            "inputs 0..%" PRIu32 " sum to %" PRIu64 " along axis %" PRIu32
                            ", more than a dim holds", i, sum, axis);
  }
  out->rank = rank;
  for (uint32_t d = 0; d < rank; d++) out->dims[d] = d == axis ? (uint32_t)sum : v[0].dims[d];
  *axis_out = axis;
  md__kview ov = {.type = v[0].type, .rank = rank, .dims = out->dims};
  return md__kexec_known(st, "output", 0, NULL, &ov, NULL);
}

static md_status concat_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                              void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 2, UINT32_MAX, 1));
  md__kview small[9] = {{0}}, *v = small;
  if (sig->n_inputs > 9) {
    v = malloc(sizeof *v * sig->n_inputs);
    if (!v)
      return md_kernel_fail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "out of memory for %" PRIu32
                            " inputs", sig->n_inputs);
  }
  for (uint32_t i = 0; i < sig->n_inputs; i++) md__kview_info(&v[i], &sig->inputs[i]);
  uint32_t axis;
  md_status s = concat_infer(v, sig->n_inputs, &out[0], &axis, st);
  if (v != small) free(v);
  return s;
}

static md_status concat_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 2, UINT32_MAX, 1));
  /* Views of the inputs: on the stack for the usual few, in scratch memory beyond that. */
  md__kview small[9] = {{0}}, *v = small;
  if (c->n_inputs > 9) {
    v = md_kernel_scratch(c->ctx, (uint64_t)sizeof *v * c->n_inputs);
    if (!v)
      return md_kernel_fail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT,
                            "no scratch memory for %" PRIu32 " input views", c->n_inputs);
  }
  for (uint32_t i = 0; i < c->n_inputs; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  md_tensor_shape want;
  uint32_t axis;
  TRY(concat_infer(v, c->n_inputs, &want, &axis, st));
  const uint32_t nt = c->n_inputs - 1;
  uint64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < want.rank; d++) {
    if (d < axis) outer *= want.dims[d];
    if (d > axis) inner *= want.dims[d];
  }
  for (uint32_t i = 0; i < nt; i++)
    TRY(md__krun_buffer(st, "input", i, &c->inputs[i], md__kcount(v[i].rank, v[i].dims)));
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, NULL));
  unsigned char *o = c->outputs[0].data;
  uint64_t off = 0;
  for (uint64_t p = 0; p < outer; p++) {
    for (uint32_t i = 0; i < nt; i++) {
      uint64_t chunk = (uint64_t)v[i].dims[axis] * inner * 4;
      memmove(o + off, (const unsigned char *)c->inputs[i].data + p * chunk, chunk);
      off += chunk;
    }
  }
  return MD_NONE;
}

static void concat_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)concat_do(c, st);
}

#define DEF(nm, lo, hi, chk, shp, rn)                                                     \
  {.struct_size = sizeof(md_kernel_def), .name = nm, .min_inputs = lo, .max_inputs = hi,  \
   .n_outputs = 1, .check = chk, .shape = shp, .run = rn}

const md_kernel_def md__host_shape_kernels[] = {
    DEF("RESHAPE", 2, 2, reshape_check, reshape_shape, reshape_run),
    DEF("CONCATENATION", 2, UINT32_MAX, concat_check, concat_shape, concat_run),
};
const uint32_t md__host_shape_count =
    (uint32_t)(sizeof md__host_shape_kernels / sizeof md__host_shape_kernels[0]);
