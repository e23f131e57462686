/* report.c - mdc_report_write: picks the run and its baseline, walks the run's cases once beside
 * the baseline's (both sorted by name, so the join needs no memory beyond two rows), keeps the
 * totals, the areas and capped lists of what changed, writes junit.xml during that walk, then
 * index.html and summary.md, all into a new folder renamed over --out at the end. */
#include "report_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_ROWS 500
#define DEFAULT_HISTORY 50
#define MAX_AREAS 500

/* The files a report folder holds; a folder holding anything else is not replaced. */
static const char *const report_files[] = {"index.html", "summary.md", "junit.xml"};

static const struct { const char *name, *title; } cats[RP_NCAT] = {
  [RP_REGRESSION] = {"REGRESSION", "Regressions: passing in the baseline, failing now"},
  [RP_FIX] = {"FIX", "Fixes: failing in the baseline, passing now"},
  [RP_STILL_FAILING] = {"still failing", "Still failing"},
  [RP_NEW] = {"new", "New cases (not in the baseline)"},
  [RP_REMOVED] = {"removed", "Removed cases (in the baseline, not in this run)"},
  [RP_CHANGED] = {"changed", "Other changes of status"},
};

const char *rp_cat_name(rp_cat c) { return (unsigned)c < RP_NCAT ? cats[c].name : "?"; }
const char *rp_cat_title(rp_cat c) { return (unsigned)c < RP_NCAT ? cats[c].title : "?"; }

/* Pure; thread-safe. */
int rp_verdict_class(const char *st) {
  if (!st) return 0;
  /* Pseudo statuses of a known-failures list: listed names are failing, others passing. */
  if (!strcmp(st, "listed")) return -1;
  if (!strcmp(st, "unlisted")) return 1;
  switch (mdc_store_status_parse(st)) {
    case MDC_CS_PASS: case MDC_CS_FLAKE: case MDC_CS_UNEXPECTED_PASS: return 1;
    case MDC_CS_FAIL: case MDC_CS_CRASH: case MDC_CS_TIMEOUT: case MDC_CS_TRACE_ERROR: case MDC_CS_ORDER_DEPENDENT:
    case MDC_CS_RUNNING: case MDC_CS_INTERRUPTED: return -1;
    /* Known failures (ExpectedFail), decisions SPEC leaves open (Warn), what the driver does not
     * claim (NotSupported) and what was never run (Skipped) are neither: never "failing", never
     * a regression or a "new failing" case (issue 27). */
    default: return 0;
  }
}

/* Pure; thread-safe. */
int rp_classify(const char *base, const char *cur) {
  if (!base && !cur) return -1;
  if (!base) return RP_NEW;
  if (!cur) return RP_REMOVED;
  int b = rp_verdict_class(base), c = rp_verdict_class(cur);
  if (b == 1 && c == -1) return RP_REGRESSION;
  if (b == -1 && c == 1) return RP_FIX;
  if (b == -1 && c == -1) return RP_STILL_FAILING;
  return strcmp(base, cur) ? RP_CHANGED : -1;
}

/* ---- capped lists ---- */

static char *sdup(const char *s) { return s ? strdup(s) : NULL; }

/* The list owns its copies (rp_list_free); -1 when out of memory (the count still grows). */
int rp_list_add(rp_list *l, uint32_t cap, const mdc_case_row *cur, const char *base_status,
                const mdc_case_row *base) {
  l->total++;
  if (l->n >= cap) return 0;
  if (l->n % 64 == 0) {
    rp_case *v = realloc(l->v, (l->n + 64) * sizeof *v);
    if (!v) return -1;
    l->v = v;
  }
  const mdc_case_row *r = cur ? cur : base;
  rp_case *c = &l->v[l->n];
  memset(c, 0, sizeof *c);
  if (r) {
    c->name = sdup(r->name);
    c->path = sdup(r->path);
    c->status = sdup(cur ? cur->status : NULL);
    c->message = sdup(r->message);
    c->expected = sdup(r->expected);
    c->actual = sdup(r->actual);
    c->event = sdup(r->event);
    c->rule = sdup(r->rule);
    c->driver_message = sdup(r->driver_message);
    c->advisory = sdup(r->advisory);
    c->started_at = sdup(r->started_at);
    c->line = r->line;
    c->duration_s = r->duration_s;
  }
  c->base_status = sdup(base_status);
  l->n++;
  return 0;
}

