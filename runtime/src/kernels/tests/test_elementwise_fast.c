/* test_elementwise_fast.c - the fast paths of ADD/SUB/MUL/RELU: the blocked (vectorised) loops
 * against an element-by-element reference, bit for bit, over every operator and activation,
 * tail lengths, broadcast patterns, unaligned buffers, in-place and partially overlapping
 * outputs; and the failure messages of the execute-time checks, which are now formatted only
 * on failure, pinned byte for byte. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>

#include "ktest.h"
#include "md_math.h"

/* ---- reference ------------------------------------------------------------------------ */

static float ld(const void *p, uint64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)p + 4 * i, 4);
  return v;
}
static void st4(void *p, uint64_t i, float v) { memcpy((unsigned char *)p + 4 * i, &v, 4); }

/* Element by element, reading each input element from memory when it is needed (so an output
 * overlapping an input sees what earlier elements wrote, as the original loop did). */
static void ref_binary(int op, int32_t act, uint32_t ra, const uint32_t *da, const void *a,
                       uint32_t rb, const uint32_t *db, const void *b, void *o) {
  uint32_t r = ra > rb ? ra : rb, dims[MD_MAX_RANK];
  uint64_t n = 1;
  for (uint32_t k = 0; k < r; k++) {
    uint32_t x = k < ra ? da[ra - 1 - k] : 1, y = k < rb ? db[rb - 1 - k] : 1;
    dims[r - 1 - k] = x > y ? x : y;
    n *= dims[r - 1 - k];
  }
  for (uint64_t i = 0; i < n; i++) {
    uint64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (uint32_t k = 0; k < r; k++) {
      uint32_t ax = r - 1 - k, c = (uint32_t)(rem % dims[ax]);
      rem /= dims[ax];
      uint32_t x = k < ra ? da[ra - 1 - k] : 1, y = k < rb ? db[rb - 1 - k] : 1;
      if (x != 1) ia += c * sa;
      if (y != 1) ib += c * sb;
      sa *= x;
      sb *= y;
    }
    st4(o, i, md__act_apply(act, md__binop(op, ld(a, ia), ld(b, ib))));
  }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* Values that exercise every branch of the activations: NaN, +-0, +-inf, both sides of -1, 0,
 * 1 and 6. */
static float rnd_value(void) {
  static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 6.0f, 6.5f, -1.5f, 0.5f,
                                  INFINITY, -INFINITY};
  uint32_t k = rnd32() % 16;
  if (k == 0) return NAN;
  if (k < 4) return special[rnd32() % (sizeof special / sizeof special[0])];
  return ((float)(rnd32() % 2001) - 1000.0f) / 111.0f;
}

static void fill(void *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) st4(p, i, rnd_value());
}

static const char *const bin_ops[] = {"ADD", "SUB", "MUL"};

/* Runs op (index into bin_ops) with activation act on a (ra, da) and b (rb, db) at byte offsets
 * of fresh buffers, and compares the output bytes with the reference. */
