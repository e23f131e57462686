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
          "usage: mdc mutants [--json] [--corpus DIR] [--driver SO] [--list FILE] [--only NAME]\n"
          "                   [--jobs N] [--timeout S] [--db FILE | --no-db]\n"
          "Builds the mutants build of the reference driver (target md_driver_mutants of mdc's own\n"
          "build, incrementally: every mutant compiled in, the one named by MD_MUTANT runs), replays\n"
          "the corpus against each mutant and prints the kill matrix: the traces that pass on the\n"
          "reference driver and fail on the mutant.\n\n"
          "  --corpus DIR      traces to replay (default %s/conformance/traces)\n"
          "  --driver SO       a driver that runs the mutant $MD_MUTANT names, instead of building one\n"
          "                    (default %s)\n"
          "  --list FILE       the mutant list (default %s/conformance/mutants/mutants.txt)\n"
          "  --only NAME       just this mutant (repeatable)\n"
          "  --jobs N, --timeout S   as for mdc replay\n"
          "  --db FILE         results store for the matrix (default results/mdc.db): a run of kind\n"
          "                    mutants, one case per mutant (Pass killed, Fail survived, TraceError\n"
          "                    not built), details {killed_by: [...]}\n"
          "  --no-db           record nothing\n"
          "  --json            one JSON object on stdout: {mutants: [{name, killed, killed_by}], killed}\n\n"
          "exit status: 0 every mutant killed, 1 a mutant survived or did not build, 2 bad usage,\n"
          "3 results store error\n",
          MDC_REPO_ROOT, MD_DRIVER_MUTANTS_SO, MDC_REPO_ROOT);
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

/* Brings mdc's own build's md_driver_mutants up to date (an incremental build: a second when
 * nothing changed), so no mutant is older than the sources it mutates. 0, or -1 with a message
 * in err naming the log. */
static int build_mutants(char *err, size_t errlen, int quiet) {
  char log[4200];
  snprintf(log, sizeof log, "%s/mutants-build.log", MDC_BUILD_DIR);
  if (!quiet) fprintf(stderr, "mdc mutants: building md_driver_mutants (log: %s)\n", log);
  char *bld[] = {(char *)"cmake", (char *)"--build", (char *)MDC_BUILD_DIR, (char *)"--target",
                 (char *)"md_driver_mutants", (char *)"-j", (char *)"2", NULL};
  if (run_logged(bld, log) != 0 || access(MD_DRIVER_MUTANTS_SO, R_OK) != 0) {
    snprintf(err, errlen, "the mutants build failed, see %.400s", log);
    return -1;
  }
  return 0;
}

