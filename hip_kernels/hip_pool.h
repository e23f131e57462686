/* hip_pool.h - private to hip_kernels: the device memory pool of the hip backend, a caching
 * size-class allocator over large reservations ("slabs").
 *
 * Why: hipMalloc/hipFree are slow (hipFree synchronizes the device) and must stay off the
 * execute path. Requests are rounded up to a size class (256-byte steps up to 1 KiB, then four
 * classes per power of two: at most 25% slack). Classes up to 1 MiB are carved out of 4 MiB
 * slabs; larger ones get a slab of one block. A freed block goes back to its class's free list
 * and is handed out again without touching the device; a slab whose blocks are all free is
 * released only by md__hpool_trim, which the pool runs itself when a reservation would pass the
 * limit or the device is out of memory. So a steady workload reserves nothing after warm-up.
 *
 * The pool never touches the memory: reservations go through an ops table (hipMalloc/hipFree in
 * the backend, malloc/free in the tests, a failing one for fault injection). It does not scrub
 * either; the backend zero-fills the requested bytes of what md__hpool_alloc returns and never
 * lets a copy reach past them (md__hpool_block_size).
 *
 * Thread-safety: every function may be called from any thread; one mutex guards the pool
 * (reservations happen under it: they are rare by design). */
#ifndef MD_HIP_POOL_H
#define MD_HIP_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"

/* Reserving and releasing device memory. reserve returns MD_NONE with *addr != 0,
 * RESOURCE_EXHAUSTED_TRANSIENT when the device is out of memory, or another status (device lost:
 * DEVICE_UNAVAILABLE) with a message in err naming the call. */
typedef struct md__hpool_ops {
  md_status (*reserve)(void *ctx, uint64_t bytes, uint64_t *addr, char *err, size_t errlen);
  void (*release)(void *ctx, uint64_t addr);
  void *ctx;
} md__hpool_ops;

typedef struct md__hpool_stats {
  uint64_t allocs, frees;          /* successful md__hpool_alloc / md__hpool_free calls */
  uint64_t bytes_live, bytes_peak; /* class bytes of live blocks */
  uint64_t reserved;               /* bytes of live slabs (what the device holds for the pool) */
  uint64_t reserves, releases;     /* calls of ops->reserve / ops->release */
} md__hpool_stats;

typedef struct md__hpool md__hpool;

#define MD__HPOOL_GRAIN 256u                      /* alignment of every block */
#define MD__HPOOL_SLAB (UINT64_C(4) << 20)        /* slab size for small classes */
#define MD__HPOOL_SMALL_MAX (UINT64_C(1) << 20)   /* largest class carved from shared slabs */

/* A pool reserving at most `limit` bytes in total. NULL when out of host memory. The ops table
 * is copied. */
md__hpool *md__hpool_create(const md__hpool_ops *ops, uint64_t limit);
/* Releases every slab, live blocks included. NULL is ignored. */
void md__hpool_destroy(md__hpool *p);

/* The class size a request of `bytes` (> 0) is rounded up to; 0 when it is too large to have
 * one. */
uint64_t md__hpool_class_size(uint64_t bytes);

/* A block of at least `bytes` (> 0), aligned to MD__HPOOL_GRAIN, in *addr.
 * RESOURCE_EXHAUSTED_PERSISTENT: larger than the limit; RESOURCE_EXHAUSTED_TRANSIENT: not now
 * (the limit is reached by live blocks, or the device is out of memory even after a trim);
 * otherwise what reserve returned. err names the request. */
md_status md__hpool_alloc(md__hpool *p, uint64_t bytes, uint64_t *addr, char *err, size_t errlen);
/* Returns a block to its class. 0, or -1 when addr is not a live block of this pool (nothing
 * changes). */
int md__hpool_free(md__hpool *p, uint64_t addr);
/* The bytes requested for the live block at addr (what md__hpool_alloc was asked for, not its
 * class size), 0 if there is none. The backend bounds copies and zero-fills to exactly this, so
 * the class's rounding slack is never reachable (SPEC 5: no earlier buffer's bytes). */
uint64_t md__hpool_block_size(md__hpool *p, uint64_t addr);
/* Releases every slab none of whose blocks is live; returns the bytes released. */
uint64_t md__hpool_trim(md__hpool *p);
void md__hpool_stats_get(md__hpool *p, md__hpool_stats *out);

#endif
