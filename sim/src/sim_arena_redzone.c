/* sim_arena_redzone.c - the arena's red zones and poison: the canary's scan, the checks of red
 * zones and freed memory after launches and on demand, and the search of a launch's outputs for
 * red-zone bytes it read. The canary and the byte-level scans: sim_arena_int.h; what the
 * checks promise: sim_arena.h. */
#include "sim_arena_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the canary's key and signature scan ----------------------------------------------- */

/* The first block of SIG_BLOCK words among the nw aligned words at p that holds a word
 * passing the canary's signature test (its first word's index), or nw. This loop sees every
 * word of an output: it is written for the compiler to vectorize, and compiled twice, the
 * second time for AVX2, which md__arena_canary_init picks when the CPU has it (about twice as
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

/* splitmix64's finalizer: seeds to key material. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void md__arena_canary_init(md__arena *a, uint64_t seed) {
  a->ckey = mix64(seed + 0x9e3779b97f4a7c15ull) & M48;
  a->csig = mix64(seed ^ 0x6d64632d63616e61ull) % 0xFFFFu + 1u;   /* "mdc-cana"; 1..0xFFFF */
  a->sig_scan = sig_scan;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) a->sig_scan = sig_scan_avx2;
#endif
}

/* ---- red-zone damage: whose, and the report ------------------------------------------------ */

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

/* The report of check_zone (sim_arena_int.h), out of line: the common case, an intact zone,
 * is the inlined scan alone. */
void md__arena_zone_report(md__arena *a, uint64_t s, uint64_t size, int front, uint64_t bad, char *out,
                           size_t outlen) {
  uint64_t from = front ? s - R : s + size;
  uint64_t to = front ? s : s + span_of(size);
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
    md__arena_report_to(a, out, outlen,
                        "sim: red zone hit: %" PRIu64 " byte(s) written before the start of allocation 0x%" PRIx64
                        " (size %" PRIu64 "), first at -%" PRIu64 "%s%s",
                        n, a->tag | s, size, s - bad, also, origin);
  } else {
    md__arena_report_to(a, out, outlen,
                        "sim: red zone hit: %" PRIu64 " byte(s) written past the end of allocation 0x%" PRIx64
                        " (size %" PRIu64 "), first at +%" PRIu64 " (byte 0x%02x, not 0x%02x)%s",
                        n, a->tag | s, size, bad - s, zb(a, bad), cb(a, bad), origin);
  }
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
      md__arena_report_to(a, out, len,
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
    md__arena_report_to(a, found ? NULL : msg, len, "%s", buf);
    found++;
  }
  if (found) atomic_fetch_add_explicit(&a->redzone_reads, found, memory_order_relaxed);
  if (srcs != local) free(srcs);
  return found;
}

