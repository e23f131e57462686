/* hip_pool.c - the hip backend's caching size-class pool over device reservations (see
 * hip_pool.h for the design). */
#include "hip_pool.h"

#include "md/backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CLASSES 224u

typedef struct slab {
  uint64_t base;             /* 0: a dead entry, reusable */
  uint64_t bytes;
  uint32_t cls;
  uint32_t n_blocks, n_free;
} slab;

typedef struct free_ent {
  uint64_t addr;
  uint32_t slab;
} free_ent;

typedef struct free_list {   /* cap >= blocks: every block of the class fits, all freed */
  free_ent *v;
  uint32_t n, cap;
  uint64_t blocks;           /* blocks of this class in live slabs */
} free_list;

typedef struct map_ent {     /* a live block: addr -> slab; addr 0 is an empty slot */
  uint64_t addr;
  uint64_t bytes;            /* requested: what the block is zero-filled and bounded to */
  uint32_t slab;
} map_ent;

struct md__hpool {
  pthread_mutex_t lock;
  md__hpool_ops ops;
  uint64_t limit;
  slab *slabs;
  uint32_t n_slabs, cap_slabs;
  free_list fl[N_CLASSES];
  map_ent *map;
  uint64_t map_cap, map_n;   /* cap: a power of two */
  md__hpool_stats st;
};

/* ---- size classes ---- */

/* Class index and size of a request; UINT32_MAX when it has none. */
static uint32_t class_of(uint64_t n, uint64_t *size) {
  if (n == 0) n = 1;
  if (n <= 1024) {
    uint64_t c = (n + MD__HPOOL_GRAIN - 1) / MD__HPOOL_GRAIN - 1;
    *size = (c + 1) * MD__HPOOL_GRAIN;
    return (uint32_t)c;
  }
  uint32_t e = 63u - (uint32_t)__builtin_clzll(n - 1); /* 2^e < n <= 2^(e+1), e >= 10 */
  if (e >= 62) return UINT32_MAX;
  uint64_t step = UINT64_C(1) << (e - 2);
  uint64_t sub = (n - 1 - (UINT64_C(1) << e)) >> (e - 2); /* 0..3 */
  *size = (UINT64_C(1) << e) + (sub + 1) * step;
  return 4u + (e - 10u) * 4u + (uint32_t)sub;
}

uint64_t md__hpool_class_size(uint64_t bytes) {
  uint64_t size = 0;
  return class_of(bytes, &size) == UINT32_MAX ? 0 : size;
}

/* ---- the live-block map: open addressing, linear probing, backward-shift deletion ---- */

static uint64_t hash_addr(uint64_t a) {
  a ^= a >> 33;
  a *= UINT64_C(0xff51afd7ed558ccd);
  a ^= a >> 33;
  return a;
}

static map_ent *map_find(md__hpool *p, uint64_t addr) {
  if (!p->map_cap) return NULL;
  uint64_t m = p->map_cap - 1;
  for (uint64_t i = hash_addr(addr) & m;; i = (i + 1) & m) {
    if (p->map[i].addr == addr) return &p->map[i];
    if (p->map[i].addr == 0) return NULL;
  }
}

static void map_put_nogrow(map_ent *map, uint64_t cap, map_ent e) {
  uint64_t m = cap - 1, i = hash_addr(e.addr) & m;
  while (map[i].addr) i = (i + 1) & m;
  map[i] = e;
}

/* 0, or -1 when the map cannot grow (host out of memory). */
static int map_put(md__hpool *p, map_ent e) {
  if ((p->map_n + 1) * 2 > p->map_cap) {
    uint64_t cap = p->map_cap ? p->map_cap * 2 : 64;
    map_ent *m = calloc(cap, sizeof *m);
    if (!m) return -1;
    for (uint64_t i = 0; i < p->map_cap; i++)
      if (p->map[i].addr) map_put_nogrow(m, cap, p->map[i]);
    free(p->map);
    p->map = m;
    p->map_cap = cap;
  }
  map_put_nogrow(p->map, p->map_cap, e);
  p->map_n++;
  return 0;
}

