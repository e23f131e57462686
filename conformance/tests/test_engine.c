/* test_engine.c - the trace replay engine against the reference driver and against wrapped
 * drivers that break one rule on purpose: good traces pass, wrong expectations fail at their
 * line, broken traces are trace errors naming file and line. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdc/engine.h"

#define T(sub, file) MDC_TEST_TRACES "/" sub "/" file

static const md_driver *ref(void) {
  char err[256];
  const md_driver *d = mdc_driver_load(NULL, NULL, err, sizeof err);
  cr_assert(d, "%s", err);
  return d;
}

/* ---- good traces pass ---- */
typedef struct good_case {
  char file[64];
} good_case;

ParameterizedTestParameters(engine, good_trace_passes) {
  static good_case cases[] = {{"basic_add.jsonl"}, {"concurrent.jsonl"}, {"newer_minor_sidecar.jsonl"}, {"v11_constructs.jsonl"},
                              {"spec_rules.jsonl"}, {"requires_left_open.jsonl"},
                              {"anonymous_custom.jsonl"}, {"v10_allocates_without_requires.jsonl"}};
  return cr_make_param_array(good_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(good_case *c, engine, good_trace_passes) {
  char path[512];
  snprintf(path, sizeof path, "%s/good/%s", MDC_TEST_TRACES, c->file);
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), path, NULL, &res);
  cr_assert_eq(v, MDC_PASS, "%s: %s %s", c->file, mdc_verdict_name(v), res.message);
  cr_assert_eq(res.message[0], '\0');
  cr_assert_gt(res.events, 0u);
}

/* ---- wrong expectations fail at their line ---- */
typedef struct fail_case {
  char file[64];
  uint32_t line;
  char says[96];     /* in the message */
  char expected[64]; /* in result.expected */
  char actual[64];   /* in result.actual */
} fail_case;

ParameterizedTestParameters(engine, wrong_expectation_fails_at_its_line) {
  static fail_case cases[] = {
      {"wrong_status.jsonl", 9, "allocate: status INVALID_ARGUMENT, expected NONE", "NONE", "INVALID_ARGUMENT"},
      {"wrong_message.jsonl", 9, "does not contain \"no such words\"", "no such words", "probability"},
      {"wrong_check.jsonl", 10, "element 1 is 4, expected 4.0999999", "f32[1] = 4.0999999", "f32[1] = 4"},
      {"wrong_check_i32.jsonl", 10, "1 of 2 elements differ", "i32[1] = -8", "i32[1] = -7"},
      {"wrong_shapes.jsonl", 9, "execute: shapes[0] = [2]", "[3]", "[2]"},
      {"wrong_timing.jsonl", 9, "expected unmeasured", "unmeasured", "on_device_ns"},
      {"wrong_leaks.jsonl", 10, "leaks.buffers = 1, expected leaks.buffers = 0", "leaks.buffers = 0", "leaks.buffers = 1"},
      {"wrong_backend.jsonl", 9, "backend \"sim\", expected \"hip\"", "hip", "sim"},
      {"wrong_supported.jsonl", 9, "supported[0] = 1", "supported[0] = 0", "supported[0] = 1"},
      {"wrong_in_block.jsonl", 12, "copy_to: status INVALID_ARGUMENT", "NONE", "INVALID_ARGUMENT"},
  };
  return cr_make_param_array(fail_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fail_case *c, engine, wrong_expectation_fails_at_its_line) {
  char path[512], where[600];
  snprintf(path, sizeof path, "%s/fail/%s", MDC_TEST_TRACES, c->file);
  snprintf(where, sizeof where, "%s:%u: ", path, c->line);
  mdc_result res;
  /* Strict messages: a message expectation is judged (the reference driver's own runs). */
  mdc_trace_opts o = {.strict_messages = 1};
  mdc_verdict v = mdc_trace_run_opts(ref(), path, &o, &res);
  cr_assert_eq(v, MDC_FAIL, "%s: %s %s", c->file, mdc_verdict_name(v), res.message);
  cr_assert_eq(res.line, c->line, "%s: line %u", c->file, res.line);
  cr_assert(strncmp(res.message, where, strlen(where)) == 0, "%s", res.message);
  cr_assert(strstr(res.message, c->says), "%s", res.message);
  cr_assert(strstr(res.expected, c->expected), "expected: %s", res.expected);
  cr_assert(strstr(res.actual, c->actual), "actual: %s", res.actual);
}

/* SPEC 8.11: a message is advice. Without strict messages a wrong message is reported with the
 * verdict (advisory) and the driver passes. */
Test(engine, a_wrong_message_is_advisory_unless_strict) {
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), T("fail", "wrong_message.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_PASS, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.advisory, "line 9:") && strstr(res.advisory, "lacks \"no such words\""), "%s", res.advisory);
}

