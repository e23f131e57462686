/* fixture.c - writes a realistic results store for tests and benchmarks (fixture.h). Every row
 * goes through the store's API (one batch per run); only the start and end times are set by SQL
 * afterwards, to spread the runs over days as a real history is. Each case has a personality
 * drawn from a hash of its index: passing, always failing, not supported, flaky, regressing in
 * the newest run, fixed in it, new in it, gone from it, slow. */
#include "fixture.h"

#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mdc/store.h"

static const char *const areas[] = {"domains", "tokens",  "pools",   "execution", "concurrency", "numerics",
                                    "faults",  "handles", "async",   "scopes",    "workloads",   "limits"};
static const char *const words[] = {"copy_from_size_mismatch", "roles_bound_to_model", "forged_value",
                                    "freed_slot_reuse",        "short_output",        "dynamic_resize",
                                    "wait_twice",              "close_while_running", "unmappable_pool",
                                    "fp16_unsupported",        "broadcast_add",       "softmax_axis",
                                    "mem_limit_transient",     "register_pool",       "uninitialized_input",
                                    "token_as_output_twice",   "leak_report_bytes",   "reshape_minus_one"};
#define N_OF(a) (sizeof a / sizeof a[0])

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* A uniform double in [0, 1) from (a, b, c). */
static double unit(uint64_t a, uint64_t b, uint64_t c) {
  return (double)(mix(a * 0x9e3779b97f4a7c15ull ^ mix(b + 0x632be59bd9b4e019ull * c)) >> 11) / 9007199254740992.0;
}

enum { P_PASS, P_NOT_SUPPORTED, P_ALWAYS_FAILS, P_FLAKY, P_REGRESSES, P_FIXED, P_GONE, P_NEW, P_SLOW };

static int personality(uint32_t seed, uint32_t i, uint32_t cases) {
  if (i >= cases - (cases >= 400 ? cases / 200 : 2) && cases >= 20) return P_NEW;
  /* A few fixed ones so that every small fixture has each kind. */
  static const int first[] = {P_PASS, P_REGRESSES, P_FIXED, P_FLAKY, P_ALWAYS_FAILS, P_NOT_SUPPORTED, P_SLOW, P_GONE};
  if (cases >= 40 && i < sizeof first / sizeof first[0]) return first[i];
  uint32_t p = (uint32_t)(mix(((uint64_t)seed << 32) | i) % 1000);
  if (p < 30) return P_NOT_SUPPORTED;
  if (p < 40) return P_ALWAYS_FAILS;
  if (p < 48) return P_FLAKY;
  if (p < 51) return P_REGRESSES;
  if (p < 54) return P_FIXED;
  if (p < 56) return P_GONE;
  if (p < 62) return P_SLOW;
  return P_PASS;
}

typedef struct outcome {
  const char *status;
  int failing;
} outcome;

/* What case i does in run r (of n). NULL status: not in that run. */
static outcome outcome_of(uint32_t seed, uint32_t i, uint32_t cases, uint32_t r, uint32_t n) {
  int last = r == n - 1;
  double u = unit(seed, i, r);
  switch (personality(seed, i, cases)) {
    case P_NOT_SUPPORTED: return (outcome){"NotSupported", 0};
    case P_ALWAYS_FAILS: return (outcome){u < 0.1 ? "Crash" : "Fail", 1};
    case P_FLAKY:
      if (u < 0.15) return (outcome){"Fail", 1};
      if (u < 0.2) return (outcome){"Timeout", 1};
      if (u < 0.4) return (outcome){"Flake", 0};
      return (outcome){"Pass", 0};
    case P_REGRESSES: return last ? (outcome){u < 0.5 ? "Crash" : "Fail", 1} : (outcome){"Pass", 0};
    case P_FIXED: return last ? (outcome){"Pass", 0} : (outcome){"Fail", 1};
    case P_GONE: return last ? (outcome){NULL, 0} : (outcome){"Pass", 0};
    case P_NEW:
      if (!last) return (outcome){NULL, 0};
      return i % 2 ? (outcome){"TraceError", 1} : (outcome){"Pass", 0};
    default: return (outcome){"Pass", 0};
  }
}

