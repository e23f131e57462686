/* test_concurrency_spec.c - black-box rules of SPEC section 6 with real threads: concurrent
 * readers all succeed; racing writers never crash, hang or touch another buffer; handles die
 * at once for new calls while in-flight uses finish; last_error is per thread.
 *
 * Threads start together on a pthread barrier; nothing sleeps and nothing is timed. Worker
 * threads never call Criterion asserts (they are not thread-safe): they count what they saw
 * and the main thread asserts. Also built under ThreadSanitizer (the file name says
 * "concurrency"). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support.h"

static mdt_env e;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3};
#define B23 24u
#define NT 4

static void setup(void) {
  mdt_env_open(&e, NULL);
  mdt_model b;
  P = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}
static void teardown(void) {
  if (P) e.drv->release_prepared_model(e.dev, e.client, P);
  mdt_env_close(&e, 0);
}
TestSuite(concurrency, .init = setup, .fini = teardown);

static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

/* ---- thread-safe, assert-free helpers ---- */

static int raw_memfd(const void *data, size_t n) {
  int fd = memfd_create("mdt-thread", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)n) != 0 || (data && pwrite(fd, data, n, 0) != (ssize_t)n)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Per-thread pools: in1 holds B, out receives the result. */
typedef struct tpools {
  int in1, out;
} tpools;
static int tpools_open(tpools *p) {
  p->in1 = raw_memfd(B, B23);
  p->out = raw_memfd(NULL, B23);
  return p->in1 >= 0 && p->out >= 0;
}
static void tpools_close(tpools *p) {
  if (p->in1 >= 0) close(p->in1);
  if (p->out >= 0) close(p->out);
}

/* client executes prep with input 0 = token t, input 1 = B, output on pool out. On MD_NONE,
 * *ok tells whether the output is A + B. */
static md_status exec_token_in(md_handle client, md_handle prep, md_token t, const tpools *tp, int *ok) {
  md_request_arg in[2], out[1];
  md_request_pool pools[3];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  memset(pools, 0, sizeof pools);
  pools[0].is_token = 1;
  pools[0].token = t;
  pools[1].memory = mdt_ashmem(tp->in1, B23);
  pools[2].memory = mdt_ashmem(tp->out, B23);
  in[0].pool = 0;
  in[1].pool = 1;
  in[1].length = B23;
  out[0].pool = 2;
  out[0].length = B23;
  md_request req = {2, in, 1, out, 3, pools};
  md_output_shape sh[1];
  md_timing tm;
  md_status st = e.drv->execute(e.dev, client, prep, &req, sh, 1, &tm);
  if (st == MD_NONE && ok) {
    float o[6];
    *ok = pread(tp->out, o, B23, 0) == (ssize_t)B23;
    for (int i = 0; i < 6 && *ok; i++) *ok = o[i] == A[i] + B[i];
  }
  return st;
}

static md_status copy_to_raw(md_handle client, md_token t, float *out) {
  int fd = raw_memfd(NULL, B23);
  if (fd < 0) return MD_GENERAL_FAILURE;
  md_memory m = mdt_ashmem(fd, B23);
  md_status st = e.drv->copy_to(e.dev, client, t, &m);
  if (st == MD_NONE && pread(fd, out, B23, 0) != (ssize_t)B23) st = MD_GENERAL_FAILURE;
  close(fd);
  return st;
}

static md_status copy_from_raw(md_handle client, md_token t, const float *v) {
  int fd = raw_memfd(v, B23);
  if (fd < 0) return MD_GENERAL_FAILURE;
  md_memory m = mdt_ashmem(fd, B23);
  md_status st = e.drv->copy_from(e.dev, client, t, &m, 0, NULL);
  close(fd);
  return st;
}

static int known_status(md_status st) {
  switch (st) {
    case MD_NONE: case MD_DEVICE_UNAVAILABLE: case MD_GENERAL_FAILURE: case MD_OUTPUT_INSUFFICIENT_SIZE:
    case MD_INVALID_ARGUMENT: case MD_MISSED_DEADLINE_TRANSIENT: case MD_MISSED_DEADLINE_PERSISTENT:
    case MD_RESOURCE_EXHAUSTED_TRANSIENT: case MD_RESOURCE_EXHAUSTED_PERSISTENT: case MD_DEAD_OBJECT:
      return 1;
  }
  return 0;
}

static pthread_barrier_t bar;

static void run_threads(int n, void *(*fn)(void *), void *args, size_t arg_size) {
  pthread_t th[16];
  cr_assert_leq(n, 16);
  for (int i = 0; i < n; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * arg_size), 0);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

/* ---- concurrent readers ---- */

typedef struct reader_arg {
  md_token t;
  int iters;
  int bad_status, bad_value, setup_failed;
} reader_arg;

static void *reader(void *p) {
  reader_arg *a = p;
  tpools tp;
  a->setup_failed = !tpools_open(&tp);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < a->iters && !a->setup_failed; i++) {
    int ok = 0;
    if (i & 1) {
      float o[6];
      md_status st = copy_to_raw(e.client, a->t, o);
      if (st != MD_NONE) a->bad_status++;
      else if (memcmp(o, A, B23) != 0) a->bad_value++;
    } else {
      md_status st = exec_token_in(e.client, P, a->t, &tp, &ok);
      if (st != MD_NONE) a->bad_status++;
      else if (!ok) a->bad_value++;
    }
  }
  tpools_close(&tp);
  return NULL;
}

