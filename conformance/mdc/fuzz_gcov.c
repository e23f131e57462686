/* fuzz_gcov.c - `mdc fuzz --driver-coverage SO` (docs/fuzzing.md "The driver's own coverage"):
 * the driver's own functions, lines and branches the campaign reached, measured on SO, a build
 * of the same driver with gcc --coverage. Before the campaign: SO is read for the .gcda paths
 * gcc compiled into it (one per object file; the .gcno notes lie beside them), and gcov is run
 * once on the notes alone, which gives the totals and proves gcov reads them. After it: the
 * campaign's queue is replayed through SO with md_fuzz_replay, the counters written under the
 * campaign folder (GCOV_PREFIX: the driver's build tree is not touched), and gcov's JSON
 * (gcc >= 10: --json-format --stdout; -b for branches) is summed over the driver's source files:
 * not mdc's public headers (a path with /include/md/) and not system headers (/usr/). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_int.h"
#include "mdc_int.h"
#include "paths.h"

#define REPLAY_BATCH 100     /* inputs per md_fuzz_replay process: a crash loses one batch's counters */
#define REPLAY_BATCH_S 900.0 /* seconds one batch may take */

void mdc_cli__fuzz_gcov_free(mdc_cli__gcov *g) {
  for (size_t i = 0; i < g->n_gcda; i++) free(g->gcda[i]);
  free(g->gcda);
  g->gcda = NULL;
  g->n_gcda = 0;
}

/* The absolute .gcda paths gcc compiled into the ELF file at path (NUL-terminated strings
 * ending in ".gcda"), deduplicated, into g->gcda. Returns how many, or -1 when path cannot be
 * read. */
static int gcda_paths(const char *path, mdc_cli__gcov *g) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) || st.st_size < 8) {
    close(fd);
    return -1;
  }
  size_t len = (size_t)st.st_size;
  const char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return -1;
  static const char suf[] = ".gcda";
  for (const char *h = p; (h = memmem(h, len - (size_t)(h - p), suf, sizeof suf)) != NULL; h += sizeof suf) {
    const char *s = h;
    while (s > p && s[-1] != 0 && h - s < 4000) s--;
    if (*s != '/' || (s > p && s[-1] != 0)) continue;
    size_t n = (size_t)(h - s) + sizeof suf - 1;
    int dup = 0;
    for (size_t i = 0; i < g->n_gcda && !dup; i++) dup = strlen(g->gcda[i]) == n && !memcmp(g->gcda[i], s, n);
    if (dup) continue;
    char **v = realloc(g->gcda, (g->n_gcda + 1) * sizeof *v);
    if (!v) break;
    g->gcda = v;
    if (!(g->gcda[g->n_gcda] = strndup(s, n))) break;
    g->n_gcda++;
  }
  munmap((void *)p, len);
  return (int)g->n_gcda;
}

/* file's copy at dst (its folders made). 0, or -1. */
static int copy_file(const char *src, const char *dst) {
  if (mdc_cli__mkdir_parent(dst)) return -1;
  int in = open(src, O_RDONLY | O_CLOEXEC), out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char buf[65536];
  ssize_t n = 0;
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) n = -1;
  if (in >= 0) close(in);
  if (out >= 0 && close(out)) n = -1;
  return in < 0 || out < 0 || n < 0 ? -1 : 0;
}

/* Runs argv (no shell) with stdout to out_path and stderr to err_path; waits. The wait status,
 * or -1. gcov on one object file's notes takes well under a second: no time limit. */
static int run_split(char *const argv[], const char *out_path, const char *err_path) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(127);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return st;
}

/* Whether a source file of gcov's report is the driver's: not mdc's public headers, not the
 * system's. */
static int driver_file(const char *path) { return strncmp(path, "/usr/", 5) && !strstr(path, "/include/md/"); }

/* One gcov report (JSON) added to the sets: fns "file\tname" -> true when reached; lines
 * "file\tline" -> [covered, branch taken...], merged across object files (a header's inline
 * function is compiled into several). */
