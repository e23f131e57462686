/* fz_run.c - the harness core: one program run against a driver. Each call's handles are
 * resolved to the values the driver issued (with the program's forgeries applied), its
 * memories are made (memfds reused from run to run, truncated and refilled), the state model
 * says what SPEC allows, the driver is called, and what it returned is judged: its status,
 * its shapes and timing (SPEC 4), its leak report (SPEC 5, 8.10), the bytes a copy_to wrote.
 * A concurrent block runs its lanes on threads: each call starts after the one before it in
 * the program has started (the schedule is the program's order plus its preemption points),
 * and each lane is judged on its own view of the state, where what other lanes may do is
 * uncertain. */
#include "fz_run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "md/config.h"

#define MEM_LIMIT (1ull << 20)
#define MAX_SLOTS 192        /* memories one program may make */
#define MAX_SHARED 32        /* read-only memories handed out again within a run */
#define FILL 0xA5            /* out-parameters are filled with this before a call */

typedef struct slot {
  int fd;
  uint64_t size;            /* current file size */
} slot;

struct fz_runner {
  const md_driver *drv;
  char config[512];
  mdc_fz_target target;
  int strict;
  slot slots[MAX_SLOTS];
  unsigned used;
  struct shared_mem {
    fz_mem mem;
    int fd;
  } shared[MAX_SHARED];
  unsigned n_shared;
  int pipe_fds[2];
  int closed_fd;
  uint8_t *scratch[FZ_MAX_LANES + 1];   /* 2 * FZ_MAX_POOL_BYTES each: [0] sequential calls, [1 + l] lane l */
  pthread_mutex_t mem_lock;  /* slots and the shared memories (lanes make memories at once) */
  /* the device, kept from run to run (docs/fuzzing.md "Devices open after the fork point") */
  md_device *dev;
  uint32_t dev_seed;         /* the seed it was opened with */
  int fresh_each;            /* open a device for every run (MDC_FUZZ_FRESH_DEVICE) */
  uint64_t ev_client[FZ_MAX_OBJS];   /* the client each event was made for, for the reset */
  _Atomic uint8_t settled[FZ_MAX_OBJS];   /* the run: a wait consumed this event (its execution ended) */
  /* the run */
  const mdc_fz_prog *p;
  uint64_t vals[FZ_MAX_OBJS];
  fz_outcome *outs;
  fz_finding *f;
  pthread_mutex_t f_lock;
  _Atomic int current;
  _Atomic int stop;
  _Atomic unsigned turn;
  fz_state st;
  fz_state lanes[FZ_MAX_LANES];
  fz_outcome own[FZ_MAX_CALLS];
  /* Byte i of a seed's payload depends only on the seed and i: the last few seeds' bytes are
   * kept, so refilling a pool costs a copy, not a draw per byte. Lanes share it. */
  pthread_mutex_t fill_lock;
  struct {
    uint32_t seed;
    size_t len;
    uint8_t *bytes;
  } fill[8];
  /* The value oracle (fz_eval.h): sequential calls only (lanes race on contents). An
   * execute_async's expectation waits in vexp[its event] for a wait_event that returns NONE. */
  uint32_t run_no;
  fz_eval_scratch eval;
  float vin[FZ_MAX_IO][FZ_EVAL_MAX];
  struct vexp {
    uint32_t run;              /* run_no it was made in (else stale) */
    fz_vcheck vc;
    int fd[FZ_MAX_IO];
    uint64_t foff[FZ_MAX_IO];
    uint16_t tok[FZ_MAX_IO];   /* input token objects: a write to one before the wait voids it */
    uint8_t n_tok;
  } vexp[FZ_MAX_OBJS];
  unsigned fill_next;
};

