/* handles.h - private to the runtime: the handle table behind every md_handle and md_token.
 *
 * A handle is 64 bits: bits 0-23 the slot, bits 24-31 the low byte of the slot's generation,
 * bits 32-63 a keyed MAC (SipHash-2-4 via libsodium's crypto_shorthash, key from the device's
 * seed or the OS) over (slot, full generation, kind, owner). The entry keeps the exact value it
 * issued, so validating a handle is one load and compare: a forged value passes with
 * probability 2^-32, a freed slot's old handle never matches again (generation and MAC
 * change), and a handle of one client presented by another fails the owner check.
 *
 * Entries live in chunks that are never freed while the table lives, so a lookup can read an
 * entry without a lock: it compares the handle, takes a reference unless the count is zero,
 * and compares again (the slot may have been freed and reissued in between). The reference
 * keeps the object alive for the whole call; the last put destroys it and recycles the slot.
 * Issue and recycle take the table's mutex; lookups never do. */
#ifndef MD_HANDLES_H
#define MD_HANDLES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "md/driver.h"
#include "refcount.h"

typedef enum md__kind {
  MD__KIND_CLIENT = 1, MD__KIND_PREPARED = 2, MD__KIND_BUFFER = 3, MD__KIND_EVENT = 4,
  MD__KIND_POOL = 5          /* a registered pool (SPEC 9) */
} md__kind;

#define MD__HT_SLOT_BITS 24u
#define MD__HT_CHUNK_BITS 12u
#define MD__HT_CHUNK (1u << MD__HT_CHUNK_BITS)
#define MD__HT_MAX_CHUNKS (1u << (MD__HT_SLOT_BITS - MD__HT_CHUNK_BITS))
#define MD__HT_MAX_SLOTS ((1u << MD__HT_SLOT_BITS) - 1u)   /* slot 0 is never used */

typedef struct md__hentry {
  _Alignas(64) _Atomic uint64_t handle;   /* the live handle, 0 once killed or free */
  _Atomic uint64_t issued;   /* the last handle issued here (for "was released" messages) */
  uint64_t owner;            /* owning client's handle; 0 for clients */
  void *obj;
  md__ref ref;               /* 1 for the table while live, +1 per use in flight */
  uint32_t gen;
  uint32_t next_free;
  _Atomic uint8_t kind;      /* relaxed: also read by diagnostics without a reference */
  uint64_t tag[2];           /* the object's, set before the handle is published: lets a hot
                                check (a buffer's only role) stay in this cache line */
} md__hentry;                /* one 64-byte cache line */
_Static_assert(sizeof(md__hentry) == 64, "a handle entry is one cache line");

typedef struct md__htable md__htable;
/* Called once when an entry's last reference goes, before the slot is recycled. */
typedef void (*md__hdestroy_fn)(void *ctx, md__hentry *e);
/* Drops a pin (below: md__use_pin) a thread's cache kept with an entry; called with the
 * table's ctx, before the entry's reference that the cache held with it is dropped. */
typedef void (*md__hunpin_fn)(void *ctx, void *pin);

struct md__htable {
  _Atomic(md__hentry *) chunks[MD__HT_MAX_CHUNKS];
  pthread_mutex_t lock;      /* issue and recycle only */
  uint32_t free_head;        /* slot index, 0 = none */
  uint32_t next_unused;      /* next never-used slot */
  _Atomic uint64_t live;     /* entries not yet recycled */
  uint8_t key[16];
  md__hdestroy_fn destroy;
  md__hunpin_fn unpin;       /* NULL: nothing is ever pinned */
  void *ctx;
};

/* Initialises t with a MAC key (16 bytes) and the destroy callback, called with ctx when an
 * entry's last reference goes. Never fails. */
void md__htable_init(md__htable *t, const uint8_t key[16], md__hdestroy_fn destroy, void *ctx);
/* Frees the chunks. Every entry must already be destroyed; nothing may use t after. */
void md__htable_fini(md__htable *t);

/* Issues a handle for obj with one reference (the table's): *out is the handle, *entry (entry
 * may be NULL) its entry. On error, RESOURCE_EXHAUSTED_TRANSIENT is returned (all 2^24-1 slots
 * in use, or no memory for a chunk) without a message (the caller writes one), and nothing
 * changes: obj is not the table's, *out and *entry are untouched. Takes the table's mutex. */
md_status md__handle_issue(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                           md_handle *out, md__hentry **entry);
/* As md__handle_issue, also storing tag[0..1] in the entry (before the handle is published). */
md_status md__handle_issue_tagged(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                                  const uint64_t tag[2], md_handle *out, md__hentry **entry);
/* As md__handle_issue, with a second reference, the caller's, taken before the handle is
 * published: the object outlives whatever kills the handle the moment it exists (a
 * close_client sweep) until the caller puts it. entry must not be NULL. */
md_status md__handle_issue_held(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                                md_handle *out, md__hentry **entry);

