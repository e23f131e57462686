/* driver_skeleton.c - a minimal memory-domain driver written from <md/driver.h> and
 * docs/contract.md alone: the starting point of docs/driver-guide.md.
 *
 * What it implements, honestly: devices (the configuration keys of contract §1, unknown keys
 * refused), capabilities, clients with unforgeable handles (contract §5, §8.12) and their leak
 * reports, and the validation every entry point owes before it can refuse: NULL pointers,
 * client handles, model structure and pool descriptors (§2, §8.2). What it does not implement
 * it refuses with the status the contract gives for that case: it runs no operation
 * (get_supported_operations reports 0 for each, prepare_model is GENERAL_FAILURE
 * "unsupported"), so it never issues a prepared model; without prepared models no allocate can
 * be valid, and it reports supports_memory_domains = 0 (an allocation it could not serve would
 * be GENERAL_FAILURE, §3); it therefore never issues a token or an event either, and every such
 * value is "never issued": INVALID_ARGUMENT (§5). Executions fail with no shapes and unmeasured
 * timing (§4).
 *
 * It depends on nothing but libc and the header; it builds inside the mdc tree (examples/) and
 * standalone against an installed mdc (CMakeLists.txt here, or `cc $(pkg-config --cflags
 * mdc-driver)`). Replace a refusal at a time with the real thing and watch `mdc replay` turn
 * the corpus's Fails into Passes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fstat, getrandom, PROT_* under -std=c11 */
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "md/driver.h"

#define SKEL_NAME "mdc-driver-skeleton"
#define SKEL_VERSION "0.1.0"
#define SLOT_BITS 24u
#define SLOT_MAX ((1u << SLOT_BITS) - 1u) /* slot 0 is never used, so 0 is never a handle */

/* ---- the calling thread's last failure message (contract §1: last_error, never NULL) ---- */

static _Thread_local char last_msg[512];

static md_status fail(md_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static md_status fail(md_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  return st;
}

/* ---- configuration (contract §1): key=value items separated by ';' ---- */

typedef struct config {
  char backend[8];     /* auto, sim, hip */
  uint64_t mem_limit;  /* 0: not given */
  uint64_t seed;
  int has_seed;
  uint64_t latency_ns;
  char faults[256];    /* "" when none */
  unsigned given;      /* one bit per key, to refuse a key given twice */
} config;

static const char *const config_keys[] = {"backend", "mem_limit", "seed", "faults", "latency_ns"};
enum { KEY_BACKEND, KEY_MEM_LIMIT, KEY_SEED, KEY_FAULTS, KEY_LATENCY_NS, KEY_COUNT };

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
  return s;
}

/* An unsigned 64-bit number, decimal or 0x hex, nothing after it. */
static int parse_u64(const char *s, uint64_t *out) {
  if (!*s || *s == '-' || *s == '+') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

static md_status config_item(config *c, char *item) {
  char *eq = strchr(item, '=');
  if (!eq) return fail(MD_INVALID_ARGUMENT, "open_device: config item '%s' is not key=value", item);
  *eq = '\0';
  char *key = trim(item), *val = trim(eq + 1);
  int k = 0;
  while (k < KEY_COUNT && strcmp(key, config_keys[k]) != 0) k++;
  if (k == KEY_COUNT)
    return fail(MD_INVALID_ARGUMENT,
                "open_device: unknown config key '%s' (this driver knows backend, mem_limit, seed, faults, latency_ns)", key);
  if (c->given & (1u << k)) return fail(MD_INVALID_ARGUMENT, "open_device: config key '%s' is given twice", key);
  c->given |= 1u << k;
  switch (k) {
    case KEY_BACKEND:
      if (strcmp(val, "auto") && strcmp(val, "sim") && strcmp(val, "hip"))
        return fail(MD_INVALID_ARGUMENT, "open_device: backend '%s': want sim, hip or auto", val);
      snprintf(c->backend, sizeof c->backend, "%s", val);
      return MD_NONE;
    case KEY_MEM_LIMIT:
      if (parse_u64(val, &c->mem_limit) || c->mem_limit == 0)
        return fail(MD_INVALID_ARGUMENT, "open_device: mem_limit '%s': want a byte count > 0", val);
      return MD_NONE;
    case KEY_SEED:
      if (parse_u64(val, &c->seed)) return fail(MD_INVALID_ARGUMENT, "open_device: seed '%s': want an unsigned 64-bit number", val);
      c->has_seed = 1;
      return MD_NONE;
    case KEY_FAULTS:
      if (strlen(val) >= sizeof c->faults) return fail(MD_INVALID_ARGUMENT, "open_device: faults: the plan is too long");
      snprintf(c->faults, sizeof c->faults, "%s", val);
      return MD_NONE;
    default: /* KEY_LATENCY_NS */
      if (parse_u64(val, &c->latency_ns))
        return fail(MD_INVALID_ARGUMENT, "open_device: latency_ns '%s': want an unsigned number", val);
      return MD_NONE;
  }
}

static md_status config_parse(const char *text, config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->backend, sizeof c->backend, "auto");
  if (!text) return MD_NONE;
  char *copy = strdup(text);
  if (!copy) return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_device: out of memory");
  md_status st = MD_NONE;
  for (char *item = copy, *next; item && st == MD_NONE; item = next) {
    next = strchr(item, ';');
    if (next) *next++ = '\0';
    item = trim(item);
    if (*item) st = config_item(c, item);
  }
  free(copy);
  return st;
}

