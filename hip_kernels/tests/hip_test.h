/* hip_test.h - private to the hip tests: opening the hip backend or skipping where no GPU
 * answers (on the CPU execution layer one always does). */
#ifndef MD_HIP_TEST_H
#define MD_HIP_TEST_H

#include <criterion/criterion.h>
#include <string.h>

#include "hip_backend.h"

/* Opens the hip backend with default parameters (mem_limit bytes when non-zero); skips the
 * test, saying why, where no GPU answers. */
static inline md_backend *hip_open_or_skip(uint64_t mem_limit) {
  md_backend_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.mem_limit = mem_limit;
  char err[256] = "";
  md_backend *b = NULL;
  md_status st = md_hip_backend()->open(&p, &b, err, sizeof err);
  if (st == MD_DEVICE_UNAVAILABLE) cr_skip_test("GPU-only test skipped: %s", err);
  cr_assert_eq(st, MD_NONE, "hip open: %s", err);
  return b;
}

#endif
