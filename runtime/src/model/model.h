/* model.h - private to the runtime: model validation and the prepared-model representation.
 *
 * md__model_build validates an md_model against SPEC sections 2 and 7 and makes a deep,
 * immutable copy that owns everything it needs (operand dims, CONSTANT_COPY bytes, mappings
 * of CONSTANT_REFERENCE pools, attributes, resolved kernels), so nothing of the caller's
 * md_model is used after prepare_model returns. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include <stdint.h>
#include "md/driver.h"
#include "md/kernel.h"
#include "pool.h"

typedef struct md__operand {
  md_operand_type type;
  md_lifetime lifetime;
  uint32_t rank;                   /* 0 for scalars, and for tensors of unknown rank */
  uint32_t dims[MD_MAX_RANK];      /* 0 entries: unknown */
  float scale;
  int32_t zero_point;
  const uint8_t *value;            /* constants: their bytes (CONSTANT_COPY: in the model's
                                      own copy; CONSTANT_REFERENCE: in a held mapping) */
  uint64_t length;                 /* constants: byte length */
  uint32_t io_index;               /* SUBGRAPH_INPUT/OUTPUT: position in inputs/outputs */
} md__operand;

typedef struct md__operation {
  md_operation_type type;
  const char *name;                /* kernel name: built-in name or custom_name (owned) */
  uint32_t n_inputs, n_outputs;
  uint32_t *inputs, *outputs;      /* operand indexes (owned) */
  uint32_t n_attrs;
  md_attr *attrs;                  /* deep copy (names, strings, arrays owned), sorted */
  const md_kernel_def *kernel;     /* resolved for the device's platform */
} md__operation;

typedef struct md__model {
  uint32_t n_operands;
  md__operand *operands;
  uint32_t n_operations;
  md__operation *operations;       /* in execution order (validated topological) */
  uint32_t n_inputs, n_outputs;
  uint32_t *inputs, *outputs;      /* operand indexes */
  uint8_t *values;                 /* copy of operand_values */
  uint64_t values_size;
  uint32_t n_pools;
  md__mapping *pools;              /* acquired mappings of the constant pools */
} md__model;

/* Validates `m` for a device whose kernel platform is `platform` ("sim", "hip"), and builds a
 * deep copy. INVALID_ARGUMENT with a message naming the field for any rule broken
 * ("operand 3: CONSTANT_COPY offset 8 + length 16 is past operand_values (12 bytes)",
 * "operation 0 (ADD): input 2 must be INT32 (fused activation), got TENSOR_FLOAT32");
 * GENERAL_FAILURE when a constant pool cannot be mapped; GENERAL_FAILURE "operation N:
 * no kernel for X on platform P" when the operation has no kernel. `cache` maps the constant
 * pools (may be NULL). */
md_status md__model_build(const md_model *m, const char *platform, md__pool_cache *cache,
                          md__model **out);
void md__model_free(md__model *m);

/* For get_supported_operations: which operations this platform can run (validating the
 * model as prepare would; an invalid model is INVALID_ARGUMENT). */
md_status md__model_supported(const md_model *m, const char *platform, uint8_t *supported);

/* Byte size of an operand of `type` with fully known dims (scalars: the element size);
 * 0 if any dim is unknown or the type is unknown; UINT64_MAX on overflow. */
uint64_t md__type_bytes(md_operand_type type, uint32_t rank, const uint32_t *dims);
/* True for scalar types (FLOAT32, INT32, UINT32, BOOL). */
int md__type_is_scalar(md_operand_type type);

/* combine(a, b) of SPEC section 3. rank 0 = unknown rank. Returns 0 and writes the result, or
 * -1 if they do not combine (then *axis is the first axis that disagrees, or MD_MAX_RANK
 * for a rank mismatch). */
int md__dims_combine(uint32_t ra, const uint32_t *da, uint32_t rb, const uint32_t *db,
                     uint32_t *rout, uint32_t *dout, uint32_t *axis);
/* 1 if rank > 0 and no dim is 0. Scalars (rank 0 with a scalar type) are handled by callers. */
int md__dims_known(uint32_t rank, const uint32_t *dims);
/* Formats dims as "[2,0,3]" (or "[?]" for unknown rank) into buf; returns buf. */
const char *md__dims_str(uint32_t rank, const uint32_t *dims, char *buf, size_t n);

#endif
