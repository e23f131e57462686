/* test_spec_tokens.c - black-box rules of SPEC section 5 (clients, tokens, security): tokens
 * and handles bound to their client, dead after release/free/close, not guessable, slots
 * reused without resurrecting old values; close_client's leak report; device memory never
 * showing an earlier buffer's bytes. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3};
#define B23 24u

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
static mdt_request areq[4];
static int n_areq;
static void teardown(void) {
  if (P) e.drv->release_prepared_model(e.dev, e.client, P);
  mdt_env_close(&e, 0);
  for (int i = 0; i < n_areq; i++) mdt_req_fini(&areq[i]);
}
TestSuite(tokens, .init = setup, .fini = teardown);
TestSuite(handles, .init = setup, .fini = teardown);
TestSuite(leaks, .init = setup, .fini = teardown);
TestSuite(security, .init = setup, .fini = teardown);

static float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static uint64_t rng_state;
static uint64_t rng(void) { /* splitmix64: reproducible forged values */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static md_token ready(void) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  return t;
}

static md_status exec_with_in0(md_handle client, md_handle prep, md_token t) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, t, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  md_status st = e.drv->execute(e.dev, client, prep, mdt_req(&r), sh, 1, &tm);
  mdt_req_fini(&r);
  return st;
}

/* Every buffer entry point rejects t for client c with INVALID_ARGUMENT. */
static void expect_token_dead(md_handle c, md_token t, const char *why) {
  int fd = mdt_memfd(A, B23);
  md_memory m = mdt_ashmem(fd, B23);
  cr_expect_eq(e.drv->copy_to(e.dev, c, t, &m), MD_INVALID_ARGUMENT, "copy_to: %s", why);
  cr_expect_eq(e.drv->copy_from(e.dev, c, t, &m, 0, NULL), MD_INVALID_ARGUMENT, "copy_from: %s", why);
  cr_expect_eq(exec_with_in0(c, P, t), MD_INVALID_ARGUMENT, "execute: %s", why);
  cr_expect_eq(e.drv->free_buffer(e.dev, c, t), MD_INVALID_ARGUMENT, "free_buffer: %s", why);
  close(fd);
}

static void expect_holds_A(md_token t) {
  float out[6];
  cr_expect_eq(mdt_copy_to(&e, e.client, t, out, B23), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect(memcmp(out, A, B23) == 0, "buffer content changed");
}

/* ---- tokens ---- */

Test(tokens, zero_token_rejected) {
  expect_token_dead(e.client, 0, "token 0");
}

Test(tokens, forged_random_tokens_rejected) {
  md_token live = ready();
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  rng_state = 0x6d64635f746f6b31ull;
  uint32_t accepted = 0;
  for (int i = 0; i < 10000; i++) {
    md_token f = rng();
    if (f == live) continue;
    md_status st = e.drv->copy_to(e.dev, e.client, f, &m);
    if (st != MD_INVALID_ARGUMENT) {
      accepted++;
      cr_expect_eq(st, MD_INVALID_ARGUMENT, "forged token 0x%016" PRIx64 " gave status %d", f, (int)st);
    }
  }
  cr_expect_eq(accepted, 0u);
  close(fd);
  mdt_free(&e, live);
}

Test(tokens, near_miss_tokens_rejected) {
  /* Values one bit, one step, or one slot away from a live token. */
  md_token live = ready();
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  uint32_t accepted = 0;
  for (int bit = 0; bit < 64; bit++)
    accepted += e.drv->copy_to(e.dev, e.client, live ^ (1ull << bit), &m) != MD_INVALID_ARGUMENT;
  cr_expect_eq(accepted, 0u, "%u one-bit flips accepted", accepted);
  accepted = 0;
  for (int d = 1; d <= 16; d++) {
    accepted += e.drv->copy_to(e.dev, e.client, live + (uint64_t)d, &m) != MD_INVALID_ARGUMENT;
    accepted += e.drv->copy_to(e.dev, e.client, live - (uint64_t)d, &m) != MD_INVALID_ARGUMENT;
  }
  cr_expect_eq(accepted, 0u, "%u neighbours accepted", accepted);
  accepted = 0;
  for (uint64_t lo = 0; lo < 4096; lo++) {
    md_token f = (live & ~0xfffull) | lo;
    if (f != live) accepted += e.drv->copy_to(e.dev, e.client, f, &m) != MD_INVALID_ARGUMENT;
  }
  cr_expect_eq(accepted, 0u, "%u other low bits accepted", accepted);
  close(fd);
  mdt_free(&e, live);
}

Test(tokens, freed_token_rejected) {
  md_token t = ready();
  mdt_free(&e, t);
  expect_token_dead(e.client, t, "after free_buffer");
}

Test(tokens, double_free_rejected) {
  md_token t = ready();
  mdt_free(&e, t);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, t), MD_INVALID_ARGUMENT);
}

