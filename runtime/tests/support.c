/* support.c - helpers shared by the runtime's Criterion tests. */
#include "support.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"

const md_driver *mdt_driver(void) { return md__driver_table(); }

int mdt_memfd(const void *data, size_t size) {
  int fd = memfd_create("mdt", MFD_CLOEXEC);
  cr_assert(fd >= 0, "memfd_create failed");
  cr_assert(ftruncate(fd, (off_t)size) == 0, "ftruncate failed");
  if (data && size) cr_assert(pwrite(fd, data, size, 0) == (ssize_t)size, "pwrite failed");
  return fd;
}

md_memory mdt_ashmem(int fd, uint64_t size) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_ASHMEM;
  m.fd = fd;
  m.size = size;
  m.prot = PROT_READ | PROT_WRITE;
  return m;
}

void mdt_read_fd(int fd, void *out, size_t size) {
  cr_assert(pread(fd, out, size, 0) == (ssize_t)size, "pread failed");
}

static _Thread_local struct {
  uint32_t dims[3][MD_MAX_RANK];
  md_operand operands[4];
  uint32_t op_in[3], op_out[1], model_in[2], model_out[1];
  md_operation op;
  md_model model;
  int32_t act;
} bm;

const md_model *mdt_binary_model(md_operation_type op, uint32_t rank, const uint32_t *dims,
                                 int32_t activation) {
  memset(&bm, 0, sizeof bm);
  for (int i = 0; i < 3; i++) {
    if (rank) memcpy(bm.dims[i], dims, rank * sizeof *dims);
    bm.operands[i].type = MD_TENSOR_FLOAT32;
    bm.operands[i].rank = rank;
    bm.operands[i].dims = bm.dims[i];
  }
  bm.operands[0].lifetime = MD_SUBGRAPH_INPUT;
  bm.operands[1].lifetime = MD_SUBGRAPH_INPUT;
  bm.operands[2].lifetime = MD_SUBGRAPH_OUTPUT;
  bm.act = activation;
  bm.operands[3].type = MD_INT32;
  bm.operands[3].lifetime = MD_CONSTANT_COPY;
  bm.operands[3].offset = 0;
  bm.operands[3].length = sizeof bm.act;
  bm.op_in[0] = 0; bm.op_in[1] = 1; bm.op_in[2] = 3;
  bm.op_out[0] = 2;
  bm.op.type = op;
  bm.op.n_inputs = 3; bm.op.inputs = bm.op_in;
  bm.op.n_outputs = 1; bm.op.outputs = bm.op_out;
  bm.model_in[0] = 0; bm.model_in[1] = 1; bm.model_out[0] = 2;
  bm.model.n_operands = 4; bm.model.operands = bm.operands;
  bm.model.n_operations = 1; bm.model.operations = &bm.op;
  bm.model.n_inputs = 2; bm.model.inputs = bm.model_in;
  bm.model.n_outputs = 1; bm.model.outputs = bm.model_out;
  bm.model.operand_values = (const uint8_t *)&bm.act;
  bm.model.operand_values_size = sizeof bm.act;
  return &bm.model;
}

void mdt_env_open(mdt_env *env, const char *config) {
  env->drv = mdt_driver();
  env->dev = NULL;
  env->client = 0;
  md_status st = env->drv->open_device(config ? config : "backend=sim", &env->dev);
  cr_assert_eq(st, MD_NONE, "open_device: %s", env->dev ? env->drv->last_error(env->dev) : "");
  st = env->drv->open_client(env->dev, &env->client);
  cr_assert_eq(st, MD_NONE, "open_client: %s", env->drv->last_error(env->dev));
}

void mdt_env_close(mdt_env *env, int allow_leaks) {
  if (!env->dev) return;
  if (env->client) {
    md_leak_report leaks;
    memset(&leaks, 0xff, sizeof leaks);
    cr_assert_eq(env->drv->close_client(env->dev, env->client, &leaks), MD_NONE);
    if (!allow_leaks) {
      cr_expect_eq(leaks.buffers, 0u, "leaked buffers");
      cr_expect_eq(leaks.prepared_models, 0u, "leaked prepared models");
      cr_expect_eq(leaks.events, 0u, "leaked events");
    }
  }
  env->drv->close_device(env->dev);
  env->dev = NULL;
}
