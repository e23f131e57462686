/* reader.c - reads a trace as a stream: one line at a time (64 KiB reads), comments and blank lines
 * skipped, each other line parsed as one JSON object; and the header line with its version
 * logic (newer major refused, newer minor read leniently). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_int.h"

#define CHUNK (64u * 1024u)

int mdc__reader_open(mdc__reader *r, const char *path, const void *bytes, size_t n, mdc__where *w) {
  memset(r, 0, sizeof *r);
  r->fd = -1;
  r->path = path;
  w->path = path;
  w->line = 0;
  w->op = "trace";
  if (bytes) {
    r->chunk = (char *)(uintptr_t)bytes;   /* read only */
    r->len = n;
    r->eof = 1;
    return 0;
  }
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are traces. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return mdc__terr(w, "cannot open: %s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return mdc__terr(w, "cannot stat: %s", strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return mdc__terr(w, "not a regular file (%s): a trace is a file", mdc__file_kind(st.st_mode));
  }
  /* A regular file never blocks a read: O_NONBLOCK stays. */
  r->chunk = malloc(CHUNK);
  r->own_chunk = 1;
  if (!r->chunk) {
    close(fd);
    return mdc__terr(w, "cannot open: out of memory");
  }
  r->fd = fd;
  return 0;
}

const char *mdc__file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return S_ISREG(mode) ? "a file" : "not a file";
}

void mdc__reader_close(mdc__reader *r) {
  if (r->fd >= 0) close(r->fd);
  free(r->buf);
  if (r->own_chunk) free(r->chunk);
  memset(r, 0, sizeof *r);
  r->fd = -1;
}

/* Appends n bytes to the gathered line (at *have bytes); -1 past MDC__MAX_LINE, -2 no memory. */
static int gather(mdc__reader *r, size_t *have, const char *p, size_t n) {
  if (n > MDC__MAX_LINE - *have) return -1;
  if (*have + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < *have + n + 1) cap *= 2;
    if (cap > MDC__MAX_LINE + 1) cap = MDC__MAX_LINE + 1;
    char *b = realloc(r->buf, cap);
    if (!b) return -2;
    r->buf = b;
    r->cap = cap;
  }
  memcpy(r->buf + *have, p, n);
  *have += n;
  return 0;
}

/* Reads one line (its '\n' dropped): 1 a line (*line, *len bytes; valid until the next call),
 * 0 end of file, -1 a line over MDC__MAX_LINE (the rest of the file is not read), -2 a read
 * error. A last line without '\n' is a line. A line inside one chunk is not copied. */
static int read_line(mdc__reader *r, const char **line, size_t *len) {
  size_t have = 0;   /* bytes gathered in r->buf */
  for (;;) {
    const char *start = r->chunk + r->pos;
    size_t avail = r->len - r->pos;
    const char *nl = avail ? memchr(start, '\n', avail) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - start);
      r->pos += n + 1;
      if (have == 0) {
        if (n > MDC__MAX_LINE) return -1;
        *line = start;
        *len = n;
        return 1;
      }
      int g = gather(r, &have, start, n);
      if (g) return g;
      *line = r->buf;
      *len = have;
      return 1;
    }
    if (avail) {
      int g = gather(r, &have, start, avail);
      if (g) return g;
    }
    r->pos = r->len = 0;
    if (r->eof) break;
    ssize_t got;
    do got = read(r->fd, r->chunk, CHUNK);
    while (got < 0 && errno == EINTR);
    if (got < 0) return -2;
    if (got == 0) r->eof = 1;
    r->len = (size_t)got;
  }
  if (have == 0) return 0;
  *line = r->buf;
  *len = have;
  return 1;
}

int mdc__reader_next(mdc__reader *r, mdc__where *w, json_t **out) {
  *out = NULL;
  for (;;) {
    size_t len = 0;
    const char *b = NULL;
    int got = read_line(r, &b, &len);
    if (got == 0) return 0;
    r->line++;
    w->line = r->line;
    w->op = "trace";
    if (got == -1) return mdc__terr(w, "line longer than %u bytes (the limit)", MDC__MAX_LINE);
    if (got == -2) return mdc__terr(w, "read error: %s", errno ? strerror(errno) : "out of memory");
    while (len && b[len - 1] == '\r') len--;
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t')) i++;
    if (i == len || b[i] == '#') continue;
    json_error_t err;
    json_t *v = json_loadb(b + i, len - i, JSON_REJECT_DUPLICATES, &err);
    if (!v) return mdc__terr(w, "invalid JSON: %s (column %d)", err.text, err.column + (int)i);
    if (!json_is_object(v)) {
      json_decref(v);
      return mdc__terr(w, "a trace line must be one JSON object");
    }
    *out = v;
    return 1;
  }
}

