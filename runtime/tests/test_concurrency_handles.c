/* test_concurrency_handles.c - lock-free lookups, and lookups through the per-thread reference
 * caches, racing kills and slot reuse (run under TSan); a kill takes cached references back. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "handles.h"

#define SLOTS 64
#define ROUNDS 2000

typedef struct obj {
  _Atomic int alive;   /* 1 from issue to destroy */
  int payload;
} obj;

static md__htable t;
static obj objs[SLOTS];
static _Atomic uint64_t live_handles[SLOTS];
static _Atomic int use_after_destroy;
static _Atomic int stop;

static void on_destroy(void *ctx, md__hentry *e) {
  (void)ctx;
  obj *o = e->obj;
  atomic_store(&o->alive, 0);
}

/* Readers look up whatever handle is current and check the object is alive while they hold it. */
static void *reader(void *arg) {
  (void)arg;
  uint64_t x = 88172645463325252ull;
  while (!atomic_load(&stop)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    md_handle h = atomic_load(&live_handles[x % SLOTS]);
    md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
    if (!e) continue;
    obj *o = e->obj;
    if (!atomic_load(&o->alive)) atomic_store(&use_after_destroy, 1);
    (void)o->payload;
    md__handle_put(&t, e);
  }
  return NULL;
}

/* The writer releases and reissues handles as fast as it can. */
static void *writer(void *arg) {
  (void)arg;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < SLOTS; i++) {
      md_handle h = atomic_load(&live_handles[i]);
      md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
      if (e) {
        md__handle_kill(&t, e, h);
        md__handle_put(&t, e);
      }
      /* objs[i] is destroyed once its last reader lets go; only then reuse it. */
      if (atomic_load(&objs[i].alive)) continue;
      atomic_store(&objs[i].alive, 1);
      objs[i].payload = r;
      md_handle nh;
      cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &objs[i], &nh, NULL), MD_NONE);
      atomic_store(&live_handles[i], nh);
    }
  }
  atomic_store(&stop, 1);
  return NULL;
}

Test(concurrency_handles, lookups_racing_release_and_reuse_never_see_a_destroyed_object) {
  uint8_t key[16] = {9};
  md__htable_init(&t, key, on_destroy, NULL);
  for (int i = 0; i < SLOTS; i++) {
    atomic_store(&objs[i].alive, 1);
    md_handle h;
    cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &objs[i], &h, NULL), MD_NONE);
    atomic_store(&live_handles[i], h);
  }
  pthread_t rd[3], wr;
  for (int i = 0; i < 3; i++) pthread_create(&rd[i], NULL, reader, NULL);
  pthread_create(&wr, NULL, writer, NULL);
  pthread_join(wr, NULL);
  for (int i = 0; i < 3; i++) pthread_join(rd[i], NULL);
  cr_assert_eq(atomic_load(&use_after_destroy), 0, "a lookup returned a destroyed object");
  for (int i = 0; i < SLOTS; i++) {
    md_handle h = atomic_load(&live_handles[i]);
    md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
    if (e) {
      md__handle_kill(&t, e, h);
      md__handle_put(&t, e);
    }
  }
  cr_assert_eq(atomic_load(&t.live), 0u, "every entry recycled");
  md__htable_fini(&t);
}

/* ---- per-thread reference caches (md__handle_use) ---- */

/* The same race with readers that look up through their thread's reference cache: a kill takes
 * the cached references back (idle ones at once, busy ones at the end of their use), so every
 * object is destroyed and its slot reused while the readers keep running. */
static void *cached_reader(void *arg) {
  (void)arg;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  while (!atomic_load(&stop)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    md_handle h = atomic_load(&live_handles[x % SLOTS]);
    md__use u;
    md__hentry *e = md__handle_use(&t, h, MD__KIND_BUFFER, &u);
    if (!e) continue;
    obj *o = e->obj;
    if (!atomic_load(&o->alive)) atomic_store(&use_after_destroy, 1);
    (void)o->payload;
    md__handle_unuse(&t, &u);
  }
  return NULL;
}

Test(concurrency_handles, cached_lookups_racing_release_and_reuse_never_see_a_destroyed_object) {
  uint8_t key[16] = {7};
  atomic_store(&stop, 0);
  atomic_store(&use_after_destroy, 0);
  md__htable_init(&t, key, on_destroy, NULL);
  for (int i = 0; i < SLOTS; i++) {
    atomic_store(&objs[i].alive, 1);
    md_handle h;
    cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &objs[i], &h, NULL), MD_NONE);
    atomic_store(&live_handles[i], h);
  }
  pthread_t rd[3], wr;
  for (int i = 0; i < 3; i++) pthread_create(&rd[i], NULL, cached_reader, NULL);
  pthread_create(&wr, NULL, writer, NULL);
  pthread_join(wr, NULL);
  for (int i = 0; i < 3; i++) pthread_join(rd[i], NULL);   /* ended threads drop their caches */
  cr_assert_eq(atomic_load(&use_after_destroy), 0, "a cached lookup returned a destroyed object");
  for (int i = 0; i < SLOTS; i++) {
    md_handle h = atomic_load(&live_handles[i]);
    md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
    if (e) {
      md__handle_kill(&t, e, h);
      md__handle_put(&t, e);
    }
  }
  cr_assert_eq(atomic_load(&t.live), 0u, "every entry recycled: no cached reference was left behind");
  md__htable_fini(&t);
}

