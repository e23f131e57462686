/* support.c - helpers shared by the runtime's Criterion tests. */
#include "support.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


const md_driver *mdt_driver(void) { return md_driver_entry(MD_DRIVER_ABI_VERSION); }

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
  cr_assert_eq(st, MD_NONE, "open_device(\"%s\"): %s", config ? config : "backend=sim", env->drv->last_error(env->dev));
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

/* ---- Helpers of the black-box rule suite (see support.h). ---- */
#include <fcntl.h>
#include <stdio.h>

#include "md/kernel.h"

md_memory mdt_mmap_fd(int fd, uint64_t offset, uint64_t size) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_MMAP_FD;
  m.fd = fd;
  m.offset = offset;
  m.size = size;
  m.prot = PROT_READ | PROT_WRITE;
  return m;
}

md_memory mdt_hwb_blob(int fd, uint32_t width) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_HARDWARE_BUFFER_BLOB;
  m.fd = fd;
  m.size = width;
  m.prot = PROT_READ | PROT_WRITE;
  m.width = width;
  m.height = 1;
  m.layers = 1;
  m.format = MDT_HWB_FORMAT_BLOB;
  return m;
}

md_memory mdt_hwb_image(int fd, uint32_t width, uint32_t height) {
  md_memory m;
  memset(&m, 0, sizeof m);
  m.kind = MD_MEM_HARDWARE_BUFFER;
  m.fd = fd;
  m.size = 0; /* logical size 0: the bytes are width * height * layers * 4 */
  m.prot = PROT_READ | PROT_WRITE;
  m.width = width;
  m.height = height;
  m.layers = 1;
  m.format = MDT_HWB_FORMAT_RGBA8888;
  return m;
}

int mdt_unmappable_fd(size_t size) {
  int fd = mdt_memfd(NULL, size);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int wfd = open(path, O_WRONLY | O_CLOEXEC);
  close(fd);
  cr_assert(wfd >= 0, "reopening memfd write-only failed");
  return wfd;
}

void mdt_close_fd(int fd) {
  if (fd >= 0) close(fd);
}

md_handle mdt_register(const mdt_env *env, md_handle client, md_memory m) {
  md_handle h = 0;
  cr_assert_eq(env->drv->register_memory(env->dev, client, &m, &h), MD_NONE, "register_memory: %s",
               env->drv->last_error(env->dev));
  cr_assert_neq(h, 0);
  return h;
}

md_handle mdt_open_client(const mdt_env *env) {
  md_handle c = 0;
  md_status st = env->drv->open_client(env->dev, &c);
  cr_assert_eq(st, MD_NONE, "open_client: %s", env->drv->last_error(env->dev));
  cr_assert_neq(c, 0u, "open_client returned handle 0");
  return c;
}

void mdt_close_client(const mdt_env *env, md_handle client, md_leak_report *leaks) {
  md_status st = env->drv->close_client(env->dev, client, leaks);
  cr_assert_eq(st, MD_NONE, "close_client: %s", env->drv->last_error(env->dev));
}

md_handle mdt_prepare_for(const mdt_env *env, md_handle client, const md_model *m) {
  md_handle p = 0;
  md_status st = env->drv->prepare_model(env->dev, client, m, &p);
  cr_assert_eq(st, MD_NONE, "prepare_model: status %d: %s", (int)st, env->drv->last_error(env->dev));
  cr_assert_neq(p, 0u, "prepare_model returned handle 0");
  return p;
}

md_handle mdt_prepare(const mdt_env *env, const md_model *m) {
  return mdt_prepare_for(env, env->client, m);
}

void mdt_release(const mdt_env *env, md_handle prepared) {
  md_status st = env->drv->release_prepared_model(env->dev, env->client, prepared);
  cr_assert_eq(st, MD_NONE, "release_prepared_model: %s", env->drv->last_error(env->dev));
}

