/* replay.c - runs a trace's events against a driver and judges every call (docs/conformance.md).
 *
 * Each line is parsed and checked on its own (op known, fields known at the reader's minor,
 * expectations well formed) before it runs; after the first Fail nothing more runs, but the rest
 * of the file is still checked so that a broken trace is reported as one. A concurrent block is
 * the only thing held whole: its events run on one thread per lane, released together. */
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "md/config.h"
#include "reader_int.h"

/* ---- op table ---- */
enum { OP_ABI = 1, OP_IN_BLOCK = 2 };
typedef struct op_spec {
  const char *name;
  int flags;
  const char *keys[16];  /* besides op, expect, lane */
  const char *expect[4]; /* besides status, message */
} op_spec;

static const op_spec ops[] = {
    {"memory", 0, {"as", "kind", "size", "offset", "prot", "file_size", "data", "width", "height", "layers", "format"}, {0}},
    {"bad_memory", 0, {"as", "kind", "fd", "offset", "size", "prot", "width", "height", "layers", "format"}, {0}},
    {"fill", OP_IN_BLOCK, {"memory", "offset", "data"}, {0}},
    {"check", OP_IN_BLOCK, {"memory", "offset", "type", "data", "values", "atol", "rtol"}, {0}},
    {"model", 0, {"as", "operands", "operations", "inputs", "outputs", "operand_values", "pools"}, {0}},
    {"request", 0, {"as", "inputs", "outputs", "pools"}, {0}},
    {"open_device", OP_ABI, {"as", "config"}, {0}},
    {"close_device", OP_ABI, {"device"}, {0}},
    {"get_capabilities", OP_ABI | OP_IN_BLOCK, {"device"}, {"backend", "supports_memory_domains"}},
    {"get_supported_operations", OP_ABI | OP_IN_BLOCK, {"device", "model"}, {"supported"}},
    {"open_client", OP_ABI | OP_IN_BLOCK, {"device", "as"}, {0}},
    {"close_client", OP_ABI | OP_IN_BLOCK, {"device", "client"}, {"leaks"}},
    {"prepare_model", OP_ABI | OP_IN_BLOCK, {"device", "client", "model", "as"}, {0}},
    {"release_prepared_model", OP_ABI | OP_IN_BLOCK, {"device", "client", "prepared"}, {0}},
    {"allocate", OP_ABI | OP_IN_BLOCK, {"device", "client", "desc", "prepared", "input_roles", "output_roles", "as"}, {0}},
    {"copy_from", OP_ABI | OP_IN_BLOCK, {"device", "client", "token", "src", "dims"}, {0}},
    {"copy_to", OP_ABI | OP_IN_BLOCK, {"device", "client", "token", "dst"}, {0}},
    {"free_buffer", OP_ABI | OP_IN_BLOCK, {"device", "client", "token"}, {0}},
    {"execute", OP_ABI | OP_IN_BLOCK, {"device", "client", "prepared", "request", "n_shapes"}, {"shapes", "timing"}},
    {"execute_async", OP_ABI | OP_IN_BLOCK, {"device", "client", "prepared", "request", "as"}, {0}},
    {"wait_event", OP_ABI | OP_IN_BLOCK, {"device", "client", "event", "timeout_ns", "n_shapes"}, {"shapes", "timing"}},
    {"concurrent", 0, {"lanes", "repeat"}, {0}},
    {"end_concurrent", 0, {0}, {0}},
};

static const op_spec *op_find(const char *name) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, name) == 0) return &ops[i];
  return NULL;
}

/* ---- the run ---- */
typedef struct run {
  const md_driver *drv;
  const char *path;
  const char *config;
  int strict;
  mdc_trace_header hdr;
  mdc__names names;
  pthread_mutex_t lock;  /* verdict, device and client lists */
  mdc__verdict v;
  atomic_int stop;       /* something was recorded: run nothing more */
  atomic_uint events;
  mdc__name **devs;      /* every device and client the trace opened, in order */
  size_t n_devs, cap_devs;
  mdc__name **clients;
  size_t n_clients, cap_clients;
  int opened_device;     /* the first open_device (which gets --config) happened */
  int requires_checked;
  int in_block;          /* a concurrent block runs: omitted client/device are the snapshot's */
  size_t blk_nclients, blk_ndevs;
  uint64_t blk_client;
  md_device *blk_client_dev, *blk_dev;
  mdc__model **tmp;      /* inline models, kept until the end */
  size_t n_tmp, cap_tmp;
} run;

/* Records the first verdict other than Pass; a trace error replaces an earlier Fail (the trace
 * is broken, whatever it found). */
static void record(run *r, mdc_verdict verdict, uint32_t line, const char *msg, const char *exp,
                   const char *act) {
  pthread_mutex_lock(&r->lock);
  if (r->v.verdict == MDC_PASS || (verdict == MDC_TRACE_ERROR && r->v.verdict != MDC_TRACE_ERROR)) {
    r->v.verdict = verdict;
    r->v.line = line;
    snprintf(r->v.message, sizeof r->v.message, "%s", msg);
    snprintf(r->v.expected, sizeof r->v.expected, "%s", exp ? exp : "");
    snprintf(r->v.actual, sizeof r->v.actual, "%s", act ? act : "");
  }
  pthread_mutex_unlock(&r->lock);
  atomic_store(&r->stop, 1);
}

/* A Fail at the event of w: "path:line: op: <fmt>". Returns 1. */
__attribute__((format(printf, 5, 6))) static int fail(run *r, mdc__where *w, const char *exp,
                                                      const char *act, const char *fmt, ...) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s:%u: %s: ", w->path, w->line, w->op);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  record(r, MDC_FAIL, w->line, msg, exp, act);
  return 1;
}

