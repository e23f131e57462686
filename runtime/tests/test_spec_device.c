/* test_spec_device.c - black-box rules for open_device's config (SPEC section 1), capabilities,
 * mem_limit (SPEC section 3: over the limit is RESOURCE_EXHAUSTED_*, never a crash), seeds, and
 * last_error (never NULL, names the problem). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static const uint32_t D23[2] = {2, 3};
#define B23 24u

/* A device used to read the calling thread's last_error after a failed open_device (which
 * yields no device): the message is the thread's, whatever the device. */
static mdt_env e;
static void setup(void) { mdt_env_open(&e, NULL); }
static void teardown(void) { mdt_env_close(&e, 0); }
TestSuite(config, .init = setup, .fini = teardown);
TestSuite(capabilities);
TestSuite(mem_limit);
TestSuite(last_error, .init = setup, .fini = teardown);
TestSuite(seed);

static md_status try_open(const char *config) {
  md_device *d = NULL;
  md_status st = e.drv->open_device(config, &d);
  if (st == MD_NONE) {
    cr_expect_not_null(d);
    if (d) e.drv->close_device(d);
  }
  return st;
}

/* ---- config ---- */

Test(config, unknown_key_rejected_naming_the_key) {
  cr_assert_eq(try_open("backend=sim;frobnicate=1"), MD_INVALID_ARGUMENT);
  const char *msg = e.drv->last_error(e.dev);
  cr_expect(strstr(msg, "frobnicate") != NULL, "message does not name the key: %s", msg);
}

Test(config, unknown_key_alone_rejected) {
  cr_expect_eq(try_open("colour=blue"), MD_INVALID_ARGUMENT);
  cr_expect(strstr(e.drv->last_error(e.dev), "colour") != NULL, "%s", e.drv->last_error(e.dev));
}

Test(config, every_documented_key_accepted) {
  cr_expect_eq(try_open("backend=sim;mem_limit=1048576;seed=7;latency_ns=1000"), MD_NONE, "%s",
               e.drv->last_error(e.dev));
}

Test(config, empty_config_accepted) {
  cr_expect_eq(try_open(""), MD_NONE, "%s", e.drv->last_error(e.dev));
}

Test(config, unknown_backend_rejected) {
  cr_expect_eq(try_open("backend=warp9"), MD_INVALID_ARGUMENT);
}

Test(config, malformed_pair_rejected) {
  cr_expect_eq(try_open("backend"), MD_INVALID_ARGUMENT);
}

Test(config, non_numeric_mem_limit_rejected) {
  cr_expect_eq(try_open("backend=sim;mem_limit=lots"), MD_INVALID_ARGUMENT);
}

/* ---- capabilities ---- */

static void caps_of(const char *config, md_capabilities *caps) {
  mdt_env x;
  mdt_env_open(&x, config);
  memset(caps, 0, sizeof *caps);
  caps->struct_size = sizeof *caps;
  cr_assert_eq(x.drv->get_capabilities(x.dev, caps), MD_NONE, "%s", x.drv->last_error(x.dev));
  mdt_env_close(&x, 0);
}

Test(capabilities, sim_backend_reports_sim_and_memory_domains) {
  md_capabilities caps;
  caps_of("backend=sim", &caps);
  cr_expect_str_eq(caps.backend, "sim");
  cr_expect_eq(caps.supports_memory_domains, 1u);
  cr_expect_eq(caps.struct_size, (uint32_t)sizeof caps);
  cr_expect_gt(caps.max_buffer_bytes, 0u);
  cr_expect_neq(caps.device_name[0], '\0');
}

Test(capabilities, auto_backend_reports_the_backend_it_picked) {
  md_capabilities caps;
  caps_of("backend=auto", &caps);
  cr_expect(strcmp(caps.backend, "sim") == 0 || strcmp(caps.backend, "hip") == 0,
            "backend \"%s\" is neither sim nor hip", caps.backend);
}

Test(capabilities, max_buffer_bytes_within_mem_limit) {
  md_capabilities caps;
  caps_of("backend=sim;mem_limit=65536", &caps);
  cr_expect_leq(caps.max_buffer_bytes, 65536u);
  cr_expect_gt(caps.max_buffer_bytes, 0u);
}

