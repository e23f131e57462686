/* test_unit_sched.c - the scheduler (sim_sched.c), deterministic: with a seed, one worker runs
 * the streams in an order the seed alone decides (held work released at each flush as a batch;
 * within a batch, each next stream drawn with splitmix64 over the streams whose next command
 * is in the batch, in creation order). A model of that rule predicts the order command for
 * command, the order hash (FNV-1a over stream, index, kind) and the simulated time at which
 * each event is reached. Then streams, events and their errors: what each call returns, what
 * stream_sync reports and clears, waits with and without a timeout. No sleeps: a kernel that
 * waits for the test to open a gate makes "not yet" deterministic. */
#include "sim_test.h"

#include <pthread.h>
#include <stdlib.h>

#include "sim_backend_int.h"

#define MIB (1024ull * 1024ull)

TestSuite(unit_sched, .fini = simt_close);

static md_backend *open_with(int has_seed, uint64_t seed, uint64_t latency, double gbps, const char *faults) {
  simt *t = simt_get();
  t->ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = 4 * MIB, .seed = seed, .has_seed = has_seed,
                         .latency_ns = latency, .copy_gbps = gbps, .faults = faults};
  char err[256] = "";
  cr_assert_eq(t->ops->open(&p, &t->dev, err, sizeof err), MD_NONE, "%s", err);
  return t->dev;
}

/* ---- the model -------------------------------------------------------------------------- */

static uint64_t sm64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define MS 4          /* streams */
#define MQ 400        /* commands per stream at most */

typedef struct mcmd {
  uint32_t kind;      /* 0 copy, 1 launch, 2 event */
  uint64_t batch;
  uint64_t bytes;     /* copies: for the clock */
  int ev;             /* events: which (index into the test's events) */
} mcmd;

typedef struct msched {
  uint64_t rng, batch_last, hash, clock, sclock[MS];
  uint64_t issued[MS];
  mcmd q[MS][MQ];
  size_t head[MS], tail[MS];
  uint64_t held;
  md_sim_order_entry order[MS * MQ];
  size_t n_order;
  uint64_t ev_time[16];
  uint64_t latency;
  double gbps;
} msched;

static void m_init(msched *m, uint64_t seed, uint64_t latency, double gbps) {
  memset(m, 0, sizeof *m);
  m->rng = seed ^ 0x6d64632d73696d21ull;
  m->latency = latency;
  m->gbps = gbps;
}

static void m_issue(msched *m, int s, uint32_t kind, uint64_t bytes, int ev) {
  cr_assert_lt(m->tail[s], MQ);
  if (m->head[s] == m->tail[s] && m->sclock[s] < m->clock) m->sclock[s] = m->clock;   /* idle stream */
  m->q[s][m->tail[s]++] = (mcmd){.kind = kind, .batch = 0, .bytes = bytes, .ev = ev};
  m->held++;
}

static void m_flush(msched *m) {
  if (!m->held) return;
  m->batch_last++;
  for (int s = 0; s < MS; s++)
    for (size_t i = m->head[s]; i < m->tail[s]; i++)
      if (!m->q[s][i].batch) m->q[s][i].batch = m->batch_last;
  m->held = 0;
}

