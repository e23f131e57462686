/* mdc.c - the `mdc` command: replay, record, mutants, report, db merge (docs/mdc-cli.md). */
#include <stdio.h>
#include <string.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "paths.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc <command> [options]   (mdc <command> --help for its options)\n\n"
          "  replay [options] PATH...          replay traces against a driver, each in its own process\n"
          "  record --out FILE [...] -- PROG   record a workload's driver calls as a trace\n"
          "  mutants [options]                 build the reference driver's mutants, print the kill matrix\n"
          "  mutate [options]                  generated mutants of a driver's C sources, judged by the corpus\n"
          "  fuzz --target T [options]         an AFL++ campaign on a fuzz target; fuzz export SIGNATURE\n"
          "  results [--run UUID|latest]       a stored run's verdicts on the terminal (or --json)\n"
          "  reduce TRACE [--driver SO]        a failing trace shrunk to a small one that fails the same way\n"
          "  baseline write [--run R] [--out F] a known-failures file (--baseline) from a stored run\n"
          "  report [options] --out DIR        the results store as a page, a PR summary and JUnit\n"
          "  report --compare RUN_A RUN_B      what changed between two runs (exit 1: regressed)\n"
          "  db merge OUT IN...                merge results stores (idempotent)\n"
          "  --version                         mdc's version, trace format, results schema, driver ABI, its files\n\n"
          "exit status: 0 success, 1 unexpected results, 2 bad usage or input, 3 results store error\n");
}

static int cmd_db(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: mdc db merge OUT IN...\n"
           "Merges the runs and cases of each IN store into OUT (created when missing). A run already\n"
           "in OUT (same uuid) is skipped, so merging twice changes nothing.\n");
    return MDC_EXIT_OK;
  }
  if (argc < 2 || strcmp(argv[1], "merge") != 0) {
    fprintf(stderr, "mdc db: unknown or missing subcommand%s%s (mdc db merge OUT IN...)\n",
            argc >= 2 ? " " : "", argc >= 2 ? argv[1] : "");
    return MDC_EXIT_USAGE;
  }
  if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) return cmd_db(2, (char *[]){argv[0], argv[2]});
  if (argc < 4) {
    fprintf(stderr, "mdc db merge: want OUT and at least one IN (mdc db merge OUT IN...)\n");
    return MDC_EXIT_USAGE;
  }
  for (int i = 2; i < argc; i++)
    if (argv[i][0] == '-') {
      fprintf(stderr, "mdc db merge: unknown option '%s'\n", argv[i]);
      return MDC_EXIT_USAGE;
    }
  char err[1024];
  if (mdc_cli__mkdir_parent(argv[2]) != 0) {
    fprintf(stderr, "mdc db merge: cannot create the folder of '%s'\n", argv[2]);
    return MDC_EXIT_STORE;
  }
  if (mdc_store_merge(argv[2], (const char *const *)argv + 3, (size_t)(argc - 3), err, sizeof err)) {
    fprintf(stderr, "mdc db merge: %s\n", err);
    return MDC_EXIT_STORE;
  }
  fprintf(stderr, "mdc db merge: %d store%s merged into %s\n", argc - 3, argc == 4 ? "" : "s", argv[2]);
  return MDC_EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return MDC_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return MDC_EXIT_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("mdc %s (trace format %d.%d, results schema %d, driver ABI %u)\n", MDC_VERSION, MDC_TRACE_MAJOR,
           MDC_TRACE_MINOR, MDC_STORE_SCHEMA_VERSION, (unsigned)MD_DRIVER_ABI_VERSION);
    /* Where an installed mdc found its own files (paths.c), so a broken install is visible. */
    printf("reference driver: %s\nrecorder: %s\n", mdc_cli__reference_driver_path(), mdc_cli__recorder_path());
    return MDC_EXIT_OK;
  }
  /* Whatever a driver under test forks comes back to mdc if it leaves its case's process group,
   * so mdc can kill it: nothing a case starts outlives mdc. */
  mdc_cli__become_subreaper();
  if (!strcmp(cmd, "replay")) return mdc_cli__cmd_replay(argc - 1, argv + 1);
  if (!strcmp(cmd, "record")) return mdc_cli__cmd_record(argc - 1, argv + 1);
  if (!strcmp(cmd, "mutants")) return mdc_cli__cmd_mutants(argc - 1, argv + 1);
  if (!strcmp(cmd, "mutate")) return mdc_cli__cmd_mutate(argc - 1, argv + 1);
  if (!strcmp(cmd, "fuzz")) return mdc_cli__cmd_fuzz(argc - 1, argv + 1);
  if (!strcmp(cmd, "report")) return mdc_cli__cmd_report(argc - 1, argv + 1);
  if (!strcmp(cmd, "db")) return cmd_db(argc - 1, argv + 1);
  if (!strcmp(cmd, "results")) return mdc_cli__cmd_results(argc - 1, argv + 1);
  if (!strcmp(cmd, "baseline")) return mdc_cli__cmd_baseline(argc - 1, argv + 1);
  if (!strcmp(cmd, "reduce")) return mdc_cli__cmd_reduce(argc - 1, argv + 1);
  fprintf(stderr, "mdc: unknown command '%s'\n", cmd);
  usage(stderr);
  return MDC_EXIT_USAGE;
}
