/* test_unit_exec_run.c - white-box tests of exec_run.c (running a validated execution): what it
 * asks of the device's backend, seen through a spy backend table put in place of the sim's
 * after the device opens (md_device.be): the device temporaries an execution context keeps and
 * reuses, the modelled device time it adds up, each backend failure (alloc, write, launch, read,
 * stream creation and synchronization) and the status it becomes, for a synchronous execution
 * and for an asynchronous one whose device work goes on the context's stream
 * (md__async_inline_bytes = 0), and md__exec_results. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <malloc.h>
#include <time.h>

#include "support.h"
#include "device_int.h"
#include "error.h"
#include "exec_int.h"
#include "md/backend.h"

/* ---- the spy backend: the sim's table, counting calls and failing the one asked for ---- */

typedef struct spy_counts {
  unsigned alloc, free, write, read, launch, launch_nostream, screate, sdestroy, sync;
} spy_counts;

static const md_backend_ops *real;
static md_backend_ops spy;
static spy_counts n;
/* 1-based number (counted from the last spy_reset) of the call that fails; 0: none. */
static struct {
  unsigned alloc, write, read, launch, screate, sync;
  md_status st;           /* what a failing write/read/launch/sync returns */
  md_status sync_st;      /* a failing sync's, when not st */
  bool launch_kernel;     /* launch returns NONE with the kernel status st instead */
} fail;
static int devns_mode;    /* 0: the sim's; 1: launch 1000 ns, a copy 10 ns a byte; 2: none (UINT64_MAX) */

static void spy_reset(void) {
  memset(&n, 0, sizeof n);
  memset(&fail, 0, sizeof fail);
}

static md_status spy_alloc(md_backend *b, uint64_t bytes, md_devptr *out) {
  if (++n.alloc == fail.alloc) return md_backend_fail(NULL, 0, MD_RESOURCE_EXHAUSTED_TRANSIENT, "spy");
  return real->alloc(b, bytes, out);
}
static void spy_free(md_backend *b, md_devptr p) {
  if (p) n.free++;
  real->free(b, p);
}
static md_status spy_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t len,
                           char *err, size_t errlen) {
  if (++n.write == fail.write) return md_backend_fail(err, errlen, fail.st, "spy: write refused");
  return real->write(b, s, dst, off, src, len, err, errlen);
}
static md_status spy_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t len,
                          char *err, size_t errlen) {
  if (++n.read == fail.read) return md_backend_fail(err, errlen, fail.st, "spy: read refused");
  return real->read(b, s, dst, src, off, len, err, errlen);
}
static md_status spy_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                            md_kernel_status *st) {
  if (!s) n.launch_nostream++;
  if (++n.launch == fail.launch) {
    if (fail.launch_kernel) {
      st->code = fail.st;
      snprintf(st->message, sizeof st->message, "spy: kernel failed");
      return MD_NONE;
    }
    return md__fail(fail.st, "spy: launch refused");
  }
  return real->launch(b, s, k, call, st);
}
static md_status spy_stream_create(md_backend *b, md_stream **out) {
  if (++n.screate == fail.screate) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  return real->stream_create(b, out);
}
static void spy_stream_destroy(md_backend *b, md_stream *s) {
  n.sdestroy++;
  real->stream_destroy(b, s);
}
static md_status spy_stream_sync(md_backend *b, md_stream *s, char *err, size_t errlen) {
  md_status st = real->stream_sync(b, s, err, errlen);
  if (++n.sync == fail.sync) return md_backend_fail(err, errlen, fail.sync_st ? fail.sync_st : fail.st, "spy: sync failed");
  return st;
}
static uint64_t spy_device_ns(md_backend *b, int is_launch, uint64_t bytes) {
  /* A launch (is_launch 1, no bytes) 1000 ns, a copy 10 ns a byte; anything else is absurd. */
  if (devns_mode == 1) return is_launch == 1 && bytes == 0 ? 1000u : is_launch == 0 ? bytes * 10u : 1ull << 40;
  if (devns_mode == 2) return UINT64_MAX;
  return real->device_ns(b, is_launch, bytes);
}

/* ---- fixture ---- */

static mdt_env e;
static const uint32_t D23[2] = {2, 3}, D03[2] = {0, 3};
static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {10, 20, 30, 40, 50, 60};

static void setup(void) {
  mdt_env_open(&e, NULL);
  md_device *d = e.dev;
  real = d->be;
  spy = *real;
  spy.alloc = spy_alloc;
  spy.free = spy_free;
  spy.write = spy_write;
  spy.read = spy_read;
  spy.launch = spy_launch;
  spy.stream_create = spy_stream_create;
  spy.stream_destroy = spy_stream_destroy;
  spy.stream_sync = spy_stream_sync;
  spy.device_ns = spy_device_ns;
  d->be = &spy;
  devns_mode = 0;
  spy_reset();
  atomic_store(&md__async_inline_bytes, 64u << 10);
}
static bool faked_workers;
static void teardown(void) {
  if (faked_workers) e.dev->n_workers = 0;
  faked_workers = false;
  mdt_env_close(&e, 1);
}

/* Every asynchronous execution goes on its context's stream (none runs in the caller), and no
 * worker thread starts (the device believes it has its two): the waiter finishes each one, on
 * this thread, so the execution contexts are this thread's, as a synchronous execution's. */
static void on_stream(void) {
  atomic_store(&md__async_inline_bytes, 0);
  cr_assert_eq(e.dev->n_workers, 0u);
  e.dev->n_workers = 2;
  faked_workers = true;
}
TestSuite(exec_run, .init = setup, .fini = teardown);

/* t = a + b (a temporary), out = t + b: two kernels and a device temporary between them. */
static const md_model *chain_model(mdt_model *b, uint32_t rank, const uint32_t *dims) {
  mdt_mb_init(b);
  uint32_t in[3], t, out;
  in[0] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[1] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[2] = mdt_mb_const_i32(b, 0);
  t = mdt_mb_tensor_f32(b, rank, dims, MD_TEMPORARY_VARIABLE);
  out = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, &t);
  uint32_t in2[3] = {t, in[1], in[2]};
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in2, 1, &out);
  return mdt_mb_model(b);
}

/* A request of two pool inputs (A, B: `elems` floats of each, dims given) and one pool output. */
static void pool_request(mdt_request *r, uint32_t elems, uint32_t rank, const uint32_t *dims) {
  float a[12], b[12];
  for (uint32_t i = 0; i < elems; i++) a[i] = A[i % 6] + (float)(i / 6) * 100, b[i] = B[i % 6];
  mdt_req_init(r);
  mdt_req_in_data(r, a, elems * 4u, rank, dims);
  mdt_req_in_data(r, b, elems * 4u, rank, dims);
  mdt_req_out_pool(r, elems * 4u, 0, NULL);
}

/* execute_async + wait_event (forever), the same interface as mdt_exec. */
static md_status exec_wait(md_handle p, mdt_request *r, md_output_shape *sh, md_timing *t) {
  memset(sh, 0xAB, 8 * sizeof *sh);
  memset(t, 0, sizeof *t);
  md_handle ev = 0;
  md_status st = e.drv->execute_async(e.dev, e.client, p, mdt_req(r), &ev);
  if (st != MD_NONE) return st;
  cr_assert_neq(ev, 0u);
  return e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, r->n_out, t);
}

