/* refcount.c - process-wide counters of reference-count bugs (see refcount.h). */
#include "refcount.h"

_Atomic uint64_t md__refcount_underflows;
_Atomic uint64_t md__refcount_saturations;
