/* test_fuzz_concurrency.c - the concurrency target's lanes on real threads: random programs
 * with concurrent blocks find nothing on the reference driver (and, under ThreadSanitizer,
 * race neither in the driver nor in the harness); two lanes that both free one token with a
 * driver that says yes to both are a finding. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz_codec.h"
#include "fz_harness.h"
#include "fz_test_rand.h"

Test(concurrency, random_block_programs_find_nothing_on_the_reference_driver, .timeout = 240) {
  char err[256];
  fz_harness *h = mdc_fz_harness_new(FZ_CONCURRENCY, NULL, "backend=sim", err, sizeof err);
  cr_assert_not_null(h, "%s", err);
  rng_state = 5;
  static uint8_t buf[1024];
  int blocks = 0;
  for (int i = 0; i < 150; i++) {
    size_t n = 8 + rnd() % 500;
    for (size_t j = 0; j < n; j++) buf[j] = (uint8_t)(rnd() % 4 ? rnd() & 0x3f : rnd());
    buf[4] = 0xF0 + MDC_CALL_OPEN_CLIENT;   /* a client, then a block early on */
    buf[20] = 0xFF;
    fz_finding f;
    cr_assert_eq(mdc_fz_harness_one(h, buf, n, &f, err, sizeof err), 0, "%s", err);
    cr_assert(!f.found, "input %d: %s\n%s", i, f.signature, f.message);
    blocks += mdc_fz_harness_prog(h)->n_blocks;
  }
  cr_assert_gt(blocks, 50, "the inputs made %d blocks", blocks);
  mdc_fz_harness_free(h);
}

static const md_driver *real;
static md_driver twice;

static md_status free_says_yes(md_device *d, md_handle client, md_token t) {
  real->free_buffer(d, client, t);
  return MD_NONE;
}

Test(concurrency, a_token_freed_twice_by_racing_lanes_is_a_finding) {
  char path[] = "/tmp/mdc-fz-race-XXXXXX";
  close(mkstemp(path));
  FILE *f = fopen(path, "w");
  fputs("{\"mdc_trace\": \"1.1\", \"name\": \"t\", \"rules\": [\"r\"], \"requires\": [\"memory_domains\"]}\n"
        "{\"op\": \"open_device\", \"config\": \"\"}\n"
        "{\"op\": \"open_client\", \"as\": \"c\"}\n"
        "{\"op\": \"model\", \"as\": \"relu\", \"operands\": [{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": "
        "\"SUBGRAPH_INPUT\"}, {\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], "
        "\"operations\": [{\"type\": \"RELU\", \"inputs\": [0], \"outputs\": [1]}], \"inputs\": [0], \"outputs\": [1]}\n"
        "{\"op\": \"prepare_model\", \"model\": \"relu\", \"as\": \"p\"}\n"
        "{\"op\": \"allocate\", \"prepared\": [\"p\"], \"input_roles\": [{\"model\": 0, \"io\": 0, \"p\": 1.0}], \"as\": \"t\"}\n"
        "{\"op\": \"concurrent\", \"lanes\": 2}\n"
        "{\"op\": \"free_buffer\", \"lane\": 0, \"token\": \"t\"}\n"
        "{\"op\": \"free_buffer\", \"lane\": 1, \"token\": \"t\"}\n"
        "{\"op\": \"end_concurrent\"}\n",
        f);
  fclose(f);
  static mdc_fz_prog p;
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(path, FZ_CONCURRENCY, &p, err, sizeof err), 0, "%s", err);
  unlink(path);
  cr_assert_eq(p.n_blocks, 1);
  real = md_driver_entry(MD_DRIVER_ABI_VERSION);
  twice = *real;
  twice.free_buffer = free_says_yes;
  fz_runner *r = mdc_fz_runner_new(&twice, "backend=sim", FZ_CONCURRENCY);
  fz_finding fd;
  cr_assert_eq(mdc_fz_run(r, &p, NULL, &fd, err, sizeof err), 0, "%s", err);
  cr_assert(fd.found);
  cr_assert(strstr(fd.signature, "race") || strstr(fd.message, "released 2 times"), "%s: %s", fd.signature, fd.message);
  /* the reference driver: one of the two frees wins */
  fz_runner *ok = mdc_fz_runner_new(real, "backend=sim", FZ_CONCURRENCY);
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(mdc_fz_run(ok, &p, NULL, &fd, err, sizeof err), 0);
    cr_assert(!fd.found, "%s", fd.message);
  }
  mdc_fz_runner_free(ok);
  mdc_fz_runner_free(r);
}
