/* shape.c - operand sizes and the dims combination rule of SPEC section 3. */
#include <stdio.h>
#include <string.h>

#include "mutant.h"
#include "md/kernel.h"
#include "model.h"

int md__type_is_scalar(md_operand_type type) {
  return type == MD_FLOAT32 || type == MD_INT32 || type == MD_UINT32 || type == MD_BOOL;
}

uint64_t md__type_bytes(md_operand_type type, uint32_t rank, const uint32_t *dims) {
  uint64_t n = md_operand_type_size(type);
  if (n == 0) return 0;
  if (md__type_is_scalar(type)) return n;
  if (rank == 0 || rank > MD_MAX_RANK) return 0;
  /* Not fully known is 0 whatever the order of the axes: an overflow of the known ones before
   * an unknown one is not a size (found by the tokens fuzz target: [921, 2593823232, ..., 0] was
   * UINT64_MAX, so allocate refused as RESOURCE_EXHAUSTED_PERSISTENT what [0, ...] accepted). */
  for (uint32_t i = 0; i < rank; i++)
    if (dims[i] == 0) return 0;
  for (uint32_t i = 0; i < rank; i++) {
    if (n > UINT64_MAX / dims[i]) return UINT64_MAX;
    n *= dims[i];
  }
  return n;
}

int md__dims_combine(uint32_t ra, const uint32_t *da, uint32_t rb, const uint32_t *db,
                     uint32_t *rout, uint32_t *dout, uint32_t *axis) {
  if (ra == 0 || rb == 0) {
    uint32_t r = ra == 0 ? rb : ra;
    const uint32_t *d = ra == 0 ? db : da;
    if (r > MD_MAX_RANK) {
      if (axis) *axis = MD_MAX_RANK;
      return -1;
    }
    if (r) memmove(dout, d, r * sizeof *d);
    *rout = r;
    return 0;
  }
  if (ra != rb || ra > MD_MAX_RANK) {
    if (axis) *axis = MD_MAX_RANK;
    return -1;
  }
  uint32_t tmp[MD_MAX_RANK];
  for (uint32_t i = 0; i < ra; i++) {
    /* (Mutant combine_zero_wrong: 0 is compared like any other extent, not as "unknown".) */
    int zero_unknown = !MD_MUTANT(combine_zero_wrong);
    if (zero_unknown && da[i] == 0) tmp[i] = db[i];
    else if ((zero_unknown && db[i] == 0) || db[i] == da[i]) tmp[i] = da[i];
    else {
      if (axis) *axis = i;
      return -1;
    }
  }
  memcpy(dout, tmp, ra * sizeof *tmp);
  *rout = ra;
  return 0;
}

int md__dims_known(uint32_t rank, const uint32_t *dims) {
  if (rank == 0 || rank > MD_MAX_RANK) return 0;
  for (uint32_t i = 0; i < rank; i++)
    if (dims[i] == 0) return 0;
  return 1;
}

const char *md__dims_str(uint32_t rank, const uint32_t *dims, char *buf, size_t n) {
  if (n == 0) return buf;
  if (rank == 0) {
    snprintf(buf, n, "[?]");
    return buf;
  }
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < rank && used < n; i++) {
    int w = snprintf(buf + used, n - used, "%s%u", i ? "," : "[", dims[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}
