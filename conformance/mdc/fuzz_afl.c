/* fuzz_afl.c - the children of `mdc fuzz` (docs/fuzzing.md): afl-fuzz instances, one main and
 * J-1 secondaries (one of them CMPLOG, one on the ASan build), each in a process group of its
 * own, launched, watched (their statistics ingested every few seconds) and stopped; the
 * environment every target run gets; commands run to their end with a time limit; the trivial
 * harness's ceiling. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc_int.h"
#include "paths.h"

#define INGEST_EVERY_S 5.0

int mdc_cli__fuzz_exists_exec(const char *p) { return access(p, X_OK) == 0; }

void mdc_cli__fuzz_bin(char *out, size_t n, const char *dir, const char *name) {
  char sub[4200];
  mdc_cli__fmt(sub, sizeof sub, "%s/fuzz", dir);
  mdc_cli__fmt(out, n, "%s/fuzz/%s", dir, name);
  if (mdc_cli__fuzz_exists_exec(out)) return;
  char flat[4300];
  mdc_cli__fmt(flat, sizeof flat, "%s/%s", dir, name);
  /* an installed flavour folder; or, from an installed mdc, where one should be */
  if (mdc_cli__fuzz_exists_exec(flat) || (mdc_cli__installed() && access(sub, F_OK) != 0))
    mdc_cli__fmt(out, n, "%s", flat);
}

int mdc_cli__fuzz_in_path(const char *prog, char *out, size_t n) {
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  char *dup = strdup(path), *save = NULL;
  int found = 0;
  for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    mdc_cli__fmt(out, n, "%s/%s", d, prog);
    found = mdc_cli__fuzz_exists_exec(out);
  }
  free(dup);
  return found;
}

/* ---- children ------------------------------------------------------------------------------- */

/* Runs argv with env additions (NAME=VALUE strings) and stdout+stderr to log (NULL: /dev/null),
 * in its own process group. Returns the pid, -1 on failure. */
pid_t mdc_cli__fuzz_spawn(char *const argv[], char *const env[], const char *log) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, STDIN_FILENO);
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    execvp(argv[0], argv);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

/* Runs argv to its end within timeout_s (killed after it), its output (stdout+stderr) in out.
 * Returns the wait status, or -1; *timed_out says whether it was killed for time. */
int mdc_cli__fuzz_run_capture(char *const argv[], char *const env[], double timeout_s, char *out, size_t n,
                              int *timed_out) {
  char tmp[] = "/tmp/mdc-fuzz-out-XXXXXX";
  int fd = mkstemp(tmp);
  *timed_out = 0;
  out[0] = 0;
  if (fd < 0) return -1;
  close(fd);
  pid_t pid = mdc_cli__fuzz_spawn(argv, env, tmp);
  if (pid < 0) {
    unlink(tmp);
    return -1;
  }
  int st = 0;
  double end = mdc_cli__now() + timeout_s;
  for (;;) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    if (mdc_cli__now() > end) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      *timed_out = 1;
      break;
    }
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL);   /* whatever it forked */
  FILE *f = fopen(tmp, "r");
  size_t got = 0;
  if (f) {
    got = fread(out, 1, n - 1, f);
    fclose(f);
  }
  out[got] = 0;
  unlink(tmp);
  return st;
}

/* ---- the targets' environment --------------------------------------------------------------- */

char *mdc_cli__fuzz_asan_env(void) {
  return (char *)"ASAN_OPTIONS=abort_on_error=1:detect_leaks=0:symbolize=1:allocator_may_return_null=1";
}

/* The environment every target run of this campaign gets: the driver, its config, the mutant,
 * strictness. A driver instrumented for AFL++ must be loaded before the target's fork server
 * starts, so the driver is preloaded too (AFL_PRELOAD under afl-fuzz and afl-tmin, which pass
 * it to the target only; LD_PRELOAD when mdc runs the target itself). env must hold 8 entries
 * and bufs 4 of 4200 bytes. */
int mdc_cli__fuzz_target_env(const mdc_cli__campaign *c, char **env, char bufs[4][4200], int under_afl) {
  int e = 0;
  if (c->driver) {
    mdc_cli__fmt(bufs[0], 4200, "MDC_FUZZ_DRIVER=%s", c->driver), env[e++] = bufs[0];
    mdc_cli__fmt(bufs[3], 4200, "%s=%s", under_afl ? "AFL_PRELOAD" : "LD_PRELOAD", c->driver), env[e++] = bufs[3];
  }
  if (c->config) mdc_cli__fmt(bufs[1], 4200, "MDC_FUZZ_CONFIG=%s", c->config), env[e++] = bufs[1];
  if (c->mutant) mdc_cli__fmt(bufs[2], 4200, "MD_MUTANT=%s", c->mutant), env[e++] = bufs[2];
  if (c->strict) env[e++] = (char *)"MDC_FUZZ_STRICT=1";
  env[e] = NULL;
  return e;
}

/* ---- the instances -------------------------------------------------------------------------- */