static void fill(fz_runner *r, uint32_t seed, uint8_t *out, size_t n) {
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

void mdc_fz_fill(uint32_t seed, uint8_t *out, size_t n);

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

void mdc_fz_runner_strict(fz_runner *r, int strict) { r->strict = strict; }

fz_runner *mdc_fz_runner_new(const md_driver *drv, const char *config, mdc_fz_target t) {
  md_config cfg;
  char err[256];
  if (md_config_parse(config, &cfg, err, sizeof err) != MD_NONE) return NULL;
  fz_runner *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  for (unsigned i = 0; i <= FZ_MAX_LANES; i++)
    if (!(r->scratch[i] = malloc(2 * FZ_MAX_POOL_BYTES))) {
      for (unsigned j = 0; j < i; j++) free(r->scratch[j]);
      free(r);
      return NULL;
    }
  r->drv = drv;
  r->target = t;
  /* The run's keys: the caller's, less seed and mem_limit (each program sets its own). */
  cfg.given &= ~((1u << MD_CONFIG_SEED) | (1u << MD_CONFIG_MEM_LIMIT));
  cfg.has_seed = 0;
  cfg.mem_limit = 0;
  if (md_config_format(&cfg, r->config, sizeof r->config) >= sizeof r->config - 64) {
    for (unsigned i = 0; i <= FZ_MAX_LANES; i++) free(r->scratch[i]);
    free(r);
    return NULL;
  }
  for (unsigned i = 0; i < MAX_SLOTS; i++) r->slots[i].fd = -1;
  r->pipe_fds[0] = r->pipe_fds[1] = -1;
  struct rlimit rl;
  r->closed_fd = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT_MAX
                     ? (int)rl.rlim_cur : 1 << 20;
  pthread_mutex_init(&r->f_lock, NULL);
  pthread_mutex_init(&r->fill_lock, NULL);
  pthread_mutex_init(&r->mem_lock, NULL);
  atomic_store(&r->current, -1);
  /* tokens and shapes open a device per run by default: on a kept device their runs take paths
   * of the driver (its handle table's slots, messages about released values) that depend on
   * earlier runs, and AFL++ measured them 84-86 % stable, under the 90 % they need
   * (docs/fuzzing.md). $MDC_FUZZ_FRESH_DEVICE=1 or 0 chooses for any target. */
  const char *fresh = getenv("MDC_FUZZ_FRESH_DEVICE");
  r->fresh_each = fresh && *fresh ? strcmp(fresh, "0") != 0 : t != FZ_CONCURRENCY;
  return r;
}

void mdc_fz_runner_close_device(fz_runner *r) {
  if (!r || !r->dev) return;
  r->drv->close_device(r->dev);
  r->dev = NULL;
}

void mdc_fz_runner_fresh_device(fz_runner *r, int fresh) { r->fresh_each = fresh; }

int mdc_fz_runner_has_device(const fz_runner *r) { return r && r->dev != NULL; }

void mdc_fz_runner_drop_memories(fz_runner *r) {
  if (!r) return;
  for (unsigned i = 0; i < MAX_SLOTS; i++)
    if (r->slots[i].fd >= 0) {
      close(r->slots[i].fd);
      r->slots[i].fd = -1;
      r->slots[i].size = 0;
    }
  r->n_shared = 0;
}

void mdc_fz_runner_free(fz_runner *r) {
  if (!r) return;
  mdc_fz_runner_close_device(r);
  mdc_fz_runner_drop_memories(r);
  for (int i = 0; i < 2; i++)
    if (r->pipe_fds[i] >= 0) close(r->pipe_fds[i]);
  pthread_mutex_destroy(&r->f_lock);
  pthread_mutex_destroy(&r->fill_lock);
  pthread_mutex_destroy(&r->mem_lock);
  for (unsigned i = 0; i < 8; i++) free(r->fill[i].bytes);
  for (unsigned i = 0; i <= FZ_MAX_LANES; i++) free(r->scratch[i]);
  free(r);
}

uint64_t mdc_fz_runner_mem_limit(const fz_runner *r) {
  (void)r;
  return MEM_LIMIT;
}

int mdc_fz_runner_current(const fz_runner *r, const char **op) {
  int c = atomic_load(&((fz_runner *)r)->current);
  if (op) *op = c >= 0 && r->p && c < r->p->n_calls ? mdc_calls[r->p->calls[c].call].name : "";
  return c;
}

/* ---- findings ------------------------------------------------------------------------------- */

static uint32_t fnv_nodigits(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++)
    if (*s < '0' || *s > '9') h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static const char *sname(md_status s) {
  static const char *const n[] = {"NONE", "DEVICE_UNAVAILABLE", "GENERAL_FAILURE", "OUTPUT_INSUFFICIENT_SIZE",
                                  "INVALID_ARGUMENT", "MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT",
                                  "RESOURCE_EXHAUSTED_TRANSIENT", "RESOURCE_EXHAUSTED_PERSISTENT"};
  return (unsigned)s <= 8 ? n[s] : s == MD_DEAD_OBJECT ? "DEAD_OBJECT" : "(not a status)";
}

/* The first finding of the run wins; the run stops at the end of the current call. */
static void finding(fz_runner *r, int call, const char *what, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void finding(fz_runner *r, int call, const char *what, const char *rule, const char *fmt, ...) {
  pthread_mutex_lock(&r->f_lock);
  if (!r->f->found) {
    fz_finding *f = r->f;
    f->found = 1;
    f->call = call;
    const char *op = call >= 0 ? mdc_calls[r->p->calls[call].call].name : "run";
    snprintf(f->signature, sizeof f->signature, "oracle:%s:%s:%08x", op, what, fnv_nodigits(rule ? rule : ""));
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *dm = r->drv->last_error(r->dev);
    snprintf(f->message, sizeof f->message, "call %d (%s): %s%s%s [driver said: %.120s]", call, op, msg,
             rule && *rule ? "; rule: " : "", rule ? rule : "", dm ? dm : "");
  }
  pthread_mutex_unlock(&r->f_lock);
  atomic_store(&r->stop, 1);
}

/* ---- memories ------------------------------------------------------------------------------- */

/* The memfd for the next memory of this run, `file_size` bytes long. Memfds are kept from run
 * to run, and of those not taken in this run the one whose size is nearest is used: resizing
 * one frees or allocates pages in proportion to the change (ftruncate and the page allocations
 * of the pwrite after it were 15 % of an instrumented tokens input). */
static int slot_fd(fz_runner *r, uint64_t file_size) {
  if (r->used >= MAX_SLOTS) return -1;
  unsigned pick = r->used;
  uint64_t best = UINT64_MAX;
  for (unsigned i = r->used; i < MAX_SLOTS && best; i++) {
    if (r->slots[i].fd < 0) continue;
    uint64_t sz = r->slots[i].size, d = sz > file_size ? sz - file_size : file_size - sz;
    if (d < best) {
      best = d;
      pick = i;
    }
  }
  if (pick != r->used) {
    slot t = r->slots[r->used];
    r->slots[r->used] = r->slots[pick];
    r->slots[pick] = t;
  }
  slot *s = &r->slots[r->used++];
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

static int make_mem(fz_runner *r, const fz_mem *m, int shared, md_memory *out, uint8_t *scratch) {
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
  if (fresh && shared && r->n_shared < MAX_SHARED) r->shared[r->n_shared++] = (struct shared_mem){*m, fd};
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
      if (m->seed) fill(r, m->seed, scratch, (size_t)n);
      else memset(scratch, 0, (size_t)n);
      if (pwrite(fd, scratch, (size_t)n, (off_t)base) != (ssize_t)n) return -1;
    }
  }
  return 0;
}

/* ---- one call ------------------------------------------------------------------------------- */

static uint64_t value(const fz_runner *r, const fz_ref *x) {
  if (x->how == FZ_REF_ZERO) return 0;
  if (x->how == FZ_REF_LITERAL) return x->v;
  uint64_t v = x->obj < FZ_MAX_OBJS ? r->vals[x->obj] : 0;
  if (x->forge == FZ_FORGE_XOR) v ^= x->v;
  else if (x->forge == FZ_FORGE_ADD) v += x->v;
  return v;
}

static void to_dims(const fz_dims *d, uint32_t *out) { memcpy(out, d->d, sizeof d->d); }

/* What md_model an fz_model is, in caller storage. */
typedef struct abi_model {
  md_model m;
  md_operand opnd[FZ_MAX_OPERANDS];
  uint32_t dims[FZ_MAX_OPERANDS][FZ_MAX_RANK];
  md_operation op[FZ_MAX_OPS];
  uint32_t op_in[FZ_MAX_OPS][FZ_MAX_OP_IN], op_out[FZ_MAX_OPS][FZ_MAX_OP_OUT];
  uint32_t in[FZ_MAX_IO], out[FZ_MAX_IO];
} abi_model;

static void model_abi(const fz_model *fm, abi_model *a) {
  memset(a, 0, sizeof *a);
  for (unsigned i = 0; i < fm->n_operands; i++) {
    const fz_operand *o = &fm->opnd[i];
    to_dims(&o->dims, a->dims[i]);
    a->opnd[i] = (md_operand){.type = (md_operand_type)o->type, .rank = o->dims.rank, .dims = o->dims.rank ? a->dims[i] : NULL,
                              .scale = o->scale, .zero_point = o->zero_point, .lifetime = (md_lifetime)o->lifetime,
                              .offset = o->offset, .length = o->length};
  }
  for (unsigned k = 0; k < fm->n_ops; k++) {
    const fz_operation *op = &fm->op[k];
    for (unsigned j = 0; j < op->n_in; j++) a->op_in[k][j] = op->in[j];
    for (unsigned j = 0; j < op->n_out; j++) a->op_out[k][j] = op->out[j];
    a->op[k] = (md_operation){.type = (md_operation_type)op->type, .n_inputs = op->n_in, .inputs = a->op_in[k],
                              .n_outputs = op->n_out, .outputs = a->op_out[k]};
  }
  for (unsigned j = 0; j < fm->n_in; j++) a->in[j] = fm->in[j];
  for (unsigned j = 0; j < fm->n_out; j++) a->out[j] = fm->out[j];
  a->m = (md_model){.n_operands = fm->n_operands, .operands = a->opnd, .n_operations = fm->n_ops, .operations = a->op,
                    .n_inputs = fm->n_in, .inputs = a->in, .n_outputs = fm->n_out, .outputs = a->out,
                    .operand_values = fm->values, .operand_values_size = fm->n_values};
}

typedef struct abi_request {
  md_request q;
  md_request_arg in[FZ_MAX_ARGS], out[FZ_MAX_ARGS];
  uint32_t in_dims[FZ_MAX_ARGS][FZ_MAX_RANK], out_dims[FZ_MAX_ARGS][FZ_MAX_RANK];
  md_request_pool pools[FZ_MAX_REQ_POOLS];
} abi_request;

static void arg_abi(const fz_rarg *ra, uint32_t *dims, md_request_arg *a) {
  to_dims(&ra->dims, dims);
  *a = (md_request_arg){.has_no_value = ra->no_value, .pool = ra->pool, .offset = ra->offset, .length = ra->length,
                        .rank = ra->dims.rank, .dims = ra->dims.rank ? dims : NULL};
}

static int request_abi(fz_runner *r, const fz_request *fq, abi_request *a, uint8_t *scratch) {
  memset(a, 0, sizeof *a);
  for (unsigned j = 0; j < fq->n_pools; j++) {
    if (fq->pools[j].is_token) {
      a->pools[j].is_token = 1;
      a->pools[j].token = value(r, &fq->pools[j].token);
    } else {
      int written = 0;
      for (unsigned o = 0; o < fq->n_out; o++) written |= fq->out[o].pool == j;
      if (make_mem(r, &fq->pools[j].mem, !written, &a->pools[j].memory, scratch)) return -1;
    }
  }
  for (unsigned i = 0; i < fq->n_in; i++) arg_abi(&fq->in[i], a->in_dims[i], &a->in[i]);
  for (unsigned i = 0; i < fq->n_out; i++) arg_abi(&fq->out[i], a->out_dims[i], &a->out[i]);
  a->q = (md_request){.n_inputs = fq->n_in, .inputs = a->in, .n_outputs = fq->n_out, .outputs = a->out,
                      .n_pools = fq->n_pools, .pools = a->pools};
  return 0;
}

static int is_fill(const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != FILL) return 0;
  return 1;
}

