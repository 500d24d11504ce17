#pragma once
// Tensor: a descriptor plus a 64-byte-aligned buffer on a device, either owned (shared between
// copies, like a torch::Tensor; clone() makes a deep copy) or borrowed (a view of caller memory).
// An owned buffer is either allocated by the device's allocator (device_allocator.h) or adopted
// from a native library (Tensor::adopt). Element access (data_as, span, at, get, set, fill, cast)
// needs memory the host can read; on another device it throws InvalidArgument: copy with to().
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "deep500/core/device.h"
#include "deep500/core/error.h"
#include "deep500/core/tensor_desc.h"

namespace d5 {

inline constexpr size_t kTensorAlignment = 64;
inline bool is_tensor_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kTensorAlignment == 0;
}

// Bytes held by owned tensor buffers (allocated or adopted): the high-water mark feeds memory
// metrics.
struct TensorMemoryStats {
  int64_t current_bytes;
  int64_t peak_bytes;
  int64_t allocations;
};
TensorMemoryStats tensor_memory_stats();
void reset_tensor_peak_memory();  // peak := current

class Tensor {
 public:
  Tensor() = default;  // an empty tensor: no desc, no buffer
  // Owned, zero-filled buffer.
  explicit Tensor(const TensorDesc& desc, Device device = Device::cpu());
  Tensor(DType dtype, const Shape& shape) : Tensor(TensorDesc{dtype, shape, Layout::any}) {}

  static Tensor uninitialized(const TensorDesc& desc, Device device = Device::cpu());
  // Borrowed view of memory owned by the caller; the caller keeps it alive.
  static Tensor view(const TensorDesc& desc, void* data, Device device = Device::cpu());
  // Owned tensor over a buffer a native library allocated (an ATen result, say), so that it is
  // handed on instead of copied. `keep_alive` owns the buffer; it is released when the last copy
  // of the tensor goes. The buffer counts in tensor_memory_stats() like an allocated one.
  // InvalidArgument unless `data` is 64-byte aligned (the Tensor contract; callers copy instead)
  // and `keep_alive` is set.
  static Tensor adopt(const TensorDesc& desc, void* data, std::shared_ptr<void> keep_alive);
  template <typename T>
  static Tensor from_values(const Shape& shape, std::initializer_list<T> values);

  bool defined() const { return data_ != nullptr || desc_.numel() == 0; }
  bool is_view() const { return !storage_ && data_ != nullptr; }
  const TensorDesc& desc() const { return desc_; }
  DType dtype() const { return desc_.dtype; }
  const Shape& shape() const { return desc_.shape; }
  int64_t numel() const { return desc_.numel(); }
  size_t bytes() const { return desc_.bytes(); }
  Device device() const { return device_; }
  bool on_host() const;  // host code may read the buffer

  void* data() { return data_; }
  const void* data() const { return data_; }

  // Typed access; throws InvalidArgument when T does not match the dtype.
  template <typename T> T* data_as() { check_type(dtype_of_v<T>); return static_cast<T*>(data_); }
  template <typename T> const T* data_as() const {
    check_type(dtype_of_v<T>);
    return static_cast<const T*>(data_);
  }
  template <typename T> std::span<T> span() { return {data_as<T>(), static_cast<size_t>(numel())}; }
  template <typename T> std::span<const T> span() const {
    return {data_as<T>(), static_cast<size_t>(numel())};
  }
  // Element at a multi-index (row-major), bounds-checked.
  template <typename T> T& at(std::initializer_list<int64_t> index) {
    return data_as<T>()[flat_index(index)];
  }
  template <typename T> const T& at(std::initializer_list<int64_t> index) const {
    return data_as<T>()[flat_index(index)];
  }

  // Dtype-generic element access through double (exact for every dtype but i64 beyond 2^53).
  double get(int64_t flat) const;
  void set(int64_t flat, double value);

  void fill(double value);
  // Same shape and dtype required; across devices the copy goes through their allocators.
  void copy_from(const Tensor& src);
  Tensor clone() const;  // on the same device
  // This tensor on `device`: itself (shared) when already there, else a copy.
  Tensor to(Device device) const;
  Tensor cast(DType to) const;
  // Same buffer, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;

  std::string to_string(int64_t max_elements = 16) const;

 private:
  void check_type(DType requested) const;
  int64_t flat_index(std::initializer_list<int64_t> index) const;
  void check_host(const char* what) const;

  TensorDesc desc_;
  Device device_{};
  std::shared_ptr<void> storage_;  // null for views
  void* data_ = nullptr;
};

// Element-wise comparison summary of two tensors of the same shape (any dtypes).
struct TensorComparison {
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t worst_index = -1;  // flat index of the largest |a - b|, -1 when empty
  int64_t mismatches = 0;    // elements failing |a-b| <= atol + rtol*|b|
  bool nan_mismatch = false; // a NaN where the other has none
};
TensorComparison compare(const Tensor& actual, const Tensor& expected, double rtol, double atol);
bool allclose(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-8);

template <typename T>
Tensor Tensor::from_values(const Shape& shape, std::initializer_list<T> values) {
  Tensor t(TensorDesc{dtype_of_v<T>, shape, Layout::any});
  D5_CHECK_ARG(static_cast<int64_t>(values.size()) == t.numel(),
               "from_values: {} values given for shape {} ({} elements)", values.size(),
               shape.to_string(), t.numel());
  std::memcpy(t.data(), values.begin(), values.size() * sizeof(T));
  return t;
}

}  // namespace d5
