/* md_soak.c - a soak / stress program for memory-domain drivers: the stress phase
 * (soak_ops.c: racing threads, every status judged, every leak report reconciled, canaries,
 * exact outputs) and the open/close cycle check (soak_cycles.c), then a report: calls and
 * calls/s per entry point, closes reconciled, cycles, failures. Exits 1 on any failure, 2 on a
 * usage or set-up error. docs/testing.md ("The soak") has the design and the flags.
 *
 *   md_soak [--driver SO] [--config STR] [--seed N] [--threads N] [--clients N]
 *           [--ops N | --seconds S] [--cycles N] [--max-printed N] [--skip OPS]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md/loader.h"
#include "md/status.h"
#include "soak.h"

/* The helpers of support.c are built against the tsan_runner's Criterion stand-in, whose failed
 * checks call mdtr_fail (below): md_soak is a program, not a Criterion suite. */
#include <criterion/criterion.h>

const md_driver *soak_drv;
md_device *soak_dev;
bool soak_has_registered;

#define SOAK_EP_NAME(e, s) s,
const char *const soak_ep_names[SOAK_EP_COUNT] = {SOAK_EP_MAP(SOAK_EP_NAME)};
#undef SOAK_EP_NAME

static struct {
  pthread_mutex_t lock;
  atomic_uint_fast64_t count;
  unsigned max_printed;
  uint64_t seed;
} fails = {PTHREAD_MUTEX_INITIALIZER, 0, 50, 0};

uint64_t soak_failures(void) { return atomic_load(&fails.count); }

void soak_fail(const char *op, int thread, uint64_t opno, int st, const char *last_error,
               const char *fmt, ...) {
  uint64_t n = atomic_fetch_add(&fails.count, 1) + 1;
  if (n > fails.max_printed) return;
  char detail[768], status[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (st < 0) snprintf(status, sizeof status, "-");
  else snprintf(status, sizeof status, "%s(%d)", md_status_name((md_status)st), st);
  pthread_mutex_lock(&fails.lock);
  fprintf(stderr, "FAIL %s seed=0x%" PRIx64 " thread=%d op#=%" PRIu64 " status=%s", op, fails.seed, thread,
          opno, status);
  if (last_error) fprintf(stderr, " last_error=\"%s\"", last_error);
  fprintf(stderr, ": %s\n", detail);
  if (n == fails.max_printed) fprintf(stderr, "md_soak: further failures are counted, not printed\n");
  pthread_mutex_unlock(&fails.lock);
}

/* A failed check of a support.c helper (a memfd that cannot be made, a request too large):
 * the run cannot go on. */
void mdtr_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  soak_fail("helper", -1, 0, -1, NULL, "%s:%d: %s%s%s (errno %d: %s)", file, line, expr, *msg ? ": " : "", msg,
            errno, strerror(errno));
  if (fatal) {
    fprintf(stderr, "md_soak: a helper's check failed; stopping\n");
    exit(2);
  }
}

/* ---- utilities (soak.h) ---- */

uint64_t soak_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint32_t soak_below(uint64_t *state, uint32_t n) {
  return (uint32_t)(((soak_rand(state) >> 32) * (uint64_t)n) >> 32);
}

static const md_status all_statuses[] = {
    MD_NONE, MD_DEVICE_UNAVAILABLE, MD_GENERAL_FAILURE, MD_OUTPUT_INSUFFICIENT_SIZE, MD_INVALID_ARGUMENT,
    MD_MISSED_DEADLINE_TRANSIENT, MD_MISSED_DEADLINE_PERSISTENT, MD_RESOURCE_EXHAUSTED_TRANSIENT,
    MD_RESOURCE_EXHAUSTED_PERSISTENT, MD_DEAD_OBJECT};

uint32_t soak_sbit(md_status st) {
  if ((unsigned)st <= MD_RESOURCE_EXHAUSTED_PERSISTENT) return 1u << (unsigned)st;
  if (st == MD_DEAD_OBJECT) return 1u << 9;
  return 1u << 31;   /* outside the enum: in no allowed set */
}

const char *soak_set_str(uint32_t set, char *buf, unsigned len) {
  unsigned used = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < sizeof all_statuses / sizeof all_statuses[0]; i++) {
    if (!(set & soak_sbit(all_statuses[i]))) continue;
    int n = snprintf(buf + used, len - used, "%s%s", used ? "|" : "", md_status_name(all_statuses[i]));
    if (n < 0 || (unsigned)n >= len - used) break;
    used += (unsigned)n;
  }
  return buf;
}