/* ---- broken traces are trace errors naming file and line ---- */
typedef struct bad_case {
  char file[64];
  uint32_t line;
  char says[80];
} bad_case;

ParameterizedTestParameters(engine, broken_trace_is_a_trace_error) {
  static bad_case cases[] = {
      {"invalid_json.jsonl", 4, "trace: invalid JSON"},
      {"truncated.jsonl", 2, "invalid JSON"},
      {"not_object.jsonl", 4, "one JSON object"},
      {"wrong_type.jsonl", 4, "memory: 'size'"},
      {"huge_size.jsonl", 4, "over the limit"},
      {"negative_size.jsonl", 4, "is negative"},
      {"payload_overflow.jsonl", 4, "'count'"},
      {"payload_too_big.jsonl", 4, "outside its 8-byte file"},
      {"unknown_op.jsonl", 4, "unknown op 'execute_twice'"},
      {"unknown_field.jsonl", 4, "open_client: unknown field 'expcet'"},
      {"unknown_expect_field.jsonl", 4, "expect: unknown field 'statsu'"},
      {"unknown_name.jsonl", 4, "release_prepared_model: 'prepared': no object named 'pm9'"},
      {"name_reused.jsonl", 4, "name 'c' is already used (line 3)"},
      {"bad_name.jsonl", 4, "is not a name"},
      {"missing_sidecar.jsonl", 4, "not found"},
      {"sidecar_mismatch.jsonl", 4, "not the name's digest"},
      {"bad_enum.jsonl", 4, "unknown name 'TENSOR_FLOAT33'"},
      {"bad_status_name.jsonl", 4, "unknown status 'INVALID_ARG'"},
      {"bad_memory_kind.jsonl", 4, "unknown name 'ashmem2'"},
      {"bad_memory_open_fd.jsonl", 5, "a trace may only name descriptors it made"},
      {"v11_field_in_v10.jsonl", 4, "'when' needs trace format 1.1"},
      {"allocate_without_memory_domains.jsonl", 6, "must list \"memory_domains\" (trace format 1.1"},
      {"registered_pools_listed_in_1_0.jsonl", 4, "unknown capability 'registered_pools'"},
      {"when_malformed.jsonl", 4, "'when' takes {\"produced\": NAME}"},
      {"when_unknown_name.jsonl", 4, "no earlier event is named 'nothing'"},
      {"expect_tally_no_bounds.jsonl", 4, "give 'exactly', 'at_least' or 'at_most'"},
      {"expect_unpredictable_unknown.jsonl", 4, "'toks' is no collection"},
      {"failed_name_used.jsonl", 5, "'t' was never produced (its call at line 4 failed)"},
      {"wrong_kind_name.jsonl", 5, "'m' is a memory"},
      {"lane_outside.jsonl", 4, "unknown field 'lane'"},
      {"lane_range.jsonl", 5, "'lane': 2 is outside [0, 1]"},
      {"missing_end.jsonl", 4, "no end_concurrent"},
      {"nested.jsonl", 5, "do not nest"},
      {"stray_end.jsonl", 4, "without a concurrent block"},
      {"not_in_block.jsonl", 5, "not allowed inside a concurrent block"},
      {"lanes_share_memory.jsonl", 17, "memory 'o1' is written by lane 1 (line 16) and written by lane 2"},
      {"lane_reads_others_output.jsonl", 16, "memory 'o0' is written by lane 0 (line 15) and read by lane 1"},
      {"device_closed.jsonl", 5, "'dev' is closed"},
      {"check_outside.jsonl", 5, "outside its 8-byte file"},
      {"odd_hex.jsonl", 4, "odd number of digits"},
      {"client_ambiguous.jsonl", 5, "2 clients are open"},
      {"error_after_fail.jsonl", 5, "unknown field 'bogus'"},
      {"newer_major.jsonl", 1, "trace format 2.0 is newer than this mdc (reads 1.x)"},
      {"no_rules.jsonl", 1, "missing field 'rules'"},
      {"no_header.jsonl", 1, "must be the header"},
      {"empty.jsonl", 1, "no header"},
      {"header_unknown_field.jsonl", 1, "header: unknown field 'expcet'"},
      {"registered_without_requires.jsonl", 2, "must list \"registered_pools\""},
      {"registered_in_1_0.jsonl", 2, "pools[0]: 'registered' needs trace format 1.1"},
      {"close_fd_twice.jsonl", 4, "'memory': its fd was closed by an earlier close_fd"},
  };
  return cr_make_param_array(bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_case *c, engine, broken_trace_is_a_trace_error) {
  char path[512], where[600];
  snprintf(path, sizeof path, "%s/bad/%s", MDC_TEST_TRACES, c->file);
  snprintf(where, sizeof where, "%s:%u: ", path, c->line);
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), path, NULL, &res);
  cr_assert_eq(v, MDC_TRACE_ERROR, "%s: %s %s", c->file, mdc_verdict_name(v), res.message);
  cr_assert(strncmp(res.message, where, strlen(where)) == 0, "%s: want prefix %s", res.message, where);
  cr_assert(strstr(res.message, c->says), "%s", res.message);
}

