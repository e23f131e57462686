/* sim_arena_int.h - private to the arena's files: its host metadata, and what the allocator
 * (sim_arena.c), the red-zone checks (sim_arena_redzone.c) and the reports and statistics
 * (sim_arena_stats.c) share. The helpers of the hot paths (lookups, the unit table's reads, the
 * canary, the red-zone and poison scans) are static inline here, so that every file inlines them
 * as it did when the arena was one file. Layout, invariants, the canary and locking: sim_arena.h. */
#ifndef MD_SIM_ARENA_INT_H
#define MD_SIM_ARENA_INT_H

#include "sim_arena.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define G ((uint64_t)MD__ARENA_ALIGN)
#define G_SHIFT 8u                     /* log2(G) */
#define R ((uint64_t)MD__ARENA_REDZONE)
#define SL_BITS 4u
#define SL_COUNT (1u << SL_BITS)
#define FL_MIN 8u                      /* log2(G): the smallest span */
#define FL_COUNT 33u                   /* spans up to 2^40 bytes */
#define POISON64 0xDBDBDBDBDBDBDBDBull

_Static_assert(((uint64_t)1 << G_SHIFT) == G, "G_SHIFT");

/* ---- metadata -----------------------------------------------------------------------------
 *
 * Offsets and spans are kept in units of G ("units"; unit u is arena bytes [u*G, u*G+G)). A
 * 64 GiB arena has 2^28 + 2 units, so every unit number and every span fits in 32 bits.
 *
 * The unit table: one 64-bit word per unit, in leaves of LEAF_UNITS units allocated when a
 * block first starts or ends in their range (never freed before the arena), reached through
 * `dir`. A word is
 *   0            nothing starts here, and no free block ends here
 *   W_USED       a used block starts here: its payload size (the span follows from it:
 *                round_up(size + R, G)) and W_READY once its payload is zeroed and its red
 *                zone written. This word is all the host memory a used block has.
 *   W_FREEING    the same block, claimed by a free that has not finished
 *   W_FREE       a free block starts here: the index of its record
 *   W_FREE|W_END the last unit of a free block of more than one unit: the index of its record
 *                (so that a free finds a free predecessor in O(1))
 * Lookups read words with one atomic load each, without any lock: a used block's word is a
 * consistent picture of it. Per 64 units a leaf also has a bitmap `starts` of the units where
 * a used (or freeing) block starts, and summary bitmaps (`lv[0]`: one bit per leaf, set when
 * its `starts` has a bit; `lv[k+1]`: one bit per word of `lv[k]`) let a lookup find the
 * nearest used block at or below any unit in a few word reads: the only block that can
 * contain it.
 *
 * Records (16 bytes, in chunks of REC_CHUNK, no allocation per record) exist for free blocks
 * only: unit, span and the size-class list links. So that a free never needs host memory,
 * alloc keeps capacity for a record per block (chunks are allocated before they are needed
 * and touched only as records are used). A used block thus costs 8 bytes of unit table (plus
 * its share of a leaf's bitmaps and header: 1/8 byte per unit; a block spanning leaves also
 * keeps the leaf of its last unit). Records, the free lists and the counters are read and
 * written under the lock; words, `starts` and `lv` are written under it (except the READY
 * bit and the claim of a free: md__arena_alloc, md__arena_free) and read by anyone. */

#define LEAF_BITS 8u
#define LEAF_UNITS (1u << LEAF_BITS)
#define LEAF_MASK (LEAF_UNITS - 1u)
#define REC_CHUNK_BITS 14u              /* 256 KiB chunks: glibc maps them, untouched pages cost nothing */
#define REC_CHUNK (1u << REC_CHUNK_BITS)
#define NIL 0u                          /* no record; record 0 is never used */
#define MAX_LV 8u

#define W_FREE ((uint64_t)1 << 62)
#define W_USED ((uint64_t)2 << 62)
#define W_FREEING ((uint64_t)3 << 62)   /* claimed by a free that has not finished */
#define W_TYPE ((uint64_t)3 << 62)
#define W_READY ((uint64_t)1 << 61)     /* used: payload zeroed and red zone written */
#define W_END ((uint64_t)1 << 61)       /* free: the block's last unit, not its start */
#define W_SIZE (((uint64_t)1 << 37) - 1u) /* used: payload bytes (at most 64 GiB) */
#define W_REC 0xFFFFFFFFull             /* free: record index */

