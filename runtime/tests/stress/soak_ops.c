/* soak_ops.c - the stress phase of md_soak: N threads of seeded random operations over objects
 * of several clients shared by every thread (soak_table.h), so that frees race uses and
 * close_client races creations. Each status is judged against SPEC for what the thread knows
 * (a watch: was an object dead before the call, live throughout, or raced); each leak report
 * is reconciled exactly; canary buffers of a client no racing call may touch are checked with
 * exact values; executions of known inputs must produce exactly their sums.
 *
 * Every call is one of the driver's entry points; the helpers of runtime/tests/support.c build
 * the models, memfd pools and requests. Nothing sleeps and nothing is timed (a deadline wait
 * may always miss). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"
#include "soak_table.h"
#include "support.h"

#define NCANARY 4
#define NGRAVES 16
#define KIND_CLIENT SK_KINDS /* a grave's kind for a closed client */

static const uint32_t D23[2] = {2, 3};
static const char *const live_names[] = {"live throughout", "raced a removal or close", "dead before the call"};

atomic_uint_fast64_t soak_closes_reconciled;

/* A handle known to be dead: its removal (or its client's close) returned NONE. */
typedef struct grave {
  int kind;
  md_handle client, h;
} grave;

typedef struct tctx {
  int id;
  uint64_t rng, opno;
  soak_stats st;
  grave graves[NGRAVES];
  unsigned n_graves, next_grave;
  pthread_t th;
} tctx;

static struct {
  const soak_opts *o;
  soak_slot *slots;
  unsigned n_slots;
  md_handle canary_client, canary_model;
  md_token canary_tok[NCANARY];
  float canary_val[NCANARY][SOAK_N];
  pthread_barrier_t start;
  struct timespec deadline;
} S;

/* ---- small helpers ---- */

static float rnd_val(tctx *t) { return (float)((int)soak_below(&t->rng, 1001) - 500); }

static void rnd_vals(tctx *t, float *v) {
  for (unsigned i = 0; i < SOAK_N; i++) v[i] = rnd_val(t);
}

/* The calling thread's last_error, fetched right after the call it explains. */
static const char *lasterr(tctx *t) {
  t->st.calls[SOAK_EP_LAST_ERROR]++;
  return soak_drv->last_error(soak_dev);
}

static void bury(tctx *t, int kind, md_handle client, md_handle h) {
  grave *g = &t->graves[t->next_grave];
  g->kind = kind;
  g->client = client;
  g->h = h;
  t->next_grave = (t->next_grave + 1) % NGRAVES;
  if (t->n_graves < NGRAVES) t->n_graves++;
}

/* Judges st against allowed, what a call whose objects all stay live may return; a raced call
 * may also return INVALID_ARGUMENT, a call on an object dead before it only that. Fetches
 * last_error, so it comes right after the call. */
static bool judge(tctx *t, const char *op, md_status st, enum soak_live live, uint32_t allowed,
                  const char *what) {
  if (live == SOAK_RACED) {
    allowed |= SOAK_INVAL_BIT;
    t->st.raced++;
  }
  if (live == SOAK_DEAD) allowed = SOAK_INVAL_BIT;
  /* Every failure has a message: last_error is never NULL (SPEC 1). */
  const char *msg = st == MD_NONE ? NULL : lasterr(t);
  if (st != MD_NONE && !msg) soak_fail(op, t->id, t->opno, (int)st, NULL, "last_error returned NULL");
  if (soak_sbit(st) & allowed) return true;
  char set[160];
  soak_fail(op, t->id, t->opno, (int)st, msg, "%s; allowed %s (objects %s)", what,
            soak_set_str(allowed, set, sizeof set), live_names[live]);
  return false;
}

/* A creating call returns NONE with a handle, or fails with handle 0. */
static void check_handle(tctx *t, const char *op, md_status st, md_handle h) {

  if (st == MD_NONE && h == 0) soak_fail(op, t->id, t->opno, (int)st, NULL, "returned NONE with handle 0");
  if (st != MD_NONE && h != 0)
    soak_fail(op, t->id, t->opno, (int)st, NULL, "failed but wrote handle 0x%016llx (want 0)",
              (unsigned long long)h);
}

/* Counts a creating call that raced its client's close (the contract's either/or). */
static void count_create_race(tctx *t, const soak_watch *w, md_status st) {
  if (!soak_watch_close_raced(w)) return;
  t->st.create_races++;
  if (st == MD_NONE) t->st.create_races_none++;
}

static void check_values(tctx *t, const char *op, const float *got, const float *want, const char *what) {
  t->st.value_checks++;
  for (unsigned i = 0; i < SOAK_N; i++) {
    if (got[i] != want[i]) {
      soak_fail(op, t->id, t->opno, MD_NONE, NULL, "%s: value[%u] = %g, want %g", what, i,
                (double)got[i], (double)want[i]);
      return;
    }
  }
}

static bool check_shape(tctx *t, const char *op, const md_output_shape *sh) {
  if (sh->rank == 2 && sh->dims[0] == 2 && sh->dims[1] == 3 && sh->is_sufficient) return true;
  soak_fail(op, t->id, t->opno, MD_NONE, NULL, "output shape rank %u [%u,%u] sufficient %u, want [2,3] sufficient",
            sh->rank, sh->dims[0], sh->dims[1], sh->is_sufficient);
  return false;
}

static bool pread_vals(int fd, float *out) {
  return pread(fd, out, SOAK_BYTES, 0) == (ssize_t)SOAK_BYTES;
}

static soak_inc *acquire_random_slot(tctx *t) {
  return soak_slot_acquire(&S.slots[soak_below(&t->rng, S.n_slots)]);
}

static bool same_owner(const soak_entry *e, const void *owner) { return e->owner == owner; }
static bool same_model_other(const soak_entry *e, const void *rd) {
  const soak_entry *r = rd;
  return e != r && e->model == r->model;
}