static void m_hash(msched *m, uint64_t stream, uint64_t index, uint64_t kind) {
  uint64_t h = m->hash ? m->hash : 0xcbf29ce484222325ull;
  const uint64_t w[3] = {stream, index, kind};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 8; i++) h = (h ^ ((w[k] >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
  m->hash = h;
}

/* Runs every released batch, as the worker does. */
static void m_run(msched *m, uint64_t *batch_cur) {
  for (; *batch_cur <= m->batch_last; (*batch_cur)++) {
    for (;;) {
      int cand[MS], n = 0;
      for (int s = 0; s < MS; s++)
        if (m->head[s] < m->tail[s] && m->q[s][m->head[s]].batch == *batch_cur) cand[n++] = s;
      if (!n) break;
      int s = cand[sm64(&m->rng) % (uint64_t)n];
      mcmd c = m->q[s][m->head[s]++];
      uint64_t idx = ++m->issued[s];
      if (c.kind == 0 || c.kind == 1) {
        uint64_t ns = c.kind == 1 ? m->latency : (m->gbps > 0 ? (uint64_t)((double)c.bytes / m->gbps) : 0);
        if (ns) {
          m->sclock[s] += ns;
          if (m->clock < m->sclock[s]) m->clock = m->sclock[s];
        }
      } else {
        m->ev_time[c.ev] = m->clock;
      }
      m->order[m->n_order++] = (md_sim_order_entry){.stream = (uint64_t)s + 1, .index = idx, .kind = c.kind};
      m_hash(m, (uint64_t)s + 1, idx, c.kind);
    }
  }
}

/* ---- the device side -------------------------------------------------------------------- */

typedef struct rig {
  md_backend *d;
  const md_backend_ops *ops;
  md_stream *s[MS];
  md_event *e[16];
  md_devptr buf;
  float *kbuf;
  uint8_t host[4096];
  md_kernel_def fill;
  md_tensor t;
  md_kernel_status st[MS * MQ];
  size_t n_st;
} rig;

static void rig_open(rig *r, int has_seed, uint64_t seed, uint64_t latency, double gbps, int n_events) {
  memset(r, 0, sizeof *r);
  r->d = open_with(has_seed, seed, latency, gbps, NULL);
  r->ops = simt_get()->ops;
  for (int i = 0; i < MS; i++) cr_assert_eq(r->ops->stream_create(r->d, &r->s[i]), MD_NONE);
  for (int i = 0; i < n_events; i++) cr_assert_eq(r->ops->event_create(r->d, &r->e[i]), MD_NONE);
  r->buf = simt_alloc(4096);
  r->kbuf = r->ops->kernel_ptr(r->d, r->buf);
  r->fill = simt_kernel("fill", simt_k_fill);
  r->t = simt_tensor(r->kbuf, 16);
  memset(r->host, 3, sizeof r->host);
}

static void rig_close(rig *r, int n_events) {
  for (int i = 0; i < n_events; i++) r->ops->event_destroy(r->d, r->e[i]);
  for (int i = 0; i < MS; i++) r->ops->stream_destroy(r->d, r->s[i]);
  r->ops->free(r->d, r->buf);
}

/* Issues one command on stream s of both the device and the model: kind 0 a write of `bytes`
 * (or a read, or a device-to-device copy), 1 a launch, 2 an event record. */
static void issue(rig *r, msched *m, int s, uint32_t kind, uint64_t bytes, int ev, int variant) {
  md_status rc = MD_NONE;
  if (kind == 0) {
    if (variant % 3 == 0) rc = r->ops->write(r->d, r->s[s], r->buf, 0, r->host, bytes, NULL, 0);
    else if (variant % 3 == 1) rc = r->ops->read(r->d, r->s[s], r->host, r->buf, 0, bytes, NULL, 0);
    else rc = r->ops->copy(r->d, r->s[s], r->buf, 2048, r->buf, 0, bytes < 2048 ? bytes : 2048, NULL, 0);
    if (variant % 3 == 2 && bytes > 2048) bytes = 2048;
  } else if (kind == 1) {
    cr_assert_lt(r->n_st, MS * MQ);
    rc = simt_launch(r->s[s], &r->fill, NULL, &r->t, &r->st[r->n_st++]);
  } else {
    rc = r->ops->event_record(r->d, r->e[ev], r->s[s]);
  }
  cr_assert_eq(rc, MD_NONE, "issue kind %u on stream %d", kind, s);
  m_issue(m, s, kind, bytes, ev);
}

static void expect_order(rig *r, msched *m, const char *what) {
  static md_sim_order_entry got[MS * MQ];
  uint64_t hash = 1;
  size_t n = md_sim_order(r->d, got, MS * MQ, &hash);
  cr_assert_eq(n, m->n_order, "%s: %zu commands ran, the model ran %zu", what, n, m->n_order);
  for (size_t i = 0; i < n; i++)
    cr_assert(got[i].stream == m->order[i].stream && got[i].index == m->order[i].index &&
                  got[i].kind == m->order[i].kind,
              "%s: command %zu ran stream %" PRIu64 " #%" PRIu64 " kind %u, the model says stream %" PRIu64
              " #%" PRIu64 " kind %u",
              what, i, got[i].stream, got[i].index, got[i].kind, m->order[i].stream, m->order[i].index,
              m->order[i].kind);
  cr_assert_eq(hash, m->hash, "%s: order hash", what);
  md_sim_stats s = simt_stats();
  cr_assert_eq(s.commands_run, m->n_order);
  cr_assert_eq(s.order_hash, m->hash);
}

/* One batch of mixed commands on four streams, then a second batch issued while the first
 * may still run (a sync of one stream flushes the first). */
static void seeded_run(uint64_t seed) {
  static rig r;
  static msched m;
  rig_open(&r, 1, seed, 0, 0, 4);
  m_init(&m, seed, 0, 0);
  uint64_t batch_cur = 1, x = seed * 7 + 1;
  cr_expect_eq(simt_stats().workers, 1, "seeded: one worker");
  for (int i = 0; i < 60; i++) {
    int s = (int)(sm64(&x) % MS);
    uint32_t kind = (uint32_t)(sm64(&x) % 5 == 0 ? 2 : sm64(&x) % 2);
    issue(&r, &m, s, kind, 1 + sm64(&x) % 4000, (int)(sm64(&x) % 4), i);
  }
  cr_expect_eq(simt_stats().commands_run, 0, "held until a flush");
  cr_assert_eq(r.ops->stream_sync(r.d, r.s[1], NULL, 0), MD_NONE);
  m_flush(&m);
  for (int i = 0; i < 50; i++) {
    int s = (int)(sm64(&x) % MS);
    uint32_t kind = (uint32_t)(sm64(&x) % 5 == 0 ? 2 : sm64(&x) % 2);
    issue(&r, &m, s, kind, 1 + sm64(&x) % 4000, (int)(sm64(&x) % 4), i);
  }
  cr_assert_eq(r.ops->event_wait(r.d, r.e[0], UINT64_MAX), MD_NONE);   /* flushes the second batch */
  m_flush(&m);
  cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
  m_run(&m, &batch_cur);
  expect_order(&r, &m, "two batches");
  /* A third batch, flushed by the sync of one stream that holds none of it. */
  for (int i = 0; i < 30; i++) issue(&r, &m, i % 3, (uint32_t)(i % 2), 64, 0, i);
  cr_assert_eq(r.ops->stream_sync(r.d, r.s[3], NULL, 0), MD_NONE);
  m_flush(&m);
  cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
  m_run(&m, &batch_cur);
  expect_order(&r, &m, "three batches");
  for (size_t i = 0; i < r.n_st; i++) cr_expect_eq(r.st[i].code, MD_NONE);
  rig_close(&r, 4);
}

Test(unit_sched, seeded_order_follows_the_seeded_draw_command_for_command) {
  const uint64_t seeds[] = {0, 1, 2, 7, 12345, 0xdeadbeefcafef00dull};
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    seeded_run(seeds[i]);
    simt_close();
  }
}

/* The time model with a seed: a launch costs latency_ns on its stream, a copy bytes / GB/s; a
 * stream idle when work is issued starts at the device's time; the device clock is the latest
 * stream clock; an event is reached at the device clock when it runs. */
Test(unit_sched, seeded_clocks_and_event_times_follow_the_order) {
  const uint64_t seeds[] = {3, 4, 99};
  for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
    static rig r;
    static msched m;
    rig_open(&r, 1, seeds[k], 1000, 2.0, 8);
    m_init(&m, seeds[k], 1000, 2.0);
    uint64_t batch_cur = 1;
    /* stream 0: three launches and an event; stream 1: a launch, an event; stream 2: a copy of
     * 4000 bytes (2000 ns), an event; stream 3: an event alone. */
    issue(&r, &m, 0, 1, 0, 0, 0);
    issue(&r, &m, 1, 1, 0, 0, 0);
    issue(&r, &m, 0, 1, 0, 0, 0);
    issue(&r, &m, 2, 0, 4000, 0, 0);
    issue(&r, &m, 0, 1, 0, 0, 0);
    issue(&r, &m, 0, 2, 0, 0, 0);
    issue(&r, &m, 1, 2, 0, 1, 0);
    issue(&r, &m, 2, 2, 0, 2, 0);
    issue(&r, &m, 3, 2, 0, 3, 0);
    cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
    m_flush(&m);
    m_run(&m, &batch_cur);
    expect_order(&r, &m, "clocks");
    for (int i = 0; i < 4; i++)
      cr_expect_eq(md_sim_event_time_ns(r.d, r.e[i]), m.ev_time[i], "seed %" PRIu64 " event %d at %" PRIu64
                   ", model %" PRIu64, seeds[k], i, md_sim_event_time_ns(r.d, r.e[i]), m.ev_time[i]);
    cr_expect_eq(md_sim_clock_ns(r.d), 3000, "stream 0's three launches are the latest");
    cr_expect_eq(md_sim_event_time_ns(r.d, r.e[0]), 3000);
    /* Second round: every stream was idle, so each starts at 3000. */
    issue(&r, &m, 1, 1, 0, 0, 0);
    issue(&r, &m, 1, 2, 0, 4, 0);
    issue(&r, &m, 2, 0, 4096, 0, 0);
    issue(&r, &m, 2, 2, 0, 5, 0);
    cr_assert_eq(r.ops->event_wait(r.d, r.e[5], UINT64_MAX), MD_NONE);
    m_flush(&m);
    cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
    m_run(&m, &batch_cur);
    expect_order(&r, &m, "clocks, round 2");
    cr_expect_eq(md_sim_clock_ns(r.d), 3000 + 2048, "the copy of 4096 bytes at 2 GB/s");
    cr_expect_eq(md_sim_event_time_ns(r.d, r.e[5]), 5048);
    for (int i = 4; i < 6; i++) cr_expect_eq(md_sim_event_time_ns(r.d, r.e[i]), m.ev_time[i], "event %d", i);
    /* Third round: one copy alone on stream 3 (idle since its event at 0): it starts at the
     * device's time, not at its own stale clock. */
    issue(&r, &m, 3, 0, 4096, 0, 0);
    cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
    m_flush(&m);
    m_run(&m, &batch_cur);
    expect_order(&r, &m, "clocks, round 3");
    cr_expect_eq(md_sim_clock_ns(r.d), 5048 + 2048, "seed %" PRIu64, seeds[k]);
    cr_expect_eq(md_sim_clock_ns(r.d), m.clock);
    /* Recorded with no stream: reached now, at the device clock. */
    cr_assert_eq(r.ops->event_record(r.d, r.e[6], NULL), MD_NONE);
    cr_expect_eq(md_sim_event_time_ns(r.d, r.e[6]), 7096);
    cr_expect_eq(md_sim_event_time_ns(r.d, r.e[7]), 0, "never recorded");
    cr_expect_eq(r.ops->event_wait(r.d, r.e[7], 0), MD_NONE, "never recorded: nothing to wait for");
    rig_close(&r, 8);
    simt_close();
  }
}

