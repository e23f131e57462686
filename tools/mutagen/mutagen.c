/* mutagen.c - the mutants of one C file, found in its libclang AST (not in text patterns), and
 * its schemata: the file rewritten so that every mutant is compiled in and MDM__(k) picks one at
 * run time. A site is an AST node whose text in the file is exactly what the node says (an
 * operator between its operands, a literal, a call): nodes written by a macro's body are never
 * mutated, a macro's arguments are. Sites nest as the AST does; the text of a site is rebuilt
 * from its children's rewritten text, so nested mutants stay independent. */
#include <clang-c/Index.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutagen.h"

enum {
#define X(n, d) OP_##n,
  MDM_OPS(X)
#undef X
  OP_COUNT
};
static const char *const op_names[] = {
#define X(n, d) #n,
    MDM_OPS(X)
#undef X
};

int mdm_op_known(const char *op) {
  for (int i = 0; i < OP_COUNT; i++)
    if (!strcmp(op, op_names[i])) return 1;
  return 0;
}

/* A binary site's text may be duplicated (one copy per branch); above this the mutant is listed
 * as skipped instead of growing the file without bound. */
#define MAX_DUP 4000

typedef struct site {
  unsigned s, e;              /* the node's bytes in the file */
  unsigned l0, l1, r0, r1;    /* binary: the operands */
  int op, prio;               /* prio: for equal ranges, the lower wraps the higher */
  int m1, m2;                 /* mutants (indexes into the file's list), -1: none */
  char newop[4];              /* binary: the operator of the mutant */
  char alt[96];               /* status_swap: the replacement constant */
  int parent;
} site;

typedef struct gen {
  const mdm_opts *o;
  mdm_file *f;
  CXFile file;
  const char *src;
  size_t len;
  site *sites;
  size_t n_sites, cap_sites;
  /* the function being walked */
  char fn[128];
  unsigned ordinal[OP_COUNT];
  char guard[96];             /* the first error status the function returns */
  int ops_on[OP_COUNT];
} gen;

/* ---- small helpers --------------------------------------------------------------------------- */

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) abort();
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

typedef struct kids {
  CXCursor *v;
  unsigned n, cap;
} kids;

static enum CXChildVisitResult collect(CXCursor c, CXCursor parent, CXClientData d) {
  (void)parent;
  kids *k = d;
  if (k->n == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 8;
    k->v = realloc(k->v, k->cap * sizeof *k->v);
    if (!k->v) abort();
  }
  k->v[k->n++] = c;
  return CXChildVisit_Continue;
}

static kids children(CXCursor c) {
  kids k = {0};
  clang_visitChildren(c, collect, &k);
  return k;
}

/* The cursor's bytes in the main file: 0 and [*s, *e), or -1 when either end lies elsewhere. */
static int extent(const gen *g, CXCursor c, unsigned *s, unsigned *e) {
  CXSourceRange r = clang_getCursorExtent(c);
  CXFile f1, f2;
  unsigned a, b;
  clang_getFileLocation(clang_getRangeStart(r), &f1, NULL, NULL, &a);
  clang_getFileLocation(clang_getRangeEnd(r), &f2, NULL, NULL, &b);
  if (!f1 || !f2 || !clang_File_isEqual(f1, g->file) || !clang_File_isEqual(f2, g->file)) return -1;
  if (a >= b || b > g->len) return -1;
  *s = a;
  *e = b;
  return 0;
}

/* Parentheses, brackets and braces balance in [s, e) (outside string and character literals),
 * so the text is one piece that can be wrapped. */
