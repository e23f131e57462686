/* dispatch.c - runs one driver call of a trace: its arguments resolved (args.c), the call made
 * through the md_driver table, its result judged (expect.c) and what it produced bound to its
 * `as` name. One handler per call of mdc/calls.h, in a table indexed by mdc_call. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "md/config.h"
#include "md/loader.h"

/* What every handler gets: the event, its expectations, an arena for the call's arguments,
 * and the device and client already resolved for calls that take a client. */
typedef struct call_ctx {
  mdc__run *r;
  mdc__where *w;
  json_t *ev;
  const mdc__expect *e;
  mdc__arena *a;
  md_device *dev;
  uint64_t client;
  int called;           /* the driver was called: st is its status */
  md_status st;
  uint64_t produced;    /* the handle it produced (0: none) */
  const md_output_shape *shapes;   /* execute/wait_event: what the driver returned */
  uint32_t n_shapes;
} call_ctx;

/* Judges the status of the call the handler made (and keeps it for `id`, `as` and `tally`). */
static int judge(call_ctx *c, md_status st, md_device *dev) {
  c->called = 1;
  c->st = st;
  return mdc__judge_status(c->r, c->w, c->e, st, dev);
}

typedef int (*handler)(call_ctx *c);

/* ---- devices and clients the trace opened ---- */

/* Marks a device or client closed. Called with r->lock held; `closed` is also read through
 * mdc__names_get (under the names lock) by other lanes, so it is written under that lock too. */
static void mark_closed(mdc__run *r, mdc__name *e) {
  pthread_mutex_lock(&r->names.lock);
  e->closed = 1;
  pthread_mutex_unlock(&r->names.lock);
}

/* An entry for an unnamed device or client, in no names table: line UINT32_MAX marks it as
 * the run's to free. */
static mdc__name *anon_name(mdc_obj kind) {
  mdc__name *e = calloc(1, sizeof *e);
  if (e) {
    e->kind = kind;
    e->line = UINT32_MAX;
  }
  return e;
}

void mdc__close_leftovers(mdc__run *r) {
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
  r->clients = r->devs = NULL;
  r->n_clients = r->n_devs = 0;
}

/* ---- requires: judged once, after the first device opens ---- */

/* Whether the trace needs any capability: listed in `requires`, or inferred (a 1.0 trace). */
static int needs_any(const mdc__run *r) { return r->hdr.requires[0] || r->n_inferred; }

/* Whether the driver has capability cap: 1 yes, 0 no, -1 a capability this reader does not know
 * at the trace's minor (registered_pools is 1.1's). */
static int cap_met(const mdc__run *r, const md_capabilities *caps, const char *cap) {
  if (strcmp(cap, "sim") == 0) return strcmp(caps->backend, "sim") == 0;
  if (strcmp(cap, "memory_domains") == 0) return caps->supports_memory_domains != 0;
  if (strcmp(cap, "registered_pools") == 0 && r->hdr.minor >= 1)
    return MD_DRIVER_HAS(r->drv, register_memory) && MD_DRIVER_HAS(r->drv, unregister_memory);
  return -1;
}

/* Records NotSupported for cap (inferred from the event at line `inferred`, or listed: 0). */
static int not_supported(mdc__run *r, mdc__where *w, const char *cap, const char *backend, uint32_t inferred) {
  char msg[512], why[160] = "";
  if (inferred)
    snprintf(why, sizeof why, " (inferred from line %u: a 1.0 trace need not list it)", inferred);
  snprintf(msg, sizeof msg, "%s:%u: %s: requires '%s'%s, which this driver does not have", w->path,
           w->line, w->op, cap, why);
  mdc__record(r, MDC_NOT_SUPPORTED, w, msg, cap, backend);
  return 1;
}

