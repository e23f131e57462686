/* md_hip_cpu_exec.c - the CPU execution layer's kernel executor: every block of a launch runs on
 * the stream's thread, and every GPU thread of a block is a fiber with its own stack,
 * so __syncthreads is a real barrier and locals stay per thread.
 *
 * Why fibers and not one OS thread per GPU thread: a block is 256 threads and these machines
 * have 2 cores; a barrier among 256 OS threads costs 256 context switches through the kernel
 * (about 1 ms), a fiber switch costs a user-space register swap. The schedule is deterministic
 * too: the threads of a block run in index order up to the next barrier.
 *
 * Fibers are kept in a small pool of executors (a set of parked fibers each) shared by all
 * stream threads: a fiber waits, parked, between kernels, and may resume on another OS thread
 * at the next kernel (it holds nothing thread-local while parked; the pool's mutex orders its
 * stack's reuse). ASan is told about every switch (its fiber interface), so it tracks the
 * stacks. TSan is not: its fiber contexts cost about a megabyte of zeroing each (256 per block
 * made a small trace take 20 s), so under TSan a block's threads count as their stream thread,
 * which is what TSan checks here: the host threads, streams and the runtime around kernels.
 * (Its shadow call stack stays balanced: every fiber pops only what it pushed.) */
#include "md_hip_cpu_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HIPCPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HIPCPU_ASAN 1
#endif
#endif
#ifdef HIPCPU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* Each GPU thread's stack is MD__HIPCPU_STACK bytes aligned to its size: a guard page at the
 * bottom, the fiber's pointer in the slot at the top (md_hip_cpu.h), so a kernel finds its own
 * thread from its stack pointer: no thread-local variable on the hot path (in a shared object
 * each access is a __tls_get_addr call, which ASan intercepts: half the layer's time). */
#define STACK_BYTES MD__HIPCPU_STACK
#define MAX_EXECUTORS 4u         /* kernels running at once; more wait */
#define MAX_THREADS 1024u        /* per block (the launch check refuses more) */

typedef enum fstate { F_RUN, F_BARRIER, F_DONE } fstate;

/* ---- context switching ----
 * On x86-64 a switch saves the callee-saved registers and the SSE/x87 control words on the
 * current stack and swaps stack pointers (a few nanoseconds); glibc's swapcontext also saves
 * the signal mask with a system call on every switch, which made a 256-thread barrier cost
 * about half a millisecond. Elsewhere: swapcontext. */
#if defined(__x86_64__)
#define HIPCPU_ASM_SWITCH 1
typedef struct fctx {
  void *sp;
} fctx;
/* Saves the running context's stack pointer in *save and resumes the context whose stack
 * pointer is next. */
void md__hipcpu_ctx_switch(void **save, void *next);
__asm__(".text\n"
        ".globl md__hipcpu_ctx_switch\n"
        ".hidden md__hipcpu_ctx_switch\n"
        ".type md__hipcpu_ctx_switch,@function\n"
        "md__hipcpu_ctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size md__hipcpu_ctx_switch, .-md__hipcpu_ctx_switch\n"
        /* A new context's first switch returns here: call r12(rbx), which never returns. */
        ".globl md__hipcpu_ctx_start\n"
        ".hidden md__hipcpu_ctx_start\n"
        ".type md__hipcpu_ctx_start,@function\n"
        "md__hipcpu_ctx_start:\n"
        "  movq %rbx, %rdi\n"
        "  callq *%r12\n"
        "  ud2\n"
        ".size md__hipcpu_ctx_start, .-md__hipcpu_ctx_start\n");
void md__hipcpu_ctx_start(void);

static void ctx_make(fctx *c, void *stack, size_t len, void (*fn)(void *), void *arg) {
  uintptr_t top = ((uintptr_t)stack + len - 16) & ~(uintptr_t)15; /* the entry's rsp: 16-aligned */
  uint64_t *sp = (uint64_t *)top - 8;
  uint32_t ctrl[2] = {0x1F80u, 0x037Fu}; /* default MXCSR and x87 control word */
  memcpy(&sp[0], ctrl, sizeof ctrl);
  sp[1] = 0;                          /* r15 */
  sp[2] = 0;                          /* r14 */
  sp[3] = 0;                          /* r13 */
  sp[4] = (uint64_t)(uintptr_t)fn;    /* r12 */
  sp[5] = (uint64_t)(uintptr_t)arg;   /* rbx */
  sp[6] = 0;                          /* rbp: ends frame-pointer stack walks */
  sp[7] = (uint64_t)(uintptr_t)md__hipcpu_ctx_start;
  c->sp = sp;
}
static void ctx_swap(fctx *from, fctx *to) { md__hipcpu_ctx_switch(&from->sp, to->sp); }
#else
typedef struct fctx {
  ucontext_t uc;
} fctx;
static void (*ctx_entry_fn)(void *);
/* getcontext returns twice in principle (never here: the context is only a template for
 * makecontext); kept apart so no caller variable can be clobbered. */
static __attribute__((noinline)) void context_init(ucontext_t *uc) {
  if (getcontext(uc) != 0) abort();
}
static void ctx_trampoline(unsigned hi, unsigned lo) {
  ctx_entry_fn((void *)(uintptr_t)(((uint64_t)hi << 32) | lo));
}
static void ctx_make(fctx *c, void *stack, size_t len, void (*fn)(void *), void *arg) {
  ctx_entry_fn = fn;
  context_init(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = len;
  c->uc.uc_link = NULL;
  uint64_t p = (uint64_t)(uintptr_t)arg;
  makecontext(&c->uc, (void (*)(void))ctx_trampoline, 2, (unsigned)(p >> 32), (unsigned)p);
}
static void ctx_swap(fctx *from, fctx *to) {
  if (swapcontext(&from->uc, &to->uc) != 0) abort();
}
#endif

struct executor;

typedef struct fiber {
  md__hipcpu_kctx kctx; /* first: the stack's slot points at the fiber and at its kctx */
  fctx uc;
  struct executor *x;
  char *map;           /* guard page + stack, STACK_BYTES, aligned to STACK_BYTES */
  fstate state;
  void *asan_fake;     /* ASan's fake stack of this fiber while it is switched out */
} fiber;

typedef struct executor {
  fctx main;                   /* the stream thread's context while a fiber runs */
  size_t page;
  const void *main_bottom;    /* its stack, for ASan */
  size_t main_size;
  fiber **f;
  uint32_t n, cap;
  void (*body)(void *);
  void *ctx;
  struct executor *next;
} executor;

/* One launch of a kernel function at a time: its __shared__ arrays are plain statics (see
 * md_hip_cpu.h). Keyed by the kernel's name; a collision only serializes two kernels more. */
#define KERNEL_LOCKS 64u
static pthread_mutex_t kernel_locks[KERNEL_LOCKS];
static pthread_once_t kernel_locks_once = PTHREAD_ONCE_INIT;

static void kernel_locks_init(void) {
  for (unsigned i = 0; i < KERNEL_LOCKS; i++) pthread_mutex_init(&kernel_locks[i], NULL);
}

static pthread_mutex_t *kernel_lock(const char *name) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
  pthread_once(&kernel_locks_once, kernel_locks_init);
  return &kernel_locks[h % KERNEL_LOCKS];
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static executor *pool_free;
static unsigned pool_count;

/* ---- switching ---- */

static void to_fiber(executor *x, fiber *f) {
#ifdef HIPCPU_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, f->map + x->page, STACK_BYTES - x->page);
#endif
  ctx_swap(&x->main, &f->uc);
#ifdef HIPCPU_ASAN
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* From fiber f back to its executor's stream thread; returns when f is resumed. */
static void to_main(fiber *f) {
  executor *x = f->x;
#ifdef HIPCPU_ASAN
  __sanitizer_start_switch_fiber(&f->asan_fake, x->main_bottom, x->main_size);
#endif
  ctx_swap(&f->uc, &x->main);
#ifdef HIPCPU_ASAN
  /* Resumed, maybe from another stream thread than last time: note its stack. */
  __sanitizer_finish_switch_fiber(f->asan_fake, &f->x->main_bottom, &f->x->main_size);
#endif
}

/* __syncthreads: the calling GPU thread waits at its block's barrier; the executor resumes it
 * once every thread of the block is there. Outside a kernel it is a programming error. */
void md__hipcpu_syncthreads(void) {
  fiber *f = (fiber *)(uintptr_t)md__hipcpu_ctx();
  if (f->kctx.magic != MD__HIPCPU_KCTX_MAGIC) {
    fprintf(stderr, "hipcpu: __syncthreads called outside a kernel\n");
    abort();
  }
  f->state = F_BARRIER;
  to_main(f);
}

/* A fiber's whole life: run the kernel body for each block it is given, park in between. */
static void fiber_main(void *arg) {
  fiber *f = arg;
#ifdef HIPCPU_ASAN
  __sanitizer_finish_switch_fiber(NULL, &f->x->main_bottom, &f->x->main_size);
#endif
  for (;;) {
    executor *x = f->x;
    x->body(x->ctx);
    f->state = F_DONE;
    to_main(f);
  }
}

static fiber *fiber_new(executor *x) {
  fiber *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  /* Twice the size, then trimmed to a STACK_BYTES-aligned region. */
  char *m = mmap(NULL, 2 * (size_t)STACK_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    free(f);
    return NULL;
  }
  char *a = (char *)(((uintptr_t)m + STACK_BYTES - 1) & ~(uintptr_t)(STACK_BYTES - 1));
  if (a > m) munmap(m, (size_t)(a - m));
  if (a + STACK_BYTES < m + 2 * (size_t)STACK_BYTES) munmap(a + STACK_BYTES, (size_t)(m + 2 * (size_t)STACK_BYTES - (a + STACK_BYTES)));
  f->map = a;
  (void)mprotect(a, x->page, PROT_NONE); /* a stack overflow faults instead of corrupting */
  *(md__hipcpu_kctx **)(a + STACK_BYTES - MD__HIPCPU_SLOT) = &f->kctx; /* = f: its first member */
  f->kctx.magic = MD__HIPCPU_KCTX_MAGIC;
  f->x = x;
  ctx_make(&f->uc, a + x->page, STACK_BYTES - x->page - MD__HIPCPU_SLOT, fiber_main, f);
  f->state = F_DONE;
  return f;
}

/* Frees a fiber that will never run again (parked, or stopped in the middle of a kernel). */
static void fiber_free(fiber *f) {
#ifdef HIPCPU_ASAN
  /* Frames left on the stack keep their redzones poisoned; the pages may be mapped again. */
  __asan_unpoison_memory_region(f->map, STACK_BYTES);
#endif
  munmap(f->map, STACK_BYTES);
  free(f);
}

/* ---- the executor pool ---- */

static executor *executor_get(uint32_t nthreads) {
  pthread_mutex_lock(&pool_lock);
  while (!pool_free && pool_count >= MAX_EXECUTORS) pthread_cond_wait(&pool_cond, &pool_lock);
  executor *x = pool_free;
  if (x) pool_free = x->next;
  else pool_count++;
  pthread_mutex_unlock(&pool_lock);
  if (!x && !(x = calloc(1, sizeof *x))) goto oom;
  x->page = (size_t)getpagesize();
  if (x->cap < nthreads) {
    fiber **v = realloc(x->f, nthreads * sizeof *v);
    if (!v) goto oom;
    x->f = v;
    x->cap = nthreads;
  }
  while (x->n < nthreads) {
    fiber *f = fiber_new(x);
    if (!f) goto oom;
    x->f[x->n++] = f;
  }
  return x;
oom:
  /* Out of host memory for stacks: the test double cannot go on (a real device would not be
   * out of its thread contexts either). */
  fprintf(stderr, "hipcpu: out of host memory for %" PRIu32 " GPU thread stacks\n", nthreads);
  abort();
}

static void executor_put(executor *x) {
  pthread_mutex_lock(&pool_lock);
  x->next = pool_free;
  pool_free = x;
  pthread_cond_signal(&pool_cond);
  pthread_mutex_unlock(&pool_lock);
}

/* When the layer is unloaded (a driver dlclose'd) or the process exits: the parked executors
 * and their stacks go (LeakSanitizer would report them once the module's statics are gone).
 * Executors in use by a kernel still running are left alone. */
__attribute__((destructor)) static void pool_fini(void) {
  pthread_mutex_lock(&pool_lock);
  executor *x = pool_free;
  pool_free = NULL;
  for (executor *y = x; y; y = y->next) pool_count--;
  pthread_mutex_unlock(&pool_lock);
  while (x) {
    executor *next = x->next;
    for (uint32_t i = 0; i < x->n; i++) fiber_free(x->f[i]);
    free(x->f);
    free(x);
    x = next;
  }
}

/* ---- running a kernel ---- */

/* Runs one block with threads f[0..n); 0, or -1 when some threads ended while others waited at
 * a barrier (those are replaced: they cannot be resumed). */
static int run_block(executor *x, uint32_t n, uint64_t *barriers, uint32_t *reached) {
  for (uint32_t t = 0; t < n; t++) x->f[t]->state = F_RUN;
  for (;;) {
    uint32_t done = 0;
    for (uint32_t t = 0; t < n; t++) {
      fiber *f = x->f[t];
      if (f->state == F_RUN) to_fiber(x, f);
      done += f->state == F_DONE;
    }
    if (done == n) return 0;
    if (done > 0) {
      *reached = n - done;
      for (uint32_t t = 0; t < n; t++) {
        if (x->f[t]->state != F_BARRIER) continue;
        fiber_free(x->f[t]);
        if (!(x->f[t] = fiber_new(x))) {
          fprintf(stderr, "hipcpu: out of host memory for a GPU thread stack\n");
          abort();
        }
      }
      return -1;
    }
    (*barriers)++; /* every thread is at the barrier: release them all */
    for (uint32_t t = 0; t < n; t++) x->f[t]->state = F_RUN;
  }
}

int md__hipcpu_exec(const char *name, const uint32_t grid[3], const uint32_t block[3], void (*body)(void *),
                    void *ctx, uint64_t *blocks, uint64_t *threads, uint64_t *barriers, char *msg,
                    size_t msglen) {
  const uint32_t n = block[0] * block[1] * block[2]; /* checked at launch: 1..MAX_THREADS */
  if (n == 0 || n > MAX_THREADS) {
    snprintf(msg, msglen, "kernel %s: %" PRIu32 " threads per block", name, n);
    return -1;
  }
  pthread_mutex_t *klock = kernel_lock(name);
  pthread_mutex_lock(klock);
  executor *x = executor_get(n);
  x->body = body;
  x->ctx = ctx;
  const md__hipcpu_u3 gd = {grid[0], grid[1], grid[2]}, bd = {block[0], block[1], block[2]};
  for (uint32_t t = 0; t < n; t++) {
    md__hipcpu_kctx *k = &x->f[t]->kctx;
    k->tid = (md__hipcpu_u3){t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
    k->bdim = bd;
    k->gdim = gd;
  }
  int rc = 0;
  for (uint32_t bz = 0; bz < gd.z && rc == 0; bz++)
    for (uint32_t by = 0; by < gd.y && rc == 0; by++)
      for (uint32_t bx = 0; bx < gd.x && rc == 0; bx++) {
        for (uint32_t t = 0; t < n; t++) x->f[t]->kctx.bid = (md__hipcpu_u3){bx, by, bz};
        uint32_t reached = 0;
        if (run_block(x, n, barriers, &reached) != 0) {
          snprintf(msg, msglen,
                   "kernel %s, block (%" PRIu32 ",%" PRIu32 ",%" PRIu32 "): %" PRIu32 " of %" PRIu32
                   " threads wait at __syncthreads while the others have returned",
                   name, bx, by, bz, reached, n);
          rc = -1;
        }
        (*blocks)++;
        *threads += n;
      }
  x->body = NULL;
  x->ctx = NULL;
  executor_put(x);
  pthread_mutex_unlock(klock);
  return rc;
}
