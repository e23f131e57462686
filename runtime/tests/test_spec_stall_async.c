/* test_spec_stall_async.c - the simulator's stall@N fault plan seen through the driver
 * (docs/sim.md): a held async execution makes waits with a deadline time out deterministically,
 * other work goes on, a wait without deadline releases it, and close_client / close_device never
 * block on it. In the ThreadSanitizer suite (the hand-off between the worker, the parked list
 * and the waiter). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fault_fixture.h"

/* A request of the ADD: x + y into a new zero-filled pool. */
static void add_request(mdt_request *r, const float *x, const float *y) {
  mdt_req_init(r);
  mdt_req_in_data(r, x, B23, 0, NULL);
  mdt_req_in_data(r, y, B23, 0, NULL);
  mdt_req_out_pool(r, B23, 0, NULL);
}

/* stall@N: the N-th execution, when asynchronous, is held until a wait without deadline (or
 * its client's or device's close): waits with a deadline time out deterministically. */
Test(stall, stall_holds_an_async_execution_until_a_wait_without_deadline) {
  fx f;
  fx_open(&f, "backend=sim;faults=stall@1");
  const md_driver *d = f.e.drv;
  mdt_request r, r2;
  add_request(&r, A, B);
  add_request(&r2, A, A);
  md_handle ev;
  cr_assert_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE);
  md_output_shape sh[8];
  md_timing tm;
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev, i == 1 ? 1000000 : 0, sh, 1, &tm), MD_MISSED_DEADLINE_TRANSIENT);
    cr_expect(strstr(msg(&f), "not finished within"), "%s", msg(&f));
    cr_expect_eq(sh[0].rank, 0);
    cr_expect_eq(tm.on_device_ns, UINT64_MAX);
  }
  /* Other work goes on: a synchronous execution (number 2) is not held. */
  cr_expect_eq(mdt_exec(&f.e, f.p, &r2, sh, &tm), MD_NONE, "%s", msg(&f));
  float out[6];
  mdt_req_read_out(&r2, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 2 * A[i]);
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], 0, "the held execution has not written");
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", msg(&f));
  cr_expect_eq(sh[0].rank, 2);
  mdt_req_read_out(&r, 0, out, B23);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT, "consumed");
  mdt_req_fini(&r);
  mdt_req_fini(&r2);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}

Test(stall, a_held_execution_never_blocks_close_client_or_close_device) {
  fx f;
  fx_open(&f, "backend=sim;faults=stall@1,stall@2");
  const md_driver *d = f.e.drv;
  mdt_request r;
  add_request(&r, A, B);
  md_handle ev1, ev2, c2;
  cr_assert_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev1), MD_NONE);
  cr_assert_eq(d->open_client(f.e.dev, &c2), MD_NONE);
  mdt_model b;
  md_handle p2 = 0;
  cr_assert_eq(d->prepare_model(f.e.dev, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &p2), MD_NONE);
  cr_assert_eq(d->execute_async(f.e.dev, c2, p2, mdt_req(&r), &ev2), MD_NONE);
  md_leak_report lr;
  cr_expect_eq(d->close_client(f.e.dev, f.e.client, &lr), MD_NONE, "returns though its execution is held");
  cr_expect_eq(lr.events, 1);
  cr_expect_eq(lr.prepared_models, 1);
  f.e.client = 0;
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev1, UINT64_MAX, NULL, 0, NULL), MD_INVALID_ARGUMENT);
  /* c2's held execution is left for close_device to finish. */
  cr_expect_eq(d->wait_event(f.e.dev, c2, ev2, 0, NULL, 0, NULL), MD_MISSED_DEADLINE_TRANSIENT);
  mdt_req_fini(&r);
  mdt_env_close(&f.e, 1);
}

Test(stall, a_held_execution_released_after_a_device_loss_reports_it) {
  fx f;
  fx_open(&f, "backend=sim;faults=stall@1,device_lost@2");
  const md_driver *d = f.e.drv;
  mdt_request r;
  add_request(&r, A, B);
  md_handle ev;
  cr_assert_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE);
  md_output_shape sh[8];
  md_timing tm;
  cr_expect_eq(mdt_exec(&f.e, f.p, &r, sh, &tm), MD_DEVICE_UNAVAILABLE, "execution 2 loses the device");
  cr_expect_eq(d->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, sh, 1, &tm), MD_DEVICE_UNAVAILABLE);
  mdt_req_fini(&r);
  mdt_env_close(&f.e, 1);
}

/* A wait without deadline that comes before the device's worker has taken the held execution
 * off the queue still releases it (the worker must not park it afterwards): 20 held executions,
 * each waited for at once. Hangs (the test's timeout) if the release is lost. */
Test(stall, a_wait_that_comes_before_the_execution_is_parked_releases_it, .timeout = 60) {
  char config[512] = "backend=sim;faults=";
  for (int i = 1; i <= 20; i++) {
    char item[16];
    snprintf(item, sizeof item, "%sstall@%d", i > 1 ? "," : "", i);
    strcat(config, item);
  }
  fx f;
  fx_open(&f, config);
  const md_driver *d = f.e.drv;
  mdt_request r;
  add_request(&r, A, B);
  for (int i = 0; i < 20; i++) {
    md_handle ev;
    cr_assert_eq(d->execute_async(f.e.dev, f.e.client, f.p, mdt_req(&r), &ev), MD_NONE);
    cr_assert_eq(d->wait_event(f.e.dev, f.e.client, ev, UINT64_MAX, NULL, 0, NULL), MD_NONE, "%s", msg(&f));
  }
  mdt_req_fini(&r);
  mdt_release(&f.e, f.p);
  mdt_env_close(&f.e, 0);
}
