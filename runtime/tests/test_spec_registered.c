/* test_spec_registered.c - black-box rules of SPEC section 9 (registered pools), through the
 * md_driver table only: a pool registered once is used in requests exactly as its descriptor
 * (every SPEC 2 and 4 rule on its arguments), whatever the client does with its fd afterwards;
 * its handle follows SPEC 5 (client-bound, unforgeable, dead after unregister_memory or
 * close_client); register_memory validates the descriptor as a request does; the mapping goes
 * when the pool is unregistered. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "md/loader.h"
#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3};
#define B23 24u /* bytes of a float32 [2,3] */

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
static void teardown(void) {
  if (P) mdt_release(&e, P);
  P = 0;
  mdt_env_close(&e, 0);
}
TestSuite(registered, .init = setup, .fini = teardown);
TestSuite(register_memory, .init = setup, .fini = teardown);

static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static md_status reg(md_handle client, md_memory m, md_handle *pool) {
  *pool = 0;
  return e.drv->register_memory(e.dev, client, &m, pool);
}

/* ADD [2,3] with input 0 on registered pool `pa` (offset, length), input 1 = B and the output
 * on fresh ASHMEM pools; out (may be NULL) gets the output on NONE. */
static md_status exec_reg_in0(md_handle pa, uint64_t off, uint64_t len, float *out) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_registered(&r, pa), off, len, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  md_status st = mdt_exec(&e, P, &r, sh, &tm);
  if (st == MD_NONE && out) mdt_req_read_out(&r, 0, out, B23);
  mdt_req_fini(&r);
  return st;
}

static void expect_a_plus_b(const float *out) {
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i], "out[%d] = %g", i, (double)out[i]);
}

/* Whether any mapping of this process maps the file with inode `ino` (/proc/self/maps). */
static int file_is_mapped(ino_t ino) {
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert_not_null(f);
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    unsigned long long inode = 0;
    if (sscanf(line, "%*s %*s %*s %*s %llu", &inode) == 1 && inode == (unsigned long long)ino) found = 1;
  }
  fclose(f);
  return found;
}

static ino_t inode_of(int fd) {
  struct stat st;
  cr_assert_eq(fstat(fd, &st), 0);
  return st.st_ino;
}

/* ---- the table offers SPEC 9 ---- */

Test(registered, the_reference_table_holds_both_entries) {
  cr_expect(e.drv->struct_size >= MD_DRIVER_SIZE_V1 + 2 * sizeof(void (*)(void)));
  cr_expect(MD_DRIVER_HAS(e.drv, register_memory));
  cr_expect(MD_DRIVER_HAS(e.drv, unregister_memory));
  md_driver v1 = *e.drv;
  v1.struct_size = (uint32_t)MD_DRIVER_SIZE_V1;   /* a v1 table lacks them whatever follows */
  cr_expect(!MD_DRIVER_HAS(&v1, register_memory));
}

/* ---- used as the descriptor ---- */

Test(registered, registered_inputs_and_outputs_compute_what_descriptors_compute) {
  int fa = mdt_memfd(A, B23), fb = mdt_memfd(B, B23), fo = mdt_memfd(NULL, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  md_handle pb = mdt_register(&e, e.client, mdt_ashmem(fb, B23));
  md_handle po = mdt_register(&e, e.client, mdt_ashmem(fo, B23));
  cr_expect(pa != pb && pb != po && pa != po);
  for (int round = 0; round < 3; round++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_arg(&r, mdt_req_pool_registered(&r, pa), 0, B23, 0, NULL);
    mdt_req_in_arg(&r, mdt_req_pool_registered(&r, pb), 0, B23, 0, NULL);
    mdt_req_out_arg(&r, mdt_req_pool_registered(&r, po), 0, B23, 0, NULL);
    md_output_shape sh[8];
    md_timing tm;
    cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].rank, 2);
    cr_expect(sh[0].is_sufficient);
    float out[6];
    mdt_read_fd(fo, out, B23);
    expect_a_plus_b(out);
    mdt_req_fini(&r);
  }
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pb), MD_NONE);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, po), MD_NONE);
  close(fa);
  close(fb);
  close(fo);
}

