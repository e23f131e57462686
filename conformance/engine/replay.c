/* replay.c - replays one trace (docs/conformance.md): reads it line by line, checks each line
 * on its own (op known, fields known at the reader's minor, expectations well formed), runs it
 * (a driver call through dispatch.c, a replayer event through events.c, a concurrent block
 * through block.c) and keeps the first verdict. After the first Fail nothing more runs, but the
 * rest of the file is still checked, so a broken trace is reported as one. */
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "reader_int.h"

/* ---- verdicts ---- */

/* Records the verdict (and, for a call, the driver's message). */
static void record_with(mdc__run *r, mdc_verdict verdict, const mdc__where *w, const char *msg,
                        const char *exp, const char *act, const char *drv_msg) {
  pthread_mutex_lock(&r->lock);
  if (r->v.verdict == MDC_PASS || (verdict == MDC_TRACE_ERROR && r->v.verdict != MDC_TRACE_ERROR)) {
    r->v.verdict = verdict;
    r->v.line = w->line;
    snprintf(r->v.event, sizeof r->v.event, "%s", w->op ? w->op : "");
    snprintf(r->v.message, sizeof r->v.message, "%s", msg);
    snprintf(r->v.expected, sizeof r->v.expected, "%s", exp ? exp : "");
    snprintf(r->v.actual, sizeof r->v.actual, "%s", act ? act : "");
    snprintf(r->v.driver_message, sizeof r->v.driver_message, "%s", drv_msg ? drv_msg : "");
  }
  pthread_mutex_unlock(&r->lock);
  atomic_store(&r->stop, 1);
}

void mdc__record(mdc__run *r, mdc_verdict verdict, const mdc__where *w, const char *msg,
                 const char *exp, const char *act) {
  record_with(r, verdict, w, msg, exp, act, NULL);
}

static int failv(mdc__run *r, mdc__where *w, const char *drv_msg, const char *exp, const char *act,
                 const char *fmt, va_list ap) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s:%u: %s: ", w->path, w->line, w->op);
  if (n >= 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  record_with(r, MDC_FAIL, w, msg, exp, act, drv_msg);
  if (mdc__verbose(r)) fprintf(mdc__verbose(r), "  FAIL %s\n", msg);
  return 1;
}

int mdc__fail(mdc__run *r, mdc__where *w, const char *exp, const char *act, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  failv(r, w, NULL, exp, act, fmt, ap);
  va_end(ap);
  return 1;
}

int mdc__fail_call(mdc__run *r, mdc__where *w, const char *drv_msg, const char *exp, const char *act,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  failv(r, w, drv_msg, exp, act, fmt, ap);
  va_end(ap);
  return 1;
}

int mdc__push(void *arrp, size_t *n, size_t *cap, void *item) {
  void ***arr = arrp;
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    void **p = realloc(*arr, c * sizeof *p);
    if (!p) return -1;
    *arr = p;
    *cap = c;
  }
  (*arr)[(*n)++] = item;
  return 0;
}

int mdc__run_keep_model(mdc__run *r, mdc__where *w, mdc__model *m) {
  pthread_mutex_lock(&r->lock);
  int bad = mdc__push(&r->models, &r->n_models, &r->cap_models, m);
  pthread_mutex_unlock(&r->lock);
  if (!bad) return 0;
  mdc__model_free(m);
  return mdc__terr(w, "out of memory");
}

/* ---- one line ---- */

