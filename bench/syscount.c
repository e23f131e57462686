/* syscount.c - counting every system call a piece of code makes (syscount.h): a seccomp
 * filter in a forked child, a SIGSYS handler that counts and forwards each call. */
#include "syscount.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && !defined(SANITIZED)
#define COUNTS 1
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#endif

/* What the child reports through a shared page. */
typedef struct report {
  int stage;          /* 1 prepared, 2 filtered, 3 body done */
  int failed;
  char msg[256];
  md_syscount counts;
} report;

#ifdef COUNTS
static report *shared;

/* md_syscount_raw(nr, a1..a6): the one place whose system calls the filter lets through. */
long md_syscount_raw(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
extern char md_syscount_tramp_start[], md_syscount_tramp_end[];
__asm__(".text\n"
        ".globl md_syscount_raw\n"
        ".type md_syscount_raw, @function\n"
        "md_syscount_raw:\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  mov %rdx, %rsi\n"
        "  mov %rcx, %rdx\n"
        "  mov %r8, %r10\n"
        "  mov %r9, %r8\n"
        "  mov 8(%rsp), %r9\n"
        ".globl md_syscount_tramp_start\n"
        "md_syscount_tramp_start:\n"
        "  syscall\n"
        ".globl md_syscount_tramp_end\n"
        "md_syscount_tramp_end:\n"
        "  ret\n"
        ".size md_syscount_raw, .-md_syscount_raw\n");

static void on_sigsys(int sig, siginfo_t *si, void *ucv) {
  (void)sig;
  ucontext_t *uc = ucv;
  greg_t *g = uc->uc_mcontext.gregs;
  long nr = si->si_syscall;
  shared->counts.total++;
  if (nr >= 0 && nr < MD_SYSCOUNT_MAX_NR) shared->counts.by_nr[nr]++;
  g[REG_RAX] = md_syscount_raw(nr, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
}

/* Every system call but the trampoline's, exit_group and rt_sigreturn raises SIGSYS. */
static int install_filter(void) {
  uint64_t lo = (uint64_t)(uintptr_t)md_syscount_tramp_start, hi = (uint64_t)(uintptr_t)md_syscount_tramp_end;
  if ((lo >> 32) != (hi >> 32)) return -1;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      /* the trampoline's syscall instruction (the pointer is at it or just past it) */
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

int md_syscount_supported(void) {
#ifdef COUNTS
  return 1;
#else
  return 0;
#endif
}

int md_syscount_run(int (*prepare)(void *arg, char *err, size_t errlen),
                    int (*body)(void *arg, char *err, size_t errlen), void *arg, md_syscount *out,
                    char *err, size_t errlen) {
#ifndef COUNTS
  (void)prepare, (void)body, (void)arg, (void)out;
  snprintf(err, errlen, "system calls are counted on x86-64 builds without sanitizers only");
  return -1;
#else
  shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    snprintf(err, errlen, "mmap: %s", strerror(errno));
    return -1;
  }
  memset(shared, 0, sizeof *shared);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    munmap(shared, sizeof *shared);
    return -1;
  }
  if (pid == 0) {
    if (prepare && prepare(arg, shared->msg, sizeof shared->msg) != 0) {
      shared->failed = 1;
      _exit(0);
    }
    shared->stage = 1;
    if (install_filter() != 0) {
      snprintf(shared->msg, sizeof shared->msg, "cannot install the seccomp filter: %s", strerror(errno));
      shared->failed = 1;
      _exit(0);
    }
    shared->stage = 2;
    memset(&shared->counts, 0, sizeof shared->counts);
    int rc = body(arg, shared->msg, sizeof shared->msg);
    shared->stage = 3;
    if (rc != 0) shared->failed = 1;
    syscall(SYS_exit_group, 0);
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  int rc = 0;
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    snprintf(err, errlen, "the counting child ended with status 0x%x (stage %d)", ws, shared->stage);
    rc = -1;
  } else if (shared->failed) {
    snprintf(err, errlen, "%s", shared->msg);
    rc = -1;
  } else if (shared->stage != 3) {
    snprintf(err, errlen, "the counting child stopped at stage %d", shared->stage);
    rc = -1;
  } else {
    *out = shared->counts;
  }
  munmap(shared, sizeof *shared);
  shared = NULL;
  return rc;
#endif
}

void md_syscount_list(const md_syscount *c, char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = '\0';
  for (int i = 0; i < MD_SYSCOUNT_MAX_NR && used < len; i++)
    if (c->by_nr[i]) used += (size_t)snprintf(buf + used, len - used, " nr %d x%llu;", i, (unsigned long long)c->by_nr[i]);
}
