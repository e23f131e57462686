/* mutate_out.c - `mdc mutate`'s --since (git diff), the score (overall, per file, per function;
 * Wilson's 95 % interval for a sample), the summary and --json, and the run in the store. */
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "mutate_int.h"

/* ---- --since REV ------------------------------------------------------------------------------ */

int mdc_mutate__since(mdc_mutate *m) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "git -C '%s' diff -U0 --no-color '%s' --", m->root, m->since);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char *line = NULL, file[4096] = "";
  size_t cap = 0;
  /* changed[k]: (file, first, last) of each hunk's new side */
  typedef struct hunk { char *file; uint32_t a, b; } hunk;
  hunk *h = NULL;
  size_t n = 0;
  while (getline(&line, &cap, p) > 0) {
    if (!strncmp(line, "+++ b/", 6)) {
      snprintf(file, sizeof file, "%s", line + 6);
      file[strcspn(file, "\n")] = 0;
    } else if (!strncmp(line, "@@ ", 3)) {
      char *plus = strchr(line, '+');
      unsigned a = 0, c = 1;
      if (!plus || sscanf(plus, "+%u,%u", &a, &c) < 1) continue;
      if (c == 0) continue;
      h = realloc(h, (n + 1) * sizeof *h);
      h[n++] = (hunk){strdup(file), a, a + c - 1};
    }
  }
  free(line);
  int st = pclose(p);
  if (st != 0) {
    fprintf(stderr, "mdc mutate: --since %s: git diff failed in %s\n", m->since, m->root);
    for (size_t k = 0; k < n; k++) free(h[k].file);
    free(h);
    return -1;
  }
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    int hit = 0;
    for (size_t k = 0; k < n && !hit; k++) {
      size_t lf = strlen(h[k].file), lu = strlen(u->file);
      /* ids name files relative to the root; git names them relative to the repository */
      int same = lf >= lu && !strcmp(h[k].file + lf - lu, u->file) && (lf == lu || h[k].file[lf - lu - 1] == '/');
      hit = same && u->line >= h[k].a && u->line <= h[k].b;
    }
    u->selected &= hit;
  }
  for (size_t k = 0; k < n; k++) free(h[k].file);
  free(h);
  return 0;
}

/* ---- --fuzz S ----------------------------------------------------------------------------------- */

/* ---- the score ---------------------------------------------------------------------------------- */

typedef struct tally {
  const char *key;
  uint32_t killed, survived, equivalent, other;
} tally;

static tally *tally_of(tally **v, size_t *n, const char *key) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*v)[i].key, key)) return &(*v)[i];
  *v = realloc(*v, (*n + 1) * sizeof **v);
  (*v)[*n] = (tally){.key = key};
  return &(*v)[(*n)++];
}

static void count(tally *t, int state) {
  if (state == MU_KILLED) t->killed++;
  else if (state == MU_SURVIVED) t->survived++;
  else if (state == MU_EQUIVALENT) t->equivalent++;
  else t->other++;
}

static double score(const tally *t) {
  uint32_t d = t->killed + t->survived;
  return d ? 100.0 * t->killed / d : 100.0;
}

/* Wilson's 95 % interval of k successes in n, in percent. */
static void wilson(uint32_t k, uint32_t n, double *lo, double *hi) {
  if (!n) {
    *lo = 0, *hi = 100;
    return;
  }
  double z = 1.959964, p = (double)k / n, d = 1 + z * z / n;
  double c = (p + z * z / (2.0 * n)) / d, h = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
  *lo = 100 * (c - h < 0 ? 0 : c - h);
  *hi = 100 * (c + h > 1 ? 1 : c + h);
}

static const char *state_name(int s) {
  switch (s) {
    case MU_KILLED: return "killed";
    case MU_SURVIVED: return "survived";
    case MU_EQUIVALENT: return "equivalent";
    case MU_BUILD_FAILED: return "build_failed";
    default: return "skipped";
  }
}

static const char *nearest(const mdc_mutate *m, const mdc_mutant *u, char *buf, size_t n) {
  if (u->reach >= 0) return m->t[u->reach].name;
  if (u->reach_fn >= 0) {
    snprintf(buf, n, "(line not reached; its function is reached by %s)", m->t[u->reach_fn].name);
    return buf;
  }
  return NULL;
}

