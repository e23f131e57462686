/* replay_int.h - private to `mdc replay` (replay*.c): the driver probe, the children that run
 * cases, the scheduler of a run and the outputs. replay.c makes the cases and runs them
 * (mdc_cli__replay); replay_sched.c runs them in children; replay_out.c prints the summary and
 * the JSON; replay_progress.c the progress line; replay_cmd.c parses the command line. */
#ifndef MDC_REPLAY_INT_H
#define MDC_REPLAY_INT_H

#include <poll.h>
#include <stdio.h>

#include "mdc/store.h"
#include "mdc_int.h"

/* ---- the driver probe (replay.c) ------------------------------------------------------------ */

typedef struct probe_msg {
  int loaded, opened;
  char err[512];
  char name[64], version[64];
  md_capabilities caps;
} probe_msg;

/* 0 when the driver loaded (*m filled; m->opened says whether open_device worked); -1 with a
 * message in err when it could not be loaded or the probe crashed or hung. */
int mdc_cli__rp_probe(const char *driver, const char *config, double timeout_s, probe_msg *m, char *err,
                      size_t errlen);

/* ---- case statuses and their store rows (replay.c) ---------------------------------------- */

void mdc_cli__rp_set_status(mdc_cli__run *run, mdc_cli__case *c, mdc_status s);
/* A failure of a trace that is not must-pass is Warn. */
mdc_status mdc_cli__rp_not_must_pass(const mdc_cli__case *c, mdc_status st);
/* Completes a case's store row; 1 when written (a store failure sets *store_ok = 0). */
int mdc_cli__rp_store_case(mdc_store *store, int *store_ok, const mdc_cli__case *c, mdc_status final,
                           const char *who, int tty);

/* ---- cases in children (replay_sched.c) ----------------------------------------------------- */

typedef struct slot {
  size_t ci;       /* case index */
  mdc_cli__child ch;
  mdc_result res;
} slot;

int mdc_cli__rp_start_case(const mdc_cli__replay_opts *o, mdc_cli__case *c, size_t ci, slot *s);
mdc_status mdc_cli__rp_finish_case(slot *s, double timeout_s, mdc_result *r);

/* The scheduler of a run: cases queued, children running, first attempts kept for re-runs. */
typedef struct sched {
  const mdc_cli__replay_opts *o;
  const char *who;
  mdc_cli__run *run;
  const mdc_cli__baseline *base;
  mdc_store *store;
  int64_t run_id;
  int store_ok, tty, jobs, active;
  slot *slots;
  struct pollfd *pfds;
  size_t *queue, qhead, qtail, done;  /* case indexes to (re)run; a flake re-run goes to its end */
  mdc_result *first;                  /* per case: its first attempt's result and status */
  mdc_status *first_status;
  char *has_first;
} sched;

int mdc_cli__rp_sched_init(sched *k);
void mdc_cli__rp_sched_free(sched *k);
/* Runs every queued case to its end (or until SIGINT/SIGTERM or a store failure stops it). */
void mdc_cli__rp_sched_run(sched *k);
/* Cases the store or a signal stopped: not run (or not finished), counted as nothing. */
void mdc_cli__rp_drop_unfinished(mdc_cli__run *run);

/* ---- output (replay_out.c, replay_progress.c) ---------------------------------------------- */

void mdc_cli__rp_progress(const mdc_cli__run *run, size_t done, const char *current, int on);
void mdc_cli__rp_summary(FILE *f, const mdc_cli__replay_opts *o, const mdc_cli__run *run);
void mdc_cli__rp_print_json(const mdc_cli__replay_opts *o, const mdc_cli__run *run, int store_ok);

#endif
