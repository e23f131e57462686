/* outcomes.c - what events leave for later events (trace format 1.1): a call's status kept under
 * its `as` or `id` name, `when` conditions on them, `tally` counters of outcomes (concurrent
 * lanes racing, say) judged by `expect_tally`, and `collect`ions of handles judged by
 * `expect_unpredictable` (SPEC 8.12). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

/* ---- tallies ---- */

#define MAX_LABELS 16

typedef struct mdc__tally {
  char name[128];
  char labels[MAX_LABELS][32];   /* "NONE", "INVALID_ARGUMENT", "match", ... */
  uint64_t counts[MAX_LABELS];
  uint32_t n_labels;
  uint32_t line;                 /* where it was first counted */
} mdc__tally;

static mdc__tally *tally_find(mdc__run *r, const char *name) {
  for (size_t i = 0; i < r->n_tallies; i++)
    if (strcmp(r->tallies[i].name, name) == 0) return &r->tallies[i];
  return NULL;
}

int mdc__tally_add(mdc__run *r, mdc__where *w, const char *name, const char *label) {
  pthread_mutex_lock(&r->lock);
  mdc__tally *t = tally_find(r, name);
  if (!t) {
    mdc__tally *v = realloc(r->tallies, (r->n_tallies + 1) * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&r->lock);
      return mdc__terr(w, "out of memory");
    }
    r->tallies = v;
    t = &v[r->n_tallies++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->line = w->line;
  }
  uint32_t k = 0;
  while (k < t->n_labels && strcmp(t->labels[k], label) != 0) k++;
  if (k == t->n_labels && k < MAX_LABELS) snprintf(t->labels[t->n_labels++], sizeof t->labels[0], "%s", label);
  if (k < MAX_LABELS) t->counts[k]++;
  pthread_mutex_unlock(&r->lock);
  return 0;
}

void mdc__tallies_free(mdc__run *r) {
  free(r->tallies);
  r->tallies = NULL;
  r->n_tallies = 0;
}

static uint64_t tally_count(const mdc__tally *t, const char *label) {
  for (uint32_t k = 0; k < t->n_labels; k++)
    if (strcmp(t->labels[k], label) == 0) return t->counts[k];
  return 0;
}

static void tally_str(const mdc__tally *t, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (uint32_t k = 0; k < t->n_labels && n < len; k++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s %" PRIu64, k ? ", " : "", t->labels[k], t->counts[k]);
  if (!t->n_labels) snprintf(buf, len, "nothing counted");
}

/* The bound objects of one expect_tally field: {"LABEL": n, ...}. */
static int bounds_check(mdc__where *w, json_t *obj, const char *what) {
  if (!obj) return 0;
  if (!json_is_object(obj)) return mdc__terr(w, "'%s' takes {\"LABEL\": count, ...}", what);
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return mdc__terr(w, "'%s': the count of '%s' must be an unsigned integer", what, key);
  }
  return 0;
}

int mdc__expect_tally(mdc__run *r, mdc__where *w, json_t *ev) {
  const char *name;
  if (mdc__get_str(w, ev, "tally", 1, &name)) return -1;
  json_t *exactly = json_object_get(ev, "exactly"), *at_least = json_object_get(ev, "at_least"),
         *at_most = json_object_get(ev, "at_most");
  if (bounds_check(w, exactly, "exactly") || bounds_check(w, at_least, "at_least") ||
      bounds_check(w, at_most, "at_most"))
    return -1;
  if (!exactly && !at_least && !at_most) return mdc__terr(w, "give 'exactly', 'at_least' or 'at_most'");
  pthread_mutex_lock(&r->lock);
  mdc__tally snapshot, *t = tally_find(r, name);
  if (t) snapshot = *t;
  pthread_mutex_unlock(&r->lock);
  if (!t) {
    /* Nothing counted yet (every tallied event was skipped): all counts are 0. */
    memset(&snapshot, 0, sizeof snapshot);
    snprintf(snapshot.name, sizeof snapshot.name, "%s", name);
  }
  char seen[400];
  tally_str(&snapshot, seen, sizeof seen);
  json_t *sets[3] = {exactly, at_least, at_most};
  static const char *const words[3] = {"exactly", "at least", "at most"};
  for (int k = 0; k < 3; k++) {
    const char *label;
    json_t *v;
    json_object_foreach(sets[k], label, v) {
      uint64_t want = (uint64_t)json_integer_value(v), got = tally_count(&snapshot, label);
      int ok = k == 0 ? got == want : k == 1 ? got >= want : got <= want;
      if (!ok) {
        char ex[96], ac[96];
        snprintf(ex, sizeof ex, "%s: %s %" PRIu64, label, words[k], want);
        snprintf(ac, sizeof ac, "%s: %" PRIu64, label, got);
        return mdc__fail(r, w, ex, ac, "tally '%s': %s %" PRIu64 " time%s, expected %s %" PRIu64 " (counted: %s)",
                         name, label, got, got == 1 ? "" : "s", words[k], want, seen);
      }
    }
  }
  return 0;
}

