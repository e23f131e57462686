/* mdc_int.h - private to the mdc command-line tool (conformance/mdc/): the case statuses, the
 * replay run that `mdc replay` and `mdc mutants` share, and the helpers between the files.
 *   mdc.c         : main, the command table, `mdc db merge`
 *   child.c       : isolated children: process groups, closed fds, pidfd waits, kills
 *   corpus.c      : trace discovery, shard hashing, baseline files, option values
 *   replay*.c     : `mdc replay`: cases in forked children, the store, summary and JSON (replay_int.h)
 *   record_cmd.c  : `mdc record`: a workload run through the recording driver
 *   mutants.c     : `mdc mutants`: build each mutant, replay the corpus, the kill matrix (stored)
 *   report_cmd.c  : `mdc report`: the page, PR summary and JUnit, or two runs compared
 *   results_cmd.c : `mdc results`: a stored run's verdicts on the terminal */
#ifndef MDC_CLI_INT_H
#define MDC_CLI_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mdc/engine.h"
#include "mdc/store.h"

/* Exit codes of every command (docs/mdc-cli.md). */
enum { MDC_EXIT_OK = 0, MDC_EXIT_UNEXPECTED = 1, MDC_EXIT_USAGE = 2, MDC_EXIT_STORE = 3 };

/* The case statuses: the results store's one table (MDC_STORE_STATUS_MAP: name, and whether a
 * case ending so makes the run fail), under the harness's names. Running never ends a case. */
typedef enum mdc_status {
#define X(e, n, u) MDC_S_##e = MDC_CS_##e,
  MDC_STORE_STATUS_MAP(X)
#undef X
  MDC_S_COUNT = MDC_CS_COUNT
} mdc_status;

const char *mdc_cli__status_name(mdc_status s);
int mdc_cli__status_unexpected(mdc_status s);

/* ---- child.c ------------------------------------------------------------------------------- */

/* What a child shows the parent (shared memory, not a descriptor): the line and op of the event
 * it started last, so a crash or a hang can say where, and at the end its result. */
/* crash_stack.c: what the child's crash handler leaves for the parent when the case running
 * dies on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT: the signal, the return addresses of its
 * stack and the child's /proc/self/maps (the objects they are in). */
#define MDC_CLI_CRASH_FRAMES 48
typedef struct mdc_cli__crash {
  _Atomic int sig;               /* set last: the rest is complete (0: no crash) */
  int code;                      /* si_code */
  uint64_t addr;                 /* si_addr */
  uint64_t pc;                   /* the interrupted instruction (0: unknown) */
  uint32_t n_frames, maps_len;
  uint64_t frames[MDC_CLI_CRASH_FRAMES];
  char maps[32768];              /* the lines of /proc/self/maps that name a file */
} mdc_cli__crash;

typedef struct mdc_cli__page {
  volatile uint32_t line;
  volatile char op[32];
  mdc_cli__crash crash;          /* the running case's crash, if it crashes (crash_stack.c) */
  _Atomic uint32_t result_len;   /* set last: the result is complete */
  unsigned char result[];
} mdc_cli__page;

typedef struct mdc_cli__child {
  pid_t pid;            /* 0 in the child */
  int pidfd;            /* parent: readable when the child exits (-1: no pidfd here) */
  mdc_cli__page *page;  /* shared with the child */
  size_t page_len;
  double t0, deadline;
  int reaped, status, timed_out;
  uint32_t line;        /* after mdc_cli__child_end: the page's last line and op */
  char op[32];
  char stack[6144];     /* after mdc_cli__child_end of a child that crashed: its symbolized stack,
                           one frame a line ("" when it did not crash; crash_stack.c) */
} mdc_cli__child;

double mdc_cli__now(void);                                   /* CLOCK_MONOTONIC seconds */
void mdc_cli__write_all(int fd, const void *buf, size_t n);
void mdc_cli__describe_exit(int st, char *out, size_t n);    /* "killed by signal SIGABRT (...)" */
/* Makes mdc the reaper of every descendant (orphans come back to it; mdc_cli__reap_all). */
void mdc_cli__become_subreaper(void);
/* Forks a child in its own process group with only stdin, stdout (= stderr) and stderr open and
 * a page of result_len bytes for its result. Returns 1 in the parent, 0 in the child (which
 * reports with mdc_cli__child_report and _exits), -1 when it cannot (errno set). */