Test(concurrency, concurrent_readers_all_succeed) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  reader_arg args[NT];
  memset(args, 0, sizeof args);
  for (int i = 0; i < NT; i++) {
    args[i].t = t;
    args[i].iters = 200;
  }
  pthread_barrier_init(&bar, NULL, NT);
  run_threads(NT, reader, args, sizeof args[0]);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NT; i++) {
    cr_expect_eq(args[i].setup_failed, 0);
    cr_expect_eq(args[i].bad_status, 0, "reader %d: %d calls failed", i, args[i].bad_status);
    cr_expect_eq(args[i].bad_value, 0, "reader %d: %d wrong results", i, args[i].bad_value);
  }
  mdt_free(&e, t);
}

/* ---- racing writers ---- */

typedef struct writer_arg {
  int role; /* 0,1: writers (copy_from / execute), 2: reader of the raced buffer, 3: sentinel checker */
  md_token w, s;
  int iters;
  int unknown_status, sentinel_broken, setup_failed;
} writer_arg;

static void *writer(void *p) {
  writer_arg *a = p;
  tpools tp;
  a->setup_failed = !tpools_open(&tp);
  float mine[6];
  for (int i = 0; i < 6; i++) mine[i] = (float)(a->role * 1000 + i);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < a->iters && !a->setup_failed; i++) {
    md_status st = MD_NONE;
    float o[6];
    switch (a->role) {
      case 0: st = copy_from_raw(e.client, a->w, mine); break;
      case 1: {
        /* W as the output of A + B (its input 0 is the sentinel S, read concurrently). */
        md_request_arg in[2], out[1];
        md_request_pool pools[3];
        memset(in, 0, sizeof in);
        memset(out, 0, sizeof out);
        memset(pools, 0, sizeof pools);
        pools[0].is_token = 1;
        pools[0].token = a->s;
        pools[1].memory = mdt_ashmem(tp.in1, B23);
        pools[2].is_token = 1;
        pools[2].token = a->w;
        in[1].pool = 1;
        in[1].length = B23;
        out[0].pool = 2;
        md_request req = {2, in, 1, out, 3, pools};
        md_output_shape sh[1];
        md_timing tm;
        st = e.drv->execute(e.dev, e.client, P, &req, sh, 1, &tm);
        break;
      }
      case 2: st = copy_to_raw(e.client, a->w, o); break;
      default:
        st = copy_to_raw(e.client, a->s, o);
        if (st != MD_NONE || memcmp(o, A, B23) != 0) a->sentinel_broken++;
        break;
    }
    if (!known_status(st)) a->unknown_status++;
  }
  tpools_close(&tp);
  return NULL;
}

Test(concurrency, racing_writers_never_crash_or_corrupt_another_buffer) {
  md_token w = mdt_alloc_inout(&e, P, 0, 0, 0, NULL);
  md_token s = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, s, A, B23, 0, NULL), MD_NONE);
  writer_arg args[NT];
  memset(args, 0, sizeof args);
  for (int i = 0; i < NT; i++) {
    args[i].role = i;
    args[i].w = w;
    args[i].s = s;
    args[i].iters = 300;
  }
  pthread_barrier_init(&bar, NULL, NT);
  run_threads(NT, writer, args, sizeof args[0]);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NT; i++) {
    cr_expect_eq(args[i].setup_failed, 0);
    cr_expect_eq(args[i].unknown_status, 0, "thread %d got statuses outside md_status", i);
  }
  cr_expect_eq(args[3].sentinel_broken, 0, "the sentinel buffer changed %d times", args[3].sentinel_broken);
  /* The raced buffer is still a working buffer. */
  cr_expect_eq(mdt_copy_from(&e, e.client, w, B, B23, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  float o[6];
  cr_expect_eq(mdt_copy_to(&e, e.client, w, o, B23), MD_NONE);
  cr_expect(memcmp(o, B, B23) == 0);
  mdt_free(&e, w);
  mdt_free(&e, s);
}

/* ---- a handle dies at once for new calls; in-flight calls finish ---- */

typedef struct user_arg {
  md_handle client, prep;
  md_token t;
  atomic_int *dead; /* set by the main thread once the release call has returned */
  int iters;
  int ok_before, bad_before, accepted_after, wrong_status, wrong_value, setup_failed;
} user_arg;

static void *token_user(void *p) {
  user_arg *a = p;
  tpools tp;
  a->setup_failed = !tpools_open(&tp);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < a->iters && !a->setup_failed; i++) {
    int dead_before = atomic_load(a->dead);
    int ok = 0;
    md_status st = exec_token_in(a->client, a->prep, a->t, &tp, &ok);
    if (dead_before && st != MD_INVALID_ARGUMENT) a->accepted_after++;
    if (st == MD_NONE) {
      a->ok_before++;
      if (!ok) a->wrong_value++;
    } else if (st != MD_INVALID_ARGUMENT) {
      a->wrong_status++;
    }
    if (dead_before && i > 8) break; /* seen it dead a few times */
  }
  tpools_close(&tp);
  return NULL;
}

