/* md/backend.h - the backend interface: what the runtime needs from a device.
 *
 * A backend is a versioned table of function pointers (like sqlite3_vfs), registered by name.
 * The reference driver runs every model through one: "sim" (sim/, md/sim.h, always built) or
 * "hip" (hip_kernels/, when built with HIP). The runtime knows backends only through this
 * table: the driver product registers the ones it was built with (runtime/driver/entry.c), as
 * SQLite's core reaches the file system only through the VFS it is given. Device memory is
 * addressed by md_devptr values that are NOT host pointers; a kernel gets a usable address from
 * kernel_ptr().
 *
 * Thread-safety: every function may be called from any thread concurrently, except that one
 * stream is used by one thread at a time and close() runs alone. */
#ifndef MD_BACKEND_H
#define MD_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include "md/driver.h"
#include "md/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MD_BACKEND_VERSION 1u

typedef uint64_t md_devptr;              /* opaque device address; 0 is null */
typedef struct md_backend md_backend;    /* one opened device, owned by the backend */
typedef struct md_stream md_stream;      /* an ordered command queue */
typedef struct md_event md_event;        /* a marker recorded on a stream */

/* What open() receives; parsed from the open_device config by the runtime. */
typedef struct md_backend_params {
  uint32_t struct_size;
  uint64_t mem_limit;                    /* bytes; 0 = the device's own */
  uint64_t seed;                         /* has_seed: reproducible scheduling */
  int has_seed;
  uint64_t latency_ns;                   /* simulated launch latency; 0 = none */
  const char *faults;                    /* simulator fault plan or NULL */
  double copy_gbps;                      /* simulated copy bandwidth, GB/s; 0 = not modelled */
  uint64_t init_ns;                      /* simulated start-up: the first open of a process
                                            waits this long (a GPU runtime's init); 0 = none */
} md_backend_params;

/* Where the runtime asks the backend whether a planned fault fires (fault_point). */
typedef enum md_fault_site {
  MD_FAULT_ALLOCATE = 0,                 /* each allocate call */
  MD_FAULT_COPY = 1,                     /* each copy_from / copy_to call */
  MD_FAULT_EXECUTION = 2                 /* each execute / execute_async call */
} md_fault_site;

typedef struct md_backend_info {
  char device_name[64];
  uint64_t mem_total;                    /* bytes the device can hold (after mem_limit) */
  uint64_t max_alloc;                    /* largest single allocation */
} md_backend_info;

/* Counters for reports; a backend fills what it tracks and leaves the rest 0. */
typedef struct md_backend_stats {
  uint64_t allocs, frees, bytes_live, bytes_peak;
  uint64_t copies, bytes_copied, launches, faults_fired;
  uint64_t redzone_hits, poison_hits;
} md_backend_stats;