/* The log keeps the last 4096 commands, oldest first; the count and hash cover all of them. */
Test(unit_sched, the_order_log_keeps_the_last_4096_commands) {
  md_backend *d = open_with(1, 5, 0, 0, NULL);
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr p = simt_alloc(64);
  md_stream *s;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  uint8_t b[8] = {0};
  enum { N = SIM_ORDER_LOG + 100 };
  uint64_t h = 0;
  for (int i = 0; i < N; i++) {
    cr_assert_eq(ops->write(d, s, p, 0, b, 8, NULL, 0), MD_NONE);
    uint64_t hh = h ? h : 0xcbf29ce484222325ull;
    const uint64_t w[3] = {1, (uint64_t)i + 1, 0};
    for (int k = 0; k < 3; k++)
      for (int j = 0; j < 8; j++) hh = (hh ^ ((w[k] >> (8 * j)) & 0xFF)) * 0x100000001b3ull;
    h = hh;
  }
  cr_assert_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
  static md_sim_order_entry log[N];
  uint64_t hash = 0;
  cr_expect_eq(md_sim_order(d, log, N, &hash), N);
  cr_expect_eq(hash, h);
  for (int i = 0; i < (int)SIM_ORDER_LOG; i++) {
    cr_assert_eq(log[i].stream, 1);
    cr_assert_eq(log[i].index, (uint64_t)(N - SIM_ORDER_LOG + i + 1), "entry %d", i);
    cr_assert_eq(log[i].kind, 0);
  }
  md_sim_order_entry few[3];
  cr_expect_eq(md_sim_order(d, few, 3, NULL), N, "max limits the copy, not the count");
  cr_expect_eq(few[0].index, (uint64_t)(N - SIM_ORDER_LOG + 1));
  cr_expect_eq(few[2].index, (uint64_t)(N - SIM_ORDER_LOG + 3));
  cr_expect_eq(md_sim_order(d, NULL, 0, &hash), N);
  cr_expect_eq(hash, h);
  ops->stream_destroy(d, s);
  ops->free(d, p);
}

