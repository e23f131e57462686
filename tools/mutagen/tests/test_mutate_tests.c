/* test_mutate_tests.c - `mdc mutate --tests` end to end, in seconds: the fixture driver
 * (md_driver_mutagen_fixture: sim/src/sim_backend.c as its schemata) judged by a one-trace corpus,
 * then the corpus's survivors against the fixture's unit tests (test_mutate_fixture_unit, linked
 * with the same schemata; fixture_unit.c). Three known mutants: one the trace kills (Crash), one
 * only a unit test kills (the NULL check of open removed: no client passes NULL, the test does), one
 * both miss (a delay removed). The split score in --json and the text, the store's row (kind Test,
 * killer the test's name), the report, and a --tests folder without a list (exit 2). */
#include <criterion/criterion.h>
#pragma GCC diagnostic ignored "-Wformat-truncation" /* commands built from short, known paths */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mutate_test_support.h"

#define KILLED "sim/src/sim_backend.c:sim_open:call_ok:5"
#define BY_TEST "sim/src/sim_backend.c:sim_open:check_del:1"
#define SURVIVES "sim/src/sim_backend.c:sim_open:call_del:1"
#define TRACE "basic/device_open_close"
#define UNIT "test_mutate_fixture_unit fixture_unit/open_refuses_a_null_out"

static char work[1024], corpus[1100], equiv_none[1100];

static void setup(void) {
  char cmd[4096];
  snprintf(work, sizeof work, "%s/tests-%d", MDM_WORK_ROOT, (int)getpid());
  snprintf(corpus, sizeof corpus, "%s/corpus", work);
  snprintf(equiv_none, sizeof equiv_none, "%s/equivalent-none.txt", work);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/" TRACE ".jsonl' '%s/' && : > '%s'", work, corpus,
           MDM_TRACES, corpus, equiv_none);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(mutate_tests, .init = setup, .timeout = 240);

