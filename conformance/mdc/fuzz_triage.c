/* fuzz_triage.c - the end of an `mdc fuzz` campaign (docs/fuzzing.md): every crash and hang its
 * instances saved replayed and named by a signature (an oracle finding's own, the sanitizer's
 * kind and the project's top frames, or the signal), grouped by it; the first of each group
 * replayed for its reproduction rate, minimised with afl-tmin and written as a trace. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc_int.h"

/* A stack frame's function from an "    #3 0x55d4 in md__buffer_put /path/buffer.c:12:3" line. */
static int frame_func(const char *line, const char *eol, char *out, size_t n) {
  const char *hash = memchr(line, '#', (size_t)(eol - line));
  const char *in = hash ? strstr(hash, " in ") : NULL;
  if (!in || in >= eol) return -1;
  in += 4;
  size_t k = strcspn(in, " \n");
  if (!k) return -1;
  mdc_cli__fmt(out, n, "%.*s", (int)k, in);
  return 0;
}

/* The frame's place after its function, as "buffer.c:12" (the base name, no column), from
 * "    #3 0x55d4 in md__buffer_put /path/buffer.c:12:3"; "" when the frame has none (no debug
 * information: "(/path/lib.so+0x1234)"). */
static void frame_where(const char *line, const char *eol, char *out, size_t n) {
  out[0] = 0;
  const char *hash = memchr(line, '#', (size_t)(eol - line));
  const char *in = hash ? strstr(hash, " in ") : NULL;
  if (!in || in >= eol) return;
  const char *sp = memchr(in + 4, ' ', (size_t)(eol - (in + 4)));
  if (!sp) return;
  const char *tok = sp + 1, *end = tok;
  while (end < eol && *end != ' ' && *end != '\n') end++;
  if (tok >= end || *tok == '(') return;
  const char *base = tok;
  for (const char *q = tok; q < end; q++)
    if (*q == '/') base = q + 1;
  const char *c1 = memchr(base, ':', (size_t)(end - base));
  if (!c1 || c1 + 1 >= end || c1[1] < '0' || c1[1] > '9') return;
  const char *c2 = c1 + 1;
  while (c2 < end && *c2 >= '0' && *c2 <= '9') c2++;
  mdc_cli__fmt(out, n, "%.*s", (int)(c2 - base), base);
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
    mdc_cli__fmt(sig, n, "%.*s", (int)k, o);
    strcpy(kind, "oracle");
    const char *m = strchr(o, '\n');
    if (m) mdc_cli__fmt(msg, msgn, "%.*s", (int)strcspn(m + 1, "\n"), m + 1);
    return;
  }
  if (timed_out) {
    mdc_cli__fmt(sig, n, "hang:%s", hang_op && *hang_op ? hang_op : "?");
    strcpy(kind, "hang");
    mdc_cli__fmt(msg, msgn, "no end within the time limit%s%s", hang_op && *hang_op ? ", in " : "",
                 hang_op ? hang_op : "");
    return;
  }
  const char *a = strstr(out, "ERROR: AddressSanitizer: ");
  const char *u = strstr(out, "runtime error: ");
  char what[96] = "";
  if (a) mdc_cli__fmt(what, sizeof what, "asan-%.*s", (int)strcspn(a + 25, " \n"), a + 25);
  else if (u) mdc_cli__fmt(what, sizeof what, "ubsan");
  else if (st >= 0 && WIFSIGNALED(st)) {
    const char *ab = sigabbrev_np(WTERMSIG(st));
    mdc_cli__fmt(what, sizeof what, "SIG%s", ab ? ab : "?");
  } else if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    mdc_cli__fmt(what, sizeof what, "exit%d", WEXITSTATUS(st));
  } else {
    return;
  }
  char frames[3][96], top_where[96] = "";
  int nf = 0;
  const char *line = a ? a : u ? u : out;
  while (line && *line && nf < 3) {
    const char *eol = strchr(line, '\n');
    if (!eol) eol = line + strlen(line);
    char fn[96];
    if (frame_func(line, eol, fn, sizeof fn) == 0 && !boring_frame(fn)) {
      if (!nf) frame_where(line, eol, top_where, sizeof top_where);
      mdc_cli__fmt(frames[nf++], sizeof frames[0], "%s", fn);
    }
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
    mdc_cli__fmt(frames[0], sizeof frames[0], "%.*s", (int)((colon && colon < u ? colon : u) - slash), slash);
    nf = 1;
  }
  mdc_cli__fmt(sig, n, "crash:%s", what);
  for (int i = 0; i < nf; i++) {
    size_t used = strlen(sig);
    mdc_cli__fmt(sig + used, n - used, ":%s", frames[i]);
    /* The top frame's file:line, where the build has debug information (issue 26). */
    if (i == 0 && top_where[0]) used = strlen(sig), mdc_cli__fmt(sig + used, n - used, "@%s", top_where);
  }
  strcpy(kind, "crash");
  const char *first = a ? a : u;
  if (first) mdc_cli__fmt(msg, msgn, "%.*s", (int)strcspn(first, "\n"), first);
  else mdc_cli__fmt(msg, msgn, "the target died: %s", what);
}

