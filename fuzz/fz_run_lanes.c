/* fz_run_lanes.c - the harness core's concurrent blocks (fz_run_int.h mdc_fz__run_block): each
 * lane on a thread, each call starting after the one before it in the program has started (the
 * schedule is the program's order plus its preemption points), each lane judged on its own view
 * of the state, where what other lanes may do is uncertain. */
#include "fz_run_int.h"

#include <sched.h>
#include <string.h>
#include <time.h>

/* ---- blocks --------------------------------------------------------------------------------- */

typedef struct lane_arg {
  fz_runner *r;
  const fz_block *b;
  uint8_t lane;
} lane_arg;

static _Thread_local volatile unsigned spin_sink;   /* per lane: spins share nothing */

static void preempt(const fz_call *k) {
  switch (k->pre) {
    case FZ_PRE_YIELD: sched_yield(); break;
    case FZ_PRE_SPIN:
      for (unsigned j = 0; j < 64u * k->pre_arg; j++) spin_sink = spin_sink + j;
      break;
    case FZ_PRE_SLEEP: {
      struct timespec ts = {0, (long)k->pre_arg * 4000L};
      nanosleep(&ts, NULL);
      break;
    }
    default: break;
  }
}

static void *lane_main(void *arg) {
  lane_arg *la = arg;
  fz_runner *r = la->r;
  const fz_block *b = la->b;
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &r->p->calls[i];
    if (k->lane != la->lane) continue;
    /* This call starts after the one before it in the program has started. */
    unsigned pos = i - b->first;
    while (atomic_load_explicit(&r->turn, memory_order_acquire) != pos) {
      if (atomic_load(&r->stop)) break;
      sched_yield();
    }
    if (atomic_load(&r->stop)) {
      atomic_store_explicit(&r->turn, pos + 1, memory_order_release);
      continue;
    }
    atomic_store_explicit(&r->turn, pos + 1, memory_order_release);
    preempt(k);
    mdc_fz__run_call(r, i, &r->lanes[la->lane], r->scratch[1 + la->lane % FZ_MAX_LANES]);
  }
  return NULL;
}

void mdc_fz__run_block(fz_runner *r, const fz_block *b) {
  pthread_t th[FZ_MAX_LANES];
  lane_arg args[FZ_MAX_LANES];
  unsigned started = 0;
  for (uint8_t l = 0; l < b->lanes; l++) mdc_fz_block_view(&r->st, r->p, b, l, &r->lanes[l]);
  atomic_store(&r->turn, 0);
  for (; started < b->lanes; started++) {
    args[started] = (lane_arg){r, b, (uint8_t)started};
    if (pthread_create(&th[started], NULL, lane_main, &args[started])) break;
  }
  if (started < b->lanes) atomic_store(&r->stop, 1);   /* the started lanes end at once */
  for (unsigned l = 0; l < started; l++) pthread_join(th[l], NULL);
  if (started < b->lanes) {
    mdc_fz__finding(r, (int)b->first, "harness", "", "cannot start %u lane threads", b->lanes);
    return;
  }
  md_status got[FZ_MAX_CALLS];
  for (unsigned i = b->first; i < b->end; i++) got[i - b->first] = r->outs[i].ran ? r->outs[i].got : MD_INVALID_ARGUMENT;
  char why[256];
  /* A close_client that raced its client's other calls: its report against what the lanes were
   * told (each lane judged it only for what no other lane could change). */
  md_leak_report leaks[FZ_MAX_CALLS];
  for (unsigned i = b->first; i < b->end; i++) leaks[i - b->first] = r->outs[i].leaks;
  int at;
  if (!atomic_load(&r->stop) &&
      (at = mdc_fz_block_leaks(&r->st, r->p, b, r->lanes, got, leaks, why, sizeof why)) >= 0)
    mdc_fz__finding(r, at, "leaks",
                    "SPEC 5, 8.9, 8.10: close_client reports what the client left live, whatever raced it",
                    "racing calls of block %u: %s", (unsigned)(b - r->p->blocks), why);
  if (!atomic_load(&r->stop) && mdc_fz_block_merge(&r->st, r->p, b, r->lanes, got, why, sizeof why))
    mdc_fz__finding(r, (int)b->end - 1, "race", why, "racing calls of block %u: %s", (unsigned)(b - r->p->blocks),
                    why);
}
