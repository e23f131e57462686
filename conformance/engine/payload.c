/* payload.c - decodes a trace's `data`/`values` payload (inline, hex, random, fill, sidecar)
 * into bytes. Sidecars are found in blobs/ beside the trace or in a parent folder's blobs/ and
 * verified with SHA-256 (libsodium). */
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

size_t mdc__elem_size(mdc__elem t) {
  switch (t) {
    case MDC__ELEM_F32: return 4;
    case MDC__ELEM_I32: return 4;
    default: return 1;
  }
}

const char *mdc__elem_name(mdc__elem t) {
  switch (t) {
    case MDC__ELEM_F32: return "f32";
    case MDC__ELEM_I32: return "i32";
    case MDC__ELEM_U8: return "u8";
    default: return "bytes";
  }
}

int mdc__elem_parse(const char *s, mdc__elem *out) {
  if (strcmp(s, "f32") == 0) *out = MDC__ELEM_F32;
  else if (strcmp(s, "i32") == 0) *out = MDC__ELEM_I32;
  else if (strcmp(s, "u8") == 0) *out = MDC__ELEM_U8;
  else return -1;
  return 0;
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void put32(uint8_t *p, uint32_t v) { /* little-endian whatever the host */
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static int alloc_bytes(mdc__where *w, mdc__bytes *out, uint64_t count, size_t elem) {
  if (count > MDC__MAX_MEMORY / elem)
    return mdc__terr(w, "payload of %llu elements is over the 1 GiB limit",
                     (unsigned long long)count);
  out->len = (size_t)count * elem;
  out->data = malloc(out->len ? out->len : 1);
  if (!out->data) return mdc__terr(w, "out of memory for a %zu-byte payload", out->len);
  return 0;
}

static int inline_values(mdc__where *w, json_t *arr, mdc__elem t, mdc__bytes *out) {
  const char *tn = mdc__elem_name(t);
  if (!json_is_array(arr)) return mdc__terr(w, "payload '%s' must be an array", tn);
  size_t n = json_array_size(arr);
  if (alloc_bytes(w, out, n, mdc__elem_size(t))) return -1;
  out->type = t;
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(arr, i);
    if (t == MDC__ELEM_F32) {
      double d;
      char what[48];
      snprintf(what, sizeof what, "f32[%zu]", i);
      if (mdc__num_value(w, e, what, &d)) return -1;
      float f = (float)d;
      uint32_t u;
      memcpy(&u, &f, 4);
      put32(out->data + 4 * i, u);
    } else {
      json_int_t lo = t == MDC__ELEM_I32 ? INT32_MIN : 0, hi = t == MDC__ELEM_I32 ? INT32_MAX : 255;
      if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi)
        return mdc__terr(w, "%s[%zu] must be an integer in [%lld, %lld]", tn, i, (long long)lo,
                         (long long)hi);
      if (t == MDC__ELEM_I32) put32(out->data + 4 * i, (uint32_t)(int32_t)json_integer_value(e));
      else out->data[i] = (uint8_t)json_integer_value(e);
    }
  }
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int hex_bytes(mdc__where *w, json_t *v, mdc__bytes *out) {
  if (!json_is_string(v)) return mdc__terr(w, "payload 'hex' must be a string");
  const char *s = json_string_value(v);
  size_t n = strlen(s);
  if (n % 2) return mdc__terr(w, "payload 'hex' has an odd number of digits (%zu)", n);
  if (alloc_bytes(w, out, n / 2, 1)) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return mdc__terr(w, "payload 'hex': '%.2s' at %zu is not hex", s + 2 * i, 2 * i);
    out->data[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

static int random_bytes(mdc__where *w, json_t *r, int strict, mdc__bytes *out) {
  static const char *const keys[] = {"seed", "type", "count", "min", "max", NULL};
  if (mdc__check_keys(w, r, keys, strict, "payload 'random'")) return -1;
  uint64_t seed, count;
  const char *type;
  mdc__elem t;
  if (mdc__get_u64(w, r, "seed", 1, 0, UINT64_MAX, &seed) ||
      mdc__get_str(w, r, "type", 1, &type) ||
      mdc__get_u64(w, r, "count", 1, 0, MDC__MAX_MEMORY, &count))
    return -1;
  if (mdc__elem_parse(type, &t)) return mdc__terr(w, "payload 'random': unknown type '%s' (f32, i32, u8)", type);
  double dmin_def = t == MDC__ELEM_F32 ? 0.0 : t == MDC__ELEM_I32 ? (double)INT32_MIN : 0.0;
  double dmax_def = t == MDC__ELEM_F32 ? 1.0 : t == MDC__ELEM_I32 ? (double)INT32_MAX : 255.0;
  double mn, mx;
  if (mdc__get_num(w, r, "min", dmin_def, &mn) || mdc__get_num(w, r, "max", dmax_def, &mx)) return -1;
  if (!(mn <= mx) || !isfinite(mn) || !isfinite(mx))
    return mdc__terr(w, "payload 'random': min %g must be <= max %g", mn, mx);
  if (t != MDC__ELEM_F32) {
    double lo = t == MDC__ELEM_I32 ? (double)INT32_MIN : 0, hi = t == MDC__ELEM_I32 ? (double)INT32_MAX : 255;
    if (mn < lo || mx > hi || mn != floor(mn) || mx != floor(mx))
      return mdc__terr(w, "payload 'random': min/max must be %s integers", mdc__elem_name(t));
  }
  if (alloc_bytes(w, out, count, mdc__elem_size(t))) return -1;
  out->type = t;
  uint64_t s = seed;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t x = splitmix64(&s);
    if (t == MDC__ELEM_F32) {
      double u = (double)(x >> 40) * (1.0 / 16777216.0);
      float f = (float)(mn + (mx - mn) * u);
      uint32_t b;
      memcpy(&b, &f, 4);
      put32(out->data + 4 * i, b);
    } else {
      /* integers: min + (top 32 bits mod (max - min + 1)), documented in docs/conformance.md */
      uint64_t range = (uint64_t)((int64_t)mx - (int64_t)mn) + 1;
      int64_t v = (int64_t)mn + (int64_t)((x >> 32) % range);
      if (t == MDC__ELEM_I32) put32(out->data + 4 * i, (uint32_t)(int32_t)v);
      else out->data[i] = (uint8_t)v;
    }
  }
  return 0;
}

/* Looks for blobs/<hex> in the trace's folder and each parent. Returns an open FILE or NULL. */
static FILE *find_sidecar(const char *trace_path, const char *hex, char *found, size_t foundlen) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", trace_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  for (int depth = 0; depth < 64; depth++) {
    snprintf(found, foundlen, "%s/blobs/%s", dir, hex);
    FILE *f = fopen(found, "rb");
    if (f) return f;
    if (strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0 || dir[0] == '\0') {
      if (strcmp(dir, ".") == 0) { /* a relative path: go on through ".." */
        snprintf(dir, sizeof dir, "..");
        continue;
      }
      break;
    }
    if (strncmp(dir, "..", 2) == 0 && (dir[2] == '\0' || dir[2] == '/')) {
      size_t n = strlen(dir);
      if (n + 4 >= sizeof dir) break;
      memcpy(dir + n, "/..", 4);
      continue;
    }
    slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
  }
  return NULL;
}

