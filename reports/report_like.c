/* report_like.c - which earlier runs a run may be compared with: the same kind, driver name and
 * backend, over the same selection of traces (the same set of case names: the store's
 * `selection` hash, schema v4). A 9-case run of basic/ is no baseline for the whole corpus, and
 * a history chart that mixes them plots the selection, not the driver. A run that did not record
 * its selection (an older mdc, a store written through the API) is compared as before: with every
 * earlier run of its kind, driver and backend. */
#include "report_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct like_ctx {
  const mdc_run_row *run;
  rp_like *out;
  size_t cap;
  int oom;
} like_ctx;

static int on_run(void *ctx, const mdc_run_row *row) {
  like_ctx *l = ctx;
  rp_like *o = l->out;
  const char *sel = l->run->selection;
  if (sel && (!row->selection || strcmp(row->selection, sel) != 0)) {
    if (row->selection) o->other_selection++;
    else o->unrecorded++;
    return 0;
  }
  o->matched++;
  if (!l->cap) return 0;
  /* Oldest first: keep the newest cap in a sliding window. */
  if (o->n == l->cap) {
    memmove(o->ids, o->ids + 1, (l->cap - 1) * sizeof *o->ids);
    o->n--;
  }
  o->ids[o->n++] = row->id;
  return 0;
}

/* Reads run rows only (of s, which may be another store than run's: only_earlier 0 then takes
 * every run of it); fills *out (free with rp_like_free). 0, or -1 with the store's message. */
int rp_like_runs(mdc_store *s, const mdc_run_row *run, uint32_t limit, int only_earlier, rp_like *out) {
  memset(out, 0, sizeof *out);
  out->by_selection = run->selection != NULL;
  like_ctx l = {.run = run, .out = out, .cap = limit};
  if (limit && !(out->ids = calloc(limit, sizeof *out->ids))) return -1;
  mdc_run_filter f = {.kind = run->kind, .driver_name = run->driver_name, .backend = run->backend};
  if (only_earlier) {
    f.started_before = run->started_at;
    f.before_id = run->id; /* two runs in one millisecond: the lower id came first */
  }
  if (mdc_store_runs_each(s, &f, on_run, &l) != 0) {
    rp_like_free(out);
    return -1;
  }
  return 0;
}

void rp_like_free(rp_like *l) {
  free(l->ids);
  memset(l, 0, sizeof *l);
}

/* Writes at most len bytes; pure. */
void rp_like_what(const mdc_run_row *run, char *out, size_t len) {
  if (run->selection)
    snprintf(out, len, "%.32s runs of %.64s on %.32s over the same %u trace%s (selection %.8s)", run->kind,
             run->driver_name ? run->driver_name : "this driver", run->backend ? run->backend : "this backend",
             run->selection_n, run->selection_n == 1 ? "" : "s", run->selection);
  else
    snprintf(out, len, "%.32s runs of %.64s on %.32s (this run did not record its selection of traces)", run->kind,
             run->driver_name ? run->driver_name : "this driver", run->backend ? run->backend : "this backend");
}
