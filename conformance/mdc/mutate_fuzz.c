/* mutate_fuzz.c - `mdc mutate --fuzz S`: the corpus's survivors handed to the fuzz targets
 * (docs/mutate.md "Fuzzing the survivors"). The program targets (tokens, shapes, concurrency:
 * the ones with the state-model oracle; trace attacks mdc's own engine) are matched to a
 * survivor by data: every seed of every target is replayed once through the schemata driver
 * with no mutant and its reach logged (MD_MUTAGEN_REACH), and a survivor goes to the target
 * with the most seeds reaching its line (else its function; else it is skipped). Then, --jobs at
 * a time: the reaching seeds replayed with the mutant selected (md_fuzz_replay), and, when none
 * finds anything, an AFL++ campaign of S seconds on the smallest of them (`mdc fuzz` in a child,
 * MD_MUTAGEN=<id> in its environment). A finding kills only after triage: its input replayed
 * with the mutant finds again, and three times with no mutant finds nothing. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc_int.h"
#include "mutate_int.h"
#include "paths.h"

#pragma GCC diagnostic ignored "-Wformat-truncation" /* paths are PATH_MAX-bounded; a cut one fails to open */

#define NT 3               /* the program targets */
#define CAMPAIGN_SEEDS 32  /* the smallest reaching seeds a campaign starts from */
static const char *const targets[NT] = {"tokens", "shapes", "concurrency"};

typedef struct seeds {
  char **path;
  size_t n;
} seeds;

/* One survivor's match and verdict. */
typedef struct surv {
  size_t mi;
  uint8_t *site[NT], *fn[NT]; /* per seed: reaches its line, its function */
  size_t n_site[NT], n_fn[NT];
  int target;                 /* -1: no seed reaches its function */
  int by_fn;                  /* only its function is reached */
} surv;

typedef struct fz {
  mdc_mutate *m;
  char replay[4096], out[4096];
  seeds s[NT];
  surv *v;
  size_t n;
} fz;

/* ---- checks and seeds ----------------------------------------------------------------------- */

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_seeds(const char *dir, seeds *s) {
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "find '%s' -maxdepth 1 -type f", dir);
  FILE *p = popen(cmd, "r");
  char line[4400];
  while (p && fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    s->path = realloc(s->path, (s->n + 1) * sizeof *s->path);
    if (!s->path) abort();
    s->path[s->n++] = strdup(line);
  }
  if (p) pclose(p);
  if (s->n) qsort(s->path, s->n, sizeof *s->path, by_str);
  return s->n ? 0 : -1;
}

int mdc_mutate__fuzz_check(mdc_mutate *m) {
  char path[4400];
  if (!m->fuzz_build) m->fuzz_build = mdc_cli__fuzz_build_default();
  if (!m->fuzz_out) m->fuzz_out = "results/mutate-fuzz";
  static char seeds_buf[4200];
  if (!m->fuzz_seeds) snprintf(seeds_buf, sizeof seeds_buf, "%s/seeds", mdc_cli__fuzz_data_dir());
  else snprintf(seeds_buf, sizeof seeds_buf, "%s", m->fuzz_seeds);
  m->fuzz_seeds = seeds_buf;
  if (!mdc_cli__fuzz_in_path("afl-fuzz", path, sizeof path)) {
    fprintf(stderr, "mdc mutate: --fuzz: afl-fuzz is not installed (not in PATH): `make fuzz-build` installs afl++\n");
    return MDC_EXIT_USAGE;
  }
  for (int t = 0; t < NT; t++) {
    char name[64];
    snprintf(name, sizeof name, "md_fuzz_%s", targets[t]);
    mdc_cli__fuzz_bin(path, sizeof path, m->fuzz_build, name);
    if (!mdc_cli__fuzz_exists_exec(path)) {
      fprintf(stderr, "mdc mutate: --fuzz: %s is not built: run `make fuzz-build` (or give --fuzz-build DIR)\n", path);
      return MDC_EXIT_USAGE;
    }
  }
  if (!mdc_cli__fuzz_exists_exec(mdc_cli__fuzz_replay_path())) {
    fprintf(stderr, "mdc mutate: --fuzz: %s is not built (target md_fuzz_replay)\n", mdc_cli__fuzz_replay_path());
    return MDC_EXIT_USAGE;
  }
  for (int t = 0; t < NT; t++) {
    snprintf(path, sizeof path, "%s/%s", m->fuzz_seeds, targets[t]);
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "mdc mutate: --fuzz: no seeds at %s (target mdc_fuzz_seeds, or --fuzz-seeds DIR)\n", path);
      return MDC_EXIT_USAGE;
    }
  }
  return -1;
}

