/* test_mdc_fuzz.c - `mdc fuzz` without AFL++: bad input (exit 2 and 3 with a message naming the
 * problem), and a whole campaign against a stand-in afl-fuzz and target (shell scripts that
 * write what AFL++ 4.04c writes): statistics and findings in the store, the JSON, triage (the
 * reproduction count, a trace per finding), resume, and Ctrl-C. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];     /* the test's temporary folder */
static char fakebin[128], fakebuild[128];

static void write_exec(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
  chmod(path, 0755);
}

/* A stand-in afl-fuzz: the files AFL++ writes (fuzzer_stats, plot_data, a crash), then it runs
 * for -V seconds or until SIGINT. With MDC_TEST_FIFO it says "up" there once set up. */
static const char *fake_afl =
    "#!/bin/sh\n"
    "out=; name=; secs=5; in=\n"
    "while [ $# -gt 0 ]; do case \"$1\" in -o) out=$2; shift;; -M|-S) name=$2; shift;; -V) secs=$2; shift;;\n"
    "  -i) in=$2; shift;; --) break;; esac; shift; done\n"
    "d=\"$out/$name\"; mkdir -p \"$d/crashes\" \"$d/hangs\" \"$d/queue\"\n"
    "echo \"$in\" > \"$d/input_was\"\n"
    "printf 'run_time : 1\\nexecs_done : 1000\\nexecs_per_sec : 500.00\\ncorpus_count : 7\\nstability : 99.50%%\\n"
    "saved_crashes : 1\\nsaved_hangs : 0\\nedges_found : 42\\n' > \"$d/fuzzer_stats\"\n"
    "printf '# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, "
    "saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found\\n"
    "1, 0, 0, 7, 0, 0, 1.00%%, 1, 0, 1, 500.00, 1000, 42\\n' > \"$d/plot_data\"\n"
    "printf 'CRASH' > \"$d/crashes/id:000000,sig:06,src:000000,time:1500,execs:900,op:havoc,rep:2\"\n"
    "trap 'exit 0' INT TERM\n"
    "if [ -n \"$MDC_TEST_FIFO\" ]; then echo up > \"$MDC_TEST_FIFO\"; fi\n"
    "i=0; while [ $i -lt $secs ]; do sleep 1 & wait $!; i=$((i+1)); done\n";

/* A stand-in target: an input holding CRASH is an oracle finding; with MDC_FUZZ_TRACE_OUT it
 * writes a trace. */
static const char *fake_target =
    "#!/bin/sh\n"
    "if [ -n \"$MDC_FUZZ_TRACE_OUT\" ]; then\n"
    "  printf '{\"mdc_trace\": \"1.1\", \"name\": \"%s\", \"rules\": [\"r\"]}\\n' \"$MDC_FUZZ_TRACE_NAME\" > "
    "\"$MDC_FUZZ_TRACE_OUT\"; exit 0; fi\n"
    "if grep -q CRASH \"$1\" 2>/dev/null; then echo 'MDC-FUZZ-FINDING oracle:fake:NONE:00000001'\n"
    "  echo 'call 1 (fake): a fake finding'; kill -ABRT $$; fi\n"
    "exit 0\n";

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/mdc-fuzz-cli-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(fakebin, sizeof fakebin, "%s/bin", dir);
  snprintf(fakebuild, sizeof fakebuild, "%s/fb", dir);
  mkdir(fakebin, 0755);
  mkdir(fakebuild, 0755);
  char p[256];
  snprintf(p, sizeof p, "%s/fuzz", fakebuild);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/afl-fuzz", fakebin);
  write_exec(p, fake_afl);
  snprintf(p, sizeof p, "%s/afl-tmin", fakebin);
  write_exec(p, "#!/bin/sh\nexit 1\n");
  snprintf(p, sizeof p, "%s/fuzz/md_fuzz_tokens", fakebuild);
  write_exec(p, fake_target);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
}

