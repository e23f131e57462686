/* fz_model.h - private to fuzz/: the state model, the oracle for any driver.
 *
 * It keeps what SPEC says a driver holds after each call of a program: which objects are live,
 * their kind and owner client, a buffer's roles, type, initial and current dims, whether it is
 * initialized and what it holds, the events in flight and what their executions will return.
 * Before a call, mdc_fz_predict gives the set of statuses SPEC allows in that state (and the
 * shapes, leak counts and data a success must show); after it, mdc_fz_apply moves the state by
 * the status the driver returned. A status outside the set is a finding.
 *
 * Knowledge is three-valued (FZ_NO, FZ_YES, FZ_MAYBE): where SPEC allows a choice (a racing
 * call, an output that an OUTPUT_INSUFFICIENT_SIZE may or may not uninitialize) the model says
 * MAYBE and the sets widen; nothing is ever guessed. The decoder runs the same model on
 * predicted statuses to choose mostly valid arguments.
 *
 * Pure functions of their arguments: thread-safe. */
#ifndef MDC_FZ_MODEL_H
#define MDC_FZ_MODEL_H

#include "fz_prog.h"

/* A set of statuses: bit s for md_status s in 0..8, bit 9 for MD_DEAD_OBJECT, bit 10 for any
 * other value. */
typedef uint16_t fz_set;
static inline fz_set fz_bit(md_status s) {
  return (unsigned)s <= 8 ? (fz_set)(1u << (unsigned)s) : s == MD_DEAD_OBJECT ? (fz_set)(1u << 9) : (fz_set)(1u << 10);
}
#define FZ_BIT(s) ((fz_set)(1u << (s)))
/* "NONE|INVALID_ARGUMENT" into buf. */
const char *mdc_fz_set_str(fz_set s, char *buf, size_t n);
/* The lowest status of a non-empty set. */
md_status mdc_fz_set_first(fz_set s);

enum { FZ_NO = 0, FZ_YES = 1, FZ_MAYBE = 2 };
enum { FZ_UNMADE = 0, FZ_LIVE = 1, FZ_DEAD = 2, FZ_MAYBE_LIVE = 3 };
#define FZ_NOBODY 0xFFFFu

/* A model's class: VALID models are accepted by every driver (SPEC 7's float32 kernels) and
 * the model predicts their executions; OTHER models may be accepted or refused, and their
 * executions are judged only up to request validation. */
enum { FZ_MODEL_OTHER = 0, FZ_MODEL_VALID = 1 };
int mdc_fz_model_class(const fz_model *m);

/* What one execution will do (filled by mdc_fz_predict for execute, execute_async). */
typedef struct fz_exec {
  fz_set set;                  /* what it returns (wait_event's for an async one) */
  uint8_t shapes_known;        /* out[] and sufficient[] hold for NONE and OIS */
  uint8_t n_out;
  fz_dims out[FZ_MAX_ARGS];
  uint8_t sufficient[FZ_MAX_ARGS];
  uint16_t out_tok[FZ_MAX_ARGS];   /* each output's token object (valid tokens), else FZ_NOBODY */
  uint16_t in_tok[FZ_MAX_ARGS];
  uint8_t validated;           /* FZ_YES: request validation passes; MAYBE: it may */
  uint8_t past_ia;             /* the model reached the initialization checks: no
                                  INVALID_ARGUMENT rule certainly fails */
  uint8_t disturbed;           /* async: another call wrote or uninitialized one of its output
                                  tokens while it was in flight, maybe after it finished: after
                                  its wait their state is not known */
} fz_exec;

/* Contents a buffer may hold: the engine's random bytes of a seed (0: zeros). */
typedef struct fz_content {
  uint32_t seed;
  uint64_t bytes;
} fz_content;

typedef struct fz_tok {
  int32_t type;
  float scale;
  int32_t zero_point;
  uint8_t scalar;
  uint8_t n_roles;
  struct { uint16_t prepared; uint8_t is_out, index; } roles[2 * FZ_MAX_LIST];
  fz_dims init;                /* the combination at allocation (present 0: rank unknown) */
  fz_dims cur;                 /* current dims, when cur_known */
  uint8_t cur_known;           /* FZ_YES or FZ_MAYBE */
  uint8_t inited;              /* FZ_NO / FZ_YES / FZ_MAYBE */
  uint8_t content;             /* FZ_YES: holds the bytes of content_seed (content_bytes long) */
  uint32_t content_seed;
  uint64_t content_bytes;
  uint64_t bytes;              /* its current size for the leak report (SPEC 8.10) */
  uint8_t bytes_known;
  uint8_t writers;             /* async executions in flight that write it */
  uint8_t readers;             /* async executions in flight that read it */
  uint8_t racy;                /* another lane of the running block writes it */
  /* strict (the reference's documented decision, docs/memory-domains.md): a read racing with
   * copy_from writes sees one whole value: one of these contents */
  uint8_t n_alt;
  fz_content alt[FZ_MAX_LANES * 4 + 1];
} fz_tok;

typedef struct fz_ev {
  fz_exec ex;
  uint16_t prepared;
} fz_ev;

