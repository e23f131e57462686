/* test_record.c - `mdc record` and the recording driver: recorded workloads replay Pass against
 * the driver they were recorded on, the recorded expectations are real (a changed value fails),
 * the header says where the trace came from, and the recorder exports only md_driver_entry. */
#include <dlfcn.h>

#include "md/driver.h"
#include "test_cli_support.h"

static json_t *first_line(const char *path) {
  char *text = slurp(path);
  char *nl = strchr(text, '\n');
  cr_assert(nl, "%s has no lines", path);
  *nl = 0;
  json_error_t e;
  json_t *h = json_loads(text, 0, &e);
  cr_assert(h, "header of %s: %s", path, e.text);
  free(text);
  return h;
}

static void record_and_replay(const char *program, const char *steps, const char *name) {
  char dir[64], out[128];
  tmpdir(dir);
  snprintf(out, sizeof out, "%s/rec/%s.jsonl", dir, name);
  mdc_out r = mdc("record", "--out", out, "--", (char *)program, "--steps", (char *)steps);
  cr_assert_eq(r.rc, 0, "record: rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);

  json_t *h = first_line(out);
  char want[64];
  snprintf(want, sizeof want, "workloads/%s", name);
  cr_expect_str_eq(json_string_value(json_object_get(h, "name")), want);
  cr_expect(strstr(json_string_value(json_object_get(h, "description")), "recorded from md_wl_"));
  cr_expect(strstr(json_string_value(json_array_get(json_object_get(h, "rules"), 0)), "recorded workload: md_wl_"));
  json_t *on = json_object_get(h, "recorded_on");
  cr_expect_str_eq(json_string_value(json_object_get(on, "backend")), "sim");
  cr_expect(strstr(json_string_value(json_object_get(on, "driver")), " "), "driver name and version");
  json_decref(h);

  char *text = slurp(out);
  cr_expect(strstr(text, "\"op\": \"execute\""), "executions recorded");
  cr_expect(strstr(text, "\"op\": \"check\""), "output data checked");
  cr_expect(strstr(text, "\"as\": \"t1\""), "tokens named symbolically");
  /* the workload opened "backend=sim;seed=1": the backend is the replay's to choose */
  cr_expect(strstr(text, "\"config\": \"seed=1\""), "config without its backend");
  cr_expect(!strstr(text, "backend="), "no backend key recorded");
  free(text);

  r = mdc("replay", "--no-db", "--json", out);
  cr_assert_eq(r.rc, 0, "replay of the recording: rc %d\n%s\n%s", r.rc, r.out, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, want), "Pass", "%s", jmessage(j, want));
  json_decref(j);
  mdc_out_free(&r);
}

Test(record, sequence_recording_replays_pass) {
  record_and_replay(MD_WL_SEQUENCE, "6", "sequence");
}

Test(record, dynamic_batch_recording_replays_pass) {
  record_and_replay(MD_WL_DYNAMIC_BATCH, "4", "dynamic_batch");
}

/* The recorded checks carry the observed outputs: change one value and the replay fails. */
Test(record, a_changed_expected_value_fails) {
  char dir[64], out[128], bad[128];
  tmpdir(dir);
  snprintf(out, sizeof out, "%s/seq.jsonl", dir);
  snprintf(bad, sizeof bad, "%s/bad/seq.jsonl", dir);
  mdc_out r = mdc("record", "--out", out, "--name", "t/seq", "--", MD_WL_SEQUENCE, "--steps", "2");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  char *text = slurp(out);
  char *chk = strstr(text, "{\"op\": \"check\"");
  cr_assert(chk);
  char *val = strstr(chk, "\"f32\": [");
  cr_assert(val);
  val += 8;
  /* replace the first value by 12345 (padding with spaces keeps the rest of the line) */
  char *end = val + strcspn(val, ",]");
  memset(val, ' ', (size_t)(end - val));
  memcpy(val, "12345", 5 < end - val ? 5 : (size_t)(end - val));
  char baddir[128];
  snprintf(baddir, sizeof baddir, "%s/bad", dir);
  mkdir(baddir, 0755);
  spit(bad, text);
  free(text);
  r = mdc("replay", "--no-db", "--json", "--no-rerun", bad);
  cr_expect_eq(r.rc, 1, "rc %d", r.rc);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "t/seq"), "Fail");
  json_decref(j);
  mdc_out_free(&r);
}

