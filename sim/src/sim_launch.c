/* sim_launch.c - kernel launches on the sim: each tensor checked against the arena before the
 * work is accepted, the kernel run (at once or by a stream's worker), then the red zones of
 * what it touched and its outputs searched for red-zone bytes it read. */
#include "sim_backend_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- launch ----------------------------------------------------------------------------- */

md_status md__sim_kfail(md_kernel_status *st, md_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  st->code = code;
  vsnprintf(st->message, sizeof st->message, fmt, ap);
  va_end(ap);
  return code;
}

/* Checks that tensor t (index i of `side`) is host memory or lies inside one live allocation;
 * appends it to ts when it is device memory. */
static md_status tensor_check(md_backend *b, const char *kname, const char *side, uint32_t i, const md_tensor *t,
                              md__arena_tensor *ts, size_t *n_ts, md_kernel_status *st) {
  uintptr_t p = (uintptr_t)t->data;
  if (!p || !t->bytes) return MD_NONE;   /* nothing the kernel may touch */
  if (((uint64_t)p & MD_SIM_DEVPTR_TAG_MASK) == MD_SIM_DEVPTR_TAG) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md__sim_kfail(st, MD_GENERAL_FAILURE,
                         "sim: kernel '%s': %s %u holds device pointer 0x%" PRIx64 ", not a kernel_ptr() address",
                         kname, side, i, (uint64_t)p);
  }
  uintptr_t base = (uintptr_t)md__arena_base(b->arena);
  uint64_t reserved = md__arena_reserved(b->arena);
  if (p < base || p - base >= reserved) return MD_NONE;   /* host memory: parameters, scratch */
  uint64_t o = (uint64_t)(p - base);
  md__arena_alloc_info ai;
  md__arena_where w = md__arena_locate(b->arena, o, &ai);
  if (w != MD__ARENA_AT_PAYLOAD) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    if (w == MD__ARENA_AT_REDZONE)
      return md__sim_kfail(st, MD_GENERAL_FAILURE,
                           "sim: kernel '%s': %s %u points at 0x%" PRIx64 ", past the end of allocation 0x%" PRIx64
                           " (size %" PRIu64 ")",
                           kname, side, i, b->tag | o, b->tag | ai.off, ai.size);
    return md__sim_kfail(st, MD_GENERAL_FAILURE,
                         "sim: kernel '%s': %s %u points at 0x%" PRIx64
                         ", which is not in a live allocation (freed, or never allocated)",
                         kname, side, i, b->tag | o);
  }
  if (t->bytes > ai.off + ai.size - o) {
    atomic_fetch_add_explicit(&b->bad_pointers, 1, memory_order_relaxed);
    return md__sim_kfail(st, MD_GENERAL_FAILURE,
                         "sim: kernel '%s': %s %u (%" PRIu64 " bytes at 0x%" PRIx64
                         ") runs past the end of allocation 0x%" PRIx64 " (size %" PRIu64 ")",
                         kname, side, i, t->bytes, b->tag | o, b->tag | ai.off, ai.size);
  }
  ts[(*n_ts)++] = (md__arena_tensor){.off = o, .bytes = t->bytes, .index = i, .output = side[0] == 'o'};
  return MD_NONE;
}

md_status md__sim_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                         md_kernel_status *st) {
  if (!sim_of(b) || !k || !k->run || !call || !st) {
    if (st) md__sim_kfail(st, MD_INVALID_ARGUMENT, "sim: launch: NULL device, kernel, run, call or status");
    return MD_INVALID_ARGUMENT;
  }
  st->code = MD_NONE;
  st->message[0] = '\0';
  const char *kname = k->name ? k->name : "?";
  if (is_lost(b))
    return md__sim_kfail(st, MD_DEVICE_UNAVAILABLE, "sim: launch of kernel '%s': device lost (device_lost@%" PRIu64 ")",
                         kname, atomic_load_explicit(&b->lost_at, memory_order_relaxed));
  count_call(b, C_LAUNCH);
  if ((call->n_inputs && !call->inputs) || (call->n_outputs && !call->outputs))
    return md__sim_kfail(st, MD_INVALID_ARGUMENT, "sim: launch of kernel '%s': NULL tensor array", kname);

  /* Checks before the work is accepted, on the calling thread. */
  size_t n_t = (size_t)call->n_inputs + call->n_outputs, n_ts = 0;
  cmd *c = s ? calloc(1, sizeof *c + n_t * sizeof(md__arena_tensor)) : NULL;
  md__arena_tensor local[16], *ts = c ? c->ts : n_t <= 16 ? local : malloc(n_t * sizeof *ts);
  if ((s && !c) || !ts) {
    free(c);
    return md__sim_kfail(st, MD_RESOURCE_EXHAUSTED_TRANSIENT, "sim: launch: out of host memory");
  }
  md_status rc = MD_NONE;
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_inputs; i++)
    rc = tensor_check(b, kname, "input", i, &call->inputs[i], ts, &n_ts, st);
  for (uint32_t i = 0; rc == MD_NONE && i < call->n_outputs; i++)
    rc = tensor_check(b, kname, "output", i, &call->outputs[i], ts, &n_ts, st);
  if (rc != MD_NONE || !s) {
    if (rc == MD_NONE) rc = md__sim_run_launch(b, NULL, k, call, st, ts, n_ts);
    if (ts != local && !c) free(ts);
    free(c);
    return rc;
  }
  /* Accepted: the kernel runs on a worker; its failure comes from stream_sync. */
  c->kind = CMD_LAUNCH;
  c->k = k;
  c->call = call;
  c->st = st;
  c->n_ts = n_ts;
  char err[MSG_MAX];
  rc = md__sim_issue(b, s, c, err, sizeof err);
  if (rc != MD_NONE) md__sim_kfail(st, rc, "%s", err);
  return rc;
}

/* Runs a kernel whose tensors were checked, then the red zones of what it touched (written
 * over), and its outputs for red-zone bytes (read past an end). */
md_status md__sim_run_launch(md_backend *b, md_stream *s, const md_kernel_def *k, md_kernel_call *call,
                             md_kernel_status *st, const md__arena_tensor *ts, size_t n_ts) {
  const char *kname = k->name ? k->name : "?";
  call->stream = NULL;
  k->run(call, st);
  clock_advance(b, s, model_ns(b, 1, 0));
  char msg[MSG_MAX] = "";
  int all = (atomic_load_explicit(&b->debug, memory_order_relaxed) & MD_SIM_DEBUG_CHECK_ALL) != 0;
  uint64_t hits = md__arena_check(b->arena, ts, n_ts, msg, sizeof msg);
  if (all) hits += md__arena_check_all(b->arena, msg[0] ? NULL : msg, sizeof msg);
  hits += md__arena_check_reads(b->arena, ts, n_ts, all, msg[0] ? NULL : msg, sizeof msg);
  if (hits && st->code == MD_NONE)
    md__sim_kfail(st, MD_GENERAL_FAILURE, "sim: kernel '%s': %s", kname, strncmp(msg, "sim: ", 5) ? msg : msg + 5);
  return st->code;
}

