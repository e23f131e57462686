/* driver.c - the reference driver's md_driver table: opening and closing a device, the
 * device-wide queries, and the entry points that check the device before they hand a call to
 * the object files below (client.c, prepared.c, memory_domain.c, registered.c, exec_*.c).
 *
 * This is the top of the runtime: nothing below calls back into it. It also owns the handle
 * table's destroy callback, the one place that knows every kind of object, and registers it
 * when the device opens. */
#include "driver_int.h"

#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mutant.h"
#include "error.h"
#include "kernels/kernel_ctx.h"
#include "objects_int.h"

/* The handle table's destroy callback: the last reference to an object went. */
/* A thread's cache drops the pin it kept with a buffer's entry: a reference on its storage. */
static void unpin_storage(void *ctx, void *pin) { md__storage_put(ctx, pin); }

static void destroy_object(void *ctx, md__hentry *e) {
  md_device *d = ctx;
  switch ((md__kind)atomic_load_explicit(&e->kind, memory_order_relaxed)) {
    case MD__KIND_CLIENT: md__client_destroy(e->obj); break;
    case MD__KIND_PREPARED: md__prepared_destroy(d, e->obj); break;
    case MD__KIND_BUFFER: md__buffer_destroy(d, e->obj); break;
    case MD__KIND_EVENT: md__event_destroy(d, e->obj); break;
    case MD__KIND_POOL: md__regpool_destroy(d, e->obj); break;
  }
}

/* ---- device ---- */

static md_status open_device(const char *config, md_device **out) {
  if (!out) return md__fail(MD_INVALID_ARGUMENT, "open_device: out is NULL");
  *out = NULL;
  if (sodium_init() < 0) return md__fail(MD_GENERAL_FAILURE, "open_device: libsodium failed to initialise");
  md_device *d = calloc(1, sizeof *d);
  if (!d) return md__fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_device: out of memory");
  char err[320];
  md_status st = md_config_parse(config, &d->cfg, err, sizeof err);
  if (st != MD_NONE) md__fail(st, "open_device: %s", err);
  else st = md__backend_open(d);
  if (st != MD_NONE) {
    free(d);
    return st;
  }
  uint8_t key[crypto_shorthash_KEYBYTES];
  if (d->cfg.has_seed) {
    /* A seed makes handle values reproducible run to run (for traces and fuzzing). */
    uint8_t seed_bytes[8];
    memcpy(seed_bytes, &d->cfg.seed, sizeof seed_bytes);
    crypto_generichash(key, sizeof key, seed_bytes, sizeof seed_bytes,
                       (const uint8_t *)"md-handle-key", 13);
  } else {
    randombytes_buf(key, sizeof key);
    if (MD_MUTANT(mac_key_shared)) memset(key, 0x5a, sizeof key); /* Mutant: one key for every device. */
  }
  md__htable_init(&d->ht, key, destroy_object, d);
  d->ht.unpin = unpin_storage;
  atomic_fetch_add(&md__kernel_registry_pins, 1);
  pthread_mutex_init(&d->q_lock, NULL);
  pthread_condattr_t ca;   /* the async workers sleep until monotonic deadlines (exec_async.c) */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&d->q_cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&d->lost_lock, NULL);
  *out = d;
  return MD_NONE;
}

static void kill_entry(md__hentry *e, void *arg) {
  md_device *d = arg;
  md__handle_kill(&d->ht, e, atomic_load(&e->handle));
}

static void close_device(md_device *d) {
  if (!d) return;
  /* Kill every handle (so nothing new starts), let async executions finish, then the last
   * references go and the objects are destroyed before the backend closes. */
  md__htable_foreach(&d->ht, kill_entry, d);
  md__executor_stop(d);
  md__htable_fini(&d->ht);
  d->be->close(d->bk);
  atomic_fetch_sub(&md__kernel_registry_pins, 1);
  pthread_mutex_destroy(&d->q_lock);
  pthread_cond_destroy(&d->q_cond);
  pthread_mutex_destroy(&d->lost_lock);
  free(d);
}

