/* replay_out.c - what `mdc replay` prints at the end: the summary and the --json object. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mdc/store.h"
#include "md/config.h"
#include "md/status.h"
#include "mdc_int.h"
#include "replay_int.h"
#include "colour.h"

/* Every non-passing case, one by one (--summary cases), those counted on a line left out. */
static void cases_one_by_one(FILE *f, const mdc_cli__run *run) {
  int header = 0;
  for (size_t i = 0; i < run->n; i++) {
    const mdc_cli__case *c = &run->cases[i];
    if (!mdc_cli__status_grouped(c->status)) continue;
    if (!header) fprintf(f, "\n  not passing:\n"), header = 1;
    char name[256], msg[2048];
    mdc_cli__terminal_safe(c->name, name, sizeof name);
    mdc_cli__terminal_safe(c->res.message[0] ? c->res.message : "-", msg, sizeof msg);
    fprintf(f, "  ");
    mdc_cli__status_print(f, mdc_cli__colour_on(f), c->status, 14, mdc_cli__status_name(c->status));
    fprintf(f, " %s: %s\n", name, msg);
    if (c->res.driver_message[0] && !strstr(c->res.message, c->res.driver_message)) {
      mdc_cli__terminal_safe(c->res.driver_message, msg, sizeof msg);
      fprintf(f, "  %-14s the driver said: %s\n", "", msg);
    }
    if (c->res.rule[0]) {
      mdc_cli__terminal_safe(c->res.rule, msg, sizeof msg);
      fprintf(f, "  %-14s rules: %s\n", "", msg);
    }
  }
}

/* NotSupported and Warn: one line each, never among the failures. */
static void counted_lines(FILE *f, const mdc_cli__run *run) {
  static const struct { mdc_status s; const char *why; } lines[] = {
      {MDC_S_NOT_SUPPORTED, "the driver lacks what these traces require"},
      {MDC_S_WARN, "traces that are not must-pass failed: choices the contract leaves open"},
      {MDC_S_SKIPPED, "listed in --skips: never run"}};
  int first = 1;
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    uint32_t n = run->count[lines[i].s];
    if (!n) continue;
    fprintf(f, "%s  %s: %u case%s (%s)\n", first ? "\n" : "", mdc_cli__status_name(lines[i].s), n, n == 1 ? "" : "s",
            lines[i].why);
    first = 0;
  }
}

/* The driver's part of a crash's stack: from its first frame of the driver's own, at most max
 * lines. */
static void driver_frames(FILE *f, const char *stack, int max) {
  char top[400], where[200];
  if (mdc_cli__stack_top(stack, 1, top, sizeof top, where, sizeof where) <= 0) return;
  char needle[420];
  snprintf(needle, sizeof needle, " %s+0x", top);
  const char *p = strstr(stack, needle);
  if (!p) snprintf(needle, sizeof needle, "(%s", top), p = strstr(stack, needle);
  while (p && p > stack && p[-1] != '\n') p--;
  for (int k = 0; p && *p && k < max; k++) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    char line[1200], safe[1400];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
    mdc_cli__terminal_safe(line, safe, sizeof safe);
    fprintf(f, "        %s\n", safe);
    p = eol ? eol + 1 : NULL;
  }
}

/* The causes (--summary groups, the default): the groups with an unexpected case first, then
 * largest first; each with its count, its signature, a crash's frames and its first cases. */
static void causes(FILE *f, const mdc_cli__run *run) {
  mdc_cli__groups_t g;
  if (mdc_cli__groups(run, &g) != 0) {
    cases_one_by_one(f, run);
    return;
  }
  if (g.n)
    fprintf(f, "\n  %zu cause%s of %zu non-passing case%s, largest first (--summary cases: case by case):\n", g.n,
            g.n == 1 ? "" : "s", g.cases, g.cases == 1 ? "" : "s");
  int colour = mdc_cli__colour_on(f);
  for (size_t i = 0; i < g.n; i++) {
    const mdc_cli__group *x = &g.v[i];
    const mdc_cli__case *c0 = &run->cases[g.order[x->first]];
    char sig[1024], name[256];
    mdc_cli__terminal_safe(x->signature, sig, sizeof sig);
    fprintf(f, "\n  %5zu  ", x->n);
    mdc_cli__status_print(f, colour, c0->status, 0, sig);
    fprintf(f, "\n");
    /* The statuses, when the group is not all of its signature's kind ("Fail: ..." all Fail). */
    size_t kinds = 0, same = 0;
    for (int s = 0; s < MDC_S_COUNT; s++) {
      if (!x->counts[s]) continue;
      kinds++;
      const char *sn = mdc_cli__status_name((mdc_status)s);
      if (!strncmp(x->signature, sn, strlen(sn)) && x->signature[strlen(sn)] == ':') same = x->counts[s];
    }
    if (kinds > 1 || same != x->n) {
      fprintf(f, "        statuses:");
      for (int s = 0, k = 0; s < MDC_S_COUNT; s++)
        if (x->counts[s]) fprintf(f, "%s %s %u", k++ ? "," : "", mdc_cli__status_name((mdc_status)s), x->counts[s]);
      fprintf(f, "\n");
    }
    if (c0->stack) driver_frames(f, c0->stack, 4);
    fprintf(f, "        cases:");
    size_t shown = x->n < 3 ? x->n : 3;
    for (size_t k = 0; k < shown; k++) {
      mdc_cli__terminal_safe(run->cases[g.order[x->first + k]].name, name, sizeof name);
      fprintf(f, "%s %s", k ? "," : "", name);
    }
    if (x->n > shown) fprintf(f, " and %zu more", x->n - shown);
    fprintf(f, "\n");
  }
  mdc_cli__groups_free(&g);
}

