/* pool.c - validating memory pools and caching their mappings per client (pool.h, SPEC 2).
 *
 * Decisions where SPEC is silent (for docs/pools-and-scopes.md):
 *   - Order of checks: memory non-NULL, kind known, kind allowed for the use, fd >= 0, fd open
 *     (fstat), prot, then the kind's geometry and the range inside the file. The first rule
 *     broken is the one reported.
 *   - prot is in the system's PROT_READ (1) / PROT_WRITE (2) bits: non-zero, nothing else.
 *   - ASHMEM (emulated by a memfd): offset must be 0; 0 < size <= file size (a pool may cover a
 *     prefix of the region; the HAL's hidl_memory carries the region's size, which we do not
 *     second-guess as long as every byte of it exists).
 *   - MMAP_FD: any offset (page alignment is handled when mapping); 0 < size and
 *     offset + size <= file size, overflow-checked.
 *   - HARDWARE_BUFFER_BLOB (emulated: fd is a memfd holding the blob's bytes): format must be
 *     MD__HWB_FORMAT_BLOB, width > 0, height == 1, layers == 1, size == width, offset 0,
 *     width <= file size. Logical size = width.
 *   - HARDWARE_BUFFER (non-BLOB, emulated the same way): only for MD__POOL_IO; format must be one
 *     of 0x1 RGBA_8888 (4 B/pixel), 0x3 RGB_888 (3 B), 0x38 R_8 (1 B) (other formats:
 *     INVALID_ARGUMENT "not supported"); width, height, layers > 0; offset and size must be 0
 *     (its size comes from its geometry, and its logical size, seen by request arguments, is 0);
 *     width*height*layers*bpp bytes (overflow-checked) must fit the file and are what is mapped.
 *   - width/height/layers/format are ignored for ASHMEM and MMAP_FD.
 *   - The file size is fstat's st_size, for any kind of file: an fd whose st_size does not
 *     describe its mappable bytes (a pipe, most character devices) fails the range check.
 *   - fstat failing with other than EBADF (EIO, EOVERFLOW): GENERAL_FAILURE, the driver cannot
 *     use the pool, it is not a malformed argument.
 *   - Mapping (md__pool_acquire) also checks the fd's access mode and memfd seals against prot
 *     on every acquire, cache hit or not, so a cached mapping never grants more than a fresh
 *     mmap of this fd would: an O_RDONLY fd with PROT_WRITE, or a write-sealed memfd, fails
 *     GENERAL_FAILURE "<what>: cannot map fd N: <strerror of the errno mmap gives>".
 *   - The cache bounds the number of entries it keeps, in use or not (max_idle): inserting one
 *     more evicts the least recently used. max_idle 0 caches nothing: every acquire maps, and the
 *     mapping goes away at its release.
 *   - md__pool_cache_destroy must not race md__pool_acquire on the same cache (the client's
 *     handle is dead for new calls by then); mappings acquired before it stay valid.
 *   - Not handled: a client that truncates a pool's file while the driver reads the mapping
 *     makes the access SIGBUS. Validation on every acquire catches a file that shrank between
 *     uses, not during one (a fix: require F_SEAL_SHRINK on memfds, or recover from SIGBUS).
 *   - The cache key is the file's identity (st_dev, st_ino) plus offset, mapped size, prot and
 *     kind. An inode number cannot be reused while an entry lives, because the entry's mmap
 *     holds a reference to the file; so a key never names two files. */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "mutant.h"
#include "error.h"
#include "refcount.h"
#include "scope_int.h"

#define PROT_RW ((uint32_t)(PROT_READ | PROT_WRITE))

typedef md__pool_plan plan;

/* A cache entry's state word: EMPTY (no mapping), or the number of holders, with CLOSING set
 * once the entry is evicted or its cache destroyed (no new holders; the holder that takes it
 * to CLOSING|0 closes the mapping and empties the entry). */
#define ST_EMPTY 0x40000000u
#define ST_CLOSING 0x80000000u
#define ST_COUNT 0x3FFFFFFFu

