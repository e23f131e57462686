/* test_spec_allocate.c - black-box rules of SPEC section 3 for allocate(): validation of the
 * prepared models and roles, probabilities, duplicate roles, role operands agreeing, the
 * combine rule of desc and role dims, scalar roles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3]: inputs 0,1, output 0 */
static const uint32_t D23[2] = {2, 3};
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
TestSuite(allocate, .init = setup, .fini = teardown);
TestSuite(combine, .init = setup, .fini = teardown);

static md_status alloc_roles(uint32_t rank, const uint32_t *dims, const md_handle *prep, uint32_t np,
                             const md_buffer_role *in, uint32_t nin, const md_buffer_role *out,
                             uint32_t nout, md_token *tok) {
  md_buffer_desc desc = {rank, dims};
  *tok = 0;
  return e.drv->allocate(e.dev, e.client, &desc, prep, np, in, nin, out, nout, tok);
}

/* Asserts INVALID_ARGUMENT and that no token came back usable. */
static void expect_rejected(md_status st, md_token tok) {
  cr_expect_eq(st, MD_INVALID_ARGUMENT, "status %d", (int)st);
  if (st == MD_NONE && tok) e.drv->free_buffer(e.dev, e.client, tok);
}

static md_status alloc_in0_prob(float prob, md_token *tok) {
  md_buffer_role r = {0, 0, prob};
  return alloc_roles(0, NULL, &P, 1, &r, 1, NULL, 0, tok);
}

/* ---- success ---- */

Test(allocate, input_role_returns_nonzero_token) {
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  cr_assert_eq(alloc_roles(0, NULL, &P, 1, &r, 1, NULL, 0, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_neq(t, 0u);
  mdt_free(&e, t);
}

Test(allocate, output_role_returns_nonzero_token) {
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  cr_assert_eq(alloc_roles(2, D23, &P, 1, NULL, 0, &r, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_neq(t, 0u);
  mdt_free(&e, t);
}

Test(allocate, successive_allocations_return_distinct_tokens) {
  md_token t[16];
  for (int i = 0; i < 16; i++) {
    t[i] = mdt_alloc(&e, P, false, 0, 0, NULL);
    for (int j = 0; j < i; j++) cr_expect_neq(t[i], t[j], "token %d == token %d", i, j);
  }
  for (int i = 0; i < 16; i++) mdt_free(&e, t[i]);
}

Test(allocate, same_io_index_as_input_and_output_accepted) {
  md_token t = 0;
  md_buffer_role in = {0, 0, 1.0f}, out = {0, 0, 1.0f};
  cr_expect_eq(alloc_roles(0, NULL, &P, 1, &in, 1, &out, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
}

Test(allocate, roles_on_two_prepared_models_accepted) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 1));
  md_handle prep[2] = {P, Q};
  md_buffer_role out = {0, 0, 0.5f}, in = {1, 1, 0.5f};
  md_token t = 0;
  cr_expect_eq(alloc_roles(0, NULL, prep, 2, &in, 1, &out, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(allocate, identical_models_prepared_twice_are_different_models) {
  /* The same (input, 0) role on two prepared models built from one md_model is not a
   * duplicate: roles bind to prepared models by identity. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_handle prep[2] = {P, Q};
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 0, 1.0f}};
  md_token t = 0;
  cr_expect_eq(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(allocate, dynamic_dims_buffer_accepted) {
  static const uint32_t d03[2] = {0, 3};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, d03, 2, d03, 2, d03, 0));
  md_token t = 0;
  cr_expect_eq(mdt_try_alloc(&e, e.client, Q, true, 0, 0, NULL, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
  mdt_release(&e, Q);
}

/* ---- prepared models and roles present ---- */

Test(allocate, no_prepared_model_rejected) {
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, NULL, 0, &r, 1, NULL, 0, &t), t);
}

Test(allocate, no_role_rejected) {
  md_token t = 0;
  expect_rejected(alloc_roles(2, D23, &P, 1, NULL, 0, NULL, 0, &t), t);
}

Test(allocate, zero_prepared_handle_rejected) {
  md_token t = 0;
  md_handle z = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, &z, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, forged_prepared_handle_rejected) {
  md_handle forged[] = {P ^ 1u, P ^ (1ull << 40), P + (1ull << 24), ~P, 0x0123456789abcdefull};
  md_buffer_role r = {0, 0, 1.0f};
  for (uint32_t i = 0; i < MDT_N(forged); i++) {
    md_token t = 0;
    md_status st = alloc_roles(0, NULL, &forged[i], 1, &r, 1, NULL, 0, &t);
    cr_expect_eq(st, MD_INVALID_ARGUMENT, "forged prepared 0x%llx accepted", (unsigned long long)forged[i]);
    if (st == MD_NONE) e.drv->free_buffer(e.dev, e.client, t);
  }
}

Test(allocate, released_prepared_handle_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  mdt_release(&e, Q);
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, &Q, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, other_clients_prepared_handle_rejected) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle Q = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, &Q, 1, &r, 1, NULL, 0, &t), t);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, c2, Q), MD_NONE);
  mdt_close_client(&e, c2, NULL);
}

