/* test_hip_kernels.c - every HIP kernel of SPEC 7 against the host reference, on fresh random
 * inputs: on the CPU execution layer (hipcpu_test_hip_kernels, every CI run) and on a GPU
 * (hip_test_hip_kernels, skipped where none answers). Outputs are poisoned (all-ones bytes, a NaN)
 * before each run on both sides, so an element a kernel forgets to write fails the comparison.
 *
 * Tolerances (float32): every operation but SOFTMAX must match the host bit for bit (NaN
 * matches NaN). Elementwise ops and copies compute the same single IEEE operations;
 * FULLY_CONNECTED accumulates each output in the host's order (k ascending, bias after the dot
 * product) with every product and sum rounded (no FMA contraction: docs/hip.md). SOFTMAX: 1e-4
 * relative (the GPU's expf and its block reductions sum in another order). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_test.h"
#include "kernel_ctx.h"
#include "md/kernel.h"

typedef struct arg {           /* one kernel input */
  md_operand_type type;
  uint32_t rank;
  uint32_t dims[MD_MAX_RANK];
  void *host;                  /* float data, or the parameter value */
  uint64_t bytes;
} arg;

static uint64_t seed = 0x9E3779B97F4A7C15u;
static float frand(void) {     /* uniform in [-2, 2) */
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return (float)((seed >> 40) * (4.0 / 16777216.0) - 2.0);
}

static uint64_t count(const arg *a) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < a->rank; i++) n *= a->dims[i];
  return n;
}

static arg tensor(uint32_t rank, const uint32_t *dims) {
  arg a = {.type = MD_TENSOR_FLOAT32, .rank = rank};
  memcpy(a.dims, dims, rank * sizeof *dims);
  uint64_t n = count(&a);
  a.bytes = n * 4;
  float *f = malloc(a.bytes ? a.bytes : 4);
  for (uint64_t i = 0; i < n; i++) f[i] = frand();
  a.host = f;
  return a;
}

static arg i32(int32_t v) {
  arg a = {.type = MD_INT32, .bytes = 4};
  a.host = malloc(4);
  memcpy(a.host, &v, 4);
  return a;
}

static arg f32(float v) {
  arg a = {.type = MD_FLOAT32, .bytes = 4};
  a.host = malloc(4);
  memcpy(a.host, &v, 4);
  return a;
}

static arg ints(uint32_t n, const int32_t *v) {
  arg a = {.type = MD_TENSOR_INT32, .rank = 1, .dims = {n}, .bytes = 4u * n};
  a.host = malloc(a.bytes);
  memcpy(a.host, v, a.bytes);
  return a;
}

enum { TOL_EXACT, TOL_SOFTMAX };