Test(tokens, reused_slot_rejects_old_token) {
  md_token dead[200];
  md_token t = ready();
  for (int i = 0; i < 200; i++) {
    dead[i] = t;
    mdt_free(&e, t);
    t = ready(); /* likely the slot just freed */
    cr_assert_neq(t, dead[i], "a freed token was issued again");
    int fd = mdt_memfd(NULL, B23);
    md_memory m = mdt_ashmem(fd, B23);
    cr_expect_eq(e.drv->copy_to(e.dev, e.client, dead[i], &m), MD_INVALID_ARGUMENT, "round %d", i);
    close(fd);
  }
  for (int i = 0; i < 200; i++) {
    cr_expect_neq(t, dead[i]);
    cr_expect_eq(e.drv->free_buffer(e.dev, e.client, dead[i]), MD_INVALID_ARGUMENT, "old token %d", i);
  }
  expect_holds_A(t);
  mdt_free(&e, t);
}

Test(tokens, other_clients_token_rejected) {
  md_handle c2 = mdt_open_client(&e);
  md_token t = ready();
  expect_token_dead(c2, t, "another client's token");
  expect_holds_A(t); /* and nothing happened to it */
  mdt_free(&e, t);
  mdt_close_client(&e, c2, NULL);
}

Test(tokens, other_clients_failed_copy_from_leaves_buffer_initialized) {
  /* A copy_from that fails on its size uninitializes the buffer, but only for its owner:
   * another client's call never reaches it. */
  md_handle c2 = mdt_open_client(&e);
  md_token t = ready();
  cr_expect_eq(mdt_copy_from(&e, c2, t, B, 20, 0, NULL), MD_INVALID_ARGUMENT);
  expect_holds_A(t);
  mdt_free(&e, t);
  mdt_close_client(&e, c2, NULL);
}

Test(tokens, tokens_dead_after_close_client) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, c2, t, A, B23, 0, NULL), MD_NONE);
  md_leak_report lr;
  mdt_close_client(&e, c2, &lr);
  cr_expect_eq(mdt_copy_to(&e, c2, t, NULL, B23), MD_INVALID_ARGUMENT, "closed client");
  expect_token_dead(e.client, t, "token of a closed client");
}

Test(tokens, message_names_the_token) {
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  cr_assert_eq(e.drv->copy_to(e.dev, e.client, 0x1234567890abcdefull, &m), MD_INVALID_ARGUMENT);
  const char *msg = e.drv->last_error(e.dev);
  cr_assert_not_null(msg);
  cr_expect(strstr(msg, "token") != NULL, "message: %s", msg);
  cr_expect(strstr(msg, "1234567890abcdef") != NULL || strstr(msg, "1234567890ABCDEF") != NULL,
            "message does not name the value: %s", msg);
  close(fd);
}

/* ---- other handles ---- */

