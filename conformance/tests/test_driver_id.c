/* test_driver_id.c - conformance/mdc/driver_id.c on its own: SHA-256 against the FIPS 180-4
 * examples (one and two blocks, the empty message, a million 'a' read from a file in blocks),
 * the GNU build-id of a shared object against what readelf reads, an ELF file without one and a
 * file that is not ELF, and the selection hash (order and duplicates do not matter, a name
 * does). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver_id.h"

static char tmp_dir[64];

static void setup(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/mdc-driver-id-XXXXXX");
  cr_assert(mkdtemp(tmp_dir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(driver_id, .init = setup, .fini = teardown);

Test(driver_id, sha256_gives_the_fips_180_4_digests) {
  char hex[MDC_SHA256_HEX];
  mdc_cli__sha256_hex("abc", 3, hex);
  cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  mdc_cli__sha256_hex("", 0, hex);
  cr_expect_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  mdc_cli__sha256_hex(two, strlen(two), hex);
  cr_expect_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(driver_id, a_file_is_hashed_whole_across_read_blocks) {
  char path[128];
  snprintf(path, sizeof path, "%s/million-a", tmp_dir);
  FILE *f = fopen(path, "w");
  for (int i = 0; i < 1000000; i++) fputc('a', f);
  fclose(f);
  char hex[MDC_SHA256_HEX];
  cr_assert_eq(mdc_cli__file_sha256(path, hex), 0);
  cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  cr_expect_eq(mdc_cli__file_sha256("/nonexistent/file", hex), -1);
  cr_expect_str_eq(hex, "");
}

/* readelf's reading of the build-id of so (NULL when readelf is not there). */
static char *readelf_build_id(const char *so) {
  char cmd[1024], line[256] = "";
  snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null | sed -n 's/.*Build ID: *//p'", so);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char *got = fgets(line, sizeof line, p);
  pclose(p);
  if (!got || !line[0]) return NULL;
  line[strcspn(line, "\n")] = 0;
  return strdup(line);
}

Test(driver_id, the_build_id_is_the_one_readelf_reads) {
  char *want = readelf_build_id(MDC_TEST_REF_SO);
  if (!want) cr_skip("readelf is not installed, or the driver has no build-id");
  char hex[MDC_BUILD_ID_HEX];
  cr_expect_eq(mdc_cli__elf_build_id(MDC_TEST_REF_SO, hex, sizeof hex), 0);
  cr_expect_str_eq(hex, want);
  free(want);
}

Test(driver_id, no_build_id_and_not_elf_are_told_apart) {
  char stripped[128], cmd[512], hex[MDC_BUILD_ID_HEX];
  snprintf(stripped, sizeof stripped, "%s/no-id.so", tmp_dir);
  snprintf(cmd, sizeof cmd, "objcopy --remove-section .note.gnu.build-id '%s' '%s' 2>/dev/null", MDC_TEST_REF_SO,
           stripped);
  if (system(cmd) == 0) {
    cr_expect_eq(mdc_cli__elf_build_id(stripped, hex, sizeof hex), 1, "ELF without a build-id note");
    cr_expect_str_eq(hex, "");
  }
  char text[128];
  snprintf(text, sizeof text, "%s/not-elf", tmp_dir);
  FILE *f = fopen(text, "w");
  fputs("\x7f" "ELX this is not an ELF file at all, only text\n", f);
  fclose(f);
  cr_expect_eq(mdc_cli__elf_build_id(text, hex, sizeof hex), -1);
  cr_expect_eq(mdc_cli__elf_build_id("/nonexistent", hex, sizeof hex), -1);
}

Test(driver_id, the_selection_is_the_set_of_names) {
  const char *a[] = {"tokens/b", "basic/a", "tokens/c"}, *b[] = {"tokens/c", "basic/a", "tokens/b", "basic/a"},
             *c[] = {"tokens/b", "basic/a"};
  char ha[MDC_SHA256_HEX], hb[MDC_SHA256_HEX], hc[MDC_SHA256_HEX];
  size_t na, nb, nc;
  cr_assert_eq(mdc_cli__selection_hash(a, 3, ha, &na), 0);
  cr_assert_eq(mdc_cli__selection_hash(b, 4, hb, &nb), 0);
  cr_assert_eq(mdc_cli__selection_hash(c, 2, hc, &nc), 0);
  cr_expect_str_eq(ha, hb, "order and duplicates do not change the selection");
  cr_expect_eq(na, 3);
  cr_expect_eq(nb, 3);
  cr_expect_str_neq(ha, hc);
  cr_expect_eq(nc, 2);
  /* The hash is of the names sorted, each with a newline. */
  char want[MDC_SHA256_HEX];
  const char *text = "basic/a\ntokens/b\ntokens/c\n";
  mdc_cli__sha256_hex(text, strlen(text), want);
  cr_expect_str_eq(ha, want);
}