typedef md_status (*run_fn)(md_handle p, mdt_request *r, md_output_shape *sh, md_timing *t);
static md_status run_sync(md_handle p, mdt_request *r, md_output_shape *sh, md_timing *t) {
  return mdt_exec(&e, p, r, sh, t);
}

static void expect_failed(const md_output_shape *sh, uint32_t n_out, const md_timing *t) {
  for (uint32_t i = 0; i < n_out; i++) cr_expect_eq(sh[i].rank, 0u, "shape %u has rank %u", i, sh[i].rank);
  cr_expect_eq(t->on_device_ns, UINT64_MAX);
  cr_expect_eq(t->in_driver_ns, UINT64_MAX);
}

static void expect_chain_out(mdt_request *r, uint32_t elems) {
  float out[12];
  mdt_req_read_out(r, 0, out, elems * 4u);
  for (uint32_t i = 0; i < elems; i++) {
    float a = A[i % 6] + (float)(i / 6) * 100, b = B[i % 6];
    cr_expect_eq(out[i], a + b + b, "out[%u] = %g", i, (double)out[i]);
  }
}

/* ---- device temporaries kept by the execution context ---- */

static void temporaries_kept(run_fn run) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D03));
  static const uint32_t d13[2] = {1, 3}, d33[2] = {3, 3}, d43[2] = {4, 3};
  md_output_shape sh[8];
  md_timing t;
  mdt_request r;
  /* First run, [3,3]: one temporary each for the two inputs, t and the output. */
  spy_reset();
  pool_request(&r, 9, 2, d33);
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 9);
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[0].dims[0], 3u);
  cr_expect_eq(n.alloc, 4u, "allocs %u", n.alloc);
  cr_expect_eq(n.free, 0u, "frees %u", n.free);
  mdt_req_fini(&r);
  /* Smaller ([1,3]) and the same size: the temporaries are reused. */
  spy_reset();
  pool_request(&r, 3, 2, d13);
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 3);
  cr_expect_eq(sh[0].dims[0], 1u);
  mdt_req_fini(&r);
  pool_request(&r, 9, 2, d33);
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 9);
  mdt_req_fini(&r);
  cr_expect_eq(n.alloc, 0u, "allocs %u", n.alloc);
  cr_expect_eq(n.free, 0u, "frees %u", n.free);
  if (run == run_sync) cr_expect_eq(n.screate, 0u, "a synchronous execution makes no stream (%u)", n.screate);
  /* Larger ([4,3]): each grows (freed, then allocated again). */
  spy_reset();
  pool_request(&r, 12, 2, d43);
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 12);
  mdt_req_fini(&r);
  cr_expect_eq(n.alloc, 4u, "allocs %u", n.alloc);
  cr_expect_eq(n.free, 4u, "frees %u", n.free);
  /* Releasing the prepared model frees the context's temporaries (and its stream). */
  spy_reset();
  mdt_release(&e, p);
  cr_expect_eq(n.free, 4u, "frees %u", n.free);
  cr_expect_eq(n.alloc, 0u);
}

Test(exec_run, device_temporaries_are_kept_and_grown) { temporaries_kept(run_sync); }

Test(exec_run, device_temporaries_are_kept_and_grown_on_the_stream) {
  on_stream();
  temporaries_kept(exec_wait);
  cr_expect_eq(n.sdestroy, 1u, "the context's stream is destroyed with it");
}

Test(exec_run, stream_is_made_once_per_context) {
  on_stream();
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D23));
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  for (int k = 0; k < 3; k++) {
    mdt_request r;
    pool_request(&r, 6, 0, NULL);
    cr_assert_eq(exec_wait(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    expect_chain_out(&r, 6);
    mdt_req_fini(&r);
  }
  cr_expect_eq(n.screate, 1u, "streams made: %u", n.screate);
  /* Two pool inputs written, one output read, per execution; one synchronization each. */
  cr_expect_eq(n.write, 6u, "writes %u", n.write);
  cr_expect_eq(n.read, 3u, "reads %u", n.read);
  cr_expect_eq(n.launch, 6u, "launches %u", n.launch);
  cr_expect_geq(n.sync, 3u, "syncs %u", n.sync);
  mdt_release(&e, p);
}

Test(exec_run, a_stream_that_cannot_be_made_runs_synchronously) {
  on_stream();
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D23));
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  fail.screate = 1;
  mdt_request r;
  pool_request(&r, 6, 0, NULL);
  cr_assert_eq(exec_wait(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 6);
  mdt_req_fini(&r);
  cr_expect_eq(n.sync, 0u, "no stream: nothing to synchronize (%u)", n.sync);
  /* The next execution tries again. */
  pool_request(&r, 6, 0, NULL);
  cr_assert_eq(exec_wait(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  expect_chain_out(&r, 6);
  mdt_req_fini(&r);
  cr_expect_eq(n.screate, 2u);
  cr_expect_geq(n.sync, 1u);
  mdt_release(&e, p);
}

/* ---- modelled device time ---- */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* chain [2,3]: two pool inputs written (24 bytes each), two launches, one output read. */
static void modelled_time(run_fn run) {
  devns_mode = 1;
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D23));
  md_output_shape sh[8];
  md_timing t;
  mdt_request r;
  pool_request(&r, 6, 0, NULL);
  uint64_t w0 = mono_ns();
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  uint64_t wall = mono_ns() - w0;
  expect_chain_out(&r, 6);
  cr_expect_eq(t.on_device_ns, 240u + 240u + 1000u + 1000u + 240u, "on_device_ns %llu",
               (unsigned long long)t.on_device_ns);
  cr_expect_leq(t.in_driver_ns, wall, "in the driver %llu ns, the call took %llu", (unsigned long long)t.in_driver_ns,
                (unsigned long long)wall);
  cr_expect_neq(t.in_driver_ns, UINT64_MAX);
  cr_expect_gt(t.in_driver_ns, 0u);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}
Test(exec_run, modelled_device_time_adds_copies_and_launches) { modelled_time(run_sync); }
Test(exec_run, modelled_device_time_adds_copies_and_launches_on_the_stream) {
  on_stream();
  modelled_time(exec_wait);
}

