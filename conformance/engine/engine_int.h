/* engine_int.h - private to mdc_engine: the types and helpers its files share.
 *
 * Nothing here is part of conformance/include/mdc/engine.h. Every helper that can meet bad
 * trace input returns 0 on success or -1 after writing "path:line: op: problem" into its
 * mdc__where; none of them exits, aborts or leaks on that path. */
#ifndef MDC_ENGINE_INT_H
#define MDC_ENGINE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"
#include "mdc/engine.h"

/* Limits that keep a malformed trace from exhausting memory (docs/conformance.md). */
#define MDC__MAX_MEMORY (1ull << 30)      /* bytes of one pool, payload or sidecar */
#define MDC__MAX_ARRAY (1u << 20)         /* entries of dims/operand/index arrays */
#define MDC__MAX_DIMS 64u                 /* rank a trace may write (the ABI's own max is 8) */
#define MDC__MAX_LINE (64u << 20)         /* bytes of one trace line */
#define MDC__MAX_LANES 64u
#define MDC__MAX_REPEAT 100000u
#define MDC__MAX_BLOCK_EVENTS 10000u
#define MDC__MAX_SHAPES 4096u

/* Where an event comes from, and the trace error it raised. */
typedef struct mdc__where {
  const char *path;
  uint32_t line;
  const char *op;
  char msg[1024];
} mdc__where;

