/* store_merge.c - mdc_store_merge: the runs of several results stores (shards) copied, with
 * their cases and fuzz rows, into one, in one transaction; a run already there (same uuid) is
 * skipped, so merging again changes nothing. Inputs are only read, and nothing is written beside
 * them (docs/results-schema.md, "Merging shards"). */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define fail mdc_store__fail
#define fail_db mdc_store__fail_db
#define exec mdc_store__exec
#define prepare mdc_store__prepare
#define step_write mdc_store__step_write
#define check_version mdc_store__check_version
#define check_tables mdc_store__check_tables
#define open_uri mdc_store__open_uri
#define store_new mdc_store__new

/* A merge input, opened so that nothing is written beside it: as an immutable file when no -wal
 * beside it holds changes (no -shm, no locks, works in a read-only folder), else as a private
 * copy of the file and its -wal in a temporary folder (SQLite needs a -shm beside a -wal to
 * read it, which the input's folder may not allow, and which must not be left there). */
typedef struct merge_input {
  sqlite3 *db;
  char tmp[64];     /* the private copy's folder, "" when none */
} merge_input;

/* Copies src to dst (a new file). 0, or -1 with errno. */
static int copy_file(const char *src, const char *dst) {
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
  if (in >= 0) out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (in >= 0 && out >= 0) {
    char buf[65536];
    ssize_t n;
    rc = 0;
    while ((n = read(in, buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || write(out, buf, (size_t)n) != n) {
        rc = -1;
        break;
      }
    }
  }
  int e = errno;
  if (in >= 0) close(in);
  if (out >= 0 && close(out) != 0) rc = -1;
  errno = e;
  return rc;
}

static void close_input(merge_input *mi) {
  sqlite3_close(mi->db);
  mi->db = NULL;
  if (mi->tmp[0]) {
    static const char *const files[] = {"/in.db", "/in.db-wal", "/in.db-shm"};
    char p[128];
    for (int i = 0; i < 3; i++) {
      snprintf(p, sizeof p, "%s%s", mi->tmp, files[i]);
      unlink(p);
    }
    rmdir(mi->tmp);
    mi->tmp[0] = '\0';
  }
}

/* Opens an input read-only and checks it is a results store (this version or older). Never
 * creates it. *version gets its schema version. */
static int open_input(mdc_store *m, const char *path, merge_input *mi, int64_t *version) {
  memset(mi, 0, sizeof *mi);
  struct stat st, wst;
  if (stat(path, &st) != 0) return fail(m, "merge input '%s': %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(m, "merge input '%s': not a regular file", path);
  char wal[4200];
  if (snprintf(wal, sizeof wal, "%s-wal", path) >= (int)sizeof wal) return fail(m, "merge input '%s': path too long", path);
  int rc;
  if (stat(wal, &wst) == 0 && wst.st_size > 0) {
    snprintf(mi->tmp, sizeof mi->tmp, "/tmp/mdc-merge-XXXXXX");
    char db[128], dwal[128];
    if (!mkdtemp(mi->tmp)) {
      mi->tmp[0] = '\0';
      return fail(m, "merge input '%s': cannot make a private copy: %s", path, strerror(errno));
    }
    snprintf(db, sizeof db, "%s/in.db", mi->tmp);
    snprintf(dwal, sizeof dwal, "%s/in.db-wal", mi->tmp);
    if (copy_file(path, db) != 0 || copy_file(wal, dwal) != 0) {
      int e = errno;
      close_input(mi);
      return fail(m, "merge input '%s': cannot make a private copy: %s", path, strerror(e));
    }
    rc = sqlite3_open_v2(db, &mi->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  } else {
    rc = open_uri(path, "?immutable=1", &mi->db);
  }
  if (rc != SQLITE_OK) {
    fail(m, "merge input '%s': cannot open: %s", path, mi->db ? sqlite3_errmsg(mi->db) : "out of memory");
    close_input(mi);
    return -1;
  }
  sqlite3_busy_timeout(mi->db, MDC_STORE__BUSY_TIMEOUT_MS);
  /* Judge it with its own name in the messages: a scratch store whose path is the input's. */
  mdc_store in = {.db = mi->db, .path = (char *)path};
  if (check_version(&in, mi->db, version, 1) != 0 || (*version > 0 && check_tables(&in, mi->db, *version) != 0)) {
    /* in.err reads "results store 'input': problem"; say it as an input of this merge. */
    size_t skip = strlen("results store '") + strlen(path) + strlen("': ");
    fail(m, "merge input '%s': %s", path, strlen(in.err) >= skip ? in.err + skip : in.err);
    close_input(mi);
    return -1;
  }
  return 0;
}

typedef struct merge_sql {
  sqlite3_stmt *has_uuid, *ins_run, *ins_case, *ins_campaign, *ins_stat, *ins_finding;
} merge_sql;

/* Copies every row that `sel` (bound to the input's run id as ?1) yields into `ins`, whose ?1
 * is the run's new id and ?2.. the selected columns. */
static int copy_rows(mdc_store *m, sqlite3 *in, const char *path, sqlite3_stmt *sel, sqlite3_stmt *ins,
                     int64_t old_id, int64_t new_id, const char *what) {
  int rc;
  int ncol = sqlite3_column_count(sel);
  sqlite3_bind_int64(sel, 1, old_id);
  while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
    sqlite3_bind_int64(ins, 1, new_id);
    for (int i = 0; i < ncol; i++) sqlite3_bind_value(ins, i + 2, sqlite3_column_value(sel, i));
    if (step_write(m, ins, what) != 0) {
      sqlite3_reset(sel);
      return -1;
    }
  }
  sqlite3_reset(sel);
  if (rc != SQLITE_DONE) return fail(m, "merge input '%s': cannot read (%s): %s", path, what, sqlite3_errmsg(in));
  return 0;
}

static int copy_input(mdc_store *m, sqlite3 *in, const char *path, int64_t version, const merge_sql *q) {
  sqlite3_stmt *runs = NULL, *cases = NULL, *camp = NULL, *stats = NULL, *finds = NULL;
  int ret = -1, rc;
  char run_sql[1024], case_sql[1024];
  snprintf(run_sql, sizeof run_sql, "SELECT id, %s FROM runs ORDER BY id", mdc_store__run_cols((int)version));
  snprintf(case_sql, sizeof case_sql, "SELECT %s FROM cases WHERE run_id = ?1 ORDER BY id",
           mdc_store__case_cols((int)version));
  if (sqlite3_prepare_v2(in, run_sql, -1, &runs, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(in, case_sql, -1, &cases, NULL) != SQLITE_OK ||
      (version >= 2 &&
       (sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_CAMPAIGN_COLS " FROM fuzz_campaigns WHERE run_id = ?1",
                           -1, &camp, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_STAT_COLS " FROM fuzz_stats WHERE run_id = ?1 "
                           "ORDER BY instance, t_s", -1, &stats, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(in, "SELECT " MDC_STORE__FUZZ_FINDING_COLS " FROM fuzz_findings WHERE run_id = ?1 "
                           "ORDER BY id", -1, &finds, NULL) != SQLITE_OK))) {
    fail(m, "merge input '%s': %s", path, sqlite3_errmsg(in));
    goto out;
  }
  while ((rc = sqlite3_step(runs)) == SQLITE_ROW) {
    sqlite3_bind_value(q->has_uuid, 1, sqlite3_column_value(runs, 1));
    int seen = sqlite3_step(q->has_uuid);
    sqlite3_reset(q->has_uuid);
    if (seen == SQLITE_ROW) continue;  /* merged before: skipped, so a second merge is a no-op */
    if (seen != SQLITE_DONE) {
      fail_db(m, m->db, "merge: cannot look up a run");
      goto out;
    }
    for (int i = 0; i < MDC_STORE__RUN_NCOLS; i++) sqlite3_bind_value(q->ins_run, i + 1, sqlite3_column_value(runs, i + 1));
    if (step_write(m, q->ins_run, "merge: cannot insert a run") != 0) goto out;
    int64_t old_id = sqlite3_column_int64(runs, 0), new_id = sqlite3_last_insert_rowid(m->db);
    if (copy_rows(m, in, path, cases, q->ins_case, old_id, new_id, "merge: cases") != 0) goto out;
    if (version >= 2 &&
        (copy_rows(m, in, path, camp, q->ins_campaign, old_id, new_id, "merge: fuzz campaign") != 0 ||
         copy_rows(m, in, path, stats, q->ins_stat, old_id, new_id, "merge: fuzz stats") != 0 ||
         copy_rows(m, in, path, finds, q->ins_finding, old_id, new_id, "merge: fuzz findings") != 0))
      goto out;
  }
  if (rc != SQLITE_DONE) {
    fail(m, "merge input '%s': cannot read runs: %s", path, sqlite3_errmsg(in));
    goto out;
  }
  ret = 0;
out:
  sqlite3_finalize(runs);
  sqlite3_finalize(cases);
  sqlite3_finalize(camp);
  sqlite3_finalize(stats);
  sqlite3_finalize(finds);
  return ret;
}

/* Opens out and reads the inputs read-only; one transaction on out, rolled back on any
 * failure (store.h). Thread-safe for different outputs. */
int mdc_store_merge(const char *out, const char *const *inputs, size_t n_inputs, char *err,
                    size_t errlen) {
  /* Every input is judged before OUT is made or written: a merge that fails on an input leaves no
   * OUT behind (and an OUT it made itself is removed if a later step fails). */
  mdc_store *m = store_new(out, err, errlen);
  if (!m) return -1;
  merge_sql q = {0};
  int ret = -1, in_txn = 0, made = 0;
  int64_t version;
  for (size_t i = 0; i < n_inputs; i++) {
    merge_input mi;
    if (open_input(m, inputs[i], &mi, &version) != 0) goto out;
    close_input(&mi);
  }
  struct stat ost;
  made = stat(out, &ost) != 0 || ost.st_size == 0;
  mdc_store_close(m);
  if (mdc_store_open(out, &m, err, errlen) != 0) {
    m = NULL;
    goto out;
  }
  if (prepare(m, &q.has_uuid, "SELECT 1 FROM runs WHERE uuid = ?1") != 0 ||
      prepare(m, &q.ins_run, "INSERT INTO runs (" MDC_STORE__RUN_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
              "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, "
              "?26, ?27, ?28)") != 0 ||
      prepare(m, &q.ins_case, "INSERT INTO cases (run_id, " MDC_STORE__CASE_COLS ") VALUES (?1, ?2, ?3, "
              "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)") != 0 ||
      prepare(m, &q.ins_campaign, "INSERT INTO fuzz_campaigns (run_id, " MDC_STORE__FUZZ_CAMPAIGN_COLS
              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)") != 0 ||
      prepare(m, &q.ins_stat, "INSERT INTO fuzz_stats (run_id, " MDC_STORE__FUZZ_STAT_COLS ") VALUES "
              "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)") != 0 ||
      prepare(m, &q.ins_finding, "INSERT INTO fuzz_findings (run_id, " MDC_STORE__FUZZ_FINDING_COLS
              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)") != 0)
    goto out;
  if (exec(m, m->db, "BEGIN IMMEDIATE", "merge: cannot start the transaction") != 0) goto out;
  in_txn = 1;
  for (size_t i = 0; i < n_inputs; i++) {
    merge_input mi;
    if (open_input(m, inputs[i], &mi, &version) != 0) goto out;
    /* An empty database (version 0) holds nothing to copy. */
    int rc = version > 0 ? copy_input(m, mi.db, inputs[i], version, &q) : 0;
    close_input(&mi);
    if (rc != 0) goto out;
  }
  if (exec(m, m->db, "COMMIT", "merge: cannot commit") != 0) goto out;
  in_txn = 0;
  ret = 0;
out:
  if (m && in_txn) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
  if (m && ret != 0 && err && errlen) snprintf(err, errlen, "%s", m->err);
  sqlite3_stmt *const sts[] = {q.has_uuid, q.ins_run, q.ins_case, q.ins_campaign, q.ins_stat, q.ins_finding};
  for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) sqlite3_finalize(sts[i]);
  mdc_store_close(m);
  if (ret != 0 && m && made) {
    /* An OUT this merge made and could not fill: gone, with its WAL files. */
    char p[4200];
    unlink(out);
    snprintf(p, sizeof p, "%s-wal", out);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", out);
    unlink(p);
  }
  return ret;
}
