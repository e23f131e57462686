/* differential.c - `mdc replay --differential A,B`: one trace replayed on two backends of the same
 * driver (the first open_device forced to backend=A, then to backend=B), everything each replay
 * observed (every call's status and shapes, every byte a `check` looked at; concurrent blocks
 * excepted) compared in order. A disagreement beyond the stated tolerance is a finding of its
 * own, even when both replays pass their traces' checks. Runs in the case's child. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md/status.h"
#include "mdc_int.h"

/* One observation, copied out of the engine's callback. */
typedef struct obs {
  uint32_t line;
  char op[32];
  int is_check;
  md_status status;
  uint32_t n_shapes;
  md_output_shape *shapes;
  char type[8];
  uint8_t *data;
  size_t len;
} obs;

typedef struct obs_list {
  obs *v;
  size_t n, cap;
  int oom;
} obs_list;

static void observe(void *ctx, const mdc_observation *o) {
  obs_list *l = ctx;
  if (l->oom) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    obs *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->oom = 1;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  obs *x = &l->v[l->n];
  memset(x, 0, sizeof *x);
  x->line = o->line;
  snprintf(x->op, sizeof x->op, "%s", o->op);
  x->is_check = o->is_check;
  x->status = o->status;
  if (o->n_shapes && o->shapes) {
    x->shapes = malloc(o->n_shapes * sizeof *x->shapes);
    if (!x->shapes) {
      l->oom = 1;
      return;
    }
    memcpy(x->shapes, o->shapes, o->n_shapes * sizeof *x->shapes);
    x->n_shapes = o->n_shapes;
  }
  if (o->is_check) {
    snprintf(x->type, sizeof x->type, "%s", o->type ? o->type : "u8");
    x->data = malloc(o->len ? o->len : 1);
    if (!x->data) {
      free(x->shapes);
      l->oom = 1;
      return;
    }
    memcpy(x->data, o->data, o->len);
    x->len = o->len;
  }
  l->n++;
}

static void list_free(obs_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].shapes);
    free(l->v[i].data);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* The agreement two backends must reach on f32 data: |a - b| <= ATOL + RTOL * |a| (the default
 * tolerance of a `check`), NaN agreeing with NaN; i32 and u8 exactly (docs/mdc-cli.md). */
#define DIFF_ATOL 1e-6
#define DIFF_RTOL 1e-5

/* First element where two check regions disagree, or -1; va and vb get the two values as text. */
static long first_disagreement(const obs *a, const obs *b, char *va, size_t la, char *vb, size_t lb) {
  int f32 = strcmp(a->type, "f32") == 0, i32 = strcmp(a->type, "i32") == 0;
  size_t sz = f32 || i32 ? 4 : 1, n = a->len / sz;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *pa = a->data + i * sz, *pb = b->data + i * sz;
    if (memcmp(pa, pb, sz) == 0) continue;
    if (f32) {
      float x, y;
      memcpy(&x, pa, 4);
      memcpy(&y, pb, 4);
      if ((isnan(x) && isnan(y)) || fabs((double)x - (double)y) <= DIFF_ATOL + DIFF_RTOL * fabs((double)x)) continue;
      snprintf(va, la, "%.9g", (double)x);
      snprintf(vb, lb, "%.9g", (double)y);
    } else if (i32) {
      int32_t x, y;
      memcpy(&x, pa, 4);
      memcpy(&y, pb, 4);
      snprintf(va, la, "%d", (int)x);
      snprintf(vb, lb, "%d", (int)y);
    } else {
      snprintf(va, la, "%u", (unsigned)*pa);
      snprintf(vb, lb, "%u", (unsigned)*pb);
    }
    return (long)i;
  }
  return -1;
}

static void dims_text(const md_output_shape *s, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  uint32_t r = s->rank > MD_MAX_RANK ? MD_MAX_RANK : s->rank;
  for (uint32_t k = 0; k < r && n < len; k++) n += (size_t)snprintf(buf + n, len - n, "%s%u", k ? "," : "", s->dims[k]);
  if (n < len) snprintf(buf + n, len - n, "]%s", s->is_sufficient ? "" : " insufficient");
}