static int push(void *arrp, size_t *n, size_t *cap, void *item) {
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

/* ---- expectations ---- */
typedef struct expect {
  md_status allowed[16];
  int n_allowed;
  const char *message;
  json_t *shapes, *leaks, *supported;
  const char *timing, *backend;
  int smd; /* supports_memory_domains: -1 not asked */
} expect;

static int expect_parse(mdc__where *w, const op_spec *spec, json_t *ev, int strict, expect *e) {
  memset(e, 0, sizeof *e);
  e->smd = -1;
  e->allowed[0] = MD_NONE;
  e->n_allowed = 1;
  json_t *x = json_object_get(ev, "expect");
  if (!x) return 0;
  if (!(spec->flags & OP_ABI)) return mdc__terr(w, "'expect' is only for driver calls");
  if (!json_is_object(x)) return mdc__terr(w, "'expect' must be an object");
  if (strict) {
    const char *key;
    json_t *v;
    json_object_foreach(x, key, v) {
      int known = strcmp(key, "status") == 0 || strcmp(key, "message") == 0;
      for (int i = 0; i < 4 && spec->expect[i]; i++)
        if (strcmp(spec->expect[i], key) == 0) known = 1;
      if (!known) return mdc__terr(w, "expect: unknown field '%s' for %s", key, spec->name);
    }
  }
  json_t *st = json_object_get(x, "status");
  if (st) {
    json_t *one = st;
    size_t n = 1;
    if (json_is_array(st)) {
      n = json_array_size(st);
      if (n == 0 || n > 16) return mdc__terr(w, "expect: 'status' lists 1 to 16 statuses");
    }
    e->n_allowed = 0;
    for (size_t i = 0; i < n; i++) {
      if (json_is_array(st)) one = json_array_get(st, i);
      if (!json_is_string(one)) return mdc__terr(w, "expect: 'status' takes status names");
      if (mdc__status_parse(json_string_value(one), &e->allowed[e->n_allowed++]))
        return mdc__terr(w, "expect: unknown status '%s' (NONE, INVALID_ARGUMENT, ...)",
                         json_string_value(one));
    }
  }
  if (mdc__get_str(w, x, "message", 0, &e->message) || mdc__get_str(w, x, "timing", 0, &e->timing) ||
      mdc__get_str(w, x, "backend", 0, &e->backend))
    return -1;
  if (e->timing && strcmp(e->timing, "measured") && strcmp(e->timing, "unmeasured"))
    return mdc__terr(w, "expect: 'timing' is \"measured\" or \"unmeasured\"");
  if (json_object_get(x, "supports_memory_domains") &&
      mdc__get_bool(w, x, "supports_memory_domains", 0, &e->smd))
    return -1;
  e->shapes = json_object_get(x, "shapes");
  if (e->shapes) {
    if (!json_is_array(e->shapes) || json_array_size(e->shapes) > MDC__MAX_SHAPES)
      return mdc__terr(w, "expect: 'shapes' must be an array");
    for (size_t i = 0; i < json_array_size(e->shapes); i++) {
      json_t *s = json_array_get(e->shapes, i);
      static const char *const keys[] = {"dims", "sufficient", NULL};
      if (mdc__check_keys(w, s, keys, strict, "expect shapes[]")) return -1;
      json_t *d = json_object_get(s, "dims");
      if (d && !json_is_null(d) && (!json_is_array(d) || json_array_size(d) > MD_MAX_RANK))
        return mdc__terr(w, "expect: shapes[%zu].dims must be an array of at most %u", i, MD_MAX_RANK);
      for (size_t k = 0; d && k < json_array_size(d); k++) {
        json_t *dv = json_array_get(d, k);
        if (!json_is_integer(dv) || json_integer_value(dv) < 0 || json_integer_value(dv) > UINT32_MAX)
          return mdc__terr(w, "expect: shapes[%zu].dims[%zu] must be an unsigned integer", i, k);
      }
      int suff;
      if (mdc__get_bool(w, s, "sufficient", 1, &suff)) return -1;
    }
  }
  e->leaks = json_object_get(x, "leaks");
  if (e->leaks) {
    static const char *const keys[] = {"buffers", "prepared_models", "events", "bytes", NULL};
    if (mdc__check_keys(w, e->leaks, keys, 1, "expect leaks")) return -1;
    uint64_t u;
    for (int i = 0; keys[i]; i++)
      if (mdc__get_u64(w, e->leaks, keys[i], 0, 0, UINT64_MAX, &u)) return -1;
  }
  e->supported = json_object_get(x, "supported");
  if (e->supported) {
    if (!json_is_array(e->supported)) return mdc__terr(w, "expect: 'supported' must be an array of 0/1");
    for (size_t i = 0; i < json_array_size(e->supported); i++) {
      json_t *s = json_array_get(e->supported, i);
      if (!json_is_boolean(s) && !(json_is_integer(s) && (json_integer_value(s) == 0 || json_integer_value(s) == 1)))
        return mdc__terr(w, "expect: supported[%zu] must be 0 or 1", i);
    }
  }
  return 0;
}

static void allowed_str(const expect *e, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < e->n_allowed && n < len; i++) {
    int k = snprintf(buf + n, len - n, "%s%s", i ? "|" : "", mdc__status_name(e->allowed[i]));
    if (k < 0) break;
    n += (size_t)k;
  }
}

/* The status and message parts of every call's judgement. 0: met, 1: Fail recorded. */
static int judge_status(run *r, mdc__where *w, const expect *e, md_status st, md_device *dev) {
  int ok = 0;
  for (int i = 0; i < e->n_allowed; i++)
    if (e->allowed[i] == st) ok = 1;
  const char *le = st != MD_NONE ? r->drv->last_error(dev) : "";
  if (!le) le = "(null)";
  if (!ok) {
    char exp[256];
    allowed_str(e, exp, sizeof exp);
    if (st != MD_NONE)
      return fail(r, w, exp, mdc__status_name(st), "status %s, expected %s (last_error: \"%s\")",
                  mdc__status_name(st), exp, le);
    return fail(r, w, exp, mdc__status_name(st), "status NONE, expected %s", exp);
  }
  if (st != MD_NONE && e->message && !strstr(le, e->message))
    return fail(r, w, e->message, le, "last_error \"%s\" does not contain \"%s\"", le, e->message);
  return 0;
}

