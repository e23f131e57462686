/* driver_id.c - what identifies the build of a driver a run judged and the traces it ran: the
 * driver file's GNU build-id (read from its ELF notes with <elf.h>, no libelf), its SHA-256
 * (libsodium, which the engine already links for sidecar blobs), and the selection hash of a
 * run's case names. A name and a version string say what a vendor called a build; these say
 * which bytes ran. */
#include "driver_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void to_hex(const unsigned char *b, size_t n, char *hex, size_t hexlen) {
  static const char digits[] = "0123456789abcdef";
  size_t k = 0;
  for (size_t i = 0; i < n && k + 2 < hexlen; i++) {
    hex[k++] = digits[b[i] >> 4];
    hex[k++] = digits[b[i] & 15];
  }
  if (hexlen) hex[k] = 0;
}

/* Thread-safe (libsodium's hash has no global state). */
void mdc_cli__sha256_hex(const void *data, size_t n, char hex[MDC_SHA256_HEX]) {
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(d, data, n);
  to_hex(d, sizeof d, hex, MDC_SHA256_HEX);
}

/* Reads the file once, in 64 KiB blocks; thread-safe. */
int mdc_cli__file_sha256(const char *path, char hex[MDC_SHA256_HEX]) {
  hex[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  unsigned char buf[65536];
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    crypto_hash_sha256_update(&st, buf, (unsigned long long)got);
  }
  close(fd);
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, d);
  to_hex(d, sizeof d, hex, MDC_SHA256_HEX);
  return 0;
}

/* ---- ELF notes ---- */

typedef struct elf_file {
  int fd;
  int is64, big;
} elf_file;

static uint64_t get(const elf_file *e, const unsigned char *p, int size) {
  uint64_t v = 0;
  for (int i = 0; i < size; i++) v |= (uint64_t)p[e->big ? size - 1 - i : i] << (8 * i);
  return v;
}

static int read_at(const elf_file *e, void *buf, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(e->fd, (char *)buf + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

/* Notes of one PT_NOTE segment or SHT_NOTE section: 1 and hex filled when it holds the GNU
 * build-id, else 0. The notes are capped at 1 MiB (a build-id note is a few dozen bytes). */
static int scan_notes(const elf_file *e, uint64_t off, uint64_t size, uint64_t align, char *hex, size_t hexlen) {
  if (size < 12 || size > (1u << 20)) return 0;
  unsigned char *b = malloc(size);
  if (!b) return 0;
  int found = 0;
  uint64_t a = align == 8 ? 8 : 4; /* .note.gnu.property of 64-bit files is 8-aligned */
  if (read_at(e, b, size, off) == 0) {
    for (uint64_t p = 0; p + 12 <= size && !found;) {
      uint64_t namesz = get(e, b + p, 4), descsz = get(e, b + p + 4, 4), type = get(e, b + p + 8, 4);
      uint64_t name_at = p + 12, desc_at = name_at + ((namesz + a - 1) & ~(a - 1));
      uint64_t next = desc_at + ((descsz + a - 1) & ~(a - 1));
      if (namesz > size || descsz > size || desc_at + descsz > size || next <= p) break;
      if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(b + name_at, "GNU", 4) == 0 && descsz > 0 && descsz <= 64) {
        to_hex(b + desc_at, (size_t)descsz, hex, hexlen);
        found = 1;
      }
      p = next;
    }
  }
  free(b);
  return found;
}

/* Reads only headers and notes (pread), never maps the file; thread-safe. */
int mdc_cli__elf_build_id(const char *path, char *hex, size_t hexlen) {
  if (hexlen) hex[0] = 0;
  elf_file e = {.fd = open(path, O_RDONLY | O_CLOEXEC)};
  if (e.fd < 0) return -1;
  unsigned char h[64];
  int ret = -1;
  if (read_at(&e, h, EI_NIDENT, 0) != 0 || memcmp(h, ELFMAG, SELFMAG) != 0 ||
      (h[EI_CLASS] != ELFCLASS32 && h[EI_CLASS] != ELFCLASS64) ||
      (h[EI_DATA] != ELFDATA2LSB && h[EI_DATA] != ELFDATA2MSB))
    goto out;
  e.is64 = h[EI_CLASS] == ELFCLASS64;
  e.big = h[EI_DATA] == ELFDATA2MSB;
  if (read_at(&e, h, e.is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr), 0) != 0) goto out;
  ret = 1;
  /* Offsets in Elf32_Ehdr / Elf64_Ehdr: e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum. */
  uint64_t phoff = e.is64 ? get(&e, h + 32, 8) : get(&e, h + 28, 4);
  uint64_t shoff = e.is64 ? get(&e, h + 40, 8) : get(&e, h + 32, 4);
  uint64_t phentsize = get(&e, h + (e.is64 ? 54 : 42), 2), phnum = get(&e, h + (e.is64 ? 56 : 44), 2);
  uint64_t shentsize = get(&e, h + (e.is64 ? 58 : 46), 2), shnum = get(&e, h + (e.is64 ? 60 : 48), 2);
  unsigned char ent[64];
  if (phoff && phentsize >= (e.is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) && phentsize <= sizeof ent) {
    for (uint64_t i = 0; i < phnum; i++) {
      if (read_at(&e, ent, (size_t)phentsize, phoff + i * phentsize) != 0) break;
      if (get(&e, ent, 4) != PT_NOTE) continue;
      uint64_t off = e.is64 ? get(&e, ent + 8, 8) : get(&e, ent + 4, 4);
      uint64_t sz = e.is64 ? get(&e, ent + 32, 8) : get(&e, ent + 16, 4);
      uint64_t al = e.is64 ? get(&e, ent + 48, 8) : get(&e, ent + 28, 4);
      if (scan_notes(&e, off, sz, al, hex, hexlen)) {
        ret = 0;
        goto out;
      }
    }
  }
  /* No program headers (a relocatable object) or no note segment: the sections. */
  if (shoff && shentsize >= (e.is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)) && shentsize <= sizeof ent) {
    for (uint64_t i = 0; i < shnum; i++) {
      if (read_at(&e, ent, (size_t)shentsize, shoff + i * shentsize) != 0) break;
      if (get(&e, ent + 4, 4) != SHT_NOTE) continue;
      uint64_t off = e.is64 ? get(&e, ent + 24, 8) : get(&e, ent + 16, 4);
      uint64_t sz = e.is64 ? get(&e, ent + 32, 8) : get(&e, ent + 20, 4);
      uint64_t al = e.is64 ? get(&e, ent + 48, 8) : get(&e, ent + 32, 4);
      if (scan_notes(&e, off, sz, al, hex, hexlen)) {
        ret = 0;
        goto out;
      }
    }
  }
