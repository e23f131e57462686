/* mutant.h - private to the runtime: MD_MUTANT(name), the branches of the reference driver's
 * mutants (conformance/mutants/mutants.txt: each breaks one rule the way a vendor might).
 *
 * A mutant is an expression, not an #ifdef, so both branches are compiled in every build and
 * cannot rot: `if (MD_MUTANT(role_unchecked)) return true;`. In the normal driver it is the
 * constant 0 (the branch is dead code the compiler drops); in the mutants build
 * (md_driver_mutants, -DMD_MUTANTS) it compares with md__mutant, the mutant md_driver_entry
 * picked from the environment variable MD_MUTANT (runtime/driver/entry.c). A name that is not
 * in mutants.txt does not compile (its MD__MUTANT_ID_ constant, generated from the list, is
 * missing). */
#ifndef MD_MUTANT_H
#define MD_MUTANT_H

#include "mutants_gen.h"

#ifdef MD_MUTANTS
/* The mutant that runs (an MD__MUTANT_ID_ value), 0 for none. Set once by md_driver_entry. */
extern int md__mutant;
#define MD_MUTANT(name) (md__mutant == MD__MUTANT_ID_##name)
#else
#define MD_MUTANT(name) (MD__MUTANT_ID_##name == 0) /* ids start at 1: always false */
#endif

#endif
