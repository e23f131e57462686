/* reader_int.h - private to mdc_engine: the streaming line reader and header parser. */
#ifndef MDC_READER_INT_H
#define MDC_READER_INT_H

#include <stdio.h>

#include "engine_int.h"

typedef struct mdc__reader {
  FILE *f;
  const char *path;
  char *buf;
  size_t cap;
  uint32_t line;
} mdc__reader;

int mdc__reader_open(mdc__reader *r, const char *path, mdc__where *w);
void mdc__reader_close(mdc__reader *r);
/* The next JSON object (1, *out owned by the caller), 0 at end of file, -1 on a trace error. */
int mdc__reader_next(mdc__reader *r, mdc__where *w, json_t **out);
/* Parses the header object: version logic and fields. */
int mdc__header_parse(mdc__where *w, json_t *h, mdc_trace_header *out);

#endif
