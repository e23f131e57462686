/* mutate_tce.c - `mdc mutate --tce`: trivial compiler equivalence for the survivors. Each
 * survivor's file is compiled twice from its schemata text, with the same command the schemata
 * build used (less its sanitizer flags, at -O2 whatever the build type): once with MDM__(k) the constant 0 (no mutant), once with it (k == the survivor's
 * index), so the compiler folds every site away and keeps only the mutant's. When the two
 * objects' code (.text*, .rodata*, .data*, .bss* sizes, .init_array: their bytes, their
 * relocations by symbol name, their function and object symbols) is the same, the optimiser
 * made the mutant's program identical to the original's: flagged likely equivalent (docs/mutate.md). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <jansson.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mdc_int.h"
#include "mutate_int.h"

#pragma GCC diagnostic ignored "-Wformat-truncation" /* paths are PATH_MAX-bounded; a cut one fails to open */

/* ---- the compile command -------------------------------------------------------------------- */

typedef struct cmdline {
  char dir[4096];            /* where it runs */
  char **argv;               /* the compiler and its arguments */
  int argc;
} cmdline;

static void cmd_free(cmdline *c) {
  for (int i = 0; i < c->argc; i++) free(c->argv[i]);
  free(c->argv);
  c->argv = NULL, c->argc = 0;
}

static void cmd_push(cmdline *c, const char *a, size_t n) {
  c->argv = realloc(c->argv, (size_t)(c->argc + 2) * sizeof *c->argv);
  if (!c->argv) abort();
  c->argv[c->argc++] = strndup(a, n);
  c->argv[c->argc] = NULL;
}

/* <schemata>/<file>.cmd, written by md_mutagen cc: the folder, then one argument a line. */
static int cmd_from_file(const char *path, cmdline *c) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int first = 1;
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] == '\n') line[--n] = 0;
    if (first) snprintf(c->dir, sizeof c->dir, "%s", line), first = 0;
    else cmd_push(c, line, (size_t)n);
  }
  free(line);
  fclose(f);
  return c->argc > 1 ? 0 : -1;
}

/* A compile_commands.json "command": split as the shell would for the plain quoting CMake writes. */
static void split_command(const char *s, cmdline *c) {
  char buf[8192];
  size_t n = 0;
  int in = 0, q = 0;
  for (;; s++) {
    if (!*s || (!q && (*s == ' ' || *s == '\t'))) {
      if (in) cmd_push(c, buf, n);
      in = 0, n = 0;
      if (!*s) return;
      continue;
    }
    in = 1;
    if (q && *s == q) q = 0;
    else if (!q && (*s == '"' || *s == '\'')) q = *s;
    else if (*s == '\\' && s[1] && q != '\'') s++, buf[n < sizeof buf - 1 ? n++ : n] = *s;
    else if (n < sizeof buf - 1) buf[n++] = *s;
  }
}

/* The entry for file (relative to the sources' root) in a compile_commands.json at or above dir
 * (up to 4 folders up), preferring a schemata mirror's (md_mutagen_*). 0, or -1. */
static int cmd_from_db(const char *dir, const char *file, cmdline *c) {
  char d[4096], path[4200];
  snprintf(d, sizeof d, "%s", dir);
  for (int up = 0; up < 5; up++) {
    snprintf(path, sizeof path, "%s/compile_commands.json", d);
    json_t *j = access(path, R_OK) == 0 ? json_load_file(path, 0, NULL) : NULL;
    json_t *best = NULL;
    size_t i, fl = strlen(file);
    json_t *e;
    json_array_foreach(j, i, e) {
      const char *f = json_string_value(json_object_get(e, "file"));
      size_t l = f ? strlen(f) : 0;
      if (!f || l < fl || strcmp(f + l - fl, file) || (l > fl && f[l - fl - 1] != '/')) continue;
      const char *cmd = json_string_value(json_object_get(e, "command"));
      if (!best || (cmd && strstr(cmd, "md_mutagen_"))) best = e;
    }
    if (best) {
      snprintf(c->dir, sizeof c->dir, "%s", json_string_value(json_object_get(best, "directory")) ?: ".");
      json_t *args = json_object_get(best, "arguments"), *a;
      json_array_foreach(args, i, a) cmd_push(c, json_string_value(a) ?: "", strlen(json_string_value(a) ?: ""));
      if (!c->argc && json_string_value(json_object_get(best, "command")))
        split_command(json_string_value(json_object_get(best, "command")), c);
    }
    json_decref(j);
    if (c->argc > 1) return 0;
    cmd_free(c);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d) break;
    *slash = 0;
  }
  return -1;
}