int mdc_cli__cmd_mutants(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, 0, 'J'},          {"corpus", required_argument, 0, 'c'},
      {"driver", required_argument, 0, 'D'}, {"list", required_argument, 0, 'l'},
      {"only", required_argument, 0, 'o'},    {"jobs", required_argument, 0, 'j'},
      {"timeout", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
      {"db", required_argument, 0, 'd'},      {"no-db", no_argument, 0, 'n'},
      {0, 0, 0, 0}};
  const char *db = "results/mdc.db";
  int no_db = 0;
  const char *corpus = MDC_REPO_ROOT "/conformance/traces", *mutants_so = NULL;
  const char *list = MDC_REPO_ROOT "/conformance/mutants/mutants.txt";
  const char *only[64];
  size_t n_only = 0;
  int json = 0, c;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN), v;
  mdc_cli__replay_opts o = {.config = "backend=auto", .timeout_s = 30, .shard_n = 1,
                        .jobs = ncpu > 0 ? (int)ncpu : 1, .quiet = 1, .kind = "mutants",
                        .silence_children = 1};
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
      case 'J': json = 1; break;
      case 'c': corpus = optarg; break;
      case 'D': mutants_so = optarg; break;
      case 'l': list = optarg; break;
      case 'd': db = optarg; break;
      case 'n': no_db = 1; break;
      case 'o':
        if (n_only < 64) only[n_only++] = optarg;
        break;
      case 'j':
        if (mdc_cli__parse_int(optarg, 1, 1024, &v)) {
          fprintf(stderr, "mdc mutants: --jobs '%s': want 1..1024\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.jobs = (int)v;
        break;
      case 't':
        if (mdc_cli__parse_seconds(optarg, &o.timeout_s)) {
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
  mutant *ms;
  size_t n;
  if (load_list(list, &ms, &n)) return MDC_EXIT_USAGE;
  /* An --only that names no mutant of the list is a typo, not "0 of 0 killed". */
  for (size_t k = 0; k < n_only; k++) {
    int known = 0;
    for (size_t i = 0; i < n && !known; i++) known = strcmp(only[k], ms[i].name) == 0;
    if (!known) {
      fprintf(stderr, "mdc mutants: --only '%s': no such mutant in %s\n", only[k], list);
      free(ms);
      return MDC_EXIT_USAGE;
    }
  }
  if (n == 0) {
    fprintf(stderr, "mdc mutants: %s lists no mutant\n", list);
    free(ms);
    return MDC_EXIT_USAGE;
  }
  o.paths = &corpus;
  o.n_paths = 1;

  /* The reference run: only traces that pass there can kill a mutant. */
  mdc_cli__run ref;
  int rc = mdc_cli__replay(&o, &ref);
  if (ref.interrupted_by) {
    int sig = ref.interrupted_by;
    mdc_cli__run_free(&ref);
    free(ms);
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
  }
  if (rc == MDC_EXIT_USAGE || rc == MDC_EXIT_STORE) {
    free(ms);
    return rc;
  }
  /* One build holds every mutant (unless --driver names a driver that already does). */
  char build_err[512] = "";
  const char *so = mutants_so ? mutants_so : MD_DRIVER_MUTANTS_SO;
  int built = mutants_so || build_mutants(build_err, sizeof build_err, json) == 0;
  /* The matrix's run: one case per mutant, committed Running before it is replayed, so a killed
   * `mdc mutants` leaves the mutant it was on marked. */
  mdc_store *store = NULL;
  int64_t run_id = -1;
  int store_failed = 0;
  char run_uuid[37] = "";
  if (!no_db) {
    char err[1024];
    mdc_run_info ri = {.kind = "mutants", .driver_name = ref.driver_name, .driver_version = ref.driver_version,
                       .driver_path = "(reference, mutated)", .backend = ref.backend, .device = ref.device,
                       .config = o.config, .shard_count = 1};
    if ((strcmp(db, ":memory:") != 0 && mdc_cli__mkdir_parent(db) != 0) ||
        mdc_store_open(db, &store, err, sizeof err) != 0 || mdc_store_run_begin(store, &ri, &run_id, run_uuid) != 0) {
      fprintf(stderr, "mdc mutants: results store: %s\n", store ? mdc_store_error(store) : err[0] ? err : db);
      mdc_store_close(store);
      mdc_cli__run_free(&ref);
      free(ms);
      return MDC_EXIT_STORE;
    }
  }
  uint32_t killed = 0, considered = 0;
  int stopped = 0;
  for (size_t i = 0; i < n && !stopped; i++) {
    mutant *m = &ms[i];
    int wanted = n_only == 0;
    for (size_t k = 0; k < n_only; k++) wanted |= strcmp(only[k], m->name) == 0;
    if (!wanted) continue;
    considered++;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t case_id = -1;
    char case_name[96];
    snprintf(case_name, sizeof case_name, "mutants/%s", m->name);
    if (store && !store_failed && mdc_store_case_begin(store, run_id, case_name, list, &case_id) != 0) {
      fprintf(stderr, "mdc mutants: results store: %s (recording stops)\n", mdc_store_error(store));
      store_failed = 1;
    }
    if (!built) {
      snprintf(m->error, sizeof m->error, "%s", build_err);
      fprintf(stderr, "mdc mutants: %s: %s\n", m->name, m->error);
    } else {
      m->built = 1;
      mdc_cli__replay_opts mo = o;
      mo.driver = so;
      mdc_cli__run run;
      /* The replay's children inherit it: the mutants driver runs this mutant. */
      setenv("MD_MUTANT", m->name, 1);
      int mrc = mdc_cli__replay(&mo, &run);
      unsetenv("MD_MUTANT");
      if (run.interrupted_by) {
        /* Stopped on a signal: this mutant's case stays Running, the run is interrupted. */
        stopped = run.interrupted_by;
        mdc_cli__run_free(&run);
        break;
      }
      if (mrc == MDC_EXIT_USAGE) {
        snprintf(m->error, sizeof m->error, "replay against %.400s with MD_MUTANT=%s failed to start", so, m->name);
      } else {
        m->killed_by = calloc(run.n ? run.n : 1, sizeof *m->killed_by);
        for (size_t k = 0; k < run.n && k < ref.n && m->killed_by; k++) {
          const mdc_cli__case *rc_ = &ref.cases[k], *mc = &run.cases[k];
          if (strcmp(rc_->path, mc->path) != 0) continue; /* same sorted corpus: same order */
          if (rc_->status == MDC_S_PASS && mc->status != MDC_S_PASS && mc->status != MDC_S_NOT_SUPPORTED)
            m->killed_by[m->n_killed_by++] = strdup(mc->name);
        }
        m->killed = m->n_killed_by > 0;
        killed += (uint32_t)m->killed;
        mdc_cli__run_free(&run);
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (store && !store_failed && case_id >= 0) {
      /* details: {"killed_by": [...], "description": "..."} */
      json_t *by = json_array();
      for (size_t k = 0; k < m->n_killed_by; k++) json_array_append_new(by, json_string(m->killed_by[k]));
      json_t *d = json_pack("{s:o,s:s}", "killed_by", by, "description", m->desc);
      char *details = d ? json_dumps(d, JSON_COMPACT) : NULL;
      json_decref(d);
      mdc_case_result res = {
        .status = m->killed ? "Pass" : m->error[0] ? "TraceError" : "Fail",
        .duration_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
        .message = m->killed ? NULL : m->error[0] ? m->error : "survived: no trace of the corpus failed on it",
        .rule = m->desc, .details = details};
      if (mdc_store_case_finish(store, case_id, &res) != 0) {
        fprintf(stderr, "mdc mutants: results store: %s (recording stops)\n", mdc_store_error(store));
        store_failed = 1;
      }
      free(details);
    }
    if (!json) {
      printf("  %-24s %s", m->name, m->killed ? "killed by" : m->error[0] ? "NOT BUILT" : "SURVIVED");
      for (size_t k = 0; k < m->n_killed_by; k++) printf(" %s", m->killed_by[k]);
      printf("\n");
      fflush(stdout);
    }
  }
  if (stopped) considered--; /* the mutant it was on did not finish */
  mdc_run_summary sum = {considered, killed, considered - killed, 0, 0, considered - killed, stopped != 0};
  if (store && !store_failed && mdc_store_run_finish(store, run_id, &sum) != 0) {
    fprintf(stderr, "mdc mutants: results store: %s\n", mdc_store_error(store));
    store_failed = 1;
  }
  mdc_store_close(store);
  if (stopped) {
    mdc_cli__run_free(&ref);
    for (size_t i = 0; i < n; i++) {
      for (size_t k = 0; k < ms[i].n_killed_by; k++) free(ms[i].killed_by[k]);
      free(ms[i].killed_by);
    }
    free(ms);
    fprintf(stderr, "mdc mutants: stopped by SIG%s; the matrix so far is in the store, marked interrupted\n",
            sigabbrev_np(stopped) ? sigabbrev_np(stopped) : "?");
    fflush(NULL);
    signal(stopped, SIG_DFL);
    raise(stopped);
  }
  mdc_cli__run_free(&ref);
  if (json) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
      mutant *m = &ms[i];
      int wanted = n_only == 0;
      for (size_t k = 0; k < n_only; k++) wanted |= strcmp(only[k], m->name) == 0;
      if (!wanted) continue;
      json_t *by = json_array();
      for (size_t k = 0; k < m->n_killed_by; k++) json_array_append_new(by, json_string(m->killed_by[k]));
      json_t *j = json_pack("{s:s,s:s,s:b,s:o}", "name", m->name, "description", m->desc, "killed",
                            m->killed, "killed_by", by);
      if (m->error[0]) json_object_set_new(j, "error", json_string(m->error));
      json_array_append_new(arr, j);
    }
    json_t *j = json_pack("{s:o,s:i,s:i}", "mutants", arr, "killed", (int)killed, "mutants_total", (int)considered);
    json_object_set_new(j, "db", !no_db ? json_string(db) : json_null());
    json_object_set_new(j, "run_uuid", run_uuid[0] && !store_failed ? json_string(run_uuid) : json_null());
    char *s = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    if (s) puts(s);
    free(s);
  } else {
    printf("mdc mutants: %u of %u killed\n", killed, considered);
    if (run_uuid[0] && !store_failed) printf("  recorded in %s (run %s)\n", db, run_uuid);
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < ms[i].n_killed_by; k++) free(ms[i].killed_by[k]);
    free(ms[i].killed_by);
  }
  free(ms);
  if (store_failed) return MDC_EXIT_STORE;
  return killed == considered ? MDC_EXIT_OK : MDC_EXIT_UNEXPECTED;
}