static unsigned bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Runs `name` on host and hip with inputs a[0..n), compares the outputs and frees the inputs. */
static void check(md_backend *b, const char *name, uint32_t n, arg *a, int tol) {
  const md_backend_ops *ops = md_hip_backend();
  const md_kernel_def *hk = md_kernel_find(name, "host"), *gk = md_kernel_find(name, "hip");
  cr_assert_not_null(hk);
  cr_assert_not_null(gk, "no hip kernel %s", name);
  md_kernel_status st;
  char err[256];
  /* Output shape from the reference's shape function. */
  md_operand_info info[8];
  for (uint32_t i = 0; i < n; i++)
    info[i] = (md_operand_info){.type = a[i].type, .rank = a[i].rank, .dims = a[i].dims,
                                .lifetime = MD_TEMPORARY_VARIABLE,
                                .value = a[i].type == MD_TENSOR_FLOAT32 ? NULL : a[i].host,
                                .length = a[i].bytes};
  md_operand_info oinfo = {.type = MD_TENSOR_FLOAT32};
  md_op_sig sig = {.n_inputs = n, .inputs = info, .n_outputs = 1, .outputs = &oinfo};
  md_tensor_shape shape;
  memset(&st, 0, sizeof st);
  cr_assert_eq(hk->shape(&sig, &shape, &st, hk->user), MD_NONE, "%s shape: %s", name, st.message);
  uint64_t on = 1;
  for (uint32_t i = 0; i < shape.rank; i++) on *= shape.dims[i];

  md_tensor ht[9], gt[9];
  md_devptr dev[9] = {0};
  for (uint32_t i = 0; i <= n; i++) {
    const int out = i == n;
    md_tensor t = {.type = out ? MD_TENSOR_FLOAT32 : a[i].type};
    t.rank = out ? shape.rank : a[i].rank;
    memcpy(t.dims, out ? shape.dims : a[i].dims, t.rank * sizeof t.dims[0]);
    t.bytes = out ? on * 4 : a[i].bytes;
    ht[i] = gt[i] = t;
    if (out) {
      ht[i].data = malloc(on * 4 + 4);
      memset(ht[i].data, 0xFF, on * 4);
    } else {
      ht[i].data = a[i].host;
    }
    if (t.type == MD_TENSOR_FLOAT32) {
      cr_assert_eq(ops->alloc(b, t.bytes ? t.bytes : 4, &dev[i]), MD_NONE);
      gt[i].data = ops->kernel_ptr(b, dev[i]);
      void *src = out ? ht[n].data : a[i].host; /* the output: poison */
      cr_assert_eq(ops->write(b, NULL, dev[i], 0, src, t.bytes, err, sizeof err), MD_NONE, "%s", err);
    } else {
      gt[i].data = a[i].host;
    }
  }
  md_kernel_ctx kc;
  md__kctx_init(&kc, MD__KCTX_DEFAULT_LIMIT);
  md_kernel_call hc = {.struct_size = sizeof hc, .platform = "host", .n_inputs = n, .inputs = ht,
                       .n_outputs = 1, .outputs = ht + n, .ctx = &kc};
  memset(&st, 0, sizeof st);
  hk->run(&hc, &st);
  md__kctx_release(&kc);
  cr_assert_eq(st.code, MD_NONE, "host %s: %s", name, st.message);
  md_kernel_call gc = {.struct_size = sizeof gc, .platform = "hip", .n_inputs = n, .inputs = gt,
                       .n_outputs = 1, .outputs = gt + n, .ctx = &kc};
  memset(&st, 0, sizeof st);
  cr_assert_eq(ops->launch(b, NULL, gk, &gc, &st), MD_NONE, "hip %s: %s", name, st.message);
  md__kctx_release(&kc);
  float *g = malloc(on * 4 + 4);
  cr_assert_eq(ops->read(b, NULL, g, dev[n], 0, on * 4, err, sizeof err), MD_NONE, "%s", err);
  const float *h = ht[n].data;
  double worst = 0;
  for (uint64_t i = 0; i < on; i++) {
    if (isnan(h[i]) || isnan(g[i])) {
      cr_assert(isnan(h[i]) && isnan(g[i]), "%s element %llu: host %g, hip %g", name,
                (unsigned long long)i, h[i], g[i]);
      continue;
    }
    if (tol == TOL_EXACT) {
      cr_assert(memcmp(&h[i], &g[i], 4) == 0, "%s element %llu: host %.9g (%#x), hip %.9g (%#x): not bit for bit",
                name, (unsigned long long)i, h[i], bits(h[i]), g[i], bits(g[i]));
      continue;
    }
    double scale = fabs((double)h[i]), limit = 1e-4;
    double e = fabs((double)g[i] - h[i]) / (scale > 1e-30 ? scale : 1e-30);
    if (e > worst) worst = e;
    cr_assert(e <= limit, "%s element %llu: host %.9g, hip %.9g, relative error %.3g > %.0e", name,
              (unsigned long long)i, h[i], g[i], e, limit);
  }
  cr_log_info("%s: %llu elements, worst relative error %.3g", name, (unsigned long long)on, worst);
  for (uint32_t i = 0; i <= n; i++) ops->free(b, dev[i]);
  for (uint32_t i = 0; i < n; i++) free(a[i].host);
  free(ht[n].data);
  free(g);
}

#define DIMS(...) ((const uint32_t[]){__VA_ARGS__})
#define RANK(...) (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))
#define T(...) tensor(RANK(__VA_ARGS__), DIMS(__VA_ARGS__))

Test(hip_kernels, binary_ops_match_the_host_for_every_activation_and_broadcast) {
  md_backend *b = hip_open_or_skip(0);
  static const char *const ops[] = {"ADD", "SUB", "MUL"};
  for (int op = 0; op < 3; op++)
    for (int32_t act = 0; act < 4; act++) {
      check(b, ops[op], 3, (arg[]){T(1000003), T(1000003), i32(act)}, TOL_EXACT);  /* float4 + tail */
      check(b, ops[op], 3, (arg[]){T(5000), T(1), i32(act)}, TOL_EXACT);           /* scalar */
      check(b, ops[op], 3, (arg[]){T(1), T(3, 7), i32(act)}, TOL_EXACT);
      check(b, ops[op], 3, (arg[]){T(64, 1, 33), T(17, 1), i32(act)}, TOL_EXACT);  /* general */
      check(b, ops[op], 3, (arg[]){T(2, 3, 4, 5), T(4, 1), i32(act)}, TOL_EXACT);
    }
  md_hip_backend()->close(b);
}

