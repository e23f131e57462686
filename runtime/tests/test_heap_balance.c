/* test_heap_balance.c - the driver's own heap, counted and starved.
 *
 * This executable links the driver's static libraries with the linker's --wrap for malloc, calloc,
 * realloc, aligned_alloc, strdup and free (CMakeLists.txt), so every allocation the driver's code
 * makes goes through the wrappers below, from any thread: each live block is kept in a table
 * with the "epoch" it was made in. Nothing else is interposed: Criterion's and libc's own
 * allocations are not seen, and a free of a block the table does not hold is passed through.
 *
 * Two properties, both about client-visible behaviour and the driver's resources:
 *  - balance: a whole session (open_device .. close_device), whatever the client leaves live,
 *    frees every block the driver allocated during it (a driver that loses a free leaks in a
 *    process that opens devices for its whole life);
 *  - starvation: the n-th allocation the test's thread asks for fails, for every n until the
 *    session runs without reaching it. A call that met the failure returns GENERAL_FAILURE or
 *    RESOURCE_EXHAUSTED_* (never a crash, never INVALID_ARGUMENT, never MD_NONE with a dead
 *    out-parameter: the session's later calls must then all succeed and compute the right values),
 *    and the session still frees everything by close_device.
 * Allocations on the simulator's own threads are counted for the balance but never failed, so
 * which call meets the failure does not depend on thread timing. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_int.h" /* md_device's backend, for the simulator's counters */
#include "md/driver.h"
#include "md/sim.h"
#include "support.h"

/* ---- the wrappers ---------------------------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);

#define HB_SLOTS (1u << 18)
typedef struct hb_slot {
  uintptr_t p;
  uint32_t epoch;
} hb_slot;
static hb_slot hb_set[HB_SLOTS];
static size_t hb_live;
static uint32_t hb_epoch = 1;
static pthread_mutex_t hb_mu = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int hb_inject_here; /* the test's thread: its allocations may be failed */
static long hb_fail_at;                  /* 0: none fails; else the n-th counted one on that thread */
static long hb_count;                    /* allocations counted on that thread since arming */
static atomic_long hb_injected;          /* failures handed out */