Test(engine, missing_file_is_a_trace_error) {
  mdc_result res;
  cr_assert_eq(mdc_trace_run(ref(), MDC_TEST_TRACES "/no/such.jsonl", NULL, &res), MDC_TRACE_ERROR);
  cr_assert(strstr(res.message, "no/such.jsonl:0: trace: cannot open"), "%s", res.message);
}

/* A line past the 64 MiB limit is a trace error found without holding the line: the reader
 * stops at the limit (the same holds for /dev/zero, which `mdc replay` refuses as a device). */
Test(engine, a_line_over_the_limit_is_a_trace_error) {
  char path[] = "/tmp/mdc-long-line-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "{\"mdc_trace\": \"1.0\", \"name\": \"t/long\", \"rules\": [\"x\"]}\n");
  static char chunk[1 << 16];
  memset(chunk, ' ', sizeof chunk);
  for (int i = 0; i <= (64 << 20) / (int)sizeof chunk; i++) fwrite(chunk, 1, sizeof chunk, f);
  fclose(f);
  mdc_result res;
  cr_expect_eq(mdc_trace_run(ref(), path, NULL, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, ":2: trace: line longer than 67108864 bytes"), "%s", res.message);
  unlink(path);
  cr_expect_eq(mdc_trace_run(ref(), "/dev/zero", NULL, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, "not a regular file (a character device)"), "%s", res.message);
}

/* The reader reads 64 KiB at a time: a line that spans reads, CRLF endings, comments and a
 * last line without '\n' read as lines, and the lines after a long one keep their numbers. */
static void write_spanning(const char *path, const char *last) {
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fprintf(f, "{\"mdc_trace\": \"1.0\", \"name\": \"t/span\", \"rules\": [\"x\"]}\r\n");
  fprintf(f, "# a comment\r\n\n");
  fprintf(f, "{\"op\": \"open_device\", \"as\": \"d\",");
  for (int i = 0; i < 150000; i++) fputc(i % 2 ? ' ' : '\t', f);   /* spans three reads */
  fprintf(f, "\"config\": \"backend=sim\"}\r\n");
  fprintf(f, "%s", last);
  fclose(f);
}

Test(engine, lines_that_span_reads_keep_their_bytes_and_numbers) {
  char path[] = "/tmp/mdc-span-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  mdc_result res;
  write_spanning(path, "{\"op\": \"close_device\", \"device\": \"d\"}");   /* no '\n' */
  cr_expect_eq(mdc_trace_run(ref(), path, NULL, &res), MDC_PASS, "%s", res.message);
  write_spanning(path, "\n{\"op\": \"close_device\", \"device\": \"d\"}\n{\"op\": \"nope\"}\n");
  cr_expect_eq(mdc_trace_run(ref(), path, NULL, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, ":7: "), "%s", res.message);
  /* a NUL byte inside a line is that line's invalid JSON, not the line's end */
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"mdc_trace\": \"1.0\", \"name\": \"t/nul\", \"rules\": [\"x\"]}\n{\"op\": ");
  fputc(0, f);
  fprintf(f, "\"open_device\"}\n");
  fclose(f);
  cr_expect_eq(mdc_trace_run(ref(), path, NULL, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, ":2: trace: invalid JSON"), "%s", res.message);
  unlink(path);
}

/* A trace given as bytes (mdc_trace_opts.bytes) reads as the same trace from a file would, and
 * its messages name the path given. */
Test(engine, a_trace_given_as_bytes_reads_like_its_file) {
  static const char good[] = "{\"mdc_trace\": \"1.0\", \"name\": \"t/bytes\", \"rules\": [\"x\"]}\n"
                             "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
                             "{\"op\": \"close_device\", \"device\": \"d\"}";
  mdc_trace_opts o = {.bytes = good, .n_bytes = sizeof good - 1};
  mdc_result res;
  cr_expect_eq(mdc_trace_run_opts(ref(), "/nowhere/bytes.jsonl", &o, &res), MDC_PASS, "%s", res.message);
  o.n_bytes = 40;   /* the header cut short */
  cr_expect_eq(mdc_trace_run_opts(ref(), "/nowhere/bytes.jsonl", &o, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, "/nowhere/bytes.jsonl:1: trace: invalid JSON"), "%s", res.message);
  o.n_bytes = 0;
  cr_expect_eq(mdc_trace_run_opts(ref(), "/nowhere/bytes.jsonl", &o, &res), MDC_TRACE_ERROR);
  cr_expect(strstr(res.message, "the trace is empty"), "%s", res.message);
}

