/* soak_table.h - private to md_soak: what the stress phase knows about the driver's objects.
 *
 * Client incarnations: one per open_client that returned NONE, with atomic counts of the objects
 * whose creating call returned NONE and of the successful removals. A call using a client holds
 * a "call" reference on its incarnation; the slot holds one while the client is attached. The
 * last call out of a closed incarnation reconciles its leak report with the counts.
 *
 * Object tables: fixed arrays of entries shared by all threads (buffers, prepared models,
 * events, registered pools), each entry reference-counted (the table holds one while the object
 * may be live, each operation using it one more) and recycled when the count reaches 0.
 *
 * Watches: what a call's verdict depends on. A call takes a watch on its client and objects
 * before it runs and ends it after: DEAD when one of them was dead before the call (the call
 * must fail with INVALID_ARGUMENT), LIVE when none was closed or removed, or being so, at any
 * time during the call (the call must succeed), RACED otherwise (INVALID_ARGUMENT is also
 * allowed). */
#ifndef MD_SOAK_TABLE_H
#define MD_SOAK_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "md/driver.h"

/* Every buffer is [2,3] float32: 6 values, 24 bytes. */
#define SOAK_N 6u
#define SOAK_BYTES 24u

enum soak_kind { SK_BUFFER, SK_MODEL, SK_EVENT, SK_POOL, SK_KINDS };
enum soak_inc_state { INC_OPEN, INC_CLOSING, INC_CLOSED };
enum soak_live { SOAK_LIVE, SOAK_RACED, SOAK_DEAD };

typedef struct soak_inc {
  md_handle client;
  unsigned slot;
  uint64_t serial;
  atomic_int state;                  /* INC_CLOSING before the first close_client call */
  atomic_uint calls;                 /* the slot's + calls in flight; 0: reconciled */
  atomic_uint refs;                  /* memory: call holders, table entries */
  atomic_uint made[SK_KINDS];        /* creating calls that returned NONE */
  atomic_uint removed[SK_KINDS];     /* free / release / consuming wait / unregister: NONE */
  atomic_uint close_ok;              /* close_client calls that returned NONE (1 expected) */
  md_leak_report leaks;              /* that close's report (published by the calls count) */
  int closer;                        /* its thread and operation number, for messages */
  uint64_t closer_op;
} soak_inc;

typedef struct soak_slot {
  pthread_mutex_t lock;              /* guards cur and opening only; no driver call under it */
  soak_inc *cur;
  bool opening;
} soak_slot;

/* The open client in slot s with a call reference (soak_inc_call_put), or NULL. */
soak_inc *soak_slot_acquire(soak_slot *s);
/* Claims an empty slot for open_client (false: it is not empty); then soak_slot_attach with the
 * new client or soak_slot_unclaim. */
bool soak_slot_claim(soak_slot *s);
void soak_slot_unclaim(soak_slot *s);
/* A new incarnation for client, attached to s (its calls count holds the slot's reference). */
soak_inc *soak_slot_attach(soak_slot *s, unsigned slot, md_handle client);
/* After the close that returned NONE: detaches c from s and drops the slot's reference. */
void soak_slot_detach(soak_slot *s, soak_inc *c, int thread, uint64_t opno);

/* A call reference on c if it is not reconciled yet (false: it is, the client is closed). */
bool soak_inc_call_get(soak_inc *c);
/* Drops it; the last one out of a closed incarnation reconciles it (thread, opno: who). */
void soak_inc_call_put(soak_inc *c, int thread, uint64_t opno);

/* ---- object entries ---- */

enum soak_entry_state { SE_EMPTY, SE_FILLING, SE_READY };

/* What a buffer read saw of the buffer's writers (soak_buf_snap). */
typedef struct soak_bsnap {
  unsigned writers, wgen;
  bool init, tainted;
} soak_bsnap;

