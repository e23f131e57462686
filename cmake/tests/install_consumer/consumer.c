/* consumer.c - uses the installed reference driver through mdc::md_driver: opens a device,
 * reads its capabilities, opens and closes a client, and checks the installed corpus is where
 * the package config says. Exit 0 only if all of that worked. */
#include <stdio.h>
#include <sys/stat.h>

#include "md/driver.h"
#include "md/status.h"

int main(void) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  if (!drv) return fprintf(stderr, "md_driver_entry(1) returned NULL\n"), 1;
  md_device *dev = NULL;
  md_status st = drv->open_device("backend=sim", &dev);
  if (st != MD_NONE) return fprintf(stderr, "open_device: %s: %s\n", md_status_name(st), drv->last_error(NULL)), 1;
  md_capabilities caps = {.struct_size = sizeof caps};
  md_handle client = 0;
  md_leak_report leaks;
  if ((st = drv->get_capabilities(dev, &caps)) != MD_NONE || (st = drv->open_client(dev, &client)) != MD_NONE ||
      (st = drv->close_client(dev, client, &leaks)) != MD_NONE) {
    fprintf(stderr, "%s: %s\n", md_status_name(st), drv->last_error(dev));
    drv->close_device(dev);
    return 1;
  }
  drv->close_device(dev);
  struct stat sb;
  if (stat(MDC_TRACES "/basic", &sb) != 0 || !S_ISDIR(sb.st_mode))
    return fprintf(stderr, "MDC_TRACES_DIR %s has no basic/ folder\n", MDC_TRACES), 1;
  printf("%s %s on %s (memory domains %u); traces in %s\n", drv->name, drv->version, caps.backend,
         caps.supports_memory_domains, MDC_TRACES);
  return 0;
}