/* ---- clients ---- */

static bool op_open(tctx *t) {
  unsigned slot = soak_below(&t->rng, S.n_slots);
  if (!soak_slot_claim(&S.slots[slot])) return false;
  md_handle c = 0x5151515151515151ull;
  t->st.calls[SOAK_EP_OPEN_CLIENT]++;
  md_status st = soak_drv->open_client(soak_dev, &c);
  judge(t, "open_client", st, SOAK_LIVE, SOAK_NONE_BIT, "opening a client");
  check_handle(t, "open_client", st, c);
  if (st == MD_NONE && c) soak_slot_attach(&S.slots[slot], slot, c);
  else soak_slot_unclaim(&S.slots[slot]);
  return true;
}

/* close_client of the client in the slot (a racing second close of the same client is allowed
 * INVALID_ARGUMENT; exactly one must return NONE, which the reconciliation checks). */
static bool close_slot(tctx *t, unsigned slot) {
  soak_inc *c = soak_slot_acquire(&S.slots[slot]);
  if (!c) return false;
  int s0 = INC_OPEN;
  atomic_compare_exchange_strong(&c->state, &s0, INC_CLOSING);
  md_leak_report rep;
  memset(&rep, 0xff, sizeof rep);
  t->st.calls[SOAK_EP_CLOSE_CLIENT]++;
  md_status st = soak_drv->close_client(soak_dev, c->client, &rep);
  uint32_t allowed = s0 == INC_CLOSED ? SOAK_INVAL_BIT : SOAK_NONE_BIT | SOAK_INVAL_BIT;
  judge(t, "close_client", st, SOAK_LIVE, allowed, "closing a client");
  if (st == MD_NONE) {
    if (atomic_fetch_add(&c->close_ok, 1) == 0) {
      c->leaks = rep;
      c->closer = t->id;
      c->closer_op = t->opno;
      atomic_store(&c->state, INC_CLOSED);
      bury(t, KIND_CLIENT, c->client, c->client);
      soak_slot_detach(&S.slots[slot], c, t->id, t->opno);
    }
  } else if (t->id < 0 && s0 != INC_CLOSED) {
    /* The final close (nothing races it) failed: let the incarnation go anyway, so that its
     * reconciliation reports that no close returned NONE. */
    atomic_store(&c->state, INC_CLOSED);
    soak_slot_detach(&S.slots[slot], c, t->id, t->opno);
  }
  soak_inc_call_put(c, t->id, t->opno);
  return true;
}

static bool op_close(tctx *t) { return close_slot(t, soak_below(&t->rng, S.n_slots)); }

/* ---- prepared models ---- */

static bool op_prepare(tctx *t) {
  soak_inc *c = acquire_random_slot(t);
  if (!c) return op_open(t);
  soak_entry *e = soak_claim(&soak_tables[SK_MODEL], &t->rng);
  if (!e) {
    soak_inc_call_put(c, t->id, t->opno);
    return false;
  }
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_inc(&w, c);
  mdt_model b;
  const md_model *m = mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0);
  md_handle p = 0x5151515151515151ull;
  t->st.calls[SOAK_EP_PREPARE]++;
  md_status st = soak_drv->prepare_model(soak_dev, c->client, m, &p);
  judge(t, "prepare_model", st, soak_watch_end(&w), SOAK_NONE_BIT, "ADD [2,3]");
  check_handle(t, "prepare_model", st, p);
  count_create_race(t, &w, st);
  if (st == MD_NONE && p) {
    atomic_fetch_add(&c->made[SK_MODEL], 1);
    soak_publish(e, c, p);
  } else {
    soak_unclaim(e);
  }
  soak_watch_release(&w, t->id, t->opno);
  soak_inc_call_put(c, t->id, t->opno);
  return true;
}

/* A removal of e by `call` (release, free, unregister): NONE once, INVALID_ARGUMENT after. */
static bool op_remove(tctx *t, int kind, int ep, const char *name) {
  soak_entry *e = soak_pick(&soak_tables[kind], &t->rng, NULL, NULL);
  if (!e) return false;
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_obj(&w, e, true);
  soak_remove_begin(e);
  md_handle client = e->owner->client;
  md_status st;
  t->st.calls[ep]++;
  if (kind == SK_MODEL) st = soak_drv->release_prepared_model(soak_dev, client, e->h);
  else if (kind == SK_BUFFER) st = soak_drv->free_buffer(soak_dev, client, e->h);
  else st = soak_drv->unregister_memory(soak_dev, client, e->h);
  judge(t, name, st, soak_watch_end(&w), SOAK_NONE_BIT, "removing a live object");
  bool first = soak_remove_end(e, st == MD_NONE);
  if (st == MD_NONE) {
    if (!first)
      soak_fail(name, t->id, t->opno, (int)st, NULL, "handle 0x%016llx removed twice: a second call returned NONE",
                (unsigned long long)e->h);
    else atomic_fetch_add(&e->owner->removed[kind], 1);
    soak_entry_kill(e);
    bury(t, kind, client, e->h);
  }
  soak_watch_release(&w, t->id, t->opno);
  soak_entry_put(e);
  return true;
}

static bool op_release(tctx *t) { return op_remove(t, SK_MODEL, SOAK_EP_RELEASE, "release_prepared_model"); }
static bool op_free(tctx *t) { return op_remove(t, SK_BUFFER, SOAK_EP_FREE, "free_buffer"); }
static bool op_unregister(tctx *t) {
  if (!soak_has_registered) return false;
  return op_remove(t, SK_POOL, SOAK_EP_UNREGISTER, "unregister_memory");
}

/* ---- buffers ---- */