static int balanced(const gen *g, unsigned s, unsigned e) {
  int depth = 0;
  for (unsigned i = s; i < e; i++) {
    char c = g->src[i];
    if (c == '"' || c == '\'') {
      for (i++; i < e && g->src[i] != c; i++)
        if (g->src[i] == '\\') i++;
      if (i >= e) return 0;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') depth++;
    if (c == ')' || c == ']' || c == '}')
      if (--depth < 0) return 0;
  }
  return depth == 0;
}

/* [s, e) with surrounding white space removed equals word. */
static int text_is(const gen *g, unsigned s, unsigned e, const char *word) {
  while (s < e && isspace((unsigned char)g->src[s])) s++;
  while (e > s && isspace((unsigned char)g->src[e - 1])) e--;
  size_t n = strlen(word);
  return e - s == n && memcmp(g->src + s, word, n) == 0;
}

static unsigned line_of(const gen *g, unsigned off) {
  unsigned line = 1;
  for (unsigned i = 0; i < off && i < g->len; i++) line += g->src[i] == '\n';
  return line;
}

static int is_pointerish(CXType t) {
  t = clang_getCanonicalType(t);
  return t.kind == CXType_Pointer || t.kind == CXType_ConstantArray || t.kind == CXType_IncompleteArray ||
         t.kind == CXType_VariableArray || t.kind == CXType_DependentSizedArray || t.kind == CXType_BlockPointer;
}

/* ---- mutants and sites ------------------------------------------------------------------------ */

/* A new mutant of operator op at offset off: its stable id and the line before and after (the
 * site's text [s, e) replaced by after). Returns its index. */
static int add_mutant(gen *g, int op, unsigned s, unsigned e, const char *after) {
  mdm_file *f = g->f;
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 64;
    f->v = realloc(f->v, f->cap * sizeof *f->v);
    if (!f->v) abort();
  }
  mdm_mutant *m = &f->v[f->n];
  memset(m, 0, sizeof *m);
  snprintf(m->function, sizeof m->function, "%s", g->fn);
  snprintf(m->op, sizeof m->op, "%s", op_names[op]);
  snprintf(m->id, sizeof m->id, "%s:%s:%s:%u", f->rel, g->fn, op_names[op], ++g->ordinal[op]);
  m->line = line_of(g, s);
  m->index = (int)f->n + 1;
  unsigned ls = s, le = e;
  while (ls > 0 && g->src[ls - 1] != '\n') ls--;
  while (le < g->len && g->src[le] != '\n') le++;
  m->before = xstrndup(g->src + ls, le - ls);
  size_t n = (s - ls) + strlen(after) + (le - e);
  m->after = malloc(n + 1);
  if (!m->after) abort();
  snprintf(m->after, n + 1, "%.*s%s%.*s", (int)(s - ls), g->src + ls, after, (int)(le - e), g->src + e);
  return (int)f->n++;
}

/* A new site, or NULL when the same node was seen already (a macro argument used twice). */
static site *add_site(gen *g, int op, unsigned s, unsigned e, int prio) {
  for (size_t i = g->n_sites; i-- > 0;)
    if (g->sites[i].s == s && g->sites[i].e == e && g->sites[i].op == op) return NULL;
  if (g->n_sites == g->cap_sites) {
    g->cap_sites = g->cap_sites ? 2 * g->cap_sites : 64;
    g->sites = realloc(g->sites, g->cap_sites * sizeof *g->sites);
    if (!g->sites) abort();
  }
  site *t = &g->sites[g->n_sites++];
  memset(t, 0, sizeof *t);
  t->s = s;
  t->e = e;
  t->op = op;
  t->prio = prio;
  t->m1 = t->m2 = -1;
  t->parent = -1;
  return t;
}

/* Priorities for sites with the same range: the outer first. */
enum { P_CHECK = 0, P_COND = 1, P_CALL = 2, P_STATUS = 3, P_BIN = 4, P_CONST = 5 };

static void fmt_expr(char *out, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, n, fmt, ap);
  va_end(ap);
}

static void site_binary(gen *g, CXCursor c, int compound) {
  kids k = children(c);
  unsigned s, e, l0, l1, r0, r1;
  if (k.n != 2 || extent(g, c, &s, &e) || extent(g, k.v[0], &l0, &l1) || extent(g, k.v[1], &r0, &r1) ||
      l0 != s || r1 != e || l1 > r0 || !balanced(g, s, e)) {
    free(k.v);
    return;
  }
  static const struct { const char *from, *to; int op, compound; } tab[] = {
      {"<", "<=", OP_rel, 0},   {"<=", "<", OP_rel, 0},  {">", ">=", OP_rel, 0},   {">=", ">", OP_rel, 0},
      {"==", "!=", OP_eq, 0},   {"!=", "==", OP_eq, 0},  {"&&", "||", OP_logic, 0}, {"||", "&&", OP_logic, 0},
      {"+", "-", OP_arith, 0},  {"-", "+", OP_arith, 0}, {"*", "*", OP_mul_lhs1, 0},
      {"+=", "-=", OP_arith, 1}, {"-=", "+=", OP_arith, 1}};
  for (size_t i = 0; i < sizeof tab / sizeof *tab; i++) {
    if (tab[i].compound != compound || !text_is(g, l1, r0, tab[i].from)) continue;
    int op = tab[i].op;
    if ((op == OP_arith || op == OP_mul_lhs1) &&
        (is_pointerish(clang_getCursorType(k.v[0])) || is_pointerish(clang_getCursorType(k.v[1]))))
      break;
    if (!g->ops_on[op] && !(op == OP_mul_lhs1 && g->ops_on[OP_mul_rhs1])) break;
    site *t = add_site(g, op, s, e, P_BIN);
    if (!t) break;
    t->l0 = l0, t->l1 = l1, t->r0 = r0, t->r1 = r1;
    snprintf(t->newop, sizeof t->newop, "%s", tab[i].to);
    char after[512];
    if (op == OP_mul_lhs1) {
      if (g->ops_on[OP_mul_lhs1]) {
        fmt_expr(after, sizeof after, "1 * %.*s", (int)(r1 - r0), g->src + r0);
        t->m1 = add_mutant(g, OP_mul_lhs1, s, e, after);
      }
      if (g->ops_on[OP_mul_rhs1]) {
        fmt_expr(after, sizeof after, "%.*s * 1", (int)(l1 - l0), g->src + l0);
        t->m2 = add_mutant(g, OP_mul_rhs1, s, e, after);
      }
    } else {
      fmt_expr(after, sizeof after, "%.*s %s %.*s", (int)(l1 - l0), g->src + l0, tab[i].to, (int)(r1 - r0),
               g->src + r0);
      t->m1 = add_mutant(g, op, s, e, after);
    }
    break;
  }
  free(k.v);
}

