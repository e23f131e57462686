/* md/status.h - names and texts of md_status values, from one table. */
#ifndef MD_STATUS_H
#define MD_STATUS_H

#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum value, short name, text). The one place a status's name and text are written. */
#define MD_STATUS_MAP(X)                                                                    \
  X(MD_NONE, "NONE", "no error")                                                            \
  X(MD_DEVICE_UNAVAILABLE, "DEVICE_UNAVAILABLE", "device unavailable")                      \
  X(MD_GENERAL_FAILURE, "GENERAL_FAILURE", "general failure")                               \
  X(MD_OUTPUT_INSUFFICIENT_SIZE, "OUTPUT_INSUFFICIENT_SIZE", "output insufficient size")    \
  X(MD_INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid argument")                            \
  X(MD_MISSED_DEADLINE_TRANSIENT, "MISSED_DEADLINE_TRANSIENT", "missed deadline (transient)") \
  X(MD_MISSED_DEADLINE_PERSISTENT, "MISSED_DEADLINE_PERSISTENT", "missed deadline (persistent)") \
  X(MD_RESOURCE_EXHAUSTED_TRANSIENT, "RESOURCE_EXHAUSTED_TRANSIENT", "resource exhausted (transient)") \
  X(MD_RESOURCE_EXHAUSTED_PERSISTENT, "RESOURCE_EXHAUSTED_PERSISTENT", "resource exhausted (persistent)") \
  X(MD_DEAD_OBJECT, "DEAD_OBJECT", "dead object")

/* "INVALID_ARGUMENT" for MD_INVALID_ARGUMENT; "UNKNOWN_STATUS" for a value outside the enum.
 * Thread-safe; the string is static. */
const char *md_status_name(md_status st);
/* Human text, e.g. "invalid argument"; "unknown status" outside the enum. */
const char *md_status_text(md_status st);
/* Parses a short name ("NONE", "GENERAL_FAILURE"); returns 0 and sets *out, or -1 if unknown. */
int md_status_parse(const char *name, md_status *out);

#ifdef __cplusplus
}
#endif
#endif
