/* svg.c - the SVG chart writer (include/mdc/svg.h): axes with nice ticks, line charts thinned to
 * the plot's pixel columns, grouped and stacked bar charts, a legend, and hover titles (an SVG
 * <title> shows as a tooltip without any script). Coordinates are written with one decimal. */
#include "mdc/svg.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 16
#define MAX_CATEGORIES 4096
#define FONT "font-family=\"sans-serif\" font-size=\"11\""

/* Okabe-Ito: told apart by colour-blind readers too. */
static const char *const palette[] = {"#0072b2", "#e69f00", "#009e73", "#d55e00",
                                      "#cc79a7", "#56b4e9", "#b8a200", "#000000"};

/* ---- text ---- */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *p) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;      /* overlong */
    if (c == 0xed) hi = 0x9f;      /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;      /* overlong */
    if (c == 0xf4) hi = 0x8f;      /* above U+10FFFF */
  } else {
    return 0;
  }
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return n;
}

/* Writes to out only; thread-safe for distinct FILEs; never fails (write errors show in ferror). */
void mdc_svg_escape(FILE *out, const char *text, size_t max_chars) {
  if (!out || !text) return;
  const unsigned char *p = (const unsigned char *)text;
  size_t chars = 0;
  while (*p) {
    if (max_chars && chars == max_chars) {
      fputs("\xe2\x80\xa6", out); /* … */
      return;
    }
    size_t n = utf8_len(p);
    if (n == 0) {
      fputs("\xef\xbf\xbd", out); /* U+FFFD for a byte that starts no valid character */
      p++;
    } else if (n > 1) {
      fwrite(p, 1, n, out);
      p += n;
    } else {
      switch (*p) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        case '\t': case '\n': fputc(*p, out); break;
        default:
          if (*p >= 0x20 && *p != 0x7f) fputc(*p, out);
          else chars--; /* dropped: not a character of the output */
      }
      p++;
    }
    chars++;
  }
}

/* ---- ticks ---- */

/* Pure; thread-safe; -1 (nothing set) for non-finite input. */
int mdc_svg_nice_ticks(double lo, double hi, unsigned max_ticks, mdc_svg_ticks *t) {
  if (!t || !isfinite(lo) || !isfinite(hi)) return -1;
  if (max_ticks < 3) max_ticks = 3; /* a range around zero needs three */
  if (lo > hi) {
    double x = lo;
    lo = hi;
    hi = x;
  }
  if (hi == lo) {
    /* One value: a range around it (a unit, or a tenth of it). */
    double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  static const double nice[] = {1, 2, 2.5, 5, 10};
  double rough = (hi - lo) / (max_ticks - 1);
  double mag = pow(10, floor(log10(rough)));
  double step = 0;
  unsigned n = 0;
  double first = 0;
  /* The smallest nice step whose ticks fit; a bigger one when rounding out adds a tick. */
  for (int e = 0; e < 3 && !step; e++, mag *= 10)
    for (size_t i = 0; i < sizeof nice / sizeof nice[0]; i++) {
      double st = nice[i] * mag;
      if (st < rough * (1 - 1e-9)) continue;
      double f = floor(lo / st + 1e-9) * st, l = ceil(hi / st - 1e-9) * st;
      unsigned k = (unsigned)llround((l - f) / st) + 1;
      if (k <= max_ticks) {
        step = st;
        first = f;
        n = k < 2 ? 2 : k;
        break;
      }
    }
  if (!step) return -1;
  int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  /* 2.5 x 10^k needs one digit more than 10^k. */
  double m = step / pow(10, floor(log10(step) + 1e-9));
  if (fabs(m - 2.5) < 1e-6 && step < 10) dec++;
  if (dec > 12) dec = 12;
  t->first = first == 0 ? 0 : first; /* no "-0" */
  t->step = step;
  t->n = n;
  t->decimals = dec;
  return 0;
}

/* Pure; writes at most len bytes into the caller's buf; thread-safe. */
void mdc_svg_format(double v, int decimals, double scale_from, char *buf, size_t len) {
  if (!buf || !len) return;
  if (!isfinite(v)) {
    snprintf(buf, len, "%s", isnan(v) ? "-" : v > 0 ? "inf" : "-inf");
    return;
  }
  static const struct { double from, div; const char *suffix; } units[] = {
    {1e9, 1e9, "G"}, {1e6, 1e6, "M"}, {1e4, 1e3, "k"}};
  for (size_t i = 0; i < sizeof units / sizeof units[0] && v != 0; i++) {
    if (fabs(scale_from) < units[i].from) continue;
    /* As few digits as show the value exactly (up to 3): 2500 is 2.5k, 12000 is 12k. */
    double x = v / units[i].div;
    int d = 0;
    for (double frac = fabs(x); d < 3 && fabs(frac - round(frac)) > 1e-6 * fmax(1, frac); d++) frac *= 10;
    snprintf(buf, len, "%.*f%s", d, x == 0 ? 0.0 : x, units[i].suffix);
    return;
  }
  if (decimals < 0) decimals = 0;
  if (fabs(v) < 0.5 * pow(10, -decimals)) v = 0; /* no "-0.0" from rounding noise */
  snprintf(buf, len, "%.*f", decimals, v);
}

/* ---- shared drawing ---- */

typedef struct frame {
  double w, h, left, right, top, bottom;  /* the plot area is [left, w - right] x [top, h - bottom] */
  double y0, y1;                           /* value range of the y axis */
  mdc_svg_ticks yt;
} frame;

static double px_y(const frame *f, double v) {
  double ph = f->h - f->top - f->bottom;
  return f->h - f->bottom - (v - f->y0) / (f->y1 - f->y0) * ph;
}

static void open_svg(FILE *out, const mdc_svg_chart *c, const frame *f) {
  fprintf(out, "<svg%s width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"",
          c->standalone ? " xmlns=\"http://www.w3.org/2000/svg\"" : "", f->w, f->h, f->w, f->h);
  mdc_svg_escape(out, c->title ? c->title : "chart", 0);
  fprintf(out, "\" class=\"chart\">\n");
  if (c->title) {
    fprintf(out, "<title>");
    mdc_svg_escape(out, c->title, 0);
    fprintf(out, "</title>\n<text x=\"%.1f\" y=\"16\" " FONT " font-weight=\"bold\">", f->left);
    mdc_svg_escape(out, c->title, 120);
    fprintf(out, "</text>\n");
  }
}

static int close_svg(FILE *out) {
  fprintf(out, "</svg>\n");
  return ferror(out) ? -1 : 0;
}

static int no_data(FILE *out, const mdc_svg_chart *c, frame *f) {
  open_svg(out, c, f);
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#666\">no data</text>\n",
          f->w / 2, f->h / 2);
  return close_svg(out);
}