Test(unit_sched, the_order_log_of_a_few_commands_and_of_none) {
  md_backend *d = open_with(1, 6, 0, 0, NULL);
  const md_backend_ops *ops = simt_get()->ops;
  md_sim_order_entry log[8];
  uint64_t hash = 77;
  cr_expect_eq(md_sim_order(d, log, 8, &hash), 0);
  cr_expect_eq(hash, 0, "no command: hash 0");
  md_devptr p = simt_alloc(64);
  md_stream *s1, *s2;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s1), MD_NONE);
  cr_assert_eq(ops->stream_create(d, &s2), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  uint8_t b[8] = {0};
  cr_assert_eq(ops->write(d, s2, p, 0, b, 8, NULL, 0), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, s2), MD_NONE);
  cr_assert_eq(ops->stream_sync(d, s2, NULL, 0), MD_NONE);
  memset(log, 0xFF, sizeof log);
  cr_expect_eq(md_sim_order(d, log, 8, &hash), 2);
  cr_expect_eq(log[0].stream, 2);
  cr_expect_eq(log[0].index, 1);
  cr_expect_eq(log[0].kind, 0);
  cr_expect_eq(log[1].stream, 2);
  cr_expect_eq(log[1].index, 2);
  cr_expect_eq(log[1].kind, 2);
  cr_expect_eq(log[2].stream, UINT64_MAX, "only what ran is written");
  cr_expect_neq(hash, 0);
  /* Not a sim device: 0 and hash 0. */
  static _Alignas(64) uint64_t fake[64];
  hash = 5;
  cr_expect_eq(md_sim_order((md_backend *)fake, log, 8, &hash), 0);
  cr_expect_eq(hash, 0);
  cr_expect_eq(md_sim_order(NULL, log, 8, NULL), 0);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s1);
  ops->stream_destroy(d, s2);
  ops->free(d, p);
}