static mdc_verdict run_text(const char *text, mdc_result *res) {
  mdc_trace_opts o = {.bytes = text, .n_bytes = strlen(text), .keep_files = 1};
  return mdc_trace_run_opts(ref(), "/nowhere/kept.jsonl", &o, res);
}

/* With keep_files a pool's file outlives its trace and serves a later one: that pool reads
 * zero however the earlier one was written, at the same size (kept mapped) or another, small
 * or past the 64 KiB a kept file stays mapped at, memfd or temporary file; and a memory whose
 * fd a replace_fd pointed at another pool's file is not kept as its own. */
Test(engine, a_kept_file_reads_zero_in_the_next_trace) {
  static const char *kinds[] = {"ashmem", "mmap_fd"};
  static const unsigned sizes[][2] = {{64, 64}, {64, 32}, {200000, 200000}, {200000, 4096}, {4096, 200000}};
  char text[2048];
  mdc_result res;
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      snprintf(text, sizeof text,
               "{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_a\", \"rules\": [\"x\"]}\n"
               "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"%s\", \"size\": %u, \"data\": {\"fill\": 165, \"bytes\": %u}}\n"
               "{\"op\": \"memory\", \"as\": \"n\", \"kind\": \"%s\", \"size\": %u, \"data\": {\"fill\": 90, \"bytes\": %u}}\n",
               kinds[k], sizes[i][0], sizes[i][0], kinds[k], sizes[i][0], sizes[i][0]);
      cr_assert_eq(run_text(text, &res), MDC_PASS, "%s", res.message);
      snprintf(text, sizeof text,
               "{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_b\", \"rules\": [\"x\"]}\n"
               "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"%s\", \"size\": %u}\n"
               "{\"op\": \"memory\", \"as\": \"n\", \"kind\": \"%s\", \"size\": %u}\n"
               "{\"op\": \"check\", \"memory\": \"m\", \"type\": \"u8\", \"data\": {\"fill\": 0, \"bytes\": %u}}\n"
               "{\"op\": \"check\", \"memory\": \"n\", \"type\": \"u8\", \"data\": {\"fill\": 0, \"bytes\": %u}}\n",
               kinds[k], sizes[i][1], kinds[k], sizes[i][1], sizes[i][1], sizes[i][1]);
      cr_assert_eq(run_text(text, &res), MDC_PASS, "%s %u then %u: %s", kinds[k], sizes[i][0], sizes[i][1], res.message);
    }
  /* replace_fd: m's fd names n's file. Kept as m's, a later pool would be filled through one
   * file (the replayer's mapping) and read by the driver through another (the fd). */
  cr_assert_eq(run_text("{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_c\", \"rules\": [\"x\"]}\n"
                        "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"ashmem\", \"size\": 8}\n"
                        "{\"op\": \"memory\", \"as\": \"n\", \"kind\": \"ashmem\", \"size\": 8}\n"
                        "{\"op\": \"replace_fd\", \"memory\": \"m\", \"with\": \"n\"}\n",
                        &res), MDC_PASS, "%s", res.message);
  static const char through_driver[] =
      "{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_d\", \"rules\": [\"x\"]}\n"
      "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
      "{\"op\": \"open_client\", \"as\": \"c\"}\n"
      "{\"op\": \"model\", \"as\": \"add\", \"operands\": [{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, "
      "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, {\"type\": \"INT32\", \"lifetime\": \"CONSTANT_COPY\", "
      "\"offset\": 0, \"length\": 4}, {\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], \"operations\": "
      "[{\"type\": \"ADD\", \"inputs\": [0, 1, 2], \"outputs\": [3]}], \"inputs\": [0, 1], \"outputs\": [3], \"operand_values\": {\"i32\": [0]}, \"pools\": []}\n"
      "{\"op\": \"prepare_model\", \"model\": \"add\", \"as\": \"pm\"}\n"
      "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [3, 4]}}\n"
      "{\"op\": \"memory\", \"as\": \"n\", \"kind\": \"ashmem\", \"size\": 8, \"data\": {\"f32\": [5, 6]}}\n"
      "{\"op\": \"memory\", \"as\": \"back\", \"kind\": \"ashmem\", \"size\": 8}\n"
      "{\"op\": \"execute\", \"prepared\": \"pm\", \"request\": {\"inputs\": [{\"pool\": 0, \"length\": 8}, {\"pool\": 1, \"length\": 8}], \"outputs\": [{\"pool\": 2, \"length\": 8}], "
      "\"pools\": [{\"memory\": \"m\"}, {\"memory\": \"n\"}, {\"memory\": \"back\"}]}}\n"
      "{\"op\": \"check\", \"memory\": \"back\", \"type\": \"f32\", \"values\": {\"f32\": [8, 10]}}\n";
  cr_assert_eq(run_text(through_driver, &res), MDC_PASS, "%s", res.message);
  mdc_trace_drop_kept_files();
}

