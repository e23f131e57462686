/* test_faults.c - fault plans: each kind gives its status at exactly the N-th call of its kind,
 * device_lost is sticky, malformed plans are refused naming the item. */
#include "sim_test.h"

#include <criterion/parameterized.h>

#define MIB (1024ull * 1024ull)

TestSuite(faults, .fini = simt_close);

static float *kp(md_devptr p) { return simt_get()->ops->kernel_ptr(simt_get()->dev, p); }

Test(faults, alloc_fail_fires_at_exactly_the_nth_alloc) {
  md_backend *d = simt_open(16 * MIB, "alloc_fail@3", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p[5] = {0};
  cr_expect_eq(ops->alloc(d, 100, &p[0]), MD_NONE);
  cr_expect_eq(ops->alloc(d, 100, &p[1]), MD_NONE);
  cr_expect_eq(ops->alloc(d, 100, &p[2]), MD_RESOURCE_EXHAUSTED_TRANSIENT, "the 3rd alloc");
  cr_expect_eq(p[2], 0);
  cr_expect_eq(ops->alloc(d, 100, &p[3]), MD_NONE, "the 4th runs normally");
  cr_expect_eq(ops->alloc(d, 100, &p[4]), MD_NONE);
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.faults_fired, 1);
  cr_expect_eq(s.refused_transient, 0, "an injected failure is not a real refusal");
  cr_expect_eq(s.alloc_calls, 5);
  for (int i = 0; i < 5; i++) ops->free(d, p[i]);
}

Test(faults, copy_fail_fires_at_exactly_the_nth_copy_of_any_direction) {
  md_backend *d = simt_open(16 * MIB, "copy_fail@3", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr a = simt_alloc(16), b = simt_alloc(16);
  char err[256] = "";
  uint8_t buf[16] = {1, 2, 3}, back[16];
  cr_expect_eq(ops->write(d, NULL, a, 0, buf, 16, err, sizeof err), MD_NONE, "copy 1");
  cr_expect_eq(ops->read(d, NULL, back, a, 0, 16, err, sizeof err), MD_NONE, "copy 2");
  cr_expect_eq(ops->copy(d, NULL, b, 0, a, 0, 16, err, sizeof err), MD_GENERAL_FAILURE, "copy 3");
  cr_expect_str_eq(err, "sim: injected copy failure (copy_fail@3)");
  cr_expect_eq(ops->read(d, NULL, back, b, 0, 16, err, sizeof err), MD_NONE, "copy 4");
  for (int i = 0; i < 16; i++) cr_expect_eq(back[i], 0, "the failed copy copied nothing");
  md_sim_stats s = simt_stats();
  cr_expect_eq(s.common.faults_fired, 1);
  cr_expect_eq(s.common.copies, 3);
  cr_expect_eq(s.copy_calls, 4);
  ops->free(d, a);
  ops->free(d, b);
}

static int runs;
static void counting_kernel(const md_kernel_call *c, md_kernel_status *st) { runs++; }

Test(faults, kernel_fail_fires_at_exactly_the_nth_launch_without_running_it) {
  md_backend *d = simt_open(16 * MIB, "kernel_fail@2", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_kernel_def k = simt_kernel("count", counting_kernel);
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(runs, 1);
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_GENERAL_FAILURE, "the 2nd launch");
  cr_expect_eq(st.code, MD_GENERAL_FAILURE);
  cr_expect_str_eq(st.message, "sim: injected kernel failure (kernel_fail@2)");
  cr_expect_eq(runs, 1, "the injected failure replaces the kernel");
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE, "the next launch runs normally");
  cr_expect_eq(runs, 2);
  char err[256];
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_GENERAL_FAILURE);
  cr_expect_str_eq(err, "sim: injected kernel failure (kernel_fail@2)");
  cr_expect_eq(simt_stats().common.faults_fired, 1);
  ops->stream_destroy(d, s);
  ops->free(d, out);
}

