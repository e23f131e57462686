/* custom_op.c - example: a user kernel ("example.scale_shift") registered in the kernel
 * registry, then run end to end through the driver ABI on the simulator.
 *
 * The kernel computes y = clamp(x * scale + shift, -clamp, clamp) on a TENSOR_FLOAT32 tensor,
 * with typed attributes: F64 "scale" (required), F64 "shift" (optional, default 0), I64
 * "clamp" (optional, >= 0; absent: no clamping). It shows:
 *   - attribute specs (the runtime rejects unknown, mistyped and missing ones at prepare);
 *   - a check() that rejects invalid models (INVALID_ARGUMENT) and reports other tensor types
 *     as unsupported (GENERAL_FAILURE);
 *   - a shape() for the output dims at execute time;
 *   - a run() that uses md_kernel_scratch and reports failure through its status (a result
 *     that overflows float32), which the driver turns into GENERAL_FAILURE with the message.
 * Exits 0 when every step behaved as expected, 1 otherwise. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/driver.h"
#include "md/kernel.h"

#define KERNEL_NAME "example.scale_shift"

/* ---- the kernel ----------------------------------------------------------------------- */

typedef struct params {
  double scale, shift;
  int has_clamp;
  int64_t clamp;
} params;

/* Attributes arrive sorted by name and already checked against the specs (names, kinds,
 * required ones present), so only their values need judging here. */
static void read_params(uint32_t n, const md_attr *attrs, params *p) {
  p->scale = 1;
  p->shift = 0;
  p->has_clamp = 0;
  p->clamp = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(attrs[i].name, "scale") == 0) p->scale = attrs[i].f64;
    else if (strcmp(attrs[i].name, "shift") == 0) p->shift = attrs[i].f64;
    else if (strcmp(attrs[i].name, "clamp") == 0) {
      p->has_clamp = 1;
      p->clamp = attrs[i].i64;
    }
  }
}

static md_status ss_check(const md_op_sig *sig, md_kernel_status *st, void *user) {
  (void)user;
  const md_operand_info *in = &sig->inputs[0], *out = &sig->outputs[0];
  params p;
  read_params(sig->n_attrs, sig->attrs, &p);
  if (!isfinite(p.scale) || !isfinite(p.shift))
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "attribute scale (%g) and shift (%g) must be "
                          "finite", p.scale, p.shift);
  if (p.has_clamp && p.clamp < 0)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "attribute clamp is %" PRId64
                          "; must be >= 0", p.clamp);
  if (out->type != in->type)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "output 0 type %d must match input 0 (%d)",
                          (int)out->type, (int)in->type);
  if (in->type == MD_FLOAT32 || in->type == MD_INT32 || in->type == MD_UINT32 ||
      in->type == MD_BOOL)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 0 must be a tensor, got scalar type %d",
                          (int)in->type);
  if (in->type != MD_TENSOR_FLOAT32)
    return md_kernel_fail(st, MD_GENERAL_FAILURE, "input 0: tensor type %d not supported",
                          (int)in->type);
  /* Known dims of the output must agree with the input's (unknown ones are fine). */
  if (in->rank && out->rank) {
    if (in->rank != out->rank)
      return md_kernel_fail(st, MD_INVALID_ARGUMENT, "output 0 has rank %" PRIu32
                            ", input 0 has rank %" PRIu32, out->rank, in->rank);
    for (uint32_t i = 0; i < in->rank; i++)
      if (in->dims[i] && out->dims[i] && in->dims[i] != out->dims[i])
        return md_kernel_fail(st, MD_INVALID_ARGUMENT, "output 0 dim %" PRIu32 " is %" PRIu32
                              ", input 0 has %" PRIu32, i, out->dims[i], in->dims[i]);
  }
  return MD_NONE;
}

static md_status ss_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                          void *user) {
  (void)user;
  const md_operand_info *in = &sig->inputs[0];
  if (in->rank == 0 || in->rank > MD_MAX_RANK)
    return md_kernel_fail(st, MD_INVALID_ARGUMENT, "input 0 has rank %" PRIu32, in->rank);
  out[0].rank = in->rank;
  for (uint32_t i = 0; i < in->rank; i++) out[0].dims[i] = in->dims[i];
  return MD_NONE;
}