/* A driver holds a pool's fd while the pool lives and may truncate the file: the kept mapping
 * then reaches past the file's end, and zeroing it for the next pool must not fault. */
Test(engine, a_kept_file_a_driver_truncated_is_not_zeroed_through_its_old_mapping) {
  static const char one[] = "{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_t\", \"rules\": [\"x\"]}\n"
                            "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"ashmem\", \"size\": 8192, \"data\": {\"fill\": 3, \"bytes\": 8192}}\n";
  static const char two[] = "{\"mdc_trace\": \"1.1\", \"name\": \"t/kept_u\", \"rules\": [\"x\"]}\n"
                            "{\"op\": \"memory\", \"as\": \"m\", \"kind\": \"ashmem\", \"size\": 8192}\n"
                            "{\"op\": \"check\", \"memory\": \"m\", \"type\": \"u8\", \"data\": {\"fill\": 0, \"bytes\": 8192}}\n";
  mdc_result res;
  cr_assert_eq(run_text(one, &res), MDC_PASS, "%s", res.message);
  /* what a driver could do with the fd it was given: the kept memfd cut to 0 bytes */
  int cut = 0;
  for (int fd = 3; fd < 1024; fd++) {
    char link[64], target[128];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (strstr(target, "memfd:mdc-pool") && ftruncate(fd, 0) == 0) cut++;
  }
  cr_assert_gt(cut, 0, "no kept memfd found");
  cr_assert_eq(run_text(two, &res), MDC_PASS, "%s", res.message);
  mdc_trace_drop_kept_files();
}

Test(engine, header_is_read_alone) {
  mdc_trace_header h;
  char err[256];
  cr_assert_eq(mdc_trace_read_header(T("good", "requires_left_open.jsonl"), &h, err, sizeof err), 0, "%s", err);
  cr_assert_str_eq(h.name, "engine/requires_left_open");
  cr_assert_str_eq(h.requires, "sim,memory_domains");
  cr_assert_str_eq(h.tags, "engine");
  cr_assert_eq(h.must_pass, 1);
  cr_assert_eq(h.major, 1);
  cr_assert_eq(mdc_trace_read_header(T("bad", "newer_major.jsonl"), &h, err, sizeof err), -1);
  cr_assert(strstr(err, "newer_major.jsonl:1: header: trace format 2.0 is newer"), "%s", err);
}

Test(engine, driver_loads_by_path_and_refuses_a_missing_one) {
  char err[256];
  void *dl = NULL;
  const md_driver *d = mdc_driver_load(MDC_TEST_DRIVER_SO, &dl, err, sizeof err);
  cr_assert(d, "%s", err);
  mdc_result res;
  cr_assert_eq(mdc_trace_run(d, T("good", "basic_add.jsonl"), NULL, &res), MDC_PASS, "%s", res.message);
  mdc_driver_unload(dl);
  cr_assert_null(mdc_driver_load("/no/such/driver.so", &dl, err, sizeof err));
  cr_assert(strstr(err, "/no/such/driver.so"), "%s", err);
}

/* ---- wrapped drivers that break one rule ---- */
static const md_driver *real;
static md_driver fake;
static int closed_clients, closed_devices;

static md_status caps_hip(md_device *d, md_capabilities *out) {
  md_status st = real->get_capabilities(d, out);
  snprintf(out->backend, sizeof out->backend, "hip");
  return st;
}

static md_status execute_leaves_shape(md_device *d, md_handle c, md_handle p, const md_request *r,
                                      md_output_shape *shapes, uint32_t n, md_timing *t) {
  md_status st = real->execute(d, c, p, r, shapes, n, t);
  if (st != MD_NONE && n) shapes[0].rank = 1; /* breaks SPEC 4 */
  return st;
}

static md_status execute_leaves_timing(md_device *d, md_handle c, md_handle p, const md_request *r,
                                       md_output_shape *shapes, uint32_t n, md_timing *t) {
  md_status st = real->execute(d, c, p, r, shapes, n, t);
  if (st != MD_NONE) t->in_driver_ns = 5; /* breaks SPEC 4 */
  return st;
}

static md_status execute_writes_no_shape(md_device *d, md_handle c, md_handle p, const md_request *r,
                                         md_output_shape *shapes, uint32_t n, md_timing *t) {
  md_output_shape keep[4];
  if (n) memcpy(keep, shapes, sizeof keep[0]); /* what mdc put there */
  md_status st = real->execute(d, c, p, r, shapes, n, t);
  if (n) shapes[0] = keep[0]; /* as if the driver never wrote shapes[0] */
  return st;
}

