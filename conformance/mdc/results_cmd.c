/* results_cmd.c - `mdc results`: a stored run's verdicts on the terminal (or as JSON), without
 * sqlite3 — the run's header, its counts per status and its cases, worst first. `mdc report`
 * makes the full page; this is the quick look. Reads the store read-only (mdc/store.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdc/store.h"
#include "mdc_int.h"
#include "colour.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc results [--db FILE] [--run UUID|latest] [--all|--groups] [--json]\n"
          "       mdc results [--db FILE] --list\n"
          "Shows a stored run: its header, its counts per status and its cases that did not pass\n"
          "(worst first), or every case with --all; --list shows the runs the store holds.\n\n"
          "  --db FILE   results store (default results/mdc.db); read only, never changed\n"
          "  --run REF   a run uuid, a unique prefix of one (4+ characters), or latest (default)\n"
          "  --all       every case, not only those that did not pass\n"
          "  --groups    the causes instead of the cases: cases failing for one reason (one\n"
          "              signature) as one line, largest first, with their count and first cases\n"
          "  --list      the runs, newest last: uuid, kind, start, driver, backend, counts\n"
          "  --json      one JSON object on stdout\n\n"
          "exit status: 0 shown, 2 bad usage, a missing or empty store or an unknown run,\n"
          "3 results store error\n");
}

/* A row's text for the terminal: control characters escaped, NULL as "-". */
static const char *safe(const char *s, char *buf, size_t len) {
  mdc_cli__terminal_safe(s ? s : "-", buf, len);
  return buf;
}

/* A stack's frames, one a line, at most max. */
static void print_stack(const char *stack, int max) {
  char b[1400];
  int k = 0;
  for (const char *p = stack; p && *p && k < max; k++) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    char line[1200];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
    printf("  %-14s %s\n", k ? "" : "stack:", safe(line, b, sizeof b));
    p = eol ? eol + 1 : NULL;
  }
}

static json_t *stack_json(const char *stack) {
  json_t *a = json_array();
  for (const char *p = stack; p && *p;) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    json_array_append_new(a, json_stringn(p, n));
    p = eol ? eol + 1 : NULL;
  }
  return a;
}

typedef struct group_ctx {
  uint32_t n;
} group_ctx;

/* One cause on the terminal: count and signature, statuses, its first cases. */
static int print_group(void *ctx, const mdc_case_group *g) {
  group_ctx *gc = ctx;
  char b[2048];
  if (!gc->n++) printf("  %u cause%s, largest first:\n", g->n_total, g->n_total == 1 ? "" : "s");
  printf("\n  %5u  %s\n", g->count, safe(g->signature, b, sizeof b));
  int kinds = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) kinds += g->counts[i] != 0;
  if (kinds > 1) {
    printf("        statuses:");
    for (int i = 0, k = 0; i < MDC_CS_COUNT; i++)
      if (g->counts[i]) printf("%s %s %u", k++ ? "," : "", mdc_store_status_name((mdc_case_status)i), g->counts[i]);
    printf("\n");
  }
  printf("        cases:");
  for (uint32_t i = 0; i < g->n_names; i++) printf("%s %s", i ? "," : "", safe(g->names[i], b, sizeof b));
  if (g->count > g->n_names) printf(" and %u more", g->count - g->n_names);
  printf("\n");
  if (g->reduced) printf("        reduced: %s\n", safe(g->reduced, b, sizeof b));
  return 0;
}

static int group_json(void *ctx, const mdc_case_group *g) {
  json_t *st = json_object(), *names = json_array();
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (g->counts[i]) json_object_set_new(st, mdc_store_status_name((mdc_case_status)i), json_integer(g->counts[i]));
  for (uint32_t i = 0; i < g->n_names; i++) json_array_append_new(names, json_string(g->names[i]));
  json_array_append_new(ctx, json_pack("{s:s,s:i,s:o,s:o,s:s?}", "signature", g->signature, "count", (int)g->count,
                                       "statuses", st, "cases", names, "reduced", g->reduced));
  return 0;
}

