/* sim_arena.c - the simulated device's address space: a bounded arena with a TLSF allocator,
 * red zones and poisoned free memory. Layout and invariants: sim_arena.h. */
#include "sim_arena.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#define G ((uint64_t)MD__ARENA_ALIGN)
#define R ((uint64_t)MD__ARENA_REDZONE)
#define SL_BITS 4u
#define SL_COUNT (1u << SL_BITS)
#define FL_MIN 8u                      /* log2(G): the smallest span */
#define FL_COUNT 33u                   /* spans up to 2^40 bytes */
#define POISON64 0xDBDBDBDBDBDBDBDBull

/* One block of the arena, free or used. Lives in host memory, never in the arena. */
typedef struct blk {
  uint64_t off;                 /* span start; for a used block also the payload start */
  uint64_t span;                /* arena bytes, a multiple of G */
  uint64_t size;                /* payload bytes of a used block; 0 when free */
  struct blk *prev, *next;      /* neighbours in address order */
  union {                       /* a block is in one of the two indexes at a time */
    struct { struct blk *fprev, *fnext; };   /* free: the list of its size class */
    struct { struct blk *l, *r; };           /* used: AVL children, keyed by off */
  };
  int32_t h;                    /* used: AVL height */
  uint8_t is_free;
  _Atomic uint8_t ready;        /* used: payload zeroed and red zone written (see alloc) */
} blk;

struct md__arena {
  pthread_rwlock_t lock;        /* metadata below; arena bytes of free blocks and red zones */
  uint8_t *base;
  uint64_t reserved, limit, tag, page;
  blk *first;                   /* the block at offset G */
  blk *root;                    /* AVL of used blocks */
  uint64_t fl_map;              /* bit f: some class (f, *) is non-empty */
  uint32_t sl_map[FL_COUNT];    /* bit s: class (f, s) is non-empty */
  blk *heads[FL_COUNT][SL_COUNT];
  uint64_t hwm;                 /* end of the highest span ever handed out: above it, zeros */
  uint64_t allocs, frees, bytes_live, bytes_peak, span_live, live_blocks, bytes_free, free_blocks;
  /* Counted on paths that hold the lock only for reading, or none. */
  _Atomic uint64_t refused_persistent, refused_transient, bad_frees, redzone_hits, poison_hits;
  pthread_mutex_t report_lock;
  char last[MD__ARENA_REPORT_MAX];
};

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* ---- reports ---------------------------------------------------------------------------- */

/* Writes the message to stderr, keeps it as the last report, and copies it to out (when
 * out && outlen). */
static void vreport(md__arena *a, char *out, size_t outlen, const char *fmt, va_list ap) {
  char msg[MD__ARENA_REPORT_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "mdc %s\n", msg);
  pthread_mutex_lock(&a->report_lock);
  memcpy(a->last, msg, sizeof msg);
  pthread_mutex_unlock(&a->report_lock);
  if (out && outlen) snprintf(out, outlen, "%s", msg);
}

