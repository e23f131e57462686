/* backend_registry.c - the process-wide list of backends and opening one for a device. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "device_int.h"
#include "error.h"

#define MAX_BACKENDS 8

/* Registered tables, each copied whole (entries past a shorter table's struct_size are NULL),
 * so every optional entry can be tested for NULL. Slots are written once, under the lock, before
 * n_backends publishes them; they are never removed, so a found table stays valid. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static md_backend_ops backends[MAX_BACKENDS];
static _Atomic unsigned n_backends;

md_status md_backend_register(const md_backend_ops *ops) {
  if (!ops || !ops->name || ops->version != MD_BACKEND_VERSION || ops->struct_size < MD_BACKEND_OPS_MIN_SIZE)
    return md__fail(MD_INVALID_ARGUMENT, "backend: ops table has an unknown version or size");
  pthread_mutex_lock(&lock);
  unsigned n = atomic_load_explicit(&n_backends, memory_order_relaxed);
  for (unsigned i = 0; i < n; i++)
    if (strcmp(backends[i].name, ops->name) == 0) {
      pthread_mutex_unlock(&lock);
      return md__fail(MD_INVALID_ARGUMENT, "backend '%s': already registered", ops->name);
    }
  if (n == MAX_BACKENDS) {
    pthread_mutex_unlock(&lock);
    return md__fail(MD_RESOURCE_EXHAUSTED_PERSISTENT, "backend '%s': registry full", ops->name);
  }
  size_t size = ops->struct_size < sizeof(md_backend_ops) ? ops->struct_size : sizeof(md_backend_ops);
  memset(&backends[n], 0, sizeof backends[n]);
  memcpy(&backends[n], ops, size);
  backends[n].struct_size = sizeof(md_backend_ops);
  atomic_store_explicit(&n_backends, n + 1, memory_order_release);
  pthread_mutex_unlock(&lock);
  return MD_NONE;
}

const md_backend_ops *md_backend_find(const char *name) {
  unsigned n = atomic_load_explicit(&n_backends, memory_order_acquire);
  for (unsigned i = 0; i < n; i++)
    if (strcmp(backends[i].name, name) == 0) return &backends[i];
  return NULL;
}

/* "sim, hip": the registered names, for messages. */
static void list_names(char *buf, size_t len) {
  unsigned n = atomic_load_explicit(&n_backends, memory_order_acquire);
  size_t used = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", backends[i].name);
  if (!n) snprintf(buf, len, "none");
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
  p.init_ns = d->cfg.init_ns;
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
    const md_backend_ops *sim = md_backend_find("sim");
    if (!sim) return md__fail(MD_DEVICE_UNAVAILABLE, "open_device: backend=auto: no backend answered");
    return open_one(d, sim);
  }
  const md_backend_ops *ops = md_backend_find(d->cfg.backend);
  if (!ops) {
    char names[128];
    list_names(names, sizeof names);
    return md__fail(MD_DEVICE_UNAVAILABLE, "open_device: backend=%s: this driver was built without it (built with: %s)",
                    d->cfg.backend, names);
  }
  return open_one(d, ops);
}
