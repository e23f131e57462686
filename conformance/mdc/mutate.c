/* mutate.c - `mdc mutate`: generated mutants of a driver's C sources (tools/mutagen/, libclang),
 * all compiled into one schemata build, judged by the corpus (docs/mutate.md). One reference pass
 * replays every trace against the schemata build with no mutant selected and logs which mutant
 * sites each trace reaches (MD_MUTAGEN_REACH); then each mutant replays only the traces that pass
 * and reach it, most-killing first (the store's history), and stops at the first that kills it.
 * Every case runs in an isolated child (child.c), so a crash or a hang is a kill, not mdc's end. */
#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "mutate_int.h"
#include "paths.h"

/* Paths are bounded by PATH_MAX-sized buffers; a longer one is cut, and the build or the access()
 * check that follows names it. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#ifndef MDC_MUTAGEN
#define MDC_MUTAGEN NULL
#define MDC_MUTAGEN_SCHEMATA NULL
#define MD_DRIVER_MUTAGEN_SO NULL
#endif

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc mutate [options]\n"
          "Generated mutants of the reference driver's C sources (or, with --source, of any driver's),\n"
          "every mutant of a file compiled into one build and picked at run time (MD_MUTAGEN), judged by\n"
          "the corpus: a mutant is killed by the first trace that passes on the reference and not on it.\n\n"
          "  --corpus DIR        traces (default %s/conformance/traces)\n"
          "  --config STR        open_device keys (default backend=sim; with --source: none)\n"
          "  --jobs N            cases at once (default: CPUs)\n"
          "  --timeout S         most seconds a case may take (default 10; less for fast traces)\n"
          "  --sample N          judge a random sample of N mutants (the score gets a 95%% interval)\n"
          "  --seed N            the sample's seed (default 1)\n"
          "  --since REV         only mutants on lines changed since git revision REV\n"
          "  --only GLOB         only mutants whose id matches (repeatable; e.g. 'memory/buffer.c:*')\n"
          "  --ops LIST          only these operators (comma-separated)\n"
          "  --equivalent FILE   ids (or globs) judged equivalent, one a line with its reason (default\n"
          "                      %s/conformance/mutate/equivalent.txt)\n"
          "  --min-score P       exit 0 when the score is at least P percent (default: every mutant killed)\n"
          "  --db FILE, --no-db  the results store (default results/mdc.db): a run of kind mutate\n"
          "  --json              one JSON object on stdout\n"
          "  --markdown          the score, per-file table and survivors as Markdown on stdout (the\n"
          "                      generated section of conformance/README.md)\n"
          "  --no-build          use the schemata build as it is\n"
          "  --driver SO         the schemata driver (default: this build's md_driver_mutagen, built first)\n"
          "  --schemata DIR      its mutant lists (*.mutants; default this build's)\n"
          "  --tests DIR         then the corpus's survivors against the unit tests of DIR, a build\n"
          "                      configured with -DMD_MUTAGEN_TESTS=ON (target md_mutagen_tests; or its\n"
          "                      list of test executables): a failing test kills, the score is split\n"
          "  --fuzz S            then each survivor gets S seconds of the fuzz target whose seeds reach it\n"
          "                      (AFL++, the state-model oracle), with it selected: a finding the\n"
          "                      unmutated driver does not have kills it (needs `make fuzz-build`)\n"
          "  --fuzz-build DIR    the fuzz build for --fuzz (default %s)\n"
          "  --fuzz-out DIR      --fuzz's campaigns and the inputs that killed (default results/mutate-fuzz)\n"
          "  --fuzz-seeds DIR    the seeds: DIR/tokens, DIR/shapes, DIR/concurrency (default the fuzz seeds\n"
          "                      of this build)\n"
          "  --tce               flag a survivor whose file compiles to the same object code with it as\n"
          "                      without it likely equivalent (trivial compiler equivalence)\n"
          "  --source DIR --build CMD --driver PATH [--cflags FLAGS]\n"
          "                      any driver: copies DIR, rewrites every .c of the copy with its schemata,\n"
          "                      runs CMD (sh -c) in the copy, then judges PATH (relative to the copy)\n\n"
          "exit status: 0 every non-equivalent mutant killed (or the score reached --min-score), 1 not,\n"
          "2 bad usage or a build that failed, 3 results store error\n",
          MDC_REPO_ROOT, MDC_REPO_ROOT, mdc_cli__fuzz_build_default());
}

/* ---- options ------------------------------------------------------------------------------- */

