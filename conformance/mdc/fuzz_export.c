/* fuzz_export.c - `mdc fuzz export SIGNATURE --out FILE` (docs/fuzzing.md): the newest stored
 * finding whose signature starts with SIGNATURE written as a trace, by the fuzz build's target
 * (which loads what the campaign loaded) or, without a fuzz build, by md_fuzz_replay. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc_int.h"
#include "paths.h"

/* The newest stored finding whose signature starts with sig. */
typedef struct pick {
  const char *sig;
  char target[32], input[4096], signature[160];
  int64_t run;
  int matches;
} pick;

static int pick_finding(void *ctx, const mdc_fuzz_finding_row *f) {
  pick *pk = ctx;
  if (strncmp(f->signature, pk->sig, strlen(pk->sig))) return 0;
  if (pk->matches && f->run_id < pk->run) return 0;
  pk->matches++;
  pk->run = f->run_id;
  mdc_cli__fmt(pk->target, sizeof pk->target, "%s", f->target);
  mdc_cli__fmt(pk->signature, sizeof pk->signature, "%s", f->signature);
  mdc_cli__fmt(pk->input, sizeof pk->input, "%s", f->minimized ? f->minimized : f->reproducer ? f->reproducer : "");
  return 0;
}

/* Without a fuzz build: md_fuzz_replay writes pk's input as a trace (driver, config: "" for
 * none; mutant: "MD_MUTANT=NAME" or ""). Nonzero when it failed. */
static int replay_to_trace(pick *pk, char *driver, char *config, char *mutant, const char *out, char *name) {
  char *av[20];
  int k = 0;
  av[k++] = (char *)mdc_cli__fuzz_replay_path();
  av[k++] = (char *)"--target", av[k++] = pk->target;
  av[k++] = (char *)"--allow-findings", av[k++] = (char *)"--quiet";
  av[k++] = (char *)"--trace", av[k++] = (char *)out, av[k++] = (char *)"--name", av[k++] = name;
  if (driver[0]) av[k++] = (char *)"--driver", av[k++] = driver;
  if (config[0]) av[k++] = (char *)"--config", av[k++] = config;
  av[k++] = pk->input;
  av[k] = NULL;
  char *env[2] = {mutant[0] ? mutant : NULL, NULL};
  static char outbuf[1 << 14];
  int to;
  int st = mdc_cli__fuzz_run_capture(av, env, 120, outbuf, sizeof outbuf, &to);
  return to || st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1 || access(out, R_OK);
}

/* `mdc fuzz export SIGNATURE --out FILE [--db FILE] [--fuzz-build DIR]`: the newest stored
 * finding whose signature starts with SIGNATURE written as a trace. Returns the exit status. */
int mdc_cli__fuzz_export(int argc, char **argv) {
  static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {"db", required_argument, 0, 'b'},
                                       {"fuzz-build", required_argument, 0, 'B'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL, *db = "results/mdc.db", *fuzz_build = mdc_cli__fuzz_build_default();
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': out = optarg; break;
      case 'b': db = optarg; break;
      case 'B': fuzz_build = optarg; break;
      case 'h': mdc_cli__fuzz_usage(stdout); return MDC_EXIT_OK;
      default:
        fprintf(stderr, "mdc fuzz export: unknown option or missing value '%s'\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || !out) {
    fprintf(stderr, "mdc fuzz export: want SIGNATURE and --out FILE (mdc fuzz export SIGNATURE --out FILE)\n");
    return MDC_EXIT_USAGE;
  }
  const char *sig = argv[optind];
  mdc_store *s;
  char err[1024];
  int rc = mdc_store_open_read(db, &s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "mdc fuzz export: %s\n", err);
    return rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  }
  pick pk = {.sig = sig};
  rc = mdc_store_fuzz_findings_each(s, 0, 0, pick_finding, &pk);
  char driver[4096] = "", config[1024] = "", mutant[128] = "";
  if (rc == 0 && pk.matches) {
    mdc_run_row row;
    if (mdc_store_run_get(s, pk.run, &row) == 0) {
      if (row.driver_path && strcmp(row.driver_path, "(reference)"))
        mdc_cli__fmt(driver, sizeof driver, "%s", row.driver_path);
      if (row.config) mdc_cli__fmt(config, sizeof config, "%s", row.config);
      if (row.driver_name && !strncmp(row.driver_name, "mutant:", 7))
        mdc_cli__fmt(mutant, sizeof mutant, "MD_MUTANT=%s", row.driver_name + 7);
    }
    mdc_store_run_row_free(&row);
  }
  mdc_store_close(s);
  if (rc) {
    fprintf(stderr, "mdc fuzz export: reading %s failed\n", db);
    return MDC_EXIT_STORE;
  }
  if (!pk.matches) {
    fprintf(stderr, "mdc fuzz export: no finding with signature '%s' in %s\n", sig, db);
    return MDC_EXIT_USAGE;
  }
  if (!pk.input[0] || access(pk.input, R_OK)) {
    fprintf(stderr, "mdc fuzz export: the finding's input '%s' is gone\n", pk.input);
    return MDC_EXIT_USAGE;
  }
  if (mdc_cli__mkdir_parent(out)) {
    fprintf(stderr, "mdc fuzz export: cannot create the folder of '%s'\n", out);
    return MDC_EXIT_USAGE;
  }
  /* The target binary of the fuzz build loads what the campaign loaded (an instrumented driver
   * too); without a fuzz build, the plain md_fuzz_replay. */
  mdc_cli__campaign cp = {.target = pk.target, .driver = driver[0] ? driver : NULL,
                          .config = config[0] ? config : NULL, .mutant = mutant[0] ? mutant + 10 : NULL, .strict = 0};
  char bin[4300], name[256];
  char binname[64];
  mdc_cli__fmt(binname, sizeof binname, "md_fuzz_%s", pk.target);
  mdc_cli__fuzz_bin(bin, sizeof bin, fuzz_build, binname);
  mdc_cli__fmt(name, sizeof name, "fuzz/%s/%08x", pk.target, mdc_cli__fuzz_fnv(pk.signature));
  int failed;
  if (mdc_cli__fuzz_exists_exec(bin)) {
    failed = mdc_cli__fuzz_export_trace(&cp, bin, pk.input, out, name);
  } else {
    failed = replay_to_trace(&pk, driver, config, mutant, out, name);
  }
  if (failed) {
    fprintf(stderr, "mdc fuzz export: writing the trace of %s failed\n", pk.signature);
    return MDC_EXIT_USAGE;
  }
  fprintf(stderr, "mdc fuzz export: %s (target %s) written to %s\n", pk.signature, pk.target, out);
  return MDC_EXIT_OK;
}
