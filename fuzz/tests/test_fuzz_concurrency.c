/* test_fuzz_concurrency.c - the concurrency target's lanes on real threads: random programs
 * with concurrent blocks find nothing on the reference driver (and, under ThreadSanitizer,
 * race neither in the driver nor in the harness); two lanes that both free one token with a
 * driver that says yes to both are a finding. A close_client racing its client's creations
 * (execute_async, allocate, prepare_model) and uses: the model accepts either outcome of each
 * creation and reconciles the close's leak report with what the lanes were told; a driver whose
 * report is off by one is a finding. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz_codec.h"
#include "fz_harness.h"
#include "fz_mutate.h"
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

/* ---- close_client racing its client's creations --------------------------------------------- */

#define RACES_SEED MDC_RACES "/close_client_races_its_creations.jsonl"

/* Writes a trace's lines after its header and open_device to a temporary file and reads it as a
 * concurrency program. */
static void read_body(const char *body, mdc_fz_prog *p) {
  char path[] = "/tmp/mdc-fz-close-race-XXXXXX";
  close(mkstemp(path));
  FILE *f = fopen(path, "w");
  fputs("{\"mdc_trace\": \"1.1\", \"name\": \"t\", \"rules\": [\"r\"], \"requires\": [\"memory_domains\"]}\n"
        "{\"op\": \"open_device\", \"config\": \"\"}\n",
        f);
  fputs(body, f);
  fclose(f);
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(path, FZ_CONCURRENCY, p, err, sizeof err), 0, "%s", err);
  unlink(path);
}

/* The model alone, on the seed's program: the calls before its block answered as predicted
 * (NONE where allowed), each call of the block answered `creations` when it makes an object or
 * waits (NONE or INVALID_ARGUMENT: the close came first), the close NONE. */
static void model_block(const mdc_fz_prog *p, md_status creations, fz_state *before, fz_state *lanes, md_status *got) {
  cr_assert_eq(p->n_blocks, 1);
  const fz_block *b = &p->blocks[0];
  mdc_fz_state_init(before, 1ull << 20);
  fz_pred pr;
  for (unsigned i = 0; i < b->first; i++) {
    mdc_fz_predict(before, p, &p->calls[i], &pr);
    cr_assert(pr.set & FZ_BIT(MD_NONE), "call %u", i);
    mdc_fz_apply(before, p, &p->calls[i], &pr, MD_NONE);
  }
  for (uint8_t l = 0; l < b->lanes; l++) mdc_fz_block_view(before, p, b, l, &lanes[l]);
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &p->calls[i];
    md_status st = k->call == MDC_CALL_CLOSE_CLIENT ? MD_NONE : creations;
    mdc_fz_predict(&lanes[k->lane], p, k, &pr);
    cr_assert(pr.set & fz_bit(st), "call %u (%s) may return %s", i, mdc_calls[k->call].name,
              st ? "INVALID_ARGUMENT" : "NONE");
    mdc_fz_apply(&lanes[k->lane], p, k, &pr, st);
    got[i - b->first] = st;
  }
}

Test(close_race, the_model_reconciles_the_report_with_either_outcome_of_every_racing_creation) {
  static mdc_fz_prog p;
  char err[512], why[256];
  cr_assert_eq(mdc_fz_trace_read(RACES_SEED, FZ_CONCURRENCY, &p, err, sizeof err), 0, "%s", err);
  const fz_block *b = &p.blocks[0];
  unsigned close = b->first;
  while (close < b->end && p.calls[close].call != MDC_CALL_CLOSE_CLIENT) close++;
  cr_assert_lt(close, b->end);
  /* Creations first: t, p and e0 before the block, the wait consumed e0; the block made e1,
   * t2, p2 and t3 (each buffer 8 bytes). Close first: every creation and the wait refused. */
  static const struct {
    md_status creations;
    md_leak_report exact;
  } cases[] = {{MD_NONE, {3, 2, 1, 24}}, {MD_INVALID_ARGUMENT, {1, 1, 1, 8}}};
  for (unsigned c = 0; c < 2; c++) {
    static fz_state before, lanes[FZ_MAX_LANES];
    md_status got[FZ_MAX_CALLS];
    model_block(&p, cases[c].creations, &before, lanes, got);
    md_leak_report reports[FZ_MAX_CALLS];
    memset(reports, 0, sizeof reports);
    reports[close - b->first] = cases[c].exact;
    cr_assert_eq(mdc_fz_block_leaks(&before, &p, b, lanes, got, reports, why, sizeof why), -1, "case %u: %s", c, why);
    /* one off, either way, in any field: a finding on the close */
    for (unsigned fld = 0; fld < 4; fld++)
      for (int d = -1; d <= 1; d += 2) {
        md_leak_report w = cases[c].exact;
        uint32_t *n = fld == 0 ? &w.buffers : fld == 1 ? &w.prepared_models : fld == 2 ? &w.events : NULL;
        if (n) *n = (uint32_t)((int)*n + d);
        else w.bytes = (uint64_t)((int64_t)w.bytes + 8 * d);
        reports[close - b->first] = w;
        cr_assert_eq(mdc_fz_block_leaks(&before, &p, b, lanes, got, reports, why, sizeof why), (int)close,
                     "case %u: field %u off by %d not found", c, fld, d);
      }
    /* after the block every object of the closed client is dead, those made in it included */
    fz_state after = before;
    cr_assert_eq(mdc_fz_block_merge(&after, &p, b, lanes, got, why, sizeof why), 0, "%s", why);
    uint16_t client = mdc_fz_call_client(&p, &p.calls[close]);
    for (unsigned i = 0; i < after.n; i++)
      if (after.o[i].kind != MDC_OBJ_CLIENT && after.o[i].owner == client)
        cr_assert(after.o[i].live == FZ_DEAD || after.o[i].live == FZ_UNMADE, "case %u: object %u is %u", c, i,
                  after.o[i].live);
  }
}

