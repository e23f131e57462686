/* lookup.c - the handle lookups every entry point starts with: a client, or an object owned
 * by a client, each failing with a message that names the call, the handle and why; with a
 * reference of their own (md__*_get) or through the thread's reference cache (md__*_use). */
#include "mutant.h"
#include "device_int.h"
#include "error.h"

md_status md__client_get(md_device *d, const char *fn, md_handle client, md__hentry **out) {
  md__hentry *e = md__handle_get(&d->ht, client, MD__KIND_CLIENT);
  if (!e)
    return md__fail(MD_INVALID_ARGUMENT, "%s: client 0x%016llx: %s", fn, (unsigned long long)client,
                    md__handle_why(&d->ht, client, MD__KIND_CLIENT));
  *out = e;
  return MD_NONE;
}

md_status md__owned_get(md_device *d, const char *fn, const char *what, md_handle client,
                        md_handle h, md__kind kind, md__hentry **out) {
  md__hentry *e = md__handle_get(&d->ht, h, kind);
  if (!e)
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016llx: %s", fn, what, (unsigned long long)h,
                    md__handle_why(&d->ht, h, kind));
  /* (Mutants: token_unbound, any client's token works; event_unbound, any client's event.) */
  if (e->owner != client && !MD_MUTANT(token_unbound) && !(MD_MUTANT(event_unbound) && kind == MD__KIND_EVENT)) {
    md__handle_put(&d->ht, e);
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016llx: belongs to another client", fn, what,
                    (unsigned long long)h);
  }
  *out = e;
  return MD_NONE;
}

md_status md__client_use(md_device *d, const char *fn, md_handle client, md__use *u) {
  if (md__handle_use(&d->ht, client, MD__KIND_CLIENT, u)) return MD_NONE;
  return md__fail(MD_INVALID_ARGUMENT, "%s: client 0x%016llx: %s", fn, (unsigned long long)client,
                  md__handle_why(&d->ht, client, MD__KIND_CLIENT));
}

md_status md__owned_use(md_device *d, const char *fn, const char *what, md_handle client, md_handle h,
                        md__kind kind, md__use *u) {
  md__hentry *e = md__handle_use(&d->ht, h, kind, u);
  if (!e)
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016llx: %s", fn, what, (unsigned long long)h,
                    md__handle_why(&d->ht, h, kind));
  if (e->owner != client && !MD_MUTANT(token_unbound)) { /* Mutant: any client's token works. */
    md__handle_unuse(&d->ht, u);
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016llx: belongs to another client", fn, what,
                    (unsigned long long)h);
  }
  return MD_NONE;
}

md_status md__issued_settle(md_device *d, const char *fn, const md__hentry *ce, md_handle client,
                            md__hentry *e, md_handle *h) {
  md__race_point(fn, "issued");
  /* Issuing took the table's lock, and so does a close's sweep (to read how far to go) after it
   * kills the client: a client still live here was killed after the issue, so its sweep sees
   * the handle. */
  if (atomic_load(&ce->handle) == client) return MD_NONE;
  if (!md__handle_kill(&d->ht, e, *h)) return MD_NONE;   /* the sweep's: in its leak report */
  *h = 0;
  return md__fail(MD_INVALID_ARGUMENT, "%s: client 0x%016llx: was closed during the call", fn,
                  (unsigned long long)client);
}