static int parse_args(int argc, char **argv, mdc_mutate *m) {
  enum { O_CORPUS = 256, O_CONFIG, O_JOBS, O_TIMEOUT, O_SAMPLE, O_SEED, O_SINCE, O_ONLY, O_OPS, O_EQUIV, O_MIN,
         O_DB, O_NODB, O_JSON, O_NOBUILD, O_DRIVER, O_SCHEMATA, O_SOURCE, O_BUILD, O_CFLAGS, O_HELP, O_QUIET, O_MARKDOWN,
         O_TESTS, O_FUZZ, O_FUZZ_BUILD, O_FUZZ_OUT, O_FUZZ_SEEDS, O_TCE };
  static const struct option opts[] = {
      {"corpus", 1, 0, O_CORPUS},   {"config", 1, 0, O_CONFIG},     {"jobs", 1, 0, O_JOBS},
      {"timeout", 1, 0, O_TIMEOUT}, {"sample", 1, 0, O_SAMPLE},     {"seed", 1, 0, O_SEED},
      {"since", 1, 0, O_SINCE},     {"only", 1, 0, O_ONLY},         {"ops", 1, 0, O_OPS},
      {"equivalent", 1, 0, O_EQUIV}, {"min-score", 1, 0, O_MIN},
      {"db", 1, 0, O_DB},           {"no-db", 0, 0, O_NODB},        {"json", 0, 0, O_JSON},
      {"no-build", 0, 0, O_NOBUILD}, {"driver", 1, 0, O_DRIVER},    {"schemata", 1, 0, O_SCHEMATA},
      {"source", 1, 0, O_SOURCE},   {"build", 1, 0, O_BUILD},       {"cflags", 1, 0, O_CFLAGS},
      {"help", 0, 0, O_HELP},       {"quiet", 0, 0, O_QUIET},       {"markdown", 0, 0, O_MARKDOWN},
      {"tests", 1, 0, O_TESTS},     {"fuzz", 1, 0, O_FUZZ},         {"fuzz-build", 1, 0, O_FUZZ_BUILD},
      {"fuzz-out", 1, 0, O_FUZZ_OUT}, {"fuzz-seeds", 1, 0, O_FUZZ_SEEDS}, {"tce", 0, 0, O_TCE}, {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN), v;
  m->corpus = MDC_REPO_ROOT "/conformance/traces";
  m->config = "backend=sim";
  m->jobs = ncpu > 0 ? (int)ncpu : 1;
  m->timeout_s = 10;
  m->seed = 1;
  m->db = "results/mdc.db";
  m->equivalent = MDC_REPO_ROOT "/conformance/mutate/equivalent.txt";
  m->min_score = -1;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
      case O_CORPUS: m->corpus = optarg, m->corpus_given = 1; break;
      case O_CONFIG: m->config = optarg, m->config_given = 1; break;
      case O_JOBS:
        if (mdc_cli__parse_int(optarg, 1, 1024, &v)) goto bad;
        m->jobs = (int)v;
        break;
      case O_TIMEOUT:
        if (mdc_cli__parse_seconds(optarg, &m->timeout_s)) goto bad;
        break;
      case O_SAMPLE:
        if (mdc_cli__parse_int(optarg, 1, 10000000, &v)) goto bad;
        m->sample = (size_t)v;
        break;
      case O_SEED:
        if (mdc_cli__parse_int(optarg, 0, 0x7fffffff, &v)) goto bad;
        m->seed = (unsigned)v;
        break;
      case O_SINCE: m->since = optarg; break;
      case O_ONLY:
        if (m->n_only < 64) m->only[m->n_only++] = optarg;
        break;
      case O_OPS: m->ops = optarg; break;
      case O_EQUIV: m->equivalent = optarg, m->equivalent_given = 1; break;
      case O_MIN:
        if (mdc_cli__parse_int(optarg, 0, 100, &v)) goto bad;
        m->min_score = (double)v;
        break;
      case O_DB: m->db = optarg; break;
      case O_NODB: m->no_db = 1; break;
      case O_JSON: m->json = 1; break;
      case O_MARKDOWN: m->markdown = 1; break;
      case O_TESTS: m->tests = optarg; break;
      case O_FUZZ:
        if (mdc_cli__parse_seconds(optarg, &m->fuzz_s)) goto bad;
        break;
      case O_FUZZ_BUILD: m->fuzz_build = optarg; break;
      case O_FUZZ_OUT: m->fuzz_out = optarg; break;
      case O_FUZZ_SEEDS: m->fuzz_seeds = optarg; break;
      case O_TCE: m->tce = 1; break;
      case O_QUIET: m->quiet = 1; break;
      case O_NOBUILD: m->no_build = 1; break;
      case O_DRIVER: m->driver = optarg; break;
      case O_SCHEMATA: m->schemata = optarg; break;
      case O_SOURCE: m->source = optarg; break;
      case O_BUILD: m->build_cmd = optarg; break;
      case O_CFLAGS: m->cflags = optarg; break;
      case O_HELP: case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc mutate: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc mutate: unknown option '%s' (see mdc mutate --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
    continue;
  bad:
    fprintf(stderr, "mdc mutate: %s '%s': not a valid value\n", argv[optind - 2], optarg);
    return MDC_EXIT_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "mdc mutate: unexpected argument '%s'\n", argv[optind]);
    return MDC_EXIT_USAGE;
  }
  if (m->source && (!m->build_cmd || !m->driver)) {
    fprintf(stderr, "mdc mutate: --source needs --build CMD and --driver PATH\n");
    return MDC_EXIT_USAGE;
  }
  /* Another driver is opened with its own defaults (it may have no simulator backend). */
  if (m->source && !m->config_given) m->config = "";
  return -1;
}

