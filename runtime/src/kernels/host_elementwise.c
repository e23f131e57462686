/* host_elementwise.c - the float32 host kernels ADD, SUB, MUL (numpy-style broadcasting and a
 * fused activation) and RELU, with their prepare-time checks and execute-time shapes. */
#include <inttypes.h>

#include "kernels_int.h"
#include "md_math.h"

#define MD__INLINE static inline __attribute__((always_inline))

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

/* ---- elementwise loops ---------------------------------------------------------------- */
/* The loops take blocks of BLK elements: every element of a block is loaded (md__kld: any
 * alignment; it compiles to a plain, possibly unaligned, load) and computed before the block is
 * stored. The inner loops have a constant trip count, so GCC vectorises them at -O2 (its "very
 * cheap" cost model refuses loops whose trip count is unknown; clang vectorises either way),
 * and because a block is read before it is written no `restrict` is needed: an output that is
 * exactly an input (in place) gets the same results as element by element. An output that
 * partially overlaps an input would not (element i may read what an earlier iteration wrote),
 * so such calls keep the element-by-element loop. Results are bit for bit those of that loop,
 * except which payload comes out when both operands of ADD/MUL are NaN (the compiler may
 * commute them; IEEE 754 leaves it open). BLK is one SSE/NEON vector: with 8, GCC keeps the
 * RELU1/RELU6 blocks in a stack array between the two inner loops. */
#define BLK 4u

/* 1 when the blocked loops may read x (xn elements) while writing o (on elements): x and o do
 * not overlap, or x is exactly o (same start, same element count). */
static int blockable(const void *x, uint64_t xn, const void *o, uint64_t on) {
  uintptr_t xs = (uintptr_t)x, os = (uintptr_t)o;
  if (xs == os) return xn == on;
  return xs + xn * 4 <= os || os + on * 4 <= xs;
}

/* o[i] = act(op(a[va ? i : 0], b[vb ? i : 0])) for i < n; op, act, va, vb are constants in
 * each instantiation below. A broadcast operand (va or vb 0) is loaded once: it is not written
 * (blockable: it does not overlap o). */
MD__INLINE void bin_loop(unsigned char *o, const unsigned char *a, const unsigned char *b,
                         uint64_t n, int op, int act, int va, int vb) {
  const float a0 = va ? 0.0f : md__kld(a, 0), b0 = vb ? 0.0f : md__kld(b, 0);
  uint64_t i = 0;
  for (; n - i >= BLK; i += BLK) {
    float r[BLK];
    for (uint32_t j = 0; j < BLK; j++) {
      float x = va ? md__kld(a, i + j) : a0, y = vb ? md__kld(b, i + j) : b0;
      r[j] = md__act_apply(act, md__binop(op, x, y));
    }
    for (uint32_t j = 0; j < BLK; j++) md__kst(o, i + j, r[j]);
  }
  for (; i < n; i++) {
    float x = va ? md__kld(a, i) : a0, y = vb ? md__kld(b, i) : b0;
    md__kst(o, i, md__act_apply(act, md__binop(op, x, y)));
  }
}

typedef void (*bin_fn)(unsigned char *o, const unsigned char *a, const unsigned char *b,
                       uint64_t n);

