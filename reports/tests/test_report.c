/* test_report.c - mdc_report_write and mdc_report_compare on stores the tests write (the
 * fixture, or a few runs through the API): every section present and in order, self-contained
 * (no URL, no external src or href), well-formed, anchors that resolve; junit.xml valid against
 * the JUnit schema CI systems read (transcribed below); summary.md with its counts first;
 * regressions, fixes and the other changes against each kind of baseline; interrupted and killed
 * runs; long tables cut with a count; hostile bytes; bad input refused with nothing written. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <libxml/xmlschemas.h>
#include <sys/wait.h>

#include "fixture.h"
#include "mdc/report.h"
#include "mdc/store.h"
#include "store_test.h"
#include "xml_check.h"

TestSuite(report, .init = st_setup, .fini = st_teardown);

/* ---- helpers ---- */

static char *slurp_text(const char *path) {
  size_t len;
  unsigned char *b = st_slurp(path, &len);
  b[len] = 0;
  return (char *)b;
}

static int write_report(const char *db, const char *out, const char *run, const char *baseline, uint32_t max_rows,
                        char *msg, size_t len) {
  mdc_report_opts o = {.db = db, .out_dir = out, .run = run, .baseline = baseline, .max_rows = max_rows};
  return mdc_report_write(&o, msg, len);
}

static const char *out_file(const char *out, const char *name) {
  static char p[1024];
  cr_assert_lt(snprintf(p, sizeof p, "%s/%s", out, name), (int)sizeof p);
  return p;
}

/* The number of entries of the test folder whose name starts with prefix (temporary folders a
 * report leaves beside its --out are named "<out>.tmp-..."). */