typedef struct list_ctx {
  mdc_store *s;
  json_t *arr;   /* --json */
  int failed;
} list_ctx;

static int list_one(void *arg, const mdc_run_row *r) {
  list_ctx *l = arg;
  uint32_t k[MDC_CS_COUNT];
  if (mdc_store_run_counts(l->s, r->id, k) != 0) {
    l->failed = 1;
    return 1;
  }
  uint32_t cases = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) cases += k[i];
  if (l->arr) {
    json_array_append_new(l->arr, json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:i,s:i,s:i,s:b}", "uuid", r->uuid, "kind", r->kind,
                                            "started_at", r->started_at, "driver", r->driver_name, "backend",
                                            r->backend, "cases", (int)cases, "passed", (int)k[MDC_CS_PASS],
                                            "unexpected", (int)mdc_store_unexpected_of(k), "interrupted",
                                            r->interrupted));
    return 0;
  }
  char a[64], b[128], c[64];
  printf("%s  %-8s %s  %-24s %-6s %5u cases %5u pass %4u unexpected%s%s\n", r->uuid, r->kind, r->started_at,
         safe(r->driver_name, b, sizeof b), safe(r->backend, c, sizeof c), cases, k[MDC_CS_PASS],
         mdc_store_unexpected_of(k), r->interrupted ? "  INTERRUPTED" : "", r->ended_at ? "" : "  (never ended)");
  (void)a;
  return 0;
}

/* --list: the runs of the store, oldest first (or as JSON). Closes s. */
static int list_runs(mdc_store *s, const char *db, int json) {
  int code = MDC_EXIT_OK;
  list_ctx l = {.s = s, .arr = json ? json_array() : NULL};
  if (mdc_store_runs_each(s, NULL, list_one, &l) < 0 || l.failed) {
    fprintf(stderr, "mdc results: %s\n", mdc_store_error(s));
    code = MDC_EXIT_STORE;
  } else if (json) {
    json_t *j = json_pack("{s:s,s:o}", "db", db, "runs", l.arr);
    l.arr = NULL;
    char *t = json_dumps(j, JSON_INDENT(2));
    if (t) puts(t);
    free(t);
    json_decref(j);
  }
  json_decref(l.arr);
  mdc_store_close(s);
  return code;
}

/* The run's header and its counts per status, on the terminal. */
static void print_header(const mdc_run_row *run, const uint32_t *k, uint32_t cases, int colour) {
  char b1[256], b2[256], b3[2048];
  printf("run %s (%s) started %s, %s%s\n", run->uuid, run->kind, run->started_at,
         run->interrupted ? "INTERRUPTED" : run->ended_at ? "ended" : "never ended (killed?)",
         run->duration_s >= 0 ? "" : "");
  printf("  driver %s %s", safe(run->driver_name, b1, sizeof b1), safe(run->driver_version, b2, sizeof b2));
  printf(", backend %s, device %s", safe(run->backend, b1, sizeof b1), safe(run->device, b2, sizeof b2));
  printf(", config \"%s\"\n", safe(run->config, b3, sizeof b3));
  /* The build judged (issue 27): the file, its build-id and SHA-256, as the run recorded them. */
  printf("  driver file %s, build-id %s, sha256 %s\n", safe(run->driver_path, b1, sizeof b1),
         run->driver_build_id ? run->driver_build_id : "(not recorded)", run->driver_sha256 ? run->driver_sha256 : "(not recorded)");
  if (run->selection) printf("  selection %.16s (%u traces)\n", run->selection, run->selection_n);
  printf("  host %s, revision %s", safe(run->host, b1, sizeof b1), safe(run->revision, b2, sizeof b2));
  if (run->shard_count > 1) printf(", shard %u/%u", run->shard_index, run->shard_count);
  if (run->duration_s >= 0) printf(", %.2f s", run->duration_s);
  printf("\n\n  %-16s %6s\n", "status", "cases");
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (k[i]) {
      printf("  ");
      mdc_cli__status_print(stdout, colour, (mdc_status)i, 16, mdc_store_status_name((mdc_case_status)i));
      printf(" %6u%s\n", k[i], mdc_store_status_unexpected((mdc_case_status)i) ? "  (unexpected)" : "");
    }
  printf("  %-16s %6u\n\n", "total", cases);
}

