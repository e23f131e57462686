/* fixture.h - private to reports/ tests and benchmarks: writes a realistic results store (a
 * history of replay runs with regressions, fixes, flaky and slow cases, a mutants run, a fuzz
 * campaign) through the store's own API, so tests and the scale benchmark never need a
 * committed database. Deterministic for a given seed. */
#ifndef MDC_REPORT_FIXTURE_H
#define MDC_REPORT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mdc_fixture_opts {
  uint32_t runs;          /* replay runs of one driver and backend, one a day (0: 1) */
  uint32_t cases;         /* cases per run */
  uint32_t seed;
  int last_state;         /* the newest run: 0 finished, 1 interrupted (signal), 2 killed */
  int mutants;            /* add a mutants run (13 mutants, one survivor, one not built) */
  int fuzz;               /* add a fuzz campaign (2 instances, an hour of samples, findings) */
} mdc_fixture_opts;

/* Writes the store at path, which must not exist. 0, or -1 with a message in err. Not
 * thread-safe with itself on the same path; otherwise keeps no state. */
int mdc_fixture_write(const char *path, const mdc_fixture_opts *o, char *err, size_t errlen);

#endif