/* Replays one input on binary (an AFL++ target runs the files given as arguments) and names
 * what it did. */
static void replay_once(mdc_cli__campaign *c, const char *binary, const char *input, char *sig, size_t n,
                        char *kind, char *msg, size_t msgn) {
  static char out[1 << 16];
  char bufs[4][4200], sym[4200];
  char *env[12];
  int e = mdc_cli__fuzz_target_env(c, env, bufs, 0);
  char symbolizer[4096];
  if (mdc_cli__fuzz_in_path("llvm-symbolizer", symbolizer, sizeof symbolizer) ||
      mdc_cli__fuzz_in_path("llvm-symbolizer-14", symbolizer, sizeof symbolizer))
    mdc_cli__fmt(sym, sizeof sym, "ASAN_SYMBOLIZER_PATH=%s", symbolizer), env[e++] = sym;
  env[e++] = mdc_cli__fuzz_asan_env();
  env[e++] = (char *)"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1";
  env[e] = NULL;
  char *argv[] = {(char *)binary, (char *)input, NULL};
  int to = 0;
  int st = mdc_cli__fuzz_run_capture(argv, env, 10, out, sizeof out, &to);
  char op[64] = "";
  if (to) {
    /* where it hangs: the target's own alarm says which call */
    static char out2[8192];
    env[e++] = (char *)"MDC_FUZZ_TIMEOUT=5";
    env[e] = NULL;
    int to2;
    mdc_cli__fuzz_run_capture(argv, env, 20, out2, sizeof out2, &to2);
    const char *h = strstr(out2, "MDC-FUZZ-HANG call ");
    const char *par = h ? strchr(h, '(') : NULL;
    if (par) mdc_cli__fmt(op, sizeof op, "%.*s", (int)strcspn(par + 1, ")"), par + 1);
  }
  signature_of(out, st, to, op, sig, n, kind, msg, msgn);
}

static mdc_cli__finding *finding_for(mdc_cli__campaign *c, const char *sig) {
  for (size_t i = 0; i < c->n_f; i++)
    if (!strcmp(c->f[i].signature, sig)) return &c->f[i];
  if (c->n_f == c->cap_f) {
    c->cap_f = c->cap_f ? 2 * c->cap_f : 16;
    mdc_cli__finding *f = realloc(c->f, c->cap_f * sizeof *f);
    if (!f) return NULL;
    c->f = f;
  }
  mdc_cli__finding *f = &c->f[c->n_f++];
  memset(f, 0, sizeof *f);
  f->first_s = -1;
  mdc_cli__fmt(f->signature, sizeof f->signature, "%s", sig);
  return f;
}

