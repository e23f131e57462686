/* test_config.c - the open_device configuration string. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "error.h"
#include "runtime_int.h"

Test(config, null_and_empty_give_defaults) {
  md__config c;
  cr_assert_eq(md__config_parse(NULL, &c), MD_NONE);
  cr_assert_str_eq(c.backend, "auto");
  cr_assert_eq(c.mem_limit, 0u);
  cr_assert_not(c.has_seed);
  cr_assert_eq(md__config_parse("", &c), MD_NONE);
  cr_assert_eq(md__config_parse(" ; ;", &c), MD_NONE);
}

Test(config, every_key_is_parsed) {
  md__config c;
  cr_assert_eq(md__config_parse(" backend = sim ;mem_limit=64M;seed=42;faults=alloc_fail@2;latency_ns=1000;", &c), MD_NONE);
  cr_assert_str_eq(c.backend, "sim");
  cr_assert_eq(c.mem_limit, 64ull << 20);
  cr_assert(c.has_seed);
  cr_assert_eq(c.seed, 42u);
  cr_assert_str_eq(c.faults, "alloc_fail@2");
  cr_assert_eq(c.latency_ns, 1000u);
}

struct bad { char text[64]; char needle[48]; };  /* inline: Criterion copies parameters to another process */
static struct bad bads[] = {
    {"colour=red", "unknown key 'colour'"},
    {"backend=tpu", "backend 'tpu'"},
    {"mem_limit=-5", "mem_limit '-5'"},
    {"mem_limit=0", "mem_limit '0'"},
    {"mem_limit=12X", "mem_limit '12X'"},
    {"mem_limit=99999999999999999999", "mem_limit"},
    {"mem_limit=17179869184G", "mem_limit"},
    {"seed=abc", "seed 'abc'"},
    {"latency_ns=-1", "latency_ns '-1'"},
    {"backend", "'backend' is not key=value"},
    {"seed=1;seed=2", "key 'seed' given twice"},
};
ParameterizedTestParameters(config, bad_text_is_invalid_argument_naming_it) {
  return cr_make_param_array(struct bad, bads, sizeof bads / sizeof bads[0]);
}
ParameterizedTest(struct bad *b, config, bad_text_is_invalid_argument_naming_it) {
  md__config c;
  cr_assert_eq(md__config_parse(b->text, &c), MD_INVALID_ARGUMENT, "%s", b->text);
  cr_assert(strstr(md__last_error(), b->needle), "'%s': message '%s' lacks '%s'", b->text, md__last_error(), b->needle);
}

Test(config, open_device_rejects_unknown_key_by_name) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = (md_device *)1;
  cr_assert_eq(drv->open_device("backend=sim;bogus=1", &dev), MD_INVALID_ARGUMENT);
  cr_assert_null(dev);
  cr_assert(strstr(drv->last_error(NULL), "unknown key 'bogus'"));
}
