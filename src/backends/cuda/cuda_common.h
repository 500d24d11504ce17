#pragma once
// Shared pieces of the CUDA backend's operators: error checks for the runtime, cuBLAS and cuDNN
// (each failure names the call and the op), one cuBLAS and one cuDNN handle per device, the
// stream every operator runs on, device scratch buffers, refusals and registration.
//
// Every operator runs on the legacy default stream of its device: the device allocator copies
// and fills there too (cuda_allocator.h), so a tensor copied in is ready for the kernel that
// follows, and a copy back waits for it, without events between them. The exception is a step
// being recorded as a CUDA graph, which capture refuses on the legacy stream: OpStreamScope then
// moves the thread's operators, cuBLAS and cuDNN to the recording's stream (op_stream.h).
// Operators are created for cuda:0: placing nodes on several GPUs is an executor's decision,
// which no executor makes yet.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/op_semantics.h"
#include "deep500/op/operator.h"
#include "op_stream.h"

namespace d5::cuda {

// The device every CUDA operator is created on.
inline constexpr int32_t kOpDevice = 0;

// Thrown while creating an operator for a valid case this backend does not handle; add_op turns
// it into a refusal carrying the message.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... A>
void refuse_if(bool cond, fmt::format_string<A...> f, A&&... args) {
  if (cond) throw Refused(fmt::format(f, std::forward<A>(args)...));
}

// InternalError naming `call` and the library's own message.
void check_cuda(cudaError_t e, const char* call);
void check_cublas(cublasStatus_t s, const char* call);
void check_cudnn(cudnnStatus_t s, const char* call);
// After a kernel launch: a launch error (bad configuration, no kernel image for this GPU).
void check_launch(const char* kernel);

// Empty when cuda:0 can run kernels, else why not (no device, a driver too old for this runtime).
const std::string& device_unusable_reason();

// Per-device handles, created on first use and kept for the process; both are bound to the
// legacy default stream, or to the stream of an OpStreamScope while one lasts.
cublasHandle_t cublas_handle();
cudnnHandle_t cudnn_handle();

// While it lasts, the calling thread's operators issue their work on `stream` (op_stream()), and
// cuBLAS and cuDNN run there, cuBLAS in `cublas_workspace` (capture needs a workspace of the
// caller's: cuBLAS would otherwise allocate one per capture). `stream` must be a blocking stream:
// work on the legacy stream still orders against it, and a synchronous copy issued inside a
// capture is then an error rather than work the graph silently misses.
class OpStreamScope {
 public:
  OpStreamScope(cudaStream_t stream, void* cublas_workspace, size_t workspace_bytes);
  ~OpStreamScope();
  OpStreamScope(const OpStreamScope&) = delete;
  OpStreamScope& operator=(const OpStreamScope&) = delete;

 private:
  cudaStream_t previous_;
};
// Whether f32 products may use TF32 tensor cores (d5 --math tf32, core/math_mode.h); off by
// default, so f32 results match the reference within its tolerance.
bool allow_tf32();
// Sets the cuBLAS handle's math mode to the process's current choice, when it changed.
void apply_f32_math();

// Runs `check` now; while a step is being recorded as a CUDA graph (a DeferredHostChecks scope),
// after every replay of it instead. For an operator's validation of device values on the host (a
// class index out of range, an index past an axis): reading them back synchronises, which capture
// cannot hold. `check` must capture by value what it reads, and throws what the operator would.
void check_on_host(std::function<void()> check);
class DeferredHostChecks {
 public:
  explicit DeferredHostChecks(std::vector<std::function<void()>>& into);
  ~DeferredHostChecks();
  DeferredHostChecks(const DeferredHostChecks&) = delete;
  DeferredHostChecks& operator=(const DeferredHostChecks&) = delete;

 private:
  std::vector<std::function<void()>>* previous_;
};

// Version strings of the libraries loaded at run time ("13.0.2", "9.19.0").
std::string cublas_version();
std::string cudnn_version();

// A device buffer owned by an operator (workspaces, saved statistics), freed with it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  void* get() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  template <typename T> T* as() const { return static_cast<T*>(data_.get()); }

