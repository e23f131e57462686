/* md_hip_cpu.h - private to hip_kernels: the CPU execution layer ("hipcpu"), a test double of the
 * HIP runtime API subset this project uses, so the real backend (hip_backend.c, hip_ops.c,
 * hip_pool.c, hip_error.c) and the real kernels (*.hip, compiled as C++) run on a machine with
 * no GPU, under ASan/UBSan and TSan. Like SQLite's test VFS it is small and never used for
 * speed. docs/hip.md ("The CPU execution layer") describes the model; in short:
 *
 *   - device memory is host memory (aligned to 256 bytes, filled with 0xDB so nothing relies on
 *     fresh memory being zero), with a capacity (md_hipcpu_set_memory) and the runtime's errors:
 *     hipErrorOutOfMemory past it, hipErrorInvalidValue for a copy or memset whose device range
 *     is not inside one live allocation, or for freeing what was not allocated;
 *   - a stream is an ordered work queue run by its own thread; events mark points in streams;
 *     hipFree / hipHostFree synchronize the device first, as the real runtimes do; an async copy
 *     from or to pageable (not hipHostMalloc'd) host memory returns only once it is done;
 *   - a kernel launch is checked (grid and block limits: hipErrorInvalidConfiguration) and
 *     queued; on its stream's thread every block runs, and in each block every thread runs as a
 *     fiber with its own stack: __syncthreads is a real barrier (a block whose threads do not all
 *     reach it is a kernel fault), __shared__ memory is shared by the block's threads (one
 *     launch of a given kernel function runs at a time; different kernels run side by side);
 *   - errors follow the CUDA runtime's model (the strictest of the two runtimes): every failing
 *     call records its error as the calling thread's last error (hipErrorNotReady included)
 *     until hipGetLastError reads it; a fatal error ("sticky": illegal address, launch failure,
 *     the NVIDIA-only misaligned address, ...) is returned by every later call of every thread;
 *   - errors can be injected (md_hipcpu_fail, md_hipcpu_lose_device), streams held
 *     (md_hipcpu_stream_hold) so "not ready" is deterministic, and launches logged.
 *
 * From C only the host API is declared; from C++ also what kernels use (__global__,
 * __shared__, __syncthreads, threadIdx..., dim3, float4, hipLaunchKernelGGL). Error numbers are
 * HIP's (AMD) where HIP has the error, CUDA's for the NVIDIA-only fatal errors. */
#ifndef MD_HIP_CPU_H
#define MD_HIP_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types and constants ---- */
typedef enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorDeinitialized = 4,
  hipErrorInvalidConfiguration = 9,
  hipErrorInsufficientDriver = 35,
  hipErrorInvalidDeviceFunction = 98,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorECCNotCorrectable = 214,
  hipErrorInvalidHandle = 400,
  hipErrorNotReady = 600,
  hipErrorIllegalAddress = 700,
  hipErrorLaunchOutOfResources = 701,
  hipErrorLaunchTimeOut = 702,
  hipErrorAssert = 710,
  hipErrorHardwareStackError = 714,   /* NVIDIA only (cudaErrorHardwareStackError) */
  hipErrorIllegalInstruction = 715,   /* NVIDIA only */
  hipErrorMisalignedAddress = 716,    /* NVIDIA only */
  hipErrorInvalidAddressSpace = 717,  /* NVIDIA only */
  hipErrorInvalidPc = 718,            /* NVIDIA only */
  hipErrorLaunchFailure = 719,
  hipErrorHostMemoryAlreadyRegistered = 712,
  hipErrorHostMemoryNotRegistered = 713,
  hipErrorNotSupported = 801,
  hipErrorUnknown = 999
} hipError_t;
#define hipErrorMemoryAllocation hipErrorOutOfMemory
#define hipErrorInvalidResourceHandle hipErrorInvalidHandle
/* This platform has the NVIDIA-only fatal errors above (hip_error.c lists them as device loss). */
#define MD_HIP_HAS_NV_FATAL 1

typedef struct md__hipcpu_stream *hipStream_t;
typedef struct md__hipcpu_event *hipEvent_t;

typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4
} hipMemcpyKind;

typedef enum hipDeviceAttribute_t {
  hipDeviceAttributeMaxThreadsPerBlock = 1,
  hipDeviceAttributeMaxGridDimX = 2,
  hipDeviceAttributeMultiprocessorCount = 3
} hipDeviceAttribute_t;

#define hipStreamDefault 0u
#define hipStreamNonBlocking 1u
#define hipEventDefault 0u
#define hipEventBlockingSync 1u
#define hipEventDisableTiming 2u
#define hipHostMallocDefault 0u
#define hipHostRegisterDefault 0u

