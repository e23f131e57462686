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
  /* The file the driver was loaded from and its identity (driver_id.c; "" when not known). */
  char file[512], build_id[129], sha256[65];
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

/* What a child that runs cases shows the parent besides its mdc_cli__page (whose line and op
 * are the running case's): how far it got and each finished case's result, written as each case
 * ends. A region of its own (replay_group.c), so the page's layout is child.c's alone. */
typedef struct mdc_cli__group_page {
  _Atomic uint32_t started;   /* cases begun: the running one is started - 1 while > done */
  _Atomic uint32_t done;      /* cases whose result is in out[] (stored after writing it) */
  _Atomic uint32_t stopped;   /* 1: the child ended early, its memory grown past the bound */
  _Atomic double case_t0;     /* mdc_cli__now() when the running case began (its deadline) */
  struct {
    mdc_result res;
    double duration_s;
  } out[];
} mdc_cli__group_page;

/* How the verdicts of a child's cases are taken (replay_sched.c): a GROUP of cases (a failure
 * after another case is re-run ALONE; one that passes alone is confirmed by its PAIR, the case
 * before it and itself); a RERUN is the flake re-run of a case that failed alone. */
enum { MDC_CLI__RUN_GROUP, MDC_CLI__RUN_ALONE, MDC_CLI__RUN_PAIR, MDC_CLI__RUN_RERUN };

typedef struct slot {
  size_t ci;       /* the case the child runs now (its first until it says otherwise) */
  mdc_cli__child ch;
  mdc_result res;
  size_t *cis;     /* the cases the child runs, in order (n of them; owned by the slot) */
  uint32_t n;
  int kind;        /* MDC_CLI__RUN_* */
  mdc_cli__group_page *gp;
  size_t gp_len;
} slot;

/* Forks the child that runs s->cis[0..s->n) (set by the caller) one after the other with the
 * driver loaded once, each verdict in s->gp as it ends (replay_group.c). 0, or -1 (errno). */
int mdc_cli__rp_start_group(const mdc_cli__replay_opts *o, const mdc_cli__run *run, slot *s);
/* Unmaps s->gp and frees s->cis (after mdc_cli__rp_finish_case). */
void mdc_cli__rp_group_free(slot *s);
/* The child ended, or its running case ran out of time: kills its group, reaps it and says
 * what happened to the case that was running (Crash, Timeout) or, when it ended well, the last
 * case's verdict. */
mdc_status mdc_cli__rp_finish_case(slot *s, double timeout_s, mdc_result *r);
/* Cases per child: o->group, else 1 on the simulator without a start-up cost (init_ns) and
 * MDC_CLI_GROUP_DEFAULT for every other driver or backend (replay_group.c). */
#define MDC_CLI_GROUP_DEFAULT 256u
uint32_t mdc_cli__rp_group_size(const mdc_cli__replay_opts *o, const mdc_cli__run *run);
/* The order cases run in: path order, --keep-order (the order of the PATHs given) or
 * --shuffle SEED (a Fisher-Yates shuffle driven by splitmix64 of the seed). order[0..run->n). */
void mdc_cli__rp_order(const mdc_cli__replay_opts *o, const mdc_cli__run *run, size_t *order);

/* A child to start before new groups are cut from the queue: the rest of a group whose child
 * crashed, a case re-run alone, a pair, a flake re-run. */
typedef struct mdc_cli__item {
  size_t *cis;
  uint32_t n;
  int kind;
} mdc_cli__item;

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
  /* Grouped replay: cases per child; children to start first (a FIFO); per case, its failure
   * after another case in a child (grp_*) while its alone re-run and pair decide. */
  uint32_t group;
  mdc_cli__item *items;
  size_t n_items, items_head, cap_items;
  mdc_result *grp_res;
  mdc_status *grp_status;
  size_t *grp_pred;                   /* the case that ran before it (SIZE_MAX: none) */
} sched;

