/* handles.c - the handle table: slot + generation + keyed MAC, lock-free lookups. */
#include "mutant.h"
#include "handles.h"

#include <sched.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_MASK ((1u << MD__HT_SLOT_BITS) - 1u)

static md__hentry *slot_entry(md__htable *t, uint32_t slot) {
  md__hentry *chunk = atomic_load_explicit(&t->chunks[slot >> MD__HT_CHUNK_BITS], memory_order_acquire);
  return chunk ? &chunk[slot & (MD__HT_CHUNK - 1u)] : NULL;
}

void md__htable_init(md__htable *t, const uint8_t key[16], md__hdestroy_fn destroy, void *ctx) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->lock, NULL);
  t->next_unused = 1;
  memcpy(t->key, key, sizeof t->key);
  t->destroy = destroy;
  t->ctx = ctx;
}

/* One zeroed chunk kept by the process for the next table: a device's first handle needs a
 * chunk (4096 entries, 256 KiB), and zeroing a new one was 5 % of a fuzz input that opens a
 * device, issues a few handles and closes it. A closing table zeroes only the entries it used
 * (slots are issued in order) and leaves its chunk here. */
static _Atomic(md__hentry *) spare_chunk;

/* A driver unloaded with dlclose (or a process exiting) gives the spare back. */
__attribute__((destructor)) static void spare_chunk_release(void) {
  free(atomic_exchange_explicit(&spare_chunk, NULL, memory_order_acquire));
}

static md__hentry *chunk_new(void) {
  md__hentry *c = atomic_exchange_explicit(&spare_chunk, NULL, memory_order_acquire);
  if (c) return c;
  c = aligned_alloc(64, MD__HT_CHUNK * sizeof *c);
  if (c) memset(c, 0, MD__HT_CHUNK * sizeof *c);
  return c;
}

/* c's entries [0, used) were written; the rest are still zero. */
static void chunk_free(md__hentry *c, uint32_t used) {
  if (!c) return;
  memset(c, 0, (size_t)used * sizeof *c);
  c = atomic_exchange_explicit(&spare_chunk, c, memory_order_acq_rel);
  free(c);
}

void md__htable_fini(md__htable *t) {
  /* Chunks are made in slot order: none past the one holding the last slot ever issued, and
   * in each only the entries below next_unused were ever written. */
  uint32_t n = ((t->next_unused - 1u) >> MD__HT_CHUNK_BITS) + 1u;
  for (uint32_t i = 0; i < n && i < MD__HT_MAX_CHUNKS; i++) {
    uint64_t first = (uint64_t)i << MD__HT_CHUNK_BITS, end = t->next_unused;
    uint32_t used = end <= first ? 0 : end - first >= MD__HT_CHUNK ? MD__HT_CHUNK : (uint32_t)(end - first);
    chunk_free(atomic_load(&t->chunks[i]), used);
  }
  pthread_mutex_destroy(&t->lock);
}

/* The MAC binds the handle to its slot, generation, kind and owner. */
static uint32_t handle_mac(const md__htable *t, uint32_t slot, uint32_t gen, md__kind kind, uint64_t owner) {
  if (MD_MUTANT(event_mac_missing) && kind == MD__KIND_EVENT) return 0; /* Mutant: events have no MAC. */
  if (MD_MUTANT(stale_after_gen_wrap)) gen &= 0xffu;  /* Mutant: only the generation bits the handle shows. */
  if (MD_MUTANT(mac_ignores_generation)) gen = 0;     /* Mutant: the slot alone. */
  uint8_t msg[20], out[crypto_shorthash_BYTES];
  memcpy(msg, &slot, 4);
  memcpy(msg + 4, &gen, 4);
  uint32_t k = (uint32_t)kind;
  memcpy(msg + 8, &k, 4);
  memcpy(msg + 12, &owner, 8);
  crypto_shorthash(out, msg, sizeof msg, t->key);
  uint32_t mac;
  memcpy(&mac, out, sizeof mac);
  return mac;
}

md_status md__handle_issue(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                           md_handle *out, md__hentry **entry) {
  static const uint64_t none[2] = {0, 0};
  return md__handle_issue_tagged(t, kind, owner, obj, none, out, entry);
}

_Atomic(md__race_fn) md__race_hook;

static md_status issue(md__htable *t, md__kind kind, uint64_t owner, void *obj, const uint64_t tag[2],
                       uint32_t refs, md_handle *out, md__hentry **entry);