/* One mapping of the cache, found by a lookup that takes no lock: the lookup reads seq, compares
 * the key, becomes a holder (state), and reads seq again; an entry rewritten meanwhile (seq
 * moved) is let go and not used. The key and the bookkeeping fields are atomics because the
 * lookup reads them while a miss may be rewriting the entry; the mapping fields are written
 * while seq is odd and published by its release store, and not written again while the entry
 * has holders. */
typedef struct entry {
  _Alignas(64) _Atomic uint32_t seq;   /* even: stable; odd: being rewritten (under the lock) */
  _Atomic uint32_t state;
  _Atomic int verified_fd;   /* the fd number whose access mode and seals were checked for prot */
  _Atomic uint32_t prot, kind;
  _Atomic uint64_t dev, ino, offset, size;
  _Atomic uint64_t used;     /* when it was last hit (monotonic ns): least recently used goes */
  md_scope *scope;           /* owns the mmap; closed when the entry empties */
  uint8_t *base;
  uint64_t map_size;
  md__pool_cache *cache;
} entry;

struct md__pool_cache {
  pthread_mutex_t lock;      /* misses: choosing and rewriting an entry; never held across mmap */
  uint32_t max_idle;         /* live entries kept (0: caches nothing) */
  uint32_t cap;              /* entries: twice max_idle, so that evicted ones still in use leave
                                room for their successors */
  _Atomic uint32_t used;     /* entries [0, used) were ever taken; the rest is untouched memory
                                (a client that maps two pools pays for two, in its open, its
                                lookups and its close: not for cap). Grows under lock; read
                                with acquire, after the entry it publishes is initialized */
  _Atomic uint32_t refs;     /* 1 for the cache until destroyed, +1 per entry that is not EMPTY */
  _Atomic uint64_t maps;
  entry *e;                  /* cap entries, cache-line aligned */
};

static const char *kind_name(md_memory_kind k) {
  switch (k) {
    case MD_MEM_ASHMEM: return "ASHMEM";
    case MD_MEM_MMAP_FD: return "MMAP_FD";
    case MD_MEM_HARDWARE_BUFFER_BLOB: return "HARDWARE_BUFFER_BLOB";
    case MD_MEM_HARDWARE_BUFFER: return "HARDWARE_BUFFER";
  }
  return "?";
}

static const char *use_name(md__pool_use use) {
  switch (use) {
    case MD__POOL_CONSTANT: return "a model constant pool";
    case MD__POOL_IO: return "an execution input or output";
    case MD__POOL_COPY: return "copy_to/copy_from memory";
  }
  return "this use";
}

/* Bytes per pixel of the non-BLOB formats we emulate (AHARDWAREBUFFER_FORMAT_*), 0 if unknown. */
static uint32_t hwb_bpp(uint32_t format) {
  switch (format) {
    case 0x1u: return 4;   /* R8G8B8A8_UNORM */
    case 0x3u: return 3;   /* R8G8B8_UNORM */
    case 0x38u: return 1;  /* R8_UNORM */
  }
  return 0;
}

/* offset + size must lie inside the file. */
static md_status check_range(const char *what, int fd, const struct stat *st, uint64_t offset,
                             uint64_t size) {
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end))
    return md__fail(MD_INVALID_ARGUMENT, "%s: offset %llu + size %llu overflows", what,
                    (unsigned long long)offset, (unsigned long long)size);
  if (st->st_size < 0 || end > (uint64_t)st->st_size)
    return md__fail(MD_INVALID_ARGUMENT,
                    "%s: offset %llu + size %llu is past the end of fd %d (%lld bytes)", what,
                    (unsigned long long)offset, (unsigned long long)size, fd,
                    (long long)st->st_size);
  return MD_NONE;
}

