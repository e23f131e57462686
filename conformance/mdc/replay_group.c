/* replay_group.c - grouped replay (`mdc replay --group G`, docs/mdc-cli.md): the child that loads
 * the driver once and runs a list of cases one after the other, each trace opening and closing
 * its own devices, each verdict written to shared memory (mdc_cli__group_page) as it ends; the
 * group size a run uses; the order cases run in (--shuffle, --keep-order). What the parent makes
 * of a child's end (crash, timeout, a failure after another case) is replay_sched.c's.
 *
 * Why: a GPU runtime cannot be started before a fork and used after it, so one child per case
 * pays the runtime's start-up (0.1-1 s) on every case; deqp-runner's answer is the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/config.h"
#include "mdc_int.h"
#include "replay_int.h"

/* ---- the group size and the order --------------------------------------------------------- */

uint32_t mdc_cli__rp_group_size(const mdc_cli__replay_opts *o, const mdc_cli__run *run) {
  if (o->group) return o->group;
  /* The simulator starts in microseconds: one child per case costs little (about 1 ms of fork,
   * dlopen and exit) and isolates best. A driver on anything else, or the simulator modelling a
   * start-up cost, pays that start-up per child: group (bench/README.md, "grouped replay"). */
  md_config cfg;
  int init = md_config_parse(o->config, &cfg, NULL, 0) == MD_NONE && cfg.init_ns > 0;
  return strcmp(run->backend, "sim") == 0 && !init ? 1u : MDC_CLI_GROUP_DEFAULT;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The index of the first PATH that names the trace at path (itself, or a folder above it). */
static size_t given_rank(const mdc_cli__replay_opts *o, const char *path) {
  for (size_t j = 0; j < o->n_paths; j++) {
    size_t l = strlen(o->paths[j]);
    if (strcmp(o->paths[j], path) == 0) return j;
    if (l && strncmp(o->paths[j], path, l) == 0 && (o->paths[j][l - 1] == '/' || path[l] == '/')) return j;
  }
  return o->n_paths;
}

void mdc_cli__rp_order(const mdc_cli__replay_opts *o, const mdc_cli__run *run, size_t *order) {
  for (size_t i = 0; i < run->n; i++) order[i] = i;
  if (o->keep_order) {
    /* Insertion sort by rank: stable, and a reproducer names a handful of traces. */
    for (size_t i = 1; i < run->n; i++) {
      size_t v = order[i], r = given_rank(o, run->cases[v].path), j = i;
      for (; j > 0 && given_rank(o, run->cases[order[j - 1]].path) > r; j--) order[j] = order[j - 1];
      order[j] = v;
    }
  }
  if (o->has_shuffle_seed) {
    uint64_t x = o->shuffle_seed;
    for (size_t i = run->n; i > 1; i--) {
      size_t j = (size_t)(splitmix64(&x) % i);
      size_t t = order[i - 1];
      order[i - 1] = order[j];
      order[j] = t;
    }
  }
}

/* ---- the child ---------------------------------------------------------------------------- */

/* This process's resident set in KiB, or -1. */
static long rss_kb(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long size, resident;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* In the child: runs the cases, then reports the last verdict on the page (as a one-case child
 * always did) and exits. A case that crashes or hangs ends it; the parent sees where. */
static _Noreturn void run_cases(const mdc_cli__replay_opts *o, const mdc_cli__run *run, slot *s) {
  if (o->silence_children) {
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
  }
  mdc_cli__group_page *gp = s->gp;
  double t0 = mdc_cli__now();
  atomic_store(&gp->case_t0, t0);
  atomic_store_explicit(&gp->started, 1, memory_order_release); /* a load that crashes is case 0's */
  void *dl = NULL;
  char err[512];
  const md_driver *d = mdc_driver_load(o->driver, &dl, err, sizeof err);
  long base_kb = -1, limit_kb = (long)(o->group_mib ? o->group_mib : 512) * 1024;
  static mdc_result r; /* static: a few KiB off a driver's stack */
  for (uint32_t i = 0; i < s->n; i++) {
    if (i > 0) {
      long now_kb = rss_kb();
      if (base_kb >= 0 && now_kb >= 0 && now_kb - base_kb > limit_kb) {
        atomic_store(&gp->stopped, 1); /* the parent starts the rest in a new child */
        break;
      }
      s->ch.page->line = 0;
      s->ch.page->op[0] = '\0';
      t0 = mdc_cli__now();
      atomic_store(&gp->case_t0, t0);
      atomic_store_explicit(&gp->started, i + 1, memory_order_release);
    }
    const mdc_cli__case *c = &run->cases[s->cis[i]];
    memset(&r, 0, sizeof r);
    if (!d) {
      r.verdict = MDC_FAIL;
      snprintf(r.message, sizeof r.message, "driver: %s", err);
    } else {
      mdc_trace_opts to = {.config = o->config, .line = &s->ch.page->line, .op = s->ch.page->op,
                           .op_len = sizeof s->ch.page->op, .verbose = o->verbose ? stderr : NULL,
                           .strict_messages = o->strict_messages};
      if (o->diff_a)
        mdc_cli__differential(d, c->path, &to, o->diff_a, o->diff_b, &r);
      else
        mdc_trace_run_opts(d, c->path, &to, &r);
    }
    gp->out[i].res = r;
    gp->out[i].duration_s = mdc_cli__now() - t0;
    atomic_store_explicit(&gp->done, i + 1, memory_order_release);
    /* The bound is on growth from here: the driver loaded and its runtime started. */
    if (i == 0) base_kb = rss_kb();
  }
  mdc_cli__child_report(&s->ch, &r, sizeof r);
  _exit(0);
}

int mdc_cli__rp_start_group(const mdc_cli__replay_opts *o, const mdc_cli__run *run, slot *s) {
  s->ci = s->cis[0];
  s->gp_len = sizeof *s->gp + (size_t)s->n * sizeof s->gp->out[0];
  s->gp = mmap(NULL, s->gp_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s->gp == MAP_FAILED) {
    s->gp = NULL;
    return -1;
  }
  int in_parent = mdc_cli__child_start(&s->ch, sizeof s->res, mdc_cli__now() + o->timeout_s);
  if (in_parent < 0) {
    int e = errno;
    munmap(s->gp, s->gp_len);
    s->gp = NULL;
    errno = e;
    return -1;
  }
  if (!in_parent) run_cases(o, run, s);
  return 0;
}

void mdc_cli__rp_group_free(slot *s) {
  if (s->gp) munmap(s->gp, s->gp_len);
  s->gp = NULL;
  free(s->cis);
  s->cis = NULL;
  s->n = 0;
}