Test(faults, device_lost_fires_at_the_nth_launch_and_is_sticky) {
  md_backend *d = simt_open(16 * MIB, "device_lost@2", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64), other = simt_alloc(64);
  md_kernel_def k = simt_kernel("count", counting_kernel);
  md_tensor t = simt_tensor(kp(out), 16);
  md_kernel_status st;
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_DEVICE_UNAVAILABLE, "the 2nd launch loses the device");
  cr_expect(strstr(st.message, "device_lost@2") != NULL, "%s", st.message);
  cr_expect_eq(runs, 1);
  /* From now on every operation says so. */
  char err[256];
  uint8_t buf[4] = {0};
  md_devptr p = 0;
  md_stream *s2 = NULL;
  md_event *e2 = NULL;
  cr_expect_eq(simt_launch(s, &k, NULL, &t, &st), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->alloc(d, 64, &p), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->write(d, NULL, out, 0, buf, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect(strstr(err, "device lost") != NULL, "%s", err);
  cr_expect_eq(ops->read(d, NULL, buf, out, 0, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->copy(d, NULL, other, 0, out, 0, 4, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_create(d, &s2), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_create(d, &e2), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_record(d, e, s), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_wait(d, e, 0), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE, "still lost after a sync");
  cr_expect_eq(ops->stream_sync(d, NULL, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_null(s2);
  cr_expect_null(e2);
  cr_expect_eq(runs, 1);
  md_sim_stats stats = simt_stats();
  cr_expect_eq(stats.lost, 1);
  cr_expect_eq(stats.common.faults_fired, 1);
  cr_expect_eq(stats.launch_calls, 2, "calls on a lost device are not counted");
  /* Releasing still works; close releases the rest (leak check in the ASan build). */
  ops->free(d, out);
  cr_expect_eq(simt_stats().common.frees, 1);
  simt_get()->allow_live = 1;
}

Test(faults, several_items_fire_each_at_its_own_call) {
  md_backend *d = simt_open(16 * MIB, "alloc_fail@1,alloc_fail@3,kernel_fail@1,alloc_fail@3", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p[4] = {0};
  md_status want[4] = {MD_RESOURCE_EXHAUSTED_TRANSIENT, MD_NONE, MD_RESOURCE_EXHAUSTED_TRANSIENT, MD_NONE};
  for (int i = 0; i < 4; i++) cr_expect_eq(ops->alloc(d, 64, &p[i]), want[i], "alloc %d", i + 1);
  md_kernel_def k = simt_kernel("count", counting_kernel);
  md_tensor t = simt_tensor(kp(p[1]), 16);
  md_kernel_status st;
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_GENERAL_FAILURE);
  cr_expect_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(simt_stats().common.faults_fired, 3);
  ops->free(d, p[1]);
  ops->free(d, p[3]);
}

Test(faults, a_call_refused_by_its_own_checks_keeps_its_number_and_fires_nothing) {
  md_backend *d = simt_open(16 * MIB, "alloc_fail@1,copy_fail@1", 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = 0;
  cr_expect_eq(ops->alloc(d, 0, &p), MD_INVALID_ARGUMENT, "alloc 1: refused by its own check");
  cr_expect_eq(ops->alloc(d, 64, &p), MD_NONE, "alloc 2: the fault did not move here");
  uint8_t b[128] = {0};
  cr_expect_eq(ops->write(d, NULL, p, 0, b, 128, NULL, 0), MD_GENERAL_FAILURE, "copy 1: out of bounds");
  cr_expect_eq(ops->write(d, NULL, p, 0, b, 64, NULL, 0), MD_NONE, "copy 2");
  cr_expect_eq(simt_stats().common.faults_fired, 0);
  ops->free(d, p);
}

Test(faults, empty_plan_injects_nothing) {
  md_backend *d = simt_open(16 * MIB, "", 0);
  md_devptr p = simt_alloc(64);
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
