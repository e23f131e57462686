/* test_unit_objects.c - white-box tests of the runtime's objects (objects_int.h): a buffer's
 * storage protocol (buffer.c: in-place and fresh writes, commits, aborts, reads, pinned reads,
 * roles, sizes, destruction), clients and their leak reports (client.c), prepared models and
 * their device constants (prepared.c), on a sim device whose backend table is wrapped by a spy
 * that counts allocations and frees and can refuse an allocation. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <string.h>

#include <sodium.h>

#include "support.h"
#include "device_int.h"
#include "error.h"
#include "objects_int.h"
#include "md/backend.h"

static const md_backend_ops *real;
static md_backend_ops spy;
static unsigned n_alloc, n_free, fail_alloc, fail_alloc_from;
static uint64_t last_alloc_bytes;

static md_status spy_alloc(md_backend *b, uint64_t bytes, md_devptr *out) {
  ++n_alloc;
  last_alloc_bytes = bytes;
  if (n_alloc == fail_alloc || (fail_alloc_from && n_alloc >= fail_alloc_from))
    return md_backend_fail(NULL, 0, MD_RESOURCE_EXHAUSTED_TRANSIENT, "spy");
  return real->alloc(b, bytes, out);
}
static void spy_free(md_backend *b, md_devptr p) {
  if (p) n_free++;
  real->free(b, p);
}

static mdt_env env;
static md_handle prep;          /* ADD of float32 [2, 3] */
static md_handle prep_dyn;      /* ADD of float32 [0, 3] */

static void setup(void) {
  mdt_env_open(&env, "backend=sim");
  real = env.dev->be;
  spy = *real;
  spy.alloc = spy_alloc;
  spy.free = spy_free;
  env.dev->be = &spy;
  uint32_t d23[2] = {2, 3}, d03[2] = {0, 3};
  prep = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, d23, 0));
  prep_dyn = mdt_prepare(&env, mdt_binary_model(MD_OP_ADD, 2, d03, 0));
  n_alloc = n_free = fail_alloc = fail_alloc_from = 0;
}
static void teardown(void) {
  env.dev->be = real;
  mdt_env_close(&env, 1);
}

TestSuite(unit_objects, .init = setup, .fini = teardown);

static md__hentry *entry_of(md_handle h, md__kind kind) {
  md__hentry *e = md__handle_get(&env.dev->ht, h, kind);
  cr_assert_not_null(e);
  return e;
}
static void put(md__hentry *e) { md__handle_put(&env.dev->ht, e); }
static uint32_t refs(const md__storage *s) { return atomic_load(&s->ref.n); }

/* ---- a buffer's storage ---- */

Test(unit_objects, allocate_embeds_first_storage_of_the_exact_size) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  cr_assert_eq(b->st, &b->first);
  cr_assert(b->first.embedded);
  cr_assert_eq(b->first.capacity, 24u);
  cr_assert_neq(b->first.mem, 0u);
  cr_assert_eq(refs(&b->first), 1u);
  cr_assert_not(b->initialized);
  cr_assert_not(b->writing);
  cr_assert_eq(b->init_rank, 2);
  cr_assert_eq(b->cur_rank, 2);
  cr_assert_eq(md__buf_init_dims(b)[0], 2u);
  cr_assert_eq(md__buf_init_dims(b)[1], 3u);
  cr_assert_eq(b->type, MD_TENSOR_FLOAT32);
  cr_assert_eq(b->n_roles, 1u);
  cr_assert_eq(md__buffer_bytes(b), 24u);
  cr_assert_eq(e->tag[0], prep);
  cr_assert_eq(e->tag[1], md__role_tag(0, 0));
  put(e);
}

Test(unit_objects, unknown_dims_have_no_storage_until_written) {
  uint32_t d[2] = {0, 3};
  md_token t = mdt_alloc(&env, prep_dyn, true, 0, 0, NULL);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  cr_assert_null(b->st);
  cr_assert_eq(md__buffer_bytes(b), 0u);
  cr_assert_eq(n_alloc, 0u);
  md__write w;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 36, &w), MD_NONE);
  cr_assert_not(w.in_place, "no storage yet: fresh");
  cr_assert_eq(w.st->capacity, 36u);
  cr_assert_eq(last_alloc_bytes, 36u);
  cr_assert_eq(refs(w.st), 1u);
  cr_assert_not(w.st->embedded);
  uint32_t nd[2] = {3, 3};
  md__storage *s = w.st;
  md__buffer_write_commit(env.dev, b, &w, 2, nd);
  cr_assert_null(w.st);
  cr_assert_eq(b->st, s);
  cr_assert_eq(refs(s), 1u);
  cr_assert(b->initialized);
  cr_assert_eq(b->cur_rank, 2);
  cr_assert_eq(md__buf_cur_dims(b)[0], 3u);
  cr_assert_eq(md__buf_init_dims(b)[0], 0u, "the initial dims never change");
  cr_assert_eq(md__buffer_bytes(b), 36u);
  /* Back to the initial dims: unknown again, 0 bytes. */
  md__buffer_reset_dims(b);
  cr_assert_eq(md__buf_cur_dims(b)[0], 0u);
  cr_assert_eq(md__buf_cur_dims(b)[1], 3u);
  cr_assert_eq(md__buffer_bytes(b), 0u);
  (void)d;
  put(e);
}

Test(unit_objects, write_in_place_marks_writing_and_commit_publishes) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  n_alloc = n_free = 0;
  uint32_t s0 = atomic_load(&b->seq);
  md__write w;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w), MD_NONE);
  cr_assert(w.in_place);
  cr_assert_eq(w.st, &b->first);
  cr_assert_eq(refs(&b->first), 2u);
  cr_assert(b->writing);
  cr_assert_eq(atomic_load(&b->seq), s0 + 2, "one seqlock round, even after");
  cr_assert_eq(n_alloc, 0u);
  /* While written in place: reads fail (being written), a second write goes to fresh storage. */
  md__storage *rs = (md__storage *)1;
  uint32_t rank = 99, dims[MD_MAX_RANK] = {0};
  md__clear_error();
  cr_assert_eq(md__buffer_read_begin(b, &rs, &rank, dims), MD_GENERAL_FAILURE);
  cr_assert_str_eq(md__last_error(), "buffer is not initialized", "not initialized is said first");
  cr_assert_eq(rs, (md__storage *)1);
  cr_assert_eq(rank, 99u);
  md__write w2;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w2), MD_NONE);
  cr_assert_not(w2.in_place);
  cr_assert_neq(w2.st, &b->first);
  cr_assert_eq(w2.st->capacity, 24u);
  cr_assert_eq(n_alloc, 1u);
  cr_assert_eq(refs(&b->first), 2u, "the fresh write holds nothing of the current storage");
  md__buffer_write_abort(env.dev, b, &w2);
  cr_assert_null(w2.st);
  cr_assert_eq(n_free, 1u, "the fresh storage is freed");
  cr_assert(b->writing, "the in-place write still runs");
  cr_assert_eq(refs(&b->first), 2u);
  uint32_t nd[2] = {2, 3};
  md__buffer_write_commit(env.dev, b, &w, 2, nd);
  cr_assert_null(w.st);
  cr_assert_not(b->writing);
  cr_assert(b->initialized);
  cr_assert_eq(b->st, &b->first);
  cr_assert_eq(refs(&b->first), 1u);
  cr_assert_eq(atomic_load(&b->seq) & 1u, 0u);
  /* Now initialized: a read takes a reference and gives the dims. */
  cr_assert_eq(md__buffer_read_begin(b, &rs, &rank, dims), MD_NONE);
  cr_assert_eq(rs, &b->first);
  cr_assert_eq(rank, 2u);
  cr_assert_eq(dims[0], 2u);
  cr_assert_eq(dims[1], 3u);
  cr_assert_eq(refs(&b->first), 2u);
  /* A write while a reader holds the storage: fresh, and the reader keeps the old one. */
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w), MD_NONE);
  cr_assert_not(w.in_place);
  cr_assert_not(b->writing);
  md__storage *fresh = w.st;
  md__buffer_write_commit(env.dev, b, &w, 2, nd);
  cr_assert_eq(b->st, fresh);
  cr_assert_eq(refs(&b->first), 1u, "only the reader holds the old storage");
  unsigned frees = n_free;
  md__storage_put(env.dev, rs);
  cr_assert_eq(n_free, frees + 1, "the last user frees it");
  cr_assert_eq(b->first.mem, 0u);
  md__storage_put(env.dev, NULL);
  put(e);
}