static int join(mdc__where *w, json_t *obj, const char *key, const char *sep, char *buf,
                size_t len, int required) {
  json_t *arr = json_object_get(obj, key);
  buf[0] = '\0';
  if (!arr) return required ? mdc__terr(w, "missing field '%s'", key) : 0;
  if (!json_is_array(arr)) return mdc__terr(w, "'%s' must be an array of strings", key);
  if (required && json_array_size(arr) == 0) return mdc__terr(w, "'%s' must not be empty", key);
  size_t n = 0;
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *s = json_array_get(arr, i);
    if (!json_is_string(s)) return mdc__terr(w, "'%s'[%zu] must be a string", key, i);
    int k = snprintf(buf + n, len - n, "%s%s", i ? sep : "", json_string_value(s));
    if (k < 0 || (size_t)k >= len - n) {
      n = len - 1;
      break;
    }
    n += (size_t)k;
  }
  return 0;
}

int mdc__header_parse(mdc__where *w, json_t *h, mdc_trace_header *out) {
  memset(out, 0, sizeof *out);
  w->op = "header";
  json_t *ver = json_object_get(h, "mdc_trace");
  if (!ver) {
    if (json_object_get(h, "op"))
      return mdc__terr(w, "the first line must be the header ({\"mdc_trace\": \"1.0\", ...}), not an event");
    return mdc__terr(w, "missing field 'mdc_trace' (the header's format version)");
  }
  if (!json_is_string(ver)) return mdc__terr(w, "'mdc_trace' must be a string \"MAJOR.MINOR\"");
  const char *vs = json_string_value(ver);
  unsigned major, minor;
  int used = 0;
  if (sscanf(vs, "%3u.%3u%n", &major, &minor, &used) != 2 || vs[used] != '\0' || vs[0] < '0' ||
      vs[0] > '9')
    return mdc__terr(w, "'mdc_trace': \"%s\" is not \"MAJOR.MINOR\"", vs);
  if (major > MDC_TRACE_MAJOR)
    return mdc__terr(w, "trace format %u.%u is newer than this mdc (reads %d.x)", major, minor,
                     MDC_TRACE_MAJOR);
  if (major < MDC_TRACE_MAJOR)
    return mdc__terr(w, "trace format %u.%u is older than any this mdc reads (%d.x)", major, minor,
                     MDC_TRACE_MAJOR);
  out->major = (int)major;
  out->minor = (int)minor;
  static const char *const keys[] = {"mdc_trace", "name", "description", "rules", "recorded_on",
                                     "requires", "must_pass", "tags", NULL};
  if (mdc__check_keys(w, h, keys, minor <= MDC_TRACE_MINOR, NULL)) return -1;
  const char *name, *desc;
  if (mdc__get_str(w, h, "name", 1, &name) || mdc__get_str(w, h, "description", 0, &desc))
    return -1;
  if (!name[0]) return mdc__terr(w, "'name' must not be empty");
  snprintf(out->name, sizeof out->name, "%s", name);
  snprintf(out->description, sizeof out->description, "%s", desc ? desc : "");
  json_t *rec = json_object_get(h, "recorded_on");
  if (rec && !json_is_object(rec)) return mdc__terr(w, "'recorded_on' must be an object");
  if (join(w, h, "rules", "; ", out->rules, sizeof out->rules, 1) ||
      join(w, h, "tags", ",", out->tags, sizeof out->tags, 0) ||
      join(w, h, "requires", ",", out->requires, sizeof out->requires, 0) ||
      mdc__get_bool(w, h, "must_pass", 1, &out->must_pass))
    return -1;
  return 0;
}

int mdc_trace_read_header(const char *path, mdc_trace_header *out, char *err, size_t errlen) {
  mdc__reader r;
  mdc__where w = {0};
  json_t *h = NULL;
  int rc = -1;
  memset(out, 0, sizeof *out);
  if (mdc__reader_open(&r, path, NULL, 0, &w) == 0) {
    int got = mdc__reader_next(&r, &w, &h);
    if (got == 0) {
      w.op = "header";
      w.line = 1;
      mdc__terr(&w, "no header: the trace is empty");
    } else if (got == 1) {
      rc = mdc__header_parse(&w, h, out);
    }
  }
  if (rc && err && errlen) snprintf(err, errlen, "%s", w.msg);
  else if (err && errlen) err[0] = '\0';
  json_decref(h);
  mdc__reader_close(&r);
  return rc;
}
