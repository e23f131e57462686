/* test_hip_driver.c - the reference driver with backend=hip on the CPU execution layer, through
 * the md_driver table (runtime/tests/support.h helpers): executions and memory domains give the
 * host reference's results, a device loss is permanent and reported as DEVICE_UNAVAILABLE by
 * every later call, a simulator fault plan is refused, and a failed open leaves nothing behind. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "md_hip_cpu.h"
#include "support.h"

/* Nothing of the device is left once a test's driver device is closed. */
static void no_device_leaks(void) {
  md_hipcpu_stats s;
  md_hipcpu_stats_get(&s);
  cr_expect_eq(s.device_allocs, 0, "device allocations left: %llu", (unsigned long long)s.device_allocs);
  cr_expect_eq(s.host_allocs, 0, "pinned allocations left: %llu", (unsigned long long)s.host_allocs);
  cr_expect_eq(s.host_registered, 0, "registered host ranges left: %llu", (unsigned long long)s.host_registered);
  cr_expect_eq(s.streams, 0, "streams left: %llu", (unsigned long long)s.streams);
  cr_expect_eq(s.events, 0, "events left: %llu", (unsigned long long)s.events);
}
TestSuite(hip_driver, .fini = no_device_leaks);

static const uint32_t dims[2] = {3, 5};

/* out = a + b on a [3,5] ADD model; returns the status, fills out. */
static md_status run_add(const mdt_env *env, md_handle p, const float *a, const float *b, float *out) {
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, 60, 2, dims);
  mdt_req_in_data(&r, b, 60, 2, dims);
  mdt_req_out_pool(&r, 60, 2, dims);
  md_output_shape shapes[8];
  md_timing t;
  md_status st = mdt_exec(env, p, &r, shapes, &t);
  if (st == MD_NONE) mdt_req_read_out(&r, 0, out, 60);
  mdt_req_fini(&r);
  return st;
}

Test(hip_driver, backend_hip_executes_and_reports_itself) {
  mdt_env env;
  mdt_env_open(&env, "backend=hip");
  md_capabilities caps = {.struct_size = sizeof caps};
  cr_assert_eq(env.drv->get_capabilities(env.dev, &caps), MD_NONE);
  cr_assert_str_eq(caps.backend, "hip");
  cr_assert(strstr(caps.device_name, "hipcpu"), "%s", caps.device_name);
  md_handle p = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, dims, 0));
  float a[15], b[15], o[15];
  for (int i = 0; i < 15; i++) {
    a[i] = (float)i * 0.25f;
    b[i] = 10.0f - (float)i;
  }
  cr_assert_eq(run_add(&env, p, a, b, o), MD_NONE, "%s", env.drv->last_error(env.dev));
  for (int i = 0; i < 15; i++) cr_assert_eq(o[i], a[i] + b[i], "element %d", i);
  /* A memory domain: copy_from, execute into it, copy_to. */
  md_token t = mdt_alloc(&env, p, false, 0, 2, dims);
  cr_assert_eq(mdt_copy_from(&env, env.client, t, a, 60, 0, NULL), MD_NONE, "%s", env.drv->last_error(env.dev));
  float back[15];
  cr_assert_eq(mdt_copy_to(&env, env.client, t, back, 60), MD_NONE, "%s", env.drv->last_error(env.dev));
  cr_assert(memcmp(back, a, 60) == 0);
  mdt_free(&env, t);
  mdt_release(&env, p);
  mdt_env_close(&env, 0);
}

/* Registered pools (SPEC 9) on the hip backend are page-locked: an execution whose inputs and
 * output are registered pools copies them with one DMA each, no staging, and gives the host
 * reference's result; synchronously and through execute_async; unregistering lets the range go. */
Test(hip_driver, registered_pools_are_copied_without_staging) {
  mdt_env env;
  mdt_env_open(&env, "backend=hip");
  md_handle p = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, dims, 0));
  float ab[30], o[15];
  for (int i = 0; i < 15; i++) {
    ab[i] = (float)i * 0.5f;
    ab[15 + i] = 3.0f - (float)i;
  }
  int in_fd = mdt_memfd(ab, sizeof ab), out_fd = mdt_memfd(NULL, 60);
  md_handle in = mdt_register(&env, env.client, mdt_ashmem(in_fd, sizeof ab));
  md_handle out = mdt_register(&env, env.client, mdt_ashmem(out_fd, 60));
  md_hipcpu_stats s0, s1;
  md_hipcpu_stats_get(&s0);
  cr_assert_eq(s0.host_registered, 2, "both pools page-locked");
  mdt_request r;
  mdt_req_init(&r);
  uint32_t pi = mdt_req_pool_registered(&r, in), po = mdt_req_pool_registered(&r, out);
  mdt_req_in_arg(&r, pi, 0, 60, 2, dims);
  mdt_req_in_arg(&r, pi, 60, 60, 2, dims);
  mdt_req_out_arg(&r, po, 0, 60, 2, dims);
  md_output_shape shapes[8];
  md_timing t;
  cr_assert_eq(mdt_exec(&env, p, &r, shapes, &t), MD_NONE, "%s", env.drv->last_error(env.dev));
  mdt_read_fd(out_fd, o, 60);
  for (int i = 0; i < 15; i++) cr_assert_eq(o[i], ab[i] + ab[15 + i], "element %d", i);
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.registered_copies - s0.registered_copies, 3, "two inputs and the output, direct: %llu",
               (unsigned long long)(s1.registered_copies - s0.registered_copies));
  /* execute_async: the same, queued on its stream */
  memset(o, 0, sizeof o);
  cr_assert(pwrite(out_fd, o, 60, 0) == 60);
  md_handle ev = 0;
  cr_assert_eq(env.drv->execute_async(env.dev, env.client, p, mdt_req(&r), &ev), MD_NONE, "%s",
               env.drv->last_error(env.dev));
  cr_assert_eq(env.drv->wait_event(env.dev, env.client, ev, UINT64_MAX, shapes, 1, &t), MD_NONE, "%s",
               env.drv->last_error(env.dev));
  mdt_read_fd(out_fd, o, 60);
  for (int i = 0; i < 15; i++) cr_assert_eq(o[i], ab[i] + ab[15 + i], "async element %d", i);
  mdt_req_fini(&r);
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, in), MD_NONE);
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, out), MD_NONE);
  md_hipcpu_stats_get(&s1);
  cr_expect_eq(s1.host_registered, 0, "unregistered pools are unlocked");
  close(in_fd);
  close(out_fd);
  mdt_release(&env, p);
  mdt_env_close(&env, 0);
}

