/* test_fuzz.c - the fuzz program encoding (any bytes decode; encode then decode is the same
 * program; a program and its trace round-trip; corpus traces encode), and the oracle (no
 * finding on the reference driver for random programs; a finding for a driver that breaks a
 * rule, by call and signature). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz_codec.h"
#include "fz_harness.h"
#include "mdc/engine.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static size_t random_input(uint8_t *buf, size_t cap) {
  size_t n = 4 + rnd() % (cap - 4);
  for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
  /* Most bytes small: the smart forms (like mutated seeds) rather than literals. */
  for (size_t i = 4; i < n; i++)
    if (rnd() % 4) buf[i] &= 0x3f;
  return n;
}

static char *static_trace(const mdc_fz_prog *p, mdc_fz_target t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fz_trace_opts o = {.target = t, .mode = FZ_TRACE_STATIC, .name = "x"};
  cr_assert_eq(mdc_fz_trace_write(f, p, NULL, &o), 0);
  fclose(f);
  return buf;
}

static mdc_fz_prog P, Q;
static uint8_t buf[1 << 16], enc[1 << 18];

Test(encoding, any_bytes_decode_the_same_way_twice) {
  rng_state = 1;
  for (int i = 0; i < 300; i++) {
    mdc_fz_target t = (mdc_fz_target)(i % FZ_TARGETS);
    size_t n = random_input(buf, 600);
    mdc_fz_decode(t, buf, n, &P);
    mdc_fz_decode(t, buf, n, &Q);
    char *a = static_trace(&P, t), *b = static_trace(&Q, t);
    cr_assert_str_eq(a, b);
    cr_assert_leq(P.n_calls, FZ_MAX_CALLS);
    free(a);
    free(b);
  }
  mdc_fz_decode(FZ_TOKENS, NULL, 0, &P);
  cr_assert_eq(P.n_calls, 0, "no bytes: an empty program");
}

Test(encoding, encoding_a_program_decodes_to_the_same_program) {
  rng_state = 2;
  for (int i = 0; i < 300; i++) {
    mdc_fz_target t = (mdc_fz_target)(i % FZ_TARGETS);
    size_t n = random_input(buf, 600);
    mdc_fz_decode(t, buf, n, &P);
    size_t m = mdc_fz_encode(t, &P, enc, sizeof enc);
    cr_assert_gt(m, 0);
    mdc_fz_decode(t, enc, m, &Q);
    char *a = static_trace(&P, t), *b = static_trace(&Q, t);
    cr_assert_str_eq(a, b, "input %d (target %s)", i, mdc_fz_target_name(t));
    free(a);
    free(b);
  }
}

static fz_harness *harness(int target, const char *driver) {
  char err[512];
  fz_harness *h = mdc_fz_harness_new(target, driver, "backend=sim", err, sizeof err);
  cr_assert_not_null(h, "%s", err);
  return h;
}

/* Writes the program of h's last run as a trace of mode into a temporary file. */
static void write_trace(fz_harness *h, int mode, const char *path, uint16_t upto) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fz_trace_opts o = {.target = (mdc_fz_target)mdc_fz_harness_target(h), .mode = mode, .name = "fuzz/test",
                     .mem_limit = mdc_fz_harness_mem_limit(h), .upto = upto};
  cr_assert_eq(mdc_fz_trace_write(f, mdc_fz_harness_prog(h), mdc_fz_harness_outcomes(h), &o), 0);
  fclose(f);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  static char b[1 << 20];
  size_t n = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[n] = 0;
  return strdup(b);
}

Test(roundtrip, a_program_its_trace_and_the_trace_read_back_agree, .timeout = 240) {
  rng_state = 3;
  char p1[] = "/tmp/mdc-fz-rt1-XXXXXX", p2[] = "/tmp/mdc-fz-rt2-XXXXXX";
  close(mkstemp(p1));
  close(mkstemp(p2));
  for (int target = 0; target < FZ_TARGETS; target++) {
    fz_harness *h = harness(target, NULL);
    const md_driver *drv = mdc_driver_load(NULL, &(void *){NULL}, (char[256]){0}, 256);
    for (int i = 0; i < 60; i++) {
      size_t n = random_input(buf, 500);
      fz_finding f;
      char err[256];
      cr_assert_eq(mdc_fz_harness_one(h, buf, n, &f, err, sizeof err), 0, "%s", err);
      cr_assert(!f.found, "input %d on the reference driver: %s %s", i, f.signature, f.message);
      /* program -> trace (what the driver returned) -> program -> trace: the same text */
      write_trace(h, FZ_TRACE_OBSERVED, p1, 0);
      char err2[512];
      int rd = mdc_fz_trace_read(p1, (mdc_fz_target)target, &P, err2, sizeof err2);
      cr_assert_eq(rd, 0, "%s", err2);
      size_t m = mdc_fz_encode((mdc_fz_target)target, &P, enc, sizeof enc);
      cr_assert_gt(m, 0);
      cr_assert_eq(mdc_fz_harness_one(h, enc, m, &f, err, sizeof err), 0);
      cr_assert(!f.found, "%s", f.message);
      write_trace(h, FZ_TRACE_OBSERVED, p2, 0);
      char *a = slurp(p1), *b = slurp(p2);
      if (target != FZ_CONCURRENCY && strcmp(a, b)) {
        char *x = a, *y = b;
        while (*x && *x == *y) x++, y++;
        while (x > a && x[-1] != '\n') x--, y--;
        cr_assert_fail("input %d target %d: traces differ at\n%.400s\n%.400s", i, target, x, y);
      }
      free(a);
      free(b);
      /* the engine replays both the observed and the oracle trace: Pass */
      if (target != FZ_CONCURRENCY) {
        mdc_result res;
        cr_assert_eq(mdc_trace_run(drv, p1, "backend=sim", &res), MDC_PASS, "observed: %s", res.message);
      }
      mdc_fz_harness_one(h, buf, n, &f, err, sizeof err);
      write_trace(h, FZ_TRACE_ORACLE, p1, 0);
      mdc_result res;
      cr_assert_eq(mdc_trace_run(drv, p1, "backend=sim", &res), MDC_PASS, "oracle (target %d, input %d): %s", target, i,
                   res.message);
    }
    mdc_fz_harness_free(h);
  }
  unlink(p1);
  unlink(p2);
}