/* SPEC 4: shapes and timing after an execution (or the wait of one). */
static void judge_exec(fz_runner *r, unsigned i, const fz_pred *pr, md_status got, const md_output_shape *sh,
                       uint32_t n_shapes, const md_timing *tm) {
  if (got != MD_NONE && got != MD_OUTPUT_INSUFFICIENT_SIZE) {
    for (unsigned s = 0; s < n_shapes; s++)
      if (sh[s].rank != 0)
        return finding(r, (int)i, "shapes-on-failure", "SPEC 4: on a failure other than OUTPUT_INSUFFICIENT_SIZE: no shapes",
                       "returned %s with output %u's shape of rank %u%s", sname(got), s, sh[s].rank,
                       is_fill(&sh[s].rank, sizeof sh[s].rank) ? " (never written)" : "");
    if (tm->on_device_ns != UINT64_MAX || tm->in_driver_ns != UINT64_MAX)
      return finding(r, (int)i, "timing-on-failure", "SPEC 4: on a failure, timing is UINT64_MAX",
                     "returned %s with timing {%" PRIu64 ", %" PRIu64 "}", sname(got), tm->on_device_ns, tm->in_driver_ns);
    return;
  }
  unsigned n = n_shapes < pr->ex.n_out ? n_shapes : pr->ex.n_out;
  for (unsigned s = 0; s < n; s++) {
    if (got == MD_NONE && !sh[s].is_sufficient)
      return finding(r, (int)i, "insufficient-on-success", "SPEC 4: on success every shape is sufficient",
                     "returned NONE with output %u marked insufficient", s);
    if (!pr->ex.shapes_known) continue;
    const fz_dims *want = &pr->ex.out[s];
    int same = sh[s].rank == want->rank;
    for (unsigned d = 0; same && d < want->rank && d < MD_MAX_RANK; d++) same = sh[s].dims[d] == want->d[d];
    if (!same) {
      char a[96] = "", b[96] = "";
      size_t ua = 0, ub = 0;
      for (unsigned d = 0; d < want->rank && ua < sizeof a; d++) ua += (size_t)snprintf(a + ua, sizeof a - ua, "%s%u", d ? "," : "", want->d[d]);
      for (unsigned d = 0; d < sh[s].rank && d < MD_MAX_RANK && ub < sizeof b; d++)
        ub += (size_t)snprintf(b + ub, sizeof b - ub, "%s%u", d ? "," : "", sh[s].dims[d]);
      return finding(r, (int)i, "shape", "SPEC 4: a shape for every output with the produced dims",
                     "output %u: shape [%s] (rank %u), the model says [%s]", s, b, sh[s].rank, a);
    }
    if (got == MD_OUTPUT_INSUFFICIENT_SIZE && (sh[s].is_sufficient != 0) != (pr->ex.sufficient[s] != 0))
      return finding(r, (int)i, "sufficient", "SPEC 4: is_sufficient = 0 exactly on the short outputs",
                     "output %u: is_sufficient %u, its pool %s", s, sh[s].is_sufficient,
                     pr->ex.sufficient[s] ? "holds it" : "is too small");
  }
}

