/* mutants.c - `mdc mutants`: builds the reference driver's mutants build (md_driver_mutants: every
 * mutant of conformance/mutants/mutants.txt compiled in, the one named by $MD_MUTANT runs; each
 * breaks one rule), replays the corpus against each mutant, and prints which traces killed it. A trace kills a mutant when it is Pass on the
 * reference driver and neither Pass nor NotSupported on the mutant. The matrix is recorded in the
 * results store as a run of kind `mutants`, one case per mutant (docs/results-schema.md). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "paths.h"

typedef struct mutant {
  char name[64];
  char desc[256];
  int built, killed;
  char **killed_by;
  size_t n_killed_by;
  char error[512];
} mutant;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc mutants [--json] [--source DIR] [--corpus DIR] [--driver SO] [--list FILE]\n"
          "                   [--only NAME] [--jobs N] [--timeout S] [--db FILE | --no-db]\n"
          "Builds the mutants build of the reference driver (target md_driver_mutants of mdc's own\n"
          "build, incrementally: every mutant compiled in, the one named by MD_MUTANT runs), replays\n"
          "the corpus against each mutant and prints the kill matrix: the traces that pass on the\n"
          "reference driver and fail on the mutant. It needs mdc's source tree: the one it was built\n"
          "from, or (an installed mdc) --source DIR.\n\n"
          "  --source DIR      mdc's source tree (default %s): the mutants are built\n"
          "                    in DIR/build-mutants (configured the first time), list and corpus from DIR\n"
          "  --corpus DIR      traces to replay (default SOURCE/conformance/traces)\n"
          "  --driver SO       a driver that runs the mutant $MD_MUTANT names, instead of building one\n"
          "                    (default %s)\n"
          "  --list FILE       the mutant list (default SOURCE/conformance/mutants/mutants.txt)\n"
          "  --only NAME       just this mutant (repeatable)\n"
          "  --jobs N, --timeout S   as for mdc replay\n"
          "  --db FILE         results store for the matrix (default results/mdc.db): a run of kind\n"
          "                    mutants, one case per mutant (Pass killed, Fail survived, TraceError\n"
          "                    not built), details {killed_by: [...]}\n"
          "  --no-db           record nothing\n"
          "  --json            one JSON object on stdout: {mutants: [{name, killed, killed_by}], killed}\n\n"
          "exit status: 0 every mutant killed, 1 a mutant survived or did not build, 2 bad usage,\n"
          "3 results store error\n",
          mdc_cli__source_tree() ? mdc_cli__source_tree() : "none: this mdc is installed", MD_DRIVER_MUTANTS_SO);
}

static int load_list(const char *path, mutant **out, size_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "mdc mutants: cannot read '%s': %s\n", path, strerror(errno));
    return -1;
  }
  char line[512];
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    size_t k = strcspn(p, " \t\n");
    if (k == 0 || k >= 64) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      mutant *m = realloc(*out, cap * sizeof *m);
      if (!m) break;
      *out = m;
    }
    mutant *m = &(*out)[(*n)++];
    memset(m, 0, sizeof *m);
    memcpy(m->name, p, k);
    char *d = p + k;
    while (*d == ' ' || *d == '\t') d++;
    snprintf(m->desc, sizeof m->desc, "%s", d);
    m->desc[strcspn(m->desc, "\n")] = 0;
  }
  fclose(f);
  return 0;
}

/* Runs argv with stdout+stderr appended to log; its exit status (or -1). */
static int run_logged(char *const argv[], const char *log) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *f = freopen(log, "a", stdout);
    if (!f || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(127);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Brings a build's md_driver_mutants up to date (an incremental build: a second when nothing
 * changed), so no mutant is older than the sources it mutates: mdc's own build, or with --source
 * DIR the build DIR/build-mutants (configured first when it has no CMakeCache.txt); so is the
 * mutants driver it made. 0, or -1 with a message in err naming the log. */