static void check_users(const user_arg *args, int n) {
  for (int i = 0; i < n; i++) {
    cr_expect_eq(args[i].setup_failed, 0);
    cr_expect_eq(args[i].accepted_after, 0, "thread %d: %d calls accepted a dead handle", i, args[i].accepted_after);
    cr_expect_eq(args[i].wrong_status, 0, "thread %d: %d calls neither NONE nor INVALID_ARGUMENT", i,
                 args[i].wrong_status);
    cr_expect_eq(args[i].wrong_value, 0, "thread %d: %d wrong results", i, args[i].wrong_value);
  }
}

/* Starts n-1 user threads and plays the killer on the calling thread after the barrier. */
static void race_release(user_arg *args, int n_users, void (*kill)(void *), void *ctx, atomic_int *dead) {
  pthread_t th[8];
  pthread_barrier_init(&bar, NULL, (unsigned)n_users + 1u);
  for (int i = 0; i < n_users; i++) cr_assert_eq(pthread_create(&th[i], NULL, token_user, &args[i]), 0);
  pthread_barrier_wait(&bar);
  kill(ctx);
  atomic_store(dead, 1);
  for (int i = 0; i < n_users; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
}

static md_status kill_status;
static void kill_token(void *ctx) { kill_status = e.drv->free_buffer(e.dev, e.client, *(md_token *)ctx); }
static void kill_prepared(void *ctx) {
  kill_status = e.drv->release_prepared_model(e.dev, e.client, *(md_handle *)ctx);
}
static md_leak_report kill_leaks;
static void kill_client(void *ctx) { kill_status = e.drv->close_client(e.dev, *(md_handle *)ctx, &kill_leaks); }

Test(concurrency, free_buffer_while_other_threads_execute_with_it) {
  md_token t = mdt_alloc(&e, P, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  atomic_int dead = 0;
  user_arg args[NT - 1];
  memset(args, 0, sizeof args);
  for (int i = 0; i < NT - 1; i++) {
    args[i] = (user_arg){.client = e.client, .prep = P, .t = t, .dead = &dead, .iters = 100000};
  }
  race_release(args, NT - 1, kill_token, &t, &dead);
  cr_expect_eq(kill_status, MD_NONE);
  check_users(args, NT - 1);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, t), MD_INVALID_ARGUMENT);
}

Test(concurrency, release_prepared_while_other_threads_execute_with_it) {
  mdt_model b;
  md_handle q = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&e, q, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, B23, 0, NULL), MD_NONE);
  atomic_int dead = 0;
  user_arg args[NT - 1];
  memset(args, 0, sizeof args);
  for (int i = 0; i < NT - 1; i++) {
    args[i] = (user_arg){.client = e.client, .prep = q, .t = t, .dead = &dead, .iters = 100000};
  }
  race_release(args, NT - 1, kill_prepared, &q, &dead);
  cr_expect_eq(kill_status, MD_NONE);
  check_users(args, NT - 1);
  mdt_free(&e, t);
}

Test(concurrency, close_client_while_its_calls_are_in_flight) {
  md_handle c2 = mdt_open_client(&e);
  mdt_model b;
  md_handle q = mdt_prepare_for(&e, c2, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, q, false, 0, 0, NULL, &t), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, c2, t, A, B23, 0, NULL), MD_NONE);
  atomic_int dead = 0;
  user_arg args[NT - 1];
  memset(args, 0, sizeof args);
  for (int i = 0; i < NT - 1; i++) {
    args[i] = (user_arg){.client = c2, .prep = q, .t = t, .dead = &dead, .iters = 100000};
  }
  race_release(args, NT - 1, kill_client, &c2, &dead);
  cr_expect_eq(kill_status, MD_NONE);
  cr_expect_eq(kill_leaks.buffers, 1u);
  cr_expect_eq(kill_leaks.prepared_models, 1u);
  check_users(args, NT - 1);
}

Test(concurrency, free_buffer_while_async_executions_use_it) {
  for (int round = 0; round < 50; round++) {
    md_token in = mdt_alloc(&e, P, false, 0, 0, NULL), out = mdt_alloc(&e, P, true, 0, 0, NULL);
    cr_assert_eq(mdt_copy_from(&e, e.client, in, A, B23, 0, NULL), MD_NONE);
    mdt_request r1, r2;
    mdt_req_init(&r1);
    mdt_req_in_token(&r1, in, 0, NULL);
    mdt_req_in_data(&r1, B, B23, 0, NULL);
    mdt_req_out_pool(&r1, B23, 0, NULL);
    mdt_req_init(&r2);
    mdt_req_in_token(&r2, in, 0, NULL);
    mdt_req_in_data(&r2, B, B23, 0, NULL);
    mdt_req_out_token(&r2, out, 0, NULL);
    md_handle ev1 = 0, ev2 = 0;
    cr_assert_eq(e.drv->execute_async(e.dev, e.client, P, mdt_req(&r1), &ev1), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_assert_eq(e.drv->execute_async(e.dev, e.client, P, mdt_req(&r2), &ev2), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_expect_eq(e.drv->free_buffer(e.dev, e.client, in), MD_NONE);
    cr_expect_eq(e.drv->free_buffer(e.dev, e.client, out), MD_NONE);
    md_output_shape sh[1];
    md_timing tm;
    cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev1, UINT64_MAX, sh, 1, &tm), MD_NONE, "round %d", round);
    cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev2, UINT64_MAX, sh, 1, &tm), MD_NONE, "round %d", round);
    float o[6];
    mdt_req_read_out(&r1, 0, o, B23);
    for (int i = 0; i < 6; i++) cr_expect_eq(o[i], A[i] + B[i], "round %d", round);
    mdt_req_fini(&r1);
    mdt_req_fini(&r2);
  }
}