static int leftovers(const char *prefix) {
  DIR *d = opendir(st_dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* The number of entries in dir besides . and ... */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* The page's checks that do not depend on its content: well-formed, self-contained, unique ids,
 * anchors that resolve, and the header and totals first. Returns the parsed document. */
static xmlDocPtr check_page(const char *html) {
  cr_assert(strncmp(html, "<!DOCTYPE html>", 15) == 0, "no HTML5 doctype");
  cr_expect_null(strstr(html, "http"), "the page names a URL: ...%.80s", strstr(html, "http"));
  cr_expect_null(strstr(html, " src="), "an external resource (src)");
  cr_expect_null(strstr(html, "<link"), "an external resource (link)");
  cr_expect_null(strstr(html, "@import"), "an external resource (CSS import)");
  cr_expect_null(strstr(html, "url("), "an external resource (CSS url)");
  xmlDocPtr d = xc_parse(html, strlen(html));
  cr_assert_not_null(d, "index.html is not well-formed: %s", xc_err);
  xmlNodePtr root = xmlDocGetRootElement(d);
  cr_expect_str_eq((const char *)root->name, "html");
  cr_expect_str_eq(xc_attr(root, "lang"), "en");
  cr_expect_not_null(xc_find_attr(root, "charset", "utf-8"));
  cr_expect_eq(xc_count(root, "title"), 1 + xc_count(xc_find(root, "body"), "title"), "one page title");
  cr_expect_eq(xc_count(root, "h1"), 1);
  /* Every href is an anchor of this page, and every anchor's target exists; ids are unique. */
  char *ids[512];
  int nids = 0;
  struct { xmlNodePtr n; } stack[4096];
  int sp = 0;
  stack[sp++].n = root;
  while (sp) {
    xmlNodePtr n = stack[--sp].n;
    for (; n; n = n->next) {
      if (n->type != XML_ELEMENT_NODE) continue;
      xmlChar *id = xmlGetProp(n, (const xmlChar *)"id");
      if (id) {
        for (int i = 0; i < nids; i++) cr_expect_str_neq(ids[i], (char *)id, "id '%s' twice", id);
        if (nids < 512) ids[nids++] = strdup((char *)id);
        xmlFree(id);
      }
      if (n->children && sp < 4096) stack[sp++].n = n->children;
    }
  }
  stack[0].n = root;
  sp = 1;
  while (sp) {
    xmlNodePtr n = stack[--sp].n;
    for (; n; n = n->next) {
      if (n->type != XML_ELEMENT_NODE) continue;
      xmlChar *href = xmlGetProp(n, (const xmlChar *)"href");
      if (href) {
        cr_expect_eq(href[0], '#', "href '%s' leaves the page", href);
        int found = 0;
        for (int i = 0; i < nids; i++) found |= !strcmp(ids[i], (char *)href + 1);
        cr_expect(found, "anchor '%s' has no target", href);
        xmlFree(href);
      }
      if (n->children && sp < 4096) stack[sp++].n = n->children;
    }
  }
  for (int i = 0; i < nids; i++) free(ids[i]);
  /* The first screen: the run header is the body's first element, the totals main's first. */
  xmlNodePtr body = xc_find(root, "body"), first = body->children;
  while (first && first->type != XML_ELEMENT_NODE) first = first->next;
  cr_expect_str_eq(xc_attr(first, "id"), "run", "the run header comes first");
  xmlNodePtr main_ = xc_find(body, "main"), sec = main_->children;
  while (sec && sec->type != XML_ELEMENT_NODE) sec = sec->next;
  cr_expect_str_eq(xc_attr(sec, "id"), "totals", "the totals come right after it");
  xmlNodePtr script = xc_find(root, "script");
  cr_expect(!script || !xmlHasProp(script, (const xmlChar *)"src"), "no external script");
  return d;
}

/* The ids of main's sections, in order, joined by spaces. */
static void section_order(xmlDocPtr d, char *out, size_t len) {
  out[0] = 0;
  xmlNodePtr main_ = xc_find(xmlDocGetRootElement(d), "main");
  for (xmlNodePtr n = main_->children; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    size_t k = strlen(out);
    snprintf(out + k, len - k, "%s%s", k ? " " : "", xc_attr(n, "id"));
  }
}

/* A transcription of the JUnit XML schema CI systems read (the Ant/Jenkins junit-10 shape):
 * testsuites > testsuite (name, tests required) > properties?, testcase*, system-out?,
 * system-err?; testcase (name required, classname, time) > skipped? | error* | failure*, then
 * system-out*, system-err*. */
static const char junit_xsd[] =
  "<xs:schema xmlns:xs=\"http://www.w3.org/2001/XMLSchema\" elementFormDefault=\"qualified\">"
  "<xs:simpleType name=\"SUREFIRE_TIME\"><xs:restriction base=\"xs:decimal\"><xs:minInclusive value=\"0\"/></xs:restriction></xs:simpleType>"
  "<xs:simpleType name=\"ISO8601_DATETIME_PATTERN\"><xs:restriction base=\"xs:dateTime\">"
  "<xs:pattern value=\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\"/></xs:restriction></xs:simpleType>"
  "<xs:complexType name=\"failureType\" mixed=\"true\"><xs:attribute name=\"type\" type=\"xs:string\"/>"
  "<xs:attribute name=\"message\" type=\"xs:string\"/></xs:complexType>"
  "<xs:element name=\"testsuites\"><xs:complexType><xs:sequence>"
  "<xs:element ref=\"testsuite\" minOccurs=\"0\" maxOccurs=\"unbounded\"/></xs:sequence>"
  "<xs:attribute name=\"name\" type=\"xs:string\"/><xs:attribute name=\"time\" type=\"SUREFIRE_TIME\"/>"
  "<xs:attribute name=\"tests\" type=\"xs:nonNegativeInteger\"/><xs:attribute name=\"failures\" type=\"xs:nonNegativeInteger\"/>"
  "<xs:attribute name=\"errors\" type=\"xs:nonNegativeInteger\"/><xs:attribute name=\"skipped\" type=\"xs:nonNegativeInteger\"/>"
  "<xs:attribute name=\"disabled\" type=\"xs:nonNegativeInteger\"/></xs:complexType></xs:element>"
  "<xs:element name=\"testsuite\"><xs:complexType><xs:sequence>"
  "<xs:element name=\"properties\" minOccurs=\"0\"><xs:complexType><xs:sequence>"
  "<xs:element name=\"property\" minOccurs=\"0\" maxOccurs=\"unbounded\"><xs:complexType>"
  "<xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/><xs:attribute name=\"value\" type=\"xs:string\" use=\"required\"/>"
  "</xs:complexType></xs:element></xs:sequence></xs:complexType></xs:element>"
  "<xs:element ref=\"testcase\" minOccurs=\"0\" maxOccurs=\"unbounded\"/>"
  "<xs:element name=\"system-out\" type=\"xs:string\" minOccurs=\"0\"/>"
  "<xs:element name=\"system-err\" type=\"xs:string\" minOccurs=\"0\"/></xs:sequence>"
  "<xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/>"
  "<xs:attribute name=\"tests\" type=\"xs:nonNegativeInteger\" use=\"required\"/>"
  "<xs:attribute name=\"failures\" type=\"xs:nonNegativeInteger\"/><xs:attribute name=\"errors\" type=\"xs:nonNegativeInteger\"/>"
  "<xs:attribute name=\"skipped\" type=\"xs:nonNegativeInteger\"/><xs:attribute name=\"disabled\" type=\"xs:nonNegativeInteger\"/>"
  "<xs:attribute name=\"time\" type=\"SUREFIRE_TIME\"/><xs:attribute name=\"timestamp\" type=\"ISO8601_DATETIME_PATTERN\"/>"
  "<xs:attribute name=\"hostname\" type=\"xs:string\"/><xs:attribute name=\"id\" type=\"xs:string\"/>"
  "<xs:attribute name=\"package\" type=\"xs:string\"/></xs:complexType></xs:element>"
  "<xs:element name=\"testcase\"><xs:complexType><xs:sequence>"
  "<xs:choice minOccurs=\"0\"><xs:element name=\"skipped\"><xs:complexType mixed=\"true\">"
  "<xs:attribute name=\"message\" type=\"xs:string\"/></xs:complexType></xs:element>"
  "<xs:element name=\"error\" type=\"failureType\" maxOccurs=\"unbounded\"/>"
  "<xs:element name=\"failure\" type=\"failureType\" maxOccurs=\"unbounded\"/></xs:choice>"
  "<xs:element name=\"system-out\" type=\"xs:string\" minOccurs=\"0\" maxOccurs=\"unbounded\"/>"
  "<xs:element name=\"system-err\" type=\"xs:string\" minOccurs=\"0\" maxOccurs=\"unbounded\"/></xs:sequence>"
  "<xs:attribute name=\"name\" type=\"xs:string\" use=\"required\"/><xs:attribute name=\"classname\" type=\"xs:string\"/>"
  "<xs:attribute name=\"assertions\" type=\"xs:string\"/><xs:attribute name=\"time\" type=\"SUREFIRE_TIME\"/>"
  "<xs:attribute name=\"status\" type=\"xs:string\"/></xs:complexType></xs:element>"
  "</xs:schema>";

static xmlDocPtr check_junit(const char *path) {
  char *text = slurp_text(path);
  xmlDocPtr d = xc_parse(text, strlen(text));
  cr_assert_not_null(d, "junit.xml is not well-formed: %s", xc_err);
  free(text);
  xmlSchemaParserCtxtPtr pc = xmlSchemaNewMemParserCtxt(junit_xsd, (int)sizeof junit_xsd - 1);
  xmlSchemaPtr schema = xmlSchemaParse(pc);
  cr_assert_not_null(schema, "the test's schema does not parse");
  xmlSchemaValidCtxtPtr vc = xmlSchemaNewValidCtxt(schema);
  xc_err[0] = 0;
  xmlSetStructuredErrorFunc(NULL, (xmlStructuredErrorFunc)xc_on_error);
  int rc = xmlSchemaValidateDoc(vc, d);
  xmlSetStructuredErrorFunc(NULL, NULL);
  cr_expect_eq(rc, 0, "junit.xml is not valid JUnit: %s", xc_err);
  xmlSchemaFreeValidCtxt(vc);
  xmlSchemaFree(schema);
  xmlSchemaFreeParserCtxt(pc);
  return d;
}

static long attr_long(xmlNodePtr n, const char *a) { return strtol(xc_attr(n, a), NULL, 10); }

/* ---- a full report ---- */

Test(report, a_fixture_store_gives_every_section_self_contained_and_valid) {
  const char *db = st_path(0, "fx.db"), *out = st_path(1, "report");
  char msg[1024];
  mdc_fixture_opts fo = {.runs = 6, .cases = 240, .seed = 7, .mutants = 1, .fuzz = 1};
  cr_assert_eq(mdc_fixture_write(db, &fo, msg, sizeof msg), 0, "%s", msg);
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  cr_expect_str_eq(msg, out_file(out, "index.html"), "the message is the page's path");
  cr_expect_eq(count_entries(out), 3, "index.html, summary.md, junit.xml and nothing else");
  cr_expect_eq(leftovers("report."), 0, "no temporary folder left beside it");
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  char order[256];
  section_order(d, order, sizeof order);
  cr_expect_str_eq(order, "totals causes areas baseline flaky slowest failures history mutants fuzz");
  /* The header says who, what and when. */
  mdc_store *s;
  cr_assert_eq(mdc_store_open_read(db, &s, msg, sizeof msg), 0, "%s", msg);
  mdc_run_row run;
  cr_assert_eq(mdc_store_run_find(s, "latest", "replay", &run), 0);
  uint32_t k[MDC_CS_COUNT];
  cr_assert_eq(mdc_store_run_counts(s, run.id, k), 0);
  cr_expect(strstr(html, run.uuid), "the run uuid");
  cr_expect(strstr(html, "mdc-reference") && strstr(html, run.revision) && strstr(html, "ci-runner-3"));
  char chip[64];
  snprintf(chip, sizeof chip, "Pass<b>%u</b>", k[MDC_CS_PASS]);
  cr_expect(strstr(html, chip), "the Pass total %s", chip);
  snprintf(chip, sizeof chip, "Fail<b>%u</b>", k[MDC_CS_FAIL]);
  cr_expect(strstr(html, chip), "the Fail total %s", chip);
  cr_expect_geq(xc_count(xmlDocGetRootElement(d), "svg"), 5, "area, pass rate, duration, execs/s, edges charts");
  cr_expect(strstr(html, "Regressions: passing in the baseline") && strstr(html, "Fixes: failing"));
  cr_expect(strstr(html, "asan:heap-use-after-free@buffer.c:212"), "the fuzz findings table");
  cr_expect(strstr(html, "SURVIVED") && strstr(html, "leak_bytes_initial"), "the mutant matrix");
  cr_expect(strstr(html, "9/10 (90%)"), "finding reliability");
  xmlFreeDoc(d);
  free(html);
  /* JUnit: one testcase per case, classname the area, the counts as the store's. */
  xmlDocPtr j = check_junit(out_file(out, "junit.xml"));
  xmlNodePtr suites = xmlDocGetRootElement(j), suite = xc_find(suites, "testsuite");
  uint32_t total = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) total += k[i];
  cr_expect_eq(xc_count(suites, "testcase"), (int)total);
  cr_expect_eq(attr_long(suite, "tests"), (long)total);
  cr_expect_eq(attr_long(suite, "failures"), (long)(k[MDC_CS_FAIL] + k[MDC_CS_UNEXPECTED_PASS]));
  cr_expect_eq(attr_long(suite, "errors"), (long)(k[MDC_CS_CRASH] + k[MDC_CS_TIMEOUT] + k[MDC_CS_TRACE_ERROR] + k[MDC_CS_RUNNING]));
  cr_expect_eq(attr_long(suite, "skipped"), (long)(k[MDC_CS_NOT_SUPPORTED] + k[MDC_CS_EXPECTED_FAIL]));
  cr_expect_eq(xc_count(suites, "failure"), (int)(k[MDC_CS_FAIL] + k[MDC_CS_UNEXPECTED_PASS]));
  cr_expect_eq(xc_count(suites, "skipped"), (int)(k[MDC_CS_NOT_SUPPORTED] + k[MDC_CS_EXPECTED_FAIL]));
  xmlNodePtr tc = xc_find(suites, "testcase");
  cr_expect(strchr(xc_attr(tc, "classname"), '/') == NULL, "classname is the area");
  xmlNodePtr fail = xc_find(suites, "failure");
  cr_assert_not_null(fail);
  char *body = xc_text(fail);
  cr_expect(strstr(body, "trace: conformance/traces/") && strstr(body, "rule: SPEC 4") && strstr(body, "expected: NONE"),
            "a failure says where, what and which rule: %s", body);
  free(body);
  xmlFreeDoc(j);
  /* The PR summary: the counts in its first line. */
  char *md = slurp_text(out_file(out, "summary.md"));
  char first[64];
  snprintf(first, sizeof first, "%u cases: %u passed, %u failed, %u crashed", total, k[MDC_CS_PASS], k[MDC_CS_FAIL],
           k[MDC_CS_CRASH]);
  char *nl = strchr(md, '\n');
  cr_assert_not_null(nl);
  *nl = 0;
  cr_expect(strstr(md, first), "first line '%s' lacks '%s'", md, first);
  cr_expect(strstr(md, "regression") && strstr(md, "new fuzz finding"), "%s", md);
  *nl = '\n';
  cr_expect(strstr(md, "### Regressions") && strstr(md, "### New fuzz findings (4)"), "%s", md);
  free(md);
  mdc_store_run_row_free(&run);
  mdc_store_close(s);
}

/* Two runs through the API: a name per status pair. */
static void two_runs(const char *db, const char *const *names, const char *const *before, const char *const *after,
                     size_t n) {
  mdc_store *s = st_open(db);
  const char *const *sts[2] = {before, after};
  for (int r = 0; r < 2; r++) {
    mdc_run_info ri = {.kind = "replay", .driver_name = "drv", .driver_version = "1", .backend = "sim"};
    int64_t run, c;
    cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0);
    for (size_t i = 0; i < n; i++) {
      if (!sts[r][i]) continue;
      cr_assert_eq(mdc_store_case_begin(s, run, names[i], "t.jsonl", &c), 0);
      if (!strcmp(sts[r][i], "Running")) continue;
      mdc_case_result res = {.status = sts[r][i], .message = "why", .duration_s = 0.1};
      cr_assert_eq(mdc_store_case_finish(s, c, &res), 0, "%s", mdc_store_error(s));
    }
    cr_assert_eq(mdc_store_run_end(s, run, (uint32_t)n, 0, 0, 0, 0, 0), 0);
  }
  mdc_store_close(s);
}

