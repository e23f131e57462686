/* fz_run_value.c - the harness core's value oracle (fz_run_int.h): what an execution must write
 * to its output pools when the model and its inputs' values are known (fz_eval.h), and the
 * judgement of what it wrote. Sequential calls only: lanes race on contents. */
#include "fz_run_int.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the value oracle ----------------------------------------------------------------------- */

/* A pool memory whose bytes the harness knows and may read back: a real memfd seen from its
 * start (MMAP_FD at offset 0), of a kind with plain bytes. */
static int plain_mem(const fz_mem *m, uint32_t prot) {
  return m->fd == FZ_FD_REAL && (m->prot & prot) == prot &&
         (m->kind == MD_MEM_ASHMEM || m->kind == MD_MEM_HARDWARE_BUFFER_BLOB ||
          (m->kind == MD_MEM_MMAP_FD && m->offset == 0 && (!m->file_size || m->file_size >= m->size)));
}

/* Whether request argument (is_out, a) shares its pool with another argument of fq that writes. */
static int pool_shared(const fz_request *fq, int is_out, unsigned a) {
  unsigned pool = is_out ? fq->out[a].pool : fq->in[a].pool;
  for (unsigned o = 0; o < fq->n_out; o++)
    if (fq->out[o].pool == pool && !(is_out && o == a)) return 1;
  for (unsigned i = 0; is_out && i < fq->n_in; i++)
    if (fq->in[i].pool == pool) return 1;
  return 0;
}

/* Whether request argument ra holds exactly the model operand's len bytes at its offset (SPEC 2:
 * a length of 0 means the size its dims imply) with dims that are absent or the operand's. */
static int arg_plain(const fz_rarg *ra, const fz_dims *od, size_t len, uint64_t pool_size) {
  if (ra->dims.rank) {
    if (ra->dims.rank != od->rank) return 0;
    for (unsigned i = 0; i < od->rank && i < FZ_MAX_RANK; i++)
      if (ra->dims.d[i] != od->d[i]) return 0;
  }
  return (ra->length == 0 || ra->length == len) && (uint64_t)ra->offset + len <= pool_size;
}

/* The expectation for execution call k (sequential; its request made into aq): e->vc.n stays 0
 * when the model is beyond the evaluator or an input's value is not known for certain. */
void mdc_fz__vexpect(fz_runner *r, unsigned i, const fz_state *st, const fz_request *fq, const md_request *q,
                     fz_vexp *e, uint8_t *scratch) {
  const mdc_fz_prog *p = r->p;
  const fz_call *k = &p->calls[i];
  e->vc.n = 0;
  e->n_tok = 0;
  const fz_ref *pref = &mdc_fz_arg(k, MDC_A_PREPARED)->ref;
  if (pref->how != FZ_REF_OBJ || pref->forge) return;
  const fz_model *m = mdc_fz_prepared_model(st, p, pref->obj);
  if (!m || m->n_in != fq->n_in || m->n_out != fq->n_out || !m->n_out) return;
  const float *in[FZ_MAX_IO];
  for (unsigned a = 0; a < m->n_in; a++) {
    uint32_t n = mdc_fz_eval_count(m, a, 0);
    const fz_rarg *ra = &fq->in[a];
    if (!n || ra->no_value || ra->pool >= fq->n_pools) return;
    const fz_rpool *rp = &fq->pools[ra->pool];
    const fz_dims *od = &m->opnd[m->in[a]].dims;
    size_t len = (size_t)n * 4;
    if (rp->is_token) {
      const fz_ref *t = &rp->token;
      if (t->how != FZ_REF_OBJ || t->forge || t->obj >= st->n || st->o[t->obj].kind != MDC_OBJ_TOKEN) return;
      const fz_tok *tk = &st->o[t->obj].tok;
      if (st->o[t->obj].live != FZ_LIVE || tk->content != FZ_YES || tk->content_bytes != len || tk->writers ||
          tk->racy || ra->offset || ra->length || !arg_plain(ra, od, len, len))
        return;
      if (tk->content_seed) mdc_fz__fill(r, tk->content_seed, scratch, len);
      else memset(scratch, 0, len);
      memcpy(r->vin[a], scratch, len);
      e->tok[e->n_tok++] = t->obj;
    } else {
      const fz_mem *fm = &rp->mem;
      if (!plain_mem(fm, PROT_READ) || !arg_plain(ra, od, len, fm->size) || pool_shared(fq, 0, a)) return;
      size_t upto = (size_t)ra->offset + len;
      if (fm->seed) mdc_fz__fill(r, fm->seed, scratch, upto);
      else memset(scratch, 0, upto);
      memcpy(r->vin[a], scratch + ra->offset, len);
    }
    in[a] = r->vin[a];
  }
  float *out[FZ_MAX_IO];
  unsigned at = 0;
  for (unsigned j = 0; j < m->n_out; j++) {
    uint32_t n = mdc_fz_eval_count(m, j, 1);
    if (!n || at + n > sizeof e->vc.v / sizeof e->vc.v[0]) return;
    out[j] = e->vc.v + at;
    at += n;
  }
  if (mdc_fz_eval(m, in, out, &r->eval) != 0) return;
  e->vc.issue = (uint16_t)i;
  for (unsigned j = 0; j < m->n_out; j++) {
    uint32_t n = mdc_fz_eval_count(m, j, 1);
    const fz_rarg *ra = &fq->out[j];
    uint32_t off = (uint32_t)(out[j] - e->vc.v);
    if (ra->no_value || ra->pool >= fq->n_pools || fq->pools[ra->pool].is_token) continue;
    const fz_mem *fm = &fq->pools[ra->pool].mem;
    if (!plain_mem(fm, PROT_READ | PROT_WRITE) || !arg_plain(ra, &m->opnd[m->out[j]].dims, (size_t)n * 4, fm->size) ||
        pool_shared(fq, 1, j))
      continue;
    unsigned c = e->vc.n++;
    e->vc.o[c].pool = ra->pool;
    e->vc.o[c].off = ra->offset;
    e->vc.o[c].count = (uint16_t)n;
    e->vc.o[c].at = (uint16_t)off;
    e->fd[c] = q->pools[ra->pool].memory.fd;
    e->foff[c] = ra->offset;
  }
}

