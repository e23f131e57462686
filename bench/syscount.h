/* syscount.h - counting every system call a piece of code makes, deterministically and
 * without ptrace: a forked child runs `prepare`, installs a seccomp filter under which every
 * system call but those of one trampoline raises SIGSYS, then runs `body`; the SIGSYS handler
 * counts the call by number, makes it through the trampoline and hands its result back, so the
 * body runs unchanged. Shared by md_bench (bench_execute.c) and runtime/tests/test_syscalls.c.
 *
 * x86-64 builds without sanitizers only (the trampoline is the x86-64 syscall ABI; sanitizer
 * runtimes make system calls of their own): elsewhere md_syscount_supported() is 0. */
#ifndef MD_SYSCOUNT_H
#define MD_SYSCOUNT_H

#include <stddef.h>
#include <stdint.h>

#define MD_SYSCOUNT_MAX_NR 512

typedef struct md_syscount {
  uint64_t total;                        /* system calls `body` made */
  uint64_t by_nr[MD_SYSCOUNT_MAX_NR];    /* by number (numbers beyond the table count in total only) */
} md_syscount;

/* Whether counting works in this build (x86-64, no sanitizer). */
int md_syscount_supported(void);

/* In a forked child: prepare(arg), then the filter, then body(arg), counting. Each callback
 * returns 0, or -1 with a message in err (errlen bytes). Returns 0 with *out filled, or -1
 * with why in err (not supported here, a callback failed, the child died). The child shares
 * nothing with the caller but the counts and the message; the caller's process is unchanged.
 * Not thread-safe (one run at a time per process). */
int md_syscount_run(int (*prepare)(void *arg, char *err, size_t errlen),
                    int (*body)(void *arg, char *err, size_t errlen), void *arg, md_syscount *out,
                    char *err, size_t errlen);

/* " nr 262 x1000; nr 72 x2000;" - the numbers seen, for messages. */
void md_syscount_list(const md_syscount *c, char *buf, size_t len);

#endif