static void gcov_add(json_t *report, json_t *fns, json_t *lines) {
  const char *cwd = json_string_value(json_object_get(report, "current_working_directory"));
  size_t i, k;
  json_t *file;
  json_array_foreach(json_object_get(report, "files"), i, file) {
    const char *name = json_string_value(json_object_get(file, "file"));
    if (!name) continue;
    char path[4200], key[4400];
    if (name[0] == '/' || !cwd) mdc_cli__fmt(path, sizeof path, "%s", name);
    else mdc_cli__fmt(path, sizeof path, "%s/%s", cwd, name);
    if (!driver_file(path)) continue;
    json_t *fn, *ln, *br;
    json_array_foreach(json_object_get(file, "functions"), k, fn) {
      const char *fname = json_string_value(json_object_get(fn, "name"));
      mdc_cli__fmt(key, sizeof key, "%s\t%s", path, fname ? fname : "?");
      int hit = json_integer_value(json_object_get(fn, "execution_count")) > 0;
      if (hit || !json_object_get(fns, key)) json_object_set_new(fns, key, json_boolean(hit));
    }
    json_array_foreach(json_object_get(file, "lines"), k, ln) {
      mdc_cli__fmt(key, sizeof key, "%s\t%lld", path, (long long)json_integer_value(json_object_get(ln, "line_number")));
      json_t *acc = json_object_get(lines, key);
      if (!acc) json_object_set_new(lines, key, acc = json_pack("[b]", 0));
      if (json_integer_value(json_object_get(ln, "count")) > 0) json_array_set_new(acc, 0, json_true());
      size_t b;
      json_array_foreach(json_object_get(ln, "branches"), b, br) {
        int taken = json_integer_value(json_object_get(br, "count")) > 0;
        if (json_array_size(acc) <= b + 1) json_array_append_new(acc, json_boolean(taken));
        else if (taken) json_array_set_new(acc, b + 1, json_true());
      }
    }
  }
}

/* gcov on every object file of g's driver, its counters (or, without them, its notes alone)
 * under g->dir; the sums into g. 0, or -1 with g->error set. */
static int gcov_measure(mdc_cli__gcov *g) {
  char tmp_out[4300], tmp_err[4300], data[8400], notes[8400];
  mdc_cli__fmt(tmp_out, sizeof tmp_out, "%s/gcov.json", g->dir);
  mdc_cli__fmt(tmp_err, sizeof tmp_err, "%s/gcov.err", g->dir);
  json_t *fns = json_object(), *lines = json_object();
  int rc = 0;
  for (size_t i = 0; i < g->n_gcda && !rc; i++) {
    /* the notes beside the counters, where gcov looks for them */
    size_t n = strlen(g->gcda[i]);
    mdc_cli__fmt(data, sizeof data, "%s%s", g->dir, g->gcda[i]);
    mdc_cli__fmt(notes, sizeof notes, "%.*s.gcno", (int)(n - 5), g->gcda[i]);
    char notes_copy[8400];
    mdc_cli__fmt(notes_copy, sizeof notes_copy, "%s%s", g->dir, notes);
    if (copy_file(notes, notes_copy)) {
      mdc_cli__fmt(g->error, sizeof g->error, "cannot copy %s to %s: %s", notes, notes_copy, strerror(errno));
      rc = -1;
      break;
    }
    char *argv[] = {(char *)"gcov", (char *)"-b", (char *)"--json-format", (char *)"--stdout", data, NULL};
    int st = run_split(argv, tmp_out, tmp_err);
    json_error_t je;
    json_t *report = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? json_load_file(tmp_out, 0, &je) : NULL;
    if (!report) {
      char line[400] = "";
      FILE *f = fopen(tmp_err, "r");
      while (f && fgets(line, sizeof line, f) && !strstr(line, "version") && !strstr(line, "rror")) {}
      if (f) fclose(f);
      line[strcspn(line, "\n")] = 0;
      mdc_cli__fmt(g->error, sizeof g->error, "gcov could not read %s (exit %d)%s%s", notes,
                   st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, line[0] ? ": " : "", line);
      rc = -1;
      break;
    }
    gcov_add(report, fns, lines);
    json_decref(report);
  }
  if (!rc) {
    const char *key;
    json_t *v;
    g->fn_total = g->fn_reached = g->lines_total = g->lines_covered = g->br_total = g->br_taken = 0;
    json_object_foreach(fns, key, v) g->fn_total++, g->fn_reached += json_is_true(v);
    json_object_foreach(lines, key, v) {
      g->lines_total++;
      g->lines_covered += json_is_true(json_array_get(v, 0));
      for (size_t b = 1; b < json_array_size(v); b++) g->br_total++, g->br_taken += json_is_true(json_array_get(v, b));
    }
  }
  json_decref(fns);
  json_decref(lines);
  unlink(tmp_out);
  unlink(tmp_err);
  return rc;
}

