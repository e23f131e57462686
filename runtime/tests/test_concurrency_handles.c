/* test_concurrency_handles.c - lock-free lookups racing kills and slot reuse (run under TSan). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

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
