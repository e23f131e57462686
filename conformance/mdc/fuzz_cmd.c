/* fuzz_cmd.c - `mdc fuzz`: an AFL++ campaign on one fuzz target (docs/fuzzing.md): one main
 * instance and J-1 secondaries (one of them CMPLOG, one on the ASan build), each in a process
 * group of its own; their fuzzer_stats and plot_data ingested into the results store every few
 * seconds; at the end every crash and hang triaged (replayed for its reproduction rate, grouped
 * by signature, minimised with afl-tmin, written as a trace). `mdc fuzz export` writes a stored
 * finding as a trace. Ctrl-C stops the instances cleanly, ingests and triages what they have;
 * the next run on the same folder resumes the campaign. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"

#define MAX_JOBS 16
#define INGEST_EVERY_S 5.0

static const char *const targets[] = {"tokens", "shapes", "concurrency", "trace"};

typedef struct instance {
  char name[80];            /* "main", "s1", ... (prefixed "NODE-" with --node) */
  int main;                 /* -M (else -S) */
  char binary[4096];        /* the target binary it fuzzes */
  char cmplog[4096];        /* -c binary, or "" */
  int asan;
  pid_t pid;
  int running;
  long plot_off;            /* plot_data bytes ingested */
  double t0;
  mdc_fuzz_stat last;       /* its newest plot_data row (written every 5 s; fuzzer_stats every 60) */
} instance;

typedef struct finding {
  char signature[160];
  char kind[8];             /* crash, hang, oracle */
  char message[768];
  char repro[4096];         /* the input that reproduces it (kept in triage/) */
  char minimized[4096];
  char trace[4096];
  char binary[4096];
  uint32_t count;           /* inputs with this signature */
  int replays, reproduced;
  double first_s;           /* when an instance first saved one (AFL++'s "time:" in ms), -1: unknown */
} finding;

typedef struct campaign {
  const char *target, *driver, *config, *mutant, *db, *fuzz_build, *seeds, *node;
  int secondary, strict, until_finding, mutator;
  char out[4096], afl[4096];
  double seconds;
  int jobs, json, quiet, fresh, asan_main, triage_runs, tmin_s;
  int tty;
  instance inst[MAX_JOBS];
  int n_inst;
  mdc_store *store;
  int64_t run_id;
  char uuid[37];
  int store_ok;
  double t_start;
  /* the last totals read */
  int64_t execs;
  double eps, stability;
  int64_t edges, corpus, raw_crashes, raw_hangs, rss_kb;
  finding *f;
  size_t n_f, cap_f;
  double ceiling_eps;
} campaign;

/* snprintf for paths and messages: a too long one is cut, like any snprintf, without the
 * compiler's truncation warnings for buffers it cannot size. */
static void fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t n, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, n, f, ap);
  va_end(ap);
}

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

static int exists_exec(const char *p) { return access(p, X_OK) == 0; }

static int in_path(const char *prog, char *out, size_t n) {
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  char *dup = strdup(path), *save = NULL;
  int found = 0;
  for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    fmt(out, n, "%s/%s", d, prog);
    found = exists_exec(out);
  }
  free(dup);
  return found;
}

/* ---- children ------------------------------------------------------------------------------- */

/* Runs argv with env additions (NAME=VALUE strings) and stdout+stderr to log (NULL: /dev/null),
 * in its own process group. Returns the pid, -1 on failure. */
static pid_t spawn(char *const argv[], char *const env[], const char *log) {
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
static int run_capture(char *const argv[], char *const env[], double timeout_s, char *out, size_t n,
                       int *timed_out) {
  char tmp[] = "/tmp/mdc-fuzz-out-XXXXXX";
  int fd = mkstemp(tmp);
  *timed_out = 0;
  out[0] = 0;
  if (fd < 0) return -1;
  close(fd);
  pid_t pid = spawn(argv, env, tmp);
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

/* ---- AFL++ files ---------------------------------------------------------------------------- */

static int stats_read(const char *dir, const char *key, char *val, size_t n) {
  char path[4200], line[512];
  fmt(path, sizeof path, "%s/fuzzer_stats", dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int found = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != ':')) continue;
    char *c = strchr(line, ':');
    if (!c) continue;
    c++;
    while (*c == ' ') c++;
    c[strcspn(c, "\n")] = 0;
    fmt(val, n, "%s", c);
    found = 0;
    break;
  }
  fclose(f);
  return found;
}

static double stat_num(const char *dir, const char *key) {
  char v[128];
  return stats_read(dir, key, v, sizeof v) ? NAN : strtod(v, NULL);
}

/* Peak resident set of the target processes under an afl-fuzz process (its fork server and the
 * child fuzzed in persistent mode), in KiB: the largest VmHWM of its descendants. */
static int64_t target_rss_kb(pid_t afl) {
  int64_t best = -1;
  DIR *d = opendir("/proc");
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid <= 0) continue;
    char path[64], buf[4096];
    pid_t cur = pid;
    int desc = 0;
    for (int depth = 0; depth < 4 && cur > 1; depth++) {
      fmt(path, sizeof path, "/proc/%d/stat", (int)cur);
      FILE *f = fopen(path, "re");
      if (!f) break;
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      const char *rp = strrchr(buf, ')');
      int ppid = 0;
      char state;
      if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) break;
      if (ppid == afl) {
        desc = 1;
        break;
      }
      cur = ppid;
    }
    if (!desc) continue;
    fmt(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) continue;
    while (fgets(buf, sizeof buf, f))
      if (!strncmp(buf, "VmHWM:", 6)) {
        int64_t kb = strtoll(buf + 6, NULL, 10);
        if (kb > best) best = kb;
      }
    fclose(f);
  }
  closedir(d);
  return best;
}

/* New plot_data rows of instance in into samples (4.04c mislabels a column: read by position:
 * time, cycles, cur_item, corpus, pending, pending_favs, bitmap%, crashes, hangs, depth,
 * execs/s, execs, edges). */
static size_t plot_ingest(campaign *c, instance *in, mdc_fuzz_stat *v, size_t cap) {
  char path[4200];
  fmt(path, sizeof path, "%s/%s/plot_data", c->afl, in->name);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  if (fseek(f, in->plot_off, SEEK_SET) != 0) {
    fclose(f);
    return 0;
  }
  char line[1024];
  size_t n = 0;
  long good = in->plot_off;
  while (n < cap && fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (!len || line[len - 1] != '\n') break;   /* a line being written: next time */
    good += (long)len;
    if (line[0] == '#') continue;
    double col[13];
    int k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, ",", &save); tok && k < 13; tok = strtok_r(NULL, ",", &save))
      col[k++] = strtod(tok, NULL);
    if (k < 13) continue;
    v[n++] = (mdc_fuzz_stat){.instance = in->name, .t_s = col[0], .execs = (int64_t)col[11],
                             .execs_per_sec = col[10], .edges = (int64_t)col[12], .corpus = (int64_t)col[3],
                             .crashes = (int64_t)col[7], .hangs = (int64_t)col[8], .stability = NAN, .rss_kb = -1};
    in->last = v[n - 1];
  }
  fclose(f);
  in->plot_off = good;
  return n;
}

