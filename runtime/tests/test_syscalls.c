/* test_syscalls.c - the system calls an execution makes, counted (SPEC 9: an execution whose
 * pools are all registered pools or tokens makes none on the reference driver's steady-state
 * path; a descriptor pool the client's cache already maps costs one, the fstat that checks it).
 *
 * Counted deterministically and without ptrace by bench/syscount.c: a forked child sets the
 * driver up and warms it, then runs N executions under a seccomp filter that traps and counts
 * every system call (and lets it through). x86-64 builds without sanitizers only; elsewhere the
 * tests are skipped (sanitizer runtimes make system calls of their own). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support.h"
#include "syscount.h"

#define N_EXEC 1000u   /* executions counted in each case */

/* The request shapes counted: every pool registered; tokens in and out; one descriptor input
 * (cached by the client after the warm-up) with a registered output. */
enum { CASE_REGISTERED = 0, CASE_TOKENS = 1, CASE_DESCRIPTOR = 2 };

static const uint32_t D14[2] = {1, 4};
#define B14 16u

/* One case's driver state, built in the counting child. */
typedef struct exec_case {
  int which;
  const md_driver *drv;
  md_device *dev;
  md_handle c, p;
  md_operand ops[2];
  uint32_t in[1], out[1];
  md_operation relu;
  md_model m;
  md_request_pool pools[2];
  md_request_arg ia, oa;
  md_request req;
} exec_case;

static int fail(char *err, size_t n, const exec_case *x, const char *what, md_status st) {
  snprintf(err, n, "%s: status %d: %s", what, (int)st, x->dev ? x->drv->last_error(x->dev) : "");
  return -1;
}

/* Builds the case and warms it up (200 executions), outside the filter. */
static int prepare(void *arg, char *err, size_t n) {
  exec_case *x = arg;
  x->drv = mdt_driver();
  md_status st = x->drv->open_device("backend=sim", &x->dev);
  if (st == MD_NONE) st = x->drv->open_client(x->dev, &x->c);
  if (st != MD_NONE) return fail(err, n, x, "open", st);
  for (int i = 0; i < 2; i++) x->ops[i] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = D14};
  x->ops[0].lifetime = MD_SUBGRAPH_INPUT;
  x->ops[1].lifetime = MD_SUBGRAPH_OUTPUT;
  x->in[0] = 0;
  x->out[0] = 1;
  x->relu = (md_operation){.type = MD_OP_RELU, .n_inputs = 1, .inputs = x->in, .n_outputs = 1, .outputs = x->out};
  x->m = (md_model){.n_operands = 2, .operands = x->ops, .n_operations = 1, .operations = &x->relu, .n_inputs = 1,
                    .inputs = x->in, .n_outputs = 1, .outputs = x->out};
  if ((st = x->drv->prepare_model(x->dev, x->c, &x->m, &x->p)) != MD_NONE) return fail(err, n, x, "prepare_model", st);
  int fi = memfd_create("mdt-in", MFD_CLOEXEC), fo = memfd_create("mdt-out", MFD_CLOEXEC);
  const float v[4] = {-1, 2, -3, 4};
  if (fi < 0 || fo < 0 || ftruncate(fi, B14) || ftruncate(fo, B14) || pwrite(fi, v, B14, 0) != B14)
    return fail(err, n, x, "memfd", MD_GENERAL_FAILURE);
  md_memory mi = {.kind = MD_MEM_ASHMEM, .fd = fi, .size = B14, .prot = PROT_READ | PROT_WRITE};
  md_memory mo = mi;
  mo.fd = fo;
  md_handle ri = 0, ro = 0;
  md_token ti = 0, to = 0;
  if (x->which != CASE_TOKENS && (st = x->drv->register_memory(x->dev, x->c, &mo, &ro)) != MD_NONE)
    return fail(err, n, x, "register_memory", st);
  if (x->which == CASE_REGISTERED && (st = x->drv->register_memory(x->dev, x->c, &mi, &ri)) != MD_NONE)
    return fail(err, n, x, "register_memory", st);
  if (x->which == CASE_TOKENS) {
    md_buffer_role role = {.model_index = 0, .io_index = 0, .probability = 1.0f};
    st = x->drv->allocate(x->dev, x->c, NULL, &x->p, 1, &role, 1, NULL, 0, &ti);
    if (st == MD_NONE) st = x->drv->allocate(x->dev, x->c, NULL, &x->p, 1, NULL, 0, &role, 1, &to);
    if (st == MD_NONE) st = x->drv->copy_from(x->dev, x->c, ti, &mi, 0, NULL);
    if (st != MD_NONE) return fail(err, n, x, "tokens", st);
  }
  memset(x->pools, 0, sizeof x->pools);
  x->ia = (md_request_arg){.pool = 0};
  x->oa = (md_request_arg){.pool = 1};
  switch (x->which) {
    case CASE_REGISTERED:
      x->pools[0] = (md_request_pool){.is_token = 2, .token = ri};
      x->pools[1] = (md_request_pool){.is_token = 2, .token = ro};
      x->ia.length = x->oa.length = B14;
      break;
    case CASE_TOKENS:
      x->pools[0] = (md_request_pool){.is_token = 1, .token = ti};
      x->pools[1] = (md_request_pool){.is_token = 1, .token = to};
      break;
    default:
      x->pools[0] = (md_request_pool){.is_token = 0, .memory = mi};
      x->pools[1] = (md_request_pool){.is_token = 2, .token = ro};
      x->ia.length = x->oa.length = B14;
      break;
  }
  x->req = (md_request){.n_inputs = 1, .inputs = &x->ia, .n_outputs = 1, .outputs = &x->oa, .n_pools = 2, .pools = x->pools};
  md_output_shape sh[1];
  md_timing tm;
  for (unsigned i = 0; i < 200; i++)
    if ((st = x->drv->execute(x->dev, x->c, x->p, &x->req, sh, 1, &tm)) != MD_NONE) return fail(err, n, x, "warm-up", st);
  return 0;
}

