/* replay_cmd.c - `mdc replay`'s command line: options, usage, and the run (mdc_cli__replay). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mdc/store.h"
#include "md/config.h"
#include "md/status.h"
#include "mdc_int.h"
#include "replay_int.h"

/* ---- the command ---------------------------------------------------------------------------- */

/* "A,B": two different names of letters, digits, '_' and '-'. 0, or -1. */
static int parse_differential(const char *s, char *a, char *b, size_t len) {
  const char *comma = strchr(s, ',');
  if (!comma || strchr(comma + 1, ',')) return -1;
  size_t la = (size_t)(comma - s), lb = strlen(comma + 1);
  if (!la || !lb || la >= len || lb >= len) return -1;
  for (const char *p = s; *p; p++)
    if (p != comma && !isalnum((unsigned char)*p) && *p != '_' && *p != '-') return -1;
  memcpy(a, s, la);
  a[la] = '\0';
  memcpy(b, comma + 1, lb + 1);
  return strcmp(a, b) == 0 ? -1 : 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc replay [options] PATH...\n"
          "Replays traces (files, or folders searched for *.jsonl; blobs/ skipped), each in its own\n"
          "child process, and judges the driver.\n\n"
          "  --driver SO      driver shared object (default: the reference driver)\n"
          "  --config STR     open_device config merged into each trace's (default backend=auto)\n"
          "  --db FILE        results store (default results/mdc.db; ':memory:' keeps nothing)\n"
          "  --no-db          write no results store\n"
          "  --shard I/N      run only the traces whose name hashes to shard I of N (0 <= I < N); auto\n"
          "                   or auto/N: the shard GitLab parallel: or a Kubernetes Indexed Job gives\n"
          "  --include GLOB   run only the traces whose name (e.g. tokens/forged) matches GLOB\n"
          "                   (fnmatch; '*' also matches '/'); repeatable: any of them\n"
          "  --exclude GLOB   never run the traces whose name matches GLOB; repeatable; wins over\n"
          "                   --include\n"
          "  --baseline FILE  trace names (one a line, # comments) that are known failures\n"
          "  --skips FILE     traces never to run (names, paths or globs, one a line): Skipped\n"
          "  --flakes FILE    known flaky traces (as --skips): a failure is a Flake, not unexpected\n"
          "  --progress-interval S  off a terminal, a status line every S seconds (default 10)\n"
          "  --timeout S      seconds per case before it is killed as Timeout (default 30)\n"
          "  --jobs N         cases run in parallel (default: the number of CPUs)\n"
          "  --group G        cases run one after the other in one child, the driver loaded once\n"
          "                   (default auto: 1 on the simulator, 256 for any other driver or backend);\n"
          "                   a crash or timeout costs its case only; a case that fails after another\n"
          "                   but passes alone is OrderDependent\n"
          "  --group-mib M    a child whose memory grew by more than M MiB starts no further case (512)\n"
          "  --shuffle SEED   run the cases (and so each group) in an order drawn from SEED\n"
          "  --keep-order     run the cases in the order the PATHs name them (a two-trace reproducer)\n"
          "  --no-rerun       do not re-run a failed or crashed case (no Flake detection)\n"
          "  --summary WHAT   after the counts: groups (default: the causes, largest first, each with\n"
          "                   its count and first cases), cases (every non-passing case) or none;\n"
          "                   NotSupported and Warn are counted on one line each\n"
          "  --json           one JSON object on stdout (summary goes to stderr)\n"
          "  --quiet          no progress and no mdc_cli__rp_summary (--json is still printed)\n"
          "  --strict-messages  a message expectation the driver does not meet is a Fail (default:\n"
          "                   advisory, reported with the case; SPEC 8.11)\n"
          "  --differential A,B  replay each trace on backend A and on backend B of the driver\n"
          "                   (its first open_device forced to backend=A, then B) and compare\n"
          "                   every status, shape and checked byte: a disagreement is a Fail\n"
          "  -v, --verbose    each event of each case as it runs: its arguments, the call's status\n"
          "                   and message (on stderr; one case at a time)\n\n"
          "exit status: 0 nothing unexpected, 1 unexpected results, 2 bad usage or input,\n"
          "3 results store error\n");
}

/* The options that take a value to check: sets it in *o (diff holds --differential's names).
 * 0, -1 after saying what is wrong, or 1 for an option that is not one of these. */
