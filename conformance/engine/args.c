/* args.c - a driver call's arguments, resolved from its trace line: handles and memories by
 * name (or forged), the device and client a call omits, models and requests by name or inline,
 * dims, roles, and the `as` name it will bind. */
#include <string.h>

#include "engine_int.h"

int mdc__arg_client(mdc__run *r, mdc__where *w, json_t *ev, uint64_t *client, md_device **hint) {
  json_t *c = json_object_get(ev, mdc_args[MDC_A_CLIENT].key);
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

int mdc__arg_device(mdc__run *r, mdc__where *w, json_t *ev, md_device *hint, md_device **dev) {
  json_t *d = json_object_get(ev, mdc_args[MDC_A_DEVICE].key);
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
    if (e.kind != MDC_OBJ_DEVICE)
      return mdc__terr(w, "'device': '%s' is a %s, not a device", e.name, mdc_obj_name(e.kind));
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

int mdc__arg_model(mdc__run *r, mdc__where *w, json_t *ev, const md_model **out) {
  json_t *m = json_object_get(ev, mdc_args[MDC_A_MODEL].key);
  if (!m) return mdc__terr(w, "missing field 'model'");
  if (json_is_string(m)) {
    mdc__name e;
    if (mdc__names_get(&r->names, json_string_value(m), &e) || !e.bound)
      return mdc__terr(w, "'model': no model named '%s'", json_string_value(m));
    if (e.kind != MDC_OBJ_MODEL)
      return mdc__terr(w, "'model': '%s' is a %s, not a model", e.name, mdc_obj_name(e.kind));
    *out = &e.model->m;
    return 0;
  }
  if (!json_is_object(m)) return mdc__terr(w, "'model' takes a model name or an inline model");
  mdc__model *mm;
  if (mdc__model_build(w, &r->names, m, r->strict, &mm) || mdc__run_keep_model(r, w, mm)) return -1;
  *out = &mm->m;
  return 0;
}

int mdc__arg_request(mdc__run *r, mdc__where *w, json_t *ev, mdc__arena *a, md_request *out) {
  json_t *q = json_object_get(ev, mdc_args[MDC_A_REQUEST].key);
  if (!q) return mdc__terr(w, "missing field 'request'");
  if (json_is_string(q)) {
    mdc__name e;
    if (mdc__names_get(&r->names, json_string_value(q), &e) || !e.bound)
      return mdc__terr(w, "'request': no request named '%s'", json_string_value(q));
    if (e.kind != MDC_OBJ_REQUEST)
      return mdc__terr(w, "'request': '%s' is a %s, not a request", e.name, mdc_obj_name(e.kind));
    q = e.request;
  } else if (!json_is_object(q)) {
    return mdc__terr(w, "'request' takes a request name or an inline request");
  }
  return mdc__request_build(w, &r->names, q, r->strict, r->hdr.minor, 1, a, out);
}

int mdc__arg_handle(mdc__run *r, mdc__where *w, json_t *ev, mdc_arg_id id, uint64_t *out) {
  const char *key = mdc_args[id].key;
  json_t *v = json_object_get(ev, key);
  if (!v) return mdc__terr(w, "missing field '%s'", key);
  return mdc__resolve_handle(w, &r->names, v, key, out);
}

int mdc__arg_memory(mdc__run *r, mdc__where *w, json_t *ev, mdc_arg_id id, mdc__pool **out) {
  const char *key = mdc_args[id].key;
  json_t *v = json_object_get(ev, key);
  if (!v) return mdc__terr(w, "missing field '%s'", key);
  return mdc__resolve_memory(w, &r->names, v, key, out);
}

int mdc__arg_as(mdc__run *r, mdc__where *w, json_t *ev, mdc_obj kind, int required, mdc__name **out) {
  const char *as;
  *out = NULL;
  if (mdc__get_str(w, ev, "as", required, &as)) return -1;
  if (!as) return 0;
  return mdc__names_declare(w, &r->names, "as", as, kind, out);
}

int mdc__arg_dims(mdc__where *w, mdc__arena *a, json_t *obj, const char *key, uint32_t *rank,
                  uint32_t **dims) {
  return mdc__get_u32_array(w, a, obj, key, MDC__MAX_DIMS, rank, dims);
}

int mdc__arg_roles(mdc__where *w, mdc__arena *a, json_t *ev, mdc_arg_id id, int strict,
                   md_buffer_role **out, uint32_t *n) {
  const char *key = mdc_args[id].key;
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
