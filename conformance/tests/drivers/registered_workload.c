/* registered_workload.c - a client program for the recorder's tests (test_record.c): it uses
 * registered pools (SPEC 9) the way an application does. It registers two input pools and an
 * output pool, executes ADD [2,3] through them, writes new input bytes through its own mapping,
 * executes again, closes one input's fd and makes the other's fd number name another file, executes
 * a third time, and unregisters everything; each result is checked here (exit 1 naming the step).
 *
 *   mdc_test_registered_workload --driver SO [--config STR]   (the arguments `mdc record` passes) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/loader.h"

static const md_driver *drv;
static md_device *dev;

static void die(const char *step, md_status st) {
  fprintf(stderr, "registered_workload: %s: status %d: %s\n", step, (int)st, dev ? drv->last_error(dev) : "");
  exit(1);
}

static int memfd(const float *v) {
  int fd = memfd_create("rw", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 24) != 0 || (v && pwrite(fd, v, 24, 0) != 24)) die("memfd", MD_GENERAL_FAILURE);
  return fd;
}

static md_memory ashmem(int fd) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_ASHMEM;
  m.fd = fd;
  m.size = 24;
  m.prot = PROT_READ | PROT_WRITE;
  return m;
}

int main(int argc, char **argv) {
  const char *so = NULL, *config = "backend=sim;seed=1";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--driver") == 0) so = argv[i + 1];
    else if (strcmp(argv[i], "--config") == 0) config = argv[i + 1];
  }
  char err[512];
  drv = md_driver_load(so, NULL, NULL, err, sizeof err);
  if (!drv) {
    fprintf(stderr, "registered_workload: %s\n", err);
    return 2;
  }
  if (!MD_DRIVER_HAS(drv, register_memory) || !MD_DRIVER_HAS(drv, unregister_memory)) {
    fprintf(stderr, "registered_workload: the driver has no registered pools (SPEC 9)\n");
    return 2;
  }
  md_status st;
  md_handle client, prep;
  if ((st = drv->open_device(config, &dev)) != MD_NONE) die("open_device", st);
  if ((st = drv->open_client(dev, &client)) != MD_NONE) die("open_client", st);

  uint32_t dims[2] = {2, 3};
  int32_t act = 0;
  md_operand ops[4];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < 3; i++) {
    ops[i].type = MD_TENSOR_FLOAT32;
    ops[i].rank = 2;
    ops[i].dims = dims;
  }
  ops[0].lifetime = ops[1].lifetime = MD_SUBGRAPH_INPUT;
  ops[2].lifetime = MD_SUBGRAPH_OUTPUT;
  ops[3] = (md_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 0, .length = 4};
  uint32_t op_in[3] = {0, 1, 3}, op_out[1] = {2}, m_in[2] = {0, 1}, m_out[1] = {2};
  md_operation add = {.type = MD_OP_ADD, .n_inputs = 3, .inputs = op_in, .n_outputs = 1, .outputs = op_out};
  md_model model = {.n_operands = 4, .operands = ops, .n_operations = 1, .operations = &add, .n_inputs = 2,
                    .inputs = m_in, .n_outputs = 1, .outputs = m_out, .operand_values = (const uint8_t *)&act,
                    .operand_values_size = 4};
  if ((st = drv->prepare_model(dev, client, &model, &prep)) != MD_NONE) die("prepare_model", st);

  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, z[6] = {100, 100, 100, 100, 100, 100};
  int fa = memfd(a), fb = memfd(b), fo = memfd(NULL), fz = memfd(z);
  float *amap = mmap(NULL, 24, PROT_READ | PROT_WRITE, MAP_SHARED, fa, 0);
  float *omap = mmap(NULL, 24, PROT_READ | PROT_WRITE, MAP_SHARED, fo, 0);
  if (amap == MAP_FAILED || omap == MAP_FAILED) die("mmap", MD_GENERAL_FAILURE);
  md_handle pools[3];
  md_memory mems[3] = {ashmem(fa), ashmem(fb), ashmem(fo)};
  for (int i = 0; i < 3; i++)
    if ((st = drv->register_memory(dev, client, &mems[i], &pools[i])) != MD_NONE) die("register_memory", st);

  md_request_arg in[2] = {{.pool = 0, .length = 24}, {.pool = 1, .length = 24}}, out[1] = {{.pool = 2, .length = 24}};
  md_request_pool rp[3];
  memset(rp, 0, sizeof rp);
  for (int i = 0; i < 3; i++) rp[i] = (md_request_pool){.is_token = 2, .token = pools[i]};
  md_request req = {.n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = out, .n_pools = 3, .pools = rp};
  md_output_shape sh[1];
  for (int round = 0; round < 3; round++) {
    if (round == 1)
      for (int i = 0; i < 6; i++) amap[i] = (float)(2 * (i + 1));   /* new input bytes */
    if (round == 2) {
      close(fa);                  /* what the client does with its fds does not matter */
      if (dup2(fz, fb) != fb) die("dup2", MD_GENERAL_FAILURE);
    }
    if ((st = drv->execute(dev, client, prep, &req, sh, 1, NULL)) != MD_NONE) die("execute", st);
    for (int i = 0; i < 6; i++)
      if (omap[i] != amap[i] + b[i]) {
        fprintf(stderr, "registered_workload: round %d: out[%d] = %g, expected %g\n", round, i, (double)omap[i],
                (double)(amap[i] + b[i]));
        return 1;
      }
  }
  for (int i = 0; i < 3; i++)
    if ((st = drv->unregister_memory(dev, client, pools[i])) != MD_NONE) die("unregister_memory", st);
  md_leak_report lr;
  if ((st = drv->close_client(dev, client, &lr)) != MD_NONE) die("close_client", st);
  drv->close_device(dev);
  munmap(amap, 24);
  munmap(omap, 24);
  close(fb);
  close(fo);
  close(fz);
  printf("registered_workload: 3 executions on registered pools, all right\n");
  return 0;
}
