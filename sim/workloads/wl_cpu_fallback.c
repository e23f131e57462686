/* wl_cpu_fallback.c - a network split between the device and the host, as an application does
 * when one layer has no device operation: here tanh, which the v1 operation set lacks.
 *
 *   device  P_A: H  = FULLY_CONNECTED(X, W1, b1, relu)     X [B,D] token -> H [B,K] token
 *   host       : G  = tanh(H)                              copy_to H, compute, copy_from G
 *   device  P_B: X' = FULLY_CONNECTED(G, W2, b2, relu1)    G [0,K] token -> X [0,D] token
 * and around again: X' is the next step's X, so X stays on the device from step to step; only
 * the fallback layer's input and output cross to the host.
 *
 * Before preparing, get_supported_operations must report both device parts as supported (the
 * partitioning decision of a real runtime). Buffers: X (roles P_A input 0 + P_B output 0, dims
 * [B,D] from the roles, first written by copy_from without dims), H (P_A output 0), G (P_B
 * input 0, desc [0,K]: its batch is unknown until copy_from, which must therefore pass dims
 * [B,K] - SPEC 3). Checked each step: H against the host; every 8 steps and at the end: X. At
 * the start, a copy_to of H before anything wrote it must be GENERAL_FAILURE (uninitialized).
 * Weights are scaled so the loop contracts (relu, tanh and relu1 are 1-Lipschitz). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl_common.h"

enum { B = 4, D = 16, K = 24 };

typedef struct fb_weights { float w1[K * D], b1[K], w2[D * K], b2[D]; } fb_weights;

static void check_supported(wl_ctx *ctx, wl_model *m, const char *what) {
  uint8_t sup[WL_MAX_OPERATIONS];
  memset(sup, 0xee, sizeof sup);
  const md_model *mm = wl_model_get(m);
  WL_OK(ctx, ctx->drv->get_supported_operations(ctx->dev, mm, sup));
  for (uint32_t k = 0; k < mm->n_operations; k++)
    if (sup[k] != 1)
      wl_fail(ctx, "get_supported_operations(%s): operation %u (type %d) reported %u; "
              "TENSOR_FLOAT32 kernels are required (SPEC 7)", what, k, (int)mm->operations[k].type, sup[k]);
}

int main(int argc, char **argv) {
  wl_ctx ctx;
  wl_init(&ctx, "cpu_fallback", argc, argv, 64);
  wl_open(&ctx);
  const md_driver *drv = ctx.drv;
  md_device *dev = ctx.dev;
  wl_rng rng;
  wl_rng_init(&rng, ctx.seed, 0xcf);

  fb_weights w;
  wl_rng_fill(&rng, w.w1, K * D, -0.9f / D, 0.9f / D);
  wl_rng_fill(&rng, w.b1, K, -0.05f, 0.1f);
  wl_rng_fill(&rng, w.w2, D * K, -0.9f / K, 0.9f / K);
  wl_rng_fill(&rng, w.b2, D, -0.1f, 0.1f);
  int wfd = wl_memfd(&ctx, "wl-cf-weights", &w, sizeof w);

  static const uint32_t d_x[] = {B, D}, d_h[] = {B, K}, d_g[] = {0, K}, d_xo[] = {0, D},
                        d_w1[] = {K, D}, d_b1[] = {K}, d_w2[] = {D, K}, d_b2[] = {D};
  wl_model ma, mb;
  wl_model_init(&ma, &ctx);
  {
    uint32_t xin = wl_input(&ma, 2, d_x);
    uint32_t pool = wl_pool(&ma, wl_ashmem(wfd, sizeof w));
    uint32_t w1 = wl_const_ref(&ma, pool, offsetof(fb_weights, w1), 2, d_w1);
    uint32_t b1 = wl_const_ref(&ma, pool, offsetof(fb_weights, b1), 1, d_b1);
    uint32_t act = wl_const_i32(&ma, WL_ACT_RELU);
    uint32_t h = wl_output(&ma, 2, d_h);
    wl_op(&ma, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){xin, w1, b1, act}, h);
  }
  wl_model_init(&mb, &ctx);
  {
    uint32_t g = wl_input(&mb, 2, d_g);
    uint32_t pool = wl_pool(&mb, wl_ashmem(wfd, sizeof w));
    uint32_t w2 = wl_const_ref(&mb, pool, offsetof(fb_weights, w2), 2, d_w2);
    uint32_t b2 = wl_const_ref(&mb, pool, offsetof(fb_weights, b2), 1, d_b2);
    uint32_t act = wl_const_i32(&mb, WL_ACT_RELU1);
    uint32_t xo = wl_output(&mb, 2, d_xo);
    wl_op(&mb, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){g, w2, b2, act}, xo);
  }
  check_supported(&ctx, &ma, "P_A");
  check_supported(&ctx, &mb, "P_B");

  md_handle client, prep[2];
  WL_OK(&ctx, drv->open_client(dev, &client));
  WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&ma), &prep[0]));
  WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&mb), &prep[1]));

  md_buffer_desc any = {0}, g_desc = {.rank = 2, .dims = d_g};
  md_buffer_role a_in0 = {0, 0, 1.0f}, a_out0 = {0, 0, 1.0f}, b_in0 = {1, 0, 1.0f}, b_out0 = {1, 0, 1.0f};
  md_token tx, th, tg;
  WL_OK(&ctx, drv->allocate(dev, client, &any, prep, 2, &a_in0, 1, &b_out0, 1, &tx));
  WL_OK(&ctx, drv->allocate(dev, client, &any, prep, 1, NULL, 0, &a_out0, 1, &th));
  WL_OK(&ctx, drv->allocate(dev, client, &g_desc, prep, 2, &b_in0, 1, NULL, 0, &tg));

  wl_staging stg;
  wl_staging_open(&ctx, &stg, sizeof(float) * B * K);
  {
    md_memory dst = wl_staging_mem(&stg, sizeof(float) * B * K);
    WL_EXPECT(&ctx, drv->copy_to(dev, client, th, &dst), MD_GENERAL_FAILURE,
              "SPEC 3: copy_to of a buffer nothing has written yet (uninitialized)");
    ctx.rejections++;
  }

  float host_x[B * D], host_h[B * K], host_g[B * K], dev_x[B * D], dev_h[B * K], g[B * K];
  wl_rng_fill(&rng, host_x, B * D, -1.0f, 1.0f);
  wl_copy_from(&ctx, &stg, client, tx, host_x, B * D, 0, NULL); /* dims known: none needed */

  uint64_t digest = WL_DIGEST_INIT;
  for (uint32_t s = 0; s < ctx.steps; s++) {
    char what[96];
    wl_request r;
    md_output_shape shape;
    md_timing timing;

    /* Device: H = relu(fc(X)). */
    wl_req_init(&r, &ctx);
    wl_req_in_token(&r, tx);
    wl_req_out_token(&r, th);
    WL_OK(&ctx, drv->execute(dev, client, prep[0], wl_req_get(&r), &shape, 1, &timing));
    ctx.executions++;
    snprintf(what, sizeof what, "step %u: P_A output shape", s);
    wl_expect_shape(&ctx, what, &shape, 2, d_h);

    /* Host: G = tanh(H), from the device's H as the application would. */
    wl_copy_to(&ctx, &stg, client, th, dev_h, B * K);
    wl_host_fc(host_x, w.w1, w.b1, B, D, K, WL_ACT_RELU, host_h);
    snprintf(what, sizeof what, "step %u: H read back with copy_to", s);
    wl_expect_close(&ctx, what, dev_h, host_h, B * K, 1e-4f);
    digest = wl_digest(digest, dev_h, sizeof dev_h);
    for (int k = 0; k < B * K; k++) {
      g[k] = tanhf(dev_h[k]);
      host_g[k] = tanhf(host_h[k]);
    }
    wl_copy_from(&ctx, &stg, client, tg, g, B * K, 2, d_h); /* G's batch is unknown: dims needed */

    /* Device again: X = relu1(fc(G)), written over X in place of the old state. */
    wl_req_init(&r, &ctx);
    wl_req_in_token(&r, tg);
    wl_req_out_token(&r, tx);
    WL_OK(&ctx, drv->execute(dev, client, prep[1], wl_req_get(&r), &shape, 1, &timing));
    ctx.executions++;
    snprintf(what, sizeof what, "step %u: P_B output shape", s);
    wl_expect_shape(&ctx, what, &shape, 2, d_x);
    wl_host_fc(host_g, w.w2, w.b2, B, K, D, WL_ACT_RELU1, host_x);

    if (s % 8 == 7 || s + 1 == ctx.steps) {
      wl_copy_to(&ctx, &stg, client, tx, dev_x, B * D);
      snprintf(what, sizeof what, "step %u: X read back with copy_to", s);
      wl_expect_close(&ctx, what, dev_x, host_x, B * D, 1e-4f);
      digest = wl_digest(digest, dev_x, sizeof dev_x);
    }
  }

  WL_OK(&ctx, drv->free_buffer(dev, client, tx));
  WL_OK(&ctx, drv->free_buffer(dev, client, th));
  WL_OK(&ctx, drv->free_buffer(dev, client, tg));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[0]));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[1]));
  wl_close_client_clean(&ctx, client);
  wl_close(&ctx);
  wl_staging_close(&stg);
  close(wfd);
  wl_pass(&ctx, digest, "%u round trips device -> host tanh -> device", ctx.steps);
  return 0;
}
