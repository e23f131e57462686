/* test_fuzz_mutate.c - program-level mutations (fz_mutate.h): each does what it says to the
 * program and nothing else, the result always encodes and decodes, they are deterministic, and
 * from the tiny concurrency seed an insertion reaches "free the buffer between the issue and the
 * wait", which byte mutations did not find in 5 minutes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fz_codec.h"
#include "fz_mutate.h"
#include "fz_test_rand.h"
#include "fz_trace.h"

static mdc_fz_prog P, R, S;
static uint8_t in[4096], out[1 << 16], again[1 << 16];

/* The calls of p, without the waits mdc_fz_finish appended at its end (they come and go with
 * the events a mutation leaves live): their ids into ids, the count returned. */
static unsigned call_ids(const mdc_fz_prog *p, uint8_t *ids) {
  for (unsigned i = 0; i < p->n_calls; i++) ids[i] = p->calls[i].call;
  return p->n_calls;
}

/* Whether b is a with one element inserted (d = 1), removed (d = -1), or a itself (0), up to
 * trailing wait_events on either side. */
static int seq_edit(const uint8_t *a, unsigned na, const uint8_t *b, unsigned nb, int d) {
  while (na && a[na - 1] == MDC_CALL_WAIT_EVENT && nb && b[nb - 1] == MDC_CALL_WAIT_EVENT && na + d != nb) {
    if (na + d > nb) na--;
    else nb--;
  }
  while (na + d > nb && na && a[na - 1] == MDC_CALL_WAIT_EVENT) na--;
  while (na + d < nb && nb && b[nb - 1] == MDC_CALL_WAIT_EVENT) nb--;
  if ((int)nb - (int)na != d) return 0;
  if (d == 0) return !memcmp(a, b, na);
  const uint8_t *lo = d > 0 ? a : b, *hi = d > 0 ? b : a;
  unsigned nlo = d > 0 ? na : nb;
  unsigned i = 0;
  while (i < nlo && lo[i] == hi[i]) i++;
  return !memcmp(lo + i, hi + i + 1, nlo - i);
}

Test(mutate, every_mutation_keeps_the_untouched_calls_and_its_output_round_trips, .timeout = 240) {
  for (int t = 0; t < FZ_TARGETS; t++)
    for (int m = 0; m < FZ_MUT_COUNT; m++) {
      rng_state = 0x1234 + (uint64_t)(t * 16 + m);
      unsigned applied = 0;
      for (int i = 0; i < 300; i++) {
        size_t n = random_input(in, 64 + rnd() % 600);   /* room for more calls mostly */
        mdc_fz_decode((mdc_fz_target)t, in, n, &P);
        uint64_t s = rnd();
        size_t k = mdc_fz_mutate((mdc_fz_target)t, in, n, (fz_mutation)m, &s, out, sizeof out);
        if (!k) continue;
        applied++;
        mdc_fz_decode((mdc_fz_target)t, out, k, &R);
        /* what it wrote is a program that encodes to bytes decoding to itself */
        size_t k2 = mdc_fz_encode((mdc_fz_target)t, &R, again, sizeof again);
        cr_assert_gt(k2, 0u);
        mdc_fz_decode((mdc_fz_target)t, again, k2, &S);
        cr_assert_eq(S.n_calls, R.n_calls);
        uint8_t a[FZ_MAX_CALLS], b[FZ_MAX_CALLS];
        unsigned na = call_ids(&P, a), nb = call_ids(&R, b);
        switch (m) {
          case FZ_MUT_INSERT:
          case FZ_MUT_DUPLICATE:
            cr_assert(seq_edit(a, na, b, nb, 1) || na == FZ_MAX_CALLS, "%s %d: not one call inserted (%u -> %u calls)",
                      mdc_fz_target_name((mdc_fz_target)t), m, na, nb);
            break;
          case FZ_MUT_DELETE:
            cr_assert(seq_edit(a, na, b, nb, -1), "%s: not one call deleted (%u -> %u calls)",
                      mdc_fz_target_name((mdc_fz_target)t), na, nb);
            break;
          case FZ_MUT_REDRAW:
          case FZ_MUT_WRAP:
          case FZ_MUT_UNWRAP:
            cr_assert(seq_edit(a, na, b, nb, 0), "%s %d: the calls changed (%u -> %u calls)",
                      mdc_fz_target_name((mdc_fz_target)t), m, na, nb);
            break;
          case FZ_MUT_STALL:
            cr_assert_neq(R.stall, P.stall);
            cr_assert(seq_edit(a, na, b, nb, 0));
            break;
          default: break;
        }
        if (m == FZ_MUT_WRAP) cr_assert_eq(R.n_blocks, P.n_blocks + 1u);
        if (m == FZ_MUT_UNWRAP) cr_assert_eq(R.n_blocks + 1u, P.n_blocks);
      }
      int conc_only = m == FZ_MUT_WRAP || m == FZ_MUT_UNWRAP || m == FZ_MUT_STALL;
      if (t == FZ_CONCURRENCY || !conc_only) cr_assert_gt(applied, 10u, "%s: mutation %d applied %u times of 300",
                                                         mdc_fz_target_name((mdc_fz_target)t), m, applied);
      else cr_assert_eq(applied, 0u);
    }
}