/* ---- other shared state ---- */

typedef struct waiter_arg {
  md_handle ev;
  md_status st;
} waiter_arg;

static void *waiter(void *p) {
  waiter_arg *a = p;
  md_output_shape sh[1];
  md_timing tm;
  pthread_barrier_wait(&bar);
  a->st = e.drv->wait_event(e.dev, e.client, a->ev, UINT64_MAX, sh, 1, &tm);
  return NULL;
}

Test(concurrency, concurrent_waits_on_one_event_consume_it_once) {
  for (int round = 0; round < 20; round++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, A, B23, 0, NULL);
    mdt_req_in_data(&r, B, B23, 0, NULL);
    mdt_req_out_pool(&r, B23, 0, NULL);
    md_handle ev = 0;
    cr_assert_eq(e.drv->execute_async(e.dev, e.client, P, mdt_req(&r), &ev), MD_NONE);
    waiter_arg args[2] = {{ev, MD_DEAD_OBJECT}, {ev, MD_DEAD_OBJECT}};
    pthread_barrier_init(&bar, NULL, 2);
    run_threads(2, waiter, args, sizeof args[0]);
    pthread_barrier_destroy(&bar);
    int none = (args[0].st == MD_NONE) + (args[1].st == MD_NONE);
    int inval = (args[0].st == MD_INVALID_ARGUMENT) + (args[1].st == MD_INVALID_ARGUMENT);
    cr_expect(none == 1 && inval == 1, "round %d: statuses %d and %d", round, (int)args[0].st, (int)args[1].st);
    mdt_req_fini(&r);
  }
}

typedef struct alloc_arg {
  md_handle client, prep;
  md_token tokens[100];
  int failures, setup_failed;
} alloc_arg;

static void *allocator(void *p) {
  alloc_arg *a = p;
  pthread_barrier_wait(&bar);
  for (int i = 0; i < 100; i++) {
    md_buffer_desc desc = {0, NULL};
    md_buffer_role role = {0, 0, 1.0f};
    md_handle prep = a->prep;
    if (e.drv->allocate(e.dev, a->client, &desc, &prep, 1, &role, 1, NULL, 0, &a->tokens[i]) != MD_NONE)
      a->failures++;
    if (i % 3 == 2) { /* free some as we go: slots get reused under contention */
      if (e.drv->free_buffer(e.dev, a->client, a->tokens[i - 1]) != MD_NONE) a->failures++;
      a->tokens[i - 1] = 0;
    }
  }
  return NULL;
}