/* Reads every instance's totals; writes new plot rows and one sample per instance to the store. */
static void ingest(campaign *c) {
  static mdc_fuzz_stat v[4096];
  size_t n = 0;
  int64_t execs = 0, edges = 0, corpus = 0, crashes = 0, hangs = 0, rss = c->rss_kb;
  double eps = 0, stab = NAN;
  for (int i = 0; i < c->n_inst; i++) {
    instance *in = &c->inst[i];
    char dir[4200];
    fmt(dir, sizeof dir, "%s/%s", c->afl, in->name);
    n += plot_ingest(c, in, v + n, sizeof v / sizeof v[0] - n - MAX_JOBS);
    double e = stat_num(dir, "execs_done"), s = stat_num(dir, "execs_per_sec"), st = stat_num(dir, "stability");
    double ed = stat_num(dir, "edges_found"), co = stat_num(dir, "corpus_count"), cr = stat_num(dir, "saved_crashes");
    double hg = stat_num(dir, "saved_hangs"), rt = stat_num(dir, "run_time");
    int64_t r = in->running ? target_rss_kb(in->pid) : -1;
    if (r > rss) rss = r;
    if (in->last.instance && (isnan(rt) || in->last.t_s > rt)) {
      /* the plot row is newer than the stats file */
      e = (double)in->last.execs;
      s = in->last.execs_per_sec;
      ed = (double)in->last.edges;
      co = (double)in->last.corpus;
      cr = (double)in->last.crashes;
      hg = (double)in->last.hangs;
    }
    if (isnan(e)) continue;
    execs += (int64_t)e;
    eps += isnan(s) ? 0 : s;
    if (!isnan(ed) && (int64_t)ed > edges) edges = (int64_t)ed;
    if ((in->main || i == 0) && !isnan(st)) stab = st;
    corpus += isnan(co) ? 0 : (int64_t)co;
    crashes += isnan(cr) ? 0 : (int64_t)cr;
    hangs += isnan(hg) ? 0 : (int64_t)hg;
    v[n++] = (mdc_fuzz_stat){.instance = in->name, .t_s = isnan(rt) ? mdc_cli__now() - in->t0 : rt + 0.5,
                             .execs = (int64_t)e, .execs_per_sec = s, .edges = isnan(ed) ? -1 : (int64_t)ed,
                             .corpus = isnan(co) ? -1 : (int64_t)co, .crashes = isnan(cr) ? -1 : (int64_t)cr,
                             .hangs = isnan(hg) ? -1 : (int64_t)hg, .stability = st, .rss_kb = r};
  }
  c->execs = execs;
  c->eps = eps;
  if (!isnan(stab)) c->stability = stab;
  c->edges = edges;
  c->corpus = corpus;
  c->raw_crashes = crashes;
  c->raw_hangs = hangs;
  c->rss_kb = rss;
  if (c->store && c->store_ok && n && mdc_store_fuzz_stats(c->store, c->run_id, v, n)) {
    fprintf(stderr, "%smdc fuzz: %s (no more ingestion; the campaign goes on)\n", c->tty ? "\n" : "",
            mdc_store_error(c->store));
    c->store_ok = 0;
  }
}

static void progress(const campaign *c) {
  if (!c->tty || c->quiet) return;
  double t = mdc_cli__now() - c->t_start;
  fprintf(stderr, "\r[%5.0fs/%.0fs] %s: execs %" PRId64 " (%.0f/s) edges %" PRId64 " corpus %" PRId64
          " crashes %" PRId64 " hangs %" PRId64 " stability %.1f%%\033[K",
          t, c->seconds, c->target, c->execs, c->eps, c->edges, c->corpus, c->raw_crashes, c->raw_hangs,
          isnan(c->stability) ? 0.0 : c->stability);
  fflush(stderr);
}

/* ---- triage --------------------------------------------------------------------------------- */

/* A stack frame's function from an "    #3 0x55d4 in md__buffer_put /path/buffer.c:12:3" line. */
static int frame_func(const char *line, const char *eol, char *out, size_t n) {
  const char *hash = memchr(line, '#', (size_t)(eol - line));
  const char *in = hash ? strstr(hash, " in ") : NULL;
  if (!in || in >= eol) return -1;
  in += 4;
  size_t k = strcspn(in, " \n");
  if (!k) return -1;
  fmt(out, n, "%.*s", (int)k, in);
  return 0;
}

static int boring_frame(const char *f) {
  static const char *const skip[] = {"__asan", "__ubsan", "__sanitizer", "__interceptor", "abort", "raise",
                                     "__GI_", "__libc", "__pthread", "_start", "LLVMFuzzer", "ExecuteFiles",
                                     "main", "fz_", "mdc_fz_", "run_call", "lane_main", "__assert", "start_thread",
                                     "clone", "malloc", "free", "calloc", "realloc", "memcpy", "memset", NULL};
  for (int i = 0; skip[i]; i++)
    if (!strncmp(f, skip[i], strlen(skip[i]))) return 1;
  return 0;
}

/* The signature of one replay's output: an oracle finding's own, or the sanitizer's kind and the
 * project's top frames (addresses dropped), or the signal. "" when it ran clean. */
static void signature_of(const char *out, int st, int timed_out, const char *hang_op, char *sig, size_t n,
                         char *kind, char *msg, size_t msgn) {
  sig[0] = 0;
  msg[0] = 0;
  const char *o = strstr(out, "MDC-FUZZ-FINDING ");
  if (o) {
    o += 17;
    size_t k = strcspn(o, " \n");
    fmt(sig, n, "%.*s", (int)k, o);
    strcpy(kind, "oracle");
    const char *m = strchr(o, '\n');
    if (m) fmt(msg, msgn, "%.*s", (int)strcspn(m + 1, "\n"), m + 1);
    return;
  }
  if (timed_out) {
    fmt(sig, n, "hang:%s", hang_op && *hang_op ? hang_op : "?");
    strcpy(kind, "hang");
    fmt(msg, msgn, "no end within the time limit%s%s", hang_op && *hang_op ? ", in " : "", hang_op ? hang_op : "");
    return;
  }
  const char *a = strstr(out, "ERROR: AddressSanitizer: ");
  const char *u = strstr(out, "runtime error: ");
  char what[96] = "";
  if (a) fmt(what, sizeof what, "asan-%.*s", (int)strcspn(a + 25, " \n"), a + 25);
  else if (u) fmt(what, sizeof what, "ubsan");
  else if (st >= 0 && WIFSIGNALED(st)) {
    const char *ab = sigabbrev_np(WTERMSIG(st));
    fmt(what, sizeof what, "SIG%s", ab ? ab : "?");
  } else if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    fmt(what, sizeof what, "exit%d", WEXITSTATUS(st));
  } else {
    return;
  }
  char frames[3][96];
  int nf = 0;
  const char *line = a ? a : u ? u : out;
  while (line && *line && nf < 3) {
    const char *eol = strchr(line, '\n');
    if (!eol) eol = line + strlen(line);
    char fn[96];
    if (frame_func(line, eol, fn, sizeof fn) == 0 && !boring_frame(fn)) fmt(frames[nf++], sizeof frames[0], "%s", fn);
    line = *eol ? eol + 1 : NULL;
  }
  if (u && !nf) {
    /* UBSan without a stack: the check's file:line */
    const char *l = u;
    while (l > out && l[-1] != '\n') l--;
    const char *slash = l;
    for (const char *q = l; q < u; q++)
      if (*q == '/') slash = q + 1;
    const char *colon = strchr(slash, ':');
    colon = colon ? strchr(colon + 1, ':') : NULL;
    fmt(frames[0], sizeof frames[0], "%.*s", (int)((colon && colon < u ? colon : u) - slash), slash);
    nf = 1;
  }
  fmt(sig, n, "crash:%s", what);
  for (int i = 0; i < nf; i++) {
    size_t used = strlen(sig);
    fmt(sig + used, n - used, ":%s", frames[i]);
  }
  strcpy(kind, "crash");
  const char *first = a ? a : u;
  if (first) fmt(msg, msgn, "%.*s", (int)strcspn(first, "\n"), first);
  else fmt(msg, msgn, "the target died: %s", what);
}

