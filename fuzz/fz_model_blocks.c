/* fz_model_blocks.c - the state model of a concurrent block (fz_model.h): each lane's view of
 * the state, where what other lanes may do is uncertain; the state after the block, merged from
 * the lanes' views and every call's status; and the leak reports of close_clients that raced
 * their client's other calls, reconciled whatever the interleaving. */
#include "fz_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { EFF_KILL = 1, EFF_WRITE = 2, EFF_READ = 4, EFF_CLOSE = 8, EFF_MAKE = 16 };

/* What each call of block b may do to each object, by lane: eff[lane][obj]. */
static void block_effects(const mdc_fz_prog *p, const fz_block *b, uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS]) {
  memset(eff, 0, sizeof(uint8_t) * FZ_MAX_LANES * FZ_MAX_OBJS);
#define MARK(ref, e)                                                          \
  do {                                                                        \
    const fz_ref *r_ = (ref);                                                 \
    if (r_->how == FZ_REF_OBJ && !(r_->forge && r_->v) && r_->obj < FZ_MAX_OBJS) \
      eff[k->lane % FZ_MAX_LANES][r_->obj] |= (e);                            \
  } while (0)
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &p->calls[i];
    if (mdc_fz_produces((mdc_call)k->call) != MDC_OBJ_NONE && mdc_fz_arg(k, MDC_A_CLIENT))
      MARK(&mdc_fz_arg(k, MDC_A_CLIENT)->ref, EFF_MAKE);
    switch ((mdc_call)k->call) {
      case MDC_CALL_CLOSE_CLIENT: MARK(&mdc_fz_arg(k, MDC_A_CLIENT)->ref, EFF_KILL | EFF_CLOSE); break;
      case MDC_CALL_RELEASE_PREPARED_MODEL: MARK(&mdc_fz_arg(k, MDC_A_PREPARED)->ref, EFF_KILL); break;
      case MDC_CALL_FREE_BUFFER: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_KILL); break;
      case MDC_CALL_COPY_FROM: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_WRITE); break;
      case MDC_CALL_COPY_TO: MARK(&mdc_fz_arg(k, MDC_A_TOKEN)->ref, EFF_READ); break;
      case MDC_CALL_WAIT_EVENT: MARK(&mdc_fz_arg(k, MDC_A_EVENT)->ref, EFF_KILL); break;
      case MDC_CALL_EXECUTE:
      case MDC_CALL_EXECUTE_ASYNC: {
        const fz_request *rq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
        for (unsigned j = 0; j < rq->n_pools; j++) {
          if (!rq->pools[j].is_token) continue;
          int written = 0;
          for (unsigned o = 0; o < rq->n_out; o++) written |= !rq->out[o].no_value && rq->out[o].pool == j;
          MARK(&rq->pools[j].token, written ? EFF_WRITE : EFF_READ);
        }
        break;
      }
      default: break;
    }
  }
#undef MARK
}

void mdc_fz_block_view(const fz_state *s0, const mdc_fz_prog *p, const fz_block *b, uint8_t lane, fz_state *out) {
  *out = *s0;
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  for (unsigned i = 0; i < out->n; i++) {
    uint8_t others = 0, mine = eff[lane % FZ_MAX_LANES][i];
    for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
      if (l != lane) others |= eff[l][i];
    fz_obj *o = &out->o[i];
    if ((others & EFF_KILL) && o->live == FZ_LIVE) o->live = FZ_MAYBE_LIVE;
    if (others & EFF_MAKE) o->racy = 1;
    if (others & EFF_CLOSE) {
      for (unsigned j = 0; j < out->n; j++)
        if (out->o[j].owner == i && out->o[j].live == FZ_LIVE) out->o[j].live = FZ_MAYBE_LIVE;
    }
    if (o->kind == MDC_OBJ_TOKEN && ((others & EFF_WRITE) || ((mine & EFF_WRITE) && (others & EFF_READ)))) {
      /* What a racing reader may see whole: the contents before the block and every copy_from's
       * source (none when an execution writes it: its contents are not modelled). */
      fz_tok *t = &o->tok;
      t->n_alt = 0;
      int known = 1;
      if (t->inited == FZ_YES && t->content == FZ_YES) t->alt[t->n_alt++] = (fz_content){t->content_seed, t->content_bytes};
      else if (t->inited != FZ_NO) known = 0;
      for (unsigned c = b->first; c < b->end && known; c++) {
        const fz_call *k = &p->calls[c];
        const fz_arg *ta = mdc_fz_arg(k, MDC_A_TOKEN);
        if (k->call == MDC_CALL_COPY_FROM && ta && ta->ref.how == FZ_REF_OBJ && !(ta->ref.forge && ta->ref.v) &&
            ta->ref.obj == i) {
          const fz_mem *m = &mdc_fz_arg(k, MDC_A_SRC)->mem;
          if (t->n_alt < sizeof t->alt / sizeof t->alt[0]) t->alt[t->n_alt++] = (fz_content){m->seed, m->size};
        } else if ((k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_EXECUTE_ASYNC)) {
          const fz_request *rq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
          for (unsigned q = 0; q < rq->n_out; q++) {
            const fz_rarg *ra = &rq->out[q];
            if (!ra->no_value && ra->pool < rq->n_pools && rq->pools[ra->pool].is_token &&
                rq->pools[ra->pool].token.how == FZ_REF_OBJ && rq->pools[ra->pool].token.obj == i)
              known = 0;
          }
        }
      }
      if (!known) t->n_alt = 0;
      o->tok.racy = 1;
      o->tok.content = FZ_NO;
      if (o->tok.inited != FZ_NO || (others & EFF_WRITE)) o->tok.inited = FZ_MAYBE;
      o->tok.cur_known = FZ_MAYBE;
      o->tok.bytes_known = 0;
    }
  }
}