static void check_binary(int op, int32_t act, uint32_t ra, const uint32_t *da, uint32_t rb,
                         const uint32_t *db, unsigned mis_a, unsigned mis_b, unsigned mis_o) {
  uint64_t na = kt_count(ra, da), nb = kt_count(rb, db);
  uint32_t r = ra > rb ? ra : rb;
  uint64_t n = 1;
  for (uint32_t k = 0; k < r; k++) {
    uint32_t x = k < ra ? da[ra - 1 - k] : 1, y = k < rb ? db[rb - 1 - k] : 1;
    n *= x > y ? x : y;
  }
  unsigned char *ab = malloc(na * 4 + 8), *bb = malloc(nb * 4 + 8), *ob = malloc(n * 4 + 8),
                *want = malloc(n * 4);
  cr_assert(ab && bb && ob && want);
  void *a = ab + mis_a, *b = bb + mis_b, *o = ob + mis_o;
  fill(a, na);
  fill(b, nb);
  memset(ob, 0x5A, n * 4 + 8);
  ref_binary(op, act, ra, da, a, rb, db, b, want);
  md_tensor in[3] = {kt_f32(ra, da, a), kt_f32(rb, db, b), kt_i32(&act)};
  md_tensor out = kt_out(o, n * 4);
  md_kernel_status st;
  kt_assert_ok(kt_exec(bin_ops[op], in, 3, &out, &st), st);
  for (uint64_t i = 0; i < n; i++) {
    uint32_t g, w;
    memcpy(&g, (unsigned char *)o + 4 * i, 4);
    memcpy(&w, want + 4 * i, 4);
    cr_assert_eq(g, w, "%s act %d element %llu of %llu: got %08x (%g), want %08x (%g)",
                 bin_ops[op], (int)act, (unsigned long long)i, (unsigned long long)n, g,
                 (double)ld(o, i), w, (double)ld(want, i));
  }
  /* Nothing written around the output. */
  for (unsigned i = 0; i < mis_o; i++) cr_assert_eq(ob[i], 0x5A);
  for (unsigned i = 0; i < 8 - mis_o; i++) cr_assert_eq(ob[mis_o + n * 4 + i], 0x5A);
  free(ab);
  free(bb);
  free(ob);
  free(want);
}

/* ---- blocked loops against the reference ---------------------------------------------- */

Test(elementwise_fast, every_op_and_activation_over_tail_lengths) {
  for (int op = 0; op < 3; op++)
    for (int32_t act = 0; act < 4; act++)
      for (uint32_t n = 1; n <= 41; n++) {
        const uint32_t d[1] = {n};
        check_binary(op, act, 1, d, 1, d, 0, 0, 0);
      }
}

Test(elementwise_fast, large_same_shape_all_ops) {
  for (int op = 0; op < 3; op++)
    for (int32_t act = 0; act < 4; act++) check_binary(op, act, 2, D(33, 65), 2, D(33, 65), 0, 0, 0);
}

Test(elementwise_fast, unaligned_buffers_every_offset) {
  for (unsigned m = 0; m < 4; m++)
    for (int op = 0; op < 3; op++) {
      check_binary(op, 1, 1, D(1027), 1, D(1027), m, (m + 1) % 4, (m + 3) % 4);
      check_binary(op, 3, 2, D(7, 129), 1, D(129), (m + 2) % 4, m, (m + 1) % 4);
    }
}

typedef struct bcast_case {
  uint32_t ra, da[MD_MAX_RANK], rb, db[MD_MAX_RANK];
} bcast_case;

static bcast_case bcast_cases[] = {
    {1, {1}, 1, {1}},                        /* a single element */
    {1, {37}, 1, {1}},                       /* vector op scalar */
    {1, {1}, 1, {37}},                       /* scalar op vector */
    {2, {5, 7}, 1, {7}},                     /* rows: bias add */
    {2, {5, 9}, 2, {5, 1}},                  /* a column broadcast along rows */
    {2, {5, 1}, 2, {1, 9}},                  /* outer product */
    {3, {3, 1, 5}, 2, {4, 1}},
    {3, {1, 1, 17}, 1, {17}},                /* leading 1s collapse */
    {4, {2, 3, 4, 5}, 3, {3, 1, 5}},
    {4, {2, 1, 4, 6}, 4, {2, 3, 1, 6}},
    {3, {6, 1, 1}, 3, {6, 1, 1}},            /* trailing 1s */
    {4, {3, 4, 5, 6}, 4, {3, 4, 5, 6}},       /* collapses to one row */
    {4, {3, 1, 5, 6}, 4, {1, 4, 5, 6}},       /* inner [5,6] merges, outer broadcast */
    {8, {2, 1, 2, 1, 3, 1, 2, 5}, 5, {2, 3, 4, 1, 5}},
    {8, {1, 2, 1, 2, 1, 3, 2, 1}, 8, {2, 1, 2, 1, 3, 1, 1, 9}},
};