md_status mdt_try_alloc(const mdt_env *env, md_handle client, md_handle prepared, bool is_output,
                        uint32_t io, uint32_t rank, const uint32_t *dims, md_token *token) {
  md_buffer_desc desc = {rank, dims};
  md_buffer_role role = {0, io, 1.0f};
  *token = 0;
  return env->drv->allocate(env->dev, client, &desc, &prepared, 1, is_output ? NULL : &role,
                            is_output ? 0 : 1, is_output ? &role : NULL, is_output ? 1 : 0, token);
}

md_token mdt_alloc(const mdt_env *env, md_handle prepared, bool is_output, uint32_t io,
                   uint32_t rank, const uint32_t *dims) {
  md_token t = 0;
  md_status st = mdt_try_alloc(env, env->client, prepared, is_output, io, rank, dims, &t);
  cr_assert_eq(st, MD_NONE, "allocate: status %d: %s", (int)st, env->drv->last_error(env->dev));
  cr_assert_neq(t, 0u, "allocate returned token 0");
  return t;
}

md_token mdt_alloc_inout(const mdt_env *env, md_handle prepared, uint32_t in_io, uint32_t out_io,
                         uint32_t rank, const uint32_t *dims) {
  md_buffer_desc desc = {rank, dims};
  md_buffer_role in = {0, in_io, 1.0f}, out = {0, out_io, 1.0f};
  md_token t = 0;
  md_status st = env->drv->allocate(env->dev, env->client, &desc, &prepared, 1, &in, 1, &out, 1, &t);
  cr_assert_eq(st, MD_NONE, "allocate: status %d: %s", (int)st, env->drv->last_error(env->dev));
  cr_assert_neq(t, 0u, "allocate returned token 0");
  return t;
}

void mdt_free(const mdt_env *env, md_token t) {
  md_status st = env->drv->free_buffer(env->dev, env->client, t);
  cr_assert_eq(st, MD_NONE, "free_buffer: %s", env->drv->last_error(env->dev));
}

md_status mdt_copy_from(const mdt_env *env, md_handle client, md_token t, const void *data,
                        uint64_t bytes, uint32_t rank, const uint32_t *dims) {
  int fd = mdt_memfd(data, (size_t)bytes);
  md_memory m = mdt_ashmem(fd, bytes);
  md_status st = env->drv->copy_from(env->dev, client, t, &m, rank, dims);
  close(fd);
  return st;
}

md_status mdt_copy_to(const mdt_env *env, md_handle client, md_token t, void *out, uint64_t bytes) {
  int fd = mdt_memfd(NULL, (size_t)bytes);
  md_memory m = mdt_ashmem(fd, bytes);
  md_status st = env->drv->copy_to(env->dev, client, t, &m);
  if (st == MD_NONE && out) mdt_read_fd(fd, out, (size_t)bytes);
  close(fd);
  return st;
}

void mdt_req_init(mdt_request *r) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < 16; i++) r->fds[i] = -1;
}

uint32_t mdt_req_pool_mem(mdt_request *r, md_memory m) {
  cr_assert_lt(r->n_pools, 16u);
  uint32_t i = r->n_pools++;
  r->pools[i].is_token = 0;
  r->pools[i].memory = m;
  return i;
}

uint32_t mdt_req_pool_token(mdt_request *r, md_token t) {
  cr_assert_lt(r->n_pools, 16u);
  uint32_t i = r->n_pools++;
  r->pools[i].is_token = 1;
  r->pools[i].token = t;
  return i;
}

uint32_t mdt_req_pool_registered(mdt_request *r, md_handle pool) {
  cr_assert_lt(r->n_pools, 16u);
  uint32_t i = r->n_pools++;
  r->pools[i].is_token = 2;
  r->pools[i].token = pool;
  return i;
}

static void req_arg(md_request_arg *a, uint32_t *dstore, uint32_t pool, uint64_t offset,
                    uint64_t length, uint32_t rank, const uint32_t *dims) {
  memset(a, 0, sizeof *a);
  a->pool = pool;
  a->offset = offset;
  a->length = length;
  a->rank = rank;
  cr_assert_leq(rank, MD_MAX_RANK);
  if (rank) memcpy(dstore, dims, rank * sizeof *dims);
  a->dims = dstore;
}

