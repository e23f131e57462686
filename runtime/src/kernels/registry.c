/* registry.c - the process-wide kernel registry keyed by (name, platform), plus the small
 * public helpers of md/kernel.h (md_kernel_fail, md_kernel_scratch, md_operation_name,
 * md_operand_type_size).
 *
 * Design: a fixed array of hash buckets, each an immutable singly linked list of entries.
 * Registration takes a mutex, builds a complete entry and publishes it at the head of its
 * bucket with a release store; md_kernel_find walks the lists with acquire loads and no lock.
 * Entries are never freed or unlinked (md_kernel_unregister only sets their `hidden` flag), so a
 * definition pointer handed out by md_kernel_find stays valid for the life of the process and
 * a reader never races with a free. Re-registering a name after unregistering it adds a new
 * entry; the hidden one stays behind (a few bytes per cycle, documented in md/kernel.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_ctx.h"
#include "kernels_int.h"

#define NBUCKETS 64u          /* power of two */
#define NAME_MAX_BYTES 255u   /* longest kernel name or attribute name accepted */

typedef struct entry {
  md_kernel_def def;          /* first member: md_kernel_find returns &e->def */
  struct entry *next;         /* older entry of the same bucket; immutable once published */
  uint64_t hash;
  int builtin;
  atomic_int hidden;          /* set by md_kernel_unregister; never cleared */
} entry;

static _Atomic(entry *) buckets[NBUCKETS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;  /* serializes writers only */
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;
static _Thread_local char reg_error[MD_KERNEL_MESSAGE_MAX + 64];

static const char *const platforms[] = {"host", "sim", "hip"};

static md_status fail(md_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static md_status fail(md_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reg_error, sizeof reg_error, fmt, ap);
  va_end(ap);
  return code;
}

/* Thread-safe: the calling thread's own buffer, "" before its first failure; never NULL. The
 * string changes at the thread's next failing registry call. */
const char *md_kernel_registry_error(void) {
  return reg_error;
}

/* FNV-1a over name, a NUL separator and platform. */
static uint64_t key_hash(const char *name, const char *platform) {
  uint64_t h = UINT64_C(14695981039346656037);
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * UINT64_C(1099511628211);
  h = (h ^ 0u) * UINT64_C(1099511628211);
  for (const unsigned char *p = (const unsigned char *)platform; *p; p++)
    h = (h ^ *p) * UINT64_C(1099511628211);
  return h;
}

/* The visible entry for (name, platform), or NULL. Lock-free; safe against concurrent
 * registration because entries are published complete and never freed. */
static entry *lookup(const char *name, const char *platform, uint64_t h) {
  entry *e = atomic_load_explicit(&buckets[h & (NBUCKETS - 1)], memory_order_acquire);
  for (; e; e = e->next) {
    if (e->hash == h && !atomic_load_explicit(&e->hidden, memory_order_acquire) &&
        strcmp(e->def.name, name) == 0 && strcmp(e->def.platform, platform) == 0)
      return e;
  }
  return NULL;
}

static int platform_known(const char *p) {
  for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
    if (strcmp(p, platforms[i]) == 0) return 1;
  return 0;
}

static md_status validate(const md_kernel_def *d) {
  if (!d) return fail(MD_INVALID_ARGUMENT, "kernel definition is NULL");
  if (d->struct_size < sizeof(md_kernel_def))
    return fail(MD_INVALID_ARGUMENT,
                "kernel definition: struct_size %" PRIu32 " is smaller than %zu (md_kernel_def "
                "of kernel API %u)", d->struct_size, sizeof(md_kernel_def),
                MD_KERNEL_API_VERSION);
  if (!d->name || !d->name[0])
    return fail(MD_INVALID_ARGUMENT, "kernel definition: name is %s",
                d->name ? "empty" : "NULL");
  size_t name_len = strlen(d->name);
  if (name_len > NAME_MAX_BYTES)
    return fail(MD_INVALID_ARGUMENT, "kernel \"%.32s...\": name is %zu bytes, longer than %u",
                d->name, name_len, NAME_MAX_BYTES);
  if (!d->platform || !d->platform[0])
    return fail(MD_INVALID_ARGUMENT, "kernel \"%s\": platform is %s", d->name,
                d->platform ? "empty" : "NULL");
  if (!platform_known(d->platform))
    return fail(MD_INVALID_ARGUMENT,
                "kernel \"%s\" on platform \"%.32s\": unknown platform (host, sim or hip)",
                d->name, d->platform);
#define WHERE "kernel \"%s\" on platform \"%s\": "
  if (!d->run) return fail(MD_INVALID_ARGUMENT, WHERE "run is NULL", d->name, d->platform);
  if (d->min_inputs > d->max_inputs)
    return fail(MD_INVALID_ARGUMENT, WHERE "min_inputs %" PRIu32 " > max_inputs %" PRIu32,
                d->name, d->platform, d->min_inputs, d->max_inputs);
  if (d->n_outputs == 0)
    return fail(MD_INVALID_ARGUMENT, WHERE "n_outputs is 0 (an operation has outputs)", d->name,
                d->platform);
  if (d->n_attr_specs && !d->attr_specs)
    return fail(MD_INVALID_ARGUMENT, WHERE "attr_specs is NULL but n_attr_specs is %" PRIu32,
                d->name, d->platform, d->n_attr_specs);
  for (uint32_t i = 0; i < d->n_attr_specs; i++) {
    const md_attr_spec *s = &d->attr_specs[i];
    if (!s->name || !s->name[0])
      return fail(MD_INVALID_ARGUMENT, WHERE "attribute spec %" PRIu32 ": name is %s", d->name,
                  d->platform, i, s->name ? "empty" : "NULL");
    if (strlen(s->name) > NAME_MAX_BYTES)
      return fail(MD_INVALID_ARGUMENT, WHERE "attribute spec %" PRIu32 ": name is longer than %u",
                  d->name, d->platform, i, NAME_MAX_BYTES);
    if ((unsigned)s->kind > (unsigned)MD_ATTR_I64_ARRAY)
      return fail(MD_INVALID_ARGUMENT, WHERE "attribute spec %" PRIu32 " (\"%s\"): unknown kind %d",
                  d->name, d->platform, i, s->name, (int)s->kind);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(d->attr_specs[j].name, s->name) == 0)
        return fail(MD_INVALID_ARGUMENT,
                    WHERE "attribute spec %" PRIu32 " (\"%s\"): name repeats spec %" PRIu32,
                    d->name, d->platform, i, s->name, j);
  }
#undef WHERE
  return MD_NONE;
}

