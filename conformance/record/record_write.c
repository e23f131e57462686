/* record_write.c - the recording driver's trace writer: symbolic names, payloads and sidecar
 * blobs, pool (`memory`/`fill`/`check`), model and request events, the header. Private to
 * conformance/record/; every function runs under md__rec.mu. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record_int.h"

enum { INLINE_MAX = 1024, FORGE_MAX_BITS = 16 };

static void oom(void) {
  fprintf(stderr, "mdc-record: out of memory\n");
  abort();
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *q = realloc(p, n * elem);
  if (!q) oom();
  *cap = n;
  return q;
}

void md__rec_emit(json_t *obj) {
  if (!md__rec.events) { /* after the trace was written: nothing more to record */
    json_decref(obj);
    return;
  }
  char *s = json_dumps(obj, JSON_REAL_PRECISION(9) | JSON_PRESERVE_ORDER);
  json_decref(obj);
  if (!s) oom();
  fputs(s, md__rec.events);
  fputc('\n', md__rec.events);
  free(s);
  md__rec.n_events++;
}

/* ---- names ---------------------------------------------------------------------------------- */

static const char *const prefixes[REC_KINDS] = {"d", "c", "pm", "t", "ev", "rp"};

const char *md__rec_bind(rec_kind kind, uint64_t value) {
  rec_state *R = &md__rec;
  R->names = grow(R->names, &R->cap_names, R->n_names + 1, sizeof *R->names);
  rec_name *n = &R->names[R->n_names++];
  n->value = value;
  n->kind = kind;
  snprintf(n->name, sizeof n->name, "%s%u", prefixes[kind], ++R->counters[kind]);
  return n->name;
}

static json_t *hex64(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return json_string(b);
}

json_t *md__rec_ref(uint64_t value) {
  rec_state *R = &md__rec;
  if (value == 0) return json_pack("{s:i}", "literal", 0);
  for (size_t i = R->n_names; i-- > 0;)
    if (R->names[i].value == value && R->names[i].kind != REC_DEVICE)
      return json_string(R->names[i].name);
  /* A value the driver never issued: most likely a forgery of a real one (flipped bits), which
   * the trace says relative to that handle so it stays a forgery of the replay's own value. */
  const rec_name *best = NULL;
  int best_bits = 65;
  for (size_t i = R->n_names; i-- > 0;) {
    if (R->names[i].kind == REC_DEVICE) continue;
    int bits = __builtin_popcountll(R->names[i].value ^ value);
    if (bits < best_bits) best_bits = bits, best = &R->names[i];
  }
  if (best && best_bits <= FORGE_MAX_BITS)
    return json_pack("{s:s,s:o}", "forge", best->name, "xor", hex64(best->value ^ value));
  return json_pack("{s:o}", "literal", hex64(value));
}

/* ---- payloads ------------------------------------------------------------------------------- */

static int write_blob(const uint8_t *p, size_t n, char hex[65]) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, p, n);
  sodium_bin2hex(hex, 65, h, sizeof h);
  if (mkdir(md__rec.blob_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "mdc-record: mkdir %s: %s\n", md__rec.blob_dir, strerror(errno));
    return -1;
  }
  char path[PATH_MAX + 80], tmp[PATH_MAX + 100];
  snprintf(path, sizeof path, "%.4000s/%s", md__rec.blob_dir, hex);
  if (access(path, F_OK) == 0) return 0; /* content-addressed: already there */
  snprintf(tmp, sizeof tmp, "%.4080s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "mdc-record: writing %s: %s\n", tmp, strerror(errno));
    return -1;
  }
  if (rename(tmp, path) != 0) {
    fprintf(stderr, "mdc-record: rename %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

json_t *md__rec_payload(const uint8_t *p, size_t n, int as_f32, int *is_f32) {
  if (is_f32) *is_f32 = 0;
  size_t same = 1;
  while (same < n && p[same] == p[0]) same++;
  if (n > 0 && same == n) return json_pack("{s:i,s:I}", "fill", p[0], "bytes", (json_int_t)n);
  int finite = as_f32 && n % 4 == 0;
  for (size_t i = 0; finite && i < n; i += 4) {
    float f;
    memcpy(&f, p + i, 4);
    finite = isfinite(f);
  }
  if (n > INLINE_MAX) {
    char hex[65];
    if (write_blob(p, n, hex) != 0) return NULL;
    if (is_f32) *is_f32 = finite;
    return json_pack("{s:s}", "sidecar", hex);
  }
  if (finite) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i += 4) {
      float f;
      memcpy(&f, p + i, 4);
      json_array_append_new(a, json_real((double)f));
    }
    if (is_f32) *is_f32 = 1;
    return json_pack("{s:o}", "f32", a);
  }
  char *h = malloc(2 * n + 1);
  if (!h) oom();
  sodium_bin2hex(h, 2 * n + 1, p, n);
  json_t *o = json_pack("{s:s}", "hex", h);
  free(h);
  return o;
}

