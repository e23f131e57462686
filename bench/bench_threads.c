/* bench_threads.c - benchmark 4: two threads executing on one shared input buffer against
 * one thread.
 *
 * One client, one prepared RELU [1,4] model, one token input initialized once; each thread
 * has its own output pool (an ASHMEM memfd) and its own request, and executes in a loop until
 * a time window closes. Throughput is executions per second of wall time, summed over the
 * threads; one-thread and two-thread windows alternate and each figure is the median of its
 * windows. The process CPU time of each window is read too: on a machine whose cores are
 * shared, the two-thread run may not get two cores, and the note says how many it got and the
 * executions per CPU-second of both runs (which shows whether the driver itself serializes). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

#define MAX_THREADS 2

typedef struct worker {
  mdb_env *env;
  md_handle prep;
  md_request_arg ia, oa;
  md_request_pool pools[2];
  md_request req;
  mdb_pool out;
  uint64_t count;
  long nvcsw;                /* voluntary context switches of the thread (it blocked) */
  md_status err;
  char msg[256];
  pthread_t th;
} worker;

static pthread_barrier_t start;
static atomic_int stop;

static void *worker_main(void *arg) {
  worker *w = arg;
  w->count = 0;
  w->err = MD_NONE;
  pthread_barrier_wait(&start);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    md_output_shape sh[1];
    md_status st = w->env->drv->execute(w->env->dev, w->env->client, w->prep, &w->req, sh, 1, NULL);
    if (st != MD_NONE) {
      w->err = st;
      snprintf(w->msg, sizeof w->msg, "%s", w->env->drv->last_error(w->env->dev));
      break;
    }
    w->count++;
  }
  struct rusage ru;
  w->nvcsw = getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
  return NULL;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One window of n threads: executions per second, CPUs used, and voluntary context switches
 * (a thread that blocks on a lock sleeps in futex and switches voluntarily) per 1000
 * executions. */
static int window(worker *w, int n, uint64_t ns, double *per_s, double *cpus, double *csw) {
  atomic_store(&stop, 0);
  pthread_barrier_init(&start, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++)
    if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
      mdb_fail("threads", "pthread_create failed");
      /* The started threads wait at the barrier forever otherwise; this is fatal anyway. */
      exit(1);
    }
  pthread_barrier_wait(&start);
  uint64_t t0 = mdb_now_ns(), c0 = cpu_ns();
  struct timespec d = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
  nanosleep(&d, NULL);
  atomic_store(&stop, 1);
  uint64_t total = 0;
  long sw = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(w[i].th, NULL);
    total += w[i].count;
    sw += w[i].nvcsw;
  }
  uint64_t t1 = mdb_now_ns(), c1 = cpu_ns();
  pthread_barrier_destroy(&start);
  for (int i = 0; i < n; i++)
    if (w[i].err != MD_NONE) {
      mdb_fail("threads", "thread %d of %d: execute: status %d: %s", i, n, (int)w[i].err, w[i].msg);
      return -1;
    }
  *per_s = (double)total * 1e9 / (double)(t1 - t0);
  *cpus = (double)(c1 - c0) / (double)(t1 - t0);
  *csw = total ? (double)sw * 1000.0 / (double)total : 0.0;
  return 0;
}

typedef enum mode { POOL_OUT = 0, TOKEN_OUT = 1 } mode;

