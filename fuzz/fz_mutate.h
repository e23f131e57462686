/* fz_mutate.h - private to fuzz/: mutations of a fuzz input at the level of its program
 * (docs/fuzzing.md "Program mutations"), in the manner of syzkaller's call insertion and removal.
 *
 * AFL++'s own mutations change bytes; a call inserted by a byte change shifts the parse of every
 * call after it, so "free the buffer between the issue and the wait" is a rare accident. These
 * mutations decode the input, change its program (insert a call decoded in the state the calls
 * before it leave, re-draw one call's arguments, delete, duplicate or swap calls, wrap calls into a
 * concurrent block or unwrap one, change the stall) and encode it again, so the calls after the
 * change stay what they were. Used by AFL++ as a custom mutator (fz_afl_mutator.c) beside its
 * havoc stage. */
#ifndef MDC_FZ_MUTATE_H
#define MDC_FZ_MUTATE_H

#include <stddef.h>
#include <stdint.h>

#include "fz_prog.h"

/* The mutations, for tests and statistics. */
typedef enum fz_mutation {
  FZ_MUT_INSERT = 0,   /* a call decoded from random bytes after the calls before it */
  FZ_MUT_REDRAW,       /* one call's arguments decoded again from random bytes */
  FZ_MUT_DELETE,       /* a call that makes no object */
  FZ_MUT_DUPLICATE,    /* a call again, later (half the time its arguments drawn there) */
  FZ_MUT_SWAP,         /* two neighbouring calls that make no object */
  FZ_MUT_WRAP,         /* concurrency: 2-4 sequential calls become a concurrent block */
  FZ_MUT_UNWRAP,       /* concurrency: a block's calls become sequential */
  FZ_MUT_STALL,        /* concurrency: the held execution */
  FZ_MUT_COUNT
} fz_mutation;

/* Mutates the input in[0..n) of target t with mutation m (FZ_MUT_COUNT: mutations drawn by
 * weight, one, then each time with probability 1/2 one more, up to 4), drawing from *rng (any
 * value; it moves on). Writes the new input to out (cap bytes) and returns its length, or 0 when
 * the mutation does not apply to this program (no call to delete, no room for one more) or the
 * result does not fit. Any output decodes to a program (every input does);
 * the calls the mutation did not touch decode as they were. Not thread-safe (static storage). */
size_t mdc_fz_mutate(mdc_fz_target t, const uint8_t *in, size_t n, fz_mutation m, uint64_t *rng, uint8_t *out,
                     size_t cap);

#endif
