/* wl_multi_client.c - several clients on their own threads sharing one device, each with its own
 * prepared model and buffers, and each now and then trying the others' handles, which must fail
 * with INVALID_ARGUMENT and leave the owner's data intact (SPEC 5, 6).
 *
 * Client c (4 of them) runs acc <- acc * decay_c + x on a vector of n_c = 8 + 4c floats:
 *   m   = MUL(acc, decay, none)     acc [n] token (ping-pong pair, as in wl_sequence.c)
 *   out = ADD(m, x, none)           decay: CONSTANT_COPY tensor [1] (broadcast)
 *                                   x [n]: a memory pool (even rounds) or a token (odd rounds)
 * and reads acc back with copy_to every round, checking it against its own host copy.
 *
 * Phases, separated by a pthread barrier (no sleeps anywhere):
 *   1. setup, one client at a time in client order (open_client, prepare, allocate,
 *      copy_from): handle values then depend only on the seed, never on the scheduler, so a
 *      recorded trace of this program replays with the same values;
 *   2. `--steps` rounds, all clients at once, a barrier at the start of every round so the
 *      clients' calls overlap. In a third of the rounds a client also picks (from its own PRNG
 *      stream) another client and one of: copy_to / copy_from / free_buffer of its token, an
 *      execution naming its token, allocate with or execute/release its prepared model, a call
 *      with its client handle on our token, or a forged token - each must be INVALID_ARGUMENT;
 *   3. teardown, all at once: each client frees some of its objects and closes with the rest
 *      still live; close_client must report exactly those (1 buffer, 1 prepared model);
 *   4. the main thread, through a client opened before phase 1, checks that every closed
 *      client's tokens, prepared models and client handle are now INVALID_ARGUMENT. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl_common.h"

enum { NCLIENTS = 4, MAXN = 32, N_ATTACKS = 9 };

typedef struct client {
  int id;
  uint32_t n;
  float decay;
  /* Written in the setup phase, read by every thread after it (the barrier orders them). */
  md_handle handle, prepared;
  md_token acc[2], xt;
  /* The owner thread's own state. */
  int cur;
  int xfd;
  wl_staging stg;
  wl_rng rng;
  float host_acc[MAXN];
  uint64_t digest;
  uint32_t attacks;
} client;

typedef struct shared {
  wl_ctx *ctx;
  client clients[NCLIENTS];
  pthread_barrier_t barrier;
} shared;

static void barrier(shared *sh) {
  int rc = pthread_barrier_wait(&sh->barrier);
  if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) wl_fail(sh->ctx, "pthread_barrier_wait: %d", rc);
}

static void setup(shared *sh, client *c) {
  wl_ctx *ctx = sh->ctx;
  const md_driver *drv = ctx->drv;
  const uint32_t d_n[] = {c->n}, d_1[] = {1};
  wl_model m;
  wl_model_init(&m, ctx);
  uint32_t acc = wl_input(&m, 1, d_n), x = wl_input(&m, 1, d_n);
  uint32_t decay = wl_const_tensor(&m, 1, d_1, &c->decay);
  uint32_t none = wl_const_i32(&m, WL_ACT_NONE);
  uint32_t mid = wl_temp(&m, 1, d_n), out = wl_output(&m, 1, d_n);
  wl_op(&m, MD_OP_MUL, 3, (const uint32_t[]){acc, decay, none}, mid);
  wl_op(&m, MD_OP_ADD, 3, (const uint32_t[]){mid, x, none}, out);
  WL_OK(ctx, drv->open_client(ctx->dev, &c->handle));
  WL_OK(ctx, drv->prepare_model(ctx->dev, c->handle, wl_model_get(&m), &c->prepared));

  md_buffer_role in0 = {0, 0, 1.0f}, in1 = {0, 1, 1.0f}, out0 = {0, 0, 1.0f};
  md_buffer_desc desc = {0};
  for (int k = 0; k < 2; k++)
    WL_OK(ctx, drv->allocate(ctx->dev, c->handle, &desc, &c->prepared, 1, &in0, 1, &out0, 1, &c->acc[k]));
  WL_OK(ctx, drv->allocate(ctx->dev, c->handle, &desc, &c->prepared, 1, &in1, 1, NULL, 0, &c->xt));
  wl_rng_fill(&c->rng, c->host_acc, c->n, -1.0f, 1.0f);
  wl_copy_from(ctx, &c->stg, c->handle, c->acc[0], c->host_acc, c->n, 0, NULL);
}