/* ---- pools ---------------------------------------------------------------------------------- */

static const char *kind_name(md_memory_kind k) {
  switch (k) {
    case MD_MEM_ASHMEM: return "ashmem";
    case MD_MEM_MMAP_FD: return "mmap_fd";
    case MD_MEM_HARDWARE_BUFFER_BLOB: return "blob";
    case MD_MEM_HARDWARE_BUFFER: return "hardware_buffer";
  }
  return NULL;
}

static json_t *prot_json(uint32_t prot) {
  if (prot == (PROT_READ | PROT_WRITE)) return json_string("rw");
  if (prot == PROT_READ) return json_string("r");
  if (prot == PROT_WRITE) return json_string("w");
  return json_integer(prot);
}

/* The bytes of the pool's window: [offset, offset+size) of the file (BLOB: width bytes at 0). */
static uint64_t window_size(const md_memory *m) {
  return m->kind == MD_MEM_HARDWARE_BUFFER_BLOB ? m->width : m->kind == MD_MEM_HARDWARE_BUFFER ? 0 : m->size;
}
static uint64_t window_offset(const md_memory *m) {
  return m->kind == MD_MEM_MMAP_FD ? m->offset : 0;
}

static int read_window(int fd, uint64_t off, uint64_t n, uint8_t *out) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, out + done, n - done, (off_t)(off + done));
    if (r <= 0) return -1;
    done += (uint64_t)r;
  }
  return 0;
}

static const char *bad_memory(const md_memory *m) {
  rec_state *R = &md__rec;
  static char name[24];
  static unsigned n_bad;
  (void)R;
  snprintf(name, sizeof name, "bm%u", ++n_bad);
  struct stat st;
  json_t *fd;
  if (m->fd < 0) fd = json_integer(m->fd);
  else if (fstat(m->fd, &st) != 0) fd = json_string("closed");
  else fd = json_string("pipe"); /* a descriptor the replayer can reproduce only as unmappable */
  json_t *o = json_pack("{s:s,s:s,s:i,s:o,s:I,s:I,s:i,s:i,s:i,s:i,s:i}", "op", "bad_memory", "as",
                        name, "kind", (int)m->kind, "fd", fd, "offset", (json_int_t)m->offset,
                        "size", (json_int_t)m->size, "prot", (int)m->prot, "width", (int)m->width,
                        "height", (int)m->height, "layers", (int)m->layers, "format",
                        (int)m->format);
  md__rec_emit(o);
  return name;
}

