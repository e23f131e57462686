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
#include "replay_int.h"
#include "driver_id.h"

/* ---- the driver probe: load the driver and ask its capabilities, in a child ---------------- */

/* 0 when the driver loaded (*m filled; m->opened says whether open_device worked); -1 with a
 * message in err when it could not be loaded or the probe crashed or hung. */
int mdc_cli__rp_probe(const char *driver, const char *config, double timeout_s, probe_msg *m, char *err,
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
      /* The build judged: the file, its build-id and SHA-256 (driver_id.c). */
      mdc_cli__driver_identify(d, dl, r.file, sizeof r.file, r.build_id, r.sha256);
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
  mdc_cli__child_wait(&ch);
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

/* ---- the run -------------------------------------------------------------------------------- */

void mdc_cli__rp_set_status(mdc_cli__run *run, mdc_cli__case *c, mdc_status s) {
  c->status = s;
  c->finished = 1;
  mdc_cli__case_cause(c); /* its cause signature, for the store and the summary's groups */
  run->count[s]++;
  if (mdc_cli__status_unexpected(s)) run->unexpected++;
}

/* A trace that is not must-pass pins a decision SPEC leaves open (the reference driver's): its
 * failure is reported as Warn, not unexpected. */
mdc_status mdc_cli__rp_not_must_pass(const mdc_cli__case *c, mdc_status st) {
  return st == MDC_S_FAIL && !c->must_pass ? MDC_S_WARN : st;
}

/* Completes a case's store row with its final status and every column of its result; a store
 * that fails stops the run (*store_ok = 0), keeping what was written. 1 when written. */
int mdc_cli__rp_store_case(mdc_store *store, int *store_ok, const mdc_cli__case *c, mdc_status final,
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
                        .advisory = r->advisory[0] ? r->advisory : NULL,
                        .preceded_by = c->preceded_by[0] ? c->preceded_by : NULL,
                        .signature = c->signature[0] ? c->signature : NULL, .stack = c->stack};
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
  if (mdc_cli__rp_probe(o->driver, o->config, o->timeout_s, pm, err, sizeof err)) {
    fprintf(stderr, "%s: driver %s: %s\n", who, o->driver ? o->driver : "(reference)", err);
    return MDC_EXIT_USAGE;
  }
  snprintf(run->driver_name, sizeof run->driver_name, "%s", pm->name);
  snprintf(run->driver_version, sizeof run->driver_version, "%s", pm->version);
  snprintf(run->backend, sizeof run->backend, "%.31s", pm->opened ? pm->caps.backend : "unknown");
  snprintf(run->device, sizeof run->device, "%.63s", pm->opened ? pm->caps.device_name : "unknown");
  snprintf(run->driver_file, sizeof run->driver_file, "%s", pm->file);
  snprintf(run->driver_build_id, sizeof run->driver_build_id, "%s", pm->build_id);
  snprintf(run->driver_sha256, sizeof run->driver_sha256, "%s", pm->sha256);
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
    else if (mdc_cli__rp_probe(o->driver, merged, o->timeout_s, &bm, err, sizeof err)) why = err;
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
  /* A store made here is said where it is, once: every later run adds to it unnoticed. */
  int is_new = strcmp(o->db, ":memory:") != 0 && stat(o->db, &dst) != 0;
  if (mdc_store_open(o->db, store, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", who, err);
    return MDC_EXIT_STORE;
  }
  if (is_new && !o->quiet)
    fprintf(stderr, "%s: created the results store %s (every run is kept there; --db FILE or --no-db)\n", who, o->db);
  mdc_run_info ri = {.kind = o->kind ? o->kind : "replay", .driver_name = pm->name,
                     .driver_version = pm->version, .driver_path = o->driver ? o->driver : "(reference)",
                     .backend = run->backend, .device = run->device, .config = o->config,
                     .seed = cfg->seed, .has_seed = cfg->has_seed,
                     .shard_index = o->shard_n > 1 ? o->shard_i : 0,
                     .shard_count = o->shard_n > 1 ? o->shard_n : 1,
                     .driver_build_id = run->driver_build_id[0] ? run->driver_build_id : NULL,
                     .driver_sha256 = run->driver_sha256[0] ? run->driver_sha256 : NULL,
                     .selection = run->selection[0] ? run->selection : NULL, .selection_n = run->selection_n,
                     .shuffle_seed = o->shuffle_seed, .has_shuffle_seed = o->has_shuffle_seed,
                     .group_size = mdc_cli__rp_group_size(o, run)};
  if (mdc_store_run_begin(*store, &ri, run_id, run->uuid)) {
    fprintf(stderr, "%s: %s\n", who, mdc_store_error(*store));
    mdc_store_close(*store);
    *store = NULL;
    return MDC_EXIT_STORE;
  }
  return MDC_EXIT_OK;
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
  if (rc == MDC_EXIT_OK && mdc_cli__rp_lists_apply(o, who, run)) rc = MDC_EXIT_USAGE; /* --skips, --flakes */
  if (rc == MDC_EXIT_OK) rc = probe_driver(o, who, run, &pm);
  if (rc == MDC_EXIT_OK) rc = open_store(o, who, &cfg, &pm, run, &k.store, &k.run_id);
  if (rc != MDC_EXIT_OK) { /* nothing ran: the run is left empty, nothing to free */
    mdc_cli__run_free(run);
    mdc_cli__baseline_free(&base);
    return rc;
  }
  mdc_cli__set_aside skipped; /* --skips: settled now, never run; the scheduler sees the rest */
  if (mdc_cli__rp_skips_begin(run, k.store, k.run_id, &k.store_ok, who, &skipped)) {
    fprintf(stderr, "%s: out of memory\n", who);
    exit(MDC_EXIT_USAGE);
  }
  if (mdc_cli__rp_sched_init(&k)) {
    fprintf(stderr, "%s: out of memory\n", who);
    exit(MDC_EXIT_USAGE);
  }
  mdc_cli__rp_progress_begin(o, who);
  mdc_cli__rp_sched_run(&k);
  mdc_cli__rp_skips_end(run, &skipped);
  run->duration_s = mdc_cli__now() - t_start;
  if (!k.store_ok || run->interrupted_by) mdc_cli__rp_drop_unfinished(run);
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
    if (!o->quiet) mdc_cli__rp_summary(stderr, o, run);
    mdc_cli__rp_print_json(o, run, k.store_ok);
  } else if (!o->quiet) {
    mdc_cli__rp_summary(stdout, o, run);
  }
  mdc_cli__reap_all();
  mdc_cli__rp_sched_free(&k);
  mdc_cli__baseline_free(&base);
  if (!k.store_ok) return MDC_EXIT_STORE;
  return run->unexpected || run->interrupted_by ? MDC_EXIT_UNEXPECTED : MDC_EXIT_OK;
}

void mdc_cli__run_free(mdc_cli__run *run) {
  for (size_t i = 0; i < run->n; i++) free(run->cases[i].path), free(run->cases[i].rules), free(run->cases[i].stack);
  free(run->cases);
  memset(run, 0, sizeof *run);
}