static void site_literal(gen *g, CXCursor c, CXCursor parent) {
  unsigned s, e;
  if (!(g->ops_on[OP_const_inc] || g->ops_on[OP_const_dec]) || extent(g, c, &s, &e)) return;
  /* Only a literal written as one: digits (decimal or hex) and suffixes. */
  unsigned i = s;
  if (e - i > 2 && g->src[i] == '0' && (g->src[i + 1] == 'x' || g->src[i + 1] == 'X')) {
    i += 2;
    while (i < e && isxdigit((unsigned char)g->src[i])) i++;
  } else {
    while (i < e && isdigit((unsigned char)g->src[i])) i++;
  }
  if (i == s) return;
  while (i < e && strchr("uUlL", g->src[i])) i++;
  if (i != e) return;
  /* A 0 that is a null pointer constant stays one. */
  if (is_pointerish(clang_getCursorType(parent))) return;
  site *t = add_site(g, OP_const_inc, s, e, P_CONST);
  if (!t) return;
  char after[160];
  if (g->ops_on[OP_const_inc]) {
    fmt_expr(after, sizeof after, "(%.*s + 1)", (int)(e - s), g->src + s);
    t->m1 = add_mutant(g, OP_const_inc, s, e, after);
  }
  if (g->ops_on[OP_const_dec]) {
    fmt_expr(after, sizeof after, "(%.*s - 1)", (int)(e - s), g->src + s);
    t->m2 = add_mutant(g, OP_const_dec, s, e, after);
  }
}

/* The status constant c refers to (its name in name), when c names a constant of the status enum. */
static int status_constant(const gen *g, CXCursor c, char *name, size_t n) {
  if (clang_getCursorKind(c) != CXCursor_DeclRefExpr) return 0;
  CXCursor ref = clang_getCursorReferenced(c);
  if (clang_getCursorKind(ref) != CXCursor_EnumConstantDecl) return 0;
  CXCursor en = clang_getCursorSemanticParent(ref);
  kids k = children(en);
  int ours = 0;
  for (unsigned i = 0; i < k.n && !ours; i++) {
    CXString sp = clang_getCursorSpelling(k.v[i]);
    ours = strcmp(clang_getCString(sp), g->o->success) == 0;
    clang_disposeString(sp);
  }
  free(k.v);
  if (!ours) return 0;
  CXString sp = clang_getCursorSpelling(ref);
  snprintf(name, n, "%s", clang_getCString(sp));
  clang_disposeString(sp);
  return 1;
}

static void site_status(gen *g, CXCursor c) {
  char name[96];
  unsigned s, e;
  if (!g->ops_on[OP_status_swap] || !status_constant(g, c, name, sizeof name) || extent(g, c, &s, &e) ||
      !text_is(g, s, e, name))
    return;
  const char *alt = strcmp(name, g->o->success) ? g->o->success : g->guard[0] ? g->guard : g->o->failure;
  site *t = add_site(g, OP_status_swap, s, e, P_STATUS);
  if (!t) return;
  snprintf(t->alt, sizeof t->alt, "%s", alt);
  t->m1 = add_mutant(g, OP_status_swap, s, e, alt);
}

static int for_cond(gen *g, CXCursor c, const struct kids *k, CXCursor *out);

