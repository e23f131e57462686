/* test_dlopen.c - the driver as an outside tool sees it: libmd_driver.so loaded with dlopen,
 * md_driver_entry found with dlsym, the table checked, and a real allocate / copy_from /
 * execute / copy_to round trip run through it (SPEC section 1). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "support.h"

typedef const md_driver *(*entry_fn)(uint32_t);

static void *lib;
static entry_fn entry;

static void load(void) {
  lib = dlopen(MD_DRIVER_SO, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(lib, "dlopen(%s): %s", MD_DRIVER_SO, dlerror());
  entry = (entry_fn)dlsym(lib, "md_driver_entry");
  cr_assert_not_null(entry, "dlsym(md_driver_entry): %s", dlerror());
}
static void unload(void) {
  if (lib) dlclose(lib);
  lib = NULL;
}
TestSuite(dlopen, .init = load, .fini = unload);

Test(dlopen, entry_serves_abi_version_1) {
  const md_driver *d = entry(MD_DRIVER_ABI_VERSION);
  cr_assert_not_null(d);
  cr_expect_eq(d->abi_version, MD_DRIVER_ABI_VERSION);
  cr_expect_eq(d->struct_size, (uint32_t)sizeof(md_driver));
  cr_assert_not_null(d->name);
  cr_expect_gt(strlen(d->name), 0u);
  cr_expect_not_null(d->version);
}

Test(dlopen, entry_refuses_other_versions) {
  cr_expect_null(entry(2));
  cr_expect_null(entry(0));
  cr_expect_null(entry(UINT32_MAX));
}

Test(dlopen, every_entry_point_present) {
  const md_driver *d = entry(MD_DRIVER_ABI_VERSION);
  cr_assert_not_null(d);
  cr_expect_not_null(d->open_device);
  cr_expect_not_null(d->close_device);
  cr_expect_not_null(d->get_capabilities);
  cr_expect_not_null(d->get_supported_operations);
  cr_expect_not_null(d->open_client);
  cr_expect_not_null(d->close_client);
  cr_expect_not_null(d->prepare_model);
  cr_expect_not_null(d->release_prepared_model);
  cr_expect_not_null(d->allocate);
  cr_expect_not_null(d->copy_to);
  cr_expect_not_null(d->copy_from);
  cr_expect_not_null(d->free_buffer);
  cr_expect_not_null(d->execute);
  cr_expect_not_null(d->execute_async);
  cr_expect_not_null(d->register_memory);     /* SPEC 9, optional: the reference driver has it */
  cr_expect_not_null(d->unregister_memory);
  cr_expect_not_null(d->wait_event);
  cr_expect_not_null(d->last_error);
}

Test(dlopen, private_symbols_not_exported) {
  cr_expect_null(dlsym(lib, "md__driver_table"), "md__* is private to the runtime");
}

Test(dlopen, round_trip_allocate_copy_execute_copy) {
  const md_driver *d = entry(MD_DRIVER_ABI_VERSION);
  cr_assert_not_null(d);
  mdt_env x = {d, NULL, 0};
  cr_assert_eq(d->open_device("backend=sim", &x.dev), MD_NONE, "open_device");
  cr_assert_eq(d->open_client(x.dev, &x.client), MD_NONE, "%s", d->last_error(x.dev));

  static const uint32_t d23[2] = {2, 3}, d3[1] = {3};
  mdt_model b;
  /* out = relu(a + c), c [3] broadcast over the rows of a [2,3]. */
  md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, d23, 1, d3, 2, d23, 1));
  md_token in = mdt_alloc(&x, p, false, 0, 0, NULL);
  md_token out = mdt_alloc(&x, p, true, 0, 0, NULL);
  cr_expect_neq(in, out);

  float a[6] = {-1, 2, -3, 4, -5, 6}, c[3] = {0.5f, -1, 10}, res[6];
  cr_assert_eq(mdt_copy_from(&x, x.client, in, a, sizeof a, 0, NULL), MD_NONE, "%s", d->last_error(x.dev));
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_token(&r, in, 0, NULL);
  mdt_req_in_data(&r, c, sizeof c, 0, NULL);
  mdt_req_out_token(&r, out, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  cr_assert_eq(mdt_exec(&x, p, &r, sh, &tm), MD_NONE, "%s", d->last_error(x.dev));
  cr_expect_eq(sh[0].rank, 2u);
  mdt_req_fini(&r);
  cr_assert_eq(mdt_copy_to(&x, x.client, out, res, sizeof res), MD_NONE, "%s", d->last_error(x.dev));
  for (int i = 0; i < 6; i++) {
    float want = a[i] + c[i % 3];
    if (want < 0) want = 0;
    cr_expect_eq(res[i], want, "res[%d] = %g, want %g", i, (double)res[i], (double)want);
  }

  mdt_free(&x, in);
  mdt_free(&x, out);
  mdt_release(&x, p);
  mdt_env_close(&x, 0);
}

