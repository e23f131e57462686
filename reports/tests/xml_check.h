/* xml_check.h - private to the reports tests: parsing what the writers produce with libxml2
 * (strict XML for SVG, JUnit and the page, which is written as well-formed XHTML-compatible
 * HTML: libxml2's HTML parser is HTML 4 and does not know section, nav or svg), and walking the
 * tree to count elements and read attributes. */
#ifndef MDC_XML_CHECK_H
#define MDC_XML_CHECK_H

#include <criterion/criterion.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first parse error libxml2 reported, for assertion messages. */
static char xc_err[512];

static inline void xc_on_error(void *ctx, const xmlError *e) {
  (void)ctx;
  if (!xc_err[0] && e)
    snprintf(xc_err, sizeof xc_err, "line %d: %s", e->line, e->message ? e->message : "?");
}

/* Parses text as XML (no network, no entity loading); NULL with xc_err set when it is not
 * well-formed. Free with xmlFreeDoc. */
static inline xmlDocPtr xc_parse(const char *text, size_t len) {
  xc_err[0] = 0;
  xmlSetStructuredErrorFunc(NULL, (xmlStructuredErrorFunc)xc_on_error);
  xmlDocPtr d = xmlReadMemory(text, (int)len, "test.xml", "UTF-8", XML_PARSE_NONET | XML_PARSE_NOWARNING);
  xmlSetStructuredErrorFunc(NULL, NULL);
  return d;
}

/* The number of elements named name under n (n included). */
static inline int xc_count(xmlNodePtr n, const char *name) {
  int k = 0;
  for (; n; n = n->next) {
    if (n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0) k++;
    k += xc_count(n->children, name);
  }
  return k;
}

/* The first element named name in document order under n (n included), or NULL. */
static inline xmlNodePtr xc_find(xmlNodePtr n, const char *name) {
  for (; n; n = n->next) {
    if (n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0) return n;
    xmlNodePtr c = xc_find(n->children, name);
    if (c) return c;
  }
  return NULL;
}

/* The element under n whose attribute attr equals value, or NULL. */
static inline xmlNodePtr xc_find_attr(xmlNodePtr n, const char *attr, const char *value) {
  for (; n; n = n->next) {
    if (n->type == XML_ELEMENT_NODE) {
      xmlChar *v = xmlGetProp(n, (const xmlChar *)attr);
      int hit = v && strcmp((const char *)v, value) == 0;
      xmlFree(v);
      if (hit) return n;
    }
    xmlNodePtr c = xc_find_attr(n->children, attr, value);
    if (c) return c;
  }
  return NULL;
}

/* Attribute attr of n into a static buffer ("" when absent). */
static inline const char *xc_attr(xmlNodePtr n, const char *attr) {
  static char buf[1024];
  xmlChar *v = n ? xmlGetProp(n, (const xmlChar *)attr) : NULL;
  snprintf(buf, sizeof buf, "%s", v ? (const char *)v : "");
  xmlFree(v);
  return buf;
}

/* The text content of n into a malloc'd string. */
static inline char *xc_text(xmlNodePtr n) {
  xmlChar *t = xmlNodeGetContent(n);
  char *s = strdup(t ? (const char *)t : "");
  xmlFree(t);
  return s;
}

/* What a writer wrote to a memstream. */
typedef struct xc_buf {
  char *text;
  size_t len;
  FILE *f;
} xc_buf;

static inline void xc_open(xc_buf *b) {
  b->text = NULL;
  b->len = 0;
  b->f = open_memstream(&b->text, &b->len);
  cr_assert_not_null(b->f);
}

static inline void xc_close(xc_buf *b) { fclose(b->f); }

#endif