/* Device inputs and outputs move no bytes: only the launch is counted. */
Test(exec_run, modelled_device_time_of_device_buffers_is_the_launch) {
  devns_mode = 1;
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token ta = mdt_alloc(&e, p, false, 0, 0, NULL), tb = mdt_alloc(&e, p, false, 1, 0, NULL);
  md_token to = mdt_alloc(&e, p, true, 0, 0, NULL);
  cr_assert_eq(mdt_copy_from(&e, e.client, ta, A, 24, 0, NULL), MD_NONE);
  cr_assert_eq(mdt_copy_from(&e, e.client, tb, B, 24, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, ta, 0, NULL);
  mdt_req_in_token(&r, tb, 0, NULL);
  mdt_req_out_token(&r, to, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  cr_assert_eq(mdt_exec(&e, p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(t.on_device_ns, 1000u, "on_device_ns %llu", (unsigned long long)t.on_device_ns);
  cr_expect_eq(n.write, 0u);
  cr_expect_eq(n.read, 0u);
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, to, out, 24), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  /* One input on a pool: its copy (24 bytes) is counted. */
  mdt_request r2;
  mdt_req_init(&r2);
  mdt_req_in_token(&r2, ta, 0, NULL);
  mdt_req_in_data(&r2, B, 24, 0, NULL);
  mdt_req_out_token(&r2, to, 0, NULL);
  cr_assert_eq(mdt_exec(&e, p, &r2, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(t.on_device_ns, 1240u, "on_device_ns %llu", (unsigned long long)t.on_device_ns);
  mdt_req_fini(&r2);
  mdt_req_fini(&r);
  mdt_free(&e, ta);
  mdt_free(&e, tb);
  mdt_free(&e, to);
  mdt_release(&e, p);
}

/* Without a time model the device time is measured: no more than the time in the driver. */
static void unmodelled_time(run_fn run, int mode) {
  devns_mode = mode;
  if (mode == 3) spy.device_ns = NULL;
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D23));
  md_output_shape sh[8];
  md_timing t;
  mdt_request r;
  pool_request(&r, 6, 0, NULL);
  uint64_t w0 = mono_ns();
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  uint64_t wall = mono_ns() - w0;
  expect_chain_out(&r, 6);
  cr_expect_leq(t.in_driver_ns, wall, "in the driver %llu ns, the call took %llu", (unsigned long long)t.in_driver_ns,
                (unsigned long long)wall);
  cr_expect_neq(t.on_device_ns, UINT64_MAX);
  cr_expect_neq(t.in_driver_ns, UINT64_MAX);
  cr_expect_leq(t.on_device_ns, t.in_driver_ns, "device %llu > driver %llu", (unsigned long long)t.on_device_ns,
                (unsigned long long)t.in_driver_ns);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}
Test(exec_run, unmodelled_device_time_is_measured) { unmodelled_time(run_sync, 2); }
Test(exec_run, unmodelled_device_time_is_measured_without_device_ns) { unmodelled_time(run_sync, 3); }
Test(exec_run, unmodelled_device_time_is_measured_on_the_stream) {
  on_stream();
  unmodelled_time(exec_wait, 2);
}

/* ---- backend failures and the statuses they become ---- */

/* Runs chain [2,3] (pool I/O) with the failure set up by `arm`, expects `want`, then checks the
 * device still runs the same execution correctly (unless it was lost). */
static void backend_failure(run_fn run, void (*arm)(void), md_status want) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D23));
  md_output_shape sh[8];
  md_timing t;
  mdt_request r;
  pool_request(&r, 6, 0, NULL);
  spy_reset();
  arm();
  /* On the stream, the output's copy is queued before the synchronization and the judging of
   * the kernels: a failed synchronization or kernel may come after it. */
  bool read_back = run == exec_wait && (fail.sync || fail.launch_kernel);
  md_status st = run(p, &r, sh, &t);
  cr_assert_eq(st, want, "status %d, want %d: %s", st, want, e.drv->last_error(e.dev));
  expect_failed(sh, 1, &t);
  float out[6];
  mdt_req_read_out(&r, 0, out, 24);
  for (int i = 0; i < 6 && !read_back; i++) cr_expect_eq(out[i], 0.0f, "nothing is written to a failed execution's output");
  spy_reset();
  md_status again = run(p, &r, sh, &t);
  if (want == MD_DEVICE_UNAVAILABLE) {
    cr_expect_eq(again, MD_DEVICE_UNAVAILABLE, "the device is lost");
  } else {
    cr_assert_eq(again, MD_NONE, "%s", e.drv->last_error(e.dev));
    expect_chain_out(&r, 6);
    mdt_release(&e, p);
  }
  mdt_req_fini(&r);
}

static void arm_alloc1(void) { fail.alloc = 1; }
static void arm_alloc3(void) { fail.alloc = 3; }      /* the temporary t */
static void arm_alloc4(void) { fail.alloc = 4; }      /* the output */
static void arm_write1(void) { fail.write = 1, fail.st = MD_GENERAL_FAILURE; }
static void arm_write2(void) { fail.write = 2, fail.st = MD_GENERAL_FAILURE; }
static void arm_read(void) { fail.read = 1, fail.st = MD_GENERAL_FAILURE; }
static void arm_launch1(void) { fail.launch = 1, fail.st = MD_GENERAL_FAILURE; }
static void arm_launch2(void) { fail.launch = 2, fail.st = MD_GENERAL_FAILURE; }
static void arm_launch2_lost(void) { fail.launch = 2, fail.st = MD_DEVICE_UNAVAILABLE; }
static void arm_kernel2(void) { fail.launch = 2, fail.st = MD_GENERAL_FAILURE, fail.launch_kernel = true; }
static void arm_kernel1_lost(void) { fail.launch = 1, fail.st = MD_DEVICE_UNAVAILABLE, fail.launch_kernel = true; }
static void arm_kernel1_exhausted(void) {
  fail.launch = 1, fail.st = MD_RESOURCE_EXHAUSTED_TRANSIENT, fail.launch_kernel = true;
}
static void arm_sync_failed(void) { fail.sync = 1, fail.st = MD_GENERAL_FAILURE; }
static void arm_sync_lost(void) { fail.sync = 1, fail.st = MD_DEVICE_UNAVAILABLE; }
static void arm_sync_other(void) { fail.sync = 1, fail.st = MD_RESOURCE_EXHAUSTED_TRANSIENT; }
/* A failed copy of the output, then a synchronization that loses the device: the first failure
 * found decides the status. */
static void arm_read_then_sync_lost(void) {
  fail.read = 1, fail.sync = 1, fail.st = MD_GENERAL_FAILURE, fail.sync_st = MD_DEVICE_UNAVAILABLE;
}

/* The first allocation the first execution makes: a context's temporaries come first. */
Test(exec_run, input_temporary_allocation_failure_is_its_status) {
  backend_failure(run_sync, arm_alloc1, MD_RESOURCE_EXHAUSTED_TRANSIENT);
}
Test(exec_run, intermediate_allocation_failure_is_its_status) {
  backend_failure(run_sync, arm_alloc3, MD_RESOURCE_EXHAUSTED_TRANSIENT);
}
Test(exec_run, output_allocation_failure_is_its_status) {
  backend_failure(run_sync, arm_alloc4, MD_RESOURCE_EXHAUSTED_TRANSIENT);
}
Test(exec_run, input_write_failure_is_general_failure) { backend_failure(run_sync, arm_write1, MD_GENERAL_FAILURE); }
Test(exec_run, second_input_write_failure_is_general_failure) {
  backend_failure(run_sync, arm_write2, MD_GENERAL_FAILURE);
}
Test(exec_run, output_read_failure_is_general_failure) { backend_failure(run_sync, arm_read, MD_GENERAL_FAILURE); }
Test(exec_run, refused_launch_is_general_failure) { backend_failure(run_sync, arm_launch1, MD_GENERAL_FAILURE); }
Test(exec_run, refused_second_launch_is_general_failure) {
  backend_failure(run_sync, arm_launch2, MD_GENERAL_FAILURE);
}
Test(exec_run, launch_losing_the_device_is_device_unavailable) {
  backend_failure(run_sync, arm_launch2_lost, MD_DEVICE_UNAVAILABLE);
}
Test(exec_run, failed_kernel_is_general_failure) { backend_failure(run_sync, arm_kernel2, MD_GENERAL_FAILURE); }
Test(exec_run, kernel_reporting_any_other_status_is_general_failure) {
  backend_failure(run_sync, arm_kernel1_exhausted, MD_GENERAL_FAILURE);
}
Test(exec_run, kernel_losing_the_device_is_device_unavailable) {
  backend_failure(run_sync, arm_kernel1_lost, MD_DEVICE_UNAVAILABLE);
}