const char *md__rec_memory(const md_memory *m, size_t *index) {
  rec_state *R = &md__rec;
  *index = SIZE_MAX;
  struct stat st;
  const char *kn = kind_name(m->kind);
  uint64_t off = window_offset(m), n = window_size(m);
  if (!kn || m->fd < 0 || fstat(m->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (m->kind != MD_MEM_HARDWARE_BUFFER && (n == 0 || off + n < off || off + n > (uint64_t)st.st_size)))
    return bad_memory(m);
  size_t i = 0;
  for (; i < R->n_mems; i++) {
    rec_mem *e = &R->mems[i];
    if (e->dev == st.st_dev && e->ino == st.st_ino && e->kind == m->kind && e->offset == m->offset &&
        e->size == m->size && e->prot == m->prot && e->width == m->width && e->height == m->height &&
        e->layers == m->layers && e->format == m->format)
      break;
  }
  uint8_t *now = n ? malloc(n) : NULL;
  if (n && !now) oom();
  if (n && read_window(m->fd, off, n, now) != 0) {
    free(now);
    return bad_memory(m);
  }
  *index = i;
  if (i < R->n_mems) {
    rec_mem *e = &R->mems[i];
    if (n && memcmp(e->last, now, n) != 0) {
      json_t *o = json_pack("{s:s,s:s,s:i}", "op", "fill", "memory", e->name, "offset", 0);
      json_object_set_new(o, "data", md__rec_payload(now, n, 1, NULL));
      md__rec_emit(o);
      memcpy(e->last, now, n);
    }
    free(now);
    return e->name;
  }
  R->mems = grow(R->mems, &R->cap_mems, R->n_mems + 1, sizeof *R->mems);
  rec_mem *e = &R->mems[R->n_mems++];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "m%zu", R->n_mems);
  e->kind = m->kind;
  e->dev = st.st_dev;
  e->ino = st.st_ino;
  e->offset = m->offset;
  e->size = m->size;
  e->prot = m->prot;
  e->width = m->width;
  e->height = m->height;
  e->layers = m->layers;
  e->format = m->format;
  e->last = now;
  json_t *o = json_pack("{s:s,s:s,s:s}", "op", "memory", "as", e->name, "kind", kn);
  if (m->kind == MD_MEM_HARDWARE_BUFFER || m->kind == MD_MEM_HARDWARE_BUFFER_BLOB) {
    json_object_set_new(o, "size", json_integer((json_int_t)(m->kind == MD_MEM_HARDWARE_BUFFER ? m->size : n)));
    json_object_set_new(o, "width", json_integer(m->width));
    json_object_set_new(o, "height", json_integer(m->height));
    json_object_set_new(o, "layers", json_integer(m->layers));
    json_object_set_new(o, "format", json_integer(m->format));
  } else {
    json_object_set_new(o, "size", json_integer((json_int_t)m->size));
    if (m->kind == MD_MEM_MMAP_FD && m->offset) json_object_set_new(o, "offset", json_integer((json_int_t)m->offset));
  }
  json_object_set_new(o, "prot", prot_json(m->prot));
  if (n) {
    json_t *p = md__rec_payload(now, n, 1, NULL);
    if (p) json_object_set_new(o, "data", p);
  }
  md__rec_emit(o);
  return e->name;
}

void md__rec_check(size_t index, int fd) {
  rec_state *R = &md__rec;
  if (index >= R->n_mems) return;
  rec_mem *e = &R->mems[index];
  md_memory m = {.kind = e->kind, .offset = e->offset, .size = e->size, .width = e->width};
  uint64_t off = window_offset(&m), n = window_size(&m);
  if (!n) return;
  uint8_t *now = malloc(n);
  if (!now) oom();
  if (read_window(fd, off, n, now) != 0) {
    free(now);
    return;
  }
  int is_f32 = 0;
  json_t *p = md__rec_payload(now, n, 1, &is_f32);
  if (p) {
    json_t *o = json_pack("{s:s,s:s,s:i,s:s}", "op", "check", "memory", e->name, "offset", 0,
                          "type", is_f32 ? "f32" : "u8");
    json_object_set_new(o, "data", p);
    md__rec_emit(o);
  }
  memcpy(e->last, now, n);
  free(now);
}

/* ---- models and requests -------------------------------------------------------------------- */