/* ---- before the campaign -------------------------------------------------------------------- */

int mdc_cli__fuzz_gcov_check(mdc_cli__campaign *c) {
  mdc_cli__gcov *g = &c->gcov;
  char gcov[4096];
  if (access(c->driver_cov, R_OK) || !realpath(c->driver_cov, g->so)) {
    fprintf(stderr, "mdc fuzz: --driver-coverage '%s': %s\n", c->driver_cov, strerror(errno));
    return -1;
  }
  if (!mdc_cli__fuzz_in_path("gcov", gcov, sizeof gcov)) {
    fprintf(stderr, "mdc fuzz: --driver-coverage: gcov is not installed (not in PATH; it comes with gcc)\n");
    return -1;
  }
  if (!mdc_cli__fuzz_exists_exec(mdc_cli__fuzz_replay_path())) {
    fprintf(stderr, "mdc fuzz: --driver-coverage: %s (which replays the queue) is not there\n",
            mdc_cli__fuzz_replay_path());
    return -1;
  }
  int n = gcda_paths(g->so, g);
  if (n <= 0) {
    fprintf(stderr, "mdc fuzz: --driver-coverage %s: %s\n", g->so,
            n < 0 ? "not a readable file"
                  : "not built with --coverage (no .gcda path in it): build the driver with gcc --coverage, e.g. "
                    "-DMDC_FUZZ_ENGINE=gcov (docs/fuzzing.md \"The driver's own coverage\")");
    return -1;
  }
  mdc_cli__fmt(g->dir, sizeof g->dir, "%s/driver-coverage", c->out);
  for (size_t i = 0; i < g->n_gcda; i++) {
    char notes[4200];
    mdc_cli__fmt(notes, sizeof notes, "%.*s.gcno", (int)(strlen(g->gcda[i]) - 5), g->gcda[i]);
    if (access(notes, R_OK)) {
      fprintf(stderr, "mdc fuzz: --driver-coverage %s: its notes file %s: %s (gcov needs the tree it was built in)\n",
              g->so, notes, strerror(errno));
      return -1;
    }
  }
  /* gcov on the notes alone: proves gcov reads them (same gcc version) and gives the totals */
  char probe[4400];
  mdc_cli__fmt(probe, sizeof probe, "%s/x", g->dir);
  if (mdc_cli__mkdir_parent(probe) || gcov_measure(g)) {
    fprintf(stderr, "mdc fuzz: --driver-coverage %s: %s\n", g->so, g->error[0] ? g->error : strerror(errno));
    return -1;
  }
  if (g->fn_total == 0) {
    fprintf(stderr, "mdc fuzz: --driver-coverage %s: gcov reports no function of the driver's own sources\n", g->so);
    return -1;
  }
  return 0;
}

/* ---- after it ------------------------------------------------------------------------------- */

/* Replays files[0..n) through g->so in batches, with the campaign's target, config and mutant.
 * Returns the batches that did not end cleanly (a crash or hang loses a batch's counters). */
static int replay(const mdc_cli__campaign *c, char **files, size_t n) {
  static char out[4096];
  char prefix[4200], mutant[256];
  mdc_cli__fmt(prefix, sizeof prefix, "GCOV_PREFIX=%s", c->gcov.dir);
  char *env[5];
  int e = 0;
  env[e++] = prefix;
  env[e++] = (char *)"GCOV_PREFIX_STRIP=0";
  if (c->mutant) mdc_cli__fmt(mutant, sizeof mutant, "MD_MUTANT=%s", c->mutant), env[e++] = mutant;
  if (c->strict) env[e++] = (char *)"MDC_FUZZ_STRICT=1";
  env[e] = NULL;
  int bad = 0;
  for (size_t i = 0; i < n && !mdc_cli__fuzz_stop_signal; i += REPLAY_BATCH) {
    char *argv[16 + REPLAY_BATCH];
    int k = 0;
    argv[k++] = (char *)mdc_cli__fuzz_replay_path();
    argv[k++] = (char *)"--quiet", argv[k++] = (char *)"--allow-findings";
    argv[k++] = (char *)"--target", argv[k++] = (char *)c->target;
    argv[k++] = (char *)"--config", argv[k++] = (char *)(c->config ? c->config : "backend=sim");
    argv[k++] = (char *)"--driver", argv[k++] = (char *)c->gcov.so;
    for (size_t j = i; j < n && j < i + REPLAY_BATCH; j++) argv[k++] = files[j];
    argv[k] = NULL;
    int to;
    int st = mdc_cli__fuzz_run_capture(argv, env, REPLAY_BATCH_S, out, sizeof out, &to);
    if (to || st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1) bad++;
  }
  return bad;
}