static md_status close_client_writes_no_report(md_device *d, md_handle c, md_leak_report *l) {
  return real->close_client(d, c, NULL);
  (void)l;
}

/* A driver whose free_buffer always succeeds: three lanes freeing one buffer all get NONE. */
static md_status free_always_ok(md_device *d, md_handle c, md_token t) {
  real->free_buffer(d, c, t);
  return MD_NONE;
}

/* A driver with sequential tokens (the vendor of SPEC 8.12's example): it hands out 1, 2, 3...
 * and maps them back to the real ones. */
static md_token seq_real[4096];
static uint64_t seq_next;
static md_token seq_to_real(md_token t) {
  return t >= 1 && t <= seq_next && t < 4096 ? seq_real[t] : t;
}
static md_status seq_allocate(md_device *d, md_handle c, const md_buffer_desc *desc, const md_handle *p, uint32_t np,
                              const md_buffer_role *in, uint32_t nin, const md_buffer_role *out, uint32_t nout,
                              md_token *tok) {
  md_token t = 0;
  md_status st = real->allocate(d, c, desc, p, np, in, nin, out, nout, &t);
  if (st == MD_NONE && seq_next + 1 < 4096) {
    seq_real[++seq_next] = t;
    *tok = seq_next;
  }
  return st;
}
static md_status seq_free(md_device *d, md_handle c, md_token t) { return real->free_buffer(d, c, seq_to_real(t)); }

/* A vendor-like driver: its own backend name, and no fault plans (faults= is an unknown key). */
static md_status open_refusing_faults(const char *config, md_device **out) {
  if (config && strstr(config, "faults=")) {
    *out = NULL;
    return MD_INVALID_ARGUMENT;
  }
  return real->open_device(config, out);
}

static md_status count_close_client(md_device *d, md_handle c, md_leak_report *l) {
  closed_clients++;
  return real->close_client(d, c, l);
}

static void count_close_device(md_device *d) {
  closed_devices++;
  real->close_device(d);
}

static const md_driver *wrap(void) {
  real = ref();
  fake = *real;
  return &fake;
}

Test(engine, requires_unmet_is_not_supported) {
  wrap();
  fake.get_capabilities = caps_hip;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "requires_left_open.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_assert(strstr(res.message, "requires 'sim'"), "%s", res.message);
}

Test(engine, failure_with_a_shape_breaks_spec4) {
  wrap();
  fake.execute = execute_leaves_shape;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "requires_left_open.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_assert_eq(res.line, 9);
  cr_assert(strstr(res.message, "shapes[0] has rank 1 (SPEC 4"), "%s", res.message);
}

Test(engine, failure_with_a_timing_breaks_spec4) {
  wrap();
  fake.execute = execute_leaves_timing;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "requires_left_open.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_assert_eq(res.line, 9);
  cr_assert(strstr(res.message, "in_driver_ns 5"), "%s", res.message);
}

/* A value mdc filled in itself (0xA5) is shown as such, not as the driver's. */
Test(engine, an_unwritten_shape_is_named_as_unwritten) {
  wrap();
  fake.execute = execute_writes_no_shape;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "basic_add.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "the driver did not write shapes[0]"), "%s", res.message);
  cr_expect(strstr(res.message, "SPEC 4"), "%s", res.message);
  cr_expect_str_eq(res.event, "execute");
  cr_expect(res.rule[0], "a Fail names the rules the trace pins");
}

Test(engine, an_unwritten_leak_report_is_named_as_unwritten) {
  wrap();
  fake.close_client = close_client_writes_no_report;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "spec_rules.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.actual, "not written by the driver"), "%s | %s", res.message, res.actual);
  cr_expect_str_eq(res.event, "close_client");
}

Test(engine, a_failed_call_keeps_the_drivers_message_and_the_rules) {
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), T("fail", "wrong_status.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s", res.message);
  cr_expect(res.event[0], "event named");
  cr_expect(res.rule[0], "rules named");
}

/* The progress page (where a crash happened) and the verbose log (mdc replay -v). */
Test(engine, progress_and_verbose_log_follow_the_events) {
  volatile uint32_t line = 0;
  volatile char op[32] = {0};
  char *log = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&log, &len);
  mdc_trace_opts o = {.line = &line, .op = op, .op_len = sizeof op, .verbose = f};
  mdc_result res;
  cr_assert_eq(mdc_trace_run_opts(ref(), T("good", "basic_add.jsonl"), &o, &res), MDC_PASS, "%s", res.message);
  fclose(f);
  cr_expect_gt(line, 1u);
  cr_expect_str_eq((const char *)op, "close_device");
  cr_expect(strstr(log, ": execute {"), "%s", log);
  cr_expect(strstr(log, "  -> NONE"), "%s", log);
  free(log);
}

