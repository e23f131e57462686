/* driver_id.h - private to the mdc command-line tool: what identifies the driver build a run
 * judged (the file's GNU build-id and SHA-256) and the selection of traces it ran (a hash of the
 * sorted set of case names), so baselines and history compare like with like (driver_id.c). */
#ifndef MDC_DRIVER_ID_H
#define MDC_DRIVER_ID_H

#include <stddef.h>

/* Lowercase hex of a SHA-256: 64 digits and a NUL. */
#define MDC_SHA256_HEX 65
/* A GNU build-id is usually 20 bytes (sha1), at most 64 here: 128 hex digits and a NUL. */
#define MDC_BUILD_ID_HEX 129

/* SHA-256 of the file at path, streamed (libsodium), into hex. 0, or -1 (errno set; hex ""). */
int mdc_cli__file_sha256(const char *path, char hex[MDC_SHA256_HEX]);
/* SHA-256 of n bytes, into hex. Never fails. */
void mdc_cli__sha256_hex(const void *data, size_t n, char hex[MDC_SHA256_HEX]);

/* The GNU build-id of the ELF file at path (the NT_GNU_BUILD_ID note named "GNU", found through
 * the program headers' PT_NOTE segments, else the section headers' SHT_NOTE sections), as hex.
 * 0; 1 when the file is ELF but carries no build-id; -1 when it cannot be read or is not a
 * 32- or 64-bit little- or big-endian ELF file (hex "" either way). Reads only the headers and
 * notes; never maps or runs the file. */
int mdc_cli__elf_build_id(const char *path, char *hex, size_t hexlen);

/* The selection of a run: SHA-256 of its case names, sorted (strcmp), duplicates once, each
 * followed by '\n'. *n_out (may be NULL) gets the number of distinct names. Returns -1 when out
 * of memory (hex ""), else 0. names is not changed. */
int mdc_cli__selection_hash(const char *const *names, size_t n, char hex[MDC_SHA256_HEX], size_t *n_out);

/* The file a loaded driver came from and its identity: dl is its dlopen handle, or NULL for a
 * driver linked into this program, then found by an address inside it (addr). file, build_id and
 * sha256 are "" for what cannot be known. */
void mdc_cli__driver_identify(const void *addr, void *dl, char *file, size_t filelen, char build_id[MDC_BUILD_ID_HEX],
                              char sha256[MDC_SHA256_HEX]);

#endif