static void ss_run(const md_kernel_call *c, md_kernel_status *st) {
  const md_tensor *in = &c->inputs[0];
  md_tensor *out = &c->outputs[0];
  params p;
  read_params(c->n_attrs, c->attrs, &p);
  uint64_t n = 1;
  for (uint32_t i = 0; i < in->rank; i++) n *= in->dims[i];
  if (in->bytes < n * sizeof(float) || out->bytes < n * sizeof(float)) {
    md_kernel_fail(st, MD_GENERAL_FAILURE, "buffers of %" PRIu64 " and %" PRIu64
                   " bytes cannot hold %" PRIu64 " floats", in->bytes, out->bytes, n);
    return;
  }
  /* Compute into scratch first, so a failure leaves the output untouched. */
  float *tmp = md_kernel_scratch(c->ctx, n * sizeof(float));
  if (!tmp) {
    md_kernel_fail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "no scratch memory for %" PRIu64
                   " floats", n);
    return;
  }
  for (uint64_t i = 0; i < n; i++) {
    float x;
    memcpy(&x, (const unsigned char *)in->data + i * sizeof x, sizeof x);
    double y = (double)x * p.scale + p.shift;
    if (p.has_clamp) {
      double lim = (double)p.clamp;
      y = y < -lim ? -lim : (y > lim ? lim : y);
    }
    if (!(fabs(y) <= 3.4028234663852886e38)) { /* FLT_MAX; NaN fails too */
      md_kernel_fail(st, MD_GENERAL_FAILURE,
                     "element %" PRIu64 ": %g * %g + %g = %g overflows float32", i, (double)x,
                     p.scale, p.shift, y);
      return;
    }
    tmp[i] = (float)y;
  }
  memcpy(out->data, tmp, n * sizeof(float));
}

static const md_attr_spec ss_specs[] = {
    {"scale", MD_ATTR_F64, 1},
    {"shift", MD_ATTR_F64, 0},
    {"clamp", MD_ATTR_I64, 0},
};

/* ---- the program ---------------------------------------------------------------------- */

static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  failures++;
}

/* A memfd pool of `size` bytes mapped read/write into *map. */
static int make_pool(const char *name, size_t size, md_memory *mem, float **map) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return -1;
  }
  memset(mem, 0, sizeof *mem);
  mem->kind = MD_MEM_ASHMEM;
  mem->fd = fd;
  mem->offset = 0;
  mem->size = size;
  mem->prot = PROT_READ | PROT_WRITE;
  *map = p;
  return 0;
}

static const uint32_t dims23[] = {2, 3};

/* A model of one CUSTOM operation: operand 0 (input [2,3]) -> operand 1 (output [2,3]). */
static void build_model(md_model *m, md_operand *opnds, md_operation *op, const md_attr *attrs,
                        uint32_t n_attrs) {
  static const uint32_t in_idx[] = {0}, out_idx[] = {1};
  memset(opnds, 0, 2 * sizeof *opnds);
  opnds[0].type = opnds[1].type = MD_TENSOR_FLOAT32;
  opnds[0].rank = opnds[1].rank = 2;
  opnds[0].dims = opnds[1].dims = dims23;
  opnds[0].lifetime = MD_SUBGRAPH_INPUT;
  opnds[1].lifetime = MD_SUBGRAPH_OUTPUT;
  memset(op, 0, sizeof *op);
  op->type = MD_OP_CUSTOM;
  op->n_inputs = 1;
  op->inputs = in_idx;
  op->n_outputs = 1;
  op->outputs = out_idx;
  op->custom_name = KERNEL_NAME;
  op->n_attrs = n_attrs;
  op->attrs = attrs;
  memset(m, 0, sizeof *m);
  m->n_operands = 2;
  m->operands = opnds;
  m->n_operations = 1;
  m->operations = op;
  m->n_inputs = 1;
  m->inputs = in_idx;
  m->n_outputs = 1;
  m->outputs = out_idx;
}

