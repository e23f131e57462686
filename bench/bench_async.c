/* bench_async.c - benchmark 6: execute_async on the sim's asynchronous streams.
 *
 * (a) Latency: one execute_async + wait_event of a one-operation model (RELU on [1,4], pools
 *     in and out), median wall time, beside a synchronous execute of the same request timed
 *     in the same run (target: <= 2x). Such a small execution runs in the calling thread
 *     (docs/execution.md), so its extra cost is the event.
 * (b) Throughput: a model big enough to be worth two streams, FULLY_CONNECTED [16,512] x
 *     [512,512] (4.2 M multiply-adds, about 3 ms a run here; 32 KiB in, 32 KiB out), run back
 *     to back, synchronously, against two executions kept in flight (two requests on their own
 *     pools, each issued on its own stream and finished by its waiter), executions per second,
 *     ratio against the synchronous figure (target: >= 1.5x); windows of each take turns,
 *     medians.
 * (c) The same for RELU on [256,1024] (1 MiB in, 1 MiB out, about 75 us a run), reported
 *     without a target: an execution that short pays the hand-offs (the waiter woken, the
 *     next execution issued, a device worker woken: tens of microseconds each on a virtual
 *     machine) as much as its work, so it shows what those cost. */
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

/* FULLY_CONNECTED input [batch, k] -> output [batch, units]; weights [units, k] and bias
 * [units] are constants of the model (CONSTANT_COPY), no fused activation. */
typedef struct fc_model {
  uint32_t d_in[2], d_w[2], d_b[1], d_out[2];
  md_operand operands[5];
  uint32_t op_in[4], op_out[1], m_in[1];
  md_operation op;
  md_model model;
  uint8_t *values;
} fc_model;

static const md_model *fc_build(fc_model *f, uint32_t batch, uint32_t k, uint32_t units) {
  memset(f, 0, sizeof *f);
  uint64_t wbytes = (uint64_t)units * k * 4, bbytes = (uint64_t)units * 4;
  f->values = calloc(1, wbytes + bbytes + 4);   /* weights, bias, activation 0 */
  if (!f->values) return NULL;
  float *w = (float *)f->values, *b = (float *)(f->values + wbytes);
  for (uint64_t i = 0; i < (uint64_t)units * k; i++) w[i] = (float)((int)(i % 5) - 2) * 0.125f;
  for (uint32_t i = 0; i < units; i++) b[i] = (float)(i % 3);
  f->d_in[0] = f->d_out[0] = batch;
  f->d_in[1] = f->d_w[1] = k;
  f->d_w[0] = f->d_b[0] = f->d_out[1] = units;
  f->operands[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_in, .lifetime = MD_SUBGRAPH_INPUT};
  f->operands[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_w, .lifetime = MD_CONSTANT_COPY,
                                .offset = 0, .length = wbytes};
  f->operands[2] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = f->d_b, .lifetime = MD_CONSTANT_COPY,
                                .offset = wbytes, .length = bbytes};
  f->operands[3] = (md_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = wbytes + bbytes, .length = 4};
  f->operands[4] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = f->d_out, .lifetime = MD_SUBGRAPH_OUTPUT};
  for (uint32_t i = 0; i < 4; i++) f->op_in[i] = i;
  f->op_out[0] = 4;
  f->op = (md_operation){.type = MD_OP_FULLY_CONNECTED, .n_inputs = 4, .inputs = f->op_in, .n_outputs = 1,
                         .outputs = f->op_out};
  f->model = (md_model){.n_operands = 5, .operands = f->operands, .n_operations = 1, .operations = &f->op,
                        .n_inputs = 1, .inputs = f->m_in, .n_outputs = 1, .outputs = f->op_out,
                        .operand_values = f->values, .operand_values_size = wbytes + bbytes + 4};
  return &f->model;
}

/* out = in x weights^T + bias, as fc_build's constants make it (exact in float: small integers
 * times multiples of 1/8). */
