/* test_handles.c - the handle table: MAC, generations, kinds, owners, lifetimes. */
#include <criterion/criterion.h>
#include <string.h>

#include "handles.h"

static int destroyed;
static void *last_destroyed;
static void on_destroy(void *ctx, md__hentry *e) {
  (void)ctx;
  destroyed++;
  last_destroyed = e->obj;
}

static md__htable t;
static void setup(void) {
  uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  md__htable_init(&t, key, on_destroy, NULL);
  destroyed = 0;
  last_destroyed = NULL;
}
static void teardown(void) { md__htable_fini(&t); }

TestSuite(handles, .init = setup, .fini = teardown);

static int obj_a, obj_b;

Test(handles, issued_handle_is_found_with_its_object) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 7, &obj_a, &h, &e), MD_NONE);
  cr_assert_neq(h, 0);
  md__hentry *g = md__handle_get(&t, h, MD__KIND_BUFFER);
  cr_assert_not_null(g);
  cr_assert_eq(g->obj, &obj_a);
  cr_assert_eq(g->owner, 7u);
  md__handle_put(&t, g);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_eq(destroyed, 1);
}

Test(handles, zero_is_never_valid) {
  cr_assert_null(md__handle_get(&t, 0, MD__KIND_BUFFER));
  cr_assert_str_eq(md__handle_why(&t, 0, MD__KIND_BUFFER), "0 is never a valid handle");
}

Test(handles, wrong_kind_is_rejected) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_CLIENT, 0, &obj_a, &h, &e), MD_NONE);
  cr_assert_null(md__handle_get(&t, h, MD__KIND_BUFFER));
  cr_assert_str_eq(md__handle_why(&t, h, MD__KIND_BUFFER), "is a handle of another kind");
  md__handle_kill(&t, e, h);
}

Test(handles, every_bit_flip_of_a_live_handle_is_rejected) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &h, &e), MD_NONE);
  for (int bit = 0; bit < 64; bit++) {
    md_handle f = h ^ (1ull << bit);
    md__hentry *g = md__handle_get(&t, f, MD__KIND_BUFFER);
    cr_expect_null(g, "handle with bit %d flipped accepted", bit);
    if (g) md__handle_put(&t, g);
  }
  md__handle_kill(&t, e, h);
}

Test(handles, forged_mac_on_a_live_slot_is_rejected) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &h, &e), MD_NONE);
  /* Same slot and generation, 100k different MACs: none may pass (p = 2^-32 each). */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    md_handle f = (x & 0xffffffff00000000ull) | (h & 0xffffffffull);
    if (f == h) continue;
    cr_assert_null(md__handle_get(&t, f, MD__KIND_BUFFER), "forged MAC accepted at try %d", i);
  }
  md__handle_kill(&t, e, h);
}

Test(handles, reused_slot_rejects_old_handle) {
  md_handle h1, h2;
  md__hentry *e1, *e2;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &h1, &e1), MD_NONE);
  md__handle_kill(&t, e1, h1);
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_b, &h2, &e2), MD_NONE);
  cr_assert_eq(e1, e2, "the freed slot is reused");
  cr_assert_neq(h1, h2);
  cr_assert_null(md__handle_get(&t, h1, MD__KIND_BUFFER));
  md__hentry *g = md__handle_get(&t, h2, MD__KIND_BUFFER);
  cr_assert_not_null(g);
  cr_assert_eq(g->obj, &obj_b);
  md__handle_put(&t, g);
  md__handle_kill(&t, e2, h2);
}

Test(handles, slot_reused_300_times_never_accepts_any_old_handle) {
  /* The token holds only 8 generation bits: after 256 reuses the MAC alone keeps old ones dead. */
  md_handle old[300];
  for (int i = 0; i < 300; i++) {
    md__hentry *e;
    cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &old[i], &e), MD_NONE);
    md__handle_kill(&t, e, old[i]);
  }
  md_handle live;
  md__hentry *le;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_b, &live, &le), MD_NONE);
  for (int i = 0; i < 300; i++) cr_assert_null(md__handle_get(&t, old[i], MD__KIND_BUFFER), "old handle %d accepted", i);
  md__handle_kill(&t, le, live);
}

Test(handles, released_handle_says_so) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_EVENT, 1, &obj_a, &h, &e), MD_NONE);
  md__handle_kill(&t, e, h);
  cr_assert_str_eq(md__handle_why(&t, h, MD__KIND_EVENT), "was already released");
}

Test(handles, kill_is_once_and_object_lives_until_last_put) {
  md_handle h;
  md__hentry *e;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &h, &e), MD_NONE);
  md__hentry *user = md__handle_get(&t, h, MD__KIND_BUFFER);   /* an in-flight call */
  cr_assert_not_null(user);
  cr_assert(md__handle_kill(&t, e, h));
  cr_assert_not(md__handle_kill(&t, e, h), "second kill must fail");
  cr_assert_null(md__handle_get(&t, h, MD__KIND_BUFFER), "dead for new calls at once");
  cr_assert_eq(destroyed, 0, "not destroyed under a user");
  md__handle_put(&t, user);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(last_destroyed, &obj_a);
}

Test(handles, same_object_in_two_tables_with_different_keys_gets_different_handles) {
  md__htable t2;
  uint8_t key2[16] = {0};
  md__htable_init(&t2, key2, on_destroy, NULL);
  md_handle a, b;
  md__hentry *ea, *eb;
  cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &a, &ea), MD_NONE);
  cr_assert_eq(md__handle_issue(&t2, MD__KIND_BUFFER, 1, &obj_a, &b, &eb), MD_NONE);
  cr_assert_eq(a & 0xffffffffull, b & 0xffffffffull, "same slot and generation");
  cr_assert_neq(a, b, "the MAC depends on the key");
  cr_assert_null(md__handle_get(&t2, a, MD__KIND_BUFFER));
  md__handle_kill(&t, ea, a);
  md__handle_kill(&t2, eb, b);
  md__htable_fini(&t2);
}

static void count(md__hentry *x, void *arg) {
  (void)x;
  (*(int *)arg)++;
}

Test(handles, foreach_visits_every_live_entry_once) {
  md_handle h[10];
  md__hentry *e[10];
  for (int i = 0; i < 10; i++) cr_assert_eq(md__handle_issue(&t, MD__KIND_BUFFER, 1, &obj_a, &h[i], &e[i]), MD_NONE);
  md__handle_kill(&t, e[3], h[3]);
  int n = 0;
  md__htable_foreach(&t, count, &n);
  cr_assert_eq(n, 9);
  for (int i = 0; i < 10; i++)
    if (i != 3) md__handle_kill(&t, e[i], h[i]);
}