/* ---- children ---------------------------------------------------------------------------------- */

/* argv with stdout to out and stderr to err (NULL: /dev/null), MD_MUTAGEN=id (NULL: none) and
 * reach logging to reach (NULL: none), in a process group of its own. The pid, or -1. */
static pid_t spawn(char *const argv[], const char *id, const char *reach, const char *out, const char *err) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) setpgid(pid, pid);
    return pid;
  }
  setpgid(0, 0);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int nul = open("/dev/null", O_RDONLY);
  if (o < 0 || e < 0 || nul < 0) _exit(127);
  dup2(o, STDOUT_FILENO), dup2(e, STDERR_FILENO), dup2(nul, STDIN_FILENO);
  setenv("MD_MUTAGEN", id ? id : "", 1);
  setenv("MD_MUTAGEN_REACH", reach ? reach : "", 1);
  execv(argv[0], argv);
  _exit(127);
}

/* Waits for pid; 0 and its status in *st, or -1 once deadline has passed (then killed). */
static int wait_until(pid_t pid, double deadline, int *st) {
  for (;;) {
    pid_t r = waitpid(pid, st, WNOHANG);
    if (r == pid) return 0;
    if (r < 0 && errno != EINTR) return -1;
    if (mdc_cli__now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, st, 0);
      return -1;
    }
    poll(NULL, 0, 5);
  }
}

/* md_fuzz_replay's argv for target t: the driver, its config, the options, then the inputs. */
static int replay_argv(const fz *z, int t, const char **av, const char *opt) {
  int k = 0;
  av[k++] = z->replay, av[k++] = "--target", av[k++] = targets[t], av[k++] = "--driver", av[k++] = z->m->driver;
  av[k++] = "--config", av[k++] = z->m->config, av[k++] = "--allow-findings", av[k++] = "--timeout", av[k++] = "10";
  if (opt) av[k++] = opt;
  return k;
}

/* ---- which target: the seeds' reach ---------------------------------------------------------- */

typedef struct key_ix {
  const char *key;
  size_t si;
} key_ix;

static int by_key(const void *a, const void *b) { return strcmp(((const key_ix *)a)->key, ((const key_ix *)b)->key); }

/* The length of id's "file:function" (the id less its ":op:n"). */
static size_t fn_len(const char *id) {
  const char *a = strrchr(id, ':'), *b = a;
  while (b && b > id && *--b != ':') {}
  return b && b > id ? (size_t)(b - id) : strlen(id);
}

/* Reads one seed's reach log into the survivors' site and fn marks. */
static void read_reach(fz *z, int t, size_t seed, const char *path, const key_ix *ids, const key_ix *fns) {
  FILE *f = fopen(path, "r");
  char line[512], fkey[512];
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    key_ix k = {line, 0};
    const key_ix *hit = bsearch(&k, ids, z->n, sizeof *ids, by_key);
    if (hit) z->v[hit->si].site[t][seed] = 1;
    snprintf(fkey, sizeof fkey, "%.*s", (int)fn_len(line), line);
    k.key = fkey;
    hit = bsearch(&k, fns, z->n, sizeof *fns, by_key);
    for (const key_ix *h = hit; h && h > fns && !by_key(h - 1, &k);) hit = --h;
    for (const key_ix *h = hit; h && h < fns + z->n && !by_key(h, &k); h++) z->v[h->si].fn[t][seed] = 1;
  }
  if (f) fclose(f);
  unlink(path);
}

typedef struct reach_run {
  pid_t pid;
  int t;
  size_t seed;
  double t0;
} reach_run;

