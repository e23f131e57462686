/* test_syscalls.c - the system calls an execution makes, counted (SPEC 9: an execution whose
 * pools are all registered pools or tokens makes none on the reference driver's steady-state
 * path; a descriptor pool the client's cache already maps costs one, the fstat that checks it).
 *
 * How they are counted, deterministically and without ptrace: a child process warms the driver
 * up, then installs a seccomp filter that lets through only the system calls of one trampoline
 * function (and exit_group and rt_sigreturn) and turns every other one into SIGSYS. The SIGSYS
 * handler counts the call by number, makes it through the trampoline with the registers the
 * caller set, and returns its result in the caller's register, so the program runs on unchanged
 * while every system call it makes is counted. The counts go back to the test through a shared
 * page. x86-64 only (the trampoline and the registers are the x86-64 syscall ABI); sanitizer
 * builds are skipped, their runtimes make system calls of their own (allocator mappings). */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MDT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MDT_SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && !defined(MDT_SANITIZED)
#define MDT_COUNTS 1
#endif

#define N_EXEC 1000u   /* executions counted in each case */
#define MAX_NR 512

/* What the child reports: system calls by number while the executions of one case ran. */
typedef struct counts {
  int ready;             /* the child reached the counting (setup and warm-up succeeded) */
  int failed;            /* an execution failed (status in status, message in msg) */
  md_status status;
  char msg[256];
  uint64_t total, by_nr[MAX_NR];
} counts;

#ifdef MDT_COUNTS
/* mdt_raw_syscall(nr, a1..a6): the one place whose system calls the filter lets through. */
long mdt_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
extern char mdt_tramp_start[], mdt_tramp_end[];
__asm__(".text\n"
        ".globl mdt_raw_syscall\n"
        ".type mdt_raw_syscall, @function\n"
        "mdt_raw_syscall:\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  mov %rdx, %rsi\n"
        "  mov %rcx, %rdx\n"
        "  mov %r8, %r10\n"
        "  mov %r9, %r8\n"
        "  mov 8(%rsp), %r9\n"
        ".globl mdt_tramp_start\n"
        "mdt_tramp_start:\n"
        "  syscall\n"
        ".globl mdt_tramp_end\n"
        "mdt_tramp_end:\n"
        "  ret\n"
        ".size mdt_raw_syscall, .-mdt_raw_syscall\n");

static counts *shared;

static void on_sigsys(int sig, siginfo_t *si, void *ucv) {
  (void)sig;
  ucontext_t *uc = ucv;
  greg_t *g = uc->uc_mcontext.gregs;
  long nr = si->si_syscall;
  shared->total++;
  if (nr >= 0 && nr < MAX_NR) shared->by_nr[nr]++;
  g[REG_RAX] = mdt_raw_syscall(nr, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
}

/* Every system call but the trampoline's, exit_group and rt_sigreturn raises SIGSYS. */
static int install_filter(void) {
  uint64_t lo = (uint64_t)(uintptr_t)mdt_tramp_start, hi = (uint64_t)(uintptr_t)mdt_tramp_end;
  if ((lo >> 32) != (hi >> 32)) return -1;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      /* the trampoline's syscall instruction (the pointer is past it, or at it) */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(lo >> 32), 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo, 0, 2),
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)hi, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = (unsigned short)(sizeof f / sizeof f[0]), .filter = f};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, NULL) != 0) return -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}
#endif

/* The request shapes counted: every pool registered; tokens in and out; one descriptor input
 * (cached by the client after the warm-up) with a registered output. */
enum { CASE_REGISTERED = 0, CASE_TOKENS = 1, CASE_DESCRIPTOR = 2 };

static const uint32_t D14[2] = {1, 4};
#define B14 16u

#ifdef MDT_COUNTS
/* The child: builds the case, warms it up, counts N_EXEC executions, reports, exits. Uses no
 * Criterion assert (it is not the test's process). */
