/* scope_int.h - private to the runtime: resource-scope internals shared with pool.c and the
 * tests (fault injection of mmap, the errno of a failed map, the users limit). */
#ifndef MD_SCOPE_INT_H
#define MD_SCOPE_INT_H

#include <stdint.h>
#include <sys/types.h>
#include "md/scope.h"

/* The most users a scope counts. An acquire beyond it fails RESOURCE_EXHAUSTED_TRANSIENT rather
 * than wrapping the count into the CLOSING bit (SPEC 6: counts never wrap). */
#define MD__SCOPE_MAX_USERS 0x7FFFFFFFu

/* The mmap that md_scope_map calls; tests swap it to inject failures (SQLite aSyscall[] style).
 * Not thread-safe to change while maps are in flight: set it in a test before any thread runs. */
typedef void *(*md__mmap_fn)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
extern md__mmap_fn md__scope_mmap;

/* md_scope_map, also returning the errno of a failed mmap in *err (0 when the failure was not
 * mmap's), so pool.c can word its own message ("<what>: cannot map fd N: <strerror>"). */
md_status md__scope_map(md_scope *s, int fd, uint64_t offset, uint64_t length, uint32_t prot,
                        void **addr, int *err);

/* Test seam: sets the user count of an open scope that nobody else holds (to reach the limit
 * without 2^31 acquires). The CLOSING bit is kept. */
void md__scope_debug_set_users(md_scope *s, uint32_t users);

#endif
