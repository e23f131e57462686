/* test_spec_pools.c - black-box rules of SPEC section 2 (memory pools), through the md_driver
 * table only: which pool kinds each use accepts, pool validation before mapping, unmappable
 * pools, constant operand storage, and request arguments on normal and token pools. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static void setup(void) { mdt_env_open(&e, NULL); }
static void teardown(void) { mdt_env_close(&e, 0); }
TestSuite(pools, .init = setup, .fini = teardown);

static const uint32_t D23[2] = {2, 3};
#define B23 24u /* bytes of a float32 [2,3] */

static md_handle prepare_add23(void) {
  mdt_model b;
  return mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}

static void expect_sum(const float *out, float base_a, float base_b) {
  for (int i = 0; i < 6; i++)
    cr_expect_eq(out[i], base_a + base_b + 2.0f * (float)i, "out[%d] = %g", i, (double)out[i]);
}

/* Executes ADD [2,3] with input 0 on pool memory m (arg offset 0, length `len`, model dims)
 * and input 1 / output on ASHMEM pools. */
static md_status exec_in0_on(md_handle p, md_memory m, uint64_t off, uint64_t len) {
  float b[6];
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, m), off, len, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  md_status st = mdt_exec(&e, p, &r, sh, &t);
  mdt_req_fini(&r);
  return st;
}

/* ---- each kind accepted or rejected per use ---- */

Test(pools, ashmem_accepted_in_request) {
  md_handle p = prepare_add23();
  float a[6], b[6], out[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  expect_sum(out, 1, 10);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

Test(pools, mmap_fd_with_offset_accepted_in_request) {
  md_handle p = prepare_add23();
  uint8_t file[16384];
  memset(file, 0x5a, sizeof file);
  float a[6], b[6], out[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  memcpy(file + 4096, a, B23);
  memcpy(file + 4096 + 64, b, B23);
  int fd = mdt_memfd(file, sizeof file);
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pool = mdt_req_pool_mem(&r, mdt_mmap_fd(fd, 4096, 8192));
  mdt_req_in_arg(&r, pool, 0, B23, 0, NULL);
  mdt_req_in_arg(&r, pool, 64, B23, 0, NULL);
  mdt_req_out_arg(&r, pool, 128, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  uint8_t after[16384];
  cr_assert_eq(pread(fd, after, sizeof after, 0), (ssize_t)sizeof after);
  memcpy(out, after + 4096 + 128, B23);
  expect_sum(out, 1, 10);
  /* Nothing outside the output's bytes changed. */
  memcpy(file + 4096 + 128, out, B23);
  cr_expect(memcmp(file, after, sizeof file) == 0, "bytes outside the output arg changed");
  close(fd);
  mdt_release(&e, p);
}

Test(pools, mmap_fd_with_unaligned_offset_accepted_in_request) {
  md_handle p = prepare_add23();
  uint8_t file[8192];
  memset(file, 0, sizeof file);
  float a[6];
  mdt_iota(a, 6, 1);
  memcpy(file + 100, a, B23);
  int fd = mdt_memfd(file, sizeof file);
  float b[6], out[6];
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_mmap_fd(fd, 100, 1000)), 0, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  expect_sum(out, 1, 10);
  mdt_req_fini(&r);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, hardware_buffer_blob_accepted_in_request) {
  md_handle p = prepare_add23();
  float a[6], b[6], out[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  int fa = mdt_memfd(a, B23), fo = mdt_memfd(NULL, B23);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_hwb_blob(fa, B23)), 0, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_mem(&r, mdt_hwb_blob(fo, B23)), 0, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_read_fd(fo, out, B23);
  expect_sum(out, 1, 10);
  mdt_req_fini(&r);
  close(fa);
  close(fo);
  mdt_release(&e, p);
}

Test(pools, non_blob_hardware_buffer_accepted_in_request) {
  /* A 6x1 RGBA8888 image is 24 bytes: exactly one float32 [2,3]. Its logical size is 0, so the
   * args on it use offset = length = 0. */
  md_handle p = prepare_add23();
  float a[6], b[6], out[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  int fa = mdt_memfd(a, B23), fo = mdt_memfd(NULL, B23);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_hwb_image(fa, 6, 1)), 0, 0, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_mem(&r, mdt_hwb_image(fo, 6, 1)), 0, 0, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_read_fd(fo, out, B23);
  expect_sum(out, 1, 10);
  mdt_req_fini(&r);
  close(fa);
  close(fo);
  mdt_release(&e, p);
}

Test(pools, non_blob_hardware_buffer_arg_with_nonzero_length_rejected) {
  /* Logical size 0: an arg of length 24 is not inside the pool. */
  md_handle p = prepare_add23();
  int fa = mdt_memfd(NULL, B23);
  cr_expect_eq(exec_in0_on(p, mdt_hwb_image(fa, 6, 1), 0, B23), MD_INVALID_ARGUMENT);
  close(fa);
  mdt_release(&e, p);
}

Test(pools, non_blob_hardware_buffer_rejected_in_copy_from) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6];
  mdt_iota(a, 6, 1);
  int fd = mdt_memfd(a, B23);
  md_memory m = mdt_hwb_image(fd, 6, 1);
  cr_expect_eq(e.drv->copy_from(e.dev, e.client, t, &m, 0, NULL), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(pools, non_blob_hardware_buffer_rejected_in_copy_to) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6];
  mdt_iota(a, 6, 1);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, a, B23, 0, NULL), MD_NONE);
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_hwb_image(fd, 6, 1);
  cr_expect_eq(e.drv->copy_to(e.dev, e.client, t, &m), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

/* ADD [2,3] whose input 1 is a CONSTANT_REFERENCE of (offset, length) in pool m. */
static const md_model *const_ref_model(mdt_model *b, md_memory m, uint64_t off, uint64_t len) {
  mdt_mb_init(b);
  uint32_t in[3], out;
  in[0] = mdt_mb_tensor_f32(b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t pool = mdt_mb_pool(b, m);
  in[1] = mdt_mb_const_ref(b, MD_TENSOR_FLOAT32, 2, D23, pool, off, len);
  in[2] = mdt_mb_const_i32(b, 0);
  out = mdt_mb_tensor_f32(b, 2, D23, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, &out);
  return mdt_mb_model(b);
}

Test(pools, non_blob_hardware_buffer_rejected_in_model_pool) {
  int fd = mdt_memfd(NULL, B23);
  mdt_model b;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, const_ref_model(&b, mdt_hwb_image(fd, 6, 1), 0, B23), &p),
               MD_INVALID_ARGUMENT);
  close(fd);
}

