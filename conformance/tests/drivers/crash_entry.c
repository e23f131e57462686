/* crash_entry.c - a driver that crashes on every run: md_driver_entry aborts, so every child
 * that loads it dies before a trace's first event (`mdc reduce` refuses to reduce against it). */
#include <stdint.h>
#include <stdlib.h>

#include "md/driver.h"

const md_driver *md_driver_entry(uint32_t abi_version) {
  (void)abi_version;
  abort();
}
