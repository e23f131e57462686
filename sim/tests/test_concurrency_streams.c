/* test_concurrency_streams.c - asynchronous streams: queued work runs on the device's worker
 * threads after the call returns, in stream order; a seed makes the interleaving of streams
 * reproducible command for command (and another seed gives another); events, timeouts, the
 * copy bandwidth model. Named *concurrency* so it also runs under ThreadSanitizer. */
#include "sim_test.h"

#include <pthread.h>

#define MIB (1024ull * 1024ull)

TestSuite(streams, .fini = simt_close);

static md_backend *open_seeded(int has_seed, uint64_t seed, double gbps, uint64_t latency) {
  simt *t = simt_get();
  t->ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = 16 * MIB, .seed = seed, .has_seed = has_seed,
                         .latency_ns = latency, .copy_gbps = gbps};
  char err[256] = "";
  cr_assert_eq(t->ops->open(&p, &t->dev, err, sizeof err), MD_NONE, "%s", err);
  return t->dev;
}

Test(streams, a_launch_returns_before_its_kernel_runs_and_the_kernel_runs_on_a_worker) {
  md_backend *d = open_seeded(0, 0, 0, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  simt_gate g = SIMT_GATE_INIT;
  md_kernel_def k = simt_kernel("gate", simt_gate_kernel);
  k.user = &g;
  md_tensor t = simt_tensor(ops->kernel_ptr(d, out), 16);
  md_kernel_status st;
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  /* If launch ran the kernel itself, it would wait for a gate nobody opens yet: the call
   * returning at all proves the kernel runs elsewhere. */
  cr_assert_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
  pthread_mutex_lock(&g.lock);
  cr_expect_eq(g.ran, 0, "the kernel cannot have finished: its gate is closed");
  pthread_mutex_unlock(&g.lock);
  cr_expect_eq(ops->event_wait(d, e, 0), MD_MISSED_DEADLINE_TRANSIENT, "not reached while the kernel waits");
  simt_gate_open(&g);
  cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_NONE);
  cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
  cr_expect_eq(g.ran, 1);
  cr_expect(!pthread_equal(g.runner, pthread_self()), "the kernel ran on the caller's thread");
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
  ops->free(d, out);
}

/* ---- a kernel that logs (stream, index) into a shared journal ----------------------------- */

#define STREAMS 4
#define PER_STREAM 40

typedef struct journal {
  _Atomic uint32_t n;
  uint32_t entries[STREAMS * PER_STREAM];   /* stream << 16 | index */
  uint64_t acc;                             /* an order-dependent result */
} journal;

typedef struct tag {
  journal *j;
  uint32_t stream, index;
} tag;

static void log_kernel(const md_kernel_call *c, md_kernel_status *st) {
  const tag *t = c->user;
  uint32_t at = atomic_fetch_add(&t->j->n, 1);
  if (at < STREAMS * PER_STREAM) t->j->entries[at] = t->stream << 16 | t->index;
  /* Written only by the worker running this command; the streams' commands never overlap on
   * a seeded device (one worker), so this is the device's result. */
  float *o = c->outputs[0].data;
  o[0] = o[0] * 31.0f + (float)(t->stream + 1);
}

typedef struct run_result {
  uint32_t entries[STREAMS * PER_STREAM];
  uint64_t hash, commands;
  float value;
} run_result;

/* Issues PER_STREAM launches on each of STREAMS streams, round robin, from this thread, with
 * one flush in the middle; returns the journal, the order hash and the result. */
static void racing_streams(int has_seed, uint64_t seed, run_result *r) {
  md_backend *d = open_seeded(has_seed, seed, 0, 0);
  const md_backend_ops *ops = simt_get()->ops;
  static journal j;
  static tag tags[STREAMS][PER_STREAM];
  static md_kernel_status sts[STREAMS][PER_STREAM];
  static md_tensor outs[STREAMS];
  memset(&j, 0, sizeof j);
  md_devptr mem[STREAMS];
  md_stream *s[STREAMS];
  for (int i = 0; i < STREAMS; i++) {
    cr_assert_eq(ops->stream_create(d, &s[i]), MD_NONE);
    mem[i] = simt_alloc(64);
    outs[i] = simt_tensor(ops->kernel_ptr(d, mem[i]), 1);
  }
  md_kernel_def k = simt_kernel("log", log_kernel);
  for (uint32_t n = 0; n < PER_STREAM; n++) {
    for (uint32_t i = 0; i < STREAMS; i++) {
      tags[i][n] = (tag){&j, i, n};
      k.user = &tags[i][n];
      cr_assert_eq(simt_launch(s[i], &k, NULL, &outs[i], &sts[i][n]), MD_NONE);
    }
    if (n == PER_STREAM / 2) cr_assert_eq(ops->stream_sync(d, s[0], NULL, 0), MD_NONE);
  }
  for (int i = 0; i < STREAMS; i++) cr_assert_eq(ops->stream_sync(d, s[i], NULL, 0), MD_NONE);
  memset(r, 0, sizeof *r);
  cr_assert_eq(atomic_load(&j.n), STREAMS * PER_STREAM);
  memcpy(r->entries, j.entries, sizeof r->entries);
  md_sim_order_entry log[STREAMS * PER_STREAM];
  r->commands = md_sim_order(d, log, STREAMS * PER_STREAM, &r->hash);
  for (int i = 0; i < STREAMS; i++) {
    float v;
    cr_assert_eq(ops->read(d, NULL, &v, mem[i], 0, 4, NULL, 0), MD_NONE);
    r->value += v;
    ops->stream_destroy(d, s[i]);
    ops->free(d, mem[i]);
  }
  simt_close();
}