/* Compares the two lists; 0 when they agree, else 1 with the first disagreement in *out. */
static int compare(const char *path, const char *na, const obs_list *a, const char *nb, const obs_list *b,
                   mdc_result *out) {
  char ea[160], eb[160];
  size_t n = a->n < b->n ? a->n : b->n;
  for (size_t i = 0; i < n; i++) {
    const obs *x = &a->v[i], *y = &b->v[i];
    uint32_t line = x->line;
    ea[0] = eb[0] = '\0';
    const char *what = NULL;
    if (x->line != y->line || strcmp(x->op, y->op) != 0) {
      snprintf(ea, sizeof ea, "line %u (%s)", x->line, x->op);
      snprintf(eb, sizeof eb, "line %u (%s)", y->line, y->op);
      what = "the replays took different paths";
      line = x->line < y->line ? x->line : y->line;
    } else if (!x->is_check && x->status != y->status) {
      snprintf(ea, sizeof ea, "%s", md_status_name(x->status));
      snprintf(eb, sizeof eb, "%s", md_status_name(y->status));
      what = "statuses differ";
    } else if (!x->is_check && x->n_shapes != y->n_shapes) {
      snprintf(ea, sizeof ea, "%u shapes", x->n_shapes);
      snprintf(eb, sizeof eb, "%u shapes", y->n_shapes);
      what = "shape counts differ";
    } else if (!x->is_check) {
      for (uint32_t k = 0; k < x->n_shapes && !what; k++) {
        const md_output_shape *p = &x->shapes[k], *q = &y->shapes[k];
        uint32_t r = p->rank > MD_MAX_RANK ? MD_MAX_RANK : p->rank;
        if (p->rank != q->rank || p->is_sufficient != q->is_sufficient || memcmp(p->dims, q->dims, r * sizeof p->dims[0])) {
          dims_text(p, ea, sizeof ea);
          dims_text(q, eb, sizeof eb);
          what = "shapes differ";
        }
      }
    } else if (x->len != y->len) {
      snprintf(ea, sizeof ea, "%zu bytes", x->len);
      snprintf(eb, sizeof eb, "%zu bytes", y->len);
      what = "check regions differ in size";
    } else {
      char va[48], vb[48];
      long at = first_disagreement(x, y, va, sizeof va, vb, sizeof vb);
      if (at >= 0) {
        snprintf(ea, sizeof ea, "%s[%ld] = %s", x->type, at, va);
        snprintf(eb, sizeof eb, "%s[%ld] = %s", y->type, at, vb);
        what = "values differ beyond the tolerance (f32: 1e-6 + 1e-5 * |a|; i32, u8: exact)";
      }
    }
    if (what) {
      out->verdict = MDC_FAIL;
      out->line = line;
      snprintf(out->event, sizeof out->event, "%s", x->op);
      snprintf(out->expected, sizeof out->expected, "%s: %s", na, ea);
      snprintf(out->actual, sizeof out->actual, "%s: %s", nb, eb);
      snprintf(out->message, sizeof out->message, "%s:%u: %s: differential %s vs %s: %s: %s %s, %s %s", path, line,
               x->op, na, nb, what, na, ea, nb, eb);
      return 1;
    }
  }
  if (a->n != b->n) {
    const obs *extra = a->n > b->n ? &a->v[n] : &b->v[n];
    out->verdict = MDC_FAIL;
    out->line = extra->line;
    snprintf(out->event, sizeof out->event, "%s", extra->op);
    snprintf(out->message, sizeof out->message, "%s:%u: %s: differential %s vs %s: only %s got this far (%zu vs %zu observations)",
             path, extra->line, extra->op, na, nb, a->n > b->n ? na : nb, a->n, b->n);
    return 1;
  }
  return 0;
}

mdc_verdict mdc_cli__differential(const md_driver *d, const char *path, const mdc_trace_opts *base,
                                  const char *na, const char *nb, mdc_result *out) {
  obs_list la = {0}, lb = {0};
  mdc_result ra, rb;
  char ova[64], ovb[64];
  snprintf(ova, sizeof ova, "backend=%s", na);
  snprintf(ovb, sizeof ovb, "backend=%s", nb);
  mdc_trace_opts oa = *base, ob = *base;
  oa.config_override = ova;
  oa.observe = observe;
  oa.observe_ctx = &la;
  ob.config_override = ovb;
  ob.observe = observe;
  ob.observe_ctx = &lb;
  mdc_trace_run_opts(d, path, &oa, &ra);
  mdc_trace_run_opts(d, path, &ob, &rb);
  memset(out, 0, sizeof *out);
  if (la.oom || lb.oom) {
    out->verdict = MDC_FAIL;
    snprintf(out->message, sizeof out->message, "%s: differential: out of memory keeping the observations", path);
  } else if (ra.verdict == MDC_TRACE_ERROR || rb.verdict == MDC_TRACE_ERROR) {
    *out = ra.verdict == MDC_TRACE_ERROR ? ra : rb;
  } else if (ra.verdict != MDC_PASS || rb.verdict != MDC_PASS) {
    /* The first that did not pass decides (NotSupported on one backend: not compared). */
    int first_a = ra.verdict != MDC_PASS;
    *out = first_a ? ra : rb;
    char m[sizeof out->message];
    snprintf(m, sizeof m, "on %s: %.900s", first_a ? na : nb, out->message);
    snprintf(out->message, sizeof out->message, "%s", m);
  } else if (!compare(path, na, &la, nb, &lb, out)) {
    *out = ra; /* both passed and agree */
  }
  out->events = ra.events + rb.events;
  list_free(&la);
  list_free(&lb);
  return out->verdict;
}
