/* objects_int.h - private to the runtime: the objects behind the device's handles (clients,
 * prepared models, buffers and their storage, events) and the middle layer's entry points
 * (client.c, prepared.c, memory_domain.c, exec_run.c, exec_async.c) that driver.c calls.
 *
 * Every object a caller can name lives in the device's handle table (handles.h). An entry point
 * looks its objects up (taking a reference each), works, and puts them: a released object dies
 * for new calls at once and is destroyed when the last call or async execution that holds it
 * ends. No lock is global to the device on the execute and copy paths: handle lookups are
 * lock-free, a buffer's metadata has its own small lock, and device memory is reached through
 * reference-counted storage. The layers and who may call whom: device_int.h.
 *
 * The entry points below are called by driver.c only, after it checked that d is not NULL and
 * that the device is not lost (close_client excepted); each checks everything else. Every one
 * is thread-safe; any number may run at once on one device. */
#ifndef MD_OBJECTS_INT_H
#define MD_OBJECTS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "device_int.h"
#include "model.h"
#include "pool.h"
#include "refcount.h"
#include "spin.h"

/* ---- objects ---- */

typedef struct md__client {
  md__pool_cache *pools;     /* this client's pool mappings */
} md__client;

/* What one execution of a prepared model needs besides its request: per operand, its state
 * while running and the device temporary it used last time (kept for the next execution, so
 * a steady stream of executions allocates no device memory). exec_run.c owns the layout. */
typedef struct md__exec_ctx md__exec_ctx;

/* Execution contexts kept for reuse, per thread: a thread takes and gives back its own slot's
 * context with one atomic exchange on a cache line no other thread writes (threads are spread
 * over the slots by a per-thread number; two that share a slot still work, they just contend). */
#define MD__CTX_SLOTS 8u
typedef struct md__ctx_slot {
  _Alignas(64) _Atomic(md__exec_ctx *) ctx;
} md__ctx_slot;

