/* bench_util.c - what the benchmarks share: timing, statistics, the result table, driver
 * sessions, memfd pools, models and memory readings. */
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ---- time and statistics ---- */

uint64_t mdb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double mdb_median(double *v, size_t n) {
  if (n == 0) return 0.0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

uint64_t mdb_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static volatile uint64_t sink;
void mdb_sink(uint64_t v) { sink += v; }

/* ---- the result table ---- */

typedef struct row {
  char name[40], unit[12], target[32], note[160];
  double measured, baseline, ratio;
  mdb_verdict v;
} row;

static row rows[64];
static size_t n_rows;
static int failures;

static const char *verdict_name(mdb_verdict v) {
  return v == MDB_PASS ? "PASS" : v == MDB_MISS ? "MISS" : "info";
}

static void fmt_num(char *buf, size_t len, double x) {
  if (isnan(x)) snprintf(buf, len, "-");
  else if (fabs(x) >= 1000.0 || x == floor(x)) snprintf(buf, len, "%.0f", x);
  else if (fabs(x) >= 10.0) snprintf(buf, len, "%.1f", x);
  else snprintf(buf, len, "%.2f", x);
}

static void print_row(FILE *f, const row *r) {
  char m[32], b[32], q[32];
  fmt_num(m, sizeof m, r->measured);
  fmt_num(b, sizeof b, r->baseline);
  if (isnan(r->ratio)) snprintf(q, sizeof q, "-");
  else snprintf(q, sizeof q, "%.2fx", r->ratio);
  fprintf(f, "%-28s %10s %10s %-6s %8s  %-22s %-4s  %s\n", r->name, m, b, r->unit, q, r->target,
          verdict_name(r->v), r->note);
}

static void print_header(FILE *f) {
  fprintf(f, "%-28s %10s %10s %-6s %8s  %-22s %-4s  %s\n", "benchmark", "measured", "baseline", "unit",
          "ratio", "target", "", "note");
}

void mdb_row(const char *name, const char *unit, double measured, double baseline, double ratio,
             const char *target, mdb_verdict v, const char *note_fmt, ...) {
  if (n_rows == sizeof rows / sizeof rows[0]) return;
  row *r = &rows[n_rows++];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->unit, sizeof r->unit, "%s", unit);
  snprintf(r->target, sizeof r->target, "%s", target);
  r->measured = measured;
  r->baseline = baseline;
  r->ratio = ratio;
  r->v = v;
  if (note_fmt) {
    va_list ap;
    va_start(ap, note_fmt);
    vsnprintf(r->note, sizeof r->note, note_fmt, ap);
    va_end(ap);
  }
  print_row(stdout, r);
  fflush(stdout);
}

void mdb_table_print(void) {
  printf("\n== md_bench results ==\n");
  print_header(stdout);
  for (size_t i = 0; i < n_rows; i++) print_row(stdout, &rows[i]);
  int pass = 0, miss = 0;
  for (size_t i = 0; i < n_rows; i++) pass += rows[i].v == MDB_PASS, miss += rows[i].v == MDB_MISS;
  printf("%d PASS, %d MISS, %d could not run (targets are reported, not enforced)\n", pass, miss, failures);
}

int mdb_table_markdown(const char *path, const char *machine) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "Machine: %s\n\n", machine);
  fprintf(f, "| benchmark | measured | baseline | unit | ratio | target | verdict | note |\n");
  fprintf(f, "|---|---:|---:|---|---:|---|---|---|\n");
  for (size_t i = 0; i < n_rows; i++) {
    const row *r = &rows[i];
    char m[32], b[32], q[32];
    fmt_num(m, sizeof m, r->measured);
    fmt_num(b, sizeof b, r->baseline);
    if (isnan(r->ratio)) snprintf(q, sizeof q, "-");
    else snprintf(q, sizeof q, "%.2fx", r->ratio);
    fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r->name, m, b, r->unit, q, r->target,
            verdict_name(r->v), r->note);
  }
  fclose(f);
  return 0;
}

