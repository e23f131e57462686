/* fixture_main.c - mdc_report_fixture: writes a realistic results store (fixture.h) for the report
 * benchmark and the browser check; built, not a test, and its output is never committed.
 *   mdc_report_fixture OUT.db [--runs N] [--cases N] [--seed S] [--interrupted|--killed]
 *                             [--no-mutants] [--no-fuzz] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static int number(const char *s, unsigned long max, uint32_t *out) {
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || v > max) return -1;
  *out = (uint32_t)v;
  return 0;
}

int main(int argc, char **argv) {
  mdc_fixture_opts o = {.runs = 50, .cases = 2000, .seed = 1, .mutants = 1, .fuzz = 1};
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--runs") && has) {
      if (number(argv[++i], 100000, &o.runs)) goto usage;
    } else if (!strcmp(a, "--cases") && has) {
      if (number(argv[++i], 10000000, &o.cases)) goto usage;
    } else if (!strcmp(a, "--seed") && has) {
      if (number(argv[++i], 0xffffffffu, &o.seed)) goto usage;
    } else if (!strcmp(a, "--interrupted")) {
      o.last_state = 1;
    } else if (!strcmp(a, "--killed")) {
      o.last_state = 2;
    } else if (!strcmp(a, "--no-mutants")) {
      o.mutants = 0;
    } else if (!strcmp(a, "--no-fuzz")) {
      o.fuzz = 0;
    } else if (a[0] != '-' && !out) {
      out = a;
    } else {
      goto usage;
    }
  }
  if (!out) goto usage;
  char err[1024];
  if (mdc_fixture_write(out, &o, err, sizeof err) != 0) {
    fprintf(stderr, "mdc_report_fixture: %s\n", err);
    return 1;
  }
  fprintf(stderr, "mdc_report_fixture: %s: %u runs of %u cases%s%s\n", out, o.runs, o.cases,
          o.mutants ? ", a mutants run" : "", o.fuzz ? ", a fuzz campaign" : "");
  return 0;
usage:
  fprintf(stderr, "usage: mdc_report_fixture OUT.db [--runs N] [--cases N] [--seed S] [--interrupted|--killed]\n"
                  "                          [--no-mutants] [--no-fuzz]\n");
  return 2;
}
