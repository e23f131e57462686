/* causes_driver.c - a driver that fails for exactly three causes, for the tests of cause groups
 * and crash stacks (test_causes.c, make test-browser). It wraps the reference driver (dlopen'ed
 * from MD_DRIVER_SO) and breaks it by the first operation of the model:
 *   ADD  prepare_model refuses: GENERAL_FAILURE "prepare_model: ADD of N operands at 0x... is not
 *        implemented" (a number and an address that differ per model: one cause once masked)
 *   MUL  execute refuses: GENERAL_FAILURE "execute: MUL on N elements: kernel missing"
 *   SUB  execute dies of SIGSEGV in causes_sub_kernel, at the line marked MDC_TEST_CRASH_LINE
 * Everything else is the reference driver's. Built twice: with debug information
 * (mdc_test_causes_driver) and without (mdc_test_causes_nodebug_driver, -g0): the crash's
 * stack names causes_sub_kernel in both, and its file:line only in the first. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md/driver.h"

void causes_sub_kernel(uint32_t n);

static const md_driver *real;
static md_driver table;

/* The calling thread's failure made here (last_error answers it until the next call). */
static _Thread_local char own_msg[256];
static _Thread_local int own;

static struct {
  md_handle prepared;
  md_operation_type op;
} kinds[1024];

static md_operation_type kind_of(md_handle prepared) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].prepared == prepared) return kinds[i].op;
  return MD_OP_CUSTOM;
}

static md_status refuse(const char *fmt, unsigned n, const void *p) {
  snprintf(own_msg, sizeof own_msg, fmt, n, p);
  own = 1;
  return MD_GENERAL_FAILURE;
}

static const char *causes_last_error(md_device *d) { return own ? own_msg : real->last_error(d); }

/* Written through a pointer the compiler cannot see is NULL, so it is a real store (a constant
 * NULL store would be turned into a trap instruction: SIGILL). */
static int *volatile nowhere;

/* Not static and never cloned, so its symbol keeps its name in both builds. */
__attribute__((noinline, noclone)) void causes_sub_kernel(uint32_t n) {
  *nowhere = (int)n; /* MDC_TEST_CRASH_LINE */
}

static md_status causes_prepare_model(md_device *d, md_handle client, const md_model *m, md_handle *prepared) {
  own = 0;
  if (m && m->n_operations && m->operations[0].type == MD_OP_ADD)
    return refuse("prepare_model: ADD of %u operands at %p is unsupported", m->n_operands, (const void *)m);
  md_status st = real->prepare_model(d, client, m, prepared);
  if (st == MD_NONE && m && m->n_operations && prepared)
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
      if (!kinds[i].prepared) {
        kinds[i].prepared = *prepared;
        kinds[i].op = m->operations[0].type;
        break;
      }
  return st;
}

static md_status causes_execute(md_device *d, md_handle client, md_handle prepared, const md_request *req,
                                md_output_shape *shapes, uint32_t n_shapes, md_timing *timing) {
  own = 0;
  md_operation_type op = kind_of(prepared);
  uint32_t n = req && req->n_inputs ? (uint32_t)(req->inputs[0].length / 4) : 0;
  if (op == MD_OP_MUL) return refuse("execute: MUL on %u elements: kernel missing (request %p)", n, req);
  if (op == MD_OP_SUB) causes_sub_kernel(n);
  return real->execute(d, client, prepared, req, shapes, n_shapes, timing);
}

const md_driver *md_driver_entry(uint32_t abi_version) {
  if (!real) {
    void *h = dlopen(MD_DRIVER_SO, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "md_driver_entry") : NULL;
    if (!sym) return NULL;
    const md_driver *(*entry)(uint32_t);
    memcpy(&entry, &sym, sizeof entry);
    real = entry(abi_version);
    if (!real) return NULL;
    table = *real;
    table.name = "mdc-test-causes";
    table.prepare_model = causes_prepare_model;
    table.execute = causes_execute;
    table.last_error = causes_last_error;
  }
  return &table;
}
