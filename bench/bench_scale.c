/* bench_scale.c - benchmark 7: the execute overhead of the fast paths (registered pools in and
 * out; tokens in and out) as the device holds 1, 1K and 1M live buffers, and as 1, 16 and 256
 * clients are open on it. Target: no figure worse than 1.5x its smallest population's.
 *
 * The buffers are the shared population's (bench_population.c), so the million are allocated
 * once per md_bench run: the token benchmark calls mdb_scale_buffers after each of its growth
 * steps (so its rows and these see the same states), and when it did not run, the scale
 * benchmark steps the population itself. The clients are opened on a device of their own, each
 * with a prepared model, a registered pool and a buffer, so that the handle table and the
 * reference caches hold objects of many clients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define TARGET_RATIO 1.5

/* One client's fast-path requests on a RELU [1,4]: registered pools, then tokens. */
typedef struct fast {
  mdb_env *env;
  md_handle prep, rin, rout;
  md_token tin, tout;
  mdb_pool in, out;
  md_request_arg ia, oa, ka, ko;
  md_request_pool rp[2], kp[2];
  md_request rreq, kreq;
} fast;

static void fast_close(fast *f) {
  mdb_env *e = f->env;
  if (!e || !e->dev) return;
  if (f->rin) e->drv->unregister_memory(e->dev, e->client, f->rin);
  if (f->rout) e->drv->unregister_memory(e->dev, e->client, f->rout);
  if (f->tin) e->drv->free_buffer(e->dev, e->client, f->tin);
  if (f->tout) e->drv->free_buffer(e->dev, e->client, f->tout);
  if (f->prep) e->drv->release_prepared_model(e->dev, e->client, f->prep);
  if (f->in.fd >= 0) mdb_pool_close(&f->in);
  if (f->out.fd >= 0) mdb_pool_close(&f->out);
  memset(f, 0, sizeof *f);
  f->in.fd = f->out.fd = -1;
}

static int fast_open(fast *f, mdb_env *env) {
  const char *B = "scale";
  memset(f, 0, sizeof *f);
  f->in.fd = f->out.fd = -1;
  f->env = env;
  static const uint32_t dims[2] = {1, 4};
  mdb_model mb;
  if (!(f->prep = mdb_prepare(env, B, mdb_relu_model(&mb, 2, dims)))) return -1;
  if (mdb_pool_open(&f->in, 16, 0) || mdb_pool_open(&f->out, 16, 0)) {
    mdb_fail(B, "memfd_create failed");
    return -1;
  }
  const float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  memcpy(f->in.map, x, sizeof x);
  md_status st;
  if ((st = env->drv->register_memory(env->dev, env->client, &f->in.mem, &f->rin)) != MD_NONE ||
      (st = env->drv->register_memory(env->dev, env->client, &f->out.mem, &f->rout)) != MD_NONE) {
    mdb_fail(B, "register_memory: status %d: %s", (int)st, env->drv->last_error(env->dev));
    return -1;
  }
  f->tin = mdb_alloc_input(env, f->prep, &st);
  if (f->tin) f->tout = mdb_alloc_output(env, f->prep, &st);
  if (!f->tin || !f->tout || (st = env->drv->copy_from(env->dev, env->client, f->tin, &f->in.mem, 0, NULL)) != MD_NONE) {
    mdb_fail(B, "tokens: status %d: %s", (int)st, env->drv->last_error(env->dev));
    return -1;
  }
  f->ia = (md_request_arg){.pool = 0, .length = 16};
  f->oa = (md_request_arg){.pool = 1, .length = 16};
  f->rp[0] = (md_request_pool){.is_token = 2, .token = f->rin};
  f->rp[1] = (md_request_pool){.is_token = 2, .token = f->rout};
  f->rreq = (md_request){.n_inputs = 1, .inputs = &f->ia, .n_outputs = 1, .outputs = &f->oa, .n_pools = 2, .pools = f->rp};
  f->ka = (md_request_arg){.pool = 0};
  f->ko = (md_request_arg){.pool = 1};
  f->kp[0] = (md_request_pool){.is_token = 1, .token = f->tin};
  f->kp[1] = (md_request_pool){.is_token = 1, .token = f->tout};
  f->kreq = (md_request){.n_inputs = 1, .inputs = &f->ka, .n_outputs = 1, .outputs = &f->ko, .n_pools = 2, .pools = f->kp};
  return 0;
}

/* Median of (wall - on_device_ns) over reps executions of req (after 200 warm-up ones). */
static int overhead(fast *f, const md_request *req, unsigned reps, double *out) {
  double *v = malloc(reps * sizeof *v);
  if (!v) {
    mdb_fail("scale", "out of memory");
    return -1;
  }
  for (unsigned r = 0; r < reps + 200; r++) {
    md_output_shape sh[1];
    md_timing tm;
    uint64_t t0 = mdb_now_ns();
    md_status st = f->env->drv->execute(f->env->dev, f->env->client, f->prep, req, sh, 1, &tm);
    uint64_t dt = mdb_now_ns() - t0;
    if (st != MD_NONE || tm.on_device_ns > dt) {
      mdb_fail("scale", "execute: status %d: %s", (int)st, f->env->drv->last_error(f->env->dev));
      free(v);
      return -1;
    }
    if (r >= 200) v[r - 200] = (double)(dt - tm.on_device_ns);
  }
  *out = mdb_median(v, reps);
  free(v);
  return 0;
}