Test(oracle, random_programs_find_nothing_on_the_reference_driver, .timeout = 240) {
  rng_state = 4;
  for (int target = 0; target < FZ_TARGETS; target++) {
    fz_harness *h = harness(target, NULL);
    const char *scale = getenv("MDC_FUZZ_TEST_INPUTS");
    int inputs = scale ? atoi(scale) : 400;
    for (int i = 0; i < inputs; i++) {
      size_t n = random_input(buf, 800);
      fz_finding f;
      char err[256];
      cr_assert_eq(mdc_fz_harness_one(h, buf, n, &f, err, sizeof err), 0, "%s", err);
      if (f.found) {
        FILE *o = fopen("/tmp/mdc-fz-finding.bin", "wb");
        if (o) fwrite(buf, 1, n, o), fclose(o);
      }
      cr_assert(!f.found, "target %d input %d (in /tmp/mdc-fz-finding.bin): %s\n%s", target, i, f.signature, f.message);
    }
    mdc_fz_harness_free(h);
  }
}

Test(corpus, traces_within_reach_encode_and_decode_to_themselves) {
  /* spot check: the hand-written token and dynamic-shape traces */
  const char *traces[] = {MDC_CORPUS "/tokens/mac_bit_flip_rejected.jsonl", MDC_CORPUS "/dynamic/successive_executions_resize.jsonl",
                          MDC_CORPUS "/clients/leak_report_counts.jsonl", MDC_CORPUS "/concurrency/racing_writers_keep_other_buffers_intact.jsonl"};
  for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
    for (int t = 0; t < FZ_TARGETS; t++) {
      char err[512];
      int rd = mdc_fz_trace_read(traces[i], (mdc_fz_target)t, &P, err, sizeof err);
      if (rd && strstr(err, "beyond")) continue;
      cr_assert_eq(rd, 0, "%s: %s", traces[i], err);
      size_t m = mdc_fz_encode((mdc_fz_target)t, &P, enc, sizeof enc);
      cr_assert_gt(m, 0);
      mdc_fz_decode((mdc_fz_target)t, enc, m, &Q);
      char *a = static_trace(&P, (mdc_fz_target)t), *b = static_trace(&Q, (mdc_fz_target)t);
      cr_assert_str_eq(a, b, "%s target %d", traces[i], t);
      free(a);
      free(b);
    }
  }
  char err[512];
  cr_assert_neq(mdc_fz_trace_read(MDC_CORPUS "/faults/kernel_fail_uninitializes_outputs.jsonl", FZ_TOKENS, &P, err, sizeof err), 0);
}

/* ---- a driver that breaks a rule: the oracle must name it ---------------------------------- */

static const md_driver *real;
static md_driver lax;

static md_status lax_free_buffer(md_device *d, md_handle client, md_token t) {
  real->free_buffer(d, client, t);
  return MD_NONE;   /* accepts anything: a forged, stale or foreign token */
}

