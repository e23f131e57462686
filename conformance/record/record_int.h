/* record_int.h - private to the recording driver (conformance/record/): the trace writer's
 * state and the helpers shared by record.c (the wrapped md_driver table) and record_write.c
 * (names, payloads, blobs, the header). */
#ifndef MDC_RECORD_INT_H
#define MDC_RECORD_INT_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "md/driver.h"

/* Kinds of names: the prefix of a symbolic name (d1, c1, pm1, t1, ev1, rp1 registered pools; mo1
 * models, m1 pools). */
typedef enum rec_kind { REC_DEVICE, REC_CLIENT, REC_PREPARED, REC_TOKEN, REC_EVENT, REC_POOL, REC_KINDS } rec_kind;

typedef struct rec_name {
  uint64_t value;
  rec_kind kind;
  char name[24];
} rec_name;

/* A pool as the replayer will see it: one `memory` event per distinct (file, kind, window). */
typedef struct rec_mem {
  char name[24];
  md_memory_kind kind;
  dev_t dev;
  ino_t ino;
  uint64_t offset, size;
  uint32_t prot, width, height, layers, format;
  uint8_t *last;       /* the content the replayer's copy holds now (size bytes) */
} rec_mem;

/* A registered pool (SPEC 9) the workload holds: the recorder's own duplicate of its fd, so its
 * content can be read (a `fill` before a request that uses it, a `check` after one that writes
 * it) whatever the workload does with its own fd. */
typedef struct rec_regpool {
  uint64_t handle, client;
  md_device *dev;
  md_memory mem;       /* as registered, with fd = the recorder's duplicate (-1: none) */
} rec_regpool;

/* Output pools of an execution started by execute_async, checked after its wait_event. */
typedef struct rec_pending {
  uint64_t event;
  size_t n;
  size_t mems[16];     /* indexes into rec_state.mems */
  int fds[16];         /* dup'ed fds of those pools, read back after the wait */
} rec_pending;

typedef struct rec_state {
  /* Why one mutex around every call: the trace is replayed sequentially, one event after the
   * other. Holding the lock across the real call and the writing of its event makes the file
   * order the order in which the calls took effect in the driver, so the replay sees the same
   * sequence of states (a call of thread A cannot take effect between B's call and B's event).
   * It changes the workload's interleavings (calls no longer overlap), which is the price of a
   * trace that replays deterministically. */
  pthread_mutex_t mu;
  int ok;
  const md_driver *real;
  void *dl;
  md_driver table;
  char out[PATH_MAX];
  char blob_dir[PATH_MAX];
  char trace_name[128];
  char program[1024];
  char backend[32];
  int memory_domains;
  char *buf;           /* events, written to `out` after the header at the end */
  size_t buf_len;
  FILE *events;
  uint64_t n_events;
  rec_name *names;
  size_t n_names, cap_names;
  uint32_t counters[REC_KINDS];
  uint32_t n_models;
  rec_mem *mems;
  size_t n_mems, cap_mems;
  rec_pending *pending;
  size_t n_pending, cap_pending;
  rec_regpool *regpools;
  size_t n_regpools, cap_regpools;
  int used_registered; /* a register_memory was recorded: the trace is 1.1 and requires it */
  int finalized;
} rec_state;

extern rec_state md__rec;

/* Names. md__rec_bind gives value a new name of its kind (the newest binding of a value wins). */
const char *md__rec_bind(rec_kind kind, uint64_t value);
/* The reference to write for a handle argument: its name, or {"forge": NAME, "xor": ...} for a
 * value a few bits away from a known one, or {"literal": "0x..."}. New reference. */
json_t *md__rec_ref(uint64_t value);

/* A payload (docs/trace-format.md "Payloads") for n bytes: fill, f32 (when every value is finite
 * and as_f32), hex, or a sidecar blob for large ones. New reference; NULL on a blob write error. */
json_t *md__rec_payload(const uint8_t *p, size_t n, int as_f32, int *is_f32);

/* The name of the `memory` that describes m now, writing a `memory` event (new pool) or a
 * `fill` (known pool whose content changed) first. A descriptor the replayer cannot rebuild as
 * a real pool (closed fd, not a file, window outside it) becomes a `bad_memory` event and
 * *index is SIZE_MAX. The name stays valid until the next call. */
const char *md__rec_memory(const md_memory *m, size_t *index);
/* After a call that may have written pool `index` (through fd): a `check` of its content. */
void md__rec_check(size_t index, int fd);

/* Writes one event line (steals obj). */
void md__rec_emit(json_t *obj);

/* The model as a `model` event (its pools as `memory` events first); returns name. */
const char *md__rec_model(const md_model *m, char name[24]);
/* The inline request object (its pools as `memory` events first). out_mems/out_fds get the
 * pools its outputs may write (at most cap_out), to check after the execution. */
json_t *md__rec_request(const md_request *r, size_t *out_mems, int *out_fds, size_t *n_out,
                        size_t cap_out);

/* The registered pool with this handle (the newest registration), or NULL. */
rec_regpool *md__rec_regpool(uint64_t handle);

/* Writes header + events to the output file (once). */
void md__rec_finish(void);

#endif
