/* test_spec_execute.c - black-box rules of SPEC section 4 (execution): request validation and
 * its order (role before initialization), token arguments, OUTPUT_INSUFFICIENT_SIZE, what
 * success and failure report and do to device outputs, and real ADD numerics (broadcasting,
 * fused activations) through pools and device buffers. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3], activation none */
static const uint32_t D23[2] = {2, 3}, D03[2] = {0, 3};
#define B23 24u

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
static void teardown(void) {
  if (P) e.drv->release_prepared_model(e.dev, e.client, P);
  mdt_env_close(&e, 0);
}
TestSuite(execute, .init = setup, .fini = teardown);
TestSuite(numerics, .init = setup, .fini = teardown);

static float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static md_token ready_in(uint32_t io) {
  md_token t = mdt_alloc(&e, P, false, io, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, io ? B : A, B23, 0, NULL), MD_NONE, "%s",
               e.drv->last_error(e.dev));
  return t;
}

static void expect_failure_reporting(const md_output_shape *sh, uint32_t n, const md_timing *t) {
  for (uint32_t i = 0; i < n; i++) cr_expect_eq(sh[i].rank, 0u, "shape %u has rank %u", i, sh[i].rank);
  cr_expect_eq(t->on_device_ns, UINT64_MAX);
  cr_expect_eq(t->in_driver_ns, UINT64_MAX);
}

/* ---- numerics ---- */

static void run_add(const md_model *m, const float *a, uint32_t na, uint32_t ra, const uint32_t *da,
                    const float *b, uint32_t nb, uint32_t rb, const uint32_t *db, float *out, uint32_t nout) {
  md_handle p = mdt_prepare(&e, m);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, na * 4u, ra, da);
  mdt_req_in_data(&r, b, nb * 4u, rb, db);
  mdt_req_out_pool(&r, nout * 4u, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, nout * 4u);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

Test(numerics, add_same_shape) {
  mdt_model b;
  float out[6];
  run_add(mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), A, 6, 0, NULL, B, 6, 0, NULL, out, 6);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
}

Test(numerics, add_broadcasts_trailing_axis) {
  static const uint32_t d3[1] = {3};
  float c[3] = {100, 200, 300}, out[6];
  mdt_model b;
  run_add(mdt_add_model(&b, 2, D23, 1, d3, 2, D23, 0), A, 6, 0, NULL, c, 3, 0, NULL, out, 6);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + c[i % 3], "out[%d] = %g", i, (double)out[i]);
}

Test(numerics, add_broadcasts_both_operands) {
  static const uint32_t d21[2] = {2, 1}, d13[2] = {1, 3};
  float x[2] = {1, 2}, y[3] = {10, 20, 30}, out[6];
  mdt_model b;
  run_add(mdt_add_model(&b, 2, d21, 2, d13, 2, D23, 0), x, 2, 0, NULL, y, 3, 0, NULL, out, 6);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], x[i / 3] + y[i % 3], "out[%d] = %g", i, (double)out[i]);
}

static float act_ref(float v, int act) {
  switch (act) {
    case 1: return v < 0 ? 0 : v;
    case 2: return v < -1 ? -1 : v > 1 ? 1 : v;
    case 3: return v < 0 ? 0 : v > 6 ? 6 : v;
    default: return v;
  }
}

static void check_activation(int act) {
  float x[6] = {-3.5f, -1.0f, -0.25f, 0.5f, 2.0f, 7.0f}, z[6] = {0, 0, 0, 0, 0.25f, 1.0f}, out[6];
  mdt_model b;
  run_add(mdt_add_model(&b, 2, D23, 2, D23, 2, D23, act), x, 6, 0, NULL, z, 6, 0, NULL, out, 6);
  for (int i = 0; i < 6; i++)
    cr_expect_eq(out[i], act_ref(x[i] + z[i], act), "act %d: out[%d] = %g", act, i, (double)out[i]);
}

Test(numerics, add_fused_relu) { check_activation(1); }
Test(numerics, add_fused_relu1) { check_activation(2); }
Test(numerics, add_fused_relu6) { check_activation(3); }