#define ON_STREAM(name, arm, want)                  \
  Test(exec_run, name##_on_the_stream) {            \
    on_stream();                                    \
    backend_failure(exec_wait, arm, want);          \
  }
ON_STREAM(input_temporary_allocation_failure_is_its_status, arm_alloc1, MD_RESOURCE_EXHAUSTED_TRANSIENT)
ON_STREAM(intermediate_allocation_failure_is_its_status, arm_alloc3, MD_RESOURCE_EXHAUSTED_TRANSIENT)
ON_STREAM(output_allocation_failure_is_its_status, arm_alloc4, MD_RESOURCE_EXHAUSTED_TRANSIENT)
ON_STREAM(input_write_failure_is_general_failure, arm_write1, MD_GENERAL_FAILURE)
ON_STREAM(output_read_failure_is_general_failure, arm_read, MD_GENERAL_FAILURE)
ON_STREAM(refused_launch_is_general_failure, arm_launch1, MD_GENERAL_FAILURE)
ON_STREAM(refused_second_launch_is_general_failure, arm_launch2, MD_GENERAL_FAILURE)
ON_STREAM(launch_losing_the_device_is_device_unavailable, arm_launch2_lost, MD_DEVICE_UNAVAILABLE)
ON_STREAM(failed_kernel_is_general_failure, arm_kernel2, MD_GENERAL_FAILURE)
ON_STREAM(kernel_losing_the_device_is_device_unavailable, arm_kernel1_lost, MD_DEVICE_UNAVAILABLE)
ON_STREAM(failed_synchronization_is_general_failure, arm_sync_failed, MD_GENERAL_FAILURE)
ON_STREAM(synchronization_losing_the_device_is_device_unavailable, arm_sync_lost, MD_DEVICE_UNAVAILABLE)
ON_STREAM(synchronization_failing_with_any_other_status_is_general_failure, arm_sync_other, MD_GENERAL_FAILURE)
ON_STREAM(a_failed_copy_outranks_a_failed_synchronization, arm_read_then_sync_lost, MD_GENERAL_FAILURE)

/* A failure after a device output was written leaves it uninitialized, keeping its dims; a pool
 * output beside it gets nothing. Two outputs: out0 a token, out1 a pool; the pool read fails. */
static uint64_t bytes_live(void) {
  md_backend_stats st;
  memset(&st, 0, sizeof st);
  real->stats(e.dev->bk, &st);
  return st.bytes_live;
}

static void failure_uninitializes_token_output_at(run_fn run, void (*arm)(void), md_status want, uint32_t tok_out) {
  uint64_t before = bytes_live();
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add2_model(&b, 2, D23));
  md_token to = mdt_alloc(&e, p, true, tok_out, 0, NULL);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  if (tok_out == 0) mdt_req_out_token(&r, to, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  if (tok_out == 1) mdt_req_out_token(&r, to, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[1].rank, 2u);
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, to, out, 24), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  spy_reset();
  arm();
  cr_assert_eq(run(p, &r, sh, &t), want, "%s", e.drv->last_error(e.dev));
  expect_failed(sh, 2, &t);
  cr_expect_eq(mdt_copy_to(&e, e.client, to, out, 24), MD_GENERAL_FAILURE, "the token output is uninitialized");
  spy_reset();
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_assert_eq(mdt_copy_to(&e, e.client, to, out, 24), MD_NONE, "%s", e.drv->last_error(e.dev));
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  mdt_req_fini(&r);
  mdt_free(&e, to);
  mdt_release(&e, p);
  if (want != MD_DEVICE_UNAVAILABLE)
    cr_expect_eq(bytes_live(), before, "device bytes %llu, %llu before", (unsigned long long)bytes_live(),
                 (unsigned long long)before);
}
static void failure_uninitializes_token_output(run_fn run, void (*arm)(void), md_status want) {
  failure_uninitializes_token_output_at(run, arm, want, 0);
}
/* The token is output 1, written by the second kernel; the first fails, so it was never placed. */
Test(exec_run, failure_before_the_token_output_is_placed_uninitializes_it) {
  failure_uninitializes_token_output_at(run_sync, arm_launch1, MD_GENERAL_FAILURE, 1);
}
Test(exec_run, failure_before_the_token_output_is_placed_uninitializes_it_on_the_stream) {
  on_stream();
  failure_uninitializes_token_output_at(exec_wait, arm_launch1, MD_GENERAL_FAILURE, 1);
}
Test(exec_run, failed_read_uninitializes_the_token_output_at_1) {
  failure_uninitializes_token_output_at(run_sync, arm_read, MD_GENERAL_FAILURE, 1);
}
Test(exec_run, failed_read_uninitializes_the_token_output) {
  failure_uninitializes_token_output(run_sync, arm_read, MD_GENERAL_FAILURE);
}
Test(exec_run, failed_second_kernel_uninitializes_the_token_output) {
  failure_uninitializes_token_output(run_sync, arm_kernel2, MD_GENERAL_FAILURE);
}
Test(exec_run, failed_read_uninitializes_the_token_output_on_the_stream) {
  on_stream();
  failure_uninitializes_token_output(exec_wait, arm_read, MD_GENERAL_FAILURE);
}
Test(exec_run, failed_synchronization_uninitializes_the_token_output_on_the_stream) {
  on_stream();
  failure_uninitializes_token_output(exec_wait, arm_sync_failed, MD_GENERAL_FAILURE);
}
Test(exec_run, failed_second_kernel_uninitializes_the_token_output_on_the_stream) {
  on_stream();
  failure_uninitializes_token_output(exec_wait, arm_kernel2, MD_GENERAL_FAILURE);
}

/* A scalar token input (the activation) is read from the device into host memory: a read that
 * fails is the execution's failure. */