Test(capabilities, float_add_supported) {
  mdt_env x;
  mdt_env_open(&x, NULL);
  mdt_model b;
  uint8_t sup[4] = {7, 7, 7, 7};
  cr_expect_eq(x.drv->get_supported_operations(x.dev, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), sup), MD_NONE);
  cr_expect_eq(sup[0], 1);
  mdt_env_close(&x, 0);
}

/* ---- mem_limit ---- */

/* ADD float32 [n, n] on a device with mem_limit; allocates output buffers of 4*n*n bytes. */
static md_handle big_model(mdt_env *x, uint32_t n) {
  uint32_t d[2] = {n, n};
  mdt_model b;
  return mdt_prepare(x, mdt_add_model(&b, 2, d, 2, d, 2, d, 0));
}

static int exhausted(md_status st) {
  return st == MD_RESOURCE_EXHAUSTED_TRANSIENT || st == MD_RESOURCE_EXHAUSTED_PERSISTENT;
}

Test(mem_limit, allocation_over_the_limit_is_resource_exhausted) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=16384");
  md_handle p = big_model(&x, 128); /* 64 KiB a buffer */
  md_token t = 0;
  md_status st = mdt_try_alloc(&x, x.client, p, true, 0, 0, NULL, &t);
  cr_expect(exhausted(st), "status %d", (int)st);
  cr_expect_eq(x.drv->release_prepared_model(x.dev, x.client, p), MD_NONE);
  mdt_env_close(&x, 0);
}

Test(mem_limit, allocations_stop_at_the_limit_and_resume_after_free) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=65536");
  md_handle p = big_model(&x, 64); /* 16 KiB a buffer: at most 4 fit */
  md_token t[8];
  int n = 0;
  md_status st = MD_NONE;
  while (n < 8) {
    st = mdt_try_alloc(&x, x.client, p, true, 0, 0, NULL, &t[n]);
    if (st != MD_NONE) break;
    n++;
  }
  cr_expect_leq(n, 4, "%d buffers of 16 KiB under a 64 KiB limit", n);
  cr_expect_geq(n, 1);
  cr_expect(exhausted(st), "status %d", (int)st);
  if (n > 0) {
    cr_expect_eq(x.drv->free_buffer(x.dev, x.client, t[--n]), MD_NONE);
    cr_expect_eq(mdt_try_alloc(&x, x.client, p, true, 0, 0, NULL, &t[n]), MD_NONE, "freed memory not reusable: %s",
                 x.drv->last_error(x.dev));
    n++;
  }
  for (int i = 0; i < n; i++) x.drv->free_buffer(x.dev, x.client, t[i]);
  cr_expect_eq(x.drv->release_prepared_model(x.dev, x.client, p), MD_NONE);
  mdt_env_close(&x, 0);
}

Test(mem_limit, close_client_returns_its_memory) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=65536");
  for (int round = 0; round < 3; round++) {
    md_handle c = mdt_open_client(&x);
    uint32_t d[2] = {64, 64};
    mdt_model b;
    md_handle p = mdt_prepare_for(&x, c, mdt_add_model(&b, 2, d, 2, d, 2, d, 0));
    md_token t;
    int n = 0;
    while (n < 8 && mdt_try_alloc(&x, c, p, true, 0, 0, NULL, &t) == MD_NONE) n++;
    cr_expect_geq(n, 1, "round %d: nothing could be allocated", round);
    md_leak_report lr;
    mdt_close_client(&x, c, &lr); /* leaks everything on purpose */
    cr_expect_eq(lr.buffers, (uint32_t)n);
  }
  mdt_env_close(&x, 0);
}

Test(mem_limit, execution_growing_a_buffer_over_the_limit_fails_cleanly) {
  mdt_env x;
  mdt_env_open(&x, "backend=sim;mem_limit=65536");
  static const uint32_t d0[2] = {0, 64};
  mdt_model b;
  md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, d0, 2, d0, 2, d0, 0));
  md_token t = mdt_alloc(&x, p, true, 0, 0, NULL);
  /* 512 rows of 64 floats: 128 KiB, twice the limit. Inputs live in pools, not on the device
   * budget; the output buffer would have to grow past it. */
  static float a[512 * 64];
  uint32_t d[2] = {512, 64};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, sizeof a, 2, d);
  mdt_req_in_data(&r, a, sizeof a, 2, d);
  mdt_req_out_token(&r, t, 0, NULL);
  md_output_shape sh[8];
  md_timing tm;
  md_status st = mdt_exec(&x, p, &r, sh, &tm);
  cr_expect_neq(st, MD_NONE);
  cr_expect_neq(st, MD_OUTPUT_INSUFFICIENT_SIZE, "device memory is never OUTPUT_INSUFFICIENT_SIZE");
  mdt_req_fini(&r);
  /* The buffer still works at a size that fits. */
  float small[128];
  mdt_iota(small, 128, 0);
  uint32_t d2[2] = {2, 64};
  cr_expect_eq(mdt_copy_from(&x, x.client, t, small, sizeof small, 2, d2), MD_NONE, "%s", x.drv->last_error(x.dev));
  mdt_free(&x, t);
  mdt_release(&x, p);
  mdt_env_close(&x, 0);
}

