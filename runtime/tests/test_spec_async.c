/* test_spec_async.c - black-box rules of SPEC section 4 for execute_async / wait_event:
 * validation at once without an event, the status, shapes and timing wait_event returns, the
 * event consumed by a wait, timed-out waits, and objects released while an execution runs
 * (SPEC section 6). No test depends on timing: a simulated launch latency only makes it
 * likely that an execution is still running, and every assertion holds either way. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_int.h"
#include "md/sim.h"
#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3}, D03[2] = {0, 3};
#define B23 24u

static void open_with(const char *config) {
  mdt_env_open(&e, config);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
/* The suites below queue every execution on the device's streams (a small one would otherwise
 * run in the calling thread, docs/execution.md), so that the queued path is what they test;
 * async_inline tests the other one. */
static void setup(void) {
  atomic_store(&md__async_inline_bytes, 0);
  open_with("backend=sim");
}
static void setup_slow(void) {
  atomic_store(&md__async_inline_bytes, 0);
  open_with("backend=sim;latency_ns=20000000");
}
static void setup_inline(void) { open_with("backend=sim"); }
static void teardown(void) {
  if (P) e.drv->release_prepared_model(e.dev, e.client, P);
  mdt_env_close(&e, 0);
}
TestSuite(async, .init = setup, .fini = teardown);
TestSuite(async_slow, .init = setup_slow, .fini = teardown);
TestSuite(async_inline, .init = setup_inline, .fini = teardown);

static float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static md_status start(md_handle prep, mdt_request *r, md_handle *ev) {
  *ev = 0;
  return e.drv->execute_async(e.dev, e.client, prep, mdt_req(r), ev);
}

static md_status wait_ev(md_handle ev, uint64_t timeout, md_output_shape *sh, uint32_t n, md_timing *tm) {
  memset(sh, 0xAB, 8 * sizeof *sh);
  memset(tm, 0, sizeof *tm);
  return e.drv->wait_event(e.dev, e.client, ev, timeout, sh, n, tm);
}

static void plain_request(mdt_request *r) {
  mdt_req_init(r);
  mdt_req_in_data(r, A, B23, 0, NULL);
  mdt_req_in_data(r, B, B23, 0, NULL);
  mdt_req_out_pool(r, B23, 0, NULL);
}

/* A and B in, the output to token t. */
static void token_request(mdt_request *r, md_token t) {
  mdt_req_init(r);
  mdt_req_in_data(r, A, B23, 0, NULL);
  mdt_req_in_data(r, B, B23, 0, NULL);
  mdt_req_out_token(r, t, 0, NULL);
}

static void expect_sum_in(const mdt_request *r, uint32_t out_index) {
  float out[6];
  mdt_req_read_out(r, out_index, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i], "out[%d] = %g", i, (double)out[i]);
}

/* ---- success and the event's life ---- */

Test(async, wait_returns_status_shapes_and_results) {
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_neq(ev, 0u);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[0].dims[0], 2u);
  cr_expect_eq(sh[0].dims[1], 3u);
  cr_expect_eq(sh[0].is_sufficient, 1);
  expect_sum_in(&r, 0);
  mdt_req_fini(&r);
}

Test(async, second_wait_rejected) {
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE);
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(wait_ev(ev, 0, sh, 1, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
}

Test(async, many_events_waited_in_reverse_order) {
  enum { N = 16 };
  static mdt_request r[N];
  md_handle ev[N];
  for (int i = 0; i < N; i++) {
    plain_request(&r[i]);
    cr_assert_eq(start(P, &r[i], &ev[i]), MD_NONE, "%s", e.drv->last_error(e.dev));
    for (int j = 0; j < i; j++) cr_expect_neq(ev[i], ev[j]);
  }
  for (int i = N - 1; i >= 0; i--) {
    md_output_shape sh[8];
    md_timing tm;
    cr_expect_eq(wait_ev(ev[i], UINT64_MAX, sh, 1, &tm), MD_NONE, "event %d: %s", i, e.drv->last_error(e.dev));
    expect_sum_in(&r[i], 0);
    mdt_req_fini(&r[i]);
  }
}

Test(async, output_token_initialized_after_wait) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  mdt_request r;
  token_request(&r, t);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, t, out, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(async, caller_may_close_pool_fds_once_execute_async_returns) {
  /* Like a HAL client whose hidl_memory handles were duplicated into the driver: the pools
   * are the driver's to keep until the execution ends. The output goes to a token (read
   * after the wait); input fds are closed before the wait. */
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  mdt_request r;
  token_request(&r, t);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  int decoy = mdt_memfd(NULL, 4096); /* likely takes a closed fd's number */
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, t, out, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  close(decoy);
  mdt_free(&e, t);
}

/* ---- validation at once, no event ---- */

Test(async, validation_failure_returns_at_once_without_event) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL); /* one input of two */
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_expect_eq(start(P, &r, &ev), MD_INVALID_ARGUMENT);
  cr_expect_eq(ev, 0u, "an event came back from a failed execute_async");
  mdt_req_fini(&r);
  /* teardown's leak check: no event left behind */
}

