/* test_group.c - grouped replay (`mdc replay --group`, docs/mdc-cli.md) through the built `mdc`
 * and the planted drivers of drivers/group_driver.c: a crash or a hang in a group costs only its
 * case, a state leak between traces is OrderDependent naming the trace before it (in the JSON
 * and the store), --shuffle's order is the seed's alone and stored, a child's memory growth is
 * bounded. */
#include <sqlite3.h>

#include "test_cli_support.h"

/* n traces that open a device and a client and close them, named grp/tNN, in dir. */
static void open_close_traces(const char *dir, int n) {
  for (int i = 0; i < n; i++) {
    char name[32], file[32], text[1024];
    snprintf(name, sizeof name, "grp/t%02d", i);
    snprintf(file, sizeof file, "t%02d.jsonl", i);
    snprintf(text, sizeof text,
             "{\"mdc_trace\": \"1.0\", \"name\": \"%s\", \"rules\": [\"mdc CLI test\"]}\n"
             "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
             "{\"op\": \"open_client\", \"as\": \"c\"}\n"
             "{\"op\": \"close_client\", \"client\": \"c\"}\n"
             "{\"op\": \"close_device\", \"device\": \"d\"}\n",
             name);
    write_traces(dir, file, text, NULL);
  }
}

/* Sets mem_limit=64K on its device (the sticky driver then keeps it for later devices). */
static const char TRACE_SETS_LIMIT[] = T_HEADER("grp/a_sets_limit")
    "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim;mem_limit=65536\"}\n"
    "{\"op\": \"close_device\", \"device\": \"d\"}\n";

/* Adds two 256 KiB tensors on the device: passes on a device with the default limit. */
#define BIG_OPERAND "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [65536], \"lifetime\": \"SUBGRAPH_INPUT\"}, "
static const char TRACE_BIG[] = T_HEADER("grp/b_big_add")
    "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
    "{\"op\": \"open_client\", \"as\": \"c\"}\n"
    "{\"op\": \"model\", \"as\": \"add\", \"operands\": [" BIG_OPERAND BIG_OPERAND
    "{\"type\": \"INT32\", \"lifetime\": \"CONSTANT_COPY\", \"offset\": 0, \"length\": 4}, "
    "{\"type\": \"TENSOR_FLOAT32\", \"dims\": [65536], \"lifetime\": \"SUBGRAPH_OUTPUT\"}], "
    "\"operations\": [{\"type\": \"ADD\", \"inputs\": [0, 1, 2], \"outputs\": [3]}], "
    "\"inputs\": [0, 1], \"outputs\": [3], \"operand_values\": {\"i32\": [0]}, \"pools\": []}\n"
    "{\"op\": \"prepare_model\", \"model\": \"add\", \"as\": \"pm\"}\n"
    "{\"op\": \"memory\", \"as\": \"a\", \"kind\": \"ashmem\", \"size\": 262144}\n"
    "{\"op\": \"memory\", \"as\": \"b\", \"kind\": \"ashmem\", \"size\": 262144}\n"
    "{\"op\": \"memory\", \"as\": \"o\", \"kind\": \"ashmem\", \"size\": 262144}\n"
    "{\"op\": \"execute\", \"prepared\": \"pm\", \"request\": {\"inputs\": [{\"pool\": 0, \"length\": 262144}, "
    "{\"pool\": 1, \"length\": 262144}], \"outputs\": [{\"pool\": 2, \"length\": 262144}], \"pools\": [{\"memory\": \"a\"}, {\"memory\": \"b\"}, {\"memory\": \"o\"}]}, "
    "\"expect\": {\"shapes\": [{\"dims\": [65536]}]}}\n";

/* The JSON result of the case named name (asserts it is there). */
static json_t *jcase(json_t *j, const char *name) {
  json_t *res = json_object_get(j, "results"), *c;
  size_t i;
  json_array_foreach(res, i, c) {
    if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) return c;
  }
  cr_assert_fail("no case %s", name);
  return NULL;
}

