/* test_spec_faults.c - the simulator's fault plans seen through the driver (docs/sim.md): each
 * kind gives its status at the N-th valid call of its kind, the state it leaves (buffers
 * uninitialized, the next execution normal, a lost device refusing everything but close),
 * mem_limit refusals, and malformed plans and values refused at open_device. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "exec_int.h"
#include "fault_fixture.h"

static md_status exec_to_token(fx *f, md_token out, md_output_shape *sh, md_timing *tm) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_status st = mdt_exec(&f->e, f->p, &r, sh, tm);
  mdt_req_fini(&r);
  return st;
}


Test(faults, alloc_fail_refuses_the_nth_allocate_and_the_device_stays_usable) {
  fx f;
  fx_open(&f, "backend=sim;faults=alloc_fail@2");
  md_token t1, t2 = 1, t3;
  cr_assert_eq(mdt_try_alloc(&f.e, f.e.client, f.p, true, 0, 0, NULL, &t1), MD_NONE);
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, f.p, true, 0, 0, NULL, &t2), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect(strstr(msg(&f), "alloc_fail@2") && strstr(msg(&f), "allocate"), "%s", msg(&f));
  cr_expect_eq(t2, 0, "no token on failure");
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, f.p, true, 0, 0, NULL, &t3), MD_NONE, "the 3rd works");
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(exec_to_token(&f, t3, sh, &tm), MD_NONE, "%s", msg(&f));
  mdt_free(&f.e, t1);
  mdt_free(&f.e, t3);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(faults, an_invalid_allocate_does_not_take_a_number) {
  fx f;
  fx_open(&f, "backend=sim;faults=alloc_fail@1");
  md_token t;
  md_buffer_role bad = {.model_index = 0, .io_index = 99, .probability = 1.0f};
  cr_expect_eq(f.e.drv->allocate(f.e.dev, f.e.client, NULL, &f.p, 1, NULL, 0, &bad, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, f.p, true, 0, 0, NULL, &t), MD_RESOURCE_EXHAUSTED_TRANSIENT,
               "the first valid allocate is number 1");
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(faults, copy_fail_on_copy_from_leaves_the_buffer_uninitialized) {
  fx f;
  fx_open(&f, "backend=sim;faults=copy_fail@2");
  md_token t = mdt_alloc(&f.e, f.p, false, 0, 0, NULL);
  float back[6];
  cr_expect_eq(mdt_copy_from(&f.e, f.e.client, t, A, B23, 0, NULL), MD_NONE, "copy 1");
  cr_expect_eq(mdt_copy_from(&f.e, f.e.client, t, B, B23, 0, NULL), MD_GENERAL_FAILURE, "copy 2");
  cr_expect(strstr(msg(&f), "copy_from") && strstr(msg(&f), "copy_fail@2"), "%s", msg(&f));
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, t, back, B23), MD_GENERAL_FAILURE, "uninitialized now");
  cr_expect_eq(mdt_copy_from(&f.e, f.e.client, t, B, B23, 0, NULL), MD_NONE, "copy 4 works");
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, t, back, B23), MD_NONE);
  cr_expect_eq(memcmp(back, B, B23), 0);
  mdt_free(&f.e, t);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(faults, copy_fail_on_copy_to_leaves_the_buffer_uninitialized) {
  fx f;
  fx_open(&f, "backend=sim;faults=copy_fail@2");
  md_token t = mdt_alloc(&f.e, f.p, false, 0, 0, NULL);
  float back[6];
  cr_expect_eq(mdt_copy_from(&f.e, f.e.client, t, A, B23, 0, NULL), MD_NONE);
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, t, back, B23), MD_GENERAL_FAILURE, "copy 2");
  cr_expect(strstr(msg(&f), "copy_to") && strstr(msg(&f), "copy_fail@2"), "%s", msg(&f));
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, t, back, B23), MD_GENERAL_FAILURE, "uninitialized now");
  mdt_free(&f.e, t);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(faults, kernel_fail_fails_one_execution_and_the_next_runs_normally) {
  fx f;
  fx_open(&f, "backend=sim;faults=kernel_fail@2");
  md_token out = mdt_alloc(&f.e, f.p, true, 0, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  float back[6];
  cr_assert_eq(exec_to_token(&f, out, sh, &tm), MD_NONE, "execution 1: %s", msg(&f));
  cr_assert_eq(mdt_copy_to(&f.e, f.e.client, out, back, B23), MD_NONE);
  cr_expect_eq(exec_to_token(&f, out, sh, &tm), MD_GENERAL_FAILURE, "execution 2");
  cr_expect(strstr(msg(&f), "kernel_fail@2") && strstr(msg(&f), "kernel"), "%s", msg(&f));
  cr_expect_eq(sh[0].rank, 0, "no output shapes");
  cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  cr_expect_eq(tm.in_driver_ns, UINT64_MAX);
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, out, back, B23), MD_GENERAL_FAILURE, "the output was uninitialized");
  cr_expect_eq(exec_to_token(&f, out, sh, &tm), MD_NONE, "execution 3 runs normally: %s", msg(&f));
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, out, back, B23), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(back[i], A[i] + B[i]);
  mdt_free(&f.e, out);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(faults, kernel_fail_on_an_async_execution_comes_back_from_wait_event) {
  fx f;
  fx_open(&f, "backend=sim;seed=4;faults=kernel_fail@1");
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_assert_eq(f.e.drv->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE, "validation passes");
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(f.e.drv->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_GENERAL_FAILURE);
  cr_expect(strstr(msg(&f), "kernel_fail@1"), "%s", msg(&f));
  cr_expect_eq(sh[0].rank, 0);
  cr_assert_eq(f.e.drv->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE);
  cr_expect_eq(f.e.drv->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", msg(&f));
  float out[6];
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

/* SPEC 8.9 (v1.2): device_lost@N drawn by an execute_async is a loss during that execution:
 * the call returns NONE and an event, its wait is DEVICE_UNAVAILABLE (no shapes, timing
 * unmeasured), and the device is lost from then on (a later execute_async refuses at once). */