ParameterizedTestParameters(elementwise_fast, broadcast_patterns) {
  return cr_make_param_array(bcast_case, bcast_cases,
                             sizeof bcast_cases / sizeof bcast_cases[0]);
}

ParameterizedTest(bcast_case *c, elementwise_fast, broadcast_patterns) {
  for (int op = 0; op < 3; op++)
    for (int32_t act = 0; act < 4; act++) {
      check_binary(op, act, c->ra, c->da, c->rb, c->db, 0, 0, 0);
      check_binary(op, act, c->rb, c->db, c->ra, c->da, 1, 2, 3);
    }
}

Test(elementwise_fast, relu_over_lengths_offsets_and_specials) {
  for (uint32_t n = 1; n <= 70; n += (n < 20 ? 1 : 7))
    for (unsigned m = 0; m < 4; m++) {
      unsigned char *ib = malloc(n * 4 + 4), *ob = malloc(n * 4 + 4);
      cr_assert(ib && ob);
      void *a = ib + m, *o = ob + (3 - m);
      fill(a, n);
      md_tensor in = kt_f32(1, D(n), a), out = kt_out(o, n * 4);
      md_kernel_status st;
      kt_assert_ok(kt_exec("RELU", &in, 1, &out, &st), st);
      for (uint32_t i = 0; i < n; i++) {
        float x = ld(a, i), w = md__act_apply(MD__ACT_RELU, x), g = ld(o, i);
        cr_assert(memcmp(&g, &w, 4) == 0, "n %u element %u: relu(%g) = %g, want %g", n, i,
                  (double)x, (double)g, (double)w);
      }
      free(ib);
      free(ob);
    }
}

/* ---- in place and overlapping outputs ------------------------------------------------- */

Test(elementwise_fast, in_place_on_either_input_matches_out_of_place) {
  enum { N = 203 };
  for (int op = 0; op < 3; op++)
    for (int32_t act = 0; act < 4; act++)
      for (int which = 0; which < 3; which++) { /* output on a, on b, or a == b == output */
        float a[N], b[N], want[N];
        fill(a, N);
        fill(b, N);
        if (which == 2) memcpy(b, a, sizeof a);
        ref_binary(op, act, 1, D(N), a, 1, D(N), b, want);
        float *o = which == 1 ? b : a;
        md_tensor in[3] = {kt_f32(1, D(N), a), kt_f32(1, D(N), which == 2 ? a : b),
                           kt_i32(&act)};
        md_tensor out = kt_out(o, sizeof a);
        md_kernel_status st;
        kt_assert_ok(kt_exec(bin_ops[op], in, 3, &out, &st), st);
        cr_assert(memcmp(o, want, sizeof want) == 0, "%s act %d in place (%d) differs",
                  bin_ops[op], (int)act, which);
      }
}

Test(elementwise_fast, in_place_with_a_broadcast_operand) {
  /* [6,11] += [11] and [6,11] -= [6,1] written over input 0; [1] - [40] over input 1. */
  float a[66], b[11], c[6], want[66];
  int32_t act = 0;
  md_kernel_status st;
  fill(a, 66);
  fill(b, 11);
  ref_binary(MD__BIN_ADD, act, 2, D(6, 11), a, 1, D(11), b, want);
  md_tensor in[3] = {kt_f32(2, D(6, 11), a), kt_f32(1, D(11), b), kt_i32(&act)};
  md_tensor out = kt_out(a, sizeof a);
  kt_assert_ok(kt_exec("ADD", in, 3, &out, &st), st);
  cr_assert(memcmp(a, want, sizeof want) == 0);

  fill(c, 6);
  ref_binary(MD__BIN_SUB, act, 2, D(6, 11), a, 2, D(6, 1), c, want);
  md_tensor in2[3] = {kt_f32(2, D(6, 11), a), kt_f32(2, D(6, 1), c), kt_i32(&act)};
  out = kt_out(a, sizeof a);
  kt_assert_ok(kt_exec("SUB", in2, 3, &out, &st), st);
  cr_assert(memcmp(a, want, sizeof want) == 0);

  float s = 2.5f, v[40], wv[40];
  fill(v, 40);
  ref_binary(MD__BIN_SUB, act, 1, D(1), &s, 1, D(40), v, wv);
  md_tensor in3[3] = {kt_f32(1, D(1), &s), kt_f32(1, D(40), v), kt_i32(&act)};
  out = kt_out(v, sizeof v);
  kt_assert_ok(kt_exec("SUB", in3, 3, &out, &st), st);
  cr_assert(memcmp(v, wv, sizeof wv) == 0);
}

