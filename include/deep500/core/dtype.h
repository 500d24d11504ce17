#pragma once
// Element types. The numeric values are shared with the C ABI (d5_dtype in c_tensor_desc.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "deep500/core/c_tensor_desc.h"

namespace d5 {

enum class DType : int32_t {
  f32 = D5_DTYPE_F32,
  f64 = D5_DTYPE_F64,
  f16 = D5_DTYPE_F16,
  bf16 = D5_DTYPE_BF16,
  i8 = D5_DTYPE_I8,
  i16 = D5_DTYPE_I16,
  i32 = D5_DTYPE_I32,
  i64 = D5_DTYPE_I64,
  u8 = D5_DTYPE_U8,
  boolean = D5_DTYPE_BOOL,
};

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                                       DType::i16, DType::i32, DType::i64, DType::u8, DType::boolean};

size_t dtype_size(DType t);
std::string_view to_string(DType t);
// Accepts the names printed by to_string plus common aliases (float32, float, int64, bool, ...).
// Throws InvalidArgument listing the valid names otherwise.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);
bool is_integral(DType t);  // bool counts as integral

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);

// Compile-time mapping from C++ element type to DType, for typed element access.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace d5