Test(registered, mixes_with_descriptors_and_tokens_in_one_request) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  md_token tb = mdt_alloc(&e, P, false, 1, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, tb, B, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_registered(&r, pa), 0, B23, 0, NULL);
  mdt_req_in_token(&r, tb, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  float out[6];
  mdt_req_read_out(&r, 0, out, B23);
  expect_a_plus_b(out);
  mdt_req_fini(&r);
  mdt_free(&e, tb);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, mmap_fd_at_an_offset_keeps_its_origin) {
  uint8_t file[16384];
  memset(file, 0x5a, sizeof file);
  memcpy(file + 4096 + 8, A, B23);
  int fd = mdt_memfd(file, sizeof file);
  md_handle pa = mdt_register(&e, e.client, mdt_mmap_fd(fd, 4096, 8192));
  float out[6];
  cr_assert_eq(exec_reg_in0(pa, 8, B23, out), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_a_plus_b(out);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fd);
}

Test(registered, writes_to_the_file_after_registration_are_seen) {
  int fa = mdt_memfd(NULL, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  cr_assert_eq(pwrite(fa, A, B23, 0), (ssize_t)B23);   /* the same shared memory */
  float out[6];
  cr_assert_eq(exec_reg_in0(pa, 0, B23, out), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_a_plus_b(out);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

/* ---- what the client does with its fd afterwards does not matter ---- */

Test(registered, closing_the_fd_after_registration_changes_nothing) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  close(fa);
  float out[6];
  cr_assert_eq(exec_reg_in0(pa, 0, B23, out), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_a_plus_b(out);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
}

Test(registered, an_fd_number_reused_for_another_file_changes_nothing) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  static const float Z[6] = {-100, -100, -100, -100, -100, -100};
  int other = mdt_memfd(Z, B23);
  cr_assert_eq(dup2(other, fa), fa);   /* fa's number now names another file */
  close(other);
  float out[6];
  cr_assert_eq(exec_reg_in0(pa, 0, B23, out), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_a_plus_b(out);
  /* A descriptor naming that number now reads the other file, as it should. */
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fa, B23)), 0, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  cr_expect_eq(out[0], -90.0f);
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, the_mapping_goes_with_unregister) {
  int fa = mdt_memfd(A, B23);
  ino_t ino = inode_of(fa);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  close(fa);
  cr_expect(file_is_mapped(ino), "the driver keeps a mapping of the registered file");
  cr_assert_eq(exec_reg_in0(pa, 0, B23, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  cr_expect(!file_is_mapped(ino), "the mapping outlived unregister_memory");
}

/* ---- SPEC 5: the handle ---- */

Test(registered, unregistered_pool_is_dead_at_once) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  cr_assert_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  cr_expect_eq(exec_reg_in0(pa, 0, B23, NULL), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool 0: registered pool"), "%s", e.drv->last_error(e.dev));
  cr_expect(strstr(e.drv->last_error(e.dev), "was already released"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_INVALID_ARGUMENT);
  close(fa);
}

Test(registered, another_clients_pool_is_rejected_and_stays_live) {
  md_handle c2 = mdt_open_client(&e);
  int fa = mdt_memfd(A, B23);
  md_handle pa2 = mdt_register(&e, c2, mdt_ashmem(fa, B23));
  cr_expect_eq(exec_reg_in0(pa2, 0, B23, NULL), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "belongs to another client"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa2), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(e.dev, c2, pa2), MD_NONE, "the owner's pool died: %s",
               e.drv->last_error(e.dev));
  mdt_close_client(&e, c2, NULL);
  close(fa);
}

Test(registered, forged_and_neighbouring_values_are_rejected) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  md_handle forged[] = {0, 1, pa ^ 1, pa ^ (1ull << 24), pa ^ (1ull << 40), pa + 1, pa - 1, ~pa, pa & 0xffffffffu};
  for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
    cr_expect_eq(exec_reg_in0(forged[i], 0, B23, NULL), MD_INVALID_ARGUMENT, "0x%llx", (unsigned long long)forged[i]);
    cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, forged[i]), MD_INVALID_ARGUMENT);
  }
  cr_expect_eq(exec_reg_in0(pa, 0, B23, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, handle_kinds_do_not_mix) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  /* A token named as a registered pool, a pool named as a token, the client as a pool. */
  cr_expect_eq(exec_reg_in0(t, 0, B23, NULL), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "another kind"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(exec_reg_in0(e.client, 0, B23, NULL), MD_INVALID_ARGUMENT);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, pa, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, pa), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, e.client, pa), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, close_client_releases_its_pools_without_counting_them) {
  md_handle c2 = mdt_open_client(&e);
  int fa = mdt_memfd(A, B23);
  ino_t ino = inode_of(fa);
  md_handle pools[3];
  for (int i = 0; i < 3; i++) pools[i] = mdt_register(&e, c2, mdt_ashmem(fa, B23));
  close(fa);
  md_leak_report lr;
  memset(&lr, 0xff, sizeof lr);
  cr_assert_eq(e.drv->close_client(e.dev, c2, &lr), MD_NONE);
  cr_expect_eq(lr.buffers, 0u);
  cr_expect_eq(lr.prepared_models, 0u);
  cr_expect_eq(lr.events, 0u);
  cr_expect_eq(lr.bytes, 0u);
  cr_expect(!file_is_mapped(ino), "close_client left a registered pool mapped");
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(e.drv->unregister_memory(e.dev, c2, pools[i]), MD_INVALID_ARGUMENT);
    cr_expect_eq(exec_reg_in0(pools[i], 0, B23, NULL), MD_INVALID_ARGUMENT);
  }
}

