/* mutate_judge.c - `mdc mutate`'s judging: the reference pass (every trace against the schemata
 * build with no mutant, each logging the mutant sites it reaches), then each selected mutant
 * against the traces that pass and reach it, most-killing first, up to the first that kills it;
 * --jobs cases at once, each in an isolated child (child.c: own process group, pidfd, deadline). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "mutate_int.h"

void mdc_mutate__add(mdc_mutate *m, const char *id, const char *file, const char *fn, uint32_t line, const char *op,
                     int skipped, const char *before, const char *after) {
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 1024;
    m->v = realloc(m->v, m->cap * sizeof *m->v);
    if (!m->v) abort();
  }
  mdc_mutant *u = &m->v[m->n++];
  memset(u, 0, sizeof *u);
  u->id = strdup(id), u->file = strdup(file), u->function = strdup(fn), u->op = strdup(op);
  u->before = strdup(before), u->after = strdup(after);
  u->line = line;
  u->skipped = skipped;
  u->killed_by = u->reach = u->reach_fn = -1;
}

void mdc_mutate__free(mdc_mutate *m) {
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    free(u->id), free(u->file), free(u->function), free(u->op), free(u->before), free(u->after), free(u->cand);
  }
  free(m->v);
  for (size_t i = 0; i < m->n_t; i++) free(m->t[i].path);
  free(m->t);
  free(m->order);
  free(m->ix);
  memset(m, 0, sizeof *m);
}

/* ---- one case in a child ------------------------------------------------------------------- */

typedef struct slot {
  int used;
  size_t mi;                 /* the mutant (judging) */
  uint32_t ti;               /* the trace */
  mdc_cli__child ch;
} slot;

/* Starts trace ti against the schemata driver with mutant id (NULL: none) selected and, when
 * reach is set, the sites reached logged there. 0, or -1 (fork failed). */
static int start(const mdc_mutate *m, slot *s, const char *id, uint32_t ti, const char *reach, double timeout) {
  memset(&s->ch, 0, sizeof s->ch);
  s->ti = ti;
  s->used = 1;
  int in_parent = mdc_cli__child_start(&s->ch, sizeof(mdc_result), mdc_cli__now() + timeout);
  if (in_parent < 0) {
    s->used = 0;
    return -1;
  }
  if (in_parent) return 0;
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
  if (id) setenv("MD_MUTAGEN", id, 1);
  else unsetenv("MD_MUTAGEN");
  if (reach) setenv("MD_MUTAGEN_REACH", reach, 1);
  else unsetenv("MD_MUTAGEN_REACH");
  mdc_result r;
  memset(&r, 0, sizeof r);
  void *dl = NULL;
  char err[512];
  const md_driver *d = mdc_driver_load(m->driver, &dl, err, sizeof err);
  if (!d) {
    r.verdict = MDC_FAIL;
    snprintf(r.message, sizeof r.message, "driver: %s", err);
  } else {
    mdc_trace_opts to = {.config = m->config, .line = &s->ch.page->line, .op = s->ch.page->op,
                         .op_len = sizeof s->ch.page->op,
                         /* SPEC 8.11: wording is judged for the reference driver only */
                         .strict_messages = !m->source};
    mdc_trace_run_opts(d, m->t[ti].path, &to, &r);
  }
  mdc_cli__child_report(&s->ch, &r, sizeof r);
  _exit(0);
}

/* The case's status: Pass, NotSupported, Fail, Crash or Timeout. */
static mdc_status finish(slot *s) {
  mdc_result r;
  size_t got = mdc_cli__child_end(&s->ch, &r, sizeof r);
  s->used = 0;
  if (s->ch.timed_out) return MDC_S_TIMEOUT;
  if (got == sizeof r && WIFEXITED(s->ch.status) && WEXITSTATUS(s->ch.status) == 0)
    return r.verdict == MDC_PASS ? MDC_S_PASS : r.verdict == MDC_NOT_SUPPORTED ? MDC_S_NOT_SUPPORTED : MDC_S_FAIL;
  return MDC_S_CRASH;
}