Test(elementwise_fast, relu_in_place) {
  float a[77], want[77];
  fill(a, 77);
  for (int i = 0; i < 77; i++) want[i] = md__act_apply(MD__ACT_RELU, a[i]);
  md_tensor in = kt_f32(2, D(7, 11), a), out = kt_out(a, sizeof a);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RELU", &in, 1, &out, &st), st);
  cr_assert(memcmp(a, want, sizeof want) == 0);
}

/* An output that partially overlaps an input gets what the element-by-element loop gives
 * (each element computed from memory as earlier elements left it). */
Test(elementwise_fast, partially_overlapping_output_keeps_element_order) {
  enum { N = 50, PAD = 8 };
  static const int shifts[] = {-5, -3, -1, 1, 2, 3, 4, 7};
  for (size_t si = 0; si < sizeof shifts / sizeof shifts[0]; si++) {
    int sh = shifts[si];
    for (int op = 0; op < 4; op++) { /* ADD, SUB, MUL, RELU */
      float mem[N + 2 * PAD], ref[N + 2 * PAD], b[N];
      fill(mem, N + 2 * PAD);
      fill(b, N);
      memcpy(ref, mem, sizeof mem);
      float *a = mem + PAD, *o = mem + PAD + sh;
      float *ra_ = ref + PAD, *ro = ref + PAD + sh;
      int32_t act = 1;
      md_kernel_status st;
      if (op < 3) {
        for (int i = 0; i < N; i++) /* the reference, in the same overlapping memory */
          ro[i] = md__act_apply(act, md__binop(op, ra_[i], b[i]));
        md_tensor in[3] = {kt_f32(1, D(N), a), kt_f32(1, D(N), b), kt_i32(&act)};
        md_tensor out = kt_out(o, N * 4);
        kt_assert_ok(kt_exec(bin_ops[op], in, 3, &out, &st), st);
      } else {
        for (int i = 0; i < N; i++) ro[i] = md__act_apply(MD__ACT_RELU, ra_[i]);
        md_tensor in = kt_f32(1, D(N), a), out = kt_out(o, N * 4);
        kt_assert_ok(kt_exec("RELU", &in, 1, &out, &st), st);
      }
      cr_assert(memcmp(mem, ref, sizeof mem) == 0, "op %d shift %d differs", op, sh);
    }
  }
  /* Byte-level partial overlap (output 2 bytes past the input). */
  unsigned char mem[4 * 30 + 8], ref[sizeof mem];
  fill(mem, sizeof mem / 4);
  memcpy(ref, mem, sizeof mem);
  for (int i = 0; i < 30; i++) st4(ref + 6, (uint64_t)i, md__act_apply(MD__ACT_RELU, ld(ref + 4, (uint64_t)i)));
  md_tensor in = kt_f32(1, D(30), mem + 4), out = kt_out(mem + 6, 120);
  md_kernel_status st;
  kt_assert_ok(kt_exec("RELU", &in, 1, &out, &st), st);
  cr_assert(memcmp(mem, ref, sizeof mem) == 0);
}

/* ---- the success path leaves the status alone ----------------------------------------- */

