/* pool.c - the real memory pools a trace asks for (`memory`: a memfd or an unlinked temporary
 * file, mapped read-write by the replayer to fill and check it) and the literal descriptors of
 * `bad_memory` (with a closed fd number or an unmappable pipe). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"

#define HWB_FORMAT_BLOB 0x21u
#define HWB_FORMAT_R8 0x38u

static int parse_prot(mdc__where *w, json_t *ev, uint32_t *out) {
  json_t *v = json_object_get(ev, "prot");
  if (!v) {
    *out = PROT_READ | PROT_WRITE;
    return 0;
  }
  if (json_is_integer(v)) {
    if (json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
      return mdc__terr(w, "'prot' %lld does not fit 32 bits", (long long)json_integer_value(v));
    *out = (uint32_t)json_integer_value(v);
    return 0;
  }
  const char *s = json_is_string(v) ? json_string_value(v) : "";
  if (strcmp(s, "rw") == 0) *out = PROT_READ | PROT_WRITE;
  else if (strcmp(s, "r") == 0) *out = PROT_READ;
  else if (strcmp(s, "w") == 0) *out = PROT_WRITE;
  else return mdc__terr(w, "'prot' must be \"rw\", \"r\", \"w\" or a number");
  return 0;
}

/* Files kept from freed pools for later ones (mdc_trace_opts.keep_files). A small one keeps its
 * mapping and bytes, and the next pool of its size zeroes them: no system call at all; another
 * is unmapped and truncated to 0 bytes, and the next pool sizes and maps it. */
#define KEPT_MAX 16
#define KEPT_MAPPED_MAX (64u * 1024u)
typedef struct kept_file {
  int fd, is_file;
  uint8_t *map;   /* NULL: unmapped, at 0 bytes */
  size_t len;
} kept_file;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_file kept[KEPT_MAX];
static int n_kept;

/* A kept file of this kind (fd -1: none): one mapped at exactly len bytes when there is one,
 * else one at 0 bytes and unmapped. */
static kept_file kept_file_take(int is_file, size_t len) {
  kept_file k = {.fd = -1};
  pthread_mutex_lock(&kept_lock);
  int best = -1;
  for (int i = n_kept - 1; i >= 0; i--) {
    if (kept[i].is_file != is_file) continue;
    if (best < 0) best = i;
    if (kept[i].map && kept[i].len == len) {
      best = i;
      break;
    }
  }
  if (best >= 0) {
    k = kept[best];
    kept[best] = kept[--n_kept];
  }
  pthread_mutex_unlock(&kept_lock);
  /* A driver holds the fd while the pool lives and may have resized the file: a mapping past
   * its end would fault when zeroed. */
  struct stat st;
  int resized = k.fd >= 0 && k.map && (fstat(k.fd, &st) != 0 || (uint64_t)st.st_size != k.len);
  if (k.fd >= 0 && k.map && (k.len != len || resized)) {
    munmap(k.map, k.len);
    k.map = NULL;
    if (ftruncate(k.fd, 0) != 0) {
      close(k.fd);
      k.fd = -1;
    }
  }
  return k;
}

/* Keeps the pool's file (and its mapping, when small): 0 when kept (fds[0] and map are no longer
 * the pool's), -1 when the caller unmaps and closes them. */
static int kept_file_put(mdc__pool *p) {
  kept_file k = {.fd = p->fds[0], .is_file = p->is_file, .map = p->map, .len = p->map_len};
  if (lseek(k.fd, 0, SEEK_SET) != 0) return -1;   /* a driver may have read() from it */
  if (k.len > KEPT_MAPPED_MAX) {
    munmap(k.map, k.len);
    p->map = NULL;
    k.map = NULL;
    if (ftruncate(k.fd, 0) != 0) return -1;   /* its bytes go now */
  }
  pthread_mutex_lock(&kept_lock);
  int rc = -1;
  if (n_kept < KEPT_MAX) {
    kept[n_kept++] = k;
    rc = 0;
  }
  pthread_mutex_unlock(&kept_lock);
  if (rc == 0) {
    p->fds[0] = -1;
    p->map = NULL;
  }
  return rc;
}

void mdc_trace_drop_kept_files(void) {
  pthread_mutex_lock(&kept_lock);
  while (n_kept > 0) {
    kept_file *k = &kept[--n_kept];
    if (k->map) munmap(k->map, k->len);
    close(k->fd);
  }
  pthread_mutex_unlock(&kept_lock);
}

static mdc__pool *pool_new(void) {
  mdc__pool *p = calloc(1, sizeof *p);
  if (p) p->fds[0] = p->fds[1] = -1;
  if (p) p->mem.fd = -1;
  return p;
}

