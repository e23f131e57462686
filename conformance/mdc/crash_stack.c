/* crash_stack.c - where a case's child died: its stack, captured in the child and symbolized by
 * the parent (docs/mdc-cli.md, "Crashes").
 *
 * Capture, in the child (mdc_cli__crash_arm, called once by mdc_cli__child_start's child side):
 * handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT run on an alternate signal stack (a
 * stack overflow still reports). The handler records the signal, its code and address, the
 * interrupted instruction (from the ucontext), the return addresses glibc's backtrace() finds,
 * and a copy of /proc/self/maps (open/read: async-signal-safe), all into the shared page of the
 * case that is running; it publishes the signal number last, then dies of the signal with the
 * default action, so the parent still sees "killed by signal N". backtrace() is not on POSIX's
 * async-signal-safe list only because its first call loads libgcc_s (dlopen, malloc): the child
 * calls it once when it arms the handlers, after which it walks the CFI without allocating
 * (glibc's backtrace(3) documents this use). The parent never needs a core file (core_pattern is
 * the machine's, not ours: a container or CI runner often pipes cores away).
 *
 * Symbolization, in the parent (mdc_cli__crash_symbolize): elfutils' libdw (libdwfl, Debian's
 * libdw-dev) reads the copied maps as the child's address space (dwfl_linux_proc_maps_report:
 * each mapped ELF reported at its load bias), names each frame's function and offset from the ELF
 * symbol table and its file:line from DWARF when the object has debug information (or a separate
 * debug file elfutils finds: .gnu_debuglink, /usr/lib/debug). libdw rather than libunwind: the
 * unwinding is already done in the child by glibc (the CFI walk is all libunwind would add), and
 * what is missing is file:line, which libunwind does not read; libdw reads both symbol tables
 * and DWARF line tables, in-process, no addr2line child per frame. Built without libdw
 * (MDC_HAVE_LIBDW unset), each frame is its object and offset, still enough for addr2line. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <execinfo.h>

#ifdef MDC_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

#include "mdc_int.h"

/* ---- the child: capture ------------------------------------------------------------------- */

static mdc_cli__crash *volatile armed;
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

/* Appends the lines of /proc/self/maps that name a file (the objects a PC can be in) to c->maps;
 * open/read/close only. Cut at the end of the last whole line that fits. */
static void copy_maps(mdc_cli__crash *c) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[2048], line[768];
  size_t ll = 0, out = 0;
  int keep = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++) {
      char ch = buf[i];
      if (ll < sizeof line) line[ll++] = ch;
      if (ch == '/' && ll > 1 && line[ll - 2] == ' ') keep = 1; /* a path begins */
      if (ch != '\n') continue;
      if (keep && ll < sizeof line && out + ll < sizeof c->maps) {
        memcpy(c->maps + out, line, ll);
        out += ll;
      }
      ll = 0;
      keep = 0;
    }
  }
  close(fd);
  c->maps_len = (uint32_t)out;
}

static void on_crash(int sig, siginfo_t *si, void *ucv) {
  mdc_cli__crash *c = armed;
  int expected = 0;
  /* The first crash of the case only (a fault inside the handler dies at once: SA_RESETHAND). */
  if (c && atomic_load_explicit(&c->sig, memory_order_relaxed) == expected) {
    void *pcs[MDC_CLI_CRASH_FRAMES];
    int n = backtrace(pcs, MDC_CLI_CRASH_FRAMES);
    for (int i = 0; i < n; i++) c->frames[i] = (uint64_t)(uintptr_t)pcs[i];
    c->n_frames = n > 0 ? (uint32_t)n : 0;
    c->code = si ? si->si_code : 0;
    c->addr = si ? (uint64_t)(uintptr_t)si->si_addr : 0;
    c->pc = 0;
#if defined(__x86_64__)
    if (ucv) c->pc = (uint64_t)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    if (ucv) c->pc = (uint64_t)((ucontext_t *)ucv)->uc_mcontext.pc;
#else
    (void)ucv;
#endif
    copy_maps(c);
    atomic_store_explicit(&c->sig, sig, memory_order_release);
  }
  /* The default action (SA_RESETHAND put it back; SA_NODEFER lets it through now): the parent
   * sees the child killed by sig, as without the handler. */
  raise(sig);
}

