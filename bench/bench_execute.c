/* bench_execute.c - benchmark 3: what execute costs beyond its kernel, for a one-operation
 * model (RELU on TENSOR_FLOAT32 [1,4]) on the sim backend, and the system calls it makes.
 *
 * Each execute is timed alone (wall clock around the md_driver call); its kernel time is the
 * on_device_ns the driver reports (its clock around the backend's launch). The figure is the
 * median of (wall - on_device_ns). A stricter figure subtracts instead the median time of a
 * direct call of the registered RELU kernel (no runtime, no backend launch), so that the sim
 * backend's launch machinery counts as overhead too. Four request shapes: both arguments on
 * ASHMEM descriptor pools (the driver copies the input to device memory and the output back;
 * each pool is checked, one fstat, per call), the input as an initialized token, both on
 * registered pools (SPEC 9), both on tokens. The system calls of 1000 executions of each shape
 * are then counted in a forked child under a seccomp filter (syscount.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "bench.h"
#include "md/kernel.h"
#include "syscount.h"
#include "kernels/kernel_ctx.h"

#define TARGET_DESC_NS 3000.0   /* descriptor pools: validated (one fstat each) per call */
#define TARGET_FAST_NS 1500.0   /* registered pools and tokens: no system call */

static const uint32_t DIMS[2] = {1, 4};
#define NBYTES (4 * sizeof(float))

/* Median ns of fstat on the two pools' fds, called as the descriptor path does (one each), in
 * this run: the system calls' own share of the descriptor figure, which on a virtual machine
 * is most of it. */
static double fstat_pair_ns(int fd_a, int fd_b, unsigned reps) {
  double *v = malloc(reps * sizeof *v);
  if (!v) return NAN;
  for (unsigned i = 0; i < reps; i++) {
    struct stat sa, sb;
    uint64_t t0 = mdb_now_ns();
    int r = fstat(fd_a, &sa) | fstat(fd_b, &sb);
    v[i] = r == 0 ? (double)(mdb_now_ns() - t0) : NAN;
  }
  double m = mdb_median(v, reps);
  free(v);
  return m;
}

/* Median ns of one direct call of the RELU kernel on [1,4] host tensors. */
static int kernel_ns(double *out) {
  const md_kernel_def *k = md_kernel_find("RELU", "sim");
  if (!k) k = md_kernel_find("RELU", "host");
  if (!k) {
    mdb_fail("execute", "no RELU kernel in the registry");
    return -1;
  }
  float in[4] = {-1.0f, 2.0f, -3.0f, 4.0f}, res[4];
  md_tensor t[2];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 2; i++) {
    t[i].type = MD_TENSOR_FLOAT32;
    t[i].rank = 2;
    memcpy(t[i].dims, DIMS, sizeof DIMS);
    t[i].bytes = NBYTES;
  }
  t[0].data = in;
  t[1].data = res;
  md_kernel_ctx kctx;
  md__kctx_init(&kctx, MD__KCTX_DEFAULT_LIMIT);
  md_kernel_call call = {.struct_size = sizeof call, .platform = "host", .n_inputs = 1, .inputs = &t[0],
                         .n_outputs = 1, .outputs = &t[1], .ctx = &kctx, .user = k->user};
  enum { BATCHES = 101, PER = 1000 };
  double v[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    md_kernel_status st;
    uint64_t t0 = mdb_now_ns();
    for (int i = 0; i < PER; i++) {
      st.code = MD_NONE;
      k->run(&call, &st);
      __asm__ __volatile__("" ::: "memory");
    }
    v[b] = (double)(mdb_now_ns() - t0) / PER;
    if (st.code != MD_NONE) {
      mdb_fail("execute", "direct RELU call failed: %s", st.message);
      md__kctx_release(&kctx);
      return -1;
    }
  }
  md__kctx_release(&kctx);
  if (res[1] != 2.0f || res[0] != 0.0f) {
    mdb_fail("execute", "direct RELU call computed %g %g, expected 0 2", (double)res[0], (double)res[1]);
    return -1;
  }
  *out = mdb_median(v, BATCHES);
  return 0;
}

typedef struct exec_fig {
  double overhead, wall, dev;
} exec_fig;