/* ---- devices and client handles ---- */

typedef struct slot {
  md_handle handle; /* the live handle issued in this slot; 0 when free */
  uint32_t gen;     /* bumped at each issue, so a reused slot's old handle differs */
} slot;

struct md_device {
  pthread_mutex_t lock; /* guards everything below: every entry point is thread-safe (§6) */
  config cfg;
  slot *slots;          /* slots[0] unused */
  uint32_t n_slots, cap_slots;
  uint32_t *free_slots, n_free;
  uint64_t rng;         /* splitmix64 state; used only with seed=N */
};

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* 32 bits a client cannot predict: from the kernel's random source, or, with seed=N (for
 * reproducible traces), from a generator the seed alone decides. Caller holds d->lock. */
static int random32(md_device *d, uint32_t *out) {
  if (d->cfg.has_seed) {
    *out = (uint32_t)(splitmix64(&d->rng) >> 32);
    return 0;
  }
  ssize_t n;
  do n = getrandom(out, sizeof *out, 0);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof *out ? 0 : -1;
}

/* A client handle: slot in bits 0-23, the slot's generation in 24-31 and 32 random bits in
 * 32-63. The table keeps the exact value, so a forged one is accepted with probability 2^-32
 * (§5), a closed client's handle stays dead when its slot is reused, and no two handles differ
 * only in their low 32 bits except by a 2^-32 chance per pair (§8.12). */
static md_status client_issue(md_device *d, md_handle *out) {
  pthread_mutex_lock(&d->lock);
  md_status st = MD_NONE;
  uint32_t s, hi;
  if (d->n_free) {
    s = d->free_slots[--d->n_free];
  } else if (d->n_slots > SLOT_MAX) {
    st = fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_client: %u clients are open, the most this driver holds", SLOT_MAX);
    goto out;
  } else {
    if (d->n_slots >= d->cap_slots) {
      uint32_t cap = d->cap_slots ? d->cap_slots * 2 : 16;
      slot *ns = realloc(d->slots, cap * sizeof *ns);
      uint32_t *nf = ns ? realloc(d->free_slots, cap * sizeof *nf) : NULL;
      if (ns) d->slots = ns;
      if (!nf) {
        st = fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_client: out of memory");
        goto out;
      }
      d->free_slots = nf;
      memset(d->slots + d->cap_slots, 0, (cap - d->cap_slots) * sizeof *ns);
      d->cap_slots = cap;
    }
    s = d->n_slots++;
  }
  if (random32(d, &hi) != 0) {
    d->free_slots[d->n_free++] = s;
    st = fail(MD_GENERAL_FAILURE, "open_client: getrandom: %s", strerror(errno));
    goto out;
  }
  d->slots[s].gen++;
  d->slots[s].handle = (md_handle)hi << 32 | (md_handle)(d->slots[s].gen & 0xffu) << SLOT_BITS | s;
  *out = d->slots[s].handle;
out:
  pthread_mutex_unlock(&d->lock);
  return st;
}

/* The slot of a live client handle, or 0 (INVALID_ARGUMENT recorded, naming fn). Caller holds
 * d->lock. */