Test(unit_objects, in_place_write_while_writing_is_refused_by_readers_with_being_written) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  md__write w;
  md__buffer_write_begin(env.dev, b, 24, &w);
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w), MD_NONE);
  cr_assert(w.in_place);
  md__storage *rs = (md__storage *)1;
  uint32_t rank = 99, dims[MD_MAX_RANK] = {0};
  cr_assert_eq(md__buffer_read_begin(b, &rs, &rank, dims), MD_GENERAL_FAILURE);
  cr_assert_str_eq(md__last_error(), "buffer is being written by another call");
  cr_assert_eq(rs, (md__storage *)1);
  cr_assert_eq(rank, 99u);
  rank = 0;
  cr_assert_eq(md__buffer_read_snapshot(b, &rs, &rank, dims), MD__READ_BEING_WRITTEN);
  cr_assert_eq(rs, (md__storage *)1, "no reference when not OK");
  cr_assert_eq(rank, 2u, "the dims are given anyway");
  cr_assert_eq(dims[1], 3u);
  /* A smaller write while one runs in place: fresh, never the held storage. */
  md__write w2;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 8, &w2), MD_NONE);
  cr_assert_not(w2.in_place);
  cr_assert_eq(w2.st->capacity, 8u);
  md__buffer_write_abort(env.dev, b, &w2);
  cr_assert_not(b->initialized, "an abort uninitializes");
  md__buffer_write_abort(env.dev, b, &w);
  cr_assert_not(b->writing);
  cr_assert_not(b->initialized);
  cr_assert_eq(refs(&b->first), 1u);
  cr_assert_eq(b->cur_rank, 2, "dims kept");
  cr_assert_eq(md__buffer_read_snapshot(b, &rs, &rank, dims), MD__READ_UNINITIALIZED);
  put(e);
}

Test(unit_objects, larger_write_replaces_the_storage_and_smaller_stays_in_place) {
  uint32_t d[2] = {0, 3};
  md_token t = mdt_alloc(&env, prep_dyn, false, 0, 0, NULL);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  md__write w;
  uint32_t d4[2] = {4, 3}, d1[2] = {1, 3}, d5[2] = {5, 3};
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 48, &w), MD_NONE);
  md__storage *big = w.st;
  md__buffer_write_commit(env.dev, b, &w, 2, d4);
  cr_assert_eq(md__buffer_bytes(b), 48u);
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 12, &w), MD_NONE);
  cr_assert(w.in_place, "smaller fits in place");
  cr_assert_eq(w.st, big);
  md__buffer_write_commit(env.dev, b, &w, 2, d1);
  cr_assert_eq(b->st, big);
  cr_assert_eq(refs(big), 1u);
  cr_assert_eq(md__buffer_bytes(b), 12u, "the current size, not the capacity");
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 48, &w), MD_NONE);
  cr_assert(w.in_place, "exactly the capacity fits");
  md__buffer_write_commit(env.dev, b, &w, 2, d4);
  unsigned frees = n_free;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 60, &w), MD_NONE);
  cr_assert_not(w.in_place, "one row more does not fit");
  md__buffer_write_commit(env.dev, b, &w, 2, d5);
  cr_assert_eq(n_free, frees + 1, "the old storage is freed at the commit");
  cr_assert_eq(md__buffer_bytes(b), 60u);
  (void)d;
  put(e);
}

Test(unit_objects, failed_fresh_allocation_takes_idle_pins_back_once) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  md__write w;
  md__buffer_write_begin(env.dev, b, 24, &w);
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  /* This thread's cache pins the storage (as an execution's read does). */
  md__use u;
  cr_assert_eq(md__handle_use(&env.dev->ht, t, MD__KIND_BUFFER, &u), e);
  void **pin = md__use_pin(&u);
  cr_assert_not_null(pin);
  md__storage *st = NULL;
  uint32_t rank, dims[MD_MAX_RANK];
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, pin, &st, &rank, dims), MD__READ_OK);
  cr_assert_eq(*pin, &b->first);
  cr_assert_eq(st, &b->first);
  cr_assert_eq(refs(&b->first), 2u, "the pin's reference");
  /* A pinned hit moves no count. */
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, pin, &st, &rank, dims), MD__READ_OK);
  cr_assert_eq(refs(&b->first), 2u);
  cr_assert_eq(rank, 2u);
  md__handle_unuse(&env.dev->ht, &u);
  /* The storage is held (by the idle pin): a write needs fresh storage; the device refuses it
   * once, so the idle pin is dropped and the write goes in place. */
  n_alloc = 0;
  fail_alloc = 1;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w), MD_NONE);
  cr_assert(w.in_place);
  cr_assert_eq(n_alloc, 1u);
  cr_assert_eq(refs(&b->first), 2u, "the pin is gone, the write holds it");
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  cr_assert_eq(refs(&b->first), 1u);
  /* Nothing to take back: the refusal is the status, with the size in the message. */
  md__write w2;
  md__buffer_write_begin(env.dev, b, 24, &w);   /* in place: now held by this write */
  n_alloc = 0;
  fail_alloc_from = 1;
  w2.st = (md__storage *)1;
  w2.in_place = true;
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w2), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_str_eq(md__last_error(), "cannot allocate 24 bytes of device memory");
  cr_assert_eq(n_alloc, 1u, "no pin to drop: no second try");
  cr_assert_eq(w2.st, (md__storage *)1, "*w unchanged");
  cr_assert_eq(refs(&b->first), 2u);
  fail_alloc_from = 0;
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  put(e);
}