static void device_lost_async(bool queued) {
  if (queued) atomic_store(&md__async_inline_bytes, 0);   /* else it runs in the calling thread */
  fx f;
  fx_open(&f, "backend=sim;faults=device_lost@1");
  md_token out = mdt_alloc(&f.e, f.p, true, 0, 2, D23);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(f.e.drv->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE,
               "the loss is the execution's, not the call's: %s", msg(&f));
  cr_assert_neq(ev, 0);
  md_output_shape sh[1];
  md_timing tm;
  memset(sh, 0xAB, sizeof sh);
  cr_expect_eq(f.e.drv->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_DEVICE_UNAVAILABLE);
  cr_expect(strstr(msg(&f), "device_lost@1"), "%s", msg(&f));
  cr_expect_eq(sh[0].rank, 0, "no shapes from a failed execution");
  cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  cr_expect_eq(tm.in_driver_ns, UINT64_MAX);
  md_handle ev2 = 0xdead;
  cr_expect_eq(f.e.drv->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev2), MD_DEVICE_UNAVAILABLE,
               "a device lost before the call refuses at once");
  cr_expect_eq(ev2, 0, "no event");
  mdt_req_fini(&r);
  md_leak_report lr;
  cr_expect_eq(f.e.drv->close_client(f.e.dev, f.e.client, &lr), MD_NONE);
  /* A lost device refuses every call but the closes at its entry, the wait included: the event
   * was never consumed, so the close counts it (as device_lost_while_an_async_...). */
  cr_expect_eq(lr.events, 1, "the event the lost device never let anyone consume");
  cr_expect_eq(lr.buffers, 1);
  cr_expect_eq(lr.prepared_models, 1);
  f.e.client = 0;
  mdt_env_close(&f.e, 1);
}
Test(faults, device_lost_drawn_by_execute_async_comes_back_from_wait_event) { device_lost_async(false); }
Test(faults, device_lost_drawn_by_a_queued_execute_async_comes_back_from_wait_event) { device_lost_async(true); }

