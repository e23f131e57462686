/* fz_run.c - the harness core: one program run against a driver (fz_run.h). Each call's handles
 * are resolved to the values the driver issued (with the program's forgeries applied), its
 * memories are made (memfds reused from run to run, truncated and refilled: fz_run_mem.c), the
 * state model says what SPEC allows, the driver is called, and what it returned is judged: its
 * status, its shapes and timing (SPEC 4), its leak report (SPEC 5, 8.10), the bytes a copy_to
 * wrote (fz_run_call.c), the values an execution computed (fz_run_value.c). A concurrent block
 * runs its lanes on threads (fz_run_lanes.c). This file: the runner, its device, findings, and
 * the run from the device's open to its reset. */
#include "fz_run_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "md/config.h"

/* ---- the runner ----------------------------------------------------------------------------- */

void mdc_fz_runner_strict(fz_runner *r, int strict) { r->strict = strict; }

fz_runner *mdc_fz_runner_new(const md_driver *drv, const char *config, mdc_fz_target t) {
  md_config cfg;
  char err[256];
  if (md_config_parse(config, &cfg, err, sizeof err) != MD_NONE) return NULL;
  fz_runner *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  for (unsigned i = 0; i <= FZ_MAX_LANES; i++)
    if (!(r->scratch[i] = malloc(2 * FZ_MAX_POOL_BYTES))) {
      for (unsigned j = 0; j < i; j++) free(r->scratch[j]);
      free(r);
      return NULL;
    }
  r->drv = drv;
  r->target = t;
  /* The run's keys: the caller's, less seed and mem_limit (each program sets its own). */
  cfg.given &= ~((1u << MD_CONFIG_SEED) | (1u << MD_CONFIG_MEM_LIMIT));
  cfg.has_seed = 0;
  cfg.mem_limit = 0;
  if (md_config_format(&cfg, r->config, sizeof r->config) >= sizeof r->config - 64) {
    for (unsigned i = 0; i <= FZ_MAX_LANES; i++) free(r->scratch[i]);
    free(r);
    return NULL;
  }
  for (unsigned i = 0; i < FZ_MAX_SLOTS; i++) r->slots[i].fd = -1;
  r->pipe_fds[0] = r->pipe_fds[1] = -1;
  struct rlimit rl;
  r->closed_fd = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT_MAX
                     ? (int)rl.rlim_cur : 1 << 20;
  pthread_mutex_init(&r->f_lock, NULL);
  pthread_mutex_init(&r->fill_lock, NULL);
  pthread_mutex_init(&r->mem_lock, NULL);
  atomic_store(&r->current, -1);
  /* tokens and shapes open a device per run by default: on a kept device their runs take paths
   * of the driver (its handle table's slots, messages about released values) that depend on
   * earlier runs, and AFL++ measured them 84-86 % stable, under the 90 % they need
   * (docs/fuzzing.md). $MDC_FUZZ_FRESH_DEVICE=1 or 0 chooses for any target. */
  const char *fresh = getenv("MDC_FUZZ_FRESH_DEVICE");
  r->fresh_each = fresh && *fresh ? strcmp(fresh, "0") != 0 : t != FZ_CONCURRENCY;
  return r;
}

void mdc_fz_runner_close_device(fz_runner *r) {
  if (!r || !r->dev) return;
  r->drv->close_device(r->dev);
  r->dev = NULL;
}

void mdc_fz_runner_fresh_device(fz_runner *r, int fresh) { r->fresh_each = fresh; }

int mdc_fz_runner_has_device(const fz_runner *r) { return r && r->dev != NULL; }

void mdc_fz_runner_drop_memories(fz_runner *r) {
  if (!r) return;
  for (unsigned i = 0; i < FZ_MAX_SLOTS; i++)
    if (r->slots[i].fd >= 0) {
      close(r->slots[i].fd);
      r->slots[i].fd = -1;
      r->slots[i].size = 0;
    }
  r->n_shared = 0;
}

