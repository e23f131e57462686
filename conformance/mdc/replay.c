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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes all of buf (a pipe's reader may take it in pieces). */
static void write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* In a new child: it dies with the parent (a killed `mdc` leaves no orphan running a driver),
 * and its stdout goes to stderr so a driver's prints never mix into --json. */
static void child_setup(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  signal(SIGPIPE, SIG_DFL);
  /* The parent's stop handler is not the child's: a signal ends a case's child at once. */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

/* The signal that asked the run to stop (0: none). Set by the handler, read by the loop. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) { stop_signal = sig; }

/* Fills the store's v2 case columns the engine does not report separately yet, from its
 * message "path:line: op: what (last_error: \"...\")": the op of the failing event and the
 * driver's message. (When mdc_result carries them, this goes.) */
static void split_message(const mdc_cli__case *c, char *event, size_t elen, char *driver, size_t dlen) {
  event[0] = driver[0] = 0;
  const char *m = c->res.message;
  size_t pl = strlen(c->path);
  if (c->res.line && strncmp(m, c->path, pl) == 0 && m[pl] == ':') {
    const char *p = m + pl + 1;
    while (*p >= '0' && *p <= '9') p++;
    if (p[0] == ':' && p[1] == ' ') {
      p += 2;
      size_t n = strcspn(p, ": ");
      if (n && p[n] == ':' && n < elen) snprintf(event, elen, "%.*s", (int)n, p);
    }
  }
  const char *le = strstr(m, "(last_error: \"");
  if (le) {
    le += strlen("(last_error: \"");
    const char *end = strrchr(le, '"');
    if (end && end > le) snprintf(driver, dlen, "%.*s", (int)(end - le), le);
    else if (end == le) snprintf(driver, dlen, "%s", "");
  } else if ((le = strstr(m, "last_error \""))) {
    le += strlen("last_error \"");
    const char *end = strstr(le, "\" does not contain");
    if (end) snprintf(driver, dlen, "%.*s", (int)(end - le), le);
  }
}

/* ---- the driver probe: load the driver and ask its capabilities, in a child ---------------- */

typedef struct probe_msg {
  int loaded, opened;
  char err[512];
  char name[64], version[64];
  md_capabilities caps;
} probe_msg;

static pid_t fork_child(int *rfd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[0]);
    child_setup(parent);
    *rfd = p[1];
    return 0;
  }
  close(p[1]);
  *rfd = p[0];
  return pid;
}

/* Reads up to n bytes from fd until EOF or the deadline; the count read, -1 on timeout. */
static ssize_t read_until(int fd, void *buf, size_t n, double deadline) {
  size_t got = 0;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return -1;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r = poll(&pfd, 1, (int)ceil(left * 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return -1;
    char tmp[4096];
    ssize_t k = read(fd, got < n ? (char *)buf + got : tmp, got < n ? n - got : sizeof tmp);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return (ssize_t)got;
    if (got < n) got += (size_t)k;
  }
}

static void describe_exit(int st, char *out, size_t n) {
  if (WIFSIGNALED(st)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(st));
    snprintf(out, n, "killed by signal SIG%s (%s)", abbrev ? abbrev : "?", strsignal(WTERMSIG(st)));
  } else if (WIFEXITED(st)) {
    snprintf(out, n, "exited with status %d before reporting a result", WEXITSTATUS(st));
  } else {
    snprintf(out, n, "ended with wait status 0x%x", st);
  }
}

/* 0 when the driver loaded (*m filled; m->opened says whether open_device worked); -1 with a
 * message in err when it could not be loaded or the probe crashed or hung. */
static int probe(const char *driver, const char *config, double timeout_s, probe_msg *m, char *err,
                 size_t errlen) {
  memset(m, 0, sizeof *m);
  int fd;
  pid_t pid = fork_child(&fd);
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
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
        else snprintf(r.err, sizeof r.err, "get_capabilities failed: %s", d->last_error(dev));
        d->close_device(dev);
      } else {
        snprintf(r.err, sizeof r.err, "open_device(\"%s\") returned status %d: %s", config, (int)st,
                 d->last_error(NULL));
      }
    }
    write_all(fd, &r, sizeof r);
    _exit(0);
  }
  ssize_t got = read_until(fd, m, sizeof *m, now_s() + timeout_s);
  close(fd);
  if (got < 0) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (got < 0) {
    snprintf(err, errlen, "loading the driver and opening a device took more than %g s", timeout_s);
    return -1;
  }
  if (got != (ssize_t)sizeof *m) {
    char why[160];
    describe_exit(st, why, sizeof why);
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
  pid_t pid;
  int fd;
  double t0, deadline;
  mdc_result res;
  size_t got;
} slot;