void mdc_cli__crash_arm(mdc_cli__crash *area) {
  static int installed;
  armed = area;
  if (installed || !area) return;
  installed = 1;
  /* Loads libgcc_s now, so backtrace() in the handler allocates nothing (backtrace(3)). */
  void *warm[2];
  backtrace(warm, 2);
  size_t ss_len = 64 * 1024;
  void *ss = mmap(NULL, ss_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ss != MAP_FAILED) {
    stack_t st = {.ss_sp = ss, .ss_size = ss_len};
    sigaltstack(&st, NULL);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_crash;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) sigaction(crash_signals[i], &sa, NULL);
}

/* ---- the parent: symbolization ------------------------------------------------------------- */

static const char *base_name(const char *p) {
  const char *s = p ? strrchr(p, '/') : NULL;
  return s ? s + 1 : p ? p : "?";
}

/* The mapping of the copied maps that holds pc: its path and pc's offset in the file. */
static int map_of(const mdc_cli__crash *c, uint64_t pc, char *path, size_t n, uint64_t *file_off) {
  const char *p = c->maps, *end = c->maps + c->maps_len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    unsigned long long lo, hi, off;
    char perms[8];
    int at = 0;
    if (sscanf(p, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off, &at) == 4 && at > 0 && pc >= lo &&
        pc < hi && p + at < eol) {
      snprintf(path, n, "%.*s", (int)(eol - (p + at)), p + at);
      *file_off = pc - lo + off;
      return 0;
    }
    p = eol + 1;
  }
  return -1;
}

/* Appends to *out (a buffer of cap bytes, *len used); drops what does not fit. */
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(out + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  *len += (size_t)k < cap - *len ? (size_t)k : cap - *len - 1;
}

int mdc_cli__crash_symbolize(const mdc_cli__crash *c, char *out, size_t cap) {
  if (!cap) return 0;
  out[0] = 0;
  if (!c || c->n_frames == 0) return 0;
  size_t len = 0;
  char exe[PATH_MAX];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[el > 0 ? el : 0] = 0;
#ifdef MDC_HAVE_LIBDW
  static char *debuginfo_path;
  static const Dwfl_Callbacks cb = {.find_elf = dwfl_linux_proc_find_elf,
                                    .find_debuginfo = dwfl_standard_find_debuginfo,
                                    .debuginfo_path = &debuginfo_path};
  Dwfl *dwfl = dwfl_begin(&cb);
  FILE *mf = dwfl && c->maps_len ? fmemopen((void *)c->maps, c->maps_len, "r") : NULL;
  if (mf) {
    dwfl_report_begin(dwfl);
    dwfl_linux_proc_maps_report(dwfl, mf);
    dwfl_report_end(dwfl, NULL, NULL);
    fclose(mf);
  }
#endif
  uint32_t n = c->n_frames < MDC_CLI_CRASH_FRAMES ? c->n_frames : MDC_CLI_CRASH_FRAMES;
  /* The stack starts at the faulting instruction: the frames above it are the handler's own
   * (on_crash, backtrace, a sanitizer's interceptor of it, the signal trampoline). */
  uint32_t first = 0;
  for (uint32_t i = 0; c->pc && i < n; i++)
    if (c->frames[i] == c->pc) {
      first = i;
      break;
    }
  for (uint32_t i = first; i < n; i++) {
    uint64_t pc = c->frames[i];
    /* A return address points after its call: look up the call itself (pc - 1); the
     * interrupted instruction is exact. */
    uint64_t at = pc == c->pc || pc == 0 ? pc : pc - 1;
    char path[PATH_MAX] = "";
    uint64_t file_off = 0;
    int mapped = map_of(c, pc, path, sizeof path, &file_off) == 0;
    const char *mod = mapped ? (exe[0] && !strcmp(path, exe) ? base_name(exe) : base_name(path)) : "?";
    size_t before = len;
    put(out, cap, &len, "#%u 0x%016llx ", i - first, (unsigned long long)pc);
    int named = 0;
#ifdef MDC_HAVE_LIBDW
    Dwfl_Module *m = dwfl ? dwfl_addrmodule(dwfl, at) : NULL;
    if (m) {
      GElf_Off off = 0;
      GElf_Sym sym;
      const char *fn = dwfl_module_addrinfo(m, at, &off, &sym, NULL, NULL, NULL);
      if (fn) {
        put(out, cap, &len, "%s+0x%llx (%s)", fn, (unsigned long long)(off + (at != pc)), mod);
        named = 1;
      }
      Dwfl_Line *l = dwfl_module_getsrc(m, at);
      int line = 0;
      const char *src = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
      if (!named) put(out, cap, &len, "?? (%s+0x%llx)", mod, (unsigned long long)file_off), named = 1;
      if (src && line > 0) put(out, cap, &len, " %s:%d", src, line);
    }
#endif
    if (!named) put(out, cap, &len, "?? (%s+0x%llx)", mod, (unsigned long long)file_off);
    put(out, cap, &len, "\n");
    if (len >= cap - 1) { /* cut at the last whole frame */
      len = before;
      out[len] = 0;
      put(out, cap, &len, "... %u more frames\n", n - i);
      break;
    }
  }
#ifdef MDC_HAVE_LIBDW
  if (dwfl) dwfl_end(dwfl);
#endif
  if (len && out[len - 1] == '\n') out[--len] = 0;
  return (int)len;
}