static const char *const names[] = {"a/regressed", "a/fixed", "b/still", "b/new", "c/removed", "c/changed", "c/same"};
static const char *const before[] = {"Pass", "Fail", "Crash", NULL, "Pass", "Pass", "Pass"};
static const char *const after[] = {"Fail", "Pass", "Timeout", "TraceError", NULL, "NotSupported", "Pass"};

Test(report, the_previous_run_is_the_baseline_and_every_change_is_classed) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out");
  two_runs(db, names, before, after, 7);
  char msg[1024];
  cr_assert_eq(write_report(db, out, "latest", NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "1 regression, 1 fix, 1 new failing"), "%s", md);
  cr_expect(strstr(md, "`a/regressed` Pass → Fail"), "%s", md);
  cr_expect(strstr(md, "`a/fixed` Fail → Pass"), "%s", md);
  cr_expect(strstr(md, "`b/new` TraceError"), "%s", md);
  free(md);
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  cr_expect(strstr(html, "1 still failing, 1 new (1 failing), 1 removed, 1 other changes"), "totals line");
  for (int cat = 0; cat < 6; cat++) {
    char id[16];
    snprintf(id, sizeof id, "cat-%d", cat);
    cr_expect_not_null(xc_find_attr(xmlDocGetRootElement(d), "id", id), "a table for category %d", cat);
  }
  xmlFreeDoc(d);
  free(html);
}