/* Formats "path:line: op: <fmt>" into w->msg and returns -1. */
int mdc__terr(mdc__where *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- arena: every model/request/payload's storage, freed at once ---- */
typedef struct mdc__arena {
  struct mdc__block *head;
} mdc__arena;
void *mdc__arena_alloc(mdc__arena *a, size_t n, size_t count); /* zeroed; NULL on overflow/OOM */
char *mdc__arena_strdup(mdc__arena *a, const char *s);
void mdc__arena_free(mdc__arena *a);

/* ---- JSON helpers (json.c). `strict`: unknown keys are trace errors (reader's own minor). ---- */
int mdc__check_keys(mdc__where *w, json_t *obj, const char *const *allowed, int strict,
                    const char *what);
/* Integer field in [lo, hi]; absent: *out = def, or a trace error when `required`. */
int mdc__get_int(mdc__where *w, json_t *obj, const char *key, int required, int64_t def,
                 int64_t lo, int64_t hi, int64_t *out);
int mdc__get_u64(mdc__where *w, json_t *obj, const char *key, int required, uint64_t def,
                 uint64_t hi, uint64_t *out); /* integer or "0x..." string */
int mdc__get_num(mdc__where *w, json_t *obj, const char *key, double def, double *out);
int mdc__num_value(mdc__where *w, json_t *v, const char *what, double *out); /* number, "nan", "inf" */
int mdc__get_str(mdc__where *w, json_t *obj, const char *key, int required, const char **out);
int mdc__get_bool(mdc__where *w, json_t *obj, const char *key, int def, int *out);
/* An array of unsigned 32-bit integers (absent or null: count 0). */
int mdc__get_u32_array(mdc__where *w, mdc__arena *a, json_t *obj, const char *key, uint32_t max,
                       uint32_t *count, uint32_t **out);
int mdc__u64_value(mdc__where *w, json_t *v, const char *what, uint64_t *out);

/* ---- enums: names of driver.h without their prefix, or a number ---- */
typedef struct mdc__enum {
  const char *name;
  int64_t value;
} mdc__enum;
extern const mdc__enum mdc__statuses[], mdc__operand_types[], mdc__lifetimes[],
    mdc__operation_types[], mdc__memory_kinds[];
int mdc__enum_value(mdc__where *w, json_t *v, const mdc__enum *table, const char *what,
                    int64_t *out);
const char *mdc__status_name(md_status st); /* "INVALID_ARGUMENT", or "STATUS_<n>" (static buf) */
int mdc__status_parse(const char *name, md_status *out);

/* ---- payloads (payload.c) ---- */
typedef enum mdc__elem { MDC__ELEM_BYTES = 0, MDC__ELEM_F32, MDC__ELEM_I32, MDC__ELEM_U8 } mdc__elem;
typedef struct mdc__bytes {
  uint8_t *data; /* malloc'd; free with free() */
  size_t len;
  mdc__elem type; /* the form's own type (inline f32/i32/u8, random's type), else BYTES */
} mdc__bytes;
int mdc__payload(mdc__where *w, json_t *v, int strict, mdc__bytes *out);
int mdc__elem_parse(const char *s, mdc__elem *out);
size_t mdc__elem_size(mdc__elem t);
const char *mdc__elem_name(mdc__elem t);

/* ---- pools (pool.c): real memory the replayer made, or a bad descriptor ---- */
typedef struct mdc__pool {
  md_memory mem;
  uint8_t *map;   /* the whole backing file, mapped read-write by the replayer (NULL: bad_memory) */
  size_t map_len;
  int fds[2];     /* fds to close (-1: none) */
} mdc__pool;
int mdc__pool_make(mdc__where *w, json_t *ev, int strict, mdc__pool **out);
int mdc__pool_bad(mdc__where *w, json_t *ev, mdc__pool **out);
void mdc__pool_free(mdc__pool *p);
/* Bytes [off, off+len) of the pool (offset relative to the pool's start); NULL + error if out. */
uint8_t *mdc__pool_span(mdc__where *w, mdc__pool *p, uint64_t off, uint64_t len);

/* ---- names (names.c): every object a trace produced, by name; thread-safe ---- */
typedef enum mdc__kind {
  MDC__K_DEVICE, MDC__K_CLIENT, MDC__K_PREPARED, MDC__K_TOKEN, MDC__K_EVENT,
  MDC__K_MEMORY, MDC__K_MODEL, MDC__K_REQUEST
} mdc__kind;

typedef struct mdc__model {
  mdc__arena arena;
  md_model m;
} mdc__model;

typedef struct mdc__name {
  char name[128];
  mdc__kind kind;
  uint32_t line;        /* the event that produced it */
  int bound;            /* 0: its call failed, nothing to use */
  int closed;           /* devices and clients: closed (by the trace or at the end) */
  uint64_t value;       /* handles and tokens */
  md_device *dev;       /* devices: the device; handles: the device they belong to */
  uint32_t n_outputs;   /* events: outputs of the request that made them */
  mdc__pool *pool;      /* memory */
  mdc__model *model;    /* model */
  json_t *request;      /* request (a reference) */
} mdc__name;

typedef struct mdc__names {
  pthread_mutex_t lock;
  mdc__name **all;      /* in order of production */
  size_t n, cap;
  mdc__name **index;    /* open addressing by name hash */
  size_t index_cap;
} mdc__names;

int mdc__names_init(mdc__names *t);
void mdc__names_free(mdc__names *t); /* frees pools, models, requests; closes nothing */
/* Looks a name up; NULL if absent. The entry stays valid until mdc__names_free. */
mdc__name *mdc__names_find(mdc__names *t, const char *name);
/* Declares `name` for the event at w->line: a trace error if another event already produced it.
 * The same line may declare it again (a repeated concurrent block rebinds). */
int mdc__names_declare(mdc__where *w, mdc__names *t, const char *name, mdc__kind kind,
                       mdc__name **out);
/* Copies the entry for `name` under the lock; -1 if absent. */
int mdc__names_get(mdc__names *t, const char *name, mdc__name *copy);
/* Binds a declared entry to the object its call produced (under the lock). */
void mdc__names_bind(mdc__names *t, mdc__name *e, uint64_t value, md_device *dev,
                     uint32_t n_outputs);
const char *mdc__kind_name(mdc__kind k);
int mdc__name_valid(const char *s);

/* Resolves a handle argument: a name of a client/prepared/token/event, {"literal": v} or
 * {"forge": name, "xor": bits}. */
int mdc__resolve_handle(mdc__where *w, mdc__names *t, json_t *v, const char *what, uint64_t *out);
/* Resolves a memory name (memory or bad_memory). */
int mdc__resolve_memory(mdc__where *w, mdc__names *t, json_t *v, const char *what, mdc__pool **out);

/* ---- models and requests (model.c) ---- */
int mdc__model_build(mdc__where *w, mdc__names *t, json_t *obj, int strict, mdc__model **out);
void mdc__model_free(mdc__model *m);
/* Builds a request into storage from `a`. resolve == 0 only checks its shape (names may be
 * produced later); resolve == 1 resolves every name. */
int mdc__request_build(mdc__where *w, mdc__names *t, json_t *obj, int strict, int resolve,
                       mdc__arena *a, md_request *out);

/* ---- the judge (judge.c) ---- */
typedef struct mdc__verdict {
  mdc_verdict verdict;   /* PASS while nothing went wrong */
  uint32_t line;
  char message[1024];
  char expected[512];
  char actual[512];
} mdc__verdict;

/* Compares a pool region with expected values; on mismatch fills exp/act/msg and returns 1. */
int mdc__compare(mdc__elem type, const uint8_t *actual, const uint8_t *expected, size_t count,
                 double atol, double rtol, char *exp, size_t explen, char *act, size_t actlen,
                 char *msg, size_t msglen);

#endif
