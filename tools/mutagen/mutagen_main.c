/* mutagen_main.c - md_mutagen, the mutant generator of `mdc mutate` (docs/mutate.md):
 *   md_mutagen list [OPTIONS] FILE [-- CFLAGS...]             the mutants of FILE, one a line
 *   md_mutagen schemata [OPTIONS] --out F [--list L] FILE [-- CFLAGS...]
 *   md_mutagen cc --out DIR --root ROOT [OPTIONS] -- CC ARGS...   a compiler launcher: compiles
 *       the schemata of the source instead of the source (writes DIR/<rel> and DIR/<rel>.mutants)
 *   md_mutagen tree --root DIR [OPTIONS] [-- CFLAGS...]       rewrites every .c under DIR in place
 *       (a copy of a vendor's sources), lists in DIR/.mdc-mutate/<rel>.mutants
 * OPTIONS: --ops LIST, --status-type T, --success C, --failure C, --rel NAME, --exclude GLOB. */
#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mutagen.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: md_mutagen list [OPTIONS] FILE [-- CFLAGS...]\n"
          "       md_mutagen schemata [OPTIONS] --out FILE.c [--list FILE] FILE [-- CFLAGS...]\n"
          "       md_mutagen cc --out DIR --root ROOT [OPTIONS] -- CC ARGS...\n"
          "       md_mutagen tree --root DIR [OPTIONS] [-- CFLAGS...]\n"
          "Generated mutants of C sources (libclang), and their schemata: every mutant of a file compiled\n"
          "in, MD_MUTAGEN=<id> selects one at run time, MD_MUTAGEN_REACH=FILE logs the sites reached.\n"
          "  --ops LIST         operators (comma-separated; default all):\n");
#define X(n, d) fprintf(f, "                       %-12s %s\n", #n, d);
  MDM_OPS(X)
#undef X
  fprintf(f,
          "  --status-type T    the status enum's type name (md_status)\n"
          "  --success C        its success constant (MD_NONE)\n"
          "  --failure C        the error swapped in for a success when the function returns none (MD_GENERAL_FAILURE)\n"
          "  --rel NAME         the file's name in ids (default: relative to --root, else as given)\n"
          "  --exclude GLOB     tree: files (relative paths) left alone; repeatable\n");
}

static int mkdir_p(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

static int write_file(const char *path, const char *data, size_t n) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = 0;
    if (mkdir_p(dir)) return -1;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, n, f) == n;
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

static int write_list(const char *path, const mdm_file *m) {
  char *data = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&data, &n);
  if (!f) return -1;
  mdm_write_list(f, m);
  fclose(f);
  int rc = write_file(path, data ? data : "", n);
  free(data);
  return rc;
}

/* The flags libclang needs to parse as the compiler does: includes, macros, the standard. */
static int parse_flags(char **in, int n, const char **out) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    const char *a = in[i];
    static const char *const with_value[] = {"-I", "-D", "-U", "-iquote", "-isystem", "-include", "-idirafter"};
    int taken = 0;
    for (size_t j = 0; j < sizeof with_value / sizeof *with_value && !taken; j++) {
      size_t l = strlen(with_value[j]);
      if (!strncmp(a, with_value[j], l)) {
        out[k++] = a;
        if (a[l] == 0 && i + 1 < n) out[k++] = in[++i];
        taken = 1;
      }
    }
    if (!taken && (!strncmp(a, "-std=", 5) || !strcmp(a, "-pthread"))) out[k++] = a;
  }
  return k;
}

typedef struct cli {
  mdm_opts o;
  const char *out, *list, *root, *rel;
  const char *exclude[64];
  int n_exclude;
} cli;

/* Options before the operands; returns the index of the first operand (or of "--"), -1 on error. */
static int options(int argc, char **argv, int i, cli *c) {
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !strcmp(a, "--")) return i;
    if (i + 1 >= argc) {
      fprintf(stderr, "md_mutagen: option '%s' needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--ops")) c->o.ops = v;
    else if (!strcmp(a, "--status-type")) c->o.status_type = v;
    else if (!strcmp(a, "--success")) c->o.success = v;
    else if (!strcmp(a, "--failure")) c->o.failure = v;
    else if (!strcmp(a, "--out")) c->out = v;
    else if (!strcmp(a, "--list")) c->list = v;
    else if (!strcmp(a, "--root")) c->root = v;
    else if (!strcmp(a, "--rel")) c->rel = v;
    else if (!strcmp(a, "--exclude") && c->n_exclude < 64) c->exclude[c->n_exclude++] = v;
    else {
      fprintf(stderr, "md_mutagen: unknown option '%s'\n", a);
      return -1;
    }
  }
  if (c->o.ops) {
    char list[512];
    snprintf(list, sizeof list, "%s", c->o.ops);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
      if (!mdm_op_known(t)) {
        fprintf(stderr, "md_mutagen: --ops: unknown operator '%s'\n", t);
        return -1;
      }
  }
  return i;
}

