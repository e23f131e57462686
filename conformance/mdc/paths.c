/* paths.c - where mdc's own files are at run time: beside an installed mdc (<prefix>/bin/mdc
 * finds <prefix>/lib/libmd_driver.so, <prefix>/lib/mdc/libmdc_record.so, the fuzz targets under
 * <prefix>/libexec/mdc/ and their seeds under <prefix>/share/mdc/fuzz/, whatever prefix it was
 * installed to), else at the build-tree paths compiled in. mdc counts as installed when the
 * reference driver lies beside it (<dir of mdc>/MDC_BIN_TO_LIB/libmd_driver.so). */
#include "paths.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef MDC_BIN_TO_LIB
#define MDC_BIN_TO_LIB "../lib"
#endif
#ifndef MDC_BIN_TO_LIBEXEC
#define MDC_BIN_TO_LIBEXEC "../libexec"
#endif
#ifndef MDC_BIN_TO_DATA
#define MDC_BIN_TO_DATA "../share"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char exe_dir[PATH_MAX], driver_path[PATH_MAX], recorder_path[PATH_MAX];
static char fuzz_build[PATH_MAX], fuzz_data[PATH_MAX], fuzz_replay[PATH_MAX], fuzz_mutator[PATH_MAX];
static int installed;

/* <dir of this executable>/rel when that file exists (1), else fallback (0). */
static int pick(char *out, size_t len, const char *rel, const char *fallback) {
  if (exe_dir[0] && (size_t)snprintf(out, len, "%s/%s", exe_dir, rel) < len && access(out, R_OK) == 0) return 1;
  snprintf(out, len, "%s", fallback);
  return 0;
}

/* <dir of this executable>/rel, or fallback when mdc is not installed (whether rel exists or not:
 * an installed mdc names the installed path in its messages). */
static void beside(char *out, size_t len, const char *rel, const char *fallback) {
  if (!installed || (size_t)snprintf(out, len, "%s/%s", exe_dir, rel) >= len) snprintf(out, len, "%s", fallback);
}

static void resolve(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      snprintf(exe_dir, sizeof exe_dir, "%s", exe);
    }
  }
  installed = pick(driver_path, sizeof driver_path, MDC_BIN_TO_LIB "/libmd_driver.so", MD_DRIVER_SO);
  pick(recorder_path, sizeof recorder_path, MDC_BIN_TO_LIB "/mdc/libmdc_record.so", MDC_RECORD_SO);
  beside(fuzz_build, sizeof fuzz_build, MDC_BIN_TO_LIBEXEC "/mdc/afl", MDC_REPO_ROOT "/build-fuzz");
  beside(fuzz_data, sizeof fuzz_data, MDC_BIN_TO_DATA "/mdc/fuzz", MDC_BUILD_DIR "/fuzz");
  beside(fuzz_replay, sizeof fuzz_replay, MDC_BIN_TO_LIBEXEC "/mdc/md_fuzz_replay", MDC_FUZZ_REPLAY);
  beside(fuzz_mutator, sizeof fuzz_mutator, MDC_BIN_TO_LIB "/mdc/libmd_fuzz_mutator.so", MDC_FUZZ_MUTATOR);
}

#define GETTER(name, var)              \
  const char *name(void) {             \
    pthread_once(&once, resolve);      \
    return var;                        \
  }
GETTER(mdc_cli__reference_driver_path, driver_path)
GETTER(mdc_cli__recorder_path, recorder_path)
GETTER(mdc_cli__fuzz_build_default, fuzz_build)
GETTER(mdc_cli__fuzz_data_dir, fuzz_data)
GETTER(mdc_cli__fuzz_replay_path, fuzz_replay)
GETTER(mdc_cli__fuzz_mutator_path, fuzz_mutator)

int mdc_cli__installed(void) {
  pthread_once(&once, resolve);
  return installed;
}

const char *mdc_cli__source_tree(void) {
  pthread_once(&once, resolve);
  /* An installed mdc's compiled-in source path may be another machine's, or gone: never used. */
  return installed ? NULL : MDC_REPO_ROOT;
}