/* `requires` is judged even when the trace's first open_device fails: a `sim` trace on a driver
 * that refuses faults= is NotSupported, not Fail. */
Test(engine, requires_are_judged_when_no_device_opens) {
  wrap();
  fake.open_device = open_refusing_faults;
  fake.get_capabilities = caps_hip;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, MDC_CORPUS "/faults/alloc_fail_is_transient.jsonl", NULL, &res);
  cr_assert_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "requires 'sim'"), "%s", res.message);
}

Test(engine, a_tally_catches_two_frees_of_one_buffer) {
  wrap();
  fake.free_buffer = free_always_ok;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "v11_constructs.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "tally 'frees': NONE 3 times, expected exactly 1"), "%s", res.message);
}

Test(engine, sequential_tokens_are_predictable) {
  wrap();
  seq_next = 0;
  fake.allocate = seq_allocate;
  fake.free_buffer = seq_free;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "v11_constructs.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "handles are predictable") && strstr(res.message, "SPEC 8.12"), "%s", res.message);
}

Test(engine, what_the_trace_left_open_is_closed) {
  wrap();
  fake.close_client = count_close_client;
  fake.close_device = count_close_device;
  closed_clients = closed_devices = 0;
  mdc_result res;
  cr_assert_eq(mdc_trace_run(&fake, T("good", "requires_left_open.jsonl"), NULL, &res), MDC_PASS, "%s",
               res.message);
  cr_assert_eq(closed_clients, 1);
  cr_assert_eq(closed_devices, 1);
  /* basic_add closes its own: nothing more is closed */
  closed_clients = closed_devices = 0;
  cr_assert_eq(mdc_trace_run(&fake, T("good", "basic_add.jsonl"), NULL, &res), MDC_PASS, "%s", res.message);
  cr_assert_eq(closed_clients, 1);
  cr_assert_eq(closed_devices, 1);
}

Test(engine, failed_trace_still_closes_its_device) {
  wrap();
  fake.close_device = count_close_device;
  closed_devices = 0;
  mdc_result res;
  cr_assert_eq(mdc_trace_run(&fake, T("fail", "wrong_in_block.jsonl"), NULL, &res), MDC_FAIL);
  cr_assert_eq(closed_devices, 1);
}

Test(engine, replay_config_is_merged_into_the_first_open_device) {
  /* The trace names backend=sim; an unknown key from the replay reaches the driver, which
   * refuses it: the first open_device fails (its expectation is NONE). */
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), T("good", "basic_add.jsonl"), "no_such_key=1", &res);
  cr_assert_eq(v, MDC_FAIL, "%s", res.message);
  cr_assert_eq(res.line, 3);
  cr_assert(strstr(res.message, "no_such_key"), "%s", res.message);
  /* The trace's own keys win over the replay's. */
  cr_assert_eq(mdc_trace_run(ref(), T("good", "basic_add.jsonl"), "backend=hip;seed=3", &res), MDC_PASS,
               "%s", res.message);
}

/* ---- a trace reads with its own version's rules (docs/trace-format.md, "Versions") ---- */

/* The test trace at path with its header's "1.0" made ver, in a malloc'd string. */
static char *with_version(const char *path, const char *ver) {
  FILE *f = fopen(path, "r");
  cr_assert(f, "%s", path);
  static char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char *at = strstr(text, "\"mdc_trace\": \"1.0\"");
  cr_assert(at, "%s has no 1.0 header", path);
  char *out = malloc(n + 16);
  cr_assert(out);
  snprintf(out, n + 16, "%.*s\"mdc_trace\": \"%s\"%s", (int)(at - text), text, ver,
           at + strlen("\"mdc_trace\": \"1.0\""));
  return out;
}

/* 1.0 never asked a trace to list memory_domains; 1.1 does. The same lines pass at 1.0 and are
 * a trace error at 1.1 (and at a newer minor, whose rules include 1.1's). */
