/* bench_copy.c - benchmark 2: copy_from and copy_to on the sim backend at 4 KiB, 1 MiB and
 * 64 MiB, against memcpy of the same size in the same run.
 *
 * The buffer has fully known dims (a RELU [n/4] input role), so its device memory exists from
 * allocate on. The pools are ASHMEM memfds, touched by this process before timing; the driver
 * maps them once (its per-client pool cache) and reuses the mapping on every call. memcpy runs
 * between two touched malloc'd buffers of the same size. The three operations take turns in
 * short blocks (one untimed, then a few timed), so that a noisy neighbour slows all of them
 * alike and each timed sample finds its own buffers as warm as its own previous run left them
 * (at 1 MiB the caches hold them; a copy_to right after a copy_from would otherwise read a
 * hot source that memcpy does not get). Each figure is a median. Small sizes are timed in
 * groups of operations so that the clock's own cost does not count.
 *
 * A second baseline, "fstat+memcpy": one fstat of the source pool's fd, then the same memcpy.
 * A copy through a descriptor validates it with one system call (SPEC 2: the fd is checked on
 * every call), and on a virtual machine a system call costs more than its own time: measured
 * on this project's VMs, a 1 MiB memcpy right after an fstat takes 1.6-1.8 us longer than one
 * after another memcpy (the guest's kernel entry flushes the TLB, and the copy walks the page
 * tables of its 512 pages again). The ratio against it says what the driver adds beyond what
 * any validating copy pays; it is reported beside the target, not instead of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct size_case {
  size_t bytes;
  const char *label;
  unsigned rounds_full, rounds_quick;   /* rounds of the three operations */
  unsigned per_round;                   /* timed samples of each operation in a round */
  unsigned group;                       /* operations per timed sample */
} size_case;

static const size_case cases[] = {
    {4096, "4KiB", 200, 50, 5, 32},
    {1u << 20, "1MiB", 60, 15, 3, 1},
    {64u << 20, "64MiB", 10, 4, 1, 1},
};

#define barrier() __asm__ __volatile__("" ::: "memory")

#include <sys/stat.h>

enum { OP_MEMCPY = 0, OP_FROM = 1, OP_TO = 2, OP_SYS = 3, N_OPS = 4 };

typedef struct copy_ctx {
  mdb_env *env;
  md_token tok;
  mdb_pool *src, *dst;
  uint8_t *ha, *hb;
  size_t n;
} copy_ctx;

/* g operations of kind op; MD_NONE or the driver's status. */
static md_status do_op(const copy_ctx *c, int op, unsigned g) {
  md_status st = MD_NONE;
  for (unsigned k = 0; k < g && st == MD_NONE; k++) {
    if (op == OP_MEMCPY) {
      memcpy(c->hb, c->ha, c->n);
      barrier();
    } else if (op == OP_SYS) {
      struct stat sb;
      if (fstat(c->src->fd, &sb) != 0) return MD_GENERAL_FAILURE;
      memcpy(c->hb, c->ha, c->n);
      barrier();
    } else if (op == OP_FROM) {
      st = c->env->drv->copy_from(c->env->dev, c->env->client, c->tok, &c->src->mem, 0, NULL);
    } else {
      st = c->env->drv->copy_to(c->env->dev, c->env->client, c->tok, &c->dst->mem);
    }
  }
  return st;
}

static int run_size(mdb_env *env, const size_case *c, bool quick) {
  const char *B = "copy";
  size_t n = c->bytes;
  unsigned rounds = quick ? c->rounds_quick : c->rounds_full, per = c->per_round, g = c->group;
  unsigned reps = rounds * per;
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
  double *tm = calloc(reps, sizeof *tm), *tf = calloc(reps, sizeof *tf), *tt = calloc(reps, sizeof *tt),
         *ts = calloc(reps, sizeof *ts);
  int rc = -1;
  if (!tok) {
    mdb_fail(B, "allocate %s: status %d: %s", c->label, (int)st, env->drv->last_error(env->dev));
    goto out;
  }
  if (!ha || !hb || !tm || !tf || !tt || !ts || mdb_pool_open(&src, n, 0x5A) || mdb_pool_open(&dst, n, 0)) {
    mdb_fail(B, "%s: out of memory (or memfd_create failed)", c->label);
    goto out;
  }
  memset(ha, 0x5A, n);
  memset(hb, 0, n);
  copy_ctx cx = {.env = env, .tok = tok, .src = &src, .dst = &dst, .ha = ha, .hb = hb, .n = n};
  double *tv[N_OPS] = {tm, tf, tt, ts};
  static const char *const opname[N_OPS] = {"memcpy", "copy_from", "copy_to", "fstat+memcpy"};
  size_t ns = 0;
  for (unsigned r = 0; r < rounds; r++) {
    /* Each operation's block starts with an untimed one, so that every timed sample finds
     * its own two buffers as warm as its previous run left them, whichever ran before. */
    for (int op = 0; op < N_OPS; op++) {
      for (unsigned k = 0; k <= per; k++) {
        uint64_t t0 = mdb_now_ns();
        st = do_op(&cx, op, g);
        uint64_t dt = mdb_now_ns() - t0;
        if (st != MD_NONE) {
          mdb_fail(B, "%s %s: status %d: %s", opname[op], c->label, (int)st, env->drv->last_error(env->dev));
          goto out;
        }
        if (k) tv[op][ns + k - 1] = (double)dt / g;
      }
    }
    ns += per;
  }
  mdb_sink(hb[n - 1]);
  if (memcmp(dst.map, src.map, n) != 0) {
    mdb_fail(B, "%s: copy_to did not return what copy_from wrote", c->label);
    goto out;
  }
  double gm = (double)n / mdb_median(tm, reps), gf = (double)n / mdb_median(tf, reps),
         gt = (double)n / mdb_median(tt, reps), gs = (double)n / mdb_median(ts, reps);   /* bytes per ns = GB/s */
  bool big = n >= (1u << 20);
  const char *target = big ? ">= 0.9x memcpy" : "(>= 1 MiB only)";
  char name[40];
  snprintf(name, sizeof name, "copy_from@%s", c->label);
  mdb_row(name, "GB/s", gf, gm, gf / gm, target, !big ? MDB_INFO : gf / gm >= 0.9 ? MDB_PASS : MDB_MISS,
          "baseline: memcpy; median of %u, %.1f us/op", reps, (double)n / gf / 1e3);
  snprintf(name, sizeof name, "copy_to@%s", c->label);
  mdb_row(name, "GB/s", gt, gm, gt / gm, target, !big ? MDB_INFO : gt / gm >= 0.9 ? MDB_PASS : MDB_MISS,
          "baseline: memcpy; median of %u, %.1f us/op", reps, (double)n / gt / 1e3);
  if (big) {
    snprintf(name, sizeof name, "copy_from@%s_vs_fstat", c->label);
    mdb_row(name, "GB/s", gf, gs, gf / gs, "(diagnostic)", MDB_INFO,
            "baseline: one fstat then memcpy, %.1f us/op (memcpy alone %.1f us)", (double)n / gs / 1e3,
            (double)n / gm / 1e3);
    snprintf(name, sizeof name, "copy_to@%s_vs_fstat", c->label);
    mdb_row(name, "GB/s", gt, gs, gt / gs, "(diagnostic)", MDB_INFO, "baseline: one fstat then memcpy");
  }
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
  free(ts);
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
