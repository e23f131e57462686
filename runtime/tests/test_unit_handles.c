/* test_unit_handles.c - white-box tests of the handle table (handles.h): the exact handle layout
 * and MAC, slots and generations, the free list, chunk growth and the spare chunk, the live count,
 * references, and the per-thread reference caches with their pins (use/unuse, eviction, kills,
 * unpin_mine, unpin_idle, a thread's end). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"

#define SLOT(h) ((uint32_t)((h) & 0xffffffu))
#define GEN8(h) ((uint32_t)(((h) >> 24) & 0xffu))
#define MAC(h) ((uint32_t)((h) >> 32))

static const uint8_t key1[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static int ctx_token;

static int destroyed;
static void *last_destroyed;
static void *destroy_ctx_seen;
static md__hentry *destroyed_entry;
static int events[64];   /* 1 = unpin, 2 = destroy, in order */
static int n_events;
static void on_destroy(void *ctx, md__hentry *e) {
  destroyed++;
  last_destroyed = e->obj;
  destroy_ctx_seen = ctx;
  destroyed_entry = e;
  if (n_events < 64) events[n_events++] = 2;
}

static int unpinned;
static void *unpins[64];
static void *unpin_ctx_seen;
static void on_unpin(void *ctx, void *pin) {
  unpin_ctx_seen = ctx;
  if (unpinned < 64) unpins[unpinned] = pin;
  unpinned++;
  if (n_events < 64) events[n_events++] = 1;
}

static md__htable t;
static void setup(void) {
  md__htable_init(&t, key1, on_destroy, &ctx_token);
  t.unpin = on_unpin;
  destroyed = 0;
  last_destroyed = NULL;
  destroy_ctx_seen = NULL;
  destroyed_entry = NULL;
  unpinned = 0;
  unpin_ctx_seen = NULL;
  n_events = 0;
}
static void teardown(void) { md__htable_fini(&t); }

TestSuite(unit_handles, .init = setup, .fini = teardown);

static int obj[16];

static uint32_t refs(const md__hentry *e) { return atomic_load(&e->ref.n); }

static md_handle issue_ok(md__kind kind, uint64_t owner, void *o, md__hentry **e) {
  md_handle h = 0;
  cr_assert_eq(md__handle_issue(&t, kind, owner, o, &h, e), MD_NONE);
  return h;
}

/* The MAC the table must put in the high half (handles.h): SipHash of slot, full generation,
 * kind and owner under the table's key. */
static uint32_t expected_mac(const uint8_t key[16], uint32_t slot, uint32_t gen, uint32_t kind, uint64_t owner) {
  uint8_t msg[20], out[crypto_shorthash_BYTES];
  memcpy(msg, &slot, 4);
  memcpy(msg + 4, &gen, 4);
  memcpy(msg + 8, &kind, 4);
  memcpy(msg + 12, &owner, 8);
  crypto_shorthash(out, msg, sizeof msg, key);
  uint32_t mac;
  memcpy(&mac, out, 4);
  return mac;
}

/* ---- init ---- */

Test(unit_handles, init_sets_every_field) {
  md__htable x;
  memset(&x, 0xa5, sizeof x);
  md__htable_init(&x, key1, on_destroy, &ctx_token);
  cr_assert_eq(x.next_unused, 1u);
  cr_assert_eq(x.free_head, 0u);
  cr_assert_eq(atomic_load(&x.live), 0u);
  cr_assert_eq(memcmp(x.key, key1, 16), 0);
  cr_assert_eq(x.destroy, on_destroy);
  cr_assert_eq(x.ctx, &ctx_token);
  cr_assert_null(x.unpin);
  for (unsigned i = 0; i < MD__HT_MAX_CHUNKS; i++) cr_assert_null(atomic_load(&x.chunks[i]));
  md__htable_fini(&x);
}

/* ---- issue: layout, MAC, slots, generations ---- */

Test(unit_handles, handle_layout_is_mac_generation_slot) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 0x1122334455667788ull, &obj[0], &e);
  cr_assert_eq(SLOT(h), 1u, "the first slot is 1");
  cr_assert_eq(GEN8(h), 1u, "a fresh slot's first generation is 1");
  cr_assert_eq(e->gen, 1u);
  cr_assert_eq(MAC(h), expected_mac(key1, 1, 1, MD__KIND_BUFFER, 0x1122334455667788ull));
  cr_assert_eq(atomic_load(&e->handle), h);
  cr_assert_eq(atomic_load(&e->issued), h);
  cr_assert_eq(e->owner, 0x1122334455667788ull);
  cr_assert_eq(e->obj, &obj[0]);
  cr_assert_eq(atomic_load(&e->kind), MD__KIND_BUFFER);
  cr_assert_eq(e->tag[0], 0u);
  cr_assert_eq(e->tag[1], 0u);
  cr_assert_eq(e->next_free, 0u);
  cr_assert_eq(refs(e), 1u, "the table's reference only");
  cr_assert_eq(atomic_load(&t.live), 1u);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(atomic_load(&t.live), 0u);
}

Test(unit_handles, mac_covers_every_kind_and_owner) {
  md__kind kinds[] = {MD__KIND_CLIENT, MD__KIND_PREPARED, MD__KIND_BUFFER, MD__KIND_EVENT, MD__KIND_POOL};
  uint64_t owners[] = {0, 1, 0xffffffffull, 0x100000000ull, UINT64_MAX};
  md_handle h[25];
  md__hentry *e[25];
  int n = 0;
  for (int k = 0; k < 5; k++)
    for (int o = 0; o < 5; o++, n++) {
      h[n] = issue_ok(kinds[k], owners[o], &obj[0], &e[n]);
      cr_assert_eq(SLOT(h[n]), (uint32_t)n + 1);
      cr_assert_eq(GEN8(h[n]), 1u);
      cr_assert_eq(MAC(h[n]), expected_mac(key1, (uint32_t)n + 1, 1, kinds[k], owners[o]), "kind %d owner %d", k, o);
      cr_assert_eq(atomic_load(&e[n]->kind), (uint8_t)kinds[k]);
    }
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 5; k++) {
      md__hentry *g = md__handle_get(&t, h[i], kinds[k]);
      if (kinds[k] == (md__kind)atomic_load(&e[i]->kind)) {
        cr_assert_eq(g, e[i]);
        md__handle_put(&t, g);
      } else {
        cr_assert_null(g);
      }
    }
  }
  for (int i = 0; i < n; i++) cr_assert(md__handle_kill(&t, e[i], h[i]));
  cr_assert_eq(destroyed, n);
}