_Static_assert(MD__ARENA_MAX_LIMIT <= W_SIZE, "size field");

typedef struct leaf {
  _Atomic uint64_t starts[LEAF_UNITS / 64u];
  _Atomic uint64_t word[LEAF_UNITS];
  struct leaf *made_next;       /* the arena's list of the leaves it made (for destroy) */
} leaf;

typedef struct rec {
  uint32_t off_u, span_u;   /* first unit, units */
  uint32_t fprev, fnext;    /* its size-class list; unused records: the spare list */
} rec;

struct md__arena {
  /* Set at create; read by every lookup (kept off the lines that allocs and frees write). */
  uint8_t *base;
  uint64_t reserved, limit, tag, page;
  uint64_t ckey, csig;          /* the canary's key (48 bits) and signature (16 bits, not 0) */
  size_t (*sig_scan)(const uint8_t *p, size_t nw, uint64_t sig);   /* see sig_scan_body */
  uint64_t units;               /* reserved / G */
  _Atomic(leaf *) *dir;         /* units / LEAF_UNITS (rounded up) leaves */
  uint64_t n_leaves;
  leaf *made;                   /* the leaves made so far (few of dir's: an arena of 1 GiB has 16K) */
  _Atomic uint64_t *lv[MAX_LV];
  unsigned n_lv;
  /* The allocator. */
  _Alignas(64) pthread_mutex_t lock;   /* what follows; writes of word, starts and lv */
  _Atomic uint32_t waiting;     /* threads waiting for the lock (see lock_hot) */
  rec **chunks;                 /* records, REC_CHUNK per chunk */
  uint64_t n_chunks, max_chunks;
  uint32_t rec_next, rec_spare; /* next never-used record; list of released ones */
  uint64_t n_blocks;            /* free, used and freeing: the records alloc keeps room for */
  uint64_t fl_map;              /* bit f: some class (f, *) is non-empty */
  uint32_t sl_map[FL_COUNT];    /* bit s: class (f, s) is non-empty */
  uint32_t heads[FL_COUNT][SL_COUNT];
  uint64_t hwm;                 /* end of the highest span ever handed out: above it, zeros */
  uint64_t allocs, frees, bytes_live, bytes_peak, span_live, live_blocks, bytes_free, free_blocks;
  /* Counted on paths that do not hold the lock (rarely: refusals and reports). */
  _Alignas(64) _Atomic uint64_t refused_persistent, refused_transient, bad_frees, redzone_hits, poison_hits;
  _Atomic uint64_t redzone_reads;
  pthread_mutex_t report_lock;
  char last[MD__ARENA_REPORT_MAX];
};

#define SPIN_TRIES 40u              /* about 300 pauses: a few microseconds */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* The lock. Alloc, free and the settling of a launch's checks hold it for a few hundred
 * nanoseconds; full checks and stats may hold it long and may be called in a loop (a checker
 * thread), and a released mutex is not handed to the thread it wakes: a caller that takes it
 * again at once could keep it for good. So a thread that finds it taken counts itself as
 * waiting, and the long holders let waiting threads go first. */
static inline void lock_hot(md__arena *a) {
  if (pthread_mutex_trylock(&a->lock) == 0) return;
  atomic_fetch_add_explicit(&a->waiting, 1, memory_order_relaxed);
  /* The holder is most likely running and about to release: spin (a few microseconds at
   * most) before sleeping; a sleep and a wake-up cost more than many critical sections. */
  int got = 0;
  for (unsigned i = 0; i < SPIN_TRIES && !got; i++) {
    for (unsigned j = 0; j < (1u << (i < 3 ? i : 3)); j++) cpu_relax();
    got = pthread_mutex_trylock(&a->lock) == 0;
  }
  if (!got) pthread_mutex_lock(&a->lock);
  atomic_fetch_sub_explicit(&a->waiting, 1, memory_order_relaxed);
}

static inline void lock_cold(md__arena *a) {
  for (int i = 0; i < 1000 && atomic_load_explicit(&a->waiting, memory_order_relaxed); i++) sched_yield();
  lock_hot(a);
}

static inline uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
static inline uint64_t span_of(uint64_t size) { return (size + R + G - 1) & ~(G - 1); }

/* ---- records and the unit table: reads ------------------------------------------------ */

static inline rec *rp(const md__arena *a, uint32_t i) { return &a->chunks[i >> REC_CHUNK_BITS][i & (REC_CHUNK - 1u)]; }