/* ---- names that keep a status, and conditions on them ---- */

int mdc__when_holds(mdc__run *r, mdc__where *w, json_t *ev, int *holds) {
  json_t *c = json_object_get(ev, "when");
  *holds = 1;
  if (!c) return 0;
  json_t *prod = json_object_get(c, "produced"), *notp = json_object_get(c, "not_produced"),
         *st = json_object_get(c, "status");
  const char *name = json_string_value(prod ? prod : notp ? notp : st);
  mdc__name e;
  if (mdc__names_get(&r->names, name, &e))
    return mdc__terr(w, "'when': no earlier event is named '%s' (a name is made by `as`, `id` or `collect`)", name);
  if (prod || notp) {
    *holds = prod ? e.bound != 0 : e.bound == 0;
    return 0;
  }
  json_t *in = json_object_get(c, "in");
  *holds = 0;
  if (!e.has_status) return 0; /* its call was skipped: it ended no way at all */
  for (size_t i = 0; i < json_array_size(in); i++) {
    md_status want;
    mdc__status_parse(json_string_value(json_array_get(in, i)), &want);
    if (want == e.status) *holds = 1;
  }
  return 0;
}

int mdc__outcome_record(mdc__run *r, mdc__where *w, json_t *ev, md_status st, uint64_t produced) {
  const char *as = json_string_value(json_object_get(ev, "as"));
  const char *id = json_string_value(json_object_get(ev, "id"));
  const char *tally = json_string_value(json_object_get(ev, "tally"));
  const char *collect = json_string_value(json_object_get(ev, "collect"));
  mdc__name *e;
  if (as && (e = mdc__names_find(&r->names, as))) {
    pthread_mutex_lock(&r->names.lock);
    e->has_status = 1;
    e->status = st;
    pthread_mutex_unlock(&r->names.lock);
  }
  if (id) {
    if (mdc__names_declare(w, &r->names, "id", id, MDC_OBJ_OUTCOME, &e)) return -1;
    pthread_mutex_lock(&r->names.lock);
    e->has_status = 1;
    e->status = st;
    e->bound = st == MD_NONE; /* `produced` holds for an id whose call succeeded */
    pthread_mutex_unlock(&r->names.lock);
  }
  if (tally && mdc__tally_add(r, w, tally, mdc__status_name(st))) return -1;
  if (collect && st == MD_NONE && produced) {
    if (!(e = mdc__names_find(&r->names, collect)) &&
        mdc__names_declare(w, &r->names, "collect", collect, MDC_OBJ_COLLECTION, &e))
      return -1;
    if (e->kind != MDC_OBJ_COLLECTION)
      return mdc__terr(w, "'collect': '%s' is a %s, not a collection", collect, mdc_obj_name(e->kind));
    pthread_mutex_lock(&r->names.lock);
    int oom = 0;
    if (e->n_collected == e->cap_collected) {
      size_t cap = e->cap_collected ? 2 * e->cap_collected : 64;
      uint64_t *v = realloc(e->collected, cap * sizeof *v);
      if (v) e->collected = v, e->cap_collected = cap;
      else oom = 1;
    }
    if (!oom) {
      e->collected[e->n_collected++] = produced;
      e->bound = 1;
    }
    pthread_mutex_unlock(&r->names.lock);
    if (oom) return mdc__terr(w, "out of memory");
  }
  return 0;
}

/* ---- SPEC 8.12: handles carry unpredictable bits ---- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Pairs of handles that differ only in their low 32 bits (the same high half): 0 for a handle
 * set with unpredictable bits, n-1 for sequential values. */
static size_t predictable_pairs(const uint64_t *v, size_t n, uint64_t *example_a, uint64_t *example_b) {
  uint64_t *hi = malloc(n * sizeof *hi);
  if (!hi) return 0;
  for (size_t i = 0; i < n; i++) hi[i] = v[i];
  if (n) qsort(hi, n, sizeof *hi, cmp_u64); /* sorted by value: equal high halves are adjacent */
  size_t pairs = 0;
  for (size_t i = 1; i < n; i++)
    if ((hi[i] >> 32) == (hi[i - 1] >> 32) && hi[i] != hi[i - 1]) {
      if (!pairs) *example_a = hi[i - 1], *example_b = hi[i];
      pairs++;
    }
  free(hi);
  return pairs;
}

