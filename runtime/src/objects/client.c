/* client.c - clients: opening one, and closing it with everything it still owns (the leak
 * report of SPEC section 1). */
#include <stdlib.h>

#include "mutant.h"
#include "error.h"
#include "objects_int.h"

md_status md__open_client(md_device *d, md_handle *out) {
  md__client *c = calloc(1, sizeof *c);
  if (!c) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_client: out of memory");
  md_status st = md__pool_cache_create(64, &c->pools);
  if (st != MD_NONE) {
    free(c);
    return md__fail(st, "open_client: cannot create the pool cache");
  }
  st = md__handle_issue(&d->ht, MD__KIND_CLIENT, 0, c, out, NULL);
  if (st != MD_NONE) {
    md__client_destroy(c);
    return md__fail(st, "open_client: too many live handles");
  }
  return MD_NONE;
}

void md__client_destroy(md__client *c) {
  md__pool_cache_destroy(c->pools);
  free(c);
}

typedef struct close_ctx {
  md_device *d;
  md_handle client;
  md_leak_report rep;
} close_ctx;

static void release_owned(md__hentry *e, void *arg) {
  close_ctx *c = arg;
  if (e->owner != c->client) return;
  md_handle h = atomic_load(&e->handle);
  uint64_t bytes = 0;
  md__kind kind = (md__kind)atomic_load_explicit(&e->kind, memory_order_relaxed);
  if (kind == MD__KIND_BUFFER) bytes = md__buffer_bytes(e->obj);
  if (!md__handle_kill(&c->d->ht, e, h)) return;   /* released concurrently: not a leak */
  switch (kind) {
    case MD__KIND_BUFFER: c->rep.buffers++; c->rep.bytes += bytes; break;
    case MD__KIND_PREPARED: c->rep.prepared_models++; break;
    case MD__KIND_EVENT: c->rep.events++; break;
    case MD__KIND_POOL: break;   /* SPEC 9: registered pools are released, not leaks */
    case MD__KIND_CLIENT: break;
  }
}

md_status md__close_client(md_device *d, md_handle client, md_leak_report *leaks) {
  md__hentry *ce;
  md_status st = md__client_get(d, "close_client", client, &ce);
  if (st != MD_NONE) return st;
  /* Killing the client first makes every new call with it fail; calls already past the
   * client lookup that create objects re-check it after issuing them (see md__allocate),
   * so the sweep below and those calls between them leave nothing behind. */
  if (!md__handle_kill(&d->ht, ce, client)) {
    md__handle_put(&d->ht, ce);
    return md__fail(MD_INVALID_ARGUMENT, "close_client: client 0x%016llx: was already released",
                    (unsigned long long)client);
  }
  /* A stalled execution of this client is let go to finish on its own (SPEC 4). */
  md__stall_release_client(d, client);
  close_ctx c = {.d = d, .client = client};
  md__htable_foreach(&d->ht, release_owned, &c);
  if (MD_MUTANT(leak_report_wrong)) c.rep.buffers = 0; /* Mutant: buffers left live go unreported. */
  if (leaks) *leaks = c.rep;
  md__handle_put(&d->ht, ce);
  return MD_NONE;
}
