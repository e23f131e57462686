/* fz_prog.h - private to fuzz/: the fuzz program, the one representation every fuzz target,
 * the seed generator and `mdc fuzz export` share (docs/fuzzing.md).
 *
 * A program is a sequence of driver calls (the rows of mdc/calls.h that may run inside a
 * concurrent block) over typed objects: every call that produces something (open_client,
 * prepare_model, allocate, execute_async) makes object number k, in call order, whether or not
 * the driver then gives it a value. A handle argument names object k (possibly with bits
 * flipped or a neighbour taken: a forgery), or is 0, or a literal value; which k is decided
 * when the program is decoded, so a program is static: it runs the same calls with the same
 * arguments on every driver, and the state model (fz_model.h) says what the driver may answer.
 *
 * Memories are made per argument (a copy's source or destination, a request's pools), so no
 * two calls share host memory. Models and requests live in the program's tables; calls name
 * them by index.
 *
 * Three ways in and out:
 *   bytes  -> program   mdc_fz_decode (any bytes are a program; fz_decode.c)
 *   program -> bytes    mdc_fz_encode (fz_encode.c; decode(encode(p)) is p)
 *   program -> trace    mdc_fz_trace_write (fz_trace_write.c), trace -> program mdc_fz_trace_read
 *
 * Plain data, no pointers: a program is copied with memcpy and compared through its trace. */
#ifndef MDC_FZ_PROG_H
#define MDC_FZ_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"
#include "mdc/calls.h"

/* ---- limits (docs/fuzzing.md) ------------------------------------------------------------- */
#define FZ_MAX_CALLS 48
#define FZ_MAX_OBJS FZ_MAX_CALLS
#define FZ_MAX_MODELS 6
#define FZ_MAX_REQUESTS 16
#define FZ_MAX_OPERANDS 10
#define FZ_MAX_OPS 4
#define FZ_MAX_OP_IN 4
#define FZ_MAX_OP_OUT 2
#define FZ_MAX_IO 4          /* model inputs, model outputs */
#define FZ_MAX_ARGS (FZ_MAX_IO + 1)   /* a request may hold one argument too many */
#define FZ_MAX_VALUES 32     /* operand_values bytes */
#define FZ_MAX_RANK 9        /* one past MD_MAX_RANK, so an over-rank value is expressible */
#define FZ_MAX_LIST 4        /* allocate's prepared list, each role list */
#define FZ_MAX_REQ_POOLS 8
#define FZ_MAX_LANES 4
#define FZ_MAX_BLOCKS 4
#define FZ_MAX_POOL_BYTES (256u << 10)   /* one memory: bigger sizes are clamped when decoded */
#define FZ_MAX_PREEMPT 16    /* preemption points honoured per block */

/* The targets that run programs (the fourth, `trace`, feeds raw bytes to the trace reader). */
typedef enum mdc_fz_target { FZ_TOKENS = 0, FZ_SHAPES = 1, FZ_CONCURRENCY = 2, FZ_TARGETS } mdc_fz_target;
const char *mdc_fz_target_name(mdc_fz_target t);          /* "tokens" ... */
int mdc_fz_target_parse(const char *name, mdc_fz_target *t); /* 0 or -1 */

/* Dims: rank entries (0 = that axis unknown); `present` 0 = absent (rank 0: rank unknown). */
typedef struct fz_dims {
  uint8_t present;
  uint8_t rank;
  uint32_t d[FZ_MAX_RANK];
} fz_dims;

/* A handle argument. */
enum { FZ_REF_OBJ = 0, FZ_REF_ZERO = 1, FZ_REF_LITERAL = 2 };
enum { FZ_FORGE_NONE = 0, FZ_FORGE_XOR = 1, FZ_FORGE_ADD = 2 };
typedef struct fz_ref {
  uint8_t how;           /* FZ_REF_* */
  uint8_t forge;         /* FZ_REF_OBJ: FZ_FORGE_* applied to the object's value */
  uint16_t obj;          /* FZ_REF_OBJ: the object */
  uint64_t v;            /* xor bits, the (two's complement) addend, or the literal */
} fz_ref;