md_status md__handle_issue_tagged(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                                  const uint64_t tag[2], md_handle *out, md__hentry **entry) {
  return issue(t, kind, owner, obj, tag, 1, out, entry);
}

md_status md__handle_issue_held(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                                md_handle *out, md__hentry **entry) {
  static const uint64_t none[2] = {0, 0};
  return issue(t, kind, owner, obj, none, 2, out, entry);
}

/* Issues a handle whose entry starts with `refs` references (the table's, and the caller's). */
static md_status issue(md__htable *t, md__kind kind, uint64_t owner, void *obj, const uint64_t tag[2],
                       uint32_t refs, md_handle *out, md__hentry **entry) {
  pthread_mutex_lock(&t->lock);
  uint32_t slot = t->free_head;
  md__hentry *e;
  if (slot) {
    e = slot_entry(t, slot);
    t->free_head = e->next_free;
  } else {
    if (t->next_unused > MD__HT_MAX_SLOTS) {
      pthread_mutex_unlock(&t->lock);
      return MD_RESOURCE_EXHAUSTED_TRANSIENT;
    }
    slot = t->next_unused;
    uint32_t c = slot >> MD__HT_CHUNK_BITS;
    if (!atomic_load_explicit(&t->chunks[c], memory_order_relaxed)) {
      md__hentry *chunk = chunk_new();
      if (!chunk) {
        pthread_mutex_unlock(&t->lock);
        return MD_RESOURCE_EXHAUSTED_TRANSIENT;
      }
      atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    }
    t->next_unused++;
    e = slot_entry(t, slot);
  }
  if (!MD_MUTANT(stale_slot_token)) e->gen++; /* Mutant: a reused slot keeps its generation. */
  atomic_store_explicit(&e->kind, (uint8_t)kind, memory_order_relaxed);
  e->owner = owner;
  e->obj = obj;
  e->tag[0] = tag[0];
  e->tag[1] = tag[1];
  e->next_free = 0;
  md__ref_init(&e->ref, refs);
  uint64_t h = ((uint64_t)handle_mac(t, slot, e->gen, kind, owner) << 32) |
               ((uint64_t)(e->gen & 0xffu) << MD__HT_SLOT_BITS) | slot;
  atomic_store_explicit(&e->issued, h, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed);
  /* Publishing the handle last: a lookup that sees it sees obj, owner and the count. */
  atomic_store_explicit(&e->handle, h, memory_order_release);
  pthread_mutex_unlock(&t->lock);
  *out = h;
  if (entry) *entry = e;
  return MD_NONE;
}

md__hentry *md__handle_get(md__htable *t, md_handle h, md__kind kind) {
  uint32_t slot = (uint32_t)h & SLOT_MASK;
  if (h == 0 || slot == 0) return NULL;
  md__hentry *e = slot_entry(t, slot);
  if (!e) return NULL;
  /* Mutant mac_unchecked: only slot and generation (the low half) are compared, not the MAC. */
  uint64_t mask = MD_MUTANT(mac_unchecked) ? UINT32_MAX : UINT64_MAX;
  if ((atomic_load_explicit(&e->handle, memory_order_acquire) & mask) != (h & mask)) return NULL;
  if (!md__ref_get_unless_zero(&e->ref)) return NULL;
  /* The slot may have been released and reissued between the compare and the reference. */
  uint64_t now = atomic_load_explicit(&e->handle, memory_order_acquire);
  if (now == 0 || (now & mask) != (h & mask) || atomic_load_explicit(&e->kind, memory_order_relaxed) != (uint8_t)kind) {
    md__handle_put(t, e);
    return NULL;
  }
  return e;
}

void md__handle_put(md__htable *t, md__hentry *e) {
  if (!md__ref_put(&e->ref)) return;
  t->destroy(t->ctx, e);
  pthread_mutex_lock(&t->lock);
  uint32_t slot = (uint32_t)atomic_load_explicit(&e->issued, memory_order_relaxed) & SLOT_MASK;
  e->obj = NULL;
  e->next_free = t->free_head;
  t->free_head = slot;
  atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
  pthread_mutex_unlock(&t->lock);
}

/* ---- per-thread reference caches (handles.h) ----
 * A slot holds an entry pointer with three flag bits: BUSY while a call of its thread uses it,
 * DEAD when a kill found it busy (that thread then drops the reference), HELD while another
 * thread (a kill's steal, md__htable_unpin_idle) works on an idle slot's pin. Only the owner
 * sets BUSY and makes a slot non-zero; another thread only moves an idle slot to HELD (and from
 * there to 0, or back to idle) or a busy one to DEAD. The owner-only arrays say which handle
 * and table each slot was filled for, and its pin; whoever moved the slot away from idle (to
 * BUSY, HELD or 0) is the only one to touch its pin. The caches of all threads are one static
 * array: a thread that ends drops its references and its cache is reused by the next thread
 * that needs one. */