/* A row of a population series: the first is the baseline of the others. */
static void series_row(const char *name, double ns, double *base, const char *what) {
  if (isnan(*base)) {
    *base = ns;
    mdb_row(name, "ns", ns, NAN, NAN, "(baseline of the series)", MDB_INFO, "%s", what);
    return;
  }
  double ratio = ns / *base;
  mdb_row(name, "ns", ns, *base, ratio, "<= 1.5x the smallest", ratio <= TARGET_RATIO ? MDB_PASS : MDB_MISS, "%s", what);
}

/* ---- live buffers: called at 1, 1K and 1M by the token benchmark (or by mdb_bench_scale) ---- */

static fast pop_fast;
static bool pop_fast_open, buffers_done;
static double base_reg = NAN, base_tok = NAN;
static unsigned scale_reps = 20000;

int mdb_scale_buffers(mdb_pop *p, size_t n) {
  if (!pop_fast_open) {
    if (fast_open(&pop_fast, &p->env) != 0) return -1;
    pop_fast_open = true;
  }
  const char *lbl = n >= (1u << 20) ? "1M" : n >= 1024 ? "1K" : "1";
  char name[48], what[128];
  double reg, tok;
  if (overhead(&pop_fast, &pop_fast.rreq, scale_reps, &reg) || overhead(&pop_fast, &pop_fast.kreq, scale_reps, &tok))
    return -1;
  snprintf(what, sizeof what, "registered pools in/out, RELU [1,4]; %zu live buffers", p->n);
  snprintf(name, sizeof name, "scale_registered@%s_buffers", lbl);
  series_row(name, reg, &base_reg, what);
  snprintf(what, sizeof what, "tokens in/out, RELU [1,4]; %zu live buffers", p->n);
  snprintf(name, sizeof name, "scale_tokens@%s_buffers", lbl);
  series_row(name, tok, &base_tok, what);
  if (n >= (1u << 20)) buffers_done = true;
  return 0;
}

void mdb_scale_set_quick(bool quick) { scale_reps = quick ? 3000 : 20000; }

/* ---- clients ---- */

static int scale_clients(const mdb_opts *o) {
  const char *B = "scale";
  mdb_env env;
  if (mdb_env_open(&env, B, "backend=sim") != 0) return -1;
  static const unsigned counts[] = {1, 16, 256};
  mdb_env *others = calloc(256, sizeof *others);
  fast *ofast = calloc(256, sizeof *ofast);
  fast f;
  int rc = -1;
  unsigned open = 0;
  double base = NAN;
  f.env = NULL;
  if (!others || !ofast) {
    mdb_fail(B, "out of memory");
    goto done;
  }
  if (fast_open(&f, &env) != 0) goto done;
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    /* Clients besides the measured one, each with a prepared model, two registered pools and
     * two buffers in use once (their handles in the table, their references cached). */
    for (; open + 1 < counts[c]; open++) {
      others[open] = env;
      if (env.drv->open_client(env.dev, &others[open].client) != MD_NONE) {
        mdb_fail(B, "open_client #%u: %s", open, env.drv->last_error(env.dev));
        goto done;
      }
      if (fast_open(&ofast[open], &others[open]) != 0) goto done;
      md_output_shape sh[1];
      if (env.drv->execute(env.dev, others[open].client, ofast[open].prep, &ofast[open].rreq, sh, 1, NULL) != MD_NONE) {
        mdb_fail(B, "execute in client #%u: %s", open, env.drv->last_error(env.dev));
        goto done;
      }
    }
    double ns;
    if (overhead(&f, &f.rreq, o->quick ? 3000 : 20000, &ns) != 0) goto done;
    char name[48], what[96];
    snprintf(name, sizeof name, "scale_registered@%u_clients", counts[c]);
    snprintf(what, sizeof what, "registered pools in/out, RELU [1,4]; %u clients open", counts[c]);
    series_row(name, ns, &base, what);
  }
  rc = 0;
done:
  for (unsigned i = 0; ofast && i < open; i++) {
    fast_close(&ofast[i]);
    env.drv->close_client(env.dev, others[i].client, NULL);
  }
  if (f.env) fast_close(&f);
  free(others);
  free(ofast);
  mdb_env_close(&env);
  return rc;
}

int mdb_bench_scale(const mdb_opts *o) {
  mdb_scale_set_quick(o->quick);
  int rc = 0;
  if (!buffers_done) {
    /* The token benchmark did not step the population: step it here. */
    mdb_pop *p = mdb_pop_get("scale");
    if (!p) return -1;
    static const size_t sizes[] = {1, 1024, 1u << 20};
    for (int i = 0; i < 3 && rc == 0; i++) {
      if (p->n > sizes[i] && i < 2) continue;   /* already past this state */
      rc = mdb_pop_grow(p, "scale", sizes[i]) != 0 || mdb_scale_buffers(p, sizes[i]) != 0 ? -1 : 0;
    }
  }
  if (scale_clients(o) != 0) rc = -1;
  return rc;
}

void mdb_scale_close(void) {
  if (pop_fast_open) fast_close(&pop_fast);
  pop_fast_open = false;
}