static void dims_str(const uint32_t *d, uint32_t rank, char *buf, size_t len) {
  size_t n = 0;
  n += (size_t)snprintf(buf, len, "[");
  for (uint32_t i = 0; i < rank && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? ", " : "", d[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}

static int judge_outputs(run *r, mdc__where *w, const expect *e, md_status st,
                         const md_output_shape *sh, uint32_t n, const md_timing *tm) {
  char exp[512], act[512];
  if (st != MD_NONE && st != MD_OUTPUT_INSUFFICIENT_SIZE) {
    /* SPEC 4: every other failure leaves no shapes and no timing. */
    for (uint32_t i = 0; i < n; i++)
      if (sh[i].rank != 0)
        return fail(r, w, "rank 0", "rank != 0",
                    "on %s, shapes[%u] has rank %u (SPEC 4: a failure has no shapes)",
                    mdc__status_name(st), i, sh[i].rank);
    if (tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX) {
      snprintf(act, sizeof act, "on_device_ns %" PRIu64 ", in_driver_ns %" PRIu64, tm->on_device_ns,
               tm->in_driver_ns);
      return fail(r, w, "UINT64_MAX", act, "on %s, timing is %s (SPEC 4: a failure is unmeasured)",
                  mdc__status_name(st), act);
    }
  }
  if (e->shapes) {
    uint32_t ne = (uint32_t)json_array_size(e->shapes);
    if (ne != n)
      return fail(r, w, "", "", "expect lists %u shapes but the call returned %u (n_shapes)", ne, n);
    for (uint32_t i = 0; i < n; i++) {
      json_t *s = json_array_get(e->shapes, i), *d = json_object_get(s, "dims");
      int suff = 1;
      mdc__get_bool(w, s, "sufficient", 1, &suff);
      uint32_t want[MD_MAX_RANK] = {0}, rank = d && json_is_array(d) ? (uint32_t)json_array_size(d) : 0;
      for (uint32_t k = 0; k < rank; k++) want[k] = (uint32_t)json_integer_value(json_array_get(d, k));
      uint32_t got_rank = sh[i].rank > MD_MAX_RANK ? MD_MAX_RANK : sh[i].rank;
      int same = rank == sh[i].rank && memcmp(want, sh[i].dims, rank * sizeof want[0]) == 0 &&
                 (sh[i].is_sufficient != 0) == (suff != 0);
      if (!same) {
        char dw[160], dg[160];
        dims_str(want, rank, dw, sizeof dw);
        dims_str(sh[i].dims, got_rank, dg, sizeof dg);
        snprintf(exp, sizeof exp, "shapes[%u] = %s sufficient %d", i, dw, suff);
        snprintf(act, sizeof act, "shapes[%u] = %s%s sufficient %d", i, dg,
                 sh[i].rank > MD_MAX_RANK ? " (rank over 8)" : "", sh[i].is_sufficient);
        return fail(r, w, exp, act, "%s, expected %s", act, exp);
      }
    }
  }
  if (e->timing) {
    int measured = tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX;
    if (measured != (strcmp(e->timing, "measured") == 0)) {
      snprintf(act, sizeof act, "on_device_ns %" PRIu64 ", in_driver_ns %" PRIu64, tm->on_device_ns,
               tm->in_driver_ns);
      return fail(r, w, e->timing, act, "timing %s, expected %s", act, e->timing);
    }
  }
  return 0;
}

/* ---- argument resolution ---- */
static int get_client(run *r, mdc__where *w, json_t *ev, uint64_t *client, md_device **hint) {
  json_t *c = json_object_get(ev, "client");
  *hint = NULL;
  if (c) {
    if (json_is_string(c)) {
      mdc__name e;
      if (mdc__names_get(&r->names, json_string_value(c), &e) == 0 && e.bound) *hint = e.dev;
    }
    return mdc__resolve_handle(w, &r->names, c, "client", client);
  }
  if (r->in_block) {
    /* The clients open when the block started: what lanes open meanwhile does not change it. */
    if (r->blk_nclients != 1)
      return mdc__terr(w, "'client' must be named: %zu clients were open when the block started",
                       r->blk_nclients);
    *client = r->blk_client;
    *hint = r->blk_client_dev;
    return 0;
  }
  pthread_mutex_lock(&r->lock);
  size_t open = 0;
  mdc__name *only = NULL;
  for (size_t i = 0; i < r->n_clients; i++)
    if (!r->clients[i]->closed) {
      open++;
      only = r->clients[i];
    }
  if (open == 1) {
    *client = only->value;
    *hint = only->dev;
  }
  pthread_mutex_unlock(&r->lock);
  if (open != 1)
    return mdc__terr(w, "'client' must be named: %zu clients are open", open);
  return 0;
}

static int get_device(run *r, mdc__where *w, json_t *ev, md_device *hint, md_device **dev) {
  json_t *d = json_object_get(ev, "device");
  if (d) {
    if (json_is_object(d) && json_object_size(d) == 1 && json_object_get(d, "literal")) {
      uint64_t v;
      if (mdc__u64_value(w, json_object_get(d, "literal"), "device", &v)) return -1;
      if (v != 0) return mdc__terr(w, "'device': only {\"literal\": 0} (a NULL device) can be forged");
      *dev = NULL;
      return 0;
    }
    if (!json_is_string(d)) return mdc__terr(w, "'device' takes a device name");
    mdc__name e;
    if (mdc__names_get(&r->names, json_string_value(d), &e))
      return mdc__terr(w, "'device': no object named '%s'", json_string_value(d));
    if (e.kind != MDC__K_DEVICE)
      return mdc__terr(w, "'device': '%s' is a %s, not a device", e.name, mdc__kind_name(e.kind));
    if (!e.bound)
      return mdc__terr(w, "'device': '%s' was never produced (its call at line %u failed)", e.name, e.line);
    if (e.closed) return mdc__terr(w, "'device': '%s' is closed", e.name);
    *dev = e.dev;
    return 0;
  }
  if (hint) {
    *dev = hint;
    return 0;
  }
  if (r->in_block) {
    if (r->blk_ndevs != 1)
      return mdc__terr(w, "'device' must be named: %zu devices were open when the block started",
                       r->blk_ndevs);
    *dev = r->blk_dev;
    return 0;
  }
  pthread_mutex_lock(&r->lock);
  size_t open = 0;
  md_device *only = NULL;
  for (size_t i = 0; i < r->n_devs; i++)
    if (!r->devs[i]->closed) {
      open++;
      only = r->devs[i]->dev;
    }
  pthread_mutex_unlock(&r->lock);
  if (open != 1) return mdc__terr(w, "'device' must be named: %zu devices are open", open);
  *dev = only;
  return 0;
}

static int get_model(run *r, mdc__where *w, json_t *ev, const md_model **out) {
  json_t *m = json_object_get(ev, "model");
  if (!m) return mdc__terr(w, "missing field 'model'");
  if (json_is_string(m)) {
    mdc__name e;
    if (mdc__names_get(&r->names, json_string_value(m), &e) || !e.bound)
      return mdc__terr(w, "'model': no model named '%s'", json_string_value(m));
    if (e.kind != MDC__K_MODEL)
      return mdc__terr(w, "'model': '%s' is a %s, not a model", e.name, mdc__kind_name(e.kind));
    *out = &e.model->m;
    return 0;
  }
  if (!json_is_object(m)) return mdc__terr(w, "'model' takes a model name or an inline model");
  mdc__model *mm;
  if (mdc__model_build(w, &r->names, m, r->strict, &mm)) return -1;
  pthread_mutex_lock(&r->lock);
  int bad = push(&r->tmp, &r->n_tmp, &r->cap_tmp, mm);
  pthread_mutex_unlock(&r->lock);
  if (bad) {
    mdc__model_free(mm);
    return mdc__terr(w, "out of memory");
  }
  *out = &mm->m;
  return 0;
}

static int get_request(run *r, mdc__where *w, json_t *ev, mdc__arena *a, md_request *out) {
  json_t *q = json_object_get(ev, "request");
  if (!q) return mdc__terr(w, "missing field 'request'");
  if (json_is_string(q)) {
    mdc__name e;
    if (mdc__names_get(&r->names, json_string_value(q), &e) || !e.bound)
      return mdc__terr(w, "'request': no request named '%s'", json_string_value(q));
    if (e.kind != MDC__K_REQUEST)
      return mdc__terr(w, "'request': '%s' is a %s, not a request", e.name, mdc__kind_name(e.kind));
    q = e.request;
  } else if (!json_is_object(q)) {
    return mdc__terr(w, "'request' takes a request name or an inline request");
  }
  return mdc__request_build(w, &r->names, q, r->strict, 1, a, out);
}

static int declare_as(run *r, mdc__where *w, json_t *ev, mdc__kind kind, int required, mdc__name **out) {
  const char *as;
  *out = NULL;
  if (mdc__get_str(w, ev, "as", required, &as)) return -1;
  if (!as) return 0;
  return mdc__names_declare(w, &r->names, as, kind, out);
}

static int get_dims(mdc__where *w, mdc__arena *a, json_t *obj, const char *key, uint32_t *rank,
                    uint32_t **dims) {
  return mdc__get_u32_array(w, a, obj, key, MDC__MAX_DIMS, rank, dims);
}

static int get_roles(mdc__where *w, mdc__arena *a, json_t *ev, const char *key, int strict,
                     md_buffer_role **out, uint32_t *n) {
  json_t *arr = json_object_get(ev, key);
  *out = NULL;
  *n = 0;
  if (!arr || json_is_null(arr)) return 0;
  if (!json_is_array(arr) || json_array_size(arr) > MDC__MAX_ARRAY)
    return mdc__terr(w, "'%s' must be an array of {\"model\": i, \"io\": j, \"p\": 1.0}", key);
  size_t k = json_array_size(arr);
  md_buffer_role *roles = mdc__arena_alloc(a, sizeof *roles, k);
  if (!roles) return mdc__terr(w, "out of memory");
  for (size_t i = 0; i < k; i++) {
    json_t *o = json_array_get(arr, i);
    static const char *const keys[] = {"model", "io", "p", NULL};
    int64_t m, io;
    double p;
    if (mdc__check_keys(w, o, keys, strict, key) ||
        mdc__get_int(w, o, "model", 1, 0, 0, UINT32_MAX, &m) ||
        mdc__get_int(w, o, "io", 1, 0, 0, UINT32_MAX, &io) || mdc__get_num(w, o, "p", 1.0, &p))
      return -1;
    roles[i].model_index = (uint32_t)m;
    roles[i].io_index = (uint32_t)io;
    roles[i].probability = (float)p;
  }
  *out = roles;
  *n = (uint32_t)k;
  return 0;
}

/* ---- config merge: the trace's keys win, the replay's are added (md/config.h) ---- */
static char *merge_config(const char *trace, const char *cli) {
  size_t len = md_config_merge(trace, cli, NULL, 0) + 1;
  char *out = malloc(len);
  if (out) md_config_merge(trace, cli, out, len);
  return out;
}

/* ---- requires ---- */
static int check_requires(run *r, mdc__where *w, md_device *dev) {
  if (!r->hdr.requires[0]) return 0;
  md_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  md_status st = r->drv->get_capabilities(dev, &caps);
  if (st != MD_NONE)
    return fail(r, w, "NONE", mdc__status_name(st), "get_capabilities for 'requires' returned %s",
                mdc__status_name(st));
  caps.backend[sizeof caps.backend - 1] = '\0';
  char req[sizeof r->hdr.requires];
  snprintf(req, sizeof req, "%s", r->hdr.requires);
  for (char *save = NULL, *tok = strtok_r(req, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int met;
    if (strcmp(tok, "sim") == 0) met = strcmp(caps.backend, "sim") == 0;
    else if (strcmp(tok, "memory_domains") == 0) met = caps.supports_memory_domains != 0;
    else if (r->strict) {
      w->op = "header";
      return mdc__terr(w, "requires: unknown capability '%s' (sim, memory_domains)", tok);
    } else met = 0; /* a newer minor's capability this mdc cannot check */
    if (!met) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s:%u: %s: requires '%s', which this driver does not have", w->path,
               w->line, w->op, tok);
      record(r, MDC_NOT_SUPPORTED, w->line, msg, tok, caps.backend);
      return 1;
    }
  }
  return 0;
}

/* Marks a device or client closed. Called with r->lock held; `closed` is also read through
 * mdc__names_get (under the names lock) by other lanes, so it is written under that lock too. */
static void mark_closed(run *r, mdc__name *e) {
  pthread_mutex_lock(&r->names.lock);
  e->closed = 1;
  pthread_mutex_unlock(&r->names.lock);
}

/* An entry for an unnamed device or client, in no names table: line UINT32_MAX marks it as
 * the run's to free. */
static mdc__name *anon_name(mdc__kind kind) {
  mdc__name *e = calloc(1, sizeof *e);
  if (e) {
    e->kind = kind;
    e->line = UINT32_MAX;
  }
  return e;
}

/* ---- ABI calls ---- */
static int call_abi(run *r, mdc__where *w, const op_spec *spec, json_t *ev) {
  const md_driver *drv = r->drv;
  const char *op = spec->name;
  expect e;
  if (expect_parse(w, spec, ev, r->strict, &e)) return -1;
  mdc__arena a = {0};
  int rc = -1;
  md_device *dev = NULL, *hint = NULL;
  uint64_t client = 0;
  md_status st;
  mdc__name *as = NULL;

  if (strcmp(op, "open_device") == 0) {
    const char *cfg;
    if (mdc__get_str(w, ev, "config", 0, &cfg) || declare_as(r, w, ev, MDC__K_DEVICE, 0, &as)) goto out;
    char *merged = NULL;
    int first = !r->opened_device;
    r->opened_device = 1;
    if (first) {
      merged = merge_config(cfg, r->config);
      if (!merged) { mdc__terr(w, "out of memory"); goto out; }
    }
    st = drv->open_device(merged ? merged : cfg ? cfg : "", &dev);
    free(merged);
    if (st == MD_NONE && !dev) {
      rc = fail(r, w, "a device", "NULL", "open_device returned NONE but no device");
      goto out;
    }
    if (st == MD_NONE) {
      mdc__name *entry = as ? as : anon_name(MDC__K_DEVICE);
      if (entry) mdc__names_bind(&r->names, entry, (uint64_t)(uintptr_t)dev, dev, 0);
      pthread_mutex_lock(&r->lock);
      int bad = !entry || push(&r->devs, &r->n_devs, &r->cap_devs, entry);
      pthread_mutex_unlock(&r->lock);
      if (bad) {
        drv->close_device(dev);
        if (entry && !as) free(entry);
        else if (entry) entry->closed = 1;
        mdc__terr(w, "out of memory");
        goto out;
      }
    }
    if ((rc = judge_status(r, w, &e, st, NULL))) goto out;
    if (st == MD_NONE && !r->requires_checked) {
      r->requires_checked = 1;
      rc = check_requires(r, w, dev);
      goto out;
    }
    rc = 0;
    goto out;
  }

  if (strcmp(op, "close_device") == 0) {
    if (get_device(r, w, ev, NULL, &dev)) goto out;
    if (!dev) { mdc__terr(w, "'device': a NULL device cannot be closed"); goto out; }
    drv->close_device(dev);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n_devs; i++)
      if (r->devs[i]->dev == dev && !r->devs[i]->closed) mark_closed(r, r->devs[i]);
    for (size_t i = 0; i < r->n_clients; i++)
      if (r->clients[i]->dev == dev) mark_closed(r, r->clients[i]); /* closed with the device */
    pthread_mutex_unlock(&r->lock);
    rc = 0;
    goto out;
  }

  if (strcmp(op, "get_capabilities") == 0) {
    if (get_device(r, w, ev, NULL, &dev)) goto out;
    md_capabilities caps;
    memset(&caps, 0, sizeof caps);
    caps.struct_size = sizeof caps;
    st = drv->get_capabilities(dev, &caps);
    if ((rc = judge_status(r, w, &e, st, dev))) goto out;
    caps.backend[sizeof caps.backend - 1] = '\0';
    if (st == MD_NONE && e.backend && strcmp(e.backend, caps.backend) != 0) {
      rc = fail(r, w, e.backend, caps.backend, "backend \"%s\", expected \"%s\"", caps.backend, e.backend);
      goto out;
    }
    if (st == MD_NONE && e.smd >= 0 && (caps.supports_memory_domains != 0) != e.smd) {
      rc = fail(r, w, e.smd ? "1" : "0", caps.supports_memory_domains ? "1" : "0",
                "supports_memory_domains %u, expected %d", caps.supports_memory_domains, e.smd);
      goto out;
    }
    rc = 0;
    goto out;
  }

  if (strcmp(op, "get_supported_operations") == 0) {
    const md_model *m;
    if (get_device(r, w, ev, NULL, &dev) || get_model(r, w, ev, &m)) goto out;
    uint8_t *sup = mdc__arena_alloc(&a, 1, m->n_operations ? m->n_operations : 1);
    if (!sup) { mdc__terr(w, "out of memory"); goto out; }
    memset(sup, 0xAA, m->n_operations ? m->n_operations : 1);
    if (e.supported && json_array_size(e.supported) != m->n_operations) {
      mdc__terr(w, "expect: 'supported' has %zu entries, the model %u operations",
                json_array_size(e.supported), m->n_operations);
      goto out;
    }
    st = drv->get_supported_operations(dev, m, sup);
    if ((rc = judge_status(r, w, &e, st, dev))) goto out;
    for (uint32_t i = 0; st == MD_NONE && e.supported && i < m->n_operations; i++) {
      json_t *s = json_array_get(e.supported, i);
      int want = json_is_boolean(s) ? json_is_true(s) : (int)json_integer_value(s);
      if ((sup[i] != 0) != want) {
        char ex[64], ac[64];
        snprintf(ex, sizeof ex, "supported[%u] = %d", i, want);
        snprintf(ac, sizeof ac, "supported[%u] = %u", i, sup[i]);
        rc = fail(r, w, ex, ac, "%s, expected %s", ac, ex);
        goto out;
      }
    }
    rc = 0;
    goto out;
  }

  if (strcmp(op, "open_client") == 0) {
    if (get_device(r, w, ev, NULL, &dev) || declare_as(r, w, ev, MDC__K_CLIENT, 0, &as)) goto out;
    md_handle h = 0;
    st = drv->open_client(dev, &h);
    if (st == MD_NONE) {
      /* named or not, a client the trace opened is closed at the end if it is still open */
      mdc__name *entry = as ? as : anon_name(MDC__K_CLIENT);
      if (entry) mdc__names_bind(&r->names, entry, h, dev, 0);
      pthread_mutex_lock(&r->lock);
      int bad = !entry || push(&r->clients, &r->n_clients, &r->cap_clients, entry);
      pthread_mutex_unlock(&r->lock);
      if (bad) {
        if (entry && !as) free(entry);
        mdc__terr(w, "out of memory");
        goto out;
      }
    }
    rc = judge_status(r, w, &e, st, dev);
    goto out;
  }

  /* Every other call takes a client. */
  if (get_client(r, w, ev, &client, &hint) || get_device(r, w, ev, hint, &dev)) goto out;

  if (strcmp(op, "close_client") == 0) {
    md_leak_report lk;
    memset(&lk, 0xA5, sizeof lk);
    st = drv->close_client(dev, client, &lk);
    if (st == MD_NONE) {
      pthread_mutex_lock(&r->lock);
      for (size_t i = 0; i < r->n_clients; i++)
        if (r->clients[i]->value == client && r->clients[i]->dev == dev) mark_closed(r, r->clients[i]);
      pthread_mutex_unlock(&r->lock);
    }
    if ((rc = judge_status(r, w, &e, st, dev))) goto out;
    if (st == MD_NONE && e.leaks) {
      static const char *const keys[] = {"buffers", "prepared_models", "events", "bytes"};
      uint64_t got[4] = {lk.buffers, lk.prepared_models, lk.events, lk.bytes};
      for (int i = 0; i < 4; i++) {
        uint64_t want;
        if (!json_object_get(e.leaks, keys[i])) continue;
        mdc__get_u64(w, e.leaks, keys[i], 0, 0, UINT64_MAX, &want);
        if (want != got[i]) {
          char ex[64], ac[64];
          snprintf(ex, sizeof ex, "leaks.%s = %" PRIu64, keys[i], want);
          snprintf(ac, sizeof ac, "leaks.%s = %" PRIu64, keys[i], got[i]);
          rc = fail(r, w, ex, ac, "%s, expected %s", ac, ex);
          goto out;
        }
      }
    }
    rc = 0;
    goto out;
  }

  if (strcmp(op, "prepare_model") == 0) {
    const md_model *m;
    if (get_model(r, w, ev, &m) || declare_as(r, w, ev, MDC__K_PREPARED, 0, &as)) goto out;
    md_handle h = 0;
    st = drv->prepare_model(dev, client, m, &h);
    if (st == MD_NONE && as) mdc__names_bind(&r->names, as, h, dev, 0);
    rc = judge_status(r, w, &e, st, dev);
    goto out;
  }

  if (strcmp(op, "release_prepared_model") == 0 || strcmp(op, "free_buffer") == 0) {
    int release = op[0] == 'r';
    uint64_t h;
    json_t *hv = json_object_get(ev, release ? "prepared" : "token");
    if (!hv) { mdc__terr(w, "missing field '%s'", release ? "prepared" : "token"); goto out; }
    if (mdc__resolve_handle(w, &r->names, hv, release ? "prepared" : "token", &h)) goto out;
    st = release ? drv->release_prepared_model(dev, client, h) : drv->free_buffer(dev, client, h);
    rc = judge_status(r, w, &e, st, dev);
    goto out;
  }

  if (strcmp(op, "allocate") == 0) {
    md_buffer_desc desc = {0, NULL};
    json_t *dv = json_object_get(ev, "desc");
    if (dv && !json_is_null(dv)) {
      static const char *const keys[] = {"dims", NULL};
      if (mdc__check_keys(w, dv, keys, r->strict, "desc") ||
          get_dims(w, &a, dv, "dims", &desc.rank, (uint32_t **)&desc.dims))
        goto out;
    }
    json_t *pv = json_object_get(ev, "prepared");
    if (pv && !json_is_array(pv)) { mdc__terr(w, "'prepared' must be an array of names"); goto out; }
    size_t np = pv ? json_array_size(pv) : 0;
    if (np > MDC__MAX_ARRAY) { mdc__terr(w, "'prepared' is too long"); goto out; }
    md_handle *prep = mdc__arena_alloc(&a, sizeof *prep, np);
    if (!prep) { mdc__terr(w, "out of memory"); goto out; }
    for (size_t i = 0; i < np; i++)
      if (mdc__resolve_handle(w, &r->names, json_array_get(pv, i), "prepared", &prep[i])) goto out;
    md_buffer_role *in, *outr;
    uint32_t nin, nout;
    if (get_roles(w, &a, ev, "input_roles", r->strict, &in, &nin) ||
        get_roles(w, &a, ev, "output_roles", r->strict, &outr, &nout) ||
        declare_as(r, w, ev, MDC__K_TOKEN, 0, &as))
      goto out;
    md_token tok = 0;
    st = drv->allocate(dev, client, &desc, prep, (uint32_t)np, in, nin, outr, nout, &tok);
    if (st == MD_NONE && as) mdc__names_bind(&r->names, as, tok, dev, 0);
    rc = judge_status(r, w, &e, st, dev);
    goto out;
  }

  if (strcmp(op, "copy_from") == 0 || strcmp(op, "copy_to") == 0) {
    int from = strcmp(op, "copy_from") == 0;
    uint64_t tok;
    mdc__pool *pool;
    uint32_t rank = 0, *dims = NULL;
    json_t *tv = json_object_get(ev, "token"), *mv = json_object_get(ev, from ? "src" : "dst");
    if (!tv) { mdc__terr(w, "missing field 'token'"); goto out; }
    if (!mv) { mdc__terr(w, "missing field '%s'", from ? "src" : "dst"); goto out; }
    if (mdc__resolve_handle(w, &r->names, tv, "token", &tok) ||
        mdc__resolve_memory(w, &r->names, mv, from ? "src" : "dst", &pool) ||
        (from && get_dims(w, &a, ev, "dims", &rank, &dims)))
      goto out;
    st = from ? drv->copy_from(dev, client, tok, &pool->mem, rank, dims)
              : drv->copy_to(dev, client, tok, &pool->mem);
    rc = judge_status(r, w, &e, st, dev);
    goto out;
  }

  if (strcmp(op, "execute") == 0 || strcmp(op, "execute_async") == 0 ||
      strcmp(op, "wait_event") == 0) {
    int wait = op[0] == 'w', async = strcmp(op, "execute_async") == 0;
    uint64_t prepared = 0, event = 0, timeout = UINT64_MAX;
    md_request req;
    uint32_t def_shapes = 0;
    if (wait) {
      json_t *evv = json_object_get(ev, "event");
      if (!evv) { mdc__terr(w, "missing field 'event'"); goto out; }
      if (mdc__resolve_handle(w, &r->names, evv, "event", &event) ||
          mdc__get_u64(w, ev, "timeout_ns", 0, UINT64_MAX, UINT64_MAX, &timeout))
        goto out;
      mdc__name en;
      if (json_is_string(evv) && mdc__names_get(&r->names, json_string_value(evv), &en) == 0)
        def_shapes = en.n_outputs;
    } else {
      json_t *pv = json_object_get(ev, "prepared");
      if (!pv) { mdc__terr(w, "missing field 'prepared'"); goto out; }
      if (mdc__resolve_handle(w, &r->names, pv, "prepared", &prepared) ||
          get_request(r, w, ev, &a, &req))
        goto out;
      def_shapes = req.n_outputs;
    }
    if (async) {
      if (declare_as(r, w, ev, MDC__K_EVENT, 0, &as)) goto out;
      md_handle h = 0;
      st = drv->execute_async(dev, client, prepared, &req, &h);
      if (st == MD_NONE && as) mdc__names_bind(&r->names, as, h, dev, req.n_outputs);
      rc = judge_status(r, w, &e, st, dev);
      goto out;
    }
    uint64_t ns;
    if (mdc__get_u64(w, ev, "n_shapes", 0, def_shapes, MDC__MAX_SHAPES, &ns)) goto out;
    md_output_shape *sh = mdc__arena_alloc(&a, sizeof *sh, ns ? ns : 1);
    if (!sh) { mdc__terr(w, "out of memory"); goto out; }
    /* Poison, so a driver that leaves a shape unwritten is seen. */
    memset(sh, 0xA5, sizeof *sh * (ns ? ns : 1));
    md_timing tm = {0, 0};
    st = wait ? drv->wait_event(dev, client, event, timeout, sh, (uint32_t)ns, &tm)
              : drv->execute(dev, client, prepared, &req, sh, (uint32_t)ns, &tm);
    if ((rc = judge_status(r, w, &e, st, dev))) goto out;
    rc = judge_outputs(r, w, &e, st, sh, (uint32_t)ns, &tm);
    goto out;
  }
  mdc__terr(w, "internal: op without a handler");
out:
  mdc__arena_free(&a);
  return rc;
}