/* Frees an entry that was never published. */
static void entry_discard(entry *e) {
  if (!e) return;
  free((void *)e->def.name);
  free((void *)e->def.platform);
  if (e->def.attr_specs) {
    for (uint32_t i = 0; i < e->def.n_attr_specs; i++) free((void *)e->def.attr_specs[i].name);
    free((void *)e->def.attr_specs);
  }
  free(e);
}

/* Deep copy of a validated definition; NULL when out of memory. */
static entry *entry_make(const md_kernel_def *d, uint64_t h, int builtin) {
  entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->def = *d; /* only the fields of this API version: validate() checked struct_size */
  e->def.struct_size = sizeof(md_kernel_def);
  e->def.name = NULL;
  e->def.platform = NULL;
  e->def.attr_specs = NULL;
  e->def.n_attr_specs = 0;
  e->hash = h;
  e->builtin = builtin;
  atomic_init(&e->hidden, 0);
  e->def.name = strdup(d->name);
  e->def.platform = strdup(d->platform);
  if (!e->def.name || !e->def.platform) goto oom;
  if (d->n_attr_specs) {
    md_attr_spec *specs = calloc(d->n_attr_specs, sizeof *specs);
    if (!specs) goto oom;
    e->def.attr_specs = specs;
    e->def.n_attr_specs = d->n_attr_specs;
    for (uint32_t i = 0; i < d->n_attr_specs; i++) {
      specs[i].kind = d->attr_specs[i].kind;
      specs[i].required = d->attr_specs[i].required != 0;
      specs[i].name = strdup(d->attr_specs[i].name);
      if (!specs[i].name) goto oom;
    }
  }
  return e;
oom:
  entry_discard(e);
  return NULL;
}

