/* test_scope.c - resource scopes (md/scope.h, SPEC 6): kinds, acquire/close rules, owned
 * resources, misuse reporting. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md/scope.h"
#include "refcount.h"
#include "scope_int.h"

/* ---- helpers ---- */

static void count_cb(void *ctx) { (*(int *)ctx)++; }

typedef struct order { int seen[8]; int n; } order;
typedef struct order_arg { order *o; int id; } order_arg;
static void order_cb(void *ctx) {
  order_arg *a = ctx;
  a->o->seen[a->o->n++] = a->id;
}

/* A memfd of n bytes with byte i = (i * 7 + 3) & 0xff. */
static int pattern_fd(size_t n) {
  int fd = memfd_create("scope-test", MFD_CLOEXEC);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, (off_t)n), 0);
  uint8_t buf[4096];
  for (size_t at = 0; at < n; at += sizeof buf) {
    size_t k = n - at < sizeof buf ? n - at : sizeof buf;
    for (size_t i = 0; i < k; i++) buf[i] = (uint8_t)(((at + i) * 7 + 3) & 0xff);
    cr_assert_eq(pwrite(fd, buf, k, (off_t)at), (ssize_t)k);
  }
  return fd;
}

static uint8_t pattern(size_t i) { return (uint8_t)((i * 7 + 3) & 0xff); }

/* Runs fn(s) on a new thread; returns its status and copies that thread's md_scope_error. */
typedef struct other { md_scope *s; md_status (*fn)(md_scope *); md_status st; char msg[512]; } other;
static void *other_main(void *p) {
  other *o = p;
  o->st = o->fn(o->s);
  snprintf(o->msg, sizeof o->msg, "%s", md_scope_error());
  return NULL;
}
static void on_other_thread(other *o) {
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, other_main, o), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
}
static md_status do_acquire(md_scope *s) { return md_scope_acquire(s); }
static md_status do_close(md_scope *s) { return md_scope_close(s); }
static md_status do_close_deferred(md_scope *s) { return md_scope_close_deferred(s); }
static md_status do_release(md_scope *s) { md_scope_release(s); return MD_NONE; }
static md_status do_attach(md_scope *s) { return md_scope_attach(s, count_cb, NULL); }
static md_status do_check_shareable(md_scope *s) { return md_scope_check_shareable(s); }

/* True when no page of [addr, addr+len) is mapped (msync fails ENOMEM on unmapped ranges). */
static int unmapped(void *addr, size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(page - 1);
  for (uintptr_t p = a; p < (uintptr_t)addr + len; p += (uintptr_t)page)
    if (msync((void *)p, (size_t)page, MS_ASYNC) == 0 || errno != ENOMEM) return 0;
  return 1;
}

/* ---- kinds ---- */

Test(scope, open_reports_its_kind_and_starts_unacquired) {
  md_scope *c, *s, *g;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &c), MD_NONE);
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &g), MD_NONE);
  cr_expect_eq(md_scope_get_kind(c), MD_SCOPE_CONFINED);
  cr_expect_eq(md_scope_get_kind(s), MD_SCOPE_SHARED);
  cr_expect_eq(md_scope_get_kind(g), MD_SCOPE_GLOBAL);
  cr_expect_eq(md_scope_users(c), 0);
  cr_expect_eq(md_scope_users(s), 0);
  cr_assert_eq(md_scope_close(c), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

Test(scope, open_with_unknown_kind_is_refused) {
  md_scope *s = NULL;
  cr_assert_eq(md_scope_open((md_scope_kind)7, &s), MD_INVALID_ARGUMENT);
  cr_expect_null(s);
  cr_expect(strstr(md_scope_error(), "unknown scope kind 7"), "%s", md_scope_error());
}

Test(scope, global_scope_is_one_process_wide_scope) {
  md_scope *a, *b;
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &a), MD_NONE);
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &b), MD_NONE);
  cr_expect_eq(a, b);
}

