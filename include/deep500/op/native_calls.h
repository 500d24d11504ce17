#pragma once
// Native library calls for suite problems, written directly against oneDNN, ATen, cuBLAS and cuDNN
// without any deep500 operator in between: the "hand-written" side of the operator benchmarks.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deep500/op/suites.h"

namespace d5 {

struct NativeCall {
  // One forward computation. On the host it returns when the result is there; on a GPU ("cuda")
  // it only queues the work on the device's stream, and the caller synchronises.
  std::function<void()> run;
  std::function<Tensor()> result;    // output of the last run, as a deep500 tensor on the host
  std::string implementation;        // "onednn:jit:avx512_core (matmul)", "aten::matmul"
};

// Libraries compiled into this program: "onednn", "torch" and/or "cuda".
std::vector<std::string> native_libraries();

enum class NativeLayout {
  Plain,     // oneDNN reads and writes the plain row-major / NCHW / OIHW memory deep500 has
  Boundary,  // oneDNN picks its formats; plain inputs are reordered into them (and the output
             // back) on every call, as a framework with plain tensors must: the onednn backend
  Best,      // oneDNN picks its formats; inputs are reordered once, before any timed call
};

// What a native call must match of the deep500 operator it is compared with.
struct NativeMatch {
  // oneDNN's only: ATen chooses its formats itself, and cuDNN is handed plain NCHW.
  NativeLayout layout = NativeLayout::Plain;
  // The operator's implementation(): the cuDNN forward algorithm it chose ("fwd=NAME") is read
  // from it, so that both sides run the same kernel.
  std::string d5_implementation;
  int32_t device_index = 0;  // the CUDA device the operator runs on
};

// GEMM and convolution problems (from DeepBench-style suites). Plain host inputs are borrowed,
// not copied, by the host libraries: they must outlive the call; "cuda" copies them to device
// buffers of its own once, here. nullopt with the reason when the library is not built or the
// problem is not covered.
std::optional<NativeCall> make_native_call(const std::string& library, const Problem& p,
                                           const std::vector<Tensor>& inputs, std::string* why,
                                           const NativeMatch& match);
inline std::optional<NativeCall> make_native_call(const std::string& library, const Problem& p,
                                                  const std::vector<Tensor>& inputs, std::string* why,
                                                  NativeLayout layout = NativeLayout::Plain) {
  NativeMatch match;
  match.layout = layout;
  return make_native_call(library, p, inputs, why, match);
}

}  // namespace d5