/* ---- the value oracle ----------------------------------------------------------------------- */

/* A pool memory whose bytes the harness knows and may read back: a real memfd seen from its
 * start (MMAP_FD at offset 0), of a kind with plain bytes. */
static int plain_mem(const fz_mem *m, uint32_t prot) {
  return m->fd == FZ_FD_REAL && (m->prot & prot) == prot &&
         (m->kind == MD_MEM_ASHMEM || m->kind == MD_MEM_HARDWARE_BUFFER_BLOB ||
          (m->kind == MD_MEM_MMAP_FD && m->offset == 0 && (!m->file_size || m->file_size >= m->size)));
}

/* Whether request argument (is_out, a) shares its pool with another argument of fq that writes. */
static int pool_shared(const fz_request *fq, int is_out, unsigned a) {
  unsigned pool = is_out ? fq->out[a].pool : fq->in[a].pool;
  for (unsigned o = 0; o < fq->n_out; o++)
    if (fq->out[o].pool == pool && !(is_out && o == a)) return 1;
  for (unsigned i = 0; is_out && i < fq->n_in; i++)
    if (fq->in[i].pool == pool) return 1;
  return 0;
}

/* Whether request argument ra holds exactly the model operand's len bytes at its offset (SPEC 2:
 * a length of 0 means the size its dims imply) with dims that are absent or the operand's. */
static int arg_plain(const fz_rarg *ra, const fz_dims *od, size_t len, uint64_t pool_size) {
  if (ra->dims.rank) {
    if (ra->dims.rank != od->rank) return 0;
    for (unsigned i = 0; i < od->rank && i < FZ_MAX_RANK; i++)
      if (ra->dims.d[i] != od->d[i]) return 0;
  }
  return (ra->length == 0 || ra->length == len) && (uint64_t)ra->offset + len <= pool_size;
}

/* The expectation for execution call k (sequential; its request made into aq): e->vc.n stays 0
 * when the model is beyond the evaluator or an input's value is not known for certain. */
static void vexpect(fz_runner *r, unsigned i, const fz_state *st, const fz_request *fq, const md_request *q,
                    struct vexp *e, uint8_t *scratch) {
  const mdc_fz_prog *p = r->p;
  const fz_call *k = &p->calls[i];
  e->vc.n = 0;
  e->n_tok = 0;
  const fz_ref *pref = &mdc_fz_arg(k, MDC_A_PREPARED)->ref;
  if (pref->how != FZ_REF_OBJ || pref->forge) return;
  const fz_model *m = mdc_fz_prepared_model(st, p, pref->obj);
  if (!m || m->n_in != fq->n_in || m->n_out != fq->n_out || !m->n_out) return;
  const float *in[FZ_MAX_IO];
  for (unsigned a = 0; a < m->n_in; a++) {
    uint32_t n = mdc_fz_eval_count(m, a, 0);
    const fz_rarg *ra = &fq->in[a];
    if (!n || ra->no_value || ra->pool >= fq->n_pools) return;
    const fz_rpool *rp = &fq->pools[ra->pool];
    const fz_dims *od = &m->opnd[m->in[a]].dims;
    size_t len = (size_t)n * 4;
    if (rp->is_token) {
      const fz_ref *t = &rp->token;
      if (t->how != FZ_REF_OBJ || t->forge || t->obj >= st->n || st->o[t->obj].kind != MDC_OBJ_TOKEN) return;
      const fz_tok *tk = &st->o[t->obj].tok;
      if (st->o[t->obj].live != FZ_LIVE || tk->content != FZ_YES || tk->content_bytes != len || tk->writers ||
          tk->racy || ra->offset || ra->length || !arg_plain(ra, od, len, len))
        return;
      if (tk->content_seed) fill(r, tk->content_seed, scratch, len);
      else memset(scratch, 0, len);
      memcpy(r->vin[a], scratch, len);
      e->tok[e->n_tok++] = t->obj;
    } else {
      const fz_mem *fm = &rp->mem;
      if (!plain_mem(fm, PROT_READ) || !arg_plain(ra, od, len, fm->size) || pool_shared(fq, 0, a)) return;
      size_t upto = (size_t)ra->offset + len;
      if (fm->seed) fill(r, fm->seed, scratch, upto);
      else memset(scratch, 0, upto);
      memcpy(r->vin[a], scratch + ra->offset, len);
    }
    in[a] = r->vin[a];
  }
  float *out[FZ_MAX_IO];
  unsigned at = 0;
  for (unsigned j = 0; j < m->n_out; j++) {
    uint32_t n = mdc_fz_eval_count(m, j, 1);
    if (!n || at + n > sizeof e->vc.v / sizeof e->vc.v[0]) return;
    out[j] = e->vc.v + at;
    at += n;
  }
  if (mdc_fz_eval(m, in, out, &r->eval) != 0) return;
  e->vc.issue = (uint16_t)i;
  for (unsigned j = 0; j < m->n_out; j++) {
    uint32_t n = mdc_fz_eval_count(m, j, 1);
    const fz_rarg *ra = &fq->out[j];
    uint32_t off = (uint32_t)(out[j] - e->vc.v);
    if (ra->no_value || ra->pool >= fq->n_pools || fq->pools[ra->pool].is_token) continue;
    const fz_mem *fm = &fq->pools[ra->pool].mem;
    if (!plain_mem(fm, PROT_READ | PROT_WRITE) || !arg_plain(ra, &m->opnd[m->out[j]].dims, (size_t)n * 4, fm->size) ||
        pool_shared(fq, 1, j))
      continue;
    unsigned c = e->vc.n++;
    e->vc.o[c].pool = ra->pool;
    e->vc.o[c].off = ra->offset;
    e->vc.o[c].count = (uint16_t)n;
    e->vc.o[c].at = (uint16_t)off;
    e->fd[c] = q->pools[ra->pool].memory.fd;
    e->foff[c] = ra->offset;
  }
}

/* Whether a call of p in (from, to] (and, when `to` is in a concurrent block, anywhere in that
 * block) may write token object t: a copy_from into it, or an execution with it as an output.
 * SPEC 6 leaves a read racing with a write indeterminate. strict: the reference's decision
 * (docs/memory-domains.md) is judged too: an execution reads the storage its input held when it
 * was issued, so a write made after the issue, outside concurrent blocks, does not count. */
