/* mutagen.h - private to md_mutagen (tools/mutagen/): generated mutants of one C file, parsed
 * with libclang, and the file's mutant schemata (every mutant compiled in, the one named by the
 * environment variable MD_MUTAGEN runs). docs/mutate.md describes the operators and the ids. */
#ifndef MDM_MUTAGEN_H
#define MDM_MUTAGEN_H

#include <stddef.h>
#include <stdio.h>

/* One generated mutant. Its id is stable across edits elsewhere: "<file>:<function>:<op>:<n>",
 * n counting the sites of that operator within the function, in source order. */
typedef struct mdm_mutant {
  char id[320];
  char function[128];
  char op[24];
  unsigned line;
  int index;            /* 1-based: the value of MDM() that selects it in the schemata */
  int skipped;          /* not compiled in (its schemata text would be too large) */
  char *before, *after; /* the source line, and the line as the mutant changes it */
} mdm_mutant;

typedef struct mdm_file {
  char *rel;            /* the file's name in ids (relative to the root) */
  mdm_mutant *v;
  size_t n, cap;
  char *schemata;       /* the file rewritten with every mutant (NULL when it has none) */
  size_t schemata_len;
} mdm_file;

typedef struct mdm_opts {
  const char *status_type;   /* the status enum's typedef name ("md_status") */
  const char *success;       /* its success constant ("MD_NONE") */
  const char *failure;       /* the error a success is swapped for when the function returns no other */
  const char *ops;           /* comma-separated operators to generate (NULL: all) */
} mdm_opts;

/* The operators, in the order they are listed (docs/mutate.md). */
#define MDM_OPS(X)                                                                                \
  X(rel, "relational <,<=,>,>= moved across the boundary")                                        \
  X(eq, "== and != swapped")                                                                      \
  X(logic, "&& and || swapped")                                                                   \
  X(cond_negate, "a condition negated (if, while, for, do, ?:)")                                  \
  X(check_del, "a guard removed: an if whose branch leaves (return, goto, break) never taken")     \
  X(arith, "+ and - swapped (also += and -=), on numbers")                                        \
  X(mul_lhs1, "a * b becomes 1 * b")                                                              \
  X(mul_rhs1, "a * b becomes a * 1")                                                              \
  X(const_inc, "an integer constant plus one")                                                    \
  X(const_dec, "an integer constant minus one")                                                   \
  X(status_swap, "a returned status swapped: an error for success, success for the error it guards") \
  X(call_ok, "a call whose status is used replaced by success")                                   \
  X(call_del, "a call statement removed (a release, a check, a store)")

/* Parses path (compiled with args, the compiler's flags without the file) and fills *out with its
 * mutants and schemata. rel names the file in ids. 0, or -1 with a message in err. */
int mdm_generate(const char *path, const char *rel, const char *const *args, int nargs,
                 const mdm_opts *o, mdm_file *out, char *err, size_t errlen);
void mdm_file_free(mdm_file *f);
/* The list, one mutant a line: id, index, file, function, line, op, skipped, before, after
 * (tab-separated; tabs and newlines in the lines written as spaces). */
void mdm_write_list(FILE *f, const mdm_file *m);
/* Whether op is an operator name of MDM_OPS. */
int mdm_op_known(const char *op);

#endif