static char *compare(const char *db, const char *a, const char *b, int json, int *rc) {
  char *text = NULL, err[1024] = "";
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  mdc_compare_opts o = {.db = db, .a = a, .b = b, .json = json};
  *rc = mdc_report_compare(&o, f, err, sizeof err);
  fclose(f);
  if (*rc >= MDC_REPORT_EINPUT) {
    free(text);
    return strdup(err);
  }
  return text;
}

Test(report, compare_lists_every_change_and_is_a_gate) {
  const char *db = st_path(0, "r.db");
  two_runs(db, names, before, after, 7);
  mdc_store *s = st_open(db);
  int64_t ids[2];
  size_t n;
  cr_assert_eq(mdc_store_list_runs(s, ids, 2, &n), 0);
  mdc_run_row a, b;
  cr_assert_eq(mdc_store_run_get(s, ids[0], &a), 0);
  cr_assert_eq(mdc_store_run_get(s, ids[1], &b), 0);
  mdc_store_close(s);
  int rc;
  char *t = compare(db, a.uuid, b.uuid, 0, &rc);
  cr_expect_eq(rc, MDC_REPORT_REGRESSED, "%s", t);
  cr_expect(strstr(t, "REGRESSION    a/regressed: Pass -> Fail: why"), "%s", t);
  cr_expect(strstr(t, "FIX           a/fixed: Fail -> Pass"), "%s", t);
  cr_expect(strstr(t, "still failing b/still: Crash -> Timeout"), "%s", t);
  cr_expect(strstr(t, "new           b/new: - -> TraceError"), "%s", t);
  cr_expect(strstr(t, "removed       c/removed: Pass -> -"), "%s", t);
  cr_expect(strstr(t, "changed       c/changed: Pass -> NotSupported"), "%s", t);
  cr_expect_null(strstr(t, "c/same"), "unchanged cases are not listed");
  cr_expect(strstr(t, "1 unchanged: REGRESSED"), "%s", t);
  free(t);
  t = compare(db, a.uuid, b.uuid, 1, &rc);
  json_error_t je;
  json_t *j = json_loads(t, 0, &je);
  cr_assert_not_null(j, "not JSON (%s): %s", je.text, t);
  cr_expect(json_is_true(json_object_get(j, "regressed")));
  cr_expect_eq(json_array_size(json_object_get(j, "changes")), 6);
  json_t *counts = json_object_get(j, "counts");
  cr_expect_eq(json_integer_value(json_object_get(counts, "regression")), 1);
  cr_expect_eq(json_integer_value(json_object_get(counts, "still_failing")), 1);
  cr_expect_eq(json_integer_value(json_object_get(counts, "new_failing")), 1);
  cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "b"), "uuid")), b.uuid);
  json_decref(j);
  free(t);
  /* Backwards: the fix is now a regression, the regression a fix. */
  t = compare(db, b.uuid, a.uuid, 0, &rc);
  cr_expect_eq(rc, MDC_REPORT_REGRESSED);
  cr_expect(strstr(t, "REGRESSION    a/fixed: Pass -> Fail"), "%s", t);
  free(t);
  /* A run against itself: nothing changed, exit 0. */
  t = compare(db, b.uuid, "latest", 0, &rc);
  cr_expect_eq(rc, MDC_REPORT_OK, "%s", t);
  cr_expect(strstr(t, "no case changed its status"), "%s", t);
  free(t);
  t = compare(db, "deadbeef", b.uuid, 0, &rc);
  cr_expect_eq(rc, MDC_REPORT_EINPUT);
  cr_expect(strstr(t, "run A ('deadbeef')") && strstr(t, "no run 'deadbeef'"), "%s", t);
  free(t);
  mdc_store_run_row_free(&a);
  mdc_store_run_row_free(&b);
}

