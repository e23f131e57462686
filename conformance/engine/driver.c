/* driver.c - verdict names, and loading a driver (md/loader.h) with the linked reference driver
 * as the default. */
#include "engine_int.h"
#include "md/loader.h"

const char *mdc_verdict_name(mdc_verdict v) {
  switch (v) {
    case MDC_PASS: return "Pass";
    case MDC_FAIL: return "Fail";
    case MDC_NOT_SUPPORTED: return "NotSupported";
    case MDC_TRACE_ERROR: return "TraceError";
  }
  return "Unknown";
}

const md_driver *mdc_driver_load(const char *so_path, void **dl, char *err, size_t errlen) {
  return md_driver_load(so_path, md_driver_entry, dl, err, errlen);
}

void mdc_driver_unload(void *dl) { md_driver_unload(dl); }
