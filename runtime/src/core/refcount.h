/* refcount.h - private to the runtime: saturating reference counts (after Linux refcount_t).
 *
 * Increment is relaxed; decrement is acquire-release, so the thread that drops the last
 * reference sees every write made under the other references. (Linux uses a release
 * decrement plus an acquire fence at zero; ThreadSanitizer does not model standalone fences,
 * so the decrement carries both orders itself.) A count
 * that would overflow saturates at MD__REF_SATURATED and stays there (the object leaks rather
 * than being freed under a user); a decrement below zero is a bug: it is counted in
 * md__refcount_underflows and the count is left at zero. */
#ifndef MD_REFCOUNT_H
#define MD_REFCOUNT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define MD__REF_SATURATED 0xC0000000u

typedef struct md__ref { _Atomic uint32_t n; } md__ref;

/* Process-wide count of underflows and saturations seen (a non-zero value is a runtime bug). */
extern _Atomic uint64_t md__refcount_underflows;
extern _Atomic uint64_t md__refcount_saturations;

static inline void md__ref_init(md__ref *r, uint32_t n) { atomic_store_explicit(&r->n, n, memory_order_relaxed); }

/* Takes a reference on an object the caller already holds one on. */
static inline void md__ref_get(md__ref *r) {
  uint32_t old = atomic_fetch_add_explicit(&r->n, 1, memory_order_relaxed);
  if (old == 0 || old >= MD__REF_SATURATED) {
    /* 0: get on a dead object (bug); saturated region: pin it there. */
    atomic_store_explicit(&r->n, MD__REF_SATURATED, memory_order_relaxed);
    atomic_fetch_add_explicit(old == 0 ? &md__refcount_underflows : &md__refcount_saturations, 1,
                              memory_order_relaxed);
  }
}

/* Takes a reference unless the count is zero (lookup from a table). */
static inline bool md__ref_get_unless_zero(md__ref *r) {
  uint32_t old = atomic_load_explicit(&r->n, memory_order_relaxed);
  do {
    if (old == 0) return false;
    if (old >= MD__REF_SATURATED) return true;
  } while (!atomic_compare_exchange_weak_explicit(&r->n, &old, old + 1, memory_order_acquire,
                                                  memory_order_relaxed));
  return true;
}

/* Drops a reference; true when it was the last one (the caller frees the object). */
static inline bool md__ref_put(md__ref *r) {
  uint32_t old = atomic_load_explicit(&r->n, memory_order_relaxed);
  do {
    if (old >= MD__REF_SATURATED) return false;   /* saturated: never freed */
    if (old == 0) {
      atomic_fetch_add_explicit(&md__refcount_underflows, 1, memory_order_relaxed);
      return false;
    }
  } while (!atomic_compare_exchange_weak_explicit(&r->n, &old, old - 1, memory_order_acq_rel,
                                                  memory_order_relaxed));
  return old == 1;
}

#endif