Test(report, baselines_none_a_uuid_a_known_failures_list_and_another_store) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out"), *list = st_path(2, "known.txt");
  two_runs(db, names, before, after, 7);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, "none", 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect_null(strstr(md, "regression"), "no comparison: %s", md);
  cr_expect(strstr(md, "Baseline: none (--baseline none)"), "%s", md);
  free(md);
  /* A list of known failures: listed and failing is still failing, unlisted and failing is a
   * regression, listed and passing a fix, listed and not run removed. */
  FILE *f = fopen(list, "w");
  fputs("# known\nb/still\na/fixed   # fixed since\nz/gone\n\n", f);
  fclose(f);
  cr_assert_eq(write_report(db, out, NULL, list, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "2 regressions, 1 fix"), "a/regressed and b/new are failing and unlisted: %s", md);
  cr_expect(strstr(md, "known failures listed in") && strstr(md, "(3 names)"), "%s", md);
  free(md);
  char *html = slurp_text(out_file(out, "index.html"));
  cr_expect(strstr(html, "z/gone"), "a listed name that did not run is removed");
  free(html);
  /* Another store whose newest run is the second one: nothing changed. */
  const char *other = st_path(3, "main.db");
  two_runs(other, names, after, after, 7);
  cr_assert_eq(write_report(db, out, NULL, other, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "0 regressions, 0 fixes, 0 new failing"), "%s", md);
  cr_expect(strstr(md, other), "names the other store: %s", md);
  free(md);
  /* A uuid prefix of the same store. */
  mdc_store *s = st_open(db);
  int64_t ids[2];
  size_t n;
  cr_assert_eq(mdc_store_list_runs(s, ids, 2, &n), 0);
  mdc_run_row first;
  cr_assert_eq(mdc_store_run_get(s, ids[0], &first), 0);
  mdc_store_close(s);
  char prefix[9];
  memcpy(prefix, first.uuid, 8);
  prefix[8] = 0;
  cr_assert_eq(write_report(db, out, NULL, prefix, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "1 regression, 1 fix"), "%s", md);
  free(md);
  cr_expect_eq(write_report(db, out, NULL, "latest", 0, msg, sizeof msg), MDC_REPORT_EINPUT, "the run itself");
  cr_expect(strstr(msg, "the reported run itself"), "%s", msg);
  cr_expect_eq(write_report(db, out, NULL, "0000ffff", 0, msg, sizeof msg), MDC_REPORT_EINPUT);
  cr_expect(strstr(msg, "baseline '0000ffff'"), "%s", msg);
  mdc_store_run_row_free(&first);
}

