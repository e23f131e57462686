/* test_spec_shapes.c - black-box rules of SPEC section 3 "Dynamic shape": buffers whose dims
 * are not fully known take their size from the execution that writes them, are resized by
 * later executions, and fully known buffers are never written with other dims. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static md_handle PD; /* ADD float32 [0,3]: any batch */
static const uint32_t D03[2] = {0, 3}, D23[2] = {2, 3};

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  PD = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
}
static void teardown(void) {
  if (PD) e.drv->release_prepared_model(e.dev, e.client, PD);
  mdt_env_close(&e, 0);
}
TestSuite(shapes, .init = setup, .fini = teardown);

/* Runs PD on batch n (inputs on pools: a[i] = i, b[i] = 100 + i) writing output token t.
 * Returns the status; shape 0 in *sh. */
static md_status run_batch(md_handle prep, uint32_t n, md_token t, md_output_shape *sh) {
  float a[96], b[96];
  cr_assert_leq(n * 3u, 96u);
  mdt_iota(a, n * 3u, 0);
  mdt_iota(b, n * 3u, 100);
  uint32_t d[2] = {n, 3};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, n * 12u, 2, d);
  mdt_req_in_data(&r, b, n * 12u, 2, d);
  mdt_req_out_token(&r, t, 0, NULL);
  md_timing tm;
  md_status st = mdt_exec(&e, prep, &r, sh, &tm);
  mdt_req_fini(&r);
  return st;
}

static void expect_batch_content(md_token t, uint32_t n) {
  float out[96];
  md_status st = mdt_copy_to(&e, e.client, t, out, n * 12u);
  cr_assert_eq(st, MD_NONE, "copy_to of batch %u: %d %s", n, (int)st, e.drv->last_error(e.dev));
  for (uint32_t i = 0; i < n * 3u; i++) cr_expect_eq(out[i], 100.0f + 2.0f * (float)i, "batch %u, [%u]", n, i);
}

Test(shapes, dynamic_buffer_takes_size_from_execution) {
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 2, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[0].dims[0], 2u);
  cr_expect_eq(sh[0].dims[1], 3u);
  cr_expect_eq(sh[0].is_sufficient, 1);
  expect_batch_content(t, 2);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 48), MD_INVALID_ARGUMENT, "current dims are [2,3]");
  mdt_free(&e, t);
}

Test(shapes, successive_executions_resize_dynamic_buffer) {
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL);
  static const uint32_t batches[] = {2, 8, 1, 5, 32, 3};
  for (uint32_t k = 0; k < MDT_N(batches); k++) {
    uint32_t n = batches[k];
    md_output_shape sh[8];
    cr_assert_eq(run_batch(PD, n, t, sh), MD_NONE, "batch %u: %s", n, e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].dims[0], n);
    expect_batch_content(t, n);
    cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, (n + 1) * 12u), MD_INVALID_ARGUMENT,
                 "batch %u: copy_to accepted another size", n);
  }
  mdt_free(&e, t);
}