/* The y axis: grid lines, tick labels and the axis label. */
static void y_axis(FILE *out, const mdc_svg_chart *c, const frame *f) {
  double scale = fmax(fabs(f->y0), fabs(f->y1));
  for (unsigned i = 0; i < f->yt.n; i++) {
    double v = f->yt.first + i * f->yt.step, y = px_y(f, v);
    char lab[64];
    mdc_svg_format(v, f->yt.decimals, scale, lab, sizeof lab);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" " FONT " fill=\"#444\">%s",
            f->left, y, f->w - f->right, y, f->left - 4, y + 4, lab);
    if (c->y_unit) mdc_svg_escape(out, c->y_unit, 8);
    fprintf(out, "</text>\n");
  }
  fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", f->left, f->top,
          f->left, f->h - f->bottom);
  if (c->y_label) {
    double cy = (f->top + f->h - f->bottom) / 2;
    fprintf(out, "<text transform=\"translate(12 %.1f) rotate(-90)\" text-anchor=\"middle\" " FONT " fill=\"#444\">", cy);
    mdc_svg_escape(out, c->y_label, 40);
    fprintf(out, "</text>\n");
  }
}

static void x_label(FILE *out, const mdc_svg_chart *c, const frame *f) {
  fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", f->left,
          f->h - f->bottom, f->w - f->right, f->h - f->bottom);
  if (!c->x_label) return;
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#444\">",
          (f->left + f->w - f->right) / 2, f->h - 4);
  mdc_svg_escape(out, c->x_label, 80);
  fprintf(out, "</text>\n");
}

static const char *color_of(const mdc_svg_series *s, size_t i) {
  return s[i].color ? s[i].color : palette[i % (sizeof palette / sizeof palette[0])];
}

