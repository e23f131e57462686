/* bench_main.c - md_bench: runs the driver's benchmarks and prints a table of figures against
 * their targets (bench/README.md). Targets are reported, not enforced: the exit status is
 * 0 unless a benchmark could not run.
 *
 *   md_bench [--quick] [--filter NAME] [--markdown FILE]
 *
 * --quick runs fewer repetitions (under 30 s); --filter runs the benchmarks whose name
 * contains NAME (token, copy, execute, threads, memory, async, scale); --markdown also writes
 * the table as Markdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct bench {
  const char *name;
  int (*run)(const mdb_opts *o);
  const char *what;
} bench;

static const bench benches[] = {
    {"token", mdb_bench_token, "token validation at 1, 1K, 1M live buffers"},
    {"copy", mdb_bench_copy, "copy_from / copy_to on sim vs memcpy"},
    {"execute", mdb_bench_execute, "execute overhead, 1-operation model"},
    {"threads", mdb_bench_threads, "2 threads on one shared input vs 1"},
    {"memory", mdb_bench_memory, "bookkeeping per live buffer (1M buffers)"},
    {"async", mdb_bench_async, "execute_async on the sim's streams vs execute"},
    {"scale", mdb_bench_scale, "fast-path execute overhead at 1/1K/1M buffers, 1/16/256 clients"},
};
#define N_BENCH (sizeof benches / sizeof benches[0])

static void usage(FILE *f) {
  fprintf(f, "usage: md_bench [--quick] [--filter NAME] [--markdown FILE]\nbenchmarks:\n");
  for (size_t i = 0; i < N_BENCH; i++) fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].what);
}

int main(int argc, char **argv) {
  mdb_opts o = {0};
  const char *markdown = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
    } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      o.filter = argv[++i];
    } else if (strncmp(argv[i], "--filter=", 9) == 0) {
      o.filter = argv[i] + 9;
    } else if (strcmp(argv[i], "--markdown") == 0 && i + 1 < argc) {
      markdown = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "md_bench: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  char machine[256];
  mdb_machine(machine, sizeof machine);
  printf("md_bench%s: %s\n", o.quick ? " --quick" : "", machine);
  printf("(medians over repeated runs; ratios are against a baseline measured in the same run)\n\n");
  uint64_t t0 = mdb_now_ns();
  int ran = 0;
  for (size_t i = 0; i < N_BENCH; i++) {
    if (o.filter && !strstr(benches[i].name, o.filter)) continue;
    ran++;
    benches[i].run(&o);   /* failures are counted by mdb_fail */
  }
  if (!ran) {
    fprintf(stderr, "md_bench: no benchmark matches '%s'\n", o.filter);
    usage(stderr);
    return 2;
  }
  mdb_table_print();
  printf("total %.1f s\n", (double)(mdb_now_ns() - t0) / 1e9);
  if (markdown && mdb_table_markdown(markdown, machine) != 0) fprintf(stderr, "md_bench: cannot write %s\n", markdown);
  mdb_scale_close();
  mdb_pop_close();
  return mdb_failures() ? 1 : 0;
}
