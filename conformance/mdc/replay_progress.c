/* replay_progress.c - the live progress line of `mdc replay` (on a terminal). */
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

void mdc_cli__rp_progress(const mdc_cli__run *run, size_t done, const char *current, int on) {
  if (!on) return;
  char safe[256];
  mdc_cli__terminal_safe(current, safe, sizeof safe);
  current = safe;
  fprintf(stderr, "\r[%*zu/%zu] pass %u fail %u crash %u timeout %u other %u  current: %.60s\033[K",
          run->n >= 100 ? 3 : 2, done, run->n, run->count[MDC_S_PASS] + run->count[MDC_S_FLAKE],
          run->count[MDC_S_FAIL] + run->count[MDC_S_UNEXPECTED_PASS], run->count[MDC_S_CRASH],
          run->count[MDC_S_TIMEOUT],
          run->count[MDC_S_NOT_SUPPORTED] + run->count[MDC_S_TRACE_ERROR] + run->count[MDC_S_EXPECTED_FAIL],
          current ? current : "");
  fflush(stderr);
}