int mdc_cli__rp_sched_init(sched *k);
void mdc_cli__rp_sched_free(sched *k);
/* Runs every queued case to its end (or until SIGINT/SIGTERM or a store failure stops it). */
void mdc_cli__rp_sched_run(sched *k);
/* Cases the store or a signal stopped: not run (or not finished), counted as nothing. */
void mdc_cli__rp_drop_unfinished(mdc_cli__run *run);

/* ---- --skips, --flakes and the selection (replay_lists.c) ---------------------------------- */

/* Loads --skips and --flakes, marks the cases they list, computes the run's selection. 0 or -1
 * (message on stderr). */
int mdc_cli__rp_lists_apply(const mdc_cli__replay_opts *o, const char *who, mdc_cli__run *run);
/* The skipped cases, settled (and stored) before the scheduler and set aside at the end of the
 * array while the others run; _end puts them back in path order (before dropping unfinished
 * cases). */
typedef struct mdc_cli__set_aside {
  size_t *from, n_all;
} mdc_cli__set_aside;
int mdc_cli__rp_skips_begin(mdc_cli__run *run, mdc_store *store, int64_t run_id, int *store_ok, const char *who,
                            mdc_cli__set_aside *set_aside);
void mdc_cli__rp_skips_end(mdc_cli__run *run, mdc_cli__set_aside *set_aside);
/* The final status of a case: a failure of a --flakes trace is a Flake (its message says so). */
mdc_status mdc_cli__rp_known_flaky(const mdc_cli__replay_opts *o, mdc_cli__case *c, mdc_status final);

/* ---- causes (signature.c) -------------------------------------------------------------------- */

/* After mdc_cli__rp_finish_case of the child whose running case c crashed (st Crash): keeps its
 * symbolized stack with the case (the first attempt's) and adds the driver's top frame to the
 * message r ("..., in f (file.c:12)"). Nothing for another status or a child without a stack. */
void mdc_cli__rp_crash_stack(mdc_cli__case *c, const mdc_cli__child *ch, mdc_status st, mdc_result *r);
/* The case's cause signature, NULL when it has none. */
const char *mdc_cli__rp_signature(const mdc_cli__case *c);
/* Whether cases of status s are shown in cause groups (not Pass, NotSupported, Warn, Skipped:
 * those are counted on a line each). */
int mdc_cli__status_grouped(mdc_status s);

/* The run's cause groups: cases of one signature, the groups with an unexpected case first,
 * then largest first. order[first .. first + n) are the group's case indexes, by name. */
typedef struct mdc_cli__group {
  const char *signature;     /* a case's (valid while the run is) */
  size_t first, n;
  uint32_t counts[MDC_S_COUNT], unexpected;
} mdc_cli__group;
typedef struct mdc_cli__groups_t {
  mdc_cli__group *v;
  size_t n;
  size_t *order;
  size_t cases;              /* cases in groups */
} mdc_cli__groups_t;
/* 0, or -1 when out of memory. Free with mdc_cli__groups_free. */
int mdc_cli__groups(const mdc_cli__run *run, mdc_cli__groups_t *g);
void mdc_cli__groups_free(mdc_cli__groups_t *g);

/* ---- output (replay_out.c, replay_progress.c) ---------------------------------------------- */

/* Before the scheduler: the progress's clock, interval and where it goes (o->quiet, a terminal). */
void mdc_cli__rp_progress_begin(const mdc_cli__replay_opts *o, const char *who);
/* The scheduler's poll timeout ms (-1: none) capped at the next off-terminal status line, which
 * is printed first when due. */
int mdc_cli__rp_progress_poll_ms(const mdc_cli__run *run, size_t done, int ms);

void mdc_cli__rp_progress(const mdc_cli__run *run, size_t done, const char *current, int on);
void mdc_cli__rp_summary(FILE *f, const mdc_cli__replay_opts *o, const mdc_cli__run *run);
void mdc_cli__rp_print_json(const mdc_cli__replay_opts *o, const mdc_cli__run *run, int store_ok);

#endif
