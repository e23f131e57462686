/* fault_fixture.h - what the fault-plan suites (test_spec_faults.c, test_spec_stall_async.c)
 * share: a device opened with a config and one prepared ADD float32 [2,3] model, and its data. */
#ifndef MD_TESTS_FAULT_FIXTURE_H
#define MD_TESTS_FAULT_FIXTURE_H

#include "support.h"

static const uint32_t D23[2] = {2, 3};
#define B23 24u
static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

typedef struct fx {
  mdt_env e;
  md_handle p;   /* ADD float32 [2,3] */
} fx;

static inline void fx_open(fx *f, const char *config) {
  mdt_env_open(&f->e, config);
  mdt_model b;
  f->p = mdt_prepare(&f->e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}

static inline const char *msg(fx *f) { return f->e.drv->last_error(f->e.dev); }

#endif