static md_status reg(const md_kernel_def *d, int builtin) {
  md_status s = validate(d);
  if (s != MD_NONE) return s;
  uint64_t h = key_hash(d->name, d->platform);
  entry *e = entry_make(d, h, builtin);
  if (!e)
    return fail(MD_RESOURCE_EXHAUSTED_TRANSIENT, "kernel \"%s\" on platform \"%s\": out of memory",
                d->name, d->platform);
  pthread_mutex_lock(&reg_lock);
  if (lookup(d->name, d->platform, h)) {
    pthread_mutex_unlock(&reg_lock);
    entry_discard(e);
    return fail(MD_INVALID_ARGUMENT, "kernel \"%s\" on platform \"%s\": already registered",
                d->name, d->platform);
  }
  _Atomic(entry *) *b = &buckets[h & (NBUCKETS - 1)];
  e->next = atomic_load_explicit(b, memory_order_relaxed); /* writers are serialized */
  atomic_store_explicit(b, e, memory_order_release);
  pthread_mutex_unlock(&reg_lock);
  return MD_NONE;
}

static void register_table(const md_kernel_def *table, uint32_t n) {
  static const char *const builtin_platforms[] = {"host", "sim"};
  for (uint32_t i = 0; i < n; i++) {
    for (size_t p = 0; p < sizeof builtin_platforms / sizeof builtin_platforms[0]; p++) {
      md_kernel_def d = table[i];
      d.platform = builtin_platforms[p];
      /* Only out of memory can fail here; the operation then has no kernel and prepare_model
       * reports "no kernel for X", which is the honest outcome. */
      (void)reg(&d, 1);
    }
  }
}

static void register_builtins(void) {
  register_table(md__host_elementwise_kernels, md__host_elementwise_count);
  register_table(md__host_nn_kernels, md__host_nn_count);
  register_table(md__host_shape_kernels, md__host_shape_count);
  reg_error[0] = '\0';
}

static void ensure_builtins(void) {
  pthread_once(&builtins_once, register_builtins);
}

/* Thread-safe (mutex). Copies name, platform and attr_specs; the caller keeps ownership of
 * `def`. Failure: INVALID_ARGUMENT (see md/kernel.h) or RESOURCE_EXHAUSTED_TRANSIENT (out of
 * memory), nothing registered, message in md_kernel_registry_error(). */
md_status md_kernel_register(const md_kernel_def *def) {
  ensure_builtins();
  return reg(def, 0);
}

/* As md_kernel_register, but the kernel counts as a built-in: it cannot be unregistered. */
md_status md__kernel_register_builtin(const md_kernel_def *def) {
  ensure_builtins();
  return reg(def, 1);
}

/* Thread-safe (mutex). Hides a user kernel from lookups; its memory is kept (see above). */
md_status md_kernel_unregister(const char *name, const char *platform) {
  ensure_builtins();
  if (!name || !platform)
    return fail(MD_INVALID_ARGUMENT, "kernel unregister: %s is NULL", name ? "platform" : "name");
  uint64_t h = key_hash(name, platform);
  pthread_mutex_lock(&reg_lock);
  entry *e = lookup(name, platform, h);
  md_status s = MD_NONE;
  if (!e) {
    s = fail(MD_INVALID_ARGUMENT, "kernel \"%.*s\" on platform \"%.32s\": not registered",
             (int)NAME_MAX_BYTES, name, platform);
  } else if (e->builtin) {
    s = fail(MD_INVALID_ARGUMENT,
             "kernel \"%s\" on platform \"%s\": built-in kernels cannot be unregistered", name,
             platform);
  } else {
    atomic_store_explicit(&e->hidden, 1, memory_order_release);
  }
  pthread_mutex_unlock(&reg_lock);
  return s;
}

/* Thread-safe and lock-free (after the one-time built-in registration). The result stays
 * valid for the life of the process. NULL for NULL arguments or an absent kernel. */
const md_kernel_def *md_kernel_find(const char *name, const char *platform) {
  if (!name || !platform) return NULL;
  ensure_builtins();
  entry *e = lookup(name, platform, key_hash(name, platform));
  return e ? &e->def : NULL;
}

/* md_kernel_find returns &entry.def, the entry's first member. */
int md__kernel_is_builtin(const md_kernel_def *k) {
  return k && ((const entry *)(const void *)k)->builtin;
}

/* Thread-safe (writes only *st; NULL st is allowed). Never fails; the message is truncated to
 * MD_KERNEL_MESSAGE_MAX - 1 bytes. */
