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
#include "fz_test_rand.h"
#include "mdc/engine.h"

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

/* Returns NONE with a wrong value in the first output's pool (a kernel that read the wrong memory). */
static md_status lax_execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                             md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  md_status st = real->execute(d, client, prepared, req, shapes, n_shapes, timing);
  if (st == MD_NONE && req->n_outputs && req->outputs[0].pool < req->n_pools && !req->pools[req->outputs[0].pool].is_token) {
    float bad = 12345.0f;
    cr_assert_eq(pwrite(req->pools[req->outputs[0].pool].memory.fd, &bad, 4, (off_t)req->outputs[0].offset + 4), 4);
  }
  return st;
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

/* Reads trace text into a program for target t (through a file, as traces come); 0 or -1. */
static int read_text(const char *text, mdc_fz_target t, mdc_fz_prog *out) {
  char path[] = "/tmp/mdc-fz-text-XXXXXX";
  close(mkstemp(path));
  write_text(path, text);
  char err[512];
  int rc = mdc_fz_trace_read(path, t, out, err, sizeof err);
  unlink(path);
  return rc;
}

/* Runs P on the reference driver for target t; outcomes in outs (may be NULL). */
static fz_finding run_ref(mdc_fz_target t, fz_outcome *outs) {
  fz_runner *r = mdc_fz_runner_new(md_driver_entry(MD_DRIVER_ABI_VERSION), "backend=sim", t);
  cr_assert_not_null(r);
  fz_finding f;
  char err[512];
  cr_assert_eq(mdc_fz_run(r, &P, outs, &f, err, sizeof err), 0, "%s", err);
  mdc_fz_runner_free(r);
  return f;
}

/* Runs trace text (read as a program) against the lax driver; returns the finding. */
static fz_finding run_lax(const char *tail, fz_harness **hp) {
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head, tail);
  cr_assert_eq(read_text(text, FZ_TOKENS, &P), 0);
  char err[512];
  real = md_driver_entry(MD_DRIVER_ABI_VERSION);
  lax = *real;
  lax.free_buffer = lax_free_buffer;
  lax.copy_to = lax_copy_to;
  lax.execute = lax_execute;
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

static const char *add_tail =
    "{\"op\": \"memory\", \"as\": \"a\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [1, 2]}}\n"
    "{\"op\": \"memory\", \"as\": \"b\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [10, 20]}}\n"
    "{\"op\": \"copy_from\", \"token\": \"t\", \"src\": \"a\"}\n"
    "{\"op\": \"request\", \"as\": \"q\", \"inputs\": [{\"pool\": 0}, {\"pool\": 1, \"length\": 8}], \"outputs\": "
    "[{\"pool\": 2, \"length\": 8}], \"pools\": [{\"token\": \"t\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}\n"
    "{\"op\": \"execute\", \"prepared\": \"p\", \"request\": \"q\"}\n";

Test(oracle, an_execution_that_writes_a_wrong_value_is_a_finding) {
  fz_finding f = run_lax(add_tail, NULL);
  cr_assert(f.found);
  cr_assert(strstr(f.signature, "oracle:execute:value:"), "%s", f.signature);
  cr_assert(strstr(f.message, "element 1 is 12345"), "%s", f.message);
}

Test(oracle, the_values_of_a_right_execution_are_no_finding) {
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head, add_tail);
  cr_assert_eq(read_text(text, FZ_TOKENS, &P), 0);
  static fz_outcome outs[FZ_MAX_CALLS];
  fz_finding f = run_ref(FZ_TOKENS, outs);
  cr_assert(!f.found, "%s", f.message);
  /* the execute (the last call) was judged on its values: a + b, element by element */
  const fz_outcome *oc = &outs[P.n_calls - 1];
  cr_assert_eq(oc->got, MD_NONE);
  cr_assert_eq(oc->vc.n, 1, "the output's values were not judged");
  cr_assert_eq(oc->vc.o[0].count, 2);
}

