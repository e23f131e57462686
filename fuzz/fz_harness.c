/* fz_harness.c - one input of any target: decode and run a program (tokens, shapes,
 * concurrency), or hand raw bytes to the trace reader and engine (trace), and say what was
 * found. */
#include "fz_harness.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mdc/engine.h"

struct fz_harness {
  int target;
  void *dl;
  const md_driver *drv;
  char config[512];
  fz_runner *runner;
  mdc_fz_prog prog;
  fz_outcome own[FZ_MAX_CALLS];
  fz_outcome *outs;
  int trace_fd;
  volatile uint32_t trace_line;
  volatile char trace_op[32];
};

const char *mdc_fz_harness_target_name(int target) {
  return target == FZ_TARGET_TRACE ? "trace" : mdc_fz_target_name((mdc_fz_target)target);
}

int mdc_fz_harness_target_parse(const char *name) {
  mdc_fz_target t;
  if (!strcmp(name, "trace")) return FZ_TARGET_TRACE;
  return mdc_fz_target_parse(name, &t) == 0 ? (int)t : -1;
}

fz_harness *mdc_fz_harness_new(int target, const char *driver, const char *config, char *err, size_t errlen) {
  if (target < 0 || target > FZ_TARGET_TRACE) {
    snprintf(err, errlen, "unknown target %d", target);
    return NULL;
  }
  /* A device's tables (a handle chunk, the simulator's arena maps) are a few hundred KiB each,
   * made and freed by every run: from the heap, not an mmap and munmap per run (glibc; the
   * sanitizers' allocators ignore it). */
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  fz_harness *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  h->target = target;
  h->outs = h->own;
  h->trace_fd = -1;
  snprintf(h->config, sizeof h->config, "%s", config && *config ? config : "backend=sim");
  h->drv = mdc_driver_load(driver && *driver ? driver : NULL, &h->dl, err, errlen);
  if (!h->drv) {
    free(h);
    return NULL;
  }
  if (target != FZ_TARGET_TRACE) {
    h->runner = mdc_fz_runner_new(h->drv, h->config, (mdc_fz_target)target);
    const char *strict = getenv("MDC_FUZZ_STRICT");
    if (h->runner) mdc_fz_runner_strict(h->runner, strict && *strict && strcmp(strict, "0"));
    if (!h->runner) {
      snprintf(err, errlen, "config '%s' is not key=value;... of md/config.h keys", h->config);
      mdc_driver_unload(h->dl);
      free(h);
      return NULL;
    }
  } else {
    h->trace_fd = memfd_create("mdc-fuzz-trace", MFD_CLOEXEC);
    if (h->trace_fd < 0) {
      snprintf(err, errlen, "memfd_create failed");
      mdc_driver_unload(h->dl);
      free(h);
      return NULL;
    }
  }
  return h;
}

void mdc_fz_harness_free(fz_harness *h) {
  if (!h) return;
  mdc_fz_runner_free(h->runner);
  if (h->trace_fd >= 0) close(h->trace_fd);
  mdc_driver_unload(h->dl);
  free(h);
}

const mdc_fz_prog *mdc_fz_harness_prog(const fz_harness *h) { return h->runner ? &h->prog : NULL; }
const fz_outcome *mdc_fz_harness_outcomes(const fz_harness *h) { return h->runner ? h->outs : NULL; }
uint64_t mdc_fz_harness_mem_limit(const fz_harness *h) { return h->runner ? mdc_fz_runner_mem_limit(h->runner) : 0; }
int mdc_fz_harness_target(const fz_harness *h) { return h->target; }
void mdc_fz_harness_use_outcomes(fz_harness *h, fz_outcome *outs) { h->outs = outs ? outs : h->own; }

int mdc_fz_harness_current(const fz_harness *h, const char **op) {
  if (h->runner) return mdc_fz_runner_current(h->runner, op);
  if (op) *op = (const char *)h->trace_op;
  return (int)h->trace_line - 1;
}

static void trace_finding(fz_finding *f, const char *what, const char *fmt, const char *arg) {
  f->found = 1;
  f->call = -1;
  snprintf(f->signature, sizeof f->signature, "oracle:trace:%s", what);
  snprintf(f->message, sizeof f->message, fmt, arg);
}

/* The trace target: the bytes are a trace file; the engine must read or refuse any of them,
 * judge them and say why, and never crash, hang or leak (the sanitizers and AFL++ watch). */
static int trace_one(fz_harness *h, const uint8_t *data, size_t n, fz_finding *f) {
  if (ftruncate(h->trace_fd, 0) != 0 || (n && pwrite(h->trace_fd, data, n, 0) != (ssize_t)n)) return -1;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", h->trace_fd);
  mdc_trace_opts o = {.config = h->config, .line = &h->trace_line, .op = h->trace_op, .op_len = sizeof h->trace_op};
  mdc_result res;
  memset(&res, 0x5a, sizeof res);
  mdc_verdict v = mdc_trace_run_opts(h->drv, path, &o, &res);
  if ((unsigned)v > MDC_TRACE_ERROR || res.verdict != v) {
    trace_finding(f, "verdict", "the engine returned verdict %s out of its range", "");
    return 0;
  }
  const struct { const char *name; const char *s; size_t n; } strs[] = {
      {"message", res.message, sizeof res.message},     {"expected", res.expected, sizeof res.expected},
      {"actual", res.actual, sizeof res.actual},        {"event", res.event, sizeof res.event},
      {"rule", res.rule, sizeof res.rule},              {"driver_message", res.driver_message, sizeof res.driver_message},
      {"advisory", res.advisory, sizeof res.advisory}};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    if (!memchr(strs[i].s, 0, strs[i].n)) {
      trace_finding(f, "unterminated", "mdc_result.%s is not NUL-terminated", strs[i].name);
      return 0;
    }
  if (v != MDC_PASS && !res.message[0]) trace_finding(f, "silent", "verdict %s with no message", mdc_verdict_name(v));
  else if (v == MDC_TRACE_ERROR && !strstr(res.message, path))
    trace_finding(f, "unnamed", "a trace error that does not name the file: %.600s", res.message);
  return 0;
}

int mdc_fz_harness_one(fz_harness *h, const uint8_t *data, size_t n, fz_finding *f, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  f->call = -1;
  if (h->target == FZ_TARGET_TRACE) {
    if (trace_one(h, data, n, f)) {
      snprintf(err, errlen, "cannot write the input to a memfd");
      return -1;
    }
    return 0;
  }
  mdc_fz_decode((mdc_fz_target)h->target, data, n, &h->prog);
  return mdc_fz_run(h->runner, &h->prog, h->outs, f, err, errlen);
}
