/* mutate_int.h - private to `mdc mutate` (mutate.c: options, build, lists; mutate_judge.c: the
 * reference pass and the judging; mutate_out.c: --since, the score, output, the store). */
#ifndef MDC_MUTATE_INT_H
#define MDC_MUTATE_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

enum { MU_PENDING = 0, MU_KILLED, MU_SURVIVED, MU_EQUIVALENT, MU_BUILD_FAILED, MU_SKIPPED };

typedef struct mdc_mutant {
  char *id, *file, *function, *op, *before, *after;
  uint32_t line;
  int skipped;               /* from the list: 1 not compiled in, 2 its file's schemata did not build */
  int selected;              /* judged in this run (--only, --ops, --since, --sample) */
  int state;                 /* MU_* */
  char why[256];             /* equivalent: the reason */
  int killed_by;             /* trace index, -1 */
  char kill_kind[16];        /* Fail, Crash, Timeout, fuzz */
  char killer[160];          /* what killed it when not a trace (fuzz) */
  uint32_t traces_run;
  double duration_s;
  int reach;                 /* the first trace that reaches it, -1 */
  int reach_fn;              /* else a trace that reaches its function, -1 */
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
} mdc_mutate;

void mdc_mutate__add(mdc_mutate *m, const char *id, const char *file, const char *fn, uint32_t line, const char *op,
                     int skipped, const char *before, const char *after);
void mdc_mutate__free(mdc_mutate *m);
/* Keeps selected only the mutants on lines `git diff REV` changed. 0 or -1 (message printed). */
int mdc_mutate__since(mdc_mutate *m);
/* The reference pass and every selected mutant judged. -1 when done; else an exit status. */
int mdc_mutate__judge(mdc_mutate *m);
/* The score, output and the store. Returns the exit status. */
int mdc_mutate__finish(mdc_mutate *m);

#endif
