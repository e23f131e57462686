/* fz_mutate.c - program-level mutations of fuzz inputs (fz_mutate.h). */
#include "fz_mutate.h"

#include <stdint.h>
#include <string.h>

#include "fz_codec.h"
#include "fz_model.h"

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static unsigned below(uint64_t *s, unsigned n) { return n ? (unsigned)(rnd(s) % n) : 0; }

/* Large: kept off the stack (the decoder's own state is as large). */
static mdc_fz_prog P, Q;
static uint8_t buf[1 << 16];

static int makes(const fz_call *k) { return mdc_fz_produces((mdc_call)k->call) != MDC_OBJ_NONE; }

/* Objects made by calls [0, k). */
static uint16_t objs_before(const mdc_fz_prog *p, unsigned k) {
  uint16_t o = 0;
  for (unsigned i = 0; i < k && i < p->n_calls; i++) o += makes(&p->calls[i]) != 0;
  return o;
}

/* The block (1-based) call position k lies strictly inside (after its first call), else 0. */
static unsigned inside_block(const mdc_fz_prog *p, unsigned k) {
  for (unsigned b = 0; b < p->n_blocks; b++)
    if (p->blocks[b].first < k && k < p->blocks[b].end) return b + 1;
  return 0;
}

/* Whether call k names an object numbered in [lo, hi). */
static int names_obj(const mdc_fz_prog *p, const fz_call *k, uint16_t lo, uint16_t hi) {
  const mdc_call_desc *d = &mdc_calls[k->call];
  for (unsigned j = 0; j < d->n_args; j++) {
    const fz_arg *a = &k->a[j];
    switch (mdc_args[d->args[j].id].type) {
      case MDC_T_HANDLE:
        if (a->ref.how == FZ_REF_OBJ && a->ref.obj >= lo && a->ref.obj < hi) return 1;
        break;
      case MDC_T_HANDLES:
        for (unsigned r = 0; r < a->refs.n && r < FZ_MAX_LIST; r++)
          if (a->refs.v[r].how == FZ_REF_OBJ && a->refs.v[r].obj >= lo && a->refs.v[r].obj < hi) return 1;
        break;
      case MDC_T_REQUEST:
        if (a->request < p->n_requests) {
          const fz_request *rq = &p->requests[a->request];
          for (unsigned j2 = 0; j2 < rq->n_pools && j2 < FZ_MAX_REQ_POOLS; j2++)
            if (rq->pools[j2].is_token && rq->pools[j2].token.how == FZ_REF_OBJ && rq->pools[j2].token.obj >= lo &&
                rq->pools[j2].token.obj < hi)
              return 1;
        }
        break;
      default: break;
    }
  }
  return 0;
}

static void shift_ref(fz_ref *r, uint16_t from, int delta) {
  if (r->how == FZ_REF_OBJ && r->obj != FZ_NOBODY && r->obj >= from) r->obj = (uint16_t)(r->obj + delta);
}

/* Every reference to an object numbered from `from` on moves by delta, as do the objects'
 * numbers (one object is made, or unmade, before them). */
static void shift_objs(mdc_fz_prog *p, uint16_t from, int delta) {
  for (unsigned i = 0; i < p->n_calls; i++) {
    fz_call *k = &p->calls[i];
    const mdc_call_desc *d = &mdc_calls[k->call];
    for (unsigned j = 0; j < d->n_args; j++) {
      fz_arg *a = &k->a[j];
      switch (mdc_args[d->args[j].id].type) {
        case MDC_T_HANDLE: shift_ref(&a->ref, from, delta); break;
        case MDC_T_HANDLES:
          for (unsigned r = 0; r < a->refs.n && r < FZ_MAX_LIST; r++) shift_ref(&a->refs.v[r], from, delta);
          break;
        default: break;
      }
    }
    if (makes(k) && k->obj >= from) k->obj = (uint16_t)(k->obj + delta);
  }
  for (unsigned r = 0; r < p->n_requests; r++)
    for (unsigned j = 0; j < p->requests[r].n_pools && j < FZ_MAX_REQ_POOLS; j++)
      if (p->requests[r].pools[j].is_token) shift_ref(&p->requests[r].pools[j].token, from, delta);
}

/* Models renumbered in the order calls first use them (the encoder names a model by its index
 * only after it wrote it whole). */