/* Whether a call of p in (from, to] (and, when `to` is in a concurrent block, anywhere in that
 * block) may write token object t: a copy_from into it, or an execution with it as an output.
 * SPEC 6 leaves a read racing with a write indeterminate. strict: the reference's decision
 * (docs/memory-domains.md) is judged too: an execution reads the storage its input held when it
 * was issued, so a write made after the issue, outside concurrent blocks, does not count. */
int mdc_fz__token_written(const mdc_fz_prog *p, unsigned from, unsigned to, uint16_t t, int strict) {
  unsigned end = to + 1;
  const fz_call *kw = &p->calls[to];
  if (kw->block) end = p->blocks[kw->block - 1].end;
  int snapshot = strict && !kw->block && !p->calls[from].block;   /* issue and wait sequential */
  for (unsigned c = from + 1; c < end && c < p->n_calls; c++) {
    const fz_call *k = &p->calls[c];
    if (snapshot && !k->block) continue;
    if (k->call == MDC_CALL_COPY_FROM) {
      const fz_arg *a = mdc_fz_arg(k, MDC_A_TOKEN);
      if (a && a->ref.how == FZ_REF_OBJ && a->ref.obj == t) return 1;
    } else if (k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_EXECUTE_ASYNC) {
      const fz_request *fq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
      for (unsigned o = 0; o < fq->n_out; o++) {
        unsigned pool = fq->out[o].pool;
        if (pool < fq->n_pools && fq->pools[pool].is_token && fq->pools[pool].token.how == FZ_REF_OBJ &&
            fq->pools[pool].token.obj == t)
          return 1;
      }
    }
  }
  return 0;
}

/* Judges what an execution that returned NONE (call i: the execute, or the wait_event of an
 * execute_async) wrote to its output pools against e; keeps e in the call's outcome. */
void mdc_fz__vjudge(fz_runner *r, unsigned i, const fz_vexp *e, uint8_t *scratch, int snapshot) {
  fz_outcome *oc = &r->outs[i];
  oc->vc = e->vc;
  for (unsigned c = 0; c < e->vc.n; c++) {
    size_t n = e->vc.o[c].count, len = n * 4;
    float *got = (float *)(void *)scratch;
    if (pread(e->fd[c], got, len, (off_t)e->foff[c]) != (ssize_t)len) continue;
    const float *want = e->vc.v + e->vc.o[c].at;
    size_t bad = 0, first = n;
    for (size_t x = 0; x < n; x++)
      if (!mdc_fz_eval_same(want[x], got[x])) {
        if (first == n) first = x;
        bad++;
      }
    if (bad) {
      const fz_call *k = &r->p->calls[e->vc.issue];
      const fz_request *fq = &r->p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
      unsigned arg = 0;
      while (arg < fq->n_out && fq->out[arg].pool != e->vc.o[c].pool) arg++;
      const char *rule = snapshot ? "reference decision (docs/memory-domains.md): an execution reads the storage "
                                    "its token inputs held when it was issued; a later write goes to fresh storage"
                                  : "SPEC 4, 6: an execution that returns NONE computed its outputs from its inputs' "
                                    "values (nothing it uses is freed or overwritten under it)";
      return mdc_fz__finding(r, (int)i, "value", rule,
                             "output %u (pool %u): element %zu is %.9g, the model's value is %.9g; %zu of %zu "
                             "elements differ",
                             arg, e->vc.o[c].pool, first, (double)got[first], (double)want[first], bad, n);
    }
  }
}