static json_t *enum_name(int v, const char *const *names, size_t n) {
  if (v >= 0 && (size_t)v < n && names[v]) return json_string(names[v]);
  return json_integer(v);
}

static json_t *operand_type(md_operand_type t) {
  static const char *const names[15] = {
      [0] = "FLOAT32", [1] = "INT32", [2] = "UINT32", [3] = "TENSOR_FLOAT32", [4] = "TENSOR_INT32",
      [5] = "TENSOR_QUANT8_ASYMM", [6] = "BOOL", [8] = "TENSOR_FLOAT16",
      [14] = "TENSOR_QUANT8_ASYMM_SIGNED"};
  return enum_name((int)t, names, 15);
}

static json_t *lifetime(md_lifetime l) {
  static const char *const names[6] = {"TEMPORARY_VARIABLE", "SUBGRAPH_INPUT", "SUBGRAPH_OUTPUT",
                                       "CONSTANT_COPY", "CONSTANT_REFERENCE", "NO_VALUE"};
  return enum_name((int)l, names, 6);
}

static json_t *operation_type(md_operation_type t) {
  if (t == MD_OP_CUSTOM) return json_string("CUSTOM");
  static const char *const names[37] = {[0] = "ADD", [2] = "CONCATENATION", [9] = "FULLY_CONNECTED",
                                        [18] = "MUL", [19] = "RELU", [22] = "RESHAPE",
                                        [25] = "SOFTMAX", [36] = "SUB"};
  return enum_name((int)t, names, 37);
}

static json_t *u32_array(const uint32_t *v, uint32_t n) {
  json_t *a = json_array();
  for (uint32_t i = 0; v && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

const char *md__rec_model(const md_model *m, char name[24]) {
  /* The pools first: each becomes a `memory` event the model names. */
  json_t *pools = json_array();
  for (uint32_t i = 0; m->pools && i < m->n_pools; i++) {
    size_t idx;
    json_array_append_new(pools, json_string(md__rec_memory(&m->pools[i], &idx)));
  }
  snprintf(name, 24, "mo%u", ++md__rec.n_models);
  json_t *ops = json_array();
  for (uint32_t i = 0; m->operands && i < m->n_operands; i++) {
    const md_operand *o = &m->operands[i];
    json_t *j = json_pack("{s:o}", "type", operand_type(o->type));
    if (o->rank) json_object_set_new(j, "dims", u32_array(o->dims, o->rank));
    if (o->scale != 0.0f) json_object_set_new(j, "scale", json_real(o->scale));
    if (o->zero_point) json_object_set_new(j, "zero_point", json_integer(o->zero_point));
    json_object_set_new(j, "lifetime", lifetime(o->lifetime));
    if (o->lifetime == MD_CONSTANT_REFERENCE || o->pool) json_object_set_new(j, "pool", json_integer(o->pool));
    if (o->offset) json_object_set_new(j, "offset", json_integer((json_int_t)o->offset));
    if (o->length) json_object_set_new(j, "length", json_integer((json_int_t)o->length));
    json_array_append_new(ops, j);
  }
  json_t *opers = json_array();
  for (uint32_t i = 0; m->operations && i < m->n_operations; i++) {
    const md_operation *o = &m->operations[i];
    json_t *j = json_pack("{s:o,s:o,s:o}", "type", operation_type(o->type), "inputs",
                          u32_array(o->inputs, o->n_inputs), "outputs", u32_array(o->outputs, o->n_outputs));
    if (o->type == MD_OP_CUSTOM) {
      if (o->custom_name) json_object_set_new(j, "name", json_string(o->custom_name));
      json_t *attrs = json_array();
      for (uint32_t k = 0; o->attrs && k < o->n_attrs; k++) {
        const md_attr *a = &o->attrs[k];
        json_t *aj = json_pack("{s:s}", "name", a->name ? a->name : "");
        switch (a->kind) {
          case MD_ATTR_I64: json_object_set_new(aj, "i64", json_integer(a->i64)); break;
          case MD_ATTR_F64: json_object_set_new(aj, "f64", json_real(a->f64)); break;
          case MD_ATTR_STR: json_object_set_new(aj, "str", json_string(a->str ? a->str : "")); break;
          case MD_ATTR_I64_ARRAY: {
            json_t *arr = json_array();
            for (uint32_t q = 0; a->array && q < a->count; q++) json_array_append_new(arr, json_integer(a->array[q]));
            json_object_set_new(aj, "i64_array", arr);
            break;
          }
        }
        json_array_append_new(attrs, aj);
      }
      json_object_set_new(j, "attrs", attrs);
    }
    json_array_append_new(opers, j);
  }
  json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o}", "op", "model", "as", name, "operands", ops,
                        "operations", opers, "inputs", u32_array(m->inputs, m->n_inputs), "outputs",
                        u32_array(m->outputs, m->n_outputs));
  if (m->operand_values && m->operand_values_size) {
    json_t *p = md__rec_payload(m->operand_values, m->operand_values_size, 0, NULL);
    if (p) json_object_set_new(o, "operand_values", p);
  }
  json_object_set_new(o, "pools", pools);
  md__rec_emit(o);
  return name;
}

