/* fuzz_int.h - private to `mdc fuzz` (conformance/mdc/fuzz_*.c, docs/fuzzing.md): the campaign,
 * its afl-fuzz instances and its findings, and the helpers between the files.
 *   fuzz_cmd.c    : `mdc fuzz`: the options, the checks, the store's run, the steps in order, output
 *   fuzz_afl.c    : children: afl-fuzz instances (launch, watch, stop), the targets' environment,
 *                   commands run to their end, the ceiling
 *   fuzz_stats.c  : fuzzer_stats and plot_data read and ingested into the results store; progress
 *   fuzz_triage.c : crashes and hangs replayed, grouped by signature, minimised, written as traces
 *   fuzz_export.c : `mdc fuzz export`: a stored finding written as a trace
 *   fuzz_instr.c  : whether a driver is instrumented for coverage (its ELF symbols)
 *   fuzz_gcov.c   : --driver-coverage: the driver's own coverage, its queue replayed on a gcov build
 * Single-threaded: one campaign per process, its state in one mdc_cli__campaign. */
#ifndef MDC_CLI_FUZZ_INT_H
#define MDC_CLI_FUZZ_INT_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "mdc/store.h"

#define MDC_FUZZ_MAX_JOBS 16

typedef struct mdc_cli__instance {
  char name[80];            /* "main", "s1", ... (prefixed "NODE-" with --node) */
  int main;                 /* -M (else -S) */
  char binary[4096];        /* the target binary it fuzzes */
  char cmplog[4096];        /* -c binary, or "" */
  int asan;
  pid_t pid;
  int running;
  long plot_off;            /* plot_data bytes ingested */
  double t0;
  mdc_fuzz_stat last;       /* its newest plot_data row (written every 5 s; fuzzer_stats every 60) */
} mdc_cli__instance;

typedef struct mdc_cli__finding {
  char signature[160];
  char kind[8];             /* crash, hang, oracle */
  char message[768];
  char repro[4096];         /* the input that reproduces it (kept in triage/) */
  char minimized[4096];
  char trace[4096];
  char binary[4096];
  uint32_t count;           /* inputs with this signature */
  int replays, reproduced;
  double first_s;           /* when an instance first saved one (AFL++'s "time:" in ms), -1: unknown */
} mdc_cli__finding;

/* --driver-coverage SO: the gcov build, where its counters go, and what was measured. */
typedef struct mdc_cli__gcov {
  char so[4096];            /* SO, its real path */
  char dir[4200];           /* GCOV_PREFIX: <out>/driver-coverage */
  char **gcda;              /* the counters files compiled into SO (absolute; .gcno beside each) */
  size_t n_gcda;
  int64_t inputs;           /* queue inputs replayed */
  int failed_batches;       /* md_fuzz_replay runs that crashed or hung: their counters are lost */
  int measured;             /* 1: the figures below are the campaign's */
  int64_t fn_reached, fn_total, lines_covered, lines_total, br_taken, br_total;
  char error[640];
} mdc_cli__gcov;

typedef struct mdc_cli__campaign {
  const char *target, *driver, *config, *mutant, *db, *fuzz_build, *seeds, *node;
  int secondary, strict, until_finding, mutator;
  int no_db;                /* --no-db: the store is ':memory:', and no run is named */
  char instr[16];           /* --driver's instrumentation: "afl", "sancov", "none", "" (reference) */
  char out[4096], afl[4096];
  double seconds;
  int jobs, json, quiet, fresh, asan_main, triage_runs, tmin_s;
  int tty;
  mdc_cli__instance inst[MDC_FUZZ_MAX_JOBS];
  int n_inst;
  mdc_store *store;
  int64_t run_id;
  char uuid[37];
  int store_ok;
  double t_start;
  /* the last totals read */
  int64_t execs;
  double eps, stability;
  int64_t edges, corpus, raw_crashes, raw_hangs, rss_kb;
  mdc_cli__finding *f;
  size_t n_f, cap_f;
  double ceiling_eps;
  const char *driver_cov;   /* --driver-coverage SO, or NULL */
  mdc_cli__gcov gcov;
} mdc_cli__campaign;

/* The target binaries of a campaign: the fuzz build's and its -asan and -cmplog builds'. */
typedef struct mdc_cli__fuzz_bins {
  char plain[4300], asan[4300], cmplog[4300];
  const char *main;         /* the main instance's: asan with --asan, else plain */
} mdc_cli__fuzz_bins;

/* snprintf for paths and messages: a too long one is cut, like any snprintf, without the
 * compiler's truncation warnings for buffers it cannot size. */
void mdc_cli__fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));

/* The signal (SIGINT, SIGTERM) that asked the campaign to stop, or 0. Set by fuzz_cmd.c's
 * handler; the loops that wait on children read it. */
extern volatile sig_atomic_t mdc_cli__fuzz_stop_signal;

/* ---- fuzz_afl.c ----------------------------------------------------------------------------- */

int mdc_cli__fuzz_exists_exec(const char *p);
/* The binary name (md_fuzz_T, md_fuzz_ceiling) of the fuzz build dir: dir/fuzz/name in a build
 * tree, dir/name in an installed flavour folder (<prefix>/libexec/mdc/afl); when neither exists,
 * the one to name in a message (the installed one from an installed mdc). */