/* argv of the command compiling src into obj: its source and output replaced, dependency files
 * dropped, -iquote the original's folder (its "..." includes), -w (a folded mutant may warn). */
static char **compile_argv(const cmdline *c, const char *src, const char *obj) {
  char **av = calloc((size_t)c->argc + 8, sizeof *av);
  char srcdir[4096] = ".";
  int n = 0;
  for (int k = 0; k < c->argc; k++) {
    const char *a = c->argv[k];
    size_t l = strlen(a);
    if (!strcmp(a, "-o") || !strcmp(a, "-MF") || !strcmp(a, "-MT") || !strcmp(a, "-MQ")) {
      if (!strcmp(a, "-o")) av[n++] = (char *)"-o", av[n++] = (char *)obj;
      k++;
    } else if (!strcmp(a, "-MD") || !strcmp(a, "-MMD") || !strncmp(a, "-fsanitize", 10) ||
               !strncmp(a, "-fno-sanitize", 13)) {
      continue;   /* no dependency files; the code judged without a sanitizer's instrumentation */
    } else if (k > 0 && l > 2 && !strcmp(a + l - 2, ".c")) {
      char tmp[4096];
      snprintf(tmp, sizeof tmp, "%s", a);
      if (a[0] == '/') snprintf(srcdir, sizeof srcdir, "%s", dirname(tmp));
      else snprintf(srcdir, sizeof srcdir, "%s/%s", c->dir, dirname(tmp));
      av[n++] = (char *)src;
    } else {
      av[n++] = (char *)a;
    }
  }
  av[n++] = (char *)"-iquote";
  av[n++] = strdup(srcdir);
  av[n++] = (char *)"-w";
  av[n++] = (char *)"-O2";   /* optimised whatever the build type (the last -O wins): a Debug build's
                              * -O0 keeps every dead store, and TCE asks what the optimiser leaves */
  av[n] = NULL;
  return av;
}

/* ---- an object's code ------------------------------------------------------------------------- */

static int code_section(const char *name) {
  static const char *const pre[] = {".text", ".rodata", ".data", ".bss", ".init_array", ".fini_array", ".tdata",
                                    ".tbss"};
  for (size_t i = 0; i < sizeof pre / sizeof *pre; i++) {
    size_t l = strlen(pre[i]);
    if (!strncmp(name, pre[i], l) && (name[l] == 0 || name[l] == '.')) return 1;
  }
  return 0;
}

/* A canonical form of the object's code into f: each code section (name, size, bytes), its
 * relocations (offset, type, addend, the symbol's name or its section's), then the defined
 * function and object symbols (name, section, value, size). Debug info, the symbol table's
 * order and the string tables are left out. 0, or -1 (not a 64-bit ELF object). */