/* Runs mdc with args (NULL-terminated) and PATH path; captures stdout and stderr. */
static int run_mdc(const char *path, char *out, size_t outn, char *err, size_t errn, const char *const *args) {
  char po[128], pe[128];
  snprintf(po, sizeof po, "%s/stdout", dir);
  snprintf(pe, sizeof pe, "%s/stderr", dir);
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    setenv("PATH", path, 1);
    char *argv[40];
    int k = 0;
    argv[k++] = (char *)MDC_EXE;
    argv[k++] = (char *)"fuzz";
    for (int i = 0; args[i]; i++) argv[k++] = (char *)args[i];
    argv[k] = NULL;
    execv(MDC_EXE, argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  FILE *f = fopen(po, "r");
  size_t n = f ? fread(out, 1, outn - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  f = fopen(pe, "r");
  n = f ? fread(err, 1, errn - 1, f) : 0;
  err[n] = 0;
  if (f) fclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char out[1 << 16], err[1 << 16];

static const char *path_with_fakes(void) {
  static char p[512];
  snprintf(p, sizeof p, "%s:/usr/bin:/bin", fakebin);
  return p;
}

TestSuite(mdc_fuzz, .init = setup, .fini = teardown, .timeout = 120);

Test(mdc_fuzz, an_unknown_or_missing_target_is_a_usage_error) {
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err, (const char *[]){"--target", "bogus", NULL}), 2);
  cr_assert(strstr(err, "--target 'bogus': unknown target"), "%s", err);
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err, (const char *[]){"--seconds", "3", NULL}), 2);
  cr_assert(strstr(err, "--target is required"), "%s", err);
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err,
                       (const char *[]){"--target", "tokens", "--seconds", "-1", NULL}), 2);
  cr_assert(strstr(err, "--seconds"), "%s", err);
}

Test(mdc_fuzz, no_afl_installed_is_a_usage_error_that_says_how_to_get_it) {
  char empty[128];
  snprintf(empty, sizeof empty, "%s/empty", dir);
  mkdir(empty, 0755);
  cr_assert_eq(run_mdc(empty, out, sizeof out, err, sizeof err, (const char *[]){"--target", "tokens", NULL}), 2);
  cr_assert(strstr(err, "afl-fuzz is not installed") && strstr(err, "make fuzz-build"), "%s", err);
}

Test(mdc_fuzz, a_missing_fuzz_build_or_driver_is_a_usage_error) {
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err,
                       (const char *[]){"--target", "shapes", "--fuzz-build", "/nonexistent", NULL}), 2);
  cr_assert(strstr(err, "is not built: run `make fuzz-build` first"), "%s", err);
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err,
                       (const char *[]){"--target", "tokens", "--fuzz-build", fakebuild, "--driver",
                                        "/nonexistent/libvendor.so", NULL}), 2);
  cr_assert(strstr(err, "--driver '/nonexistent/libvendor.so'"), "%s", err);
}

Test(mdc_fuzz, an_unwritable_store_is_a_store_error) {
  char o[128];
  snprintf(o, sizeof o, "%s/out", dir);
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err,
                       (const char *[]){"--target", "tokens", "--fuzz-build", fakebuild, "--db", dir, "--out", o, NULL}),
               3);
  cr_assert(strstr(err, "not a regular file"), "%s", err);
}

static long long scalar(const char *db, const char *sql) {
  sqlite3 *s;
  cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(s, sql, -1, &q, NULL), SQLITE_OK, "%s", sqlite3_errmsg(s));
  long long v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
  sqlite3_finalize(q);
  sqlite3_close(s);
  return v;
}

