/* util.c - the engine's small shared helpers: trace errors, arenas, JSON field access, enums. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "md/status.h"

int mdc__terr(mdc__where *w, const char *fmt, ...) {
  int n = snprintf(w->msg, sizeof w->msg, "%s:%u: %s: ", w->path ? w->path : "?", w->line,
                   w->op ? w->op : "trace");
  if (n < 0) n = 0;
  if ((size_t)n < sizeof w->msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg + n, sizeof w->msg - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- arena ---- */
struct mdc__block {
  struct mdc__block *next;
  max_align_t align[]; /* the allocation itself */
};

void *mdc__arena_alloc(mdc__arena *a, size_t n, size_t count) {
  if (count && n > (SIZE_MAX - sizeof(struct mdc__block)) / count) return NULL;
  size_t bytes = n * count;
  struct mdc__block *b = calloc(1, sizeof *b + (bytes ? bytes : 1));
  if (!b) return NULL;
  b->next = a->head;
  a->head = b;
  return b->align;
}

char *mdc__arena_strdup(mdc__arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mdc__arena_alloc(a, 1, n);
  if (p) memcpy(p, s, n);
  return p;
}

void mdc__arena_free(mdc__arena *a) {
  while (a->head) {
    struct mdc__block *b = a->head;
    a->head = b->next;
    free(b);
  }
}

/* ---- JSON helpers ---- */
int mdc__check_keys(mdc__where *w, json_t *obj, const char *const *allowed, int strict,
                    const char *what) {
  if (!json_is_object(obj)) return mdc__terr(w, "%s must be an object", what ? what : "it");
  if (!strict) return 0;
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    int known = 0;
    for (const char *const *a = allowed; *a; a++)
      if (strcmp(*a, key) == 0) known = 1;
    if (!known)
      return what ? mdc__terr(w, "%s: unknown field '%s'", what, key)
                  : mdc__terr(w, "unknown field '%s'", key);
  }
  return 0;
}

int mdc__u64_value(mdc__where *w, json_t *v, const char *what, uint64_t *out) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 0) return mdc__terr(w, "'%s': %lld is negative", what, (long long)i);
    *out = (uint64_t)i;
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    char *end = NULL;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0' || s[0] == ' ')
      return mdc__terr(w, "'%s': \"%s\" is not an unsigned integer", what, s);
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || *end) return mdc__terr(w, "'%s': \"%s\" is not a 64-bit unsigned integer", what, s);
    *out = x;
    return 0;
  }
  return mdc__terr(w, "'%s' must be an integer or a \"0x...\" string", what);
}

int mdc__get_int(mdc__where *w, json_t *obj, const char *key, int required, int64_t def,
                 int64_t lo, int64_t hi, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    if (required) return mdc__terr(w, "missing field '%s'", key);
    *out = def;
    return 0;
  }
  if (!json_is_integer(v)) return mdc__terr(w, "'%s' must be an integer", key);
  json_int_t i = json_integer_value(v);
  if (i < lo || i > hi)
    return mdc__terr(w, "'%s': %lld is outside [%lld, %lld]", key, (long long)i, (long long)lo,
                     (long long)hi);
  *out = i;
  return 0;
}

int mdc__get_u64(mdc__where *w, json_t *obj, const char *key, int required, uint64_t def,
                 uint64_t hi, uint64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    if (required) return mdc__terr(w, "missing field '%s'", key);
    *out = def;
    return 0;
  }
  uint64_t x;
  if (mdc__u64_value(w, v, key, &x)) return -1;
  if (x > hi)
    return mdc__terr(w, "'%s': %" PRIu64 " is over the limit %" PRIu64, key, x, hi);
  *out = x;
  return 0;
}

int mdc__num_value(mdc__where *w, json_t *v, const char *what, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (strcmp(s, "nan") == 0 || strcmp(s, "NaN") == 0) { *out = NAN; return 0; }
    if (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0) { *out = INFINITY; return 0; }
    if (strcmp(s, "-inf") == 0) { *out = -INFINITY; return 0; }
  }
  return mdc__terr(w, "'%s' must be a number (or \"nan\", \"inf\", \"-inf\")", what);
}

int mdc__get_num(mdc__where *w, json_t *obj, const char *key, double def, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  return mdc__num_value(w, v, key, out);
}

int mdc__get_str(mdc__where *w, json_t *obj, const char *key, int required, const char **out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    if (required) return mdc__terr(w, "missing field '%s'", key);
    *out = NULL;
    return 0;
  }
  if (!json_is_string(v)) return mdc__terr(w, "'%s' must be a string", key);
  *out = json_string_value(v);
  return 0;
}

int mdc__get_bool(mdc__where *w, json_t *obj, const char *key, int def, int *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (json_is_boolean(v)) {
    *out = json_is_true(v);
    return 0;
  }
  if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
    *out = (int)json_integer_value(v);
    return 0;
  }
  return mdc__terr(w, "'%s' must be true or false", key);
}