typedef struct md_backend_ops {
  uint32_t version;                      /* MD_BACKEND_VERSION */
  uint32_t struct_size;                  /* sizeof(md_backend_ops) */
  const char *name;                      /* "sim", "hip" */
  const char *platform;                  /* kernel registry platform: "sim", "hip" */

  /* Opens the device. DEVICE_UNAVAILABLE when there is none; INVALID_ARGUMENT for a bad
   * parameter. err gets a message naming the problem. */
  md_status (*open)(const md_backend_params *p, md_backend **out, char *err, size_t errlen);
  /* Releases everything, including memory still allocated. */
  void (*close)(md_backend *b);
  void (*info)(md_backend *b, md_backend_info *out);
  void (*stats)(md_backend *b, md_backend_stats *out);

  /* Allocates `bytes` (> 0) of device memory. The memory never shows bytes of an earlier
   * allocation (the backend scrubs freed memory or zero-fills new memory).
   * RESOURCE_EXHAUSTED_PERSISTENT: larger than the device can ever hold;
   * RESOURCE_EXHAUSTED_TRANSIENT: not available now. */
  md_status (*alloc)(md_backend *b, uint64_t bytes, md_devptr *out);
  /* Frees an allocation (0 is ignored). Must not be called while queued work uses it. */
  void (*free)(md_backend *b, md_devptr p);

  /* Copies; a NULL stream means synchronous. Errors: GENERAL_FAILURE (or DEVICE_UNAVAILABLE),
   * message in err. */
  md_status (*write)(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src,
                     uint64_t n, char *err, size_t errlen);
  md_status (*read)(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off,
                    uint64_t n, char *err, size_t errlen);
  md_status (*copy)(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src,
                    uint64_t soff, uint64_t n, char *err, size_t errlen);

  /* The address kernels of this backend's platform use for device pointer p. */
  void *(*kernel_ptr)(md_backend *b, md_devptr p);

  /* Runs a kernel on the stream (NULL: synchronously). The call's tensors already hold
   * kernel_ptr() addresses. The kernel's own failure comes back in st with its message; the
   * return value is the launch's status (st->code when the kernel failed). */
  md_status (*launch)(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                      md_kernel_status *st);

  md_status (*stream_create)(md_backend *b, md_stream **out);
  void (*stream_destroy)(md_backend *b, md_stream *s);
  /* Waits for everything queued on s; returns the first error of that work. */
  md_status (*stream_sync)(md_backend *b, md_stream *s, char *err, size_t errlen);
  void *(*stream_native)(md_backend *b, md_stream *s);  /* hipStream_t, or NULL */

  md_status (*event_create)(md_backend *b, md_event **out);
  void (*event_destroy)(md_backend *b, md_event *e);
  md_status (*event_record)(md_backend *b, md_event *e, md_stream *s);
  /* MD_NONE once reached; MISSED_DEADLINE_TRANSIENT after timeout_ns (UINT64_MAX: forever). */
  md_status (*event_wait)(md_backend *b, md_event *e, uint64_t timeout_ns);

  /* Optional (NULL: the backend injects no faults). The runtime calls it once per API call of
   * the site's kind, numbered in call order, before doing the call's device work. Returns
   * MD_NONE, or the injected failure with a message in err:
   *   ALLOCATE   RESOURCE_EXHAUSTED_TRANSIENT (alloc_fail@N)
   *   COPY       GENERAL_FAILURE (copy_fail@N)
   *   EXECUTION  GENERAL_FAILURE (kernel_fail@N: the runtime reports it as the execution's
   *              kernel status), DEVICE_UNAVAILABLE (device_lost@N: the device is lost,
   *              every later backend call fails with DEVICE_UNAVAILABLE) or
   *              MISSED_DEADLINE_TRANSIENT (stall@N: not a failure; an asynchronous execution
   *              is held before it runs until a wait_event without deadline, its client's
   *              close or its device's close releases it; a synchronous one runs as usual). */
  md_status (*fault_point)(md_backend *b, md_fault_site site, char *err, size_t errlen);

  /* Optional (NULL, or a table whose struct_size ends before it: no time model). The
   * modelled device time of one launch (is_launch) or one copy of `bytes`, in ns, or
   * UINT64_MAX when this device models no time (the runtime then reports measured time). */
  uint64_t (*device_ns)(md_backend *b, int is_launch, uint64_t bytes);

  /* Optional (NULL, or a table whose struct_size ends before them: the backend does nothing for
   * registered pools). host_register is told that the host range [addr, addr + len), the
   * mapping of a pool a client registered (SPEC 9), stays mapped until host_unregister(addr):
   * a GPU backend may page-lock it (hipHostRegister) so that write/read from and to it skip
   * staging buffers. Its failure is not the client's (the pool is used unpinned): the runtime
   * then never calls host_unregister for addr. Both may be called from any thread. */
  md_status (*host_register)(md_backend *b, void *addr, uint64_t len, char *err, size_t errlen);
  void (*host_unregister)(md_backend *b, void *addr);
} md_backend_ops;

/* The size of the oldest ops table a registry accepts: every entry up to and including
 * event_wait is required; the entries after it are optional. */
#define MD_BACKEND_OPS_MIN_SIZE (offsetof(md_backend_ops, event_wait) + sizeof(void (*)(void)))

/* For backend implementations: formats a message into err (when err && errlen) and returns
 * st, the way every md_backend_ops call reports a failure. */
static inline md_status md_backend_fail(char *err, size_t errlen, md_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline md_status md_backend_fail(char *err, size_t errlen, md_status st, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* Registry of backends, process-wide. md_backend_register fails (INVALID_ARGUMENT) on a
 * duplicate name, a version it does not know, or a table shorter than
 * MD_BACKEND_OPS_MIN_SIZE; entries a shorter table lacks read as NULL. It keeps its own copy
 * of the table: md_backend_find returns that copy, not ops. */
md_status md_backend_register(const md_backend_ops *ops);
const md_backend_ops *md_backend_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif
