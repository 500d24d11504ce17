// Test library that claims another ABI version: deep500 must refuse it before looking up (or
// calling) any other entry point, all of which are missing here.
#include "deep500/op/custom_op.h"

extern "C" int32_t d5_custom_op_abi_version(void) { return D5_CUSTOM_OP_ABI_VERSION + 1000; }
