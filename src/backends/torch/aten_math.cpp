#include "aten_math.h"

#include <ATen/Context.h>

namespace d5::torch_backend {

AtenMath aten_math_for(F32Math mode) {
  AtenMath m;
  m.tf32_cublas = m.tf32_cudnn = mode == F32Math::tf32;
  m.benchmark_cudnn = mode == F32Math::fast;
  m.deterministic_cudnn = mode != F32Math::fast;
  return m;
}

AtenMath aten_math() {
  auto& c = at::globalContext();
  return {c.allowTF32CuBLAS(), c.allowTF32CuDNN(), c.deterministicCuDNN(), c.benchmarkCuDNN()};
}

void set_aten_math(F32Math mode) {
  const AtenMath m = aten_math_for(mode);
  auto& c = at::globalContext();
  c.setAllowTF32CuBLAS(m.tf32_cublas);
  c.setAllowTF32CuDNN(m.tf32_cudnn);
  c.setDeterministicCuDNN(m.deterministic_cudnn);
  c.setBenchmarkCuDNN(m.benchmark_cudnn);
}

}  // namespace d5::torch_backend
