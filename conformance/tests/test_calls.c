/* test_calls.c - the table of driver calls (mdc/calls.h) against the ABI it describes, and the
 * event tables of docs/trace-format.md against the table and the replayer's own events: a call
 * added to one and not the others fails here. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "md/loader.h"
#include "mdc/calls.h"

Test(calls, every_call_is_a_driver_member_in_abi_order) {
  static const struct { const char *name; size_t slot; } abi[] = {
#define SLOT(n) {#n, offsetof(md_driver, n)}
      SLOT(open_device), SLOT(close_device), SLOT(get_capabilities), SLOT(get_supported_operations),
      SLOT(open_client), SLOT(close_client), SLOT(prepare_model), SLOT(release_prepared_model),
      SLOT(allocate), SLOT(copy_to), SLOT(copy_from), SLOT(free_buffer), SLOT(execute),
      SLOT(execute_async), SLOT(wait_event), SLOT(register_memory), SLOT(unregister_memory),
#undef SLOT
  };
  cr_assert_eq(MDC_CALL_COUNT, sizeof abi / sizeof abi[0]);
  for (unsigned i = 0; i < MDC_CALL_COUNT; i++) {
    const mdc_call_desc *c = &mdc_calls[i];
    cr_expect_eq(c->id, (mdc_call)i, "%s is at index %u", c->name, i);
    cr_expect_str_eq(c->name, abi[i].name);
    cr_expect_eq(c->slot, abi[i].slot, "%s", c->name);
    cr_expect_eq(mdc_call_find(c->name), c, "find(%s)", c->name);
    cr_expect(c->n_args >= 1 && c->n_args <= MDC_CALL_MAX_ARGS, "%s", c->name);
    /* Calls taking a client have it (and the device) first; others take no client. */
    cr_expect_eq(mdc_call_has_arg(c, MDC_A_CLIENT), (c->flags & MDC_CALL_CLIENT) != 0, "%s", c->name);
    for (uint32_t k = 0; k < c->n_args; k++) cr_expect_lt(c->args[k].id, MDC_A_COUNT, "%s", c->name);
    for (uint32_t k = 0; k < c->n_expect; k++) cr_expect_not_null(mdc_expect_key(c->expect[k]), "%s", c->name);
    /* The optional entries (SPEC 9) are exactly those past the v1 table, and new in 1.1. */
    cr_expect_eq((c->flags & MDC_CALL_OPTIONAL) != 0, c->slot >= MD_DRIVER_SIZE_V1, "%s", c->name);
    if (c->flags & MDC_CALL_OPTIONAL) cr_expect(c->flags & MDC_CALL_V11, "%s", c->name);
  }
  cr_expect_null(mdc_call_find("last_error"), "last_error is never a trace event");
  cr_expect_null(mdc_call_find("memory"));
  cr_expect_null(mdc_call_find(""));
  cr_expect_str_eq(mdc_obj_name(MDC_OBJ_PREPARED), "prepared model");
}

Test(calls, replayer_events_and_calls_do_not_share_a_name) {
  for (size_t i = 0; i < mdc__n_events; i++) {
    cr_expect_null(mdc_call_find(mdc__events[i].name), "%s", mdc__events[i].name);
    cr_expect_eq(mdc__event_find(mdc__events[i].name), &mdc__events[i]);
  }
}

/* ---- docs/trace-format.md ---- */

typedef struct row {
  char op[64];
  char args[32][40];   /* identifiers in backticks outside parentheses, in the arguments column */
  int n_args;
  char expect[8][40];  /* the same, in the expectations column */
  int n_expect;
} row;

/* Backticked identifiers of one column at parenthesis depth 0; `a/b/c` gives a, b and c. */
static int idents(const char *col, char out[][40], int max) {
  int n = 0, depth = 0;
  for (const char *p = col; *p; p++) {
    if (*p == '(') depth++;
    else if (*p == ')') depth--;
    else if (*p == '`') {
      const char *e = strchr(p + 1, '`');
      if (!e) break;
      if (depth == 0) {
        const char *s = p + 1;
        while (s < e) {
          const char *t = s;
          while (t < e && (islower((unsigned char)*t) || *t == '_')) t++;
          if (t == e || *t == '/') {
            if (t > s && n < max) snprintf(out[n++], 40, "%.*s", (int)(t - s), s);
            s = t + 1;
          } else {
            break; /* not an identifier (a value, a JSON example) */
          }
        }
      }
      p = e;
    }
  }
  return n;
}