/* Every seed of every target once, with no mutant, its reach logged; --jobs at a time. */
static void reach_pass(fz *z, const char *tmp) {
  key_ix *ids = malloc((z->n + 1) * sizeof *ids), *fns = malloc((z->n + 1) * sizeof *fns);
  char *fkeys = malloc(z->n * 512 + 1);
  for (size_t i = 0; i < z->n; i++) {
    const char *id = z->m->v[z->v[i].mi].id;
    snprintf(fkeys + i * 512, 512, "%.*s", (int)fn_len(id), id);
    ids[i] = (key_ix){id, i}, fns[i] = (key_ix){fkeys + i * 512, i};
  }
  qsort(ids, z->n, sizeof *ids, by_key);
  qsort(fns, z->n, sizeof *fns, by_key);
  int jobs = z->m->jobs < 1 ? 1 : z->m->jobs > 64 ? 64 : z->m->jobs;
  reach_run run[64];
  int running = 0, t = 0;
  size_t next = 0;
  while (!*z->m->stop && (t < NT || running)) {
    while (running < jobs && t < NT) {
      if (next >= z->s[t].n) {
        t++, next = 0;
        continue;
      }
      char reach[4400];
      snprintf(reach, sizeof reach, "%s/reach-%d-%zu", tmp, t, next);
      const char *av[16];
      int k = replay_argv(z, t, av, "--quiet");
      av[k++] = z->s[t].path[next], av[k] = NULL;
      pid_t pid = spawn((char *const *)av, NULL, reach, NULL, NULL);
      if (pid > 0) run[running++] = (reach_run){pid, t, next, mdc_cli__now()};
      next++;
    }
    for (int j = 0; j < running; j++) {
      int st;
      pid_t r = waitpid(run[j].pid, &st, WNOHANG);
      if (r == 0 && mdc_cli__now() - run[j].t0 < 60) continue;
      if (r == 0) kill(-run[j].pid, SIGKILL), waitpid(run[j].pid, &st, 0);
      char reach[4400];
      snprintf(reach, sizeof reach, "%s/reach-%d-%zu", tmp, run[j].t, run[j].seed);
      read_reach(z, run[j].t, run[j].seed, reach, ids, fns);
      run[j--] = run[--running];
    }
    if (running) poll(NULL, 0, 2);
  }
  for (int j = 0; j < running; j++) { /* stopped: the logs left are of no use */
    char reach[4400];
    kill(-run[j].pid, SIGKILL), waitpid(run[j].pid, NULL, 0);
    snprintf(reach, sizeof reach, "%s/reach-%d-%zu", tmp, run[j].t, run[j].seed);
    unlink(reach);
  }
  free(ids), free(fns), free(fkeys);
}

/* The target of each survivor: the most seeds reaching its line, else its function. */
static void choose(fz *z) {
  for (size_t i = 0; i < z->n; i++) {
    surv *u = &z->v[i];
    u->target = -1;
    for (int t = 0; t < NT; t++)
      for (size_t k = 0; k < z->s[t].n; k++) u->n_site[t] += u->site[t][k], u->n_fn[t] += u->fn[t][k];
    for (int t = 0; t < NT; t++)
      if (u->n_site[t] && (u->target < 0 || u->n_site[t] > u->n_site[u->target] ||
                           (u->n_site[t] == u->n_site[u->target] && u->n_fn[t] > u->n_fn[u->target])))
        u->target = t;
    if (u->target >= 0) continue;
    for (int t = 0; t < NT; t++)
      if (u->n_fn[t] && (u->target < 0 || u->n_fn[t] > u->n_fn[u->target])) u->target = t, u->by_fn = 1;
  }
}

/* ---- triage ------------------------------------------------------------------------------------ */

enum { OUT_OK, OUT_FINDING, OUT_CRASH, OUT_HANG, OUT_ERROR };

/* The input through target t, n times, with mutant id (NULL: none): the worst outcome of the
 * runs, the finding's signature in sig. */
