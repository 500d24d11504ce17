#pragma once
// What the operators on dtype_kernels.cu share (constant_ops.cpp, logic_ops.cpp,
// variadic_ops.cpp, instance_norm.cpp): the kernels' element type of a deep500 dtype, and
// refusing the dtypes an operator does not take, naming them.
#include <algorithm>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cuda_common.h"
#include "dtype_kernels.h"

namespace d5::cuda {

inline Elem elem_of(DType t) {
  switch (t) {
    case DType::f32: return Elem::f32;
    case DType::f64: return Elem::f64;
    case DType::f16: return Elem::f16;
    case DType::bf16: return Elem::bf16;
    case DType::i8: return Elem::i8;
    case DType::i16: return Elem::i16;
    case DType::i32: return Elem::i32;
    case DType::i64: return Elem::i64;
    case DType::u8: return Elem::u8;
    case DType::boolean: return Elem::boolean;
  }
  throw Refused(fmt::format("dtype {} has no cuda kernel", to_string(t)));
}

// Refuses `t` unless it is one of `ok`; `what` names the input ("X", "input 0").
inline void refuse_dtype(DType t, std::initializer_list<DType> ok, const char* what) {
  if (std::find(ok.begin(), ok.end(), t) != ok.end()) return;
  std::vector<std::string> names;
  for (DType d : ok) names.emplace_back(to_string(d));
  throw Refused(fmt::format("{} is {}: this cuda operator takes {}", what, to_string(t), fmt::join(names, ", ")));
}

}  // namespace d5::cuda
