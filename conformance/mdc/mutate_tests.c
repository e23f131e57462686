/* mutate_tests.c - `mdc mutate --tests DIR`: the corpus's survivors against the project's unit
 * tests compiled with the same schemata (a build configured with -DMD_MUTAGEN_TESTS=ON; its
 * mutagen/unit_tests.txt lists the executables: docs/mutate.md, "Unit tests"). Each Criterion test
 * is a unit of its own (`--filter suite/test`): one reference pass runs every test with no mutant
 * and MD_MUTAGEN_REACH set, to learn which pass and which sites each reaches; then each survivor
 * runs only the passing tests that reach it, fastest first, up to the first that fails (its kill:
 * kind "Test", killer the test's name). Every run is an isolated child (child.c: own process group,
 * a deadline), --jobs at once, so a mutant that hangs or crashes a test is a kill, not mdc's end. */
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

#include "mdc_int.h"
#include "mutate_int.h"

/* Paths are bounded by PATH_MAX-sized buffers; a longer one is cut and its run fails. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

typedef struct unit {
  const char *exe;           /* the executable (owned by the stage's list) */
  char filter[160];          /* suite/test */
  char name[160];            /* "<executable> suite/test", the killer's name */
  int pass;                  /* passes with no mutant selected */
  double duration_s;         /* its reference run */
} unit;

typedef struct stage {
  mdc_mutate *m;
  char **exes;
  size_t n_exes;
  unit *u;
  size_t n_u;
  uint32_t **reached, *n_reached; /* per mutant: the units that reach it */
  size_t lines, matched;     /* reach log lines read, and those naming a mutant of this run's lists */
} stage;

typedef struct run_slot {
  int used;
  size_t mi;                 /* the mutant (judging), or unused */
  uint32_t ui;               /* the unit */
  mdc_cli__child ch;
} run_slot;

/* ---- the list ------------------------------------------------------------------------------- */

/* DIR/mutagen/unit_tests.txt (or DIR itself when it is a file): one executable a line. */
static int read_list(stage *s, const char *dir) {
  char path[4200];
  struct stat st;
  if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/mutagen/unit_tests.txt", dir);
  else snprintf(path, sizeof path, "%s", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "mdc mutate: --tests %s: no %s (%s): configure a build folder with -DMD_MUTAGEN_TESTS=ON and "
                    "build its target md_mutagen_tests\n", dir, path, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  char line[4200];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    if (access(line, X_OK) != 0) {
      fprintf(stderr, "mdc mutate: --tests: %s (listed in %s) is not built: build the target md_mutagen_tests\n",
              line, path);
      fclose(f);
      return MDC_EXIT_USAGE;
    }
    char **v = realloc(s->exes, (s->n_exes + 1) * sizeof *v);
    if (!v) abort();
    s->exes = v;
    s->exes[s->n_exes++] = strdup(line);
  }
  fclose(f);
  if (!s->n_exes) {
    fprintf(stderr, "mdc mutate: --tests: %s lists no test executable\n", path);
    return MDC_EXIT_USAGE;
  }
  return -1;
}

/* The tests of one executable, from Criterion's --list ("suite: N tests", then one "├── test" a line). */
static void list_units(stage *s, const char *exe) {
  char cmd[4400], line[512], suite[128] = "";
  snprintf(cmd, sizeof cmd, "env -u MD_MUTAGEN -u MD_MUTAGEN_REACH -u BXFI_MAP '%s' --list 2>/dev/null", exe);
  FILE *p = popen(cmd, "r");
  if (!p) return;
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    char *colon = strstr(line, ": ");
    if (colon && (unsigned char)line[0] < 0x80 && line[0] != '|' && line[0] != '`') {
      snprintf(suite, sizeof suite, "%.*s", (int)(colon - line), line);
      continue;
    }
    char *t = strrchr(line, ' ');
    if (!suite[0] || !t || !t[1]) continue;
    unit *v = realloc(s->u, (s->n_u + 1) * sizeof *v);
    if (!v) abort();
    s->u = v;
    unit *u = &s->u[s->n_u++];
    memset(u, 0, sizeof *u);
    u->exe = exe;
    snprintf(u->filter, sizeof u->filter, "%s/%s", suite, t + 1);
    snprintf(u->name, sizeof u->name, "%s %s", base, u->filter);
  }
  pclose(p);
}

/* ---- one test in a child --------------------------------------------------------------------- */

