/* md_hip_cpu.c - the CPU execution layer's runtime (see md_hip_cpu.h): its state, the
 * last-error model and error injection, the device, and the test hooks (those of launches are
 * with them). Memory and copies: md_hip_cpu_memory.c; streams and events: md_hip_cpu_stream.c;
 * launches: md_hip_cpu_launch.c; kernels run in md_hip_cpu_exec.c. Locking: md_hip_cpu_rt_int.h. */
#include "md_hip_cpu_rt_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- state ---- */

md__hipcpu_state md__hipcpu_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .mem_total = UINT64_C(4) << 30};
atomic_int md__hipcpu_sticky;
atomic_uint_fast64_t md__hipcpu_n_launches, md__hipcpu_n_blocks, md__hipcpu_n_threads, md__hipcpu_n_barriers,
    md__hipcpu_n_streams, md__hipcpu_n_events, md__hipcpu_n_reg_copies;
__thread hipError_t md__hipcpu_last_err;

/* ---- errors ---- */

int md_hipcpu_is_fatal(hipError_t e) {
  switch (e) {
  case hipErrorIllegalAddress:
  case hipErrorLaunchTimeOut:
  case hipErrorAssert:
  case hipErrorHardwareStackError:
  case hipErrorIllegalInstruction:
  case hipErrorMisalignedAddress:
  case hipErrorInvalidAddressSpace:
  case hipErrorInvalidPc:
  case hipErrorLaunchFailure:
  case hipErrorECCNotCorrectable:
  case hipErrorNoDevice:
  case hipErrorInsufficientDriver:
  case hipErrorDeinitialized:
    return 1;
  default:
    return 0;
  }
}

/* The injected error of the next call at site, or success. */
hipError_t md__hipcpu_plan_take(md_hipcpu_site site) {
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&md__hipcpu_g.lock);
  if (md__hipcpu_g.plan[site].nth && --md__hipcpu_g.plan[site].nth == 0) e = md__hipcpu_g.plan[site].e;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return e;
}

/* Thread-safe (the calling thread's error): the sticky error if any (never cleared), else the
 * last error recorded on this thread, which it clears. */
hipError_t hipGetLastError(void) {
  hipError_t s = sticky_error();
  if (s != hipSuccess) return s;
  hipError_t e = md__hipcpu_last_err;
  md__hipcpu_last_err = hipSuccess;
  return e;
}

/* As hipGetLastError, without clearing. */
hipError_t hipPeekAtLastError(void) {
  hipError_t s = sticky_error();
  return s != hipSuccess ? s : md__hipcpu_last_err;
}

/* Thread-safe; static strings ("hipErrorUnknown" for a value not in the enum). */
const char *hipGetErrorName(hipError_t e) {
  switch (e) {
#define N(x) \
  case x:    \
    return #x;
    N(hipSuccess) N(hipErrorInvalidValue) N(hipErrorOutOfMemory) N(hipErrorNotInitialized)
    N(hipErrorDeinitialized) N(hipErrorInvalidConfiguration) N(hipErrorInsufficientDriver)
    N(hipErrorInvalidDeviceFunction) N(hipErrorNoDevice) N(hipErrorInvalidDevice)
    N(hipErrorECCNotCorrectable) N(hipErrorInvalidHandle) N(hipErrorNotReady) N(hipErrorIllegalAddress)
    N(hipErrorLaunchOutOfResources) N(hipErrorLaunchTimeOut) N(hipErrorAssert)
    N(hipErrorHardwareStackError) N(hipErrorIllegalInstruction) N(hipErrorMisalignedAddress)
    N(hipErrorInvalidAddressSpace) N(hipErrorInvalidPc) N(hipErrorLaunchFailure)
    N(hipErrorHostMemoryAlreadyRegistered) N(hipErrorHostMemoryNotRegistered) N(hipErrorNotSupported) N(hipErrorUnknown)
#undef N
  }
  return "hipErrorUnknown";
}

/* Thread-safe; static strings, worded as the CUDA runtime words them. */
const char *hipGetErrorString(hipError_t e) {
  switch (e) {
  case hipSuccess: return "no error";
  case hipErrorInvalidValue: return "invalid argument";
  case hipErrorOutOfMemory: return "out of memory";
  case hipErrorNotInitialized: return "initialization error";
  case hipErrorDeinitialized: return "driver shutting down";
  case hipErrorInvalidConfiguration: return "invalid configuration argument";
  case hipErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
  case hipErrorInvalidDeviceFunction: return "invalid device function";
  case hipErrorNoDevice: return "no CUDA-capable device is detected";
  case hipErrorInvalidDevice: return "invalid device ordinal";
  case hipErrorECCNotCorrectable: return "uncorrectable ECC error encountered";
  case hipErrorInvalidHandle: return "invalid resource handle";
  case hipErrorNotReady: return "device not ready";
  case hipErrorIllegalAddress: return "an illegal memory access was encountered";
  case hipErrorLaunchOutOfResources: return "too many resources requested for launch";
  case hipErrorLaunchTimeOut: return "the launch timed out and was terminated";
  case hipErrorAssert: return "device-side assert triggered";
  case hipErrorHardwareStackError: return "hardware stack error";
  case hipErrorIllegalInstruction: return "an illegal instruction was encountered";
  case hipErrorMisalignedAddress: return "misaligned address";
  case hipErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
  case hipErrorInvalidPc: return "invalid program counter";
  case hipErrorLaunchFailure: return "unspecified launch failure";
  case hipErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
  case hipErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
  case hipErrorNotSupported: return "operation not supported";
  case hipErrorUnknown: return "unknown error";
  }
  return "unknown error";
}

