/* mdc/calls.h - one description of every driver call (SPEC 1), for every tool that reads,
 * writes or generates them: the trace reader and the replayer's dispatch (conformance/engine),
 * the recorder's writer (conformance/record), the fuzzer's program decoder (fuzz/) and the
 * event table of docs/trace-format.md (checked against this table by a test).
 *
 * A call is its name (the trace's `op` and the md_driver member), its arguments in ABI order,
 * what it produces (the kind of object its `as` names) and what `expect` may hold for it
 * besides `status` and `message`. An argument is a trace field with a type (how it is written
 * in a trace and what it becomes at the ABI) and, for handles, the kind of object it should
 * name. Adding a call to the ABI means one row here (calls.c) and one handler in the engine.
 *
 * Library mdc_calls: constant data and lookups, no state, thread-safe. */
#ifndef MDC_CALLS_H
#define MDC_CALLS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds of object a trace names. */
#define MDC_OBJ_MAP(X)              \
  X(NONE, "nothing")                \
  X(DEVICE, "device")               \
  X(CLIENT, "client")               \
  X(PREPARED, "prepared model")     \
  X(TOKEN, "token")                 \
  X(EVENT, "event")                 \
  X(MEMORY, "memory")               \
  X(MODEL, "model")                 \
  X(REQUEST, "request")             \
  X(OUTCOME, "outcome")             \
  X(COLLECTION, "collection")       \
  X(POOL, "registered pool")

typedef enum mdc_obj {
#define MDC_X(e, s) MDC_OBJ_##e,
  MDC_OBJ_MAP(MDC_X)
#undef MDC_X
  MDC_OBJ_COUNT
} mdc_obj;

/* How an argument is written in a trace (docs/trace-format.md). */
typedef enum mdc_arg_type {
  MDC_T_DEVICE,  /* a device name, or {"literal": 0} (a NULL device) */
  MDC_T_HANDLE,  /* a handle: the name of any client, prepared model, token, event or registered
                    pool (so a
                    trace can pass one kind where another goes), {"literal": v} or
                    {"forge": name, "xor": bits} */
  MDC_T_HANDLES, /* an array of handles */
  MDC_T_MEMORY,  /* a memory name (memory or bad_memory) */
  MDC_T_MODEL,   /* a model name or an inline model object */
  MDC_T_REQUEST, /* a request name or an inline request object */
  MDC_T_DIMS,    /* an array of unsigned dims (rank = length; absent: rank 0) */
  MDC_T_DESC,    /* {"dims": [...]} (absent or null: rank 0) */
  MDC_T_ROLES,   /* an array of {"model": i, "io": j, "p": 1.0} */
  MDC_T_TEXT,    /* a string */
  MDC_T_U64      /* an unsigned integer or a "0x..." string */
} mdc_arg_type;

/* X(ENUM, key, type, obj, doc): every argument of every call, by meaning. The same key may
 * appear twice with two types (allocate's `prepared` is a list). */
#define MDC_ARG_MAP(X)                                                                             \
  X(DEVICE, "device", MDC_T_DEVICE, MDC_OBJ_DEVICE, "may be omitted when one device is open")     \
  X(CONFIG, "config", MDC_T_TEXT, MDC_OBJ_NONE, "key=value;... (md/config.h)")                     \
  X(CLIENT, "client", MDC_T_HANDLE, MDC_OBJ_CLIENT, "may be omitted when one client is open")     \
  X(MODEL, "model", MDC_T_MODEL, MDC_OBJ_MODEL, "name or inline object")                          \
  X(PREPARED, "prepared", MDC_T_HANDLE, MDC_OBJ_PREPARED, "")                                     \
  X(PREPARED_LIST, "prepared", MDC_T_HANDLES, MDC_OBJ_PREPARED, "array of names/literals")        \
  X(DESC, "desc", MDC_T_DESC, MDC_OBJ_NONE, "{\"dims\": [..]}; null or absent: rank 0")           \
  X(INPUT_ROLES, "input_roles", MDC_T_ROLES, MDC_OBJ_NONE, "[{\"model\": i, \"io\": j, \"p\": 1.0}]") \
  X(OUTPUT_ROLES, "output_roles", MDC_T_ROLES, MDC_OBJ_NONE, "as input_roles")                    \
  X(TOKEN, "token", MDC_T_HANDLE, MDC_OBJ_TOKEN, "")                                              \
  X(SRC, "src", MDC_T_MEMORY, MDC_OBJ_MEMORY, "memory name")                                      \
  X(DST, "dst", MDC_T_MEMORY, MDC_OBJ_MEMORY, "memory name")                                      \
  X(DIMS, "dims", MDC_T_DIMS, MDC_OBJ_NONE, "array; absent: rank 0")                              \
  X(REQUEST, "request", MDC_T_REQUEST, MDC_OBJ_REQUEST, "name or inline object")                  \
  X(N_SHAPES, "n_shapes", MDC_T_U64, MDC_OBJ_NONE, "default: the request's output count")        \
  X(EVENT, "event", MDC_T_HANDLE, MDC_OBJ_EVENT, "")                                              \
  X(TIMEOUT_NS, "timeout_ns", MDC_T_U64, MDC_OBJ_NONE, "default: forever")                       \
  X(MEMORY, "memory", MDC_T_MEMORY, MDC_OBJ_MEMORY, "memory name")                                \
  X(POOL, "pool", MDC_T_HANDLE, MDC_OBJ_POOL, "")

