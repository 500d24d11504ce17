/* Compiled as C: the ABI half of custom_op.h must stay plain C, with the same layout C++ sees. */
#include <stddef.h>

#include "deep500/op/custom_op.h"

int d5_test_c_tensor_size(void) { return (int)sizeof(d5_tensor); }
int d5_test_c_tensor_data_offset(void) { return (int)offsetof(d5_tensor, data); }
int d5_test_c_abi_version(void) { return D5_CUSTOM_OP_ABI_VERSION; }