static uint32_t client_slot(md_device *d, const char *fn, md_handle client) {
  uint32_t s = (uint32_t)(client & SLOT_MAX);
  if (client != 0 && s != 0 && s < d->n_slots && d->slots[s].handle == client) return s;
  fail(MD_INVALID_ARGUMENT, "%s: client 0x%016" PRIx64 ": %s", fn, client,
       client == 0 ? "0 is never a handle" : "not a live client of this device (never issued, or closed)");
  return 0;
}

static md_status client_check(md_device *d, const char *fn, md_handle client) {
  pthread_mutex_lock(&d->lock);
  uint32_t s = client_slot(d, fn, client);
  pthread_mutex_unlock(&d->lock);
  return s ? MD_NONE : MD_INVALID_ARGUMENT;
}

/* This driver issues no prepared model, token or event, so every such value is one it never
 * issued (§5). A driver that issues them looks them up the way client_slot does, and checks
 * that they belong to the calling client. */
static md_status never_issued(const char *fn, const char *what, uint64_t value) {
  return fail(MD_INVALID_ARGUMENT, "%s: %s 0x%016" PRIx64 ": never issued by this device", fn, what, value);
}

/* ---- pools and models: the checks owed before a refusal (§2, §8.2) ---- */

static md_status pool_check(const char *fn, const char *where, uint32_t i, const md_memory *m, int model_pool) {
  if (m->kind > MD_MEM_HARDWARE_BUFFER) return fail(MD_INVALID_ARGUMENT, "%s: %s %u: unknown kind %d", fn, where, i, (int)m->kind);
  if (m->kind == MD_MEM_HARDWARE_BUFFER && model_pool)
    return fail(MD_INVALID_ARGUMENT, "%s: %s %u: a non-BLOB hardware buffer is for execution inputs and outputs only", fn, where, i);
  if (m->fd < 0) return fail(MD_INVALID_ARGUMENT, "%s: %s %u: fd %d", fn, where, i, m->fd);
  struct stat sb;
  if (fstat(m->fd, &sb) != 0) return fail(MD_INVALID_ARGUMENT, "%s: %s %u: fd %d: %s", fn, where, i, m->fd, strerror(errno));
  if (m->prot == 0 || (m->prot & ~(uint32_t)(PROT_READ | PROT_WRITE)))
    return fail(MD_INVALID_ARGUMENT, "%s: %s %u: prot 0x%x: only PROT_READ and PROT_WRITE", fn, where, i, m->prot);
  if (m->kind == MD_MEM_HARDWARE_BUFFER) return MD_NONE; /* only ever reached for executions, which this driver refuses earlier */
  if (m->size == 0) return fail(MD_INVALID_ARGUMENT, "%s: %s %u: size 0", fn, where, i);
  if (m->kind == MD_MEM_ASHMEM && m->offset != 0)
    return fail(MD_INVALID_ARGUMENT, "%s: %s %u: an ashmem pool starts at offset 0, not %" PRIu64, fn, where, i, m->offset);
  if (m->kind == MD_MEM_HARDWARE_BUFFER_BLOB && (m->offset != 0 || m->width != m->size || m->height != 1 || m->layers != 1))
    return fail(MD_INVALID_ARGUMENT, "%s: %s %u: a BLOB is width bytes (%u) at offset 0 with height = layers = 1", fn, where, i, m->width);
  if (m->offset > (uint64_t)sb.st_size || m->size > (uint64_t)sb.st_size - m->offset)
    return fail(MD_INVALID_ARGUMENT, "%s: %s %u: offset %" PRIu64 " + size %" PRIu64 " is past the end of the file (%lld bytes)",
                fn, where, i, m->offset, m->size, (long long)sb.st_size);
  return MD_NONE;
}

static int type_known(md_operand_type t) {
  switch (t) {
    case MD_FLOAT32: case MD_INT32: case MD_UINT32: case MD_TENSOR_FLOAT32: case MD_TENSOR_INT32:
    case MD_TENSOR_QUANT8_ASYMM: case MD_BOOL: case MD_TENSOR_FLOAT16: case MD_TENSOR_QUANT8_ASYMM_SIGNED: return 1;
  }
  return 0;
}

static int indexes_ok(uint32_t n, const uint32_t *idx, uint32_t limit) {
  if (n && !idx) return 0;
  for (uint32_t i = 0; i < n; i++)
    if (idx[i] >= limit) return 0;
  return 1;
}