void mdc_cli__rp_summary(FILE *f, const mdc_cli__replay_opts *o, const mdc_cli__run *run) {
  fprintf(f, "mdc replay: %zu case%s in %.2f s, driver %s %s, backend %s", run->n, run->n == 1 ? "" : "s",
          run->duration_s, run->driver_name, run->driver_version, run->backend);
  if (o->shard_n > 1) fprintf(f, ", shard %u/%u", o->shard_i, o->shard_n);
  if (run->left_out) fprintf(f, ", %zu trace%s left out by --include/--exclude", run->left_out, run->left_out == 1 ? "" : "s");
  if (run->driver_file[0]) /* the build judged (driver_id.c) */
    fprintf(f, "\n  driver build: %s, build-id %s, sha256 %.16s", run->driver_file,
            run->driver_build_id[0] ? run->driver_build_id : "(none)", run->driver_sha256[0] ? run->driver_sha256 : "-");
  if (o->db) fprintf(f, "\n  results: %s (run %s)", o->db, run->uuid);
  fprintf(f, "\n\n  %-16s %5s\n", "status", "cases");
  for (int s = 0; s < MDC_S_COUNT; s++)
    if (run->count[s]) {
      fprintf(f, "  ");
      mdc_cli__status_print(f, mdc_cli__colour_on(f), (mdc_status)s, 16, mdc_cli__status_name((mdc_status)s));
      fprintf(f, " %5u\n", run->count[s]);
    }
  if (o->summary == MDC_CLI_SUMMARY_CASES) cases_one_by_one(f, run);
  else if (o->summary == MDC_CLI_SUMMARY_GROUPS) causes(f, run);
  if (o->summary != MDC_CLI_SUMMARY_NONE) counted_lines(f, run);
  /* SPEC 8.11: messages are advice; what they missed is listed, and judges nothing. */
  size_t advisories = 0;
  for (size_t i = 0; i < run->n; i++) advisories += run->cases[i].res.advisory[0] != 0;
  if (advisories) {
    fprintf(f, "\n  advisory (messages that lack what the trace expects; not judged, SPEC 8.11):\n");
    for (size_t i = 0; i < run->n; i++) {
      const mdc_cli__case *c = &run->cases[i];
      if (!c->res.advisory[0]) continue;
      char name[256], msg[1024];
      mdc_cli__terminal_safe(c->name, name, sizeof name);
      mdc_cli__terminal_safe(c->res.advisory, msg, sizeof msg);
      fprintf(f, "  %s: %s\n", name, msg);
    }
  }
  if (run->interrupted_by)
    fprintf(f, "\nINTERRUPTED by SIG%s: %zu running case%s killed and marked Interrupted in the store; cases not "
               "started are not counted\n", sigabbrev_np(run->interrupted_by) ? sigabbrev_np(run->interrupted_by) : "?",
            run->stopped_running, run->stopped_running == 1 ? "" : "s");
  fprintf(f, "\n%s: %u unexpected\n", run->unexpected ? "FAILED" : "OK", run->unexpected);
}

/* A stack as an array of its frames (one a line). */
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

/* The causes as JSON, in the summary's order: signature, count, statuses, every case's name. */
static json_t *groups_json(const mdc_cli__run *run) {
  json_t *a = json_array();
  mdc_cli__groups_t g;
  if (mdc_cli__groups(run, &g) != 0) return a;
  for (size_t i = 0; i < g.n; i++) {
    const mdc_cli__group *x = &g.v[i];
    json_t *st = json_object(), *names = json_array();
    for (int s = 0; s < MDC_S_COUNT; s++)
      if (x->counts[s]) json_object_set_new(st, mdc_cli__status_name((mdc_status)s), json_integer(x->counts[s]));
    for (size_t k = 0; k < x->n; k++) json_array_append_new(names, json_string(run->cases[g.order[x->first + k]].name));
    json_array_append_new(a, json_pack("{s:s,s:I,s:o,s:o}", "signature", x->signature, "count", (json_int_t)x->n,
                                       "statuses", st, "cases", names));
  }
  mdc_cli__groups_free(&g);
  return a;
}