#define RC_BUSY ((uintptr_t)1)
#define RC_DEAD ((uintptr_t)2)
#define RC_HELD ((uintptr_t)4)
#define RC_FLAGS (RC_BUSY | RC_DEAD | RC_HELD)

typedef struct refcache {
  _Alignas(64) _Atomic uintptr_t slot[MD__RC_SLOTS];
  _Alignas(64) uint64_t handle[MD__RC_SLOTS];   /* owner-only */
  md__htable *table[MD__RC_SLOTS];              /* owner-only */
  void *pin[MD__RC_SLOTS];                      /* see above */
  uint32_t victim;                              /* owner-only: next slot to evict */
  _Atomic int in_use;
} refcache;

/* The caches live in static storage: nothing to free when the driver is unloaded (dlclose), and
 * nothing for a leak checker to find. A thread beyond the first MAX_CACHES that use the driver
 * at once looks handles up with plain references. */
#define MAX_CACHES 256u
static refcache caches[MAX_CACHES];
static _Atomic uint32_t n_caches;   /* caches[0, n_caches) have been handed out at least once */
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static _Atomic int cache_key_made;
static _Thread_local refcache *mine;

/* Drops a slot's pin, then its entry reference (the pin may live inside the object). The
 * caller has the slot to itself: it moved it to 0 or holds it busy or HELD. */
static void slot_drop(md__htable *t, refcache *rc, unsigned i, md__hentry *e) {
  void *p = rc->pin[i];
  rc->pin[i] = NULL;
  if (p && t->unpin) t->unpin(t->ctx, p);
  if (e) md__handle_put(t, e);
}

/* An idle slot's value, waiting out a HELD (another thread is dropping its pin: a few loads and
 * a storage put, never a block). */
static uintptr_t slot_settled(refcache *rc, unsigned i) {
  uintptr_t v;
  while ((v = atomic_load_explicit(&rc->slot[i], memory_order_acquire)) & RC_HELD) sched_yield();
  return v;
}

/* A thread ends: its idle references go (it holds no busy one: no call of it runs). */
static void cache_exit(void *p) {
  refcache *rc = p;
  for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
    uintptr_t v = slot_settled(rc, i);
    if (v && !(v & RC_FLAGS) && atomic_compare_exchange_strong(&rc->slot[i], &v, 0))
      slot_drop(rc->table[i], rc, i, (md__hentry *)v);
    rc->handle[i] = 0;
    rc->table[i] = NULL;
  }
  mine = NULL;
  atomic_store_explicit(&rc->in_use, 0, memory_order_release);
}

static void make_key(void) {
  if (pthread_key_create(&cache_key, cache_exit) == 0) atomic_store(&cache_key_made, 1);
}

/* The driver is unloaded (or the process ends): no thread may run cache_exit in code that is
 * going away. */
__attribute__((destructor)) static void caches_unload(void) {
  if (atomic_load(&cache_key_made)) pthread_key_delete(cache_key);
  atomic_store(&cache_key_made, 0);
}

static refcache *my_cache(void) {
  if (mine) return mine;
  pthread_once(&cache_key_once, make_key);
  if (!atomic_load(&cache_key_made)) return NULL;
  refcache *rc = NULL;
  uint32_t n = atomic_load_explicit(&n_caches, memory_order_acquire);
  for (uint32_t i = 0; i < n && !rc; i++) {
    int free_ = 0;
    if (atomic_compare_exchange_strong(&caches[i].in_use, &free_, 1)) rc = &caches[i];
  }
  while (!rc && n < MAX_CACHES) {
    /* A fresh one: claim index n (another thread may take it first: then try the next). */
    if (atomic_compare_exchange_weak(&n_caches, &n, n + 1)) {
      int free_ = 0;
      if (atomic_compare_exchange_strong(&caches[n].in_use, &free_, 1)) rc = &caches[n];
    }
  }
  if (!rc) return NULL;
  if (pthread_setspecific(cache_key, rc) != 0) {
    atomic_store_explicit(&rc->in_use, 0, memory_order_release);
    return NULL;
  }
  mine = rc;
  return rc;
}

/* Takes back the references every thread's cache holds on e, whose handle was just killed:
 * idle slots are emptied (their pin and reference dropped here), busy ones marked dead (their
 * thread drops them when its call ends). The caller holds a reference of its own. */