static void case_free(rp_case *c) {
  char *const s[] = {c->name, c->path, c->status, c->base_status, c->message, c->expected, c->actual,
                     c->event, c->rule, c->driver_message, c->advisory, c->started_at};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) free(s[i]);
}

/* Frees the list's copies and zeroes it. */
void rp_list_free(rp_list *l) {
  for (size_t i = 0; i < l->n; i++) case_free(&l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* ---- the join ---- */

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static long listed_at(const rp_baseline *b, const char *name) {
  char *const *hit = bsearch(&name, b->names, b->n_names, sizeof *b->names, name_cmp);
  return hit ? hit - b->names : -1;
}

static int seterr(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(char *err, size_t len, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Opens and closes its own cursors; one store per thread; the callback's value or -1 with err. */
int rp_join(mdc_store *s, int64_t run_id, rp_baseline *b, rp_pair_fn fn, void *ctx, char *err,
            size_t errlen) {
  mdc_case_iter *ic = NULL, *ib = NULL;
  mdc_case_query q = {.run_id = run_id, .order = MDC_CASES_BY_NAME};
  int ret = -1;
  if (mdc_store_cases_open(s, &q, &ic) != 0) {
    seterr(err, errlen, "%s", mdc_store_error(s));
    return -1;
  }
  if (b && b->kind == RP_BASE_RUN) {
    /* The baseline side needs only names and statuses: read from the index alone. */
    mdc_case_query qb = {.run_id = b->run.id, .order = MDC_CASES_BY_NAME, .light = 1};
    if (mdc_store_cases_open(b->store, &qb, &ib) != 0) {
      seterr(err, errlen, "%s", mdc_store_error(b->store));
      goto out;
    }
  }
  mdc_case_row c, p;
  int hc = mdc_store_cases_next(ic, &c), hb = ib ? mdc_store_cases_next(ib, &p) : 0;
  for (;;) {
    if (hc < 0 || hb < 0) {
      seterr(err, errlen, "%s", mdc_store_error(hc < 0 ? s : b->store));
      goto out;
    }
    if (hc == 0 && hb == 0) break;
    int cmp = hc == 0 ? 1 : hb == 0 ? -1 : strcmp(c.name, p.name), rc;
    if (cmp < 0) {
      const char *bs = NULL;
      if (b && b->kind == RP_BASE_LIST) {
        long at = listed_at(b, c.name);
        if (at < 0 && c.path) at = listed_at(b, c.path); /* as mdc replay: a name or a path */
        if (at >= 0) b->seen[at] = 1;
        bs = at >= 0 ? "listed" : rp_verdict_class(c.status) < 0 ? "unlisted" : c.status;
      }
      rc = fn(ctx, &c, bs, NULL);
      hc = mdc_store_cases_next(ic, &c);
    } else if (cmp > 0) {
      rc = fn(ctx, NULL, p.status, &p);
      hb = mdc_store_cases_next(ib, &p);
    } else {
      rc = fn(ctx, &c, p.status, &p);
      hc = mdc_store_cases_next(ic, &c);
      hb = mdc_store_cases_next(ib, &p);
    }
    if (rc) {
      ret = rc;
      goto out;
    }
  }
  if (b && b->kind == RP_BASE_LIST)
    for (size_t i = 0; i < b->n_names; i++)
      if (!b->seen[i]) {
        mdc_case_row gone = {.name = b->names[i]};
        int rc = fn(ctx, NULL, "listed", &gone);
        if (rc) {
          ret = rc;
          goto out;
        }
      }
  ret = 0;
out:
  mdc_store_cases_close(ic);
  mdc_store_cases_close(ib);
  return ret;
}

/* Frees what the baseline owns (its store only when own_store) and zeroes it. */
void rp_baseline_free(rp_baseline *b) {
  if (b->own_store) mdc_store_close(b->store);
  mdc_store_run_row_free(&b->run);
  for (size_t i = 0; i < b->n_names; i++) free(b->names[i]);
  free(b->names);
  free(b->seen);
  memset(b, 0, sizeof *b);
}

/* ---- picking the run and the baseline ---- */

/* A store's refusal as an exit code: nothing to read is the caller's input, the rest the store. */
static int store_code(int rc) { return rc == MDC_STORE_NOT_FOUND ? MDC_REPORT_EINPUT : MDC_REPORT_ESTORE; }

static int find_run(mdc_store *s, const char *db, const char *ref, mdc_run_row *run, char *err, size_t errlen) {
  int rc;
  if (!ref || !strcmp(ref, "latest")) {
    /* The latest replay: what a person means after `make run`, even if mutants ran since. */
    rc = mdc_store_run_find(s, "latest", "replay", run);
    if (rc == MDC_STORE_NOT_FOUND) rc = mdc_store_run_find(s, "latest", NULL, run);
    if (rc == MDC_STORE_NOT_FOUND) {
      seterr(err, errlen, "results store '%s': holds no runs", db);
      return MDC_REPORT_EINPUT;
    }
  } else {
    rc = mdc_store_run_find(s, ref, NULL, run);
  }
  if (rc != 0) {
    seterr(err, errlen, "%s", mdc_store_error(s));
    return store_code(rc);
  }
  return MDC_REPORT_OK;
}

typedef struct prev_ctx { mdc_run_row *out; mdc_store *s; int rc; } prev_ctx;

static int take_run(void *ctx, const mdc_run_row *row) {
  prev_ctx *p = ctx;
  mdc_store_run_row_free(p->out);
  /* A borrowed row: fetched again to own its strings. */
  p->rc = mdc_store_run_get(p->s, row->id, p->out);
  return 0;
}

/* The newest run of s matching f into *out; 1 when there is none. */
static int newest(mdc_store *s, const mdc_run_filter *f, mdc_run_row *out) {
  prev_ctx p = {.out = out, .s = s, .rc = 1};
  mdc_run_filter g = *f;
  g.limit = 1;
  if (mdc_store_runs_each(s, &g, take_run, &p) != 0) return -1;
  return p.rc;
}

static int load_list(rp_baseline *b, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    seterr(err, errlen, "baseline '%s': %s", path, strerror(errno));
    return MDC_REPORT_EINPUT;
  }
  char line[4096];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *p = line, *e;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') continue;
    e = p + strcspn(p, "\r\n#");
    while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if (e == p) continue;
    *e = 0;
    if (b->n_names == cap) {
      cap = cap ? 2 * cap : 64;
      char **v = realloc(b->names, cap * sizeof *v);
      if (!v) break;
      b->names = v;
    }
    if (!(b->names[b->n_names] = strdup(p))) break;
    b->n_names++;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    seterr(err, errlen, "baseline '%s': read error", path);
    return MDC_REPORT_EINPUT;
  }
  if (b->n_names) qsort(b->names, b->n_names, sizeof *b->names, name_cmp);
  b->seen = calloc(b->n_names + 1, 1);
  if (!b->seen) {
    seterr(err, errlen, "baseline '%s': out of memory", path);
    return MDC_REPORT_EINPUT;
  }
  b->kind = RP_BASE_LIST;
  snprintf(b->desc, sizeof b->desc, "the known failures listed in %.500s (%zu name%s)", path, b->n_names,
           b->n_names == 1 ? "" : "s");
  return MDC_REPORT_OK;
}

/* "run 3f2a9c01 (2026-11-03 14:05:09, drv 1.0 on sim, revision abc)[ of FILE][: WHY]". */
static void describe_run(rp_baseline *b, const char *where, const char *why) {
  char when[32], id[9];
  rp_when(b->run.started_at, when, sizeof when);
  rp_short_uuid(b->run.uuid, id);
  snprintf(b->desc, sizeof b->desc, "run %s (%s, %.60s %.60s on %.32s, revision %.40s)%s%.300s%s%.400s", id, when,
           b->run.driver_name ? b->run.driver_name : "?", b->run.driver_version ? b->run.driver_version : "",
           b->run.backend ? b->run.backend : "?", b->run.revision ? b->run.revision : "?", where ? " of " : "",
           where ? where : "", why ? ": " : "", why ? why : "");
}

/* The newest run of s comparable with run (report_like.c) into b->run; 1 when there is none, with
 * why in b->desc; -1 on a store error. */
static int newest_like(mdc_store *s, const mdc_run_row *run, int only_earlier, rp_baseline *b, rp_like *like) {
  if (rp_like_runs(s, run, 1, only_earlier, like) != 0) return -1;
  char what[400];
  rp_like_what(run, what, sizeof what);
  if (!like->n) {
    uint64_t other = like->other_selection + like->unrecorded;
    if (other)
      snprintf(b->desc, sizeof b->desc, "none: no %s%s in this store; %llu %s of this driver and backend ran other "
               "traces%s (not comparable: give one with --baseline RUN to compare anyway)",
               only_earlier ? "earlier " : "", what, (unsigned long long)other, other == 1 ? "run" : "runs",
               like->unrecorded ? " or did not record which" : "");
    else
      snprintf(b->desc, sizeof b->desc, "none: no %s%s in this store", only_earlier ? "earlier " : "", what);
    return 1;
  }
  return mdc_store_run_get(s, like->ids[0], &b->run) == 0 ? 0 : -1;
}

static int choose_baseline(rp_report *r, const char *spec, char *err, size_t errlen) {
  rp_baseline *b = &r->base;
  const mdc_run_row *run = &r->run;
  mdc_run_filter same = {.kind = run->kind, .driver_name = run->driver_name, .backend = run->backend};
  if (spec && !strcmp(spec, "none")) {
    snprintf(b->desc, sizeof b->desc, "none (--baseline none)");
    return MDC_REPORT_OK;
  }
  if (!spec || !strcmp(spec, "previous")) {
    /* Like with like: the newest earlier run of the same kind, driver and backend over the same
     * selection of traces (report_like.c); none qualifying is said, never papered over. */
    rp_like like;
    int rc = newest_like(r->store, run, 1, b, &like);
    rp_like_free(&like);
    if (rc < 0) {
      seterr(err, errlen, "%s", mdc_store_error(r->store));
      return MDC_REPORT_ESTORE;
    }
    if (rc == 1) return MDC_REPORT_OK;
    b->kind = RP_BASE_RUN;
    b->store = r->store;
    char what[400], why[480];
    rp_like_what(run, what, sizeof what);
    snprintf(why, sizeof why, "the newest earlier of the %.400s", what);
    describe_run(b, NULL, why);
    return MDC_REPORT_OK;
  }
  struct stat sb;
  if (stat(spec, &sb) == 0) {
    if (!S_ISREG(sb.st_mode)) {
      seterr(err, errlen, "baseline '%s': not a regular file", spec);
      return MDC_REPORT_EINPUT;
    }
    char magic[16] = {0};
    FILE *f = fopen(spec, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    if (got < sizeof magic || memcmp(magic, "SQLite format 3", 16) != 0) return load_list(b, spec, err, errlen);
    /* Another results store: its newest comparable run. */
    int rc = mdc_store_open_read(spec, &b->store, err, errlen);
    if (rc != 0) return store_code(rc);
    b->own_store = 1;
    /* Its newest run over the same traces, else (said) its newest of the driver, else of the kind. */
    rp_like like;
    const char *why = "its newest run over the same traces";
    rc = newest_like(b->store, run, 0, b, &like);
    rp_like_free(&like);
    if (rc == 1) {
      why = "its newest run of this driver and backend (over other traces, or not recorded which)";
      rc = newest(b->store, &same, &b->run);
    }
    if (rc == 1) {
      why = "its newest run of this kind (another driver or backend)";
      mdc_run_filter kind_only = {.kind = run->kind};
      rc = newest(b->store, &kind_only, &b->run);
    }
    if (rc < 0) {
      seterr(err, errlen, "%s", mdc_store_error(b->store));
      return MDC_REPORT_ESTORE;
    }
    if (rc == 1) {
      seterr(err, errlen, "baseline '%s': holds no run of kind '%s'", spec, run->kind);
      return MDC_REPORT_EINPUT;
    }
    b->kind = RP_BASE_RUN;
    describe_run(b, spec, why);
    return MDC_REPORT_OK;
  }
  int rc = mdc_store_run_find(r->store, spec, NULL, &b->run);
  if (rc != 0) {
    seterr(err, errlen, "baseline '%s' is no file, and %s", spec, mdc_store_error(r->store));
    return store_code(rc);
  }
  if (b->run.id == run->id) {
    seterr(err, errlen, "baseline '%s' is the reported run itself", spec);
    return MDC_REPORT_EINPUT;
  }
  b->kind = RP_BASE_RUN;
  b->store = r->store;
  describe_run(b, NULL, "given with --baseline");
  return MDC_REPORT_OK;
}

/* ---- the pass ---- */

static int area_cmp(const void *key, const void *a) { return strcmp(key, ((const rp_area *)a)->name); }

static rp_area *area_get(rp_report *r, const char *name) {
  size_t lo = 0, hi = r->n_areas;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = area_cmp(name, &r->areas[mid]);
    if (c == 0) return &r->areas[mid];
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  if (r->n_areas >= MAX_AREAS) {
    /* Past the cap (names without a common prefix): one bucket for the rest. */
    r->areas_lumped++;
    return r->n_areas ? area_get(r, "(other)") : NULL;
  }
  if (r->n_areas == r->cap_areas) {
    size_t cap = r->cap_areas ? 2 * r->cap_areas : 16;
    rp_area *v = realloc(r->areas, cap * sizeof *v);
    if (!v) return NULL;
    r->areas = v;
    r->cap_areas = cap;
  }
  char *copy = strdup(name);
  if (!copy) return NULL;
  memmove(&r->areas[lo + 1], &r->areas[lo], (r->n_areas - lo) * sizeof *r->areas);
  memset(&r->areas[lo], 0, sizeof *r->areas);
  r->areas[lo].name = copy;
  r->n_areas++;
  return &r->areas[lo];
}

static int on_pair(void *ctx, const mdc_case_row *cur, const char *bs, const mdc_case_row *base) {
  rp_report *r = ctx;
  if (cur) {
    int st = mdc_store_status_parse(cur->status);
    r->n_cases++;
    r->sum_duration += cur->duration_s;
    char area[256];
    rp_area_of(cur->name, area, sizeof area);
    rp_area *a = area_get(r, area);
    if (a) {
      if (st >= 0) a->counts[st]++;
      a->total++;
    }
    if (r->junit) rp_junit_case(r, r->junit, cur);
    if (st == MDC_CS_FLAKE && rp_list_add(&r->flaky, r->max_rows, cur, bs, base)) return -1;
    if ((st == MDC_CS_RUNNING || st == MDC_CS_INTERRUPTED) && rp_list_add(&r->running, r->max_rows, cur, bs, base))
      return -1;
  }
  if (r->base.kind == RP_BASE_NONE) return 0;
  int cat = rp_classify(bs, cur ? cur->status : NULL);
  if (cat < 0) return 0;
  if (cat == RP_NEW && rp_verdict_class(cur->status) < 0) r->new_failing++;
  return rp_list_add(&r->cat[cat], r->max_rows, cur, bs, base) ? -1 : 0;
}

/* ---- the folder ---- */

static int is_report_file(const char *n) {
  for (size_t i = 0; i < sizeof report_files / sizeof report_files[0]; i++)
    if (!strcmp(n, report_files[i])) return 1;
  return 0;
}

/* Removes a folder that holds only report files (and the folder). */
static void remove_report_dir(const char *dir) {
  char p[PATH_MAX];
  for (size_t i = 0; i < sizeof report_files / sizeof report_files[0]; i++) {
    if (snprintf(p, sizeof p, "%s/%s", dir, report_files[i]) < (int)sizeof p) unlink(p);
  }
  rmdir(dir);
}

/* mkdir -p of dir's parent. */
static int mkdir_parent(const char *dir) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", dir);
  char *slash = strrchr(p, '/');
  if (!slash || slash == p) return 0;
  *slash = 0;
  for (char *q = p + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
      *q = '/';
    }
  if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

/* Checks that out may be replaced: missing, or a folder of report files only. */
static int check_out(const char *out, int *exists, char *err, size_t errlen) {
  struct stat sb;
  *exists = 0;
  if (lstat(out, &sb) != 0) {
    if (errno == ENOENT) return 0;
    return seterr(err, errlen, "--out '%s': %s", out, strerror(errno));
  }
  if (!S_ISDIR(sb.st_mode)) return seterr(err, errlen, "--out '%s': exists and is not a folder", out);
  DIR *d = opendir(out);
  if (!d) return seterr(err, errlen, "--out '%s': %s", out, strerror(errno));
  struct dirent *e;
  int ret = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_report_file(e->d_name)) continue;
    ret = seterr(err, errlen, "--out '%s': holds '%s', which is not part of a report; refusing to replace "
                 "the folder (give an empty or new one)", out, e->d_name);
    break;
  }
  closedir(d);
  *exists = 1;
  return ret;
}

/* Puts the finished tmp folder at out: an atomic exchange when out exists (the old report then
 * sits at tmp and is removed), a rename when not. */
static int install(const char *tmp, const char *out, int exists, char *err, size_t errlen) {
  if (!exists) {
    if (rename(tmp, out) == 0) return 0;
    return seterr(err, errlen, "--out '%s': cannot move the report into place: %s", out, strerror(errno));
  }
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_EXCHANGE) == 0) {
    remove_report_dir(tmp);
    return 0;
  }
  if (errno != EINVAL && errno != ENOSYS)
    return seterr(err, errlen, "--out '%s': cannot move the report into place: %s", out, strerror(errno));
  /* A file system without the exchange: the old folder aside, then the new one in. */
  char old[PATH_MAX + 32];
  if (snprintf(old, sizeof old, "%s.old-%ld", out, (long)getpid()) >= (int)sizeof old || rename(out, old) != 0)
    return seterr(err, errlen, "--out '%s': cannot move the old report aside: %s", out, strerror(errno));
  if (rename(tmp, out) != 0) {
    int e = errno;
    rename(old, out);
    return seterr(err, errlen, "--out '%s': cannot move the report into place: %s", out, strerror(e));
  }
  remove_report_dir(old);
  return 0;
}

