/* demo.c - the `make run` job until the conformance replay lands: opens the simulator through
 * the driver ABI and runs a small model whose state lives in a driver-managed buffer.
 *
 * Model: h = relu(fully_connected(x, W, b)); y = h + x_skip. W and b are CONSTANT_REFERENCE
 * (a memfd pool), the activation scalars CONSTANT_COPY. Input x lives in a driver-managed
 * buffer (allocate + copy_from), the output y comes back through an ASHMEM pool. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/driver.h"
#include "md/status.h"

#define CHECK(call)                                                                              \
  do {                                                                                           \
    md_status st_ = (call);                                                                      \
    if (st_ != MD_NONE) {                                                                        \
      fprintf(stderr, "demo: %s failed: %s: %s\n", #call, md_status_name(st_), drv->last_error(dev)); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

static int memfd_with(const void *data, size_t n) {
  int fd = memfd_create("demo", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return -1;
  if (data && pwrite(fd, data, n, 0) != (ssize_t)n) return -1;
  return fd;
}

static md_memory ashmem(int fd, uint64_t size) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_ASHMEM;
  m.fd = fd;
  m.size = size;
  m.prot = PROT_READ | PROT_WRITE;
  return m;
}

int main(int argc, char **argv) {
  const char *config = argc > 1 ? argv[1] : "backend=sim;seed=1";
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = NULL;
  if (!drv) return fprintf(stderr, "demo: driver refuses ABI v1\n"), 1;
  md_status st = drv->open_device(config, &dev);
  if (st != MD_NONE) return fprintf(stderr, "demo: open_device(%s): %s\n", config, md_status_name(st)), 1;
  md_capabilities caps = {.struct_size = sizeof caps};
  CHECK(drv->get_capabilities(dev, &caps));
  printf("driver  %s %s\ndevice  %s (backend %s, %llu bytes)\n", drv->name, drv->version, caps.device_name,
         caps.backend, (unsigned long long)caps.max_buffer_bytes);

  enum { B = 2, IN = 4, UNITS = 4 };
  float weights[UNITS * IN], bias[UNITS];
  for (int u = 0; u < UNITS; u++) {
    bias[u] = 0.1f * (float)u;
    for (int i = 0; i < IN; i++) weights[u * IN + i] = (u == i ? 1.0f : 0.0f) - 0.25f * (float)(u + i) / IN;
  }
  float wb[UNITS * IN + UNITS];
  memcpy(wb, weights, sizeof weights);
  memcpy(wb + UNITS * IN, bias, sizeof bias);
  int wfd = memfd_with(wb, sizeof wb);
  md_memory wpool = ashmem(wfd, sizeof wb);

  uint32_t d_x[] = {B, IN}, d_w[] = {UNITS, IN}, d_b[] = {UNITS}, d_h[] = {B, UNITS};
  int32_t acts[2] = {1 /* relu */, 0 /* none */};
  md_operand ops[] = {
      {.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_x, .lifetime = MD_SUBGRAPH_INPUT},          /* 0 x */
      {.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_w, .lifetime = MD_CONSTANT_REFERENCE,
       .pool = 0, .offset = 0, .length = sizeof weights},                                           /* 1 W */
      {.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d_b, .lifetime = MD_CONSTANT_REFERENCE,
       .pool = 0, .offset = sizeof weights, .length = sizeof bias},                                  /* 2 b */
      {.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 0, .length = 4},                    /* 3 relu */
      {.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_h, .lifetime = MD_TEMPORARY_VARIABLE},       /* 4 h */
      {.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 4, .length = 4},                    /* 5 none */
      {.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_h, .lifetime = MD_SUBGRAPH_OUTPUT},          /* 6 y */
  };
  uint32_t fc_in[] = {0, 1, 2, 3}, fc_out[] = {4}, add_in[] = {4, 0, 5}, add_out[] = {6};
  md_operation opers[] = {
      {.type = MD_OP_FULLY_CONNECTED, .n_inputs = 4, .inputs = fc_in, .n_outputs = 1, .outputs = fc_out},
      {.type = MD_OP_ADD, .n_inputs = 3, .inputs = add_in, .n_outputs = 1, .outputs = add_out},
  };
  uint32_t m_in[] = {0}, m_out[] = {6};
  md_model model = {.n_operands = 7, .operands = ops, .n_operations = 2, .operations = opers,
                    .n_inputs = 1, .inputs = m_in, .n_outputs = 1, .outputs = m_out,
                    .operand_values = (const uint8_t *)acts, .operand_values_size = sizeof acts,
                    .n_pools = 1, .pools = &wpool};

  md_handle client, prepared;
  CHECK(drv->open_client(dev, &client));
  CHECK(drv->prepare_model(dev, client, &model, &prepared));

  /* The input lives in a driver-managed buffer allocated for input 0 of the model. */
  md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_buffer_desc desc = {0};
  md_token x_tok;
  CHECK(drv->allocate(dev, client, &desc, &prepared, 1, &role, 1, NULL, 0, &x_tok));
  float x[B * IN] = {1, -2, 3, -4, 0.5f, 0.25f, -0.125f, 2};
  int xfd = memfd_with(x, sizeof x);
  md_memory xmem = ashmem(xfd, sizeof x);
  CHECK(drv->copy_from(dev, client, x_tok, &xmem, 0, NULL));

  int yfd = memfd_with(NULL, sizeof(float) * B * UNITS);
  md_request_pool pools[] = {{.is_token = 1, .token = x_tok},
                             {.memory = ashmem(yfd, sizeof(float) * B * UNITS)}};
  md_request_arg in = {.pool = 0}, out = {.pool = 1, .length = sizeof(float) * B * UNITS};
  md_request req = {.n_inputs = 1, .inputs = &in, .n_outputs = 1, .outputs = &out, .n_pools = 2, .pools = pools};
  md_output_shape shape;
  md_timing timing;
  CHECK(drv->execute(dev, client, prepared, &req, &shape, 1, &timing));

  float y[B * UNITS];
  if (pread(yfd, y, sizeof y, 0) != (ssize_t)sizeof y) return fprintf(stderr, "demo: pread failed\n"), 1;
  int bad = 0;
  for (int bi = 0; bi < B; bi++)
    for (int u = 0; u < UNITS; u++) {
      float acc = bias[u];
      for (int i = 0; i < IN; i++) acc += x[bi * IN + i] * weights[u * IN + i];
      float want = (acc > 0 ? acc : 0) + x[bi * IN + u];
      if (fabsf(y[bi * UNITS + u] - want) > 1e-5f * (1 + fabsf(want))) bad++;
    }
  printf("output  shape [%u,%u], in driver %llu ns, on device %llu ns\n", shape.dims[0], shape.dims[1],
         (unsigned long long)timing.in_driver_ns, (unsigned long long)timing.on_device_ns);
  for (int bi = 0; bi < B; bi++) {
    printf("  y[%d] =", bi);
    for (int u = 0; u < UNITS; u++) printf(" %8.4f", (double)y[bi * UNITS + u]);
    printf("\n");
  }

  CHECK(drv->free_buffer(dev, client, x_tok));
  CHECK(drv->release_prepared_model(dev, client, prepared));
  md_leak_report leaks;
  CHECK(drv->close_client(dev, client, &leaks));
  drv->close_device(dev);
  close(wfd);
  close(xfd);
  close(yfd);
  printf("result  %s (%d of %d values off the host reference); leaks: %u buffers, %u models\n",
         bad ? "FAIL" : "PASS", bad, B * UNITS, leaks.buffers, leaks.prepared_models);
  return bad ? 1 : 0;
}
