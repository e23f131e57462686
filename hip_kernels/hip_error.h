/* hip_error.h - private to hip_kernels: HIP errors as md_status values with messages naming the
 * call ("hipMemcpyAsync: out of memory"). */
#ifndef MD_HIP_ERROR_H
#define MD_HIP_ERROR_H

#include <stddef.h>

#include "md/driver.h"
#include "md_hip_rt.h"

/* Maps e (not hipSuccess) to a status and writes "<call>: <text> (<name>, <code>)" into msg:
 *   out of memory                                   -> RESOURCE_EXHAUSTED_TRANSIENT
 *   no device, driver too old, runtime shutting down, a sticky kernel fault (launch failure,
 *   illegal address, uncorrectable ECC, launch timeout, assert; on NVIDIA also hardware stack
 *   error, illegal instruction, misaligned address, invalid address space, invalid PC)
 *                                                   -> DEVICE_UNAVAILABLE (device lost)
 *   anything else                                    -> GENERAL_FAILURE */
md_status md__hip_status(hipError_t e, const char *call, char *msg, size_t n);

/* 1 when e means the device is lost (every later call will fail the same way). */
int md__hip_is_lost(hipError_t e);

#endif
