/* fz_run.h - private to fuzz/: the harness core. Runs a program against a driver through its
 * md_driver table, judging every call with the state model (fz_model.h), and runs a concurrent
 * block's lanes on real threads in the order the program gives (fz_run*.c).
 *
 * The device is opened by the first run and kept (tokens, shapes: a device per run, below): each run
 * ends by putting it back to holding nothing through the ABI (waiting for its events, closing
 * its clients); a run with another seed (concurrency), a run that found something or whose
 * clients would not close gets a new one. Nothing of the driver exists before the first run,
 * which is what lets the AFL++ fork server fork before it (mdc_fz_runner_close_device before a
 * fork). */
#ifndef MDC_FZ_RUN_H
#define MDC_FZ_RUN_H

#include "fz_trace.h"

typedef struct fz_finding {
  int found;
  int call;                      /* the call it is about (-1: none) */
  char signature[128];           /* oracle:<op>:<what>:<hash>, stable across runs */
  char message[768];
} fz_finding;

typedef struct fz_runner fz_runner;

/* A runner for driver drv (the table stays the caller's). config: the driver's open_device
 * keys (backend=..., may be NULL); the runner adds seed= and mem_limit=. NULL when out of
 * memory or when config is too long. Not thread-safe: one runner per thread. */
fz_runner *mdc_fz_runner_new(const md_driver *drv, const char *config, mdc_fz_target t);
void mdc_fz_runner_free(fz_runner *r);
/* Closes the device the runs share (its worker threads joined), if one is open: before a fork,
 * whose child must open its own. The next run opens a new one. */
void mdc_fz_runner_close_device(fz_runner *r);
/* Closes the memfds the runs reuse for memories (the next run makes new ones). Before a fork
 * server starts: a memfd made before the fork is one file shared by every child, whose sizes
 * each child would change behind the others' backs (the runner caches a slot's size). */
void mdc_fz_runner_drop_memories(fz_runner *r);
/* fresh != 0: every run opens a device and closes it at its end; 0: one device kept from run
 * to run (concurrency: while the seed stays the same). The default comes from
 * $MDC_FUZZ_FRESH_DEVICE (1 or 0), else the target: kept for concurrency, fresh for the others. */
void mdc_fz_runner_fresh_device(fz_runner *r, int fresh);
/* Whether the runner holds a device now (kept for the next run). */
int mdc_fz_runner_has_device(const fz_runner *r);
/* The device's memory limit the runner configures (the model's mem_limit). */
uint64_t mdc_fz_runner_mem_limit(const fz_runner *r);

/* Runs p. outs (p->n_calls entries, may be NULL) gets each call's outcome, f the first
 * finding. Returns 0 when the run ended (findings in f), -1 when the device could not be
 * opened (err holds the driver's message; not a finding). */
int mdc_fz_run(fz_runner *r, const mdc_fz_prog *p, fz_outcome *outs, fz_finding *f, char *err, size_t errlen);

/* Also judge the reference driver's documented decisions (a racing read sees one whole value),
 * beyond what SPEC requires of every driver. Off by default. */
void mdc_fz_runner_strict(fz_runner *r, int strict);
/* The call index and op the runner is in (for a crash or hang report), -1 when none. */
int mdc_fz_runner_current(const fz_runner *r, const char **op);

/* The random u8 payload of the engine (docs/trace-format.md "Payloads"): byte i of seed s. */
void mdc_fz_fill(uint32_t seed, uint8_t *out, size_t n);

#endif