static json_t *args(const md_request_arg *a, uint32_t n) {
  json_t *arr = json_array();
  for (uint32_t i = 0; a && i < n; i++) {
    json_t *j = json_object();
    if (a[i].has_no_value) json_object_set_new(j, "no_value", json_true());
    json_object_set_new(j, "pool", json_integer(a[i].pool));
    if (a[i].offset) json_object_set_new(j, "offset", json_integer((json_int_t)a[i].offset));
    if (a[i].length) json_object_set_new(j, "length", json_integer((json_int_t)a[i].length));
    if (a[i].rank) json_object_set_new(j, "dims", u32_array(a[i].dims, a[i].rank));
    json_array_append_new(arr, j);
  }
  return arr;
}

rec_regpool *md__rec_regpool(uint64_t handle) {
  rec_state *R = &md__rec;
  for (size_t i = R->n_regpools; i-- > 0;)
    if (R->regpools[i].handle == handle) return &R->regpools[i];
  return NULL;
}

json_t *md__rec_request(const md_request *r, size_t *out_mems, int *out_fds, size_t *n_out,
                        size_t cap_out) {
  json_t *pools = json_array();
  size_t *idx = calloc(r->n_pools ? r->n_pools : 1, sizeof *idx);
  int *fds = calloc(r->n_pools ? r->n_pools : 1, sizeof *fds);
  if (!idx || !fds) oom();
  for (uint32_t i = 0; r->pools && i < r->n_pools; i++) {
    idx[i] = SIZE_MAX;
    fds[i] = -1;
    if (r->pools[i].is_token == 2) {
      /* A registered pool: its memory's content as it is now (a `fill` when it changed since
       * the recorder last saw it), read through the recorder's own fd. */
      rec_regpool *rp = md__rec_regpool(r->pools[i].token);
      if (rp && rp->mem.fd >= 0) {
        md__rec_memory(&rp->mem, &idx[i]);
        fds[i] = rp->mem.fd;
      }
      json_array_append_new(pools, json_pack("{s:o}", "registered", md__rec_ref(r->pools[i].token)));
    } else if (r->pools[i].is_token) {
      json_array_append_new(pools, json_pack("{s:o}", "token", md__rec_ref(r->pools[i].token)));
    } else {
      json_array_append_new(pools, json_pack("{s:s}", "memory", md__rec_memory(&r->pools[i].memory, &idx[i])));
      fds[i] = r->pools[i].memory.fd;
    }
  }
  /* The pools the execution may write: those of outputs with a value, each once. */
  *n_out = 0;
  for (uint32_t i = 0; r->outputs && i < r->n_outputs; i++) {
    uint32_t p = r->outputs[i].pool;
    if (r->outputs[i].has_no_value || p >= r->n_pools || idx[p] == SIZE_MAX) continue;
    int seen = 0;
    for (size_t k = 0; k < *n_out; k++) seen |= out_mems[k] == idx[p];
    if (seen || *n_out == cap_out) continue;
    out_mems[*n_out] = idx[p];
    out_fds[*n_out] = fds[p];
    (*n_out)++;
  }
  free(fds);
  free(idx);
  return json_pack("{s:o,s:o,s:o}", "inputs", args(r->inputs, r->n_inputs), "outputs",
                   args(r->outputs, r->n_outputs), "pools", pools);
}

