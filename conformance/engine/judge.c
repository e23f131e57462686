/* judge.c - element comparison for `check` events: f32 within atol + rtol*|expected| (NaN
 * matches NaN), i32 and u8 exact; reports the first differing index, both values and the count
 * of differing elements. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine_int.h"

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float f32_at(const uint8_t *p) {
  uint32_t u = get32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int differs(mdc__elem type, const uint8_t *a, const uint8_t *e, size_t i, double atol,
                   double rtol) {
  switch (type) {
    case MDC__ELEM_F32: {
      double x = f32_at(a + 4 * i), y = f32_at(e + 4 * i);
      if (isnan(x) || isnan(y)) return !(isnan(x) && isnan(y));
      if (isinf(y)) return x != y;
      return !(fabs(x - y) <= atol + rtol * fabs(y));
    }
    case MDC__ELEM_I32: return get32(a + 4 * i) != get32(e + 4 * i);
    default: return a[i] != e[i];
  }
}

static void show(mdc__elem type, const uint8_t *p, size_t i, char *buf, size_t len) {
  switch (type) {
    case MDC__ELEM_F32: snprintf(buf, len, "%.9g", (double)f32_at(p + 4 * i)); break;
    case MDC__ELEM_I32: snprintf(buf, len, "%" PRId32, (int32_t)get32(p + 4 * i)); break;
    default: snprintf(buf, len, "%u", p[i]); break;
  }
}

int mdc__compare(mdc__elem type, const uint8_t *actual, const uint8_t *expected, size_t count,
                 double atol, double rtol, char *exp, size_t explen, char *act, size_t actlen,
                 char *msg, size_t msglen) {
  size_t first = SIZE_MAX, ndiff = 0;
  for (size_t i = 0; i < count; i++)
    if (differs(type, actual, expected, i, atol, rtol)) {
      if (first == SIZE_MAX) first = i;
      ndiff++;
    }
  if (!ndiff) return 0;
  char e[64], a[64];
  show(type, expected, first, e, sizeof e);
  show(type, actual, first, a, sizeof a);
  snprintf(exp, explen, "%s[%zu] = %s", mdc__elem_name(type), first, e);
  snprintf(act, actlen, "%s[%zu] = %s", mdc__elem_name(type), first, a);
  if (type == MDC__ELEM_F32)
    snprintf(msg, msglen, "element %zu is %s, expected %s (atol %g, rtol %g); %zu of %zu elements differ",
             first, a, e, atol, rtol, ndiff, count);
  else
    snprintf(msg, msglen, "element %zu is %s, expected %s; %zu of %zu elements differ", first, a, e,
             ndiff, count);
  return 1;
}