static pthread_t main_thread;   /* the test's: lanes run on other threads */
static _Atomic int created;      /* a lane's creation returned */

static int in_lane(void) { return !pthread_equal(pthread_self(), main_thread); }

/* Bug shapes found from outside (issue 30), on lane threads only, so that every sequential
 * judgement still passes: an allocate that makes the buffer and says INVALID_ARGUMENT (the
 * close then counts an object the lane was told was never made); a close_client whose report
 * misses an event execute_async returned. The broken close_client lets the racing creation
 * return first, so the run is the same every time. */
static md_status allocate_refused_but_made(md_device *d, md_handle client, const md_buffer_desc *desc,
                                           const md_handle *prepared, uint32_t np, const md_buffer_role *in,
                                           uint32_t ni, const md_buffer_role *out, uint32_t no, md_token *t) {
  md_status st = real->allocate(d, client, desc, prepared, np, in, ni, out, no, t);
  if (!in_lane()) return st;
  if (st == MD_NONE) {
    *t = 0;
    st = MD_INVALID_ARGUMENT;
  }
  atomic_store(&created, 1);
  return st;
}

static md_status execute_async_then_tell(md_device *d, md_handle client, md_handle prepared, const md_request *q,
                                         md_handle *event) {
  md_status st = real->execute_async(d, client, prepared, q, event);
  if (in_lane()) atomic_store(&created, 1);
  return st;
}

static md_status close_after_the_creation(md_device *d, md_handle client, md_leak_report *leaks) {
  while (in_lane() && !atomic_load(&created)) sched_yield();
  return real->close_client(d, client, leaks);
}

static md_status close_misses_an_event(md_device *d, md_handle client, md_leak_report *leaks) {
  md_status st = close_after_the_creation(d, client, leaks);
  if (st == MD_NONE && leaks && leaks->events && in_lane()) leaks->events--;
  return st;
}

/* A block whose close_client races a creation for the same client in another lane (so the
 * close's lane alone cannot know the report). */
static const char *const racing_body =
    "{\"op\": \"open_client\", \"as\": \"c\"}\n"
    "{\"op\": \"model\", \"as\": \"relu\", \"operands\": [{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": "
    "\"SUBGRAPH_INPUT\"}, {\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], "
    "\"operations\": [{\"type\": \"RELU\", \"inputs\": [0], \"outputs\": [1]}], \"inputs\": [0], \"outputs\": [1]}\n"
    "{\"op\": \"prepare_model\", \"client\": \"c\", \"model\": \"relu\", \"as\": \"p\"}\n"
    "{\"op\": \"memory\", \"as\": \"i\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [1, -2]}}\n"
    "{\"op\": \"memory\", \"as\": \"o\", \"kind\": \"ashmem\", \"size\": 8}\n"
    "{\"op\": \"request\", \"as\": \"r\", \"inputs\": [{\"pool\": 0, \"length\": 8}], \"outputs\": [{\"pool\": 1, "
    "\"length\": 8}], \"pools\": [{\"memory\": \"i\"}, {\"memory\": \"o\"}]}\n"
    "{\"op\": \"concurrent\", \"lanes\": 2}\n"
    "{\"op\": \"%s\", \"lane\": 1, \"client\": \"c\", %s, \"as\": \"x\"}\n"
    "{\"op\": \"close_client\", \"lane\": 0, \"client\": \"c\"}\n"
    "{\"op\": \"end_concurrent\"}\n";

