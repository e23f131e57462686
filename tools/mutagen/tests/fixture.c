/* fixture.c - the mutant generator's test input (tools/mutagen/tests/test_mutagen.c): every
 * operator once or more, each mutant observable in what main prints, plus what must not be
 * mutated (a macro's body, a case label, a static array's size, a null pointer constant). */
#include <stdio.h>

typedef enum md_status { MD_NONE = 0, MD_GENERAL_FAILURE = 2, MD_INVALID_ARGUMENT = 4 } md_status;

#define TWICE(x) ((x) + (x))

static int below(int a, int b) { return a < b; }
static int same(int a, int b) { return a == b; }
static int both(int a, int b) { return a && b; }
static int add(int a, int b) { return a + b; }
static int scale(int a, int b) { return a * b; }
static int plus_ten(int a) { return a + 10; }
static int twice(int a) { return TWICE(a); }

static md_status check(int a) {
  if (a < 0) return MD_INVALID_ARGUMENT;
  return MD_NONE;
}

static md_status checked_call(int a) {
  md_status st = check(a);
  return st;
}

static int counter;
static void bump(void) { counter++; }

static int count_to(int n) {
  counter = 0;
  /* signed char: the negated condition ends within 256 steps instead of 2^31 */
  for (signed char i = 0; i < n; i++) bump();
  return counter;
}

static int label(int a) {
  static const int table[3] = {5, 6, 7};
  const char *name = a > 0 ? "x" : 0;
  switch (a) {
    case 2:
      return table[2];
    default: break;
  }
  return name ? 1 : table[0];
}

int main(void) {
  for (int a = -1; a <= 3; a++) {
    for (int b = -1; b <= 3; b++)
      printf("%d %d: %d %d %d %d %d\n", a, b, below(a, b), same(a, b), both(a, b), add(a, b), scale(a, b));
    printf("%d: %d %d %d %d %d %d\n", a, plus_ten(a), twice(a), (int)check(a), (int)checked_call(a), count_to(a),
           label(a));
  }
  return 0;
}