static int check_requires(mdc__run *r, mdc__where *w, md_device *dev) {
  if (!needs_any(r)) return 0;
  md_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  md_status st = r->drv->get_capabilities(dev, &caps);
  if (st != MD_NONE)
    return mdc__fail(r, w, "NONE", mdc__status_name(st), "get_capabilities for 'requires' returned %s",
                     mdc__status_name(st));
  caps.backend[sizeof caps.backend - 1] = '\0';
  char req[sizeof r->hdr.requires];
  snprintf(req, sizeof req, "%s", r->hdr.requires);
  for (char *save = NULL, *tok = strtok_r(req, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int met = cap_met(r, &caps, tok);
    if (met < 0 && r->strict) {
      w->op = "header";
      return mdc__terr(w, "requires: unknown capability '%s' (sim, memory_domains%s)", tok,
                       r->hdr.minor >= 1 ? ", registered_pools" : "; registered_pools is trace format 1.1");
    }
    if (met <= 0) return not_supported(r, w, tok, caps.backend, 0); /* < 0: a newer minor's, not checkable */
  }
  for (int i = 0; i < r->n_inferred; i++)
    if (cap_met(r, &caps, r->inferred[i].cap) <= 0)
      return not_supported(r, w, r->inferred[i].cap, caps.backend, r->inferred[i].line);
  return 0;
}

/* ---- calls without a client ---- */

static int h_open_device(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  const char *cfg;
  mdc__name *as;
  if (mdc__get_str(w, c->ev, mdc_args[MDC_A_CONFIG].key, 0, &cfg) ||
      mdc__arg_as(r, w, c->ev, MDC_OBJ_DEVICE, 0, &as))
    return -1;
  /* The first open_device gets the replay's config keys; the trace's own keys win, except the
   * overrides a differential replay forces (its backend). */
  char *merged = NULL;
  int first = !r->opened_device;
  r->opened_device = 1;
  if (first) {
    const char *ov = r->opts->config_override;
    size_t len1 = md_config_merge(ov, cfg, NULL, 0) + 1;
    char *base = malloc(len1);
    if (!base) return mdc__terr(w, "out of memory");
    md_config_merge(ov, cfg, base, len1);
    size_t len = md_config_merge(base, r->config, NULL, 0) + 1;
    merged = malloc(len);
    if (merged) md_config_merge(base, r->config, merged, len);
    free(base);
    if (!merged) return mdc__terr(w, "out of memory");
  }
  md_device *dev = NULL;
  md_status st = r->drv->open_device(merged ? merged : cfg ? cfg : "", &dev);
  free(merged);
  if (st == MD_NONE && !dev) return mdc__fail(r, w, "a device", "NULL", "open_device returned NONE but no device");
  if (st == MD_NONE) {
    mdc__name *entry = as ? as : anon_name(MDC_OBJ_DEVICE);
    if (entry) mdc__names_bind(&r->names, entry, (uint64_t)(uintptr_t)dev, dev, 0);
    pthread_mutex_lock(&r->lock);
    int bad = !entry || mdc__push(&r->devs, &r->n_devs, &r->cap_devs, entry);
    pthread_mutex_unlock(&r->lock);
    if (bad) {
      r->drv->close_device(dev);
      if (entry && !as) free(entry);
      else if (entry) entry->closed = 1;
      return mdc__terr(w, "out of memory");
    }
  }
  if (st != MD_NONE && !mdc__expect_allows(c->e, st) && needs_any(r) && !r->requires_checked) {
    /* A Fail is coming, and the trace's requires are not judged yet (no device opened): judge
     * them on a device opened with the replay's config alone, so a driver that refuses what
     * the trace needs (a `sim` trace's faults=) gets NotSupported, not Fail. */
    char le[512];
    const char *msg = r->drv->last_error(NULL);
    snprintf(le, sizeof le, "%s", msg ? msg : "(null)");
    md_device *probe = NULL;
    if (r->drv->open_device(r->config ? r->config : "", &probe) == MD_NONE && probe) {
      r->requires_checked = 1;
      int q = check_requires(r, w, probe);
      r->drv->close_device(probe);
      if (q) return q;
    }
    c->called = 1;
    c->st = st;
    return mdc__judge_status_msg(r, w, c->e, st, le);
  }
  int rc = judge(c, st, NULL);
  if (rc) return rc;
  if (st == MD_NONE && !r->requires_checked) {
    r->requires_checked = 1;
    return check_requires(r, w, dev);
  }
  return 0;
}

static int h_close_device(call_ctx *c) {
  mdc__run *r = c->r;
  md_device *dev;
  if (mdc__arg_device(r, c->w, c->ev, NULL, &dev)) return -1;
  if (!dev) return mdc__terr(c->w, "'device': a NULL device cannot be closed");
  r->drv->close_device(dev);
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n_devs; i++)
    if (r->devs[i]->dev == dev && !r->devs[i]->closed) mark_closed(r, r->devs[i]);
  for (size_t i = 0; i < r->n_clients; i++)
    if (r->clients[i]->dev == dev) mark_closed(r, r->clients[i]); /* closed with the device */
  pthread_mutex_unlock(&r->lock);
  return 0;
}