/* Runs const_ref_model on pool m and checks out = a + the constant. */
static void check_constant_pool(md_memory m, uint64_t off) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, const_ref_model(&b, m, off, B23));
  float a[6], out[6];
  mdt_iota(a, 6, 1);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  expect_sum(out, 1, 10);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

Test(pools, ashmem_accepted_as_constant_pool) {
  float c[6];
  mdt_iota(c, 6, 10);
  int fd = mdt_memfd(c, B23);
  check_constant_pool(mdt_ashmem(fd, B23), 0);
  close(fd);
}

Test(pools, mmap_fd_accepted_as_constant_pool) {
  uint8_t file[8192];
  memset(file, 0, sizeof file);
  float c[6];
  mdt_iota(c, 6, 10);
  memcpy(file + 4096 + 32, c, B23);
  int fd = mdt_memfd(file, sizeof file);
  check_constant_pool(mdt_mmap_fd(fd, 4096, 4096), 32);
  close(fd);
}

Test(pools, hardware_buffer_blob_accepted_as_constant_pool) {
  float c[6];
  mdt_iota(c, 6, 10);
  int fd = mdt_memfd(c, B23);
  check_constant_pool(mdt_hwb_blob(fd, B23), 0);
  close(fd);
}

Test(pools, hardware_buffer_blob_accepted_in_copy_from_and_copy_to) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6], out[6];
  mdt_iota(a, 6, 1);
  int fs = mdt_memfd(a, B23), fd = mdt_memfd(NULL, B23);
  md_memory src = mdt_hwb_blob(fs, B23), dst = mdt_hwb_blob(fd, B23);
  cr_assert_eq(e.drv->copy_from(e.dev, e.client, t, &src, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(e.drv->copy_to(e.dev, e.client, t, &dst), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_read_fd(fd, out, B23);
  cr_expect(memcmp(a, out, B23) == 0);
  close(fs);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(pools, mmap_fd_with_offset_accepted_in_copy_from_and_copy_to) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  uint8_t file[8192], after[8192];
  memset(file, 0x33, sizeof file);
  float a[6], out[6];
  mdt_iota(a, 6, 1);
  memcpy(file + 4096, a, B23);
  int fs = mdt_memfd(file, sizeof file);
  md_memory src = mdt_mmap_fd(fs, 4096, B23);
  cr_assert_eq(e.drv->copy_from(e.dev, e.client, t, &src, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  memset(file, 0x44, sizeof file);
  int fd = mdt_memfd(file, sizeof file);
  md_memory dst = mdt_mmap_fd(fd, 4096 + 8, B23);
  cr_assert_eq(e.drv->copy_to(e.dev, e.client, t, &dst), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(pread(fd, after, sizeof after, 0), (ssize_t)sizeof after);
  memcpy(out, after + 4096 + 8, B23);
  cr_expect(memcmp(a, out, B23) == 0, "copy_to wrote the wrong bytes");
  memcpy(after + 4096 + 8, file, B23); /* the rest of the file must still be 0x44 */
  cr_expect(memcmp(after, file, sizeof file) == 0, "copy_to wrote outside its pool");
  close(fs);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

/* ---- validation before mapping: the same bad pool in each use ---- */

static int bad_fd = -1;
static md_memory bad_negative_fd(void) { return mdt_ashmem(-1, B23); }
static md_memory bad_zero_size(void) {
  bad_fd = mdt_memfd(NULL, B23);
  return mdt_mmap_fd(bad_fd, 0, 0);
}
static md_memory bad_past_end(void) {
  bad_fd = mdt_memfd(NULL, B23);
  return mdt_mmap_fd(bad_fd, 8, B23); /* 8 + 24 > 24 bytes of file */
}
static md_memory bad_offset_overflow(void) {
  bad_fd = mdt_memfd(NULL, B23);
  return mdt_mmap_fd(bad_fd, UINT64_MAX - 7u, B23);
}
static md_memory bad_prot_exec(void) {
  bad_fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(bad_fd, B23);
  m.prot |= PROT_EXEC;
  return m;
}
static md_memory bad_unknown_kind(void) {
  bad_fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(bad_fd, B23);
  m.kind = (md_memory_kind)7;
  return m;
}

static void request_pool_rejected(md_memory (*make)(void)) {
  md_handle p = prepare_add23();
  cr_expect_eq(exec_in0_on(p, make(), 0, B23), MD_INVALID_ARGUMENT, "last_error: %s",
               e.drv->last_error(e.dev));
  mdt_close_fd(bad_fd);
  mdt_release(&e, p);
}

static void copy_pool_rejected(md_memory (*make)(void)) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  md_memory m = make();
  cr_expect_eq(e.drv->copy_from(e.dev, e.client, t, &m, 0, NULL), MD_INVALID_ARGUMENT,
               "copy_from: %s", e.drv->last_error(e.dev));
  float a[6];
  mdt_iota(a, 6, 1);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, a, B23, 0, NULL), MD_NONE);
  cr_expect_eq(e.drv->copy_to(e.dev, e.client, t, &m), MD_INVALID_ARGUMENT, "copy_to: %s",
               e.drv->last_error(e.dev));
  mdt_close_fd(bad_fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

static void model_pool_rejected(md_memory (*make)(void)) {
  mdt_model b;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, const_ref_model(&b, make(), 0, B23), &p),
               MD_INVALID_ARGUMENT, "prepare: %s", e.drv->last_error(e.dev));
  mdt_close_fd(bad_fd);
}

#define POOL_CASE(name)                                                           \
  Test(pools, request_pool_with_##name##_rejected) { request_pool_rejected(bad_##name); } \
  Test(pools, copy_pool_with_##name##_rejected) { copy_pool_rejected(bad_##name); }       \
  Test(pools, model_pool_with_##name##_rejected) { model_pool_rejected(bad_##name); }

POOL_CASE(negative_fd)
POOL_CASE(zero_size)
POOL_CASE(past_end)
POOL_CASE(offset_overflow)
POOL_CASE(prot_exec)
POOL_CASE(unknown_kind)

Test(pools, unused_invalid_request_pool_rejected) {
  /* "every pool valid": even one no argument refers to. */
  md_handle p = prepare_add23();
  float a[6], b[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  mdt_req_pool_mem(&r, mdt_ashmem(-1, B23));
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

Test(pools, unmappable_request_pool_is_general_failure_naming_the_pool) {
  md_handle p = prepare_add23();
  int fd = mdt_unmappable_fd(B23);
  float b[6];
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, b, B23, 0, NULL);                                       /* pool 0 */
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fd, B23)), 0, B23, 0, NULL); /* pool 1 */
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool") != NULL, "message does not name the pool: %s",
            e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, unmappable_constant_pool_is_general_failure_at_prepare_naming_the_pool) {
  int fd = mdt_unmappable_fd(B23);
  mdt_model b;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, const_ref_model(&b, mdt_ashmem(fd, B23), 0, B23), &p),
               MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool") != NULL, "message does not name the pool: %s",
            e.drv->last_error(e.dev));
  close(fd);
}

/* ---- constant operands ---- */

Test(pools, constant_copy_outside_operand_values_rejected) {
  mdt_model b;
  mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0);
  b.operands[2].offset = b.model.operand_values_size; /* the activation, one past the end */
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, mdt_mb_model(&b), &p), MD_INVALID_ARGUMENT);
}