/* Runs `reps` executes of req (after warm-up), medians into f. */
static int time_execute(mdb_env *env, md_handle prep, const md_request *req, unsigned reps, const char *what,
                        exec_fig *f, const float *out_map) {
  double *ov = malloc(reps * sizeof *ov), *wall = malloc(reps * sizeof *wall), *dev = malloc(reps * sizeof *dev);
  int rc = -1;
  if (!ov || !wall || !dev) {
    mdb_fail("execute", "out of memory");
    goto out;
  }
  for (unsigned r = 0; r < reps + 100; r++) {
    md_output_shape sh[1];
    md_timing tm;
    uint64_t t0 = mdb_now_ns();
    md_status st = env->drv->execute(env->dev, env->client, prep, req, sh, 1, &tm);
    uint64_t dt = mdb_now_ns() - t0;
    if (st != MD_NONE) {
      mdb_fail("execute", "%s: execute: status %d: %s", what, (int)st, env->drv->last_error(env->dev));
      goto out;
    }
    if (tm.on_device_ns == UINT64_MAX || tm.on_device_ns > dt) {
      mdb_fail("execute", "%s: timing.on_device_ns %llu is not measured or exceeds the wall time %llu ns", what,
               (unsigned long long)tm.on_device_ns, (unsigned long long)dt);
      goto out;
    }
    if (r < 100) continue;  /* warm-up */
    wall[r - 100] = (double)dt;
    dev[r - 100] = (double)tm.on_device_ns;
    ov[r - 100] = (double)(dt - tm.on_device_ns);
  }
  if (out_map && (out_map[0] != 0.0f || out_map[1] != 2.0f || out_map[3] != 4.0f)) {
    mdb_fail("execute", "%s: wrong result %g %g %g %g", what, (double)out_map[0], (double)out_map[1],
             (double)out_map[2], (double)out_map[3]);
    goto out;
  }
  f->overhead = mdb_median(ov, reps);
  f->wall = mdb_median(wall, reps);
  f->dev = mdb_median(dev, reps);
  rc = 0;
out:
  free(ov);
  free(wall);
  free(dev);
  return rc;
}

/* ---- system calls per execution (syscount.h), in a forked child ---- */

typedef struct count_case {
  mdb_env *env;
  md_handle prep;
  const md_request *req;
  unsigned n;
} count_case;

static int count_body(void *arg, char *err, size_t errlen) {
  count_case *c = arg;
  for (unsigned i = 0; i < c->n; i++) {
    md_output_shape sh[1];
    md_timing tm;
    md_status st = c->env->drv->execute(c->env->dev, c->env->client, c->prep, c->req, sh, 1, &tm);
    if (st != MD_NONE) {
      snprintf(err, errlen, "execute: status %d: %s", (int)st, c->env->drv->last_error(c->env->dev));
      return -1;
    }
  }
  return 0;
}

/* A row: system calls per execution of req (the driver is warm: the timed runs came first). */
static void syscalls_row(const char *name, mdb_env *env, md_handle prep, const md_request *req, double target,
                         const char *target_text, const char *what) {
  if (!md_syscount_supported()) {
    mdb_row(name, "calls", NAN, NAN, NAN, target_text, MDB_INFO, "%s; not counted: this build is not x86-64 "
            "without sanitizers", what);
    return;
  }
  count_case c = {.env = env, .prep = prep, .req = req, .n = 1000};
  md_syscount sc;
  char err[256], calls[256];
  if (md_syscount_run(NULL, count_body, &c, &sc, err, sizeof err) != 0) {
    mdb_fail("execute", "%s: counting system calls: %s", name, err);
    return;
  }
  md_syscount_list(&sc, calls, sizeof calls);
  double per = (double)sc.total / c.n;
  mdb_row(name, "calls", per, NAN, NAN, target_text, per <= target ? MDB_PASS : MDB_MISS,
          "%s; %llu in %u executions (seccomp count)%s", what, (unsigned long long)sc.total, c.n,
          sc.total ? calls : "");
}

