/* driver_int.h - private to the runtime: the reference driver's md_driver table (driver.c),
 * for the product's entry point (runtime/driver/entry.c). */
#ifndef MD_DRIVER_INT_H
#define MD_DRIVER_INT_H

#include "md/driver.h"

/* The reference driver's md_driver table (static storage, never NULL). */
const md_driver *md__driver_table(void);

#endif