static void scalar_token_input(run_fn run, bool fail_read) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  md_token act = mdt_alloc(&e, p, false, 2, 0, NULL);
  int32_t relu1 = 2;
  cr_assert_eq(mdt_copy_from(&e, e.client, act, &relu1, 4, 0, NULL), MD_NONE, "%s", e.drv->last_error(e.dev));
  static const float x[6] = {-3, -0.5f, 0, 0.25f, 0.5f, 7}, z[6] = {0};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, 24, 0, NULL);
  mdt_req_in_data(&r, z, 24, 0, NULL);
  mdt_req_in_token(&r, act, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  if (fail_read) fail.read = 1, fail.st = MD_GENERAL_FAILURE;
  md_status st = run(p, &r, sh, &t);
  if (fail_read) {
    cr_expect_eq(st, MD_GENERAL_FAILURE, "%s", e.drv->last_error(e.dev));
    expect_failed(sh, 1, &t);
  } else {
    cr_assert_eq(st, MD_NONE, "%s", e.drv->last_error(e.dev));
    float out[6];
    mdt_req_read_out(&r, 0, out, 24);
    static const float want[6] = {-1, -0.5f, 0, 0.25f, 0.5f, 1};
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want[i], "out[%d] = %g", i, (double)out[i]);
    cr_expect_eq(n.read, 2u, "the activation, then the output (%u)", n.read);
    cr_expect_eq(n.write, 2u, "the two tensor inputs (%u)", n.write);
    /* Then the activation from a pool (relu6), through the same execution context. */
    mdt_request r2;
    mdt_req_init(&r2);
    mdt_req_in_data(&r2, x, 24, 0, NULL);
    mdt_req_in_data(&r2, z, 24, 0, NULL);
    int32_t relu6 = 3;
    mdt_req_in_data(&r2, &relu6, 4, 0, NULL);
    mdt_req_out_pool(&r2, 24, 0, NULL);
    cr_assert_eq(run(p, &r2, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    mdt_req_read_out(&r2, 0, out, 24);
    static const float want6[6] = {0, 0, 0, 0.25f, 0.5f, 6};
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want6[i], "out[%d] = %g", i, (double)out[i]);
    mdt_req_fini(&r2);
  }
  mdt_req_fini(&r);
  mdt_free(&e, act);
  mdt_release(&e, p);
}
Test(exec_run, scalar_token_input_is_read_to_the_host) { scalar_token_input(run_sync, false); }
Test(exec_run, scalar_token_input_read_failure_is_general_failure) { scalar_token_input(run_sync, true); }
Test(exec_run, scalar_token_input_is_read_to_the_host_on_the_stream) {
  on_stream();
  scalar_token_input(exec_wait, false);
}

/* ---- md__exec_results ---- */

Test(exec_run, results_copy_the_shapes_asked_for) {
  struct {
    md__exec x;
    md_output_shape sh[3];
  } s;
  memset(&s, 0, sizeof s);
  s.x.n_out = 3;
  s.x.shapes = s.sh;
  for (uint32_t i = 0; i < 3; i++) {
    s.sh[i].rank = i + 1;
    s.sh[i].dims[0] = 10 + i;
    s.sh[i].is_sufficient = i != 1;
  }
  s.x.timing.on_device_ns = 5;
  s.x.timing.in_driver_ns = 7;
  md_output_shape out[5];
  md_timing t;
  /* More shapes than outputs: the rest are zero. */
  memset(out, 0xAB, sizeof out);
  memset(&t, 0, sizeof t);
  md__exec_results(&s.x, MD_NONE, out, 5, &t);
  for (uint32_t i = 0; i < 3; i++) {
    cr_expect_eq(out[i].rank, i + 1);
    cr_expect_eq(out[i].dims[0], 10 + i);
    cr_expect_eq(out[i].is_sufficient, i != 1);
  }
  for (uint32_t i = 3; i < 5; i++) cr_expect_eq(out[i].rank, 0u, "shape %u past the outputs is cleared", i);
  cr_expect_eq(t.on_device_ns, 5u);
  cr_expect_eq(t.in_driver_ns, 7u);
  /* Fewer: only those, nothing past them written. */
  memset(out, 0xAB, sizeof out);
  md__exec_results(&s.x, MD_OUTPUT_INSUFFICIENT_SIZE, out, 2, NULL);
  cr_expect_eq(out[0].rank, 1u);
  cr_expect_eq(out[1].rank, 2u);
  cr_expect_eq(out[1].is_sufficient, 0u);
  cr_expect_eq(out[2].rank, 0xABABABABu, "shape 2 was not asked for");
  /* Any other failure: zeros. */
  memset(out, 0xAB, sizeof out);
  md__exec_results(&s.x, MD_GENERAL_FAILURE, out, 3, &t);
  for (uint32_t i = 0; i < 3; i++) cr_expect_eq(out[i].rank, 0u);
  cr_expect_eq(out[3].rank, 0xABABABABu);
  /* n_shapes 0 writes nothing; NULL shapes and timing are allowed. */
  memset(out, 0xAB, sizeof out);
  md__exec_results(&s.x, MD_NONE, out, 0, NULL);
  cr_expect_eq(out[0].rank, 0xABABABABu);
  md__exec_results(&s.x, MD_NONE, NULL, 3, NULL);
}

/* Through execute: n_shapes short of and past the output count. */
Test(exec_run, execute_fills_exactly_n_shapes) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add2_model(&b, 2, D23));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  md_output_shape sh[4];
  md_timing t;
  memset(sh, 0xAB, sizeof sh);
  cr_assert_eq(e.drv->execute(e.dev, e.client, p, mdt_req(&r), sh, 1, &t), MD_NONE);
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[1].rank, 0xABABABABu);
  memset(sh, 0xAB, sizeof sh);
  cr_assert_eq(e.drv->execute(e.dev, e.client, p, mdt_req(&r), sh, 4, &t), MD_NONE);
  cr_expect_eq(sh[1].rank, 2u);
  cr_expect_eq(sh[1].dims[1], 3u);
  cr_expect_eq(sh[2].rank, 0u);
  cr_expect_eq(sh[3].rank, 0u);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* ---- which asynchronous executions run in the caller (exec_async.c's runs_inline) ---- */

/* Workers are faked away (on_stream), with md__async_inline_bytes = limit: an execution run in
 * the caller makes no stream and has finished when execute_async returns; a queued one makes the
 * context's stream and is finished by its wait. */
static void fake_workers(uint64_t limit) {
  cr_assert_eq(e.dev->n_workers, 0u);
  e.dev->n_workers = 2;
  faked_workers = true;
  atomic_store(&md__async_inline_bytes, limit);
}

/* execute_async of r: whether it ran in the caller (no stream made, nothing synchronized). */
static bool ran_inline(md_handle p, mdt_request *r, md_handle *ev) {
  spy_reset();
  cr_assert_eq(e.drv->execute_async(e.dev, e.client, p, mdt_req(r), ev), MD_NONE, "%s", e.drv->last_error(e.dev));
  return n.launch == 1 && n.launch_nostream == 1 && n.screate == 0;
}

static void wait_ok(md_handle ev, uint32_t n_out) {
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, n_out, &t), MD_NONE, "%s",
               e.drv->last_error(e.dev));
  for (uint32_t i = 0; i < n_out; i++) cr_expect_eq(sh[i].rank, 2u);
}

static md_handle add_p(void) {
  mdt_model b;
  return mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 0, NULL, 0));
}

static void add_request(mdt_request *r, uint64_t out_len) {
  mdt_req_init(r);
  mdt_req_in_data(r, A, 24, 0, NULL);
  mdt_req_in_data(r, B, 24, 0, NULL);
  mdt_req_out_pool(r, 24, 0, NULL);
  r->out[0].length = out_len; /* 0: no bytes (SPEC 8.1), on a 24-byte pool */
}

static void expect_sum(mdt_request *r) {
  float out[6];
  mdt_req_read_out(r, 0, out, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i], "out[%d] = %g", i, (double)out[i]);
}