static md_attr attr_f64(const char *name, double v) {
  md_attr a = {.name = name, .kind = MD_ATTR_F64, .f64 = v};
  return a;
}

static md_attr attr_i64(const char *name, int64_t v) {
  md_attr a = {.name = name, .kind = MD_ATTR_I64, .i64 = v};
  return a;
}

/* What the steps share: the driver, its simulated device and client, the model of one CUSTOM
 * operation, the prepared model, and a request over two memfd pools. */
typedef struct demo {
  const md_driver *drv;
  md_device *dev;
  md_handle client, prepared;
  md_attr attrs[3];
  md_operand opnds[2];
  md_operation op;
  md_model model;
  md_memory in_mem, out_mem;
  float *in_map, *out_map;
  md_request_pool pools[2];
  md_request_arg in_arg, out_arg;
  md_request req;
  md_output_shape shape;
  md_timing timing;
} demo;

/* 1. Register the kernel for "host"; a "sim" device falls back to host kernels. -1 when the
 *    registration fails (nothing can run). */
static int register_kernel(void) {
  md_kernel_def def = {.struct_size = sizeof def, .name = KERNEL_NAME, .platform = "host",
                       .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
                       .attr_specs = ss_specs, .n_attr_specs = 3,
                       .check = ss_check, .shape = ss_shape, .run = ss_run};
  if (md_kernel_register(&def) != MD_NONE) {
    fprintf(stderr, "FAIL: md_kernel_register: %s\n", md_kernel_registry_error());
    return -1;
  }
  if (md_kernel_register(&def) != MD_INVALID_ARGUMENT)
    fail("a second registration of %s was not refused", KERNEL_NAME);
  printf("registered %s for host (duplicate refused: %s)\n", KERNEL_NAME,
         md_kernel_registry_error());
  return 0;
}

/* 2. Open the driver, a simulated device and a client; -1 (nothing left open) on failure. */
static int open_sim(demo *d) {
  d->drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  const md_driver *drv = d->drv;
  if (!drv || drv->abi_version != MD_DRIVER_ABI_VERSION || drv->struct_size < sizeof *drv) {
    fprintf(stderr, "FAIL: md_driver_entry(%u) gave no usable driver\n", MD_DRIVER_ABI_VERSION);
    return -1;
  }
  md_status s = drv->open_device("backend=sim", &d->dev);
  if (s != MD_NONE) {
    /* last_error is per thread: it needs no device */
    fprintf(stderr, "FAIL: open_device(backend=sim): %d %s\n", (int)s, drv->last_error(d->dev));
    return -1;
  }
  md_capabilities caps = {.struct_size = sizeof caps};
  if (drv->get_capabilities(d->dev, &caps) == MD_NONE)
    printf("device: %s (backend %s)\n", caps.device_name, caps.backend);
  if ((s = drv->open_client(d->dev, &d->client)) != MD_NONE) {
    fprintf(stderr, "FAIL: open_client: %d %s\n", (int)s, drv->last_error(d->dev));
    drv->close_device(d->dev);
    return -1;
  }
  return 0;
}

/* 3. A model with one CUSTOM operation; attributes sorted by name. -1 (client and device
 *    closed) when it cannot be prepared. */
static int prepare_scale_shift(demo *d) {
  const md_driver *drv = d->drv;
  d->attrs[0] = attr_i64("clamp", 4);
  d->attrs[1] = attr_f64("scale", 2.0);
  d->attrs[2] = attr_f64("shift", 0.5);
  build_model(&d->model, d->opnds, &d->op, d->attrs, 3);
  uint8_t supported = 0;
  md_status s;
  if ((s = drv->get_supported_operations(d->dev, &d->model, &supported)) != MD_NONE || !supported)
    fail("get_supported_operations: status %d, supported %u: %s", (int)s, supported,
         drv->last_error(d->dev));
  if ((s = drv->prepare_model(d->dev, d->client, &d->model, &d->prepared)) != MD_NONE) {
    fprintf(stderr, "FAIL: prepare_model: %d %s\n", (int)s, drv->last_error(d->dev));
    drv->close_client(d->dev, d->client, NULL);
    drv->close_device(d->dev);
    return -1;
  }
  return 0;
}