uint32_t mdt_req_in_arg(mdt_request *r, uint32_t pool, uint64_t offset, uint64_t length,
                        uint32_t rank, const uint32_t *dims) {
  cr_assert_lt(r->n_in, 8u);
  uint32_t i = r->n_in++;
  req_arg(&r->in[i], r->in_dims[i], pool, offset, length, rank, dims);
  return i;
}

uint32_t mdt_req_out_arg(mdt_request *r, uint32_t pool, uint64_t offset, uint64_t length,
                         uint32_t rank, const uint32_t *dims) {
  cr_assert_lt(r->n_out, 8u);
  uint32_t i = r->n_out++;
  req_arg(&r->out[i], r->out_dims[i], pool, offset, length, rank, dims);
  return i;
}

uint32_t mdt_req_in_data(mdt_request *r, const void *data, uint64_t bytes, uint32_t rank,
                         const uint32_t *dims) {
  int fd = mdt_memfd(data, (size_t)bytes);
  uint32_t p = mdt_req_pool_mem(r, mdt_ashmem(fd, bytes));
  r->fds[p] = fd;
  return mdt_req_in_arg(r, p, 0, bytes, rank, dims);
}

uint32_t mdt_req_out_pool(mdt_request *r, uint64_t bytes, uint32_t rank, const uint32_t *dims) {
  int fd = mdt_memfd(NULL, (size_t)bytes);
  uint32_t p = mdt_req_pool_mem(r, mdt_ashmem(fd, bytes));
  r->fds[p] = fd;
  return mdt_req_out_arg(r, p, 0, bytes, rank, dims);
}

uint32_t mdt_req_in_token(mdt_request *r, md_token t, uint32_t rank, const uint32_t *dims) {
  return mdt_req_in_arg(r, mdt_req_pool_token(r, t), 0, 0, rank, dims);
}

uint32_t mdt_req_out_token(mdt_request *r, md_token t, uint32_t rank, const uint32_t *dims) {
  return mdt_req_out_arg(r, mdt_req_pool_token(r, t), 0, 0, rank, dims);
}

const md_request *mdt_req(mdt_request *r) {
  r->req.n_inputs = r->n_in;
  r->req.inputs = r->in;
  r->req.n_outputs = r->n_out;
  r->req.outputs = r->out;
  r->req.n_pools = r->n_pools;
  r->req.pools = r->pools;
  return &r->req;
}

void mdt_req_read_out(const mdt_request *r, uint32_t i, void *out, uint64_t bytes) {
  cr_assert_lt(i, r->n_out);
  const md_request_arg *a = &r->out[i];
  cr_assert_lt(a->pool, r->n_pools);
  const md_request_pool *p = &r->pools[a->pool];
  cr_assert(!p->is_token, "output %u is on a token pool", i);
  cr_assert(pread(p->memory.fd, out, (size_t)bytes, (off_t)(p->memory.offset + a->offset)) ==
                (ssize_t)bytes,
            "pread of output %u failed", i);
}

void mdt_req_fini(mdt_request *r) {
  for (int i = 0; i < 16; i++) {
    if (r->fds[i] >= 0) close(r->fds[i]);
    r->fds[i] = -1;
  }
}

md_status mdt_exec(const mdt_env *env, md_handle prepared, mdt_request *r,
                   md_output_shape *shapes, md_timing *timing) {
  memset(shapes, 0xAB, 8 * sizeof *shapes);
  memset(timing, 0, sizeof *timing);
  return env->drv->execute(env->dev, env->client, prepared, mdt_req(r), shapes, r->n_out, timing);
}

void mdt_mb_init(mdt_model *b) { memset(b, 0, sizeof *b); }

uint32_t mdt_mb_operand(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                        md_lifetime lifetime) {
  cr_assert_lt(b->model.n_operands, 16u);
  cr_assert_leq(rank, MD_MAX_RANK);
  uint32_t i = b->model.n_operands++;
  md_operand *o = &b->operands[i];
  memset(o, 0, sizeof *o);
  o->type = type;
  o->rank = rank;
  if (rank) memcpy(b->dims[i], dims, rank * sizeof *dims);
  o->dims = b->dims[i];
  o->lifetime = lifetime;
  if (lifetime == MD_SUBGRAPH_INPUT) {
    cr_assert_lt(b->model.n_inputs, 8u);
    b->inputs[b->model.n_inputs++] = i;
  } else if (lifetime == MD_SUBGRAPH_OUTPUT) {
    cr_assert_lt(b->model.n_outputs, 8u);
    b->outputs[b->model.n_outputs++] = i;
  }
  return i;
}