Test(scope, global_scope_close_is_refused) {
  md_scope *g;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &g), MD_NONE);
  cr_assert_eq(md_scope_attach(g, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_close(g), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "global scope is never closed"), "%s", md_scope_error());
  cr_assert_eq(md_scope_close_deferred(g), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "global scope is never closed"), "%s", md_scope_error());
  /* Acquire and release still work and never free it. */
  cr_assert_eq(md_scope_acquire(g), MD_NONE);
  md_scope_release(g);
  cr_expect_eq(runs, 0);
}

/* ---- confinement ---- */

Test(scope, confined_scope_refuses_acquire_from_another_thread) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &s), MD_NONE);
  other o = {.s = s, .fn = do_acquire};
  on_other_thread(&o);
  cr_expect_eq(o.st, MD_INVALID_ARGUMENT);
  cr_expect(strstr(o.msg, "md_scope_acquire from thread"), "%s", o.msg);
  cr_expect(strstr(o.msg, "confined to its owner thread"), "%s", o.msg);
  cr_expect_eq(md_scope_users(s), 0);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

Test(scope, confined_scope_refuses_close_attach_from_another_thread) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &s), MD_NONE);
  md_status (*fns[])(md_scope *) = {do_close, do_close_deferred, do_attach};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    other o = {.s = s, .fn = fns[i]};
    on_other_thread(&o);
    cr_expect_eq(o.st, MD_INVALID_ARGUMENT, "call %zu", i);
    cr_expect(strstr(o.msg, "confined to its owner thread"), "call %zu: %s", i, o.msg);
  }
  cr_assert_eq(md_scope_close(s), MD_NONE);   /* still open: nothing above closed it */
}

Test(scope, confined_scope_release_from_another_thread_is_reported_and_ignored) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  other o = {.s = s, .fn = do_release};
  on_other_thread(&o);
  cr_expect(strstr(o.msg, "md_scope_release from thread"), "%s", o.msg);
  cr_expect_eq(md_scope_users(s), 1);
  md_scope_release(s);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

Test(scope, confined_scope_is_not_shareable) {
  md_scope *c, *s, *g;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &c), MD_NONE);
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &g), MD_NONE);
  cr_assert_eq(md_scope_check_shareable(c), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "cannot be handed to another thread or an async execution"),
            "%s", md_scope_error());
  cr_expect_eq(md_scope_check_shareable(s), MD_NONE);
  cr_expect_eq(md_scope_check_shareable(g), MD_NONE);
  cr_assert_eq(md_scope_close(c), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

Test(scope, shared_scope_is_usable_from_another_thread) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  other o = {.s = s, .fn = do_acquire};
  on_other_thread(&o);
  cr_assert_eq(o.st, MD_NONE, "%s", o.msg);
  other r = {.s = s, .fn = do_release};
  on_other_thread(&r);
  cr_expect_eq(md_scope_users(s), 0);
  other chk = {.s = s, .fn = do_check_shareable};
  on_other_thread(&chk);
  cr_expect_eq(chk.st, MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

/* ---- close rules ---- */

Test(scope, close_while_acquired_fails_and_frees_nothing) {
  md_scope *s;
  int runs = 0;
  int fd = pattern_fd(4096);
  void *p;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_map(s, fd, 0, 4096, PROT_READ, &p), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "acquired by 2 users"), "%s", md_scope_error());
  cr_expect(strncmp(md_scope_error(), "scope 0x", 8) == 0, "%s", md_scope_error());
  cr_expect_eq(runs, 0);
  cr_expect_eq(md_scope_users(s), 2);
  cr_expect_eq(((uint8_t *)p)[100], pattern(100));   /* still mapped */
  md_scope_release(s);
  md_scope_release(s);
  cr_assert_eq(md_scope_close(s), MD_NONE);
  cr_expect_eq(runs, 1);
  close(fd);
}

