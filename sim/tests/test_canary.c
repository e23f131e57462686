/* test_canary.c - the red zones' canary: every allocation's red zones hold bytes derived from
 * their address and the device seed, so an overflow is caught whatever bytes it writes (the
 * old constant, or another allocation's red zone copied over), and a kernel's outputs are
 * searched for red-zone bytes it read past an input's end (md/sim.h, "Checks"). */
#include "sim_test.h"

#include <stdlib.h>

#include "sim_arena.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

TestSuite(canary, .fini = simt_close);

/* Opens a device with the given seed as the test's device (closed by simt_close). */
static md_backend *open_seeded(uint64_t seed) {
  simt *t = simt_get();
  t->ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = 16 * MIB, .seed = seed, .has_seed = 1};
  char err[256] = "";
  cr_assert_eq(t->ops->open(&p, &t->dev, err, sizeof err), MD_NONE, "%s", err);
  return t->dev;
}

static uint8_t *hp(md_devptr p) { return simt_get()->ops->kernel_ptr(simt_get()->dev, p); }

/* The 64 bytes after an allocation of `size` bytes, and the 64 before it. */
static void zones(md_backend *d, md_devptr p, uint64_t size, uint8_t back[64], uint8_t front[64]) {
  const uint8_t *h = simt_get()->ops->kernel_ptr(d, p);
  cr_assert_not_null(h);
  memcpy(back, h + size, 64);
  memcpy(front, h - 64, 64);
}

/* ---- the pattern ------------------------------------------------------------------------ */

Test(canary, every_allocation_has_its_own_canary_and_no_word_of_it_is_a_constant_byte) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  enum { N = 64 };
  md_devptr p[N];
  uint64_t words[2 * N * 8];
  size_t nw = 0;
  for (int i = 0; i < N; i++) {
    p[i] = simt_alloc(64);
    uint8_t back[64], front[64];
    zones(d, p[i], 64, back, front);
    for (int k = 0; k < 8; k++) {
      memcpy(&words[nw++], back + 8 * k, 8);
      memcpy(&words[nw++], front + 8 * k, 8);
    }
  }
  /* The front zone of p[i+1] is the tail of p[i]'s span: distinct words all the same. */
  for (size_t i = 0; i < nw; i++) {
    uint8_t b[8];
    memcpy(b, &words[i], 8);
    int all_equal = 1;
    for (int k = 1; k < 8; k++) all_equal &= b[k] == b[0];
    cr_assert(!all_equal, "red-zone word %zu is the byte 0x%02x eight times", i, b[0]);
    for (size_t j = i + 1; j < nw; j++)
      cr_assert_neq(words[i], words[j], "red-zone words %zu and %zu hold the same bytes", i, j);
  }
  for (int i = 0; i < N; i++) simt_get()->ops->free(d, p[i]);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "freeing and coalescing keep every red zone intact");
}

Test(canary, the_same_seed_gives_the_same_pattern_and_another_seed_another) {
  const md_backend_ops *ops = md_sim_backend();
  uint64_t seeds[3] = {7, 7, 8};
  uint8_t back[3][64], front[3][64];
  for (int i = 0; i < 3; i++) {
    md_backend *d = open_seeded(seeds[i]);
    md_devptr a = simt_alloc(1000), b = simt_alloc(100);
    zones(d, b, 100, back[i], front[i]);
    cr_expect_eq(b & 0xFFFFFFFFFFull, 256u + 1280u, "the same offsets on every device");
    ops->free(d, a);
    ops->free(d, b);
    simt_close();
  }
  cr_expect_arr_eq(back[0], back[1], 64, "seed 7 twice: the same red zone past the end");
  cr_expect_arr_eq(front[0], front[1], 64, "seed 7 twice: the same red zone before the start");
  for (int k = 0; k < 64; k += 8) {
    cr_expect(memcmp(back[0] + k, back[2] + k, 8) != 0, "seed 8 repeats seed 7's word at +%d", k);
    cr_expect(memcmp(front[0] + k, front[2] + k, 8) != 0, "seed 8 repeats seed 7's word at -%d", 64 - k);
  }
  /* Unseeded devices draw a seed of their own. */
  uint8_t u[2][64], f[2][64];
  for (int i = 0; i < 2; i++) {
    md_backend *d = simt_open(16 * MIB, NULL, 0);
    md_devptr a = simt_alloc(100);
    zones(d, a, 100, u[i], f[i]);
    ops->free(d, a);
    simt_close();
  }
  cr_expect(memcmp(u[0], u[1], 64) != 0, "two unseeded devices share a red-zone pattern");
}