md_status md_kernel_fail(md_kernel_status *st, md_status code, const char *fmt, ...) {
  if (code == MD_NONE) code = MD_GENERAL_FAILURE;
  if (!st) return code;
  st->code = code;
  st->message[0] = '\0';
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Thread-safe; static strings. NULL for MD_OP_CUSTOM and values outside the v1 subset. */
const char *md_operation_name(md_operation_type type) {
  switch (type) {
  case MD_OP_ADD: return "ADD";
  case MD_OP_CONCATENATION: return "CONCATENATION";
  case MD_OP_FULLY_CONNECTED: return "FULLY_CONNECTED";
  case MD_OP_MUL: return "MUL";
  case MD_OP_RELU: return "RELU";
  case MD_OP_RESHAPE: return "RESHAPE";
  case MD_OP_SOFTMAX: return "SOFTMAX";
  case MD_OP_SUB: return "SUB";
  case MD_OP_CUSTOM: return NULL;
  }
  return NULL;
}

/* Thread-safe. 0 for a value outside the v1 subset. */
size_t md_operand_type_size(md_operand_type type) {
  switch (type) {
  case MD_FLOAT32:
  case MD_INT32:
  case MD_UINT32:
  case MD_TENSOR_FLOAT32:
  case MD_TENSOR_INT32: return 4;
  case MD_TENSOR_FLOAT16: return 2;
  case MD_BOOL:
  case MD_TENSOR_QUANT8_ASYMM:
  case MD_TENSOR_QUANT8_ASYMM_SIGNED: return 1;
  }
  return 0;
}

/* The registry's entries live as long as the code that uses them: when the library (or the
 * program) is unloaded, nothing can reach them any more, so they are freed here. Without this
 * a dlopen/dlclose of libmd_driver.so would leak every definition. */
_Atomic uint32_t md__kernel_registry_pins;

__attribute__((destructor)) static void registry_unload(void) {
  /* A device still open (its workers may be running kernels while the process exits): keep
   * everything, as a process exit would anyway. */
  if (atomic_load(&md__kernel_registry_pins) != 0) return;
  for (uint32_t i = 0; i < NBUCKETS; i++) {
    entry *e = atomic_exchange(&buckets[i], NULL);
    while (e) {
      entry *next = e->next;
      entry_discard(e);
      e = next;
    }
  }
}

/* ---- scratch memory (kernel_ctx.h) ---------------------------------------------------- */

/* See kernel_ctx.h: allocates nothing, cannot fail; not thread-safe (one invocation). */
void md__kctx_init(md_kernel_ctx *c, uint64_t limit_bytes) {
  c->limit = limit_bytes;
  c->used = 0;
  c->blocks = NULL;
}

/* See kernel_ctx.h: frees every block of c; c stays usable with the same limit. */
void md__kctx_release(md_kernel_ctx *c) {
  if (!c) return;
  void *b = c->blocks;
  while (b) {
    void *next;
    memcpy(&next, b, sizeof next);
    free(b);
    b = next;
  }
  c->blocks = NULL;
  c->used = 0;
}

/* Not thread-safe (one context per invocation). The memory belongs to ctx and is freed by
 * md__kctx_release; NULL past the limit, for a NULL ctx, or when the allocator fails. Each
 * block is one aligned allocation whose first MD__KCTX_ALIGN bytes link to the previous one. */
void *md_kernel_scratch(md_kernel_ctx *ctx, uint64_t bytes) {
  if (!ctx || ctx->used > ctx->limit || bytes > ctx->limit - ctx->used) return NULL;
  if (bytes > (uint64_t)SIZE_MAX - 2u * MD__KCTX_ALIGN) return NULL;
  size_t body = ((size_t)(bytes ? bytes : 1) + MD__KCTX_ALIGN - 1) & ~(size_t)(MD__KCTX_ALIGN - 1);
  unsigned char *b = aligned_alloc(MD__KCTX_ALIGN, MD__KCTX_ALIGN + body);
  if (!b) return NULL;
  memcpy(b, &ctx->blocks, sizeof ctx->blocks);
  ctx->blocks = b;
  ctx->used += bytes;
  return b + MD__KCTX_ALIGN;
}
