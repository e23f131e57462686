/* md/driver.h - the memory-domain driver contract, ABI v1 (contract section 1).
 *
 * Public and frozen: tools outside this repository compile against these names, numbers,
 * signatures and struct layouts. C11; needs no other project header. What each entry point
 * must do, every status it returns and the settled points are in docs/contract.md (installed
 * as share/doc/mdc/contract.md); how to build a driver and judge it with mdc is in
 * docs/driver-guide.md, starting from examples/driver_skeleton/. */
#ifndef MD_DRIVER_H
#define MD_DRIVER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MD_DRIVER_ABI_VERSION 1u

typedef uint64_t md_handle;          /* client, prepared model, event; 0 is never valid */
typedef uint64_t md_token;           /* a driver-managed buffer; 0 is never valid */
typedef struct md_driver md_driver;

typedef enum md_status {            /* NN HAL ErrorStatus numbering */
  MD_NONE = 0, MD_DEVICE_UNAVAILABLE = 1, MD_GENERAL_FAILURE = 2, MD_OUTPUT_INSUFFICIENT_SIZE = 3,
  MD_INVALID_ARGUMENT = 4, MD_MISSED_DEADLINE_TRANSIENT = 5, MD_MISSED_DEADLINE_PERSISTENT = 6,
  MD_RESOURCE_EXHAUSTED_TRANSIENT = 7, MD_RESOURCE_EXHAUSTED_PERSISTENT = 8, MD_DEAD_OBJECT = 10000
} md_status;

typedef enum md_operand_type {      /* NN HAL OperandType numbering; v1 subset */
  MD_FLOAT32 = 0, MD_INT32 = 1, MD_UINT32 = 2, MD_TENSOR_FLOAT32 = 3, MD_TENSOR_INT32 = 4,
  MD_TENSOR_QUANT8_ASYMM = 5, MD_BOOL = 6, MD_TENSOR_FLOAT16 = 8, MD_TENSOR_QUANT8_ASYMM_SIGNED = 14
} md_operand_type;

typedef enum md_lifetime {
  MD_TEMPORARY_VARIABLE = 0, MD_SUBGRAPH_INPUT = 1, MD_SUBGRAPH_OUTPUT = 2,
  MD_CONSTANT_COPY = 3, MD_CONSTANT_REFERENCE = 4, MD_NO_VALUE = 5
} md_lifetime;

typedef enum md_operation_type {    /* NN HAL OperationType numbering; v1 subset */
  MD_OP_ADD = 0, MD_OP_CONCATENATION = 2, MD_OP_FULLY_CONNECTED = 9, MD_OP_MUL = 18, MD_OP_RELU = 19,
  MD_OP_RESHAPE = 22, MD_OP_SOFTMAX = 25, MD_OP_SUB = 36, MD_OP_CUSTOM = 10000
} md_operation_type;

typedef enum md_memory_kind {
  MD_MEM_ASHMEM = 0,               /* anonymous shared memory: a memfd; offset 0, whole size */
  MD_MEM_MMAP_FD = 1,              /* any mmap-able fd + offset + size + prot */
  MD_MEM_HARDWARE_BUFFER_BLOB = 2, /* a BLOB hardware buffer: width bytes, height = layers = 1 */
  MD_MEM_HARDWARE_BUFFER = 3       /* non-BLOB hardware buffer: executions only, logical size 0 */
} md_memory_kind;

typedef struct md_memory {          /* what hidl_memory is in the HAL: an unmapped pool */
  md_memory_kind kind; int fd; uint64_t offset; uint64_t size; uint32_t prot; /* PROT_READ|PROT_WRITE */
  uint32_t width, height, layers, format;   /* hardware buffers only */
} md_memory;

typedef struct md_operand {
  md_operand_type type;
  uint32_t rank; const uint32_t *dims; /* tensor with rank 0: rank unknown; a 0 entry: that dim unknown */
  float scale; int32_t zero_point;     /* quantized types */
  md_lifetime lifetime;
  uint32_t pool;                       /* CONSTANT_REFERENCE: index into md_model.pools */
  uint64_t offset, length;             /* CONSTANT_COPY: into operand_values; CONSTANT_REFERENCE: into pool */
} md_operand;

typedef enum md_attr_kind { MD_ATTR_I64 = 0, MD_ATTR_F64 = 1, MD_ATTR_STR = 2, MD_ATTR_I64_ARRAY = 3 } md_attr_kind;
typedef struct md_attr {             /* typed, named attribute of a custom operation; sorted by name */
  const char *name; md_attr_kind kind;
  int64_t i64; double f64; const char *str; const int64_t *array; uint32_t count;
} md_attr;

