/* soak_table.c - the stress phase's bookkeeping: client incarnations and their reconciliation
 * with close_client's leak report, the shared object tables, watches and buffer writers (the
 * model of soak_table.h). Every function is thread-safe; none calls the driver. */
#include "soak_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soak.h"

soak_table soak_tables[SK_KINDS];
static atomic_uint_fast64_t inc_serial;

/* ---- incarnations ---- */

static void inc_put(soak_inc *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1) free(c);
}

bool soak_inc_call_get(soak_inc *c) {
  unsigned n = atomic_load(&c->calls);
  while (n) {
    if (atomic_compare_exchange_weak(&c->calls, &n, n + 1)) {
      atomic_fetch_add(&c->refs, 1);
      return true;
    }
  }
  return false;
}

/* The leak report of c's close against what the calls that used c counted. Runs once, in the
 * thread that dropped the last call reference: every call that could create or remove one of
 * c's objects has returned and counted. */
static void reconcile(soak_inc *c, int thread, uint64_t opno) {
  static const char *const names[SK_KINDS] = {"buffers", "prepared_models", "events", "pools"};
  unsigned ok = atomic_load(&c->close_ok);
  if (ok != 1) {
    soak_fail("close_client", c->closer, c->closer_op, -1, NULL,
              "client 0x%016llx (slot %u, incarnation %llu): %u close_client calls returned NONE, "
              "want exactly 1 (reconciled by thread %d op#%llu)",
              (unsigned long long)c->client, c->slot, (unsigned long long)c->serial, ok, thread,
              (unsigned long long)opno);
  } else {
    long want[SK_KINDS];
    for (int k = 0; k < SK_KINDS; k++)
      want[k] = (long)atomic_load(&c->made[k]) - (long)atomic_load(&c->removed[k]);
    const md_leak_report *r = &c->leaks;
    long got[3] = {(long)r->buffers, (long)r->prepared_models, (long)r->events};
    bool bad = r->bytes != (uint64_t)want[SK_BUFFER] * SOAK_BYTES;
    for (int k = 0; k < 3; k++) bad |= got[k] != want[k];
    if (bad) {
      /* The kinds that disagree first, then the others for context. */
      char detail[512];
      int len = 0;
      for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < 3; k++)
          if ((got[k] != want[k]) == (pass == 0))
            len += snprintf(detail + len, sizeof detail - (size_t)len, "%s%s: report %ld, NONE-created %u - removed %u = %ld%s",
                            len ? "; " : "", names[k], got[k], atomic_load(&c->made[k]), atomic_load(&c->removed[k]),
                            want[k], pass == 0 ? " (differs)" : "");
      soak_fail("close_client", c->closer, c->closer_op, -1, NULL,
                "client 0x%016llx (slot %u, incarnation %llu): leak report does not match the calls' counts: %s; "
                "bytes: report %llu, want %ld (reconciled by thread %d op#%llu)",
                (unsigned long long)c->client, c->slot, (unsigned long long)c->serial, detail,
                (unsigned long long)r->bytes, want[SK_BUFFER] * (long)SOAK_BYTES, thread,
                (unsigned long long)opno);
    }
  }
  atomic_fetch_add(&soak_closes_reconciled, 1);
  /* Every object of c is dead: the tables let their entries go. */
  for (int k = 0; k < SK_KINDS; k++) {
    for (unsigned i = 0; i < soak_tables[k].n; i++) {
      soak_entry *e = &soak_tables[k].e[i];
      if (!soak_entry_get(e)) continue;
      if (e->owner == c) soak_entry_kill(e);
      soak_entry_put(e);
    }
  }
}

void soak_inc_call_put(soak_inc *c, int thread, uint64_t opno) {
  if (atomic_fetch_sub(&c->calls, 1) == 1) reconcile(c, thread, opno);
  inc_put(c);
}

soak_inc *soak_slot_acquire(soak_slot *s) {
  pthread_mutex_lock(&s->lock);
  soak_inc *c = s->cur;
  if (c && !soak_inc_call_get(c)) c = NULL;   /* attached means not reconciled: cannot happen */
  pthread_mutex_unlock(&s->lock);
  return c;
}

bool soak_slot_claim(soak_slot *s) {
  pthread_mutex_lock(&s->lock);
  bool ok = !s->cur && !s->opening;
  if (ok) s->opening = true;
  pthread_mutex_unlock(&s->lock);
  return ok;
}

void soak_slot_unclaim(soak_slot *s) {
  pthread_mutex_lock(&s->lock);
  s->opening = false;
  pthread_mutex_unlock(&s->lock);
}

