/* runtime_int.h - private to the runtime: the device and the objects behind its handles.
 *
 * Every object a caller can name (client, prepared model, buffer, event) lives in the device's
 * handle table (handles.h). An entry point looks its objects up (taking a reference each),
 * works, and puts them: a released object dies for new calls at once and is destroyed when
 * the last call or async execution that holds it ends. No lock is global to the device on the
 * execute and copy paths: handle lookups are lock-free, a buffer's metadata has its own small
 * lock, and device memory is reached through reference-counted storage. */
#ifndef MD_RUNTIME_INT_H
#define MD_RUNTIME_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "md/backend.h"
#include "md/config.h"
#include "md/driver.h"
#include "handles.h"
#include "model.h"
#include "pool.h"
#include "refcount.h"

/* ---- a tiny lock for short metadata sections ---- */
typedef struct md__spin { atomic_flag f; } md__spin;
static inline void md__spin_lock(md__spin *s) {
  while (atomic_flag_test_and_set_explicit(&s->f, memory_order_acquire)) sched_yield();
}
static inline void md__spin_unlock(md__spin *s) { atomic_flag_clear_explicit(&s->f, memory_order_release); }

/* ---- objects ---- */
typedef struct md__client {
  md__pool_cache *pools;     /* this client's pool mappings */
} md__client;

/* What one execution of a prepared model needs besides its request: per operand, its state
 * while running and the device temporary it used last time (kept for the next execution, so
 * a steady stream of executions allocates no device memory). exec_run.c owns the layout. */
typedef struct md__exec_ctx md__exec_ctx;

typedef struct md__prepared {
  md__model *model;
  md_devptr *dev_const;      /* per operand: device copy of a constant tensor, or 0 */
  uint64_t dev_bytes;
  md__spin ctx_lock;         /* guards ctx_free */
  md__exec_ctx *ctx_free;    /* contexts not in use: one per execution that ran concurrently */
} md__prepared;

/* Device memory of a buffer. The buffer holds one reference; a call or execution reading or
 * writing it holds another, so resizing never frees memory under a user. */
typedef struct md__storage {
  md__ref ref;
  bool embedded;             /* the buffer's first storage, freed with the buffer */
  md_devptr mem;
  uint64_t capacity;
} md__storage;

typedef struct md__role {
  md_handle prepared;        /* identity of the prepared model */
  uint32_t is_output;
  uint32_t index;
} md__role;

typedef struct md__buffer {
  md__spin lock;             /* guards initialized, writing, cur_rank, the current dims, st */
  bool initialized;
  bool writing;              /* an in-place write is running */
  uint8_t init_rank, cur_rank;
  md_operand_type type;
  float scale;
  int32_t zero_point;
  md__storage *st;           /* current storage (may be &first or a grown one) */
  md__storage first;
  uint32_t n_roles;
  md__role roles[];          /* n_roles, then the initial dims (init_rank entries), then the
                                current dims (init_rank entries, or MD_MAX_RANK when the rank
                                is not known at allocation) */
} md__buffer;

/* Bytes of a buffer object with n_roles roles and initial rank init_rank. */
static inline size_t md__buffer_size(uint32_t n_roles, uint32_t init_rank) {
  return sizeof(md__buffer) + n_roles * sizeof(md__role) +
         (init_rank + (init_rank ? init_rank : MD_MAX_RANK)) * sizeof(uint32_t);
}
static inline uint32_t *md__buf_init_dims(const md__buffer *b) {
  return (uint32_t *)(b->roles + b->n_roles);
}
static inline uint32_t *md__buf_cur_dims(const md__buffer *b) {
  return md__buf_init_dims(b) + b->init_rank;
}

typedef struct md__event md__event;
typedef struct md__exec md__exec;

/* ---- the device ---- */
struct md_device {
  const md_backend_ops *be;
  md_backend *bk;
  md_backend_info info;
  md_config cfg;
  char backend[32];
  char platform[16];
  md__htable ht;
  /* async executions */
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;
  md__exec *q_head, *q_tail;
  pthread_t workers[2];
  uint32_t n_workers;
  bool stopping;
  /* device loss: once set, every call but close_client/close_device is DEVICE_UNAVAILABLE */
  _Atomic int lost;
  pthread_mutex_t lost_lock;
  char lost_msg[160];
};

/* Marks the device lost (the first message is kept). */
void md__device_lost(md_device *d, const char *why);
/* DEVICE_UNAVAILABLE naming fn when the device is lost; MD_NONE otherwise. */
md_status md__device_check(md_device *d, const char *fn);
/* The backend's fault point for one call of `fn` at `site` (md_backend_ops.fault_point):
 * MD_NONE, or the injected status with "fn: <backend message>" as the last error. A
 * DEVICE_UNAVAILABLE marks the device lost. */
