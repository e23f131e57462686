/* gpu_bench.c - GPU figures of the hip backend, each beside its target (bench/gpu.sh):
 *   1. each elementwise kernel's bandwidth (bytes it reads + writes per second) against a
 *      device-to-device copy of the same bytes, at 256 MiB per tensor: >= 0.8x;
 *   2. copy_from / copy_to through the driver ABI (ASHMEM pool -> device buffer) against a plain
 *      pinned hipMemcpy of the same size, at 64 and 256 MiB: >= 0.8x;
 *   3. execute's host overhead: a 1024-element RELU on device buffers through the driver
 *      against a raw launch + stream synchronize: <= 1.2x;
 *   4. an execution whose input and output are registered pools (SPEC 9: the hip backend
 *      page-locks them with hipHostRegister, so its copies are one DMA each, no staging): a
 *      RELU of 64 MiB in, 64 MiB out, against pinned hipMemcpy in + the raw kernel + pinned
 *      hipMemcpy out on one stream: <= 1.25x; the same request with descriptor pools (copied
 *      through the staging buffers) beside it, for information.
 * Times are medians of repeated runs (hipEvents for device work, CLOCK_MONOTONIC for calls).
 * Exit status: 0 with the table, 77 where no GPU answers. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hip_launch.h"
#include "md_hip_rt.h"

#define MIB (UINT64_C(1) << 20)
#define CHECK(x)                                                                    \
  do {                                                                              \
    hipError_t e_ = (x);                                                            \
    if (e_ != hipSuccess) {                                                         \
      fprintf(stderr, "gpu_bench: %s: %s\n", #x, hipGetErrorString(e_));            \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

typedef struct row { char what[64]; double value, base, target; int higher_better; } row;   /* target < 0: information */
static row rows[32];
static int n_rows;

static void add_row(const char *what, double value, double base, double target, int higher) {
  row *r = &rows[n_rows++];
  snprintf(r->what, sizeof r->what, "%s", what);
  r->value = value;
  r->base = base;
  r->target = target;
  r->higher_better = higher;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- 1. elementwise kernels vs a device copy ---- */

enum { K_ADD, K_SUB, K_MUL, K_RELU };
static void launch(int k, hipStream_t s, float *a, float *b, float *o, uint64_t n) {
  if (k == K_RELU) {
    CHECK(md__hip_relu(s, a, o, n));
    return;
  }
  md__bcast plan;
  uint32_t d = (uint32_t)n, bad;
  md__bcast_init(&plan, 1, &d, 1, &d, &bad);
  CHECK(md__hip_binary(s, k == K_ADD ? MD__BIN_ADD : k == K_SUB ? MD__BIN_SUB : MD__BIN_MUL, 1, &plan, a, n, b, n, o));
}

static double time_ms(hipStream_t s, int k, float *a, float *b, float *o, uint64_t n, uint64_t copy_bytes) {
  hipEvent_t e0, e1;
  CHECK(hipEventCreate(&e0));
  CHECK(hipEventCreate(&e1));
  double v[9];
  for (int r = -1; r < 9; r++) {
    CHECK(hipEventRecord(e0, s));
    if (k < 0) CHECK(hipMemcpyAsync(o, a, copy_bytes, hipMemcpyDeviceToDevice, s));
    else launch(k, s, a, b, o, n);
    CHECK(hipEventRecord(e1, s));
    CHECK(hipEventSynchronize(e1));
    float ms;
    CHECK(hipEventElapsedTime(&ms, e0, e1));
    if (r >= 0) v[r] = ms;
  }
  CHECK(hipEventDestroy(e0));
  CHECK(hipEventDestroy(e1));
  return median(v, 9);
}

static void bench_elementwise(void) {
  const uint64_t bytes = 256 * MIB, n = bytes / 4;
  float *a, *b, *o;
  CHECK(hipMalloc((void **)&a, bytes));
  CHECK(hipMalloc((void **)&b, bytes));
  CHECK(hipMalloc((void **)&o, bytes));
  CHECK(hipMemsetAsync(a, 0, bytes, 0));
  CHECK(hipMemsetAsync(b, 0, bytes, 0));
  hipStream_t s;
  CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  static const char *const names[] = {"ADD", "SUB", "MUL", "RELU"};
  for (int k = 0; k < 4; k++) {
    uint64_t moved = (k == K_RELU ? 2 : 3) * bytes;    /* read + written */
    double ms = time_ms(s, k, a, b, o, n, 0);
    /* The same bytes moved by a device copy: moved/2 bytes copied (each read once, written once). */
    double copy_ms = time_ms(s, -1, a, b, o, n, moved / 2 > bytes ? bytes : moved / 2);
    double copy_moved = 2.0 * (double)(moved / 2 > bytes ? bytes : moved / 2);
    double gbs = moved / ms / 1e6, copy_gbs = copy_moved / copy_ms / 1e6;
    char what[64];
    snprintf(what, sizeof what, "%s 256MiB GB/s vs d2d copy", names[k]);
    add_row(what, gbs, copy_gbs, 0.8, 1);
  }
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(a));
  CHECK(hipFree(b));
  CHECK(hipFree(o));
}