static char *asan_env(void) {
  return (char *)"ASAN_OPTIONS=abort_on_error=1:detect_leaks=0:symbolize=1:allocator_may_return_null=1";
}

/* The environment every target run of this campaign gets: the driver, its config, the mutant,
 * strictness. A driver instrumented for AFL++ must be loaded before the target's fork server
 * starts, so the driver is preloaded too (AFL_PRELOAD under afl-fuzz and afl-tmin, which pass
 * it to the target only; LD_PRELOAD when mdc runs the target itself). env must hold 8 entries
 * and bufs 4 of 4200 bytes. */
static int target_env(const campaign *c, char **env, char bufs[4][4200], int under_afl) {
  int e = 0;
  if (c->driver) {
    fmt(bufs[0], 4200, "MDC_FUZZ_DRIVER=%s", c->driver), env[e++] = bufs[0];
    fmt(bufs[3], 4200, "%s=%s", under_afl ? "AFL_PRELOAD" : "LD_PRELOAD", c->driver), env[e++] = bufs[3];
  }
  if (c->config) fmt(bufs[1], 4200, "MDC_FUZZ_CONFIG=%s", c->config), env[e++] = bufs[1];
  if (c->mutant) fmt(bufs[2], 4200, "MD_MUTANT=%s", c->mutant), env[e++] = bufs[2];
  if (c->strict) env[e++] = (char *)"MDC_FUZZ_STRICT=1";
  env[e] = NULL;
  return e;
}

/* Replays one input on binary (an AFL++ target runs the files given as arguments) and names
 * what it did. */
static void replay_once(campaign *c, const char *binary, const char *input, char *sig, size_t n, char *kind,
                        char *msg, size_t msgn) {
  static char out[1 << 16];
  char bufs[4][4200], sym[4200];
  char *env[12];
  int e = target_env(c, env, bufs, 0);
  char symbolizer[4096];
  if (in_path("llvm-symbolizer", symbolizer, sizeof symbolizer) ||
      in_path("llvm-symbolizer-14", symbolizer, sizeof symbolizer))
    fmt(sym, sizeof sym, "ASAN_SYMBOLIZER_PATH=%s", symbolizer), env[e++] = sym;
  env[e++] = asan_env();
  env[e++] = (char *)"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1";
  env[e] = NULL;
  char *argv[] = {(char *)binary, (char *)input, NULL};
  int to = 0;
  int st = run_capture(argv, env, 10, out, sizeof out, &to);
  char op[64] = "";
  if (to) {
    /* where it hangs: the target's own alarm says which call */
    static char out2[8192];
    env[e++] = (char *)"MDC_FUZZ_TIMEOUT=5";
    env[e] = NULL;
    int to2;
    run_capture(argv, env, 20, out2, sizeof out2, &to2);
    const char *h = strstr(out2, "MDC-FUZZ-HANG call ");
    const char *par = h ? strchr(h, '(') : NULL;
    if (par) fmt(op, sizeof op, "%.*s", (int)strcspn(par + 1, ")"), par + 1);
  }
  signature_of(out, st, to, op, sig, n, kind, msg, msgn);
}

static finding *finding_for(campaign *c, const char *sig) {
  for (size_t i = 0; i < c->n_f; i++)
    if (!strcmp(c->f[i].signature, sig)) return &c->f[i];
  if (c->n_f == c->cap_f) {
    c->cap_f = c->cap_f ? 2 * c->cap_f : 16;
    finding *f = realloc(c->f, c->cap_f * sizeof *f);
    if (!f) return NULL;
    c->f = f;
  }
  finding *f = &c->f[c->n_f++];
  memset(f, 0, sizeof *f);
  f->first_s = -1;
  fmt(f->signature, sizeof f->signature, "%s", sig);
  return f;
}

static uint32_t fnv(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
  char buf[65536];
  size_t n;
  while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
  if (a) fclose(a);
  if (b) fclose(b);
}

/* afl-tmin on a finding's reproducer: kept when the smaller input shows the same signature. */
static void minimise(campaign *c, finding *f, const char *base) {
  char tmin[4096], tmp[4500], tout[16];
  if (!in_path("afl-tmin", tmin, sizeof tmin)) return;
  fmt(tmp, sizeof tmp, "%s.tmin", base);
  fmt(tout, sizeof tout, "%d", !strcmp(f->kind, "hang") ? 2000 : 1000);
  char *argv[16];
  int k = 0;
  argv[k++] = tmin;
  if (!strcmp(f->kind, "hang")) argv[k++] = (char *)"-H";
  argv[k++] = (char *)"-i", argv[k++] = f->repro;
  argv[k++] = (char *)"-o", argv[k++] = tmp;
  argv[k++] = (char *)"-m", argv[k++] = (char *)"none";
  argv[k++] = (char *)"-t", argv[k++] = tout;
  argv[k++] = (char *)"--", argv[k++] = f->binary;
  argv[k] = NULL;
  char bufs[4][4200];
  char *env[12];
  int e = target_env(c, env, bufs, 1);
  env[e++] = asan_env();
  env[e++] = (char *)"AFL_SKIP_CPUFREQ=1";
  env[e] = NULL;
  static char out[1 << 14];
  int to;
  run_capture(argv, env, c->tmin_s, out, sizeof out, &to);
  struct stat sa, sb;
  if (!to && stat(tmp, &sb) == 0 && stat(f->repro, &sa) == 0 && sb.st_size <= sa.st_size) {
    char sig[160], kind[8], msg[768];
    replay_once(c, f->binary, tmp, sig, sizeof sig, kind, msg, sizeof msg);
    if (!strcmp(sig, f->signature)) rename(tmp, f->minimized);
  }
  unlink(tmp);
}

/* Writes input as a trace with binary (a target of the fuzzed build: it loads an instrumented
 * driver too). 0, or -1. */
static int export_trace(const campaign *c, const char *binary, const char *input, const char *out, const char *name) {
  char bufs[4][4200], to_out[4300], to_name[400];
  char *env[16];
  int e = target_env(c, env, bufs, 0);
  fmt(to_out, sizeof to_out, "MDC_FUZZ_TRACE_OUT=%s", out);
  fmt(to_name, sizeof to_name, "MDC_FUZZ_TRACE_NAME=%s", name);
  env[e++] = to_out;
  env[e++] = to_name;
  env[e++] = (char *)"MDC_FUZZ_TIMEOUT=5";
  env[e++] = asan_env();
  env[e] = NULL;
  char *argv[] = {(char *)binary, (char *)input, NULL};
  static char buf[1 << 14];
  int to;
  unlink(out);
  int st = run_capture(argv, env, 60, buf, sizeof buf, &to);
  return !to && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && access(out, R_OK) == 0 ? 0 : -1;
}

/* Every crash and hang of this process's instances: replayed, grouped by signature; the first of
 * each group replayed triage_runs times (20 for concurrency), minimised, written as a trace. */
