/* fz_ceiling.c - md_fuzz_ceiling: a trivial persistent harness (a few compares on the input),
 * built like the targets. Its speed is the ceiling of a fuzzer on this machine; `mdc fuzz
 * --ceiling` measures it in the same run as a target, and reports the target's ratio to it. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 2 && data[0] == 'm' && data[1] == 'd') sink = sink + data[2];
  return 0;
}
