/* Level 0 custom operators: the C ABI between deep500 and an operator compiled at run time into
 * a shared library (docs/custom-operators.md).
 *
 * The C part fixes the structs and the entry points a library exports; a library written in any
 * language can implement them. The C++ part (header-only, standard library only) adds the base
 * class d5::CustomOperator and D5_REGISTER_OP(ClassName), which generates the entry points and
 * turns exceptions into status codes plus a message: nothing ever unwinds across the ABI. The
 * library does not link deep500. */
#ifndef DEEP500_CUSTOM_OP_H
#define DEEP500_CUSTOM_OP_H

#include <stdint.h>

#include "deep500/core/c_tensor_desc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Changed whenever a struct or an entry-point signature below changes. deep500 refuses to load a
 * library that reports another version. */
#define D5_CUSTOM_OP_ABI_VERSION 1

typedef enum d5_device_type { D5_DEVICE_CPU = 0, D5_DEVICE_CUDA = 1 } d5_device_type;

typedef struct d5_tensor {
  d5_tensor_desc desc;
  /* Row-major elements. NULL for an absent optional input and for the gradient of an input that
   * is not requested (not differentiable). */
  void* data;
  int32_t device_type; /* d5_device_type */
  int32_t device_index;
} d5_tensor;

typedef enum d5_status {
  D5_STATUS_OK = 0,
  D5_STATUS_INVALID_ARGUMENT = 1, /* wrong inputs, outputs or definitions for this operator */
  D5_STATUS_UNIMPLEMENTED = 2,    /* e.g. an operator without backward */
  D5_STATUS_FAILED = 3            /* anything else (an exception, out of memory) */
} d5_status;

#if defined(_WIN32)
#define D5_CUSTOM_OP_EXPORT __declspec(dllexport)
#else
#define D5_CUSTOM_OP_EXPORT __attribute__((visibility("default")))
#endif

/* Required entry points. Functions returning int32_t return a d5_status; after a non-zero status
 * (or a NULL handle from create), d5_custom_op_last_error() describes the failure. The message
 * is per thread and valid until the next call into the library on that thread. */
D5_CUSTOM_OP_EXPORT int32_t d5_custom_op_abi_version(void);
/* One operator instance for one problem; deep500 computes the output descriptors. */
D5_CUSTOM_OP_EXPORT void* d5_custom_op_create(const d5_tensor_desc* inputs, int32_t n_inputs,
                                              const d5_tensor_desc* outputs, int32_t n_outputs);
D5_CUSTOM_OP_EXPORT int32_t d5_custom_op_forward(void* handle, const d5_tensor* inputs, int32_t n_inputs,
                                                 d5_tensor* outputs, int32_t n_outputs);
/* Gradients for the most recent forward of this handle. grad_outputs are never NULL (deep500
 * passes zeros for outputs without an upstream gradient); each grad_inputs[i] with non-NULL data
 * must be overwritten completely. */
D5_CUSTOM_OP_EXPORT int32_t d5_custom_op_backward(void* handle, const d5_tensor* grad_outputs,
                                                  int32_t n_grad_outputs, const d5_tensor* fwd_inputs,
                                                  int32_t n_inputs, const d5_tensor* fwd_outputs,
                                                  int32_t n_outputs, d5_tensor* grad_inputs,
                                                  int32_t n_grad_inputs);
D5_CUSTOM_OP_EXPORT void d5_custom_op_destroy(void* handle);
D5_CUSTOM_OP_EXPORT const char* d5_custom_op_last_error(void);

/* Optional entry points; deep500 uses the defaults given when a library lacks them. */
/* mask[i] = 1 when input i has a gradient (default: every floating-point input). */
D5_CUSTOM_OP_EXPORT int32_t d5_custom_op_differentiable(void* handle, int32_t* mask, int32_t n_inputs);
/* Floating-point operations of one forward, a fused multiply-add counting 2 (default: 0). */
D5_CUSTOM_OP_EXPORT double d5_custom_op_flops(void* handle);

#ifdef __cplusplus
} /* extern "C" */

