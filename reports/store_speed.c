/* store_speed.c - times 10,000 case begin/end pairs (each its own committed transaction) into a
 * results store file and into ":memory:", and prints both and the cost per case. Not a test:
 * timings belong in a report, not an assertion. Usage: mdc_store_speed [dir] [cases]. */
#include "mdc/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds for n begin/end pairs into path, or a negative number on failure. */
static double time_pairs(const char *path, unsigned n) {
  char err[1024];
  mdc_store *s;
  if (mdc_store_open(path, &s, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  mdc_run_info ri = {.kind = "replay", .driver_name = "speed", .shard_count = 1};
  int64_t run, c;
  if (mdc_store_run_begin(s, &ri, &run, NULL) != 0) goto fail;
  double t0 = now_s();
  for (unsigned i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "speed/case_%05u", i);
    if (mdc_store_case_begin(s, run, name, "traces/speed.jsonl", &c) != 0 ||
        mdc_store_case_end(s, c, "Pass", 0.001, i + 1, NULL, NULL, NULL) != 0)
      goto fail;
  }
  double t = now_s() - t0;
  if (mdc_store_run_end(s, run, n, n, 0, 0, 0, 0) != 0) goto fail;
  mdc_store_close(s);
  return t;
fail:
  fprintf(stderr, "%s\n", mdc_store_error(s));
  mdc_store_close(s);
  return -1;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  unsigned n = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 10000;
  if (n == 0) n = 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/mdc_store_speed_%ld.db", dir, (long)getpid());
  double file = time_pairs(path, n);
  char side[4200];
  for (int i = 0; i < 3; i++) {
    static const char *const ext[] = {"", "-wal", "-shm"};
    snprintf(side, sizeof side, "%s%s", path, ext[i]);
    unlink(side);
  }
  double mem = time_pairs(":memory:", n);
  if (file < 0 || mem < 0) return 1;
  printf("%u case begin/end pairs (2 committed transactions each)\n", n);
  printf("file     %s: %.3f s, %.1f us per case\n", dir, file, file * 1e6 / n);
  printf(":memory:  %.3f s, %.1f us per case\n", mem, mem * 1e6 / n);
  return 0;
}