Test(unit_objects, pinned_read_follows_a_new_storage) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  md__write w;
  md__buffer_write_begin(env.dev, b, 24, &w);
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  void *pin = NULL;
  md__storage *st;
  uint32_t rank, dims[MD_MAX_RANK];
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, NULL, &st, &rank, dims), MD__READ_OK, "no pin: a snapshot");
  cr_assert_eq(refs(&b->first), 2u);
  md__storage_put(env.dev, st);
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, &pin, &st, &rank, dims), MD__READ_OK);
  cr_assert_eq(pin, &b->first);
  cr_assert_eq(refs(&b->first), 2u);
  /* A write goes to fresh storage (the pin holds the old); the next pinned read moves to it. */
  cr_assert_eq(md__buffer_write_begin(env.dev, b, 24, &w), MD_NONE);
  cr_assert_not(w.in_place);
  md__storage *fresh = w.st;
  uint32_t d2[2] = {2, 3};
  md__buffer_write_commit(env.dev, b, &w, 2, d2);
  cr_assert_eq(refs(&b->first), 1u);
  unsigned frees = n_free;
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, &pin, &st, &rank, dims), MD__READ_OK);
  cr_assert_eq(pin, fresh);
  cr_assert_eq(st, fresh);
  cr_assert_eq(refs(fresh), 2u);
  cr_assert_eq(n_free, frees + 1, "the old pin was dropped and was the last user");
  /* Uninitialized: not OK, the pin stays. */
  md__buffer_uninit(b);
  st = NULL;
  cr_assert_eq(md__buffer_read_pinned(env.dev, b, &pin, &st, &rank, dims), MD__READ_UNINITIALIZED);
  cr_assert_null(st);
  cr_assert_eq(pin, fresh);
  md__storage_put(env.dev, pin);
  put(e);
}

Test(unit_objects, roles_beyond_the_first_are_found_in_the_buffer) {
  uint32_t d[2] = {2, 3};
  md_buffer_desc desc = {2, d};
  md_buffer_role in[2] = {{0, 0, 1.0f}, {0, 1, 1.0f}}, out[1] = {{0, 0, 1.0f}};
  md_token t = 0;
  cr_assert_eq(env.drv->allocate(env.dev, env.client, &desc, &prep, 1, in, 2, out, 1, &t), MD_NONE);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  cr_assert_eq(b->n_roles, 3u);
  cr_assert(md__buffer_has_role(e, prep, 0, 0));
  cr_assert(md__buffer_has_role(e, prep, 0, 1));
  cr_assert(md__buffer_has_role(e, prep, 1, 0));
  cr_assert_not(md__buffer_has_role(e, prep, 1, 1));
  cr_assert_not(md__buffer_has_role(e, prep, 0, 2));
  cr_assert_not(md__buffer_has_role(e, prep_dyn, 0, 0));
  cr_assert_not(md__buffer_has_role(e, prep_dyn, 0, 1));
  cr_assert_not(md__buffer_has_role(e, prep_dyn, 1, 0));
  put(e);
  md_token t1 = mdt_alloc(&env, prep, true, 0, 2, d);
  e = entry_of(t1, MD__KIND_BUFFER);
  cr_assert(md__buffer_has_role(e, prep, 1, 0));
  cr_assert_not(md__buffer_has_role(e, prep, 0, 0));
  cr_assert_not(md__buffer_has_role(e, prep, 1, 1));
  cr_assert_not(md__buffer_has_role(e, prep_dyn, 1, 0));
  put(e);
}

Test(unit_objects, scalar_buffer_bytes_are_its_type_size) {
  /* out = in0 + in1 where the inputs are INT32 scalars is not a valid ADD, so the scalar role is
   * the activation of a model that takes it as an input. */
  md_operand operands[4];
  memset(operands, 0, sizeof operands);
  uint32_t d[1] = {4};
  operands[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_SUBGRAPH_INPUT};
  operands[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_SUBGRAPH_INPUT};
  operands[2] = (md_operand){.type = MD_INT32, .lifetime = MD_SUBGRAPH_INPUT};
  operands[3] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_SUBGRAPH_OUTPUT};
  uint32_t op_in[3] = {0, 1, 2}, op_out[1] = {3}, m_in[3] = {0, 1, 2}, m_out[1] = {3};
  md_operation op = {.type = MD_OP_ADD, .n_inputs = 3, .inputs = op_in, .n_outputs = 1, .outputs = op_out};
  md_model m = {.n_operands = 4, .operands = operands, .n_operations = 1, .operations = &op,
                .n_inputs = 3, .inputs = m_in, .n_outputs = 1, .outputs = m_out};
  md_handle p = mdt_prepare(&env, &m);
  md_token t = mdt_alloc(&env, p, false, 2, 0, NULL);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  cr_assert_eq(b->type, MD_INT32);
  cr_assert_eq(b->first.capacity, 4u);
  cr_assert_eq(md__buffer_bytes(b), 4u);
  put(e);
}

/* ---- clients ---- */

Test(unit_objects, close_client_reports_and_kills_only_its_own) {
  md_handle other = mdt_open_client(&env);
  uint32_t d[2] = {2, 3};
  md_handle p2 = mdt_prepare_for(&env, other, mdt_binary_model(MD_OP_ADD, 2, d, 0));
  md_token mine1 = mdt_alloc(&env, prep, false, 0, 2, d);
  md_token mine2 = mdt_alloc(&env, prep_dyn, true, 0, 0, NULL);
  md_token theirs = 0;
  cr_assert_eq(mdt_try_alloc(&env, other, p2, false, 0, 2, d, &theirs), MD_NONE);
  uint64_t live = atomic_load(&env.dev->ht.live);
  md_leak_report rep;
  memset(&rep, 0xff, sizeof rep);
  cr_assert_eq(env.drv->close_client(env.dev, env.client, &rep), MD_NONE);
  cr_assert_eq(rep.buffers, 2u);
  cr_assert_eq(rep.bytes, 24u, "the never-written dynamic buffer counts 0");
  cr_assert_eq(rep.prepared_models, 2u);
  cr_assert_eq(rep.events, 0u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 5, "the client, two prepared models, two buffers");
  cr_assert_null(md__handle_get(&env.dev->ht, mine1, MD__KIND_BUFFER));
  cr_assert_null(md__handle_get(&env.dev->ht, mine2, MD__KIND_BUFFER));
  md__hentry *te = entry_of(theirs, MD__KIND_BUFFER);
  put(te);
  cr_assert_eq(env.drv->close_client(env.dev, env.client, &rep), MD_INVALID_ARGUMENT);
  cr_assert_eq(rep.buffers, 2u, "untouched on error");
  md_leak_report r2;
  cr_assert_eq(env.drv->close_client(env.dev, other, &r2), MD_NONE);
  cr_assert_eq(r2.buffers, 1u);
  cr_assert_eq(r2.bytes, 24u);
  cr_assert_eq(r2.prepared_models, 1u);
  env.client = mdt_open_client(&env);
}

Test(unit_objects, close_client_with_no_report_still_kills) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  cr_assert_eq(env.drv->close_client(env.dev, env.client, NULL), MD_NONE);
  cr_assert_null(md__handle_get(&env.dev->ht, t, MD__KIND_BUFFER));
  cr_assert_null(md__handle_get(&env.dev->ht, prep, MD__KIND_PREPARED));
  env.client = mdt_open_client(&env);
}

