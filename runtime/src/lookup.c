/* lookup.c - the handle lookups every entry point starts with: a client, or an object owned
 * by a client, each failing with a message that names the call, the handle and why. */
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
  if (e->owner != client && !MD_MUTANT(token_unbound)) { /* Mutant: any client's token works. */
    md__handle_put(&d->ht, e);
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016llx: belongs to another client", fn, what,
                    (unsigned long long)h);
  }
  *out = e;
  return MD_NONE;
}