Test(registered, is_token_values_beyond_two_are_rejected) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pool = mdt_req_pool_registered(&r, pa);
  r.pools[pool].is_token = 3;
  mdt_req_in_arg(&r, pool, 0, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "is_token 3"), "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

/* ---- every SPEC 2 and 4 rule applies to a registered pool's arguments ---- */

Test(registered, argument_past_the_end_is_invalid_argument) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  cr_expect_eq(exec_reg_in0(pa, 4, B23, NULL), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "past the end of pool 0"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(exec_reg_in0(pa, UINT64_MAX, 8, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, input_length_other_than_its_dims_is_invalid_argument) {
  int fa = mdt_memfd(NULL, 64);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, 64));
  cr_expect_eq(exec_reg_in0(pa, 0, B23 - 4, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(exec_reg_in0(pa, 0, B23 + 4, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

Test(registered, read_only_pool_as_an_output_is_invalid_argument) {
  int fo = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fo, B23);
  m.prot = PROT_READ;
  md_handle po = mdt_register(&e, e.client, m);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_registered(&r, po), 0, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "not writable"), "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, po), MD_NONE);
  close(fo);
}

Test(registered, short_output_is_output_insufficient_size_with_shapes) {
  static const uint32_t D03[2] = {0, 3};   /* dims known only from the inputs */
  mdt_model b;
  md_handle q = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
  int fo = mdt_memfd(NULL, B23);
  md_handle po = mdt_register(&e, e.client, mdt_ashmem(fo, B23));
  static const float Z[6] = {-7, -7, -7, -7, -7, -7};
  cr_assert_eq(pwrite(fo, Z, B23, 0), (ssize_t)B23);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_arg(&r, mdt_req_pool_registered(&r, po), 0, 12, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, q, &r, sh, &tm), MD_OUTPUT_INSUFFICIENT_SIZE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2);
  cr_expect_eq(sh[0].dims[0], 2);
  cr_expect_eq(sh[0].is_sufficient, 0);
  float out[6];
  mdt_read_fd(fo, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], -7.0f, "out[%d] was written", i);
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, po), MD_NONE);
  mdt_release(&e, q);
  close(fo);
}