static md_status check_blob(const md_memory *m, const char *what, plan *p) {
  if (m->format != MD__HWB_FORMAT_BLOB)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB format 0x%x must be BLOB (0x%x)",
                    what, m->format, MD__HWB_FORMAT_BLOB);
  if (m->width == 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB width 0 must be > 0", what);
  if (m->height != 1)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB height %u must be 1", what,
                    m->height);
  if (m->layers != 1)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB layers %u must be 1", what,
                    m->layers);
  if (m->size != m->width)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB size %llu must equal width %u",
                    what, (unsigned long long)m->size, m->width);
  if (m->offset != 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER_BLOB offset %llu must be 0", what,
                    (unsigned long long)m->offset);
  p->offset = 0;
  p->size = p->logical = m->width;
  return check_range(what, m->fd, &p->st, 0, m->width);
}

static md_status check_hwb(const md_memory *m, const char *what, plan *p) {
  if (m->format == MD__HWB_FORMAT_BLOB)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER format 0x%x is BLOB; use "
                    "HARDWARE_BUFFER_BLOB", what, m->format);
  uint32_t bpp = hwb_bpp(m->format);
  if (bpp == 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER format 0x%x is not supported "
                    "(known: 0x1 RGBA_8888, 0x3 RGB_888, 0x38 R_8)", what, m->format);
  if (m->width == 0 || m->height == 0 || m->layers == 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER width %u, height %u and layers %u "
                    "must all be > 0", what, m->width, m->height, m->layers);
  if (m->offset != 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER offset %llu must be 0", what,
                    (unsigned long long)m->offset);
  if (m->size != 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER size %llu must be 0 (its size "
                    "comes from its geometry)", what, (unsigned long long)m->size);
  uint64_t bytes;
  if (__builtin_mul_overflow((uint64_t)m->width, (uint64_t)m->height, &bytes) ||
      __builtin_mul_overflow(bytes, (uint64_t)m->layers, &bytes) ||
      __builtin_mul_overflow(bytes, (uint64_t)bpp, &bytes))
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER %ux%ux%u of format 0x%x overflows",
                    what, m->width, m->height, m->layers, m->format);
  if (p->st.st_size < 0 || bytes > (uint64_t)p->st.st_size)
    return md__fail(MD_INVALID_ARGUMENT, "%s: HARDWARE_BUFFER %ux%ux%u of format 0x%x needs %llu "
                    "bytes, past the end of fd %d (%lld bytes)", what, m->width, m->height,
                    m->layers, m->format, (unsigned long long)bytes, m->fd,
                    (long long)p->st.st_size);
  p->offset = 0;
  p->size = bytes;
  p->logical = 0;
  return MD_NONE;
}