/* ---- replayer objects ---- */
static int do_fill_check(run *r, mdc__where *w, json_t *ev, int check) {
  mdc__pool *p;
  uint64_t off;
  json_t *mv = json_object_get(ev, "memory");
  if (!mv) return mdc__terr(w, "missing field 'memory'");
  if (mdc__resolve_memory(w, &r->names, mv, "memory", &p) ||
      mdc__get_u64(w, ev, "offset", 0, 0, UINT64_MAX, &off))
    return -1;
  json_t *dv = json_object_get(ev, "data"), *vv = json_object_get(ev, "values");
  if (check && dv && vv) return mdc__terr(w, "give 'data' or 'values', not both");
  if (!dv) dv = vv;
  if (!dv) return mdc__terr(w, "missing field 'data'");
  mdc__elem type = MDC__ELEM_U8;
  double atol = 1e-6, rtol = 1e-5;
  if (check) {
    const char *ts;
    if (mdc__get_str(w, ev, "type", 1, &ts)) return -1;
    if (mdc__elem_parse(ts, &type)) return mdc__terr(w, "'type': unknown '%s' (f32, i32, u8)", ts);
    if (mdc__get_num(w, ev, "atol", atol, &atol) || mdc__get_num(w, ev, "rtol", rtol, &rtol)) return -1;
    if (!(atol >= 0) || !(rtol >= 0)) return mdc__terr(w, "'atol' and 'rtol' must be >= 0");
  }
  mdc__bytes b;
  if (mdc__payload(w, dv, r->strict, &b)) return -1;
  int rc = -1;
  if (check && b.type != MDC__ELEM_BYTES && b.type != type) {
    mdc__terr(w, "payload is %s but 'type' is %s", mdc__elem_name(b.type), mdc__elem_name(type));
  } else if (check && b.len % mdc__elem_size(type)) {
    mdc__terr(w, "payload of %zu bytes is not a whole number of %s", b.len, mdc__elem_name(type));
  } else {
    uint8_t *span = mdc__pool_span(w, p, off, b.len);
    if (span && !check) {
      memcpy(span, b.data, b.len);
      rc = 0;
    } else if (span) {
      char exp[512], act[512], msg[700];
      if (mdc__compare(type, span, b.data, b.len / mdc__elem_size(type), atol, rtol, exp,
                       sizeof exp, act, sizeof act, msg, sizeof msg))
        rc = fail(r, w, exp, act, "%s", msg);
      else
        rc = 0;
    }
  }
  free(b.data);
  return rc;
}