/* ---- writes ----------------------------------------------------------------------------- */

/* Copies output 0's size plus 16 bytes from input 0: past the input's end into the output's
 * red zone (the overflow that the old constant red zone could not see). */
static void k_copy_over(const md_kernel_call *c, md_kernel_status *st) {
  memcpy(c->outputs[0].data, c->inputs[0].data, c->outputs[0].bytes + 16);
}

Test(canary, a_kernel_copying_red_zone_bytes_into_its_outputs_red_zone_is_caught) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(64), out = simt_alloc(64);
  uint8_t zin[64], zout[64], f[64];
  zones(d, in, 64, zin, f);
  zones(d, out, 64, zout, f);
  cr_assert(memcmp(zin, zout, 16) != 0, "the two red zones hold the same bytes: the copy would pass");
  md_kernel_def k = simt_kernel("copy_over", k_copy_over);
  md_tensor ti = simt_tensor(hp(in), 16), to = simt_tensor(hp(out), 16);
  md_kernel_status st;
  char hin[24], hout[24];
  cr_expect_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_GENERAL_FAILURE);
  /* (A copied byte equals the canary it covers by chance, 1 in 256: the count and the first
   * offset are not asserted exactly.) */
  cr_expect(strstr(st.message, "'copy_over'") && strstr(st.message, "red zone hit") &&
                strstr(st.message, "byte(s) written past the end of allocation") &&
                strstr(st.message, simt_hex(out, hout)) && strstr(st.message, "first at +6"),
            "message: %s", st.message);
  /* The bytes found there are the input's red zone: the message says whose. */
  cr_expect(strstr(st.message, "red zone past the end of allocation") && strstr(st.message, simt_hex(in, hin)),
            "message: %s", st.message);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.redzone_hits, 1);
  cr_expect_eq(md_sim_check(d, NULL, 0), 0, "repaired when reported");
  ops->free(d, in);
  ops->free(d, out);
  cr_expect_eq(simt_stats().common.redzone_hits, 1, "not counted again at free");
}

/* Writes the old red-zone byte 0xFD over output 0's first 4 bytes past its end (`user` NULL)
 * or over its whole red zone of 64 bytes. */
static void k_old_constant(const md_kernel_call *c, md_kernel_status *st) {
  memset((uint8_t *)c->outputs[0].data + c->outputs[0].bytes, 0xFD, c->user ? 64 : 4);
}

Test(canary, a_kernel_writing_the_old_constant_byte_over_a_red_zone_is_caught) {
  for (uint64_t seed = 1; seed <= 16; seed++) {
    md_backend *d = open_seeded(seed);
    const md_backend_ops *ops = simt_get()->ops;
    md_devptr out = simt_alloc(64);
    md_kernel_def k = simt_kernel("fd", k_old_constant);
    md_tensor to = simt_tensor(hp(out), 16);
    md_kernel_status st;
    char hex[24];
    cr_expect_eq(simt_launch(NULL, &k, NULL, &to, &st), MD_GENERAL_FAILURE, "seed %" PRIu64 ": one float", seed);
    cr_expect(strstr(st.message, "past the end") && strstr(st.message, simt_hex(out, hex)), "%s", st.message);
    k.user = "whole zone";
    cr_expect_eq(simt_launch(NULL, &k, NULL, &to, &st), MD_GENERAL_FAILURE, "seed %" PRIu64 ": 64 bytes", seed);
    cr_expect(strstr(st.message, "written past the end") && strstr(st.message, hex), "%s", st.message);
    cr_expect_eq(simt_stats().common.redzone_hits, 2);
    ops->free(d, out);
    simt_close();
  }
}

/* ---- reads ------------------------------------------------------------------------------ */

/* Copies output 0's bytes from input 0, which is shorter: an element-wise kernel that reads
 * past its input's end into its output's payload. */
static void k_copy_out_bytes(const md_kernel_call *c, md_kernel_status *st) {
  memcpy(c->outputs[0].data, c->inputs[0].data, c->outputs[0].bytes);
}

