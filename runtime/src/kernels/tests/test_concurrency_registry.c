/* test_concurrency_registry.c - the kernel registry under concurrent register, unregister and
 * find (also run under ThreadSanitizer: the "concurrency" label). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ktest.h"

#define THREADS 8

static void noop_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)c;
  (void)st;
}

static md_kernel_def user_def(const char *name, const char *platform) {
  md_kernel_def d = {.struct_size = sizeof d, .name = name, .platform = platform,
                     .min_inputs = 1, .max_inputs = 1, .n_outputs = 1, .run = noop_run};
  return d;
}

static pthread_barrier_t start;

/* ---- first use from many threads ------------------------------------------------------ */

static const md_kernel_def *first_seen[THREADS];

static void *first_use(void *arg) {
  long i = (long)arg;
  pthread_barrier_wait(&start);
  first_seen[i] = md_kernel_find("CONCATENATION", "sim");
  return NULL;
}

Test(registry_concurrency, first_use_from_many_threads_registers_builtins_once) {
  pthread_t t[THREADS];
  pthread_barrier_init(&start, NULL, THREADS);
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, first_use, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < THREADS; i++) {
    cr_assert_not_null(first_seen[i]);
    cr_assert_eq(first_seen[i], first_seen[0]);
  }
  /* Registered once: a duplicate is still refused. */
  md_kernel_def d = user_def("CONCATENATION", "sim");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
}

/* ---- distinct registrations while others look up ------------------------------------- */

#define PER_WRITER 300
static atomic_int writers_done;

static void *writer(void *arg) {
  long w = (long)arg;
  char name[32];
  pthread_barrier_wait(&start);
  void *ret = NULL;
  for (int k = 0; k < PER_WRITER && !ret; k++) {
    snprintf(name, sizeof name, "w%ld.k%d", w, k);
    md_kernel_def d = user_def(name, (k & 1) ? "sim" : "host");
    if (md_kernel_register(&d) != MD_NONE) ret = (void *)1;
  }
  atomic_fetch_add(&writers_done, 1); /* also on failure, so the readers stop */
  return ret;
}

static void *reader(void *arg) {
  (void)arg;
  char name[32];
  unsigned seed = 12345;
  pthread_barrier_wait(&start);
  while (atomic_load(&writers_done) < THREADS / 2) {
    if (!md_kernel_find("ADD", "host") || !md_kernel_find("SOFTMAX", "sim")) return (void *)1;
    seed = seed * 1103515245u + 12345u;
    int w = (int)(seed >> 16) % (THREADS / 2), k = (int)(seed >> 8) % PER_WRITER;
    snprintf(name, sizeof name, "w%d.k%d", w, k);
    const md_kernel_def *d = md_kernel_find(name, (k & 1) ? "sim" : "host");
    /* Absent or complete, never half-built. */
    if (d && (strcmp(d->name, name) != 0 || d->run != noop_run || d->n_outputs != 1))
      return (void *)1;
  }
  return NULL;
}

Test(registry_concurrency, register_distinct_while_finding) {
  pthread_t t[THREADS];
  atomic_store(&writers_done, 0);
  pthread_barrier_init(&start, NULL, THREADS);
  for (long i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, i < THREADS / 2 ? writer : reader, (void *)i);
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d failed", i);
  }
  pthread_barrier_destroy(&start);
  char name[32];
  for (int w = 0; w < THREADS / 2; w++)
    for (int k = 0; k < PER_WRITER; k++) {
      snprintf(name, sizeof name, "w%d.k%d", w, k);
      cr_assert_not_null(md_kernel_find(name, (k & 1) ? "sim" : "host"), "%s", name);
    }
}

/* ---- one name, many registrants ------------------------------------------------------- */

static atomic_int winners;

static void *race_same_name(void *arg) {
  (void)arg;
  md_kernel_def d = user_def("t.race", "host");
  pthread_barrier_wait(&start);
  if (md_kernel_register(&d) == MD_NONE) atomic_fetch_add(&winners, 1);
  else if (!strstr(md_kernel_registry_error(), "already registered")) return (void *)1;
  return NULL;
}

Test(registry_concurrency, duplicate_register_race_has_exactly_one_winner) {
  for (int round = 0; round < 20; round++) {
    pthread_t t[THREADS];
    atomic_store(&winners, 0);
    pthread_barrier_init(&start, NULL, THREADS);
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, race_same_name, NULL);
    for (int i = 0; i < THREADS; i++) {
      void *r;
      pthread_join(t[i], &r);
      cr_assert_null(r);
    }
    pthread_barrier_destroy(&start);
    cr_assert_eq(atomic_load(&winners), 1, "round %d", round);
    cr_assert_eq(md_kernel_unregister("t.race", "host"), MD_NONE);
  }
}

/* ---- register/unregister churn while readers use what they found ---------------------- */

static atomic_int churn_stop;

static void *churner(void *arg) {
  (void)arg;
  md_kernel_def d = user_def("t.churn", "sim");
  pthread_barrier_wait(&start);
  void *ret = NULL;
  for (int k = 0; k < 2000 && !ret; k++) {
    if (md_kernel_register(&d) != MD_NONE || md_kernel_unregister("t.churn", "sim") != MD_NONE)
      ret = (void *)1;
  }
  atomic_store(&churn_stop, 1); /* also on failure, so the readers stop */
  return ret;
}

static void *churn_reader(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  while (!atomic_load(&churn_stop)) {
    const md_kernel_def *d = md_kernel_find("t.churn", "sim");
    /* A definition found once stays readable even after it is unregistered. */
    if (d && (strcmp(d->name, "t.churn") != 0 || strcmp(d->platform, "sim") != 0 ||
              d->run != noop_run))
      return (void *)1;
    if (!md_kernel_find("RELU", "host")) return (void *)1;
  }
  return NULL;
}

Test(registry_concurrency, unregister_churn_never_breaks_readers) {
  pthread_t t[4];
  atomic_store(&churn_stop, 0);
  pthread_barrier_init(&start, NULL, 4);
  pthread_create(&t[0], NULL, churner, NULL);
  for (int i = 1; i < 4; i++) pthread_create(&t[i], NULL, churn_reader, NULL);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d failed", i);
  }
  pthread_barrier_destroy(&start);
  cr_assert_null(md_kernel_find("t.churn", "sim"));
}
