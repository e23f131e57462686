/* error.c - the calling thread's last failure message. */
#include "error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last[MD__ERROR_MAX];

md_status md__vfail(md_status st, const char *fmt, va_list ap) {
  vsnprintf(last, sizeof last, fmt, ap);
  return st;
}

md_status md__fail(md_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  md__vfail(st, fmt, ap);
  va_end(ap);
  return st;
}

md_status md__fail_prefix(md_status st, const char *fmt, ...) {
  char old[MD__ERROR_MAX];
  memcpy(old, last, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(last, sizeof last, fmt, ap);
  va_end(ap);
  /* Append ": <old message>" after the prefix, truncating at the buffer's end. */
  if (n >= 0 && (size_t)n < sizeof last) snprintf(last + n, sizeof last - (size_t)n, ": %s", old);
  return st;
}

const char *md__last_error(void) { return last; }

void md__clear_error(void) { last[0] = '\0'; }