/* ---- the file ------------------------------------------------------------------------------- */

static void write_file(rec_state *R);

void md__rec_finish(void) {
  rec_state *R = &md__rec;
  if (!R->ok || R->finalized) return;
  R->finalized = 1;
  fflush(R->events);
  write_file(R);
  /* Everything the recorder holds goes now (LeakSanitizer runs after the destructors). */
  fclose(R->events);
  R->events = NULL;
  free(R->buf);
  R->buf = NULL;
  free(R->names);
  R->names = NULL;
  R->n_names = R->cap_names = 0;
  for (size_t i = 0; i < R->n_mems; i++) free(R->mems[i].last);
  free(R->mems);
  R->mems = NULL;
  R->n_mems = R->cap_mems = 0;
  for (size_t i = 0; i < R->n_pending; i++)
    for (size_t k = 0; k < R->pending[i].n; k++)
      if (R->pending[i].fds[k] >= 0) close(R->pending[i].fds[k]);
  free(R->pending);
  R->pending = NULL;
  R->n_pending = R->cap_pending = 0;
  for (size_t i = 0; i < R->n_regpools; i++)
    if (R->regpools[i].mem.fd >= 0) close(R->regpools[i].mem.fd);
  free(R->regpools);
  R->regpools = NULL;
  R->n_regpools = R->cap_regpools = 0;
}

static void write_file(rec_state *R) {
  char desc[1200];
  snprintf(desc, sizeof desc, "recorded from %.1100s", R->program);
  char rule[1200];
  snprintf(rule, sizeof rule, "recorded workload: %.1100s", R->program);
  char drv[200];
  snprintf(drv, sizeof drv, "%s %s", R->real->name ? R->real->name : "?",
           R->real->version ? R->real->version : "?");
  /* Registered pools (SPEC 9) are trace format 1.1 and a capability the replay's driver needs. */
  json_t *h = json_pack("{s:s,s:s,s:s,s:[s],s:{s:s,s:s},s:[],s:b,s:[s,s]}", "mdc_trace",
                        R->used_registered ? "1.1" : "1.0",
                        "name", R->trace_name, "description", desc, "rules", rule, "recorded_on",
                        "driver", drv, "backend", R->backend, "requires", "must_pass", 1, "tags",
                        "recorded", "workloads");
  if (R->memory_domains) json_array_append_new(json_object_get(h, "requires"), json_string("memory_domains"));
  if (R->used_registered) json_array_append_new(json_object_get(h, "requires"), json_string("registered_pools"));
  char *hs = json_dumps(h, JSON_PRESERVE_ORDER);
  json_decref(h);
  char tmp[PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%.4000s.tmp.%d", R->out, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f || !hs) {
    fprintf(stderr, "mdc-record: cannot write %s: %s\n", tmp, strerror(errno));
    free(hs);
    return;
  }
  fprintf(f, "%s\n", hs);
  free(hs);
  fwrite(R->buf, 1, R->buf_len, f);
  if (fclose(f) != 0 || rename(tmp, R->out) != 0) {
    fprintf(stderr, "mdc-record: cannot write %s: %s\n", R->out, strerror(errno));
    unlink(tmp);
    return;
  }
  fprintf(stderr, "mdc-record: %" PRIu64 " events written to %s\n", R->n_events, R->out);
}