Test(concurrency, concurrent_allocations_in_many_clients_get_distinct_tokens) {
  alloc_arg args[NT];
  memset(args, 0, sizeof args);
  mdt_model b;
  for (int i = 0; i < NT; i++) {
    args[i].client = mdt_open_client(&e);
    args[i].prep = mdt_prepare_for(&e, args[i].client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  }
  pthread_barrier_init(&bar, NULL, NT);
  run_threads(NT, allocator, args, sizeof args[0]);
  pthread_barrier_destroy(&bar);
  int repeats = 0, foreign_ok = 0;
  for (int i = 0; i < NT; i++) {
    cr_expect_eq(args[i].failures, 0, "client %d: %d failures", i, args[i].failures);
    for (int k = 0; k < 100; k++) {
      md_token t = args[i].tokens[k];
      if (!t) continue;
      for (int j = 0; j <= i; j++)
        for (int l = 0; l < (j == i ? k : 100); l++) repeats += t == args[j].tokens[l];
      /* and nobody else can use it */
      float o[6];
      foreign_ok += copy_to_raw(args[(i + 1) % NT].client, t, o) != MD_INVALID_ARGUMENT;
    }
  }
  cr_expect_eq(repeats, 0, "%d tokens issued twice", repeats);
  cr_expect_eq(foreign_ok, 0, "%d tokens usable by another client", foreign_ok);
  for (int i = 0; i < NT; i++) {
    md_leak_report lr;
    mdt_close_client(&e, args[i].client, &lr);
    cr_expect_eq(lr.buffers, 67u, "client %d", i); /* 100 allocated, 33 freed */
    cr_expect_eq(lr.prepared_models, 1u);
  }
}

typedef struct err_arg {
  int which;
  int own_message;
} err_arg;

static void *err_thread(void *p) {
  err_arg *a = p;
  if (a->which == 0) {
    (void)e.drv->free_buffer(e.dev, e.client, 0x00c0ffee00c0ffeeull);
  } else {
    md_buffer_desc desc = {0, NULL};
    md_buffer_role role = {0, 0, 0.0f};
    md_token t = 0;
    md_handle prep = P;
    (void)e.drv->allocate(e.dev, e.client, &desc, &prep, 1, &role, 1, NULL, 0, &t);
  }
  pthread_barrier_wait(&bar); /* both have failed before either reads */
  const char *msg = e.drv->last_error(e.dev);
  a->own_message = msg && strstr(msg, a->which == 0 ? "token" : "probability") != NULL &&
                   strstr(msg, a->which == 0 ? "probability" : "c0ffee") == NULL;
  return NULL;
}

Test(concurrency, last_error_is_per_thread) {
  err_arg args[2] = {{0, 0}, {1, 0}};
  pthread_barrier_init(&bar, NULL, 2);
  run_threads(2, err_thread, args, sizeof args[0]);
  pthread_barrier_destroy(&bar);
  cr_expect(args[0].own_message, "the free_buffer thread did not read its own message");
  cr_expect(args[1].own_message, "the allocate thread did not read its own message");
}

/* ---- what an idle thread's reference cache holds goes with a kill ----
 * Synchronous executions look their handles up through a per-thread cache of references, so a
 * thread that executed once and then waits still holds references: free_buffer and close_client
 * must take them back at once (SPEC 6: the memory goes when the last use in flight ends, and
 * an idle thread has none in flight). Measured with a memory limit: freed memory must be
 * allocatable again while that thread still waits. */

typedef struct idle_arg {
  mdt_env *x;
  md_handle client, prep;
  md_token in;
  int fd_b, fd_o;
  md_status st;
  sem_t ran, go;
} idle_arg;

#define IDLE_ROWS 32u
#define IDLE_BYTES (IDLE_ROWS * 64u * 4u)   /* a float32 [32,64]: 8 KiB */

/* One execution of the ADD model: the token a->in plus the pool of fd_b, into the pool of fd_o
 * (read into out when out is not NULL and it succeeded); a->st is its status. */
static void idle_exec(idle_arg *a, float *out) {
  md_request_arg in[2], o[1];
  md_request_pool pools[3];
  memset(in, 0, sizeof in);
  memset(o, 0, sizeof o);
  memset(pools, 0, sizeof pools);
  pools[0] = (md_request_pool){.is_token = 1, .token = a->in};
  pools[1].memory = mdt_ashmem(a->fd_b, IDLE_BYTES);
  pools[2].memory = mdt_ashmem(a->fd_o, IDLE_BYTES);
  in[1] = (md_request_arg){.pool = 1, .length = IDLE_BYTES};
  o[0] = (md_request_arg){.pool = 2, .length = IDLE_BYTES};
  md_request req = {.n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = o, .n_pools = 3, .pools = pools};
  md_output_shape sh[1];
  a->st = a->x->drv->execute(a->x->dev, a->client, a->prep, &req, sh, 1, NULL);
  if (out && a->st == MD_NONE) mdt_read_fd(a->fd_o, out, IDLE_BYTES);
}

static void *idle_executor(void *p) {
  idle_arg *a = p;
  idle_exec(a, NULL);
  sem_post(&a->ran);
  while (sem_wait(&a->go) != 0) {
  }
  return NULL;
}

static void idle_thread_case(int close_instead) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=131072");
  static const uint32_t d[2] = {IDLE_ROWS, 64};
  md_handle c = close_instead ? mdt_open_client(&x) : x.client;
  mdt_model b;
  md_handle prep = mdt_prepare_for(&x, c, mdt_add_model(&b, 2, d, 2, d, 2, d, 0));
  idle_arg a;
  memset(&a, 0, sizeof a);
  a.x = &x;
  a.client = c;
  a.prep = prep;
  cr_assert_eq(mdt_try_alloc(&x, c, prep, false, 0, 0, NULL, &a.in), MD_NONE, "%s", x.drv->last_error(x.dev));
  static float v[IDLE_ROWS * 64];
  mdt_iota(v, IDLE_ROWS * 64, 1);
  cr_assert_eq(mdt_copy_from(&x, c, a.in, v, IDLE_BYTES, 0, NULL), MD_NONE);
  a.fd_b = mdt_memfd(v, IDLE_BYTES);
  a.fd_o = mdt_memfd(NULL, IDLE_BYTES);
  sem_init(&a.ran, 0, 0);
  sem_init(&a.go, 0, 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, idle_executor, &a), 0);
  while (sem_wait(&a.ran) != 0) {
  }
  cr_assert_eq(a.st, MD_NONE, "the waiting thread's execution: %s", x.drv->last_error(x.dev));
  /* Fill the device: another client's buffers of the same size until the limit says no. */
  md_handle other = mdt_open_client(&x);
  md_handle oprep = mdt_prepare_for(&x, other, mdt_add_model(&b, 2, d, 2, d, 2, d, 0));
  md_token fill[32];
  int n = 0;
  while (n < 32 && mdt_try_alloc(&x, other, oprep, true, 0, 0, NULL, &fill[n]) == MD_NONE) n++;
  cr_assert_lt(n, 32, "the memory limit never refused");
  /* The waiting thread used the buffer and holds no call in flight: its memory comes back now. */
  if (close_instead) mdt_close_client(&x, c, NULL);
  else cr_assert_eq(x.drv->free_buffer(x.dev, c, a.in), MD_NONE);
  md_token again = 0;
  cr_expect_eq(mdt_try_alloc(&x, other, oprep, true, 0, 0, NULL, &again), MD_NONE,
               "the %s buffer's memory is still held: %s", close_instead ? "closed client's" : "freed",
               x.drv->last_error(x.dev));
  sem_post(&a.go);
  pthread_join(th, NULL);
  if (again) cr_expect_eq(x.drv->free_buffer(x.dev, other, again), MD_NONE);
  for (int i = 0; i < n; i++) cr_expect_eq(x.drv->free_buffer(x.dev, other, fill[i]), MD_NONE);
  mdt_close_client(&x, other, NULL);
  if (!close_instead) mdt_release(&x, prep);
  close(a.fd_b);
  close(a.fd_o);
  sem_destroy(&a.ran);
  sem_destroy(&a.go);
  mdt_env_close(&x, 0);
}