static int outcome(const fz *z, int t, const char *input, const char *id, int n, char *sig, size_t len) {
  const char *av[20];
  char rep[16], out[4400], err[4400];
  snprintf(rep, sizeof rep, "%d", n);
  int k = replay_argv(z, t, av, NULL);
  if (n > 1) av[k++] = "--repeat", av[k++] = rep;
  av[k++] = input, av[k] = NULL;
  snprintf(out, sizeof out, "%s/triage.out", z->out);
  snprintf(err, sizeof err, "%s/triage.err", z->out);
  snprintf(sig, len, "-");
  int st = 0;
  pid_t pid = spawn((char *const *)av, id, NULL, out, err);
  if (pid < 0 || wait_until(pid, mdc_cli__now() + 30.0 * n, &st)) return OUT_HANG;
  char line[2048], a[1024], b[512];
  FILE *f = fopen(out, "r");
  int r = OUT_OK;
  while (f && fgets(line, sizeof line, f)) {
    int hits = 0, of = 0;
    if (sscanf(line, "finding %1023s %511s", a, b) == 2) r = OUT_FINDING, snprintf(sig, len, "%s", b);
    else if (sscanf(line, "reproduced %d/%d %511s", &hits, &of, b) == 3 && hits > 0) r = OUT_FINDING, snprintf(sig, len, "%s", b);
    else if (!strncmp(line, "error ", 6)) r = OUT_ERROR, snprintf(sig, len, "error");
  }
  if (f) fclose(f);
  if (WIFSIGNALED(st)) r = OUT_CRASH, snprintf(sig, len, "crash:signal-%d", WTERMSIG(st));
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 3) r = OUT_HANG, snprintf(sig, len, "hang");
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 2 && r == OUT_OK) r = OUT_ERROR, snprintf(sig, len, "error");
  return r;
}

/* Whether input kills the survivor: it finds with the mutant, and not in 3 runs without. Kills
 * it then (the input kept in <fuzz-out>/kills/). */
static int triage(fz *z, surv *u, const char *input, const char *how) {
  mdc_mutant *mu = &z->m->v[u->mi];
  char sig[512], base[512];
  int r = outcome(z, u->target, input, mu->id, 1, sig, sizeof sig);
  if (r == OUT_OK || outcome(z, u->target, input, NULL, 3, base, sizeof base) != OUT_OK) return 0;
  char keep[4400], name[400];
  snprintf(name, sizeof name, "%s", mu->id);
  for (char *p = name; *p; p++)
    if (*p == '/' || *p == ':') *p = '_';
  snprintf(keep, sizeof keep, "%s/kills/%s.%s", z->out, name, targets[u->target]);
  mdc_cli__mkdir_parent(keep);
  char *av[] = {(char *)"cp", (char *)input, keep, NULL};
  int to;
  char o[256];
  mdc_cli__fuzz_run_capture(av, NULL, 30, o, sizeof o, &to);
  mu->state = MU_KILLED;
  snprintf(mu->kill_kind, sizeof mu->kill_kind, "fuzz");
  snprintf(mu->killer, sizeof mu->killer, "fuzz:%s:%s", targets[u->target], keep);
  z->m->fuzz_killed++;
  if (!z->m->quiet)
    fprintf(stderr, "mdc mutate: --fuzz: %s killed by %s (%s: %s, kept as %s)\n", mu->id, targets[u->target], how,
            sig, keep);
  return 1;
}

/* ---- one survivor: its seeds with the mutant, then a campaign --------------------------------- */

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *w) {
  (void)st, (void)type, (void)w;
  return remove(p);
}


typedef struct slot {
  surv *u;
  int phase;                 /* 0 free, 1 seeds, 2 campaign */
  pid_t pid;
  double t0, deadline, left;
  char dir[4400];
  const char **argv;         /* phase 1: md_fuzz_replay's argv, */
  const char **inputs;       /* its seeds in order (within argv) */
  size_t n_inputs;
  int campaigns;
} slot;

static const uint8_t *reaching(const surv *u) { return u->by_fn ? u->fn[u->target] : u->site[u->target]; }

static int start_seeds(fz *z, slot *s) {
  surv *u = s->u;
  const seeds *ss = &z->s[u->target];
  const uint8_t *r = reaching(u);
  s->argv = malloc((ss->n + 16) * sizeof *s->argv);
  int k = replay_argv(z, u->target, s->argv, NULL);
  s->inputs = s->argv + k;
  s->n_inputs = 0;
  for (size_t i = 0; i < ss->n; i++)
    if (r[i]) s->inputs[s->n_inputs++] = ss->path[i];
  s->inputs[s->n_inputs] = NULL;
  char out[4600];
  snprintf(out, sizeof out, "%s/seeds.out", s->dir);
  s->pid = spawn((char *const *)s->argv, z->m->v[u->mi].id, NULL, out, NULL);
  s->phase = 1;
  s->deadline = mdc_cli__now() + 60 + 10.0 * (double)s->n_inputs;
  return s->pid > 0 ? 0 : -1;
}

