/* sim_arena.h - private to sim/: the simulated device's address space and its allocator.
 *
 * An arena is one mmap reservation (MAP_NORESERVE, so only touched pages cost memory) that
 * holds nothing but device data: every piece of allocator metadata lives in host memory
 * outside it, so a kernel that writes anywhere in the arena can never corrupt the allocator.
 * The arena hands out offsets; the backend turns them into tagged md_devptr values.
 *
 * The red-zone pattern (the canary) is a function of the arena offset and the arena's seed,
 * never of the block that owns the bytes: the 8 bytes of aligned word w (offsets [8w, 8w+8))
 * are canary(w) in host byte order. So bytes that two neighbours share hold the same pattern
 * whichever of them wrote it, every allocation has a canary of its own, and bytes copied from
 * one place into another red zone do not match there (see "Canary words" below).
 *
 * Layout (G = MD__ARENA_ALIGN = 256, R = MD__ARENA_REDZONE = 64):
 *   [0, G)            guard granule, red-zone pattern: the front red zone of the first block
 *   blocks            spans of whole granules, in address order, covering the rest exactly
 *   used block        [off, off+size) payload, G-aligned; [off+size, off+span) red zone, >= R
 *                     bytes; its front red zone is the R bytes before off (the tail of the
 *                     previous span, see below)
 *   free block        bytes are 0x00 (never touched, or released by madvise) or the poison
 *                     byte; except that its last R bytes hold the red-zone pattern when a used
 *                     block follows it (they are that block's front red zone). Two free
 *                     blocks are never adjacent (coalesced at free).
 * So every used block has R bytes of red-zone pattern on both sides, and any byte of a free
 * block that is neither 0x00 nor poison was written after it was freed.
 *
 * Allocation: two-level segregated free lists (TLSF: 16 sub-classes per power of two, with
 * bitmaps) give an O(1) good fit. Host metadata: a unit table indexed by block start in G
 * units (one 64-bit word per unit, in leaves allocated lazily), in which a used block's word
 * (its payload size and readiness) is all the host memory it has, about 8 bytes per live
 * allocation in all; free blocks also have a 16-byte record (their size-class list links),
 * from chunks that alloc keeps room in so that free never allocates. Details in
 * sim_arena_int.h (the arena's files: sim_arena.c, sim_arena_redzone.c, sim_arena_stats.c).
 *
 * Locking. Lookups ("which allocation contains this address": copies, kernel_ptr, a launch's
 * tensor checks, its red-zone checks and its search for red-zone reads) take no lock (a check
 * that finds damage takes it to confirm and repair): they read the unit table's atomic
 * words, one per block start holding the block's type, payload size and readiness, and a
 * bitmap hierarchy of used-block starts that finds the nearest start at or below an address
 * in a few word reads. Alloc and free take one mutex for their bookkeeping only (free lists,
 * records, counters, the table's writes; a thread that finds it taken spins for a few
 * microseconds before it sleeps): alloc zero-fills the new payload after releasing it
 * (nobody else can reach that payload yet; checks skip the block until it is marked ready);
 * free claims the block with a compare-and-swap on its word (one of two racing frees wins;
 * lookups see it gone from then on), checks its red zones and poisons it without the lock,
 * then takes the lock to coalesce. Full checks and stats take the mutex (and let waiting
 * allocs and frees go first). Red-zone bytes are read and repaired with atomic accesses;
 * bytes that two blocks share (a span's last R bytes are the next block's front red zone) are
 * otherwise only written under the mutex.
 *
 * Canary words. canary(w) = L | H << 48, where L = P((w XOR key) mod 2^48) for a bijection P
 * of 48-bit values (two rounds of a multiply and a xorshift) and H = (L XOR sig) mod 2^16;
 * key (48 bits) and sig (16 bits, never 0) come from the seed. Hence:
 *   - two different words of the arena never have the same canary (P is a bijection and
 *     w < 2^48), so a whole aligned word copied from anywhere else into a red zone is a hit,
 *     always; a partial word (1..7 bytes) escapes only if its bytes happen to match, about
 *     2^-8 per byte, as for any value written there;
 *   - a word whose 8 bytes are equal (0x00, the poison, the old constant 0xFD, any memset)
 *     is never a canary (its lanes 0 and 3 are equal, and sig is not 0);
 *   - a word of data is recognised as the canary of word w cheaply: lane 3 XOR lane 0 == sig
 *     (about 2^-16 of arbitrary words pass), then P^-1 gives w, the only candidate. That is
 *     how outputs are searched for red-zone bytes a kernel read (md__arena_check_reads).
 * The same seed gives the same pattern at the same offsets; another seed another.
 *
 * Reports (red-zone hits, red-zone reads, poison hits, bad frees) are counted, written to
 * stderr and kept as the arena's last report; they never abort and never corrupt the arena. */