uint32_t mdt_mb_tensor_f32(mdt_model *b, uint32_t rank, const uint32_t *dims, md_lifetime lifetime) {
  return mdt_mb_operand(b, MD_TENSOR_FLOAT32, rank, dims, lifetime);
}

uint32_t mdt_mb_quant8(mdt_model *b, uint32_t rank, const uint32_t *dims, float scale, int32_t zp,
                       md_lifetime lifetime) {
  uint32_t i = mdt_mb_operand(b, MD_TENSOR_QUANT8_ASYMM, rank, dims, lifetime);
  b->operands[i].scale = scale;
  b->operands[i].zero_point = zp;
  return i;
}

uint32_t mdt_mb_const_copy(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                           const void *data, uint32_t len) {
  uint64_t off = (b->model.operand_values_size + 7u) & ~(uint64_t)7u;
  cr_assert_leq(off + len, sizeof b->values);
  memcpy(b->values + off, data, len);
  b->model.operand_values_size = off + len;
  uint32_t i = mdt_mb_operand(b, type, rank, dims, MD_CONSTANT_COPY);
  b->operands[i].offset = off;
  b->operands[i].length = len;
  return i;
}

uint32_t mdt_mb_const_i32(mdt_model *b, int32_t v) {
  return mdt_mb_const_copy(b, MD_INT32, 0, NULL, &v, sizeof v);
}

uint32_t mdt_mb_const_ref(mdt_model *b, md_operand_type type, uint32_t rank, const uint32_t *dims,
                          uint32_t pool, uint64_t offset, uint64_t length) {
  uint32_t i = mdt_mb_operand(b, type, rank, dims, MD_CONSTANT_REFERENCE);
  b->operands[i].pool = pool;
  b->operands[i].offset = offset;
  b->operands[i].length = length;
  return i;
}

uint32_t mdt_mb_pool(mdt_model *b, md_memory m) {
  cr_assert_lt(b->model.n_pools, 4u);
  uint32_t i = b->model.n_pools++;
  b->pools[i] = m;
  return i;
}

void mdt_mb_op(mdt_model *b, md_operation_type type, const char *custom_name, uint32_t n_in,
               const uint32_t *in, uint32_t n_out, const uint32_t *out) {
  cr_assert_lt(b->model.n_operations, 4u);
  cr_assert_leq(n_in, 8u);
  cr_assert_leq(n_out, 4u);
  uint32_t k = b->model.n_operations++;
  md_operation *op = &b->ops[k];
  memset(op, 0, sizeof *op);
  op->type = type;
  memcpy(b->op_in[k], in, n_in * sizeof *in);
  memcpy(b->op_out[k], out, n_out * sizeof *out);
  op->n_inputs = n_in;
  op->inputs = b->op_in[k];
  op->n_outputs = n_out;
  op->outputs = b->op_out[k];
  op->custom_name = custom_name;
}

const md_model *mdt_mb_model(mdt_model *b) {
  b->model.operands = b->operands;
  b->model.operations = b->ops;
  b->model.inputs = b->inputs;
  b->model.outputs = b->outputs;
  b->model.operand_values = b->model.operand_values_size ? b->values : NULL;
  b->model.pools = b->model.n_pools ? b->pools : NULL;
  return &b->model;
}

const md_model *mdt_add_model(mdt_model *b, uint32_t ra, const uint32_t *da, uint32_t rb,
                              const uint32_t *db, uint32_t ro, const uint32_t *dout, int32_t act) {
  mdt_mb_init(b);
  uint32_t in[3], out[1];
  in[0] = mdt_mb_tensor_f32(b, ra, da, MD_SUBGRAPH_INPUT);
  in[1] = mdt_mb_tensor_f32(b, rb, db, MD_SUBGRAPH_INPUT);
  in[2] = mdt_mb_const_i32(b, act);
  out[0] = mdt_mb_tensor_f32(b, ro, dout, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, out);
  return mdt_mb_model(b);
}