Test(unit_handles, generation_counts_every_reuse_and_mac_uses_the_full_generation) {
  md__hentry *e0;
  md_handle prev = 0;
  for (uint32_t g = 1; g <= 600; g++) {
    md__hentry *e;
    md_handle h = issue_ok(MD__KIND_EVENT, 9, &obj[1], &e);
    if (g == 1) e0 = e;
    cr_assert_eq(e, e0, "one slot reused");
    cr_assert_eq(SLOT(h), 1u);
    cr_assert_eq(e->gen, g);
    cr_assert_eq(GEN8(h), g & 0xffu);
    cr_assert_eq(MAC(h), expected_mac(key1, 1, g, MD__KIND_EVENT, 9), "generation %u", g);
    cr_assert_neq(h, prev);
    prev = h;
    cr_assert(md__handle_kill(&t, e, h));
    cr_assert_eq(destroyed, (int)g);
  }
  cr_assert_eq(t.next_unused, 2u, "only slot 1 was ever taken from the unused range");
}

Test(unit_handles, tagged_and_held_issue) {
  const uint64_t tag[2] = {0xdeadbeefcafef00dull, 0x0123456789abcdefull};
  md_handle h;
  md__hentry *e = NULL;
  cr_assert_eq(md__handle_issue_tagged(&t, MD__KIND_BUFFER, 3, &obj[2], tag, &h, &e), MD_NONE);
  cr_assert_not_null(e);
  cr_assert_eq(e->tag[0], tag[0]);
  cr_assert_eq(e->tag[1], tag[1]);
  cr_assert_eq(refs(e), 1u);
  cr_assert_eq(MAC(h), expected_mac(key1, 1, 1, MD__KIND_BUFFER, 3));

  md_handle hh;
  md__hentry *he = NULL;
  cr_assert_eq(md__handle_issue_held(&t, MD__KIND_PREPARED, 4, &obj[3], &hh, &he), MD_NONE);
  cr_assert_not_null(he);
  cr_assert_eq(SLOT(hh), 2u);
  cr_assert_eq(he->tag[0], 0u);
  cr_assert_eq(he->tag[1], 0u);
  cr_assert_eq(refs(he), 2u, "the table's and the caller's");
  cr_assert_eq(atomic_load(&t.live), 2u);
  cr_assert(md__handle_kill(&t, he, hh));
  cr_assert_eq(destroyed, 0, "the caller's reference keeps it");
  cr_assert_null(md__handle_get(&t, hh, MD__KIND_PREPARED));
  md__handle_put(&t, he);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(last_destroyed, &obj[3]);

  /* A plain issue with a NULL entry pointer still issues. */
  md_handle h3;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_CLIENT, 0, &obj[4], &h3, NULL), MD_NONE);
  cr_assert_eq(SLOT(h3), 2u, "the freed slot comes back");
  cr_assert_eq(GEN8(h3), 2u);
  md__hentry *g = md__handle_get(&t, h3, MD__KIND_CLIENT);
  cr_assert_not_null(g);
  cr_assert_eq(refs(g), 2u);
  cr_assert(md__handle_kill(&t, g, h3));
  md__handle_put(&t, g);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 3);
}

/* A sweep (close_client's release_owned) that loads a handle after a concurrent release killed
 * it reads 0: killing with 0 must fail and drop nothing, or the table's reference is dropped a
 * second time and the slot is freed, and issued again, while references to it are still held. */
Test(unit_handles, killing_a_killed_entry_with_handle_0_fails_and_drops_nothing) {
  md_handle h;
  md__hentry *e = NULL;
  cr_assert_eq(md__handle_issue_held(&t, MD__KIND_PREPARED, 4, &obj[5], &h, &e), MD_NONE);
  cr_assert_eq(refs(e), 2u, "the table's and the caller's");
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(refs(e), 1u, "the caller's");
  cr_assert_not(md__handle_kill(&t, e, 0), "a killed entry's handle (0) kills nothing");
  cr_assert_not(md__handle_kill(&t, e, h), "nor does its old handle");
  cr_assert_eq(refs(e), 1u, "the caller's reference is still there");
  cr_assert_eq(destroyed, 0);
  md_handle h2;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_CLIENT, 0, &obj[6], &h2, NULL), MD_NONE);
  cr_assert_neq(SLOT(h2), SLOT(h), "the slot is not free while a reference is held");
  md__handle_put(&t, e);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(last_destroyed, &obj[5]);
}

Test(unit_handles, free_list_is_last_in_first_out_then_fresh_slots) {
  md_handle h[6];
  md__hentry *e[6];
  for (int i = 0; i < 6; i++) h[i] = issue_ok(MD__KIND_BUFFER, 1, &obj[i], &e[i]);
  for (int i = 0; i < 6; i++) cr_assert_eq(SLOT(h[i]), (uint32_t)i + 1);
  cr_assert_eq(t.next_unused, 7u);
  cr_assert(md__handle_kill(&t, e[1], h[1]));   /* slot 2 */
  cr_assert_eq(t.free_head, 2u);
  cr_assert_eq(e[1]->next_free, 0u);
  cr_assert_null(e[1]->obj, "a recycled entry drops its object");
  cr_assert(md__handle_kill(&t, e[4], h[4]));   /* slot 5 */
  cr_assert_eq(t.free_head, 5u);
  cr_assert_eq(e[4]->next_free, 2u);
  cr_assert_eq(atomic_load(&t.live), 4u);
  cr_assert_eq(destroy_ctx_seen, &ctx_token);
  cr_assert_eq(destroyed_entry, e[4]);

  md__hentry *a, *b, *c;
  md_handle ha = issue_ok(MD__KIND_BUFFER, 1, &obj[10], &a);
  md_handle hb = issue_ok(MD__KIND_BUFFER, 1, &obj[11], &b);
  md_handle hc = issue_ok(MD__KIND_BUFFER, 1, &obj[12], &c);
  cr_assert_eq(SLOT(ha), 5u);
  cr_assert_eq(SLOT(hb), 2u);
  cr_assert_eq(SLOT(hc), 7u);
  cr_assert_eq(a, e[4]);
  cr_assert_eq(b, e[1]);
  cr_assert_eq(a->next_free, 0u);
  cr_assert_eq(b->next_free, 0u);
  cr_assert_eq(GEN8(ha), 2u);
  cr_assert_eq(GEN8(hc), 1u);
  cr_assert_eq(t.free_head, 0u);
  cr_assert_eq(t.next_unused, 8u);
  cr_assert_eq(atomic_load(&t.live), 7u);
  md__handle_kill(&t, a, ha);
  md__handle_kill(&t, b, hb);
  md__handle_kill(&t, c, hc);
  for (int i = 0; i < 6; i++)
    if (i != 1 && i != 4) md__handle_kill(&t, e[i], h[i]);
  cr_assert_eq(atomic_load(&t.live), 0u);
}

