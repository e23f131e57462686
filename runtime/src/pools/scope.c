/* scope.c - resource scopes: explicit, counted lifetimes for mappings (md/scope.h, SPEC 6).
 *
 * State. A scope's whole lifecycle is one 32-bit atomic word: bit 31 is CLOSING, bits 0..30
 * count users. Acquire is one compare-and-swap that refuses when CLOSING is set, so "closing"
 * and "acquired" can never both be decided from stale reads; release is one compare-and-swap
 * that never goes below zero. The thread whose operation moves the word to "CLOSING, 0 users"
 * frees the scope: md_scope_close (CAS 0 -> CLOSING), md_scope_close_deferred (fetch_or saw 0
 * users) or the last md_scope_release after a deferred close. Exactly one of them can see that
 * transition, so everything is freed exactly once, and nobody reads the scope after it.
 *
 * Decisions where the header and SPEC are silent (for docs/pools-and-scopes.md):
 *   - md_scope_open(MD_SCOPE_GLOBAL) returns one process-wide scope (Panama's globalScope()):
 *     what it owns lives until exit. Acquire/release on it are still counted (diagnostics).
 *   - A confined scope answers every call from another thread with INVALID_ARGUMENT naming
 *     both threads (kernel tids); a release from another thread is reported and ignored.
 *   - Closing a confined scope while its owner holds an acquire fails like a shared one.
 *   - Map/attach on a closing scope fail INVALID_ARGUMENT (it would be freed at once or leak
 *     past its users' expectations). On a shared scope, map/attach must come from a thread that
 *     holds an acquire or that owns the scope's lifetime (nobody can close it concurrently).
 *   - A second close (deferred or not) of a closing scope fails "already closing"; a scope that
 *     was freed is gone, and touching it again is the caller's use-after-free.
 *   - Users are limited to MD__SCOPE_MAX_USERS; one more acquire fails
 *     RESOURCE_EXHAUSTED_TRANSIENT instead of saturating, since an acquire may fail anyway.
 *   - A release without an acquire is a bug in the caller: it is reported in md_scope_error,
 *     counted in md__refcount_underflows (the runtime's bug counter) and ignored.
 *   - md_scope_error is its own thread-local buffer, separate from the driver's last_error,
 *     so a scope misuse reported inside a successful driver call does not overwrite it. */
#include "scope_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mutant.h"
#include "error.h"
#include "refcount.h"

#define CLOSING 0x80000000u
#define USERS   0x7FFFFFFFu

_Static_assert(MD__SCOPE_MAX_USERS == USERS, "the users limit is the count field");

/* One owned resource: an mmap (len > 0) or a release callback. */
typedef struct res {
  void *addr;
  size_t len;
  void (*release)(void *ctx);
  void *ctx;
} res;

struct md_scope {
  _Atomic uint32_t state;  /* CLOSING | users; see the top of the file */
  md_scope_kind kind;
  pthread_t owner;         /* confined: the only thread allowed */
  pid_t owner_tid;         /* for messages (pthread_t is opaque) */
  pthread_mutex_t lock;    /* guards res/n/cap: two holders of a shared scope may map at once */
  res *res;
  size_t n, cap;
};

md__mmap_fn md__scope_mmap = mmap;

static _Thread_local char err_buf[MD__ERROR_MAX];

static md_status fail(md_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static md_status fail(md_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_buf, sizeof err_buf, fmt, ap);
  va_end(ap);
  return st;
}

const char *md_scope_error(void) { return err_buf; }

static md_scope global;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void) {
  global.kind = MD_SCOPE_GLOBAL;
  global.owner = pthread_self();
  global.owner_tid = gettid();
  pthread_mutex_init(&global.lock, NULL);
}

/* INVALID_ARGUMENT unless the calling thread may use s for `op`. The owner fields are written
 * once before the scope is published, so reading them here needs no ordering. */
static md_status check_thread(const md_scope *s, const char *op) {
  if (s->kind != MD_SCOPE_CONFINED || pthread_equal(s->owner, pthread_self())) return MD_NONE;
  return fail(MD_INVALID_ARGUMENT,
              "scope %p: %s from thread %d, but the scope is confined to its owner thread %d",
              (const void *)s, op, (int)gettid(), (int)s->owner_tid);
}

/* Frees s and everything it owns, newest first (a later resource may depend on an earlier one,
 * e.g. a callback that flushes through a mapping). Called exactly once, by the thread that
 * moved the state to CLOSING with no users; nobody else can reach s any more. */