static void diff_of(const mdc_mutant *u, char *buf, size_t n) {
  snprintf(buf, n, "--- %s:%u\n- %s\n+ %s", u->file, u->line, u->before, u->after);
}

/* Why a survivor is likely equivalent or unobservable through the ABI (flagged, still counted as
 * survived until conformance/mutate/equivalent.txt says so), or NULL. Rules (docs/mutate.md):
 * code that only formats a message or a statistic, a pthread object initialised in memory that is
 * already zero (glibc's initialisers are all-zero), a delay, and code behind a hand-written mutant's
 * MD_MUTANT() switch (constant 0 in the reference driver). */
static const char *likely_equivalent(const mdc_mutant *u) {
  if (u->tce == 1) return "the optimised object code is identical (TCE)"; /* --tce, mutate_tce.c */
  static const char *const msg_fns[] = {"*_str", "*_prefix", "*describe*", "*_name", "*_text", "*stats*", "*dump*",
                                        "*_log", "*report*"};
  for (size_t i = 0; i < sizeof msg_fns / sizeof *msg_fns; i++)
    if (fnmatch(msg_fns[i], u->function, 0) == 0) return "in a function that formats a message or a statistic";
  const char *b = u->before;
  if (strstr(b, "MD_MUTANT(") && strcmp(u->op, "logic") && strcmp(u->op, "cond_negate") && strcmp(u->op, "check_del"))
    return "behind MD_MUTANT(), constant 0 outside the hand-written mutants build";
  if (strstr(b, "snprintf(") || strstr(b, "fprintf(") || strstr(b, "vsnprintf(") || strstr(b, "strerror"))
    return "changes message text only";
  if (!strcmp(u->op, "call_del") && (strstr(b, "pthread_mutex_init(") || strstr(b, "pthread_cond_init(") ||
                                      strstr(b, "pthread_mutexattr_") || strstr(b, "pthread_condattr_")))
    return "removes the initialisation of a pthread object whose zeroed state is the same (glibc)";
  if (!strcmp(u->op, "call_del") && (strstr(b, "nanosleep(") || strstr(b, "usleep(") || strstr(b, "pay_init(") ||
                                      strstr(b, "sched_yield(")))
    return "removes a delay: timing only";
  return NULL;
}

/* Whether the mutant is part of this run's verdicts. */
static int reported(const mdc_mutant *u) {
  return u->selected && u->state != MU_PENDING;
}

