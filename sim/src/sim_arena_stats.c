/* sim_arena_stats.c - what the arena tells: its reports (red-zone hits and reads, poison hits,
 * bad frees: counted, written to stderr, the last one kept) and its statistics. */
#include "sim_arena_int.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- reports ---------------------------------------------------------------------------- */

/* Writes the message to stderr, keeps it as the last report, and copies it to out (when
 * out && outlen). */
static void vreport(md__arena *a, char *out, size_t outlen, const char *fmt, va_list ap) {
  char msg[MD__ARENA_REPORT_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "mdc %s\n", msg);
  pthread_mutex_lock(&a->report_lock);
  memcpy(a->last, msg, sizeof msg);
  pthread_mutex_unlock(&a->report_lock);
  if (out && outlen) snprintf(out, outlen, "%s", msg);
}

void md__arena_report_to(md__arena *a, char *out, size_t outlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(a, out, outlen, fmt, ap);
  va_end(ap);
}

void md__arena_report(md__arena *a, md__arena_counter which, const char *fmt, ...) {
  _Atomic uint64_t *c = which == MD__ARENA_COUNT_BAD_FREE ? &a->bad_frees
                        : which == MD__ARENA_COUNT_POISON ? &a->poison_hits
                        : which == MD__ARENA_COUNT_REDZONE ? &a->redzone_hits
                                                            : NULL;
  if (c) atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
  va_list ap;
  va_start(ap, fmt);
  vreport(a, NULL, 0, fmt, ap);
  va_end(ap);
}

size_t md__arena_last_report(md__arena *a, char *buf, size_t len) {
  pthread_mutex_lock(&a->report_lock);
  size_t n = strlen(a->last);
  if (buf && len) snprintf(buf, len, "%s", a->last);
  pthread_mutex_unlock(&a->report_lock);
  return n;
}

/* ---- statistics ------------------------------------------------------------------------- */

void md__arena_stats_get(md__arena *a, md__arena_stats *out) {
  memset(out, 0, sizeof *out);
  lock_cold(a);
  out->limit = a->limit;
  out->reserved = a->reserved;
  out->allocs = a->allocs;
  out->frees = a->frees;
  out->bytes_live = a->bytes_live;
  out->bytes_peak = a->bytes_peak;
  out->span_live = a->span_live;
  out->live_blocks = a->live_blocks;
  out->bytes_free = a->bytes_free;
  out->free_blocks = a->free_blocks;
  out->largest_free = md__arena_largest_free(a);
  pthread_mutex_unlock(&a->lock);
  out->refused_persistent = atomic_load_explicit(&a->refused_persistent, memory_order_relaxed);
  out->refused_transient = atomic_load_explicit(&a->refused_transient, memory_order_relaxed);
  out->bad_frees = atomic_load_explicit(&a->bad_frees, memory_order_relaxed);
  out->redzone_hits = atomic_load_explicit(&a->redzone_hits, memory_order_relaxed);
  out->poison_hits = atomic_load_explicit(&a->poison_hits, memory_order_relaxed);
  out->redzone_reads = atomic_load_explicit(&a->redzone_reads, memory_order_relaxed);
  if (out->largest_free > R) {
    uint64_t fit = out->largest_free - R;
    out->max_fit_now = fit < out->limit ? fit : out->limit;
  }
  out->fragmentation = out->bytes_free ? 1.0 - (double)out->largest_free / (double)out->bytes_free : 0.0;
}
