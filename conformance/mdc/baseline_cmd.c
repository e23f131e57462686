/* baseline_cmd.c - `mdc baseline write`: a known-failures file (the --baseline format: one trace
 * name a line, `#` comments) made from a stored run, as deqp-runner writes its baseline from a
 * run's failures. Listed: every case whose status made the run fail (Fail, Crash, Timeout,
 * TraceError, OrderDependent) and the known failures it still has (ExpectedFail); not listed:
 * what is not a failure of the driver (Pass, Flake, Warn, NotSupported, Skipped), UnexpectedPass
 * (it passes now) and cases that never ended. A header names the run, the driver build it judged
 * and the date, so a baseline in a repository says where it came from. Reads the store
 * read-only; --out is written whole or not at all (a temporary file renamed over it). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mdc/store.h"
#include "mdc_int.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: mdc baseline write [--db FILE] [--run UUID|latest] [--out FILE]\n"
          "Writes a known-failures file for mdc replay --baseline from a stored run: the cases whose\n"
          "status made it fail (Fail, Crash, Timeout, TraceError, OrderDependent) and its\n"
          "ExpectedFail cases, one name a line with the status and message as a comment, under a\n"
          "header naming the run, the driver build (build-id, SHA-256) and the date. Warn,\n"
          "NotSupported, Skipped, Flake and UnexpectedPass cases are not listed.\n\n"
          "  --db FILE   results store (default results/mdc.db); read only\n"
          "  --run REF   a run uuid, a unique prefix (4+ characters) or latest (default: the latest\n"
          "              replay run)\n"
          "  --out FILE  the file to write (default: stdout); replaced whole\n\n"
          "exit status: 0 written, 2 bad usage, a missing store, an unknown run, a run that is not\n"
          "a finished replay run, 3 results store error or a write that failed\n");
}

/* The statuses a baseline lists. */
static int listed(int st) {
  switch (st) {
    case MDC_CS_FAIL: case MDC_CS_CRASH: case MDC_CS_TIMEOUT: case MDC_CS_TRACE_ERROR: case MDC_CS_ORDER_DEPENDENT:
    case MDC_CS_EXPECTED_FAIL: return 1;
    default: return 0;
  }
}

/* A comment's text: one line, no control characters, at most max bytes. */
static void comment_text(FILE *f, const char *s, size_t max) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && n < max; p++, n++)
    fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
  if (s && strlen(s) > max) fputs("...", f);
}

static const char *or_dash(const char *s) { return s && s[0] ? s : "-"; }

