/* wl_common.c - the simulated workloads' shared code: driver loading, options, checks, PRNG,
 * memfd pools, model/request builders, host reference kernels, digest, summary line. */
#include "wl_common.h"
#include "md/config.h"
#include "md/loader.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/status.h"

/* ---- failure and checks --------------------------------------------------------------------- */

_Noreturn void wl_fail(const wl_ctx *ctx, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The first failing thread reports and exits; another one failing meanwhile (often a
   * consequence of the first) waits for that exit instead of racing it through exit(). */
  static atomic_flag failing = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&failing))
    for (;;) pause();
  fprintf(stderr, "workload %s: FAIL: %s\n", ctx ? ctx->name : "?", msg);
  fflush(stderr);
  exit(1);
}

void wl_check_(wl_ctx *ctx, md_status got, md_status want, const char *call, const char *why,
               const char *file, int line) {
  if (got == want) return;
  const char *err = ctx->drv && ctx->dev ? ctx->drv->last_error(ctx->dev) : "";
  if (!err) err = "(last_error returned NULL)";
  wl_fail(ctx, "%s:%d: %s returned %s, expected %s%s%s; last_error: \"%s\"", file, line, call,
          md_status_name(got), md_status_name(want), why ? " - " : "", why ? why : "", err);
}

/* ---- options, driver, device ---------------------------------------------------------------- */

static _Noreturn void usage(const char *name, uint32_t default_steps, int rc) {
  FILE *f = rc ? stderr : stdout;
  fprintf(f,
          "usage: md_wl_%s [--driver PATH.so] [--config STR] [--seed N]%s\n"
          "  --driver PATH.so  dlopen this driver (default: the linked reference driver)\n"
          "  --config STR      open_device config (default \"backend=sim\"; \";seed=N\" is\n"
          "                    appended when it names no seed, so handle values repeat)\n"
          "  --seed N          seed of every generated value (default 1)\n",
          name, default_steps ? " [--steps N]" : "");
  if (default_steps) fprintf(f, "  --steps N         steps to run (default %u)\n", default_steps);
  exit(rc);
}

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

void wl_init(wl_ctx *ctx, const char *name, int argc, char **argv, uint32_t default_steps) {
  memset(ctx, 0, sizeof *ctx);
  ctx->name = name;
  ctx->seed = 1;
  ctx->steps = default_steps;
  const char *config = "backend=sim";
  for (int i = 1; i < argc; i += 2) {   /* options and their values, in pairs */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) usage(name, default_steps, 0);
    if (!v) {
      fprintf(stderr, "md_wl_%s: %s needs a value\n", name, a);
      usage(name, default_steps, 2);
    }
    if (!strcmp(a, "--driver")) {
      ctx->driver_path = v;
    } else if (!strcmp(a, "--config")) {
      config = v;
    } else if (!strcmp(a, "--seed")) {
      if (parse_u64(v, &n)) {
        fprintf(stderr, "md_wl_%s: --seed '%s' is not an unsigned number\n", name, v);
        usage(name, default_steps, 2);
      }
      ctx->seed = n;
    } else if (!strcmp(a, "--steps") && default_steps) {
      if (parse_u64(v, &n) || n == 0 || n > 1000000) {
        fprintf(stderr, "md_wl_%s: --steps '%s' must be 1..1000000\n", name, v);
        usage(name, default_steps, 2);
      }
      ctx->steps = (uint32_t)n;
    } else {
      fprintf(stderr, "md_wl_%s: unknown option '%s'\n", name, a);
      usage(name, default_steps, 2);
    }
  }
  int n;
  if (md_config_has(config, "seed"))
    n = snprintf(ctx->config, sizeof ctx->config, "%s", config);
  else
    n = snprintf(ctx->config, sizeof ctx->config, "%s%sseed=%" PRIu64, config,
                 *config ? ";" : "", ctx->seed);
  if (n < 0 || (size_t)n >= sizeof ctx->config) {
    fprintf(stderr, "md_wl_%s: --config is longer than %zu bytes\n", name, sizeof ctx->config - 32);
    exit(2);
  }
}

