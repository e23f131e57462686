/* fixture_unit.c - the unit tests of `mdc mutate --tests`'s fixture (test_mutate_cmd): a Criterion
 * executable linked with the fixture's schemata of sim/src/sim_backend.c, the way a MD_MUTAGEN_TESTS
 * build links every library. Both pass with no mutant selected. open_refuses_a_null_out kills
 * sim_open:check_del:1 (the NULL check removed: open writes through NULL), which the fixture's
 * one-trace corpus cannot (a client never passes a NULL out); open_and_close reaches the start-up
 * delay, whose removal (sim_open:call_del:1) neither kills. */
#include <criterion/criterion.h>

#include "md/sim.h"

Test(fixture_unit, open_refuses_a_null_out) {
  char err[128] = "";
  cr_expect_eq(md_sim_backend()->open(NULL, NULL, err, sizeof err), MD_INVALID_ARGUMENT);
}

Test(fixture_unit, open_and_close) {
  const md_backend_ops *ops = md_sim_backend();
  md_backend *b = NULL;
  char err[128] = "";
  cr_assert_eq(ops->open(NULL, &b, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_not_null(b);
  ops->close(b);
}