static int sidecar_bytes(mdc__where *w, json_t *v, mdc__bytes *out) {
  if (!json_is_string(v)) return mdc__terr(w, "payload 'sidecar' must be a string");
  const char *hex = json_string_value(v);
  if (strlen(hex) != 64) return mdc__terr(w, "payload 'sidecar' must be 64 hex digits of SHA-256");
  for (int i = 0; i < 64; i++)
    if (hexval(hex[i]) < 0 || (hex[i] >= 'A' && hex[i] <= 'F'))
      return mdc__terr(w, "payload 'sidecar': '%s' is not 64 lower-case hex digits", hex);
  char path[PATH_MAX + 80];
  FILE *f = find_sidecar(w->path, hex, path, sizeof path);
  if (!f) return mdc__terr(w, "sidecar blobs/%s: not found next to the trace or in a parent folder", hex);
  if (fseeko(f, 0, SEEK_END) != 0) {
    fclose(f);
    return mdc__terr(w, "sidecar %s: cannot seek", path);
  }
  off_t size = ftello(f);
  if (size < 0 || (uint64_t)size > MDC__MAX_MEMORY) {
    fclose(f);
    return mdc__terr(w, "sidecar %s: size over the 1 GiB limit", path);
  }
  rewind(f);
  if (alloc_bytes(w, out, (uint64_t)size, 1)) {
    fclose(f);
    return -1;
  }
  size_t got = fread(out->data, 1, out->len, f);
  fclose(f);
  if (got != out->len) return mdc__terr(w, "sidecar %s: short read (%zu of %zu bytes)", path, got, out->len);
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, out->data, out->len);
  char got_hex[65];
  for (int i = 0; i < 32; i++) snprintf(got_hex + 2 * i, 3, "%02x", digest[i]);
  if (strcmp(got_hex, hex) != 0)
    return mdc__terr(w, "sidecar %s: SHA-256 is %s, not the name's digest", path, got_hex);
  return 0;
}