Test(mutate, the_same_input_and_draws_give_the_same_output) {
  rng_state = 99;
  for (int i = 0; i < 200; i++) {
    size_t n = random_input(in, sizeof in);
    uint64_t s1 = rnd(), s2 = s1;
    size_t k1 = mdc_fz_mutate(FZ_CONCURRENCY, in, n, FZ_MUT_COUNT, &s1, out, sizeof out);
    size_t k2 = mdc_fz_mutate(FZ_CONCURRENCY, in, n, FZ_MUT_COUNT, &s2, again, sizeof again);
    cr_assert_eq(k1, k2);
    cr_assert(!memcmp(out, again, k1));
    cr_assert_eq(s1, s2);
  }
}

Test(mutate, an_insertion_frees_the_buffer_under_the_held_execution_of_the_tiny_seed) {
  char err[512];
  cr_assert_eq(mdc_fz_trace_read(MDC_TINY "/tiny_async.jsonl", FZ_CONCURRENCY, &P, err, sizeof err), 0, "%s", err);
  size_t n = mdc_fz_encode(FZ_CONCURRENCY, &P, in, sizeof in);
  cr_assert_gt(n, 0u);
  unsigned hits = 0, tries = 2000;
  for (unsigned i = 0; i < tries; i++) {
    uint64_t s = 0xabcdef + i;
    size_t k = mdc_fz_mutate(FZ_CONCURRENCY, in, n, FZ_MUT_INSERT, &s, out, sizeof out);
    if (!k) continue;
    mdc_fz_decode(FZ_CONCURRENCY, out, k, &R);
    /* free_buffer of the seed's token after the execute_async that reads it, before its wait */
    int issued = 0;
    for (unsigned c = 0; c < R.n_calls; c++) {
      const fz_call *kc = &R.calls[c];
      if (kc->call == MDC_CALL_EXECUTE_ASYNC) issued = 1;
      if (kc->call == MDC_CALL_WAIT_EVENT && issued) break;
      const fz_arg *tok = mdc_fz_arg(kc, MDC_A_TOKEN);
      if (issued && kc->call == MDC_CALL_FREE_BUFFER && tok && tok->ref.how == FZ_REF_OBJ && !tok->ref.forge &&
          R.objs[tok->ref.obj].kind == MDC_OBJ_TOKEN) {
        hits++;
        break;
      }
    }
  }
  cr_assert_gt(hits, 0u, "no insertion of %u put a free_buffer of the token between the issue and the wait", tries);
}