/* The structure of a model: arrays present, enums known, indexes in range, constant storage
 * inside its operand_values or pool (§2), pool descriptors valid (§8.2). Operation semantics
 * (§7) are not checked: this driver runs none. */
static md_status model_check(const char *fn, const md_model *m) {
  if ((m->n_operands && !m->operands) || (m->n_operations && !m->operations) || (m->n_pools && !m->pools) ||
      (m->operand_values_size && !m->operand_values))
    return fail(MD_INVALID_ARGUMENT, "%s: the model has a count with a NULL array", fn);
  if (!indexes_ok(m->n_inputs, m->inputs, m->n_operands) || !indexes_ok(m->n_outputs, m->outputs, m->n_operands))
    return fail(MD_INVALID_ARGUMENT, "%s: a model input or output is not an operand index", fn);
  for (uint32_t i = 0; i < m->n_pools; i++) {
    md_status st = pool_check(fn, "model pool", i, &m->pools[i], 1);
    if (st != MD_NONE) return st;
  }
  for (uint32_t i = 0; i < m->n_operands; i++) {
    const md_operand *o = &m->operands[i];
    if (!type_known(o->type)) return fail(MD_INVALID_ARGUMENT, "%s: operand %u: unknown type %d", fn, i, (int)o->type);
    if ((unsigned)o->lifetime > MD_NO_VALUE) return fail(MD_INVALID_ARGUMENT, "%s: operand %u: unknown lifetime %d", fn, i, (int)o->lifetime);
    if (o->rank && !o->dims) return fail(MD_INVALID_ARGUMENT, "%s: operand %u: rank %u with NULL dims", fn, i, o->rank);
    uint64_t room = 0;
    if (o->lifetime == MD_CONSTANT_COPY) {
      room = m->operand_values_size;
    } else if (o->lifetime == MD_CONSTANT_REFERENCE) {
      if (o->pool >= m->n_pools) return fail(MD_INVALID_ARGUMENT, "%s: operand %u: pool %u of %u", fn, i, o->pool, m->n_pools);
      room = m->pools[o->pool].size;
    } else {
      continue;
    }
    if (o->offset > room || o->length > room - o->offset)
      return fail(MD_INVALID_ARGUMENT, "%s: operand %u: offset %" PRIu64 " + length %" PRIu64 " is past its storage (%" PRIu64 " bytes)",
                  fn, i, o->offset, o->length, room);
  }
  for (uint32_t j = 0; j < m->n_operations; j++) {
    const md_operation *op = &m->operations[j];
    if (!indexes_ok(op->n_inputs, op->inputs, m->n_operands) || !indexes_ok(op->n_outputs, op->outputs, m->n_operands))
      return fail(MD_INVALID_ARGUMENT, "%s: operation %u: an input or output is not an operand index", fn, j);
  }
  return MD_NONE;
}

/* Every failed execution leaves no shapes (rank 0) and unmeasured timing (§4). */
static void clear_results(md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  if (shapes && n_shapes) memset(shapes, 0, (size_t)n_shapes * sizeof *shapes);
  if (timing) timing->on_device_ns = timing->in_driver_ns = UINT64_MAX;
}

/* ---- the entry points ---- */

static md_status open_device(const char *text, md_device **out) {
  if (!out) return fail(MD_INVALID_ARGUMENT, "open_device: out is NULL");
  *out = NULL;
  config cfg;
  md_status st = config_parse(text, &cfg);
  if (st != MD_NONE) return st;
  /* Every key is accepted (§1); what this driver cannot do with an accepted value makes the
   * device unavailable, as a backend without its hardware does. */
  if (strcmp(cfg.backend, "auto") != 0)
    return fail(MD_DEVICE_UNAVAILABLE, "open_device: backend=%s: this driver has no %s backend (backend=auto opens its device)",
                cfg.backend, cfg.backend);
  if (cfg.faults[0])
    return fail(MD_DEVICE_UNAVAILABLE, "open_device: faults=%s: fault plans need the simulator, which this driver does not have",
                cfg.faults);
  md_device *d = calloc(1, sizeof *d);
  if (!d) return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "open_device: out of memory");
  if (pthread_mutex_init(&d->lock, NULL) != 0) {
    free(d);
    return fail(MD_GENERAL_FAILURE, "open_device: pthread_mutex_init failed");
  }
  d->cfg = cfg;
  d->rng = cfg.seed ^ 0x6d64632d736b656cull; /* "mdc-skel": a seed of 0 still mixes */
  d->n_slots = 1;                            /* slot 0 is never used */
  *out = d;
  return MD_NONE;
}