#include <cstddef>
#include <exception>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace d5 {
namespace custom {

// Thrown by operator code to choose the status deep500 reports. std::invalid_argument and
// std::out_of_range also map to D5_STATUS_INVALID_ARGUMENT; any other exception to FAILED.
class Error : public std::runtime_error {
 public:
  Error(d5_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  d5_status status() const noexcept { return status_; }

 private:
  d5_status status_;
};

inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(D5_STATUS_INVALID_ARGUMENT, message);
}

// clang-format off
template <typename T> struct dtype_code;
template <> struct dtype_code<float> { static constexpr int32_t value = D5_DTYPE_F32; };
template <> struct dtype_code<double> { static constexpr int32_t value = D5_DTYPE_F64; };
template <> struct dtype_code<int8_t> { static constexpr int32_t value = D5_DTYPE_I8; };
template <> struct dtype_code<int16_t> { static constexpr int32_t value = D5_DTYPE_I16; };
template <> struct dtype_code<int32_t> { static constexpr int32_t value = D5_DTYPE_I32; };
template <> struct dtype_code<int64_t> { static constexpr int32_t value = D5_DTYPE_I64; };
template <> struct dtype_code<uint8_t> { static constexpr int32_t value = D5_DTYPE_U8; };
template <> struct dtype_code<bool> { static constexpr int32_t value = D5_DTYPE_BOOL; };
// clang-format on

inline const char* dtype_name(int32_t dtype) {
  static const char* const names[] = {"f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool"};
  return dtype >= 0 && dtype < 10 ? names[dtype] : "unknown";
}

inline bool is_floating(int32_t dtype) {
  return dtype == D5_DTYPE_F32 || dtype == D5_DTYPE_F64 || dtype == D5_DTYPE_F16 || dtype == D5_DTYPE_BF16;
}

inline int64_t numel(const d5_tensor_desc& d) {
  int64_t n = 1;
  for (int32_t i = 0; i < d.rank; ++i) n *= d.dims[i];
  return n;
}

// "f32[1, 3, 8, 8]", for messages.
inline std::string to_string(const d5_tensor_desc& d) {
  std::string s = std::string(dtype_name(d.dtype)) + "[";
  for (int32_t i = 0; i < d.rank; ++i) s += (i ? ", " : "") + std::to_string(d.dims[i]);
  return s + "]";
}

// Typed row-major view of a tensor's elements. operator() checks the number of indices against
// the rank, at() also the bounds; operator[] takes a flat index unchecked, for inner loops.
template <typename T>
class TensorView {
 public:
  TensorView(T* data, const d5_tensor_desc& desc) : data_(data), desc_(desc) {
    int64_t s = 1;
    for (int32_t i = desc.rank; i-- > 0;) {
      strides_[i] = s;
      s *= desc.dims[i];
    }
  }
  T* data() const { return data_; }
  int rank() const { return desc_.rank; }
  int64_t dim(int axis) const { return desc_.dims[axis]; }
  int64_t numel() const { return ::d5::custom::numel(desc_); }
  const d5_tensor_desc& desc() const { return desc_; }

  T& operator[](int64_t flat) const { return data_[flat]; }
  template <typename... I>
  T& operator()(I... index) const {
    return data_[offset(false, static_cast<int64_t>(index)...)];
  }
  template <typename... I>
  T& at(I... index) const {
    return data_[offset(true, static_cast<int64_t>(index)...)];
  }

 private:
  template <typename... I>
  int64_t offset(bool check_bounds, I... index) const {
    static_assert(sizeof...(I) <= D5_MAX_RANK, "more indices than D5_MAX_RANK");
    if (static_cast<int32_t>(sizeof...(I)) != desc_.rank)
      throw Error(D5_STATUS_INVALID_ARGUMENT, "tensor of rank " + std::to_string(desc_.rank) +
                                                  " indexed with " + std::to_string(sizeof...(I)) + " indices");
    const int64_t idx[] = {index...};
    int64_t off = 0;
    for (size_t i = 0; i < sizeof...(I); ++i) {
      if (check_bounds && (idx[i] < 0 || idx[i] >= desc_.dims[i]))
        throw Error(D5_STATUS_INVALID_ARGUMENT, "index " + std::to_string(idx[i]) + " out of range for axis " +
                                                    std::to_string(i) + " of " + to_string(desc_));
      off += idx[i] * strides_[i];
    }
    return off;
  }

  T* data_;
  d5_tensor_desc desc_;
  int64_t strides_[D5_MAX_RANK] = {};
};

namespace detail {
template <typename T, typename CTensor>
void check_view(const CTensor& t) {
  if (t.desc.dtype != dtype_code<std::remove_const_t<T>>::value)
    throw Error(D5_STATUS_INVALID_ARGUMENT, std::string("tensor is ") + to_string(t.desc) + ", accessed as " +
                                                dtype_name(dtype_code<std::remove_const_t<T>>::value));
  if (t.device_type != D5_DEVICE_CPU)
    throw Error(D5_STATUS_INVALID_ARGUMENT, "tensor " + to_string(t.desc) + " is not in host memory");
  if (!t.data && numel(t.desc) != 0)
    throw Error(D5_STATUS_INVALID_ARGUMENT,
                "tensor " + to_string(t.desc) + " has no data (absent or not requested)");
}
}  // namespace detail

// view<float>(inputs[0]) (read-only) or view<float>(outputs[0]): a host view; throws when the
// dtype differs, the tensor is in device memory or has no data.
template <typename T>
TensorView<const T> view(const d5_tensor& t) {
  detail::check_view<T>(t);
  return TensorView<const T>(static_cast<const T*>(t.data), t.desc);
}
template <typename T>
TensorView<T> view(d5_tensor& t) {
  detail::check_view<T>(t);
  return TensorView<T>(static_cast<T*>(t.data), t.desc);
}

}  // namespace custom

