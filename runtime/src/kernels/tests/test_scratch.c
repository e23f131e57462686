/* test_scratch.c - md_kernel_scratch and the kernel context: alignment, the limit, release
 * and reuse. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "ktest.h"

Test(scratch, blocks_are_64_byte_aligned_and_writable) {
  md_kernel_ctx c;
  md__kctx_init(&c, MD__KCTX_DEFAULT_LIMIT);
  const uint64_t sizes[] = {1, 3, 64, 65, 1000, 4096};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = md_kernel_scratch(&c, sizes[i]);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 64, 0, "size %llu", (unsigned long long)sizes[i]);
    memset(p, 0xab, sizes[i]);
  }
  md__kctx_release(&c);
}

Test(scratch, zero_bytes_gives_a_usable_pointer) {
  md_kernel_ctx c;
  md__kctx_init(&c, 16);
  void *p = md_kernel_scratch(&c, 0);
  cr_assert_not_null(p);
  cr_assert_eq((uintptr_t)p % 64, 0);
  md__kctx_release(&c);
}

Test(scratch, null_past_the_limit) {
  md_kernel_ctx c;
  md__kctx_init(&c, 1000);
  cr_assert_not_null(md_kernel_scratch(&c, 600));
  cr_assert_not_null(md_kernel_scratch(&c, 400)); /* exactly the limit */
  cr_assert_null(md_kernel_scratch(&c, 1));
  md__kctx_release(&c);
}

Test(scratch, zero_limit_allows_nothing) {
  md_kernel_ctx c;
  md__kctx_init(&c, 0);
  cr_assert_null(md_kernel_scratch(&c, 1));
  md__kctx_release(&c);
}

Test(scratch, huge_request_returns_null) {
  md_kernel_ctx c;
  md__kctx_init(&c, MD__KCTX_UNLIMITED);
  cr_assert_null(md_kernel_scratch(&c, UINT64_MAX));
  cr_assert_null(md_kernel_scratch(&c, UINT64_MAX - 10));
  cr_assert_not_null(md_kernel_scratch(&c, 8));
  md__kctx_release(&c);
}

Test(scratch, null_context_returns_null) {
  cr_assert_null(md_kernel_scratch(NULL, 8));
  md__kctx_release(NULL);
}

Test(scratch, release_frees_and_allows_reuse) {
  md_kernel_ctx c;
  md__kctx_init(&c, 256);
  for (int round = 0; round < 3; round++) {
    cr_assert_not_null(md_kernel_scratch(&c, 200));
    cr_assert_null(md_kernel_scratch(&c, 100));
    md__kctx_release(&c); /* LeakSanitizer checks that every block went */
  }
}

/* Release gives the whole limit back, not all but what was used (registry.c:md__kctx_release). */
Test(scratch, release_gives_back_the_whole_limit) {
  md_kernel_ctx c;
  md__kctx_init(&c, 256);
  cr_assert_not_null(md_kernel_scratch(&c, 256));
  md__kctx_release(&c);
  cr_expect_not_null(md_kernel_scratch(&c, 256), "after release the limit is free again");
  md__kctx_release(&c);
}