static md_status check(const md_memory *m, md__pool_use use, const char *what, plan *p) {
  if (!m) return md__fail(MD_INVALID_ARGUMENT, "%s: memory is NULL", what);
  switch (m->kind) {
    case MD_MEM_ASHMEM: case MD_MEM_MMAP_FD: case MD_MEM_HARDWARE_BUFFER_BLOB:
    case MD_MEM_HARDWARE_BUFFER: break;
    default:
      return md__fail(MD_INVALID_ARGUMENT, "%s: unknown memory kind %d", what, (int)m->kind);
  }
  if (m->kind == MD_MEM_HARDWARE_BUFFER && use != MD__POOL_IO)
    return md__fail(MD_INVALID_ARGUMENT, "%s: non-BLOB HARDWARE_BUFFER (format 0x%x) is allowed "
                    "only as an execution input or output, not as %s", what, m->format,
                    use_name(use));
  if (m->fd < 0) return md__fail(MD_INVALID_ARGUMENT, "%s: fd %d is negative", what, m->fd);
  if (fstat(m->fd, &p->st) != 0) {
    /* (Mutant copy_closed_fd_general_failure: the copy paths report any fstat error as a system error.) */
    if (errno == EBADF && !(MD_MUTANT(copy_closed_fd_general_failure) && use == MD__POOL_COPY))
      return md__fail(MD_INVALID_ARGUMENT, "%s: fd %d is not open", what, m->fd);
    return md__fail(MD_GENERAL_FAILURE, "%s: cannot stat fd %d: %s", what, m->fd, strerror(errno));
  }
  if (m->prot == 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: prot 0 grants no access (need PROT_READ and/or "
                    "PROT_WRITE)", what);
  if (m->prot & ~PROT_RW)
    return md__fail(MD_INVALID_ARGUMENT, "%s: prot 0x%x has bits other than "
                    "PROT_READ|PROT_WRITE (0x%x)", what, m->prot, PROT_RW);
  switch (m->kind) {
    case MD_MEM_HARDWARE_BUFFER_BLOB: return check_blob(m, what, p);
    case MD_MEM_HARDWARE_BUFFER: return check_hwb(m, what, p);
    case MD_MEM_ASHMEM:
      /* SPEC 1: an ASHMEM pool is a whole memfd: offset 0 and the file's size. */
      if (m->offset != 0)
        return md__fail(MD_INVALID_ARGUMENT, "%s: ASHMEM offset %llu must be 0", what,
                        (unsigned long long)m->offset);
      if (m->size != 0 && p->st.st_size >= 0 && m->size < (uint64_t)p->st.st_size)
        return md__fail(MD_INVALID_ARGUMENT, "%s: ASHMEM size %llu must be the whole file (%lld bytes)",
                        what, (unsigned long long)m->size, (long long)p->st.st_size);
      break;
    case MD_MEM_MMAP_FD: break;
  }
  if (m->size == 0)
    return md__fail(MD_INVALID_ARGUMENT, "%s: %s size 0 (a pool must have at least one byte)",
                    what, kind_name(m->kind));
  p->offset = m->offset;
  p->size = p->logical = m->size;
  return check_range(what, m->fd, &p->st, m->offset, m->size);
}

md_status md__pool_validate(const md_memory *m, md__pool_use use, const char *what,
                            md__pool_plan *out) {
  plan p;
  md_status st = check(m, use, what ? what : "pool", &p);
  if (st == MD_NONE && out) *out = p;
  return st;
}

/* The errno a MAP_SHARED mmap of fd with prot would fail with because of how fd was opened or
 * sealed, or 0. Checked on cache hits too: the cached mapping came from another fd. */
static int access_errno(int fd, uint32_t prot) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return errno;
  if (fl & O_PATH) return EBADF;
  if ((fl & O_ACCMODE) == O_WRONLY) return EACCES;
  if ((prot & PROT_WRITE) && (fl & O_ACCMODE) != O_RDWR) return EACCES;
  if (!(prot & PROT_WRITE)) return 0;   /* seals only forbid writable mappings */
  int seals = fcntl(fd, F_GET_SEALS);   /* EINVAL for files that are not memfds: no seals */
  if (seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) return EPERM;
  return 0;
}

/* Maps p's range of m->fd into a new shared scope. */
static md_status map_new(md__pool_cache *c, const md_memory *m, const plan *p, const char *what,
                         md__mapping *out) {
  md_scope *s;
  if (md_scope_open(MD_SCOPE_SHARED, &s) != MD_NONE)
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "%s: %s", what, md_scope_error());
  void *addr;
  int err;
  md_status st = md__scope_map(s, m->fd, p->offset, p->size, m->prot, &addr, &err);
  if (st != MD_NONE) {
    md_scope_close(s);
    if (err) return md__fail(MD_GENERAL_FAILURE, "%s: cannot map fd %d: %s", what, m->fd,
                             strerror(err));
    return md__fail(st, "%s: %s", what, md_scope_error());
  }
  if (c) atomic_fetch_add_explicit(&c->maps, 1, memory_order_relaxed);
  *out = (md__mapping){.scope = s, .base = addr, .size = p->size, .prot = m->prot};
  return MD_NONE;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cache_put(md__pool_cache *c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  pthread_mutex_destroy(&c->lock);
  free(c->e);
  free(c);
}

/* The entry is CLOSING with no holder left, and this thread made it so: nobody else can reach
 * its mapping. Closes it, empties the entry, and drops the entry's reference on its cache
 * (which may free the cache, when it was destroyed). */