static inline leaf *leaf_of(const md__arena *a, uint64_t u) {
  return atomic_load_explicit(&a->dir[u >> LEAF_BITS], memory_order_acquire);
}

/* The word of unit u (any thread). */
static inline uint64_t word_get(const md__arena *a, uint64_t u) {
  leaf *l = leaf_of(a, u);
  return l ? atomic_load_explicit(&l->word[u & LEAF_MASK], memory_order_acquire) : 0;
}

/* Lock held; the leaf exists (a block starts at u). */
static inline void word_set(md__arena *a, uint64_t u, uint64_t w) {
  atomic_store_explicit(&leaf_of(a, u)->word[u & LEAF_MASK], w, memory_order_release);
}
static inline int is_free_word(uint64_t w) { return (w & W_TYPE) == W_FREE; }

static inline uint64_t ld(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_relaxed); }
static inline void st(_Atomic uint64_t *p, uint64_t v) { atomic_store_explicit(p, v, memory_order_relaxed); }

static inline unsigned top_bit(uint64_t m) { return 63u - (unsigned)__builtin_clzll(m); }

/* The greatest leaf index <= i whose `starts` has a bit, or -1. Any thread: bits of blocks
 * that others allocate or free meanwhile may be seen or not, but those of a block that stays
 * live, and the zeros inside it, are stable, so the answer for a unit inside such a block is
 * exact. */
static inline int64_t leaf_floor(const md__arena *a, uint64_t i) {
  unsigned k = 0;
  for (;;) {
    uint64_t m = ld(&a->lv[k][i >> 6]) & (~0ull >> (63u - (i & 63u)));
    if (m) {
      i = (i & ~63ull) | top_bit(m);
      break;
    }
    if (k + 1u >= a->n_lv || (i >> 6) == 0) return -1;
    i = (i >> 6) - 1u;   /* the words of level k below this one: bits of level k+1 */
    k++;
  }
  while (k > 0) {
    k--;
    uint64_t m = ld(&a->lv[k][i]);
    if (!m) return -1;
    i = i * 64u + top_bit(m);
  }
  return (int64_t)i;
}

/* The greatest unit <= u at which a used (or freeing) block starts; 0 when none. */
static inline uint64_t floor_start(const md__arena *a, uint64_t u) {
  uint64_t li = u >> LEAF_BITS;
  leaf *l = leaf_of(a, u);
  if (l) {
    unsigned j = (unsigned)(u & LEAF_MASK);
    for (int k = (int)(j >> 6); k >= 0; k--) {
      uint64_t m = ld(&l->starts[k]);
      if (k == (int)(j >> 6)) m &= ~0ull >> (63u - (j & 63u));
      if (m) return li << LEAF_BITS | (uint64_t)k << 6 | top_bit(m);
    }
  }
  if (li == 0) return 0;
  int64_t f = leaf_floor(a, li - 1u);
  if (f < 0) return 0;
  l = leaf_of(a, (uint64_t)f << LEAF_BITS);
  if (!l) return 0;
  for (int k = (int)(LEAF_UNITS / 64u) - 1; k >= 0; k--) {
    uint64_t m = ld(&l->starts[k]);
    if (m) return (uint64_t)f << LEAF_BITS | (uint64_t)k << 6 | top_bit(m);
  }
  return 0;
}

/* The used block whose span contains arena offset o (any thread, no lock): its word (W_USED,
 * ready or not) and *start, or 0. */
static inline uint64_t lookup(const md__arena *a, uint64_t o, uint64_t *start) {
  if (o < G || o >= a->reserved) return 0;
  uint64_t u = o >> G_SHIFT, w = word_get(a, u);
  if ((w & W_TYPE) != W_USED) {   /* o is not in the first unit of a used block */
    u = floor_start(a, u);
    if (!u) return 0;
    w = word_get(a, u);
    if ((w & W_TYPE) != W_USED || o - (u << G_SHIFT) >= span_of(w & W_SIZE)) return 0;
  }
  *start = u << G_SHIFT;
  return w;
}

static inline uint64_t rspan(const md__arena *a, uint32_t i) { return (uint64_t)rp(a, i)->span_u << G_SHIFT; }

/* ---- the canary (sim_arena.h: "Canary words") ------------------------------------------ */