Test(unit_handles, second_chunk_is_made_at_slot_4096) {
  enum { N = MD__HT_CHUNK + 2 };
  static md_handle h[N];
  static md__hentry *e[N];
  for (int i = 0; i < N; i++) {
    if (i == MD__HT_CHUNK - 1) cr_assert_null(atomic_load(&t.chunks[1]), "slot 4095 is in chunk 0");
    h[i] = issue_ok(MD__KIND_BUFFER, 2, &obj[0], &e[i]);
    cr_assert_eq(SLOT(h[i]), (uint32_t)i + 1);
  }
  md__hentry *c0 = atomic_load(&t.chunks[0]), *c1 = atomic_load(&t.chunks[1]);
  cr_assert_not_null(c1);
  cr_assert_null(atomic_load(&t.chunks[2]));
  cr_assert_eq(((uintptr_t)c0) % 64, 0u);
  cr_assert_eq(((uintptr_t)c1) % 64, 0u);
  cr_assert_eq(e[MD__HT_CHUNK - 2], &c0[MD__HT_CHUNK - 1], "slot 4095");
  cr_assert_eq(e[MD__HT_CHUNK - 1], &c1[0], "slot 4096");
  cr_assert_eq(e[MD__HT_CHUNK], &c1[1], "slot 4097");
  cr_assert_eq(atomic_load(&t.live), (uint64_t)N);
  for (int i = 0; i < N; i++) {
    md__hentry *g = md__handle_get(&t, h[i], MD__KIND_BUFFER);
    cr_assert_eq(g, e[i]);
    md__handle_put(&t, g);
  }
  /* A slot past the last chunk made is never issued. */
  md_handle far = ((uint64_t)1 << 24) | (3u * MD__HT_CHUNK + 5u);
  cr_assert_null(md__handle_get(&t, far, MD__KIND_BUFFER));
  cr_assert_str_eq(md__handle_why(&t, far, MD__KIND_BUFFER), "never issued by this device");
  for (int i = 0; i < N; i++) cr_assert(md__handle_kill(&t, e[i], h[i]));
  cr_assert_eq(destroyed, N);
}

Test(unit_handles, all_slots_in_use_is_transient_exhaustion_and_changes_nothing) {
  md__hentry *e0;
  md_handle h0 = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e0);
  t.next_unused = MD__HT_MAX_SLOTS + 1u;   /* every slot issued, none free */
  md_handle h = 0x5a5a;
  md__hentry *e = (md__hentry *)&obj[5];
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj[1], &h, &e), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_eq(h, 0x5a5a, "*out untouched");
  cr_assert_eq(e, (md__hentry *)&obj[5], "*entry untouched");
  cr_assert_eq(md__handle_issue_held(&t, MD__KIND_BUFFER, 1, &obj[1], &h, &e), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_eq(atomic_load(&t.live), 1u);
  cr_assert_eq(t.next_unused, MD__HT_MAX_SLOTS + 1u);
  /* A freed slot is still issued when the unused range is spent. */
  cr_assert(md__handle_kill(&t, e0, h0));
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj[1], &h, &e), MD_NONE);
  cr_assert_eq(SLOT(h), 1u);
  cr_assert(md__handle_kill(&t, e, h));
}

Test(unit_handles, the_last_slot_is_issued_then_reused) {
  md__hentry *e;
  md_handle h = 0;
  t.next_unused = MD__HT_MAX_SLOTS;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_POOL, 8, &obj[2], &h, &e), MD_NONE);
  cr_assert_eq(SLOT(h), MD__HT_MAX_SLOTS);
  cr_assert_eq(GEN8(h), 1u);
  cr_assert_eq(t.next_unused, MD__HT_MAX_SLOTS + 1u);
  cr_assert_null(atomic_load(&t.chunks[0]), "no chunk below is made");
  md__hentry *c = atomic_load(&t.chunks[MD__HT_MAX_CHUNKS - 1]);
  cr_assert_not_null(c);
  cr_assert_eq(e, &c[MD__HT_CHUNK - 1]);
  cr_assert_eq(MAC(h), expected_mac(key1, MD__HT_MAX_SLOTS, 1, MD__KIND_POOL, 8));
  md__hentry *g = md__handle_get(&t, h, MD__KIND_POOL);
  cr_assert_eq(g, e);
  md__handle_put(&t, g);
  cr_assert_str_eq(md__handle_why(&t, (1ull << 24) | 5u, MD__KIND_POOL), "never issued by this device");
  cr_assert(md__handle_kill(&t, e, h));
  md_handle h2;
  md__hentry *e2;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_POOL, 8, &obj[2], &h2, &e2), MD_NONE, "full, but the last slot is free");
  cr_assert_eq(SLOT(h2), MD__HT_MAX_SLOTS);
  cr_assert_eq(GEN8(h2), 2u);
  cr_assert_eq(e2, e);
  cr_assert_eq(md__handle_issue(&t, MD__KIND_POOL, 8, &obj[2], &h, &e), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert(md__handle_kill(&t, e2, h2));
}

/* ---- get / put / kill / why ---- */