/* ---- options ---- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: md_soak [options]\n"
          "  --driver SO       the driver to judge (default: the reference driver linked in)\n"
          "  --config STR      open_device config (default: backend=sim;seed=SEED)\n"
          "  --seed N          seed of every thread's operations (default 1)\n"
          "  --threads N       racing threads (default 6)\n"
          "  --clients N       racing client slots (default 4)\n"
          "  --ops N           operations per thread (default 2000; 0: no stress phase)\n"
          "  --seconds S       run the stress phase for S seconds instead (the long run)\n"
          "  --cycles N        open/close cycle check with N cycles (default 0: none)\n"
          "  --max-printed N   failure lines printed (default 50; the rest are counted)\n"
          "  --skip OPS        leave these operations of the stress phase out (comma-separated:\n"
          "                    %s)\n", soak_op_names());
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || !*s || *end || *s == '-') return false;
  *out = v;
  return true;
}

static int parse_args(int argc, char **argv, soak_opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->threads = 6;
  o->clients = 4;
  o->ops = 2000;
  o->max_printed = 50;
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "md_soak: %s needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--driver")) {
      o->driver_path = v;
      continue;
    }
    if (!strcmp(a, "--skip")) {
      o->skip = v;
      if (!soak_skip_valid(v)) {
        fprintf(stderr, "md_soak: --skip %s: names an unknown operation, or leaves none\n", v);
        return -1;
      }
      continue;
    }
    if (!strcmp(a, "--config")) {
      config = v;
      continue;
    }
    if (!strcmp(a, "--seconds")) {
      char *end;
      o->seconds = strtod(v, &end);
      if (*end || !(o->seconds > 0 && o->seconds < 1e7)) {
        fprintf(stderr, "md_soak: --seconds: not a positive number: %s\n", v);
        return -1;
      }
      continue;
    }
    uint64_t n = 0;
    if (!parse_u64(v, &n)) {
      fprintf(stderr, "md_soak: %s: not a number: %s\n", a, v);
      return -1;
    }
    if (!strcmp(a, "--seed")) o->seed = n;
    else if (!strcmp(a, "--threads") && n >= 1 && n <= 256) o->threads = (unsigned)n;
    else if (!strcmp(a, "--clients") && n >= 1 && n <= 64) o->clients = (unsigned)n;
    else if (!strcmp(a, "--ops")) o->ops = n;
    else if (!strcmp(a, "--cycles") && n <= 1000000) o->cycles = (unsigned)n;
    else if (!strcmp(a, "--max-printed") && n <= 1000000) o->max_printed = (unsigned)n;
    else {
      fprintf(stderr, "md_soak: unknown option or value out of range: %s %s\n", a, v);
      return -1;
    }
  }
  if (config) snprintf(o->config, sizeof o->config, "%s", config);
  else snprintf(o->config, sizeof o->config, "backend=sim;seed=%" PRIu64, o->seed);
  return 0;
}

/* ---- the report ---- */

/* Calls per entry point, and calls/s when wall_s > 0. */
static void print_calls(const uint64_t *calls, double wall_s) {
  printf("  %-26s %12s %12s\n", "entry point", "calls", wall_s > 0 ? "calls/s" : "");
  for (int k = 0; k < SOAK_EP_COUNT; k++) {
    if (!calls[k]) continue;
    if (wall_s > 0) printf("  %-26s %12" PRIu64 " %12.0f\n", soak_ep_names[k], calls[k], (double)calls[k] / wall_s);
    else printf("  %-26s %12" PRIu64 "\n", soak_ep_names[k], calls[k]);
  }
}

int main(int argc, char **argv) {
  soak_opts o;
  if (parse_args(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  fails.max_printed = o.max_printed;
  fails.seed = o.seed;

  char err[512];
  void *dl = NULL;
  soak_drv = md_driver_load(o.driver_path, md_driver_entry, &dl, err, sizeof err);
  if (!soak_drv) {
    fprintf(stderr, "md_soak: %s\n", err);
    return 2;
  }
  soak_has_registered = MD_DRIVER_HAS(soak_drv, register_memory) && MD_DRIVER_HAS(soak_drv, unregister_memory);
  printf("md_soak: driver %s %s (%s), config \"%s\", seed 0x%" PRIx64 "\n", soak_drv->name, soak_drv->version,
         o.driver_path ? o.driver_path : "linked", o.config, o.seed);
  if (!soak_has_registered) printf("md_soak: the driver has no registered pools (SPEC 9): not exercised\n");

  if (o.seconds > 0 || o.ops > 0) {
    if (o.seconds > 0) printf("stress: %u threads, %u client slots, %.0f s\n", o.threads, o.clients, o.seconds);
    else printf("stress: %u threads, %u client slots, %" PRIu64 " operations per thread\n", o.threads, o.clients, o.ops);
    fflush(stdout);
    md_status st = soak_drv->open_device(o.config, &soak_dev);
    if (st != MD_NONE) {
      fprintf(stderr, "md_soak: open_device(\"%s\"): %s: %s\n", o.config, md_status_name(st),
              soak_drv->last_error(soak_dev));
      md_driver_unload(dl);
      return 2;
    }
    soak_stats s;
    soak_stress(&o, &s);
    soak_drv->close_device(soak_dev);
    soak_dev = NULL;
    printf("stress: %" PRIu64 " operations (%" PRIu64 " found nothing to act on) in %.2f s; closes reconciled %" PRIu64
           "; values checked %" PRIu64 "; canary checks %" PRIu64 "\n",
           s.ops, s.skipped, s.wall_s, s.closes_reconciled, s.value_checks, s.canary_checks);
    printf("stress: calls that raced a removal or close %" PRIu64 "; creating calls that raced their client's close %" PRIu64
           " (NONE %" PRIu64 ", INVALID_ARGUMENT %" PRIu64 ")\n",
           s.raced, s.create_races, s.create_races_none, s.create_races - s.create_races_none);
    print_calls(s.calls, s.wall_s);
  }

  if (o.cycles) {
    printf("cycles: %u open/close cycles of devices and of clients\n", o.cycles);
    fflush(stdout);
    soak_cycle_stats c;
    soak_cycles(&o, &c);
    printf("cycles: %u device cycles, %u client cycles; fds %ld -> %ld, threads %ld -> %ld (%ld while a device "
           "ran), RSS %ld -> %ld KiB (tolerance %ld KiB)\n",
           c.device_cycles, c.client_cycles, c.fds0, c.fds1, c.threads0, c.threads1, c.threads_max, c.rss0_kib,
           c.rss1_kib, c.rss_tolerance_kib);
    if (c.heap0 >= 0) printf("cycles: live heap (ASan's count) %ld -> %ld bytes\n", c.heap0, c.heap1);
    print_calls(c.calls, 0);
  }

  md_driver_unload(dl);
  uint64_t n = soak_failures();
  printf("md_soak: %" PRIu64 " failure%s\n", n, n == 1 ? "" : "s");
  return n ? 1 : 0;
}
