/* mdc/engine.h - replays one trace (docs/trace-format.md) against a driver, in this process.
 *
 * The engine knows nothing of processes, timeouts, databases or baselines: `mdc replay`
 * (conformance/mdc/) runs it in a child process per trace and adds those. It reads the trace as
 * a stream (one line at a time; a concurrent block is held whole), opens real pools (memfd,
 * temporary files), calls the driver through its md_driver table and judges every call. */
#ifndef MDC_ENGINE_H
#define MDC_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_TRACE_MAJOR 1
#define MDC_TRACE_MINOR 1

typedef enum mdc_verdict {
  MDC_PASS = 0,
  MDC_FAIL = 1,          /* an expectation was not met */
  MDC_NOT_SUPPORTED = 2, /* the trace's `requires` are not met by this driver */
  MDC_TRACE_ERROR = 3    /* the trace itself is broken (file and line in message) */
} mdc_verdict;

const char *mdc_verdict_name(mdc_verdict v); /* "Pass", "Fail", "NotSupported", "TraceError" */

/* What a trace's header says. */
typedef struct mdc_trace_header {
  int major, minor;
  char name[128];
  char description[512];
  char rules[1024];       /* the `rules` array joined with "; " */
  char tags[256];         /* joined with "," */
  char requires[256];     /* joined with "," */
  int must_pass;
} mdc_trace_header;

/* The result of replaying one trace. Strings are NUL-terminated and truncated to fit. */
typedef struct mdc_result {
  mdc_verdict verdict;
  uint32_t line;          /* line of the event that failed (0: none) */
  uint32_t events;        /* events run (a repeated concurrent block counts each call) */
  char message[1024];     /* "path:line: op: what went wrong", "" on Pass */
  char expected[512];     /* mismatch details, "" when not a mismatch */
  char actual[512];
  char event[32];         /* the op of the event the verdict is about ("" when none) */
  char rule[512];         /* on Fail: the SPEC rules the trace pins (its header's `rules`) */
  char driver_message[512]; /* on Fail of a call: the driver's last_error for it ("" if none) */
  char advisory[512];     /* message expectations the driver's messages did not meet (SPEC 8.11:
                             reported, not judged unless strict_messages), "; "-joined */
  uint32_t skipped;       /* events not run because their `when` did not hold */
} mdc_result;

/* One thing a replay observed, for comparing two replays of a trace (mdc replay --differential):
 * a driver call's status (and, for execute/wait_event, its shapes), or the bytes a `check` event
 * looked at (before comparing them with its values). Events inside concurrent blocks are not
 * observed (their order is the scheduler's). Pointers are valid during the callback only. */
typedef struct mdc_observation {
  uint32_t line;
  const char *op;
  int is_check;                 /* 0: a call (status, shapes); 1: a check (type, data) */
  md_status status;
  uint32_t n_shapes;
  const md_output_shape *shapes;
  const char *type;             /* check: "f32", "i32", "u8" */
  const uint8_t *data;          /* check: the pool bytes it looked at */
  size_t len;
} mdc_observation;

/* What a replay may be told besides the driver and the trace; zero fields are off. */
typedef struct mdc_trace_opts {
  const char *config;         /* the replay's config keys, as mdc_trace_run's `config` */
  volatile uint32_t *line;    /* set before each event to its line (for a crash or hang report) */
  volatile char *op;          /* and to its op, NUL-terminated in op_len bytes */
  size_t op_len;
  FILE *verbose;              /* each event as it runs, its arguments, each call's status and message */
  int strict_messages;        /* a `message` expectation that is not met is a Fail (else advisory) */
  const char *config_override;/* config keys that win over the trace's own in its first
                                 open_device (a differential replay forces its backend) */
  void (*observe)(void *ctx, const mdc_observation *o);   /* see mdc_observation */
  void *observe_ctx;
  const void *bytes;          /* non-NULL: the trace's bytes (n_bytes of them), read instead of the
                                 file; `path` names them in messages and places sidecar blobs */
  size_t n_bytes;
  int keep_files;             /* a pool's memfd or temporary file is not closed when its trace
                                 ends but kept for a pool of a later trace in this process (up to
                                 64 KiB still mapped, zeroed when taken; larger ones truncated to
                                 0 bytes): a fuzz target replays thousands of traces a second, and
                                 making and removing a file in /tmp each time was most of what one
                                 cost. mdc_trace_drop_kept_files closes them. */
} mdc_trace_opts;

/* Closes the files that replays with keep_files left for later ones (a forked child calls it:
 * the files it inherited are its parent's too). */
void mdc_trace_drop_kept_files(void);

/* Reads only the header line. 0 on success; -1 with a message naming file and line in err. */
int mdc_trace_read_header(const char *path, mdc_trace_header *out, char *err, size_t errlen);

/* Replays the trace at `path` against `drv`. `config` (may be NULL or "") holds the replay's
 * config keys, merged into the trace's first open_device as docs/trace-format.md says.
 * Always fills *out; returns out->verdict. Never exits or aborts on bad input. */
mdc_verdict mdc_trace_run(const md_driver *drv, const char *path, const char *config,
                          mdc_result *out);
/* The same with options (o may be NULL). */
mdc_verdict mdc_trace_run_opts(const md_driver *drv, const char *path, const mdc_trace_opts *o,
                               mdc_result *out);

/* Loads a driver shared object (NULL: the reference driver linked into this program, when it
 * is) and returns its table for ABI v1; NULL with a message in err. *dl gets the dlopen handle
 * (NULL for the linked driver); release with mdc_driver_unload. */
const md_driver *mdc_driver_load(const char *so_path, void **dl, char *err, size_t errlen);
void mdc_driver_unload(void *dl);

#ifdef __cplusplus
}
#endif
#endif
