/* test_concurrency_idle_pins.c - device memory that only an idle thread's reference cache keeps
 * alive is taken back before a call reports exhaustion (SPEC 8.3: TRANSIENT means the memory is
 * in use; SPEC 6: nothing is released only when something becomes unreachable).
 *
 * Thread A executes with buffer t as an input: its cache keeps t's storage pinned (S1) and A
 * stays alive and idle. The main thread then writes t: S1 is held, so the write takes fresh
 * storage S2 and S1 is kept alive by A's idle pin alone. With mem_limit leaving room for two
 * such storages and not three, the next allocate (or the first write of a buffer with unknown
 * dims) fits only once S1 is freed. Nothing sleeps: A waits on a condition variable. Also built
 * under ThreadSanitizer (the file name says "concurrency"). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [16,256] + [1,256] (broadcast) */
static const uint32_t DT[2] = {16, 256}, DU[2] = {0, 256}, DB[2] = {1, 256};
#define BT (16u * 256u * 4u) /* 16 KiB */
#define BB (256u * 4u)
static float data[16 * 256];

static void setup(void) {
  /* Room for the reader's execution (t, a 1 KiB input and a 16 KiB output on the device) and
   * for two 16 KiB storages, not three: 52 KiB with what the sim adds (red zones, 256-byte
   * spans, its transfer staging). memory_in_use_is_still_exhausted fails if the limit leaves
   * room for a third, and every test fails if the reader's execution does not fit. */
  mdt_env_open(&e, "backend=sim;mem_limit=52K");
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, DT, 2, DB, 2, DT, 0));
  mdt_iota(data, 16 * 256, 1.0f);
}
static void teardown(void) {
  mdt_release(&e, P);
  mdt_env_close(&e, 1);
}
TestSuite(idle_pins, .init = setup, .fini = teardown);

/* Thread A: one execution reading token t (its cache pins t's storage), then idle until told. */
static struct {
  pthread_mutex_t m;
  pthread_cond_t c;
  int ran, done;
  md_token t;
  md_status st;
} a = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};

static void *reader(void *arg) {
  (void)arg;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, a.t, 0, NULL);
  mdt_req_in_data(&r, data, BB, 0, NULL);
  mdt_req_out_pool(&r, BT, 0, NULL);
  md_status st = e.drv->execute(e.dev, e.client, P, mdt_req(&r), NULL, 0, NULL);
  if (st != MD_NONE) fprintf(stderr, "reader: %s\n", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  pthread_mutex_lock(&a.m);
  a.st = st;
  a.ran = 1;
  pthread_cond_broadcast(&a.c);
  while (!a.done) pthread_cond_wait(&a.c, &a.m);
  pthread_mutex_unlock(&a.m);
  return NULL;
}

/* Leaves t's first storage alive only through the idle reader's pin; returns the reader. */
static pthread_t pin_then_move_on(md_token t) {
  cr_assert_eq(mdt_copy_from(&e, e.client, t, data, BT, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  a.t = t;
  a.ran = a.done = 0;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, reader, NULL), 0);
  pthread_mutex_lock(&a.m);
  while (!a.ran) pthread_cond_wait(&a.c, &a.m);
  pthread_mutex_unlock(&a.m);
  cr_assert_eq(a.st, MD_NONE, "the reader's execution");
  /* The storage is pinned by the idle reader: this write takes fresh storage. */
  cr_assert_eq(mdt_copy_from(&e, e.client, t, data, BT, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  return th;
}

static void release_reader(pthread_t th) {
  pthread_mutex_lock(&a.m);
  a.done = 1;
  pthread_cond_broadcast(&a.c);
  pthread_mutex_unlock(&a.m);
  pthread_join(th, NULL);
}

Test(idle_pins, allocate_takes_back_storage_only_an_idle_cache_keeps) {
  md_token t = mdt_alloc(&e, P, false, 0, 2, DT);
  pthread_t th = pin_then_move_on(t);
  md_token u = 0;
  md_status st = mdt_try_alloc(&e, e.client, P, true, 0, 2, DT, &u);
  cr_expect_eq(st, MD_NONE, "allocate of 16 KiB with 32 KiB in use, 16 KiB of it held by an idle cache only: %d (%s)",
               st, e.drv->last_error(e.dev));
  release_reader(th);
  if (u) mdt_free(&e, u);
  mdt_free(&e, t);
}

Test(idle_pins, a_write_takes_back_storage_only_an_idle_cache_keeps) {
  md_token t = mdt_alloc(&e, P, false, 0, 2, DT);
  md_token v = mdt_alloc(&e, P, true, 0, 2, DU);   /* unknown dims: storage at the first write */
  pthread_t th = pin_then_move_on(t);
  md_status st = mdt_copy_from(&e, e.client, v, data, BT, 2, DT);
  cr_expect_eq(st, MD_NONE, "first write of 16 KiB with 32 KiB in use, 16 KiB of it held by an idle cache only: %d (%s)",
               st, e.drv->last_error(e.dev));
  release_reader(th);
  mdt_free(&e, v);
  mdt_free(&e, t);
}

/* The limit is real: with the reader's storage taken back, a third storage still does not fit
 * while t and u hold two (the reclaim frees only what nobody uses). */
Test(idle_pins, memory_in_use_is_still_exhausted) {
  md_token t = mdt_alloc(&e, P, false, 0, 2, DT);
  pthread_t th = pin_then_move_on(t);
  md_token u = 0, w = 0;
  cr_assert_eq(mdt_try_alloc(&e, e.client, P, true, 0, 2, DT, &u), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(mdt_try_alloc(&e, e.client, P, true, 0, 2, DT, &w), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect_eq(w, 0);
  release_reader(th);
  mdt_free(&e, u);
  mdt_free(&e, t);
}