Test(handles, zero_client_rejected) {
  md_handle p = 0;
  mdt_model b;
  md_token t = 0;
  cr_expect_eq(e.drv->prepare_model(e.dev, 0, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &p), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_try_alloc(&e, 0, P, false, 0, 0, NULL, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->close_client(e.dev, 0, NULL), MD_INVALID_ARGUMENT);
}

Test(handles, forged_clients_rejected) {
  rng_state = 0x636c69656e747321ull;
  md_leak_report lr;
  uint32_t accepted = 0;
  for (int i = 0; i < 2000; i++) {
    md_handle c = rng();
    if (c != e.client) accepted += e.drv->close_client(e.dev, c, &lr) != MD_INVALID_ARGUMENT;
  }
  cr_expect_eq(accepted, 0u, "%u forged clients accepted", accepted);
  md_token t = 0;
  cr_expect_eq(mdt_try_alloc(&e, e.client ^ 1u, P, false, 0, 0, NULL, &t), MD_INVALID_ARGUMENT);
}

Test(handles, closed_client_rejected) {
  md_handle c2 = mdt_open_client(&e);
  mdt_close_client(&e, c2, NULL);
  md_handle p = 0;
  mdt_model b;
  cr_expect_eq(e.drv->prepare_model(e.dev, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &p), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->close_client(e.dev, c2, NULL), MD_INVALID_ARGUMENT, "double close_client");
}

Test(handles, closed_client_slot_reuse_rejects_old_handle) {
  md_handle old = mdt_open_client(&e);
  mdt_close_client(&e, old, NULL);
  md_handle fresh = mdt_open_client(&e);
  cr_expect_neq(fresh, old);
  md_handle p = 0;
  mdt_model b;
  cr_expect_eq(e.drv->prepare_model(e.dev, old, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &p), MD_INVALID_ARGUMENT);
  mdt_close_client(&e, fresh, NULL);
}

static md_status exec_plain(md_handle client, md_handle prep) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  md_status st = e.drv->execute(e.dev, client, prep, mdt_req(&r), sh, 1, &tm);
  mdt_req_fini(&r);
  return st;
}

Test(handles, zero_prepared_rejected) {
  cr_expect_eq(exec_plain(e.client, 0), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, e.client, 0), MD_INVALID_ARGUMENT);
}

Test(handles, forged_prepared_rejected) {
  rng_state = 0x7072657061726564ull;
  uint32_t accepted = 0;
  for (int i = 0; i < 2000; i++) {
    md_handle f = rng();
    if (f != P) accepted += e.drv->release_prepared_model(e.dev, e.client, f) != MD_INVALID_ARGUMENT;
  }
  cr_expect_eq(accepted, 0u, "%u forged prepared handles accepted", accepted);
  for (int bit = 0; bit < 64; bit++)
    cr_expect_eq(exec_plain(e.client, P ^ (1ull << bit)), MD_INVALID_ARGUMENT, "bit %d", bit);
  cr_expect_eq(exec_plain(e.client, P), MD_NONE, "%s", e.drv->last_error(e.dev));
}

Test(handles, released_prepared_rejected) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  cr_assert_eq(exec_plain(e.client, Q), MD_NONE);
  mdt_release(&e, Q);
  cr_expect_eq(exec_plain(e.client, Q), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, e.client, Q), MD_INVALID_ARGUMENT, "double release");
}

Test(handles, other_clients_prepared_rejected) {
  md_handle c2 = mdt_open_client(&e);
  cr_expect_eq(exec_plain(c2, P), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, c2, P), MD_INVALID_ARGUMENT);
  cr_expect_eq(exec_plain(e.client, P), MD_NONE, "the owner lost it: %s", e.drv->last_error(e.dev));
  mdt_close_client(&e, c2, NULL);
}

Test(handles, handle_kinds_do_not_mix) {
  md_token t = ready();
  /* A token is not a prepared model or a client, and a prepared model is not a token. */
  cr_expect_eq(exec_plain(e.client, t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, e.client, t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->close_client(e.dev, t, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, P), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_copy_to(&e, e.client, e.client, NULL, B23), MD_INVALID_ARGUMENT);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, t, 0, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, P, 0, sh, 1, &tm), MD_INVALID_ARGUMENT);
  expect_holds_A(t);
  mdt_free(&e, t);
}

