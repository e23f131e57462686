/* corpus.c - which traces a replay runs: discovery (files, folders, `*.jsonl`, no `blobs/`),
 * sorting, shard hashing, baseline files, and the parsing of option values. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mdc_int.h"

const char *mdc_cli__status_name(mdc_status s) {
  const char *n = mdc_store_status_name((mdc_case_status)s);
  return n ? n : "?";
}
int mdc_cli__status_unexpected(mdc_status s) { return mdc_store_status_unexpected((mdc_case_status)s); }

/* A trace found, with its file's identity: two paths to one file (links, a folder given twice,
 * a symlinked folder) are one trace. */
typedef struct found {
  char *path;
  dev_t dev;
  ino_t ino;
} found;

typedef struct walk_state {
  found *v;
  size_t n, cap;
  struct { dev_t dev; ino_t ino; } *dirs;   /* folders entered: a symlink loop enters none twice */
  size_t n_dirs, cap_dirs;
  char *err;
  size_t errlen;
} walk_state;

static int add_found(walk_state *w, const char *path, const struct stat *st) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 64;
    found *v = realloc(w->v, cap * sizeof *v);
    if (!v) return -1;
    w->v = v;
    w->cap = cap;
  }
  if (!(w->v[w->n].path = strdup(path))) return -1;
  w->v[w->n].dev = st->st_dev;
  w->v[w->n].ino = st->st_ino;
  w->n++;
  return 0;
}

/* 1 when the folder was entered before (then it is not entered again), 0 when it is new, -1
 * out of memory. */
static int seen_dir(walk_state *w, const struct stat *st) {
  for (size_t i = 0; i < w->n_dirs; i++)
    if (w->dirs[i].dev == st->st_dev && w->dirs[i].ino == st->st_ino) return 1;
  if (w->n_dirs == w->cap_dirs) {
    size_t cap = w->cap_dirs ? 2 * w->cap_dirs : 32;
    void *d = realloc(w->dirs, cap * sizeof *w->dirs);
    if (!d) return -1;
    w->dirs = d;
    w->cap_dirs = cap;
  }
  w->dirs[w->n_dirs].dev = st->st_dev;
  w->dirs[w->n_dirs].ino = st->st_ino;
  w->n_dirs++;
  return 0;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Every regular `*.jsonl` under dir (folders named `blobs` skipped). Symlinks are followed, but
 * a folder is entered once however many paths lead to it, so a loop ends; what is not a
 * regular file or a folder (a FIFO, a device, a dangling link) is no trace and is skipped. */
static int walk(walk_state *w, const char *dir, const struct stat *dst, int depth) {
  int seen = seen_dir(w, dst);
  if (seen) return seen < 0 ? (snprintf(w->err, w->errlen, "out of memory"), -1) : 0;
  if (depth > 256) {
    snprintf(w->err, w->errlen, "%s: folders nested more than 256 deep", dir);
    return -1;
  }
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(w->err, w->errlen, "cannot read folder '%s': %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s%s%s", dir, ends_with(dir, "/") ? "" : "/", e->d_name);
    if (n < 0 || (size_t)n >= sizeof path) continue;
    struct stat st;
    if (stat(path, &st) != 0) continue; /* a dangling link is not a trace */
    if (S_ISDIR(st.st_mode)) {
      if (strcmp(e->d_name, "blobs") != 0) rc = walk(w, path, &st, depth + 1);
    } else if (S_ISREG(st.st_mode) && ends_with(e->d_name, ".jsonl")) {
      if (add_found(w, path, &st)) {
        snprintf(w->err, w->errlen, "out of memory");
        rc = -1;
      }
    }
  }
  closedir(d);
  return rc;
}

static int cmp_found(const void *a, const void *b) {
  return strcmp(((const found *)a)->path, ((const found *)b)->path);
}

/* Orders pointers to entries by file identity, then by position (the path order). */
static int cmp_identity(const void *a, const void *b) {
  const found *x = *(found *const *)a, *y = *(found *const *)b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return x < y ? -1 : x > y;
}

static const char *file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

