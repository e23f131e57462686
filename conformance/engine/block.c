/* block.c - a concurrent block: its events read whole (from `concurrent` to `end_concurrent`)
 * and checked, a lint that refuses a block racing on the replayer's own memory, then one thread
 * per lane released together from a barrier, the whole block `repeat` times. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "reader_int.h"

typedef struct block_event {
  json_t *ev;
  mdc__op op;
  uint32_t line;
  uint32_t lane;
} block_event;

typedef struct block {
  mdc__run *r;
  block_event *evs;
  size_t n;
  uint32_t lanes, repeat;
  pthread_barrier_t bar;
  pthread_mutex_t gate_lock;
  pthread_cond_t gate_cond;
  int gate; /* 0 wait, 1 go, -1 abandon */
} block;

typedef struct lane_arg {
  block *b;
  uint32_t lane;
} lane_arg;

static void *lane_main(void *p) {
  lane_arg *la = p;
  block *b = la->b;
  mdc__run *r = b->r;
  pthread_mutex_lock(&b->gate_lock);
  while (b->gate == 0) pthread_cond_wait(&b->gate_cond, &b->gate_lock);
  int go = b->gate > 0;
  pthread_mutex_unlock(&b->gate_lock);
  if (!go) return NULL;
  for (uint32_t rep = 0; rep < b->repeat; rep++) {
    pthread_barrier_wait(&b->bar);
    for (size_t i = 0; i < b->n; i++) {
      if (b->evs[i].lane != la->lane) continue;
      if (atomic_load(&r->stop)) break;
      mdc__where w = {.path = r->path, .line = b->evs[i].line, .op = b->evs[i].op.name};
      if (mdc__op_exec(r, &w, &b->evs[i].op, b->evs[i].ev) < 0)
        mdc__record(r, MDC_TRACE_ERROR, &w, w.msg, NULL, NULL);
    }
    pthread_barrier_wait(&b->bar);
    /* Read between the two barriers: every lane sees the same value, so all stop together. */
    if (atomic_load(&r->stop)) break;
  }
  return NULL;
}

static int run_block(mdc__run *r, mdc__where *w, block *b) {
  pthread_t th[MDC__MAX_LANES];
  lane_arg args[MDC__MAX_LANES];
  uint32_t started = 0;
  if (pthread_barrier_init(&b->bar, NULL, b->lanes)) return mdc__terr(w, "pthread_barrier_init failed");
  pthread_mutex_init(&b->gate_lock, NULL);
  pthread_cond_init(&b->gate_cond, NULL);
  b->gate = 0;
  for (; started < b->lanes; started++) {
    args[started].b = b;
    args[started].lane = started;
    if (pthread_create(&th[started], NULL, lane_main, &args[started])) break;
  }
  pthread_mutex_lock(&b->gate_lock);
  b->gate = started == b->lanes ? 1 : -1;
  pthread_cond_broadcast(&b->gate_cond);
  pthread_mutex_unlock(&b->gate_lock);
  for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  pthread_cond_destroy(&b->gate_cond);
  pthread_mutex_destroy(&b->gate_lock);
  pthread_barrier_destroy(&b->bar);
  if (started != b->lanes) return mdc__terr(w, "cannot start %u lane threads", b->lanes);
  return 0;
}

/* A host memory one block event touches: `write` when the call writes it (copy_to's dst, an
 * execution's output pools, fill), else it only reads it (copy_from's src, input pools, check). */
typedef struct mem_use {
  const char *name;
  uint32_t lane, line;
  int write;
} mem_use;

static int use_add(mem_use **u, size_t *n, size_t *cap, const char *name, const block_event *e,
                   int write) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    mem_use *p = realloc(*u, c * sizeof *p);
    if (!p) return -1;
    *u = p;
    *cap = c;
  }
  (*u)[(*n)++] = (mem_use){name, e->lane, e->line, write};
  return 0;
}

