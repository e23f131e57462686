/* record_cmd.c - `mdc record`: runs a workload program with the recording driver as its
 * --driver, the real driver and the output trace passed through the environment
 * (conformance/record/record.c names the variables). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mdc_int.h"
#include "paths.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc record --out FILE [--driver SO] [--config STR] [--name NAME] -- PROGRAM [ARGS...]\n"
          "Runs PROGRAM ARGS... --driver <recording driver> [--config STR] and writes every driver\n"
          "call it makes, with the results observed as expectations, to the trace FILE (large pool\n"
          "contents go to blobs/<sha256> beside it).\n\n"
          "  --out FILE     the trace to write (its folder is created)\n"
          "  --driver SO    the real driver the recording wraps (default: the reference driver)\n"
          "  --config STR   passed to PROGRAM as --config STR\n"
          "  --name NAME    the trace's header name (default workloads/<PROGRAM without md_wl_>)\n\n"
          "exit status: PROGRAM's exit status (0 when it passed and the trace was written), 2 bad\n"
          "usage\n");
}

static const char *record_lib(void) {
  const char *e = getenv("MDC_RECORD_LIB");
  return e && *e ? e : mdc_cli__recorder_path();
}

int mdc_cli__cmd_record(int argc, char **argv) {
  static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                       {"driver", required_argument, 0, 'd'},
                                       {"config", required_argument, 0, 'c'},
                                       {"name", required_argument, 0, 'n'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL, *driver = NULL, *config = NULL, *name = NULL;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': out = optarg; break;
      case 'd': driver = optarg; break;
      case 'c': config = optarg; break;
      case 'n': name = optarg; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc record: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc record: unknown option '%s' (see mdc record --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (!out) {
    fprintf(stderr, "mdc record: --out FILE is required\n");
    return MDC_EXIT_USAGE;
  }
  if (optind >= argc) {
    fprintf(stderr, "mdc record: no PROGRAM given (mdc record --out FILE -- PROGRAM [ARGS...])\n");
    return MDC_EXIT_USAGE;
  }
  char real[PATH_MAX];
  const char *drv = driver ? driver : mdc_cli__reference_driver_path();
  if (!realpath(drv, real)) {
    fprintf(stderr, "mdc record: driver '%s': %s\n", drv, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  if (access(record_lib(), R_OK) != 0) {
    fprintf(stderr, "mdc record: recording driver '%s': %s\n", record_lib(), strerror(errno));
    return MDC_EXIT_USAGE;
  }
  struct stat ob;
  if (stat(out, &ob) == 0 && !S_ISREG(ob.st_mode)) {
    fprintf(stderr, "mdc record: --out '%s' is %s, not a file: name the trace to write\n", out,
            S_ISDIR(ob.st_mode) ? "a folder" : "not a regular file");
    return MDC_EXIT_USAGE;
  }
  if (mdc_cli__mkdir_parent(out) != 0) {
    fprintf(stderr, "mdc record: cannot create the folder of '%s': %s\n", out, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  /* The header's name and command line: the program's base name, so a trace recorded on one
   * machine reads the same as on another. */
  const char *prog = argv[optind];
  const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
  char defname[256], cmdline[1024];
  snprintf(defname, sizeof defname, "workloads/%s", strncmp(base, "md_wl_", 6) == 0 ? base + 6 : base);
  size_t len = (size_t)snprintf(cmdline, sizeof cmdline, "%s", base);
  for (int i = optind + 1; i < argc && len < sizeof cmdline; i++)
    len += (size_t)snprintf(cmdline + len, sizeof cmdline - len, " %s", argv[i]);
  if (config && len < sizeof cmdline) snprintf(cmdline + len, sizeof cmdline - len, " --config %s", config);

  int n = argc - optind;
  char **av = calloc((size_t)n + 5, sizeof *av);
  if (!av) return MDC_EXIT_USAGE;
  for (int i = 0; i < n; i++) av[i] = argv[optind + i];
  av[n++] = (char *)"--driver";
  av[n++] = (char *)record_lib();
  if (config) {
    av[n++] = (char *)"--config";
    av[n++] = (char *)config;
  }
  av[n] = NULL;
  unlink(out); /* a stale trace must not pass for this recording */
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "mdc record: fork: %s\n", strerror(errno));
    free(av);
    return MDC_EXIT_USAGE;
  }
  if (pid == 0) {
    setenv("MDC_RECORD_REAL", real, 1);
    setenv("MDC_RECORD_OUT", out, 1);
    setenv("MDC_RECORD_NAME", name ? name : defname, 1);
    setenv("MDC_RECORD_PROGRAM", cmdline, 1);
    execvp(av[0], av);
    fprintf(stderr, "mdc record: cannot run '%s': %s\n", av[0], strerror(errno));
    _exit(127);
  }
  free(av);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    if (WIFSIGNALED(st))
      fprintf(stderr, "mdc record: %s killed by signal %d (%s)\n", prog, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
      fprintf(stderr, "mdc record: %s exited with status %d\n", prog, WEXITSTATUS(st));
    return WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
  }
  struct stat sb;
  if (stat(out, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fprintf(stderr, "mdc record: %s passed but wrote no trace to %s (did it load the driver given "
                    "with --driver?)\n", prog, out);
    return 1;
  }
  fprintf(stderr, "mdc record: %s (%lld bytes)\n", out, (long long)sb.st_size);
  return MDC_EXIT_OK;
}