/* ---- the host API (same arguments and meaning as HIP's) ---- */
hipError_t hipGetDeviceCount(int *count);
hipError_t hipSetDevice(int device);
hipError_t hipGetDevice(int *device);
hipError_t hipDeviceGetName(char *name, int len, int device);
hipError_t hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device);
hipError_t hipDeviceSynchronize(void);
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes);
hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipFree(void *ptr);
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags);
hipError_t hipHostFree(void *ptr);
hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags);
hipError_t hipHostUnregister(void *ptr);
hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind);
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t s);
hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t s);
hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned int flags);
hipError_t hipStreamDestroy(hipStream_t s);
hipError_t hipStreamSynchronize(hipStream_t s);
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags);
hipError_t hipEventCreate(hipEvent_t *e);
hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned int flags);
hipError_t hipEventDestroy(hipEvent_t e);
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s);
hipError_t hipEventQuery(hipEvent_t e);
hipError_t hipEventSynchronize(hipEvent_t e);
hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop);
hipError_t hipGetLastError(void);
hipError_t hipPeekAtLastError(void);
const char *hipGetErrorName(hipError_t e);
const char *hipGetErrorString(hipError_t e);

/* ---- test hooks (thread-safe; not part of HIP) ---- */

/* Where an injected error fires. Synchronous sites return it from the call (recorded as the
 * thread's last error; a fatal error also loses the device). MD_HIPCPU_KERNEL is asynchronous:
 * the kernel does not run and the error, fatal or not, becomes the device's sticky error, seen
 * at the next synchronization and by every later call (what a faulting kernel does on a GPU). */
typedef enum md_hipcpu_site {
  MD_HIPCPU_DEVICE = 0,    /* hipGetDeviceCount, hipSetDevice, hipDeviceGetName, hipMemGetInfo */
  MD_HIPCPU_MALLOC,        /* hipMalloc */
  MD_HIPCPU_HOST_MALLOC,   /* hipHostMalloc, hipHostRegister */
  MD_HIPCPU_COPY,          /* hipMemcpy, hipMemcpyAsync, hipMemsetAsync */
  MD_HIPCPU_STREAM,        /* hipStreamCreateWithFlags */
  MD_HIPCPU_EVENT,         /* hipEventCreate*, hipEventRecord */
  MD_HIPCPU_LAUNCH,        /* a kernel launch, at the call (as a bad configuration is) */
  MD_HIPCPU_KERNEL,        /* a kernel, when it reaches the head of its stream */
  MD_HIPCPU_SYNC,          /* hipStreamSynchronize, hipEventSynchronize, hipEventQuery */
  MD_HIPCPU_SITES
} md_hipcpu_site;

/* The nth call at `site` from now (1: the next one) fails with e; nth 0 disarms the site. One
 * plan per site; a fired plan is gone. */
void md_hipcpu_fail(md_hipcpu_site site, uint64_t nth, hipError_t e);
/* The device is lost now: every later call of every thread returns e (a sticky error). */
void md_hipcpu_lose_device(hipError_t e);
/* 1 when e is a fatal ("sticky") error on this platform: one that loses the device. */
int md_hipcpu_is_fatal(hipError_t e);
/* Device memory capacity in bytes (default 4 GiB); takes effect for later allocations. */
void md_hipcpu_set_memory(uint64_t bytes);
/* Holds (1) or releases (0) a stream: its thread finishes the operation it is running, then
 * starts no other until released. For deterministic "not ready" states in tests. */
void md_hipcpu_stream_hold(hipStream_t s, int hold);
/* 1: kernel launches are checked and logged but never run (launch-geometry tests with sizes no
 * test can allocate); 0 (default): they run. */
void md_hipcpu_set_dry_run(int on);

typedef struct md_hipcpu_stats {
  uint64_t device_allocs, device_bytes;  /* live hipMalloc allocations */
  uint64_t host_allocs;                  /* live hipHostMalloc allocations */
  uint64_t host_registered;              /* live hipHostRegister ranges */
  uint64_t registered_copies;            /* async copies whose host side was a registered range */
  uint64_t streams, events;              /* live streams (the NULL stream not counted), events */
  uint64_t launches, blocks, threads;    /* kernels launched; blocks and threads run */
  uint64_t barriers;                     /* __syncthreads barriers completed (per block) */
} md_hipcpu_stats;
void md_hipcpu_stats_get(md_hipcpu_stats *out);

/* One logged launch: the kernel's name as written in hipLaunchKernelGGL, its geometry. */
typedef struct md_hipcpu_launch {
  char kernel[48];
  uint32_t grid[3], block[3];
} md_hipcpu_launch;
/* Copies up to max of the latest launches (of any thread), newest first; returns how many.
 * The log keeps the last 64. */
int md_hipcpu_launches(md_hipcpu_launch *out, int max);
void md_hipcpu_launches_clear(void);
/* The message of the last kernel fault the layer detected itself (a barrier not reached by
 * every thread of a block), "" if none. */
const char *md_hipcpu_fault_message(void);

