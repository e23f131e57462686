/* fz_trace.h - private to fuzz/: a program as a trace (docs/trace-format.md, format 1.1) and a
 * trace as a program. "A program is a trace": every decoded program can be written as a trace
 * the engine replays, and every trace within the encoding's reach (docs/fuzzing.md) reads back
 * into a program, which is how the seed corpora are made. */
#ifndef MDC_FZ_TRACE_H
#define MDC_FZ_TRACE_H

#include <stdio.h>

#include "fz_eval.h"
#include "fz_model.h"

/* The value oracle's expectation for an execution (fz_eval.h): after NONE, output pool
 * pool of the request of call `issue` holds count floats from its offset off, v[at...]. */
typedef struct fz_vcheck {
  uint8_t n;                     /* outputs checked (0: none) */
  uint16_t issue;                /* the execute or execute_async call */
  struct { uint8_t pool; uint32_t off; uint16_t count, at; } o[FZ_MAX_IO];
  float v[FZ_EVAL_MAX * 2];
} fz_vcheck;

/* What a run saw of one call (fz_run_call.c fills them). */
typedef struct fz_outcome {
  uint8_t ran;                   /* the call was made */
  md_status got;
  fz_pred pred;                  /* what SPEC allowed, before the call */
  uint32_t n_shapes;
  md_output_shape shapes[FZ_MAX_ARGS];
  md_leak_report leaks;
  fz_vcheck vc;                  /* execute, wait_event: the values it was judged on */
} fz_outcome;

enum {
  FZ_TRACE_STATIC = 0,   /* the calls and their arguments only (no expectations) */
  FZ_TRACE_OBSERVED = 1, /* expectations: what the driver returned */
  FZ_TRACE_ORACLE = 2    /* expectations: what SPEC allows (a finding: fails on the driver it was
                            found on, passes on a fixed one) */
};

typedef struct fz_trace_opts {
  mdc_fz_target target;
  int mode;                      /* FZ_TRACE_* */
  const char *name;              /* header `name` (required) */
  const char *description;       /* NULL: a default */
  const char *rule;              /* header `rules` entry; NULL: a default */
  uint64_t mem_limit;            /* the device's mem_limit (0: none written) */
  uint16_t upto;                 /* write calls [0, upto); 0: all */
} fz_trace_opts;

/* Writes program p as a trace to f. outs (one per call) is required for OBSERVED and ORACLE.
 * Returns 0, or -1 when writing failed. */
int mdc_fz_trace_write(FILE *f, const mdc_fz_prog *p, const fz_outcome *outs, const fz_trace_opts *o);

/* Reads the trace at path into a program for target t (a concurrent block becomes sequential
 * calls for targets other than concurrency). Returns 0, or -1 with why the trace is beyond the
 * encoding (a fault plan, a fill, a pool over FZ_MAX_POOL_BYTES, ...) or unreadable in err.
 * Data payloads become random bytes of a seed derived from them. */
int mdc_fz_trace_read(const char *path, mdc_fz_target t, mdc_fz_prog *out, char *err, size_t errlen);

#endif
