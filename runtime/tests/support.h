/* support.h - helpers shared by the runtime's Criterion tests: pools backed by real memfds,
 * small model builders, and the driver under test. */
#ifndef MD_TEST_SUPPORT_H
#define MD_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include "md/driver.h"

/* The reference driver, linked into the test (not through dlopen). */
const md_driver *mdt_driver(void);

/* A memfd of `size` bytes holding `data` (NULL: zeros). Aborts the test on failure. */
int mdt_memfd(const void *data, size_t size);
/* An ASHMEM md_memory for fd (whole file, read+write). */
md_memory mdt_ashmem(int fd, uint64_t size);
/* Reads `size` bytes at offset 0 of fd into out. */
void mdt_read_fd(int fd, void *out, size_t size);

/* One-operation float32 model: out = op(in0, in1) with a CONSTANT_COPY INT32 activation
 * (ADD/SUB/MUL), all tensors with the given rank/dims (0 entries allowed). The returned model
 * points into static storage of this helper: valid until the next call from the same thread. */
const md_model *mdt_binary_model(md_operation_type op, uint32_t rank, const uint32_t *dims,
                                 int32_t activation);

/* Opens a sim device with the given config (NULL: "backend=sim") and one client. */
typedef struct mdt_env {
  const md_driver *drv;
  md_device *dev;
  md_handle client;
} mdt_env;
void mdt_env_open(mdt_env *env, const char *config);
/* Closes the client (asserting no leaks unless allow_leaks) and the device. */
void mdt_env_close(mdt_env *env, int allow_leaks);

#endif

/* ---- Helpers of the black-box rule suite (test_spec_*.c). They use only the md_driver table
 * given in the env (so test_dlopen.c can drive a dlopen'ed driver with them), plus, for the
 * test kernels, the public kernel registry (md/kernel.h). ---- */
#include <stdbool.h>

#define MDT_N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* An MMAP_FD pool: `size` bytes at `offset` of fd, read+write. */
md_memory mdt_mmap_fd(int fd, uint64_t offset, uint64_t size);
/* A BLOB hardware buffer pool of `width` bytes on fd (size = width, height = layers = 1,
 * format AHARDWARE_BUFFER_FORMAT_BLOB 0x21). */
#define MDT_HWB_FORMAT_BLOB 0x21u
md_memory mdt_hwb_blob(int fd, uint32_t width);
/* A non-BLOB hardware buffer pool: format R8G8B8A8_UNORM (1, 4 bytes a pixel), width x height,
 * one layer; offset and size 0 (its logical size is 0; its bytes are width * height * 4). */
#define MDT_HWB_FORMAT_RGBA8888 1u
md_memory mdt_hwb_image(int fd, uint32_t width, uint32_t height);
/* An fd that passes every pool check SPEC section 2 lists (>= 0, open, `size` bytes long) but
 * that no mmap accepts: a memfd reopened write-only (mmap needs read access). */
int mdt_unmappable_fd(size_t size);
/* Closes fd if >= 0. */
void mdt_close_fd(int fd);

/* register_memory for `client` (SPEC 9), asserting success; returns the pool's handle. */
md_handle mdt_register(const mdt_env *env, md_handle client, md_memory m);

/* A second client on the env's device (asserts success). */
md_handle mdt_open_client(const mdt_env *env);
/* Closes a client, asserting success; leaks may be NULL. */
void mdt_close_client(const mdt_env *env, md_handle client, md_leak_report *leaks);

/* prepare_model for the env's client, asserting success (with last_error in the message). */
md_handle mdt_prepare(const mdt_env *env, const md_model *m);
md_handle mdt_prepare_for(const mdt_env *env, md_handle client, const md_model *m);
void mdt_release(const mdt_env *env, md_handle prepared);

/* allocate with one prepared model and one role (input when !is_output), desc (rank, dims);
 * returns the status and writes *token. */
md_status mdt_try_alloc(const mdt_env *env, md_handle client, md_handle prepared, bool is_output,
                        uint32_t io, uint32_t rank, const uint32_t *dims, md_token *token);
/* The same, asserting success. */
md_token mdt_alloc(const mdt_env *env, md_handle prepared, bool is_output, uint32_t io,
                   uint32_t rank, const uint32_t *dims);
/* A buffer usable as input io and as output `out_io` of `prepared` (desc rank, dims). */
md_token mdt_alloc_inout(const mdt_env *env, md_handle prepared, uint32_t in_io, uint32_t out_io,
                         uint32_t rank, const uint32_t *dims);
void mdt_free(const mdt_env *env, md_token t);

/* copy_from of `bytes` bytes of data through an ASHMEM pool, with dims (rank, dims). */
md_status mdt_copy_from(const mdt_env *env, md_handle client, md_token t, const void *data,
                        uint64_t bytes, uint32_t rank, const uint32_t *dims);
/* copy_to into an ASHMEM pool of `bytes` bytes; on MD_NONE the bytes are read into out (may be
 * NULL). */
md_status mdt_copy_to(const mdt_env *env, md_handle client, md_token t, void *out, uint64_t bytes);

/* A request under construction. Every arg added with data/bytes gets its own memfd pool. */
typedef struct mdt_request {
  md_request_arg in[8], out[8];
  uint32_t in_dims[8][MD_MAX_RANK], out_dims[8][MD_MAX_RANK];
  md_request_pool pools[16];
  int fds[16];
  uint32_t n_in, n_out, n_pools;
  md_request req;
} mdt_request;
void mdt_req_init(mdt_request *r);
/* Adds a pool (a memory, or a token) and returns its index. A memory's fd is not owned. */
uint32_t mdt_req_pool_mem(mdt_request *r, md_memory m);
uint32_t mdt_req_pool_token(mdt_request *r, md_token t);
/* A registered pool (SPEC 9: is_token 2, token = the pool's handle). */
uint32_t mdt_req_pool_registered(mdt_request *r, md_handle pool);
/* Adds an input/output arg on pool `pool` (offset, length, dims); returns the arg index. */
uint32_t mdt_req_in_arg(mdt_request *r, uint32_t pool, uint64_t offset, uint64_t length,
                        uint32_t rank, const uint32_t *dims);
