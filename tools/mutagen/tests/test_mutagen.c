/* test_mutagen.c - md_mutagen on a fixture (fixture.c) with known mutants: the operators and
 * what is never mutated, ids that survive unrelated edits above, and a schemata build in which
 * every mutant changes what the program prints (or its exit status), the reference does not, and
 * the reach log names every site the run went through. */
#include <criterion/criterion.h>
#pragma GCC diagnostic ignored "-Wformat-truncation" /* commands built from short, known paths */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define FIXTURE MDM_FIXTURES "/fixture.c"

typedef struct row {
  char id[320], fn[128], op[32];
  int line;
} row;

/* Runs cmd (a shell command), its stdout into *out (malloc'd); returns its exit status. */
static int run_cmd(const char *cmd, char **out) {
  FILE *p = popen(cmd, "r");
  cr_assert(p, "popen %s", cmd);
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  size_t got;
  while ((got = fread(b + n, 1, cap - n - 1, p)) > 0) {
    n += got;
    if (cap - n < 4096) b = realloc(b, cap *= 2);
  }
  b[n] = 0;
  int st = pclose(p);
  if (out) *out = b;
  else free(b);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static size_t parse_list(char *text, row *rows, size_t cap) {
  size_t n = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < cap; l = strtok_r(NULL, "\n", &save)) {
    char id[320], idx[16], file[256], fn[128], line[16], op[32];
    if (sscanf(l, "%319[^\t]\t%15[^\t]\t%255[^\t]\t%127[^\t]\t%15[^\t]\t%31[^\t]", id, idx, file, fn, line, op) != 6)
      continue;
    snprintf(rows[n].id, sizeof rows[n].id, "%s", id);
    snprintf(rows[n].fn, sizeof rows[n].fn, "%s", fn);
    snprintf(rows[n].op, sizeof rows[n].op, "%s", op);
    rows[n].line = atoi(line);
    n++;
  }
  return n;
}

static size_t list_of(const char *path, row *rows, size_t cap) {
  char cmd[2048], *out;
  snprintf(cmd, sizeof cmd, "'%s' list --rel fixture.c '%s'", MDM_TOOL, path);
  cr_assert_eq(run_cmd(cmd, &out), 0, "%s", cmd);
  size_t n = parse_list(out, rows, cap);
  free(out);
  return n;
}

static const row *find(const row *rows, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(rows[i].id, id)) return &rows[i];
  return NULL;
}

/* The line number of the first line of the fixture containing s. */
static int line_with(const char *s) {
  FILE *f = fopen(FIXTURE, "r");
  char l[1024];
  int n = 0, found = 0;
  while (f && fgets(l, sizeof l, f) && !found) n++, found = strstr(l, s) != NULL;
  if (f) fclose(f);
  cr_assert(found, "fixture has no line with %s", s);
  return n;
}

Test(mutagen, lists_every_operator_and_never_a_macro_body_or_constant_expression) {
  static row rows[512];
  size_t n = list_of(FIXTURE, rows, 512);
  const char *want[] = {"fixture.c:below:rel:1",        "fixture.c:same:eq:1",           "fixture.c:both:logic:1",
                        "fixture.c:add:arith:1",        "fixture.c:scale:mul_lhs1:1",    "fixture.c:scale:mul_rhs1:1",
                        "fixture.c:plus_ten:const_inc:1", "fixture.c:plus_ten:const_dec:1", "fixture.c:check:check_del:1",
                        "fixture.c:check:cond_negate:1", "fixture.c:check:status_swap:1", "fixture.c:check:status_swap:2",
                        "fixture.c:checked_call:call_ok:1", "fixture.c:count_to:call_del:1", "fixture.c:count_to:rel:1"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) cr_expect(find(rows, n, want[i]), "no mutant %s", want[i]);
  int macro = line_with("#define TWICE"), use = line_with("return TWICE(a)"), stat = line_with("static const int table"),
      cas = line_with("case 2:"), null = line_with("const char *name");
  for (size_t i = 0; i < n; i++) {
    cr_expect(rows[i].line != macro && rows[i].line != use && rows[i].line != stat, "%s: mutates a macro or a static",
              rows[i].id);
    cr_expect(rows[i].line != cas || strcmp(rows[i].op, "const_inc") != 0, "%s: mutates a case label", rows[i].id);
    cr_expect(rows[i].line != null || strncmp(rows[i].op, "const_", 6) != 0 || !strcmp(rows[i].fn, "label"),
              "%s", rows[i].id);
  }
  /* The null pointer constant of `a > 0 ? "x" : 0` stays: the only constant there is the 0 of a > 0. */
  size_t consts_on_null = 0;
  for (size_t i = 0; i < n; i++) consts_on_null += rows[i].line == null && !strcmp(rows[i].op, "const_inc");
  cr_expect_eq(consts_on_null, 1);
}