Test(unit_objects, open_client_issues_a_client_entry_with_a_pool_cache) {
  md_handle c = 0;
  cr_assert_eq(env.drv->open_client(env.dev, &c), MD_NONE);
  md__hentry *e = entry_of(c, MD__KIND_CLIENT);
  cr_assert_eq(e->owner, 0u);
  md__client *cl = e->obj;
  cr_assert_not_null(cl->pools);
  put(e);
  mdt_close_client(&env, c, NULL);
}

/* ---- prepared models ---- */

static const md_model *const_model(float *w, uint32_t n) {
  /* out = in + W, W a CONSTANT_COPY float32 [n] tensor. */
  static md_operand operands[4];
  static uint32_t d[1];
  static uint32_t op_in[3] = {0, 1, 2}, op_out[1] = {3}, m_in[1] = {0}, m_out[1] = {3};
  static md_operation op;
  static md_model m;
  static uint8_t values[64 + 4];
  d[0] = n;
  memcpy(values, w, n * 4);
  int32_t act = 0;
  memcpy(values + n * 4, &act, 4);
  operands[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_SUBGRAPH_INPUT};
  operands[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_CONSTANT_COPY,
                             .offset = 0, .length = n * 4};
  operands[2] = (md_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = n * 4, .length = 4};
  operands[3] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d, .lifetime = MD_SUBGRAPH_OUTPUT};
  op = (md_operation){.type = MD_OP_ADD, .n_inputs = 3, .inputs = op_in, .n_outputs = 1, .outputs = op_out};
  m = (md_model){.n_operands = 4, .operands = operands, .n_operations = 1, .operations = &op,
                 .n_inputs = 1, .inputs = m_in, .n_outputs = 1, .outputs = m_out,
                 .operand_values = values, .operand_values_size = n * 4 + 4};
  return &m;
}

Test(unit_objects, prepare_uploads_float_constants_only) {
  float w[4] = {1, 2, 3, 4};
  n_alloc = 0;
  md_handle p = mdt_prepare(&env, const_model(w, 4));
  cr_assert_eq(n_alloc, 1u, "one device constant: the float tensor, not the INT32 scalar");
  cr_assert_eq(last_alloc_bytes, 16u);
  md__hentry *e = entry_of(p, MD__KIND_PREPARED);
  md__prepared *pp = e->obj;
  cr_assert_eq(e->owner, env.client);
  cr_assert_not_null(pp->dev_const);
  cr_assert_eq(pp->dev_const[0], 0u);
  cr_assert_neq(pp->dev_const[1], 0u);
  cr_assert_eq(pp->dev_const[2], 0u);
  cr_assert_eq(pp->dev_const[3], 0u);
  cr_assert_eq(pp->dev_bytes, 16u);
  cr_assert(pp->all_builtin);
  cr_assert_eq(pp->mac_bytes, 0u, "no FULLY_CONNECTED");
  float back[4] = {0};
  char err[64];
  cr_assert_eq(real->read(env.dev->bk, NULL, back, pp->dev_const[1], 0, 16, err, sizeof err), MD_NONE);
  cr_assert_eq(memcmp(back, w, 16), 0, "the constant's bytes are on the device");
  put(e);
  unsigned frees = n_free;
  mdt_release(&env, p);
  cr_assert_eq(n_free, frees + 1, "released with no user: the device constant is freed");
}

Test(unit_objects, prepare_failing_to_upload_frees_what_it_took) {
  float w[4] = {1, 2, 3, 4};
  uint64_t live = atomic_load(&env.dev->ht.live);
  n_alloc = 0;
  fail_alloc = 1;
  md_handle p = 7;
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, const_model(w, 4), &p), MD_RESOURCE_EXHAUSTED_TRANSIENT);
  cr_assert_eq(p, 0u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live);
  fail_alloc = 0;
}

Test(unit_objects, prepare_refuses_null_arguments) {
  md_handle p = 5;
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, NULL, &p), MD_INVALID_ARGUMENT);
  cr_assert_eq(p, 5u, "untouched when model is NULL");
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, const_model((float[4]){0}, 4), NULL), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client ^ 1, const_model((float[4]){0}, 4), &p), MD_INVALID_ARGUMENT);
  cr_assert_eq(p, 0u);
}

Test(unit_objects, release_prepared_keeps_it_for_a_holder) {
  md__hentry *e = entry_of(prep, MD__KIND_PREPARED);
  cr_assert_eq(env.drv->release_prepared_model(env.dev, env.client, prep), MD_NONE);
  cr_assert_null(md__handle_get(&env.dev->ht, prep, MD__KIND_PREPARED));
  cr_assert_eq(atomic_load(&e->ref.n), 1u, "only this holder");
  cr_assert_not_null(e->obj);
  cr_assert_eq(env.drv->release_prepared_model(env.dev, env.client, prep), MD_INVALID_ARGUMENT);
  put(e);
}

/* ---- driver.c: the table's argument and device checks ---- */

Test(unit_objects, open_device_refuses_a_null_out_and_a_bad_config) {
  cr_assert_eq(env.drv->open_device("backend=sim", NULL), MD_INVALID_ARGUMENT);
  md_device *d = (md_device *)&env;
  cr_assert_neq(env.drv->open_device("backend=sim;nokey=1", &d), MD_NONE);
  cr_assert_null(d);
  d = (md_device *)&env;
  cr_assert_neq(env.drv->open_device("backend=nosuchbackend", &d), MD_NONE);
  cr_assert_null(d);
}

Test(unit_objects, a_seed_makes_handles_reproducible_and_no_seed_does_not) {
  md_handle c[4];
  for (int i = 0; i < 4; i++) {
    md_device *d = NULL;
    cr_assert_eq(env.drv->open_device(i < 2 ? "backend=sim;seed=77" : "backend=sim", &d), MD_NONE);
    cr_assert_eq(env.drv->open_client(d, &c[i]), MD_NONE);
    md__hentry *e = md__handle_get(&d->ht, c[i], MD__KIND_CLIENT);
    cr_assert_not_null(e);
    cr_assert_eq(d->ht.destroy != NULL, 1);
    cr_assert_eq(d->ht.ctx, d);
    cr_assert_not_null(d->ht.unpin);
    md__handle_put(&d->ht, e);
    cr_assert_eq(env.drv->close_client(d, c[i], NULL), MD_NONE);
    env.drv->close_device(d);
  }
  cr_assert_eq(c[0], c[1], "the same seed, the same handles");
  /* The key is BLAKE2b(seed, key "md-handle-key"); the first client is slot 1, generation 1. */
  uint64_t seed = 77;
  uint8_t key[crypto_shorthash_KEYBYTES], sb[8], msg[20], out[crypto_shorthash_BYTES];
  memcpy(sb, &seed, 8);
  crypto_generichash(key, sizeof key, sb, 8, (const uint8_t *)"md-handle-key", 13);
  uint32_t slot = 1, gen = 1, kind = MD__KIND_CLIENT;
  uint64_t owner = 0;
  memcpy(msg, &slot, 4);
  memcpy(msg + 4, &gen, 4);
  memcpy(msg + 8, &kind, 4);
  memcpy(msg + 12, &owner, 8);
  crypto_shorthash(out, msg, sizeof msg, key);
  uint32_t mac;
  memcpy(&mac, out, 4);
  cr_assert_eq(c[0], ((uint64_t)mac << 32) | (1u << 24) | 1u);
  cr_assert_neq(c[2], c[3], "random keys");
  cr_assert_neq(c[0], c[2]);
  env.drv->close_device(NULL);
}