/* The queue entries (id:...) of this process's instances. *n set; the caller frees. */
static char **queue_files(const mdc_cli__campaign *c, size_t *n) {
  char **v = NULL;
  *n = 0;
  for (int i = 0; i < c->n_inst; i++) {
    char dir[4300];
    mdc_cli__fmt(dir, sizeof dir, "%s/%s/queue", c->afl, c->inst[i].name);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      if (strncmp(e->d_name, "id:", 3)) continue;
      char **nv = realloc(v, (*n + 1) * sizeof *nv);
      if (!nv) break;
      v = nv;
      size_t len = strlen(dir) + strlen(e->d_name) + 2;
      v[*n] = malloc(len);
      if (v[*n]) snprintf(v[*n], len, "%s/%s", dir, e->d_name), (*n)++;
    }
    if (d) closedir(d);
  }
  return v;
}

void mdc_cli__fuzz_gcov_measure(mdc_cli__campaign *c) {
  mdc_cli__gcov *g = &c->gcov;
  char data[8400];
  for (size_t i = 0; i < g->n_gcda; i++) {
    mdc_cli__fmt(data, sizeof data, "%s%s", g->dir, g->gcda[i]);
    unlink(data);   /* a resumed campaign's earlier counters: its whole queue is replayed again */
  }
  size_t n;
  char **files = queue_files(c, &n);
  if (!c->quiet)
    fprintf(stderr, "mdc fuzz: driver coverage: replaying %zu queue input%s through %s\n", n, n == 1 ? "" : "s", g->so);
  g->failed_batches = replay(c, files, n);
  g->inputs = (int64_t)n;
  for (size_t i = 0; i < n; i++) free(files[i]);
  free(files);
  g->measured = gcov_measure(g) == 0;
  if (!g->measured) fprintf(stderr, "mdc fuzz: driver coverage: %s\n", g->error);
}

json_t *mdc_cli__fuzz_gcov_json(const mdc_cli__campaign *c) {
  const mdc_cli__gcov *g = &c->gcov;
  if (!c->driver_cov) return json_null();
  if (!g->measured) return json_pack("{s:s,s:s}", "gcov_build", g->so, "error", g->error);
  return json_pack("{s:s,s:I,s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "gcov_build", g->so, "inputs_replayed",
                   (json_int_t)g->inputs, "failed_batches", g->failed_batches, "functions_reached",
                   (json_int_t)g->fn_reached, "functions_total", (json_int_t)g->fn_total, "lines_covered",
                   (json_int_t)g->lines_covered, "lines_total", (json_int_t)g->lines_total, "branches_taken",
                   (json_int_t)g->br_taken, "branches_total", (json_int_t)g->br_total);
}

static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0.0; }

void mdc_cli__fuzz_gcov_summary(FILE *f, const mdc_cli__campaign *c) {
  const mdc_cli__gcov *g = &c->gcov;
  if (!c->driver_cov) return;
  if (!g->measured) {
    fprintf(f, "  driver coverage: not measured (%s)\n", g->error);
    return;
  }
  fprintf(f,
          "  driver coverage (gcov build %s, %" PRId64 " queue inputs replayed%s): functions %" PRId64 " of %" PRId64
          ", lines %" PRId64 " of %" PRId64 " (%.1f %%), branches %" PRId64 " of %" PRId64 " (%.1f %%)\n",
          g->so, g->inputs, g->failed_batches ? ", some batches crashed: counted without them" : "", g->fn_reached,
          g->fn_total, g->lines_covered, g->lines_total, pct(g->lines_covered, g->lines_total), g->br_taken,
          g->br_total, pct(g->br_taken, g->br_total));
}