/* ---- device ---- */

hipError_t hipGetDeviceCount(int *count) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!count) return rec(hipErrorInvalidValue);
  *count = 1;
  return hipSuccess;
}

/* Thread-safe. Device 0 only (hipErrorInvalidDevice). */
hipError_t hipSetDevice(int device) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  return device == 0 ? hipSuccess : rec(hipErrorInvalidDevice);
}

/* Thread-safe. Always device 0. */
hipError_t hipGetDevice(int *device) {
  hipError_t e = enter(MD_HIPCPU_SITES);
  if (e != hipSuccess) return e;
  if (!device) return rec(hipErrorInvalidValue);
  *device = 0;
  return hipSuccess;
}

/* Thread-safe. Writes the NUL-terminated name, truncated to len. */
hipError_t hipDeviceGetName(char *name, int len, int device) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!name || len <= 0) return rec(hipErrorInvalidValue);
  if (device != 0) return rec(hipErrorInvalidDevice);
  snprintf(name, (size_t)len, "%s", "hipcpu (CPU execution layer, test double)");
  return hipSuccess;
}

/* Thread-safe. The three attributes md_hip_compat.h maps. */
hipError_t hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device) {
  hipError_t e = enter(MD_HIPCPU_SITES);
  if (e != hipSuccess) return e;
  if (!value) return rec(hipErrorInvalidValue);
  if (device != 0) return rec(hipErrorInvalidDevice);
  switch (attr) {
  case hipDeviceAttributeMaxThreadsPerBlock: *value = 1024; return hipSuccess;
  case hipDeviceAttributeMaxGridDimX: *value = 2147483647; return hipSuccess;
  case hipDeviceAttributeMultiprocessorCount: *value = 1; return hipSuccess;
  }
  return rec(hipErrorInvalidValue);
}

/* Thread-safe. The capacity and what live allocations leave of it. */
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  hipError_t e = enter(MD_HIPCPU_DEVICE);
  if (e != hipSuccess) return e;
  if (!free_bytes || !total_bytes) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  *total_bytes = (size_t)md__hipcpu_g.mem_total;
  *free_bytes =
      md__hipcpu_g.mem_used < md__hipcpu_g.mem_total ? (size_t)(md__hipcpu_g.mem_total - md__hipcpu_g.mem_used) : 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return hipSuccess;
}

/* Thread-safe; live allocations stay (free may read 0 until they go). */
void md_hipcpu_set_memory(uint64_t bytes) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  md__hipcpu_g.mem_total = bytes;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
}

/* ---- test hooks ---- */

void md_hipcpu_fail(md_hipcpu_site site, uint64_t nth, hipError_t e) {
  if ((unsigned)site >= MD_HIPCPU_SITES) return;
  pthread_mutex_lock(&md__hipcpu_g.lock);
  md__hipcpu_g.plan[site].nth = nth;
  md__hipcpu_g.plan[site].e = e;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
}

/* Thread-safe; the first fatal error stays the device's. */
void md_hipcpu_lose_device(hipError_t e) { lose(e); }

/* Thread-safe; a snapshot (counters of concurrent work may be mid-update). */
void md_hipcpu_stats_get(md_hipcpu_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  out->device_allocs = md__hipcpu_g.dev.n;
  out->device_bytes = md__hipcpu_g.mem_used;
  out->host_allocs = md__hipcpu_g.host.n;
  out->host_registered = md__hipcpu_g.reg.n;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  out->streams = atomic_load(&md__hipcpu_n_streams);
  out->events = atomic_load(&md__hipcpu_n_events);
  out->launches = atomic_load(&md__hipcpu_n_launches);
  out->blocks = atomic_load(&md__hipcpu_n_blocks);
  out->threads = atomic_load(&md__hipcpu_n_threads);
  out->barriers = atomic_load(&md__hipcpu_n_barriers);
  out->registered_copies = atomic_load(&md__hipcpu_n_reg_copies);
}

/* Thread-safe: a copy in the calling thread's buffer, valid until its next call. */
const char *md_hipcpu_fault_message(void) {
  static __thread char copy[256];
  pthread_mutex_lock(&md__hipcpu_g.lock);
  snprintf(copy, sizeof copy, "%s", md__hipcpu_g.fault);
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return copy;
}
