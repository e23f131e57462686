/* soak.h - private to md_soak (runtime/tests/stress): the options, the driver under test, the
 * failure log, the two phases (stress, cycles) and their counters, small utilities. The stress
 * phase's bookkeeping is soak_table.h. docs/testing.md ("The soak") describes the design. */
#ifndef MD_SOAK_H
#define MD_SOAK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "md/driver.h"

/* ---- options, driver, failures (md_soak.c) ---- */

typedef struct soak_opts {
  const char *driver_path; /* NULL: the reference driver linked into md_soak */
  char config[256];        /* open_device config ("backend=sim;seed=N" unless --config) */
  uint64_t seed;
  unsigned threads;        /* racing threads of the stress phase */
  unsigned clients;        /* racing client slots */
  uint64_t ops;            /* operations per thread (the bound unless seconds > 0) */
  double seconds;          /* > 0: the long run, bounded by time instead of ops */
  unsigned cycles;         /* open/close cycles of the cycle check; 0: no check */
  unsigned max_printed;    /* failure lines printed; the rest are counted */
  const char *skip;        /* operations of the stress phase left out (comma-separated), or NULL */
} soak_opts;

extern const md_driver *soak_drv;
extern md_device *soak_dev;
extern bool soak_has_registered; /* the driver has SPEC 9's register_memory / unregister_memory */

/* One failure: printed (up to max_printed) as
 *   FAIL <op> seed=0x.. thread=T op#=N status=NAME(n) last_error="...": <detail>
 * thread -1 is the main thread; st < 0 means no status (a check that is not a call's).
 * last_error is the message the caller fetched right after the call (may be NULL).
 * Thread-safe. */
void soak_fail(const char *op, int thread, uint64_t opno, int st, const char *last_error,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
uint64_t soak_failures(void);

/* The entry points, for the per-entry-point call counts. */
#define SOAK_EP_MAP(X)                                                                     \
  X(OPEN_DEVICE, "open_device") X(CLOSE_DEVICE, "close_device")                            \
  X(GET_CAPABILITIES, "get_capabilities") X(GET_SUPPORTED, "get_supported_operations")     \
  X(OPEN_CLIENT, "open_client") X(CLOSE_CLIENT, "close_client")                            \
  X(PREPARE, "prepare_model") X(RELEASE, "release_prepared_model") X(ALLOCATE, "allocate") \
  X(COPY_TO, "copy_to") X(COPY_FROM, "copy_from") X(FREE, "free_buffer")                   \
  X(EXECUTE, "execute") X(EXECUTE_ASYNC, "execute_async") X(WAIT, "wait_event")            \
  X(LAST_ERROR, "last_error") X(REGISTER, "register_memory")                               \
  X(UNREGISTER, "unregister_memory")
#define SOAK_EP_ENUM(e, s) SOAK_EP_##e,
enum { SOAK_EP_MAP(SOAK_EP_ENUM) SOAK_EP_COUNT };
#undef SOAK_EP_ENUM
extern const char *const soak_ep_names[SOAK_EP_COUNT];

/* ---- the stress phase (soak_ops.c) ---- */

typedef struct soak_stats {
  uint64_t calls[SOAK_EP_COUNT];
  uint64_t ops, skipped;           /* operations run; chosen but nothing to run them on */
  uint64_t closes_reconciled;      /* leak reports compared with the counts */
  uint64_t value_checks;           /* outputs and copies compared with expected values */
  uint64_t canary_checks;
  uint64_t raced;                  /* calls judged while one of their objects raced a removal */
  uint64_t create_races;           /* creating calls that raced their client's close_client */
  uint64_t create_races_none;      /* ... and returned NONE (the rest: INVALID_ARGUMENT) */
  double wall_s;
} soak_stats;

/* Runs the threads of the stress phase on soak_dev; fills *stats. Failures go to soak_fail. */
void soak_stress(const soak_opts *o, soak_stats *stats);
/* The stress phase's operation names, comma-separated (for --skip). */
const char *soak_op_names(void);
/* Whether skip names only operations of the stress phase and leaves some. */
bool soak_skip_valid(const char *skip);
/* The stress phase's own counters that its bookkeeping (soak_table.c) adds to. */
extern atomic_uint_fast64_t soak_closes_reconciled;

/* ---- the cycle check (soak_cycles.c) ---- */

typedef struct soak_cycle_stats {
  unsigned device_cycles, client_cycles;
  long fds0, fds1, threads0, threads1, threads_max; /* threads_max: during a device cycle */
  long rss0_kib, rss1_kib, rss_tolerance_kib;
  long heap0, heap1;   /* live heap bytes by ASan's count; -1 in other builds */
  uint64_t calls[SOAK_EP_COUNT];
} soak_cycle_stats;

/* open_device/close_device and open_client/close_client o->cycles times each (after a warm-up),
 * checking that fds, threads and RSS do not grow. Opens its own devices (not soak_dev). */
void soak_cycles(const soak_opts *o, soak_cycle_stats *stats);

/* ---- small utilities (md_soak.c) ---- */

/* A 64-bit pseudo-random generator (splitmix64): one per thread, seeded from the run's seed and
 * the thread's number, so the sequence of operations a thread chooses is fixed by the seed. */
uint64_t soak_rand(uint64_t *state);
/* Uniform in [0, n). */
uint32_t soak_below(uint64_t *state, uint32_t n);

/* A bit per status for allowed-status sets. */
uint32_t soak_sbit(md_status st);
/* "NONE|INVALID_ARGUMENT" for a set, into buf. */
const char *soak_set_str(uint32_t set, char *buf, unsigned len);

#define SOAK_NONE_BIT (1u << 0)
#define SOAK_GF_BIT (1u << 2)
#define SOAK_INVAL_BIT (1u << 4)
#define SOAK_MISSED_BIT (1u << 5)

#endif
