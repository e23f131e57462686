/* hip_error.c - HIP error codes to md_status values and messages naming the call. */
#include "hip_error.h"

#include <stdio.h>

int md__hip_is_lost(hipError_t e) {
  return e == hipErrorNoDevice || e == hipErrorInsufficientDriver || e == hipErrorLaunchFailure ||
         e == hipErrorIllegalAddress || e == hipErrorECCNotCorrectable ||
         e == hipErrorLaunchTimeOut || e == hipErrorDeinitialized;
}

/* Our own short text for the errors a caller acts on; the runtime's string otherwise. */
static const char *text_of(hipError_t e) {
  if (e == hipErrorOutOfMemory) return "out of memory";
  if (e == hipErrorNoDevice) return "no device";
  if (e == hipErrorInsufficientDriver) return "no usable driver (driver missing or too old)";
  if (e == hipErrorLaunchFailure) return "device lost: a kernel failed (launch failure)";
  if (e == hipErrorIllegalAddress) return "device lost: a kernel used an illegal address";
  if (e == hipErrorECCNotCorrectable) return "device lost: uncorrectable ECC error";
  if (e == hipErrorLaunchTimeOut) return "device lost: a kernel timed out";
  if (e == hipErrorDeinitialized) return "device lost: the runtime is shutting down";
  const char *s = hipGetErrorString(e);
  return s ? s : "unknown error";
}

md_status md__hip_status(hipError_t e, const char *call, char *msg, size_t n) {
  const char *name = hipGetErrorName(e);
  if (msg && n) snprintf(msg, n, "%s: %s (%s, %d)", call, text_of(e), name ? name : "?", (int)e);
  if (e == hipErrorOutOfMemory) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  if (md__hip_is_lost(e)) return MD_DEVICE_UNAVAILABLE;
  return MD_GENERAL_FAILURE;
}