static bool op_allocate(tctx *t) {
  soak_entry *m = soak_pick(&soak_tables[SK_MODEL], &t->rng, NULL, NULL);
  if (!m) return false;
  soak_entry *e = soak_claim(&soak_tables[SK_BUFFER], &t->rng);
  if (!e) {
    soak_entry_put(m);
    return false;
  }
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_obj(&w, m, false);
  soak_inc *c = m->owner;
  /* Roles input 0 and output 0 of the model: the buffer can be read and written by executions. */
  md_buffer_role in_role = {0, 0, 1.0f}, out_role = {0, 0, 1.0f};
  bool known = soak_below(&t->rng, 4) != 0;   /* else rank 0: the dims come from the roles */
  md_buffer_desc desc = {known ? 2u : 0u, known ? D23 : NULL};
  md_token tok = 0x5151515151515151ull;
  t->st.calls[SOAK_EP_ALLOCATE]++;
  md_status st = soak_drv->allocate(soak_dev, c->client, &desc, &m->h, 1, &in_role, 1, &out_role, 1, &tok);
  judge(t, "allocate", st, soak_watch_end(&w), SOAK_NONE_BIT, "[2,3] for input 0 and output 0");
  check_handle(t, "allocate", st, tok);
  count_create_race(t, &w, st);
  if (st == MD_NONE && tok) {
    atomic_fetch_add(&c->made[SK_BUFFER], 1);
    e->model = m;   /* the buffer's entry keeps our reference on its model's */
    rnd_vals(t, e->value);
    soak_publish(e, c, tok);
  } else {
    soak_unclaim(e);
    soak_entry_put(m);
  }
  soak_watch_release(&w, t->id, t->opno);
  return true;
}

static bool op_copy_from(tctx *t) {
  soak_entry *b = soak_pick(&soak_tables[SK_BUFFER], &t->rng, NULL, NULL);
  if (!b) return false;
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_obj(&w, b, false);
  int fd = mdt_memfd(b->value, SOAK_BYTES);
  md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
  bool dims = soak_below(&t->rng, 2);
  soak_wticket tk;
  soak_buf_write_begin(b, &tk);
  t->st.calls[SOAK_EP_COPY_FROM]++;
  md_status st = soak_drv->copy_from(soak_dev, b->owner->client, b->h, &mem, dims ? 2 : 0, dims ? D23 : NULL);
  enum soak_live live = soak_watch_end(&w);
  bool overlapped = soak_buf_write_end(b, &tk, st == MD_NONE, false);
  judge(t, "copy_from", st, live, SOAK_NONE_BIT | (overlapped ? SOAK_GF_BIT : 0),
        overlapped ? "write racing another write" : "write of a live buffer");
  close(fd);
  soak_watch_release(&w, t->id, t->opno);
  soak_entry_put(b);
  return true;
}

static bool op_copy_to(tctx *t) {
  soak_entry *b = soak_pick(&soak_tables[SK_BUFFER], &t->rng, NULL, NULL);
  if (!b) return false;
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_obj(&w, b, false);
  int fd = mdt_memfd(NULL, SOAK_BYTES);
  md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
  soak_bsnap s0 = soak_buf_snap(b);
  t->st.calls[SOAK_EP_COPY_TO]++;
  md_status st = soak_drv->copy_to(soak_dev, b->owner->client, b->h, &mem);
  soak_bsnap s1 = soak_buf_snap(b);
  bool clean = soak_buf_clean(&s0, &s1);
  bool strict = clean && s0.init;
  judge(t, "copy_to", st, soak_watch_end(&w), SOAK_NONE_BIT | (strict ? 0 : SOAK_GF_BIT),
        strict ? "read of an initialized buffer no write overlapped" : "read of a buffer maybe uninitialized");
  if (st == MD_NONE && clean && !s1.tainted) {
    float got[SOAK_N];
    if (pread_vals(fd, got)) check_values(t, "copy_to", got, b->value, "the buffer's content");
  }
  close(fd);
  soak_watch_release(&w, t->id, t->opno);
  soak_entry_put(b);
  return true;
}

/* ---- executions ---- */

enum xform { XF_POOLS, XF_REGISTERED, XF_TOKEN_IN, XF_TOKEN_OUT, XF_TOKEN_INOUT, XF_COUNT };
static const char *const xform_names[XF_COUNT] = {"pools", "registered pool", "token input",
                                                  "token output", "token input and output"};

/* One execution of ADD [2,3]: its objects (referenced), request and expected output. */
typedef struct xplan {
  int form;
  soak_entry *model, *pool, *rd, *wr;
  mdt_request r;
  uint32_t out_pool;          /* the request pool of a pool output (forms without wr) */
  float expect[SOAK_N];
  soak_bsnap rd0;
  soak_wticket wt;
  soak_watch w;
} xplan;

static void plan_drop(xplan *x) {
  soak_entry *held[4] = {x->model, x->pool, x->rd, x->wr};
  for (int i = 0; i < 4; i++)
    if (held[i]) soak_entry_put(held[i]);
  x->model = x->pool = x->rd = x->wr = NULL;
}

/* The model entry a buffer has roles for, referenced (its buffer's reference keeps it READY). */
static soak_entry *model_of(soak_entry *b) {
  if (!soak_entry_get(b->model)) abort();
  return b->model;
}

/* Picks the objects of a random form (falling back to simpler forms when the tables lack
 * them) and builds the request. false: nothing to execute with. */