static size_t hb_hash(uintptr_t p) {
  return (size_t)(((uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - 18));
}

static void hb_track(void *p) {
  if (!p) return;
  pthread_mutex_lock(&hb_mu);
  if (hb_live >= HB_SLOTS / 2) abort(); /* the table is sized far beyond any session here */
  size_t i = hb_hash((uintptr_t)p);
  while (hb_set[i].p) i = (i + 1) & (HB_SLOTS - 1);
  hb_set[i].p = (uintptr_t)p;
  hb_set[i].epoch = hb_epoch;
  hb_live++;
  pthread_mutex_unlock(&hb_mu);
}

/* Removes p (linear probing, deletion by backward shift); a block not in the table is ignored. */
static void hb_untrack(void *p) {
  if (!p) return;
  pthread_mutex_lock(&hb_mu);
  size_t i = hb_hash((uintptr_t)p);
  while (hb_set[i].p && hb_set[i].p != (uintptr_t)p) i = (i + 1) & (HB_SLOTS - 1);
  if (hb_set[i].p) {
    size_t j = i;
    for (;;) {
      j = (j + 1) & (HB_SLOTS - 1);
      if (!hb_set[j].p) break;
      size_t k = hb_hash(hb_set[j].p);
      if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
      hb_set[i] = hb_set[j];
      i = j;
    }
    hb_set[i].p = 0;
    hb_live--;
  }
  pthread_mutex_unlock(&hb_mu);
}

static int hb_fail_now(void) {
  if (!hb_inject_here || !hb_fail_at) return 0;
  if (++hb_count != hb_fail_at) return 0;
  atomic_fetch_add(&hb_injected, 1);
  return 1;
}

void *__wrap_malloc(size_t n) {
  if (hb_fail_now()) return NULL;
  void *p = __real_malloc(n);
  hb_track(p);
  return p;
}
void *__wrap_calloc(size_t n, size_t size) {
  if (hb_fail_now()) return NULL;
  void *p = __real_calloc(n, size);
  hb_track(p);
  return p;
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
  if (hb_fail_now()) return NULL;
  void *p = __real_aligned_alloc(align, n);
  hb_track(p);
  return p;
}
char *__wrap_strdup(const char *s) {
  if (hb_fail_now()) return NULL;
  char *p = __real_strdup(s);
  hb_track(p);
  return p;
}
void *__wrap_realloc(void *p, size_t n) {
  if (hb_fail_now()) return NULL; /* p stays the caller's, as a real failure leaves it */
  void *q = __real_realloc(p, n);
  if (q || n == 0) hb_untrack(p);
  hb_track(q);
  return q;
}
void __wrap_free(void *p) {
  hb_untrack(p);
  __real_free(p);
}

/* Blocks of the current epoch still live. */
static size_t hb_epoch_live(void) {
  size_t n = 0;
  pthread_mutex_lock(&hb_mu);
  for (size_t i = 0; i < HB_SLOTS; i++)
    if (hb_set[i].p && hb_set[i].epoch == hb_epoch) n++;
  pthread_mutex_unlock(&hb_mu);
  return n;
}

static void hb_new_epoch(void) {
  pthread_mutex_lock(&hb_mu);
  hb_epoch++;
  pthread_mutex_unlock(&hb_mu);
}

/* ---- one client session ---------------------------------------------------------------------- */

typedef enum leave {
  LEAVE_NOTHING,   /* every object released, then close_client, close_device */
  LEAVE_OBJECTS,   /* buffers, the prepared model, an unwaited event left to close_client */
  LEAVE_CLIENT,    /* the client itself left open: close_device releases it */
} leave;

typedef struct session {
  leave leave;
  long fail_at;    /* 0: nothing fails */
  uint64_t mem_limit; /* 0: the simulator's default; else device memory this tight */
  int completed;   /* every step ran */
  const char *stopped_at;
} session;

/* What a call may return when host memory ran out: SPEC names no status for it, so the ones a
 * client handles as "could not serve this now" (open_device: also DEVICE_UNAVAILABLE, the device
 * could not be opened). */
static int resource_status(const char *call, md_status st) {
  return st == MD_GENERAL_FAILURE || st == MD_RESOURCE_EXHAUSTED_TRANSIENT ||
         st == MD_RESOURCE_EXHAUSTED_PERSISTENT ||
         (st == MD_DEVICE_UNAVAILABLE && !strcmp(call, "open_device"));
}

/* A call: MD_NONE goes on; any other status must be one a failed allocation during this very
 * call explains, and ends the session's work (its cleanup still runs). */
#define STEP(s, name, call)                                                                          \
  do {                                                                                               \
    long inj0_ = atomic_load(&hb_injected);                                                          \
    md_status st_ = (call);                                                                          \
    if (st_ != MD_NONE && (s)->mem_limit &&                                                          \
        (st_ == MD_RESOURCE_EXHAUSTED_TRANSIENT || st_ == MD_RESOURCE_EXHAUSTED_PERSISTENT)) {       \
      (s)->stopped_at = name;                                                                        \
      goto cleanup;                                                                                  \
    }                                                                                                \
    if (st_ != MD_NONE) {                                                                            \
      cr_assert(atomic_load(&hb_injected) != inj0_,                                                  \
                "%s: status %d though no allocation failed during it (failing the %ld-th; 0: "       \
                "none; an earlier call met it and returned MD_NONE): %s",                            \
                name, (int)st_, (s)->fail_at, drv->last_error(dev));                                 \
      cr_assert(resource_status(name, st_),                                                          \
                "%s: status %d when an allocation failed (the %ld-th); a host allocation failure "   \
                "is GENERAL_FAILURE or RESOURCE_EXHAUSTED_*: %s",                                    \
                name, (int)st_, (s)->fail_at, drv->last_error(dev));                                 \
      (s)->stopped_at = name;                                                                        \
      goto cleanup;                                                                                  \
    }                                                                                                \
  } while (0)

static void check_sum(const float *got, const float *a, const float *b, uint32_t n, const char *what) {
  for (uint32_t i = 0; i < n; i++)
    cr_assert(got[i] == a[i] + b[i] + b[i], "%s[%u] = %g, expected %g + 2 * %g", what, i, (double)got[i],
              (double)a[i], (double)b[i]);
}

/* out = (a + b) + b through a temporary (the execution's own device memory), float32 [2, 3]. */
static const md_model *chain_model(mdt_model *b, const uint32_t *dims) {
  mdt_mb_init(b);
  uint32_t a = mdt_mb_tensor_f32(b, 2, dims, MD_SUBGRAPH_INPUT);
  uint32_t x = mdt_mb_tensor_f32(b, 2, dims, MD_SUBGRAPH_INPUT);
  uint32_t act = mdt_mb_const_i32(b, 0);
  uint32_t t = mdt_mb_tensor_f32(b, 2, dims, MD_TEMPORARY_VARIABLE);
  uint32_t out = mdt_mb_tensor_f32(b, 2, dims, MD_SUBGRAPH_OUTPUT);
  uint32_t in1[3] = {a, x, act}, in2[3] = {t, x, act};
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in1, 1, &t);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in2, 1, &out);
  return mdt_mb_model(b);
}

