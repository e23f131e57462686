/* md/sim.h - the simulator backend (sim/): md_sim_backend(), and what the simulated device
 * offers beyond md_backend_ops (md/backend.h): its counters, its simulated clock and its debug
 * checks, for reports and tests. The runtime never includes this header: a driver product
 * registers the backend (runtime/driver/entry.c) and the runtime reaches it through its ops.
 *
 * Every function here takes an md_backend opened through md_sim_backend()->open (passing one
 * from another backend is a caller bug; it is detected by a magic number where possible and
 * then answered with zeros). All are thread-safe.
 *
 * The device:
 *
 * Memory. Device memory is an arena of its own (sim/src/sim_arena.h), one mmap reservation of
 * mem_limit bytes (0: 1 GiB; larger than 64 GiB: capped at 64 GiB), never host memory handed
 * out directly. An md_devptr is MD_SIM_DEVPTR_TAG | device id << 40 | arena offset: never a
 * valid host address (non-canonical on x86-64), never 0, and a pointer of another sim device
 * is refused. A kernel gets host addresses from kernel_ptr(). Allocations are 256-byte
 * aligned, zero-filled, with at least 64 bytes of red zone on each side; freed memory is
 * poisoned (0xDB; large spans are released with madvise and read 0). A red zone holds a canary
 * derived from each byte's address and the device's seed (md_backend_params.seed when
 * has_seed, else a random seed per device): every allocation's red zones differ from every
 * other's, no 8-byte word of them is one byte repeated, the same seed gives the same bytes at
 * the same offsets, and another seed others. One allocation may have up to mem_limit bytes
 * (more: RESOURCE_EXHAUSTED_PERSISTENT; more than fits now: RESOURCE_EXHAUSTED_TRANSIENT).
 *
 * Checks. Red zones are checked when an allocation is freed and after every launch for the
 * allocations the call's tensors point into; with MD_SIM_DEBUG_CHECK_ALL (or the environment
 * variable MD_SIM_CHECK_ALL=1 at open) after every launch for every live allocation and every
 * free block's poison too. Before it runs, a launch refuses (GENERAL_FAILURE) a tensor that
 * holds a device pointer instead of a kernel_ptr() address, points into freed or unallocated
 * device memory, or runs past the end of its allocation.
 *   Writes. A write is caught when it changes a red-zone byte, whatever it writes: an aligned
 *   8-byte word of a red zone written over is always caught (with a constant such as the old
 *   0xFD, with another allocation's red zone copied over, with anything); fewer bytes escape
 *   only if each byte written happens to equal the canary byte it covers (1 in 256 per byte).
 *   A write that skips the red zone and lands in a neighbour's payload is not caught.
 *   Reads. A kernel that reads past the end of an allocation (or before its start) reads its
 *   red zone; the device sees it when the kernel copies what it read into an output. After
 *   every launch, each output in device memory is searched for the red-zone bytes of the
 *   allocations the launch's tensors point into: (1) element-wise: where an element-wise
 *   kernel puts the bytes just past an input's allocation (as far from the output's start as
 *   they are from the input's start), 4 or more bytes of the canary (one float read past the
 *   end) are a finding (a coincidence has a 2^-32 chance); (2) anywhere in outputs of at most
 *   16 KiB (every output with MD_SIM_DEBUG_CHECK_ALL): a whole canary word at an 8-byte-
 *   aligned place (a copy of 8 or more bytes, displaced by a multiple of 8 bytes). Not caught:
 *   a read whose value the kernel changes before it writes it (a sum, a conversion, a
 *   comparison), or never writes; a copy of fewer than 8 bytes, or displaced by a distance
 *   that is not a multiple of 8, away from the element-wise place; a copy into a larger
 *   output away from that place (unless MD_SIM_DEBUG_CHECK_ALL); a copy into host memory or
 *   into an input; the red zones of allocations that are not among the launch's tensors.
 *   Findings. A damaged red zone or a red-zone read after a launch makes the launch fail with
 *   GENERAL_FAILURE and a message naming the allocation and the offset: "red zone hit: N
 *   byte(s) written past the end of allocation 0x... (size S), first at +K (byte 0x.., not
 *   0x..)" (and, when the bytes are another red zone's canary, whose), or "red zone read: N
 *   byte(s) past the end of allocation 0x... (size S, input I), from +K, are in output J at
 *   +M". A damaged red zone at free, a write into freed memory found when it is reused, and a
 *   free of something that is not a live allocation are counted and reported on stderr (see
 *   md_sim_report_last). Nothing aborts.
 *
 * Fault plans (md_backend_params.faults): `KIND@N[,KIND@N...]`, N >= 1. They fire at the
 * runtime's fault points (md_backend_ops.fault_point): the reference runtime calls one for
 * each API call of the site's kind that has passed its argument checks, just before the
 * call's device work, so the numbers count valid calls in call order (calls made after the
 * device is lost are not counted):
 *   alloc_fail@N   the N-th allocate call: RESOURCE_EXHAUSTED_TRANSIENT
 *   copy_fail@N    the N-th copy_from/copy_to call: GENERAL_FAILURE
 *   kernel_fail@N  the N-th execution (execute or execute_async): GENERAL_FAILURE, which the
 *                  runtime reports as that execution's kernel status
 *   device_lost@N  the N-th execution: DEVICE_UNAVAILABLE, and the device is lost: every
 *                  later call returns DEVICE_UNAVAILABLE, except free (still releases),
 *                  close, info, stats, kernel_ptr and the destroy calls; queued work fails.
 * The backend's own calls (alloc, write, launch, ...) inject nothing.
 *
 * Execution. With a NULL stream every call does its work on the calling thread and returns
 * its status. On a stream, work is queued and run by worker threads, in stream order; the call
 * returns only the errors found before the work is accepted (bad pointers, bounds, a lost
 * device), and the accepted work's errors (a kernel failure, a red-zone hit, a lost device)
 * come from stream_sync, which returns the first one and clears it. A launch's md_kernel_call,
 * its tensors and its md_kernel_status must stay valid until the stream is synchronized.
 * Unseeded, two workers run ready streams, oldest command first. With a seed, one worker runs
 * them in an order decided by the seed alone: issued work is held until a flush (stream_sync,
 * event_wait, event_destroy), which releases it as a batch; the worker finishes a batch before
 * the next and picks each next stream of the batch with a seeded draw, so the same calls in the
 * same order give the same interleaving on every run (md_sim_order), and another seed another.
 * Events are reached when the work issued before them has run; event_wait blocks up to its
 * timeout (MISSED_DEADLINE_TRANSIENT). Destroying a stream or an event waits for its queued
 * work.
 *
 * Time. A model, off by default: latency_ns per launch, copy_gbps for copies (bytes / GB/s).
 * Synchronous work advances the device clock; queued work its stream's clock, and the device
 * clock is at least the latest stream clock. Nothing sleeps, but for the start-up cost model
 * (init_ns): the first open of each process waits init_ns for real, as a GPU runtime's start-up
 * would (docs/sim.md). */