static void entry_close(entry *e) {
  md__pool_cache *c = e->cache;
  md_scope *s = e->scope;
  e->scope = NULL;
  md_scope_close(s);   /* no scope user: the entry's holders were counted here, in state */
  atomic_store_explicit(&e->state, ST_EMPTY, memory_order_release);
  cache_put(c);
}

/* Becomes a holder of e unless it is EMPTY or CLOSING. */
static bool entry_hold(entry *e) {
  uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
  do {
    if (st & (ST_EMPTY | ST_CLOSING) || (st & ST_COUNT) == ST_COUNT) return false;
  } while (!atomic_compare_exchange_weak_explicit(&e->state, &st, st + 1, memory_order_acquire,
                                                  memory_order_relaxed));
  return true;
}

/* Lets go of e (a holder's). The last holder of a CLOSING entry closes it. */
static void entry_release(entry *e) {
  uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
  do {
    if ((st & ST_COUNT) == 0 || (st & ST_EMPTY)) {
      atomic_fetch_add_explicit(&md__refcount_underflows, 1, memory_order_relaxed);
      return;
    }
  } while (!atomic_compare_exchange_weak_explicit(&e->state, &st, st - 1, memory_order_acq_rel,
                                                  memory_order_relaxed));
  if (st - 1 == ST_CLOSING) entry_close(e);
}

/* Marks e CLOSING (no new holders); closes it now when it has none. */
static void entry_evict(entry *e) {
  uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
  do {
    if (st & (ST_EMPTY | ST_CLOSING)) return;
  } while (!atomic_compare_exchange_weak_explicit(&e->state, &st, st | ST_CLOSING, memory_order_acq_rel,
                                                  memory_order_relaxed));
  if ((st & ST_COUNT) == 0) entry_close(e);
}

static bool key_is(const entry *e, const md__pool_plan *p, const md_memory *m) {
  return atomic_load_explicit(&e->dev, memory_order_relaxed) == (uint64_t)p->st.st_dev &&
         atomic_load_explicit(&e->ino, memory_order_relaxed) == (uint64_t)p->st.st_ino &&
         atomic_load_explicit(&e->offset, memory_order_relaxed) == p->offset &&
         atomic_load_explicit(&e->size, memory_order_relaxed) == p->size &&
         atomic_load_explicit(&e->prot, memory_order_relaxed) == m->prot &&
         atomic_load_explicit(&e->kind, memory_order_relaxed) == (uint32_t)m->kind;
}

/* A hit: e holds the key and this thread is now one of its holders. Lock-free. */
static entry *lookup(md__pool_cache *c, const md__pool_plan *p, const md_memory *m) {
  uint32_t n = atomic_load_explicit(&c->used, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    entry *e = &c->e[i];
    uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
    if ((s1 & 1) || (atomic_load_explicit(&e->state, memory_order_relaxed) & (ST_EMPTY | ST_CLOSING)) ||
        !key_is(e, p, m) || !entry_hold(e))
      continue;
    if (atomic_load_explicit(&e->seq, memory_order_acquire) != s1 || !key_is(e, p, m)) {
      entry_release(e);   /* rewritten for another pool between the compare and the hold */
      continue;
    }
    return e;
  }
  return NULL;
}

/* An entry first taken: EMPTY, no key, not yet verified for any fd. */
static void entry_init(md__pool_cache *c, entry *e) {
  memset(e, 0, sizeof *e);
  atomic_init(&e->state, ST_EMPTY);
  atomic_init(&e->verified_fd, -1);
  e->cache = c;
}

md_status md__pool_cache_create(uint32_t max_idle, md__pool_cache **out) {
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "pool cache: out is NULL");
  md__pool_cache *c = calloc(1, sizeof *c);
  if (c && max_idle) {
    c->e = aligned_alloc(64, 2 * (size_t)max_idle * sizeof *c->e);
    if (!c->e) {
      free(c);
      c = NULL;
    }
  }
  if (!c) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool cache: out of memory");
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c->e);
    free(c);
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool cache: cannot create a mutex");
  }
  c->max_idle = max_idle;
  c->cap = 2 * max_idle;
  atomic_init(&c->used, 0);   /* entries are initialized when first taken (insert_locked) */
  atomic_init(&c->refs, 1);
  *out = c;
  return MD_NONE;
}