/* One event: 0 done, 1 Fail recorded, -1 trace error in w->msg. */
static int exec_event(run *r, mdc__where *w, const op_spec *spec, json_t *ev) {
  atomic_fetch_add(&r->events, 1);
  if (spec->flags & OP_ABI) return call_abi(r, w, spec, ev);
  const char *op = spec->name;
  mdc__name *as;
  if (strcmp(op, "memory") == 0 || strcmp(op, "bad_memory") == 0) {
    mdc__pool *p;
    if (declare_as(r, w, ev, MDC__K_MEMORY, 1, &as)) return -1;
    if (op[0] == 'm' ? mdc__pool_make(w, ev, r->strict, &p) : mdc__pool_bad(w, ev, &p)) return -1;
    mdc__pool_free(as->pool); /* only on a rebind */
    as->pool = p;
    mdc__names_bind(&r->names, as, 0, NULL, 0);
    return 0;
  }
  if (strcmp(op, "fill") == 0) return do_fill_check(r, w, ev, 0);
  if (strcmp(op, "check") == 0) return do_fill_check(r, w, ev, 1);
  if (strcmp(op, "model") == 0) {
    mdc__model *m;
    if (declare_as(r, w, ev, MDC__K_MODEL, 1, &as) || mdc__model_build(w, &r->names, ev, r->strict, &m))
      return -1;
    mdc__model_free(as->model);
    as->model = m;
    mdc__names_bind(&r->names, as, 0, NULL, 0);
    return 0;
  }
  if (strcmp(op, "request") == 0) {
    mdc__arena a = {0};
    md_request q;
    int rc = declare_as(r, w, ev, MDC__K_REQUEST, 1, &as) ||
             mdc__request_build(w, &r->names, ev, r->strict, 0, &a, &q);
    mdc__arena_free(&a);
    if (rc) return -1;
    if (as->request) json_decref(as->request);
    as->request = json_incref(ev);
    mdc__names_bind(&r->names, as, 0, NULL, 0);
    return 0;
  }
  return mdc__terr(w, "internal: op without a handler");
}

