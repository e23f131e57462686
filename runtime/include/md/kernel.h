/* md/kernel.h - the kernel registry (SPEC section 7): built-in and user kernels, keyed by
 * (name, platform).
 *
 * Every operation of a model runs through a registered kernel. The built-in operations are
 * registered by name ("ADD", "SUB", "MUL", "RELU", "FULLY_CONNECTED", "SOFTMAX", "RESHAPE",
 * "CONCATENATION") for the platforms "host" and "sim" (and "hip" when built with HIP), exactly
 * like a user kernel. An MD_OP_CUSTOM operation names its kernel with md_operation.custom_name.
 *
 * Platforms: "host" kernels take host pointers. A device looks a kernel up under its own
 * platform first; the "sim" platform falls back to "host" (simulated device memory is host
 * addressable through the backend), "hip" does not.
 *
 * Data residency: tensors of type TENSOR_FLOAT32 (and other non-INT32 tensor types) live in
 * device memory on GPU platforms; scalars (FLOAT32, INT32, UINT32, BOOL) and TENSOR_INT32
 * operands ("parameters") are always given to kernels as host pointers. */
#ifndef MD_KERNEL_H
#define MD_KERNEL_H

#include <stddef.h>
#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MD_KERNEL_API_VERSION 1u
#define MD_KERNEL_MESSAGE_MAX 256u

/* How a kernel reports failure: set code != MD_NONE and a message (md_kernel_fail). The
 * runtime turns a failed kernel into GENERAL_FAILURE for the execution, with this message in
 * last_error. */
typedef struct md_kernel_status {
  md_status code;
  char message[MD_KERNEL_MESSAGE_MAX];
} md_kernel_status;

/* Sets st->code (MD_GENERAL_FAILURE if code is MD_NONE) and a printf-style message. Returns
 * the code, so a kernel can `return md_kernel_fail(...)` from a status-returning helper. */
md_status md_kernel_fail(md_kernel_status *st, md_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One operand as a kernel sees it when the model is prepared (check) or when it runs
 * (shape, run). `dims` has `rank` entries; at prepare a 0 entry (or rank 0 for a tensor) is
 * unknown. `value` is non-NULL for constant operands at prepare time and for every parameter
 * operand (scalars, TENSOR_INT32) at execute time; it has `length` bytes. */
typedef struct md_operand_info {
  md_operand_type type;
  uint32_t rank;
  const uint32_t *dims;
  float scale;
  int32_t zero_point;
  md_lifetime lifetime;
  const void *value;
  uint64_t length;
} md_operand_info;

typedef struct md_op_sig {
  uint32_t n_inputs;
  const md_operand_info *inputs;
  uint32_t n_outputs;
  const md_operand_info *outputs;
  uint32_t n_attrs;
  const md_attr *attrs;            /* sorted by name, names unique (checked by the runtime) */
} md_op_sig;

/* An output's shape as computed by a kernel's shape function. */
typedef struct md_tensor_shape {
  uint32_t rank;
  uint32_t dims[MD_MAX_RANK];
} md_tensor_shape;

/* A tensor handed to a running kernel. `data` is a host pointer on "host"/"sim", a device
 * pointer on "hip" (parameters: always host, see above). `bytes` is the size of the buffer. */
typedef struct md_tensor {
  md_operand_type type;
  uint32_t rank;
  uint32_t dims[MD_MAX_RANK];
  void *data;
  uint64_t bytes;
  float scale;
  int32_t zero_point;
} md_tensor;

typedef struct md_kernel_ctx md_kernel_ctx;   /* opaque, owned by the runtime */

/* A kernel invocation: inputs then outputs flattened in operation order. */
typedef struct md_kernel_call {
  uint32_t struct_size;
  const char *platform;
  uint32_t n_inputs;
  const md_tensor *inputs;
  uint32_t n_outputs;
  md_tensor *outputs;
  uint32_t n_attrs;
  const md_attr *attrs;
  void *stream;                    /* hipStream_t on "hip"; NULL elsewhere */
  md_kernel_ctx *ctx;              /* for md_kernel_scratch */
  void *user;                      /* md_kernel_def.user */
} md_kernel_call;

/* Scratch memory for the running kernel, `bytes` long, 64-byte aligned, in the kernel's own
 * address space (host memory on host/sim). Valid until the kernel returns; freed by the
 * runtime. NULL if it cannot be had (the kernel should then fail with
 * RESOURCE_EXHAUSTED_TRANSIENT). */
void *md_kernel_scratch(md_kernel_ctx *ctx, uint64_t bytes);

/* A declared attribute of a kernel: prepare_model checks the operation's attributes against
 * the list (unknown name, wrong kind, missing required one: INVALID_ARGUMENT naming it). */
typedef struct md_attr_spec {
  const char *name;
  md_attr_kind kind;
  int required;
} md_attr_spec;

typedef struct md_kernel_def {
  uint32_t struct_size;            /* sizeof(md_kernel_def) */
  const char *name;                /* "ADD" ... or a custom name; copied at registration */
  const char *platform;            /* "host", "sim" or "hip"; copied */
  uint32_t min_inputs, max_inputs; /* accepted input count range */
  uint32_t n_outputs;              /* exact output count */
  const md_attr_spec *attr_specs;  /* copied at registration */
  uint32_t n_attr_specs;
  /* Prepare time, optional: types, ranks, known dims, constant values, attributes. Return
   * MD_NONE, or fail with a message naming the operand ("input 1: ..."). */
  md_status (*check)(const md_op_sig *sig, md_kernel_status *st, void *user);
  /* Execute time: all input dims known, parameter values present. Fill out[0..n_outputs).
   * NULL: outputs take the model's declared dims, which must then be fully known. */
  md_status (*shape)(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st, void *user);
  /* Runs the kernel. Report failure through st; never abort. */
  void (*run)(const md_kernel_call *call, md_kernel_status *st);
  void *user;
} md_kernel_def;

/* Registers a kernel in the process-wide registry. Thread-safe. Fails with INVALID_ARGUMENT
 * for a duplicate (name, platform), a NULL/empty name or platform, an unknown platform, a NULL
 * run, or struct_size too small; the message is in md_kernel_registry_error(). Built-ins are
 * registered before the first lookup. */
md_status md_kernel_register(const md_kernel_def *def);

/* Removes a user kernel (not a built-in) from lookups. Prepared models that already resolved
 * it keep running it: a definition's memory is kept until the process ends, so nothing a
 * prepared model holds dangles. INVALID_ARGUMENT if absent or built-in. Thread-safe. */
md_status md_kernel_unregister(const char *name, const char *platform);

/* Looks up (name, platform); NULL if absent. The returned definition stays valid until it is
 * unregistered. Thread-safe; lock-free after the registry is built. */
const md_kernel_def *md_kernel_find(const char *name, const char *platform);

/* The calling thread's last registry failure message; never NULL. */
const char *md_kernel_registry_error(void);

/* Name of a built-in operation type ("ADD"), or NULL for MD_OP_CUSTOM / unknown values. */
const char *md_operation_name(md_operation_type type);

/* Name of an operand type ("TENSOR_FLOAT32"); "type N" for a value outside the enum (in a
 * thread-local buffer). */
const char *md_operand_type_name(md_operand_type type);

/* Byte size of one element of `type` (0 for an unknown type). */
size_t md_operand_type_size(md_operand_type type);

#ifdef __cplusplus
}
#endif
#endif