uint32_t mdc_cli__fuzz_fnv(const char *s) {
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
static void minimise(mdc_cli__campaign *c, mdc_cli__finding *f, const char *base) {
  char tmin[4096], tmp[4500], tout[16];
  if (!mdc_cli__fuzz_in_path("afl-tmin", tmin, sizeof tmin)) return;
  mdc_cli__fmt(tmp, sizeof tmp, "%s.tmin", base);
  mdc_cli__fmt(tout, sizeof tout, "%d", !strcmp(f->kind, "hang") ? 2000 : 1000);
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
  int e = mdc_cli__fuzz_target_env(c, env, bufs, 1);
  env[e++] = mdc_cli__fuzz_asan_env();
  env[e++] = (char *)"AFL_SKIP_CPUFREQ=1";
  env[e] = NULL;
  static char out[1 << 14];
  int to;
  mdc_cli__fuzz_run_capture(argv, env, c->tmin_s, out, sizeof out, &to);
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
int mdc_cli__fuzz_export_trace(const mdc_cli__campaign *c, const char *binary, const char *input, const char *out,
                               const char *name) {
  char bufs[4][4200], to_out[4300], to_name[400];
  char *env[16];
  int e = mdc_cli__fuzz_target_env(c, env, bufs, 0);
  mdc_cli__fmt(to_out, sizeof to_out, "MDC_FUZZ_TRACE_OUT=%s", out);
  mdc_cli__fmt(to_name, sizeof to_name, "MDC_FUZZ_TRACE_NAME=%s", name);
  env[e++] = to_out;
  env[e++] = to_name;
  env[e++] = (char *)"MDC_FUZZ_TIMEOUT=5";
  env[e++] = mdc_cli__fuzz_asan_env();
  env[e] = NULL;
  char *argv[] = {(char *)binary, (char *)input, NULL};
  static char buf[1 << 14];
  int to;
  unlink(out);
  int st = mdc_cli__fuzz_run_capture(argv, env, 60, buf, sizeof buf, &to);
  return !to && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && access(out, R_OK) == 0 ? 0 : -1;
}

/* Every crash and hang of this process's instances: replayed, grouped by signature; the first of
 * each group replayed triage_runs times (20 for concurrency), minimised, written as a trace. */
void mdc_cli__fuzz_triage(mdc_cli__campaign *c) {
  char tri[4200];
  mdc_cli__fmt(tri, sizeof tri, "%s/triage", c->out);
  mkdir(tri, 0755);
  int conc = !strcmp(c->target, "concurrency");
  for (int i = 0; i < c->n_inst; i++) {
    const mdc_cli__instance *in = &c->inst[i];
    for (int h = 0; h < 2; h++) {
      char dir[4300];
      mdc_cli__fmt(dir, sizeof dir, "%s/%s/%s", c->afl, in->name, h ? "hangs" : "crashes");
      DIR *d = opendir(dir);
      if (!d) continue;
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "id:", 3)) continue;
        char path[4600], sig[160], kind[8], msg[768];
        mdc_cli__fmt(path, sizeof path, "%s/%s", dir, e->d_name);
        replay_once(c, in->binary, path, sig, sizeof sig, kind, msg, sizeof msg);
        if (!sig[0]) {
          mdc_cli__fmt(sig, sizeof sig, "%s:unreproduced", h ? "hang" : "crash");
          strcpy(kind, h ? "hang" : "crash");
          mdc_cli__fmt(msg, sizeof msg, "the input ran clean when replayed (a race, or state from earlier inputs)");
        }
        mdc_cli__finding *f = finding_for(c, sig);
        if (!f) continue;
        f->count++;
        const char *tm = strstr(e->d_name, ",time:");
        double t = tm ? strtod(tm + 6, NULL) / 1000.0 : -1;
        if (t >= 0 && (f->first_s < 0 || t < f->first_s)) f->first_s = t;
        if (!f->repro[0]) {
          mdc_cli__fmt(f->repro, sizeof f->repro, "%s", path);
          mdc_cli__fmt(f->kind, sizeof f->kind, "%s", kind);
          mdc_cli__fmt(f->message, sizeof f->message, "%s", msg);
          mdc_cli__fmt(f->binary, sizeof f->binary, "%s", in->binary);
        }
        if (!c->quiet && c->tty) fprintf(stderr, "\r  triage: %zu signature%s so far\033[K", c->n_f, c->n_f == 1 ? "" : "s");
      }
      closedir(d);
    }
  }
  if (c->tty && !c->quiet && c->n_f) fprintf(stderr, "\n");
  for (size_t i = 0; i < c->n_f; i++) {
    mdc_cli__finding *f = &c->f[i];
    char base[4400];
    mdc_cli__fmt(base, sizeof base, "%s/%08x", tri, mdc_cli__fuzz_fnv(f->signature));
    mdc_cli__fmt(f->minimized, sizeof f->minimized, "%s.input", base);
    copy_file(f->repro, f->minimized);
    mdc_cli__fmt(f->repro, sizeof f->repro, "%s.reproducer", base);
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
    mdc_cli__fmt(f->trace, sizeof f->trace, "%s.jsonl", base);
    char name[256];
    mdc_cli__fmt(name, sizeof name, "fuzz/%s/%08x", c->target, mdc_cli__fuzz_fnv(f->signature));
    if (mdc_cli__fuzz_export_trace(c, f->binary, f->minimized, f->trace, name)) f->trace[0] = 0;
  }
}
