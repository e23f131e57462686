/* reduce.c - `mdc reduce`: shrinks a trace that fails on a driver to a small trace that still
 * fails the same way (docs/mdc-cli.md, "mdc reduce").
 *
 * The trace is read into units: one event, or one concurrent block whole. Delta debugging (ddmin,
 * complements of ever smaller chunks, then one unit at a time) removes units while the failure
 * stays; every candidate keeps the trace's names whole: a unit that uses a name (a handle, a
 * model, a memory, a tally, a `when` condition's call) is dropped with the units that define it.
 * Then what is left is simplified: a concurrent block's `repeat` down to 1, generated payloads to
 * zeros, literal handles to 0 — each kept only when the failure stays. Every candidate runs in a
 * child like any case (crash- and hang-safe, the case timeout), its bytes handed to the engine
 * (no temporary trace files); "the same way" is the same status (Fail, Crash, Timeout), the same
 * op, and the same expected/actual with numbers masked (a Crash: the same signal). A flaky
 * failure is judged by --replays N: a candidate keeps it when any replay shows it. The output is
 * written to a temporary file beside --out and renamed into place at the end, so a failed or
 * interrupted reduction leaves no half-written trace. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "reduce_int.h"

/* ---- the trace as units -------------------------------------------------------------------- */


static int push_name(char ***v, size_t *n, const char *s) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*v)[i], s)) return 0;
  char **nv = realloc(*v, (*n + 1) * sizeof **v);
  if (!nv) return -1;
  *v = nv;
  if (!(nv[*n] = strdup(s))) return -1;
  (*n)++;
  return 0;
}

/* Keys whose string value is never a name of the trace. */
static int not_a_name_key(const char *k) {
  static const char *const keys[] = {"op", "type", "lifetime", "kind", "status", "prot", "message",
                                     "description", "timing", "name", "str", "config", "backend", NULL};
  for (int i = 0; keys[i]; i++)
    if (!strcmp(k, keys[i])) return 1;
  return 0;
}

/* Every string of v under a key that may hold a name, as a candidate use (filtered later by the
 * names the trace defines). */
static int collect_strings(json_t *v, const char *key, char ***out, size_t *n) {
  if (json_is_string(v)) return key && not_a_name_key(key) ? 0 : push_name(out, n, json_string_value(v));
  if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (collect_strings(x, key, out, n)) return -1;
    return 0;
  }
  if (json_is_object(v)) {
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
      if (!key && (!strcmp(k, "as") || !strcmp(k, "id") || !strcmp(k, "collect"))) continue;
      if (!key && !strcmp(k, "tally") && !json_object_get(v, "exactly") && !json_object_get(v, "at_least") &&
          !json_object_get(v, "at_most"))
        continue; /* a call's tally adds to the count: a definition; expect_tally's is a use */
      if (collect_strings(x, k, out, n)) return -1;
    }
  }
  return 0;
}

static int event_names(ev *e) {
  static const char *const def_keys[] = {"as", "id", "collect", NULL};
  for (int i = 0; def_keys[i]; i++) {
    json_t *d = json_object_get(e->obj, def_keys[i]);
    if (json_is_string(d) && push_name(&e->defs, &e->n_defs, json_string_value(d))) return -1;
  }
  json_t *t = json_object_get(e->obj, "tally");
  const char *op = json_string_value(json_object_get(e->obj, "op"));
  if (json_is_string(t) && !(op && !strcmp(op, "expect_tally")) &&
      push_name(&e->defs, &e->n_defs, json_string_value(t)))
    return -1;
  return collect_strings(e->obj, NULL, &e->uses, &e->n_uses);
}