/* Starts unit ui with mutant id (NULL: none) selected and, when reach is set, its sites logged there. */
static int start(const stage *s, run_slot *r, uint32_t ui, const char *id, const char *reach, double timeout) {
  r->ui = ui;
  r->used = 1;
  int in_parent = mdc_cli__child_start(&r->ch, 0, mdc_cli__now() + timeout);
  if (in_parent < 0) {
    r->used = 0;
    return -1;
  }
  if (in_parent) return 0;
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
  if (id) setenv("MD_MUTAGEN", id, 1);
  else unsetenv("MD_MUTAGEN");
  if (reach) setenv("MD_MUTAGEN_REACH", reach, 1);
  else unsetenv("MD_MUTAGEN_REACH");
  /* Criterion's worker map: set when mdc itself runs under Criterion (its own tests); inherited, the
   * test executable would take itself for a worker and run nothing. */
  unsetenv("BXFI_MAP");
  const unit *u = &s->u[ui];
  char *argv[] = {(char *)u->exe, (char *)"--filter", (char *)u->filter, (char *)"-j1", NULL};
  execv(u->exe, argv);
  _exit(127);
}

/* 1 the test passed, 0 it failed, crashed or timed out. */
static int passed(run_slot *r) {
  mdc_cli__child_end(&r->ch, NULL, 0);
  r->used = 0;
  return !r->ch.timed_out && WIFEXITED(r->ch.status) && WEXITSTATUS(r->ch.status) == 0;
}

static void wait_some(run_slot *slots, int n) {
  mdc_cli__child *live[1024];
  int k = 0;
  for (int i = 0; i < n && k < 1024; i++)
    if (slots[i].used) live[k++] = &slots[i].ch;
  mdc_cli__child_wait_any(live, k);
}

/* ---- the reference pass ---------------------------------------------------------------------- */

/* Every unit once with no mutant, reach logged. -1, or an exit status. */
static int reference(stage *s) {
  mdc_mutate *m = s->m;
  char dir[] = "/tmp/mdc-mutate-units-XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "mdc mutate: mkdtemp: %s\n", strerror(errno));
    return MDC_EXIT_USAGE;
  }
  s->reached = calloc(m->n ? m->n : 1, sizeof *s->reached);
  s->n_reached = calloc(m->n ? m->n : 1, sizeof *s->n_reached);
  int jobs = m->jobs > 1024 ? 1024 : m->jobs;
  run_slot *slots = calloc((size_t)jobs, sizeof *slots);
  size_t next = 0, done = 0;
  while (done < s->n_u && !*m->stop) {
    for (int j = 0; j < jobs && next < s->n_u; j++) {
      if (slots[j].used) continue;
      char reach[4200];
      snprintf(reach, sizeof reach, "%s/%zu", dir, next);
      if (start(s, &slots[j], (uint32_t)next, NULL, reach, 3 * m->timeout_s) == 0) next++;
    }
    wait_some(slots, jobs);
    for (int j = 0; j < jobs; j++) {
      if (!slots[j].used || !mdc_cli__child_step(&slots[j].ch, mdc_cli__now())) continue;
      unit *u = &s->u[slots[j].ui];
      u->duration_s = mdc_cli__now() - slots[j].ch.t0;
      u->pass = passed(&slots[j]);
      m->units_pass += u->pass;
      char reach[4200];
      snprintf(reach, sizeof reach, "%s/%u", dir, slots[j].ui);
      s->lines += mdc_mutate__read_reach(m, reach, slots[j].ui, s->reached, s->n_reached, &s->matched);
      done++;
      if (!m->quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "\rmdc mutate: unit tests, reference pass %zu/%zu\033[K", done, s->n_u);
    }
  }
  for (int j = 0; j < jobs; j++)
    if (slots[j].used) passed(&slots[j]);
  free(slots);
  rmdir(dir);
  return *m->stop ? MDC_EXIT_UNEXPECTED : -1;
}

/* ---- the survivors ------------------------------------------------------------------------------ */

static const stage *rank_s;
static int by_duration(const void *a, const void *b) {
  const unit *x = &rank_s->u[*(const uint32_t *)a], *y = &rank_s->u[*(const uint32_t *)b];
  return x->duration_s < y->duration_s ? -1 : x->duration_s > y->duration_s;
}

/* Each survivor's candidates: the passing units that reach it, fastest first. Returns how many
 * survivors have one. */
static size_t candidates(stage *s) {
  size_t with = 0;
  rank_s = s;
  for (size_t i = 0; i < s->m->n; i++) {
    mdc_mutant *u = &s->m->v[i];
    free(u->cand);
    u->cand = NULL;
    u->n_cand = u->next = 0;
    u->busy = 0;
    if (!u->selected || u->state != MU_SURVIVED) continue;
    u->cand = malloc((s->n_reached[i] ? s->n_reached[i] : 1) * sizeof *u->cand);
    for (uint32_t k = 0; k < s->n_reached[i]; k++)
      if (s->u[s->reached[i][k]].pass) u->cand[u->n_cand++] = s->reached[i][k];
    qsort(u->cand, u->n_cand, sizeof *u->cand, by_duration);
    with += u->n_cand > 0;
  }
  return with;
}

static double unit_timeout(const mdc_mutate *m, const unit *u) {
  double t = 10 * u->duration_s + 1;
  if (t < 2) t = 2;
  return t < m->timeout_s ? t : m->timeout_s;
}

