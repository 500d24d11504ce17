#pragma once
// The batch a classification format's fetch fills: "input" f32 [n, ...sample_shape] and
// "labels" i64 [n], uninitialized.
#include <vector>

#include "deep500/train/dataset.h"

namespace d5::data {

inline Batch allocate_sample_batch(int64_t n, const std::vector<int64_t>& sample_shape) {
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), sample_shape.begin(), sample_shape.end());
  return {{kDataInput, Tensor::uninitialized(TensorDesc{DType::f32, Shape(dims)})},
          {kDataLabels, Tensor::uninitialized(TensorDesc{DType::i64, Shape{n}})}};
}

}  // namespace d5::data
