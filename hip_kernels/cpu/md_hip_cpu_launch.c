/* md_hip_cpu_launch.c - the CPU execution layer's launches (see md_hip_cpu.h): checked at the
 * call, logged, and queued on a stream, whose thread runs them (md_hip_cpu_exec.c). */
#include "md_hip_cpu_rt_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- launches ---- */

/* Thread-safe (see md_hip_cpu.h). Checks, logs and queues a launch; the error, if any, is the
 * calling thread's last error; ctx is destroyed once run or refused. */
void md__hipcpu_launch(const char *name, const uint32_t grid[3], const uint32_t block[3], size_t shmem,
                       hipStream_t s, void (*body)(void *), void (*destroy)(void *), void *ctx) {
  hipError_t e = enter(MD_HIPCPU_LAUNCH);
  const uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (e == hipSuccess && !body) e = rec(hipErrorLaunchOutOfResources); /* no memory for the arguments */
  if (e == hipSuccess &&
      (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > INT32_MAX || grid[1] > 65535 ||
       grid[2] > 65535 || threads == 0 || threads > 1024 || block[0] > 1024 || block[1] > 1024 ||
       block[2] > 64 || shmem > 48u * 1024))
    e = rec(hipErrorInvalidConfiguration);
  if (e == hipSuccess && !(s = md__hipcpu_stream_of(s, &e))) rec(e);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  md_hipcpu_launch *l = &md__hipcpu_g.log[md__hipcpu_g.log_next];
  md__hipcpu_g.log_next = (md__hipcpu_g.log_next + 1) % LOG_LEN;
  if (md__hipcpu_g.log_n < LOG_LEN) md__hipcpu_g.log_n++;
  snprintf(l->kernel, sizeof l->kernel, "%s", name);
  memcpy(l->grid, grid, sizeof l->grid);
  memcpy(l->block, block, sizeof l->block);
  const int dry = md__hipcpu_g.dry_run;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  op *o = e == hipSuccess && !dry ? calloc(1, sizeof *o) : NULL;
  if (e == hipSuccess && !dry && !o) e = rec(hipErrorLaunchOutOfResources);
  if (!o) {
    if (destroy) destroy(ctx);
    return;
  }
  atomic_fetch_add(&md__hipcpu_n_launches, 1);
  o->kind = OP_KERNEL;
  snprintf(o->u.kernel.name, sizeof o->u.kernel.name, "%s", name);
  memcpy(o->u.kernel.grid, grid, sizeof o->u.kernel.grid);
  memcpy(o->u.kernel.block, block, sizeof o->u.kernel.block);
  o->u.kernel.body = body;
  o->u.kernel.destroy = destroy;
  o->u.kernel.ctx = ctx;
  md__hipcpu_enqueue(s, o);
}

/* ---- test hooks: dry runs and the launch log ---- */

/* Thread-safe; launches already queued still run. */
void md_hipcpu_set_dry_run(int on) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  md__hipcpu_g.dry_run = on != 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
}

/* Thread-safe. Copies; the log keeps the last LOG_LEN launches of the process. */
int md_hipcpu_launches(md_hipcpu_launch *out, int max) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int n = 0;
  for (; n < max && (unsigned)n < md__hipcpu_g.log_n; n++)
    out[n] = md__hipcpu_g.log[(md__hipcpu_g.log_next + LOG_LEN - 1 - (unsigned)n) % LOG_LEN];
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return n;
}

/* Thread-safe. */
void md_hipcpu_launches_clear(void) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  md__hipcpu_g.log_n = 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
}
