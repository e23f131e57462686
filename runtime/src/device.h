/* device.h - private to the runtime: the reference driver's function table. */
#ifndef MD_DEVICE_H
#define MD_DEVICE_H

#include "md/driver.h"

/* The reference driver's md_driver table (static storage, never NULL). */
const md_driver *md__driver_table(void);

#endif
