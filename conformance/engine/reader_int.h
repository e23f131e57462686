/* reader_int.h - private to mdc_engine: the streaming line reader and header parser. */
#ifndef MDC_READER_INT_H
#define MDC_READER_INT_H

#include <stdio.h>

#include "engine_int.h"

typedef struct mdc__reader {
  int fd;
  const char *path;
  char *buf;          /* a line that spans chunks, gathered */
  size_t cap;
  char *chunk;        /* bytes read from fd: [pos, len) not yet consumed (or the caller's bytes) */
  int own_chunk;
  size_t pos, len;
  int eof;
  uint32_t line;
} mdc__reader;

/* Opens a trace: a regular file only (a FIFO, a device or a folder is a trace error, and opening
 * never blocks); or, with bytes, those n bytes (not copied; path names them). */
int mdc__reader_open(mdc__reader *r, const char *path, const void *bytes, size_t n, mdc__where *w);
/* "a FIFO", "a folder", ... for a st_mode. */
const char *mdc__file_kind(unsigned mode);
void mdc__reader_close(mdc__reader *r);
/* The next JSON object (1, *out owned by the caller), 0 at end of file, -1 on a trace error (a
 * line over MDC__MAX_LINE is one, found without reading more of it than the limit). */
int mdc__reader_next(mdc__reader *r, mdc__where *w, json_t **out);
/* Parses the header object: version logic and fields. */
int mdc__header_parse(mdc__where *w, json_t *h, mdc_trace_header *out);

#endif