soak_inc *soak_slot_attach(soak_slot *s, unsigned slot, md_handle client) {
  soak_inc *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->client = client;
  c->slot = slot;
  c->serial = atomic_fetch_add(&inc_serial, 1) + 1;
  c->closer = -2;
  atomic_store(&c->state, INC_OPEN);
  atomic_store(&c->calls, 1);
  atomic_store(&c->refs, 1);
  pthread_mutex_lock(&s->lock);
  s->cur = c;
  s->opening = false;
  pthread_mutex_unlock(&s->lock);
  return c;
}

void soak_slot_detach(soak_slot *s, soak_inc *c, int thread, uint64_t opno) {
  pthread_mutex_lock(&s->lock);
  bool mine = s->cur == c;
  if (mine) s->cur = NULL;
  pthread_mutex_unlock(&s->lock);
  if (mine) soak_inc_call_put(c, thread, opno);
}

/* ---- entries ---- */

void soak_tables_init(const unsigned sizes[SK_KINDS]) {
  for (int k = 0; k < SK_KINDS; k++) {
    soak_tables[k].n = sizes[k];
    soak_tables[k].e = calloc(sizes[k] ? sizes[k] : 1, sizeof(soak_entry));
    if (!soak_tables[k].e) abort();
    for (unsigned i = 0; i < sizes[k]; i++) {
      soak_tables[k].e[i].kind = k;
      soak_tables[k].e[i].out_fd = -1;
    }
  }
}

unsigned soak_tables_fini(void) {
  unsigned busy = 0;
  for (int k = 0; k < SK_KINDS; k++) {
    for (unsigned i = 0; i < soak_tables[k].n; i++)
      busy += atomic_load(&soak_tables[k].e[i].state) != SE_EMPTY;
    free(soak_tables[k].e);
    soak_tables[k].e = NULL;
    soak_tables[k].n = 0;
  }
  return busy;
}

bool soak_entry_get(soak_entry *e) {
  if (atomic_load(&e->state) != SE_READY) return false;
  unsigned n = atomic_load(&e->refs);
  while (n)
    if (atomic_compare_exchange_weak(&e->refs, &n, n + 1)) return true;
  return false;
}

/* The last reference went: closes what the entry owns, empties it, then lets go of what it
 * held (after emptying, so nothing reads it again). */
static void recycle(soak_entry *e) {
  if (e->out_fd >= 0) close(e->out_fd);
  soak_entry *held[3] = {e->model, e->reads, e->writes};
  soak_inc *owner = e->owner;
  e->out_fd = -1;
  e->model = e->reads = e->writes = NULL;
  e->owner = NULL;
  e->h = 0;
  atomic_store(&e->state, SE_EMPTY);
  for (int i = 0; i < 3; i++)
    if (held[i]) soak_entry_put(held[i]);
  if (owner) inc_put(owner);
}

void soak_entry_put(soak_entry *e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) recycle(e);
}

void soak_entry_kill(soak_entry *e) {
  if (atomic_exchange(&e->table_ref, false)) soak_entry_put(e);
}

soak_entry *soak_claim(soak_table *t, uint64_t *rng) {
  if (!t->n) return NULL;
  unsigned start = soak_below(rng, t->n);
  for (unsigned k = 0; k < t->n; k++) {
    soak_entry *e = &t->e[(start + k) % t->n];
    int want = SE_EMPTY;
    if (!atomic_compare_exchange_strong(&e->state, &want, SE_FILLING)) continue;
    e->owner = NULL;
    e->h = 0;
    e->model = e->reads = e->writes = NULL;
    e->out_fd = -1;
    e->check_out = false;
    memset(e->value, 0, sizeof e->value);
    memset(e->sum, 0, sizeof e->sum);
    memset(e->expect, 0, sizeof e->expect);
    memset(&e->read_snap, 0, sizeof e->read_snap);
    e->write_prior = e->write_g0 = 0;
    atomic_store(&e->rm_begun, 0);
    atomic_store(&e->rm_inflight, 0);
    atomic_store(&e->dead, false);
    atomic_store(&e->writers, 0);
    atomic_store(&e->wgen, 0);
    atomic_store(&e->init_known, false);
    atomic_store(&e->tainted, false);
    return e;
  }
  return NULL;
}

void soak_unclaim(soak_entry *e) {
  soak_entry *held[3] = {e->model, e->reads, e->writes};
  if (e->out_fd >= 0) close(e->out_fd);
  e->out_fd = -1;
  e->model = e->reads = e->writes = NULL;
  atomic_store(&e->state, SE_EMPTY);
  for (int i = 0; i < 3; i++)
    if (held[i]) soak_entry_put(held[i]);
}

void soak_publish(soak_entry *e, soak_inc *owner, md_handle h) {
  atomic_fetch_add(&owner->refs, 1);
  e->owner = owner;
  e->h = h;
  atomic_store(&e->table_ref, true);
  atomic_store(&e->refs, 1);
  atomic_store(&e->state, SE_READY);
}