md_status md__fault_point(md_device *d, md_fault_site site, const char *fn);

/* ---- shared between files ---- */
/* Looks up a client handle; INVALID_ARGUMENT with "<fn>: client 0x..: <why>" if not live. */
md_status md__client_get(md_device *d, const char *fn, md_handle client, md__hentry **out);
/* Looks up an object of `kind` owned by `client`; INVALID_ARGUMENT naming it otherwise. */
md_status md__owned_get(md_device *d, const char *fn, const char *what, md_handle client,
                        md_handle h, md__kind kind, md__hentry **out);

/* Buffer data access (buffer.c). A write goes in place only when nobody else uses the
 * current storage (the buffer's reference is the only one and no other write is in place);
 * otherwise into fresh storage that the commit swaps in. A read takes a reference on the
 * current storage; while an in-place write runs, a read fails with GENERAL_FAILURE ("being
 * written by another call") instead of seeing torn data. So racing calls never touch the
 * same bytes at once, and no memory is freed under a user. */
typedef struct md__write {
  md__storage *st;
  bool in_place;
} md__write;
/* Storage able to hold `bytes` for a write. Backend status (RESOURCE_EXHAUSTED_*, ...) with a
 * message on failure. */
md_status md__buffer_write_begin(md_device *d, md__buffer *b, uint64_t bytes, md__write *w);
/* Publishes a completed write: dims (rank, dims), initialized. */
void md__buffer_write_commit(md_device *d, md__buffer *b, md__write *w, uint32_t rank, const uint32_t *dims);
/* Abandons a write; the buffer becomes uninitialized (its current dims are kept). */
void md__buffer_write_abort(md_device *d, md__buffer *b, md__write *w);
/* For a read: GENERAL_FAILURE if uninitialized or being written in place; else a reference on
 * the storage and the current dims. */
md_status md__buffer_read_begin(md__buffer *b, md__storage **st, uint32_t *rank, uint32_t *dims);
void md__storage_put(md_device *d, md__storage *s);
void md__buffer_uninit(md__buffer *b);
uint64_t md__buffer_bytes(const md__buffer *b);   /* capacity of the current storage */
/* Is (prepared, is_output, index) one of the roles of the buffer behind entry e? The first
 * role is kept in the entry's tag, so a one-role buffer is checked without touching the
 * buffer object. */
bool md__buffer_has_role(const md__hentry *e, md_handle prepared, uint32_t is_output, uint32_t index);
static inline uint64_t md__role_tag(uint32_t is_output, uint32_t index) {
  return ((uint64_t)is_output << 32) | index;
}

/* Objects' destruction (the handle table's callback, driver.c). */
void md__client_destroy(md__client *c);
void md__buffer_destroy(md_device *d, md__buffer *b);
void md__prepared_destroy(md_device *d, md__prepared *p);
void md__exec_ctx_free_all(md_device *d, md__prepared *p);   /* exec_run.c */
void md__event_destroy(md_device *d, md__event *ev);

/* Async workers (exec_async.c). */
void md__executor_stop(md_device *d);

/* Entry points implemented in client.c, prepared.c, buffer.c, exec_run.c and exec_async.c. */
md_status md__open_client(md_device *, md_handle *out);
md_status md__close_client(md_device *, md_handle client, md_leak_report *leaks);
md_status md__release_prepared_model(md_device *, md_handle client, md_handle prepared);
md_status md__allocate(md_device *, md_handle client, const md_buffer_desc *, const md_handle *prepared,
                       uint32_t n_prepared, const md_buffer_role *input_roles, uint32_t n_input_roles,
                       const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token);
md_status md__copy_to(md_device *, md_handle client, md_token src, const md_memory *dst);
md_status md__copy_from(md_device *, md_handle client, md_token dst, const md_memory *src,
                        uint32_t rank, const uint32_t *dims);
md_status md__free_buffer(md_device *, md_handle client, md_token);
md_status md__prepare_model(md_device *, md_handle client, const md_model *, md_handle *prepared);
md_status md__execute(md_device *, md_handle client, md_handle prepared, const md_request *,
                      md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);
md_status md__execute_async(md_device *, md_handle client, md_handle prepared, const md_request *,
                            md_handle *event);
md_status md__wait_event(md_device *, md_handle client, md_handle event, uint64_t timeout_ns,
                         md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);

/* Backends (backend_registry.c): resolves cfg->backend ("auto" tries hip, then sim) and opens it. */
md_status md__backend_open(md_device *d);

#endif