Test(allocate, invalid_prepared_handle_without_roles_still_rejected) {
  /* Every listed prepared handle must be valid, even one no role names. */
  md_handle prep[2] = {P, P ^ 0x5555u};
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, prep, 2, &r, 1, NULL, 0, &t), t);
}

Test(allocate, model_index_out_of_range_rejected) {
  md_token t = 0;
  md_buffer_role r = {1, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, &P, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, input_io_index_out_of_range_rejected) {
  md_token t = 0;
  md_buffer_role r = {0, 2, 1.0f}; /* ADD has inputs 0 and 1 */
  expect_rejected(alloc_roles(0, NULL, &P, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, output_io_index_out_of_range_rejected) {
  md_token t = 0;
  md_buffer_role r = {0, 1, 1.0f}; /* one output */
  expect_rejected(alloc_roles(0, NULL, &P, 1, NULL, 0, &r, 1, &t), t);
}

/* ---- probability ---- */

Test(allocate, probability_zero_rejected) {
  md_token t = 0;
  expect_rejected(alloc_in0_prob(0.0f, &t), t);
}

Test(allocate, probability_negative_rejected) {
  md_token t = 0;
  expect_rejected(alloc_in0_prob(-0.5f, &t), t);
}

Test(allocate, probability_above_one_rejected) {
  md_token t = 0;
  expect_rejected(alloc_in0_prob(nextafterf(1.0f, 2.0f), &t), t);
}

Test(allocate, probability_nan_rejected) {
  md_token t = 0;
  expect_rejected(alloc_in0_prob(NAN, &t), t);
}

Test(allocate, probability_infinite_rejected) {
  md_token t = 0;
  expect_rejected(alloc_in0_prob(INFINITY, &t), t);
}

Test(allocate, probability_one_accepted) {
  md_token t = 0;
  cr_expect_eq(alloc_in0_prob(1.0f, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
}

Test(allocate, smallest_positive_probability_accepted) {
  md_token t = 0;
  cr_expect_eq(alloc_in0_prob(nextafterf(0.0f, 1.0f), &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
}

Test(allocate, bad_probability_on_output_role_rejected) {
  md_token t = 0;
  md_buffer_role in = {0, 0, 1.0f}, out = {0, 0, 0.0f};
  expect_rejected(alloc_roles(0, NULL, &P, 1, &in, 1, &out, 1, &t), t);
}

/* ---- duplicate roles ---- */

Test(allocate, duplicate_input_role_rejected) {
  md_token t = 0;
  md_buffer_role in[2] = {{0, 1, 1.0f}, {0, 1, 0.5f}};
  expect_rejected(alloc_roles(0, NULL, &P, 1, in, 2, NULL, 0, &t), t);
}

Test(allocate, duplicate_output_role_rejected) {
  md_token t = 0;
  md_buffer_role out[2] = {{0, 0, 1.0f}, {0, 0, 1.0f}};
  expect_rejected(alloc_roles(0, NULL, &P, 1, NULL, 0, out, 2, &t), t);
}

Test(allocate, same_prepared_listed_twice_counts_as_same_model) {
  md_handle prep[2] = {P, P};
  md_token t = 0;
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 0, 1.0f}};
  expect_rejected(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), t);
}

Test(allocate, same_prepared_listed_twice_with_distinct_roles_accepted) {
  /* Listing it twice is not itself an error; only the repeated (model, in/out, io) is. */
  md_handle prep[2] = {P, P};
  md_token t = 0;
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 1, 1.0f}};
  cr_expect_eq(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  if (t) mdt_free(&e, t);
}

/* ---- role operands agree ---- */

Test(allocate, role_operands_disagreeing_on_type_rejected) {
  /* Q's input 2 is the INT32 activation scalar; P's input 0 is TENSOR_FLOAT32. */
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  md_handle prep[2] = {P, Q};
  md_token t = 0;
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 2, 1.0f}};
  expect_rejected(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), t);
  mdt_release(&e, Q);
}