/* ---- driver helpers: a RELU [n] model whose input and output are device buffers ---- */

typedef struct env {
  const md_driver *drv;
  md_device *dev;
  md_handle client, prepared;
  uint32_t dims[1];
  md_operand ops[2];
  md_operation op;
  uint32_t in_idx, out_idx;
  md_model model;
} env;

static void die(env *e, const char *what, md_status st) {
  fprintf(stderr, "gpu_bench: %s: %s (%d)\n", what, e->drv->last_error(e->dev), (int)st);
  exit(1);
}

static void env_open(env *e, uint32_t n) {
  memset(e, 0, sizeof *e);
  e->drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_status st = e->drv->open_device("backend=hip", &e->dev);
  if (st != MD_NONE) die(e, "open_device(backend=hip)", st);
  if ((st = e->drv->open_client(e->dev, &e->client)) != MD_NONE) die(e, "open_client", st);
  e->dims[0] = n;
  e->ops[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = e->dims, .lifetime = MD_SUBGRAPH_INPUT};
  e->ops[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = e->dims, .lifetime = MD_SUBGRAPH_OUTPUT};
  e->in_idx = 0;
  e->out_idx = 1;
  e->op = (md_operation){.type = MD_OP_RELU, .n_inputs = 1, .inputs = &e->in_idx, .n_outputs = 1, .outputs = &e->out_idx};
  e->model = (md_model){.n_operands = 2, .operands = e->ops, .n_operations = 1, .operations = &e->op,
                        .n_inputs = 1, .inputs = &e->in_idx, .n_outputs = 1, .outputs = &e->out_idx};
  if ((st = e->drv->prepare_model(e->dev, e->client, &e->model, &e->prepared)) != MD_NONE) die(e, "prepare_model", st);
}

static md_token env_buffer(env *e, int output) {
  md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_buffer_desc desc = {0};
  md_token t;
  md_status st = e->drv->allocate(e->dev, e->client, &desc, &e->prepared, 1, output ? NULL : &role, output ? 0 : 1,
                                  output ? &role : NULL, output ? 1 : 0, &t);
  if (st != MD_NONE) die(e, "allocate", st);
  return t;
}

static void env_close(env *e) {
  e->drv->close_client(e->dev, e->client, NULL);
  e->drv->close_device(e->dev);
}

/* ---- 2. copy_from / copy_to vs pinned copies ---- */

static void bench_copies(uint64_t bytes) {
  env e;
  env_open(&e, (uint32_t)(bytes / 4));
  md_token t = env_buffer(&e, 0);
  int fd = memfd_create("gpu_bench", 0);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
    perror("memfd");
    exit(1);
  }
  void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  memset(map, 0x3C, bytes);
  md_memory mem = {.kind = MD_MEM_ASHMEM, .fd = fd, .offset = 0, .size = bytes, .prot = PROT_READ | PROT_WRITE};
  void *pinned, *dev;
  CHECK(hipHostMalloc(&pinned, bytes, hipHostMallocDefault));
  memset(pinned, 0x3C, bytes);
  CHECK(hipMalloc(&dev, bytes));
  double from[7], to[7], h2d[7], d2h[7];
  for (int r = -1; r < 7; r++) {
    double t0 = now_s();
    md_status st = e.drv->copy_from(e.dev, e.client, t, &mem, 0, NULL);
    double t1 = now_s();
    if (st != MD_NONE) die(&e, "copy_from", st);
    st = e.drv->copy_to(e.dev, e.client, t, &mem);
    double t2 = now_s();
    if (st != MD_NONE) die(&e, "copy_to", st);
    CHECK(hipMemcpy(dev, pinned, bytes, hipMemcpyHostToDevice));
    double t3 = now_s();
    CHECK(hipMemcpy(pinned, dev, bytes, hipMemcpyDeviceToHost));
    double t4 = now_s();
    if (r >= 0) {
      from[r] = t1 - t0;
      to[r] = t2 - t1;
      h2d[r] = t3 - t2;
      d2h[r] = t4 - t3;
    }
  }
  double gb = (double)bytes / 1e9;
  char what[64];
  snprintf(what, sizeof what, "copy_from %" PRIu64 "MiB GB/s vs pinned H2D", bytes / MIB);
  add_row(what, gb / median(from, 7), gb / median(h2d, 7), 0.8, 1);
  snprintf(what, sizeof what, "copy_to %" PRIu64 "MiB GB/s vs pinned D2H", bytes / MIB);
  add_row(what, gb / median(to, 7), gb / median(d2h, 7), 0.8, 1);
  CHECK(hipHostFree(pinned));
  CHECK(hipFree(dev));
  munmap(map, bytes);
  close(fd);
  e.drv->free_buffer(e.dev, e.client, t);
  env_close(&e);
}

