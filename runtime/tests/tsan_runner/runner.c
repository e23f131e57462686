/* runner.c (tsan_runner) - runs the tests registered through the tsan_runner criterion.h:
 * each in a forked child (so a failure, crash or TSan report ends only that test), with a
 * timeout, printing [PASS]/[FAIL] per test and "N passed, N failed" last. Exit 1 on any
 * failure. Options: --filter=suite/name-glob (also "--filter PATTERN"); Criterion's other
 * options (--jobs N, ...) are accepted and ignored. */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"

typedef struct test {
  const char *suite, *name;
  void (*fn)(void);
  const mdtr_opts *opts;
} test;
typedef struct suite {
  const char *name;
  const mdtr_opts *opts;
} suite;

static test tests[1024];
static int n_tests;
static suite suites[128];
static int n_suites;
static int failed_checks;

void mdtr_register_test(const char *s, const char *name, void (*fn)(void), const mdtr_opts *opts) {
  if (n_tests < 1024) tests[n_tests++] = (test){s, name, fn, opts};
}

void mdtr_register_suite(const char *s, const mdtr_opts *opts) {
  if (n_suites < 128) suites[n_suites++] = (suite){s, opts};
}

void mdtr_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
  fprintf(stderr, "[----] %s:%d: %s failed: %s\n", file, line, fatal ? "Assertion" : "Expectation", expr);
  if (fmt && *fmt) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[----]   ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
  }
  failed_checks++;
  if (fatal) {
    fflush(NULL);
    _exit(1);
  }
}

static const mdtr_opts *suite_opts(const char *name) {
  for (int i = 0; i < n_suites; i++)
    if (strcmp(suites[i].name, name) == 0) return suites[i].opts;
  return NULL;
}

static int run_one(const test *t) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const mdtr_opts *so = suite_opts(t->suite);
    alarm(t->opts->timeout > 0 ? (unsigned)t->opts->timeout + 1 : 600);
    if (so && so->init) so->init();
    if (t->opts->init) t->opts->init();
    t->fn();
    if (t->opts->fini) t->opts->fini();
    if (so && so->fini) so->fini();
    fflush(NULL);
    _exit(failed_checks ? 1 : 0);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {}
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fprintf(stderr, "[----] %s::%s: killed by signal %d\n", t->suite, t->name, WTERMSIG(status));
  return 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--filter=", 9) == 0) filter = argv[i] + 9;
    else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
  }
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < n_tests; i++) {
    const test *t = &tests[i];
    char full[512];
    snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
    if (filter && fnmatch(filter, full, 0) != 0) continue;
    if (t->opts->disabled) {
      skipped++;
      continue;
    }
    fflush(NULL);
    int rc = run_one(t);
    printf("[%s] %s::%s\n", rc == 0 ? "PASS" : "FAIL", t->suite, t->name);
    if (rc == 0) passed++;
    else failed++;
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : (passed ? 0 : 1);
}
