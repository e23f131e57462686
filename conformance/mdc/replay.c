/* replay.c - `mdc replay`: every trace is one case, replayed by the engine in a forked child
 * (which loads the driver, runs mdc_trace_run and writes its mdc_result to a pipe), so a driver
 * that crashes or hangs costs only that case. The parent runs up to --jobs children, enforces
 * the per-case deadline with poll() on the children's pipes (the timeout of poll is the nearest
 * deadline: no sleeping), writes every case to the results store before it runs and after it
 * ends, applies the baseline and the flake re-run, and prints progress, a summary and JSON.
 * SIGINT or SIGTERM stops the run: the running cases are killed and stay Running, the run is
 * marked interrupted, and the signal is raised again once the store is closed. */
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

/* The signal that asked the run to stop (0: none). Set by the handler, read by the loop. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) { stop_signal = sig; }

/* ---- the driver probe: load the driver and ask its capabilities, in a child ---------------- */

typedef struct probe_msg {
  int loaded, opened;
  char err[512];
  char name[64], version[64];
  md_capabilities caps;
} probe_msg;

/* 0 when the driver loaded (*m filled; m->opened says whether open_device worked); -1 with a
 * message in err when it could not be loaded or the probe crashed or hung. */
static int probe(const char *driver, const char *config, double timeout_s, probe_msg *m, char *err,
                 size_t errlen) {
  memset(m, 0, sizeof *m);
  mdc_cli__child ch;
  int in_parent = mdc_cli__child_start(&ch, sizeof *m, mdc_cli__now() + timeout_s);
  if (in_parent < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (!in_parent) {
    probe_msg r;
    memset(&r, 0, sizeof r);
    void *dl = NULL;
    const md_driver *d = mdc_driver_load(driver, &dl, r.err, sizeof r.err);
    if (d) {
      r.loaded = 1;
      snprintf(r.name, sizeof r.name, "%s", d->name ? d->name : "?");
      snprintf(r.version, sizeof r.version, "%s", d->version ? d->version : "?");
      md_device *dev = NULL;
      md_status st = d->open_device(config, &dev);
      if (st == MD_NONE && dev) {
        r.caps.struct_size = sizeof r.caps;
        if (d->get_capabilities(dev, &r.caps) == MD_NONE) r.opened = 1;
        else snprintf(r.err, sizeof r.err, "get_capabilities failed: %.400s", d->last_error(dev));
        d->close_device(dev);
      } else {
        snprintf(r.err, sizeof r.err, "open_device(\"%.200s\") returned %s: %.250s", config,
                 md_status_name(st), d->last_error(NULL));
      }
    }
    mdc_cli__child_report(&ch, &r, sizeof r);
    _exit(0);
  }
  while (!mdc_cli__child_step(&ch, mdc_cli__now())) {
    struct pollfd pf = {.fd = mdc_cli__child_poll_fd(&ch), .events = POLLIN};
    double left = ch.deadline - mdc_cli__now();
    int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
    int cap = mdc_cli__child_poll_ms(&ch);
    if (cap >= 0 && cap < ms) ms = cap;
    poll(&pf, 1, ms);
  }
  size_t got = mdc_cli__child_end(&ch, m, sizeof *m);
  if (ch.timed_out) {
    snprintf(err, errlen, "loading the driver and opening a device took more than %g s", timeout_s);
    return -1;
  }
  if (got != sizeof *m) {
    char why[160];
    mdc_cli__describe_exit(ch.status, why, sizeof why);
    snprintf(err, errlen, "the driver probe %s", why);
    return -1;
  }
  m->err[sizeof m->err - 1] = 0;
  if (!m->loaded) {
    snprintf(err, errlen, "%s", m->err);
    return -1;
  }
  return 0;
}

/* ---- cases in children ---------------------------------------------------------------------- */

typedef struct slot {
  size_t ci;       /* case index */
  mdc_cli__child ch;
  mdc_result res;
} slot;

static int start_case(const mdc_cli__replay_opts *o, mdc_cli__case *c, size_t ci, slot *s) {
  memset(s, 0, sizeof *s);
  s->ci = ci;
  int in_parent = mdc_cli__child_start(&s->ch, sizeof s->res, mdc_cli__now() + o->timeout_s);
  if (in_parent < 0) return -1;
  if (in_parent) return 0;
  if (o->silence_children) {
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
  }
  mdc_result r;
  memset(&r, 0, sizeof r);
  void *dl = NULL;
  char err[512];
  const md_driver *d = mdc_driver_load(o->driver, &dl, err, sizeof err);
  if (!d) {
    r.verdict = MDC_FAIL;
    snprintf(r.message, sizeof r.message, "driver: %s", err);
  } else {
    mdc_trace_opts to = {.config = o->config, .line = &s->ch.page->line, .op = s->ch.page->op,
                         .op_len = sizeof s->ch.page->op, .verbose = o->verbose ? stderr : NULL,
                         .strict_messages = o->strict_messages};
    if (o->diff_a)
      mdc_cli__differential(d, c->path, &to, o->diff_a, o->diff_b, &r);
    else
      mdc_trace_run_opts(d, c->path, &to, &r);
  }
  mdc_cli__child_report(&s->ch, &r, sizeof r);
  _exit(0);
}

/* The child ended, or ran out of time: kill its group, reap it and say what happened. A crash
 * or a timeout names the event that was running (the child's progress page). */
static mdc_status finish_case(slot *s, double timeout_s, mdc_result *r) {
  size_t got = mdc_cli__child_end(&s->ch, &s->res, sizeof s->res);
  memset(r, 0, sizeof *r);
  char where[128] = "";
  if (s->ch.line)
    snprintf(where, sizeof where, " at line %u (%s)", s->ch.line, s->ch.op[0] ? s->ch.op : "?");
  if (s->ch.timed_out) {
    r->verdict = MDC_FAIL;
    r->line = s->ch.line;
    snprintf(r->event, sizeof r->event, "%s", s->ch.op);
    snprintf(r->message, sizeof r->message, "no result after %g s%s: killed", timeout_s, where);
    return MDC_S_TIMEOUT;
  }
  int st = s->ch.status;
  if (got == sizeof s->res && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    *r = s->res;
    r->message[sizeof r->message - 1] = r->expected[sizeof r->expected - 1] = r->actual[sizeof r->actual - 1] = 0;
    r->event[sizeof r->event - 1] = r->rule[sizeof r->rule - 1] = r->driver_message[sizeof r->driver_message - 1] = 0;
    switch (r->verdict) {
      case MDC_PASS: return MDC_S_PASS;
      case MDC_NOT_SUPPORTED: return MDC_S_NOT_SUPPORTED;
      case MDC_TRACE_ERROR: return MDC_S_TRACE_ERROR;
      default: return MDC_S_FAIL;
    }
  }
  r->verdict = MDC_FAIL;
  r->line = s->ch.line;
  snprintf(r->event, sizeof r->event, "%s", s->ch.op);
  char why[160];
  mdc_cli__describe_exit(st, why, sizeof why);
  snprintf(r->message, sizeof r->message, "%s%s", why, where);
  return MDC_S_CRASH;
}

/* ---- output --------------------------------------------------------------------------------- */

static void progress(const mdc_cli__run *run, size_t done, const char *current, int on) {
  if (!on) return;
  char safe[256];
  mdc_cli__terminal_safe(current, safe, sizeof safe);
  current = safe;
  fprintf(stderr, "\r[%*zu/%zu] pass %u fail %u crash %u timeout %u other %u  current: %.60s\033[K",
          run->n >= 100 ? 3 : 2, done, run->n, run->count[MDC_S_PASS] + run->count[MDC_S_FLAKE],
          run->count[MDC_S_FAIL] + run->count[MDC_S_UNEXPECTED_PASS], run->count[MDC_S_CRASH],
          run->count[MDC_S_TIMEOUT],
          run->count[MDC_S_NOT_SUPPORTED] + run->count[MDC_S_TRACE_ERROR] + run->count[MDC_S_EXPECTED_FAIL],
          current ? current : "");
  fflush(stderr);
}

static void summary(FILE *f, const mdc_cli__replay_opts *o, const mdc_cli__run *run) {
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

static void print_json(const mdc_cli__replay_opts *o, const mdc_cli__run *run, int store_ok) {
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

/* ---- the run -------------------------------------------------------------------------------- */

static void set_status(mdc_cli__run *run, mdc_cli__case *c, mdc_status s) {
  c->status = s;
  c->finished = 1;
  run->count[s]++;
  if (mdc_cli__status_unexpected(s)) run->unexpected++;
}

/* A trace that is not must-pass pins a decision SPEC leaves open (the reference driver's): its
 * failure is reported as Warn, not unexpected. */
static mdc_status not_must_pass(const mdc_cli__case *c, mdc_status st) {
  return st == MDC_S_FAIL && !c->must_pass ? MDC_S_WARN : st;
}

/* Completes a case's store row with its final status and every column of its result; a store
 * that fails stops the run (*store_ok = 0), keeping what was written. 1 when written. */
static int store_case(mdc_store *store, int *store_ok, const mdc_cli__case *c, mdc_status final,
                      const char *who, int tty) {
  if (!store || !*store_ok || c->case_id < 0) return 0;
  const mdc_result *r = &c->res;
  mdc_case_result cr = {.status = mdc_cli__status_name(final), .duration_s = c->duration_s,
                        .line = r->line, .message = r->message,
                        .expected = r->expected[0] ? r->expected : NULL,
                        .actual = r->actual[0] ? r->actual : NULL,
                        .event = r->event[0] ? r->event : NULL,
                        .rule = r->rule[0] ? r->rule : c->rules,
                        .driver_message = r->driver_message[0] ? r->driver_message : NULL,
                        .advisory = r->advisory[0] ? r->advisory : NULL};
  if (mdc_store_case_finish(store, c->case_id, &cr) == 0) return 1;
  fprintf(stderr, "%s%s: %s (stopping; results written so far are kept)\n", tty ? "\n" : "", who,
          mdc_store_error(store));
  *store_ok = 0;
  return 0;
}

/* ---- the steps of a run ------------------------------------------------------------------- */

/* Whether --include/--exclude select the trace named name. */
static int selected(const mdc_cli__replay_opts *o, const char *name) {
  int in = o->n_include == 0;
  for (uint32_t i = 0; i < o->n_include && !in; i++) in = fnmatch(o->include[i], name, 0) == 0;
  for (uint32_t i = 0; i < o->n_exclude && in; i++) in = fnmatch(o->exclude[i], name, 0) != 0;
  return in;
}

/* The cases: every trace named by its header, in path order, that --include/--exclude select;
 * the shard keeps its share. Takes the strings of *paths. A baseline entry that names no case
 * is warned about. 0, or -1. */
static int make_cases(const mdc_cli__replay_opts *o, const char *who, mdc_cli__paths *paths,
                      const mdc_cli__baseline *base, mdc_cli__run *run) {
  run->cases = calloc(paths->n ? paths->n : 1, sizeof *run->cases);
  if (!run->cases) {
    mdc_cli__paths_free(paths);
    return -1;
  }
  for (size_t i = 0; i < paths->n; i++) {
    mdc_trace_header h;
    char herr[256];
    const char *name = paths->v[i];
    int header_ok = mdc_trace_read_header(paths->v[i], &h, herr, sizeof herr) == 0;
    if (header_ok && h.name[0]) name = h.name;
    if (!selected(o, name)) {
      run->left_out++;
      free(paths->v[i]);
      continue;
    }
    if (o->shard_n > 1 && mdc_cli__shard_of(name, o->shard_n) != o->shard_i) {
      free(paths->v[i]);
      continue;
    }
    mdc_cli__case *c = &run->cases[run->n++];
    c->path = paths->v[i];
    c->rules = header_ok && h.rules[0] ? strdup(h.rules) : NULL;
    c->must_pass = !header_ok || h.must_pass;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->case_id = -1;
  }
  free(paths->v);
  paths->v = NULL;
  paths->n = 0;
  /* Filters that select nothing are a mistyped glob, not a green run. */
  if (run->left_out && run->n == 0 && o->shard_n <= 1) {
    fprintf(stderr, "%s: no trace is selected by --include/--exclude (%zu left out)\n", who, run->left_out);
    return -1;
  }
  /* A baseline entry that names no trace of this run is most likely a typo or a renamed trace:
   * say so (it is not an error: a shard runs part of the corpus). */
  for (size_t b = 0; b < base->n && o->shard_n <= 1 && !run->left_out && !o->quiet; b++) {
    int used = 0;
    for (size_t i = 0; i < run->n && !used; i++)
      used = strcmp(base->names[b], run->cases[i].name) == 0 || strcmp(base->names[b], run->cases[i].path) == 0;
    if (!used) {
      char safe[300];
      mdc_cli__terminal_safe(base->names[b], safe, sizeof safe);
      fprintf(stderr, "%s: warning: baseline %s lists '%s', which no trace of this run is named\n", who,
              o->baseline, safe);
    }
  }
  return 0;
}

/* Loads the driver and opens a device with --config (and each --differential backend) in a
 * child, filling the run's driver, backend and device. A driver that cannot do so would fail
 * every case the same way: a usage error, named, before anything runs. MDC_EXIT_OK or _USAGE. */
static int probe_driver(const mdc_cli__replay_opts *o, const char *who, mdc_cli__run *run, probe_msg *pm) {
  char err[1024];
  if (probe(o->driver, o->config, o->timeout_s, pm, err, sizeof err)) {
    fprintf(stderr, "%s: driver %s: %s\n", who, o->driver ? o->driver : "(reference)", err);
    return MDC_EXIT_USAGE;
  }
  snprintf(run->driver_name, sizeof run->driver_name, "%s", pm->name);
  snprintf(run->driver_version, sizeof run->driver_version, "%s", pm->version);
  snprintf(run->backend, sizeof run->backend, "%.31s", pm->opened ? pm->caps.backend : "unknown");
  snprintf(run->device, sizeof run->device, "%.63s", pm->opened ? pm->caps.device_name : "unknown");
  if (!pm->opened) {
    fprintf(stderr, "%s: --config '%s': the driver loaded but cannot open a device with it: %s\n", who,
            o->config, pm->err);
    return MDC_EXIT_USAGE;
  }
  for (int k = 0; o->diff_a && k < 2; k++) {
    const char *b = k ? o->diff_b : o->diff_a;
    char forced[64], merged[1024];
    probe_msg bm;
    snprintf(forced, sizeof forced, "backend=%s", b);
    const char *why = NULL;
    if (md_config_merge(forced, o->config, merged, sizeof merged) >= sizeof merged) why = "--config is too long";
    else if (probe(o->driver, merged, o->timeout_s, &bm, err, sizeof err)) why = err;
    else if (!bm.opened) why = bm.err;
    if (why) {
      fprintf(stderr, "%s: --differential: the driver cannot open a device on backend '%s': %s\n", who, b, why);
      return MDC_EXIT_USAGE;
    }
  }
  if (o->diff_a) snprintf(run->backend, sizeof run->backend, "%.15s,%.15s", o->diff_a, o->diff_b);
  return MDC_EXIT_OK;
}

/* Opens the results store (o->db; nothing with --no-db) and begins the run in it.
 * MDC_EXIT_OK, or MDC_EXIT_STORE with the reason on stderr. */
static int open_store(const mdc_cli__replay_opts *o, const char *who, const md_config *cfg, const probe_msg *pm,
                      mdc_cli__run *run, mdc_store **store, int64_t *run_id) {
  *store = NULL;
  *run_id = -1;
  if (!o->db) return MDC_EXIT_OK;
  char err[1024];
  struct stat dst;
  if (!o->db[0]) {
    fprintf(stderr, "%s: --db '': the results store needs a file name (or --no-db)\n", who);
    return MDC_EXIT_STORE;
  }
  if (strcmp(o->db, ":memory:") != 0 && stat(o->db, &dst) == 0 && !S_ISREG(dst.st_mode)) {
    fprintf(stderr, "%s: results store '%s': not a regular file (a store is a SQLite file)\n", who, o->db);
    return MDC_EXIT_STORE;
  }
  if (strcmp(o->db, ":memory:") != 0 && mdc_cli__mkdir_parent(o->db) != 0) {
    fprintf(stderr, "%s: cannot create the folder of '%s': %s\n", who, o->db, strerror(errno));
    return MDC_EXIT_STORE;
  }
  if (mdc_store_open(o->db, store, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", who, err);
    return MDC_EXIT_STORE;
  }
  mdc_run_info ri = {.kind = o->kind ? o->kind : "replay", .driver_name = pm->name,
                     .driver_version = pm->version, .driver_path = o->driver ? o->driver : "(reference)",
                     .backend = run->backend, .device = run->device, .config = o->config,
                     .seed = cfg->seed, .has_seed = cfg->has_seed,
                     .shard_index = o->shard_n > 1 ? o->shard_i : 0,
                     .shard_count = o->shard_n > 1 ? o->shard_n : 1};
  if (mdc_store_run_begin(*store, &ri, run_id, run->uuid)) {
    fprintf(stderr, "%s: %s\n", who, mdc_store_error(*store));
    mdc_store_close(*store);
    *store = NULL;
    return MDC_EXIT_STORE;
  }
  return MDC_EXIT_OK;
}

/* The scheduler of a run: cases queued, children running, first attempts kept for re-runs. */
typedef struct sched {
  const mdc_cli__replay_opts *o;
  const char *who;
  mdc_cli__run *run;
  const mdc_cli__baseline *base;
  mdc_store *store;
  int64_t run_id;
  int store_ok, tty, jobs, active;
  slot *slots;
  struct pollfd *pfds;
  size_t *queue, qhead, qtail, done;  /* case indexes to (re)run; a flake re-run goes to its end */
  mdc_result *first;                  /* per case: its first attempt's result and status */
  mdc_status *first_status;
  char *has_first;
} sched;

static int sched_init(sched *k) {
  k->jobs = k->o->jobs > 0 ? k->o->jobs : 1;
  size_t n = k->run->n ? k->run->n : 1;
  k->slots = calloc((size_t)k->jobs, sizeof *k->slots);
  k->pfds = calloc((size_t)k->jobs, sizeof *k->pfds);
  k->queue = calloc(2 * n + 1, sizeof *k->queue);
  k->first = calloc(n, sizeof *k->first);
  k->first_status = calloc(n, sizeof *k->first_status);
  k->has_first = calloc(n, 1);
  if (!k->slots || !k->pfds || !k->queue || !k->first || !k->first_status || !k->has_first) return -1;
  for (size_t i = 0; i < k->run->n; i++) k->queue[k->qtail++] = i;
  k->tty = !k->o->quiet && isatty(STDERR_FILENO);
  return 0;
}

static void sched_free(sched *k) {
  free(k->slots);
  free(k->pfds);
  free(k->queue);
  free(k->first);
  free(k->first_status);
  free(k->has_first);
}

/* A case's final status: stored, counted, shown. */
static void finalize(sched *k, mdc_cli__case *c, mdc_status final) {
  final = not_must_pass(c, final);
  set_status(k->run, c, final);
  k->done++;
  store_case(k->store, &k->store_ok, c, final, k->who, k->tty);
}

/* Stop (SIGINT/SIGTERM): kill what runs (a first attempt killed has no verdict: it stays
 * Running, the case the signal interrupted); a failure waiting for, or in, its re-run keeps its
 * first result, which is written: no verdict mdc has is lost. */
static void sched_stop(sched *k) {
  for (int i = 0; i < k->active; i++) mdc_cli__child_end(&k->slots[i].ch, NULL, 0);
  k->active = 0;
  for (size_t ci = 0; ci < k->run->n; ci++) {
    mdc_cli__case *c = &k->run->cases[ci];
    if (c->finished || !k->has_first[ci]) continue;
    c->res = k->first[ci];
    finalize(k, c, k->first_status[ci]);
  }
}

/* Starts queued cases while a slot is free (a case's store row is committed first). */
static void sched_fill(sched *k) {
  while (k->active < k->jobs && k->qhead < k->qtail && k->store_ok) {
    size_t ci = k->queue[k->qhead++];
    mdc_cli__case *c = &k->run->cases[ci];
    if (k->store && c->attempts == 0 && mdc_store_case_begin(k->store, k->run_id, c->name, c->path, &c->case_id)) {
      fprintf(stderr, "%s%s: %s (stopping; results written so far are kept)\n", k->tty ? "\n" : "", k->who,
              mdc_store_error(k->store));
      k->store_ok = 0;
      break;
    }
    if (start_case(k->o, c, ci, &k->slots[k->active])) {
      fprintf(stderr, "%s: fork: %s\n", k->who, strerror(errno));
      exit(MDC_EXIT_USAGE);
    }
    c->attempts++;
    k->active++;
    progress(k->run, k->done, c->name, k->tty);
  }
}

/* Waits for a child to write or exit, or for the nearest deadline (no sleeping). */
static void sched_wait(sched *k) {
  double next = k->slots[0].ch.deadline;
  int cap = -1;
  for (int i = 0; i < k->active; i++) {
    k->pfds[i] = (struct pollfd){.fd = mdc_cli__child_poll_fd(&k->slots[i].ch), .events = POLLIN};
    if (k->slots[i].ch.deadline < next) next = k->slots[i].ch.deadline;
    int c = mdc_cli__child_poll_ms(&k->slots[i].ch);
    if (c >= 0 && (cap < 0 || c < cap)) cap = c;
  }
  double left = next - mdc_cli__now();
  int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
  if (cap >= 0 && cap < ms) ms = cap;
  if (poll(k->pfds, (nfds_t)k->active, ms) < 0 && errno != EINTR) {
    fprintf(stderr, "%s: poll: %s\n", k->who, strerror(errno));
    exit(MDC_EXIT_USAGE);
  }
}

/* One attempt of case ci ended with st/res: queue its one re-run (a first failure, not in the
 * baseline), or settle its final status: Flake (a re-run passed), the first failure (a re-run
 * failed too), ExpectedFail / UnexpectedPass (baseline), or st. */
static void attempt_done(sched *k, size_t ci, mdc_status st, const mdc_result *res) {
  const mdc_cli__replay_opts *o = k->o;
  mdc_cli__case *c = &k->run->cases[ci];
  int listed = mdc_cli__baseline_has(k->base, c->name) || mdc_cli__baseline_has(k->base, c->path);
  if (c->attempts == 1) {
    k->first[ci] = *res;
    k->first_status[ci] = st;
    k->has_first[ci] = 1;
    if (!listed && o->rerun_failures && (st == MDC_S_FAIL || st == MDC_S_CRASH) && k->store_ok) {
      k->queue[k->qtail++] = ci; /* one re-run: a pass then makes it a Flake */
      return;
    }
  }
  mdc_status final = st;
  c->res = *res;
  if (c->attempts > 1) {
    c->res = k->first[ci];
    final = st == MDC_S_PASS ? MDC_S_FLAKE : k->first_status[ci];
    if (st == MDC_S_PASS) {
      char m[sizeof c->res.message];
      snprintf(m, sizeof m, "passed on re-run; first run: %s: %.900s", mdc_cli__status_name(k->first_status[ci]),
               k->first[ci].message);
      snprintf(c->res.message, sizeof c->res.message, "%s", m);
    }
  } else if (listed) {
    if (st == MDC_S_PASS) {
      final = MDC_S_UNEXPECTED_PASS;
      snprintf(c->res.message, sizeof c->res.message, "listed in baseline %s as a known failure, but passed", o->baseline);
    } else if (st != MDC_S_NOT_SUPPORTED) {
      final = MDC_S_EXPECTED_FAIL;
    }
  }
  finalize(k, c, final);
  progress(k->run, k->done, c->name, k->tty);
}

/* Runs every queued case to its end (or until SIGINT/SIGTERM or a store failure stops it). */
static void sched_run(sched *k) {
  /* No SA_RESTART, so poll() returns at once with EINTR. */
  struct sigaction stop_act = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop_act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop_act, &old_int);
  sigaction(SIGTERM, &stop_act, &old_term);
  while (k->active > 0 || (k->qhead < k->qtail && k->store_ok)) {
    if (stop_signal) {
      sched_stop(k);
      break;
    }
    sched_fill(k);
    if (!k->active) break;
    sched_wait(k);
    if (stop_signal) continue; /* a child the same signal ended is not a Crash: it was stopped */
    double t = mdc_cli__now();
    for (int i = 0; i < k->active;) {
      slot *s = &k->slots[i];
      if (!mdc_cli__child_step(&s->ch, t)) {
        i++;
        continue;
      }
      mdc_result res;
      mdc_status st = finish_case(s, k->o->timeout_s, &res);
      k->run->cases[s->ci].duration_s += mdc_cli__now() - s->ch.t0;
      attempt_done(k, s->ci, st, &res);
      k->slots[i] = k->slots[--k->active];
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  k->run->interrupted_by = stop_signal;
  if (k->tty) fprintf(stderr, "\r\033[K");
}

/* Cases the store or a signal stopped: not run (or not finished), counted as nothing. */
static void drop_unfinished(mdc_cli__run *run) {
  size_t k = 0;
  for (size_t i = 0; i < run->n; i++)
    if (run->cases[i].finished) run->cases[k++] = run->cases[i];
    else {
      run->stopped_running += run->cases[i].attempts > 0;
      free(run->cases[i].path), free(run->cases[i].rules);
    }
  run->n = k;
}

int mdc_cli__replay(const mdc_cli__replay_opts *opts, mdc_cli__run *run) {
  memset(run, 0, sizeof *run);
  const char *who = opts->kind && strcmp(opts->kind, "mutants") == 0 ? "mdc mutants" : "mdc replay";
  double t_start = mdc_cli__now();
  char err[1024];
  /* --config is parsed by the driver's own parser (md/config.h) and used, stored and merged
   * into each trace in its canonical form: what the store says is what the driver ran with. */
  md_config cfg;
  char config[1024];
  if (md_config_parse(opts->config, &cfg, err, sizeof err) != MD_NONE) {
    fprintf(stderr, "%s: --config '%s': %s\n", who, opts->config ? opts->config : "", err);
    return MDC_EXIT_USAGE;
  }
  if (md_config_format(&cfg, config, sizeof config) >= sizeof config) {
    fprintf(stderr, "%s: --config is longer than %zu bytes\n", who, sizeof config - 1);
    return MDC_EXIT_USAGE;
  }
  mdc_cli__replay_opts oc = *opts;
  oc.config = config;
  const mdc_cli__replay_opts *o = &oc;
  mdc_cli__paths paths;
  if (mdc_cli__collect(o->paths, o->n_paths, &paths, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", who, err);
    return MDC_EXIT_USAGE;
  }
  mdc_cli__baseline base = {0};
  if (o->baseline && mdc_cli__baseline_load(o->baseline, &base, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", who, err);
    mdc_cli__paths_free(&paths);
    return MDC_EXIT_USAGE;
  }
  probe_msg pm;
  sched k = {.o = o, .who = who, .run = run, .base = &base, .store_ok = 1};
  int rc = make_cases(o, who, &paths, &base, run) ? MDC_EXIT_USAGE : MDC_EXIT_OK;
  if (rc == MDC_EXIT_OK) rc = probe_driver(o, who, run, &pm);
  if (rc == MDC_EXIT_OK) rc = open_store(o, who, &cfg, &pm, run, &k.store, &k.run_id);
  if (rc != MDC_EXIT_OK) { /* nothing ran: the run is left empty, nothing to free */
    mdc_cli__run_free(run);
    mdc_cli__baseline_free(&base);
    return rc;
  }
  if (sched_init(&k)) {
    fprintf(stderr, "%s: out of memory\n", who);
    exit(MDC_EXIT_USAGE);
  }
  sched_run(&k);
  run->duration_s = mdc_cli__now() - t_start;
  if (!k.store_ok || run->interrupted_by) drop_unfinished(run);
  mdc_run_summary sum = {(uint32_t)run->n, run->count[MDC_S_PASS], run->count[MDC_S_FAIL],
                         run->count[MDC_S_CRASH], run->count[MDC_S_TIMEOUT], run->unexpected,
                         run->interrupted_by != 0};
  if (k.store && k.store_ok && mdc_store_run_finish(k.store, k.run_id, &sum)) {
    fprintf(stderr, "%s: %s\n", who, mdc_store_error(k.store));
    k.store_ok = 0;
  }
  if (k.store) mdc_store_close(k.store);
  /* --quiet drops the progress and the summary, never the JSON asked for. */
  if (o->json) {
    if (!o->quiet) summary(stderr, o, run);
    print_json(o, run, k.store_ok);
  } else if (!o->quiet) {
    summary(stdout, o, run);
  }
  mdc_cli__reap_all();
  sched_free(&k);
  mdc_cli__baseline_free(&base);
  if (!k.store_ok) return MDC_EXIT_STORE;
  return run->unexpected || run->interrupted_by ? MDC_EXIT_UNEXPECTED : MDC_EXIT_OK;
}

void mdc_cli__run_free(mdc_cli__run *run) {
  for (size_t i = 0; i < run->n; i++) free(run->cases[i].path), free(run->cases[i].rules);
  free(run->cases);
  memset(run, 0, sizeof *run);
}

/* ---- the command ---------------------------------------------------------------------------- */

/* "A,B": two different names of letters, digits, '_' and '-'. 0, or -1. */
static int parse_differential(const char *s, char *a, char *b, size_t len) {
  const char *comma = strchr(s, ',');
  if (!comma || strchr(comma + 1, ',')) return -1;
  size_t la = (size_t)(comma - s), lb = strlen(comma + 1);
  if (!la || !lb || la >= len || lb >= len) return -1;
  for (const char *p = s; *p; p++)
    if (p != comma && !isalnum((unsigned char)*p) && *p != '_' && *p != '-') return -1;
  memcpy(a, s, la);
  a[la] = '\0';
  memcpy(b, comma + 1, lb + 1);
  return strcmp(a, b) == 0 ? -1 : 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc replay [options] PATH...\n"
          "Replays traces (files, or folders searched for *.jsonl; blobs/ skipped), each in its own\n"
          "child process, and judges the driver.\n\n"
          "  --driver SO      driver shared object (default: the reference driver)\n"
          "  --config STR     open_device config merged into each trace's (default backend=auto)\n"
          "  --db FILE        results store (default results/mdc.db; ':memory:' keeps nothing)\n"
          "  --no-db          write no results store\n"
          "  --shard I/N      run only the traces whose name hashes to shard I of N (0 <= I < N)\n"
          "  --include GLOB   run only the traces whose name (e.g. tokens/forged) matches GLOB\n"
          "                   (fnmatch; '*' also matches '/'); repeatable: any of them\n"
          "  --exclude GLOB   never run the traces whose name matches GLOB; repeatable; wins over\n"
          "                   --include\n"
          "  --baseline FILE  trace names (one a line, # comments) that are known failures\n"
          "  --timeout S      seconds per case before it is killed as Timeout (default 30)\n"
          "  --jobs N         cases run in parallel (default: the number of CPUs)\n"
          "  --no-rerun       do not re-run a failed or crashed case (no Flake detection)\n"
          "  --json           one JSON object on stdout (summary goes to stderr)\n"
          "  --quiet          no progress and no summary (--json is still printed)\n"
          "  --strict-messages  a message expectation the driver does not meet is a Fail (default:\n"
          "                   advisory, reported with the case; SPEC 8.11)\n"
          "  --differential A,B  replay each trace on backend A and on backend B of the driver\n"
          "                   (its first open_device forced to backend=A, then B) and compare\n"
          "                   every status, shape and checked byte: a disagreement is a Fail\n"
          "  -v, --verbose    each event of each case as it runs: its arguments, the call's status\n"
          "                   and message (on stderr; one case at a time)\n\n"
          "exit status: 0 nothing unexpected, 1 unexpected results, 2 bad usage or input,\n"
          "3 results store error\n");
}

int mdc_cli__cmd_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"driver", required_argument, 0, 'd'}, {"config", required_argument, 0, 'c'},
      {"db", required_argument, 0, 'b'},     {"no-db", no_argument, 0, 'n'},
      {"shard", required_argument, 0, 's'},  {"baseline", required_argument, 0, 'B'},
      {"timeout", required_argument, 0, 't'}, {"jobs", required_argument, 0, 'j'},
      {"json", no_argument, 0, 'J'},         {"quiet", no_argument, 0, 'q'},
      {"no-rerun", no_argument, 0, 'R'},     {"help", no_argument, 0, 'h'},
      {"verbose", no_argument, 0, 'v'},      {"strict-messages", no_argument, 0, 'S'},
      {"differential", required_argument, 0, 'D'},
      {"include", required_argument, 0, 'I'}, {"exclude", required_argument, 0, 'X'},
      {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  mdc_cli__replay_opts o = {.config = "backend=auto", .db = "results/mdc.db", .timeout_s = 30,
                        .shard_i = 0, .shard_n = 1, .jobs = ncpu > 0 ? (int)ncpu : 1,
                        .rerun_failures = 1, .kind = "replay"};
  int no_db = 0, c;
  long v;
  char diff_a[32], diff_b[32];
  optind = 1;
  opterr = 0;
  /* Options and paths in any order (replay T --driver X). */
  while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
    switch (c) {
      case 'v': o.verbose = 1; break;
      case 'S': o.strict_messages = 1; break;
      case 'D':
        if (parse_differential(optarg, diff_a, diff_b, sizeof diff_a)) {
          fprintf(stderr, "mdc replay: --differential '%s': want two different backend names A,B "
                  "(letters, digits, _ and -), e.g. sim,hip\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.diff_a = diff_a;
        o.diff_b = diff_b;
        break;
      case 'I':
      case 'X': {
        uint32_t *n = c == 'I' ? &o.n_include : &o.n_exclude;
        if (!optarg[0] || *n == MDC_CLI_MAX_GLOBS) {
          fprintf(stderr, "mdc replay: --%s '%s': want a non-empty glob, at most %d of them\n",
                  c == 'I' ? "include" : "exclude", optarg, MDC_CLI_MAX_GLOBS);
          return MDC_EXIT_USAGE;
        }
        (c == 'I' ? o.include : o.exclude)[(*n)++] = optarg;
        break;
      }
      case 'd': o.driver = optarg; break;
      case 'c': o.config = optarg; break;
      case 'b': o.db = optarg; break;
      case 'n': no_db = 1; break;
      case 'B': o.baseline = optarg; break;
      case 'J': o.json = 1; break;
      case 'q': o.quiet = 1; break;
      case 'R': o.rerun_failures = 0; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case 's':
        if (mdc_cli__parse_shard(optarg, &o.shard_i, &o.shard_n)) {
          fprintf(stderr, "mdc replay: --shard '%s': want I/N with 0 <= I < N, e.g. 0/4\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 't':
        if (mdc_cli__parse_seconds(optarg, &o.timeout_s)) {
          fprintf(stderr, "mdc replay: --timeout '%s': want seconds > 0 (at most 86400)\n", optarg);
          return MDC_EXIT_USAGE;
        }
        break;
      case 'j':
        if (mdc_cli__parse_int(optarg, 1, 1024, &v)) {
          fprintf(stderr, "mdc replay: --jobs '%s': want 1..1024\n", optarg);
          return MDC_EXIT_USAGE;
        }
        o.jobs = (int)v;
        break;
      case ':':
        fprintf(stderr, "mdc replay: option '%s' needs a value\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc replay: unknown option '%s' (see mdc replay --help)\n", argv[optind - 1]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "mdc replay: no PATH given (see mdc replay --help)\n");
    return MDC_EXIT_USAGE;
  }
  if (no_db) o.db = NULL;
  if (o.verbose) o.jobs = 1; /* one case's events at a time on the terminal */
  o.paths = (const char *const *)argv + optind;
  o.n_paths = (size_t)(argc - optind);
  mdc_cli__run run;
  int rc = mdc_cli__replay(&o, &run);
  int sig = run.interrupted_by;
  mdc_cli__run_free(&run);
  if (sig) {
    /* Stopped on a signal: die of it, as the shell and CI expect (exit status 128 + sig). */
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
  }
  return rc;
}