Test(pools, constant_copy_length_overflow_rejected) {
  mdt_model b;
  mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0);
  b.operands[2].offset = 4;
  b.operands[2].length = UINT64_MAX - 1u;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, mdt_mb_model(&b), &p), MD_INVALID_ARGUMENT);
}

Test(pools, constant_reference_outside_pool_rejected) {
  float c[6];
  mdt_iota(c, 6, 10);
  int fd = mdt_memfd(c, B23);
  mdt_model b;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, const_ref_model(&b, mdt_ashmem(fd, B23), 4, B23), &p),
               MD_INVALID_ARGUMENT);
  close(fd);
}

Test(pools, constant_reference_pool_index_out_of_range_rejected) {
  float c[6];
  mdt_iota(c, 6, 10);
  int fd = mdt_memfd(c, B23);
  mdt_model b;
  const_ref_model(&b, mdt_ashmem(fd, B23), 0, B23);
  b.operands[1].pool = 1;
  md_handle p = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, mdt_mb_model(&b), &p), MD_INVALID_ARGUMENT);
  close(fd);
}

Test(pools, constant_copy_values_are_copied_at_prepare) {
  /* out = a + C with C a CONSTANT_COPY tensor; the caller's operand_values is scribbled over
   * after prepare_model returns. */
  mdt_model b;
  mdt_mb_init(&b);
  float c[6];
  mdt_iota(c, 6, 10);
  uint32_t in[3], out;
  in[0] = mdt_mb_tensor_f32(&b, 2, D23, MD_SUBGRAPH_INPUT);
  in[1] = mdt_mb_const_copy(&b, MD_TENSOR_FLOAT32, 2, D23, c, B23);
  in[2] = mdt_mb_const_i32(&b, 0);
  out = mdt_mb_tensor_f32(&b, 2, D23, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(&b, MD_OP_ADD, NULL, 3, in, 1, &out);
  md_handle p = mdt_prepare(&e, mdt_mb_model(&b));
  memset(&b, 0xff, sizeof b);
  float a[6], o[6];
  mdt_iota(a, 6, 1);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, o, B23);
  expect_sum(o, 1, 10);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* ---- request arguments on normal pools ---- */

Test(pools, request_arg_past_pool_end_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 32);
  cr_expect_eq(exec_in0_on(p, mdt_ashmem(fd, 32), 16, B23), MD_INVALID_ARGUMENT); /* 16+24 > 32 */
  close(fd);
  mdt_release(&e, p);
}