Test(registered, non_blob_hardware_buffer_arguments_take_offset_and_length_zero) {
  static const uint32_t d[1] = {16};
  mdt_model b;
  mdt_mb_init(&b);
  uint32_t in = mdt_mb_operand(&b, MD_TENSOR_QUANT8_ASYMM, 1, d, MD_SUBGRAPH_INPUT);
  uint32_t out = mdt_mb_operand(&b, MD_TENSOR_QUANT8_ASYMM, 1, d, MD_SUBGRAPH_OUTPUT);
  b.operands[in].scale = b.operands[out].scale = 1.0f;
  mdt_register_test_kernels();
  mdt_mb_op(&b, MD_OP_CUSTOM, "mdt.copy", 1, &in, 1, &out);
  md_handle pc = mdt_prepare(&e, mdt_mb_model(&b));
  int fi = mdt_memfd(NULL, 16);
  md_handle hw = mdt_register(&e, e.client, mdt_hwb_image(fi, 2, 2));   /* 2x2 RGBA: 16 bytes */
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pool = mdt_req_pool_registered(&r, hw);
  mdt_req_in_arg(&r, pool, 0, 4, 0, NULL);
  mdt_req_out_pool(&r, 16, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->execute(e.dev, e.client, pc, mdt_req(&r), sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "non-BLOB"), "%s", e.drv->last_error(e.dev));
  r.in[0].length = 0;
  cr_expect_eq(e.drv->execute(e.dev, e.client, pc, mdt_req(&r), sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, hw), MD_NONE);
  mdt_release(&e, pc);
  close(fi);
}

Test(registered, a_failed_request_leaves_its_token_outputs_uninitialized) {
  int fa = mdt_memfd(A, B23);
  md_handle pa = mdt_register(&e, e.client, mdt_ashmem(fa, B23));
  md_token out = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, out, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_registered(&r, pa), 8, B23, 0, NULL);   /* past the end */
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_copy_to(&e, e.client, out, NULL, B23), MD_GENERAL_FAILURE, "SPEC 4: outputs uninitialized");
  mdt_req_fini(&r);
  mdt_free(&e, out);
  cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, pa), MD_NONE);
  close(fa);
}

/* ---- register_memory validates the descriptor by SPEC 2 ---- */

typedef struct bad_pool {
  const char *what;
  md_status want;
  const char *message;
} bad_pool;

static md_memory bad_memory(int fd, int which) {
  md_memory m = mdt_ashmem(fd, 64);
  switch (which) {
    case 0: m.fd = -1; break;
    case 1: m.fd = 1000; break;                       /* not open */
    case 2: m.prot = 0; break;
    case 3: m.prot = PROT_READ | PROT_EXEC; break;
    case 4: m.size = 0; break;
    case 5: m.kind = MD_MEM_MMAP_FD; m.offset = 32; m.size = 64; break;   /* past the end */
    case 6: m.kind = (md_memory_kind)42; break;
    case 7: m.offset = 8; break;                      /* ASHMEM offset */
    case 8: m.kind = MD_MEM_HARDWARE_BUFFER_BLOB; m.width = 64; m.height = 2; m.layers = 1; m.format = 0x21; break;
  }
  return m;
}

