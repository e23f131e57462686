/* fz_codec.h - private to fz_decode.c and fz_encode.c: the byte grammar of a fuzz input
 * (docs/fuzzing.md "The encoding").
 *
 * Every choice is one selector byte. Low selector values are "smart" forms the decoder
 * resolves against the state model (a live token of this client with this role, the exact
 * size a copy needs): random bytes mostly give valid calls. The top values are literal forms
 * that name a value outright; the encoder writes only those, so what it writes decodes the
 * same whatever the state. Past the end of the input every byte reads as 0. */
#ifndef MDC_FZ_CODEC_H
#define MDC_FZ_CODEC_H

#include "fz_prog.h"

/* op byte: < FZ_OP_LIT: the target's table; FZ_OP_LIT + call: that call; FZ_OP_BLOCK: begin
 * or end a concurrent block (concurrency only). */
#define FZ_OP_LIT 0xF0u
#define FZ_OP_BLOCK 0xFFu

/* handle selector */
#define FZ_SEL_ZERO 0xF8u      /* 0 */
#define FZ_SEL_INDEX 0xF9u     /* then u8: the object */
#define FZ_SEL_XOR 0xFAu       /* then u8 object, u64 bits */
#define FZ_SEL_ADD 0xFBu       /* then u8 object, u64 addend */
#define FZ_SEL_LITERAL 0xFCu   /* then u64 */
#define FZ_SEL_SMART_END 0xF8u /* selectors below this are smart */

/* every other choice: FZ_LIT then the value written out; FZ_ABSENT: an optional argument left out */
#define FZ_LIT 0xFFu
#define FZ_ABSENT 0xFEu
#define FZ_COUNT_LIT 0xF0u     /* counts: FZ_COUNT_LIT + n */

/* The order arguments are decoded and encoded in: the call table's order, but an argument
 * that depends on others comes after them (roles after the prepared list, dims before the
 * memory whose size they decide, the request after the prepared model it is for). Fills
 * order[0..n) with positions in mdc_calls[c].args; returns n. */
static inline unsigned fz_arg_order(mdc_call c, uint8_t order[MDC_CALL_MAX_ARGS]) {
  static const uint8_t rank[] = {
      [MDC_T_DEVICE] = 0, [MDC_T_TEXT] = 0, [MDC_T_HANDLE] = 0, [MDC_T_HANDLES] = 0,
      [MDC_T_MODEL] = 0,  [MDC_T_ROLES] = 1, [MDC_T_DESC] = 2, [MDC_T_DIMS] = 2,
      [MDC_T_MEMORY] = 3, [MDC_T_REQUEST] = 3, [MDC_T_U64] = 4};
  const mdc_call_desc *d = &mdc_calls[c];
  unsigned n = 0;
  for (uint8_t r = 0; r <= 4; r++)
    for (uint8_t i = 0; i < d->n_args; i++)
      if (rank[mdc_args[d->args[i].id].type] == r) order[n++] = i;
  return n;
}

#endif
