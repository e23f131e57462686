/* corpus.c - which traces a replay runs: discovery (files, folders, `*.jsonl`, no `blobs/`),
 * sorting, shard hashing, baseline files, and the parsing of option values. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mdc_int.h"

static const char *const status_names[] = {
#define X(e, n, u) n,
    MDC_STATUS_MAP(X)
#undef X
};
static const int status_unexpected[] = {
#define X(e, n, u) u,
    MDC_STATUS_MAP(X)
#undef X
};

const char *mdc_cli__status_name(mdc_status s) { return s < MDC_S_COUNT ? status_names[s] : "?"; }
int mdc_cli__status_unexpected(mdc_status s) { return s < MDC_S_COUNT ? status_unexpected[s] : 1; }

static int push(mdc_cli__paths *p, const char *s) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    char **v = realloc(p->v, cap * sizeof *v);
    if (!v) return -1;
    p->v = v;
    p->cap = cap;
  }
  if (!(p->v[p->n] = strdup(s))) return -1;
  p->n++;
  return 0;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Recursion depth is bounded by the file system's; a symlink loop is cut by a depth limit. */
static int walk(const char *dir, int depth, mdc_cli__paths *out, char *err, size_t errlen) {
  if (depth > 64) {
    snprintf(err, errlen, "%s: folders nested more than 64 deep (a symlink loop?)", dir);
    return -1;
  }
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, errlen, "cannot read folder '%s': %s", dir, strerror(errno));
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
      if (strcmp(e->d_name, "blobs") != 0) rc = walk(path, depth + 1, out, err, errlen);
    } else if (S_ISREG(st.st_mode) && ends_with(e->d_name, ".jsonl")) {
      if (push(out, path)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
      }
    }
  }
  closedir(d);
  return rc;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int mdc_cli__collect(const char *const *paths, size_t n, mdc_cli__paths *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(paths[i], &st) != 0) {
      snprintf(err, errlen, "cannot read '%s': %s", paths[i], strerror(errno));
      goto fail;
    }
    size_t before = out->n;
    if (S_ISDIR(st.st_mode)) {
      if (walk(paths[i], 0, out, err, errlen)) goto fail;
      if (out->n == before) {
        snprintf(err, errlen, "no traces (*.jsonl) under '%s'", paths[i]);
        goto fail;
      }
    } else {
      FILE *f = fopen(paths[i], "r");
      if (!f) {
        snprintf(err, errlen, "cannot read '%s': %s", paths[i], strerror(errno));
        goto fail;
      }
      fclose(f);
      if (push(out, paths[i])) {
        snprintf(err, errlen, "out of memory");
        goto fail;
      }
    }
  }
  if (out->n == 0) {
    snprintf(err, errlen, "no traces given");
    goto fail;
  }
  qsort(out->v, out->n, sizeof *out->v, cmp_str);
  size_t k = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (k && strcmp(out->v[k - 1], out->v[i]) == 0) {
      free(out->v[i]);
      continue;
    }
    out->v[k++] = out->v[i];
  }
  out->n = k;
  return 0;
fail:
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

int mdc_cli__parse_shard(const char *s, uint32_t *i, uint32_t *n) {
  const char *slash = s ? strchr(s, '/') : NULL;
  if (!slash || parse_u32(s, slash, i) || parse_u32(slash + 1, slash + strlen(slash), n)) return -1;
  return *n >= 1 && *i < *n ? 0 : -1;
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