/* Checks one line on its own: op known, fields known (at the reader's minor), expect well
 * formed, `lane` exactly inside blocks. */
static int static_check(run *r, mdc__where *w, json_t *ev, int in_block, uint32_t lanes,
                        const op_spec **out) {
  const char *op;
  w->op = "trace";
  json_t *ov = json_object_get(ev, "op");
  if (!ov) return mdc__terr(w, "missing field 'op'");
  if (!json_is_string(ov)) return mdc__terr(w, "'op' must be a string");
  op = json_string_value(ov);
  const op_spec *spec = op_find(op);
  if (!spec) {
    if (!r->strict) {
      /* A newer minor may add ops; this reader cannot run them, and skipping one would pass a
       * trace whose meaning it does not know. */
      return mdc__terr(w, "unknown op '%s' (from trace format %d.%d)", op, r->hdr.major, r->hdr.minor);
    }
    return mdc__terr(w, "unknown op '%s'", op);
  }
  w->op = spec->name;
  if (r->strict) {
    const char *key;
    json_t *v;
    json_object_foreach(ev, key, v) {
      int known = strcmp(key, "op") == 0 || (strcmp(key, "expect") == 0 && (spec->flags & OP_ABI)) ||
                  (in_block && strcmp(key, "lane") == 0);
      for (int i = 0; i < 16 && spec->keys[i] && !known; i++)
        if (strcmp(spec->keys[i], key) == 0) known = 1;
      if (!known) return mdc__terr(w, "unknown field '%s'", key);
    }
  }
  if (in_block) {
    if (!(spec->flags & OP_IN_BLOCK))
      return mdc__terr(w, "not allowed inside a concurrent block");
    int64_t lane;
    if (mdc__get_int(w, ev, "lane", 1, 0, 0, (int64_t)lanes - 1, &lane)) return -1;
  } else if (json_object_get(ev, "lane")) {
    return mdc__terr(w, "'lane' outside a concurrent block");
  }
  expect e;
  if (expect_parse(w, spec, ev, r->strict, &e)) return -1;
  *out = spec;
  return 0;
}

