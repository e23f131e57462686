/* test_hip_error.c - hip_error.c's mapping of runtime errors to statuses and messages, built
 * for each platform there is a runtime for: the CPU layer (hipcpu_test_hip_error), and where
 * installed the real CUDA runtime (hip_test_hip_error_nvidia, libcudart) and HIP for AMD
 * (hip_test_hip_error_amd, libamdhip64): their error names and strings need no GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "hip_error.h"

static const struct {
  hipError_t e;
  md_status st;
} cases[] = {
    {hipErrorOutOfMemory, MD_RESOURCE_EXHAUSTED_TRANSIENT},
    {hipErrorNoDevice, MD_DEVICE_UNAVAILABLE},
    {hipErrorInsufficientDriver, MD_DEVICE_UNAVAILABLE},
    {hipErrorDeinitialized, MD_DEVICE_UNAVAILABLE},
    {hipErrorLaunchFailure, MD_DEVICE_UNAVAILABLE},
    {hipErrorIllegalAddress, MD_DEVICE_UNAVAILABLE},
    {hipErrorECCNotCorrectable, MD_DEVICE_UNAVAILABLE},
    {hipErrorLaunchTimeOut, MD_DEVICE_UNAVAILABLE},
    {hipErrorAssert, MD_DEVICE_UNAVAILABLE},
#ifdef MD_HIP_HAS_NV_FATAL
    {hipErrorHardwareStackError, MD_DEVICE_UNAVAILABLE},
    {hipErrorIllegalInstruction, MD_DEVICE_UNAVAILABLE},
    {hipErrorMisalignedAddress, MD_DEVICE_UNAVAILABLE},
    {hipErrorInvalidAddressSpace, MD_DEVICE_UNAVAILABLE},
    {hipErrorInvalidPc, MD_DEVICE_UNAVAILABLE},
#endif
    {hipErrorInvalidValue, MD_GENERAL_FAILURE},
    {hipErrorInvalidConfiguration, MD_GENERAL_FAILURE},
    {hipErrorNotReady, MD_GENERAL_FAILURE},
    {hipErrorLaunchOutOfResources, MD_GENERAL_FAILURE},
    {hipErrorInvalidDeviceFunction, MD_GENERAL_FAILURE},
};

Test(hip_error, each_error_maps_to_its_status_and_names_the_call_and_the_error) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char msg[256] = "";
    md_status st = md__hip_status(cases[i].e, "hipSomething", msg, sizeof msg);
    const char *name = hipGetErrorName(cases[i].e);
    cr_assert_eq(st, cases[i].st, "%s (%d): status %d, want %d", name, (int)cases[i].e, st, cases[i].st);
    cr_assert_eq(md__hip_is_lost(cases[i].e), cases[i].st == MD_DEVICE_UNAVAILABLE, "%s", name);
    cr_assert(strncmp(msg, "hipSomething: ", 14) == 0, "%s", msg);
    cr_assert(strstr(msg, name), "%s does not name %s", msg, name);
  }
}

#ifdef MD_HIP_HAS_NV_FATAL
Test(hip_error, nvidia_kernel_faults_say_the_device_is_lost) {
  char msg[256];
  cr_assert_eq(md__hip_status(hipErrorMisalignedAddress, "hipStreamSynchronize", msg, sizeof msg),
               MD_DEVICE_UNAVAILABLE);
  cr_assert(strstr(msg, "device lost: a kernel used a misaligned address"), "%s", msg);
}
#endif

Test(hip_error, a_short_buffer_gets_a_truncated_message) {
  char msg[8];
  cr_assert_eq(md__hip_status(hipErrorOutOfMemory, "hipMalloc", msg, sizeof msg), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_eq(strlen(msg), 7);
  cr_assert_eq(md__hip_status(hipErrorOutOfMemory, "hipMalloc", NULL, 0), MD_RESOURCE_EXHAUSTED_TRANSIENT);
}
