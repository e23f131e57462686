/* fz_seeds.c - md_fuzz_seeds: makes a target's seed corpus and dictionary at build time, from
 * the trace corpus (no binary is committed). A program target gets every trace the encoding
 * can express, read into a program and encoded (each checked to decode back to the same
 * program); the trace target gets the trace files themselves. The dictionary comes from the
 * call table (mdc/calls.h), so it names every call and key the encoding and the format have. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fz_codec.h"
#include "fz_harness.h"
#include "mdc/engine.h"

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct list {
  char **v;
  size_t n, cap;
} list;

static void walk(const char *path, list *l) {
  struct stat st;
  if (stat(path, &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    size_t n = strlen(path);
    if (n > 6 && !strcmp(path + n - 6, ".jsonl")) {
      if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) exit(2);
      }
      l->v[l->n++] = strdup(path);
    }
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  const char *base = strrchr(path, '/');
  if (base && !strcmp(base + 1, "blobs")) return;
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    walk(p, l);
  }
  closedir(d);
}

static char *static_trace(const mdc_fz_prog *p, mdc_fz_target t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  fz_trace_opts o = {.target = t, .mode = FZ_TRACE_STATIC, .name = "x"};
  mdc_fz_trace_write(f, p, NULL, &o);
  fclose(f);
  return buf;
}

static void dict_bytes(FILE *f, const char *name, const uint8_t *b, size_t n) {
  fprintf(f, "%s=\"", name);
  for (size_t i = 0; i < n; i++) fprintf(f, "\\x%02x", b[i]);
  fprintf(f, "\"\n");
}

static void dict_str(FILE *f, const char *name, const char *s) {
  fprintf(f, "%s=\"", name);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else fputc(*s, f);
  }
  fprintf(f, "\"\n");
}

static int write_dict(const char *path, int target) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# %s target dictionary, written by md_fuzz_seeds from the call table (docs/fuzzing.md)\n",
          mdc_fz_harness_target_name(target));
  char name[64], s[256];
  if (target == FZ_TARGET_TRACE) {
    for (unsigned c = 0; c < MDC_CALL_COUNT; c++) {
      snprintf(name, sizeof name, "op_%s", mdc_calls[c].name);
      snprintf(s, sizeof s, "{\"op\": \"%s\"", mdc_calls[c].name);
      dict_str(f, name, s);
    }
    for (unsigned a = 0; a < MDC_A_COUNT; a++) {
      snprintf(name, sizeof name, "key_%s_%u", mdc_args[a].key, a);
      snprintf(s, sizeof s, "\"%s\": ", mdc_args[a].key);
      dict_str(f, name, s);
    }
    static const char *const words[] = {
        "{\"mdc_trace\": \"1.1\", \"name\": \"f\", \"rules\": [\"r\"]}", "\"memory\"", "\"bad_memory\"", "\"model\"",
        "\"request\"", "\"fill\"", "\"check\"", "\"concurrent\"", "\"end_concurrent\"", "\"expect_tally\"",
        "\"expect_unpredictable\"", "\"as\": ", "\"expect\": ", "\"status\": ", "\"when\": ", "\"produced\"",
        "\"not_produced\"", "\"tally\": ", "\"collect\": ", "\"id\": ", "\"lanes\": ", "\"repeat\": ", "\"lane\": ",
        "{\"literal\": 0}", "{\"forge\": \"", "\"xor\": \"0x100000000\"", "\"add\": -1", "\"kind\": \"ashmem\"",
        "\"mmap_fd\"", "\"blob\"", "\"hardware_buffer\"", "\"size\": ", "\"offset\": ", "\"file_size\": ",
        "\"prot\": \"r\"", "\"data\": ", "{\"f32\": [", "{\"i32\": [", "{\"u8\": [", "{\"hex\": \"", "{\"random\": {",
        "{\"fill\": 0, \"bytes\": ", "{\"sidecar\": \"", "\"operands\": [", "\"operations\": [", "\"inputs\": [",
        "\"outputs\": [", "\"operand_values\": ", "\"pools\": [", "\"TENSOR_FLOAT32\"", "\"INT32\"",
        "\"SUBGRAPH_INPUT\"", "\"SUBGRAPH_OUTPUT\"", "\"CONSTANT_COPY\"", "\"TEMPORARY_VARIABLE\"", "\"ADD\"",
        "\"RELU\"", "\"CUSTOM\"", "\"attrs\": [", "\"NONE\"", "\"INVALID_ARGUMENT\"", "\"GENERAL_FAILURE\"",
        "\"OUTPUT_INSUFFICIENT_SIZE\"", "\"shapes\": [", "\"dims\": [", "\"sufficient\": false", "\"leaks\": {",
        "\"timing\": \"measured\"", "\"nan\"", "\"inf\"", "\"0xffffffffffffffff\"", "\"requires\": [\"sim\"]",
        "\"faults=kernel_fail@1\"", "\"seed=7\"", "18446744073709551615", "1e309", "-0", "null", "true", "#",
        "\"no_value\": true", "\"token\": ", "\"at_least\": {", "\"exactly\": {", "\"collections\": ["};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
      snprintf(name, sizeof name, "w%zu", i);
      dict_str(f, name, words[i]);
    }
  } else {
    for (unsigned c = 0; c < MDC_CALL_COUNT; c++) {
      uint8_t b = (uint8_t)(FZ_OP_LIT + c);
      snprintf(name, sizeof name, "call_%s", mdc_calls[c].name);
      dict_bytes(f, name, &b, 1);
    }
    const uint8_t zero[] = {FZ_SEL_ZERO}, block[] = {FZ_OP_BLOCK, 0}, absent[] = {FZ_ABSENT};
    dict_bytes(f, "handle_zero", zero, 1);
    dict_bytes(f, "block", block, 2);
    dict_bytes(f, "absent", absent, 1);
    for (unsigned o = 0; o < 8; o++) {
      uint8_t b[2] = {FZ_SEL_INDEX, (uint8_t)o};
      snprintf(name, sizeof name, "object_%u", o);
      dict_bytes(f, name, b, 2);
    }
    static const uint64_t bits[] = {1ull, 1ull << 23, 1ull << 24, 1ull << 31, 1ull << 32, 1ull << 63};
    for (unsigned i = 0; i < sizeof bits / sizeof bits[0]; i++) {
      uint8_t b[10] = {FZ_SEL_XOR, 0};
      for (int k = 0; k < 8; k++) b[2 + k] = (uint8_t)(bits[i] >> (8 * k));
      snprintf(name, sizeof name, "forge_xor_%u", i);
      dict_bytes(f, name, b, 10);
    }
    for (unsigned n = 0; n <= FZ_MAX_LIST; n++) {
      uint8_t b = (uint8_t)(FZ_COUNT_LIT + n);
      snprintf(name, sizeof name, "count_%u", n);
      dict_bytes(f, name, &b, 1);
    }
    static const uint32_t dims[] = {0, 1, 2, 3, 8, 0xffffffffu};
    for (unsigned i = 0; i < sizeof dims / sizeof dims[0]; i++) {
      uint8_t b[4];
      for (int k = 0; k < 4; k++) b[k] = (uint8_t)(dims[i] >> (8 * k));
      snprintf(name, sizeof name, "u32_%u", i);
      dict_bytes(f, name, b, 4);
    }
  }
  return fclose(f);
}

static void seed_name(const char *path, char *out, size_t n) {
  mdc_trace_header h;
  char err[256];
  const char *src = path;
  if (mdc_trace_read_header(path, &h, err, sizeof err) == 0 && h.name[0]) src = h.name;
  size_t j = 0;
  for (const char *c = src; *c && j + 1 < n; c++) out[j++] = (*c == '/' || *c == ' ') ? '_' : *c;
  out[j] = 0;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"target", required_argument, 0, 't'}, {"out", required_argument, 0, 'o'},
                                       {"dict", required_argument, 0, 'd'},   {"verbose", no_argument, 0, 'v'},
                                       {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  const char *target = NULL, *out = NULL, *dict = NULL;
  int verbose = 0, c;
  while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
    switch (c) {
      case 't': target = optarg; break;
      case 'o': out = optarg; break;
      case 'd': dict = optarg; break;
      case 'v': verbose = 1; break;
      case 'h':
        printf("usage: md_fuzz_seeds --target T --out DIR [--dict FILE] [-v] TRACE_OR_FOLDER...\n");
        return 0;
      default: return 2;
    }
  }
  int t = target ? mdc_fz_harness_target_parse(target) : -1;
  if (t < 0 || !out) {
    fprintf(stderr, "md_fuzz_seeds: want --target (tokens, shapes, concurrency, trace) and --out DIR\n");
    return 2;
  }
  if (mkdir(out, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "md_fuzz_seeds: cannot create '%s': %s\n", out, strerror(errno));
    return 2;
  }
  if (dict && write_dict(dict, t)) {
    fprintf(stderr, "md_fuzz_seeds: cannot write '%s'\n", dict);
    return 2;
  }
  list l = {0};
  for (int i = optind; i < argc; i++) walk(argv[i], &l);
  if (l.n) qsort(l.v, l.n, sizeof *l.v, cmp);
  static mdc_fz_prog p, q;
  static uint8_t buf[1 << 20];
  unsigned made = 0, beyond = 0, broken = 0;
  for (size_t i = 0; i < l.n; i++) {
    char name[300], path[4400], err[512];
    seed_name(l.v[i], name, sizeof name);
    if (t == FZ_TARGET_TRACE) {
      FILE *in = fopen(l.v[i], "rb");
      size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
      if (in) fclose(in);
      if (!n || n == sizeof buf || !mdc_fz_trace_input_ok(buf, n)) {
        if (verbose) fprintf(stderr, "  beyond the trace target's bounds: %s\n", l.v[i]);
        beyond++;
        continue;
      }
      snprintf(path, sizeof path, "%s/%s.jsonl", out, name);
      FILE *o = fopen(path, "wb");
      if (!o || fwrite(buf, 1, n, o) != n || fclose(o) != 0) {
        fprintf(stderr, "md_fuzz_seeds: cannot write '%s'\n", path);
        return 2;
      }
      made++;
      continue;
    }
    if (mdc_fz_trace_read(l.v[i], (mdc_fz_target)t, &p, err, sizeof err) || !p.n_calls) {
      if (verbose) fprintf(stderr, "  beyond the encoding: %s: %s\n", l.v[i], err);
      beyond++;
      continue;
    }
    size_t n = mdc_fz_encode((mdc_fz_target)t, &p, buf, sizeof buf);
    mdc_fz_decode((mdc_fz_target)t, buf, n, &q);
    char *a = static_trace(&p, (mdc_fz_target)t), *b = static_trace(&q, (mdc_fz_target)t);
    int same = n && a && b && !strcmp(a, b);
    free(a);
    free(b);
    if (!same) {
      fprintf(stderr, "md_fuzz_seeds: %s: the encoded program does not decode back to itself\n", l.v[i]);
      broken++;
      continue;
    }
    snprintf(path, sizeof path, "%s/%s", out, name);
    FILE *o = fopen(path, "wb");
    if (!o || fwrite(buf, 1, n, o) != n || fclose(o) != 0) {
      fprintf(stderr, "md_fuzz_seeds: cannot write '%s'\n", path);
      return 2;
    }
    made++;
  }
  printf("md_fuzz_seeds: %s: %u seeds from %zu traces (%u beyond the encoding)\n", mdc_fz_harness_target_name(t), made,
         l.n, beyond);
  for (size_t i = 0; i < l.n; i++) free(l.v[i]);
  free(l.v);
  return broken ? 1 : 0;
}