static int start_case(const mdc_cli__replay_opts *o, mdc_cli__case *c, size_t ci, slot *s) {
  int fd;
  pid_t pid = fork_child(&fd);
  if (pid < 0) return -1;
  if (pid == 0) {
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
      mdc_trace_run(d, c->path, o->config, &r);
    }
    write_all(fd, &r, sizeof r);
    _exit(0);
  }
  memset(s, 0, sizeof *s);
  s->ci = ci;
  s->pid = pid;
  s->fd = fd;
  s->t0 = now_s();
  s->deadline = s->t0 + o->timeout_s;
  return 0;
}

/* The child ended (EOF on its pipe) or ran out of time (timed_out): reap it and say what
 * happened. */
static mdc_status finish_case(slot *s, int timed_out, double timeout_s, mdc_result *r) {
  if (timed_out) kill(s->pid, SIGKILL);
  close(s->fd);
  int st = 0;
  while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {}
  memset(r, 0, sizeof *r);
  if (timed_out) {
    r->verdict = MDC_FAIL;
    snprintf(r->message, sizeof r->message, "no result after %g s: killed", timeout_s);
    return MDC_S_TIMEOUT;
  }
  if (s->got == sizeof s->res && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    *r = s->res;
    r->message[sizeof r->message - 1] = r->expected[sizeof r->expected - 1] = r->actual[sizeof r->actual - 1] = 0;
    switch (r->verdict) {
      case MDC_PASS: return MDC_S_PASS;
      case MDC_NOT_SUPPORTED: return MDC_S_NOT_SUPPORTED;
      case MDC_TRACE_ERROR: return MDC_S_TRACE_ERROR;
      default: return MDC_S_FAIL;
    }
  }
  r->verdict = MDC_FAIL;
  describe_exit(st, r->message, sizeof r->message);
  return MDC_S_CRASH;
}

/* ---- output --------------------------------------------------------------------------------- */

static void progress(const mdc_cli__run *run, size_t done, const char *current, int on) {
  if (!on) return;
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
    fprintf(f, "  %-14s %s: %s\n", mdc_cli__status_name(c->status), c->name, c->res.message[0] ? c->res.message : "-");
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
    json_array_append_new(res, j);
  }
  const uint32_t *k = run->count;
  json_t *j = json_pack(
      "{s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:o,s:o,s:s,s:s,s:s,s:s,s:o}", "cases",
      (json_int_t)run->n, "passed", (int)k[MDC_S_PASS], "failed", (int)k[MDC_S_FAIL], "crashed",
      (int)k[MDC_S_CRASH], "timed_out", (int)k[MDC_S_TIMEOUT], "unexpected", (int)run->unexpected,
      "not_supported", (int)k[MDC_S_NOT_SUPPORTED], "trace_errors", (int)k[MDC_S_TRACE_ERROR],
      "flaky", (int)k[MDC_S_FLAKE], "expected_fail", (int)k[MDC_S_EXPECTED_FAIL], "unexpected_pass",
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

/* The `seed` key of a config string, if any. */
static int config_seed(const char *cfg, uint64_t *seed) {
  const char *p = cfg;
  while (p && *p) {
    while (*p == ' ' || *p == ';') p++;
    if (strncmp(p, "seed", 4) == 0) {
      const char *q = p + 4;
      while (*q == ' ') q++;
      if (*q == '=') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(q + 1, &end, 0);
        if (!errno && end != q + 1) {
          *seed = v;
          return 1;
        }
      }
    }
    p = strchr(p, ';');
  }
  return 0;
}

/* ---- the run -------------------------------------------------------------------------------- */

static void set_status(mdc_cli__run *run, mdc_cli__case *c, mdc_status s) {
  c->status = s;
  c->finished = 1;
  run->count[s]++;
  if (mdc_cli__status_unexpected(s)) run->unexpected++;
}