static void scope_free(md_scope *s) {
  for (size_t i = s->n; i-- > 0;) {
    if (s->res[i].len)
      munmap(s->res[i].addr, s->res[i].len);
    else
      s->res[i].release(s->res[i].ctx);
  }
  free(s->res);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

md_status md_scope_open(md_scope_kind kind, md_scope **out) {
  if (!out) return fail(MD_INVALID_ARGUMENT, "md_scope_open: out is NULL");
  if (kind == MD_SCOPE_GLOBAL) {
    pthread_once(&global_once, global_init);
    *out = &global;
    return MD_NONE;
  }
  if (kind != MD_SCOPE_CONFINED && kind != MD_SCOPE_SHARED)
    return fail(MD_INVALID_ARGUMENT, "md_scope_open: unknown scope kind %d", (int)kind);
  md_scope *s = calloc(1, sizeof *s);
  if (!s) return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "md_scope_open: out of memory");
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s);
    return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "md_scope_open: cannot create a mutex");
  }
  s->kind = kind;
  s->owner = pthread_self();
  s->owner_tid = gettid();
  atomic_init(&s->state, 0u);
  *out = s;
  return MD_NONE;
}

/* Appends r to s unless s is closing. The CLOSING test is under the lock so that a map racing
 * a deferred close either lands before the free (and is released by it) or is refused. */
static md_status add(md_scope *s, res r, const char *op) {
  pthread_mutex_lock(&s->lock);
  if (atomic_load_explicit(&s->state, memory_order_relaxed) & CLOSING) {
    pthread_mutex_unlock(&s->lock);
    return fail(MD_INVALID_ARGUMENT, "scope %p: %s on a closed or closing scope", (void *)s, op);
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4;
    res *grown = realloc(s->res, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&s->lock);
      return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "scope %p: %s: out of memory", (void *)s, op);
    }
    s->res = grown;
    s->cap = cap;
  }
  s->res[s->n++] = r;
  pthread_mutex_unlock(&s->lock);
  return MD_NONE;
}

md_status md__scope_map(md_scope *s, int fd, uint64_t offset, uint64_t length, uint32_t prot,
                        void **addr, int *err) {
  *err = 0;
  if (!s || !addr) return fail(MD_INVALID_ARGUMENT, "md_scope_map: scope or addr is NULL");
  md_status st = check_thread(s, "md_scope_map");
  if (st != MD_NONE) return st;
  if (fd < 0) return fail(MD_INVALID_ARGUMENT, "scope %p: map: fd %d is negative", (void *)s, fd);
  if (length == 0) return fail(MD_INVALID_ARGUMENT, "scope %p: map: length 0", (void *)s);
  if (prot == 0 || (prot & ~(uint32_t)(PROT_READ | PROT_WRITE)))
    return fail(MD_INVALID_ARGUMENT, "scope %p: map: prot 0x%x must be a non-empty set of "
                "PROT_READ|PROT_WRITE", (void *)s, prot);
  /* mmap wants a page-aligned file offset: map from the page below and hand back the byte the
   * caller asked for; the scope records the whole mapped range so it unmaps exactly that. */
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t aligned = offset & ~(page - 1), delta = offset - aligned;
  if (aligned > (uint64_t)INT64_MAX || length > (uint64_t)SIZE_MAX - delta)
    return fail(MD_INVALID_ARGUMENT, "scope %p: map: offset %llu + length %llu is out of range",
                (void *)s, (unsigned long long)offset, (unsigned long long)length);
  if (atomic_load_explicit(&s->state, memory_order_relaxed) & CLOSING)
    return fail(MD_INVALID_ARGUMENT, "scope %p: md_scope_map on a closed or closing scope",
                (void *)s);
  size_t len = (size_t)(length + delta);
  void *p = md__scope_mmap(NULL, len, (int)prot, MAP_SHARED, fd, (off_t)aligned);
  if (p == MAP_FAILED) {
    *err = errno;
    return fail(MD_GENERAL_FAILURE, "scope %p: cannot map fd %d (offset %llu, %llu bytes): %s",
                (void *)s, fd, (unsigned long long)offset, (unsigned long long)length,
                strerror(*err));
  }
  st = add(s, (res){.addr = p, .len = len}, "md_scope_map");
  if (st != MD_NONE) {
    munmap(p, len);
    return st;
  }
  *addr = (uint8_t *)p + (MD_MUTANT(map_page_delta_dropped) ? 0 : delta); /* Mutant: the page's start. */
  return MD_NONE;
}

md_status md_scope_map(md_scope *s, int fd, uint64_t offset, uint64_t length, uint32_t prot,
                       void **addr) {
  int err;
  return md__scope_map(s, fd, offset, length, prot, addr, &err);
}

md_status md_scope_attach(md_scope *s, void (*release)(void *ctx), void *ctx) {
  if (!s || !release) return fail(MD_INVALID_ARGUMENT, "md_scope_attach: scope or release is NULL");
  md_status st = check_thread(s, "md_scope_attach");
  if (st != MD_NONE) return st;
  return add(s, (res){.release = release, .ctx = ctx}, "md_scope_attach");
}