/* One function per (op, act, operand pattern): vv both vectors, vs b broadcast, sv a. */
#define BIN_FNS(OP, ACT)                                                                      \
  static void bin_##OP##_##ACT##_vv(unsigned char *o, const unsigned char *a,                 \
                                    const unsigned char *b, uint64_t n) {                     \
    bin_loop(o, a, b, n, MD__BIN_##OP, MD__ACT_##ACT, 1, 1);                                  \
  }                                                                                           \
  static void bin_##OP##_##ACT##_vs(unsigned char *o, const unsigned char *a,                 \
                                    const unsigned char *b, uint64_t n) {                     \
    bin_loop(o, a, b, n, MD__BIN_##OP, MD__ACT_##ACT, 1, 0);                                  \
  }                                                                                           \
  static void bin_##OP##_##ACT##_sv(unsigned char *o, const unsigned char *a,                 \
                                    const unsigned char *b, uint64_t n) {                     \
    bin_loop(o, a, b, n, MD__BIN_##OP, MD__ACT_##ACT, 0, 1);                                  \
  }
#define BIN_OP_FNS(OP) BIN_FNS(OP, NONE) BIN_FNS(OP, RELU) BIN_FNS(OP, RELU1) BIN_FNS(OP, RELU6)
BIN_OP_FNS(ADD)
BIN_OP_FNS(SUB)
BIN_OP_FNS(MUL)

#define BIN_ROW(OP, ACT) {bin_##OP##_##ACT##_vv, bin_##OP##_##ACT##_vs, bin_##OP##_##ACT##_sv}
#define BIN_OP_ROWS(OP) \
  {BIN_ROW(OP, NONE), BIN_ROW(OP, RELU), BIN_ROW(OP, RELU1), BIN_ROW(OP, RELU6)}
/* [op][act][pattern]; indexed by the MD__BIN_* and MD__ACT_* values. */
static const bin_fn bin_fns[3][4][3] = {BIN_OP_ROWS(ADD), BIN_OP_ROWS(SUB), BIN_OP_ROWS(MUL)};

/* A broadcast plan with the output axes of dim 1 dropped and adjacent axes merged wherever
 * both inputs step through them alike (both contiguous across them, or both broadcast along
 * them): same-shape operands become one row of count elements, [n,c] + [c] n rows of c. */
typedef struct rows_plan {
  uint32_t rank;                  /* >= 1 */
  uint64_t dims[MD_MAX_RANK];
  uint64_t sa[MD_MAX_RANK], sb[MD_MAX_RANK];
} rows_plan;

static int stride_merges(uint64_t outer, uint64_t inner, uint64_t inner_dim) {
  return outer == 0 ? inner == 0 : (inner != 0 && outer == inner * inner_dim);
}

static void rows_collapse(const md__bcast *p, rows_plan *q) {
  uint32_t r = 0;
  for (uint32_t k = 0; k < p->rank; k++) {
    uint64_t d = p->dims[k];
    if (d == 1) continue;
    if (r && stride_merges(q->sa[r - 1], p->sa[k], d) && stride_merges(q->sb[r - 1], p->sb[k], d)) {
      q->dims[r - 1] *= d;
    } else {
      q->dims[r] = d;
      r++;
    }
    q->sa[r - 1] = p->sa[k];
    q->sb[r - 1] = p->sb[k];
  }
  if (r == 0) { /* a single element */
    q->dims[0] = 1;
    q->sa[0] = q->sb[0] = 1;
    r = 1;
  }
  q->rank = r;
}

/* The original element-by-element loop: one index decomposition per output row, then
 * strides. Used when the output partially overlaps an input. */
static void binary_loop_generic(const md__bcast *plan, const void *a, const void *b, void *o,
                                uint64_t n, int op, int32_t act) {
  uint64_t row = plan->dims[plan->rank - 1];
  uint64_t sa = plan->sa[plan->rank - 1], sb = plan->sb[plan->rank - 1];
  for (uint64_t base = 0; base < n; base += row) {
    uint64_t oa, ob;
    md__bcast_offsets(plan, base, &oa, &ob);
    for (uint64_t j = 0; j < row; j++) {
      float x = md__kld(a, oa + j * sa), y = md__kld(b, ob + j * sb);
      md__kst(o, base + j, md__act_apply(act, md__binop(op, x, y)));
    }
  }
}

static md_status binary_run(const md_kernel_call *c, md_kernel_status *st, int op) {
  TRY(md__krun_counts(c, st, 3, 3, 1));
  md__kview v[3];
  for (uint32_t i = 0; i < 3; i++) md__kview_tensor(&v[i], &c->inputs[i]);
  md__bcast plan;
  int32_t act;
  TRY(binary_infer(v, &plan, &act, st));
  uint64_t na = md__kcount(v[0].rank, v[0].dims), nb = md__kcount(v[1].rank, v[1].dims);
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], na));
  TRY(md__krun_buffer(st, "input", 1, &c->inputs[1], nb));
  uint64_t n;
  TRY(md__krun_output_dims(st, 0, &c->outputs[0], plan.rank, plan.dims, &n));

  const unsigned char *a = c->inputs[0].data, *b = c->inputs[1].data;
  unsigned char *o = c->outputs[0].data;
  if (!blockable(a, na, o, n) || !blockable(b, nb, o, n)) {
    binary_loop_generic(&plan, a, b, o, n, op, act);
    return MD_NONE;
  }
  rows_plan q;
  rows_collapse(&plan, &q);
  const uint32_t last = q.rank - 1;
  /* The innermost axis has stride 1 for an operand that is not broadcast along it, 0 for one
   * that is; not both 0 (its dim is > 1, or the plan is a single element). */
  const bin_fn fn = bin_fns[op][act][q.sa[last] == 0 ? 2 : (q.sb[last] == 0 ? 1 : 0)];
  const uint64_t row = q.dims[last];
  if (last == 0) {
    fn(o, a, b, row);
    return MD_NONE;
  }
  /* Rows: an odometer over the outer axes keeps the input offsets (elements). */
  uint64_t idx[MD_MAX_RANK] = {0}, oa = 0, ob = 0;
  for (uint64_t base = 0; base < n; base += row) {
    fn(o + base * 4, a + oa * 4, b + ob * 4, row);
    for (uint32_t k = last; k-- > 0;) {
      oa += q.sa[k];
      ob += q.sb[k];
      if (++idx[k] < q.dims[k]) break;
      oa -= q.sa[k] * q.dims[k];
      ob -= q.sb[k] * q.dims[k];
      idx[k] = 0;
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

/* o[i] = relu(a[i]), blocked as bin_loop (o may be a, not overlap it partially). */
static void relu_loop(unsigned char *o, const unsigned char *a, uint64_t n) {
  uint64_t i = 0;
  for (; n - i >= BLK; i += BLK) {
    float r[BLK];
    for (uint32_t j = 0; j < BLK; j++) r[j] = md__act_apply(MD__ACT_RELU, md__kld(a, i + j));
    for (uint32_t j = 0; j < BLK; j++) md__kst(o, i + j, r[j]);
  }
  for (; i < n; i++) md__kst(o, i, md__act_apply(MD__ACT_RELU, md__kld(a, i)));
}

static md_status relu_do(const md_kernel_call *c, md_kernel_status *st) {
  TRY(md__krun_counts(c, st, 1, 1, 1));
  md__kview v;
  md__kview_tensor(&v, &c->inputs[0]);
  uint64_t n;
  TRY(md__kexec_known(st, "input", 0, NULL, &v, &n));
  TRY(md__krun_buffer(st, "input", 0, &c->inputs[0], n));
  TRY(md__krun_output_dims(st, 0, &c->outputs[0], v.rank, v.dims, NULL));
  const unsigned char *a = c->inputs[0].data;
  unsigned char *o = c->outputs[0].data;
  if (blockable(a, n, o, n)) {
    relu_loop(o, a, n);
  } else { /* partial overlap: element by element, as always */
    for (uint64_t i = 0; i < n; i++) md__kst(o, i, md__act_apply(MD__ACT_RELU, md__kld(a, i)));
  }
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