int mdc_cli__child_start(mdc_cli__child *c, size_t result_len, double deadline);
/* In the child: publishes its result (at most result_len bytes). */
void mdc_cli__child_report(mdc_cli__child *c, const void *res, size_t len);
/* The descriptor to poll for the child's exit (a pidfd), or -1 (then poll at most
 * mdc_cli__child_poll_ms milliseconds at a time). */
int mdc_cli__child_poll_fd(const mdc_cli__child *c);
int mdc_cli__child_poll_ms(const mdc_cli__child *c);
/* 1 when the case is over (the child exited, or the deadline passed: c->timed_out), else 0. */
int mdc_cli__child_step(mdc_cli__child *c, double now);
/* Waits (poll on the child's pidfd, no sleeping) until the child ends or its deadline passes:
 * for a caller with one child at a time (the driver probe, mdc reduce's candidates). */
void mdc_cli__child_wait(mdc_cli__child *c);
/* Waits (poll, no sleeping) until one of the n children may have ended: a pidfd readable, or the
 * nearest deadline passed; at most a second. For callers that keep several children running. */
void mdc_cli__child_wait_any(mdc_cli__child *const *live, int n);
/* Kills the child's process group, reaps the child, reads the page (line, op) and copies the
 * result it reported into res (at most len bytes); returns the result's length (0: none). */
size_t mdc_cli__child_end(mdc_cli__child *c, void *res, size_t len);
/* Kills and reaps every child mdc still has (descendants that left their group included). */
void mdc_cli__reap_all(void);

/* ---- crash_stack.c ------------------------------------------------------------------------- */

/* In a child: installs the crash handlers (once, on an alternate signal stack) and points them at
 * area, the page area of the case that runs now (call again to point them at another case's). */
void mdc_cli__crash_arm(mdc_cli__crash *area);
/* In the parent: the stack of a crash as text, one frame a line ("#N 0xPC FUNC+0xOFF (OBJECT)
 * FILE:LINE"; "?? (OBJECT+0xOFF)" for a frame without a symbol), written into out (cut at a
 * whole frame). Returns its length (0: no crash recorded). */
int mdc_cli__crash_symbolize(const mdc_cli__crash *c, char *out, size_t cap);
/* The driver's top frames of such a stack: the frames after the handler, the signal trampoline
 * and the C library's (abort, raise), up to max_frames and until a frame of mdc itself, as
 * "f < g < h" in out; where gets the first one's FILE:LINE base name (or its object). Returns
 * the number of frames (0: none of the driver's). */
int mdc_cli__stack_top(const char *stack, int max_frames, char *out, size_t n, char *where, size_t wn);


/* ---- corpus.c ------------------------------------------------------------------------------ */

typedef struct mdc_cli__paths {
  char **v;
  size_t n, cap;
} mdc_cli__paths;

/* Adds the traces under each path: a file as given, a folder recursively (`*.jsonl`, skipping
 * folders named `blobs`); sorted, duplicates removed. -1 with a message naming the path in err
 * when a path cannot be read or holds no trace. */
int mdc_cli__collect(const char *const *paths, size_t n, mdc_cli__paths *out, char *err, size_t errlen);
void mdc_cli__paths_free(mdc_cli__paths *p);

/* The shard a trace name falls in: FNV-1a 64 of the name mod n (stable when traces are added). */
uint32_t mdc_cli__shard_of(const char *name, uint32_t n);
/* "I/N" with 0 <= I < N, or "auto" / "auto/N": the shard a CI engine's environment gives
 * (GitLab's CI_NODE_INDEX/CI_NODE_TOTAL, 1-based; a Kubernetes Indexed Job's JOB_COMPLETION_INDEX
 * with N or MDC_SHARD_TOTAL; MDC_SHARD_INDEX/MDC_SHARD_TOTAL; docs/scale-out.md). 0, with where
 * the shard came from in why; or -1 with the reason in why (why may be NULL: parse_shard). */
