/* bench_token.c - benchmark 1: the per-call token validation of copy/execute, at 1, 1K and
 * 1M live buffers.
 *
 * One validation is what md__copy_from / check_arg do for a token: md__handle_get(token,
 * BUFFER) (slot, generation and the 32-bit MAC are one 64-bit compare against the value the
 * entry issued, plus a reference taken unless zero and the compare repeated), the owner
 * compare, md__buffer_has_role, and md__handle_put.
 *
 * Two access patterns. The target rows validate a request's working set: 8 tokens (spread over
 * the live ones) validated again and again, as a stream of executions does, so the figure is
 * the cost of the check itself with N buffers live — whether it stays flat as N grows (no
 * search, no collisions). The "random" rows draw every token at random among all live ones:
 * at 1M the 64 MB handle table does not fit in any cache, so they measure a memory miss per
 * validation (reported for information). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "objects_int.h"

#define BATCH 4096u

/* Validates seq[0..n) as copy_from would; returns how many passed. */
static size_t validate(md_device *d, md_handle client, md_handle prepared, const uint64_t *seq, size_t n) {
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) {
    md__hentry *e = md__handle_get(&d->ht, seq[i], MD__KIND_BUFFER);
    if (!e) continue;
    ok += e->owner == client && md__buffer_has_role(e, prepared, 0, 0);
    md__handle_put(&d->ht, e);
  }
  return ok;
}

/* The handle-table part alone (get + owner + put, no role check: the buffer object is not
 * touched), to show what the role check's second memory access costs. */
static size_t lookup_only(md_device *d, md_handle client, md_handle prepared, const uint64_t *seq, size_t n) {
  (void)prepared;
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) {
    md__hentry *e = md__handle_get(&d->ht, seq[i], MD__KIND_BUFFER);
    if (!e) continue;
    ok += e->owner == client;
    md__handle_put(&d->ht, e);
  }
  return ok;
}

typedef size_t (*check_fn)(md_device *, md_handle, md_handle, const uint64_t *, size_t);

/* Median ns per validation over `batches` batches of tokens among the first `live`: a fixed
 * working set of `ws` of them, or (ws 0) fresh random ones for every batch. */
static int measure(mdb_pop *p, size_t live, size_t ws, unsigned batches, check_fn fn, double *ns_out) {
  md_device *d = p->env.dev;
  double *v = malloc(batches * sizeof *v);
  if (!v) {
    mdb_fail("token", "out of memory");
    return -1;
  }
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ live;
  uint64_t *seq = p->seq;
  uint64_t set[8];
  if (ws > 8) ws = 8;
  for (size_t i = 0; i < ws; i++) set[i] = p->tokens[mdb_rand(&rng) % live];
  for (unsigned b = 0; b < batches + 2; b++) {
    for (size_t i = 0; i < BATCH; i++) seq[i] = ws ? set[i % ws] : p->tokens[mdb_rand(&rng) % live];
    uint64_t t0 = mdb_now_ns();
    size_t ok = fn(d, p->env.client, p->prepared, seq, BATCH);
    uint64_t dt = mdb_now_ns() - t0;
    if (ok != BATCH) {
      free(v);
      mdb_fail("token", "%zu of %u live tokens failed validation", BATCH - ok, BATCH);
      return -1;
    }
    if (b >= 2) v[b - 2] = (double)dt / BATCH;   /* two warm-up batches */
  }
  *ns_out = mdb_median(v, batches);
  free(v);
  return 0;
}

int mdb_bench_token(const mdb_opts *o) {
  mdb_pop *p = mdb_pop_get("token");
  if (!p) return -1;
  static const size_t sizes[] = {1, 1024, 1u << 20};
  static const char *const names[] = {"token_validate@1", "token_validate@1K", "token_validate@1M"};
  unsigned batches = o->quick ? 64 : 256;
  double ns[3] = {0};
  for (int i = 0; i < 3; i++) {
    uint64_t g0 = mdb_now_ns();
    if (mdb_pop_grow(p, "token", sizes[i]) != 0) return -1;
    double grow_s = (double)(mdb_now_ns() - g0) / 1e9;
    size_t live = p->n < sizes[i] ? p->n : sizes[i];
    int r = measure(p, live, 8, batches, validate, &ns[i]);
    if (r) return -1;
    if (i > 0) {
      double rnd;
      if (measure(p, live, 0, batches, validate, &rnd)) return -1;
      mdb_row(i == 1 ? "token_validate_random@1K" : "token_validate_random@1M", "ns", rnd, ns[0], rnd / ns[0],
              "(memory-bound)", MDB_INFO, "every token random among %zu live: a cache miss each at 1M", live);
    }
    bool fast = ns[i] <= 50.0;
    if (i == 0) {
      mdb_row(names[i], "ns", ns[i], NAN, NAN, "<= 50 ns", fast ? MDB_PASS : MDB_MISS,
              "working set of 8 tokens; median of %u batches of %u", batches, BATCH);
    } else {
      double ratio = ns[i] / ns[0];
      bool flat = i < 2 || ratio <= 1.5;
      mdb_row(names[i], "ns", ns[i], ns[0], ratio, i == 2 ? "<= 50 ns, 1M/1 <= 1.5x" : "<= 50 ns",
              fast && flat ? MDB_PASS : MDB_MISS, "baseline: @1; %zu live (allocated in %.2f s)", p->n,
              grow_s);
    }
  }
  /* Where the time goes at 1M: the same loop without the role check. */
  double lk1, lkm;
  if (measure(p, 1, 0, batches, lookup_only, &lk1) || measure(p, p->n, 0, batches, lookup_only, &lkm)) return -1;
  mdb_row("token_lookup_only@1M", "ns", lkm, lk1, lkm / lk1, "(diagnostic)", MDB_INFO,
          "get+owner+put, no role check; baseline: the same @1");
  return 0;
}
