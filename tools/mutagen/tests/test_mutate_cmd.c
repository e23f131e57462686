/* test_mutate_cmd.c - `mdc mutate` end to end, in seconds: the fixture driver
 * (md_driver_mutagen_fixture: the reference driver with sim/src/sim_backend.c compiled as its
 * schemata) judged by a one-trace corpus on two known mutants, one killed (the arena's creation
 * replaced by success: the first allocation crashes) and one surviving (a start-up delay
 * removed); the verdicts in --json, --markdown and the store's mutate_results rows
 * (reports/store_mutate.c); equivalent entries; bad input (exit 2 with a message). */
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

#define KILLED "sim/src/sim_backend.c:sim_open:call_ok:5"
#define SURVIVES "sim/src/sim_backend.c:sim_open:call_del:1"
#define TRACE "basic/device_open_close"

/* Each test runs in its own process (Criterion), two at once: each its own folder. */
static char work[1024], corpus[1100], equiv_none[1100];
#undef MDM_WORK
#define MDM_WORK work

static void setup(void) {
  char cmd[4096];
  snprintf(work, sizeof work, "%s/%d", MDM_WORK_ROOT, (int)getpid());
  snprintf(corpus, sizeof corpus, "%s/corpus", MDM_WORK);
  snprintf(equiv_none, sizeof equiv_none, "%s/equivalent-none.txt", MDM_WORK);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s/" TRACE ".jsonl' '%s/' && : > '%s'", MDM_WORK,
           corpus, MDM_TRACES, corpus, equiv_none);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

TestSuite(mutate_cmd, .init = setup, .timeout = 240);

/* Runs mdc mutate on the fixture with extra arguments; stdout into *out, stderr into *err. */
static int mutate(const char *args, char **out, char **err) {
  char cmd[8192], errf[1200];
  snprintf(errf, sizeof errf, "%s/stderr.txt", MDM_WORK);
  snprintf(cmd, sizeof cmd,
           "'%s' mutate --no-build --quiet --jobs 2 --driver '%s' --schemata '%s' --corpus '%s' %s 2>'%s'", MDC_EXE,
           MDM_FIXTURE_SO, MDM_FIXTURE_SCHEMATA, corpus, args, errf);
  return mdm_run_captured(cmd, errf, out, err);
}

typedef struct seen {
  int rows, killed_ok, survived_ok;
} seen;

static int on_row(void *ctx, const mdc_mutate_row *r) {
  seen *s = ctx;
  s->rows++;
  if (!strcmp(r->mutant, KILLED))
    s->killed_ok = !strcmp(r->status, "killed") && r->killed_by && !strcmp(r->killed_by, TRACE) && r->kill_kind &&
                   !strcmp(r->kill_kind, "Crash") && r->traces_run == 1 && r->line == 116 && r->diff &&
                   strstr(r->diff, "MD_NONE") && !strcmp(r->op, "call_ok") && !strcmp(r->function, "sim_open");
  if (!strcmp(r->mutant, SURVIVES))
    s->survived_ok = !strcmp(r->status, "survived") && !r->killed_by && r->reach && !strcmp(r->reach, TRACE) &&
                     r->traces_run == 1 && !strcmp(r->file, "sim/src/sim_backend.c");
  return 0;
}

static int count(void *ctx, const char *by, uint32_t n) {
  if (!strcmp(by, TRACE)) *(uint32_t *)ctx = n;
  return 0;
}

