/* test_causes.c - cause groups and crash stacks (issue 26), through the built mdc: the causes
 * driver (drivers/causes_driver.c) fails 220 generated traces (drivers/cause_traces.c) for three
 * causes, and every place a run is shown says so in exactly three groups, largest first; its
 * SIGSEGV case has a symbolized stack naming the function, and file:line when the driver has
 * debug information. */
#include <regex.h>

#include "test_cli_support.h"

/* Runs the cause-traces generator into dir/traces. */
static void make_traces(const char *dir, char out[256]) {
  snprintf(out, 256, "%s/traces", dir);
  cr_assert(mkdir(out, 0755) == 0);
  char *argv[] = {(char *)MDC_CAUSE_TRACES, out, NULL};
  mdc_out r = run_argv(argv, NULL);
  cr_assert_eq(r.rc, 0, "generator: %s", r.err);
  mdc_out_free(&r);
}

/* The line of the driver's source that crashes (marked MDC_TEST_CRASH_LINE). */
static int crash_line(void) {
  char *src = slurp(MDC_CAUSES_DRIVER_SRC);
  char *at = strstr(src, "/* MDC_TEST_CRASH_LINE */");
  cr_assert(at, "no MDC_TEST_CRASH_LINE in %s", MDC_CAUSES_DRIVER_SRC);
  int line = 1;
  for (char *p = src; p < at; p++) line += *p == '\n';
  free(src);
  return line;
}

/* How many lines of text match the extended regex re. */
static int count_lines(const char *text, const char *re) {
  regex_t rx;
  cr_assert(regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE) == 0);
  int n = 0;
  const char *p = text;
  regmatch_t m;
  while (*p && regexec(&rx, p, 1, &m, 0) == 0) {
    n++;
    p += m.rm_eo;
    while (*p && *p != '\n') p++;
  }
  regfree(&rx);
  return n;
}

static long jcount(json_t *g) { return (long)json_integer_value(json_object_get(g, "count")); }
static const char *jsig(json_t *g) { return json_string_value(json_object_get(g, "signature")); }