#define M48 ((1ull << 48) - 1u)
#define CMUL1 0xafd7ed558ccdull         /* odd: invertible mod 2^48 */
#define CMUL1_INV 0x430c22a54005ull
#define CMUL2 0xb9fe1a85ec53ull
#define CMUL2_INV 0xb2f8129337dbull
_Static_assert(((CMUL1 * CMUL1_INV) & M48) == 1u, "CMUL1_INV");
_Static_assert(((CMUL2 * CMUL2_INV) & M48) == 1u, "CMUL2_INV");

/* A bijection of 48-bit values, and its inverse: two rounds of a multiply by an odd number
 * mod 2^48 and y ^= y >> 24 (its own inverse on 48 bits). One round is not enough: words a
 * power of two apart (allocations of power-of-two sizes) then share 3% of their bytes instead
 * of 1/256; with two, every byte lane matches 1/256 of the time at every distance. */
static inline uint64_t p48(uint64_t x) {
  x = (x * CMUL1) & M48;
  x ^= x >> 24;
  x = (x * CMUL2) & M48;
  return x ^ (x >> 24);
}

static inline uint64_t p48_inv(uint64_t x) {
  x ^= x >> 24;
  x = (x * CMUL2_INV) & M48;
  x ^= x >> 24;
  return (x * CMUL1_INV) & M48;
}

/* The canary of aligned word w. */
static inline uint64_t cw(const md__arena *a, uint64_t w) {
  uint64_t l = p48((w ^ a->ckey) & M48);
  return l | ((l ^ a->csig) & 0xFFFFu) << 48;
}

/* The canary byte at offset i. */
static inline uint8_t cb(const md__arena *a, uint64_t i) {
  uint64_t c = cw(a, i >> 3);
  uint8_t b[8];
  memcpy(b, &c, 8);
  return b[i & 7u];
}

/* Whether v passes the signature test (lane 3 XOR lane 0 == sig), branch-free. */
static inline uint64_t sig_ok(uint64_t v, uint64_t sig) { return ((((v ^ (v >> 48)) ^ sig) & 0xFFFFu) - 1u) >> 63; }

/* 1 and the word w whose canary v is, or 0 (v is no canary of this arena). */
static inline int canary_of(const md__arena *a, uint64_t v, uint64_t *w) {
  if (!sig_ok(v, a->csig)) return 0;
  uint64_t x = (p48_inv(v & M48) ^ a->ckey) & M48;
  if (x >= a->reserved >> 3) return 0;
  *w = x;
  return 1;   /* the signature lane follows from the low 48 bits: v == cw(a, x) */
}

/* ---- arena bytes ------------------------------------------------------------------------ */

/* Red-zone bytes are read and repaired with atomic accesses: checks read them without the
 * lock while another thread may repair the same zone under it. */
static inline uint8_t zb(const md__arena *a, uint64_t i) { return __atomic_load_n(a->base + i, __ATOMIC_RELAXED); }
static inline uint64_t zw(const md__arena *a, uint64_t i) {
  return __atomic_load_n((const uint64_t *)(const void *)(a->base + i), __ATOMIC_RELAXED);
}

/* First byte in [from, to) that is not the canary, or `to`. */
static inline uint64_t zone_scan(const md__arena *a, uint64_t from, uint64_t to) {
  /* The common case, an intact zone: its aligned words without a branch per word, and the
   * bytes of a partial first or last word against one canary word each. */
  uint64_t lo = (from + 7u) & ~(uint64_t)7, hi = to & ~(uint64_t)7;
  if (lo < hi) {
    uint64_t diff = 0;
    for (uint64_t w = lo; w < hi; w += 8) diff |= zw(a, w) ^ cw(a, w >> 3);
    uint8_t c[8];
    if (from < lo) {
      uint64_t h = cw(a, from >> 3);
      memcpy(c, &h, 8);
      for (uint64_t b = from; b < lo; b++) diff |= zb(a, b) ^ c[b & 7u];
    }
    if (hi < to) {
      uint64_t t = cw(a, hi >> 3);
      memcpy(c, &t, 8);
      for (uint64_t b = hi; b < to; b++) diff |= zb(a, b) ^ c[b & 7u];
    }
    if (!diff) return to;
  }
  for (uint64_t i = from; i < to;) {
    if ((i & 7u) == 0 && i + 8 <= to && zw(a, i) == cw(a, i >> 3)) {
      i += 8;
      continue;
    }
    if (zb(a, i) != cb(a, i)) return i;
    i++;
  }
  return to;
}

