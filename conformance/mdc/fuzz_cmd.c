/* fuzz_cmd.c - `mdc fuzz`: an AFL++ campaign on one fuzz target (docs/fuzzing.md): one main
 * instance and J-1 secondaries (one of them CMPLOG, one on the ASan build), each in a process
 * group of its own; their fuzzer_stats and plot_data ingested into the results store every few
 * seconds; at the end every crash and hang triaged (replayed for its reproduction rate, grouped
 * by signature, minimised with afl-tmin, written as a trace); with --driver-coverage, the queue
 * replayed through a gcov build of the driver (fuzz_gcov.c). `mdc fuzz export` writes a stored
 * finding as a trace. Ctrl-C stops the instances cleanly, ingests and triages what they have;
 * the next run on the same folder resumes the campaign.
 * This file: the options and their checks, the run in the store, the steps in order, the
 * summary and JSON. The instances are fuzz_afl.c's, the statistics fuzz_stats.c's, the triage
 * fuzz_triage.c's, the export fuzz_export.c's (fuzz_int.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc/store.h"
#include "mdc_int.h"
#include "paths.h"

static const char *const targets[] = {"tokens", "shapes", "concurrency", "trace"};

void mdc_cli__fmt(char *buf, size_t n, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, n, f, ap);
  va_end(ap);
}

volatile sig_atomic_t mdc_cli__fuzz_stop_signal;
static void on_stop(int sig) { mdc_cli__fuzz_stop_signal = sig; }

void mdc_cli__fuzz_usage(FILE *f) {
  fprintf(f,
          "usage: mdc fuzz --target T [options]\n"
          "       mdc fuzz export SIGNATURE --out FILE [--db FILE]\n"
          "Runs an AFL++ campaign on fuzz target T (tokens, shapes, concurrency, trace; docs/fuzzing.md):\n"
          "one main instance and J-1 secondaries, statistics ingested into the results store as it\n"
          "runs, every crash and hang triaged at the end (replayed, grouped by signature, minimised,\n"
          "written as a trace). Ctrl-C stops it cleanly; running it again on the same --out resumes.\n\n"
          "  --seconds S      how long (default 60)\n"
          "  --jobs J         instances: main, then a CMPLOG one, one on the ASan build, more (default 1)\n"
          "  --driver SO      the driver to fuzz (default: the reference driver linked into the target)\n"
          "  --mutant NAME    with a mutants build as --driver: the mutant to run (sets MD_MUTANT)\n"
          "  --config STR     open_device keys (default backend=sim)\n"
          "  --db FILE        results store (default results/mdc.db; ':memory:' keeps nothing)\n"
          "  --no-db          write no results store (as for mdc replay)\n"
          "  --out DIR        campaign folder (default results/fuzz/T): afl/, triage/, logs\n"
          "  --fresh          start over: the folder's earlier campaign is removed, not resumed\n"
          "  --seeds DIR      the initial corpus (default: the target's seeds made from the trace corpus)\n"
          "  --driver-coverage SO\n"
          "                   after the campaign, replay its queue through SO, a gcc --coverage build of\n"
          "                   the same driver, and report the driver's own functions, lines and branches\n"
          "                   reached (gcov; docs/fuzzing.md \"The driver's own coverage\")\n"
          "  --asan           the main instance on the ASan+UBSan build (slower; default: the UBSan build)\n"
          "  --ceiling S      first measure the trivial harness for S seconds: the ratio to it\n"
          "  --triage-runs N  replays of each finding for its reproduction rate (default 5; 20 for concurrency)\n"
          "  --tmin S         seconds afl-tmin may take per finding (default 60; 0: no minimising)\n"
          "  --node NAME      prefix this process's instance names (NAME-main, NAME-s1, ...): several\n"
          "                   processes or machines sharing one --out folder (docs/fuzzing.md)\n"
          "  --secondary      every instance of this process is a secondary (-S): the other nodes\n"
          "  --strict         also judge the reference driver's documented decisions (default: on for\n"
          "                   the reference driver and --mutant; --no-strict turns it off)\n"
          "  --fuzz-build DIR the fuzz builds: DIR, DIR-asan, DIR-cmplog (default %s)\n"
          "  --until-finding  stop the campaign at its first crash or hang (AFL_BENCH_UNTIL_CRASH)\n"
          "  --no-mutator     AFL++'s byte mutations only (default: with them, the program targets'\n"
          "                   call-level mutations, libmd_fuzz_mutator.so)\n"
          "  --json           one JSON object on stdout\n"
          "  --quiet          no progress line and no summary\n\n"
          "exit status: 0 no finding, 1 findings, 2 bad usage or input (unknown target, no afl++, no\n"
          "fuzz build, a driver that cannot be loaded, a --driver-coverage build gcov cannot read),\n"
          "3 results store error\n",
          mdc_cli__fuzz_build_default());
}

/* ---- output --------------------------------------------------------------------------------- */