static void trace_free(trace *t) {
  for (size_t i = 0; i < t->n_evs; i++) {
    json_decref(t->evs[i].obj);
    for (size_t k = 0; k < t->evs[i].n_defs; k++) free(t->evs[i].defs[k]);
    for (size_t k = 0; k < t->evs[i].n_uses; k++) free(t->evs[i].uses[k]);
    free(t->evs[i].defs), free(t->evs[i].uses), free(t->evs[i].def_ids), free(t->evs[i].use_ids);
  }
  free(t->evs), free(t->units), free(t->header_comment), free(t->names), free(t->defined);
  json_decref(t->header);
  memset(t, 0, sizeof *t);
}

static int index_names(trace *t);

/* Reads path into *t: 0, or -1 with the reason in err. Comments and blank lines are dropped. */
static int trace_read(const char *path, trace *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->path = path;
  FILE *f = fopen(path, "re");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0, depth_start = 0;
  int in_block = 0, rc = -1;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    const char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') continue;
    json_error_t je;
    json_t *o = json_loads(p, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
      snprintf(err, errlen, "%s:%zu: not a JSON object: %s", path, lineno, o ? "another value" : je.text);
      json_decref(o);
      goto out;
    }
    if (!t->header) {
      t->header = o;
      continue;
    }
    ev *nv = realloc(t->evs, (t->n_evs + 1) * sizeof *nv);
    unit *nu = realloc(t->units, (t->n_evs + 1) * sizeof *nu);
    if (nv) t->evs = nv;
    if (nu) t->units = nu;
    if (!nv || !nu) {
      json_decref(o);
      snprintf(err, errlen, "out of memory");
      goto out;
    }
    ev *e = &t->evs[t->n_evs++];
    memset(e, 0, sizeof *e);
    e->obj = o;
    if (event_names(e)) {
      snprintf(err, errlen, "out of memory");
      goto out;
    }
    const char *op = json_string_value(json_object_get(o, "op"));
    if (op && !strcmp(op, "concurrent") && !in_block) {
      in_block = 1;
      depth_start = t->n_evs - 1;
    } else if (op && !strcmp(op, "end_concurrent") && in_block) {
      in_block = 0;
      t->units[t->n_units++] = (unit){depth_start, t->n_evs - 1};
    } else if (!in_block) {
      t->units[t->n_units++] = (unit){t->n_evs - 1, t->n_evs - 1};
    }
  }
  if (!t->header) {
    snprintf(err, errlen, "%s: no header line (an empty trace)", path);
    goto out;
  }
  if (in_block) {
    snprintf(err, errlen, "%s: a concurrent block that never ends", path);
    goto out;
  }
  if (index_names(t)) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  rc = 0;
out:
  free(line);
  fclose(f);
  return rc;
}

/* ---- candidates ------------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The index of name in t->names, or (size_t)-1 when no event defines it. */
static size_t name_id(const trace *t, const char *name) {
  char *const *hit = t->n_names ? bsearch(&name, t->names, t->n_names, sizeof *t->names, cmp_str) : NULL;
  return hit ? (size_t)(hit - t->names) : (size_t)-1;
}

/* Names as indexes, once: closure then runs in time linear in the uses, not quadratic in the
 * events (a long recorded workload is thousands of candidates). 0, or -1 (out of memory). */
static int index_names(trace *t) {
  size_t total = 0;
  for (size_t i = 0; i < t->n_evs; i++) total += t->evs[i].n_defs;
  t->names = malloc((total ? total : 1) * sizeof *t->names);
  if (!t->names) return -1;
  for (size_t i = 0; i < t->n_evs; i++)
    for (size_t k = 0; k < t->evs[i].n_defs; k++) t->names[t->n_names++] = t->evs[i].defs[k];
  qsort(t->names, t->n_names, sizeof *t->names, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < t->n_names; i++)
    if (!u || strcmp(t->names[u - 1], t->names[i])) t->names[u++] = t->names[i];
  t->n_names = u;
  if (!(t->defined = calloc(u ? u : 1, 1))) return -1;
  for (size_t i = 0; i < t->n_evs; i++) {
    ev *e = &t->evs[i];
    e->def_ids = malloc((e->n_defs ? e->n_defs : 1) * sizeof *e->def_ids);
    e->use_ids = malloc((e->n_uses ? e->n_uses : 1) * sizeof *e->use_ids);
    if (!e->def_ids || !e->use_ids) return -1;
    for (size_t k = 0; k < e->n_defs; k++) e->def_ids[e->n_def_ids++] = name_id(t, e->defs[k]);
    for (size_t k = 0; k < e->n_uses; k++) {
      size_t id = name_id(t, e->uses[k]);
      if (id != (size_t)-1) e->use_ids[e->n_use_ids++] = id;
    }
  }
  return 0;
}