/* Unseeded: two workers; each stream's commands run in issue order; everything runs. */
Test(unit_sched, unseeded_streams_run_every_command_in_stream_order) {
  static rig r;
  static msched m;
  rig_open(&r, 0, 0, 0, 0, 1);
  m_init(&m, 0, 0, 0);
  cr_expect_eq(simt_stats().workers, SIM_MAX_WORKERS, "unseeded: two workers");
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 40; i++) issue(&r, &m, i % MS, (uint32_t)(i % 3 == 2 ? 2 : i % 2), 100, 0, i);
    cr_assert_eq(r.ops->stream_sync(r.d, NULL, NULL, 0), MD_NONE);
  }
  static md_sim_order_entry got[MS * MQ];
  size_t n = md_sim_order(r.d, got, MS * MQ, NULL);
  cr_expect_eq(n, 120);
  uint64_t next[MS] = {0};
  for (size_t i = 0; i < n; i++) {
    cr_assert(got[i].stream >= 1 && got[i].stream <= MS);
    uint64_t s = got[i].stream - 1;
    cr_assert_eq(got[i].index, ++next[s], "stream %" PRIu64 " ran #%" PRIu64 " out of order", s + 1, got[i].index);
  }
  for (int s = 0; s < MS; s++) cr_expect_eq(next[s], 30);
  for (size_t i = 0; i < r.n_st; i++) cr_expect_eq(r.st[i].code, MD_NONE);
  rig_close(&r, 1);
}

/* ---- errors on streams ------------------------------------------------------------------ */

Test(unit_sched, a_failure_stays_on_its_stream_until_that_stream_is_synchronized) {
  const int seeded[] = {0, 1};
  for (int v = 0; v < 2; v++) {
    md_backend *d = open_with(seeded[v], 11, 0, 0, NULL);
    const md_backend_ops *ops = simt_get()->ops;
    md_devptr out = simt_alloc(64);
    md_kernel_def bad = simt_kernel("no", simt_k_fail), ok = simt_kernel("fill", simt_k_fill);
    bad.user = "first";
    md_tensor t = simt_tensor(ops->kernel_ptr(d, out), 16);
    md_kernel_status st[4];
    md_stream *s, *o;
    cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
    cr_assert_eq(ops->stream_create(d, &o), MD_NONE);
    cr_assert_eq(simt_launch(s, &ok, NULL, &t, &st[0]), MD_NONE);
    cr_assert_eq(simt_launch(s, &bad, NULL, &t, &st[1]), MD_NONE);
    cr_assert_eq(simt_launch(o, &ok, NULL, &t, &st[2]), MD_NONE);
    char err[256] = "x";
    cr_expect_eq(ops->stream_sync(d, NULL, err, sizeof err), MD_NONE, "sync of everything returns no stream's error");
    cr_expect_eq(ops->stream_sync(d, o, err, sizeof err), MD_NONE);
    cr_expect_eq(st[0].code, MD_NONE);
    cr_expect_eq(st[1].code, MD_GENERAL_FAILURE);
    cr_expect_eq(st[2].code, MD_NONE);
    err[0] = '\0';
    cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_GENERAL_FAILURE);
    cr_expect_str_eq(err, "test kernel says no (first)");
    cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_NONE, "cleared");
    /* A second failure after a clear is reported again; a NULL err is fine. */
    bad.user = "second";
    cr_assert_eq(simt_launch(s, &bad, NULL, &t, &st[3]), MD_NONE);
    cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_GENERAL_FAILURE);
    cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
    ops->stream_destroy(d, s);
    ops->stream_destroy(d, o);
    ops->free(d, out);
    simt_close();
  }
}