void wl_open(wl_ctx *ctx) {
  char err[512];
  void *dl = NULL;
  /* md/loader.h: dlopen (RTLD_DEEPBIND, see there) + the table checks; the linked reference
   * driver without --driver. */
  const md_driver *d = md_driver_load(ctx->driver_path, md_driver_entry, &dl, err, sizeof err);
  if (!d) wl_fail(ctx, "%s", err);
  ctx->dl = dl;
  ctx->drv = d;
  md_status st = d->open_device(ctx->config, &ctx->dev);
  if (st != MD_NONE || !ctx->dev) {
    /* The status first: last_error(NULL) (no device yet) is what the reference driver answers
     * for a failed open, but another driver might not take a NULL device. */
    fprintf(stderr, "workload %s: open_device(\"%s\") returned %s\n", ctx->name, ctx->config,
            md_status_name(st));
    fflush(stderr);
    wl_fail(ctx, "open_device(\"%s\"): %s", ctx->config, st == MD_NONE ? "NONE but no device" : d->last_error(NULL));
  }
  md_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  WL_OK(ctx, d->get_capabilities(ctx->dev, &caps));
  if (!caps.supports_memory_domains)
    wl_fail(ctx, "driver '%s' (backend %.32s) does not support memory domains", d->name, caps.backend);
  printf("workload %s: driver %s %s, backend %.32s, device %.64s, seed %" PRIu64 ", config \"%s\"\n",
         ctx->name, d->name ? d->name : "?", d->version ? d->version : "?", caps.backend,
         caps.device_name, ctx->seed, ctx->config);
  fflush(stdout);
}

void wl_close_client_clean(wl_ctx *ctx, md_handle client) {
  md_leak_report leaks;
  memset(&leaks, 0xff, sizeof leaks);
  WL_OK(ctx, ctx->drv->close_client(ctx->dev, client, &leaks));
  if (leaks.buffers || leaks.prepared_models || leaks.events || leaks.bytes)
    wl_fail(ctx, "close_client after freeing everything reported leaks: %u buffers, %u models, "
            "%u events, %llu bytes (SPEC 5)", leaks.buffers, leaks.prepared_models, leaks.events,
            (unsigned long long)leaks.bytes);
}

void wl_close(wl_ctx *ctx) {
  if (ctx->dev) ctx->drv->close_device(ctx->dev);
  ctx->dev = NULL;
  md_driver_unload(ctx->dl);
  ctx->dl = NULL;
}

void wl_pass(wl_ctx *ctx, uint64_t digest, const char *extra_fmt, ...) {
  char extra[256] = "";
  if (extra_fmt) {
    extra[0] = ',';
    extra[1] = ' ';
    va_list ap;
    va_start(ap, extra_fmt);
    vsnprintf(extra + 2, sizeof extra - 2, extra_fmt, ap);
    va_end(ap);
  }
  printf("workload %s: PASS (%" PRIu64 " executions, %" PRIu64 " copies, %" PRIu64
         " expected rejections, digest %016" PRIx64 "%s)\n",
         ctx->name, atomic_load(&ctx->executions), atomic_load(&ctx->copies),
         atomic_load(&ctx->rejections), digest, extra);
  fflush(stdout);
}

/* ---- PRNG ----------------------------------------------------------------------------------- */

void wl_rng_init(wl_rng *r, uint64_t seed, uint64_t stream) {
  r->s = seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
}

uint64_t wl_rng_u64(wl_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint32_t wl_rng_below(wl_rng *r, uint32_t n) { return (uint32_t)((wl_rng_u64(r) >> 32) % n); }

float wl_rng_float(wl_rng *r, float lo, float hi) {
  /* 24 random bits: every value exactly representable, the same on every platform. */
  float u = (float)(wl_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

void wl_rng_fill(wl_rng *r, float *v, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) v[i] = wl_rng_float(r, lo, hi);
}

/* ---- memfd pools ---------------------------------------------------------------------------- */

int wl_memfd(const wl_ctx *ctx, const char *name, const void *data, size_t size) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) wl_fail(ctx, "memfd_create(%s): %s", name, strerror(errno));
  if (ftruncate(fd, (off_t)size) != 0) wl_fail(ctx, "ftruncate(%s, %zu): %s", name, size, strerror(errno));
  if (data) wl_fd_write(ctx, fd, 0, data, size);
  return fd;
}

