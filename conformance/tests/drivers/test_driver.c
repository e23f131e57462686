/* test_driver.c - misbehaving drivers for the mdc CLI tests, built only for tests. Each wraps the
 * reference driver (dlopen'ed from MD_DRIVER_SO) and breaks `execute` in one way, chosen at
 * compile time:
 *   MDC_TEST_CRASH  execute calls abort()                                   (Crash)
 *   MDC_TEST_HANG   execute blocks forever; when MDC_TEST_HANG_FIFO names a fifo, it first
 *                   writes one byte to it, so a test knows the hang has begun (Timeout, SIGKILL)
 *   MDC_TEST_FLAKY  execute aborts unless the file MDC_TEST_FLAKY_MARKER exists, which it
 *                   creates first: the first run crashes, the re-run passes   (Flake)
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
#elif defined(MDC_TEST_FLAKY)
  const char *marker = getenv("MDC_TEST_FLAKY_MARKER");
  if (!marker || access(marker, F_OK) != 0) {
    if (marker) close(open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    abort();
  }
#endif
  return real->execute(d, client, prepared, req, shapes, n_shapes, timing);
}

const md_driver *md_driver_entry(uint32_t abi_version) {
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
  }
  return &table;
}