static void report(md__arena *a, char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(md__arena *a, char *out, size_t outlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(a, out, outlen, fmt, ap);
  va_end(ap);
}

void md__arena_report(md__arena *a, md__arena_counter which, const char *fmt, ...) {
  _Atomic uint64_t *c = which == MD__ARENA_COUNT_BAD_FREE ? &a->bad_frees
                        : which == MD__ARENA_COUNT_POISON ? &a->poison_hits
                        : which == MD__ARENA_COUNT_REDZONE ? &a->redzone_hits
                                                            : NULL;
  if (c) atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
  va_list ap;
  va_start(ap, fmt);
  vreport(a, NULL, 0, fmt, ap);
  va_end(ap);
}

size_t md__arena_last_report(md__arena *a, char *buf, size_t len) {
  pthread_mutex_lock(&a->report_lock);
  size_t n = strlen(a->last);
  if (buf && len) snprintf(buf, len, "%s", a->last);
  pthread_mutex_unlock(&a->report_lock);
  return n;
}

/* ---- segregated free lists (TLSF) ------------------------------------------------------- */

static void mapping(uint64_t span, unsigned *fl, unsigned *sl) {
  unsigned lg = 63u - (unsigned)__builtin_clzll(span);
  *fl = lg - FL_MIN;
  *sl = (unsigned)(span >> (lg - SL_BITS)) & (SL_COUNT - 1u);
}

static void free_insert(md__arena *a, blk *b) {
  unsigned fl, sl;
  mapping(b->span, &fl, &sl);
  b->is_free = 1;
  b->size = 0;
  b->h = 0;
  b->fprev = NULL;
  b->fnext = a->heads[fl][sl];
  if (b->fnext) b->fnext->fprev = b;
  a->heads[fl][sl] = b;
  a->sl_map[fl] |= 1u << sl;
  a->fl_map |= 1ull << fl;
}

static void free_remove(md__arena *a, blk *b) {
  unsigned fl, sl;
  mapping(b->span, &fl, &sl);
  if (b->fprev) b->fprev->fnext = b->fnext;
  else a->heads[fl][sl] = b->fnext;
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
  if (!a->heads[fl][sl]) {
    a->sl_map[fl] &= ~(1u << sl);
    if (!a->sl_map[fl]) a->fl_map &= ~(1ull << fl);
  }
}

/* A free block of at least `span` bytes, or NULL. O(1) unless the only fit is a block of the
 * request's own class that is not at the head of its list (then first fit over that list). */
static blk *free_find(md__arena *a, uint64_t span) {
  unsigned fl, sl;
  mapping(span, &fl, &sl);
  if (fl >= FL_COUNT) return NULL;
  blk *own = a->heads[fl][sl];
  if (own && own->span >= span) return own;
  /* Every block of a higher class is larger than any span of this one. */
  uint32_t sm = sl + 1u < SL_COUNT ? a->sl_map[fl] & (~0u << (sl + 1u)) : 0u;
  if (sm) return a->heads[fl][__builtin_ctz(sm)];
  uint64_t fm = fl + 1u < FL_COUNT ? a->fl_map & (~0ull << (fl + 1u)) : 0u;
  if (fm) {
    unsigned f = (unsigned)__builtin_ctzll(fm);
    return a->heads[f][__builtin_ctz(a->sl_map[f])];
  }
  for (blk *b = own; b; b = b->fnext)
    if (b->span >= span) return b;
  return NULL;
}

/* The largest free span: the largest block of the highest non-empty class. */
static uint64_t largest_free(const md__arena *a) {
  if (!a->fl_map) return 0;
  unsigned f = 63u - (unsigned)__builtin_clzll(a->fl_map);
  unsigned s = 31u - (unsigned)__builtin_clz(a->sl_map[f]);
  uint64_t best = 0;
  for (const blk *b = a->heads[f][s]; b; b = b->fnext)
    if (b->span > best) best = b->span;
  return best;
}

/* ---- AVL tree of used blocks, keyed by offset ------------------------------------------- */

static int32_t height(const blk *b) { return b ? b->h : 0; }
static void fix_height(blk *b) {
  int32_t hl = height(b->l), hr = height(b->r);
  b->h = 1 + (hl > hr ? hl : hr);
}
static blk *rot_right(blk *y) {
  blk *x = y->l;
  y->l = x->r;
  x->r = y;
  fix_height(y);
  fix_height(x);
  return x;
}
static blk *rot_left(blk *x) {
  blk *y = x->r;
  x->r = y->l;
  y->l = x;
  fix_height(x);
  fix_height(y);
  return y;
}
static blk *balance(blk *n) {
  fix_height(n);
  int32_t bf = height(n->l) - height(n->r);
  if (bf > 1) {
    if (height(n->l->l) < height(n->l->r)) n->l = rot_left(n->l);
    return rot_right(n);
  }
  if (bf < -1) {
    if (height(n->r->r) < height(n->r->l)) n->r = rot_right(n->r);
    return rot_left(n);
  }
  return n;
}
static blk *avl_insert(blk *root, blk *n) {
  if (!root) {
    n->l = n->r = NULL;
    n->h = 1;
    return n;
  }
  if (n->off < root->off) root->l = avl_insert(root->l, n);
  else root->r = avl_insert(root->r, n);
  return balance(root);
}
static blk *avl_remove_min(blk *n, blk **min) {
  if (!n->l) {
    *min = n;
    return n->r;
  }
  n->l = avl_remove_min(n->l, min);
  return balance(n);
}
static blk *avl_remove(blk *root, uint64_t off) {
  if (!root) return NULL;
  if (off < root->off) {
    root->l = avl_remove(root->l, off);
  } else if (off > root->off) {
    root->r = avl_remove(root->r, off);
  } else {
    blk *l = root->l, *r = root->r, *m;
    root->l = root->r = NULL;
    if (!r) return l;
    r = avl_remove_min(r, &m);
    m->l = l;
    m->r = r;
    return balance(m);
  }
  return balance(root);
}
/* The used block with the greatest offset <= off, or NULL. */
static blk *avl_floor(blk *n, uint64_t off) {
  blk *best = NULL;
  while (n) {
    if (n->off <= off) {
      best = n;
      n = n->r;
    } else {
      n = n->l;
    }
  }
  return best;
}

/* ---- arena bytes ------------------------------------------------------------------------ */

/* First byte in [from, to) that is not `byte`, or `to`. Word at a time on the aligned part. */
static uint64_t scan_not(const md__arena *a, uint64_t from, uint64_t to, uint8_t byte) {
  const uint8_t *p = a->base;
  uint64_t w = 0x0101010101010101ull * byte;
  uint64_t i = from;
  for (; i < to && (i & 7u); i++)
    if (p[i] != byte) return i;
  for (; i + 8 <= to; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    if (v != w) break;
  }
  for (; i < to; i++)
    if (p[i] != byte) return i;
  return to;
}

/* First byte in [from, to) that is neither 0 nor poison, or `to`. */
static uint64_t scan_not_free(const md__arena *a, uint64_t from, uint64_t to) {
  const uint8_t *p = a->base;
  for (uint64_t i = from; i < to;) {
    if ((i & 7u) == 0 && i + 8 <= to) {
      uint64_t v;
      memcpy(&v, p + i, 8);
      if (v == 0 || v == POISON64) {
        i += 8;
        continue;
      }
    }
    if (p[i] != 0 && p[i] != MD__ARENA_POISON_BYTE) return i;
    i++;
  }
  return to;
}

/* Makes [off, off+len) read as `byte`: memset, or for long ranges with byte 0 or poison,
 * madvise(MADV_DONTNEED) on the whole pages (they then read 0, which a free block allows) and
 * memset on the edges. Zero-fill needs 0 exactly; poison accepts 0 on released pages. */
static void fill(md__arena *a, uint64_t off, uint64_t len, uint8_t byte) {
  if (len >= MD__ARENA_MADVISE_MIN) {
    uint64_t lo = round_up(off, a->page), hi = (off + len) / a->page * a->page;
    if (hi > lo && madvise(a->base + lo, hi - lo, MADV_DONTNEED) == 0) {
      memset(a->base + off, byte, lo - off);
      memset(a->base + hi, byte, off + len - hi);
      return;
    }
  }
  memset(a->base + off, byte, len);
}

/* ---- create / destroy ------------------------------------------------------------------- */

md_status md__arena_create(uint64_t limit, uint64_t tag, md__arena **out, char *err, size_t errlen) {
  *out = NULL;
  if (limit == 0) limit = MD__ARENA_DEFAULT_LIMIT;
  if (limit > MD__ARENA_MAX_LIMIT) limit = MD__ARENA_MAX_LIMIT;
  md__arena *a = calloc(1, sizeof *a);
  blk *b = calloc(1, sizeof *b);
  if (!a || !b) {
    free(a);
    free(b);
    if (err && errlen) snprintf(err, errlen, "sim: out of host memory for the arena");
    return MD_DEVICE_UNAVAILABLE;
  }
  a->limit = limit;
  a->reserved = round_up(limit, G) + 2 * G;
  a->tag = tag;
  long pg = sysconf(_SC_PAGESIZE);
  a->page = pg > 0 ? (uint64_t)pg : 4096u;
  void *m = mmap(NULL, a->reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    if (err && errlen)
      snprintf(err, errlen, "sim: cannot reserve %" PRIu64 " bytes of device memory: %s", a->reserved,
               strerror(e));
    free(a);
    free(b);
    return MD_DEVICE_UNAVAILABLE;
  }
  a->base = m;
  pthread_rwlock_init(&a->lock, NULL);
  pthread_mutex_init(&a->report_lock, NULL);
  memset(a->base, MD__ARENA_REDZONE_BYTE, G);   /* the guard: front red zone of block 1 */
  b->off = G;
  b->span = a->reserved - G;
  a->first = b;
  free_insert(a, b);
  a->bytes_free = b->span;
  a->free_blocks = 1;
  a->hwm = G;
  *out = a;
  return MD_NONE;
}

void md__arena_destroy(md__arena *a) {
  if (!a) return;
  for (blk *b = a->first, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  munmap(a->base, a->reserved);
  pthread_rwlock_destroy(&a->lock);
  pthread_mutex_destroy(&a->report_lock);
  free(a);
}

void *md__arena_host(md__arena *a, uint64_t off) { return a->base + off; }
uint8_t *md__arena_base(md__arena *a) { return a->base; }
uint64_t md__arena_reserved(md__arena *a) { return a->reserved; }

/* ---- alloc / free ----------------------------------------------------------------------- */

md_status md__arena_alloc(md__arena *a, uint64_t bytes, uint64_t *off) {
  if (bytes == 0) return MD_INVALID_ARGUMENT;
  if (bytes > a->limit) {
    atomic_fetch_add_explicit(&a->refused_persistent, 1, memory_order_relaxed);
    return MD_RESOURCE_EXHAUSTED_PERSISTENT;
  }
  uint64_t span = round_up(bytes + R, G);
  blk *rest = malloc(sizeof *rest);   /* outside the lock; freed again if not needed */
  if (!rest) {
    atomic_fetch_add_explicit(&a->refused_transient, 1, memory_order_relaxed);
    return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  }
  pthread_rwlock_wrlock(&a->lock);
  blk *b = free_find(a, span);
  if (!b) {
    pthread_rwlock_unlock(&a->lock);
    free(rest);
    atomic_fetch_add_explicit(&a->refused_transient, 1, memory_order_relaxed);
    return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  }
  free_remove(a, b);
  uint64_t s = b->off, hwm = a->hwm, end = s + span;
  /* The last R bytes of a span followed by another block are that block's front red zone, so
   * they hold the pattern before the lock is released: a block carved next from the rest of
   * this free block may be checked before this one is filled. A span taking the whole free
   * block finds the pattern there already (the free block's tail); a split writes it here. */
  uint64_t own_end = end < a->reserved ? end - R : end, tail_bad = end;
  uint8_t tail_byte = 0;
  if (b->span > span) {
    uint64_t tail_to = end < hwm ? end : hwm;
    if (span < MD__ARENA_MADVISE_MIN && own_end < tail_to) {
      tail_bad = scan_not_free(a, own_end, tail_to);
      if (tail_bad < tail_to) tail_byte = a->base[tail_bad];
      else tail_bad = end;
    }
    memset(a->base + own_end, MD__ARENA_REDZONE_BYTE, R);
    memset(rest, 0, sizeof *rest);
    rest->off = b->off + span;
    rest->span = b->span - span;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->span = span;
    free_insert(a, rest);
    rest = NULL;
  } else {
    a->free_blocks--;
  }
  b->is_free = 0;
  b->size = bytes;
  atomic_store_explicit(&b->ready, 0, memory_order_relaxed);
  a->root = avl_insert(a->root, b);
  a->allocs++;
  a->live_blocks++;
  a->bytes_live += bytes;
  if (a->bytes_live > a->bytes_peak) a->bytes_peak = a->bytes_live;
  a->span_live += span;
  a->bytes_free -= span;
  if (end > a->hwm) a->hwm = end;
  pthread_rwlock_unlock(&a->lock);
  free(rest);

  /* [s, own_end) is ours alone now (nobody else knows its offset yet, and checks skip a
   * block that is not ready), so it is checked and filled without the lock. */
  uint64_t scan_end = own_end < hwm ? own_end : hwm;
  if (span < MD__ARENA_MADVISE_MIN) {
    uint64_t bad = scan_end > s ? scan_not_free(a, s, scan_end) : scan_end;
    if (bad == scan_end) bad = tail_bad;
    if (bad < end) {
      atomic_fetch_add_explicit(&a->poison_hits, 1, memory_order_relaxed);
      report(a, NULL, 0,
             "sim: poison hit: freed device memory at 0x%" PRIx64 " was written after it was freed "
             "(byte 0x%02x; found when allocating 0x%" PRIx64 ", size %" PRIu64 ")",
             a->tag | bad, bad >= own_end ? tail_byte : a->base[bad], a->tag | s, bytes);
    }
  }
  fill(a, s, bytes, 0);
  memset(a->base + s + bytes, MD__ARENA_REDZONE_BYTE, own_end - (s + bytes));
  atomic_store_explicit(&b->ready, 1, memory_order_release);
  *off = s;
  return MD_NONE;
}

/* Checks one red zone; returns 1 when damaged, and unless quiet reports it (message also to
 * out). */
static int check_zone(md__arena *a, const blk *b, int front, int quiet, char *out, size_t outlen) {
  uint64_t from = front ? b->off - R : b->off + b->size;
  uint64_t to = front ? b->off : b->off + b->span;
  uint64_t bad = scan_not(a, from, to, MD__ARENA_REDZONE_BYTE);
  if (bad == to) return 0;
  if (quiet) return 1;
  uint64_t n = 0;
  for (uint64_t i = bad; i < to; i++) n += a->base[i] != MD__ARENA_REDZONE_BYTE;
  if (front) {
    const blk *p = b->prev;
    char also[96] = "";
    if (p && !p->is_free)
      snprintf(also, sizeof also, " (or past the end of allocation 0x%" PRIx64 ", size %" PRIu64 ")",
               a->tag | p->off, p->size);
    report(a, out, outlen,
           "sim: red zone hit: %" PRIu64 " byte(s) written before the start of allocation 0x%" PRIx64
           " (size %" PRIu64 "), first at -%" PRIu64 "%s",
           n, a->tag | b->off, b->size, b->off - bad, also);
  } else {
    report(a, out, outlen,
           "sim: red zone hit: %" PRIu64 " byte(s) written past the end of allocation 0x%" PRIx64
           " (size %" PRIu64 "), first at +%" PRIu64 " (byte 0x%02x)",
           n, a->tag | b->off, b->size, bad - b->off, a->base[bad]);
  }
  return 1;
}

int md__arena_free(md__arena *a, uint64_t off) {
  pthread_rwlock_wrlock(&a->lock);
  blk *b = avl_floor(a->root, off);
  if (!b || b->off != off) {
    atomic_fetch_add_explicit(&a->bad_frees, 1, memory_order_relaxed);
    if (b && off < b->off + b->size)
      report(a, NULL, 0,
             "sim: bad free of 0x%" PRIx64 ": inside allocation 0x%" PRIx64 " (size %" PRIu64
             "), not its start",
             a->tag | off, a->tag | b->off, b->size);
    else
      report(a, NULL, 0, "sim: bad free of 0x%" PRIx64 ": not a live allocation (double free, or never allocated)",
             a->tag | off);
    pthread_rwlock_unlock(&a->lock);
    return -1;
  }
  uint64_t hits = (uint64_t)check_zone(a, b, 1, 0, NULL, 0) + (uint64_t)check_zone(a, b, 0, 0, NULL, 0);
  if (hits) atomic_fetch_add_explicit(&a->redzone_hits, hits, memory_order_relaxed);
  a->root = avl_remove(a->root, off);
  a->frees++;
  a->live_blocks--;
  a->bytes_live -= b->size;
  a->span_live -= b->span;
  a->bytes_free += b->span;
  a->free_blocks++;
  fill(a, b->off, b->span, MD__ARENA_POISON_BYTE);
  blk *p = b->prev, *n = b->next;
  if (p && p->is_free) {              /* p's red-zone tail is now inside a free block */
    free_remove(a, p);
    memset(a->base + p->off + p->span - R, MD__ARENA_POISON_BYTE, R);
    p->span += b->span;
    p->next = n;
    if (n) n->prev = p;
    free(b);
    b = p;
    a->free_blocks--;
  }
  if (n && n->is_free) {              /* n keeps its own tail, which is now b's */
    free_remove(a, n);
    b->span += n->span;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
    a->free_blocks--;
  }
  if (b->off + b->span < a->reserved)  /* the next block is used: this is its front red zone */
    memset(a->base + b->off + b->span - R, MD__ARENA_REDZONE_BYTE, R);
  free_insert(a, b);
  pthread_rwlock_unlock(&a->lock);
  return 0;
}

/* ---- lookups ---------------------------------------------------------------------------- */

int md__arena_find(md__arena *a, uint64_t off, md__arena_alloc_info *out) {
  pthread_rwlock_rdlock(&a->lock);
  blk *b = avl_floor(a->root, off);
  int found = b && off < b->off + b->size;
  if (found) {
    out->off = b->off;
    out->size = b->size;
  }
  pthread_rwlock_unlock(&a->lock);
  return found;
}

md__arena_where md__arena_locate(md__arena *a, uint64_t off, md__arena_alloc_info *out) {
  if (off < G || off >= a->reserved) return MD__ARENA_AT_OUTSIDE;
  pthread_rwlock_rdlock(&a->lock);
  blk *b = avl_floor(a->root, off);
  md__arena_where w = MD__ARENA_AT_FREE;
  if (b && off < b->off + b->span) {
    w = off < b->off + b->size ? MD__ARENA_AT_PAYLOAD : MD__ARENA_AT_REDZONE;
    out->off = b->off;
    out->size = b->size;
  }
  pthread_rwlock_unlock(&a->lock);
  return w;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* A damaged zone found under the read lock, to be confirmed, reported and repaired under the
 * write lock (so that two threads that see the same damage count it once). */
typedef struct hit {
  uint64_t off;     /* block offset */
  int kind;         /* 0: front red zone, 1: back red zone, 2: free block poison */
} hit;

typedef struct hits {
  hit *v;
  size_t n, cap;
  hit local[8];
} hits;

static void hits_add(hits *h, uint64_t off, int kind) {
  if (h->n == h->cap) {
    size_t cap = h->cap * 2;
    hit *v = malloc(cap * sizeof *v);
    if (!v) return;                  /* a hit not recorded now is found by the next check */
    memcpy(v, h->v, h->n * sizeof *v);
    if (h->v != h->local) free(h->v);
    h->v = v;
    h->cap = cap;
  }
  h->v[h->n++] = (hit){off, kind};
}

/* Free block b: the part that must be 0/poison, below the high-water mark. */
static void free_body(const md__arena *a, const blk *b, uint64_t *from, uint64_t *to) {
  uint64_t end = b->off + b->span;
  if (end < a->reserved) end -= R;
  if (end > a->hwm) end = a->hwm;
  *from = b->off;
  *to = end > b->off ? end : b->off;
}

/* Under the write lock: confirms each hit, reports, repairs. Returns the confirmed count. */
static uint64_t hits_settle(md__arena *a, hits *h, char *msg, size_t len) {
  if (!h->n) return 0;
  uint64_t confirmed = 0, poison = 0;
  pthread_rwlock_wrlock(&a->lock);
  for (size_t i = 0; i < h->n; i++) {
    blk *b;
    char *out = confirmed + poison == 0 ? msg : NULL;   /* the first hit's message */
    if (h->v[i].kind == 2) {
      /* Free blocks are not in the tree: walk from the nearest used block. */
      blk *u = avl_floor(a->root, h->v[i].off);
      b = u ? u->next : a->first;
      if (!b || b->off != h->v[i].off || !b->is_free) continue;
      uint64_t from, to;
      free_body(a, b, &from, &to);
      uint64_t bad = scan_not_free(a, from, to);
      if (bad == to) continue;
      report(a, out, len,
             "sim: poison hit: freed device memory at 0x%" PRIx64 " was written after it was freed "
             "(byte 0x%02x, free block 0x%" PRIx64 " of %" PRIu64 " bytes)",
             a->tag | bad, a->base[bad], a->tag | b->off, b->span);
      for (uint64_t j = bad; j < to; j++)
        if (a->base[j] != 0) a->base[j] = MD__ARENA_POISON_BYTE;
      poison++;
    } else {
      b = avl_floor(a->root, h->v[i].off);
      if (!b || b->off != h->v[i].off || !atomic_load_explicit(&b->ready, memory_order_acquire)) continue;
      int front = h->v[i].kind == 0;
      if (!check_zone(a, b, front, 0, out, len)) continue;
      if (front) memset(a->base + b->off - R, MD__ARENA_REDZONE_BYTE, R);
      else memset(a->base + b->off + b->size, MD__ARENA_REDZONE_BYTE, b->span - b->size);
      confirmed++;
    }
  }
  pthread_rwlock_unlock(&a->lock);
  if (confirmed) atomic_fetch_add_explicit(&a->redzone_hits, confirmed, memory_order_relaxed);
  if (poison) atomic_fetch_add_explicit(&a->poison_hits, poison, memory_order_relaxed);
  if (h->v != h->local) free(h->v);
  return confirmed + poison;
}

static void hits_init(hits *h) {
  h->v = h->local;
  h->n = 0;
  h->cap = sizeof h->local / sizeof h->local[0];
}

uint64_t md__arena_check(md__arena *a, const uint64_t *offs, size_t n, char *msg, size_t len) {
  hits h;
  hits_init(&h);
  /* Duplicates are skipped among the first few only: a zone found twice is settled once. */
  const blk *seen[16];
  size_t n_seen = 0;
  pthread_rwlock_rdlock(&a->lock);
  for (size_t i = 0; i < n; i++) {
    blk *b = avl_floor(a->root, offs[i]);
    if (!b || offs[i] >= b->off + b->span || !atomic_load_explicit(&b->ready, memory_order_acquire))
      continue;
    int dup = 0;
    for (size_t j = 0; j < n_seen && !dup; j++) dup = seen[j] == b;
    if (dup) continue;
    if (n_seen < sizeof seen / sizeof seen[0]) seen[n_seen++] = b;
    if (check_zone(a, b, 1, 1, NULL, 0)) hits_add(&h, b->off, 0);
    if (check_zone(a, b, 0, 1, NULL, 0)) hits_add(&h, b->off, 1);
  }
  pthread_rwlock_unlock(&a->lock);
  return hits_settle(a, &h, msg, len);
}

uint64_t md__arena_check_all(md__arena *a, char *msg, size_t len) {
  hits h;
  hits_init(&h);
  pthread_rwlock_rdlock(&a->lock);
  /* Each byte once: back zones of used blocks, the guard as the first block's front zone, a
   * free block's body (its tail is the next block's front zone, which is checked as such). */
  for (blk *b = a->first; b; b = b->next) {
    if (b->is_free) {
      uint64_t from, to;
      free_body(a, b, &from, &to);
      if (scan_not_free(a, from, to) < to) hits_add(&h, b->off, 2);
      continue;
    }
    if (!atomic_load_explicit(&b->ready, memory_order_acquire)) continue;
    if ((!b->prev || b->prev->is_free) && check_zone(a, b, 1, 1, NULL, 0)) hits_add(&h, b->off, 0);
    if (check_zone(a, b, 0, 1, NULL, 0)) hits_add(&h, b->off, 1);
  }
  pthread_rwlock_unlock(&a->lock);
  return hits_settle(a, &h, msg, len);
}

void md__arena_stats_get(md__arena *a, md__arena_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_rwlock_rdlock(&a->lock);
  out->limit = a->limit;
  out->reserved = a->reserved;
  out->allocs = a->allocs;
  out->frees = a->frees;
  out->bytes_live = a->bytes_live;
  out->bytes_peak = a->bytes_peak;
  out->span_live = a->span_live;
  out->live_blocks = a->live_blocks;
  out->bytes_free = a->bytes_free;
  out->free_blocks = a->free_blocks;
  out->largest_free = largest_free(a);
  pthread_rwlock_unlock(&a->lock);
  out->refused_persistent = atomic_load_explicit(&a->refused_persistent, memory_order_relaxed);
  out->refused_transient = atomic_load_explicit(&a->refused_transient, memory_order_relaxed);
  out->bad_frees = atomic_load_explicit(&a->bad_frees, memory_order_relaxed);
  out->redzone_hits = atomic_load_explicit(&a->redzone_hits, memory_order_relaxed);
  out->poison_hits = atomic_load_explicit(&a->poison_hits, memory_order_relaxed);
  if (out->largest_free > R) {
    uint64_t fit = out->largest_free - R;
    out->max_fit_now = fit < out->limit ? fit : out->limit;
  }
  out->fragmentation = out->bytes_free ? 1.0 - (double)out->largest_free / (double)out->bytes_free : 0.0;
}