Test(register_memory, every_pool_rule_is_checked) {
  static const bad_pool cases[] = {
      {"negative fd", MD_INVALID_ARGUMENT, "is negative"},
      {"closed fd", MD_INVALID_ARGUMENT, "is not open"},
      {"prot 0", MD_INVALID_ARGUMENT, "prot 0"},
      {"prot with other bits", MD_INVALID_ARGUMENT, "bits other than"},
      {"size 0", MD_INVALID_ARGUMENT, "size 0"},
      {"range past the end of the file", MD_INVALID_ARGUMENT, "past the end"},
      {"unknown kind", MD_INVALID_ARGUMENT, "unknown memory kind"},
      {"ASHMEM at an offset", MD_INVALID_ARGUMENT, "offset"},
      {"BLOB of height 2", MD_INVALID_ARGUMENT, "height"},
  };
  int fd = mdt_memfd(NULL, 64);
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    md_handle h = 77;
    md_status st = reg(e.client, bad_memory(fd, i), &h);
    cr_expect_eq(st, cases[i].want, "%s: status %d", cases[i].what, (int)st);
    cr_expect_eq(h, 0, "%s: *pool not zeroed", cases[i].what);
    cr_expect(strstr(e.drv->last_error(e.dev), "register_memory: memory"), "%s: %s", cases[i].what,
              e.drv->last_error(e.dev));
    cr_expect(strstr(e.drv->last_error(e.dev), cases[i].message), "%s: %s", cases[i].what, e.drv->last_error(e.dev));
  }
  close(fd);
}

Test(register_memory, a_pool_that_cannot_be_mapped_is_general_failure) {
  int fd = mdt_unmappable_fd(64);
  md_handle h;
  cr_expect_eq(reg(e.client, mdt_ashmem(fd, 64), &h), MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), "cannot map"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(h, 0);
  close(fd);
}

Test(register_memory, null_arguments_and_dead_clients_are_invalid_argument) {
  int fd = mdt_memfd(NULL, 64);
  md_memory m = mdt_ashmem(fd, 64);
  md_handle h = 5;
  cr_expect_eq(e.drv->register_memory(e.dev, e.client, NULL, &h), MD_INVALID_ARGUMENT);
  cr_expect_eq(h, 0);
  cr_expect_eq(e.drv->register_memory(e.dev, e.client, &m, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->register_memory(NULL, e.client, &m, &h), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(NULL, e.client, 1), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->register_memory(e.dev, e.client ^ 1, &m, &h), MD_INVALID_ARGUMENT);
  md_handle c2 = mdt_open_client(&e);
  mdt_close_client(&e, c2, NULL);
  cr_expect_eq(e.drv->register_memory(e.dev, c2, &m, &h), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->unregister_memory(e.dev, c2, 1), MD_INVALID_ARGUMENT);
  close(fd);
}

Test(register_memory, every_kind_a_request_takes_is_accepted) {
  int fd = mdt_memfd(NULL, 8192);
  md_memory kinds[] = {mdt_ashmem(fd, 8192), mdt_mmap_fd(fd, 100, 4000), mdt_hwb_blob(fd, 4096),
                       mdt_hwb_image(fd, 16, 16)};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    md_handle h;
    cr_expect_eq(reg(e.client, kinds[i], &h), MD_NONE, "kind %d: %s", (int)kinds[i].kind, e.drv->last_error(e.dev));
    cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, h), MD_NONE);
  }
  close(fd);
}

Test(register_memory, handles_carry_unpredictable_bits) {
  /* SPEC 8.12, as for every handle: no two of 1000 differ only in their low 32 bits. */
  int fd = mdt_memfd(NULL, 64);
  enum { N = 1000 };
  md_handle *h = calloc(N, sizeof *h);
  cr_assert_not_null(h);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(reg(e.client, mdt_ashmem(fd, 64), &h[i]), MD_NONE, "%s", e.drv->last_error(e.dev));
    if (i % 2) cr_assert_eq(e.drv->unregister_memory(e.dev, e.client, h[i - 1]), MD_NONE);
  }
  int same_high = 0;
  for (int i = 0; i < N; i++)
    for (int k = i + 1; k < N; k++) same_high += (h[i] >> 32) == (h[k] >> 32);
  cr_expect_leq(same_high, 1, "%d pairs share the high half", same_high);
  for (int i = 1; i < N; i += 2) cr_expect_eq(e.drv->unregister_memory(e.dev, e.client, h[i]), MD_NONE);
  free(h);
  close(fd);
}