int mdc_cli__parse_shard_why(const char *s, uint32_t *i, uint32_t *n, char *why, size_t whylen);
int mdc_cli__parse_shard(const char *s, uint32_t *i, uint32_t *n);
/* A positive number of seconds (at most a day). 0 or -1. */
int mdc_cli__parse_seconds(const char *s, double *out);
/* An integer in [lo, hi]. 0 or -1. */
int mdc_cli__parse_int(const char *s, long lo, long hi, long *out);

/* A baseline: trace names, one a line, `#` comments, blank lines ignored. */
typedef struct mdc_cli__baseline {
  char **names;
  size_t n;
} mdc_cli__baseline;
int mdc_cli__baseline_load(const char *path, mdc_cli__baseline *out, char *err, size_t errlen);
int mdc_cli__baseline_has(const mdc_cli__baseline *b, const char *name);
void mdc_cli__baseline_free(mdc_cli__baseline *b);

/* s with control characters written as \xNN, so a trace name or a driver's message cannot
 * move the cursor or recolour a terminal. Returns the length written. */
size_t mdc_cli__terminal_safe(const char *s, char *out, size_t len);

/* mkdir -p of the folder that holds path (nothing for a bare file name). 0 or -1 (errno). */
int mdc_cli__mkdir_parent(const char *path);

/* ---- replay.c ------------------------------------------------------------------------------ */

/* What the summary of a replay lists after its counts (--summary): the causes, largest first
 * (replay_out.c); every non-passing case; nothing. */
enum { MDC_CLI_SUMMARY_GROUPS = 0, MDC_CLI_SUMMARY_CASES, MDC_CLI_SUMMARY_NONE };

typedef struct mdc_cli__replay_opts {
  const char *driver;        /* NULL: the reference driver linked in */
  const char *config;        /* default "backend=auto" */
  const char *db;            /* NULL with no_db */
  const char *baseline;      /* may be NULL */
  const char *skips;         /* --skips FILE: traces never run (Skipped); NULL: none */
  const char *flakes;        /* --flakes FILE: known flaky traces (a failure is a Flake); NULL: none */
  double progress_interval_s; /* off a terminal, a status line every so many seconds (0: 10) */
  const char *kind;          /* run kind in the store: "replay", "mutants" */
  double timeout_s;
  uint32_t shard_i, shard_n;
  /* --include / --exclude GLOB (fnmatch on the trace's name, '*' crossing '/'): a trace runs
   * when it matches an include (or none is given) and no exclude; the others are not cases. */
#define MDC_CLI_MAX_GLOBS 64
  const char *include[MDC_CLI_MAX_GLOBS], *exclude[MDC_CLI_MAX_GLOBS];
  uint32_t n_include, n_exclude;
  int jobs;
  int json, quiet, rerun_failures;
  int summary;               /* --summary: MDC_CLI_SUMMARY_GROUPS (default), _CASES or _NONE */
  int verbose;               /* each event of each case on stderr (mdc replay -v) */
  int strict_messages;       /* message expectations judged (else advisory) */
  int silence_children;      /* children's stdout/stderr to /dev/null (mutants) */
  const char *diff_a, *diff_b; /* --differential A,B: each case replayed on backend A and on B and
                                  the two compared (NULL: off) */
  /* Grouped replay (replay_group.c, docs/mdc-cli.md "--group"): a child loads the driver once
   * and runs up to `group` cases one after the other (0: the default for the driver probed,
   * mdc_cli__rp_group_size; 1: one child per case). A child whose resident memory grew by more
   * than group_mib MiB (0: 512) since its first case starts no further case. */
  uint32_t group, group_mib;
  uint64_t shuffle_seed;     /* --shuffle SEED: cases run in an order drawn from it */
  int has_shuffle_seed;
  int keep_order;            /* --keep-order: cases run in the order PATHs name them */
  const char *const *paths;
  size_t n_paths;
} mdc_cli__replay_opts;

typedef struct mdc_cli__case {
  char *path;
  char *rules;             /* the trace header's rules ("; "-joined), NULL when none */
  char name[128];
  mdc_status status;
  mdc_result res;          /* the engine's result (message etc.), or what the parent made up */
  double duration_s;
  int64_t case_id;
  int attempts;
  int finished;            /* its status is final */
  int must_pass;           /* the header's must_pass (a failure of a trace that is not: Warn) */
  char preceded_by[128];   /* OrderDependent: the trace that ran before it in its child ("") */
  int skipped;             /* listed in --skips: never run, Skipped (replay_lists.c) */
  int known_flaky;         /* listed in --flakes: a failure is a Flake (replay_lists.c) */
  char signature[320];     /* its cause (signature.c; "" when none: passed, not run) */
  char *stack;             /* a crash's symbolized stack (crash_stack.c), NULL when none */
} mdc_cli__case;