/* The pool's file and mapping: kept (keep_files) or let go. Which, and whether a kept file comes
 * mapped, depends on earlier traces, not this one: these and the kept_file functions are not
 * instrumented for coverage in the fuzz targets (fuzz/afl-denylist.txt; not inlined, so that
 * their branches do not land in an instrumented caller). */
__attribute__((noinline)) static void pool_file_release(mdc__pool *p) {
  if (p->keep && p->fds[0] >= 0 && p->map) kept_file_put(p);
  if (p->map) munmap(p->map, p->map_len);
  if (p->fds[0] >= 0) close(p->fds[0]);
  p->map = NULL;
  p->fds[0] = -1;
}

/* A file for a pool of len bytes, mapped read-write and all zero: 0 with *fd and *map, or -1
 * with errno and *what (the step that failed). */
__attribute__((noinline)) static int pool_file_get(int is_file, int keep, size_t len, int *fd, uint8_t **map, const char **what) {
  kept_file k = keep ? kept_file_take(is_file, len) : (kept_file){.fd = -1};
  *fd = k.fd;
  if (k.map) {
    memset(k.map, 0, k.len);
    *map = k.map;
    return 0;
  }
  *map = NULL;
  *what = "cannot create the pool's file";
  if (*fd < 0 && !is_file) {
    *fd = memfd_create("mdc-pool", MFD_CLOEXEC);
  } else if (*fd < 0) {
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mdc-pool-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    *fd = mkostemp(path, O_CLOEXEC);
    if (*fd >= 0) unlink(path);
  }
  if (*fd < 0) return -1;
  *what = "ftruncate";
  if (ftruncate(*fd, (off_t)len) != 0) return -1;
  *what = "mmap of the pool";
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (m == MAP_FAILED) return -1;
  *map = m;
  return 0;
}

void mdc__pool_free(mdc__pool *p) {
  if (!p) return;
  pool_file_release(p);
  if (p->fds[1] >= 0) close(p->fds[1]);
  free(p);
}

int mdc__pool_make(mdc__where *w, json_t *ev, int strict, int keep, mdc__pool **out) {
  *out = NULL;
  int64_t kind;
  json_t *kv = json_object_get(ev, "kind");
  if (!kv) return mdc__terr(w, "missing field 'kind'");
  if (!json_is_string(kv)) return mdc__terr(w, "'kind' must be ashmem, mmap_fd, blob or hardware_buffer");
  if (mdc__enum_value(w, kv, mdc__memory_kinds, "'kind'", &kind)) return -1;
  uint64_t size, offset, file_size, width, height, layers, format;
  uint32_t prot;
  if (mdc__get_u64(w, ev, "size", 1, 0, MDC__MAX_MEMORY, &size) ||
      mdc__get_u64(w, ev, "offset", 0, 0, MDC__MAX_MEMORY, &offset) ||
      mdc__get_u64(w, ev, "file_size", 0, offset + size, MDC__MAX_MEMORY, &file_size) ||
      parse_prot(w, ev, &prot))
    return -1;
  if (size == 0 && kind != MD_MEM_HARDWARE_BUFFER)
    return mdc__terr(w, "'size' 0: a real pool needs bytes (use bad_memory for a zero-size descriptor)");
  uint64_t fmt_def = kind == MD_MEM_HARDWARE_BUFFER ? HWB_FORMAT_R8 : HWB_FORMAT_BLOB;
  if (mdc__get_u64(w, ev, "width", 0, size, UINT32_MAX, &width) ||
      mdc__get_u64(w, ev, "height", 0, 1, UINT32_MAX, &height) ||
      mdc__get_u64(w, ev, "layers", 0, 1, UINT32_MAX, &layers) ||
      mdc__get_u64(w, ev, "format", 0, fmt_def, UINT32_MAX, &format))
    return -1;
  if (file_size == 0) return mdc__terr(w, "'file_size' 0: nothing to map");
  mdc__pool *p = pool_new();
  if (!p) return mdc__terr(w, "out of memory");
  const char *what = "";
  int is_file = kind == MD_MEM_MMAP_FD;
  p->keep = keep;
  p->is_file = is_file;
  if (pool_file_get(is_file, keep, (size_t)file_size, &p->fds[0], &p->map, &what) != 0) {
    int e = errno;
    mdc__pool_free(p);
    return mdc__terr(w, "%s (%llu bytes): %s", what, (unsigned long long)file_size, strerror(e));
  }
  p->map_len = (size_t)file_size;
  p->mem.kind = (md_memory_kind)kind;
  p->mem.fd = p->fds[0];
  p->mem.offset = offset;
  p->mem.size = size;
  p->mem.prot = prot;
  if (kind == MD_MEM_HARDWARE_BUFFER_BLOB || kind == MD_MEM_HARDWARE_BUFFER) {
    p->mem.width = (uint32_t)width;
    p->mem.height = (uint32_t)height;
    p->mem.layers = (uint32_t)layers;
    p->mem.format = (uint32_t)format;
  }
  /* A non-BLOB hardware buffer has no offset or size of its own (SPEC 2); its bytes start at
   * the file's start. `size` sizes the file. */
  if (kind == MD_MEM_HARDWARE_BUFFER) p->mem.size = 0;
  json_t *data = json_object_get(ev, "data");
  if (data) {
    mdc__bytes b;
    if (mdc__payload(w, data, strict, &b)) {
      mdc__pool_free(p);
      return -1;
    }
    uint8_t *dst = mdc__pool_span(w, p, 0, b.len);
    if (dst) memcpy(dst, b.data, b.len);
    free(b.data);
    if (!dst) {
      mdc__pool_free(p);
      return -1;
    }
  }
  *out = p;
  return 0;
}

