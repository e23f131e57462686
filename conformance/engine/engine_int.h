/* engine_int.h - private to mdc_engine: the types and helpers its files share.
 *
 * Nothing here is part of conformance/include/mdc/engine.h. Every helper that can meet bad
 * trace input returns 0 on success or -1 after writing "path:line: op: problem" into its
 * mdc__where; none of them exits, aborts or leaks on that path. */
#ifndef MDC_ENGINE_INT_H
#define MDC_ENGINE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"
#include "mdc/calls.h"
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

/* What mdc fills the driver's out-parameters with before a call, so a value the driver never
 * wrote is recognised and reported as such: 0xA5 bytes (shapes, leak reports). */
#define MDC__POISON_BYTE 0xA5
#define MDC__POISON32 0xA5A5A5A5u
#define MDC__POISON64 0xA5A5A5A5A5A5A5A5ull

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
  int keep;       /* fds[0] goes back to the kept files when the pool is freed (keep_files) */
  int is_file;    /* fds[0] is a temporary file (mmap_fd), not a memfd */
} mdc__pool;
/* keep: take the pool's file from those earlier pools left (mdc_trace_opts.keep_files) and
 * leave it there when freed. */
int mdc__pool_make(mdc__where *w, json_t *ev, int strict, int keep, mdc__pool **out);
int mdc__pool_bad(mdc__where *w, json_t *ev, mdc__pool **out);
void mdc__pool_free(mdc__pool *p);
/* Bytes [off, off+len) of the pool (offset relative to the pool's start); NULL + error if out. */
uint8_t *mdc__pool_span(mdc__where *w, mdc__pool *p, uint64_t off, uint64_t len);

/* ---- names (names.c): every object a trace produced, by name; thread-safe ---- */
typedef struct mdc__model {
  mdc__arena arena;
  md_model m;
} mdc__model;

typedef struct mdc__name {
  char name[128];
  mdc_obj kind;
  uint32_t line;        /* the event that produced it */
  int bound;            /* 0: its call failed, nothing to use */
  int closed;           /* devices and clients: closed (by the trace or at the end) */
  uint64_t value;       /* handles and tokens */
  md_device *dev;       /* devices: the device; handles: the device they belong to */
  uint32_t n_outputs;   /* events: outputs of the request that made them */
  mdc__pool *pool;      /* memory */
  struct mdc__name *registered_from; /* registered pools: the memory named at register_memory */
  mdc__model *model;    /* model (owned by the run, mdc__run_keep_model) */
  json_t *request;      /* request (a reference) */
  int has_status;       /* the call that declared it (`as`, `id`) has run: its status */
  md_status status;
  uint64_t *collected;  /* collections: the handles `collect` gathered */
  size_t n_collected, cap_collected;
} mdc__name;

typedef struct mdc__names {
  pthread_mutex_t lock;
  mdc__name **all;      /* in order of production */
  size_t n, cap;
  mdc__name **index;    /* open addressing by name hash */
  size_t index_cap;
} mdc__names;

int mdc__names_init(mdc__names *t);
void mdc__names_free(mdc__names *t); /* frees pools and requests (not models); closes nothing */
/* Looks a name up; NULL if absent. The entry stays valid until mdc__names_free. */
mdc__name *mdc__names_find(mdc__names *t, const char *name);
/* Declares `name` for the event at w->line: a trace error if another event already produced it.
 * The same line may declare it again (a repeated concurrent block rebinds). */
int mdc__names_declare(mdc__where *w, mdc__names *t, const char *field, const char *name, mdc_obj kind,
                       mdc__name **out);
/* Copies the entry for `name` under the lock; -1 if absent. */
int mdc__names_get(mdc__names *t, const char *name, mdc__name *copy);
/* Binds a declared entry to the object its call produced (under the lock). */
void mdc__names_bind(mdc__names *t, mdc__name *e, uint64_t value, md_device *dev,
                     uint32_t n_outputs);
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
 * produced later); resolve == 1 resolves every name. minor: the trace's (a pool entry
 * {"registered": NAME} needs 1.1). */
int mdc__request_build(mdc__where *w, mdc__names *t, json_t *obj, int strict, int minor, int resolve,
                       mdc__arena *a, md_request *out);

/* ---- the judge (judge.c) ---- */
typedef struct mdc__verdict {
  mdc_verdict verdict;   /* PASS while nothing went wrong */
  uint32_t line;
  char event[32];
  char message[1024];
  char expected[512];
  char actual[512];
  char driver_message[512];
} mdc__verdict;

/* Compares a pool region with expected values; on mismatch fills exp/act/msg and returns 1. */
int mdc__compare(mdc__elem type, const uint8_t *actual, const uint8_t *expected, size_t count,
                 double atol, double rtol, char *exp, size_t explen, char *act, size_t actlen,
                 char *msg, size_t msglen);

/* ---- the run: one trace being replayed (replay.c), and what its events share ---- */

