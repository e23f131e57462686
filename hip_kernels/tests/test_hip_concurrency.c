/* test_hip_concurrency.c - the hip backend and the CPU execution layer under real threads; in
 * the ThreadSanitizer suite (the file name says "concurrency"). Threads start together on a
 * pthread barrier, nothing sleeps and nothing is timed; worker threads never call Criterion's
 * asserts (not thread-safe): they count what went wrong and the main thread asserts.
 *
 *   - the CPU layer: streams made and destroyed, memory allocated and freed (each hipFree
 *     synchronizes the device) while other threads run kernels with barriers;
 *   - the backend: copies and launches on the NULL stream (borrowed channels) and on each
 *     thread's own stream with events, exact results;
 *   - the driver (backend=hip): executions and async executions from many threads;
 *   - a device loss in the middle of all that: every thread ends on DEVICE_UNAVAILABLE. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hip_backend.h"
#include "hip_cpu_test_kernels.h"
#include "md_hip_cpu.h"
#include "support.h"

#define NT 4

typedef struct shared {
  pthread_barrier_t start;
  atomic_int bad;       /* wrong results or unexpected statuses */
  atomic_int lost;      /* threads that ended on DEVICE_UNAVAILABLE */
  atomic_int other;     /* statuses other than NONE / DEVICE_UNAVAILABLE */
  char why[256];        /* the first problem (written once, under why_lock) */
  pthread_mutex_t why_lock;
} shared;

static shared S;

static void shared_init(void) {
  memset(&S, 0, sizeof S);
  pthread_barrier_init(&S.start, NULL, NT);
  pthread_mutex_init(&S.why_lock, NULL);
}

static void problem(const char *what, int a, int b) {
  atomic_fetch_add(&S.bad, 1);
  pthread_mutex_lock(&S.why_lock);
  if (!S.why[0]) snprintf(S.why, sizeof S.why, "%s (%d, %d)", what, a, b);
  pthread_mutex_unlock(&S.why_lock);
}

static void run_threads(void *(*fn)(void *)) {
  pthread_t t[NT];
  intptr_t id[NT];
  for (int i = 0; i < NT; i++) {
    id[i] = i;
    cr_assert_eq(pthread_create(&t[i], NULL, fn, (void *)id[i]), 0);
  }
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
}

/* ---- the CPU layer ---- */