/* The simulated device holds no allocation: the client's objects gave back all they held. */
static void device_memory_is_back(md_device *dev, const char *when) {
  md_sim_stats st;
  md_sim_stats_get(dev->bk, &st);
  cr_assert(st.live_blocks == 0 && st.span_live == 0,
            "%s, the device still holds %llu allocation(s), %llu bytes", when,
            (unsigned long long)st.live_blocks, (unsigned long long)st.span_live);
}

static void run_session(session *s) {
  const md_driver *drv = mdt_driver();
  md_device *dev = NULL;
  md_handle client = 0, prepared = 0, event = 0, event2 = 0, pool = 0;
  md_token tin = 0, tout = 0;
  mdt_model mb;
  mdt_request req, req2;
  int req_live = 0, req2_live = 0;
  const uint32_t dims[2] = {2, 3};
  float a[6], b[6], got[6];
  mdt_iota(a, 6, 1.0f);
  mdt_iota(b, 6, 10.0f);
  const md_model *model = chain_model(&mb, dims);

  hb_fail_at = s->fail_at;
  hb_count = 0;
  hb_inject_here = 1;

  char config[96] = "backend=sim;seed=7";
  if (s->mem_limit)
    snprintf(config, sizeof config, "backend=sim;seed=7;mem_limit=%llu", (unsigned long long)s->mem_limit);
  STEP(s, "open_device", drv->open_device(config, &dev));
  md_capabilities caps = {.struct_size = sizeof caps};
  STEP(s, "get_capabilities", drv->get_capabilities(dev, &caps));
  STEP(s, "open_client", drv->open_client(dev, &client));
  uint8_t supported[2] = {0, 0};
  STEP(s, "get_supported_operations", drv->get_supported_operations(dev, model, supported));
  cr_assert(supported[0] == 1 && supported[1] == 1, "ADD float32 is supported");
  STEP(s, "prepare_model", drv->prepare_model(dev, client, model, &prepared));

  md_buffer_desc desc = {2, dims};
  md_buffer_role role = {0, 0, 1.0f};
  STEP(s, "allocate input", drv->allocate(dev, client, &desc, &prepared, 1, &role, 1, NULL, 0, &tin));
  STEP(s, "allocate output", drv->allocate(dev, client, &desc, &prepared, 1, NULL, 0, &role, 1, &tout));

  int fd = mdt_memfd(a, sizeof a);
  md_memory m = mdt_ashmem(fd, sizeof a);
  md_status cst;
  STEP(s, "copy_from", (cst = drv->copy_from(dev, client, tin, &m, 2, dims), close(fd), cst));

  /* execute: input 0 from the buffer, input 1 from a pool, the output into the other buffer */
  mdt_req_init(&req);
  req_live = 1;
  mdt_req_in_token(&req, tin, 2, dims);
  mdt_req_in_data(&req, b, sizeof b, 2, dims);
  mdt_req_out_token(&req, tout, 2, dims);
  md_output_shape shapes[1];
  md_timing timing;
  STEP(s, "execute", drv->execute(dev, client, prepared, mdt_req(&req), shapes, 1, &timing));
  cr_assert_eq(shapes[0].rank, 2);
  cr_assert(shapes[0].dims[0] == 2 && shapes[0].dims[1] == 3 && shapes[0].is_sufficient);

  fd = mdt_memfd(NULL, sizeof got);
  m = mdt_ashmem(fd, sizeof got);
  STEP(s, "copy_to",
       (cst = drv->copy_to(dev, client, tout, &m),
        cst == MD_NONE ? mdt_read_fd(fd, got, sizeof got) : (void)0, close(fd), cst));
  check_sum(got, a, b, 6, "the buffer's output");

  /* a registered pool as input 1, the output into a plain pool, asynchronously */
  fd = mdt_memfd(b, sizeof b);
  m = mdt_ashmem(fd, sizeof b);
  STEP(s, "register_memory", (cst = drv->register_memory(dev, client, &m, &pool), close(fd), cst));
  mdt_req_init(&req2);
  req2_live = 1;
  mdt_req_in_token(&req2, tin, 2, dims);
  uint32_t rp = mdt_req_pool_registered(&req2, pool);
  mdt_req_in_arg(&req2, rp, 0, sizeof b, 2, dims);
  mdt_req_out_pool(&req2, sizeof got, 2, dims);
  /* two executions of the model in flight at once: each has its own execution context */
  STEP(s, "execute_async", drv->execute_async(dev, client, prepared, mdt_req(&req2), &event));
  STEP(s, "execute_async (second)", drv->execute_async(dev, client, prepared, mdt_req(&req), &event2));
  md_output_shape ashapes[1];
  STEP(s, "wait_event", drv->wait_event(dev, client, event, UINT64_MAX, ashapes, 1, &timing));
  event = 0;
  STEP(s, "wait_event (second)", drv->wait_event(dev, client, event2, UINT64_MAX, ashapes, 1, &timing));
  event2 = 0;
  mdt_req_read_out(&req2, 0, got, sizeof got);
  check_sum(got, a, b, 6, "the async output");

  if (s->leave == LEAVE_NOTHING) {
    STEP(s, "unregister_memory", drv->unregister_memory(dev, client, pool));
    STEP(s, "free_buffer input", drv->free_buffer(dev, client, tin));
    STEP(s, "free_buffer output", drv->free_buffer(dev, client, tout));
    STEP(s, "release_prepared_model", drv->release_prepared_model(dev, client, prepared));
    device_memory_is_back(dev, "after every object was released");
  } else {
    /* an execution started and never waited: close_client must end it and free it */
    STEP(s, "execute_async (left)", drv->execute_async(dev, client, prepared, mdt_req(&req2), &event));
  }
  s->completed = 1;

cleanup:
  hb_inject_here = 0; /* closing is not starved: what is checked is that it frees everything */
  if (req2_live && (s->leave == LEAVE_NOTHING || !s->completed)) {
    if (event) drv->wait_event(dev, client, event, UINT64_MAX, NULL, 0, NULL);
    if (event2) drv->wait_event(dev, client, event2, UINT64_MAX, NULL, 0, NULL);
  }
  if (dev) {
    if (client && (s->leave != LEAVE_CLIENT || !s->completed)) {
      md_leak_report lk;
      md_status st = drv->close_client(dev, client, &lk);
      cr_assert_eq(st, MD_NONE, "close_client: %s", drv->last_error(dev));
      device_memory_is_back(dev, "after close_client");
      if (s->completed && s->leave == LEAVE_OBJECTS) {
        cr_assert_eq(lk.buffers, 2, "two buffers were left live");
        cr_assert_eq(lk.prepared_models, 1, "one prepared model was left live");
        cr_assert_eq(lk.events, 1, "one unwaited event was left live");
        cr_assert_eq(lk.bytes, 2 * sizeof a, "the two buffers' bytes");
      } else if (s->completed) {
        cr_assert(lk.buffers == 0 && lk.prepared_models == 0 && lk.events == 0 && lk.bytes == 0,
                  "everything was released: leak report %u buffers, %u prepared, %u events, %llu bytes",
                  lk.buffers, lk.prepared_models, lk.events, (unsigned long long)lk.bytes);
      }
    }
    drv->close_device(dev);
  }
  if (req_live) mdt_req_fini(&req); /* the pools' fds: after every execution using them ended */
  if (req2_live) mdt_req_fini(&req2);
}