Test(report, interrupted_and_killed_runs_are_shown_with_the_case_that_was_running) {
  const char *db = st_path(0, "k.db"), *out = st_path(1, "out");
  char msg[1024];
  mdc_fixture_opts fo = {.runs = 2, .cases = 60, .seed = 3, .last_state = 2};
  cr_assert_eq(mdc_fixture_write(db, &fo, msg, sizeof msg), 0, "%s", msg);
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  cr_expect(strstr(html, "KILLED: the run never ended"), "the verdict");
  cr_expect(strstr(html, "This run never ended") && strstr(html, "Running when it stopped: <code>"), "the banner");
  cr_expect(strstr(html, "Running<b>1</b>"), "a Running total");
  xmlFreeDoc(d);
  free(html);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strncmp(md, "**mdc replay: INTERRUPTED (killed)**", 36) == 0, "%s", md);
  free(md);
  xmlDocPtr j = check_junit(out_file(out, "junit.xml"));
  xmlNodePtr e = xc_find_attr(xmlDocGetRootElement(j), "type", "Interrupted");
  cr_expect_not_null(e, "the running case is an error of type Interrupted");
  xmlFreeDoc(j);
  const char *db2 = st_path(2, "i.db");
  fo.last_state = 1;
  cr_assert_eq(mdc_fixture_write(db2, &fo, msg, sizeof msg), 0, "%s", msg);
  cr_assert_eq(write_report(db2, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  html = slurp_text(out_file(out, "index.html"));
  cr_expect(strstr(html, ">INTERRUPTED</span>") && strstr(html, "stopped early on a signal"));
  free(html);
}

Test(report, long_tables_stop_at_max_rows_with_a_count_of_what_was_left_out) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out");
  enum { N = 230 };
  const char *nm[N], *b[N], *a[N];
  static char buf[N][32];
  for (int i = 0; i < N; i++) {
    snprintf(buf[i], sizeof buf[i], "area%d/case_%03d", i % 3, i);
    nm[i] = buf[i];
    b[i] = "Pass";
    a[i] = i % 2 ? "Fail" : "Crash";
  }
  two_runs(db, nm, b, a, N);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, NULL, 25, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  cr_expect(strstr(html, "205 more not shown (the table stops at 25 rows)"), "the regressions and non-passing tables");
  xmlNodePtr failures = xc_find_attr(xmlDocGetRootElement(d), "id", "failures");
  /* A case is a tbody of its own (its head row and its detail row). */
  xmlNodePtr table = xc_find(failures, "table");
  cr_expect_eq(xc_count(table->children, "tbody"), 25);
  xmlFreeDoc(d);
  free(html);
  xmlDocPtr j = check_junit(out_file(out, "junit.xml"));
  cr_expect_eq(xc_count(xmlDocGetRootElement(j), "testcase"), N, "JUnit is never cut");
  xmlFreeDoc(j);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "... and 210 more (see index.html)"), "the summary lists 20: %s", md);
  free(md);
}

Test(report, hostile_bytes_in_names_and_messages_stay_text) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out");
  mdc_store *s = st_open(db);
  mdc_run_info ri = {.kind = "replay", .driver_name = "<b>drv</b>", .driver_version = "\xff\xfe",
                     .backend = "sim\"><script>alert(1)</script>", .config = "a=1&b=<2>"};
  int64_t run, c;
  /* A first run where it passed, so the second's failure is a regression listed everywhere. */
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0);
  cr_assert_eq(mdc_store_case_begin(s, run, "x/<img onerror=alert(1)>", "t\x01.jsonl", &c), 0);
  cr_assert_eq(mdc_store_case_end(s, c, "Pass", 0, 0, NULL, NULL, NULL), 0);
  cr_assert_eq(mdc_store_run_end(s, run, 1, 1, 0, 0, 0, 0), 0);
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0);
  cr_assert_eq(mdc_store_case_begin(s, run, "x/<img onerror=alert(1)>", "t\x01.jsonl", &c), 0);
  mdc_case_result r = {.status = "Fail", .message = "bad \xc3\x28 utf8 ]]> & \x1b[31m red `md` | pipe\nnewline",
                       .expected = "<", .actual = "&amp;", .driver_message = "\xed\xa0\x80 surrogate",
                       .advisory = "'quote\"", .details = "{\"k\": \"<\"}"};
  cr_assert_eq(mdc_store_case_finish(s, c, &r), 0, "%s", mdc_store_error(s));
  cr_assert_eq(mdc_store_run_end(s, run, 1, 0, 1, 0, 0, 1), 0);
  mdc_store_close(s);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  cr_expect_null(strstr(html, "<script>alert"), "markup from the store is escaped");
  cr_expect_null(strstr(html, "<img"), "markup from the store is escaped");
  cr_expect(strstr(html, "&lt;img onerror=alert(1)&gt;"));
  xmlFreeDoc(d);
  free(html);
  xmlDocPtr j = check_junit(out_file(out, "junit.xml"));
  xmlFreeDoc(j);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "`x/<img onerror=alert(1)>`"), "names are code spans in Markdown: %s", md);
  free(md);
}

Test(report, no_fuzz_campaign_means_no_fuzz_section_and_a_v1_store_reads_as_it_is) {
  const char *db = st_path(0, "old.db"), *out = st_path(1, "out");
  sqlite3 *raw = st_raw_create(db);
  st_exec(raw, "CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, started_at TEXT NOT NULL,"
               " ended_at TEXT, kind TEXT NOT NULL, driver_name TEXT, driver_version TEXT, driver_path TEXT,"
               " backend TEXT, device TEXT, config TEXT, seed INTEGER, shard_index INTEGER NOT NULL DEFAULT 0,"
               " shard_count INTEGER NOT NULL DEFAULT 1, host TEXT NOT NULL, revision TEXT NOT NULL,"
               " cases INTEGER, passed INTEGER, failed INTEGER, crashed INTEGER, timed_out INTEGER,"
               " unexpected INTEGER) STRICT;"
               "CREATE TABLE cases (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, name TEXT NOT NULL,"
               " path TEXT, status TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, duration_s REAL,"
               " line INTEGER, message TEXT, expected TEXT, actual TEXT) STRICT;"
               "INSERT INTO runs VALUES (1, 'abcdef01-0000-4000-8000-000000000000', '2026-01-01T00:00:00.000Z',"
               " '2026-01-01T00:00:09.000Z', 'replay', 'old', '0.0.1', NULL, 'sim', NULL, NULL, NULL, 0, 1, 'h',"
               " 'r', 1, 0, 1, 0, 0, 1);"
               "INSERT INTO cases VALUES (1, 1, 'a/b', 'a.jsonl', 'Fail', '2026-01-01T00:00:01.000Z',"
               " '2026-01-01T00:00:02.000Z', 1.0, 3, 'msg', 'x', 'y');"
               "PRAGMA user_version = 1");
  sqlite3_close(raw);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  char order[256];
  section_order(d, order, sizeof order);
  cr_expect_str_eq(order, "totals causes areas baseline flaky slowest failures history mutants", "no fuzz section");
  cr_expect(strstr(html, "No <code>mdc mutants</code> run"), "no mutants run: said, not an error");
  xmlFreeDoc(d);
  free(html);
  cr_expect_eq(st_int(db, "PRAGMA user_version"), 1, "read as it is, not upgraded");
}