/* One case of --json. */
static json_t *case_json(const mdc_case_row *row) {
  json_t *o = json_pack("{s:s,s:s,s:s?,s:f}", "name", row->name, "status", row->status, "path", row->path,
                        "duration_s", row->duration_s);
  if (row->line) json_object_set_new(o, "line", json_integer(row->line));
  const char *fields[][2] = {{"message", row->message}, {"expected", row->expected}, {"actual", row->actual},
                             {"event", row->event}, {"rule", row->rule}, {"driver_message", row->driver_message},
                             {"advisory", row->advisory}, {"signature", row->signature}};
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
    if (fields[f][1] && fields[f][1][0]) json_object_set_new(o, fields[f][0], json_string(fields[f][1]));
  if (row->stack && row->stack[0]) json_object_set_new(o, "stack", stack_json(row->stack));
  return o;
}

/* One case on the terminal: its status, name, message, the driver's message, rules, stack. */
static void print_case(const mdc_case_row *row, int colour) {
  char b1[256], b3[2048];
  int st = mdc_store_status_parse(row->status);
  printf("  ");
  if (st >= 0) mdc_cli__status_print(stdout, colour, (mdc_status)st, 14, row->status);
  else printf("%-14s", row->status);
  printf(" %s\n", safe(row->name, b1, sizeof b1));
  if (row->message && row->message[0]) printf("  %-14s %s\n", "", safe(row->message, b3, sizeof b3));
  if (row->driver_message && row->driver_message[0] && !(row->message && strstr(row->message, row->driver_message)))
    printf("  %-14s the driver said: %s\n", "", safe(row->driver_message, b3, sizeof b3));
  if (row->rule && row->rule[0] && strcmp(row->status, "Pass") != 0)
    printf("  %-14s rules: %s\n", "", safe(row->rule, b3, sizeof b3));
  if (row->advisory && row->advisory[0]) printf("  %-14s advisory: %s\n", "", safe(row->advisory, b3, sizeof b3));
  if (row->stack && row->stack[0]) print_stack(row->stack, 8);
}