static md_status get_capabilities(md_device *d, md_capabilities *out) {
  if (!d || !out) return md__fail(MD_INVALID_ARGUMENT, "get_capabilities: %s is NULL", d ? "out" : "device");
  if (md__device_check(d, "get_capabilities") != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  /* struct_size: what the caller's struct holds (0: the v1 size). We fill what both know. */
  size_t n = out->struct_size ? out->struct_size : sizeof *out;
  if (n > sizeof *out) n = sizeof *out;
  if (n < offsetof(md_capabilities, backend))
    return md__fail(MD_INVALID_ARGUMENT, "get_capabilities: struct_size %u is smaller than v1's fixed fields", out->struct_size);
  md_capabilities c;
  memset(&c, 0, sizeof c);
  c.struct_size = (uint32_t)n;
  c.supports_memory_domains = 1;
  c.max_buffer_bytes = d->info.max_alloc ? d->info.max_alloc : d->info.mem_total;
  snprintf(c.backend, sizeof c.backend, "%s", d->backend);
  snprintf(c.device_name, sizeof c.device_name, "%s", d->info.device_name);
  memcpy(out, &c, n);
  return MD_NONE;
}

static md_status get_supported_operations(md_device *d, const md_model *m, uint8_t *supported) {
  if (!d || !m || !supported)
    return md__fail(MD_INVALID_ARGUMENT, "get_supported_operations: %s is NULL", !d ? "device" : !m ? "model" : "supported");
  if (md__device_check(d, "get_supported_operations") != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  md_status st = md__model_supported(m, d->platform, supported);
  return st == MD_NONE ? st : md__fail_prefix(st, "get_supported_operations");
}

static const char *last_error(md_device *d) {
  (void)d;
  return md__last_error();
}

/* ---- entry points on objects: the device checks, then the object files ---- */

/* Entry points that take a device check it here, so the implementations may assume one. */
#define NEED_DEVICE(fn)                                                      \
  if (!d) return md__fail(MD_INVALID_ARGUMENT, fn ": device is NULL");   \
  if (atomic_load_explicit(&d->lost, memory_order_acquire)) return md__device_check(d, fn)

static void clear_results(md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  if (shapes && n_shapes) memset(shapes, 0, n_shapes * sizeof *shapes);
  if (timing) timing->on_device_ns = timing->in_driver_ns = UINT64_MAX;
}

static md_status open_client(md_device *d, md_handle *out) {
  if (!d || !out) return md__fail(MD_INVALID_ARGUMENT, "open_client: %s is NULL", d ? "client" : "device");
  if (md__device_check(d, "open_client") != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  return md__open_client(d, out);
}
/* No device-loss check: a lost device's clients can still be closed. */
static md_status close_client(md_device *d, md_handle client, md_leak_report *leaks) {
  if (!d) return md__fail(MD_INVALID_ARGUMENT, "close_client: device is NULL");
  return md__close_client(d, client, leaks);
}
/* A call that creates something writes 0 to its result first, so a refusal at the device check
 * (NULL, lost) leaves no stale value behind either. */
static md_status prepare_model(md_device *d, md_handle client, const md_model *m, md_handle *out) {
  if (out && m) *out = 0;   /* left untouched when model is NULL (objects_int.h) */
  NEED_DEVICE("prepare_model");
  return md__prepare_model(d, client, m, out);
}
static md_status release_prepared_model(md_device *d, md_handle client, md_handle prepared) {
  if (!d) return md__fail(MD_INVALID_ARGUMENT, "release_prepared_model: device is NULL");
  if (md__device_check(d, "release_prepared_model") != MD_NONE) return MD_DEVICE_UNAVAILABLE;
  return md__release_prepared_model(d, client, prepared);
}
static md_status allocate(md_device *d, md_handle client, const md_buffer_desc *desc, const md_handle *prepared,
                          uint32_t n_prepared, const md_buffer_role *in, uint32_t n_in,
                          const md_buffer_role *outr, uint32_t n_out, md_token *token) {
  if (token) *token = 0;
  NEED_DEVICE("allocate");
  return md__allocate(d, client, desc, prepared, n_prepared, in, n_in, outr, n_out, token);
}
static md_status copy_to(md_device *d, md_handle client, md_token src, const md_memory *dst) {
  NEED_DEVICE("copy_to");
  return md__copy_to(d, client, src, dst);
}
static md_status copy_from(md_device *d, md_handle client, md_token dst, const md_memory *src, uint32_t rank,
                           const uint32_t *dims) {
  NEED_DEVICE("copy_from");
  return md__copy_from(d, client, dst, src, rank, dims);
}
static md_status free_buffer(md_device *d, md_handle client, md_token t) {
  NEED_DEVICE("free_buffer");
  return md__free_buffer(d, client, t);
}
static md_status execute(md_device *d, md_handle client, md_handle prepared, const md_request *r,
                         md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  clear_results(shapes, n_shapes, timing);   /* SPEC 4: no shapes on failure, also a lost device's */
  NEED_DEVICE("execute");
  return md__execute(d, client, prepared, r, shapes, n_shapes, timing);
}
static md_status execute_async(md_device *d, md_handle client, md_handle prepared, const md_request *r,
                               md_handle *event) {
  if (event) *event = 0;
  NEED_DEVICE("execute_async");
  return md__execute_async(d, client, prepared, r, event);
}
static md_status wait_event(md_device *d, md_handle client, md_handle event, uint64_t timeout_ns,
                            md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  clear_results(shapes, n_shapes, timing);
  NEED_DEVICE("wait_event");
  return md__wait_event(d, client, event, timeout_ns, shapes, n_shapes, timing);
}

static md_status register_memory(md_device *d, md_handle client, const md_memory *mem, md_handle *pool) {
  if (pool) *pool = 0;
  NEED_DEVICE("register_memory");
  return md__register_memory(d, client, mem, pool);
}
static md_status unregister_memory(md_device *d, md_handle client, md_handle pool) {
  NEED_DEVICE("unregister_memory");
  return md__unregister_memory(d, client, pool);
}

#ifdef MD_MUTANTS
#include "mutant.h"
int md__mutant; /* mutant.h: the mutant that runs, set by md_driver_entry */
#define MD_DRIVER_NAME "mdc-reference-mutants" /* the mutants build: MD_MUTANT picks one */
#else
#define MD_DRIVER_NAME "mdc-reference"
#endif

static const md_driver table = {
    .abi_version = MD_DRIVER_ABI_VERSION,
    .struct_size = sizeof(md_driver),
    .name = MD_DRIVER_NAME,
    .version = "0.1.0",
    .open_device = open_device,
    .close_device = close_device,
    .get_capabilities = get_capabilities,
    .get_supported_operations = get_supported_operations,
    .open_client = open_client,
    .close_client = close_client,
    .prepare_model = prepare_model,
    .release_prepared_model = release_prepared_model,
    .allocate = allocate,
    .copy_to = copy_to,
    .copy_from = copy_from,
    .free_buffer = free_buffer,
    .execute = execute,
    .execute_async = execute_async,
    .wait_event = wait_event,
    .last_error = last_error,
    .register_memory = register_memory,
    .unregister_memory = unregister_memory,
};

const md_driver *md__driver_table(void) { return &table; }