Test(elementwise_fast, success_writes_no_message) {
  float a[4] = {-1, 2, -3, 4}, b[4] = {1, 1, 1, 1}, o[4];
  int32_t act = 0;
  md_tensor in[3] = {kt_f32(2, D(1, 4), a), kt_f32(2, D(1, 4), b), kt_i32(&act)};
  md_operand_info infos[3] = {kt_info_of(&in[0]), kt_info_of(&in[1]), kt_info_of(&in[2])};
  md_operand_info oinfo = {.type = MD_TENSOR_FLOAT32, .lifetime = MD_SUBGRAPH_OUTPUT};
  static const char *const ops[] = {"ADD", "SUB", "MUL", "RELU"};
  for (int k = 0; k < 4; k++) {
    const md_kernel_def *def = md_kernel_find(ops[k], "host");
    uint32_t n_in = k < 3 ? 3 : 1;
    md_op_sig sig = {.n_inputs = n_in, .inputs = infos, .n_outputs = 1, .outputs = &oinfo};
    md_kernel_status st = {.code = MD_NONE};
    strcpy(st.message, "untouched");
    md_tensor_shape shp;
    cr_assert_eq(def->shape(&sig, &shp, &st, def->user), MD_NONE);
    md_tensor out = kt_out(o, sizeof o);
    out.rank = shp.rank;
    memcpy(out.dims, shp.dims, sizeof shp.dims);
    md_kernel_call call = {.struct_size = sizeof call, .platform = "host", .n_inputs = n_in,
                           .inputs = in, .n_outputs = 1, .outputs = &out, .user = def->user};
    def->run(&call, &st);
    cr_assert_eq(st.code, MD_NONE);
    cr_assert_str_eq(st.message, "untouched", "%s wrote a message on success", ops[k]);
  }
}

/* ---- failure messages, byte for byte -------------------------------------------------- */

static md_status shape_of(const char *op, md_tensor *in, uint32_t n, md_kernel_status *st) {
  md_tensor_shape shp;
  return kt_shape(op, in, n, &shp, st);
}

#define kt_assert_msg(s, st, code, text)                                                      \
  do {                                                                                        \
    cr_assert_eq((s), (code), "status %d, want %d: %s", (int)(s), (int)(code), (st).message); \
    cr_assert_str_eq((st).message, (text));                                                   \
  } while (0)