/* ---- bad input: a clear message naming the file, the right code, nothing written ---- */

static void expect_refused(const char *db, const char *out, const char *run, int code, const char *what,
                           const char *problem) {
  char msg[1024] = "";
  int rc = write_report(db, out, run, NULL, 0, msg, sizeof msg);
  cr_expect_eq(rc, code, "%s: rc %d: %s", problem, rc, msg);
  cr_expect(strstr(msg, what), "%s: message does not name '%s': %s", problem, what, msg);
  cr_expect(strstr(msg, problem), "message does not say '%s': %s", problem, msg);
}

Test(report, bad_stores_and_runs_are_refused_and_nothing_is_written) {
  const char *out = st_path(7, "out");
  const char *missing = st_path(0, "missing.db");
  expect_refused(missing, out, NULL, MDC_REPORT_EINPUT, missing, "No such file");
  const char *empty = st_path(1, "empty.db");
  fclose(fopen(empty, "w"));
  expect_refused(empty, out, NULL, MDC_REPORT_EINPUT, empty, "empty file");
  const char *junk = st_path(2, "junk.db");
  FILE *f = fopen(junk, "w");
  for (int i = 0; i < 100; i++) fputs("this is not a database at all ", f);
  fclose(f);
  expect_refused(junk, out, NULL, MDC_REPORT_ESTORE, junk, "not a SQLite database");
  const char *future = st_path(3, "future.db");
  mdc_store_close(st_open(future));
  sqlite3 *raw = st_raw(future);
  st_exec(raw, "PRAGMA user_version = 9");
  sqlite3_close(raw);
  expect_refused(future, out, NULL, MDC_REPORT_ESTORE, future, "newer than this mdc");
  const char *noruns = st_path(4, "noruns.db");
  mdc_store_close(st_open(noruns));
  expect_refused(noruns, out, NULL, MDC_REPORT_EINPUT, noruns, "holds no runs");
  const char *db = st_path(5, "r.db");
  two_runs(db, names, before, after, 7);
  expect_refused(db, out, "01234567-89ab-4cde-8f01-23456789abcd", MDC_REPORT_EINPUT, db, "no run '01234567-");
  const char *corrupt = st_path(6, "corrupt.db");
  two_runs(corrupt, names, before, after, 7);
  raw = st_raw(corrupt);
  st_exec(raw, "DROP TABLE cases");
  sqlite3_close(raw);
  expect_refused(corrupt, out, NULL, MDC_REPORT_ESTORE, corrupt, "corrupt");
  cr_expect(!st_exists(out), "no report folder after a refusal");
  cr_expect_eq(leftovers("out."), 0, "no temporary folder left behind");
}

Test(report, an_out_folder_that_is_not_a_report_is_never_replaced) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "mine");
  two_runs(db, names, before, after, 7);
  cr_assert_eq(mkdir(out, 0755), 0);
  FILE *f = fopen(st_path(2, "mine/notes.txt"), "w");
  fputs("keep me", f);
  fclose(f);
  char msg[1024];
  cr_expect_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_EINPUT);
  cr_expect(strstr(msg, out) && strstr(msg, "notes.txt") && strstr(msg, "refusing"), "%s", msg);
  cr_expect_eq(count_entries(out), 1, "left as it was");
  /* A regular file, and a path under one. */
  const char *file = st_path(3, "plain");
  fclose(fopen(file, "w"));
  cr_expect_eq(write_report(db, file, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_EINPUT);
  cr_expect(strstr(msg, "is not a folder"), "%s", msg);
  cr_expect_eq(write_report(db, st_path(4, "plain/sub/report"), NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_EINPUT);
  cr_expect(strstr(msg, "plain/sub/report"), "%s", msg);
}

Test(report, writing_again_replaces_the_report_whole) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out");
  two_runs(db, names, before, after, 7);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, "none", 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  struct stat before_st;
  cr_assert_eq(stat(out_file(out, "summary.md"), &before_st), 0);
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "1 regression"), "the new report: %s", md);
  free(md);
  cr_expect_eq(count_entries(out), 3);
  cr_expect_eq(leftovers("out."), 0, "the old report went with the exchange");
}

/* As root, file modes do not bind: the unwritable-folder check runs as nobody in a child. */
static int unwritable_out(void) {
  const char *db = st_path(0, "r.db"), *ro = st_path(1, "ro");
  if (mkdir(ro, 0555) != 0) return 1;
  char msg[1024];
  int rc = write_report(db, st_path(2, "ro/report"), NULL, NULL, 0, msg, sizeof msg);
  if (rc != MDC_REPORT_EINPUT) return 2;
  if (!strstr(msg, "ro/report") || !strstr(msg, "Permission denied")) {
    fprintf(stderr, "message: %s\n", msg);
    return 3;
  }
  if (count_entries(ro) != 0) return 4;
  return 0;
}