/* ---- 4. an execution on registered pools vs pinned copies + the raw kernel ---- */

static int memfd_of(uint64_t bytes, uint8_t fill, void **map) {
  int fd = memfd_create("gpu_bench_reg", 0);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
    perror("memfd");
    exit(1);
  }
  *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (*map == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memset(*map, fill, bytes);
  return fd;
}

static void bench_registered(uint64_t bytes) {
  const uint32_t n = (uint32_t)(bytes / 4);
  env e;
  env_open(&e, n);
  void *in_map, *out_map;
  int in_fd = memfd_of(bytes, 0x3C, &in_map), out_fd = memfd_of(bytes, 0, &out_map);
  md_memory in_mem = {.kind = MD_MEM_ASHMEM, .fd = in_fd, .size = bytes, .prot = PROT_READ | PROT_WRITE};
  md_memory out_mem = {.kind = MD_MEM_ASHMEM, .fd = out_fd, .size = bytes, .prot = PROT_READ | PROT_WRITE};
  md_handle in_pool, out_pool;
  md_status st = e.drv->register_memory(e.dev, e.client, &in_mem, &in_pool);
  if (st != MD_NONE) die(&e, "register_memory", st);
  if ((st = e.drv->register_memory(e.dev, e.client, &out_mem, &out_pool)) != MD_NONE) die(&e, "register_memory", st);
  md_request_pool reg[2] = {{.is_token = 2, .token = in_pool}, {.is_token = 2, .token = out_pool}};
  md_request_pool desc[2] = {{.is_token = 0, .memory = in_mem}, {.is_token = 0, .memory = out_mem}};
  md_request_arg ia = {.pool = 0, .length = bytes}, oa = {.pool = 1, .length = bytes};
  md_request rq_reg = {.n_inputs = 1, .inputs = &ia, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = reg};
  md_request rq_desc = rq_reg;
  rq_desc.pools = desc;
  md_output_shape shape;
  void *pin_in, *pin_out;
  float *a, *o;
  CHECK(hipHostMalloc(&pin_in, bytes, hipHostMallocDefault));
  CHECK(hipHostMalloc(&pin_out, bytes, hipHostMallocDefault));
  memset(pin_in, 0x3C, bytes);
  CHECK(hipMalloc((void **)&a, bytes));
  CHECK(hipMalloc((void **)&o, bytes));
  hipStream_t s;
  CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  enum { REPS = 7 };
  double t_reg[REPS], t_desc[REPS], t_raw[REPS];
  for (int r = -1; r < REPS; r++) {
    double t0 = now_s();
    if ((st = e.drv->execute(e.dev, e.client, e.prepared, &rq_reg, &shape, 1, NULL)) != MD_NONE) die(&e, "execute", st);
    double t1 = now_s();
    if ((st = e.drv->execute(e.dev, e.client, e.prepared, &rq_desc, &shape, 1, NULL)) != MD_NONE) die(&e, "execute", st);
    double t2 = now_s();
    CHECK(hipMemcpyAsync(a, pin_in, bytes, hipMemcpyHostToDevice, s));
    CHECK(md__hip_relu(s, a, o, n));
    CHECK(hipMemcpyAsync(pin_out, o, bytes, hipMemcpyDeviceToHost, s));
    CHECK(hipStreamSynchronize(s));
    double t3 = now_s();
    if (r >= 0) {
      t_reg[r] = (t1 - t0) * 1e3;
      t_desc[r] = (t2 - t1) * 1e3;
      t_raw[r] = (t3 - t2) * 1e3;
    }
  }
  const float *y = out_map, *x = in_map;
  if (memcmp(x, y, 16) != 0 || memcmp((const uint8_t *)x + bytes - 16, (const uint8_t *)y + bytes - 16, 16) != 0) {
    fprintf(stderr, "gpu_bench: registered RELU: wrong result\n");   /* 0x3C3C3C3C is positive: RELU keeps it */
    exit(1);
  }
  double raw = median(t_raw, REPS);
  char what[64];
  snprintf(what, sizeof what, "execute RELU %" PRIu64 "MiB registered ms vs pinned", bytes / MIB);
  add_row(what, median(t_reg, REPS), raw, 1.25, 0);
  snprintf(what, sizeof what, "execute RELU %" PRIu64 "MiB descriptors ms vs pinned", bytes / MIB);
  add_row(what, median(t_desc, REPS), raw, -1, 0);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(a));
  CHECK(hipFree(o));
  CHECK(hipHostFree(pin_in));
  CHECK(hipHostFree(pin_out));
  e.drv->unregister_memory(e.dev, e.client, in_pool);
  e.drv->unregister_memory(e.dev, e.client, out_pool);
  munmap(in_map, bytes);
  munmap(out_map, bytes);
  close(in_fd);
  close(out_fd);
  env_close(&e);
}

