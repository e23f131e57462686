/* wl_sequence.c - a recurrent sequence model whose state tensor stays in driver-managed memory
 * for the whole sequence (default 128 steps); only the per-step input and output cross to the
 * host.
 *
 * Step model (one prepared model, run once per step):
 *   h1        = FULLY_CONNECTED(x_t, Wx, bx, none)          x_t   [B,I]  memory pool (ASHMEM)
 *   h2        = FULLY_CONNECTED(state_t, Wh, bh, none)      state [B,H]  token
 *   state_t+1 = ADD(h1, h2, relu1)                                       token (model output 0)
 *   y_t       = FULLY_CONNECTED(state_t+1, Wy, by, none)    y     [B,O]  memory pool (output 1)
 * Wx, bx, Wh, bh, Wy, by are CONSTANT_REFERENCE in one memfd pool; the activation codes are
 * CONSTANT_COPY. |Wh| row sums stay under 0.9 and relu1 clamps, so the recurrence contracts and
 * float rounding differences between driver and host cannot grow over the steps.
 *
 * Why two state buffers (ping-pong): SPEC 4 forbids a token that a request writes from appearing
 * again in that request, so state_t and state_t+1 cannot be one buffer. The realistic answer is
 * what recurrent runtimes do with device memory: two buffers A and B, both allocated with the
 * roles {input 1, output 0} of the step model; step t reads A and writes B, step t+1 reads B and
 * writes A. The state never leaves the device. (Copying instead - copy_to + copy_from through
 * the host each step - would defeat the point of a memory domain.)
 *
 * Every step checks y_t against the host; every 16 steps and at the end the state itself is
 * read back with copy_to and checked. Every 4th step runs through execute_async + wait_event. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl_common.h"

enum { B = 2, I = 8, H = 16, O = 4 };

typedef struct weights {
  float wx[H * I], bx[H], wh[H * H], bh[H], wy[O * H], by[O];
} weights;

/* One host step: state <- relu1(fc(x) + fc(state)); y <- fc(state). */
static void host_step(const weights *w, const float *x, float *state, float *y) {
  float h1[B * H], h2[B * H];
  wl_host_fc(x, w->wx, w->bx, B, I, H, WL_ACT_NONE, h1);
  wl_host_fc(state, w->wh, w->bh, B, H, H, WL_ACT_NONE, h2);
  for (int k = 0; k < B * H; k++) state[k] = wl_act(WL_ACT_RELU1, h1[k] + h2[k]);
  wl_host_fc(state, w->wy, w->by, B, H, O, WL_ACT_NONE, y);
}

