/* test_mutate_fuzz.c - `mdc mutate --tce` and `--fuzz S` on the fixture driver
 * (md_driver_mutagen_fixture: sim/src/sim_backend.c compiled as its schemata) and a one-trace
 * corpus that leaves most of its mutants alive:
 *   --tce   : sim_close's `b->magic = 0` made 1 just before free(b) compiles to the same object
 *             code (a dead store), flagged; a removed start-up delay does not;
 *   --fuzz  : the target matching and the triage with md_fuzz_replay on known seeds, with a
 *             stand-in fuzz build (no campaign is needed, so none runs): sim_info's `if (!out)
 *             return;` negated is killed by a tokens seed (the device's memory size is never
 *             filled: the state model refuses the allocation's status), the run of the same seed
 *             with no mutant finding nothing; md_sim_check, which no seed reaches, is skipped;
 *             a fuzz build or seeds that are not there are exit 2;
 *   a real campaign (afl-fuzz and a fuzz build present, else skipped): the TCE-equivalent mutant
 *             gets its seconds of AFL++ and survives (it cannot be killed). */
#include <criterion/criterion.h>
#pragma GCC diagnostic ignored "-Wformat-truncation" /* commands built from short, known paths */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mutate_test_support.h"

#define TCE_SAME "sim/src/sim_backend.c:sim_close:const_inc:4"
#define TCE_DIFF "sim/src/sim_backend.c:sim_open:call_del:1"
#define SEED_KILLS "sim/src/sim_backend.c:sim_info:cond_negate:1"
#define UNREACHED "sim/src/sim_backend.c:md_sim_check:const_inc:1"
#define TRACE "basic/device_open_close"
#define SEED "allocate_combine_roles_complete_each_other"

static char work[1024], corpus[1100], equiv_none[1100], seeds[1100], fake[1100];

/* The work folder; a one-trace corpus; a seed folder per program target with one seed each; a
 * stand-in fuzz build (md_fuzz_T that only exit) and afl-fuzz on PATH, for the checks. */
static void setup(void) {
  char cmd[8192];
  snprintf(work, sizeof work, "%s/%d", MDM_WORK_ROOT, (int)getpid());
  snprintf(corpus, sizeof corpus, "%s/corpus", work);
  snprintf(equiv_none, sizeof equiv_none, "%s/equivalent-none.txt", work);
  snprintf(seeds, sizeof seeds, "%s/seeds", work);
  snprintf(fake, sizeof fake, "%s/fake-fuzz", work);
  snprintf(cmd, sizeof cmd,
           "rm -rf '%s' && mkdir -p '%s' '%s/fuzz' '%s/bin' && cp '%s/" TRACE ".jsonl' '%s/' && : > '%s' && "
           "for t in tokens shapes concurrency; do mkdir -p '%s/'$t && cp '%s/'$t'/" SEED "' '%s/'$t/; "
           "printf '#!/bin/sh\\nexit 0\\n' > '%s/fuzz/md_fuzz_'$t && chmod +x '%s/fuzz/md_fuzz_'$t; done && "
           "printf '#!/bin/sh\\nexit 1\\n' > '%s/bin/afl-fuzz' && chmod +x '%s/bin/afl-fuzz'",
           work, corpus, fake, fake, MDM_TRACES, corpus, equiv_none, seeds, MDM_SEEDS, seeds, fake, fake, fake, fake);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(mutate_fuzz, .init = setup, .timeout = 280);

/* mdc mutate on the fixture with extra arguments (PATH first: path_first, if not NULL); stdout
 * into *out, stderr into *err. Returns the exit status. */
static int mutate(const char *path_first, const char *args, char **out, char **err) {
  char cmd[8192], errf[1200];
  snprintf(errf, sizeof errf, "%s/stderr.txt", work);
  snprintf(cmd, sizeof cmd,
           "%s%s%s'%s' mutate --no-build --jobs 2 --driver '%s' --schemata '%s' --corpus '%s' --equivalent '%s' %s "
           "2>'%s'",
           path_first ? "PATH='" : "", path_first ? path_first : "", path_first ? "':\"$PATH\" " : "", MDC_EXE,
           MDM_FIXTURE_SO, MDM_FIXTURE_SCHEMATA, corpus, equiv_none, args, errf);
  return mdm_run_captured(cmd, errf, out, err);
}

/* The survivor with id in the run's --json, or NULL. */
static json_t *survivor(json_t *j, const char *id) {
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(j, "survivors"), i, s) if (!strcmp(json_string_value(json_object_get(s, "id")), id))
      return s;
  return NULL;
}

