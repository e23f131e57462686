/* backend_registry.c - the process-wide list of backends and opening one for a device. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "runtime_int.h"

#define MAX_BACKENDS 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const md_backend_ops *backends[MAX_BACKENDS];
static unsigned n_backends;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

#ifdef MD_HAVE_HIP
const md_backend_ops *md_hip_backend(void); /* hip_kernels/hip_backend.h */
#define HIP_NOT_BUILT ""
#else
/* A build without the hip backend names the switch that would bring it. */
#define HIP_NOT_BUILT " (hip: not built (MD_HIP=off))"
#endif

static md_status add(const md_backend_ops *ops) {
  if (!ops || !ops->name || ops->version != MD_BACKEND_VERSION || ops->struct_size < sizeof(md_backend_ops))
    return md__fail(MD_INVALID_ARGUMENT, "backend: ops table has an unknown version or size");
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < n_backends; i++)
    if (strcmp(backends[i]->name, ops->name) == 0) {
      pthread_mutex_unlock(&lock);
      return md__fail(MD_INVALID_ARGUMENT, "backend '%s': already registered", ops->name);
    }
  if (n_backends == MAX_BACKENDS) {
    pthread_mutex_unlock(&lock);
    return md__fail(MD_RESOURCE_EXHAUSTED_PERSISTENT, "backend '%s': registry full", ops->name);
  }
  backends[n_backends++] = ops;
  pthread_mutex_unlock(&lock);
  return MD_NONE;
}

static void register_builtins(void) {
  add(md_sim_backend());
#ifdef MD_HAVE_HIP
  add(md_hip_backend());
#endif
}

md_status md_backend_register(const md_backend_ops *ops) {
  pthread_once(&builtins_once, register_builtins);
  return add(ops);
}

const md_backend_ops *md_backend_find(const char *name) {
  pthread_once(&builtins_once, register_builtins);
  const md_backend_ops *found = NULL;
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < n_backends && !found; i++)
    if (strcmp(backends[i]->name, name) == 0) found = backends[i];
  pthread_mutex_unlock(&lock);
  return found;
}

static md_status open_one(md_device *d, const md_backend_ops *ops) {
  md_backend_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.mem_limit = d->cfg.mem_limit;
  p.seed = d->cfg.seed;
  p.has_seed = d->cfg.has_seed;
  p.latency_ns = d->cfg.latency_ns;
  p.copy_gbps = d->cfg.copy_gbps;
  p.faults = d->cfg.faults[0] ? d->cfg.faults : NULL;
  char err[256] = "";
  md_status st = ops->open(&p, &d->bk, err, sizeof err);
  if (st != MD_NONE) return md__fail(st, "open_device: backend %s: %s", ops->name, err[0] ? err : "open failed");
  d->be = ops;
  snprintf(d->backend, sizeof d->backend, "%s", ops->name);
  snprintf(d->platform, sizeof d->platform, "%s", ops->platform);
  ops->info(d->bk, &d->info);
  return MD_NONE;
}

md_status md__backend_open(md_device *d) {
  if (strcmp(d->cfg.backend, "auto") == 0) {
    const md_backend_ops *hip = md_backend_find("hip");
    if (hip && open_one(d, hip) == MD_NONE) return MD_NONE;
    return open_one(d, md_backend_find("sim"));
  }
  const md_backend_ops *ops = md_backend_find(d->cfg.backend);
  if (!ops)
    return md__fail(MD_DEVICE_UNAVAILABLE, "open_device: backend=%s: this driver was built without it%s",
                    d->cfg.backend, strcmp(d->cfg.backend, "hip") == 0 ? HIP_NOT_BUILT : "");
  return open_one(d, ops);
}
