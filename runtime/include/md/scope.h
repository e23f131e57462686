/* md/scope.h - resource scopes (SPEC section 6): explicit lifetimes for memory mappings.
 *
 * A scope owns one or more mappings (mmap'ed regions, or any resource with a release
 * callback). It is closed explicitly, never by reachability:
 *   - confined: only the thread that opened it may acquire, release, add to or close it;
 *   - shared:   any thread; closing while acquired fails ("acquired by N users") and frees
 *               nothing, unless closed with md_scope_close_deferred, which marks it closing
 *               and lets the last release free it;
 *   - global:   never closed; md_scope_close on it fails.
 * Acquire/release is one atomic operation each. A closed scope is never touched again by the
 * library; its memory is freed when the last holder lets go.
 *
 * Errors: functions return md_status; the message ("scope 0x..: acquired by 2 users") is the
 * calling thread's md_scope_error(). */
#ifndef MD_SCOPE_H
#define MD_SCOPE_H

#include <stddef.h>
#include <stdint.h>
#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum md_scope_kind { MD_SCOPE_CONFINED = 0, MD_SCOPE_SHARED = 1, MD_SCOPE_GLOBAL = 2 } md_scope_kind;

typedef struct md_scope md_scope;

/* Opens an empty scope. RESOURCE_EXHAUSTED_TRANSIENT if memory is short. */
md_status md_scope_open(md_scope_kind kind, md_scope **out);

/* Maps `length` bytes of fd at `offset` with `prot` (PROT_READ|PROT_WRITE bits) MAP_SHARED,
 * owned by the scope (unmapped when the scope is freed). The page-alignment of offset is
 * handled here: *addr points at byte `offset` of the file. GENERAL_FAILURE if mmap fails
 * (message names errno), INVALID_ARGUMENT for a closed scope or bad arguments. */
md_status md_scope_map(md_scope *s, int fd, uint64_t offset, uint64_t length, uint32_t prot,
                       void **addr);

/* Attaches any resource: release(ctx) runs once, when the scope is freed. */
md_status md_scope_attach(md_scope *s, void (*release)(void *ctx), void *ctx);

/* Takes a use of the scope for the duration of a call or an async execution. INVALID_ARGUMENT
 * if it is closed or closing, or (confined) called from another thread. */
md_status md_scope_acquire(md_scope *s);
/* Ends a use. The last release of a closing scope frees it and everything it owns. A release
 * without a matching acquire is reported (md_scope_error) and ignored, never wraps. */
void md_scope_release(md_scope *s);

/* Closes now: frees everything. INVALID_ARGUMENT ("acquired by N users") while acquired, for a
 * global scope, or from a non-owner thread of a confined scope. */
md_status md_scope_close(md_scope *s);
/* Closes as soon as possible: new acquires fail at once; the last release frees. Returns
 * INVALID_ARGUMENT for a global scope or a confined scope from another thread. */
md_status md_scope_close_deferred(md_scope *s);

/* For handing to another thread (e.g. an async execution): INVALID_ARGUMENT with a clear
 * message for a confined scope, else MD_NONE. */
md_status md_scope_check_shareable(const md_scope *s);

md_scope_kind md_scope_get_kind(const md_scope *s);
/* Current acquire count (for tests and diagnostics). */
uint32_t md_scope_users(const md_scope *s);
/* The calling thread's last scope failure message; never NULL. */
const char *md_scope_error(void);

#ifdef __cplusplus
}
#endif
#endif