/* What `expect` asks of one call (judge.c). */
typedef struct mdc__expect {
  md_status allowed[16];
  int n_allowed;
  const char *message;
  json_t *shapes, *leaks, *supported;
  const char *timing, *backend;
  int smd;               /* supports_memory_domains: -1 not asked */
} mdc__expect;

typedef struct mdc__run {
  const md_driver *drv;
  const char *path;
  const char *config;    /* the replay's config keys (merged into the first open_device) */
  const mdc_trace_opts *opts;  /* progress page and verbose log (never NULL) */
  int strict;            /* the trace is at this reader's minor: unknown fields are errors */
  mdc_trace_header hdr;
  mdc__names names;
  pthread_mutex_t lock;  /* verdict, device, client and model lists */
  mdc__verdict v;
  atomic_int stop;       /* something was recorded: run nothing more */
  atomic_uint events;
  mdc__name **devs;      /* every device and client the trace opened, in order */
  size_t n_devs, cap_devs;
  mdc__name **clients;
  size_t n_clients, cap_clients;
  int opened_device;     /* the first open_device (which gets --config) happened */
  int requires_checked;
  /* What a trace below MDC__MINOR_DECLARES needs without listing it, inferred from what it does
   * (replay.c) and judged with its `requires` (dispatch.c): the capability and the line that
   * needs it. */
  struct {
    const char *cap;
    uint32_t line;
  } inferred[2];
  int n_inferred;
  int in_block;          /* a concurrent block runs: omitted client/device are the snapshot's */
  size_t blk_nclients, blk_ndevs;
  uint64_t blk_client;
  md_device *blk_client_dev, *blk_dev;
  mdc__model **models;   /* every model the trace built (named or inline), freed at the end */
  size_t n_models, cap_models;
  struct mdc__tally *tallies;  /* `tally` counters, by name (outcomes.c) */
  size_t n_tallies;
  atomic_uint skipped;   /* events whose `when` did not hold */
  char advisory[512];    /* message expectations that did not match (SPEC 8.11), "; "-joined */
} mdc__run;

/* The trace format minor from which a trace lists in `requires` every capability it uses (an
 * allocate that may succeed: memory_domains; register_memory: registered_pools), a trace error
 * otherwise. A trace of an earlier minor reads with that minor's rules: its needs are inferred. */
#define MDC__MINOR_DECLARES 1

/* replay.c */
/* Records the first verdict other than Pass (a trace error replaces an earlier Fail) for the
 * event at w, and stops the run. Thread-safe. */
void mdc__record(mdc__run *r, mdc_verdict verdict, const mdc__where *w, const char *msg,
                 const char *exp, const char *act);