md_status md_scope_acquire(md_scope *s) {
  if (!s) return fail(MD_INVALID_ARGUMENT, "md_scope_acquire: scope is NULL");
  md_status st = check_thread(s, "md_scope_acquire");
  if (st != MD_NONE) return st;
  uint32_t old = atomic_load_explicit(&s->state, memory_order_relaxed);
  do {
    if (old & CLOSING)
      return fail(MD_INVALID_ARGUMENT, "scope %p: closed or closing; acquire refused", (void *)s);
    if ((old & USERS) == MD__SCOPE_MAX_USERS)
      return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "scope %p: acquired by %u users, the most a "
                  "scope counts", (void *)s, old & USERS);
    /* acquire order: the caller then reads what the scope owns (the mapping's contents). */
  } while (!atomic_compare_exchange_weak_explicit(&s->state, &old, old + 1, memory_order_acquire,
                                                  memory_order_relaxed));
  return MD_NONE;
}

void md_scope_release(md_scope *s) {
  if (!s) {
    fail(MD_INVALID_ARGUMENT, "md_scope_release: scope is NULL");
    return;
  }
  if (check_thread(s, "md_scope_release") != MD_NONE) return;
  uint32_t old = atomic_load_explicit(&s->state, memory_order_relaxed);
  do {
    if ((old & USERS) == 0) {
      /* Never wrap: a count pushed below zero would make the next close free under a user. */
      atomic_fetch_add_explicit(&md__refcount_underflows, 1, memory_order_relaxed);
      fail(MD_INVALID_ARGUMENT, "scope %p: released without a matching acquire (ignored)",
           (void *)s);
      return;
    }
    /* acq_rel: release publishes this user's writes; acquire lets the thread that frees see
     * every other user's writes and resources before it unmaps them. */
  } while (!atomic_compare_exchange_weak_explicit(&s->state, &old, old - 1, memory_order_acq_rel,
                                                  memory_order_relaxed));
  /* Past the CAS another thread may free s at any moment: only the local `old` is used. */
  if (old - 1 == CLOSING) scope_free(s);
}

md_status md_scope_close(md_scope *s) {
  if (!s) return fail(MD_INVALID_ARGUMENT, "md_scope_close: scope is NULL");
  if (s->kind == MD_SCOPE_GLOBAL)
    return fail(MD_INVALID_ARGUMENT, "scope %p: the global scope is never closed", (void *)s);
  md_status st = check_thread(s, "md_scope_close");
  if (st != MD_NONE) return st;
  uint32_t old = 0;
  if (atomic_compare_exchange_strong_explicit(&s->state, &old, CLOSING, memory_order_acq_rel,
                                              memory_order_relaxed)) {
    scope_free(s);
    return MD_NONE;
  }
  if (old & CLOSING)
    return fail(MD_INVALID_ARGUMENT, "scope %p: already closing (%u users left)", (void *)s,
                old & USERS);
  return fail(MD_INVALID_ARGUMENT, "scope %p: acquired by %u users", (void *)s, old & USERS);
}

md_status md_scope_close_deferred(md_scope *s) {
  if (!s) return fail(MD_INVALID_ARGUMENT, "md_scope_close_deferred: scope is NULL");
  if (s->kind == MD_SCOPE_GLOBAL)
    return fail(MD_INVALID_ARGUMENT, "scope %p: the global scope is never closed", (void *)s);
  md_status st = check_thread(s, "md_scope_close_deferred");
  if (st != MD_NONE) return st;
  uint32_t old = atomic_fetch_or_explicit(&s->state, CLOSING, memory_order_acq_rel);
  if (old & CLOSING)
    return fail(MD_INVALID_ARGUMENT, "scope %p: already closing (%u users left)", (void *)s,
                old & USERS);
  /* With users left, the release that takes the count to zero frees (see md_scope_release). */
  if ((old & USERS) == 0) scope_free(s);
  return MD_NONE;
}

md_status md_scope_check_shareable(const md_scope *s) {
  if (!s) return fail(MD_INVALID_ARGUMENT, "md_scope_check_shareable: scope is NULL");
  if (s->kind != MD_SCOPE_CONFINED) return MD_NONE;
  return fail(MD_INVALID_ARGUMENT,
              "scope %p: confined to its owner thread %d; it cannot be handed to another thread "
              "or an async execution (open it MD_SCOPE_SHARED)", (const void *)s,
              (int)s->owner_tid);
}

/* NULL reads as confined: the most restrictive answer for a caller deciding what to allow. */
md_scope_kind md_scope_get_kind(const md_scope *s) { return s ? s->kind : MD_SCOPE_CONFINED; }

uint32_t md_scope_users(const md_scope *s) {
  if (!s) return 0;
  return atomic_load_explicit(&((md_scope *)s)->state, memory_order_relaxed) & USERS;
}

void md__scope_debug_set_users(md_scope *s, uint32_t users) {
  uint32_t old = atomic_load_explicit(&s->state, memory_order_relaxed);
  atomic_store_explicit(&s->state, (old & CLOSING) | (users & USERS), memory_order_relaxed);
}
