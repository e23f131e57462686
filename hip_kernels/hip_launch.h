/* hip_launch.h - private to hip_kernels: the launchers of the HIP kernels, callable from C.
 *
 * Each launcher queues its kernel(s) on stream `s` and returns the launch status
 * (hipGetLastError() after the launch: a bad configuration or a sticky device error; errors of
 * the kernel's execution surface at the next synchronization). It clears the thread's last
 * error first (md__hip_launch_begin), so an earlier unrelated failure is not reported as its own. Every pointer is a device
 * pointer aligned to 4 bytes; the callers (hip_ops.c) validated dims and buffer sizes. Counts are
 * elements, not bytes. A count of 0 launches nothing. */
#ifndef MD_HIP_LAUNCH_H
#define MD_HIP_LAUNCH_H

#include <stdint.h>

#include "md_hip_rt.h"
#include "md_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* o = act(op(a, b)) with numpy broadcasting described by plan (md__bcast_init); na / nb are the
 * element counts of a and b. op: MD__BIN_*, act: MD__ACT_*. */
hipError_t md__hip_binary(hipStream_t s, int op, int act, const md__bcast *plan, const float *a,
                          uint64_t na, const float *b, uint64_t nb, float *o);
/* o[i] = relu(a[i]) (NaN stays NaN). */
hipError_t md__hip_relu(hipStream_t s, const float *a, float *o, uint64_t n);
/* o[batch][units] = act(in[batch][isz] . w[units][isz] + bias[units]), tiled through shared
 * memory. */
hipError_t md__hip_fc(hipStream_t s, const float *in, const float *w, const float *bias, float *o,
                      uint32_t batch, uint32_t units, uint32_t isz, int act);
/* Softmax of in viewed as [outer][len][inner] along the middle axis, with beta. */
hipError_t md__hip_softmax(hipStream_t s, const float *in, float *o, uint64_t outer, uint64_t len,
                           uint64_t inner, float beta);
/* Device-to-device copy of `bytes` (RESHAPE). dst == src copies nothing. */
hipError_t md__hip_copy(hipStream_t s, void *dst, const void *src, uint64_t bytes);
/* One input of a CONCATENATION: for p < outer, o[p*total + off .. +chunk) = in[p*chunk ..
 * +chunk), in elements. */
hipError_t md__hip_concat_part(hipStream_t s, float *o, const float *in, uint64_t outer,
                               uint64_t chunk, uint64_t total, uint64_t off);

#ifdef __cplusplus
}
#endif
#endif
