/* test_unit_exec_request.c - white-box tests of exec_request.c (validating a request and taking
 * what its execution uses): every reference a request takes (client, prepared model, tokens,
 * their storage, registered pools, mappings) is dropped whether the execution runs or fails at
 * any step of md__exec_create, seen through the device memory the backend still holds once
 * everything is freed; requests with many pools (the per-pool arrays of one allocation, the
 * pool names made once for the first 64); and the messages that name a refused pool. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "device_int.h"
#include "error.h"
#include "exec_int.h"
#include "md/backend.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3};
static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
static void teardown(void) { mdt_env_close(&e, 1); }
TestSuite(exec_request, .init = setup, .fini = teardown);

static uint64_t bytes_live(void) {
  md_backend_stats s;
  memset(&s, 0, sizeof s);
  e.dev->be->stats(e.dev->bk, &s);
  return s.bytes_live;
}

static md_status wait_for(md_handle client, md_handle ev) {
  md_output_shape sh[4];
  md_timing t;
  return e.drv->wait_event(e.dev, client, ev, UINT64_MAX, sh, 4, &t);
}

/* Runs the request through execute, then execute_async (+ its wait when it makes an event),
 * expecting `want` from both (from the wait when execute_async accepts it). */
static void run_both(md_handle client, md_handle prepared, mdt_request *r, md_status want) {
  md_output_shape sh[8];
  md_timing t;
  md_status st = e.drv->execute(e.dev, client, prepared, mdt_req(r), sh, r->n_out, &t);
  cr_expect_eq(st, want, "execute: %d, want %d: %s", st, want, e.drv->last_error(e.dev));
  md_handle ev = 0;
  st = e.drv->execute_async(e.dev, client, prepared, mdt_req(r), &ev);
  if (st == MD_NONE) st = wait_for(client, ev);
  cr_expect_eq(st, want, "execute_async: %d, want %d: %s", st, want, e.drv->last_error(e.dev));
}

/* A second client of the env's device, with its own prepared ADD and its buffers: in0, in1
 * (initialized with A, B), out (an output), unset (an input never written). */
typedef struct side {
  md_handle client, p;
  md_token in0, in1, out, unset;
} side;

static void side_open(side *s) {
  s->client = mdt_open_client(&e);
  mdt_model b;
  s->p = mdt_prepare_for(&e, s->client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token *ts[4] = {&s->in0, &s->in1, &s->out, &s->unset};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(mdt_try_alloc(&e, s->client, s->p, i == 2, i == 1 || i == 3 ? 1 : 0, 0, NULL, ts[i]), MD_NONE, "%s",
                 e.drv->last_error(e.dev));
  }
  /* in0 may also be input 1 (a token read twice by one request). */
  md_token t0 = s->in0;
  md_buffer_desc desc = {0, NULL};
  md_buffer_role roles[2] = {{0, 0, 1.0f}, {0, 1, 1.0f}};
  cr_assert_eq(e.drv->allocate(e.dev, s->client, &desc, &s->p, 1, roles, 2, NULL, 0, &s->in0), MD_NONE, "%s",
               e.drv->last_error(e.dev));
  cr_assert_eq(e.drv->free_buffer(e.dev, s->client, t0), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, s->client, s->in0, A, 24, 0, NULL), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, s->client, s->in1, B, 24, 0, NULL), MD_NONE);
}

/* Frees what side_open made and closes the client: everything it held is gone, and the device
 * holds the bytes it held before. */
static void side_close(side *s, uint64_t before) {
  md_token ts[4] = {s->in0, s->in1, s->out, s->unset};
  for (int i = 0; i < 4; i++) cr_expect_eq(e.drv->free_buffer(e.dev, s->client, ts[i]), MD_NONE);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, s->client, s->p), MD_NONE);
  md_leak_report leaks;
  memset(&leaks, 0xff, sizeof leaks);
  cr_assert_eq(e.drv->close_client(e.dev, s->client, &leaks), MD_NONE);
  cr_expect_eq(leaks.buffers, 0u);
  cr_expect_eq(leaks.prepared_models, 0u);
  cr_expect_eq(leaks.events, 0u);
  cr_expect_eq(bytes_live(), before, "device bytes live %llu, %llu before the client",
               (unsigned long long)bytes_live(), (unsigned long long)before);
}