Test(causes, three_causes_show_as_three_groups_in_every_output) {
  char dir[64], traces[256], db[128], out[128];
  tmpdir(dir);
  make_traces(dir, traces);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(out, sizeof out, "%s/report", dir);
  mdc_out r = mdc("replay", "--json", "--no-rerun", "--db", db, "--driver", MDC_TEST_CAUSES_SO, traces);
  cr_assert_eq(r.rc, 1, "rc %d: %s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_assert_eq(jint(j, "cases"), 227);
  /* --json: groups, largest first, each with its count, signature and every case. */
  json_t *g = json_object_get(j, "groups");
  cr_assert_eq(json_array_size(g), 3, "groups: %s", r.out);
  cr_assert_eq(jcount(json_array_get(g, 0)), 110);
  cr_assert_eq(jcount(json_array_get(g, 1)), 70);
  cr_assert_eq(jcount(json_array_get(g, 2)), 40);
  cr_assert_str_eq(jsig(json_array_get(g, 0)),
                   "Fail: prepare_model: expected NONE, got GENERAL_FAILURE; driver: \"prepare_model: ADD of # "
                   "operands at 0x# is unsupported\"");
  cr_assert(strstr(jsig(json_array_get(g, 1)), "Fail: execute: expected NONE, got GENERAL_FAILURE; driver: \"execute: MUL on #"),
            "%s", jsig(json_array_get(g, 1)));
  cr_assert_str_eq(jsig(json_array_get(g, 2)), "Crash: SIGSEGV in causes_sub_kernel < causes_execute");
  cr_assert_eq(json_array_size(json_object_get(json_array_get(g, 2), "cases")), 40);
  /* The terminal summary: three cause lines, largest first; Warn counted on one line, never
   * among them; no case listed one by one. */
  cr_assert_eq(count_lines(r.err, "^ +[0-9]+  (Fail|Crash|Timeout|TraceError):"), 3, "summary:\n%s", r.err);
  cr_assert(strstr(r.err, "3 causes of 220 non-passing cases"), "%s", r.err);
  cr_assert(strstr(r.err, "  Warn: 4 cases ("), "%s", r.err);
  cr_assert(strstr(r.err, "110  Fail: prepare_model") < strstr(r.err, "70  Fail: execute"), "%s", r.err);
  cr_assert(strstr(r.err, "70  Fail: execute") < strstr(r.err, "40  Crash: SIGSEGV"), "%s", r.err);
  cr_assert_null(strstr(r.err, "not passing:"), "%s", r.err);
  json_decref(j);
  mdc_out_free(&r);

  /* mdc results --groups: the same three, from the store. */
  r = mdc("results", "--db", db, "--groups");
  cr_assert_eq(r.rc, 0, "%s", r.err);
  cr_assert_eq(count_lines(r.out, "^ +[0-9]+  (Fail|Crash|Timeout|TraceError):"), 3, "%s", r.out);
  cr_assert(strstr(r.out, "  40  Crash: SIGSEGV in causes_sub_kernel < causes_execute"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("results", "--db", db, "--json");
  j = out_json(&r);
  cr_assert_eq(json_array_size(json_object_get(j, "groups")), 3, "%s", r.out);
  json_decref(j);
  mdc_out_free(&r);

  /* The report: the causes table right after the totals, three groups, each a <details>; and
   * summary.md's causes table. */
  r = mdc("report", "--db", db, "--out", out);
  cr_assert_eq(r.rc, 0, "%s", r.err);
  mdc_out_free(&r);
  char p[256];
  snprintf(p, sizeof p, "%s/index.html", out);
  char *html = slurp(p);
  char *totals = strstr(html, "<section id=\"totals\">"), *causes = strstr(html, "<section id=\"causes\">");
  cr_assert(totals && causes && totals < causes, "no causes section after the totals");
  char *next = strstr(totals + 1, "<section ");
  cr_assert_eq(next, causes, "the causes are not the section after the totals");
  cr_assert_eq(count_lines(html, "<details class=\"cause\""), 3);
  free(html);
  snprintf(p, sizeof p, "%s/summary.md", out);
  char *md = slurp(p);
  cr_assert_eq(count_lines(md, "^\\| [0-9]+ \\| (Fail|Crash)"), 3, "%s", md);
  cr_assert(strstr(md, "### Causes (3)"), "%s", md);
  free(md);
}

/* The crash case of a driver: its stack in --json, the message and the store. */
static void crash_case(const char *driver, int debug) {
  char dir[64], traces[256], db[128];
  tmpdir(dir);
  make_traces(dir, traces);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--json", "--no-rerun", "--db", db, "--include", "causes/sub_003", "--driver", driver, traces);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  json_t *j = out_json(&r);
  json_t *c = json_array_get(json_object_get(j, "results"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(c, "status")), "Crash");
  json_t *stack = json_object_get(c, "stack");
  cr_assert(json_is_array(stack) && json_array_size(stack) >= 3, "%s", r.out);
  char want[128];
  snprintf(want, sizeof want, "causes_driver.c:%d", crash_line());
  int found = 0, with_line = 0;
  for (size_t i = 0; i < json_array_size(stack); i++) {
    const char *f = json_string_value(json_array_get(stack, i));
    if (strstr(f, " causes_sub_kernel+0x")) {
      found = 1;
      with_line = strstr(f, want) != NULL;
      cr_assert(strstr(f, "(libmdc_test_causes"), "frame without its object: %s", f);
    }
  }
  cr_assert(found, "no causes_sub_kernel frame: %s", r.out);
  const char *msg = json_string_value(json_object_get(c, "message"));
  cr_assert(strstr(msg, "killed by signal SIGSEGV"), "%s", msg);
  if (debug) {
    cr_assert(with_line, "no %s in the frame: %s", want, r.out);
    char in[160];
    snprintf(in, sizeof in, ", in causes_sub_kernel (%s)", want);
    cr_assert(strstr(msg, in), "message %s lacks %s", msg, in);
  } else {
    cr_assert_not(with_line, "file:line without debug information: %s", r.out);
    cr_assert(strstr(msg, ", in causes_sub_kernel (libmdc_test_causes_nodebug_driver.so)"), "%s", msg);
  }
  cr_assert_str_eq(json_string_value(json_object_get(c, "signature")), "Crash: SIGSEGV in causes_sub_kernel < causes_execute");
  json_decref(j);
  mdc_out_free(&r);
  /* The store keeps the stack with the case: mdc results shows it. */
  r = mdc("results", "--db", db, "--json");
  j = out_json(&r);
  c = json_array_get(json_object_get(j, "results"), 0);
  cr_assert(json_is_array(json_object_get(c, "stack")), "%s", r.out);
  cr_assert(strstr(json_string_value(json_object_get(c, "signature")), "causes_sub_kernel"));
  json_decref(j);
  mdc_out_free(&r);
  r = mdc("results", "--db", db);
  cr_assert(strstr(r.out, " causes_sub_kernel+0x"), "%s", r.out);
  mdc_out_free(&r);
}

Test(causes, crash_stack_names_function_and_file_line_with_debug_info) { crash_case(MDC_TEST_CAUSES_SO, 1); }

Test(causes, crash_stack_names_the_function_without_debug_info) { crash_case(MDC_TEST_CAUSES_NODEBUG_SO, 0); }

Test(causes, summary_cases_and_none) {
  char dir[64], traces[256];
  tmpdir(dir);
  make_traces(dir, traces);
  mdc_out r = mdc("replay", "--no-db", "--no-rerun", "--summary", "cases", "--include", "causes/mul_00*",
                  "--include", "causes/warn_*", "--driver", MDC_TEST_CAUSES_SO, traces);
  cr_assert_eq(r.rc, 1, "%s", r.err);
  cr_assert_eq(count_lines(r.out, "^  Fail +causes/mul_00[0-9]: "), 10, "%s", r.out);
  cr_assert(strstr(r.out, "  Warn: 4 cases ("), "%s", r.out);
  cr_assert_eq(count_lines(r.out, "^  Warn +causes/"), 0, "Warn interleaved: %s", r.out);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--no-rerun", "--summary", "none", "--include", "causes/mul_00*", "--driver",
          MDC_TEST_CAUSES_SO, traces);
  cr_assert_eq(r.rc, 1);
  cr_assert_null(strstr(r.out, "causes/mul_"), "%s", r.out);
  mdc_out_free(&r);
  r = mdc("replay", "--no-db", "--summary", "all", traces);
  cr_assert_eq(r.rc, 2);
  cr_assert(strstr(r.err, "--summary 'all': want groups, cases or none"), "%s", r.err);
  mdc_out_free(&r);
}
