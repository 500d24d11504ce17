#include "cuda_common.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "deep500/core/device_allocator.h"
#include "deep500/core/math_mode.h"

namespace d5::cuda {

void check_cuda(cudaError_t e, const char* call) {
  D5_CHECK(e == cudaSuccess, Internal, "{} on cuda:{}: {}", call, kOpDevice, cudaGetErrorString(e));
}

void check_cublas(cublasStatus_t s, const char* call) {
  D5_CHECK(s == CUBLAS_STATUS_SUCCESS, Internal, "{} on cuda:{}: {} ({})", call, kOpDevice,
           cublasGetStatusString(s), static_cast<int>(s));
}

void check_cudnn(cudnnStatus_t s, const char* call) {
  D5_CHECK(s == CUDNN_STATUS_SUCCESS, Internal, "{} on cuda:{}: {} ({})", call, kOpDevice,
           cudnnGetErrorString(s), static_cast<int>(s));
}

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

const std::string& device_unusable_reason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return fmt::format("no usable CUDA device: {}", cudaGetErrorString(e));
    }
    if (count <= kOpDevice) return fmt::format("no CUDA device: the runtime reports {}", count);
    const cudaError_t set = cudaSetDevice(kOpDevice);
    if (set != cudaSuccess) return fmt::format("cuda:{} cannot be used: {}", kOpDevice, cudaGetErrorString(set));
    return std::string();
  }();
  return reason;
}

namespace {
// The math mode the handle was last set to (-1: not yet).
std::atomic<int> g_handle_math{-1};

cublasHandle_t make_cublas() {
  check_cuda(cudaSetDevice(kOpDevice), "cudaSetDevice");
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate");
  // Results must not depend on the run: cuBLAS's atomics-based reductions are off by default;
  // say so rather than rely on it.
  check_cublas(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
  return h;
}
}  // namespace

cublasHandle_t cublas_handle() {
  // Kept for the process: destroying handles at exit races the driver's own teardown.
  static const cublasHandle_t h = make_cublas();
  return h;
}

cudnnHandle_t cudnn_handle() {
  static const cudnnHandle_t h = [] {
    check_cuda(cudaSetDevice(kOpDevice), "cudaSetDevice");
    cudnnHandle_t handle = nullptr;
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    return handle;
  }();
  return h;
}

namespace {
thread_local cudaStream_t t_op_stream = nullptr;
thread_local std::vector<std::function<void()>>* t_deferred_checks = nullptr;
}  // namespace

void check_on_host(std::function<void()> check) {
  if (t_deferred_checks) t_deferred_checks->push_back(std::move(check));
  else check();
}

DeferredHostChecks::DeferredHostChecks(std::vector<std::function<void()>>& into)
    : previous_(std::exchange(t_deferred_checks, &into)) {}

DeferredHostChecks::~DeferredHostChecks() { t_deferred_checks = previous_; }

cudaStream_t op_stream() { return t_op_stream; }

OpStreamScope::OpStreamScope(cudaStream_t stream, void* cublas_workspace, size_t workspace_bytes)
    : previous_(t_op_stream) {
  const cublasHandle_t blas = cublas_handle();
  const cudnnHandle_t dnn = cudnn_handle();
  check_cublas(cublasSetStream(blas, stream), "cublasSetStream");
  // After cublasSetStream, which puts the handle back on its default workspace.
  check_cublas(cublasSetWorkspace(blas, cublas_workspace, workspace_bytes), "cublasSetWorkspace");
  check_cudnn(cudnnSetStream(dnn, stream), "cudnnSetStream");
  t_op_stream = stream;
}

// Never throws: a failure to rebind is reported by the next call on the handle.
OpStreamScope::~OpStreamScope() {
  t_op_stream = previous_;
  cublasSetStream(cublas_handle(), previous_);
  cudnnSetStream(cudnn_handle(), previous_);
}

bool allow_tf32() { return f32_math() == F32Math::tf32; }

void apply_f32_math() {
  const int want = static_cast<int>(f32_math());
  if (g_handle_math.exchange(want) == want) return;
  check_cublas(cublasSetMathMode(cublas_handle(), allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");
}

std::string cublas_version() {
  int v = 0;
  if (cublasGetProperty(MAJOR_VERSION, &v) != CUBLAS_STATUS_SUCCESS) return "unknown";
  int minor = 0, patch = 0;
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return fmt::format("{}.{}.{}", v, minor, patch);
}

std::string cudnn_version() {
  const size_t v = cudnnGetVersion();  // major*10000 + minor*100 + patch since cuDNN 9
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

// Through the device's caching allocator, so that workspaces count in its high-water mark (the
// Mem column of d5 ops bench) and a buffer freed by one operator serves the next.
DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = allocator_for(Device::cuda(kOpDevice)).allocate(bytes, kOpDevice);
}

void zero_tensor(Tensor& t) {
  if (t.defined() && t.bytes() > 0) check_cuda(cudaMemsetAsync(t.data(), 0, t.bytes(), op_stream()), "cudaMemsetAsync");
}

void zero_gradients(std::span<Tensor> gx) {
  for (Tensor& g : gx) zero_tensor(g);
}

void copy_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, op_stream()), "cudaMemcpyAsync");
}

void add_op(OpRegistry& r, const std::string& op_type, Maker make, AddOpOptions options) {
  const bool any_dtype = options.any_dtype;
  auto create = [make = std::move(make), any_dtype](const OpSpec& s) -> OpCreateResult {
    if (const std::string& why = device_unusable_reason(); !why.empty()) return why;
    if (!any_dtype)
      for (size_t i = 0; i < s.inputs.size(); ++i)
        if (s.has_input(i) && s.inputs[i].dtype != DType::f32)
          return fmt::format("this cuda operator computes in f32 only; input {} is {}", i,
                             to_string(s.inputs[i].dtype));
    try {
      return make(s);
    } catch (const Refused& e) {
      return std::string(e.what());
    }
  };
  r.add(OpImplementation{.op_type = op_type,
                         .backend = "cuda",
                         .name = "cuda",
                         .backward = options.backward,
                         .create = std::move(create),
                         .notes = std::move(options.notes)});
}

}  // namespace d5::cuda