Test(async, role_violation_returns_at_once_without_event) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_token(&r, t, 0, NULL); /* input 1: not its role */
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_expect_eq(start(P, &r, &ev), MD_INVALID_ARGUMENT);
  cr_expect_eq(ev, 0u);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(async, uninitialized_input_returns_general_failure_at_once_without_event) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_expect_eq(start(P, &r, &ev), MD_GENERAL_FAILURE);
  cr_expect_eq(ev, 0u);
  mdt_req_fini(&r);
  mdt_free(&e, t);
}

Test(async, other_clients_prepared_model_rejected_at_once) {
  md_handle c2 = mdt_open_client(&e);
  mdt_request r;
  plain_request(&r);
  md_handle ev = 0;
  cr_expect_eq(e.drv->execute_async(e.dev, c2, P, mdt_req(&r), &ev), MD_INVALID_ARGUMENT);
  cr_expect_eq(ev, 0u);
  mdt_req_fini(&r);
  mdt_close_client(&e, c2, NULL);
}

/* ---- the execution's status through wait_event ---- */

Test(async, wait_returns_output_insufficient_size_with_shapes) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add2_model(&b, 2, D03));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 2, D23);
  mdt_req_in_data(&r, B, B23, 2, D23);
  mdt_req_out_pool(&r, B23, 0, NULL);
  mdt_req_out_pool(&r, 12, 0, NULL);
  md_handle ev;
  cr_assert_eq(start(Q, &r, &ev), MD_NONE, "a short output is the execution's status, reported by wait: %s",
               e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 2, &tm), MD_OUTPUT_INSUFFICIENT_SIZE);
  cr_expect_eq(sh[0].is_sufficient, 1);
  cr_expect_eq(sh[1].is_sufficient, 0);
  for (int k = 0; k < 2; k++) {
    cr_expect_eq(sh[k].rank, 2u);
    cr_expect_eq(sh[k].dims[0], 2u);
    cr_expect_eq(sh[k].dims[1], 3u);
  }
  mdt_req_fini(&r);
  mdt_release(&e, Q);
}

Test(async, wait_returns_kernel_failure_and_uninitializes_device_output) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.fail", MD_TENSOR_FLOAT32, 0, 0, 2, D23));
  md_token t = mdt_alloc(&e, Q, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_handle ev;
  cr_assert_eq(start(Q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), MDT_FAIL_MESSAGE) != NULL, "last_error: %s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 0u);
  cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  cr_expect_eq(tm.in_driver_ns, UINT64_MAX);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "output still initialized");
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

/* A chain t1 = a + b; mid = KERNEL(t1); out = mid + b on [2,3]: an asynchronous execution queues
 * all three kernels and synchronizes once (docs/execution.md), so these pin down that a chain
 * computes what execute computes, and that a failure in the middle is reported as that
 * operation's, with no shapes and a device output left uninitialized. */
static const md_model *chain_model(mdt_model *b, const char *mid) {
  mdt_mb_init(b);
  uint32_t a = mdt_mb_tensor_f32(b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t bb = mdt_mb_tensor_f32(b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t act = mdt_mb_const_i32(b, 0);
  uint32_t t1 = mdt_mb_tensor_f32(b, 2, D23, MD_TEMPORARY_VARIABLE);
  uint32_t t2 = mdt_mb_tensor_f32(b, 2, D23, MD_TEMPORARY_VARIABLE);
  uint32_t out = mdt_mb_tensor_f32(b, 2, D23, MD_SUBGRAPH_OUTPUT);
  uint32_t in0[3] = {a, bb, act}, in2[3] = {t2, bb, act};
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in0, 1, &t1);
  mdt_mb_op(b, MD_OP_CUSTOM, mid, 1, &t1, 1, &t2);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in2, 1, &out);
  return mdt_mb_model(b);
}

