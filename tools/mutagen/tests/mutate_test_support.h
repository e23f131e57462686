/* mutate_test_support.h - shared by the `mdc mutate` tests (test_mutate_cmd.c, test_mutate_tests.c,
 * test_mutate_fuzz.c): a shell command run with its stdout captured and its stderr read back. */
#ifndef MDM_MUTATE_TEST_SUPPORT_H
#define MDM_MUTATE_TEST_SUPPORT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* Runs cmd, which sends its stderr to the file errf itself; its stdout into *out and the file errf
 * into *err (NUL-terminated, the caller frees; err NULL: not kept). Returns the exit status, or
 * 128 + the signal that ended it. */
static inline int mdm_run_captured(const char *cmd, const char *errf, char **out, char **err) {
  FILE *p = popen(cmd, "r");
  cr_assert(p, "popen %s", cmd);
  size_t cap = 1 << 16, n = 0, got;
  char *b = malloc(cap);
  while ((got = fread(b + n, 1, cap - n - 1, p)) > 0) {
    n += got;
    if (cap - n < 4096) b = realloc(b, cap *= 2);
  }
  b[n] = 0;
  int st = pclose(p);
  *out = b;
  FILE *f = fopen(errf, "r");
  char *e = calloc(1, 1 << 16);
  if (f) {
    e[fread(e, 1, (1 << 16) - 1, f)] = 0;
    fclose(f);
  }
  if (err) *err = e;
  else free(e);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