Test(shapes, unknown_rank_buffer_takes_rank_and_dims_from_execution) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = mdt_alloc(&e, Q, true, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(Q, 4, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  expect_batch_content(t, 4);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(shapes, dynamic_output_read_back_as_input_uses_its_current_dims) {
  md_token t = mdt_alloc_inout(&e, PD, 0, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 4, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  /* t (= 100 + 2i, [4,3]) + c (= 1) -> pool */
  float c[12], out[12];
  for (int i = 0; i < 12; i++) c[i] = 1;
  static const uint32_t d43[2] = {4, 3};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, c, 48, 2, d43);
  mdt_req_out_pool(&r, 48, 0, NULL);
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, PD, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, 48);
  for (int i = 0; i < 12; i++) cr_expect_eq(out[i], 101.0f + 2.0f * (float)i);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(shapes, dynamic_buffer_read_with_other_dims_rejected) {
  md_token t = mdt_alloc_inout(&e, PD, 0, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 4, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  float c[6] = {0};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 2, D23); /* the buffer is [4,3] now */
  mdt_req_in_data(&r, c, 24, 2, D23);
  mdt_req_out_pool(&r, 24, 0, NULL);
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, PD, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(shapes, copy_from_then_execution_resize) {
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL);
  float v[30];
  mdt_iota(v, 30, 0);
  static const uint32_t d10[2] = {10, 3};
  cr_assert_eq(mdt_copy_from(&e, e.client, t, v, 120, 2, d10), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 2, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_batch_content(t, 2);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 120), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(shapes, known_buffer_written_with_other_dims_is_general_failure) {
  md_token t = mdt_alloc(&e, PD, true, 0, 2, D23); /* desc fixes [2,3] */
  md_output_shape sh[8];
  md_status st = run_batch(PD, 4, t, sh);
  cr_expect_eq(st, MD_GENERAL_FAILURE, "status %d (OUTPUT_INSUFFICIENT_SIZE is 3)", (int)st);
  cr_expect_neq(st, MD_OUTPUT_INSUFFICIENT_SIZE);
  mdt_free(&e, t);
}

Test(shapes, known_buffer_written_with_smaller_dims_is_general_failure) {
  /* Smaller fits in the bytes but not in the dims. */
  md_token t = mdt_alloc(&e, PD, true, 0, 2, D23);
  md_output_shape sh[8];
  cr_expect_eq(run_batch(PD, 1, t, sh), MD_GENERAL_FAILURE);
  mdt_free(&e, t);
}

Test(shapes, known_buffer_failed_write_uninitializes_and_keeps_dims) {
  md_token t = mdt_alloc(&e, PD, true, 0, 2, D23);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 2, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_batch_content(t, 2);
  cr_assert_eq(run_batch(PD, 4, t, sh), MD_GENERAL_FAILURE);
  for (int k = 0; k < 1; k++) cr_expect_eq(sh[k].rank, 0u, "failure reported a shape");
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 48), MD_INVALID_ARGUMENT, "dims changed to [4,3]");
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 24), MD_GENERAL_FAILURE, "still initialized");
  mdt_free(&e, t);
}

Test(shapes, known_buffer_written_with_its_dims_succeeds) {
  md_token t = mdt_alloc(&e, PD, true, 0, 2, D23);
  md_output_shape sh[8];
  cr_expect_eq(run_batch(PD, 2, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_batch_content(t, 2);
  mdt_free(&e, t);
}

Test(shapes, dynamic_buffer_failed_write_keeps_last_dims) {
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 2, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  /* Now a batch-4 execution that fails on an unmappable input pool. */
  int fd = mdt_unmappable_fd(48);
  float a[12];
  mdt_iota(a, 12, 0);
  static const uint32_t d43[2] = {4, 3};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, 48, 2, d43);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fd, 48)), 0, 48, 2, d43);
  mdt_req_out_token(&r, t, 0, NULL);
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, PD, &r, sh, &tm), MD_GENERAL_FAILURE);
  mdt_req_fini(&r);
  close(fd);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 48), MD_INVALID_ARGUMENT, "dims changed to [4,3]");
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 24), MD_GENERAL_FAILURE, "still initialized");
  mdt_free(&e, t);
}

Test(shapes, device_output_never_output_insufficient_size_even_when_growing) {
  /* Growing a dynamic buffer from 1 row to 64 rows is a resize, not a short output. */
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 1, t, sh), MD_NONE, "%s", e.drv->last_error(e.dev));
  float a[192], b[192];
  mdt_iota(a, 192, 0);
  mdt_iota(b, 192, 100);
  static const uint32_t d64[2] = {64, 3};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, 768, 2, d64);
  mdt_req_in_data(&r, b, 768, 2, d64);
  mdt_req_out_token(&r, t, 0, NULL);
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, PD, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  float out[192];
  cr_assert_eq(mdt_copy_to(&e, e.client, t, out, 768), MD_NONE);
  for (int i = 0; i < 192; i++) cr_expect_eq(out[i], 100.0f + 2.0f * (float)i);
  mdt_free(&e, t);
}

Test(shapes, resizing_one_buffer_leaves_another_intact) {
  md_token t = mdt_alloc(&e, PD, true, 0, 0, NULL), u = mdt_alloc(&e, PD, true, 0, 0, NULL);
  md_output_shape sh[8];
  cr_assert_eq(run_batch(PD, 3, u, sh), MD_NONE);
  for (uint32_t n = 1; n <= 16; n *= 2) cr_assert_eq(run_batch(PD, n, t, sh), MD_NONE);
  expect_batch_content(u, 3);
  expect_batch_content(t, 16);
  mdt_free(&e, t);
  mdt_free(&e, u);
}