typedef struct mdc_cli__run {
  mdc_cli__case *cases;
  size_t n;
  uint32_t count[MDC_S_COUNT];
  uint32_t unexpected;
  double duration_s;
  int interrupted_by;      /* the signal (SIGINT, SIGTERM) that stopped the run early, or 0; the
                              caller raises it again when it has closed what it holds */
  size_t stopped_running;  /* cases killed by the stop (Interrupted in the store) */
  size_t left_out;         /* traces --include/--exclude left out (not cases) */
  uint32_t group_size;     /* cases per child the run used (grouped replay) */
  size_t children;         /* children started to run cases */
  char uuid[37];
  char driver_name[64], driver_version[64], backend[32], device[64];
  /* The driver build judged (driver_id.c; "" when not known) and the selection of traces. */
  char driver_file[512], driver_build_id[129], driver_sha256[65];
  char selection[65];      /* SHA-256 of the sorted set of case names (replay_lists.c) */
  uint32_t selection_n;
} mdc_cli__run;

/* Runs the replay described by o (output as o->json / o->quiet say) and fills *run. Returns the
 * exit code (MDC_EXIT_*). Free *run with mdc_cli__run_free. Stopped by SIGINT/SIGTERM, it keeps
 * only the finished cases in *run, sets run->interrupted_by and returns MDC_EXIT_UNEXPECTED. */
int mdc_cli__replay(const mdc_cli__replay_opts *o, mdc_cli__run *run);
void mdc_cli__run_free(mdc_cli__run *run);

/* ---- differential.c --------------------------------------------------------------------- */

/* Replays the trace at path twice, its first open_device forced to backend=na and then to
 * backend=nb, and compares everything both observed (calls' statuses and shapes, the bytes each
 * check looked at). Pass only when both pass and agree; a disagreement is a Fail naming the
 * first event where they part. Fills *out; returns out->verdict. */
mdc_verdict mdc_cli__differential(const md_driver *d, const char *path, const mdc_trace_opts *base,
                                  const char *na, const char *nb, mdc_result *out);

/* ---- commands ------------------------------------------------------------------------------ */

int mdc_cli__cmd_replay(int argc, char **argv);
int mdc_cli__cmd_record(int argc, char **argv);
int mdc_cli__cmd_mutants(int argc, char **argv);
int mdc_cli__cmd_mutate(int argc, char **argv);   /* mutate.c */
int mdc_cli__cmd_fuzz(int argc, char **argv);
int mdc_cli__cmd_report(int argc, char **argv);
int mdc_cli__cmd_results(int argc, char **argv);
int mdc_cli__cmd_baseline(int argc, char **argv);  /* baseline_cmd.c */

/* ---- progress text (replay_progress.c), shared with mdc mutants ------------------------- */

/* "4.2 s", "1 min 5 s", "2 h 3 min" ("-" for a negative or non-finite time). Pure. */
void mdc_cli__duration_text(double s, char *out, size_t len);
/* "ETA 1 min 5 s" when done of total took elapsed seconds ("ETA unknown" before the first). */
void mdc_cli__eta_text(double elapsed, size_t done, size_t total, char *out, size_t len);
int mdc_cli__cmd_reduce(int argc, char **argv);

/* ---- signature.c --------------------------------------------------------------------------- */

/* s with numbers (#), hex addresses (0x#), quoted names ('*') and paths (<path>) masked, so
 * messages that differ only in them read the same. */
void mdc_cli__mask(const char *s, char *out, size_t n);
/* The cause signature of a case whose status is st with result r (stack: a crash's symbolized
 * stack or NULL); "" for a Pass, a Skipped case, or one that never ended. */
void mdc_cli__signature(mdc_status st, const mdc_result *r, const char *stack, char *out, size_t n);
/* Sets c->signature from its status, result and stack (mdc_cli__rp_set_status calls it). */
void mdc_cli__case_cause(mdc_cli__case *c);

#endif
