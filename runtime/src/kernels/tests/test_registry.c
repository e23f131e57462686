/* test_registry.c - the kernel registry: registration rules, lookups, unregistering, messages,
 * and the small helpers of md/kernel.h (operation names, type sizes, md_kernel_fail). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ktest.h"

static void noop_run(const md_kernel_call *c, md_kernel_status *st) {
  (void)c;
  (void)st;
}

static md_kernel_def user_def(const char *name, const char *platform) {
  md_kernel_def d = {.struct_size = sizeof d, .name = name, .platform = platform,
                     .min_inputs = 1, .max_inputs = 1, .n_outputs = 1, .run = noop_run};
  return d;
}

static const char *const builtin_names[] = {"ADD", "SUB", "MUL", "RELU", "FULLY_CONNECTED",
                                            "SOFTMAX", "RESHAPE", "CONCATENATION"};

Test(registry, builtins_found_on_host_and_sim_not_hip) {
  for (size_t i = 0; i < sizeof builtin_names / sizeof builtin_names[0]; i++) {
    for (int p = 0; p < 2; p++) {
      const char *plat = p ? "sim" : "host";
      const md_kernel_def *d = md_kernel_find(builtin_names[i], plat);
      cr_assert_not_null(d, "%s on %s", builtin_names[i], plat);
      cr_assert_str_eq(d->name, builtin_names[i]);
      cr_assert_str_eq(d->platform, plat);
      cr_assert_not_null(d->run);
      cr_assert_not_null(d->check);
      cr_assert_not_null(d->shape);
      cr_assert_eq(d->n_outputs, 1);
      cr_assert_eq(d->struct_size, sizeof(md_kernel_def));
    }
    cr_assert_null(md_kernel_find(builtin_names[i], "hip"));
  }
}

Test(registry, builtin_host_and_sim_share_functions) {
  const md_kernel_def *h = md_kernel_find("SOFTMAX", "host"), *s = md_kernel_find("SOFTMAX", "sim");
  cr_assert_neq(h, s);
  cr_assert_eq(h->run, s->run);
  cr_assert_eq(h->check, s->check);
}

Test(registry, builtin_input_ranges_match_operations) {
  cr_assert_eq(md_kernel_find("ADD", "host")->min_inputs, 3);
  cr_assert_eq(md_kernel_find("ADD", "host")->max_inputs, 3);
  cr_assert_eq(md_kernel_find("SOFTMAX", "host")->min_inputs, 2);
  cr_assert_eq(md_kernel_find("SOFTMAX", "host")->max_inputs, 3);
  cr_assert_eq(md_kernel_find("FULLY_CONNECTED", "host")->min_inputs, 4);
  cr_assert_eq(md_kernel_find("CONCATENATION", "host")->min_inputs, 2);
  cr_assert_eq(md_kernel_find("CONCATENATION", "host")->max_inputs, UINT32_MAX);
}

Test(registry, find_after_register_returns_deep_copy) {
  char name[32], plat[8];
  snprintf(name, sizeof name, "t.copy");
  snprintf(plat, sizeof plat, "host");
  char spec_name[16] = "scale";
  md_attr_spec specs[] = {{spec_name, MD_ATTR_F64, 1}, {"mode", MD_ATTR_STR, 0}};
  int token;
  md_kernel_def d = user_def(name, plat);
  d.attr_specs = specs;
  d.n_attr_specs = 2;
  d.min_inputs = 2;
  d.max_inputs = 5;
  d.user = &token;
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  /* The caller's strings may change or go away after registration. */
  strcpy(name, "t.XXXX");
  strcpy(plat, "sim");
  strcpy(spec_name, "bogus");
  const md_kernel_def *f = md_kernel_find("t.copy", "host");
  cr_assert_not_null(f);
  cr_assert_str_eq(f->name, "t.copy");
  cr_assert_str_eq(f->platform, "host");
  cr_assert_eq(f->n_attr_specs, 2);
  cr_assert_str_eq(f->attr_specs[0].name, "scale");
  cr_assert_eq(f->attr_specs[0].kind, MD_ATTR_F64);
  cr_assert_eq(f->attr_specs[0].required, 1);
  cr_assert_str_eq(f->attr_specs[1].name, "mode");
  cr_assert_eq(f->min_inputs, 2);
  cr_assert_eq(f->max_inputs, 5);
  cr_assert_eq(f->run, noop_run);
  cr_assert_eq(f->user, &token);
  cr_assert_null(md_kernel_find("t.XXXX", "sim"));
  cr_assert_null(md_kernel_find("t.copy", "sim"));
}