static void case_name(uint32_t i, char *out, size_t len) {
  snprintf(out, len, "%s/%s_%04" PRIu32, areas[i % N_OF(areas)], words[(i / N_OF(areas)) % N_OF(words)], i);
}

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && len) vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fail(err, errlen, "fixture: %s: %s", #call, mdc_store_error(s));                             \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

static int write_replay(mdc_store *s, const mdc_fixture_opts *o, uint32_t r, uint32_t n, int64_t *run_id,
                        char *err, size_t errlen) {
  mdc_run_info ri = {.kind = "replay", .driver_name = "mdc-reference", .driver_version = "0.1.0",
                     .driver_path = "(reference)", .backend = "sim", .device = "mdc simulated GPU",
                     .config = "backend=sim", .host = "ci-runner-3", .shard_count = 1};
  char rev[32];
  snprintf(rev, sizeof rev, "v0.1.0-%" PRIu32 "-g%07" PRIx32, r + 1, (uint32_t)(mix(r + 77) & 0xfffffff));
  ri.revision = rev;
  int last = r == n - 1, ret = -1;
  uint32_t k[MDC_CS_COUNT] = {0}, cases = 0;
  int64_t c = 0;
  CHECK(mdc_store_run_begin(s, &ri, run_id, NULL));
  CHECK(mdc_store_batch_begin(s));
  for (uint32_t i = 0; i < o->cases; i++) {
    outcome oc = outcome_of(o->seed, i, o->cases, r, n);
    if (!oc.status) continue;
    char name[128], path[192], msg[512], drv[160];
    case_name(i, name, sizeof name);
    snprintf(path, sizeof path, "conformance/traces/%s.jsonl", name);
    CHECK(mdc_store_case_begin(s, *run_id, name, path, &c));
    cases++;
    /* The newest run stopped on its last case: it stays Running (killed) or becomes Interrupted. */
    if (last && o->last_state && i == o->cases - 1) break;
    double base = personality(o->seed, i, o->cases) == P_SLOW ? 0.8 + 4 * unit(o->seed, i, 999) : 0.004 + 0.03 * unit(o->seed, i, 998);
    mdc_case_result res = {.status = oc.status, .duration_s = base * (0.85 + 0.3 * unit(o->seed + 1, i, r))};
    uint32_t line = 3 + (uint32_t)(mix(i) % 40);
    if (oc.failing || !strcmp(oc.status, "Flake")) {
      snprintf(drv, sizeof drv, "token 0x%016" PRIx64 ": freed by free_buffer", mix(i + r));
      snprintf(msg, sizeof msg, "%s%s:%" PRIu32 ": execute: status GENERAL_FAILURE, expected NONE (last_error: \"%s\")",
               !strcmp(oc.status, "Flake") ? "passed on re-run; first run: Fail: " : "", path, line, drv);
      res.line = line;
      res.message = !strcmp(oc.status, "Crash") ? "killed by signal SIGSEGV (Segmentation fault)"
                    : !strcmp(oc.status, "Timeout") ? "no result after 30 s: killed" : msg;
      res.expected = !strcmp(oc.status, "Fail") ? "NONE" : NULL;
      res.actual = !strcmp(oc.status, "Fail") ? "GENERAL_FAILURE" : NULL;
      res.event = "execute";
      res.rule = "SPEC 4; SPEC 8.5";
      res.driver_message = !strcmp(oc.status, "Fail") ? drv : NULL;
      res.advisory = i % 3 == 0 ? "last_error does not mention the role (advisory)" : NULL;
    }
    if (!strcmp(oc.status, "NotSupported")) res.message = "requires fp16 kernels (driver: no)";
    if (!strcmp(oc.status, "TraceError")) res.message = "trace line 7: unknown op 'exec'";
    CHECK(mdc_store_case_finish(s, c, &res));
    k[mdc_store_status_parse(oc.status)]++;
  }
  CHECK(mdc_store_batch_end(s, 1));
  if (!last || o->last_state != 2) {
    uint32_t unexpected = mdc_store_unexpected_of(k);
    mdc_run_summary sum = {cases, k[MDC_CS_PASS], k[MDC_CS_FAIL], k[MDC_CS_CRASH], k[MDC_CS_TIMEOUT], unexpected,
                           last && o->last_state == 1};
    CHECK(mdc_store_run_finish(s, *run_id, &sum));
  }
  ret = 0;
out:
  return ret;
}

static const char *const mutant_names[] = {
  "init_unchecked", "stale_slot_token", "free_under_kernel", "writers_unguarded", "combine_zero_wrong",
  "role_any_model", "short_output_ok", "leak_bytes_initial", "forge_low_bits", "wait_twice_ok",
  "close_frees_inflight", "pool_offset_unchecked", "dims_not_kept"};

static int write_mutants(mdc_store *s, const mdc_fixture_opts *o, int64_t *run_id, char *err, size_t errlen) {
  mdc_run_info ri = {.kind = "mutants", .driver_name = "mdc-reference", .driver_version = "0.1.0",
                     .backend = "sim", .device = "mdc simulated GPU", .host = "ci-runner-3", .revision = "v0.1.0-50"};
  int ret = -1;
  int64_t c;
  CHECK(mdc_store_run_begin(s, &ri, run_id, NULL));
  uint32_t killed = 0;
  for (size_t m = 0; m < N_OF(mutant_names); m++) {
    char name[96], details[2048], desc[160];
    snprintf(name, sizeof name, "mutants/%s", mutant_names[m]);
    snprintf(desc, sizeof desc, "breaks the rule its name says (fixture mutant %zu)", m);
    CHECK(mdc_store_case_begin(s, *run_id, name, "conformance/mutants/mutants.txt", &c));
    mdc_case_result res = {.status = "Pass", .duration_s = 2 + (double)m, .rule = desc};
    if (m == 7) {
      res.status = "Fail";
      res.message = "survived: no trace failed on it";
      res.details = "{\"killed_by\": []}";
    } else if (m == 11) {
      res.status = "TraceError";
      res.message = "build failed, see build-mutants/pool_offset_unchecked/build.log";
      res.details = "{\"killed_by\": []}";
    } else {
      size_t n = 1 + mix(m + o->seed) % 4, len = (size_t)snprintf(details, sizeof details, "{\"killed_by\": [");
      for (size_t k = 0; k < n; k++) {
        char tn[128];
        case_name((uint32_t)(mix(m * 31 + k) % (o->cases ? o->cases : 1) / 12 * 12 + m % 12), tn, sizeof tn);
        len += (size_t)snprintf(details + len, sizeof details - len, "%s\"%s\"", k ? ", " : "", tn);
      }
      snprintf(details + len, sizeof details - len, "], \"description\": \"%s\"}", desc);
      res.details = details;
      killed++;
    }
    CHECK(mdc_store_case_finish(s, c, &res));
  }
  uint32_t total = (uint32_t)N_OF(mutant_names);
  CHECK(mdc_store_run_end(s, *run_id, total, killed, total - killed, 0, 0, total - killed));
  ret = 0;
out:
  return ret;
}

static int write_fuzz(mdc_store *s, const mdc_fixture_opts *o, int64_t *run_id, char *err, size_t errlen) {
  mdc_run_info ri = {.kind = "fuzz", .driver_name = "mdc-reference", .driver_version = "0.1.0", .backend = "sim",
                     .host = "fuzz-box", .revision = "v0.1.0-50", .seed = 42, .has_seed = 1};
  int ret = -1;
  CHECK(mdc_store_run_begin(s, &ri, run_id, NULL));
  mdc_fuzz_campaign camp = {.target = "fuzz_trace", .jobs = 2, .planned_s = 3600, .out_dir = "fuzz/out/fuzz_trace"};
  CHECK(mdc_store_fuzz_campaign(s, *run_id, &camp));
  enum { SAMPLES = 121 };
  mdc_fuzz_stat v[2 * SAMPLES];
  static const char *const inst[] = {"main", "s1"};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < SAMPLES; i++) {
      double t = 30.0 * i, rate = (k ? 26000 : 31000) * (0.9 + 0.2 * unit(o->seed, (uint64_t)i, (uint64_t)k));
      if (i > 60 && i < 66) rate *= 0.4; /* a dip: a slow input in the queue */
      v[k * SAMPLES + i] = (mdc_fuzz_stat){.instance = inst[k], .t_s = t, .execs = (int64_t)(t * rate),
                                           .execs_per_sec = i ? rate : 0, .edges = (int64_t)(900 + 310 * log1p(t / 20.0)) - k * 40,
                                           .corpus = 20 + i * 2, .crashes = i / 40, .hangs = i > 100,
                                           .stability = 99.2 - k * 0.7, .rss_kb = 48000 + i * 40};
    }
  CHECK(mdc_store_fuzz_stats(s, *run_id, v, 2 * SAMPLES));
  mdc_fuzz_finding f[] = {
    {.target = "fuzz_trace", .signature = "asan:heap-use-after-free@buffer.c:212", .kind = "crash",
     .message = "heap-use-after-free READ of size 8 in md__buffer_copy_to", .count = 3,
     .seen_at = "2026-11-20T10:12:00.000Z", .replays = 10, .reproduced = 10,
     .reproducer = "fuzz/out/fuzz_trace/main/crashes/id:000000,sig:06", .minimized = "fuzz/min/uaf.bin",
     .trace = "fuzz/traces/uaf_copy_to.jsonl"},
    {.target = "fuzz_trace", .signature = "oracle:SPEC 5: token accepted after free_buffer", .kind = "oracle",
     .message = "copy_to with a freed token returned NONE", .count = 2, .seen_at = "2026-11-20T10:31:00.000Z",
     .replays = 10, .reproduced = 10, .reproducer = "fuzz/out/fuzz_trace/s1/crashes/id:000001",
     .trace = "fuzz/traces/freed_token.jsonl"},
    {.target = "fuzz_trace", .signature = "hang:wait_event timeout=UINT64_MAX", .kind = "hang", .count = 1,
     .seen_at = "2026-11-20T10:44:00.000Z", .replays = 5, .reproduced = 3,
     .reproducer = "fuzz/out/fuzz_trace/main/hangs/id:000000"},
    {.target = "fuzz_trace", .signature = "asan:SEGV@execute.c:480", .kind = "crash",
     .message = "SEGV on unknown address 0x000000000010", .count = 7, .seen_at = "2026-11-20T10:05:00.000Z",
     .replays = 10, .reproduced = 9, .reproducer = "fuzz/out/fuzz_trace/s1/crashes/id:000000"},
  };
  for (size_t i = 0; i < N_OF(f); i++) {
    f[i].replays = f[i].replays ? f[i].replays : -1;
    CHECK(mdc_store_fuzz_finding(s, *run_id, &f[i], NULL));
  }
  mdc_run_summary sum = {0};
  CHECK(mdc_store_run_finish(s, *run_id, &sum));
  ret = 0;
out:
  return ret;
}