static int launch(mdc_cli__campaign *c, mdc_cli__instance *in, const char *seeds, const char *dict, double secs) {
  char tbuf[16], vbuf[32];
  int conc = !strcmp(c->target, "concurrency");
  mdc_cli__fmt(tbuf, sizeof tbuf, "%d", conc ? 3000 : 1000);
  mdc_cli__fmt(vbuf, sizeof vbuf, "%.0f", secs < 1 ? 1 : ceil(secs));
  char *argv[32];
  int k = 0;
  static char afl[4096];
  mdc_cli__fuzz_in_path("afl-fuzz", afl, sizeof afl);
  argv[k++] = afl;
  argv[k++] = (char *)"-i", argv[k++] = (char *)seeds;
  argv[k++] = (char *)"-o", argv[k++] = c->afl;
  argv[k++] = (char *)(in->main ? "-M" : "-S"), argv[k++] = in->name;
  argv[k++] = (char *)"-m", argv[k++] = (char *)"none";
  argv[k++] = (char *)"-t", argv[k++] = tbuf;
  argv[k++] = (char *)"-V", argv[k++] = vbuf;
  if (dict && access(dict, R_OK) == 0) argv[k++] = (char *)"-x", argv[k++] = (char *)dict;
  if (in->cmplog[0]) argv[k++] = (char *)"-c", argv[k++] = in->cmplog;
  /* A trace input is read a line at a time; AFL++'s havoc grows inputs to 1 MiB by pasting
   * chunks, and a 64 KiB input costs ten times a 6 KiB one to parse on the same code. 16 KiB
   * holds 95 % of the seed traces whole (docs/fuzzing.md). */
  if (!strcmp(c->target, "trace")) argv[k++] = (char *)"-G", argv[k++] = (char *)"16384";
  argv[k++] = (char *)"--", argv[k++] = in->binary;
  argv[k] = NULL;
  char bufs[4][4200];
  char *env[20];
  int e = mdc_cli__fuzz_target_env(c, env, bufs, 1);
  env[e++] = (char *)"AFL_SKIP_CPUFREQ=1";
  env[e++] = (char *)"AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1";
  env[e++] = (char *)"AFL_NO_UI=1";
  env[e++] = (char *)"AFL_AUTORESUME=1";
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  /* Pinned to a core a target runs its racing lanes one at a time: the concurrency target (and
   * more instances than cores) run unbound. */
  if (c->n_inst > ncpu || conc) env[e++] = (char *)"AFL_NO_AFFINITY=1";
  if (in->asan) env[e++] = mdc_cli__fuzz_asan_env();
  if (c->until_finding) env[e++] = (char *)"AFL_BENCH_UNTIL_CRASH=1";
  /* the program targets' structure-aware mutations (fuzz/fz_mutate.h), beside AFL++'s own */
  static char mut_env[4200], tgt_env[64];
  if (c->mutator) {
    mdc_cli__fmt(mut_env, sizeof mut_env, "AFL_CUSTOM_MUTATOR_LIBRARY=%s", mdc_cli__fuzz_mutator_path()),
        env[e++] = mut_env;
    mdc_cli__fmt(tgt_env, sizeof tgt_env, "MDC_FUZZ_TARGET=%s", c->target), env[e++] = tgt_env;
  }
  env[e] = NULL;
  char log[4200];
  mdc_cli__fmt(log, sizeof log, "%s/%s.log", c->out, in->name);
  in->t0 = mdc_cli__now();
  in->pid = mdc_cli__fuzz_spawn(argv, env, log);
  in->running = in->pid > 0;
  return in->pid > 0 ? 0 : -1;
}

static void stop_all(mdc_cli__campaign *c, int sig) {
  for (int i = 0; i < c->n_inst; i++)
    if (c->inst[i].running) kill(c->inst[i].pid, sig);
}