#ifndef MD_SIM_ARENA_H
#define MD_SIM_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include "md/driver.h"

#define MD__ARENA_ALIGN 256u          /* payload alignment and allocation granule */
#define MD__ARENA_REDZONE 64u         /* red-zone bytes on each side of a payload, at least */
#define MD__ARENA_POISON_BYTE 0xDBu   /* pattern of freed memory (unless released by madvise) */
/* Spans at least this long are released with madvise(MADV_DONTNEED) when freed (they then
 * read as zero) and zero-filled the same way when allocated; shorter ones are written. */
#define MD__ARENA_MADVISE_MIN (64u * 1024u)
#define MD__ARENA_DEFAULT_LIMIT (1ull << 30)   /* mem_limit 0: 1 GiB */
#define MD__ARENA_MAX_LIMIT (64ull << 30)      /* larger mem_limit values are capped here */
#define MD__ARENA_REPORT_MAX 256u

typedef struct md__arena md__arena;

typedef struct md__arena_stats {
  uint64_t limit;                     /* bytes one allocation may have (the capped mem_limit) */
  uint64_t reserved;                  /* bytes of the mmap reservation */
  uint64_t allocs, frees;             /* successful calls */
  uint64_t refused_persistent, refused_transient;
  uint64_t bad_frees;                 /* frees of something that is not a live allocation start */
  uint64_t bytes_live, bytes_peak;    /* payload bytes (what callers asked for) */
  uint64_t span_live;                 /* arena bytes held by live blocks, red zones included */
  uint64_t live_blocks;
  uint64_t bytes_free, free_blocks;   /* arena bytes in free blocks (guard excluded) */
  uint64_t largest_free;              /* span of the largest free block */
  uint64_t max_fit_now;               /* largest allocation that would succeed now */
  double fragmentation;               /* 1 - largest_free / bytes_free; 0 when nothing is free */
  uint64_t redzone_hits, poison_hits;
  uint64_t redzone_reads;             /* outputs found holding red-zone bytes */
} md__arena_stats;

/* A live allocation as lookups see it. */
typedef struct md__arena_alloc_info {
  uint64_t off;                       /* payload start */
  uint64_t size;                      /* payload bytes */
} md__arena_alloc_info;

/* Outputs larger than this are searched for red-zone reads only where an element-wise kernel
 * would put them (see md__arena_check_reads), unless the caller asks for a full search. */
#define MD__ARENA_READ_SCAN_MAX (16u * 1024u)

/* Reserves an arena for allocations of at most `limit` bytes (0: the default; capped at
 * MD__ARENA_MAX_LIMIT). `tag` is OR-ed into offsets when a report names an allocation, so
 * messages show the caller's device pointers. `seed` decides the red-zone pattern (any value;
 * the same seed, the same pattern). The reservation is limit rounded up to the granule plus
 * two granules (guard, and the red zone of an allocation of exactly `limit`).
 * DEVICE_UNAVAILABLE (message in err) if the reservation fails. The caller owns *out. */
md_status md__arena_create(uint64_t limit, uint64_t tag, uint64_t seed, md__arena **out, char *err, size_t errlen);
/* Releases the reservation and all metadata, live allocations included. Not concurrent with
 * any other call on the arena. */
void md__arena_destroy(md__arena *a);

/* Allocates `bytes` (> 0): zero-filled payload at a 256-aligned offset (> 0), returned in *off.
 * RESOURCE_EXHAUSTED_PERSISTENT when bytes > limit; RESOURCE_EXHAUSTED_TRANSIENT when no free
 * block fits now; INVALID_ARGUMENT for 0. Failure changes nothing but the refusal counters.
 * Thread-safe. Before zero-filling, a reused span of fewer than MD__ARENA_MADVISE_MIN bytes is
 * checked for writes after free (a poison hit is reported; the allocation still succeeds). */
md_status md__arena_alloc(md__arena *a, uint64_t bytes, uint64_t *off);
/* Frees the allocation whose payload starts at `off`: checks its red zones (hits reported),
 * poisons the span, coalesces it with free neighbours. Returns 0, or -1 when `off` is not the
 * start of a live allocation (a bad free: counted and reported, nothing else happens).
 * Thread-safe. */
int md__arena_free(md__arena *a, uint64_t off);