/* One object and a helper thread that uses it through its cache at the test's signal. */
typedef struct helper {
  pthread_t th;
  md_handle h;
  _Atomic int step;        /* the test sets 1: use, 2: unuse, 3: exit; the helper acks in done */
  _Atomic int done;
} helper;

static void *helper_main(void *arg) {
  helper *hp = arg;
  md__use u = {0};
  for (int want = 1; want <= 3; want++) {
    while (atomic_load(&hp->step) < want) sched_yield();
    if (want == 1) md__handle_use(&t, hp->h, MD__KIND_BUFFER, &u);
    if (want == 2) md__handle_unuse(&t, &u);
    atomic_store(&hp->done, want);
  }
  return NULL;
}

static void helper_do(helper *hp, int step) {
  atomic_store(&hp->step, step);
  while (atomic_load(&hp->done) < step) sched_yield();
}

static uint32_t refs(md_handle h) {
  md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
  cr_assert_not_null(e);
  uint32_t n = atomic_load(&e->ref.n) - 1;
  md__handle_put(&t, e);
  return n;
}

static void fresh_table(obj *o, md_handle *h) {
  uint8_t key[16] = {5};
  md__htable_init(&t, key, on_destroy, NULL);
  atomic_store(&o->alive, 1);
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, o, h, NULL), MD_NONE);
}

Test(concurrency_handles, a_cached_use_moves_no_reference_count) {
  static obj o;
  md_handle h;
  fresh_table(&o, &h);
  md__use u;
  cr_assert_not_null(md__handle_use(&t, h, MD__KIND_BUFFER, &u));
  md__handle_unuse(&t, &u);
  uint32_t cached = refs(h);
  cr_expect_eq(cached, 2u, "the table's reference and this thread's cached one");
  for (int i = 0; i < 100; i++) {
    cr_assert_not_null(md__handle_use(&t, h, MD__KIND_BUFFER, &u));
    cr_expect_eq(refs(h), cached, "a hit took a reference");
    md__handle_unuse(&t, &u);
  }
  md__hentry *e = md__handle_get(&t, h, MD__KIND_BUFFER);
  cr_assert(md__handle_kill(&t, e, h));
  md__handle_put(&t, e);
  cr_expect_eq(atomic_load(&o.alive), 0, "the kill took the cached reference back: destroyed");
  cr_expect_null(md__handle_use(&t, h, MD__KIND_BUFFER, &u), "a dead handle is not found in the cache");
  md__htable_fini(&t);
}

Test(concurrency_handles, a_kill_takes_back_an_idle_threads_cached_reference) {
  static obj o;
  static helper hp;
  memset(&hp, 0, sizeof hp);
  fresh_table(&o, &hp.h);
  pthread_create(&hp.th, NULL, helper_main, &hp);
  helper_do(&hp, 1);
  helper_do(&hp, 2);   /* used and idle: its cache holds a reference */
  cr_expect_eq(refs(hp.h), 2u);
  md__hentry *e = md__handle_get(&t, hp.h, MD__KIND_BUFFER);
  cr_assert(md__handle_kill(&t, e, hp.h));
  md__handle_put(&t, e);
  cr_expect_eq(atomic_load(&o.alive), 0, "an idle thread's cache kept a killed object alive");
  helper_do(&hp, 3);
  pthread_join(hp.th, NULL);
  cr_expect_eq(atomic_load(&t.live), 0u);
  md__htable_fini(&t);
}

Test(concurrency_handles, a_kill_during_a_cached_use_destroys_at_its_end) {
  static obj o;
  static helper hp;
  memset(&hp, 0, sizeof hp);
  fresh_table(&o, &hp.h);
  pthread_create(&hp.th, NULL, helper_main, &hp);
  helper_do(&hp, 1);   /* in use now */
  md__hentry *e = md__handle_get(&t, hp.h, MD__KIND_BUFFER);
  cr_assert(md__handle_kill(&t, e, hp.h));
  md__handle_put(&t, e);
  cr_expect_eq(atomic_load(&o.alive), 1, "destroyed under a use in flight");
  helper_do(&hp, 2);
  cr_expect_eq(atomic_load(&o.alive), 0, "not destroyed when the last use ended");
  helper_do(&hp, 3);
  pthread_join(hp.th, NULL);
  cr_expect_eq(atomic_load(&t.live), 0u);
  md__htable_fini(&t);
}

Test(concurrency_handles, an_ending_thread_drops_its_cached_references) {
  static obj o;
  static helper hp;
  memset(&hp, 0, sizeof hp);
  fresh_table(&o, &hp.h);
  pthread_create(&hp.th, NULL, helper_main, &hp);
  helper_do(&hp, 1);
  helper_do(&hp, 2);
  cr_expect_eq(refs(hp.h), 2u);
  helper_do(&hp, 3);
  pthread_join(hp.th, NULL);
  cr_expect_eq(refs(hp.h), 1u, "the ended thread's cached reference is gone");
  md__hentry *e = md__handle_get(&t, hp.h, MD__KIND_BUFFER);
  cr_assert(md__handle_kill(&t, e, hp.h));
  md__handle_put(&t, e);
  cr_expect_eq(atomic_load(&t.live), 0u);
  md__htable_fini(&t);
}