/* ---- the build ------------------------------------------------------------------------------ */

static int run_logged(const char *cmd, const char *cwd, const char *log) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *f = freopen(log, "a", stdout);
    if (!f || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(127);
    if (cwd && chdir(cwd)) _exit(127);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Builds the schemata driver: this build's md_driver_mutagen, or a copy of --source rewritten by
 * md_mutagen tree and built with --build. Sets m->driver and m->schemata. */
#ifndef MDC_BIN_TO_DATA
#define MDC_BIN_TO_DATA "../share"
#endif

/* <dir of this mdc>/rel into out when that file exists: an installed mdc finds md_mutagen beside it
 * and the corpus under <prefix>/share/mdc/traces, not at this build's compiled-in paths. */
static const char *beside_exe(char *out, size_t len, const char *rel) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  if ((size_t)snprintf(out, len, "%s/%s", exe, rel) >= len || access(out, R_OK) != 0) return NULL;
  return out;
}

static int build(mdc_mutate *m) {
  char cmd[8192];
  double t0 = mdc_cli__now();
  static char mutagen_buf[4200], corpus_buf[4200];
  const char *mutagen = MDC_MUTAGEN;
  if (mdc_cli__installed()) {
    if (beside_exe(mutagen_buf, sizeof mutagen_buf, "md_mutagen")) mutagen = mutagen_buf;
    if (!m->corpus_given && beside_exe(corpus_buf, sizeof corpus_buf, MDC_BIN_TO_DATA "/mdc/traces"))
      m->corpus = corpus_buf;
  }
  if (!mutagen) {
    fprintf(stderr, "mdc mutate: this mdc was built without md_mutagen (libclang missing: apt-get install "
                    "libclang-14-dev, then reconfigure)\n");
    return MDC_EXIT_USAGE;
  }
  if (m->source) {
    char tmpl[] = "/tmp/mdc-mutate-XXXXXX";
    if (!mkdtemp(tmpl)) {
      fprintf(stderr, "mdc mutate: mkdtemp: %s\n", strerror(errno));
      return MDC_EXIT_USAGE;
    }
    snprintf(m->work, sizeof m->work, "%s/src", tmpl);
    snprintf(m->log, sizeof m->log, "%s/build.log", tmpl);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s' && '%s' tree --root '%s'%s%s -- -I'%s' %s", m->source, m->work,
             mutagen, m->work, m->ops ? " --ops " : "", m->ops ? m->ops : "", m->work, m->cflags ? m->cflags : "");
    if (!m->quiet) fprintf(stderr, "mdc mutate: rewriting a copy of %s in %s\n", m->source, m->work);
    if (run_logged(cmd, NULL, m->log) != 0) {
      fprintf(stderr, "mdc mutate: generating the schemata failed, see %s\n", m->log);
      return MDC_EXIT_USAGE;
    }
    if (!m->quiet) fprintf(stderr, "mdc mutate: building: %s (log: %s)\n", m->build_cmd, m->log);
    if (run_logged(m->build_cmd, m->work, m->log) != 0) {
      fprintf(stderr, "mdc mutate: the build command failed, see %s\n", m->log);
      return MDC_EXIT_USAGE;
    }
    snprintf(m->driver_buf, sizeof m->driver_buf, "%s/%s", m->work, m->driver);
    m->driver = m->driver_buf;
    snprintf(m->schemata_buf, sizeof m->schemata_buf, "%s/.mdc-mutate", m->work);
    m->schemata = m->schemata_buf;
    m->root = m->source;
  } else {
    m->root = MDC_REPO_ROOT;
    if (mdc_cli__installed() && !m->driver && access(MDC_BUILD_DIR "/CMakeCache.txt", R_OK) != 0) {
      fprintf(stderr, "mdc mutate: judging the reference driver needs the build tree this mdc came from "
                      "(%s), which is not here; for a driver of your own, from an install: "
                      "--source DIR --build CMD --driver PATH (docs/mutate.md)\n", MDC_BUILD_DIR);
      return MDC_EXIT_USAGE;
    }
    if (!m->schemata) m->schemata = MDC_MUTAGEN_SCHEMATA;
    if (!m->driver && !m->no_build) {
      snprintf(m->log, sizeof m->log, "%s/mutate-build.log", MDC_BUILD_DIR);
      if (!m->quiet) fprintf(stderr, "mdc mutate: building md_driver_mutagen (log: %s)\n", m->log);
      snprintf(cmd, sizeof cmd, "cmake --build '%s' --target md_driver_mutagen -j 2", MDC_BUILD_DIR);
      if (run_logged(cmd, NULL, m->log) != 0) {
        fprintf(stderr, "mdc mutate: the schemata build failed, see %s\n", m->log);
        return MDC_EXIT_USAGE;
      }
    }
    if (!m->driver) m->driver = MD_DRIVER_MUTAGEN_SO;
  }
  m->build_s = mdc_cli__now() - t0;
  if (access(m->driver, R_OK) != 0) {
    fprintf(stderr, "mdc mutate: no schemata driver at %s\n", m->driver);
    return MDC_EXIT_USAGE;
  }
  return -1;
}