static void print_json(mdc_cli__campaign *c, double dur, int interrupted) {
  json_t *fa = json_array();
  uint32_t crashes = 0, hangs = 0;
  double first = -1;
  for (size_t i = 0; i < c->n_f; i++) {
    mdc_cli__finding *f = &c->f[i];
    if (!strcmp(f->kind, "hang")) hangs++;
    else crashes++;
    json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s}", "signature", f->signature, "kind", f->kind, "message",
                          f->message, "count", (int)f->count, "replays", f->replays, "reproduced", f->reproduced,
                          "reproducer", f->repro, "minimized", f->minimized);
    json_object_set_new(j, "trace", f->trace[0] ? json_string(f->trace) : json_null());
    json_object_set_new(j, "first_seen_s", f->first_s >= 0 ? json_real(f->first_s) : json_null());
    if (f->first_s >= 0 && (first < 0 || f->first_s < first)) first = f->first_s;
    json_array_append_new(fa, j);
  }
  json_t *inst = json_array();
  for (int i = 0; i < c->n_inst; i++)
    json_array_append_new(inst, json_pack("{s:s,s:s,s:b,s:b}", "name", c->inst[i].name, "binary", c->inst[i].binary,
                                          "asan", c->inst[i].asan, "cmplog", c->inst[i].cmplog[0] != 0));
  json_t *j = json_pack("{s:s,s:f,s:f,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:s,s:b}", "target", c->target,
                        "seconds", dur, "execs_per_sec", dur > 0 ? (double)c->execs / dur : 0.0, "execs",
                        (json_int_t)c->execs, "crashes", (json_int_t)crashes, "hangs", (json_int_t)hangs, "stability",
                        isnan(c->stability) ? json_null() : json_real(c->stability), "edges", (json_int_t)c->edges,
                        "corpus", (json_int_t)c->corpus, "raw_crashes", (json_int_t)c->raw_crashes, "raw_hangs",
                        (json_int_t)c->raw_hangs, "peak_rss_kb", c->rss_kb >= 0 ? json_integer(c->rss_kb) : json_null(),
                        "run_uuid", c->store && c->uuid[0] && !c->no_db ? json_string(c->uuid) : json_null(), "out", c->out,
                        "interrupted", interrupted);
  if (!isnan(c->ceiling_eps)) {
    json_object_set_new(j, "ceiling_execs_per_sec", json_real(c->ceiling_eps));
    json_object_set_new(j, "ratio_to_ceiling",
                        json_real(c->ceiling_eps > 0 && dur > 0 ? (double)c->execs / dur / c->ceiling_eps : 0));
  }
  json_object_set_new(j, "first_finding_s", first >= 0 ? json_real(first) : json_null());
  json_object_set_new(j, "jobs", json_integer(c->n_inst));
  json_object_set_new(j, "instances", inst);
  json_object_set_new(j, "findings", fa);
  json_object_set_new(j, "driver", json_string(c->driver ? c->driver : "(reference)"));
  /* the reference driver is linked into the targets and built with them: instrumented */
  json_object_set_new(j, "driver_instrumented", json_string(c->driver ? c->instr : "reference"));
  if (c->mutant) json_object_set_new(j, "mutant", json_string(c->mutant));
  json_object_set_new(j, "strict", json_boolean(c->strict));
  json_object_set_new(j, "program_mutator", json_boolean(c->mutator));
  json_object_set_new(j, "driver_coverage", mdc_cli__fuzz_gcov_json(c));
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
  json_decref(j);
  if (s) puts(s);
  free(s);
  fflush(stdout);
}