/* path relative to root when it lies under it, else path. */
static const char *relative(const char *path, const char *root, char *buf, size_t n) {
  char rp[4096], rr[4096];
  if (root && realpath(path, rp) && realpath(root, rr)) {
    size_t l = strlen(rr);
    if (!strncmp(rp, rr, l) && rp[l] == '/') {
      snprintf(buf, n, "%s", rp + l + 1);
      return buf;
    }
  }
  return path;
}

static int cmd_file(cli *c, int schemata, int argc, char **argv, int i) {
  if (i >= argc || !strcmp(argv[i], "--")) {
    fprintf(stderr, "md_mutagen: want a FILE\n");
    return 2;
  }
  const char *path = argv[i++];
  const char *flags[512];
  int nf = 0;
  if (i < argc && !strcmp(argv[i], "--")) nf = parse_flags(argv + i + 1, argc - i - 1 > 256 ? 256 : argc - i - 1, flags);
  char rbuf[4096], err[2048];
  const char *rel = c->rel ? c->rel : relative(path, c->root, rbuf, sizeof rbuf);
  mdm_file m;
  if (mdm_generate(path, rel, flags, nf, &c->o, &m, err, sizeof err)) {
    fprintf(stderr, "md_mutagen: %s\n", err);
    return 1;
  }
  int rc = 0;
  if (!schemata) {
    mdm_write_list(stdout, &m);
  } else {
    if (!c->out) {
      fprintf(stderr, "md_mutagen schemata: want --out FILE.c\n");
      rc = 2;
    } else if (m.schemata ? write_file(c->out, m.schemata, m.schemata_len) : 0) {
      fprintf(stderr, "md_mutagen: cannot write %s: %s\n", c->out, strerror(errno));
      rc = 1;
    }
    if (!m.schemata && c->out) {
      /* No mutant: the schemata is the file itself. */
      FILE *in = fopen(path, "rb");
      char *data = NULL;
      size_t n = 0;
      FILE *mem = open_memstream(&data, &n);
      int ch;
      while (in && mem && (ch = fgetc(in)) != EOF) fputc(ch, mem);
      if (in) fclose(in);
      if (mem) fclose(mem);
      write_file(c->out, data ? data : "", n);
      free(data);
    }
    if (!rc && c->list && write_list(c->list, &m)) {
      fprintf(stderr, "md_mutagen: cannot write %s: %s\n", c->list, strerror(errno));
      rc = 1;
    }
  }
  mdm_file_free(&m);
  return rc;
}

static int run(char **argv) {
  pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "md_mutagen: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The compile command of a schemata, for `mdc mutate --tce` (which compiles it again with one
 * mutant fixed): <out>.cmd, the working folder on the first line, then CC and each argument on
 * a line of its own. Best effort: a command it cannot write only leaves --tce without it. */
static void write_cmd(const char *out, char **cc, int ncc) {
  char path[4700], cwd[4096];
  snprintf(path, sizeof path, "%s.cmd", out);
  char *data = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&data, &n);
  if (!f || !getcwd(cwd, sizeof cwd)) {
    if (f) fclose(f);
    free(data);
    return;
  }
  fprintf(f, "%s\n", cwd);
  for (int k = 0; k < ncc; k++) fprintf(f, "%s\n", cc[k]);
  fclose(f);
  write_file(path, data ? data : "", n);
  free(data);
}

/* The launcher: CC ARGS... with the source replaced by its schemata (and -w: a mutant may make
 * a comparison constant, which is no reason to stop the build; -iquote the source's folder, so
 * its own "..." includes resolve). A schemata that does not compile is reported, its mutants
 * listed as build_failed (skipped 2), and the original compiled instead. */