static const char *jstr(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

Test(group, a_crash_on_every_seventh_trace_of_a_group_costs_only_those_cases) {
  char dir[64];
  tmpdir(dir);
  open_close_traces(dir, 20);
  /* One job, so the children run the cases in path order: the 7th of the first child (t06) and
   * the 7th of the child that goes on after it (t13) crash; each passes alone. */
  mdc_out r = mdc("replay", "--no-db", "--json", "--jobs", "1", "--group", "20", "--driver", MDC_TEST_SEVENTH_SO, dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "cases"), 20);
  cr_expect_eq(jint(j, "passed"), 18, "%s", r.out);
  cr_expect_eq(jint(j, "group_size"), 20);
  for (int i = 0; i < 20; i++) {
    char name[32];
    snprintf(name, sizeof name, "grp/t%02d", i);
    json_t *c = jcase(j, name);
    if (i == 6 || i == 13) {
      char before[32];
      snprintf(before, sizeof before, "grp/t%02d", i - 1);
      cr_expect_str_eq(jstr(c, "status"), "OrderDependent", "%s", name);
      cr_expect_str_eq(jstr(c, "preceded_by"), before, "%s", name);
      cr_expect(strstr(jstr(c, "message"), "Crash after"), "%s", jstr(c, "message"));
      cr_expect(strstr(jstr(c, "message"), "SIGABRT"), "%s", jstr(c, "message"));
    } else {
      cr_expect_str_eq(jstr(c, "status"), "Pass", "%s: %s", name, jstr(c, "message"));
    }
  }
  /* t00-t06 crash; t06 alone; t07-t13 crash; t13 alone; t14-t19; the pairs (t05,t06), (t12,t13). */
  cr_expect_eq(jint(j, "children"), 7);
  json_decref(j);
  mdc_out_free(&r);
  /* --group 1: every trace in a process of its own, the first open of each: nothing crashes. */
  r = mdc("replay", "--no-db", "--json", "--jobs", "2", "--group", "1", "--driver", MDC_TEST_SEVENTH_SO, dir);
  cr_assert_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  j = out_json(&r);
  cr_expect_eq(jint(j, "passed"), 20);
  cr_expect_eq(jint(j, "children"), 20);
  json_decref(j);
  mdc_out_free(&r);
}

static long db_long(const char *db, const char *sql, char *text, size_t len) {
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "open %s", db);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  long v = (long)sqlite3_column_int64(st, 0);
  if (text) snprintf(text, len, "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "");
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

Test(group, a_state_leak_between_traces_is_order_dependent_naming_the_trace_before) {
  char dir[64], db[128], text[256];
  tmpdir(dir);
  write_traces(dir, "a.jsonl", TRACE_SETS_LIMIT, "b.jsonl", TRACE_BIG, NULL);
  snprintf(db, sizeof db, "%s/r.db", dir);
  mdc_out r = mdc("replay", "--db", db, "--json", "--jobs", "1", "--group", "2", "--driver", MDC_TEST_STICKY_SO, dir);
  cr_assert_eq(r.rc, 1, "OrderDependent is unexpected: rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "grp/a_sets_limit"), "Pass");
  json_t *b = jcase(j, "grp/b_big_add");
  cr_expect_str_eq(jstr(b, "status"), "OrderDependent", "%s", jstr(b, "message"));
  cr_expect_str_eq(jstr(b, "preceded_by"), "grp/a_sets_limit");
  /* Both traces are the reproducer, and replaying the two as a group did reproduce it. */
  cr_expect(strstr(jstr(b, "message"), "the two reproduce it"), "%s", jstr(b, "message"));
  cr_expect(strstr(jstr(b, "message"), "--group 2 --keep-order"), "%s", jstr(b, "message"));
  json_decref(j);
  mdc_out_free(&r);
  cr_expect_eq(db_long(db, "SELECT group_size FROM runs", NULL, 0), 2);
  db_long(db, "SELECT preceded_by FROM cases WHERE status = 'OrderDependent'", text, sizeof text);
  cr_expect_str_eq(text, "grp/a_sets_limit");
  /* The reproducer the message gives: the two, in that order, as a group of two. */
  char a[128], bp[128];
  snprintf(a, sizeof a, "%s/a.jsonl", dir);
  snprintf(bp, sizeof bp, "%s/b.jsonl", dir);
  r = mdc("replay", "--no-db", "--json", "--group", "2", "--keep-order", "--no-rerun", "--driver", MDC_TEST_STICKY_SO,
          bp, a);
  j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "grp/b_big_add"), "Pass", "--keep-order: b first, a after it: no leak");
  json_decref(j);
  mdc_out_free(&r);
  /* --group 1: no trace sees another's state. */
  r = mdc("replay", "--no-db", "--json", "--group", "1", "--driver", MDC_TEST_STICKY_SO, dir);
  cr_expect_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  mdc_out_free(&r);
}