/* The rows of the table under `heading` (a "### ..." line). */
static int table(const char *heading, row *rows, int max) {
  FILE *f = fopen(MDC_REPO_ROOT "/docs/trace-format.md", "r");
  cr_assert_not_null(f, "docs/trace-format.md");
  char line[2048];
  int in = 0, n = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "### ", 4) == 0) in = strncmp(line + 4, heading, strlen(heading)) == 0;
    if (!in || line[0] != '|' || strstr(line, "|---") || strstr(line, "| op |")) continue;
    char *cols[4] = {0};
    int k = 0;
    for (char *save = NULL, *c = strtok_r(line + 1, "|", &save); c && k < 4; c = strtok_r(NULL, "|", &save))
      cols[k++] = c;
    cr_assert_geq(k, 2, "a table row: %s", line);
    row *r = &rows[n++];
    memset(r, 0, sizeof *r);
    char ops[1][40];
    cr_assert_eq(idents(cols[0], ops, 1), 1, "op column: %s", cols[0]);
    snprintf(r->op, sizeof r->op, "%s", ops[0]);
    r->n_args = idents(cols[1], r->args, 32);
    if (k >= 3) r->n_expect = idents(cols[2], r->expect, 8);
    if (n == max) break;
  }
  fclose(f);
  return n;
}

static int has(char list[][40], int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(list[i], s) == 0) return 1;
  return 0;
}

Test(calls, the_docs_abi_table_is_the_call_table) {
  row rows[64];
  int n = table("ABI calls", rows, 64);
  cr_assert_eq(n, MDC_CALL_COUNT, "docs list %d calls, the table %d", n, MDC_CALL_COUNT);
  for (int i = 0; i < n; i++) {
    const mdc_call_desc *c = mdc_call_find(rows[i].op);
    cr_assert_not_null(c, "docs list '%s', which is no call", rows[i].op);
    cr_expect_eq(c->id, (mdc_call)i, "docs list %s out of ABI order", c->name);
    /* Arguments: the table's keys, plus `as` exactly when the call produces something. */
    int want = (int)c->n_args + (c->produces != MDC_OBJ_NONE);
    cr_expect_eq(rows[i].n_args, want, "%s: docs list %d arguments, the table %d", c->name, rows[i].n_args, want);
    for (uint32_t k = 0; k < c->n_args; k++)
      cr_expect(has(rows[i].args, rows[i].n_args, mdc_args[c->args[k].id].key), "%s: docs lack argument '%s'",
                c->name, mdc_args[c->args[k].id].key);
    cr_expect_eq(has(rows[i].args, rows[i].n_args, "as"), c->produces != MDC_OBJ_NONE, "%s: `as`", c->name);
    cr_expect_eq(rows[i].n_expect, (int)c->n_expect, "%s: docs list %d expectations, the table %u", c->name,
                 rows[i].n_expect, c->n_expect);
    for (uint32_t k = 0; k < c->n_expect; k++)
      cr_expect(has(rows[i].expect, rows[i].n_expect, mdc_expect_key(c->expect[k])),
                "%s: docs lack expectation '%s'", c->name, mdc_expect_key(c->expect[k]));
  }
}

Test(calls, the_docs_event_table_lists_every_replayer_event_and_its_fields) {
  row rows[64];
  int n = table("Objects the replayer makes", rows, 64);
  int listed = 0;
  for (size_t i = 0; i < mdc__n_events; i++) {
    const mdc__event_desc *e = &mdc__events[i];
    if (e->flags & (MDC__EV_BLOCK_START | MDC__EV_BLOCK_END)) continue; /* documented with blocks */
    listed++;
    int found = -1;
    for (int k = 0; k < n; k++)
      if (strcmp(rows[k].op, e->name) == 0) found = k;
    cr_assert_geq(found, 0, "docs lack event '%s'", e->name);
    for (int k = 0; k < 12 && e->keys[k]; k++)
      cr_expect(has(rows[found].args, rows[found].n_args, e->keys[k]), "%s: docs lack field '%s'", e->name,
                e->keys[k]);
  }
  cr_expect_eq(n, listed, "docs list %d events, the replayer has %d", n, listed);
}
