/* events.c - the replayer's own events (not driver calls): the pools it makes (`memory`,
 * `bad_memory`), writing and checking their bytes (`fill`, `check`), closing or replacing their
 * fds (`close_fd`, `replace_fd`), models and requests defined
 * by name, and the markers of a concurrent block. Their table feeds the reader's checks and the
 * docs' event table, as mdc/calls.h does for driver calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_int.h"

static int ev_memory(mdc__run *r, mdc__where *w, json_t *ev, int bad) {
  mdc__name *as;
  mdc__pool *p;
  if (mdc__arg_as(r, w, ev, MDC_OBJ_MEMORY, 1, &as)) return -1;
  if (bad ? mdc__pool_bad(w, ev, &p) : mdc__pool_make(w, ev, r->strict, r->opts->keep_files, &p)) return -1;
  mdc__pool_free(as->pool); /* only on a rebind */
  as->pool = p;
  mdc__names_bind(&r->names, as, 0, NULL, 0);
  return 0;
}

static int ev_good_memory(mdc__run *r, mdc__where *w, json_t *ev) { return ev_memory(r, w, ev, 0); }
static int ev_bad_memory(mdc__run *r, mdc__where *w, json_t *ev) { return ev_memory(r, w, ev, 1); }

/* fill writes a payload into a pool; check compares a pool's bytes with one (a Fail on mismatch). */
static int fill_check(mdc__run *r, mdc__where *w, json_t *ev, int check) {
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
      if (r->opts->observe && !r->in_block) {
        mdc_observation o = {.line = w->line, .op = "check", .is_check = 1, .type = mdc__elem_name(type),
                             .data = span, .len = b.len};
        r->opts->observe(r->opts->observe_ctx, &o);
      }
      int differs = mdc__compare(type, span, b.data, b.len / mdc__elem_size(type), atol, rtol, exp,
                                 sizeof exp, act, sizeof act, msg, sizeof msg);
      /* A tallied check counts instead of failing (at least one reader saw the new data...). */
      const char *tally = json_string_value(json_object_get(ev, "tally"));
      if (tally) rc = mdc__tally_add(r, w, tally, differs ? "mismatch" : "match");
      else if (differs) rc = mdc__fail(r, w, exp, act, "%s", msg);
      else rc = 0;
    }
  }
  free(b.data);
  return rc;
}

static int ev_fill(mdc__run *r, mdc__where *w, json_t *ev) { return fill_check(r, w, ev, 0); }
static int ev_check(mdc__run *r, mdc__where *w, json_t *ev) { return fill_check(r, w, ev, 1); }

/* close_fd and replace_fd (1.1): what a client may do with a pool's fd after registering it
 * (contract 9). The replayer keeps its own mapping of the file, so fill and check still work. */
static int fd_event(mdc__run *r, mdc__where *w, json_t *ev, const char *key, mdc__pool **out) {
  json_t *mv = json_object_get(ev, key);
  if (!mv) return mdc__terr(w, "missing field '%s'", key);
  if (mdc__resolve_memory(w, &r->names, mv, key, out)) return -1;
  if (!(*out)->map) return mdc__terr(w, "'%s': a bad_memory descriptor has no fd of its own", key);
  if ((*out)->fds[0] < 0) return mdc__terr(w, "'%s': its fd was closed by an earlier close_fd", key);
  return 0;
}

static int ev_close_fd(mdc__run *r, mdc__where *w, json_t *ev) {
  mdc__pool *p;
  if (fd_event(r, w, ev, "memory", &p)) return -1;
  close(p->fds[0]);   /* the descriptor keeps the number, which no longer names the file */
  p->fds[0] = -1;
  return 0;
}

static int ev_replace_fd(mdc__run *r, mdc__where *w, json_t *ev) {
  mdc__pool *p, *with;
  if (fd_event(r, w, ev, "memory", &p) || fd_event(r, w, ev, "with", &with)) return -1;
  if (p == with) return mdc__terr(w, "'with' names the same memory");
  /* The memory's fd number now names with's file (its own file stays mapped by the replayer). */
  if (dup3(with->fds[0], p->fds[0], O_CLOEXEC) < 0) return mdc__terr(w, "dup3: %s", strerror(errno));
  p->keep = 0;   /* its fd names another pool's file: kept, two later pools would share one */
  return 0;
}