static int check_fc(const fc_model *f, const float *x, const float *y) {
  uint32_t batch = f->d_in[0], k = f->d_in[1], units = f->d_w[0];
  const float *w = (const float *)f->values, *b = (const float *)(f->values + (uint64_t)units * k * 4);
  for (uint32_t r = 0; r < batch; r++)
    for (uint32_t n = 0; n < units; n++) {
      float acc = 0.0f;
      for (uint32_t i = 0; i < k; i++) acc += x[(uint64_t)r * k + i] * w[(uint64_t)n * k + i];
      if (y[(uint64_t)r * units + n] != acc + b[n]) return -1;
    }
  return 0;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int req_open(req_set *r, size_t bytes, size_t obytes) {
  memset(r, 0, sizeof *r);
  r->in.fd = r->out.fd = -1;
  if (mdb_pool_open(&r->in, bytes, 0) || mdb_pool_open(&r->out, obytes, 0)) return -1;
  float *x = (float *)r->in.map;
  for (size_t i = 0; i < bytes / 4; i++) x[i] = (float)((int)(i % 7) - 3);
  r->ia = (md_request_arg){.pool = 0, .length = bytes};
  r->oa = (md_request_arg){.pool = 1, .length = obytes};
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

/* Windows of `per` back-to-back synchronous executions of r1 take turns with windows of two
 * executions kept in flight (r1 and r2, each restarted by the calling thread once its waiter
 * has it), so a noisy neighbour slows both alike; each figure is the median of its windows
 * (executions per second), *cpu the CPUs the async windows got. */
static int throughput(mdb_env *env, md_handle p, req_set *r1, req_set *r2, unsigned per, unsigned rounds,
                      double *sync_eps, double *async_eps, double *cpu) {
  double se[8], ae[8], ac[8];
  if (rounds > 8) rounds = 8;
  for (int w = 0; w < 3; w++)
    if (run_sync(env, p, r1)) return -1;
  for (unsigned rd = 0; rd < rounds; rd++) {
    uint64_t t0 = mdb_now_ns();
    for (unsigned i = 0; i < per; i++)
      if (run_sync(env, p, r1)) return -1;
    se[rd] = per / ((double)(mdb_now_ns() - t0) / 1e9);
    md_handle e1, e2;
    uint64_t c0 = cpu_ns();
    t0 = mdb_now_ns();
    if (start(env, p, r1, &e1) || start(env, p, r2, &e2)) return -1;
    for (unsigned i = 0; i + 2 < per; i += 2) {
      if (finish(env, e1) || start(env, p, r1, &e1)) return -1;
      if (finish(env, e2) || start(env, p, r2, &e2)) return -1;
    }
    if (finish(env, e1) || finish(env, e2)) return -1;
    uint64_t wall = mdb_now_ns() - t0;
    ae[rd] = per / ((double)wall / 1e9);
    ac[rd] = (double)(cpu_ns() - c0) / (double)wall;
  }
  *sync_eps = mdb_median(se, rounds);
  *async_eps = mdb_median(ae, rounds);
  *cpu = mdb_median(ac, rounds);
  return 0;
}

int mdb_bench_async(const mdb_opts *o) {
  const char *B = "async";
  unsigned reps = o->quick ? 2000 : 10000;
  mdb_env env;
  if (mdb_env_open(&env, B, "backend=sim") != 0) return -1;
  int rc = -1;
  mdb_model ms, mr;
  fc_model fm;
  static const uint32_t small[2] = {1, 4}, big[2] = {256, 1024};
  enum { FC_BATCH = 16, FC_K = 512, FC_UNITS = 512 };
  const size_t sb = 16, rb = 256u * 1024u * 4u, fin = FC_BATCH * FC_K * 4u, fout = FC_BATCH * FC_UNITS * 4u;
  md_handle ps = mdb_prepare(&env, B, mdb_relu_model(&ms, 2, small));
  md_handle pr = mdb_prepare(&env, B, mdb_relu_model(&mr, 2, big));
  const md_model *fmodel = fc_build(&fm, FC_BATCH, FC_K, FC_UNITS);
  md_handle pf = fmodel ? mdb_prepare(&env, B, fmodel) : 0;
  req_set s, r1, r2, f1, f2;
  req_set *all[] = {&s, &r1, &r2, &f1, &f2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    memset(all[i], 0, sizeof *all[i]);
    all[i]->in.fd = all[i]->out.fd = -1;
  }
  double *vs = malloc(reps * sizeof *vs), *va = malloc(reps * sizeof *va);
  if (!ps || !pr || !pf || !vs || !va || req_open(&s, sb, sb) || req_open(&r1, rb, rb) || req_open(&r2, rb, rb) ||
      req_open(&f1, fin, fout) || req_open(&f2, fin, fout)) {
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

  /* (b) throughput of a model worth two streams */
  unsigned rounds = o->quick ? 3 : 7;
  double sync_eps, async_eps, cpu_got;
  if (throughput(&env, pf, &f1, &f2, o->quick ? 8 : 24, rounds, &sync_eps, &async_eps, &cpu_got)) goto done;
  if (check_fc(&fm, (const float *)f1.in.map, (const float *)f1.out.map) ||
      check_fc(&fm, (const float *)f2.in.map, (const float *)f2.out.map)) {
    mdb_fail(B, "wrong FULLY_CONNECTED result");
    goto done;
  }
  mdb_row("async_throughput_2_streams", "exec/s", async_eps, sync_eps, async_eps / sync_eps, ">= 1.5x sync",
          async_eps / sync_eps >= 1.5 ? MDB_PASS : MDB_MISS,
          "FULLY_CONNECTED [16,512]x[512,512] (4.2 M multiply-adds, 32 KiB in, 32 KiB out), 2 executions in "
          "flight vs back-to-back execute; CPUs got %.2f of %d", cpu_got, mdb_cpus());

  /* (c) the same for an execution as short as its hand-offs */
  if (throughput(&env, pr, &r1, &r2, 40, rounds, &sync_eps, &async_eps, &cpu_got)) goto done;
  if (check_relu(&r1, rb) || check_relu(&r2, rb)) {
    mdb_fail(B, "wrong RELU result (big)");
    goto done;
  }
  mdb_row("async_throughput_2_streams_short", "exec/s", async_eps, sync_eps, async_eps / sync_eps, "(no target)",
          MDB_INFO,
          "RELU [256,1024] (1 MiB in, 1 MiB out, ~75 us), 2 executions in flight vs back-to-back execute: "
          "bound by the hand-offs; CPUs got %.2f of %d", cpu_got, mdb_cpus());
  rc = 0;
done:
  free(vs);
  free(va);
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) req_close(all[i]);
  free(fm.values);
  mdb_env_close(&env);
  return rc;
}
