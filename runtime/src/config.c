/* config.c - parsing the open_device configuration string. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "runtime_int.h"

static void trim(const char **b, const char **e) {
  while (*b < *e && isspace((unsigned char)**b)) (*b)++;
  while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

/* A decimal unsigned integer with an optional binary suffix K, M, G (KiB...). */
static int parse_u64(const char *v, uint64_t *out) {
  if (!*v || *v == '-' || *v == '+' || isspace((unsigned char)*v)) return -1;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v) return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end) return -1;
  if (x > UINT64_MAX / mul) return -1;
  *out = (uint64_t)x * mul;
  return 0;
}

md_status md__config_parse(const char *text, md__config *out) {
  memset(out, 0, sizeof *out);
  strcpy(out->backend, "auto");
  if (!text) return MD_NONE;
  unsigned seen = 0;
  const char *p = text;
  while (*p) {
    const char *end = strchr(p, ';');
    if (!end) end = p + strlen(p);
    const char *kb = p, *ke = end;
    trim(&kb, &ke);
    p = *end ? end + 1 : end;
    if (kb == ke) continue;  /* empty item: ";;" or a trailing ';' */
    const char *eq = memchr(kb, '=', (size_t)(ke - kb));
    if (!eq) return md__fail(MD_INVALID_ARGUMENT, "config: '%.*s' is not key=value", (int)(ke - kb), kb);
    const char *ve = ke, *vb = eq + 1;
    ke = eq;
    trim(&kb, &ke);
    trim(&vb, &ve);
    char key[32], val[256];
    if ((size_t)(ke - kb) >= sizeof key) return md__fail(MD_INVALID_ARGUMENT, "config: unknown key '%.*s'", (int)(ke - kb), kb);
    if ((size_t)(ve - vb) >= sizeof val) return md__fail(MD_INVALID_ARGUMENT, "config: value of '%.*s' is too long", (int)(ke - kb), kb);
    memcpy(key, kb, (size_t)(ke - kb));
    key[ke - kb] = '\0';
    memcpy(val, vb, (size_t)(ve - vb));
    val[ve - vb] = '\0';
    static const char *const keys[] = {"backend", "mem_limit", "seed", "faults", "latency_ns", "copy_gbps"};
    unsigned k = 0;
    while (k < 6 && strcmp(key, keys[k]) != 0) k++;
    if (k == 6)
      return md__fail(MD_INVALID_ARGUMENT,
                      "config: unknown key '%s' (known: backend, mem_limit, seed, faults, latency_ns, copy_gbps)",
                      key);
    if (seen & (1u << k)) return md__fail(MD_INVALID_ARGUMENT, "config: key '%s' given twice", key);
    seen |= 1u << k;
    switch (k) {
      case 0:
        if (strcmp(val, "sim") && strcmp(val, "hip") && strcmp(val, "auto"))
          return md__fail(MD_INVALID_ARGUMENT, "config: backend '%s' is not sim, hip or auto", val);
        strcpy(out->backend, val);
        break;
      case 1:
        if (parse_u64(val, &out->mem_limit) || out->mem_limit == 0)
          return md__fail(MD_INVALID_ARGUMENT,
                          "config: mem_limit '%s' is not a positive byte count (e.g. 1048576 or 64M)", val);
        break;
      case 2:
        if (parse_u64(val, &out->seed))
          return md__fail(MD_INVALID_ARGUMENT, "config: seed '%s' is not an unsigned integer", val);
        out->has_seed = true;
        break;
      case 3:
        strcpy(out->faults, val);
        break;
      case 4:
        if (parse_u64(val, &out->latency_ns))
          return md__fail(MD_INVALID_ARGUMENT, "config: latency_ns '%s' is not an unsigned integer", val);
        break;
      case 5: {
        char *gend;
        errno = 0;
        double g = strtod(val, &gend);
        if (!*val || *gend || errno || !(g > 0) || g > 1e6)
          return md__fail(MD_INVALID_ARGUMENT, "config: copy_gbps '%s' is not a bandwidth in GB/s (0 < x <= 1e6)",
                          val);
        out->copy_gbps = g;
        break;
      }
    }
  }
  return MD_NONE;
}
