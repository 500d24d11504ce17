#pragma once
// f16 and bf16 for the operators whose fast implementations compute them on tensor cores (Gemm,
// MatMul, Conv): the reference's value of such an operator is its f32 result on the inputs
// widened to f32 (exactly), rounded once to the inputs' dtype. That is what a kernel that
// multiplies in low precision and accumulates in f32 computes, up to the order of its sums, so it
// is the oracle those kernels are checked against; gradients are defined the same way.
#include "../ref_common.h"

namespace d5::reference {

// A factory that hands a spec whose floating inputs are all f16 (or all bf16) to `f32_factory`
// widened, inside an operator that converts at its boundaries; any other spec goes to
// `f32_factory` as it is. Inputs mixing f16 or bf16 with another floating dtype are refused.
OpFactory widening(OpFactory f32_factory);

}  // namespace d5::reference