/* Waits until a running child may have ended (its pidfd, or the nearest deadline). */
static void wait_some(slot *slots, int n) {
  mdc_cli__child *live[1024];
  int k = 0;
  for (int i = 0; i < n && k < 1024; i++)
    if (slots[i].used) live[k++] = &slots[i].ch;
  mdc_cli__child_wait_any(live, k);
}

/* ---- the reference pass ---------------------------------------------------------------------- */

struct mdc_mutate_ix {
  const char *id;
  size_t mi;
};

static int by_id(const void *a, const void *b) {
  return strcmp(((const struct mdc_mutate_ix *)a)->id, ((const struct mdc_mutate_ix *)b)->id);
}

size_t mdc_mutate__read_reach(mdc_mutate *m, const char *path, uint32_t who, uint32_t **reached, uint32_t *n_reached,
                              size_t *matched) {
  if (!m->ix) {   /* the ids sorted once (m->v is sorted by file and line) */
    m->ix = malloc((m->n ? m->n : 1) * sizeof *m->ix);
    if (!m->ix) abort();
    for (size_t i = 0; i < m->n; i++) m->ix[i] = (struct mdc_mutate_ix){m->v[i].id, i};
    qsort(m->ix, m->n, sizeof *m->ix, by_id);
  }
  size_t lines = 0, hits = 0;
  char line[400];
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    lines++;
    struct mdc_mutate_ix key = {line, 0}, *hit = bsearch(&key, m->ix, m->n, sizeof *m->ix, by_id);
    if (!hit) continue;
    hits++;
    uint32_t *r = realloc(reached[hit->mi], (n_reached[hit->mi] + 1) * sizeof *r);
    if (!r) abort();
    reached[hit->mi] = r;
    r[n_reached[hit->mi]++] = who;
  }
  if (f) fclose(f);
  unlink(path);
  if (matched) *matched += hits;
  return lines;
}

static int kills_of(void *ctx, const char *name, uint32_t n) {
  mdc_mutate *m = ctx;
  for (size_t i = 0; i < m->n_t; i++)
    if (!strcmp(m->t[i].name, name)) m->t[i].kills_before = n;
  return 0;
}