/* Registered pools (SPEC 9): the recording registers them, names them in requests, follows their
 * content through the recorder's own fd (the workload closes and replaces its fds), and its header
 * is 1.1 requiring registered_pools; it replays Pass. */
Test(record, registered_pools_recording_replays_pass) {
  char dir[64], out[128];
  tmpdir(dir);
  snprintf(out, sizeof out, "%s/reg.jsonl", dir);
  mdc_out r = mdc("record", "--out", out, "--name", "t/registered", "--", MDC_TEST_REGISTERED_WL);
  cr_assert_eq(r.rc, 0, "record: rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
  json_t *h = first_line(out);
  cr_expect_str_eq(json_string_value(json_object_get(h, "mdc_trace")), "1.1");
  json_t *req = json_object_get(h, "requires");
  int has = 0;
  for (size_t i = 0; i < json_array_size(req); i++)
    has |= strcmp(json_string_value(json_array_get(req, i)), "registered_pools") == 0;
  cr_expect(has, "requires lists registered_pools");
  json_decref(h);
  char *text = slurp(out);
  cr_expect(strstr(text, "\"op\": \"register_memory\""), "registrations recorded");
  cr_expect(strstr(text, "\"registered\": \"rp1\""), "requests name the registered pool");
  cr_expect(strstr(text, "\"op\": \"unregister_memory\""), "unregistrations recorded");
  cr_expect(strstr(text, "\"op\": \"fill\""), "new input bytes recorded as a fill");
  free(text);
  r = mdc("replay", "--no-db", "--json", out);
  cr_assert_eq(r.rc, 0, "replay of the recording: rc %d\n%s\n%s", r.rc, r.out, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "t/registered"), "Pass", "%s", jmessage(j, "t/registered"));
  json_decref(j);
  mdc_out_free(&r);
}

Test(record, bad_usage) {
  mdc_out r = mdc("record", "--", MD_WL_SEQUENCE);
  cr_expect_eq(r.rc, 2, "no --out");
  mdc_out_free(&r);
  r = mdc("record", "--out", "/tmp/mdc-test-x.jsonl");
  cr_expect_eq(r.rc, 2, "no program");
  mdc_out_free(&r);
  r = mdc("record", "--out", "/tmp/mdc-test-x.jsonl", "--driver", "/nonexistent/d.so", "--", MD_WL_SEQUENCE);
  cr_expect_eq(r.rc, 2, "missing driver");
  cr_expect(strstr(r.err, "/nonexistent/d.so"));
  mdc_out_free(&r);
  r = mdc("record", "--out", "/tmp/mdc-test-x.jsonl", "--", "/nonexistent/program");
  cr_expect_neq(r.rc, 0, "a program that cannot run");
  mdc_out_free(&r);
  /* --out naming a folder: nothing can be written there, so it is refused before anything runs. */
  r = mdc("record", "--out", "/tmp", "--", "/bin/true");
  cr_expect_eq(r.rc, 2, "--out a folder: rc %d", r.rc);
  cr_expect(strstr(r.err, "a folder"), "%s", r.err);
  mdc_out_free(&r);
}

Test(record, recorder_exports_only_the_entry_point_and_needs_its_environment) {
  unsetenv("MDC_RECORD_REAL");
  unsetenv("MDC_RECORD_OUT");
  void *h = dlopen(MDC_RECORD_SO, RTLD_NOW | RTLD_LOCAL);
  cr_assert(h, "%s", dlerror());
  void *entry = dlsym(h, "md_driver_entry");
  cr_assert(entry);
  cr_expect_null(dlsym(h, "md__rec_emit"), "private names stay private");
  cr_expect_null(dlsym(h, "md__rec"), "private names stay private");
  const md_driver *(*fn)(uint32_t);
  memcpy(&fn, &entry, sizeof fn);
  cr_expect_null(fn(MD_DRIVER_ABI_VERSION), "no real driver named: no table");
  dlclose(h);
}