Test(hip_kernels, relu_matches_the_host) {
  md_backend *b = hip_open_or_skip(0);
  check(b, "RELU", 1, (arg[]){T(100003)}, TOL_EXACT);
  check(b, "RELU", 1, (arg[]){T(3, 5, 7)}, TOL_EXACT);
  md_hip_backend()->close(b);
}

Test(hip_kernels, fully_connected_matches_the_host) {
  md_backend *b = hip_open_or_skip(0);
  for (int32_t act = 0; act < 4; act++) {
    check(b, "FULLY_CONNECTED", 4, (arg[]){T(37, 129), T(65, 129), T(65), i32(act)}, TOL_EXACT);
    check(b, "FULLY_CONNECTED", 4, (arg[]){T(2, 3, 16), T(5, 16), T(5), i32(act)}, TOL_EXACT);
  }
  /* Large enough that FMA contraction changes about 0.5 % of the outputs. */
  check(b, "FULLY_CONNECTED", 4, (arg[]){T(64, 1024), T(256, 1024), T(256), i32(0)}, TOL_EXACT);
  check(b, "FULLY_CONNECTED", 4, (arg[]){T(1, 3), T(1, 3), T(1), i32(1)}, TOL_EXACT);
  /* Few outputs (fc_dot): a long input, and the largest output count it takes. */
  check(b, "FULLY_CONNECTED", 4, (arg[]){T(1, 65536), T(1, 65536), T(1), i32(0)}, TOL_EXACT);
  check(b, "FULLY_CONNECTED", 4, (arg[]){T(4, 301), T(64, 301), T(64), i32(3)}, TOL_EXACT);
  md_hip_backend()->close(b);
}

Test(hip_kernels, softmax_matches_the_host_along_every_axis) {
  md_backend *b = hip_open_or_skip(0);
  check(b, "SOFTMAX", 2, (arg[]){T(7, 1000), f32(1.0f)}, TOL_SOFTMAX);             /* rows */
  check(b, "SOFTMAX", 3, (arg[]){T(8, 33, 5), f32(0.5f), i32(1)}, TOL_SOFTMAX);    /* columns */
  check(b, "SOFTMAX", 3, (arg[]){T(4, 16), f32(2.0f), i32(0)}, TOL_SOFTMAX);
  check(b, "SOFTMAX", 3, (arg[]){T(3, 10), f32(1.0f), i32(-1)}, TOL_SOFTMAX);
  check(b, "SOFTMAX", 2, (arg[]){T(2, 100000), f32(0.1f)}, TOL_SOFTMAX);
  check(b, "SOFTMAX", 3, (arg[]){T(4, 20000, 3), f32(1.0f), i32(1)}, TOL_SOFTMAX); /* long axis, few lines */
  md_hip_backend()->close(b);
}

Test(hip_kernels, reshape_and_concatenation_match_the_host) {
  md_backend *b = hip_open_or_skip(0);
  check(b, "RESHAPE", 2, (arg[]){T(6, 1000), ints(2, (const int32_t[]){-1, 60})}, TOL_EXACT);
  check(b, "CONCATENATION", 4, (arg[]){T(4, 5, 6), T(4, 2, 6), T(4, 7, 6), i32(1)}, TOL_EXACT);
  check(b, "CONCATENATION", 3, (arg[]){T(3, 5), T(2, 5), i32(0)}, TOL_EXACT);
  check(b, "CONCATENATION", 3, (arg[]){T(3, 5), T(3, 9), i32(-1)}, TOL_EXACT);
  check(b, "CONCATENATION", 2, (arg[]){T(1000), i32(0)}, TOL_EXACT);
  md_hip_backend()->close(b);
}

/* ---- random shapes ---- */

static uint64_t shape_seed = 0xC0FFEE123456789u;
static uint32_t urand(uint32_t lo, uint32_t hi) { /* uniform in [lo, hi] */
  shape_seed ^= shape_seed << 13;
  shape_seed ^= shape_seed >> 7;
  shape_seed ^= shape_seed << 17;
  return lo + (uint32_t)((shape_seed >> 33) % (hi - lo + 1));
}

static void random_dims(uint32_t rank, uint32_t *d, uint32_t max) {
  for (uint32_t i = 0; i < rank; i++) d[i] = urand(1, max);
}

