/* hip_error.c - HIP errors to md_status values and messages naming the call. */
#include "hip_error.h"

#include <stdio.h>

/* The errors after which the device is gone for this process, with our own text. Each runtime
 * documents the kernel faults as sticky ("leaves the process in an inconsistent state and any
 * further CUDA work will return the same error"); the others mean there is no device to use. */
static const struct {
  hipError_t e;
  const char *text;
} lost[] = {
    {hipErrorNoDevice, "no device"},
    {hipErrorInsufficientDriver, "no usable driver (driver missing or too old)"},
    {hipErrorDeinitialized, "device lost: the runtime is shutting down"},
    {hipErrorLaunchFailure, "device lost: a kernel failed (launch failure)"},
    {hipErrorIllegalAddress, "device lost: a kernel used an illegal address"},
    {hipErrorECCNotCorrectable, "device lost: uncorrectable ECC error"},
    {hipErrorLaunchTimeOut, "device lost: a kernel timed out"},
    {hipErrorAssert, "device lost: a kernel's assert failed"},
#ifdef MD_HIP_HAS_NV_FATAL /* NVIDIA's kernel faults that HIP for AMD does not have */
    {hipErrorHardwareStackError, "device lost: a kernel's call stack overflowed or was corrupted"},
    {hipErrorIllegalInstruction, "device lost: a kernel ran an illegal instruction"},
    {hipErrorMisalignedAddress, "device lost: a kernel used a misaligned address"},
    {hipErrorInvalidAddressSpace, "device lost: a kernel used an address in the wrong address space"},
    {hipErrorInvalidPc, "device lost: a kernel jumped to an invalid program counter"},
#endif
};

/* Thread-safe (a constant table). */
int md__hip_is_lost(hipError_t e) {
  for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++)
    if (lost[i].e == e) return 1;
  return 0;
}

/* Our own short text for the errors a caller acts on; the runtime's string otherwise. */
static const char *text_of(hipError_t e) {
  if (e == hipErrorOutOfMemory) return "out of memory";
  for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++)
    if (lost[i].e == e) return lost[i].text;
  const char *s = hipGetErrorString(e);
  return s ? s : "unknown error";
}

/* Thread-safe; writes at most n bytes of msg (NULL or n == 0: no message). */
md_status md__hip_status(hipError_t e, const char *call, char *msg, size_t n) {
  const char *name = hipGetErrorName(e);
  if (msg && n) snprintf(msg, n, "%s: %s (%s, %d)", call, text_of(e), name ? name : "?", (int)e);
  if (e == hipErrorOutOfMemory) return MD_RESOURCE_EXHAUSTED_TRANSIENT;
  if (md__hip_is_lost(e)) return MD_DEVICE_UNAVAILABLE;
  return MD_GENERAL_FAILURE;
}