Test(registry, duplicate_rejected) {
  md_kernel_def d = user_def("t.dup", "host");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(),
                   "kernel \"t.dup\" on platform \"host\": already registered");
}

Test(registry, duplicate_of_builtin_rejected) {
  md_kernel_def d = user_def("ADD", "sim");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(),
                   "kernel \"ADD\" on platform \"sim\": already registered");
}

Test(registry, same_name_on_another_platform_allowed) {
  md_kernel_def d = user_def("t.plat", "host");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  d.platform = "hip";
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  cr_assert_neq(md_kernel_find("t.plat", "host"), md_kernel_find("t.plat", "hip"));
  d = user_def("ADD", "hip"); /* a backend's own built-in name on its platform */
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
}

Test(registry, unknown_platform_rejected) {
  md_kernel_def d = user_def("t.gpu", "cuda");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(),
                   "kernel \"t.gpu\" on platform \"cuda\": unknown platform") != NULL, "%s",
            md_kernel_registry_error());
  cr_assert_null(md_kernel_find("t.gpu", "cuda"));
}

/* Each case breaks one field of a valid definition. */
/* Parameters are copied into each test's process: strings are arrays, not pointers. */
typedef struct bad_def_case {
  int which;
  char want[96];
} bad_def_case;

static void break_def(md_kernel_def *d, md_attr_spec *specs, int which) {
  switch (which) {
  case 0: d->name = NULL; break;
  case 1: d->name = ""; break;
  case 2: d->platform = NULL; break;
  case 3: d->platform = ""; break;
  case 4: d->run = NULL; break;
  case 5: d->struct_size = sizeof *d - 8; break;
  case 6: d->min_inputs = 3; d->max_inputs = 2; break;
  case 7: d->n_outputs = 0; break;
  case 8: d->attr_specs = NULL; d->n_attr_specs = 1; break;
  case 9: specs[1].name = ""; break;
  case 10: specs[1].name = "a"; break;
  case 11: specs[1].kind = (md_attr_kind)9; break;
  case 12: specs[0].name = NULL; break;
  }
}

ParameterizedTestParameters(registry, invalid_definition_rejected_with_message) {
  static bad_def_case cases[] = {
      {0, "kernel definition: name is NULL"},
      {1, "kernel definition: name is empty"},
      {2, "kernel \"t.bad\": platform is NULL"},
      {3, "kernel \"t.bad\": platform is empty"},
      {4, "kernel \"t.bad\" on platform \"host\": run is NULL"},
      {5, "struct_size"},
      {6, "min_inputs 3 > max_inputs 2"},
      {7, "n_outputs is 0"},
      {8, "attr_specs is NULL but n_attr_specs is 1"},
      {9, "attribute spec 1: name is empty"},
      {10, "attribute spec 1 (\"a\"): name repeats spec 0"},
      {11, "attribute spec 1 (\"b\"): unknown kind 9"},
      {12, "attribute spec 0: name is NULL"},
  };
  return cr_make_param_array(bad_def_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_def_case *c, registry, invalid_definition_rejected_with_message) {
  md_attr_spec specs[] = {{"a", MD_ATTR_I64, 0}, {"b", MD_ATTR_F64, 1}};
  md_kernel_def d = user_def("t.bad", "host");
  d.attr_specs = specs;
  d.n_attr_specs = 2;
  break_def(&d, specs, c->which);
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT, "case %d", c->which);
  cr_assert(strstr(md_kernel_registry_error(), c->want) != NULL, "case %d: \"%s\" lacks \"%s\"",
            c->which, md_kernel_registry_error(), c->want);
  cr_assert_null(md_kernel_find("t.bad", "host"));
}