Test(handles, buffer_outlives_its_prepared_model) {
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&e, Q, false, 0, 0, NULL);
  mdt_release(&e, Q);
  cr_expect_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_holds_A(t);
  mdt_free(&e, t);
}

/* Requests of async executions stay alive (their memfds open) until the test ends (areq,
 * closed by teardown). */
static md_handle start_async(md_handle client, md_handle prep) {
  cr_assert_lt(n_areq, 4);
  mdt_request *r = &areq[n_areq++];
  mdt_req_init(r);
  mdt_req_in_data(r, A, B23, 0, NULL);
  mdt_req_in_data(r, B, B23, 0, NULL);
  mdt_req_out_pool(r, B23, 0, NULL);
  md_handle ev = 0;
  md_status st = e.drv->execute_async(e.dev, client, prep, mdt_req(r), &ev);
  cr_assert_eq(st, MD_NONE, "execute_async: %s", e.drv->last_error(e.dev));
  cr_assert_neq(ev, 0u);
  return ev;
}

Test(handles, zero_and_forged_events_rejected) {
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, 0, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  md_handle ev = start_async(e.client, P);
  rng_state = 0x6576656e74733f21ull;
  uint32_t accepted = 0;
  for (int i = 0; i < 2000; i++) {
    md_handle f = rng();
    if (f != ev) accepted += e.drv->wait_event(e.dev, e.client, f, 0, sh, 1, &tm) != MD_INVALID_ARGUMENT;
  }
  cr_expect_eq(accepted, 0u, "%u forged events accepted", accepted);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE);
}

Test(handles, consumed_event_rejected) {
  md_handle ev = start_async(e.client, P);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
}

Test(handles, other_clients_event_rejected_and_stays_valid) {
  md_handle c2 = mdt_open_client(&e);
  md_handle ev = start_async(e.client, P);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, c2, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE,
               "the owner lost the event: %s", e.drv->last_error(e.dev));
  mdt_close_client(&e, c2, NULL);
}

/* ---- close_client's leak report ---- */

Test(leaks, close_client_reports_live_objects) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_handle p3 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t[3];
  for (int i = 0; i < 3; i++) cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t[i]), MD_NONE);
  cr_assert_eq(e.drv->free_buffer(e.dev, c2, t[2]), MD_NONE); /* freed: not a leak */
  md_handle ev = start_async(c2, p2);                          /* never waited */
  md_handle ev2 = start_async(c2, p2);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(e.drv->wait_event(e.dev, c2, ev2, UINT64_MAX, sh, 1, &tm), MD_NONE); /* consumed */
  cr_assert_eq(e.drv->release_prepared_model(e.dev, c2, p3), MD_NONE);
  (void)ev;
  md_leak_report lr;
  memset(&lr, 0xee, sizeof lr);
  mdt_close_client(&e, c2, &lr);
  cr_expect_eq(lr.buffers, 2u);
  cr_expect_eq(lr.prepared_models, 1u);
  cr_expect_eq(lr.events, 1u);
}

Test(leaks, leak_report_bytes_are_the_live_buffers_sizes) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  static const uint32_t d45[2] = {4, 5};
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, d45, 2, d45, 2, d45, 0));
  md_token t1, t2;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t1), MD_NONE);
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, true, 0, 0, NULL, &t2), MD_NONE);
  md_leak_report lr;
  memset(&lr, 0xee, sizeof lr);
  mdt_close_client(&e, c2, &lr);
  cr_expect_eq(lr.buffers, 2u);
  cr_expect_eq(lr.bytes, 160u, "bytes %" PRIu64 ", two float32 [4,5] buffers are 160", lr.bytes);
}

Test(leaks, clean_client_reports_nothing) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t), MD_NONE);
  cr_assert_eq(e.drv->free_buffer(e.dev, c2, t), MD_NONE);
  cr_assert_eq(e.drv->release_prepared_model(e.dev, c2, p2), MD_NONE);
  md_leak_report lr;
  memset(&lr, 0xee, sizeof lr);
  mdt_close_client(&e, c2, &lr);
  cr_expect_eq(lr.buffers, 0u);
  cr_expect_eq(lr.prepared_models, 0u);
  cr_expect_eq(lr.events, 0u);
  cr_expect_eq(lr.bytes, 0u);
}