Test(group, shuffle_orders_cases_by_its_seed_alone_and_is_stored) {
  char dir[64], db[128], first[4096] = "";
  tmpdir(dir);
  open_close_traces(dir, 6);
  write_traces(dir, "a.jsonl", TRACE_SETS_LIMIT, "b.jsonl", TRACE_BIG, NULL);
  snprintf(db, sizeof db, "%s/r.db", dir);
  for (int round = 0; round < 2; round++) {
    mdc_out r = mdc("replay", "--db", db, "--json", "--jobs", "2", "--group", "8", "--shuffle", "29",
                    "--driver", MDC_TEST_STICKY_SO, dir);
    json_t *j = out_json(&r);
    cr_expect_str_eq(jstr(j, "shuffle_seed"), "29");
    /* Every case's status and the case before each OrderDependent one, in path order. */
    char got[4096] = "";
    json_t *res = json_object_get(j, "results"), *c;
    size_t i;
    json_array_foreach(res, i, c) {
      size_t l = strlen(got);
      snprintf(got + l, sizeof got - l, "%s=%s<%s;", jstr(c, "name"), jstr(c, "status"), jstr(c, "preceded_by"));
    }
    if (round == 0) snprintf(first, sizeof first, "%s", got);
    else cr_expect_str_eq(got, first, "the same seed, the same groups and verdicts");
    json_decref(j);
    mdc_out_free(&r);
  }
  cr_expect_eq(db_long(db, "SELECT COUNT(*) FROM runs WHERE shuffle_seed = 29", NULL, 0), 2);
}

Test(group, a_hang_in_a_group_times_out_alone_and_the_rest_goes_on) {
  char dir[64];
  tmpdir(dir);
  write_traces(dir, "a.jsonl", TRACE_OPEN_CLOSE, "b.jsonl", TRACE_ADD, "c.jsonl", TRACE_OPEN_CLOSE, NULL);
  /* c is a copy of a under another name (names are unique in a run). */
  char c[128];
  snprintf(c, sizeof c, "%s/c.jsonl", dir);
  spit(c, T_HEADER("cli/c_open_close") "{\"op\": \"open_device\", \"as\": \"d\", \"config\": \"backend=sim\"}\n"
                                       "{\"op\": \"close_device\", \"device\": \"d\"}\n");
  mdc_out r = mdc("replay", "--no-db", "--json", "--jobs", "1", "--group", "3", "--timeout", "1", "--driver",
                  MDC_TEST_HANG_SO, dir);
  cr_assert_eq(r.rc, 1, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_str_eq(jstatus(j, "cli/a_open_close"), "Pass");
  cr_expect_str_eq(jstatus(j, "cli/b_execute_add"), "Timeout", "it hangs alone too: its own verdict");
  cr_expect_str_eq(jstatus(j, "cli/c_open_close"), "Pass", "the rest of the group goes on in a new child");
  cr_expect_eq(jint(j, "children"), 3);
  json_decref(j);
  mdc_out_free(&r);
}

Test(group, a_child_whose_memory_grows_past_the_bound_hands_the_rest_to_a_new_one) {
  char dir[64];
  tmpdir(dir);
  open_close_traces(dir, 10);
  char *envv[] = {"MDC_TEST_GROW_MIB=8", NULL};
  mdc_out r = mdc_env(envv, "replay", "--no-db", "--json", "--jobs", "1", "--group", "10", "--group-mib", "20",
                      "--driver", MDC_TEST_GROW_SO, dir, (char *)NULL);
  cr_assert_eq(r.rc, 0, "rc %d\n%s", r.rc, r.err);
  json_t *j = out_json(&r);
  cr_expect_eq(jint(j, "passed"), 10);
  long children = jint(j, "children");
  cr_expect(children >= 2 && children <= 5, "8 MiB a trace, 20 MiB a child: %ld children", children);
  json_decref(j);
  mdc_out_free(&r);
}

Test(group, bad_group_options_are_usage_errors) {
  char dir[64];
  tmpdir(dir);
  open_close_traces(dir, 1);
  const char *bad[][2] = {{"--group", "0"}, {"--group", "x"}, {"--group-mib", "0"}, {"--shuffle", "-1"},
                          {"--shuffle", "seed"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mdc_out r = mdc("replay", "--no-db", (char *)bad[i][0], (char *)bad[i][1], dir);
    cr_expect_eq(r.rc, 2, "%s %s: rc %d", bad[i][0], bad[i][1], r.rc);
    cr_expect(strstr(r.err, bad[i][0]), "%s", r.err);
    mdc_out_free(&r);
  }
}