int main(int argc, char **argv) {
  wl_ctx ctx;
  wl_init(&ctx, "sequence", argc, argv, 128);
  wl_open(&ctx);
  const md_driver *drv = ctx.drv;
  md_device *dev = ctx.dev;
  wl_rng rng;
  wl_rng_init(&rng, ctx.seed, 0x5e0);

  weights w;
  wl_rng_fill(&rng, w.wx, H * I, -1.0f / I, 1.0f / I);
  wl_rng_fill(&rng, w.bx, H, -0.1f, 0.1f);
  wl_rng_fill(&rng, w.wh, H * H, -0.9f / H, 0.9f / H);
  wl_rng_fill(&rng, w.bh, H, -0.1f, 0.1f);
  wl_rng_fill(&rng, w.wy, O * H, -1.0f, 1.0f);
  wl_rng_fill(&rng, w.by, O, -0.5f, 0.5f);
  int wfd = wl_memfd(&ctx, "wl-seq-weights", &w, sizeof w);

  static const uint32_t d_x[] = {B, I}, d_s[] = {B, H}, d_y[] = {B, O}, d_wx[] = {H, I},
                        d_wh[] = {H, H}, d_wy[] = {O, H}, d_h[] = {H}, d_o[] = {O};
  wl_model mb;
  wl_model_init(&mb, &ctx);
  uint32_t x = wl_input(&mb, 2, d_x);
  uint32_t s_in = wl_input(&mb, 2, d_s);
  uint32_t pool = wl_pool(&mb, wl_ashmem(wfd, sizeof w));
  uint32_t wx = wl_const_ref(&mb, pool, offsetof(weights, wx), 2, d_wx);
  uint32_t bx = wl_const_ref(&mb, pool, offsetof(weights, bx), 1, d_h);
  uint32_t wh = wl_const_ref(&mb, pool, offsetof(weights, wh), 2, d_wh);
  uint32_t bh = wl_const_ref(&mb, pool, offsetof(weights, bh), 1, d_h);
  uint32_t wy = wl_const_ref(&mb, pool, offsetof(weights, wy), 2, d_wy);
  uint32_t by = wl_const_ref(&mb, pool, offsetof(weights, by), 1, d_o);
  uint32_t none = wl_const_i32(&mb, WL_ACT_NONE), relu1 = wl_const_i32(&mb, WL_ACT_RELU1);
  uint32_t h1 = wl_temp(&mb, 2, d_s), h2 = wl_temp(&mb, 2, d_s);
  uint32_t s_out = wl_output(&mb, 2, d_s);
  uint32_t y = wl_output(&mb, 2, d_y);
  wl_op(&mb, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){x, wx, bx, none}, h1);
  wl_op(&mb, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){s_in, wh, bh, none}, h2);
  wl_op(&mb, MD_OP_ADD, 3, (const uint32_t[]){h1, h2, relu1}, s_out);
  wl_op(&mb, MD_OP_FULLY_CONNECTED, 4, (const uint32_t[]){s_out, wy, by, none}, y);

  md_handle client, prepared;
  WL_OK(&ctx, drv->open_client(dev, &client));
  WL_OK(&ctx, drv->prepare_model(dev, client, wl_model_get(&mb), &prepared));

  /* The two state buffers: each usable as the step's state input (input 1) and new state
   * (output 0). The desc leaves the dims to the roles ([B,H]). */
  md_buffer_role in_role = {.model_index = 0, .io_index = 1, .probability = 1.0f};
  md_buffer_role out_role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_buffer_desc desc = {0};
  md_token state[2];
  for (int k = 0; k < 2; k++)
    WL_OK(&ctx, drv->allocate(dev, client, &desc, &prepared, 1, &in_role, 1, &out_role, 1, &state[k]));

  wl_staging stg;
  wl_staging_open(&ctx, &stg, sizeof(float) * B * H);
  float host_state[B * H], dev_state[B * H];
  wl_rng_fill(&rng, host_state, B * H, -0.5f, 0.5f);
  wl_copy_from(&ctx, &stg, client, state[0], host_state, B * H, 0, NULL);

  /* Per-step I/O pools, reused every step (one memfd each, exactly the tensor's size). */
  int xfd = wl_memfd(&ctx, "wl-seq-x", NULL, sizeof(float) * B * I);
  int yfd = wl_memfd(&ctx, "wl-seq-y", NULL, sizeof(float) * B * O);

  /* The naive in-place step (one state buffer as input and output) is what SPEC 4 forbids:
   * INVALID_ARGUMENT. A failed request may leave its device outputs uninitialized (SPEC 4), so
   * the state is uploaded again afterwards, as an application recovering from it would. */
  {
    wl_request r;
    wl_req_init(&r, &ctx);
    wl_req_in(&r, wl_req_memory(&r, wl_ashmem(xfd, sizeof(float) * B * I)), 0, sizeof(float) * B * I, 0, NULL);
    wl_req_in_token(&r, state[0]);
    wl_req_out_token(&r, state[0]);
    wl_req_out(&r, wl_req_memory(&r, wl_ashmem(yfd, sizeof(float) * B * O)), 0, sizeof(float) * B * O, 0, NULL);
    md_output_shape shapes[2];
    md_timing timing;
    WL_EXPECT(&ctx, drv->execute(dev, client, prepared, wl_req_get(&r), shapes, 2, &timing),
              MD_INVALID_ARGUMENT, "SPEC 4: a token written by the request may not also be its input");
    ctx.rejections++;
    wl_copy_from(&ctx, &stg, client, state[0], host_state, B * H, 0, NULL);
  }
  uint64_t digest = WL_DIGEST_INIT;
  uint32_t async_steps = 0;
  int cur = 0; /* state[cur] holds state_t */
  for (uint32_t t = 0; t < ctx.steps; t++) {
    float xv[B * I], yv[B * O], host_y[B * O];
    wl_rng_fill(&rng, xv, B * I, -1.0f, 1.0f);
    wl_fd_write(&ctx, xfd, 0, xv, sizeof xv);

    wl_request r;
    wl_req_init(&r, &ctx);
    wl_req_in(&r, wl_req_memory(&r, wl_ashmem(xfd, sizeof xv)), 0, sizeof xv, 0, NULL);
    wl_req_in_token(&r, state[cur]);
    wl_req_out_token(&r, state[1 - cur]);
    wl_req_out(&r, wl_req_memory(&r, wl_ashmem(yfd, sizeof yv)), 0, sizeof yv, 0, NULL);
    md_output_shape shapes[2];
    md_timing timing;
    if (t % 4 == 3) {
      md_handle ev;
      WL_OK(&ctx, drv->execute_async(dev, client, prepared, wl_req_get(&r), &ev));
      WL_OK(&ctx, drv->wait_event(dev, client, ev, UINT64_MAX, shapes, 2, &timing));
      async_steps++;
    } else {
      WL_OK(&ctx, drv->execute(dev, client, prepared, wl_req_get(&r), shapes, 2, &timing));
    }
    ctx.executions++;
    cur = 1 - cur;

    char what[64];
    snprintf(what, sizeof what, "step %u: new state shape", t);
    wl_expect_shape(&ctx, what, &shapes[0], 2, d_s);
    snprintf(what, sizeof what, "step %u: y shape", t);
    wl_expect_shape(&ctx, what, &shapes[1], 2, d_y);

    host_step(&w, xv, host_state, host_y);
    wl_fd_read(&ctx, yfd, 0, yv, sizeof yv);
    snprintf(what, sizeof what, "step %u: y", t);
    wl_expect_close(&ctx, what, yv, host_y, B * O, 1e-4f);
    digest = wl_digest(digest, yv, sizeof yv);

    if (t % 16 == 15 || t + 1 == ctx.steps) {
      wl_copy_to(&ctx, &stg, client, state[cur], dev_state, B * H);
      snprintf(what, sizeof what, "step %u: state read back with copy_to", t);
      wl_expect_close(&ctx, what, dev_state, host_state, B * H, 1e-4f);
      digest = wl_digest(digest, dev_state, sizeof dev_state);
    }
  }

  WL_OK(&ctx, drv->free_buffer(dev, client, state[0]));
  WL_OK(&ctx, drv->free_buffer(dev, client, state[1]));
  WL_OK(&ctx, drv->release_prepared_model(dev, client, prepared));
  wl_close_client_clean(&ctx, client);
  wl_close(&ctx);
  wl_staging_close(&stg);
  close(wfd);
  close(xfd);
  close(yfd);
  wl_pass(&ctx, digest, "%u steps, %u of them async, state resident in 2 ping-pong buffers",
          ctx.steps, async_steps);
  return 0;
}