Test(engine, a_1_0_trace_that_allocates_need_not_list_memory_domains) {
  mdc_result res;
  mdc_verdict v = mdc_trace_run(ref(), T("good", "v10_allocates_without_requires.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_PASS, "%s %s", mdc_verdict_name(v), res.message);
  static const char *const later[] = {"1.1", "1.7"};
  for (int i = 0; i < 2; i++) {
    char *text = with_version(T("good", "v10_allocates_without_requires.jsonl"), later[i]);
    mdc_trace_opts o = {.bytes = text, .n_bytes = strlen(text)};
    v = mdc_trace_run_opts(ref(), "/nowhere/v11.jsonl", &o, &res);
    free(text);
    cr_expect_eq(v, MDC_TRACE_ERROR, "%s: %s %s", later[i], mdc_verdict_name(v), res.message);
    cr_expect_eq(res.line, 9u, "%s: %s", later[i], res.message);
    cr_expect(strstr(res.message, "must list \"memory_domains\""), "%s", res.message);
  }
}

/* A driver that says it has no memory domains (supports_memory_domains 0). */
static md_status caps_no_domains(md_device *d, md_capabilities *out) {
  md_status st = real->get_capabilities(d, out);
  out->supports_memory_domains = 0;
  return st;
}

/* What a 1.0 trace needs is inferred and judged as if listed: NotSupported on a driver without
 * it, at the first open_device, whatever the trace does before its allocate; an allocate that
 * must fail needs nothing. */
Test(engine, an_inferred_requirement_is_not_supported_by_a_driver_without_it) {
  wrap();
  fake.get_capabilities = caps_no_domains;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, T("good", "v10_allocates_without_requires.jsonl"), NULL, &res);
  cr_assert_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect_eq(res.line, 5u, "%s", res.message);
  cr_expect(strstr(res.message, "requires 'memory_domains' (inferred from line 9: a 1.0 trace need not list it)"),
            "%s", res.message);
  /* A trace of the frozen 1.0 corpus, as it was written then. */
  v = mdc_trace_run(&fake, MDC_COMPAT "/1.0/copy/roundtrip_known_buffer.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "(inferred from line 8"), "%s", res.message);
  /* The same trace as the corpus has it now, its need listed, gets the same verdict. */
  v = mdc_trace_run(&fake, MDC_CORPUS "/copy/roundtrip_known_buffer.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "requires 'memory_domains', which"), "%s", res.message);
  /* Only an allocate that must fail: validation any driver does, nothing inferred. */
  static const char refused[] =
      "{\"mdc_trace\": \"1.0\", \"name\": \"t/refused\", \"rules\": [\"x\"]}\n"
      "{\"op\": \"open_device\", \"as\": \"dev\", \"config\": \"backend=sim\"}\n"
      "{\"op\": \"open_client\", \"as\": \"c\"}\n"
      "{\"op\": \"allocate\", \"prepared\": [], \"as\": \"t\", \"expect\": {\"status\": \"INVALID_ARGUMENT\"}}\n";
  mdc_trace_opts o = {.bytes = refused, .n_bytes = sizeof refused - 1};
  v = mdc_trace_run_opts(&fake, "/nowhere/refused.jsonl", &o, &res);
  cr_expect_eq(v, MDC_PASS, "%s %s", mdc_verdict_name(v), res.message);
}

/* ---- registered pools (SPEC 9): optional entries of the table ---- */
#include "md/loader.h"

Test(engine, a_table_without_registered_pools_is_not_supported_for_them) {
  mdc_result res;
  /* A v1-size table: whatever lies past its end, it has no register_memory. */
  wrap();
  fake.struct_size = (uint32_t)MD_DRIVER_SIZE_V1;
  mdc_verdict v = mdc_trace_run(&fake, MDC_CORPUS "/registered/inputs_and_outputs_roundtrip.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "registered_pools"), "%s", res.message);
  /* The request rule every driver owes (is_token 2 with no pool handle: INVALID_ARGUMENT). */
  v = mdc_trace_run(&fake, MDC_CORPUS "/registered/not_a_pool_handle_rejected_by_every_driver.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_PASS, "%s %s", mdc_verdict_name(v), res.message);
  /* A full-size table with a NULL entry lacks it too. */
  wrap();
  fake.unregister_memory = NULL;
  v = mdc_trace_run(&fake, MDC_CORPUS "/registered/dead_after_unregister.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_NOT_SUPPORTED, "%s %s", mdc_verdict_name(v), res.message);
  wrap();
  v = mdc_trace_run(&fake, MDC_CORPUS "/registered/dead_after_unregister.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_PASS, "%s %s", mdc_verdict_name(v), res.message);
}

/* A driver whose pools are not bound to their client fails the binding trace where it says. */
static md_status unregister_anyones(md_device *d, md_handle c, md_handle pool) {
  md_status st = real->unregister_memory(d, c, pool);
  return st == MD_INVALID_ARGUMENT ? MD_NONE : st;   /* breaks SPEC 9 / SPEC 5 */
}

Test(engine, registered_pool_rules_fail_a_driver_that_breaks_them) {
  wrap();
  fake.unregister_memory = unregister_anyones;
  mdc_result res;
  mdc_verdict v = mdc_trace_run(&fake, MDC_CORPUS "/registered/bound_to_its_client.jsonl", NULL, &res);
  cr_expect_eq(v, MDC_FAIL, "%s %s", mdc_verdict_name(v), res.message);
  cr_expect(strstr(res.message, "unregister_memory"), "%s", res.message);
}