/* What the calls of block b released, by their statuses got: kills[obj] the successful kills
 * (close_client, release, free_buffer, a wait that consumed the event), closes[obj] the
 * successful close_clients, unsure[obj] the events a wait may have consumed with INVALID_ARGUMENT
 * (s: the state before the block). */
static void block_kills(const fz_state *s, const mdc_fz_prog *p, const fz_block *b, const md_status *got,
                        unsigned kills[FZ_MAX_OBJS], unsigned closes[FZ_MAX_OBJS], uint8_t unsure[FZ_MAX_OBJS]) {
  memset(kills, 0, sizeof(unsigned) * FZ_MAX_OBJS);
  memset(closes, 0, sizeof(unsigned) * FZ_MAX_OBJS);
  memset(unsure, 0, FZ_MAX_OBJS);
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &p->calls[i];
    md_status st = got[i - b->first];
    const fz_ref *r = NULL;
    switch ((mdc_call)k->call) {
      case MDC_CALL_CLOSE_CLIENT: r = &mdc_fz_arg(k, MDC_A_CLIENT)->ref; break;
      case MDC_CALL_RELEASE_PREPARED_MODEL: r = &mdc_fz_arg(k, MDC_A_PREPARED)->ref; break;
      case MDC_CALL_FREE_BUFFER: r = &mdc_fz_arg(k, MDC_A_TOKEN)->ref; break;
      case MDC_CALL_WAIT_EVENT:
        r = &mdc_fz_arg(k, MDC_A_EVENT)->ref;
        /* INVALID_ARGUMENT is a refused handle, or the status of an execution that may fail
         * with it (a request valid at issue, not at run time), which consumes the event: which
         * one, racing lanes do not tell. */
        if (st == MD_INVALID_ARGUMENT && r->how == FZ_REF_OBJ && !(r->forge && r->v) && r->obj < s->n &&
            (s->o[r->obj].ev.ex.set & FZ_BIT(MD_INVALID_ARGUMENT)))
          unsure[r->obj] = 1;
        if (st == MD_INVALID_ARGUMENT || st == MD_MISSED_DEADLINE_TRANSIENT) r = NULL;
        else st = MD_NONE;   /* consumed, whatever the execution returned */
        break;
      default: break;
    }
    if (!r || r->how != FZ_REF_OBJ || (r->forge && r->v) || r->obj >= FZ_MAX_OBJS || st != MD_NONE) continue;
    kills[r->obj]++;
    if (k->call == MDC_CALL_CLOSE_CLIENT) closes[r->obj]++;
  }
}