int mdc_cli__replay(const mdc_cli__replay_opts *o, mdc_cli__run *run) {
  memset(run, 0, sizeof *run);
  double t_start = now_s();
  char err[1024];
  mdc_cli__paths paths;
  if (mdc_cli__collect(o->paths, o->n_paths, &paths, err, sizeof err)) {
    fprintf(stderr, "mdc replay: %s\n", err);
    return MDC_EXIT_USAGE;
  }
  mdc_cli__baseline base = {0};
  if (o->baseline && mdc_cli__baseline_load(o->baseline, &base, err, sizeof err)) {
    fprintf(stderr, "mdc replay: %s\n", err);
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
    snprintf(c->name, sizeof c->name, "%s", name);
    c->case_id = -1;
  }
  free(paths.v);

  int rc = MDC_EXIT_OK;
  probe_msg pm;
  if (probe(o->driver, o->config, o->timeout_s, &pm, err, sizeof err)) {
    fprintf(stderr, "mdc replay: driver %s: %s\n", o->driver ? o->driver : "(reference)", err);
    mdc_cli__baseline_free(&base);
    return MDC_EXIT_USAGE;
  }
  snprintf(run->driver_name, sizeof run->driver_name, "%s", pm.name);
  snprintf(run->driver_version, sizeof run->driver_version, "%s", pm.version);
  snprintf(run->backend, sizeof run->backend, "%.31s", pm.opened ? pm.caps.backend : "unknown");
  snprintf(run->device, sizeof run->device, "%.63s", pm.opened ? pm.caps.device_name : "unknown");
  if (!pm.opened && !o->quiet)
    fprintf(stderr, "mdc replay: warning: the driver loaded but the probe could not open a device: %s\n", pm.err);

  /* The store: a case row is committed before its case starts, so a killed run leaves it
   * 'Running'. A store failure stops the run (no new cases) but keeps what is written. */
  mdc_store *store = NULL;
  int64_t run_id = -1;
  int store_ok = 1;
  if (o->db) {
    if (strcmp(o->db, ":memory:") != 0 && mdc_cli__mkdir_parent(o->db) != 0) {
      fprintf(stderr, "mdc replay: cannot create the folder of '%s': %s\n", o->db, strerror(errno));
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    if (mdc_store_open(o->db, &store, err, sizeof err)) {
      fprintf(stderr, "mdc replay: results store: %s\n", err);
      mdc_cli__baseline_free(&base);
      return MDC_EXIT_STORE;
    }
    uint64_t seed = 0;
    int has_seed = config_seed(o->config, &seed);
    mdc_run_info ri = {.kind = o->kind ? o->kind : "replay", .driver_name = pm.name,
                       .driver_version = pm.version, .driver_path = o->driver ? o->driver : "(reference)",
                       .backend = run->backend, .device = run->device, .config = o->config,
                       .seed = seed, .has_seed = has_seed,
                       .shard_index = o->shard_n > 1 ? o->shard_i : 0,
                       .shard_count = o->shard_n > 1 ? o->shard_n : 1};
    if (mdc_store_run_begin(store, &ri, &run_id, run->uuid)) {
      fprintf(stderr, "mdc replay: results store: %s\n", mdc_store_error(store));
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
    fprintf(stderr, "mdc replay: out of memory\n");
    exit(MDC_EXIT_USAGE);
  }
  size_t qhead = 0, qtail = 0, done = 0;
  for (size_t i = 0; i < run->n; i++) queue[qtail++] = i;
  int active = 0, tty = !o->quiet && isatty(STDERR_FILENO);
  mdc_result *first = calloc(run->n ? run->n : 1, sizeof *first); /* first attempt's result */
  mdc_status *first_status = calloc(run->n ? run->n : 1, sizeof *first_status);
  if (!first || !first_status) exit(MDC_EXIT_USAGE);

  /* SIGINT/SIGTERM: stop starting cases, kill the running ones (their rows stay Running), mark
   * the run interrupted. No SA_RESTART, so poll() returns at once with EINTR. */
  struct sigaction stop_act = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop_act.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop_act, &old_int);
  sigaction(SIGTERM, &stop_act, &old_term);
  while (active > 0 || (qhead < qtail && store_ok)) {
    if (stop_signal) {
      for (int i = 0; i < active; i++) {
        kill(slots[i].pid, SIGKILL);
        close(slots[i].fd);
        while (waitpid(slots[i].pid, NULL, 0) < 0 && errno == EINTR) {}
      }
      active = 0;
      break;
    }
    while (active < jobs && qhead < qtail && store_ok) {
      size_t ci = queue[qhead++];
      mdc_cli__case *c = &run->cases[ci];
      if (store && c->attempts == 0 &&
          mdc_store_case_begin(store, run_id, c->name, c->path, &c->case_id)) {
        fprintf(stderr, "%smdc replay: results store: %s (stopping; results written so far are kept)\n",
                tty ? "\n" : "", mdc_store_error(store));
        store_ok = 0;
        break;
      }
      if (start_case(o, c, ci, &slots[active])) {
        fprintf(stderr, "mdc replay: fork: %s\n", strerror(errno));
        exit(MDC_EXIT_USAGE);
      }
      c->attempts++;
      active++;
      progress(run, done, c->name, tty);
    }
    if (!active) break;
    double next = slots[0].deadline;
    for (int i = 0; i < active; i++) {
      pfds[i].fd = slots[i].fd;
      pfds[i].events = POLLIN;
      pfds[i].revents = 0;
      if (slots[i].deadline < next) next = slots[i].deadline;
    }
    double left = next - now_s();
    int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
    int r = poll(pfds, (nfds_t)active, ms);
    if (r < 0 && errno != EINTR) {
      fprintf(stderr, "mdc replay: poll: %s\n", strerror(errno));
      exit(MDC_EXIT_USAGE);
    }
    if (stop_signal) continue; /* a child the same signal ended is not a Crash: it was stopped */
    double t = now_s();
    for (int i = 0; i < active;) {
      slot *s = &slots[i];
      int ended = 0, timed_out = 0;
      if (r > 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        char tmp[512];
        size_t want = sizeof s->res - s->got;
        ssize_t k = want ? read(s->fd, (char *)&s->res + s->got, want) : read(s->fd, tmp, sizeof tmp);
        if (k > 0 && want) s->got += (size_t)k;
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) ended = 1;
      }
      if (!ended && t >= s->deadline) timed_out = 1;
      if (!ended && !timed_out) {
        i++;
        continue;
      }
      mdc_cli__case *c = &run->cases[s->ci];
      mdc_result res;
      mdc_status st = finish_case(s, timed_out, o->timeout_s, &res);
      double dur = now_s() - s->t0;
      c->duration_s += dur;
      int listed = mdc_cli__baseline_has(&base, c->name) || mdc_cli__baseline_has(&base, c->path);
      int finished = 1;
      if (c->attempts == 1) {
        first[s->ci] = res;
        first_status[s->ci] = st;
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
        set_status(run, c, final);
        done++;
        char event[64], driver_msg[sizeof c->res.message];
        split_message(c, event, sizeof event, driver_msg, sizeof driver_msg);
        mdc_case_result cr = {.status = mdc_cli__status_name(final), .duration_s = c->duration_s,
                              .line = c->res.line, .message = c->res.message,
                              .expected = c->res.expected[0] ? c->res.expected : NULL,
                              .actual = c->res.actual[0] ? c->res.actual : NULL,
                              .event = event[0] ? event : NULL, .rule = c->rules,
                              .driver_message = driver_msg[0] ? driver_msg : NULL};
        if (store && store_ok && c->case_id >= 0 && mdc_store_case_finish(store, c->case_id, &cr)) {
          fprintf(stderr, "%smdc replay: results store: %s (stopping; results written so far are kept)\n",
                  tty ? "\n" : "", mdc_store_error(store));
          store_ok = 0;
        }
        progress(run, done, c->name, tty);
      }
      slots[i] = slots[--active];
      pfds[i] = pfds[active];
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  run->interrupted_by = stop_signal;
  if (tty) fprintf(stderr, "\r\033[K");
  run->duration_s = now_s() - t_start;
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
    fprintf(stderr, "mdc replay: results store: %s\n", mdc_store_error(store));
    store_ok = 0;
  }
  if (store) mdc_store_close(store);
  if (!o->quiet) {
    if (o->json) {
      summary(stderr, o, run);
      print_json(o, run, store_ok);
    } else {
      summary(stdout, o, run);
    }
  }
  free(slots);
  free(pfds);
  free(queue);
  free(first);
  free(first_status);
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
          "  --quiet          no progress and no summary\n\n"
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
      {0, 0, 0, 0}};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  mdc_cli__replay_opts o = {.config = "backend=auto", .db = "results/mdc.db", .timeout_s = 30,
                        .shard_i = 0, .shard_n = 1, .jobs = ncpu > 0 ? (int)ncpu : 1,
                        .rerun_failures = 1, .kind = "replay"};
  int no_db = 0, c;
  long v;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
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
