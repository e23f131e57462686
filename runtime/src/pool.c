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

#include "error.h"
#include "scope_int.h"

#define PROT_RW ((uint32_t)(PROT_READ | PROT_WRITE))

typedef md__pool_plan plan;

typedef struct key {
  dev_t dev;
  ino_t ino;
  uint64_t offset, size;
  uint32_t prot;
  md_memory_kind kind;
} key;

typedef struct entry {
  key k;
  md__mapping map;         /* the cache's copy; map.scope is open and owned by the entry */
  struct entry *prev, *next;
} entry;

struct md__pool_cache {
  pthread_mutex_t lock;    /* guards the list; never held across mmap */
  entry *head, *tail;      /* most recently used first */
  uint32_t max_idle;
  _Atomic uint32_t count;  /* written under lock, read by md__pool_cache_size without it */
  _Atomic uint64_t maps;
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
    if (errno == EBADF) return md__fail(MD_INVALID_ARGUMENT, "%s: fd %d is not open", what, m->fd);
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

static void unlink_entry(md__pool_cache *c, entry *e) {
  if (e->prev) e->prev->next = e->next; else c->head = e->next;
  if (e->next) e->next->prev = e->prev; else c->tail = e->prev;
  e->prev = e->next = NULL;
  atomic_store_explicit(&c->count, atomic_load_explicit(&c->count, memory_order_relaxed) - 1,
                        memory_order_relaxed);
}

static void push_front(md__pool_cache *c, entry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e; else c->tail = e;
  c->head = e;
  atomic_store_explicit(&c->count, atomic_load_explicit(&c->count, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static entry *find(md__pool_cache *c, const key *k) {
  for (entry *e = c->head; e; e = e->next)
    if (e->k.dev == k->dev && e->k.ino == k->ino && e->k.offset == k->offset &&
        e->k.size == k->size && e->k.prot == k->prot && e->k.kind == k->kind)
      return e;
  return NULL;
}

/* Drops entries (already unlinked, chained by next): deferred close, so users that acquired
 * them before they were unlinked keep their mapping until they release it. */
static void drop_entries(entry *e) {
  while (e) {
    entry *next = e->next;
    md_scope_close_deferred(e->map.scope);
    free(e);
    e = next;
  }
}

md_status md__pool_cache_create(uint32_t max_idle, md__pool_cache **out) {
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "pool cache: out is NULL");
  md__pool_cache *c = calloc(1, sizeof *c);
  if (!c) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool cache: out of memory");
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool cache: cannot create a mutex");
  }
  c->max_idle = max_idle;
  *out = c;
  return MD_NONE;
}

void md__pool_cache_destroy(md__pool_cache *c) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  entry *all = c->head;
  c->head = c->tail = NULL;
  atomic_store_explicit(&c->count, 0, memory_order_relaxed);
  pthread_mutex_unlock(&c->lock);
  drop_entries(all);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* Acquires e's scope. Called under c->lock with e still linked, so eviction cannot have closed
 * it: the acquire can only fail on the users limit. */
static md_status take(entry *e, const char *what, md__mapping *out) {
  md_status st = md_scope_acquire(e->map.scope);
  if (st != MD_NONE) return md__fail(st, "%s: %s", what, md_scope_error());
  *out = e->map;
  return MD_NONE;
}

md_status md__pool_acquire(md__pool_cache *c, const md_memory *m, md__pool_use use,
                           const char *what, const md__pool_plan *validated, md__mapping *out) {
  if (!what) what = "pool";
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "%s: out is NULL", what);
  plan p;
  md_status st = MD_NONE;
  if (validated) p = *validated;
  else if ((st = check(m, use, what, &p)) != MD_NONE) return st;
  int err = access_errno(m->fd, m->prot);
  if (err) return md__fail(MD_GENERAL_FAILURE, "%s: cannot map fd %d: %s", what, m->fd,
                           strerror(err));

  if (!c) {
    /* Uncached: the caller's release is the last one, and frees the mapping. */
    md__mapping fresh;
    if ((st = map_new(NULL, m, &p, what, &fresh)) != MD_NONE) return st;
    md_scope_acquire(fresh.scope);   /* cannot fail: new, open, unshared */
    md_scope_close_deferred(fresh.scope);
    *out = fresh;
    return MD_NONE;
  }

  key k = {.dev = p.st.st_dev, .ino = p.st.st_ino, .offset = p.offset, .size = p.size,
           .prot = m->prot, .kind = m->kind};
  pthread_mutex_lock(&c->lock);
  entry *e = find(c, &k);
  if (e) {
    unlink_entry(c, e);
    push_front(c, e);
    st = take(e, what, out);
    pthread_mutex_unlock(&c->lock);
    return st;
  }
  pthread_mutex_unlock(&c->lock);

  /* Miss: map without the lock (mmap can be slow and other pools of this client should not
   * wait on it), then insert unless another thread inserted the same key meanwhile. */
  entry *fresh = calloc(1, sizeof *fresh);
  if (!fresh) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "%s: out of memory", what);
  if ((st = map_new(c, m, &p, what, &fresh->map)) != MD_NONE) {
    free(fresh);
    return st;
  }
  fresh->k = k;

  entry *evicted = NULL;
  pthread_mutex_lock(&c->lock);
  e = find(c, &k);
  if (e) {
    unlink_entry(c, e);
    push_front(c, e);
    st = take(e, what, out);
    pthread_mutex_unlock(&c->lock);
    md_scope_close(fresh->map.scope);   /* never shared, no users: frees now */
    free(fresh);
    return st;
  }
  push_front(c, fresh);
  st = take(fresh, what, out);   /* before eviction, so max_idle 0 still hands it out */
  while (atomic_load_explicit(&c->count, memory_order_relaxed) > c->max_idle) {
    entry *victim = c->tail;
    unlink_entry(c, victim);
    victim->next = evicted;
    evicted = victim;
  }
  pthread_mutex_unlock(&c->lock);
  drop_entries(evicted);
  return st;
}

void md__mapping_release(md__mapping *m) {
  if (!m || !m->scope) return;
  md_scope *s = m->scope;
  /* Cleared first: a second release of the same md__mapping is a no-op, not an underflow of a
   * scope that may be freed by the first. */
  *m = (md__mapping){0};
  md_scope_release(s);
}

uint64_t md__pool_cache_maps(const md__pool_cache *c) {
  return c ? atomic_load_explicit(&((md__pool_cache *)c)->maps, memory_order_relaxed) : 0;
}

uint32_t md__pool_cache_size(const md__pool_cache *c) {
  return c ? atomic_load_explicit(&((md__pool_cache *)c)->count, memory_order_relaxed) : 0;
}