static int build_mutants(const char *source, char *so, size_t solen, char *err, size_t errlen, int quiet) {
  char log[4300], bdir[4200], cache[4300];
  snprintf(bdir, sizeof bdir, "%s", source ? source : MDC_BUILD_DIR);
  if (source) snprintf(bdir, sizeof bdir, "%s/build-mutants", source);
  if (source) mkdir(bdir, 0777);   /* its log lies in it */
  snprintf(log, sizeof log, "%s/mutants-build.log", bdir);
  snprintf(so, solen, "%s", MD_DRIVER_MUTANTS_SO);
  if (source) snprintf(so, solen, "%s/runtime/libmd_driver_mutants.so", bdir);
  if (!quiet) fprintf(stderr, "mdc mutants: building md_driver_mutants in %s (log: %s)\n", bdir, log);
  snprintf(cache, sizeof cache, "%s/CMakeCache.txt", bdir);
  char *cfg[] = {(char *)"cmake", (char *)"-S", (char *)source, (char *)"-B", bdir, (char *)"-DMD_BUILD_TESTS=OFF",
                 (char *)"-DMD_BUILD_BENCH=OFF", (char *)"-DMD_HIP=off", NULL};
  if (source && access(cache, R_OK) != 0 && run_logged(cfg, log) != 0) {
    snprintf(err, errlen, "configuring %.150s as a build of %.150s failed, see %.150s", bdir, source, log);
    return -1;
  }
  char *bld[] = {(char *)"cmake", (char *)"--build", bdir, (char *)"--target",
                 (char *)"md_driver_mutants", (char *)"-j", (char *)"2", NULL};
  if (run_logged(bld, log) != 0 || access(so, R_OK) != 0) {
    snprintf(err, errlen, "the mutants build failed, see %.400s", log);
    return -1;
  }
  return 0;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* What `mdc mutants` was asked (its options) and what it holds while it runs. */
typedef struct mutants_cmd {
  const char *db, *corpus, *mutants_so, *list, *source;
  const char *only[64];
  size_t n_only;
  int json, no_db;
  mdc_cli__replay_opts o;
  mutant *ms;
  size_t n;
  mdc_cli__run ref;        /* the reference run: only traces that pass there can kill a mutant */
  mdc_store *store;
  int64_t run_id;
  int store_failed;
  char run_uuid[37];
} mutants_cmd;

/* Options into *m. -1: go on; else the exit status. */
static int parse_args(int argc, char **argv, mutants_cmd *m) {
  static const struct option opts[] = {
      {"json", no_argument, 0, 'J'},          {"corpus", required_argument, 0, 'c'},
      {"driver", required_argument, 0, 'D'}, {"list", required_argument, 0, 'l'},
      {"only", required_argument, 0, 'o'},    {"jobs", required_argument, 0, 'j'},
      {"timeout", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
      {"db", required_argument, 0, 'd'},      {"no-db", no_argument, 0, 'n'},
      {"source", required_argument, 0, 'S'},  {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN), v;
  m->db = "results/mdc.db";
  m->corpus = m->list = NULL;
  m->o = (mdc_cli__replay_opts){.config = "backend=auto", .timeout_s = 30, .shard_n = 1,
                                .jobs = ncpu > 0 ? (int)ncpu : 1, .quiet = 1, .kind = "mutants",
                                .silence_children = 1};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
      case 'J': m->json = 1; break;
      case 'c': m->corpus = optarg; break;
      case 'D': m->mutants_so = optarg; break;
      case 'l': m->list = optarg; break;
      case 'S': m->source = optarg; break;
      case 'd': m->db = optarg; break;
      case 'n': m->no_db = 1; break;
      case 'o':
        if (m->n_only < 64) m->only[m->n_only++] = optarg;
        break;
      case 'j':
        if (mdc_cli__parse_int(optarg, 1, 1024, &v)) {
          fprintf(stderr, "mdc mutants: --jobs '%s': want 1..1024\n", optarg);
          return MDC_EXIT_USAGE;
        }
        m->o.jobs = (int)v;
        break;
      case 't':
        if (mdc_cli__parse_seconds(optarg, &m->o.timeout_s)) {
          fprintf(stderr, "mdc mutants: --timeout '%s': want seconds > 0\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc mutants: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc mutants: unknown option '%s' (see mdc mutants --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mdc mutants: unexpected argument '%s'\n", argv[optind]);
    return MDC_EXIT_USAGE;
  }
  /* The mutants are built from mdc's sources, and their list is there: an installed mdc has
   * neither unless --source names a checkout (or --driver, --list and --corpus say it all). */
  static char list[4200], corpus[4200];
  const char *src = m->source ? m->source : mdc_cli__source_tree();
  if (m->source) {
    snprintf(list, sizeof list, "%s/conformance/mutants/mutants.txt", m->source);
    if (access(list, R_OK) != 0) {
      fprintf(stderr, "mdc mutants: --source '%s': not mdc's source tree (no conformance/mutants/mutants.txt)\n",
              m->source);
      return MDC_EXIT_USAGE;
    }
  }
  if (!src && (!m->mutants_so || !m->list || !m->corpus)) {
    fprintf(stderr, "mdc mutants: this mdc is installed, and mdc mutants needs mdc's source tree: the mutants "
            "are built from its sources and listed in its conformance/mutants/mutants.txt. Give --source DIR (a "
            "checkout of mdc), or run the mdc of a build of the sources (or give --driver SO, --list FILE and "
            "--corpus DIR for a mutants build you made)\n");
    return MDC_EXIT_USAGE;
  }
  if (!m->list) snprintf(list, sizeof list, "%s/conformance/mutants/mutants.txt", src), m->list = list;
  if (!m->corpus) snprintf(corpus, sizeof corpus, "%s/conformance/traces", src), m->corpus = corpus;
  m->o.paths = &m->corpus;
  m->o.n_paths = 1;
  return -1;
}

static int wanted(const mutants_cmd *m, const char *name) {
  if (m->n_only == 0) return 1;
  for (size_t k = 0; k < m->n_only; k++)
    if (strcmp(m->only[k], name) == 0) return 1;
  return 0;
}

/* Loads the list; an --only that names no mutant of it is a typo, not "0 of 0 killed". */
static int load_mutants(mutants_cmd *m) {
  if (load_list(m->list, &m->ms, &m->n)) return MDC_EXIT_USAGE;
  for (size_t k = 0; k < m->n_only; k++) {
    int known = 0;
    for (size_t i = 0; i < m->n && !known; i++) known = strcmp(m->only[k], m->ms[i].name) == 0;
    if (!known) {
      fprintf(stderr, "mdc mutants: --only '%s': no such mutant in %s\n", m->only[k], m->list);
      return MDC_EXIT_USAGE;
    }
  }
  if (m->n == 0) {
    fprintf(stderr, "mdc mutants: %s lists no mutant\n", m->list);
    return MDC_EXIT_USAGE;
  }
  return -1;
}

static void mutants_free(mutants_cmd *m) {
  for (size_t i = 0; i < m->n; i++) {
    for (size_t k = 0; k < m->ms[i].n_killed_by; k++) free(m->ms[i].killed_by[k]);
    free(m->ms[i].killed_by);
  }
  free(m->ms);
  m->ms = NULL;
  m->n = 0;
}

/* The matrix's run: one case per mutant, committed Running before it is replayed, so a killed
 * `mdc mutants` leaves the mutant it was on marked. -1: go on; else MDC_EXIT_STORE. */
static int begin_store(mutants_cmd *m) {
  m->run_id = -1;
  if (m->no_db) return -1;
  char err[1024] = "";
  mdc_run_info ri = {.kind = "mutants", .driver_name = m->ref.driver_name, .driver_version = m->ref.driver_version,
                     .driver_path = "(reference, mutated)", .backend = m->ref.backend, .device = m->ref.device,
                     .config = m->o.config, .shard_count = 1};
  if ((strcmp(m->db, ":memory:") != 0 && mdc_cli__mkdir_parent(m->db) != 0) ||
      mdc_store_open(m->db, &m->store, err, sizeof err) != 0 ||
      mdc_store_run_begin(m->store, &ri, &m->run_id, m->run_uuid) != 0) {
    fprintf(stderr, "mdc mutants: results store: %s\n", m->store ? mdc_store_error(m->store) : err[0] ? err : m->db);
    mdc_store_close(m->store);
    m->store = NULL;
    return MDC_EXIT_STORE;
  }
  return -1;
}

/* Replays the corpus against one mutant and fills its killed_by. 0, or the signal that stopped
 * the replay (its case is Interrupted, the run interrupted). */
static int replay_mutant(mutants_cmd *m, mutant *mu, const char *so) {
  mu->built = 1;
  mdc_cli__replay_opts mo = m->o;
  mo.driver = so;
  mdc_cli__run run;
  /* The replay's children inherit it: the mutants driver runs this mutant. */
  setenv("MD_MUTANT", mu->name, 1);
  int mrc = mdc_cli__replay(&mo, &run);
  unsetenv("MD_MUTANT");
  if (run.interrupted_by) {
    int sig = run.interrupted_by;
    mdc_cli__run_free(&run);
    return sig;
  }
  if (mrc == MDC_EXIT_USAGE) {
    snprintf(mu->error, sizeof mu->error, "replay against %.400s with MD_MUTANT=%s failed to start", so, mu->name);
    return 0;
  }
  mu->killed_by = calloc(run.n ? run.n : 1, sizeof *mu->killed_by);
  for (size_t k = 0; k < run.n && k < m->ref.n && mu->killed_by; k++) {
    const mdc_cli__case *rc = &m->ref.cases[k], *mc = &run.cases[k];
    if (strcmp(rc->path, mc->path) != 0) continue; /* same sorted corpus: same order */
    if (rc->status == MDC_S_PASS && mc->status != MDC_S_PASS && mc->status != MDC_S_NOT_SUPPORTED)
      mu->killed_by[mu->n_killed_by++] = strdup(mc->name);
  }
  mu->killed = mu->n_killed_by > 0;
  mdc_cli__run_free(&run);
  return 0;
}

/* The mutant's case in the store: Pass killed, Fail survived, TraceError not built; details
 * {"killed_by": [...], "description": "..."}. */
static void store_mutant(mutants_cmd *m, const mutant *mu, int64_t case_id, double duration_s) {
  if (!m->store || m->store_failed || case_id < 0) return;
  json_t *by = json_array();
  for (size_t k = 0; k < mu->n_killed_by; k++) json_array_append_new(by, json_string(mu->killed_by[k]));
  json_t *d = json_pack("{s:o,s:s}", "killed_by", by, "description", mu->desc);
  char *details = d ? json_dumps(d, JSON_COMPACT) : NULL;
  json_decref(d);
  mdc_case_result res = {
      .status = mu->killed ? "Pass" : mu->error[0] ? "TraceError" : "Fail",
      .duration_s = duration_s,
      .message = mu->killed ? NULL : mu->error[0] ? mu->error : "survived: no trace of the corpus failed on it",
      .rule = mu->desc, .details = details};
  if (mdc_store_case_finish(m->store, case_id, &res) != 0) {
    fprintf(stderr, "mdc mutants: results store: %s (recording stops)\n", mdc_store_error(m->store));
    m->store_failed = 1;
  }
  free(details);
}

static void print_matrix_json(const mutants_cmd *m, uint32_t killed, uint32_t considered) {
  json_t *arr = json_array();
  for (size_t i = 0; i < m->n; i++) {
    const mutant *mu = &m->ms[i];
    if (!wanted(m, mu->name)) continue;
    json_t *by = json_array();
    for (size_t k = 0; k < mu->n_killed_by; k++) json_array_append_new(by, json_string(mu->killed_by[k]));
    json_t *j = json_pack("{s:s,s:s,s:b,s:o}", "name", mu->name, "description", mu->desc, "killed", mu->killed,
                          "killed_by", by);
    if (mu->error[0]) json_object_set_new(j, "error", json_string(mu->error));
    json_array_append_new(arr, j);
  }
  json_t *j = json_pack("{s:o,s:i,s:i}", "mutants", arr, "killed", (int)killed, "mutants_total", (int)considered);
  json_object_set_new(j, "db", !m->no_db ? json_string(m->db) : json_null());
  json_object_set_new(j, "run_uuid", m->run_uuid[0] && !m->store_failed ? json_string(m->run_uuid) : json_null());
  char *s = json_dumps(j, JSON_INDENT(2));
  json_decref(j);
  if (s) puts(s);
  free(s);
}

/* Where a long `mdc mutants` is (issue 27): [i/N], the mutant, the kills so far and an ETA from the
 * mutants done, one line each on stderr (also with --json, whose object is on stdout). */
static void progress(uint32_t i, size_t n, const char *name, uint32_t killed, double elapsed) {
  char eta[48];
  mdc_cli__eta_text(elapsed, i - 1, n, eta, sizeof eta);
  fprintf(stderr, "mdc mutants: [%u/%zu] %s (%u killed so far, %s)\n", i, n, name, killed, eta);
  fflush(stderr);
}

/* Ends this process with sig, as the signal would have (the caller has closed what it holds). */
static void die_of(int sig) {
  fflush(NULL);
  signal(sig, SIG_DFL);
  raise(sig);
}

int mdc_cli__cmd_mutants(int argc, char **argv) {
  mutants_cmd m;
  memset(&m, 0, sizeof m);
  int rc = parse_args(argc, argv, &m);
  if (rc < 0) rc = load_mutants(&m);
  if (rc >= 0) {
    mutants_free(&m);
    return rc;
  }
  rc = mdc_cli__replay(&m.o, &m.ref);
  if (m.ref.interrupted_by) {
    int sig = m.ref.interrupted_by;
    mdc_cli__run_free(&m.ref);
    mutants_free(&m);
    die_of(sig);
  }
  if (rc == MDC_EXIT_USAGE || rc == MDC_EXIT_STORE || (rc = begin_store(&m)) >= 0) {
    mdc_cli__run_free(&m.ref);
    mutants_free(&m);
    return rc;
  }
  /* One build holds every mutant (unless --driver names a driver that already does). */
  char build_err[512] = "";
  static char built_so[4300];
  const char *so = m.mutants_so ? m.mutants_so : built_so;
  int built = m.mutants_so || build_mutants(m.source, built_so, sizeof built_so, build_err, sizeof build_err, m.json) == 0;
  uint32_t killed = 0, considered = 0;
  int stopped = 0;
  size_t n_wanted = 0;
  for (size_t i = 0; i < m.n; i++) n_wanted += (size_t)wanted(&m, m.ms[i].name);
  double t_first = mdc_cli__now();
  for (size_t i = 0; i < m.n && !stopped; i++) {
    mutant *mu = &m.ms[i];
    if (!wanted(&m, mu->name)) continue;
    considered++;
    double t0 = mdc_cli__now();
    progress(considered, n_wanted, mu->name, killed, t0 - t_first);
    int64_t case_id = -1;
    char case_name[96];
    snprintf(case_name, sizeof case_name, "mutants/%s", mu->name);
    if (m.store && !m.store_failed && mdc_store_case_begin(m.store, m.run_id, case_name, m.list, &case_id) != 0) {
      fprintf(stderr, "mdc mutants: results store: %s (recording stops)\n", mdc_store_error(m.store));
      m.store_failed = 1;
    }
    if (!built) {
      snprintf(mu->error, sizeof mu->error, "%s", build_err);
      fprintf(stderr, "mdc mutants: %s: %s\n", mu->name, mu->error);
    } else if ((stopped = replay_mutant(&m, mu, so)) != 0) {
      break;
    }
    killed += (uint32_t)mu->killed;
    store_mutant(&m, mu, case_id, mdc_cli__now() - t0);
    if (!m.json) {
      printf("  %-24s %s", mu->name, mu->killed ? "killed by" : mu->error[0] ? "NOT BUILT" : "SURVIVED");
      for (size_t k = 0; k < mu->n_killed_by; k++) printf(" %s", mu->killed_by[k]);
      printf("\n");
      fflush(stdout);
    }
  }
  if (stopped) considered--; /* the mutant it was on did not finish */
  mdc_run_summary sum = {considered, killed, considered - killed, 0, 0, considered - killed, stopped != 0};
  if (m.store && !m.store_failed && mdc_store_run_finish(m.store, m.run_id, &sum) != 0) {
    fprintf(stderr, "mdc mutants: results store: %s\n", mdc_store_error(m.store));
    m.store_failed = 1;
  }
  mdc_store_close(m.store);
  mdc_cli__run_free(&m.ref);
  if (stopped) {
    mutants_free(&m);
    fprintf(stderr, "mdc mutants: stopped by SIG%s; the matrix so far is in the store, marked interrupted\n",
            sigabbrev_np(stopped) ? sigabbrev_np(stopped) : "?");
    die_of(stopped);
  }
  if (m.json) {
    print_matrix_json(&m, killed, considered);
  } else {
    printf("mdc mutants: %u of %u killed\n", killed, considered);
    if (m.run_uuid[0] && !m.store_failed) printf("  recorded in %s (run %s)\n", m.db, m.run_uuid);
  }
  mutants_free(&m);
  if (m.store_failed) return MDC_EXIT_STORE;
  return killed == considered ? MDC_EXIT_OK : MDC_EXIT_UNEXPECTED;
}