static md_status lax_copy_to(md_device *d, md_handle client, md_token t, const md_memory *dst) {
  md_status st = real->copy_to(d, client, t, dst);
  return st == MD_GENERAL_FAILURE ? MD_NONE : st;   /* reads uninitialized buffers */
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *head =
    "{\"mdc_trace\": \"1.1\", \"name\": \"t\", \"rules\": [\"r\"], \"requires\": [\"memory_domains\"]}\n"
    "{\"op\": \"open_device\", \"config\": \"\"}\n"
    "{\"op\": \"open_client\", \"as\": \"c\"}\n"
    "{\"op\": \"model\", \"as\": \"add\", \"operands\": [{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, "
    "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, {\"type\": \"INT32\", \"lifetime\": "
    "\"CONSTANT_COPY\", \"offset\": 0, \"length\": 4}, {\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": "
    "\"SUBGRAPH_OUTPUT\"}], \"operations\": [{\"type\": \"ADD\", \"inputs\": [0, 1, 2], \"outputs\": [3]}], \"inputs\": [0, 1], "
    "\"outputs\": [3], \"operand_values\": {\"i32\": [0]}}\n"
    "{\"op\": \"prepare_model\", \"model\": \"add\", \"as\": \"p\"}\n"
    "{\"op\": \"allocate\", \"prepared\": [\"p\"], \"input_roles\": [{\"model\": 0, \"io\": 0, \"p\": 1.0}], \"as\": \"t\"}\n"
    "{\"op\": \"memory\", \"as\": \"o\", \"kind\": \"ashmem\", \"size\": 8}\n";

/* Runs trace text (read as a program) against the lax driver; returns the finding. */
static fz_finding run_lax(const char *tail, fz_harness **hp) {
  char path[] = "/tmp/mdc-fz-lax-XXXXXX";
  close(mkstemp(path));
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head, tail);
  write_text(path, text);
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(path, FZ_TOKENS, &P, err, sizeof err), 0, "%s", err);
  unlink(path);
  real = md_driver_entry(MD_DRIVER_ABI_VERSION);
  lax = *real;
  lax.free_buffer = lax_free_buffer;
  lax.copy_to = lax_copy_to;
  fz_runner *r = mdc_fz_runner_new(&lax, "backend=sim", FZ_TOKENS);
  cr_assert_not_null(r);
  static fz_outcome outs[FZ_MAX_CALLS];
  fz_finding f;
  cr_assert_eq(mdc_fz_run(r, &P, outs, &f, err, sizeof err), 0, "%s", err);
  mdc_fz_runner_free(r);
  (void)hp;
  return f;
}

Test(oracle, a_forged_token_accepted_is_a_finding_at_its_call) {
  fz_finding f = run_lax("{\"op\": \"free_buffer\", \"token\": {\"forge\": \"t\", \"xor\": \"0x100000000\"}}\n", NULL);
  cr_assert(f.found);
  cr_assert_eq(f.call, 3, "the free_buffer (call 3), got call %d", f.call);
  cr_assert(strstr(f.signature, "oracle:free_buffer:NONE:"), "%s", f.signature);
  cr_assert(strstr(f.message, "forged"), "%s", f.message);
}

Test(oracle, an_uninitialized_buffer_read_is_a_finding) {
  fz_finding f = run_lax("{\"op\": \"copy_to\", \"token\": \"t\", \"dst\": \"o\"}\n", NULL);
  cr_assert(f.found);
  cr_assert(strstr(f.signature, "oracle:copy_to:NONE:"), "%s", f.signature);
  cr_assert(strstr(f.message, "uninitialized"), "%s", f.message);
}

Test(oracle, the_same_calls_on_the_reference_driver_find_nothing) {
  char path[] = "/tmp/mdc-fz-ref-XXXXXX";
  close(mkstemp(path));
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head,
           "{\"op\": \"free_buffer\", \"token\": {\"forge\": \"t\", \"xor\": \"0x100000000\"}, \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n"
           "{\"op\": \"copy_to\", \"token\": \"t\", \"dst\": \"o\", \"expect\": {\"status\": \"GENERAL_FAILURE\"}}\n");
  write_text(path, text);
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(path, FZ_TOKENS, &P, err, sizeof err), 0, "%s", err);
  unlink(path);
  fz_runner *r = mdc_fz_runner_new(md_driver_entry(MD_DRIVER_ABI_VERSION), "backend=sim", FZ_TOKENS);
  fz_finding f;
  cr_assert_eq(mdc_fz_run(r, &P, NULL, &f, err, sizeof err), 0);
  cr_assert(!f.found, "%s", f.message);
  mdc_fz_runner_free(r);
}

Test(trace_target, garbage_and_broken_traces_are_judged_not_crashed) {
  fz_harness *h = harness(FZ_TARGET_TRACE, NULL);
  const char *inputs[] = {"", "{", "not json\n", "{\"mdc_trace\": \"9.0\"}\n",
                          "{\"mdc_trace\": \"1.1\", \"name\": \"x\", \"rules\": [\"r\"]}\n{\"op\": \"open_device\"}\n"
                          "{\"op\": \"open_client\", \"as\": \"c\"}\n{\"op\": \"free_buffer\", \"token\": \"c\"}\n"};
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    fz_finding f;
    char err[256];
    cr_assert_eq(mdc_fz_harness_one(h, (const uint8_t *)inputs[i], strlen(inputs[i]), &f, err, sizeof err), 0);
    cr_assert(!f.found, "input %zu: %s", i, f.message);
  }
  mdc_fz_harness_free(h);
}