Test(unit_handles, get_takes_a_reference_and_put_gives_it_back) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_PREPARED, 5, &obj[0], &e);
  md__hentry *g1 = md__handle_get(&t, h, MD__KIND_PREPARED);
  md__hentry *g2 = md__handle_get(&t, h, MD__KIND_PREPARED);
  cr_assert_eq(g1, e);
  cr_assert_eq(g2, e);
  cr_assert_eq(refs(e), 3u);
  md__handle_put(&t, g1);
  cr_assert_eq(refs(e), 2u);
  md__handle_ref(e);
  cr_assert_eq(refs(e), 3u);
  md__handle_put(&t, e);
  md__handle_put(&t, g2);
  cr_assert_eq(refs(e), 1u);
  cr_assert_eq(destroyed, 0);
  cr_assert_eq(atomic_load(&t.live), 1u);
  /* Wrong kind, zero, slot 0 with other bits, the low half alone, a forged MAC: no reference taken. */
  cr_assert_null(md__handle_get(&t, h, MD__KIND_BUFFER));
  cr_assert_null(md__handle_get(&t, 0, MD__KIND_PREPARED));
  cr_assert_null(md__handle_get(&t, h & ~0xffffffull, MD__KIND_PREPARED));
  cr_assert_null(md__handle_get(&t, h & 0xffffffffull, MD__KIND_PREPARED));
  cr_assert_null(md__handle_get(&t, h ^ (1ull << 63), MD__KIND_PREPARED));
  cr_assert_eq(refs(e), 1u);
  cr_assert_not(md__handle_kill(&t, e, h ^ 1ull), "a kill with another value kills nothing");
  cr_assert_eq(atomic_load(&e->handle), h);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(atomic_load(&e->handle), 0u);
  cr_assert_eq(atomic_load(&e->issued), h, "issued keeps the last handle");
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(refs(e), 0u);
  cr_assert_null(md__handle_get(&t, h, MD__KIND_PREPARED));
}

Test(unit_handles, entry_with_no_reference_is_not_found) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__ref_init(&e->ref, 0);   /* being destroyed: the handle still there, the count at zero */
  cr_assert_null(md__handle_get(&t, h, MD__KIND_BUFFER));
  md__use u = {NULL, -1};
  cr_assert_null(md__handle_use(&t, h, MD__KIND_BUFFER, &u));
  cr_assert_null(u.e);
  md__ref_init(&e->ref, 1);
  cr_assert(md__handle_kill(&t, e, h));
}

Test(unit_handles, why_names_each_reason) {
  md__hentry *c, *b;
  md_handle hc = issue_ok(MD__KIND_CLIENT, 0, &obj[0], &c);
  md_handle hb = issue_ok(MD__KIND_BUFFER, hc, &obj[1], &b);
  cr_assert_str_eq(md__handle_why(&t, 0, MD__KIND_BUFFER), "0 is never a valid handle");
  cr_assert_str_eq(md__handle_why(&t, hb, MD__KIND_EVENT), "is a handle of another kind");
  cr_assert_str_eq(md__handle_why(&t, hb, MD__KIND_BUFFER), "belongs to another client");
  cr_assert_str_eq(md__handle_why(&t, hc & ~0xffffffull, MD__KIND_CLIENT), "never issued by this device");
  cr_assert_str_eq(md__handle_why(&t, (1ull << 24) | 4097u, MD__KIND_CLIENT), "never issued by this device");
  cr_assert_str_eq(md__handle_why(&t, hb ^ (1ull << 40), MD__KIND_BUFFER),
                   "never issued by this device (forged, or a stale handle of a reused slot)");
  cr_assert_str_eq(md__handle_why(&t, (1ull << 24) | 3u, MD__KIND_BUFFER),
                   "never issued by this device (forged, or a stale handle of a reused slot)");
  cr_assert(md__handle_kill(&t, b, hb));
  cr_assert_str_eq(md__handle_why(&t, hb, MD__KIND_BUFFER), "was already released");
  cr_assert_str_eq(md__handle_why(&t, hb, MD__KIND_CLIENT), "was already released");
  md__hentry *b2;
  md_handle hb2 = issue_ok(MD__KIND_BUFFER, hc, &obj[1], &b2);
  cr_assert_eq(b2, b);
  cr_assert_str_eq(md__handle_why(&t, hb, MD__KIND_BUFFER),
                   "never issued by this device (forged, or a stale handle of a reused slot)");
  cr_assert(md__handle_kill(&t, b2, hb2));
  cr_assert(md__handle_kill(&t, c, hc));
}

/* ---- foreach ---- */

typedef struct seen {
  int n;
  int kinds[6];
  md_handle kill_every_other;
  md__htable *t;
} seen;

static void visit(md__hentry *e, void *arg) {
  seen *s = arg;
  s->n++;
  s->kinds[atomic_load(&e->kind)]++;
  cr_assert_geq(atomic_load(&e->ref.n), 2u, "a reference is held across the call");
  if (s->t && (s->n & 1)) md__handle_kill(s->t, e, atomic_load(&e->handle));
}

Test(unit_handles, foreach_visits_every_live_entry_of_every_chunk_with_its_kind) {
  enum { N = MD__HT_CHUNK + 40 };
  static md_handle h[N];
  static md__hentry *e[N];
  for (int i = 0; i < N; i++)
    h[i] = issue_ok(i % 3 == 0 ? MD__KIND_EVENT : i % 3 == 1 ? MD__KIND_BUFFER : MD__KIND_POOL, 7, &obj[0], &e[i]);
  md__handle_kill(&t, e[0], h[0]);
  md__handle_kill(&t, e[N - 1], h[N - 1]);
  md__handle_kill(&t, e[MD__HT_CHUNK - 1], h[MD__HT_CHUNK - 1]);
  seen s = {0};
  md__htable_foreach(&t, visit, &s);
  cr_assert_eq(s.n, N - 3);
  int ev = 0, bu = 0, po = 0;
  for (int i = 0; i < N; i++) {
    if (i == 0 || i == N - 1 || i == MD__HT_CHUNK - 1) continue;
    if (i % 3 == 0) ev++;
    else if (i % 3 == 1) bu++;
    else po++;
  }
  cr_assert_eq(s.kinds[MD__KIND_EVENT], ev);
  cr_assert_eq(s.kinds[MD__KIND_BUFFER], bu);
  cr_assert_eq(s.kinds[MD__KIND_POOL], po);
  /* fn may kill what it visits. */
  seen k = {.t = &t};
  md__htable_foreach(&t, visit, &k);
  cr_assert_eq(k.n, N - 3);
  cr_assert_eq(destroyed, 3 + (N - 3 + 1) / 2);
  cr_assert_eq(atomic_load(&t.live), (uint64_t)(N - 3) / 2);
  seen r = {0};
  md__htable_foreach(&t, visit, &r);
  cr_assert_eq(r.n, (N - 3) / 2);
  for (int i = 0; i < N; i++) md__handle_kill(&t, e[i], h[i]);
  cr_assert_eq(atomic_load(&t.live), 0u);
}