static void summary(FILE *f, mdc_cli__campaign *c, double dur, int interrupted) {
  fprintf(f, "mdc fuzz: %s, %.0f s%s, %d instance%s, driver %s%s%s%s%s%s\n", c->target, dur,
          interrupted ? " (interrupted)" : "", c->n_inst, c->n_inst == 1 ? "" : "s",
          c->driver ? c->driver : "(reference)", c->mutant ? ", mutant " : "", c->mutant ? c->mutant : "",
          c->driver ? " (instrumented: " : "", c->driver ? c->instr : "", c->driver ? ")" : "");
  fprintf(f, "  execs %" PRId64 " (%.0f/s), edges %" PRId64 ", corpus %" PRId64 ", stability %.2f%%, peak RSS %" PRId64
          " KiB\n", c->execs, dur > 0 ? (double)c->execs / dur : 0, c->edges, c->corpus,
          isnan(c->stability) ? 0.0 : c->stability, c->rss_kb);
  if (!isnan(c->ceiling_eps))
    fprintf(f, "  ceiling (trivial harness, this machine, just before) %.0f/s: ratio %.3f\n", c->ceiling_eps,
            c->ceiling_eps > 0 && dur > 0 ? (double)c->execs / dur / c->ceiling_eps : 0);
  if (c->store && c->uuid[0] && !c->no_db)
    fprintf(f, "  results: %s (run %s), campaign folder %s\n", c->db, c->uuid, c->out);
  else fprintf(f, "  results: not stored (--no-db), campaign folder %s\n", c->out);
  mdc_cli__fuzz_gcov_summary(f, c);
  fprintf(f, "  %zu finding%s\n", c->n_f, c->n_f == 1 ? "" : "s");
  for (size_t i = 0; i < c->n_f; i++) {
    mdc_cli__finding *x = &c->f[i];
    char sig[400], msg[1600];
    mdc_cli__terminal_safe(x->signature, sig, sizeof sig);
    mdc_cli__terminal_safe(x->message, msg, sizeof msg);
    fprintf(f, "  %-6s %s  (%u input%s, first after %.1f s, reproduced %d/%d)\n         %s\n         trace: %s\n",
            x->kind, sig, x->count, x->count == 1 ? "" : "s", x->first_s, x->reproduced, x->replays, msg,
            x->trace[0] ? x->trace : "(none)");
  }
}