/* One try of another client's handle (or a forged one); must be INVALID_ARGUMENT. */
static void attack(shared *sh, client *c, uint32_t round) {
  wl_ctx *ctx = sh->ctx;
  const md_driver *drv = ctx->drv;
  md_device *dev = ctx->dev;
  client *v = &sh->clients[(c->id + 1 + (int)wl_rng_below(&c->rng, NCLIENTS - 1)) % NCLIENTS];
  uint32_t pick = wl_rng_below(&c->rng, 3);
  md_token vt = pick == 2 ? v->xt : v->acc[pick];
  uint32_t kind = wl_rng_below(&c->rng, N_ATTACKS);
  char why[160];
  snprintf(why, sizeof why, "SPEC 5: client %d, round %u, attack %u on client %d's %s", c->id, round,
           kind, v->id, pick == 2 ? "x buffer" : "state buffer");
  md_memory vmem = wl_staging_mem(&c->stg, sizeof(float) * v->n); /* the victim buffer's size */
  const uint32_t d_vn[] = {v->n};
  wl_request r;
  md_token tok;
  md_output_shape shape;
  md_timing timing;
  md_buffer_role in0 = {0, 0, 1.0f};
  md_buffer_desc desc = {0};
  switch (kind) {
  case 0: /* read another client's buffer */
    WL_EXPECT(ctx, drv->copy_to(dev, c->handle, vt, &vmem), MD_INVALID_ARGUMENT, why);
    break;
  case 1: /* overwrite another client's buffer */
    WL_EXPECT(ctx, drv->copy_from(dev, c->handle, vt, &vmem, 0, NULL), MD_INVALID_ARGUMENT, why);
    break;
  case 2: /* free another client's buffer */
    WL_EXPECT(ctx, drv->free_buffer(dev, c->handle, vt), MD_INVALID_ARGUMENT, why);
    break;
  case 3: /* our model reading another client's buffer (output: our next state buffer) */
    wl_req_init(&r, ctx);
    wl_req_in_token(&r, vt);
    wl_req_in(&r, wl_req_memory(&r, wl_ashmem(c->xfd, sizeof(float) * MAXN)), 0, sizeof(float) * c->n,
              0, NULL);
    wl_req_out_token(&r, c->acc[1 - c->cur]);
    WL_EXPECT(ctx, drv->execute(dev, c->handle, c->prepared, wl_req_get(&r), &shape, 1, &timing),
              MD_INVALID_ARGUMENT, why);
    break;
  case 4: /* a buffer for another client's prepared model */
    WL_EXPECT(ctx, drv->allocate(dev, c->handle, &desc, &v->prepared, 1, &in0, 1, NULL, 0, &tok),
              MD_INVALID_ARGUMENT, why);
    break;
  case 5: /* run another client's prepared model (on our own memory pools) */
    wl_req_init(&r, ctx);
    {
      uint32_t pool = wl_req_memory(&r, wl_ashmem(c->xfd, sizeof(float) * MAXN));
      wl_req_in(&r, pool, 0, sizeof(float) * v->n, 1, d_vn);
      wl_req_in(&r, pool, 0, sizeof(float) * v->n, 1, d_vn);
      wl_req_out(&r, wl_req_memory(&r, vmem), 0, sizeof(float) * v->n, 1, d_vn);
    }
    WL_EXPECT(ctx, drv->execute(dev, c->handle, v->prepared, wl_req_get(&r), &shape, 1, &timing),
              MD_INVALID_ARGUMENT, why);
    break;
  case 6: /* release another client's prepared model */
    WL_EXPECT(ctx, drv->release_prepared_model(dev, c->handle, v->prepared), MD_INVALID_ARGUMENT, why);
    break;
  case 7: { /* another client's handle with our token */
    md_memory own = wl_staging_mem(&c->stg, sizeof(float) * c->n);
    WL_EXPECT(ctx, drv->copy_to(dev, v->handle, c->acc[c->cur], &own), MD_INVALID_ARGUMENT, why);
    break;
  }
  default: { /* a forged token: ours with one bit of its upper half flipped */
    md_memory own = wl_staging_mem(&c->stg, sizeof(float) * c->n);
    md_token forged = c->acc[c->cur] ^ (1ull << (32 + wl_rng_below(&c->rng, 32)));
    snprintf(why, sizeof why, "SPEC 5: client %d, round %u: a forged token", c->id, round);
    WL_EXPECT(ctx, drv->copy_to(dev, c->handle, forged, &own), MD_INVALID_ARGUMENT, why);
    break;
  }
  }
  ctx->rejections++;
  c->attacks++;
}