/* ---- seed ---- */

static void tokens_with_seed(const char *config, md_token *out, int n) {
  mdt_env x;
  mdt_env_open(&x, config);
  mdt_model b;
  md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  for (int i = 0; i < n; i++) out[i] = mdt_alloc(&x, p, false, 0, 0, NULL);
  for (int i = 0; i < n; i++) mdt_free(&x, out[i]);
  mdt_release(&x, p);
  mdt_env_close(&x, 0);
}

Test(seed, same_seed_gives_same_tokens) {
  md_token a[4], b[4];
  tokens_with_seed("backend=sim;seed=1234", a, 4);
  tokens_with_seed("backend=sim;seed=1234", b, 4);
  for (int i = 0; i < 4; i++) cr_expect_eq(a[i], b[i], "token %d differs", i);
}

Test(seed, other_seed_gives_other_tokens) {
  md_token a[4], b[4];
  tokens_with_seed("backend=sim;seed=1234", a, 4);
  tokens_with_seed("backend=sim;seed=1235", b, 4);
  int same = 0;
  for (int i = 0; i < 4; i++) same += a[i] == b[i];
  cr_expect_eq(same, 0, "%d tokens equal across seeds", same);
}

/* ---- last_error ---- */

Test(last_error, never_null) {
  cr_expect_not_null(e.drv->last_error(e.dev), "before any failure");
  md_handle c = mdt_open_client(&e);
  cr_expect_not_null(e.drv->last_error(e.dev), "after a success");
  mdt_close_client(&e, c, NULL);
  cr_expect_eq(e.drv->free_buffer(e.dev, e.client, 0), MD_INVALID_ARGUMENT);
  cr_expect_not_null(e.drv->last_error(e.dev), "after a failure");
}

static void *fresh_thread(void *arg) {
  const char *msg = e.drv->last_error(e.dev);
  *(int *)arg = msg != NULL;
  return NULL;
}

Test(last_error, never_null_on_a_thread_that_never_failed) {
  int ok = 0;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, fresh_thread, &ok), 0);
  pthread_join(th, NULL);
  cr_expect(ok, "last_error returned NULL on a new thread");
}

Test(last_error, names_the_role_rule) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = 0;
  md_buffer_desc desc = {0, NULL};
  md_buffer_role r = {0, 0, 0.0f};
  cr_assert_eq(e.drv->allocate(e.dev, e.client, &desc, &p, 1, &r, 1, NULL, 0, &t), MD_INVALID_ARGUMENT);
  const char *msg = e.drv->last_error(e.dev);
  cr_expect(strstr(msg, "probability") != NULL, "allocate with probability 0: %s", msg);
  mdt_release(&e, p);
}

Test(last_error, names_the_size_of_a_copy) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  cr_assert_eq(mdt_copy_to(&e, e.client, t, NULL, 20), MD_INVALID_ARGUMENT);
  const char *msg = e.drv->last_error(e.dev);
  cr_expect(strstr(msg, "20") != NULL && strstr(msg, "24") != NULL, "sizes not named: %s", msg);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

/* ---- close_device with everything still open ---- */

Test(capabilities, close_device_releases_live_objects) {
  /* No close_client first: close_device must release clients, prepared models, buffers and
   * events itself (the sanitizer builds see any leak or use after free). */
  mdt_env x;
  mdt_env_open(&x, "backend=sim;latency_ns=5000000");
  mdt_model b;
  md_handle p = mdt_prepare(&x, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&x, p, true, 0, 0, NULL);
  float a[6] = {1, 2, 3, 4, 5, 6};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_token(&r, t, 0, NULL);
  md_handle ev = 0;
  cr_assert_eq(x.drv->execute_async(x.dev, x.client, p, mdt_req(&r), &ev), MD_NONE, "%s", x.drv->last_error(x.dev));
  x.drv->close_device(x.dev); /* with an execution likely in flight */
  mdt_req_fini(&r);
}