Test(faults, device_lost_refuses_every_later_call_but_close_and_close_releases_everything) {
  fx f;
  fx_open(&f, "backend=sim;faults=device_lost@2");
  const md_driver *d = f.e.drv;
  md_token in = mdt_alloc(&f.e, f.p, false, 0, 0, NULL), out = mdt_alloc(&f.e, f.p, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&f.e, f.e.client, in, A, B23, 0, NULL), MD_NONE);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(exec_to_token(&f, out, sh, &tm), MD_NONE, "execution 1");
  cr_expect_eq(exec_to_token(&f, out, sh, &tm), MD_DEVICE_UNAVAILABLE, "execution 2 loses the device");
  cr_expect(strstr(msg(&f), "device_lost@2"), "%s", msg(&f));
  cr_expect_eq(sh[0].rank, 0);

  float back[6];
  md_token t;
  md_handle h = 0xdead, ev = 0xdead;   /* a refused creation leaves 0 behind, never a stale value */
  md_capabilities caps = {.struct_size = sizeof caps};
  uint8_t supported[4];
  mdt_model b;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  cr_expect_eq(exec_to_token(&f, out, sh, &tm), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(sh[0].rank, 0, "no shapes from a lost device either");
  cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  cr_expect_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ev, 0);
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, 12345, 0, NULL, 0, NULL), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, f.p, true, 0, 0, NULL, &t), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(mdt_copy_from(&f.e, f.e.client, in, A, B23, 0, NULL), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(mdt_copy_to(&f.e, f.e.client, in, back, B23), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(d->free_buffer(f.e.dev, f.e.client, in), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(d->prepare_model(f.e.dev, f.e.client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &h),
               MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(h, 0);
  cr_expect_eq(d->release_prepared_model(f.e.dev, f.e.client, f.p), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(d->get_capabilities(f.e.dev, &caps), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(d->get_supported_operations(f.e.dev, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), supported),
               MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(d->open_client(f.e.dev, &h), MD_DEVICE_UNAVAILABLE);
  cr_expect(strstr(msg(&f), "lost"), "%s", msg(&f));
  mdt_req_fini(&r);

  md_leak_report lr;
  cr_expect_eq(d->close_client(f.e.dev, f.e.client, &lr), MD_NONE, "close still works");
  cr_expect_eq(lr.buffers, 2);
  cr_expect_eq(lr.prepared_models, 1);
  f.e.client = 0;
  mdt_env_close(&f.e, 1);   /* close_device releases the rest (ASan: nothing leaks) */
}

Test(faults, device_lost_while_an_async_execution_is_in_flight) {
  fx f;
  fx_open(&f, "backend=sim;seed=2;faults=device_lost@2");
  const md_driver *d = f.e.drv;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, B23, 0, NULL);
  mdt_req_in_data(&r, B, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  md_handle ev;
  cr_assert_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE, "execution 1");
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&f.e, f.p, &r, sh, &tm), MD_DEVICE_UNAVAILABLE, "execution 2");
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_DEVICE_UNAVAILABLE);
  md_leak_report lr;
  cr_expect_eq(d->close_client(f.e.dev, f.e.client, &lr), MD_NONE);
  cr_expect_eq(lr.events, 1, "the event nobody could wait for is reported");
  f.e.client = 0;
  mdt_req_fini(&r);
  mdt_env_close(&f.e, 1);
}

Test(faults, mem_limit_refusals_are_persistent_over_the_limit_and_transient_over_what_is_free) {
  fx f;
  fx_open(&f, "backend=sim;mem_limit=64K");
  uint32_t huge[2] = {256, 128};  /* 128 KiB: over mem_limit */
  uint32_t part[2] = {96, 128};   /* 48 KiB */
  static const uint32_t d0[2] = {0, 128};
  mdt_model b;
  md_handle p = mdt_prepare(&f.e, mdt_add_model(&b, 2, d0, 2, d0, 2, d0, 0));
  md_token t1, t2;
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, p, true, 0, 2, huge, &t1), MD_RESOURCE_EXHAUSTED_PERSISTENT, "%s",
               msg(&f));
  cr_assert_eq(mdt_try_alloc(&f.e, f.e.client, p, true, 0, 2, part, &t1), MD_NONE, "%s", msg(&f));
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, p, true, 0, 2, part, &t2), MD_RESOURCE_EXHAUSTED_TRANSIENT, "%s",
               msg(&f));
  mdt_free(&f.e, t1);
  cr_expect_eq(mdt_try_alloc(&f.e, f.e.client, p, true, 0, 2, part, &t2), MD_NONE, "usable again: %s", msg(&f));
  mdt_free(&f.e, t2);
  mdt_release(&f.e, p);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

/* Arrays, not pointers: Criterion runs each case in a new process. */
typedef struct bad_config {
  char config[64];
  char needle[64];
} bad_config;

ParameterizedTestParameters(faults, malformed_plans_and_values_are_invalid_argument_naming_them) {
  static bad_config cases[] = {
      {"backend=sim;faults=alloc_fail@", "alloc_fail@"},
      {"backend=sim;faults=melt@1", "unknown kind 'melt'"},
      {"backend=sim;faults=kernel_fail@0", "kernel_fail@0"},
      {"backend=sim;mem_limit=-5", "mem_limit '-5'"},
      {"backend=sim;copy_gbps=fast", "copy_gbps 'fast'"},
      {"backend=sim;copy_gbps=0", "copy_gbps '0'"},
      {"backend=sim;latency_ns=-1", "latency_ns '-1'"},
  };
  return cr_make_param_array(bad_config, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_config *c, faults, malformed_plans_and_values_are_invalid_argument_naming_them) {
  const md_driver *d = mdt_driver();
  md_device *dev = NULL;
  cr_expect_eq(d->open_device(c->config, &dev), MD_INVALID_ARGUMENT, "%s", c->config);
  cr_expect_null(dev);
  const char *m = d->last_error(NULL);
  cr_expect(strstr(m, c->needle) != NULL, "%s: message '%s' lacks '%s'", c->config, m, c->needle);
}
