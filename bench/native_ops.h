#pragma once
// Native library calls for suite problems, written directly against oneDNN and ATen without any
// deep500 operator in between: the "hand-written" side of the operator benchmarks.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deep500/op/suites.h"

namespace d5::bench {

struct NativeCall {
  std::function<void()> run;         // one forward computation
  std::function<Tensor()> result;    // output of the last run, as a deep500 tensor
  std::string implementation;        // "onednn:jit:avx512_core (matmul)", "aten::matmul"
};

// Libraries compiled into this program: "onednn" and/or "torch".
std::vector<std::string> native_libraries();

enum class NativeLayout {
  Plain,     // oneDNN reads and writes the plain row-major / NCHW / OIHW memory deep500 has
  Boundary,  // oneDNN picks its formats; plain inputs are reordered into them (and the output
             // back) on every call, as a framework with plain tensors must: the onednn backend
  Best,      // oneDNN picks its formats; inputs are reordered once, before any timed call
};

// GEMM and convolution problems (from DeepBench-style suites). Plain inputs are borrowed, not
// copied: they must outlive the call. nullopt with the reason when the library is not built or
// the problem kind is not covered. ATen chooses its formats itself, so `layout` is oneDNN's only.
std::optional<NativeCall> make_native_call(const std::string& library, const Problem& p,
                                           const std::vector<Tensor>& inputs, std::string* why,
                                           NativeLayout layout = NativeLayout::Plain);

}  // namespace d5::bench