static void expect_leak_finding(md_driver *broken, const char *op, const char *args) {
  char body[4096];
  snprintf(body, sizeof body, racing_body, op, args);
  static mdc_fz_prog p;
  read_body(body, &p);
  cr_assert_eq(p.n_blocks, 1);
  main_thread = pthread_self();
  char err[512];
  fz_runner *r = mdc_fz_runner_new(broken, "backend=sim", FZ_CONCURRENCY);
  fz_runner *ok = mdc_fz_runner_new(real, "backend=sim", FZ_CONCURRENCY);
  for (int i = 0; i < 20; i++) {
    fz_finding fd;
    atomic_store(&created, 0);
    cr_assert_eq(mdc_fz_run(r, &p, NULL, &fd, err, sizeof err), 0, "%s", err);
    cr_assert(fd.found, "run %d: %s with a wrong report found nothing", i, op);
    cr_assert(strstr(fd.signature, "oracle:close_client:leaks:"), "%s: %s", fd.signature, fd.message);
    cr_assert_eq(p.calls[fd.call].call, MDC_CALL_CLOSE_CLIENT);
    cr_assert(p.calls[fd.call].block, "%s", fd.message);
    cr_assert_eq(mdc_fz_run(ok, &p, NULL, &fd, err, sizeof err), 0, "%s", err);
    cr_assert(!fd.found, "the reference driver: %s: %s", fd.signature, fd.message);
  }
  mdc_fz_runner_free(ok);
  mdc_fz_runner_free(r);
}

Test(close_race, a_report_that_counts_an_allocate_the_lane_was_refused_is_a_finding) {
  real = md_driver_entry(MD_DRIVER_ABI_VERSION);
  static md_driver broken;
  broken = *real;
  broken.allocate = allocate_refused_but_made;
  broken.close_client = close_after_the_creation;
  expect_leak_finding(&broken, "allocate",
                      "\"prepared\": [\"p\"], \"input_roles\": [{\"model\": 0, \"io\": 0, \"p\": 1.0}]");
}

Test(close_race, a_report_that_misses_an_event_execute_async_returned_is_a_finding) {
  real = md_driver_entry(MD_DRIVER_ABI_VERSION);
  static md_driver broken;
  broken = *real;
  broken.execute_async = execute_async_then_tell;
  broken.close_client = close_misses_an_event;
  expect_leak_finding(&broken, "execute_async", "\"prepared\": \"p\", \"request\": \"r\"");
}

/* Whether block b of p has a close_client and, in another lane, a creation or a use of the
 * same client. */
static int close_races_its_client(const mdc_fz_prog *p, const fz_block *b) {
  for (unsigned i = b->first; i < b->end; i++) {
    if (p->calls[i].call != MDC_CALL_CLOSE_CLIENT) continue;
    uint16_t c = mdc_fz_call_client(p, &p->calls[i]);
    for (unsigned j = b->first; j < b->end; j++)
      if (j != i && p->calls[j].lane != p->calls[i].lane && c != FZ_NOBODY &&
          (mdc_calls[p->calls[j].call].flags & MDC_CALL_CLIENT) && mdc_fz_call_client(p, &p->calls[j]) == c)
        return 1;
  }
  return 0;
}

Test(close_race, mutated_racing_programs_find_nothing_on_the_reference_driver, .timeout = 240) {
  static mdc_fz_prog p;
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(RACES_SEED, FZ_CONCURRENCY, &p, err, sizeof err), 0, "%s", err);
  static uint8_t seed[1 << 14], in[1 << 16], out[1 << 16];
  size_t n0 = mdc_fz_encode(FZ_CONCURRENCY, &p, seed, sizeof seed);
  cr_assert_gt(n0, 0u);
  fz_harness *h = mdc_fz_harness_new(FZ_CONCURRENCY, NULL, "backend=sim", err, sizeof err);
  cr_assert_not_null(h, "%s", err);
  rng_state = 30;
  unsigned racing = 0, made = 0, refused = 0;
  for (int i = 0; i < 300; i++) {
    /* the seed under one to three program mutations (insertions, re-draws, swaps, the stall, a
     * block wrapped or unwrapped...), and a schedule seed of its own */
    memcpy(in, seed, n0);
    size_t n = n0;
    for (unsigned m = 0, steps = 1 + (unsigned)(rnd() % 3); m < steps; m++) {
      uint64_t s = rnd();
      size_t k = mdc_fz_mutate(FZ_CONCURRENCY, in, n, FZ_MUT_COUNT, &s, out, sizeof out);
      if (k) memcpy(in, out, n = k);
    }
    uint32_t sched = (uint32_t)rnd();
    memcpy(in, &sched, 4);
    fz_finding f;
    cr_assert_eq(mdc_fz_harness_one(h, in, n, &f, err, sizeof err), 0, "%s", err);
    cr_assert(!f.found, "input %d: %s\n%s", i, f.signature, f.message);
    const mdc_fz_prog *q = mdc_fz_harness_prog(h);
    const fz_outcome *o = mdc_fz_harness_outcomes(h);
    for (unsigned b = 0; b < q->n_blocks; b++) {
      if (!close_races_its_client(q, &q->blocks[b])) continue;
      racing++;
      for (unsigned j = q->blocks[b].first; j < q->blocks[b].end; j++)
        if (mdc_fz_produces((mdc_call)q->calls[j].call) != MDC_OBJ_NONE && o[j].ran) {
          if (o[j].got == MD_NONE) made++;
          else refused++;
        }
    }
  }
  cr_assert_gt(racing, 150u, "%u blocks where close_client races its client (creations: %u made, %u refused)", racing,
               made, refused);
  mdc_fz_harness_free(h);
}