Test(exec_request, successful_executions_hold_nothing_afterwards) {
  uint64_t before = bytes_live();
  side s;
  side_open(&s);
  for (int k = 0; k < 3; k++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_token(&r, s.in0, 0, NULL);
    mdt_req_in_token(&r, s.in1, 0, NULL);
    mdt_req_out_token(&r, s.out, 0, NULL);
    run_both(s.client, s.p, &r, MD_NONE);
    mdt_req_fini(&r);
    /* One token read as both inputs, through the same pool. */
    mdt_req_init(&r);
    uint32_t pool = mdt_req_pool_token(&r, s.in0);
    mdt_req_in_arg(&r, pool, 0, 0, 0, NULL);
    mdt_req_in_arg(&r, pool, 0, 0, 0, NULL);
    mdt_req_out_pool(&r, 24, 0, NULL);
    run_both(s.client, s.p, &r, MD_NONE);
    float out[6];
    mdt_req_read_out(&r, 0, out, 24);
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 2 * A[i]);
    mdt_req_fini(&r);
  }
  side_close(&s, before);
}

/* Each step of md__exec_create refusing after the steps before it took references. */
Test(exec_request, refused_requests_hold_nothing_afterwards) {
  uint64_t before = bytes_live();
  side s;
  side_open(&s);
  mdt_request r;
  /* take_pools: the third pool is a dead token, after two live ones. */
  md_token dead;
  cr_assert_eq(mdt_try_alloc(&e, s.client, s.p, false, 0, 0, NULL, &dead), MD_NONE);
  cr_assert_eq(e.drv->free_buffer(e.dev, s.client, dead), MD_NONE);
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  mdt_req_out_token(&r, dead, 0, NULL);
  run_both(s.client, s.p, &r, MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  /* check_args: the output's role is wrong (an input's token), after the inputs' checks. */
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  mdt_req_out_token(&r, s.unset, 0, NULL);
  run_both(s.client, s.p, &r, MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  /* check_args: the output token is also an input. */
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  uint32_t po = mdt_req_pool_token(&r, s.out);
  mdt_req_in_arg(&r, po, 0, 0, 0, NULL);
  mdt_req_out_arg(&r, po, 0, 0, 0, NULL);
  run_both(s.client, s.p, &r, MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  /* snapshot_inputs: input 1 never written, after input 0's storage was taken. */
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  mdt_req_in_token(&r, s.unset, 0, NULL);
  mdt_req_out_token(&r, s.out, 0, NULL);
  run_both(s.client, s.p, &r, MD_GENERAL_FAILURE);
  mdt_req_fini(&r);
  /* map_pools: a pool that passes validation but cannot be mapped, after every token input's
   * storage was taken. */
  int bad = mdt_unmappable_fd(24);
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  uint32_t pb = mdt_req_pool_mem(&r, mdt_ashmem(bad, 24));
  mdt_req_out_arg(&r, pb, 0, 24, 0, NULL);
  run_both(s.client, s.p, &r, MD_GENERAL_FAILURE);
  mdt_req_fini(&r);
  mdt_close_fd(bad);
  /* A failed execution left out uninitialized: written again, it is an input again. */
  mdt_req_init(&r);
  mdt_req_in_token(&r, s.in0, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  mdt_req_out_token(&r, s.out, 0, NULL);
  run_both(s.client, s.p, &r, MD_NONE);
  mdt_req_fini(&r);
  side_close(&s, before);
}

/* A registered pool used by executions holds nothing once unregistered (SPEC 9). */
Test(exec_request, registered_pools_hold_nothing_afterwards) {
  if (e.drv->struct_size < offsetof(md_driver, unregister_memory) + sizeof(void *)) return;
  uint64_t before = bytes_live();
  side s;
  side_open(&s);
  int fa = mdt_memfd(A, 24), fo = mdt_memfd(NULL, 24);
  md_handle ra = mdt_register(&e, s.client, mdt_ashmem(fa, 24)), ro = mdt_register(&e, s.client, mdt_ashmem(fo, 24));
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pa = mdt_req_pool_registered(&r, ra);
  mdt_req_in_arg(&r, pa, 0, 24, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_registered(&r, ro), 0, 24, 0, NULL);
  run_both(s.client, s.p, &r, MD_NONE);
  float out[6];
  mdt_read_fd(fo, out, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
  /* Refused after the registered pools were taken: the output's length is too long. */
  mdt_req_init(&r);
  mdt_req_in_arg(&r, mdt_req_pool_registered(&r, ra), 0, 24, 0, NULL);
  mdt_req_in_token(&r, s.in1, 0, NULL);
  mdt_req_out_arg(&r, mdt_req_pool_registered(&r, ro), 0, 28, 0, NULL);
  run_both(s.client, s.p, &r, MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  cr_expect_eq(e.drv->unregister_memory(e.dev, s.client, ra), MD_NONE);
  cr_expect_eq(e.drv->unregister_memory(e.dev, s.client, ro), MD_NONE);
  close(fa);
  close(fo);
  side_close(&s, before);
}

/* ---- many pools ---- */

/* 70 pools: the two inputs and the output on the last three (past the 64 named once), the
 * others unused: memories, and live tokens of this client in any role. */
static void many_pools(md_handle client, md_handle p, md_token in0, md_token any, bool tokens_in) {
  mdt_request r;
  mdt_req_init(&r);
  int fds[70];
  md_request_pool pools[70];
  md_request_arg in[2], out[1];
  memset(pools, 0, sizeof pools);
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  for (int i = 0; i < 70; i++) {
    fds[i] = mdt_memfd(i == 67 ? (const void *)A : i == 68 ? (const void *)B : NULL, 24);
    pools[i].memory = mdt_ashmem(fds[i], 24);
    if (i % 5 == 1) {
      pools[i].is_token = 1;
      pools[i].token = any;
    }
  }
  if (tokens_in) {
    pools[67].is_token = 1;
    pools[67].token = in0;
  } else {
    in[0].length = 24;
  }
  in[0].pool = 67;
  in[1].pool = 68;
  in[1].length = 24;
  out[0].pool = 69;
  out[0].length = 24;
  md_request req = {.n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = out, .n_pools = 70, .pools = pools};
  md_output_shape sh[1];
  md_timing t;
  cr_assert_eq(e.drv->execute(e.dev, client, p, &req, sh, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  float o[6];
  mdt_read_fd(fds[69], o, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(o[i], A[i] + B[i]);
  cr_expect_eq(sh[0].rank, 2u);
  /* The same through execute_async. */
  memset(o, 0, sizeof o);
  cr_assert_eq(pwrite(fds[69], o, 24, 0), 24);
  md_handle ev;
  cr_assert_eq(e.drv->execute_async(e.dev, client, p, &req, &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(wait_for(client, ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_read_fd(fds[69], o, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(o[i], A[i] + B[i]);
  /* Pool 66 (unused) invalid: the refusal names it; then pool 5 (one of the first 64). */
  for (int k = 0; k < 2; k++) {
    uint32_t bad = k ? 5 : 66;
    md_request_pool keep = pools[bad];
    pools[bad].is_token = 0;
    pools[bad].memory.size = 0;
    char want[64];
    snprintf(want, sizeof want, "execute: request pool %u", bad);
    cr_expect_eq(e.drv->execute(e.dev, client, p, &req, sh, 1, &t), MD_INVALID_ARGUMENT);
    cr_expect(strstr(e.drv->last_error(e.dev), want), "'%s' does not name '%s'", e.drv->last_error(e.dev), want);
    snprintf(want, sizeof want, "execute_async: request pool %u", bad);
    cr_expect_eq(e.drv->execute_async(e.dev, client, p, &req, &ev), MD_INVALID_ARGUMENT);
    cr_expect(strstr(e.drv->last_error(e.dev), want), "'%s' does not name '%s'", e.drv->last_error(e.dev), want);
    pools[bad] = keep;
  }
  /* A dead token in pool 64: refused, the pool named. */
  md_token dead;
  cr_assert_eq(mdt_try_alloc(&e, client, p, false, 0, 0, NULL, &dead), MD_NONE);
  cr_assert_eq(e.drv->free_buffer(e.dev, client, dead), MD_NONE);
  md_request_pool keep = pools[64];
  pools[64].is_token = 1;
  pools[64].token = dead;
  cr_expect_eq(e.drv->execute(e.dev, client, p, &req, sh, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool 64"), "%s", e.drv->last_error(e.dev));
  pools[64] = keep;
  for (int i = 0; i < 70; i++) close(fds[i]);
  mdt_req_fini(&r);
}

Test(exec_request, seventy_pools_with_unused_memories_and_tokens) {
  md_token in0 = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, in0, A, 24, 0, NULL), MD_NONE);
  md_token other = mdt_alloc(&e, P, true, 0, 0, NULL); /* never written */
  many_pools(e.client, P, in0, other, false);
  many_pools(e.client, P, in0, other, true);
  mdt_free(&e, in0);
  mdt_free(&e, other);
}

Test(exec_request, seventy_pools_hold_nothing_afterwards) {
  uint64_t before = bytes_live();
  side s;
  side_open(&s);
  many_pools(s.client, s.p, s.in0, s.unset, true);
  side_close(&s, before);
}

/* ---- messages that name what was refused (SPEC 8.11: advice; these are the reference's) ---- */

Test(exec_request, a_refused_token_pool_is_named) {
  md_token dead = mdt_alloc(&e, P, false, 0, 0, NULL);
  mdt_free(&e, dead);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_out_token(&r, dead, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool 2: token"), "%s", e.drv->last_error(e.dev));
  md_handle ev;
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, P, mdt_req(&r), &ev), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "pool 2: token"), "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
}

Test(exec_request, exec_create_refuses_a_null_request_and_holds_nothing) {
  md__exec *x = (md__exec *)1;
  cr_assert_eq(md__exec_create(e.dev, "execute", e.client, P, NULL, &x), MD_INVALID_ARGUMENT);
  cr_expect_null(x);
  cr_expect(strstr(md__last_error(), "execute: request is NULL"), "%s", md__last_error());
  x = (md__exec *)1;
  cr_assert_eq(md__exec_create(e.dev, "execute_async", e.client, P, NULL, &x), MD_INVALID_ARGUMENT);
  cr_expect_null(x);
  /* A valid request makes an execution that runs once and is freed. */
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  cr_assert_eq(md__exec_create(e.dev, "execute_async", e.client, P, mdt_req(&r), &x), MD_NONE, "%s", md__last_error());
  cr_assert_not_null(x);
  cr_expect_eq(x->n_in, 2u);
  cr_expect_eq(x->n_out, 1u);
  cr_expect_eq(x->n_pools, 3u);
  cr_expect(!x->cached, "an asynchronous execution holds references");
  cr_expect_null(x->req, "the caller's request is not kept");
  for (uint32_t i = 0; i < 2; i++) {
    cr_expect_eq(x->in[i].kind, ARG_POOL);
    cr_expect_eq(x->in[i].pool, i);
    cr_expect_eq(x->in[i].length, 24u);
    cr_expect_eq(x->in[i].rank, 2u);
  }
  cr_expect_eq(x->out[0].kind, ARG_POOL);
  cr_expect_eq(x->out[0].pool, 2u);
  cr_expect_eq(x->inject, MD_NONE);
  cr_expect(!x->stall);
  cr_assert_eq(md__exec_run(x, false), MD_NONE, "%s", md__last_error());
  md_output_shape sh[2];
  md_timing t;
  md__exec_results(x, MD_NONE, sh, 2, &t);
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[1].rank, 0u);
  md__exec_free(x);
  float out[6];
  mdt_req_read_out(&r, 0, out, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
}

/* ---- what a trace cannot write: pool kinds out of range, NULL arrays with a count ---- */

Test(exec_request, unknown_pool_kinds_and_null_arrays_are_invalid) {
  md_token out = mdt_alloc(&e, P, true, 0, 0, NULL);
  md_token in0 = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, in0, A, 24, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, in0, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&e, P, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  md_request req = *mdt_req(&r);
  md_request_pool pools[3];
  memcpy(pools, req.pools, sizeof pools);
  req.pools = pools;
  static const uint32_t kinds[3] = {3, 255, 0x80000000u};
  for (int k = 0; k < 3; k++) {
    pools[1].is_token = kinds[k];
    md_handle ev;
    cr_expect_eq(e.drv->execute(e.dev, e.client, P, &req, sh, 1, &t), MD_INVALID_ARGUMENT, "is_token %u", kinds[k]);
    cr_expect(strstr(e.drv->last_error(e.dev), "is_token"), "%s", e.drv->last_error(e.dev));
    cr_expect_eq(e.drv->execute_async(e.dev, e.client, P, &req, &ev), MD_INVALID_ARGUMENT, "is_token %u", kinds[k]);
  }
  pools[1].is_token = 0;
  /* NULL arrays with a non-zero count. */
  md_request bad = req;
  bad.inputs = NULL;
  cr_expect_eq(e.drv->execute(e.dev, e.client, P, &bad, sh, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "inputs is NULL"), "%s", e.drv->last_error(e.dev));
  bad = req;
  bad.outputs = NULL;
  cr_expect_eq(e.drv->execute(e.dev, e.client, P, &bad, sh, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "outputs is NULL"), "%s", e.drv->last_error(e.dev));
  bad = req;
  bad.pools = NULL;
  cr_expect_eq(e.drv->execute(e.dev, e.client, P, &bad, sh, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "pools is NULL"), "%s", e.drv->last_error(e.dev));
  /* An argument with a rank and NULL dims. */
  md_request_arg in[2];
  memcpy(in, req.inputs, sizeof in);
  in[1].rank = 2;
  in[1].dims = NULL;
  bad = req;
  bad.inputs = in;
  cr_expect_eq(e.drv->execute(e.dev, e.client, P, &bad, sh, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "NULL dims"), "%s", e.drv->last_error(e.dev));
  /* The output token was resolved before each refusal past take_pools: uninitialized. */
  float o[6];
  cr_expect_eq(mdt_copy_to(&e, e.client, out, o, 24), MD_GENERAL_FAILURE);
  /* The valid request still runs. */
  cr_assert_eq(e.drv->execute(e.dev, e.client, P, &req, sh, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(mdt_copy_to(&e, e.client, out, o, 24), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(o[i], A[i] + B[i]);
  mdt_req_fini(&r);
  mdt_free(&e, in0);
  mdt_free(&e, out);
}
