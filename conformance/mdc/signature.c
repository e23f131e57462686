/* signature.c - cause signatures: one line of text that cases failing for one reason share, so
 * a run is shown as its causes, largest first, instead of case by case (docs/mdc-cli.md,
 * "Causes").
 *
 * A Fail's signature is the failing op, what was expected and what came back (a status, or which
 * check and its values), the rule the trace cites when the driver owed a refusal, and the
 * driver's message; a Crash's, the signal and the driver's top frames (crash_stack.c) or the op
 * it was in; a Timeout's, the op it was in. Numbers, addresses, quoted names and paths are masked
 * in the texts, so "prepare_model: ADD of 3 operands at 0x55d1..." and "... of 5 operands at
 * 0x7f02..." are one cause. The rule is left out when the driver failed a step the trace only
 * needed to get going (expected NONE): the trace's rules say what the trace is about, not why the
 * driver refused its setup, and keeping them would split one cause into one group per rule. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdc_int.h"
#include "replay_int.h"

/* ---- masking ------------------------------------------------------------------------------ */

static int word_char(int c) { return isalnum(c) || c == '_'; }

void mdc_cli__mask(const char *in, char *out, size_t n) {
  if (!n) return;
  size_t k = 0;
#define PUT(c) do { if (k + 1 < n) out[k++] = (char)(c); } while (0)
#define PUTS(s) do { for (const char *q_ = (s); *q_; q_++) PUT(*q_); } while (0)
  const char *p = in ? in : "";
  while (*p) {
    unsigned char c = (unsigned char)*p;
    int after_word = p > in && word_char((unsigned char)p[-1]);
    if (c == '0' && (p[1] == 'x' || p[1] == 'X') && isxdigit((unsigned char)p[2]) && !after_word) {
      p += 2;
      while (isxdigit((unsigned char)*p) || *p == '.') p++; /* "0x1f.." as a message may cut it */
      PUTS("0x#");
      continue;
    }
    if (isdigit(c) && !after_word) {
      /* a number: 12, 1.5, 1e-3, 2.5e+07 */
      while (isdigit((unsigned char)*p)) p++;
      if (*p == '.' && isdigit((unsigned char)p[1]))
        for (p++; isdigit((unsigned char)*p); p++) {}
      if ((*p == 'e' || *p == 'E') && (isdigit((unsigned char)p[1]) ||
                                       ((p[1] == '-' || p[1] == '+') && isdigit((unsigned char)p[2]))))
        for (p += 2; isdigit((unsigned char)*p); p++) {}
      PUT('#');
      continue;
    }
    if ((c == '\'' || c == '"') && strchr(p + 1, c)) {
      /* a quoted name: its quotes kept, its text masked */
      const char *e = strchr(p + 1, c);
      PUT(c);
      PUT('*');
      PUT(c);
      p = e + 1;
      continue;
    }
    if (c == '/' && !after_word && (p[1] == '/' || word_char((unsigned char)p[1]) || p[1] == '.')) {
      /* a path: to the next space */
      while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != ')' && *p != ':') p++;
      PUTS("<path>");
      continue;
    }
    if (c < 0x20) c = ' ';
    PUT(c);
    p++;
  }
  out[k] = 0;
#undef PUT
#undef PUTS
}

static int by_text(const void *x, const void *y) { return strcmp((const char *)x, (const char *)y); }

/* "SPEC 4; SPEC 8.5" from a rules text ("SPEC 8.5: ...; SPEC 4: execute_async returns ..."):
 * the rule numbers, sorted and each once, so two traces citing one set of rules in another order
 * share the cause. */
static void rule_numbers(const char *rules, char *out, size_t n) {
  char v[16][24];
  size_t m = 0, k = 0;
  out[0] = 0;
  for (const char *p = rules ? strstr(rules, "SPEC ") : NULL; p && m < 16; p = strstr(p + 5, "SPEC ")) {
    const char *q = p + 5;
    size_t len = strspn(q, "0123456789.");
    while (len && q[len - 1] == '.') len--;
    if (len && len < sizeof v[0]) snprintf(v[m++], sizeof v[0], "%.*s", (int)len, q);
  }
  qsort(v, m, sizeof v[0], by_text);
  for (size_t i = 0; i < m; i++) {
    if (i && !strcmp(v[i], v[i - 1])) continue;
    int w = snprintf(out + k, n - k, "%sSPEC %s", k ? "; " : "", v[i]);
    if (w < 0 || (size_t)w >= n - k) break;
    k += (size_t)w;
  }
}

