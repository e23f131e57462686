/* wl_constants.c - a model whose weights come as CONSTANT_REFERENCE pools of every mappable
 * kind and whose small parameters come as CONSTANT_COPY values (SPEC 2).
 *
 *   h    = FULLY_CONNECTED(x, W1, b1, act_v)     W1: pool 0, ASHMEM memfd (whole file)
 *                                                b1: pool 2, HARDWARE_BUFFER_BLOB
 *   z    = FULLY_CONNECTED(h, W2, b2, none)      W2: pool 1, MMAP_FD at file offset 4100 (not
 *                                                    page aligned), operand offset 16 inside it
 *                                                b2: CONSTANT_COPY tensor [O]
 *   z2   = MUL(z, scale, none)                   scale: CONSTANT_COPY tensor [O] (broadcast)
 *   y    = SOFTMAX(z2, beta_v)                   beta: CONSTANT_COPY FLOAT32   -> output 0
 *   flat = RESHAPE(z2, {-1})                     shape: CONSTANT_COPY TENSOR_INT32 -> output 1
 * Two prepared models (v = 0: relu, beta 1; v = 1: relu1, beta 0.5) share the same three pools.
 * The bytes around every constant (the file before the MMAP_FD offset, the pool before the
 * operand offset, the file after it) are NaN, so a driver that misplaces an offset cannot pass.
 *
 * After each prepare_model the whole model description - operands, operations, operand_values -
 * is overwritten with garbage, as an application frees it after compiling: CONSTANT_COPY
 * values are copied at prepare (SPEC 2), so results must not change.
 *
 * Each step (default 32) alternates the model and the input path: x by token (copy_from, no
 * dims: the buffer's dims are fully known) or by an MMAP_FD request pool at a non-zero offset;
 * y comes back through an ASHMEM pool, flat through an MMAP_FD pool at an offset, both checked
 * against the host. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl_common.h"

enum { B = 3, IN = 10, H = 12, O = 5 };
enum { W2_FILE_OFF = 4100, W2_OPERAND_OFF = 16, X_OFF = 4132, FLAT_OFF = 200, FLAT_ARG_OFF = 8 };

typedef struct params {
  float w1[H * IN], b1[H], w2[O * H], b2[O], scale[O];
} params;

static const int32_t act_of[2] = {WL_ACT_RELU, WL_ACT_RELU1};
static const float beta_of[2] = {1.0f, 0.5f};

static void host_model(const params *p, int v, const float *x, float *y, float *flat) {
  float h[B * H], z[B * O];
  wl_host_fc(x, p->w1, p->b1, B, IN, H, act_of[v], h);
  wl_host_fc(h, p->w2, p->b2, B, H, O, WL_ACT_NONE, z);
  for (int b = 0; b < B; b++)
    for (int o = 0; o < O; o++) flat[b * O + o] = z[b * O + o] * p->scale[o];
  wl_host_softmax(flat, B, O, beta_of[v], y);
}

/* A memfd of `size` bytes of NaN (0xff bytes) with `n` bytes of data at `off`. */
static int nan_memfd(const wl_ctx *ctx, const char *name, size_t size, uint64_t off, const void *data, size_t n) {
  uint8_t junk[8192];
  if (size > sizeof junk) wl_fail(ctx, "nan_memfd: %zu bytes", size);
  memset(junk, 0xff, size);
  int fd = wl_memfd(ctx, name, junk, size);
  if (data) wl_fd_write(ctx, fd, off, data, n);
  return fd;
}