/* Looks up a live handle of `kind` and takes a reference on its entry; NULL, holding nothing,
 * if h is not one. Lock-free. */
md__hentry *md__handle_get(md__htable *t, md_handle h, md__kind kind);
/* Takes one more reference on an entry the caller holds. */
static inline void md__handle_ref(md__hentry *e) { md__ref_get(&e->ref); }
/* Drops a reference; the last one destroys the object and recycles the slot. */
void md__handle_put(md__htable *t, md__hentry *e);
/* Kills the handle for new lookups and drops the table's reference. Returns true when this
 * call killed it, false when it was already dead (someone else released it first) or h is 0
 * (what a killed entry's handle reads). The caller must hold a reference of its own. */
bool md__handle_kill(md__htable *t, md__hentry *e, md_handle h);

/* ---- per-thread reference caches: lookups on the hot path without a shared write ----
 * Each thread that looks handles up keeps, in a cache line of its own, up to MD__RC_SLOTS
 * entries it holds one reference on, with the handle each was looked up by. md__handle_use
 * finds h there and marks the slot busy (one compare-and-swap on that line), so a stream of
 * calls on the same handles touches no line another thread writes: no reference count moves.
 * A miss takes a reference the usual way (md__handle_get) and keeps it in a slot.
 *
 * Killing a handle (md__handle_kill) takes the cached references back at once: it scans every
 * thread's cache and steals the idle slots holding that entry (dropping their reference); a busy
 * one is marked dead, and its thread drops the reference when the call ends. So an object still
 * dies exactly when its last use in flight ends (SPEC 6), and no idle thread keeps one alive. */
#define MD__RC_SLOTS 8u

/* What md__handle_use gives back for md__handle_unuse. */
typedef struct md__use {
  md__hentry *e;
  int8_t slot;               /* the cache slot it is busy in, or -1: a plain reference */
} md__use;

/* Looks up the live handle h of `kind` as md__handle_get does, through the calling thread's
 * cache; *u is what md__handle_unuse needs. NULL (nothing held, *u untouched) if h is not one.
 * The entry stays valid (its object alive) until md__handle_unuse, on this thread. */
md__hentry *md__handle_use(md__htable *t, md_handle h, md__kind kind, md__use *u);
/* Ends a use of md__handle_use (NULL e: nothing; u->e is NULL after). Must run on the thread
 * that made the use. */
void md__handle_unuse(md__htable *t, md__use *u);
/* Pins. A cache slot may keep, besides its reference on an entry, one reference on something
 * of the object's (a buffer keeps its current storage there, buffer.c): a stream of calls on
 * the same object then reuses it without moving a shared count either. The pin is the slot's:
 * it is dropped (the table's unpin) whenever the slot's entry reference goes (eviction, kill,
 * the thread's end), always before that reference.
 *
 * md__use_pin gives the pin of a use made through the cache (the slot is busy: only this
 * thread reads or replaces it until md__handle_unuse), or NULL for a plain reference; a new
 * value must carry its own reference, and the old one is the caller's to drop. Calling thread
 * only. */
void **md__use_pin(md__use *u);
/* Drops the pin the calling thread's cache keeps with handle h of t, if any (its slot idle). */
void md__handle_unpin_mine(md__htable *t, md_handle h);
/* Drops every pin equal to `pin` in the idle slots of every thread's cache, or, for pin NULL,
 * every pin of t's entries there (device memory ran out: what idle threads keep alive no call
 * needs, SPEC 8.3 and 6). Returns how many. Pins of busy slots (a call in flight uses them)
 * stay. */
unsigned md__htable_unpin_idle(md__htable *t, const void *pin);

/* Why h is not a live handle of `kind`, as a static phrase for messages ("was already
 * released", "is a handle of another kind", "never issued by this device", ...). Reads the
 * entry without a reference, so a racing release may make the answer stale; never fails. */
const char *md__handle_why(md__htable *t, md_handle h, md__kind kind);

/* Calls fn for every live entry (with a reference held across the call). fn may kill it. */
void md__htable_foreach(md__htable *t, void (*fn)(md__hentry *e, void *arg), void *arg);

/* ---- race points: where a white-box test opens a race window on purpose ----
 * md__race_point(fn, step) calls the hook a test installed in md__race_hook, else does nothing
 * (one load). The runtime names the moments between two steps of a call that another thread
 * may come between: a creating call `fn` ("allocate", "prepare_model", "register_memory",
 * "execute_async") reaches step "issuing" just before it issues its handle and "issued" just
 * after, before it settles a race with close_client (md__issued_settle). A test runs the other
 * thread's call there (a close_client) and sees the outcome every preemption there would give. */
typedef void (*md__race_fn)(const char *fn, const char *step);
extern _Atomic(md__race_fn) md__race_hook;
static inline void md__race_point(const char *fn, const char *step) {
  md__race_fn f = atomic_load_explicit(&md__race_hook, memory_order_acquire);
  if (f) f(fn, step);
}

#endif