static int ev_model(mdc__run *r, mdc__where *w, json_t *ev) {
  mdc__name *as;
  mdc__model *m;
  if (mdc__arg_as(r, w, ev, MDC_OBJ_MODEL, 1, &as) || mdc__model_build(w, &r->names, ev, r->strict, &m) ||
      mdc__run_keep_model(r, w, m))
    return -1;
  as->model = m;
  mdc__names_bind(&r->names, as, 0, NULL, 0);
  return 0;
}

static int ev_request(mdc__run *r, mdc__where *w, json_t *ev) {
  mdc__name *as;
  mdc__arena a = {0};
  md_request q;
  /* Only its shape is checked now: its names may be produced later. */
  int rc = mdc__arg_as(r, w, ev, MDC_OBJ_REQUEST, 1, &as) ||
           mdc__request_build(w, &r->names, ev, r->strict, r->hdr.minor, 0, &a, &q);
  mdc__arena_free(&a);
  if (rc) return -1;
  if (as->request) json_decref(as->request);
  as->request = json_incref(ev);
  mdc__names_bind(&r->names, as, 0, NULL, 0);
  return 0;
}

const mdc__event_desc mdc__events[] = {
    {"memory", 0,
     {"as", "kind", "size", "offset", "prot", "file_size", "data", "width", "height", "layers", "format"},
     ev_good_memory,
     "`as`, `kind` (`ashmem`, `mmap_fd`, `blob`, `hardware_buffer`), `size`, optional `offset`, `prot`, "
     "`file_size`, `data`, `width/height/layers/format`",
     "creates a real pool: a memfd or a temporary file, mapped by the replayer to fill and check it"},
    {"bad_memory", 0,
     {"as", "kind", "fd", "offset", "size", "prot", "width", "height", "layers", "format"},
     ev_bad_memory, "`as`, every `md_memory` field literally", "a descriptor for validation cases"},
    {"fill", MDC__EV_IN_BLOCK | MDC__EV_WRITES_MEMORY, {"memory", "offset", "data"}, ev_fill, "`memory`, `offset`, `data`",
     "writes a payload into a pool"},
    {"check", MDC__EV_IN_BLOCK | MDC__EV_READS_MEMORY, {"memory", "offset", "type", "data", "values", "atol", "rtol"}, ev_check,
     "`memory`, `offset`, `type`, `data` or `values`, optional `atol`, `rtol`", "compares pool contents"},
    {"model", 0, {"as", "operands", "operations", "inputs", "outputs", "operand_values", "pools"}, ev_model,
     "`as`, the model", "defines a model to use by name"},
    {"request", 0, {"as", "inputs", "outputs", "pools"}, ev_request, "`as`, the request",
     "defines a request to use by name"},
    {"close_fd", MDC__EV_V11, {"memory"}, ev_close_fd, "`memory`",
     "1.1: closes the pool's fd (its descriptor keeps the number; the replayer's own mapping stays for fill and check)"},
    {"replace_fd", MDC__EV_V11, {"memory", "with"}, ev_replace_fd, "`memory`, `with`",
     "1.1: the pool's fd number now names the file of `with` (dup2)"},
    {"expect_tally", MDC__EV_V11, {"tally", "exactly", "at_least", "at_most"}, mdc__expect_tally,
     "`tally`, `exactly`, `at_least`, `at_most` (each `{\"LABEL\": count}`)",
     "judges the counts of a tally (1.1)"},
    {"expect_unpredictable", MDC__EV_V11, {"collections"}, mdc__expect_unpredictable,
     "`collections` (names of `collect`ions; one that passes is enough)",
     "SPEC 8.12: no two handles of a collection differ only in their low 32 bits (1.1)"},
    {"concurrent", MDC__EV_BLOCK_START, {"lanes", "repeat"}, NULL, "`lanes`, `repeat`",
     "starts a concurrent block"},
    {"end_concurrent", MDC__EV_BLOCK_END, {0}, NULL, "", "ends it"},
};
const size_t mdc__n_events = sizeof mdc__events / sizeof mdc__events[0];

const mdc__event_desc *mdc__event_find(const char *name) {
  for (size_t i = 0; i < mdc__n_events; i++)
    if (strcmp(mdc__events[i].name, name) == 0) return &mdc__events[i];
  return NULL;
}