Test(registry, null_definition_rejected) {
  cr_assert_eq(md_kernel_register(NULL), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(), "kernel definition is NULL");
}

Test(registry, overlong_name_rejected) {
  char name[300];
  memset(name, 'k', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  md_kernel_def d = user_def(name, "host");
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "longer than 255") != NULL);
}

Test(registry, larger_struct_size_accepted) {
  md_kernel_def d = user_def("t.future", "host");
  d.struct_size = sizeof d + 16; /* a newer caller; only the known fields are read */
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  cr_assert_eq(md_kernel_find("t.future", "host")->struct_size, sizeof d);
}

Test(registry, unregister_hides_user_kernel_but_keeps_definition) {
  md_kernel_def d = user_def("t.gone", "host");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  const md_kernel_def *held = md_kernel_find("t.gone", "host");
  cr_assert_not_null(held);
  cr_assert_eq(md_kernel_unregister("t.gone", "host"), MD_NONE);
  cr_assert_null(md_kernel_find("t.gone", "host"));
  /* A prepared model holding the definition can still use it. */
  cr_assert_str_eq(held->name, "t.gone");
  cr_assert_eq(held->run, noop_run);
  /* A second unregister finds nothing; registering the name again works. */
  cr_assert_eq(md_kernel_unregister("t.gone", "host"), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(),
                   "kernel \"t.gone\" on platform \"host\": not registered");
  cr_assert_eq(md_kernel_register(&d), MD_NONE, "%s", md_kernel_registry_error());
  const md_kernel_def *again = md_kernel_find("t.gone", "host");
  cr_assert_not_null(again);
  cr_assert_neq(again, held);
}

Test(registry, unregister_builtin_rejected) {
  cr_assert_eq(md_kernel_unregister("ADD", "host"), MD_INVALID_ARGUMENT);
  cr_assert_str_eq(md_kernel_registry_error(),
                   "kernel \"ADD\" on platform \"host\": built-in kernels cannot be unregistered");
  cr_assert_not_null(md_kernel_find("ADD", "host"));
  cr_assert_eq(md_kernel_unregister("RELU", "sim"), MD_INVALID_ARGUMENT);
  cr_assert_not_null(md_kernel_find("RELU", "sim"));
}

Test(registry, unregister_absent_or_null_rejected) {
  cr_assert_eq(md_kernel_unregister("t.never", "host"), MD_INVALID_ARGUMENT);
  cr_assert(strstr(md_kernel_registry_error(), "not registered") != NULL);
  cr_assert_eq(md_kernel_unregister(NULL, "host"), MD_INVALID_ARGUMENT);
  cr_assert_eq(md_kernel_unregister("ADD", NULL), MD_INVALID_ARGUMENT);
}

Test(registry, find_with_null_or_unknown_key_returns_null) {
  cr_assert_null(md_kernel_find(NULL, "host"));
  cr_assert_null(md_kernel_find("ADD", NULL));
  cr_assert_null(md_kernel_find("ADD", "cuda"));
  cr_assert_null(md_kernel_find("add", "host"));
  cr_assert_null(md_kernel_find("", "host"));
}

static void *fail_in_thread(void *arg) {
  (void)arg;
  md_kernel_def d = user_def("t.thread", "nowhere");
  md_kernel_register(&d);
  return (void *)strstr(md_kernel_registry_error(), "nowhere");
}

Test(registry, error_message_is_per_thread_and_never_null) {
  cr_assert_not_null(md_kernel_registry_error());
  md_kernel_def d = user_def("t.main", "host");
  cr_assert_eq(md_kernel_register(&d), MD_NONE);
  cr_assert_eq(md_kernel_register(&d), MD_INVALID_ARGUMENT);
  char before[256];
  snprintf(before, sizeof before, "%s", md_kernel_registry_error());
  pthread_t t;
  void *found;
  pthread_create(&t, NULL, fail_in_thread, NULL);
  pthread_join(t, &found);
  cr_assert_not_null(found, "the other thread saw its own message");
  cr_assert_str_eq(md_kernel_registry_error(), before);
}

