/* wl_dynamic_batch.c - one driver-managed buffer of unknown batch size, written by every
 * execution with a different batch (SPEC 3 "Dynamic shape": the driver resizes it), read back
 * with copy_to each time, and consumed in place by a second model.
 *
 *   P1: T = FULLY_CONNECTED(x, W, b, relu)    x [0,IN] memory pool, T [0,U] token (output 0)
 *   P2: p = SOFTMAX(T, beta)                  T token (input 0), p [0,U] memory pool
 * T is allocated with desc [0,U] and the roles (P1 output 0, P2 input 0): its batch is known
 * only after the execution that writes it. W, b are CONSTANT_REFERENCE (memfd), beta and the
 * activation CONSTANT_COPY.
 *
 * Each step (default 48) draws a batch n in 1..32, different from the last one, runs P1 (the
 * output shape must say [n,U]), reads T back with copy_to of exactly n*U floats and checks it,
 * checks that a copy_to of the previous batch's size is refused (the buffer's current dims are
 * [n,U] now: INVALID_ARGUMENT, SPEC 3), then runs P2 on T and checks p. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl_common.h"

enum { IN = 12, U = 6, MAXB = 32 };

int main(int argc, char **argv) {
  wl_ctx ctx;
  wl_init(&ctx, "dynamic_batch", argc, argv, 48);
  wl_open(&ctx);
  const md_driver *drv = ctx.drv;
  md_device *dev = ctx.dev;
  wl_rng rng;
  wl_rng_init(&rng, ctx.seed, 0xdb);

  struct { float w[U * IN], b[U]; } wb;
  wl_rng_fill(&rng, wb.w, U * IN, -0.5f, 0.5f);
  wl_rng_fill(&rng, wb.b, U, -0.2f, 0.2f);
  int wfd = wl_memfd(&ctx, "wl-db-weights", &wb, sizeof wb);
  const float beta = 1.5f;

  static const uint32_t d_x[] = {0, IN}, d_t[] = {0, U}, d_w[] = {U, IN}, d_b[] = {U};
  wl_model m1, m2;
  wl_model_init(&m1, &ctx);
  uint32_t x = wl_input(&m1, 2, d_x);
  uint32_t pool = wl_pool(&m1, wl_ashmem(wfd, sizeof wb));
  uint32_t w = wl_const_ref(&m1, pool, 0, 2, d_w);
  uint32_t b = wl_const_ref(&m1, pool, sizeof wb.w, 1, d_b);
  uint32_t relu = wl_const_i32(&m1, WL_ACT_RELU);
  uint32_t t = wl_output(&m1, 2, d_t);
  wl_op(&m1, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){x, w, b, relu}, t);

  wl_model_init(&m2, &ctx);
  uint32_t t_in = wl_input(&m2, 2, d_t);
  uint32_t be = wl_const_f32(&m2, beta);
  uint32_t p = wl_output(&m2, 2, d_t);
  wl_op(&m2, MD_OP_SOFTMAX, 2, (const uint32_t[]){t_in, be}, p);

  md_handle client, prep[2];
  WL_OK(&ctx, drv->open_client(dev, &client));
  WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&m1), &prep[0]));
  WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&m2), &prep[1]));

  md_buffer_role out_role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_buffer_role in_role = {.model_index = 1, .io_index = 0, .probability = 1.0f};
  md_buffer_desc desc = {.rank = 2, .dims = d_t};
  md_token tok;
  WL_OK(&ctx, drv->allocate(dev, client, &desc, prep, 2, &in_role, 1, &out_role, 1, &tok));

  wl_staging stg;
  wl_staging_open(&ctx, &stg, sizeof(float) * MAXB * U);
  int xfd = wl_memfd(&ctx, "wl-db-x", NULL, sizeof(float) * MAXB * IN);
  int pfd = wl_memfd(&ctx, "wl-db-p", NULL, sizeof(float) * MAXB * U);
  uint64_t digest = WL_DIGEST_INIT;
  uint32_t prev = 0, seen[MAXB + 1] = {0}, distinct = 0;
  for (uint32_t s = 0; s < ctx.steps; s++) {
    uint32_t n = 1 + wl_rng_below(&rng, MAXB);
    if (n == prev) n = n % MAXB + 1;
    distinct += !seen[n]++;
    float xv[MAXB * IN], tv[MAXB * U], pv[MAXB * U], host_t[MAXB * U], host_p[MAXB * U];
    wl_rng_fill(&rng, xv, (size_t)n * IN, -1.0f, 1.0f);
    wl_fd_write(&ctx, xfd, 0, xv, sizeof(float) * n * IN);
    wl_host_fc(xv, wb.w, wb.b, n, IN, U, WL_ACT_RELU, host_t);
    wl_host_softmax(host_t, n, U, beta, host_p);
    const uint32_t dx[] = {n, IN}, dt[] = {n, U};
    char what[96];

    /* P1: x (batch n, given by the request's dims) -> T. */
    wl_request r;
    wl_req_init(&r, &ctx);
    wl_req_in(&r, wl_req_memory(&r, wl_ashmem(xfd, sizeof(float) * MAXB * IN)), 0,
              sizeof(float) * n * IN, 2, dx);
    wl_req_out_token(&r, tok);
    md_output_shape shape;
    md_timing timing;
    WL_OK(&ctx, drv->execute(dev, client, prep[0], wl_req_get(&r), &shape, 1, &timing));
    ctx.executions++;
    snprintf(what, sizeof what, "step %u (batch %u): P1 output shape", s, n);
    wl_expect_shape(&ctx, what, &shape, 2, dt);

    wl_copy_to(&ctx, &stg, client, tok, tv, (size_t)n * U);
    snprintf(what, sizeof what, "step %u (batch %u): T read back with copy_to", s, n);
    wl_expect_close(&ctx, what, tv, host_t, (size_t)n * U, 1e-5f);
    digest = wl_digest(digest, tv, sizeof(float) * n * U);

    if (prev) {
      md_memory old = wl_staging_mem(&stg, sizeof(float) * prev * U);
      WL_EXPECT(&ctx, drv->copy_to(dev, client, tok, &old), MD_INVALID_ARGUMENT,
                "SPEC 3: copy_to with the previous batch's size after the buffer was resized");
      ctx.rejections++;
    }

    /* P2: T read in place (its current dims [n,U]) -> p. */
    wl_req_init(&r, &ctx);
    wl_req_in_token(&r, tok);
    wl_req_out(&r, wl_req_memory(&r, wl_ashmem(pfd, sizeof(float) * MAXB * U)), 0,
               sizeof(float) * n * U, 2, dt);
    WL_OK(&ctx, drv->execute(dev, client, prep[1], wl_req_get(&r), &shape, 1, &timing));
    ctx.executions++;
    snprintf(what, sizeof what, "step %u (batch %u): P2 output shape", s, n);
    wl_expect_shape(&ctx, what, &shape, 2, dt);
    wl_fd_read(&ctx, pfd, 0, pv, sizeof(float) * n * U);
    snprintf(what, sizeof what, "step %u (batch %u): softmax of T", s, n);
    wl_expect_close(&ctx, what, pv, host_p, (size_t)n * U, 1e-5f);
    digest = wl_digest(digest, pv, sizeof(float) * n * U);
    prev = n;
  }

  WL_OK(&ctx, drv->free_buffer(dev, client, tok));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[0]));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prep[1]));
  wl_close_client_clean(&ctx, client);
  wl_close(&ctx);
  wl_staging_close(&stg);
  close(wfd);
  close(xfd);
  close(pfd);
  wl_pass(&ctx, digest, "%u batch sizes in 1..%d through one buffer", distinct, MAXB);
  return 0;
}