Test(numerics, add_broadcast_with_relu_through_device_buffers) {
  /* in0 and out are device buffers; in1 [3] broadcasts; relu clips. */
  static const uint32_t d3[1] = {3};
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 1, d3, 2, D23, 1));
  md_token tin = mdt_alloc(&e, p, false, 0, 0, NULL), tout = mdt_alloc(&e, p, true, 0, 0, NULL);
  float x[6] = {-5, 1, 2, -3, 4, 5}, c[3] = {1, -2, 0.5f}, out[6];
  cr_assert_eq(mdt_copy_from(&e, e.client, tin, x, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, tin, 0, NULL);
  mdt_req_in_data(&r, c, 12, 0, NULL);
  mdt_req_out_token(&r, tout, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(mdt_copy_to(&e, e.client, tout, out, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], act_ref(x[i] + c[i % 3], 1), "out[%d] = %g", i, (double)out[i]);
  mdt_req_fini(&r);
  mdt_free(&e, tin);
  mdt_free(&e, tout);
  mdt_release(&e, p);
}

Test(numerics, device_output_feeds_next_execution) {
  /* A state tensor: s = s + x, three times, never leaving the device. */
  md_token s = mdt_alloc_inout(&e, P, 0, 0, 0, NULL);
  float zero[6] = {0}, out[6];
  cr_assert_eq(mdt_copy_from(&e, e.client, s, zero, B23, 0, NULL), MD_NONE);
  for (int k = 0; k < 3; k++) {
    /* A token used as an output may not also be an input of the same request, so the sum
     * goes through a second buffer. */
    md_token tmp = mdt_alloc_inout(&e, P, 0, 0, 0, NULL);
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_token(&r, s, 0, NULL);
    mdt_req_in_data(&r, A, B23, 0, NULL);
    mdt_req_out_token(&r, tmp, 0, NULL);
    md_output_shape sh[8];
    md_timing t;
    cr_assert_eq(mdt_exec(&e, P, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    mdt_req_fini(&r);
    mdt_free(&e, s);
    s = tmp;
  }
  cr_assert_eq(mdt_copy_to(&e, e.client, s, out, B23), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 3 * A[i]);
  mdt_free(&e, s);
}

/* ---- argument counts and pools ---- */

Test(execute, too_few_inputs_rejected) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
}

Test(execute, too_many_inputs_rejected) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
}

Test(execute, wrong_output_count_rejected) {
  for (uint32_t n = 0; n <= 2; n += 2) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, A, B23, 0, NULL);
    mdt_req_in_data(&r, B, B23, 0, NULL);
    for (uint32_t i = 0; i < n; i++) mdt_req_out_pool(&r, B23, 0, NULL);
    md_output_shape sh[8];
    md_timing t;
    cr_expect_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT, "%u outputs accepted", n);
    mdt_req_fini(&r);
  }
}

Test(execute, invalid_argument_reports_no_shapes_and_unmeasured_timing) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, 20, 0, NULL); /* wrong length */
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT);
  expect_failure_reporting(sh, 1, &t);
  mdt_req_fini(&r);
}

/* ---- tokens: ownership and roles ---- */

Test(execute, token_of_another_client_rejected) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t2 = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t2), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, c2, t2, A, B23, 0, NULL), MD_NONE);
  /* Our client, our prepared model P, their token. */
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t2, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT);
  /* Their prepared model with their token, but our client. */
  cr_expect_eq(mdt_exec(&e, p2, &r, sh, &t), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_close_client(&e, c2, NULL);
}

static md_status exec_in(uint32_t io_of_token, md_token tok, md_handle prep) {
  mdt_request r;
  mdt_req_init(&r);
  for (uint32_t i = 0; i < 2; i++) {
    if (i == io_of_token) mdt_req_in_token(&r, tok, 0, NULL);
    else mdt_req_in_data(&r, B, B23, 0, NULL);
  }
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  md_status st = mdt_exec(&e, prep, &r, sh, &t);
  mdt_req_fini(&r);
  return st;
}

static md_status exec_out(md_token tok, md_handle prep) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, tok, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  md_status st = mdt_exec(&e, prep, &r, sh, &t);
  mdt_req_fini(&r);
  return st;
}

Test(execute, token_in_its_role_accepted) {
  md_token t = ready_in(0);
  cr_expect_eq(exec_in(0, t, P), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
}

Test(execute, token_at_other_input_index_rejected) {
  md_token t = ready_in(0);
  cr_expect_eq(exec_in(1, t, P), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "role") != NULL, "message does not mention the role: %s",
            e.drv->last_error(e.dev));
  mdt_free(&e, t);
}