static int in_stream_order(const uint32_t *entries) {
  uint32_t next[STREAMS] = {0};
  for (int i = 0; i < STREAMS * PER_STREAM; i++) {
    uint32_t st = entries[i] >> 16, idx = entries[i] & 0xFFFF;
    if (st >= STREAMS || idx != next[st]++) return 0;
  }
  return 1;
}

Test(streams, the_same_seed_gives_the_same_interleaving_command_for_command) {
  run_result a, b;
  racing_streams(1, 7, &a);
  racing_streams(1, 7, &b);
  cr_expect(in_stream_order(a.entries), "each stream's commands run in issue order");
  cr_expect_eq(memcmp(a.entries, b.entries, sizeof a.entries), 0, "seed 7 twice: the journals differ");
  cr_expect_eq(a.hash, b.hash);
  cr_expect_eq(a.commands, STREAMS * PER_STREAM);
  cr_expect_eq(a.value, b.value, "identical results");
  /* Not round robin, not one stream after another: the streams really interleave. */
  int switches = 0;
  for (int i = 1; i < STREAMS * PER_STREAM; i++) switches += (a.entries[i] >> 16) != (a.entries[i - 1] >> 16);
  cr_expect_gt(switches, STREAMS * 4, "only %d stream switches", switches);
}

Test(streams, another_seed_explores_another_interleaving) {
  run_result a, b;
  racing_streams(1, 7, &a);
  racing_streams(1, 8, &b);
  cr_expect(in_stream_order(b.entries));
  cr_expect_neq(memcmp(a.entries, b.entries, sizeof a.entries), 0, "seeds 7 and 8 gave the same order");
  cr_expect_neq(a.hash, b.hash);
}

Test(streams, without_a_seed_everything_runs_in_stream_order_on_two_workers) {
  run_result a;
  racing_streams(0, 0, &a);
  cr_expect(in_stream_order(a.entries));
  cr_expect_eq(a.commands, STREAMS * PER_STREAM);
}

Test(streams, seeded_work_is_held_until_a_flush) {
  md_backend *d = open_seeded(1, 3, 0, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  uint8_t src[64];
  memset(src, 0x5A, sizeof src);
  cr_assert_eq(ops->write(d, s, out, 0, src, 64, NULL, 0), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
  cr_expect_eq(simt_stats().commands_run, 0, "held: nothing flushed yet");
  cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_NONE, "the wait flushes");
  cr_expect_eq(simt_stats().commands_run, 2);
  uint8_t back[64];
  cr_assert_eq(ops->read(d, NULL, back, out, 0, 64, NULL, 0), MD_NONE);
  cr_expect_eq(memcmp(back, src, 64), 0);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
  ops->free(d, out);
}

Test(streams, destroying_a_stream_or_event_waits_for_its_queued_work) {
  md_backend *d = open_seeded(1, 5, 0, 0);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(4096);
  static uint8_t src[4096];
  memset(src, 7, sizeof src);
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  for (int i = 0; i < 16; i++) cr_assert_eq(ops->write(d, s, out, 0, src, sizeof src, NULL, 0), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
  cr_expect_eq(simt_stats().commands_run, 17, "all of it ran before the objects went");
  ops->free(d, out);
}

Test(streams, copy_bandwidth_and_latency_model_advance_the_clock) {
  /* Seeded, so both streams' copies are issued before either runs (simulated time must not
   * depend on how fast the host worker is). 2 GB/s, 5 us per launch. */
  md_backend *d = open_seeded(1, 1, 2.0, 5000);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(MIB);
  static uint8_t buf[MIB];
  cr_assert_eq(ops->write(d, NULL, p, 0, buf, MIB, NULL, 0), MD_NONE);
  cr_expect_eq(md_sim_clock_ns(d), MIB / 2, "1 MiB at 2 GB/s");
  md_kernel_def k = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(ops->kernel_ptr(d, p), 16);
  md_kernel_status st;
  cr_assert_eq(simt_launch(NULL, &k, NULL, &t, &st), MD_NONE);
  cr_expect_eq(md_sim_clock_ns(d), MIB / 2 + 5000);
  cr_expect_eq(md_sim_model_ns(d, 0, 4000), 2000);
  cr_expect_eq(md_sim_model_ns(d, 1, 0), 5000);
  /* Two streams run side by side: the device clock is the later of them, not the sum. */
  md_stream *s1, *s2;
  cr_assert_eq(ops->stream_create(d, &s1), MD_NONE);
  cr_assert_eq(ops->stream_create(d, &s2), MD_NONE);
  uint64_t before = md_sim_clock_ns(d);
  cr_assert_eq(ops->write(d, s1, p, 0, buf, MIB, NULL, 0), MD_NONE);
  cr_assert_eq(ops->write(d, s2, p, 0, buf, MIB, NULL, 0), MD_NONE);
  cr_assert_eq(ops->stream_sync(d, s1, NULL, 0), MD_NONE);
  cr_assert_eq(ops->stream_sync(d, s2, NULL, 0), MD_NONE);
  cr_expect_leq(md_sim_clock_ns(d), before + MIB / 2 + 1, "overlapping copies");
  ops->stream_destroy(d, s1);
  ops->stream_destroy(d, s2);
  ops->free(d, p);
}

Test(streams, close_with_queued_work_releases_everything) {
  md_backend *d = open_seeded(1, 9, 0, 0);
  const md_backend_ops *ops = simt_get()->ops;
  simt_get()->allow_live = 1;
  md_devptr out = simt_alloc(64);
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  static uint8_t src[64];
  for (int i = 0; i < 8; i++) cr_assert_eq(ops->write(d, s, out, 0, src, 64, NULL, 0), MD_NONE);
  (void)d;   /* never flushed: close drops the held work (ASan checks nothing leaks) */
}
