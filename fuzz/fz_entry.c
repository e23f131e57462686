/* fz_entry.c - the fuzzer entry points of one target (MDC_FZ_TARGET_NAME): LLVMFuzzerInitialize
 * and LLVMFuzzerTestOneInput, built with -fsanitize=fuzzer for libFuzzer, or with afl-clang-fast
 * and libAFLDriver for AFL++'s persistent shared-memory mode (docs/fuzzing.md).
 *
 * Initialization loads the driver and, for the reference driver, runs one warm-up program
 * (opening, using and closing a device), so one-time set-up is done before the fork server
 * starts and every fuzzed run takes the same paths; the device it opened is closed and its
 * threads joined, so none exists at the fork. The first input of a forked child opens the
 * device the child's later inputs share (reset between them through the ABI). A finding
 * prints one line, "MDC-FUZZ-FINDING <signature>", and its message, then aborts so the fuzzer
 * keeps the input; the last inputs are written to $MDC_FUZZ_RECORD (a folder), if set, when a
 * run crashes, for a crash that needs the ones before it.
 *
 * Run on files (not under a fuzzer), the binary also serves `mdc fuzz` where only a binary of
 * the fuzzed build can load an instrumented driver: $MDC_FUZZ_TIMEOUT (seconds) reports an input
 * that hangs ("MDC-FUZZ-HANG call N (op)") and exits 3; $MDC_FUZZ_TRACE_OUT writes the input as
 * a trace there (what SPEC allows; $MDC_FUZZ_TRACE_NAME its name) instead of judging it. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz_harness.h"

#ifndef MDC_FZ_TARGET_NAME
#error "build with -DMDC_FZ_TARGET_NAME=\"tokens\" (or shapes, concurrency, trace)"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_harness *harness;
static const char *trace_out, *trace_name;
static unsigned timeout_s;

static void on_alarm(int sig) {
  (void)sig;
  const char *op = "";
  int c = harness ? mdc_fz_harness_current(harness, &op) : -1;
  char msg[256];
  int n = snprintf(msg, sizeof msg, "MDC-FUZZ-HANG call %d (%s)\n", c, op ? op : "");
  if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {}
  _exit(3);
}

/* The last inputs, kept for $MDC_FUZZ_RECORD (AFL++ 4.04c has no AFL_PERSISTENT_RECORD). */
#define RECORD_N 4
#define RECORD_MAX 65536
static uint8_t record_buf[RECORD_N][RECORD_MAX];
static size_t record_len[RECORD_N];
static unsigned record_next;
static const char *record_dir;

static void record_dump(void) {
  if (!record_dir) return;
  for (unsigned k = 0; k < RECORD_N; k++) {
    unsigned slot = (record_next + k) % RECORD_N;   /* oldest first */
    if (!record_len[slot]) continue;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/record-%u-%d", record_dir, k, (int)getpid());
    if (n <= 0 || (size_t)n >= sizeof path) continue;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    if (write(fd, record_buf[slot], record_len[slot]) < 0) {}
    close(fd);
  }
}

