/* fz_run_mem.c - the harness core's memories (fz_run_int.h): the md_memory of a call argument or
 * a request pool, on memfds kept from run to run, and the engine's random payload bytes they
 * hold (mdc_fz_fill, fz_run.h). */
#include "fz_run_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- payload bytes -------------------------------------------------------------------------- */

void mdc_fz__fill(fz_runner *r, uint32_t seed, uint8_t *out, size_t n) {
  pthread_mutex_lock(&r->fill_lock);
  for (unsigned i = 0; i < 8; i++)
    if (r->fill[i].bytes && r->fill[i].seed == seed && r->fill[i].len >= n) {
      memcpy(out, r->fill[i].bytes, n);
      pthread_mutex_unlock(&r->fill_lock);
      return;
    }
  mdc_fz_fill(seed, out, n);
  unsigned k = r->fill_next++ % 8;
  uint8_t *b = realloc(r->fill[k].bytes, n ? n : 1);
  if (b) {
    memcpy(b, out, n);
    r->fill[k].bytes = b;
    r->fill[k].seed = seed;
    r->fill[k].len = n;
  }
  pthread_mutex_unlock(&r->fill_lock);
}

/* splitmix64, one draw per byte, top 32 bits mod 256: the engine's random u8 payload. Byte i is
 * the mix of seed + (i + 1) * golden, so eight lanes compute eight bytes at once: with AVX-512
 * (64-bit multiplies) 0.27 ns a byte against 1.0 scalar. A memory is up to 256 KiB, rewritten
 * for every input that names it: scalar, this was 35 % of an instrumented tokens input. Not
 * instrumented for coverage: harness arithmetic with no branch to learn from (the attribute
 * for -fsanitize=fuzzer; afl-clang-fast ignores it and reads fuzz/afl-denylist.txt). */
#if defined(__clang__)
#define FZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FZ_NO_COVERAGE
#endif
#define FZ_GOLDEN 0x9e3779b97f4a7c15ull

FZ_NO_COVERAGE static void fill_scalar(uint64_t s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = (s += FZ_GOLDEN);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    out[i] = (uint8_t)((z >> 32) % 256);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx512f,avx512dq"))) FZ_NO_COVERAGE static void fill_avx512(uint64_t seed, uint8_t *out,
                                                                                   size_t n) {
  const __m512i m1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull);
  const __m512i m2 = _mm512_set1_epi64((long long)0x94d049bb133111ebull);
  const __m512i step = _mm512_set1_epi64((long long)(8 * FZ_GOLDEN));
  /* lane k holds seed + (i + k + 1) * golden */
  __m512i s = _mm512_add_epi64(_mm512_set1_epi64((long long)seed),
                               _mm512_mullo_epi64(_mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1),
                                                  _mm512_set1_epi64((long long)FZ_GOLDEN)));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512i z = s;
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), m1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), m2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    _mm_storel_epi64((__m128i *)(void *)(out + i), _mm512_cvtepi64_epi8(_mm512_srli_epi64(z, 32)));
    s = _mm512_add_epi64(s, step);
  }
  fill_scalar(seed + (uint64_t)i * FZ_GOLDEN, out + i, n - i);
}
#endif

void mdc_fz_fill(uint32_t seed, uint8_t *out, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static _Atomic int has_avx512 = -1;   /* lanes may fill at once */
  int avx = atomic_load_explicit(&has_avx512, memory_order_relaxed);
  if (avx < 0) {
    __builtin_cpu_init();
    avx = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    atomic_store_explicit(&has_avx512, avx, memory_order_relaxed);
  }
  if (avx) {
    fill_avx512(seed, out, n);
    return;
  }
#endif
  fill_scalar(seed, out, n);
}

/* ---- memories ------------------------------------------------------------------------------- */

/* The memfd for the next memory of this run, `file_size` bytes long. Memfds are kept from run
 * to run, and of those not taken in this run the one whose size is nearest is used: resizing
 * one frees or allocates pages in proportion to the change (ftruncate and the page allocations
 * of the pwrite after it were 15 % of an instrumented tokens input). */