static bool plan_build(tctx *t, xplan *x) {
  memset(x, 0, sizeof *x);
  x->form = (int)soak_below(&t->rng, XF_COUNT);
  if (x->form == XF_REGISTERED && !soak_has_registered) x->form = XF_POOLS;
  if (x->form == XF_REGISTERED) {
    x->pool = soak_pick(&soak_tables[SK_POOL], &t->rng, NULL, NULL);
    if (x->pool) x->model = soak_pick(&soak_tables[SK_MODEL], &t->rng, same_owner, x->pool->owner);
    if (!x->model) {
      plan_drop(x);
      x->form = XF_POOLS;
    }
  }
  if (x->form == XF_TOKEN_IN || x->form == XF_TOKEN_INOUT) {
    x->rd = soak_pick(&soak_tables[SK_BUFFER], &t->rng, NULL, NULL);
    if (!x->rd) return false;
    x->model = model_of(x->rd);
    if (x->form == XF_TOKEN_INOUT) {
      x->wr = soak_pick(&soak_tables[SK_BUFFER], &t->rng, same_model_other, x->rd);
      if (!x->wr) x->form = XF_TOKEN_IN;
    }
  }
  if (x->form == XF_TOKEN_OUT) {
    x->wr = soak_pick(&soak_tables[SK_BUFFER], &t->rng, NULL, NULL);
    if (!x->wr) return false;
    x->model = model_of(x->wr);
  }
  if (x->form == XF_POOLS) {
    x->model = soak_pick(&soak_tables[SK_MODEL], &t->rng, NULL, NULL);
    if (!x->model) return false;
  }

  mdt_req_init(&x->r);
  float a[SOAK_N], b[SOAK_N];
  rnd_vals(t, b);
  switch (x->form) {
    case XF_POOLS:
      rnd_vals(t, a);
      mdt_req_in_data(&x->r, a, SOAK_BYTES, 0, NULL);
      mdt_req_in_data(&x->r, b, SOAK_BYTES, 0, NULL);
      for (unsigned i = 0; i < SOAK_N; i++) x->expect[i] = a[i] + b[i];
      break;
    case XF_REGISTERED: {
      uint32_t p = mdt_req_pool_registered(&x->r, x->pool->h);
      mdt_req_in_arg(&x->r, p, 0, SOAK_BYTES, 0, NULL);
      mdt_req_in_arg(&x->r, p, SOAK_BYTES, SOAK_BYTES, 2, D23);
      memcpy(x->expect, x->pool->sum, sizeof x->expect);
      break;
    }
    case XF_TOKEN_IN:
      mdt_req_in_token(&x->r, x->rd->h, 0, NULL);
      mdt_req_in_data(&x->r, b, SOAK_BYTES, 0, NULL);
      for (unsigned i = 0; i < SOAK_N; i++) x->expect[i] = x->rd->value[i] + b[i];
      break;
    case XF_TOKEN_OUT:   /* (value - b) + b == value: every write of a buffer writes its value */
      for (unsigned i = 0; i < SOAK_N; i++) a[i] = x->wr->value[i] - b[i];
      mdt_req_in_data(&x->r, a, SOAK_BYTES, 0, NULL);
      mdt_req_in_data(&x->r, b, SOAK_BYTES, 0, NULL);
      break;
    case XF_TOKEN_INOUT:
      for (unsigned i = 0; i < SOAK_N; i++) a[i] = x->wr->value[i] - x->rd->value[i];
      mdt_req_in_token(&x->r, x->rd->h, 2, D23);
      mdt_req_in_data(&x->r, a, SOAK_BYTES, 0, NULL);
      break;
  }
  if (x->wr) {
    mdt_req_out_token(&x->r, x->wr->h, 0, NULL);
  } else {
    mdt_req_out_pool(&x->r, SOAK_BYTES, 0, NULL);
    x->out_pool = x->r.out[0].pool;
  }

  soak_watch_init(&x->w);
  soak_watch_obj(&x->w, x->model, false);
  if (x->pool) soak_watch_obj(&x->w, x->pool, false);
  if (x->rd) soak_watch_obj(&x->w, x->rd, false);
  if (x->wr) soak_watch_obj(&x->w, x->wr, false);
  return true;
}

/* The read of rd between rd0 and now overlapped no write and read no tainted value. */
static bool read_exact(soak_entry *rd, const soak_bsnap *rd0) {
  soak_bsnap s1 = soak_buf_snap(rd);
  return soak_buf_clean(rd0, &s1) && !s1.tainted;
}

static bool op_execute(tctx *t) {
  xplan x;
  if (!plan_build(t, &x)) {
    plan_drop(&x);
    return false;
  }
  if (x.rd) x.rd0 = soak_buf_snap(x.rd);
  if (x.wr) soak_buf_write_begin(x.wr, &x.wt);
  md_output_shape sh[1];
  md_timing tm;
  memset(sh, 0xab, sizeof sh);
  t->st.calls[SOAK_EP_EXECUTE]++;
  md_status st = soak_drv->execute(soak_dev, x.model->owner->client, x.model->h, mdt_req(&x.r), sh, 1, &tm);
  enum soak_live live = soak_watch_end(&x.w);
  uint32_t allowed = SOAK_NONE_BIT;
  bool exact = true;
  if (x.rd) {
    soak_bsnap s1 = soak_buf_snap(x.rd);
    if (!(soak_buf_clean(&x.rd0, &s1) && x.rd0.init)) allowed |= SOAK_GF_BIT;
    exact = read_exact(x.rd, &x.rd0);
  }
  if (x.wr && soak_buf_write_end(x.wr, &x.wt, st == MD_NONE, x.rd && !exact)) allowed |= SOAK_GF_BIT;
  char what[96];
  snprintf(what, sizeof what, "ADD on %s", xform_names[x.form]);
  judge(t, "execute", st, live, allowed, what);
  if (st == MD_NONE && check_shape(t, "execute", &sh[0]) && !x.wr && exact) {
    float got[SOAK_N];
    mdt_req_read_out(&x.r, 0, got, SOAK_BYTES);
    check_values(t, "execute", got, x.expect, what);
  }
  mdt_req_fini(&x.r);
  soak_watch_release(&x.w, t->id, t->opno);
  plan_drop(&x);
  return true;
}