Test(mutate_cmd, one_killed_one_survived_json_and_store) {
  char args[4096], db[1100], *out, *err;
  snprintf(db, sizeof db, "%s/mdc.db", MDM_WORK);
  snprintf(args, sizeof args, "--only '%s' --only '%s' --equivalent '%s' --db '%s' --json", KILLED, SURVIVES,
           equiv_none, db);
  int rc = mutate(args, &out, &err);
  cr_assert_eq(rc, 1, "a survivor: exit 1, got %d\nstdout: %s\nstderr: %s", rc, out, err);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  cr_assert(j, "--json: %s\n%s", je.text, out);
  cr_expect_eq(json_integer_value(json_object_get(j, "killed")), 1);
  cr_expect_eq(json_integer_value(json_object_get(j, "survived")), 1);
  cr_expect_eq(json_integer_value(json_object_get(j, "equivalent")), 0);
  cr_expect(json_real_value(json_object_get(j, "score")) > 49.9 && json_real_value(json_object_get(j, "score")) < 50.1);
  json_t *sv = json_object_get(j, "survivors");
  cr_assert_eq(json_array_size(sv), 1, "%s", out);
  json_t *s0 = json_array_get(sv, 0);
  cr_expect_str_eq(json_string_value(json_object_get(s0, "id")), SURVIVES);
  cr_expect_str_eq(json_string_value(json_object_get(s0, "reach")), TRACE);
  cr_expect(json_is_string(json_object_get(s0, "likely_equivalent")), "a removed delay is flagged likely equivalent");
  json_t *files = json_object_get(j, "files");
  cr_assert_eq(json_array_size(files), 1);
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(files, 0), "file")), "sim/src/sim_backend.c");
  const char *uuid = json_string_value(json_object_get(j, "run_uuid"));
  cr_assert(uuid, "the run is stored: %s", out);
  /* The store: a run of kind mutate with a row per judged mutant. */
  mdc_store *st = NULL;
  char serr[1024];
  cr_assert_eq(mdc_store_open_read(db, &st, serr, sizeof serr), 0, "%s", serr);
  mdc_run_row run;
  memset(&run, 0, sizeof run);
  cr_assert_eq(mdc_store_run_find(st, uuid, "mutate", &run), 0, "%s", mdc_store_error(st));
  seen s = {0};
  cr_assert_eq(mdc_store_mutate_each(st, run.id, on_row, &s), 0, "%s", mdc_store_error(st));
  cr_expect_eq(s.rows, 2);
  cr_expect(s.killed_ok, "the killed row: killed by " TRACE ", a Crash, one trace run");
  cr_expect(s.survived_ok, "the survived row: reached by " TRACE);
  /* The next run tries the trace that killed first: it is counted. */
  uint32_t kills = 0;
  cr_expect_eq(mdc_store_mutate_kill_counts(st, count, &kills), 0);
  cr_expect_eq(kills, 1);
  mdc_store_run_row_free(&run);
  mdc_store_close(st);
  /* The report of the run: the per-file table and the survivor. */
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "'%s' report --db '%s' --run '%s' --out '%s/report' >/dev/null && grep -q 'id=\"mutate\"' '%s/report/index.html'"
           " && grep -q '" SURVIVES "' '%s/report/index.html'",
           MDC_EXE, db, uuid, MDM_WORK, MDM_WORK, MDM_WORK);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
  json_decref(j);
  free(out), free(err);
}

Test(mutate_cmd, equivalent_entries_and_markdown) {
  char eq[1100], args[4096], *out, *err;
  snprintf(eq, sizeof eq, "%s/equivalent.txt", MDM_WORK);
  FILE *f = fopen(eq, "w");
  cr_assert(f);
  fprintf(f, "# a comment\nsim/src/sim_backend.c:sim_open:call_del:* a category by glob: timing or zeroed memory\n");
  fclose(f);
  snprintf(args, sizeof args, "--only '%s' --only '%s' --equivalent '%s' --no-db --markdown", KILLED, SURVIVES, eq);
  int rc = mutate(args, &out, &err);
  cr_assert_eq(rc, 0, "every non-equivalent mutant killed: exit 0, got %d\n%s\n%s", rc, out, err);
  cr_expect(strstr(out, "| `sim/src/sim_backend.c` | 1 | 0 | 1 | 100 % |"), "%s", out);
  cr_expect(strstr(out, "Score **100.0 %**"), "%s", out);
  free(out), free(err);
  /* An entry without its reason is refused. */
  f = fopen(eq, "w");
  fprintf(f, "%s\n", SURVIVES);
  fclose(f);
  snprintf(args, sizeof args, "--only '%s' --equivalent '%s' --no-db", KILLED, eq);
  rc = mutate(args, &out, &err);
  cr_expect_eq(rc, 2);
  cr_expect(strstr(err, "has no reason"), "%s", err);
  free(out), free(err);
}

Test(mutate_cmd, bad_input_exits_2) {
  char args[4096], *out, *err;
  snprintf(args, sizeof args, "--only 'sim/src/sim_backend.c:no_such_function:rel:1' --no-db --equivalent '%s'",
           equiv_none);
  int rc = mutate(args, &out, &err);
  cr_expect_eq(rc, 2, "unknown --only id: got %d", rc);
  cr_expect(strstr(err, "no generated mutant has that id"), "%s", err);
  free(out), free(err);
  /* A missing build: no schemata driver at the given path. */
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s' mutate --no-build --no-db --driver '%s/missing.so' --schemata '%s' 2>'%s/e2.txt'",
           MDC_EXE, MDM_WORK, MDM_FIXTURE_SCHEMATA, MDM_WORK);
  int st = system(cmd);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "missing driver: %d", st);
  snprintf(cmd, sizeof cmd, "grep -q 'no schemata driver' '%s/e2.txt'", MDM_WORK);
  cr_expect_eq(system(cmd), 0, "the message names the missing driver");
  /* No mutant lists. */
  snprintf(cmd, sizeof cmd, "'%s' mutate --no-build --no-db --driver '%s' --schemata '%s/corpus' 2>'%s/e3.txt'",
           MDC_EXE, MDM_FIXTURE_SO, MDM_WORK, MDM_WORK);
  st = system(cmd);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "no lists: %d", st);
  /* An --equivalent file that is not there. */
  snprintf(args, sizeof args, "--only '%s' --no-db --equivalent '%s/nope.txt'", KILLED, MDM_WORK);
  rc = mutate(args, &out, &err);
  cr_expect_eq(rc, 2);
  free(out), free(err);
}
