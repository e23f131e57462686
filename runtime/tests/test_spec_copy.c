/* test_spec_copy.c - black-box rules of SPEC section 3 for copy_from and copy_to: dims and
 * sizes, the order of the size and initialization checks, what a failure does to the
 * initialized flag and the current dims. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static md_handle P;  /* ADD float32 [2,3] */
static md_handle PD; /* ADD float32 [0,3] (dynamic batch) */
static const uint32_t D23[2] = {2, 3}, D03[2] = {0, 3}, D43[2] = {4, 3};
#define B23 24u
#define B43 48u

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  PD = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
}
static void teardown(void) {
  if (P) e.drv->release_prepared_model(e.dev, e.client, P);
  if (PD) e.drv->release_prepared_model(e.dev, e.client, PD);
  mdt_env_close(&e, 0);
}
TestSuite(copy_from, .init = setup, .fini = teardown);
TestSuite(copy_to, .init = setup, .fini = teardown);

static float V[64];
static md_status put(md_token t, uint64_t bytes, uint32_t rank, const uint32_t *dims) {
  mdt_iota(V, 64, 1);
  return mdt_copy_from(&e, e.client, t, V, bytes, rank, dims);
}
static md_token known(void) { return mdt_alloc(&e, P, false, 0, 0, NULL); }
static md_token dynamic(void) { return mdt_alloc(&e, PD, false, 0, 0, NULL); }

/* The buffer is initialized and holds V's first bytes/4 floats (copy_to of exactly bytes). */
static void expect_holds(md_token t, uint64_t bytes) {
  float out[64];
  md_status st = mdt_copy_to(&e, e.client, t, out, bytes);
  cr_expect_eq(st, MD_NONE, "copy_to(%llu bytes): %d %s", (unsigned long long)bytes, (int)st,
               e.drv->last_error(e.dev));
  if (st == MD_NONE) cr_expect(memcmp(out, V, (size_t)bytes) == 0, "copy_to returned other bytes");
}
static void expect_uninitialized(md_token t, uint64_t right_size) {
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, right_size), MD_GENERAL_FAILURE,
               "buffer should be uninitialized");
}

/* ---- copy_from ---- */

