/* png_check.c - mdc_png_check: judges a headless-Chromium screenshot of a report (make
 * test-browser). It decodes the PNG (libpng) and checks that the page is not blank, that the run
 * header's dark band runs across the top, and that the totals' coloured chips are on the first
 * screen, below the header. Prints what it measured; exit 0 when every check holds, 1 when one
 * fails, 2 on bad usage or an unreadable file.
 * With --causes N it also counts the causes table's rows on the first screen (each row's count is
 * drawn on a colour of its own, .cause-n) and checks that there are exactly N.
 *   mdc_png_check SHOT.png [--screen HEIGHT] [--causes N] */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rgb { unsigned char r, g, b; } rgb;

/* The page's colours (reports/report_html.c): header band, Pass chip, Fail chip. */
static const rgb header_bg = {0x1f, 0x29, 0x37}, pass_chip = {0x1b, 0x7f, 0x3b}, fail_chip = {0xc6, 0x28, 0x28};
static const rgb cause_n = {0x39, 0x49, 0xab};

static int near(const unsigned char *p, rgb c) {
  return abs(p[0] - c.r) <= 6 && abs(p[1] - c.g) <= 6 && abs(p[2] - c.b) <= 6;
}

int main(int argc, char **argv) {
  int want_causes = -1;
  unsigned screen_arg = 0;
  for (int i = 2; i < argc; i++) {
    if (i + 1 < argc && !strcmp(argv[i], "--screen")) screen_arg = (unsigned)atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--causes")) want_causes = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: mdc_png_check SHOT.png [--screen HEIGHT] [--causes N]\n");
      return 2;
    }
  }
  if (argc < 2) {
    fprintf(stderr, "usage: mdc_png_check SHOT.png [--screen HEIGHT] [--causes N]\n");
    return 2;
  }
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, argv[1])) {
    fprintf(stderr, "mdc_png_check: %s: %s\n", argv[1], img.message);
    return 2;
  }
  img.format = PNG_FORMAT_RGB;
  size_t stride = PNG_IMAGE_ROW_STRIDE(img), size = PNG_IMAGE_BUFFER_SIZE(img, stride);
  unsigned char *px = malloc(size);
  if (!px || !png_image_finish_read(&img, NULL, px, (png_int_32)stride, NULL)) {
    fprintf(stderr, "mdc_png_check: %s: %s\n", argv[1], px ? img.message : "out of memory");
    free(px);
    return 2;
  }
  unsigned w = img.width, h = img.height, screen = screen_arg ? screen_arg : h;
  if (screen == 0 || screen > h) screen = h;
  int ok = 1;
  /* Not blank: many colours (text is anti-aliased; a blank or failed page has one or two). */
  unsigned char *seen = calloc(1u << 15, 1);
  unsigned colours = 0;
  for (unsigned y = 0; y < h && seen; y++)
    for (unsigned x = 0; x < w; x++) {
      const unsigned char *p = px + y * stride + 3 * x;
      unsigned key = (unsigned)(p[0] >> 3) << 10 | (unsigned)(p[1] >> 3) << 5 | (unsigned)(p[2] >> 3);
      if (!seen[key]) seen[key] = 1, colours++;
    }
  free(seen);
  printf("%s: %ux%u, %u colours (5 bits a channel)\n", argv[1], w, h, colours);
  if (colours < 32) {
    printf("FAIL: blank or nearly so (%u colours)\n", colours);
    ok = 0;
  }
  /* The header band: rows at the top mostly the header's background. */
  unsigned band = 0;
  for (unsigned y = 0; y < screen && y < 300; y++) {
    unsigned k = 0;
    for (unsigned x = 0; x < w; x++) k += near(px + y * stride + 3 * x, header_bg);
    if (k > w / 2) band++;
    else if (band) break;
  }
  printf("header band: %u rows from the top\n", band);
  if (band < 40 || !near(px + 5 * stride + 3 * 5, header_bg)) {
    printf("FAIL: no run header across the top of the first screen\n");
    ok = 0;
  }
  /* The totals: the first row below the band with a chip-wide (>= 80 px) run of the Pass and of
   * the Fail colour; the chips come before anything else drawn in those colours. */
  unsigned at[2] = {0, 0};
  const rgb chips[2] = {pass_chip, fail_chip};
  for (int c = 0; c < 2; c++)
    for (unsigned y = band; y < h && !at[c]; y++) {
      unsigned run = 0;
      for (unsigned x = 0; x < w && !at[c]; x++) {
        run = near(px + y * stride + 3 * x, chips[c]) ? run + 1 : 0;
        if (run >= 80) at[c] = y;
      }
    }
  printf("totals: Pass chip at row %u, Fail chip at row %u (first screen: %u rows)\n", at[0], at[1], screen);
  if (!at[0] || !at[1] || at[0] >= screen || at[1] >= screen) {
    printf("FAIL: the totals are not on the first screen\n");
    ok = 0;
  }
  if (want_causes >= 0) {
    /* Bands of rows holding a badge-wide (>= 30 px) run of the cause count's colour: one band
     * per cause row drawn on the first screen. */
    unsigned bands = 0;
    int in_band = 0;
    for (unsigned y = 0; y < screen; y++) {
      unsigned run = 0, hit = 0;
      for (unsigned x = 0; x < w && !hit; x++) {
        run = near(px + y * stride + 3 * x, cause_n) ? run + 1 : 0;
        hit = run >= 30;
      }
      if (hit && !in_band) bands++;
      in_band = (int)hit;
    }
    printf("causes: %u rows on the first screen (want %d)\n", bands, want_causes);
    if ((int)bands != want_causes) {
      printf("FAIL: the causes table does not show %d causes on the first screen\n", want_causes);
      ok = 0;
    }
  }
  free(px);
  png_image_free(&img);
  printf("%s\n", ok ? "OK: not blank; run header and totals on the first screen" : "FAILED");
  return ok ? 0 : 1;
}