/* The live allocation whose payload contains `off`: 1 and *out, or 0. Thread-safe. */
int md__arena_find(md__arena *a, uint64_t off, md__arena_alloc_info *out);

/* What lies at an arena offset (for messages about a bad address). */
typedef enum md__arena_where {
  MD__ARENA_AT_PAYLOAD = 0,   /* inside a live allocation's payload (*out: that allocation) */
  MD__ARENA_AT_REDZONE = 1,   /* in the red zone after a live allocation (*out: that allocation) */
  MD__ARENA_AT_FREE = 2,      /* in a free block: freed, or never allocated */
  MD__ARENA_AT_OUTSIDE = 3    /* the guard granule, or past the reservation */
} md__arena_where;
md__arena_where md__arena_locate(md__arena *a, uint64_t off, md__arena_alloc_info *out);
/* Host address of arena offset `off` (no check), and the reservation's bounds. */
void *md__arena_host(md__arena *a, uint64_t off);
uint8_t *md__arena_base(md__arena *a);
uint64_t md__arena_reserved(md__arena *a);

/* One tensor of a launch that lies in the arena: its offset and bytes, whether it is an output,
 * and its index among the launch's inputs or outputs (for messages). */
typedef struct md__arena_tensor {
  uint64_t off, bytes;
  uint32_t index;
  int output;
} md__arena_tensor;

/* Checks the red zones of the live allocations containing each of t[0..n).off (duplicates
 * are checked once; offsets outside live allocations are skipped). Each damaged red zone is a
 * hit: counted, reported, and repaired so that it is reported once. Returns the number of
 * hits; the first hit's message goes to msg (when msg && len). When a damaged zone holds the
 * canary of another red zone (a kernel copied it there), the message says whose. Thread-safe. */
uint64_t md__arena_check(md__arena *a, const md__arena_tensor *t, size_t n, char *msg, size_t len);
/* Checks every live allocation's red zones and every free block's poison (below the arena's
 * high-water mark). Cost: proportional to the arena bytes ever used. As md__arena_check. */
uint64_t md__arena_check_all(md__arena *a, char *msg, size_t len);

/* After a kernel ran on the tensors t[0..n): looks in each output for bytes of the red zones
 * (front or back) of the allocations that the tensors point into, which the kernel can only
 * have got by reading past an end (or before a start). Two searches:
 *   - element-wise: for each input and output, where an element-wise kernel would have put
 *     the bytes just past the input's allocation (the same distance from the output's start
 *     as they are from the input's): 4 or more bytes equal to the red zone there are a
 *     finding (2^-32 by chance). (Bytes before an input's start would land before the
 *     output's start: the front red zone is found by the other search only.)
 *   - everywhere: every 8-byte-aligned word of the output is tested for being the canary of a
 *     red-zone word of those allocations (a whole canary word copied at a distance that is a
 *     multiple of 8), for outputs of at most MD__ARENA_READ_SCAN_MAX bytes, or all of them
 *     when `full`.
 * Each output with a finding counts one red-zone read; returns their number; the first one's
 * message (naming the output, the allocation read and the offset) goes to msg (when msg &&
 * len). Thread-safe (no lock); the outputs must not be written meanwhile. With more than 16
 * tensors and host memory short, nothing is searched (returns 0). */
uint64_t md__arena_check_reads(md__arena *a, const md__arena_tensor *t, size_t n, int full, char *msg, size_t len);

/* For tests: the first block of 32 words among the nw 8-byte words at p that holds a word
 * passing the canary's signature test for `sig` (lane 3 XOR lane 0 == sig), as the index of
 * the block's first word, or nw; with the SIMD build of the loop when `simd` and the CPU has
 * it (what md__arena_check_reads uses), else the portable one. Reads p only; any thread. */
size_t md__arena_sig_scan(const uint8_t *p, size_t nw, uint64_t sig, int simd);

/* Records a report that the caller detected about the arena (e.g. a free of a pointer that is
 * not even this device's): adds one to the counter `which` selects, writes the message to
 * stderr and keeps it as the last report. Thread-safe. */
typedef enum md__arena_counter {
  MD__ARENA_COUNT_NONE = 0,
  MD__ARENA_COUNT_BAD_FREE = 1,
  MD__ARENA_COUNT_POISON = 2,
  MD__ARENA_COUNT_REDZONE = 3
} md__arena_counter;
void md__arena_report(md__arena *a, md__arena_counter which, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void md__arena_stats_get(md__arena *a, md__arena_stats *out);
/* Copies the last report ("" when none) into buf; returns its full length. */
size_t md__arena_last_report(md__arena *a, char *buf, size_t len);

#endif
