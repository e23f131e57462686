/* record.c - the recording driver: an md_driver table that forwards every call to a real driver
 * and writes it, with the results it observed as its expectations, to a trace (format v1,
 * docs/trace-format.md). `mdc record` hands it to a workload as --driver; the real driver's path
 * and the output file come from the environment:
 *   MDC_RECORD_REAL     the real driver (.so)            (required)
 *   MDC_RECORD_OUT      the trace to write               (required; blobs go to blobs/ beside it)
 *   MDC_RECORD_NAME     the trace's header name          (default "workloads/recorded")
 *   MDC_RECORD_PROGRAM  the command line, for the header (default "?")
 * The file is written when the library is unloaded (dlclose or process exit). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_int.h"
#include "md/config.h"
#include "md/loader.h"
#include "md/status.h"
#include "mdc/calls.h"

rec_state md__rec = {.mu = PTHREAD_MUTEX_INITIALIZER};
#define R (&md__rec)

static const char *dev_name(md_device *d) {
  for (size_t i = R->n_names; i-- > 0;)
    if (R->names[i].kind == REC_DEVICE && R->names[i].value == (uint64_t)(uintptr_t)d) return R->names[i].name;
  return "?";
}

/* The trace field of argument a of a call (mdc/calls.h: the keys the reader accepts). */
#define KEY(a) mdc_args[MDC_A_##a].key
#define EXPECT_KEY(x) mdc_expect_key(MDC_X_##x)

/* {"op": the call's name, "device": d, ["client": ref]} (the client when the call takes one). */
static json_t *ev(mdc_call call, md_device *d, md_handle client) {
  const mdc_call_desc *c = &mdc_calls[call];
  json_t *o = json_pack("{s:s,s:s}", "op", c->name, KEY(DEVICE), dev_name(d));
  if (c->flags & MDC_CALL_CLIENT) json_object_set_new(o, KEY(CLIENT), md__rec_ref(client));
  return o;
}

/* Forgets registered pool i (closing the recorder's fd). */
static void regpool_drop(size_t i) {
  if (R->regpools[i].mem.fd >= 0) close(R->regpools[i].mem.fd);
  R->regpools[i] = R->regpools[--R->n_regpools];
}

static void expect_status(json_t *o, md_status st) {
  if (st == MD_NONE) return;
  json_t *e = json_object_get(o, "expect");
  if (!e) {
    e = json_object();
    json_object_set_new(o, "expect", e);
  }
  const char *n = NULL;
  switch (st) {
#define X(v, name, text) case v: n = name; break;
    MD_STATUS_MAP(X)
#undef X
  }
  json_object_set_new(e, "status", n ? json_string(n) : json_integer((json_int_t)st));
}

static json_t *expect_obj(json_t *o) {
  json_t *e = json_object_get(o, "expect");
  if (!e) {
    e = json_object();
    json_object_set_new(o, "expect", e);
  }
  return e;
}

static void expect_shapes(json_t *o, md_status st, const md_output_shape *shapes, uint32_t n) {
  if ((st != MD_NONE && st != MD_OUTPUT_INSUFFICIENT_SIZE) || !shapes || !n) return;
  json_t *a = json_array();
  for (uint32_t i = 0; i < n; i++) {
    json_t *dims = json_array();
    for (uint32_t k = 0; k < shapes[i].rank && k < MD_MAX_RANK; k++) json_array_append_new(dims, json_integer(shapes[i].dims[k]));
    json_t *s = json_pack("{s:o}", "dims", dims);
    if (!shapes[i].is_sufficient) json_object_set_new(s, "sufficient", json_false());
    json_array_append_new(a, s);
  }
  json_object_set_new(expect_obj(o), EXPECT_KEY(SHAPES), a);
}

/* ---- wrapped entry points ------------------------------------------------------------------- */

/* The recorded config: the workload's own, less its `backend` key. The backend a trace was
 * recorded on is in its header (recorded_on.backend); which backend a replay uses is the replay's
 * choice (`mdc replay --config backend=...`), so a recorded trace is portable across backends. */
static char *portable_config(const char *config) {
  size_t len = md_config_without(config, "backend", NULL, 0) + 1;
  char *out = malloc(len);
  if (out) md_config_without(config, "backend", out, len);
  return out;
}