/* The next survivor with a test left to run that is not running one: one already begun (before
 * *next) first, so at most --jobs are open at once; else the next from *next on. */
static size_t pick(stage *s, size_t *next) {
  mdc_mutate *m = s->m;
  for (size_t i = 0; i < *next; i++) {
    mdc_mutant *u = &m->v[i];
    if (u->n_cand && !u->busy && u->state == MU_SURVIVED && u->next < u->n_cand) return i;
  }
  for (; *next < m->n; (*next)++) {
    mdc_mutant *u = &m->v[*next];
    if (u->n_cand && u->state == MU_SURVIVED && u->next == 0) return (*next)++;
  }
  return (size_t)-1;
}

static void judge(stage *s) {
  mdc_mutate *m = s->m;
  int jobs = m->jobs > 1024 ? 1024 : m->jobs;
  run_slot *slots = calloc((size_t)jobs, sizeof *slots);
  size_t next = 0;
  for (;;) {
    for (int j = 0; j < jobs && !*m->stop; j++) {
      if (slots[j].used) continue;
      size_t mi = pick(s, &next);
      if (mi == (size_t)-1) break;
      mdc_mutant *u = &m->v[mi];
      slots[j].mi = mi;
      const unit *t = &s->u[u->cand[u->next]];
      if (start(s, &slots[j], u->cand[u->next], u->id, NULL, unit_timeout(m, t)) == 0) u->busy = 1, u->next++;
    }
    int running = 0;
    for (int j = 0; j < jobs; j++) running += slots[j].used;
    if (!running) break;
    wait_some(slots, jobs);
    for (int j = 0; j < jobs; j++) {
      if (!slots[j].used || !mdc_cli__child_step(&slots[j].ch, mdc_cli__now())) continue;
      double dt = mdc_cli__now() - slots[j].ch.t0;
      mdc_mutant *u = &m->v[slots[j].mi];
      uint32_t ui = slots[j].ui;
      int ok = passed(&slots[j]);
      u->busy = 0;
      u->duration_s += dt;
      m->units_run++;
      if (!ok) {
        u->state = MU_KILLED;
        u->killed_by = -1;
        snprintf(u->kill_kind, sizeof u->kill_kind, "Test");
        snprintf(u->killer, sizeof u->killer, "%s", s->u[ui].name);
        m->units_killed++;
      }
      if (!m->quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "\rmdc mutate: unit tests: killed %zu, %zu runs\033[K", m->units_killed, m->units_run);
    }
  }
  for (int j = 0; j < jobs; j++)
    if (slots[j].used) passed(&slots[j]), m->v[slots[j].mi].busy = 0;
  free(slots);
}

/* ---- the stage ----------------------------------------------------------------------------------- */

int mdc_mutate__tests_check(const mdc_mutate *m) {
  if (!m->tests) return -1;
  stage s = {0};
  int rc = read_list(&s, m->tests);
  for (size_t i = 0; i < s.n_exes; i++) free(s.exes[i]);
  free(s.exes);
  return rc;
}

int mdc_mutate__tests(mdc_mutate *m) {
  if (!m->tests) return -1;
  double t0 = mdc_cli__now();
  stage s = {.m = m};
  int rc = read_list(&s, m->tests);
  for (size_t i = 0; rc < 0 && i < s.n_exes; i++) list_units(&s, s.exes[i]);
  m->units = s.n_u;
  if (rc < 0 && !s.n_u) {
    fprintf(stderr, "mdc mutate: --tests %s: the executables list no test (Criterion --list)\n", m->tests);
    rc = MDC_EXIT_USAGE;
  }
  if (rc < 0) rc = reference(&s);
  m->units_ref_s = mdc_cli__now() - t0;
  if (rc < 0) {
    size_t with = candidates(&s);
    /* Sites reached but none of them ours: the test build was compiled from other sources. */
    if (s.lines && !s.matched)
      fprintf(stderr, "mdc mutate: --tests %s: its tests reach %zu mutant sites, none with an id of %s: a test build "
                      "of other sources?\n", m->tests, s.lines, m->schemata);
    if (!m->quiet)
      fprintf(stderr, "%smdc mutate: unit tests: %zu in %zu executables, %zu pass with no mutant (%.1f s); %zu "
                      "survivors reached by one\n", isatty(STDERR_FILENO) ? "\r" : "", s.n_u, s.n_exes,
              m->units_pass, m->units_ref_s, with);
    judge(&s);
    if (!m->quiet && isatty(STDERR_FILENO)) fprintf(stderr, "\n");
  }
  for (size_t i = 0; s.reached && i < m->n; i++) free(s.reached[i]);
  free(s.reached), free(s.n_reached), free(s.u);
  for (size_t i = 0; i < s.n_exes; i++) free(s.exes[i]);
  free(s.exes);
  m->units_s = mdc_cli__now() - t0;
  return rc >= 0 ? rc : *m->stop ? MDC_EXIT_UNEXPECTED : -1;
}