/* SPEC 4: every failure but OUTPUT_INSUFFICIENT_SIZE uninitializes the request's device outputs; a
 * request refused only for an uninitialized input (GENERAL_FAILURE) passed every other rule, so
 * its output token is certainly uninitialized after it, and a read of it must fail (the mutant
 * no_deinit keeps it initialized: sensitivity missed it while the model said "maybe"). */
Test(oracle, an_output_of_a_request_refused_for_an_uninitialized_input_is_uninitialized) {
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head,
           "{\"op\": \"allocate\", \"prepared\": [\"p\"], \"input_roles\": [{\"model\": 0, \"io\": 0, \"p\": 1.0}], "
           "\"output_roles\": [{\"model\": 0, \"io\": 0, \"p\": 1.0}], \"as\": \"u\"}\n"
           "{\"op\": \"memory\", \"as\": \"a\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [1, 2]}}\n"
           "{\"op\": \"memory\", \"as\": \"b\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [10, 20]}}\n"
           "{\"op\": \"copy_from\", \"token\": \"t\", \"src\": \"a\"}\n"
           "{\"op\": \"request\", \"as\": \"w\", \"inputs\": [{\"pool\": 0}, {\"pool\": 1, \"length\": 8}], \"outputs\": "
           "[{\"pool\": 2}], \"pools\": [{\"token\": \"t\"}, {\"memory\": \"b\"}, {\"token\": \"u\"}]}\n"
           "{\"op\": \"execute\", \"prepared\": \"p\", \"request\": \"w\"}\n"
           "{\"op\": \"memory\", \"as\": \"short\", \"kind\": \"ashmem\", \"size\": 4}\n"
           "{\"op\": \"copy_from\", \"token\": \"t\", \"src\": \"short\"}\n"
           "{\"op\": \"execute\", \"prepared\": \"p\", \"request\": \"w\"}\n"
           "{\"op\": \"request\", \"as\": \"r\", \"inputs\": [{\"pool\": 0}, {\"pool\": 1, \"length\": 8}], \"outputs\": "
           "[{\"pool\": 2, \"length\": 8}], \"pools\": [{\"token\": \"u\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}\n"
           "{\"op\": \"execute\", \"prepared\": \"p\", \"request\": \"r\"}\n");
  cr_assert_eq(read_text(text, FZ_SHAPES, &P), 0);
  /* the model over the calls, each answered with its likeliest status (as the decoder does):
   * the second execute of w is GENERAL_FAILURE (t uninitialized by the refused copy); then r,
   * reading u, may return GENERAL_FAILURE and nothing else */
  static fz_state st;
  mdc_fz_state_init(&st, 1ull << 20);
  fz_pred pr;
  for (unsigned i = 0; i < P.n_calls; i++) {
    mdc_fz_predict(&st, &P, &P.calls[i], &pr);
    if (i + 1 < P.n_calls)
      mdc_fz_apply(&st, &P, &P.calls[i], &pr, pr.set & FZ_BIT(MD_NONE) ? MD_NONE : mdc_fz_set_first(pr.set));
  }
  cr_assert_eq(P.calls[P.n_calls - 1].call, MDC_CALL_EXECUTE);
  cr_assert_eq(pr.set, FZ_BIT(MD_GENERAL_FAILURE), "allowed: %#x", (unsigned)pr.set);
  fz_finding f = run_ref(FZ_SHAPES, NULL);
  cr_assert(!f.found, "%s", f.message);
}

/* A kept device is reused only when nothing of the last run can still touch its pools: an
 * execution whose client was closed before anyone waited for it may still run (SPEC 4 lets it
 * finish on its own), and the next run resizes and refills the memfds it writes (a 30-minute
 * concurrency campaign saw bursts of SIGBUS in the driver that no replay reproduced). */