 private:
  std::shared_ptr<void> data_;
  size_t bytes_ = 0;
};

// Device pointers of tensors (the Tensor's typed accessors are host-only by design).
inline const float* fptr(const Tensor& t) { return static_cast<const float*>(t.data()); }
inline float* fptr(Tensor& t) { return static_cast<float*>(t.data()); }

// Base of every CUDA operator: lives on cuda:0, and takes its outputs, gradient mask and work
// counts from the oracle (op_semantics.h), so they cannot drift from the reference's.
class CudaOp : public Operator {
 public:
  Device device() const override { return Device::cuda(kOpDevice); }
  std::vector<bool> differentiable_inputs() const override { return sem_.differentiable; }
  std::string no_gradient_reason() const override { return sem_.no_gradient_reason; }
  double flops() const override { return sem_.flops; }
  double bytes() const override { return sem_.bytes; }
  double backward_flops() const override { return sem_.backward_flops; }

 protected:
  explicit CudaOp(const OpSpec& s) : CudaOp(s, op_semantics(s)) {}
  CudaOp(const OpSpec& s, OpSemantics sem) : Operator(s, sem.outputs), sem_(std::move(sem)) {}
  // For an operator whose backward this backend does not implement (yet): says so, with `why`.
  void forward_only(std::string why) {
    sem_.differentiable.clear();
    sem_.no_gradient_reason = std::move(why);
  }

  OpSemantics sem_;
};

// Zeros on the operators' stream: a tensor (nothing when undefined or empty), or every gradient of
// `gx` (an op's input gradients when its output gradient is undefined, that is zero).
void zero_tensor(Tensor& t);
void zero_gradients(std::span<Tensor> gx);

// Copies `bytes` between two device buffers on the operators' stream.
void copy_device(void* dst, const void* src, size_t bytes);

// Row-major C(m, n) = alpha op(A) op(B) + beta C on cuBLAS (gemm.cpp): A stored (m, k) or, when
// ta, (k, m); B stored (k, n) or, when tb, (n, k); `batch` products at element strides sa, sb, sc
// (0: the same matrix for every product).
void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t sa,
             const float* b, int64_t sb, float beta, float* c, int64_t sc, int64_t batch);
// The same in dtype t: f32 as above; f16 and bf16 on tensor cores with f32 accumulation
// (cublasGemmStridedBatchedEx), alpha and beta in f32.
void gemm_rm(DType t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t sa,
             const void* b, int64_t sb, float beta, void* c, int64_t sc, int64_t batch);
// Whether t is a dtype the products run on tensor cores in (f16, bf16).
bool tensor_core_dtype(DType t);
// The name of the cuBLAS path products of dtype t take, for implementation().
std::string cublas_implementation(DType t);
// Refuses a product whose first input is not f32, f16 or bf16.
void refuse_other_dtypes(const OpSpec& s);

// Registers `make` as implementation "cuda" of `op_type`: the factory refuses when no device is
// usable or an input is not f32 (unless `any_dtype`), and turns Refused into a refusal.
using Maker = std::function<std::unique_ptr<Operator>(const OpSpec&)>;
struct AddOpOptions {
  bool backward = false;
  bool any_dtype = false;
  std::string notes;
};
void add_op(OpRegistry& r, const std::string& op_type, Maker make, AddOpOptions options);

// Per-family registration (one file each).
void register_elementwise_ops(OpRegistry& r);
void register_gemm_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_cudnn_ops(OpRegistry& r);
void register_movement_ops(OpRegistry& r);
void register_dropout_op(OpRegistry& r);
void register_rnn_ops(OpRegistry& r);
void register_constant_ops(OpRegistry& r);        // Constant, ConstantOfShape, Shape (constant_ops.cpp)
void register_logic_ops(OpRegistry& r);           // comparisons, And/Or/Xor/Not, Cast (logic_ops.cpp)
void register_variadic_ops(OpRegistry& r);        // Sum, Mean, Max, Min, ArgMax, ArgMin, CumSum (variadic_ops.cpp)
void register_instance_norm_op(OpRegistry& r);    // instance_norm.cpp

}  // namespace d5::cuda