/* After the seeds: the first input that found something (or, when the replay died, the one it
 * died on) triaged. 1 when it killed. */
static int seeds_done(fz *z, slot *s, int st) {
  char out[4600], line[2048], a[1024];
  snprintf(out, sizeof out, "%s/seeds.out", s->dir);
  FILE *f = fopen(out, "r");
  size_t done = 0;
  const char *cand = NULL;
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "%*s %1023s", a) != 1) continue;
    if (!strncmp(line, "ok ", 3)) done++;
    else if ((!strncmp(line, "finding ", 8) || !strncmp(line, "error ", 6)) && !cand && done < s->n_inputs)
      cand = s->inputs[done++];
  }
  if (f) fclose(f);
  int died = st < 0 || WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 3);
  if (!cand && died && done < s->n_inputs) cand = s->inputs[done];
  return cand && triage(z, s->u, cand, "a seed");
}

typedef struct sized {
  const char *path;
  off_t size;
} sized;

static int by_size(const void *a, const void *b) {
  const sized *x = a, *y = b;
  return x->size < y->size ? -1 : x->size > y->size ? 1 : strcmp(x->path, y->path);
}

/* Copies the smallest CAMPAIGN_SEEDS reaching seeds into dir (afl-fuzz calibrates each seed
 * first, and a small input runs fastest). 0, or -1. */
static int campaign_seeds(const fz *z, const surv *u, const char *dir) {
  const seeds *ss = &z->s[u->target];
  const uint8_t *r = reaching(u);
  sized *v = malloc((ss->n + 1) * sizeof *v);
  size_t n = 0;
  for (size_t i = 0; i < ss->n; i++) {
    struct stat st;
    if (r[i] && stat(ss->path[i], &st) == 0) v[n++] = (sized){ss->path[i], st.st_size};
  }
  qsort(v, n, sizeof *v, by_size);
  int rc = n ? 0 : -1;
  for (size_t i = 0; i < n && i < CAMPAIGN_SEEDS && !rc; i++) {
    char to[4800], *data = NULL;
    const char *base = strrchr(v[i].path, '/');
    snprintf(to, sizeof to, "%s/%s", dir, base ? base + 1 : v[i].path);
    FILE *in = fopen(v[i].path, "rb"), *out = fopen(to, "wb");
    data = malloc((size_t)v[i].size + 1);
    size_t got = in && data ? fread(data, 1, (size_t)v[i].size, in) : 0;
    if (!in || !out || !data || got != (size_t)v[i].size || fwrite(data, 1, got, out) != got) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    free(data);
  }
  free(v);
  return rc;
}

