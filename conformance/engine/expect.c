/* expect.c - a call's `expect`: parsed from the trace (only what mdc/calls.h says the call may
 * expect), then held against what the driver returned: the status (one of a set), the message,
 * the shapes and timing of executions with SPEC 4's rules for them on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_int.h"

/* Parses the body of `shapes`: an array of {"dims": [...], "sufficient": bool}. */
static int parse_shapes(mdc__where *w, json_t *shapes, int strict) {
  if (!json_is_array(shapes) || json_array_size(shapes) > MDC__MAX_SHAPES)
    return mdc__terr(w, "expect: 'shapes' must be an array");
  for (size_t i = 0; i < json_array_size(shapes); i++) {
    json_t *s = json_array_get(shapes, i);
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
  return 0;
}

int mdc__expect_parse(mdc__where *w, const mdc_call_desc *c, json_t *ev, int strict, mdc__expect *e) {
  memset(e, 0, sizeof *e);
  e->smd = -1;
  e->allowed[0] = MD_NONE;
  e->n_allowed = 1;
  json_t *x = json_object_get(ev, "expect");
  if (!x) return 0;
  if (!c) return mdc__terr(w, "'expect' is only for driver calls");
  if (!json_is_object(x)) return mdc__terr(w, "'expect' must be an object");
  if (strict) {
    const char *key;
    json_t *v;
    json_object_foreach(x, key, v) {
      int known = strcmp(key, "status") == 0 || strcmp(key, "message") == 0;
      for (uint32_t i = 0; i < c->n_expect && !known; i++) known = strcmp(mdc_expect_key(c->expect[i]), key) == 0;
      if (!known) return mdc__terr(w, "expect: unknown field '%s' for %s", key, c->name);
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
  if (mdc__get_str(w, x, "message", 0, &e->message) ||
      mdc__get_str(w, x, mdc_expect_key(MDC_X_TIMING), 0, &e->timing) ||
      mdc__get_str(w, x, mdc_expect_key(MDC_X_BACKEND), 0, &e->backend))
    return -1;
  if (e->timing && strcmp(e->timing, "measured") && strcmp(e->timing, "unmeasured"))
    return mdc__terr(w, "expect: 'timing' is \"measured\" or \"unmeasured\"");
  const char *smd = mdc_expect_key(MDC_X_SUPPORTS_MEMORY_DOMAINS);
  if (json_object_get(x, smd) && mdc__get_bool(w, x, smd, 0, &e->smd)) return -1;
  e->shapes = json_object_get(x, mdc_expect_key(MDC_X_SHAPES));
  if (e->shapes && parse_shapes(w, e->shapes, strict)) return -1;
  e->leaks = json_object_get(x, mdc_expect_key(MDC_X_LEAKS));
  if (e->leaks) {
    static const char *const keys[] = {"buffers", "prepared_models", "events", "bytes", NULL};
    if (mdc__check_keys(w, e->leaks, keys, 1, "expect leaks")) return -1;
    uint64_t u;
    for (int i = 0; keys[i]; i++)
      if (mdc__get_u64(w, e->leaks, keys[i], 0, 0, UINT64_MAX, &u)) return -1;
  }
  e->supported = json_object_get(x, mdc_expect_key(MDC_X_SUPPORTED));
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

static void allowed_str(const mdc__expect *e, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < e->n_allowed && n < len; i++) {
    int k = snprintf(buf + n, len - n, "%s%s", i ? "|" : "", mdc__status_name(e->allowed[i]));
    if (k < 0) break;
    n += (size_t)k;
  }
}

int mdc__expect_allows(const mdc__expect *e, md_status st) {
  for (int i = 0; i < e->n_allowed; i++)
    if (e->allowed[i] == st) return 1;
  return 0;
}

int mdc__judge_status(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st, md_device *dev) {
  return mdc__judge_status_msg(r, w, e, st, st != MD_NONE ? r->drv->last_error(dev) : "");
}

int mdc__judge_status_msg(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st, const char *le) {
  int ok = mdc__expect_allows(e, st);
  if (!le) le = "(null)";
  if (mdc__verbose(r)) fprintf(mdc__verbose(r), "  -> %s%s%s%s\n", mdc__status_name(st), st ? " \"" : "", st ? le : "", st ? "\"" : "");
  if (!ok) {
    char exp[256];
    allowed_str(e, exp, sizeof exp);
    if (st != MD_NONE)
      return mdc__fail_call(r, w, le, exp, mdc__status_name(st), "status %s, expected %s (last_error: \"%s\")",
                            mdc__status_name(st), exp, le);
    return mdc__fail_call(r, w, NULL, exp, mdc__status_name(st), "status NONE, expected %s", exp);
  }
  if (st != MD_NONE && e->message && !strstr(le, e->message)) {
    /* SPEC 8.11: a message is advice. A mismatch is reported with the verdict, and fails only
     * when the replay asks for strict messages (the reference driver's own corpus run). */
    if (r->opts->strict_messages)
      return mdc__fail_call(r, w, le, e->message, le, "last_error \"%s\" does not contain \"%s\"", le, e->message);
    pthread_mutex_lock(&r->lock);
    size_t n = strlen(r->advisory);
    if (n + 8 < sizeof r->advisory)
      snprintf(r->advisory + n, sizeof r->advisory - n, "%sline %u: last_error \"%.120s\" lacks \"%.60s\"",
               n ? "; " : "", w->line, le, e->message);
    pthread_mutex_unlock(&r->lock);
    if (mdc__verbose(r)) fprintf(mdc__verbose(r), "  (advisory: the message lacks \"%s\")\n", e->message);
  }
  return 0;
}

static void dims_str(const uint32_t *d, uint32_t rank, char *buf, size_t len) {
  size_t n = 0;
  n += (size_t)snprintf(buf, len, "[");
  for (uint32_t i = 0; i < rank && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? ", " : "", d[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}

int mdc__judge_outputs(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st,
                       const md_output_shape *sh, uint32_t n, uint32_t n_outputs, const md_timing *tm) {
  char exp[512], act[512];
  /* mdc fills shapes with 0xA5 before the call: a rank that still reads so was not written. */
  for (uint32_t i = 0; i < n && i < n_outputs; i++)
    if (sh[i].rank == MDC__POISON32 && (st == MD_NONE || st == MD_OUTPUT_INSUFFICIENT_SIZE))
      return mdc__fail(r, w, "a shape for every output", "shapes[i] untouched",
                       "the driver did not write shapes[%u] (it still holds mdc's 0xA5 fill: rank %u); "
                       "SPEC 4: a shape for every output", i, sh[i].rank);
  if (st != MD_NONE && st != MD_OUTPUT_INSUFFICIENT_SIZE) {
    /* SPEC 4: every other failure leaves no shapes and no timing. */
    for (uint32_t i = 0; i < n; i++)
      if (sh[i].rank != 0)
        return mdc__fail(r, w, "rank 0", "rank != 0",
                         "on %s, shapes[%u] has rank %u%s (SPEC 4: a failure has no shapes)",
                         mdc__status_name(st), i, sh[i].rank,
                         sh[i].rank == MDC__POISON32 ? ": the driver did not clear it (mdc's 0xA5 fill)" : "");
    if (tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX) {
      snprintf(act, sizeof act, "on_device_ns %" PRIu64 ", in_driver_ns %" PRIu64, tm->on_device_ns,
               tm->in_driver_ns);
      return mdc__fail(r, w, "UINT64_MAX", act, "on %s, timing is %s (SPEC 4: a failure is unmeasured)",
                       mdc__status_name(st), act);
    }
  }
  if (e->shapes) {
    uint32_t ne = (uint32_t)json_array_size(e->shapes);
    if (ne != n)
      return mdc__fail(r, w, "", "", "expect lists %u shapes but the call returned %u (n_shapes)", ne, n);
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
                 sh[i].rank == MDC__POISON32 ? " (not written by the driver: mdc's 0xA5 fill)"
                 : sh[i].rank > MD_MAX_RANK ? " (rank over 8)" : "", sh[i].is_sufficient);
        return mdc__fail(r, w, exp, act, "%s, expected %s", act, exp);
      }
    }
  }
  if (e->timing) {
    int measured = tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX;
    if (measured != (strcmp(e->timing, "measured") == 0)) {
      snprintf(act, sizeof act, "on_device_ns %" PRIu64 ", in_driver_ns %" PRIu64, tm->on_device_ns,
               tm->in_driver_ns);
      return mdc__fail(r, w, e->timing, act, "timing %s, expected %s", act, e->timing);
    }
  }
  return 0;
}
