/* loader.c - md_driver_load: dlopen + md_driver_entry + table checks (md/loader.h). */
#include "md/loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int bind_flags(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return 0;
#else
  return RTLD_DEEPBIND;
#endif
#else
  return RTLD_DEEPBIND;
#endif
}

const md_driver *md_driver_load(const char *so_path, md_driver_entry_fn linked, void **dl, char *err,
                                size_t errlen) {
  md_driver_entry_fn entry = linked;
  void *h = NULL;
  const char *who = so_path ? so_path : "linked driver";
  if (dl) *dl = NULL;
  if (err && errlen) err[0] = '\0';
  if (so_path) {
    /* dlopen looks a name without a '/' up in the library path, not in this folder: a driver
     * file named that way in this folder is what a user means. */
    char local[4096];
    const char *path = so_path;
    if (!strchr(so_path, '/') && access(so_path, F_OK) == 0 &&
        (size_t)snprintf(local, sizeof local, "./%s", so_path) < sizeof local)
      path = local;
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL | bind_flags());
    if (!h) {
      if (err)
        snprintf(err, errlen, "dlopen(%s): %s%s", so_path, dlerror(),
                 strchr(so_path, '/') ? "" : " (a name without '/' that is not a file here is looked up in the library path)");
      return NULL;
    }
    void *sym = dlsym(h, "md_driver_entry");
    if (!sym) {
      if (err) snprintf(err, errlen, "dlsym(%s, md_driver_entry): %s", so_path, dlerror());
      dlclose(h);
      return NULL;
    }
    memcpy(&entry, &sym, sizeof entry); /* POSIX's way from a dlsym result to a function */
  }
  const md_driver *d = entry ? entry(MD_DRIVER_ABI_VERSION) : NULL;
  const char *why = NULL;
  if (!entry) why = "no driver given and none linked";
  else if (!d) why = "md_driver_entry(1) returned NULL: the driver cannot serve ABI v1";
  else if (d->abi_version != MD_DRIVER_ABI_VERSION) why = "the table's abi_version is not 1";
  else if (d->struct_size < MD_DRIVER_SIZE_V1) why = "the table's struct_size is smaller than md_driver's v1 entries";
  else if (!d->open_device || !d->close_device || !d->get_capabilities || !d->get_supported_operations ||
           !d->open_client || !d->close_client || !d->prepare_model || !d->release_prepared_model ||
           !d->allocate || !d->copy_to || !d->copy_from || !d->free_buffer || !d->execute ||
           !d->execute_async || !d->wait_event || !d->last_error)
    why = "the table has a NULL entry point";
  if (why) {
    if (err) snprintf(err, errlen, "%s: %s", who, why);
    if (h) dlclose(h);
    return NULL;
  }
  if (dl) *dl = h;
  return d;
}

void md_driver_unload(void *dl) {
  if (dl) dlclose(dl);
}
