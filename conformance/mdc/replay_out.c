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

void mdc_cli__rp_summary(FILE *f, const mdc_cli__replay_opts *o, const mdc_cli__run *run) {
  fprintf(f, "mdc replay: %zu case%s in %.2f s, driver %s %s, backend %s", run->n, run->n == 1 ? "" : "s",
          run->duration_s, run->driver_name, run->driver_version, run->backend);
  if (o->shard_n > 1) fprintf(f, ", shard %u/%u", o->shard_i, o->shard_n);
  if (run->left_out) fprintf(f, ", %zu trace%s left out by --include/--exclude", run->left_out, run->left_out == 1 ? "" : "s");
  if (o->db) fprintf(f, "\n  results: %s (run %s)", o->db, run->uuid);
  fprintf(f, "\n\n  %-16s %5s\n", "status", "cases");
  for (int s = 0; s < MDC_S_COUNT; s++)
    if (run->count[s]) fprintf(f, "  %-16s %5u\n", mdc_cli__status_name((mdc_status)s), run->count[s]);
  int header = 0;
  for (size_t i = 0; i < run->n; i++) {
    const mdc_cli__case *c = &run->cases[i];
    if (c->status == MDC_S_PASS) continue;
    if (!header) fprintf(f, "\n  not passing:\n"), header = 1;
    char name[256], msg[2048];
    mdc_cli__terminal_safe(c->name, name, sizeof name);
    mdc_cli__terminal_safe(c->res.message[0] ? c->res.message : "-", msg, sizeof msg);
    fprintf(f, "  %-14s %s: %s\n", mdc_cli__status_name(c->status), name, msg);
    if (c->res.driver_message[0] && !strstr(c->res.message, c->res.driver_message)) {
      mdc_cli__terminal_safe(c->res.driver_message, msg, sizeof msg);
      fprintf(f, "  %-14s the driver said: %s\n", "", msg);
    }
    if (c->res.rule[0]) {
      mdc_cli__terminal_safe(c->res.rule, msg, sizeof msg);
      fprintf(f, "  %-14s rules: %s\n", "", msg);
    }
  }
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
  if (o->diff_a) json_object_set_new(j, "differential", json_pack("[s,s]", o->diff_a, o->diff_b));
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