Test(report, an_unwritable_out_is_refused_and_leaves_nothing) {
  const char *db = st_path(0, "r.db");
  two_runs(db, names, before, after, 7);
  if (geteuid() != 0) {
    cr_expect_eq(unwritable_out(), 0);
    return;
  }
  cr_assert_eq(chown(st_dir, 65534, 65534), 0);
  cr_assert_eq(chmod(db, 0644), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(unwritable_out());
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "step %d failed", WEXITSTATUS(ws));
}

/* ---- issue 27: like with like, statuses that are not failures, the driver build ---- */

/* One run through the API over names[0..n) with statuses sts, its selection and driver build. */
static void run_with(mdc_store *s, const char *const *case_names, const char *const *sts, size_t n, const char *selection,
                     const char *build) {
  mdc_run_info ri = {.kind = "replay", .driver_name = "drv", .driver_version = "1", .backend = "sim",
                     .driver_build_id = build, .driver_sha256 = build, .selection = selection,
                     .selection_n = (uint32_t)n};
  int64_t run, c;
  cr_assert_eq(mdc_store_run_begin(s, &ri, &run, NULL), 0);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(mdc_store_case_begin(s, run, case_names[i], "t.jsonl", &c), 0);
    mdc_case_result res = {.status = sts[i], .message = "why", .duration_s = 0.1};
    cr_assert_eq(mdc_store_case_finish(s, c, &res), 0, "%s", mdc_store_error(s));
  }
  cr_assert_eq(mdc_store_run_end(s, run, (uint32_t)n, 0, 0, 0, 0, 0), 0);
}

Test(report, a_run_over_other_traces_is_no_baseline_and_known_failures_are_not_failing) {
  const char *db = st_path(0, "r.db"), *out = st_path(1, "out");
  static const char *const all[] = {"basic/a", "basic/b", "x/fail", "x/known", "x/ns", "x/warn"};
  static const char *const st1[] = {"Pass", "Pass"};
  static const char *const st2[] = {"Pass", "Pass", "Fail", "ExpectedFail", "NotSupported", "Warn"};
  static const char *const st3[] = {"Pass", "Warn", "Fail", "ExpectedFail", "Skipped", "Warn"};
  mdc_store *s = st_open(db);
  run_with(s, all, st1, 2, "sel-basic", "build-1");   /* basic/ first, as in the issue */
  run_with(s, all, st2, 6, "sel-all", "build-1");     /* then everything */
  mdc_store_close(s);
  char msg[1024];
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  char *md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "Baseline: none: no earlier replay runs of drv on sim over the same 6 traces"), "%s", md);
  cr_expect(strstr(md, "1 run of this driver and backend ran other traces"), "%s", md);
  cr_expect_null(strstr(md, "new failing"), "%s", md);
  cr_expect(strstr(md, "1 known failing, 1 warned, 1 not supported"), "named, not 'failing': %s", md);
  free(md);
  char *html = slurp_text(out_file(out, "index.html"));
  cr_expect(strstr(html, "This is the first such run"), "the history does not mix selections");
  cr_expect(strstr(html, ".s-Warn{background:var(--warn)}") && strstr(html, "known failure"), "own colours");
  free(html);
  /* A second run over the same traces, of another build: the baseline, named with why; a Pass
   * turned Warn is a change, never a regression; the history marks the new build. */
  s = st_open(db);
  run_with(s, all, st3, 6, "sel-all", "build-2");
  mdc_store_close(s);
  cr_assert_eq(write_report(db, out, NULL, NULL, 0, msg, sizeof msg), MDC_REPORT_OK, "%s", msg);
  md = slurp_text(out_file(out, "summary.md"));
  cr_expect(strstr(md, "the newest earlier of the replay runs of drv on sim over the same 6 traces"), "%s", md);
  cr_expect(strstr(md, "0 regressions, 0 fixes, 0 new failing"), "%s", md);
  free(md);
  html = slurp_text(out_file(out, "index.html"));
  xmlDocPtr d = check_page(html);
  cr_expect(strstr(html, "<b>new build</b>"), "a change of build is marked in history");
  cr_expect(strstr(html, "Left out: 1 earlier run"), "the basic/ run is not plotted");
  xmlFreeDoc(d);
  free(html);
  char *junit = slurp_text(out_file(out, "junit.xml"));
  cr_expect(strstr(junit, "<property name=\"driver_build_id\" value=\"build-2\"/>"), "%s", junit);
  cr_expect(strstr(junit, "<property name=\"selection\" value=\"sel-all\"/>"), "%s", junit);
  free(junit);
  xmlDocPtr j = check_junit(out_file(out, "junit.xml"));
  xmlFreeDoc(j);
  /* --compare says whether the builds differ. */
  s = st_open(db);
  int64_t ids[3];
  size_t n;
  mdc_run_row second;
  cr_assert_eq(mdc_store_list_runs(s, ids, 3, &n), 0);
  cr_assert_eq(mdc_store_run_get(s, ids[1], &second), 0);
  mdc_store_close(s);
  int rc;
  char *t = compare(db, second.uuid, "latest", 0, &rc);
  cr_expect(strstr(t, "DIFFERENT DRIVER BUILDS (A: build-id build-1"), "%s", t);
  cr_expect(strstr(t, "changed       basic/b: Pass -> Warn"), "a Warn is a change, not a regression: %s", t);
  cr_expect_eq(rc, MDC_REPORT_OK, "%s", t);
  free(t);
  t = compare(db, "latest", "latest", 1, &rc);
  cr_expect(strstr(t, "\"same_build\": true"), "%s", t);
  free(t);
  mdc_store_run_row_free(&second);
}
