/* test_cli_support.h - shared by the mdc CLI tests (test_cli*.c, test_record*.c): running the
 * built `mdc` as a child with its output captured, temporary folders, small trace files. */
#ifndef MDC_TEST_CLI_SUPPORT_H
#define MDC_TEST_CLI_SUPPORT_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct mdc_out {
  int rc;          /* exit status, or 128 + signal */
  char *out, *err; /* captured stdout / stderr (NUL-terminated) */
} mdc_out;

static inline char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  b[got] = 0;
  fclose(f);
  return b;
}

static inline void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

static inline int tmp_remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static inline void tmp_remove(const char *dir) { nftw(dir, tmp_remove_one, 16, FTW_PHYS | FTW_DEPTH); }

/* The folders this test process made, removed when it exits (each Criterion test is a process
 * of its own; a failed assertion exits it too). */
static char tmp_made[64][64];
static int tmp_n;

static inline void tmp_remove_all(void) {
  for (int i = 0; i < tmp_n; i++) tmp_remove(tmp_made[i]);
  tmp_n = 0;
}

/* A fresh folder under /tmp, removed with everything in it when the test's process exits. */
static inline void tmpdir(char out[64]) {
  snprintf(out, 64, "/tmp/mdc-test-XXXXXX");
  cr_assert(mkdtemp(out), "mkdtemp: %s", strerror(errno));
  if (tmp_n == 0) atexit(tmp_remove_all);
  if (tmp_n < 64) snprintf(tmp_made[tmp_n++], 64, "%s", out);
}

/* Runs argv (NULL-terminated) with extra environment "K=V" strings (NULL-terminated, may be
 * NULL); waits for it. */
static inline mdc_out run_argv(char *const argv[], char *const env[]) {
  char dir[64] = "/tmp/mdc-test-XXXXXX";
  cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  char op[128], ep[128];
  snprintf(op, sizeof op, "%s/stdout", dir);
  snprintf(ep, sizeof ep, "%s/stderr", dir);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    int o = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    for (size_t i = 0; env && env[i]; i++) putenv(env[i]);
    execv(argv[0], argv);
    _exit(126);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  mdc_out r = {.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), .out = slurp(op), .err = slurp(ep)};
  tmp_remove(dir);
  return r;
}

/* mdc with the given arguments (NULL-terminated varargs). */
static inline mdc_out mdc_env(char *const env[], ...) {
  char *argv[64];
  int n = 0;
  argv[n++] = (char *)MDC_EXE;
  va_list ap;
  va_start(ap, env);
  char *a;
  while ((a = va_arg(ap, char *)) != NULL && n < 63) argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  return run_argv(argv, env);
}
#define mdc(...) mdc_env(NULL, __VA_ARGS__, (char *)NULL)

static inline void mdc_out_free(mdc_out *r) {
  free(r->out);
  free(r->err);
}

/* The JSON object mdc printed on stdout (asserts that it parses). */
static inline json_t *out_json(const mdc_out *r) {
  json_error_t e;
  json_t *j = json_loads(r->out, 0, &e);
  cr_assert(j, "stdout is not JSON (%s): %s\nstderr: %s", e.text, r->out, r->err);
  return j;
}

static inline long jint(json_t *j, const char *key) {
  json_t *v = json_object_get(j, key);
  cr_assert(json_is_integer(v), "JSON has no integer '%s'", key);
  return (long)json_integer_value(v);
}

/* The status of the case named `name` in the JSON results ("" when absent). */
static inline const char *jstatus(json_t *j, const char *name) {
  json_t *res = json_object_get(j, "results"), *c;
  size_t i;
  json_array_foreach(res, i, c) {
    if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
      return json_string_value(json_object_get(c, "status"));
  }
  return "";
}

static inline const char *jmessage(json_t *j, const char *name) {
  json_t *res = json_object_get(j, "results"), *c;
  size_t i;
  json_array_foreach(res, i, c) {
    if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
      return json_string_value(json_object_get(c, "message"));
  }
  return "";
}

/* ---- small traces ---------------------------------------------------------------------------- */

#define T_HEADER(name) "{\"mdc_trace\": \"1.0\", \"name\": \"" name "\", \"rules\": [\"mdc CLI test\"]}\n"

/* No execute: passes on every test driver. */
__attribute__((unused)) static const char TRACE_OPEN_CLOSE[] = T_HEADER("cli/a_open_close")
    "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
    "{\"op\": \"open_client\", \"as\": \"c\"}\n"
    "{\"op\": \"close_client\", \"client\": \"c\"}\n"
    "{\"op\": \"close_device\", \"device\": \"d\"}\n";

#define T_ADD_BODY(sum)                                                                           \
  "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"                        \
  "{\"op\": \"open_client\", \"as\": \"c\"}\n"                                                     \
  "{\"op\": \"model\", \"as\": \"add\", \"operands\": ["                                           \
  "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, "              \
  "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_INPUT\"}, "              \
  "{\"type\": \"INT32\", \"lifetime\": \"CONSTANT_COPY\", \"offset\": 0, \"length\": 4}, "         \
  "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [2], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], "            \
  "\"operations\": [{\"type\": \"ADD\", \"inputs\": [0, 1, 2], \"outputs\": [3]}], "               \
  "\"inputs\": [0, 1], \"outputs\": [3], \"operand_values\": {\"i32\": [0]}, \"pools\": []}\n"     \
  "{\"op\": \"prepare_model\", \"model\": \"add\", \"as\": \"pm\"}\n"                               \
  "{\"op\": \"memory\", \"as\": \"a\", \"kind\": \"ashmem\", \"size\": 8, \"prot\": \"rw\", \"data\": {\"f32\": [1, 2]}}\n" \
  "{\"op\": \"memory\", \"as\": \"b\", \"kind\": \"ashmem\", \"size\": 8, \"prot\": \"rw\", \"data\": {\"f32\": [10, 20]}}\n" \
  "{\"op\": \"memory\", \"as\": \"o\", \"kind\": \"ashmem\", \"size\": 8, \"prot\": \"rw\"}\n"      \
  "{\"op\": \"execute\", \"prepared\": \"pm\", \"request\": {\"inputs\": [{\"pool\": 0, \"length\": 8}, " \
  "{\"pool\": 1, \"length\": 8}], \"outputs\": [{\"pool\": 2, \"length\": 8}], \"pools\": "        \
  "[{\"memory\": \"a\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}, \"expect\": {\"shapes\": [{\"dims\": [2]}]}}\n" \
  "{\"op\": \"check\", \"memory\": \"o\", \"offset\": 0, \"type\": \"f32\", \"data\": {\"f32\": " sum "}}\n"

/* One execute: Pass on the reference driver, Crash/Timeout on the broken test drivers. */
__attribute__((unused)) static const char TRACE_ADD[] = T_HEADER("cli/b_execute_add") T_ADD_BODY("[11, 22]");
/* The same with a wrong expected sum: Fail. */
__attribute__((unused)) static const char TRACE_WRONG[] = T_HEADER("cli/c_wrong_sum") T_ADD_BODY("[11, 23]");
/* Not JSON: TraceError. */
__attribute__((unused)) static const char TRACE_BROKEN[] = T_HEADER("cli/d_broken") "{\"op\": \"open_device\", \"as\": \n";

/* Writes the named traces (NULL-terminated pairs file, text) into dir. */
static inline void write_traces(const char *dir, ...) {
  va_list ap;
  va_start(ap, dir);
  const char *file;
  while ((file = va_arg(ap, const char *)) != NULL) {
    const char *text = va_arg(ap, const char *);
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    spit(p, text);
  }
  va_end(ap);
}

#endif