static mdc_mutate *order_m;
static int by_rank(const void *a, const void *b) {
  const mdc_mutate_trace *x = &order_m->t[*(const uint32_t *)a], *y = &order_m->t[*(const uint32_t *)b];
  if (x->kills_before != y->kills_before) return x->kills_before > y->kills_before ? -1 : 1;
  if (x->duration_s != y->duration_s) return x->duration_s < y->duration_s ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The traces, their verdicts and what each reaches; the trace order. -1, or an exit status. */
static int reference(mdc_mutate *m) {
  mdc_cli__paths paths = {0};
  char err[1024];
  const char *cp[1] = {m->corpus};
  if (mdc_cli__collect(cp, 1, &paths, err, sizeof err)) {
    fprintf(stderr, "mdc mutate: %s\n", err);
    return MDC_EXIT_USAGE;
  }
  m->t = calloc(paths.n ? paths.n : 1, sizeof *m->t);
  m->n_t = paths.n;
  for (size_t i = 0; i < paths.n; i++) {
    mdc_trace_header h;
    char herr[256];
    m->t[i].path = paths.v[i];
    snprintf(m->t[i].name, sizeof m->t[i].name, "%s",
             mdc_trace_read_header(paths.v[i], &h, herr, sizeof herr) == 0 && h.name[0] ? h.name : paths.v[i]);
  }
  free(paths.v);
  /* What killed most before goes first (the store's history of mutate runs). */
  mdc_store *st = NULL;
  if (!m->no_db && mdc_store_open_read(m->db, &st, err, sizeof err) == 0) {
    mdc_store_mutate_kill_counts(st, kills_of, m);
    mdc_store_close(st);
  }
  char dir[] = "/tmp/mdc-mutate-reach-XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "mdc mutate: mkdtemp: %s\n", strerror(errno));
    return MDC_EXIT_USAGE;
  }
  /* reached[mi]: the traces that reach mutant mi (grown as the logs are read). */
  uint32_t **reached = calloc(m->n ? m->n : 1, sizeof *reached);
  uint32_t *n_reached = calloc(m->n ? m->n : 1, sizeof *n_reached);
  int jobs = m->jobs > 1024 ? 1024 : m->jobs;
  slot *slots = calloc((size_t)jobs, sizeof *slots);
  double t0 = mdc_cli__now();
  size_t next = 0, done = 0;
  size_t n_pass = 0;
  while (done < m->n_t && !*m->stop) {
    for (int j = 0; j < jobs && next < m->n_t; j++) {
      if (slots[j].used) continue;
      char reach[4200];
      snprintf(reach, sizeof reach, "%s/%zu", dir, next);
      double t = mdc_cli__now();
      m->t[next].duration_s = t; /* start time until it ends */
      if (start(m, &slots[j], NULL, (uint32_t)next, reach, m->timeout_s * 3) == 0) next++;
    }
    wait_some(slots, jobs);
    for (int j = 0; j < jobs; j++) {
      if (!slots[j].used || !mdc_cli__child_step(&slots[j].ch, mdc_cli__now())) continue;
      uint32_t ti = slots[j].ti;
      mdc_status s = finish(&slots[j]);
      mdc_mutate_trace *t = &m->t[ti];
      t->duration_s = mdc_cli__now() - t->duration_s;
      t->pass = s == MDC_S_PASS;
      n_pass += t->pass;
      done++;
      char reach[4200];
      snprintf(reach, sizeof reach, "%s/%u", dir, ti);
      mdc_mutate__read_reach(m, reach, ti, reached, n_reached, NULL);
      if (!m->quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "\rmdc mutate: reference pass %zu/%zu\033[K", done, m->n_t);
    }
  }
  for (int j = 0; j < jobs; j++)
    if (slots[j].used) finish(&slots[j]);
  free(slots);
  rmdir(dir);
  m->ref_s = mdc_cli__now() - t0;
  m->cases_run += done;
  if (!m->quiet)
    fprintf(stderr, "%smdc mutate: reference pass: %zu traces, %zu pass on the schemata build, %.1f s\n",
            isatty(STDERR_FILENO) ? "\r" : "", m->n_t, n_pass, m->ref_s);
  /* The order, and each mutant's candidates: the passing traces that reach it, in that order. */
  m->order = malloc((m->n_t ? m->n_t : 1) * sizeof *m->order);
  uint32_t *rank = malloc((m->n_t ? m->n_t : 1) * sizeof *rank);
  for (size_t i = 0; i < m->n_t; i++) m->order[i] = (uint32_t)i;
  order_m = m;
  qsort(m->order, m->n_t, sizeof *m->order, by_rank);
  for (size_t i = 0; i < m->n_t; i++) rank[m->order[i]] = (uint32_t)i;
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    u->cand = malloc((n_reached[i] ? n_reached[i] : 1) * sizeof *u->cand);
    for (uint32_t k = 0; k < n_reached[i]; k++)
      if (m->t[reached[i][k]].pass) u->cand[u->n_cand++] = reached[i][k];
    /* insertion sort by rank: the lists are short */
    for (uint32_t a = 1; a < u->n_cand; a++)
      for (uint32_t b = a; b > 0 && rank[u->cand[b]] < rank[u->cand[b - 1]]; b--) {
        uint32_t x = u->cand[b];
        u->cand[b] = u->cand[b - 1], u->cand[b - 1] = x;
      }
    /* The nearest trace shown for a survivor: the fastest passing one that reaches it (the try order
     * puts the most-killing first, which is rarely the smallest trace to read). */
    u->reach = n_reached[i] ? (int)reached[i][0] : -1;
    for (uint32_t k = 0; k < u->n_cand; k++)
      if (k == 0 || m->t[u->cand[k]].duration_s < m->t[u->reach].duration_s) u->reach = (int)u->cand[k];
    free(reached[i]);
  }
  /* A mutant no trace reaches: the nearest trace is one that reaches its function. */
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    if (u->reach >= 0) continue;
    for (size_t k = 0; k < m->n && u->reach_fn < 0; k++)
      if (m->v[k].reach >= 0 && !strcmp(m->v[k].file, u->file) && !strcmp(m->v[k].function, u->function))
        u->reach_fn = m->v[k].reach;
  }
  free(rank);
  free(reached);
  free(n_reached);
  if (n_pass == 0) {
    fprintf(stderr, "mdc mutate: no trace passes on the schemata build of %s with no mutant selected\n", m->driver);
    return MDC_EXIT_USAGE;
  }
  return *m->stop ? MDC_EXIT_UNEXPECTED : -1;
}