typedef enum mdc_arg_id {
#define MDC_X(e, k, t, o, d) MDC_A_##e,
  MDC_ARG_MAP(MDC_X)
#undef MDC_X
  MDC_A_COUNT
} mdc_arg_id;

typedef struct mdc_arg_desc {
  const char *key;       /* the trace field */
  mdc_arg_type type;
  mdc_obj obj;           /* the kind it should name (NONE: not an object) */
  const char *doc;       /* one phrase for the docs ("" when the key says it all) */
} mdc_arg_desc;

/* What `expect` may hold besides `status` and `message` (which every call takes). */
#define MDC_EXPECT_MAP(X)                                                             \
  X(BACKEND, "backend")                                                               \
  X(SUPPORTS_MEMORY_DOMAINS, "supports_memory_domains")                               \
  X(SUPPORTED, "supported")                                                           \
  X(LEAKS, "leaks")                                                                   \
  X(SHAPES, "shapes")                                                                 \
  X(TIMING, "timing")

typedef enum mdc_expect_id {
#define MDC_X(e, k) MDC_X_##e,
  MDC_EXPECT_MAP(MDC_X)
#undef MDC_X
  MDC_X_COUNT
} mdc_expect_id;

/* The calls, in md_driver order (the SPEC 9 entries last: optional, present when the table's
 * struct_size reaches past them). */
#define MDC_CALL_MAP(X)                   \
  X(OPEN_DEVICE, open_device)             \
  X(CLOSE_DEVICE, close_device)           \
  X(GET_CAPABILITIES, get_capabilities)   \
  X(GET_SUPPORTED_OPERATIONS, get_supported_operations) \
  X(OPEN_CLIENT, open_client)             \
  X(CLOSE_CLIENT, close_client)           \
  X(PREPARE_MODEL, prepare_model)         \
  X(RELEASE_PREPARED_MODEL, release_prepared_model) \
  X(ALLOCATE, allocate)                   \
  X(COPY_TO, copy_to)                     \
  X(COPY_FROM, copy_from)                 \
  X(FREE_BUFFER, free_buffer)             \
  X(EXECUTE, execute)                     \
  X(EXECUTE_ASYNC, execute_async)         \
  X(WAIT_EVENT, wait_event)               \
  X(REGISTER_MEMORY, register_memory)     \
  X(UNREGISTER_MEMORY, unregister_memory)

typedef enum mdc_call {
#define MDC_X(e, n) MDC_CALL_##e,
  MDC_CALL_MAP(MDC_X)
#undef MDC_X
  MDC_CALL_COUNT
} mdc_call;

#define MDC_CALL_MAX_ARGS 7
#define MDC_CALL_MAX_EXPECT 4

/* Call flags. */
#define MDC_CALL_IN_BLOCK 1u   /* may run inside a concurrent block */
#define MDC_CALL_CLIENT 2u     /* takes a client (its `client` argument) */
#define MDC_CALL_V11 4u        /* new in trace format 1.1 */
#define MDC_CALL_OPTIONAL 8u   /* an optional entry of md_driver (SPEC 9, by struct_size): a trace
                                  that makes it must require "registered_pools" */

typedef struct mdc_call_arg {
  mdc_arg_id id;
  uint8_t optional;      /* may be absent (a default or rank 0) */
} mdc_call_arg;

typedef struct mdc_call_desc {
  mdc_call id;
  const char *name;                          /* the op, and the md_driver member */
  size_t slot;                               /* offsetof(md_driver, <name>) */
  uint32_t n_args;
  mdc_call_arg args[MDC_CALL_MAX_ARGS];      /* trace fields in ABI order */
  mdc_obj produces;                          /* what `as` names; NONE: nothing */
  uint32_t n_expect;
  mdc_expect_id expect[MDC_CALL_MAX_EXPECT]; /* besides status and message */
  unsigned flags;                            /* MDC_CALL_* */
  const char *summary;                       /* one line: what it does */
} mdc_call_desc;

/* The table, indexed by mdc_call. */
extern const mdc_call_desc mdc_calls[MDC_CALL_COUNT];
extern const mdc_arg_desc mdc_args[MDC_A_COUNT];

/* The call named `name` (an op), or NULL. O(log n), no string compares beyond the search. */
const mdc_call_desc *mdc_call_find(const char *name);
/* "device", "prepared model", ...; "?" for a value out of range. */
const char *mdc_obj_name(mdc_obj k);
/* The expectation's key ("shapes"); NULL out of range. */
const char *mdc_expect_key(mdc_expect_id x);
/* Whether call c takes argument a / expectation x. */
int mdc_call_has_arg(const mdc_call_desc *c, mdc_arg_id a);
int mdc_call_has_expect(const mdc_call_desc *c, mdc_expect_id x);

#ifdef __cplusplus
}
#endif
#endif