static void canon_models(mdc_fz_prog *p) {
  uint8_t map[FZ_MAX_MODELS];
  fz_model tmp[FZ_MAX_MODELS];
  uint8_t n = 0;
  memset(map, 0xFF, sizeof map);
  for (unsigned i = 0; i < p->n_calls; i++) {
    fz_call *k = &p->calls[i];
    int pos = mdc_fz_arg_pos((mdc_call)k->call, MDC_A_MODEL);
    if (pos < 0 || !k->a[pos].present || k->a[pos].model >= p->n_models) continue;
    uint8_t m = k->a[pos].model;
    if (map[m] == 0xFF) {
      map[m] = n;
      tmp[n++] = p->models[m];
    }
    k->a[pos].model = map[m];
  }
  memcpy(p->models, tmp, n * sizeof tmp[0]);
  p->n_models = n;
}

/* Moves call positions from `at` on by delta (+1: a call inserted at `at`, which joins a block it
 * lies strictly inside; -1: the call at `at` removed) in the object table and the blocks. */
static void shift_calls(mdc_fz_prog *p, unsigned at, int delta) {
  for (unsigned o = 0; o < p->n_objs; o++)
    if (p->objs[o].call >= at) p->objs[o].call = (uint16_t)(p->objs[o].call + delta);
  for (unsigned b = 0; b < p->n_blocks; b++) {
    fz_block *bl = &p->blocks[b];
    if (delta > 0) {
      if (bl->first >= at) bl->first = (uint16_t)(bl->first + delta);
      if (bl->end > at) bl->end = (uint16_t)(bl->end + delta);
    } else {
      if (bl->first > at) bl->first = (uint16_t)(bl->first + delta);
      if (bl->end > at) bl->end = (uint16_t)(bl->end + delta);
    }
  }
}

/* Drops blocks left empty, renumbering the calls' blocks. */
static void drop_empty_blocks(mdc_fz_prog *p) {
  for (unsigned b = 0; b < p->n_blocks;) {
    if (p->blocks[b].end > p->blocks[b].first) {
      b++;
      continue;
    }
    memmove(&p->blocks[b], &p->blocks[b + 1], (p->n_blocks - b - 1) * sizeof p->blocks[0]);
    p->n_blocks--;
    for (unsigned i = 0; i < p->n_calls; i++)
      if (p->calls[i].block > b + 1) p->calls[i].block--;
  }
}

/* Inserts call c at position k (its objects, blocks and tables already fit p). */
static void insert_call(mdc_fz_prog *p, unsigned k, const fz_call *c) {
  fz_call nc = *c;
  unsigned blk = inside_block(p, k);
  nc.block = (uint8_t)blk;
  if (blk) nc.lane = (uint8_t)(nc.lane % p->blocks[blk - 1].lanes);
  else nc.lane = 0, nc.pre = 0, nc.pre_arg = 0;
  if (makes(&nc)) {
    uint16_t o = objs_before(p, k);
    shift_objs(p, o, +1);
    memmove(&p->objs[o + 1], &p->objs[o], (p->n_objs - o) * sizeof p->objs[0]);
    p->n_objs++;
    shift_calls(p, k, +1);
    p->objs[o].kind = (uint8_t)mdc_fz_produces((mdc_call)nc.call);
    p->objs[o].call = (uint16_t)k;
    nc.obj = o;
  } else {
    shift_calls(p, k, +1);
  }
  memmove(&p->calls[k + 1], &p->calls[k], (p->n_calls - k) * sizeof p->calls[0]);
  p->calls[k] = nc;
  p->n_calls++;
}

/* Decodes one call at position k of p, in the state p's first k calls leave: p's prefix encoded,
 * then an op byte (`call` >= 0: that call; else drawn) and random bytes. The call is returned in
 * *nc with its new model and request moved into p's tables. -1: none decoded, or no room. */