static int set_valued(mdc_cli__replay_opts *o, int c, const char *arg, char diff[2][32]) {
  long v;
  switch (c) {
    case 'D':
      if (parse_differential(arg, diff[0], diff[1], sizeof diff[0])) {
        fprintf(stderr, "mdc replay: --differential '%s': want two different backend names A,B "
                "(letters, digits, _ and -), e.g. sim,hip\n", arg);
        return -1;
      }
      o->diff_a = diff[0];
      o->diff_b = diff[1];
      break;
    case 'I':
    case 'X': {
      uint32_t *n = c == 'I' ? &o->n_include : &o->n_exclude;
      if (!arg[0] || *n == MDC_CLI_MAX_GLOBS) {
        fprintf(stderr, "mdc replay: --%s '%s': want a non-empty glob, at most %d of them\n",
                c == 'I' ? "include" : "exclude", arg, MDC_CLI_MAX_GLOBS);
        return -1;
      }
      (c == 'I' ? o->include : o->exclude)[(*n)++] = arg;
      break;
    }
    case 'P':
      if (mdc_cli__parse_seconds(arg, &o->progress_interval_s)) {
        fprintf(stderr, "mdc replay: --progress-interval '%s': want seconds > 0 (at most 86400)\n", arg);
        return -1;
      }
      break;
    case 0x2901: /* --group G | auto */
      if (strcmp(arg, "auto") == 0) {
        o->group = 0;
      } else if (mdc_cli__parse_int(arg, 1, 1000000, &v)) {
        fprintf(stderr, "mdc replay: --group '%s': want cases per child, 1..1000000, or auto\n", arg);
        return -1;
      } else {
        o->group = (uint32_t)v;
      }
      break;
    case 0x2902:
      if (mdc_cli__parse_int(arg, 1, 1048576, &v)) {
        fprintf(stderr, "mdc replay: --group-mib '%s': want MiB, 1..1048576\n", arg);
        return -1;
      }
      o->group_mib = (uint32_t)v;
      break;
    case 0x2903: {
      char *end;
      errno = 0;
      unsigned long long seed = strtoull(arg, &end, 0);
      if (!isdigit((unsigned char)arg[0]) || *end || errno) {
        fprintf(stderr, "mdc replay: --shuffle '%s': want a seed, an unsigned 64-bit integer (decimal or 0x hex)\n",
                arg);
        return -1;
      }
      o->shuffle_seed = seed;
      o->has_shuffle_seed = 1;
      break;
    }
    case 0x2904: o->keep_order = 1; break;
    case 0x2601: /* --summary groups|cases|none (issue 26) */
      if (!strcmp(arg, "groups")) o->summary = MDC_CLI_SUMMARY_GROUPS;
      else if (!strcmp(arg, "cases")) o->summary = MDC_CLI_SUMMARY_CASES;
      else if (!strcmp(arg, "none")) o->summary = MDC_CLI_SUMMARY_NONE;
      else {
        fprintf(stderr, "mdc replay: --summary '%s': want groups, cases or none\n", arg);
        return -1;
      }
      break;
    case 's': {
      char shard_why[320];
      if (mdc_cli__parse_shard_why(arg, &o->shard_i, &o->shard_n, shard_why, sizeof shard_why)) {
        fprintf(stderr, "mdc replay: --shard '%s': %s\n", arg, shard_why);
        return -1;
      }
      break;
    }
    case 't':
      if (mdc_cli__parse_seconds(arg, &o->timeout_s)) {
        fprintf(stderr, "mdc replay: --timeout '%s': want seconds > 0 (at most 86400)\n", arg);
        return -1;
      }
      break;
    case 'j':
      if (mdc_cli__parse_int(arg, 1, 1024, &v)) {
        fprintf(stderr, "mdc replay: --jobs '%s': want 1..1024\n", arg);
        return -1;
      }
      o->jobs = (int)v;
      break;
    default: return 1;
  }
  return 0;
}

int mdc_cli__cmd_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"driver", required_argument, 0, 'd'}, {"config", required_argument, 0, 'c'},
      {"db", required_argument, 0, 'b'},     {"no-db", no_argument, 0, 'n'},
      {"shard", required_argument, 0, 's'},  {"baseline", required_argument, 0, 'B'},
      {"timeout", required_argument, 0, 't'}, {"jobs", required_argument, 0, 'j'},
      {"json", no_argument, 0, 'J'},         {"quiet", no_argument, 0, 'q'},
      {"no-rerun", no_argument, 0, 'R'},     {"help", no_argument, 0, 'h'},
      {"verbose", no_argument, 0, 'v'},      {"strict-messages", no_argument, 0, 'S'},
      {"differential", required_argument, 0, 'D'},
      {"include", required_argument, 0, 'I'}, {"exclude", required_argument, 0, 'X'},
      {"group", required_argument, 0, 0x2901}, {"group-mib", required_argument, 0, 0x2902},
      {"shuffle", required_argument, 0, 0x2903}, {"keep-order", no_argument, 0, 0x2904},
      {"skips", required_argument, 0, 'K'},  {"flakes", required_argument, 0, 'F'},
      {"progress-interval", required_argument, 0, 'P'},
      {"summary", required_argument, 0, 0x2601},
      {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  mdc_cli__replay_opts o = {.config = "backend=auto", .db = "results/mdc.db", .timeout_s = 30,
                        .shard_i = 0, .shard_n = 1, .jobs = ncpu > 0 ? (int)ncpu : 1,
                        .rerun_failures = 1, .kind = "replay"};
  int no_db = 0, c;
  char diff[2][32];
  optind = 1;
  opterr = 0;
  /* Options and paths in any order (replay T --driver X). */
  while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
    switch (c) {
      case 'v': o.verbose = 1; break;
      case 'S': o.strict_messages = 1; break;
      case 'd': o.driver = optarg; break;
      case 'c': o.config = optarg; break;
      case 'b': o.db = optarg; break;
      case 'n': no_db = 1; break;
      case 'B': o.baseline = optarg; break;
      case 'K': o.skips = optarg; break;
      case 'F': o.flakes = optarg; break;
      case 'J': o.json = 1; break;
      case 'q': o.quiet = 1; break;
      case 'R': o.rerun_failures = 0; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc replay: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default: {
        int r = set_valued(&o, c, optarg, diff);
        if (r < 0) return MDC_EXIT_USAGE;
        if (r == 0) break;
        fprintf(stderr, "mdc replay: unknown option '%s' (see mdc replay --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      }
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "mdc replay: no PATH given (see mdc replay --help)\n");
    return MDC_EXIT_USAGE;
  }
  if (no_db) o.db = NULL;
  if (o.verbose) o.jobs = 1; /* one case's events at a time on the terminal */
  o.paths = (const char *const *)argv + optind;
  o.n_paths = (size_t)(argc - optind);
  mdc_cli__run run;
  int rc = mdc_cli__replay(&o, &run);
  int sig = run.interrupted_by;
  mdc_cli__run_free(&run);
  if (sig) {
    /* Stopped on a signal: die of it, as the shell and CI expect (exit status 128 + sig). */
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
  }
  return rc;
}

