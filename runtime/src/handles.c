/* handles.c - the handle table: slot + generation + keyed MAC, lock-free lookups. */
#include "mutant.h"
#include "handles.h"

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

void md__htable_fini(md__htable *t) {
  for (uint32_t i = 0; i < MD__HT_MAX_CHUNKS; i++) free(atomic_load(&t->chunks[i]));
  pthread_mutex_destroy(&t->lock);
}

/* The MAC binds the handle to its slot, generation, kind and owner. */
static uint32_t handle_mac(const md__htable *t, uint32_t slot, uint32_t gen, md__kind kind, uint64_t owner) {
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

md_status md__handle_issue_tagged(md__htable *t, md__kind kind, uint64_t owner, void *obj,
                                  const uint64_t tag[2], md_handle *out, md__hentry **entry) {
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
      md__hentry *chunk = aligned_alloc(64, MD__HT_CHUNK * sizeof *chunk);
      if (chunk) memset(chunk, 0, MD__HT_CHUNK * sizeof *chunk);
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
  md__ref_init(&e->ref, 1);
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

bool md__handle_kill(md__htable *t, md__hentry *e, md_handle h) {
  uint64_t expect = h;
  if (!atomic_compare_exchange_strong(&e->handle, &expect, 0)) return false;
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
