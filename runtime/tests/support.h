/* support.h - helpers shared by the runtime's Criterion tests: pools backed by real memfds,
 * small model builders, and the driver under test. */
#ifndef MD_TEST_SUPPORT_H
#define MD_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include "md/driver.h"

/* The reference driver, linked into the test (not through dlopen). */
const md_driver *mdt_driver(void);

/* A memfd of `size` bytes holding `data` (NULL: zeros). Aborts the test on failure. */
int mdt_memfd(const void *data, size_t size);
/* An ASHMEM md_memory for fd (whole file, read+write). */
md_memory mdt_ashmem(int fd, uint64_t size);
/* Reads `size` bytes at offset 0 of fd into out. */
void mdt_read_fd(int fd, void *out, size_t size);

/* One-operation float32 model: out = op(in0, in1) with a CONSTANT_COPY INT32 activation
 * (ADD/SUB/MUL), all tensors with the given rank/dims (0 entries allowed). The returned model
 * points into static storage of this helper: valid until the next call from the same thread. */
const md_model *mdt_binary_model(md_operation_type op, uint32_t rank, const uint32_t *dims,
                                 int32_t activation);

/* Opens a sim device with the given config (NULL: "backend=sim") and one client. */
typedef struct mdt_env {
  const md_driver *drv;
  md_device *dev;
  md_handle client;
} mdt_env;
void mdt_env_open(mdt_env *env, const char *config);
/* Closes the client (asserting no leaks unless allow_leaks) and the device. */
void mdt_env_close(mdt_env *env, int allow_leaks);

#endif