static int rm_rf(const char *path) {
  char *argv[] = {(char *)"rm", (char *)"-rf", (char *)path, NULL};
  char out[256];
  int to;
  int st = mdc_cli__fuzz_run_capture(argv, NULL, 120, out, sizeof out, &to);
  return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The driver and config must open a device: the main target binary running an empty program
 * says (it, unlike a plain binary, loads a driver instrumented for AFL++ too). */
static int probe_driver(const mdc_cli__campaign *c, const char *binary) {
  char empty[] = "/tmp/mdc-fuzz-probe-XXXXXX";
  int fd = mkstemp(empty);
  if (fd < 0) return 0;
  if (write(fd, "\0\0\0\0", 4) != 4) {}
  close(fd);
  char *av[] = {(char *)binary, empty, NULL};
  char bufs[4][4200];
  char *env[12];
  int e = mdc_cli__fuzz_target_env(c, env, bufs, 0);
  env[e++] = mdc_cli__fuzz_asan_env();
  env[e] = NULL;
  static char out[8192];
  int to;
  int st = mdc_cli__fuzz_run_capture(av, env, 60, out, sizeof out, &to);
  unlink(empty);
  if (!to && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  const char *m = strstr(out, "mdc fuzz target ");
  char line[1024];
  if (m) mdc_cli__fmt(line, sizeof line, "%.*s", (int)strcspn(m, "\n"), m);
  else if (to) mdc_cli__fmt(line, sizeof line, "opening a device took more than 60 s");
  else mdc_cli__fmt(line, sizeof line, "%s could not run an empty program", binary);
  char safe[1200];
  mdc_cli__terminal_safe(line, safe, sizeof safe);
  fprintf(stderr, "mdc fuzz: driver %s: %s\n", c->driver ? c->driver : "(reference)", safe);
  return -1;
}

/* Says whether --driver is instrumented for coverage, and warns when it is not: AFL++ then
 * counts the harness's edges only, and the campaign is blind to the driver's own code. */
static void say_instrumentation(mdc_cli__campaign *c) {
  char kind[16] = "", mark[96] = "";
  int r = mdc_cli__fuzz_instrumentation(c->driver, kind, sizeof kind, mark, sizeof mark);
  mdc_cli__fmt(c->instr, sizeof c->instr, "%s", r > 0 ? kind : "none");
  if (r > 0) {
    if (!c->quiet)
      fprintf(stderr, "mdc fuzz: driver %s is instrumented for coverage (%s: %s): its own edges count\n", c->driver,
              !strcmp(kind, "afl") ? "AFL++" : "SanitizerCoverage", mark);
  } else {
    fprintf(stderr,
            "mdc fuzz: warning: driver %s is not instrumented for coverage (no __afl_area_ptr, "
            "__sanitizer_cov_trace_pc_guard or __sancov_guards%s): the campaign sees the harness's edges only, "
            "not the driver's; build it with mdc_fuzz_driver() or afl-clang-fast (docs/fuzzing.md, \"Instrumenting "
            "a driver\")\n", c->driver, r < 0 ? "; not a readable ELF file" : "");
  }
}

/* ---- the command's steps -------------------------------------------------------------------- */

/* A step that did not end the command (else it returns the exit status). */
#define GO_ON (-1)

/* What the options say beyond the campaign, and what the checks make of it. */
typedef struct setup {
  double ceiling_s;
  const char *out_opt;
  int strict_opt, no_mutator;
  mdc_cli__fuzz_bins bins;
  char seeds[4300], dict[4300];
  int resumed;
} setup;

/* A value of --seconds, --ceiling, --jobs, --triage-runs or --tmin. GO_ON, or the exit status. */
static int option_value(int opt, mdc_cli__campaign *c, setup *s) {
  long v;
  switch (opt) {
    case 's':
      if (mdc_cli__parse_seconds(optarg, &c->seconds)) {
        fprintf(stderr, "mdc fuzz: --seconds '%s': want seconds > 0 (at most 86400)\n", optarg);
        return MDC_EXIT_USAGE;
      }
      break;
    case 'C':
      if (mdc_cli__parse_seconds(optarg, &s->ceiling_s)) {
        fprintf(stderr, "mdc fuzz: --ceiling '%s': want seconds > 0\n", optarg);
        return MDC_EXIT_USAGE;
      }
      break;
    case 'j':
      if (mdc_cli__parse_int(optarg, 1, MDC_FUZZ_MAX_JOBS, &v)) {
        fprintf(stderr, "mdc fuzz: --jobs '%s': want 1..%d\n", optarg, MDC_FUZZ_MAX_JOBS);
        return MDC_EXIT_USAGE;
      }
      c->jobs = (int)v;
      break;
    case 'r':
      if (mdc_cli__parse_int(optarg, 1, 1000, &v)) {
        fprintf(stderr, "mdc fuzz: --triage-runs '%s': want 1..1000\n", optarg);
        return MDC_EXIT_USAGE;
      }
      c->triage_runs = (int)v;
      break;
    case 'm':
      if (mdc_cli__parse_int(optarg, 0, 86400, &v)) {
        fprintf(stderr, "mdc fuzz: --tmin '%s': want 0..86400 seconds\n", optarg);
        return MDC_EXIT_USAGE;
      }
      c->tmin_s = (int)v;
      break;
  }
  return GO_ON;
}

/* The defaults, then the options in argv. GO_ON, or the exit status (--help: 0). */
static int parse_options(int argc, char **argv, mdc_cli__campaign *c, setup *s) {
  static const struct option opts[] = {
      {"target", required_argument, 0, 'T'},  {"seconds", required_argument, 0, 's'},
      {"jobs", required_argument, 0, 'j'},    {"driver", required_argument, 0, 'd'},
      {"mutant", required_argument, 0, 'M'},  {"config", required_argument, 0, 'c'},
      {"db", required_argument, 0, 'b'},      {"out", required_argument, 0, 'o'},
      {"fresh", no_argument, 0, 'F'},         {"asan", no_argument, 0, 'A'},
      {"ceiling", required_argument, 0, 'C'}, {"triage-runs", required_argument, 0, 'r'},
      {"tmin", required_argument, 0, 'm'},    {"fuzz-build", required_argument, 0, 'B'},
      {"json", no_argument, 0, 'J'},          {"quiet", no_argument, 0, 'q'},
      {"seeds", required_argument, 0, 'I'},   {"node", required_argument, 0, 'N'},
      {"secondary", no_argument, 0, 'S'},     {"strict", no_argument, 0, 'x'},
      {"no-strict", no_argument, 0, 'X'},     {"until-finding", no_argument, 0, 'U'},
      {"no-mutator", no_argument, 0, 'P'},    {"help", no_argument, 0, 'h'},
      {"no-db", no_argument, 0, 'n'},         {"driver-coverage", required_argument, 0, 'G'},
      {0, 0, 0, 0}};
  memset(c, 0, sizeof *c);
  c->seconds = 60;
  c->jobs = 1;
  c->db = "results/mdc.db";
  c->fuzz_build = mdc_cli__fuzz_build_default();
  c->triage_runs = 5;
  c->tmin_s = 60;
  c->stability = NAN;
  c->ceiling_eps = NAN;
  c->rss_kb = -1;
  memset(s, 0, sizeof *s);
  s->strict_opt = -1;
  int opt, rc;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (opt) {
      case 'T': c->target = optarg; break;
      case 'd': c->driver = optarg; break;
      case 'M': c->mutant = optarg; break;
      case 'c': c->config = optarg; break;
      case 'b': c->db = optarg; break;
      case 'n': c->no_db = 1; break;
      case 'G': c->driver_cov = optarg; break;
      case 'o': s->out_opt = optarg; break;
      case 'F': c->fresh = 1; break;
      case 'A': c->asan_main = 1; break;
      case 'B': c->fuzz_build = optarg; break;
      case 'J': c->json = 1; break;
      case 'q': c->quiet = 1; break;
      case 'I': c->seeds = optarg; break;
      case 'N': c->node = optarg; break;
      case 'S': c->secondary = 1; break;
      case 'x': s->strict_opt = 1; break;
      case 'X': s->strict_opt = 0; break;
      case 'P': s->no_mutator = 1; break;
      case 'U': c->until_finding = 1; break;
      case 'h': mdc_cli__fuzz_usage(stdout); return MDC_EXIT_OK;
      case 's': case 'C': case 'j': case 'r': case 'm':
        if ((rc = option_value(opt, c, s)) != GO_ON) return rc;
        break;
      default:
        fprintf(stderr, "mdc fuzz: unknown option or missing value '%s' (see mdc fuzz --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  /* One store in memory for the campaign's rows (triage reads them back), dropped at the end. */
  if (c->no_db) c->db = ":memory:";
  return GO_ON;
}

/* The options together: no stray argument, a known target, a usable --node; strictness and the
 * program mutator decided. GO_ON, or the exit status. */
static int check_options(int argc, char **argv, mdc_cli__campaign *c, const setup *s) {
  if (optind < argc) {
    fprintf(stderr, "mdc fuzz: unexpected argument '%s' (mdc fuzz --target T ..., or mdc fuzz export)\n",
            argv[optind]);
    return MDC_EXIT_USAGE;
  }
  if (!c->target) {
    fprintf(stderr, "mdc fuzz: --target is required (tokens, shapes, concurrency or trace)\n");
    return MDC_EXIT_USAGE;
  }
  int known = 0;
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) known |= !strcmp(c->target, targets[i]);
  if (!known) {
    fprintf(stderr, "mdc fuzz: --target '%s': unknown target (tokens, shapes, concurrency or trace)\n", c->target);
    return MDC_EXIT_USAGE;
  }
  /* The reference driver's documented decisions are judged on it and on its mutants only. */
  c->strict = s->strict_opt >= 0 ? s->strict_opt : (!c->driver || c->mutant != NULL);
  c->mutator = !s->no_mutator && strcmp(c->target, "trace") && access(mdc_cli__fuzz_mutator_path(), R_OK) == 0;
  if (c->node && (!c->node[0] || strcspn(c->node, "/ \t:,") != strlen(c->node))) {
    fprintf(stderr, "mdc fuzz: --node '%s': want a name without '/', ':', ',' or blanks\n", c->node);
    return MDC_EXIT_USAGE;
  }
  return GO_ON;
}

/* afl-fuzz, the target binaries, and a driver that opens a device with them. GO_ON, or the
 * exit status. */
static int find_binaries(mdc_cli__campaign *c, setup *s) {
  char tool[4096];
  if (!mdc_cli__fuzz_in_path("afl-fuzz", tool, sizeof tool)) {
    fprintf(stderr, "mdc fuzz: afl-fuzz is not installed (not in PATH): `make fuzz-build` installs afl++ with apt\n");
    return MDC_EXIT_USAGE;
  }
  mdc_cli__fuzz_bins *b = &s->bins;
  char name[64], dir[4200];
  mdc_cli__fmt(name, sizeof name, "md_fuzz_%s", c->target);
  mdc_cli__fuzz_bin(b->plain, sizeof b->plain, c->fuzz_build, name);
  mdc_cli__fmt(dir, sizeof dir, "%s-asan", c->fuzz_build);
  mdc_cli__fuzz_bin(b->asan, sizeof b->asan, dir, name);
  mdc_cli__fmt(dir, sizeof dir, "%s-cmplog", c->fuzz_build);
  mdc_cli__fuzz_bin(b->cmplog, sizeof b->cmplog, dir, name);
  b->main = c->asan_main ? b->asan : b->plain;
  if (!mdc_cli__fuzz_exists_exec(b->main)) {
    size_t bl = strlen(b->main), nl = strlen(name);
    int flat = bl > nl + 6 && strncmp(b->main + bl - nl - 6, "/fuzz/", 6) != 0;
    if (flat)   /* an installed layout: the fuzz builds are installed beside mdc, not built here */
      fprintf(stderr, "mdc fuzz: %s is not installed: install a fuzz build there (`cmake --install BUILD-FUZZ "
              "--component fuzz --prefix PREFIX`, docs/fuzzing.md \"Installed\") or give --fuzz-build DIR\n", b->main);
    else
      fprintf(stderr, "mdc fuzz: %s is not built: run `make fuzz-build` first\n", b->main);
    return MDC_EXIT_USAGE;
  }
  static char driver_abs[4096];
  if (c->driver && (access(c->driver, R_OK) || !realpath(c->driver, driver_abs))) {
    fprintf(stderr, "mdc fuzz: --driver '%s': %s\n", c->driver, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  if (c->driver) c->driver = driver_abs;
  if (probe_driver(c, b->main)) return MDC_EXIT_USAGE;
  if (c->driver) say_instrumentation(c);
  return GO_ON;
}

/* The campaign folder (removed first with --fresh), whether it resumes, and the seeds and
 * dictionary. GO_ON, or the exit status. */
static int prepare_folder(mdc_cli__campaign *c, setup *s) {
  if (s->out_opt) mdc_cli__fmt(c->out, sizeof c->out, "%s", s->out_opt);
  else mdc_cli__fmt(c->out, sizeof c->out, "results/fuzz/%s", c->target);
  mdc_cli__fmt(c->afl, sizeof c->afl, "%s/afl", c->out);
  if (c->fresh && rm_rf(c->out)) {
    fprintf(stderr, "mdc fuzz: cannot remove '%s' for --fresh\n", c->out);
    return MDC_EXIT_USAGE;
  }
  char probe[4200];
  mdc_cli__fmt(probe, sizeof probe, "%s/x", c->afl);
  if (mdc_cli__mkdir_parent(probe) != 0) {
    fprintf(stderr, "mdc fuzz: cannot create the campaign folder '%s': %s\n", c->afl, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  char mainstats[4300];
  mdc_cli__fmt(mainstats, sizeof mainstats, "%s/%s%s%s/fuzzer_stats", c->afl, c->node ? c->node : "",
               c->node ? "-" : "", c->secondary ? "s1" : "main");
  s->resumed = access(mainstats, R_OK) == 0;
  if (c->seeds) mdc_cli__fmt(s->seeds, sizeof s->seeds, "%s", c->seeds);
  else mdc_cli__fmt(s->seeds, sizeof s->seeds, "%s/seeds/%s", mdc_cli__fuzz_data_dir(), c->target);
  mdc_cli__fmt(s->dict, sizeof s->dict, "%s/dict/%s.dict", mdc_cli__fuzz_data_dir(), c->target);
  if (!s->resumed && access(s->seeds, R_OK)) {
    fprintf(stderr, "mdc fuzz: seeds '%s': %s\n", s->seeds, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  if (c->driver_cov && mdc_cli__fuzz_gcov_check(c)) return MDC_EXIT_USAGE;
  return GO_ON;
}

/* The store: the run and its campaign row first. GO_ON (c->store open, c->store_ok), or the
 * exit status (the store closed). */
static int open_run(mdc_cli__campaign *c, const setup *s) {
  char err[1024];
  c->tty = !c->quiet && isatty(STDERR_FILENO);
  struct stat dst;
  if (!c->db[0]) {
    fprintf(stderr, "mdc fuzz: --db '': the results store needs a file name\n");
    return MDC_EXIT_STORE;
  }
  if (strcmp(c->db, ":memory:") && stat(c->db, &dst) == 0 && !S_ISREG(dst.st_mode)) {
    fprintf(stderr, "mdc fuzz: results store '%s': not a regular file (a store is a SQLite file)\n", c->db);
    return MDC_EXIT_STORE;
  }
  if (strcmp(c->db, ":memory:") && mdc_cli__mkdir_parent(c->db) != 0) {
    fprintf(stderr, "mdc fuzz: cannot create the folder of '%s': %s\n", c->db, strerror(errno));
    return MDC_EXIT_STORE;
  }
  if (mdc_store_open(c->db, &c->store, err, sizeof err)) {
    fprintf(stderr, "mdc fuzz: %s\n", err);
    return MDC_EXIT_STORE;
  }
  char drvname[96];
  mdc_cli__fmt(drvname, sizeof drvname, "%s%s", c->mutant ? "mutant:" : "",
               c->mutant ? c->mutant : c->driver ? "(vendor)" : "mdc-reference");
  mdc_run_info ri = {.kind = "fuzz", .driver_name = drvname, .driver_path = c->driver ? c->driver : "(reference)",
                     .backend = "sim", .config = c->config ? c->config : "backend=sim"};
  mdc_fuzz_campaign fc = {.target = c->target, .jobs = (uint32_t)c->jobs, .planned_s = c->seconds,
                          .out_dir = c->out, .resumed = s->resumed};
  if (mdc_store_run_begin(c->store, &ri, &c->run_id, c->uuid) || mdc_store_fuzz_campaign(c->store, c->run_id, &fc)) {
    fprintf(stderr, "mdc fuzz: %s\n", mdc_store_error(c->store));
    mdc_store_close(c->store);
    return MDC_EXIT_STORE;
  }
  c->store_ok = 1;
  return GO_ON;
}

static void catch_signals(void) {
  struct sigaction sa = {.sa_handler = on_stop};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* An instance that stopped at once (afl-fuzz refused): say why from its log. */
static void explain_early_stop(const mdc_cli__campaign *c, int interrupted) {
  if (c->execs == 0 && !interrupted && c->n_inst) {
    char log[4300], line[512], last[512] = "";
    mdc_cli__fmt(log, sizeof log, "%s/%s.log", c->out, c->inst[0].name);
    FILE *lf = fopen(log, "r");
    while (lf && fgets(line, sizeof line, lf))
      if (strstr(line, "PROGRAM ABORT") || strstr(line, "ERROR") || strstr(line, "Location"))
        mdc_cli__fmt(last, sizeof last, "%s", line);
    if (lf) fclose(lf);
    if (last[0]) {
      char safe[600];
      mdc_cli__terminal_safe(last, safe, sizeof safe);
      fprintf(stderr, "mdc fuzz: afl-fuzz stopped at once (see %s): %s\n", log, safe);
    }
  }
}

/* The findings and the run's end in the store. Returns the exit status: 1 with findings, 3 when
 * the store failed (with a message), else 0. */
static int store_findings(mdc_cli__campaign *c, int interrupted) {
  int rc = c->n_f ? MDC_EXIT_UNEXPECTED : MDC_EXIT_OK;
  if (c->store_ok) {
    for (size_t i = 0; i < c->n_f && c->store_ok; i++) {
      mdc_cli__finding *f = &c->f[i];
      mdc_fuzz_finding ff = {.target = c->target, .signature = f->signature, .kind = f->kind, .message = f->message,
                             .count = f->count, .replays = f->replays, .reproduced = f->reproduced,
                             .reproducer = f->repro, .minimized = f->minimized, .trace = f->trace[0] ? f->trace : NULL};
      if (mdc_store_fuzz_finding(c->store, c->run_id, &ff, NULL)) c->store_ok = 0;
    }
    uint32_t crashes = 0, hangs = 0;
    for (size_t i = 0; i < c->n_f; i++) strcmp(c->f[i].kind, "hang") ? crashes++ : hangs++;
    mdc_run_summary sum = {.cases = (uint32_t)c->n_f, .crashed = crashes, .timed_out = hangs,
                           .unexpected = (uint32_t)c->n_f, .interrupted = interrupted != 0};
    if (c->store_ok && mdc_store_run_finish(c->store, c->run_id, &sum)) c->store_ok = 0;
  }
  if (!c->store_ok) {
    fprintf(stderr, "mdc fuzz: %s\n", mdc_store_error(c->store));
    rc = MDC_EXIT_STORE;
  }
  return rc;
}

/* The command: options, checks, the run in the store, the instances watched to their end, the
 * last statistics, triage, the findings stored, the summary or JSON. */
int mdc_cli__cmd_fuzz(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "export")) return mdc_cli__fuzz_export(argc - 1, argv + 1);
  static mdc_cli__campaign c;
  static setup s;
  int rc;
  if ((rc = parse_options(argc, argv, &c, &s)) != GO_ON || (rc = check_options(argc, argv, &c, &s)) != GO_ON ||
      (rc = find_binaries(&c, &s)) != GO_ON || (rc = prepare_folder(&c, &s)) != GO_ON ||
      (rc = open_run(&c, &s)) != GO_ON)
    return rc;
  catch_signals();
  if (s.ceiling_s > 0) {
    if (!c.quiet) fprintf(stderr, "mdc fuzz: measuring the ceiling (trivial harness) for %.0f s\n", s.ceiling_s);
    c.ceiling_eps = mdc_cli__fuzz_measure_ceiling(&c, s.ceiling_s);
  }
  mdc_cli__fuzz_start(&c, &s.bins, s.resumed ? "-" : s.seeds, s.dict);
  int interrupted = mdc_cli__fuzz_watch(&c);
  double dur = mdc_cli__now() - c.t_start;
  if (c.tty) fprintf(stderr, "\r\033[K");
  mdc_cli__fuzz_ingest(&c);
  explain_early_stop(&c, interrupted);
  if (!c.quiet)
    fprintf(stderr, "mdc fuzz: triaging %" PRId64 " crash%s and %" PRId64 " hang%s\n", c.raw_crashes,
            c.raw_crashes == 1 ? "" : "es", c.raw_hangs, c.raw_hangs == 1 ? "" : "s");
  mdc_cli__fuzz_stop_signal = 0;
  mdc_cli__fuzz_triage(&c);
  if (c.driver_cov) mdc_cli__fuzz_gcov_measure(&c);
  rc = store_findings(&c, interrupted);
  mdc_store_close(c.store);
  if (c.json) {
    if (!c.quiet) summary(stderr, &c, dur, interrupted);
    print_json(&c, dur, interrupted);
  } else if (!c.quiet) {
    summary(stdout, &c, dur, interrupted);
  }
  free(c.f);
  mdc_cli__fuzz_gcov_free(&c.gcov);
  mdc_cli__reap_all();
  return rc;
}