/* ---- the mutant lists ---------------------------------------------------------------------- */

static mdc_mutate *walk_m;

static int list_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)ftw;
  size_t l = strlen(path);
  if (type != FTW_F || l < 9 || strcmp(path + l - 8, ".mutants")) return 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    line[strcspn(line, "\n")] = 0;
    char *fld[9];
    int n = 0;
    for (char *p = line; n < 9;) {
      fld[n++] = p;
      char *t = strchr(p, '\t');
      if (!t) break;
      *t = 0;
      p = t + 1;
    }
    if (n < 9) continue;
    mdc_mutate__add(walk_m, fld[0], fld[2], fld[3], (uint32_t)atoi(fld[4]), fld[5], atoi(fld[6]), fld[7], fld[8]);
  }
  free(line);
  fclose(f);
  return 0;
}

static int by_id(const void *a, const void *b) {
  const mdc_mutant *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  if (c) return c;
  if (x->line != y->line) return x->line < y->line ? -1 : 1;
  return strcmp(x->id, y->id);
}

static int load_mutants(mdc_mutate *m) {
  walk_m = m;
  if (!m->schemata || nftw(m->schemata, list_one, 32, FTW_PHYS) != 0 || m->n == 0) {
    fprintf(stderr, "mdc mutate: no mutant lists (*.mutants) under %s\n", m->schemata ? m->schemata : "(none)");
    return MDC_EXIT_USAGE;
  }
  qsort(m->v, m->n, sizeof *m->v, by_id);
  m->n_generated = m->n;
  /* Equivalent mutants: "ID-or-GLOB reason" per line (a glob states a rule for a whole category,
   * e.g. every mutant of a function that only formats a message). An entry without a reason, or
   * an --equivalent file that cannot be read, is an error: the file is the record of why. */
  FILE *f = fopen(m->equivalent, "r");
  if (!f && m->equivalent_given) {
    fprintf(stderr, "mdc mutate: --equivalent %s: %s\n", m->equivalent, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  char line[2048];
  unsigned lineno = 0;
  while (f && fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line + strspn(line, " \t");
    if (*p == '#' || *p == '\n' || !*p) continue;
    size_t k = strcspn(p, " \t\n");
    char id[320];
    snprintf(id, sizeof id, "%.*s", (int)k, p);
    char *why = p + k + strspn(p + k, " \t");
    why[strcspn(why, "\n")] = 0;
    if (!*why) {
      fprintf(stderr, "mdc mutate: %s:%u: '%s' has no reason (one id or glob a line, then why it is equivalent)\n",
              m->equivalent, lineno, id);
      fclose(f);
      return MDC_EXIT_USAGE;
    }
    int glob = strpbrk(id, "*?[") != NULL;
    for (size_t i = 0; i < m->n; i++)
      if (glob ? fnmatch(id, m->v[i].id, 0) == 0 : !strcmp(m->v[i].id, id)) {
        m->v[i].state = MU_EQUIVALENT;
        snprintf(m->v[i].why, sizeof m->v[i].why, "%s", why);
      }
  }
  if (f) fclose(f);
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    if (u->skipped == 1) u->state = MU_SKIPPED;
    if (u->skipped == 2) u->state = MU_BUILD_FAILED;
    int want = 1;
    if (m->n_only) {
      want = 0;
      for (size_t k = 0; k < m->n_only && !want; k++) want = fnmatch(m->only[k], u->id, 0) == 0;
    }
    if (want && m->ops) {
      char list[512];
      snprintf(list, sizeof list, ",%s,", m->ops);
      char key[40];
      snprintf(key, sizeof key, ",%s,", u->op);
      want = strstr(list, key) != NULL;
    }
    u->selected = want;
  }
  /* An --only pattern that names no generated mutant is a typo (or a stale id), not an empty run. */
  for (size_t k = 0; k < m->n_only; k++) {
    int any = 0;
    for (size_t i = 0; i < m->n && !any; i++) any = fnmatch(m->only[k], m->v[i].id, 0) == 0;
    if (!any) {
      fprintf(stderr, "mdc mutate: --only '%s': no generated mutant has that id (lists: %s/**/*.mutants)\n",
              m->only[k], m->schemata);
      return MDC_EXIT_USAGE;
    }
  }
  if (m->since && mdc_mutate__since(m) != 0) return MDC_EXIT_USAGE;
  /* The sample: a partial Fisher-Yates over the selected, judgeable mutants. */
  size_t cand = 0;
  for (size_t i = 0; i < m->n; i++) cand += m->v[i].selected;
  if (m->sample && m->sample < cand) {
    size_t *idx = malloc(cand * sizeof *idx), k = 0;
    for (size_t i = 0; i < m->n; i++)
      if (m->v[i].selected) idx[k++] = i, m->v[i].selected = 0;
    uint64_t x = 0x9E3779B97F4A7C15ull ^ m->seed;
    for (size_t i = 0; i < m->sample; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t j = i + (size_t)(x % (cand - i));
      size_t t = idx[i];
      idx[i] = idx[j], idx[j] = t;
      m->v[idx[i]].selected = 1;
    }
    free(idx);
    m->sampled = 1;
  }
  return -1;
}

/* ---- the command ----------------------------------------------------------------------------- */

int mdc_cli__cmd_mutate(int argc, char **argv) {
  mdc_mutate m;
  memset(&m, 0, sizeof m);
  int rc = parse_args(argc, argv, &m);
  if (rc >= 0) return rc;
  double t0 = mdc_cli__now();
  /* The cheap checks of --tests and --fuzz first: a wrong folder is said before a build of minutes. */
  if ((rc = mdc_mutate__tests_check(&m)) >= 0 || (m.fuzz_s > 0 && (rc = mdc_mutate__fuzz_check(&m)) >= 0) ||
      (rc = build(&m)) >= 0 || (rc = load_mutants(&m)) >= 0) {
    mdc_mutate__free(&m);
    return rc;
  }
  struct sigaction sa = {.sa_handler = on_stop};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  m.stop = &stop_signal;
  rc = mdc_mutate__judge(&m);
  if (rc < 0) rc = mdc_mutate__tests(&m); /* the corpus's survivors against the unit tests */
  if (rc < 0 && m.fuzz_s > 0) rc = mdc_mutate__fuzz(&m); /* then against the fuzz targets */
  if (rc < 0 && m.tce) rc = mdc_mutate__tce(&m);         /* the rest: the same object code? */
  m.wall_s = mdc_cli__now() - t0;
  if (rc < 0) rc = mdc_mutate__finish(&m);
  mdc_mutate__free(&m);
  if (stop_signal) {
    fflush(NULL);
    signal(stop_signal, SIG_DFL);
    raise(stop_signal);
  }
  return rc;
}