static void quant_roles(float s1, int32_t z1, float s2, int32_t z2, md_status want) {
  mdt_register_test_kernels();
  mdt_model b1, b2;
  md_handle A = mdt_prepare(&e, mdt_custom_model(&b1, "mdt.copy", MD_TENSOR_QUANT8_ASYMM, s1, z1, 2, D23));
  md_handle B = mdt_prepare(&e, mdt_custom_model(&b2, "mdt.copy", MD_TENSOR_QUANT8_ASYMM, s2, z2, 2, D23));
  md_handle prep[2] = {A, B};
  md_token t = 0;
  md_buffer_role out = {0, 0, 1.0f}, in = {1, 0, 1.0f};
  md_status st = alloc_roles(0, NULL, prep, 2, &in, 1, &out, 1, &t);
  cr_expect_eq(st, want, "status %d: %s", (int)st, e.drv->last_error(e.dev));
  if (st == MD_NONE) mdt_free(&e, t);
  mdt_release(&e, A);
  mdt_release(&e, B);
}

Test(allocate, role_operands_agreeing_on_quantization_accepted) {
  quant_roles(0.5f, 10, 0.5f, 10, MD_NONE);
}

Test(allocate, role_operands_disagreeing_on_scale_rejected) {
  quant_roles(0.5f, 10, 0.25f, 10, MD_INVALID_ARGUMENT);
}

Test(allocate, role_operands_disagreeing_on_zero_point_rejected) {
  quant_roles(0.5f, 10, 0.5f, 11, MD_INVALID_ARGUMENT);
}

/* ---- dims: desc and role operands combine ---- */

Test(allocate, desc_dims_not_combining_with_role_rejected) {
  static const uint32_t d32[2] = {3, 2};
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(2, d32, &P, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, desc_rank_differing_from_role_rejected) {
  static const uint32_t d231[3] = {2, 3, 1};
  md_token t = 0;
  md_buffer_role r = {0, 0, 1.0f};
  expect_rejected(alloc_roles(3, d231, &P, 1, &r, 1, NULL, 0, &t), t);
}

Test(allocate, role_operand_dims_not_combining_rejected) {
  static const uint32_t d24[2] = {2, 4};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, d24, 2, d24, 2, d24, 0));
  md_handle prep[2] = {P, Q};
  md_token t = 0;
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 0, 1.0f}};
  expect_rejected(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), t);
  mdt_release(&e, Q);
}

Test(allocate, role_operand_ranks_differing_rejected) {
  static const uint32_t d6[1] = {6};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 1, d6, 1, d6, 1, d6, 0));
  md_handle prep[2] = {P, Q};
  md_token t = 0;
  md_buffer_role out = {0, 0, 1.0f}, in = {1, 0, 1.0f};
  expect_rejected(alloc_roles(0, NULL, prep, 2, &in, 1, &out, 1, &t), t);
  mdt_release(&e, Q);
}

Test(allocate, scalar_role_with_dims_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  static const uint32_t d1[1] = {1};
  md_token t = 0;
  expect_rejected(mdt_try_alloc(&e, e.client, Q, false, 2, 1, d1, &t), t);
  mdt_release(&e, Q);
}

