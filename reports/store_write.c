/* store_write.c - writing the results store: a run begun and finished, a case begun and
 * completed, each its own small transaction (or part of an open batch), and batches that group
 * bulk writes in one transaction (docs/results-schema.md, "WAL, durability and crashes"). */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define NOW MDC_STORE__NOW
#define fail mdc_store__fail
#define fail_db mdc_store__fail_db
#define bind_text mdc_store__bind_text
#define exec mdc_store__exec
#define prepare mdc_store__prepare

/* The run and case writes' statements, made at open and reused; -1 with the message. */
int mdc_store__prepare_writes(mdc_store *s) {
  return prepare(s, &s->run_insert,
                 "INSERT INTO runs (uuid, started_at, kind, driver_name, driver_version, "
                 "driver_path, backend, device, config, seed, shard_index, shard_count, host, "
                 "revision, driver_build_id, driver_sha256, selection, selection_n, shuffle_seed, "
                 "group_size) VALUES (?1, " NOW ", ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                 "?14, ?15, ?16, ?17, ?18, ?19)") ||
         prepare(s, &s->run_end,
                 "UPDATE runs SET ended_at = " NOW ", cases = ?2, passed = ?3, failed = ?4, "
                 "crashed = ?5, timed_out = ?6, unexpected = ?7, interrupted = ?8 WHERE id = ?1") ||
         prepare(s, &s->case_interrupt,
                 "UPDATE cases SET status = 'Interrupted', ended_at = " NOW " "
                 "WHERE run_id = ?1 AND status = 'Running'") ||
         prepare(s, &s->case_insert,
                 "INSERT INTO cases (run_id, name, path, status, started_at) "
                 "VALUES (?1, ?2, ?3, 'Running', " NOW ")") ||
         prepare(s, &s->case_end,
                 "UPDATE cases SET status = ?2, ended_at = " NOW ", duration_s = ?3, line = ?4, "
                 "message = ?5, expected = ?6, actual = ?7, event = ?8, rule = ?9, "
                 "driver_message = ?10, advisory = ?11, details = ?12, signature = ?13, "
                 "stack = ?14, reduced = ?15, preceded_by = ?16 "
                 "WHERE id = ?1 AND status = 'Running'")
           ? -1 : 0;
}

/* 0 when s may be written; else -1 saying what was refused. */
int mdc_store__writable(mdc_store *s, const char *what) {
  if (s->readonly) return fail(s, "%s: the store was opened read-only", what);
  return 0;
}
#define writable mdc_store__writable

/* Starts one write transaction on s (one store per thread); -1 and nothing started on failure. */
int mdc_store_batch_begin(mdc_store *s) {
  if (!s) return -1;
  if (writable(s, "batch_begin")) return -1;
  if (s->in_batch) return fail(s, "batch_begin: a batch is already open");
  if (exec(s, s->db, "BEGIN IMMEDIATE", "batch_begin: cannot start the transaction") != 0) return -1;
  s->in_batch = 1;
  return 0;
}

/* Commits (or rolls back) the batch; a failed commit rolls back and returns -1. */
int mdc_store_batch_end(mdc_store *s, int commit) {
  if (!s) return -1;
  if (!s->in_batch) return fail(s, "batch_end: no batch is open");
  s->in_batch = 0;
  if (commit && exec(s, s->db, "COMMIT", "batch_end: cannot commit") == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return commit ? -1 : 0;
}

/* RFC 4122 version 4: 122 random bits, version nibble 4, variant bits 10. */
static int make_uuid(char out[37]) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    got += (size_t)n;
  }
  if (got < sizeof b) {  /* getrandom missing (ENOSYS): the device instead */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    for (got = 0; got < sizeof b;) {
      ssize_t n = read(fd, b + got, sizeof b - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    close(fd);
    if (got < sizeof b) return -1;
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
           b[13], b[14], b[15]);
  return 0;
}

/* Steps a write statement once and resets it; fails with what on error. */
int mdc_store__step_write(mdc_store *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) fail_db(s, s->db, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? 0 : -1;
}
#define step_write mdc_store__step_write

static int run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum);