void mdc_cli__rp_print_json(const mdc_cli__replay_opts *o, const mdc_cli__run *run, int store_ok) {
  json_t *res = json_array();
  for (size_t i = 0; i < run->n; i++) {
    const mdc_cli__case *c = &run->cases[i];
    json_t *j = json_pack("{s:s,s:s,s:s,s:f,s:s,s:i}", "name", c->name, "path", c->path, "status",
                          mdc_cli__status_name(c->status), "duration_s", c->duration_s, "message",
                          c->res.message, "line", (int)c->res.line);
    if (c->res.expected[0]) json_object_set_new(j, "expected", json_string(c->res.expected));
    if (c->res.actual[0]) json_object_set_new(j, "actual", json_string(c->res.actual));
    if (c->res.event[0]) json_object_set_new(j, "event", json_string(c->res.event));
    if (c->res.rule[0]) json_object_set_new(j, "rule", json_string(c->res.rule));
    if (c->res.driver_message[0]) json_object_set_new(j, "driver_message", json_string(c->res.driver_message));
    if (c->res.advisory[0]) json_object_set_new(j, "advisory", json_string(c->res.advisory));
    if (c->preceded_by[0]) json_object_set_new(j, "preceded_by", json_string(c->preceded_by));
    if (mdc_cli__rp_signature(c)) json_object_set_new(j, "signature", json_string(mdc_cli__rp_signature(c)));
    if (c->stack) json_object_set_new(j, "stack", stack_json(c->stack));
    json_array_append_new(res, j);
  }
  const uint32_t *k = run->count;
  json_t *j = json_pack(
      "{s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:o,s:o,s:s,s:s,s:s,s:s,s:o}", "cases",
      (json_int_t)run->n, "passed", (int)k[MDC_S_PASS], "failed", (int)k[MDC_S_FAIL], "crashed",
      (int)k[MDC_S_CRASH], "timed_out", (int)k[MDC_S_TIMEOUT], "unexpected", (int)run->unexpected,
      "not_supported", (int)k[MDC_S_NOT_SUPPORTED], "trace_errors", (int)k[MDC_S_TRACE_ERROR],
      "flaky", (int)k[MDC_S_FLAKE], "warned", (int)k[MDC_S_WARN], "expected_fail", (int)k[MDC_S_EXPECTED_FAIL], "unexpected_pass",
      (int)k[MDC_S_UNEXPECTED_PASS], "duration_s", run->duration_s, "db",
      o->db ? json_string(o->db) : json_null(), "run_uuid",
      o->db && store_ok && run->uuid[0] ? json_string(run->uuid) : json_null(), "driver",
      run->driver_name, "driver_version", run->driver_version, "backend", run->backend, "config",
      o->config, "results", res);
  /* The build judged and the selection ran (issue 27); null when not known. */
  const char *idv[][2] = {{"driver_file", run->driver_file}, {"driver_build_id", run->driver_build_id},
                          {"driver_sha256", run->driver_sha256}, {"selection", run->selection}};
  for (size_t i = 0; i < sizeof idv / sizeof idv[0]; i++)
    json_object_set_new(j, idv[i][0], idv[i][1][0] ? json_string(idv[i][1]) : json_null());
  json_object_set_new(j, "selection_n", json_integer(run->selection_n));
  json_object_set_new(j, "groups", groups_json(run)); /* the causes, largest first (issue 26) */
  json_object_set_new(j, "skipped", json_integer(run->count[MDC_S_SKIPPED]));
  if (o->diff_a) json_object_set_new(j, "differential", json_pack("[s,s]", o->diff_a, o->diff_b));
  /* Grouped replay: cases per child, children started, --shuffle's seed (as text: 64 bits). */
  json_object_set_new(j, "group_size", json_integer((json_int_t)run->group_size));
  json_object_set_new(j, "children", json_integer((json_int_t)run->children));
  if (o->has_shuffle_seed) {
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, o->shuffle_seed);
    json_object_set_new(j, "shuffle_seed", json_string(seed));
  }
  if (o->shard_n > 1) json_object_set_new(j, "shard", json_pack("[i,i]", (int)o->shard_i, (int)o->shard_n));
  if (o->n_include || o->n_exclude) json_object_set_new(j, "left_out", json_integer((json_int_t)run->left_out));
  /* Peak resident sets: this process (the runner) and the largest child (a case). */
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  json_object_set_new(j, "max_rss_kb", json_pack("{s:I,s:I}", "runner", (json_int_t)self.ru_maxrss,
                                                 "largest_case", (json_int_t)kids.ru_maxrss));
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
  json_decref(j);
  if (s) {
    puts(s);
    free(s);
  }
  fflush(stdout);
}