/* Whether the call's value is thrown away (an expression statement, a for's init or step). */
static int discarded(gen *g, CXCursor parent, CXCursor c) {
  enum CXCursorKind k = clang_getCursorKind(parent);
  if (k == CXCursor_CompoundStmt || k == CXCursor_LabelStmt || k == CXCursor_DefaultStmt) return 1;
  if (k == CXCursor_IfStmt || k == CXCursor_WhileStmt || k == CXCursor_CaseStmt || k == CXCursor_DoStmt ||
      k == CXCursor_ForStmt) {
    kids ks = children(parent);
    CXCursor cond = clang_getNullCursor();
    if (k == CXCursor_ForStmt) for_cond(g, parent, &ks, &cond);
    else if (k == CXCursor_DoStmt && ks.n == 2) cond = ks.v[1];
    else if (ks.n > 0) cond = ks.v[0];
    int is_cond = !clang_Cursor_isNull(cond) && clang_equalCursors(cond, c);
    free(ks.v);
    return !is_cond;
  }
  return 0;
}

static int is_status_type(const gen *g, CXType t) {
  CXString sp = clang_getTypeSpelling(t);
  int yes = strcmp(clang_getCString(sp), g->o->status_type) == 0;
  clang_disposeString(sp);
  return yes;
}

static void site_call(gen *g, CXCursor c, CXCursor parent) {
  unsigned s, e;
  if (extent(g, c, &s, &e) || !balanced(g, s, e)) return;
  CXString sp = clang_getCursorSpelling(c);
  const char *callee = clang_getCString(sp);
  /* The callee is written at the start of the call's text (not a macro's body). */
  int named = callee[0] && strncmp(g->src + s, callee, strlen(callee)) == 0;
  clang_disposeString(sp);
  if (!named) return;
  if (discarded(g, parent, c)) {
    if (!g->ops_on[OP_call_del]) return;
    site *t = add_site(g, OP_call_del, s, e, P_CALL);
    if (!t) return;
    t->m1 = add_mutant(g, OP_call_del, s, e, "/* removed */ (void)0");
  } else if (is_status_type(g, clang_getCursorType(c))) {
    if (!g->ops_on[OP_call_ok]) return;
    site *t = add_site(g, OP_call_ok, s, e, P_CALL);
    if (!t) return;
    t->m1 = add_mutant(g, OP_call_ok, s, e, g->o->success);
  }
}

/* A condition: negated, and (for a guard) removed. */
static void site_cond(gen *g, CXCursor cond, int guard) {
  unsigned s, e;
  if (extent(g, cond, &s, &e) || !balanced(g, s, e)) return;
  char after[512];
  if (guard && g->ops_on[OP_check_del]) {
    site *t = add_site(g, OP_check_del, s, e, P_CHECK);
    if (!t) return;
    t->m1 = add_mutant(g, OP_check_del, s, e, "0 /* guard removed */");
  }
  if (g->ops_on[OP_cond_negate]) {
    site *t = add_site(g, OP_cond_negate, s, e, P_COND);
    if (!t) return;
    fmt_expr(after, sizeof after, "!(%.*s)", (int)(e - s), g->src + s);
    t->m1 = add_mutant(g, OP_cond_negate, s, e, after);
  }
}

/* Whether a statement leaves (return, goto, break, continue), or is a block that ends so. */
static int leaves(CXCursor st) {
  enum CXCursorKind k = clang_getCursorKind(st);
  if (k == CXCursor_ReturnStmt || k == CXCursor_GotoStmt || k == CXCursor_BreakStmt || k == CXCursor_ContinueStmt)
    return 1;
  if (k != CXCursor_CompoundStmt) return 0;
  kids ks = children(st);
  int r = ks.n > 0 && leaves(ks.v[ks.n - 1]);
  free(ks.v);
  return r;
}

/* The condition of a for statement: the child between its two semicolons. */
static int for_cond(gen *g, CXCursor c, const struct kids *k, CXCursor *out) {
  unsigned s, e;
  if (extent(g, c, &s, &e)) return 0;
  unsigned i = s, semi[2] = {0, 0};
  int depth = 0, n = 0;
  while (i < e && g->src[i] != '(') i++;
  for (; i < e && n < 2; i++) {
    char ch = g->src[i];
    if (ch == '(') depth++;
    else if (ch == ')') depth--;
    else if (ch == ';' && depth == 1) semi[n++] = i;
  }
  if (n < 2) return 0;
  for (unsigned j = 0; j < k->n; j++) {
    unsigned a, b;
    if (!extent(g, k->v[j], &a, &b) && a > semi[0] && b <= semi[1]) {
      *out = k->v[j];
      return 1;
    }
  }
  return 0;
}

/* Whether the statement c (of kind k) and its condition are written in the file as such: it
 * starts with its keyword and the condition follows a '(' (or, for ?:, a '?' follows it). A
 * statement a macro writes (`#define CHECK(x) if (!(x)) return ...`) maps to the macro's name. */