/* A legend in one row under the title, right-aligned entries from the plot's left edge. */
static void legend(FILE *out, const frame *f, const mdc_svg_series *s, size_t n, int with_title) {
  double x = f->left, y = with_title ? 30 : 12;
  for (size_t i = 0; i < n; i++) {
    if (!s[i].name) continue;
    size_t len = strlen(s[i].name);
    if (len > 24) len = 25;
    if (x + 16 + 6.5 * (double)len > f->w - f->right && x > f->left) break; /* no room: hover titles remain */
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" " FONT " fill=\"#222\">",
            x, y - 9, color_of(s, i), x + 14, y);
    mdc_svg_escape(out, s[i].name, 24);
    fprintf(out, "</text>\n");
    x += 24 + 6.5 * (double)len;
  }
}

static int has_legend(const mdc_svg_series *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i].name) return 1;
  return 0;
}

static void base_frame(const mdc_svg_chart *c, const mdc_svg_series *s, size_t n, frame *f) {
  memset(f, 0, sizeof *f);
  f->w = c->width ? c->width : 640;
  f->h = c->height ? c->height : 240;
  f->left = c->y_label ? 62 : 48;
  f->right = 16;
  f->top = (c->title ? 22 : 8) + (has_legend(s, n) ? 18 : 0) + 6;
  f->bottom = c->x_label ? 38 : 24;
}

/* Fixes the y range from the data (or the caller's bounds) to whole ticks. */
static int y_range(const mdc_svg_chart *c, frame *f, double lo, double hi) {
  if (isfinite(c->y_min)) lo = c->y_min;
  if (isfinite(c->y_max)) hi = c->y_max;
  double ph = f->h - f->top - f->bottom;
  unsigned max_ticks = ph / 36 < 2 ? 2 : (unsigned)(ph / 36);
  if (mdc_svg_nice_ticks(lo, hi, max_ticks, &f->yt) != 0) return -1;
  f->y0 = f->yt.first;
  f->y1 = f->yt.first + (f->yt.n - 1) * f->yt.step;
  /* Fixed bounds stay exactly as asked (0..100 % stays 0..100 even if ticks would go on). */
  if (isfinite(c->y_min)) f->y0 = c->y_min;
  if (isfinite(c->y_max)) f->y1 = c->y_max;
  if (!(f->y1 > f->y0)) f->y1 = f->y0 + 1;
  return 0;
}

/* ---- line charts ---- */

typedef struct line_ctx {
  FILE *out;
  const frame *f;
  double x0, x1;
  int pen;         /* 0: the next point starts a new stroke */
} line_ctx;

static double px_x(const line_ctx *l, double v) {
  double pw = l->f->w - l->f->left - l->f->right;
  return l->f->left + (v - l->x0) / (l->x1 - l->x0) * pw;
}

static void line_to(line_ctx *l, double x, double y) {
  fprintf(l->out, "%c%.1f %.1f ", l->pen ? 'L' : 'M', px_x(l, x), px_y(l->f, y));
  l->pen = 1;
}

static double xv(const mdc_svg_series *s, size_t i) { return s->x ? s->x[i] : (double)i; }

/* One series' path, thinned to each pixel column's lowest and highest point in their order. */
static void series_path(line_ctx *l, const mdc_svg_series *s, const char *color) {
  double pw = l->f->w - l->f->left - l->f->right;
  int thin = s->n > 2 * (size_t)pw;
  fprintf(l->out, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\" d=\"", color);
  l->pen = 0;
  long col = LONG_MIN;
  size_t lo = 0, hi = 0;
  int have = 0;
  for (size_t i = 0; i <= s->n; i++) {
    int end = i == s->n, gap = !end && (!isfinite(s->y[i]) || !isfinite(xv(s, i)));
    long c = end || gap ? LONG_MIN : (long)floor(px_x(l, xv(s, i)));
    if (have && (end || gap || !thin || c != col)) {
      if (lo == hi) line_to(l, xv(s, lo), s->y[lo]);
      else if (lo < hi) line_to(l, xv(s, lo), s->y[lo]), line_to(l, xv(s, hi), s->y[hi]);
      else line_to(l, xv(s, hi), s->y[hi]), line_to(l, xv(s, lo), s->y[lo]);
      have = 0;
    }
    if (gap) l->pen = 0;
    if (end || gap) continue;
    if (!have) {
      lo = hi = i;
      col = c;
      have = 1;
    } else {
      if (s->y[i] < s->y[lo]) lo = i;
      if (s->y[i] > s->y[hi]) hi = i;
    }
  }
  fprintf(l->out, "\"/>\n");
}

