/* host_elementwise.c - the float32 host kernels ADD, SUB, MUL (numpy-style broadcasting and a
 * fused activation) and RELU, with their prepare-time checks and execute-time shapes. */
#include <inttypes.h>

#include "kernels_int.h"
#include "md_math.h"

#define TRY(x)                     \
  do {                             \
    md_status try_s_ = (x);        \
    if (try_s_ != MD_NONE) return try_s_; \
  } while (0)

/* ---- ADD / SUB / MUL ------------------------------------------------------------------ */

/* Inputs: (tensor a, tensor b, INT32 fused activation); output: tensor of a's type. */
static md_status binary_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  TRY(md__kcheck_counts(sig, st, 3, 3, 1));
  const md_operand_info *a = &sig->inputs[0], *b = &sig->inputs[1], *o = &sig->outputs[0];
  TRY(md__kcheck_tensor(st, "input", 0, NULL, a, MD__T_ANY, &u));
  TRY(md__kcheck_tensor(st, "input", 1, NULL, b, MD__T_ANY, &u));
  TRY(md__kcheck_same_type(st, "input", 1, NULL, b, a->type, "input 0"));
  TRY(md__kcheck_activation(st, 2, &sig->inputs[2]));
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_ANY, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, a->type, "input 0"));

  /* Broadcast what is known: a pair of known dims must be equal or contain a 1; an unknown
   * dim paired with n > 1 must be n or 1, so the output dim is n; paired with 1 it stays
   * unknown. */
  uint32_t rank = 0, dims[MD_MAX_RANK];
  if (a->rank && b->rank) {
    rank = a->rank > b->rank ? a->rank : b->rank;
    for (uint32_t k = 0; k < rank; k++) {
      uint32_t da = k < a->rank ? a->dims[a->rank - 1 - k] : 1;
      uint32_t db = k < b->rank ? b->dims[b->rank - 1 - k] : 1;
      if (da && db && da != db && da != 1 && db != 1) {
        char sa[128], sb[128];
        return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                              "input 0 dims %s and input 1 dims %s do not broadcast (output axis %"
                              PRIu32 ": %" PRIu32 " vs %" PRIu32 ")",
                              md__kdims_str(a->rank, a->dims, sa, sizeof sa),
                              md__kdims_str(b->rank, b->dims, sb, sizeof sb), rank - 1 - k, da, db);
      }
      uint32_t d;
      if (da && db) d = da > db ? da : db;
      else d = (da > 1) ? da : (db > 1 ? db : 0);
      dims[rank - 1 - k] = d;
    }
  }
  TRY(md__kcheck_output_dims(st, sig, 0, rank, dims));
  return md__kcheck_done(st, &u);
}

/* Execute-time validation shared by shape() and run(): known dims, a valid activation, dims
 * that broadcast, an output that is not absurdly large. */
static md_status binary_infer(const md__kview *v, md__bcast *plan, int32_t *act,
                              md_kernel_status *st) {
  TRY(md__kexec_known(st, "input", 0, NULL, &v[0], NULL));
  TRY(md__kexec_known(st, "input", 1, NULL, &v[1], NULL));
  TRY(md__kexec_activation(st, 2, &v[2], act));
  uint32_t bad;
  if (md__bcast_init(plan, v[0].rank, v[0].dims, v[1].rank, v[1].dims, &bad) != 0) {
    char sa[128], sb[128];
    uint32_t r = v[0].rank > v[1].rank ? v[0].rank : v[1].rank;
    uint32_t k = r - 1 - bad; /* position from the end */
    uint32_t da = k < v[0].rank ? v[0].dims[v[0].rank - 1 - k] : 1;
    uint32_t db = k < v[1].rank ? v[1].dims[v[1].rank - 1 - k] : 1;
    return md_kernel_fail(st, MD_INVALID_ARGUMENT,
                          "input 0 dims %s and input 1 dims %s do not broadcast (output axis %"
                          PRIu32 ": %" PRIu32 " vs %" PRIu32 ")",
                          md__kdims_str(v[0].rank, v[0].dims, sa, sizeof sa),
                          md__kdims_str(v[1].rank, v[1].dims, sb, sizeof sb), bad, da, db);
  }
  md__kview out = {.type = v[0].type, .rank = plan->rank, .dims = plan->dims};
  return md__kexec_known(st, "output", 0, NULL, &out, NULL);
}

static md_status binary_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                              void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 3, 3, 1));
  md__kview v[3];
  for (uint32_t i = 0; i < 3; i++) md__kview_info(&v[i], &sig->inputs[i]);
  md__bcast plan;
  int32_t act;
  TRY(binary_infer(v, &plan, &act, st));
  out[0].rank = plan.rank;
  for (uint32_t i = 0; i < plan.rank; i++) out[0].dims[i] = plan.dims[i];
  return MD_NONE;
}

