/* pool.h - private to the runtime: validating and mapping memory pools (SPEC section 2).
 *
 * A mapping is a shared resource scope (md/scope.h) holding one mmap of one md_memory. Each
 * client keeps a cache of mappings keyed by the file's identity (st_dev, st_ino) and the
 * (offset, size, prot) of the pool, so repeated executions on the same pool map it once. A
 * caller acquires a mapping for the whole of its use (a call, or an async execution) and
 * releases it after; dropping a mapping from the cache (eviction, client close) closes its
 * scope deferred, so the last user unmaps it. */
#ifndef MD_POOL_H
#define MD_POOL_H

#include <stdint.h>
#include <sys/stat.h>
#include "md/driver.h"
#include "md/scope.h"

/* What the pool is being used for; decides which kinds are allowed. */
typedef enum md__pool_use {
  MD__POOL_CONSTANT = 0,   /* model.pools (CONSTANT_REFERENCE): no non-BLOB hardware buffer */
  MD__POOL_IO = 1,         /* request pools: every kind */
  MD__POOL_COPY = 2        /* copy_to / copy_from: no non-BLOB hardware buffer */
} md__pool_use;

/* AHARDWARE_BUFFER_FORMAT_BLOB, as in Android. Other formats are non-BLOB. */
#define MD__HWB_FORMAT_BLOB 0x21u

/* What validating a pool learned: the file's identity and the byte range to map. Handed from
 * md__pool_validate to md__pool_acquire so a call checks each pool's file once. */
typedef struct md__pool_plan {
  struct stat st;
  uint64_t offset, size;   /* range of the file to map */
  uint64_t logical;        /* the pool's size as seen by request arguments (0 for non-BLOB
                              hardware buffers) */
} md__pool_plan;

/* Validates a pool before mapping (INVALID_ARGUMENT with a message that starts with `what`,
 * e.g. "request pool 2: offset 4096 + size 8192 is past the end of fd 7 (8192 bytes)"):
 * kind known and allowed for `use`; fd >= 0 and open; size > 0 (non-BLOB hardware buffers:
 * their size is computed); offset+size inside the file (no overflow); prot only READ|WRITE
 * bits and non-zero; hardware-buffer geometry. On success fills *plan (may be NULL). */
md_status md__pool_validate(const md_memory *m, md__pool_use use, const char *what,
                            md__pool_plan *plan);

typedef struct md__mapping {
  md_scope *scope;         /* shared scope owning the mmap; NULL: nothing held */
  uint8_t *base;           /* byte `offset` of the file */
  uint64_t size;           /* bytes mapped from base (the pool's size; for non-BLOB hardware
                              buffers, the computed byte size) */
  uint32_t prot;
  void *entry;             /* the cache entry it is held through (its holders count), or NULL:
                              the scope itself is acquired */
} md__mapping;

typedef struct md__pool_cache md__pool_cache;

/* A per-client cache. max_idle bounds how many mappings it keeps (least recently used
 * evicted). Thread-safe: one mutex per cache, never held across mmap of another cache. */
md_status md__pool_cache_create(uint32_t max_idle, md__pool_cache **out);
/* Drops every mapping (deferred close: in-flight users keep theirs until they release). */
void md__pool_cache_destroy(md__pool_cache *c);

/* Returns an ACQUIRED mapping of m, from the cache or freshly mapped. `plan` is what
 * md__pool_validate returned for m during this same call (the file is not checked again); NULL
 * validates m first. Mapping failure: GENERAL_FAILURE "<what>: cannot map fd N: <strerror>".
 * The caller must md__mapping_release it. c may be NULL (map without caching). */
md_status md__pool_acquire(md__pool_cache *c, const md_memory *m, md__pool_use use,
                           const char *what, const md__pool_plan *plan, md__mapping *out);
void md__mapping_release(md__mapping *m);
/* How many hold the mapping m holds (tests and diagnostics). */
uint32_t md__mapping_holders(const md__mapping *m);

/* Counters for tests: mappings created (mmap calls) and currently cached. */
uint64_t md__pool_cache_maps(const md__pool_cache *c);
uint32_t md__pool_cache_size(const md__pool_cache *c);

#endif