static void triage(campaign *c) {
  char tri[4200];
  fmt(tri, sizeof tri, "%s/triage", c->out);
  mkdir(tri, 0755);
  int conc = !strcmp(c->target, "concurrency");
  for (int i = 0; i < c->n_inst; i++) {
    const instance *in = &c->inst[i];
    for (int h = 0; h < 2; h++) {
      char dir[4300];
      fmt(dir, sizeof dir, "%s/%s/%s", c->afl, in->name, h ? "hangs" : "crashes");
      DIR *d = opendir(dir);
      if (!d) continue;
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "id:", 3)) continue;
        char path[4600], sig[160], kind[8], msg[768];
        fmt(path, sizeof path, "%s/%s", dir, e->d_name);
        replay_once(c, in->binary, path, sig, sizeof sig, kind, msg, sizeof msg);
        if (!sig[0]) {
          fmt(sig, sizeof sig, "%s:unreproduced", h ? "hang" : "crash");
          strcpy(kind, h ? "hang" : "crash");
          fmt(msg, sizeof msg, "the input ran clean when replayed (a race, or state from earlier inputs)");
        }
        finding *f = finding_for(c, sig);
        if (!f) continue;
        f->count++;
        const char *tm = strstr(e->d_name, ",time:");
        double t = tm ? strtod(tm + 6, NULL) / 1000.0 : -1;
        if (t >= 0 && (f->first_s < 0 || t < f->first_s)) f->first_s = t;
        if (!f->repro[0]) {
          fmt(f->repro, sizeof f->repro, "%s", path);
          fmt(f->kind, sizeof f->kind, "%s", kind);
          fmt(f->message, sizeof f->message, "%s", msg);
          fmt(f->binary, sizeof f->binary, "%s", in->binary);
        }
        if (!c->quiet && c->tty) fprintf(stderr, "\r  triage: %zu signature%s so far\033[K", c->n_f, c->n_f == 1 ? "" : "s");
      }
      closedir(d);
    }
  }
  if (c->tty && !c->quiet && c->n_f) fprintf(stderr, "\n");
  for (size_t i = 0; i < c->n_f; i++) {
    finding *f = &c->f[i];
    char base[4400];
    fmt(base, sizeof base, "%s/%08x", tri, fnv(f->signature));
    fmt(f->minimized, sizeof f->minimized, "%s.input", base);
    copy_file(f->repro, f->minimized);
    fmt(f->repro, sizeof f->repro, "%s.reproducer", base);
    copy_file(f->minimized, f->repro);
    int runs = conc ? 20 : c->triage_runs;
    f->replays = runs;
    f->reproduced = 0;
    for (int r = 0; r < runs; r++) {
      char sig[160], kind[8], msg[768];
      replay_once(c, f->binary, f->repro, sig, sizeof sig, kind, msg, sizeof msg);
      f->reproduced += !strcmp(sig, f->signature);
    }
    if (f->reproduced && c->tmin_s > 0) minimise(c, f, base);
    /* the trace: what SPEC allows, up to the call that found it */
    fmt(f->trace, sizeof f->trace, "%s.jsonl", base);
    char name[256];
    fmt(name, sizeof name, "fuzz/%s/%08x", c->target, fnv(f->signature));
    if (export_trace(c, f->binary, f->minimized, f->trace, name)) f->trace[0] = 0;
  }
}

/* ---- the campaign --------------------------------------------------------------------------- */

static int launch(campaign *c, instance *in, const char *seeds, const char *dict, double secs) {
  char tbuf[16], vbuf[32];
  int conc = !strcmp(c->target, "concurrency");
  fmt(tbuf, sizeof tbuf, "%d", conc ? 3000 : 1000);
  fmt(vbuf, sizeof vbuf, "%.0f", secs < 1 ? 1 : ceil(secs));
  char *argv[32];
  int k = 0;
  static char afl[4096];
  in_path("afl-fuzz", afl, sizeof afl);
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
  int e = target_env(c, env, bufs, 1);
  env[e++] = (char *)"AFL_SKIP_CPUFREQ=1";
  env[e++] = (char *)"AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1";
  env[e++] = (char *)"AFL_NO_UI=1";
  env[e++] = (char *)"AFL_AUTORESUME=1";
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  /* Pinned to a core a target runs its racing lanes one at a time: the concurrency target (and
   * more instances than cores) run unbound. */
  if (c->n_inst > ncpu || conc) env[e++] = (char *)"AFL_NO_AFFINITY=1";
  if (in->asan) env[e++] = asan_env();
  if (c->until_finding) env[e++] = (char *)"AFL_BENCH_UNTIL_CRASH=1";
  /* the program targets' structure-aware mutations (fuzz/fz_mutate.h), beside AFL++'s own */
  static char mut_env[4200], tgt_env[64];
  if (c->mutator) {
    fmt(mut_env, sizeof mut_env, "AFL_CUSTOM_MUTATOR_LIBRARY=%s", MDC_FUZZ_MUTATOR), env[e++] = mut_env;
    fmt(tgt_env, sizeof tgt_env, "MDC_FUZZ_TARGET=%s", c->target), env[e++] = tgt_env;
  }
  env[e] = NULL;
  char log[4200];
  fmt(log, sizeof log, "%s/%s.log", c->out, in->name);
  in->t0 = mdc_cli__now();
  in->pid = spawn(argv, env, log);
  in->running = in->pid > 0;
  return in->pid > 0 ? 0 : -1;
}

static void stop_all(campaign *c, int sig) {
  for (int i = 0; i < c->n_inst; i++)
    if (c->inst[i].running) kill(c->inst[i].pid, sig);
}

