/* device_int.h - private to the runtime: the device, and the bottom layer every entry point
 * calls: handle lookups (lookup.c), device loss and fault points (device_loss.c), opening a
 * backend (backend_registry.c).
 *
 * The runtime's files call only down, through three layers:
 *   top     driver.c: the md_driver table, open/close_device, device-wide queries, and the
 *           entry points that check the device before handing a call down (driver_int.h);
 *   middle  the objects behind handles (objects_int.h), in this order: client.c (close_client
 *           asks buffer.c a buffer's bytes), prepared.c (frees its execution contexts in
 *           exec_run.c), memory_domain.c, exec_async.c, exec_run.c, exec_request.c
 *           (exec_int.h), and buffer.c, the buffers' storage that both kinds of call use;
 *   bottom  lookup.c, device_loss.c, backend_registry.c (this header), handles.c (handles.h),
 *           config.c (md/config.h), and md_base below them (errors, refcounts, shapes, pools,
 *           scopes, model validation).
 * Each file calls only files listed after it (runtime/CMakeLists.txt lists md_runtime's in
 * this order). Nothing below calls up: the handle table reaches the objects' destructors only
 * through the callback driver.c registers when the device opens. */
#ifndef MD_DEVICE_INT_H
#define MD_DEVICE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "handles.h"
#include "md/backend.h"
#include "md/config.h"
#include "md/driver.h"

typedef struct md__exec md__exec;   /* an execution in flight (exec_int.h) */

/* One open device. driver.c opens and closes it; the fields below belong to the files named. */
struct md_device {
  const md_backend_ops *be;  /* be, bk, info, backend, platform: set by md__backend_open */
  md_backend *bk;
  md_backend_info info;
  md_config cfg;             /* the parsed open_device configuration */
  char backend[32];
  char platform[16];
  md__htable ht;             /* every client, prepared model, buffer and event (handles.c) */
  /* async executions (exec_async.c): the queue and its workers */
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;
  md__exec *q_head, *q_tail;
  md__exec *parked;          /* stalled executions (a fault plan's stall@N), not yet released */
  pthread_t workers[2];
  uint32_t n_workers;
  uint32_t timed_waiters;    /* workers sleeping with a deadline (they reap without a signal) */
  uint64_t last_queued_ns;   /* when an execution was last queued */
  bool stopping;
  _Atomic uint32_t async_queued;   /* executions queued or running on the workers */
  /* device loss (device_loss.c): once set, every call but close_client/close_device is
   * DEVICE_UNAVAILABLE */
  _Atomic int lost;
  pthread_mutex_t lost_lock;
  char lost_msg[160];
};

/* ---- device loss and fault points (device_loss.c) ---- */

/* Marks the device lost, keeping the first reason given (why, or "the backend reported it"
 * when why is NULL or empty); later calls change nothing. Never fails; thread-safe. */
void md__device_lost(md_device *d, const char *why);

/* MD_NONE while the device is not lost (one atomic load, no lock, the last error untouched).
 * Once it is lost: DEVICE_UNAVAILABLE, with "<fn>: the device was lost (<why>)" as the last
 * error. Changes nothing else; thread-safe. */
md_status md__device_check(md_device *d, const char *fn);

/* Asks the backend's fault point (md_backend_ops.fault_point) whether a planned fault fires at
 * this call of `fn` at `site`; the backend counts the call against its fault plan. MD_NONE
 * when the backend has no fault point or nothing fires (the last error untouched). Otherwise
 * the injected status is returned with "<fn>: <the backend's message, or 'injected fault'>"
 * as the last error, and a DEVICE_UNAVAILABLE also marks the device lost. Thread-safe as the
 * backend's fault_point is. */
md_status md__fault_point(md_device *d, md_fault_site site, const char *fn);

/* ---- handle lookups (lookup.c) ---- */

/* Looks up the live client `client` and takes a reference on its entry (*out; the caller
 * drops it with md__handle_put). On error, INVALID_ARGUMENT is returned with "<fn>: client
 * 0x..: <why>" as the last error, no reference is taken and *out is untouched. Lock-free. */
md_status md__client_get(md_device *d, const char *fn, md_handle client, md__hentry **out);

/* Looks up the live handle h of `kind` owned by `client` and takes a reference on its entry
 * (*out, as md__client_get). On error, INVALID_ARGUMENT is returned with "<fn>: <what> 0x..:
 * <why>" as the last error (never issued, released, another kind, or another client's), no
 * reference is held and *out is untouched. Lock-free. */
md_status md__owned_get(md_device *d, const char *fn, const char *what, md_handle client,
                        md_handle h, md__kind kind, md__hentry **out);

/* md__client_get and md__owned_get through the calling thread's reference cache (handles.h:
 * md__handle_use): the same checks and messages; on success *u holds the use, which the caller
 * ends with md__handle_unuse on the same thread. For calls that end on the thread that made
 * them (a synchronous execution); lock-free, and a repeated use moves no reference count. */
md_status md__client_use(md_device *d, const char *fn, md_handle client, md__use *u);
md_status md__owned_use(md_device *d, const char *fn, const char *what, md_handle client, md_handle h,
                        md__kind kind, md__use *u);

/* Settles a creation's race with close_client, right after the creating call `fn` issued handle
 * *h (entry e) for an object owned by `client`, whose entry ce the caller holds: the call
 * stands or falls by who kills the new handle first, so a leak report counts exactly the
 * objects whose creating call returned MD_NONE (SPEC 1, 5).
 *   - The client is still live: MD_NONE; a later close_client's sweep finds the object (it
 *     was issued before that close killed the client).
 *   - The client was closed, and its sweep killed the handle first: MD_NONE as well; the
 *     object was created before the close, which counted and released it (*h is already dead).
 *   - The client was closed and this call killed the handle first (the sweep had passed, or
 *     had not reached it): INVALID_ARGUMENT with "<fn>: client 0x..: was closed during the
 *     call", *h is 0, and the table's reference is dropped (the caller's own, if it holds one,
 *     is still the caller's to drop).
 * After this call, the caller may touch e only through a reference of its own. */
md_status md__issued_settle(md_device *d, const char *fn, const md__hentry *ce, md_handle client,
                            md__hentry *e, md_handle *h);

/* ---- backends (backend_registry.c) ---- */

/* Opens the backend d->cfg.backend names ("auto": hip when registered and it opens, else sim)
 * with d->cfg's parameters, and sets d->be, d->bk, d->backend, d->platform and d->info. On
 * error, DEVICE_UNAVAILABLE (no such backend in this driver: the message lists the built ones)
 * or the backend's status ("open_device: backend <name>: <why>") is returned, and d->be and
 * the names stay unset. Thread-safe (the registry is read without its lock). */
md_status md__backend_open(md_device *d);

#endif