Test(pools, request_arg_inside_pool_at_offset_accepted) {
  md_handle p = prepare_add23();
  uint8_t buf[64];
  memset(buf, 0, sizeof buf);
  float a[6];
  mdt_iota(a, 6, 1);
  memcpy(buf + 40, a, B23);
  int fd = mdt_memfd(buf, 64);
  cr_expect_eq(exec_in0_on(p, mdt_ashmem(fd, 64), 40, B23), MD_NONE, "%s", e.drv->last_error(e.dev)); /* 40+24 == 64 */
  close(fd);
  mdt_release(&e, p);
}

Test(pools, request_arg_offset_overflow_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 64);
  cr_expect_eq(exec_in0_on(p, mdt_ashmem(fd, 64), UINT64_MAX - 7u, B23), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, request_arg_length_shorter_than_dims_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 64);
  cr_expect_eq(exec_in0_on(p, mdt_ashmem(fd, 64), 0, 20), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, request_arg_length_longer_than_dims_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 64);
  cr_expect_eq(exec_in0_on(p, mdt_ashmem(fd, 64), 0, 28), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, request_arg_length_checked_against_combined_dims) {
  /* Model dims [0,3]; the arg says [4,3]: 48 bytes, so 48 is right and 24 is not. */
  static const uint32_t d03[2] = {0, 3}, d43[2] = {4, 3};
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, d03, 2, d03, 2, d03, 0));
  float a[12], c[12], out[12];
  mdt_iota(a, 12, 1);
  mdt_iota(c, 12, 100);
  for (int wrong = 0; wrong < 2; wrong++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, a, wrong ? 24 : 48, 2, d43);
    mdt_req_in_data(&r, c, 48, 2, d43);
    mdt_req_out_pool(&r, 48, 2, d43);
    md_output_shape sh[8];
    md_timing t;
    md_status st = mdt_exec(&e, p, &r, sh, &t);
    if (wrong) {
      cr_expect_eq(st, MD_INVALID_ARGUMENT, "24-byte arg for dims [4,3] accepted");
    } else {
      cr_expect_eq(st, MD_NONE, "%s", e.drv->last_error(e.dev));
      mdt_req_read_out(&r, 0, out, 48);
      for (int i = 0; i < 12; i++) cr_expect_eq(out[i], 101.0f + 2.0f * (float)i);
    }
    mdt_req_fini(&r);
  }
  mdt_release(&e, p);
}