/* Waits for the instances to end (they stop at -V, or on SIGINT); kills them after deadline. */
static void wait_all(campaign *c, double deadline) {
  for (;;) {
    int alive = 0;
    for (int i = 0; i < c->n_inst; i++) {
      instance *in = &c->inst[i];
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

/* The trivial harness for secs seconds on one core: the machine's ceiling, now. */
static double measure_ceiling(campaign *c, double secs) {
  char bin[4200], dir[4300], seeds[4400];
  fmt(bin, sizeof bin, "%s/fuzz/md_fuzz_ceiling", c->fuzz_build);
  fmt(dir, sizeof dir, "%s/ceiling", c->out);
  fmt(seeds, sizeof seeds, "%s/ceiling-seeds", c->out);
  mkdir(seeds, 0755);
  char s1[4500];
  fmt(s1, sizeof s1, "%s/a", seeds);
  FILE *f = fopen(s1, "w");
  if (f) fputs("mdc", f), fclose(f);
  char vbuf[32];
  fmt(vbuf, sizeof vbuf, "%.0f", secs);
  static char afl[4096];
  in_path("afl-fuzz", afl, sizeof afl);
  char *argv[] = {afl, (char *)"-i", seeds, (char *)"-o", dir, (char *)"-m", (char *)"none", (char *)"-V", vbuf,
                  (char *)"--", bin, NULL};
  char *env[] = {(char *)"AFL_SKIP_CPUFREQ=1", (char *)"AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1",
                 (char *)"AFL_NO_UI=1", (char *)"AFL_AUTORESUME=1", NULL};
  char log[4400];
  fmt(log, sizeof log, "%s/ceiling.log", c->out);
  pid_t pid = spawn(argv, env, log);
  if (pid < 0) return NAN;
  double end = mdc_cli__now() + secs + 60;
  int st;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (stop_signal) kill(pid, SIGINT);
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
  fmt(d2, sizeof d2, "%s/default", dir);
  return stat_num(d2, "execs_per_sec");
}

/* ---- export --------------------------------------------------------------------------------- */

/* The newest stored finding whose signature starts with sig. */
typedef struct pick {
  const char *sig;
  char target[32], input[4096], signature[160];
  int64_t run;
  int matches;
} pick;

static int pick_finding(void *ctx, const mdc_fuzz_finding_row *f) {
  pick *pk = ctx;
  if (strncmp(f->signature, pk->sig, strlen(pk->sig))) return 0;
  if (pk->matches && f->run_id < pk->run) return 0;
  pk->matches++;
  pk->run = f->run_id;
  fmt(pk->target, sizeof pk->target, "%s", f->target);
  fmt(pk->signature, sizeof pk->signature, "%s", f->signature);
  fmt(pk->input, sizeof pk->input, "%s", f->minimized ? f->minimized : f->reproducer ? f->reproducer : "");
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc fuzz --target T [options]\n"
          "       mdc fuzz export SIGNATURE --out FILE [--db FILE]\n"
          "Runs an AFL++ campaign on fuzz target T (tokens, shapes, concurrency, trace; docs/fuzzing.md):\n"
          "one main instance and J-1 secondaries, statistics ingested into the results store as it\n"
          "runs, every crash and hang triaged at the end (replayed, grouped by signature, minimised,\n"
          "written as a trace). Ctrl-C stops it cleanly; running it again on the same --out resumes.\n\n"
          "  --seconds S      how long (default 60)\n"
          "  --jobs J         instances: main, then a CMPLOG one, one on the ASan build, more (default 1)\n"
          "  --driver SO      the driver to fuzz (default: the reference driver linked into the target)\n"
          "  --mutant NAME    with a mutants build as --driver: the mutant to run (sets MD_MUTANT)\n"
          "  --config STR     open_device keys (default backend=sim)\n"
          "  --db FILE        results store (default results/mdc.db; ':memory:' keeps nothing)\n"
          "  --out DIR        campaign folder (default results/fuzz/T): afl/, triage/, logs\n"
          "  --fresh          start over: the folder's earlier campaign is removed, not resumed\n"
          "  --seeds DIR      the initial corpus (default: the target's seeds made from the trace corpus)\n"
          "  --asan           the main instance on the ASan+UBSan build (slower; default: the UBSan build)\n"
          "  --ceiling S      first measure the trivial harness for S seconds: the ratio to it\n"
          "  --triage-runs N  replays of each finding for its reproduction rate (default 5; 20 for concurrency)\n"
          "  --tmin S         seconds afl-tmin may take per finding (default 60; 0: no minimising)\n"
          "  --node NAME      prefix this process's instance names (NAME-main, NAME-s1, ...): several\n"
          "                   processes or machines sharing one --out folder (docs/fuzzing.md)\n"
          "  --secondary      every instance of this process is a secondary (-S): the other nodes\n"
          "  --strict         also judge the reference driver's documented decisions (default: on for\n"
          "                   the reference driver and --mutant; --no-strict turns it off)\n"
          "  --fuzz-build DIR the fuzz builds: DIR, DIR-asan, DIR-cmplog (default %s/build-fuzz)\n"
          "  --until-finding  stop the campaign at its first crash or hang (AFL_BENCH_UNTIL_CRASH)\n"
          "  --no-mutator     AFL++'s byte mutations only (default: with them, the program targets'\n"
          "                   call-level mutations, libmd_fuzz_mutator.so)\n"
          "  --json           one JSON object on stdout\n"
          "  --quiet          no progress line and no summary\n\n"
          "exit status: 0 no finding, 1 findings, 2 bad usage or input (unknown target, no afl++, no\n"
          "fuzz build, a driver that cannot be loaded), 3 results store error\n",
          MDC_REPO_ROOT);
}

static int cmd_export(int argc, char **argv) {
  static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {"db", required_argument, 0, 'b'},
                                       {"fuzz-build", required_argument, 0, 'B'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *out = NULL, *db = "results/mdc.db", *fuzz_build = MDC_REPO_ROOT "/build-fuzz";
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': out = optarg; break;
      case 'b': db = optarg; break;
      case 'B': fuzz_build = optarg; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      default:
        fprintf(stderr, "mdc fuzz export: unknown option or missing value '%s'\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || !out) {
    fprintf(stderr, "mdc fuzz export: want SIGNATURE and --out FILE (mdc fuzz export SIGNATURE --out FILE)\n");
    return MDC_EXIT_USAGE;
  }
  const char *sig = argv[optind];
  mdc_store *s;
  char err[1024];
  int rc = mdc_store_open_read(db, &s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "mdc fuzz export: %s\n", err);
    return rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  }
  pick pk = {.sig = sig};
  rc = mdc_store_fuzz_findings_each(s, 0, 0, pick_finding, &pk);
  char driver[4096] = "", config[1024] = "", mutant[128] = "";
  if (rc == 0 && pk.matches) {
    mdc_run_row row;
    if (mdc_store_run_get(s, pk.run, &row) == 0) {
      if (row.driver_path && strcmp(row.driver_path, "(reference)")) fmt(driver, sizeof driver, "%s", row.driver_path);
      if (row.config) fmt(config, sizeof config, "%s", row.config);
      if (row.driver_name && !strncmp(row.driver_name, "mutant:", 7)) fmt(mutant, sizeof mutant, "MD_MUTANT=%s", row.driver_name + 7);
    }
    mdc_store_run_row_free(&row);
  }
  mdc_store_close(s);
  if (rc) {
    fprintf(stderr, "mdc fuzz export: reading %s failed\n", db);
    return MDC_EXIT_STORE;
  }
  if (!pk.matches) {
    fprintf(stderr, "mdc fuzz export: no finding with signature '%s' in %s\n", sig, db);
    return MDC_EXIT_USAGE;
  }
  if (!pk.input[0] || access(pk.input, R_OK)) {
    fprintf(stderr, "mdc fuzz export: the finding's input '%s' is gone\n", pk.input);
    return MDC_EXIT_USAGE;
  }
  if (mdc_cli__mkdir_parent(out)) {
    fprintf(stderr, "mdc fuzz export: cannot create the folder of '%s'\n", out);
    return MDC_EXIT_USAGE;
  }
  /* The target binary of the fuzz build loads what the campaign loaded (an instrumented driver
   * too); without a fuzz build, the plain md_fuzz_replay. */
  campaign cp = {.target = pk.target, .driver = driver[0] ? driver : NULL, .config = config[0] ? config : NULL,
                .mutant = mutant[0] ? mutant + 10 : NULL, .strict = 0};
  char bin[4300], name[256];
  fmt(bin, sizeof bin, "%s/fuzz/md_fuzz_%s", fuzz_build, pk.target);
  fmt(name, sizeof name, "fuzz/%s/%08x", pk.target, fnv(pk.signature));
  int failed;
  if (exists_exec(bin)) {
    failed = export_trace(&cp, bin, pk.input, out, name);
  } else {
    char *av[20];
    int k = 0;
    av[k++] = (char *)MDC_FUZZ_REPLAY;
    av[k++] = (char *)"--target", av[k++] = pk.target;
    av[k++] = (char *)"--allow-findings", av[k++] = (char *)"--quiet";
    av[k++] = (char *)"--trace", av[k++] = (char *)out, av[k++] = (char *)"--name", av[k++] = name;
    if (driver[0]) av[k++] = (char *)"--driver", av[k++] = driver;
    if (config[0]) av[k++] = (char *)"--config", av[k++] = config;
    av[k++] = pk.input;
    av[k] = NULL;
    char *env[2] = {mutant[0] ? mutant : NULL, NULL};
    static char outbuf[1 << 14];
    int to;
    int st = run_capture(av, env, 120, outbuf, sizeof outbuf, &to);
    failed = to || st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1 || access(out, R_OK);
  }
  if (failed) {
    fprintf(stderr, "mdc fuzz export: writing the trace of %s failed\n", pk.signature);
    return MDC_EXIT_USAGE;
  }
  fprintf(stderr, "mdc fuzz export: %s (target %s) written to %s\n", pk.signature, pk.target, out);
  return MDC_EXIT_OK;
}

/* ---- output --------------------------------------------------------------------------------- */

static void print_json(campaign *c, double dur, int interrupted) {
  json_t *fa = json_array();
  uint32_t crashes = 0, hangs = 0;
  double first = -1;
  for (size_t i = 0; i < c->n_f; i++) {
    finding *f = &c->f[i];
    if (!strcmp(f->kind, "hang")) hangs++;
    else crashes++;
    json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s}", "signature", f->signature, "kind", f->kind, "message",
                          f->message, "count", (int)f->count, "replays", f->replays, "reproduced", f->reproduced,
                          "reproducer", f->repro, "minimized", f->minimized);
    json_object_set_new(j, "trace", f->trace[0] ? json_string(f->trace) : json_null());
    json_object_set_new(j, "first_seen_s", f->first_s >= 0 ? json_real(f->first_s) : json_null());
    if (f->first_s >= 0 && (first < 0 || f->first_s < first)) first = f->first_s;
    json_array_append_new(fa, j);
  }
  json_t *inst = json_array();
  for (int i = 0; i < c->n_inst; i++)
    json_array_append_new(inst, json_pack("{s:s,s:s,s:b,s:b}", "name", c->inst[i].name, "binary", c->inst[i].binary,
                                          "asan", c->inst[i].asan, "cmplog", c->inst[i].cmplog[0] != 0));
  json_t *j = json_pack("{s:s,s:f,s:f,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:s,s:b}", "target", c->target,
                        "seconds", dur, "execs_per_sec", dur > 0 ? (double)c->execs / dur : 0.0, "execs",
                        (json_int_t)c->execs, "crashes", (json_int_t)crashes, "hangs", (json_int_t)hangs, "stability",
                        isnan(c->stability) ? json_null() : json_real(c->stability), "edges", (json_int_t)c->edges,
                        "corpus", (json_int_t)c->corpus, "raw_crashes", (json_int_t)c->raw_crashes, "raw_hangs",
                        (json_int_t)c->raw_hangs, "peak_rss_kb", c->rss_kb >= 0 ? json_integer(c->rss_kb) : json_null(),
                        "run_uuid", c->store && c->uuid[0] ? json_string(c->uuid) : json_null(), "out", c->out,
                        "interrupted", interrupted);
  if (!isnan(c->ceiling_eps)) {
    json_object_set_new(j, "ceiling_execs_per_sec", json_real(c->ceiling_eps));
    json_object_set_new(j, "ratio_to_ceiling",
                        json_real(c->ceiling_eps > 0 && dur > 0 ? (double)c->execs / dur / c->ceiling_eps : 0));
  }
  json_object_set_new(j, "first_finding_s", first >= 0 ? json_real(first) : json_null());
  json_object_set_new(j, "jobs", json_integer(c->n_inst));
  json_object_set_new(j, "instances", inst);
  json_object_set_new(j, "findings", fa);
  json_object_set_new(j, "driver", json_string(c->driver ? c->driver : "(reference)"));
  if (c->mutant) json_object_set_new(j, "mutant", json_string(c->mutant));
  json_object_set_new(j, "strict", json_boolean(c->strict));
  json_object_set_new(j, "program_mutator", json_boolean(c->mutator));
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
  json_decref(j);
  if (s) puts(s);
  free(s);
  fflush(stdout);
}

