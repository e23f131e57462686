/* md/loader.h - loading a driver the way an outside tool does: dlopen a shared object, call
 * its md_driver_entry(MD_DRIVER_ABI_VERSION) and check the table before anything calls through
 * it. Used by the conformance engine, the recording driver and the simulated workloads
 * (static library md_loader; not part of libmd_driver.so). */
#ifndef MD_LOADER_H
#define MD_LOADER_H

#include <stddef.h>
#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef const md_driver *(*md_driver_entry_fn)(uint32_t abi_version);

/* The size of a v1 table without the optional entries of SPEC 9: it ends at last_error. */
#define MD_DRIVER_SIZE_V1 (offsetof(md_driver, last_error) + sizeof(((md_driver *)0)->last_error))

/* Whether table d has the optional entry `member` (SPEC 9): its struct_size reaches past it and it
 * is not NULL. A table too short to hold it does not have it, whatever lies beyond its end. */
#define MD_DRIVER_HAS(d, member)                                                                   \
  ((d)->struct_size >= offsetof(md_driver, member) + sizeof(((md_driver *)0)->member) && (d)->member)

/* Loads the driver at so_path, or, when so_path is NULL, asks `linked` (the md_driver_entry of
 * a driver linked into the program; NULL: none). The table must serve ABI v1: abi_version 1,
 * struct_size >= MD_DRIVER_SIZE_V1, no NULL entry point up to last_error (the SPEC 9 entries
 * after it are optional: a shorter table, or a NULL entry, lacks them; see MD_DRIVER_HAS). On success *dl (when dl is not NULL)
 * gets the dlopen handle (NULL for the linked driver); on failure NULL is returned, nothing
 * stays loaded and err gets "<path or 'linked driver'>: <why>".
 *
 * A shared object is opened with RTLD_DEEPBIND (except in sanitized builds, whose runtimes
 * refuse it): a program that links the reference driver has its public md_* symbols global,
 * and another build of it (a mutant, a HIP build) must bind its own calls of them to its own
 * copies, or it would silently run on the linked copy's kernel and backend registries. */
const md_driver *md_driver_load(const char *so_path, md_driver_entry_fn linked, void **dl, char *err,
                                size_t errlen);

/* dlcloses what md_driver_load opened (NULL is ignored). */
void md_driver_unload(void *dl);

#ifdef __cplusplus
}
#endif
#endif