/* N_EXEC executions, counted. */
static int body(void *arg, char *err, size_t n) {
  exec_case *x = arg;
  md_output_shape sh[1];
  md_timing tm;
  for (unsigned i = 0; i < N_EXEC; i++) {
    md_status st = x->drv->execute(x->dev, x->c, x->p, &x->req, sh, 1, &tm);
    if (st != MD_NONE) return fail(err, n, x, "execute", st);
  }
  return 0;
}

static md_syscount run_case(int which) {
  if (!md_syscount_supported()) cr_skip_test("system calls are counted on x86-64 builds without sanitizers only");
  static exec_case x;
  memset(&x, 0, sizeof x);
  x.which = which;
  md_syscount c;
  char err[256];
  cr_assert_eq(md_syscount_run(prepare, body, &x, &c, err, sizeof err), 0, "%s", err);
  return c;
}

Test(syscalls, an_execution_on_registered_pools_makes_none) {
  md_syscount r = run_case(CASE_REGISTERED);
  char calls[512];
  md_syscount_list(&r, calls, sizeof calls);
  cr_expect_eq(r.total, 0, "%llu system calls in %u executions:%s", (unsigned long long)r.total, N_EXEC, calls);
}

Test(syscalls, an_execution_on_tokens_makes_none) {
  md_syscount r = run_case(CASE_TOKENS);
  char calls[512];
  md_syscount_list(&r, calls, sizeof calls);
  cr_expect_eq(r.total, 0, "%llu system calls in %u executions:%s", (unsigned long long)r.total, N_EXEC, calls);
}

Test(syscalls, a_cached_descriptor_costs_at_most_one) {
  md_syscount r = run_case(CASE_DESCRIPTOR);
  char calls[512];
  md_syscount_list(&r, calls, sizeof calls);
  cr_expect_leq(r.total, (uint64_t)N_EXEC, "%llu system calls in %u executions with one descriptor pool:%s",
                (unsigned long long)r.total, N_EXEC, calls);
}