static int token_written(const mdc_fz_prog *p, unsigned from, unsigned to, uint16_t t, int strict) {
  unsigned end = to + 1;
  const fz_call *kw = &p->calls[to];
  if (kw->block) end = p->blocks[kw->block - 1].end;
  int snapshot = strict && !kw->block && !p->calls[from].block;   /* issue and wait sequential */
  for (unsigned c = from + 1; c < end && c < p->n_calls; c++) {
    const fz_call *k = &p->calls[c];
    if (snapshot && !k->block) continue;
    if (k->call == MDC_CALL_COPY_FROM) {
      const fz_arg *a = mdc_fz_arg(k, MDC_A_TOKEN);
      if (a && a->ref.how == FZ_REF_OBJ && a->ref.obj == t) return 1;
    } else if (k->call == MDC_CALL_EXECUTE || k->call == MDC_CALL_EXECUTE_ASYNC) {
      const fz_request *fq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
      for (unsigned o = 0; o < fq->n_out; o++) {
        unsigned pool = fq->out[o].pool;
        if (pool < fq->n_pools && fq->pools[pool].is_token && fq->pools[pool].token.how == FZ_REF_OBJ &&
            fq->pools[pool].token.obj == t)
          return 1;
      }
    }
  }
  return 0;
}

/* Judges what an execution that returned NONE (call i: the execute, or the wait_event of an
 * execute_async) wrote to its output pools against e; keeps e in the call's outcome. */
static void vjudge(fz_runner *r, unsigned i, const struct vexp *e, uint8_t *scratch, int snapshot) {
  fz_outcome *oc = &r->outs[i];
  oc->vc = e->vc;
  for (unsigned c = 0; c < e->vc.n; c++) {
    size_t n = e->vc.o[c].count, len = n * 4;
    float *got = (float *)(void *)scratch;
    if (pread(e->fd[c], got, len, (off_t)e->foff[c]) != (ssize_t)len) continue;
    const float *want = e->vc.v + e->vc.o[c].at;
    size_t bad = 0, first = n;
    for (size_t x = 0; x < n; x++)
      if (!mdc_fz_eval_same(want[x], got[x])) {
        if (first == n) first = x;
        bad++;
      }
    if (bad) {
      const fz_call *k = &r->p->calls[e->vc.issue];
      const fz_request *fq = &r->p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
      unsigned arg = 0;
      while (arg < fq->n_out && fq->out[arg].pool != e->vc.o[c].pool) arg++;
      return finding(r, (int)i, "value",
                     snapshot ? "reference decision (docs/memory-domains.md): an execution reads the storage its token "
                                "inputs held when it was issued; a later write goes to fresh storage"
                              : "SPEC 4, 6: an execution that returns NONE computed its outputs from its inputs' values "
                                "(nothing it uses is freed or overwritten under it)",
                     "output %u (pool %u): element %zu is %.9g, the model's value is %.9g; %zu of %zu elements differ", arg,
                     e->vc.o[c].pool, first, (double)got[first], (double)want[first], bad, n);
    }
  }
}

