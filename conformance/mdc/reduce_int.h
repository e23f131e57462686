/* reduce_int.h - private to `mdc reduce` (reduce.c: the trace, candidates, ddmin, the command;
 * reduce_simplify.c: simpler values once no unit can go). */
#ifndef MDC_REDUCE_INT_H
#define MDC_REDUCE_INT_H

#include <jansson.h>
#include <stddef.h>

#include "mdc_int.h"

typedef struct ev {
  json_t *obj;                 /* the event (owned) */
  char **defs, **uses;         /* names it defines and uses (strings owned) */
  size_t n_defs, n_uses;
  size_t *def_ids, *use_ids;   /* the same as indexes into trace.names (uses: only the strings
                                  some event defines: the others are not names) */
  size_t n_def_ids, n_use_ids;
} ev;

typedef struct unit {
  size_t first, last;          /* events [first, last]: one event or a concurrent block */
} unit;

typedef struct trace {
  const char *path;
  json_t *header;
  char *header_comment;        /* the comment lines written above the header */
  ev *evs;
  size_t n_evs;
  unit *units;
  size_t n_units;
  char **names;                /* every name some event defines, sorted (not owned) */
  size_t n_names;
  char *defined;               /* closure's scratch: defined[i] for names[i] */
} trace;

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

typedef struct reducer {
  const char *driver, *config, *who, *path;
  const char *db, *run_ref;    /* --db, --run: where the reduced trace is recorded */
  double timeout_s;
  int replays, verbose, quiet;
  int ref_check;               /* a candidate must also pass on the reference driver */
  char want[1200];             /* the failure to keep (masked) */
  mdc_status want_status;
  unsigned long tests, kept;
  double t0;
} reducer;

/* The trace's text with the kept units (header first). 0, or -1 (out of memory). */
int mdc_cli__rd_render(const trace *t, const char *keep, const char *comment, buf *out);
/* Whether the text fails the way being kept (and, with the reference check, passes on the
 * reference driver). */
int mdc_cli__rd_still_fails(reducer *z, const buf *b);
void mdc_cli__rd_progress(reducer *z, const char *phase, size_t units, size_t of);
/* repeat to 1, payloads to zeros, literal handles to 0: each kept when the failure stays. */
void mdc_cli__rd_simplify(reducer *z, const trace *t, const char *cur, buf *b);
/* The sidecars still there become inline hex (the reduced trace needs no blobs/ folder). */
void mdc_cli__rd_inline_sidecars(const reducer *z, json_t *v);

#endif