/* Runs one session in a fresh epoch and checks that close_device left none of its blocks. */
static void session_balances(leave lv, long fail_at, uint64_t mem_limit, session *out) {
  hb_new_epoch();
  *out = (session){.leave = lv, .fail_at = fail_at, .mem_limit = mem_limit};
  run_session(out);
  size_t left = hb_epoch_live();
  cr_assert_eq(left, 0, "%zu block(s) the driver allocated during the session (%s, %ld-th allocation "
               "failing, stopped at %s) are still live after close_device",
               left, lv == LEAVE_NOTHING   ? "all released"
                     : lv == LEAVE_OBJECTS ? "objects left to close_client"
                                           : "client left to close_device",
               fail_at, out->stopped_at ? out->stopped_at : "(completed)");
}

/* The first session of the process also builds what lives for the process (the kernel registry,
 * the calling thread's error buffer): one is run before any counting. */
static void warm_up(void) {
  session s = {.leave = LEAVE_NOTHING};
  run_session(&s);
  cr_assert(s.completed, "the session completes when no allocation fails");
}

Test(heap_balance, a_released_session_frees_every_block) {
  warm_up();
  session s;
  session_balances(LEAVE_NOTHING, 0, 0, &s);
  cr_assert(s.completed);
  cr_assert_eq(atomic_load(&hb_injected), 0);
}