Test(unit_handles, foreach_on_an_empty_table_visits_nothing) {
  seen s = {0};
  md__htable_foreach(&t, visit, &s);
  cr_assert_eq(s.n, 0);
}

/* ---- fini and the spare chunk ---- */

static void assert_chunk_clean_but_slot1(const md__hentry *c) {
  static const md__hentry zero;
  cr_assert_eq(memcmp(&c[0], &zero, sizeof zero), 0, "entry 0");
  for (unsigned i = 2; i < MD__HT_CHUNK; i++) cr_assert_eq(memcmp(&c[i], &zero, sizeof zero), 0, "entry %u not zeroed", i);
}

Test(unit_handles, a_closed_tables_chunk_is_reused_zeroed) {
  md__htable a;
  md__htable_init(&a, key1, on_destroy, NULL);
  enum { N = 100 };
  md__hentry *e[N];
  md_handle h[N];
  for (int i = 0; i < N; i++) cr_assert_eq(md__handle_issue(&a, MD__KIND_BUFFER, 1, &obj[0], &h[i], &e[i]), MD_NONE);
  for (int i = 0; i < N; i++) md__handle_kill(&a, e[i], h[i]);
  md__hentry *ac = atomic_load(&a.chunks[0]);
  md__htable_fini(&a);

  md__htable b;
  md__htable_init(&b, key1, on_destroy, NULL);
  md__hentry *be;
  md_handle bh;
  cr_assert_eq(md__handle_issue(&b, MD__KIND_BUFFER, 1, &obj[1], &bh, &be), MD_NONE);
  cr_assert_eq(atomic_load(&b.chunks[0]), ac, "the spare chunk is taken");
  cr_assert_eq(be, &ac[1]);
  cr_assert_eq(be->gen, 1u, "the old generation was zeroed");
  cr_assert_eq(GEN8(bh), 1u);
  assert_chunk_clean_but_slot1(ac);
  md__handle_kill(&b, be, bh);
  md__htable_fini(&b);
}

Test(unit_handles, fini_of_two_chunks_zeroes_each_and_keeps_the_last) {
  md__htable a;
  md__htable_init(&a, key1, on_destroy, NULL);
  enum { N = MD__HT_CHUNK + 10 };   /* slots 1 .. 4106 */
  static md__hentry *e[N];
  static md_handle h[N];
  for (int i = 0; i < N; i++) cr_assert_eq(md__handle_issue(&a, MD__KIND_EVENT, 1, &obj[0], &h[i], &e[i]), MD_NONE);
  for (int i = 0; i < N; i++) md__handle_kill(&a, e[i], h[i]);
  md__hentry *c1 = atomic_load(&a.chunks[1]);
  cr_assert_not_null(c1);
  md__htable_fini(&a);

  md__htable b;
  md__htable_init(&b, key1, on_destroy, NULL);
  md__hentry *be;
  md_handle bh;
  cr_assert_eq(md__handle_issue(&b, MD__KIND_BUFFER, 1, &obj[1], &bh, &be), MD_NONE);
  cr_assert_eq(atomic_load(&b.chunks[0]), c1, "the last chunk freed is the spare");
  cr_assert_eq(be->gen, 1u);
  assert_chunk_clean_but_slot1(c1);
  md__handle_kill(&b, be, bh);
  md__htable_fini(&b);
}

Test(unit_handles, fini_of_a_full_first_chunk_zeroes_all_of_it) {
  md__htable a;
  md__htable_init(&a, key1, on_destroy, NULL);
  enum { N = MD__HT_CHUNK - 1 };   /* slots 1 .. 4095: chunk 0 full, next_unused 4096 */
  static md__hentry *e[N];
  static md_handle h[N];
  for (int i = 0; i < N; i++) cr_assert_eq(md__handle_issue(&a, MD__KIND_EVENT, 1, &obj[0], &h[i], &e[i]), MD_NONE);
  for (int i = 0; i < N; i++) md__handle_kill(&a, e[i], h[i]);
  cr_assert_eq(a.next_unused, (uint32_t)MD__HT_CHUNK);
  cr_assert_null(atomic_load(&a.chunks[1]));
  md__hentry *c0 = atomic_load(&a.chunks[0]);
  md__htable_fini(&a);
  md__htable b;
  md__htable_init(&b, key1, on_destroy, NULL);
  md__hentry *be;
  md_handle bh;
  cr_assert_eq(md__handle_issue(&b, MD__KIND_BUFFER, 1, &obj[1], &bh, &be), MD_NONE);
  cr_assert_eq(atomic_load(&b.chunks[0]), c0);
  assert_chunk_clean_but_slot1(c0);
  md__handle_kill(&b, be, bh);
  md__htable_fini(&b);
}

Test(unit_handles, a_fresh_chunk_is_zeroed_and_aligned) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__hentry *c = atomic_load(&t.chunks[0]);
  cr_assert_eq(((uintptr_t)c) % 64, 0u);
  assert_chunk_clean_but_slot1(c);
  md__handle_kill(&t, e, h);
}

/* ---- the per-thread reference caches ---- */

Test(unit_handles, use_miss_then_hits_move_no_count) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u = {NULL, 0};
  cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &u), e);
  cr_assert_eq(u.e, e);
  cr_assert_geq(u.slot, 0);
  cr_assert_lt(u.slot, (int)MD__RC_SLOTS);
  int8_t slot = u.slot;
  cr_assert_eq(refs(e), 2u, "the cache slot's reference");
  md__handle_unuse(&t, &u);
  cr_assert_null(u.e);
  cr_assert_eq(refs(e), 2u, "the cache keeps it");
  for (int i = 0; i < 5; i++) {
    md__use v;
    cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &v), e);
    cr_assert_eq(v.slot, slot, "the same slot");
    cr_assert_eq(refs(e), 2u);
    md__handle_unuse(&t, &v);
  }
  /* Another kind through a cached handle: not found, the cached reference kept. */
  md__use w = {(md__hentry *)&obj[9], 5};
  cr_assert_null(md__handle_use(&t, h, MD__KIND_EVENT, &w));
  cr_assert_eq(w.e, (md__hentry *)&obj[9], "*u untouched");
  cr_assert_eq(refs(e), 2u);
  cr_assert_null(md__handle_use(&t, 0, MD__KIND_BUFFER, &w));
  cr_assert_null(md__handle_use(&t, h ^ (1ull << 50), MD__KIND_BUFFER, &w));
  cr_assert_eq(w.e, (md__hentry *)&obj[9]);
  /* Killing it takes the idle cached reference back: destroyed at once. */
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(refs(e), 0u);
  cr_assert_null(md__handle_use(&t, h, MD__KIND_BUFFER, &w));
}