int mdc__get_u32_array(mdc__where *w, mdc__arena *a, json_t *obj, const char *key, uint32_t max,
                       uint32_t *count, uint32_t **out) {
  json_t *v = json_object_get(obj, key);
  *count = 0;
  *out = NULL;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v)) return mdc__terr(w, "'%s' must be an array", key);
  size_t n = json_array_size(v);
  if (n > max) return mdc__terr(w, "'%s' has %zu entries (limit %u)", key, n, max);
  uint32_t *p = mdc__arena_alloc(a, sizeof *p, n);
  if (!p) return mdc__terr(w, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(v, i);
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > UINT32_MAX)
      return mdc__terr(w, "'%s'[%zu] must be an integer in [0, 4294967295]", key, i);
    p[i] = (uint32_t)json_integer_value(e);
  }
  *count = (uint32_t)n;
  *out = p;
  return 0;
}

/* ---- enums ---- */
#define MDC__STATUS_ENTRY(e, name, text) {name, e},
const mdc__enum mdc__statuses[] = {MD_STATUS_MAP(MDC__STATUS_ENTRY){NULL, 0}};

const mdc__enum mdc__operand_types[] = {
    {"FLOAT32", MD_FLOAT32}, {"INT32", MD_INT32}, {"UINT32", MD_UINT32},
    {"TENSOR_FLOAT32", MD_TENSOR_FLOAT32}, {"TENSOR_INT32", MD_TENSOR_INT32},
    {"TENSOR_QUANT8_ASYMM", MD_TENSOR_QUANT8_ASYMM}, {"BOOL", MD_BOOL},
    {"TENSOR_FLOAT16", MD_TENSOR_FLOAT16},
    {"TENSOR_QUANT8_ASYMM_SIGNED", MD_TENSOR_QUANT8_ASYMM_SIGNED}, {NULL, 0}};

const mdc__enum mdc__lifetimes[] = {
    {"TEMPORARY_VARIABLE", MD_TEMPORARY_VARIABLE}, {"SUBGRAPH_INPUT", MD_SUBGRAPH_INPUT},
    {"SUBGRAPH_OUTPUT", MD_SUBGRAPH_OUTPUT}, {"CONSTANT_COPY", MD_CONSTANT_COPY},
    {"CONSTANT_REFERENCE", MD_CONSTANT_REFERENCE}, {"NO_VALUE", MD_NO_VALUE}, {NULL, 0}};

const mdc__enum mdc__operation_types[] = {
    {"ADD", MD_OP_ADD}, {"CONCATENATION", MD_OP_CONCATENATION},
    {"FULLY_CONNECTED", MD_OP_FULLY_CONNECTED}, {"MUL", MD_OP_MUL}, {"RELU", MD_OP_RELU},
    {"RESHAPE", MD_OP_RESHAPE}, {"SOFTMAX", MD_OP_SOFTMAX}, {"SUB", MD_OP_SUB},
    {"CUSTOM", MD_OP_CUSTOM}, {NULL, 0}};

/* Both the trace's short names and driver.h's names without MD_MEM_. */
const mdc__enum mdc__memory_kinds[] = {
    {"ashmem", MD_MEM_ASHMEM}, {"mmap_fd", MD_MEM_MMAP_FD},
    {"blob", MD_MEM_HARDWARE_BUFFER_BLOB}, {"hardware_buffer", MD_MEM_HARDWARE_BUFFER},
    {"ASHMEM", MD_MEM_ASHMEM}, {"MMAP_FD", MD_MEM_MMAP_FD},
    {"HARDWARE_BUFFER_BLOB", MD_MEM_HARDWARE_BUFFER_BLOB},
    {"HARDWARE_BUFFER", MD_MEM_HARDWARE_BUFFER}, {NULL, 0}};

int mdc__enum_value(mdc__where *w, json_t *v, const mdc__enum *table, const char *what,
                    int64_t *out) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < INT32_MIN || i > UINT32_MAX)
      return mdc__terr(w, "%s: %lld does not fit 32 bits", what, (long long)i);
    *out = i;
    return 0;
  }
  if (!json_is_string(v)) return mdc__terr(w, "%s must be a name or a number", what);
  const char *s = json_string_value(v);
  for (const mdc__enum *e = table; e->name; e++)
    if (strcmp(e->name, s) == 0) {
      *out = e->value;
      return 0;
    }
  char names[512] = "";
  size_t n = 0;
  for (const mdc__enum *e = table; e->name && n < sizeof names - 64; e++)
    n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", e->name);
  return mdc__terr(w, "%s: unknown name '%s' (known: %s)", what, s, names);
}

const char *mdc__status_name(md_status st) {
  for (const mdc__enum *e = mdc__statuses; e->name; e++)
    if (e->value == (int64_t)st) return e->name;
  static _Thread_local char buf[32];
  snprintf(buf, sizeof buf, "STATUS_%d", (int)st);
  return buf;
}

int mdc__status_parse(const char *name, md_status *out) {
  for (const mdc__enum *e = mdc__statuses; e->name; e++)
    if (strcmp(e->name, name) == 0) {
      *out = (md_status)e->value;
      return 0;
    }
  return -1;
}