static int canonical(const unsigned char *p, size_t n, FILE *f) {
  const Elf64_Ehdr *eh = (const void *)p;
  if (n < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > n || eh->e_shstrndx >= eh->e_shnum)
    return -1;
  const Elf64_Shdr *sh = (const void *)(p + eh->e_shoff);
  const char *shstr = (const char *)p + sh[eh->e_shstrndx].sh_offset;
#define SNAME(i) (shstr + sh[i].sh_name)
#define INSIDE(s) ((s).sh_type == SHT_NOBITS || (s).sh_offset + (s).sh_size <= n)
  const Elf64_Sym *sym = NULL;
  const char *str = NULL;
  size_t nsym = 0;
  for (int i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type == SHT_SYMTAB && INSIDE(sh[i]) && sh[i].sh_link < eh->e_shnum) {
      sym = (const void *)(p + sh[i].sh_offset);
      nsym = sh[i].sh_size / sizeof *sym;
      str = (const char *)p + sh[sh[i].sh_link].sh_offset;
    }
  for (int i = 0; i < eh->e_shnum; i++) {
    if (!code_section(SNAME(i)) || !INSIDE(sh[i])) continue;
    fprintf(f, "S %s %lu\n", SNAME(i), (unsigned long)sh[i].sh_size);
    if (sh[i].sh_type != SHT_NOBITS) fwrite(p + sh[i].sh_offset, 1, sh[i].sh_size, f);
    for (int r = 0; r < eh->e_shnum; r++) {
      if (sh[r].sh_type != SHT_RELA || sh[r].sh_info != (unsigned)i || !INSIDE(sh[r])) continue;
      const Elf64_Rela *ra = (const void *)(p + sh[r].sh_offset);
      for (size_t k = 0; k < sh[r].sh_size / sizeof *ra; k++) {
        size_t si = ELF64_R_SYM(ra[k].r_info);
        const char *name = "";
        if (sym && si < nsym)
          name = ELF64_ST_TYPE(sym[si].st_info) == STT_SECTION && sym[si].st_shndx < eh->e_shnum
                     ? SNAME(sym[si].st_shndx) : str + sym[si].st_name;
        fprintf(f, "R %lu %lu %ld %s\n", (unsigned long)ra[k].r_offset, (unsigned long)ELF64_R_TYPE(ra[k].r_info),
                (long)ra[k].r_addend, name);
      }
    }
  }
  for (size_t k = 0; k < nsym; k++) {
    int t = ELF64_ST_TYPE(sym[k].st_info);
    if ((t != STT_FUNC && t != STT_OBJECT) || sym[k].st_shndx == SHN_UNDEF || sym[k].st_shndx >= eh->e_shnum) continue;
    fprintf(f, "Y %s %s %lu %lu\n", str + sym[k].st_name, SNAME(sym[k].st_shndx), (unsigned long)sym[k].st_value,
            (unsigned long)sym[k].st_size);
  }
#undef SNAME
#undef INSIDE
  return 0;
}

/* The canonical form of the object at path (malloc'd, *len), or NULL. */
static char *object_code(const char *path, size_t *len) {
  FILE *in = fopen(path, "rb");
  if (!in) return NULL;
  struct stat st;
  unsigned char *p = fstat(fileno(in), &st) == 0 && st.st_size > 0 ? malloc((size_t)st.st_size) : NULL;
  size_t n = p ? fread(p, 1, (size_t)st.st_size, in) : 0;
  fclose(in);
  char *out = NULL;
  FILE *f = p && n == (size_t)st.st_size ? open_memstream(&out, len) : NULL;
  int bad = !f || canonical(p, n, f) != 0;
  if (f) fclose(f);
  free(p);
  if (bad) {
    free(out);
    return NULL;
  }
  return out;
}

/* ---- the compiles --------------------------------------------------------------------------- */

typedef struct tce_file {
  const char *rel;
  cmdline cmd;
  char *text;                /* its schemata text */
  size_t text_len;
  char *base;                /* the canonical code with no mutant */
  size_t base_len;
} tce_file;

typedef struct tce_job {
  tce_file *file;
  long mi;                   /* the survivor, -1: the file's base */
  int index;                 /* its MDM__ index (0: none) */
  pid_t pid;
  char obj[4200];
} tce_job;

