/* sim_arena.c - the simulated device's address space: a bounded arena (its reservation, kept
 * for the next device when little was used), the unit table that lookups read without a lock,
 * and a TLSF allocator. Red zones and poison checks: sim_arena_redzone.c; reports and
 * statistics: sim_arena_stats.c. Layout, invariants, the canary and locking: sim_arena.h; the
 * metadata: sim_arena_int.h. */
#include "sim_arena_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- records and the unit table ----------------------------------------------------------- */

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

/* Writes (lock held) the words of free block record i: its start, and its last unit. */
static void free_words(md__arena *a, uint32_t i) {
  const rec *b = rp(a, i);
  word_set(a, b->off_u, W_FREE | i);
  if (b->span_u > 1) word_set(a, (uint64_t)b->off_u + b->span_u - 1u, W_FREE | W_END | i);
}

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

/* ---- segregated free lists (TLSF) ------------------------------------------------------- */

static void mapping(uint64_t span, unsigned *fl, unsigned *sl) {
  unsigned lg = top_bit(span);
  *fl = lg - FL_MIN;
  *sl = (unsigned)(span >> (lg - SL_BITS)) & (SL_COUNT - 1u);
}

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

/* The largest free span (sim_arena_int.h). */
uint64_t md__arena_largest_free(const md__arena *a) {
  if (!a->fl_map) return 0;
  unsigned f = top_bit(a->fl_map);
  unsigned s = 31u - (unsigned)__builtin_clz(a->sl_map[f]);
  uint64_t best = 0;
  for (uint32_t b = a->heads[f][s]; b; b = rp(a, b)->fnext)
    if (rspan(a, b) > best) best = rspan(a, b);
  return best;
}

/* ---- arena bytes ------------------------------------------------------------------------ */

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
  md__arena_canary_init(a, seed);
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
      md__arena_report_to(a, NULL, 0,
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
      md__arena_report_to(a, NULL, 0,
                          "sim: bad free of 0x%" PRIx64 ": inside allocation 0x%" PRIx64 " (size %" PRIu64
                          "), not its start",
                          a->tag | off, a->tag | s, bw & W_SIZE);
    else
      md__arena_report_to(a, NULL, 0,
                          "sim: bad free of 0x%" PRIx64 ": not a live allocation (double free, or never allocated)",
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