int mdc_fz_block_merge(fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, char *why_out, size_t whylen) {
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  fz_state before = *s;
  /* Objects made inside the block come from the lane that made them. */
  uint16_t n = s->n;
  for (unsigned l = 0; l < b->lanes; l++)
    if (lanes[l].n > n) n = lanes[l].n;
  for (unsigned i = s->n; i < n; i++) {
    memset(&s->o[i], 0, sizeof s->o[i]);
    s->o[i].kind = p->objs[i].kind;
    s->o[i].owner = FZ_NOBODY;
    const fz_call *k = &p->calls[p->objs[i].call];
    if (k->block && p->calls[p->objs[i].call].lane < b->lanes && i < lanes[k->lane].n) s->o[i] = lanes[k->lane].o[i];
  }
  s->n = n;
  /* Successful kills per object: at most one (SPEC 5, 6: a handle dies once). */
  unsigned kills[FZ_MAX_OBJS], closes[FZ_MAX_OBJS];
  uint8_t unsure[FZ_MAX_OBJS];
  block_kills(&before, p, b, got, kills, closes, unsure);
  for (unsigned i = 0; i < s->n && i < before.n; i++) {
    if (kills[i] > 1) {
      snprintf(why_out, whylen, "SPEC 5, 6: object %u (%s) was released %u times by racing calls", i,
               mdc_obj_name((mdc_obj)s->o[i].kind), kills[i]);
      return -1;
    }
  }
  /* The state after: each object as its one writer left it, uncertain where lanes raced. */
  for (unsigned i = 0; i < before.n; i++) {
    fz_obj *o = &s->o[i];
    unsigned touched = 0, last = 0;
    uint8_t all = 0;
    for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
      if (eff[l][i]) touched++, last = l, all |= eff[l][i];
    int owner_closed = o->owner < FZ_MAX_OBJS && closes[o->owner];
    if (kills[i] || owner_closed) {
      o->live = FZ_DEAD;
      continue;
    }
    if (touched == 1 && !(o->kind == MDC_OBJ_TOKEN && before.o[i].tok.racy)) {
      fz_obj keep = lanes[last].o[i];
      *o = keep;
      if (o->live == FZ_MAYBE_LIVE && before.o[i].live == FZ_LIVE) o->live = FZ_LIVE;
      o->tok.racy = 0;
      continue;
    }
    if (!touched) {
      /* Untouched here, but events of the block may have started async work on it. */
      for (unsigned l = 0; l < b->lanes; l++) {
        const fz_tok *t = &lanes[l].o[i].tok;
        if (o->kind == MDC_OBJ_TOKEN && (t->writers != o->tok.writers || t->readers != o->tok.readers)) {
          o->tok.writers = t->writers > o->tok.writers ? t->writers : o->tok.writers;
          o->tok.readers = t->readers > o->tok.readers ? t->readers : o->tok.readers;
        }
      }
      continue;
    }
    if (o->kind == MDC_OBJ_TOKEN && (all & (EFF_WRITE))) {
      o->tok.inited = FZ_MAYBE;
      o->tok.cur_known = FZ_MAYBE;
      o->tok.content = FZ_NO;
      o->tok.bytes_known = 0;
    }
    if (o->kind == MDC_OBJ_TOKEN) {
      unsigned w = 0, r = 0;
      for (unsigned l = 0; l < b->lanes; l++) {
        const fz_tok *t = &lanes[l].o[i].tok;
        w += t->writers > before.o[i].tok.writers ? t->writers - before.o[i].tok.writers : 0;
        r += t->readers > before.o[i].tok.readers ? t->readers - before.o[i].tok.readers : 0;
      }
      o->tok.writers = (uint8_t)(before.o[i].tok.writers + w);
      o->tok.readers = (uint8_t)(before.o[i].tok.readers + r);
      o->tok.racy = 0;
    }
  }
  /* An object made in the block for a client the block closed was live at the close (its
   * creation returned NONE: the close released it and counts it) or was never made: dead. */
  for (unsigned i = before.n; i < s->n; i++)
    if (s->o[i].kind != MDC_OBJ_CLIENT && s->o[i].owner < FZ_MAX_OBJS && closes[s->o[i].owner] &&
        s->o[i].live != FZ_UNMADE)
      s->o[i].live = FZ_DEAD;
  for (unsigned i = 0; i < s->n; i++) {
    s->o[i].racy = 0;
    s->o[i].tok.n_alt = 0;
    if (i < FZ_MAX_OBJS && unsure[i] && !kills[i] && s->o[i].live == FZ_LIVE) s->o[i].live = FZ_MAYBE_LIVE;
  }
  return 0;
}