Test(harness, a_run_that_orphans_an_execution_gives_up_its_device) {
  static const char *issue =
      "{\"op\": \"memory\", \"as\": \"a\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [1, 2]}}\n"
      "{\"op\": \"memory\", \"as\": \"b\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [10, 20]}}\n"
      "{\"op\": \"copy_from\", \"token\": \"t\", \"src\": \"a\"}\n"
      "{\"op\": \"request\", \"as\": \"q\", \"inputs\": [{\"pool\": 0}, {\"pool\": 1, \"length\": 8}], \"outputs\": "
      "[{\"pool\": 2, \"length\": 8}], \"pools\": [{\"token\": \"t\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}\n"
      "{\"op\": \"execute_async\", \"prepared\": \"p\", \"request\": \"q\", \"as\": \"e\"}\n";
  char err[512];
  fz_runner *r = mdc_fz_runner_new(md_driver_entry(MD_DRIVER_ABI_VERSION), "backend=sim", FZ_CONCURRENCY);
  cr_assert_not_null(r);
  mdc_fz_runner_fresh_device(r, 0);
  static fz_outcome outs[FZ_MAX_CALLS];
  fz_finding f;
  char text[8192];
  /* waited for: the device stays for the next run */
  snprintf(text, sizeof text, "%s%s%s", head, issue, "{\"op\": \"wait_event\", \"event\": \"e\"}\n");
  cr_assert_eq(read_text(text, FZ_CONCURRENCY, &P), 0);
  cr_assert_eq(mdc_fz_run(r, &P, outs, &f, err, sizeof err), 0, "%s", err);
  cr_assert(!f.found, "%s", f.message);
  cr_assert(mdc_fz_runner_has_device(r));
  /* its client closed under it: nobody can wait for it any more, the device goes */
  snprintf(text, sizeof text, "%s%s%s", head, issue, "{\"op\": \"close_client\", \"client\": \"c\"}\n");
  cr_assert_eq(read_text(text, FZ_CONCURRENCY, &P), 0);
  cr_assert_eq(mdc_fz_run(r, &P, outs, &f, err, sizeof err), 0, "%s", err);
  cr_assert(!f.found, "%s", f.message);
  cr_assert(!mdc_fz_runner_has_device(r));
  mdc_fz_runner_free(r);
}

Test(evaluator, add_sub_mul_relu_with_fused_activations) {
  fz_model m;
  memset(&m, 0, sizeof m);
  fz_dims d2 = {.present = 1, .rank = 1, .d = {3}};
  m.n_operands = 6;
  m.opnd[0] = (fz_operand){.type = MD_TENSOR_FLOAT32, .lifetime = MD_SUBGRAPH_INPUT, .dims = d2};
  m.opnd[1] = (fz_operand){.type = MD_TENSOR_FLOAT32, .lifetime = MD_SUBGRAPH_INPUT, .dims = d2};
  m.opnd[2] = (fz_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 0, .length = 4};
  m.opnd[3] = (fz_operand){.type = MD_TENSOR_FLOAT32, .lifetime = MD_TEMPORARY_VARIABLE, .dims = d2};
  m.opnd[4] = (fz_operand){.type = MD_TENSOR_FLOAT32, .lifetime = MD_SUBGRAPH_OUTPUT, .dims = d2};
  m.opnd[5] = (fz_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 4, .length = 4};
  int32_t acts[2] = {3, 0};   /* RELU6, then none */
  memcpy(m.values, acts, sizeof acts);
  m.n_values = 8;
  m.n_ops = 2;
  m.op[0] = (fz_operation){.type = MD_OP_MUL, .n_in = 3, .n_out = 1, .in = {0, 1, 2}, .out = {3}};
  m.op[1] = (fz_operation){.type = MD_OP_SUB, .n_in = 3, .n_out = 1, .in = {3, 0, 5}, .out = {4}};
  m.n_in = 2;
  m.in[0] = 0;
  m.in[1] = 1;
  m.n_out = 1;
  m.out[0] = 4;
  float a[3] = {1, -2, 4}, b[3] = {2, 3, 4}, o[3];
  const float *in[2] = {a, b};
  float *out[1] = {o};
  static fz_eval_scratch s;
  cr_assert_eq(mdc_fz_eval(&m, in, out, &s), 0);
  /* relu6(a * b) - a: relu6(2) - 1, relu6(-6) + 2, relu6(16) - 4 */
  cr_assert(o[0] == 1.0f && o[1] == 2.0f && o[2] == 2.0f, "%g %g %g", o[0], o[1], o[2]);
  m.op[0].type = MD_OP_CONCATENATION;   /* beyond the evaluator */
  cr_assert_eq(mdc_fz_eval(&m, in, out, &s), -1);
  m.op[0].type = MD_OP_ADD;
  acts[0] = 7;                          /* not an activation */
  memcpy(m.values, acts, sizeof acts);
  cr_assert_eq(mdc_fz_eval(&m, in, out, &s), -1);
  cr_assert(mdc_fz_eval_same(__builtin_nanf(""), 3.0f) && mdc_fz_eval_same(0.0f, -0.0f) && !mdc_fz_eval_same(1.0f, 2.0f));
}