static md_status r_open_device(const char *config, md_device **out) {
  pthread_mutex_lock(&R->mu);
  md_device *d = NULL;
  md_status st = R->real->open_device(config, &d);
  if (out) *out = d;
  json_t *o = json_pack("{s:s}", "op", mdc_calls[MDC_CALL_OPEN_DEVICE].name);
  if (st == MD_NONE && d) {
    json_object_set_new(o, "as", json_string(md__rec_bind(REC_DEVICE, (uint64_t)(uintptr_t)d)));
    if (!R->backend[0]) {
      /* recorded_on.backend: asked once here, not written as an event (it changes nothing). */
      md_capabilities caps;
      memset(&caps, 0, sizeof caps);
      caps.struct_size = sizeof caps;
      if (R->real->get_capabilities(d, &caps) == MD_NONE) {
        snprintf(R->backend, sizeof R->backend, "%.31s", caps.backend);
        R->memory_domains = caps.supports_memory_domains != 0;
      }
    }
  }
  char *cfg = portable_config(config);
  json_object_set_new(o, KEY(CONFIG), json_string(cfg ? cfg : ""));
  free(cfg);
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static void r_close_device(md_device *d) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_CLOSE_DEVICE, d, 0);
  R->real->close_device(d);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
}

static md_status r_get_capabilities(md_device *d, md_capabilities *out) {
  pthread_mutex_lock(&R->mu);
  md_status st = R->real->get_capabilities(d, out);
  json_t *o = ev(MDC_CALL_GET_CAPABILITIES, d, 0);
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_get_supported_operations(md_device *d, const md_model *m, uint8_t *supported) {
  pthread_mutex_lock(&R->mu);
  char mname[24];
  json_t *o = ev(MDC_CALL_GET_SUPPORTED_OPERATIONS, d, 0);
  if (m) json_object_set_new(o, KEY(MODEL), json_string(md__rec_model(m, mname)));
  md_status st = R->real->get_supported_operations(d, m, supported);
  expect_status(o, st);
  if (st == MD_NONE && m && supported) {
    json_t *a = json_array();
    for (uint32_t i = 0; i < m->n_operations; i++) json_array_append_new(a, json_integer(supported[i] ? 1 : 0));
    json_object_set_new(expect_obj(o), EXPECT_KEY(SUPPORTED), a);
  }
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_open_client(md_device *d, md_handle *client) {
  pthread_mutex_lock(&R->mu);
  md_handle c = 0;
  md_status st = R->real->open_client(d, &c);
  if (client) *client = c;
  json_t *o = ev(MDC_CALL_OPEN_CLIENT, d, 0);
  if (st == MD_NONE) json_object_set_new(o, "as", json_string(md__rec_bind(REC_CLIENT, c)));
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_close_client(md_device *d, md_handle client, md_leak_report *leaks) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_CLOSE_CLIENT, d, client);
  md_leak_report lr;
  memset(&lr, 0, sizeof lr);
  md_status st = R->real->close_client(d, client, leaks ? &lr : NULL);
  if (leaks) *leaks = lr;
  if (st == MD_NONE)   /* its registered pools are released with it (SPEC 9) */
    for (size_t i = R->n_regpools; i-- > 0;)
      if (R->regpools[i].client == client && R->regpools[i].dev == d) regpool_drop(i);
  expect_status(o, st);
  if (st == MD_NONE && leaks)
    json_object_set_new(expect_obj(o), EXPECT_KEY(LEAKS),
                        json_pack("{s:i,s:i,s:i,s:I}", "buffers", (int)lr.buffers, "prepared_models",
                                  (int)lr.prepared_models, "events", (int)lr.events, "bytes",
                                  (json_int_t)lr.bytes));
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_prepare_model(md_device *d, md_handle client, const md_model *m, md_handle *prepared) {
  pthread_mutex_lock(&R->mu);
  char mname[24];
  const char *mn = m ? md__rec_model(m, mname) : NULL;
  json_t *o = ev(MDC_CALL_PREPARE_MODEL, d, client);
  if (mn) json_object_set_new(o, KEY(MODEL), json_string(mn));
  md_handle p = 0;
  md_status st = R->real->prepare_model(d, client, m, &p);
  if (prepared) *prepared = p;
  if (st == MD_NONE) json_object_set_new(o, "as", json_string(md__rec_bind(REC_PREPARED, p)));
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_release_prepared_model(md_device *d, md_handle client, md_handle prepared) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_RELEASE_PREPARED_MODEL, d, client);
  json_object_set_new(o, KEY(PREPARED), md__rec_ref(prepared));
  md_status st = R->real->release_prepared_model(d, client, prepared);
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static json_t *roles(const md_buffer_role *r, uint32_t n) {
  json_t *a = json_array();
  for (uint32_t i = 0; r && i < n; i++)
    json_array_append_new(a, json_pack("{s:i,s:i,s:f}", "model", (int)r[i].model_index, "io",
                                       (int)r[i].io_index, "p", (double)r[i].probability));
  return a;
}

static md_status r_allocate(md_device *d, md_handle client, const md_buffer_desc *desc,
                            const md_handle *prepared, uint32_t n_prepared,
                            const md_buffer_role *input_roles, uint32_t n_input_roles,
                            const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_ALLOCATE, d, client);
  json_t *dj = json_object();
  if (desc && desc->rank) {
    json_t *dims = json_array();
    for (uint32_t i = 0; i < desc->rank; i++) json_array_append_new(dims, json_integer(desc->dims ? desc->dims[i] : 0));
    json_object_set_new(dj, "dims", dims);
  }
  json_object_set_new(o, KEY(DESC), dj);
  json_t *pa = json_array();
  for (uint32_t i = 0; prepared && i < n_prepared; i++) json_array_append_new(pa, md__rec_ref(prepared[i]));
  json_object_set_new(o, KEY(PREPARED_LIST), pa);
  json_object_set_new(o, KEY(INPUT_ROLES), roles(input_roles, n_input_roles));
  json_object_set_new(o, KEY(OUTPUT_ROLES), roles(output_roles, n_output_roles));
  md_token t = 0;
  md_status st = R->real->allocate(d, client, desc, prepared, n_prepared, input_roles, n_input_roles,
                                   output_roles, n_output_roles, &t);
  if (token) *token = t;
  if (st == MD_NONE) json_object_set_new(o, "as", json_string(md__rec_bind(REC_TOKEN, t)));
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_copy_to(md_device *d, md_handle client, md_token src, const md_memory *dst) {
  pthread_mutex_lock(&R->mu);
  size_t idx = SIZE_MAX;
  const char *mn = dst ? md__rec_memory(dst, &idx) : NULL;
  json_t *o = ev(MDC_CALL_COPY_TO, d, client);
  json_object_set_new(o, KEY(TOKEN), md__rec_ref(src));
  if (mn) json_object_set_new(o, KEY(DST), json_string(mn));
  md_status st = R->real->copy_to(d, client, src, dst);
  expect_status(o, st);
  md__rec_emit(o);
  if (st == MD_NONE && dst) md__rec_check(idx, dst->fd);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_copy_from(md_device *d, md_handle client, md_token dst, const md_memory *src,
                             uint32_t rank, const uint32_t *dims) {
  pthread_mutex_lock(&R->mu);
  size_t idx;
  const char *mn = src ? md__rec_memory(src, &idx) : NULL;
  json_t *o = ev(MDC_CALL_COPY_FROM, d, client);
  json_object_set_new(o, KEY(TOKEN), md__rec_ref(dst));
  if (mn) json_object_set_new(o, KEY(SRC), json_string(mn));
  if (rank) {
    json_t *a = json_array();
    for (uint32_t i = 0; i < rank; i++) json_array_append_new(a, json_integer(dims ? dims[i] : 0));
    json_object_set_new(o, KEY(DIMS), a);
  }
  md_status st = R->real->copy_from(d, client, dst, src, rank, dims);
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_free_buffer(md_device *d, md_handle client, md_token token) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_FREE_BUFFER, d, client);
  json_object_set_new(o, KEY(TOKEN), md__rec_ref(token));
  md_status st = R->real->free_buffer(d, client, token);
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

enum { MAX_OUT_POOLS = 16 };

static md_status r_execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                           md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  pthread_mutex_lock(&R->mu);
  size_t mems[MAX_OUT_POOLS], n_out = 0;
  int fds[MAX_OUT_POOLS];
  json_t *rj = req ? md__rec_request(req, mems, fds, &n_out, MAX_OUT_POOLS) : NULL;
  json_t *o = ev(MDC_CALL_EXECUTE, d, client);
  json_object_set_new(o, KEY(PREPARED), md__rec_ref(prepared));
  if (rj) json_object_set_new(o, KEY(REQUEST), rj);
  if (!req || n_shapes != req->n_outputs) json_object_set_new(o, KEY(N_SHAPES), json_integer(n_shapes));
  md_status st = R->real->execute(d, client, prepared, req, shapes, n_shapes, timing);
  expect_status(o, st);
  expect_shapes(o, st, shapes, req && req->n_outputs < n_shapes ? req->n_outputs : n_shapes);
  md__rec_emit(o);
  if (st == MD_NONE)
    for (size_t i = 0; i < n_out; i++) md__rec_check(mems[i], fds[i]);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_execute_async(md_device *d, md_handle client, md_handle prepared,
                                 const md_request *req, md_handle *event) {
  pthread_mutex_lock(&R->mu);
  rec_pending pend = {0};
  json_t *rj = req ? md__rec_request(req, pend.mems, pend.fds, &pend.n, MAX_OUT_POOLS) : NULL;
  json_t *o = ev(MDC_CALL_EXECUTE_ASYNC, d, client);
  json_object_set_new(o, KEY(PREPARED), md__rec_ref(prepared));
  if (rj) json_object_set_new(o, KEY(REQUEST), rj);
  md_handle e = 0;
  md_status st = R->real->execute_async(d, client, prepared, req, &e);
  if (event) *event = e;
  if (st == MD_NONE) {
    json_object_set_new(o, "as", json_string(md__rec_bind(REC_EVENT, e)));
    /* The pools are read back after the wait: keep descriptors the caller may close meanwhile. */
    pend.event = e;
    for (size_t i = 0; i < pend.n; i++) pend.fds[i] = fcntl(pend.fds[i], F_DUPFD_CLOEXEC, 0);
    if (R->n_pending == R->cap_pending) {
      size_t cap = R->cap_pending ? 2 * R->cap_pending : 8;
      rec_pending *p = realloc(R->pending, cap * sizeof *p);
      if (p) R->pending = p, R->cap_pending = cap;
    }
    if (R->n_pending < R->cap_pending) R->pending[R->n_pending++] = pend;
  }
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_wait_event(md_device *d, md_handle client, md_handle event, uint64_t timeout_ns,
                              md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_WAIT_EVENT, d, client);
  json_object_set_new(o, KEY(EVENT), md__rec_ref(event));
  if (timeout_ns <= (uint64_t)INT64_MAX) json_object_set_new(o, KEY(TIMEOUT_NS), json_integer((json_int_t)timeout_ns));
  json_object_set_new(o, KEY(N_SHAPES), json_integer(n_shapes));
  md_status st = R->real->wait_event(d, client, event, timeout_ns, shapes, n_shapes, timing);
  expect_status(o, st);
  expect_shapes(o, st, shapes, n_shapes);
  md__rec_emit(o);
  /* A wait that timed out leaves the event alive: its outputs are checked at the later wait. */
  if (st != MD_MISSED_DEADLINE_TRANSIENT)
    for (size_t i = 0; i < R->n_pending; i++) {
      rec_pending *p = &R->pending[i];
      if (p->event != event) continue;
      for (size_t k = 0; k < p->n; k++) {
        if (st == MD_NONE && p->fds[k] >= 0) md__rec_check(p->mems[k], p->fds[k]);
        if (p->fds[k] >= 0) close(p->fds[k]);
      }
      R->pending[i] = R->pending[--R->n_pending];
      break;
    }
  pthread_mutex_unlock(&R->mu);
  return st;
}

static const char *r_last_error(md_device *d) { return R->real->last_error(d); }

/* SPEC 9: in the table only when the real driver has them. */
static md_status r_register_memory(md_device *d, md_handle client, const md_memory *mem, md_handle *pool) {
  pthread_mutex_lock(&R->mu);
  size_t idx = SIZE_MAX;
  const char *mn = mem ? md__rec_memory(mem, &idx) : NULL;
  json_t *o = ev(MDC_CALL_REGISTER_MEMORY, d, client);
  if (mn) json_object_set_new(o, KEY(MEMORY), json_string(mn));
  md_handle h = 0;
  md_status st = R->real->register_memory(d, client, mem, pool ? &h : NULL);
  if (pool) *pool = h;
  R->used_registered = 1;
  if (st == MD_NONE && pool) {
    json_object_set_new(o, "as", json_string(md__rec_bind(REC_POOL, h)));
    if (R->n_regpools == R->cap_regpools) {
      size_t cap = R->cap_regpools ? 2 * R->cap_regpools : 8;
      rec_regpool *p = realloc(R->regpools, cap * sizeof *p);
      if (p) R->regpools = p, R->cap_regpools = cap;
    }
    if (R->n_regpools < R->cap_regpools) {
      /* The recorder's own duplicate: the workload may close or reuse its fd from now on. */
      rec_regpool rp = {.handle = h, .client = client, .dev = d, .mem = *mem};
      rp.mem.fd = fcntl(mem->fd, F_DUPFD_CLOEXEC, 0);
      R->regpools[R->n_regpools++] = rp;
    }
  }
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

static md_status r_unregister_memory(md_device *d, md_handle client, md_handle pool) {
  pthread_mutex_lock(&R->mu);
  json_t *o = ev(MDC_CALL_UNREGISTER_MEMORY, d, client);
  json_object_set_new(o, KEY(POOL), md__rec_ref(pool));
  md_status st = R->real->unregister_memory(d, client, pool);
  R->used_registered = 1;
  if (st == MD_NONE)
    for (size_t i = R->n_regpools; i-- > 0;)
      if (R->regpools[i].handle == pool && R->regpools[i].dev == d) {
        regpool_drop(i);
        break;
      }
  expect_status(o, st);
  md__rec_emit(o);
  pthread_mutex_unlock(&R->mu);
  return st;
}

/* ---- loading -------------------------------------------------------------------------------- */

static void init(void) {
  const char *real = getenv("MDC_RECORD_REAL"), *out = getenv("MDC_RECORD_OUT");
  const char *name = getenv("MDC_RECORD_NAME"), *prog = getenv("MDC_RECORD_PROGRAM");
  if (!real || !*real || !out || !*out) {
    fprintf(stderr, "mdc-record: MDC_RECORD_REAL and MDC_RECORD_OUT must name the real driver and "
                    "the trace to write (run the workload through `mdc record`)\n");
    return;
  }
  char err[512];
  R->real = md_driver_load(real, NULL, &R->dl, err, sizeof err);
  if (!R->real) {
    fprintf(stderr, "mdc-record: %s\n", err);
    return;
  }
  snprintf(R->out, sizeof R->out, "%s", out);
  snprintf(R->blob_dir, sizeof R->blob_dir, "%s", out);
  char *slash = strrchr(R->blob_dir, '/');
  if (slash) snprintf(slash + 1, sizeof R->blob_dir - (size_t)(slash + 1 - R->blob_dir), "blobs");
  else snprintf(R->blob_dir, sizeof R->blob_dir, "blobs");
  snprintf(R->trace_name, sizeof R->trace_name, "%s", name && *name ? name : "workloads/recorded");
  snprintf(R->program, sizeof R->program, "%s", prog && *prog ? prog : "?");
  R->events = open_memstream(&R->buf, &R->buf_len);
  if (!R->events) {
    fprintf(stderr, "mdc-record: open_memstream: %s\n", strerror(errno));
    return;
  }
  /* The real table may be a v1 table, shorter than md_driver: copy what it has. */
  md_driver t;
  memset(&t, 0, sizeof t);
  memcpy(&t, R->real, R->real->struct_size < sizeof t ? R->real->struct_size : sizeof t);
  t.open_device = r_open_device;
  t.close_device = r_close_device;
  t.get_capabilities = r_get_capabilities;
  t.get_supported_operations = r_get_supported_operations;
  t.open_client = r_open_client;
  t.close_client = r_close_client;
  t.prepare_model = r_prepare_model;
  t.release_prepared_model = r_release_prepared_model;
  t.allocate = r_allocate;
  t.copy_to = r_copy_to;
  t.copy_from = r_copy_from;
  t.free_buffer = r_free_buffer;
  t.execute = r_execute;
  t.execute_async = r_execute_async;
  t.wait_event = r_wait_event;
  t.last_error = r_last_error;
  t.register_memory = MD_DRIVER_HAS(R->real, register_memory) ? r_register_memory : NULL;
  t.unregister_memory = MD_DRIVER_HAS(R->real, unregister_memory) ? r_unregister_memory : NULL;
  t.struct_size = sizeof t;
  R->table = t;
  R->ok = 1;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The recorder's only export. NULL (with a message on stderr) when the environment does not name
 * a loadable real driver and an output file. Thread-safe. */
const md_driver *md_driver_entry(uint32_t abi_version) {
  if (abi_version != MD_DRIVER_ABI_VERSION) return NULL;
  pthread_once(&once, init);
  return R->ok ? &R->table : NULL;
}

__attribute__((destructor)) static void fini(void) {
  pthread_mutex_lock(&R->mu);
  md__rec_finish();
  pthread_mutex_unlock(&R->mu);
}
