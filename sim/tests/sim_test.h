/* sim_test.h - helpers shared by the sim backend's Criterion tests: opening a device, tiny
 * local test kernels (the tests do not depend on the kernel registry), and a leak check.
 * Every test file includes it once; everything here is static inline. */
#ifndef MD_SIM_TEST_H
#define MD_SIM_TEST_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "md/backend.h"
#include "md/sim.h"

typedef struct simt {
  const md_backend_ops *ops;
  md_backend *dev;
  int allow_live;       /* the test leaves allocations for close() to release */
} simt;

static inline simt *simt_get(void) {
  static simt t;
  return &t;
}

/* Opens a sim device; aborts the test on failure. */
static inline md_backend *simt_open(uint64_t mem_limit, const char *faults, uint64_t latency_ns) {
  simt *t = simt_get();
  t->ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = mem_limit, .latency_ns = latency_ns,
                         .faults = faults};
  char err[256] = "";
  md_status st = t->ops->open(&p, &t->dev, err, sizeof err);
  cr_assert_eq(st, MD_NONE, "open failed: %d %s", st, err);
  cr_assert_not_null(t->dev);
  return t->dev;
}

/* .fini of every test: nothing may stay allocated unless the test said so, then close. */
static inline void simt_close(void) {
  simt *t = simt_get();
  if (!t->dev) return;
  md_sim_stats s;
  md_sim_stats_get(t->dev, &s);
  if (!t->allow_live) {
    cr_expect_eq(s.common.bytes_live, 0, "leaked %" PRIu64 " bytes in %" PRIu64 " allocations",
                 s.common.bytes_live, s.live_blocks);
    cr_expect_eq(s.common.allocs, s.common.frees, "allocs %" PRIu64 " != frees %" PRIu64, s.common.allocs,
                 s.common.frees);
  }
  t->ops->close(t->dev);
  t->dev = NULL;
}

static inline md_devptr simt_alloc(uint64_t bytes) {
  simt *t = simt_get();
  md_devptr p = 0;
  md_status st = t->ops->alloc(t->dev, bytes, &p);
  cr_assert_eq(st, MD_NONE, "alloc(%" PRIu64 ") failed: %d", bytes, st);
  cr_assert_neq(p, 0);
  return p;
}

static inline md_sim_stats simt_stats(void) {
  md_sim_stats s;
  md_sim_stats_get(simt_get()->dev, &s);
  return s;
}

/* ---- test kernels: output 0 is float32 -------------------------------------------------- */

/* Fills output 0 with 1.0f, every float of its `bytes`. */
static inline void simt_k_fill(const md_kernel_call *c, md_kernel_status *st) {
  if (c->stream) {
    st->code = MD_GENERAL_FAILURE;
    snprintf(st->message, sizeof st->message, "call->stream is not NULL on sim");
    return;
  }
  float *o = c->outputs[0].data;
  for (uint64_t i = 0; i < c->outputs[0].bytes / sizeof(float); i++) o[i] = 1.0f;
}
/* Writes one float past the end of output 0: the out-of-bounds kernel. */
static inline void simt_k_oob(const md_kernel_call *c, md_kernel_status *st) {
  float *o = c->outputs[0].data;
  uint64_t n = c->outputs[0].bytes / sizeof(float);
  for (uint64_t i = 0; i <= n; i++) o[i] = 2.0f;
}
/* Writes one float before the start of output 0. */
static inline void simt_k_under(const md_kernel_call *c, md_kernel_status *st) {
  float *o = c->outputs[0].data;
  o[-1] = 3.0f;
}
/* Fails through its status with its own message. */
static inline void simt_k_fail(const md_kernel_call *c, md_kernel_status *st) {
  st->code = MD_GENERAL_FAILURE;
  snprintf(st->message, sizeof st->message, "test kernel says no (%s)", (const char *)c->user);
}
/* Output 0 = input 0 + 1, float by float. */
static inline void simt_k_inc(const md_kernel_call *c, md_kernel_status *st) {
  const float *in = c->inputs[0].data;
  float *o = c->outputs[0].data;
  for (uint64_t i = 0; i < c->outputs[0].bytes / sizeof(float); i++) o[i] = in[i] + 1.0f;
}

/* A kernel that waits for the test to open a gate (no sleeps: the test sees the kernel enter,
 * holds it as long as it needs, and counts the runs). Initialise with SIMT_GATE_INIT. */
typedef struct simt_gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int open;           /* set by the test */
  int entered, ran;   /* counted by the kernel */
  pthread_t runner;   /* the thread the kernel last ran on */
} simt_gate;
#define SIMT_GATE_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER}

static inline void simt_gate_kernel(const md_kernel_call *c, md_kernel_status *st) {
  (void)st;
  simt_gate *g = c->user;
  pthread_mutex_lock(&g->lock);
  g->runner = pthread_self();
  g->entered++;
  pthread_cond_broadcast(&g->cond);
  while (!g->open) pthread_cond_wait(&g->cond, &g->lock);
  g->ran++;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
}

static inline void simt_gate_open(simt_gate *g) {
  pthread_mutex_lock(&g->lock);
  g->open = 1;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
}

static inline md_kernel_def simt_kernel(const char *name, void (*run)(const md_kernel_call *, md_kernel_status *)) {
  md_kernel_def k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.name = name;
  k.platform = "sim";
  k.min_inputs = 0;
  k.max_inputs = 1;
  k.n_outputs = 1;
  k.run = run;
  return k;
}

static inline md_tensor simt_tensor(void *data, uint64_t floats) {
  md_tensor t;
  memset(&t, 0, sizeof t);
  t.type = MD_TENSOR_FLOAT32;
  t.rank = 1;
  t.dims[0] = (uint32_t)floats;
  t.data = data;
  t.bytes = floats * sizeof(float);
  return t;
}

/* Launches k with output `out` (and input `in` when non-NULL) on stream s. Work on a stream
 * runs later, so the call lives in a per-thread ring of 256 (a test syncs before it issues
 * that many launches); in, out and st must outlive the sync. */
static inline md_status simt_launch(md_stream *s, const md_kernel_def *k, md_tensor *in, md_tensor *out,
                                    md_kernel_status *st) {
  simt *t = simt_get();
  static _Thread_local md_kernel_call ring[256];
  static _Thread_local unsigned next;
  md_kernel_call *cp = &ring[next++ % 256], c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.platform = "sim";
  c.n_inputs = in ? 1 : 0;
  c.inputs = in;
  c.n_outputs = 1;
  c.outputs = out;
  c.stream = (void *)0x1;   /* the backend must hand kernels NULL on sim */
  c.user = k->user;
  memset(st, 0, sizeof *st);
  *cp = c;
  return t->ops->launch(t->dev, s, k, cp, st);
}

/* "0x5111..." as the messages print a devptr. */
static inline const char *simt_hex(md_devptr p, char buf[24]) {
  snprintf(buf, 24, "0x%" PRIx64, p);
  return buf;
}

#endif