#undef CHECK

/* Spreads the runs over days: run i of the history starts on day i at 02:00, and lasts about
 * as long as its cases took. */
static int set_times(const char *path, const int64_t *ids, uint32_t n, int64_t mutants, int64_t fuzz, char *err,
                     size_t errlen) {
  sqlite3 *db;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    sqlite3_close(db);
    return fail(err, errlen, "fixture: cannot reopen %s", path);
  }
  sqlite3_busy_timeout(db, 5000);
  char sql[512];
  int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  for (uint32_t i = 0; i < n && rc == SQLITE_OK; i++) {
    snprintf(sql, sizeof sql,
             "UPDATE runs SET started_at = strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', '2026-11-20T02:00:00', '-%u days'), "
             "ended_at = CASE WHEN ended_at IS NULL THEN NULL ELSE strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', "
             "'2026-11-20T02:00:00', '-%u days', '+' || (SELECT 1 + total(duration_s) FROM cases WHERE run_id = %" PRId64
             ") || ' seconds') END WHERE id = %" PRId64,
             n - 1 - i, n - 1 - i, ids[i], ids[i]);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK && mutants > 0) {
    snprintf(sql, sizeof sql, "UPDATE runs SET started_at = '2026-11-20T03:00:00.000Z', ended_at = "
             "'2026-11-20T03:04:10.000Z' WHERE id = %" PRId64, mutants);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK && fuzz > 0) {
    snprintf(sql, sizeof sql, "UPDATE runs SET started_at = '2026-11-20T10:00:00.000Z', ended_at = "
             "'2026-11-20T11:00:02.000Z' WHERE id = %" PRId64, fuzz);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) fail(err, errlen, "fixture: setting times: %s", sqlite3_errmsg(db));
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

/* Creates path (refused when it exists) and closes it again; -1 with err on failure. */
int mdc_fixture_write(const char *path, const mdc_fixture_opts *o, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) == 0) return fail(err, errlen, "fixture: '%s' exists; give a new path", path);
  mdc_store *s;
  if (mdc_store_open(path, &s, err, errlen) != 0) return -1;
  uint32_t n = o->runs ? o->runs : 1;
  int64_t *ids = calloc(n, sizeof *ids), mutants = 0, fuzz = 0;
  int ret = -1;
  if (!ids) {
    fail(err, errlen, "fixture: out of memory");
    goto out;
  }
  for (uint32_t r = 0; r < n; r++)
    if (write_replay(s, o, r, n, &ids[r], err, errlen) != 0) goto out;
  if (o->mutants && write_mutants(s, o, &mutants, err, errlen) != 0) goto out;
  if (o->fuzz && write_fuzz(s, o, &fuzz, err, errlen) != 0) goto out;
  mdc_store_close(s);
  s = NULL;
  ret = set_times(path, ids, n, mutants, fuzz, err, errlen);
out:
  mdc_store_close(s);
  free(ids);
  return ret;
}
