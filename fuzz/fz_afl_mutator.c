/* fz_afl_mutator.c - the program-level mutations of fz_mutate.h as an AFL++ custom mutator
 * (AFL_CUSTOM_MUTATOR_LIBRARY; `mdc fuzz` sets it, with MDC_FUZZ_TARGET naming the program
 * target). AFL++ runs it in its custom stage, before havoc, which still runs: byte mutations and
 * program mutations take turns. Built without AFL++ instrumentation (it runs inside afl-fuzz). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fz_mutate.h"

typedef struct fz_afl_mut {
  mdc_fz_target target;
  uint64_t rng;
  uint8_t *out;
  size_t cap;
} fz_afl_mut;

void *afl_custom_init(void *afl, unsigned int seed);
size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf, uint8_t *add_buf,
                       size_t add_buf_size, size_t max_size);
void afl_custom_deinit(void *data);

void *afl_custom_init(void *afl, unsigned int seed) {
  (void)afl;
  fz_afl_mut *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  const char *t = getenv("MDC_FUZZ_TARGET");
  if (!t || mdc_fz_target_parse(t, &m->target)) m->target = FZ_TOKENS;
  m->rng = 0x6d64635f6d757461ull ^ seed;
  m->cap = 1 << 16;
  m->out = malloc(m->cap);
  if (!m->out) {
    free(m);
    return NULL;
  }
  return m;
}

size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf, uint8_t *add_buf,
                       size_t add_buf_size, size_t max_size) {
  (void)add_buf, (void)add_buf_size;
  fz_afl_mut *m = data;
  size_t cap = max_size < m->cap ? max_size : m->cap, n = 0;
  /* a mutation that does not apply to this program (nothing to delete, no room) is drawn again */
  for (int tries = 0; tries < 8 && !n; tries++) n = mdc_fz_mutate(m->target, buf, buf_size, FZ_MUT_COUNT, &m->rng, m->out, cap);
  if (!n) {
    /* none applied: one byte changed, so AFL++ still gets a new input */
    n = buf_size < cap ? buf_size : cap;
    memcpy(m->out, buf, n);
    if (n) m->out[m->rng % n] ^= (uint8_t)(1u << (m->rng >> 8) % 8);
  }
  *out_buf = m->out;
  return n;
}

void afl_custom_deinit(void *data) {
  fz_afl_mut *m = data;
  if (m) free(m->out);
  free(m);
}