/* Inserts and commits the run row; on failure nothing is written (store.h). */
int mdc_store_run_begin(mdc_store *s, const mdc_run_info *ri, int64_t *run_id, char uuid[37]) {
  if (!s) return -1;
  if (writable(s, "run_begin")) return -1;
  if (!ri || !ri->kind || !ri->kind[0]) return fail(s, "run_begin: a run needs a kind");
  uint32_t count = ri->shard_count ? ri->shard_count : 1;
  if (ri->shard_index >= count)
    return fail(s, "run_begin: shard %" PRIu32 "/%" PRIu32 ": the index must be below the count",
                ri->shard_index, count);
  char id[37], host[256];
  if (make_uuid(id) != 0) return fail(s, "run_begin: no random bytes for a uuid: %s", strerror(errno));
  const char *h = ri->host;
  if (!h) {
    h = "unknown";
    if (gethostname(host, sizeof host) == 0) {
      host[sizeof host - 1] = '\0';
      if (host[0]) h = host;
    }
  }
  const char *rev = ri->revision;
  if (!rev) rev = getenv("MDC_REVISION");
  if (!rev || !rev[0]) rev = "unknown";
  sqlite3_stmt *st = s->run_insert;
  bind_text(st, 1, id);
  bind_text(st, 2, ri->kind);
  bind_text(st, 3, ri->driver_name);
  bind_text(st, 4, ri->driver_version);
  bind_text(st, 5, ri->driver_path);
  bind_text(st, 6, ri->backend);
  bind_text(st, 7, ri->device);
  bind_text(st, 8, ri->config);
  /* SQLite integers are signed: a seed keeps its 64 bits (printf('%llu', seed) shows it). */
  if (ri->has_seed) sqlite3_bind_int64(st, 9, (int64_t)ri->seed);
  else sqlite3_bind_null(st, 9);
  sqlite3_bind_int64(st, 10, ri->shard_index);
  sqlite3_bind_int64(st, 11, count);
  bind_text(st, 12, h);
  bind_text(st, 13, rev);
  bind_text(st, 14, ri->driver_build_id);
  bind_text(st, 15, ri->driver_sha256);
  bind_text(st, 16, ri->selection);
  if (ri->selection) sqlite3_bind_int64(st, 17, ri->selection_n);
  else sqlite3_bind_null(st, 17);
  if (ri->has_shuffle_seed) sqlite3_bind_int64(st, 18, (int64_t)ri->shuffle_seed);
  else sqlite3_bind_null(st, 18);
  if (ri->group_size) sqlite3_bind_int64(st, 19, ri->group_size);
  else sqlite3_bind_null(st, 19);
  if (step_write(s, st, "run_begin: cannot insert the run") != 0) return -1;
  if (run_id) *run_id = sqlite3_last_insert_rowid(s->db);
  if (uuid) memcpy(uuid, id, 37);
  return 0;
}

/* Sets ended_at, the counts and interrupted, and for an interrupted run turns its Running cases
 * into Interrupted, all or nothing (a savepoint, or the open batch); -1 (no change) for no such
 * run. */
int mdc_store_run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum) {
  if (!s) return -1;
  if (writable(s, "run_end")) return -1;
  if (!sum) return fail(s, "run_end: run %" PRId64 ": no summary given", run_id);
  int own = mdc_store__savepoint_begin(s, "run_end");
  if (own < 0) return -1;
  return mdc_store__savepoint_end(s, "run_end", own, run_finish(s, run_id, sum));
}

static int run_finish(mdc_store *s, int64_t run_id, const mdc_run_summary *sum) {
  if (sum->interrupted) {
    sqlite3_stmt *ci = s->case_interrupt;
    sqlite3_bind_int64(ci, 1, run_id);
    if (step_write(s, ci, "run_end: cannot mark the running cases interrupted") != 0) return -1;
  }
  sqlite3_stmt *st = s->run_end;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, sum->cases);
  sqlite3_bind_int64(st, 3, sum->passed);
  sqlite3_bind_int64(st, 4, sum->failed);
  sqlite3_bind_int64(st, 5, sum->crashed);
  sqlite3_bind_int64(st, 6, sum->timed_out);
  sqlite3_bind_int64(st, 7, sum->unexpected);
  sqlite3_bind_int64(st, 8, sum->interrupted ? 1 : 0);
  if (step_write(s, st, "run_end: cannot update the run") != 0) return -1;
  if (sqlite3_changes(s->db) != 1) return fail(s, "run_end: run %" PRId64 ": no such run", run_id);
  return 0;
}

