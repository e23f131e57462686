/* fz_test_rand.h - the fuzz tests' deterministic draws: splitmix64 over a per-file state (set
 * rng_state to choose the sequence), and random fuzz inputs of the kind mutated seeds give. */
#ifndef MDC_FZ_TEST_RAND_H
#define MDC_FZ_TEST_RAND_H

#include <stddef.h>
#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* 4 to cap - 1 bytes; past the header most bytes small: the smart forms (like mutated seeds)
 * rather than literals. */
static inline size_t random_input(uint8_t *buf, size_t cap) {
  size_t n = 4 + rnd() % (cap - 4);
  for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
  for (size_t i = 4; i < n; i++)
    if (rnd() % 4) buf[i] &= 0x3f;
  return n;
}

#endif