/* 4. Execute with input and output in memfd (ASHMEM) pools. -1 when the pools cannot be made. */
static int execute_in_pools(demo *d) {
  const md_driver *drv = d->drv;
  if (make_pool("custom_op.in", 6 * sizeof(float), &d->in_mem, &d->in_map) != 0 ||
      make_pool("custom_op.out", 6 * sizeof(float), &d->out_mem, &d->out_map) != 0) {
    perror("FAIL: memfd pool");
    return -1;
  }
  const float x[6] = {-2, -1, 0, 1, 2, 3};
  /* 2x + 0.5, clamped to [-4, 4] */
  const float want[6] = {-3.5f, -1.5f, 0.5f, 2.5f, 4.0f, 4.0f};
  memcpy(d->in_map, x, sizeof x);
  for (int i = 0; i < 6; i++) d->out_map[i] = -99;
  d->pools[0] = (md_request_pool){.memory = d->in_mem};
  d->pools[1] = (md_request_pool){.memory = d->out_mem};
  d->in_arg = (md_request_arg){.pool = 0, .offset = 0, .length = sizeof x};
  d->out_arg = (md_request_arg){.pool = 1, .offset = 0, .length = sizeof x};
  d->req = (md_request){.n_inputs = 1, .inputs = &d->in_arg, .n_outputs = 1, .outputs = &d->out_arg,
                        .n_pools = 2, .pools = d->pools};
  memset(&d->shape, 0, sizeof d->shape);
  md_status s = drv->execute(d->dev, d->client, d->prepared, &d->req, &d->shape, 1, &d->timing);
  if (s != MD_NONE) {
    fail("execute: %d %s", (int)s, drv->last_error(d->dev));
    return 0;
  }
  const md_output_shape *shape = &d->shape;
  if (shape->rank != 2 || shape->dims[0] != 2 || shape->dims[1] != 3 || !shape->is_sufficient)
    fail("output shape: rank %u dims [%u,%u] sufficient %u, want [2,3] sufficient", shape->rank,
         shape->dims[0], shape->dims[1], shape->is_sufficient);
  printf("output [2,3]:");
  for (int i = 0; i < 6; i++) {
    printf(" %g", (double)d->out_map[i]);
    if (d->out_map[i] != want[i]) fail("output[%d] = %g, want %g", i, (double)d->out_map[i],
                                       (double)want[i]);
  }
  printf("\n");
  return 0;
}

/* 5. The kernel reports failure through its status: 1e39 overflows float32. */
static void kernel_failure(demo *d) {
  const md_driver *drv = d->drv;
  const md_attr big[] = {attr_f64("scale", 1e39)};
  build_model(&d->model, d->opnds, &d->op, big, 1);
  md_handle prepared_big = 0;
  md_status s;
  if ((s = drv->prepare_model(d->dev, d->client, &d->model, &prepared_big)) != MD_NONE) {
    fail("prepare_model (scale 1e39): %d %s", (int)s, drv->last_error(d->dev));
    return;
  }
  for (int i = 0; i < 6; i++) d->out_map[i] = -99;
  memset(&d->shape, 0, sizeof d->shape);
  s = drv->execute(d->dev, d->client, prepared_big, &d->req, &d->shape, 1, &d->timing);
  const char *msg = drv->last_error(d->dev);
  if (s != MD_GENERAL_FAILURE || !strstr(msg, "overflows float32"))
    fail("execute (scale 1e39): status %d \"%s\", want GENERAL_FAILURE naming the overflow",
         (int)s, msg);
  else
    printf("kernel failure reported: %s\n", msg);
  if (d->shape.rank != 0) fail("a failed execution returned an output shape");
  if (d->out_map[1] != -99) fail("a failed kernel wrote its output");
  drv->release_prepared_model(d->dev, d->client, prepared_big);
}