/* A verdict message without its "path:line: " prefix (the case's own place, not its cause). */
static const char *without_place(const char *m) {
  const char *colon = strstr(m, ".jsonl:");
  if (!colon) return m;
  const char *q = colon + 7;
  while (isdigit((unsigned char)*q)) q++;
  if (*q == ':') q++;
  while (*q == ' ') q++;
  return q;
}

/* The kind of failure behind a case's result: its status, or for a status the harness gave it
 * afterwards (ExpectedFail, Flake, Warn, OrderDependent) what its message says happened. */
static mdc_status kind_of(mdc_status st, const mdc_result *r) {
  switch (st) {
    case MDC_S_FAIL: case MDC_S_WARN: case MDC_S_EXPECTED_FAIL: case MDC_S_FLAKE: case MDC_S_ORDER_DEPENDENT: {
      const char *m = r->message, *first = strstr(m, "first run: ");
      if (first) {
        first += 11;
        if (!strncmp(first, "Crash: ", 7)) return MDC_S_CRASH;
        if (!strncmp(first, "Timeout: ", 9)) return MDC_S_TIMEOUT;
        if (!strncmp(first, "TraceError: ", 12)) return MDC_S_TRACE_ERROR;
        return MDC_S_FAIL;
      }
      if (!strncmp(m, "killed by signal ", 17) || !strncmp(m, "exited with status ", 19) ||
          !strncmp(m, "ended with wait status ", 23))
        return MDC_S_CRASH;
      if (!strncmp(m, "no result after ", 16)) return MDC_S_TIMEOUT;
      if (r->verdict == MDC_TRACE_ERROR) return MDC_S_TRACE_ERROR;
      return MDC_S_FAIL;
    }
    default: return st;
  }
}