Test(concurrency, free_buffer_takes_back_what_an_idle_threads_executions_cached) { idle_thread_case(0); }
Test(concurrency, close_client_takes_back_what_an_idle_threads_executions_cached) { idle_thread_case(1); }

/* ---- a thread's pin on a buffer's storage never costs a write memory or content ----
 * A synchronous execution reads a token input through its thread's pin on the buffer's storage
 * (no shared count moves). Pinned storage is held, so a write goes to fresh storage while any
 * thread pins it. Neither may show: with the device full, a write into the buffer still
 * succeeds (an idle thread's pin is taken back, the writer's own pin dropped) and every later
 * execution reads what was written last. */

typedef struct pin_arg {
  idle_arg base;
  float out[2][IDLE_ROWS * 64];
} pin_arg;

/* Executes twice, waiting for `go` after each. */
static void *pin_executor(void *p) {
  pin_arg *pa = p;
  for (int round = 0; round < 2; round++) {
    idle_exec(&pa->base, pa->out[round]);
    sem_post(&pa->base.ran);
    while (sem_wait(&pa->base.go) != 0) {
    }
  }
  return NULL;
}

static void pin_case(int own_thread) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=131072");
  static const uint32_t d[2] = {IDLE_ROWS, 64};
  mdt_model b;
  pin_arg pa;
  memset(&pa, 0, sizeof pa);
  idle_arg *a = &pa.base;
  a->x = &x;
  a->client = x.client;
  a->prep = mdt_prepare(&x, mdt_add_model(&b, 2, d, 2, d, 2, d, 0));
  cr_assert_eq(mdt_try_alloc(&x, x.client, a->prep, false, 0, 0, NULL, &a->in), MD_NONE, "%s", x.drv->last_error(x.dev));
  static float v[IDLE_ROWS * 64], w[IDLE_ROWS * 64], got[IDLE_ROWS * 64];
  mdt_iota(v, IDLE_ROWS * 64, 1);
  for (unsigned i = 0; i < IDLE_ROWS * 64; i++) w[i] = 1000.0f;
  cr_assert_eq(mdt_copy_from(&x, x.client, a->in, v, IDLE_BYTES, 0, NULL), MD_NONE);
  a->fd_b = mdt_memfd(v, IDLE_BYTES);
  a->fd_o = mdt_memfd(NULL, IDLE_BYTES);
  sem_init(&a->ran, 0, 0);
  sem_init(&a->go, 0, 0);
  pthread_t th;
  if (own_thread) {
    idle_exec(a, pa.out[0]);
  } else {
    cr_assert_eq(pthread_create(&th, NULL, pin_executor, &pa), 0);
    while (sem_wait(&a->ran) != 0) {
    }
  }
  cr_assert_eq(a->st, MD_NONE, "the first execution: %s", x.drv->last_error(x.dev));
  for (unsigned i = 0; i < IDLE_ROWS * 64; i++) cr_assert_eq(pa.out[0][i], 2.0f * v[i], "first execution, element %u (exact: integer values)", i);
  /* Fill the device, so that a write into the buffer has no room for fresh storage. */
  md_token fill[32];
  int n = 0;
  while (n < 32 && mdt_try_alloc(&x, x.client, a->prep, true, 0, 0, NULL, &fill[n]) == MD_NONE) n++;
  cr_assert_lt(n, 32, "the memory limit never refused");
  cr_expect_eq(mdt_copy_from(&x, x.client, a->in, w, IDLE_BYTES, 0, NULL), MD_NONE,
               "a write into a buffer that %s read: %s", own_thread ? "this thread" : "an idle thread",
               x.drv->last_error(x.dev));
  cr_assert_eq(mdt_copy_to(&x, x.client, a->in, got, IDLE_BYTES), MD_NONE, "%s", x.drv->last_error(x.dev));
  cr_expect_eq(memcmp(got, w, IDLE_BYTES), 0, "copy_to does not give what copy_from wrote");
  if (own_thread) {
    idle_exec(a, pa.out[1]);
  } else {
    sem_post(&a->go);
    while (sem_wait(&a->ran) != 0) {
    }
  }
  cr_assert_eq(a->st, MD_NONE, "the second execution: %s", x.drv->last_error(x.dev));
  for (unsigned i = 0; i < IDLE_ROWS * 64; i++)
    cr_assert_eq(pa.out[1][i], 1000.0f + v[i], "second execution reads the new content: element %u", i);
  if (!own_thread) {
    sem_post(&a->go);
    pthread_join(th, NULL);
  }
  for (int i = 0; i < n; i++) cr_expect_eq(x.drv->free_buffer(x.dev, x.client, fill[i]), MD_NONE);
  cr_expect_eq(x.drv->free_buffer(x.dev, x.client, a->in), MD_NONE);
  mdt_release(&x, a->prep);
  close(a->fd_b);
  close(a->fd_o);
  sem_destroy(&a->ran);
  sem_destroy(&a->go);
  mdt_env_close(&x, 0);
}