void md__pool_cache_destroy(md__pool_cache *c) {
  if (!c) return;
  /* Every entry is evicted: mappings in use go with their last holder, who also frees the cache
   * once the last entry is empty. */
  pthread_mutex_lock(&c->lock);
  uint32_t n = atomic_load_explicit(&c->used, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) entry_evict(&c->e[i]);
  pthread_mutex_unlock(&c->lock);
  cache_put(c);
}

/* The fresh mapping `fresh` of key (p, m) into the cache: when max_idle entries are live, the
 * least recently used one is evicted first (no new holders; it goes now, or with its last holder
 * when in use); then an EMPTY entry takes the mapping. With no EMPTY entry (every one evicted but
 * still in use) the mapping stays uncached. On success *out is held through its entry; else *out
 * is the uncached mapping. Called with c->lock. */
static void insert_locked(md__pool_cache *c, const plan *p, const md_memory *m, md__mapping *fresh,
                          md__mapping *out) {
  entry *lru = NULL, *slot = NULL;
  uint64_t oldest = UINT64_MAX;
  uint32_t live = 0, n = atomic_load_explicit(&c->used, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    entry *e = &c->e[i];
    uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
    if (st & (ST_EMPTY | ST_CLOSING)) continue;
    live++;
    uint64_t used = atomic_load_explicit(&e->used, memory_order_relaxed);
    if (used < oldest) oldest = used, lru = e;
  }
  if (live >= c->max_idle && lru) entry_evict(lru);   /* empties it now when nobody holds it */
  for (uint32_t i = 0; i < n && !slot; i++)
    if (atomic_load_explicit(&c->e[i].state, memory_order_acquire) == ST_EMPTY) slot = &c->e[i];
  if (!slot && n < c->cap) {
    /* a never-used entry: initialized, then published to lock-free lookups */
    slot = &c->e[n];
    entry_init(c, slot);
    atomic_store_explicit(&c->used, n + 1, memory_order_release);
  }
  if (!slot || atomic_load_explicit(&slot->state, memory_order_acquire) != ST_EMPTY) {
    /* Uncached: the caller's release is the last one, and frees the mapping. */
    md_scope_acquire(fresh->scope);   /* cannot fail: new, open, unshared */
    md_scope_close_deferred(fresh->scope);
    *out = *fresh;
    return;
  }
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  uint32_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
  atomic_store_explicit(&slot->seq, seq + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&slot->dev, (uint64_t)p->st.st_dev, memory_order_relaxed);
  atomic_store_explicit(&slot->ino, (uint64_t)p->st.st_ino, memory_order_relaxed);
  atomic_store_explicit(&slot->offset, p->offset, memory_order_relaxed);
  atomic_store_explicit(&slot->size, p->size, memory_order_relaxed);
  atomic_store_explicit(&slot->prot, m->prot, memory_order_relaxed);
  atomic_store_explicit(&slot->kind, (uint32_t)m->kind, memory_order_relaxed);
  atomic_store_explicit(&slot->verified_fd, m->fd, memory_order_relaxed);
  atomic_store_explicit(&slot->used, now_ns(), memory_order_relaxed);
  slot->scope = fresh->scope;
  slot->base = fresh->base;
  slot->map_size = fresh->size;
  atomic_store_explicit(&slot->state, 1, memory_order_relaxed);   /* the caller is its holder */
  atomic_store_explicit(&slot->seq, seq + 2, memory_order_release);
  *out = (md__mapping){.scope = slot->scope, .base = slot->base, .size = slot->map_size, .prot = m->prot,
                       .entry = slot};
}