/* 6. Invalid attributes are refused at prepare: by the kernel's check (a negative clamp)
 *    and by the runtime against the specs (a missing required one). */
static void invalid_attributes(demo *d) {
  const md_driver *drv = d->drv;
  const md_attr neg[] = {attr_i64("clamp", -1), attr_f64("scale", 1)};
  build_model(&d->model, d->opnds, &d->op, neg, 2);
  md_handle h = 0;
  md_status s = drv->prepare_model(d->dev, d->client, &d->model, &h);
  if (s != MD_INVALID_ARGUMENT || !strstr(drv->last_error(d->dev), "clamp"))
    fail("prepare_model (clamp -1): status %d \"%s\", want INVALID_ARGUMENT naming clamp", (int)s,
         drv->last_error(d->dev));
  else
    printf("check refused: %s\n", drv->last_error(d->dev));
  if (s == MD_NONE) drv->release_prepared_model(d->dev, d->client, h);
  const md_attr missing[] = {attr_f64("shift", 1)};
  build_model(&d->model, d->opnds, &d->op, missing, 1);
  s = drv->prepare_model(d->dev, d->client, &d->model, &h);
  if (s != MD_INVALID_ARGUMENT || !strstr(drv->last_error(d->dev), "scale"))
    fail("prepare_model (no scale): status %d \"%s\", want INVALID_ARGUMENT naming scale", (int)s,
         drv->last_error(d->dev));
  else
    printf("runtime refused: %s\n", drv->last_error(d->dev));
  if (s == MD_NONE) drv->release_prepared_model(d->dev, d->client, h);
}

/* 7. Unregistering hides the kernel from new models; the prepared one keeps running it. */
static void unregister_kernel(demo *d) {
  const md_driver *drv = d->drv;
  if (md_kernel_unregister(KERNEL_NAME, "host") != MD_NONE)
    fail("md_kernel_unregister: %s", md_kernel_registry_error());
  build_model(&d->model, d->opnds, &d->op, d->attrs, 3);
  md_handle h = 0;
  md_status s = drv->prepare_model(d->dev, d->client, &d->model, &h);
  if (s == MD_NONE) {
    fail("prepare_model succeeded after the kernel was unregistered");
    drv->release_prepared_model(d->dev, d->client, h);
  }
  s = drv->execute(d->dev, d->client, d->prepared, &d->req, &d->shape, 1, &d->timing);
  if (s != MD_NONE) fail("execute of the earlier prepared model: %d %s", (int)s,
                         drv->last_error(d->dev));
}

/* 8. Clean up; nothing may be left behind. */
static void clean_up(demo *d) {
  const md_driver *drv = d->drv;
  drv->release_prepared_model(d->dev, d->client, d->prepared);
  md_leak_report leaks;
  memset(&leaks, 0xff, sizeof leaks);
  md_status s;
  if ((s = drv->close_client(d->dev, d->client, &leaks)) != MD_NONE)
    fail("close_client: %d %s", (int)s, drv->last_error(d->dev));
  else if (leaks.buffers || leaks.prepared_models || leaks.events || leaks.bytes)
    fail("close_client reports leaks: %u buffers, %u prepared models, %u events, %" PRIu64
         " bytes", leaks.buffers, leaks.prepared_models, leaks.events, leaks.bytes);
  drv->close_device(d->dev);
  munmap(d->in_map, d->in_mem.size);
  munmap(d->out_map, d->out_mem.size);
  close(d->in_mem.fd);
  close(d->out_mem.fd);
}

int main(void) {
  demo d;
  memset(&d, 0, sizeof d);
  if (register_kernel() != 0 || open_sim(&d) != 0 || prepare_scale_shift(&d) != 0 ||
      execute_in_pools(&d) != 0)
    return 1;
  kernel_failure(&d);
  invalid_attributes(&d);
  unregister_kernel(&d);
  clean_up(&d);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