Test(scope, close_deferred_frees_on_last_release) {
  md_scope *s;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_expect_eq(runs, 0);
  md_scope_release(s);
  cr_expect_eq(runs, 0);
  md_scope_release(s);
  cr_expect_eq(runs, 1);
}

Test(scope, close_deferred_without_users_frees_at_once) {
  md_scope *s;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_expect_eq(runs, 1);
}

Test(scope, confined_close_deferred_frees_on_owner_last_release) {
  md_scope *s;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &s), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "acquired by 1 users"), "%s", md_scope_error());
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_expect_eq(runs, 0);
  md_scope_release(s);
  cr_expect_eq(runs, 1);
}

Test(scope, acquire_after_close_deferred_is_refused) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "closed or closing; acquire refused"), "%s", md_scope_error());
  cr_expect_eq(md_scope_users(s), 1);
  md_scope_release(s);
}

Test(scope, attach_and_map_after_close_deferred_are_refused) {
  md_scope *s;
  int runs = 0, fd = pattern_fd(4096);
  void *p;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_expect_eq(md_scope_attach(s, count_cb, &runs), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "closed or closing"), "%s", md_scope_error());
  cr_expect_eq(md_scope_map(s, fd, 0, 4096, PROT_READ, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "closed or closing"), "%s", md_scope_error());
  md_scope_release(s);
  cr_expect_eq(runs, 1);   /* only the callback attached before closing */
  close(fd);
}

Test(scope, second_close_of_a_closing_scope_is_refused) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_acquire(s), MD_NONE);
  cr_assert_eq(md_scope_close_deferred(s), MD_NONE);
  cr_expect_eq(md_scope_close_deferred(s), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "already closing (1 users left)"), "%s", md_scope_error());
  cr_expect_eq(md_scope_close(s), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "already closing"), "%s", md_scope_error());
  md_scope_release(s);
}

/* ---- counting ---- */

Test(scope, release_without_acquire_is_reported_counted_and_never_wraps) {
  md_scope *s;
  int runs = 0;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_attach(s, count_cb, &runs), MD_NONE);
  uint64_t before = atomic_load(&md__refcount_underflows);
  md_scope_release(s);
  cr_expect_eq(atomic_load(&md__refcount_underflows), before + 1);
  cr_expect(strstr(md_scope_error(), "released without a matching acquire"), "%s", md_scope_error());
  cr_expect_eq(md_scope_users(s), 0);
  /* The count did not wrap: the scope still closes at once and frees once. */
  cr_assert_eq(md_scope_close(s), MD_NONE);
  cr_expect_eq(runs, 1);
}

Test(scope, acquire_beyond_max_users_is_refused_not_wrapped) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  md__scope_debug_set_users(s, MD__SCOPE_MAX_USERS);
  cr_assert_eq(md_scope_acquire(s), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_expect(strstr(md_scope_error(), "the most a scope counts"), "%s", md_scope_error());
  cr_expect_eq(md_scope_users(s), MD__SCOPE_MAX_USERS);
  md__scope_debug_set_users(s, 0);
  cr_assert_eq(md_scope_close(s), MD_NONE);
}

/* ---- owned resources ---- */

Test(scope, resources_are_released_once_in_reverse_order) {
  md_scope *s;
  order o = {0};
  order_arg a[3] = {{&o, 1}, {&o, 2}, {&o, 3}};
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  for (int i = 0; i < 3; i++) cr_assert_eq(md_scope_attach(s, order_cb, &a[i]), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_NONE);
  cr_assert_eq(o.n, 3);
  cr_expect_eq(o.seen[0], 3);
  cr_expect_eq(o.seen[1], 2);
  cr_expect_eq(o.seen[2], 1);
}