Test(unit_sched, streams_and_events_refuse_what_is_not_theirs) {
  md_backend *d = open_with(1, 2, 0, 0, NULL);
  const md_backend_ops *ops = simt_get()->ops;
  md_backend *other = NULL;
  md_backend_params prm = {.struct_size = sizeof prm, .mem_limit = MIB};
  cr_assert_eq(ops->open(&prm, &other, NULL, 0), MD_NONE);
  static _Alignas(64) uint64_t fake[64];   /* magic 0: not a sim device */
  md_backend *nd = (md_backend *)fake;
  md_event *e, *oe;
  md_stream *s;
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  cr_assert_eq(ops->event_create(other, &oe), MD_NONE);
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  md_stream *sx = (md_stream *)0x1;
  cr_expect_eq(ops->stream_create(nd, &sx), MD_INVALID_ARGUMENT);
  md_event *ex = (md_event *)0x1;
  cr_expect_eq(ops->event_create(nd, &ex), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_create(NULL, &ex), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_record(d, oe, s), MD_INVALID_ARGUMENT, "another device's event");
  cr_expect_eq(ops->event_record(d, oe, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_record(nd, e, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_record(d, NULL, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_wait(d, oe, 0), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_wait(d, NULL, 0), MD_INVALID_ARGUMENT);
  cr_expect_eq(ops->event_wait(nd, e, 0), MD_INVALID_ARGUMENT);
  char err[128] = "";
  cr_expect_eq(ops->stream_sync(nd, NULL, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_expect(strstr(err, "not a sim device") != NULL, "%s", err);
  cr_expect_eq(md_sim_event_time_ns(nd, e), 0);
  cr_expect_eq(md_sim_event_time_ns(d, NULL), 0);
  cr_expect_null(ops->stream_native(d, s));
  ops->stream_destroy(d, NULL);   /* no-ops */
  ops->event_destroy(d, NULL);
  ops->stream_destroy(nd, s);
  ops->event_destroy(nd, e);
  cr_expect_eq(ops->event_record(d, e, s), MD_NONE, "still there after the refused destroys");
  cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_NONE);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
  ops->event_destroy(other, oe);
  ops->close(other);
}

/* A lost device creates no streams or events and records nothing; waits and syncs say lost. */
Test(unit_sched, a_lost_device_refuses_new_streams_events_and_records) {
  md_backend *d = open_with(1, 2, 0, 0, "device_lost@1");
  const md_backend_ops *ops = simt_get()->ops;
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, NULL), MD_NONE);
  char err[256];
  cr_assert_eq(ops->fault_point(d, MD_FAULT_EXECUTION, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  md_stream *s2 = (md_stream *)0x1;
  md_event *e2 = (md_event *)0x1;
  cr_expect_eq(ops->stream_create(d, &s2), MD_DEVICE_UNAVAILABLE);
  cr_expect_null(s2, "a refused create leaves NULL");
  cr_expect_eq(ops->event_create(d, &e2), MD_DEVICE_UNAVAILABLE);
  cr_expect_null(e2);
  cr_expect_eq(ops->event_record(d, e, s), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_record(d, e, NULL), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_wait(d, e, 0), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, NULL, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(simt_stats().commands_run, 0);
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
}

/* Work queued before the loss fails at the sync; an event queued with it is still reached. */
Test(unit_sched, work_held_when_the_device_is_lost_fails_and_events_are_still_reached) {
  md_backend *d = open_with(1, 2, 0, 0, "device_lost@1");
  const md_backend_ops *ops = simt_get()->ops;
  md_devptr out = simt_alloc(64);
  md_kernel_def ok = simt_kernel("fill", simt_k_fill);
  md_tensor t = simt_tensor(ops->kernel_ptr(d, out), 16);
  md_kernel_status st;
  md_stream *s;
  md_event *e;
  cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
  cr_assert_eq(ops->event_create(d, &e), MD_NONE);
  uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  cr_assert_eq(ops->write(d, s, out, 0, b, 8, NULL, 0), MD_NONE);
  cr_assert_eq(simt_launch(s, &ok, NULL, &t, &st), MD_NONE);
  cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
  char err[256] = "";
  cr_assert_eq(ops->fault_point(d, MD_FAULT_EXECUTION, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect_eq(ops->stream_sync(d, s, err, sizeof err), MD_DEVICE_UNAVAILABLE);
  cr_expect(strstr(err, "queued copy") != NULL, "the first failure is the copy's: %s", err);
  cr_expect_eq(st.code, MD_DEVICE_UNAVAILABLE, "the queued launch's status");
  cr_expect_eq(simt_stats().commands_run, 3, "all three ran (and failed, but the event)");
  uint8_t back[8] = {0};
  memcpy(back, ops->kernel_ptr(d, out), 8);
  cr_expect_eq(back[0], 0, "the queued copy did not happen");
  ops->event_destroy(d, e);
  ops->stream_destroy(d, s);
  ops->free(d, out);
}

/* ---- waits ------------------------------------------------------------------------------ */

Test(unit_sched, a_wait_for_an_event_behind_unfinished_work_times_out_then_succeeds) {
  const int seeded[] = {0, 1};
  for (int v = 0; v < 2; v++) {
    md_backend *d = open_with(seeded[v], 4, 0, 0, NULL);
    const md_backend_ops *ops = simt_get()->ops;
    md_devptr out = simt_alloc(64);
    simt_gate g = SIMT_GATE_INIT;
    md_kernel_def k = simt_kernel("gate", simt_gate_kernel);
    k.user = &g;
    md_tensor t = simt_tensor(ops->kernel_ptr(d, out), 16);
    md_kernel_status st;
    md_stream *s, *o;
    md_event *e, *eo;
    cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
    cr_assert_eq(ops->stream_create(d, &o), MD_NONE);
    cr_assert_eq(ops->event_create(d, &e), MD_NONE);
    cr_assert_eq(ops->event_create(d, &eo), MD_NONE);
    cr_assert_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
    cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
    cr_expect_eq(ops->event_wait(d, e, 0), MD_MISSED_DEADLINE_TRANSIENT, "variant %d: timeout 0", v);
    cr_expect_eq(ops->event_wait(d, e, 1000), MD_MISSED_DEADLINE_TRANSIENT, "variant %d: 1 us", v);
    cr_expect_eq(ops->event_wait(d, e, 2000000), MD_MISSED_DEADLINE_TRANSIENT, "variant %d: 2 ms", v);
    cr_expect_eq(g.ran, 0);
    if (!seeded[v]) {
      /* Unseeded, another stream's work goes on meanwhile (the other worker). */
      cr_assert_eq(ops->event_record(d, eo, o), MD_NONE);
      cr_expect_eq(ops->event_wait(d, eo, UINT64_MAX), MD_NONE);
      cr_expect_eq(ops->stream_sync(d, o, NULL, 0), MD_NONE);
    }
    simt_gate_open(&g);
    cr_expect_eq(ops->event_wait(d, e, UINT64_MAX - 1), MD_NONE, "a deadline far away: reached");
    cr_expect_eq(ops->event_wait(d, e, 0), MD_NONE, "stays reached");
    cr_expect_eq(g.ran, 1);
    /* Recorded again: a new generation to reach. */
    g.open = 0;
    cr_assert_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
    cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
    cr_expect_eq(ops->event_wait(d, e, 0), MD_MISSED_DEADLINE_TRANSIENT, "variant %d: the new record", v);
    simt_gate_open(&g);
    cr_expect_eq(ops->event_wait(d, e, UINT64_MAX), MD_NONE);
    cr_expect_eq(g.ran, 2);
    cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
    ops->event_destroy(d, e);
    ops->event_destroy(d, eo);
    ops->stream_destroy(d, s);
    ops->stream_destroy(d, o);
    ops->free(d, out);
    simt_close();
  }
}

/* Destroying an event or a stream waits for what was queued (and, seeded, flushes it). */
Test(unit_sched, destroy_waits_for_queued_work) {
  const int seeded[] = {0, 1};
  for (int v = 0; v < 2; v++) {
    md_backend *d = open_with(seeded[v], 8, 0, 0, NULL);
    const md_backend_ops *ops = simt_get()->ops;
    md_devptr out = simt_alloc(4096);
    static uint8_t src[4096];
    memset(src, 9, sizeof src);
    md_stream *s, *s2;
    md_event *e;
    cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
    cr_assert_eq(ops->stream_create(d, &s2), MD_NONE);
    cr_assert_eq(ops->event_create(d, &e), MD_NONE);
    for (int i = 0; i < 5; i++) cr_assert_eq(ops->write(d, s, out, 0, src, sizeof src, NULL, 0), MD_NONE);
    cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
    ops->event_destroy(d, e);
    cr_expect_eq(simt_stats().commands_run, 6, "variant %d", v);
    for (int i = 0; i < 3; i++) cr_assert_eq(ops->write(d, s2, out, 0, src, 64, NULL, 0), MD_NONE);
    ops->stream_destroy(d, s2);
    cr_expect_eq(simt_stats().commands_run, 9, "variant %d", v);
    uint8_t back[4096];
    cr_assert_eq(ops->read(d, NULL, back, out, 0, sizeof back, NULL, 0), MD_NONE);
    cr_expect_eq(memcmp(back, src, sizeof back), 0);
    cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
    ops->stream_destroy(d, s);
    md_sim_stats st = simt_stats();
    cr_expect_eq(st.common.copies, 9);
    cr_expect_eq(st.common.bytes_copied, 5 * 4096 + 3 * 64 + 4096);
    ops->free(d, out);
    simt_close();
  }
}

/* Work issued while a stream's earlier command runs joins the queue behind what is still
 * queued: nothing is dropped, and each stream runs in issue order. */
Test(unit_sched, work_issued_while_the_stream_runs_queues_behind_what_is_queued) {
  const int seeded[] = {0, 1};
  for (int v = 0; v < 2; v++) {
    md_backend *d = open_with(seeded[v], 21, 0, 0, NULL);
    const md_backend_ops *ops = simt_get()->ops;
    md_devptr out = simt_alloc(64), buf = simt_alloc(64);
    simt_gate g = SIMT_GATE_INIT;
    md_kernel_def k = simt_kernel("gate", simt_gate_kernel);
    k.user = &g;
    md_tensor t = simt_tensor(ops->kernel_ptr(d, out), 16);
    md_kernel_status st;
    md_stream *s;
    md_event *e;
    cr_assert_eq(ops->stream_create(d, &s), MD_NONE);
    cr_assert_eq(ops->event_create(d, &e), MD_NONE);
    const uint64_t one = 1, two = 2, three = 3;
    cr_assert_eq(simt_launch(s, &k, NULL, &t, &st), MD_NONE);
    cr_assert_eq(ops->write(d, s, buf, 0, &one, 8, NULL, 0), MD_NONE);
    cr_assert_eq(ops->write(d, s, buf, 8, &two, 8, NULL, 0), MD_NONE);
    cr_expect_eq(ops->event_wait(d, e, 0), MD_NONE, "never recorded");   /* seeded: flushes */
    pthread_mutex_lock(&g.lock);
    while (!g.entered) pthread_cond_wait(&g.cond, &g.lock);   /* the gate kernel runs now */
    pthread_mutex_unlock(&g.lock);
    cr_assert_eq(ops->write(d, s, buf, 16, &three, 8, NULL, 0), MD_NONE);
    cr_assert_eq(ops->event_record(d, e, s), MD_NONE);
    cr_expect_eq(ops->event_wait(d, e, 0), MD_MISSED_DEADLINE_TRANSIENT);
    simt_gate_open(&g);
    cr_expect_eq(ops->stream_sync(d, s, NULL, 0), MD_NONE);
    cr_expect_eq(ops->event_wait(d, e, 0), MD_NONE);
    uint64_t back[3] = {0, 0, 0};
    cr_assert_eq(ops->read(d, NULL, back, buf, 0, 24, NULL, 0), MD_NONE);
    cr_expect(back[0] == 1 && back[1] == 2 && back[2] == 3, "%" PRIu64 " %" PRIu64 " %" PRIu64, back[0], back[1],
              back[2]);
    md_sim_order_entry log[8];
    cr_expect_eq(md_sim_order(d, log, 8, NULL), 5);
    for (int i = 0; i < 5; i++) cr_expect_eq(log[i].index, (uint64_t)i + 1);
    cr_expect_eq(log[0].kind, 1);
    cr_expect_eq(log[4].kind, 2);
    ops->event_destroy(d, e);
    ops->stream_destroy(d, s);
    ops->free(d, out);
    ops->free(d, buf);
    simt_close();
  }
}