static int use_cmp(const void *a, const void *b) {
  const mem_use *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int request_uses(mdc__run *r, json_t *q, const block_event *e, mem_use **u, size_t *n,
                        size_t *cap) {
  if (json_is_string(q)) {
    mdc__name *nm = mdc__names_find(&r->names, json_string_value(q));
    if (!nm || nm->kind != MDC_OBJ_REQUEST || !nm->request) return 0; /* judged when it runs */
    q = nm->request;
  }
  json_t *pools = json_object_get(q, "pools"), *outs = json_object_get(q, "outputs");
  size_t i;
  json_t *p;
  json_array_foreach(pools, i, p) {
    json_t *m = json_object_get(p, "memory"), *reg = json_object_get(p, "registered");
    const char *mname = json_is_string(m) ? json_string_value(m) : NULL;
    if (json_is_string(reg)) {
      /* A registered pool is the memory it was registered from (when registered before the
       * block; one registered inside it is not known here). */
      mdc__name *nm = mdc__names_find(&r->names, json_string_value(reg));
      if (nm && nm->kind == MDC_OBJ_POOL && nm->registered_from) mname = nm->registered_from->name;
    }
    if (!mname) continue;
    int write = 0;
    size_t k;
    json_t *o;
    json_array_foreach(outs, k, o) {
      json_t *pi = json_object_get(o, "pool");
      if (json_is_integer(pi) && json_integer_value(pi) == (json_int_t)i) write = 1;
    }
    if (use_add(u, n, cap, mname, e, write)) return -1;
  }
  return 0;
}

/* A block in which one lane writes a host memory that another lane reads or writes races with
 * itself: its checks would judge the trace, not the driver. Refused before anything runs. */
static int block_lint(mdc__run *r, mdc__where *w, const block *b) {
  mem_use *u = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (size_t i = 0; i < b->n && rc == 0; i++) {
    const block_event *e = &b->evs[i];
    json_t *ev = e->ev;
    json_t *m = NULL;
    int write = 0;
    if (e->op.call) {
      /* A call's memory arguments: copy_to's dst is written, copy_from's src read; an
       * execution's request pools are written when an output uses them. */
      const mdc_call_desc *c = e->op.call;
      for (uint32_t k = 0; k < c->n_args && rc == 0; k++) {
        mdc_arg_id id = c->args[k].id;
        if (mdc_args[id].type == MDC_T_MEMORY) {
          m = json_object_get(ev, mdc_args[id].key);
          write = id == MDC_A_DST;
        } else if (mdc_args[id].type == MDC_T_REQUEST) {
          rc = request_uses(r, json_object_get(ev, mdc_args[id].key), e, &u, &n, &cap);
        }
      }
    } else if (e->op.event->flags & (MDC__EV_READS_MEMORY | MDC__EV_WRITES_MEMORY)) {
      m = json_object_get(ev, "memory");   /* fill writes it, check reads it */
      write = (e->op.event->flags & MDC__EV_WRITES_MEMORY) != 0;
    }
    if (json_is_string(m)) rc = use_add(&u, &n, &cap, json_string_value(m), e, write);
  }
  if (rc) {
    free(u);
    return mdc__terr(w, "out of memory");
  }
  /* By name, then line: in each name's run, a writer and an entry of another lane is a race. */
  if (n) qsort(u, n, sizeof *u, use_cmp);   /* u is NULL when no lane uses a memory */
  for (size_t i = 0, end; i < n; i = end) {
    const mem_use *wr = NULL, *lo = &u[i], *hi = &u[i];
    for (end = i; end < n && strcmp(u[end].name, u[i].name) == 0; end++) {
      if (u[end].write && !wr) wr = &u[end];
      if (u[end].lane < lo->lane) lo = &u[end];
      if (u[end].lane > hi->lane) hi = &u[end];
    }
    if (!wr || lo->lane == hi->lane) continue;
    const mem_use *other = lo->lane != wr->lane ? lo : hi;
    w->line = other->line > wr->line ? other->line : wr->line;
    w->op = "concurrent";
    mdc__terr(w,
              "memory '%s' is written by lane %u (line %u) and %s by lane %u (line %u) in one "
              "concurrent block: the trace races with itself; give each lane its own memory",
              wr->name, wr->lane, wr->line, other->write ? "written" : "read", other->lane, other->line);
    free(u);
    return -1;
  }
  free(u);
  return 0;
}

/* Reads the block that starts at `head` (line w->line), checks every event, runs it unless a
 * verdict is already recorded. */
int mdc__block_run(mdc__run *r, mdc__reader *rd, mdc__where *w, json_t *head) {
  int64_t lanes, repeat;
  if (mdc__get_int(w, head, "lanes", 1, 0, 1, MDC__MAX_LANES, &lanes) ||
      mdc__get_int(w, head, "repeat", 0, 1, 1, MDC__MAX_REPEAT, &repeat))
    return -1;
  uint32_t start = w->line;
  block b;
  memset(&b, 0, sizeof b);
  b.r = r;
  b.lanes = (uint32_t)lanes;
  b.repeat = (uint32_t)repeat;
  size_t cap = 0;
  int rc = -1, closed = 0;
  for (;;) {
    json_t *ev;
    int got = mdc__reader_next(rd, w, &ev);
    if (got < 0) goto out;
    if (got == 0) {
      w->line = start;
      w->op = "concurrent";
      mdc__terr(w, "no end_concurrent before the end of the file");
      goto out;
    }
    json_t *ov = json_object_get(ev, "op");
    const mdc__event_desc *marker = json_is_string(ov) ? mdc__event_find(json_string_value(ov)) : NULL;
    if (marker && (marker->flags & MDC__EV_BLOCK_END)) {
      w->op = marker->name;
      mdc__op op;
      int bad = mdc__op_check(r, w, ev, 0, 0, &op);
      json_decref(ev);
      if (bad) goto out;
      closed = 1;
      break;
    }
    if (marker && (marker->flags & MDC__EV_BLOCK_START)) {
      json_decref(ev);
      w->op = marker->name;
      mdc__terr(w, "concurrent blocks do not nest (block opened at line %u)", start);
      goto out;
    }
    mdc__op op;
    if (mdc__op_check(r, w, ev, 1, b.lanes, &op)) {
      json_decref(ev);
      goto out;
    }
    if (b.n == cap) {
      size_t c = cap ? cap * 2 : 16;
      block_event *p = c > MDC__MAX_BLOCK_EVENTS ? NULL : realloc(b.evs, c * sizeof *p);
      if (!p) {
        json_decref(ev);
        mdc__terr(w, "a concurrent block holds at most %u events", MDC__MAX_BLOCK_EVENTS);
        goto out;
      }
      b.evs = p;
      cap = c;
    }
    b.evs[b.n].ev = ev;
    b.evs[b.n].op = op;
    b.evs[b.n].line = w->line;
    b.evs[b.n].lane = (uint32_t)json_integer_value(json_object_get(ev, "lane"));
    b.n++;
  }
  if (closed && block_lint(r, w, &b)) goto out;
  rc = 0;
  if (closed && !atomic_load(&r->stop)) {
    w->line = start;
    w->op = "concurrent";
    r->blk_nclients = r->blk_ndevs = 0;
    for (size_t i = 0; i < r->n_clients; i++)
      if (!r->clients[i]->closed) {
        r->blk_nclients++;
        r->blk_client = r->clients[i]->value;
        r->blk_client_dev = r->clients[i]->dev;
      }
    for (size_t i = 0; i < r->n_devs; i++)
      if (!r->devs[i]->closed) {
        r->blk_ndevs++;
        r->blk_dev = r->devs[i]->dev;
      }
    r->in_block = 1;
    rc = run_block(r, w, &b);
    r->in_block = 0;
  }
out:
  for (size_t i = 0; i < b.n; i++) json_decref(b.evs[i].ev);
  free(b.evs);
  return rc;
}

