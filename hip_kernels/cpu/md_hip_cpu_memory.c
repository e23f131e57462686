/* md_hip_cpu_memory.c - the CPU execution layer's memory (see md_hip_cpu.h): device and pinned
 * allocations in sorted tables of ranges, registered host ranges, and the copies and memsets
 * that check against them and are queued on a stream. */
#include "md_hip_cpu_rt_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEVICE_ALIGN 256u
#define FRESH_BYTE 0xDB          /* what new device memory holds: not zero */
#define PINNED_MAX ((size_t)64 << 30) /* the largest hipHostMalloc served */

/* ---- allocation tables ---- */

/* Index of the first range with base > p. */
static size_t ranges_upper(const ranges *r, uintptr_t p) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The range holding [p, p + n) entirely, or NULL. */
static const range *ranges_find(const ranges *r, const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  size_t i = ranges_upper(r, a);
  if (i == 0) return NULL;
  const range *g = &r->v[i - 1];
  if (a - g->base >= g->size || n > g->size - (a - g->base)) return NULL;
  return g;
}

static int ranges_add(ranges *r, void *p, size_t n) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    range *v = realloc(r->v, cap * sizeof *v);
    if (!v) return -1;
    r->v = v;
    r->cap = cap;
  }
  size_t i = ranges_upper(r, (uintptr_t)p);
  memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
  r->v[i] = (range){(uintptr_t)p, n};
  r->n++;
  return 0;
}

/* Removes the range starting exactly at p; its size, or 0 if there is none. */
static size_t ranges_del(ranges *r, void *p) {
  size_t i = ranges_upper(r, (uintptr_t)p);
  if (i == 0 || r->v[i - 1].base != (uintptr_t)p) return 0;
  size_t n = r->v[i - 1].size;
  memmove(&r->v[i - 1], &r->v[i], (r->n - i) * sizeof *r->v);
  r->n--;
  if (r->n == 0) { /* the tables empty out between tests: give the memory back */
    free(r->v);
    r->v = NULL;
    r->cap = 0;
  }
  return n;
}

/* ---- memory ---- */

hipError_t hipMalloc(void **ptr, size_t size) {
  hipError_t e = enter(MD_HIPCPU_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr) return rec(hipErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  const size_t rounded = (size + DEVICE_ALIGN - 1) / DEVICE_ALIGN * DEVICE_ALIGN;
  if (rounded < size) return rec(hipErrorOutOfMemory);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int fits = md__hipcpu_g.mem_used <= md__hipcpu_g.mem_total &&
             rounded <= md__hipcpu_g.mem_total - md__hipcpu_g.mem_used;
  if (fits) md__hipcpu_g.mem_used += rounded; /* claimed before allocating, so racing callers respect it */
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!fits) return rec(hipErrorOutOfMemory);
  void *p = aligned_alloc(DEVICE_ALIGN, rounded);
  int ok = p != NULL;
  if (ok) memset(p, FRESH_BYTE, rounded);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  if (ok && ranges_add(&md__hipcpu_g.dev, p, rounded) != 0) ok = 0;
  if (!ok) md__hipcpu_g.mem_used -= rounded;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!ok) {
    free(p);
    return rec(hipErrorOutOfMemory);
  }
  *ptr = p;
  return hipSuccess;
}

/* Synchronizes the device first (as the runtimes do), so no queued work uses what it frees. */
hipError_t hipFree(void *ptr) {
  if (!ptr) return rec(sticky_error());
  hipError_t e = md__hipcpu_device_sync();
  if (e != hipSuccess) return rec(e);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  size_t n = ranges_del(&md__hipcpu_g.dev, ptr);
  if (n) md__hipcpu_g.mem_used -= n;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!n) return rec(hipErrorInvalidValue);
  free(ptr);
  return rec(sticky_error());
}

/* Thread-safe. "Pinned" host memory owned by the caller until hipHostFree (up to PINNED_MAX). */
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_HOST_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr || flags != hipHostMallocDefault) return rec(hipErrorInvalidValue);
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  /* Pinned memory is bounded like the device's (the host's allocator is not asked for absurd
   * sizes: under ASan that aborts instead of failing). */
  const size_t page = 4096, rounded = (size + page - 1) / page * page;
  void *p = rounded >= size && rounded <= PINNED_MAX ? aligned_alloc(page, rounded) : NULL;
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int ok = p && ranges_add(&md__hipcpu_g.host, p, size) == 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!ok) {
    free(p);
    return rec(hipErrorOutOfMemory);
  }
  *ptr = p;
  return hipSuccess;
}

/* Thread-safe. As hipFree, for hipHostMalloc's memory. */
hipError_t hipHostFree(void *ptr) {
  if (!ptr) return rec(sticky_error());
  hipError_t e = md__hipcpu_device_sync();
  if (e != hipSuccess) return rec(e);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  size_t n = ranges_del(&md__hipcpu_g.host, ptr);
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (!n) return rec(hipErrorInvalidValue);
  free(ptr);
  return rec(sticky_error());
}