/* ---- concurrent blocks ---- */
typedef struct block_event {
  json_t *ev;
  const op_spec *spec;
  uint32_t line;
  uint32_t lane;
} block_event;

typedef struct block {
  run *r;
  block_event *evs;
  size_t n;
  uint32_t lanes, repeat;
  pthread_barrier_t bar;
  pthread_mutex_t gate_lock;
  pthread_cond_t gate_cond;
  int gate; /* 0 wait, 1 go, -1 abandon */
} block;

typedef struct lane_arg {
  block *b;
  uint32_t lane;
} lane_arg;

static void *lane_main(void *p) {
  lane_arg *la = p;
  block *b = la->b;
  run *r = b->r;
  pthread_mutex_lock(&b->gate_lock);
  while (b->gate == 0) pthread_cond_wait(&b->gate_cond, &b->gate_lock);
  int go = b->gate > 0;
  pthread_mutex_unlock(&b->gate_lock);
  if (!go) return NULL;
  for (uint32_t rep = 0; rep < b->repeat; rep++) {
    pthread_barrier_wait(&b->bar);
    for (size_t i = 0; i < b->n; i++) {
      if (b->evs[i].lane != la->lane) continue;
      if (atomic_load(&r->stop)) break;
      mdc__where w = {.path = r->path, .line = b->evs[i].line, .op = b->evs[i].spec->name};
      if (exec_event(r, &w, b->evs[i].spec, b->evs[i].ev) < 0)
        record(r, MDC_TRACE_ERROR, w.line, w.msg, NULL, NULL);
    }
    pthread_barrier_wait(&b->bar);
    /* Read between the two barriers: every lane sees the same value, so all stop together. */
    if (atomic_load(&r->stop)) break;
  }
  return NULL;
}

static int run_block(run *r, mdc__where *w, block *b) {
  pthread_t th[MDC__MAX_LANES];
  lane_arg args[MDC__MAX_LANES];
  uint32_t started = 0;
  if (pthread_barrier_init(&b->bar, NULL, b->lanes)) return mdc__terr(w, "pthread_barrier_init failed");
  pthread_mutex_init(&b->gate_lock, NULL);
  pthread_cond_init(&b->gate_cond, NULL);
  b->gate = 0;
  for (; started < b->lanes; started++) {
    args[started].b = b;
    args[started].lane = started;
    if (pthread_create(&th[started], NULL, lane_main, &args[started])) break;
  }
  pthread_mutex_lock(&b->gate_lock);
  b->gate = started == b->lanes ? 1 : -1;
  pthread_cond_broadcast(&b->gate_cond);
  pthread_mutex_unlock(&b->gate_lock);
  for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  pthread_cond_destroy(&b->gate_cond);
  pthread_mutex_destroy(&b->gate_lock);
  pthread_barrier_destroy(&b->bar);
  if (started != b->lanes) return mdc__terr(w, "cannot start %u lane threads", b->lanes);
  return 0;
}

/* A host memory one block event touches: `write` when the call writes it (copy_to's dst, an
 * execution's output pools, fill), else it only reads it (copy_from's src, input pools, check). */
typedef struct mem_use {
  const char *name;
  uint32_t lane, line;
  int write;
} mem_use;

static int use_add(mem_use **u, size_t *n, size_t *cap, const char *name, const block_event *e,
                   int write) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    mem_use *p = realloc(*u, c * sizeof *p);
    if (!p) return -1;
    *u = p;
    *cap = c;
  }
  (*u)[(*n)++] = (mem_use){name, e->lane, e->line, write};
  return 0;
}

