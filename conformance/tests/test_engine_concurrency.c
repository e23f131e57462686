/* test_engine_concurrency.c - concurrent blocks on real threads (also run under ThreadSanitizer
 * through runtime/tests/tsan_runner): lanes released from a barrier, repeated, with a lane that
 * fails stopping every lane at the end of that repetition. */
#include <criterion/criterion.h>
#include <string.h>

#include "mdc/engine.h"

static const md_driver *ref(void) {
  char err[256];
  const md_driver *d = mdc_driver_load(NULL, NULL, err, sizeof err);
  cr_assert(d, "%s", err);
  return d;
}

Test(engine_concurrency, lanes_run_every_repetition) {
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), MDC_TEST_TRACES "/good/concurrent.jsonl", NULL, &res);
  cr_assert_eq(v, MDC_PASS, "%s", res.message);
  /* 12 events before, 7 per repetition x 20, 3 after */
  cr_assert_eq(res.events, 12u + 7u * 20u + 3u, "%u events", res.events);
}

Test(engine_concurrency, a_failing_lane_stops_the_block) {
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), MDC_TEST_TRACES "/fail/wrong_in_block.jsonl", NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s", res.message);
  cr_assert_eq(res.line, 12u);
  /* the block repeats 3 times but stops after the first: 9 events before, at most 2 in it */
  cr_assert_leq(res.events, 11u, "%u events", res.events);
}