out:
  close(e.fd);
  return ret;
}

/* ---- the selection ---- */

static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sorts a copy of the pointers; thread-safe. */
int mdc_cli__selection_hash(const char *const *names, size_t n, char hex[MDC_SHA256_HEX], size_t *n_out) {
  hex[0] = 0;
  if (n_out) *n_out = 0;
  const char **v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return -1;
  memcpy(v, names, n * sizeof *v);
  qsort(v, n, sizeof *v, str_cmp);
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++) {
    if (i && strcmp(v[i], v[i - 1]) == 0) continue;
    crypto_hash_sha256_update(&st, (const unsigned char *)v[i], strlen(v[i]));
    crypto_hash_sha256_update(&st, (const unsigned char *)"\n", 1);
    distinct++;
  }
  free(v);
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, d);
  to_hex(d, sizeof d, hex, MDC_SHA256_HEX);
  if (n_out) *n_out = distinct;
  return 0;
}

/* ---- the driver a probe loaded ---- */

/* Runs in the probe's child, after the driver loaded: the file is the one the dynamic linker
 * mapped (dlinfo of its handle; for the reference driver linked into mdc, dl is NULL and the file
 * is the shared object holding addr, its table: the libmd_driver.so mdc links, see
 * `mdc --version`), made absolute. */
void mdc_cli__driver_identify(const void *addr, void *dl, char *file, size_t filelen, char build_id[MDC_BUILD_ID_HEX],
                              char sha256[MDC_SHA256_HEX]) {
  const char *name = NULL;
  struct link_map *lm = NULL;
  Dl_info info;
  if (filelen) file[0] = 0;
  build_id[0] = sha256[0] = 0;
  if (dl && dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) name = lm->l_name;
  else if (!dl && addr && dladdr(addr, &info) && info.dli_fname && info.dli_fname[0]) name = info.dli_fname;
  if (!name) return;
  char abs[PATH_MAX];
  const char *p = realpath(name, abs) ? abs : name;
  size_t n = strlen(p);
  if (n >= filelen) return; /* a path longer than the caller holds: identity unknown */
  memcpy(file, p, n + 1);
  mdc_cli__elf_build_id(file, build_id, MDC_BUILD_ID_HEX);
  mdc_cli__file_sha256(file, sha256);
}