/* Closes the device and everything its clients held; the caller must not use it concurrently. */
static void close_device(md_device *d) {
  if (!d) return;
  pthread_mutex_destroy(&d->lock);
  free(d->slots);
  free(d->free_slots);
  free(d);
}

static md_status get_capabilities(md_device *d, md_capabilities *out) {
  if (!d || !out) return fail(MD_INVALID_ARGUMENT, "get_capabilities: %s is NULL", d ? "out" : "device");
  /* struct_size: what the caller's struct holds (0: the v1 size); fill what both sides know. */
  size_t n = out->struct_size ? out->struct_size : sizeof *out;
  if (n > sizeof *out) n = sizeof *out;
  if (n < offsetof(md_capabilities, backend))
    return fail(MD_INVALID_ARGUMENT, "get_capabilities: struct_size %u is smaller than v1's fixed fields", out->struct_size);
  md_capabilities c;
  memset(&c, 0, sizeof c);
  c.struct_size = (uint32_t)n;
  c.supports_memory_domains = 0; /* no allocate: traces that require memory_domains are NotSupported */
  c.max_buffer_bytes = 0;
  snprintf(c.backend, sizeof c.backend, "none");
  snprintf(c.device_name, sizeof c.device_name, "mdc driver skeleton");
  memcpy(out, &c, n);
  return MD_NONE;
}

static md_status get_supported_operations(md_device *d, const md_model *m, uint8_t *supported) {
  if (!d || !m || !supported)
    return fail(MD_INVALID_ARGUMENT, "get_supported_operations: %s is NULL", !d ? "device" : !m ? "model" : "supported");
  md_status st = model_check("get_supported_operations", m);
  if (st != MD_NONE) return st;
  for (uint32_t i = 0; i < m->n_operations; i++) supported[i] = 0; /* no kernels (§7) */
  return MD_NONE;
}

static md_status open_client(md_device *d, md_handle *client) {
  if (!d || !client) return fail(MD_INVALID_ARGUMENT, "open_client: %s is NULL", d ? "client" : "device");
  return client_issue(d, client);
}

static md_status close_client(md_device *d, md_handle client, md_leak_report *leaks) {
  if (!d) return fail(MD_INVALID_ARGUMENT, "close_client: device is NULL");
  pthread_mutex_lock(&d->lock);
  uint32_t s = client_slot(d, "close_client", client);
  if (s) {
    d->slots[s].handle = 0; /* dead at once; the slot is reused with a new generation */
    d->free_slots[d->n_free++] = s;
  }
  pthread_mutex_unlock(&d->lock);
  if (!s) return MD_INVALID_ARGUMENT;
  /* A client of this driver can hold nothing, so nothing was still live (§5, §8.10). */
  if (leaks) memset(leaks, 0, sizeof *leaks);
  return MD_NONE;
}

static md_status prepare_model(md_device *d, md_handle client, const md_model *m, md_handle *prepared) {
  if (prepared) *prepared = 0;
  if (!d || !m || !prepared)
    return fail(MD_INVALID_ARGUMENT, "prepare_model: %s is NULL", !d ? "device" : !m ? "model" : "prepared");
  md_status st = client_check(d, "prepare_model", client);
  if (st == MD_NONE) st = model_check("prepare_model", m);
  if (st != MD_NONE) return st;
  return fail(MD_GENERAL_FAILURE, "prepare_model: unsupported: this driver runs no operations (get_supported_operations reports none)");
}

static md_status release_prepared_model(md_device *d, md_handle client, md_handle prepared) {
  if (!d) return fail(MD_INVALID_ARGUMENT, "release_prepared_model: device is NULL");
  md_status st = client_check(d, "release_prepared_model", client);
  return st != MD_NONE ? st : never_issued("release_prepared_model", "prepared model", prepared);
}