Test(async, chain_of_kernels_computes_what_execute_computes) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, chain_model(&b, "mdt.copy"));
  float want[6], got[6];
  for (int i = 0; i < 6; i++) want[i] = A[i] + 2 * B[i];
  for (int round = 0; round < 3; round++) {
    mdt_request r;
    plain_request(&r);
    md_handle ev;
    cr_assert_eq(start(Q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
    md_output_shape sh[8];
    md_timing tm;
    cr_assert_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "round %d: %s", round, e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].rank, 2u);
    cr_expect_eq(sh[0].is_sufficient, 1);
    cr_expect_neq(tm.on_device_ns, UINT64_MAX);
    mdt_req_read_out(&r, 0, got, B23);
    for (int i = 0; i < 6; i++) cr_expect_eq(got[i], want[i], "round %d: out[%d] = %g", round, i, (double)got[i]);
    mdt_req_fini(&r);
  }
  mdt_release(&e, Q);
}

Test(async, failure_in_the_middle_of_a_chain_names_its_operation) {
  mdt_register_test_kernels();
  mdt_model b;
  md_handle Q = mdt_prepare(&e, chain_model(&b, "mdt.fail"));
  md_token t = mdt_alloc(&e, Q, true, 0, 0, NULL);
  mdt_request r;
  token_request(&r, t);
  md_handle ev;
  cr_assert_eq(start(Q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_GENERAL_FAILURE);
  const char *msg = e.drv->last_error(e.dev);
  cr_expect(strstr(msg, "operation 1") && strstr(msg, MDT_FAIL_MESSAGE), "last_error: %s", msg);
  cr_expect_eq(sh[0].rank, 0u);
  cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_GENERAL_FAILURE, "the output was never initialized");
  mdt_req_fini(&r);
  mdt_free(&e, t);
  mdt_release(&e, Q);
}

/* ---- timeouts (latency makes an unfinished event likely, never required) ---- */

Test(async_slow, zero_timeout_wait_leaves_event_valid) {
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  md_status st = wait_ev(ev, 0, sh, 1, &tm);
  cr_assert(st == MD_NONE || st == MD_MISSED_DEADLINE_TRANSIENT, "wait(0): status %d", (int)st);
  if (st == MD_MISSED_DEADLINE_TRANSIENT) {
    cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "the event died with the timeout: %s",
                 e.drv->last_error(e.dev));
  } else {
    cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  }
  expect_sum_in(&r, 0);
  mdt_req_fini(&r);
}

Test(async_slow, polling_with_zero_timeout_ends_in_the_result) {
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  md_status st;
  unsigned long polls = 0;
  while ((st = wait_ev(ev, 0, sh, 1, &tm)) == MD_MISSED_DEADLINE_TRANSIENT) {
    cr_assert_lt(++polls, 100000000ul, "the execution never finished");
  }
  cr_expect_eq(st, MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  expect_sum_in(&r, 0);
  cr_expect_eq(wait_ev(ev, 0, sh, 1, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
}

/* ---- releasing objects an execution uses (SPEC section 6) ---- */

Test(async_slow, free_buffer_while_execution_reads_it) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(mdt_copy_to(&e, e.client, t, NULL, B23), MD_INVALID_ARGUMENT, "the token lived on");
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_sum_in(&r, 0);
  mdt_req_fini(&r);
}

Test(async_slow, free_buffer_while_execution_writes_it) {
  md_token t = mdt_alloc(&e, P, true, 0, 0, NULL);
  mdt_request r;
  token_request(&r, t);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, t), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
}

Test(async_slow, release_prepared_model_while_execution_runs) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(Q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_release(&e, Q);
  mdt_request r2;
  plain_request(&r2);
  md_handle ev2;
  cr_expect_eq(start(Q, &r2, &ev2), MD_INVALID_ARGUMENT, "released prepared model still runs");
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_sum_in(&r, 0);
  mdt_req_fini(&r);
  mdt_req_fini(&r2);
}

Test(async_slow, close_client_with_execution_in_flight) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle Q = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, Q, true, 0, 0, NULL, &t), MD_NONE);
  mdt_request r;
  token_request(&r, t);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, c2, Q, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_leak_report lr;
  memset(&lr, 0xee, sizeof lr);
  mdt_close_client(&e, c2, &lr);
  cr_expect_eq(lr.buffers, 1u);
  cr_expect_eq(lr.prepared_models, 1u);
  cr_expect_eq(lr.events, 1u);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, c2, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  /* The device still works for everyone else. */
  mdt_request r2;
  plain_request(&r2);
  cr_expect_eq(mdt_exec(&e, P, &r2, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r2);
  mdt_req_fini(&r);
}

