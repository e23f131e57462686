/* model_int.h - private to the model files: the validation stage (model_check.c) that
 * md__model_build and md__model_supported (model.c) start with, and the names and message
 * helpers both use. */
#ifndef MD_MODEL_INT_H
#define MD_MODEL_INT_H

#include <stdint.h>

#include "md/driver.h"
#include "md/kernel.h"

/* "No index": an operand that is no model input/output, or not written by any operation. */
#define MD__NO_INDEX UINT32_MAX

/* Validates the caller's model m against every structural rule of SPEC sections 1, 2 and 7
 * (counts and pointers, operands, model inputs/outputs, pools before mapping, constant ranges,
 * operations and their data flow); m is not NULL. MD_NONE when it is sound. On error,
 * INVALID_ARGUMENT (a rule broken) or RESOURCE_EXHAUSTED_TRANSIENT (out of memory) is returned
 * with a message naming the field, and nothing is allocated or mapped. Thread-safe. */
md_status md__model_validate(const md_model *m);

/* The name of an attribute kind ("I64", ...), NULL for an unknown one. */
const char *md__attr_kind_name(md_attr_kind k);
/* The name an operation goes by in messages and kernel lookups: the built-in name, the
 * custom_name of a CUSTOM operation, or a placeholder while those are not yet validated. */
const char *md__op_label(const md_operation *op);
/* Records "operation <i> (<label>): <fmt...>" as the last error and returns st. */
md_status md__op_fail(md_status st, uint32_t i, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records "model: out of memory for <what>" and returns RESOURCE_EXHAUSTED_TRANSIENT. */
md_status md__model_oom(const char *what);

#endif