Test(scope, map_with_unaligned_offset_points_at_that_byte) {
  long page = sysconf(_SC_PAGESIZE);
  size_t n = (size_t)page * 3;
  int fd = pattern_fd(n);
  md_scope *s;
  void *p;
  uint64_t off = (uint64_t)page + 123;
  cr_assert_eq(md_scope_open(MD_SCOPE_CONFINED, &s), MD_NONE);
  cr_assert_eq(md_scope_map(s, fd, off, 1000, PROT_READ, &p), MD_NONE);
  for (size_t i = 0; i < 1000; i++)
    cr_assert_eq(((uint8_t *)p)[i], pattern(off + i), "byte %zu", i);
  cr_assert_eq(md_scope_close(s), MD_NONE);
  close(fd);
}

Test(scope, map_is_shared_with_the_file_and_unmapped_exactly_at_free) {
  long page = sysconf(_SC_PAGESIZE);
  int fd = pattern_fd((size_t)page * 2);
  md_scope *s;
  void *p;
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_assert_eq(md_scope_map(s, fd, 10, (uint64_t)page, PROT_READ | PROT_WRITE, &p), MD_NONE);
  memset(p, 0xAB, 16);
  uint8_t back[16];
  cr_assert_eq(pread(fd, back, sizeof back, 10), (ssize_t)sizeof back);
  for (int i = 0; i < 16; i++) cr_expect_eq(back[i], 0xAB);
  cr_expect(!unmapped(p, (size_t)page));
  cr_assert_eq(md_scope_close(s), MD_NONE);
  /* From the page below offset 10 to the end of its last byte: all gone. */
  cr_expect(unmapped((uint8_t *)p - 10, (size_t)page + 10));
  close(fd);
}

Test(scope, map_rejects_bad_arguments) {
  md_scope *s;
  void *p;
  int fd = pattern_fd(4096);
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_expect_eq(md_scope_map(s, -1, 0, 16, PROT_READ, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "fd -1 is negative"), "%s", md_scope_error());
  cr_expect_eq(md_scope_map(s, fd, 0, 0, PROT_READ, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "length 0"), "%s", md_scope_error());
  cr_expect_eq(md_scope_map(s, fd, 0, 16, 0, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "prot 0x0"), "%s", md_scope_error());
  cr_expect_eq(md_scope_map(s, fd, 0, 16, PROT_READ | PROT_EXEC, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "prot 0x5"), "%s", md_scope_error());
  cr_expect_eq(md_scope_map(s, fd, UINT64_MAX - 4, 16, PROT_READ, &p), MD_INVALID_ARGUMENT);
  cr_expect(strstr(md_scope_error(), "out of range"), "%s", md_scope_error());
  cr_assert_eq(md_scope_close(s), MD_NONE);
  close(fd);
}

Test(scope, map_failure_names_errno) {
  md_scope *s;
  void *p;
  int fd = pattern_fd(4096);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int ro = open(path, O_RDONLY);   /* the same memfd, read-only: PROT_WRITE gets EACCES */
  cr_assert(ro >= 0);
  cr_assert_eq(md_scope_open(MD_SCOPE_SHARED, &s), MD_NONE);
  cr_expect_eq(md_scope_map(s, ro, 0, 16, PROT_READ | PROT_WRITE, &p), MD_GENERAL_FAILURE);
  cr_expect(strstr(md_scope_error(), strerror(EACCES)), "%s", md_scope_error());
  cr_expect(strstr(md_scope_error(), "cannot map fd"), "%s", md_scope_error());
  cr_assert_eq(md_scope_close(s), MD_NONE);
  close(ro);
  close(fd);
}

/* ---- error buffer ---- */

static void *read_error(void *out) {
  const char *e = md_scope_error();
  *(int *)out = e != NULL && e[0] == '\0';
  return NULL;
}

Test(scope, error_is_per_thread_and_never_null) {
  md_scope *s;
  cr_assert_eq(md_scope_open(MD_SCOPE_GLOBAL, &s), MD_NONE);
  cr_assert_eq(md_scope_close(s), MD_INVALID_ARGUMENT);
  cr_assert(md_scope_error()[0] != '\0');
  int empty = 0;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, read_error, &empty), 0);
  pthread_join(t, NULL);
  cr_expect(empty, "a fresh thread sees an empty, non-NULL message");
}
