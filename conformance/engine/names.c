/* names.c - the names table: every object a trace produced (`as`), by name, with the line that
 * produced it. A hash index over stable entries; a mutex because concurrent lanes produce and
 * look up names at the same time. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

int mdc__name_valid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof(((mdc__name *)0)->name)) return 0;
  if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return 0;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

static size_t hash(const char *s) {
  size_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

int mdc__names_init(mdc__names *t) {
  memset(t, 0, sizeof *t);
  return pthread_mutex_init(&t->lock, NULL) == 0 ? 0 : -1;
}

void mdc__names_free(mdc__names *t) {
  for (size_t i = 0; i < t->n; i++) {
    mdc__name *e = t->all[i];
    mdc__pool_free(e->pool);
    if (e->request) json_decref(e->request);
    free(e->collected);
    free(e);
  }
  free(t->all);
  free(t->index);
  pthread_mutex_destroy(&t->lock);
  memset(t, 0, sizeof *t);
}

static mdc__name *find_locked(mdc__names *t, const char *name) {
  if (!t->index_cap) return NULL;
  for (size_t i = hash(name) & (t->index_cap - 1);; i = (i + 1) & (t->index_cap - 1)) {
    mdc__name *e = t->index[i];
    if (!e) return NULL;
    if (strcmp(e->name, name) == 0) return e;
  }
}

mdc__name *mdc__names_find(mdc__names *t, const char *name) {
  pthread_mutex_lock(&t->lock);
  mdc__name *e = find_locked(t, name);
  pthread_mutex_unlock(&t->lock);
  return e;
}

static int grow(mdc__names *t) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    mdc__name **all = realloc(t->all, cap * sizeof *all);
    if (!all) return -1;
    t->all = all;
    t->cap = cap;
  }
  if ((t->n + 1) * 2 > t->index_cap) {
    size_t cap = t->index_cap ? t->index_cap * 2 : 128;
    mdc__name **idx = calloc(cap, sizeof *idx);
    if (!idx) return -1;
    for (size_t i = 0; i < t->n; i++) {
      size_t j = hash(t->all[i]->name) & (cap - 1);
      while (idx[j]) j = (j + 1) & (cap - 1);
      idx[j] = t->all[i];
    }
    free(t->index);
    t->index = idx;
    t->index_cap = cap;
  }
  return 0;
}

int mdc__names_declare(mdc__where *w, mdc__names *t, const char *field, const char *name, mdc_obj kind,
                       mdc__name **out) {
  if (!mdc__name_valid(name))
    return mdc__terr(w, "'%s': \"%s\" is not a name ([A-Za-z_][A-Za-z0-9_.-]*, under 128 chars)", field, name);
  pthread_mutex_lock(&t->lock);
  mdc__name *e = find_locked(t, name);
  if (e) {
    uint32_t line = e->line;
    int same = line == w->line && e->kind == kind;
    pthread_mutex_unlock(&t->lock);
    if (!same) return mdc__terr(w, "'%s': name '%s' is already used (line %u)", field, name, line);
    *out = e;
    return 0;
  }
  if (grow(t) || !(e = calloc(1, sizeof *e))) {
    pthread_mutex_unlock(&t->lock);
    return mdc__terr(w, "out of memory");
  }
  snprintf(e->name, sizeof e->name, "%s", name);
  e->kind = kind;
  e->line = w->line;
  t->all[t->n++] = e;
  size_t j = hash(name) & (t->index_cap - 1);
  while (t->index[j]) j = (j + 1) & (t->index_cap - 1);
  t->index[j] = e;
  pthread_mutex_unlock(&t->lock);
  *out = e;
  return 0;
}

static int is_handle_kind(mdc_obj k) {
  return k == MDC_OBJ_CLIENT || k == MDC_OBJ_PREPARED || k == MDC_OBJ_TOKEN || k == MDC_OBJ_EVENT ||
         k == MDC_OBJ_POOL;
}

int mdc__names_get(mdc__names *t, const char *name, mdc__name *copy) {
  pthread_mutex_lock(&t->lock);
  mdc__name *e = find_locked(t, name);
  if (e) *copy = *e;
  pthread_mutex_unlock(&t->lock);
  return e ? 0 : -1;
}

void mdc__names_bind(mdc__names *t, mdc__name *e, uint64_t value, md_device *dev,
                     uint32_t n_outputs) {
  pthread_mutex_lock(&t->lock);
  e->value = value;
  e->dev = dev;
  e->n_outputs = n_outputs;
  e->bound = 1;
  e->closed = 0;
  pthread_mutex_unlock(&t->lock);
}

static int bound_name(mdc__where *w, mdc__names *t, const char *name, const char *what,
                      mdc__name *out) {
  if (mdc__names_get(t, name, out)) return mdc__terr(w, "'%s': no object named '%s'", what, name);
  if (!out->bound)
    return mdc__terr(w, "'%s': '%s' was never produced (its call at line %u failed)", what, name,
                     out->line);
  return 0;
}

int mdc__resolve_handle(mdc__where *w, mdc__names *t, json_t *v, const char *what, uint64_t *out) {
  mdc__name ent, *e = &ent;
  if (json_is_string(v)) {
    if (bound_name(w, t, json_string_value(v), what, e)) return -1;
    if (!is_handle_kind(e->kind))
      return mdc__terr(w, "'%s': '%s' is a %s, not a handle or token", what, e->name,
                       mdc_obj_name(e->kind));
    *out = e->value;
    return 0;
  }
  if (json_is_object(v)) {
    json_t *lit = json_object_get(v, "literal"), *forge = json_object_get(v, "forge");
    if (lit && json_object_size(v) == 1) return mdc__u64_value(w, lit, what, out);
    json_t *xv = json_object_get(v, "xor"), *av = json_object_get(v, "add");
    if (forge && json_object_size(v) == 2 && (xv || av)) {
      /* {"forge": name, "xor": bits}: bits flipped; {"forge": name, "add": n}: a neighbour
       * (n may be negative; the sum wraps as a 64-bit value). */
      uint64_t bits = 0;
      if (!json_is_string(forge)) return mdc__terr(w, "'%s': 'forge' takes a name", what);
      if (xv && mdc__u64_value(w, xv, what, &bits)) return -1;
      if (av && !json_is_integer(av)) return mdc__terr(w, "'%s': 'add' takes an integer", what);
      if (bound_name(w, t, json_string_value(forge), what, e)) return -1;
      if (!is_handle_kind(e->kind))
        return mdc__terr(w, "'%s': '%s' is a %s, not a handle or token", what, e->name,
                         mdc_obj_name(e->kind));
      *out = xv ? e->value ^ bits : e->value + (uint64_t)(int64_t)json_integer_value(av);
      return 0;
    }
  }
  return mdc__terr(w, "'%s' takes a name, {\"literal\": v}, {\"forge\": name, \"xor\": bits} or {\"forge\": name, \"add\": n}", what);
}

int mdc__resolve_memory(mdc__where *w, mdc__names *t, json_t *v, const char *what, mdc__pool **out) {
  mdc__name ent, *e = &ent;
  if (!json_is_string(v)) return mdc__terr(w, "'%s' takes a memory name", what);
  if (bound_name(w, t, json_string_value(v), what, e)) return -1;
  if (e->kind != MDC_OBJ_MEMORY)
    return mdc__terr(w, "'%s': '%s' is a %s, not a memory", what, e->name, mdc_obj_name(e->kind));
  *out = e->pool;
  return 0;
}