/* Writes the canary over [from, to). */
static inline void zone_fill(md__arena *a, uint64_t from, uint64_t to) {
  uint64_t i = from;
  if (i & 7u) {
    uint8_t c[8];
    uint64_t h = cw(a, i >> 3);
    memcpy(c, &h, 8);
    for (; i < to && (i & 7u); i++) __atomic_store_n(a->base + i, c[i & 7u], __ATOMIC_RELAXED);
  }
  for (; i + 8 <= to; i += 8) __atomic_store_n((uint64_t *)(void *)(a->base + i), cw(a, i >> 3), __ATOMIC_RELAXED);
  for (; i < to; i++) __atomic_store_n(a->base + i, cb(a, i), __ATOMIC_RELAXED);
}

/* Rewrites the canary over [from, to) where it is damaged (nothing is written otherwise). */
static inline void zone_restore(md__arena *a, uint64_t from, uint64_t to) {
  for (uint64_t i = zone_scan(a, from, to); i < to; i++) {
    uint8_t c = cb(a, i);
    if (zb(a, i) != c) __atomic_store_n(a->base + i, c, __ATOMIC_RELAXED);
  }
}

/* Writes poison over the red-zone bytes [from, to) with atomic stores: a full check may be
 * reading them (it skips the block once it sees the free's claim, and confirms under the lock
 * anything it found). */
static inline void zone_poison(md__arena *a, uint64_t from, uint64_t to) {
  uint64_t i = from;
  for (; i < to && (i & 7u); i++) __atomic_store_n(a->base + i, (uint8_t)MD__ARENA_POISON_BYTE, __ATOMIC_RELAXED);
  for (; i + 8 <= to; i += 8) __atomic_store_n((uint64_t *)(void *)(a->base + i), POISON64, __ATOMIC_RELAXED);
  for (; i < to; i++) __atomic_store_n(a->base + i, (uint8_t)MD__ARENA_POISON_BYTE, __ATOMIC_RELAXED);
}

/* First byte in [from, to) that is neither 0 nor poison, or `to`. */
static inline uint64_t scan_not_free(const md__arena *a, uint64_t from, uint64_t to) {
  const uint8_t *p = a->base;
  if (((from | to) & 7u) == 0) {   /* the common case, a clean span: no branch per word */
    uint64_t bad = 0;
    for (uint64_t i = from; i < to; i += 8) {
      uint64_t v;
      memcpy(&v, p + i, 8);
      bad |= (uint64_t)(v != 0) & (uint64_t)(v != POISON64);
    }
    if (!bad) return to;
  }
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

/* Makes [off, off+len) read as `byte`: memset, or for long ranges (`large`) with byte 0 or
 * poison, madvise(MADV_DONTNEED) on the whole pages (they then read 0, which a free block
 * allows) and memset on the edges. Zero-fill needs 0 exactly; poison accepts 0 on released
 * pages. */
/* ---- shared between the arena's files --------------------------------------------------- */

/* Reports red-zone damage that check_zone found (sim_arena_redzone.c): the zone of the used
 * block at s with `size` payload bytes, in front of it (front) or past its end, first damaged
 * byte at `bad`. Writes the report (message also to out, when out && outlen). Any thread. */
void md__arena_zone_report(md__arena *a, uint64_t s, uint64_t size, int front, uint64_t bad, char *out,
                           size_t outlen);

/* Checks one red zone of the used block at s with `size` payload bytes; returns 1 when
 * damaged, and unless quiet reports it (message also to out). Any thread. */
static inline int check_zone(md__arena *a, uint64_t s, uint64_t size, int front, int quiet, char *out, size_t outlen) {
  uint64_t from = front ? s - R : s + size;
  uint64_t to = front ? s : s + span_of(size);
  uint64_t bad = zone_scan(a, from, to);
  if (bad == to) return 0;
  if (!quiet) md__arena_zone_report(a, s, size, front, bad, out, outlen);
  return 1;
}

/* Writes the message to stderr, keeps it as the arena's last report, and copies it to out
 * (when out && outlen); counts nothing (sim_arena_stats.c). Thread-safe. */
void md__arena_report_to(md__arena *a, char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Sets the canary's key and signature from `seed`, and picks the signature scan the CPU runs
 * fastest (sim_arena_redzone.c). At create, before the arena is used. */
void md__arena_canary_init(md__arena *a, uint64_t seed);

/* The largest free span: the largest block of the highest non-empty class (sim_arena.c). Lock
 * held. */
uint64_t md__arena_largest_free(const md__arena *a);

#endif