/* ---- NULL where a pointer is required: a status, never a crash ----
 * SPEC does not list these; a driver that fuzzers call must not crash on them, and
 * INVALID_ARGUMENT is the status for a malformed argument. */
TestSuite(null_args, .init = setup, .fini = teardown);

Test(null_args, open_device_without_out_rejected) {
  cr_expect_eq(e.drv->open_device("backend=sim", NULL), MD_INVALID_ARGUMENT);
}

Test(null_args, get_capabilities_without_out_rejected) {
  cr_expect_eq(e.drv->get_capabilities(e.dev, NULL), MD_INVALID_ARGUMENT);
}

Test(null_args, open_client_without_out_rejected) {
  cr_expect_eq(e.drv->open_client(e.dev, NULL), MD_INVALID_ARGUMENT);
}

Test(null_args, prepare_model_without_model_or_out_rejected) {
  md_handle p = 0;
  mdt_model b;
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, NULL, &p), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->prepare_model(e.dev, e.client, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0), NULL),
               MD_INVALID_ARGUMENT);
}

Test(null_args, allocate_with_missing_arrays_rejected) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_buffer_desc desc = {0, NULL}, bad_desc = {2, NULL};
  md_buffer_role role = {0, 0, 1.0f};
  md_token t = 0;
  cr_expect_eq(e.drv->allocate(e.dev, e.client, &desc, NULL, 1, &role, 1, NULL, 0, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->allocate(e.dev, e.client, &desc, &p, 1, NULL, 1, NULL, 0, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->allocate(e.dev, e.client, &desc, &p, 1, NULL, 0, NULL, 1, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->allocate(e.dev, e.client, &bad_desc, &p, 1, &role, 1, NULL, 0, &t), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->allocate(e.dev, e.client, &desc, &p, 1, &role, 1, NULL, 0, NULL), MD_INVALID_ARGUMENT);
  mdt_release(&e, p);
}

Test(null_args, copies_without_memory_or_dims_rejected) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_token t = mdt_alloc(&e, p, false, 0, 0, NULL);
  cr_expect_eq(e.drv->copy_to(e.dev, e.client, t, NULL), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->copy_from(e.dev, e.client, t, NULL, 0, NULL), MD_INVALID_ARGUMENT);
  int fd = mdt_memfd(NULL, B23);
  md_memory m = mdt_ashmem(fd, B23);
  cr_expect_eq(e.drv->copy_from(e.dev, e.client, t, &m, 2, NULL), MD_INVALID_ARGUMENT);
  close(fd);
  mdt_free(&e, t);
  mdt_release(&e, p);
}

Test(null_args, executions_without_request_or_arrays_rejected) {
  mdt_model b;
  md_handle p = mdt_prepare(&e, mdt_add_model(&b, 2, D23, 2, D23, 2, D23, 0));
  md_output_shape sh[1];
  md_timing tm;
  md_handle ev = 0;
  cr_expect_eq(e.drv->execute(e.dev, e.client, p, NULL, sh, 1, &tm), MD_INVALID_ARGUMENT);
  cr_expect_eq(e.drv->execute_async(e.dev, e.client, p, NULL, &ev), MD_INVALID_ARGUMENT);
  md_request req = {2, NULL, 1, NULL, 0, NULL};
  cr_expect_eq(e.drv->execute(e.dev, e.client, p, &req, sh, 1, &tm), MD_INVALID_ARGUMENT);
  float a[6] = {0};
  mdt_request r;
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  r.in[0].rank = 2;
  r.in[0].dims = NULL; /* rank without dims */
  cr_expect_eq(e.drv->execute(e.dev, e.client, p, mdt_req(&r), sh, 1, &tm), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_req_init(&r);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_in_data(&r, a, B23, 0, NULL);
  mdt_req_out_pool(&r, B23, 0, NULL);
  cr_expect_eq(e.drv->execute_async(e.dev, e.client, p, mdt_req(&r), NULL), MD_INVALID_ARGUMENT);
  mdt_req_fini(&r);
  mdt_release(&e, p);
}
