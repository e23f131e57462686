/* mutate_split.c - `mdc mutate`'s score split by who killed (issue 25: "corpus + tests" next to
 * "corpus alone"): a kill by a trace (kind Fail, Crash, Timeout) is the corpus's, kind Test a unit
 * test's (--tests, mutate_tests.c), kind fuzz the fuzz stage's. The stages run in that order, each on
 * the survivors of the one before, so the scores are cumulative: corpus alone, + unit tests, + fuzz
 * (the overall score). The lines, JSON fields and Markdown that mutate_out.c adds to its output. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "mdc_int.h"
#include "mutate_int.h"

enum { BY_CORPUS, BY_TEST, BY_FUZZ };

typedef struct split {
  uint32_t by[3], survived;
} split;

static int stage_of(const mdc_mutant *u) {
  if (!strcmp(u->kill_kind, "Test")) return BY_TEST;
  if (!strcmp(u->kill_kind, "fuzz")) return BY_FUZZ;
  return BY_CORPUS;
}

/* The judged mutants of file (NULL: all), as mutate_out.c counts them (equivalent ones left out). */
static split count(const mdc_mutate *m, const char *file) {
  split s = {{0, 0, 0}, 0};
  for (size_t i = 0; i < m->n; i++) {
    const mdc_mutant *u = &m->v[i];
    if (!u->selected || (file && strcmp(u->file, file))) continue;
    if (u->state == MU_KILLED) s.by[stage_of(u)]++;
    else if (u->state == MU_SURVIVED) s.survived++;
  }
  return s;
}

static double pct(uint32_t k, const split *s) {
  uint32_t d = s->by[BY_CORPUS] + s->by[BY_TEST] + s->by[BY_FUZZ] + s->survived;
  return d ? 100.0 * k / d : 100.0;
}

/* Whether the split says more than the score: the tests stage ran, or something not a trace killed. */
static int shown(const mdc_mutate *m, const split *s) { return m->tests || s->by[BY_TEST] || s->by[BY_FUZZ]; }

/* What killed u, for a reader: "trace NAME (Crash)", "unit test EXE SUITE/TEST", "fuzz ...". */
static const char *killer_of(const mdc_mutate *m, const mdc_mutant *u, char *buf, size_t n) {
  int st = stage_of(u);
  if (st == BY_CORPUS && u->killed_by >= 0) snprintf(buf, n, "trace %s (%s)", m->t[u->killed_by].name, u->kill_kind);
  else snprintf(buf, n, "%s %s", st == BY_TEST ? "unit test" : st == BY_FUZZ ? "fuzz" : u->kill_kind,
                u->killer[0] ? u->killer : "?");
  return buf;
}

/* "corpus alone X % (n), corpus + unit tests Y % (+n)[, + fuzz Z % (+n)]", the figures between em. */
static void by_who(FILE *f, const split *all, const char *em) {
  uint32_t c = all->by[BY_CORPUS], t = all->by[BY_TEST], z = all->by[BY_FUZZ];
  fprintf(f, "corpus alone %s%.1f %%%s (%u), corpus + unit tests %s%.1f %%%s (+%u)", em, pct(c, all), em, c, em,
          pct(c + t, all), em, t);
  if (z) fprintf(f, ", + fuzz %s%.1f %%%s (+%u)", em, pct(c + t + z, all), em, z);
}

void mdc_mutate__split_text(const mdc_mutate *m, FILE *f) {
  split all = count(m, NULL);
  if (!shown(m, &all)) return;
  fprintf(f, "  by who killed: ");
  by_who(f, &all, "");
  fprintf(f, "\n");
  if (m->tests)
    fprintf(f, "  unit tests: %zu (%zu pass with no mutant), reference pass %.1f s, judging %.1f s (%zu runs), %zu "
               "killed\n", m->units, m->units_pass, m->units_ref_s, m->units_s - m->units_ref_s, m->units_run,
            m->units_killed);
}