/* Whether unit u defines the name id itself (a concurrent block's lanes use what it makes). */
static int unit_defines(const trace *t, size_t u, size_t id) {
  for (size_t i = t->units[u].first; i <= t->units[u].last; i++)
    for (size_t d = 0; d < t->evs[i].n_def_ids; d++)
      if (t->evs[i].def_ids[d] == id) return 1;
  return 0;
}

/* keep[u] for each unit: a unit is kept when asked and every name it uses is defined by a kept
 * earlier unit (or by itself, for a block). Returns how many units stay. */
static size_t closure(const trace *t, const char *want, char *keep) {
  size_t n = 0;
  memset(t->defined, 0, t->n_names ? t->n_names : 1);
  for (size_t u = 0; u < t->n_units; u++) {
    keep[u] = want[u];
    for (size_t i = t->units[u].first; keep[u] && i <= t->units[u].last; i++) {
      const ev *e = &t->evs[i];
      for (size_t k = 0; keep[u] && k < e->n_use_ids; k++)
        if (!t->defined[e->use_ids[k]] && !unit_defines(t, u, e->use_ids[k])) keep[u] = 0;
    }
    if (!keep[u]) continue;
    n++;
    for (size_t i = t->units[u].first; i <= t->units[u].last; i++)
      for (size_t d = 0; d < t->evs[i].n_def_ids; d++) t->defined[t->evs[i].def_ids[d]] = 1;
  }
  return n;
}


static int buf_add(buf *b, const char *s, size_t len) {
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + len + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) return -1;
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
  return 0;
}

static int buf_json(buf *b, json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
  if (!s) return -1;
  int rc = buf_add(b, s, strlen(s)) || buf_add(b, "\n", 1);
  free(s);
  return rc;
}

/* The trace's text with the kept units (header first). 0, or -1 (out of memory). */
int mdc_cli__rd_render(const trace *t, const char *keep, const char *comment, buf *out) {
  out->n = 0;
  if (buf_add(out, "", 0)) return -1;
  if (comment && buf_add(out, comment, strlen(comment))) return -1;
  if (buf_json(out, t->header)) return -1;
  for (size_t u = 0; u < t->n_units; u++)
    for (size_t i = t->units[u].first; keep[u] && i <= t->units[u].last; i++)
      if (buf_json(out, t->evs[i].obj)) return -1;
  return 0;
}

/* ---- running a candidate ------------------------------------------------------------------- */


/* Digits masked: "expected 8 bytes, got 12" and "expected 4 bytes, got 6" are one failure. */
static void masked(const char *s, char *out, size_t len) {
  size_t o = 0;
  for (; *s && o + 2 < len; s++) {
    if (isdigit((unsigned char)*s)) {
      if (!o || out[o - 1] != '#') out[o++] = '#';
    } else {
      out[o++] = *s;
    }
  }
  out[o] = '\0';
}

/* What makes two failures one: status, op, expected/actual masked; a crash's signal. */
static void failure_key(mdc_status st, const mdc_result *r, int wait_status, char *out, size_t len) {
  char e[512], a[512];
  masked(r->expected, e, sizeof e);
  masked(r->actual, a, sizeof a);
  if (st == MDC_S_CRASH) {
    const char *sig = WIFSIGNALED(wait_status) ? sigabbrev_np(WTERMSIG(wait_status)) : NULL;
    snprintf(out, len, "Crash|%s|SIG%s", r->event, sig ? sig : "?");
  } else {
    snprintf(out, len, "%s|%.31s|%.500s|%.500s", mdc_cli__status_name(st), r->event, e, a);
  }
}

