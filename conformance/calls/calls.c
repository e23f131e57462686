/* calls.c - the table of driver calls (mdc/calls.h): every call's arguments, what it produces
 * and what may be expected of it, and the lookups over it. */
#include "mdc/calls.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "md/driver.h"

const mdc_arg_desc mdc_args[MDC_A_COUNT] = {
#define MDC_X(e, k, t, o, d) [MDC_A_##e] = {k, t, o, d},
    MDC_ARG_MAP(MDC_X)
#undef MDC_X
};

#define SLOT(n) offsetof(md_driver, n)
#define A(a) {MDC_A_##a, 0}
#define OPT(a) {MDC_A_##a, 1}
#define CLIENT_CALL OPT(DEVICE), OPT(CLIENT)

const mdc_call_desc mdc_calls[MDC_CALL_COUNT] = {
    [MDC_CALL_OPEN_DEVICE] = {MDC_CALL_OPEN_DEVICE, "open_device", SLOT(open_device), 1, {OPT(CONFIG)},
                              MDC_OBJ_DEVICE, 0, {0}, 0, "opens a device with a config"},
    [MDC_CALL_CLOSE_DEVICE] = {MDC_CALL_CLOSE_DEVICE, "close_device", SLOT(close_device), 1, {OPT(DEVICE)},
                               MDC_OBJ_NONE, 0, {0}, 0, "closes a device and all it holds"},
    [MDC_CALL_GET_CAPABILITIES] = {MDC_CALL_GET_CAPABILITIES, "get_capabilities", SLOT(get_capabilities), 1,
                                   {OPT(DEVICE)}, MDC_OBJ_NONE, 2,
                                   {MDC_X_BACKEND, MDC_X_SUPPORTS_MEMORY_DOMAINS}, MDC_CALL_IN_BLOCK,
                                   "reads the device's capabilities"},
    [MDC_CALL_GET_SUPPORTED_OPERATIONS] = {MDC_CALL_GET_SUPPORTED_OPERATIONS, "get_supported_operations",
                                           SLOT(get_supported_operations), 2, {OPT(DEVICE), A(MODEL)},
                                           MDC_OBJ_NONE, 1, {MDC_X_SUPPORTED}, MDC_CALL_IN_BLOCK,
                                           "which operations of a model the device runs"},
    [MDC_CALL_OPEN_CLIENT] = {MDC_CALL_OPEN_CLIENT, "open_client", SLOT(open_client), 1, {OPT(DEVICE)},
                              MDC_OBJ_CLIENT, 0, {0}, MDC_CALL_IN_BLOCK, "opens a client"},
    [MDC_CALL_CLOSE_CLIENT] = {MDC_CALL_CLOSE_CLIENT, "close_client", SLOT(close_client), 2, {CLIENT_CALL},
                               MDC_OBJ_NONE, 1, {MDC_X_LEAKS}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                               "closes a client, reporting what it left live"},
    [MDC_CALL_PREPARE_MODEL] = {MDC_CALL_PREPARE_MODEL, "prepare_model", SLOT(prepare_model), 3,
                                {CLIENT_CALL, A(MODEL)}, MDC_OBJ_PREPARED, 0, {0},
                                MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT, "prepares a model"},
    [MDC_CALL_RELEASE_PREPARED_MODEL] = {MDC_CALL_RELEASE_PREPARED_MODEL, "release_prepared_model",
                                         SLOT(release_prepared_model), 3, {CLIENT_CALL, A(PREPARED)},
                                         MDC_OBJ_NONE, 0, {0}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                                         "releases a prepared model"},
    [MDC_CALL_ALLOCATE] = {MDC_CALL_ALLOCATE, "allocate", SLOT(allocate), 6,
                           {CLIENT_CALL, OPT(DESC), OPT(PREPARED_LIST), OPT(INPUT_ROLES), OPT(OUTPUT_ROLES)},
                           MDC_OBJ_TOKEN, 0, {0}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                           "allocates a driver-managed buffer for roles"},
    [MDC_CALL_COPY_TO] = {MDC_CALL_COPY_TO, "copy_to", SLOT(copy_to), 4, {CLIENT_CALL, A(TOKEN), A(DST)},
                          MDC_OBJ_NONE, 0, {0}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                          "copies a buffer out to a memory"},
    [MDC_CALL_COPY_FROM] = {MDC_CALL_COPY_FROM, "copy_from", SLOT(copy_from), 5,
                            {CLIENT_CALL, A(TOKEN), A(SRC), OPT(DIMS)}, MDC_OBJ_NONE, 0, {0},
                            MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT, "copies a memory into a buffer, with dims"},
    [MDC_CALL_FREE_BUFFER] = {MDC_CALL_FREE_BUFFER, "free_buffer", SLOT(free_buffer), 3,
                              {CLIENT_CALL, A(TOKEN)}, MDC_OBJ_NONE, 0, {0},
                              MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT, "frees a buffer"},
    [MDC_CALL_EXECUTE] = {MDC_CALL_EXECUTE, "execute", SLOT(execute), 5,
                          {CLIENT_CALL, A(PREPARED), A(REQUEST), OPT(N_SHAPES)}, MDC_OBJ_NONE, 2,
                          {MDC_X_SHAPES, MDC_X_TIMING}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                          "runs a request synchronously"},
    [MDC_CALL_EXECUTE_ASYNC] = {MDC_CALL_EXECUTE_ASYNC, "execute_async", SLOT(execute_async), 4,
                                {CLIENT_CALL, A(PREPARED), A(REQUEST)}, MDC_OBJ_EVENT, 0, {0},
                                MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT, "starts a request; `as` names its event"},
    [MDC_CALL_WAIT_EVENT] = {MDC_CALL_WAIT_EVENT, "wait_event", SLOT(wait_event), 5,
                             {CLIENT_CALL, A(EVENT), OPT(TIMEOUT_NS), OPT(N_SHAPES)}, MDC_OBJ_NONE, 2,
                             {MDC_X_SHAPES, MDC_X_TIMING}, MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT,
                             "waits for an event: the execution's status, shapes and timing"},
    [MDC_CALL_REGISTER_MEMORY] = {MDC_CALL_REGISTER_MEMORY, "register_memory", SLOT(register_memory), 3,
                                  {CLIENT_CALL, A(MEMORY)}, MDC_OBJ_POOL, 0, {0},
                                  MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT | MDC_CALL_V11 | MDC_CALL_OPTIONAL,
                                  "registers a pool once (SPEC 9); `as` names it for requests"},
    [MDC_CALL_UNREGISTER_MEMORY] = {MDC_CALL_UNREGISTER_MEMORY, "unregister_memory", SLOT(unregister_memory), 3,
                                    {CLIENT_CALL, A(POOL)}, MDC_OBJ_NONE, 0, {0},
                                    MDC_CALL_IN_BLOCK | MDC_CALL_CLIENT | MDC_CALL_V11 | MDC_CALL_OPTIONAL,
                                    "unregisters a registered pool (SPEC 9)"},
};

