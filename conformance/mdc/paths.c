/* paths.c - where mdc's own files are at run time: beside an installed mdc (<prefix>/bin/mdc
 * finds <prefix>/lib/libmd_driver.so and <prefix>/lib/mdc/libmdc_record.so, whatever prefix it
 * was installed to), else at the build-tree paths compiled in. */
#include "paths.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef MDC_BIN_TO_LIB
#define MDC_BIN_TO_LIB "../lib"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char driver_path[PATH_MAX], recorder_path[PATH_MAX];

/* <dir of this executable>/MDC_BIN_TO_LIB/rel when that file exists, else fallback. */
static void pick(char *out, size_t len, const char *rel, const char *fallback) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      if ((size_t)snprintf(out, len, "%s/%s/%s", exe, MDC_BIN_TO_LIB, rel) < len && access(out, R_OK) == 0) return;
    }
  }
  snprintf(out, len, "%s", fallback);
}

static void resolve(void) {
  pick(driver_path, sizeof driver_path, "libmd_driver.so", MD_DRIVER_SO);
  pick(recorder_path, sizeof recorder_path, "mdc/libmdc_record.so", MDC_RECORD_SO);
}

const char *mdc_cli__reference_driver_path(void) {
  pthread_once(&once, resolve);
  return driver_path;
}

const char *mdc_cli__recorder_path(void) {
  pthread_once(&once, resolve);
  return recorder_path;
}