uint32_t mdt_req_out_arg(mdt_request *r, uint32_t pool, uint64_t offset, uint64_t length,
                         uint32_t rank, const uint32_t *dims);
/* An input holding `bytes` bytes of data in a new ASHMEM pool (length = bytes). */
uint32_t mdt_req_in_data(mdt_request *r, const void *data, uint64_t bytes, uint32_t rank,
                         const uint32_t *dims);
/* An output on a new zero-filled ASHMEM pool of `bytes` bytes (length = bytes). */
uint32_t mdt_req_out_pool(mdt_request *r, uint64_t bytes, uint32_t rank, const uint32_t *dims);
/* A token input/output (its own token pool, offset = length = 0). */
uint32_t mdt_req_in_token(mdt_request *r, md_token t, uint32_t rank, const uint32_t *dims);
uint32_t mdt_req_out_token(mdt_request *r, md_token t, uint32_t rank, const uint32_t *dims);
/* The md_request (pointers into r; valid while r is). */
const md_request *mdt_req(mdt_request *r);
/* Reads `bytes` bytes of output arg i from its memfd pool (at the arg's offset). */
void mdt_req_read_out(const mdt_request *r, uint32_t i, void *out, uint64_t bytes);
/* Closes the memfds the request created. */
void mdt_req_fini(mdt_request *r);

/* execute for the env's client with n_shapes = the request's output count. shapes (8 entries)
 * are pre-filled with garbage (rank 0xAB..) and timing with 0 before the call. */
md_status mdt_exec(const mdt_env *env, md_handle prepared, mdt_request *r,
                   md_output_shape *shapes, md_timing *timing);

/* ---- a small model builder (caller-owned storage) ---- */
typedef struct mdt_model {
  md_operand operands[16];
  uint32_t dims[16][MD_MAX_RANK];
  md_operation ops[4];
  uint32_t op_in[4][8], op_out[4][4];
  uint32_t inputs[8], outputs[8];
  uint8_t values[256];
  md_memory pools[4];
  md_model model;
} mdt_model;
void mdt_mb_init(mdt_model *b);
/* Adds an operand; rank 0 with a tensor type = unknown rank. Returns its index. Model inputs
 * and outputs are listed in the order their operands are added. */
uint32_t mdt_mb_operand(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                        md_lifetime lifetime);
uint32_t mdt_mb_tensor_f32(mdt_model *b, uint32_t rank, const uint32_t *dims, md_lifetime lifetime);
/* A quantized (TENSOR_QUANT8_ASYMM) operand with scale and zero point. */
uint32_t mdt_mb_quant8(mdt_model *b, uint32_t rank, const uint32_t *dims, float scale, int32_t zp,
                       md_lifetime lifetime);
/* A CONSTANT_COPY operand holding `len` bytes (appended to operand_values). */
uint32_t mdt_mb_const_copy(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                           const void *data, uint32_t len);
uint32_t mdt_mb_const_i32(mdt_model *b, int32_t v);
/* A CONSTANT_REFERENCE operand at (offset, length) of pool `pool` (added with mdt_mb_pool). */
uint32_t mdt_mb_const_ref(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                          uint32_t pool, uint64_t offset, uint64_t length);
uint32_t mdt_mb_pool(mdt_model *b, md_memory m);
/* Adds an operation (custom_name for MD_OP_CUSTOM, else NULL). */
void mdt_mb_op(mdt_model *b, md_operation_type type, const char *custom_name, uint32_t n_in,
               const uint32_t *in, uint32_t n_out, const uint32_t *out);
const md_model *mdt_mb_model(mdt_model *b);

/* out = a + b (+ activation) on TENSOR_FLOAT32 operands of the given dims (each rank/dims may
 * differ: broadcasting). */
const md_model *mdt_add_model(mdt_model *b, uint32_t ra, const uint32_t *da, uint32_t rb,
                              const uint32_t *db, uint32_t ro, const uint32_t *dout, int32_t act);
/* Two outputs from two ADDs of the same inputs: out0 = a + b, out1 = a + b; all with dims. */
const md_model *mdt_add2_model(mdt_model *b, uint32_t rank, const uint32_t *dims);
/* out = a + b with the INT32 activation a third model input (a scalar role). */
const md_model *mdt_add_act_input_model(mdt_model *b, uint32_t rank, const uint32_t *dims);

/* Test kernels in the public registry, platform "host" (which the sim platform falls back
 * to). Idempotent.
 *   "mdt.copy"  : one input of any type, one output = a copy of it (its dims)
 *   "mdt.noop"  : one input, one output with the input's dims, writes nothing
 *   "mdt.fail"  : one input, one output with the input's dims, fails with MDT_FAIL_MESSAGE */
#define MDT_FAIL_MESSAGE "mdt.fail: this kernel always fails"
void mdt_register_test_kernels(void);
/* in -> custom kernel `name` -> out, both of type `type` with (scale, zp) and dims. */
const md_model *mdt_custom_model(mdt_model *b, const char *name, md_operand_type type, float scale,
                                 int32_t zp, uint32_t rank, const uint32_t *dims);

/* Fills a float array with a recognisable sequence base, base+1, ... */
void mdt_iota(float *v, uint32_t n, float base);