/* mdc fuzz on the smallest reaching seeds, s->left seconds, MD_MUTAGEN=<the survivor>. */
static int start_campaign(fz *z, slot *s) {
  surv *u = s->u;
  char sd[4600], cdir[4600], json[4600], log[4600], secs[32], probe[4700];
  snprintf(sd, sizeof sd, "%s/seeds", s->dir);
  snprintf(cdir, sizeof cdir, "%s/campaign", s->dir);
  snprintf(probe, sizeof probe, "%s/x", sd);
  nftw(sd, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  if (mdc_cli__mkdir_parent(probe) || campaign_seeds(z, u, sd)) return -1;
  snprintf(secs, sizeof secs, "%.0f", s->left < 1 ? 1 : s->left);
  /* /proc/self/exe: this very mdc, even when a rebuild has replaced its file since */
  const char *av[] = {"/proc/self/exe", "fuzz", "--target", targets[u->target], "--driver", z->m->driver, "--config",
                      z->m->config, "--seconds", secs, "--jobs", "1", "--no-db", "--json", "--quiet", "--fresh",
                      "--out", cdir, "--seeds", sd, "--strict", "--tmin", "0", "--triage-runs", "3",
                      "--until-finding", "--fuzz-build", z->m->fuzz_build, NULL};
  snprintf(json, sizeof json, "%s/campaign.json", s->dir);
  snprintf(log, sizeof log, "%s/campaign.log", s->dir);
  s->t0 = mdc_cli__now();
  s->pid = spawn((char *const *)av, z->m->v[u->mi].id, NULL, json, log);
  s->phase = 2;
  s->deadline = s->t0 + s->left + 120;
  z->m->fuzz_tried++;
  return s->pid > 0 ? 0 : -1;
}

/* After a campaign: each finding's input triaged. 1 when one killed, -1 when it found only what
 * the original has too (it stopped early: --until-finding), -2 when it gave no result, else 0. */
static int campaign_done(fz *z, slot *s) {
  char json[4600], how[96];
  snprintf(json, sizeof json, "%s/campaign.json", s->dir);
  json_t *j = json_load_file(json, 0, NULL), *f;
  size_t i;
  int killed = 0;
  snprintf(how, sizeof how, "%.0f s of AFL++%s", mdc_cli__now() - s->t0, *z->m->stop ? " (stopped)" : "");
  json_array_foreach(json_object_get(j, "findings"), i, f) {
    const char *in = json_string_value(json_object_get(f, "reproducer"));
    if (!killed && in && in[0]) killed = triage(z, s->u, in, how);
  }
  if (!j) {
    char log[4600];
    snprintf(log, sizeof log, "%s/campaign.log", s->dir);
    fprintf(stderr, "mdc mutate: --fuzz: %s: the campaign gave no result (see %s)\n", z->m->v[s->u->mi].id, log);
  } else if (!killed && !z->m->quiet) {
    fprintf(stderr, "mdc mutate: --fuzz: %s survived %s on %s (%lld execs, %zu findings the original shares)\n",
            z->m->v[s->u->mi].id, how, targets[s->u->target],
            (long long)json_integer_value(json_object_get(j, "execs")), json_array_size(json_object_get(j, "findings")));
  }
  int found = json_array_size(json_object_get(j, "findings")) > 0, none = !j;
  json_decref(j);
  return killed ? 1 : found ? -1 : none ? -2 : 0;
}

/* A slot's survivor judged: its folder removed (kept when a campaign gave no result). */
static void slot_end(slot *s, int keep) {
  free(s->argv);
  s->argv = NULL, s->inputs = NULL;
  if (!keep) nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  s->phase = 0;
}

/* A slot whose child ended (st: its status, -1 when killed for time): the next step. */
static void slot_step(fz *z, slot *s, int st, int stopping) {
  if (s->phase == 1) {
    int killed = seeds_done(z, s, st);
    if (killed || stopping || start_campaign(z, s)) slot_end(s, 0);
    return;
  }
  double used = mdc_cli__now() - s->t0;
  int r = campaign_done(z, s);
  s->left -= used;
  /* A campaign that stopped at a finding the original shares goes on for the time left. */
  if (r == -1 && !stopping && s->left >= 5 && ++s->campaigns < 3 && start_campaign(z, s) == 0) return;
  slot_end(s, r == -2);
}

/* The survivors through their targets, --jobs at a time; a stop signal stops the campaigns
 * (SIGINT: they end cleanly) and kills the replays. */
static void run_slots(fz *z) {
  mdc_mutate *m = z->m;
  int jobs = m->jobs < 1 ? 1 : m->jobs > 64 ? 64 : m->jobs, stopping = 0;
  slot sl[64];
  memset(sl, 0, sizeof sl);
  size_t next = 0, skipped = 0;
  for (;;) {
    if (*m->stop && !stopping) {
      stopping = 1;
      for (int j = 0; j < jobs; j++)
        if (sl[j].phase) kill(-sl[j].pid, sl[j].phase == 2 ? SIGINT : SIGKILL), sl[j].deadline = mdc_cli__now() + 30;
    }
    for (int j = 0; j < jobs && !stopping && next < z->n; j++) {
      if (sl[j].phase) continue;
      surv *u = &z->v[next++];
      if (u->target < 0) {
        skipped++;
        if (!m->quiet)
          fprintf(stderr, "mdc mutate: --fuzz: %s: no seed of any target reaches its function: skipped\n",
                  m->v[u->mi].id);
        j--;
        continue;
      }
      sl[j] = (slot){.u = u, .left = m->fuzz_s};
      snprintf(sl[j].dir, sizeof sl[j].dir, "%s/campaigns/%zu", z->out, next);
      char probe[4500];
      snprintf(probe, sizeof probe, "%s/x", sl[j].dir);
      if (mdc_cli__mkdir_parent(probe) || start_seeds(z, &sl[j])) slot_end(&sl[j], 1);
    }
    int busy = 0;
    for (int j = 0; j < jobs; j++) {
      if (!sl[j].phase) continue;
      int st = 0;
      pid_t r = waitpid(sl[j].pid, &st, WNOHANG);
      if (r == 0 && mdc_cli__now() > sl[j].deadline) {
        kill(-sl[j].pid, SIGKILL);
        waitpid(sl[j].pid, &st, 0);
        st = -1, r = sl[j].pid;
      }
      if (r == sl[j].pid || r < 0) slot_step(z, &sl[j], r < 0 ? -1 : st, stopping);
      busy += sl[j].phase != 0;
    }
    if (!busy && (stopping || next >= z->n)) break;
    poll(NULL, 0, 20);
  }
  if (!m->quiet && skipped)
    fprintf(stderr, "mdc mutate: --fuzz: %zu survivor%s no seed reaches (not even its function)\n", skipped,
            skipped == 1 ? "" : "s");
}

int mdc_mutate__fuzz(mdc_mutate *m) {
  if (*m->stop) return -1; /* stopped while judging: nothing more */
  double t0 = mdc_cli__now();
  fz z = {.m = m};
  snprintf(z.replay, sizeof z.replay, "%s", mdc_cli__fuzz_replay_path());
  snprintf(z.out, sizeof z.out, "%s", m->fuzz_out);
  for (size_t i = 0; i < m->n; i++)
    if (m->v[i].selected && m->v[i].state == MU_SURVIVED) {
      z.v = realloc(z.v, (z.n + 1) * sizeof *z.v);
      memset(&z.v[z.n], 0, sizeof *z.v);
      z.v[z.n++].mi = i;
    }
  char tmp[] = "/tmp/mdc-mutate-fuzz-XXXXXX";
  if (!z.n || !mkdtemp(tmp)) {
    free(z.v);
    return -1;
  }
  for (int t = 0; t < NT; t++) {
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", m->fuzz_seeds, targets[t]);
    list_seeds(dir, &z.s[t]);
    for (size_t i = 0; i < z.n; i++) {
      z.v[i].site[t] = calloc(z.s[t].n + 1, 1);
      z.v[i].fn[t] = calloc(z.s[t].n + 1, 1);
    }
  }
  if (!m->quiet)
    fprintf(stderr, "mdc mutate: --fuzz: %zu survivors; replaying the seeds of %s, %s, %s (%zu) for their reach\n",
            z.n, targets[0], targets[1], targets[2], z.s[0].n + z.s[1].n + z.s[2].n);
  double r0 = mdc_cli__now();
  reach_pass(&z, tmp);
  rmdir(tmp);
  choose(&z);
  if (!m->quiet) {
    size_t per[NT] = {0}, fn = 0;
    for (size_t i = 0; i < z.n; i++) {
      if (z.v[i].target >= 0) per[z.v[i].target]++;
      fn += z.v[i].by_fn;
    }
    fprintf(stderr, "mdc mutate: --fuzz: reach %.1f s; targets: %s %zu, %s %zu, %s %zu (%zu by their function only)\n",
            mdc_cli__now() - r0, targets[0], per[0], targets[1], per[1], targets[2], per[2], fn);
  }
  run_slots(&z);
  for (size_t i = 0; i < z.n; i++)
    for (int t = 0; t < NT; t++) free(z.v[i].site[t]), free(z.v[i].fn[t]);
  for (int t = 0; t < NT; t++) {
    for (size_t k = 0; k < z.s[t].n; k++) free(z.s[t].path[k]);
    free(z.s[t].path);
  }
  free(z.v);
  m->fuzz_wall_s = mdc_cli__now() - t0;
  if (!m->quiet)
    fprintf(stderr, "mdc mutate: --fuzz: %zu of %zu survivors killed (%zu campaigns of %.0f s), %.1f s\n",
            m->fuzz_killed, z.n, m->fuzz_tried, m->fuzz_s, m->fuzz_wall_s);
  return -1;
}