Test(encoding, a_concurrency_programs_stall_goes_through_bytes_and_traces) {
  char text[8192];
  snprintf(text, sizeof text, "%s", head);
  char *cfg = strstr(text, "\"config\": \"\"");
  cr_assert_not_null(cfg);
  const char *stalled = "\"config\": \"faults=stall@3\"";
  char rest[8192];
  snprintf(rest, sizeof rest, "%s", cfg + strlen("\"config\": \"\""));
  snprintf(cfg, sizeof text - (size_t)(cfg - text), "%s%s", stalled, rest);
  cr_assert_eq(read_text(text, FZ_CONCURRENCY, &P), 0);
  cr_assert_eq(P.stall, 3);
  size_t n = mdc_fz_encode(FZ_CONCURRENCY, &P, enc, sizeof enc);
  cr_assert_gt(n, 0);
  mdc_fz_decode(FZ_CONCURRENCY, enc, n, &Q);
  cr_assert_eq(Q.stall, 3);
  char *t = static_trace(&Q, FZ_CONCURRENCY);
  cr_assert(strstr(t, "faults=stall@3"), "%s", t);
  free(t);
  /* other targets and other plans: beyond the encoding */
  cr_assert_neq(read_text(text, FZ_TOKENS, &P), 0);
}

Test(encoding, a_concurrency_program_ends_by_waiting_for_the_events_it_leaves_live) {
  char text[8192];
  /* add_tail with its execute made asynchronous and never waited for */
  snprintf(text, sizeof text, "%s%.*s%s", head, (int)(strstr(add_tail, "{\"op\": \"execute\"") - add_tail), add_tail,
           "{\"op\": \"execute_async\", \"prepared\": \"p\", \"request\": \"q\", \"as\": \"ev\"}\n");
  cr_assert_eq(read_text(text, FZ_CONCURRENCY, &P), 0);
  const fz_call *last = &P.calls[P.n_calls - 1];
  cr_assert_eq(last->call, MDC_CALL_WAIT_EVENT, "the program ends with call %u", last->call);
  cr_assert_eq(mdc_fz_arg(last, MDC_A_EVENT)->ref.obj, P.calls[P.n_calls - 2].obj);
  cr_assert_null(mdc_fz_arg(last, MDC_A_TIMEOUT_NS), "a wait without deadline");
  /* the same through bytes: decode(encode(p)) is p, with no second wait */
  size_t n = mdc_fz_encode(FZ_CONCURRENCY, &P, enc, sizeof enc);
  mdc_fz_decode(FZ_CONCURRENCY, enc, n, &Q);
  cr_assert_eq(Q.n_calls, P.n_calls);
  /* its run judges the values at that wait */
  static fz_outcome outs[FZ_MAX_CALLS];
  fz_finding f = run_ref(FZ_CONCURRENCY, outs);
  cr_assert(!f.found, "%s", f.message);
  cr_assert_eq(outs[P.n_calls - 1].got, MD_NONE);
  cr_assert_eq(outs[P.n_calls - 1].vc.n, 1, "the wait's values were not judged");
  /* tokens and shapes programs stay as they are */
  cr_assert_eq(read_text(text, FZ_TOKENS, &P), 0);
  cr_assert_eq(P.calls[P.n_calls - 1].call, MDC_CALL_EXECUTE_ASYNC);
}