Test(execute, input_token_used_as_output_rejected) {
  md_token t = ready_in(0);
  cr_expect_eq(exec_out(t, P), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(execute, output_token_used_as_input_rejected) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  cr_expect_eq(exec_in(0, t, P), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
}

Test(execute, token_with_identical_but_other_prepared_model_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = ready_in(0);
  cr_expect_eq(exec_in(0, t, Q), MD_INVALID_ARGUMENT);
  md_token o = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_expect_eq(exec_out(o, Q), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_free(&e, o);
  mdt_release(&e, Q);
}

Test(execute, token_with_role_on_second_prepared_model_accepted) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_handle prep[2] = {P, Q};
  md_buffer_desc desc = {0, NULL};
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 1, 1.0f}};
  md_token t = 0;
  cr_assert_eq(e.drv->allocate(e.dev, e.client, &desc, prep, 2, in, 2, NULL, 0, &t), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  cr_expect_eq(exec_in(0, t, P), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(exec_in(1, t, Q), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(exec_in(1, t, P), MD_INVALID_ARGUMENT);
  cr_expect_eq(exec_in(0, t, Q), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, role_checked_before_initialization) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL); /* uninitialized */
  cr_expect_eq(exec_in(1, t, P), MD_INVALID_ARGUMENT, "uninitialized token outside its role");
  cr_expect_eq(exec_in(0, t, P), MD_GENERAL_FAILURE, "uninitialized token in its role");
  mdt_free(&e, t);
}

Test(execute, uninitialized_output_token_accepted) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_expect_eq(exec_out(t, P), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
}

Test(execute, uninitialized_input_failure_reports_no_shapes) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_GENERAL_FAILURE);
  expect_failure_reporting(sh, 1, &tm);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(execute, output_token_repeated_as_input_rejected) {
  md_token t = mdt_alloc_inout(&e, P, 0, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pool = mdt_req_pool_token(&r, t);
  mdt_req_in_arg(&r, pool, 0, 0, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_arg(&r, pool, 0, 0, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(execute, output_token_repeated_as_input_through_second_pool_rejected) {
  /* The same token in two token pools is still the same buffer. */
  md_token t = mdt_alloc_inout(&e, P, 0, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(execute, output_token_repeated_as_second_output_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add2_model(&b, 2, D23));
  md_buffer_desc desc = {0, NULL};
  md_buffer_role out[2] = {{0, 0, 1.0f}, {0, 1, 1.0f}};
  md_token t = 0;
  cr_assert_eq(e.drv->allocate(e.dev, e.client, &desc, &Q, 1, NULL, 0, out, 2, &t), MD_NONE, "%s",
               e.drv->last_error(e.dev));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, same_token_as_two_inputs_accepted) {
  md_buffer_desc desc = {0, NULL};
  md_buffer_role in[2] = {{0, 0, 1.0f}, {0, 1, 1.0f}};
  md_token t = 0;
  cr_assert_eq(e.drv->allocate(e.dev, e.client, &desc, &P, 1, in, 2, NULL, 0, &t), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pool = mdt_req_pool_token(&r, t);
  mdt_req_in_arg(&r, pool, 0, 0, 0, NULL);
  mdt_req_in_arg(&r, pool, 0, 0, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  float out[6];
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 2 * A[i]);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(execute, token_arg_dims_combining_with_buffer_accepted) {
  md_token t = ready_in(0);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 2, D23);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(execute, token_arg_dims_not_combining_with_buffer_rejected) {
  /* Model [0,3]; the buffer was given [2,3] by its desc; the arg says [4,3]. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
  md_token t = mdt_alloc(&e, Q, false, 0, 2, D23);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  static const uint32_t d43[2] = {4, 3};
  float big[12];
  mdt_iota(big, 12, 0);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 2, d43);
  mdt_req_in_data(&r, big, 48, 2, d43);
  mdt_req_out_pool(&r, 48, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, unspecified_output_dims_allowed) {
  /* Model dims [0,3]: the output arg gives no dims; the execution finds [2,3]. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  float out[6];
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[0].dims[0], 2u);
  cr_expect_eq(sh[0].dims[1], 3u);
  cr_expect_eq(sh[0].is_sufficient, 1);
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
  mdt_release(&e, Q);
}

/* ---- outcomes ---- */

Test(execute, success_reports_a_sufficient_shape_for_every_output) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add2_model(&b, 2, D23));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int k = 0; k < 2; k++) {
    cr_expect_eq(sh[k].rank, 2u, "output %d", k);
    cr_expect_eq(sh[k].dims[0], 2u);
    cr_expect_eq(sh[k].dims[1], 3u);
    cr_expect_eq(sh[k].is_sufficient, 1, "output %d", k);
    float out[6];
    mdt_req_read_out(&r, (uint32_t)k, out, B23);
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  }
  mdt_req_fini(&r);
  mdt_release(&e, Q);
}

Test(execute, success_initializes_device_output) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_assert_eq(exec_out(t, P), MD_NONE, "%s", e.drv->last_error(e.dev));
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, t, out, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_free(&e, t);
}

static void exec_dynamic_short(uint64_t len0, uint64_t len1, md_output_shape *sh, md_status *st) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add2_model(&b, 2, D03));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_pool(&r, len0, 0, NULL);
  mdt_req_out_pool(&r, len1, 0, NULL);
  md_timing tm;
  *st = mdt_exec(&e, Q, &r, sh, &tm);
  mdt_req_fini(&r);
  mdt_release(&e, Q);
}

Test(execute, short_output_pool_is_output_insufficient_size) {
  md_output_shape sh[8];
  md_status st;
  exec_dynamic_short(12, 12, sh, &st);
  cr_expect_eq(st, MD_OUTPUT_INSUFFICIENT_SIZE);
}

Test(execute, insufficient_size_marks_exactly_the_short_outputs) {
  md_output_shape sh[8];
  md_status st;
  exec_dynamic_short(B23, 12, sh, &st);
  cr_assert_eq(st, MD_OUTPUT_INSUFFICIENT_SIZE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].is_sufficient, 1, "output 0 had room");
  cr_expect_eq(sh[1].is_sufficient, 0, "output 1 was short");
}

Test(execute, insufficient_size_reports_a_shape_for_every_output) {
  md_output_shape sh[8];
  md_status st;
  exec_dynamic_short(12, B23, sh, &st);
  cr_assert_eq(st, MD_OUTPUT_INSUFFICIENT_SIZE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].is_sufficient, 0);
  cr_expect_eq(sh[1].is_sufficient, 1);
  for (int k = 0; k < 2; k++) {
    cr_expect_eq(sh[k].rank, 2u, "output %d", k);
    cr_expect_eq(sh[k].dims[0], 2u, "output %d", k);
    cr_expect_eq(sh[k].dims[1], 3u, "output %d", k);
  }
}

/* A request whose input 1 sits on a pool the driver cannot map: it passes validation and
 * fails at execute (GENERAL_FAILURE). Output 0 is token t. */
static md_status exec_unmappable_in1(md_handle prep, md_token t, md_output_shape *sh, md_timing *tm) {
  int fd = mdt_unmappable_fd(B23);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fd, B23)), 0, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_status st = mdt_exec(&e, prep, &r, sh, tm);
  mdt_req_fini(&r);
  close(fd);
  return st;
}