typedef struct md_operation {
  md_operation_type type;
  uint32_t n_inputs; const uint32_t *inputs; uint32_t n_outputs; const uint32_t *outputs;
  const char *custom_name; uint32_t n_attrs; const md_attr *attrs;   /* MD_OP_CUSTOM only */
} md_operation;

typedef struct md_model {
  uint32_t n_operands;   const md_operand *operands;
  uint32_t n_operations; const md_operation *operations;
  uint32_t n_inputs;     const uint32_t *inputs;    /* operand indexes */
  uint32_t n_outputs;    const uint32_t *outputs;
  const uint8_t *operand_values; uint64_t operand_values_size;
  uint32_t n_pools;      const md_memory *pools;
} md_model;

typedef struct md_buffer_role { uint32_t model_index, io_index; float probability; } md_buffer_role;
typedef struct md_buffer_desc { uint32_t rank; const uint32_t *dims; } md_buffer_desc;

typedef struct md_request_arg {       /* one model input or output */
  uint32_t has_no_value; uint32_t pool; uint64_t offset, length;
  uint32_t rank; const uint32_t *dims; /* rank 0: use the model's dims */
} md_request_arg;
typedef struct md_request_pool { uint32_t is_token; md_token token; md_memory memory; } md_request_pool;
typedef struct md_request {
  uint32_t n_inputs;  const md_request_arg *inputs;
  uint32_t n_outputs; const md_request_arg *outputs;
  uint32_t n_pools;   const md_request_pool *pools;
} md_request;

#define MD_MAX_RANK 8u
typedef struct md_output_shape { uint32_t rank; uint32_t dims[MD_MAX_RANK]; uint8_t is_sufficient; } md_output_shape;
typedef struct md_timing { uint64_t on_device_ns, in_driver_ns; } md_timing;  /* UINT64_MAX: not measured */

typedef struct md_capabilities {
  uint32_t struct_size; uint32_t supports_memory_domains; uint64_t max_buffer_bytes;
  char backend[32]; char device_name[64];
} md_capabilities;

typedef struct md_leak_report { uint32_t buffers, prepared_models, events; uint64_t bytes; } md_leak_report;
typedef struct md_device md_device;   /* opaque; the only pointer a caller holds */

typedef struct md_driver {
  uint32_t abi_version, struct_size; const char *name, *version;
  md_status (*open_device)(const char *config, md_device **out);
  void      (*close_device)(md_device *);
  md_status (*get_capabilities)(md_device *, md_capabilities *out);
  md_status (*get_supported_operations)(md_device *, const md_model *, uint8_t *supported /* n_operations */);
  md_status (*open_client)(md_device *, md_handle *client);
  md_status (*close_client)(md_device *, md_handle client, md_leak_report *leaks /* may be NULL */);
  md_status (*prepare_model)(md_device *, md_handle client, const md_model *, md_handle *prepared);
  md_status (*release_prepared_model)(md_device *, md_handle client, md_handle prepared);
  md_status (*allocate)(md_device *, md_handle client, const md_buffer_desc *,
                        const md_handle *prepared, uint32_t n_prepared,
                        const md_buffer_role *input_roles, uint32_t n_input_roles,
                        const md_buffer_role *output_roles, uint32_t n_output_roles, md_token *token);
  md_status (*copy_to)(md_device *, md_handle client, md_token src, const md_memory *dst);
  md_status (*copy_from)(md_device *, md_handle client, md_token dst, const md_memory *src,
                         uint32_t rank, const uint32_t *dims);
  md_status (*free_buffer)(md_device *, md_handle client, md_token);
  md_status (*execute)(md_device *, md_handle client, md_handle prepared, const md_request *,
                       md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);
  md_status (*execute_async)(md_device *, md_handle client, md_handle prepared, const md_request *,
                             md_handle *event);
  md_status (*wait_event)(md_device *, md_handle client, md_handle event, uint64_t timeout_ns,
                          md_output_shape *shapes, uint32_t n_shapes, md_timing *timing);
  const char *(*last_error)(md_device *);  /* calling thread's last failure message; never NULL */
} md_driver;

/* The one symbol a driver exports: its function table for abi_version, or NULL if it cannot serve it. */
const md_driver *md_driver_entry(uint32_t abi_version); /* NULL if it cannot serve that version */

#ifdef __cplusplus
}
#endif

#endif /* MD_DRIVER_H */