static int h_get_capabilities(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  const mdc__expect *e = c->e;
  md_device *dev;
  if (mdc__arg_device(r, w, c->ev, NULL, &dev)) return -1;
  md_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  md_status st = r->drv->get_capabilities(dev, &caps);
  int rc = judge(c, st, dev);
  if (rc || st != MD_NONE) return rc;
  caps.backend[sizeof caps.backend - 1] = '\0';
  if (e->backend && strcmp(e->backend, caps.backend) != 0)
    return mdc__fail(r, w, e->backend, caps.backend, "backend \"%s\", expected \"%s\"", caps.backend, e->backend);
  if (e->smd >= 0 && (caps.supports_memory_domains != 0) != e->smd)
    return mdc__fail(r, w, e->smd ? "1" : "0", caps.supports_memory_domains ? "1" : "0",
                     "supports_memory_domains %u, expected %d", caps.supports_memory_domains, e->smd);
  return 0;
}

static int h_get_supported_operations(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  const mdc__expect *e = c->e;
  md_device *dev;
  const md_model *m;
  if (mdc__arg_device(r, w, c->ev, NULL, &dev) || mdc__arg_model(r, w, c->ev, &m)) return -1;
  uint32_t n = m->n_operations ? m->n_operations : 1;
  uint8_t *sup = mdc__arena_alloc(c->a, 1, n);
  if (!sup) return mdc__terr(w, "out of memory");
  memset(sup, MDC__POISON_BYTE, n);
  if (e->supported && json_array_size(e->supported) != m->n_operations)
    return mdc__terr(w, "expect: 'supported' has %zu entries, the model %u operations",
                     json_array_size(e->supported), m->n_operations);
  md_status st = r->drv->get_supported_operations(dev, m, sup);
  int rc = judge(c, st, dev);
  if (rc) return rc;
  for (uint32_t i = 0; st == MD_NONE && e->supported && i < m->n_operations; i++) {
    json_t *s = json_array_get(e->supported, i);
    int want = json_is_boolean(s) ? json_is_true(s) : (int)json_integer_value(s);
    if ((sup[i] != 0) != want) {
      char ex[64], ac[128];
      snprintf(ex, sizeof ex, "supported[%u] = %d", i, want);
      snprintf(ac, sizeof ac, "supported[%u] = %u%s", i, sup[i],
               sup[i] == MDC__POISON_BYTE ? " (not written by the driver: mdc's 0xA5 fill)" : "");
      return mdc__fail(r, w, ex, ac, "%s, expected %s", ac, ex);
    }
  }
  return 0;
}

static int h_open_client(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  md_device *dev;
  mdc__name *as;
  if (mdc__arg_device(r, w, c->ev, NULL, &dev) || mdc__arg_as(r, w, c->ev, MDC_OBJ_CLIENT, 0, &as)) return -1;
  md_handle h = 0;
  md_status st = r->drv->open_client(dev, &h);
  if (st == MD_NONE) {
    /* named or not, a client the trace opened is closed at the end if it is still open */
    mdc__name *entry = as ? as : anon_name(MDC_OBJ_CLIENT);
    if (entry) mdc__names_bind(&r->names, entry, h, dev, 0);
    c->produced = h;
    pthread_mutex_lock(&r->lock);
    int bad = !entry || mdc__push(&r->clients, &r->n_clients, &r->cap_clients, entry);
    pthread_mutex_unlock(&r->lock);
    if (bad) {
      if (entry && !as) free(entry);
      return mdc__terr(w, "out of memory");
    }
  }
  return judge(c, st, dev);
}

/* ---- calls with a client (c->dev and c->client resolved) ---- */