Test(concurrency, a_full_device_still_takes_a_write_into_a_buffer_an_idle_thread_read) { pin_case(0); }
Test(concurrency, a_full_device_still_takes_a_write_into_a_buffer_this_thread_read) { pin_case(1); }

/* ---- objects released under a running kernel ----
 * "mdt.gate" is a test kernel that reports it has started, blocks until the test opens the
 * gate, then copies its input to its output and reports it is done. It makes "a kernel is
 * running now" a fact the test controls, without sleeping. */

#include "md/kernel.h"

static sem_t gate_entered, gate_open, gate_done;
#define GATE_ROWS 64u
#define GATE_BYTES (GATE_ROWS * GATE_ROWS * 4u)

static md_status gate_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st, void *user) {
  (void)st;
  (void)user;
  memset(out, 0, sizeof *out);
  out[0].rank = sig->inputs[0].rank;
  memcpy(out[0].dims, sig->inputs[0].dims, out[0].rank * sizeof(uint32_t));
  return MD_NONE;
}

static void gate_run(const md_kernel_call *call, md_kernel_status *st) {
  (void)st;
  sem_post(&gate_entered);
  while (sem_wait(&gate_open) != 0) {
  }
  uint64_t n = call->inputs[0].bytes < call->outputs[0].bytes ? call->inputs[0].bytes : call->outputs[0].bytes;
  memcpy(call->outputs[0].data, call->inputs[0].data, (size_t)n);
  sem_post(&gate_done);
}

static void gate_setup(void) {
  sem_init(&gate_entered, 0, 0);
  sem_init(&gate_open, 0, 0);
  sem_init(&gate_done, 0, 0);
  if (!md_kernel_find("mdt.gate", "host")) {
    md_kernel_def def;
    memset(&def, 0, sizeof def);
    def.struct_size = sizeof def;
    def.name = "mdt.gate";
    def.platform = "host";
    def.min_inputs = def.max_inputs = def.n_outputs = 1;
    def.shape = gate_shape;
    def.run = gate_run;
    cr_assert_eq(md_kernel_register(&def), MD_NONE, "%s", md_kernel_registry_error());
  }
  setup();
}
static void gate_teardown(void) {
  teardown();
  sem_destroy(&gate_entered);
  sem_destroy(&gate_open);
  sem_destroy(&gate_done);
}
TestSuite(in_flight, .init = gate_setup, .fini = gate_teardown);

static void sem_take(sem_t *s) {
  while (sem_wait(s) != 0) {
  }
}

static md_handle gate_model_for(md_handle client) {
  static const uint32_t d[2] = {GATE_ROWS, GATE_ROWS};
  mdt_model b;
  return mdt_prepare_for(&e, client, mdt_custom_model(&b, "mdt.gate", MD_TENSOR_FLOAT32, 0, 0, 2, d));
}

static float gate_in[GATE_ROWS * GATE_ROWS], gate_out[GATE_ROWS * GATE_ROWS];
static void fill(float *v, float base) { mdt_iota(v, GATE_ROWS * GATE_ROWS, base); }

/* Allocates n output buffers of the gate model in client c, fills each with iota(base + k). */
static void allocate_filled(md_handle c, md_handle prep, md_token *t, int n, float base) {
  static float v[GATE_ROWS * GATE_ROWS];
  for (int k = 0; k < n; k++) {
    cr_assert_eq(mdt_try_alloc(&e, c, prep, true, 0, 0, NULL, &t[k]), MD_NONE, "%s", e.drv->last_error(e.dev));
    fill(v, base + (float)k);
    cr_assert_eq(mdt_copy_from(&e, c, t[k], v, GATE_BYTES, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  }
}
static int count_intact(md_handle c, const md_token *t, int n, float base) {
  static float v[GATE_ROWS * GATE_ROWS], back[GATE_ROWS * GATE_ROWS];
  int intact = 0;
  for (int k = 0; k < n; k++) {
    fill(v, base + (float)k);
    intact += mdt_copy_to(&e, c, t[k], back, GATE_BYTES) == MD_NONE && memcmp(v, back, GATE_BYTES) == 0;
  }
  return intact;
}

Test(in_flight, zero_timeout_wait_on_a_running_execution_is_missed_deadline) {
  md_handle g = gate_model_for(e.client);
  fill(gate_in, 1);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, gate_in, GATE_BYTES, 0, NULL);
  mdt_req_out_pool(&r, GATE_BYTES, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, g, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  sem_take(&gate_entered);
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, 0, sh, 1, &tm), MD_MISSED_DEADLINE_TRANSIENT);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, 1000000, sh, 1, &tm), MD_MISSED_DEADLINE_TRANSIENT);
  sem_post(&gate_open);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "the event died: %s",
               e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, gate_out, GATE_BYTES);
  cr_expect(memcmp(gate_in, gate_out, GATE_BYTES) == 0);
  mdt_req_fini(&r);
  mdt_release(&e, g);
}