/* 1 when [p, p + n) lies inside one live device allocation. */
static int is_device(const void *p, size_t n) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int r = ranges_find(&md__hipcpu_g.dev, p, n) != NULL;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return r;
}

/* 1 when [p, p + n) lies inside one hipHostMalloc allocation, 2 inside one registered range. */
static int is_pinned(const void *p, size_t n) {
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int r = ranges_find(&md__hipcpu_g.host, p, n) != NULL ? 1 : ranges_find(&md__hipcpu_g.reg, p, n) != NULL ? 2 : 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return r;
}

/* Thread-safe. Page-locks the caller's host range [ptr, ptr + size) (here: remembers it), so
 * that async copies from and to it are asynchronous as with hipHostMalloc'd memory. A range
 * overlapping one registered already: hipErrorHostMemoryAlreadyRegistered. */
hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags) {
  hipError_t e = enter(MD_HIPCPU_HOST_MALLOC);
  if (e != hipSuccess) return e;
  if (!ptr || size == 0 || flags != hipHostRegisterDefault) return rec(hipErrorInvalidValue);
  uintptr_t a = (uintptr_t)ptr;
  if (size > UINTPTR_MAX - a) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  int clash = 0;
  for (size_t i = 0; i < md__hipcpu_g.reg.n && !clash; i++)
    clash = a < md__hipcpu_g.reg.v[i].base + md__hipcpu_g.reg.v[i].size && md__hipcpu_g.reg.v[i].base < a + size;
  int ok = !clash && ranges_add(&md__hipcpu_g.reg, ptr, size) == 0;
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  if (clash) return rec(hipErrorHostMemoryAlreadyRegistered);
  return ok ? hipSuccess : rec(hipErrorOutOfMemory);
}

/* Thread-safe. Forgets the range hipHostRegister registered at ptr (its start):
 * hipErrorHostMemoryNotRegistered for any other pointer. */
hipError_t hipHostUnregister(void *ptr) {
  if (!ptr) return rec(hipErrorInvalidValue);
  pthread_mutex_lock(&md__hipcpu_g.lock);
  size_t n = ranges_del(&md__hipcpu_g.reg, ptr);
  pthread_mutex_unlock(&md__hipcpu_g.lock);
  return n ? hipSuccess : rec(hipErrorHostMemoryNotRegistered);
}

/* Thread-safe. Queues a copy on s; device sides must lie inside one live allocation
 * (hipErrorInvalidValue). With pageable host memory it returns once the copy is done. */
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind, hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_COPY);
  if (e != hipSuccess) return e;
  if (n == 0) return hipSuccess;
  if (!dst || !src) return rec(hipErrorInvalidValue);
  const int dd = is_device(dst, n), sd = is_device(src, n);
  if (kind == hipMemcpyDefault) kind = dd ? (sd ? hipMemcpyDeviceToDevice : hipMemcpyHostToDevice)
                                          : (sd ? hipMemcpyDeviceToHost : hipMemcpyHostToHost);
  int ok;
  switch (kind) {
  case hipMemcpyHostToDevice: ok = dd; break;
  case hipMemcpyDeviceToHost: ok = sd; break;
  case hipMemcpyDeviceToDevice: ok = dd && sd; break;
  case hipMemcpyHostToHost: ok = 1; break;
  default: ok = 0; break;
  }
  if (!ok) return rec(hipErrorInvalidValue);
  if (!(s = md__hipcpu_stream_of(s, &e))) return rec(e);
  /* Pageable host memory: the copy is done when the call returns (the runtimes stage it). */
  const int pin = kind == hipMemcpyHostToDevice ? is_pinned(src, n) : kind == hipMemcpyDeviceToHost ? is_pinned(dst, n) : 0;
  const int pageable = (kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToHost) ? !pin : kind == hipMemcpyHostToHost;
  if (pin == 2) atomic_fetch_add(&md__hipcpu_n_reg_copies, 1);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  o->kind = OP_COPY;
  o->u.copy.dst = dst;
  o->u.copy.src = src;
  o->u.copy.n = n;
  uint64_t seq = md__hipcpu_enqueue(s, o);
  if (pageable) md__hipcpu_stream_wait(s, seq);
  return hipSuccess;
}

/* Thread-safe. A copy on the NULL stream, then its synchronization. */
hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind) {
  hipError_t e = hipMemcpyAsync(dst, src, n, kind, NULL);
  if (e != hipSuccess) return e;
  return hipStreamSynchronize(NULL);
}

/* Thread-safe. Queues a memset of device memory on s (checked as copies are). */
hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t s) {
  hipError_t e = enter(MD_HIPCPU_COPY);
  if (e != hipSuccess) return e;
  if (n == 0) return hipSuccess;
  if (!dst || !is_device(dst, n)) return rec(hipErrorInvalidValue);
  if (!(s = md__hipcpu_stream_of(s, &e))) return rec(e);
  op *o = calloc(1, sizeof *o);
  if (!o) return rec(hipErrorOutOfMemory);
  o->kind = OP_SET;
  o->u.set.dst = dst;
  o->u.set.value = value;
  o->u.set.n = n;
  md__hipcpu_enqueue(s, o);
  return hipSuccess;
}

