/* test_driver.c - misbehaving drivers for the mdc CLI tests, built only for tests. Each wraps the
 * reference driver (dlopen'ed from MD_DRIVER_SO) and breaks `execute` in one way, chosen at
 * compile time:
 *   MDC_TEST_CRASH  execute calls abort()                                   (Crash)
 *   MDC_TEST_HANG   execute blocks forever; when MDC_TEST_HANG_FIFO names a fifo, it first
 *                   writes one byte to it, so a test knows the hang has begun (Timeout, SIGKILL)
 *   MDC_TEST_FLAKY  execute aborts unless the file MDC_TEST_FLAKY_MARKER exists, which it
 *                   creates first: the first run crashes, the re-run passes   (Flake)
 *   MDC_TEST_FORK_CLIENT  open_client forks two helpers that live forever: one stays in the
 *                   case's process group and holds its result pipe, one calls setsid() to
 *                   leave it; their pids are appended to the file MDC_TEST_PIDS
 *   MDC_TEST_FORK_DEVICE  the same in open_device (so also in mdc's start-up probe)
 *   MDC_TEST_MUTANTS  a stand-in for the mutants build (md_driver_mutants) in mdc mutants tests:
 *                   MD_MUTANT=crashy makes execute abort, MD_MUTANT=same changes nothing, any
 *                   other non-empty name makes md_driver_entry refuse (as the real build does)
 *   MDC_TEST_SKEW   a driver with a second backend, "skew", for `mdc replay --differential`
 *                   tests: open_device with backend=skew opens the reference driver's sim
 *                   backend, and executions on such a device add 1e-3 to every f32 of their
 *                   pool outputs (within a loose `check`, beyond the differential's tolerance);
 *                   with MDC_TEST_SKEW_ALL set, every device is skewed
 *   MDC_TEST_SCRIBBLE  open_device writes garbage into every descriptor from 3 to 1023 and
 *                   truncates those that are files (a results store left open would die)
 * Every other entry point is the reference driver's. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "md/driver.h"

static const md_driver *real;
static md_driver table;

#if defined(MDC_TEST_SKEW)
#include <stdio.h>
#include <sys/mman.h>
static md_device *skewed[16];

static int is_skewed(const md_device *d) {
  for (size_t i = 0; i < sizeof skewed / sizeof skewed[0]; i++)
    if (skewed[i] == d) return 1;
  return 0;
}

/* Adds 1e-3 to every f32 of each output that lives in a shared-memory pool. */
static void skew_outputs(const md_request *req) {
  for (uint32_t i = 0; i < req->n_outputs; i++) {
    const md_request_arg *a = &req->outputs[i];
    if (a->has_no_value || a->pool >= req->n_pools || req->pools[a->pool].is_token) continue;
    const md_memory *m = &req->pools[a->pool].memory;
    if (m->kind != MD_MEM_ASHMEM && m->kind != MD_MEM_MMAP_FD) continue;
    size_t len = (size_t)(m->offset + m->size);
    unsigned char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (base == MAP_FAILED) continue;
    for (uint64_t off = a->offset; off + 4 <= a->offset + a->length && off + 4 <= m->size; off += 4) {
      float x;
      memcpy(&x, base + m->offset + off, 4);
      x += 1e-3f;
      memcpy(base + m->offset + off, &x, 4);
    }
    munmap(base, len);
  }
}

static md_status skew_open_device(const char *config, md_device **out) {
  char cfg[1024];
  snprintf(cfg, sizeof cfg, "%s", config ? config : "");
  char *b = strstr(cfg, "backend=skew");
  int skew = b != NULL || getenv("MDC_TEST_SKEW_ALL") != NULL;
  if (b) memcpy(b, "backend=sim ", 12);
  md_status st = real->open_device(cfg, out);
  if (st == MD_NONE && skew)
    for (size_t i = 0; i < sizeof skewed / sizeof skewed[0]; i++)
      if (!skewed[i]) {
        skewed[i] = *out;
        break;
      }
  return st;
}