/* ---- md_operation_name, md_operand_type_size, md_kernel_fail -------------------------- */

typedef struct op_name_case {
  md_operation_type type;
  char name[24]; /* "": none */
} op_name_case;

ParameterizedTestParameters(kernel_api, operation_name_table) {
  static op_name_case cases[] = {
      {MD_OP_ADD, "ADD"},         {MD_OP_CONCATENATION, "CONCATENATION"},
      {MD_OP_FULLY_CONNECTED, "FULLY_CONNECTED"}, {MD_OP_MUL, "MUL"},
      {MD_OP_RELU, "RELU"},       {MD_OP_RESHAPE, "RESHAPE"},
      {MD_OP_SOFTMAX, "SOFTMAX"}, {MD_OP_SUB, "SUB"},
      {MD_OP_CUSTOM, ""},         {(md_operation_type)1, ""},
      {(md_operation_type)-1, ""},
  };
  return cr_make_param_array(op_name_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(op_name_case *c, kernel_api, operation_name_table) {
  const char *got = md_operation_name(c->type);
  if (!c->name[0]) cr_assert_null(got, "type %d", (int)c->type);
  else cr_assert_str_eq(got, c->name);
}

Test(kernel_api, operation_names_resolve_to_builtin_kernels) {
  const md_operation_type ops[] = {MD_OP_ADD, MD_OP_CONCATENATION, MD_OP_FULLY_CONNECTED,
                                   MD_OP_MUL, MD_OP_RELU, MD_OP_RESHAPE, MD_OP_SOFTMAX,
                                   MD_OP_SUB};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    cr_assert_not_null(md_kernel_find(md_operation_name(ops[i]), "sim"));
}

typedef struct type_size_case {
  md_operand_type type;
  size_t size;
} type_size_case;

ParameterizedTestParameters(kernel_api, operand_type_size_table) {
  static type_size_case cases[] = {
      {MD_FLOAT32, 4},          {MD_INT32, 4},           {MD_UINT32, 4},
      {MD_TENSOR_FLOAT32, 4},   {MD_TENSOR_INT32, 4},    {MD_TENSOR_FLOAT16, 2},
      {MD_BOOL, 1},             {MD_TENSOR_QUANT8_ASYMM, 1},
      {MD_TENSOR_QUANT8_ASYMM_SIGNED, 1},               {(md_operand_type)7, 0},
      {(md_operand_type)99, 0}, {(md_operand_type)-3, 0},
  };
  return cr_make_param_array(type_size_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(type_size_case *c, kernel_api, operand_type_size_table) {
  cr_assert_eq(md_operand_type_size(c->type), c->size, "type %d", (int)c->type);
}

Test(kernel_api, kernel_fail_formats_and_returns_code) {
  md_kernel_status st = {0};
  cr_assert_eq(md_kernel_fail(&st, MD_INVALID_ARGUMENT, "input %d is %s", 2, "bad"),
               MD_INVALID_ARGUMENT);
  cr_assert_eq(st.code, MD_INVALID_ARGUMENT);
  cr_assert_str_eq(st.message, "input 2 is bad");
}

Test(kernel_api, kernel_fail_none_becomes_general_failure) {
  md_kernel_status st = {0};
  cr_assert_eq(md_kernel_fail(&st, MD_NONE, "oops"), MD_GENERAL_FAILURE);
  cr_assert_eq(st.code, MD_GENERAL_FAILURE);
  cr_assert_str_eq(st.message, "oops");
  cr_assert_eq(md_kernel_fail(NULL, MD_NONE, "x"), MD_GENERAL_FAILURE);
}

Test(kernel_api, kernel_fail_truncates_long_message) {
  md_kernel_status st = {0};
  char big[600];
  memset(big, 'm', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  md_kernel_fail(&st, MD_GENERAL_FAILURE, "%s", big);
  cr_assert_eq(strlen(st.message), MD_KERNEL_MESSAGE_MAX - 1);
}