static md_status allocate(md_device *d, md_handle client, const md_buffer_desc *desc, const md_handle *prepared,
                          uint32_t n_prepared, const md_buffer_role *input_roles, uint32_t n_input_roles,
                          const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token) {
  if (token) *token = 0;
  if (!d || !desc || !token) return fail(MD_INVALID_ARGUMENT, "allocate: %s is NULL", !d ? "device" : !desc ? "desc" : "token");
  md_status st = client_check(d, "allocate", client);
  if (st != MD_NONE) return st;
  if (!n_prepared || !prepared) return fail(MD_INVALID_ARGUMENT, "allocate: at least one prepared model is needed");
  if (!n_input_roles && !n_output_roles) return fail(MD_INVALID_ARGUMENT, "allocate: at least one role is needed");
  if ((n_input_roles && !input_roles) || (n_output_roles && !output_roles))
    return fail(MD_INVALID_ARGUMENT, "allocate: a role count with a NULL array");
  /* Every prepared handle must be live and this client's (§3); this driver issued none. */
  return never_issued("allocate", "prepared model", prepared[0]);
}

static md_status copy_to(md_device *d, md_handle client, md_token src, const md_memory *dst) {
  if (!d || !dst) return fail(MD_INVALID_ARGUMENT, "copy_to: %s is NULL", d ? "dst" : "device");
  md_status st = client_check(d, "copy_to", client);
  return st != MD_NONE ? st : never_issued("copy_to", "token", src);
}

static md_status copy_from(md_device *d, md_handle client, md_token dst, const md_memory *src, uint32_t rank,
                           const uint32_t *dims) {
  (void)rank, (void)dims; /* checked against the buffer's dims (§3) by a driver that has buffers */
  if (!d || !src) return fail(MD_INVALID_ARGUMENT, "copy_from: %s is NULL", d ? "src" : "device");
  md_status st = client_check(d, "copy_from", client);
  return st != MD_NONE ? st : never_issued("copy_from", "token", dst);
}

static md_status free_buffer(md_device *d, md_handle client, md_token token) {
  if (!d) return fail(MD_INVALID_ARGUMENT, "free_buffer: device is NULL");
  md_status st = client_check(d, "free_buffer", client);
  return st != MD_NONE ? st : never_issued("free_buffer", "token", token);
}

static md_status execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                         md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  clear_results(shapes, n_shapes, timing);
  if (!d || !req) return fail(MD_INVALID_ARGUMENT, "execute: %s is NULL", d ? "request" : "device");
  md_status st = client_check(d, "execute", client);
  return st != MD_NONE ? st : never_issued("execute", "prepared model", prepared);
}

static md_status execute_async(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                               md_handle *event) {
  if (event) *event = 0;
  if (!d || !req || !event)
    return fail(MD_INVALID_ARGUMENT, "execute_async: %s is NULL", !d ? "device" : !req ? "request" : "event");
  md_status st = client_check(d, "execute_async", client);
  return st != MD_NONE ? st : never_issued("execute_async", "prepared model", prepared);
}

static md_status wait_event(md_device *d, md_handle client, md_handle event, uint64_t timeout_ns,
                            md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  (void)timeout_ns; /* no event is ever pending here, so no wait can time out */
  clear_results(shapes, n_shapes, timing);
  if (!d) return fail(MD_INVALID_ARGUMENT, "wait_event: device is NULL");
  md_status st = client_check(d, "wait_event", client);
  return st != MD_NONE ? st : never_issued("wait_event", "event", event);
}

static const char *last_error(md_device *d) {
  (void)d; /* per thread, not per device */
  return last_msg;
}

static const md_driver skeleton = {
  .abi_version = MD_DRIVER_ABI_VERSION,
  .struct_size = sizeof(md_driver), /* the v1 table: no registered pools (§9) */
  .name = SKEL_NAME,
  .version = SKEL_VERSION,
  .open_device = open_device,
  .close_device = close_device,
  .get_capabilities = get_capabilities,
  .get_supported_operations = get_supported_operations,
  .open_client = open_client,
  .close_client = close_client,
  .prepare_model = prepare_model,
  .release_prepared_model = release_prepared_model,
  .allocate = allocate,
  .copy_to = copy_to,
  .copy_from = copy_from,
  .free_buffer = free_buffer,
  .execute = execute,
  .execute_async = execute_async,
  .wait_event = wait_event,
  .last_error = last_error,
};

/* The one exported symbol (contract §1): the table for ABI v1, NULL for any other version.
 * Thread-safe; the table is static and lives as long as the shared object. */
const md_driver *md_driver_entry(uint32_t abi_version) {
  return abi_version == MD_DRIVER_ABI_VERSION ? &skeleton : NULL;
}
