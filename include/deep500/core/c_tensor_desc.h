/* C-ABI tensor descriptor shared with operators compiled at run time (Level 0 custom ops).
 * Plain C so that a user library built by any compiler can read it. Values of d5_dtype and
 * d5_layout equal the C++ enums d5::DType and d5::Layout. */
#ifndef DEEP500_C_TENSOR_DESC_H
#define DEEP500_C_TENSOR_DESC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define D5_MAX_RANK 8

typedef enum d5_dtype {
  D5_DTYPE_F32 = 0,
  D5_DTYPE_F64 = 1,
  D5_DTYPE_F16 = 2,
  D5_DTYPE_BF16 = 3,
  D5_DTYPE_I8 = 4,
  D5_DTYPE_I16 = 5,
  D5_DTYPE_I32 = 6,
  D5_DTYPE_I64 = 7,
  D5_DTYPE_U8 = 8,
  D5_DTYPE_BOOL = 9
} d5_dtype;

typedef enum d5_layout { D5_LAYOUT_ANY = 0, D5_LAYOUT_NCHW = 1, D5_LAYOUT_NHWC = 2 } d5_layout;

typedef struct d5_tensor_desc {
  int32_t dtype;  /* d5_dtype */
  int32_t layout; /* d5_layout */
  int32_t rank;   /* 0 .. D5_MAX_RANK */
  int32_t reserved;
  int64_t dims[D5_MAX_RANK];
} d5_tensor_desc;

#ifdef __cplusplus
}
#endif

#endif /* DEEP500_C_TENSOR_DESC_H */