/* 72 bytes move (two 24-byte inputs, a 24-byte output): inline up to a limit of 72. */
Test(exec_run, small_execution_runs_in_the_caller_up_to_the_limit) {
  fake_workers(72);
  md_handle p = add_p(), ev;
  mdt_request r;
  add_request(&r, 24);
  cr_expect(ran_inline(p, &r, &ev), "72 bytes, limit 72: in the caller (streams %u)", n.screate);
  expect_sum(&r);
  wait_ok(ev, 1);
  mdt_req_fini(&r);
  atomic_store(&md__async_inline_bytes, 71);
  add_request(&r, 24);
  cr_expect(!ran_inline(p, &r, &ev), "72 bytes, limit 71: queued");
  wait_ok(ev, 1);
  expect_sum(&r);
  mdt_req_fini(&r);
  atomic_store(&md__async_inline_bytes, 0);
  add_request(&r, 24);
  cr_expect(!ran_inline(p, &r, &ev), "limit 0: queued");
  wait_ok(ev, 1);
  expect_sum(&r);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* Token arguments move nothing between pools and the device: they do not count. */
Test(exec_run, token_arguments_do_not_count_against_the_limit) {
  fake_workers(24);
  md_handle p = add_p(), ev;
  md_token ta = mdt_alloc(&e, p, false, 0, 2, D23), to = mdt_alloc(&e, p, true, 0, 2, D23);
  cr_assert_eq(mdt_copy_from(&e, e.client, ta, A, 24, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, ta, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_out_token(&r, to, 0, NULL);
  cr_expect(ran_inline(p, &r, &ev), "24 bytes of pools, limit 24: in the caller");
  wait_ok(ev, 1);
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, to, out, 24), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  atomic_store(&md__async_inline_bytes, 23);
  cr_expect(!ran_inline(p, &r, &ev), "24 bytes of pools, limit 23: queued");
  wait_ok(ev, 1);
  mdt_req_fini(&r);
  mdt_free(&e, ta);
  mdt_free(&e, to);
  mdt_release(&e, p);
}

/* An output of length 0 on a pool (its size known only when it runs) is never run inline. */
Test(exec_run, zero_length_output_is_queued) {
  fake_workers(64u << 10);
  md_handle p = add_p(), ev;
  mdt_request r;
  add_request(&r, 0);
  cr_expect(!ran_inline(p, &r, &ev), "a zero-length output: queued");
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev, UINT64_MAX, sh, 1, &t), MD_OUTPUT_INSUFFICIENT_SIZE);
  cr_expect_eq(sh[0].rank, 2u);
  cr_expect_eq(sh[0].is_sufficient, 0);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* A custom kernel (it may block) is never run inline. */
Test(exec_run, custom_kernel_is_queued) {
  fake_workers(64u << 10);
  mdt_register_test_kernels();
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_custom_model(&b, "mdt.copy", MD_TENSOR_FLOAT32, 0, 0, 2, D23)), ev;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  cr_expect(!ran_inline(p, &r, &ev), "a custom kernel: queued");
  wait_ok(ev, 1);
  float out[6];
  mdt_req_read_out(&r, 0, out, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i]);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* While one asynchronous execution is queued, the next small one is queued behind it, and both
 * finish (waited in reverse order); then a small one runs in the caller again. */
Test(exec_run, small_execution_behind_a_queued_one_is_queued) {
  fake_workers(64u << 10);
  md_handle p = add_p(), ev1, ev2, ev3;
  mdt_request r1, r2, r3;
  add_request(&r1, 0);
  cr_expect(!ran_inline(p, &r1, &ev1));
  add_request(&r2, 24);
  cr_expect(!ran_inline(p, &r2, &ev2), "one execution queued: the next is queued too");
  wait_ok(ev2, 1);
  expect_sum(&r2);
  md_output_shape sh[8];
  md_timing t;
  cr_expect_eq(e.drv->wait_event(e.dev, e.client, ev1, UINT64_MAX, sh, 1, &t), MD_OUTPUT_INSUFFICIENT_SIZE);
  add_request(&r3, 24);
  cr_expect(ran_inline(p, &r3, &ev3), "nothing queued: in the caller");
  wait_ok(ev3, 1);
  expect_sum(&r3);
  mdt_req_fini(&r1);
  mdt_req_fini(&r2);
  mdt_req_fini(&r3);
  mdt_release(&e, p);
}

/* A non-BLOB hardware buffer argument (its size is the whole buffer) is never run inline. */
Test(exec_run, hardware_buffer_argument_is_queued) {
  fake_workers(64u << 10);
  md_handle p = add_p(), ev;
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  int fd = mdt_memfd(NULL, 24);
  uint32_t pool = mdt_req_pool_mem(&r, mdt_hwb_image(fd, 6, 1));
  mdt_req_out_arg(&r, pool, 0, 0, 0, NULL);
  cr_expect(!ran_inline(p, &r, &ev), "a hardware buffer output: queued");
  wait_ok(ev, 1);
  float out[6];
  mdt_read_fd(fd, out, 24);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + B[i]);
  close(fd);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* ---- a token output read by an earlier execution of this thread is written in place ---- */

Test(exec_run, output_read_earlier_by_this_thread_is_written_in_place) {
  md_handle p = add_p();
  md_token t = mdt_alloc_inout(&e, p, 0, 0, 2, D23);
  cr_assert_eq(mdt_copy_from(&e, e.client, t, A, 24, 0, NULL), MD_NONE);
  md_token o = mdt_alloc_inout(&e, p, 0, 0, 2, D23);
  md_output_shape sh[8];
  md_timing tm;
  for (int k = 0; k < 3; k++) {
    /* t read (o = t + B), then t written (t = o + B) */
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_token(&r, t, 0, NULL);
    mdt_req_in_data(&r, B, 24, 0, NULL);
    mdt_req_out_token(&r, o, 0, NULL);
    cr_assert_eq(mdt_exec(&e, p, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
    mdt_req_fini(&r);
    mdt_req_init(&r);
    mdt_req_in_token(&r, o, 0, NULL);
    mdt_req_in_data(&r, B, 24, 0, NULL);
    mdt_req_out_token(&r, t, 0, NULL);
    spy_reset();
    cr_assert_eq(mdt_exec(&e, p, &r, sh, &tm), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_expect_eq(n.alloc, 0u, "round %d: t is written in place (%u allocations)", k, n.alloc);
    mdt_req_fini(&r);
  }
  float out[6];
  cr_assert_eq(mdt_copy_to(&e, e.client, t, out, 24), MD_NONE);
  for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i] + 6 * B[i]);
  mdt_free(&e, t);
  mdt_free(&e, o);
  mdt_release(&e, p);
}

/* ---- execution contexts of many threads ---- */

static md_handle thread_p;
static void *thread_runs(void *arg) {
  (void)arg;
  for (int k = 0; k < 2; k++) {
    mdt_request r;
    pool_request(&r, 6, 0, NULL);
    md_output_shape sh[8];
    md_timing t;
    md_status st = mdt_exec(&e, thread_p, &r, sh, &t);
    if (st == MD_NONE) expect_chain_out(&r, 6);
    mdt_req_fini(&r);
    if (st != MD_NONE) return (void *)1;
  }
  return NULL;
}

/* Ten threads, one after the other, each running two executions: each thread's context is kept
 * (in its slot, or on the free list past the slots) and reused by its second execution; the
 * release frees every temporary of every context. */
Test(exec_run, contexts_of_many_threads_are_reused_and_all_freed) {
  mdt_model b;
  thread_p = mdt_prepare(&e, chain_model(&b, 2, D23));
  spy_reset();
  cr_assert_null(thread_runs(NULL));
  cr_expect_eq(n.alloc, 4u, "the first thread's context: 4 temporaries (%u)", n.alloc);
  for (int i = 0; i < 10; i++) {
    pthread_t th;
    void *ret = NULL;
    cr_assert_eq(pthread_create(&th, NULL, thread_runs, NULL), 0);
    pthread_join(th, &ret);
    cr_assert_null(ret, "thread %d", i);
  }
  unsigned allocs = n.alloc;
  cr_expect_leq(allocs, 4u * 11u, "at most one context a thread (%u temporaries)", allocs);
  spy_reset();
  mdt_release(&e, thread_p);
  cr_expect_eq(n.free, allocs, "every temporary freed with the prepared model: %u of %u", n.free, allocs);
}

/* ---- shapes: the dims past the rank are zero ---- */

Test(exec_run, shapes_past_the_rank_are_zero) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, chain_model(&b, 2, D03));
  static const uint32_t d13[2] = {1, 3};
  for (int k = 0; k < 2; k++) {
    mdt_request r;
    pool_request(&r, 3, 2, d13);
    md_output_shape sh[8];
    md_timing t;
    memset(sh, 0x5A, sizeof sh);
    cr_assert_eq(e.drv->execute(e.dev, e.client, p, mdt_req(&r), sh, 1, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].rank, 2u);
    cr_expect_eq(sh[0].dims[0], 1u);
    cr_expect_eq(sh[0].dims[1], 3u);
    for (int i = 2; i < (int)MD_MAX_RANK; i++) cr_expect_eq(sh[0].dims[i], 0u, "dims[%d] = %u", i, sh[0].dims[i]);
    expect_chain_out(&r, 3);
    mdt_req_fini(&r);
  }
  mdt_release(&e, p);
}