/* Runs the trace text once in a child; its status, result and wait status. */
static mdc_status run_once(const reducer *z, const char *driver, const char *bytes, size_t n, mdc_result *r,
                           int *wait_status) {
  memset(r, 0, sizeof *r);
  *wait_status = 0;
  mdc_cli__child ch;
  int in_parent = mdc_cli__child_start(&ch, sizeof *r, mdc_cli__now() + z->timeout_s);
  if (in_parent < 0) {
    fprintf(stderr, "%s: fork: %s\n", z->who, strerror(errno));
    exit(MDC_EXIT_USAGE);
  }
  if (!in_parent) {
    if (!z->verbose) {
      int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
    }
    mdc_result res;
    memset(&res, 0, sizeof res);
    void *dl = NULL;
    char err[512];
    const md_driver *d = mdc_driver_load(driver, &dl, err, sizeof err);
    if (!d) {
      res.verdict = MDC_TRACE_ERROR; /* not the failure being reduced */
      snprintf(res.message, sizeof res.message, "driver: %s", err);
    } else {
      mdc_trace_opts to = {.config = z->config, .line = &ch.page->line, .op = ch.page->op,
                           .op_len = sizeof ch.page->op, .bytes = bytes, .n_bytes = n};
      mdc_trace_run_opts(d, z->path, &to, &res); /* the path places sidecar blobs */
    }
    mdc_cli__child_report(&ch, &res, sizeof res);
    _exit(0);
  }
  mdc_cli__child_wait(&ch);
  size_t got = mdc_cli__child_end(&ch, r, sizeof *r);
  *wait_status = ch.status;
  if (ch.timed_out) {
    snprintf(r->event, sizeof r->event, "%s", ch.op);
    return MDC_S_TIMEOUT;
  }
  if (got == sizeof *r && WIFEXITED(ch.status) && WEXITSTATUS(ch.status) == 0) {
    r->message[sizeof r->message - 1] = r->expected[sizeof r->expected - 1] = r->actual[sizeof r->actual - 1] = 0;
    r->event[sizeof r->event - 1] = 0;
    switch (r->verdict) {
      case MDC_PASS: return MDC_S_PASS;
      case MDC_NOT_SUPPORTED: return MDC_S_NOT_SUPPORTED;
      case MDC_TRACE_ERROR: return MDC_S_TRACE_ERROR;
      default: return MDC_S_FAIL;
    }
  }
  snprintf(r->event, sizeof r->event, "%s", ch.op);
  return MDC_S_CRASH;
}

/* Whether the text fails the way being kept, in any of the replays, and (with the reference
 * check) passes on the reference driver: a candidate that the reference fails too is a broken
 * trace (a check whose values were zeroed, a call the trace no longer sets up), not the bug. */
int mdc_cli__rd_still_fails(reducer *z, const buf *b) {
  z->tests++;
  int shown = 0;
  for (int i = 0; i < z->replays && !shown; i++) {
    mdc_result r;
    int ws;
    mdc_status st = run_once(z, z->driver, b->p, b->n, &r, &ws);
    char key[sizeof z->want];
    failure_key(st, &r, ws, key, sizeof key);
    shown = st == z->want_status && !strcmp(key, z->want);
  }
  if (!shown || !z->ref_check) return shown;
  mdc_result r;
  int ws;
  return run_once(z, NULL, b->p, b->n, &r, &ws) == MDC_S_PASS;
}

void mdc_cli__rd_progress(reducer *z, const char *phase, size_t units, size_t of) {
  if (z->quiet) return;
  fprintf(stderr, "%s: %-10s %zu of %zu units kept, %lu candidates tried, %.1f s\n", z->who, phase, units, of,
          z->tests, mdc_cli__now() - z->t0);
}

