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
          "  --timeout S      seconds per case before it is killed as Timeout (default 30)\n"
          "  --jobs N         cases run in parallel (default: the number of CPUs)\n"
          "  --no-rerun       do not re-run a failed or crashed case (no Flake detection)\n"
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
      {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  mdc_cli__replay_opts o = {.config = "backend=auto", .db = "results/mdc.db", .timeout_s = 30,
                        .shard_i = 0, .shard_n = 1, .jobs = ncpu > 0 ? (int)ncpu : 1,
                        .rerun_failures = 1, .kind = "replay"};
  int no_db = 0, c;
  long v;
  char diff_a[32], diff_b[32];
  optind = 1;
  opterr = 0;
  /* Options and paths in any order (replay T --driver X). */
  while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
    switch (c) {
      case 'v': o.verbose = 1; break;
      case 'S': o.strict_messages = 1; break;
      case 'D':
        if (parse_differential(optarg, diff_a, diff_b, sizeof diff_a)) {
          fprintf(stderr, "mdc replay: --differential '%s': want two different backend names A,B "
                  "(letters, digits, _ and -), e.g. sim,hip\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.diff_a = diff_a;
        o.diff_b = diff_b;
        break;
      case 'I':
      case 'X': {
        uint32_t *n = c == 'I' ? &o.n_include : &o.n_exclude;
        if (!optarg[0] || *n == MDC_CLI_MAX_GLOBS) {
          fprintf(stderr, "mdc replay: --%s '%s': want a non-empty glob, at most %d of them\n",
                  c == 'I' ? "include" : "exclude", optarg, MDC_CLI_MAX_GLOBS);
          return MDC_EXIT_USAGE;
        }
        (c == 'I' ? o.include : o.exclude)[(*n)++] = optarg;
        break;
      }
      case 'd': o.driver = optarg; break;
      case 'c': o.config = optarg; break;
      case 'b': o.db = optarg; break;
      case 'n': no_db = 1; break;
      case 'B': o.baseline = optarg; break;
      case 'J': o.json = 1; break;
      case 'q': o.quiet = 1; break;
      case 'R': o.rerun_failures = 0; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case 's': {
        char shard_why[320];
        if (mdc_cli__parse_shard_why(optarg, &o.shard_i, &o.shard_n, shard_why, sizeof shard_why)) {
          fprintf(stderr, "mdc replay: --shard '%s': %s\n", optarg, shard_why);
          return MDC_EXIT_USAGE;
        }
        break;
      }
      case 't':
        if (mdc_cli__parse_seconds(optarg, &o.timeout_s)) {
          fprintf(stderr, "mdc replay: --timeout '%s': want seconds > 0 (at most 86400)\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'j':
        if (mdc_cli__parse_int(optarg, 1, 1024, &v)) {
          fprintf(stderr, "mdc replay: --jobs '%s': want 1..1024\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.jobs = (int)v;
        break;
      case ':':
        fprintf(stderr, "mdc replay: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc replay: unknown option '%s' (see mdc replay --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
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