/* Both configurations of one mode; a row. */
static int run_mode(mdb_env *env, md_handle prep, md_token in_tok, mode m, const mdb_opts *o) {
  const char *B = "threads";
  unsigned trials = o->quick ? 2 : 5;
  uint64_t win_ns = o->quick ? 300000000ull : 1000000000ull;
  const size_t nbytes = 4 * sizeof(float);
  worker w[MAX_THREADS];
  md_token out_tok[MAX_THREADS] = {0};
  int rc = -1;
  memset(w, 0, sizeof w);
  for (int i = 0; i < MAX_THREADS; i++) w[i].out.fd = -1;
  for (int i = 0; i < MAX_THREADS; i++) {
    if (mdb_pool_open(&w[i].out, nbytes, 0) != 0) {
      mdb_fail(B, "memfd_create failed");
      goto done;
    }
    w[i].env = env;
    w[i].prep = prep;
    w[i].ia = (md_request_arg){.pool = 0};
    w[i].pools[0] = (md_request_pool){.is_token = 1, .token = in_tok};
    if (m == POOL_OUT) {
      w[i].oa = (md_request_arg){.pool = 1, .offset = 0, .length = nbytes};
      w[i].pools[1] = (md_request_pool){.is_token = 0, .memory = w[i].out.mem};
    } else {
      md_status st;
      out_tok[i] = mdb_alloc_output(env, prep, &st);
      if (!out_tok[i]) {
        mdb_fail(B, "allocate (output role): status %d: %s", (int)st, env->drv->last_error(env->dev));
        goto done;
      }
      w[i].oa = (md_request_arg){.pool = 1};
      w[i].pools[1] = (md_request_pool){.is_token = 1, .token = out_tok[i]};
    }
    w[i].req = (md_request){.n_inputs = 1, .inputs = &w[i].ia, .n_outputs = 1, .outputs = &w[i].oa,
                            .n_pools = 2, .pools = w[i].pools};
  }
  double one[8], two[8], cpu1[8], cpu2[8], eff1[8], eff2[8], sw1[8], sw2[8];
  double warm, warm_cpu, warm_sw;
  if (window(w, 1, win_ns / 4, &warm, &warm_cpu, &warm_sw) != 0) goto done;   /* maps the pools */
  if (window(w, 2, win_ns / 4, &warm, &warm_cpu, &warm_sw) != 0) goto done;
  for (unsigned t = 0; t < trials; t++) {
    if (window(w, 1, win_ns, &one[t], &cpu1[t], &sw1[t]) != 0) goto done;
    if (window(w, 2, win_ns, &two[t], &cpu2[t], &sw2[t]) != 0) goto done;
    eff1[t] = one[t] / cpu1[t];
    eff2[t] = two[t] / cpu2[t];
  }
  for (int i = 0; i < MAX_THREADS; i++) {
    if (m == TOKEN_OUT) {
      md_status st = env->drv->copy_to(env->dev, env->client, out_tok[i], &w[i].out.mem);
      if (st != MD_NONE) {
        mdb_fail(B, "thread %d: copy_to of its output: status %d: %s", i, (int)st, env->drv->last_error(env->dev));
        goto done;
      }
    }
    const float *r = (const float *)w[i].out.map;
    if (r[0] != 0.0f || r[1] != 2.0f || r[3] != 4.0f) {
      mdb_fail(B, "thread %d: wrong result %g %g %g %g", i, (double)r[0], (double)r[1], (double)r[2], (double)r[3]);
      goto done;
    }
  }
  double m1 = mdb_median(one, trials), m2 = mdb_median(two, trials);
  double c1 = mdb_median(cpu1, trials), c2 = mdb_median(cpu2, trials), e1 = mdb_median(eff1, trials), e2 = mdb_median(eff2, trials);
  double s1 = mdb_median(sw1, trials), s2 = mdb_median(sw2, trials);
  mdb_row(m == POOL_OUT ? "exec_2threads_shared_in" : "exec_2threads_token_out", "exec/s", m2, m1, m2 / m1,
          ">= 1.8x 1 thread", m2 / m1 >= 1.8 ? MDB_PASS : MDB_MISS,
          "%s; CPUs got 1T %.2f, 2T %.2f of %d; per CPU-s 2T/1T %.2f; blocked 1T %.1f, 2T %.1f per 1K exec; %u x %.1f s",
          m == POOL_OUT ? "pool outputs" : "token outputs", c1, c2, mdb_cpus(), e2 / e1, s1, s2, trials,
          (double)win_ns / 1e9);
  rc = 0;
done:
  for (int i = 0; i < MAX_THREADS; i++) {
    if (w[i].out.fd >= 0) mdb_pool_close(&w[i].out);
    if (out_tok[i]) env->drv->free_buffer(env->dev, env->client, out_tok[i]);
  }
  return rc;
}

int mdb_bench_threads(const mdb_opts *o) {
  const char *B = "threads";
  mdb_env env;
  if (mdb_env_open(&env, B, "backend=sim") != 0) return -1;
  int rc = -1;
  mdb_pool in;
  in.fd = -1;
  md_token tok = 0;
  mdb_model mb;
  static const uint32_t dims[2] = {1, 4};
  md_handle prep = mdb_prepare(&env, B, mdb_relu_model(&mb, 2, dims));
  if (!prep) goto done;
  md_status st;
  if (mdb_pool_open(&in, 4 * sizeof(float), 0) != 0) {
    mdb_fail(B, "memfd_create failed");
    goto done;
  }
  const float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  memcpy(in.map, x, sizeof x);
  tok = mdb_alloc_input(&env, prep, &st);
  if (!tok || (st = env.drv->copy_from(env.dev, env.client, tok, &in.mem, 0, NULL)) != MD_NONE) {
    mdb_fail(B, "token input: status %d: %s", (int)st, env.drv->last_error(env.dev));
    goto done;
  }
  /* Both modes run even if the first cannot (the second avoids the device allocator). */
  rc = run_mode(&env, prep, tok, POOL_OUT, o);
  if (run_mode(&env, prep, tok, TOKEN_OUT, o) != 0) rc = -1;
done:
  if (tok) env.drv->free_buffer(env.dev, env.client, tok);
  if (in.fd >= 0) mdb_pool_close(&in);
  mdb_env_close(&env);
  return rc;
}