/* ---- ddmin over units ------------------------------------------------------------------------ */

/* Tries want (closed over names) as the new current set; 1 when it keeps the failure. */
static int try_set(reducer *z, const trace *t, const char *want, char *cur, char *tmp, buf *b) {
  size_t n = closure(t, want, tmp);
  size_t now = 0;
  for (size_t u = 0; u < t->n_units; u++) now += cur[u] != 0;
  if (n >= now) return 0;
  if (mdc_cli__rd_render(t, tmp, NULL, b)) return 0;
  if (!mdc_cli__rd_still_fails(z, b)) return 0;
  memcpy(cur, tmp, t->n_units);
  return 1;
}

static void ddmin(reducer *z, const trace *t, char *cur, buf *b) {
  size_t nu = t->n_units;
  char *want = malloc(nu ? nu : 1), *tmp = malloc(nu ? nu : 1);
  size_t *idx = malloc((nu ? nu : 1) * sizeof *idx);
  if (!want || !tmp || !idx) goto out;
  size_t gran = 2;
  for (;;) {
    size_t m = 0;
    for (size_t u = 0; u < nu; u++)
      if (cur[u]) idx[m++] = u;
    if (m < 2 || gran > m) break;
    int reduced = 0;
    for (size_t c = 0; c < gran && !reduced; c++) {
      size_t lo = c * m / gran, hi = (c + 1) * m / gran;
      memcpy(want, cur, nu);
      for (size_t k = lo; k < hi; k++) want[idx[k]] = 0;
      reduced = try_set(z, t, want, cur, tmp, b);
    }
    size_t left = 0;
    for (size_t u = 0; u < nu; u++) left += cur[u] != 0;
    if (reduced) {
      gran = gran > 2 ? gran - 1 : 2;
      mdc_cli__rd_progress(z, "ddmin", left, nu);
    } else if (gran >= m) {
      break;
    } else {
      gran = gran * 2 < m ? gran * 2 : m;
    }
  }
  /* 1-minimal: no single unit can go. */
  for (int again = 1; again;) {
    again = 0;
    for (size_t u = 0; u < nu; u++) {
      if (!cur[u]) continue;
      memcpy(want, cur, nu);
      want[u] = 0;
      if (try_set(z, t, want, cur, tmp, b)) again = 1;
    }
  }
out:
  free(want), free(tmp), free(idx);
}

