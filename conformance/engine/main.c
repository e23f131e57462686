/* main.c - mdc_engine_run: replays traces in this process and prints one line per trace,
 * "Verdict name message"; exits 0 only when every trace passes. A debugging tool for trace
 * authors; `mdc replay` is the real runner (isolation, timeouts, baselines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdc/engine.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc_engine_run [--driver PATH.so] [--config K=V;...] [-v] TRACE...\n"
          "  --driver PATH.so  dlopen this driver (default: the linked reference driver)\n"
          "  --config STR      config keys merged into each trace's first open_device\n"
          "  -v                also print expected/actual and the number of events\n");
}

int main(int argc, char **argv) {
  const char *so = NULL, *config = NULL;
  int verbose = 0, first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (strcmp(argv[first], "--driver") == 0 && first + 1 < argc) so = argv[++first];
    else if (strcmp(argv[first], "--config") == 0 && first + 1 < argc) config = argv[++first];
    else if (strcmp(argv[first], "-v") == 0) verbose = 1;
    else if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (first >= argc) {
    usage(stderr);
    return 2;
  }
  char err[512];
  void *dl = NULL;
  const md_driver *drv = mdc_driver_load(so, &dl, err, sizeof err);
  if (!drv) {
    fprintf(stderr, "mdc_engine_run: %s\n", err);
    return 2;
  }
  int bad = 0;
  for (int i = first; i < argc; i++) {
    mdc_trace_header h;
    const char *name = argv[i];
    if (mdc_trace_read_header(argv[i], &h, err, sizeof err) == 0) name = h.name;
    mdc_result res;
    mdc_verdict v = mdc_trace_run(drv, argv[i], config, &res);
    if (v != MDC_PASS) bad = 1;
    printf("%s %s %s\n", mdc_verdict_name(v), name, res.message);
    if (verbose) {
      if (res.expected[0] || res.actual[0])
        printf("    expected: %s\n    actual:   %s\n", res.expected, res.actual);
      printf("    events: %u\n", res.events);
    }
    fflush(stdout);
  }
  mdc_driver_unload(dl);
  return bad ? 1 : 0;
}
