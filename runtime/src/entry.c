/* entry.c - the one symbol libmd_driver.so exists to export. */
#include <stddef.h>

#include "device.h"

const md_driver *md_driver_entry(uint32_t abi_version) {
  return abi_version == MD_DRIVER_ABI_VERSION ? md__driver_table() : NULL;
}