/* ---- the command ------------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc reduce TRACE [--driver SO] [--config STR] [--out FILE] [options]\n"
          "Shrinks a trace that fails on a driver to a small trace that fails the same way: delta\n"
          "debugging over its events (a concurrent block stays whole; an event goes with every\n"
          "event that uses a name it defines), then simpler values (repeat 1, zero payloads,\n"
          "literal handles 0; sidecar blobs inlined). Every candidate runs in a child with the\n"
          "case timeout.\n\n"
          "  --driver SO      driver shared object (default: the reference driver)\n"
          "  --config STR     open_device config merged into the trace's (default backend=auto)\n"
          "  --out FILE       the reduced trace (default: TRACE with .reduced.jsonl); written\n"
          "                   whole at the end, never half\n"
          "  --timeout S      seconds per candidate before it counts as a Timeout (default 30)\n"
          "  --replays N      replays per candidate; a flaky failure is kept when any shows it\n"
          "                   (default 1)\n"
          "  --no-reference   with --driver, a candidate need not pass on the reference driver\n"
          "                   (by default it must: the reduced trace shows the driver's bug, not\n"
          "                   a trace broken by the reduction)\n"
          "  --db FILE        record the reduced trace in this results store, on the case of the\n"
          "                   run given by --run (default: the latest replay) that has the trace's\n"
          "                   name: reports and `mdc results --groups` link its cause to it\n"
          "  --run R          that run: its uuid, a unique prefix, or latest\n"
          "  --quiet          no progress on stderr\n"
          "  -v, --verbose    the driver's own output on stderr\n\n"
          "exit status: 0 reduced trace written, 2 bad usage or input (a trace that passes, is a\n"
          "TraceError, or a driver that crashes even on a trace with no events)\n");
}

/* The original's failure, checked: 0, or MDC_EXIT_USAGE with the reason on stderr. */
static int judge_original(reducer *z, const trace *t, const char *keep, buf *b, int *shown) {
  if (mdc_cli__rd_render(t, keep, NULL, b)) return MDC_EXIT_USAGE;
  mdc_result r;
  int ws;
  mdc_status st = MDC_S_PASS;
  for (int i = 0; i < z->replays && (st == MDC_S_PASS || st == MDC_S_NOT_SUPPORTED); i++) {
    st = run_once(z, z->driver, b->p, b->n, &r, &ws);
    *shown = i + 1;
  }
  if (st == MDC_S_PASS || st == MDC_S_NOT_SUPPORTED || st == MDC_S_TRACE_ERROR) {
    char safe[1100];
    mdc_cli__terminal_safe(r.message, safe, sizeof safe);
    fprintf(stderr, "%s: %s: the trace %s on this driver%s%s: nothing to reduce\n", z->who, t->path,
            st == MDC_S_PASS ? "passes" : st == MDC_S_NOT_SUPPORTED ? "is NotSupported" : "is a TraceError",
            st == MDC_S_TRACE_ERROR ? ": " : "", st == MDC_S_TRACE_ERROR ? safe : "");
    return MDC_EXIT_USAGE;
  }
  z->want_status = st;
  failure_key(st, &r, ws, z->want, sizeof z->want);
  if (z->ref_check) {
    mdc_result rr;
    int wr;
    if (mdc_cli__rd_render(t, keep, NULL, b)) return MDC_EXIT_USAGE;
    if (run_once(z, NULL, b->p, b->n, &rr, &wr) != MDC_S_PASS) {
      if (!z->quiet)
        fprintf(stderr, "%s: %s: the reference driver does not pass it either: reducing without the "
                "reference check (a candidate need only fail the same way)\n", z->who, t->path);
      z->ref_check = 0;
    }
  }
  if (st == MDC_S_CRASH || st == MDC_S_TIMEOUT) {
    /* A driver that crashes or hangs on a trace with no events crashes on every run. */
    char *none = calloc(t->n_units ? t->n_units : 1, 1);
    if (!none || mdc_cli__rd_render(t, none, NULL, b)) {
      free(none);
      return MDC_EXIT_USAGE;
    }
    free(none);
    mdc_result r0;
    int ws0;
    mdc_status s0 = run_once(z, z->driver, b->p, b->n, &r0, &ws0);
    if (s0 == MDC_S_CRASH || s0 == MDC_S_TIMEOUT) {
      fprintf(stderr, "%s: %s: the driver %s even on a trace with no events (the header alone): every "
              "run fails the same way, nothing to reduce\n", z->who, t->path,
              s0 == MDC_S_CRASH ? "crashes" : "hangs");
      return MDC_EXIT_USAGE;
    }
  }
  return MDC_EXIT_OK;
}

/* Writes b to out through a temporary file beside it. 0, or -1 with the reason on stderr. */
static int write_out(const char *who, const char *out, const buf *b) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid()) >= (int)sizeof tmp) {
    fprintf(stderr, "%s: --out '%s': path too long\n", who, out);
    return -1;
  }
  FILE *f = fopen(tmp, "we");
  if (!f) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", who, tmp, strerror(errno));
    return -1;
  }
  int ok = fwrite(b->p, 1, b->n, f) == b->n;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, out) != 0) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", who, out, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* The header of the reduced trace: its name and description say what it was reduced from. */
