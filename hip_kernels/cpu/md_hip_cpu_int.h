/* md_hip_cpu_int.h - private to the CPU execution layer (hip_kernels/cpu): what its runtime
 * (md_hip_cpu.c and the files named in md_hip_cpu_rt_int.h: memory, streams, events, errors)
 * needs from its kernel executor (md_hip_cpu_exec.c: blocks and threads as fibers). */
#ifndef MD_HIP_CPU_INT_H
#define MD_HIP_CPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "md_hip_cpu.h"

/* Runs every block of a kernel on the calling thread, each block's threads as fibers that
 * meet at __syncthreads. Returns 0, or -1 when the kernel faulted (a block whose threads did
 * not all reach the same barrier) with a message in msg. Counts blocks, threads and barriers
 * into the three counters. Thread-safe: up to a few kernels run at once (an executor pool);
 * more wait for an executor. */
int md__hipcpu_exec(const char *name, const uint32_t grid[3], const uint32_t block[3], void (*body)(void *),
                    void *ctx, uint64_t *blocks, uint64_t *threads, uint64_t *barriers, char *msg,
                    size_t msglen);

#endif