typedef struct fz_obj {
  uint8_t kind;                /* mdc_obj */
  uint8_t live;                /* FZ_UNMADE, FZ_LIVE, FZ_DEAD, FZ_MAYBE_LIVE */
  uint16_t owner;              /* owning client object; FZ_NOBODY for clients */
  uint8_t model;               /* PREPARED: its model */
  uint8_t model_class;
  uint8_t racy;                /* CLIENT: another lane of the running block may make objects for it */
  fz_tok tok;
  fz_ev ev;
} fz_obj;

typedef struct fz_state {
  uint64_t mem_limit;
  uint8_t strict;              /* judge the reference driver's documented decisions too */
  uint64_t pressure;           /* device bytes the run may hold (an upper bound, saturating):
                                  past mem_limit, whatever allocates may be refused */
  uint16_t n;
  fz_obj o[FZ_MAX_OBJS];
} fz_state;

/* What SPEC allows one call to return, and what a success must show. */
typedef struct fz_pred {
  fz_set set;
  char why[160];               /* the rule that decided the set (for findings), "" when plain */
  /* allocate: the buffer it makes */
  fz_tok tok;
  /* copy_from: the dims it sets and the content */
  fz_dims dims;
  uint64_t bytes;
  /* copy_to: data the destination must hold after NONE */
  uint8_t check;
  uint32_t check_seed;
  uint64_t check_bytes;
  uint8_t n_alt;               /* strict: after NONE the destination holds one of these whole */
  fz_content alt[FZ_MAX_LANES * 4 + 1];
  /* close_client: the leak report, each field known or not */
  uint8_t leaks_known;         /* bit 0 buffers, 1 prepared_models, 2 events, 3 bytes */
  md_leak_report leaks;
  /* get_supported_operations */
  uint8_t supported_known;
  uint8_t n_supported;
  /* execute, execute_async, wait_event */
  fz_exec ex;
  uint8_t sure;                /* wait_event: its client and event are certainly valid */
  uint8_t ev_valid;            /* wait_event: the event handle's validity (FZ_NO: certainly
                                  refused whether or not the event still lives, e.g. another
                                  client's; FZ_MAYBE: refused only if it was consumed) */
} fz_pred;

void mdc_fz_state_init(fz_state *s, uint64_t mem_limit);
/* The prediction for call k of p in state s. */
void mdc_fz_predict(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, fz_pred *out);
/* Moves s by call k's outcome: the status got (pr is what mdc_fz_predict said before it). */
void mdc_fz_apply(fz_state *s, const mdc_fz_prog *p, const fz_call *k, const fz_pred *pr, md_status got);

/* Concurrent blocks: the state lane `lane` of block b starts from (s0 with every object that
 * another lane of the block may release, write or close made uncertain). */
void mdc_fz_block_view(const fz_state *s0, const mdc_fz_prog *p, const fz_block *b, uint8_t lane,
                       fz_state *out);
/* After block b ran: s (the state before it) becomes the state after it, from each lane's state
 * (lanes[0..b->lanes)) and every call's status (got[i] for call b->first + i). Returns 0, or -1
 * with a finding in why (a handle released twice by racing calls, an event consumed twice). */
int mdc_fz_block_merge(fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, char *why, size_t whylen);

/* After block b ran (s: the state before it, lanes and got as for mdc_fz_block_merge), judges
 * the leak report of each of its close_clients that returned NONE (reports[i] for call
 * b->first + i) against what the lanes were told, whatever the interleaving: the objects of the
 * client live before the block, less those a call of the block freed, released or consumed
 * with a wait (before the close: a handle dies once), plus those a creation of the block made
 * for it (NONE: live at the close; a refusal made nothing). Where a lane's status does not
 * tell (an event a wait may have consumed with INVALID_ARGUMENT, an object an earlier block
 * left maybe live) a count may lie in a range; bytes are judged when every counted buffer's
 * size is known. Returns -1, or the index of the close_client whose report is wrong, with the
 * difference in why. */
int mdc_fz_block_leaks(const fz_state *s, const mdc_fz_prog *p, const fz_block *b, const fz_state *lanes,
                       const md_status *got, const md_leak_report *reports, char *why, size_t whylen);

/* Shared with the decoder: the call's client object (FZ_NOBODY when its client argument does
 * not name a client object), the model behind a prepared object (or NULL). */
uint16_t mdc_fz_call_client(const mdc_fz_prog *p, const fz_call *k);
const fz_model *mdc_fz_prepared_model(const fz_state *s, const mdc_fz_prog *p, uint16_t obj);
/* Dims helpers: combine (SPEC 3) into out, 0 or -1; fully known (rank known, no 0 axis). */
int mdc_fz_combine(const fz_dims *a, const fz_dims *b, fz_dims *out);
int mdc_fz_known(const fz_dims *d);
/* Predicted output dims of a VALID model for input dims in[0..n_in) (all fully known): 0, -1
 * when an operation's inputs do not broadcast, -2 when a produced dim disagrees with the one
 * declared. *largest (may be NULL): the most bytes of any operand the operations produced, up
 * to and including the one where inference stopped (a run allocates them in that order). */
int mdc_fz_infer(const fz_model *m, const fz_dims *in, fz_dims *out, uint64_t *largest);

#endif