Test(canary, a_kernel_reading_past_its_input_into_its_outputs_payload_is_caught) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(64), out = simt_alloc(128);
  md_kernel_def k = simt_kernel("overread", k_copy_out_bytes);
  md_tensor ti = simt_tensor(hp(in), 16), to = simt_tensor(hp(out), 32);
  md_kernel_status st;
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "'overread'") && strstr(st.message, "red zone read") &&
                strstr(st.message, "64 byte(s) past the end of allocation") && strstr(st.message, simt_hex(in, hex)) &&
                strstr(st.message, "input 0") && strstr(st.message, "from +64") &&
                strstr(st.message, "output 0 at +64"),
            "message: %s", st.message);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.redzone_reads, 1);
  cr_expect_eq(s.common.redzone_hits, 0, "nothing was written out of bounds");
  char rep[256];
  md_sim_report_last(d, rep, sizeof rep);
  cr_expect(strstr(rep, "red zone read") != NULL, "last report: %s", rep);

  /* The same on a stream: the finding comes from stream_sync. */
  md_stream *q;
  cr_assert_eq(ops->stream_create(d, &q), MD_NONE);
  cr_expect_eq(simt_launch(q, &k, &ti, &to, &st), MD_NONE, "accepted: %s", st.message);
  char err[256] = "";
  cr_expect_eq(ops->stream_sync(d, q, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect(strstr(err, "red zone read") && strstr(err, hex), "%s", err);
  ops->stream_destroy(d, q);
  cr_expect_eq(simt_stats().redzone_reads, 2);

  /* A kernel that stays inside its input is not a finding. */
  md_kernel_def ok = simt_kernel("inc", simt_k_inc);
  to = simt_tensor(hp(out), 16);
  cr_expect_eq(simt_launch(NULL, &ok, &ti, &to, &st), MD_NONE, "%s", st.message);
  ops->free(d, in);
  ops->free(d, out);
}

Test(canary, one_float_read_past_the_end_lands_where_an_element_wise_kernel_puts_it) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(60), out = simt_alloc(64);   /* 15 floats in, 16 out */
  md_kernel_def k = simt_kernel("off_by_one", k_copy_out_bytes);
  md_tensor ti = simt_tensor(hp(in), 15), to = simt_tensor(hp(out), 16);
  md_kernel_status st;
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "4 byte(s) past the end of allocation") && strstr(st.message, simt_hex(in, hex)) &&
                strstr(st.message, "(size 60, input 0), from +60") && strstr(st.message, "output 0 at +60"),
            "message: %s", st.message);
  ops->free(d, in);
  ops->free(d, out);
}

/* Copies 16 bytes from past input 0's end to output 0 at +8 (`user` NULL), or 16 bytes from
 * before input 0's start to output 0 at +0: not where an element-wise kernel puts them. */
static void k_displaced(const md_kernel_call *c, md_kernel_status *st) {
  const uint8_t *in = c->inputs[0].data;
  uint8_t *out = c->outputs[0].data;
  if (c->user) memcpy(out, in - 16, 16);
  else memcpy(out + 8, in + c->inputs[0].bytes, 16);
}

Test(canary, red_zone_words_anywhere_in_an_output_are_found_past_the_end_and_before_the_start) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(64), out = simt_alloc(4096);
  md_kernel_def k = simt_kernel("gather", k_displaced);
  md_tensor ti = simt_tensor(hp(in), 16), to = simt_tensor(hp(out), 1024);
  md_kernel_status st;
  char hex[24];
  cr_expect_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "16 byte(s) past the end of allocation") && strstr(st.message, simt_hex(in, hex)) &&
                strstr(st.message, "from +64") && strstr(st.message, "output 0 at +8"),
            "message: %s", st.message);
  k.user = "before";
  cr_expect_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_GENERAL_FAILURE);
  cr_expect(strstr(st.message, "16 byte(s) before the start of allocation") && strstr(st.message, hex) &&
                strstr(st.message, "from -16") && strstr(st.message, "output 0 at +0"),
            "message: %s", st.message);
  cr_expect_eq(simt_stats().redzone_reads, 2);
  ops->free(d, in);
  ops->free(d, out);
}

