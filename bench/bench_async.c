/* bench_async.c - benchmark 6: execute_async on the sim's asynchronous streams.
 *
 * (a) Latency: one execute_async + wait_event of a one-operation model (RELU on [1,4], pools
 *     in and out), median wall time, beside a synchronous execute of the same request timed
 *     in the same run (target: <= 2x). Such a small execution runs in the calling thread
 *     (docs/execution.md), so its extra cost is the event.
 * (b) Throughput: RELU on [256,1024] (1 MiB in, 1 MiB out) run back to back, synchronously,
 *     against two executions kept in flight (two requests on their own pools, each issued on
 *     its own stream and finished by its waiter), executions per second, ratio against the
 *     synchronous figure (target: >= 1.5x); windows of each take turns, medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

typedef struct req_set {
  mdb_pool in, out;
  md_request_arg ia, oa;
  md_request_pool pools[2];
  md_request req;
} req_set;

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int req_open(req_set *r, size_t bytes) {
  memset(r, 0, sizeof *r);
  r->in.fd = r->out.fd = -1;
  if (mdb_pool_open(&r->in, bytes, 0) || mdb_pool_open(&r->out, bytes, 0)) return -1;
  float *x = (float *)r->in.map;
  for (size_t i = 0; i < bytes / 4; i++) x[i] = (float)((int)(i % 7) - 3);
  r->ia = (md_request_arg){.pool = 0, .length = bytes};
  r->oa = (md_request_arg){.pool = 1, .length = bytes};
  r->pools[0] = (md_request_pool){.is_token = 0, .memory = r->in.mem};
  r->pools[1] = (md_request_pool){.is_token = 0, .memory = r->out.mem};
  r->req = (md_request){.n_inputs = 1, .inputs = &r->ia, .n_outputs = 1, .outputs = &r->oa, .n_pools = 2,
                        .pools = r->pools};
  return 0;
}

static void req_close(req_set *r) {
  if (r->in.fd >= 0) mdb_pool_close(&r->in);
  if (r->out.fd >= 0) mdb_pool_close(&r->out);
}

static int check_relu(const req_set *r, size_t bytes) {
  const float *x = (const float *)r->in.map, *y = (const float *)r->out.map;
  for (size_t i = 0; i < bytes / 4; i++)
    if (y[i] != (x[i] > 0 ? x[i] : 0.0f)) return -1;
  return 0;
}

static int run_sync(mdb_env *env, md_handle p, req_set *r) {
  md_output_shape sh[1];
  md_status st = env->drv->execute(env->dev, env->client, p, &r->req, sh, 1, NULL);
  if (st != MD_NONE) mdb_fail("async", "execute: %d: %s", (int)st, env->drv->last_error(env->dev));
  return st == MD_NONE ? 0 : -1;
}

static int start(mdb_env *env, md_handle p, req_set *r, md_handle *ev) {
  md_status st = env->drv->execute_async(env->dev, env->client, p, &r->req, ev);
  if (st != MD_NONE) mdb_fail("async", "execute_async: %d: %s", (int)st, env->drv->last_error(env->dev));
  return st == MD_NONE ? 0 : -1;
}

static int finish(mdb_env *env, md_handle ev) {
  md_output_shape sh[1];
  md_status st = env->drv->wait_event(env->dev, env->client, ev, UINT64_MAX, sh, 1, NULL);
  if (st != MD_NONE) mdb_fail("async", "wait_event: %d: %s", (int)st, env->drv->last_error(env->dev));
  return st == MD_NONE ? 0 : -1;
}

int mdb_bench_async(const mdb_opts *o) {
  const char *B = "async";
  unsigned reps = o->quick ? 2000 : 10000, big_reps = o->quick ? 40 : 160;
  mdb_env env;
  if (mdb_env_open(&env, B, "backend=sim") != 0) return -1;
  int rc = -1;
  mdb_model ms, mb;
  static const uint32_t small[2] = {1, 4}, big[2] = {256, 1024};
  const size_t sb = 16, bb = 256u * 1024u * 4u;
  md_handle ps = mdb_prepare(&env, B, mdb_relu_model(&ms, 2, small));
  md_handle pb = mdb_prepare(&env, B, mdb_relu_model(&mb, 2, big));
  req_set s, b1, b2;
  memset(&s, 0, sizeof s);
  memset(&b1, 0, sizeof b1);
  memset(&b2, 0, sizeof b2);
  s.in.fd = s.out.fd = b1.in.fd = b1.out.fd = b2.in.fd = b2.out.fd = -1;
  double *vs = malloc(reps * sizeof *vs), *va = malloc(reps * sizeof *va);
  if (!ps || !pb || !vs || !va || req_open(&s, sb) || req_open(&b1, bb) || req_open(&b2, bb)) {
    mdb_fail(B, "setup failed");
    goto done;
  }

  /* (a) latency, interleaved so both see the same machine state */
  for (unsigned i = 0; i < reps + 200; i++) {
    uint64_t t0 = mdb_now_ns();
    if (run_sync(&env, ps, &s)) goto done;
    uint64_t t1 = mdb_now_ns();
    md_handle ev;
    if (start(&env, ps, &s, &ev) || finish(&env, ev)) goto done;
    uint64_t t2 = mdb_now_ns();
    if (i >= 200) {
      vs[i - 200] = (double)(t1 - t0);
      va[i - 200] = (double)(t2 - t1);
    }
  }
  if (check_relu(&s, sb)) {
    mdb_fail(B, "wrong RELU result (small)");
    goto done;
  }
  double sync_ns = mdb_median(vs, reps), async_ns = mdb_median(va, reps);
  mdb_row("async_execute_latency", "ns", async_ns, sync_ns, async_ns / sync_ns, "<= 2x sync execute",
          async_ns / sync_ns <= 2.0 ? MDB_PASS : MDB_MISS,
          "execute_async + wait_event, 1-op RELU [1,4]; baseline: synchronous execute %.0f ns", sync_ns);

  /* (b) throughput, 1 MiB a side: sync and async windows take turns, so a noisy neighbour slows
   * both alike; each figure is the median of its windows. */
  for (int w = 0; w < 5; w++)
    if (run_sync(&env, pb, &b1)) goto done;
  unsigned rounds = o->quick ? 3 : 7, per = big_reps / 4;
  double se[8], ae[8], ac[8];
  for (unsigned rd = 0; rd < rounds; rd++) {
    uint64_t t0 = mdb_now_ns();
    for (unsigned i = 0; i < per; i++)
      if (run_sync(&env, pb, &b1)) goto done;
    se[rd] = per / ((double)(mdb_now_ns() - t0) / 1e9);
    md_handle e1, e2;
    uint64_t c0 = cpu_ns();
    t0 = mdb_now_ns();
    if (start(&env, pb, &b1, &e1) || start(&env, pb, &b2, &e2)) goto done;
    for (unsigned i = 0; i + 2 < per; i += 2) {
      if (finish(&env, e1) || start(&env, pb, &b1, &e1)) goto done;
      if (finish(&env, e2) || start(&env, pb, &b2, &e2)) goto done;
    }
    if (finish(&env, e1) || finish(&env, e2)) goto done;
    uint64_t wall = mdb_now_ns() - t0;
    ae[rd] = per / ((double)wall / 1e9);
    ac[rd] = (double)(cpu_ns() - c0) / (double)wall;
  }
  double sync_eps = mdb_median(se, rounds), async_eps = mdb_median(ae, rounds), cpu_got = mdb_median(ac, rounds);
  if (check_relu(&b1, bb) || check_relu(&b2, bb)) {
    mdb_fail(B, "wrong RELU result (big)");
    goto done;
  }
  mdb_row("async_throughput_2_streams", "exec/s", async_eps, sync_eps, async_eps / sync_eps, ">= 1.5x sync",
          async_eps / sync_eps >= 1.5 ? MDB_PASS : MDB_MISS,
          "RELU [256,1024] (1 MiB in, 1 MiB out), 2 executions in flight vs back-to-back execute; CPUs got %.2f of %d",
          cpu_got, mdb_cpus());
  rc = 0;
done:
  free(vs);
  free(va);
  req_close(&s);
  req_close(&b1);
  req_close(&b2);
  mdb_env_close(&env);
  return rc;
}
