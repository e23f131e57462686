/* bench_population.c - a device holding many live buffers, shared by the token benchmark
 * (lookups at 1, 1K and 1M live buffers) and the memory benchmark (RSS per live buffer), so
 * that md_bench allocates its million buffers once. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "objects_int.h"

#define POP_CAP (1u << 20)
#define POP_SEQ (1u << 16)

static mdb_pop *pop;

/* Bytes malloc has handed out (small chunks and mmapped ones), chunk headers included. */
static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

mdb_pop *mdb_pop_get(const char *bench) {
  if (pop) return pop;
  mdb_pop *p = calloc(1, sizeof *p);
  if (!p) {
    mdb_fail(bench, "out of memory");
    return NULL;
  }
  if (mdb_env_open(&p->env, bench, "backend=sim;mem_limit=2G") != 0) {
    free(p);
    return NULL;
  }
  mdb_model mb;
  uint32_t dims[1] = {4};
  p->prepared = mdb_prepare(&p->env, bench, mdb_relu_model(&mb, 1, dims));
  p->data_bytes = 4 * sizeof(float);
  p->cap = POP_CAP;
  p->seq_len = POP_SEQ;
  p->tokens = malloc(p->cap * sizeof *p->tokens);
  p->seq = malloc(p->seq_len * sizeof *p->seq);
  if (!p->prepared || !p->tokens || !p->seq) {
    if (p->prepared) mdb_fail(bench, "out of memory");
    free(p->tokens);
    free(p->seq);
    mdb_env_close(&p->env);
    free(p);
    return NULL;
  }
  /* The benchmark's own arrays are resident before the baseline, so that RSS growth from
   * here on is the driver's. */
  memset(p->tokens, 0, p->cap * sizeof *p->tokens);
  memset(p->seq, 0, p->seq_len * sizeof *p->seq);
  p->heap0 = p->heap = heap_in_use();
  p->rss0_kb = p->rss_kb = mdb_status_kb("VmRSS");
  p->hwm_kb = mdb_status_kb("VmHWM");
  p->arena_rss_kb = -1;
  pop = p;
  return p;
}

/* Host address of the first buffer's device memory: inside the sim arena's mapping. */
static const void *arena_addr(mdb_pop *p) {
  md_device *d = p->env.dev;
  md__hentry *e = md__handle_get(&d->ht, p->tokens[0], MD__KIND_BUFFER);
  if (!e) return NULL;
  const md__buffer *b = e->obj;
  const void *addr = b->st && b->st->mem ? d->be->kernel_ptr(d->bk, b->st->mem) : NULL;
  md__handle_put(&d->ht, e);
  return addr;
}

int mdb_pop_grow(mdb_pop *p, const char *bench, size_t n) {
  if (n > p->cap) n = p->cap;
  if (p->n >= n) return 0;
  uint64_t t0 = mdb_now_ns();
  for (; p->n < n; p->n++) {
    md_status st;
    p->tokens[p->n] = mdb_alloc_input(&p->env, p->prepared, &st);
    if (!p->tokens[p->n]) {
      mdb_fail(bench, "allocate #%zu: status %d: %s", p->n, (int)st, p->env.drv->last_error(p->env.dev));
      return -1;
    }
  }
  p->grow_ns += mdb_now_ns() - t0;
  p->grown_from0 = p->n;
  p->heap = heap_in_use();
  p->rss_kb = mdb_status_kb("VmRSS");
  p->hwm_kb = mdb_status_kb("VmHWM");
  const void *a = arena_addr(p);
  p->arena_rss_kb = a ? mdb_mapping_rss_kb(a) : -1;
  return 0;
}

void mdb_pop_object_sizes(mdb_pop *p, size_t *hentry, size_t *buffer_obj) {
  *hentry = sizeof(md__hentry);
  *buffer_obj = 0;
  if (!p->n) return;
  md_device *d = p->env.dev;
  md__hentry *e = md__handle_get(&d->ht, p->tokens[0], MD__KIND_BUFFER);
  if (!e) return;
  /* usable size plus glibc's 8-byte chunk header */
  *buffer_obj = malloc_usable_size(e->obj) + sizeof(size_t);
  md__handle_put(&d->ht, e);
}

void mdb_pop_close(void) {
  if (!pop) return;
  mdb_env_close(&pop->env);
  free(pop->tokens);
  free(pop->seq);
  free(pop);
  pop = NULL;
}
