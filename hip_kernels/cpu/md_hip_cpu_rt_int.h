/* md_hip_cpu_rt_int.h - private to the CPU execution layer's runtime (its HIP API): the state
 * and helpers that its files share. md_hip_cpu.c: the state, errors, the device, test hooks;
 * md_hip_cpu_memory.c: allocations, copies and memsets; md_hip_cpu_stream.c: streams and
 * events; md_hip_cpu_launch.c: launches and their log. Kernels run in md_hip_cpu_exec.c
 * (md_hip_cpu_int.h).
 *
 * Locking: one mutex (md__hipcpu_g.lock) guards the allocation tables, the injection plans, the
 * stream list and the launch log; each stream and each event has its own mutex and condition
 * variables for its queue and progress. md__hipcpu_g.lock is never held while waiting for a
 * stream. */
#ifndef MD_HIP_CPU_RT_INT_H
#define MD_HIP_CPU_RT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "md_hip_cpu_int.h"

#define LOG_LEN 64

/* ---- state ---- */

typedef struct range {
  uintptr_t base;
  size_t size;
} range;

typedef struct ranges { /* sorted by base, non-overlapping */
  range *v;
  size_t n, cap;
} ranges;

typedef enum op_kind { OP_COPY, OP_SET, OP_KERNEL, OP_RECORD, OP_WAIT } op_kind;

typedef struct op {
  struct op *next;
  op_kind kind;
  uint64_t seq;
  union {
    struct { void *dst; const void *src; size_t n; } copy;
    struct { void *dst; int value; size_t n; } set;
    struct {
      char name[48];
      uint32_t grid[3], block[3];
      void (*body)(void *);
      void (*destroy)(void *);
      void *ctx;
    } kernel;
    struct { hipEvent_t e; uint64_t seq; } ev;
  } u;
} op;

/* The layer's state (one device per process), defined in md_hip_cpu.c. */
typedef struct md__hipcpu_state {
  pthread_mutex_t lock;
  ranges dev, host;
  ranges reg;                        /* hipHostRegister'd host ranges */
  uint64_t mem_total, mem_used;
  struct { uint64_t nth; hipError_t e; } plan[MD_HIPCPU_SITES];
  struct md__hipcpu_stream *streams; /* every live stream, the NULL stream's included */
  struct md__hipcpu_stream *null_stream;
  md_hipcpu_launch log[LOG_LEN];
  unsigned log_next, log_n;
  char fault[256];
  int dry_run;
} md__hipcpu_state;
extern md__hipcpu_state md__hipcpu_g;

extern atomic_int md__hipcpu_sticky;      /* the device's fatal error, 0 while it works */
extern atomic_uint_fast64_t md__hipcpu_n_launches, md__hipcpu_n_blocks, md__hipcpu_n_threads, md__hipcpu_n_barriers,
    md__hipcpu_n_streams, md__hipcpu_n_events, md__hipcpu_n_reg_copies;
/* Hidden, so that an access stays as cheap as to a file's own thread-local variable. */
extern __thread hipError_t md__hipcpu_last_err __attribute__((visibility("hidden")));

/* ---- errors ---- */

/* The injected error of the next call at site, or success (md_hip_cpu.c). */
hipError_t md__hipcpu_plan_take(md_hipcpu_site site);

/* Records e (not success) as the calling thread's last error; returns it. */
static inline hipError_t rec(hipError_t e) {
  if (e != hipSuccess) md__hipcpu_last_err = e;
  return e;
}

static inline void lose(hipError_t e) {
  int none = 0;
  atomic_compare_exchange_strong(&md__hipcpu_sticky, &none, (int)e);
}

static inline hipError_t sticky_error(void) {
  return (hipError_t)atomic_load_explicit(&md__hipcpu_sticky, memory_order_acquire);
}

/* The start of every call at a site: the device's sticky error, else an injected one (a fatal
 * injected error loses the device). Recorded as the last error. */
static inline hipError_t enter(md_hipcpu_site site) {
  hipError_t e = sticky_error();
  if (e != hipSuccess) return rec(e);
  if (site < MD_HIPCPU_SITES && (e = md__hipcpu_plan_take(site)) != hipSuccess) {
    if (md_hipcpu_is_fatal(e)) lose(e);
    return rec(e);
  }
  return hipSuccess;
}

/* ---- streams (md_hip_cpu_stream.c) ---- */

/* The stream a call means: NULL is the NULL stream (made at its first use). NULL result:
 * an invalid handle or no memory for the NULL stream (e says which). */
hipStream_t md__hipcpu_stream_of(hipStream_t s, hipError_t *e);
/* Queues o on s (the stream's thread frees it once run); returns its sequence number. */
uint64_t md__hipcpu_enqueue(hipStream_t s, op *o);
/* Waits until s has run its operation number seq. */
void md__hipcpu_stream_wait(hipStream_t s, uint64_t seq);
/* Waits for the work every stream had queued when called (hipDeviceSynchronize, and the
 * implicit synchronization of hipFree / hipHostFree). hipErrorOutOfMemory when the host has no
 * memory for the list of streams. */
hipError_t md__hipcpu_device_sync(void);

#endif
