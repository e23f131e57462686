/* test_concurrency_scope.c - shared scopes under concurrent acquire/release/close (SPEC 6).
 * Runs under ThreadSanitizer. No sleeps: threads meet at barriers and are joined. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/scope.h"

#define THREADS 8
#define ROUNDS 2000
#define BYTES 4096

/* Shared by the workers of one test. `held` counts acquires the test knows are live; the
 * scope's release callback records it, so a free under a live user is seen. */
typedef struct world {
  md_scope *s;
  const volatile uint8_t *bytes;   /* mapped by the scope */
  pthread_barrier_t start;
  _Atomic int held;
  _Atomic int runs;
  _Atomic int held_at_free;
  _Atomic long refused;
  _Atomic int closers_ok;
} world;

static void on_free(void *ctx) {
  world *w = ctx;
  atomic_store(&w->held_at_free, atomic_load(&w->held));
  atomic_fetch_add(&w->runs, 1);
}

static void world_init(world *w, int parties) {
  int fd = memfd_create("scope-conc", MFD_CLOEXEC);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, BYTES), 0);
  uint8_t one = 0x42;
  cr_assert_eq(pwrite(fd, &one, 1, BYTES - 1), 1);
  void *p;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &w->s), MD_NONE);
  cr_assert_eq(md_scope_map(w->s, fd, 0, BYTES, PROT_READ, &p), MD_NONE);
  close(fd);   /* the mapping keeps the file */
  w->bytes = p;
  cr_assert_eq(md_scope_attach(w->s, on_free, w), MD_NONE);
  atomic_init(&w->held, 0);
  atomic_init(&w->runs, 0);
  atomic_init(&w->held_at_free, -1);
  atomic_init(&w->refused, 0);
  atomic_init(&w->closers_ok, 0);
  cr_assert_eq(pthread_barrier_init(&w->start, NULL, (unsigned)parties), 0);
}

/* Holds one acquire for its whole life (so the scope cannot be freed while it calls
 * md_scope_acquire), then takes and drops nested uses while the main thread closes. */
static void *worker(void *p) {
  world *w = p;
  if (md_scope_acquire(w->s) != MD_NONE) return (void *)1;
  atomic_fetch_add(&w->held, 1);
  pthread_barrier_wait(&w->start);
  for (int i = 0; i < ROUNDS; i++) {
    if (md_scope_acquire(w->s) != MD_NONE) {
      atomic_fetch_add(&w->refused, 1);
      continue;
    }
    atomic_fetch_add(&w->held, 1);
    if (w->bytes[BYTES - 1] != 0x42) return (void *)2;   /* still mapped */
    atomic_fetch_sub(&w->held, 1);
    md_scope_release(w->s);
  }
  if (w->bytes[BYTES - 1] != 0x42) return (void *)3;
  atomic_fetch_sub(&w->held, 1);
  md_scope_release(w->s);
  return NULL;
}

static void join_all(pthread_t *t, int n) {
  for (int i = 0; i < n; i++) {
    void *ret;
    cr_assert_eq(pthread_join(t[i], &ret), 0);
    cr_expect_null(ret, "worker %d failed at step %ld", i, (long)(intptr_t)ret);
  }
}

Test(scope_concurrency, close_deferred_during_use_frees_once_after_the_last_worker_release) {
  static world w;
  world_init(&w, THREADS + 1);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, worker, &w), 0);
  pthread_barrier_wait(&w.start);   /* every worker holds its acquire */
  cr_assert_eq(md_scope_close_deferred(w.s), MD_NONE);
  join_all(t, THREADS);
  cr_expect_eq(atomic_load(&w.runs), 1, "freed exactly once");
  cr_expect_eq(atomic_load(&w.held_at_free), 0, "freed only after the last release");
  pthread_barrier_destroy(&w.start);
}

Test(scope_concurrency, close_deferred_during_use_frees_at_the_closer_hold_release) {
  static world w;
  world_init(&w, THREADS + 1);
  cr_assert_eq(md_scope_acquire(w.s), MD_NONE);   /* the main thread's own hold */
  atomic_fetch_add(&w.held, 1);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, worker, &w), 0);
  pthread_barrier_wait(&w.start);
  cr_assert_eq(md_scope_close_deferred(w.s), MD_NONE);
  cr_expect_eq(md_scope_acquire(w.s), MD_INVALID_ARGUMENT, "closing: new acquires fail");
  join_all(t, THREADS);
  cr_expect_eq(atomic_load(&w.runs), 0, "the main thread still holds it");
  cr_expect_eq(md_scope_users(w.s), 1);
  cr_expect_eq(w.bytes[BYTES - 1], 0x42);
  atomic_fetch_sub(&w.held, 1);
  md_scope_release(w.s);
  cr_expect_eq(atomic_load(&w.runs), 1);
  cr_expect_eq(atomic_load(&w.held_at_free), 0);
  pthread_barrier_destroy(&w.start);
}

static void *closer(void *p) {
  world *w = p;
  pthread_barrier_wait(&w->start);
  if (md_scope_close_deferred(w->s) == MD_NONE) atomic_fetch_add(&w->closers_ok, 1);
  return NULL;
}

Test(scope_concurrency, racing_deferred_closes_succeed_exactly_once) {
  static world w;
  world_init(&w, THREADS);
  cr_assert_eq(md_scope_acquire(w.s), MD_NONE);   /* keeps it alive while they race */
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, closer, &w), 0);
  join_all(t, THREADS);
  cr_expect_eq(atomic_load(&w.closers_ok), 1);
  cr_expect_eq(atomic_load(&w.runs), 0);
  md_scope_release(w.s);
  cr_expect_eq(atomic_load(&w.runs), 1);
  pthread_barrier_destroy(&w.start);
}

/* Close (not deferred) racing users: either it fails "acquired by N users" and frees nothing,
 * or it wins when nobody holds it; in both cases nothing is freed twice or under a user. */
static void count_cb(void *ctx) { (*(int *)ctx)++; }

typedef struct race { md_scope *s; pthread_barrier_t start; _Atomic int stop; _Atomic long ok; } race;

static void *user(void *p) {
  race *r = p;
  pthread_barrier_wait(&r->start);
  while (!atomic_load(&r->stop)) {
    if (md_scope_acquire(r->s) == MD_NONE) {
      atomic_fetch_add(&r->ok, 1);
      md_scope_release(r->s);
    }
  }
  return NULL;
}

Test(scope_concurrency, close_while_users_race_fails_without_freeing) {
  static race r;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &r.s), MD_NONE);
  cr_assert_eq(md_scope_attach(r.s, count_cb, &runs), MD_NONE);
  cr_assert_eq(pthread_barrier_init(&r.start, NULL, THREADS + 1), 0);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, user, &r), 0);
  pthread_barrier_wait(&r.start);
  /* The users may or may not hold it at any instant; hold it ourselves so close must fail. */
  cr_assert_eq(md_scope_acquire(r.s), MD_NONE);
  for (int i = 0; i < 1000; i++) {
    cr_assert_eq(md_scope_close(r.s), MD_INVALID_ARGUMENT);
    cr_assert(strstr(md_scope_error(), "acquired by"), "%s", md_scope_error());
  }
  md_scope_release(r.s);
  atomic_store(&r.stop, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  cr_expect_eq(runs, 0, "no failed close freed anything");
  cr_expect_eq(md_scope_users(r.s), 0);
  cr_assert_eq(md_scope_close(r.s), MD_NONE);
  cr_expect_eq(runs, 1);
  pthread_barrier_destroy(&r.start);
}