static void map_del(md__hpool *p, map_ent *e) {
  uint64_t m = p->map_cap - 1, i = (uint64_t)(e - p->map), j = i;
  p->map[i].addr = 0;
  p->map_n--;
  for (;;) {
    j = (j + 1) & m;
    if (p->map[j].addr == 0) return;
    uint64_t k = hash_addr(p->map[j].addr) & m; /* home slot of the entry at j */
    /* It may move to the hole at i unless its home lies cyclically in (i, j]. */
    if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
      p->map[i] = p->map[j];
      p->map[j].addr = 0;
      i = j;
    }
  }
}

/* ---- free lists ---- */

/* Room for `total` entries; -1 when the host is out of memory (or total does not fit). */
static int fl_reserve(free_list *f, uint64_t total) {
  if (total <= f->cap) return 0;
  if (total > UINT32_MAX) return -1;
  uint64_t cap = f->cap ? f->cap : 16;
  while (cap < total) cap *= 2;
  if (cap > UINT32_MAX) cap = UINT32_MAX;
  free_ent *v = realloc(f->v, (size_t)cap * sizeof *v);
  if (!v) return -1;
  f->v = v;
  f->cap = (uint32_t)cap;
  return 0;
}

/* ---- pool ---- */

md__hpool *md__hpool_create(const md__hpool_ops *ops, uint64_t limit) {
  md__hpool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->lock, NULL);
  p->ops = *ops;
  p->limit = limit;
  return p;
}

void md__hpool_destroy(md__hpool *p) {
  if (!p) return;
  for (uint32_t i = 0; i < p->n_slabs; i++)
    if (p->slabs[i].base) p->ops.release(p->ops.ctx, p->slabs[i].base);
  for (uint32_t c = 0; c < N_CLASSES; c++) free(p->fl[c].v);
  free(p->slabs);
  free(p->map);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static void slab_release(md__hpool *p, uint32_t si) {
  slab *s = &p->slabs[si];
  free_list *f = &p->fl[s->cls];
  uint32_t w = 0;
  for (uint32_t r = 0; r < f->n; r++)
    if (f->v[r].slab != si) f->v[w++] = f->v[r];
  f->n = w;
  f->blocks -= s->n_blocks;
  p->ops.release(p->ops.ctx, s->base);
  p->st.releases++;
  p->st.reserved -= s->bytes;
  s->base = 0;
}

static uint64_t trim_locked(md__hpool *p) {
  uint64_t freed = 0;
  for (uint32_t i = 0; i < p->n_slabs; i++) {
    slab *s = &p->slabs[i];
    if (s->base && s->n_free == s->n_blocks) {
      freed += s->bytes;
      slab_release(p, i);
    }
  }
  return freed;
}

uint64_t md__hpool_trim(md__hpool *p) {
  pthread_mutex_lock(&p->lock);
  uint64_t n = trim_locked(p);
  pthread_mutex_unlock(&p->lock);
  return n;
}

/* A slab entry for a new reservation; UINT32_MAX when the table cannot grow. */
static uint32_t slab_slot(md__hpool *p) {
  for (uint32_t i = 0; i < p->n_slabs; i++)
    if (!p->slabs[i].base) return i;
  if (p->n_slabs == p->cap_slabs) {
    uint32_t cap = p->cap_slabs ? p->cap_slabs * 2 : 16;
    slab *v = realloc(p->slabs, cap * sizeof *v);
    if (!v) return UINT32_MAX;
    p->slabs = v;
    p->cap_slabs = cap;
  }
  p->slabs[p->n_slabs] = (slab){0};
  return p->n_slabs++;
}

/* Reserves a slab for class cls (block size `size`) and puts its blocks on the free list. */
static md_status grow(md__hpool *p, uint32_t cls, uint64_t size, char *err, size_t errlen) {
  uint64_t bytes = size, room = p->limit - p->st.reserved;
  if (size <= MD__HPOOL_SMALL_MAX) {
    bytes = MD__HPOOL_SLAB / size * size;
    /* Near the limit a small class takes a smaller slab rather than failing. */
    if (bytes > room) {
      trim_locked(p);
      room = p->limit - p->st.reserved;
    }
    if (bytes > room) bytes = room / size * size;
    if (bytes == 0) bytes = size;
  }
  if (bytes > room) {
    trim_locked(p);
    room = p->limit - p->st.reserved;
    if (bytes > room)
      return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT,
                  "%" PRIu64 " bytes (class %" PRIu64 "): %" PRIu64 " of the limit's %" PRIu64
                  " bytes are in use", size, size, p->st.reserved, p->limit);
  }
  uint64_t n_blocks64 = bytes / size;
  if (n_blocks64 > UINT32_MAX) {
    n_blocks64 = UINT32_MAX;
    bytes = n_blocks64 * size;
  }
  uint32_t n_blocks = (uint32_t)n_blocks64;
  uint32_t si = slab_slot(p);
  /* The free list must take every block of the class at once (all freed), not only this slab's. */
  if (si == UINT32_MAX || fl_reserve(&p->fl[cls], p->fl[cls].blocks + n_blocks) != 0)
    return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool metadata: host out of memory");
  uint64_t base = 0;
  md_status st = p->ops.reserve(p->ops.ctx, bytes, &base, err, errlen);
  if (st == MD_RESOURCE_EXHAUSTED_TRANSIENT && trim_locked(p) > 0)
    st = p->ops.reserve(p->ops.ctx, bytes, &base, err, errlen);
  if (st != MD_NONE) {
    if (si == p->n_slabs - 1) p->n_slabs--;  /* the slot stays dead otherwise */
    else p->slabs[si].base = 0;
    return st;
  }
  p->st.reserves++;
  p->st.reserved += bytes;
  p->slabs[si] = (slab){.base = base, .bytes = bytes, .cls = cls, .n_blocks = n_blocks, .n_free = n_blocks};
  free_list *f = &p->fl[cls];
  f->blocks += n_blocks;
  /* Highest address first on the list, so blocks are handed out in address order. */
  for (uint32_t b = n_blocks; b-- > 0;) f->v[f->n++] = (free_ent){.addr = base + (uint64_t)b * size, .slab = si};
  return MD_NONE;
}

