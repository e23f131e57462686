/* entry.c - the reference driver product: its one exported symbol, and the backends it was
 * built with. This is the composition root: the runtime (runtime/src) knows backends only
 * through md/backend.h, and this file is the one place that names them (the way SQLite's
 * amalgamation picks its VFS). Built once per product: libmd_driver.so and md_refdriver (the
 * same driver linked statically into tests and benchmarks). */
#include <pthread.h>
#include <stddef.h>

#include "driver_int.h"
#include "md/backend.h"
#include "md/sim.h"
#ifdef MD_WITH_HIP
#include "hip_backend.h"
#endif

static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

#ifdef MD_MUTANTS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutant.h"

/* The mutants build (mutant.h): the mutant to run is named by $MD_MUTANT (unset or empty: none,
 * the reference behaviour). -1 when it names no mutant of conformance/mutants/mutants.txt. */
static int pick_mutant(void) {
  static const char *const names[] = {MD__MUTANT_NAMES NULL};
  const char *want = getenv("MD_MUTANT");
  if (!want || !*want) return 0;
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], want) == 0) return i + 1;
  fprintf(stderr, "mdc-reference-mutants: MD_MUTANT=%s names no mutant of conformance/mutants/mutants.txt\n", want);
  return -1;
}
#endif

/* Registers the product's backends, once per process, before the first device can open. A
 * name a tool registered first (md_backend_register) keeps its table. */
static void register_builtins(void) {
  md_backend_register(md_sim_backend());
#ifdef MD_WITH_HIP
  md_backend_register(md_hip_backend());
#endif
}

const md_driver *md_driver_entry(uint32_t abi_version) {
  if (abi_version != MD_DRIVER_ABI_VERSION) return NULL;
#ifdef MD_MUTANTS
  int m = pick_mutant();
  if (m < 0) return NULL;
  md__mutant = m;
#endif
  pthread_once(&builtins_once, register_builtins);
  return md__driver_table();
}
