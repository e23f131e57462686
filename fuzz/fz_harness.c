/* fz_harness.c - one input of any target: decode and run a program (tokens, shapes,
 * concurrency), or hand raw bytes to the trace reader and engine (trace), and say what was
 * found. */
#include "fz_harness.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
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
  }
  return h;
}

void mdc_fz_harness_free(fz_harness *h) {
  if (!h) return;
  mdc_fz_runner_free(h->runner);
  mdc_driver_unload(h->dl);
  free(h);
}

const mdc_fz_prog *mdc_fz_harness_prog(const fz_harness *h) { return h->runner ? &h->prog : NULL; }
const fz_outcome *mdc_fz_harness_outcomes(const fz_harness *h) { return h->runner ? h->outs : NULL; }
uint64_t mdc_fz_harness_mem_limit(const fz_harness *h) { return h->runner ? mdc_fz_runner_mem_limit(h->runner) : 0; }
int mdc_fz_harness_target(const fz_harness *h) { return h->target; }
void mdc_fz_harness_use_outcomes(fz_harness *h, fz_outcome *outs) { h->outs = outs ? outs : h->own; }
void mdc_fz_harness_close_device(fz_harness *h) { mdc_fz_runner_close_device(h->runner); }

void mdc_fz_harness_drop_memories(fz_harness *h) {
  mdc_fz_runner_drop_memories(h->runner);
  if (h->target == FZ_TARGET_TRACE) mdc_trace_drop_kept_files();
}

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

/* Whether `"key"` (k bytes) starts at p. */
static int key_at(const uint8_t *p, const uint8_t *end, const char *key, size_t k) {
  return (size_t)(end - p) > k + 1 && p[k + 1] == '"' && p[0] == '"' && !memcmp(p + 1, key, k);
}

/* The unsigned integer after `"key"` and a colon at p, or -1. */
static int64_t value_after(const uint8_t *p, const uint8_t *end) {
  while (p < end && *p != ':') p++;
  if (p == end) return -1;
  p++;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  if (p == end || *p < '0' || *p > '9') return -1;
  uint64_t v = 0;
  while (p < end && *p >= '0' && *p <= '9' && v < (1ull << 40)) v = v * 10 + (uint64_t)(*p++ - '0');
  return (int64_t)v;
}

#define FZ_TRACE_MAX_DIM 4096u
#define FZ_TRACE_MAX_ELEMS 65536u   /* of one dims array (unknown dims count as 1) */

int mdc_fz_trace_input_ok(const uint8_t *data, size_t n) {
  static const struct { const char *key; size_t n; } sized[] = {
      {"size", 4}, {"count", 5}, {"bytes", 5}, {"file_size", 9}, {"offset", 6}, {"width", 5}, {"height", 6}, {"layers", 6}};
  const uint8_t *end = data + n;
  for (const uint8_t *p = data; p < end; p++) {
    p = memchr(p, '"', (size_t)(end - p));
    if (!p || p + 1 >= end) break;
    const uint8_t c = p[1];
    if (!strchr("scbfowhlrd", c) || !c) continue;   /* the first letters of the keys below */
    for (size_t i = 0; i < sizeof sized / sizeof sized[0]; i++)
      if (sized[i].key[0] == c && key_at(p, end, sized[i].key, sized[i].n)) {
        int64_t v = value_after(p, end);
        if (v > (1 << 20) && v <= (1ll << 30)) return 0;
      }
    if (c == 'r' && key_at(p, end, "repeat", 6) && value_after(p, end) > 50) return 0;
    if (c == 'd' && key_at(p, end, "dims", 4)) {
      const uint8_t *q = p + 6;
      while (q < end && *q != '[' && *q != '\n') q++;
      uint64_t elems = 1;
      for (; q < end && *q != ']' && *q != '\n'; q++) {
        if (*q < '0' || *q > '9') continue;
        uint64_t v = 0;
        while (q < end && *q >= '0' && *q <= '9' && v < (1ull << 40)) v = v * 10 + (uint64_t)(*q++ - '0');
        if (v > FZ_TRACE_MAX_DIM) return 0;
        if (v) elems *= v;
        if (elems > FZ_TRACE_MAX_ELEMS) return 0;
        q--;
      }
    }
  }
  return 1;
}

/* The trace target: the bytes are a trace file; the engine must read or refuse any of them,
 * judge them and say why, and never crash, hang or leak (the sanitizers and AFL++ watch). */
static void trace_one(fz_harness *h, const uint8_t *data, size_t n, fz_finding *f) {
  if (!mdc_fz_trace_input_ok(data, n)) return;
  /* The engine reads the bytes where they are; the name places sidecar blobs (there are none). */
  const char *path = "/fuzz-input/trace.jsonl";
  mdc_trace_opts o = {.config = h->config, .line = &h->trace_line, .op = h->trace_op, .op_len = sizeof h->trace_op,
                      .bytes = data ? (const void *)data : (const void *)"", .n_bytes = n, .keep_files = 1};
  mdc_result res;
  memset(&res, 0x5a, sizeof res);
  mdc_verdict v = mdc_trace_run_opts(h->drv, path, &o, &res);
  if ((unsigned)v > MDC_TRACE_ERROR || res.verdict != v) {
    trace_finding(f, "verdict", "the engine returned verdict %s out of its range", "");
    return;
  }
  const struct { const char *name; const char *s; size_t n; } strs[] = {
      {"message", res.message, sizeof res.message},     {"expected", res.expected, sizeof res.expected},
      {"actual", res.actual, sizeof res.actual},        {"event", res.event, sizeof res.event},
      {"rule", res.rule, sizeof res.rule},              {"driver_message", res.driver_message, sizeof res.driver_message},
      {"advisory", res.advisory, sizeof res.advisory}};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    if (!memchr(strs[i].s, 0, strs[i].n)) {
      trace_finding(f, "unterminated", "mdc_result.%s is not NUL-terminated", strs[i].name);
      return;
    }
  if (v != MDC_PASS && !res.message[0]) trace_finding(f, "silent", "verdict %s with no message", mdc_verdict_name(v));
  else if (v == MDC_TRACE_ERROR && !strstr(res.message, path))
    trace_finding(f, "unnamed", "a trace error that does not name the file: %.600s", res.message);
}