static void on_fatal(int sig) {
  record_dump();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* The reference driver's warm-up: a program that allocates, copies and executes synchronously
 * and asynchronously (the bytes decode the same for every target). A vendor driver gets an
 * empty program: its device is opened, nothing more. */
static void warm_up(const char *driver) {
  static const uint8_t warm[] = {
      0, 0, 0, 0,                                          /* seed */
      0xF0 + MDC_CALL_OPEN_CLIENT,
      0xF0 + MDC_CALL_PREPARE_MODEL, 0xF9, 0, 1, 0, 0, 0, 0, 0, 0,
      0xF0 + MDC_CALL_ALLOCATE, 0xF9, 0, 0xF1, 0xF9, 1, 0xF1, 0, 0, 0, 0, 0xFE, 0xFE,
      0xF0 + MDC_CALL_COPY_FROM, 0xF9, 0, 0xF9, 2, 0xFE, 0, 0,
      0xF0 + MDC_CALL_EXECUTE, 0xF9, 0, 0xF9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0xF0 + MDC_CALL_EXECUTE_ASYNC, 0xF9, 0, 0xF9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0xF0 + MDC_CALL_WAIT_EVENT, 0xF9, 0, 0xF9, 3, 0xFE, 0xFE,
      0xF0 + MDC_CALL_COPY_TO, 0xF9, 0, 0xF9, 2, 0,
  };
  fz_finding f;
  char err[640];
  int ref = !driver || !*driver;
  mdc_fz_harness_one(harness, warm, ref ? sizeof warm : 4, &f, err, sizeof err);
}

/* In each child of the fork server (and any other fork of the target), before its first
 * input: the device its inputs share is opened and warmed up here, so that opening it (and
 * starting its worker threads) is no input's coverage. AFL++ clears the map at the first
 * iteration of the persistent loop, after this. */
/* Each child its own memfds: one made before the fork would be a file every child shares. */
static void child_drop(void) {
  if (harness) mdc_fz_harness_drop_memories(harness);
}

static void child_open(void) {
  if (harness && mdc_fz_harness_prog(harness)) warm_up(getenv("MDC_FUZZ_DRIVER"));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *driver = getenv("MDC_FUZZ_DRIVER"), *config = getenv("MDC_FUZZ_CONFIG");
  char err[512];
  int target = mdc_fz_harness_target_parse(MDC_FZ_TARGET_NAME);
  harness = mdc_fz_harness_new(target, driver, config, err, sizeof err);
  if (!harness) {
    fprintf(stderr, "mdc fuzz target %s: %s\n", MDC_FZ_TARGET_NAME, err);
    exit(2);
  }
  trace_out = getenv("MDC_FUZZ_TRACE_OUT");
  trace_name = getenv("MDC_FUZZ_TRACE_NAME");
  const char *to = getenv("MDC_FUZZ_TIMEOUT");
  timeout_s = to ? (unsigned)atoi(to) : 0;
  if (timeout_s) signal(SIGALRM, on_alarm);
  record_dir = getenv("MDC_FUZZ_RECORD");
  if (record_dir && *record_dir) {
    signal(SIGABRT, on_fatal);
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
  } else {
    record_dir = NULL;
  }
  /* One-time set-up of the driver (its kernels, libsodium) before the fork server starts. */
  if (!driver || !*driver) warm_up(driver);
  mdc_fz_harness_close_device(harness);   /* no device (nor its threads) at the fork */
  if (!trace_out || !*trace_out) pthread_atfork(NULL, NULL, child_drop);
  if (!trace_out || !*trace_out) pthread_atfork(NULL, NULL, child_open);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (record_dir) {
    size_t n = size < RECORD_MAX ? size : RECORD_MAX;
    memcpy(record_buf[record_next], data, n);
    record_len[record_next] = n;
    record_next = (record_next + 1) % RECORD_N;
  }
  fz_finding f;
  char err[640];
  if (trace_out && *trace_out) {
    if (mdc_fz_harness_export(harness, data, size, trace_out, "input", FZ_TRACE_ORACLE,
                              trace_name && *trace_name ? trace_name : NULL, timeout_s ? timeout_s : 10, err,
                              sizeof err)) {
      fprintf(stderr, "mdc fuzz target %s: %s\n", MDC_FZ_TARGET_NAME, err);
      exit(2);
    }
    return 0;
  }
  if (timeout_s) alarm(timeout_s);
  int rc = mdc_fz_harness_one(harness, data, size, &f, err, sizeof err);
  if (timeout_s) alarm(0);
  if (rc) {
    fprintf(stderr, "mdc fuzz target %s: %s\n", MDC_FZ_TARGET_NAME, err);
    abort();
  }
  if (f.found) {
    fprintf(stderr, "MDC-FUZZ-FINDING %s\n%s\n", f.signature, f.message);
    record_dump();
    abort();
  }
  return 0;
}