static bool op_execute_async(tctx *t) {
  soak_entry *ev = soak_claim(&soak_tables[SK_EVENT], &t->rng);
  if (!ev) return false;
  xplan x;
  if (!plan_build(t, &x)) {
    plan_drop(&x);
    soak_unclaim(ev);
    return false;
  }
  if (x.rd) x.rd0 = soak_buf_snap(x.rd);
  if (x.wr) soak_buf_write_begin(x.wr, &x.wt);
  soak_inc *c = x.model->owner;
  md_handle h = 0x5151515151515151ull;
  t->st.calls[SOAK_EP_EXECUTE_ASYNC]++;
  md_status st = soak_drv->execute_async(soak_dev, c->client, x.model->h, mdt_req(&x.r), &h);
  enum soak_live live = soak_watch_end(&x.w);
  uint32_t allowed = SOAK_NONE_BIT;
  if (x.rd) {   /* validation checks the input is initialized */
    soak_bsnap s1 = soak_buf_snap(x.rd);
    if (!(soak_buf_clean(&x.rd0, &s1) && x.rd0.init)) allowed |= SOAK_GF_BIT;
  }
  char what[96];
  snprintf(what, sizeof what, "ADD on %s", xform_names[x.form]);
  judge(t, "execute_async", st, live, allowed, what);
  check_handle(t, "execute_async", st, h);
  count_create_race(t, &x.w, st);
  if (st == MD_NONE && h) {
    atomic_fetch_add(&c->made[SK_EVENT], 1);
    /* The event's entry takes the output pool and the buffers read and written (a write
     * lasts until the event is consumed). */
    if (!x.wr) {
      ev->out_fd = x.r.fds[x.out_pool];
      x.r.fds[x.out_pool] = -1;
      ev->check_out = true;
      memcpy(ev->expect, x.expect, sizeof ev->expect);
    }
    ev->reads = x.rd;
    ev->read_snap = x.rd0;
    ev->writes = x.wr;
    ev->write_prior = x.wt.prior;
    ev->write_g0 = x.wt.g0;
    x.rd = x.wr = NULL;
    soak_publish(ev, c, h);
  } else {
    if (x.wr) soak_buf_write_end(x.wr, &x.wt, false, false);
    soak_unclaim(ev);
  }
  mdt_req_fini(&x.r);
  soak_watch_release(&x.w, t->id, t->opno);
  plan_drop(&x);
  return true;
}

/* wait_event without deadline (must finish: the execution's status) or with one (may also
 * miss). A wait that returns anything but INVALID_ARGUMENT or MISSED_DEADLINE_TRANSIENT
 * consumes the event, once. */
static bool op_wait(tctx *t) {
  soak_entry *ev = soak_pick(&soak_tables[SK_EVENT], &t->rng, NULL, NULL);
  if (!ev) return false;
  static const uint64_t deadlines[] = {0, 1000, 100000};
  bool forever = soak_below(&t->rng, 10) < 6;
  uint64_t timeout = forever ? UINT64_MAX : deadlines[soak_below(&t->rng, 3)];
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_obj(&w, ev, true);
  soak_remove_begin(ev);
  md_output_shape sh[1];
  md_timing tm;
  memset(sh, 0xab, sizeof sh);
  t->st.calls[SOAK_EP_WAIT]++;
  md_status st = soak_drv->wait_event(soak_dev, ev->owner->client, ev->h, timeout, sh, 1, &tm);
  enum soak_live live = soak_watch_end(&w);
  bool consumed = st != MD_INVALID_ARGUMENT && st != MD_MISSED_DEADLINE_TRANSIENT;
  bool first = soak_remove_end(ev, consumed);
  uint32_t allowed = SOAK_NONE_BIT | (forever ? 0 : SOAK_MISSED_BIT);
  bool exact = true;
  if (ev->reads) {
    soak_bsnap s1 = soak_buf_snap(ev->reads);
    if (!soak_buf_clean(&ev->read_snap, &s1)) allowed |= SOAK_GF_BIT;   /* read+write: NONE or an error (SPEC 6) */
    exact = read_exact(ev->reads, &ev->read_snap);
  }
  if (consumed && first && ev->writes) {
    soak_wticket tk = {ev->write_prior, ev->write_g0};
    bool racing_reads = ev->reads && !exact;
    if (soak_buf_write_end(ev->writes, &tk, st == MD_NONE, racing_reads)) allowed |= SOAK_GF_BIT;
  }
  judge(t, "wait_event", st, live, allowed, forever ? "wait without deadline" : "wait with a deadline");
  if (consumed) {
    if (!first) {
      soak_fail("wait_event", t->id, t->opno, (int)st, NULL, "event 0x%016llx consumed twice",
                (unsigned long long)ev->h);
    } else {
      atomic_fetch_add(&ev->owner->removed[SK_EVENT], 1);
      if (st == MD_NONE && check_shape(t, "wait_event", &sh[0]) && ev->check_out && exact) {
        float got[SOAK_N];
        if (pread_vals(ev->out_fd, got)) check_values(t, "wait_event", got, ev->expect, "async ADD output");
      }
    }
    soak_entry_kill(ev);
    bury(t, SK_EVENT, ev->owner->client, ev->h);
  }
  soak_watch_release(&w, t->id, t->opno);
  soak_entry_put(ev);
  return true;
}

/* ---- registered pools (SPEC 9) ---- */

static bool op_register(tctx *t) {
  if (!soak_has_registered) return false;
  soak_inc *c = acquire_random_slot(t);
  if (!c) return op_open(t);
  soak_entry *e = soak_claim(&soak_tables[SK_POOL], &t->rng);
  if (!e) {
    soak_inc_call_put(c, t->id, t->opno);
    return false;
  }
  float v[2 * SOAK_N];
  rnd_vals(t, v);
  rnd_vals(t, v + SOAK_N);
  int fd = mdt_memfd(v, sizeof v);
  md_memory mem = mdt_ashmem(fd, sizeof v);
  soak_watch w;
  soak_watch_init(&w);
  soak_watch_inc(&w, c);
  md_handle h = 0x5151515151515151ull;
  t->st.calls[SOAK_EP_REGISTER]++;
  md_status st = soak_drv->register_memory(soak_dev, c->client, &mem, &h);
  judge(t, "register_memory", st, soak_watch_end(&w), SOAK_NONE_BIT, "a 48-byte memfd");
  check_handle(t, "register_memory", st, h);
  count_create_race(t, &w, st);
  close(fd);   /* the driver keeps its own duplicate (SPEC 9) */
  if (st == MD_NONE && h) {
    atomic_fetch_add(&c->made[SK_POOL], 1);
    for (unsigned i = 0; i < SOAK_N; i++) e->sum[i] = v[i] + v[SOAK_N + i];
    soak_publish(e, c, h);
  } else {
    soak_unclaim(e);
  }
  soak_watch_release(&w, t->id, t->opno);
  soak_inc_call_put(c, t->id, t->opno);
  return true;
}