Test(dlopen, dlopened_driver_and_linked_driver_are_independent) {
  /* A token of one copy of the driver means nothing to the other. */
  const md_driver *d = entry(MD_DRIVER_ABI_VERSION);
  cr_assert_not_null(d);
  mdt_env x = {d, NULL, 0}, y;
  cr_assert_eq(d->open_device("backend=sim", &x.dev), MD_NONE);
  cr_assert_eq(d->open_client(x.dev, &x.client), MD_NONE);
  mdt_env_open(&y, NULL);
  static const uint32_t d23[2] = {2, 3};
  mdt_model b;
  md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, d23, 2, d23, 2, d23, 0));
  md_token t = mdt_alloc(&x, p, false, 0, 0, NULL);
  cr_expect_eq(y.drv->free_buffer(y.dev, y.client, t), MD_INVALID_ARGUMENT);
  mdt_free(&x, t);
  mdt_release(&x, p);
  mdt_env_close(&y, 0);
  mdt_env_close(&x, 0);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define MDT_HAVE_LSAN 1
#endif

Test(dlopen_unload, after_clean_use_leaks_nothing) {
  /* A tool that opens a device, uses it, closes everything and dlcloses the driver must get
   * all of the driver's memory back (checked by LeakSanitizer in sanitizer builds). */
#ifndef MDT_HAVE_LSAN
  cr_skip_test("needs a LeakSanitizer build (MD_SANITIZE=address,...)");
#else
  for (int round = 0; round < 2; round++) {
    void *h = dlopen(MD_DRIVER_SO, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    entry_fn en = (entry_fn)dlsym(h, "md_driver_entry");
    cr_assert_not_null(en);
    const md_driver *d = en(MD_DRIVER_ABI_VERSION);
    mdt_env x = {d, NULL, 0};
    cr_assert_eq(d->open_device("backend=sim", &x.dev), MD_NONE);
    cr_assert_eq(d->open_client(x.dev, &x.client), MD_NONE);
    static const uint32_t d23[2] = {2, 3};
    mdt_model b;
    md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, d23, 2, d23, 2, d23, 0));
    md_token t = mdt_alloc(&x, p, true, 0, 0, NULL);
    float a[6] = {1, 2, 3, 4, 5, 6};
    mdt_request r;
    mdt_req_init(&r);
    mdt_req_in_data(&r, a, sizeof a, 0, NULL);
    mdt_req_in_data(&r, a, sizeof a, 0, NULL);
    mdt_req_out_token(&r, t, 0, NULL);
    md_output_shape sh[8];
    md_timing tm;
    cr_assert_eq(mdt_exec(&x, p, &r, sh, &tm), MD_NONE);
    mdt_req_fini(&r);
    mdt_free(&x, t);
    mdt_release(&x, p);
    mdt_env_close(&x, 0);
    cr_assert_eq(dlclose(h), 0);
  }
  cr_expect_eq(__lsan_do_recoverable_leak_check(), 0, "memory of the unloaded driver leaked (see stderr)");
#endif
}
