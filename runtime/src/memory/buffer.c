/* buffer.c - a buffer's storage and the protocol that reads and writes it (objects_int.h), its
 * roles, and its destruction: what the memory-domain calls and the executions share.
 *
 * A buffer's metadata (dims, initialized flag, current storage) is guarded by its own spin
 * lock, held only to read or publish a few fields; data moves outside it, on storage the mover
 * holds a reference to. Racing writers therefore never crash or touch another buffer: the
 * last one to publish wins, and the content may be any writer's (SPEC section 6). */
#include <stdlib.h>
#include <string.h>

#include "mutant.h"
#include "error.h"
#include "objects_int.h"

/* ---- the metadata seqlock ----
 * Every change of initialized, writing, cur_rank, the current dims or st happens under the
 * spin lock, between meta_begin and meta_end, with atomic stores; md__buffer_read_pinned reads
 * them with atomic loads and no lock, and retries (takes the lock) when seq moved. */
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static void meta_begin(md__buffer *b) {
  uint32_t s = atomic_load_explicit(&b->seq, memory_order_relaxed);
  atomic_store_explicit(&b->seq, s + 1u, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}
static void meta_end(md__buffer *b) {
  atomic_store_explicit(&b->seq, atomic_load_explicit(&b->seq, memory_order_relaxed) + 1u, memory_order_release);
}
static void set_cur_dims(md__buffer *b, uint32_t rank, const uint32_t *dims) {
  uint32_t *cd = md__buf_cur_dims(b);
  SET(b->cur_rank, (uint8_t)rank);
  for (uint32_t i = 0; i < rank; i++) SET(cd[i], dims[i]);
}

/* ---- storage ---- */

void md__storage_put(md_device *d, md__storage *s) {
  if (!s || !md__ref_put(&s->ref)) return;
  if (s->mem) d->be->free(d->bk, s->mem);
  s->mem = 0;
  if (!s->embedded) free(s);
}

static md__storage *storage_get_locked(md__buffer *b) {
  md__storage *s = b->st;
  if (s) md__ref_get(&s->ref);
  return s;
}

/* Whether b's current storage can take an in-place write of `bytes`: large enough, and held
 * by nobody but the buffer (references are only taken under the lock). Lock held. */
static bool in_place_ok(const md__buffer *b, uint64_t bytes) {
  const md__storage *cur = b->st;
  /* (Mutant writers_unguarded: always in place, under readers and other writers, and readers
   * are not told.) The acquire pairs with the release of the last other holder's put, so its
   * reads of the old content happen before these writes. */
  return cur && cur->capacity >= bytes &&
         (MD_MUTANT(writers_unguarded) || (!b->writing && atomic_load_explicit(&cur->ref.n, memory_order_acquire) == 1));
}

md_status md__buffer_write_begin(md_device *d, md__buffer *b, uint64_t bytes, md__write *w) {
  for (int attempt = 0;; attempt++) {
    md__spin_lock(&b->lock);
    if (in_place_ok(b, bytes)) {
      if (!MD_MUTANT(writers_unguarded)) {
        meta_begin(b);
        SET(b->writing, true);
        meta_end(b);
      }
      w->st = storage_get_locked(b);
      w->in_place = true;
      md__spin_unlock(&b->lock);
      return MD_NONE;
    }
    /* Large enough but held: by a call in flight, or only by idle threads' pins. */
    md__storage *held = b->st && b->st->capacity >= bytes && !b->writing ? storage_get_locked(b) : NULL;
    md__spin_unlock(&b->lock);
    /* In use, too small, or none yet: fresh storage. The old one stays valid for its users. */
    md__storage *s = calloc(1, sizeof *s);
    if (!s) {
      md__storage_put(d, held);
      return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "out of host memory");
    }
    md_status st = d->be->alloc(d->bk, bytes ? bytes : 1, &s->mem);
    if (st != MD_NONE) {
      free(s);
      /* No device memory for a copy: take the pins of idle threads back, every one of this
       * device (they keep nothing alive that a call needs: this buffer's storage, or storage
       * other buffers have moved on from) and try once more, in place or fresh. */
      unsigned dropped = attempt == 0 ? md__htable_unpin_idle(&d->ht, NULL) : 0;
      md__storage_put(d, held);
      if (dropped) continue;
      return md__fail(st, "cannot allocate %llu bytes of device memory", (unsigned long long)bytes);
    }
    md__storage_put(d, held);
    s->capacity = bytes;
    md__ref_init(&s->ref, 1);
    w->st = s;
    w->in_place = false;
    return MD_NONE;
  }
}

void md__buffer_write_commit(md_device *d, md__buffer *b, md__write *w, uint32_t rank, const uint32_t *dims) {
  md__storage *drop;
  md__spin_lock(&b->lock);
  meta_begin(b);
  if (w->in_place) SET(b->writing, false);
  if (b->st != w->st) {
    drop = b->st;           /* the caller's reference becomes the buffer's */
    SET(b->st, w->st);
  } else {
    drop = w->st;           /* same storage: drop the caller's extra reference */
  }
  if (!MD_MUTANT(resize_keeps_dims) || !b->initialized) /* Mutant: the dims of the first write stay. */
    set_cur_dims(b, rank, dims);
  SET(b->initialized, true);
  meta_end(b);
  md__spin_unlock(&b->lock);
  w->st = NULL;
  md__storage_put(d, drop);
}