/* Dots with hover titles, for series short enough to read point by point. */
static void series_dots(line_ctx *l, const mdc_svg_chart *c, const mdc_svg_series *s, const char *color) {
  for (size_t i = 0; i < s->n; i++) {
    double x = xv(s, i), y = s->y[i];
    if (!isfinite(x) || !isfinite(y)) continue;
    fprintf(l->out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", px_x(l, x), px_y(l->f, y), color);
    if (s->name) {
      mdc_svg_escape(l->out, s->name, 40);
      fprintf(l->out, ": ");
    }
    char v[64];
    mdc_svg_format(y, 3, 0, v, sizeof v);
    /* Trim a formatted value's trailing zeros: 98.500 -> 98.5. */
    char *dot = strchr(v, '.');
    if (dot) {
      char *e = v + strlen(v) - 1;
      while (e > dot && *e == '0') *e-- = 0;
      if (e == dot) *e = 0;
    }
    fprintf(l->out, "%s", v);
    if (c->y_unit) mdc_svg_escape(l->out, c->y_unit, 8);
    double r = round(x);
    if (c->x_names && fabs(x - r) < 1e-9 && r >= 0 && (size_t)r < c->n_x_names && c->x_names[(size_t)r]) {
      fprintf(l->out, " (");
      mdc_svg_escape(l->out, c->x_names[(size_t)r], 60);
      fprintf(l->out, ")");
    }
    fprintf(l->out, "</title></circle>\n");
  }
}

/* Writes to out only; keeps nothing; -1 for unusable arguments (nothing written) or a write
 * error. */
int mdc_svg_line_chart(FILE *out, const mdc_svg_chart *c, const mdc_svg_series *s, size_t n) {
  if (!out || !c || (n && !s) || n > MAX_SERIES) return -1;
  for (size_t i = 0; i < n; i++)
    if (s[i].n && !s[i].y) return -1;
  frame f;
  base_frame(c, s, n, &f);
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  size_t most = 0;
  for (size_t k = 0; k < n; k++) {
    for (size_t i = 0; i < s[k].n; i++) {
      double x = xv(&s[k], i), y = s[k].y[i];
      if (!isfinite(x) || !isfinite(y)) continue;
      xlo = fmin(xlo, x);
      xhi = fmax(xhi, x);
      ylo = fmin(ylo, y);
      yhi = fmax(yhi, y);
    }
    if (s[k].n > most) most = s[k].n;
  }
  if (!isfinite(xlo)) return no_data(out, c, &f);
  if (y_range(c, &f, ylo, yhi) != 0) return -1;
  line_ctx l = {.out = out, .f = &f};
  double pw = f.w - f.left - f.right;
  int named = c->x_names && c->n_x_names > 0;
  mdc_svg_ticks xt = {0};
  if (named) {
    /* x is an index into the names: the axis spans them all, a point per name. */
    l.x0 = 0;
    l.x1 = c->n_x_names > 1 ? (double)(c->n_x_names - 1) : 1;
  } else {
    if (mdc_svg_nice_ticks(xlo, xhi, pw / 80 < 2 ? 2 : (unsigned)(pw / 80), &xt) != 0) return -1;
    l.x0 = xt.first;
    l.x1 = xt.first + (xt.n - 1) * xt.step;
  }
  open_svg(out, c, &f);
  y_axis(out, c, &f);
  x_label(out, c, &f);
  double base = f.h - f.bottom;
  if (named) {
    size_t every = 1, room = (size_t)(pw / 90) + 1;
    while (c->n_x_names / every > room) every++;
    for (size_t i = 0; i < c->n_x_names; i += every) {
      fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#444\">", px_x(&l, (double)i),
              base + 14);
      mdc_svg_escape(out, c->x_names[i] ? c->x_names[i] : "", 14);
      fprintf(out, "</text>\n");
    }
  } else {
    double scale = fmax(fabs(l.x0), fabs(l.x1));
    for (unsigned i = 0; i < xt.n; i++) {
      double v = xt.first + i * xt.step;
      char lab[64];
      mdc_svg_format(v, xt.decimals, scale, lab, sizeof lab);
      fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#444\">%s</text>\n",
              px_x(&l, v), base, px_x(&l, v), base + 4, px_x(&l, v), base + 15, lab);
    }
  }
  for (size_t k = 0; k < n; k++) {
    if (!s[k].n) continue;
    const char *color = color_of(s, k);
    series_path(&l, &s[k], color);
    if (most <= 60) series_dots(&l, c, &s[k], color);
  }
  legend(out, &f, s, n, c->title != NULL);
  return close_svg(out);
}