int mdc__expect_unpredictable(mdc__run *r, mdc__where *w, json_t *ev) {
  json_t *cols = json_object_get(ev, "collections");
  if (!json_is_array(cols) || json_array_size(cols) == 0 || json_array_size(cols) > 8)
    return mdc__terr(w, "'collections' takes 1 to 8 collection names (each a try: one that passes is enough)");
  char detail[512] = "";
  size_t tries = json_array_size(cols);
  for (size_t t = 0; t < tries; t++) {
    const char *name = json_string_value(json_array_get(cols, t));
    mdc__name *e = name ? mdc__names_find(&r->names, name) : NULL;
    if (!e || e->kind != MDC_OBJ_COLLECTION)
      return mdc__terr(w, "'collections': '%s' is no collection an earlier `collect` filled", name ? name : "?");
    pthread_mutex_lock(&r->names.lock);
    size_t n = e->n_collected;
    uint64_t *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (copy) memcpy(copy, e->collected, n * sizeof *copy);
    pthread_mutex_unlock(&r->names.lock);
    if (n && !copy) return mdc__terr(w, "out of memory");
    uint64_t a = 0, b = 0;
    size_t pairs = n > 1 ? predictable_pairs(copy, n, &a, &b) : 0;
    free(copy);
    if (n < 2) return mdc__terr(w, "collection '%s' holds %zu handle%s: nothing to judge", name, n, n == 1 ? "" : "s");
    if (pairs == 0) return 0;
    snprintf(detail, sizeof detail, "%s%s: %zu of %zu handles share their high 32 bits with another (e.g. 0x%016" PRIx64
             " and 0x%016" PRIx64 ")", detail[0] ? "; " : "", name, pairs, n, a, b);
  }
  return mdc__fail(r, w, "no two handles differ only in their low 32 bits", detail,
                   "handles are predictable in %zu of %zu tr%s: %s (SPEC 8.12)", tries, tries, tries == 1 ? "y" : "ies",
                   detail);
}

/* ---- static checks of the 1.1 fields ---- */

int mdc__outcome_fields_check(mdc__run *r, mdc__where *w, json_t *ev, const mdc__op *op) {
  static const char *const fields[] = {"when", "id", "tally", "collect"};
  for (int i = 0; i < 4; i++) {
    json_t *v = json_object_get(ev, fields[i]);
    if (!v) continue;
    int own = 0; /* a field of the event itself (expect_tally's `tally`) */
    for (int k = 0; op->event && k < 12 && op->event->keys[k] && !own; k++) own = strcmp(op->event->keys[k], fields[i]) == 0;
    if (own) continue;
    if (r->hdr.minor < 1) return mdc__terr(w, "'%s' needs trace format 1.1 (the header says 1.%d)", fields[i], r->hdr.minor);
    if (i == 0) continue;
    if (!json_is_string(v) || !mdc__name_valid(json_string_value(v)))
      return mdc__terr(w, "'%s' takes a name ([A-Za-z_][A-Za-z0-9_.-]*)", fields[i]);
    if (i == 1 && !op->call) return mdc__terr(w, "'id' names a driver call's outcome");
    if (i == 2 && !op->call && !(op->event->flags & MDC__EV_READS_MEMORY))
      return mdc__terr(w, "'tally' counts the outcomes of driver calls and checks");
    if (i == 3 && (!op->call || op->call->produces == MDC_OBJ_NONE || op->call->produces == MDC_OBJ_DEVICE))
      return mdc__terr(w, "'collect' gathers the handles a call produces (open_client, prepare_model, allocate, execute_async)");
  }
  json_t *c = json_object_get(ev, "when");
  if (c) {
    json_t *prod = json_object_get(c, "produced"), *notp = json_object_get(c, "not_produced"),
           *st = json_object_get(c, "status"), *in = json_object_get(c, "in");
    int n = (prod != NULL) + (notp != NULL) + (st != NULL);
    size_t keys = json_is_object(c) ? json_object_size(c) : 0;
    if (!json_is_object(c) || n != 1 || keys != (size_t)n + (st && in ? 1 : 0) || (st && !in) || (!st && in))
      return mdc__terr(w, "'when' takes {\"produced\": NAME}, {\"not_produced\": NAME} or {\"status\": NAME, \"in\": [STATUS...]}");
    json_t *nm = prod ? prod : notp ? notp : st;
    if (!json_is_string(nm)) return mdc__terr(w, "'when': the name must be a string");
    if (st) {
      if (!json_is_array(in) || json_array_size(in) == 0 || json_array_size(in) > 16)
        return mdc__terr(w, "'when': 'in' lists 1 to 16 statuses");
      for (size_t i = 0; i < json_array_size(in); i++) {
        md_status x;
        json_t *s = json_array_get(in, i);
        if (!json_is_string(s) || mdc__status_parse(json_string_value(s), &x))
          return mdc__terr(w, "'when': 'in' takes status names (NONE, INVALID_ARGUMENT, ...)");
      }
    }
  }
  return 0;
}