Test(mdc_fuzz, a_campaign_is_ingested_triaged_and_resumed) {
  char o[128], db[128];
  snprintf(o, sizeof o, "%s/out", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  const char *args[] = {"--target", "tokens", "--fuzz-build", fakebuild, "--db", db, "--out", o, "--seconds", "2",
                        "--json", "--quiet", NULL};
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err, args), 1, "findings: exit 1; %s", err);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  cr_assert_not_null(j, "%s: %s", je.text, out);
  cr_assert_eq(json_integer_value(json_object_get(j, "execs")), 1000);
  cr_assert_eq(json_integer_value(json_object_get(j, "crashes")), 1);
  cr_assert_eq(json_integer_value(json_object_get(j, "hangs")), 0);
  cr_assert_eq(json_integer_value(json_object_get(j, "edges")), 42);
  cr_assert_float_eq(json_real_value(json_object_get(j, "stability")), 99.5, 1e-9);
  cr_assert(json_is_number(json_object_get(j, "execs_per_sec")));
  json_t *f = json_array_get(json_object_get(j, "findings"), 0);
  cr_assert_str_eq(json_string_value(json_object_get(f, "signature")), "oracle:fake:NONE:00000001");
  cr_assert_str_eq(json_string_value(json_object_get(f, "kind")), "oracle");
  cr_assert_eq(json_integer_value(json_object_get(f, "reproduced")), 5);
  cr_assert_eq(json_integer_value(json_object_get(f, "replays")), 5);
  cr_assert_float_eq(json_real_value(json_object_get(f, "first_seen_s")), 1.5, 1e-9);
  const char *trace = json_string_value(json_object_get(f, "trace"));
  cr_assert(trace && access(trace, R_OK) == 0, "the finding's trace is written");
  json_decref(j);
  /* the store: the campaign, its samples, its finding */
  cr_assert_eq(scalar(db, "SELECT count(*) FROM fuzz_campaigns WHERE target = 'tokens' AND resumed = 0"), 1);
  cr_assert_geq(scalar(db, "SELECT count(*) FROM fuzz_stats WHERE instance = 'main'"), 1);
  cr_assert_eq(scalar(db, "SELECT max(execs) FROM fuzz_stats"), 1000);
  cr_assert_eq(scalar(db, "SELECT count(*) FROM fuzz_findings WHERE signature = 'oracle:fake:NONE:00000001' "
                          "AND reproduced = 5 AND trace IS NOT NULL"), 1);
  cr_assert_eq(scalar(db, "SELECT count(*) FROM runs WHERE kind = 'fuzz' AND ended_at IS NOT NULL"), 1);
  /* export from the store */
  char exported[128];
  snprintf(exported, sizeof exported, "%s/exported.jsonl", dir);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("PATH", path_with_fakes(), 1);
    execl(MDC_EXE, MDC_EXE, "fuzz", "export", "oracle:fake", "--out", exported, "--db", db, "--fuzz-build", fakebuild,
          (char *)NULL);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  cr_assert_eq(access(exported, R_OK), 0);
  /* again on the same folder: resumed (afl-fuzz gets -i -), a second run in the store */
  cr_assert_eq(run_mdc(path_with_fakes(), out, sizeof out, err, sizeof err, args), 1, "%s", err);
  char iw[256], buf[64] = "";
  snprintf(iw, sizeof iw, "%s/afl/main/input_was", o);
  FILE *in = fopen(iw, "r");
  cr_assert_not_null(in);
  cr_assert_not_null(fgets(buf, sizeof buf, in));
  fclose(in);
  cr_assert_str_eq(buf, "-\n");
  cr_assert_eq(scalar(db, "SELECT count(*) FROM fuzz_campaigns WHERE resumed = 1"), 1);
  cr_assert_eq(scalar(db, "SELECT count(*) FROM runs WHERE kind = 'fuzz'"), 2);
}

Test(mdc_fuzz, ctrl_c_stops_the_campaign_and_keeps_what_was_ingested) {
  char o[128], db[128], fifo[128];
  snprintf(o, sizeof o, "%s/out", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(fifo, sizeof fifo, "%s/up", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  char po[128], pe[128];
  snprintf(po, sizeof po, "%s/stdout", dir);
  snprintf(pe, sizeof pe, "%s/stderr", dir);
  pid_t pid = fork();
  if (pid == 0) {
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    dup2(fe, 2);
    setenv("PATH", path_with_fakes(), 1);
    setenv("MDC_TEST_FIFO", fifo, 1);
    execl(MDC_EXE, MDC_EXE, "fuzz", "--target", "tokens", "--fuzz-build", fakebuild, "--db", db, "--out", o,
          "--seconds", "600", "--json", "--quiet", "--tmin", "0", (char *)NULL);
    _exit(127);
  }
  /* the stand-in afl-fuzz is up: stop the campaign */
  FILE *f = fopen(fifo, "r");
  char line[16];
  cr_assert_not_null(fgets(line, sizeof line, f));
  fclose(f);
  kill(pid, SIGINT);
  int st;
  waitpid(pid, &st, 0);
  cr_assert(WIFEXITED(st), "mdc ends by itself on SIGINT");
  FILE *jo = fopen(po, "r");
  size_t n = fread(out, 1, sizeof out - 1, jo);
  out[n] = 0;
  fclose(jo);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  cr_assert_not_null(j, "%s: %s", je.text, out);
  cr_assert(json_is_true(json_object_get(j, "interrupted")));
  cr_assert_lt(json_real_value(json_object_get(j, "seconds")), 300.0);
  json_decref(j);
  cr_assert_eq(scalar(db, "SELECT interrupted FROM runs WHERE kind = 'fuzz'"), 1);
  cr_assert_eq(scalar(db, "SELECT count(*) FROM fuzz_findings"), 1, "triaged after the stop");
}
