/* reduce_simplify.c - `mdc reduce`'s second stage: once no unit can go, simpler values where
 * the failure stays (a concurrent block's repeat, payloads to zeros, literal handles to 0), and
 * the sidecar blobs of what is left inlined (reduce_int.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce_int.h"

/* Replaces *slot with repl when the trace still fails; else puts the old value back. */
static int try_replace(reducer *z, const trace *t, const char *cur, json_t *parent, const char *key,
                       size_t index, json_t *repl, buf *b) {
  json_t *old = json_is_object(parent) ? json_object_get(parent, key) : json_array_get(parent, index);
  if (!old || json_equal(old, repl)) {
    json_decref(repl);
    return 0;
  }
  json_incref(old);
  if (json_is_object(parent)) json_object_set_new(parent, key, repl);
  else json_array_set_new(parent, index, repl);
  int ok = mdc_cli__rd_render(t, cur, NULL, b) == 0 && mdc_cli__rd_still_fails(z, b);
  if (ok) {
    json_decref(old);
    return 1;
  }
  if (json_is_object(parent)) json_object_set_new(parent, key, old);
  else json_array_set_new(parent, index, old);
  return 0;
}

/* The sidecar blob named sha: blobs/<sha> beside the trace or in a parent folder's blobs/ (as
 * the engine finds it). Its bytes (malloc'd) and size, or NULL. */
static unsigned char *sidecar_bytes(const char *trace_path, const char *sha, size_t *n) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", trace_path);
  for (;;) {
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    char p[4200];
    snprintf(p, sizeof p, "%s/blobs/%.64s", dir, sha);
    FILE *f = fopen(p, "rbe");
    if (f) {
      unsigned char *b = NULL;
      size_t cap = 0, len = 0, got;
      do {
        if (len == cap) {
          unsigned char *nb = realloc(b, cap = cap ? cap * 2 : 65536);
          if (!nb) break;
          b = nb;
        }
        got = fread(b + len, 1, cap - len, f);
        len += got;
      } while (got > 0);
      fclose(f);
      *n = len;
      return b;
    }
    if (!slash || !strcmp(dir, ".") || !dir[0]) return NULL;
  }
}

/* The byte size of a payload object ({"f32": [...]}, {"random": {...}}, {"hex": ...},
 * {"sidecar": ...}), 0 when it is not one or is already zeros. */
static size_t payload_bytes(const reducer *z, json_t *v) {
  if (!json_is_object(v) || json_object_size(v) != 1) return 0;
  json_t *x;
  if ((x = json_object_get(v, "random"))) {
    const char *type = json_string_value(json_object_get(x, "type"));
    json_int_t count = json_integer_value(json_object_get(x, "count"));
    return count > 0 ? (size_t)count * (type && !strcmp(type, "u8") ? 1 : 4) : 0;
  }
  if ((x = json_object_get(v, "f32")) || (x = json_object_get(v, "i32"))) return json_array_size(x) * 4;
  if ((x = json_object_get(v, "u8"))) return json_array_size(x);
  if ((x = json_object_get(v, "hex")) && json_is_string(x)) return json_string_length(x) / 2;
  if ((x = json_object_get(v, "sidecar")) && json_is_string(x)) {
    size_t n = 0;
    free(sidecar_bytes(z->path, json_string_value(x), &n));
    return n;
  }
  return 0;
}

/* Walks v: payloads to zeros of their size, literal handles to 0. */
static void simplify_value(reducer *z, const trace *t, const char *cur, json_t *v, buf *b) {
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) simplify_value(z, t, cur, json_array_get(v, i), b);
    return;
  }
  if (!json_is_object(v)) return;
  const char *k;
  json_t *x;
  void *tmp;
  json_object_foreach_safe(v, tmp, k, x) {
    size_t bytes = payload_bytes(z, x);
    if (bytes) {
      json_t *zero = json_pack("{s:i,s:I}", "fill", 0, "bytes", (json_int_t)bytes);
      if (zero) try_replace(z, t, cur, v, k, 0, zero, b);
      continue;
    }
    if (!strcmp(k, "literal") && !(json_is_integer(x) && json_integer_value(x) == 0)) {
      try_replace(z, t, cur, v, k, 0, json_integer(0), b);
      continue;
    }
    simplify_value(z, t, cur, x, b);
  }
}

/* The sidecars still there become inline hex, so the reduced trace needs no blobs/ folder
 * wherever it is written. */
void mdc_cli__rd_inline_sidecars(const reducer *z, json_t *v) {
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) mdc_cli__rd_inline_sidecars(z, json_array_get(v, i));
    return;
  }
  if (!json_is_object(v)) return;
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    json_t *sc = json_object_get(x, "sidecar");
    if (json_is_object(x) && json_object_size(x) == 1 && json_is_string(sc)) {
      size_t n = 0;
      unsigned char *bytes = sidecar_bytes(z->path, json_string_value(sc), &n);
      char *hex = bytes ? malloc(2 * n + 1) : NULL;
      if (hex) {
        for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
        json_object_set_new(v, k, json_pack("{s:s}", "hex", hex));
      }
      free(hex), free(bytes);
      continue;
    }
    mdc_cli__rd_inline_sidecars(z, x);
  }
}

void mdc_cli__rd_simplify(reducer *z, const trace *t, const char *cur, buf *b) {
  for (size_t u = 0; u < t->n_units; u++) {
    if (!cur[u]) continue;
    json_t *first = t->evs[t->units[u].first].obj;
    json_t *rep = json_object_get(first, "repeat");
    if (json_is_integer(rep) && json_integer_value(rep) > 1) {
      json_int_t r = json_integer_value(rep);
      if (!try_replace(z, t, cur, first, "repeat", 0, json_integer(1), b))
        while (r > 2 && try_replace(z, t, cur, first, "repeat", 0, json_integer(r / 2), b)) r /= 2;
    }
    for (size_t i = t->units[u].first; i <= t->units[u].last; i++) simplify_value(z, t, cur, t->evs[i].obj, b);
  }
  size_t n = 0;
  for (size_t u = 0; u < t->n_units; u++) n += cur[u] != 0;
  mdc_cli__rd_progress(z, "simplified", n, t->n_units);
}