static FILE *create_in(const char *dir, const char *name, char *err, size_t errlen) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) {
    seterr(err, errlen, "cannot write '%s/%s': the path is longer than %d bytes", dir, name, PATH_MAX - 1);
    return NULL;
  }
  FILE *f = fopen(p, "w");
  if (!f) seterr(err, errlen, "cannot write '%s': %s", p, strerror(errno));
  return f;
}

/* Closes f, turning a write error (disk full ...) into a message naming the file. */
static int finish_file(FILE *f, const char *dir, const char *name, char *err, size_t errlen) {
  int bad = ferror(f);
  int e = bad ? EIO : 0;
  if (fclose(f) != 0 && !bad) bad = 1, e = errno;
  if (bad) seterr(err, errlen, "cannot write '%s/%s': %s", dir, name, strerror(e ? e : EIO));
  return bad ? -1 : 0;
}

static void now_iso(char out[32]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  if (n && n + 6 <= 32) snprintf(out + n, 32 - n, ".%03dZ", (int)(ts.tv_nsec / 1000000) % 1000);
}

static void report_free(rp_report *r) {
  rp_baseline_free(&r->base);
  mdc_store_run_row_free(&r->run);
  for (int i = 0; i < RP_NCAT; i++) rp_list_free(&r->cat[i]);
  rp_list_free(&r->flaky);
  rp_list_free(&r->running);
  for (size_t i = 0; i < r->n_areas; i++) free(r->areas[i].name);
  free(r->areas);
  mdc_store_close(r->store);
}