static void steal(md__htable *t, md__hentry *e) {
  uint32_t n = atomic_load_explicit(&n_caches, memory_order_acquire);
  for (uint32_t c = 0; c < n; c++) {
    refcache *rc = &caches[c];
    for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
      uintptr_t v = atomic_load(&rc->slot[i]);
      while ((v & ~RC_FLAGS) == (uintptr_t)e && !(v & RC_DEAD)) {
        if (v & RC_HELD) {
          sched_yield();
          v = atomic_load(&rc->slot[i]);
        } else if (v & RC_BUSY) {
          if (atomic_compare_exchange_weak(&rc->slot[i], &v, v | RC_DEAD)) break;
        } else if (atomic_compare_exchange_weak(&rc->slot[i], &v, v | RC_HELD)) {
          void *p = rc->pin[i];
          rc->pin[i] = NULL;
          atomic_store(&rc->slot[i], 0);
          if (p && t->unpin) t->unpin(t->ctx, p);
          md__handle_put(t, e);
          break;
        }
      }
    }
  }
}

md__hentry *md__handle_use(md__htable *t, md_handle h, md__kind kind, md__use *u) {
  refcache *rc = my_cache();
  int empty = -1;
  for (unsigned i = 0; rc && i < MD__RC_SLOTS; i++) {
    uintptr_t v = atomic_load_explicit(&rc->slot[i], memory_order_acquire);
    if (rc->handle[i] != h || rc->table[i] != t || !h) {
      if (!v && empty < 0) empty = (int)i;
      continue;
    }
    if (!v) {   /* stolen by a kill */
      rc->handle[i] = 0;
      if (empty < 0) empty = (int)i;
      continue;
    }
    if ((v & RC_FLAGS) || !atomic_compare_exchange_strong(&rc->slot[i], &v, v | RC_BUSY)) continue;
    md__hentry *e = (md__hentry *)v;
    if (atomic_load(&e->handle) == h && atomic_load_explicit(&e->kind, memory_order_relaxed) == (uint8_t)kind) {
      u->e = e;
      u->slot = (int8_t)i;
      return e;   /* the hit: no reference count moved */
    }
    /* Killed since it was cached (a kill that found it busy marks it dead meanwhile): the
     * slot's reference is given up here. */
    md__use stale = {e, (int8_t)i};
    md__handle_unuse(t, &stale);
  }
  md__hentry *e = md__handle_get(t, h, kind);
  if (!e) return NULL;
  int j = empty;
  for (unsigned k = 0; rc && j < 0 && k < MD__RC_SLOTS; k++) {
    unsigned i = (rc->victim + k) % MD__RC_SLOTS;
    uintptr_t v = atomic_load_explicit(&rc->slot[i], memory_order_acquire);
    if (!v) j = (int)i;
    else if (!(v & RC_FLAGS) && atomic_compare_exchange_strong(&rc->slot[i], &v, 0)) {
      slot_drop(rc->table[i], rc, i, (md__hentry *)v);   /* the least recently filled goes */
      j = (int)i;
    }
  }
  if (j < 0) {   /* every slot busy in this call: a plain reference */
    u->e = e;
    u->slot = -1;
    return e;
  }
  rc->victim = ((unsigned)j + 1) % MD__RC_SLOTS;
  rc->handle[j] = h;
  rc->table[j] = t;
  atomic_store(&rc->slot[j], (uintptr_t)e | RC_BUSY);   /* md__handle_get's reference is the slot's */
  u->e = e;
  u->slot = (int8_t)j;
  return e;
}

void md__handle_unuse(md__htable *t, md__use *u) {
  md__hentry *e = u->e;
  if (!e) return;
  u->e = NULL;
  if (u->slot < 0 || !mine) {
    md__handle_put(t, e);
    return;
  }
  refcache *rc = mine;
  unsigned i = (unsigned)u->slot;
  uintptr_t v = (uintptr_t)e | RC_BUSY;
  if (!atomic_compare_exchange_strong(&rc->slot[i], &v, (uintptr_t)e)) {
    /* A kill marked it dead while it was busy: the pin and reference are this thread's to drop. */
    atomic_store(&rc->slot[i], 0);
    rc->handle[i] = 0;
    slot_drop(t, rc, i, e);
    return;
  }
  /* Idle again. A kill between the use and now whose scan saw it busy marked it dead (handled
   * above); one whose scan saw it idle stole it. Else the handle is still live, or the kill's
   * scan has not reached this slot yet and will steal it: either way someone drops it. But a
   * slot filled by a miss after the kill's scan passed it is seen by nobody: check. */
  if (atomic_load(&e->handle) != rc->handle[i]) {
    v = slot_settled(rc, i);
    if (v == (uintptr_t)e && atomic_compare_exchange_strong(&rc->slot[i], &v, 0)) {
      rc->handle[i] = 0;
      slot_drop(t, rc, i, e);
    }
  }
}