static void *layer_worker(void *arg) {
  const int id = (int)(intptr_t)arg;
  enum { BLOCKS = 5 };
  uint32_t h[BLOCKS * 256];
  uint64_t got[BLOCKS], want[BLOCKS];
  pthread_barrier_wait(&S.start);
  for (int r = 0; r < 12; r++) {
    memset(want, 0, sizeof want);
    for (uint32_t i = 0; i < BLOCKS * 256; i++) {
      h[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(id * 977 + r);
      want[i / 256] += h[i];
    }
    hipStream_t s;
    uint32_t *in = NULL;
    uint64_t *out = NULL;
    if (hipStreamCreateWithFlags(&s, hipStreamNonBlocking) != hipSuccess) {
      problem("hipStreamCreateWithFlags", id, r);
      return NULL;
    }
    if (hipMalloc((void **)&in, sizeof h) != hipSuccess || hipMalloc((void **)&out, sizeof got) != hipSuccess) {
      problem("hipMalloc", id, r);
    } else {
      hipError_t e = hipMemcpyAsync(in, h, sizeof h, hipMemcpyHostToDevice, s);
      hct_block_sum(s, BLOCKS, in, out);
      if (e == hipSuccess) e = hipGetLastError();
      if (e == hipSuccess) e = hipMemcpyAsync(got, out, sizeof got, hipMemcpyDeviceToHost, s);
      if (e == hipSuccess) e = hipStreamSynchronize(s);
      if (e != hipSuccess) problem("stream work", id, (int)e);
      else if (memcmp(got, want, sizeof got) != 0) problem("block sums differ", id, r);
    }
    if (hipFree(in) != hipSuccess || hipFree(out) != hipSuccess) problem("hipFree", id, r);
    if (hipStreamDestroy(s) != hipSuccess) problem("hipStreamDestroy", id, r);
  }
  return NULL;
}

Test(hip_concurrency, the_layer_runs_streams_memory_and_kernels_from_many_threads) {
  shared_init();
  run_threads(layer_worker);
  cr_assert_eq(atomic_load(&S.bad), 0, "%s", S.why);
  md_hipcpu_stats st;
  md_hipcpu_stats_get(&st);
  cr_assert_eq(st.streams, 0);
  cr_assert_eq(st.device_allocs, 0);
  cr_assert_eq(st.blocks, (uint64_t)NT * 12 * 5);
}

/* ---- the backend ---- */

static md_backend *B;
static const md_backend_ops *O;

static void *backend_worker(void *arg) {
  const int id = (int)(intptr_t)arg;
  const md_kernel_def *add = md_kernel_find("ADD", "hip");
  md_stream *s = NULL;
  md_event *ev = NULL;
  char err[256];
  if (!add || O->stream_create(B, &s) != MD_NONE || O->event_create(B, &ev) != MD_NONE) {
    problem("stream/event", id, 0);
    pthread_barrier_wait(&S.start);
    return NULL;
  }
  pthread_barrier_wait(&S.start);
  const int32_t act = 0;
  for (int r = 0; r < 16; r++) {
    const uint32_t n = 64 + (uint32_t)(id * 37 + r * 1013) % 70000; /* up to 3 staging chunks' worth */
    float *ha = malloc(n * 4), *hb = malloc(n * 4), *ho = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) {
      ha[i] = (float)(i % 97) * 0.5f + (float)id;
      hb[i] = (float)r - (float)(i % 13);
    }
    md_devptr a = 0, b = 0, o = 0;
    md_stream *use = (r & 1) ? s : NULL;
    md_status st = O->alloc(B, n * 4, &a);
    if (st == MD_NONE) st = O->alloc(B, n * 4, &b);
    if (st == MD_NONE) st = O->alloc(B, n * 4, &o);
    if (st == MD_NONE) st = O->write(B, use, a, 0, ha, n * 4, err, sizeof err);
    if (st == MD_NONE) st = O->write(B, use, b, 0, hb, n * 4, err, sizeof err);
    md_tensor t[4] = {{.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {n}, .bytes = n * 4ull},
                      {.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {n}, .bytes = n * 4ull},
                      {.type = MD_INT32, .bytes = 4},
                      {.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = {n}, .bytes = n * 4ull}};
    t[0].data = O->kernel_ptr(B, a);
    t[1].data = O->kernel_ptr(B, b);
    t[2].data = (void *)&act;
    t[3].data = O->kernel_ptr(B, o);
    md_kernel_call call = {.struct_size = sizeof call, .platform = "hip", .n_inputs = 3, .inputs = t,
                           .n_outputs = 1, .outputs = t + 3};
    md_kernel_status ks;
    memset(&ks, 0, sizeof ks);
    if (st == MD_NONE) st = O->launch(B, use, add, &call, &ks);
    if (st == MD_NONE) st = O->read(B, use, ho, o, 0, n * 4, err, sizeof err);
    if (st == MD_NONE && use) st = O->event_record(B, ev, use);
    if (st == MD_NONE && use) st = O->event_wait(B, ev, UINT64_MAX);
    if (st != MD_NONE) problem("backend call failed", id, (int)st);
    else
      for (uint32_t i = 0; i < n; i++)
        if (ho[i] != ha[i] + hb[i]) {
          problem("a sum differs", id, (int)i);
          break;
        }
    O->free(B, a);
    O->free(B, b);
    O->free(B, o);
    free(ha);
    free(hb);
    free(ho);
  }
  O->event_destroy(B, ev);
  O->stream_destroy(B, s);
  return NULL;
}

Test(hip_concurrency, the_backend_copies_and_launches_from_many_threads) {
  shared_init();
  O = md_hip_backend();
  md_backend_params p = {.struct_size = sizeof p};
  char err[256] = "";
  cr_assert_eq(O->open(&p, &B, err, sizeof err), MD_NONE, "%s", err);
  run_threads(backend_worker);
  cr_assert_eq(atomic_load(&S.bad), 0, "%s", S.why);
  O->close(B);
  md_hipcpu_stats st;
  md_hipcpu_stats_get(&st);
  cr_assert_eq(st.streams, 0);
  cr_assert_eq(st.device_allocs, 0);
  cr_assert_eq(st.host_allocs, 0);
}

/* ---- the driver ---- */

static mdt_env E;
static md_handle P; /* ADD float32 [2,3] */
static const uint32_t D23[2] = {2, 3};
static const float A[6] = {1, 2, 3, 4, 5, 6}, Bv[6] = {10, 20, 30, 40, 50, 60};

static int raw_memfd(const void *data, size_t n) {
  int fd = memfd_create("hip-thread", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)n) != 0 || (data && pwrite(fd, data, n, 0) != (ssize_t)n)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* One ADD execution on the thread's own pools (sync or async); the status, and in *ok whether
 * the output is A + B. */
