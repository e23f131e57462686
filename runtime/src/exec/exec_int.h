/* exec_int.h - private to the execution files (exec_request.c, exec_run.c, exec_async.c): an
 * execution in flight (md__exec) and the steps each file does to it.
 *
 * An execution holds references on everything it uses (client, prepared model, buffers, their
 * storage, pool mappings) from validation to its end, so free_buffer, release and
 * close_client may run at any time: handles die at once, memory goes when it ends. Its life:
 * md__exec_create (validate the request, take what it uses), md__exec_run (once), then
 * md__exec_results (copy out) and md__exec_free. */
#ifndef MD_EXEC_INT_H
#define MD_EXEC_INT_H

#include "objects_int.h"

/* One argument (input or output) of a validated request: none, a range of a memory pool, or a
 * buffer's token. */
enum { ARG_NONE = 0, ARG_POOL = 1, ARG_TOKEN = 2 };

typedef struct io_arg {
  uint8_t kind;
  uint32_t pool;
  uint64_t offset, length;   /* pool args; length: capacity for outputs */
  bool whole;                /* a non-BLOB hardware buffer: the whole mapping is the argument */
  uint32_t rank;             /* requested dims: model dims combined with the argument's */
  uint32_t dims[MD_MAX_RANK];
  md__buffer *buf;           /* token args */
  md__storage *rd;           /* token inputs: storage held for reading */
  bool rd_pinned;            /* rd is held by the pin of the thread's cache slot (tok[pool]),
                                not by a reference of this execution's */
} io_arg;

/* A run's state between md__exec_issue and md__exec_finish (exec_run.c's; md__exec holds it so
 * that another thread may finish what the caller issued). */
typedef struct md__run {
  md__exec_ctx *ctx;         /* NULL: not issued (or finished) */
  md_stream *stream;         /* the context's, for an asynchronous run */
  struct pending *pend;      /* kernels queued on the stream, judged at the synchronization */
  uint32_t npend;
  uint64_t t0, t_queued, dev_ns;
  md_status st;              /* what the issue found */
} md__run;

/* One execution from validation to its end: what it holds (entries, storage, mappings), its
 * arguments and its results. A queued async execution is also a link of the device's queue. */
struct md__exec {
  md__exec *next;            /* the device's queue (exec_async.c) */
  uint64_t queued_ns;        /* when it was queued */
  md_device *d;
  md_handle client, prepared;
  bool cached;               /* ce, pe, tok and reg come from the thread's reference cache
                                (a synchronous execution), else each holds a reference */
  md__use ce, pe;            /* the client and the prepared model */
  md__hentry *ee;            /* async: the event (a reference) */
  md__prepared *p;
  const md_request *req;     /* the caller's; valid only during validation */
  uint32_t n_in, n_out, n_pools;
  io_arg *in, *out;
  md__mapping *maps;         /* per request pool; scope NULL for token and registered pools */
  md__use *tok;              /* per request pool: the buffer's entry (tok[i].e), or NULL */
  md__use *reg;              /* per request pool: the registered pool's entry, or NULL */
  md_output_shape *shapes;   /* n_out */
  md__pool_plan *plans;      /* per request pool, during validation */
  md_timing timing;
  md__run run;
  md_status inject;          /* what the first kernel reports instead of running (MD_NONE:
                                it runs): a fault plan's kernel_fail (GENERAL_FAILURE), or its
                                device_lost drawn by an async execution (DEVICE_UNAVAILABLE,
                                SPEC 8.9: the wait's status, not the call's) */
  bool stall;                /* a fault plan's stall: an async execution is parked before it
                                runs until a wait without deadline, its client's or its device's
                                close releases it (exec_async.c); its device work is issued
                                only then */
  bool issued;               /* an async execution's device work was issued by execute_async */
  char inject_msg[192];
  /* in, out, maps, tok, reg, shapes and plans live in the same allocation, after this struct */
};

/* Bytes of an operand of type t with the given dims (a scalar's size for a scalar). */
static inline uint64_t md__opnd_bytes(md_operand_type t, uint32_t rank, const uint32_t *dims) {
  return md__type_is_scalar(t) ? md_operand_type_size(t) : md__type_bytes(t, rank, dims);
}

/* Validates req against the prepared model `prepared` of `client` (fn, "execute" or
 * "execute_async", names the call in messages) and takes everything the execution uses:
 * references on the client, the prepared model, each token's buffer and each input's storage,
 * and the mapping of each memory pool. Checks, in SPEC 4's order: the handles, the request's
 * counts and pointers, each pool, each argument (pool range, dims, length, a token's role and
 * dims), that an output's token is no other argument of the request, then that token inputs
 * are initialized; maps the pools last (a pool that cannot be mapped is GENERAL_FAILURE) and
 * passes the backend's execution fault point (a kernel_fail it injects is kept for the run's
 * first kernel; any other injected status fails the call). On success *out is the execution
 * (free it with md__exec_free). On error the status is returned with a message, *out is NULL,
 * nothing is held, and the device outputs of the request whose tokens were resolved are left
 * uninitialized (SPEC 4). Thread-safe. */
md_status md__exec_create(md_device *d, const char *fn, md_handle client, md_handle prepared,
                          const md_request *req, md__exec **out);
/* Drops every reference and mapping x holds and frees it. Never fails; x may be half built. */
void md__exec_free(md__exec *x);

/* Test seam (exec_async.c): the most bytes an asynchronous execution may move between pools and
 * the device and still run in the calling thread (64 KiB; 0: every one is queued). */
extern _Atomic uint64_t md__async_inline_bytes;

/* Runs a validated execution once: x->shapes and x->timing are filled. On success the token
 * outputs take their new content and dims. On failure the status is returned, the calling
 * thread's last error says why, every device output of the request is left uninitialized, the
 * shapes are zeroed (except on OUTPUT_INSUFFICIENT_SIZE, where they say what was needed), the
 * timing is UINT64_MAX, and a DEVICE_UNAVAILABLE marks the device lost. With `async`, the
 * device work goes on the execution context's stream and is synchronized once at the end. */
md_status md__exec_run(md__exec *x, bool async);
/* md__exec_run in two halves: md__exec_issue does the host work and queues the device work
 * (with `async`, on the execution context's stream; the caller's thread then needs no device
 * synchronization), recording its status (the message is the calling thread's last error);
 * md__exec_finish, called exactly once after it, on any thread, synchronizes, judges the
 * kernels, commits or uninitializes the device outputs and returns the run's status as
 * md__exec_run does. issue_msg: the message md__exec_issue left, when finished on another
 * thread (NULL: the same thread). */
md_status md__exec_issue(md__exec *x, bool async);
md_status md__exec_finish(md__exec *x, const char *issue_msg);
/* Copies the run's results to the caller: the first n_shapes shapes (zeroed unless st is NONE
 * or OUTPUT_INSUFFICIENT_SIZE) and the timing. Either may be NULL. */
void md__exec_results(const md__exec *x, md_status st, md_output_shape *shapes, uint32_t n_shapes,
                      md_timing *timing);

#endif