int mdc_cli__collect(const char *const *paths, size_t n, mdc_cli__paths *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  walk_state w = {.err = err, .errlen = errlen};
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(paths[i], &st) != 0) {
      snprintf(err, errlen, "cannot read '%s': %s", paths[i], strerror(errno));
      goto fail;
    }
    size_t before = w.n, dirs_before = w.n_dirs;
    if (S_ISDIR(st.st_mode)) {
      if (walk(&w, paths[i], &st, 0)) goto fail;
      /* (A folder given again, or inside one given before, adds nothing and is no error.) */
      if (w.n == before && w.n_dirs > dirs_before) {
        snprintf(err, errlen, "no traces (*.jsonl) under '%s'", paths[i]);
        goto fail;
      }
    } else if (!S_ISREG(st.st_mode)) {
      snprintf(err, errlen, "'%s' is not a regular file (%s): a trace is a file, or a folder of them",
               paths[i], file_kind(st.st_mode));
      goto fail;
    } else if (access(paths[i], R_OK) != 0) {
      snprintf(err, errlen, "cannot read '%s': %s", paths[i], strerror(errno));
      goto fail;
    } else if (add_found(&w, paths[i], &st)) {
      snprintf(err, errlen, "out of memory");
      goto fail;
    }
  }
  if (w.n == 0) {
    snprintf(err, errlen, "no traces given");
    goto fail;
  }
  /* Sorted by path, so the order never depends on the file system; then each file once (the
   * first of its paths in that order). */
  if (w.n) qsort(w.v, w.n, sizeof *w.v, cmp_found);
  found **by_id = malloc(w.n * sizeof *by_id);
  out->v = malloc(w.n * sizeof *out->v);
  if (!by_id || !out->v) {
    free(by_id);
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < w.n; i++) by_id[i] = &w.v[i];
  if (w.n) qsort(by_id, w.n, sizeof *by_id, cmp_identity);
  for (size_t i = 1; i < w.n; i++)
    if (by_id[i]->dev == by_id[i - 1]->dev && by_id[i]->ino == by_id[i - 1]->ino) {
      free(by_id[i]->path);   /* a later path to a file already listed */
      by_id[i]->path = NULL;
    }
  free(by_id);
  for (size_t i = 0; i < w.n; i++)
    if (w.v[i].path) out->v[out->n++] = w.v[i].path;
  out->cap = w.n;
  free(w.v);
  free(w.dirs);
  return 0;
fail:
  for (size_t i = 0; i < w.n; i++) free(w.v[i].path);
  free(w.v);
  free(w.dirs);
  mdc_cli__paths_free(out);
  return -1;
}

void mdc_cli__paths_free(mdc_cli__paths *p) {
  for (size_t i = 0; i < p->n; i++) free(p->v[i]);
  free(p->v);
  memset(p, 0, sizeof *p);
}

uint32_t mdc_cli__shard_of(const char *name, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
  return n ? (uint32_t)(h % n) : 0;
}

static int parse_u32(const char *s, const char *end, uint32_t *out) {
  if (s == end || end - s > 9) return -1;
  uint32_t v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (uint32_t)(*p - '0');
  }
  *out = v;
  return 0;
}

/* A variable of the environment that must be a decimal number (u32); NULL when unset. -1 with
 * a message when set but not a number. */
static int env_u32(const char *name, const char **raw, uint32_t *v, char *why, size_t whylen) {
  *raw = getenv(name);
  if (!*raw) return 0;
  if (parse_u32(*raw, *raw + strlen(*raw), v)) {
    snprintf(why, whylen, "%s='%.40s' is not a number", name, *raw);
    return -1;
  }
  return 1;
}

/* --shard auto[/N] (docs/scale-out.md): GitLab's parallel: jobs (CI_NODE_INDEX 1..CI_NODE_TOTAL),
 * a Kubernetes Indexed Job's pods (JOB_COMPLETION_INDEX 0..N-1, N from auto/N or MDC_SHARD_TOTAL:
 * Kubernetes does not tell a pod the Job's completions), or MDC_SHARD_INDEX (0-based) with
 * MDC_SHARD_TOTAL for any other engine, in that order. */