const md_model *mdt_add2_model(mdt_model *b, uint32_t rank, const uint32_t *dims) {
  mdt_mb_init(b);
  uint32_t in[3], out0, out1;
  in[0] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[1] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[2] = mdt_mb_const_i32(b, 0);
  out0 = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_OUTPUT);
  out1 = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, &out0);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, &out1);
  return mdt_mb_model(b);
}

const md_model *mdt_add_act_input_model(mdt_model *b, uint32_t rank, const uint32_t *dims) {
  mdt_mb_init(b);
  uint32_t in[3], out;
  in[0] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[1] = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_INPUT);
  in[2] = mdt_mb_operand(b, MD_INT32, 0, NULL, MD_SUBGRAPH_INPUT);
  out = mdt_mb_tensor_f32(b, rank, dims, MD_SUBGRAPH_OUTPUT);
  mdt_mb_op(b, MD_OP_ADD, NULL, 3, in, 1, &out);
  return mdt_mb_model(b);
}

static md_status tk_same_shape(const md_op_sig *sig, md_tensor_shape *out, md_kernel_status *st,
                               void *user) {
  (void)st;
  (void)user;
  memset(out, 0, sizeof *out);
  out[0].rank = sig->inputs[0].rank;
  if (out[0].rank) memcpy(out[0].dims, sig->inputs[0].dims, out[0].rank * sizeof(uint32_t));
  return MD_NONE;
}

static void tk_copy_run(const md_kernel_call *call, md_kernel_status *st) {
  (void)st;
  uint64_t n = call->inputs[0].bytes < call->outputs[0].bytes ? call->inputs[0].bytes
                                                              : call->outputs[0].bytes;
  memcpy(call->outputs[0].data, call->inputs[0].data, (size_t)n);
}

static void tk_noop_run(const md_kernel_call *call, md_kernel_status *st) {
  (void)call;
  (void)st;
}

static void tk_fail_run(const md_kernel_call *call, md_kernel_status *st) {
  (void)call;
  md_kernel_fail(st, MD_GENERAL_FAILURE, "%s", MDT_FAIL_MESSAGE);
}

static void tk_register(const char *name, void (*run)(const md_kernel_call *, md_kernel_status *)) {
  if (md_kernel_find(name, "host")) return;
  md_kernel_def def;
  memset(&def, 0, sizeof def);
  def.struct_size = sizeof def;
  def.name = name;
  def.platform = "host";
  def.min_inputs = 1;
  def.max_inputs = 1;
  def.n_outputs = 1;
  def.shape = tk_same_shape;
  def.run = run;
  md_status st = md_kernel_register(&def);
  cr_assert(st == MD_NONE || md_kernel_find(name, "host"), "registering %s: %s", name,
            md_kernel_registry_error());
}

void mdt_register_test_kernels(void) {
  tk_register("mdt.copy", tk_copy_run);
  tk_register("mdt.noop", tk_noop_run);
  tk_register("mdt.fail", tk_fail_run);
}

const md_model *mdt_custom_model(mdt_model *b, const char *name, md_operand_type type, float scale,
                                 int32_t zp, uint32_t rank, const uint32_t *dims) {
  mdt_mb_init(b);
  uint32_t in = mdt_mb_operand(b, type, rank, dims, MD_SUBGRAPH_INPUT);
  uint32_t out = mdt_mb_operand(b, type, rank, dims, MD_SUBGRAPH_OUTPUT);
  b->operands[in].scale = b->operands[out].scale = scale;
  b->operands[in].zero_point = b->operands[out].zero_point = zp;
  mdt_mb_op(b, MD_OP_CUSTOM, name, 1, &in, 1, &out);
  return mdt_mb_model(b);
}

void mdt_iota(float *v, uint32_t n, float base) {
  for (uint32_t i = 0; i < n; i++) v[i] = base + (float)i;
}