static void skew_close_device(md_device *d) {
  for (size_t i = 0; i < sizeof skewed / sizeof skewed[0]; i++)
    if (skewed[i] == d) skewed[i] = NULL;
  real->close_device(d);
}
#endif

static md_status bad_execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                             md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
#if defined(MDC_TEST_CRASH)
  abort();
#elif defined(MDC_TEST_HANG)
  const char *fifo = getenv("MDC_TEST_HANG_FIFO");
  if (fifo && *fifo) {
    int fd = open(fifo, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t w = write(fd, "h", 1);
      (void)w;
      close(fd);
    }
  }
  for (;;) pause();
#elif defined(MDC_TEST_MUTANTS)
  const char *m = getenv("MD_MUTANT");
  if (m && strcmp(m, "crashy") == 0) abort();
#elif defined(MDC_TEST_FLAKY)
  const char *marker = getenv("MDC_TEST_FLAKY_MARKER");
  if (!marker || access(marker, F_OK) != 0) {
    if (marker) close(open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    abort();
  }
#endif
#if defined(MDC_TEST_SKEW)
  md_status st = real->execute(d, client, prepared, req, shapes, n_shapes, timing);
  if (st == MD_NONE && is_skewed(d)) skew_outputs(req);
  return st;
#else
  return real->execute(d, client, prepared, req, shapes, n_shapes, timing);
#endif
}

#if defined(MDC_TEST_FORK_CLIENT) || defined(MDC_TEST_FORK_DEVICE)
#include <signal.h>
#include <stdio.h>
/* Forks a helper that never ends (escaping the process group when `leave`), writes its pid. */
static void helper(int leave) {
  pid_t pid = fork();
  if (pid != 0) {
    const char *pids = getenv("MDC_TEST_PIDS");
    FILE *f = pids && pid > 0 ? fopen(pids, "a") : NULL;
    if (f) fprintf(f, "%d\n", (int)pid), fclose(f);
    return;
  }
  if (leave) setsid();
  signal(SIGTERM, SIG_IGN);
  for (;;) pause();
}
#endif

#if defined(MDC_TEST_FORK_CLIENT)
static md_status fork_open_client(md_device *d, md_handle *out) {
  helper(0);
  helper(1);
  return real->open_client(d, out);
}
#endif

#if defined(MDC_TEST_FORK_DEVICE) || defined(MDC_TEST_SCRIBBLE)
static md_status bad_open_device(const char *config, md_device **out) {
#if defined(MDC_TEST_FORK_DEVICE)
  helper(0);
  helper(1);
#else
  static const char junk[] = "scribbled by a hostile driver\n";
  for (int fd = 3; fd < 1024; fd++) {
    ssize_t w = write(fd, junk, sizeof junk - 1);
    (void)w;
    if (ftruncate(fd, 0) != 0) { /* not a file: fine */ }
  }
#endif
  return real->open_device(config, out);
}
#endif

const md_driver *md_driver_entry(uint32_t abi_version) {
#if defined(MDC_TEST_MUTANTS)
  const char *m = getenv("MD_MUTANT");
  if (m && *m && strcmp(m, "crashy") != 0 && strcmp(m, "same") != 0) return NULL;
#endif
  if (!real) {
    void *h = dlopen(MD_DRIVER_SO, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "md_driver_entry") : NULL;
    if (!sym) return NULL;
    const md_driver *(*entry)(uint32_t);
    memcpy(&entry, &sym, sizeof entry);
    real = entry(abi_version);
    if (!real) return NULL;
    table = *real;
    table.execute = bad_execute;
#if defined(MDC_TEST_FORK_CLIENT)
    table.open_client = fork_open_client;
#endif
#if defined(MDC_TEST_FORK_DEVICE) || defined(MDC_TEST_SCRIBBLE)
    table.open_device = bad_open_device;
#endif
#if defined(MDC_TEST_SKEW)
    table.open_device = skew_open_device;
    table.close_device = skew_close_device;
#endif
  }
  return &table;
}
