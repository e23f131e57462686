/* error.h - private to the runtime: the calling thread's last failure message.
 *
 * Every failing entry point records a message naming the object, the rule and the values;
 * md_driver.last_error returns it. One buffer per thread (shared by every device the thread
 * uses; documented in docs/errors.md). */
#ifndef MD_ERROR_H
#define MD_ERROR_H

#include <stdarg.h>
#include "md/driver.h"

#define MD__ERROR_MAX 512u

/* Records a printf-style message for the calling thread and returns st, so callers write
 * `return md__fail(MD_INVALID_ARGUMENT, "allocate: role %u ...", i);`. */
md_status md__fail(md_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
md_status md__vfail(md_status st, const char *fmt, va_list ap);
/* Prepends "prefix: " to the current message (for adding context on the way up). */
md_status md__fail_prefix(md_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's message ("" when none). Never NULL. */
const char *md__last_error(void);
void md__clear_error(void);

#endif
