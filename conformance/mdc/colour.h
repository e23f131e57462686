/* colour.h - private to the mdc command-line tool: statuses in colour on a terminal (colour.c).
 * Colour is on only when the stream is a terminal, NO_COLOR is unset or empty
 * (https://no-color.org) and TERM is not "dumb"; everything else gets plain text. */
#ifndef MDC_COLOUR_H
#define MDC_COLOUR_H

#include <stdio.h>

#include "mdc_int.h"

/* 1 when text written to f may carry colour. Reads the environment each call; thread-safe. */
int mdc_cli__colour_on(FILE *f);
/* The SGR sequence that starts status s's colour ("\033[1;31m" ...), "" for none. */
const char *mdc_cli__status_sgr(mdc_status s);
/* The sequence that ends it. */
#define MDC_SGR_RESET "\033[0m"
/* Writes text (printf's %-*s with width) to f, coloured as status s when on. */
void mdc_cli__status_print(FILE *f, int on, mdc_status s, int width, const char *text);

#endif