Test(unit_handles, unuse_of_nothing_does_nothing) {
  md__use u = {NULL, 3};
  md__handle_unuse(&t, &u);
  cr_assert_null(u.e);
  cr_assert_null(md__use_pin(&u));
  cr_assert_eq(destroyed, 0);
}

Test(unit_handles, kill_under_a_busy_use_drops_at_unuse_pin_first) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &u), e);
  void **pin = md__use_pin(&u);
  cr_assert_not_null(pin);
  cr_assert_null(*pin, "a new slot has no pin");
  *pin = &obj[7];
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 0, "a call in flight keeps it");
  cr_assert_eq(unpinned, 0);
  cr_assert_eq(refs(e), 1u);
  cr_assert_null(md__handle_get(&t, h, MD__KIND_BUFFER));
  md__handle_unuse(&t, &u);
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(unpins[0], &obj[7]);
  cr_assert_eq(unpin_ctx_seen, &ctx_token);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(n_events, 2);
  cr_assert_eq(events[0], 1, "the pin goes before the reference");
  cr_assert_eq(events[1], 2);
  /* The slot is free again for another handle. */
  md__hentry *e2;
  md_handle h2 = issue_ok(MD__KIND_BUFFER, 1, &obj[1], &e2);
  md__use u2;
  cr_assert_eq(md__handle_use(&t, h2, MD__KIND_BUFFER, &u2), e2);
  cr_assert_eq(refs(e2), 2u);
  cr_assert_null(*md__use_pin(&u2));
  md__handle_unuse(&t, &u2);
  cr_assert(md__handle_kill(&t, e2, h2));
  cr_assert_eq(destroyed, 2);
}

Test(unit_handles, kill_of_an_idle_cached_entry_drops_its_pin_then_reference) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &u), e);
  *md__use_pin(&u) = &obj[8];
  md__handle_unuse(&t, &u);
  cr_assert_eq(unpinned, 0, "the pin stays with the idle slot");
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(unpins[0], &obj[8]);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(events[0], 1);
  cr_assert_eq(events[1], 2);
}

Test(unit_handles, eviction_is_round_robin_and_drops_pin_and_reference) {
  md_handle h[MD__RC_SLOTS + 3];
  md__hentry *e[MD__RC_SLOTS + 3];
  int8_t slots[MD__RC_SLOTS + 3];
  for (unsigned i = 0; i < MD__RC_SLOTS + 3; i++) h[i] = issue_ok(MD__KIND_EVENT, 1, &obj[i], &e[i]);
  for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
    md__use u;
    cr_assert_eq(md__handle_use(&t, h[i], MD__KIND_EVENT, &u), e[i]);
    slots[i] = u.slot;
    *md__use_pin(&u) = &obj[i];
    md__handle_unuse(&t, &u);
    cr_assert_eq(refs(e[i]), 2u);
  }
  for (unsigned i = 0; i < MD__RC_SLOTS; i++)
    for (unsigned j = 0; j < i; j++) cr_assert_neq(slots[i], slots[j], "every slot is used before any eviction");
  cr_assert_eq(unpinned, 0);
  /* The ninth evicts the least recently filled (the first), the tenth the second. */
  for (unsigned k = 0; k < 3; k++) {
    md__use u;
    cr_assert_eq(md__handle_use(&t, h[MD__RC_SLOTS + k], MD__KIND_EVENT, &u), e[MD__RC_SLOTS + k]);
    cr_assert_eq(u.slot, slots[k]);
    cr_assert_eq(refs(e[k]), 1u, "evicted: the cache's reference dropped");
    cr_assert_eq(unpinned, (int)k + 1);
    cr_assert_eq(unpins[k], &obj[k]);
    cr_assert_eq(refs(e[MD__RC_SLOTS + k]), 2u);
    md__handle_unuse(&t, &u);
  }
  for (unsigned i = 3; i < MD__RC_SLOTS; i++) cr_assert_eq(refs(e[i]), 2u, "still cached");
  for (unsigned i = 0; i < MD__RC_SLOTS + 3; i++) cr_assert(md__handle_kill(&t, e[i], h[i]));
  cr_assert_eq(destroyed, (int)MD__RC_SLOTS + 3);
  cr_assert_eq(unpinned, (int)MD__RC_SLOTS);
}

Test(unit_handles, every_slot_busy_gives_a_plain_reference) {
  md_handle h[MD__RC_SLOTS + 1];
  md__hentry *e[MD__RC_SLOTS + 1];
  md__use u[MD__RC_SLOTS + 1];
  for (unsigned i = 0; i <= MD__RC_SLOTS; i++) h[i] = issue_ok(MD__KIND_BUFFER, 1, &obj[i], &e[i]);
  for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
    cr_assert_eq(md__handle_use(&t, h[i], MD__KIND_BUFFER, &u[i]), e[i]);
    cr_assert_geq(u[i].slot, 0);
  }
  cr_assert_eq(md__handle_use(&t, h[MD__RC_SLOTS], MD__KIND_BUFFER, &u[MD__RC_SLOTS]), e[MD__RC_SLOTS]);
  cr_assert_eq(u[MD__RC_SLOTS].slot, -1);
  cr_assert_eq(refs(e[MD__RC_SLOTS]), 2u);
  cr_assert_null(md__use_pin(&u[MD__RC_SLOTS]));
  /* The same handle again while its slot is busy: another reference, another way. */
  md__use again;
  cr_assert_eq(md__handle_use(&t, h[0], MD__KIND_BUFFER, &again), e[0]);
  cr_assert_eq(again.slot, -1);
  cr_assert_eq(refs(e[0]), 3u);
  md__handle_unuse(&t, &again);
  cr_assert_eq(refs(e[0]), 2u);
  md__handle_unuse(&t, &u[MD__RC_SLOTS]);
  cr_assert_eq(refs(e[MD__RC_SLOTS]), 1u, "a plain reference is put back");
  for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
    md__handle_unuse(&t, &u[i]);
    cr_assert_eq(refs(e[i]), 2u);
  }
  for (unsigned i = 0; i <= MD__RC_SLOTS; i++) cr_assert(md__handle_kill(&t, e[i], h[i]));
  cr_assert_eq(destroyed, (int)MD__RC_SLOTS + 1);
}