soak_entry *soak_pick(soak_table *t, uint64_t *rng, bool (*pred)(const soak_entry *, const void *),
                      const void *arg) {
  if (!t->n) return NULL;
  unsigned start = soak_below(rng, t->n);
  for (unsigned k = 0; k < t->n; k++) {
    soak_entry *e = &t->e[(start + k) % t->n];
    if (!soak_entry_get(e)) continue;
    if (!pred || pred(e, arg)) return e;
    soak_entry_put(e);
  }
  return NULL;
}

/* ---- watches ---- */

void soak_watch_init(soak_watch *w) { memset(w, 0, sizeof *w); }

void soak_watch_inc(soak_watch *w, soak_inc *c) {
  for (unsigned i = 0; i < w->n_inc; i++)
    if (w->inc[i].c == c) return;
  if (w->n_inc == 2) abort();
  w->inc[w->n_inc].c = c;
  w->inc[w->n_inc].held = soak_inc_call_get(c);
  /* Not held: reconciled, so its close returned NONE before this call. */
  w->inc[w->n_inc].s0 = w->inc[w->n_inc].held ? atomic_load(&c->state) : INC_CLOSED;
  w->n_inc++;
}

void soak_watch_obj(soak_watch *w, soak_entry *e, bool own) {
  soak_watch_inc(w, e->owner);
  if (w->n_obj == 4) abort();
  w->obj[w->n_obj].e = e;
  w->obj[w->n_obj].d0 = atomic_load(&e->dead);
  w->obj[w->n_obj].i0 = atomic_load(&e->rm_inflight);
  w->obj[w->n_obj].b0 = atomic_load(&e->rm_begun);
  w->obj[w->n_obj].own = own;
  w->n_obj++;
}

enum soak_live soak_watch_end(const soak_watch *w) {
  bool raced = false;
  for (unsigned i = 0; i < w->n_inc; i++) {
    if (w->inc[i].s0 == INC_CLOSED) return SOAK_DEAD;
    raced |= atomic_load(&w->inc[i].c->state) != INC_OPEN || w->inc[i].s0 != INC_OPEN;
  }
  for (unsigned i = 0; i < w->n_obj; i++) {
    soak_entry *e = w->obj[i].e;
    if (w->obj[i].d0) return SOAK_DEAD;
    unsigned b1 = atomic_load(&e->rm_begun);
    raced |= w->obj[i].i0 > 0 || atomic_load(&e->dead) || b1 != w->obj[i].b0 + (w->obj[i].own ? 1u : 0u);
  }
  return raced ? SOAK_RACED : SOAK_LIVE;
}

bool soak_watch_close_raced(const soak_watch *w) {
  for (unsigned i = 0; i < w->n_inc; i++)
    if (w->inc[i].s0 != INC_CLOSED && (w->inc[i].s0 != INC_OPEN || atomic_load(&w->inc[i].c->state) != INC_OPEN))
      return true;
  return false;
}

void soak_watch_release(soak_watch *w, int thread, uint64_t opno) {
  for (unsigned i = 0; i < w->n_inc; i++)
    if (w->inc[i].held) soak_inc_call_put(w->inc[i].c, thread, opno);
  w->n_inc = w->n_obj = 0;
}

void soak_remove_begin(soak_entry *e) {
  atomic_fetch_add(&e->rm_begun, 1);
  atomic_fetch_add(&e->rm_inflight, 1);
}

bool soak_remove_end(soak_entry *e, bool removed) {
  bool first = true;
  if (removed) first = !atomic_exchange(&e->dead, true);
  atomic_fetch_sub(&e->rm_inflight, 1);
  return first;
}

/* ---- buffer writes and reads ---- */

soak_bsnap soak_buf_snap(soak_entry *b) {
  soak_bsnap s;
  s.writers = atomic_load(&b->writers);
  s.wgen = atomic_load(&b->wgen);
  s.init = atomic_load(&b->init_known);
  s.tainted = atomic_load(&b->tainted);
  return s;
}

bool soak_buf_clean(const soak_bsnap *s0, const soak_bsnap *s1) {
  return s0->writers == 0 && s1->writers == 0 && s0->wgen == s1->wgen;
}

void soak_buf_write_begin(soak_entry *b, soak_wticket *t) {
  t->prior = atomic_fetch_add(&b->writers, 1);
  t->g0 = atomic_load(&b->wgen);
}

bool soak_buf_write_end(soak_entry *b, const soak_wticket *t, bool ok, bool taint) {
  bool overlapped = t->prior > 0 || atomic_load(&b->wgen) != t->g0 || atomic_load(&b->writers) > 1;
  if (taint) atomic_store(&b->tainted, true);
  atomic_store(&b->init_known, ok && !overlapped);
  atomic_fetch_add(&b->wgen, 1);
  atomic_fetch_sub(&b->writers, 1);
  return overlapped;
}