Test(unit_objects, get_capabilities_fills_what_the_caller_has_room_for) {
  md_capabilities cap;
  cr_assert_eq(env.drv->get_capabilities(NULL, &cap), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->get_capabilities(env.dev, NULL), MD_INVALID_ARGUMENT);
  memset(&cap, 0xee, sizeof cap);
  cap.struct_size = 0;
  cr_assert_eq(env.drv->get_capabilities(env.dev, &cap), MD_NONE);
  cr_assert_eq(cap.struct_size, sizeof cap);
  cr_assert_eq(cap.supports_memory_domains, 1u);
  uint64_t want = env.dev->info.max_alloc ? env.dev->info.max_alloc : env.dev->info.mem_total;
  cr_assert_eq(cap.max_buffer_bytes, want);
  cr_assert_str_eq(cap.backend, "sim");
  cr_assert_str_eq(cap.device_name, env.dev->info.device_name);
  /* A v1 caller with room for the fixed fields only. */
  memset(&cap, 0xee, sizeof cap);
  cap.struct_size = (uint32_t)offsetof(md_capabilities, backend);
  cr_assert_eq(env.drv->get_capabilities(env.dev, &cap), MD_NONE);
  cr_assert_eq(cap.struct_size, offsetof(md_capabilities, backend));
  cr_assert_eq(cap.supports_memory_domains, 1u);
  cr_assert_eq((unsigned char)cap.backend[0], 0xee, "nothing past its struct_size");
  cap.struct_size = (uint32_t)offsetof(md_capabilities, backend) - 1;
  cr_assert_eq(env.drv->get_capabilities(env.dev, &cap), MD_INVALID_ARGUMENT);
  /* A larger caller struct: only ours is filled. */
  struct {
    md_capabilities c;
    uint32_t more;
  } big;
  memset(&big, 0xee, sizeof big);
  big.c.struct_size = sizeof big;
  cr_assert_eq(env.drv->get_capabilities(env.dev, &big.c), MD_NONE);
  cr_assert_eq(big.c.struct_size, sizeof(md_capabilities));
  cr_assert_eq(big.more, 0xeeeeeeeeu);
  uint8_t sup[1];
  uint32_t d[2] = {2, 3};
  cr_assert_eq(env.drv->get_supported_operations(NULL, mdt_binary_model(MD_OP_ADD, 2, d, 0), sup), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->get_supported_operations(env.dev, NULL, sup), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->get_supported_operations(env.dev, mdt_binary_model(MD_OP_ADD, 2, d, 0), NULL), MD_INVALID_ARGUMENT);
  sup[0] = 7;
  cr_assert_eq(env.drv->get_supported_operations(env.dev, mdt_binary_model(MD_OP_ADD, 2, d, 0), sup), MD_NONE);
  cr_assert_eq(sup[0], 1);
}

Test(unit_objects, a_null_device_is_refused_at_every_entry_point_and_results_are_cleared) {
  md_handle h = 9;
  md_token tk = 9;
  uint32_t d[2] = {2, 3};
  md_buffer_desc desc = {2, d};
  md_buffer_role role = {0, 0, 1.0f};
  md_memory m = {0};
  md_request r = {0};
  md_output_shape shapes[2];
  md_timing tm = {1, 2};
  cr_assert_eq(env.drv->open_client(NULL, &h), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->open_client(env.dev, NULL), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->close_client(NULL, env.client, NULL), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->prepare_model(NULL, env.client, mdt_binary_model(MD_OP_ADD, 2, d, 0), &h), MD_INVALID_ARGUMENT);
  cr_assert_eq(h, 0u);
  cr_assert_eq(env.drv->release_prepared_model(NULL, env.client, prep), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->allocate(NULL, env.client, &desc, &prep, 1, &role, 1, NULL, 0, &tk), MD_INVALID_ARGUMENT);
  cr_assert_eq(tk, 0u);
  cr_assert_eq(env.drv->copy_to(NULL, env.client, 1, &m), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->copy_from(NULL, env.client, 1, &m, 0, NULL), MD_INVALID_ARGUMENT);
  cr_assert_eq(env.drv->free_buffer(NULL, env.client, 1), MD_INVALID_ARGUMENT);
  memset(shapes, 0xee, sizeof shapes);
  cr_assert_eq(env.drv->execute(NULL, env.client, prep, &r, shapes, 2, &tm), MD_INVALID_ARGUMENT);
  cr_assert_eq(shapes[1].rank, 0u);
  cr_assert_eq(shapes[1].is_sufficient, 0);
  cr_assert_eq(tm.on_device_ns, UINT64_MAX);
  cr_assert_eq(tm.in_driver_ns, UINT64_MAX);
  h = 9;
  cr_assert_eq(env.drv->execute_async(NULL, env.client, prep, &r, &h), MD_INVALID_ARGUMENT);
  cr_assert_eq(h, 0u);
  memset(shapes, 0xee, sizeof shapes);
  tm.on_device_ns = 3;
  cr_assert_eq(env.drv->wait_event(NULL, env.client, 1, 0, shapes, 2, &tm), MD_INVALID_ARGUMENT);
  cr_assert_eq(shapes[0].rank, 0u);
  cr_assert_eq(tm.on_device_ns, UINT64_MAX);
  h = 9;
  cr_assert_eq(env.drv->register_memory(NULL, env.client, &m, &h), MD_INVALID_ARGUMENT);
  cr_assert_eq(h, 0u);
  cr_assert_eq(env.drv->unregister_memory(NULL, env.client, 1), MD_INVALID_ARGUMENT);
  md_capabilities cap;
  cr_assert_eq(env.drv->get_capabilities(NULL, &cap), MD_INVALID_ARGUMENT);
  cr_assert_not_null(env.drv->last_error(NULL));
}