int mdc_fz_harness_one(fz_harness *h, const uint8_t *data, size_t n, fz_finding *f, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  f->call = -1;
  if (h->target == FZ_TARGET_TRACE) {
    trace_one(h, data, n, f);
    return 0;
  }
  mdc_fz_decode((mdc_fz_target)h->target, data, n, &h->prog);
  return mdc_fz_run(h->runner, &h->prog, h->outs, f, err, errlen);
}

/* Writes the input as a trace. A program target runs it once more in a child process whose
 * outcomes are shared memory, so an input that crashes or hangs the driver is written too: up
 * to the call it died in, which expects what SPEC allows. */
int mdc_fz_harness_export(fz_harness *H, const uint8_t *data, size_t n, const char *out, const char *input,
                          int mode, const char *name, unsigned timeout, char *err, size_t errlen) {
  int target = mdc_fz_harness_target(H);
  if (target == FZ_TARGET_TRACE) {
    FILE *o = fopen(out, "wb");
    int rc = o && fwrite(data, 1, n, o) == n ? 0 : -1;
    if (o && fclose(o) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "cannot write '%s': %s", out, strerror(errno));
    return rc;
  }
  size_t len = FZ_MAX_CALLS * sizeof(fz_outcome) + sizeof(fz_finding) + 64;
  uint8_t *shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) {
    snprintf(err, errlen, "mmap: %s", strerror(errno));
    return -1;
  }
  fz_outcome *outs = (fz_outcome *)shm;
  fz_finding *f = (fz_finding *)(shm + FZ_MAX_CALLS * sizeof(fz_outcome));
  volatile int *done = (volatile int *)(f + 1);
  mdc_fz_harness_close_device(H);   /* the child opens its own: the device's threads do not fork */
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    munmap(shm, len);
    return -1;
  }
  if (pid == 0) {
    char e2[640];
    mdc_fz_harness_use_outcomes(H, outs);
    if (mdc_fz_harness_one(H, data, n, f, e2, sizeof e2) == 0) *done = 1;
    _exit(0);
  }
  int st = 0, waited = 0;
  for (unsigned ms = 0; ms < timeout * 1000u; ms += 5) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      waited = 1;
      break;
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  if (!waited) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  static mdc_fz_prog p;   /* large; one export at a time */
  mdc_fz_decode((mdc_fz_target)target, data, n, &p);
  char why[160] = "";
  if (!*done) {
    /* died in a call: the first one predicted and not finished */
    int c = -1;
    for (unsigned i = 0; i < p.n_calls && c < 0; i++)
      if (!outs[i].ran && outs[i].pred.set) c = (int)i;
    f->found = 1;
    f->call = c;
    if (c >= 0) outs[c].ran = 2;
    if (!waited) snprintf(why, sizeof why, "hung (no end after %u s) in call %d", timeout, c);
    else if (WIFSIGNALED(st)) snprintf(why, sizeof why, "crashed (signal %d) in call %d", WTERMSIG(st), c);
    else snprintf(why, sizeof why, "exited with status %d in call %d", WEXITSTATUS(st), c);
    snprintf(f->message, sizeof f->message, "the driver %s", why);
  }
  FILE *o = fopen(out, "w");
  if (!o) {
    snprintf(err, errlen, "cannot write '%s': %s", out, strerror(errno));
    munmap(shm, len);
    return -1;
  }
  char nm[256], desc[1024];
  const char *base = strrchr(input, '/');
  base = base ? base + 1 : input;
  if (!name) {
    snprintf(nm, sizeof nm, "fuzz/%s/%.200s", mdc_fz_harness_target_name(target), base);
    name = nm;
  }
  if (f->found)
    snprintf(desc, sizeof desc, "found by the %s fuzz target: %.900s", mdc_fz_harness_target_name(target), f->message);
  else
    snprintf(desc, sizeof desc, "a %s fuzz program", mdc_fz_harness_target_name(target));
  const char *rule = f->found && strstr(f->message, "rule: ") ? strstr(f->message, "rule: ") + 6 : NULL;
  char rbuf[256];
  if (rule) {
    snprintf(rbuf, sizeof rbuf, "%s", rule);
    char *br = strstr(rbuf, " [driver said");
    if (br) *br = 0;
    rule = rbuf;
  } else if (f->found && !*done) {
    rule = "SPEC 6: no call crashes or blocks past its work";
  }
  fz_trace_opts to = {.target = (mdc_fz_target)target, .mode = mode, .name = name, .description = desc,
                      .rule = rule, .mem_limit = mdc_fz_harness_mem_limit(H),
                      .upto = f->found && f->call >= 0 ? (uint16_t)(f->call + 1) : 0};
  if (to.upto && p.calls[f->call].block && target == FZ_CONCURRENCY) to.upto = p.blocks[p.calls[f->call].block - 1].end;
  int rc = mdc_fz_trace_write(o, &p, mode == FZ_TRACE_STATIC ? NULL : outs, &to);
  if (fclose(o) != 0) rc = -1;
  if (rc) snprintf(err, errlen, "writing '%s' failed", out);
  munmap(shm, len);
  return rc;
}

