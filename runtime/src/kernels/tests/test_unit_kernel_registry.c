/* test_unit_kernel_registry.c - the kernel registry at its boundaries: 255-byte names and
 * specs, limits at their ends, unregister and register again, many kernels in every bucket, a
 * built-in name, NULL keys and a NULL run. */

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels_int.h"
#include "ktest.h"

/* ---- registry boundaries -------------------------------------------------------------- */

static void kx_noop_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)c;
  (void)st;
}

static md_kernel_def kx_def(const char *name, const char *platform) {
  md_kernel_def d = {.struct_size = sizeof d, .name = name, .platform = platform,
                     .min_inputs = 1, .max_inputs = 1, .n_outputs = 1, .run = kx_noop_run};
  return d;
}

Test(kregistry, name_and_spec_lengths_at_255_bytes) {
  char name[257];
  memset(name, 'n', 256);
  name[256] = '\0';
  md_kernel_def d = kx_def(name, "host");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "name is 256 bytes, longer than 255"), "%s",
            md_kernel_registry_error());
  name[255] = '\0';
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  cr_assert_not_null(md_kernel_find(name, "host"));

  char spec[257];
  memset(spec, 's', 256);
  spec[256] = '\0';
  md_attr_spec specs[2] = {{"a", MD_ATTR_I64_ARRAY, 0}, {spec, MD_ATTR_STR, 0}};
  d = kx_def("kx.specs", "sim");
  d.attr_specs = specs;
  d.n_attr_specs = 2;
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "attribute spec 1: name is longer than 255"), "%s",
            md_kernel_registry_error());
  spec[255] = '\0';
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
}

Test(kregistry, limits_accepted_at_their_ends) {
  md_kernel_def d = kx_def("kx.ends", "hip");
  d.min_inputs = d.max_inputs = 0;
  d.struct_size = sizeof d;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  d = kx_def("kx.ends2", "host");
  d.struct_size = sizeof d - 1;
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  d.struct_size = sizeof d;
  d.min_inputs = 2;
  d.max_inputs = 2;
  d.n_outputs = 1;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  md_attr_spec specs[4] = {{"a", MD_ATTR_I64, 7}, {"b", MD_ATTR_F64, 0}, {"c", MD_ATTR_I64_ARRAY, 0},
                           {"a", MD_ATTR_STR, 0}};
  d = kx_def("kx.specs3", "host");
  d.attr_specs = specs;
  d.n_attr_specs = 4;
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "attribute spec 3 (\"a\"): name repeats spec 0"),
            "%s", md_kernel_registry_error());
  specs[3].kind = (md_attr_kind)4;
  specs[3].name = "d";
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "unknown kind 4"), "%s", md_kernel_registry_error());
  specs[3].kind = MD_ATTR_I64_ARRAY;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  const md_kernel_def *f = md_kernel_find("kx.specs3", "host");
  cr_assert_not_null(f);
  cr_assert_eq(f->n_attr_specs, 4);
  cr_assert_eq(f->attr_specs[0].required, 1, "required normalised to 1");
  cr_assert_eq(f->attr_specs[1].required, 0);
  cr_assert_eq(f->attr_specs[3].kind, MD_ATTR_I64_ARRAY);
  cr_assert_str_eq(f->attr_specs[2].name, "c");
  cr_assert_neq(f->attr_specs, specs);
}

Test(kregistry, unregister_then_register_again) {
  md_kernel_def d = kx_def("kx.again", "host");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  const md_kernel_def *first = md_kernel_find("kx.again", "host");
  cr_assert_not_null(first);
  cr_assert_not(md__kernel_is_builtin(first));
  cr_assert(md__kernel_is_builtin(md_kernel_find("ADD", "host")));
  cr_assert_not(md__kernel_is_builtin(NULL));
  cr_assert_eq(md_kernel_unregister("kx.again", "host"), MD_NONE);
  cr_assert_null(md_kernel_find("kx.again", "host"));
  cr_assert_eq(md_kernel_unregister("kx.again", "host"), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "kernel \"kx.again\" on platform \"host\": not registered"),
            "%s", md_kernel_registry_error());
  d.min_inputs = 0;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  const md_kernel_def *second = md_kernel_find("kx.again", "host");
  cr_assert_not_null(second);
  cr_assert_neq(second, first);
  cr_assert_eq(second->min_inputs, 0);
  cr_assert_eq(md_kernel_unregister(NULL, "host"), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(), "kernel unregister: name is NULL");
  cr_assert_eq(md_kernel_unregister("kx.again", NULL), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(), "kernel unregister: platform is NULL");
  /* a built-in registered through the internal entry cannot be unregistered */
  md_kernel_def b = kx_def("kx.builtin", "hip");
  cr_assert_eq(md__kernel_register_builtin(&b), MD_NONE);
  cr_assert(md__kernel_is_builtin(md_kernel_find("kx.builtin", "hip")));
  cr_assert_eq(md_kernel_unregister("kx.builtin", "hip"), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "built-in kernels cannot be unregistered"), "%s",
            md_kernel_registry_error());
  cr_assert_eq(md__kernel_register_builtin(&b), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "already registered"), "%s",
            md_kernel_registry_error());
  cr_assert_eq(md__kernel_register_builtin(NULL), MD_INVALID_ARGUMENT);
}

Test(kregistry, many_kernels_in_every_bucket_stay_distinct) {
  char names[200][16];
  for (int i = 0; i < 200; i++) {
    snprintf(names[i], sizeof names[i], "kx.%d", i);
    md_kernel_def d = kx_def(names[i], i % 2 ? "sim" : "host");
    d.max_inputs = (uint32_t)(i + 1);
    cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  }
  for (int i = 0; i < 200; i++) {
    const md_kernel_def *f = md_kernel_find(names[i], i % 2 ? "sim" : "host");
    cr_assert_not_null(f, "%s", names[i]);
    cr_assert_eq(f->max_inputs, (uint32_t)(i + 1));
    cr_assert_null(md_kernel_find(names[i], i % 2 ? "host" : "sim"));
  }
  /* name and platform are not merely concatenated */
  md_kernel_def d = kx_def("kx.1h", "sim");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  cr_assert_null(md_kernel_find("kx.1", "hsim"));
}

Test(kregistry, first_call_registering_a_builtin_name_is_a_duplicate) {
  md_kernel_def d = kx_def("ADD", "host");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "already registered"), "%s",
            md_kernel_registry_error());
  const md_kernel_def *add = md_kernel_find("ADD", "host");
  cr_assert_not_null(add);
  cr_assert(md__kernel_is_builtin(add));
  cr_assert_eq(add->min_inputs, 3);
}

Test(kregistry, find_with_a_null_key_half) {
  cr_assert_null(md_kernel_find(NULL, "host"));
  cr_assert_null(md_kernel_find("ADD", NULL));
  cr_assert_null(md_kernel_find(NULL, NULL));
  cr_assert_not_null(md_kernel_find("ADD", "sim"));
}

Test(kregistry, null_run_refused_and_not_registered) {
  md_kernel_def d = kx_def("kx.norun", "host");
  d.run = NULL;
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert_null(md_kernel_find("kx.norun", "host"));
}
