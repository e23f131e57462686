/* fz_harness.h - private to fuzz/: the four targets behind one interface, for the fuzzer
 * entry points (fz_entry.c: libFuzzer's LLVMFuzzerTestOneInput, also what AFL++ runs in
 * persistent mode) and the plain replay binary (fz_main.c).
 *
 * A harness holds the driver (MDC_FUZZ_DRIVER, or the reference driver linked in) and its
 * config (MDC_FUZZ_CONFIG, default backend=sim). It opens no device until an input runs, so
 * nothing it starts exists when AFL++ forks; program targets then keep that device from input
 * to input (fz_run.h). One harness per process, used by one thread. */
#ifndef MDC_FZ_HARNESS_H
#define MDC_FZ_HARNESS_H

#include "fz_run.h"

/* tokens, shapes, concurrency: programs; trace: raw bytes to the trace reader and engine. */
#define FZ_TARGET_TRACE FZ_TARGETS

typedef struct fz_harness fz_harness;

/* target: an mdc_fz_target or FZ_TARGET_TRACE. driver: a driver shared object (NULL: the
 * reference driver); config: open_device keys (NULL: "backend=sim"). NULL with a message in
 * err when the driver cannot be loaded or the config is bad. */
fz_harness *mdc_fz_harness_new(int target, const char *driver, const char *config, char *err, size_t errlen);
void mdc_fz_harness_free(fz_harness *h);
/* Runs one input. Returns 0 (f says whether it found something), -1 when the harness could
 * not run it (err: a device the driver would not open). */
int mdc_fz_harness_one(fz_harness *h, const uint8_t *data, size_t n, fz_finding *f, char *err, size_t errlen);
/* The last input's program and outcomes (program targets; NULL for trace). */
const mdc_fz_prog *mdc_fz_harness_prog(const fz_harness *h);
const fz_outcome *mdc_fz_harness_outcomes(const fz_harness *h);
uint64_t mdc_fz_harness_mem_limit(const fz_harness *h);
int mdc_fz_harness_target(const fz_harness *h);
/* "tokens", "shapes", "concurrency", "trace"; -1 from parse for another name. */
const char *mdc_fz_harness_target_name(int target);
int mdc_fz_harness_target_parse(const char *name);
/* Makes the next runs keep their outcomes in outs (FZ_MAX_CALLS entries; NULL: the harness's
 * own), e.g. memory shared with a parent that outlives a crash. */
void mdc_fz_harness_use_outcomes(fz_harness *h, fz_outcome *outs);
/* Closes the device the program targets keep between inputs (none open: nothing), e.g. after
 * a warm-up run before a fork server starts; the next input opens a new one. */
void mdc_fz_harness_close_device(fz_harness *h);
/* Closes the memfds the program targets reuse for memories (mdc_fz_runner_drop_memories), and
 * for trace the pool files the engine kept (mdc_trace_drop_kept_files): in a child of the fork
 * server, so that no two children share a file. */
void mdc_fz_harness_drop_memories(fz_harness *h);
/* Writes the input as a trace to out (docs/fuzzing.md "A finding as a trace"). A program target
 * runs it once more in a child process whose outcomes are shared memory, so an input that
 * crashes or hangs (more than timeout seconds) the driver is written too: up to the call it
 * died in, which expects what SPEC allows. mode: FZ_TRACE_*; name: the header name (NULL: from
 * input, the file it came from). The trace target writes the input itself. 0, or -1 with err. */
int mdc_fz_harness_export(fz_harness *h, const uint8_t *data, size_t n, const char *out, const char *input,
                          int mode, const char *name, unsigned timeout, char *err, size_t errlen);
/* The trace target's bounds (docs/fuzzing.md): 0 when the bytes would make the engine allocate
 * or compute more than a fuzz input may (a pool, payload or file between 1 MiB and the engine's
 * own 1 GiB limit, a dim over 4096, a block repeated more than 50 times); such an input runs
 * nothing and finds nothing. Values past the engine's limits pass: refusing them is its job. */
int mdc_fz_trace_input_ok(const uint8_t *data, size_t n);
/* Where the running input is (a call and its op), for crash and hang reports. */
int mdc_fz_harness_current(const fz_harness *h, const char **op);

#endif