#ifndef MD_SIM_H
#define MD_SIM_H

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
#define MD_SIM_DEBUG_CHECK_ALL 1u   /* after each launch, check every red zone and free block,
                                       and search every output whole for red-zone reads */

/* The simulator's ops table (static storage): register it with md_backend_register. */
const md_backend_ops *md_sim_backend(void);

/* Counters of one sim device. `common` is what ops->stats reports: allocs/frees count
 * successful calls, bytes_* count payload bytes (what callers asked for), copies and
 * bytes_copied count copies that happened, launches counts launch() calls on a live device
 * (as launch_calls), redzone_hits damaged red zones found, poison_hits writes into freed
 * memory found; redzone_reads counts launch outputs found holding red-zone bytes. */
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
  uint64_t alloc_calls, copy_calls, launch_calls;   /* backend calls */
  uint64_t clock_ns;            /* simulated device time */
  uint32_t lost;                /* 1 once the device is lost */
  uint32_t workers;             /* worker threads started */
  uint64_t site_calls[3];       /* fault points seen: allocate, copy, execution (md_fault_site) */
  uint64_t commands_run;        /* queued commands run so far */
  uint64_t order_hash;          /* FNV-1a of the order they ran in (stream, index, kind) */
  uint64_t redzone_reads;       /* launch outputs found holding red-zone bytes (reads past an end) */
} md_sim_stats;

/* One queued command that ran: its stream's creation number on the device (from 1), its number
 * on that stream (from 1) and its kind (0 copy, 1 launch, 2 event). */
typedef struct md_sim_order_entry {
  uint64_t stream, index;
  uint32_t kind;
} md_sim_order_entry;

/* Copies the last (up to 4096) commands run, oldest first, into out (at most max); *hash
 * (when not NULL) gets the hash of the whole order. Returns how many commands have run. */
size_t md_sim_order(md_backend *b, md_sim_order_entry *out, size_t max, uint64_t *hash);

/* The modelled device time of one launch (is_launch) or one copy of `bytes`: 0 when the
 * model is off. (Runtimes ask through md_backend_ops.device_ns.) */
uint64_t md_sim_model_ns(md_backend *b, int is_launch, uint64_t bytes);

/* Fills *out (zeros for a backend that is not sim). */
void md_sim_stats_get(md_backend *b, md_sim_stats *out);

/* Simulated device time in nanoseconds (see Time above). */
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