void md__buffer_write_abort(md_device *d, md__buffer *b, md__write *w) {
  md__spin_lock(&b->lock);
  meta_begin(b);
  if (w->in_place) SET(b->writing, false);
  SET(b->initialized, false);
  meta_end(b);
  md__spin_unlock(&b->lock);
  md__storage_put(d, w->st);
  w->st = NULL;
}

md__read_state md__buffer_read_snapshot(md__buffer *b, md__storage **st, uint32_t *rank, uint32_t *dims) {
  md__spin_lock(&b->lock);
  md__read_state r = !b->initialized ? MD__READ_UNINITIALIZED : b->writing ? MD__READ_BEING_WRITTEN : MD__READ_OK;
  if (r == MD__READ_OK) *st = storage_get_locked(b);
  *rank = b->cur_rank;
  if (b->cur_rank) memcpy(dims, md__buf_cur_dims(b), b->cur_rank * sizeof *dims);
  md__spin_unlock(&b->lock);
  return r;
}

md__read_state md__buffer_read_pinned(md_device *d, md__buffer *b, void **pin, md__storage **st, uint32_t *rank,
                                      uint32_t *dims) {
  if (!pin) return md__buffer_read_snapshot(b, st, rank, dims);
  md__storage *held = *pin;
  if (held) {
    /* The hit: the pinned storage is still the current one, the buffer is initialized and no
     * in-place write runs (none can start: the pin is a second reference). No shared write. */
    uint32_t s0 = atomic_load_explicit(&b->seq, memory_order_acquire);
    if (!(s0 & 1u)) {
      bool ok = GET(b->initialized) && !GET(b->writing) && GET(b->st) == held;
      uint32_t r = GET(b->cur_rank);
      const uint32_t *cd = md__buf_cur_dims(b);
      for (uint32_t i = 0; ok && i < r && i < MD_MAX_RANK; i++) dims[i] = GET(cd[i]);
      atomic_thread_fence(memory_order_acquire);
      if (ok && atomic_load_explicit(&b->seq, memory_order_relaxed) == s0) {
        *rank = r;
        *st = held;
        return MD__READ_OK;
      }
    }
  }
  md__read_state r = md__buffer_read_snapshot(b, st, rank, dims);
  if (r == MD__READ_OK) {
    *pin = *st;   /* the snapshot's reference is the pin's now */
    md__storage_put(d, held);
  }
  return r;
}

md_status md__buffer_read_begin(md__buffer *b, md__storage **st, uint32_t *rank, uint32_t *dims) {
  md__spin_lock(&b->lock);
  md_status r = MD_NONE;
  if (!b->initialized) r = MD_GENERAL_FAILURE;
  else if (b->writing) r = MD_DEAD_OBJECT;  /* marker, mapped below */
  else {
    *st = storage_get_locked(b);
    *rank = b->cur_rank;
    if (b->cur_rank) memcpy(dims, md__buf_cur_dims(b), b->cur_rank * sizeof *dims);
  }
  md__spin_unlock(&b->lock);
  if (r == MD_GENERAL_FAILURE) return md__fail(MD_GENERAL_FAILURE, "buffer is not initialized");
  if (r != MD_NONE) return md__fail(MD_GENERAL_FAILURE, "buffer is being written by another call");
  return MD_NONE;
}

bool md__buffer_has_role(const md__hentry *e, md_handle prepared, uint32_t is_output, uint32_t index) {
  if (MD_MUTANT(role_unchecked)) return true; /* Mutant: any use of a token is one of its roles. */
  if (e->tag[0] == prepared && e->tag[1] == md__role_tag(is_output, index)) return true;
  const md__buffer *b = e->obj;
  for (uint32_t i = 1; i < b->n_roles; i++)
    if (b->roles[i].prepared == prepared && b->roles[i].is_output == is_output && b->roles[i].index == index)
      return true;
  return false;
}

void md__buffer_uninit(md__buffer *b) {
  md__spin_lock(&b->lock);
  meta_begin(b);
  SET(b->initialized, false);
  meta_end(b);
  md__spin_unlock(&b->lock);
}

void md__buffer_reset_dims(md__buffer *b) {
  md__spin_lock(&b->lock);
  meta_begin(b);
  set_cur_dims(b, b->init_rank, md__buf_init_dims(b));
  meta_end(b);
  md__spin_unlock(&b->lock);
}

uint64_t md__buffer_bytes(const md__buffer *b) {
  md__buffer *m = (md__buffer *)b;
  md__spin_lock(&m->lock);
  /* SPEC 8.10: at its current size, not the capacity of storage a larger write left behind
   * (in-place writes keep it); unknown dims never written count 0. */
  uint64_t n = !m->st ? 0
               : md__type_is_scalar(m->type) ? md_operand_type_size(m->type)
                                             : md__type_bytes(m->type, m->cur_rank, md__buf_cur_dims(m));
  if (MD_MUTANT(leak_bytes_capacity)) n = m->st ? m->st->capacity : 0; /* Mutant: the storage's capacity. */
  md__spin_unlock(&m->lock);
  return n;
}

void md__buffer_destroy(md_device *d, md__buffer *b) {
  md__storage *s = b->st;
  b->st = NULL;
  md__storage_put(d, s);
  /* The embedded storage may still be referenced by nobody but itself when a grown storage
   * replaced it earlier: its reference was dropped then, and its memory freed. */
  free(b);
}