static void mark_header(trace *t, size_t before, size_t after) {
  const char *n0 = json_string_value(json_object_get(t->header, "name"));
  const char *d0 = json_string_value(json_object_get(t->header, "description"));
  char *name = n0 ? strdup(n0) : NULL, *desc = d0 ? strdup(d0) : NULL, *n = NULL, *d = NULL;
  if (name && asprintf(&n, "%s/reduced", name) >= 0) json_object_set_new(t->header, "name", json_string(n));
  if (asprintf(&d, "reduced by mdc reduce from %s (%zu events -> %zu)%s%s", name ? name : t->path, before, after,
               desc ? ": " : "", desc ? desc : "") >= 0)
    json_object_set_new(t->header, "description", json_string(d));
  free(n), free(d), free(name), free(desc);
}

static int parse_args(int argc, char **argv, reducer *z, const char **path, const char **out, int *quiet) {
  static const struct option opts[] = {
      {"driver", required_argument, 0, 'd'}, {"config", required_argument, 0, 'c'},
      {"out", required_argument, 0, 'o'},    {"timeout", required_argument, 0, 't'},
      {"replays", required_argument, 0, 'r'}, {"quiet", no_argument, 0, 'q'},
      {"verbose", no_argument, 0, 'v'},      {"help", no_argument, 0, 'h'},
      {"no-reference", no_argument, 0, 'N'}, {"db", required_argument, 0, 'b'},
      {"run", required_argument, 0, 'R'},
      {0, 0, 0, 0}};
  int c;
  long v;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":hvq", opts, NULL)) != -1) {
    switch (c) {
      case 'd': z->driver = optarg; break;
      case 'c': z->config = optarg; break;
      case 'o': *out = optarg; break;
      case 'q': *quiet = 1; break;
      case 'v': z->verbose = 1; break;
      case 'N': z->ref_check = 0; break;
      case 'b': z->db = optarg; break;
      case 'R': z->run_ref = optarg; break;
      case 'h': usage(stdout); return -1;
      case 't':
        if (mdc_cli__parse_seconds(optarg, &z->timeout_s)) {
          fprintf(stderr, "mdc reduce: --timeout '%s': want seconds > 0 (at most 86400)\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'r':
        if (mdc_cli__parse_int(optarg, 1, 100, &v)) {
          fprintf(stderr, "mdc reduce: --replays '%s': want 1..100\n", optarg);
          return MDC_EXIT_USAGE;
        }
        z->replays = (int)v;
        break;
      case ':':
        fprintf(stderr, "mdc reduce: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc reduce: unknown option '%s' (see mdc reduce --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "mdc reduce: want exactly one TRACE (see mdc reduce --help)\n");
    return MDC_EXIT_USAGE;
  }
  *path = argv[optind];
  return 0;
}

/* Records out as the reduced reproducer of the case named name in the run --run of --db.
 * MDC_EXIT_OK, or MDC_EXIT_STORE / MDC_EXIT_USAGE with the reason on stderr (the trace is
 * written either way). */
static int record(const reducer *z, const char *name, const char *out) {
  char err[1024], abs[4096];
  mdc_store *s = NULL;
  if (mdc_store_open(z->db, &s, err, sizeof err)) {
    fprintf(stderr, "mdc reduce: %s (the reduced trace is written: %s)\n", err, out);
    return MDC_EXIT_STORE;
  }
  const char *path = realpath(out, abs) ? abs : out; /* a report elsewhere still finds it */
  mdc_run_row run;
  int rc = mdc_store_run_find(s, z->run_ref ? z->run_ref : "latest", z->run_ref ? NULL : "replay", &run);
  if (rc == 0) rc = mdc_store_case_set_reduced(s, run.id, name, path);
  if (rc == 0 && !z->quiet) fprintf(stderr, "mdc reduce: recorded in %s, run %.8s, case %s\n", z->db, run.uuid, name);
  if (rc != 0) fprintf(stderr, "mdc reduce: %s: %s (the reduced trace is written: %s)\n", z->db, mdc_store_error(s), out);
  mdc_store_run_row_free(&run);
  mdc_store_close(s);
  return rc == 0 ? MDC_EXIT_OK : rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
}

int mdc_cli__cmd_reduce(int argc, char **argv) {
  reducer z = {.config = "backend=auto", .who = "mdc reduce", .timeout_s = 30, .replays = 1};
  const char *path = NULL, *out = NULL;
  z.ref_check = 1;
  int rc = parse_args(argc, argv, &z, &path, &out, &z.quiet);
  if (rc) return rc < 0 ? MDC_EXIT_OK : rc;
  if (!z.driver) z.ref_check = 0; /* the reference is the driver under test */
  char out_default[4096];
  if (!out) {
    size_t len = strlen(path);
    if (len > 6 && !strcmp(path + len - 6, ".jsonl")) len -= 6;
    snprintf(out_default, sizeof out_default, "%.*s.reduced.jsonl", (int)len, path);
    out = out_default;
  }
  trace t;
  char err[1024];
  if (trace_read(path, &t, err, sizeof err)) {
    fprintf(stderr, "mdc reduce: %s\n", err);
    trace_free(&t);
    return MDC_EXIT_USAGE;
  }
  z.path = path;
  mdc_cli__become_subreaper();
  z.t0 = mdc_cli__now();
  char *cur = malloc(t.n_units ? t.n_units : 1);
  buf b = {0};
  int shown = 0;
  if (!cur) return MDC_EXIT_USAGE;
  memset(cur, 1, t.n_units);
  rc = judge_original(&z, &t, cur, &b, &shown);
  for (char *p = z.want; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' '; /* it goes into a comment line */
  if (rc == MDC_EXIT_OK) {
    if (!z.quiet) {
      char safe[1100];
      mdc_cli__terminal_safe(z.want, safe, sizeof safe);
      fprintf(stderr, "mdc reduce: %s: %zu events in %zu units; keeping the failure %s (shown by replay %d of %d)\n",
              path, t.n_evs, t.n_units, safe, shown, z.replays);
    }
    ddmin(&z, &t, cur, &b);
    mdc_cli__rd_simplify(&z, &t, cur, &b);
    size_t after = 0;
    for (size_t u = 0; u < t.n_units; u++)
      for (size_t i = t.units[u].first; cur[u] && i <= t.units[u].last; i++) after++;
    char *orig_name = json_is_string(json_object_get(t.header, "name"))
                          ? strdup(json_string_value(json_object_get(t.header, "name"))) : NULL;
    mark_header(&t, t.n_evs, after);
    for (size_t u = 0; u < t.n_units; u++)
      for (size_t i = t.units[u].first; cur[u] && i <= t.units[u].last; i++) mdc_cli__rd_inline_sidecars(&z, t.evs[i].obj);
    char comment[1400];
    snprintf(comment, sizeof comment, "# mdc reduce: from %s, %zu events -> %zu, on %s (config %s); the failure: %.1000s\n",
             path, t.n_evs, after, z.driver ? z.driver : "(reference driver)", z.config, z.want);
    if (mdc_cli__rd_render(&t, cur, comment, &b) || !mdc_cli__rd_still_fails(&z, &b)) {
      fprintf(stderr, "mdc reduce: the reduced trace no longer fails the same way (a flaky failure? try "
              "--replays N); nothing written\n");
      rc = MDC_EXIT_USAGE;
    } else if (write_out("mdc reduce", out, &b)) {
      rc = MDC_EXIT_USAGE;
    } else {
      printf("%s: %zu events -> %zu (%lu candidates, %.1f s)\n", out, t.n_evs, after, z.tests,
             mdc_cli__now() - z.t0);
      if (z.db) rc = record(&z, orig_name ? orig_name : path, out);
    }
    free(orig_name);
  }
  mdc_cli__reap_all();
  free(cur);
  free(b.p);
  trace_free(&t);
  return rc;
}