/* A Fail at the event of w: "path:line: op: <fmt>". Returns 1. */
int mdc__fail(mdc__run *r, mdc__where *w, const char *exp, const char *act, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The same for a call whose driver said drv_msg (its last_error, kept with the verdict). */
int mdc__fail_call(mdc__run *r, mdc__where *w, const char *drv_msg, const char *exp, const char *act,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The verbose log, when the replay has one (NULL otherwise). */
static inline FILE *mdc__verbose(const mdc__run *r) { return r->opts->verbose; }
/* Appends item to a growing array of pointers; -1 on out of memory (nothing changed). */
int mdc__push(void *arrp, size_t *n, size_t *cap, void *item);
/* Hands m to the run, which frees it at the end; on failure (out of memory) m is freed and a
 * trace error is in w. Thread-safe. */
int mdc__run_keep_model(mdc__run *r, mdc__where *w, mdc__model *m);

/* judge.c: expectations. */
/* Parses ev's `expect` for a driver call c (NULL: an event that takes none). */
int mdc__expect_parse(mdc__where *w, const mdc_call_desc *c, json_t *ev, int strict, mdc__expect *e);
/* The status (one of the allowed) and message parts of every call's judgement; 0 met, 1 Fail.
 * The message is the driver's last_error for dev (_msg: the one given, read earlier). */
int mdc__judge_status(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st, md_device *dev);
int mdc__judge_status_msg(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st, const char *le);
/* Whether st is one of the statuses e allows. */
int mdc__expect_allows(const mdc__expect *e, md_status st);
/* Shapes and timing of execute/wait_event (n shapes given, n_outputs outputs in the request),
 * and SPEC 4's rules for them: a shape for every output on success and on
 * OUTPUT_INSUFFICIENT_SIZE, none and no timing on every other failure. */
int mdc__judge_outputs(mdc__run *r, mdc__where *w, const mdc__expect *e, md_status st,
                       const md_output_shape *sh, uint32_t n, uint32_t n_outputs, const md_timing *tm);

/* args.c: a call's arguments, resolved from the trace. */
int mdc__arg_client(mdc__run *r, mdc__where *w, json_t *ev, uint64_t *client, md_device **hint);
int mdc__arg_device(mdc__run *r, mdc__where *w, json_t *ev, md_device *hint, md_device **dev);
int mdc__arg_model(mdc__run *r, mdc__where *w, json_t *ev, const md_model **out);
int mdc__arg_request(mdc__run *r, mdc__where *w, json_t *ev, mdc__arena *a, md_request *out);
int mdc__arg_handle(mdc__run *r, mdc__where *w, json_t *ev, mdc_arg_id id, uint64_t *out);
int mdc__arg_memory(mdc__run *r, mdc__where *w, json_t *ev, mdc_arg_id id, mdc__pool **out);
int mdc__arg_dims(mdc__where *w, mdc__arena *a, json_t *obj, const char *key, uint32_t *rank,
                  uint32_t **dims);
int mdc__arg_roles(mdc__where *w, mdc__arena *a, json_t *ev, mdc_arg_id id, int strict,
                   md_buffer_role **out, uint32_t *n);
/* Declares the `as` name of ev (required or not) for an object of `kind`; *out NULL when absent. */
int mdc__arg_as(mdc__run *r, mdc__where *w, json_t *ev, mdc_obj kind, int required, mdc__name **out);

/* dispatch.c: one handler per driver call (mdc/calls.h), and running one call. */
int mdc__call_run(mdc__run *r, mdc__where *w, const mdc_call_desc *c, json_t *ev);
/* Closes what the trace left open: clients first, newest first, then devices. */
void mdc__close_leftovers(mdc__run *r);

/* events.c: the replayer's own events (objects it makes, fill/check, block markers). */
#define MDC__EV_IN_BLOCK 1u      /* may appear inside a concurrent block */
#define MDC__EV_BLOCK_START 2u   /* `concurrent` */
#define MDC__EV_BLOCK_END 4u     /* `end_concurrent` */
#define MDC__EV_READS_MEMORY 8u  /* reads the pool named by its `memory` field */
#define MDC__EV_WRITES_MEMORY 16u /* writes it */
#define MDC__EV_V11 32u          /* new in trace format 1.1 */
typedef struct mdc__event_desc {
  const char *name;
  unsigned flags;
  const char *keys[12];  /* fields besides op (and lane inside a block) */
  int (*run)(mdc__run *r, mdc__where *w, json_t *ev);   /* NULL for the block markers */
  const char *args_doc, *summary;   /* for docs/trace-format.md's table */
} mdc__event_desc;
extern const mdc__event_desc mdc__events[];
extern const size_t mdc__n_events;
const mdc__event_desc *mdc__event_find(const char *name);

/* replay.c: what one trace line is, checked on its own. */
typedef struct mdc__op {
  const char *name;
  const mdc_call_desc *call;        /* a driver call, or */
  const mdc__event_desc *event;     /* a replayer event */
} mdc__op;
/* Checks one line: op known, fields known (at the reader's minor), expect well formed, `lane`
 * exactly inside blocks (lanes: the block's lane count). */
int mdc__op_check(mdc__run *r, mdc__where *w, json_t *ev, int in_block, uint32_t lanes, mdc__op *out);
/* Runs one checked event: 0 done, 1 Fail recorded, -1 trace error in w->msg. */
int mdc__op_exec(mdc__run *r, mdc__where *w, const mdc__op *op, json_t *ev);

/* outcomes.c: what events leave for later ones (trace format 1.1): `id` and `as` keep a call's
 * status, `when` runs an event only if an earlier one ended a given way, `tally` counts outcomes
 * (of concurrent lanes, say) for `expect_tally`, `collect` gathers handles for
 * `expect_unpredictable` (SPEC 8.12). */
/* Checks the 1.1 fields of ev (when, id, tally, collect) without running anything: allowed
 * from minor 1, well formed. */
int mdc__outcome_fields_check(mdc__run *r, mdc__where *w, json_t *ev, const mdc__op *op);
/* *holds: whether ev's `when` holds (1 when it has none); -1 for a trace error. */
int mdc__when_holds(mdc__run *r, mdc__where *w, json_t *ev, int *holds);
/* After a call ran: its status into its `as` and `id` names and its `tally`; a produced handle
 * into its `collect` collection. */
int mdc__outcome_record(mdc__run *r, mdc__where *w, json_t *ev, md_status st, uint64_t produced);
/* Counts one outcome label under the tally `name`. Thread-safe. -1 (trace error) when out of memory. */
int mdc__tally_add(mdc__run *r, mdc__where *w, const char *name, const char *label);
/* The events `expect_tally` and `expect_unpredictable`. */
int mdc__expect_tally(mdc__run *r, mdc__where *w, json_t *ev);
int mdc__expect_unpredictable(mdc__run *r, mdc__where *w, json_t *ev);
void mdc__tallies_free(mdc__run *r);

/* block.c: a concurrent block, from its `concurrent` line to `end_concurrent`. */
struct mdc__reader;
int mdc__block_run(mdc__run *r, struct mdc__reader *rd, mdc__where *w, json_t *head);

#endif