Test(pools, request_arg_dims_not_combining_with_model_rejected) {
  static const uint32_t d32[2] = {3, 2};
  md_handle p = prepare_add23();
  float a[6], b[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 2, d32);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

Test(pools, request_arg_pool_index_out_of_range_rejected) {
  md_handle p = prepare_add23();
  float a[6], b[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  r.in[1].pool = 3; /* 3 pools: 0..2 */
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* ---- request arguments on token pools ---- */

static md_status exec_token_in0(md_handle p, md_token tok, uint64_t off, uint64_t len) {
  float b[6];
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_token(&r, tok), off, len, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  md_status st = mdt_exec(&e, p, &r, sh, &t);
  mdt_req_fini(&r);
  return st;
}

static md_token ready_token(md_handle p) {
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6];
  mdt_iota(a, 6, 1);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, a, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  return t;
}

Test(pools, token_arg_with_offset_and_length_zero_accepted) {
  md_handle p = prepare_add23();
  md_token t = ready_token(p);
  cr_expect_eq(exec_token_in0(p, t, 0, 0), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(pools, token_arg_with_nonzero_offset_rejected) {
  md_handle p = prepare_add23();
  md_token t = ready_token(p);
  cr_expect_eq(exec_token_in0(p, t, 4, 0), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(pools, token_arg_with_nonzero_length_rejected) {
  /* Even the buffer's exact byte size: token args carry no length. */
  md_handle p = prepare_add23();
  md_token t = ready_token(p);
  cr_expect_eq(exec_token_in0(p, t, 0, B23), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

/* ---- kind-specific geometry (ABI comments of md_memory_kind) ---- */

Test(pools, ashmem_with_nonzero_offset_rejected) {
  /* "ASHMEM: a memfd; offset 0". */
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 64);
  md_memory m = mdt_ashmem(fd, 32);
  m.offset = 32;
  cr_expect_eq(exec_in0_on(p, m, 0, B23), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, hardware_buffer_blob_with_height_above_one_rejected) {
  /* "a BLOB hardware buffer: width bytes, height = layers = 1". */
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 2 * B23);
  md_memory m = mdt_hwb_blob(fd, B23);
  m.height = 2;
  cr_expect_eq(exec_in0_on(p, m, 0, B23), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, hardware_buffer_blob_with_two_layers_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 2 * B23);
  md_memory m = mdt_hwb_blob(fd, B23);
  m.layers = 2;
  cr_expect_eq(exec_in0_on(p, m, 0, B23), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, hardware_buffer_blob_wider_than_its_file_rejected) {
  md_handle p = prepare_add23();
  int fd = mdt_memfd(NULL, 16);
  cr_expect_eq(exec_in0_on(p, mdt_hwb_blob(fd, B23), 0, B23), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, non_blob_hardware_buffer_arg_with_nonzero_offset_rejected) {
  md_handle p = prepare_add23();
  int fa = mdt_memfd(NULL, 2 * B23);
  cr_expect_eq(exec_in0_on(p, mdt_hwb_image(fa, 12, 1), 4, 0), MD_INVALID_ARGUMENT);
  close(fa);
  mdt_release(&e, p);
}

Test(pools, unused_dead_token_pool_rejected) {
  /* "every pool valid": a token pool no argument refers to still needs a live token. */
  md_handle p = prepare_add23();
  md_token dead = mdt_alloc(&e, p, false, 0, 0, NULL);
  mdt_free(&e, dead);
  float a[6], b[6];
  mdt_iota(a, 6, 1);
  mdt_iota(b, 6, 10);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, b, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  mdt_req_pool_token(&r, dead);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* ---- pools whose prot forbids the use (SPEC silent on the status: a failure, never a
 * write through a read-only mapping) ---- */

static int is_rejection(md_status st) { return st == MD_INVALID_ARGUMENT || st == MD_GENERAL_FAILURE; }

Test(pools, read_only_output_pool_rejected) {
  md_handle p = prepare_add23();
  float a[6];
  mdt_iota(a, 6, 1);
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  m.prot = PROT_READ;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_mem(&r, m), 0, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  md_status st = mdt_exec(&e, p, &r, sh, &t);
  cr_expect(is_rejection(st), "status %d", (int)st);
  float back[6] = {0};
  mdt_read_fd(fd, back, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(back[i], 0.0f, "read-only pool written");
  mdt_req_fini(&r);
  close(fd);
  mdt_release(&e, p);
}

Test(pools, read_only_copy_to_destination_rejected) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6];
  mdt_iota(a, 6, 1);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, a, B23, 0, NULL), MD_NONE);
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  m.prot = PROT_READ;
  md_status st = e.drv->copy_to(e.dev, e.client, t, &m);
  cr_expect(is_rejection(st), "status %d", (int)st);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(pools, write_only_copy_from_source_rejected) {
  md_handle p = prepare_add23();
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  float a[6];
  mdt_iota(a, 6, 1);
  int fd = mdt_memfd(a, B23);
  md_memory m = mdt_ashmem(fd, B23);
  m.prot = PROT_WRITE;
  md_status st = e.drv->copy_from(e.dev, e.client, t, &m, 0, NULL);
  cr_expect(is_rejection(st), "status %d", (int)st);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}