static md_status one_exec(int in0, int in1, int out, int async, int *ok) {
  md_request_arg ins[2] = {{.pool = 0, .length = 24}, {.pool = 1, .length = 24}};
  md_request_arg outs[1] = {{.pool = 2, .length = 24}};
  md_request_pool pools[3] = {{.memory = {.kind = MD_MEM_ASHMEM, .fd = in0, .size = 24, .prot = 3}},
                              {.memory = {.kind = MD_MEM_ASHMEM, .fd = in1, .size = 24, .prot = 3}},
                              {.memory = {.kind = MD_MEM_ASHMEM, .fd = out, .size = 24, .prot = 3}}};
  md_request req = {.n_inputs = 2, .inputs = ins, .n_outputs = 1, .outputs = outs, .n_pools = 3, .pools = pools};
  md_output_shape shapes[1];
  md_timing t;
  md_status st;
  float zero[6] = {0};
  if (pwrite(out, zero, 24, 0) != 24) return MD_GENERAL_FAILURE;
  if (async) {
    md_handle ev = 0;
    st = E.drv->execute_async(E.dev, E.client, P, &req, &ev);
    if (st == MD_NONE) st = E.drv->wait_event(E.dev, E.client, ev, UINT64_MAX, shapes, 1, &t);
  } else {
    st = E.drv->execute(E.dev, E.client, P, &req, shapes, 1, &t);
  }
  float o[6];
  *ok = st == MD_NONE && pread(out, o, 24, 0) == 24;
  for (int i = 0; *ok && i < 6; i++) *ok = o[i] == A[i] + Bv[i];
  return st;
}

static void *driver_worker(void *arg) {
  const int id = (int)(intptr_t)arg;
  int in0 = raw_memfd(A, 24), in1 = raw_memfd(Bv, 24), out = raw_memfd(NULL, 24);
  pthread_barrier_wait(&S.start);
  for (int r = 0; r < 30 && in0 >= 0 && in1 >= 0 && out >= 0; r++) {
    int ok = 0;
    md_status st = one_exec(in0, in1, out, (r + id) & 1, &ok);
    if (st != MD_NONE || !ok) {
      problem("execution", id, (int)st);
      break;
    }
  }
  close(in0);
  close(in1);
  close(out);
  return NULL;
}

static void driver_setup(void) {
  shared_init();
  mdt_env_open(&E, "backend=hip");
  mdt_model b;
  P = mdt_prepare(&E, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
}

Test(hip_concurrency, the_driver_runs_executions_from_many_threads) {
  driver_setup();
  run_threads(driver_worker);
  cr_assert_eq(atomic_load(&S.bad), 0, "%s", S.why);
  E.drv->release_prepared_model(E.dev, E.client, P);
  mdt_env_close(&E, 0);
}

/* A kernel fault while every thread executes: each thread's calls return NONE until the device
 * is lost, then DEVICE_UNAVAILABLE, and nothing hangs. */
static void *lossy_worker(void *arg) {
  (void)arg;
  int in0 = raw_memfd(A, 24), in1 = raw_memfd(Bv, 24), out = raw_memfd(NULL, 24);
  pthread_barrier_wait(&S.start);
  for (int r = 0; r < 100000 && in0 >= 0 && in1 >= 0 && out >= 0; r++) {
    int ok = 0;
    md_status st = one_exec(in0, in1, out, r & 1, &ok);
    if (st == MD_DEVICE_UNAVAILABLE) {
      atomic_fetch_add(&S.lost, 1);
      break;
    }
    if (st != MD_NONE || !ok) {
      atomic_fetch_add(&S.other, 1);
      problem("a status other than NONE or DEVICE_UNAVAILABLE, or a wrong sum", (int)st, ok);
      break;
    }
  }
  close(in0);
  close(in1);
  close(out);
  return NULL;
}

Test(hip_concurrency, a_device_loss_ends_every_thread_on_device_unavailable) {
  driver_setup();
  md_hipcpu_fail(MD_HIPCPU_KERNEL, 25, hipErrorIllegalAddress);
  run_threads(lossy_worker);
  cr_assert_eq(atomic_load(&S.other), 0, "%s", S.why);
  cr_assert_eq(atomic_load(&S.lost), NT, "every thread saw the loss");
  E.drv->release_prepared_model(E.dev, E.client, P);
  md_leak_report leaks;
  cr_assert_eq(E.drv->close_client(E.dev, E.client, &leaks), MD_NONE);
  E.client = 0;
  mdt_env_close(&E, 1);
  md_hipcpu_stats st;
  md_hipcpu_stats_get(&st);
  cr_assert_eq(st.device_allocs, 0, "a lost device still releases its memory at close");
  cr_assert_eq(st.streams, 0);
}
