/* md_hip_compat.h - private to hip_kernels: the subset of the HIP runtime API this project uses,
 * mapped onto the CUDA runtime, so the same .hip sources and the same C backend build with nvcc
 * (CUDA 13) for NVIDIA GPUs.
 *
 * Why our own header: Debian's HIP 5.2.3 NVIDIA headers do not compile under CUDA 13 (texture
 * references, removed cudaDeviceProp fields such as clockRate, graph edge APIs). This file maps
 * only what hip_kernels/ and bench/gpu/ call; add a line here when you use a new HIP name.
 * Device properties are read through attribute queries (cudaDeviceGetAttribute), never through
 * fields of cudaDeviceProp, which CUDA keeps changing.
 *
 * Usable from C (host API only, with <cuda_runtime_api.h>) and from CUDA C++ (nvcc -x cu), where
 * it also provides hipLaunchKernelGGL. Plain macros and static inline functions; nothing vendored. */
#ifndef MD_HIP_COMPAT_H
#define MD_HIP_COMPAT_H

#include <cuda_runtime_api.h>
#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

/* ---- types and constants ---- */
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef enum cudaMemcpyKind hipMemcpyKind;
typedef enum cudaDeviceAttr hipDeviceAttribute_t;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorLaunchTimeOut cudaErrorLaunchTimeout
#define hipErrorECCNotCorrectable cudaErrorECCUncorrectable
#define hipErrorDeinitialized cudaErrorCudartUnloading
#define hipErrorInvalidDeviceFunction cudaErrorInvalidDeviceFunction
#define hipErrorInvalidConfiguration cudaErrorInvalidConfiguration
#define hipErrorLaunchOutOfResources cudaErrorLaunchOutOfResources
#define hipErrorAssert cudaErrorAssert
/* NVIDIA's sticky kernel faults that HIP for AMD does not have (hip_error.c: device lost). */
#define MD_HIP_HAS_NV_FATAL 1
#define hipErrorHardwareStackError cudaErrorHardwareStackError
#define hipErrorIllegalInstruction cudaErrorIllegalInstruction
#define hipErrorMisalignedAddress cudaErrorMisalignedAddress
#define hipErrorInvalidAddressSpace cudaErrorInvalidAddressSpace
#define hipErrorInvalidPc cudaErrorInvalidPc

#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostRegisterDefault cudaHostRegisterDefault

#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeMaxGridDimX cudaDevAttrMaxGridDimX

/* ---- functions (same arguments unless a wrapper says otherwise) ---- */
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostFree cudaFreeHost
#define hipHostRegister cudaHostRegister
#define hipHostUnregister cudaHostUnregister
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString

/* hipHostMalloc(ptr, size, flags): cudaHostAlloc takes the same arguments. */
static inline hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  return cudaHostAlloc(ptr, size, flags);
}

/* hipDeviceGetName(name, len, device): the CUDA runtime has no such call; the name is the one
 * field of cudaDeviceProp we read (it has been stable since CUDA 2). */
static inline hipError_t hipDeviceGetName(char *name, int len, int device) {
  struct cudaDeviceProp p;
  hipError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
  int i = 0;
  for (; len > 0 && i < len - 1 && p.name[i]; i++) name[i] = p.name[i];
  if (len > 0) name[i] = '\0';
  return cudaSuccess;
}

#ifdef __CUDACC__
/* hipLaunchKernelGGL(kernel, grid, block, shared bytes, stream, args...) */
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#endif

#endif
