/* wl_common.h - private to sim/workloads: what the simulated workloads share. Driver loading
 * (the linked reference driver or a dlopen'ed one), command-line options, status checks that
 * end the program with a clear message, a deterministic PRNG, memfd pool helpers, small model
 * and request builders, float comparison against a host reference, a result digest and the
 * summary line.
 *
 * Every workload is a plain program: it exits 0 after printing
 * "workload NAME: PASS (...)", or 1 after printing "workload NAME: FAIL: ..." on stderr.
 * Nothing here depends on the reference driver's internals: only md/driver.h and
 * md/status.h (status names). */
#ifndef MD_WL_COMMON_H
#define MD_WL_COMMON_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"

/* ---- the run: options, device, counters ---------------------------------------------------- */

typedef struct wl_ctx {
  const char *name;          /* "sequence", ... */
  const char *driver_path;   /* --driver: NULL = the linked reference driver */
  char config[512];          /* --config, with ";seed=N" appended when it names no seed */
  uint64_t seed;             /* --seed (default 1) */
  uint32_t steps;            /* --steps (default: the workload's) */
  const md_driver *drv;
  md_device *dev;
  void *dl;                  /* dlopen handle when driver_path is set */
  /* Counted from any thread; reported in the summary line. */
  _Atomic uint64_t executions, copies, rejections;
} wl_ctx;

/* Parses argv (--driver PATH.so, --config STR, --seed N, --steps N, --help); exits 2 on a bad
 * option. default_steps is the workload's --steps default (0: the workload takes no steps). */
void wl_init(wl_ctx *ctx, const char *name, int argc, char **argv, uint32_t default_steps);
/* Loads the driver (md_driver_entry(1) of the linked or dlopen'ed driver), checks its table,
 * opens the device with ctx->config and checks that it supports memory domains. Exits 1 with a
 * message on any failure. */
void wl_open(wl_ctx *ctx);
/* Closes a client that should hold nothing any more: close_client must succeed and its leak
 * report must be all zeros (SPEC 5); exits 1 with a message otherwise. */
void wl_close_client_clean(wl_ctx *ctx, md_handle client);
/* Closes the device and unloads a dlopen'ed driver. */
void wl_close(wl_ctx *ctx);
/* Prints "workload NAME: PASS (N executions, M copies, K expected rejections, digest D[, extra])"
 * on stdout. extra may be NULL. */