static void summary(FILE *f, campaign *c, double dur, int interrupted) {
  fprintf(f, "mdc fuzz: %s, %.0f s%s, %d instance%s, driver %s%s%s\n", c->target, dur,
          interrupted ? " (interrupted)" : "", c->n_inst, c->n_inst == 1 ? "" : "s",
          c->driver ? c->driver : "(reference)", c->mutant ? ", mutant " : "", c->mutant ? c->mutant : "");
  fprintf(f, "  execs %" PRId64 " (%.0f/s), edges %" PRId64 ", corpus %" PRId64 ", stability %.2f%%, peak RSS %" PRId64
          " KiB\n", c->execs, dur > 0 ? (double)c->execs / dur : 0, c->edges, c->corpus,
          isnan(c->stability) ? 0.0 : c->stability, c->rss_kb);
  if (!isnan(c->ceiling_eps))
    fprintf(f, "  ceiling (trivial harness, this machine, just before) %.0f/s: ratio %.3f\n", c->ceiling_eps,
            c->ceiling_eps > 0 && dur > 0 ? (double)c->execs / dur / c->ceiling_eps : 0);
  if (c->store && c->uuid[0]) fprintf(f, "  results: %s (run %s), campaign folder %s\n", c->db, c->uuid, c->out);
  fprintf(f, "  %zu finding%s\n", c->n_f, c->n_f == 1 ? "" : "s");
  for (size_t i = 0; i < c->n_f; i++) {
    finding *x = &c->f[i];
    char sig[400], msg[1600];
    mdc_cli__terminal_safe(x->signature, sig, sizeof sig);
    mdc_cli__terminal_safe(x->message, msg, sizeof msg);
    fprintf(f, "  %-6s %s  (%u input%s, first after %.1f s, reproduced %d/%d)\n         %s\n         trace: %s\n",
            x->kind, sig, x->count, x->count == 1 ? "" : "s", x->first_s, x->reproduced, x->replays, msg,
            x->trace[0] ? x->trace : "(none)");
  }
}

