/* mdc/svg.h - a small SVG chart writer: line charts and bar charts with axes, readable ticks,
 * labels, a legend and hover titles, written to a FILE as text (inline in HTML, or a standalone
 * .svg). No library does this for C on Debian without pulling in a plotting stack (gnuplot,
 * cairo): the charts a report needs are a few hundred lines of text.
 *
 * Every function writes only to the FILE it is given and keeps no state: thread-safe as long as
 * two threads do not share a FILE. Functions returning int give 0 on success and -1 when the
 * arguments are unusable (nothing written) or the FILE reports a write error. */
#ifndef MDC_SVG_H
#define MDC_SVG_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One series. Line charts: n points (x[i], y[i]); x NULL means x = 0..n-1; a NaN y breaks the
 * line. Bar charts: y[i] is the series' value in category i (n = the number of categories). */
typedef struct mdc_svg_series {
  const char *name;            /* legend and hover text; NULL: no legend entry */
  const double *x, *y;
  size_t n;
  const char *color;           /* CSS colour; NULL: the palette's next colour */
} mdc_svg_series;

typedef struct mdc_svg_chart {
  const char *title, *x_label, *y_label;  /* NULL: none */
  unsigned width, height;      /* pixels; 0: 640 x 240 */
  double y_min, y_max;         /* NaN: from the data (bar charts always include 0) */
  const char *y_unit;          /* appended to y tick labels and hover values ("%", " s") */
  /* Names at x = 0, 1, ... (line charts whose x is an index; bar charts: the categories). */
  const char *const *x_names;
  size_t n_x_names;
  int stacked;                 /* bar charts: stack the series instead of grouping them */
  int standalone;              /* 1: with the xmlns attribute, for an .svg file; 0: inline HTML */
} mdc_svg_chart;

/* Writes a line chart of n series (at most 16). Series with more points than the plot has
 * pixel columns are thinned to each column's lowest and highest point, so a spike survives and
 * a million samples cost a few hundred. A chart with no finite point says "no data". */
int mdc_svg_line_chart(FILE *out, const mdc_svg_chart *c, const mdc_svg_series *s, size_t n);

/* Writes a bar chart: c->n_x_names categories (at most 4096), n series (at most 16) each with
 * c->n_x_names values (NaN: no bar). Grouped side by side, or stacked when c->stacked (values
 * < 0 are drawn as 0 when stacked). */
int mdc_svg_bar_chart(FILE *out, const mdc_svg_chart *c, const mdc_svg_series *s, size_t n);

/* "Nice" axis ticks: first, first + step, ... (n of them) covering [lo, hi], with step 1, 2,
 * 2.5 or 5 times a power of ten and at most max_ticks ticks (taken as 3 when smaller: a range
 * around zero needs three). lo == hi gets a range around it. decimals: the digits after the point a label needs. -1 for non-finite input. */
typedef struct mdc_svg_ticks {
  double first, step;
  unsigned n;
  int decimals;
} mdc_svg_ticks;
int mdc_svg_nice_ticks(double lo, double hi, unsigned max_ticks, mdc_svg_ticks *t);

/* Formats v as a tick label: decimals digits, and values of 10,000 and more (when
 * scale_from >= 10000) shortened with k / M / G ("12.5k"). */
void mdc_svg_format(double v, int decimals, double scale_from, char *buf, size_t len);

/* Writes text escaped for XML and HTML (& < > " '), with invalid UTF-8 replaced by U+FFFD and
 * control characters other than tab and newline dropped, so any bytes a driver returns make a
 * valid document. max_chars > 0 cuts the text at that many characters, adding an ellipsis. */
void mdc_svg_escape(FILE *out, const char *text, size_t max_chars);

#ifdef __cplusplus
}
#endif
#endif