// Base class of C++ custom operators. The constructor receives the problem (input and output
// descriptors) and should reject what it cannot handle by throwing; forward/backward then only
// compute. One instance per problem, as with every deep500 operator.
class CustomOperator {
 public:
  CustomOperator(std::span<const d5_tensor_desc> inputs, std::span<const d5_tensor_desc> outputs)
      : inputs_(inputs.begin(), inputs.end()), outputs_(outputs.begin(), outputs.end()) {}
  virtual ~CustomOperator() = default;

  virtual void forward(std::span<const d5_tensor> inputs, std::span<d5_tensor> outputs) = 0;
  virtual void backward(std::span<const d5_tensor> /*grad_outputs*/, std::span<const d5_tensor> /*fwd_inputs*/,
                        std::span<const d5_tensor> /*fwd_outputs*/, std::span<d5_tensor> /*grad_inputs*/) {
    throw custom::Error(D5_STATUS_UNIMPLEMENTED, "this custom operator implements no backward");
  }
  // Which inputs have a gradient. Operators without backward should return all false.
  virtual std::vector<bool> differentiable_inputs() const {
    std::vector<bool> mask;
    for (const auto& d : inputs_) mask.push_back(custom::is_floating(d.dtype));
    return mask;
  }
  virtual double flops() const { return 0; }

  const std::vector<d5_tensor_desc>& input_descs() const { return inputs_; }
  const std::vector<d5_tensor_desc>& output_descs() const { return outputs_; }

 protected:
  std::vector<d5_tensor_desc> inputs_, outputs_;
};

namespace custom::detail {

// The message slot behind d5_custom_op_last_error. Recording a message must not throw (the entry
// points are the exception boundary), hence the fixed fallback text.
struct LastError {
  std::string text;
  const char* view = "";
};
inline LastError& last_error() {
  static thread_local LastError e;
  return e;
}
inline void set_error(const char* message) noexcept {
  auto& e = last_error();
  try {
    e.text = message;
    e.view = e.text.c_str();
  } catch (...) {
    e.view = "out of memory while recording an error message";
  }
}

template <typename F>
int32_t guarded(F&& body) noexcept {
  last_error().view = "";
  try {
    body();
    return D5_STATUS_OK;
  } catch (const Error& e) {
    set_error(e.what());
    return e.status();
  } catch (const std::invalid_argument& e) {
    set_error(e.what());
    return D5_STATUS_INVALID_ARGUMENT;
  } catch (const std::out_of_range& e) {
    set_error(e.what());
    return D5_STATUS_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    set_error("out of memory");
    return D5_STATUS_FAILED;
  } catch (const std::exception& e) {
    set_error(e.what());
    return D5_STATUS_FAILED;
  } catch (...) {
    set_error("unknown exception (not derived from std::exception)");
    return D5_STATUS_FAILED;
  }
}

inline void check_count(const char* what, int32_t given, size_t expected) {
  if (given < 0 || static_cast<size_t>(given) != expected)
    throw Error(D5_STATUS_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(given) +
                                                " given, the operator was created for " +
                                                std::to_string(expected));
}

template <typename T>
std::span<T> as_span(T* p, int32_t n) {
  return n > 0 ? std::span<T>(p, static_cast<size_t>(n)) : std::span<T>();
}

inline CustomOperator& op_of(void* handle) {
  if (!handle) throw Error(D5_STATUS_INVALID_ARGUMENT, "null operator handle");
  return *static_cast<CustomOperator*>(handle);
}

template <typename Op>
void* create(const d5_tensor_desc* inputs, int32_t n_inputs, const d5_tensor_desc* outputs,
             int32_t n_outputs) noexcept {
  CustomOperator* op = nullptr;
  guarded([&] {
    require(n_inputs >= 0 && n_outputs >= 0, "negative input or output count");
    op = new Op(as_span(inputs, n_inputs), as_span(outputs, n_outputs));
  });
  return op;
}

inline int32_t forward(void* handle, const d5_tensor* inputs, int32_t n_inputs, d5_tensor* outputs,
                       int32_t n_outputs) noexcept {
  return guarded([&] {
    auto& op = op_of(handle);
    check_count("forward inputs", n_inputs, op.input_descs().size());
    check_count("forward outputs", n_outputs, op.output_descs().size());
    op.forward(as_span(inputs, n_inputs), as_span(outputs, n_outputs));
  });
}

inline int32_t backward(void* handle, const d5_tensor* grad_outputs, int32_t n_grad_outputs,
                        const d5_tensor* fwd_inputs, int32_t n_inputs, const d5_tensor* fwd_outputs,
                        int32_t n_outputs, d5_tensor* grad_inputs, int32_t n_grad_inputs) noexcept {
  return guarded([&] {
    auto& op = op_of(handle);
    check_count("backward gradients of outputs", n_grad_outputs, op.output_descs().size());
    check_count("backward forward inputs", n_inputs, op.input_descs().size());
    check_count("backward forward outputs", n_outputs, op.output_descs().size());
    check_count("backward gradients of inputs", n_grad_inputs, op.input_descs().size());
    op.backward(as_span(grad_outputs, n_grad_outputs), as_span(fwd_inputs, n_inputs),
                as_span(fwd_outputs, n_outputs), as_span(grad_inputs, n_grad_inputs));
  });
}

inline int32_t differentiable(void* handle, int32_t* mask, int32_t n_inputs) noexcept {
  return guarded([&] {
    auto& op = op_of(handle);
    check_count("differentiable mask", n_inputs, op.input_descs().size());
    require(mask != nullptr || n_inputs == 0, "null differentiable mask");
    const auto m = op.differentiable_inputs();
    for (int32_t i = 0; i < n_inputs; ++i) mask[i] = static_cast<size_t>(i) < m.size() && m[i] ? 1 : 0;
  });
}

inline double flops(void* handle) noexcept {
  double f = 0;
  guarded([&] { f = op_of(handle).flops(); });
  return f;
}

inline void destroy(void* handle) noexcept { delete static_cast<CustomOperator*>(handle); }

}  // namespace custom::detail
}  // namespace d5