Test(execute, general_failure_reports_no_shapes_and_unmeasured_timing) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(exec_unmappable_in1(P, t, sh, &tm), MD_GENERAL_FAILURE);
  expect_failure_reporting(sh, 1, &tm);
  mdt_free(&e, t);
}

Test(execute, general_failure_uninitializes_device_outputs) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(exec_unmappable_in1(P, t, sh, &tm), MD_GENERAL_FAILURE);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "output still initialized");
  mdt_free(&e, t);
}

Test(execute, failed_kernel_is_general_failure_with_its_message) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.fail", MD_TENSOR_FLOAT32, 0, 0, 2, D23));
  md_token t = mdt_alloc(&e, Q, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), MDT_FAIL_MESSAGE) != NULL, "last_error: %s",
            e.drv->last_error(e.dev));
  expect_failure_reporting(sh, 1, &tm);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "output still initialized");
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, failed_execution_keeps_device_output_dims) {
  /* A dynamic output buffer written at [2,3], then a failed execution: uninitialized, still
   * [2,3] (copy_to of 48 bytes is a size error, of 24 an initialization error). */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
  md_token t = mdt_alloc(&e, Q, true, 0, 0, NULL);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  int fd = mdt_unmappable_fd(48);
  static const uint32_t d43[2] = {4, 3};
  float big[12];
  mdt_iota(big, 12, 0);
  mdt_req_init(&r);
  mdt_req_in_data(&r, big, 48, 2, d43);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fd, 48)), 0, 48, 2, d43);
  mdt_req_out_token(&r, t, 0, NULL);
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_GENERAL_FAILURE);
  mdt_req_fini(&r);
  close(fd);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, 48), MD_INVALID_ARGUMENT, "current dims changed");
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "still initialized");
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, failure_does_not_touch_input_buffers) {
  md_token in = ready_in(0);
  md_token out = mdt_alloc(&e, P, true, 0, 0, NULL);
  mdt_request r;
  mdt_req_init(&r);
  int fd = mdt_unmappable_fd(B23);
  mdt_req_in_token(&r, in, 0, NULL);
  mdt_req_in_arg(&r, mdt_req_pool_mem(&r, mdt_ashmem(fd, B23)), 0, B23, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_GENERAL_FAILURE);
  float back[6];
  cr_expect_eq(mdt_copy_to(&e, e.client, in, back, B23), MD_NONE, "input lost its initialization");
  cr_expect(memcmp(back, A, B23) == 0);
  mdt_req_fini(&r);
  close(fd);
  mdt_free(&e, in);
  mdt_free(&e, out);
}