Test(mutate_fuzz, tce_flags_a_survivor_whose_object_code_is_the_originals) {
  char args[2048], *out, *err;
  snprintf(args, sizeof args, "--no-db --json --tce --only '%s' --only '%s'", TCE_SAME, TCE_DIFF);
  int rc = mutate(NULL, args, &out, &err);
  cr_assert_eq(rc, 1, "two survivors: exit 1, got %d\n%s\n%s", rc, out, err);
  json_t *j = json_loads(out, 0, NULL);
  cr_assert(j, "--json: %s", out);
  cr_expect_eq(json_integer_value(json_object_get(j, "survived")), 2, "%s", out);
  json_t *same = survivor(j, TCE_SAME), *diff = survivor(j, TCE_DIFF);
  cr_assert(same && diff, "%s", out);
  const char *le = json_string_value(json_object_get(same, "likely_equivalent"));
  cr_expect(le && strstr(le, "TCE"), "a dead store made 1: identical object code, flagged (got %s)", le ? le : "null");
  le = json_string_value(json_object_get(diff, "likely_equivalent"));
  cr_expect(!le || !strstr(le, "TCE"), "a removed delay changes the code: not flagged by TCE (got %s)", le);
  cr_expect(strstr(err, "--tce: 1 of 2 survivors compile to the same object code"), "%s", err);
  json_decref(j);
  free(out), free(err);
}

typedef struct seen {
  int killed_ok, rows;
} seen;

static int on_row(void *ctx, const mdc_mutate_row *r) {
  seen *s = ctx;
  s->rows++;
  if (!strcmp(r->mutant, SEED_KILLS))
    s->killed_ok = !strcmp(r->status, "killed") && r->kill_kind && !strcmp(r->kill_kind, "fuzz") && r->killed_by &&
                   !strncmp(r->killed_by, "fuzz:tokens:", 12) && strstr(r->killed_by, "/kills/");
  return 0;
}