/* ---- custom kernels: no shape function, shapes that overflow, host (parameter) outputs ---- */

static void k_copy_run(const md_kernel_call *call, md_kernel_status *st) {
  (void)st;
  uint64_t len = call->inputs[0].bytes < call->outputs[0].bytes ? call->inputs[0].bytes : call->outputs[0].bytes;
  memcpy(call->outputs[0].data, call->inputs[0].data, (size_t)len);
}
static md_status k_huge_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st, void *user) {
  (void)sig, (void)st, (void)user;
  memset(out, 0, sizeof *out);
  out[0].rank = 4;
  for (int i = 0; i < 4; i++) out[0].dims[i] = 65536;
  return MD_NONE;
}
static void k_register(const char *name, md_status (*shape)(const md_op_sig *, md_tensor_shape *, md_kernel_status *, void *)) {
  if (md_kernel_find(name, "host")) return;
  md_kernel_def def;
  memset(&def, 0, sizeof def);
  def.struct_size = sizeof def;
  def.name = name;
  def.platform = "host";
  def.min_inputs = def.max_inputs = 1;
  def.n_outputs = 1;
  def.shape = shape;
  def.run = k_copy_run;
  cr_assert_eq(md_kernel_register(&def), MD_NONE, "%s", md_kernel_registry_error());
}

/* Without a shape function the outputs take the model's dims, all of them. */
static void no_shape_function(run_fn run) {
  k_register("h52.noshape", NULL);
  static const uint32_t d234[3] = {2, 3, 4};
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_custom_model(&b, "h52.noshape", MD_TENSOR_FLOAT32, 0, 0, 3, d234));
  float x[24];
  mdt_iota(x, 24, 1);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, 96, 0, NULL);
  mdt_req_out_pool(&r, 96, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 3u);
  cr_expect_eq(sh[0].dims[0], 2u);
  cr_expect_eq(sh[0].dims[1], 3u);
  cr_expect_eq(sh[0].dims[2], 4u);
  float out[24];
  mdt_req_read_out(&r, 0, out, 96);
  for (int i = 0; i < 24; i++) cr_expect_eq(out[i], x[i]);
  mdt_req_fini(&r);
  mdt_release(&e, p);
  /* Output dims not fully known in the model: nothing can say them. */
  static const uint32_t d04[3] = {2, 0, 4};
  mdt_model b2;
  mdt_mb_init(&b2);
  uint32_t in = mdt_mb_tensor_f32(&b2, 3, d234, MD_SUBGRAPH_INPUT);
  uint32_t o = mdt_mb_tensor_f32(&b2, 3, d04, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(&b2, MD_OP_CUSTOM, "h52.noshape", 1, &in, 1, &o);
  md_handle p2 = mdt_prepare(&e, mdt_mb_model(&b2));
  mdt_req_init(&r);
  mdt_req_in_data(&r, x, 96, 0, NULL);
  mdt_req_out_pool(&r, 96, 0, NULL);
  cr_expect_eq(run(p2, &r, sh, &t), MD_GENERAL_FAILURE, "%s", e.drv->last_error(e.dev));
  mdt_req_fini(&r);
  mdt_release(&e, p2);
}
Test(exec_run, kernel_without_shape_function_gives_the_model_dims) { no_shape_function(run_sync); }
Test(exec_run, kernel_without_shape_function_gives_the_model_dims_on_the_stream) {
  on_stream();
  no_shape_function(exec_wait);
}

/* Produced dims whose byte size does not fit 64 bits: GENERAL_FAILURE (SPEC 8.17). */
Test(exec_run, produced_dims_that_overflow_are_general_failure) {
  k_register("h52.huge", k_huge_shape);
  mdt_model b;
  mdt_mb_init(&b);
  uint32_t in = mdt_mb_tensor_f32(&b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t o = mdt_mb_tensor_f32(&b, 0, NULL, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(&b, MD_OP_CUSTOM, "h52.huge", 1, &in, 1, &o);
  md_handle p = mdt_prepare(&e, mdt_mb_model(&b));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  cr_expect_eq(mdt_exec(&e, p, &r, sh, &t), MD_GENERAL_FAILURE, "%s", e.drv->last_error(e.dev));
  cr_expect(strstr(e.drv->last_error(e.dev), "overflow"), "%s", e.drv->last_error(e.dev));
  cr_expect_eq(n.launch, 0u);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}

/* TENSOR_INT32 operands are parameters, in host memory: a pool input is read in place, an
 * output is host memory copied to its pool. */
static void host_operands(run_fn run) {
  mdt_register_test_kernels();
  static const uint32_t d3[1] = {3};
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_custom_model(&b, "mdt.copy", MD_TENSOR_INT32, 0, 0, 1, d3));
  static const int32_t v[3] = {7, -8, 9};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, v, 12, 0, NULL);
  mdt_req_out_pool(&r, 12, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  spy_reset();
  cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].rank, 1u);
  cr_expect_eq(sh[0].dims[0], 3u);
  int32_t out[3];
  mdt_req_read_out(&r, 0, out, 12);
  for (int i = 0; i < 3; i++) cr_expect_eq(out[i], v[i]);
  cr_expect_eq(n.write, 0u, "a parameter never goes to the device (%u writes)", n.write);
  cr_expect_eq(n.read, 0u, "nor comes back from it (%u reads)", n.read);
  cr_expect_eq(n.alloc, 0u, "nor takes device memory (%u allocations)", n.alloc);
  /* A short output pool: OUTPUT_INSUFFICIENT_SIZE, nothing written. */
  mdt_request r2;
  mdt_req_init(&r2);
  mdt_req_in_data(&r2, v, 12, 0, NULL);
  mdt_req_out_pool(&r2, 12, 0, NULL);
  r2.out[0].length = 8;
  cr_expect_eq(run(p, &r2, sh, &t), MD_OUTPUT_INSUFFICIENT_SIZE, "%s", e.drv->last_error(e.dev));
  cr_expect_eq(sh[0].is_sufficient, 0);
  mdt_req_read_out(&r2, 0, out, 12);
  for (int i = 0; i < 3; i++) cr_expect_eq(out[i], 0);
  mdt_req_fini(&r2);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}