static int decode_call_at(mdc_fz_target t, mdc_fz_prog *p, unsigned k, int call, uint64_t *rng, fz_call *nc) {
  memcpy(&Q, p, sizeof Q);
  Q.n_calls = (uint16_t)k;
  Q.n_objs = objs_before(p, k);
  unsigned nb = 0;
  for (; nb < Q.n_blocks && Q.blocks[nb].first < k; nb++)
    if (Q.blocks[nb].end > k) Q.blocks[nb].end = (uint16_t)k;
  Q.n_blocks = (uint8_t)nb;
  unsigned m0 = 0;   /* models the prefix uses: p's 0..m0-1 (p is in first-use order) */
  for (unsigned i = 0; i < k; i++) {
    int pos = mdc_fz_arg_pos((mdc_call)p->calls[i].call, MDC_A_MODEL);
    if (pos >= 0 && p->calls[i].a[pos].present && p->calls[i].a[pos].model + 1u > m0) m0 = p->calls[i].a[pos].model + 1u;
  }
  canon_models(&Q);
  size_t n = mdc_fz_encode(t, &Q, buf, sizeof buf - 96);
  if (!n) return -1;
  buf[n++] = (uint8_t)(call >= 0 ? FZ_OP_LIT + (unsigned)call : below(rng, FZ_OP_LIT));
  for (unsigned i = 0; i < 80; i++) buf[n++] = (uint8_t)rnd(rng);
  mdc_fz_decode(t, buf, n, &Q);
  if (Q.n_calls <= k || (call >= 0 && Q.calls[k].call != call)) return -1;
  *nc = Q.calls[k];
  const mdc_call_desc *d = &mdc_calls[nc->call];
  for (unsigned j = 0; j < d->n_args; j++) {
    fz_arg *a = &nc->a[j];
    switch (mdc_args[d->args[j].id].type) {
      case MDC_T_MODEL:
        if (a->present && a->model >= m0) {
          if (p->n_models == FZ_MAX_MODELS || a->model >= Q.n_models) return -1;
          p->models[p->n_models] = Q.models[a->model];
          a->model = p->n_models++;
        }
        break;
      case MDC_T_REQUEST:
        if (p->n_requests == FZ_MAX_REQUESTS || a->request >= Q.n_requests) return -1;
        p->requests[p->n_requests] = Q.requests[a->request];
        a->request = p->n_requests++;
        break;
      default: break;
    }
  }
  return 0;
}

static int mutate(mdc_fz_target t, mdc_fz_prog *p, fz_mutation m, uint64_t *rng) {
  fz_call nc;
  unsigned n = p->n_calls;
  switch (m) {
    case FZ_MUT_INSERT: {
      if (n >= FZ_MAX_CALLS) return -1;
      unsigned k = below(rng, n + 1);
      if (decode_call_at(t, p, k, -1, rng, &nc)) return -1;
      if (makes(&nc) && p->n_objs >= FZ_MAX_OBJS) return -1;
      insert_call(p, k, &nc);
      return 0;
    }
    case FZ_MUT_REDRAW: {
      if (!n) return -1;
      unsigned k = below(rng, n);
      if (decode_call_at(t, p, k, p->calls[k].call, rng, &nc)) return -1;
      nc.block = p->calls[k].block, nc.lane = p->calls[k].lane;
      nc.pre = p->calls[k].pre, nc.pre_arg = p->calls[k].pre_arg;
      nc.obj = p->calls[k].obj;
      p->calls[k] = nc;
      return 0;
    }
    case FZ_MUT_DELETE: {
      if (!n) return -1;
      unsigned k = below(rng, n);
      if (makes(&p->calls[k])) return -1;
      memmove(&p->calls[k], &p->calls[k + 1], (n - k - 1) * sizeof p->calls[0]);
      p->n_calls--;
      shift_calls(p, k, -1);
      drop_empty_blocks(p);
      return 0;
    }
    case FZ_MUT_DUPLICATE: {
      if (!n || n >= FZ_MAX_CALLS) return -1;
      unsigned j = below(rng, n), k = j + 1 + below(rng, n - j);
      nc = p->calls[j];
      if (makes(&nc) && p->n_objs >= FZ_MAX_OBJS) return -1;
      /* half the time the same call with arguments drawn where it lands: a second copy_from
       * with other dims, a second wait on another event */
      fz_call again;
      if (below(rng, 2) && decode_call_at(t, p, k, nc.call, rng, &again) == 0) nc = again;
      insert_call(p, k, &nc);
      return 0;
    }
    case FZ_MUT_SWAP: {
      if (n < 2) return -1;
      unsigned k = below(rng, n - 1);
      fz_call *a = &p->calls[k], *b = &p->calls[k + 1];
      if (makes(a) || makes(b) || a->block != b->block) return -1;
      nc = *a, *a = *b, *b = nc;
      return 0;
    }
    case FZ_MUT_WRAP: {
      if (t != FZ_CONCURRENCY || n < 2 || p->n_blocks >= FZ_MAX_BLOCKS) return -1;
      unsigned len = 2 + below(rng, FZ_MAX_LANES - 1), k = below(rng, n - 1);
      if (k + len > n) len = n - k;
      /* a block's calls see only the objects made before it (fz_decode.c) */
      uint16_t lo = objs_before(p, k), hi = objs_before(p, k + len);
      for (unsigned i = k; i < k + len; i++)
        if (p->calls[i].block || names_obj(p, &p->calls[i], lo, hi)) return -1;
      unsigned b = 0;
      while (b < p->n_blocks && p->blocks[b].first < k) b++;
      memmove(&p->blocks[b + 1], &p->blocks[b], (p->n_blocks - b) * sizeof p->blocks[0]);
      p->n_blocks++;
      for (unsigned i = 0; i < n; i++)
        if (p->calls[i].block > b) p->calls[i].block++;
      uint8_t lanes = (uint8_t)(2 + below(rng, FZ_MAX_LANES - 1));
      p->blocks[b] = (fz_block){.lanes = lanes, .first = (uint16_t)k, .end = (uint16_t)(k + len)};
      for (unsigned i = k; i < k + len; i++) {
        p->calls[i].block = (uint8_t)(b + 1);
        p->calls[i].lane = (uint8_t)((i - k) % lanes);
        p->calls[i].pre = 0, p->calls[i].pre_arg = 0;
      }
      return 0;
    }
    case FZ_MUT_UNWRAP: {
      if (t != FZ_CONCURRENCY || !p->n_blocks) return -1;
      unsigned b = below(rng, p->n_blocks);
      for (unsigned i = p->blocks[b].first; i < p->blocks[b].end; i++)
        p->calls[i].block = 0, p->calls[i].lane = 0, p->calls[i].pre = 0, p->calls[i].pre_arg = 0;
      p->blocks[b].end = p->blocks[b].first;
      drop_empty_blocks(p);
      return 0;
    }
    case FZ_MUT_STALL: {
      /* hold an execute_async (the stall counts executions, sync ones too; a sync one is never
       * held), or none */
      if (t != FZ_CONCURRENCY) return -1;
      unsigned ex = 0, pick[FZ_MAX_STALL], np = 0;
      for (unsigned i = 0; i < n && ex < FZ_MAX_STALL; i++) {
        if (p->calls[i].call != MDC_CALL_EXECUTE && p->calls[i].call != MDC_CALL_EXECUTE_ASYNC) continue;
        ex++;
        if (p->calls[i].call == MDC_CALL_EXECUTE_ASYNC) pick[np++] = ex;
      }
      uint8_t s = below(rng, 5) == 0 || !np ? 0 : (uint8_t)pick[below(rng, np)];
      if (s == p->stall) return -1;
      p->stall = s;
      return 0;
    }
    case FZ_MUT_COUNT: break;
  }
  return -1;
}