int mdb_bench_execute(const mdb_opts *o) {
  const char *B = "execute";
  unsigned reps = o->quick ? 3000 : 20000;
  double kns;
  if (kernel_ns(&kns) != 0) return -1;
  mdb_env env;
  if (mdb_env_open(&env, B, "backend=sim") != 0) return -1;
  int rc = -1;
  mdb_model mb;
  md_handle prep = mdb_prepare(&env, B, mdb_relu_model(&mb, 2, DIMS));
  mdb_pool in, out;
  in.fd = out.fd = -1;
  md_token tok = 0, tout = 0;
  md_handle rin = 0, rout = 0;
  if (!prep) goto done;
  if (mdb_pool_open(&in, NBYTES, 0) || mdb_pool_open(&out, NBYTES, 0)) {
    mdb_fail(B, "memfd_create failed");
    goto done;
  }
  const float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  memcpy(in.map, x, sizeof x);

  /* Both arguments on descriptor pools (the client's cache maps them once). */
  md_request_arg ia = {.pool = 0, .offset = 0, .length = NBYTES}, oa = {.pool = 1, .offset = 0, .length = NBYTES};
  md_request_pool pools[2] = {{.is_token = 0, .memory = in.mem}, {.is_token = 0, .memory = out.mem}};
  md_request req = {.n_inputs = 1, .inputs = &ia, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = pools};
  exec_fig fp;
  if (time_execute(&env, prep, &req, reps, "pool in/out", &fp, (const float *)out.map) != 0) goto done;
  mdb_row("execute_overhead", "ns", fp.overhead, fp.dev, fp.wall / fp.dev, "<= 3000 ns",
          fp.overhead <= TARGET_DESC_NS ? MDB_PASS : MDB_MISS,
          "wall - on_device_ns; descriptor pools in/out; baseline: on_device %.0f ns; wall %.0f ns", fp.dev, fp.wall);
  double fs = fstat_pair_ns(in.fd, out.fd, reps / 4);
  mdb_row("execute_overhead_beyond_fstat", "ns", fp.overhead - fs, fs, NAN, "(diagnostic)", MDB_INFO,
          "execute_overhead less its two system calls (baseline: two fstat, timed alone in this run)");
  double strict = fp.wall - kns;
  mdb_row("execute_overhead_strict", "ns", strict, kns, fp.wall / kns, "<= 3000 ns",
          strict <= TARGET_DESC_NS ? MDB_PASS : MDB_MISS, "wall - direct RELU call (baseline); descriptor pools in/out");

  /* The input as a token (initialized once), the output on a descriptor pool. */
  md_status st;
  tok = mdb_alloc_input(&env, prep, &st);
  if (!tok || (st = env.drv->copy_from(env.dev, env.client, tok, &in.mem, 0, NULL)) != MD_NONE) {
    mdb_fail(B, "token input: status %d: %s", (int)st, env.drv->last_error(env.dev));
    goto done;
  }
  memset(out.map, 0, NBYTES);
  md_request_pool tpools[2] = {{.is_token = 1, .token = tok}, {.is_token = 0, .memory = out.mem}};
  md_request_arg ta = {.pool = 0};
  md_request treq = {.n_inputs = 1, .inputs = &ta, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = tpools};
  exec_fig ft;
  if (time_execute(&env, prep, &treq, reps, "token in", &ft, (const float *)out.map) != 0) goto done;
  mdb_row("execute_overhead_token_in", "ns", ft.overhead, ft.dev, ft.wall / ft.dev, "<= 3000 ns",
          ft.overhead <= TARGET_DESC_NS ? MDB_PASS : MDB_MISS,
          "wall - on_device_ns; token in, descriptor out; wall %.0f ns, strict %.0f ns", ft.wall, ft.wall - kns);

  /* Registered pools in and out (SPEC 9): nothing validated or mapped per call. */
  if ((st = env.drv->register_memory(env.dev, env.client, &in.mem, &rin)) != MD_NONE ||
      (st = env.drv->register_memory(env.dev, env.client, &out.mem, &rout)) != MD_NONE) {
    mdb_fail(B, "register_memory: status %d: %s", (int)st, env.drv->last_error(env.dev));
    goto done;
  }
  memset(out.map, 0, NBYTES);
  md_request_pool rpools[2] = {{.is_token = 2, .token = rin}, {.is_token = 2, .token = rout}};
  md_request rreq = {.n_inputs = 1, .inputs = &ia, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = rpools};
  exec_fig fr;
  if (time_execute(&env, prep, &rreq, reps, "registered in/out", &fr, (const float *)out.map) != 0) goto done;
  mdb_row("execute_overhead_registered", "ns", fr.overhead, kns, fr.wall / kns, "<= 1500 ns",
          fr.overhead <= TARGET_FAST_NS ? MDB_PASS : MDB_MISS,
          "wall - on_device_ns; registered pools in/out; ratio: wall / direct RELU call %.1f ns; wall %.0f ns, strict %.0f ns",
          kns, fr.wall, fr.wall - kns);

  /* Tokens in and out: device memory only. */
  tout = mdb_alloc_output(&env, prep, &st);
  if (!tout) {
    mdb_fail(B, "token output: status %d: %s", (int)st, env.drv->last_error(env.dev));
    goto done;
  }
  md_request_pool kpools[2] = {{.is_token = 1, .token = tok}, {.is_token = 1, .token = tout}};
  md_request_arg ka = {.pool = 0}, ko = {.pool = 1};
  md_request kreq = {.n_inputs = 1, .inputs = &ka, .n_outputs = 1, .outputs = &ko, .n_pools = 2, .pools = kpools};
  exec_fig fk;
  if (time_execute(&env, prep, &kreq, reps, "tokens in/out", &fk, NULL) != 0) goto done;
  mdb_row("execute_overhead_tokens", "ns", fk.overhead, kns, fk.wall / kns, "<= 1500 ns",
          fk.overhead <= TARGET_FAST_NS ? MDB_PASS : MDB_MISS,
          "wall - on_device_ns; tokens in/out; ratio: wall / direct RELU call %.1f ns; wall %.0f ns, strict %.0f ns",
          kns, fk.wall, fk.wall - kns);

  /* System calls per execution, counted. */
  syscalls_row("execute_syscalls_registered", &env, prep, &rreq, 0, "0 per execute", "registered pools in/out");
  syscalls_row("execute_syscalls_tokens", &env, prep, &kreq, 0, "0 per execute", "tokens in/out");
  syscalls_row("execute_syscalls_descriptor", &env, prep, &req, 2, "<= 1 per pool (2)", "descriptor pools in/out (cached)");
  rc = 0;
done:
  if (rin) env.drv->unregister_memory(env.dev, env.client, rin);
  if (rout) env.drv->unregister_memory(env.dev, env.client, rout);
  if (tok) env.drv->free_buffer(env.dev, env.client, tok);
  if (tout) env.drv->free_buffer(env.dev, env.client, tout);
  if (in.fd >= 0) mdb_pool_close(&in);
  if (out.fd >= 0) mdb_pool_close(&out);
  mdb_env_close(&env);
  return rc;
}
