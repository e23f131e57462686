/* kernel_ctx.h - private to the runtime and md_kernels: the md_kernel_ctx behind
 * md_kernel_scratch, and the status conventions of kernel check/shape/run functions.
 *
 * Using a context (the runtime, once per kernel invocation):
 *
 *   md_kernel_ctx ctx;
 *   md__kctx_init(&ctx, MD__KCTX_DEFAULT_LIMIT);
 *   call.ctx = &ctx;
 *   def->run(&call, &st);            // the kernel may call md_kernel_scratch(call->ctx, n)
 *   md__kctx_release(&ctx);          // frees every scratch block; ctx may be reused
 *
 * Status conventions of every built-in kernel (user kernels are asked to follow them; the
 * runtime relies on the first one):
 *  - check() (prepare time): MD_INVALID_ARGUMENT when the operation is invalid under the NN HAL
 *    rules (wrong operand count, type, rank, a definitely conflicting dim, a constant parameter
 *    out of range): the model is invalid. MD_GENERAL_FAILURE when the operation is valid but no
 *    kernel here can run it (a TENSOR_QUANT8_ASYMM / TENSOR_FLOAT16 / ... tensor: the message
 *    reads "input 0: TENSOR_QUANT8_ASYMM not supported"): the runtime reports it as unsupported
 *    in get_supported_operations and fails prepare_model with GENERAL_FAILURE. An invalid
 *    operation is reported as invalid even if it is also unsupported. Unknown dims (rank 0, or
 *    a 0 entry) and non-constant parameters are never rejected at prepare time.
 *  - shape() (execute time): MD_INVALID_ARGUMENT when the execution's dims or parameter values
 *    are inconsistent (dims that do not broadcast, a RESHAPE whose element count differs, an
 *    activation value out of range given as a model input, ...).
 *  - run(): MD_INVALID_ARGUMENT for a bad parameter value (what shape() already rejects);
 *    MD_GENERAL_FAILURE when the buffers are inconsistent with the computed shapes (a buffer
 *    smaller than its dims imply, output dims that differ from the computed ones, an
 *    unsupported type); MD_RESOURCE_EXHAUSTED_TRANSIENT when scratch memory cannot be had. A
 *    kernel never writes past md_tensor.bytes: it checks sizes before writing anything.
 * Messages name the operand as "input 2 (fused activation)" / "output 0"; the runtime adds the
 * operation ("operation 3 (ADD): ..."). */
#ifndef MD_KERNEL_CTX_H
#define MD_KERNEL_CTX_H

#include <stdatomic.h>
#include <stdint.h>

#include "md/kernel.h"

/* Whether k (as md_kernel_find returned it, or NULL) is a built-in kernel: the runtime's own,
 * which runs to its end without waiting on anything (a user kernel may block: the runtime never
 * runs one where a caller expects to return at once). Lock-free. */
int md__kernel_is_builtin(const md_kernel_def *k);

/* A limit the runtime may pass when it has no better one: 256 MiB of scratch per invocation. */
#define MD__KCTX_DEFAULT_LIMIT (UINT64_C(256) << 20)
/* No limit beyond what the allocator gives. */
#define MD__KCTX_UNLIMITED UINT64_MAX
/* Alignment of every scratch pointer. */
#define MD__KCTX_ALIGN 64u

/* The scratch allocator of one kernel invocation. Its fields are private to registry.c; the
 * definition is here only so the runtime can place a context on its stack. */
struct md_kernel_ctx {
  uint64_t limit;       /* bytes the kernel may request in total */
  uint64_t used;        /* bytes requested so far (as requested, not rounded) */
  void *blocks;         /* singly linked list of allocations, newest first */
};

/* Initializes an empty context allowing `limit_bytes` of scratch in total (0: no scratch at
 * all; MD__KCTX_UNLIMITED: bounded by memory only). Allocates nothing, cannot fail. Not
 * thread-safe: a context belongs to one invocation on one thread. */
void md__kctx_init(md_kernel_ctx *c, uint64_t limit_bytes);

/* Frees every scratch block handed out since init (or the previous release) and resets the
 * count, keeping the limit, so the context may be reused. Call it after the kernel returned
 * (and, on a stream, after the work that uses the scratch finished). NULL is ignored. */
void md__kctx_release(md_kernel_ctx *c);

/* Devices open in this process (the runtime counts them). The registry frees its definitions
 * when the library is unloaded only while this is 0. */
extern _Atomic uint32_t md__kernel_registry_pins;

#endif