/* Waits for the instances to end (they stop at -V, or on SIGINT); kills them after deadline. */
static void wait_all(mdc_cli__campaign *c, double deadline) {
  for (;;) {
    int alive = 0;
    for (int i = 0; i < c->n_inst; i++) {
      mdc_cli__instance *in = &c->inst[i];
      if (!in->running) continue;
      int st;
      if (waitpid(in->pid, &st, WNOHANG) == in->pid) {
        in->running = 0;
        kill(-in->pid, SIGKILL);   /* its target, if it left one */
      } else {
        alive++;
      }
    }
    if (!alive) return;
    if (mdc_cli__now() > deadline) {
      for (int i = 0; i < c->n_inst; i++)
        if (c->inst[i].running) {
          kill(-c->inst[i].pid, SIGKILL);
          waitpid(c->inst[i].pid, NULL, 0);
          c->inst[i].running = 0;
        }
      return;
    }
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Starts c->jobs instances: main (the ASan build's with --asan), then a CMPLOG one, one on the
 * ASan build, more; the first that cannot start ends the list. */
void mdc_cli__fuzz_start(mdc_cli__campaign *c, const mdc_cli__fuzz_bins *b, const char *in, const char *dict) {
  c->t_start = mdc_cli__now();
  for (int i = 0; i < c->jobs && !mdc_cli__fuzz_stop_signal; i++) {
    mdc_cli__instance *x = &c->inst[c->n_inst++];
    memset(x, 0, sizeof *x);
    x->main = i == 0 && !c->secondary;
    mdc_cli__fmt(x->name, sizeof x->name, "%s%s%s", c->node ? c->node : "", c->node ? "-" : "",
                 x->main ? "main" : "");
    if (!x->main)
      mdc_cli__fmt(x->name + strlen(x->name), sizeof x->name - strlen(x->name), "s%d", i + c->secondary);
    mdc_cli__fmt(x->binary, sizeof x->binary, "%s", i == 0 ? b->main : b->plain);
    x->asan = i == 0 && c->asan_main;
    if (i == 1 && mdc_cli__fuzz_exists_exec(b->cmplog)) mdc_cli__fmt(x->cmplog, sizeof x->cmplog, "%s", b->cmplog);
    if (i == 2 && mdc_cli__fuzz_exists_exec(b->asan)) {
      mdc_cli__fmt(x->binary, sizeof x->binary, "%s", b->asan);
      x->asan = 1;
    }
    if (launch(c, x, in, dict, c->seconds)) {
      fprintf(stderr, "mdc fuzz: cannot start afl-fuzz: %s\n", strerror(errno));
      c->n_inst--;
      break;
    }
  }
}

/* Reaps the instances that ended (with --until-finding the first to end stops the others).
 * Returns how many still run. */
static int reap_ended(mdc_cli__campaign *c, double now) {
  int alive = 0;
  for (int i = 0; i < c->n_inst; i++) {
    mdc_cli__instance *x = &c->inst[i];
    int st;
    if (x->running && waitpid(x->pid, &st, WNOHANG) == x->pid) {
      x->running = 0;
      kill(-x->pid, SIGKILL);
      if (c->until_finding) {
        stop_all(c, SIGINT);
        wait_all(c, now + 15);
      }
    }
    alive += x->running;
  }
  return alive;
}

/* Run: ingest every few seconds until the instances end (-V), the time is up, or a signal. */
int mdc_cli__fuzz_watch(mdc_cli__campaign *c) {
  double last_ingest = 0, end = c->t_start + c->seconds;
  int interrupted = 0;
  for (;;) {
    double now = mdc_cli__now();
    if (mdc_cli__fuzz_stop_signal && !interrupted) {
      interrupted = mdc_cli__fuzz_stop_signal;
      stop_all(c, SIGINT);   /* afl-fuzz writes its stats and queue, and exits */
      wait_all(c, now + 15);
    }
    int alive = reap_ended(c, now);
    if (now - last_ingest >= INGEST_EVERY_S || !alive) {
      mdc_cli__fuzz_ingest(c);
      mdc_cli__fuzz_progress(c);
      last_ingest = now;
    }
    if (!alive) break;
    if (now > end + 30) {   /* -V should have ended them */
      stop_all(c, SIGINT);
      wait_all(c, now + 15);
    }
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
  }
  return interrupted;
}

/* The trivial harness for secs seconds on one core: the machine's ceiling, now. */
double mdc_cli__fuzz_measure_ceiling(mdc_cli__campaign *c, double secs) {
  char bin[4200], dir[4300], seeds[4400];
  mdc_cli__fuzz_bin(bin, sizeof bin, c->fuzz_build, "md_fuzz_ceiling");
  mdc_cli__fmt(dir, sizeof dir, "%s/ceiling", c->out);
  mdc_cli__fmt(seeds, sizeof seeds, "%s/ceiling-seeds", c->out);
  mkdir(seeds, 0755);
  char s1[4500];
  mdc_cli__fmt(s1, sizeof s1, "%s/a", seeds);
  FILE *f = fopen(s1, "w");
  if (f) fputs("mdc", f), fclose(f);
  char vbuf[32];
  mdc_cli__fmt(vbuf, sizeof vbuf, "%.0f", secs);
  static char afl[4096];
  mdc_cli__fuzz_in_path("afl-fuzz", afl, sizeof afl);
  char *argv[] = {afl, (char *)"-i", seeds, (char *)"-o", dir, (char *)"-m", (char *)"none", (char *)"-V", vbuf,
                  (char *)"--", bin, NULL};
  char *env[] = {(char *)"AFL_SKIP_CPUFREQ=1", (char *)"AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1",
                 (char *)"AFL_NO_UI=1", (char *)"AFL_AUTORESUME=1", NULL};
  char log[4400];
  mdc_cli__fmt(log, sizeof log, "%s/ceiling.log", c->out);
  pid_t pid = mdc_cli__fuzz_spawn(argv, env, log);
  if (pid < 0) return NAN;
  double end = mdc_cli__now() + secs + 60;
  int st;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (mdc_cli__fuzz_stop_signal) kill(pid, SIGINT);
    if (mdc_cli__now() > end) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL);
  char d2[4400];
  mdc_cli__fmt(d2, sizeof d2, "%s/default", dir);
  return mdc_cli__fuzz_stat_num(d2, "execs_per_sec");
}
