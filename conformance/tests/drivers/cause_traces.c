/* cause_traces.c - mdc_test_cause_traces DIR: writes the traces the causes driver
 * (causes_driver.c) fails for three causes, for test_causes.c and make test-browser:
 *   causes/add_NNN  110 traces, an ADD model   (Fail: prepare_model refused)
 *   causes/mul_NNN   70 traces, a MUL model    (Fail: execute refused)
 *   causes/sub_NNN   40 traces, a SUB model    (Crash: SIGSEGV in causes_sub_kernel)
 *   causes/open_N     3 traces without a model (Pass)
 *   causes/warn_N     4 ADD traces with must_pass false (Warn, counted on one line)
 * Each model's tensors have 1 to 7 elements, so the driver's messages differ in their numbers.
 * Exit 0, or 1 naming the file it could not write. */
#include <stdio.h>
#include <string.h>

static int trace(const char *dir, const char *name, const char *op, unsigned k, int must_pass) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.jsonl", dir, strchr(name, '/') + 1);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "mdc_test_cause_traces: cannot write %s\n", path);
    return 1;
  }
  fprintf(f, "{\"mdc_trace\": \"1.0\", \"name\": \"%s\", \"rules\": [\"SPEC 4: test of cause groups\"]%s}\n", name,
          must_pass ? "" : ", \"must_pass\": false");
  fprintf(f, "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
             "{\"op\": \"open_client\", \"as\": \"c\"}\n");
  if (op) {
    fprintf(f, "{\"op\": \"model\", \"as\": \"m\", \"operands\": ["
               "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [%u], \"lifetime\": \"SUBGRAPH_INPUT\"}, "
               "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [%u], \"lifetime\": \"SUBGRAPH_INPUT\"}, "
               "{\"type\": \"INT32\", \"lifetime\": \"CONSTANT_COPY\", \"offset\": 0, \"length\": 4}, "
               "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [%u], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], "
               "\"operations\": [{\"type\": \"%s\", \"inputs\": [0, 1, 2], \"outputs\": [3]}], "
               "\"inputs\": [0, 1], \"outputs\": [3], \"operand_values\": {\"i32\": [0]}, \"pools\": []}\n",
            k, k, k, op);
    fprintf(f, "{\"op\": \"prepare_model\", \"model\": \"m\", \"as\": \"pm\"}\n");
    for (int m = 0; m < 3; m++) {
      fprintf(f, "{\"op\": \"memory\", \"as\": \"%c\", \"kind\": \"ashmem\", \"size\": %u, \"prot\": \"rw\"",
              "abo"[m], 4 * k);
      if (m < 2) {
        fprintf(f, ", \"data\": {\"f32\": [");
        for (unsigned i = 0; i < k; i++) fprintf(f, "%s%u", i ? ", " : "", (m + 1) * (i + 1));
        fprintf(f, "]}");
      }
      fprintf(f, "}\n");
    }
    fprintf(f, "{\"op\": \"execute\", \"prepared\": \"pm\", \"request\": {\"inputs\": [{\"pool\": 0, \"length\": %u}, "
               "{\"pool\": 1, \"length\": %u}], \"outputs\": [{\"pool\": 2, \"length\": %u}], \"pools\": "
               "[{\"memory\": \"a\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}, \"expect\": {\"shapes\": [{\"dims\": [%u]}]}}\n",
            4 * k, 4 * k, 4 * k, k);
  }
  fprintf(f, "{\"op\": \"close_client\", \"client\": \"c\"}\n{\"op\": \"close_device\", \"device\": \"d\"}\n");
  return fclose(f) != 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mdc_test_cause_traces DIR\n");
    return 2;
  }
  static const struct { const char *family, *op; unsigned n; int must_pass; } fam[] = {
      {"add", "ADD", 110, 1}, {"mul", "MUL", 70, 1}, {"sub", "SUB", 40, 1}, {"open", NULL, 3, 1}, {"warn", "ADD", 4, 0}};
  for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++)
    for (unsigned i = 0; i < fam[f].n; i++) {
      char name[64];
      snprintf(name, sizeof name, "causes/%s_%03u", fam[f].family, i);
      if (trace(argv[1], name, fam[f].op, 1 + i % 7, fam[f].must_pass)) return 1;
    }
  return 0;
}