int mdc_fz_block_leaks(const fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, const md_leak_report *reports, char *why_out, size_t whylen) {
  uint8_t eff[FZ_MAX_LANES][FZ_MAX_OBJS];
  block_effects(p, b, eff);
  unsigned kills[FZ_MAX_OBJS], closes[FZ_MAX_OBJS];
  uint8_t unsure[FZ_MAX_OBJS];
  block_kills(s, p, b, got, kills, closes, unsure);
  uint16_t n = s->n;
  for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++)
    if (lanes[l].n > n) n = lanes[l].n;
  for (unsigned ci = b->first; ci < b->end; ci++) {
    const fz_call *kc = &p->calls[ci];
    if (kc->call != MDC_CALL_CLOSE_CLIENT || got[ci - b->first] != MD_NONE) continue;
    const fz_ref *cr = &mdc_fz_arg(kc, MDC_A_CLIENT)->ref;
    if (cr->how != FZ_REF_OBJ || (cr->forge && cr->v) || cr->obj >= s->n || s->o[cr->obj].kind != MDC_OBJ_CLIENT)
      continue;
    uint16_t c = cr->obj;
    /* [lo, hi] of buffers, prepared models, events; the bytes while every counted buffer's size
     * is known */
    unsigned lo[3] = {0}, hi[3] = {0};
    uint64_t bytes = 0;
    int bytes_known = 1;
    for (unsigned i = 0; i < n && i < FZ_MAX_OBJS; i++) {
      int made_here = i >= s->n;
      uint8_t kind = made_here ? p->objs[i].kind : s->o[i].kind;
      if (kind == MDC_OBJ_CLIENT) continue;
      unsigned x = kind == MDC_OBJ_TOKEN ? 0 : kind == MDC_OBJ_PREPARED ? 1 : 2;
      const fz_tok *t;
      int maybe;
      if (made_here) {
        /* made in the block: counted exactly when its creation returned NONE (contract: a
         * creation racing close_client either made a live object the close released, or was
         * refused and made nothing) */
        unsigned mk = p->objs[i].call;
        const fz_call *k = &p->calls[mk];
        if (mk < b->first || mk >= b->end || got[mk - b->first] != MD_NONE || mdc_fz_call_client(p, k) != c) continue;
        if (k->lane >= b->lanes || i >= lanes[k->lane].n) continue;
        /* a trace may name it in another lane (`when: produced`): freed there, as below */
        if (kills[i]) continue;
        t = &lanes[k->lane].o[i].tok;
        maybe = unsure[i];
      } else {
        const fz_obj *o = &s->o[i];
        if (o->owner != c || o->live == FZ_UNMADE || o->live == FZ_DEAD) continue;
        /* freed, released or consumed by a wait in the block: before the close (a handle dies
         * once; the close's report counts what it released) */
        if (kills[i]) continue;
        maybe = o->live == FZ_MAYBE_LIVE || unsure[i];
        t = &o->tok;
        if (kind == MDC_OBJ_TOKEN) {
          uint8_t all = 0;
          for (unsigned l = 0; l < b->lanes && l < FZ_MAX_LANES; l++) all |= eff[l][i];
          if ((all & EFF_WRITE) || t->writers || t->racy) bytes_known = 0;
        }
      }
      hi[x]++;
      if (!maybe) lo[x]++;
      if (kind == MDC_OBJ_TOKEN) {
        if (maybe || !t->bytes_known) bytes_known = 0;
        else bytes += t->bytes;
      }
    }
    const md_leak_report *rep = &reports[ci - b->first];
    const unsigned got_n[3] = {rep->buffers, rep->prepared_models, rep->events};
    static const char *const names[3] = {"buffers", "prepared_models", "events"};
    for (unsigned x = 0; x < 3; x++) {
      if (got_n[x] >= lo[x] && got_n[x] <= hi[x]) continue;
      int w = snprintf(why_out, whylen, "close_client of block %u reported %s %u, the lanes were told of ",
                       (unsigned)(b - p->blocks), names[x], got_n[x]);
      if (w >= 0 && (size_t)w < whylen) {
        if (lo[x] == hi[x]) snprintf(why_out + w, whylen - (size_t)w, "%u", lo[x]);
        else snprintf(why_out + w, whylen - (size_t)w, "%u to %u", lo[x], hi[x]);
      }
      return (int)ci;
    }
    if (bytes_known && lo[0] == hi[0] && rep->bytes != bytes) {
      snprintf(why_out, whylen, "close_client of block %u reported bytes %" PRIu64 ", the lanes left %" PRIu64,
               (unsigned)(b - p->blocks), rep->bytes, bytes);
      return (int)ci;
    }
  }
  return -1;
}
