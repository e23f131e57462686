/* hip_backend.h - private to the runtime: the "hip" backend (hip_kernels/), built into the
 * driver when MD_HIP resolves to amd or nvidia (docs/hip.md). */
#ifndef MD_HIP_BACKEND_H
#define MD_HIP_BACKEND_H

#include <stddef.h>

#include "md/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's ops table (name "hip", platform "hip"). open() fails with DEVICE_UNAVAILABLE
 * "hip: no GPU: hipGetDeviceCount: ..." where no GPU answers. */
const md_backend_ops *md_hip_backend(void);

/* Registers the HIP kernels of the built-in operations under platform "hip", those not
 * registered yet by an earlier call: a failure is tried again by the next call, what succeeded
 * stays. INVALID_ARGUMENT (a user kernel holds the name) / RESOURCE_EXHAUSTED_TRANSIENT with the
 * registry's message otherwise. Thread-safe. Called by the backend's open(). */
md_status md__hip_register_kernels(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
