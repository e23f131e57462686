/* fz_model_int.h - private to the state model's predictions (fz_model_predict.c,
 * fz_model_exec.c): the rules both apply, and how a prediction records the rule that decided it
 * and ends where a call surely fails. Pure functions of their arguments: thread-safe. */
#ifndef MDC_FZ_MODEL_INT_H
#define MDC_FZ_MODEL_INT_H

#include "fz_model.h"

/* Records the rule that decided the set, for a finding: the first one given stays. */
void mdc_fz__why(fz_pred *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A condition that must hold for the call to go on: when it may not, `st` joins the set;
 * when it surely does not, the prediction ends there: the function returns (rv: what a step
 * returns to tell its caller so, GATE_STEP's -1). */
#define GATE_RET(rv, pr, tri, st, ...)                \
  do {                                                \
    uint8_t t_ = (tri);                               \
    if (t_ != FZ_YES) {                               \
      (pr)->set |= FZ_BIT(st);                        \
      if (t_ == FZ_NO) mdc_fz__why((pr), __VA_ARGS__); \
    }                                                 \
    if (t_ == FZ_NO) return rv;                       \
  } while (0)
#define GATE(pr, tri, st, ...) GATE_RET(/* void */, pr, tri, st, __VA_ARGS__)
#define GATE_STEP(pr, tri, st, ...) GATE_RET(-1, pr, tri, st, __VA_ARGS__)

/* Whether handle r is a live object of `kind` owned by `owner` (any owner for clients): FZ_NO,
 * FZ_YES or FZ_MAYBE; *obj gets the object when it may be. `what` says why not, for findings. */
uint8_t mdc_fz__ref3(const fz_state *s, const fz_ref *r, mdc_obj kind, uint16_t owner, uint16_t *obj,
                     const char **what);

/* What a memory descriptor is for: copy_from / copy_to, or a request's pool. */
enum { FZ_USE_COPY = 0, FZ_USE_IO = 1 };
/* SPEC 2 / 8.2: whether descriptor m passes validation for `use` (FZ_NO: INVALID_ARGUMENT). */
uint8_t mdc_fz__mem_valid(const fz_mem *m, int use);

/* The refusals a driver may give to `bytes` of device memory (SPEC 8.3, 8.17): none below the
 * big size, more above it and past the device, INVALID_ARGUMENT too for no size at all
 * (UINT64_MAX). */
fz_set mdc_fz__size_refusals(const fz_state *s, uint64_t bytes);
/* RESOURCE_EXHAUSTED_TRANSIENT when what the run may already hold and `bytes` more may not fit. */
fz_set mdc_fz__pressure(const fz_state *s, uint64_t bytes);

/* A buffer another call may be writing: an async execution in flight, or a racing lane. */
static inline int fz_tok_busy(const fz_tok *t) { return t->writers || t->racy; }

/* Request validation and, for VALID models, the execution's outcome (SPEC 4): pr->ex, and the
 * validation's statuses in pr->set (the caller adds the run's). */
void mdc_fz__predict_exec(const fz_state *s, const mdc_fz_prog *p, const fz_call *k, uint16_t client, fz_pred *pr);

#endif
