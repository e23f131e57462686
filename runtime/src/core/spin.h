/* spin.h - private to the runtime: a tiny lock for short metadata sections (a buffer's fields,
 * a prepared model's free list of execution contexts), held for a few loads and stores. */
#ifndef MD_SPIN_H
#define MD_SPIN_H

#include <sched.h>
#include <stdatomic.h>

typedef struct md__spin { atomic_flag f; } md__spin;

static inline void md__spin_lock(md__spin *s) {
  while (atomic_flag_test_and_set_explicit(&s->f, memory_order_acquire)) sched_yield();
}
static inline void md__spin_unlock(md__spin *s) { atomic_flag_clear_explicit(&s->f, memory_order_release); }

#endif