static int read_all(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  FILE *m = open_memstream(out, len);
  char buf[65536];
  size_t got;
  while (m && (got = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, got, m);
  fclose(f);
  if (m) fclose(m);
  return m ? 0 : -1;
}

/* Starts the job's compile: the schemata text with MDM__(k) the constant (k == index). */
static int job_start(const char *tmp, size_t n, tce_job *j) {
  char src[4200], log[4200];
  snprintf(src, sizeof src, "%s/%zu.c", tmp, n);
  snprintf(j->obj, sizeof j->obj, "%s/%zu.o", tmp, n);
  snprintf(log, sizeof log, "%s/%zu.log", tmp, n);
  const char *t = j->file->text, *def = strstr(t, "\n#define MDM__(k) ");
  FILE *f = fopen(src, "w");
  if (!f || !def) {
    if (f) fclose(f);
    return -1;
  }
  const char *eol = strchr(def + 1, '\n');
  fwrite(t, 1, (size_t)(def + 1 - t), f);
  fprintf(f, "#define MDM__(k) ((k) == %d)\n", j->index);
  fputs(eol ? eol + 1 : "", f);
  if (fclose(f)) return -1;
  char **av = compile_argv(&j->file->cmd, src, j->obj);
  fflush(NULL);
  j->pid = fork();
  if (j->pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) dup2(fd, STDOUT_FILENO), dup2(fd, STDERR_FILENO);
    for (int k = 0; av[k]; k++) fprintf(stderr, "%s%s", k ? " " : "", av[k]);
    fprintf(stderr, "\n");
    if (chdir(j->file->cmd.dir)) _exit(127);
    execvp(av[0], av);
    _exit(127);
  }
  int na = 0;
  while (av[na]) na++;
  free(av[na - 3]);   /* compile_argv's own strdup: the folder after its last -iquote (before -w -O2) */
  free(av);
  return j->pid > 0 ? 0 : -1;
}

/* Loads each survivor's file: its schemata text and compile command. Files without either are
 * said and left out. Returns the files (*nf). */
static tce_file *load_files(mdc_mutate *m, size_t *nf) {
  tce_file *v = NULL;
  *nf = 0;
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    if (!u->selected || u->state != MU_SURVIVED) continue;
    size_t k = 0;
    while (k < *nf && strcmp(v[k].rel, u->file)) k++;
    if (k < *nf) continue;
    v = realloc(v, (*nf + 1) * sizeof *v);
    tce_file *f = &v[(*nf)++];
    memset(f, 0, sizeof *f);
    f->rel = u->file;
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", m->schemata, u->file);
    if (read_all(path, &f->text, &f->text_len) || !strstr(f->text, "\n#define MDM__(k) ")) {
      free(f->text), f->text = NULL;
      snprintf(path, sizeof path, "%s/%s", m->work, u->file); /* --source: rewritten in place */
      if (m->work[0]) read_all(path, &f->text, &f->text_len);
    }
    snprintf(path, sizeof path, "%s/%s.cmd", m->schemata, u->file);
    int have = cmd_from_file(path, &f->cmd) == 0 || cmd_from_db(m->schemata, u->file, &f->cmd) == 0;
    if (!have && m->work[0]) { /* --source: the build folder the --build command made in the copy */
      glob_t g;
      snprintf(path, sizeof path, "%s/*/compile_commands.json", m->work);
      if (glob(path, 0, NULL, &g) == 0)
        for (size_t gi = 0; gi < g.gl_pathc && !have; gi++) {
          *strrchr(g.gl_pathv[gi], '/') = 0;
          have = cmd_from_db(g.gl_pathv[gi], u->file, &f->cmd) == 0;
        }
      globfree(&g);
    }
    if (!f->text || !strstr(f->text, "\n#define MDM__(k) ") || !have) {
      fprintf(stderr, "mdc mutate: --tce: %s: no %s (%s/%s%s): its survivors are not checked\n", u->file,
              have ? "schemata text" : "compile command", m->schemata, u->file,
              have ? "" : ".cmd, written by md_mutagen cc, or a compile_commands.json above it");
      free(f->text), f->text = NULL;
      cmd_free(&f->cmd);
    }
  }
  return v;
}

/* Each survivor's index in its file's schemata (<schemata>/<file>.mutants: id, index, ...). */
static int index_of(const mdc_mutate *m, const mdc_mutant *u) {
  char path[8400], line[4096];
  snprintf(path, sizeof path, "%s/%s.mutants", m->schemata, u->file);
  FILE *f = fopen(path, "r");
  size_t l = strlen(u->id);
  int k = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, u->id, l) && line[l] == '\t') {
      k = atoi(line + l + 1);
      break;
    }
  if (f) fclose(f);
  return k;
}