/* ---- judging ----------------------------------------------------------------------------------- */

static double case_timeout(const mdc_mutate *m, uint32_t ti) {
  double t = 10 * m->t[ti].duration_s + 1;
  if (t < 2) t = 2;
  return t < m->timeout_s ? t : m->timeout_s;
}

int mdc_mutate__judge(mdc_mutate *m) {
  int rc = reference(m);
  if (rc >= 0) return rc;
  int jobs = m->jobs > 1024 ? 1024 : m->jobs;
  slot *slots = calloc((size_t)jobs, sizeof *slots);
  size_t *open = calloc((size_t)jobs, sizeof *open), n_open = 0;
  size_t next = 0, total = 0, judged = 0, killed = 0;
  for (size_t i = 0; i < m->n; i++) total += m->v[i].selected && m->v[i].state == MU_PENDING;
  double t0 = mdc_cli__now();
  for (;;) {
    if (*m->stop) break;
    /* Fill the free slots: an open mutant waiting for its next trace, else a new one. */
    for (int j = 0; j < jobs; j++) {
      if (slots[j].used) continue;
      size_t mi = (size_t)-1;
      for (size_t k = 0; k < n_open && mi == (size_t)-1; k++)
        if (!m->v[open[k]].busy) mi = open[k];
      while (mi == (size_t)-1 && n_open < (size_t)jobs && next < m->n) {
        mdc_mutant *u = &m->v[next];
        if (u->selected && u->state == MU_PENDING) {
          if (u->n_cand == 0) {
            u->state = MU_SURVIVED; /* no passing trace reaches it */
            judged++;
          } else {
            open[n_open++] = next;
            mi = next;
          }
        }
        next++;
      }
      if (mi == (size_t)-1) break;
      mdc_mutant *u = &m->v[mi];
      slots[j].mi = mi;
      if (start(m, &slots[j], u->id, u->cand[u->next], NULL, case_timeout(m, u->cand[u->next])) == 0) {
        u->busy = 1;
        u->next++;
        u->traces_run++;
      }
    }
    int running = 0;
    for (int j = 0; j < jobs; j++) running += slots[j].used;
    if (!running) break;
    wait_some(slots, jobs);
    for (int j = 0; j < jobs; j++) {
      if (!slots[j].used || !mdc_cli__child_step(&slots[j].ch, mdc_cli__now())) continue;
      double dt = mdc_cli__now() - slots[j].ch.t0;
      mdc_status s = finish(&slots[j]);
      m->cases_run++;
      mdc_mutant *u = &m->v[slots[j].mi];
      u->busy = 0;
      u->duration_s += dt;
      int dead = s != MDC_S_PASS && s != MDC_S_NOT_SUPPORTED;
      if (dead) {
        u->state = MU_KILLED;
        u->killed_by = (int)slots[j].ti;
        snprintf(u->kill_kind, sizeof u->kill_kind, "%s", mdc_cli__status_name(s));
        killed++;
      } else if (u->next >= u->n_cand) {
        u->state = MU_SURVIVED;
      }
      if (u->state != MU_PENDING) {
        judged++;
        for (size_t k = 0; k < n_open; k++)
          if (open[k] == slots[j].mi) {
            open[k] = open[--n_open];
            break;
          }
      }
      if (!m->quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "\rmdc mutate: [%zu/%zu] killed %zu, %zu cases\033[K", judged, total, killed, m->cases_run);
    }
  }
  for (int j = 0; j < jobs; j++)
    if (slots[j].used) finish(&slots[j]), m->v[slots[j].mi].busy = 0;
  /* A mutant the stop cut short is not judged. */
  for (size_t k = 0; k < n_open; k++)
    if (m->v[open[k]].state == MU_PENDING) m->v[open[k]].selected = 0;
  free(slots);
  free(open);
  m->judge_s = mdc_cli__now() - t0;
  if (!m->quiet && isatty(STDERR_FILENO)) fprintf(stderr, "\n");
  return -1;
}