// Generates the C entry points of this library for ClassName (derived from d5::CustomOperator,
// constructible from (std::span<const d5_tensor_desc> inputs, std::span<const d5_tensor_desc>
// outputs)). Use once per library, at namespace scope.
#define D5_REGISTER_OP(ClassName)                                                                             \
  extern "C" int32_t d5_custom_op_abi_version(void) { return D5_CUSTOM_OP_ABI_VERSION; }                      \
  extern "C" void* d5_custom_op_create(const d5_tensor_desc* inputs, int32_t n_inputs,                        \
                                       const d5_tensor_desc* outputs, int32_t n_outputs) {                    \
    return ::d5::custom::detail::create<ClassName>(inputs, n_inputs, outputs, n_outputs);                     \
  }                                                                                                           \
  extern "C" int32_t d5_custom_op_forward(void* handle, const d5_tensor* inputs, int32_t n_inputs,            \
                                          d5_tensor* outputs, int32_t n_outputs) {                            \
    return ::d5::custom::detail::forward(handle, inputs, n_inputs, outputs, n_outputs);                       \
  }                                                                                                           \
  extern "C" int32_t d5_custom_op_backward(void* handle, const d5_tensor* grad_outputs,                       \
                                           int32_t n_grad_outputs, const d5_tensor* fwd_inputs,               \
                                           int32_t n_inputs, const d5_tensor* fwd_outputs, int32_t n_outputs, \
                                           d5_tensor* grad_inputs, int32_t n_grad_inputs) {                   \
    return ::d5::custom::detail::backward(handle, grad_outputs, n_grad_outputs, fwd_inputs, n_inputs,         \
                                          fwd_outputs, n_outputs, grad_inputs, n_grad_inputs);                \
  }                                                                                                           \
  extern "C" void d5_custom_op_destroy(void* handle) { ::d5::custom::detail::destroy(handle); }               \
  extern "C" const char* d5_custom_op_last_error(void) { return ::d5::custom::detail::last_error().view; }    \
  extern "C" int32_t d5_custom_op_differentiable(void* handle, int32_t* mask, int32_t n_inputs) {             \
    return ::d5::custom::detail::differentiable(handle, mask, n_inputs);                                      \
  }                                                                                                           \
  extern "C" double d5_custom_op_flops(void* handle) { return ::d5::custom::detail::flops(handle); }          \
  static_assert(std::is_base_of_v<::d5::CustomOperator, ClassName>,                                           \
                "D5_REGISTER_OP: " #ClassName " must derive from d5::CustomOperator")

#endif /* __cplusplus */

#endif /* DEEP500_CUSTOM_OP_H */
