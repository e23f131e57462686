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
  MD__KIND_CLIENT = 1, MD__KIND_PREPARED = 2, MD__KIND_BUFFER = 3, MD__KIND_EVENT = 4
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

struct md__htable {
  _Atomic(md__hentry *) chunks[MD__HT_MAX_CHUNKS];
  pthread_mutex_t lock;      /* issue and recycle only */
  uint32_t free_head;        /* slot index, 0 = none */
  uint32_t next_unused;      /* next never-used slot */
  _Atomic uint64_t live;     /* entries not yet recycled */
  uint8_t key[16];
  md__hdestroy_fn destroy;
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

/* Looks up a live handle of `kind` and takes a reference on its entry; NULL, holding nothing,
 * if h is not one. Lock-free. */
md__hentry *md__handle_get(md__htable *t, md_handle h, md__kind kind);
/* Takes one more reference on an entry the caller holds. */
static inline void md__handle_ref(md__hentry *e) { md__ref_get(&e->ref); }
/* Drops a reference; the last one destroys the object and recycles the slot. */
void md__handle_put(md__htable *t, md__hentry *e);
/* Kills the handle for new lookups and drops the table's reference. Returns true when this
 * call killed it, false when it was already dead (someone else released it first). The
 * caller must hold a reference of its own. */
bool md__handle_kill(md__htable *t, md__hentry *e, md_handle h);

/* Why h is not a live handle of `kind`, as a static phrase for messages ("was already
 * released", "is a handle of another kind", "never issued by this device", ...). Reads the
 * entry without a reference, so a racing release may make the answer stale; never fails. */
const char *md__handle_why(md__htable *t, md_handle h, md__kind kind);

/* Calls fn for every live entry (with a reference held across the call). fn may kill it. */
void md__htable_foreach(md__htable *t, void (*fn)(md__hentry *e, void *arg), void *arg);

#endif
