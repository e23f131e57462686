/* test_config.c - the open_device configuration string (md/config.h): parsing, the canonical
 * form, merging, and open_device using the same parser. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "md/config.h"

Test(config, null_and_empty_give_defaults) {
  md_config c;
  char err[256];
  cr_assert_eq(md_config_parse(NULL, &c, err, sizeof err), MD_NONE);
  cr_assert_str_eq(c.backend, "auto");
  cr_assert_eq(c.mem_limit, 0u);
  cr_assert_not(c.has_seed);
  cr_assert_eq(c.given, 0u);
  cr_assert_eq(md_config_parse("", &c, err, sizeof err), MD_NONE);
  cr_assert_eq(md_config_parse(" ; ;", &c, err, sizeof err), MD_NONE);
  cr_assert_eq(c.given, 0u);
}

Test(config, every_key_is_parsed) {
  md_config c;
  char err[256];
  cr_assert_eq(md_config_parse(" backend = sim ;mem_limit=64M;seed=42;faults=alloc_fail@2;latency_ns=1000;copy_gbps=2.5;init_ns=7",
                               &c, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_str_eq(c.backend, "sim");
  cr_assert_eq(c.mem_limit, 64ull << 20);
  cr_assert(c.has_seed);
  cr_assert_eq(c.seed, 42u);
  cr_assert_str_eq(c.faults, "alloc_fail@2");
  cr_assert_eq(c.latency_ns, 1000u);
  cr_assert_eq(c.copy_gbps, 2.5);
  cr_assert_eq(c.init_ns, 7u);
  cr_assert_eq(c.given, (1u << MD_CONFIG_KEY_COUNT) - 1);
}

Test(config, numbers_are_decimal_or_hex_and_only_sizes_take_suffixes) {
  md_config c;
  char err[256];
  cr_assert_eq(md_config_parse("seed=0x10;mem_limit=0x100000;latency_ns=0X20", &c, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(c.seed, 16u);
  cr_assert_eq(c.mem_limit, 1u << 20);
  cr_assert_eq(c.latency_ns, 32u);
  cr_assert_eq(md_config_parse("mem_limit=2k", &c, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(c.mem_limit, 2048u);
  /* A seed is a number, not a size: 1K would be stored as 1 by one reader and 1024 by another. */
  cr_assert_eq(md_config_parse("seed=1K", &c, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_assert(strstr(err, "seed '1K'"), "%s", err);
}

/* A fault plan longer than md_config holds is refused, not cut (a cut plan is another plan). */
Test(config, a_fault_plan_too_long_to_keep_is_refused) {
  char text[400] = "faults=";
  while (strlen(text) < 300) strcat(text, "stall@1,");
  strcat(text, "stall@2");
  md_config c;
  char err[256] = "";
  cr_assert_eq(md_config_parse(text, &c, err, sizeof err), MD_INVALID_ARGUMENT);
  cr_assert(strstr(err, "'faults' is too long"), "%s", err);
  text[200] = '\0';
  text[199] = '1';
  cr_assert_eq(md_config_parse(text, &c, err, sizeof err), MD_NONE, "%s", err);
  cr_assert_eq(strlen(c.faults), 200 - strlen("faults="));
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
    {"mem_limit=0x", "mem_limit '0x'"},
    {"seed=abc", "seed 'abc'"},
    {"seed=-1", "seed '-1'"},
    {"seed= 7 8", "seed '7 8'"},
    {"latency_ns=-1", "latency_ns '-1'"},
    {"copy_gbps=0", "copy_gbps '0'"},
    {"copy_gbps=fast", "copy_gbps 'fast'"},
    {"init_ns=soon", "init_ns 'soon'"},
    {"backend", "'backend' is not key=value"},
    {"seed=1;seed=2", "key 'seed' given twice"},
};
ParameterizedTestParameters(config, bad_text_is_invalid_argument_naming_it) {
  return cr_make_param_array(struct bad, bads, sizeof bads / sizeof bads[0]);
}
ParameterizedTest(struct bad *b, config, bad_text_is_invalid_argument_naming_it) {
  md_config c;
  char err[256] = "";
  cr_assert_eq(md_config_parse(b->text, &c, err, sizeof err), MD_INVALID_ARGUMENT, "%s", b->text);
  cr_assert(strstr(err, b->needle), "'%s': message '%s' lacks '%s'", b->text, err, b->needle);
}

Test(config, canonical_form_lists_the_given_keys_in_table_order_in_decimal) {
  md_config c;
  char err[256], buf[256];
  cr_assert_eq(md_config_parse(" seed = 0x10 ; backend=sim;faults=kernel_fail@2 ", &c, err, sizeof err), MD_NONE);
  cr_assert_eq(md_config_format(&c, buf, sizeof buf), strlen("backend=sim;seed=16;faults=kernel_fail@2"));
  cr_assert_str_eq(buf, "backend=sim;seed=16;faults=kernel_fail@2");
  /* The canonical text parses to the same configuration. */
  md_config d;
  cr_assert_eq(md_config_parse(buf, &d, err, sizeof err), MD_NONE);
  cr_assert_eq(d.seed, c.seed);
  cr_assert_eq(d.given, c.given);
  /* A short buffer is cut and the needed length still returned. */
  char tiny[8];
  cr_assert_eq(md_config_format(&c, tiny, sizeof tiny), strlen(buf));
  cr_assert_str_eq(tiny, "backend");
  md_config none;
  md_config_parse(NULL, &none, err, sizeof err);
  cr_assert_eq(md_config_format(&none, buf, sizeof buf), 0u);
  cr_assert_str_eq(buf, "");
}

Test(config, merge_keeps_the_base_keys_and_adds_the_others_verbatim) {
  char out[256];
  md_config_merge("faults=alloc_fail@2; backend=sim", "backend=hip;seed=3;frob=1", out, sizeof out);
  cr_assert_str_eq(out, "faults=alloc_fail@2;backend=sim;seed=3;frob=1");
  md_config_merge(NULL, "backend=auto", out, sizeof out);
  cr_assert_str_eq(out, "backend=auto");
  md_config_merge("seed=1;;", NULL, out, sizeof out);
  cr_assert_str_eq(out, "seed=1");
  cr_assert(md_config_has("a=1; seed =2", "seed"));
  cr_assert_not(md_config_has("seeds=2", "seed"));
  md_config_without("backend=sim;seed=1; backend = hip", "backend", out, sizeof out);
  cr_assert_str_eq(out, "seed=1");
}

Test(config, open_device_uses_the_same_parser) {
  const md_driver *drv = md_driver_entry(MD_DRIVER_ABI_VERSION);
  md_device *dev = (md_device *)1;
  cr_assert_eq(drv->open_device("backend=sim;bogus=1", &dev), MD_INVALID_ARGUMENT);
  cr_assert_null(dev);
  cr_assert(strstr(drv->last_error(NULL), "unknown key 'bogus'"));
  cr_assert_eq(drv->open_device("backend=sim;seed=1K", &dev), MD_INVALID_ARGUMENT);
  cr_assert(strstr(drv->last_error(NULL), "seed '1K'"), "%s", drv->last_error(NULL));
  cr_assert_eq(drv->open_device("backend=sim;seed=0x10", &dev), MD_NONE, "%s", drv->last_error(NULL));
  drv->close_device(dev);
}