void mdc_cli__fuzz_bin(char *out, size_t n, const char *dir, const char *name);
/* prog's path in $PATH into out. 1 when found, else 0. */
int mdc_cli__fuzz_in_path(const char *prog, char *out, size_t n);
/* Runs argv with env additions (NAME=VALUE strings) and stdout+stderr to log (NULL: /dev/null),
 * in its own process group. Returns the pid, -1 on failure. */
pid_t mdc_cli__fuzz_spawn(char *const argv[], char *const env[], const char *log);
/* Runs argv to its end within timeout_s (killed after it), its output (stdout+stderr) in out.
 * Returns the wait status, or -1; *timed_out says whether it was killed for time. */
int mdc_cli__fuzz_run_capture(char *const argv[], char *const env[], double timeout_s, char *out, size_t n,
                              int *timed_out);
/* ASAN_OPTIONS for every target run (a static string). */
char *mdc_cli__fuzz_asan_env(void);
/* The environment every target run of this campaign gets: the driver, its config, the mutant,
 * strictness. A driver instrumented for AFL++ must be loaded before the target's fork server
 * starts, so the driver is preloaded too (AFL_PRELOAD under afl-fuzz and afl-tmin, which pass
 * it to the target only; LD_PRELOAD when mdc runs the target itself). env must hold 8 entries
 * and bufs 4 of 4200 bytes. Returns the entries set (env NULL-terminated after them). */
int mdc_cli__fuzz_target_env(const mdc_cli__campaign *c, char **env, char bufs[4][4200], int under_afl);
/* Starts the campaign's c->jobs instances (main, then a CMPLOG one, one on the ASan build, more)
 * on the inputs in (a folder, or "-" to resume) with dict; stops at the first that cannot start
 * (with a message) or at a stop signal. c->t_start is set. */
void mdc_cli__fuzz_start(mdc_cli__campaign *c, const mdc_cli__fuzz_bins *b, const char *in, const char *dict);
/* Watches the instances, ingesting every few seconds, until they end (-V), the time is up, or a
 * stop signal. Returns that signal (0: none). */
int mdc_cli__fuzz_watch(mdc_cli__campaign *c);
/* The trivial harness for secs seconds on one core: the machine's ceiling, now (NAN: none). */
double mdc_cli__fuzz_measure_ceiling(mdc_cli__campaign *c, double secs);

/* ---- fuzz_stats.c --------------------------------------------------------------------------- */

/* A number from the fuzzer_stats in dir, NAN when it (or the file) is missing. */
double mdc_cli__fuzz_stat_num(const char *dir, const char *key);
/* Reads every instance's totals into c; writes new plot rows and one sample per instance to the
 * store (a store error ends ingestion with a message: c->store_ok = 0). */
void mdc_cli__fuzz_ingest(mdc_cli__campaign *c);
/* The progress line on a terminal (nothing otherwise, or with --quiet). */
void mdc_cli__fuzz_progress(const mdc_cli__campaign *c);

/* ---- fuzz_triage.c -------------------------------------------------------------------------- */

uint32_t mdc_cli__fuzz_fnv(const char *s);   /* FNV-1a 32: a finding's file and trace name */
/* Writes input as a trace with binary (a target of the fuzzed build: it loads an instrumented
 * driver too). 0, or -1. */
int mdc_cli__fuzz_export_trace(const mdc_cli__campaign *c, const char *binary, const char *input, const char *out,
                               const char *name);
/* Every crash and hang of this process's instances: replayed, grouped by signature into c->f
 * (the caller frees it); the first of each group replayed triage_runs times (20 for
 * concurrency), minimised, written as a trace. */
void mdc_cli__fuzz_triage(mdc_cli__campaign *c);

/* ---- fuzz_instr.c -------------------------------------------------------------------------- */

/* Whether the ELF shared object at path is instrumented for coverage: 1 with kind "afl" (AFL++)
 * or "sancov" (SanitizerCoverage: libFuzzer, -fsanitize-coverage) and the symbol or section that
 * showed it in mark; 0 when none is there; -1 when path is not a readable 64-bit ELF file. */
int mdc_cli__fuzz_instrumentation(const char *path, char *kind, size_t kindlen, char *mark, size_t marklen);

/* ---- fuzz_gcov.c --------------------------------------------------------------------------- */

/* Before the campaign (c->out set): c->driver_cov is a readable ELF file built with --coverage
 * (the .gcda paths in it, a .gcno beside each), gcov and md_fuzz_replay are there, and gcov reads
 * the notes (the totals into c->gcov). 0, or -1 with a message on stderr (exit 2). */
int mdc_cli__fuzz_gcov_check(mdc_cli__campaign *c);
/* After it: the queue of this process's instances replayed through the gcov build (its counters
 * under c->gcov.dir), then gcov: c->gcov.measured and its figures, or a message on stderr. */
void mdc_cli__fuzz_gcov_measure(mdc_cli__campaign *c);
/* The figures as JSON (null without --driver-coverage; {gcov_build, error} when not measured). */
json_t *mdc_cli__fuzz_gcov_json(const mdc_cli__campaign *c);
/* The summary's line (none without --driver-coverage). */
void mdc_cli__fuzz_gcov_summary(FILE *f, const mdc_cli__campaign *c);
void mdc_cli__fuzz_gcov_free(mdc_cli__gcov *g);

/* ---- fuzz_export.c, fuzz_cmd.c -------------------------------------------------------------- */

int mdc_cli__fuzz_export(int argc, char **argv);   /* `mdc fuzz export ...` (argv[0] "export") */
void mdc_cli__fuzz_usage(FILE *f);

#endif