static int written_cond(gen *g, CXCursor c, enum CXCursorKind k, CXCursor cond, const kids *ks) {
  unsigned s, e, cs, ce;
  if (extent(g, c, &s, &e) || extent(g, cond, &cs, &ce)) return 0;
  if (k == CXCursor_ConditionalOperator) {
    unsigned ts, te;
    if (ks->n != 3 || extent(g, ks->v[1], &ts, &te) || ce > ts) return 0;
    return text_is(g, ce, ts, "?");
  }
  const char *kw = k == CXCursor_IfStmt ? "if" : k == CXCursor_WhileStmt ? "while" : k == CXCursor_DoStmt ? "do" : "for";
  size_t n = strlen(kw);
  if (e - s < n || memcmp(g->src + s, kw, n) != 0) return 0;
  unsigned p = cs;
  while (p > s && isspace((unsigned char)g->src[p - 1])) p--;
  if (k == CXCursor_ForStmt) return p > s && g->src[p - 1] == ';';
  return p > s && g->src[p - 1] == '(';
}

/* ---- the walk --------------------------------------------------------------------------------- */

static void walk(gen *g, CXCursor c, CXCursor parent, int in_fn, int const_ctx, int in_return);

static void walk_kids(gen *g, CXCursor c, int in_fn, int const_ctx, int in_return) {
  kids k = children(c);
  for (unsigned i = 0; i < k.n; i++) walk(g, k.v[i], c, in_fn, const_ctx, in_return);
  free(k.v);
}

/* The first error status the function returns: the error a returned success is swapped for. */
static void find_guard(gen *g, CXCursor c, int in_return) {
  if (g->guard[0]) return;
  enum CXCursorKind k = clang_getCursorKind(c);
  char name[96];
  if (in_return && status_constant(g, c, name, sizeof name) && strcmp(name, g->o->success)) {
    snprintf(g->guard, sizeof g->guard, "%s", name);
    return;
  }
  kids ks = children(c);
  for (unsigned i = 0; i < ks.n; i++) find_guard(g, ks.v[i], in_return || k == CXCursor_ReturnStmt);
  free(ks.v);
}

static void walk(gen *g, CXCursor c, CXCursor parent, int in_fn, int const_ctx, int in_return) {
  enum CXCursorKind k = clang_getCursorKind(c);
  if (k == CXCursor_FunctionDecl) {
    CXSourceLocation loc = clang_getCursorLocation(c);
    if (!clang_isCursorDefinition(c) || !clang_Location_isFromMainFile(loc)) return;
    CXString sp = clang_getCursorSpelling(c);
    snprintf(g->fn, sizeof g->fn, "%s", clang_getCString(sp));
    clang_disposeString(sp);
    memset(g->ordinal, 0, sizeof g->ordinal);
    g->guard[0] = 0;
    find_guard(g, c, 0);
    walk_kids(g, c, 1, 0, 0);
    return;
  }
  if (!in_fn) {
    if (k == CXCursor_TranslationUnit || k == CXCursor_LinkageSpec || k == CXCursor_UnexposedDecl)
      walk_kids(g, c, 0, 1, 0);
    else if (k == CXCursor_FunctionDecl)
      walk(g, c, parent, 0, 1, 0);
    else {
      /* file-scope declarations hold no function bodies we mutate, except nested function decls */
      kids ks = children(c);
      for (unsigned i = 0; i < ks.n; i++)
        if (clang_getCursorKind(ks.v[i]) == CXCursor_FunctionDecl) walk(g, ks.v[i], c, 0, 1, 0);
      free(ks.v);
    }
    return;
  }
  /* Constant expressions cannot hold a run-time choice: array sizes, case labels, static
   * initializers, sizeof, static asserts, local types and enums, attributes. */
  if (k == CXCursor_VarDecl) {
    enum CX_StorageClass sc = clang_Cursor_getStorageClass(c);
    CXCursor init = clang_Cursor_getVarDeclInitializer(c);
    kids ks = children(c);
    for (unsigned i = 0; i < ks.n; i++) {
      int is_init = !clang_Cursor_isNull(init) && clang_equalCursors(ks.v[i], init);
      walk(g, ks.v[i], c, in_fn, const_ctx || sc == CX_SC_Static || sc == CX_SC_Extern || !is_init, 0);
    }
    free(ks.v);
    return;
  }
  if (k == CXCursor_CaseStmt) {
    kids ks = children(c);
    for (unsigned i = 0; i < ks.n; i++) walk(g, ks.v[i], c, in_fn, const_ctx || i == 0, 0);
    free(ks.v);
    return;
  }
  if (k == CXCursor_UnaryExpr || k == CXCursor_StaticAssert || k == CXCursor_StructDecl ||
      k == CXCursor_UnionDecl || k == CXCursor_EnumDecl || k == CXCursor_TypedefDecl ||
      clang_isAttribute(k) || k == CXCursor_GenericSelectionExpr)
    const_ctx = 1;
  if (k == CXCursor_ReturnStmt) in_return = 1;
  if (!const_ctx) {
    switch (k) {
      case CXCursor_BinaryOperator: site_binary(g, c, 0); break;
      case CXCursor_CompoundAssignOperator: site_binary(g, c, 1); break;
      case CXCursor_IntegerLiteral: site_literal(g, c, parent); break;
      case CXCursor_DeclRefExpr:
        if (in_return) site_status(g, c);
        break;
      case CXCursor_CallExpr: site_call(g, c, parent); break;
      case CXCursor_IfStmt:
      case CXCursor_WhileStmt:
      case CXCursor_DoStmt:
      case CXCursor_ForStmt:
      case CXCursor_ConditionalOperator: {
        kids ks = children(c);
        CXCursor cond;
        int have = 0, guard = 0;
        if ((k == CXCursor_IfStmt && ks.n >= 2) || (k == CXCursor_WhileStmt && ks.n == 2) ||
            (k == CXCursor_ConditionalOperator && ks.n == 3))
          cond = ks.v[0], have = 1;
        else if (k == CXCursor_DoStmt && ks.n == 2)
          cond = ks.v[1], have = 1;
        else if (k == CXCursor_ForStmt)
          have = for_cond(g, c, &ks, &cond);
        if (k == CXCursor_IfStmt && ks.n >= 2) guard = leaves(ks.v[1]);
        /* The statement is written here, not by a macro: its keyword, and the condition's '(' or '?'. */
        if (have) have = written_cond(g, c, k, cond, &ks);
        if (have) site_cond(g, cond, guard);
        free(ks.v);
        break;
      }
      default: break;
    }
  }
  walk_kids(g, c, in_fn, const_ctx, in_return);
}

