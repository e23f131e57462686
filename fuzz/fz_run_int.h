/* fz_run_int.h - private to the harness core (fz_run*.c): the runner, and what its files give
 * each other. fz_run.c: the runner, findings and the run; fz_run_mem.c: memories and their
 * payload bytes; fz_run_call.c: one call made and judged; fz_run_value.c: the value oracle;
 * fz_run_lanes.c: a concurrent block's lanes on threads.
 *
 * A runner serves one thread, but the lanes of a block share it: what they may touch at once is
 * behind the locks named below, or atomic; the rest is the sequential run's. */
#ifndef MDC_FZ_RUN_INT_H
#define MDC_FZ_RUN_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "fz_run.h"

#define FZ_MEM_LIMIT (1ull << 20)
#define FZ_MAX_SLOTS 192        /* memories one program may make */
#define FZ_MAX_SHARED 32        /* read-only memories handed out again within a run */
#define FZ_FILL 0xA5            /* out-parameters are filled with this before a call */

typedef struct fz_slot {
  int fd;
  uint64_t size;            /* current file size */
} fz_slot;

/* The value oracle's expectation for one execution (fz_run_value.c). */
typedef struct fz_vexp {
  uint32_t run;              /* run_no it was made in (else stale) */
  fz_vcheck vc;
  int fd[FZ_MAX_IO];
  uint64_t foff[FZ_MAX_IO];
  uint16_t tok[FZ_MAX_IO];   /* input token objects: a write to one before the wait voids it */
  uint8_t n_tok;
} fz_vexp;

struct fz_runner {
  const md_driver *drv;
  char config[512];
  mdc_fz_target target;
  int strict;
  fz_slot slots[FZ_MAX_SLOTS];
  unsigned used;
  struct fz_shared_mem {
    fz_mem mem;
    int fd;
  } shared[FZ_MAX_SHARED];
  unsigned n_shared;
  int pipe_fds[2];
  int closed_fd;
  uint8_t *scratch[FZ_MAX_LANES + 1];   /* 2 * FZ_MAX_POOL_BYTES each: [0] sequential calls, [1 + l] lane l */
  pthread_mutex_t mem_lock;  /* slots and the shared memories (lanes make memories at once) */
  /* the device, kept from run to run (docs/fuzzing.md "Devices open after the fork point") */
  md_device *dev;
  uint32_t dev_seed;         /* the seed it was opened with */
  int fresh_each;            /* open a device for every run (MDC_FUZZ_FRESH_DEVICE) */
  uint64_t ev_client[FZ_MAX_OBJS];   /* the client each event was made for, for the reset */
  _Atomic uint8_t settled[FZ_MAX_OBJS];   /* the run: a wait consumed this event (its execution ended) */
  /* the run */
  const mdc_fz_prog *p;
  uint64_t vals[FZ_MAX_OBJS];
  fz_outcome *outs;
  fz_finding *f;
  pthread_mutex_t f_lock;
  _Atomic int current;
  _Atomic int stop;
  _Atomic unsigned turn;
  fz_state st;
  fz_state lanes[FZ_MAX_LANES];
  fz_outcome own[FZ_MAX_CALLS];
  /* Byte i of a seed's payload depends only on the seed and i: the last few seeds' bytes are
   * kept, so refilling a pool costs a copy, not a draw per byte. Lanes share it. */
  pthread_mutex_t fill_lock;
  struct {
    uint32_t seed;
    size_t len;
    uint8_t *bytes;
  } fill[8];
  /* The value oracle (fz_eval.h): sequential calls only (lanes race on contents). An
   * execute_async's expectation waits in vexp[its event] for a wait_event that returns NONE. */
  uint32_t run_no;
  fz_eval_scratch eval;
  float vin[FZ_MAX_IO][FZ_EVAL_MAX];
  fz_vexp vexp[FZ_MAX_OBJS];
  unsigned fill_next;
};

/* ---- fz_run.c ---- */

/* A status's name ("(not a status)" for a value that is none). */
const char *mdc_fz__sname(md_status s);
/* Records a finding about call `call` (-1: the run) unless the run has one: the first wins; the
 * run stops at the end of the current call. Thread-safe (f_lock). */
void mdc_fz__finding(fz_runner *r, int call, const char *what, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- fz_run_mem.c ---- */

/* n bytes of seed's payload (mdc_fz_fill) into out, from the runner's cache of recent seeds.
 * Thread-safe (fill_lock). */
void mdc_fz__fill(fz_runner *r, uint32_t seed, uint8_t *out, size_t n);
/* The md_memory for descriptor m, its window holding the seed's bytes (scratch: a
 * 2 * FZ_MAX_POOL_BYTES buffer of the caller's). `shared`: the driver only reads it, so one
 * with the same descriptor made earlier in the run is handed out again. 0, or -1 (errno) when a
 * memfd cannot be made or written. Thread-safe (mem_lock). */
int mdc_fz__make_mem(fz_runner *r, const fz_mem *m, int shared, md_memory *out, uint8_t *scratch);

/* ---- fz_run_value.c ---- */

/* The expectation for execution call i of the run (sequential; its request fq made into q):
 * e->vc.n stays 0 when the model is beyond the evaluator or an input's value is not known for
 * certain. */
void mdc_fz__vexpect(fz_runner *r, unsigned i, const fz_state *st, const fz_request *fq, const md_request *q,
                     fz_vexp *e, uint8_t *scratch);
/* Whether a call of p in (from, to] (and, when `to` is in a concurrent block, anywhere in that
 * block) may write token object t (strict: judged as the reference decides). */
int mdc_fz__token_written(const mdc_fz_prog *p, unsigned from, unsigned to, uint16_t t, int strict);
/* Judges the outputs of an execution that returned NONE (call i) against e; a finding when they
 * differ. snapshot: the rule broken is the reference's decision (strict), not SPEC's. */
void mdc_fz__vjudge(fz_runner *r, unsigned i, const fz_vexp *e, uint8_t *scratch, int snapshot);

/* ---- fz_run_call.c ---- */

/* Makes call i of the run with its arguments resolved, judges it against what the model
 * predicts in st, and moves st. scratch: the calling thread's (runner's scratch[0], or its
 * lane's). */
void mdc_fz__run_call(fz_runner *r, unsigned i, fz_state *st, uint8_t *scratch);

/* ---- fz_run_lanes.c ---- */

/* Runs concurrent block b: its lanes on threads, each judged on its own view of r->st, then the
 * leak reports of racing close_clients and the state after the block (findings as for a call). */
void mdc_fz__run_block(fz_runner *r, const fz_block *b);

#endif