Test(elementwise_fast, execute_time_messages_are_unchanged) {
  float a[64] = {0}, b[64] = {0}, o[64];
  int32_t act0 = 0, act7 = 7;
  float f1 = 1.0f;
  md_tensor A = kt_f32(2, D(1, 4), a), B = kt_f32(2, D(1, 4), b), O = kt_f32(2, D(1, 4), o);
  md_tensor act_ok = kt_i32(&act0), act_bad = kt_i32(&act7), act_f = kt_f32s(&f1);
  md_tensor act_none = {.type = MD_INT32}, act_short = {.type = MD_INT32, .data = &act0, .bytes = 2};
  md_kernel_status st;

  md_tensor small = O;
  small.bytes = 8;
  kt_assert_msg(kt_run("RELU", &A, 1, &small, &st), st, MD_GENERAL_FAILURE,
                "output 0 buffer is 8 bytes, its dims [1,4] need 16");
  md_tensor x = A;
  x.rank = 0;
  kt_assert_msg(kt_run("RELU", &x, 1, &O, &st), st, MD_INVALID_ARGUMENT,
                "input 0 has unknown rank at execution");
  kt_assert_msg(shape_of("RELU", &x, 1, &st), st, MD_INVALID_ARGUMENT,
                "input 0 has unknown rank at execution");
  x = A;
  x.dims[0] = 2;
  x.dims[1] = 0;
  kt_assert_msg(kt_run("RELU", &x, 1, &O, &st), st, MD_INVALID_ARGUMENT,
                "input 0 dims [2,0] are not fully known at execution");
  x = A;
  x.rank = 9;
  kt_assert_msg(kt_run("RELU", &x, 1, &O, &st), st, MD_INVALID_ARGUMENT,
                "input 0 has rank 9, more than 8");
  x = A;
  x.rank = 3;
  x.dims[0] = x.dims[1] = x.dims[2] = UINT32_MAX;
  kt_assert_msg(shape_of("RELU", &x, 1, &st), st, MD_INVALID_ARGUMENT,
                "input 0 dims [4294967295,4294967295,4294967295] hold more than 2^61 elements");
  x.dims[0] = x.dims[1] = 1u << 21;
  x.dims[2] = 1u << 20; /* 2^62: no overflow, over the limit */
  kt_assert_msg(shape_of("RELU", &x, 1, &st), st, MD_INVALID_ARGUMENT,
                "input 0 dims [2097152,2097152,1048576] hold more than 2^61 elements");

  md_tensor in[3] = {A, B, act_bad};
  kt_assert_msg(shape_of("ADD", in, 3, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (fused activation) is 7; must be 0 (none), 1 (relu), 2 (relu1) or 3 "
                "(relu6)");
  kt_assert_msg(kt_run("ADD", in, 3, &O, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (fused activation) is 7; must be 0 (none), 1 (relu), 2 (relu1) or 3 "
                "(relu6)");
  in[2] = act_f;
  kt_assert_msg(shape_of("ADD", in, 3, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (fused activation) must be INT32, got FLOAT32");
  in[2] = act_none;
  kt_assert_msg(shape_of("ADD", in, 3, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (fused activation) has no value");
  in[2] = act_short;
  kt_assert_msg(kt_run("MUL", in, 3, &O, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (fused activation) value is 2 bytes, expected 4");

  in[2] = act_ok;
  md_tensor flat = kt_f32(1, D(4), o);
  kt_assert_msg(kt_run("SUB", in, 3, &flat, &st), st, MD_GENERAL_FAILURE,
                "output 0 dims [4] differ from the computed [1,4]");
  in[1].type = MD_TENSOR_INT32;
  kt_assert_msg(kt_run("ADD", in, 3, &O, &st), st, MD_GENERAL_FAILURE,
                "input 1: TENSOR_INT32 not supported by the host kernels");
  in[1] = B;
  in[0].bytes = 12;
  kt_assert_msg(kt_run("ADD", in, 3, &O, &st), st, MD_GENERAL_FAILURE,
                "input 0 buffer is 12 bytes, its dims [1,4] need 16");
  in[0] = A;
  md_tensor nobuf = O;
  nobuf.data = NULL;
  kt_assert_msg(kt_run("ADD", in, 3, &nobuf, &st), st, MD_GENERAL_FAILURE,
                "output 0 has no buffer");
  in[1].dims[1] = 3;
  kt_assert_msg(shape_of("ADD", in, 3, &st), st, MD_INVALID_ARGUMENT,
                "input 0 dims [1,4] and input 1 dims [1,3] do not broadcast (output axis 1: 4 vs "
                "3)");
  in[1] = B;

  md_tensor two[2] = {A, A};
  kt_assert_msg(kt_run("RELU", two, 2, &O, &st), st, MD_INVALID_ARGUMENT,
                "expects 1 input, got 2");
  kt_assert_msg(shape_of("RELU", two, 2, &st), st, MD_INVALID_ARGUMENT, "expects 1 input, got 2");
  kt_assert_msg(kt_run("ADD", in, 1, &O, &st), st, MD_INVALID_ARGUMENT, "expects 3 inputs, got 1");

  /* Labelled operands of the other kernels go through the same helpers. */
  md_tensor sm[2] = {A, {.type = MD_FLOAT32}};
  kt_assert_msg(shape_of("SOFTMAX", sm, 2, &st), st, MD_INVALID_ARGUMENT,
                "input 1 (beta) has no value");
  md_tensor w = A, bias = kt_f32(1, D(4), b);
  w.rank = 0;
  md_tensor fc[4] = {A, w, bias, act_ok};
  kt_assert_msg(shape_of("FULLY_CONNECTED", fc, 4, &st), st, MD_INVALID_ARGUMENT,
                "input 1 (weights) has unknown rank at execution");
  fc[1] = A;
  fc[2].rank = 0;
  kt_assert_msg(shape_of("FULLY_CONNECTED", fc, 4, &st), st, MD_INVALID_ARGUMENT,
                "input 2 (bias) has unknown rank at execution");
}