void wl_fd_write(const wl_ctx *ctx, int fd, uint64_t off, const void *data, size_t n) {
  ssize_t w = pwrite(fd, data, n, (off_t)off);
  if (w != (ssize_t)n) wl_fail(ctx, "pwrite(fd %d, %zu bytes at %" PRIu64 "): %zd", fd, n, off, w);
}

void wl_fd_read(const wl_ctx *ctx, int fd, uint64_t off, void *out, size_t n) {
  ssize_t r = pread(fd, out, n, (off_t)off);
  if (r != (ssize_t)n) wl_fail(ctx, "pread(fd %d, %zu bytes at %" PRIu64 "): %zd", fd, n, off, r);
}

md_memory wl_ashmem(int fd, uint64_t size) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_ASHMEM;
  m.fd = fd;
  m.size = size;
  m.prot = PROT_READ | PROT_WRITE;
  return m;
}

md_memory wl_mmap_fd(int fd, uint64_t offset, uint64_t size) {
  md_memory m = wl_ashmem(fd, size);
  m.kind = MD_MEM_MMAP_FD;
  m.offset = offset;
  return m;
}

md_memory wl_blob(int fd, uint32_t width) {
  md_memory m = wl_ashmem(fd, width);
  m.kind = MD_MEM_HARDWARE_BUFFER_BLOB;
  m.width = width;
  m.height = 1;
  m.layers = 1;
  m.format = WL_HWB_FORMAT_BLOB;
  return m;
}

void wl_staging_open(const wl_ctx *ctx, wl_staging *s, size_t cap) {
  s->fd = wl_memfd(ctx, "wl-staging", NULL, cap);
  s->cap = cap;
}