/* ---- bar charts ---- */

/* Writes to out only; keeps nothing; -1 for unusable arguments (nothing written) or a write
 * error. */
int mdc_svg_bar_chart(FILE *out, const mdc_svg_chart *c, const mdc_svg_series *s, size_t n) {
  if (!out || !c || (n && !s) || n > MAX_SERIES || c->n_x_names > MAX_CATEGORIES) return -1;
  size_t ncat = c->n_x_names;
  for (size_t k = 0; k < n; k++)
    if (ncat && (!s[k].y || s[k].n < ncat)) return -1;
  frame f;
  base_frame(c, s, n, &f);
  double lo = 0, hi = -INFINITY;
  for (size_t i = 0; i < ncat; i++) {
    double sum = 0;
    for (size_t k = 0; k < n; k++) {
      double v = s[k].y[i];
      if (!isfinite(v)) continue;
      if (c->stacked) sum += v > 0 ? v : 0;
      else lo = fmin(lo, v), hi = fmax(hi, v);
    }
    if (c->stacked) hi = fmax(hi, sum);
  }
  if (!ncat || !n || !isfinite(hi)) return no_data(out, c, &f);
  double pw = f.w - f.left - f.right, slot = pw / (double)ncat;
  /* Long names on narrow slots are written slanted, with room made below. */
  size_t longest = 0;
  for (size_t i = 0; i < ncat; i++) {
    size_t len = c->x_names[i] ? strlen(c->x_names[i]) : 0;
    if (len > longest) longest = len;
  }
  if (longest > 16) longest = 16;
  int slant = (double)longest * 6.5 > slot;
  if (slant) f.bottom += 6.0 * (double)longest * 0.72;
  if (y_range(c, &f, lo, hi) != 0) return -1;
  open_svg(out, c, &f);
  y_axis(out, c, &f);
  x_label(out, c, &f);
  double base = f.h - f.bottom, zero = px_y(&f, fmax(f.y0, 0));
  double group = slot * 0.8, bw = c->stacked ? group : group / (double)n;
  for (size_t i = 0; i < ncat; i++) {
    double x = f.left + slot * (double)i + (slot - group) / 2, top = zero, total = 0;
    for (size_t k = 0; k < n; k++) {
      double v = s[k].y[i];
      if (!isfinite(v)) continue;
      if (c->stacked && v < 0) v = 0;
      double y0 = c->stacked ? top : zero, y1 = c->stacked ? top - (zero - px_y(&f, v)) : px_y(&f, v);
      double bx = c->stacked ? x : x + bw * (double)k, ytop = fmin(y0, y1), h = fabs(y1 - y0);
      if (c->stacked) top = y1;
      total += v;
      if (h <= 0) continue;
      fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", bx, ytop,
              fmax(bw - (c->stacked ? 0 : 1), 0.5), h, color_of(s, k));
      mdc_svg_escape(out, c->x_names[i] ? c->x_names[i] : "", 60);
      if (s[k].name) {
        fprintf(out, ", ");
        mdc_svg_escape(out, s[k].name, 40);
      }
      char lab[64];
      mdc_svg_format(v, fabs(v - round(v)) < 1e-9 ? 0 : 2, 0, lab, sizeof lab);
      fprintf(out, ": %s", lab);
      if (c->y_unit) mdc_svg_escape(out, c->y_unit, 8);
      fprintf(out, "</title></rect>\n");
    }
    if (c->stacked && slot >= 22) {
      char lab[64];
      mdc_svg_format(total, fabs(total - round(total)) < 1e-9 ? 0 : 1, total, lab, sizeof lab);
      fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#222\">%s</text>\n",
              x + group / 2, top - 3, lab);
    }
    double cx = f.left + slot * ((double)i + 0.5);
    if (slant)
      fprintf(out, "<text transform=\"translate(%.1f %.1f) rotate(-40)\" text-anchor=\"end\" " FONT " fill=\"#444\">",
              cx + 3, base + 12);
    else
      fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" " FONT " fill=\"#444\">", cx, base + 14);
    mdc_svg_escape(out, c->x_names[i] ? c->x_names[i] : "", 16);
    fprintf(out, "</text>\n");
  }
  legend(out, &f, s, n, c->title != NULL);
  return close_svg(out);
}
