/* fz_main.c - md_fuzz_replay: the plain binary that runs fuzz inputs from files through a
 * target's harness (no fuzzer, no instrumentation needed): the seed corpora and exported
 * findings as ordinary tests, the triage's reproduction counts, and the writing of a finding
 * (or any input) as a trace. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fz_harness.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: md_fuzz_replay --target T [options] INPUT...\n"
          "Runs each input (a file, or every file of a folder) through target T's harness\n"
          "(tokens, shapes, concurrency, trace) and prints one line per input:\n"
          "  ok INPUT | finding INPUT SIGNATURE MESSAGE | error INPUT MESSAGE\n\n"
          "  --driver SO     the driver (default: the reference driver)\n"
          "  --config STR    open_device keys (default backend=sim)\n"
          "  --repeat N      run each input N times; prints 'reproduced K/N SIGNATURE' per input\n"
          "  --trace OUT     write the (first) input as a trace: with its finding, up to the call\n"
          "                  that found it, expecting what SPEC allows (--mode oracle, default),\n"
          "                  or what the driver returned (--mode observed), or no expectation\n"
          "                  (--mode static); the trace target copies the input itself\n"
          "  --name NAME     the trace's header name (default fuzz/<target>/<input file name>)\n"
          "  --expect-clean  exit 1 on any finding (the default); --allow-findings: exit 0\n"
          "  --timeout S     abort an input that runs longer than S seconds (a hang), default 10\n"
          "  --quiet         print only findings and errors\n\n"
          "exit status: 0 no finding, 1 a finding, 2 bad usage or an input that could not run\n");
}

static fz_harness *H;
static const char *current_input = "";

static void on_alarm(int sig) {
  (void)sig;
  const char *op = "";
  int c = H ? mdc_fz_harness_current(H, &op) : -1;
  char msg[512];
  int n = snprintf(msg, sizeof msg, "hang %s: no end after the timeout, in call %d (%s)\n", current_input, c, op);
  if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {}
  _exit(3);
}

static int read_file(const char *path, uint8_t **data, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      uint8_t *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return -1;
  *data = buf;
  *n = len;
  return 0;
}

typedef struct list {
  char **v;
  size_t n, cap;
} list;

static void push(list *l, const char *s) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) exit(2);
  }
  l->v[l->n++] = strdup(s);
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int collect(const char *path, list *l) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (S_ISREG(st.st_mode)) {
    push(l, path);
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) return -1;
  DIR *d = opendir(path);
  if (!d) return -1;
  struct dirent *e;
  size_t first = l->n;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) push(l, p);
  }
  closedir(d);
  if (l->n > first) qsort(l->v + first, l->n - first, sizeof *l->v, cmp);
  return 0;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"target", required_argument, 0, 't'}, {"driver", required_argument, 0, 'd'},
                                       {"config", required_argument, 0, 'c'}, {"repeat", required_argument, 0, 'r'},
                                       {"trace", required_argument, 0, 'T'},  {"mode", required_argument, 0, 'm'},
                                       {"name", required_argument, 0, 'n'},   {"quiet", no_argument, 0, 'q'},
                                       {"allow-findings", no_argument, 0, 'a'}, {"expect-clean", no_argument, 0, 'e'},
                                       {"timeout", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *target = NULL, *driver = NULL, *config = NULL, *trace = NULL, *name = NULL;
  int repeat = 1, mode = FZ_TRACE_ORACLE, quiet = 0, allow = 0, c;
  unsigned timeout = 10;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 't': target = optarg; break;
      case 'd': driver = optarg; break;
      case 'c': config = optarg; break;
      case 'r': repeat = atoi(optarg); break;
      case 'T': trace = optarg; break;
      case 'n': name = optarg; break;
      case 'q': quiet = 1; break;
      case 'a': allow = 1; break;
      case 'e': allow = 0; break;
      case 'o': timeout = (unsigned)atoi(optarg); break;
      case 'm':
        if (!strcmp(optarg, "oracle")) mode = FZ_TRACE_ORACLE;
        else if (!strcmp(optarg, "observed")) mode = FZ_TRACE_OBSERVED;
        else if (!strcmp(optarg, "static")) mode = FZ_TRACE_STATIC;
        else {
          fprintf(stderr, "md_fuzz_replay: --mode '%s': oracle, observed or static\n", optarg);
          return 2;
        }
        break;
      case 'h': usage(stdout); return 0;
      default:
        fprintf(stderr, "md_fuzz_replay: unknown option or missing value '%s'\n", argv[optind - 1]);
        usage(stderr);
        return 2;
    }
  }
  int t = target ? mdc_fz_harness_target_parse(target) : -1;
  if (t < 0) {
    fprintf(stderr, "md_fuzz_replay: --target %s: want tokens, shapes, concurrency or trace\n", target ? target : "(missing)");
    return 2;
  }
  if (repeat < 1 || repeat > 100000) {
    fprintf(stderr, "md_fuzz_replay: --repeat wants 1..100000\n");
    return 2;
  }
  if (optind >= argc) {
    fprintf(stderr, "md_fuzz_replay: no INPUT given\n");
    return 2;
  }
  list inputs = {0};
  for (int i = optind; i < argc; i++)
    if (collect(argv[i], &inputs)) {
      fprintf(stderr, "md_fuzz_replay: '%s': not a file or folder: %s\n", argv[i], strerror(errno));
      return 2;
    }
  char err[640];
  H = mdc_fz_harness_new(t, driver, config, err, sizeof err);
  if (!H) {
    fprintf(stderr, "md_fuzz_replay: %s\n", err);
    return 2;
  }
  signal(SIGALRM, on_alarm);
  int found = 0, bad = 0;
  for (size_t i = 0; i < inputs.n; i++) {
    uint8_t *data;
    size_t n;
    current_input = inputs.v[i];
    if (read_file(inputs.v[i], &data, &n)) {
      printf("error %s cannot read: %s\n", inputs.v[i], strerror(errno));
      bad = 1;
      continue;
    }
    fz_finding f, first = {0};
    int hits = 0, ran = 0;
    for (int k = 0; k < repeat; k++) {
      alarm(timeout);
      int rc = mdc_fz_harness_one(H, data, n, &f, err, sizeof err);
      alarm(0);
      if (rc) {
        printf("error %s %s\n", inputs.v[i], err);
        bad = 1;
        break;
      }
      ran++;
      if (f.found) {
        if (!hits) first = f;
        hits += !strcmp(f.signature, first.signature);
      }
    }
    if (trace && i == 0 && mdc_fz_harness_export(H, data, n, trace, inputs.v[i], mode, name, timeout, err, sizeof err)) {
      fprintf(stderr, "md_fuzz_replay: %s\n", err);
      bad = 1;
    }
    if (ran && repeat > 1) printf("reproduced %d/%d %s %s\n", hits, repeat, hits ? first.signature : "-", inputs.v[i]);
    else if (ran && first.found) printf("finding %s %s %s\n", inputs.v[i], first.signature, first.message);
    else if (ran && !quiet) printf("ok %s\n", inputs.v[i]);
    fflush(stdout);
    found |= hits > 0;
    free(data);
  }
  for (size_t i = 0; i < inputs.n; i++) free(inputs.v[i]);
  free(inputs.v);
  mdc_fz_harness_free(H);
  if (bad) return 2;
  return found && !allow ? 1 : 0;
}