void mdc_fz_runner_free(fz_runner *r) {
  if (!r) return;
  mdc_fz_runner_close_device(r);
  mdc_fz_runner_drop_memories(r);
  for (int i = 0; i < 2; i++)
    if (r->pipe_fds[i] >= 0) close(r->pipe_fds[i]);
  pthread_mutex_destroy(&r->f_lock);
  pthread_mutex_destroy(&r->fill_lock);
  pthread_mutex_destroy(&r->mem_lock);
  for (unsigned i = 0; i < 8; i++) free(r->fill[i].bytes);
  for (unsigned i = 0; i <= FZ_MAX_LANES; i++) free(r->scratch[i]);
  free(r);
}

uint64_t mdc_fz_runner_mem_limit(const fz_runner *r) {
  (void)r;
  return FZ_MEM_LIMIT;
}

int mdc_fz_runner_current(const fz_runner *r, const char **op) {
  int c = atomic_load(&((fz_runner *)r)->current);
  if (op) *op = c >= 0 && r->p && c < r->p->n_calls ? mdc_calls[r->p->calls[c].call].name : "";
  return c;
}

/* ---- findings ------------------------------------------------------------------------------- */

static uint32_t fnv_nodigits(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++)
    if (*s < '0' || *s > '9') h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

const char *mdc_fz__sname(md_status s) {
  static const char *const n[] = {"NONE", "DEVICE_UNAVAILABLE", "GENERAL_FAILURE", "OUTPUT_INSUFFICIENT_SIZE",
                                  "INVALID_ARGUMENT", "MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT",
                                  "RESOURCE_EXHAUSTED_TRANSIENT", "RESOURCE_EXHAUSTED_PERSISTENT"};
  return (unsigned)s <= 8 ? n[s] : s == MD_DEAD_OBJECT ? "DEAD_OBJECT" : "(not a status)";
}

/* The first finding of the run wins; the run stops at the end of the current call. */
void mdc_fz__finding(fz_runner *r, int call, const char *what, const char *rule, const char *fmt, ...) {
  pthread_mutex_lock(&r->f_lock);
  if (!r->f->found) {
    fz_finding *f = r->f;
    f->found = 1;
    f->call = call;
    const char *op = call >= 0 ? mdc_calls[r->p->calls[call].call].name : "run";
    snprintf(f->signature, sizeof f->signature, "oracle:%s:%s:%08x", op, what, fnv_nodigits(rule ? rule : ""));
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *dm = r->drv->last_error(r->dev);
    snprintf(f->message, sizeof f->message, "call %d (%s): %s%s%s [driver said: %.120s]", call, op, msg,
             rule && *rule ? "; rule: " : "", rule ? rule : "", dm ? dm : "");
  }
  pthread_mutex_unlock(&r->f_lock);
  atomic_store(&r->stop, 1);
}

/* ---- the run -------------------------------------------------------------------------------- */

/* Puts the device back to holding nothing, through the ABI only: waits for every event the
 * program made (so no execution is in flight and holds memory), then closes every client it
 * opened (close_client releases all a client holds, SPEC 5). Statuses of objects the program
 * already consumed or closed (INVALID_ARGUMENT) are expected; -1 when the device cannot be
 * trusted to be idle and empty: a client the model says is live (or may be) would not close,
 * or an execution nobody can wait for any more may still run (its client was closed: SPEC 4
 * lets it finish on its own), writing to pools whose memfds the next run reuses and resizes
 * (a SIGBUS in the driver's worker, or another run's bytes, some runs later). */