/* mdc_store_run_finish with interrupted 0 (kept for v1 callers). */
int mdc_store_run_end(mdc_store *s, int64_t run_id, uint32_t cases, uint32_t passed,
                      uint32_t failed, uint32_t crashed, uint32_t timed_out, uint32_t unexpected) {
  mdc_run_summary sum = {cases, passed, failed, crashed, timed_out, unexpected, 0};
  return mdc_store_run_finish(s, run_id, &sum);
}

/* Inserts the case as Running and commits; -1 and nothing written on failure. */
int mdc_store_case_begin(mdc_store *s, int64_t run_id, const char *name, const char *path,
                         int64_t *case_id) {
  if (!s) return -1;
  if (writable(s, "case_begin")) return -1;
  if (!name) return fail(s, "case_begin: run %" PRId64 ": a case needs a name", run_id);
  sqlite3_stmt *st = s->case_insert;
  sqlite3_bind_int64(st, 1, run_id);
  bind_text(st, 2, name);
  bind_text(st, 3, path);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
    return fail(s, "case_begin: case '%s': run %" PRId64 ": no such run", name, run_id);
  if (rc != SQLITE_DONE) return fail_db(s, s->db, "case_begin: cannot insert the case");
  if (case_id) *case_id = sqlite3_last_insert_rowid(s->db);
  return 0;
}

/* Completes a Running case in one statement; -1 and no change on a bad status, bad JSON
 * details, or a case that is not Running. */
int mdc_store_case_finish(mdc_store *s, int64_t case_id, const mdc_case_result *r) {
  if (!s) return -1;
  if (writable(s, "case_end")) return -1;
  if (!r) return fail(s, "case_end: case %" PRId64 ": no result given", case_id);
  int known = mdc_store_status_parse(r->status);
  if (known < 0 || known == MDC_CS_RUNNING)
    return fail(s, "case_end: case %" PRId64 ": unknown status '%s' (one of Pass, Fail, Crash, "
                "Timeout, NotSupported, ExpectedFail, UnexpectedPass, Flake, TraceError, Warn, "
                "Interrupted, Skipped, OrderDependent)",
                case_id, r->status ? r->status : "(null)");
  sqlite3_stmt *st = s->case_end;
  sqlite3_bind_int64(st, 1, case_id);
  bind_text(st, 2, r->status);
  sqlite3_bind_double(st, 3, r->duration_s);
  if (r->line) sqlite3_bind_int64(st, 4, r->line);
  else sqlite3_bind_null(st, 4);
  bind_text(st, 5, r->message);
  bind_text(st, 6, r->expected);
  bind_text(st, 7, r->actual);
  bind_text(st, 8, r->event);
  bind_text(st, 9, r->rule);
  bind_text(st, 10, r->driver_message);
  bind_text(st, 11, r->advisory);
  bind_text(st, 12, r->details);
  bind_text(st, 13, r->signature);
  bind_text(st, 14, r->stack);
  bind_text(st, 15, r->reduced);
  bind_text(st, 16, r->preceded_by);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc == SQLITE_CONSTRAINT_CHECK)
    return fail(s, "case_end: case %" PRId64 ": details are not valid JSON: %.200s", case_id,
                r->details ? r->details : "");
  if (rc != SQLITE_DONE) return fail_db(s, s->db, "case_end: cannot update the case");
  if (sqlite3_changes(s->db) == 1) return 0;
  mdc_case_row row;
  if (mdc_store_case_get(s, case_id, &row) != 0) return fail(s, "case_end: case %" PRId64 ": no such case", case_id);
  return fail(s, "case_end: case %" PRId64 " ('%s'): already completed as %s", case_id, row.name,
              row.status);
}

/* mdc_store_case_finish with the v1 columns only. */
int mdc_store_case_end(mdc_store *s, int64_t case_id, const char *status, double duration_s,
                       uint32_t line, const char *message, const char *expected,
                       const char *actual) {
  mdc_case_result r = {.status = status, .duration_s = duration_s, .line = line,
                       .message = message, .expected = expected, .actual = actual};
  return mdc_store_case_finish(s, case_id, &r);
}