static int rm_rf(const char *path) {
  char *argv[] = {(char *)"rm", (char *)"-rf", (char *)path, NULL};
  char out[256];
  int to;
  int st = run_capture(argv, NULL, 120, out, sizeof out, &to);
  return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The driver and config must open a device: the main target binary running an empty program
 * says (it, unlike a plain binary, loads a driver instrumented for AFL++ too). */
static int probe_driver(const campaign *c, const char *binary) {
  char empty[] = "/tmp/mdc-fuzz-probe-XXXXXX";
  int fd = mkstemp(empty);
  if (fd < 0) return 0;
  if (write(fd, "\0\0\0\0", 4) != 4) {}
  close(fd);
  char *av[] = {(char *)binary, empty, NULL};
  char bufs[4][4200];
  char *env[12];
  int e = target_env(c, env, bufs, 0);
  env[e++] = asan_env();
  env[e] = NULL;
  static char out[8192];
  int to;
  int st = run_capture(av, env, 60, out, sizeof out, &to);
  unlink(empty);
  if (!to && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  const char *m = strstr(out, "mdc fuzz target ");
  char line[1024];
  if (m) fmt(line, sizeof line, "%.*s", (int)strcspn(m, "\n"), m);
  else if (to) fmt(line, sizeof line, "opening a device took more than 60 s");
  else fmt(line, sizeof line, "%s could not run an empty program", binary);
  char safe[1200];
  mdc_cli__terminal_safe(line, safe, sizeof safe);
  fprintf(stderr, "mdc fuzz: driver %s: %s\n", c->driver ? c->driver : "(reference)", safe);
  return -1;
}

int mdc_cli__cmd_fuzz(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1);
  static const struct option opts[] = {
      {"target", required_argument, 0, 'T'},  {"seconds", required_argument, 0, 's'},
      {"jobs", required_argument, 0, 'j'},    {"driver", required_argument, 0, 'd'},
      {"mutant", required_argument, 0, 'M'},  {"config", required_argument, 0, 'c'},
      {"db", required_argument, 0, 'b'},      {"out", required_argument, 0, 'o'},
      {"fresh", no_argument, 0, 'F'},         {"asan", no_argument, 0, 'A'},
      {"ceiling", required_argument, 0, 'C'}, {"triage-runs", required_argument, 0, 'r'},
      {"tmin", required_argument, 0, 'm'},    {"fuzz-build", required_argument, 0, 'B'},
      {"json", no_argument, 0, 'J'},          {"quiet", no_argument, 0, 'q'},
      {"seeds", required_argument, 0, 'I'},   {"node", required_argument, 0, 'N'},
      {"secondary", no_argument, 0, 'S'},     {"strict", no_argument, 0, 'x'},
      {"no-strict", no_argument, 0, 'X'},     {"until-finding", no_argument, 0, 'U'},
      {"no-mutator", no_argument, 0, 'P'},    {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  static campaign c;
  memset(&c, 0, sizeof c);
  c.seconds = 60;
  c.jobs = 1;
  c.db = "results/mdc.db";
  c.fuzz_build = MDC_REPO_ROOT "/build-fuzz";
  c.triage_runs = 5;
  c.tmin_s = 60;
  c.stability = NAN;
  c.ceiling_eps = NAN;
  c.rss_kb = -1;
  double ceiling_s = 0;
  const char *out_opt = NULL;
  int strict_opt = -1, no_mutator = 0, opt;
  long v;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (opt) {
      case 'T': c.target = optarg; break;
      case 'd': c.driver = optarg; break;
      case 'M': c.mutant = optarg; break;
      case 'c': c.config = optarg; break;
      case 'b': c.db = optarg; break;
      case 'o': out_opt = optarg; break;
      case 'F': c.fresh = 1; break;
      case 'A': c.asan_main = 1; break;
      case 'B': c.fuzz_build = optarg; break;
      case 'J': c.json = 1; break;
      case 'q': c.quiet = 1; break;
      case 'I': c.seeds = optarg; break;
      case 'N': c.node = optarg; break;
      case 'S': c.secondary = 1; break;
      case 'x': strict_opt = 1; break;
      case 'X': strict_opt = 0; break;
      case 'P': no_mutator = 1; break;
      case 'U': c.until_finding = 1; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case 's':
        if (mdc_cli__parse_seconds(optarg, &c.seconds)) {
          fprintf(stderr, "mdc fuzz: --seconds '%s': want seconds > 0 (at most 86400)\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'C':
        if (mdc_cli__parse_seconds(optarg, &ceiling_s)) {
          fprintf(stderr, "mdc fuzz: --ceiling '%s': want seconds > 0\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'j':
        if (mdc_cli__parse_int(optarg, 1, MAX_JOBS, &v)) {
          fprintf(stderr, "mdc fuzz: --jobs '%s': want 1..%d\n", optarg, MAX_JOBS);
          return MDC_EXIT_USAGE;
        }
        c.jobs = (int)v;
        break;
      case 'r':
        if (mdc_cli__parse_int(optarg, 1, 1000, &v)) {
          fprintf(stderr, "mdc fuzz: --triage-runs '%s': want 1..1000\n", optarg);
          return MDC_EXIT_USAGE;
        }
        c.triage_runs = (int)v;
        break;
      case 'm':
        if (mdc_cli__parse_int(optarg, 0, 86400, &v)) {
          fprintf(stderr, "mdc fuzz: --tmin '%s': want 0..86400 seconds\n", optarg);
          return MDC_EXIT_USAGE;
        }
        c.tmin_s = (int)v;
        break;
      default:
        fprintf(stderr, "mdc fuzz: unknown option or missing value '%s' (see mdc fuzz --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mdc fuzz: unexpected argument '%s' (mdc fuzz --target T ..., or mdc fuzz export)\n",
            argv[optind]);
    return MDC_EXIT_USAGE;
  }
  if (!c.target) {
    fprintf(stderr, "mdc fuzz: --target is required (tokens, shapes, concurrency or trace)\n");
    return MDC_EXIT_USAGE;
  }
  int known = 0;
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) known |= !strcmp(c.target, targets[i]);
  if (!known) {
    fprintf(stderr, "mdc fuzz: --target '%s': unknown target (tokens, shapes, concurrency or trace)\n", c.target);
    return MDC_EXIT_USAGE;
  }
  /* The reference driver's documented decisions are judged on it and on its mutants only. */
  c.strict = strict_opt >= 0 ? strict_opt : (!c.driver || c.mutant != NULL);
  c.mutator = !no_mutator && strcmp(c.target, "trace") && access(MDC_FUZZ_MUTATOR, R_OK) == 0;
  if (c.node && (!c.node[0] || strcspn(c.node, "/ \t:,") != strlen(c.node))) {
    fprintf(stderr, "mdc fuzz: --node '%s': want a name without '/', ':', ',' or blanks\n", c.node);
    return MDC_EXIT_USAGE;
  }
  char tool[4096];
  if (!in_path("afl-fuzz", tool, sizeof tool)) {
    fprintf(stderr, "mdc fuzz: afl-fuzz is not installed (not in PATH): `make fuzz-build` installs afl++ with apt\n");
    return MDC_EXIT_USAGE;
  }
  char bin[4300], asan_bin[4300], cmplog_bin[4300];
  fmt(bin, sizeof bin, "%s/fuzz/md_fuzz_%s", c.fuzz_build, c.target);
  fmt(asan_bin, sizeof asan_bin, "%s-asan/fuzz/md_fuzz_%s", c.fuzz_build, c.target);
  fmt(cmplog_bin, sizeof cmplog_bin, "%s-cmplog/fuzz/md_fuzz_%s", c.fuzz_build, c.target);
  const char *main_bin = c.asan_main ? asan_bin : bin;
  if (!exists_exec(main_bin)) {
    fprintf(stderr, "mdc fuzz: %s is not built: run `make fuzz-build` first\n", main_bin);
    return MDC_EXIT_USAGE;
  }
  static char driver_abs[4096];
  if (c.driver && (access(c.driver, R_OK) || !realpath(c.driver, driver_abs))) {
    fprintf(stderr, "mdc fuzz: --driver '%s': %s\n", c.driver, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  if (c.driver) c.driver = driver_abs;
  if (probe_driver(&c, main_bin)) return MDC_EXIT_USAGE;
  if (out_opt) fmt(c.out, sizeof c.out, "%s", out_opt);
  else fmt(c.out, sizeof c.out, "results/fuzz/%s", c.target);
  fmt(c.afl, sizeof c.afl, "%s/afl", c.out);
  if (c.fresh && rm_rf(c.out)) {
    fprintf(stderr, "mdc fuzz: cannot remove '%s' for --fresh\n", c.out);
    return MDC_EXIT_USAGE;
  }
  char probe[4200];
  fmt(probe, sizeof probe, "%s/x", c.afl);
  if (mdc_cli__mkdir_parent(probe) != 0) {
    fprintf(stderr, "mdc fuzz: cannot create the campaign folder '%s': %s\n", c.afl, strerror(errno));
    return MDC_EXIT_USAGE;
  }
  char mainstats[4300];
  fmt(mainstats, sizeof mainstats, "%s/%s%s%s/fuzzer_stats", c.afl, c.node ? c.node : "", c.node ? "-" : "",
      c.secondary ? "s1" : "main");
  int resumed = access(mainstats, R_OK) == 0;
  char seeds[4300], dict[4300];
  if (c.seeds) fmt(seeds, sizeof seeds, "%s", c.seeds);
  else fmt(seeds, sizeof seeds, "%s/fuzz/seeds/%s", MDC_BUILD_DIR, c.target);
  fmt(dict, sizeof dict, "%s/fuzz/dict/%s.dict", MDC_BUILD_DIR, c.target);
  if (!resumed && access(seeds, R_OK)) {
    fprintf(stderr, "mdc fuzz: seeds '%s': %s\n", seeds, strerror(errno));
    return MDC_EXIT_USAGE;
  }

  /* The store: the run and its campaign row first. */
  char err[1024];
  c.tty = !c.quiet && isatty(STDERR_FILENO);
  struct stat dst;
  if (!c.db[0]) {
    fprintf(stderr, "mdc fuzz: --db '': the results store needs a file name\n");
    return MDC_EXIT_STORE;
  }
  if (strcmp(c.db, ":memory:") && stat(c.db, &dst) == 0 && !S_ISREG(dst.st_mode)) {
    fprintf(stderr, "mdc fuzz: results store '%s': not a regular file (a store is a SQLite file)\n", c.db);
    return MDC_EXIT_STORE;
  }
  if (strcmp(c.db, ":memory:") && mdc_cli__mkdir_parent(c.db) != 0) {
    fprintf(stderr, "mdc fuzz: cannot create the folder of '%s': %s\n", c.db, strerror(errno));
    return MDC_EXIT_STORE;
  }
  if (mdc_store_open(c.db, &c.store, err, sizeof err)) {
    fprintf(stderr, "mdc fuzz: %s\n", err);
    return MDC_EXIT_STORE;
  }
  char drvname[96];
  fmt(drvname, sizeof drvname, "%s%s", c.mutant ? "mutant:" : "",
      c.mutant ? c.mutant : c.driver ? "(vendor)" : "mdc-reference");
  mdc_run_info ri = {.kind = "fuzz", .driver_name = drvname, .driver_path = c.driver ? c.driver : "(reference)",
                     .backend = "sim", .config = c.config ? c.config : "backend=sim"};
  mdc_fuzz_campaign fc = {.target = c.target, .jobs = (uint32_t)c.jobs, .planned_s = c.seconds, .out_dir = c.out,
                          .resumed = resumed};
  if (mdc_store_run_begin(c.store, &ri, &c.run_id, c.uuid) || mdc_store_fuzz_campaign(c.store, c.run_id, &fc)) {
    fprintf(stderr, "mdc fuzz: %s\n", mdc_store_error(c.store));
    mdc_store_close(c.store);
    return MDC_EXIT_STORE;
  }
  c.store_ok = 1;
  struct sigaction sa = {.sa_handler = on_stop};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  if (ceiling_s > 0) {
    if (!c.quiet) fprintf(stderr, "mdc fuzz: measuring the ceiling (trivial harness) for %.0f s\n", ceiling_s);
    c.ceiling_eps = measure_ceiling(&c, ceiling_s);
  }
  const char *in = resumed ? "-" : seeds;
  c.t_start = mdc_cli__now();
  for (int i = 0; i < c.jobs && !stop_signal; i++) {
    instance *x = &c.inst[c.n_inst++];
    memset(x, 0, sizeof *x);
    x->main = i == 0 && !c.secondary;
    fmt(x->name, sizeof x->name, "%s%s%s", c.node ? c.node : "", c.node ? "-" : "", x->main ? "main" : "");
    if (!x->main) fmt(x->name + strlen(x->name), sizeof x->name - strlen(x->name), "s%d", i + c.secondary);
    fmt(x->binary, sizeof x->binary, "%s", i == 0 ? main_bin : bin);
    x->asan = i == 0 && c.asan_main;
    if (i == 1 && exists_exec(cmplog_bin)) fmt(x->cmplog, sizeof x->cmplog, "%s", cmplog_bin);
    if (i == 2 && exists_exec(asan_bin)) {
      fmt(x->binary, sizeof x->binary, "%s", asan_bin);
      x->asan = 1;
    }
    if (launch(&c, x, in, dict, c.seconds)) {
      fprintf(stderr, "mdc fuzz: cannot start afl-fuzz: %s\n", strerror(errno));
      c.n_inst--;
      break;
    }
  }
  /* Run: ingest every few seconds until the instances end (-V), the time is up, or a signal. */
  double last_ingest = 0, end = c.t_start + c.seconds;
  int interrupted = 0;
  for (;;) {
    double now = mdc_cli__now();
    if (stop_signal && !interrupted) {
      interrupted = stop_signal;
      stop_all(&c, SIGINT);   /* afl-fuzz writes its stats and queue, and exits */
      wait_all(&c, now + 15);
    }
    int alive = 0;
    for (int i = 0; i < c.n_inst; i++) {
      instance *x = &c.inst[i];
      int st;
      if (x->running && waitpid(x->pid, &st, WNOHANG) == x->pid) {
        x->running = 0;
        kill(-x->pid, SIGKILL);
        if (c.until_finding) {
          stop_all(&c, SIGINT);
          wait_all(&c, now + 15);
        }
      }
      alive += x->running;
    }
    if (now - last_ingest >= INGEST_EVERY_S || !alive) {
      ingest(&c);
      progress(&c);
      last_ingest = now;
    }
    if (!alive) break;
    if (now > end + 30) {   /* -V should have ended them */
      stop_all(&c, SIGINT);
      wait_all(&c, now + 15);
    }
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
  }
  double dur = mdc_cli__now() - c.t_start;
  if (c.tty) fprintf(stderr, "\r\033[K");
  ingest(&c);
  /* An instance that stopped at once (afl-fuzz refused): say why from its log. */
  if (c.execs == 0 && !interrupted && c.n_inst) {
    char log[4300], line[512], last[512] = "";
    fmt(log, sizeof log, "%s/%s.log", c.out, c.inst[0].name);
    FILE *lf = fopen(log, "r");
    while (lf && fgets(line, sizeof line, lf))
      if (strstr(line, "PROGRAM ABORT") || strstr(line, "ERROR") || strstr(line, "Location")) fmt(last, sizeof last, "%s", line);
    if (lf) fclose(lf);
    if (last[0]) {
      char safe[600];
      mdc_cli__terminal_safe(last, safe, sizeof safe);
      fprintf(stderr, "mdc fuzz: afl-fuzz stopped at once (see %s): %s\n", log, safe);
    }
  }
  if (!c.quiet)
    fprintf(stderr, "mdc fuzz: triaging %" PRId64 " crash%s and %" PRId64 " hang%s\n", c.raw_crashes,
            c.raw_crashes == 1 ? "" : "es", c.raw_hangs, c.raw_hangs == 1 ? "" : "s");
  stop_signal = 0;
  triage(&c);
  int rc = c.n_f ? MDC_EXIT_UNEXPECTED : MDC_EXIT_OK;
  if (c.store_ok) {
    for (size_t i = 0; i < c.n_f && c.store_ok; i++) {
      finding *f = &c.f[i];
      mdc_fuzz_finding ff = {.target = c.target, .signature = f->signature, .kind = f->kind, .message = f->message,
                             .count = f->count, .replays = f->replays, .reproduced = f->reproduced,
                             .reproducer = f->repro, .minimized = f->minimized, .trace = f->trace[0] ? f->trace : NULL};
      if (mdc_store_fuzz_finding(c.store, c.run_id, &ff, NULL)) c.store_ok = 0;
    }
    uint32_t crashes = 0, hangs = 0;
    for (size_t i = 0; i < c.n_f; i++) strcmp(c.f[i].kind, "hang") ? crashes++ : hangs++;
    mdc_run_summary sum = {.cases = (uint32_t)c.n_f, .crashed = crashes, .timed_out = hangs,
                           .unexpected = (uint32_t)c.n_f, .interrupted = interrupted != 0};
    if (c.store_ok && mdc_store_run_finish(c.store, c.run_id, &sum)) c.store_ok = 0;
  }
  if (!c.store_ok) {
    fprintf(stderr, "mdc fuzz: %s\n", mdc_store_error(c.store));
    rc = MDC_EXIT_STORE;
  }
  mdc_store_close(c.store);
  if (c.json) {
    if (!c.quiet) summary(stderr, &c, dur, interrupted);
    print_json(&c, dur, interrupted);
  } else if (!c.quiet) {
    summary(stdout, &c, dur, interrupted);
  }
  free(c.f);
  mdc_cli__reap_all();
  return rc;
}