/* A memory: a real pool (a memfd the harness makes, a `memory` event in a trace) or a bad
 * descriptor (a `bad_memory` event). */
enum { FZ_FD_REAL = 0, FZ_FD_NEG = 1, FZ_FD_CLOSED = 2, FZ_FD_PIPE = 3 };
typedef struct fz_mem {
  uint8_t fd;            /* FZ_FD_*: REAL is a `memory`, the others a `bad_memory` */
  int32_t kind;          /* md_memory_kind (any number for a bad descriptor) */
  uint32_t prot;
  uint64_t size;         /* descriptor size (REAL HARDWARE_BUFFER: the file's size) */
  uint64_t offset;       /* MMAP_FD / bad: descriptor offset */
  uint64_t file_size;    /* MMAP_FD: backing file size, 0 = offset + size */
  uint32_t seed;         /* REAL: content = the engine's random u8 payload of this seed; 0 = zeros */
} fz_mem;

typedef struct fz_operand {
  int32_t type;          /* md_operand_type (any number) */
  int32_t lifetime;      /* md_lifetime (any number) */
  fz_dims dims;          /* present = rank > 0 */
  float scale;
  int32_t zero_point;
  uint32_t offset, length;   /* CONSTANT_COPY: into values */
} fz_operand;

typedef struct fz_operation {
  int32_t type;          /* md_operation_type (any number; CUSTOM is not expressible) */
  uint8_t n_in, n_out;
  uint8_t in[FZ_MAX_OP_IN], out[FZ_MAX_OP_OUT];
} fz_operation;

typedef struct fz_model {
  uint8_t n_operands, n_ops, n_in, n_out, n_values;
  fz_operand opnd[FZ_MAX_OPERANDS];
  fz_operation op[FZ_MAX_OPS];
  uint8_t in[FZ_MAX_IO], out[FZ_MAX_IO];
  uint8_t values[FZ_MAX_VALUES];
} fz_model;

typedef struct fz_rarg {
  uint8_t no_value;
  uint8_t pool;
  uint32_t offset, length;
  fz_dims dims;
} fz_rarg;

typedef struct fz_rpool {
  uint8_t is_token;
  fz_ref token;
  fz_mem mem;
} fz_rpool;

typedef struct fz_request {
  uint8_t n_in, n_out, n_pools;
  fz_rarg in[FZ_MAX_ARGS], out[FZ_MAX_ARGS];
  fz_rpool pools[FZ_MAX_REQ_POOLS];
} fz_request;

typedef struct fz_role {
  uint8_t model, io;
  float p;
} fz_role;

typedef struct fz_roles {
  uint8_t n;
  fz_role r[FZ_MAX_LIST];
} fz_roles;

/* One argument of a call, by the type of its row in mdc_args (the union member in use). */
typedef struct fz_arg {
  uint8_t present;       /* an optional argument may be absent (its default) */
  union {
    fz_ref ref;                                   /* MDC_T_HANDLE */
    struct { uint8_t n; fz_ref v[FZ_MAX_LIST]; } refs;   /* MDC_T_HANDLES */
    fz_mem mem;                                   /* MDC_T_MEMORY */
    uint8_t model;                                /* MDC_T_MODEL: index into models */
    uint8_t request;                              /* MDC_T_REQUEST: index into requests */
    fz_dims dims;                                 /* MDC_T_DIMS, MDC_T_DESC */
    fz_roles roles;                               /* MDC_T_ROLES */
    uint64_t u64;                                 /* MDC_T_U64 */
  };
} fz_arg;

/* Preemption points (concurrent blocks only): what a lane does between taking its turn and
 * making the call. */
enum { FZ_PRE_NONE = 0, FZ_PRE_YIELD = 1, FZ_PRE_SPIN = 2, FZ_PRE_SLEEP = 3 };

