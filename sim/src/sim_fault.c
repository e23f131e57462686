/* sim_fault.c - the sim's fault plans (md_backend_params.faults, `KIND@N,...`): parsing, and
 * the hook that numbers the runtime's calls per site and fires what the plan says. */
#include "sim_backend_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_names[F_KINDS] = {"alloc_fail", "copy_fail", "kernel_fail", "device_lost", "stall"};

/* ---- fault plans ------------------------------------------------------------------------ */

/* Parses `KIND@N[,KIND@N...]` into b->faults. INVALID_ARGUMENT naming the bad item. */
md_status md__sim_faults_parse(md_backend *b, const char *plan, char *err, size_t errlen) {
  if (!plan || !*plan) return MD_NONE;
  size_t cap = 1;
  for (const char *c = plan; *c; c++) cap += *c == ',';
  b->faults = calloc(cap, sizeof *b->faults);
  if (!b->faults) return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: out of host memory");
  const char *item = plan;
  for (size_t i = 0; i < cap; i++) {
    const char *end = strchr(item, ',');
    int len = (int)(end ? (size_t)(end - item) : strlen(item));
    const char *at = memchr(item, '@', (size_t)len);
    if (len == 0)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '' (item %zu): empty item", i + 1);
    if (!at)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing '@N'", len, item);
    int klen = (int)(at - item);
    int k = -1;
    for (int j = 0; j < F_KINDS; j++)
      if ((int)strlen(fault_names[j]) == klen && strncmp(item, fault_names[j], (size_t)klen) == 0) k = j;
    if (k < 0)
      return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT,
                  "faults: '%.*s': unknown kind '%.*s' (alloc_fail, copy_fail, kernel_fail, device_lost, stall)", len,
                  item, klen, item);
    const char *num = at + 1, *stop = item + len;
    if (num == stop) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': missing count", len, item);
    uint64_t n = 0;
    for (const char *d = num; d < stop; d++) {
      if (*d < '0' || *d > '9')
        return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count '%.*s' is not a number", len, item,
                    (int)(stop - num), num);
      uint64_t digit = (uint64_t)(*d - '0');
      if (n > (UINT64_MAX - digit) / 10)
        return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count is out of range", len, item);
      n = n * 10 + digit;
    }
    if (n == 0) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "faults: '%.*s': count must be >= 1", len, item);
    b->faults[b->n_faults++] = (fault){(fault_kind)k, n};
    item = end ? end + 1 : stop;
  }
  return MD_NONE;
}

/* Whether the plan has kind@n; counts it as fired when it has. */
static int fault_fires(md_backend *b, fault_kind kind, uint64_t n) {
  for (size_t i = 0; i < b->n_faults; i++)
    if (b->faults[i].kind == kind && b->faults[i].n == n) {
      atomic_fetch_add_explicit(&b->faults_fired, 1, memory_order_relaxed);
      return 1;
    }
  return 0;
}

md_status md__sim_lost_status(md_backend *b, const char *what, char *err, size_t errlen) {
  return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE, "sim: %s: device lost (device_lost@%" PRIu64 ")", what,
              atomic_load_explicit(&b->lost_at, memory_order_relaxed));
}

/* The fault plan's hook (md_backend_ops.fault_point): numbers the runtime's calls per site
 * and fires what the plan says for that number. */
md_status md__sim_fault_point(md_backend *b, md_fault_site site, char *err, size_t errlen) {
  if (!sim_of(b) || (unsigned)site > MD_FAULT_EXECUTION)
    return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: fault_point: bad device or site");
  if (is_lost(b)) return md__sim_lost_status(b, "device", err, errlen);
  if (!b->n_faults) {
    /* No plan to number the calls for: counted on the thread's stripe, so that executions on
     * several threads do not pass one counter's line back and forth (stats add them up). */
    atomic_fetch_add_explicit(&my_stripe(b)->sites[site], 1, memory_order_relaxed);
    return MD_NONE;
  }
  uint64_t n = atomic_fetch_add_explicit(&b->site_calls[site], 1, memory_order_relaxed) + 1;
  switch (site) {
    case MD_FAULT_ALLOCATE:
      if (fault_fires(b, F_ALLOC, n))
        return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT,
                    "sim: injected device allocation failure (alloc_fail@%" PRIu64 ")", n);
      break;
    case MD_FAULT_COPY:
      if (fault_fires(b, F_COPY, n))
        return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: injected copy failure (copy_fail@%" PRIu64 ")", n);
      break;
    case MD_FAULT_EXECUTION:
      if (fault_fires(b, F_LOST, n)) {
        atomic_store_explicit(&b->lost_at, n, memory_order_relaxed);
        atomic_store_explicit(&b->lost, 1, memory_order_release);
        pthread_mutex_lock(&b->sched_lock);   /* wake waiters: queued work now fails */
        md__sim_wake_all_locked(b);
        pthread_cond_broadcast(&b->done_cond);
        pthread_mutex_unlock(&b->sched_lock);
        return md_backend_fail(err, errlen, MD_DEVICE_UNAVAILABLE,
                    "sim: device lost during execution %" PRIu64 " (device_lost@%" PRIu64 ")", n, n);
      }
      if (fault_fires(b, F_KERNEL, n))
        return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: injected kernel failure (kernel_fail@%" PRIu64 ")", n);
      if (fault_fires(b, F_STALL, n))
        return md_backend_fail(err, errlen, MD_MISSED_DEADLINE_TRANSIENT, "sim: execution %" PRIu64 " stalled (stall@%" PRIu64 ")", n, n);
      break;
  }
  return MD_NONE;
}