Test(heap_balance, close_client_frees_what_the_client_left) {
  warm_up();
  session s;
  session_balances(LEAVE_OBJECTS, 0, 0, &s);
  cr_assert(s.completed);
}

Test(heap_balance, close_device_frees_a_client_left_open) {
  warm_up();
  session s;
  session_balances(LEAVE_CLIENT, 0, 0, &s);
  cr_assert(s.completed);
}

/* Every allocation of the session in turn fails; up to the first n the session never reaches. */
static void starve_each(leave lv) {
  warm_up();
  long n = 1;
  for (; n < 20000; n++) {
    long inj0 = atomic_load(&hb_injected);
    session s;
    session_balances(lv, n, 0, &s);
    if (atomic_load(&hb_injected) == inj0) {
      cr_assert(s.completed, "no allocation failed, yet the session stopped at %s", s.stopped_at);
      break;
    }
  }
  cr_assert(n > 1 && n < 20000, "the session makes between 1 and 20000 allocations on its thread (%ld)", n);
}

Test(heap_balance, each_failed_allocation_is_a_resource_status_and_leaks_nothing) {
  starve_each(LEAVE_NOTHING);
}

Test(heap_balance, failed_allocations_with_objects_left_to_close_client) {
  starve_each(LEAVE_OBJECTS);
}

Test(heap_balance, failed_allocations_with_the_client_left_to_close_device) {
  starve_each(LEAVE_CLIENT);
}

/* Device memory too small for the session, from a few bytes up to enough: every call that needs
 * more than is free is RESOURCE_EXHAUSTED_* (SPEC 8.3) and nothing else, and the session still
 * releases everything. */
static void starve_device(leave lv) {
  warm_up();
  uint64_t lim = 1;
  int done = 0;
  for (; lim <= (1u << 20) && !done; lim += lim < 4096 ? 8 : lim / 8) {
    session s;
    session_balances(lv, 0, lim, &s);
    done = s.completed;
  }
  cr_assert(done, "the session completes with 1 MiB of device memory");
  cr_assert(lim > 64, "a session needs more than 64 bytes of device memory");
}

Test(heap_balance, tight_device_memory_is_resource_exhausted_and_leaks_nothing) {
  starve_device(LEAVE_NOTHING);
}

Test(heap_balance, tight_device_memory_with_objects_left_to_close_client) {
  starve_device(LEAVE_OBJECTS);
}
