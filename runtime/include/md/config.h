/* md/config.h - the open_device configuration string (SPEC 1): "key=value;key=value".
 *
 * One parser for everyone who reads such a string: the reference driver's open_device, `mdc
 * replay` (which validates --config and stores exactly what the driver will use), the
 * conformance engine (which merges a replay's keys into a trace's), the recorder and the
 * workloads. Library md_config (static, no dependencies); not exported by libmd_driver.so.
 *
 * Syntax: items separated by ';'; each item is key=value with blanks around either trimmed;
 * empty items (";;", a trailing ';') are skipped. Values:
 *   backend     sim | hip | auto (default auto)
 *   mem_limit   a positive byte count: decimal or 0x hex, optional binary suffix K, M or G
 *   seed        an unsigned 64-bit integer: decimal or 0x hex
 *   faults      a fault plan, kept as written (the backend parses it)
 *   latency_ns  an unsigned integer: decimal or 0x hex
 *   copy_gbps   a bandwidth in GB/s, 0 < x <= 1e6
 *   init_ns     an unsigned integer: decimal or 0x hex (the simulator's start-up cost model)
 * An unknown key, a key given twice, an item without '=' or a bad value is INVALID_ARGUMENT
 * with a message naming it. Thread-safe: no state. */
#ifndef MD_CONFIG_H
#define MD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "md/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, name): the one list of keys, in canonical order. */
#define MD_CONFIG_KEY_MAP(X) \
  X(BACKEND, backend)        \
  X(MEM_LIMIT, mem_limit)    \
  X(SEED, seed)              \
  X(FAULTS, faults)          \
  X(LATENCY_NS, latency_ns)  \
  X(COPY_GBPS, copy_gbps)    \
  X(INIT_NS, init_ns)

typedef enum md_config_key {
#define MD_CONFIG_X(e, n) MD_CONFIG_##e,
  MD_CONFIG_KEY_MAP(MD_CONFIG_X)
#undef MD_CONFIG_X
  MD_CONFIG_KEY_COUNT
} md_config_key;

typedef struct md_config {
  char backend[16];       /* "sim", "hip", "auto" */
  uint64_t mem_limit;     /* 0: the device's own */
  uint64_t seed;          /* valid when has_seed */
  int has_seed;
  uint64_t latency_ns;
  double copy_gbps;       /* 0: not modelled */
  uint64_t init_ns;       /* start-up cost the first open_device of a process pays (sim); 0: none */
  char faults[256];       /* "" when none */
  uint32_t given;         /* bit (1u << MD_CONFIG_<KEY>) for every key the text named */
} md_config;

/* The key's name ("mem_limit"); NULL for a value out of range. */
const char *md_config_key_name(md_config_key k);

/* Parses text (NULL or "": the defaults) into *out. MD_NONE, or INVALID_ARGUMENT with a message
 * naming the key or value in err (when err && errlen); *out is then the defaults plus whatever
 * came before the bad item. */
md_status md_config_parse(const char *text, md_config *out, char *err, size_t errlen);

/* Writes the canonical text of c: the keys given, in MD_CONFIG_KEY_MAP order, numbers in
 * decimal ("backend=sim;seed=16"). Returns the length it needs (as snprintf); "" for none. */
size_t md_config_format(const md_config *c, char *buf, size_t len);

/* Calls fn for each non-empty item of text, key and value trimmed (not NUL-terminated; an item
 * without '=' has val NULL). Stops at the first nonzero return of fn and returns it; 0 when
 * every item was seen. Knows nothing of the keys: for tools that pass unknown keys through. */
typedef int (*md_config_item_fn)(const char *key, size_t klen, const char *val, size_t vlen, void *arg);
int md_config_items(const char *text, md_config_item_fn fn, void *arg);

/* Whether text names key (an item "key=..." or "key"), known key or not. */
int md_config_has(const char *text, const char *key);

/* Writes base, then every item of extra whose key base does not name, ';'-separated: base's
 * keys win. Items are copied as written (unknown keys too). Returns the length it needs (as
 * snprintf). Either may be NULL. */
size_t md_config_merge(const char *base, const char *extra, char *out, size_t len);

/* Writes text without the items whose key is `drop` (as md_config_merge writes items). */
size_t md_config_without(const char *text, const char *drop, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