/* ---- the device ---- */

static bool op_device(tctx *t) {
  if (soak_below(&t->rng, 2)) {
    md_capabilities caps;
    memset(&caps, 0, sizeof caps);
    caps.struct_size = sizeof caps;
    t->st.calls[SOAK_EP_GET_CAPABILITIES]++;
    md_status st = soak_drv->get_capabilities(soak_dev, &caps);
    judge(t, "get_capabilities", st, SOAK_LIVE, SOAK_NONE_BIT, "capabilities");
  } else {
    mdt_model b;
    uint8_t sup[1] = {0};
    t->st.calls[SOAK_EP_GET_SUPPORTED]++;
    md_status st = soak_drv->get_supported_operations(soak_dev, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), sup);
    if (judge(t, "get_supported_operations", st, SOAK_LIVE, SOAK_NONE_BIT, "ADD [2,3]") && !sup[0])
      soak_fail("get_supported_operations", t->id, t->opno, (int)st, NULL, "ADD float32 reported unsupported");
  }
  return true;
}

/* ---- handles that must fail whatever races ---- */

/* A handle of the thread's graveyard: every use is INVALID_ARGUMENT (dead handles stay dead). */
static bool op_stale(tctx *t) {
  if (!t->n_graves) return false;
  const grave *g = &t->graves[soak_below(&t->rng, t->n_graves)];
  md_status st;
  const char *op;
  md_handle out = 0;
  bool creates = false;
  switch (g->kind) {
    case SK_BUFFER: {
      int fd = mdt_memfd(NULL, SOAK_BYTES);
      md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
      op = "copy_to";
      t->st.calls[SOAK_EP_COPY_TO]++;
      st = soak_drv->copy_to(soak_dev, g->client, g->h, &mem);
      close(fd);
      break;
    }
    case SK_MODEL:
      op = "release_prepared_model";
      t->st.calls[SOAK_EP_RELEASE]++;
      st = soak_drv->release_prepared_model(soak_dev, g->client, g->h);
      break;
    case SK_EVENT:
      op = "wait_event";
      t->st.calls[SOAK_EP_WAIT]++;
      st = soak_drv->wait_event(soak_dev, g->client, g->h, 0, NULL, 0, NULL);
      break;
    case SK_POOL:
      op = "unregister_memory";
      t->st.calls[SOAK_EP_UNREGISTER]++;
      st = soak_drv->unregister_memory(soak_dev, g->client, g->h);
      break;
    default: {   /* a closed client: creating for it must fail with handle 0 */
      mdt_model b;
      op = "prepare_model";
      creates = true;
      out = 0x5151515151515151ull;
      t->st.calls[SOAK_EP_PREPARE]++;
      st = soak_drv->prepare_model(soak_dev, g->client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), &out);
      break;
    }
  }
  judge(t, op, st, SOAK_DEAD, 0, "a handle removed or closed earlier by this thread");
  if (creates) check_handle(t, op, st, out);
  return true;
}

/* Objects used with the wrong client: a racing client's token with the canary client, the
 * canary's tokens with a racing client. INVALID_ARGUMENT whatever else happens; the canary
 * checks then prove nothing was written or freed. */
static bool op_cross(tctx *t) {
  soak_entry *b = soak_pick(&soak_tables[SK_BUFFER], &t->rng, NULL, NULL);
  if (!b) return false;
  unsigned k = soak_below(&t->rng, NCANARY);
  md_handle other = b->owner->client;
  md_status st;
  const char *op;
  int fd = mdt_memfd(S.canary_val[(k + 1) % NCANARY], SOAK_BYTES);
  md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
  switch (soak_below(&t->rng, 4)) {
    case 0:
      op = "copy_to";
      t->st.calls[SOAK_EP_COPY_TO]++;
      st = soak_drv->copy_to(soak_dev, S.canary_client, b->h, &mem);
      break;
    case 1:
      op = "copy_from";
      t->st.calls[SOAK_EP_COPY_FROM]++;
      st = soak_drv->copy_from(soak_dev, other, S.canary_tok[k], &mem, 0, NULL);
      break;
    case 2:
      op = "free_buffer";
      t->st.calls[SOAK_EP_FREE]++;
      st = soak_drv->free_buffer(soak_dev, other, S.canary_tok[k]);
      break;
    default: {   /* a failed execution uninitializes its outputs, but never another client's */
      mdt_request r;
      mdt_req_init(&r);
      mdt_req_in_data(&r, S.canary_val[k], SOAK_BYTES, 0, NULL);
      mdt_req_in_data(&r, S.canary_val[k], SOAK_BYTES, 0, NULL);
      mdt_req_out_token(&r, S.canary_tok[k], 0, NULL);
      op = "execute";
      t->st.calls[SOAK_EP_EXECUTE]++;
      st = soak_drv->execute(soak_dev, other, b->model->h, mdt_req(&r), NULL, 0, NULL);
      mdt_req_fini(&r);
      break;
    }
  }
  judge(t, op, st, SOAK_DEAD, 0, "another client's token");
  close(fd);
  soak_entry_put(b);
  return true;
}

/* ---- the canary client ---- */