void mdc_cli__signature(mdc_status st, const mdc_result *r, const char *stack, char *out, size_t n) {
  char a[600], b[600], dm[600], rules[160];
  const char *op = r->event[0] ? r->event : "?";
  if (!n) return;
  out[0] = 0;
  switch (kind_of(st, r)) {
    case MDC_S_PASS: case MDC_S_SKIPPED: case MDC_S_RUNNING: case MDC_S_INTERRUPTED:
      return;
    case MDC_S_UNEXPECTED_PASS:
      snprintf(out, n, "UnexpectedPass: listed as a known failure, passed");
      return;
    case MDC_S_CRASH: {
      char top[400], where[200], sig[32] = "";
      const char *k = strstr(r->message, "killed by signal SIG"), *e = strstr(r->message, "exited with status ");
      if (k) snprintf(sig, sizeof sig, "%.*s", (int)strcspn(k + 17, " ,;()"), k + 17);
      if (mdc_cli__stack_top(stack, 3, top, sizeof top, where, sizeof where) > 0)
        snprintf(out, n, "Crash: %s in %s", sig[0] ? sig : "died", top);
      else if (sig[0])
        snprintf(out, n, "Crash: %s in %s", sig, op);
      else if (e)
        snprintf(out, n, "Crash: exited with status %d in %s", atoi(e + 19), op);
      else
        snprintf(out, n, "Crash: no result from %s", op);
      return;
    }
    case MDC_S_TIMEOUT:
      snprintf(out, n, "Timeout: no result in %s", op);
      return;
    case MDC_S_FAIL:
      if (r->expected[0] || r->actual[0]) {
        mdc_cli__mask(r->expected, a, sizeof a);
        mdc_cli__mask(r->actual, b, sizeof b);
        int w = snprintf(out, n, "Fail: %s: expected %.200s, got %.200s", op, a, b);
        size_t k = w > 0 ? (size_t)w : 0;
        /* The rule is the cause when the driver owed a refusal (a status other than NONE). */
        rule_numbers(r->rule, rules, sizeof rules);
        int refusal = strcmp(r->expected, "NONE") != 0 && r->expected[strspn(r->expected, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_")] == 0;
        if (refusal && rules[0] && k < n) {
          w = snprintf(out + k, n - k, " (%s)", rules);
          k += w > 0 ? (size_t)w : 0;
        }
        if (r->driver_message[0] && k < n) {
          mdc_cli__mask(r->driver_message, dm, sizeof dm);
          snprintf(out + k, n - k, "; driver: \"%.200s\"", dm);
        }
      } else {
        mdc_cli__mask(without_place(r->message), a, sizeof a);
        snprintf(out, n, "Fail: %.300s", a);
      }
      return;
    default: {
      /* TraceError, NotSupported: the status and its message. */
      mdc_cli__mask(without_place(r->message), a, sizeof a);
      snprintf(out, n, "%s: %.300s", mdc_cli__status_name(st), a[0] ? a : "-");
      return;
    }
  }
}

void mdc_cli__rp_crash_stack(mdc_cli__case *c, const mdc_cli__child *ch, mdc_status st, mdc_result *r) {
  if (st != MDC_S_CRASH || !ch->stack[0]) return;
  /* A re-run keeps the first attempt's (its verdict is the one reported). */
  if (c->stack) return;
  c->stack = strdup(ch->stack);
  char top[400], where[200];
  if (mdc_cli__stack_top(ch->stack, 1, top, sizeof top, where, sizeof where) > 0) {
    size_t k = strlen(r->message);
    snprintf(r->message + k, sizeof r->message - k, ", in %s (%s)", top, where);
  }
}

void mdc_cli__case_cause(mdc_cli__case *c) {
  mdc_cli__signature(c->status, &c->res, c->stack, c->signature, sizeof c->signature);
}

const char *mdc_cli__rp_signature(const mdc_cli__case *c) { return c->signature[0] ? c->signature : NULL; }

/* ---- groups ------------------------------------------------------------------------------- */

int mdc_cli__status_grouped(mdc_status s) {
  return s != MDC_S_PASS && s != MDC_S_NOT_SUPPORTED && s != MDC_S_WARN && s != MDC_S_SKIPPED;
}

static const mdc_cli__run *sort_run;

static int by_signature(const void *x, const void *y) {
  const mdc_cli__case *a = &sort_run->cases[*(const size_t *)x], *b = &sort_run->cases[*(const size_t *)y];
  int c = strcmp(mdc_cli__rp_signature(a), mdc_cli__rp_signature(b));
  return c ? c : strcmp(a->name, b->name);
}

static int by_size(const void *x, const void *y) {
  const mdc_cli__group *a = x, *b = y;
  if ((a->unexpected > 0) != (b->unexpected > 0)) return a->unexpected > 0 ? -1 : 1;
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  return strcmp(a->signature, b->signature);
}

int mdc_cli__groups(const mdc_cli__run *run, mdc_cli__groups_t *g) {
  memset(g, 0, sizeof *g);
  g->order = malloc((run->n ? run->n : 1) * sizeof *g->order);
  g->v = calloc(run->n ? run->n : 1, sizeof *g->v);
  if (!g->order || !g->v) {
    mdc_cli__groups_free(g);
    return -1;
  }
  size_t m = 0;
  for (size_t i = 0; i < run->n; i++)
    if (mdc_cli__status_grouped(run->cases[i].status) && mdc_cli__rp_signature(&run->cases[i])) g->order[m++] = i;
  /* qsort has no context argument: the run is read through a file-level pointer, set for the
   * sort only (the summary runs on one thread). */
  sort_run = run;
  qsort(g->order, m, sizeof *g->order, by_signature);
  sort_run = NULL;
  for (size_t i = 0; i < m;) {
    mdc_cli__group *x = &g->v[g->n++];
    x->signature = mdc_cli__rp_signature(&run->cases[g->order[i]]);
    x->first = i;
    while (i < m && !strcmp(mdc_cli__rp_signature(&run->cases[g->order[i]]), x->signature)) {
      mdc_status s = run->cases[g->order[i]].status;
      x->counts[s]++;
      x->unexpected += mdc_cli__status_unexpected(s) != 0;
      x->n++;
      i++;
    }
  }
  g->cases = m;
  qsort(g->v, g->n, sizeof *g->v, by_size);
  return 0;
}

void mdc_cli__groups_free(mdc_cli__groups_t *g) {
  free(g->order);
  free(g->v);
  memset(g, 0, sizeof *g);
}