static int h_close_client(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  const mdc__expect *e = c->e;
  md_leak_report lk;
  memset(&lk, MDC__POISON_BYTE, sizeof lk);
  md_status st = r->drv->close_client(c->dev, c->client, &lk);
  if (st == MD_NONE) {
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n_clients; i++)
      if (r->clients[i]->value == c->client && r->clients[i]->dev == c->dev) mark_closed(r, r->clients[i]);
    pthread_mutex_unlock(&r->lock);
  }
  int rc = judge(c, st, c->dev);
  if (rc || st != MD_NONE || !e->leaks) return rc;
  static const char *const keys[] = {"buffers", "prepared_models", "events", "bytes"};
  uint64_t got[4] = {lk.buffers, lk.prepared_models, lk.events, lk.bytes};
  for (int i = 0; i < 4; i++) {
    uint64_t want;
    if (!json_object_get(e->leaks, keys[i])) continue;
    mdc__get_u64(w, e->leaks, keys[i], 0, 0, UINT64_MAX, &want);
    if (want != got[i]) {
      char ex[64], ac[128];
      int untouched = i < 3 ? got[i] == MDC__POISON32 : got[i] == MDC__POISON64;
      snprintf(ex, sizeof ex, "leaks.%s = %" PRIu64, keys[i], want);
      snprintf(ac, sizeof ac, "leaks.%s = %" PRIu64 "%s", keys[i], got[i],
               untouched ? " (not written by the driver: mdc's 0xA5 fill)" : "");
      return mdc__fail(r, w, ex, ac, "%s, expected %s", ac, ex);
    }
  }
  return 0;
}

static int h_prepare_model(call_ctx *c) {
  mdc__run *r = c->r;
  const md_model *m;
  mdc__name *as;
  if (mdc__arg_model(r, c->w, c->ev, &m) || mdc__arg_as(r, c->w, c->ev, MDC_OBJ_PREPARED, 0, &as)) return -1;
  md_handle h = 0;
  md_status st = r->drv->prepare_model(c->dev, c->client, m, &h);
  if (st == MD_NONE && as) mdc__names_bind(&r->names, as, h, c->dev, 0);
  if (st == MD_NONE) c->produced = h;
  return judge(c, st, c->dev);
}

static int h_release_prepared_model(call_ctx *c) {
  uint64_t h;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_PREPARED, &h)) return -1;
  md_status st = c->r->drv->release_prepared_model(c->dev, c->client, h);
  return judge(c, st, c->dev);
}

static int h_free_buffer(call_ctx *c) {
  uint64_t h;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_TOKEN, &h)) return -1;
  md_status st = c->r->drv->free_buffer(c->dev, c->client, h);
  return judge(c, st, c->dev);
}

static int h_allocate(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__where *w = c->w;
  md_buffer_desc desc = {0, NULL};
  json_t *dv = json_object_get(c->ev, mdc_args[MDC_A_DESC].key);
  if (dv && !json_is_null(dv)) {
    static const char *const keys[] = {"dims", NULL};
    if (mdc__check_keys(w, dv, keys, r->strict, "desc") ||
        mdc__arg_dims(w, c->a, dv, "dims", &desc.rank, (uint32_t **)&desc.dims))
      return -1;
  }
  json_t *pv = json_object_get(c->ev, mdc_args[MDC_A_PREPARED_LIST].key);
  if (pv && !json_is_array(pv)) return mdc__terr(w, "'prepared' must be an array of names");
  size_t np = pv ? json_array_size(pv) : 0;
  if (np > MDC__MAX_ARRAY) return mdc__terr(w, "'prepared' is too long");
  md_handle *prep = mdc__arena_alloc(c->a, sizeof *prep, np);
  if (!prep) return mdc__terr(w, "out of memory");
  for (size_t i = 0; i < np; i++)
    if (mdc__resolve_handle(w, &r->names, json_array_get(pv, i), "prepared", &prep[i])) return -1;
  md_buffer_role *in, *outr;
  uint32_t nin, nout;
  mdc__name *as;
  if (mdc__arg_roles(w, c->a, c->ev, MDC_A_INPUT_ROLES, r->strict, &in, &nin) ||
      mdc__arg_roles(w, c->a, c->ev, MDC_A_OUTPUT_ROLES, r->strict, &outr, &nout) ||
      mdc__arg_as(r, w, c->ev, MDC_OBJ_TOKEN, 0, &as))
    return -1;
  md_token tok = 0;
  md_status st = r->drv->allocate(c->dev, c->client, &desc, prep, (uint32_t)np, in, nin, outr, nout, &tok);
  if (st == MD_NONE && as) mdc__names_bind(&r->names, as, tok, c->dev, 0);
  if (st == MD_NONE) c->produced = tok;
  return judge(c, st, c->dev);
}

static int h_copy_to(call_ctx *c) {
  uint64_t tok;
  mdc__pool *pool;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_TOKEN, &tok) ||
      mdc__arg_memory(c->r, c->w, c->ev, MDC_A_DST, &pool))
    return -1;
  md_status st = c->r->drv->copy_to(c->dev, c->client, tok, &pool->mem);
  return judge(c, st, c->dev);
}