void mdc_mutate__split_files_text(const mdc_mutate *m, FILE *f) {
  split all = count(m, NULL);
  if (shown(m, &all)) {
      fprintf(f, "\n  %-40s %7s %7s %7s %7s\n", "file (killed by)", "corpus", "+tests", "+fuzz", "score");
    const char *last = NULL;
    for (size_t i = 0; i < m->n; i++) {
      const mdc_mutant *u = &m->v[i]; /* sorted by file */
      if (!u->selected || (last && !strcmp(last, u->file))) continue;
      last = u->file;
      split s = count(m, u->file);
      if (!(s.by[0] + s.by[1] + s.by[2] + s.survived)) continue;
      fprintf(f, "  %-40s %7u %7u %7u %6.1f%%\n", u->file, s.by[BY_CORPUS], s.by[BY_TEST], s.by[BY_FUZZ],
              pct(s.by[0] + s.by[1] + s.by[2], &s));
    }
  }
  /* Every kill says what killed it: the trace (and how), the unit test, the fuzz finding. */
  int header = 0;
  for (size_t i = 0; i < m->n; i++) {
    const mdc_mutant *u = &m->v[i];
    char buf[512];
    if (!u->selected || u->state != MU_KILLED) continue;
    if (!header) fprintf(f, "\n  killed:\n"), header = 1;
    fprintf(f, "  %s by %s\n", u->id, killer_of(m, u, buf, sizeof buf));
  }
}

void mdc_mutate__split_json(const mdc_mutate *m, json_t *j, json_t *files) {
  split all = count(m, NULL);
  uint32_t c = all.by[BY_CORPUS], t = all.by[BY_TEST], z = all.by[BY_FUZZ];
  json_object_set_new(j, "score_corpus", json_real(pct(c, &all)));
  json_object_set_new(j, "score_corpus_tests", json_real(pct(c + t, &all)));
  json_object_set_new(j, "score_corpus_tests_fuzz", json_real(pct(c + t + z, &all)));
  json_object_set_new(j, "killed_by", json_pack("{s:i,s:i,s:i}", "corpus", c, "tests", t, "fuzz", z));
  if (m->tests)
    json_object_set_new(j, "unit_tests", json_pack("{s:I,s:I,s:I,s:I,s:f,s:f}", "tests", (json_int_t)m->units, "pass",
                                                   (json_int_t)m->units_pass, "runs", (json_int_t)m->units_run, "killed",
                                                   (json_int_t)m->units_killed, "reference_s", m->units_ref_s, "total_s",
                                                   m->units_s));
  for (size_t i = 0; i < json_array_size(files); i++) {
    json_t *fj = json_array_get(files, i);
    split s = count(m, json_string_value(json_object_get(fj, "file")));
    json_object_set_new(fj, "score_corpus", json_real(pct(s.by[BY_CORPUS], &s)));
    json_object_set_new(fj, "score_corpus_tests", json_real(pct(s.by[BY_CORPUS] + s.by[BY_TEST], &s)));
    json_object_set_new(fj, "killed_by", json_pack("{s:i,s:i,s:i}", "corpus", s.by[BY_CORPUS], "tests",
                                                   s.by[BY_TEST], "fuzz", s.by[BY_FUZZ]));
  }
  json_t *kv = json_array();
  for (size_t i = 0; i < m->n; i++) {
    const mdc_mutant *u = &m->v[i];
    if (!u->selected || u->state != MU_KILLED) continue;
    int st = stage_of(u);
    const char *by = st == BY_CORPUS && u->killed_by >= 0 ? m->t[u->killed_by].name : u->killer;
    json_array_append_new(kv, json_pack("{s:s,s:s,s:s,s:s}", "id", u->id, "stage",
                                        st == BY_TEST ? "tests" : st == BY_FUZZ ? "fuzz" : "corpus", "kind",
                                        u->kill_kind, "by", by));
  }
  json_object_set_new(j, "killed_mutants", kv);
}

void mdc_mutate__split_markdown(const mdc_mutate *m, FILE *f) {
  split all = count(m, NULL);
  if (!shown(m, &all)) return;
  fprintf(f, "\nBy who killed: ");
  by_who(f, &all, "**");
  fprintf(f, ".\n");
  int header = 0;
  for (size_t i = 0; i < m->n; i++) {
    const mdc_mutant *u = &m->v[i];
    if (!u->selected || u->state != MU_KILLED || stage_of(u) == BY_CORPUS) continue;
    if (!header) fprintf(f, "\nKilled past the corpus:\n\n| mutant | line | killed by |\n|---|---|---|\n"), header = 1;
    char buf[512];
    fprintf(f, "| `%s` | %u | %s |\n", u->id, u->line, killer_of(m, u, buf, sizeof buf));
  }
}
