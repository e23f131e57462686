/* report_cmd.c - `mdc report`: the results store as a page, a PR summary and JUnit
 * (mdc_report_write), or two runs compared case by case (--compare A B, a CI gate). The work is
 * in reports/ (mdc/report.h); this file is options, messages and exit codes. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdc/report.h"
#include "mdc_int.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc report [--db FILE] [--run UUID|latest] [--baseline REF] --out DIR\n"
          "       mdc report [--db FILE] --compare RUN_A RUN_B [--json]\n"
          "Writes DIR/index.html (one self-contained page), DIR/summary.md (a PR comment) and\n"
          "DIR/junit.xml from the results store, atomically (DIR is replaced whole); or prints what\n"
          "changed from run A to run B, case by case.\n\n"
          "  --db FILE        results store (default results/mdc.db); read only, never changed\n"
          "  --run REF        the run: a uuid, a unique prefix of one, or latest (default: the\n"
          "                   latest replay run, else the latest run)\n"
          "  --baseline REF   what to compare with: previous (default: the newest earlier run of the\n"
          "                   same kind, driver and backend), none, a run of the store (uuid or\n"
          "                   prefix), another results store (its newest such run), or a file of\n"
          "                   known failures (one name a line, as for mdc replay --baseline)\n"
          "  --out DIR        the report folder (created; an existing one must hold only a report)\n"
          "  --max-rows N     rows of a long table before it is cut (default 500)\n"
          "  --history N      earlier runs in the history charts (default 50)\n"
          "  --compare A B    compare two runs (uuid, prefix or latest): exit 1 when a case\n"
          "                   regressed (passing in A, failing in B) or a new case fails\n"
          "  --json           with --compare: one JSON object\n"
          "  --quiet          print nothing on success\n\n"
          "exit status: 0 written (or nothing regressed), 1 regressed (--compare), 2 bad usage or\n"
          "input (missing or empty store, unknown run, unusable --out), 3 results store error\n");
}

static int code_of(int rc) {
  switch (rc) {
    case MDC_REPORT_OK: return MDC_EXIT_OK;
    case MDC_REPORT_REGRESSED: return MDC_EXIT_UNEXPECTED;
    case MDC_REPORT_ESTORE: return MDC_EXIT_STORE;
    default: return MDC_EXIT_USAGE;
  }
}

/* `mdc report ...` (argv[0] is "report"): the exit code (MDC_EXIT_*), messages on stderr, the
 * page's path or the comparison on stdout. Uses getopt's globals: not thread-safe. */
int mdc_cli__cmd_report(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, 0, 'd'},       {"run", required_argument, 0, 'r'},
      {"baseline", required_argument, 0, 'B'}, {"out", required_argument, 0, 'o'},
      {"max-rows", required_argument, 0, 'm'}, {"history", required_argument, 0, 'H'},
      {"compare", no_argument, 0, 'c'},        {"json", no_argument, 0, 'J'},
      {"quiet", no_argument, 0, 'q'},          {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  mdc_report_opts o = {.db = "results/mdc.db"};
  int compare = 0, json = 0, c;
  long v;
  optind = 1;
  opterr = 0;
  /* Options and the two runs of --compare in any order (GNU getopt permutes them). */
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': o.db = optarg; break;
      case 'r': o.run = optarg; break;
      case 'B': o.baseline = optarg; break;
      case 'o': o.out_dir = optarg; break;
      case 'c': compare = 1; break;
      case 'J': json = 1; break;
      case 'q': o.quiet = 1; break;
      case 'm':
        if (mdc_cli__parse_int(optarg, 1, 1000000, &v)) {
          fprintf(stderr, "mdc report: --max-rows '%s': want 1..1000000\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.max_rows = (uint32_t)v;
        break;
      case 'H':
        if (mdc_cli__parse_int(optarg, 1, 100000, &v)) {
          fprintf(stderr, "mdc report: --history '%s': want 1..100000\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.history = (uint32_t)v;
        break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc report: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc report: unknown option '%s' (see mdc report --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  char err[2048];
  if (compare) {
    if (argc - optind != 2) {
      fprintf(stderr, "mdc report --compare: want two runs, RUN_A RUN_B (uuids, prefixes or latest)\n");
      return MDC_EXIT_USAGE;
    }
    if (o.out_dir || o.run || o.baseline) {
      fprintf(stderr, "mdc report --compare: --out, --run and --baseline do not apply\n");
      return MDC_EXIT_USAGE;
    }
    mdc_compare_opts co = {.db = o.db, .a = argv[optind], .b = argv[optind + 1], .json = json};
    int rc = mdc_report_compare(&co, stdout, err, sizeof err);
    if (rc != MDC_REPORT_OK && rc != MDC_REPORT_REGRESSED) fprintf(stderr, "mdc report --compare: %s\n", err);
    return code_of(rc);
  }
  if (optind < argc) {
    fprintf(stderr, "mdc report: unexpected argument '%s' (runs go after --run, or use --compare A B)\n", argv[optind]);
    return MDC_EXIT_USAGE;
  }
  if (json) {
    fprintf(stderr, "mdc report: --json goes with --compare\n");
    return MDC_EXIT_USAGE;
  }
  if (!o.out_dir) {
    fprintf(stderr, "mdc report: no --out DIR given (where to write index.html, summary.md, junit.xml)\n");
    return MDC_EXIT_USAGE;
  }
  int rc = mdc_report_write(&o, err, sizeof err);
  if (rc != MDC_REPORT_OK) {
    fprintf(stderr, "mdc report: %s (nothing written)\n", err);
    return code_of(rc);
  }
  if (!o.quiet) {
    char abs[PATH_MAX];
    printf("mdc report: %s\n", realpath(err, abs) ? abs : err);
  }
  return MDC_EXIT_OK;
}