Test(mutate_fuzz, a_seed_of_the_matching_target_kills_and_an_unreached_survivor_is_skipped) {
  char args[4096], db[1200], bin[1200], *out, *err;
  snprintf(db, sizeof db, "%s/mdc.db", work);
  snprintf(bin, sizeof bin, "%s/bin", fake);
  snprintf(args, sizeof args,
           "--db '%s' --json --fuzz 1 --fuzz-build '%s' --fuzz-seeds '%s' --fuzz-out '%s/fo' --only '%s' --only '%s'",
           db, fake, seeds, work, SEED_KILLS, UNREACHED);
  int rc = mutate(bin, args, &out, &err);
  cr_assert_eq(rc, 1, "a survivor left: exit 1, got %d\n%s\n%s", rc, out, err);
  json_t *j = json_loads(out, 0, NULL);
  cr_assert(j, "--json: %s", out);
  cr_expect_eq(json_integer_value(json_object_get(j, "killed")), 1, "%s\n%s", out, err);
  cr_expect_eq(json_integer_value(json_object_get(j, "survived")), 1, "%s", out);
  cr_expect(survivor(j, UNREACHED), "%s", out);
  cr_expect(strstr(err, UNREACHED ": no seed of any target reaches its function: skipped"), "%s", err);
  cr_expect(strstr(err, SEED_KILLS " killed by tokens (a seed: oracle:"), "%s", err);
  cr_expect(strstr(err, "0 campaigns"), "the seed killed it: no campaign ran\n%s", err);
  char kept[1400];
  snprintf(kept, sizeof kept, "%s/fo/kills/sim_src_sim_backend.c_sim_info_cond_negate_1.tokens", work);
  cr_expect_eq(access(kept, R_OK), 0, "the input that killed is kept: %s", kept);
  mdc_store *st = NULL;
  char serr[1024];
  cr_assert_eq(mdc_store_open_read(db, &st, serr, sizeof serr), 0, "%s", serr);
  mdc_run_row run;
  memset(&run, 0, sizeof run);
  cr_assert_eq(mdc_store_run_find(st, json_string_value(json_object_get(j, "run_uuid")), "mutate", &run), 0);
  seen s = {0};
  cr_assert_eq(mdc_store_mutate_each(st, run.id, on_row, &s), 0, "%s", mdc_store_error(st));
  cr_expect(s.killed_ok, "the row: killed, kind fuzz, killer fuzz:tokens:<kept input>");
  mdc_store_run_row_free(&run);
  mdc_store_close(st);
  json_decref(j);
  free(out), free(err);
}

Test(mutate_fuzz, a_missing_fuzz_build_or_seeds_is_exit_2) {
  char args[2048], bin[1200], *out, *err;
  snprintf(args, sizeof args, "--no-db --fuzz 5 --fuzz-build '%s/none' --only '%s'", work, SEED_KILLS);
  snprintf(bin, sizeof bin, "%s/bin", fake);
  int rc = mutate(bin, args, &out, &err);
  cr_expect_eq(rc, 2, "%s", err);
  cr_expect(strstr(err, "is not built: run `make fuzz-build`"), "%s", err);
  free(out), free(err);
  snprintf(args, sizeof args, "--no-db --fuzz 5 --fuzz-build '%s' --fuzz-seeds '%s/none' --only '%s'", fake, work,
           SEED_KILLS);
  rc = mutate(bin, args, &out, &err);
  cr_expect_eq(rc, 2, "%s", err);
  cr_expect(strstr(err, "--fuzz: no seeds at"), "%s", err);
  free(out), free(err);
}

/* A real campaign: afl-fuzz on PATH and a fuzz build (MDM_FUZZ_BUILD, else the repository's
 * build-fuzz), else skipped. */
Test(mutate_fuzz, a_campaign_runs_against_a_survivor_and_an_equivalent_one_survives) {
  const char *fb = getenv("MDM_FUZZ_BUILD") ? getenv("MDM_FUZZ_BUILD") : MDM_FUZZ_BUILD_DEFAULT;
  char bin[1200];
  snprintf(bin, sizeof bin, "%s/fuzz/md_fuzz_tokens", fb);
  if (system("command -v afl-fuzz >/dev/null") != 0 || access(bin, X_OK) != 0)
    cr_skip_test("no afl-fuzz or no fuzz build at %s (make fuzz-build, or MDM_FUZZ_BUILD=DIR)", fb);
  char args[4096], *out, *err;
  snprintf(args, sizeof args, "--no-db --fuzz 3 --fuzz-build '%s' --fuzz-seeds '%s' --fuzz-out '%s/fo' --only '%s'",
           fb, seeds, work, TCE_SAME);
  int rc = mutate(NULL, args, &out, &err);
  cr_expect_eq(rc, 1, "it survives: exit 1, got %d\n%s", rc, err);
  cr_expect(strstr(err, TCE_SAME " survived ") && strstr(err, " s of AFL++ on tokens ("), "%s", err);
  cr_expect(strstr(err, "0 of 1 survivors killed (1 campaigns of 3 s)"), "%s", err);
  free(out), free(err);
}