/* ---- the schemata ----------------------------------------------------------------------------- */

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    while (b->n + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 4096;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static void putf(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *tmp = NULL;
  int n = vasprintf(&tmp, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  put(b, tmp, (size_t)n);
  free(tmp);
}

static int by_position(const void *a, const void *b) {
  const site *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  if (x->e != y->e) return x->e > y->e ? -1 : 1;
  return x->prio - y->prio;
}

static void emit_site(gen *g, size_t i, buf *out);

/* The text of [a, b) with the sites whose parent is `parent` (from index `from` on) rewritten. */
static void emit_range(gen *g, unsigned a, unsigned b, int parent, size_t from, buf *out) {
  unsigned pos = a;
  for (size_t j = from; j < g->n_sites && g->sites[j].s < b; j++) {
    site *t = &g->sites[j];
    if (t->parent != parent || t->s < a || t->e > b || (t->m1 < 0 && t->m2 < 0)) continue;
    put(out, g->src + pos, t->s - pos);
    emit_site(g, j, out);
    pos = t->e;
  }
  put(out, g->src + pos, b - pos);
}

static void emit_site(gen *g, size_t i, buf *out) {
  site *t = &g->sites[i];
  int k1 = t->m1 >= 0 ? g->f->v[t->m1].index : 0, k2 = t->m2 >= 0 ? g->f->v[t->m2].index : 0;
  if (t->prio == P_BIN) {
    buf l = {0}, r = {0};
    emit_range(g, t->l0, t->l1, (int)i, i + 1, &l);
    emit_range(g, t->r0, t->r1, (int)i, i + 1, &r);
    const char *mid = g->src + t->l1;
    int nmid = (int)(t->r0 - t->l1);
    if (l.n + r.n > MAX_DUP) {
      if (t->m1 >= 0) g->f->v[t->m1].skipped = 1;
      if (t->m2 >= 0) g->f->v[t->m2].skipped = 1;
      puts_(out, l.p ? l.p : "");
      put(out, mid, (size_t)nmid);
      puts_(out, r.p ? r.p : "");
    } else if (t->op == OP_mul_lhs1) {
      puts_(out, "(");
      if (k1) putf(out, "MDM__(%d) ? (1 * (%s)) : ", k1, r.p ? r.p : "");
      if (k2) putf(out, "MDM__(%d) ? ((%s) * 1) : ", k2, l.p ? l.p : "");
      puts_(out, "(");
      puts_(out, l.p ? l.p : "");
      put(out, mid, (size_t)nmid);
      puts_(out, r.p ? r.p : "");
      puts_(out, "))");
    } else {
      putf(out, "(MDM__(%d) ? (", k1);
      puts_(out, l.p ? l.p : "");
      putf(out, " %s ", t->newop);
      puts_(out, r.p ? r.p : "");
      puts_(out, ") : (");
      puts_(out, l.p ? l.p : "");
      put(out, mid, (size_t)nmid);
      puts_(out, r.p ? r.p : "");
      puts_(out, "))");
    }
    free(l.p);
    free(r.p);
    return;
  }
  buf in = {0};
  emit_range(g, t->s, t->e, (int)i, i + 1, &in);
  const char *T = in.p ? in.p : "";
  switch (t->op) {
    case OP_check_del: putf(out, "(!MDM__(%d) && (", k1), puts_(out, T), puts_(out, "))"); break;
    case OP_cond_negate: putf(out, "(MDM__(%d) ^ !!(", k1), puts_(out, T), puts_(out, "))"); break;
    case OP_call_del: putf(out, "(MDM__(%d) ? (void)0 : (void)(", k1), puts_(out, T), puts_(out, "))"); break;
    case OP_call_ok: putf(out, "(MDM__(%d) ? %s : (", k1, g->o->success), puts_(out, T), puts_(out, "))"); break;
    case OP_status_swap: putf(out, "(MDM__(%d) ? %s : ", k1, t->alt), puts_(out, T), puts_(out, ")"); break;
    case OP_const_inc:
      puts_(out, "(");
      if (k1) putf(out, "MDM__(%d) ? (%s + 1) : ", k1, T);
      if (k2) putf(out, "MDM__(%d) ? (%s - 1) : ", k2, T);
      puts_(out, T);
      puts_(out, ")");
      break;
    default: puts_(out, T);
  }
  free(in.p);
}

/* The C string literal of s. */
static void put_cstr(buf *b, const char *s) {
  puts_(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putf(b, "\\%c", *s);
    else if ((unsigned char)*s < 32) putf(b, "\\%03o", (unsigned char)*s);
    else put(b, s, 1);
  }
  puts_(b, "\"");
}

static void make_schemata(gen *g, const char *path) {
  mdm_file *f = g->f;
  qsort(g->sites, g->n_sites, sizeof *g->sites, by_position);
  /* Parents: the innermost earlier site that contains it; a site that straddles another's edge
   * is dropped (its mutants listed as skipped). */
  int *stack = malloc((g->n_sites + 1) * sizeof *stack);
  size_t sp = 0;
  for (size_t i = 0; i < g->n_sites; i++) {
    site *t = &g->sites[i];
    while (sp && g->sites[stack[sp - 1]].e <= t->s) sp--;
    if (sp) {
      site *p = &g->sites[stack[sp - 1]];
      int inside = t->e <= p->e;
      if (inside && p->prio == P_BIN)
        inside = (t->s >= p->l0 && t->e <= p->l1) || (t->s >= p->r0 && t->e <= p->r1);
      if (!inside) {
        if (t->m1 >= 0) f->v[t->m1].skipped = 1, t->m1 = -1;
        if (t->m2 >= 0) f->v[t->m2].skipped = 1, t->m2 = -1;
        continue;
      }
      t->parent = stack[sp - 1];
    }
    stack[sp++] = (int)i;
  }
  free(stack);
  buf out = {0};
  putf(&out, "/* md_mutagen schemata of %s: %zu mutants, MD_MUTAGEN=<id> runs one. Generated: do not edit. */\n",
       f->rel, f->n);
  puts_(&out, "static int mdm__sel_, mdm__reach_on_;\nstatic int mdm__hit_(int k);\n"
              "#define MDM__(k) (mdm__sel_ == (k) || (mdm__reach_on_ && mdm__hit_(k)))\n#line 1 ");
  put_cstr(&out, path);
  puts_(&out, "\n");
  emit_range(g, 0, (unsigned)g->len, -1, 0, &out);
  if (g->len && g->src[g->len - 1] != '\n') puts_(&out, "\n");
  puts_(&out, "/* md_mutagen: the selection (MD_MUTAGEN) and the reach log (MD_MUTAGEN_REACH). */\n"
              "#include <fcntl.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
              "#ifndef O_CLOEXEC\n#define O_CLOEXEC 0\n#endif\n");
  putf(&out, "static const char *const mdm__ids_[%zu] = {\n", f->n);
  for (size_t i = 0; i < f->n; i++) {
    puts_(&out, "  ");
    put_cstr(&out, f->v[i].id);
    puts_(&out, ",\n");
  }
  putf(&out, "};\nstatic unsigned char mdm__hits_[%zu];\nstatic int mdm__fd_ = -1;\n", f->n + 1);
  putf(&out,
       "__attribute__((constructor)) static void mdm__init_(void) {\n"
       "  const char *e = getenv(\"MD_MUTAGEN\"), *r = getenv(\"MD_MUTAGEN_REACH\");\n"
       "  for (int i = 0; e && i < %zu; i++)\n"
       "    if (strcmp(e, mdm__ids_[i]) == 0) mdm__sel_ = i + 1;\n"
       "  if (r && *r) {\n"
       "    mdm__fd_ = open(r, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);\n"
       "    mdm__reach_on_ = mdm__fd_ >= 0;\n"
       "  }\n"
       "}\n"
       "static int mdm__hit_(int k) {\n"
       "  if (k > 0 && k <= %zu && !__atomic_exchange_n(&mdm__hits_[k], 1, __ATOMIC_RELAXED)) {\n"
       "    char line[400];\n"
       "    size_t n = strlen(mdm__ids_[k - 1]);\n"
       "    if (n > sizeof line - 1) n = sizeof line - 1;\n"
       "    memcpy(line, mdm__ids_[k - 1], n);\n"
       "    line[n] = '\\n';\n"
       "    if (write(mdm__fd_, line, n + 1) < 0) mdm__reach_on_ = 0;\n"
       "  }\n"
       "  return 0;\n"
       "}\n",
       f->n, f->n);
  f->schemata = out.p;
  f->schemata_len = out.n;
}

/* ---- the entry points ------------------------------------------------------------------------- */

int mdm_generate(const char *path, const char *rel, const char *const *args, int nargs, const mdm_opts *o,
                 mdm_file *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  buf src = {0};
  char tmp[65536];
  size_t got;
  while ((got = fread(tmp, 1, sizeof tmp, fp)) > 0) put(&src, tmp, got);
  fclose(fp);
  CXIndex idx = clang_createIndex(0, 0);
  CXTranslationUnit tu = NULL;
  enum CXErrorCode ec = clang_parseTranslationUnit2(idx, path, args, nargs, NULL, 0,
                                                    CXTranslationUnit_KeepGoing, &tu);
  if (ec != CXError_Success || !tu) {
    snprintf(err, errlen, "%s: libclang could not parse it (error %d)", path, (int)ec);
    clang_disposeIndex(idx);
    free(src.p);
    return -1;
  }
  /* An error in the file means an AST with holes: mutants of it would be guesses. */
  for (unsigned i = 0, n = clang_getNumDiagnostics(tu); i < n; i++) {
    CXDiagnostic d = clang_getDiagnostic(tu, i);
    if (clang_getDiagnosticSeverity(d) >= CXDiagnostic_Error) {
      CXString s = clang_formatDiagnostic(d, CXDiagnostic_DisplaySourceLocation | CXDiagnostic_DisplayColumn);
      snprintf(err, errlen, "%s", clang_getCString(s));
      clang_disposeString(s);
      clang_disposeDiagnostic(d);
      clang_disposeTranslationUnit(tu);
      clang_disposeIndex(idx);
      free(src.p);
      return -1;
    }
    clang_disposeDiagnostic(d);
  }
  gen g = {.o = o, .f = out, .file = clang_getFile(tu, path), .src = src.p ? src.p : "", .len = src.n};
  for (int i = 0; i < OP_COUNT; i++) g.ops_on[i] = o->ops == NULL;
  if (o->ops) {
    char list[512];
    snprintf(list, sizeof list, "%s", o->ops);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
      for (int i = 0; i < OP_COUNT; i++)
        if (!strcmp(t, op_names[i])) g.ops_on[i] = 1;
  }
  out->rel = strdup(rel);
  walk(&g, clang_getTranslationUnitCursor(tu), clang_getNullCursor(), 0, 1, 0);
  if (out->n) make_schemata(&g, path);
  free(g.sites);
  clang_disposeTranslationUnit(tu);
  clang_disposeIndex(idx);
  free(src.p);
  return 0;
}

void mdm_file_free(mdm_file *f) {
  for (size_t i = 0; i < f->n; i++) free(f->v[i].before), free(f->v[i].after);
  free(f->v);
  free(f->rel);
  free(f->schemata);
  memset(f, 0, sizeof *f);
}

static void put_field(FILE *f, const char *s) {
  for (; *s; s++) fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

void mdm_write_list(FILE *f, const mdm_file *m) {
  for (size_t i = 0; i < m->n; i++) {
    const mdm_mutant *v = &m->v[i];
    fprintf(f, "%s\t%d\t%s\t%s\t%u\t%s\t%d\t", v->id, v->index, m->rel, v->function, v->line, v->op, v->skipped);
    put_field(f, v->before);
    fputc('\t', f);
    put_field(f, v->after);
    fputc('\n', f);
  }
}
