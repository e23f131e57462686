/* fuzz_instr.c - `mdc fuzz`: whether a driver is instrumented for coverage, read from its ELF
 * symbol tables and section names without loading it (an AFL++-instrumented library refers to
 * symbols only a fuzz target defines). AFL++ leaves __afl_area_ptr (afl-clang-fast, every mode)
 * or __afl_prev_loc; SanitizerCoverage (libFuzzer's -fsanitize=fuzzer-no-link, clang's
 * -fsanitize-coverage=trace-pc-guard) leaves __sanitizer_cov_* callbacks and the __sancov_guards
 * or __sancov_cntrs sections (and their __start_ symbols). */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_int.h"

/* The marks, in the order they are reported: the first found names the instrumentation. */
static const struct {
  const char *name;   /* a symbol, or a section with a leading '.'-less name */
  int section;
  const char *kind;
} marks[] = {
    {"__afl_area_ptr", 0, "afl"},
    {"__afl_prev_loc", 0, "afl"},
    {"__sanitizer_cov_trace_pc_guard", 0, "sancov"},
    {"__sanitizer_cov_8bit_counters_init", 0, "sancov"},
    {"__sanitizer_cov_pcs_init", 0, "sancov"},
    {"__start___sancov_guards", 0, "sancov"},
    {"__start___sancov_cntrs", 0, "sancov"},
    {"__sancov_guards", 1, "sancov"},
    {"__sancov_cntrs", 1, "sancov"},
};
#define N_MARKS (sizeof marks / sizeof marks[0])

static int in_file(const unsigned char *p, size_t len, size_t off, size_t n) { return off <= len && n <= len - off; }

int mdc_cli__fuzz_instrumentation(const char *path, char *kind, size_t kindlen, char *mark, size_t marklen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    close(fd);
    return -1;
  }
  size_t len = (size_t)st.st_size;
  const unsigned char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return -1;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
  int rc = -1;
  size_t found = N_MARKS;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_file(p, len, eh->e_shoff, (size_t)eh->e_shnum * sizeof(Elf64_Shdr)))
    goto out;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(p + eh->e_shoff);
  const Elf64_Shdr *shstr = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : NULL;
  rc = 0;
  for (size_t i = 0; i < eh->e_shnum; i++) {
    /* section names */
    if (shstr && in_file(p, len, shstr->sh_offset, shstr->sh_size) && sh[i].sh_name < shstr->sh_size) {
      const char *nm = (const char *)p + shstr->sh_offset + sh[i].sh_name;
      size_t room = shstr->sh_size - sh[i].sh_name;
      for (size_t k = 0; k < found; k++)
        if (marks[k].section && strnlen(nm, room) == strlen(marks[k].name) && !strcmp(nm, marks[k].name)) found = k;
    }
    /* symbols of .dynsym and .symtab, names in their linked string table */
    if ((sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB) || sh[i].sh_link >= eh->e_shnum ||
        sh[i].sh_entsize != sizeof(Elf64_Sym) || !in_file(p, len, sh[i].sh_offset, sh[i].sh_size))
      continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (!in_file(p, len, str->sh_offset, str->sh_size)) continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)(p + sh[i].sh_offset);
    for (size_t s = 0; s < sh[i].sh_size / sizeof(Elf64_Sym); s++) {
      if (sym[s].st_name >= str->sh_size) continue;
      const char *nm = (const char *)p + str->sh_offset + sym[s].st_name;
      size_t room = str->sh_size - sym[s].st_name;
      if (nm[0] != '_' || strnlen(nm, room) == room) continue;
      for (size_t k = 0; k < found; k++)
        if (!marks[k].section && !strcmp(nm, marks[k].name)) found = k;
    }
  }
  if (found < N_MARKS) {
    snprintf(kind, kindlen, "%s", marks[found].kind);
    snprintf(mark, marklen, "%s%s", marks[found].section ? "section " : "", marks[found].name);
    rc = 1;
  }
out:
  munmap((void *)p, len);
  return rc;
}
