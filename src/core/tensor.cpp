#include "deep500/core/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "deep500/core/device_allocator.h"
#include "host_storage.h"

namespace d5 {

namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};

void note_alloc(int64_t bytes) {
  const int64_t now = g_current.fetch_add(bytes) + bytes;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_allocations.fetch_add(1);
}

// An owned buffer counted in the statistics; `release` frees it.
template <typename Release>
std::shared_ptr<void> counted(void* p, int64_t bytes, Release release) {
  note_alloc(bytes);
  return std::shared_ptr<void>(p, [bytes, release = std::move(release)](void* q) mutable {
    release(q);
    g_current.fetch_sub(bytes);
  });
}

template <typename F>
auto dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(Half{});
    case DType::bf16: return f(BFloat16{});
    case DType::i8: return f(int8_t{});
    case DType::i16: return f(int16_t{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u8: return f(uint8_t{});
    case DType::boolean: return f(bool{});
  }
  D5_THROW(Internal, "unknown dtype value {}", static_cast<int>(t));
}

template <typename T> double load(const void* p, int64_t i) {
  const T v = static_cast<const T*>(p)[i];
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return bfloat16_to_float(v.bits);
  else return static_cast<double>(v);
}

template <typename T> void store(void* p, int64_t i, double v) {
  T* d = static_cast<T*>(p);
  if constexpr (std::is_same_v<T, Half>) d[i] = Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) d[i] = BFloat16{float_to_bfloat16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, bool>) d[i] = v != 0.0;
  else if constexpr (std::is_integral_v<T>) {
    // Casting NaN or an out-of-range double to an integer is undefined behaviour: refuse it.
    D5_CHECK_ARG(std::isfinite(v) && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                     v <= static_cast<double>(std::numeric_limits<T>::max()),
                 "value {} does not fit in the tensor's integer dtype", v);
    d[i] = static_cast<T>(v);
  } else d[i] = static_cast<T>(v);
}
}  // namespace

namespace detail {
std::shared_ptr<void> allocate_host_storage(size_t bytes) {
  // aligned_alloc requires a size that is a multiple of the alignment; never allocate 0 bytes.
  const size_t rounded = std::max<size_t>(kTensorAlignment, (bytes + kTensorAlignment - 1) /
                                                                 kTensorAlignment * kTensorAlignment);
  void* p = std::aligned_alloc(kTensorAlignment, rounded);
  if (!p) throw IoError(fmt::format("out of memory allocating a tensor of {} bytes", bytes));
  return counted(p, static_cast<int64_t>(rounded), [](void* q) { std::free(q); });
}

DeviceMemoryStats host_storage_stats() {
  const int64_t current = g_current.load();
  return {current, current, g_peak.load(), g_allocations.load(), 0};
}
}  // namespace detail

TensorMemoryStats tensor_memory_stats() {
  return {g_current.load(), g_peak.load(), g_allocations.load()};
}
void reset_tensor_peak_memory() { g_peak.store(g_current.load()); }

Tensor::Tensor(const TensorDesc& desc, Device device) : Tensor(uninitialized(desc, device)) {
  if (device.kind == DeviceKind::cpu) std::memset(data_, 0, bytes());
  else allocator_for(device).zero(data_, bytes(), device.index);
}