md_status md__hpool_alloc(md__hpool *p, uint64_t bytes, uint64_t *addr, char *err, size_t errlen) {
  uint64_t size = 0;
  uint32_t cls = class_of(bytes, &size);
  if (cls == UINT32_MAX || size > p->limit)
    return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_PERSISTENT,
                "%" PRIu64 " bytes: more than the device's limit of %" PRIu64 " bytes", bytes, p->limit);
  pthread_mutex_lock(&p->lock);
  md_status st = MD_NONE;
  if (p->fl[cls].n == 0) st = grow(p, cls, size, err, errlen);
  if (st == MD_NONE) {
    free_list *f = &p->fl[cls];
    free_ent e = f->v[f->n - 1];
    if (map_put(p, (map_ent){.addr = e.addr, .bytes = bytes, .slab = e.slab}) != 0) {
      st = md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "pool metadata: host out of memory");
    } else {
      f->n--;
      p->slabs[e.slab].n_free--;
      p->st.allocs++;
      p->st.bytes_live += size;
      if (p->st.bytes_live > p->st.bytes_peak) p->st.bytes_peak = p->st.bytes_live;
      *addr = e.addr;
    }
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

int md__hpool_free(md__hpool *p, uint64_t addr) {
  pthread_mutex_lock(&p->lock);
  map_ent *e = addr ? map_find(p, addr) : NULL;
  if (!e) {
    pthread_mutex_unlock(&p->lock);
    return -1;
  }
  uint32_t si = e->slab;
  slab *s = &p->slabs[si];
  map_del(p, e);
  /* The free list has room: grow() keeps it as long as the class has blocks. */
  free_list *f = &p->fl[s->cls];
  f->v[f->n++] = (free_ent){.addr = addr, .slab = si};
  s->n_free++;
  p->st.frees++;
  p->st.bytes_live -= s->bytes / s->n_blocks;
  pthread_mutex_unlock(&p->lock);
  return 0;
}

uint64_t md__hpool_block_size(md__hpool *p, uint64_t addr) {
  pthread_mutex_lock(&p->lock);
  map_ent *e = addr ? map_find(p, addr) : NULL;
  uint64_t n = e ? e->bytes : 0;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void md__hpool_stats_get(md__hpool *p, md__hpool_stats *out) {
  pthread_mutex_lock(&p->lock);
  *out = p->st;
  pthread_mutex_unlock(&p->lock);
}