/* Reads canary buffer k (copy_to, or as an execution input): NONE and its exact values. */
static void canary_check(tctx *t, unsigned k, bool by_execute) {
  float got[SOAK_N];
  md_status st;
  t->st.canary_checks++;
  if (!by_execute) {
    int fd = mdt_memfd(NULL, SOAK_BYTES);
    md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
    t->st.calls[SOAK_EP_COPY_TO]++;
    st = soak_drv->copy_to(soak_dev, S.canary_client, S.canary_tok[k], &mem);
    if (judge(t, "copy_to", st, SOAK_LIVE, SOAK_NONE_BIT, "canary buffer") && pread_vals(fd, got))
      check_values(t, "copy_to", got, S.canary_val[k], "canary buffer");
    close(fd);
    return;
  }
  float b[SOAK_N], want[SOAK_N];
  rnd_vals(t, b);
  for (unsigned i = 0; i < SOAK_N; i++) want[i] = S.canary_val[k][i] + b[i];
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, S.canary_tok[k], 0, NULL);
  mdt_req_in_data(&r, b, SOAK_BYTES, 0, NULL);
  mdt_req_out_pool(&r, SOAK_BYTES, 0, NULL);
  md_output_shape sh[1];
  md_timing tm;
  t->st.calls[SOAK_EP_EXECUTE]++;
  st = soak_drv->execute(soak_dev, S.canary_client, S.canary_model, mdt_req(&r), sh, 1, &tm);
  if (judge(t, "execute", st, SOAK_LIVE, SOAK_NONE_BIT, "ADD reading a canary buffer")) {
    mdt_req_read_out(&r, 0, got, SOAK_BYTES);
    check_values(t, "execute", got, want, "ADD reading a canary buffer");
  }
  mdt_req_fini(&r);
}

static bool op_canary(tctx *t) {
  canary_check(t, soak_below(&t->rng, NCANARY), soak_below(&t->rng, 2));
  return true;
}

/* The canary client: one model, NCANARY buffers written once with a pattern; no racing call
 * may change them. Main thread, before the threads start. */
static bool canary_open(tctx *t) {
  md_status st = soak_drv->open_client(soak_dev, &S.canary_client);
  t->st.calls[SOAK_EP_OPEN_CLIENT]++;
  if (!judge(t, "open_client", st, SOAK_LIVE, SOAK_NONE_BIT, "canary client")) return false;
  mdt_model b;
  t->st.calls[SOAK_EP_PREPARE]++;
  st = soak_drv->prepare_model(soak_dev, S.canary_client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0),
                               &S.canary_model);
  if (!judge(t, "prepare_model", st, SOAK_LIVE, SOAK_NONE_BIT, "canary model")) return false;
  md_buffer_role in_role = {0, 0, 1.0f}, out_role = {0, 0, 1.0f};
  md_buffer_desc desc = {2, D23};
  for (unsigned k = 0; k < NCANARY; k++) {
    t->st.calls[SOAK_EP_ALLOCATE]++;
    st = soak_drv->allocate(soak_dev, S.canary_client, &desc, &S.canary_model, 1, &in_role, 1, &out_role, 1,
                            &S.canary_tok[k]);
    if (!judge(t, "allocate", st, SOAK_LIVE, SOAK_NONE_BIT, "canary buffer")) return false;
    mdt_iota(S.canary_val[k], SOAK_N, 1000.0f * (float)(k + 1));
    int fd = mdt_memfd(S.canary_val[k], SOAK_BYTES);
    md_memory mem = mdt_ashmem(fd, SOAK_BYTES);
    t->st.calls[SOAK_EP_COPY_FROM]++;
    st = soak_drv->copy_from(soak_dev, S.canary_client, S.canary_tok[k], &mem, 0, NULL);
    close(fd);
    if (!judge(t, "copy_from", st, SOAK_LIVE, SOAK_NONE_BIT, "canary buffer")) return false;
  }
  return true;
}

static void canary_close(tctx *t) {
  for (unsigned k = 0; k < NCANARY; k++) {
    canary_check(t, k, false);
    canary_check(t, k, true);
  }
  md_leak_report rep;
  memset(&rep, 0xff, sizeof rep);
  t->st.calls[SOAK_EP_CLOSE_CLIENT]++;
  md_status st = soak_drv->close_client(soak_dev, S.canary_client, &rep);
  if (judge(t, "close_client", st, SOAK_LIVE, SOAK_NONE_BIT, "canary client") &&
      (rep.buffers != NCANARY || rep.prepared_models != 1 || rep.events != 0 || rep.bytes != NCANARY * SOAK_BYTES))
    soak_fail("close_client", t->id, t->opno, (int)st, NULL,
              "canary client's leak report {buffers %u, prepared_models %u, events %u, bytes %llu}, want {%u, 1, 0, %u}",
              rep.buffers, rep.prepared_models, rep.events, (unsigned long long)rep.bytes, NCANARY,
              NCANARY * SOAK_BYTES);
}

/* ---- the threads ---- */

typedef struct op_def {
  const char *name;
  unsigned weight;
  bool (*fn)(tctx *);
} op_def;

/* Weights per 1000. Creations outweigh removals so the tables stay populated; closes are rare
 * enough that a client lives for dozens of operations of every thread. --skip sets some to 0. */
static const op_def ops[] = {
    {"open_client", 20, op_open},        {"close_client", 15, op_close},
    {"prepare_model", 60, op_prepare},   {"release_prepared_model", 30, op_release},
    {"allocate", 110, op_allocate},      {"free_buffer", 55, op_free},
    {"copy_from", 80, op_copy_from},     {"copy_to", 80, op_copy_to},
    {"execute", 125, op_execute},        {"execute_async", 120, op_execute_async},
    {"wait_event", 110, op_wait},        {"register_memory", 30, op_register},
    {"unregister_memory", 15, op_unregister}, {"device", 15, op_device},
    {"stale", 45, op_stale},             {"cross", 45, op_cross},
    {"canary", 45, op_canary},
};
#define N_OPS (sizeof ops / sizeof ops[0])
static unsigned weights[N_OPS], weight_total;