/* ---- frames for a signature ----------------------------------------------------------------- */

/* Whether a frame's object is the harness's own (mdc, the C library, the loader, the unwinder),
 * not the driver's. */
static int harness_object(const char *mod, const char *exe_base) {
  static const char *const libs[] = {"libc.so", "libc-",   "ld-linux", "ld64.so", "libgcc_s", "libpthread",
                                     "libasan", "libubsan", "libtsan",  NULL};
  if (exe_base[0] && !strcmp(mod, exe_base)) return 1;
  for (int i = 0; libs[i]; i++)
    if (!strncmp(mod, libs[i], strlen(libs[i]))) return 1;
  return 0;
}

int mdc_cli__stack_top(const char *stack, int max_frames, char *out, size_t n, char *where, size_t wn) {
  if (n) out[0] = 0;
  if (wn) where[0] = 0;
  if (!stack || !stack[0] || !n) return 0;
  char exe[PATH_MAX];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[el > 0 ? el : 0] = 0;
  const char *exe_base = base_name(exe);
  int got = 0, in_driver = 0;
  size_t len = 0;
  for (const char *p = stack; p && *p && got < max_frames;) {
    const char *eol = strchr(p, '\n');
    size_t ll = eol ? (size_t)(eol - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(ll < sizeof line ? ll : sizeof line - 1), p);
    p = eol ? eol + 1 : NULL;
    /* "#N 0xPC FUNC+0xOFF (MODULE) [FILE:LINE]" or "#N 0xPC ?? (MODULE+0xOFF)" */
    char fn[256], mod[256], src[512] = "";
    if (sscanf(line, "#%*u %*s %255s (%255[^)]) %511s", fn, mod, src) < 2) continue;
    char *plus = strstr(fn, "+0x");
    if (plus) *plus = 0;
    char *mplus = strstr(mod, "+0x");
    char modname[256];
    snprintf(modname, sizeof modname, "%.*s", mplus ? (int)(mplus - mod) : (int)strlen(mod), mod);
    int harness = harness_object(modname, exe_base) || !strcmp(fn, "__restore_rt");
    if (harness) {
      if (in_driver) break; /* back in mdc: the driver's part of the stack is over */
      continue;
    }
    in_driver = 1;
    /* An unnamed frame: its object and offset (stable for one build of the driver). */
    const char *name = strcmp(fn, "??") ? fn : mod;
    put(out, n, &len, "%s%s", got ? " < " : "", name);
    if (!got && wn && src[0]) snprintf(where, wn, "%s", base_name(src));
    if (!got && wn && !src[0]) snprintf(where, wn, "%s", modname);
    got++;
  }
  return got;
}