Test(mutagen, ids_survive_unrelated_edits_above) {
  static row before[512], after[512];
  size_t nb = list_of(FIXTURE, before, 512);
  mkdir(MDM_WORK, 0777);
  const char *moved = MDM_WORK "/fixture_moved.c";
  FILE *in = fopen(FIXTURE, "r"), *out = fopen(moved, "w");
  cr_assert(in && out);
  fprintf(out, "/* three new lines and a new function above everything */\n#include <stdlib.h>\n\n"
               "static int unrelated(int q) { return q > 1 && q < 100; }\n");
  char l[1024];
  int first = 1;
  while (fgets(l, sizeof l, in)) {
    fputs(l, out);
    if (first && strstr(l, "#include <stdio.h>")) fputs("int use_unrelated(int q);\nint use_unrelated(int q) { return unrelated(q + 2); }\n", out), first = 0;
  }
  fclose(in);
  fclose(out);
  size_t na = list_of(moved, after, 512);
  cr_assert_gt(na, nb, "the new functions add mutants");
  for (size_t i = 0; i < nb; i++) {
    const row *a = find(after, na, before[i].id);
    cr_expect(a, "%s is gone after an unrelated edit", before[i].id);
    if (a) cr_expect_gt(a->line, before[i].line, "%s: moved down", a->id);
  }
}

Test(mutagen, every_schemata_mutant_changes_behaviour_and_the_reference_does_not) {
  mkdir(MDM_WORK, 0777);
  char cmd[4096], *ref, *orig, *out;
  snprintf(cmd, sizeof cmd,
           "'%s' schemata --rel fixture.c --out %s/fx.c --list %s/fx.mutants '%s' && '%s' -w -o %s/fx %s/fx.c && "
           "'%s' -w -o %s/fx0 '%s'",
           MDM_TOOL, MDM_WORK, MDM_WORK, FIXTURE, MDM_CC, MDM_WORK, MDM_WORK, MDM_CC, MDM_WORK, FIXTURE);
  cr_assert_eq(run_cmd(cmd, NULL), 0, "%s", cmd);
  int st_ref = run_cmd(MDM_WORK "/fx", &ref), st_orig = run_cmd(MDM_WORK "/fx0", &orig);
  cr_assert_eq(st_ref, st_orig);
  cr_assert_str_eq(ref, orig, "the schemata without a mutant behaves as the source");
  FILE *f = fopen(MDM_WORK "/fx.mutants", "r");
  cr_assert(f);
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = 0;
  static row rows[512];
  size_t n = parse_list(text, rows, 512), killed = 0;
  cr_assert_gt(n, 40);
  for (size_t i = 0; i < n; i++) {
    snprintf(cmd, sizeof cmd, "MD_MUTAGEN='%s' timeout 10 %s/fx", rows[i].id, MDM_WORK);
    int st = run_cmd(cmd, &out);
    int changed = st != st_ref || strcmp(out, ref) != 0;
    cr_expect(changed, "%s changes nothing", rows[i].id);
    killed += changed;
    free(out);
  }
  cr_expect_eq(killed, n);
  /* The reach log: every site the run went through, once each (the fixture reaches them all). */
  snprintf(cmd, sizeof cmd, "rm -f %s/reach && MD_MUTAGEN_REACH=%s/reach %s/fx >/dev/null && sort -u %s/reach | wc -l && wc -l < %s/reach",
           MDM_WORK, MDM_WORK, MDM_WORK, MDM_WORK, MDM_WORK);
  cr_assert_eq(run_cmd(cmd, &out), 0);
  unsigned uniq = 0, lines = 0;
  sscanf(out, "%u %u", &uniq, &lines);
  cr_expect_eq(uniq, n);
  cr_expect_eq(lines, n, "each site is logged once");
  free(out);
  free(ref);
  free(orig);
}