static int h_copy_from(call_ctx *c) {
  uint64_t tok;
  mdc__pool *pool;
  uint32_t rank = 0, *dims = NULL;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_TOKEN, &tok) ||
      mdc__arg_memory(c->r, c->w, c->ev, MDC_A_SRC, &pool) ||
      mdc__arg_dims(c->w, c->a, c->ev, mdc_args[MDC_A_DIMS].key, &rank, &dims))
    return -1;
  md_status st = c->r->drv->copy_from(c->dev, c->client, tok, &pool->mem, rank, dims);
  return judge(c, st, c->dev);
}

/* execute and wait_event: shapes poisoned before the call, so a driver that leaves one
 * unwritten is seen, then judged with the timing. */
static int run_judged(call_ctx *c, uint64_t prepared, const md_request *req, uint64_t event,
                      uint64_t timeout, uint32_t def_shapes) {
  mdc__run *r = c->r;
  uint64_t ns;
  if (mdc__get_u64(c->w, c->ev, mdc_args[MDC_A_N_SHAPES].key, 0, def_shapes, MDC__MAX_SHAPES, &ns)) return -1;
  md_output_shape *sh = mdc__arena_alloc(c->a, sizeof *sh, ns ? ns : 1);
  if (!sh) return mdc__terr(c->w, "out of memory");
  memset(sh, MDC__POISON_BYTE, sizeof *sh * (ns ? ns : 1));
  md_timing tm = {0, 0};
  md_status st = req ? r->drv->execute(c->dev, c->client, prepared, req, sh, (uint32_t)ns, &tm)
                     : r->drv->wait_event(c->dev, c->client, event, timeout, sh, (uint32_t)ns, &tm);
  c->shapes = sh;
  c->n_shapes = (uint32_t)ns;
  int rc = judge(c, st, c->dev);
  return rc ? rc : mdc__judge_outputs(r, c->w, c->e, st, sh, (uint32_t)ns, def_shapes, &tm);
}

static int h_execute(call_ctx *c) {
  uint64_t prepared;
  md_request req;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_PREPARED, &prepared) ||
      mdc__arg_request(c->r, c->w, c->ev, c->a, &req))
    return -1;
  return run_judged(c, prepared, &req, 0, 0, req.n_outputs);
}

static int h_execute_async(call_ctx *c) {
  mdc__run *r = c->r;
  uint64_t prepared;
  md_request req;
  mdc__name *as;
  if (mdc__arg_handle(r, c->w, c->ev, MDC_A_PREPARED, &prepared) ||
      mdc__arg_request(r, c->w, c->ev, c->a, &req) || mdc__arg_as(r, c->w, c->ev, MDC_OBJ_EVENT, 0, &as))
    return -1;
  md_handle h = 0;
  md_status st = r->drv->execute_async(c->dev, c->client, prepared, &req, &h);
  if (st == MD_NONE && as) mdc__names_bind(&r->names, as, h, c->dev, req.n_outputs);
  if (st == MD_NONE) c->produced = h;
  return judge(c, st, c->dev);
}

static int h_wait_event(call_ctx *c) {
  uint64_t event, timeout;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_EVENT, &event) ||
      mdc__get_u64(c->w, c->ev, mdc_args[MDC_A_TIMEOUT_NS].key, 0, UINT64_MAX, UINT64_MAX, &timeout))
    return -1;
  /* n_shapes defaults to the output count of the request that made the event. */
  json_t *evv = json_object_get(c->ev, mdc_args[MDC_A_EVENT].key);
  mdc__name en;
  uint32_t def_shapes = 0;
  if (json_is_string(evv) && mdc__names_get(&c->r->names, json_string_value(evv), &en) == 0)
    def_shapes = en.n_outputs;
  return run_judged(c, 0, NULL, event, timeout, def_shapes);
}

/* ---- registered pools (SPEC 9): optional entries, judged NotSupported where absent ---- */

/* Whether the driver has the optional entry of call c; records NotSupported when it has not (a
 * trace that calls it requires "registered_pools", so this is reached only when that was not
 * judged yet). */
static int has_entry(call_ctx *c, int has) {
  if (has) return 1;
  char msg[512];
  snprintf(msg, sizeof msg, "%s:%u: %s: the driver's table has no %s (SPEC 9: registered pools are optional)",
           c->w->path, c->w->line, c->w->op, c->w->op);
  mdc__record(c->r, MDC_NOT_SUPPORTED, c->w, msg, "registered_pools", "absent");
  return 0;
}

