#pragma once
// d5's f32 math mode (--math, deep500/core/math_mode.h) as ATen's process-wide switches, so that
// the torch executor on a GPU computes what the manifest says: ATen's defaults let cuDNN's
// convolutions round operands to TF32, which under `strict` would be about 1e-3 relative off
// the reference unannounced (docs/torch-executor.md#math-on-a-gpu).
//
//   mode    TF32 in cuBLAS / cuDNN   cuDNN algorithms
//   strict  off / off                deterministic ones, by cuDNN's heuristics (no timing)
//   tf32    on / on                  deterministic ones, by cuDNN's heuristics
//   fast    off / off                the fastest timed (cudnn.benchmark), any
//
// ATen has no switch that keeps FFT and Winograd convolutions out, as d5's CUDA backend does
// under `strict`; deterministic algorithms are the closest it offers. The switches only matter
// where ATen runs on CUDA; on the CPU they are read by nothing.
#include "deep500/core/math_mode.h"

namespace d5::torch_backend {

struct AtenMath {
  bool tf32_cublas = false;
  bool tf32_cudnn = false;
  bool deterministic_cudnn = false;
  bool benchmark_cudnn = false;
  bool operator==(const AtenMath&) const = default;
};

// What `mode` sets (the table above).
AtenMath aten_math_for(F32Math mode);
// ATen's switches as they are now.
AtenMath aten_math();
// Sets ATen's switches to `mode`'s; the torch executor calls it with d5's mode when it is made.
void set_aten_math(F32Math mode);

}  // namespace d5::torch_backend