static int reset_device(fz_runner *r, const mdc_fz_prog *p) {
  const md_driver *d = r->drv;
  md_output_shape sh[FZ_MAX_ARGS];
  md_timing tm;
  int rc = 0;
  for (unsigned o = 0; o < p->n_objs && o < FZ_MAX_OBJS; o++)
    if (p->objs[o].kind == MDC_OBJ_EVENT && r->vals[o] && !atomic_load_explicit(&r->settled[o], memory_order_relaxed)) {
      md_status st = d->wait_event(r->dev, r->ev_client[o], r->vals[o], UINT64_MAX, sh, FZ_MAX_ARGS, &tm);
      if (st == MD_INVALID_ARGUMENT) rc = -1;
    }
  for (unsigned o = 0; o < p->n_objs && o < FZ_MAX_OBJS; o++) {
    if (p->objs[o].kind != MDC_OBJ_CLIENT || !r->vals[o]) continue;
    md_status st = d->close_client(r->dev, r->vals[o], NULL);
    if (st != MD_NONE && o < r->st.n && r->st.o[o].live != FZ_DEAD) rc = -1;
  }
  return rc;
}

int mdc_fz_run(fz_runner *r, const mdc_fz_prog *p, fz_outcome *outs, fz_finding *f, char *err, size_t errlen) {
  fz_finding none;
  if (!f) f = &none;
  memset(f, 0, sizeof *f);
  f->call = -1;
  r->p = p;
  r->f = f;
  r->outs = outs ? outs : r->own;
  for (unsigned i = 0; i < p->n_calls; i++) r->outs[i].ran = 0;
  memset(r->vals, 0, sizeof r->vals);
  for (unsigned o = 0; o < FZ_MAX_OBJS; o++) atomic_store_explicit(&r->settled[o], 0, memory_order_relaxed);
  r->used = 0;
  r->n_shared = 0;
  r->run_no++;
  atomic_store(&r->stop, 0);
  /* The device of the last run serves this one. For concurrency the program's seed orders the
   * simulator's asynchronous work (the schedule is part of the input): a run with another seed
   * gets a new device. The other targets' devices have seed 0 whatever the program says: a
   * device opened again whenever the seed changed would make the first run of each input take
   * the open's paths and the others not (AFL++ counts them unstable). */
  uint32_t seed = r->target == FZ_CONCURRENCY ? p->seed : 0;
  /* A stall's fault plan counts the device's executions from its open: such a run gets a device
   * of its own (opened here, closed at its end). */
  if (r->dev && (r->fresh_each || r->dev_seed != seed || p->stall)) mdc_fz_runner_close_device(r);
  if (!r->dev) {
    char config[640];
    snprintf(config, sizeof config, "%s%sseed=%u;mem_limit=%llu", r->config, r->config[0] ? ";" : "",
             r->fresh_each ? p->seed : seed, (unsigned long long)FZ_MEM_LIMIT);
    md_status st = MD_GENERAL_FAILURE;
    if (p->stall) {
      /* a driver without the simulator's fault plans runs the program without its stall */
      size_t len = strlen(config);
      snprintf(config + len, sizeof config - len, ";faults=stall@%u", p->stall);
      st = r->drv->open_device(config, &r->dev);
      if (st != MD_NONE) config[len] = 0;
    }
    if (st != MD_NONE) st = r->drv->open_device(config, &r->dev);
    if (st != MD_NONE || !r->dev) {
      snprintf(err, errlen, "open_device(\"%s\") returned %s: %s", config, mdc_fz__sname(st), r->drv->last_error(NULL));
      r->dev = NULL;
      r->p = NULL;
      return -1;
    }
    r->dev_seed = seed;
  }
  mdc_fz_state_init(&r->st, FZ_MEM_LIMIT);
  r->st.strict = (uint8_t)r->strict;
  for (unsigned i = 0; i < p->n_calls && !atomic_load(&r->stop);) {
    const fz_call *k = &p->calls[i];
    if (k->block && r->target == FZ_CONCURRENCY) {
      const fz_block *b = &p->blocks[k->block - 1];
      mdc_fz__run_block(r, b);
      i = b->end;
      continue;
    }
    mdc_fz__run_call(r, i, &r->st, r->scratch[0]);
    i++;
  }
  atomic_store(&r->current, -1);
  /* After a finding the driver's state is suspect: the next run gets a new device. */
  if (f->found || r->fresh_each || p->stall || reset_device(r, p)) mdc_fz_runner_close_device(r);
  r->p = NULL;
  return 0;
}