/* Writes the file to f; 0, or -1 with a store error (message in the store). */
static int write_baseline(mdc_store *s, const mdc_run_row *run, const uint32_t *k, FILE *f) {
  char now[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  uint32_t n = 0, cases = 0;
  for (int i = 0; i < MDC_CS_COUNT; i++) {
    cases += k[i];
    if (listed(i)) n += k[i];
  }
  fprintf(f, "# mdc baseline: the known failures of run %s (written by mdc baseline write)\n", run->uuid);
  fprintf(f, "# driver: ");
  comment_text(f, or_dash(run->driver_name), 100);
  fprintf(f, " ");
  comment_text(f, or_dash(run->driver_version), 60);
  fprintf(f, ", file ");
  comment_text(f, or_dash(run->driver_path), 300);
  fprintf(f, "\n# driver build: build-id %s, sha256 %s\n", or_dash(run->driver_build_id), or_dash(run->driver_sha256));
  fprintf(f, "# backend: ");
  comment_text(f, or_dash(run->backend), 40);
  fprintf(f, " (");
  comment_text(f, or_dash(run->device), 80);
  fprintf(f, "), config ");
  comment_text(f, or_dash(run->config), 300);
  fprintf(f, "\n# run started %s on ", or_dash(run->started_at));
  comment_text(f, or_dash(run->host), 100);
  fprintf(f, ", mdc revision %s; %u case%s", or_dash(run->revision), cases, cases == 1 ? "" : "s");
  if (run->selection) fprintf(f, ", selection %.16s (%u names)", run->selection, run->selection_n);
  fprintf(f, "\n# written %s: %u case%s listed", now, n, n == 1 ? "" : "s");
  const char *sep = " (";
  for (int i = 0; i < MDC_CS_COUNT; i++)
    if (listed(i) && k[i]) fprintf(f, "%s%s %u", sep, mdc_store_status_name((mdc_case_status)i), k[i]), sep = ", ";
  fprintf(f, "%s\n# not listed: Warn, NotSupported, Skipped and Flake (not failures of this run), UnexpectedPass "
             "(passing now)\n\n", n ? ")" : "");
  mdc_case_query q = {.run_id = run->id, .order = MDC_CASES_BY_NAME};
  mdc_case_iter *it;
  if (mdc_store_cases_open(s, &q, &it) != 0) return -1;
  mdc_case_row c;
  int rc;
  while ((rc = mdc_store_cases_next(it, &c)) == 1) {
    int st = mdc_store_status_parse(c.status);
    if (!listed(st)) continue;
    fprintf(f, "%s  # %s", c.name, c.status);
    if (c.message && c.message[0]) {
      fprintf(f, ": ");
      comment_text(f, c.message, 160);
    }
    fputc('\n', f);
  }
  mdc_store_cases_close(it);
  return rc < 0 ? -1 : 0;
}

int mdc_cli__cmd_baseline(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return MDC_EXIT_OK;
  }
  if (argc < 2 || strcmp(argv[1], "write") != 0) {
    fprintf(stderr, "mdc baseline: unknown or missing subcommand%s%s (mdc baseline write [--run R] [--out FILE])\n",
            argc >= 2 ? " " : "", argc >= 2 ? argv[1] : "");
    return MDC_EXIT_USAGE;
  }
  static const struct option opts[] = {{"db", required_argument, 0, 'd'}, {"run", required_argument, 0, 'r'},
                                       {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *db = "results/mdc.db", *ref = NULL, *out = NULL;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': db = optarg; break;
      case 'r': ref = optarg; break;
      case 'o': out = optarg; break;
      case 'h': usage(stdout); return MDC_EXIT_OK;
      case ':':
        fprintf(stderr, "mdc baseline write: option '%s' needs a value\n", argv[optind]);
        return MDC_EXIT_USAGE;
      default:
        fprintf(stderr, "mdc baseline write: unknown option '%s' (see mdc baseline --help)\n", argv[optind]);
        return MDC_EXIT_USAGE;
    }
  }
  if (optind < argc - 1) {
    fprintf(stderr, "mdc baseline write: unexpected argument '%s'\n", argv[optind + 1]);
    return MDC_EXIT_USAGE;
  }
  if (out && !out[0]) {
    fprintf(stderr, "mdc baseline write: --out '': want a file name\n");
    return MDC_EXIT_USAGE;
  }
  char err[1024];
  mdc_store *s = NULL;
  int rc = mdc_store_open_read(db, &s, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "mdc baseline write: %s\n", err);
    return rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  }
  mdc_run_row run;
  rc = mdc_store_run_find(s, ref ? ref : "latest", ref ? NULL : "replay", &run);
  int code = MDC_EXIT_OK;
  uint32_t k[MDC_CS_COUNT];
  if (rc != 0) {
    fprintf(stderr, "mdc baseline write: %s\n", ref ? mdc_store_error(s) : "the store holds no replay run");
    code = rc == MDC_STORE_NOT_FOUND ? MDC_EXIT_USAGE : MDC_EXIT_STORE;
  } else if (strcmp(run.kind, "replay") != 0) {
    fprintf(stderr, "mdc baseline write: run %s is a %s run, not a replay: a baseline lists traces\n", run.uuid, run.kind);
    code = MDC_EXIT_USAGE;
  } else if (!run.ended_at || run.interrupted) {
    /* A baseline from part of a run would leave out the failures of the cases it did not run. */
    fprintf(stderr, "mdc baseline write: run %s %s: a baseline from it would miss the failures of the cases it did "
            "not finish\n", run.uuid, run.interrupted ? "was interrupted" : "never ended");
    code = MDC_EXIT_USAGE;
  } else if (mdc_store_run_counts(s, run.id, k) != 0) {
    fprintf(stderr, "mdc baseline write: %s\n", mdc_store_error(s));
    code = MDC_EXIT_STORE;
  }
  if (code != MDC_EXIT_OK) {
    mdc_store_run_row_free(&run);
    mdc_store_close(s);
    return code;
  }
  char tmp[PATH_MAX + 32] = "";
  FILE *f = stdout;
  if (out) {
    int fd = -1;
    if (mdc_cli__mkdir_parent(out) != 0 || snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out) >= (int)sizeof tmp ||
        (fd = mkstemp(tmp)) < 0 || !(f = fdopen(fd, "w"))) {
      fprintf(stderr, "mdc baseline write: --out '%s': %s\n", out, strerror(errno));
      if (fd >= 0) close(fd), unlink(tmp);
      mdc_store_run_row_free(&run);
      mdc_store_close(s);
      return MDC_EXIT_STORE;
    }
  }
  if (write_baseline(s, &run, k, f) != 0) {
    fprintf(stderr, "mdc baseline write: %s\n", mdc_store_error(s));
    code = MDC_EXIT_STORE;
  }
  int bad = ferror(f) || fflush(f) != 0;
  if (out) {
    fchmod(fileno(f), 0644);
    bad |= fclose(f) != 0;
    if (!bad && code == MDC_EXIT_OK && rename(tmp, out) != 0) bad = 1;
    if (bad || code != MDC_EXIT_OK) unlink(tmp);
  }
  if (bad && code == MDC_EXIT_OK) {
    fprintf(stderr, "mdc baseline write: cannot write '%s': %s\n", out ? out : "stdout", strerror(errno ? errno : EIO));
    code = MDC_EXIT_STORE;
  }
  if (code == MDC_EXIT_OK && out)
    fprintf(stderr, "mdc baseline write: %s: the known failures of run %.8s\n", out, run.uuid);
  mdc_store_run_row_free(&run);
  mdc_store_close(s);
  return code;
}