Test(leaks, close_client_releases_its_handles) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, false, 0, 0, NULL, &t), MD_NONE);
  md_handle ev = start_async(c2, p2);
  mdt_close_client(&e, c2, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, c2, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->release_prepared_model(e.dev, c2, p2), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->free_buffer(e.dev, c2, t), MD_INVALID_ARGUMENT);
  /* And to everyone else as well. */
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(exec_plain(e.client, p2), MD_INVALID_ARGUMENT);
}

/* ---- device memory never shows an earlier buffer's bytes ----
 * The only black-box way to read device memory no copy_from or execution wrote is an
 * execution whose kernel leaves its output untouched: "mdt.noop" (a registered test kernel)
 * declares an output with its input's dims and writes nothing, so the buffer becomes
 * "initialized" with whatever the device memory held. */

#define NOOP_ROWS 64u
#define NOOP_BYTES (NOOP_ROWS * NOOP_ROWS * 4u)

static void expect_no_pattern(const uint8_t *bytes, size_t n, uint8_t pat, const char *what) {
  size_t hits = 0;
  for (size_t i = 0; i < n; i++) hits += bytes[i] == pat;
  cr_expect(hits < 16, "%s: %zu bytes of an earlier buffer's pattern 0x%02x", what, hits, pat);
}