static void child(int which) {
  const md_driver *drv = mdt_driver();
  md_device *dev = NULL;
  md_handle c = 0, p = 0;
  md_status st = drv->open_device("backend=sim", &dev);
  if (st == MD_NONE) st = drv->open_client(dev, &c);
  md_operand ops[2];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < 2; i++) ops[i] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = D14};
  ops[0].lifetime = MD_SUBGRAPH_INPUT;
  ops[1].lifetime = MD_SUBGRAPH_OUTPUT;
  uint32_t in[1] = {0}, out[1] = {1};
  md_operation relu = {.type = MD_OP_RELU, .n_inputs = 1, .inputs = in, .n_outputs = 1, .outputs = out};
  md_model m = {.n_operands = 2, .operands = ops, .n_operations = 1, .operations = &relu, .n_inputs = 1,
                .inputs = in, .n_outputs = 1, .outputs = out};
  if (st == MD_NONE) st = drv->prepare_model(dev, c, &m, &p);
  int fi = memfd_create("mdt-in", MFD_CLOEXEC), fo = memfd_create("mdt-out", MFD_CLOEXEC);
  const float x[4] = {-1, 2, -3, 4};
  if (fi < 0 || fo < 0 || ftruncate(fi, B14) || ftruncate(fo, B14) || pwrite(fi, x, B14, 0) != B14) st = MD_GENERAL_FAILURE;
  md_memory mi = {.kind = MD_MEM_ASHMEM, .fd = fi, .size = B14, .prot = PROT_READ | PROT_WRITE};
  md_memory mo = mi;
  mo.fd = fo;
  md_handle ri = 0, ro = 0;
  md_token ti = 0, to = 0;
  md_request_pool pools[2];
  memset(pools, 0, sizeof pools);
  md_request_arg ia = {.pool = 0}, oa = {.pool = 1};
  if (st == MD_NONE && which != CASE_TOKENS) st = drv->register_memory(dev, c, &mo, &ro);
  if (st == MD_NONE && which == CASE_REGISTERED) st = drv->register_memory(dev, c, &mi, &ri);
  if (st == MD_NONE && which == CASE_TOKENS) {
    md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
    st = drv->allocate(dev, c, NULL, &p, 1, &role, 1, NULL, 0, &ti);
    if (st == MD_NONE) st = drv->allocate(dev, c, NULL, &p, 1, NULL, 0, &role, 1, &to);
    if (st == MD_NONE) st = drv->copy_from(dev, c, ti, &mi, 0, NULL);
  }
  switch (which) {
    case CASE_REGISTERED:
      pools[0] = (md_request_pool){.is_token = 2, .token = ri};
      pools[1] = (md_request_pool){.is_token = 2, .token = ro};
      ia.length = oa.length = B14;
      break;
    case CASE_TOKENS:
      pools[0] = (md_request_pool){.is_token = 1, .token = ti};
      pools[1] = (md_request_pool){.is_token = 1, .token = to};
      break;
    case CASE_DESCRIPTOR:
      pools[0] = (md_request_pool){.is_token = 0, .memory = mi};
      pools[1] = (md_request_pool){.is_token = 2, .token = ro};
      ia.length = oa.length = B14;
      break;
  }
  md_request req = {.n_inputs = 1, .inputs = &ia, .n_outputs = 1, .outputs = &oa, .n_pools = 2, .pools = pools};
  md_output_shape sh[1];
  md_timing tm;
  for (unsigned i = 0; st == MD_NONE && i < 200; i++) st = drv->execute(dev, c, p, &req, sh, 1, &tm);   /* warm-up */
  if (st != MD_NONE) {
    shared->failed = 1;
    shared->status = st;
    snprintf(shared->msg, sizeof shared->msg, "setup: %s", dev ? drv->last_error(dev) : "open_device");
    _exit(0);
  }
  if (install_filter() != 0) _exit(3);
  shared->ready = 1;
  shared->total = 0;
  memset(shared->by_nr, 0, sizeof shared->by_nr);
  for (unsigned i = 0; st == MD_NONE && i < N_EXEC; i++) st = drv->execute(dev, c, p, &req, sh, 1, &tm);
  uint64_t seen = shared->total;   /* what the executions made; the report below makes more */
  if (st != MD_NONE) {
    shared->failed = 1;
    shared->status = st;
    snprintf(shared->msg, sizeof shared->msg, "execute: %s", drv->last_error(dev));
  }
  shared->total = seen;
  syscall(SYS_exit_group, 0);
}
#endif

/* Runs case `which` in a child; the counts it reported. */
static counts run_case(int which) {
#ifndef MDT_COUNTS
  (void)which;
  cr_skip_test("system calls are counted on x86-64 builds without sanitizers only");
  counts none;
  memset(&none, 0, sizeof none);
  return none;
#else
  shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(shared != MAP_FAILED);
  memset(shared, 0, sizeof *shared);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) child(which);
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the counting child ended with status 0x%x", ws);
  counts r = *shared;
  munmap(shared, sizeof *shared);
  cr_assert(!r.failed, "%s (status %d)", r.msg, (int)r.status);
  cr_assert(r.ready, "the child did not reach the counting");
  return r;
#endif
}

static void list_calls(const counts *r, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < MAX_NR && used < n; i++)
    if (r->by_nr[i]) used += (size_t)snprintf(buf + used, n - used, " nr %d x%llu;", i, (unsigned long long)r->by_nr[i]);
}

Test(syscalls, an_execution_on_registered_pools_makes_none) {
  counts r = run_case(CASE_REGISTERED);
  char calls[512];
  list_calls(&r, calls, sizeof calls);
  cr_expect_eq(r.total, 0, "%llu system calls in %u executions:%s", (unsigned long long)r.total, N_EXEC, calls);
}

Test(syscalls, an_execution_on_tokens_makes_none) {
  counts r = run_case(CASE_TOKENS);
  char calls[512];
  list_calls(&r, calls, sizeof calls);
  cr_expect_eq(r.total, 0, "%llu system calls in %u executions:%s", (unsigned long long)r.total, N_EXEC, calls);
}

Test(syscalls, a_cached_descriptor_costs_at_most_one) {
  counts r = run_case(CASE_DESCRIPTOR);
  char calls[512];
  list_calls(&r, calls, sizeof calls);
  cr_expect_leq(r.total, (uint64_t)N_EXEC, "%llu system calls in %u executions with one descriptor pool:%s",
                (unsigned long long)r.total, N_EXEC, calls);
}