void wl_pass(wl_ctx *ctx, uint64_t digest, const char *extra_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prints "workload NAME: FAIL: <message>" on stderr and exits 1. Callable from any thread. */
_Noreturn void wl_fail(const wl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Status checks. WL_OK: the call must return MD_NONE; WL_EXPECT: it must return `want`. On a
 * mismatch: the call's text, both status names and the driver's last_error (the calling
 * thread's), then exit 1. `why` (WL_EXPECT) names the rule, e.g. "SPEC 5: another client's
 * token". Both count nothing; callers count executions/copies/rejections themselves. */
#define WL_OK(ctx, call) wl_check_((ctx), (call), MD_NONE, #call, NULL, __FILE__, __LINE__)
#define WL_EXPECT(ctx, call, want, why) wl_check_((ctx), (call), (want), #call, (why), __FILE__, __LINE__)
void wl_check_(wl_ctx *ctx, md_status got, md_status want, const char *call, const char *why,
               const char *file, int line);

/* ---- deterministic PRNG (splitmix64): the same seed and stream give the same numbers ------- */

typedef struct wl_rng { uint64_t s; } wl_rng;
/* A generator for (seed, stream): independent streams for threads/clients/purposes. */
void wl_rng_init(wl_rng *r, uint64_t seed, uint64_t stream);
uint64_t wl_rng_u64(wl_rng *r);
/* Uniform in [0, n) (n > 0). */
uint32_t wl_rng_below(wl_rng *r, uint32_t n);
/* Uniform float in [lo, hi). */
float wl_rng_float(wl_rng *r, float lo, float hi);
/* Fills v[0..n) with uniform floats in [lo, hi). */
void wl_rng_fill(wl_rng *r, float *v, size_t n, float lo, float hi);

/* ---- memfd pools ---------------------------------------------------------------------------- */

/* A memfd of `size` bytes holding `data` (NULL: zeros). Exits on failure. */
int wl_memfd(const wl_ctx *ctx, const char *name, const void *data, size_t size);
/* Writes / reads `n` bytes at `off` of fd. Exit on a short transfer. */
void wl_fd_write(const wl_ctx *ctx, int fd, uint64_t off, const void *data, size_t n);
void wl_fd_read(const wl_ctx *ctx, int fd, uint64_t off, void *out, size_t n);
/* An ASHMEM pool: the whole memfd (offset 0, size = its size), read+write. */
md_memory wl_ashmem(int fd, uint64_t size);
/* An MMAP_FD pool: `size` bytes at `offset` of fd, read+write. */
md_memory wl_mmap_fd(int fd, uint64_t offset, uint64_t size);
/* A HARDWARE_BUFFER_BLOB pool of `width` bytes (height = layers = 1, format BLOB 0x21),
 * emulated by an fd as the SPEC's drivers do. */
#define WL_HWB_FORMAT_BLOB 0x21u
md_memory wl_blob(int fd, uint32_t width);

/* A staging area for copy_to/copy_from: one memfd reused for every transfer (as an app
 * reuses its staging memory), exposed as an MMAP_FD pool of exactly the bytes moved. */
typedef struct wl_staging { int fd; size_t cap; } wl_staging;
void wl_staging_open(const wl_ctx *ctx, wl_staging *s, size_t cap);
void wl_staging_close(wl_staging *s);
/* copy_from(token, dims) of n floats from v; must return MD_NONE (a failure names the caller's
 * line); counts one copy. */
#define wl_copy_from(ctx, s, client, tok, v, n, rank, dims) \
  wl_copy_from_((ctx), (s), (client), (tok), (v), (n), (rank), (dims), __FILE__, __LINE__)
void wl_copy_from_(wl_ctx *ctx, wl_staging *s, md_handle client, md_token tok, const float *v,
                   size_t n, uint32_t rank, const uint32_t *dims, const char *file, int line);
/* copy_to(token) of n floats into out; must return MD_NONE; counts one copy. */
#define wl_copy_to(ctx, s, client, tok, out, n) \
  wl_copy_to_((ctx), (s), (client), (tok), (out), (n), __FILE__, __LINE__)
void wl_copy_to_(wl_ctx *ctx, wl_staging *s, md_handle client, md_token tok, float *out, size_t n,
                 const char *file, int line);
/* The MMAP_FD pool of the first `bytes` of the staging memfd (for expected-failure calls). */
md_memory wl_staging_mem(const wl_staging *s, size_t bytes);

/* ---- model builder: fixed-capacity storage, so it can live on a thread's stack -------------- */

enum { WL_MAX_OPERANDS = 32, WL_MAX_OPERATIONS = 16, WL_MAX_OP_IO = 8, WL_MAX_MODEL_IO = 8,
       WL_MAX_POOLS = 4, WL_MAX_VALUES = 2048 };

typedef struct wl_model {
  md_operand operands[WL_MAX_OPERANDS];
  uint32_t dims[WL_MAX_OPERANDS][MD_MAX_RANK];
  md_operation operations[WL_MAX_OPERATIONS];
  uint32_t op_io[WL_MAX_OPERATIONS][WL_MAX_OP_IO];
  uint32_t inputs[WL_MAX_MODEL_IO], outputs[WL_MAX_MODEL_IO];
  _Alignas(8) uint8_t values[WL_MAX_VALUES];
  md_memory pools[WL_MAX_POOLS];
  uint32_t n_operands, n_operations, n_inputs, n_outputs, n_pools;
  uint64_t n_values;
  md_model model;
  const wl_ctx *ctx;      /* for failure messages (capacity) */
} wl_model;

void wl_model_init(wl_model *m, const wl_ctx *ctx);
/* TENSOR_FLOAT32 operands. A model input/output is appended to the model's input/output list
 * in creation order. dims may hold 0 entries (unknown); rank 0 = unknown rank. */
uint32_t wl_input(wl_model *m, uint32_t rank, const uint32_t *dims);
uint32_t wl_output(wl_model *m, uint32_t rank, const uint32_t *dims);
uint32_t wl_temp(wl_model *m, uint32_t rank, const uint32_t *dims);
/* CONSTANT_COPY operands (the value is copied into the model's operand_values, 4-aligned). */
uint32_t wl_const_i32(wl_model *m, int32_t v);
uint32_t wl_const_f32(wl_model *m, float v);
uint32_t wl_const_tensor(wl_model *m, uint32_t rank, const uint32_t *dims, const float *v);
uint32_t wl_const_i32_tensor(wl_model *m, uint32_t rank, const uint32_t *dims, const int32_t *v);
/* A constant pool; returns its index in md_model.pools. */
uint32_t wl_pool(wl_model *m, md_memory mem);
/* CONSTANT_REFERENCE TENSOR_FLOAT32 [dims] at `offset` of pool (length = its byte size). */
uint32_t wl_const_ref(wl_model *m, uint32_t pool, uint64_t offset, uint32_t rank,
                      const uint32_t *dims);
/* An operation reading ins[0..n_in) and writing out. */
void wl_op(wl_model *m, md_operation_type type, uint32_t n_in, const uint32_t *ins, uint32_t out);
/* The md_model view (points into m; valid while m is). */
const md_model *wl_model_get(wl_model *m);

/* Fused activation codes (NN HAL FusedActivationFunc). */
enum { WL_ACT_NONE = 0, WL_ACT_RELU = 1, WL_ACT_RELU1 = 2, WL_ACT_RELU6 = 3 };

/* ---- request builder ----------------------------------------------------------------------- */

enum { WL_MAX_REQ_POOLS = 8, WL_MAX_REQ_ARGS = 8 };
typedef struct wl_request {
  md_request_pool pools[WL_MAX_REQ_POOLS];
  md_request_arg in[WL_MAX_REQ_ARGS], out[WL_MAX_REQ_ARGS];
  uint32_t in_dims[WL_MAX_REQ_ARGS][MD_MAX_RANK], out_dims[WL_MAX_REQ_ARGS][MD_MAX_RANK];
  md_request req;
  const wl_ctx *ctx;
} wl_request;

void wl_req_init(wl_request *r, const wl_ctx *ctx);
uint32_t wl_req_token(wl_request *r, md_token tok);          /* a token pool; its index */
uint32_t wl_req_memory(wl_request *r, md_memory mem);        /* a memory pool; its index */
/* Arguments, in model input/output order. rank 0: the model's dims. */
void wl_req_in(wl_request *r, uint32_t pool, uint64_t offset, uint64_t length, uint32_t rank,
               const uint32_t *dims);
void wl_req_out(wl_request *r, uint32_t pool, uint64_t offset, uint64_t length, uint32_t rank,
                const uint32_t *dims);
/* A token argument (its own pool, offset = length = 0, the model's dims). */
void wl_req_in_token(wl_request *r, md_token tok);
void wl_req_out_token(wl_request *r, md_token tok);
const md_request *wl_req_get(wl_request *r);

/* ---- checks against the host ---------------------------------------------------------------- */

/* Fails unless |got - want| <= tol * (1 + |want|) for every element (NaN never matches).
 * `what` names the values ("step 17: y"). */
void wl_expect_close(const wl_ctx *ctx, const char *what, const float *got, const float *want,
                     size_t n, float tol);
/* Fails unless shape has rank `rank`, the given dims and is_sufficient = 1. */
void wl_expect_shape(const wl_ctx *ctx, const char *what, const md_output_shape *shape,
                     uint32_t rank, const uint32_t *dims);

/* Host reference kernels (NN HAL semantics, the same operation order as a plain loop). */
float wl_act(int32_t act, float x);
/* out[b][u] = act(sum_i in[b][i] * w[u][i] + bias[u]) */
void wl_host_fc(const float *in, const float *w, const float *bias, uint32_t batch, uint32_t in_size,
                uint32_t units, int32_t act, float *out);
/* Row-wise softmax of [rows, cols] with beta. */
void wl_host_softmax(const float *in, uint32_t rows, uint32_t cols, float beta, float *out);

/* FNV-1a 64 over bytes, chained from h (start with WL_DIGEST_INIT). */
#define WL_DIGEST_INIT 0xcbf29ce484222325ull
uint64_t wl_digest(uint64_t h, const void *data, size_t n);

#endif
