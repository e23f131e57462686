/* mutate_int.h - private to `mdc mutate` (mutate.c: options, build, lists; mutate_judge.c: the
 * reference pass and the judging; mutate_tests.c: --tests, the unit tests; mutate_fuzz.c: --fuzz,
 * the fuzz targets; mutate_tce.c: --tce, identical object code; mutate_out.c: --since, the score,
 * output, the store). */
#ifndef MDC_MUTATE_INT_H
#define MDC_MUTATE_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { MU_PENDING = 0, MU_KILLED, MU_SURVIVED, MU_EQUIVALENT, MU_BUILD_FAILED, MU_SKIPPED };

typedef struct mdc_mutant {
  char *id, *file, *function, *op, *before, *after;
  uint32_t line;
  int skipped;               /* from the list: 1 not compiled in, 2 its file's schemata did not build */
  int selected;              /* judged in this run (--only, --ops, --since, --sample) */
  int state;                 /* MU_* */
  char why[256];             /* equivalent: the reason */
  int killed_by;             /* trace index, -1 */
  char kill_kind[16];        /* Fail, Crash, Timeout (a trace), Test (a unit test), fuzz */
  char killer[160];          /* what killed it when not a trace (a unit test's name, fuzz) */
  uint32_t traces_run;
  double duration_s;
  int reach;                 /* the first trace that reaches it, -1 */
  int reach_fn;              /* else a trace that reaches its function, -1 */
  int tce;                   /* --tce: 1 its optimised object code is the original's, 2 not, 0 unchecked */
  /* judging */
  uint32_t *cand;            /* traces to try, in order */
  uint32_t n_cand, next;
  int busy;
} mdc_mutant;

typedef struct mdc_mutate_trace {
  char *path;
  char name[128];
  int pass;                  /* passes on the schemata build with no mutant */
  double duration_s;
  uint32_t kills_before;     /* from the store */
} mdc_mutate_trace;

typedef struct mdc_mutate {
  /* options */
  const char *corpus, *config, *db, *equivalent, *since, *ops, *driver, *schemata, *source, *build_cmd, *cflags;
  const char *only[64];
  size_t n_only, sample;
  unsigned seed;
  int jobs, json, no_db, no_build, quiet, equivalent_given, markdown, corpus_given, config_given;
  double timeout_s, min_score;
  /* state */
  const char *root;          /* the sources' root: ids are relative to it */
  char work[4096], log[4200], driver_buf[8300], schemata_buf[4200];
  mdc_mutant *v;
  size_t n, cap, n_generated;
  int sampled;
  mdc_mutate_trace *t;
  size_t n_t;
  uint32_t *order;           /* trace indexes, most killing first */
  double build_s, ref_s, judge_s, wall_s;
  size_t cases_run;
  volatile sig_atomic_t *stop;
  char driver_name[64], driver_version[64];
  /* --fuzz S (mutate_fuzz.c): a fuzz campaign per survivor; --tce (mutate_tce.c) */
  double fuzz_s, fuzz_wall_s, tce_s;
  const char *fuzz_build, *fuzz_out, *fuzz_seeds;
  int tce;
  size_t fuzz_tried, fuzz_killed;
  /* --tests DIR (mutate_tests.c): the unit tests against the corpus's survivors */
  const char *tests;
  size_t units, units_pass, units_run, units_killed;
  double units_ref_s, units_s;
  struct mdc_mutate_ix *ix;  /* the mutants by id, for reach logs (mdc_mutate__read_reach) */
} mdc_mutate;

void mdc_mutate__add(mdc_mutate *m, const char *id, const char *file, const char *fn, uint32_t line, const char *op,
                     int skipped, const char *before, const char *after);
void mdc_mutate__free(mdc_mutate *m);
/* Keeps selected only the mutants on lines `git diff REV` changed. 0 or -1 (message printed). */
int mdc_mutate__since(mdc_mutate *m);
/* Reads the reach log at path (one mutant id a line, MD_MUTAGEN_REACH) and removes it: who is
 * appended to reached[mi] of every mutant of this run it names. Returns the lines read; *matched
 * (may be NULL) grows by those that named a mutant. */
size_t mdc_mutate__read_reach(mdc_mutate *m, const char *path, uint32_t who, uint32_t **reached, uint32_t *n_reached,
                              size_t *matched);
/* The reference pass and every selected mutant judged. -1 when done; else an exit status. */
int mdc_mutate__judge(mdc_mutate *m);
/* --tests: every corpus survivor against the unit tests that reach it (mutate_tests.c); a kill is
 * kind "Test", killer the test's name. -1 when done (or no --tests); else an exit status. */
int mdc_mutate__tests(mdc_mutate *m);
/* --tests: whether its list and every executable it names are there (before the judging). -1 or 2. */
int mdc_mutate__tests_check(const mdc_mutate *m);
/* --fuzz: whether afl-fuzz, the fuzz build, md_fuzz_replay and the seeds are there (before the
 * judging, so a missing one is said at once). -1, or exit 2 with a message. */
int mdc_mutate__fuzz_check(mdc_mutate *m);
/* --fuzz S: each survivor against the fuzz target whose seeds reach it, S seconds, with it
 * selected; a finding the unmutated driver does not have kills it (kind "fuzz", killer
 * "fuzz:<target>:<input>"). -1 when done (or stopped); else an exit status. */
int mdc_mutate__fuzz(mdc_mutate *m);
/* --tce: each survivor's file compiled with it fixed and with none; the same object code sets
 * its tce to 1 (flagged likely equivalent). -1. */
int mdc_mutate__tce(mdc_mutate *m);
/* The score split by who killed (mutate_split.c): corpus alone, + unit tests, + fuzz. Each adds
 * nothing when no unit test ran and only traces killed, except the text's list of kills. */
void mdc_mutate__split_text(const mdc_mutate *m, FILE *f);       /* the scores, the tests' times */
void mdc_mutate__split_files_text(const mdc_mutate *m, FILE *f); /* per file; every kill and its killer */
struct json_t; /* jansson's */
void mdc_mutate__split_json(const mdc_mutate *m, struct json_t *j, struct json_t *files);
void mdc_mutate__split_markdown(const mdc_mutate *m, FILE *f);
/* The score, output and the store. Returns the exit status. */
int mdc_mutate__finish(mdc_mutate *m);

#endif