typedef struct fz_call {
  uint8_t call;          /* mdc_call */
  uint8_t block;         /* 0: sequential; k: in blocks[k - 1] */
  uint8_t lane;          /* in a block: its lane */
  uint8_t pre;           /* FZ_PRE_* */
  uint16_t pre_arg;      /* spin: iterations / 64; sleep: microseconds */
  uint16_t obj;          /* the object it produces (when mdc_calls[call].produces) */
  fz_arg a[MDC_CALL_MAX_ARGS];   /* in the order of mdc_calls[call].args */
} fz_call;

typedef struct fz_block {
  uint8_t lanes;
  uint16_t first, end;   /* calls [first, end) */
} fz_block;

typedef struct fz_objinfo {
  uint8_t kind;          /* mdc_obj: CLIENT, PREPARED, TOKEN, EVENT */
  uint16_t call;         /* the call that produces it */
} fz_objinfo;

#define FZ_MAX_STALL 8       /* the highest N of a program's stall@N */

typedef struct mdc_fz_prog {
  uint32_t seed;         /* open_device's `seed` (handle keys, the sim scheduler) */
  uint8_t stall;         /* concurrency: N of the fault plan stall@N (the N-th execution is held
                            until a wait_event without deadline releases it, docs/sim.md), 0 none */
  uint16_t n_calls, n_objs;
  uint8_t n_models, n_requests, n_blocks;
  fz_call calls[FZ_MAX_CALLS];
  fz_objinfo objs[FZ_MAX_OBJS];
  fz_model models[FZ_MAX_MODELS];
  fz_request requests[FZ_MAX_REQUESTS];
  fz_block blocks[FZ_MAX_BLOCKS];
} mdc_fz_prog;

/* ---- helpers over the call table ---------------------------------------------------------- */

/* The position of argument `id` in call c's args, or -1. */
int mdc_fz_arg_pos(mdc_call c, mdc_arg_id id);
/* The argument `id` of call k (NULL when the call has none, or it is absent). */
const fz_arg *mdc_fz_arg(const fz_call *k, mdc_arg_id id);
/* The object kind a call produces (MDC_OBJ_NONE: none). */
mdc_obj mdc_fz_produces(mdc_call c);
/* Whether programs make call c: every call of the table but the optional entries (SPEC 9's
 * registered pools are not in the encoding yet; a trace using them is beyond it). */
int mdc_fz_call_encoded(mdc_call c);

/* Bytes of one element of an operand type (0: unknown type); 1 for a scalar type. */
uint32_t mdc_fz_type_size(int32_t type);
int mdc_fz_type_scalar(int32_t type);
/* Bytes of a tensor of `type` and dims (all known); UINT64_MAX on overflow or unknown axes. */
uint64_t mdc_fz_bytes(int32_t type, const fz_dims *d);

/* ---- bytes <-> program (fz_decode.c, fz_encode.c) ----------------------------------------- */

/* Decodes any bytes into a program for target t. Never fails; the same bytes give the same
 * program. Thread-safe (no state but *out). */
void mdc_fz_decode(mdc_fz_target t, const uint8_t *data, size_t n, mdc_fz_prog *out);
/* concurrency (other targets: nothing): appends to p a wait_event without deadline, by its
 * client, for every event the program leaves live (as the state model predicts), while calls
 * fit. So an execution the fault plan holds (the stall) always runs and is judged, values
 * included, and the trace of a finding has the wait that shows it. The decoder and the trace
 * reader both end with it, so decode(encode(p)) is p. */
void mdc_fz_finish(mdc_fz_target t, mdc_fz_prog *p);
/* Encodes a program into bytes that decode to it (for target t). Returns the length, or 0
 * when it does not fit in cap bytes. */
size_t mdc_fz_encode(mdc_fz_target t, const mdc_fz_prog *p, uint8_t *out, size_t cap);

#endif