Test(unit_objects, a_lost_device_refuses_everything_but_close_client) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__device_lost(env.dev, "unit test");
  md_handle h = 9;
  md_token tk = 9;
  md_buffer_desc desc = {2, d};
  md_buffer_role role = {0, 0, 1.0f};
  int fd = mdt_memfd(NULL, 24);
  md_memory m = mdt_ashmem(fd, 24);
  md_request r = {0};
  md_output_shape shapes[1];
  md_timing tm = {1, 2};
  md_capabilities cap = {0};
  uint8_t sup[1];
  cr_assert_eq(env.drv->get_capabilities(env.dev, &cap), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->get_supported_operations(env.dev, mdt_binary_model(MD_OP_ADD, 2, d, 0), sup), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->open_client(env.dev, &h), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, mdt_binary_model(MD_OP_ADD, 2, d, 0), &h), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(h, 0u);
  cr_assert_eq(env.drv->release_prepared_model(env.dev, env.client, prep), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->allocate(env.dev, env.client, &desc, &prep, 1, &role, 1, NULL, 0, &tk), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(tk, 0u);
  cr_assert_eq(env.drv->copy_from(env.dev, env.client, t, &m, 0, NULL), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->copy_to(env.dev, env.client, t, &m), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(env.drv->free_buffer(env.dev, env.client, t), MD_DEVICE_UNAVAILABLE);
  memset(shapes, 0xee, sizeof shapes);
  cr_assert_eq(env.drv->execute(env.dev, env.client, prep, &r, shapes, 1, &tm), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(shapes[0].rank, 0u);
  cr_assert_eq(tm.in_driver_ns, UINT64_MAX);
  h = 9;
  cr_assert_eq(env.drv->execute_async(env.dev, env.client, prep, &r, &h), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(h, 0u);
  cr_assert_eq(env.drv->wait_event(env.dev, env.client, 1, 0, shapes, 1, &tm), MD_DEVICE_UNAVAILABLE);
  h = 9;
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, &h), MD_DEVICE_UNAVAILABLE);
  cr_assert_eq(h, 0u);
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, 1), MD_DEVICE_UNAVAILABLE);
  /* The token is still live: nothing above ran. */
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  put(e);
  md_leak_report rep;
  cr_assert_eq(env.drv->close_client(env.dev, env.client, &rep), MD_NONE);
  cr_assert_eq(rep.buffers, 1u);
  cr_assert_eq(rep.prepared_models, 2u);
  close(fd);
  env.dev->be = real;
  env.drv->close_device(env.dev);
  env.dev = NULL;
  mdt_env_open(&env, "backend=sim");
  real = env.dev->be;
}

/* ---- lookup.c md__issued_settle: close_client of the creating call's own client at the
 * call's race points (handles.h), run by the hook on the calling thread itself ---- */

static struct {
  const char *fn, *step;
  int fired;
  md_status st;
  md_leak_report rep;
} race;

static void close_at(const char *fn, const char *step) {
  if (race.fired || strcmp(fn, race.fn) != 0 || strcmp(step, race.step) != 0) return;
  race.fired = 1;
  memset(&race.rep, 0xee, sizeof race.rep);
  race.st = env.drv->close_client(env.dev, env.client, &race.rep);
}

static void arm(const char *fn, const char *step) {
  race.fn = fn;
  race.step = step;
  race.fired = 0;
  atomic_store(&md__race_hook, close_at);
}

static void reopen_client(void) {
  atomic_store(&md__race_hook, NULL);
  env.client = mdt_open_client(&env);
}

Test(unit_objects, allocate_closed_before_issuing_is_refused_and_not_reported) {
  uint32_t d[2] = {2, 3};
  uint64_t live = atomic_load(&env.dev->ht.live);
  arm("allocate", "issuing");
  md_token t = 9;
  cr_assert_eq(mdt_try_alloc(&env, env.client, prep, false, 0, 2, d, &t), MD_INVALID_ARGUMENT);
  cr_assert(race.fired);
  cr_assert_eq(race.st, MD_NONE);
  cr_assert_eq(t, 0u);
  cr_assert_eq(race.rep.buffers, 0u);
  cr_assert_eq(race.rep.bytes, 0u);
  cr_assert_eq(race.rep.prepared_models, 2u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 3, "the client, its prepared models; no buffer left");
  reopen_client();
}

Test(unit_objects, allocate_closed_after_issuing_succeeds_and_is_reported) {
  uint32_t d[2] = {2, 3};
  uint64_t live = atomic_load(&env.dev->ht.live);
  arm("allocate", "issued");
  md_token t = 0;
  cr_assert_eq(mdt_try_alloc(&env, env.client, prep, false, 0, 2, d, &t), MD_NONE);
  cr_assert(race.fired);
  cr_assert_neq(t, 0u);
  cr_assert_null(md__handle_get(&env.dev->ht, t, MD__KIND_BUFFER), "killed by the sweep");
  cr_assert_eq(race.rep.buffers, 1u);
  cr_assert_eq(race.rep.bytes, 24u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 3);
  reopen_client();
}

Test(unit_objects, prepare_closed_before_or_after_issuing) {
  uint32_t d[2] = {2, 3};
  uint64_t live = atomic_load(&env.dev->ht.live);
  arm("prepare_model", "issuing");
  md_handle p = 9;
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, mdt_binary_model(MD_OP_ADD, 2, d, 0), &p), MD_INVALID_ARGUMENT);
  cr_assert(race.fired);
  cr_assert_eq(p, 0u);
  cr_assert_eq(race.rep.prepared_models, 2u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 3);
  reopen_client();
  live = atomic_load(&env.dev->ht.live);
  arm("prepare_model", "issued");
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, mdt_binary_model(MD_OP_ADD, 2, d, 0), &p), MD_NONE);
  cr_assert(race.fired);
  cr_assert_neq(p, 0u);
  cr_assert_eq(race.rep.prepared_models, 1u);
  cr_assert_null(md__handle_get(&env.dev->ht, p, MD__KIND_PREPARED));
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 1, "the client; the model is gone too");
  reopen_client();
}

Test(unit_objects, register_closed_before_or_after_issuing) {
  int fd = mdt_memfd(NULL, 64);
  md_memory m = mdt_ashmem(fd, 64);
  uint64_t live = atomic_load(&env.dev->ht.live);
  arm("register_memory", "issuing");
  md_handle pool = 9;
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, &pool), MD_INVALID_ARGUMENT);
  cr_assert(race.fired);
  cr_assert_eq(pool, 0u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 3);
  reopen_client();
  live = atomic_load(&env.dev->ht.live);
  arm("register_memory", "issued");
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, &pool), MD_NONE);
  cr_assert(race.fired);
  cr_assert_neq(pool, 0u);
  cr_assert_eq(race.rep.buffers + race.rep.prepared_models + race.rep.events, 0u, "pools are not leaks");
  cr_assert_null(md__handle_get(&env.dev->ht, pool, MD__KIND_POOL));
  cr_assert_eq(atomic_load(&env.dev->ht.live), live - 1);
  reopen_client();
  close(fd);
}

/* ---- registered.c and lookup.c: what a registered pool is, owned and released ---- */

Test(unit_objects, registered_pool_keeps_its_descriptor_and_mapping_until_the_last_user) {
  int fd = mdt_memfd(NULL, 64);
  md_memory m = mdt_ashmem(fd, 64);
  md_handle pool = 0;
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, &pool), MD_NONE);
  md__hentry *e = entry_of(pool, MD__KIND_POOL);
  cr_assert_eq(e->owner, env.client);
  md__regpool *rp = e->obj;
  cr_assert_eq(rp->mem.fd, m.fd);
  cr_assert_eq(rp->mem.size, 64u);
  cr_assert_not_null(rp->map.base);
  cr_assert_not_null(rp->map.scope);
  md_handle other = mdt_open_client(&env);
  cr_assert_eq(env.drv->unregister_memory(env.dev, other, pool), MD_INVALID_ARGUMENT, "another client's");
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, prep), MD_INVALID_ARGUMENT, "not a pool");
  cr_assert_eq(env.drv->unregister_memory(env.dev, other ^ 1, pool), MD_INVALID_ARGUMENT, "not a client");
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, pool), MD_NONE);
  cr_assert_null(md__handle_get(&env.dev->ht, pool, MD__KIND_POOL));
  cr_assert_eq(atomic_load(&e->ref.n), 1u, "this holder only");
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, pool), MD_INVALID_ARGUMENT);
  put(e);
  md_handle p2 = 7;
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, NULL, &p2), MD_INVALID_ARGUMENT);
  cr_assert_eq(p2, 0u);
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, NULL), MD_INVALID_ARGUMENT);
  md_memory bad = m;
  bad.fd = -1;
  p2 = 7;
  uint64_t live = atomic_load(&env.dev->ht.live);
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &bad, &p2), MD_INVALID_ARGUMENT);
  cr_assert_eq(p2, 0u);
  cr_assert_eq(atomic_load(&env.dev->ht.live), live);
  mdt_close_client(&env, other, NULL);
  close(fd);
}

