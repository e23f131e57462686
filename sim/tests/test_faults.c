/* test_faults.c - fault plans: each kind fires at exactly the N-th fault point of its site
 * (md_backend_ops.fault_point: the runtime calls one per allocate / copy / execution),
 * device_lost is sticky and fails queued work, the backend's own calls inject nothing, and
 * malformed plans are refused naming the item. */
#include "sim_test.h"

#include <criterion/parameterized.h>

#define MIB (1024ull * 1024ull)

TestSuite(faults, .fini = simt_close);

static float *kp(md_devptr p) { return simt_get()->ops->kernel_ptr(simt_get()->dev, p); }

static md_status point(md_fault_site site, char *err, size_t n) {
  return simt_get()->ops->fault_point(simt_get()->dev, site, err, n);
}

Test(faults, alloc_fail_fires_at_exactly_the_nth_allocate_point) {
  simt_open(16 * MIB, "alloc_fail@3", 0);
  char err[256] = "";
  cr_expect_eq(point(MD_FAULT_ALLOCATE, err, sizeof err), MD_NONE);
  cr_expect_eq(point(MD_FAULT_ALLOCATE, err, sizeof err), MD_NONE);
  cr_expect_eq(point(MD_FAULT_COPY, err, sizeof err), MD_NONE, "other sites keep their own numbers");
  cr_expect_eq(point(MD_FAULT_ALLOCATE, err, sizeof err), MD_RESOURCE_EXHAUSTED_TRANSIENT, "the 3rd allocate");
  cr_expect_str_eq(err, "sim: injected device allocation failure (alloc_fail@3)");
  cr_expect_eq(point(MD_FAULT_ALLOCATE, err, sizeof err), MD_NONE, "the 4th runs normally");
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.faults_fired, 1);
  cr_expect_eq(s.site_calls[MD_FAULT_ALLOCATE], 4);
  cr_expect_eq(s.site_calls[MD_FAULT_COPY], 1);
}

Test(faults, the_backends_own_calls_inject_nothing) {
  md_backend *d = simt_open(16 * MIB, "alloc_fail@1,copy_fail@1,kernel_fail@1,device_lost@2", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(64);
  uint8_t buf[64] = {0};
  cr_expect_eq(ops->write(d, NULL, p, 0, buf, 64, NULL, 0), MD_NONE);
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(kp(p), 16);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(simt_stats().common.faults_fired, 0);
  ops->free(d, p);
}

Test(faults, copy_and_kernel_fail_fire_at_their_own_numbers) {
  simt_open(16 * MIB, "copy_fail@2,kernel_fail@1", 0);
  char err[256] = "";
  cr_expect_eq(point(MD_FAULT_COPY, err, sizeof err), MD_NONE);
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_str_eq(err, "sim: injected kernel failure (kernel_fail@1)");
  cr_expect_eq(point(MD_FAULT_COPY, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_str_eq(err, "sim: injected copy failure (copy_fail@2)");
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_NONE, "the next execution runs normally");
  cr_expect_eq(simt_stats().common.faults_fired, 2);
  cr_expect_eq(simt_stats().lost, 0);
}

Test(faults, stall_fires_at_its_execution_number_and_precedes_nothing) {
  simt_open(16 * MIB, "stall@2,kernel_fail@3,stall@3", 0);
  char err[256] = "";
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_NONE);
  cr_expect_eq(point(MD_FAULT_ALLOCATE, err, sizeof err), MD_NONE, "other sites keep their own numbers");
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_MISSED_DEADLINE_TRANSIENT, "the 2nd execution");
  cr_expect_str_eq(err, "sim: execution 2 stalled (stall@2)");
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_GENERAL_FAILURE, "kernel_fail wins over stall");
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_NONE);
  cr_expect_eq(simt_stats().common.faults_fired, 2);
}

static void counting_kernel(const md_kernel_call *c, md_kernel_status *st) {
  atomic_fetch_add((_Atomic int *)c->user, 1);
}