size_t mdc_fz_mutate(mdc_fz_target t, const uint8_t *in, size_t n, fz_mutation m, uint64_t *rng, uint8_t *out,
                     size_t cap) {
  /* weights: insertion first (what byte mutations do worst), then re-drawn arguments */
  static const uint8_t weight[FZ_MUT_COUNT] = {[FZ_MUT_INSERT] = 30, [FZ_MUT_REDRAW] = 20, [FZ_MUT_DELETE] = 15,
                                               [FZ_MUT_DUPLICATE] = 10, [FZ_MUT_SWAP] = 5, [FZ_MUT_WRAP] = 8,
                                               [FZ_MUT_UNWRAP] = 4, [FZ_MUT_STALL] = 8};
  /* AFL++ mutates one queue entry many times in a row: its program is decoded once */
  static mdc_fz_prog last;
  static uint8_t last_in[1 << 16];
  static size_t last_n = SIZE_MAX;
  static mdc_fz_target last_t;
  if (n <= sizeof last_in && n == last_n && t == last_t && !memcmp(in, last_in, n)) {
    memcpy(&P, &last, sizeof P);
  } else {
    mdc_fz_decode(t, in, n, &P);
    if (n <= sizeof last_in) {
      memcpy(&last, &P, sizeof last);
      memcpy(last_in, in, n);
      last_n = n, last_t = t;
    }
  }
  if (m < FZ_MUT_COUNT) {
    if (mutate(t, &P, m, rng)) return 0;
    canon_models(&P);
    return mdc_fz_encode(t, &P, out, cap);
  }
  /* drawn: one mutation, then another with probability 1/2, up to 4 (a held execution and the
   * free under it are two steps, each worthless alone to coverage now and then) */
  unsigned total = 0, applied = 0;
  for (unsigned i = 0; i < FZ_MUT_COUNT; i++) total += weight[i];
  for (unsigned tries = 0; tries < 16 && applied < 4; tries++) {
    unsigned x = below(rng, total);
    m = 0;
    while (x >= weight[m]) x -= weight[m], m++;
    if (mutate(t, &P, m, rng)) continue;
    canon_models(&P);
    applied++;
    if (below(rng, 2)) break;
  }
  return applied ? mdc_fz_encode(t, &P, out, cap) : 0;
}
