/* replay.c - `mdc replay`: every trace is one case, replayed by the engine in a forked child
 * (which loads the driver, runs mdc_trace_run and writes its mdc_result to a pipe), so a driver
 * that crashes or hangs costs only that case. The parent runs up to --jobs children, enforces
 * the per-case deadline with poll() on the children's pipes (the timeout of poll is the nearest
 * deadline: no sleeping), writes every case to the results store before it runs and after it
 * ends, applies the baseline and the flake re-run, and prints progress, a summary and JSON.
 * SIGINT or SIGTERM stops the run: the running cases are killed and stay Running, the run is
 * marked interrupted, and the signal is raised again once the store is closed. */
#include <errno.h>
#include <fcntl.h>
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
    fprintf(f, "\nINTERRUPTED by SIG%s: %zu running case%s killed and left Running in the store; cases not "
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
  if (o->shard_n > 1) json_object_set_new(j, "shard", json_pack("[i,i]", (int)o->shard_i, (int)o->shard_n));
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
  /* The cases: every trace named by its header, in path order; the shard keeps its share. */
  run->cases = calloc(paths.n, sizeof *run->cases);
  if (!run->cases) {
    mdc_cli__paths_free(&paths);
    mdc_cli__baseline_free(&base);
    return MDC_EXIT_USAGE;
  }
  for (size_t i = 0; i < paths.n; i++) {
    mdc_trace_header h;
    char herr[256];
    const char *name = paths.v[i];
    int header_ok = mdc_trace_read_header(paths.v[i], &h, herr, sizeof herr) == 0;
    if (header_ok && h.name[0]) name = h.name;
    if (o->shard_n > 1 && mdc_cli__shard_of(name, o->shard_n) != o->shard_i) {
      free(paths.v[i]);
      continue;
    }
    mdc_cli__case *c = &run->cases[run->n++];
    c->path = paths.v[i];
    c->rules = header_ok && h.rules[0] ? strdup(h.rules) : NULL;
    c->must_pass = !header_ok || h.must_pass;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->case_id = -1;
  }
  free(paths.v);
  /* A baseline entry that names no trace of this run is most likely a typo or a renamed trace:
   * say so (it is not an error: a shard runs part of the corpus). */
  for (size_t b = 0; b < base.n && o->shard_n <= 1 && !o->quiet; b++) {
    int used = 0;
    for (size_t i = 0; i < run->n && !used; i++)
      used = strcmp(base.names[b], run->cases[i].name) == 0 || strcmp(base.names[b], run->cases[i].path) == 0;
    if (!used) {
      char safe[300];
      mdc_cli__terminal_safe(base.names[b], safe, sizeof safe);
      fprintf(stderr, "%s: warning: baseline %s lists '%s', which no trace of this run is named\n", who,
              o->baseline, safe);
    }
  }

  int rc = MDC_EXIT_OK;
  probe_msg pm;
  if (probe(o->driver, o->config, o->timeout_s, &pm, err, sizeof err)) {
    fprintf(stderr, "%s: driver %s: %s\n", who, o->driver ? o->driver : "(reference)", err);
    mdc_cli__baseline_free(&base);
    return MDC_EXIT_USAGE;
  }
  snprintf(run->driver_name, sizeof run->driver_name, "%s", pm.name);
  snprintf(run->driver_version, sizeof run->driver_version, "%s", pm.version);
  snprintf(run->backend, sizeof run->backend, "%.31s", pm.opened ? pm.caps.backend : "unknown");
  snprintf(run->device, sizeof run->device, "%.63s", pm.opened ? pm.caps.device_name : "unknown");
  /* A config the driver cannot open a device with would fail every case the same way: it is a
   * usage error, named, before anything runs. */
  if (!pm.opened) {
    fprintf(stderr, "%s: --config '%s': the driver loaded but cannot open a device with it: %s\n", who,
            o->config, pm.err);
    mdc_cli__baseline_free(&base);
    return MDC_EXIT_USAGE;
  }

  /* The store: a case row is committed before its case starts, so a killed run leaves it
   * 'Running'. A store failure stops the run (no new cases) but keeps what is written. */
  mdc_store *store = NULL;
  int64_t run_id = -1;
  int store_ok = 1;
  if (o->db) {
    struct stat dst;
    if (!o->db[0]) {
      fprintf(stderr, "%s: --db '': the results store needs a file name (or --no-db)\n", who);
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    if (strcmp(o->db, ":memory:") != 0 && stat(o->db, &dst) == 0 && !S_ISREG(dst.st_mode)) {
      fprintf(stderr, "%s: results store '%s': not a regular file (a store is a SQLite file)\n", who, o->db);
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    if (strcmp(o->db, ":memory:") != 0 && mdc_cli__mkdir_parent(o->db) != 0) {
      fprintf(stderr, "%s: cannot create the folder of '%s': %s\n", who, o->db, strerror(errno));
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    if (mdc_store_open(o->db, &store, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", who, err);
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    mdc_run_info ri = {.kind = o->kind ? o->kind : "replay", .driver_name = pm.name,
                       .driver_version = pm.version, .driver_path = o->driver ? o->driver : "(reference)",
                       .backend = run->backend, .device = run->device, .config = config,
                       .seed = cfg.seed, .has_seed = cfg.has_seed,
                       .shard_index = o->shard_n > 1 ? o->shard_i : 0,
                       .shard_count = o->shard_n > 1 ? o->shard_n : 1};
    if (mdc_store_run_begin(store, &ri, &run_id, run->uuid)) {
      fprintf(stderr, "%s: %s\n", who, mdc_store_error(store));
      mdc_store_close(store);
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
  }

  int jobs = o->jobs > 0 ? o->jobs : 1;
  slot *slots = calloc((size_t)jobs, sizeof *slots);
  struct pollfd *pfds = calloc((size_t)jobs, sizeof *pfds);
  /* The queue: case indexes to (re)run; a flake re-run goes to its end. */
  size_t *queue = calloc(2 * run->n + 1, sizeof *queue);
  if (!slots || !pfds || !queue) {
    fprintf(stderr, "%s: out of memory\n", who);
    exit(MDC_EXIT_USAGE);
  }
  size_t qhead = 0, qtail = 0, done = 0;
  for (size_t i = 0; i < run->n; i++) queue[qtail++] = i;
  int active = 0, tty = !o->quiet && isatty(STDERR_FILENO);
  mdc_result *first = calloc(run->n ? run->n : 1, sizeof *first); /* first attempt's result */
  mdc_status *first_status = calloc(run->n ? run->n : 1, sizeof *first_status);
  char *has_first = calloc(run->n ? run->n : 1, 1);
  if (!first || !first_status || !has_first) exit(MDC_EXIT_USAGE);

  /* SIGINT/SIGTERM: stop starting cases, kill the running ones (their rows stay Running), mark
   * the run interrupted. No SA_RESTART, so poll() returns at once with EINTR. */
  struct sigaction stop_act = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop_act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop_act, &old_int);
  sigaction(SIGTERM, &stop_act, &old_term);
  while (active > 0 || (qhead < qtail && store_ok)) {
    if (stop_signal) {
      /* Stop: kill what runs (a first attempt killed has no verdict: it stays Running, the case
       * the signal interrupted); a failure waiting for, or in, its re-run keeps its first
       * result, which is written: no verdict mdc has is lost. */
      for (int i = 0; i < active; i++) mdc_cli__child_end(&slots[i].ch, NULL, 0);
      active = 0;
      for (size_t ci = 0; ci < run->n; ci++) {
        mdc_cli__case *c = &run->cases[ci];
        if (c->finished || !has_first[ci]) continue;
        c->res = first[ci];
        mdc_status final = not_must_pass(c, first_status[ci]);
        set_status(run, c, final);
        done++;
        store_case(store, &store_ok, c, final, who, tty);
      }
      break;
    }
    while (active < jobs && qhead < qtail && store_ok) {
      size_t ci = queue[qhead++];
      mdc_cli__case *c = &run->cases[ci];
      if (store && c->attempts == 0 &&
          mdc_store_case_begin(store, run_id, c->name, c->path, &c->case_id)) {
        fprintf(stderr, "%s%s: %s (stopping; results written so far are kept)\n",
                tty ? "\n" : "", who, mdc_store_error(store));
        store_ok = 0;
        break;
      }
      if (start_case(o, c, ci, &slots[active])) {
        fprintf(stderr, "%s: fork: %s\n", who, strerror(errno));
        exit(MDC_EXIT_USAGE);
      }
      c->attempts++;
      active++;
      progress(run, done, c->name, tty);
    }
    if (!active) break;
    /* Wait for a child to write or exit, or for the nearest deadline (no sleeping). */
    double next = slots[0].ch.deadline;
    int cap = -1;
    for (int i = 0; i < active; i++) {
      pfds[i] = (struct pollfd){.fd = mdc_cli__child_poll_fd(&slots[i].ch), .events = POLLIN};
      if (slots[i].ch.deadline < next) next = slots[i].ch.deadline;
      int c = mdc_cli__child_poll_ms(&slots[i].ch);
      if (c >= 0 && (cap < 0 || c < cap)) cap = c;
    }
    double left = next - mdc_cli__now();
    int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
    if (cap >= 0 && cap < ms) ms = cap;
    int r = poll(pfds, (nfds_t)active, ms);
    if (r < 0 && errno != EINTR) {
      fprintf(stderr, "%s: poll: %s\n", who, strerror(errno));
      exit(MDC_EXIT_USAGE);
    }
    if (stop_signal) continue; /* a child the same signal ended is not a Crash: it was stopped */
    double t = mdc_cli__now();
    for (int i = 0; i < active;) {
      slot *s = &slots[i];
      if (!mdc_cli__child_step(&s->ch, t)) {
        i++;
        continue;
      }
      mdc_cli__case *c = &run->cases[s->ci];
      mdc_result res;
      mdc_status st = finish_case(s, o->timeout_s, &res);
      double dur = mdc_cli__now() - s->ch.t0;
      c->duration_s += dur;
      int listed = mdc_cli__baseline_has(&base, c->name) || mdc_cli__baseline_has(&base, c->path);
      int finished = 1;
      if (c->attempts == 1) {
        first[s->ci] = res;
        first_status[s->ci] = st;
        has_first[s->ci] = 1;
        if (!listed && o->rerun_failures && (st == MDC_S_FAIL || st == MDC_S_CRASH) && store_ok) {
          queue[qtail++] = s->ci; /* one re-run: a pass then makes it a Flake */
          finished = 0;
        }
      }
      if (finished) {
        mdc_status final = st;
        c->res = res;
        if (c->attempts > 1) {
          /* Re-run of a failure: a pass makes it a Flake (with the first failure's message);
           * otherwise the first failure stands. */
          c->res = first[s->ci];
          final = st == MDC_S_PASS ? MDC_S_FLAKE : first_status[s->ci];
          if (st == MDC_S_PASS) {
            char m[sizeof c->res.message];
            snprintf(m, sizeof m, "passed on re-run; first run: %s: %.900s", mdc_cli__status_name(first_status[s->ci]), first[s->ci].message);
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
        final = not_must_pass(c, final);
        set_status(run, c, final);
        done++;
        store_case(store, &store_ok, c, final, who, tty);
        progress(run, done, c->name, tty);
      }
      slots[i] = slots[--active];
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  run->interrupted_by = stop_signal;
  if (tty) fprintf(stderr, "\r\033[K");
  run->duration_s = mdc_cli__now() - t_start;
  if (!store_ok || run->interrupted_by) {
    /* Cases the store or the signal stopped: not run (or not finished), counted as nothing. */
    size_t k = 0;
    for (size_t i = 0; i < run->n; i++)
      if (run->cases[i].finished) run->cases[k++] = run->cases[i];
      else {
        run->stopped_running += run->cases[i].attempts > 0;
        free(run->cases[i].path), free(run->cases[i].rules);
      }
    run->n = k;
  }
  mdc_run_summary sum = {(uint32_t)run->n, run->count[MDC_S_PASS], run->count[MDC_S_FAIL],
                         run->count[MDC_S_CRASH], run->count[MDC_S_TIMEOUT], run->unexpected,
                         run->interrupted_by != 0};
  if (store && store_ok && mdc_store_run_finish(store, run_id, &sum)) {
    fprintf(stderr, "%s: %s\n", who, mdc_store_error(store));
    store_ok = 0;
  }
  if (store) mdc_store_close(store);
  /* --quiet drops the progress and the summary, never the JSON asked for. */
  if (o->json) {
    if (!o->quiet) summary(stderr, o, run);
    print_json(o, run, store_ok);
  } else if (!o->quiet) {
    summary(stdout, o, run);
  }
  mdc_cli__reap_all();
  free(slots);
  free(pfds);
  free(queue);
  free(first);
  free(first_status);
  free(has_first);
  mdc_cli__baseline_free(&base);
  if (!store_ok) rc = MDC_EXIT_STORE;
  else if (run->unexpected || run->interrupted_by) rc = MDC_EXIT_UNEXPECTED;
  return rc;
}

void mdc_cli__run_free(mdc_cli__run *run) {
  for (size_t i = 0; i < run->n; i++) free(run->cases[i].path), free(run->cases[i].rules);
  free(run->cases);
  memset(run, 0, sizeof *run);
}

/* ---- the command ---------------------------------------------------------------------------- */

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
          "  --baseline FILE  trace names (one a line, # comments) that are known failures\n"
          "  --timeout S      seconds per case before it is killed as Timeout (default 30)\n"
          "  --jobs N         cases run in parallel (default: the number of CPUs)\n"
          "  --no-rerun       do not re-run a failed or crashed case (no Flake detection)\n"
          "  --json           one JSON object on stdout (summary goes to stderr)\n"
          "  --quiet          no progress and no summary (--json is still printed)\n"
          "  --strict-messages  a message expectation the driver does not meet is a Fail (default:\n"
          "                   advisory, reported with the case; SPEC 8.11)\n"
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
      {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  mdc_cli__replay_opts o = {.config = "backend=auto", .db = "results/mdc.db", .timeout_s = 30,
                        .shard_i = 0, .shard_n = 1, .jobs = ncpu > 0 ? (int)ncpu : 1,
                        .rerun_failures = 1, .kind = "replay"};
  int no_db = 0, c;
  long v;
  optind = 1;
  opterr = 0;
  /* Options and paths in any order (replay T --driver X). */
  while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
    switch (c) {
      case 'v': o.verbose = 1; break;
      case 'S': o.strict_messages = 1; break;
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
