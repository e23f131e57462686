/* config.c - the open_device configuration string (md/config.h): items, parsing, the
 * canonical form, merging. Library md_config; depends on nothing but libc. */
#include "md/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const key_names[MD_CONFIG_KEY_COUNT] = {
#define MD_CONFIG_X(e, n) #n,
    MD_CONFIG_KEY_MAP(MD_CONFIG_X)
#undef MD_CONFIG_X
};

const char *md_config_key_name(md_config_key k) {
  return (unsigned)k < MD_CONFIG_KEY_COUNT ? key_names[k] : NULL;
}

static void trim(const char **b, const char **e) {
  while (*b < *e && isspace((unsigned char)**b)) (*b)++;
  while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

int md_config_items(const char *text, md_config_item_fn fn, void *arg) {
  const char *p = text ? text : "";
  while (*p) {
    const char *end = strchr(p, ';');
    if (!end) end = p + strlen(p);
    const char *kb = p, *ke = end;
    p = *end ? end + 1 : end;
    trim(&kb, &ke);
    if (kb == ke) continue; /* empty item: ";;" or a trailing ';' */
    const char *eq = memchr(kb, '=', (size_t)(ke - kb));
    const char *vb = NULL, *ve = NULL;
    if (eq) {
      vb = eq + 1;
      ve = ke;
      ke = eq;
      trim(&kb, &ke);
      trim(&vb, &ve);
    }
    int rc = fn(kb, (size_t)(ke - kb), vb, vb ? (size_t)(ve - vb) : 0, arg);
    if (rc) return rc;
  }
  return 0;
}

/* ---- parsing ---- */

typedef struct parse_ctx {
  md_config *out;
  char *err;
  size_t errlen;
} parse_ctx;

__attribute__((format(printf, 2, 3))) static int bad(parse_ctx *c, const char *fmt, ...) {
  if (c->err && c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* An unsigned integer, decimal or 0x hex; with `sizes`, an optional binary suffix K, M, G. */
static int parse_u64(const char *v, int sizes, uint64_t *out) {
  if (!*v || !isdigit((unsigned char)*v)) return -1;
  int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  if (hex && !isxdigit((unsigned char)v[2])) return -1;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(v, &end, hex ? 16 : 10);
  if (errno || end == v) return -1;
  uint64_t mul = 1;
  if (sizes && (*end == 'K' || *end == 'k')) mul = 1ull << 10, end++;
  else if (sizes && (*end == 'M' || *end == 'm')) mul = 1ull << 20, end++;
  else if (sizes && (*end == 'G' || *end == 'g')) mul = 1ull << 30, end++;
  if (*end) return -1;
  if (x > UINT64_MAX / mul) return -1;
  *out = (uint64_t)x * mul;
  return 0;
}

static int parse_item(const char *kb, size_t klen, const char *vb, size_t vlen, void *arg) {
  parse_ctx *c = arg;
  if (!vb) return bad(c, "config: '%.*s' is not key=value", (int)klen, kb);
  unsigned k = 0;
  while (k < MD_CONFIG_KEY_COUNT && !(strlen(key_names[k]) == klen && memcmp(key_names[k], kb, klen) == 0)) k++;
  if (k == MD_CONFIG_KEY_COUNT)
    return bad(c, "config: unknown key '%.*s' (known: backend, mem_limit, seed, faults, latency_ns, copy_gbps, init_ns)",
               (int)(klen > 64 ? 64 : klen), kb);
  md_config *out = c->out;
  if (out->given & (1u << k)) return bad(c, "config: key '%s' given twice", key_names[k]);
  char val[256];
  if (vlen >= sizeof val) return bad(c, "config: value of '%s' is too long (at most %zu bytes)", key_names[k], sizeof val - 1);
  memcpy(val, vb, vlen);
  val[vlen] = '\0';
  switch ((md_config_key)k) {
    case MD_CONFIG_BACKEND:
      if (strcmp(val, "sim") && strcmp(val, "hip") && strcmp(val, "auto"))
        return bad(c, "config: backend '%s' is not sim, hip or auto", val);
      snprintf(out->backend, sizeof out->backend, "%.15s", val);
      break;
    case MD_CONFIG_MEM_LIMIT:
      if (parse_u64(val, 1, &out->mem_limit) || out->mem_limit == 0)
        return bad(c, "config: mem_limit '%s' is not a positive byte count (e.g. 1048576, 0x100000 or 64M)", val);
      break;
    case MD_CONFIG_SEED:
      if (parse_u64(val, 0, &out->seed))
        return bad(c, "config: seed '%s' is not an unsigned 64-bit integer (decimal or 0x hex)", val);
      out->has_seed = 1;
      break;
    case MD_CONFIG_FAULTS:
      snprintf(out->faults, sizeof out->faults, "%s", val);
      break;
    case MD_CONFIG_LATENCY_NS:
      if (parse_u64(val, 0, &out->latency_ns))
        return bad(c, "config: latency_ns '%s' is not an unsigned integer (decimal or 0x hex)", val);
      break;
    case MD_CONFIG_COPY_GBPS: {
      char *gend;
      errno = 0;
      double g = strtod(val, &gend);
      if (!*val || *gend || errno || !(g > 0) || g > 1e6)
        return bad(c, "config: copy_gbps '%s' is not a bandwidth in GB/s (0 < x <= 1e6)", val);
      out->copy_gbps = g;
      break;
    }
    case MD_CONFIG_INIT_NS:
      if (parse_u64(val, 0, &out->init_ns))
        return bad(c, "config: init_ns '%s' is not an unsigned integer (decimal or 0x hex)", val);
      break;
    case MD_CONFIG_KEY_COUNT: break;
  }
  out->given |= 1u << k;
  return 0;
}

md_status md_config_parse(const char *text, md_config *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  snprintf(out->backend, sizeof out->backend, "auto");
  if (err && errlen) err[0] = '\0';
  parse_ctx c = {out, err, errlen};
  return md_config_items(text, parse_item, &c) ? MD_INVALID_ARGUMENT : MD_NONE;
}

/* ---- writing ---- */

/* An output buffer that counts what it would need (as snprintf). */
typedef struct sink {
  char *buf;
  size_t len, used;
} sink;

static void put(sink *s, const char *p, size_t n) {
  if (s->used < s->len) {
    size_t room = s->len - s->used - 1;
    memcpy(s->buf + s->used, p, n < room ? n : room);
    s->buf[s->used + (n < room ? n : room)] = '\0';
  }
  s->used += n;
}

static void sink_init(sink *s, char *buf, size_t len) {
  s->buf = buf;
  s->len = len;
  s->used = 0;
  if (buf && len) buf[0] = '\0';
}

size_t md_config_format(const md_config *c, char *buf, size_t len) {
  sink s;
  sink_init(&s, buf, len);
  for (unsigned k = 0; k < MD_CONFIG_KEY_COUNT; k++) {
    if (!(c->given & (1u << k))) continue;
    char v[300];
    switch ((md_config_key)k) {
      case MD_CONFIG_BACKEND: snprintf(v, sizeof v, "%s", c->backend); break;
      case MD_CONFIG_MEM_LIMIT: snprintf(v, sizeof v, "%llu", (unsigned long long)c->mem_limit); break;
      case MD_CONFIG_SEED: snprintf(v, sizeof v, "%llu", (unsigned long long)c->seed); break;
      case MD_CONFIG_FAULTS: snprintf(v, sizeof v, "%s", c->faults); break;
      case MD_CONFIG_LATENCY_NS: snprintf(v, sizeof v, "%llu", (unsigned long long)c->latency_ns); break;
      case MD_CONFIG_COPY_GBPS: snprintf(v, sizeof v, "%.17g", c->copy_gbps); break;
      case MD_CONFIG_INIT_NS: snprintf(v, sizeof v, "%llu", (unsigned long long)c->init_ns); break;
      case MD_CONFIG_KEY_COUNT: v[0] = '\0'; break;
    }
    if (s.used) put(&s, ";", 1);
    put(&s, key_names[k], strlen(key_names[k]));
    put(&s, "=", 1);
    put(&s, v, strlen(v));
  }
  return s.used;
}

typedef struct has_ctx {
  const char *key;
  size_t klen;
} has_ctx;

static int has_item(const char *kb, size_t klen, const char *vb, size_t vlen, void *arg) {
  (void)vb;
  (void)vlen;
  has_ctx *h = arg;
  return klen == h->klen && memcmp(kb, h->key, klen) == 0;
}

static int has_key(const char *text, const char *key, size_t klen) {
  has_ctx h = {key, klen};
  return md_config_items(text, has_item, &h) != 0;
}

int md_config_has(const char *text, const char *key) { return has_key(text, key, strlen(key)); }

typedef struct copy_ctx {
  sink *s;
  const char *skip_text;   /* items whose key this text names are left out */
  const char *drop;        /* items with this key are left out */
} copy_ctx;

static int copy_item(const char *kb, size_t klen, const char *vb, size_t vlen, void *arg) {
  copy_ctx *c = arg;
  if (c->skip_text && has_key(c->skip_text, kb, klen)) return 0;
  if (c->drop && strlen(c->drop) == klen && memcmp(c->drop, kb, klen) == 0) return 0;
  if (c->s->used) put(c->s, ";", 1);
  put(c->s, kb, klen);
  if (vb) {
    put(c->s, "=", 1);
    put(c->s, vb, vlen);
  }
  return 0;
}

size_t md_config_merge(const char *base, const char *extra, char *out, size_t len) {
  sink s;
  sink_init(&s, out, len);
  copy_ctx a = {&s, NULL, NULL}, b = {&s, base, NULL};
  md_config_items(base, copy_item, &a);
  md_config_items(extra, copy_item, &b);
  return s.used;
}

size_t md_config_without(const char *text, const char *drop, char *out, size_t len) {
  sink s;
  sink_init(&s, out, len);
  copy_ctx c = {&s, NULL, drop};
  md_config_items(text, copy_item, &c);
  return s.used;
}
