/* device_loss.c - device loss: marking a device lost, the check every entry point makes, and
 * the backend's fault points (which may inject a loss). */
#include <stdio.h>

#include "device_int.h"
#include "error.h"

void md__device_lost(md_device *d, const char *why) {
  pthread_mutex_lock(&d->lost_lock);
  if (!atomic_load_explicit(&d->lost, memory_order_relaxed)) {
    snprintf(d->lost_msg, sizeof d->lost_msg, "%s", why && *why ? why : "the backend reported it");
    atomic_store_explicit(&d->lost, 1, memory_order_release);
  }
  pthread_mutex_unlock(&d->lost_lock);
}

md_status md__device_check(md_device *d, const char *fn) {
  if (!atomic_load_explicit(&d->lost, memory_order_acquire)) return MD_NONE;
  pthread_mutex_lock(&d->lost_lock);
  md_status st = md__fail(MD_DEVICE_UNAVAILABLE, "%s: the device was lost (%s)", fn, d->lost_msg);
  pthread_mutex_unlock(&d->lost_lock);
  return st;
}

md_status md__fault_point(md_device *d, md_fault_site site, const char *fn) {
  if (!d->be->fault_point) return MD_NONE;   /* registered tables have every field (md_backend_register) */
  char err[192] = "";
  md_status st = d->be->fault_point(d->bk, site, err, sizeof err);
  if (st == MD_NONE) return MD_NONE;
  if (st == MD_DEVICE_UNAVAILABLE) md__device_lost(d, err);
  return md__fail(st, "%s: %s", fn, err[0] ? err : "injected fault");
}