Test(unit_objects, owned_use_checks_kind_and_owner_through_the_cache) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md_handle other = mdt_open_client(&env);
  md__use u = {NULL, 0};
  cr_assert_eq(md__owned_use(env.dev, "x", "token", env.client, t, MD__KIND_BUFFER, &u), MD_NONE);
  cr_assert_not_null(u.e);
  md__handle_unuse(&env.dev->ht, &u);
  u.e = NULL;
  cr_assert_eq(md__owned_use(env.dev, "x", "token", other, t, MD__KIND_BUFFER, &u), MD_INVALID_ARGUMENT);
  cr_assert_null(u.e, "nothing held");
  cr_assert_not_null(strstr(md__last_error(), "belongs to another client"));
  cr_assert_eq(md__owned_use(env.dev, "x", "token", env.client, t, MD__KIND_EVENT, &u), MD_INVALID_ARGUMENT);
  cr_assert_eq(md__client_use(env.dev, "x", other, &u), MD_NONE);
  md__handle_unuse(&env.dev->ht, &u);
  cr_assert_eq(md__client_use(env.dev, "x", t, &u), MD_INVALID_ARGUMENT);
  md__hentry *g = NULL;
  cr_assert_eq(md__owned_get(env.dev, "x", "token", other, t, MD__KIND_BUFFER, &g), MD_INVALID_ARGUMENT);
  cr_assert_null(g);
  cr_assert_eq(md__owned_get(env.dev, "x", "token", env.client, t, MD__KIND_BUFFER, &g), MD_NONE);
  cr_assert_eq(atomic_load(&g->ref.n), 3u, "the table's, this thread's cache, this get");
  put(g);
  g = NULL;
  cr_assert_eq(md__client_get(env.dev, "x", t, &g), MD_INVALID_ARGUMENT);
  cr_assert_null(g);
  mdt_close_client(&env, other, NULL);
}

/* ---- prepared.c mac_bytes: 4 x the multiply-adds of the FULLY_CONNECTEDs ---- */

/* One FULLY_CONNECTED (or two chained, when w2 is given): input, weights and bias are model
 * inputs (nothing to upload), the activation a constant. */
static uint64_t fc_mac_bytes(const uint32_t in[2], const uint32_t w[2], const uint32_t *w2) {
  uint32_t d_in[2] = {in[0], in[1]}, d_w[2] = {w[0], w[1]}, d_b[1] = {w[0]}, d_mid[2] = {in[0], w[0]};
  uint32_t d_w2[2] = {w2 ? w2[0] : 0, w2 ? w2[1] : 0}, d_b2[1] = {w2 ? w2[0] : 0}, d_out[2] = {0, 0};
  int32_t act = 0;
  md_operand ops[9];
  memset(ops, 0, sizeof ops);
  ops[0] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_in, .lifetime = MD_SUBGRAPH_INPUT};
  ops[1] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_w, .lifetime = MD_SUBGRAPH_INPUT};
  ops[2] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d_b, .lifetime = MD_SUBGRAPH_INPUT};
  ops[3] = (md_operand){.type = MD_INT32, .lifetime = MD_CONSTANT_COPY, .offset = 0, .length = 4};
  ops[4] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = w2 ? d_mid : d_out,
                        .lifetime = w2 ? MD_TEMPORARY_VARIABLE : MD_SUBGRAPH_OUTPUT};
  ops[5] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_w2, .lifetime = MD_SUBGRAPH_INPUT};
  ops[6] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 1, .dims = d_b2, .lifetime = MD_SUBGRAPH_INPUT};
  ops[7] = (md_operand){.type = MD_TENSOR_FLOAT32, .rank = 2, .dims = d_out, .lifetime = MD_SUBGRAPH_OUTPUT};
  uint32_t in1[4] = {0, 1, 2, 3}, out1[1] = {4}, in2[4] = {4, 5, 6, 3}, out2[1] = {7};
  md_operation op[2] = {
      {.type = MD_OP_FULLY_CONNECTED, .n_inputs = 4, .inputs = in1, .n_outputs = 1, .outputs = out1},
      {.type = MD_OP_FULLY_CONNECTED, .n_inputs = 4, .inputs = in2, .n_outputs = 1, .outputs = out2}};
  uint32_t m_in[5] = {0, 1, 2, 5, 6}, m_out1[1] = {4}, m_out2[1] = {7};
  md_model m = {.n_operands = w2 ? 8 : 5, .operands = ops, .n_operations = w2 ? 2 : 1, .operations = op,
                .n_inputs = w2 ? 5 : 3, .inputs = m_in, .n_outputs = 1, .outputs = w2 ? m_out2 : m_out1,
                .operand_values = (const uint8_t *)&act, .operand_values_size = 4};
  md_handle p = mdt_prepare(&env, &m);
  md__hentry *e = entry_of(p, MD__KIND_PREPARED);
  uint64_t r = ((md__prepared *)e->obj)->mac_bytes;
  cr_assert_not(((md__prepared *)e->obj)->all_builtin == false, "FULLY_CONNECTED is built in");
  put(e);
  mdt_release(&env, p);
  return r;
}

Test(unit_objects, mac_bytes_of_fully_connected_models) {
  uint32_t in[2] = {2, 5}, w[2] = {3, 5};
  cr_assert_eq(fc_mac_bytes(in, w, NULL), 120u, "10 input elements x 3 units x 4");
  uint32_t w_unknown_isz[2] = {3, 0};
  cr_assert_eq(fc_mac_bytes(in, w_unknown_isz, NULL), 120u, "only the units count");
  uint32_t in14[2] = {1, 4}, w34[2] = {3, 4}, w23[2] = {2, 3};
  cr_assert_eq(fc_mac_bytes(in14, w34, w23), 72u, "4 x 4 x 3 + 4 x 3 x 2, summed");
  uint32_t in_unknown[2] = {0, 5};
  cr_assert_eq(fc_mac_bytes(in_unknown, w, NULL), UINT64_MAX, "unknown input dims");
  uint32_t w_unknown_units[2] = {0, 5};
  cr_assert_eq(fc_mac_bytes(in, w_unknown_units, NULL), UINT64_MAX, "unknown units");
  uint32_t in_big[2] = {65536, 65536}, w_big[2] = {1u << 31, 65536};
  cr_assert_eq(fc_mac_bytes(in_big, w_big, NULL), UINT64_MAX, "2^32 x 2^31 x 4 saturates");
}