static int rm_one(const char *p, const struct stat *s, int t, struct FTW *w) {
  (void)s, (void)t, (void)w;
  return remove(p);
}

/* Runs the jobs, --jobs at a time; a stop signal kills the running ones. */
static void run_jobs(mdc_mutate *m, const char *tmp, tce_job *jobs, size_t nj) {
  size_t next = 0, running = 0;
  int cap = m->jobs > 0 ? m->jobs : 1;
  while (next < nj || running) {
    while (!*m->stop && next < nj && running < (size_t)cap) {
      if (job_start(tmp, next, &jobs[next]) == 0) running++;
      else jobs[next].pid = 0;
      next++;
    }
    if (!running) break;
    int st;
    pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0 && errno != EINTR) break;
    for (size_t k = 0; k < next && pid > 0; k++)
      if (jobs[k].pid == pid) {
        running--;
        jobs[k].pid = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? -1 : 0; /* -1: done, 0: failed */
      }
    if (*m->stop) {
      for (size_t k = 0; k < next; k++)
        if (jobs[k].pid > 0) kill(jobs[k].pid, SIGKILL);
      next = nj;
    }
  }
}

int mdc_mutate__tce(mdc_mutate *m) {
  if (*m->stop) return -1; /* stopped earlier: nothing more */
  double t0 = mdc_cli__now();
  size_t nf, nj = 0, flagged = 0, checked = 0, failed = 0;
  tce_file *files = load_files(m, &nf);
  tce_job *jobs = calloc(m->n + nf + 1, sizeof *jobs);
  for (size_t k = 0; k < nf; k++)
    if (files[k].text) jobs[nj++] = (tce_job){.file = &files[k], .mi = -1, .index = 0};
  for (size_t i = 0; i < m->n; i++) {
    mdc_mutant *u = &m->v[i];
    if (!u->selected || u->state != MU_SURVIVED) continue;
    for (size_t k = 0; k < nf; k++)
      if (files[k].text && !strcmp(files[k].rel, u->file)) {
        int ix = index_of(m, u);
        if (ix > 0) jobs[nj++] = (tce_job){.file = &files[k], .mi = (long)i, .index = ix};
      }
  }
  char tmp[] = "/tmp/mdc-mutate-tce-XXXXXX";
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "mdc mutate: --tce: mkdtemp: %s\n", strerror(errno));
    nj = 0;
  }
  run_jobs(m, tmp, jobs, nj);
  for (size_t k = 0; k < nj; k++)
    if (jobs[k].mi < 0 && jobs[k].pid == -1) jobs[k].file->base = object_code(jobs[k].obj, &jobs[k].file->base_len);
  for (size_t k = 0; k < nj; k++) {
    tce_job *j = &jobs[k];
    if (j->mi < 0) continue;
    size_t len = 0;
    char *code = j->pid == -1 && j->file->base ? object_code(j->obj, &len) : NULL;
    if (!code) {
      failed++;
      continue;
    }
    checked++;
    mdc_mutant *u = &m->v[j->mi];
    u->tce = len == j->file->base_len && !memcmp(code, j->file->base, len) ? 1 : 2;
    flagged += u->tce == 1;
    free(code);
  }
  for (size_t k = 0; k < nf; k++) free(files[k].text), free(files[k].base), cmd_free(&files[k].cmd);
  free(files);
  free(jobs);
  if (!failed) nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  m->tce_s = mdc_cli__now() - t0;
  if (!m->quiet) {
    fprintf(stderr, "mdc mutate: --tce: %zu of %zu survivors compile to the same object code as the original (%.1f s)",
            flagged, checked, m->tce_s);
    if (failed) fprintf(stderr, "; %zu could not be compiled (their commands and logs: %s)", failed, tmp);
    fprintf(stderr, "\n");
  }
  return -1; /* a stop: the survivors not checked keep no flag */
}