/* A kernel fault on the device: that execution is DEVICE_UNAVAILABLE and so is every later
 * call that needs the device, naming the fault; closing still releases everything. */
Test(hip_driver, a_device_loss_is_permanent) {
  mdt_env env;
  mdt_env_open(&env, "backend=hip");
  md_handle p = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, dims, 1));
  float a[15] = {1}, b[15] = {2}, o[15];
  cr_assert_eq(run_add(&env, p, a, b, o), MD_NONE, "%s", env.drv->last_error(env.dev));
  md_token t = mdt_alloc(&env, p, false, 0, 2, dims);
  md_hipcpu_fail(MD_HIPCPU_KERNEL, 1, hipErrorMisalignedAddress);
  cr_assert_eq(run_add(&env, p, a, b, o), MD_DEVICE_UNAVAILABLE);
  cr_assert(strstr(env.drv->last_error(env.dev), "misaligned"), "%s", env.drv->last_error(env.dev));
  cr_assert_eq(run_add(&env, p, a, b, o), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(mdt_copy_from(&env, env.client, t, a, 60, 0, NULL), MD_DEVICE_UNAVAILABLE);
  md_token t2;
  cr_assert_eq(mdt_try_alloc(&env, env.client, p, false, 0, 2, dims, &t2), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->free_buffer(env.dev, env.client, t), MD_DEVICE_UNAVAILABLE);
  /* close_client and close_device still release what the client held. */
  md_leak_report leaks;
  cr_assert_eq(env.drv->close_client(env.dev, env.client, &leaks), MD_NONE);
  cr_assert_eq(leaks.buffers, 1);
  env.client = 0;
  mdt_env_close(&env, 1);
}

Test(hip_driver, a_simulator_fault_plan_is_refused) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = NULL;
  cr_assert_eq(drv->open_device("backend=hip;faults=alloc_fail@1", &dev), MD_INVALID_ARGUMENT);
  cr_assert(strstr(drv->last_error(NULL), "simulator fault plan"), "%s", drv->last_error(NULL));
}

/* No usable device at open: DEVICE_UNAVAILABLE naming the call, nothing left allocated; auto
 * then falls back to the simulator. */
Test(hip_driver, without_a_device_open_is_device_unavailable_and_auto_picks_sim) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = NULL;
  md_hipcpu_fail(MD_HIPCPU_DEVICE, 1, hipErrorNoDevice);
  cr_assert_eq(drv->open_device("backend=hip", &dev), MD_DEVICE_UNAVAILABLE);
  cr_assert(strstr(drv->last_error(NULL), "hip: no GPU: hipGetDeviceCount: no device"), "%s",
            drv->last_error(NULL));
  cr_assert_eq(drv->open_device("backend=auto", &dev), MD_NONE, "%s", drv->last_error(NULL));
  md_capabilities caps = {.struct_size = sizeof caps};
  cr_assert_eq(drv->get_capabilities(dev, &caps), MD_NONE);
  cr_assert_str_eq(caps.backend, "sim");
  drv->close_device(dev);
}

/* The device runs out of memory under the pool: RESOURCE_EXHAUSTED_TRANSIENT, and the next
 * allocation that fits works. */
Test(hip_driver, device_out_of_memory_is_transient) {
  mdt_env env;
  mdt_env_open(&env, "backend=hip");
  static const uint32_t any[2] = {0, 0};
  md_handle p = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, any, 0));
  md_hipcpu_fail(MD_HIPCPU_MALLOC, 1, hipErrorOutOfMemory);
  static const uint32_t big[2] = {1024, 2048}; /* 8 MiB: a slab of its own */
  md_token t;
  cr_assert_eq(mdt_try_alloc(&env, env.client, p, false, 0, 2, big, &t), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  (void)hipGetLastError();
  cr_assert_eq(mdt_try_alloc(&env, env.client, p, false, 0, 2, big, &t), MD_NONE, "%s",
               env.drv->last_error(env.dev));
  mdt_free(&env, t);
  mdt_release(&env, p);
  mdt_env_close(&env, 0);
}
