/* bench_memory.c - benchmark 5: the driver's bookkeeping per live buffer, beyond its data.
 *
 * 1M (2^20) buffers of 16 bytes of data (a RELU [4] input role) are allocated through the
 * md_driver table on one sim device and kept live (the population shared with the token
 * benchmark). Bookkeeping = growth of VmRSS from before the first buffer to after the last,
 * minus the growth of the sim arena's own mapping (its Rss in /proc/self/smaps: the device
 * memory the arena committed for the data, i.e. each buffer's 256-byte allocation granule
 * with its red zone, as pages), divided by the number of buffers. What remains is host memory
 * the driver keeps per buffer: the handle-table entry, the buffer object, the sim allocator's
 * block record, and malloc's own overhead on them. The arrays of tokens md_bench keeps are
 * allocated and touched before the first reading, so they do not count. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

#define TARGET_BYTES 256.0

int mdb_bench_memory(const mdb_opts *o) {
  (void)o;
  mdb_pop *p = mdb_pop_get("memory");
  if (!p) return -1;
  size_t want = 1u << 20;
  if (mdb_pop_grow(p, "memory", want) != 0) return -1;
  if (p->rss0_kb < 0 || p->rss_kb < 0) {
    mdb_fail("memory", "cannot read VmRSS from /proc/self/status");
    return -1;
  }
  if (p->arena_rss_kb < 0) {
    mdb_fail("memory", "cannot find the sim arena's mapping in /proc/self/smaps");
    return -1;
  }
  double n = (double)p->grown_from0;
  double page_kb = (double)sysconf(_SC_PAGESIZE) / 1024.0;
  /* Before the first buffer the arena held one page: its guard granule, written at open. */
  double arena_b = ((double)p->arena_rss_kb - page_kb) * 1024.0;
  double rss_b = (double)(p->rss_kb - p->rss0_kb) * 1024.0;
  double per_data = arena_b / n, per_book = (rss_b - arena_b) / n;
  size_t hentry, bobj;
  mdb_pop_object_sizes(p, &hentry, &bobj);
  mdb_row("memory_per_buffer", "B", per_book, per_data, per_book / per_data, "<= 256 B",
          per_book <= TARGET_BYTES ? MDB_PASS : MDB_MISS,
          "baseline: arena bytes per buffer (%u B data); handle entry %zu B, buffer object %zu B",
          p->data_bytes, hentry, bobj);
  mdb_row("memory_1M_buffers", "MiB", (rss_b - arena_b) / 1048576.0, arena_b / 1048576.0, NAN, "<= 256 MiB",
          (rss_b - arena_b) / 1048576.0 <= 256.0 ? MDB_PASS : MDB_MISS,
          "%.0f live; baseline: arena MiB; VmRSS +%.0f MiB, VmHWM %.0f MiB; malloc +%.0f B/buffer; allocate %.2f us each",
          n, rss_b / 1048576.0, (double)p->hwm_kb / 1024.0, (double)(p->heap - p->heap0) / n,
          (double)p->grow_ns / n / 1e3);
  return 0;
}