typedef struct md__prepared {
  md__model *model;          /* read by every execution: on a line nothing writes while in use */
  md_devptr *dev_const;      /* per operand: device copy of a constant tensor, or 0 */
  uint64_t dev_bytes;
  bool all_builtin;          /* every operation runs a built-in kernel (never blocks) */
  uint64_t mac_bytes;        /* 4 x the multiply-adds of its FULLY_CONNECTEDs (UINT64_MAX:
                                unknown dims), for execute_async's inline rule (exec_async.c) */
  md__ctx_slot slots[MD__CTX_SLOTS];
  _Alignas(64) md__spin ctx_lock;   /* guards ctx_free: contexts beyond one per slot */
  md__exec_ctx *ctx_free;
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
  _Atomic uint32_t seq;      /* odd while the lock's holder changes those fields (a seqlock for
                                md__buffer_read_pinned, which reads them without the lock;
                                buffer.c stores them with atomic stores) */
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

/* An async execution's result, behind an event handle (exec_async.c owns the layout). */
typedef struct md__event md__event;

/* A registered pool (SPEC 9, registered.c): the descriptor as it was registered and its own
 * mapping, made once. The mapping is held (acquired) by the pool object for its whole life, so
 * an execution holding the pool's handle entry uses it with no scope operation and no system
 * call; the last reference (unregister, close_client, or the last execution in flight after
 * them) releases it and the mapping goes. Immutable after registration: read without a lock. */
typedef struct md__regpool {
  md_memory mem;             /* the descriptor, as registered (its fd: the client's number then) */
  md__pool_plan plan;        /* what validation learned (sizes) */
  md__mapping map;           /* the pool's mapping, acquired by this object */
  void *host_registered;     /* the address the backend's host_register accepted, or NULL */
} md__regpool;

/* ---- buffer data access (buffer.c) ----
 * A write goes in place only when nobody else uses the current storage (the buffer's reference
 * is the only one and no other write is in place); otherwise into fresh storage that the commit
 * swaps in. A read takes a reference on the current storage; while an in-place write runs, a
 * read fails with GENERAL_FAILURE ("being written by another call") instead of seeing torn
 * data. So racing calls never touch the same bytes at once, and no memory is freed under a
 * user. Each function takes the buffer's spin lock only for its few fields. */

typedef struct md__write {
  md__storage *st;
  bool in_place;
} md__write;

/* Starts a write of `bytes` to b: in place in the current storage when it is large enough and
 * nobody else holds it (the buffer is then marked as being written), else in fresh storage of
 * `bytes` from the backend. *w holds a reference on the storage until md__buffer_write_commit
 * or md__buffer_write_abort, one of which the caller must call. On error, the status is
 * returned (RESOURCE_EXHAUSTED_TRANSIENT "out of host memory", or the backend's with "cannot
 * allocate N bytes of device memory"; callers prefix the call), and b and *w are unchanged. */
md_status md__buffer_write_begin(md_device *d, md__buffer *b, uint64_t bytes, md__write *w);

/* Publishes a completed write: w's storage becomes the buffer's current one (the old one is
 * dropped and freed by its last user), the current dims become (rank, dims), and the buffer is
 * initialized. Never fails; w->st is NULL after. */
void md__buffer_write_commit(md_device *d, md__buffer *b, md__write *w, uint32_t rank, const uint32_t *dims);

/* Abandons a write: the buffer becomes uninitialized (its current dims are kept) and w's
 * reference is dropped (fresh storage is freed). Never fails; w->st is NULL after. */
void md__buffer_write_abort(md_device *d, md__buffer *b, md__write *w);

/* Starts a read of b: a reference on the current storage (*st; drop it with md__storage_put),
 * and the current dims (*rank, dims[MD_MAX_RANK]). On error, GENERAL_FAILURE is returned with
 * "buffer is not initialized" or "buffer is being written by another call" as the last error
 * (callers prefix the call), nothing is held and *st, *rank and dims are untouched. */
md_status md__buffer_read_begin(md__buffer *b, md__storage **st, uint32_t *rank, uint32_t *dims);

/* md__buffer_read_begin in one round of the buffer's lock, saying why instead of failing: the
 * current dims always (*rank, dims[MD_MAX_RANK]), and a reference on the current storage (*st)
 * only when the result is MD__READ_OK. No message is written. */
typedef enum md__read_state { MD__READ_OK = 0, MD__READ_UNINITIALIZED = 1, MD__READ_BEING_WRITTEN = 2 } md__read_state;
md__read_state md__buffer_read_snapshot(md__buffer *b, md__storage **st, uint32_t *rank, uint32_t *dims);

/* md__buffer_read_snapshot for a reader that keeps a pin (handles.h: md__use_pin; pin NULL:
 * exactly md__buffer_read_snapshot). When the result is MD__READ_OK, *st is the current storage
 * and the pin holds the reference on it: the caller must not put *st, and may use it while
 * its use of the buffer's handle lasts. The hit -- the pin is still the current storage --
 * reads the buffer's fields under its seqlock and writes nothing; a miss takes a reference
 * under the lock, makes it the pin and drops the old pin. A pinned storage is held, so writes
 * to the buffer go to fresh storage while any thread keeps it pinned (see write_begin). */
md__read_state md__buffer_read_pinned(md_device *d, md__buffer *b, void **pin, md__storage **st, uint32_t *rank,
                                      uint32_t *dims);

/* Sets b's current dims back to its initial ones (a mutant's path). Never fails. */
void md__buffer_reset_dims(md__buffer *b);

/* Drops a reference on s (NULL is ignored); the last one frees its device memory, and s itself
 * unless it is embedded in its buffer. Never fails. */
void md__storage_put(md_device *d, md__storage *s);

/* Marks b uninitialized (its dims and storage are kept). Never fails. */
void md__buffer_uninit(md__buffer *b);

/* b's size in bytes at its current dims (SPEC 8.10: what close_client reports), 0 when it
 * has no storage yet. Never fails. */
uint64_t md__buffer_bytes(const md__buffer *b);

/* Whether (prepared, is_output, index) is one of the roles of the buffer behind entry e (which
 * the caller holds). The first role is kept in the entry's tag, so a one-role buffer is checked
 * without touching the buffer object; roles never change, so no lock is taken. */
bool md__buffer_has_role(const md__hentry *e, md_handle prepared, uint32_t is_output, uint32_t index);
static inline uint64_t md__role_tag(uint32_t is_output, uint32_t index) {
  return ((uint64_t)is_output << 32) | index;
}

/* ---- destruction: the handle table's destroy callback (driver.c) calls these when an
 * object's last reference goes, so nothing else uses the object. None fails. ---- */

/* Frees the client's pool-mapping cache (each mapping is unmapped by its last user) and c. */
void md__client_destroy(md__client *c);
/* Frees p's execution contexts, the device copies of its constants, its model (releasing the
 * model's pool mappings) and p. */
void md__prepared_destroy(md_device *d, md__prepared *p);
/* Frees the execution contexts p keeps for reuse (their device temporaries and streams);
 * called by md__prepared_destroy, when no execution uses p (exec_run.c). */
void md__exec_ctx_free_all(md_device *d, md__prepared *p);
/* Drops the buffer's reference on its storage (storage still in use is freed by its last
 * user) and frees b. */
void md__buffer_destroy(md_device *d, md__buffer *b);
/* Frees an event and its shapes; its execution has finished (it held a reference). */
void md__event_destroy(md_device *d, md__event *ev);
/* Releases a registered pool's mapping (the backend's host_unregister first, when it took the
 * range) and frees p. */
void md__regpool_destroy(md_device *d, md__regpool *p);

/* Stops the async workers (exec_async.c): marks the device stopping, so a new execute_async
 * fails with DEVICE_UNAVAILABLE ("the device is closing"), lets the workers run every queued
 * execution, and joins them. Called once, by close_device, after every handle was killed. */
void md__executor_stop(md_device *d);
/* Releases the executions of `client` that a fault plan's stall@N parked (close_client). */
void md__stall_release_client(md_device *d, md_handle client);

/* ---- the entry points (md_driver's calls; SPEC section named for each) ---- */

/* open_client (SPEC 1, client.c): a new client with an empty pool-mapping cache; *out is its
 * handle. On error, RESOURCE_EXHAUSTED_TRANSIENT is returned (out of memory, or too many live
 * handles) with a message, nothing is created and *out is untouched. */
md_status md__open_client(md_device *, md_handle *out);

/* close_client (SPEC 1, client.c): kills the client's handle, then the handle of every live
 * object it owns, counting them in *leaks when leaks is not NULL (buffers with their bytes).
 * An object still used by a call or an async execution is destroyed when that ends. Runs on a
 * lost device too. On error, INVALID_ARGUMENT is returned (not a live client, or closed by a
 * concurrent call) with a message naming the client; nothing changes and *leaks is untouched. */
md_status md__close_client(md_device *, md_handle client, md_leak_report *leaks);

/* prepare_model (SPEC 2 and 7, prepared.c): validates model and makes a deep copy with each
 * operation's kernel for the device's platform (model.c), then uploads its constant tensors to
 * the device; *out is the prepared model's handle, owned by client. On error, the status is
 * returned with a message: INVALID_ARGUMENT (a NULL argument, client not live or closed during
 * the call, an invalid model), GENERAL_FAILURE (an unsupported operation, a pool that cannot
 * be mapped), RESOURCE_EXHAUSTED_* or the backend's; nothing is created, and *out is 0 (left
 * untouched when model or out is NULL). */
md_status md__prepare_model(md_device *, md_handle client, const md_model *, md_handle *prepared);

/* release_prepared_model (SPEC 1, prepared.c): kills the handle; the prepared model is
 * destroyed when the last execution using it ends. On error, INVALID_ARGUMENT is returned
 * (client not live, prepared not a live prepared model of the client, or released by a
 * concurrent call) with a message, and nothing changes. */
md_status md__release_prepared_model(md_device *, md_handle client, md_handle prepared);

/* allocate (SPEC 3, memory_domain.c): a buffer for the given roles of the prepared models; *token is
 * its handle, owned by client. Checks, in order: token and client, the counts and arrays, the
 * desc's rank, each prepared model, then per role its indices, probability, uniqueness,
 * operand type/scale/zero point agreeing with the first role's, and dims (the desc's and every
 * role's must combine); then the size against the device's memory and the backend's allocate
 * fault point. Device memory is allocated now when the dims are fully known, else by the first
 * write. On error, the status is returned with a message (INVALID_ARGUMENT for the argument
 * rules, RESOURCE_EXHAUSTED_PERSISTENT for a size over the device's memory, else the fault's
 * or the backend's), nothing is allocated and *token is 0 (when token is not NULL). */
md_status md__allocate(md_device *, md_handle client, const md_buffer_desc *, const md_handle *prepared,
                       uint32_t n_prepared, const md_buffer_role *input_roles, uint32_t n_input_roles,
                       const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token);

/* copy_to (SPEC 3, memory_domain.c): copies the buffer's content into dst. Checks, in order: client
 * and token, dst (a valid, writable COPY pool), dst's size against the current dims (before
 * initialization), that the buffer is initialized and not being written, then maps dst and
 * passes the backend's copy fault point. On error, the status is returned with a message
 * (INVALID_ARGUMENT for the handles, dst and its size; GENERAL_FAILURE for an uninitialized or
 * busy buffer or a pool that cannot be mapped; else the fault's or the backend's); the buffer
 * is unchanged, except that a fault injected at the copy leaves it uninitialized, and dst's
 * bytes are unspecified after a failed device read. */
md_status md__copy_to(md_device *, md_handle client, md_token src, const md_memory *dst);

/* copy_from (SPEC 3, memory_domain.c): writes src into the buffer, whose current dims become its
 * initial dims combined with (rank, dims). Checks, in order: client and token, src (a valid,
 * readable COPY pool), rank and dims (no dims for a scalar, no unknown axis, combining with the
 * buffer's, fully known after), src's size against them; then maps src, starts the write and
 * passes the backend's copy fault point. On error, the status is returned with a message; when
 * client and token were valid the buffer is left uninitialized (SPEC 3), else nothing changes. */
md_status md__copy_from(md_device *, md_handle client, md_token dst, const md_memory *src,
                        uint32_t rank, const uint32_t *dims);

/* free_buffer (SPEC 3, memory_domain.c): kills the token; the buffer's memory goes when the last call
 * or execution using it ends. On error, INVALID_ARGUMENT is returned (client not live, token
 * not a live token of the client, or freed by a concurrent call) with a message, and nothing
 * changes. */
md_status md__free_buffer(md_device *, md_handle client, md_token);

/* register_memory (SPEC 9, registered.c): validates mem as a request pool (SPEC 2: kind, fd,
 * prot, geometry, range), maps it, offers the mapping to the backend's host_register, and
 * issues *pool, a handle owned by client. What the client later does with mem->fd does not
 * matter: the mapping holds the file. On error, the status is returned with a message
 * (INVALID_ARGUMENT for a NULL argument, a client that is not live or closed during the call,
 * or a descriptor that breaks SPEC 2; GENERAL_FAILURE for one that cannot be mapped;
 * RESOURCE_EXHAUSTED_TRANSIENT for memory or handles), nothing is kept and *pool is 0 (when pool
 * is not NULL). */
md_status md__register_memory(md_device *, md_handle client, const md_memory *mem, md_handle *pool);

/* unregister_memory (SPEC 9, registered.c): kills the pool's handle; its mapping goes when the
 * last execution using it ends. On error, INVALID_ARGUMENT is returned (client not live, pool
 * not a live registered pool of the client, or unregistered by a concurrent call) with a
 * message, and nothing changes. */
md_status md__unregister_memory(md_device *, md_handle client, md_handle pool);

/* execute (SPEC 4, exec_run.c): validates the request (md__exec_create, exec_int.h), runs the
 * prepared model on the device and gives the output shapes (the first n_shapes) and timing.
 * The caller has zeroed shapes and set timing to UINT64_MAX. On error, the status is returned
 * with a message; a request that fails validation holds and changes nothing but leaves the
 * device outputs it resolved uninitialized; a run that fails leaves every device output of the
 * request uninitialized, shapes zeroed (except OUTPUT_INSUFFICIENT_SIZE, where they say what
 * each output needed) and timing UINT64_MAX. */
md_status md__execute(md_device *, md_handle client, md_handle prepared, const md_request *,
                      md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);

/* execute_async (SPEC 4, exec_async.c): validates the request at once, as md__execute does,
 * then queues its run on the device's worker threads (started by the first call, two at most)
 * and returns; *event is a handle owned by client, for md__wait_event. On error, the status is
 * returned with a message (validation's, as md__execute; INVALID_ARGUMENT for a NULL event;
 * RESOURCE_EXHAUSTED_TRANSIENT for memory, handles or no worker thread; DEVICE_UNAVAILABLE
 * while the device closes), nothing is queued or held and *event is 0 (when event is not
 * NULL). */
md_status md__execute_async(md_device *, md_handle client, md_handle prepared, const md_request *,
                            md_handle *event);

/* wait_event (SPEC 4, exec_async.c): waits up to timeout_ns (UINT64_MAX: forever) for the
 * event's execution, then consumes the event (its handle dies) and returns the execution's
 * status and message, its shapes (the first n_shapes) and timing. The caller has zeroed shapes
 * and set timing to UINT64_MAX. On error: MISSED_DEADLINE_TRANSIENT when it has not finished in
 * time (the event stays live, results untouched); INVALID_ARGUMENT when client or event is not
 * live, or a concurrent wait consumed the event first (results zeroed and UINT64_MAX). */
md_status md__wait_event(md_device *, md_handle client, md_handle event, uint64_t timeout_ns,
                         md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);

#endif