/* ---- small executions run in the calling thread (docs/execution.md) ---- */

Test(async_inline, a_small_execution_is_finished_when_execute_async_returns) {
  mdt_request r;
  plain_request(&r);
  md_handle ev;
  cr_assert_eq(start(P, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, 0, sh, 1, &tm), MD_NONE, "not finished at once");
  cr_expect_eq(sh[0].rank, 2);
  cr_expect_neq(tm.in_driver_ns, UINT64_MAX);
  expect_sum_in(&r, 0);
  cr_expect_eq(wait_ev(ev, 0, sh, 1, &tm), MD_INVALID_ARGUMENT, "consumed by its wait");
  mdt_req_fini(&r);
}

Test(async_inline, its_failure_comes_from_wait_event_and_leaves_last_error_alone) {
  mdt_register_test_kernels();
  static const uint32_t d[1] = {4};
  mdt_model b;
  md_handle q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.fail", MD_TENSOR_FLOAT32, 0, 0, 1, d));
  float x[4] = {1, 2, 3, 4};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, 16, 0, NULL);
  mdt_req_out_pool(&r, 16, 0, NULL);
  md_handle ev;
  /* A user kernel may block: it is never run in the calling thread. The failure comes back from
   * the wait either way. */
  cr_assert_eq(start(q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_GENERAL_FAILURE);
  cr_expect(strstr(e.drv->last_error(e.dev), MDT_FAIL_MESSAGE), "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  /* A built-in one that fails while running inline: execute_async still says NONE, its last
   * error untouched. */
  static const uint32_t d03[2] = {0, 3};
  mdt_model b2;
  md_handle dyn = mdt_prepare(&e, mdt_add_model(&b2, 2, d03, 2, d03, 2, d03, 0));
  mdt_request r2;
  mdt_req_init(&r2);
  static const uint32_t d13[2] = {1, 3}, d23[2] = {2, 3};
  mdt_req_in_data(&r2, A, 12, 2, d13);
  mdt_req_in_data(&r2, B, 24, 2, d23);   /* [1,3] + [2,3] broadcasts to [2,3] */
  mdt_req_out_pool(&r2, 12, 0, NULL);     /* too small for it: OUTPUT_INSUFFICIENT_SIZE */
  md_memory bad = mdt_ashmem(-1, 8);
  md_handle none;
  cr_assert_eq(e.drv->register_memory(e.dev, e.client, &bad, &none), MD_INVALID_ARGUMENT);
  char before[512];
  snprintf(before, sizeof before, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(start(dyn, &r2, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_str_eq(e.drv->last_error(e.dev), before, "execute_async changed last_error");
  cr_expect_eq(wait_ev(ev, 0, sh, 1, &tm), MD_OUTPUT_INSUFFICIENT_SIZE);
  cr_expect_eq(sh[0].is_sufficient, 0);
  mdt_req_fini(&r2);
  mdt_release(&e, dyn);
  mdt_release(&e, q);
}

/* FULLY_CONNECTED [1,k] x [units,k] + bias: 4 x k x units bytes of multiply-adds for 4 x k bytes
 * in and 4 x units out. Weights 1/8, bias 1, input 1, 2, ..., so out[n] = k(k+1)/16 + 1. */
typedef struct fc_case {
  uint32_t d_in[2], d_w[2], d_b[1], d_out[2];
  md_operand ops[5];
  uint32_t op_in[4], op_out[1], m_in[1];
  md_operation op;
  md_model m;
  float *values;   /* weights, bias, then the INT32 activation (0) */
} fc_case;

static md_handle fc_prepare(fc_case *f, uint32_t k, uint32_t units) {
  memset(f, 0, sizeof *f);
  f->values = calloc((size_t)units * k + units + 1, sizeof(float));
  cr_assert(f->values);
  for (size_t i = 0; i < (size_t)units * k; i++) f->values[i] = 0.125f;
  for (uint32_t i = 0; i < units; i++) f->values[(size_t)units * k + i] = 1.0f;
  uint64_t wb = (uint64_t)units * k * 4, bb = (uint64_t)units * 4;
  f->d_in[0] = f->d_out[0] = 1;
  f->d_in[1] = f->d_w[1] = k;
  f->d_w[0] = f->d_b[0] = f->d_out[1] = units;
  f->ops[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_in, .lifetime = MD_SUBGRAPH_INPUT};
  f->ops[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_w, .lifetime = MD_CONSTANT_COPY,
                           .offset = 0, .length = wb};
  f->ops[2] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = f->d_b, .lifetime = MD_CONSTANT_COPY,
                           .offset = wb, .length = bb};
  f->ops[3] = (md_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = wb + bb, .length = 4};
  f->ops[4] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_out, .lifetime = MD_SUBGRAPH_OUTPUT};
  for (uint32_t i = 0; i < 4; i++) f->op_in[i] = i;
  f->op_out[0] = 4;
  f->op = (md_operation){.type = MD_OP_FULLY_CONNECTED, .n_inputs = 4, .inputs = f->op_in, .n_outputs = 1,
                         .outputs = f->op_out};
  f->m = (md_model){.n_operands = 5, .operands = f->ops, .n_operations = 1, .operations = &f->op, .n_inputs = 1,
                    .inputs = f->m_in, .n_outputs = 1, .outputs = f->op_out,
                    .operand_values = (const uint8_t *)f->values, .operand_values_size = wb + bb + 4};
  return mdt_prepare(&e, &f->m);
}

/* Prepares the FC case, runs one execute_async of it and its wait (checking the result),
 * releases it; returns the queued commands the sim ran for it (0: it ran in the calling thread). */
static uint64_t fc_queued_commands(uint32_t k, uint32_t units) {
  fc_case f;
  md_handle q = fc_prepare(&f, k, units);
  float *x = calloc(k, sizeof *x);
  cr_assert(x);
  for (uint32_t i = 0; i < k; i++) x[i] = (float)(i + 1);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, 4ull * k, 0, NULL);
  mdt_req_out_pool(&r, 4ull * units, 0, NULL);
  md_sim_stats before, after;
  md_sim_stats_get(e.dev->bk, &before);
  md_handle ev;
  cr_assert_eq(start(q, &r, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(wait_ev(ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_sim_stats_get(e.dev->bk, &after);
  float *y = calloc(units, sizeof *y);
  cr_assert(y);
  mdt_req_read_out(&r, 0, y, 4ull * units);
  float want = (float)k * (float)(k + 1) / 16.0f + 1.0f;
  for (uint32_t n = 0; n < units; n++) cr_assert_eq(y[n], want, "out[%u] = %g, want %g", n, (double)y[n], (double)want);
  free(x);
  free(y);
  mdt_req_fini(&r);
  mdt_release(&e, q);
  free(f.values);
  return after.commands_run - before.commands_run;
}

Test(async_inline, a_model_that_computes_far_more_than_it_moves_runs_on_the_device) {
  /* 256 B in and 4 KiB out, but 64 K multiply-adds (256 KiB at 4 bytes each, over the 64 KiB
   * an inline execution may cost): execute_async queues it, so a second one issued meanwhile
   * runs beside it instead of after it in the caller (bench: async_throughput_2_streams). */
  cr_expect_gt(fc_queued_commands(64, 1024), 0, "ran in the calling thread");
}

Test(async_inline, a_model_that_computes_little_still_runs_in_the_caller) {
  /* 16 multiply-adds: as cheap as its copies, run before execute_async returns. */
  cr_expect_eq(fc_queued_commands(4, 4), 0, "queued on the device");
}