/* Whether the header's `requires` lists cap. */
static int requires_has(const mdc__run *r, const char *cap) {
  size_t n = strlen(cap);
  for (const char *p = r->hdr.requires; (p = strstr(p, cap)) != NULL; p += n)
    if ((p == r->hdr.requires || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

/* Whether the event allocates a driver-managed buffer that may be made: an allocate whose
 * `expect` allows NONE. One that must fail (a bad handle, bad roles) is validation any driver
 * does, memory domains or not. */
static int may_allocate(const mdc__op *op, const mdc__expect *e) {
  return op->call && op->call->produces == MDC_OBJ_TOKEN && mdc__expect_allows(e, MD_NONE);
}

/* Whether key is one of the op's fields (besides op, expect and lane). */
static int op_has_key(const mdc__op *op, const char *key) {
  /* Fields of trace format 1.1 that any event may carry (mdc__outcome_fields_check judges them). */
  static const char *const v11[] = {"when", "id", "tally", "collect"};
  for (int i = 0; i < 4; i++)
    if (strcmp(key, v11[i]) == 0) return 1;
  if (op->call) {
    const mdc_call_desc *c = op->call;
    if (c->produces != MDC_OBJ_NONE && strcmp(key, "as") == 0) return 1;
    for (uint32_t i = 0; i < c->n_args; i++)
      if (strcmp(mdc_args[c->args[i].id].key, key) == 0) return 1;
    return 0;
  }
  for (int i = 0; i < 12 && op->event->keys[i]; i++)
    if (strcmp(op->event->keys[i], key) == 0) return 1;
  return 0;
}

int mdc__op_check(mdc__run *r, mdc__where *w, json_t *ev, int in_block, uint32_t lanes, mdc__op *out) {
  w->op = "trace";
  json_t *ov = json_object_get(ev, "op");
  if (!ov) return mdc__terr(w, "missing field 'op'");
  if (!json_is_string(ov)) return mdc__terr(w, "'op' must be a string");
  const char *name = json_string_value(ov);
  mdc__op op = {name, mdc_call_find(name), NULL};
  if (!op.call) op.event = mdc__event_find(name);
  if (!op.call && !op.event) {
    /* A newer minor may add ops; this reader cannot run them, and skipping one would pass a
     * trace whose meaning it does not know. */
    if (!r->strict) return mdc__terr(w, "unknown op '%s' (from trace format %d.%d)", name, r->hdr.major, r->hdr.minor);
    return mdc__terr(w, "unknown op '%s'", name);
  }
  op.name = op.call ? op.call->name : op.event->name;
  w->op = op.name;
  if (r->strict) {
    const char *key;
    json_t *v;
    json_object_foreach(ev, key, v) {
      int known = strcmp(key, "op") == 0 || (strcmp(key, "expect") == 0 && op.call) ||
                  (in_block && strcmp(key, "lane") == 0) || op_has_key(&op, key);
      if (!known) return mdc__terr(w, "unknown field '%s'", key);
    }
  }
  if (((op.event && (op.event->flags & MDC__EV_V11)) || (op.call && (op.call->flags & MDC_CALL_V11))) &&
      r->hdr.minor < 1)
    return mdc__terr(w, "'%s' needs trace format 1.1 (the header says 1.%d)", op.name, r->hdr.minor);
  /* An optional entry of md_driver (SPEC 9) exists only in the drivers that offer it: a trace
   * that calls one says so, and a driver without it gets NotSupported. */
  if (op.call && (op.call->flags & MDC_CALL_OPTIONAL) && !requires_has(r, "registered_pools"))
    return mdc__terr(w, "the trace calls %s (SPEC 9): its header's `requires` must list \"registered_pools\"",
                     op.name);
  if (mdc__outcome_fields_check(r, w, ev, &op)) return -1;
  mdc__expect e;
  if (mdc__expect_parse(w, op.call, ev, r->strict, &e)) return -1;
  /* A trace that allocates needs memory domains: from 1.1 it says so, so a driver without them
   * gets NotSupported for it instead of a Fail at its first allocate. A 1.0 trace was never
   * asked to: its need was inferred before it ran (infer_requires). */
  if (may_allocate(&op, &e) && r->hdr.minor >= MDC__MINOR_DECLARES && !requires_has(r, "memory_domains"))
    return mdc__terr(w, "the trace allocates driver-managed buffers: its header's `requires` must list "
                        "\"memory_domains\" (trace format 1.%d; only a 1.0 trace's is inferred)", r->hdr.minor);
  unsigned in_block_ok = op.call ? op.call->flags & MDC_CALL_IN_BLOCK : op.event->flags & MDC__EV_IN_BLOCK;
  if (in_block) {
    if (!in_block_ok) return mdc__terr(w, "not allowed inside a concurrent block");
    int64_t lane;
    if (mdc__get_int(w, ev, "lane", 1, 0, 0, (int64_t)lanes - 1, &lane)) return -1;
  } else if (json_object_get(ev, "lane")) {
    return mdc__terr(w, "'lane' outside a concurrent block");
  }
  *out = op;
  return 0;
}

int mdc__op_exec(mdc__run *r, mdc__where *w, const mdc__op *op, json_t *ev) {
  int holds;
  if (mdc__when_holds(r, w, ev, &holds)) return -1;
  if (!holds) {
    if (r->opts->verbose) fprintf(r->opts->verbose, "%s:%u: %s skipped ('when' does not hold)\n", w->path, w->line, op->name);
    atomic_fetch_add(&r->skipped, 1);
    /* Its names exist, unproduced, so later `when`s can ask about them. */
    mdc__name *e;
    const char *as = json_string_value(json_object_get(ev, "as"));
    const char *id = json_string_value(json_object_get(ev, "id"));
    if (op->call && as && op->call->produces != MDC_OBJ_NONE &&
        mdc__names_declare(w, &r->names, "as", as, op->call->produces, &e))
      return -1;
    if (op->call && id && mdc__names_declare(w, &r->names, "id", id, MDC_OBJ_OUTCOME, &e)) return -1;
    return 0;
  }
  atomic_fetch_add(&r->events, 1);
  const mdc_trace_opts *o = r->opts;
  if (o->line) *o->line = w->line;
  if (o->op && o->op_len) {
    size_t i = 0;
    for (; op->name[i] && i + 1 < o->op_len; i++) o->op[i] = op->name[i];
    o->op[i] = '\0';
  }
  if (o->verbose) {
    char *args = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(o->verbose, "%s:%u: %s %s\n", w->path, w->line, op->name, args ? args : "");
    free(args);
  }
  if (op->call) return mdc__call_run(r, w, op->call, ev);
  if (!op->event->run) return mdc__terr(w, "internal: '%s' is not run on its own", op->name);
  return op->event->run(r, w, ev);
}

/* ---- what a 1.0 trace needs: inferred from what it does ---- */

/* Trace format 1.0 did not ask a trace to list the capabilities it needs; 1.1 does (a trace
 * error otherwise, mdc__op_check). A 1.0 trace reads with 1.0's rules: before it runs, its
 * lines are read once more and what 1.1 would have demanded it list is inferred, then judged
 * with its `requires` after the first open_device, exactly as if listed. The one such need a
 * 1.0 trace can have: an allocate that may succeed (may_allocate), anywhere in the trace,
 * concurrent blocks included, needs memory_domains. (registered_pools goes with register_memory
 * and unregister_memory, which are 1.1: a 1.0 trace that calls them is a trace error already.)
 * The pass stops at the first such allocate. A line it cannot read or check is skipped: the
 * replay reports it where it stands. */
static void infer_requires(mdc__run *r) {
  if (r->hdr.minor >= MDC__MINOR_DECLARES || requires_has(r, "memory_domains")) return;
  mdc__reader rd;
  mdc__where w = {.path = r->path};
  if (mdc__reader_open(&rd, r->path, r->opts->bytes, r->opts->n_bytes, &w)) return;
  json_t *ev = NULL;
  int got = mdc__reader_next(&rd, &w, &ev);   /* the header */
  while (got > 0) {
    json_decref(ev);
    if ((got = mdc__reader_next(&rd, &w, &ev)) <= 0) break;
    const char *name = json_string_value(json_object_get(ev, "op"));
    mdc__op op = {name, name ? mdc_call_find(name) : NULL, NULL};
    mdc__expect e;
    if (op.call && mdc__expect_parse(&w, op.call, ev, r->strict, &e) == 0 && may_allocate(&op, &e)) {
      r->inferred[r->n_inferred].cap = "memory_domains";
      r->inferred[r->n_inferred++].line = w.line;
      break;
    }
  }
  json_decref(ev);
  mdc__reader_close(&rd);
}

/* ---- the run ---- */

static void init_sodium(void) {
  if (sodium_init() < 0) { /* crypto_hash_sha256 works without it; nothing to do */
  }
}

mdc_verdict mdc_trace_run(const md_driver *drv, const char *path, const char *config,
                          mdc_result *out) {
  mdc_trace_opts o = {.config = config};
  return mdc_trace_run_opts(drv, path, &o, out);
}

mdc_verdict mdc_trace_run_opts(const md_driver *drv, const char *path, const mdc_trace_opts *opts,
                               mdc_result *out) {
  static const mdc_trace_opts none = {0};
  if (!opts) opts = &none;
  const char *config = opts->config;
  memset(out, 0, sizeof *out);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_sodium);
  mdc__run r;
  memset(&r, 0, sizeof r);
  r.drv = drv;
  r.path = path;
  r.config = config && *config ? config : NULL;
  r.opts = opts;
  pthread_mutex_init(&r.lock, NULL);
  mdc__names_init(&r.names);
  mdc__where w = {.path = path, .line = 0, .op = "trace"};
  mdc__reader rd;
  json_t *ev = NULL;
  if (!drv) {
    mdc__terr(&w, "no driver");
    mdc__record(&r, MDC_TRACE_ERROR, &w, w.msg, NULL, NULL);
    goto done;
  }
  if (mdc__reader_open(&rd, path, opts->bytes, opts->n_bytes, &w)) {
    mdc__record(&r, MDC_TRACE_ERROR, &w, w.msg, NULL, NULL);
    goto done;
  }
  int got = mdc__reader_next(&rd, &w, &ev);
  if (got == 0) {
    w.op = "header";
    w.line = 1;
    mdc__terr(&w, "no header: the trace is empty");
  }
  if (got <= 0 || mdc__header_parse(&w, ev, &r.hdr)) {
    mdc__record(&r, MDC_TRACE_ERROR, &w, w.msg, NULL, NULL);
    goto close;
  }
  json_decref(ev);
  ev = NULL;
  r.strict = r.hdr.minor <= MDC_TRACE_MINOR;
  infer_requires(&r);
  int terr = 0;
  for (;;) {
    got = mdc__reader_next(&rd, &w, &ev);
    if (got <= 0) break;
    mdc__op op;
    int rc = mdc__op_check(&r, &w, ev, 0, 0, &op);
    unsigned marker = rc == 0 && op.event ? op.event->flags & (MDC__EV_BLOCK_START | MDC__EV_BLOCK_END) : 0;
    if (marker & MDC__EV_BLOCK_START) {
      rc = mdc__block_run(&r, &rd, &w, ev);
    } else if (marker & MDC__EV_BLOCK_END) {
      rc = mdc__terr(&w, "end_concurrent without a concurrent block");
    } else if (rc == 0 && !atomic_load(&r.stop)) {
      rc = mdc__op_exec(&r, &w, &op, ev);
    }
    json_decref(ev);
    ev = NULL;
    if (rc < 0) {
      terr = 1;
      break;
    }
  }
  if (got < 0 || terr) mdc__record(&r, MDC_TRACE_ERROR, &w, w.msg, NULL, NULL);
close:
  json_decref(ev);
  mdc__reader_close(&rd);
done:
  if (drv) mdc__close_leftovers(&r);
  mdc__tallies_free(&r);
  mdc__names_free(&r.names);
  for (size_t i = 0; i < r.n_models; i++) mdc__model_free(r.models[i]);
  free(r.models);
  pthread_mutex_destroy(&r.lock);
  out->verdict = r.v.verdict;
  out->line = r.v.line;
  out->events = atomic_load(&r.events);
  snprintf(out->message, sizeof out->message, "%s", r.v.message);
  snprintf(out->expected, sizeof out->expected, "%s", r.v.expected);
  snprintf(out->actual, sizeof out->actual, "%s", r.v.actual);
  snprintf(out->event, sizeof out->event, "%s", r.v.event);
  snprintf(out->driver_message, sizeof out->driver_message, "%s", r.v.driver_message);
  snprintf(out->advisory, sizeof out->advisory, "%s", r.advisory);
  out->skipped = atomic_load(&r.skipped);
  if (out->verdict == MDC_FAIL) snprintf(out->rule, sizeof out->rule, "%.511s", r.hdr.rules);
  return out->verdict;
}
