/* fz_eval.h - private to fuzz/: the value oracle's reference evaluator (docs/fuzzing.md
 * "Oracles"). For a model of float32 ADD, SUB, MUL (same dims on both sides, a constant fused
 * activation) and RELU over fully known dims, it computes what every output must hold from the
 * input values, the way SPEC's NN HAL semantics define them; any other model is not evaluated
 * (its values are not judged). The harness compares what an execution that returned NONE wrote
 * to its output pools with these values: an execution that read freed memory, another
 * client's buffer, or a buffer overwritten under it shows as wrong values. */
#ifndef MDC_FZ_EVAL_H
#define MDC_FZ_EVAL_H

#include "fz_prog.h"

#define FZ_EVAL_MAX 256u     /* elements an evaluated operand may have */

typedef struct fz_eval_scratch {
  float v[FZ_MAX_OPS][FZ_EVAL_MAX];
} fz_eval_scratch;

/* Elements of model input (is_out 0) or output io: a TENSOR_FLOAT32 operand with fully known
 * dims of at most FZ_EVAL_MAX elements; 0 otherwise. */
uint32_t mdc_fz_eval_count(const fz_model *m, unsigned io, int is_out);
/* Evaluates m: in[i] holds mdc_fz_eval_count(m, i, 0) floats, out[j] gets
 * mdc_fz_eval_count(m, j, 1). 0, or -1 when the model is beyond the evaluator. */
int mdc_fz_eval(const fz_model *m, const float *const *in, float *const *out, fz_eval_scratch *s);
/* Whether got is what the evaluator's want allows. */
int mdc_fz_eval_same(float want, float got);

#endif
