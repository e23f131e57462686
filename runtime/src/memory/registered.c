/* registered.c - registered pools (SPEC section 9): register_memory validates and maps a pool
 * once, unregister_memory kills its handle, and executions name it (md_request_pool.is_token
 * == 2) without validating or mapping anything again (exec_request.c).
 *
 * Decisions where SPEC is silent (docs/pools-and-scopes.md):
 *   - A registered pool is validated as a request pool (every kind, non-BLOB hardware buffers
 *     included), with the same rules and messages as a descriptor in a request; it is never a
 *     model's constant pool or a copy's memory (those take descriptors in the ABI).
 *   - The driver keeps the mapping, not a duplicate of the fd: the mapping holds the file, so
 *     closing, replacing or reusing the client's fd number changes nothing, and no descriptor
 *     is spent per pool. The descriptor's fd number is kept for messages only.
 *   - A registered pool's file is checked when it is registered; a client that shrinks the file
 *     afterwards can make an execution's access fault (SIGBUS), as with a descriptor whose file
 *     shrinks during a call (a known limit of pool mappings).
 *   - close_client releases the client's registered pools without counting them as leaks. */
#include <stdlib.h>

#include "mutant.h"
#include "error.h"
#include "objects_int.h"

void md__regpool_destroy(md_device *d, md__regpool *p) {
  if (p->host_registered && d->be->host_unregister) d->be->host_unregister(d->bk, p->host_registered);
  md__mapping_release(&p->map);   /* the last user of an uncached mapping: unmaps it */
  free(p);
}

md_status md__register_memory(md_device *d, md_handle client, const md_memory *mem, md_handle *pool) {
  if (!pool) return md__fail(MD_INVALID_ARGUMENT, "register_memory: pool is NULL");
  *pool = 0;
  md__hentry *ce;
  md_status st = md__client_get(d, "register_memory", client, &ce);
  if (st != MD_NONE) return st;
  md__regpool *p = NULL;
  if (!mem) {
    st = md__fail(MD_INVALID_ARGUMENT, "register_memory: memory is NULL");
    goto out;
  }
  p = calloc(1, sizeof *p);
  if (!p) {
    st = md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "register_memory: out of memory");
    goto out;
  }
  p->mem = *mem;
  if ((st = md__pool_validate(mem, MD__POOL_IO, "register_memory: memory", &p->plan)) != MD_NONE) goto out;
  /* Uncached: this object's acquire is the mapping's only use, and its release frees it. */
  if ((st = md__pool_acquire(NULL, mem, MD__POOL_IO, "register_memory: memory", &p->plan, &p->map)) != MD_NONE)
    goto out;
  if (d->be->host_register) {
    char err[192] = "";
    if (d->be->host_register(d->bk, p->map.base, p->map.size, err, sizeof err) == MD_NONE)
      p->host_registered = p->map.base;
  }
  md__hentry *pe;
  md__race_point("register_memory", "issuing");
  st = md__handle_issue(&d->ht, MD__KIND_POOL, client, p, pool, &pe);
  if (st != MD_NONE) {
    md__fail(st, "register_memory: too many live handles");
    goto out;
  }
  p = NULL;   /* the table's now */
  st = md__issued_settle(d, "register_memory", ce, client, pe, pool);   /* a racing close_client */
out:
  if (p) {
    if (p->map.scope) md__regpool_destroy(d, p);
    else free(p);
  }
  md__handle_put(&d->ht, ce);
  return st;
}

md_status md__unregister_memory(md_device *d, md_handle client, md_handle pool) {
  md__hentry *ce, *pe;
  md_status st = md__client_get(d, "unregister_memory", client, &ce);
  if (st != MD_NONE) return st;
  st = md__owned_get(d, "unregister_memory", "registered pool", client, pool, MD__KIND_POOL, &pe);
  if (st == MD_NONE) {
    /* The handle dies now; the mapping goes when the last execution using it ends. (Mutant
     * registered_pool_lives_on: it is not killed.) */
    if (!MD_MUTANT(registered_pool_lives_on) && !md__handle_kill(&d->ht, pe, pool))
      st = md__fail(MD_INVALID_ARGUMENT, "unregister_memory: registered pool 0x%016llx: was already released",
                    (unsigned long long)pool);
    md__handle_put(&d->ht, pe);
  }
  md__handle_put(&d->ht, ce);
  return st;
}
