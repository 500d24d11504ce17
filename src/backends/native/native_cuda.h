#pragma once
// cuBLAS and cuDNN called directly (native_cuda.cpp): the "cuda" native side of the operator
// benchmarks. Built only with the CUDA backend (D5_HAVE_CUDA).
#include <optional>
#include <string>
#include <vector>

#include "deep500/op/native_calls.h"

namespace d5 {

// Gemm on cublasSgemm, Conv (2-D, NCHW) on cudnnConvolutionForward with the algorithm named in
// match.d5_implementation. `inputs` are host tensors, copied here once to buffers of its own on
// CUDA device match.device_index. nullopt with the reason for a problem it does not cover or a
// device it cannot set up.
std::optional<NativeCall> cuda_native_call(const Problem& p, const std::vector<Tensor>& inputs,
                                           const NativeMatch& match, std::string* why);

}  // namespace d5
