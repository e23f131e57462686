/* replay_lists.c - deqp-runner's lists for `mdc replay`: --skips FILE (traces never run, counted
 * as Skipped) and --flakes FILE (known flaky traces: a failure is reported as Flake, not
 * unexpected), and the run's selection (the hash of its set of case names, which makes two runs
 * comparable). Both files are read like a baseline (one entry a line, `#` comments, blank lines
 * ignored); an entry is a name, a path or a glob (fnmatch, '*' crossing '/', as --include).
 *
 * Skipped cases are settled before the scheduler starts: their store rows are written, and they
 * are set aside at the end of the case array while the others run (the scheduler sees only cases
 * to run), then put back in path order. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_id.h"
#include "mdc_int.h"
#include "replay_int.h"

/* Whether an entry of list names the case: its name or path, equal or matched as a glob. */
static int listed(const mdc_cli__baseline *l, const mdc_cli__case *c) {
  for (size_t i = 0; i < l->n; i++) {
    const char *e = l->names[i];
    if (!strcmp(e, c->name) || !strcmp(e, c->path) || fnmatch(e, c->name, 0) == 0 || fnmatch(e, c->path, 0) == 0)
      return 1;
  }
  return 0;
}

/* Loads o->skips and o->flakes (each may be NULL), marks the cases they list, and computes the
 * run's selection. 0, or -1 with a message on stderr (a file that cannot be read: a usage
 * error). */
int mdc_cli__rp_lists_apply(const mdc_cli__replay_opts *o, const char *who, mdc_cli__run *run) {
  const char *files[2] = {o->skips, o->flakes};
  for (int k = 0; k < 2; k++) {
    if (!files[k]) continue;
    mdc_cli__baseline l;
    char err[1024];
    if (mdc_cli__baseline_load(files[k], &l, err, sizeof err)) {
      /* The loader speaks of a baseline; the option is named instead. */
      fprintf(stderr, "%s: --%s: %s\n", who, k ? "flakes" : "skips", err);
      return -1;
    }
    size_t hits = 0;
    for (size_t i = 0; i < run->n; i++) {
      mdc_cli__case *c = &run->cases[i];
      if (!listed(&l, c)) continue;
      hits++;
      if (k) c->known_flaky = 1;
      else c->skipped = 1;
    }
    if (!hits && l.n && !o->quiet)
      fprintf(stderr, "%s: warning: --%s %s lists %zu entr%s, which name%s no trace of this run\n", who,
              k ? "flakes" : "skips", files[k], l.n, l.n == 1 ? "y" : "ies", l.n == 1 ? "s" : "");
    mdc_cli__baseline_free(&l);
  }
  const char **names = malloc((run->n ? run->n : 1) * sizeof *names);
  if (!names) {
    fprintf(stderr, "%s: out of memory\n", who);
    return -1;
  }
  for (size_t i = 0; i < run->n; i++) names[i] = run->cases[i].name;
  size_t n = 0;
  int rc = mdc_cli__selection_hash(names, run->n, run->selection, &n);
  free(names);
  run->selection_n = (uint32_t)n;
  if (rc) fprintf(stderr, "%s: out of memory\n", who);
  return rc;
}

/* Settles the skipped cases (Skipped, stored when there is a store) and sets them aside: on
 * return run->cases[0 .. run->n) are the cases to run, and *set_aside holds what
 * mdc_cli__rp_skips_end needs to put the array back. A store that fails sets *store_ok = 0 (the
 * scheduler then starts nothing). -1 when out of memory. */
int mdc_cli__rp_skips_begin(mdc_cli__run *run, mdc_store *store, int64_t run_id, int *store_ok, const char *who,
                            mdc_cli__set_aside *set_aside) {
  memset(set_aside, 0, sizeof *set_aside);
  size_t n = run->n, skipped = 0;
  for (size_t i = 0; i < n; i++) skipped += run->cases[i].skipped;
  if (!skipped) return 0;
  size_t *from = malloc(n * sizeof *from);
  mdc_cli__case *v = malloc(n * sizeof *v);
  if (!from || !v) {
    free(from), free(v);
    return -1;
  }
  size_t k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n; i++)
      if ((size_t)run->cases[i].skipped == (size_t)pass) from[k] = i, v[k++] = run->cases[i];
  memcpy(run->cases, v, n * sizeof *v);
  free(v);
  for (size_t i = n - skipped; i < n; i++) {
    mdc_cli__case *c = &run->cases[i];
    snprintf(c->res.message, sizeof c->res.message, "listed in the skips file: never run");
    if (store && *store_ok && mdc_store_case_begin(store, run_id, c->name, c->path, &c->case_id) != 0) {
      fprintf(stderr, "%s: %s (stopping; results written so far are kept)\n", who, mdc_store_error(store));
      *store_ok = 0;
    }
    mdc_cli__rp_set_status(run, c, MDC_S_SKIPPED);
    mdc_cli__rp_store_case(store, store_ok, c, MDC_S_SKIPPED, who, 0);
  }
  run->n = n - skipped;
  set_aside->from = from;
  set_aside->n_all = n;
  return 0;
}

/* Puts the skipped cases back among the others, in the order make_cases gave (path order).
 * Call it after the scheduler ran and before anything drops unfinished cases. */
void mdc_cli__rp_skips_end(mdc_cli__run *run, mdc_cli__set_aside *set_aside) {
  if (!set_aside->from) return;
  size_t all = set_aside->n_all;
  mdc_cli__case *v = malloc(all * sizeof *v);
  if (v) { /* out of memory: the skipped cases stay at the end, in path order among themselves */
    for (size_t i = 0; i < all; i++) v[set_aside->from[i]] = run->cases[i];
    memcpy(run->cases, v, all * sizeof *v);
    free(v);
  }
  run->n = all;
  free(set_aside->from);
  memset(set_aside, 0, sizeof *set_aside);
}

/* A failure of a trace the --flakes file lists: reported as Flake (not unexpected), its message
 * saying so and keeping the failure. Any other status is returned as it is. */
mdc_status mdc_cli__rp_known_flaky(const mdc_cli__replay_opts *o, mdc_cli__case *c, mdc_status final) {
  if (!c->known_flaky || (final != MDC_S_FAIL && final != MDC_S_CRASH && final != MDC_S_TIMEOUT)) return final;
  char m[sizeof c->res.message];
  snprintf(m, sizeof m, "known flaky (listed in %s): %s: %.900s", o->flakes ? o->flakes : "--flakes",
           mdc_cli__status_name(final), c->res.message);
  snprintf(c->res.message, sizeof c->res.message, "%s", m);
  return MDC_S_FLAKE;
}