void mdb_fail(const char *bench, const char *fmt, ...) {
  failures++;
  fprintf(stderr, "md_bench: %s: could not run: ", bench);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int mdb_failures(void) { return failures; }

/* ---- a driver session ---- */

int mdb_env_open(mdb_env *env, const char *bench, const char *config) {
  memset(env, 0, sizeof *env);
  env->drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_status st = env->drv->open_device(config, &env->dev);
  if (st != MD_NONE) {
    mdb_fail(bench, "open_device(\"%s\"): status %d: %s", config, (int)st, env->drv->last_error(NULL));
    return -1;
  }
  st = env->drv->open_client(env->dev, &env->client);
  if (st != MD_NONE) {
    mdb_fail(bench, "open_client: status %d: %s", (int)st, env->drv->last_error(env->dev));
    env->drv->close_device(env->dev);
    env->dev = NULL;
    return -1;
  }
  return 0;
}

void mdb_env_close(mdb_env *env) {
  if (!env->dev) return;
  if (env->client) env->drv->close_client(env->dev, env->client, NULL);
  env->drv->close_device(env->dev);
  env->dev = NULL;
  env->client = 0;
}

const md_model *mdb_relu_model(mdb_model *b, uint32_t rank, const uint32_t *dims) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < 2; i++) {
    if (rank) memcpy(b->dims[i], dims, rank * sizeof *dims);
    b->operands[i].type = MD_TENSOR_FLOAT32;
    b->operands[i].rank = rank;
    b->operands[i].dims = b->dims[i];
  }
  b->operands[0].lifetime = MD_SUBGRAPH_INPUT;
  b->operands[1].lifetime = MD_SUBGRAPH_OUTPUT;
  b->op_in[0] = 0;
  b->op_out[0] = 1;
  b->op.type = MD_OP_RELU;
  b->op.n_inputs = 1;
  b->op.inputs = b->op_in;
  b->op.n_outputs = 1;
  b->op.outputs = b->op_out;
  b->model.n_operands = 2;
  b->model.operands = b->operands;
  b->model.n_operations = 1;
  b->model.operations = &b->op;
  b->model.n_inputs = 1;
  b->model.inputs = b->op_in;
  b->model.n_outputs = 1;
  b->model.outputs = b->op_out;
  return &b->model;
}

md_handle mdb_prepare(const mdb_env *env, const char *bench, const md_model *m) {
  md_handle p = 0;
  md_status st = env->drv->prepare_model(env->dev, env->client, m, &p);
  if (st != MD_NONE) {
    mdb_fail(bench, "prepare_model: status %d: %s", (int)st, env->drv->last_error(env->dev));
    return 0;
  }
  return p;
}

md_token mdb_alloc_input(const mdb_env *env, md_handle prepared, md_status *stp) {
  md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_token t = 0;
  md_status st = env->drv->allocate(env->dev, env->client, NULL, &prepared, 1, &role, 1, NULL, 0, &t);
  if (stp) *stp = st;
  return st == MD_NONE ? t : 0;
}

md_token mdb_alloc_output(const mdb_env *env, md_handle prepared, md_status *stp) {
  md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
  md_token t = 0;
  md_status st = env->drv->allocate(env->dev, env->client, NULL, &prepared, 1, NULL, 0, &role, 1, &t);
  if (stp) *stp = st;
  return st == MD_NONE ? t : 0;
}

/* ---- pools ---- */

int mdb_pool_open(mdb_pool *p, size_t size, uint8_t fill) {
  memset(p, 0, sizeof *p);
  p->fd = memfd_create("md_bench", MFD_CLOEXEC);
  if (p->fd < 0) return -1;
  if (ftruncate(p->fd, (off_t)size) != 0) goto fail;
  p->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
  if (p->map == MAP_FAILED) {
    p->map = NULL;
    goto fail;
  }
  memset(p->map, fill, size);
  p->size = size;
  p->mem.kind = MD_MEM_ASHMEM;
  p->mem.fd = p->fd;
  p->mem.offset = 0;
  p->mem.size = size;
  p->mem.prot = PROT_READ | PROT_WRITE;
  return 0;
fail:
  close(p->fd);
  p->fd = -1;
  return -1;
}

void mdb_pool_close(mdb_pool *p) {
  if (p->map) munmap(p->map, p->size);
  if (p->fd >= 0) close(p->fd);
  p->map = NULL;
  p->fd = -1;
}

/* ---- memory ---- */

long mdb_status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  size_t n = strlen(field);
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = strtol(line + n + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

long mdb_mapping_rss_kb(const void *addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  uintptr_t a = (uintptr_t)addr;
  int inside = 0;
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    /* A mapping's header line: "lo-hi perms offset dev inode [path]". */
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      if (inside) break;
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && strncmp(line, "Rss:", 4) == 0) {
      kb = strtol(line + 4, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

/* ---- machine ---- */

int mdb_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
  return CPU_COUNT(&set);
}

const char *mdb_machine(char *buf, size_t len) {
  char model[96] = "unknown CPU";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) {
          c += 1 + (c[1] == ' ');
          c[strcspn(c, "\n")] = '\0';
          snprintf(model, sizeof model, "%s", c);
        }
        break;
      }
    }
    fclose(f);
  }
  struct utsname u;
  const char *rel = uname(&u) == 0 ? u.release : "?";
  long mem_kb = -1;
  f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    if (fgets(line, sizeof line, f)) sscanf(line, "MemTotal: %ld", &mem_kb);
    fclose(f);
  }
  snprintf(buf, len, "%d CPUs (%s), %.0f GiB RAM, Linux %s", mdb_cpus(), model,
           mem_kb > 0 ? (double)mem_kb / (1024.0 * 1024.0) : 0.0, rel);
  return buf;
}
