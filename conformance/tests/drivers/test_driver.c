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
  return real->execute(d, client, prepared, req, shapes, n_shapes, timing);
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
  }
  return &table;
}