void wl_staging_close(wl_staging *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

md_memory wl_staging_mem(const wl_staging *s, size_t bytes) { return wl_mmap_fd(s->fd, 0, bytes); }

void wl_copy_from_(wl_ctx *ctx, wl_staging *s, md_handle client, md_token tok, const float *v,
                   size_t n, uint32_t rank, const uint32_t *dims, const char *file, int line) {
  size_t bytes = n * sizeof(float);
  if (bytes > s->cap) wl_fail(ctx, "staging: %zu bytes > capacity %zu", bytes, s->cap);
  wl_fd_write(ctx, s->fd, 0, v, bytes);
  md_memory src = wl_staging_mem(s, bytes);
  wl_check_(ctx, ctx->drv->copy_from(ctx->dev, client, tok, &src, rank, dims), MD_NONE,
            "copy_from", NULL, file, line);
  atomic_fetch_add(&ctx->copies, 1);
}

void wl_copy_to_(wl_ctx *ctx, wl_staging *s, md_handle client, md_token tok, float *out, size_t n,
                 const char *file, int line) {
  size_t bytes = n * sizeof(float);
  if (bytes > s->cap) wl_fail(ctx, "staging: %zu bytes > capacity %zu", bytes, s->cap);
  /* NaN first, so a copy_to that returns NONE without writing cannot pass on stale bytes. */
  uint8_t nan_bytes[4096];
  memset(nan_bytes, 0xff, sizeof nan_bytes);
  for (size_t off = 0; off < bytes; off += sizeof nan_bytes)
    wl_fd_write(ctx, s->fd, off, nan_bytes, bytes - off < sizeof nan_bytes ? bytes - off : sizeof nan_bytes);
  md_memory dst = wl_staging_mem(s, bytes);
  wl_check_(ctx, ctx->drv->copy_to(ctx->dev, client, tok, &dst), MD_NONE, "copy_to", NULL, file, line);
  atomic_fetch_add(&ctx->copies, 1);
  wl_fd_read(ctx, s->fd, 0, out, bytes);
}

/* ---- model builder -------------------------------------------------------------------------- */

void wl_model_init(wl_model *m, const wl_ctx *ctx) {
  memset(m, 0, sizeof *m);
  m->ctx = ctx;
}

static uint32_t add_operand(wl_model *m, md_operand_type type, md_lifetime lt, uint32_t rank,
                            const uint32_t *dims) {
  if (m->n_operands == WL_MAX_OPERANDS) wl_fail(m->ctx, "model builder: more than %d operands", WL_MAX_OPERANDS);
  if (rank > MD_MAX_RANK) wl_fail(m->ctx, "model builder: rank %u > %u", rank, MD_MAX_RANK);
  uint32_t i = m->n_operands++;
  md_operand *o = &m->operands[i];
  memset(o, 0, sizeof *o);
  o->type = type;
  o->lifetime = lt;
  o->rank = rank;
  if (rank) memcpy(m->dims[i], dims, rank * sizeof *dims);
  o->dims = rank ? m->dims[i] : NULL;
  return i;
}

static uint32_t add_io(wl_model *m, uint32_t *list, uint32_t *n, uint32_t operand) {
  if (*n == WL_MAX_MODEL_IO) wl_fail(m->ctx, "model builder: more than %d model inputs/outputs", WL_MAX_MODEL_IO);
  list[(*n)++] = operand;
  return operand;
}

uint32_t wl_input(wl_model *m, uint32_t rank, const uint32_t *dims) {
  return add_io(m, m->inputs, &m->n_inputs, add_operand(m, MD_TENSOR_FLOAT32, MD_SUBGRAPH_INPUT, rank, dims));
}

uint32_t wl_output(wl_model *m, uint32_t rank, const uint32_t *dims) {
  return add_io(m, m->outputs, &m->n_outputs, add_operand(m, MD_TENSOR_FLOAT32, MD_SUBGRAPH_OUTPUT, rank, dims));
}

uint32_t wl_temp(wl_model *m, uint32_t rank, const uint32_t *dims) {
  return add_operand(m, MD_TENSOR_FLOAT32, MD_TEMPORARY_VARIABLE, rank, dims);
}

static uint32_t add_copy(wl_model *m, md_operand_type type, uint32_t rank, const uint32_t *dims,
                         const void *v, size_t bytes) {
  uint64_t off = (m->n_values + 3u) & ~(uint64_t)3u;
  if (off + bytes > WL_MAX_VALUES) wl_fail(m->ctx, "model builder: operand values over %d bytes", WL_MAX_VALUES);
  uint32_t i = add_operand(m, type, MD_CONSTANT_COPY, rank, dims);
  memcpy(m->values + off, v, bytes);
  m->n_values = off + bytes;
  m->operands[i].offset = off;
  m->operands[i].length = bytes;
  return i;
}

static size_t count(uint32_t rank, const uint32_t *dims) {
  size_t n = 1;
  for (uint32_t k = 0; k < rank; k++) n *= dims[k];
  return n;
}

uint32_t wl_const_i32(wl_model *m, int32_t v) { return add_copy(m, MD_INT32, 0, NULL, &v, sizeof v); }
uint32_t wl_const_f32(wl_model *m, float v) { return add_copy(m, MD_FLOAT32, 0, NULL, &v, sizeof v); }

uint32_t wl_const_tensor(wl_model *m, uint32_t rank, const uint32_t *dims, const float *v) {
  return add_copy(m, MD_TENSOR_FLOAT32, rank, dims, v, count(rank, dims) * sizeof(float));
}

uint32_t wl_const_i32_tensor(wl_model *m, uint32_t rank, const uint32_t *dims, const int32_t *v) {
  return add_copy(m, MD_TENSOR_INT32, rank, dims, v, count(rank, dims) * sizeof(int32_t));
}

uint32_t wl_pool(wl_model *m, md_memory mem) {
  if (m->n_pools == WL_MAX_POOLS) wl_fail(m->ctx, "model builder: more than %d pools", WL_MAX_POOLS);
  m->pools[m->n_pools] = mem;
  return m->n_pools++;
}

uint32_t wl_const_ref(wl_model *m, uint32_t pool, uint64_t offset, uint32_t rank, const uint32_t *dims) {
  uint32_t i = add_operand(m, MD_TENSOR_FLOAT32, MD_CONSTANT_REFERENCE, rank, dims);
  m->operands[i].pool = pool;
  m->operands[i].offset = offset;
  m->operands[i].length = count(rank, dims) * sizeof(float);
  return i;
}

void wl_op(wl_model *m, md_operation_type type, uint32_t n_in, const uint32_t *ins, uint32_t out) {
  if (m->n_operations == WL_MAX_OPERATIONS) wl_fail(m->ctx, "model builder: more than %d operations", WL_MAX_OPERATIONS);
  if (n_in + 1 > WL_MAX_OP_IO) wl_fail(m->ctx, "model builder: operation with %u inputs", n_in);
  uint32_t k = m->n_operations++;
  uint32_t *io = m->op_io[k];
  memcpy(io, ins, n_in * sizeof *ins);
  io[n_in] = out;
  md_operation *op = &m->operations[k];
  memset(op, 0, sizeof *op);
  op->type = type;
  op->n_inputs = n_in;
  op->inputs = io;
  op->n_outputs = 1;
  op->outputs = io + n_in;
}

const md_model *wl_model_get(wl_model *m) {
  md_model *d = &m->model;
  memset(d, 0, sizeof *d);
  d->n_operands = m->n_operands;
  d->operands = m->operands;
  d->n_operations = m->n_operations;
  d->operations = m->operations;
  d->n_inputs = m->n_inputs;
  d->inputs = m->inputs;
  d->n_outputs = m->n_outputs;
  d->outputs = m->outputs;
  d->operand_values = m->n_values ? m->values : NULL;
  d->operand_values_size = m->n_values;
  d->n_pools = m->n_pools;
  d->pools = m->n_pools ? m->pools : NULL;
  return d;
}

/* ---- request builder ------------------------------------------------------------------------ */

void wl_req_init(wl_request *r, const wl_ctx *ctx) {
  memset(r, 0, sizeof *r);
  r->ctx = ctx;
}

static uint32_t add_pool(wl_request *r, md_request_pool p) {
  if (r->req.n_pools == WL_MAX_REQ_POOLS) wl_fail(r->ctx, "request builder: more than %d pools", WL_MAX_REQ_POOLS);
  r->pools[r->req.n_pools] = p;
  return r->req.n_pools++;
}

uint32_t wl_req_token(wl_request *r, md_token tok) {
  md_request_pool p;
  memset(&p, 0, sizeof p);
  p.is_token = 1;
  p.token = tok;
  p.memory.fd = -1;
  return add_pool(r, p);
}

uint32_t wl_req_memory(wl_request *r, md_memory mem) {
  md_request_pool p;
  memset(&p, 0, sizeof p);
  p.memory = mem;
  return add_pool(r, p);
}

static void add_arg(wl_request *r, md_request_arg *args, uint32_t (*dims)[MD_MAX_RANK], uint32_t *n,
                    uint32_t pool, uint64_t offset, uint64_t length, uint32_t rank, const uint32_t *d) {
  if (*n == WL_MAX_REQ_ARGS) wl_fail(r->ctx, "request builder: more than %d arguments", WL_MAX_REQ_ARGS);
  if (rank > MD_MAX_RANK) wl_fail(r->ctx, "request builder: rank %u > %u", rank, MD_MAX_RANK);
  md_request_arg *a = &args[*n];
  memset(a, 0, sizeof *a);
  a->pool = pool;
  a->offset = offset;
  a->length = length;
  a->rank = rank;
  if (rank) memcpy(dims[*n], d, rank * sizeof *d);
  a->dims = rank ? dims[*n] : NULL;
  (*n)++;
}

void wl_req_in(wl_request *r, uint32_t pool, uint64_t offset, uint64_t length, uint32_t rank,
               const uint32_t *dims) {
  add_arg(r, r->in, r->in_dims, &r->req.n_inputs, pool, offset, length, rank, dims);
}

void wl_req_out(wl_request *r, uint32_t pool, uint64_t offset, uint64_t length, uint32_t rank,
                const uint32_t *dims) {
  add_arg(r, r->out, r->out_dims, &r->req.n_outputs, pool, offset, length, rank, dims);
}

void wl_req_in_token(wl_request *r, md_token tok) { wl_req_in(r, wl_req_token(r, tok), 0, 0, 0, NULL); }
void wl_req_out_token(wl_request *r, md_token tok) { wl_req_out(r, wl_req_token(r, tok), 0, 0, 0, NULL); }

const md_request *wl_req_get(wl_request *r) {
  r->req.inputs = r->req.n_inputs ? r->in : NULL;
  r->req.outputs = r->req.n_outputs ? r->out : NULL;
  r->req.pools = r->req.n_pools ? r->pools : NULL;
  return &r->req;
}

/* ---- checks and host reference -------------------------------------------------------------- */

void wl_expect_close(const wl_ctx *ctx, const char *what, const float *got, const float *want,
                     size_t n, float tol) {
  for (size_t i = 0; i < n; i++) {
    float d = fabsf(got[i] - want[i]);
    if (!(d <= tol * (1.0f + fabsf(want[i]))))
      wl_fail(ctx, "%s: element %zu of %zu is %.9g, the host computed %.9g (|diff| %.3g > tol %.3g)",
              what, i, n, (double)got[i], (double)want[i], (double)d,
              (double)(tol * (1.0f + fabsf(want[i]))));
  }
}

void wl_expect_shape(const wl_ctx *ctx, const char *what, const md_output_shape *shape,
                     uint32_t rank, const uint32_t *dims) {
  int ok = shape->rank == rank && shape->is_sufficient == 1;
  for (uint32_t k = 0; ok && k < rank; k++) ok = shape->dims[k] == dims[k];
  if (ok) return;
  char got[128] = "", want[128] = "";
  size_t g = 0, w = 0;
  for (uint32_t k = 0; k < shape->rank && k < MD_MAX_RANK; k++)
    g += (size_t)snprintf(got + g, sizeof got - g, "%s%u", k ? "," : "", shape->dims[k]);
  for (uint32_t k = 0; k < rank; k++)
    w += (size_t)snprintf(want + w, sizeof want - w, "%s%u", k ? "," : "", dims[k]);
  wl_fail(ctx, "%s: output shape rank %u [%s] is_sufficient %u, expected rank %u [%s] is_sufficient 1",
          what, shape->rank, got, shape->is_sufficient, rank, want);
}

float wl_act(int32_t act, float x) {
  switch (act) {
  case WL_ACT_RELU: return x > 0.0f ? x : 0.0f;
  case WL_ACT_RELU1: return x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
  case WL_ACT_RELU6: return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
  default: return x;
  }
}

void wl_host_fc(const float *in, const float *w, const float *bias, uint32_t batch, uint32_t in_size,
                uint32_t units, int32_t act, float *out) {
  for (uint32_t b = 0; b < batch; b++)
    for (uint32_t u = 0; u < units; u++) {
      float acc = 0.0f;
      for (uint32_t i = 0; i < in_size; i++) acc += in[b * in_size + i] * w[u * in_size + i];
      out[b * units + u] = wl_act(act, acc + bias[u]);
    }
}

void wl_host_softmax(const float *in, uint32_t rows, uint32_t cols, float beta, float *out) {
  for (uint32_t r = 0; r < rows; r++) {
    const float *x = in + (size_t)r * cols;
    float *y = out + (size_t)r * cols;
    float mx = x[0];
    for (uint32_t c = 1; c < cols; c++) mx = x[c] > mx ? x[c] : mx;
    float sum = 0.0f;
    for (uint32_t c = 0; c < cols; c++) sum += (y[c] = expf(beta * (x[c] - mx)));
    for (uint32_t c = 0; c < cols; c++) y[c] /= sum;
  }
}

uint64_t wl_digest(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
