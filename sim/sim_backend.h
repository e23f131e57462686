/* sim_backend.h - what the simulated device offers beyond md_backend_ops (md/backend.h):
 * its counters, its simulated clock and its debug checks, for reports and tests.
 *
 * Every function here takes an md_backend opened through md_sim_backend()->open (passing one
 * from another backend is a caller bug; it is detected by a magic number where possible and
 * then answered with zeros). All are thread-safe.
 *
 * The device, as this round builds it (issues 2 and 3):
 *
 * Memory. Device memory is an arena of its own (sim_arena.h), one mmap reservation of
 * mem_limit bytes (0: 1 GiB; larger than 64 GiB: capped at 64 GiB), never host memory handed
 * out directly. An md_devptr is MD_SIM_DEVPTR_TAG | device id << 40 | arena offset: never a
 * valid host address (non-canonical on x86-64), never 0, and a pointer of another sim device
 * is refused. A kernel gets host addresses from kernel_ptr(). Allocations are 256-byte
 * aligned, zero-filled, with at least 64 bytes of red zone on each side; freed memory is
 * poisoned (0xDB; large spans are released with madvise and read 0). One allocation may have
 * up to mem_limit bytes (more: RESOURCE_EXHAUSTED_PERSISTENT; more than fits now:
 * RESOURCE_EXHAUSTED_TRANSIENT).
 *
 * Checks. Red zones are checked when an allocation is freed and after every launch for the
 * allocations the call's tensors point into; with MD_SIM_DEBUG_CHECK_ALL (or the environment
 * variable MD_SIM_CHECK_ALL=1 at open) after every launch for every live allocation and every
 * free block's poison too. Before it runs, a launch refuses (GENERAL_FAILURE) a tensor that
 * holds a device pointer instead of a kernel_ptr() address, points into freed or unallocated
 * device memory, or runs past the end of its allocation. A damaged red zone after a launch
 * makes the launch fail with GENERAL_FAILURE and a message naming the allocation; a damaged
 * red zone at free, a write into freed memory found when it is reused, and a free of
 * something that is not a live allocation are counted and reported on stderr (see
 * md_sim_report_last). Nothing aborts.
 *
 * Fault plans (md_backend_params.faults): `KIND@N[,KIND@N...]`, N >= 1 counting the calls of
 * that kind on this device since open (alloc: alloc(); copy: write(), read() and copy()
 * together; kernel and device_lost: launch()), whether or not they succeed; calls made after
 * the device is lost are not counted. A call that its own argument checks refuse keeps its
 * number but fires no fault (the fault is not moved to the next call).
 *   alloc_fail@N   the N-th alloc() fails RESOURCE_EXHAUSTED_TRANSIENT
 *   copy_fail@N    the N-th copy fails GENERAL_FAILURE and copies nothing
 *   kernel_fail@N  the N-th launch does not run its kernel; st gets GENERAL_FAILURE and
 *                  "sim: injected kernel failure (kernel_fail@N)"
 *   device_lost@N  the N-th launch does not run its kernel and the device is lost: it and
 *                  every later call returns DEVICE_UNAVAILABLE, except free (still releases),
 *                  close, info, stats, kernel_ptr and the destroy calls
 *
 * Execution, this round: synchronous. Every call does its work on the calling thread before
 * it returns, with or without a stream, and returns its status; on a stream, an error of work
 * that was accepted (an injected fault, a kernel failure, a red-zone hit, the launch that
 * loses the device) is also kept as the stream's error, which the next stream_sync returns
 * and clears. Errors found before work is accepted (bad pointers, bounds, a lost device) are
 * only returned. An event is reached when it is recorded; an event never recorded counts as
 * reached. latency_ns advances a simulated clock per launch (md_sim_clock_ns); nothing
 * sleeps. The seed is kept but nothing is scheduled yet.
 *
 * What issue 3 changes (the interface above stays): work on a non-NULL stream is queued and
 * run by worker threads in stream order, with a seeded scheduler choosing among the ready
 * streams; the call then returns only the errors found before the work is accepted, and the
 * accepted work's errors come from stream_sync (a launch's md_kernel_status and md_kernel_call
 * must then stay valid until the stream is synchronized). Events are reached when the work
 * before them has run; event_wait blocks up to its timeout. Fault numbers are given when a
 * call is made, not when its work runs, so a plan hits the same call whatever the schedule.
 * The clock becomes per stream (latency plus a copy bandwidth model), the device clock the
 * latest of them. */
#ifndef MD_SIM_BACKEND_H
#define MD_SIM_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "md/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MD_SIM_DEVPTR_TAG 0x5111000000000000ull      /* bits 48..63 of every sim devptr */
#define MD_SIM_DEVPTR_TAG_MASK 0xFFFF000000000000ull
#define MD_SIM_DEFAULT_MEM_LIMIT (1ull << 30)        /* mem_limit 0 */
#define MD_SIM_MAX_MEM_LIMIT (64ull << 30)           /* larger mem_limit values are capped */

/* md_sim_debug_set flags. */
#define MD_SIM_DEBUG_CHECK_ALL 1u   /* after each launch, check every red zone and free block */

/* Counters of one sim device. `common` is what ops->stats reports: allocs/frees count
 * successful calls, bytes_* count payload bytes (what callers asked for), copies and
 * bytes_copied count copies that happened, launches counts launch() calls on a live device
 * (as launch_calls), redzone_hits damaged red zones found, poison_hits writes into freed
 * memory found. */
typedef struct md_sim_stats {
  md_backend_stats common;
  uint64_t mem_limit;           /* the largest allocation: mem_limit after the default and cap */
  uint64_t arena_bytes;         /* bytes of the reservation (mem_limit + 512 bytes of guard) */
  uint64_t live_blocks;         /* live allocations */
  uint64_t span_live;           /* arena bytes they hold, alignment and red zones included */
  uint64_t bytes_free, free_blocks, largest_free;
  uint64_t max_alloc_now;       /* the largest allocation that would succeed now */
  double fragmentation;         /* 1 - largest_free / bytes_free; 0 when nothing is free */
  uint64_t refused_persistent;  /* allocations larger than mem_limit */
  uint64_t refused_transient;   /* allocations that did not fit (injected failures excluded) */
  uint64_t bad_frees;           /* frees of something that is not a live allocation start */
  uint64_t bad_pointers;        /* copies and launches refused for a pointer or its bounds */
  uint64_t alloc_calls, copy_calls, launch_calls;   /* the numbers fault plans count */
  uint64_t clock_ns;            /* simulated device time */
  uint32_t lost;                /* 1 once the device is lost */
} md_sim_stats;

/* Fills *out (zeros for a backend that is not sim). */
void md_sim_stats_get(md_backend *b, md_sim_stats *out);

/* Simulated device time in nanoseconds: latency_ns per launch so far. */
uint64_t md_sim_clock_ns(md_backend *b);

/* Simulated device time at which event e was reached (0: never recorded). */
uint64_t md_sim_event_time_ns(md_backend *b, md_event *e);

/* Sets debug flags (MD_SIM_DEBUG_*), replacing the previous ones. */
void md_sim_debug_set(md_backend *b, uint32_t flags);

/* Checks now every live allocation's red zones and every free block's poison. Returns the
 * number of hits (each counted, reported and repaired); the first one's message goes to msg
 * (when msg && len). */
uint64_t md_sim_check(md_backend *b, char *msg, size_t len);

/* Copies the device's last report (red-zone hit, poison hit, bad free; "" when none) into
 * buf; returns its full length. */
size_t md_sim_report_last(md_backend *b, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