static int cmd_cc(cli *c, int argc, char **argv, int i) {
  if (i >= argc || strcmp(argv[i], "--") || i + 1 >= argc || !c->out) {
    fprintf(stderr, "md_mutagen cc: want --out DIR -- CC ARGS...\n");
    return 2;
  }
  char **cc = argv + i + 1;
  int ncc = argc - i - 1, src = -1;
  for (int k = 1; k < ncc; k++) {
    size_t l = strlen(cc[k]);
    if (l > 2 && !strcmp(cc[k] + l - 2, ".c") && strcmp(cc[k - 1], "-o") && strcmp(cc[k - 1], "-MF") &&
        strcmp(cc[k - 1], "-MT") && strcmp(cc[k - 1], "-MQ"))
      src = k;
  }
  if (src < 0) return run(cc);
  const char *flags[512];
  int nf = parse_flags(cc + 1, ncc - 1 > 256 ? 256 : ncc - 1, flags);
  char rbuf[4096], err[2048], out[4600], list[4700];
  const char *rel = relative(cc[src], c->root, rbuf, sizeof rbuf);
  snprintf(out, sizeof out, "%s/%s", c->out, rel);
  snprintf(list, sizeof list, "%s.mutants", out);
  mdm_file m;
  if (mdm_generate(cc[src], rel, flags, nf, &c->o, &m, err, sizeof err)) {
    fprintf(stderr, "md_mutagen: %s (compiled without mutants)\n", err);
    unlink(list);
    return run(cc);
  }
  if (!m.schemata) {
    write_list(list, &m);
    mdm_file_free(&m);
    return run(cc);
  }
  if (write_file(out, m.schemata, m.schemata_len)) {
    fprintf(stderr, "md_mutagen: cannot write %s: %s\n", out, strerror(errno));
    mdm_file_free(&m);
    return 1;
  }
  char **av = calloc((size_t)ncc + 8, sizeof *av);
  char srcdir[4096];
  snprintf(srcdir, sizeof srcdir, "%s", cc[src]);
  int n = 0;
  for (int k = 0; k < ncc; k++) av[n++] = k == src ? out : cc[k];
  av[n++] = (char *)"-iquote";
  av[n++] = dirname(srcdir);
  av[n++] = (char *)"-w";
  av[n] = NULL;
  int rc = run(av);
  if (rc != 0) {
    fprintf(stderr, "md_mutagen: the schemata of %s does not compile (%s); compiled without its %zu mutants\n",
            cc[src], out, m.n);
    for (size_t k = 0; k < m.n; k++) m.v[k].skipped = 2;
    rc = run(cc);
  }
  write_list(list, &m);
  write_cmd(out, cc, ncc);
  free(av);
  mdm_file_free(&m);
  return rc;
}

/* ---- tree: every .c under a folder, rewritten in place ---------------------------------------- */

static cli *tree_cli;
static const char **tree_flags;
static int tree_nflags, tree_failed;
static size_t tree_mutants;

static int tree_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  size_t l = strlen(path);
  if (type != FTW_F || l < 3 || strcmp(path + l - 2, ".c") || strstr(path, "/.mdc-mutate/")) return 0;
  char rbuf[4096], err[2048];
  const char *rel = relative(path, tree_cli->root, rbuf, sizeof rbuf);
  for (int i = 0; i < tree_cli->n_exclude; i++)
    if (!fnmatch(tree_cli->exclude[i], rel, 0)) return 0;
  mdm_file m;
  const char *flags[520];
  int nf = 0;
  for (int i = 0; i < tree_nflags && nf < 500; i++) flags[nf++] = tree_flags[i];
  char dir[4096];
  snprintf(dir, sizeof dir, "-I%s", path);
  *strrchr(dir, '/') = 0;
  flags[nf++] = dir;
  if (mdm_generate(path, rel, flags, nf, &tree_cli->o, &m, err, sizeof err)) {
    fprintf(stderr, "md_mutagen: %s\n", err);
    tree_failed = 1;
    return 0;
  }
  char list[4600];
  snprintf(list, sizeof list, "%s/.mdc-mutate/%s.mutants", tree_cli->root, rel);
  if ((m.schemata && write_file(path, m.schemata, m.schemata_len)) || write_list(list, &m)) {
    fprintf(stderr, "md_mutagen: cannot write %s: %s\n", m.schemata ? path : list, strerror(errno));
    tree_failed = 1;
  }
  tree_mutants += m.n;
  mdm_file_free(&m);
  return 0;
}

static int cmd_tree(cli *c, int argc, char **argv, int i) {
  if (!c->root) {
    fprintf(stderr, "md_mutagen tree: want --root DIR\n");
    return 2;
  }
  tree_cli = c;
  if (i < argc && !strcmp(argv[i], "--")) {
    tree_flags = (const char **)argv + i + 1;
    tree_nflags = argc - i - 1;
  }
  if (nftw(c->root, tree_one, 32, FTW_PHYS)) {
    fprintf(stderr, "md_mutagen: cannot walk %s: %s\n", c->root, strerror(errno));
    return 1;
  }
  fprintf(stderr, "md_mutagen: %zu mutants under %s\n", tree_mutants, c->root);
  return tree_failed;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  cli c = {.o = {.status_type = "md_status", .success = "MD_NONE", .failure = "MD_GENERAL_FAILURE"}};
  int i = options(argc, argv, 2, &c);
  if (i < 0) return 2;
  if (!strcmp(argv[1], "list")) return cmd_file(&c, 0, argc, argv, i);
  if (!strcmp(argv[1], "schemata")) return cmd_file(&c, 1, argc, argv, i);
  if (!strcmp(argv[1], "cc")) return cmd_cc(&c, argc, argv, i);
  if (!strcmp(argv[1], "tree")) return cmd_tree(&c, argc, argv, i);
  fprintf(stderr, "md_mutagen: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