static int parse_shard_auto(const char *total_s, uint32_t *i, uint32_t *n, char *why, size_t whylen) {
  uint32_t given = 0, gi = 0, gn = 0, ki = 0, mi = 0, mn = 0;
  const char *r_gi, *r_gn, *r_ki, *r_mi, *r_mn;
  if (total_s && (parse_u32(total_s, total_s + strlen(total_s), &given) || given == 0)) {
    snprintf(why, whylen, "auto/N: N must be a number >= 1");
    return -1;
  }
  int has_gi = env_u32("CI_NODE_INDEX", &r_gi, &gi, why, whylen), has_gn = env_u32("CI_NODE_TOTAL", &r_gn, &gn, why, whylen);
  int has_ki = env_u32("JOB_COMPLETION_INDEX", &r_ki, &ki, why, whylen);
  int has_mi = env_u32("MDC_SHARD_INDEX", &r_mi, &mi, why, whylen), has_mn = env_u32("MDC_SHARD_TOTAL", &r_mn, &mn, why, whylen);
  if (has_gi < 0 || has_gn < 0 || has_ki < 0 || has_mi < 0 || has_mn < 0) return -1;
  const char *src;
  if (has_gi || (has_gn && !has_ki && !has_mi)) {
    /* GitLab sets CI_NODE_TOTAL (1) on every job, CI_NODE_INDEX only with parallel: */
    if (!has_gn || gn == 0) {
      snprintf(why, whylen, "CI_NODE_INDEX=%s without CI_NODE_TOTAL >= 1 (GitLab sets both with parallel:)", r_gi);
      return -1;
    }
    if (!has_gi && gn > 1) {
      snprintf(why, whylen, "CI_NODE_TOTAL=%u without CI_NODE_INDEX (GitLab sets both with parallel:)", gn);
      return -1;
    }
    if (has_gi && (gi < 1 || gi > gn)) {
      snprintf(why, whylen, "CI_NODE_INDEX=%u is not in 1..CI_NODE_TOTAL=%u (GitLab counts from 1)", gi, gn);
      return -1;
    }
    *i = has_gi ? gi - 1 : 0, *n = gn, src = "GitLab CI_NODE_INDEX/CI_NODE_TOTAL";
  } else if (has_ki || has_mi) {
    uint32_t idx = has_ki ? ki : mi;
    const char *iname = has_ki ? "JOB_COMPLETION_INDEX" : "MDC_SHARD_INDEX";
    if (!given && !has_mn) {
      snprintf(why, whylen, "%s=%u but no total: give --shard auto/N or set MDC_SHARD_TOTAL (the Job's "
               "completions)", iname, idx);
      return -1;
    }
    if (given && has_mn && given != mn) {
      snprintf(why, whylen, "auto/%u disagrees with MDC_SHARD_TOTAL=%u", given, mn);
      return -1;
    }
    *n = given ? given : mn;
    if (*n == 0 || idx >= *n) {
      snprintf(why, whylen, "%s=%u is not in 0..%u (the total is %u)", iname, idx, *n ? *n - 1 : 0, *n);
      return -1;
    }
    *i = idx, src = has_ki ? "Kubernetes JOB_COMPLETION_INDEX" : "MDC_SHARD_INDEX";
  } else {
    snprintf(why, whylen, "no shard in the environment: none of CI_NODE_INDEX/CI_NODE_TOTAL (GitLab "
             "parallel:), JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or MDC_SHARD_INDEX is set; give "
             "--shard I/N");
    return -1;
  }
  if (given && *n != given) {
    snprintf(why, whylen, "auto/%u disagrees with the %u shards of %s", given, *n, src);
    return -1;
  }
  snprintf(why, whylen, "shard %u/%u from %s", *i, *n, src);
  return 0;
}

int mdc_cli__parse_shard(const char *s, uint32_t *i, uint32_t *n) { return mdc_cli__parse_shard_why(s, i, n, NULL, 0); }

int mdc_cli__parse_shard_why(const char *s, uint32_t *i, uint32_t *n, char *why, size_t whylen) {
  char scratch[320];
  if (!why || !whylen) why = scratch, whylen = sizeof scratch;
  if (s && !strncmp(s, "auto", 4) && (s[4] == '\0' || s[4] == '/'))
    return parse_shard_auto(s[4] ? s + 5 : NULL, i, n, why, whylen);
  const char *slash = s ? strchr(s, '/') : NULL;
  if (!slash || parse_u32(s, slash, i) || parse_u32(slash + 1, slash + strlen(slash), n) || *n < 1 || *i >= *n) {
    snprintf(why, whylen, "want I/N with 0 <= I < N, e.g. 0/4, or auto (GitLab, Kubernetes: docs/scale-out.md)");
    return -1;
  }
  snprintf(why, whylen, "shard %u/%u", *i, *n);
  return 0;
}

int mdc_cli__parse_seconds(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !(v > 0) || v > 86400) return -1;
  *out = v;
  return 0;
}

int mdc_cli__parse_int(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int mdc_cli__baseline_load(const char *path, mdc_cli__baseline *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "baseline '%s' is not a regular file (%s): it is a list of trace names",
             path, S_ISDIR(st.st_mode) ? "a folder" : file_kind(st.st_mode));
    return -1;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot read baseline '%s': %s", path, strerror(errno));
    return -1;
  }
  char line[1024];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *p = line, *hash = strchr(line, '#');
    if (hash) *hash = 0;
    while (*p == ' ' || *p == '\t') p++;
    size_t len = strlen(p);
    while (len && (p[len - 1] == '\n' || p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t')) p[--len] = 0;
    if (!len) continue;
    if (out->n == cap) {
      cap = cap ? 2 * cap : 32;
      char **v = realloc(out->names, cap * sizeof *v);
      if (!v) break;
      out->names = v;
    }
    out->names[out->n] = strdup(p);
    if (out->names[out->n]) out->n++;
  }
  fclose(f);
  return 0;
}

int mdc_cli__baseline_has(const mdc_cli__baseline *b, const char *name) {
  for (size_t i = 0; b && i < b->n; i++)
    if (strcmp(b->names[i], name) == 0) return 1;
  return 0;
}

size_t mdc_cli__terminal_safe(const char *s, char *out, size_t len) {
  size_t n = 0;
  if (!len) return 0;
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && n + 5 < len; p++) {
    if (*p < 0x20 || *p == 0x7f) n += (size_t)snprintf(out + n, len - n, "\\x%02x", *p);
    else out[n++] = (char)*p;
  }
  out[n] = '\0';
  return n;
}

void mdc_cli__baseline_free(mdc_cli__baseline *b) {
  for (size_t i = 0; i < b->n; i++) free(b->names[i]);
  free(b->names);
  memset(b, 0, sizeof *b);
}

int mdc_cli__mkdir_parent(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  char *slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = 0;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
  return 0;
}