/* ---- references: no entry point keeps one on a client or an object it looked up ---- */

Test(unit_objects, failing_and_succeeding_calls_give_every_reference_back) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md_handle other = mdt_open_client(&env);
  md__hentry *ce = entry_of(env.client, MD__KIND_CLIENT), *oe = entry_of(other, MD__KIND_CLIENT);
  md__hentry *te = entry_of(t, MD__KIND_BUFFER), *pe = entry_of(prep, MD__KIND_PREPARED);
  uint32_t c0 = atomic_load(&ce->ref.n), o0 = atomic_load(&oe->ref.n), t0 = atomic_load(&te->ref.n),
           p0 = atomic_load(&pe->ref.n);
#define BALANCED(what)                                                   \
  do {                                                                   \
    cr_assert_eq(atomic_load(&ce->ref.n), c0, "client after %s", what);  \
    cr_assert_eq(atomic_load(&oe->ref.n), o0, "other after %s", what);   \
    cr_assert_eq(atomic_load(&te->ref.n), t0, "token after %s", what);   \
    cr_assert_eq(atomic_load(&pe->ref.n), p0, "prepared after %s", what); \
  } while (0)
  int fd = mdt_memfd(NULL, 24);
  md_memory m = mdt_ashmem(fd, 24), m20 = mdt_ashmem(fd, 20);
  md_buffer_desc desc = {2, d};
  md_buffer_role role = {0, 0, 1.0f}, bad_role = {0, 5, 1.0f};
  md_token tk;
  md_handle h;
  cr_assert_eq(env.drv->copy_from(env.dev, env.client, t, &m, 0, NULL), MD_NONE);
  BALANCED("copy_from");
  cr_assert_eq(env.drv->copy_to(env.dev, env.client, t, &m), MD_NONE);
  BALANCED("copy_to");
  cr_assert_eq(env.drv->copy_to(env.dev, env.client, t, &m20), MD_INVALID_ARGUMENT);
  BALANCED("copy_to of the wrong size");
  cr_assert_eq(env.drv->copy_from(env.dev, other, t, &m, 0, NULL), MD_INVALID_ARGUMENT);
  BALANCED("copy_from by another client");
  cr_assert_eq(env.drv->copy_to(env.dev, env.client, t ^ (1ull << 40), &m), MD_INVALID_ARGUMENT);
  BALANCED("copy_to of a forged token");
  cr_assert_eq(env.drv->copy_from(env.dev, env.client, t, NULL, 0, NULL), MD_INVALID_ARGUMENT);
  BALANCED("copy_from of NULL");
  cr_assert_eq(env.drv->copy_to(env.dev, env.client, t, NULL), MD_INVALID_ARGUMENT);
  BALANCED("copy_to of NULL");
  cr_assert_eq(env.drv->free_buffer(env.dev, other, t), MD_INVALID_ARGUMENT);
  BALANCED("free_buffer by another client");
  cr_assert_eq(env.drv->free_buffer(env.dev, env.client, prep), MD_INVALID_ARGUMENT);
  BALANCED("free_buffer of a prepared model");
  cr_assert_eq(env.drv->allocate(env.dev, env.client, &desc, &prep, 1, &bad_role, 1, NULL, 0, &tk), MD_INVALID_ARGUMENT);
  BALANCED("allocate with a bad role");
  cr_assert_eq(env.drv->allocate(env.dev, other, &desc, &prep, 1, &role, 1, NULL, 0, &tk), MD_INVALID_ARGUMENT);
  BALANCED("allocate with another client's model");
  cr_assert_eq(env.drv->allocate(env.dev, env.client, &desc, &prep, 1, &role, 1, NULL, 0, &tk), MD_NONE);
  BALANCED("allocate");
  cr_assert_eq(env.drv->free_buffer(env.dev, env.client, tk), MD_NONE);
  BALANCED("free_buffer");
  cr_assert_eq(env.drv->release_prepared_model(env.dev, other, prep), MD_INVALID_ARGUMENT);
  BALANCED("release by another client");
  cr_assert_eq(env.drv->release_prepared_model(env.dev, env.client, t), MD_INVALID_ARGUMENT);
  BALANCED("release of a token");
  cr_assert_eq(env.drv->prepare_model(env.dev, env.client, mdt_binary_model(MD_OP_ADD, 2, d, 0), &h), MD_NONE);
  BALANCED("prepare_model");
  cr_assert_eq(env.drv->release_prepared_model(env.dev, env.client, h), MD_NONE);
  BALANCED("release_prepared_model");
  md_model broken = *mdt_binary_model(MD_OP_ADD, 2, d, 0);
  broken.n_inputs = 0;
  cr_assert_neq(env.drv->prepare_model(env.dev, env.client, &broken, &h), MD_NONE);
  BALANCED("prepare_model of an invalid model");
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &m, &h), MD_NONE);
  BALANCED("register_memory");
  cr_assert_eq(env.drv->unregister_memory(env.dev, other, h), MD_INVALID_ARGUMENT);
  BALANCED("unregister_memory by another client");
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, h), MD_NONE);
  BALANCED("unregister_memory");
  cr_assert_eq(env.drv->unregister_memory(env.dev, env.client, h), MD_INVALID_ARGUMENT);
  BALANCED("unregister_memory again");
  md_memory bad = m;
  bad.fd = -1;
  cr_assert_eq(env.drv->register_memory(env.dev, env.client, &bad, &h), MD_INVALID_ARGUMENT);
  BALANCED("register_memory of a bad descriptor");
  cr_assert_eq(env.drv->close_client(env.dev, other ^ 1, NULL), MD_INVALID_ARGUMENT);
  BALANCED("close_client of a forged client");
  put(ce);
  put(oe);
  put(te);
  put(pe);
  mdt_close_client(&env, other, NULL);
  close(fd);
#undef BALANCED
}

Test(unit_objects, uninit_is_one_seqlock_round) {
  uint32_t d[2] = {2, 3};
  md_token t = mdt_alloc(&env, prep, false, 0, 2, d);
  md__hentry *e = entry_of(t, MD__KIND_BUFFER);
  md__buffer *b = e->obj;
  md__write w;
  md__buffer_write_begin(env.dev, b, 24, &w);
  md__buffer_write_commit(env.dev, b, &w, 2, d);
  uint32_t s0 = atomic_load(&b->seq);
  md__buffer_uninit(b);
  cr_assert_eq(atomic_load(&b->seq), s0 + 2);
  cr_assert_not(b->initialized);
  md__buffer_reset_dims(b);
  cr_assert_eq(atomic_load(&b->seq), s0 + 4);
  md__buffer_write_begin(env.dev, b, 24, &w);
  cr_assert_eq(atomic_load(&b->seq), s0 + 6);
  md__buffer_write_abort(env.dev, b, &w);
  cr_assert_eq(atomic_load(&b->seq), s0 + 8);
  cr_assert_eq(md__buffer_bytes(b), 24u);
  put(e);
}
