/* child.c - running work that may misbehave (a driver under test) in an isolated child: its
 * own process group, no descriptor of the parent's (only stdin, and stdout sent to stderr), and
 * a shared page (memory, not a descriptor a driver could write into) that it reports progress
 * and its result on. The parent waits for the child's exit (a pidfd), so helpers the child
 * forked cannot hold a case open, and kills the whole group when the case ends or times out.
 * mdc is the subreaper of everything it starts, so a helper that leaves the group is still
 * found and killed at the end (mdc_cli__reap_all). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdc_int.h"

double mdc_cli__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mdc_cli__write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

void mdc_cli__describe_exit(int st, char *out, size_t n) {
  if (WIFSIGNALED(st)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(st));
    snprintf(out, n, "killed by signal SIG%s (%s)", abbrev ? abbrev : "?", strsignal(WTERMSIG(st)));
  } else if (WIFEXITED(st)) {
    snprintf(out, n, "exited with status %d before reporting a result", WEXITSTATUS(st));
  } else {
    snprintf(out, n, "ended with wait status 0x%x", st);
  }
}

void mdc_cli__become_subreaper(void) { prctl(PR_SET_CHILD_SUBREAPER, 1); }

/* Closes every descriptor but 0, 1 and 2: what the parent holds open (the results store, other
 * cases' pidfds) must never reach a driver or a trace. */
static void close_others(void) {
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
  /* No close_range (old kernel): walk what is open. */
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  int dfd = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd > 2 && fd != dfd) close(fd);
  }
  closedir(d);
}

int mdc_cli__child_start(mdc_cli__child *c, size_t result_len, double deadline) {
  memset(c, 0, sizeof *c);
  c->pidfd = -1;
  c->deadline = deadline;
  c->t0 = mdc_cli__now();
  c->page_len = sizeof *c->page + result_len;
  c->page = mmap(NULL, c->page_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (c->page == MAP_FAILED) {
    c->page = NULL;
    return -1;
  }
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    munmap(c->page, c->page_len);
    c->page = NULL;
    errno = e;
    return -1;
  }
  if (pid == 0) {
    /* Its own process group: the parent kills the case and whatever it forked at once. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    dup2(STDERR_FILENO, STDOUT_FILENO); /* a driver's prints never mix into --json */
    close_others();
    mdc_cli__crash_arm(&c->page->crash); /* a crash reports its stack (crash_stack.c) */
    c->pid = 0;
    return 0;
  }
  setpgid(pid, pid); /* also here, so no kill(-pid) can come before the child's own setpgid */
  c->pid = pid;
  c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (c->pidfd >= 0) fcntl(c->pidfd, F_SETFD, FD_CLOEXEC);
  return 1;
}

void mdc_cli__child_report(mdc_cli__child *c, const void *res, size_t len) {
  if (len > c->page_len - sizeof *c->page) len = c->page_len - sizeof *c->page;
  memcpy(c->page->result, res, len);
  atomic_store_explicit(&c->page->result_len, (uint32_t)len, memory_order_release);
}

int mdc_cli__child_poll_fd(const mdc_cli__child *c) { return c->pidfd; }

int mdc_cli__child_poll_ms(const mdc_cli__child *c) { return c->pidfd >= 0 ? -1 : 100; }

void mdc_cli__child_wait_any(mdc_cli__child *const *live, int n) {
  struct pollfd pf[1024];
  int k = 0, ms = 1000;
  double now = mdc_cli__now();
  for (int i = 0; i < n && k < 1024; i++) {
    int fd = mdc_cli__child_poll_fd(live[i]);
    if (fd >= 0) pf[k++] = (struct pollfd){.fd = fd, .events = POLLIN};
    int left = (int)ceil((live[i]->deadline - now) * 1000);
    if (left < ms) ms = left < 0 ? 0 : left;
    int cap = mdc_cli__child_poll_ms(live[i]);
    if (cap >= 0 && cap < ms) ms = cap;
  }
  (void)poll(pf, (nfds_t)k, ms);   /* EINTR: the caller looks at its children again */
}

int mdc_cli__child_step(mdc_cli__child *c, double now) {
  if (!c->reaped) {
    int st;
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
      c->reaped = 1;
      c->status = st;
    }
  }
  if (c->reaped) return 1;
  if (now >= c->deadline) {
    c->timed_out = 1;
    return 1;
  }
  return 0;
}

void mdc_cli__child_wait(mdc_cli__child *c) {
  while (!mdc_cli__child_step(c, mdc_cli__now())) {
    struct pollfd pf = {.fd = mdc_cli__child_poll_fd(c), .events = POLLIN};
    double left = c->deadline - mdc_cli__now();
    int ms = left <= 0 ? 0 : (int)ceil(left * 1000);
    int cap = mdc_cli__child_poll_ms(c);
    if (cap >= 0 && cap < ms) ms = cap;
    poll(&pf, 1, ms);
  }
}

size_t mdc_cli__child_end(mdc_cli__child *c, void *res, size_t len) {
  size_t got = 0;
  if (c->pid > 0) {
    kill(-c->pid, SIGKILL); /* the case and whatever it forked into its group */
    if (!c->reaped) {
      while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {}
      c->reaped = 1;
    }
  }
  if (c->pidfd >= 0) close(c->pidfd);
  c->pidfd = -1;
  if (c->page) {
    c->line = c->page->line;
    memcpy(c->op, (const char *)c->page->op, sizeof c->op);
    c->op[sizeof c->op - 1] = '\0';
    c->stack[0] = '\0';
    if (atomic_load_explicit(&c->page->crash.sig, memory_order_acquire))
      mdc_cli__crash_symbolize(&c->page->crash, c->stack, sizeof c->stack);
    got = atomic_load_explicit(&c->page->result_len, memory_order_acquire);
    if (got > len) got = len;
    if (res) memcpy(res, c->page->result, got);
    munmap(c->page, c->page_len);
    c->page = NULL;
  }
  return got;
}

void mdc_cli__reap_all(void) {
  /* Descendants that escaped their group (setsid) were re-parented to mdc, the subreaper: kill
   * every child still here and reap them, so nothing outlives mdc. */
  pid_t self = getpid();
  DIR *d = opendir("/proc");
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      pid_t pid = (pid_t)atoi(e->d_name);
      if (pid <= 0 || pid == self) continue;
      char path[64], buf[512];
      snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
      FILE *f = fopen(path, "re");
      if (!f) continue;
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = '\0';
      const char *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
      int ppid = 0;
      char state;
      if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self) kill(pid, SIGKILL);
    }
    closedir(d);
  }
  /* Called when no case runs: every child left is one just killed. */
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {}
}
