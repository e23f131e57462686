/* criterion/criterion.h (tsan_runner) - the subset of Criterion 2.4's API the concurrency tests
 * use, for builds under ThreadSanitizer.
 *
 * Why: Criterion 2.4.1's sandbox (boxfort) cannot start under TSan on these machines (its
 * arena collides with TSan's shadow ranges: "Could not initialize inheritable arena", or a
 * crash in libcriterion; upstream Snaipe/Criterion#274). The TSan build compiles the same
 * test files against this header and runner.c instead: each test runs in its own forked
 * child, so a failed assertion, a crash or a TSan report fails that test only.
 *
 * Supported: Test(suite, name, .init, .fini, .timeout, .disabled), TestSuite(suite, .init,
 * .fini), cr_assert / cr_expect with _eq _neq _lt _leq _gt _geq _null _not_null _not
 * _str_eq _str_neq, each with an optional printf-style message. */
#ifndef MDTR_CRITERION_H
#define MDTR_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* An assertion without a message passes "" as its format. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

typedef struct mdtr_opts {
  int unused_;
  void (*init)(void);
  void (*fini)(void);
  double timeout;
  bool disabled;
} mdtr_opts;

void mdtr_register_test(const char *suite, const char *name, void (*fn)(void), const mdtr_opts *opts);
void mdtr_register_suite(const char *suite, const mdtr_opts *opts);
/* Reports a failed check; fatal ones end the test (the child process). */
void mdtr_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define MDTR_CAT_(a, b) a##b
#define MDTR_CAT(a, b) MDTR_CAT_(a, b)

#define Test(suite, name, ...)                                                              \
  static void suite##_##name##_fn(void);                                                    \
  static const mdtr_opts suite##_##name##_opts = {0, __VA_ARGS__};                          \
  __attribute__((constructor)) static void suite##_##name##_reg(void) {                     \
    mdtr_register_test(#suite, #name, suite##_##name##_fn, &suite##_##name##_opts);         \
  }                                                                                         \
  static void suite##_##name##_fn(void)

#define TestSuite(suite, ...)                                                               \
  static const mdtr_opts suite##_suite_opts = {0, __VA_ARGS__};                             \
  __attribute__((constructor)) static void suite##_suite_reg(void) {                        \
    mdtr_register_suite(#suite, &suite##_suite_opts);                                       \
  }

#define MDTR_CHECK(fatal, cond, expr, ...)                                                  \
  do {                                                                                      \
    if (!(cond)) mdtr_fail(fatal, __FILE__, __LINE__, expr, "" __VA_ARGS__);                \
  } while (0)

#define cr_assert(c, ...) MDTR_CHECK(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) MDTR_CHECK(0, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) MDTR_CHECK(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) MDTR_CHECK(0, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) MDTR_CHECK(1, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) MDTR_CHECK(0, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) MDTR_CHECK(1, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) MDTR_CHECK(0, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) MDTR_CHECK(1, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) MDTR_CHECK(0, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) MDTR_CHECK(1, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) MDTR_CHECK(0, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) MDTR_CHECK(1, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) MDTR_CHECK(0, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) MDTR_CHECK(1, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) MDTR_CHECK(0, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) MDTR_CHECK(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) MDTR_CHECK(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) MDTR_CHECK(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) MDTR_CHECK(0, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) MDTR_CHECK(1, strcmp((a), (b)) == 0, #a " streq " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) MDTR_CHECK(0, strcmp((a), (b)) == 0, #a " streq " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) MDTR_CHECK(1, strcmp((a), (b)) != 0, #a " strneq " #b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) MDTR_CHECK(0, strcmp((a), (b)) != 0, #a " strneq " #b, __VA_ARGS__)
#define cr_assert_fail(...) mdtr_fail(1, __FILE__, __LINE__, "fail", "" __VA_ARGS__)

#endif