static void scribble_and_free(md_handle client, md_handle prep, uint8_t pat, int count) {
  static uint8_t buf[NOOP_BYTES];
  memset(buf, pat, sizeof buf);
  for (int i = 0; i < count; i++) {
    md_token t = 0;
    cr_assert_eq(mdt_try_alloc(&e, client, prep, true, 0, 0, NULL, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_assert_eq(mdt_copy_from(&e, client, t, buf, NOOP_BYTES, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_assert_eq(e.drv->free_buffer(e.dev, client, t), MD_NONE);
  }
}

static void read_fresh_via_noop(md_handle prep, uint32_t desc_rank, const uint32_t *desc_dims, uint8_t pat) {
  static uint8_t in[NOOP_BYTES], out[NOOP_BYTES];
  static const uint32_t d[2] = {NOOP_ROWS, NOOP_ROWS};
  for (int i = 0; i < 4; i++) {
    md_token t = mdt_alloc(&e, prep, true, 0, desc_rank, desc_dims);
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, in, NOOP_BYTES, 2, d);
    mdt_req_out_token(&r, t, 0, NULL);
    md_output_shape sh[8];
    md_timing tm;
    md_status st = mdt_exec(&e, prep, &r, sh, &tm);
    mdt_req_fini(&r);
    cr_assert_eq(st, MD_NONE, "noop execution: %s", e.drv->last_error(e.dev));
    cr_assert_eq(mdt_copy_to(&e, e.client, t, out, NOOP_BYTES), MD_NONE, "%s", e.drv->last_error(e.dev));
    expect_no_pattern(out, sizeof out, pat, "fresh buffer");
    mdt_free(&e, t);
  }
}

Test(security, new_buffer_never_shows_bytes_of_a_freed_one) {
  mdt_register_test_kernels();
  static const uint32_t d[2] = {NOOP_ROWS, NOOP_ROWS};
  mdt_model b;
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.noop", MD_TENSOR_FLOAT32, 0, 0, 2, d));
  scribble_and_free(e.client, Q, 0xa5, 4);
  read_fresh_via_noop(Q, 0, NULL, 0xa5);
  mdt_release(&e, Q);
}

Test(security, new_buffer_never_shows_bytes_of_another_clients_freed_one) {
  mdt_register_test_kernels();
  static const uint32_t d[2] = {NOOP_ROWS, NOOP_ROWS};
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle Q2 = mdt_prepare_for(&e, c2, mdt_custom_model(&b, "mdt.noop", MD_TENSOR_FLOAT32, 0, 0, 2, d));
  md_handle Q = mdt_prepare(&e, mdt_custom_model(&b, "mdt.noop", MD_TENSOR_FLOAT32, 0, 0, 2, d));
  scribble_and_free(c2, Q2, 0x5c, 4);
  cr_assert_eq(e.drv->release_prepared_model(e.dev, c2, Q2), MD_NONE);
  mdt_close_client(&e, c2, NULL);
  read_fresh_via_noop(Q, 0, NULL, 0x5c);
  mdt_release(&e, Q);
}

Test(security, resized_dynamic_buffer_never_shows_bytes_of_a_freed_one) {
  mdt_register_test_kernels();
  static const uint32_t d[2] = {NOOP_ROWS, NOOP_ROWS}, dyn[2] = {0, NOOP_ROWS};
  mdt_model b;
  md_handle Qk = mdt_prepare(&e, mdt_custom_model(&b, "mdt.noop", MD_TENSOR_FLOAT32, 0, 0, 2, d));
  md_handle Qd = mdt_prepare(&e, mdt_custom_model(&b, "mdt.noop", MD_TENSOR_FLOAT32, 0, 0, 2, dyn));
  scribble_and_free(e.client, Qk, 0x3c, 4);
  read_fresh_via_noop(Qd, 0, NULL, 0x3c);
  mdt_release(&e, Qk);
  mdt_release(&e, Qd);
}

Test(security, another_clients_token_as_output_leaves_it_untouched) {
  /* A request that names someone else's buffer as its output is rejected and, unlike a
   * failed execution of one's own, does not uninitialize (or write) that buffer. */
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle p2 = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t2 = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, p2, true, 0, 0, NULL, &t2), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, c2, t2, A, B23, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, t2, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&e, P, &r, sh, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  float out[6];
  cr_expect_eq(mdt_copy_to(&e, c2, t2, out, B23), MD_NONE, "the owner's buffer was uninitialized");
  cr_expect(memcmp(out, A, B23) == 0, "the owner's buffer was written");
  mdt_close_client(&e, c2, NULL);
}

Test(handles, reused_event_slots_reject_old_events) {
  md_handle old[40];
  md_output_shape sh[8];
  md_timing tm;
  for (int i = 0; i < 40; i++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, A, B23, 0, NULL);
    mdt_req_in_data(&r, B, B23, 0, NULL);
    mdt_req_out_pool(&r, B23, 0, NULL);
    cr_assert_eq(e.drv->execute_async(e.dev, e.client, P, mdt_req(&r), &old[i]), MD_NONE);
    cr_assert_eq(e.drv->wait_event(e.dev, e.client, old[i], UINT64_MAX, sh, 1, &tm), MD_NONE);
    mdt_req_fini(&r);
  }
  uint32_t accepted = 0, repeated = 0;
  for (int i = 0; i < 40; i++) {
    accepted += e.drv->wait_event(e.dev, e.client, old[i], 0, sh, 1, &tm) != MD_INVALID_ARGUMENT;
    for (int j = 0; j < i; j++) repeated += old[i] == old[j];
  }
  cr_expect_eq(accepted, 0u, "%u consumed events accepted", accepted);
  cr_expect_eq(repeated, 0u, "%u event handles issued twice", repeated);
}

Test(handles, reused_prepared_slots_reject_old_handles) {
  md_handle old[40];
  mdt_model b;
  for (int i = 0; i < 40; i++) {
    old[i] = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
    mdt_release(&e, old[i]);
  }
  uint32_t accepted = 0, repeated = 0;
  for (int i = 0; i < 40; i++) {
    accepted += exec_plain(e.client, old[i]) != MD_INVALID_ARGUMENT;
    for (int j = 0; j < i; j++) repeated += old[i] == old[j];
  }
  cr_expect_eq(accepted, 0u, "%u released prepared models accepted", accepted);
  cr_expect_eq(repeated, 0u, "%u prepared handles issued twice", repeated);
}