Test(unit_handles, a_stolen_slot_is_refilled_first) {
  md_handle h[MD__RC_SLOTS + 1];
  md__hentry *e[MD__RC_SLOTS + 1];
  int8_t slots[MD__RC_SLOTS];
  for (unsigned i = 0; i <= MD__RC_SLOTS; i++) h[i] = issue_ok(MD__KIND_BUFFER, 1, &obj[i], &e[i]);
  for (unsigned i = 0; i < MD__RC_SLOTS; i++) {
    md__use u;
    md__handle_use(&t, h[i], MD__KIND_BUFFER, &u);
    slots[i] = u.slot;
    md__handle_unuse(&t, &u);
  }
  cr_assert(md__handle_kill(&t, e[5], h[5]));   /* its slot emptied */
  cr_assert_eq(destroyed, 1);
  md__use u;
  cr_assert_eq(md__handle_use(&t, h[MD__RC_SLOTS], MD__KIND_BUFFER, &u), e[MD__RC_SLOTS]);
  cr_assert_eq(u.slot, slots[5], "the emptied slot, no eviction");
  for (unsigned i = 0; i < MD__RC_SLOTS; i++)
    if (i != 5) cr_assert_eq(refs(e[i]), 2u, "nothing evicted");
  md__handle_unuse(&t, &u);
  for (unsigned i = 0; i <= MD__RC_SLOTS; i++)
    if (i != 5) cr_assert(md__handle_kill(&t, e[i], h[i]));
  cr_assert_eq(destroyed, (int)MD__RC_SLOTS + 1);
}

Test(unit_handles, cache_tells_tables_apart) {
  md__htable t2;
  static const uint8_t key_same[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  md__htable_init(&t2, key_same, on_destroy, &ctx_token);
  t2.unpin = on_unpin;
  md__hentry *e1, *e2;
  md_handle h1 = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e1);
  md_handle h2;
  cr_assert_eq(md__handle_issue(&t2, MD__KIND_BUFFER, 1, &obj[1], &h2, &e2), MD_NONE);
  cr_assert_eq(h1, h2, "same key, same sequence: the same value");
  md__use u1, u2;
  cr_assert_eq(md__handle_use(&t, h1, MD__KIND_BUFFER, &u1), e1);
  *md__use_pin(&u1) = &obj[3];
  md__handle_unuse(&t, &u1);
  cr_assert_eq(md__handle_use(&t2, h2, MD__KIND_BUFFER, &u2), e2, "not the other table's cached entry");
  *md__use_pin(&u2) = &obj[4];
  md__handle_unuse(&t2, &u2);
  cr_assert_eq(refs(e1), 2u);
  cr_assert_eq(refs(e2), 2u);
  /* unpin_mine and unpin_idle stay within their table. */
  md__handle_unpin_mine(&t2, h1);
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(unpins[0], &obj[4]);
  cr_assert_eq(md__htable_unpin_idle(&t2, NULL), 0u, "t2's pin is gone already");
  cr_assert_eq(md__htable_unpin_idle(&t, &obj[4]), 0u);
  cr_assert_eq(md__htable_unpin_idle(&t, NULL), 1u);
  cr_assert_eq(unpins[1], &obj[3]);
  cr_assert_eq(refs(e1), 2u, "unpinning keeps the entry cached");
  cr_assert(md__handle_kill(&t, e1, h1));
  cr_assert(md__handle_kill(&t2, e2, h2));
  cr_assert_eq(destroyed, 2);
  md__htable_fini(&t2);
}

Test(unit_handles, unpin_mine_drops_only_that_handles_pin) {
  md__hentry *a, *b;
  md_handle ha = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &a);
  md_handle hb = issue_ok(MD__KIND_BUFFER, 1, &obj[1], &b);
  md__use u;
  md__handle_use(&t, ha, MD__KIND_BUFFER, &u);
  int8_t sa = u.slot;
  *md__use_pin(&u) = &obj[10];
  md__handle_unuse(&t, &u);
  md__handle_use(&t, hb, MD__KIND_BUFFER, &u);
  *md__use_pin(&u) = &obj[11];
  md__handle_unuse(&t, &u);
  md__handle_unpin_mine(&t, 0);
  cr_assert_eq(unpinned, 0);
  md__handle_unpin_mine(&t, ha);
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(unpins[0], &obj[10]);
  cr_assert_eq(refs(a), 2u, "still cached");
  md__handle_unpin_mine(&t, ha);
  cr_assert_eq(unpinned, 1, "nothing left to drop");
  /* The slot is idle again: a hit, with no pin. */
  cr_assert_eq(md__handle_use(&t, ha, MD__KIND_BUFFER, &u), a);
  cr_assert_eq(u.slot, sa);
  cr_assert_null(*md__use_pin(&u));
  cr_assert_eq(refs(a), 2u);
  /* While busy, unpin_mine leaves it alone. */
  *md__use_pin(&u) = &obj[12];
  md__handle_unpin_mine(&t, ha);
  cr_assert_eq(unpinned, 1);
  md__handle_unuse(&t, &u);
  cr_assert_eq(md__htable_unpin_idle(&t, &obj[12]), 1u);
  cr_assert_eq(unpins[1], &obj[12]);
  cr_assert_eq(md__htable_unpin_idle(&t, &obj[12]), 0u);
  cr_assert_eq(refs(b), 2u);
  cr_assert(md__handle_kill(&t, a, ha));
  cr_assert(md__handle_kill(&t, b, hb));
  cr_assert_eq(unpinned, 3);
  cr_assert_eq(unpins[2], &obj[11]);
  cr_assert_eq(destroyed, 2);
}