static int h_register_memory(call_ctx *c) {
  mdc__run *r = c->r;
  mdc__pool *pool;
  mdc__name *as;
  if (mdc__arg_memory(r, c->w, c->ev, MDC_A_MEMORY, &pool) || mdc__arg_as(r, c->w, c->ev, MDC_OBJ_POOL, 0, &as))
    return -1;
  if (!has_entry(c, MD_DRIVER_HAS(r->drv, register_memory))) return 1;
  md_handle h = 0;
  md_status st = r->drv->register_memory(c->dev, c->client, &pool->mem, &h);
  if (st == MD_NONE && as) {
    /* For the concurrent-block lint: executions writing this pool write that memory. */
    mdc__name *src = mdc__names_find(&r->names, json_string_value(json_object_get(c->ev, mdc_args[MDC_A_MEMORY].key)));
    mdc__names_bind(&r->names, as, h, c->dev, 0);
    pthread_mutex_lock(&r->names.lock);
    as->registered_from = src;
    pthread_mutex_unlock(&r->names.lock);
  }
  if (st == MD_NONE) c->produced = h;
  return judge(c, st, c->dev);
}

static int h_unregister_memory(call_ctx *c) {
  uint64_t h;
  if (mdc__arg_handle(c->r, c->w, c->ev, MDC_A_POOL, &h)) return -1;
  if (!has_entry(c, MD_DRIVER_HAS(c->r->drv, unregister_memory))) return 1;
  md_status st = c->r->drv->unregister_memory(c->dev, c->client, h);
  return judge(c, st, c->dev);
}

static const handler handlers[MDC_CALL_COUNT] = {
    [MDC_CALL_OPEN_DEVICE] = h_open_device,
    [MDC_CALL_CLOSE_DEVICE] = h_close_device,
    [MDC_CALL_GET_CAPABILITIES] = h_get_capabilities,
    [MDC_CALL_GET_SUPPORTED_OPERATIONS] = h_get_supported_operations,
    [MDC_CALL_OPEN_CLIENT] = h_open_client,
    [MDC_CALL_CLOSE_CLIENT] = h_close_client,
    [MDC_CALL_PREPARE_MODEL] = h_prepare_model,
    [MDC_CALL_RELEASE_PREPARED_MODEL] = h_release_prepared_model,
    [MDC_CALL_ALLOCATE] = h_allocate,
    [MDC_CALL_COPY_TO] = h_copy_to,
    [MDC_CALL_COPY_FROM] = h_copy_from,
    [MDC_CALL_FREE_BUFFER] = h_free_buffer,
    [MDC_CALL_EXECUTE] = h_execute,
    [MDC_CALL_EXECUTE_ASYNC] = h_execute_async,
    [MDC_CALL_WAIT_EVENT] = h_wait_event,
    [MDC_CALL_REGISTER_MEMORY] = h_register_memory,
    [MDC_CALL_UNREGISTER_MEMORY] = h_unregister_memory,
};

int mdc__call_run(mdc__run *r, mdc__where *w, const mdc_call_desc *call, json_t *ev) {
  mdc__expect e;
  if (mdc__expect_parse(w, call, ev, r->strict, &e)) return -1;
  handler h = handlers[call->id];
  if (!h) return mdc__terr(w, "internal: no handler for %s", call->name);
  mdc__arena a = {0};
  call_ctx c = {.r = r, .w = w, .ev = ev, .e = &e, .a = &a};
  int rc;
  if (call->flags & MDC_CALL_CLIENT) {
    md_device *hint = NULL;
    rc = mdc__arg_client(r, w, ev, &c.client, &hint) || mdc__arg_device(r, w, ev, hint, &c.dev) ? -1 : h(&c);
  } else {
    rc = h(&c);
  }
  /* What the call leaves for later events (`as`/`id` status, `tally`, `collect`), also after a
   * Fail: the trace's own errors still surface. */
  if (c.called && rc >= 0 && mdc__outcome_record(r, w, ev, c.st, c.produced)) rc = -1;
  if (c.called && r->opts->observe && !r->in_block) {
    mdc_observation o = {.line = w->line, .op = call->name, .status = c.st,
                         .n_shapes = c.st == MD_NONE || c.st == MD_OUTPUT_INSUFFICIENT_SIZE ? c.n_shapes : 0,
                         .shapes = c.shapes};
    r->opts->observe(r->opts->observe_ctx, &o);
  }
  mdc__arena_free(&a);
  return rc;
}