int main(int argc, char **argv) {
  wl_ctx ctx;
  wl_init(&ctx, "constants", argc, argv, 32);
  wl_open(&ctx);
  const md_driver *drv = ctx.drv;
  md_device *dev = ctx.dev;
  wl_rng rng;
  wl_rng_init(&rng, ctx.seed, 0xc0);

  params p;
  wl_rng_fill(&rng, p.w1, H * IN, -0.4f, 0.4f);
  wl_rng_fill(&rng, p.b1, H, -0.2f, 0.2f);
  wl_rng_fill(&rng, p.w2, O * H, -0.5f, 0.5f);
  wl_rng_fill(&rng, p.b2, O, -0.3f, 0.3f);
  wl_rng_fill(&rng, p.scale, O, 0.5f, 2.0f);

  /* Pool 0: ASHMEM, exactly W1. Pool 1: MMAP_FD window of a larger NaN file. Pool 2: BLOB b1. */
  int fd_w1 = wl_memfd(&ctx, "wl-const-w1", p.w1, sizeof p.w1);
  const uint64_t w2_pool_size = W2_OPERAND_OFF + sizeof p.w2 + 20;
  int fd_w2 = nan_memfd(&ctx, "wl-const-w2", W2_FILE_OFF + w2_pool_size + 64,
                        W2_FILE_OFF + W2_OPERAND_OFF, p.w2, sizeof p.w2);
  int fd_b1 = wl_memfd(&ctx, "wl-const-b1", p.b1, sizeof p.b1);

  static const uint32_t d_x[] = {B, IN}, d_h[] = {B, H}, d_z[] = {B, O}, d_w1[] = {H, IN},
                        d_b1[] = {H}, d_w2[] = {O, H}, d_o[] = {O}, d_flat[] = {B * O}, d_1[] = {1};
  static const int32_t minus_one[] = {-1};
  md_handle client, prep[2];
  WL_OK(&ctx, drv->open_client(dev, &client));
  for (int v = 0; v < 2; v++) {
    wl_model m;
    wl_model_init(&m, &ctx);
    uint32_t x = wl_input(&m, 2, d_x);
    uint32_t p0 = wl_pool(&m, wl_ashmem(fd_w1, sizeof p.w1));
    uint32_t p1 = wl_pool(&m, wl_mmap_fd(fd_w2, W2_FILE_OFF, w2_pool_size));
    uint32_t p2 = wl_pool(&m, wl_blob(fd_b1, (uint32_t)sizeof p.b1));
    uint32_t w1 = wl_const_ref(&m, p0, 0, 2, d_w1);
    uint32_t b1 = wl_const_ref(&m, p2, 0, 1, d_b1);
    uint32_t act = wl_const_i32(&m, act_of[v]);
    uint32_t h = wl_temp(&m, 2, d_h);
    wl_op(&m, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){x, w1, b1, act}, h);
    uint32_t w2 = wl_const_ref(&m, p1, W2_OPERAND_OFF, 2, d_w2);
    uint32_t b2 = wl_const_tensor(&m, 1, d_o, p.b2);
    uint32_t none = wl_const_i32(&m, WL_ACT_NONE);
    uint32_t z = wl_temp(&m, 2, d_z);
    wl_op(&m, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){h, w2, b2, none}, z);
    uint32_t scale = wl_const_tensor(&m, 1, d_o, p.scale);
    uint32_t z2 = wl_temp(&m, 2, d_z);
    wl_op(&m, MD_OP_MUL, 3, (const uint32_t[]){z, scale, none}, z2);
    uint32_t beta = wl_const_f32(&m, beta_of[v]);
    uint32_t y = wl_output(&m, 2, d_z);
    wl_op(&m, MD_OP_SOFTMAX, 2, (const uint32_t[]){z2, beta}, y);
    uint32_t shape = wl_const_i32_tensor(&m, 1, d_1, minus_one);
    uint32_t flat = wl_output(&m, 1, d_flat);
    wl_op(&m, MD_OP_RESHAPE, 2, (const uint32_t[]){z2, shape}, flat);
    WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&m), &prep[v]));
    memset(&m, 0xa5, sizeof m); /* the application frees its model description */
  }

  md_buffer_role in_roles[2] = {{0, 0, 0.5f}, {1, 0, 0.5f}};
  md_buffer_desc desc = {0};
  md_token xt;
  WL_OK(&ctx, drv->allocate(dev, client, &desc, prep, 2, in_roles, 2, NULL, 0, &xt));

  wl_staging stg;
  wl_staging_open(&ctx, &stg, sizeof(float) * B * IN);
  const size_t xb = sizeof(float) * B * IN, yb = sizeof(float) * B * O;
  int fd_x = nan_memfd(&ctx, "wl-const-x", X_OFF + xb, 0, NULL, 0);
  int fd_y = wl_memfd(&ctx, "wl-const-y", NULL, yb);
  int fd_flat = nan_memfd(&ctx, "wl-const-flat", FLAT_OFF + FLAT_ARG_OFF + yb + 4, 0, NULL, 0);
  uint64_t digest = WL_DIGEST_INIT;
  uint32_t by_token = 0;
  for (uint32_t s = 0; s < ctx.steps; s++) {
    int v = (int)(s % 2), use_token = (int)((s / 2) % 2);
    float xv[B * IN], yv[B * O], fv[B * O], host_y[B * O], host_f[B * O];
    wl_rng_fill(&rng, xv, B * IN, -1.0f, 1.0f);
    host_model(&p, v, xv, host_y, host_f);

    wl_request r;
    wl_req_init(&r, &ctx);
    if (use_token) {
      wl_copy_from(&ctx, &stg, client, xt, xv, B * IN, 0, NULL);
      wl_req_in_token(&r, xt);
      by_token++;
    } else {
      wl_fd_write(&ctx, fd_x, X_OFF, xv, xb);
      wl_req_in(&r, wl_req_memory(&r, wl_mmap_fd(fd_x, X_OFF, xb)), 0, xb, 0, NULL);
    }
    wl_req_out(&r, wl_req_memory(&r, wl_ashmem(fd_y, yb)), 0, yb, 0, NULL);
    wl_req_out(&r, wl_req_memory(&r, wl_mmap_fd(fd_flat, FLAT_OFF, FLAT_ARG_OFF + yb)), FLAT_ARG_OFF,
               yb, 0, NULL);
    md_output_shape shapes[2];
    md_timing timing;
    WL_OK(&ctx, drv->execute(dev, client, prep[v], wl_req_get(&r), shapes, 2, &timing));
    ctx.executions++;

    char what[96];
    snprintf(what, sizeof what, "step %u (model %d, x by %s): y shape", s, v, use_token ? "token" : "pool");
    wl_expect_shape(&ctx, what, &shapes[0], 2, d_z);
    snprintf(what, sizeof what, "step %u (model %d, x by %s): flat shape", s, v, use_token ? "token" : "pool");
    wl_expect_shape(&ctx, what, &shapes[1], 1, d_flat);
    wl_fd_read(&ctx, fd_y, 0, yv, yb);
    wl_fd_read(&ctx, fd_flat, FLAT_OFF + FLAT_ARG_OFF, fv, yb);
    snprintf(what, sizeof what, "step %u (model %d, x by %s): y", s, v, use_token ? "token" : "pool");
    wl_expect_close(&ctx, what, yv, host_y, B * O, 1e-5f);
    snprintf(what, sizeof what, "step %u (model %d, x by %s): flat", s, v, use_token ? "token" : "pool");
    wl_expect_close(&ctx, what, fv, host_f, B * O, 1e-5f);
    digest = wl_digest(digest, yv, yb);
    digest = wl_digest(digest, fv, yb);
  }
  /* The bytes around the flat output's argument must be untouched (still NaN). */
  {
    uint8_t before[FLAT_ARG_OFF], after[4];
    wl_fd_read(&ctx, fd_flat, FLAT_OFF, before, sizeof before);
    wl_fd_read(&ctx, fd_flat, FLAT_OFF + FLAT_ARG_OFF + yb, after, sizeof after);
    for (size_t k = 0; k < sizeof before; k++)
      if (before[k] != 0xff) wl_fail(&ctx, "execute wrote byte %zu of the flat pool, before the argument's offset", k);
    for (size_t k = 0; k < sizeof after; k++)
      if (after[k] != 0xff) wl_fail(&ctx, "execute wrote past the flat argument's length (byte %zu after it)", k);
  }

  WL_OK(&ctx, drv->free_buffer(dev, client, xt));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[0]));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[1]));
  wl_close_client_clean(&ctx, client);
  wl_close(&ctx);
  wl_staging_close(&stg);
  close(fd_w1);
  close(fd_w2);
  close(fd_b1);
  close(fd_x);
  close(fd_y);
  close(fd_flat);
  wl_pass(&ctx, digest, "2 models on 3 constant pools, %u steps with x by token", by_token);
  return 0;
}
