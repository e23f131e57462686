/* hip_ops.c - the built-in operations on platform "hip": kernel definitions whose check and shape
 * are the host reference's own (so prepare- and execute-time validation is identical on every
 * backend) and whose run validates the call the same way, then queues the HIP kernel on the
 * call's stream (hip_launch.h). Parameters (scalars, TENSOR_INT32) are host pointers; tensors
 * are device pointers, never dereferenced here. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hip_backend.h"
#include "md/backend.h"
#include "hip_error.h"
#include "hip_launch.h"
#include "kernels_int.h"
#include "md_math.h"

#define TRY(x)                            \
  do {                                    \
    md_status try_s_ = (x);               \
    if (try_s_ != MD_NONE) return try_s_; \
  } while (0)

enum { K_ADD, K_SUB, K_MUL, K_RELU, K_FC, K_SOFTMAX, K_RESHAPE, K_CONCAT, K_COUNT };
static const char *const names[K_COUNT] = {"ADD", "SUB", "MUL", "RELU", "FULLY_CONNECTED",
                                           "SOFTMAX", "RESHAPE", "CONCATENATION"};

static int is_param(md_operand_type t) {
  return t == MD_FLOAT32 || t == MD_INT32 || t == MD_UINT32 || t == MD_BOOL || t == MD_TENSOR_INT32;
}

/* Runs the host definition's shape() on the call (parameter values are host pointers; tensor
 * values are not given), so every execute-time rule and message is the reference's; then checks
 * that the first output has exactly that shape and a large enough buffer, and that every float
 * tensor is 4-byte aligned on the device. */
static md_status validate(const md_kernel_call *c, const md_kernel_def *host, md_tensor_shape *out,
                          md_kernel_status *st) {
  TRY(md__krun_counts(c, st, host->min_inputs, host->max_inputs, host->n_outputs));
  md_operand_info small[12], *info = small;
  uint32_t n = c->n_inputs + c->n_outputs;
  if (n > 12) {
    info = md_kernel_scratch(c->ctx, (uint64_t)n * sizeof *info);
    if (!info)
      return md_kernel_fail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT,
                            "no scratch memory for %" PRIu32 " operand views", n);
  }
  for (uint32_t i = 0; i < n; i++) {
    const md_tensor *t = i < c->n_inputs ? &c->inputs[i] : &c->outputs[i - c->n_inputs];
    int param = i < c->n_inputs && is_param(t->type);
    info[i] = (md_operand_info){.type = t->type, .rank = t->rank, .dims = t->dims,
                                .scale = t->scale, .zero_point = t->zero_point,
                                .lifetime = (param && !t->data) ? MD_NO_VALUE : MD_TEMPORARY_VARIABLE,
                                .value = param ? t->data : NULL, .length = param ? t->bytes : 0};
  }
  md_op_sig sig = {.n_inputs = c->n_inputs, .inputs = info, .n_outputs = c->n_outputs,
                   .outputs = info + c->n_inputs, .n_attrs = c->n_attrs, .attrs = c->attrs};
  TRY(host->shape(&sig, out, st, host->user));
  TRY(md__krun_output(st, 0, &c->outputs[0], &out[0], NULL));
  for (uint32_t i = 0; i < c->n_inputs; i++) {
    const md_tensor *t = &c->inputs[i];
    if (is_param(t->type)) continue;
    TRY(md__krun_buffer(st, "input", i, t, md__kcount(t->rank, t->dims)));
    if ((uintptr_t)t->data & 3u)
      return md_kernel_fail(st, MD_GENERAL_FAILURE,
                            "input %" PRIu32 ": device address %p is not 4-byte aligned", i, t->data);
  }
  if ((uintptr_t)c->outputs[0].data & 3u)
    return md_kernel_fail(st, MD_GENERAL_FAILURE, "output 0: device address %p is not 4-byte aligned",
                          c->outputs[0].data);
  return MD_NONE;
}

static int32_t param_i32(const md_tensor *t, int32_t dflt) {
  int32_t v = dflt;
  if (t->data && t->bytes >= 4) memcpy(&v, t->data, 4);
  return v;
}

/* A launcher's result: MD_NONE, or the mapped status with "<op>: <call>: <text>". */
static md_status launched(md_kernel_status *st, const char *op, hipError_t e) {
  if (e == hipSuccess) return MD_NONE;
  char msg[200];
  md_status s = md__hip_status(e, "kernel launch", msg, sizeof msg);
  return md_kernel_fail(st, s, "%s on hip: %s", op, msg);
}