md_status md__pool_acquire(md__pool_cache *c, const md_memory *m, md__pool_use use,
                           const char *what, const md__pool_plan *validated, md__mapping *out) {
  if (!what) what = "pool";
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "%s: out is NULL", what);
  plan p;
  md_status st = MD_NONE;
  if (validated) p = *validated;
  else if ((st = check(m, use, what, &p)) != MD_NONE) return st;

  if (c && c->cap) {
    entry *e = lookup(c, &p, m);
    if (e) {
      /* The file is the one mapped (its identity is the key, checked by validation's fstat
       * this call). The access mode and seals belong to the fd: checked again only when this
       * fd number is not the one last checked for this entry (fd numbers are the client's,
       * and a number reused for another open of the same file is the one case this misses:
       * a cached mapping then grants what the first fd allowed). */
      if (atomic_load_explicit(&e->verified_fd, memory_order_relaxed) != m->fd) {
        int err = access_errno(m->fd, m->prot);
        if (err) {
          entry_release(e);
          return md__fail(MD_GENERAL_FAILURE, "%s: cannot map fd %d: %s", what, m->fd, strerror(err));
        }
        atomic_store_explicit(&e->verified_fd, m->fd, memory_order_relaxed);
      }
      atomic_store_explicit(&e->used, now_ns(), memory_order_relaxed);
      *out = (md__mapping){.scope = e->scope, .base = e->base, .size = e->map_size, .prot = m->prot, .entry = e};
      return MD_NONE;
    }
  }
  int err = access_errno(m->fd, m->prot);
  if (err) return md__fail(MD_GENERAL_FAILURE, "%s: cannot map fd %d: %s", what, m->fd,
                           strerror(err));
  /* Miss: map without the lock (mmap can be slow and other pools of this client should not
   * wait on it), then insert unless another thread inserted the same key meanwhile. */
  md__mapping fresh;
  if ((st = map_new(c, m, &p, what, &fresh)) != MD_NONE) return st;
  if (!c || !c->cap) {
    md_scope_acquire(fresh.scope);   /* cannot fail: new, open, unshared */
    md_scope_close_deferred(fresh.scope);
    *out = fresh;
    return MD_NONE;
  }
  pthread_mutex_lock(&c->lock);
  entry *e = lookup(c, &p, m);
  if (e) {
    pthread_mutex_unlock(&c->lock);
    md_scope_close(fresh.scope);   /* never shared, no users: frees now */
    *out = (md__mapping){.scope = e->scope, .base = e->base, .size = e->map_size, .prot = m->prot, .entry = e};
    return MD_NONE;
  }
  insert_locked(c, &p, m, &fresh, out);
  pthread_mutex_unlock(&c->lock);
  return MD_NONE;
}

void md__mapping_release(md__mapping *m) {
  if (!m || !m->scope) return;
  md_scope *s = m->scope;
  entry *e = m->entry;
  /* Cleared first: a second release of the same md__mapping is a no-op, not an underflow of a
   * scope or an entry that may be freed by the first. */
  *m = (md__mapping){0};
  if (e) entry_release(e);
  else md_scope_release(s);
}

uint32_t md__mapping_holders(const md__mapping *m) {
  if (!m || !m->scope) return 0;
  if (m->entry) return atomic_load_explicit(&((entry *)m->entry)->state, memory_order_relaxed) & ST_COUNT;
  return md_scope_users(m->scope);
}

uint64_t md__pool_cache_maps(const md__pool_cache *c) {
  return c ? atomic_load_explicit(&((md__pool_cache *)c)->maps, memory_order_relaxed) : 0;
}

uint32_t md__pool_cache_size(const md__pool_cache *c) {
  uint32_t n = 0, used = c ? atomic_load_explicit(&((md__pool_cache *)c)->used, memory_order_acquire) : 0;
  for (uint32_t i = 0; i < used; i++)
    n += !(atomic_load_explicit(&c->e[i].state, memory_order_relaxed) & (ST_EMPTY | ST_CLOSING));
  return n;
}
