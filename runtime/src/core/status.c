/* status.c - names and texts of md_status, generated from MD_STATUS_MAP. */
#include <string.h>

#include "md/status.h"

const char *md_status_name(md_status st) {
  switch (st) {
#define X(v, name, text) case v: return name;
    MD_STATUS_MAP(X)
#undef X
  }
  return "UNKNOWN_STATUS";
}

const char *md_status_text(md_status st) {
  switch (st) {
#define X(v, name, text) case v: return text;
    MD_STATUS_MAP(X)
#undef X
  }
  return "unknown status";
}

int md_status_parse(const char *name, md_status *out) {
  if (!name) return -1;
#define X(v, sname, text)        \
  if (strcmp(name, sname) == 0) { \
    *out = v;                     \
    return 0;                     \
  }
  MD_STATUS_MAP(X)
#undef X
  return -1;
}
