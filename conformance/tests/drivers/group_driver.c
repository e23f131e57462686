/* group_driver.c - drivers with planted behaviour for grouped replay's tests (mdc replay --group,
 * test_group.c), built only for tests. Each wraps the reference driver (dlopen'ed from
 * MD_DRIVER_SO) and misbehaves only across the traces one process runs, chosen at compile time:
 *   MDC_TEST_SEVENTH  the 7th open_device of a process (and every 7th after it) calls abort():
 *                     with one device per trace, the 7th trace of every group crashes, and the
 *                     same trace alone passes
 *   MDC_TEST_STICKY   a state leak across devices: the mem_limit of the last device opened with
 *                     one is remembered by the process and applied to the next open_device that
 *                     names none (then forgotten), so a trace that allocates more than that
 *                     fails right after a trace that set it, and passes alone
 *   MDC_TEST_GROW     every open_device leaks MDC_TEST_GROW_MIB MiB (default 8) of touched host
 *                     memory: a child's resident set grows with each trace it runs
 * Every other entry point is the reference driver's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md/driver.h"

static const md_driver *real;
static md_driver table;

#if defined(MDC_TEST_SEVENTH)
static unsigned opens;

static md_status planted_open_device(const char *config, md_device **out) {
  if (++opens % 7 == 0) abort();
  return real->open_device(config, out);
}
#elif defined(MDC_TEST_STICKY)
static char sticky[64]; /* "mem_limit=..." of the last device opened with one; "" when none */

static md_status planted_open_device(const char *config, md_device **out) {
  const char *m = config ? strstr(config, "mem_limit=") : NULL;
  if (m) {
    md_status st = real->open_device(config, out);
    size_t n = strcspn(m, ";");
    if (st == MD_NONE) snprintf(sticky, sizeof sticky, "%.*s", (int)(n < 63 ? n : 63), m);
    return st;
  }
  if (!sticky[0]) return real->open_device(config, out);
  char cfg[1024];
  snprintf(cfg, sizeof cfg, "%s%s%s", config && *config ? config : "", config && *config ? ";" : "", sticky);
  sticky[0] = '\0'; /* carried over once: to the next device that names none */
  return real->open_device(cfg, out);
}
#elif defined(MDC_TEST_GROW)
char *volatile mdc_test_grow_leaked; /* the last leak kept reachable: the compiler keeps the leaks */

static md_status planted_open_device(const char *config, md_device **out) {
  const char *e = getenv("MDC_TEST_GROW_MIB");
  size_t mib = e && *e ? (size_t)strtoul(e, NULL, 10) : 8;
  char *leak = malloc(mib << 20);
  if (leak) memset(leak, 0x5a, mib << 20), mdc_test_grow_leaked = leak; /* touched: resident */
  return real->open_device(config, out);
}
#endif

const md_driver *md_driver_entry(uint32_t abi_version) {
  if (!real) {
    void *h = dlopen(MD_DRIVER_SO, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "md_driver_entry") : NULL;
    if (!sym) return NULL;
    const md_driver *(*entry)(uint32_t);
    memcpy(&entry, &sym, sizeof entry);
    if (!(real = entry(abi_version))) return NULL;
    table = *real;
    table.name = "mdc-group-test";
    table.open_device = planted_open_device;
  }
  return &table;
}
