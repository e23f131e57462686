/* fuzz_stats.c - what `mdc fuzz` reads of its afl-fuzz instances (docs/fuzzing.md): each one's
 * fuzzer_stats and new plot_data rows, and the peak RSS of its targets, summed into the
 * campaign's totals and written to the results store as samples; the progress line. */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fuzz_int.h"
#include "mdc_int.h"

static int stats_read(const char *dir, const char *key, char *val, size_t n) {
  char path[4200], line[512];
  mdc_cli__fmt(path, sizeof path, "%s/fuzzer_stats", dir);
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
    mdc_cli__fmt(val, n, "%s", c);
    found = 0;
    break;
  }
  fclose(f);
  return found;
}

double mdc_cli__fuzz_stat_num(const char *dir, const char *key) {
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
      mdc_cli__fmt(path, sizeof path, "/proc/%d/stat", (int)cur);
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
    mdc_cli__fmt(path, sizeof path, "/proc/%d/status", (int)pid);
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
static size_t plot_ingest(mdc_cli__campaign *c, mdc_cli__instance *in, mdc_fuzz_stat *v, size_t cap) {
  char path[4200];
  mdc_cli__fmt(path, sizeof path, "%s/%s/plot_data", c->afl, in->name);
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
void mdc_cli__fuzz_ingest(mdc_cli__campaign *c) {
  static mdc_fuzz_stat v[4096];
  size_t n = 0;
  int64_t execs = 0, edges = 0, corpus = 0, crashes = 0, hangs = 0, rss = c->rss_kb;
  double eps = 0, stab = NAN;
  for (int i = 0; i < c->n_inst; i++) {
    mdc_cli__instance *in = &c->inst[i];
    char dir[4200];
    mdc_cli__fmt(dir, sizeof dir, "%s/%s", c->afl, in->name);
    n += plot_ingest(c, in, v + n, sizeof v / sizeof v[0] - n - MDC_FUZZ_MAX_JOBS);
    double e = mdc_cli__fuzz_stat_num(dir, "execs_done"), s = mdc_cli__fuzz_stat_num(dir, "execs_per_sec");
    double st = mdc_cli__fuzz_stat_num(dir, "stability"), ed = mdc_cli__fuzz_stat_num(dir, "edges_found");
    double co = mdc_cli__fuzz_stat_num(dir, "corpus_count"), cr = mdc_cli__fuzz_stat_num(dir, "saved_crashes");
    double hg = mdc_cli__fuzz_stat_num(dir, "saved_hangs"), rt = mdc_cli__fuzz_stat_num(dir, "run_time");
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

void mdc_cli__fuzz_progress(const mdc_cli__campaign *c) {
  if (!c->tty || c->quiet) return;
  double t = mdc_cli__now() - c->t_start;
  fprintf(stderr, "\r[%5.0fs/%.0fs] %s: execs %" PRId64 " (%.0f/s) edges %" PRId64 " corpus %" PRId64
          " crashes %" PRId64 " hangs %" PRId64 " stability %.1f%%\033[K",
          t, c->seconds, c->target, c->execs, c->eps, c->edges, c->corpus, c->raw_crashes, c->raw_hangs,
          isnan(c->stability) ? 0.0 : c->stability);
  fflush(stderr);
}
