/* test_backends.c - the backend registry and backend selection by open_device. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <string.h>

#include "error.h"
#include "md/backend.h"
#include "md/sim.h"

/* The driver product registers its backends when md_driver_entry is first called. */
static void entry(void) { cr_assert_not_null(md_driver_entry(MD_DRIVER_ABI_VERSION)); }

Test(backends, sim_is_registered_and_found_by_name, .init = entry) {
  const md_backend_ops *ops = md_backend_find("sim");
  cr_assert_not_null(ops);
  cr_assert_eq(ops->open, md_sim_backend()->open, "the registry keeps a copy of the sim's table");
  cr_assert_str_eq(ops->platform, "sim");
  cr_assert_not_null(ops->device_ns, "sim models time through the optional device_ns entry");
  cr_assert_null(md_backend_find("tpu"));
}

Test(backends, duplicate_name_is_rejected, .init = entry) {
  cr_assert_eq(md_backend_register(md_sim_backend()), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md__last_error(), "backend 'sim': already registered"), "%s", md__last_error());
}

Test(backends, unknown_version_or_short_table_is_rejected) {
  md_backend_ops ops = *md_sim_backend();
  ops.name = "sim2";
  ops.version = MD_BACKEND_VERSION + 1;
  cr_assert_eq(md_backend_register(&ops), MD_INVALID_ARGUMENT);
  ops.version = MD_BACKEND_VERSION;
  ops.struct_size = 8;
  cr_assert_eq(md_backend_register(&ops), MD_INVALID_ARGUMENT);
  ops.struct_size = (uint32_t)MD_BACKEND_OPS_MIN_SIZE - 1;   /* event_wait cut off */
  cr_assert_eq(md_backend_register(&ops), MD_INVALID_ARGUMENT);
  cr_assert_null(md_backend_find("sim2"));
}

Test(backends, a_table_without_the_optional_entries_reads_them_as_null) {
  md_backend_ops ops = *md_sim_backend();
  ops.name = "sim-v1-min";
  ops.struct_size = (uint32_t)MD_BACKEND_OPS_MIN_SIZE;   /* ends at event_wait */
  cr_assert_eq(md_backend_register(&ops), MD_NONE, "%s", md__last_error());
  const md_backend_ops *found = md_backend_find("sim-v1-min");
  cr_assert_not_null(found);
  cr_assert_eq(found->struct_size, sizeof(md_backend_ops));
  cr_assert_null(found->fault_point);
  cr_assert_null(found->device_ns);
  cr_assert_eq(found->event_wait, ops.event_wait);
}

Test(backends, a_registered_backend_can_be_opened_by_name) {
  static md_backend_ops ops;
  ops = *md_sim_backend();
  ops.name = "sim-copy";
  cr_assert_eq(md_backend_register(&ops), MD_NONE, "%s", md__last_error());
  cr_assert_not_null(md_backend_find("sim-copy"));
  cr_assert_str_eq(md_backend_find("sim-copy")->name, "sim-copy");
  /* open_device only accepts sim, hip and auto: an extra backend is reachable through the
   * registry by tools, not through the config string. */
  md_device *dev = NULL;
  cr_assert_eq(md_driver_entry(MD_DRIVER_ABI_VERSION)->open_device("backend=sim-copy", &dev), MD_INVALID_ARGUMENT);
}

Test(backends, hip_without_a_gpu_is_device_unavailable_and_auto_picks_what_answers, .init = entry) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = NULL;
  /* backend=hip: DEVICE_UNAVAILABLE when the driver was built without it, or built with it
   * on a machine where no GPU answers; a device when one does. */
  md_status hip = drv->open_device("backend=hip", &dev);
  bool gpu = hip == MD_NONE;
  if (gpu) {
    drv->close_device(dev);
    dev = NULL;
  } else {
    cr_assert_eq(hip, MD_DEVICE_UNAVAILABLE);
    const char *why = drv->last_error(NULL);
    /* ...and names exactly the backends it was built with (backend_registry.c's list_names). */
    if (!md_backend_find("hip")) cr_assert(strstr(why, "built without it (built with: sim)"), "%s", why);
    else cr_assert(strstr(why, "hip"), "%s", why);
  }
  cr_assert_eq(drv->open_device("backend=auto", &dev), MD_NONE);
  md_capabilities caps = {.struct_size = sizeof caps};
  cr_assert_eq(drv->get_capabilities(dev, &caps), MD_NONE);
  cr_assert_str_eq(caps.backend, gpu ? "hip" : "sim", "auto must pick hip exactly when a GPU answers");
  drv->close_device(dev);
}