int mdc_cli__cmd_results(int argc, char **argv) {
  static const struct option opts[] = {{"db", required_argument, 0, 'd'}, {"run", required_argument, 0, 'r'},
                                       {"all", no_argument, 0, 'a'},      {"list", no_argument, 0, 'l'},
                                       {"json", no_argument, 0, 'J'},     {"help", no_argument, 0, 'h'},
                                       {"groups", no_argument, 0, 'g'},
                                       {0, 0, 0, 0}};
  const char *db = "results/mdc.db", *ref = "latest";
  int all = 0, list = 0, json = 0, groups = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': db = optarg; break;
      case 'r': ref = optarg; break;
      case 'a': all = 1; break;
      case 'g': groups = 1; break;
      case 'l': list = 1; break;
      case 'J': json = 1; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc results: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc results: unknown option '%s' (see mdc results --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mdc results: unexpected argument '%s'\n", argv[optind]);
    return MDC_EXIT_USAGE;
  }
  char err[1024];
  mdc_store *s = NULL;
  int rc = mdc_store_open_read(db, &s, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "mdc results: %s\n", err);
    return rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  }
  int code = MDC_EXIT_OK;
  if (list) return list_runs(s, db, json);
  mdc_run_row run;
  rc = mdc_store_run_find(s, ref, NULL, &run);
  if (rc != 0) {
    fprintf(stderr, "mdc results: %s\n", mdc_store_error(s));
    mdc_store_run_row_free(&run);
    mdc_store_close(s);
    return rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  }
  uint32_t k[MDC_CS_COUNT];
  mdc_case_query q = {.run_id = run.id, .order = MDC_CASES_WORST_FIRST, .not_passing = !all};
  mdc_case_iter *it = NULL;
  if (mdc_store_run_counts(s, run.id, k) != 0 || mdc_store_cases_open(s, &q, &it) != 0) {
    fprintf(stderr, "mdc results: %s\n", mdc_store_error(s));
    mdc_store_run_row_free(&run);
    mdc_store_close(s);
    return MDC_EXIT_STORE;
  }
  uint32_t cases = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) cases += k[i];
  json_t *jcases = json ? json_array() : NULL;
  int colour = !json && mdc_cli__colour_on(stdout);
  if (!json) print_header(&run, k, cases, colour);
  mdc_case_row row;
  int got = 0;
  uint32_t shown = 0;
  if (groups && !json) {
    /* The causes instead of the cases (NotSupported, Warn, Skipped on a line each). */
    group_ctx gc = {0};
    if (mdc_store_groups_each(s, run.id, 3, 0, print_group, &gc) < 0) got = -1;
    else if (!gc.n) printf("  no cause recorded%s\n", mdc_store_version(s) < 4 ? " (a store older than schema v4)" : "");
    const int line_of[] = {MDC_CS_NOT_SUPPORTED, MDC_CS_WARN, MDC_CS_SKIPPED};
    for (size_t i = 0; i < sizeof line_of / sizeof line_of[0]; i++)
      if (k[line_of[i]]) printf("%s  %s: %u case%s\n", i == 0 || !k[line_of[0]] ? "\n" : "",
                                mdc_store_status_name((mdc_case_status)line_of[i]), k[line_of[i]], k[line_of[i]] == 1 ? "" : "s");
    shown = 1;
  }
  while (!(groups && !json) && (got = mdc_store_cases_next(it, &row)) == 1) {
    shown++;
    if (json) json_array_append_new(jcases, case_json(&row));
    else print_case(&row, colour);
  }
  if (got < 0) {
    fprintf(stderr, "mdc results: %s\n", mdc_store_error(s));
    code = MDC_EXIT_STORE;
  }
  mdc_store_cases_close(it);
  if (json && code == MDC_EXIT_OK) {
    json_t *counts = json_object();
    for (int i = 0; i < MDC_CS_COUNT; i++)
      if (k[i]) json_object_set_new(counts, mdc_store_status_name((mdc_case_status)i), json_integer(k[i]));
    json_t *j = json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:b,s:i,s:i,s:o,s:o}", "db", db, "run_uuid",
                          run.uuid, "kind", run.kind, "started_at", run.started_at, "ended_at", run.ended_at,
                          "driver", run.driver_name, "driver_version", run.driver_version, "backend", run.backend,
                          "config", run.config, "interrupted", run.interrupted, "cases", (int)cases, "unexpected",
                          (int)mdc_store_unexpected_of(k), "counts", counts, "results", jcases);
    /* The build judged and the selection (null when not recorded). */
    const char *idv[][2] = {{"driver_path", run.driver_path}, {"driver_build_id", run.driver_build_id},
                            {"driver_sha256", run.driver_sha256}, {"selection", run.selection}};
    for (size_t i = 0; i < sizeof idv / sizeof idv[0]; i++)
      json_object_set_new(j, idv[i][0], idv[i][1] ? json_string(idv[i][1]) : json_null());
    if (run.selection) json_object_set_new(j, "selection_n", json_integer(run.selection_n));
    json_t *jg = json_array(); /* the causes, largest first (issue 26) */
    if (mdc_store_groups_each(s, run.id, 64, 0, group_json, jg) < 0) code = MDC_EXIT_STORE;
    json_object_set_new(j, "groups", jg);
    jcases = NULL;
    char *t = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    if (t) puts(t);
    free(t);
    json_decref(j);
  } else if (!json && !all && shown == 0) {
    printf("  every case passed\n");
  }
  json_decref(jcases);
  mdc_store_run_row_free(&run);
  mdc_store_close(s);
  return code;
}