/* Makes call i with its arguments resolved; judges it against the prediction in st; moves st. */
static void run_call(fz_runner *r, unsigned i, fz_state *st, uint8_t *scratch) {
  const mdc_fz_prog *p = r->p;
  const fz_call *k = &p->calls[i];
  fz_outcome *oc = &r->outs[i];
  fz_pred *pr = &oc->pred;
  oc->vc.n = 0;
  mdc_fz_predict(st, p, k, pr);
  const md_driver *d = r->drv;
  md_device *dev = r->dev;
  uint64_t client = 0;
  const fz_arg *ca = mdc_fz_arg(k, MDC_A_CLIENT);
  if (ca) client = value(r, &ca->ref);
  md_status got = MD_NONE;
  uint64_t made = 0;
  md_output_shape shapes[FZ_MAX_ARGS + 4];
  md_timing timing;
  memset(shapes, FILL, sizeof shapes);
  memset(&timing, FILL, sizeof timing);
  uint32_t n_shapes = 0;
  md_memory mem;
  static _Thread_local abi_model am;
  static _Thread_local abi_request aq;
  atomic_store(&r->current, (int)i);
  switch ((mdc_call)k->call) {
    case MDC_CALL_GET_CAPABILITIES: {
      md_capabilities caps;
      memset(&caps, 0, sizeof caps);
      caps.struct_size = sizeof caps;
      got = d->get_capabilities(dev, &caps);
      break;
    }
    case MDC_CALL_GET_SUPPORTED_OPERATIONS: {
      uint8_t sup[FZ_MAX_OPS + 4];
      memset(sup, FILL, sizeof sup);
      model_abi(&p->models[mdc_fz_arg(k, MDC_A_MODEL)->model], &am);
      got = d->get_supported_operations(dev, &am.m, sup);
      if (got == MD_NONE && pr->supported_known)
        for (unsigned j = 0; j < pr->n_supported; j++)
          if (sup[j] != 1)
            finding(r, (int)i, "supported", "SPEC 7: float32 ADD/SUB/MUL/RELU are supported",
                    "operation %u reported %s", j, sup[j] == FILL ? "(never written)" : sup[j] ? "odd" : "unsupported");
      break;
    }
    case MDC_CALL_OPEN_CLIENT: {
      md_handle h = 0;
      got = d->open_client(dev, &h);
      made = h;
      break;
    }
    case MDC_CALL_CLOSE_CLIENT: {
      md_leak_report lr;
      memset(&lr, FILL, sizeof lr);
      got = d->close_client(dev, client, &lr);
      oc->leaks = lr;
      if (got == MD_NONE && (pr->set & FZ_BIT(MD_NONE))) {
        const md_leak_report *w = &pr->leaks;
        const char *what = (pr->leaks_known & 1) && lr.buffers != w->buffers ? "buffers"
                           : (pr->leaks_known & 2) && lr.prepared_models != w->prepared_models ? "prepared_models"
                           : (pr->leaks_known & 4) && lr.events != w->events ? "events"
                           : (pr->leaks_known & 8) && lr.bytes != w->bytes ? "bytes" : NULL;
        if (what)
          finding(r, (int)i, "leaks", "SPEC 5, 8.9, 8.10: close_client reports what the client left live",
                  "leak report {buffers %u, prepared_models %u, events %u, bytes %" PRIu64 "}, the program left "
                  "{%u, %u, %u, %" PRIu64 "} live (%s differs)",
                  lr.buffers, lr.prepared_models, lr.events, lr.bytes, w->buffers, w->prepared_models, w->events,
                  w->bytes, what);
      }
      break;
    }
    case MDC_CALL_PREPARE_MODEL: {
      md_handle h = 0;
      model_abi(&p->models[mdc_fz_arg(k, MDC_A_MODEL)->model], &am);
      got = d->prepare_model(dev, client, &am.m, &h);
      made = h;
      break;
    }
    case MDC_CALL_RELEASE_PREPARED_MODEL:
      got = d->release_prepared_model(dev, client, value(r, &mdc_fz_arg(k, MDC_A_PREPARED)->ref));
      break;
    case MDC_CALL_ALLOCATE: {
      const fz_arg *desc = mdc_fz_arg(k, MDC_A_DESC), *list = mdc_fz_arg(k, MDC_A_PREPARED_LIST);
      const fz_arg *ri = mdc_fz_arg(k, MDC_A_INPUT_ROLES), *ro = mdc_fz_arg(k, MDC_A_OUTPUT_ROLES);
      uint32_t dims[FZ_MAX_RANK];
      md_buffer_desc bd = {0};
      if (desc) {
        to_dims(&desc->dims, dims);
        bd.rank = desc->dims.rank;
        bd.dims = dims;
      }
      md_handle prep[FZ_MAX_LIST];
      md_buffer_role in[FZ_MAX_LIST], out[FZ_MAX_LIST];
      unsigned np = list ? list->refs.n : 0, ni = ri ? ri->roles.n : 0, no = ro ? ro->roles.n : 0;
      for (unsigned j = 0; j < np; j++) prep[j] = value(r, &list->refs.v[j]);
      for (unsigned j = 0; j < ni; j++) in[j] = (md_buffer_role){ri->roles.r[j].model, ri->roles.r[j].io, ri->roles.r[j].p};
      for (unsigned j = 0; j < no; j++) out[j] = (md_buffer_role){ro->roles.r[j].model, ro->roles.r[j].io, ro->roles.r[j].p};
      md_token t = 0;
      got = d->allocate(dev, client, desc ? &bd : NULL, np ? prep : NULL, np, ni ? in : NULL, ni, no ? out : NULL, no, &t);
      made = t;
      break;
    }
    case MDC_CALL_COPY_TO:
    case MDC_CALL_COPY_FROM: {
      const fz_mem *fm = &mdc_fz_arg(k, k->call == MDC_CALL_COPY_TO ? MDC_A_DST : MDC_A_SRC)->mem;
      if (make_mem(r, fm, k->call == MDC_CALL_COPY_FROM, &mem, scratch)) {
        finding(r, (int)i, "harness", "", "cannot make a memory of %" PRIu64 " bytes: %s", fm->size, strerror(errno));
        return;
      }
      md_token t = value(r, &mdc_fz_arg(k, MDC_A_TOKEN)->ref);
      if (k->call == MDC_CALL_COPY_TO) {
        got = d->copy_to(dev, client, t, &mem);
        if (got == MD_NONE && pr->n_alt) {
          /* strict: a whole value of one writer (or of before the race), never a mix */
          size_t n = (size_t)fm->size;
          uint8_t *want = scratch, *have = scratch + FZ_MAX_POOL_BYTES;
          int ok = 0;
          if (n <= FZ_MAX_POOL_BYTES && pread(mem.fd, have, n, (off_t)(fm->kind == MD_MEM_MMAP_FD ? fm->offset : 0)) == (ssize_t)n)
            for (unsigned a = 0; a < pr->n_alt && !ok; a++) {
              if (pr->alt[a].bytes != n) continue;
              if (pr->alt[a].seed) fill(r, pr->alt[a].seed, want, n);
              else memset(want, 0, n);
              ok = !memcmp(want, have, n);
            }
          else ok = 1;
          int sized = 0;
          for (unsigned a = 0; a < pr->n_alt; a++) sized |= pr->alt[a].bytes == n;
          if (!ok && sized)
            finding(r, (int)i, "torn-read",
                    "reference decision (docs/memory-domains.md): a read racing with writers sees one whole value",
                    "copy_to returned NONE with bytes that are none of the %u values written", pr->n_alt);
        }
        if (got == MD_NONE && pr->check) {
          size_t n = (size_t)pr->check_bytes;
          uint8_t *want = scratch, *have = scratch + FZ_MAX_POOL_BYTES;
          if (n <= FZ_MAX_POOL_BYTES) {
            if (pr->check_seed) fill(r, pr->check_seed, want, n);
            else memset(want, 0, n);
            ssize_t rd = pread(mem.fd, have, n, (off_t)(fm->kind == MD_MEM_MMAP_FD ? fm->offset : 0));
            if (rd != (ssize_t)n || memcmp(want, have, n) != 0) {
              size_t at = 0;
              while (rd == (ssize_t)n && at < n && want[at] == have[at]) at++;
              finding(r, (int)i, "data", "SPEC 3, 5: a buffer holds what was last copied into it (and nothing of another's)",
                      "copy_to wrote bytes that differ from the buffer's contents at byte %zu of %zu", at, n);
            }
          }
        }
      } else {
        const fz_arg *da = mdc_fz_arg(k, MDC_A_DIMS);
        uint32_t dims[FZ_MAX_RANK];
        if (da) to_dims(&da->dims, dims);
        got = d->copy_from(dev, client, t, &mem, da ? da->dims.rank : 0, da ? dims : NULL);
      }
      break;
    }
    case MDC_CALL_FREE_BUFFER:
      got = d->free_buffer(dev, client, value(r, &mdc_fz_arg(k, MDC_A_TOKEN)->ref));
      break;
    case MDC_CALL_EXECUTE:
    case MDC_CALL_EXECUTE_ASYNC: {
      const fz_request *fq = &p->requests[mdc_fz_arg(k, MDC_A_REQUEST)->request];
      if (request_abi(r, fq, &aq, scratch)) {
        finding(r, (int)i, "harness", "", "cannot make the request's memories: %s", strerror(errno));
        return;
      }
      md_handle pm = value(r, &mdc_fz_arg(k, MDC_A_PREPARED)->ref);
      static _Thread_local struct vexp ve;
      int seq = !(k->block && r->target == FZ_CONCURRENCY);   /* lanes race on contents */
      ve.vc.n = 0;
      if (seq) vexpect(r, i, st, fq, &aq.q, &ve, scratch);
      if (k->call == MDC_CALL_EXECUTE) {
        const fz_arg *ns = mdc_fz_arg(k, MDC_A_N_SHAPES);
        n_shapes = ns ? (ns->u64 > FZ_MAX_ARGS ? FZ_MAX_ARGS : (uint32_t)ns->u64) : fq->n_out;
        got = d->execute(dev, client, pm, &aq.q, n_shapes ? shapes : NULL, n_shapes, &timing);
        judge_exec(r, i, pr, got, shapes, n_shapes, &timing);
        if (got == MD_NONE && ve.vc.n) vjudge(r, i, &ve, scratch, 0);
      } else {
        md_handle ev = 0;
        got = d->execute_async(dev, client, pm, &aq.q, &ev);
        made = ev;
        if (got == MD_NONE && ve.vc.n && k->obj < FZ_MAX_OBJS) {
          r->vexp[k->obj] = ve;
          r->vexp[k->obj].run = r->run_no;
        }
      }
      break;
    }
    case MDC_CALL_WAIT_EVENT: {
      const fz_arg *ns = mdc_fz_arg(k, MDC_A_N_SHAPES), *to = mdc_fz_arg(k, MDC_A_TIMEOUT_NS);
      n_shapes = ns ? (ns->u64 > FZ_MAX_ARGS ? FZ_MAX_ARGS : (uint32_t)ns->u64) : pr->ex.n_out;
      const fz_ref *er = &mdc_fz_arg(k, MDC_A_EVENT)->ref;
      got = d->wait_event(dev, client, value(r, er), to ? to->u64 : UINT64_MAX, n_shapes ? shapes : NULL, n_shapes,
                          &timing);
      judge_exec(r, i, pr, got, shapes, n_shapes, &timing);
      /* an execution's own status consumed the event: it ended (INVALID_ARGUMENT may be the
       * wait's refusal) */
      if (got != MD_MISSED_DEADLINE_TRANSIENT && got != MD_INVALID_ARGUMENT && er->how == FZ_REF_OBJ &&
          er->obj < FZ_MAX_OBJS && r->vals[er->obj] && value(r, er) == r->vals[er->obj])
        atomic_store_explicit(&r->settled[er->obj], 1, memory_order_relaxed);
      if (got == MD_NONE && er->how == FZ_REF_OBJ && !er->forge && er->obj < FZ_MAX_OBJS &&
          r->vexp[er->obj].run == r->run_no && r->vexp[er->obj].vc.n) {
        const struct vexp *e = &r->vexp[er->obj];
        int written = 0, snapshot = 0;
        for (unsigned t = 0; t < e->n_tok && !written; t++) {
          written = token_written(p, e->vc.issue, i, e->tok[t], r->strict);
          snapshot |= !written && r->strict && token_written(p, e->vc.issue, i, e->tok[t], 0);
        }
        if (!written) vjudge(r, i, e, scratch, snapshot);
      }
      break;
    }
    default: break;
  }
  oc->ran = 1;
  oc->got = got;
  oc->n_shapes = n_shapes < FZ_MAX_ARGS ? n_shapes : FZ_MAX_ARGS;
  memcpy(oc->shapes, shapes, oc->n_shapes * sizeof *shapes);
  if (!(fz_bit(got) & pr->set)) {
    char set[160];
    finding(r, (int)i, sname(got), pr->why, "returned %s; SPEC allows %s here", sname(got),
            mdc_fz_set_str(pr->set, set, sizeof set));
  }
  if (mdc_calls[k->call].produces != MDC_OBJ_NONE && got == MD_NONE && !made)
    finding(r, (int)i, "handle", "SPEC 1: 0 is never a valid handle",
            "returned NONE and the handle 0 (a creation that succeeds gives a live handle)");
  if (mdc_calls[k->call].produces != MDC_OBJ_NONE && k->obj < FZ_MAX_OBJS) {
    r->vals[k->obj] = got == MD_NONE ? made : 0;
    r->ev_client[k->obj] = client;
  }
  mdc_fz_apply(st, p, k, pr, got);
}