typedef struct soak_entry {
  atomic_int state;
  atomic_uint refs;
  atomic_bool table_ref;
  /* Set while FILLING, read-only while READY. */
  int kind;
  soak_inc *owner;                   /* a memory reference */
  md_handle h;
  /* removals: a free, release, wait or unregister in flight or begun; dead once one succeeded */
  atomic_uint rm_begun, rm_inflight;
  atomic_bool dead;
  /* buffers: every write of it writes value[] (a buffer's content never depends on who wrote
   * last); the prepared model it has roles for (held). */
  struct soak_entry *model;
  float value[SOAK_N];
  atomic_uint writers, wgen;         /* writes in flight; writes ended */
  atomic_bool init_known;            /* the last write succeeded and overlapped no other */
  atomic_bool tainted;               /* written from a read that overlapped a write */
  /* registered pools: the ADD of their two halves */
  float sum[SOAK_N];
  /* events: the output pool (owned), what it must hold, the buffers read / written (held) */
  int out_fd;
  bool check_out;
  float expect[SOAK_N];
  struct soak_entry *reads, *writes;
  soak_bsnap read_snap;
  unsigned write_prior, write_g0;
} soak_entry;

typedef struct soak_table {
  soak_entry *e;
  unsigned n;
} soak_table;

extern soak_table soak_tables[SK_KINDS];
void soak_tables_init(const unsigned sizes[SK_KINDS]);
/* Entries still in use (a harness bug at the end of a run); frees the tables. */
unsigned soak_tables_fini(void);

/* A reference on e if it holds an object (false: empty or being filled). */
bool soak_entry_get(soak_entry *e);
void soak_entry_put(soak_entry *e);
/* Drops the table's reference, once (the object is dead). */
void soak_entry_kill(soak_entry *e);
/* An empty entry of t, claimed (FILLING), or NULL when t is full. */
soak_entry *soak_claim(soak_table *t, uint64_t *rng);
void soak_unclaim(soak_entry *e);
/* Publishes a filled entry of owner (a memory reference is taken) with handle h; the caller
 * keeps no reference. */
void soak_publish(soak_entry *e, soak_inc *owner, md_handle h);
/* A referenced READY entry of t accepted by pred (NULL: any), probing from a random index. */
soak_entry *soak_pick(soak_table *t, uint64_t *rng, bool (*pred)(const soak_entry *, const void *),
                      const void *arg);

/* ---- watches ---- */

typedef struct soak_watch {
  unsigned n_inc, n_obj;
  struct { soak_inc *c; int s0; bool held; } inc[2];
  struct { soak_entry *e; unsigned b0, i0; bool d0, own; } obj[4];
} soak_watch;

void soak_watch_init(soak_watch *w);
/* Watches client c; takes a call reference on it (released by soak_watch_release). */
void soak_watch_inc(soak_watch *w, soak_inc *c);
/* Watches object e (and, when its owner is not watched yet, its client). own: this call is a
 * removal of e (call soak_remove_begin after this). */
void soak_watch_obj(soak_watch *w, soak_entry *e, bool own);
enum soak_live soak_watch_end(const soak_watch *w);
/* Whether a watched client was being closed during the call (not closed before it). */
bool soak_watch_close_raced(const soak_watch *w);
void soak_watch_release(soak_watch *w, int thread, uint64_t opno);

void soak_remove_begin(soak_entry *e);
/* Ends a removal; removed: it returned NONE (or consumed an event). Returns false when the
 * object had already been removed by another call that returned NONE. */
bool soak_remove_end(soak_entry *e, bool removed);

/* ---- buffer writes and reads ---- */

soak_bsnap soak_buf_snap(soak_entry *b);
/* A read between s0 and s1 overlapped no write. */
bool soak_buf_clean(const soak_bsnap *s0, const soak_bsnap *s1);
typedef struct soak_wticket {
  unsigned prior, g0;
} soak_wticket;
void soak_buf_write_begin(soak_entry *b, soak_wticket *t);
/* ok: the write succeeded; taint: what it wrote came from a read that overlapped a write.
 * Returns whether another write overlapped this one. */
bool soak_buf_write_end(soak_entry *b, const soak_wticket *t, bool ok, bool taint);

#endif