/* ---- what kernels and launches use (the implementation's side) ---- */
typedef struct md__hipcpu_u3 {
  uint32_t x, y, z;
} md__hipcpu_u3;
/* What a running GPU thread sees: its index, its block's, the launch's geometry. */
typedef struct md__hipcpu_kctx {
  md__hipcpu_u3 tid, bid, bdim, gdim;
  uint32_t magic; /* MD__HIPCPU_KCTX_MAGIC */
} md__hipcpu_kctx;
#define MD__HIPCPU_KCTX_MAGIC 0x4B435458u
/* Every GPU thread runs on a stack of MD__HIPCPU_STACK bytes aligned to its size, whose top
 * slot (MD__HIPCPU_SLOT bytes below the end) points at the thread's md__hipcpu_kctx. */
#define MD__HIPCPU_STACK (UINT64_C(256) << 10)
#define MD__HIPCPU_SLOT 64u
/* The running GPU thread's context, found from the stack pointer (only inside a kernel). */
static inline const md__hipcpu_kctx *md__hipcpu_ctx(void) {
  const uintptr_t top = ((uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)(MD__HIPCPU_STACK - 1)) +
                        (uintptr_t)MD__HIPCPU_STACK;
  return *(const md__hipcpu_kctx *const *)(top - MD__HIPCPU_SLOT);
}
void md__hipcpu_syncthreads(void);
/* Queues body(ctx) as a kernel of `name` on s with the given geometry; destroy(ctx) is called
 * once the kernel ran or was refused. The launch's error is recorded as the thread's last error
 * (hipLaunchKernelGGL returns nothing). */
void md__hipcpu_launch(const char *name, const uint32_t grid[3], const uint32_t block[3], size_t shmem,
                       hipStream_t s, void (*body)(void *ctx), void (*destroy)(void *ctx), void *ctx);

#ifdef __cplusplus
} /* extern "C" */

/* ---- kernels, as C++ ---- */
#include <cstdlib>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

struct dim3 {
  uint32_t x, y, z;
  constexpr dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};

#define __global__
#define __device__
#define __host__
/* One copy per kernel function, shared by the threads of the block running: the layer runs one
 * launch of a kernel function at a time (launches of different kernels run side by side). Not
 * thread_local: in a shared object every access would be a __tls_get_addr call. */
#define __shared__ static
#define threadIdx (md__hipcpu_ctx()->tid)
#define blockIdx (md__hipcpu_ctx()->bid)
#define blockDim (md__hipcpu_ctx()->bdim)
#define gridDim (md__hipcpu_ctx()->gdim)

static inline void __syncthreads(void) { md__hipcpu_syncthreads(); }

/* Rounded multiply and add that are never contracted into an FMA (CUDA's guarantee for
 * __fmul_rn / __fadd_rn): the result passes through an empty asm the compiler cannot see
 * through (a volatile elsewhere), so it cannot fuse it with the next operation. */
static inline float md__hipcpu_opaque(float r) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(r));
#elif defined(__aarch64__)
  __asm__("" : "+w"(r));
#else
  volatile float v = r;
  r = v;
#endif
  return r;
}
static inline float __fmul_rn(float a, float b) { return md__hipcpu_opaque(a * b); }
static inline float __fadd_rn(float a, float b) { return md__hipcpu_opaque(a + b); }

namespace md_hipcpu {
/* A launch's kernel and its arguments, copied at the launch as a GPU runtime copies them. */
template <typename... P>
struct closure {
  typedef std::tuple<typename std::decay<P>::type...> args_t;
  void (*kernel)(P...);
  args_t args;
  static void run(void *c) {
    closure *k = static_cast<closure *>(c);
    std::apply(k->kernel, k->args);
  }
  static void destroy(void *c) {
    closure *k = static_cast<closure *>(c);
    k->~closure();
    std::free(k);
  }
};

template <typename... P, typename... A>
static inline void launch(const char *name, void (*kernel)(P...), dim3 g, dim3 b, size_t shmem, hipStream_t s,
                          A &&...a) {
  static_assert(sizeof...(P) == sizeof...(A), "hipLaunchKernelGGL: wrong number of kernel arguments");
  typedef closure<P...> C;
  void *mem = std::malloc(sizeof(C));
  const uint32_t grid[3] = {g.x, g.y, g.z}, block[3] = {b.x, b.y, b.z};
  if (!mem) { /* the launch fails as an out-of-resources launch does */
    md__hipcpu_launch(name, grid, block, shmem, s, nullptr, nullptr, nullptr);
    return;
  }
  C *c = new (mem) C{kernel, typename C::args_t(static_cast<P>(std::forward<A>(a))...)};
  md__hipcpu_launch(name, grid, block, shmem, s, &C::run, &C::destroy, c);
}
} // namespace md_hipcpu

/* hipLaunchKernelGGL(kernel, grid, block, shared bytes, stream, args...) */
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  md_hipcpu::launch(#kernel, kernel, dim3(grid), dim3(block), (size_t)(shmem), (stream), __VA_ARGS__)

#endif /* __cplusplus */
#endif