static int fill_bytes(mdc__where *w, json_t *obj, int strict, mdc__bytes *out) {
  static const char *const keys[] = {"fill", "bytes", NULL};
  if (mdc__check_keys(w, obj, keys, strict, "payload 'fill'")) return -1;
  int64_t b;
  uint64_t n;
  if (mdc__get_int(w, obj, "fill", 1, 0, 0, 255, &b) ||
      mdc__get_u64(w, obj, "bytes", 1, 0, MDC__MAX_MEMORY, &n))
    return -1;
  if (alloc_bytes(w, out, n, 1)) return -1;
  memset(out->data, (int)b, out->len);
  return 0;
}

int mdc__payload(mdc__where *w, json_t *v, int strict, mdc__bytes *out) {
  memset(out, 0, sizeof *out);
  int rc;
  if (!json_is_object(v)) return mdc__terr(w, "a payload must be an object ({\"f32\": [...]}, {\"hex\": ...}, ...)");
  json_t *x;
  if (json_object_get(v, "fill")) {
    rc = fill_bytes(w, v, strict, out);
  } else {
    /* At the reader's minor a payload is exactly one form; a newer minor may add keys beside it. */
    if (strict && json_object_size(v) != 1)
      return mdc__terr(w, "a payload has exactly one form (f32, i32, u8, hex, random, fill, sidecar)");
    if ((x = json_object_get(v, "f32"))) rc = inline_values(w, x, MDC__ELEM_F32, out);
    else if ((x = json_object_get(v, "i32"))) rc = inline_values(w, x, MDC__ELEM_I32, out);
    else if ((x = json_object_get(v, "u8"))) rc = inline_values(w, x, MDC__ELEM_U8, out);
    else if ((x = json_object_get(v, "hex"))) rc = hex_bytes(w, x, out);
    else if ((x = json_object_get(v, "random"))) rc = random_bytes(w, x, strict, out);
    else if ((x = json_object_get(v, "sidecar"))) rc = sidecar_bytes(w, x, out);
    else {
      void *it = json_object_iter(v);
      const char *key = it ? json_object_iter_key(it) : "(none)";
      return mdc__terr(w, "unknown payload form '%s' (f32, i32, u8, hex, random, fill, sidecar)", key);
    }
  }
  if (rc) {
    free(out->data);
    memset(out, 0, sizeof *out);
  }
  return rc;
}