/* mdc mutate on the fixture's three mutants with extra arguments; stdout into *out, stderr *err. */
static int mutate(const char *args, char **out, char **err) {
  char cmd[8192], errf[1200];
  snprintf(errf, sizeof errf, "%s/stderr.txt", work);
  snprintf(cmd, sizeof cmd,
           "'%s' mutate --no-build --jobs 2 --driver '%s' --schemata '%s' --corpus '%s' --equivalent '%s' "
           "--only '%s' --only '%s' --only '%s' %s 2>'%s'",
           MDC_EXE, MDM_FIXTURE_SO, MDM_FIXTURE_SCHEMATA, corpus, equiv_none, KILLED, BY_TEST, SURVIVES, args, errf);
  return mdm_run_captured(cmd, errf, out, err);
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* The entry of killed_mutants for id. */
static json_t *kill_of(json_t *j, const char *id) {
  json_t *v = json_object_get(j, "killed_mutants"), *e;
  size_t i;
  json_array_foreach(v, i, e) if (!strcmp(json_string_value(json_object_get(e, "id")), id)) return e;
  return NULL;
}

static int on_row(void *ctx, const mdc_mutate_row *r) {
  if (!strcmp(r->mutant, BY_TEST))
    *(int *)ctx = !strcmp(r->status, "killed") && r->kill_kind && !strcmp(r->kill_kind, "Test") && r->killed_by &&
                  !strcmp(r->killed_by, UNIT);
  return 0;
}

Test(mutate_tests, a_unit_test_kills_a_corpus_survivor_and_the_score_is_split) {
  char args[4096], db[1100], *out, *err;
  snprintf(db, sizeof db, "%s/mdc.db", work);
  snprintf(args, sizeof args, "--tests '%s' --db '%s' --json", MDM_FIXTURE_UNITS, db);
  int rc = mutate(args, &out, &err);
  cr_assert_eq(rc, 1, "the delay survives: exit 1, got %d\nstdout: %s\nstderr: %s", rc, out, err);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  cr_assert(j, "--json: %s\n%s", je.text, out);
  cr_expect_eq(json_integer_value(json_object_get(j, "killed")), 2, "%s", out);
  cr_expect_eq(json_integer_value(json_object_get(j, "survived")), 1, "%s", out);
  cr_expect(num(j, "score_corpus") > 33.2 && num(j, "score_corpus") < 33.4, "%s", out);
  cr_expect(num(j, "score_corpus_tests") > 66.6 && num(j, "score_corpus_tests") < 66.7, "%s", out);
  json_t *by = json_object_get(j, "killed_by"), *ut = json_object_get(j, "unit_tests");
  cr_expect_eq(json_integer_value(json_object_get(by, "corpus")), 1);
  cr_expect_eq(json_integer_value(json_object_get(by, "tests")), 1);
  cr_expect_eq(json_integer_value(json_object_get(ut, "tests")), 2, "both tests listed: %s", out);
  cr_expect_eq(json_integer_value(json_object_get(ut, "pass")), 2, "both pass with no mutant: %s", out);
  cr_expect_eq(json_integer_value(json_object_get(ut, "killed")), 1);
  /* Only the corpus's survivors run tests, each only those that reach it: at most one run for
   * BY_TEST (open_and_close is faster and passes, or the NULL one kills first) and two for SURVIVES. */
  cr_expect(json_integer_value(json_object_get(ut, "runs")) >= 2 && json_integer_value(json_object_get(ut, "runs")) <= 4,
            "%s", out);
  json_t *k = kill_of(j, BY_TEST), *c = kill_of(j, KILLED);
  cr_assert(k && c, "%s", out);
  cr_expect_str_eq(json_string_value(json_object_get(k, "stage")), "tests");
  cr_expect_str_eq(json_string_value(json_object_get(k, "kind")), "Test");
  cr_expect_str_eq(json_string_value(json_object_get(k, "by")), UNIT);
  cr_expect_str_eq(json_string_value(json_object_get(c, "stage")), "corpus");
  cr_expect_str_eq(json_string_value(json_object_get(c, "by")), TRACE);
  json_t *f0 = json_array_get(json_object_get(j, "files"), 0);
  cr_expect(num(f0, "score_corpus") > 33.2 && num(f0, "score_corpus") < 33.4, "per file: %s", out);
  /* The store's row: kind Test, killed by the test's name; the report says which killed which. */
  const char *uuid = json_string_value(json_object_get(j, "run_uuid"));
  cr_assert(uuid, "%s", out);
  mdc_store *st = NULL;
  char serr[1024];
  cr_assert_eq(mdc_store_open_read(db, &st, serr, sizeof serr), 0, "%s", serr);
  mdc_run_row run;
  memset(&run, 0, sizeof run);
  cr_assert_eq(mdc_store_run_find(st, uuid, "mutate", &run), 0, "%s", mdc_store_error(st));
  int row_ok = 0;
  cr_assert_eq(mdc_store_mutate_each(st, run.id, on_row, &row_ok), 0);
  cr_expect(row_ok, "the row of " BY_TEST ": killed, Test, by " UNIT);
  mdc_store_run_row_free(&run);
  mdc_store_close(st);
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "'%s' report --db '%s' --run '%s' --out '%s/report' >/dev/null && grep -q 'corpus alone <b>33.3%%</b>' "
           "'%s/report/index.html' && grep -q '" UNIT "' '%s/report/index.html'",
           MDC_EXE, db, uuid, work, work, work);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
  json_decref(j);
  free(out), free(err);
}

Test(mutate_tests, the_text_names_each_killer) {
  char args[4096], *out, *err;
  snprintf(args, sizeof args, "--tests '%s' --no-db", MDM_FIXTURE_UNITS);
  int rc = mutate(args, &out, &err);
  cr_assert_eq(rc, 1, "got %d\n%s\n%s", rc, out, err);
  cr_expect(strstr(out, "corpus alone 33.3 % (1), corpus + unit tests 66.7 % (+1)"), "%s", out);
  cr_expect(strstr(out, BY_TEST " by unit test " UNIT), "%s", out);
  cr_expect(strstr(out, KILLED " by trace " TRACE " (Crash)"), "%s", out);
  free(out), free(err);
}

Test(mutate_tests, a_folder_without_a_list_exits_2) {
  char args[4096], *out, *err;
  snprintf(args, sizeof args, "--tests '%s' --no-db", work);
  int rc = mutate(args, &out, &err);
  cr_expect_eq(rc, 2, "got %d", rc);
  cr_expect(strstr(err, "MD_MUTAGEN_TESTS"), "the message says how to make one: %s", err);
  free(out), free(err);
}