static int slot_fd(fz_runner *r, uint64_t file_size) {
  if (r->used >= FZ_MAX_SLOTS) return -1;
  unsigned pick = r->used;
  uint64_t best = UINT64_MAX;
  for (unsigned i = r->used; i < FZ_MAX_SLOTS && best; i++) {
    if (r->slots[i].fd < 0) continue;
    uint64_t sz = r->slots[i].size, d = sz > file_size ? sz - file_size : file_size - sz;
    if (d < best) {
      best = d;
      pick = i;
    }
  }
  if (pick != r->used) {
    fz_slot t = r->slots[r->used];
    r->slots[r->used] = r->slots[pick];
    r->slots[pick] = t;
  }
  fz_slot *s = &r->slots[r->used++];
  if (s->fd < 0) {
    s->fd = memfd_create("mdc-fuzz-pool", MFD_CLOEXEC);
    if (s->fd < 0) return -1;
    s->size = 0;
  }
  /* Sized once when it changes; the caller writes the whole window, so no byte of an earlier
   * run shows through it. */
  if (s->size != file_size && ftruncate(s->fd, (off_t)file_size) != 0) return -1;
  s->size = file_size;
  return s->fd;
}

static int same_mem(const fz_mem *a, const fz_mem *b) {
  return a->fd == b->fd && a->kind == b->kind && a->prot == b->prot && a->size == b->size && a->offset == b->offset &&
         a->file_size == b->file_size && a->seed == b->seed;
}

/* A memory for call arguments. `shared`: the driver only reads it, so one with the same spec
 * made earlier in this run is handed out again (fewer pools to map; the same bytes). */
static int make_mem_locked(fz_runner *r, const fz_mem *m, int shared, md_memory *out, uint8_t *scratch);

int mdc_fz__make_mem(fz_runner *r, const fz_mem *m, int shared, md_memory *out, uint8_t *scratch) {
  pthread_mutex_lock(&r->mem_lock);
  int rc = make_mem_locked(r, m, shared, out, scratch);
  pthread_mutex_unlock(&r->mem_lock);
  return rc;
}

static int make_mem_locked(fz_runner *r, const fz_mem *m, int shared, md_memory *out, uint8_t *scratch) {
  memset(out, 0, sizeof *out);
  out->kind = (md_memory_kind)m->kind;
  out->prot = m->prot;
  out->offset = m->offset;
  out->size = m->size;
  if (m->fd != FZ_FD_REAL) {
    if (m->fd == FZ_FD_NEG) out->fd = -1;
    else if (m->fd == FZ_FD_CLOSED) out->fd = r->closed_fd;
    else {
      if (r->pipe_fds[0] < 0 && pipe2(r->pipe_fds, O_CLOEXEC) != 0) return -1;
      out->fd = r->pipe_fds[0];
    }
    return 0;
  }
  uint64_t file = m->kind == MD_MEM_MMAP_FD ? (m->file_size ? m->file_size : m->offset + m->size) : m->size;
  int fd = -1;
  if (shared)
    for (unsigned i = 0; i < r->n_shared && fd < 0; i++)
      if (same_mem(&r->shared[i].mem, m)) fd = r->shared[i].fd;
  int fresh = fd < 0;
  if (fresh && (fd = slot_fd(r, file)) < 0) return -1;
  if (fresh && shared && r->n_shared < FZ_MAX_SHARED) r->shared[r->n_shared++] = (struct fz_shared_mem){*m, fd};
  out->fd = fd;
  if (m->kind != MD_MEM_MMAP_FD) out->offset = 0;
  if (m->kind == MD_MEM_HARDWARE_BUFFER_BLOB || m->kind == MD_MEM_HARDWARE_BUFFER) {
    out->width = (uint32_t)m->size;
    out->height = out->layers = 1;
    out->format = m->kind == MD_MEM_HARDWARE_BUFFER ? 0x38u : 0x21u;
  }
  if (m->kind == MD_MEM_HARDWARE_BUFFER) out->size = 0;
  if (fresh) {
    /* the window's bytes: the seed's, or zeros (what a new pool of a trace holds) */
    uint64_t base = m->kind == MD_MEM_MMAP_FD ? m->offset : 0;
    uint64_t n = m->size;
    if (base + n > file) n = file > base ? file - base : 0;
    if (n) {
      if (m->seed) mdc_fz__fill(r, m->seed, scratch, (size_t)n);
      else memset(scratch, 0, (size_t)n);
      if (pwrite(fd, scratch, (size_t)n, (off_t)base) != (ssize_t)n) return -1;
    }
  }
  return 0;
}
