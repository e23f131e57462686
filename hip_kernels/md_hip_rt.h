/* md_hip_rt.h - private to hip_kernels: the HIP runtime for whichever platform this build
 * targets. MD_HIP_CPU (the CPU execution layer's build, hip_kernels/cpu): our HIP on the CPU
 * (md_hip_cpu.h). MD_HIP_NVIDIA (set by the build for nvcc objects and for C sources of an
 * NVIDIA build): our CUDA mapping (md_hip_compat.h). Otherwise Debian's HIP for AMD (the
 * includer, or hipcc, defines __HIP_PLATFORM_AMD__). From C only the host API is available; from
 * .hip sources also kernels. */
#ifndef MD_HIP_RT_H
#define MD_HIP_RT_H

#if defined(MD_HIP_CPU)
#include "md_hip_cpu.h"
#elif defined(MD_HIP_NVIDIA) || defined(__CUDACC__)
#include "md_hip_compat.h"
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#else
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#endif

#endif