Test(oracle, the_same_calls_on_the_reference_driver_find_nothing) {
  char text[8192];
  snprintf(text, sizeof text, "%s%s", head,
           "{\"op\": \"free_buffer\", \"token\": {\"forge\": \"t\", \"xor\": \"0x100000000\"}, \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n"
           "{\"op\": \"copy_to\", \"token\": \"t\", \"dst\": \"o\", \"expect\": {\"status\": \"GENERAL_FAILURE\"}}\n");
  cr_assert_eq(read_text(text, FZ_TOKENS, &P), 0);
  fz_finding f = run_ref(FZ_TOKENS, NULL);
  cr_assert(!f.found, "%s", f.message);
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

/* A memory's bytes are the engine's u8 random payload (docs/fuzzing.md): byte i is the top 32
 * bits, mod 256, of splitmix64's (i + 1)-th draw from the seed. The filler computes eight bytes
 * at a time where the CPU allows: every length (the tail after the last eight included) and
 * seed gives what one draw per byte gives. */
Test(memory, a_memory_holds_the_engines_random_bytes_at_every_length) {
  static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096, 65539};
  static const uint32_t seeds[] = {0, 1, 0x9e3779b9u, UINT32_MAX};
  uint8_t *got = malloc(65539 + 64), *want = malloc(65539);
  cr_assert(got && want);
  for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++)
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
      uint64_t x = seeds[s];
      for (size_t i = 0; i < lens[l]; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        want[i] = (uint8_t)((z >> 32) % 256);
      }
      memset(got, 0xA5, lens[l] + 64);
      mdc_fz_fill(seeds[s], got, lens[l]);
      cr_assert(memcmp(got, want, lens[l]) == 0, "seed %u, %zu bytes", seeds[s], lens[l]);
      for (size_t i = lens[l]; i < lens[l] + 64; i++) cr_assert_eq(got[i], 0xA5, "wrote past %zu bytes", lens[l]);
    }
  free(got);
  free(want);
}

/* The trace target's bounds (docs/fuzzing.md): what would make the engine allocate or compute
 * more than a fuzz input may runs nothing; anything smaller, or past the engine's own limits
 * (its job to refuse), runs. */
Test(trace_bounds, inputs_over_the_fuzz_budget_run_nothing) {
  static const struct { const char *text; int ok; } cases[] = {
      {"{\"op\":\"memory\",\"size\":4096}", 1},
      {"{\"op\":\"memory\",\"size\":2000000}", 0},            /* a pool over 1 MiB */
      {"{\"op\":\"memory\",\"size\":2000000000}", 1},         /* past the engine's 1 GiB: its to refuse */
      {"{\"payload\":{\"random\":{\"count\":1048577}}}", 0},
      {"{\"repeat\":50}", 1},
      {"{\"repeat\":51}", 0},
      {"{\"dims\":[64,1024]}", 1},                            /* 65536 elements */
      {"{\"dims\":[64,1025]}", 0},
      {"{\"dims\":[1024,1024]}", 0},                          /* a FULLY_CONNECTED's weights of 1M */
      {"{\"dims\":[0,4096,0]}", 1},                           /* unknown dims count as 1 */
      {"{\"dims\":[4097]}", 0},
      {"{\"dims\": [2, 3]}\n{\"dims\":[16,16,16,16]}", 1},
      {"{\"dims\": [2, 3]}\n{\"dims\":[16,16,16,17]}", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    cr_expect_eq(mdc_fz_trace_input_ok((const uint8_t *)cases[i].text, strlen(cases[i].text)), cases[i].ok, "%s",
                 cases[i].text);
}
