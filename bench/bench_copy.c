/* bench_copy.c - benchmark 2: copy_from and copy_to on the sim backend at 4 KiB, 1 MiB and
 * 64 MiB, against memcpy of the same size in the same run.
 *
 * The buffer has fully known dims (a RELU [n/4] input role), so its device memory exists from
 * allocate on. The pools are ASHMEM memfds, touched by this process before timing; the driver
 * maps them once (its per-client pool cache) and reuses the mapping on every call. memcpy runs
 * between two touched malloc'd buffers of the same size. The three operations are interleaved
 * repetition by repetition, so that a noisy neighbour slows all of them alike; each figure is
 * a median. Small sizes are timed in groups of operations so that the clock's own cost does
 * not count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct size_case {
  size_t bytes;
  const char *label;
  unsigned reps_full, reps_quick, group;
} size_case;

static const size_case cases[] = {
    {4096, "4KiB", 2000, 400, 32},
    {1u << 20, "1MiB", 200, 40, 1},
    {64u << 20, "64MiB", 15, 5, 1},
};

#define barrier() __asm__ __volatile__("" ::: "memory")

static int run_size(mdb_env *env, const size_case *c, bool quick) {
  const char *B = "copy";
  size_t n = c->bytes;
  unsigned reps = quick ? c->reps_quick : c->reps_full, g = c->group;
  mdb_model mb;
  uint32_t dims[1] = {(uint32_t)(n / sizeof(float))};
  md_handle prep = mdb_prepare(env, B, mdb_relu_model(&mb, 1, dims));
  if (!prep) return -1;
  md_status st;
  md_token tok = mdb_alloc_input(env, prep, &st);
  mdb_pool src, dst;
  src.fd = dst.fd = -1;
  src.map = dst.map = NULL;
  uint8_t *ha = malloc(n), *hb = malloc(n);
  double *tm = calloc(reps, sizeof *tm), *tf = calloc(reps, sizeof *tf), *tt = calloc(reps, sizeof *tt);
  int rc = -1;
  if (!tok) {
    mdb_fail(B, "allocate %s: status %d: %s", c->label, (int)st, env->drv->last_error(env->dev));
    goto out;
  }
  if (!ha || !hb || !tm || !tf || !tt || mdb_pool_open(&src, n, 0x5A) || mdb_pool_open(&dst, n, 0)) {
    mdb_fail(B, "%s: out of memory (or memfd_create failed)", c->label);
    goto out;
  }
  memset(ha, 0x5A, n);
  memset(hb, 0, n);
  for (unsigned r = 0; r < reps + 2; r++) {
    uint64_t t0 = mdb_now_ns();
    for (unsigned k = 0; k < g; k++) {
      memcpy(hb, ha, n);
      barrier();
    }
    uint64_t t1 = mdb_now_ns();
    for (unsigned k = 0; k < g && (st = env->drv->copy_from(env->dev, env->client, tok, &src.mem, 0, NULL)) == MD_NONE; k++) {}
    uint64_t t2 = mdb_now_ns();
    if (st != MD_NONE) {
      mdb_fail(B, "copy_from %s: status %d: %s", c->label, (int)st, env->drv->last_error(env->dev));
      goto out;
    }
    for (unsigned k = 0; k < g && (st = env->drv->copy_to(env->dev, env->client, tok, &dst.mem)) == MD_NONE; k++) {}
    uint64_t t3 = mdb_now_ns();
    if (st != MD_NONE) {
      mdb_fail(B, "copy_to %s: status %d: %s", c->label, (int)st, env->drv->last_error(env->dev));
      goto out;
    }
    if (r < 2) continue;   /* warm-up: first mapping of the pools, first touch */
    tm[r - 2] = (double)(t1 - t0) / g;
    tf[r - 2] = (double)(t2 - t1) / g;
    tt[r - 2] = (double)(t3 - t2) / g;
  }
  mdb_sink(hb[n - 1]);
  if (memcmp(dst.map, src.map, n) != 0) {
    mdb_fail(B, "%s: copy_to did not return what copy_from wrote", c->label);
    goto out;
  }
  double gm = (double)n / mdb_median(tm, reps), gf = (double)n / mdb_median(tf, reps),
         gt = (double)n / mdb_median(tt, reps);   /* bytes per ns = GB/s */
  bool big = n >= (1u << 20);
  const char *target = big ? ">= 0.8x memcpy" : "(>= 1 MiB only)";
  char name[40];
  snprintf(name, sizeof name, "copy_from@%s", c->label);
  mdb_row(name, "GB/s", gf, gm, gf / gm, target, !big ? MDB_INFO : gf / gm >= 0.8 ? MDB_PASS : MDB_MISS,
          "baseline: memcpy; median of %u, %.1f us/op", reps, (double)n / gf / 1e3);
  snprintf(name, sizeof name, "copy_to@%s", c->label);
  mdb_row(name, "GB/s", gt, gm, gt / gm, target, !big ? MDB_INFO : gt / gm >= 0.8 ? MDB_PASS : MDB_MISS,
          "baseline: memcpy; median of %u, %.1f us/op", reps, (double)n / gt / 1e3);
  rc = 0;
out:
  if (tok) env->drv->free_buffer(env->dev, env->client, tok);
  env->drv->release_prepared_model(env->dev, env->client, prep);
  if (src.fd >= 0) mdb_pool_close(&src);
  if (dst.fd >= 0) mdb_pool_close(&dst);
  free(ha);
  free(hb);
  free(tm);
  free(tf);
  free(tt);
  return rc;
}

int mdb_bench_copy(const mdb_opts *o) {
  mdb_env env;
  if (mdb_env_open(&env, "copy", "backend=sim;mem_limit=2G") != 0) return -1;
  int rc = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (run_size(&env, &cases[i], o->quick) != 0) rc = -1;
  mdb_env_close(&env);
  return rc;
}