/* ---- 3. execute overhead vs raw launch + sync ---- */

static void bench_execute(void) {
  const uint32_t n = 1024;
  env e;
  env_open(&e, n);
  md_token in = env_buffer(&e, 0), out = env_buffer(&e, 1);
  float host[1024];
  for (uint32_t i = 0; i < n; i++) host[i] = (float)i - 512.0f;
  int fd = memfd_create("gpu_bench_exec", 0);
  if (fd < 0 || ftruncate(fd, sizeof host) != 0 || pwrite(fd, host, sizeof host, 0) != (ssize_t)sizeof host) {
    perror("memfd");
    exit(1);
  }
  md_memory mem = {.kind = MD_MEM_ASHMEM, .fd = fd, .size = sizeof host, .prot = PROT_READ | PROT_WRITE};
  md_status st = e.drv->copy_from(e.dev, e.client, in, &mem, 0, NULL);
  if (st != MD_NONE) die(&e, "copy_from", st);
  md_request_pool pools[2] = {{.is_token = 1, .token = in}, {.is_token = 1, .token = out}};
  md_request_arg ia = {.pool = 0}, oa = {.pool = 1};
  md_request req = {.n_inputs = 1, .inputs = &ia, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = pools};
  md_output_shape shape;
  enum { ITERS = 2000, REPS = 7 };
  double ex[REPS], raw[REPS];
  float *a, *o;
  CHECK(hipMalloc((void **)&a, n * 4));
  CHECK(hipMalloc((void **)&o, n * 4));
  hipStream_t s;
  CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  for (int r = -1; r < REPS; r++) {
    double t0 = now_s();
    for (int i = 0; i < ITERS; i++) {
      st = e.drv->execute(e.dev, e.client, e.prepared, &req, &shape, 1, NULL);
      if (st != MD_NONE) die(&e, "execute", st);
    }
    double t1 = now_s();
    for (int i = 0; i < ITERS; i++) {
      CHECK(md__hip_relu(s, a, o, n));
      CHECK(hipStreamSynchronize(s));
    }
    double t2 = now_s();
    if (r >= 0) {
      ex[r] = (t1 - t0) / ITERS * 1e6;
      raw[r] = (t2 - t1) / ITERS * 1e6;
    }
  }
  add_row("execute RELU[1024] us vs raw launch+sync", median(ex, REPS), median(raw, REPS), 1.2, 0);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(a));
  CHECK(hipFree(o));
  close(fd);
  e.drv->free_buffer(e.dev, e.client, in);
  e.drv->free_buffer(e.dev, e.client, out);
  env_close(&e);
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess || count == 0) {
    printf("gpu_bench: skipped: no GPU (hipGetDeviceCount: %s, %d devices)\n",
           err != hipSuccess ? hipGetErrorString(err) : "ok", count);
    return 77;
  }
  char name[128] = "";
  (void)hipDeviceGetName(name, sizeof name, 0);
  bench_elementwise();
  bench_copies(64 * MIB);
  if (!quick) bench_copies(256 * MIB);
  bench_execute();
  bench_registered(64 * MIB);
  printf("\nGPU benchmark (%s)\n", name);
  printf("%-44s %12s %12s %8s %8s  %s\n", "figure", "value", "baseline", "ratio", "target", "");
  int missed = 0, targets = 0;
  for (int i = 0; i < n_rows; i++) {
    const row *r = &rows[i];
    double ratio = r->value / r->base;
    if (r->target < 0) {
      printf("%-44s %12.2f %12.2f %8.3f %-9s  info\n", r->what, r->value, r->base, ratio, "-");
      continue;
    }
    int ok = r->higher_better ? ratio >= r->target : ratio <= r->target;
    missed += !ok;
    targets++;
    printf("%-44s %12.2f %12.2f %8.3f %s%-7.2f  %s\n", r->what, r->value, r->base, ratio,
           r->higher_better ? ">=" : "<=", r->target, ok ? "ok" : "MISSED");
  }
  printf("%d of %d targets met\n", targets - missed, targets);
  return 0;
}