const char *soak_op_names(void) {
  static char names[512];
  if (!names[0])
    for (unsigned i = 0, len = 0; i < N_OPS; i++)
      len += (unsigned)snprintf(names + len, sizeof names - len, "%s%s", i ? "," : "", ops[i].name);
  return names;
}

/* The weights without the operations of skip (comma-separated names); -1 on an unknown name. */
static int set_weights(const char *skip) {
  weight_total = 0;
  for (unsigned i = 0; i < N_OPS; i++) {
    weights[i] = ops[i].weight;
    const char *p = skip;
    size_t n = strlen(ops[i].name);
    while (p && *p) {
      if (!strncmp(p, ops[i].name, n) && (p[n] == ',' || !p[n])) weights[i] = 0;
      p = strchr(p, ',');
      if (p) p++;
    }
    weight_total += weights[i];
  }
  for (const char *p = skip; p && *p;) {
    size_t n = strcspn(p, ",");
    bool known = false;
    for (unsigned i = 0; i < N_OPS; i++) known |= strlen(ops[i].name) == n && !strncmp(p, ops[i].name, n);
    if (!known) return -1;
    p += n + (p[n] == ',');
  }
  return weight_total ? 0 : -1;
}

bool soak_skip_valid(const char *skip) { return set_weights(skip) == 0; }

static bool run_one(tctx *t) {
  unsigned r = soak_below(&t->rng, weight_total);
  for (unsigned i = 0; i < N_OPS; i++) {
    if (r < weights[i]) return ops[i].fn(t);
    r -= weights[i];
  }
  return false;
}

static bool past_deadline(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > S.deadline.tv_sec || (now.tv_sec == S.deadline.tv_sec && now.tv_nsec >= S.deadline.tv_nsec);
}

static void *thread_main(void *arg) {
  tctx *t = arg;
  pthread_barrier_wait(&S.start);
  for (t->opno = 0;; t->opno++) {
    if (S.o->seconds > 0 ? past_deadline() : t->opno >= S.o->ops) break;
    if (run_one(t)) t->st.ops++;
    else t->st.skipped++;
  }
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void soak_stress(const soak_opts *o, soak_stats *stats) {
  memset(stats, 0, sizeof *stats);
  memset(&S, 0, sizeof S);
  if (set_weights(o->skip) != 0) abort();   /* main checked it (soak_skip_valid) */
  atomic_store(&soak_closes_reconciled, 0);
  S.o = o;
  S.n_slots = o->clients;
  S.slots = calloc(S.n_slots, sizeof *S.slots);
  if (!S.slots) abort();
  for (unsigned i = 0; i < S.n_slots; i++) pthread_mutex_init(&S.slots[i].lock, NULL);
  /* Large enough for several live objects of each kind per client, small enough that a close
   * finds many of them. */
  const unsigned sizes[SK_KINDS] = {16 * S.n_slots, 6 * S.n_slots, 16 * S.n_slots, 3 * S.n_slots};
  soak_tables_init(sizes);

  tctx main_t;
  memset(&main_t, 0, sizeof main_t);
  main_t.id = -1;
  main_t.rng = o->seed ^ 0x6d61696e;
  if (!canary_open(&main_t)) {
    soak_fail("setup", -1, 0, -1, NULL, "cannot open the canary client; no stress run");
    soak_tables_fini();
    free(S.slots);
    return;
  }

  tctx *ts = calloc(o->threads, sizeof *ts);
  if (!ts) abort();
  pthread_barrier_init(&S.start, NULL, o->threads + 1);
  for (unsigned i = 0; i < o->threads; i++) {
    ts[i].id = (int)i;
    ts[i].rng = o->seed + 0x9e3779b97f4a7c15ull * (i + 1);
    soak_rand(&ts[i].rng);
    if (pthread_create(&ts[i].th, NULL, thread_main, &ts[i]) != 0) abort();
  }
  if (o->seconds > 0) {
    clock_gettime(CLOCK_MONOTONIC, &S.deadline);
    S.deadline.tv_sec += (time_t)o->seconds;
    S.deadline.tv_nsec += (long)((o->seconds - (double)(time_t)o->seconds) * 1e9);
    if (S.deadline.tv_nsec >= 1000000000L) S.deadline.tv_sec++, S.deadline.tv_nsec -= 1000000000L;
  }
  double t0 = now_s();
  pthread_barrier_wait(&S.start);
  for (unsigned i = 0; i < o->threads; i++) pthread_join(ts[i].th, NULL);
  stats->wall_s = now_s() - t0;
  pthread_barrier_destroy(&S.start);

  /* Every call has returned: close what is still open (each close is then reconciled at once),
   * then the canary. */
  for (unsigned s = 0; s < S.n_slots; s++) close_slot(&main_t, s);
  canary_close(&main_t);
  unsigned busy = soak_tables_fini();
  if (busy) soak_fail("teardown", -1, 0, -1, NULL, "%u table entries still in use after every close (harness bug)", busy);

  for (unsigned i = 0; i <= o->threads; i++) {
    const soak_stats *s = i < o->threads ? &ts[i].st : &main_t.st;
    for (int k = 0; k < SOAK_EP_COUNT; k++) stats->calls[k] += s->calls[k];
    stats->ops += s->ops;
    stats->skipped += s->skipped;
    stats->value_checks += s->value_checks;
    stats->canary_checks += s->canary_checks;
    stats->raced += s->raced;
    stats->create_races += s->create_races;
    stats->create_races_none += s->create_races_none;
  }
  stats->closes_reconciled = atomic_load(&soak_closes_reconciled);
  for (unsigned i = 0; i < S.n_slots; i++) pthread_mutex_destroy(&S.slots[i].lock);
  free(S.slots);
  free(ts);
}