static int use_cmp(const void *a, const void *b) {
  const mem_use *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int request_uses(run *r, json_t *q, const block_event *e, mem_use **u, size_t *n,
                        size_t *cap) {
  if (json_is_string(q)) {
    mdc__name *nm = mdc__names_find(&r->names, json_string_value(q));
    if (!nm || nm->kind != MDC__K_REQUEST || !nm->request) return 0; /* judged when it runs */
    q = nm->request;
  }
  json_t *pools = json_object_get(q, "pools"), *outs = json_object_get(q, "outputs");
  size_t i;
  json_t *p;
  json_array_foreach(pools, i, p) {
    json_t *m = json_object_get(p, "memory");
    if (!json_is_string(m)) continue;
    int write = 0;
    size_t k;
    json_t *o;
    json_array_foreach(outs, k, o) {
      json_t *pi = json_object_get(o, "pool");
      if (json_is_integer(pi) && json_integer_value(pi) == (json_int_t)i) write = 1;
    }
    if (use_add(u, n, cap, json_string_value(m), e, write)) return -1;
  }
  return 0;
}

/* A block in which one lane writes a host memory that another lane reads or writes races with
 * itself: its checks would judge the trace, not the driver. Refused before anything runs. */
static int block_lint(run *r, mdc__where *w, const block *b) {
  mem_use *u = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (size_t i = 0; i < b->n && rc == 0; i++) {
    const block_event *e = &b->evs[i];
    const char *op = e->spec->name;
    json_t *ev = e->ev;
    json_t *m = NULL;
    int write = 0;
    if (strcmp(op, "copy_to") == 0) {
      m = json_object_get(ev, "dst");
      write = 1;
    } else if (strcmp(op, "copy_from") == 0) {
      m = json_object_get(ev, "src");
    } else if (strcmp(op, "fill") == 0 || strcmp(op, "check") == 0) {
      m = json_object_get(ev, "memory");
      write = op[0] == 'f';
    } else if (strcmp(op, "execute") == 0 || strcmp(op, "execute_async") == 0) {
      rc = request_uses(r, json_object_get(ev, "request"), e, &u, &n, &cap);
    }
    if (json_is_string(m)) rc = use_add(&u, &n, &cap, json_string_value(m), e, write);
  }
  if (rc) {
    free(u);
    return mdc__terr(w, "out of memory");
  }
  /* By name, then line: in each name's run, a writer and an entry of another lane is a race. */
  qsort(u, n, sizeof *u, use_cmp);
  for (size_t i = 0, end; i < n; i = end) {
    const mem_use *wr = NULL, *lo = &u[i], *hi = &u[i];
    for (end = i; end < n && strcmp(u[end].name, u[i].name) == 0; end++) {
      if (u[end].write && !wr) wr = &u[end];
      if (u[end].lane < lo->lane) lo = &u[end];
      if (u[end].lane > hi->lane) hi = &u[end];
    }
    if (!wr || lo->lane == hi->lane) continue;
    const mem_use *other = lo->lane != wr->lane ? lo : hi;
    w->line = other->line > wr->line ? other->line : wr->line;
    w->op = "concurrent";
    mdc__terr(w,
              "memory '%s' is written by lane %u (line %u) and %s by lane %u (line %u) in one "
              "concurrent block: the trace races with itself; give each lane its own memory",
              wr->name, wr->lane, wr->line, other->write ? "written" : "read", other->lane, other->line);
    free(u);
    return -1;
  }
  free(u);
  return 0;
}

/* Reads the block that starts at `head` (line w->line), checks every event, runs it unless a
 * verdict is already recorded. */
static int read_block(run *r, mdc__reader *rd, mdc__where *w, json_t *head) {
  int64_t lanes, repeat;
  if (mdc__get_int(w, head, "lanes", 1, 0, 1, MDC__MAX_LANES, &lanes) ||
      mdc__get_int(w, head, "repeat", 0, 1, 1, MDC__MAX_REPEAT, &repeat))
    return -1;
  uint32_t start = w->line;
  block b;
  memset(&b, 0, sizeof b);
  b.r = r;
  b.lanes = (uint32_t)lanes;
  b.repeat = (uint32_t)repeat;
  size_t cap = 0;
  int rc = -1, closed = 0;
  for (;;) {
    json_t *ev;
    int got = mdc__reader_next(rd, w, &ev);
    if (got < 0) goto out;
    if (got == 0) {
      w->line = start;
      w->op = "concurrent";
      mdc__terr(w, "no end_concurrent before the end of the file");
      goto out;
    }
    json_t *ov = json_object_get(ev, "op");
    if (json_is_string(ov) && strcmp(json_string_value(ov), "end_concurrent") == 0) {
      w->op = "end_concurrent";
      const op_spec *spec;
      int bad = static_check(r, w, ev, 0, 0, &spec);
      json_decref(ev);
      if (bad) goto out;
      closed = 1;
      break;
    }
    if (json_is_string(ov) && strcmp(json_string_value(ov), "concurrent") == 0) {
      json_decref(ev);
      w->op = "concurrent";
      mdc__terr(w, "concurrent blocks do not nest (block opened at line %u)", start);
      goto out;
    }
    const op_spec *spec;
    if (static_check(r, w, ev, 1, b.lanes, &spec)) {
      json_decref(ev);
      goto out;
    }
    if (b.n == cap) {
      size_t c = cap ? cap * 2 : 16;
      block_event *p = c > MDC__MAX_BLOCK_EVENTS ? NULL : realloc(b.evs, c * sizeof *p);
      if (!p) {
        json_decref(ev);
        mdc__terr(w, "a concurrent block holds at most %u events", MDC__MAX_BLOCK_EVENTS);
        goto out;
      }
      b.evs = p;
      cap = c;
    }
    b.evs[b.n].ev = ev;
    b.evs[b.n].spec = spec;
    b.evs[b.n].line = w->line;
    b.evs[b.n].lane = (uint32_t)json_integer_value(json_object_get(ev, "lane"));
    b.n++;
  }
  if (closed && block_lint(r, w, &b)) goto out;
  rc = 0;
  if (closed && !atomic_load(&r->stop)) {
    w->line = start;
    w->op = "concurrent";
    r->blk_nclients = r->blk_ndevs = 0;
    for (size_t i = 0; i < r->n_clients; i++)
      if (!r->clients[i]->closed) {
        r->blk_nclients++;
        r->blk_client = r->clients[i]->value;
        r->blk_client_dev = r->clients[i]->dev;
      }
    for (size_t i = 0; i < r->n_devs; i++)
      if (!r->devs[i]->closed) {
        r->blk_ndevs++;
        r->blk_dev = r->devs[i]->dev;
      }
    r->in_block = 1;
    rc = run_block(r, w, &b);
    r->in_block = 0;
  }
out:
  for (size_t i = 0; i < b.n; i++) json_decref(b.evs[i].ev);
  free(b.evs);
  return rc;
}

/* ---- the run ---- */
static void finish(run *r) {
  /* Close what the trace left open: clients first, newest first, then devices. */
  for (size_t i = r->n_clients; i-- > 0;) {
    mdc__name *c = r->clients[i];
    if (!c->closed && c->bound) {
      int dev_open = 0;
      for (size_t k = 0; k < r->n_devs; k++)
        if (r->devs[k]->dev == c->dev && !r->devs[k]->closed) dev_open = 1;
      if (dev_open) r->drv->close_client(c->dev, c->value, NULL);
      c->closed = 1;
    }
    if (c->line == UINT32_MAX) free(c);
  }
  for (size_t i = r->n_devs; i-- > 0;) {
    if (!r->devs[i]->closed) {
      r->drv->close_device(r->devs[i]->dev);
      r->devs[i]->closed = 1;
    }
    if (r->devs[i]->line == UINT32_MAX) free(r->devs[i]);
  }
  free(r->clients);
  free(r->devs);
  for (size_t i = 0; i < r->n_tmp; i++) mdc__model_free(r->tmp[i]);
  free(r->tmp);
}

static void init_sodium(void) {
  if (sodium_init() < 0) { /* crypto_hash_sha256 works without it; nothing to do */
  }
}

mdc_verdict mdc_trace_run(const md_driver *drv, const char *path, const char *config,
                          mdc_result *out) {
  memset(out, 0, sizeof *out);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_sodium);
  run r;
  memset(&r, 0, sizeof r);
  r.drv = drv;
  r.path = path;
  r.config = config && *config ? config : NULL;
  pthread_mutex_init(&r.lock, NULL);
  mdc__names_init(&r.names);
  mdc__where w = {.path = path, .line = 0, .op = "trace"};
  mdc__reader rd;
  json_t *ev = NULL;
  if (!drv) {
    mdc__terr(&w, "no driver");
    record(&r, MDC_TRACE_ERROR, 0, w.msg, NULL, NULL);
    goto done;
  }
  if (mdc__reader_open(&rd, path, &w)) {
    record(&r, MDC_TRACE_ERROR, 0, w.msg, NULL, NULL);
    goto done;
  }
  int got = mdc__reader_next(&rd, &w, &ev);
  if (got == 0) {
    w.op = "header";
    w.line = 1;
    mdc__terr(&w, "no header: the trace is empty");
  }
  if (got <= 0 || mdc__header_parse(&w, ev, &r.hdr)) {
    record(&r, MDC_TRACE_ERROR, w.line, w.msg, NULL, NULL);
    goto close;
  }
  json_decref(ev);
  ev = NULL;
  r.strict = r.hdr.minor <= MDC_TRACE_MINOR;
  int terr = 0;
  for (;;) {
    got = mdc__reader_next(&rd, &w, &ev);
    if (got <= 0) break;
    const op_spec *spec;
    int rc = static_check(&r, &w, ev, 0, 0, &spec);
    if (rc == 0 && strcmp(spec->name, "concurrent") == 0) {
      rc = read_block(&r, &rd, &w, ev);
    } else if (rc == 0 && strcmp(spec->name, "end_concurrent") == 0) {
      rc = mdc__terr(&w, "end_concurrent without a concurrent block");
    } else if (rc == 0 && !atomic_load(&r.stop)) {
      rc = exec_event(&r, &w, spec, ev);
    }
    json_decref(ev);
    ev = NULL;
    if (rc < 0) {
      terr = 1;
      break;
    }
  }
  if (got < 0 || terr) record(&r, MDC_TRACE_ERROR, w.line, w.msg, NULL, NULL);
close:
  json_decref(ev);
  mdc__reader_close(&rd);
done:
  if (drv) finish(&r);
  mdc__names_free(&r.names);
  pthread_mutex_destroy(&r.lock);
  out->verdict = r.v.verdict;
  out->line = r.v.line;
  out->events = atomic_load(&r.events);
  snprintf(out->message, sizeof out->message, "%s", r.v.message);
  snprintf(out->expected, sizeof out->expected, "%s", r.v.expected);
  snprintf(out->actual, sizeof out->actual, "%s", r.v.actual);
  return out->verdict;
}