/* ---- blocks --------------------------------------------------------------------------------- */

typedef struct lane_arg {
  fz_runner *r;
  const fz_block *b;
  uint8_t lane;
} lane_arg;

static _Thread_local volatile unsigned spin_sink;   /* per lane: spins share nothing */

static void preempt(const fz_call *k) {
  switch (k->pre) {
    case FZ_PRE_YIELD: sched_yield(); break;
    case FZ_PRE_SPIN:
      for (unsigned j = 0; j < 64u * k->pre_arg; j++) spin_sink = spin_sink + j;
      break;
    case FZ_PRE_SLEEP: {
      struct timespec ts = {0, (long)k->pre_arg * 4000L};
      nanosleep(&ts, NULL);
      break;
    }
    default: break;
  }
}

static void *lane_main(void *arg) {
  lane_arg *la = arg;
  fz_runner *r = la->r;
  const fz_block *b = la->b;
  for (unsigned i = b->first; i < b->end; i++) {
    const fz_call *k = &r->p->calls[i];
    if (k->lane != la->lane) continue;
    /* This call starts after the one before it in the program has started. */
    unsigned pos = i - b->first;
    while (atomic_load_explicit(&r->turn, memory_order_acquire) != pos) {
      if (atomic_load(&r->stop)) break;
      sched_yield();
    }
    if (atomic_load(&r->stop)) {
      atomic_store_explicit(&r->turn, pos + 1, memory_order_release);
      continue;
    }
    atomic_store_explicit(&r->turn, pos + 1, memory_order_release);
    preempt(k);
    run_call(r, i, &r->lanes[la->lane], r->scratch[1 + la->lane % FZ_MAX_LANES]);
  }
  return NULL;
}