static md_status run_op(int k, const md_kernel_call *c, md_kernel_status *st,
                        const md_kernel_def *host) {
  md_tensor_shape out[1];
  TRY(validate(c, host, out, st));
  hipStream_t s = (hipStream_t)c->stream;
  const md_tensor *in = c->inputs;
  float *o = c->outputs[0].data;
  switch (k) {
    case K_ADD:
    case K_SUB:
    case K_MUL: {
      md__bcast plan;
      uint32_t bad;
      if (md__bcast_init(&plan, in[0].rank, in[0].dims, in[1].rank, in[1].dims, &bad) != 0)
        return md_kernel_fail(st, MD_INVALID_ARGUMENT, "inputs do not broadcast (axis %" PRIu32 ")", bad);
      int op = k == K_ADD ? MD__BIN_ADD : k == K_SUB ? MD__BIN_SUB : MD__BIN_MUL;
      return launched(st, names[k],
                      md__hip_binary(s, op, param_i32(&in[2], 0), &plan, in[0].data,
                                     md__kcount(in[0].rank, in[0].dims), in[1].data,
                                     md__kcount(in[1].rank, in[1].dims), o));
    }
    case K_RELU:
      return launched(st, names[k], md__hip_relu(s, in[0].data, o, md__kcount(in[0].rank, in[0].dims)));
    case K_FC:
      return launched(st, names[k], md__hip_fc(s, in[0].data, in[1].data, in[2].data, o, out[0].dims[0],
                                               out[0].dims[1], in[1].dims[1], param_i32(&in[3], 0)));
    case K_SOFTMAX: {
      float beta;
      memcpy(&beta, in[1].data, 4); /* validated: a FLOAT32 value */
      int32_t a = c->n_inputs >= 3 ? param_i32(&in[2], -1) : -1;
      uint32_t rank = in[0].rank, axis = a < 0 ? (uint32_t)((int64_t)rank + a) : (uint32_t)a;
      uint64_t outer = 1, inner = 1;
      for (uint32_t i = 0; i < rank; i++) {
        if (i < axis) outer *= in[0].dims[i];
        if (i > axis) inner *= in[0].dims[i];
      }
      return launched(st, names[k], md__hip_softmax(s, in[0].data, o, outer, in[0].dims[axis], inner, beta));
    }
    case K_RESHAPE:
      return launched(st, names[k], md__hip_copy(s, o, in[0].data, md__kcount(in[0].rank, in[0].dims) * 4));
    case K_CONCAT: {
      const uint32_t nt = c->n_inputs - 1, rank = out[0].rank;
      int32_t a = param_i32(&in[nt], 0);
      uint32_t axis = a < 0 ? (uint32_t)((int64_t)rank + a) : (uint32_t)a;
      uint64_t outer = 1, inner = 1;
      for (uint32_t d = 0; d < rank; d++) {
        if (d < axis) outer *= out[0].dims[d];
        if (d > axis) inner *= out[0].dims[d];
      }
      const uint64_t total = (uint64_t)out[0].dims[axis] * inner;
      uint64_t off = 0;
      for (uint32_t i = 0; i < nt; i++) {
        const uint64_t chunk = (uint64_t)in[i].dims[axis] * inner;
        TRY(launched(st, names[k], md__hip_concat_part(s, o, in[i].data, outer, chunk, total, off)));
        off += chunk;
      }
      return MD_NONE;
    }
  }
  return md_kernel_fail(st, MD_GENERAL_FAILURE, "hip: unknown built-in %d", k);
}

/* The host definitions, found by name in the host tables; index K_*. */
static const md_kernel_def *host_defs[K_COUNT];

#define RUN_FN(K, fn) \
  static void fn(const md_kernel_call *c, md_kernel_status *st) { (void)run_op(K, c, st, host_defs[K]); }
RUN_FN(K_ADD, run_add)
RUN_FN(K_SUB, run_sub)
RUN_FN(K_MUL, run_mul)
RUN_FN(K_RELU, run_relu)
RUN_FN(K_FC, run_fc)
RUN_FN(K_SOFTMAX, run_softmax)
RUN_FN(K_RESHAPE, run_reshape)
RUN_FN(K_CONCAT, run_concat)
static void (*const runs[K_COUNT])(const md_kernel_call *, md_kernel_status *) = {
    run_add, run_sub, run_mul, run_relu, run_fc, run_softmax, run_reshape, run_concat};

static const md_kernel_def *host_def(const char *name) {
  static const struct { const md_kernel_def *t; const uint32_t *n; } tables[] = {
      {md__host_elementwise_kernels, &md__host_elementwise_count},
      {md__host_nn_kernels, &md__host_nn_count},
      {md__host_shape_kernels, &md__host_shape_count}};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (uint32_t i = 0; i < *tables[t].n; i++)
      if (strcmp(tables[t].t[i].name, name) == 0) return &tables[t].t[i];
  return NULL;
}

/* Which kernels this process has registered; a failed registration is tried again by the next
 * call (a transient failure, or a user kernel holding the name, must not disable the backend for
 * the life of the process). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_mine[K_COUNT];

/* Thread-safe (a mutex). Registers what is not registered yet, in order; stops at the first
 * failure, keeping what was registered. */
md_status md__hip_register_kernels(char *err, size_t errlen) {
  md_status st = MD_NONE;
  pthread_mutex_lock(&reg_lock);
  for (int k = 0; k < K_COUNT && st == MD_NONE; k++) {
    if (reg_mine[k]) continue;
    const md_kernel_def *h = host_def(names[k]);
    if (!h) {
      st = md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "hip: no host reference kernel %s", names[k]);
      break;
    }
    host_defs[k] = h; /* before the kernel is published: its run reads it */
    md_kernel_def d = *h;
    d.platform = "hip";
    d.run = runs[k];
    d.user = NULL;
    st = md__kernel_register_builtin(&d);
    if (st != MD_NONE)
      (void)md_backend_fail(err, errlen, st, "hip: registering %s: %s", names[k], md_kernel_registry_error());
    else
      reg_mine[k] = 1;
  }
  pthread_mutex_unlock(&reg_lock);
  return st;
}