int mdc_mutate__finish(mdc_mutate *m) {
  tally all = {.key = "all"}, *files = NULL, *fns = NULL, *ops = NULL;
  size_t n_files = 0, n_fns = 0, n_ops = 0;
  char fnkey[65536];
  size_t fk = 0;
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    count(tally_of(&ops, &n_ops, u->op), MU_SKIPPED); /* generated per operator: counted in other */
    if (!reported(u)) continue;
    count(&all, u->state);
    count(tally_of(&files, &n_files, u->file), u->state);
    int l = snprintf(fnkey + fk, sizeof fnkey - fk, "%s:%s", u->file, u->function);
    if (l > 0 && fk + (size_t)l + 1 < sizeof fnkey) {
      count(tally_of(&fns, &n_fns, fnkey + fk), u->state);
      if (!strcmp(tally_of(&fns, &n_fns, fnkey + fk)->key, fnkey + fk) && fns[n_fns - 1].key == fnkey + fk)
        fk += (size_t)l + 1;
    }
  }
  double lo = 0, hi = 100, sc = score(&all);
  wilson(all.killed, all.killed + all.survived, &lo, &hi);
  /* The store: a run of kind mutate, a row per reported mutant. */
  int store_rc = 0;
  char uuid[37] = "";
  if (!m->no_db) {
    mdc_store *st = NULL;
    char err[1024];
    int64_t run_id;
    mdc_run_info ri = {.kind = "mutate", .driver_name = "mdc mutate", .driver_version = MDC_VERSION,
                       .driver_path = m->driver, .backend = NULL, .config = m->config, .shard_count = 1};
    if ((strcmp(m->db, ":memory:") && mdc_cli__mkdir_parent(m->db)) || mdc_store_open(m->db, &st, err, sizeof err) ||
        mdc_store_run_begin(st, &ri, &run_id, uuid) || mdc_store_batch_begin(st)) {
      fprintf(stderr, "mdc mutate: results store: %s\n", st ? mdc_store_error(st) : err);
      store_rc = MDC_EXIT_STORE;
    } else {
      for (size_t i = 0; i < m->n && !store_rc; i++) {
        mdc_mutant *u = &m->v[i];
        if (!reported(u)) continue;
        char diff[2048], near[512];
        diff_of(u, diff, sizeof diff);
        mdc_mutate_row r = {.mutant = u->id, .file = u->file, .function = u->function, .line = u->line, .op = u->op,
                            .status = state_name(u->state),
                            .killed_by = u->killed_by >= 0 ? m->t[u->killed_by].name : u->killer[0] ? u->killer : NULL,
                            .kill_kind = u->kill_kind[0] ? u->kill_kind : NULL,
                            .traces_run = u->state == MU_KILLED || u->state == MU_SURVIVED ? (int64_t)u->traces_run : -1,
                            .duration_s = u->duration_s, .diff = diff,
                            .reach = u->state == MU_SURVIVED ? nearest(m, u, near, sizeof near) : NULL};
        if (mdc_store_mutate_put(st, run_id, &r)) store_rc = MDC_EXIT_STORE;
      }
      mdc_run_summary sum = {.cases = all.killed + all.survived, .passed = all.killed, .failed = all.survived,
                             .unexpected = all.survived, .interrupted = *m->stop != 0};
      if (mdc_store_batch_end(st, !store_rc) || mdc_store_run_finish(st, run_id, &sum)) store_rc = MDC_EXIT_STORE;
      if (store_rc) fprintf(stderr, "mdc mutate: results store: %s\n", mdc_store_error(st));
    }
    mdc_store_close(st);
  }
  if (m->json) {
    json_t *fj = json_array(), *fnj = json_array(), *sv = json_array(), *opj = json_object();
    for (size_t i = 0; i < n_ops; i++) json_object_set_new(opj, ops[i].key, json_integer(ops[i].other));
    for (size_t i = 0; i < n_files; i++)
      json_array_append_new(fj, json_pack("{s:s,s:i,s:i,s:i,s:f}", "file", files[i].key, "killed", files[i].killed,
                                          "survived", files[i].survived, "equivalent", files[i].equivalent, "score",
                                          score(&files[i])));
    for (size_t i = 0; i < n_fns; i++)
      json_array_append_new(fnj, json_pack("{s:s,s:i,s:i,s:f}", "function", fns[i].key, "killed", fns[i].killed,
                                           "survived", fns[i].survived, "score", score(&fns[i])));
    for (size_t i = 0; i < m->n; i++) {
      mdc_mutant *u = &m->v[i];
      if (!reported(u) || u->state != MU_SURVIVED) continue;
      char diff[2048], near[512];
      diff_of(u, diff, sizeof diff);
      const char *r = nearest(m, u, near, sizeof near);
      const char *le = likely_equivalent(u);
      json_array_append_new(sv, json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:o,s:o}", "id", u->id, "file", u->file,
                                          "function", u->function, "line", (int)u->line, "operator", u->op, "diff",
                                          diff, "reach", r ? json_string(r) : json_null(), "likely_equivalent",
                                          le ? json_string(le) : json_null()));
    }
    json_t *j = json_pack("{s:I,s:i,s:i,s:i,s:i,s:f,s:o,s:o,s:o,s:o,s:f,s:f,s:f,s:f,s:I}", "generated",
                          (json_int_t)m->n_generated, "killed", all.killed, "survived", all.survived, "equivalent",
                          all.equivalent, "not_judged", all.other, "score", sc, "per_operator", opj, "files", fj,
                          "functions", fnj, "survivors", sv, "build_s", m->build_s, "reference_s", m->ref_s, "judge_s",
                          m->judge_s, "wall_s", m->wall_s, "cases_run", (json_int_t)m->cases_run);
    if (m->sampled) json_object_set_new(j, "sample", json_pack("{s:I,s:f,s:f}", "n", (json_int_t)m->sample, "ci95_low", lo, "ci95_high", hi));
    json_object_set_new(j, "run_uuid", uuid[0] && !store_rc ? json_string(uuid) : json_null());
    mdc_mutate__split_json(m, j, fj); /* score_corpus, score_corpus_tests, who killed (mutate_split.c) */
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(4));
    json_decref(j);
    if (s) puts(s);
    free(s);
  } else if (m->markdown) {
    /* Generated into conformance/README.md (docs/mutate.md says by which command). */
    printf("Score **%.1f %%**: %u killed, %u survived, %u equivalent", sc, all.killed, all.survived, all.equivalent);
    if (m->sampled) printf(" (a sample of %zu of %zu generated mutants, seed %u; 95 %% interval %.1f-%.1f %%)", m->sample,
                           m->n_generated, m->seed, lo, hi);
    else printf(" of %zu generated mutants", m->n_generated);
    size_t rl = strlen(MDC_REPO_ROOT);
    const char *corpus = !strncmp(m->corpus, MDC_REPO_ROOT, rl) && m->corpus[rl] == '/' ? m->corpus + rl + 1 : m->corpus;
    printf(", corpus `%s`.\n\n| file | killed | survived | equivalent | score |\n|---|---:|---:|---:|---:|\n",
           corpus);
    for (size_t i = 0; i < n_files; i++)
      printf("| `%s` | %u | %u | %u | %.0f %% |\n", files[i].key, files[i].killed, files[i].survived, files[i].equivalent,
             score(&files[i]));
    mdc_mutate__split_markdown(m, stdout);
    int header = 0;
    for (size_t i = 0; i < m->n; i++) {
      mdc_mutant *u = &m->v[i];
      if (!reported(u) || u->state != MU_SURVIVED) continue;
      if (!header) printf("\nSurvivors:\n\n| mutant | line | nearest trace | note |\n|---|---|---|---|\n"), header = 1;
      char near[512];
      const char *r = nearest(m, u, near, sizeof near), *le = likely_equivalent(u);
      printf("| `%s` | %u | %s | %s |\n", u->id, u->line, r ? r : "(none reaches its function)",
             le ? le : "");
    }
  } else if (!m->quiet) {
    printf("mdc mutate: %u killed, %u survived, %u equivalent of %zu generated: score %.1f %%", all.killed,
           all.survived, all.equivalent, m->n_generated, sc);
    if (m->sampled) printf(" (sample of %zu; 95 %% interval %.1f-%.1f %%)", m->sample, lo, hi);
    printf("\n  build %.1f s, reference pass %.1f s, judging %.1f s (%zu cases), wall %.1f s\n", m->build_s, m->ref_s,
           m->judge_s, m->cases_run, m->wall_s);
    mdc_mutate__split_text(m, stdout);
    printf("\n  %-40s %7s %8s %6s %7s\n", "file", "killed", "survived", "equiv", "score");
    for (size_t i = 0; i < n_files; i++)
      printf("  %-40s %7u %8u %6u %6.1f%%\n", files[i].key, files[i].killed, files[i].survived, files[i].equivalent,
             score(&files[i]));
    mdc_mutate__split_files_text(m, stdout);
    int header = 0;
    for (size_t i = 0; i < m->n; i++) {
      mdc_mutant *u = &m->v[i];
      if (!reported(u) || u->state != MU_SURVIVED) continue;
      if (!header) printf("\n  survivors:\n"), header = 1;
      char near[512];
      const char *r = nearest(m, u, near, sizeof near);
      const char *le = likely_equivalent(u);
      printf("  %s (%s:%u)\n    - %s\n    + %s\n    nearest trace: %s\n", u->id, u->file, u->line, u->before,
             u->after, r ? r : "(none reaches its function)");
      if (le) printf("    likely equivalent: %s\n", le);
    }
    if (uuid[0] && !store_rc) printf("\n  recorded in %s (run %s)\n", m->db, uuid);
  }
  free(files), free(fns), free(ops);
  if (store_rc) return store_rc;
  if (m->min_score >= 0) return sc >= m->min_score ? MDC_EXIT_OK : MDC_EXIT_UNEXPECTED;
  return all.survived ? MDC_EXIT_UNEXPECTED : MDC_EXIT_OK;
}