static md_status binary_run(const md_kernel_call *c, md_kernel_status *st, int op) {
  TRY(md__krun_counts(c, st, 3, 3, 1));
  md__kview v[3];
  for (uint32_t i = 0; i < 3; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  md__bcast plan;
  int32_t act;
  TRY(binary_infer(v, &plan, &act, st));
  md_tensor_shape want = {.rank = plan.rank};
  for (uint32_t i = 0; i < plan.rank; i++) want.dims[i] = plan.dims[i];
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], md__kcount(v[0].rank, v[0].dims)));
  TRY(md__krun_buffer(st, "input", 1, &c->inputs[1], md__kcount(v[1].rank, v[1].dims)));
  uint64_t n;
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, &n));

  /* Rows along the last output axis: one index decomposition per row, then strides. */
  const void *a = c->inputs[0].data, *b = c->inputs[1].data;
  void *o = c->outputs[0].data;
  uint64_t row = plan.dims[plan.rank - 1];
  uint64_t sa = plan.sa[plan.rank - 1], sb = plan.sb[plan.rank - 1];
  for (uint64_t base = 0; base < n; base += row) {
    uint64_t oa, ob;
    md__bcast_offsets(&plan, base, &oa, &ob);
    for (uint64_t j = 0; j < row; j++) {
      float x = md__kld(a, oa + j * sa), y = md__kld(b, ob + j * sb);
      md__kst(o, base + j, md__act_apply(act, md__binop(op, x, y)));
    }
  }
  return MD_NONE;
}

static void run_add(const md_kernel_call *c, md_kernel_status *st) {
  (void)binary_run(c, st, MD__BIN_ADD);
}
static void run_sub(const md_kernel_call *c, md_kernel_status *st) {
  (void)binary_run(c, st, MD__BIN_SUB);
}
static void run_mul(const md_kernel_call *c, md_kernel_status *st) {
  (void)binary_run(c, st, MD__BIN_MUL);
}

/* ---- RELU ----------------------------------------------------------------------------- */

static md_status relu_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  md__kunsup u = {0};
  TRY(md__kcheck_counts(sig, st, 1, 1, 1));
  const md_operand_info *a = &sig->inputs[0], *o = &sig->outputs[0];
  TRY(md__kcheck_tensor(st, "input", 0, NULL, a, MD__T_FLOAT | MD__T_QUANT, &u));
  TRY(md__kcheck_tensor(st, "output", 0, NULL, o, MD__T_FLOAT | MD__T_QUANT, &u));
  TRY(md__kcheck_same_type(st, "output", 0, NULL, o, a->type, "input 0"));
  TRY(md__kcheck_output_dims(st, sig, 0, a->rank, a->dims));
  return md__kcheck_done(st, &u);
}

static md_status relu_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                            void *user) {
  (void)user;
  TRY(md__kcheck_counts(sig, st, 1, 1, 1));
  md__kview v;
  md__kview_info(&v, &sig->inputs[0]);
  TRY(md__kexec_known(st, "input", 0, NULL, &v, NULL));
  out[0].rank = v.rank;
  for (uint32_t i = 0; i < v.rank; i++) out[0].dims[i] = v.dims[i];
  return MD_NONE;
}

static md_status relu_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 1, 1, 1));
  md__kview v;
  md__kview_tensor(&v, &c->inputs[0]);
  uint64_t n;
  TRY(md__kexec_known(st, "input", 0, NULL, &v, &n));
  md_tensor_shape want = {.rank = v.rank};
  for (uint32_t i = 0; i < v.rank; i++) want.dims[i] = v.dims[i];
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], n));
  TRY(md__krun_output(st, 0, &c->outputs[0], &want, NULL));
  const void *a = c->inputs[0].data;
  void *o = c->outputs[0].data;
  for (uint64_t i = 0; i < n; i++) md__kst(o, i, md__act_apply(MD__ACT_RELU, md__kld(a, i)));
  return MD_NONE;
}

static void relu_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)relu_do(c, st);
}

#define DEF(nm, lo, hi, chk, shp, rn)                                                     \
  {.struct_size = sizeof(md_kernel_def), .name = nm, .min_inputs = lo, .max_inputs = hi,  \
   .n_outputs = 1, .check = chk, .shape = shp, .run = rn}

const md_kernel_def md__host_elementwise_kernels[] = {
    DEF("ADD", 3, 3, binary_check, binary_shape, run_add),
    DEF("SUB", 3, 3, binary_check, binary_shape, run_sub),
    DEF("MUL", 3, 3, binary_check, binary_shape, run_mul),
    DEF("RELU", 1, 1, relu_check, relu_shape, relu_run),
};
const uint32_t md__host_elementwise_count =
    (uint32_t)(sizeof md__host_elementwise_kernels / sizeof md__host_elementwise_kernels[0]);
