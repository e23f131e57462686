/* bench.h - private to bench/: what the benchmarks of md_bench share (options, timing,
 * statistics, the result table, a driver session on the sim backend, memfd pools, small
 * models, RSS readings).
 *
 * md_bench links the static runtime (md_runtime), not libmd_driver.so, so that the token
 * benchmark can call the handle table (handles.h) directly; every other benchmark goes
 * through the md_driver table exactly as an outside tool would. */
#ifndef MDB_BENCH_H
#define MDB_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"

/* ---- options ---- */
typedef struct mdb_opts {
  bool quick;                /* --quick: fewer repetitions, shorter windows */
  const char *filter;        /* --filter NAME: run the benchmarks whose name contains NAME */
} mdb_opts;

/* ---- time and statistics ---- */
uint64_t mdb_now_ns(void);
/* Median of v[0..n) (sorts v in place); 0 for n == 0. */
double mdb_median(double *v, size_t n);
/* A small deterministic generator (xorshift64*) for random tokens. */
uint64_t mdb_rand(uint64_t *state);
/* Keeps a value alive so the compiler cannot drop the work that made it. */
void mdb_sink(uint64_t v);

/* ---- the result table ---- */
typedef enum mdb_verdict { MDB_INFO = 0, MDB_PASS = 1, MDB_MISS = 2 } mdb_verdict;

/* One row: name, measured, baseline, ratio (NAN: not applicable), target (text), verdict,
 * and a short note. Rows are printed as they are added and again as a table at the end. */
void mdb_row(const char *name, const char *unit, double measured, double baseline, double ratio,
             const char *target, mdb_verdict v, const char *note_fmt, ...)
    __attribute__((format(printf, 8, 9)));
void mdb_table_print(void);
/* Writes the rows as Markdown (for bench/README.md) to path; 0 or -1. */
int mdb_table_markdown(const char *path, const char *machine);

/* A benchmark that cannot run calls this (message to stderr); main exits 1 at the end. */
void mdb_fail(const char *bench, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* How many mdb_fail calls there were. */
int mdb_failures(void);

/* ---- a driver session ---- */
typedef struct mdb_env {
  const md_driver *drv;
  md_device *dev;
  md_handle client;
} mdb_env;
/* Opens the reference driver's device with `config` and one client; 0 or -1 (mdb_fail'ed
 * under `bench`). */
int mdb_env_open(mdb_env *env, const char *bench, const char *config);
void mdb_env_close(mdb_env *env);

/* A one-operation RELU model on TENSOR_FLOAT32 of the given dims: operand 0 the input,
 * operand 1 the output. Storage is the caller's. */
typedef struct mdb_model {
  uint32_t dims[2][MD_MAX_RANK];
  md_operand operands[2];
  uint32_t op_in[1], op_out[1];
  md_operation op;
  md_model model;
} mdb_model;
const md_model *mdb_relu_model(mdb_model *b, uint32_t rank, const uint32_t *dims);

/* prepare_model, or 0 after mdb_fail. */
md_handle mdb_prepare(const mdb_env *env, const char *bench, const md_model *m);
/* allocate with one prepared model and its input 0 as the role, no desc dims; 0 on failure
 * (status in *st when st is non-NULL; no message). */
md_token mdb_alloc_input(const mdb_env *env, md_handle prepared, md_status *st);
/* The same with output 0 as the role. */
md_token mdb_alloc_output(const mdb_env *env, md_handle prepared, md_status *st);

/* ---- pools ---- */
/* A memfd of `size` bytes, mapped read+write into this process at *map and touched (every
 * page written with `fill`), so that the page cache holds it before a measurement. */
typedef struct mdb_pool {
  int fd;
  size_t size;
  uint8_t *map;
  md_memory mem;             /* ASHMEM: whole file, PROT_READ|PROT_WRITE */
} mdb_pool;
int mdb_pool_open(mdb_pool *p, size_t size, uint8_t fill);
void mdb_pool_close(mdb_pool *p);

/* ---- memory ---- */
/* A field of /proc/self/status in kB ("VmRSS", "VmHWM"), or -1. */
long mdb_status_kb(const char *field);
/* Rss (kB) of the mapping of /proc/self/smaps that contains addr, or -1. */
long mdb_mapping_rss_kb(const void *addr);

/* ---- machine ---- */
/* Online CPUs usable by this process (sched_getaffinity). */
int mdb_cpus(void);
/* "N CPUs (model name), kernel X" into buf. */
const char *mdb_machine(char *buf, size_t len);

/* ---- live buffers shared by the token and memory benchmarks (bench_population.c) ----
 * One device ("backend=sim;mem_limit=2G") with one RELU [4] model; buffers are allocated
 * through the md_driver table with its input 0 as the role (16 bytes of data each) and kept
 * live until md_bench exits. The first growth records VmRSS before any buffer exists; every
 * growth records VmRSS and the Rss of the sim arena's mapping after it. */
typedef struct mdb_pop {
  mdb_env env;
  md_handle prepared;
  md_token *tokens;          /* allocated and touched before the baseline reading */
  size_t n, cap;
  uint64_t *seq;             /* scratch the token benchmark fills (also pre-touched) */
  size_t seq_len;
  uint32_t data_bytes;       /* payload bytes per buffer (16) */
  long rss0_kb;              /* VmRSS before the first buffer */
  long rss_kb, hwm_kb;       /* VmRSS and VmHWM after the last growth */
  long arena_rss_kb;         /* Rss of the arena mapping after the last growth; -1 unknown */
  size_t heap0, heap;        /* malloc'd bytes in use (mallinfo2) before the first buffer / now */
  uint64_t grow_ns;          /* wall time spent in allocate */
  size_t grown_from0;        /* buffers allocated since rss0_kb (all of them) */
} mdb_pop;
/* The population, created on first use (NULL after mdb_fail under `bench`). */
mdb_pop *mdb_pop_get(const char *bench);
/* Allocates until n buffers are live; 0 or -1 (mdb_fail'ed). */
int mdb_pop_grow(mdb_pop *p, const char *bench, size_t n);
/* Closes the population's device (at exit). */
void mdb_pop_close(void);
/* Bytes of the driver's per-buffer objects the population can see (sizeof the handle
 * entry + usable size of the first buffer's object), for the memory note. */
void mdb_pop_object_sizes(mdb_pop *p, size_t *hentry, size_t *buffer_obj);

/* ---- the benchmarks (bench_*.c); each returns 0, or -1 when it could not run ---- */
int mdb_bench_token(const mdb_opts *o);
int mdb_bench_copy(const mdb_opts *o);
int mdb_bench_execute(const mdb_opts *o);
int mdb_bench_threads(const mdb_opts *o);
int mdb_bench_memory(const mdb_opts *o);
int mdb_bench_async(const mdb_opts *o);
int mdb_bench_scale(const mdb_opts *o);

/* bench_scale.c: the fast paths' execute overhead with p->n live buffers (rows
 * scale_*@<n>_buffers); the token benchmark calls it after each growth step. 0 or -1. */
int mdb_scale_buffers(mdb_pop *p, size_t n);
void mdb_scale_set_quick(bool quick);
/* Releases what mdb_scale_buffers keeps on the population's device (before mdb_pop_close). */
void mdb_scale_close(void);

#endif
