/* sim_arena.c - the simulated device's address space: a bounded arena with a TLSF allocator,
 * red zones (address-derived canaries) and poisoned free memory. Layout, invariants, the
 * canary and locking: sim_arena.h. */
#include "sim_arena.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

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
static void lock_hot(md__arena *a) {
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

static void lock_cold(md__arena *a) {
  for (int i = 0; i < 1000 && atomic_load_explicit(&a->waiting, memory_order_relaxed); i++) sched_yield();
  lock_hot(a);
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
static uint64_t span_of(uint64_t size) { return (size + R + G - 1) & ~(G - 1); }

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

/* ---- records and the unit table --------------------------------------------------------- */

static rec *rp(const md__arena *a, uint32_t i) { return &a->chunks[i >> REC_CHUNK_BITS][i & (REC_CHUNK - 1u)]; }

/* Makes room (lock held) for a record per block after one more block: 0, or -1 when host
 * memory is short. Then rec_new never fails before the next alloc. */
static int rec_reserve(md__arena *a) {
  while ((a->n_blocks + 2) > a->n_chunks << REC_CHUNK_BITS) {   /* + 1 more block, + record 0 */
    if (a->n_chunks == a->max_chunks) return -1;
    rec *c = malloc(REC_CHUNK * sizeof *c);
    if (!c) return -1;
    a->chunks[a->n_chunks++] = c;
  }
  return 0;
}

/* A record for a new free block (lock held; rec_reserve made room). */
static uint32_t rec_new(md__arena *a) {
  if (a->rec_spare != NIL) {
    uint32_t i = a->rec_spare;
    a->rec_spare = rp(a, i)->fnext;
    return i;
  }
  return a->rec_next++;
}

static void rec_release(md__arena *a, uint32_t i) {
  rp(a, i)->fnext = a->rec_spare;
  a->rec_spare = i;
}

static leaf *leaf_of(const md__arena *a, uint64_t u) {
  return atomic_load_explicit(&a->dir[u >> LEAF_BITS], memory_order_acquire);
}

/* The leaf of unit u, allocated if needed (lock held); NULL when host memory is short. */
static leaf *leaf_make(md__arena *a, uint64_t u) {
  leaf *l = leaf_of(a, u);
  if (!l) {
    l = calloc(1, sizeof *l);
    if (l) {
      l->made_next = a->made;
      a->made = l;
      atomic_store_explicit(&a->dir[u >> LEAF_BITS], l, memory_order_release);
    }
  }
  return l;
}

/* The word of unit u (any thread). */
static uint64_t word_get(const md__arena *a, uint64_t u) {
  leaf *l = leaf_of(a, u);
  return l ? atomic_load_explicit(&l->word[u & LEAF_MASK], memory_order_acquire) : 0;
}

/* Lock held; the leaf exists (a block starts at u). */
static void word_set(md__arena *a, uint64_t u, uint64_t w) {
  atomic_store_explicit(&leaf_of(a, u)->word[u & LEAF_MASK], w, memory_order_release);
}
static int is_free_word(uint64_t w) { return (w & W_TYPE) == W_FREE; }

/* Writes (lock held) the words of free block record i: its start, and its last unit. */
static void free_words(md__arena *a, uint32_t i) {
  const rec *b = rp(a, i);
  word_set(a, b->off_u, W_FREE | i);
  if (b->span_u > 1) word_set(a, (uint64_t)b->off_u + b->span_u - 1u, W_FREE | W_END | i);
}

static uint64_t ld(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_relaxed); }
static void st(_Atomic uint64_t *p, uint64_t v) { atomic_store_explicit(p, v, memory_order_relaxed); }

static int leaf_has_starts(leaf *l) {
  uint64_t any = 0;
  for (unsigned k = 0; k < LEAF_UNITS / 64u; k++) any |= ld(&l->starts[k]);
  return any != 0;
}

/* Marks (lock held) that a used block starts at unit u, and the summary levels. */
static void start_set(md__arena *a, uint64_t u) {
  leaf *l = leaf_of(a, u);
  int had = leaf_has_starts(l);
  _Atomic uint64_t *w = &l->starts[(u & LEAF_MASK) >> 6];
  st(w, ld(w) | 1ull << (u & 63u));
  if (had) return;
  uint64_t i = u >> LEAF_BITS;
  for (unsigned k = 0; k < a->n_lv; k++, i >>= 6) {
    uint64_t v = ld(&a->lv[k][i >> 6]);
    st(&a->lv[k][i >> 6], v | 1ull << (i & 63u));
    if (v) break;
  }
}

static void start_clear(md__arena *a, uint64_t u) {
  leaf *l = leaf_of(a, u);
  _Atomic uint64_t *w = &l->starts[(u & LEAF_MASK) >> 6];
  st(w, ld(w) & ~(1ull << (u & 63u)));
  if (leaf_has_starts(l)) return;
  uint64_t i = u >> LEAF_BITS;
  for (unsigned k = 0; k < a->n_lv; k++, i >>= 6) {
    uint64_t v = ld(&a->lv[k][i >> 6]) & ~(1ull << (i & 63u));
    st(&a->lv[k][i >> 6], v);
    if (v) break;
  }
}

static unsigned top_bit(uint64_t m) { return 63u - (unsigned)__builtin_clzll(m); }

/* The greatest leaf index <= i whose `starts` has a bit, or -1. Any thread: bits of blocks
 * that others allocate or free meanwhile may be seen or not, but those of a block that stays
 * live, and the zeros inside it, are stable, so the answer for a unit inside such a block is
 * exact. */
static int64_t leaf_floor(const md__arena *a, uint64_t i) {
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
static uint64_t floor_start(const md__arena *a, uint64_t u) {
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
static uint64_t lookup(const md__arena *a, uint64_t o, uint64_t *start) {
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

/* ---- segregated free lists (TLSF) ------------------------------------------------------- */

static void mapping(uint64_t span, unsigned *fl, unsigned *sl) {
  unsigned lg = top_bit(span);
  *fl = lg - FL_MIN;
  *sl = (unsigned)(span >> (lg - SL_BITS)) & (SL_COUNT - 1u);
}

static uint64_t rspan(const md__arena *a, uint32_t i) { return (uint64_t)rp(a, i)->span_u << G_SHIFT; }

static void free_insert(md__arena *a, uint32_t i) {
  unsigned fl, sl;
  rec *b = rp(a, i);
  mapping(rspan(a, i), &fl, &sl);
  b->fprev = NIL;
  b->fnext = a->heads[fl][sl];
  if (b->fnext) rp(a, b->fnext)->fprev = i;
  a->heads[fl][sl] = i;
  a->sl_map[fl] |= 1u << sl;
  a->fl_map |= 1ull << fl;
}

static void free_remove(md__arena *a, uint32_t i) {
  unsigned fl, sl;
  rec *b = rp(a, i);
  mapping(rspan(a, i), &fl, &sl);
  if (b->fprev) rp(a, b->fprev)->fnext = b->fnext;
  else a->heads[fl][sl] = b->fnext;
  if (b->fnext) rp(a, b->fnext)->fprev = b->fprev;
  b->fprev = b->fnext = NIL;
  if (!a->heads[fl][sl]) {
    a->sl_map[fl] &= ~(1u << sl);
    if (!a->sl_map[fl]) a->fl_map &= ~(1ull << fl);
  }
}

/* A free block of at least `span` bytes, or NIL. O(1) unless the only fit is a block of the
 * request's own class that is not at the head of its list (then first fit over that list). */
static uint32_t free_find(const md__arena *a, uint64_t span) {
  unsigned fl, sl;
  mapping(span, &fl, &sl);
  if (fl >= FL_COUNT) return NIL;
  uint32_t own = a->heads[fl][sl];
  if (own && rspan(a, own) >= span) return own;
  /* Every block of a higher class is larger than any span of this one. */
  uint32_t sm = sl + 1u < SL_COUNT ? a->sl_map[fl] & (~0u << (sl + 1u)) : 0u;
  if (sm) return a->heads[fl][__builtin_ctz(sm)];
  uint64_t fm = fl + 1u < FL_COUNT ? a->fl_map & (~0ull << (fl + 1u)) : 0u;
  if (fm) {
    unsigned f = (unsigned)__builtin_ctzll(fm);
    return a->heads[f][__builtin_ctz(a->sl_map[f])];
  }
  for (uint32_t b = own; b; b = rp(a, b)->fnext)
    if (rspan(a, b) >= span) return b;
  return NIL;
}

/* The largest free span: the largest block of the highest non-empty class. */
static uint64_t largest_free(const md__arena *a) {
  if (!a->fl_map) return 0;
  unsigned f = top_bit(a->fl_map);
  unsigned s = 31u - (unsigned)__builtin_clz(a->sl_map[f]);
  uint64_t best = 0;
  for (uint32_t b = a->heads[f][s]; b; b = rp(a, b)->fnext)
    if (rspan(a, b) > best) best = rspan(a, b);
  return best;
}

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
static uint8_t cb(const md__arena *a, uint64_t i) {
  uint64_t c = cw(a, i >> 3);
  uint8_t b[8];
  memcpy(b, &c, 8);
  return b[i & 7u];
}

/* Whether v passes the signature test (lane 3 XOR lane 0 == sig), branch-free. */
static inline uint64_t sig_ok(uint64_t v, uint64_t sig) { return ((((v ^ (v >> 48)) ^ sig) & 0xFFFFu) - 1u) >> 63; }

/* 1 and the word w whose canary v is, or 0 (v is no canary of this arena). */
static int canary_of(const md__arena *a, uint64_t v, uint64_t *w) {
  if (!sig_ok(v, a->csig)) return 0;
  uint64_t x = (p48_inv(v & M48) ^ a->ckey) & M48;
  if (x >= a->reserved >> 3) return 0;
  *w = x;
  return 1;   /* the signature lane follows from the low 48 bits: v == cw(a, x) */
}

/* The first block of SIG_BLOCK words among the nw aligned words at p that holds a word
 * passing the canary's signature test (its first word's index), or nw. This loop sees every
 * word of an output: it is written for the compiler to vectorize, and compiled twice, the
 * second time for AVX2, which md__arena_create picks when the CPU has it (about twice as
 * fast: a 64 KiB output in about the time of a memcpy of it). */
#define SIG_BLOCK 32u
static inline __attribute__((always_inline)) size_t sig_scan_body(const uint8_t *p, size_t nw, uint64_t sig) {
  size_t b = 0;
  for (; b + SIG_BLOCK <= nw; b += SIG_BLOCK) {
    uint64_t acc = 0;
    for (size_t i = 0; i < SIG_BLOCK; i++) {
      uint64_t v;
      memcpy(&v, p + 8 * (b + i), 8);
      acc |= sig_ok(v, sig);
    }
    if (acc) return b;
  }
  uint64_t acc = 0;
  for (size_t i = b; i < nw; i++) {
    uint64_t v;
    memcpy(&v, p + 8 * i, 8);
    acc |= sig_ok(v, sig);
  }
  return acc ? b : nw;
}

static size_t sig_scan(const uint8_t *p, size_t nw, uint64_t sig) { return sig_scan_body(p, nw, sig); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) static size_t sig_scan_avx2(const uint8_t *p, size_t nw, uint64_t sig) {
  return sig_scan_body(p, nw, sig);
}
#endif

size_t md__arena_sig_scan(const uint8_t *p, size_t nw, uint64_t sig, int simd) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (simd && __builtin_cpu_supports("avx2")) return sig_scan_avx2(p, nw, sig);
#endif
  return sig_scan(p, nw, sig);
}

/* ---- arena bytes ------------------------------------------------------------------------ */

/* Red-zone bytes are read and repaired with atomic accesses: checks read them without the
 * lock while another thread may repair the same zone under it. */
static uint8_t zb(const md__arena *a, uint64_t i) { return __atomic_load_n(a->base + i, __ATOMIC_RELAXED); }
static uint64_t zw(const md__arena *a, uint64_t i) {
  return __atomic_load_n((const uint64_t *)(const void *)(a->base + i), __ATOMIC_RELAXED);
}

/* First byte in [from, to) that is not the canary, or `to`. */
static uint64_t zone_scan(const md__arena *a, uint64_t from, uint64_t to) {
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
static void zone_fill(md__arena *a, uint64_t from, uint64_t to) {
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
static void zone_restore(md__arena *a, uint64_t from, uint64_t to) {
  for (uint64_t i = zone_scan(a, from, to); i < to; i++) {
    uint8_t c = cb(a, i);
    if (zb(a, i) != c) __atomic_store_n(a->base + i, c, __ATOMIC_RELAXED);
  }
}

/* Writes poison over the red-zone bytes [from, to) with atomic stores: a full check may be
 * reading them (it skips the block once it sees the free's claim, and confirms under the lock
 * anything it found). */
static void zone_poison(md__arena *a, uint64_t from, uint64_t to) {
  uint64_t i = from;
  for (; i < to && (i & 7u); i++) __atomic_store_n(a->base + i, (uint8_t)MD__ARENA_POISON_BYTE, __ATOMIC_RELAXED);
  for (; i + 8 <= to; i += 8) __atomic_store_n((uint64_t *)(void *)(a->base + i), POISON64, __ATOMIC_RELAXED);
  for (; i < to; i++) __atomic_store_n(a->base + i, (uint8_t)MD__ARENA_POISON_BYTE, __ATOMIC_RELAXED);
}

/* First byte in [from, to) that is neither 0 nor poison, or `to`. */
static uint64_t scan_not_free(const md__arena *a, uint64_t from, uint64_t to) {
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
static void fill(md__arena *a, uint64_t off, uint64_t len, uint8_t byte, int large) {
  if (large) {
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

/* One device-memory reservation kept by the process for the next arena of the same size: a
 * device that used little of its memory (a fuzz input, a short trace) zeroes what it touched
 * and leaves the reservation, so the next device's first touches take no page faults and its
 * close no munmap (mapping, faulting and unmapping were 8 % of a fuzz input that opens a device
 * and closes it). Zeroed below the old high-water mark, it reads as a new mapping does. */
#define SPARE_MAX_HWM ((uint64_t)1 << 20)
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *spare_base;
static uint64_t spare_reserved;

static uint8_t *spare_take(uint64_t reserved) {
  uint8_t *m = NULL;
  pthread_mutex_lock(&spare_lock);
  if (spare_base && spare_reserved == reserved) {
    m = spare_base;
    spare_base = NULL;
  }
  pthread_mutex_unlock(&spare_lock);
  return m;
}

/* Keeps [base, base + reserved) (zero below hwm by the caller) as the spare, or unmaps it. */
static void spare_give(uint8_t *base, uint64_t reserved) {
  uint8_t *old = NULL;
  uint64_t old_reserved = 0;
  pthread_mutex_lock(&spare_lock);
  old = spare_base;
  old_reserved = spare_reserved;
  spare_base = base;
  spare_reserved = reserved;
  pthread_mutex_unlock(&spare_lock);
  if (old) munmap(old, old_reserved);
}

/* The simulator unloaded with its driver (dlclose), or the process exiting, gives it back. */
__attribute__((destructor)) static void spare_release(void) {
  pthread_mutex_lock(&spare_lock);
  if (spare_base) munmap(spare_base, spare_reserved);
  spare_base = NULL;
  pthread_mutex_unlock(&spare_lock);
}

void md__arena_destroy(md__arena *a) {
  if (!a) return;
  for (leaf *l = a->made, *next; l; l = next) {
    next = l->made_next;
    free(l);
  }
  free((void *)a->dir);
  for (unsigned k = 0; k < a->n_lv; k++) free((void *)a->lv[k]);
  for (uint64_t i = 0; i < a->n_chunks; i++) free(a->chunks[i]);
  free(a->chunks);
  if (a->base && a->hwm <= SPARE_MAX_HWM) {
    memset(a->base, 0, a->hwm);   /* above it the arena wrote nothing */
    spare_give(a->base, a->reserved);
  } else if (a->base) {
    munmap(a->base, a->reserved);
  }
  pthread_mutex_destroy(&a->lock);
  pthread_mutex_destroy(&a->report_lock);
  free(a);
}

/* splitmix64's finalizer: seeds to key material. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

md_status md__arena_create(uint64_t limit, uint64_t tag, uint64_t seed, md__arena **out, char *err, size_t errlen) {
  *out = NULL;
  if (limit == 0) limit = MD__ARENA_DEFAULT_LIMIT;
  if (limit > MD__ARENA_MAX_LIMIT) limit = MD__ARENA_MAX_LIMIT;
  md__arena *a = aligned_alloc(_Alignof(md__arena), sizeof *a);
  if (a) memset(a, 0, sizeof *a);
  if (!a) {
    if (err && errlen) snprintf(err, errlen, "sim: out of host memory for the arena");
    return MD_DEVICE_UNAVAILABLE;
  }
  pthread_mutex_init(&a->lock, NULL);
  pthread_mutex_init(&a->report_lock, NULL);
  a->limit = limit;
  a->reserved = round_up(limit, G) + 2 * G;
  a->units = a->reserved >> G_SHIFT;
  a->tag = tag;
  a->ckey = mix64(seed + 0x9e3779b97f4a7c15ull) & M48;
  a->csig = mix64(seed ^ 0x6d64632d63616e61ull) % 0xFFFFu + 1u;   /* "mdc-cana"; 1..0xFFFF */
  a->sig_scan = sig_scan;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) a->sig_scan = sig_scan_avx2;
#endif
  long pg = sysconf(_SC_PAGESIZE);
  a->page = pg > 0 ? (uint64_t)pg : 4096u;

  int ok = 1;
  a->n_leaves = (a->units + LEAF_UNITS - 1) >> LEAF_BITS;
  a->dir = calloc(a->n_leaves, sizeof *a->dir);
  ok = a->dir != NULL;
  for (uint64_t bits = a->n_leaves; ok;) {
    uint64_t words = (bits + 63) / 64;
    a->lv[a->n_lv] = calloc(words, sizeof *a->lv[0]);
    ok = a->lv[a->n_lv] != NULL;
    a->n_lv += ok;
    if (words == 1 || a->n_lv == MAX_LV) break;
    bits = words;
  }
  a->max_chunks = (a->units + 2 + REC_CHUNK - 1) >> REC_CHUNK_BITS;
  if (ok) ok = (a->chunks = calloc(a->max_chunks, sizeof *a->chunks)) != NULL;
  a->rec_next = 1;   /* record 0 is NIL */
  if (!ok || rec_reserve(a) != 0 || !leaf_make(a, 1) || !leaf_make(a, a->units - 1)) {
    md__arena_destroy(a);
    if (err && errlen) snprintf(err, errlen, "sim: out of host memory for the arena");
    return MD_DEVICE_UNAVAILABLE;
  }
  void *m = spare_take(a->reserved);
  if (!m) m = mmap(NULL, a->reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    if (err && errlen)
      snprintf(err, errlen, "sim: cannot reserve %" PRIu64 " bytes of device memory: %s", a->reserved,
               strerror(e));
    md__arena_destroy(a);
    return MD_DEVICE_UNAVAILABLE;
  }
  a->base = m;
  zone_fill(a, 0, G);   /* the guard: front red zone of block 1 */
  uint32_t first = rec_new(a);
  *rp(a, first) = (rec){.off_u = 1, .span_u = (uint32_t)(a->units - 1)};
  free_words(a, first);
  free_insert(a, first);
  a->n_blocks = 1;
  a->bytes_free = a->reserved - G;
  a->free_blocks = 1;
  a->hwm = G;
  *out = a;
  return MD_NONE;
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
  uint64_t span = round_up(bytes + R, G), span_u = span >> G_SHIFT;
  lock_hot(a);
  uint32_t bi = free_find(a, span);
  int split = bi && rp(a, bi)->span_u > span_u;
  /* A split adds a block: room for its record (see rec_reserve), and the leaves of the rest's
   * start and of this block's last unit (where its free may write an end tag). */
  if (split && (rec_reserve(a) != 0 || !leaf_make(a, rp(a, bi)->off_u + span_u) ||
                !leaf_make(a, rp(a, bi)->off_u + span_u - 1u)))
    bi = NIL;
  if (!bi) {
    pthread_mutex_unlock(&a->lock);
    atomic_fetch_add_explicit(&a->refused_transient, 1, memory_order_relaxed);
    return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  }
  rec *b = rp(a, bi);
  free_remove(a, bi);
  uint64_t u = b->off_u, s = u << G_SHIFT, hwm = a->hwm, end = s + span;
  /* The last R bytes of a span followed by another block are that block's front red zone, so
   * they hold the pattern before the lock is released: a block carved next from the rest of
   * this free block may be checked before this one is filled. A span taking the whole free
   * block finds the pattern there already (the free block's tail); a split writes it here. */
  uint64_t own_end = end < a->reserved ? end - R : end, tail_bad = end;
  uint8_t tail_byte = 0;
  if (split) {
    uint64_t tail_to = end < hwm ? end : hwm;
    if (span < MD__ARENA_MADVISE_MIN && own_end < tail_to) {
      tail_bad = scan_not_free(a, own_end, tail_to);
      if (tail_bad < tail_to) tail_byte = a->base[tail_bad];
      else tail_bad = end;
    }
    zone_fill(a, own_end, end);
    b->off_u = (uint32_t)(u + span_u);   /* the record stays with the rest */
    b->span_u -= (uint32_t)span_u;
    free_words(a, bi);
    free_insert(a, bi);
    a->n_blocks++;
  } else {
    if (span_u > 1) word_set(a, u + span_u - 1u, 0);   /* its end tag */
    rec_release(a, bi);
    a->free_blocks--;
  }
  word_set(a, u, W_USED | bytes);   /* not ready: checks skip it, frees refuse it */
  start_set(a, u);
  a->allocs++;
  a->live_blocks++;
  a->bytes_live += bytes;
  if (a->bytes_live > a->bytes_peak) a->bytes_peak = a->bytes_live;
  a->span_live += span;
  a->bytes_free -= span;
  if (end > a->hwm) a->hwm = end;
  pthread_mutex_unlock(&a->lock);

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
  fill(a, s, bytes, 0, bytes >= MD__ARENA_MADVISE_MIN);
  zone_fill(a, s + bytes, own_end);
  /* Nobody else writes the word of a block that is not ready (a free refuses it). */
  word_set(a, u, W_USED | W_READY | bytes);
  *off = s;
  return MD_NONE;
}

/* Where arena offset o lies in a red zone: 1 and the used (or freeing) block s with `size`
 * payload bytes and whether o is in its front zone (*front) or past its end, or 0. A byte of
 * both a back zone and the next block's front zone is named as past the end. Any thread. */
static int zone_owner(const md__arena *a, uint64_t o, uint64_t *s, uint64_t *size, int *front) {
  uint64_t bs = 0, w = lookup(a, o, &bs);
  if (w && o >= bs + (w & W_SIZE)) {
    *s = bs, *size = w & W_SIZE, *front = 0;
    return 1;
  }
  uint64_t next = (o | (G - 1)) + 1;
  if (next - o > R || next >= a->reserved) return 0;
  w = word_get(a, next >> G_SHIFT);
  if (!(w & W_USED)) return 0;   /* not a used (or freeing) block's start */
  *s = next, *size = w & W_SIZE, *front = 1;
  return 1;
}

/* Appends to buf where the damaged zone [from, to) of a red zone got its bytes when they are
 * the canary of another red zone (a kernel copied them: it read there). */
static void damage_origin(md__arena *a, uint64_t from, uint64_t to, char *buf, size_t len) {
  for (uint64_t i = (from + 7u) & ~(uint64_t)7; i + 8 <= to; i += 8) {
    uint64_t v = zw(a, i), w, s, size;
    int front;
    if (v == cw(a, i >> 3)) continue;
    if (canary_of(a, v, &w) && zone_owner(a, w << 3, &s, &size, &front))
      snprintf(buf, len, "; they are the red zone %s allocation 0x%" PRIx64 " (size %" PRIu64 ") at %c%" PRIu64
               ": read there", front ? "before" : "past the end of", a->tag | s, size, front ? '-' : '+',
               front ? s - (w << 3) : (w << 3) - s);
    return;   /* the first damaged whole word decides */
  }
}

/* Checks one red zone of the used block at s with `size` payload bytes; returns 1 when
 * damaged, and unless quiet reports it (message also to out). Any thread. */
static int check_zone(md__arena *a, uint64_t s, uint64_t size, int front, int quiet, char *out, size_t outlen) {
  uint64_t from = front ? s - R : s + size;
  uint64_t to = front ? s : s + span_of(size);
  uint64_t bad = zone_scan(a, from, to);
  if (bad == to) return 0;
  if (quiet) return 1;
  uint64_t n = 0;
  for (uint64_t i = bad; i < to; i++) n += zb(a, i) != cb(a, i);
  char origin[128] = "";
  damage_origin(a, from, to, origin, sizeof origin);
  if (front) {
    char also[96] = "";
    uint64_t pu = s > G ? floor_start(a, (s >> G_SHIFT) - 1u) : 0, pw = pu ? word_get(a, pu) : 0;
    if ((pw & W_USED) && (pu << G_SHIFT) + span_of(pw & W_SIZE) == s)   /* used or being freed */
      snprintf(also, sizeof also, " (or past the end of allocation 0x%" PRIx64 ", size %" PRIu64 ")",
               a->tag | pu << G_SHIFT, pw & W_SIZE);
    report(a, out, outlen,
           "sim: red zone hit: %" PRIu64 " byte(s) written before the start of allocation 0x%" PRIx64
           " (size %" PRIu64 "), first at -%" PRIu64 "%s%s",
           n, a->tag | s, size, s - bad, also, origin);
  } else {
    report(a, out, outlen,
           "sim: red zone hit: %" PRIu64 " byte(s) written past the end of allocation 0x%" PRIx64
           " (size %" PRIu64 "), first at +%" PRIu64 " (byte 0x%02x, not 0x%02x)%s",
           n, a->tag | s, size, bad - s, zb(a, bad), cb(a, bad), origin);
  }
  return 1;
}

int md__arena_free(md__arena *a, uint64_t off) {
  /* Claim the block without the lock: one of two racing frees wins, and from here on lookups
   * and checks see it as gone. A block not yet ready has not been handed out. */
  uint64_t u = off >> G_SHIFT, w = 0;
  int claimed = 0;
  if ((off & (G - 1)) == 0 && off >= G && off < a->reserved) {
    leaf *l = leaf_of(a, u);
    if (l) {
      _Atomic uint64_t *wp = &l->word[u & LEAF_MASK];
      w = atomic_load_explicit(wp, memory_order_acquire);
      while ((w & W_TYPE) == W_USED && (w & W_READY) && !claimed)
        claimed = atomic_compare_exchange_weak_explicit(wp, &w, (w & ~W_TYPE) | W_FREEING, memory_order_acq_rel,
                                                        memory_order_acquire);
    }
  }
  if (!claimed) {
    atomic_fetch_add_explicit(&a->bad_frees, 1, memory_order_relaxed);
    uint64_t s = 0, bw = lookup(a, off, &s);
    if (bw && s != off && off < s + (bw & W_SIZE))
      report(a, NULL, 0,
             "sim: bad free of 0x%" PRIx64 ": inside allocation 0x%" PRIx64 " (size %" PRIu64 "), not its start",
             a->tag | off, a->tag | s, bw & W_SIZE);
    else
      report(a, NULL, 0, "sim: bad free of 0x%" PRIx64 ": not a live allocation (double free, or never allocated)",
             a->tag | off);
    return -1;
  }
  uint64_t size = w & W_SIZE, span = span_of(size), end = off + span;
  uint64_t own_end = end < a->reserved ? end - R : end;
  /* The block is ours: check its red zones and poison it without the lock. Its last R bytes
   * are the next block's front red zone while a used block follows: they are left as they
   * are, and poisoned under the lock if the next block turns out to be free. */
  uint64_t hits = (uint64_t)check_zone(a, off, size, 1, 0, NULL, 0) + (uint64_t)check_zone(a, off, size, 0, 0, NULL, 0);
  if (hits) atomic_fetch_add_explicit(&a->redzone_hits, hits, memory_order_relaxed);
  fill(a, off, size, MD__ARENA_POISON_BYTE, span >= MD__ARENA_MADVISE_MIN);
  zone_poison(a, off + size, own_end);

  lock_hot(a);
  a->frees++;
  a->live_blocks--;
  a->bytes_live -= size;
  a->span_live -= span;
  a->bytes_free += span;
  a->free_blocks++;
  start_clear(a, u);
  /* Coalesce: the free block before (its last unit is u - 1: a start word of a one-unit
   * block, or an end tag) and the free block after (its start word at the end unit). */
  uint64_t start_u = u, end_u = end >> G_SHIFT;
  uint32_t ri = NIL;
  uint64_t pw = word_get(a, u - 1u);   /* unit 0 (the guard) has word 0 */
  if (is_free_word(pw)) {              /* p's tail, this block's front red zone, is now free inside */
    ri = (uint32_t)(pw & W_REC);
    rec *p = rp(a, ri);
    free_remove(a, ri);
    memset(a->base + off - R, MD__ARENA_POISON_BYTE, R);
    if (p->span_u > 1) word_set(a, u - 1u, 0);   /* p's end tag */
    word_set(a, u, 0);
    start_u = p->off_u;
    a->free_blocks--;
    a->n_blocks--;
  }
  uint64_t nw = end_u < a->units ? word_get(a, end_u) : 0;
  if (is_free_word(nw)) {              /* n keeps its own tail, which is now this block's */
    uint32_t ni = (uint32_t)(nw & W_REC);
    rec *n = rp(a, ni);
    free_remove(a, ni);
    memset(a->base + own_end, MD__ARENA_POISON_BYTE, R);
    word_set(a, end_u, 0);
    end_u += n->span_u;
    if (ri) rec_release(a, ni);
    else ri = ni;
    a->free_blocks--;
    a->n_blocks--;
  }
  if (!ri) ri = rec_new(a);   /* alloc kept room for it */
  *rp(a, ri) = (rec){.off_u = (uint32_t)start_u, .span_u = (uint32_t)(end_u - start_u)};
  free_words(a, ri);
  if (end_u < a->units)   /* the next block is not free: this is its front red zone */
    zone_restore(a, (end_u << G_SHIFT) - R, end_u << G_SHIFT);
  free_insert(a, ri);
  pthread_mutex_unlock(&a->lock);
  return 0;
}

/* ---- lookups ---------------------------------------------------------------------------- */

int md__arena_find(md__arena *a, uint64_t off, md__arena_alloc_info *out) {
  uint64_t s = 0, w = lookup(a, off, &s);
  if (!w || off >= s + (w & W_SIZE)) return 0;
  out->off = s;
  out->size = w & W_SIZE;
  return 1;
}

md__arena_where md__arena_locate(md__arena *a, uint64_t off, md__arena_alloc_info *out) {
  if (off < G || off >= a->reserved) return MD__ARENA_AT_OUTSIDE;
  uint64_t s = 0, w = lookup(a, off, &s);
  if (!w) return MD__ARENA_AT_FREE;
  out->off = s;
  out->size = w & W_SIZE;
  return off < s + out->size ? MD__ARENA_AT_PAYLOAD : MD__ARENA_AT_REDZONE;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* A damaged zone found without the lock, to be confirmed, reported and repaired under it (so
 * that two threads that see the same damage count it once). */
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

static void hits_init(hits *h) {
  h->v = h->local;
  h->n = 0;
  h->cap = sizeof h->local / sizeof h->local[0];
}

/* Free block record i (lock held): the part that must be 0/poison, below the high-water mark. */
static void free_body(const md__arena *a, uint32_t i, uint64_t *from, uint64_t *to) {
  const rec *b = rp(a, i);
  uint64_t off = (uint64_t)b->off_u << G_SHIFT, end = off + rspan(a, i);
  if (end < a->reserved) end -= R;
  if (end > a->hwm) end = a->hwm;
  *from = off;
  *to = end > off ? end : off;
}

/* Lock held: confirms each hit, reports, repairs. Returns the confirmed count. */
static uint64_t hits_settle_locked(md__arena *a, hits *h, char *msg, size_t len) {
  uint64_t confirmed = 0, poison = 0;
  for (size_t i = 0; i < h->n; i++) {
    uint64_t off = h->v[i].off, u = off >> G_SHIFT, w = word_get(a, u);
    char *out = confirmed + poison == 0 ? msg : NULL;   /* the first hit's message */
    if (h->v[i].kind == 2) {
      if (!is_free_word(w) || (w & W_END)) continue;
      uint32_t bi = (uint32_t)(w & W_REC);
      uint64_t from, to;
      free_body(a, bi, &from, &to);
      uint64_t bad = scan_not_free(a, from, to);
      if (bad == to) continue;
      report(a, out, len,
             "sim: poison hit: freed device memory at 0x%" PRIx64 " was written after it was freed "
             "(byte 0x%02x, free block 0x%" PRIx64 " of %" PRIu64 " bytes)",
             a->tag | bad, a->base[bad], a->tag | off, rspan(a, bi));
      for (uint64_t j = bad; j < to; j++)
        if (a->base[j] != 0) a->base[j] = MD__ARENA_POISON_BYTE;
      poison++;
    } else {
      if ((w & W_TYPE) != W_USED || !(w & W_READY)) continue;
      uint64_t size = w & W_SIZE;
      int front = h->v[i].kind == 0;
      if (!check_zone(a, off, size, front, 0, out, len)) continue;
      if (front) zone_restore(a, off - R, off);
      else zone_restore(a, off + size, off + span_of(size));
      confirmed++;
    }
  }
  if (confirmed) atomic_fetch_add_explicit(&a->redzone_hits, confirmed, memory_order_relaxed);
  if (poison) atomic_fetch_add_explicit(&a->poison_hits, poison, memory_order_relaxed);
  return confirmed + poison;
}

static uint64_t hits_settle(md__arena *a, hits *h, char *msg, size_t len) {
  if (!h->n) return 0;
  lock_hot(a);
  uint64_t n = hits_settle_locked(a, h, msg, len);
  pthread_mutex_unlock(&a->lock);
  if (h->v != h->local) free(h->v);
  return n;
}

uint64_t md__arena_check(md__arena *a, const md__arena_tensor *t, size_t n, char *msg, size_t len) {
  hits h;
  hits_init(&h);
  /* Duplicates are skipped among the first few only: a zone found twice is settled once. */
  uint64_t seen[16];
  size_t n_seen = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t s = 0, w = lookup(a, t[i].off, &s);
    if (!w || !(w & W_READY)) continue;
    int dup = 0;
    for (size_t j = 0; j < n_seen && !dup; j++) dup = seen[j] == s;
    if (dup) continue;
    if (n_seen < sizeof seen / sizeof seen[0]) seen[n_seen++] = s;
    uint64_t size = w & W_SIZE;
    if (check_zone(a, s, size, 1, 1, NULL, 0)) hits_add(&h, s, 0);
    if (check_zone(a, s, size, 0, 1, NULL, 0)) hits_add(&h, s, 1);
  }
  return hits_settle(a, &h, msg, len);
}

uint64_t md__arena_check_all(md__arena *a, char *msg, size_t len) {
  hits h;
  hits_init(&h);
  lock_cold(a);
  /* Each byte once: back zones of used blocks, the guard as the first block's front zone, a
   * free block's body (its tail is the next block's front zone, which is checked as such).
   * Blocks being freed (their poisoning runs without the lock) and blocks not yet ready are
   * skipped. */
  for (uint64_t u = 1; u < a->units;) {
    uint64_t w = word_get(a, u), s = u << G_SHIFT, span_u;
    if (is_free_word(w)) {
      uint32_t bi = (uint32_t)(w & W_REC);
      uint64_t from, to;
      free_body(a, bi, &from, &to);
      if (scan_not_free(a, from, to) < to) hits_add(&h, s, 2);
      span_u = rp(a, bi)->span_u;
    } else {   /* used, or being freed */
      uint64_t size = w & W_SIZE;
      if ((w & W_TYPE) == W_USED && (w & W_READY)) {
        /* The front zone is the previous block's tail: checked here only when that block is
         * free (or the guard); a used one's back zone check covers it. */
        if ((u == 1 || is_free_word(word_get(a, u - 1u))) && check_zone(a, s, size, 1, 1, NULL, 0))
          hits_add(&h, s, 0);
        if (check_zone(a, s, size, 0, 1, NULL, 0)) hits_add(&h, s, 1);
      }
      span_u = span_of(size) >> G_SHIFT;
    }
    u += span_u;
  }
  uint64_t n = h.n ? hits_settle_locked(a, &h, msg, len) : 0;
  pthread_mutex_unlock(&a->lock);
  if (h.v != h.local) free(h.v);
  return n;
}

/* ---- reads past an end ------------------------------------------------------------------ */

/* An allocation a launch's tensors point into, and the first tensor that does (inputs come
 * first in the caller's order). */
typedef struct src {
  uint64_t s, size;
  const md__arena_tensor *t;
} src;

/* The red zone of one of srcs[0..ns) that word w (offsets [8w, 8w+8)) lies in, whole: its
 * index, *front and *rel (the offset from the allocation's start), or -1. */
static int src_zone(const src *srcs, size_t ns, uint64_t w, int *front, uint64_t *rel) {
  uint64_t z = w << 3;
  for (size_t k = 0; k < ns; k++) {
    uint64_t s = srcs[k].s, e = s + srcs[k].size;
    if (z >= e && z + 8 <= s + span_of(srcs[k].size)) {
      *front = 0, *rel = z - s;
      return (int)k;
    }
    if (z + 8 <= s && z >= s - R) {
      *front = 1, *rel = s - z;
      return (int)k;
    }
  }
  return -1;
}

/* Output o, after the kernel: 1 and a message in buf when it holds red-zone bytes of srcs. */
static int output_reads(md__arena *a, const md__arena_tensor *t, size_t n, const md__arena_tensor *o,
                        const src *srcs, size_t ns, int full, char *buf, size_t len) {
  const uint8_t *base = a->base;
  uint64_t ob = o->off, oe = o->off + o->bytes, oalloc = 0;
  for (size_t k = 0; k < ns; k++)
    if (ob >= srcs[k].s && ob < srcs[k].s + srcs[k].size) oalloc = srcs[k].s;
  /* Element-wise: the bytes just past an input's allocation, as far from the output's start
   * as they are from the input's. */
  for (size_t i = 0; i < n; i++) {
    if (t[i].output) continue;
    for (size_t k = 0; k < ns; k++) {
      uint64_t e = srcs[k].s + srcs[k].size, z = srcs[k].s + span_of(srcs[k].size);
      if (t[i].off < srcs[k].s || t[i].off >= e) continue;
      uint64_t d = e - t[i].off, q = ob + d, run = 0;
      if (d + 4 > o->bytes) break;
      while (q + run < oe && e + run < z && base[q + run] == cb(a, e + run)) run++;
      if (run >= 4) {
        snprintf(buf, len,
                 "sim: red zone read: %" PRIu64 " byte(s) past the end of allocation 0x%" PRIx64 " (size %" PRIu64
                 ", input %u), from +%" PRIu64 ", are in output %u at +%" PRIu64,
                 run, a->tag | srcs[k].s, srcs[k].size, t[i].index, srcs[k].size, o->index, q - oalloc);
        return 1;
      }
      break;
    }
  }
  if (!full && o->bytes > MD__ARENA_READ_SCAN_MAX) return 0;
  /* Everywhere: whole canary words of those zones, 8-byte aligned. */
  uint64_t from = (ob + 7u) & ~(uint64_t)7, to = oe & ~(uint64_t)7;
  if (to <= from) return 0;
  size_t nw = (size_t)((to - from) >> 3);
  for (size_t b = 0; b < nw; b += SIG_BLOCK) {
    size_t f = a->sig_scan(base + from + 8 * b, nw - b, a->csig);
    if (f >= nw - b) break;
    b += f;
    for (size_t j = b; j < b + SIG_BLOCK && j < nw; j++) {
      uint64_t v, w, rel, q = from + 8 * j;
      int front, k;
      memcpy(&v, base + q, 8);
      if (!canary_of(a, v, &w) || (k = src_zone(srcs, ns, w, &front, &rel)) < 0) continue;
      uint64_t run = 8;   /* the bytes of that zone that follow, whole words */
      for (uint64_t x = q + 8; x + 8 <= oe; x += 8) {
        uint64_t v2;
        memcpy(&v2, base + x, 8);
        if (v2 != cw(a, w + (x - q) / 8)) break;
        run += 8;
      }
      snprintf(buf, len,
               "sim: red zone read: %" PRIu64 " byte(s) %s allocation 0x%" PRIx64 " (size %" PRIu64
               ", %s %u), from %c%" PRIu64 ", are in output %u at +%" PRIu64,
               run, front ? "before the start of" : "past the end of", a->tag | srcs[k].s, srcs[k].size,
               srcs[k].t->output ? "output" : "input", srcs[k].t->index, front ? '-' : '+', rel, o->index,
               q - oalloc);
      return 1;
    }
  }
  return 0;
}

uint64_t md__arena_check_reads(md__arena *a, const md__arena_tensor *t, size_t n, int full, char *msg, size_t len) {
  src local[16], *srcs = n <= 16 ? local : malloc(n * sizeof *srcs);
  if (!srcs) return 0;   /* host memory short: this launch is not searched */
  size_t ns = 0;
  int outputs = 0;
  for (size_t i = 0; i < n; i++) {
    outputs |= t[i].output;
    uint64_t s = 0, w = lookup(a, t[i].off, &s);
    if (!w || !(w & W_READY)) continue;
    int dup = 0;
    for (size_t k = 0; k < ns && !dup; k++) dup = srcs[k].s == s;
    if (!dup) srcs[ns++] = (src){s, w & W_SIZE, &t[i]};
  }
  uint64_t found = 0;
  for (size_t i = 0; outputs && i < n; i++) {
    char buf[MD__ARENA_REPORT_MAX];
    if (!t[i].output || !output_reads(a, t, n, &t[i], srcs, ns, full, buf, sizeof buf)) continue;
    report(a, found ? NULL : msg, len, "%s", buf);
    found++;
  }
  if (found) atomic_fetch_add_explicit(&a->redzone_reads, found, memory_order_relaxed);
  if (srcs != local) free(srcs);
  return found;
}

void md__arena_stats_get(md__arena *a, md__arena_stats *out) {
  memset(out, 0, sizeof *out);
  lock_cold(a);
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
  pthread_mutex_unlock(&a->lock);
  out->refused_persistent = atomic_load_explicit(&a->refused_persistent, memory_order_relaxed);
  out->refused_transient = atomic_load_explicit(&a->refused_transient, memory_order_relaxed);
  out->bad_frees = atomic_load_explicit(&a->bad_frees, memory_order_relaxed);
  out->redzone_hits = atomic_load_explicit(&a->redzone_hits, memory_order_relaxed);
  out->poison_hits = atomic_load_explicit(&a->poison_hits, memory_order_relaxed);
  out->redzone_reads = atomic_load_explicit(&a->redzone_reads, memory_order_relaxed);
  if (out->largest_free > R) {
    uint64_t fit = out->largest_free - R;
    out->max_fit_now = fit < out->limit ? fit : out->limit;
  }
  out->fragmentation = out->bytes_free ? 1.0 - (double)out->largest_free / (double)out->bytes_free : 0.0;
}