static const char *const obj_names[MDC_OBJ_COUNT] = {
#define MDC_X(e, s) [MDC_OBJ_##e] = s,
    MDC_OBJ_MAP(MDC_X)
#undef MDC_X
};

static const char *const expect_keys[MDC_X_COUNT] = {
#define MDC_X(e, k) [MDC_X_##e] = k,
    MDC_EXPECT_MAP(MDC_X)
#undef MDC_X
};

const char *mdc_obj_name(mdc_obj k) { return (unsigned)k < MDC_OBJ_COUNT ? obj_names[k] : "?"; }

const char *mdc_expect_key(mdc_expect_id x) { return (unsigned)x < MDC_X_COUNT ? expect_keys[x] : NULL; }

int mdc_call_has_arg(const mdc_call_desc *c, mdc_arg_id a) {
  for (uint32_t i = 0; i < c->n_args; i++)
    if (c->args[i].id == a) return 1;
  return 0;
}

int mdc_call_has_expect(const mdc_call_desc *c, mdc_expect_id x) {
  for (uint32_t i = 0; i < c->n_expect; i++)
    if (c->expect[i] == x) return 1;
  return 0;
}

/* The calls sorted by name, made once, for a binary search. */
static mdc_call by_name[MDC_CALL_COUNT];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static int cmp_calls(const void *a, const void *b) {
  return strcmp(mdc_calls[*(const mdc_call *)a].name, mdc_calls[*(const mdc_call *)b].name);
}

static void sort_names(void) {
  for (unsigned i = 0; i < MDC_CALL_COUNT; i++) by_name[i] = (mdc_call)i;
  qsort(by_name, MDC_CALL_COUNT, sizeof by_name[0], cmp_calls);
}

static int cmp_name(const void *key, const void *elem) {
  return strcmp(key, mdc_calls[*(const mdc_call *)elem].name);
}

const mdc_call_desc *mdc_call_find(const char *name) {
  pthread_once(&by_name_once, sort_names);
  const mdc_call *c = bsearch(name, by_name, MDC_CALL_COUNT, sizeof by_name[0], cmp_name);
  return c ? &mdc_calls[*c] : NULL;
}