static void round_(shared *sh, client *c, uint32_t round) {
  wl_ctx *ctx = sh->ctx;
  const md_driver *drv = ctx->drv;
  float x[MAXN], got[MAXN];
  wl_rng_fill(&c->rng, x, c->n, -1.0f, 1.0f);
  wl_request r;
  wl_req_init(&r, ctx);
  wl_req_in_token(&r, c->acc[c->cur]);
  if (round % 2) {
    wl_copy_from(ctx, &c->stg, c->handle, c->xt, x, c->n, 0, NULL);
    wl_req_in_token(&r, c->xt);
  } else {
    wl_fd_write(ctx, c->xfd, 0, x, sizeof(float) * c->n);
    wl_req_in(&r, wl_req_memory(&r, wl_ashmem(c->xfd, sizeof(float) * MAXN)), 0, sizeof(float) * c->n,
              0, NULL);
  }
  wl_req_out_token(&r, c->acc[1 - c->cur]);
  md_output_shape shape;
  md_timing timing;
  WL_OK(ctx, drv->execute(ctx->dev, c->handle, c->prepared, wl_req_get(&r), &shape, 1, &timing));
  ctx->executions++;
  c->cur = 1 - c->cur;
  for (uint32_t k = 0; k < c->n; k++) {
    float m = c->host_acc[k] * c->decay;
    c->host_acc[k] = m + x[k];
  }
  char what[96];
  const uint32_t d_n[] = {c->n};
  snprintf(what, sizeof what, "client %d, round %u: output shape", c->id, round);
  wl_expect_shape(ctx, what, &shape, 1, d_n);
  wl_copy_to(ctx, &c->stg, c->handle, c->acc[c->cur], got, c->n);
  snprintf(what, sizeof what, "client %d, round %u: state read back with copy_to", c->id, round);
  wl_expect_close(ctx, what, got, c->host_acc, c->n, 1e-5f);
  c->digest = wl_digest(c->digest, got, sizeof(float) * c->n);
}

static void teardown(shared *sh, client *c) {
  wl_ctx *ctx = sh->ctx;
  const md_driver *drv = ctx->drv;
  WL_OK(ctx, drv->free_buffer(ctx->dev, c->handle, c->xt));
  WL_OK(ctx, drv->free_buffer(ctx->dev, c->handle, c->acc[1 - c->cur]));
  md_leak_report leaks;
  memset(&leaks, 0, sizeof leaks);
  WL_OK(ctx, drv->close_client(ctx->dev, c->handle, &leaks));
  if (leaks.buffers != 1 || leaks.prepared_models != 1 || leaks.events != 0 ||
      leaks.bytes < sizeof(float) * c->n)
    wl_fail(ctx, "client %d: close_client with 1 buffer of %u floats and 1 prepared model still live "
            "reported %u buffers, %u prepared models, %u events, %llu bytes (SPEC 5)", c->id, c->n,
            leaks.buffers, leaks.prepared_models, leaks.events, (unsigned long long)leaks.bytes);
}

typedef struct thread_arg { shared *sh; int id; } thread_arg;

