#pragma once
#include <string>

#include "deep500/core/c_tensor_desc.h"
#include "deep500/core/dtype.h"
#include "deep500/core/layout.h"
#include "deep500/core/shape.h"

namespace d5 {

struct TensorDesc {
  DType dtype = DType::f32;
  Shape shape;
  Layout layout = Layout::any;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string to_string() const;  // "f32[2, 3]" (+ "@nhwc" when not any)
  bool operator==(const TensorDesc& o) const = default;

  // Conversions to and from the C ABI twin. to_c throws InvalidArgument above D5_MAX_RANK.
  d5_tensor_desc to_c() const;
  static TensorDesc from_c(const d5_tensor_desc& c);
};

}  // namespace d5
