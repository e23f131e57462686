/* sim_bench.c - md_sim_bench: what the simulated device's own checks cost, through the public
 * backend ops only (md_sim_backend), so that the same source measures any version of sim/.
 *
 *   md_sim_bench [--quick] [--seed N]
 *
 * Figures (each the median over batches; ns per operation):
 *   alloc_free@16B, @4KiB, @1MiB  one alloc + free pair (fill of its red zones, their check at
 *                                 free, the poison or madvise of the span)
 *   launch@16B                    one launch (NULL stream) of a copy kernel, 16-byte input and
 *                                 output: the tensor checks, the kernel and the checks after
 *                                 it; direct_call: the same kernel called directly
 *   launch@16KiB, @1MiB           the same with 16 KiB and 1 MiB tensors
 *   launch_overhead@16B, ...      launch minus the direct call (median of the per-batch
 *                                 differences, the two taking turns): what the sim adds
 * The machine is shared: compare figures measured in the same run, or runs taken back to back. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "md/sim.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static void k_copy(const md_kernel_call *c, md_kernel_status *st) {
  memcpy(c->outputs[0].data, c->inputs[0].data, c->outputs[0].bytes);
}

static const md_backend_ops *ops;
static md_backend *dev;

static double alloc_free_ns(uint64_t bytes, int batches, int per) {
  double *v = calloc((size_t)batches, sizeof *v);
  if (!v) return -1;
  for (int b = 0; b < batches; b++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < per; i++) {
      md_devptr p = 0;
      if (ops->alloc(dev, bytes, &p) != MD_NONE) {
        fprintf(stderr, "md_sim_bench: alloc(%" PRIu64 ") failed\n", bytes);
        exit(1);
      }
      ops->free(dev, p);
    }
    v[b] = (double)(now_ns() - t0) / per;
  }
  double m = median(v, (size_t)batches);
  free(v);
  return m;
}

/* One launch (NULL stream) of a copy kernel on `bytes`-byte tensors, against a direct call of
 * the same kernel on the same memory: batches of `per` launches and `per` direct calls take
 * turns, so that both see the same machine. *launch_ns and *direct_ns get the medians, and
 * *overhead_ns the median of the per-batch differences. */
static void launch_ns(uint64_t bytes, int batches, int per, double *launch_out, double *direct_out,
                      double *overhead_out) {
  md_devptr in = 0, out = 0;
  if (ops->alloc(dev, bytes, &in) != MD_NONE || ops->alloc(dev, bytes, &out) != MD_NONE) {
    fprintf(stderr, "md_sim_bench: alloc failed\n");
    exit(1);
  }
  md_tensor t[2];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 2; i++) {
    t[i].type = MD_TENSOR_FLOAT32;
    t[i].rank = 1;
    t[i].dims[0] = (uint32_t)(bytes / 4);
    t[i].bytes = bytes;
  }
  t[0].data = ops->kernel_ptr(dev, in);
  t[1].data = ops->kernel_ptr(dev, out);
  for (uint64_t i = 0; i < bytes / 4; i++) ((float *)t[0].data)[i] = (float)i * 0.5f - 7.0f;
  md_kernel_def k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.name = "copy";
  k.platform = "sim";
  k.max_inputs = 1;
  k.n_outputs = 1;
  k.run = k_copy;
  md_kernel_call call;
  memset(&call, 0, sizeof call);
  call.struct_size = sizeof call;
  call.platform = "sim";
  call.n_inputs = 1;
  call.inputs = &t[0];
  call.n_outputs = 1;
  call.outputs = &t[1];
  double *v = calloc((size_t)batches * 3, sizeof *v), *l = v, *d = v + batches, *o = v + 2 * batches;
  if (!v) exit(1);
  for (int b = 0; b < batches; b++) {
    md_kernel_status st = {0};
    uint64_t t0 = now_ns();
    for (int i = 0; i < per; i++) {
      if (ops->launch(dev, NULL, &k, &call, &st) != MD_NONE) {
        fprintf(stderr, "md_sim_bench: launch failed: %s\n", st.message);
        exit(1);
      }
    }
    uint64_t t1 = now_ns();
    for (int i = 0; i < per; i++) {
      k.run(&call, &st);
      __asm__ __volatile__("" ::: "memory");
    }
    uint64_t t2 = now_ns();
    l[b] = (double)(t1 - t0) / per;
    d[b] = (double)(t2 - t1) / per;
    o[b] = l[b] - d[b];
  }
  *launch_out = median(l, (size_t)batches);
  *direct_out = median(d, (size_t)batches);
  *overhead_out = median(o, (size_t)batches);
  free(v);
  ops->free(dev, in);
  ops->free(dev, out);
}

int main(int argc, char **argv) {
  int quick = 0;
  uint64_t seed = 0;
  int has_seed = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
      has_seed = 1;
    } else {
      fprintf(stderr, "usage: md_sim_bench [--quick] [--seed N]\n");
      return 2;
    }
  }
  ops = md_sim_backend();
  md_backend_params p = {.struct_size = sizeof p, .mem_limit = 256ull << 20, .seed = seed, .has_seed = has_seed};
  char err[256] = "";
  if (ops->open(&p, &dev, err, sizeof err) != MD_NONE) {
    fprintf(stderr, "md_sim_bench: open: %s\n", err);
    return 1;
  }
  int nb = quick ? 21 : 101;
  /* A few live neighbours, so that frees and allocations split and coalesce as in use. */
  md_devptr keep[4];
  for (int i = 0; i < 4; i++) ops->alloc(dev, 1000, &keep[i]);
  double af16 = alloc_free_ns(16, nb, 2000), af4k = alloc_free_ns(4096, nb, 1000);
  double af1m = alloc_free_ns(1u << 20, nb, quick ? 20 : 50);
  double l16, d16, o16, l16k, d16k, o16k, l1m, d1m, o1m;
  launch_ns(16, nb, 2000, &l16, &d16, &o16);
  launch_ns(16u << 10, nb, quick ? 100 : 500, &l16k, &d16k, &o16k);
  launch_ns(1u << 20, nb, quick ? 5 : 20, &l1m, &d1m, &o1m);
  printf("%-24s %12s\n", "figure", "ns");
  printf("%-24s %12.1f\n", "alloc_free@16B", af16);
  printf("%-24s %12.1f\n", "alloc_free@4KiB", af4k);
  printf("%-24s %12.1f\n", "alloc_free@1MiB", af1m);
  printf("%-24s %12.1f\n", "launch@16B", l16);
  printf("%-24s %12.1f\n", "direct_call@16B", d16);
  printf("%-24s %12.1f\n", "launch_overhead@16B", o16);
  printf("%-24s %12.1f\n", "launch@16KiB", l16k);
  printf("%-24s %12.1f\n", "direct_call@16KiB", d16k);
  printf("%-24s %12.1f\n", "launch_overhead@16KiB", o16k);
  printf("%-24s %12.1f\n", "launch@1MiB", l1m);
  printf("%-24s %12.1f\n", "direct_call@1MiB", d1m);
  printf("%-24s %12.1f\n", "launch_overhead@1MiB", o1m);
  for (int i = 0; i < 4; i++) ops->free(dev, keep[i]);
  md_sim_stats s;
  md_sim_stats_get(dev, &s);
  ops->close(dev);
  if (s.common.redzone_hits || s.common.poison_hits || s.bad_frees) {
    fprintf(stderr, "md_sim_bench: the device reported damage (%" PRIu64 " red-zone, %" PRIu64 " poison hits)\n",
            s.common.redzone_hits, s.common.poison_hits);
    return 1;
  }
  return 0;
}
