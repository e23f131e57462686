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
  size_t used = n < 0 ? 0 : (size_t)n;
  if (used + 2 < sizeof last) {
    memcpy(last + used, ": ", 2);
    used += 2;
    size_t room = sizeof last - 1 - used, len = strnlen(old, sizeof old);
    if (len > room) len = room;
    memcpy(last + used, old, len);
    last[used + len] = '\0';
  }
  return st;
}

const char *md__last_error(void) { return last; }

void md__clear_error(void) { last[0] = '\0'; }