static void run_block(fz_runner *r, const fz_block *b) {
  pthread_t th[FZ_MAX_LANES];
  lane_arg args[FZ_MAX_LANES];
  unsigned started = 0;
  for (uint8_t l = 0; l < b->lanes; l++) mdc_fz_block_view(&r->st, r->p, b, l, &r->lanes[l]);
  atomic_store(&r->turn, 0);
  for (; started < b->lanes; started++) {
    args[started] = (lane_arg){r, b, (uint8_t)started};
    if (pthread_create(&th[started], NULL, lane_main, &args[started])) break;
  }
  if (started < b->lanes) atomic_store(&r->stop, 1);   /* the started lanes end at once */
  for (unsigned l = 0; l < started; l++) pthread_join(th[l], NULL);
  if (started < b->lanes) {
    finding(r, (int)b->first, "harness", "", "cannot start %u lane threads", b->lanes);
    return;
  }
  md_status got[FZ_MAX_CALLS];
  for (unsigned i = b->first; i < b->end; i++) got[i - b->first] = r->outs[i].ran ? r->outs[i].got : MD_INVALID_ARGUMENT;
  char why[256];
  /* A close_client that raced its client's other calls: its report against what the lanes were
   * told (each lane judged it only for what no other lane could change). */
  md_leak_report leaks[FZ_MAX_CALLS];
  for (unsigned i = b->first; i < b->end; i++) leaks[i - b->first] = r->outs[i].leaks;
  int at;
  if (!atomic_load(&r->stop) &&
      (at = mdc_fz_block_leaks(&r->st, r->p, b, r->lanes, got, leaks, why, sizeof why)) >= 0)
    finding(r, at, "leaks", "SPEC 5, 8.9, 8.10: close_client reports what the client left live, whatever raced it",
            "racing calls of block %u: %s", (unsigned)(b - r->p->blocks), why);
  if (!atomic_load(&r->stop) && mdc_fz_block_merge(&r->st, r->p, b, r->lanes, got, why, sizeof why))
    finding(r, (int)b->end - 1, "race", why, "racing calls of block %u: %s", (unsigned)(b - r->p->blocks), why);
}

/* ---- the run -------------------------------------------------------------------------------- */

/* Puts the device back to holding nothing, through the ABI only: waits for every event the
 * program made (so no execution is in flight and holds memory), then closes every client it
 * opened (close_client releases all a client holds, SPEC 5). Statuses of objects the program
 * already consumed or closed (INVALID_ARGUMENT) are expected; -1 when the device cannot be
 * trusted to be idle and empty: a client the model says is live (or may be) would not close,
 * or an execution nobody can wait for any more may still run (its client was closed: SPEC 4
 * lets it finish on its own), writing to pools whose memfds the next run reuses and resizes
 * (a SIGBUS in the driver's worker, or another run's bytes, some runs later). */
static int reset_device(fz_runner *r, const mdc_fz_prog *p) {
  const md_driver *d = r->drv;
  md_output_shape sh[FZ_MAX_ARGS];
  md_timing tm;
  int rc = 0;
  for (unsigned o = 0; o < p->n_objs && o < FZ_MAX_OBJS; o++)
    if (p->objs[o].kind == MDC_OBJ_EVENT && r->vals[o] && !atomic_load_explicit(&r->settled[o], memory_order_relaxed)) {
      md_status st = d->wait_event(r->dev, r->ev_client[o], r->vals[o], UINT64_MAX, sh, FZ_MAX_ARGS, &tm);
      if (st == MD_INVALID_ARGUMENT) rc = -1;
    }
  for (unsigned o = 0; o < p->n_objs && o < FZ_MAX_OBJS; o++) {
    if (p->objs[o].kind != MDC_OBJ_CLIENT || !r->vals[o]) continue;
    md_status st = d->close_client(r->dev, r->vals[o], NULL);
    if (st != MD_NONE && o < r->st.n && r->st.o[o].live != FZ_DEAD) rc = -1;
  }
  return rc;
}

int mdc_fz_run(fz_runner *r, const mdc_fz_prog *p, fz_outcome *outs, fz_finding *f, char *err, size_t errlen) {
  fz_finding none;
  if (!f) f = &none;
  memset(f, 0, sizeof *f);
  f->call = -1;
  r->p = p;
  r->f = f;
  r->outs = outs ? outs : r->own;
  for (unsigned i = 0; i < p->n_calls; i++) r->outs[i].ran = 0;
  memset(r->vals, 0, sizeof r->vals);
  for (unsigned o = 0; o < FZ_MAX_OBJS; o++) atomic_store_explicit(&r->settled[o], 0, memory_order_relaxed);
  r->used = 0;
  r->n_shared = 0;
  r->run_no++;
  atomic_store(&r->stop, 0);
  /* The device of the last run serves this one. For concurrency the program's seed orders the
   * simulator's asynchronous work (the schedule is part of the input): a run with another seed
   * gets a new device. The other targets' devices have seed 0 whatever the program says: a
   * device opened again whenever the seed changed would make the first run of each input take
   * the open's paths and the others not (AFL++ counts them unstable). */
  uint32_t seed = r->target == FZ_CONCURRENCY ? p->seed : 0;
  /* A stall's fault plan counts the device's executions from its open: such a run gets a device
   * of its own (opened here, closed at its end). */
  if (r->dev && (r->fresh_each || r->dev_seed != seed || p->stall)) mdc_fz_runner_close_device(r);
  if (!r->dev) {
    char config[640];
    snprintf(config, sizeof config, "%s%sseed=%u;mem_limit=%llu", r->config, r->config[0] ? ";" : "",
             r->fresh_each ? p->seed : seed, (unsigned long long)MEM_LIMIT);
    md_status st = MD_GENERAL_FAILURE;
    if (p->stall) {
      /* a driver without the simulator's fault plans runs the program without its stall */
      size_t len = strlen(config);
      snprintf(config + len, sizeof config - len, ";faults=stall@%u", p->stall);
      st = r->drv->open_device(config, &r->dev);
      if (st != MD_NONE) config[len] = 0;
    }
    if (st != MD_NONE) st = r->drv->open_device(config, &r->dev);
    if (st != MD_NONE || !r->dev) {
      snprintf(err, errlen, "open_device(\"%s\") returned %s: %s", config, sname(st), r->drv->last_error(NULL));
      r->dev = NULL;
      r->p = NULL;
      return -1;
    }
    r->dev_seed = seed;
  }
  mdc_fz_state_init(&r->st, MEM_LIMIT);
  r->st.strict = (uint8_t)r->strict;
  for (unsigned i = 0; i < p->n_calls && !atomic_load(&r->stop);) {
    const fz_call *k = &p->calls[i];
    if (k->block && r->target == FZ_CONCURRENCY) {
      const fz_block *b = &p->blocks[k->block - 1];
      run_block(r, b);
      i = b->end;
      continue;
    }
    run_call(r, i, &r->st, r->scratch[0]);
    i++;
  }
  atomic_store(&r->current, -1);
  /* After a finding the driver's state is suspect: the next run gets a new device. */
  if (f->found || r->fresh_each || p->stall || reset_device(r, p)) mdc_fz_runner_close_device(r);
  r->p = NULL;
  return 0;
}