void **md__use_pin(md__use *u) {
  if (!u->e || u->slot < 0 || !mine) return NULL;
  return &mine->pin[(unsigned)u->slot];
}

void md__handle_unpin_mine(md__htable *t, md_handle h) {
  refcache *rc = mine;
  for (unsigned i = 0; rc && h && i < MD__RC_SLOTS; i++) {
    if (rc->handle[i] != h || rc->table[i] != t) continue;
    uintptr_t v = slot_settled(rc, i);
    if (!v || (v & RC_FLAGS) || !atomic_compare_exchange_strong(&rc->slot[i], &v, v | RC_BUSY)) continue;
    void *p = rc->pin[i];
    rc->pin[i] = NULL;
    if (p && t->unpin) t->unpin(t->ctx, p);
    md__use u = {(md__hentry *)v, (int8_t)i};
    md__handle_unuse(t, &u);   /* idle again, or dropped if a kill came meanwhile */
  }
}

unsigned md__htable_unpin_idle(md__htable *t, const void *pin) {
  unsigned dropped = 0;
  uint32_t n = atomic_load_explicit(&n_caches, memory_order_acquire);
  for (uint32_t c = 0; c < n; c++) {
    refcache *rc = &caches[c];
    for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
      uintptr_t v = atomic_load(&rc->slot[i]);
      if (!v || (v & RC_FLAGS) || !atomic_compare_exchange_strong(&rc->slot[i], &v, v | RC_HELD)) continue;
      /* HELD: the owner cannot refill the slot, so its table and pin stay what they are. */
      void *p = rc->pin[i];
      bool take = p && (pin ? p == pin : rc->table[i] == t);
      if (take) rc->pin[i] = NULL;
      atomic_store(&rc->slot[i], v);
      if (take) {
        if (t->unpin) t->unpin(t->ctx, p);
        dropped++;
      }
    }
  }
  return dropped;
}

bool md__handle_kill(md__htable *t, md__hentry *e, md_handle h) {
  /* 0 is a killed entry's handle: "killing" it again would drop the table's reference twice
   * (a sweep that read the handle after a concurrent release did, and freed a live slot). */
  if (!h) return false;
  uint64_t expect = h;
  if (!atomic_compare_exchange_strong(&e->handle, &expect, 0)) return false;
  steal(t, e);            /* the cached references of every thread */
  md__handle_put(t, e);   /* the table's reference; the caller still holds its own */
  return true;
}

const char *md__handle_why(md__htable *t, md_handle h, md__kind kind) {
  if (h == 0) return "0 is never a valid handle";
  uint32_t slot = (uint32_t)h & SLOT_MASK;
  md__hentry *e = slot ? slot_entry(t, slot) : NULL;
  if (!e) return "never issued by this device";
  uint64_t now = atomic_load_explicit(&e->handle, memory_order_acquire);
  if (now == h && atomic_load_explicit(&e->kind, memory_order_relaxed) != (uint8_t)kind) return "is a handle of another kind";
  if (now == h) return "belongs to another client";
  if (atomic_load_explicit(&e->issued, memory_order_relaxed) == h) return "was already released";
  return "never issued by this device (forged, or a stale handle of a reused slot)";
}

void md__htable_foreach(md__htable *t, void (*fn)(md__hentry *e, void *arg), void *arg) {
  pthread_mutex_lock(&t->lock);
  uint32_t end = t->next_unused;
  pthread_mutex_unlock(&t->lock);
  if (MD_MUTANT(close_sweeps_first_chunk) && end > MD__HT_CHUNK) end = MD__HT_CHUNK; /* Mutant: one chunk. */
  for (uint32_t slot = 1; slot < end; slot++) {
    md__hentry *e = slot_entry(t, slot);
    if (!e) continue;
    uint64_t h = atomic_load_explicit(&e->handle, memory_order_acquire);
    if (!h) continue;
    md__hentry *got = md__handle_get(t, h, (md__kind)atomic_load_explicit(&e->kind, memory_order_relaxed));
    if (!got) continue;
    fn(got, arg);
    md__handle_put(t, got);
  }
}