Test(in_flight, free_input_buffer_under_a_running_kernel) {
  md_handle g = gate_model_for(e.client);
  md_token in = mdt_alloc(&e, g, false, 0, 0, NULL);
  fill(gate_in, 7);
  cr_assert_eq(mdt_copy_from(&e, e.client, in, gate_in, GATE_BYTES, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, in, 0, NULL);
  mdt_req_out_pool(&r, GATE_BYTES, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, g, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  sem_take(&gate_entered);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, in), MD_NONE);
  cr_expect_eq(mdt_copy_to(&e, e.client, in, NULL, GATE_BYTES), MD_INVALID_ARGUMENT, "the handle lived on");
  md_token fresh[8];
  allocate_filled(e.client, g, fresh, 8, 5000); /* would reuse the input's memory if it were freed */
  sem_post(&gate_open);
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, gate_out, GATE_BYTES);
  cr_expect(memcmp(gate_in, gate_out, GATE_BYTES) == 0, "the kernel read memory freed under it");
  cr_expect_eq(count_intact(e.client, fresh, 8, 5000), 8);
  for (int k = 0; k < 8; k++) mdt_free(&e, fresh[k]);
  mdt_req_fini(&r);
  mdt_release(&e, g);
}

Test(in_flight, free_output_buffer_under_a_running_kernel) {
  md_handle g = gate_model_for(e.client);
  md_token out = mdt_alloc(&e, g, true, 0, 0, NULL);
  fill(gate_in, 3);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, gate_in, GATE_BYTES, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, g, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  sem_take(&gate_entered);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, out), MD_NONE);
  md_token fresh[8];
  allocate_filled(e.client, g, fresh, 8, 9000);
  sem_post(&gate_open); /* the kernel now writes its output */
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(count_intact(e.client, fresh, 8, 9000), 8, "a kernel wrote into memory freed under it");
  for (int k = 0; k < 8; k++) mdt_free(&e, fresh[k]);
  mdt_req_fini(&r);
  mdt_release(&e, g);
}

Test(in_flight, release_prepared_model_under_a_running_kernel) {
  md_handle g = gate_model_for(e.client);
  fill(gate_in, 11);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, gate_in, GATE_BYTES, 0, NULL);
  mdt_req_out_pool(&r, GATE_BYTES, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, g, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  sem_take(&gate_entered);
  mdt_release(&e, g);
  mdt_request r2;
  mdt_req_init(&r2);
  mdt_req_in_data(&r2, gate_in, GATE_BYTES, 0, NULL);
  mdt_req_out_pool(&r2, GATE_BYTES, 0, NULL);
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(e.drv->execute(e.dev, e.client, g, mdt_req(&r2), sh, 1, &tm), MD_INVALID_ARGUMENT);
  sem_post(&gate_open);
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
  mdt_req_read_out(&r, 0, gate_out, GATE_BYTES);
  cr_expect(memcmp(gate_in, gate_out, GATE_BYTES) == 0);
  mdt_req_fini(&r);
  mdt_req_fini(&r2);
}

typedef struct closer_arg {
  md_handle client;
  md_leak_report lr;
  md_status st;
  atomic_int done;
} closer_arg;

static void *closer(void *p) {
  closer_arg *a = p;
  a->st = e.drv->close_client(e.dev, a->client, &a->lr);
  atomic_store(&a->done, 1);
  return NULL;
}

Test(in_flight, close_client_under_a_running_kernel) {
  /* close_client may wait for the execution or let it finish alone; either way the memory it
   * writes is not handed to anyone else before it ends. */
  md_handle c2 = mdt_open_client(&e);
  md_handle g2 = gate_model_for(c2);
  md_handle g = gate_model_for(e.client);
  md_token out2 = 0;
  cr_assert_eq(mdt_try_alloc(&e, c2, g2, true, 0, 0, NULL, &out2), MD_NONE);
  fill(gate_in, 21);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, gate_in, GATE_BYTES, 0, NULL);
  mdt_req_out_token(&r, out2, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(e.drv->execute_async(e.dev, c2, g2, mdt_req(&r), &ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  sem_take(&gate_entered);
  closer_arg ca;
  memset(&ca, 0, sizeof ca);
  ca.client = c2;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, closer, &ca), 0);
  /* Give close_client a chance to return if it does not wait (no timing: a bounded number of
   * yields, and the test holds either way). */
  for (int i = 0; i < 100000 && !atomic_load(&ca.done); i++) sched_yield();
  md_token fresh[8];
  allocate_filled(e.client, g, fresh, 8, 30000);
  sem_post(&gate_open);
  pthread_join(th, NULL);
  sem_take(&gate_done);
  cr_expect_eq(ca.st, MD_NONE);
  cr_expect_eq(ca.lr.buffers, 1u);
  cr_expect_eq(ca.lr.prepared_models, 1u);
  cr_expect_eq(ca.lr.events, 1u);
  md_output_shape sh[1];
  md_timing tm;
  cr_expect_eq(e.drv->wait_event(e.dev, c2, ev, UINT64_MAX, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(count_intact(e.client, fresh, 8, 30000), 8, "a kernel wrote into memory freed under it");
  for (int k = 0; k < 8; k++) mdt_free(&e, fresh[k]);
  mdt_req_fini(&r);
  mdt_release(&e, g);
}