/* One random case of a random operation; returns its name for the log. */
static const char *random_case(md_backend *b) {
  uint32_t da[MD_MAX_RANK], db[MD_MAX_RANK], r;
  int32_t act = (int32_t)urand(0, 3);
  switch (urand(0, 6)) {
  case 0: { /* ADD/SUB/MUL with numpy broadcasting: b is a suffix of a with some dims 1, or a is */
    static const char *const ops[] = {"ADD", "SUB", "MUL"};
    const char *op = ops[urand(0, 2)];
    r = urand(1, 5);
    random_dims(r, da, 7);
    uint32_t rb = urand(1, r);
    for (uint32_t i = 0; i < rb; i++) db[i] = urand(0, 2) ? da[r - rb + i] : 1;
    for (uint32_t i = 0; i < r; i++) /* broadcast a along some axes b keeps */
      if (i >= r - rb && db[i - (r - rb)] != 1 && urand(0, 4) == 0) da[i] = 1;
    if (urand(0, 1))
      check(b, op, 3, (arg[]){tensor(r, da), tensor(rb, db), i32(act)}, TOL_EXACT);
    else
      check(b, op, 3, (arg[]){tensor(rb, db), tensor(r, da), i32(act)}, TOL_EXACT);
    return op;
  }
  case 1:
    r = urand(1, 4);
    random_dims(r, da, 40);
    check(b, "RELU", 1, (arg[]){tensor(r, da)}, TOL_EXACT);
    return "RELU";
  case 2: { /* FULLY_CONNECTED: input [batch..., isz], weights [units, isz] */
    const uint32_t isz = urand(1, 70), units = urand(1, 40);
    r = urand(2, 3);
    random_dims(r - 1, da, 12);
    da[r - 1] = isz;
    check(b, "FULLY_CONNECTED", 4,
          (arg[]){tensor(r, da), tensor(2, (uint32_t[]){units, isz}), tensor(1, (uint32_t[]){units}), i32(act)},
          TOL_EXACT);
    return "FULLY_CONNECTED";
  }
  case 3: { /* SOFTMAX along a random axis (long ones now and then) */
    r = urand(1, 4);
    random_dims(r, da, 9);
    int32_t axis = (int32_t)urand(0, r - 1);
    if (urand(0, 3) == 0) da[axis] = urand(64, 700);
    if (urand(0, 1)) axis -= (int32_t)r;
    check(b, "SOFTMAX", 3, (arg[]){tensor(r, da), f32((float)urand(1, 8) * 0.25f), i32(axis)}, TOL_SOFTMAX);
    return "SOFTMAX";
  }
  case 4: { /* CONCATENATION of 1..4 inputs along a random axis */
    r = urand(1, 4);
    random_dims(r, da, 6);
    const uint32_t axis = urand(0, r - 1), n = urand(1, 4);
    arg a[5];
    for (uint32_t i = 0; i < n; i++) {
      memcpy(db, da, sizeof db);
      db[axis] = urand(1, 6);
      a[i] = tensor(r, db);
    }
    a[n] = i32(urand(0, 1) ? (int32_t)axis : (int32_t)axis - (int32_t)r);
    check(b, "CONCATENATION", n + 1, a, TOL_EXACT);
    return "CONCATENATION";
  }
  default: { /* RESHAPE to [-1, last] */
    r = urand(1, 4);
    random_dims(r, da, 9);
    check(b, "RESHAPE", 2, (arg[]){tensor(r, da), ints(2, (const int32_t[]){-1, (int32_t)da[r - 1]})}, TOL_EXACT);
    return "RESHAPE";
  }
  }
}

/* Every kernel against the host on 600 random shapes (ranks 1-5, broadcasts both ways, every
 * activation, random softmax axes, 1-4 concatenated inputs). */
Test(hip_kernels, random_shapes_match_the_host) {
  md_backend *b = hip_open_or_skip(0);
  unsigned counts[7] = {0};
  static const char *const kinds[] = {"ADD", "SUB", "MUL", "RELU", "FULLY_CONNECTED", "SOFTMAX", "CONCATENATION"};
  for (int i = 0; i < 600; i++) {
    const char *k = random_case(b);
    for (int j = 0; j < 7; j++) counts[j] += strcmp(k, kinds[j]) == 0;
  }
  cr_log_info("random shapes: ADD %u SUB %u MUL %u RELU %u FC %u SOFTMAX %u CONCAT %u (rest RESHAPE)", counts[0],
              counts[1], counts[2], counts[3], counts[4], counts[5], counts[6]);
  md_hip_backend()->close(b);
}