Test(unit_handles, unpin_idle_leaves_busy_slots_and_counts_what_it_drops) {
  md__hentry *e[3];
  md_handle h[3];
  md__use u[3];
  for (int i = 0; i < 3; i++) {
    h[i] = issue_ok(MD__KIND_BUFFER, 1, &obj[i], &e[i]);
    md__handle_use(&t, h[i], MD__KIND_BUFFER, &u[i]);
    *md__use_pin(&u[i]) = &obj[i + 4];
  }
  md__handle_unuse(&t, &u[0]);
  md__handle_unuse(&t, &u[1]);
  cr_assert_eq(md__htable_unpin_idle(&t, NULL), 2u, "two idle pins");
  cr_assert_eq(unpinned, 2);
  cr_assert_eq(md__htable_unpin_idle(&t, NULL), 0u);
  md__handle_unuse(&t, &u[2]);
  cr_assert_eq(md__htable_unpin_idle(&t, &obj[4]), 0u);
  cr_assert_eq(md__htable_unpin_idle(&t, &obj[6]), 1u);
  cr_assert_eq(unpinned, 3);
  cr_assert_eq(unpins[2], &obj[6]);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(refs(e[i]), 2u);
    cr_assert(md__handle_kill(&t, e[i], h[i]));
  }
  cr_assert_eq(destroyed, 3);
  cr_assert_eq(unpinned, 3);
}

Test(unit_handles, table_without_unpin_still_drops_references) {
  t.unpin = NULL;
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  md__handle_use(&t, h, MD__KIND_BUFFER, &u);
  *md__use_pin(&u) = &obj[1];
  md__handle_unuse(&t, &u);
  cr_assert_eq(md__htable_unpin_idle(&t, NULL), 1u, "the pin is taken from the slot");
  cr_assert_eq(md__htable_unpin_idle(&t, NULL), 0u);
  md__handle_unpin_mine(&t, h);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(unpinned, 0);
}

/* A handle killed by some path that did not scan this thread's cache (a miss filled the slot
 * after the kill's scan passed it): the use that finds it dead on unuse drops it. */
Test(unit_handles, unuse_drops_a_slot_whose_handle_died_unseen) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &u), e);
  *md__use_pin(&u) = &obj[2];
  md__ref_get(&e->ref);                 /* a holder of its own, like a kill's caller */
  atomic_store(&e->handle, 0);          /* killed; its scan already passed this slot */
  md__handle_put(&t, e);                /* the table's reference */
  cr_assert_eq(refs(e), 2u);
  md__handle_unuse(&t, &u);
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(refs(e), 1u, "the slot's reference dropped at unuse");
  md__handle_put(&t, e);
  cr_assert_eq(destroyed, 1);
}

/* The same, found by the next use of the handle rather than the unuse. */
Test(unit_handles, a_cached_entry_found_dead_by_a_use_is_dropped) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  cr_assert_eq(md__handle_use(&t, h, MD__KIND_BUFFER, &u), e);
  *md__use_pin(&u) = &obj[2];
  md__handle_unuse(&t, &u);
  md__ref_get(&e->ref);
  atomic_store(&e->handle, 0);
  md__handle_put(&t, e);
  cr_assert_eq(refs(e), 2u);
  cr_assert_null(md__handle_use(&t, h, MD__KIND_BUFFER, &u));
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(refs(e), 1u);
  md__handle_put(&t, e);
  cr_assert_eq(destroyed, 1);
}

typedef struct thread_arg {
  md_handle h;
  md__hentry *e;
  int ok;
} thread_arg;

static void *user_thread(void *p) {
  thread_arg *a = p;
  md__use u;
  a->ok = md__handle_use(&t, a->h, MD__KIND_BUFFER, &u) == a->e && u.slot >= 0 && md__use_pin(&u);
  if (a->ok) *md__use_pin(&u) = &obj[13];
  md__handle_unuse(&t, &u);
  a->ok = a->ok && atomic_load(&a->e->ref.n) == 3u;   /* the table's, main's cache and this one's */
  return NULL;
}

Test(unit_handles, a_threads_end_drops_its_cached_references_and_pins) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  md__handle_use(&t, h, MD__KIND_BUFFER, &u);
  md__handle_unuse(&t, &u);
  cr_assert_eq(refs(e), 2u);
  for (int round = 0; round < 3; round++) {
    thread_arg a = {h, e, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, user_thread, &a), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert(a.ok, "round %d", round);
    cr_assert_eq(refs(e), 2u, "the ended thread's reference is gone (round %d)", round);
    cr_assert_eq(unpinned, round + 1);
    cr_assert_eq(unpins[round], &obj[13]);
  }
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 1);
}

static void *kill_thread(void *p) {
  thread_arg *a = p;
  a->ok = md__handle_kill(&t, a->e, a->h);
  return NULL;
}

Test(unit_handles, a_kill_on_another_thread_steals_this_threads_idle_slot) {
  md__hentry *e;
  md_handle h = issue_ok(MD__KIND_BUFFER, 1, &obj[0], &e);
  md__use u;
  md__handle_use(&t, h, MD__KIND_BUFFER, &u);
  *md__use_pin(&u) = &obj[14];
  md__handle_unuse(&t, &u);
  thread_arg a = {h, e, 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, kill_thread, &a), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  cr_assert(a.ok);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(unpinned, 1);
  cr_assert_eq(unpins[0], &obj[14]);
}

Test(unit_handles, fini_frees_a_second_chunk_holding_one_slot) {
  md__htable a;
  md__htable_init(&a, key1, on_destroy, NULL);
  enum { N = MD__HT_CHUNK };   /* slots 1 .. 4096: slot 4096 alone in chunk 1, next_unused 4097 */
  static md__hentry *e[N];
  static md_handle h[N];
  for (int i = 0; i < N; i++) cr_assert_eq(md__handle_issue(&a, MD__KIND_EVENT, 1, &obj[0], &h[i], &e[i]), MD_NONE);
  for (int i = 0; i < N; i++) md__handle_kill(&a, e[i], h[i]);
  cr_assert_eq(a.next_unused, (uint32_t)MD__HT_CHUNK + 1u);
  md__hentry *c1 = atomic_load(&a.chunks[1]);
  cr_assert_not_null(c1);
  md__htable_fini(&a);
  md__htable b;
  md__htable_init(&b, key1, on_destroy, NULL);
  md__hentry *be;
  md_handle bh;
  cr_assert_eq(md__handle_issue(&b, MD__KIND_BUFFER, 1, &obj[1], &bh, &be), MD_NONE);
  cr_assert_eq(atomic_load(&b.chunks[0]), c1, "the chunk of slot 4096 was freed last: the spare");
  assert_chunk_clean_but_slot1(c1);
  md__handle_kill(&b, be, bh);
  md__htable_fini(&b);
}