Tensor Tensor::uninitialized(const TensorDesc& desc, Device device) {
  Tensor t;
  t.desc_ = desc;
  t.device_ = device;
  t.storage_ = device.kind == DeviceKind::cpu ? detail::allocate_host_storage(desc.bytes())
                                             : allocator_for(device).allocate(desc.bytes(), device.index);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::view(const TensorDesc& desc, void* data, Device device) {
  D5_CHECK_ARG(data != nullptr || desc.numel() == 0, "Tensor::view of {} needs a non-null pointer",
               desc.to_string());
  Tensor t;
  t.desc_ = desc;
  t.device_ = device;
  t.data_ = data;
  return t;
}

Tensor Tensor::adopt(const TensorDesc& desc, void* data, std::shared_ptr<void> keep_alive) {
  D5_CHECK_ARG(data != nullptr && keep_alive != nullptr, "Tensor::adopt of {} needs a buffer and its owner",
               desc.to_string());
  D5_CHECK_ARG(is_tensor_aligned(data), "Tensor::adopt of {}: buffer {} is not {}-byte aligned",
               desc.to_string(), data, kTensorAlignment);
  Tensor t;
  t.desc_ = desc;
  const auto bytes = static_cast<int64_t>(desc.bytes());
  t.storage_ = counted(data, bytes, [keep = std::move(keep_alive)](void*) mutable { keep.reset(); });
  t.data_ = data;
  return t;
}

void Tensor::check_type(DType requested) const {
  D5_CHECK_ARG(requested == desc_.dtype, "tensor {} accessed as {}", desc_.to_string(),
               d5::to_string(requested));
  if (device_.kind != DeviceKind::cpu) check_host("typed element access");
}

bool Tensor::on_host() const { return device_.kind == DeviceKind::cpu || host_accessible(device_); }

void Tensor::check_host(const char* what) const {
  D5_CHECK_ARG(on_host(), "{} needs a host tensor; {} is on {}: copy it with to(Device::cpu()) first", what,
               desc_.to_string(), device_.to_string());
}

int64_t Tensor::flat_index(std::initializer_list<int64_t> index) const {
  D5_CHECK_ARG(index.size() == shape().rank(), "index of rank {} into tensor {}", index.size(),
               desc_.to_string());
  int64_t flat = 0;
  size_t axis = 0;
  for (int64_t i : index) {
    D5_CHECK_ARG(i >= 0 && i < shape()[axis], "index {} out of range for axis {} of tensor {}", i,
                 axis, desc_.to_string());
    flat = flat * shape()[axis] + i;
    ++axis;
  }
  return flat;
}

double Tensor::get(int64_t flat) const {
  check_host("Tensor::get");
  D5_CHECK_ARG(flat >= 0 && flat < numel(), "flat index {} out of range for {}", flat,
               desc_.to_string());
  return dispatch(dtype(), [&](auto tag) { return load<decltype(tag)>(data_, flat); });
}

void Tensor::set(int64_t flat, double value) {
  check_host("Tensor::set");
  D5_CHECK_ARG(flat >= 0 && flat < numel(), "flat index {} out of range for {}", flat,
               desc_.to_string());
  dispatch(dtype(), [&](auto tag) { store<decltype(tag)>(data_, flat, value); });
}

void Tensor::fill(double value) {
  check_host("Tensor::fill");
  if (numel() == 0) return;
  set(0, value);  // converts (and range-checks) once
  const size_t es = dtype_size(dtype());
  auto* base = static_cast<unsigned char*>(data_);
  for (int64_t i = 1; i < numel(); ++i) std::memcpy(base + i * es, base, es);
}

void Tensor::copy_from(const Tensor& src) {
  D5_CHECK_ARG(src.desc_.dtype == desc_.dtype && src.shape() == shape(),
               "copy_from: source {} does not match destination {}", src.desc_.to_string(),
               desc_.to_string());
  if (bytes() == 0 || data_ == src.data_) return;
  if (on_host() && src.on_host()) std::memcpy(data_, src.data_, bytes());
  else copy_between_devices(data_, device_, src.data_, src.device_, bytes());
}

Tensor Tensor::clone() const {
  Tensor t = uninitialized(desc_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = uninitialized(desc_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::cast(DType to) const {
  check_host("Tensor::cast");
  Tensor t = uninitialized(TensorDesc{to, shape(), desc_.layout}, device_);
  const int64_t n = numel();
  // Between f32 and the 16-bit floats (suite inputs, widened operators) element by element in
  // their own types: the generic path through double costs several times more per element.
  const auto* f = static_cast<const float*>(data_);
  auto* h = static_cast<uint16_t*>(t.data_);
  if (dtype() == DType::f32 && to == DType::f16) {
    for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(f[i]);
  } else if (dtype() == DType::f32 && to == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) h[i] = float_to_bfloat16(f[i]);
  } else if ((dtype() == DType::f16 || dtype() == DType::bf16) && to == DType::f32) {
    const auto* src = static_cast<const uint16_t*>(data_);
    auto* dst = static_cast<float*>(t.data_);
    const bool half = dtype() == DType::f16;
    for (int64_t i = 0; i < n; ++i) dst[i] = half ? half_to_float(src[i]) : bfloat16_to_float(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) t.set(i, get(i));
  }
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  D5_CHECK_ARG(shape.numel() == numel(), "cannot reshape {} ({} elements) to {} ({} elements)",
               desc_.to_string(), numel(), shape.to_string(), shape.numel());
  Tensor t = *this;
  t.desc_.shape = shape;
  t.desc_.layout = Layout::any;
  return t;
}

std::string Tensor::to_string(int64_t max_elements) const {
  std::string s = desc_.to_string();
  if (!on_host()) return s + " on " + device_.to_string();
  s += " {";
  const int64_t n = std::min(numel(), max_elements);
  for (int64_t i = 0; i < n; ++i) s += fmt::format("{}{:g}", i ? ", " : "", get(i));
  if (numel() > n) s += ", ...";
  return s + "}";
}

TensorComparison compare(const Tensor& actual_in, const Tensor& expected_in, double rtol, double atol) {
  D5_CHECK_ARG(actual_in.shape() == expected_in.shape(), "compare: shapes differ: {} vs {}",
               actual_in.desc().to_string(), expected_in.desc().to_string());
  // Validation reads host copies of tensors on other devices.
  const Tensor actual = actual_in.to(Device::cpu()), expected = expected_in.to(Device::cpu());
  TensorComparison c;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.get(i), e = expected.get(i);
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e)) {
        c.nan_mismatch = true;
        ++c.mismatches;
      }
      continue;
    }
    if (a == e) continue;  // also equal infinities
    const double abs_err = std::abs(a - e);
    if (std::isnan(abs_err) || abs_err > c.max_abs_error) {
      c.max_abs_error = std::isnan(abs_err) ? INFINITY : abs_err;
      c.worst_index = i;
    }
    const double rel = abs_err / std::max(std::abs(e), std::numeric_limits<double>::min());
    c.max_rel_error = std::max(c.max_rel_error, rel);
    if (!(abs_err <= atol + rtol * std::abs(e))) ++c.mismatches;
  }
  return c;
}

bool allclose(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  return compare(actual, expected, rtol, atol).mismatches == 0;
}

}  // namespace d5