Test(copy_from, round_trips_through_copy_to) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 2, D23), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_holds(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, empty_dims_accepted_when_initial_dims_fully_known) {
  md_token t = known();
  cr_expect_eq(put(t, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_holds(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, empty_dims_rejected_when_initial_dims_unknown) {
  md_token t = dynamic();
  cr_expect_eq(put(t, B23, 0, NULL), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_with_zero_rejected_on_known_buffer) {
  static const uint32_t d20[2] = {2, 0};
  md_token t = known();
  cr_expect_eq(put(t, B23, 2, d20), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_with_zero_rejected_on_dynamic_buffer) {
  md_token t = dynamic();
  cr_expect_eq(put(t, B23, 2, D03), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_not_combining_rejected) {
  static const uint32_t d32[2] = {3, 2};
  md_token t = known();
  cr_expect_eq(put(t, B23, 2, d32), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_of_other_rank_rejected) {
  static const uint32_t d6[1] = {6};
  md_token t = known();
  cr_expect_eq(put(t, B23, 1, d6), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_not_combining_with_dynamic_buffer_rejected) {
  static const uint32_t d24[2] = {2, 4};
  md_token t = dynamic();
  cr_expect_eq(put(t, 32, 2, d24), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, size_smaller_than_known_dims_rejected) {
  md_token t = known();
  cr_expect_eq(put(t, 20, 0, NULL), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, size_larger_than_known_dims_rejected) {
  md_token t = known();
  cr_expect_eq(put(t, 28, 2, D23), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, size_must_match_combined_dims_of_dynamic_buffer) {
  md_token t = dynamic();
  cr_expect_eq(put(t, B23, 2, D43), MD_INVALID_ARGUMENT, "24 bytes for dims [4,3]");
  cr_expect_eq(put(t, B43, 2, D43), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
}

Test(copy_from, success_sets_current_dims) {
  md_token t = dynamic();
  cr_assert_eq(put(t, B43, 2, D43), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_INVALID_ARGUMENT, "current dims are [4,3]");
  expect_holds(t, B43);
  mdt_free(&e, t);
}

Test(copy_from, later_copy_from_with_other_dims_resizes_dynamic_buffer) {
  md_token t = dynamic();
  cr_assert_eq(put(t, B43, 2, D43), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(put(t, B23, 2, D23), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B43), MD_INVALID_ARGUMENT, "current dims are [2,3]");
  expect_holds(t, B23);
  static const uint32_t d83[2] = {8, 3};
  cr_assert_eq(put(t, 96, 2, d83), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_holds(t, 96);
  mdt_free(&e, t);
}

Test(copy_from, size_failure_leaves_buffer_uninitialized) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  cr_assert_eq(put(t, 20, 0, NULL), MD_INVALID_ARGUMENT);
  expect_uninitialized(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, dims_failure_leaves_buffer_uninitialized) {
  static const uint32_t d32[2] = {3, 2};
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  cr_assert_eq(put(t, B23, 2, d32), MD_INVALID_ARGUMENT);
  expect_uninitialized(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, invalid_pool_failure_leaves_buffer_uninitialized) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  md_memory bad = mdt_ashmem(-1, B23);
  cr_assert_eq(e.drv->copy_from(e.dev, e.client, t, &bad, 0, NULL), MD_INVALID_ARGUMENT);
  expect_uninitialized(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, unmappable_pool_failure_leaves_buffer_uninitialized) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  int fd = mdt_unmappable_fd(B23);
  md_memory m = mdt_ashmem(fd, B23);
  md_status st = e.drv->copy_from(e.dev, e.client, t, &m, 0, NULL);
  cr_expect_neq(st, MD_NONE, "copy_from read a pool it cannot map");
  expect_uninitialized(t, B23);
  close(fd);
  mdt_free(&e, t);
}

Test(copy_from, failure_keeps_current_dims) {
  /* A dynamic buffer at [2,3] that a failing copy_from (dims [4,3], 24 bytes) uninitializes
   * keeps [2,3]: copy_to then checks 24 bytes (GENERAL_FAILURE) and rejects 48. */
  md_token t = dynamic();
  cr_assert_eq(put(t, B23, 2, D23), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(put(t, B23, 2, D43), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B43), MD_INVALID_ARGUMENT, "dims changed");
  expect_uninitialized(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, output_only_buffer_accepts_copy_from) {
  /* copy_from is not a role: any buffer can be initialized from a pool. */
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_expect_eq(put(t, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_holds(t, B23);
  mdt_free(&e, t);
}

/* ---- copy_to ---- */

Test(copy_to, size_checked_before_initialization) {
  md_token t = known();
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 20), MD_INVALID_ARGUMENT, "wrong size, uninitialized");
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "right size, uninitialized");
  mdt_free(&e, t);
}

Test(copy_to, larger_destination_rejected) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 28), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_to, smaller_destination_rejected) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 20), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_to, uninitialized_buffer_of_unknown_dims_is_general_failure_whatever_the_size) {
  /* No current dims to check a size against: the only rule left is initialization. */
  md_token t = dynamic();
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 7), MD_GENERAL_FAILURE);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE);
  mdt_free(&e, t);
}

Test(copy_to, invalid_pool_checked_before_initialization) {
  md_token t = known();
  md_memory bad = mdt_ashmem(-1, B23);
  cr_expect_eq(e.drv->copy_to(e.dev, e.client, t, &bad), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_to, failure_keeps_buffer_initialized) {
  /* Only copy_from and executions change the flag; a rejected copy_to reads nothing. */
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  cr_assert_eq(mdt_copy_to(&e, e.client, t, NULL, 20), MD_INVALID_ARGUMENT);
  expect_holds(t, B23);
  mdt_free(&e, t);
}

Test(copy_to, writes_only_its_bytes) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  uint8_t file[64], after[64];
  memset(file, 0x77, sizeof file);
  int fd = mdt_memfd(file, sizeof file);
  md_memory dst = mdt_mmap_fd(fd, 16, B23);
  cr_assert_eq(e.drv->copy_to(e.dev, e.client, t, &dst), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(pread(fd, after, sizeof after, 0), (ssize_t)sizeof after);
  cr_expect(memcmp(after + 16, V, B23) == 0);
  for (int i = 0; i < 64; i++)
    if (i < 16 || i >= 16 + (int)B23) cr_expect_eq(after[i], 0x77, "byte %d changed", i);
  close(fd);
  mdt_free(&e, t);
}

Test(copy_to, repeated_copy_to_returns_same_bytes) {
  md_token t = known();
  cr_assert_eq(put(t, B23, 0, NULL), MD_NONE);
  for (int i = 0; i < 3; i++) expect_holds(t, B23);
  mdt_free(&e, t);
}

Test(copy_from, empty_dims_stay_rejected_after_dims_become_known) {
  /* The rule is about the initial dims: a dynamic buffer written at [2,3] still needs dims. */
  md_token t = dynamic();
  cr_assert_eq(put(t, B23, 2, D23), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(put(t, B23, 0, NULL), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(copy_from, dims_above_max_rank_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = mdt_alloc(&e, Q, false, 0, 0, NULL);
  uint32_t d[MD_MAX_RANK + 1];
  for (uint32_t i = 0; i <= MD_MAX_RANK; i++) d[i] = 1;
  d[0] = 6;
  cr_expect_eq(put(t, B23, MD_MAX_RANK + 1, d), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(copy_from, quant8_buffer_holds_one_byte_per_element) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.copy", MD_TENSOR_QUANT8_ASYMM, 0.5f, 3, 2, D23));
  md_token t = mdt_alloc(&e, Q, false, 0, 0, NULL);
  uint8_t v[B23] = {1, 2, 3, 250, 251, 252}, back[6];
  cr_expect_eq(mdt_copy_from(&e, e.client, t, v, B23, 0, NULL), MD_INVALID_ARGUMENT, "24 bytes for 6 quant8");
  cr_assert_eq(mdt_copy_from(&e, e.client, t, v, 6, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(mdt_copy_to(&e, e.client, t, back, 6), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect(memcmp(v, back, 6) == 0);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(copy_to, other_clients_uninitialized_token_is_invalid_argument) {
  /* Ownership is checked before initialization: the other client learns nothing. */
  md_handle c2 = mdt_open_client(&e);
  md_token t = known();
  cr_expect_eq(mdt_copy_to(&e, c2, t, NULL, B23), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_close_client(&e, c2, NULL);
}

Test(copy_from, scalar_buffer_takes_no_dims) {
  mdt_model b;
  md_handle S = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));   /* input 2: INT32 scalar */
  md_buffer_role role = {.model_index = 0, .io_index = 2, .probability = 1.0f};
  md_token t;
  cr_assert_eq(e.drv->allocate(e.dev, e.client, NULL, &S, 1, &role, 1, NULL, 0, &t), MD_NONE, "%s",
               e.drv->last_error(e.dev));
  int32_t v = 1;
  int fd = mdt_memfd(&v, sizeof v);
  md_memory m = mdt_ashmem(fd, sizeof v);
  uint32_t one = 1;
  cr_assert_eq(e.drv->copy_from(e.dev, e.client, t, &m, 1, &one), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "scalar"), "%s", e.drv->last_error(e.dev));
  cr_assert_eq(e.drv->copy_from(e.dev, e.client, t, &m, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  close(fd);
  mdt_free(&e, t);
}