static void *client_main(void *p) {
  thread_arg *a = p;
  shared *sh = a->sh;
  client *c = &sh->clients[a->id];
  for (int turn = 0; turn < NCLIENTS; turn++) {
    if (turn == c->id) setup(sh, c);
    barrier(sh);
  }
  for (uint32_t r = 0; r < sh->ctx->steps; r++) {
    barrier(sh);
    round_(sh, c, r);
    if ((r + (uint32_t)c->id) % 3 == 0) attack(sh, c, r);
  }
  barrier(sh);
  teardown(sh, c);
  return NULL;
}

int main(int argc, char **argv) {
  wl_ctx ctx;
  wl_init(&ctx, "multi_client", argc, argv, 32);
  wl_open(&ctx);
  const md_driver *drv = ctx.drv;
  md_device *dev = ctx.dev;
  static shared sh;
  sh.ctx = &ctx;
  /* The checking client of phase 4, opened first so its handle value is fixed too. */
  md_handle late;
  WL_OK(&ctx, drv->open_client(dev, &late));
  /* fds in client order from this thread, so their numbers are fixed too. */
  for (int i = 0; i < NCLIENTS; i++) {
    client *c = &sh.clients[i];
    c->id = i;
    c->n = 8 + 4 * (uint32_t)i;
    c->decay = 0.5f + 0.1f * (float)i;
    c->digest = WL_DIGEST_INIT;
    wl_rng_init(&c->rng, ctx.seed, 0x3c00 + (uint64_t)i);
    c->xfd = wl_memfd(&ctx, "wl-mc-x", NULL, sizeof(float) * MAXN);
    wl_staging_open(&ctx, &c->stg, sizeof(float) * MAXN);
  }
  if (pthread_barrier_init(&sh.barrier, NULL, NCLIENTS) != 0) wl_fail(&ctx, "pthread_barrier_init");
  pthread_t th[NCLIENTS];
  thread_arg args[NCLIENTS];
  for (int i = 0; i < NCLIENTS; i++) {
    args[i] = (thread_arg){&sh, i};
    int rc = pthread_create(&th[i], NULL, client_main, &args[i]);
    if (rc != 0) wl_fail(&ctx, "pthread_create: %s", strerror(rc));
  }
  for (int i = 0; i < NCLIENTS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&sh.barrier);

  /* Phase 4: everything of the closed clients is dead (SPEC 5: "after the client closed"). */
  wl_staging stg;
  wl_staging_open(&ctx, &stg, sizeof(float) * MAXN);
  uint64_t digest = WL_DIGEST_INIT;
  uint32_t attacks = 0;
  for (int i = 0; i < NCLIENTS; i++) {
    client *c = &sh.clients[i];
    md_memory dst = wl_staging_mem(&stg, sizeof(float) * c->n);
    char why[96];
    snprintf(why, sizeof why, "SPEC 5: client %d closed", i);
    for (int k = 0; k < 2; k++) {
      WL_EXPECT(&ctx, drv->copy_to(dev, late, c->acc[k], &dst), MD_INVALID_ARGUMENT, why);
      WL_EXPECT(&ctx, drv->copy_to(dev, c->handle, c->acc[k], &dst), MD_INVALID_ARGUMENT, why);
    }
    WL_EXPECT(&ctx, drv->release_prepared_model(dev, late, c->prepared), MD_INVALID_ARGUMENT, why);
    WL_EXPECT(&ctx, drv->close_client(dev, c->handle, NULL), MD_INVALID_ARGUMENT, why);
    ctx.rejections += 6;
    digest = wl_digest(digest, &c->digest, sizeof c->digest);
    attacks += c->attacks;
    close(c->xfd);
    wl_staging_close(&c->stg);
  }
  md_leak_report leaks;
  WL_OK(&ctx, drv->close_client(dev, late, &leaks));
  if (leaks.buffers || leaks.prepared_models || leaks.events)
    wl_fail(&ctx, "the checking client held nothing but close_client reported %u buffers, %u models, %u events",
            leaks.buffers, leaks.prepared_models, leaks.events);
  wl_close(&ctx);
  wl_staging_close(&stg);
  wl_pass(&ctx, digest, "%d clients x %u rounds, %u cross-client tries refused", NCLIENTS, ctx.steps, attacks);
  return 0;
}