Test(canary, large_outputs_are_searched_element_wise_and_everywhere_only_with_check_all) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  uint64_t big = 256 * KIB;   /* above the size searched whole by default */
  md_devptr in = simt_alloc(big - 64), out = simt_alloc(big);
  md_kernel_def over = simt_kernel("overread", k_copy_out_bytes), disp = simt_kernel("gather", k_displaced);
  md_tensor ti = simt_tensor(hp(in), (big - 64) / 4), to = simt_tensor(hp(out), big / 4);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &over, &ti, &to, &st), MD_GENERAL_FAILURE, "element-wise: always");
  cr_expect(strstr(st.message, "64 byte(s) past the end") != NULL, "%s", st.message);
  memset(hp(out), 0, big);   /* no copy left where the element-wise search looks */
  cr_expect_eq(simt_launch(NULL, &disp, &ti, &to, &st), MD_NONE, "a displaced copy in a large output: not searched");
  md_sim_debug_set(d, MD_SIM_DEBUG_CHECK_ALL);
  cr_expect_eq(simt_launch(NULL, &disp, &ti, &to, &st), MD_GENERAL_FAILURE, "with MD_SIM_DEBUG_CHECK_ALL");
  cr_expect(strstr(st.message, "output 0 at +8") != NULL, "%s", st.message);
  md_sim_debug_set(d, 0);
  ops->free(d, in);
  ops->free(d, out);
}

/* Fills output 0 with xorshift64* words from the seed in `user`. */
static void k_random(const md_kernel_call *c, md_kernel_status *st) {
  uint64_t x = *(const uint64_t *)c->user;
  uint8_t *o = c->outputs[0].data;
  for (uint64_t i = 0; i + 8 <= c->outputs[0].bytes; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    uint64_t v = x * 2685821657736338717ull;
    memcpy(o + i, &v, 8);
  }
}

Test(canary, outputs_of_arbitrary_bytes_are_no_finding) {
  md_backend *d = simt_open(16 * MIB, NULL, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr in = simt_alloc(64), out = simt_alloc(16 * KIB);   /* the largest output searched whole */
  md_kernel_def k = simt_kernel("random", k_random);
  md_tensor ti = simt_tensor(hp(in), 16), to = simt_tensor(hp(out), 4 * KIB);
  md_kernel_status st;
  for (uint64_t seed = 1; seed <= 800; seed++) {   /* 1.6 million words searched */
    k.user = &seed;
    cr_assert_eq(simt_launch(NULL, &k, &ti, &to, &st), MD_NONE, "seed %" PRIu64 ": %s", seed, st.message);
  }
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.redzone_reads + s.common.redzone_hits, 0);
  ops->free(d, in);
  ops->free(d, out);
}

/* The signature scan that sees every word of an output: its SIMD and portable builds find the
 * same first candidate block as a word-by-word reference, wherever candidates are planted. */
Test(canary, the_signature_scan_agrees_with_a_word_by_word_reference_in_both_builds) {
  enum { NW = 1000 };
  uint64_t *w = malloc(NW * sizeof *w), x = 0x1234567ull, sig = 0xBEEF;
  cr_assert_not_null(w);
  for (int round = 0; round < 200; round++) {
    for (size_t i = 0; i < NW; i++) {
      x ^= x >> 12;
      x ^= x << 25;
      x ^= x >> 27;
      w[i] = x * 2685821657736338717ull;
      if (((w[i] ^ (w[i] >> 48) ^ sig) & 0xFFFFu) == 0) w[i] ^= 1;   /* no accidental candidates */
    }
    size_t plant = round == 0 ? NW : (size_t)(x % NW), nw = NW - (size_t)round % 40;
    if (plant < NW) w[plant] = (w[plant] & ~(0xFFFFull << 48)) | (((w[plant] ^ sig) & 0xFFFFu) << 48);
    size_t want = nw;
    for (size_t i = 0; i < nw && want == nw; i++)
      if (((w[i] ^ (w[i] >> 48) ^ sig) & 0xFFFFu) == 0) want = i / 32 * 32;
    for (int simd = 0; simd < 2; simd++)
      cr_assert_eq(md__arena_sig_scan((const uint8_t *)w, nw, sig, simd), want,
                   "round %d (%s): candidate at %zu of %zu", round, simd ? "simd" : "portable", plant, nw);
  }
  free(w);
}
