/* sim_copy.c - the sim's device memory as the backend hands it out: alloc and free through the
 * arena (sim_arena.h), device pointers resolved to host addresses, and copies (write, read,
 * copy) run at once or queued on a stream. */
#include "sim_backend_int.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ----------------------------------------------------------------------------- */

md_status md__sim_alloc(md_backend *b, uint64_t bytes, md_devptr *out) {
  if (!sim_of(b) || !out) return MD_INVALID_ARGUMENT;
  *out = 0;
  if (is_lost(b)) return MD_DEVICE_UNAVAILABLE;
  count_call(b, C_ALLOC);
  if (bytes == 0) return MD_INVALID_ARGUMENT;
  uint64_t off;
  md_status st = md__arena_alloc(b->arena, bytes, &off);
  if (st == MD_NONE) *out = b->tag | off;
  return st;
}

void md__sim_free(md_backend *b, md_devptr p) {
  if (!sim_of(b) || p == 0) return;
  if ((p & ID_MASK) != b->tag) {
    md__arena_report(b->arena, MD__ARENA_COUNT_BAD_FREE,
                     "sim: bad free of 0x%" PRIx64 ": not a device pointer of this device (0x%" PRIx64 "...)", p,
                     b->tag);
    return;
  }
  md__arena_free(b->arena, p & OFF_MASK);
}

/* Resolves [p + off, p + off + n) to a host address inside one live allocation. */
static md_status resolve(md_backend *b, const char *what, md_devptr p, uint64_t off, uint64_t n, uint8_t **host,
                         char *err, size_t errlen) {
  md__arena_alloc_info ai;
  if (p == 0) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: null device pointer", what);
  }
  if ((p & ID_MASK) != b->tag) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE, "sim: %s: 0x%" PRIx64 " is not a device pointer of this device",
                what, p);
  }
  uint64_t o = p & OFF_MASK;
  if (!md__arena_find(b->arena, o, &ai)) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: 0x%" PRIx64 " is not in a live allocation (freed, or never allocated)", what, p);
  }
  uint64_t avail = ai.off + ai.size - o;
  if (off > avail || n > avail - off) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md_backend_fail(err, errlen, MD_GENERAL_FAILURE,
                "sim: %s: %" PRIu64 " bytes at offset %" PRIu64 " of 0x%" PRIx64
                " run past the end of allocation 0x%" PRIx64 " (size %" PRIu64 ")",
                what, n, off, p, b->tag | ai.off, ai.size);
  }
  *host = md__arena_host(b->arena, o + off);
  return MD_NONE;
}

/* ---- copies ------------------------------------------------------------------------------ */

/* A copy whose pointers were resolved: runs now (NULL stream) or is queued on s. */
static md_status copy_accept(md_backend *b, md_stream *s, uint8_t *dst, const uint8_t *src, uint64_t n, int overlap,
                             char *err, size_t errlen) {
  if (!s) {
    cmd c = {.kind = CMD_COPY, .dst = dst, .src = src, .n = n, .overlap = overlap};
    return run_copy(b, NULL, &c);
  }
  cmd *c = calloc(1, sizeof *c);
  if (!c) return md_backend_fail(err, errlen, MD_RESOURCE_EXHAUSTED_TRANSIENT, "sim: out of host memory");
  *c = (cmd){.kind = CMD_COPY, .dst = dst, .src = src, .n = n, .overlap = overlap};
  return md__sim_issue(b, s, c, err, errlen);
}

md_status md__sim_write(md_backend *b, md_stream *s, md_devptr dst, uint64_t off, const void *src, uint64_t n,
                        char *err, size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: not a sim device");
  if (!src && n) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: write: NULL host source");
  if (is_lost(b)) return md__sim_lost_status(b, "write", err, errlen);
  count_call(b, C_COPY);
  uint8_t *to;
  md_status st = resolve(b, "write", dst, off, n, &to, err, errlen);
  return st != MD_NONE ? st : copy_accept(b, s, to, src, n, 0, err, errlen);
}

md_status md__sim_read(md_backend *b, md_stream *s, void *dst, md_devptr src, uint64_t off, uint64_t n, char *err,
                       size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: not a sim device");
  if (!dst && n) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: read: NULL host destination");
  if (is_lost(b)) return md__sim_lost_status(b, "read", err, errlen);
  count_call(b, C_COPY);
  uint8_t *from;
  md_status st = resolve(b, "read", src, off, n, &from, err, errlen);
  return st != MD_NONE ? st : copy_accept(b, s, dst, from, n, 0, err, errlen);
}

md_status md__sim_copy(md_backend *b, md_stream *s, md_devptr dst, uint64_t doff, md_devptr src, uint64_t soff,
                       uint64_t n, char *err, size_t errlen) {
  if (!sim_of(b)) return md_backend_fail(err, errlen, MD_INVALID_ARGUMENT, "sim: copy: not a sim device");
  if (is_lost(b)) return md__sim_lost_status(b, "copy", err, errlen);
  count_call(b, C_COPY);
  uint8_t *from, *to;
  md_status st = resolve(b, "copy source", src, soff, n, &from, err, errlen);
  if (st == MD_NONE) st = resolve(b, "copy destination", dst, doff, n, &to, err, errlen);
  if (st != MD_NONE) return st;
  return copy_accept(b, s, to, from, n, to < from + n && from < to + n, err, errlen);
}

void *md__sim_kernel_ptr(md_backend *b, md_devptr p) {
  if (!sim_of(b) || (p & ID_MASK) != b->tag) return NULL;
  md__arena_alloc_info ai;
  uint64_t o = p & OFF_MASK;
  return md__arena_find(b->arena, o, &ai) ? md__arena_host(b->arena, o) : NULL;
}

