/* test_svg.c - the SVG chart writer: nice ticks, tick labels, escaping of any bytes, line charts
 * (valid SVG, one path per series, thinning that keeps spikes, gaps at NaN, no data), bar
 * charts (grouped, stacked with totals, slanted long names), and refusal of bad arguments. */
#include <math.h>

#include "mdc/svg.h"
#include "xml_check.h"

#include <criterion/parameterized.h>

static double tick(const mdc_svg_ticks *t, unsigned i) { return t->first + i * t->step; }

typedef struct tick_case {
  double lo, hi;
  unsigned max;
  double first, step;
  unsigned n;
  int decimals;
} tick_case;

ParameterizedTestParameters(svg, ticks_are_nice_and_cover_the_range) {
  static tick_case cases[] = {
    {0, 100, 6, 0, 20, 6, 0},      {0, 1, 5, 0, 0.25, 5, 2},     {0, 0.97, 6, 0, 0.2, 6, 1},
    {-5, 12, 5, -5, 5, 5, 0},      {0, 37, 5, 0, 10, 5, 0},      {0, 0, 5, -1, 0.5, 5, 1},
    {1200, 98000, 6, 0, 20000, 6, 0}, {3, 3, 5, 2.6, 0.2, 5, 1}, {0.001, 0.004, 4, 0.001, 0.001, 4, 3},
  };
  return cr_make_param_array(tick_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(tick_case *c, svg, ticks_are_nice_and_cover_the_range) {
  mdc_svg_ticks t;
  cr_assert_eq(mdc_svg_nice_ticks(c->lo, c->hi, c->max, &t), 0);
  cr_expect(fabs(t.first - c->first) < 1e-9, "[%g, %g]: first %g, want %g", c->lo, c->hi, t.first, c->first);
  cr_expect(fabs(t.step - c->step) < 1e-9, "[%g, %g]: step %g, want %g", c->lo, c->hi, t.step, c->step);
  cr_expect_eq(t.n, c->n, "[%g, %g]: %u ticks, want %u", c->lo, c->hi, t.n, c->n);
  cr_expect_eq(t.decimals, c->decimals, "[%g, %g]: %d decimals, want %d", c->lo, c->hi, t.decimals, c->decimals);
}

/* The invariants over many ranges: ticks cover the data, never exceed the maximum, and step by
 * 1, 2, 2.5 or 5 times a power of ten. */
Test(svg, ticks_invariants_hold_over_many_ranges) {
  unsigned seed = 12345;
  for (int i = 0; i < 5000; i++) {
    seed = seed * 1103515245u + 12345u;
    double scale = pow(10, (int)(seed >> 16) % 14 - 6);
    seed = seed * 1103515245u + 12345u;
    double lo = ((int)(seed >> 8) % 2000 - 1000) / 100.0 * scale;
    seed = seed * 1103515245u + 12345u;
    double hi = lo + (seed >> 12) % 1000 / 10.0 * scale;
    unsigned max = 2 + (seed >> 4) % 10;
    mdc_svg_ticks t;
    cr_assert_eq(mdc_svg_nice_ticks(lo, hi, max, &t), 0, "[%g, %g]", lo, hi);
    cr_assert_leq(t.n, max < 3 ? 3 : max, "[%g, %g] max %u: %u ticks", lo, hi, max, t.n);
    cr_assert_geq(t.n, 2);
    double eps = t.step * 1e-6;
    cr_assert_leq(t.first, lo + eps, "[%g, %g]: first tick %g above the data", lo, hi, t.first);
    cr_assert_geq(tick(&t, t.n - 1), hi - eps, "[%g, %g]: last tick %g below the data", lo, hi, tick(&t, t.n - 1));
    double m = t.step / pow(10, floor(log10(t.step) + 1e-9));
    cr_assert(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 2.5) < 1e-6 || fabs(m - 5) < 1e-6,
              "[%g, %g]: step %g is not nice", lo, hi, t.step);
  }
  mdc_svg_ticks t;
  cr_expect_eq(mdc_svg_nice_ticks(NAN, 1, 5, &t), -1);
  cr_expect_eq(mdc_svg_nice_ticks(0, INFINITY, 5, &t), -1);
}

Test(svg, tick_labels_are_short_and_never_negative_zero) {
  char b[32];
  struct { double v; int dec; double scale; const char *want; } t[] = {
    {12500, 0, 12500, "12.5k"}, {20000, 0, 98000, "20k"}, {2e6, 0, 5e6, "2M"}, {3.5e9, 0, 4e9, "3.5G"},
    {9999, 0, 9999, "9999"},    {0.25, 2, 1, "0.25"},     {-0.0, 1, 1, "0.0"}, {-1e-12, 2, 1, "0.00"},
    {NAN, 0, 0, "-"},           {1500, 0, 0, "1500"},     {-20000, 0, 40000, "-20k"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    mdc_svg_format(t[i].v, t[i].dec, t[i].scale, b, sizeof b);
    cr_expect_str_eq(b, t[i].want, "%g", t[i].v);
  }
}

static char *escaped(const char *in, size_t max) {
  xc_buf b;
  xc_open(&b);
  mdc_svg_escape(b.f, in, max);
  xc_close(&b);
  return b.text;
}

Test(svg, escaping_makes_any_bytes_valid_xml_text) {
  struct { const char *in; size_t max; const char *want; } t[] = {
    {"<a href=\"x\">&'", 0, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"},
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"bad \xff byte", 0, "bad \xef\xbf\xbd byte"},
    {"\xed\xa0\x80", 0, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate: three bad bytes */
    {"\xc0\xaf", 0, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
    {"cut\xe2\x82", 0, "cut\xef\xbf\xbd\xef\xbf\xbd"},           /* truncated at the end */
    {"a\x01\x1b[31mb\tc\nd\re", 0, "a[31mb\tc\nde"},
    {"abcdef", 3, "abc\xe2\x80\xa6"},
    {"\xc3\xa9\xc3\xa9\xc3\xa9", 2, "\xc3\xa9\xc3\xa9\xe2\x80\xa6"},
    {"abc", 3, "abc"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    char *got = escaped(t[i].in, t[i].max);
    cr_expect_str_eq(got, t[i].want, "case %zu", i);
    free(got);
  }
  /* Every byte value, in one string: the result parses as XML. */
  char all[300], doc[4096];
  size_t k = 0;
  for (int c = 1; c < 256; c++) all[k++] = (char)c;
  all[k] = 0;
  char *e = escaped(all, 0);
  int n = snprintf(doc, sizeof doc, "<t>%s</t>", e);
  xmlDocPtr d = xc_parse(doc, (size_t)n);
  cr_expect_not_null(d, "not XML: %s", xc_err);
  if (d) xmlFreeDoc(d);
  free(e);
}

static xc_buf line_chart(const mdc_svg_chart *c, const mdc_svg_series *s, size_t n) {
  xc_buf b;
  xc_open(&b);
  cr_assert_eq(mdc_svg_line_chart(b.f, c, s, n), 0);
  xc_close(&b);
  return b;
}

Test(svg, a_line_chart_is_valid_svg_with_a_path_per_series_a_legend_and_hover_titles) {
  double pass[] = {90, 95.5, 97, 100}, dur[] = {12, 11, 14, 9};
  const char *runs[] = {"11-01", "11-02", "11-03", "11-04"};
  mdc_svg_series s[] = {{.name = "pass rate", .y = pass, .n = 4}, {.name = "duration <s>", .y = dur, .n = 4}};
  mdc_svg_chart c = {.title = "Pass rate & duration", .x_label = "run", .y_label = "%", .y_min = 0, .y_max = 100,
                     .y_unit = "%", .x_names = runs, .n_x_names = 4, .standalone = 1};
  xc_buf b = line_chart(&c, s, 2);
  xmlDocPtr d = xc_parse(b.text, b.len);
  cr_assert_not_null(d, "not XML: %s\n%s", xc_err, b.text);
  xmlNodePtr root = xmlDocGetRootElement(d);
  cr_expect_str_eq((const char *)root->name, "svg");
  cr_expect_not_null(root->ns, "a standalone chart declares the SVG namespace");
  cr_expect_eq(xc_count(root, "path"), 2);
  cr_expect_eq(xc_count(root, "circle"), 8, "a dot per point of a short series");
  cr_expect(strstr(b.text, ">100%</text>") && strstr(b.text, ">0%</text>"), "y ticks 0..100%%:\n%s", b.text);
  cr_expect(strstr(b.text, "Pass rate &amp; duration") && strstr(b.text, "duration &lt;s&gt;"));
  cr_expect(strstr(b.text, "<title>pass rate: 95.5% (11-02)</title>"), "%s", b.text);
  cr_expect(strstr(b.text, ">11-03</text>"), "x names on the axis");
  xmlFreeDoc(d);
  free(b.text);
  c.standalone = 0;
  b = line_chart(&c, s, 2);
  cr_expect_null(strstr(b.text, "http"), "inline charts name no URL (not even the namespace)");
  free(b.text);
}

/* The y coordinate of every point of the chart's first path. */
static size_t path_points(const char *svg, double *ys, size_t cap, int *strokes) {
  const char *d = strstr(svg, " d=\"");
  cr_assert_not_null(d);
  d += 4;
  size_t n = 0;
  *strokes = 0;
  while (*d && *d != '"') {
    char op;
    double x, y;
    int used;
    if (sscanf(d, "%c%lf %lf %n", &op, &x, &y, &used) < 3) break;
    if (op == 'M') (*strokes)++;
    if (n < cap) ys[n] = y;
    n++;
    d += used;
  }
  return n;
}

Test(svg, long_series_are_thinned_to_pixel_columns_and_keep_their_spikes) {
  enum { N = 200000 };
  double *y = calloc(N, sizeof *y);
  for (size_t i = 0; i < N; i++) y[i] = 10 + (double)(i % 7);
  y[123457] = 1000; /* one spike */
  mdc_svg_series s = {.name = "execs/s", .y = y, .n = N};
  mdc_svg_chart c = {.width = 600, .height = 200, .y_min = NAN, .y_max = NAN};
  xc_buf b = line_chart(&c, &s, 1);
  static double ys[4000];
  int strokes;
  size_t n = path_points(b.text, ys, 4000, &strokes);
  cr_expect_leq(n, 2 * 600, "%zu points drawn for a 600 px chart", n);
  cr_expect_gt(n, 500);
  double top = 1e9;
  for (size_t i = 0; i < n && i < 4000; i++) top = fmin(top, ys[i]);
  xmlDocPtr d = xc_parse(b.text, b.len);
  cr_assert_not_null(d, "%s", xc_err);
  xmlFreeDoc(d);
  /* The spike reaches the top tick (1000 is a tick: 0..1000 in steps of 200). */
  cr_expect(strstr(b.text, ">1000</text>"), "the axis reaches the spike");
  cr_expect_lt(top, 60, "the spike's point is drawn at the top (y %g)", top);
  cr_expect_eq(strokes, 1);
  cr_expect_null(strstr(b.text, "<circle"), "no dots on a long series");
  free(b.text);
  free(y);
}

Test(svg, nan_breaks_the_line_and_no_finite_point_says_no_data) {
  double x[] = {0, 10, 20, 30, 40}, y[] = {1, 2, NAN, 4, 5};
  mdc_svg_series s = {.name = "edges", .x = x, .y = y, .n = 5};
  mdc_svg_chart c = {.title = "edges", .y_min = NAN, .y_max = NAN};
  xc_buf b = line_chart(&c, &s, 1);
  double ys[16];
  int strokes;
  cr_expect_eq(path_points(b.text, ys, 16, &strokes), 4);
  cr_expect_eq(strokes, 2, "two strokes around the gap");
  cr_expect(strstr(b.text, ">40</text>"), "numeric x ticks: %s", b.text);
  free(b.text);
  double none[] = {NAN, NAN};
  mdc_svg_series e = {.name = "nothing", .y = none, .n = 2};
  b = line_chart(&c, &e, 1);
  cr_expect(strstr(b.text, ">no data</text>"), "%s", b.text);
  xmlDocPtr d = xc_parse(b.text, b.len);
  cr_expect_not_null(d);
  if (d) xmlFreeDoc(d);
  free(b.text);
  b = line_chart(&c, NULL, 0);
  cr_expect(strstr(b.text, ">no data</text>"));
  free(b.text);
}

static xc_buf bar_chart(const mdc_svg_chart *c, const mdc_svg_series *s, size_t n) {
  xc_buf b;
  xc_open(&b);
  cr_assert_eq(mdc_svg_bar_chart(b.f, c, s, n), 0);
  xc_close(&b);
  return b;
}

Test(svg, stacked_bars_have_a_rect_per_nonzero_value_and_totals) {
  const char *areas[] = {"domains", "tokens", "pools"};
  double pass[] = {10, 4, 0}, fail[] = {2, 0, 0}, other[] = {1, NAN, 3};
  mdc_svg_series s[] = {{.name = "pass", .y = pass, .n = 3, .color = "#2e7d32"},
                        {.name = "fail", .y = fail, .n = 3, .color = "#c62828"},
                        {.name = "other", .y = other, .n = 3}};
  mdc_svg_chart c = {.title = "cases by area", .x_names = areas, .n_x_names = 3, .stacked = 1,
                     .y_min = NAN, .y_max = NAN};
  xc_buf b = bar_chart(&c, s, 3);
  xmlDocPtr d = xc_parse(b.text, b.len);
  cr_assert_not_null(d, "%s\n%s", xc_err, b.text);
  /* 10, 2, 1, 4, 3 are drawn; zeros and NaN are not; plus 3 legend squares. */
  cr_expect_eq(xc_count(xmlDocGetRootElement(d), "rect"), 5 + 3);
  cr_expect(strstr(b.text, "<title>domains, fail: 2</title>"), "%s", b.text);
  cr_expect(strstr(b.text, ">13</text>") && strstr(b.text, ">4</text>"), "totals above the bars");
  cr_expect(strstr(b.text, "fill=\"#2e7d32\""));
  xmlFreeDoc(d);
  free(b.text);
}

Test(svg, grouped_bars_and_slanted_long_names) {
  enum { N = 40 };
  const char *names[N];
  double a[N], bb[N];
  char buf[N][40];
  for (int i = 0; i < N; i++) {
    snprintf(buf[i], sizeof buf[i], "area_with_a_long_name_%d", i);
    names[i] = buf[i];
    a[i] = i;
    bb[i] = -i / 2.0;
  }
  mdc_svg_series s[] = {{.name = "a", .y = a, .n = N}, {.name = "b", .y = bb, .n = N}};
  mdc_svg_chart c = {.x_names = names, .n_x_names = N, .y_min = NAN, .y_max = NAN};
  xc_buf b = bar_chart(&c, s, 2);
  xmlDocPtr d = xc_parse(b.text, b.len);
  cr_assert_not_null(d, "%s", xc_err);
  cr_expect_eq(xc_count(xmlDocGetRootElement(d), "rect"), 2 * N - 2 + 2, "zero-height bars of 0 still drawn: %d",
               xc_count(xmlDocGetRootElement(d), "rect"));
  cr_expect(strstr(b.text, "rotate(-40)"), "long names on narrow slots are slanted");
  cr_expect(strstr(b.text, "area_with_a_long\xe2\x80\xa6"), "and cut");
  cr_expect(strstr(b.text, "fill=\"#444\">-"), "negative values extend the axis below 0");
  xmlFreeDoc(d);
  free(b.text);
}

Test(svg, bad_arguments_and_write_errors_return_minus_one) {
  double y[] = {1, 2};
  mdc_svg_series s = {.y = y, .n = 2};
  mdc_svg_chart c = {.y_min = NAN, .y_max = NAN};
  cr_expect_eq(mdc_svg_line_chart(NULL, &c, &s, 1), -1);
  cr_expect_eq(mdc_svg_line_chart(stdout, NULL, &s, 1), -1);
  mdc_svg_series noy = {.n = 2};
  cr_expect_eq(mdc_svg_line_chart(stdout, &c, &noy, 1), -1);
  mdc_svg_series many[17] = {{0}};
  cr_expect_eq(mdc_svg_line_chart(stdout, &c, many, 17), -1);
  const char *one[] = {"x", "y", "z"};
  c.x_names = one;
  c.n_x_names = 3;
  cr_expect_eq(mdc_svg_bar_chart(stdout, &c, &s, 1), -1, "a series shorter than the categories");
  FILE *ro = fopen("/dev/null", "r");
  cr_assert_not_null(ro);
  c.n_x_names = 2;
  cr_expect_eq(mdc_svg_bar_chart(ro, &c, &s, 1), -1, "a write error is reported");
  fclose(ro);
}