Test(faults, device_lost_is_sticky_and_fails_queued_work) {
  md_backend *d = simt_open(16 * MIB, "device_lost@2", 0);
  const md_backend_ops *ops = simt_get()->ops;
  simt_get()->allow_live = 1;
  md_devptr out = simt_alloc(64);
  _Atomic int runs = 0;
  md_kernel_def k = simt_kernel("count", counting_kernel);
  k.user = (void *)&runs;
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  char err[256] = "";
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_NONE);
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_DEVICE_UNAVAILABLE, "the 2nd execution");
  cr_expect(strstr(err, "device_lost@2") != NULL, "%s", err);
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_DEVICE_UNAVAILABLE, "sticky");
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_DEVICE_UNAVAILABLE);
  md_devptr p = 0;
  cr_expect_eq(ops->alloc(d, 16, &p), MD_DEVICE_UNAVAILABLE);
  uint8_t b[8];
  cr_expect_eq(ops->read(d, NULL, b, out, 0, 8, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(atomic_load(&runs), 0);
  md_sim_stats ss = simt_stats();
  cr_expect_eq(ss.lost, 1);
  cr_expect_eq(ss.site_calls[MD_FAULT_EXECUTION], 2, "calls after the loss are not counted");
  ops->stream_destroy(d, s);
  ops->free(d, out);   /* free still releases */
  cr_expect_eq(simt_stats().common.bytes_live, 0);
}

Test(faults, a_loss_fails_work_queued_before_it_that_has_not_run) {
  md_backend *d = simt_open(16 * MIB, "device_lost@1", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  /* A seedless device runs queued work at once; the loss may come before or after it. Either
   * way the sync reports the loss, and nothing crashes or hangs. */
  _Atomic int runs = 0;
  md_kernel_def k = simt_kernel("count", counting_kernel);
  k.user = (void *)&runs;
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
  char err[256] = "";
  cr_expect_eq(point(MD_FAULT_EXECUTION, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  ops->stream_destroy(d, s);
  ops->free(d, out);
}

Test(faults, empty_plan_injects_nothing) {
  md_backend *d = simt_open(16 * MIB, "", 0);
  md_devptr p = simt_alloc(64);
  char err[64];
  for (int i = 0; i < 3; i++)
    for (int site = 0; site < 3; site++) cr_expect_eq(point((md_fault_site)site, err, sizeof err), MD_NONE);
  simt_get()->ops->free(d, p);
  cr_expect_eq(simt_stats().common.faults_fired, 0);
}

/* Arrays, not pointers: Criterion runs each case in a new process (addresses differ). */
typedef struct bad_plan {
  char plan[48];
  char needle[64]; /* what the message must contain */
} bad_plan;

ParameterizedTestParameters(faults, malformed_plan_is_invalid_argument_naming_the_item) {
  static bad_plan cases[] = {
      {"alloc_fail@", "faults: 'alloc_fail@': missing count"},
      {"foo@1", "faults: 'foo@1': unknown kind 'foo'"},
      {"alloc_fail@0", "faults: 'alloc_fail@0': count must be >= 1"},
      {"stall@0", "faults: 'stall@0': count must be >= 1"},
      {"stall", "faults: 'stall': missing '@N'"},
      {"alloc_fail@x", "faults: 'alloc_fail@x': count 'x' is not a number"},
      {"alloc_fail@1x", "'alloc_fail@1x'"},
      {"alloc_fail@-1", "'alloc_fail@-1'"},
      {"alloc_fail", "faults: 'alloc_fail': missing '@N'"},
      {"copy_fail@2,kernel_fail@", "faults: 'kernel_fail@': missing count"},
      {"copy_fail@2,", "empty item"},
      {",copy_fail@2", "empty item"},
      {"@3", "unknown kind ''"},
      {"alloc_fail@99999999999999999999999", "out of range"},
      {"Alloc_fail@1", "unknown kind 'Alloc_fail'"},
      {"alloc_fail@1 ", "'alloc_fail@1 '"},
  };
  return cr_make_param_array(bad_plan, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_plan *c, faults, malformed_plan_is_invalid_argument_naming_the_item) {
  const md_backend_ops *ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = MIB, .faults = c->plan};
  md_backend *d = (md_backend *)0x1;
  char err[256] = "";
  cr_expect_eq(ops->open(&p, &d, err, sizeof err), MD_INVALID_ARGUMENT, "plan '%s'", c->plan);
  cr_expect_null(d);
  cr_expect(strstr(err, c->needle) != NULL, "plan '%s': message '%s' lacks '%s'", c->plan, err, c->needle);
}