/* Owns everything it opens; thread-safe for different out folders; on failure nothing is
 * left behind and out is as it was (report.h). */
int mdc_report_write(const mdc_report_opts *o, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!o || !o->db || !o->db[0]) return seterr(err, errlen, "no results store given"), MDC_REPORT_EINPUT;
  if (!o->out_dir || !o->out_dir[0]) return seterr(err, errlen, "no --out folder given"), MDC_REPORT_EINPUT;
  size_t ol = strlen(o->out_dir);
  if (ol + 32 >= PATH_MAX) return seterr(err, errlen, "--out '%.200s...': path too long", o->out_dir), MDC_REPORT_EINPUT;
  char out[PATH_MAX];
  snprintf(out, sizeof out, "%s", o->out_dir);
  while (ol > 1 && out[ol - 1] == '/') out[--ol] = 0; /* "dir/" names dir */
  rp_report r;
  memset(&r, 0, sizeof r);
  r.o = o;
  r.max_rows = o->max_rows ? o->max_rows : DEFAULT_MAX_ROWS;
  r.history = o->history ? o->history : DEFAULT_HISTORY;
  now_iso(r.generated_at);
  int code, exists;
  int rc = mdc_store_open_read(o->db, &r.store, err, errlen);
  if (rc != 0) return store_code(rc);
  if ((code = find_run(r.store, o->db, o->run, &r.run, err, errlen)) != MDC_REPORT_OK) goto done;
  if ((code = choose_baseline(&r, o->baseline, err, errlen)) != MDC_REPORT_OK) goto done;
  code = MDC_REPORT_EINPUT;
  if (check_out(out, &exists, err, errlen) != 0) goto done;
  if (mkdir_parent(out) != 0) {
    seterr(err, errlen, "--out '%s': cannot create its parent folder: %s", out, strerror(errno));
    goto done;
  }
  /* The new report is built beside out (same file system, so the rename is atomic). */
  char tmp[PATH_MAX + 32];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out) >= (int)sizeof tmp || !mkdtemp(tmp)) {
    seterr(err, errlen, "--out '%s': cannot create a folder beside it: %s", out, strerror(errno));
    goto done;
  }
  chmod(tmp, 0755); /* mkdtemp's 0700 would keep a web server from serving the report */
  FILE *junit = NULL, *html = NULL, *md = NULL;
  int written = 0;
  if (!(junit = create_in(tmp, "junit.xml", err, errlen)) || !(html = create_in(tmp, "index.html", err, errlen)) ||
      !(md = create_in(tmp, "summary.md", err, errlen)))
    goto cleanup;
  if (mdc_store_run_counts(r.store, r.run.id, r.counts) != 0) {
    seterr(err, errlen, "%s", mdc_store_error(r.store));
    code = MDC_REPORT_ESTORE;
    goto cleanup;
  }
  r.junit = junit;
  rp_junit_head(&r, junit);
  rc = rp_join(r.store, r.run.id, &r.base, on_pair, &r, err, errlen);
  r.junit = NULL;
  if (rc != 0) {
    if (rc > 0 || !err || !err[0]) seterr(err, errlen, "out of memory while reading the cases");
    code = MDC_REPORT_ESTORE;
    goto cleanup;
  }
  rp_junit_tail(junit);
  if (rp_write_html(&r, html) != 0 || rp_write_summary(&r, md) != 0) {
    seterr(err, errlen, "%s", r.err);
    code = MDC_REPORT_ESTORE;
    goto cleanup;
  }
  written = 1;
cleanup:;
  /* Every file is closed (and its write errors seen) before the folder is moved. */
  FILE *files[] = {junit, html, md};
  for (size_t i = 0; i < 3; i++) {
    if (!files[i]) continue;
    if (finish_file(files[i], tmp, report_files[i == 0 ? 2 : i == 1 ? 0 : 1], written ? err : NULL,
                    written ? errlen : 0) != 0 && written) {
      written = 0;
      code = MDC_REPORT_EINPUT;
    }
  }
  if (written && install(tmp, out, exists, err, errlen) == 0) {
    if (err && errlen) snprintf(err, errlen, "%s/index.html", out);
    code = MDC_REPORT_OK;
  } else {
    remove_report_dir(tmp);
  }
done:
  report_free(&r);
  return code;
}