Test(allocate, scalar_role_without_dims_accepted_and_holds_its_value) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 2, 0, NULL, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  int32_t v = 1, back = 0;
  cr_expect_eq(mdt_copy_from(&e, e.client, t, &v, sizeof v, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(mdt_copy_to(&e, e.client, t, &back, sizeof back), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(back, 1);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

/* ---- combine(a, b), observed through the initial dims a buffer gets ----
 * A buffer whose initial dims are fully known accepts copy_from with empty dims and exactly
 * their byte size; one whose dims are not fully known rejects empty dims. */

static md_status fill_empty_dims(md_token t, uint64_t bytes) {
  float v[64];
  mdt_iota(v, 64, 0);
  return mdt_copy_from(&e, e.client, t, v, bytes, 0, NULL);
}

Test(combine, unknown_rank_role_takes_desc_dims) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 0, 2, D23, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, 20), MD_INVALID_ARGUMENT, "initial dims are not [2,3]");
  cr_expect_eq(fill_empty_dims(t, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(combine, unknown_rank_desc_takes_role_dims) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_expect_eq(fill_empty_dims(t, 28), MD_INVALID_ARGUMENT, "initial dims are not [2,3]");
  cr_expect_eq(fill_empty_dims(t, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
}

Test(combine, both_unknown_rank_stays_unknown) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 0, 0, NULL, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, B23), MD_INVALID_ARGUMENT, "empty dims on a buffer of unknown rank");
  float v[6];
  mdt_iota(v, 6, 0);
  cr_expect_eq(mdt_copy_from(&e, e.client, t, v, B23, 2, D23), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(combine, zero_axis_takes_the_other_axis) {
  static const uint32_t d03[2] = {0, 3}, d20[2] = {2, 0};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, d03, 2, d03, 2, d03, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 0, 2, d20, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, 36), MD_INVALID_ARGUMENT, "initial dims are not [2,3]");
  cr_expect_eq(fill_empty_dims(t, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(combine, zero_axis_on_both_sides_stays_unknown) {
  static const uint32_t d03[2] = {0, 3};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, d03, 2, d03, 2, d03, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 0, 2, d03, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, B23), MD_INVALID_ARGUMENT, "empty dims on a [0,3] buffer");
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(combine, all_zero_axes_accepted) {
  static const uint32_t d00[2] = {0, 0}, d45[2] = {4, 5};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, d00, 2, d00, 2, d00, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, Q, false, 0, 2, d00, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, 80), MD_INVALID_ARGUMENT, "empty dims on a [0,0] buffer");
  float v[20];
  mdt_iota(v, 20, 0);
  cr_expect_eq(mdt_copy_from(&e, e.client, t, v, 80, 2, d45), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(combine, roles_of_two_models_complete_each_other) {
  /* [0,3] from one model and [2,0] from the other: initial dims [2,3]. */
  static const uint32_t d03[2] = {0, 3}, d20[2] = {2, 0};
  mdt_model b1, b2;
  md_handle A = mdt_prepare(&e, mdt_add_model(&b1, 2, d03, 2, d03, 2, d03, 0));
  md_handle B = mdt_prepare(&e, mdt_add_model(&b2, 2, d20, 2, d20, 2, d20, 0));
  md_handle prep[2] = {A, B};
  md_buffer_role in[2] = {{0, 0, 1.0f}, {1, 1, 1.0f}};
  md_token t = 0;
  cr_assert_eq(alloc_roles(0, NULL, prep, 2, in, 2, NULL, 0, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(fill_empty_dims(t, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_free(&e, t);
  mdt_release(&e, A);
  mdt_release(&e, B);
}

/* ---- allocations the driver cannot serve: a status, never a crash ---- */

Test(allocate, desc_rank_above_max_rank_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  uint32_t d[MD_MAX_RANK + 1];
  for (uint32_t i = 0; i <= MD_MAX_RANK; i++) d[i] = 1;
  md_token t = 0;
  expect_rejected(mdt_try_alloc(&e, e.client, Q, false, 0, MD_MAX_RANK + 1, d, &t), t);
  mdt_release(&e, Q);
}

Test(allocate, huge_buffer_is_resource_exhausted_or_unsupported) {
  /* 2^20 x 2^20 float32: 4 TiB. */
  static const uint32_t d[2] = {1u << 20, 1u << 20};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = 0;
  md_status st = mdt_try_alloc(&e, e.client, Q, true, 0, 2, d, &t);
  cr_expect(st == MD_RESOURCE_EXHAUSTED_PERSISTENT || st == MD_RESOURCE_EXHAUSTED_TRANSIENT ||
                st == MD_GENERAL_FAILURE,
            "status %d", (int)st);
  if (st == MD_NONE) mdt_free(&e, t);
  mdt_release(&e, Q);
}

Test(allocate, size_overflowing_64_bits_fails_cleanly) {
  uint32_t d[MD_MAX_RANK];
  for (uint32_t i = 0; i < MD_MAX_RANK; i++) d[i] = UINT32_MAX;
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 0, NULL, 0, NULL, 0, NULL, 0));
  md_token t = 0;
  md_status st = mdt_try_alloc(&e, e.client, Q, true, 0, MD_MAX_RANK, d, &t);
  cr_expect(st == MD_RESOURCE_EXHAUSTED_PERSISTENT || st == MD_RESOURCE_EXHAUSTED_TRANSIENT ||
                st == MD_GENERAL_FAILURE || st == MD_INVALID_ARGUMENT,
            "status %d", (int)st);
  if (st == MD_NONE) mdt_free(&e, t);
  mdt_release(&e, Q);
}