/* An fd number that is not open: the soft RLIMIT_NOFILE is never a valid descriptor. */
static int closed_fd(void) {
  struct rlimit rl;
  long fd = 4095;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT_MAX)
    fd = (long)rl.rlim_cur;
  while (fd < INT_MAX && fcntl((int)fd, F_GETFD) != -1) fd++;
  return (int)fd;
}

int mdc__pool_bad(mdc__where *w, json_t *ev, mdc__pool **out) {
  *out = NULL;
  mdc__pool *p = pool_new();
  if (!p) return mdc__terr(w, "out of memory");
  int64_t kind = 0;
  uint64_t offset, size, width, height, layers, format;
  json_t *kv = json_object_get(ev, "kind");
  json_t *fdv = json_object_get(ev, "fd");
  if ((kv && mdc__enum_value(w, kv, mdc__memory_kinds, "'kind'", &kind)) ||
      mdc__get_u64(w, ev, "offset", 0, 0, UINT64_MAX, &offset) ||
      mdc__get_u64(w, ev, "size", 0, 0, UINT64_MAX, &size) || parse_prot(w, ev, &p->mem.prot) ||
      mdc__get_u64(w, ev, "width", 0, 0, UINT32_MAX, &width) ||
      mdc__get_u64(w, ev, "height", 0, 0, UINT32_MAX, &height) ||
      mdc__get_u64(w, ev, "layers", 0, 0, UINT32_MAX, &layers) ||
      mdc__get_u64(w, ev, "format", 0, 0, UINT32_MAX, &format)) {
    mdc__pool_free(p);
    return -1;
  }
  p->mem.kind = (md_memory_kind)kind;
  p->mem.offset = offset;
  p->mem.size = size;
  p->mem.width = (uint32_t)width;
  p->mem.height = (uint32_t)height;
  p->mem.layers = (uint32_t)layers;
  p->mem.format = (uint32_t)format;
  if (!fdv) {
    p->mem.fd = -1;
  } else if (json_is_integer(fdv)) {
    /* A trace names only descriptors it made: a number that could be open would reach whatever
     * the replayer holds there (a results store, another case's pipe). */
    if (json_integer_value(fdv) < INT32_MIN || json_integer_value(fdv) >= 0) {
      long long v = (long long)json_integer_value(fdv);
      mdc__pool_free(p);
      return mdc__terr(w, "'fd' %lld: a trace may only name descriptors it made: a negative number, "
                          "\"closed\" (an fd number that is not open) or \"pipe\"", v);
    }
    p->mem.fd = (int)json_integer_value(fdv);
  } else if (json_is_string(fdv) && strcmp(json_string_value(fdv), "closed") == 0) {
    p->mem.fd = closed_fd();
  } else if (json_is_string(fdv) && strcmp(json_string_value(fdv), "pipe") == 0) {
    if (pipe2(p->fds, O_CLOEXEC) != 0) {
      int e = errno;
      mdc__pool_free(p);
      return mdc__terr(w, "pipe: %s", strerror(e));
    }
    p->mem.fd = p->fds[0];
  } else {
    mdc__pool_free(p);
    return mdc__terr(w, "'fd' must be a negative number, \"closed\" or \"pipe\"");
  }
  *out = p;
  return 0;
}

uint8_t *mdc__pool_span(mdc__where *w, mdc__pool *p, uint64_t off, uint64_t len) {
  if (!p->map) {
    mdc__terr(w, "a bad_memory descriptor has no bytes to fill or check");
    return NULL;
  }
  uint64_t base = p->mem.kind == MD_MEM_HARDWARE_BUFFER ? 0 : p->mem.offset;
  if (off > p->map_len || len > p->map_len || base > p->map_len - off ||
      base + off > p->map_len - len) {
    mdc__terr(w, "bytes [%llu, %llu) past the pool's start are outside its %zu-byte file (pool at offset %llu)",
              (unsigned long long)off, (unsigned long long)(off + len), p->map_len,
              (unsigned long long)base);
    return NULL;
  }
  return p->map + base + off;
}