Test(execute, other_clients_uninitialized_token_is_invalid_argument) {
  /* Ownership before initialization, as role before initialization. */
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t2 = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t2), MD_NONE);
  cr_expect_eq(exec_in(0, t2, P), MD_INVALID_ARGUMENT);
  mdt_close_client(&e, c2, NULL);
}

Test(execute, output_token_arg_dims_not_combining_with_buffer_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D03, 2, D03, 2, D03, 0));
  md_token t = mdt_alloc(&e, Q, true, 0, 2, D23);
  static const uint32_t d43[2] = {4, 3};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_token(&r, t, 2, d43);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(execute, role_survives_release_and_binds_to_that_model_only) {
  /* A buffer's role names one prepared model; after it is released, an identical model
   * prepared again is still another model. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&e, Q, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_release(&e, Q);
  md_handle Q2 = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  cr_expect_eq(exec_in(0, t, Q2), MD_INVALID_ARGUMENT);
  mdt_free(&e, t);
  mdt_release(&e, Q2);
}

Test(numerics, scalar_token_feeds_the_activation) {
  /* The fused activation as a model input held in a device buffer: 1 = relu. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  md_token act = mdt_alloc(&e, Q, false, 2, 0, NULL);
  int32_t relu = 1;
  cr_assert_eq(mdt_copy_from(&e, e.client, act, &relu, sizeof relu, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  float x[6] = {-3, 1, -2, 4, -5, 6}, z[6] = {0}, out[6];
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, B23, 0, NULL);
  mdt_req_in_data(&r, z, B23, 0, NULL);
  mdt_req_in_token(&r, act, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], x[i] < 0 ? 0.0f : x[i], "out[%d] = %g", i, (double)out[i]);
  mdt_req_fini(&r);
  mdt_free(&e, act);
  mdt_release(&e, Q);
}

Test(numerics, quant8_buffers_round_trip_through_an_execution) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.copy", MD_TENSOR_QUANT8_ASYMM, 0.5f, 3, 2, D23));
  md_token in = mdt_alloc(&e, Q, false, 0, 0, NULL), out = mdt_alloc(&e, Q, true, 0, 0, NULL);
  uint8_t v[6] = {9, 8, 7, 6, 5, 4}, back[6];
  cr_assert_eq(mdt_copy_from(&e, e.client, in, v, 6, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, in, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, Q, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(mdt_copy_to(&e, e.client, out, back, 6), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect(memcmp(v, back, 6) == 0);
  mdt_req_fini(&r);
  mdt_free(&e, in);
  mdt_free(&e, out);
  mdt_release(&e, Q);
}

Test(execute, invalid_argument_uninitializes_device_outputs) {
  /* SPEC 4: "On every other failure: ... every device output of the request becomes
   * uninitialized" - a request rejected for another argument is such a failure. The output
   * token itself is valid, owned and in its role. */
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, 20, 0, NULL); /* wrong length */
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "output still initialized");
  mdt_req_fini(&r);
  mdt_free(&e, t);
}
