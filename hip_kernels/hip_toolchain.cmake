# hip_toolchain.cmake - resolves MD_HIP (auto|amd|nvidia|off) into MD_HIP_BACKEND (amd, nvidia or
# off) and finds the compilers hip_compile_check uses. Included from the top-level CMakeLists.txt
# before the runtime, because enable_language(CUDA) must run at the top directory. docs/hip.md.
#
#   nvidia : the .hip sources compiled as CUDA by nvcc (md_hip_compat.h), linked to CUDA::cudart.
#   amd    : the .hip sources compiled by Debian's hipcc (add_custom_command; enable_language(HIP)
#            does not work with Debian's layout), linked to libamdhip64.
#   auto   : nvidia when nvcc is found and an NVIDIA driver is loaded (/dev/nvidiactl), else amd
#            when hipcc is found and an AMD GPU is exposed (/dev/kfd), else off. Sanitizer builds
#            resolve to off (the GPU runtimes are not instrumented). A machine with the compilers
#            but no GPU (CI) gets no backend in the driver - backend=hip answers "not built" - but
#            still compiles every kernel for both platforms in the hip_compile_check test.
find_program(MD_HIPCC hipcc)
find_program(MD_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_PATH PATH_SUFFIXES bin)
find_library(MD_AMDHIP64 amdhip64)
set(MD_HIP_AMD_ARCHS "gfx90a;gfx940;gfx1030" CACHE STRING
    "AMD targets for hipcc --offload-arch (Debian's clang-15 rejects gfx941/gfx942; gfx1100 has no device library)")
set(MD_HIP_CHECK_NV_ARCH "90" CACHE STRING "sm_ architecture nvcc compiles for in hip_compile_check")

set(MD_HIP_BACKEND off)
if(MD_HIP STREQUAL "nvidia")
  if(NOT MD_NVCC)
    message(FATAL_ERROR "mdc: MD_HIP=nvidia but nvcc was not found (looked in PATH and /usr/local/cuda/bin)")
  endif()
  set(MD_HIP_BACKEND nvidia)
elseif(MD_HIP STREQUAL "amd")
  if(NOT MD_HIPCC OR NOT MD_AMDHIP64)
    message(FATAL_ERROR "mdc: MD_HIP=amd needs hipcc and libamdhip64 (apt-get install hipcc libamdhip64-dev)")
  endif()
  set(MD_HIP_BACKEND amd)
elseif(MD_HIP STREQUAL "auto")
  if(MD_SANITIZE)
    set(_md_hip_why "sanitizer build")
    set(_md_hip_sep ": ")
  elseif(MD_NVCC AND EXISTS /dev/nvidiactl)
    set(MD_HIP_BACKEND nvidia)
  elseif(MD_HIPCC AND MD_AMDHIP64 AND EXISTS /dev/kfd)
    set(MD_HIP_BACKEND amd)
  else()
    set(_md_hip_sep ": ")
    set(_md_hip_why "no GPU driver found (/dev/nvidiactl, /dev/kfd)")
  endif()
elseif(NOT MD_HIP STREQUAL "off")
  message(FATAL_ERROR "mdc: MD_HIP=${MD_HIP}: expected auto, amd, nvidia or off")
endif()

if(MD_HIP_BACKEND STREQUAL "nvidia")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)   # H100 / H200
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${MD_NVCC})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()

if(MD_HIP_BACKEND STREQUAL "off")
  message(STATUS "mdc: HIP backend: off (MD_HIP=${MD_HIP}${_md_hip_sep}${_md_hip_why}); "
                 "hip_compile_check: hipcc ${MD_HIPCC}, nvcc ${MD_NVCC}")
else()
  message(STATUS "mdc: HIP backend: ${MD_HIP_BACKEND} (MD_HIP=${MD_HIP})")
endif()

# The CPU execution layer (hip_kernels/cpu, docs/hip.md): the real backend and the real .hip
# kernels (compiled as C++) over a CPU stand-in for HIP, built wherever tests are, in every
# configuration, sanitizers included, GPU or not. C++ is enabled here (the top directory) only for
# it: the rest of the project is C11.
if(MD_BUILD_TESTS)
  enable_language(CXX)
  # GPU compilers contract a*b+c into an FMA by default; the layer compiles the kernels the same
  # way (-ffp-contract=fast, with FMA instructions where this machine has them) so a kernel that
  # depends on contraction differs from the host reference here as it would on a GPU.
  include(CheckCXXSourceRuns)
  check_cxx_source_runs("int main(void) { __builtin_cpu_init(); return __builtin_cpu_supports(\"fma\") ? 0 : 1; }"
                        MD_HIPCPU_CPU_HAS_FMA)
endif()