Test(exec_run, parameter_operands_stay_on_the_host) { host_operands(run_sync); }
Test(exec_run, parameter_operands_stay_on_the_host_on_the_stream) {
  on_stream();
  host_operands(exec_wait);
}

/* shape = copy(s) (a parameter one operation writes), out = RESHAPE(x, shape): the reshape's
 * shape function reads what the copy wrote, so on the stream the copy is waited for first. */
static void reshape_by_computed_shape(run_fn run) {
  mdt_register_test_kernels();
  static const uint32_t d2[1] = {2};
  mdt_model b;
  mdt_mb_init(&b);
  uint32_t x = mdt_mb_tensor_f32(&b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t s = mdt_mb_operand(&b, MD_TENSOR_INT32, 1, d2, MD_SUBGRAPH_INPUT);
  uint32_t mid = mdt_mb_operand(&b, MD_TENSOR_INT32, 1, d2, MD_TEMPORARY_VARIABLE);
  uint32_t o = mdt_mb_tensor_f32(&b, 0, NULL, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(&b, MD_OP_CUSTOM, "mdt.copy", 1, &s, 1, &mid);
  uint32_t rin[2] = {x, mid};
  mdt_mb_op(&b, MD_OP_RESHAPE, NULL, 2, rin, 1, &o);
  md_handle p = mdt_prepare(&e, mdt_mb_model(&b));
  static const int32_t shapes[3][2] = {{3, 2}, {6, 1}, {1, -1}};
  static const uint32_t want[3][2] = {{3, 2}, {6, 1}, {1, 6}};
  for (int k = 0; k < 3; k++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, A, 24, 0, NULL);
    mdt_req_in_data(&r, shapes[k], 8, 0, NULL);
    mdt_req_out_pool(&r, 24, 0, NULL);
    md_output_shape sh[8];
    md_timing t;
    spy_reset();
    cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "shape %d: %s", k, e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].rank, 2u);
    cr_expect_eq(sh[0].dims[0], want[k][0]);
    cr_expect_eq(sh[0].dims[1], want[k][1]);
    float out[6];
    mdt_req_read_out(&r, 0, out, 24);
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i]);
    mdt_req_fini(&r);
  }
  mdt_release(&e, p);
}
Test(exec_run, a_computed_parameter_is_read_after_it_is_written) { reshape_by_computed_shape(run_sync); }
Test(exec_run, a_computed_parameter_is_read_after_it_is_written_on_the_stream) {
  on_stream();
  reshape_by_computed_shape(exec_wait);
}

/* ---- each shape function is handed zeroed shapes ---- */

/* Writes rank 2 (the input's dims) and junk past it (the runtime reads only the rank's dims). */
static md_status k_junk_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st, void *user) {
  (void)st, (void)user;
  out[0].rank = sig->inputs[0].rank;
  for (uint32_t i = 0; i < MD_MAX_RANK; i++) out[0].dims[i] = i < out[0].rank ? sig->inputs[0].dims[i] : 99;
  return MD_NONE;
}
/* Fails unless the shape it is handed is all zero. */
static md_status k_zeroed_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st, void *user) {
  (void)user;
  static const md_tensor_shape zero;
  if (memcmp(&out[0], &zero, sizeof zero)) return md_kernel_fail(st, MD_GENERAL_FAILURE, "shape not zeroed");
  out[0].rank = sig->inputs[0].rank;
  memcpy(out[0].dims, sig->inputs[0].dims, out[0].rank * sizeof *out[0].dims);
  return MD_NONE;
}

static void zeroed_shapes(run_fn run) {
  k_register("h52.junk", k_junk_shape);
  k_register("h52.zeroed", k_zeroed_shape);
  mdt_model b;
  mdt_mb_init(&b);
  uint32_t in = mdt_mb_tensor_f32(&b, 2, D23, MD_SUBGRAPH_INPUT);
  uint32_t mid = mdt_mb_tensor_f32(&b, 0, NULL, MD_TEMPORARY_VARIABLE);
  uint32_t o = mdt_mb_tensor_f32(&b, 0, NULL, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(&b, MD_OP_CUSTOM, "h52.junk", 1, &in, 1, &mid);
  mdt_mb_op(&b, MD_OP_CUSTOM, "h52.zeroed", 1, &mid, 1, &o);
  md_handle p = mdt_prepare(&e, mdt_mb_model(&b));
  for (int k = 0; k < 2; k++) {
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, A, 24, 0, NULL);
    mdt_req_out_pool(&r, 24, 0, NULL);
    md_output_shape sh[8];
    md_timing t;
    cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
    cr_expect_eq(sh[0].rank, 2u);
    cr_expect_eq(sh[0].dims[1], 3u);
    float out[6];
    mdt_req_read_out(&r, 0, out, 24);
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], A[i]);
    mdt_req_fini(&r);
  }
  mdt_release(&e, p);
}
Test(exec_run, each_shape_function_is_handed_zeroed_shapes) { zeroed_shapes(run_sync); }
Test(exec_run, each_shape_function_is_handed_zeroed_shapes_on_the_stream) {
  on_stream();
  zeroed_shapes(exec_wait);
}

/* ---- host memory: what an execution allocates on the host it frees ---- */

static size_t heap_used(void) { return mallinfo2().uordblks; }

static void no_heap_growth(run_fn run) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_act_input_model(&b, 2, D23));
  md_token act = mdt_alloc(&e, p, false, 2, 0, NULL);
  int32_t relu = 1;
  cr_assert_eq(mdt_copy_from(&e, e.client, act, &relu, 4, 0, NULL), MD_NONE);
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, A, 24, 0, NULL);
  mdt_req_in_data(&r, B, 24, 0, NULL);
  mdt_req_in_token(&r, act, 0, NULL);
  mdt_req_out_pool(&r, 24, 0, NULL);
  md_output_shape sh[8];
  md_timing t;
  for (int k = 0; k < 20; k++) cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  size_t before = heap_used();
  for (int k = 0; k < 200; k++) cr_assert_eq(run(p, &r, sh, &t), MD_NONE, "%s", e.drv->last_error(e.dev));
  size_t after = heap_used();
  cr_expect_lt(after, before + 2048, "200 executions grew the heap from %zu to %zu bytes", before, after);
  expect_sum(&r);
  mdt_req_fini(&r);
  mdt_free(&e, act);
  mdt_release(&e, p);
}
Test(exec_run, executions_free_their_host_memory) { no_heap_growth(run_sync); }
Test(exec_run, executions_free_their_host_memory_on_the_stream) {
  on_stream();
  no_heap_growth(exec_wait);
}
