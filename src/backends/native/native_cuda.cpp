// cuBLAS and cuDNN called directly: the native side that d5_bench_op_overhead compares the CUDA
// backend's Gemm and Conv with. Everything here is written against the libraries alone, with
// handles, descriptors and device buffers of its own, set up once before anything is timed.
//
// run() only queues the library call, on the legacy default stream: the stream the CUDA backend's
// operators run on and the device timer records its events on, so one kind of timer brackets the
// same stream work on both sides, and synchronisation is the caller's.
#include "native_cuda.h"

#include <array>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/math_mode.h"

// cuDNN 9 deprecates the legacy convolution API, which the CUDA backend's Conv uses on purpose
// (cudnn_conv.cpp): the native side must make the same calls to be a baseline for it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5 {

namespace {

void check(cudaError_t e, const char* call) {
  D5_CHECK(e == cudaSuccess, Internal, "{}: {}", call, cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* call) {
  D5_CHECK(s == CUBLAS_STATUS_SUCCESS, Internal, "{}: {} ({})", call, cublasGetStatusString(s), static_cast<int>(s));
}
void check(cudnnStatus_t s, const char* call) {
  D5_CHECK(s == CUDNN_STATUS_SUCCESS, Internal, "{}: {} ({})", call, cudnnGetErrorString(s), static_cast<int>(s));
}

// Owners of library objects, released with the last copy of the NativeCall that holds them.
using Blas = std::shared_ptr<std::remove_pointer_t<cublasHandle_t>>;
using Dnn = std::shared_ptr<std::remove_pointer_t<cudnnHandle_t>>;
template <typename Desc>
using Owned = std::shared_ptr<std::remove_pointer_t<Desc>>;

template <typename Desc, cudnnStatus_t (*Create)(Desc*), cudnnStatus_t (*Destroy)(Desc)>
Owned<Desc> make_descriptor() {
  Desc raw = nullptr;
  check(Create(&raw), "cudnnCreate...Descriptor");
  return Owned<Desc>(raw, [](Desc d) { Destroy(d); });
}
auto tensor_descriptor() {
  return make_descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>();
}
auto filter_descriptor() {
  return make_descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>();
}
auto convolution_descriptor() {
  return make_descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                         cudnnDestroyConvolutionDescriptor>();
}

std::shared_ptr<void> device_buffer(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

// The same values as the deep500 side's inputs, in memory of our own.
std::shared_ptr<void> copy_to_device(const Tensor& t) {
  auto buf = device_buffer(t.bytes());
  check(cudaMemcpy(buf.get(), t.data(), t.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
  return buf;
}

// A blocking copy on the legacy default stream waits for every run queued before it.
std::function<Tensor()> read_back(std::shared_ptr<void> y, Shape shape) {
  return [y = std::move(y), shape = std::move(shape)] {
    Tensor t(DType::f32, shape);
    check(cudaMemcpy(t.data(), y.get(), t.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
    return t;
  };
}

bool beyond_int(int64_t v) { return v > std::numeric_limits<int>::max(); }

bool use_tf32() { return f32_math() == F32Math::tf32; }

// Row-major C(m, n) = alpha op(A) op(B). cuBLAS reads column-major, and a row-major matrix read
// column-major is its transpose, so cuBLAS is asked for C^T = op(B)^T op(A)^T: B first, with B's
// and A's operations unchanged, their leading dimensions their stored row lengths.
std::optional<NativeCall> gemm_call(const Problem& p, const std::vector<Tensor>& in, std::string* why) {
  const OpSpec& s = p.spec;
  const float alpha = static_cast<float>(s.attrs.get_float("alpha", 1.0));
  // With a C of beta != 0 the backend adds beta C with a broadcast kernel of its own before the
  // product: not one library call, so there is nothing native to set against it.
  if (s.has_input(2) && s.attrs.get_float("beta", 1.0) != 0) {
    *why = "Gemm with an input C and beta != 0: the backend adds it with a kernel of its own, not cuBLAS";
    return std::nullopt;
  }
  const Shape& a = s.inputs[0].shape;
  const Shape& b = s.inputs[1].shape;
  if (a.rank() != 2 || b.rank() != 2) {
    *why = fmt::format("Gemm of {} and {}: cuBLAS's product here takes matrices", a.to_string(), b.to_string());
    return std::nullopt;
  }
  const bool ta = s.attrs.get_int("transA", 0) != 0, tb = s.attrs.get_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], n = tb ? b[0] : b[1];
  if (beyond_int(m) || beyond_int(n) || beyond_int(k)) {
    *why = fmt::format("m{} n{} k{}: beyond cuBLAS's 32-bit dimensions", m, n, k);
    return std::nullopt;
  }
  cublasHandle_t raw = nullptr;
  check(cublasCreate(&raw), "cublasCreate");
  const Blas blas(raw, [](cublasHandle_t h) { cublasDestroy(h); });
  // TF32 only when asked for, as the backend: f32 products otherwise keep f32 operands.
  const bool tf32 = use_tf32();
  check(cublasSetMathMode(raw, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // The backend's handle forbids atomics explicitly (run-independent results); so does this one.
  check(cublasSetAtomicsMode(raw, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");

  const std::shared_ptr<void> da = copy_to_device(in[0]), db = copy_to_device(in[1]);
  const std::shared_ptr<void> dc = device_buffer(static_cast<size_t>(m * n) * sizeof(float));
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in_ = static_cast<int>(n), ik = static_cast<int>(k);
  const int lda = ta ? im : ik, ldb = tb ? ik : in_;
  NativeCall call;
  call.run = [=] {
    const float zero = 0.0f;
    check(cublasSgemm(blas.get(), op_b, op_a, in_, im, ik, &alpha, static_cast<const float*>(db.get()), ldb,
                      static_cast<const float*>(da.get()), lda, &zero, static_cast<float*>(dc.get()), in_),
          "cublasSgemm");
  };
  call.result = read_back(dc, Shape{m, n});
  call.implementation = fmt::format("cublasSgemm ({} math, a handle of its own)", tf32 ? "TF32 tensor-op" : "default");
  return call;
}

// cuDNN's forward algorithms by the names the backend prints (cudnn_conv.cpp), each paired with
// its enumerator rather than its position, so a reordered list cannot map a name to another.
constexpr std::array<std::pair<const char*, cudnnConvolutionFwdAlgo_t>, 8> kFwdAlgorithms = {{
    {"IMPLICIT_GEMM", CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM},
    {"IMPLICIT_PRECOMP_GEMM", CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM},
    {"GEMM", CUDNN_CONVOLUTION_FWD_ALGO_GEMM},
    {"DIRECT", CUDNN_CONVOLUTION_FWD_ALGO_DIRECT},
    {"FFT", CUDNN_CONVOLUTION_FWD_ALGO_FFT},
    {"FFT_TILING", CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING},
    {"WINOGRAD", CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD},
    {"WINOGRAD_NONFUSED", CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED},
}};

// The forward algorithm in "cuda:cudnn:conv fwd=NAME bwd_data=... bwd_filter=...".
std::optional<std::pair<std::string, cudnnConvolutionFwdAlgo_t>> fwd_algorithm(const std::string& implementation) {
  const std::string key = " fwd=";
  const size_t at = implementation.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + key.size();
  const std::string name = implementation.substr(begin, implementation.find(' ', begin) - begin);
  for (const auto& [n, algo] : kFwdAlgorithms)
    if (name == n) return std::pair{name, algo};
  return std::nullopt;
}

// The spec's geometry, or why this side does not run it.
struct ConvGeometry {
  int n = 0, c = 0, h = 0, w = 0, k = 0, cg = 0, fh = 0, fw = 0;  // cg: input channels per group
  int ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1, group = 1;
  bool bias = false;
};

std::optional<ConvGeometry> conv_geometry(const OpSpec& s, std::string* why) {
  const Shape& x = s.inputs[0].shape;
  const Shape& wt = s.inputs[1].shape;
  if (x.rank() != 4 || wt.rank() != 4) {
    *why = fmt::format("Conv of {} with {}: the native side runs 2-D (NCHW) convolutions", x.to_string(),
                       wt.to_string());
    return std::nullopt;
  }
  if (const std::string pad = s.attrs.get_string("auto_pad", "NOTSET"); pad != "NOTSET") {
    *why = fmt::format("auto_pad {}: the native side takes explicit pads", pad);
    return std::nullopt;
  }
  const auto pads = s.attrs.get_ints("pads", {0, 0, 0, 0});
  const auto strides = s.attrs.get_ints("strides", {1, 1});
  const auto dilations = s.attrs.get_ints("dilations", {1, 1});
  if (pads.size() != 4 || strides.size() != 2 || dilations.size() != 2) {
    *why = "pads, strides or dilations of another rank than the image's";
    return std::nullopt;
  }
  // cuDNN pads both ends of an axis alike.
  if (pads[0] != pads[2] || pads[1] != pads[3]) {
    *why = fmt::format("pads {},{},{},{}: cuDNN pads both ends of an axis alike", pads[0], pads[1], pads[2], pads[3]);
    return std::nullopt;
  }
  if (beyond_int(x.numel()) || beyond_int(wt.numel())) {
    *why = "more elements than cuDNN's int indexing allows";
    return std::nullopt;
  }
  auto i = [](int64_t v) { return static_cast<int>(v); };
  ConvGeometry g{.n = i(x[0]), .c = i(x[1]), .h = i(x[2]), .w = i(x[3]), .k = i(wt[0]), .cg = i(wt[1]),
                 .fh = i(wt[2]), .fw = i(wt[3]), .ph = i(pads[0]), .pw = i(pads[1]), .sh = i(strides[0]),
                 .sw = i(strides[1]), .dh = i(dilations[0]), .dw = i(dilations[1]),
                 .group = i(s.attrs.get_int("group", 1)), .bias = s.has_input(2)};
  return g;
}

// cudnnConvolutionForward with descriptors of our own, then, with a bias, cudnnAddTensor of it
// broadcast over [1, K, 1, 1]: the two calls the backend's Conv makes.
std::optional<NativeCall> conv_call(const Problem& p, const std::vector<Tensor>& in, const NativeMatch& match,
                                    std::string* why) {
  const auto algo = fwd_algorithm(match.d5_implementation);
  if (!algo) {
    *why = fmt::format("no cuDNN forward algorithm (fwd=NAME) in the operator's implementation '{}'",
                       match.d5_implementation);
    return std::nullopt;
  }
  const auto g = conv_geometry(p.spec, why);
  if (!g) return std::nullopt;

  cudnnHandle_t raw = nullptr;
  check(cudnnCreate(&raw), "cudnnCreate");
  const Dnn dnn(raw, [](cudnnHandle_t h) { cudnnDestroy(h); });
  const auto xd = tensor_descriptor(), yd = tensor_descriptor(), bd = tensor_descriptor();
  const auto wd = filter_descriptor();
  const auto cd = convolution_descriptor();
  check(cudnnSetTensor4dDescriptor(xd.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c, g->h, g->w),
        "cudnnSetTensor4dDescriptor");
  check(cudnnSetFilter4dDescriptor(wd.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->k, g->cg, g->fh, g->fw),
        "cudnnSetFilter4dDescriptor");
  check(cudnnSetConvolution2dDescriptor(cd.get(), g->ph, g->pw, g->sh, g->sw, g->dh, g->dw, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionGroupCount(cd.get(), g->group), "cudnnSetConvolutionGroupCount");
  // FMA math keeps f32 operands; default math lets Ampere and later GPUs round them to TF32.
  const bool tf32 = use_tf32();
  check(cudnnSetConvolutionMathType(cd.get(), tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
        "cudnnSetConvolutionMathType");
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(cudnnGetConvolution2dForwardOutputDim(cd.get(), xd.get(), wd.get(), &on, &oc, &oh, &ow),
        "cudnnGetConvolution2dForwardOutputDim");
  check(cudnnSetTensor4dDescriptor(yd.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow),
        "cudnnSetTensor4dDescriptor");
  check(cudnnSetTensor4dDescriptor(bd.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g->k, 1, 1),
        "cudnnSetTensor4dDescriptor");
  size_t ws_bytes = 0;
  const cudnnStatus_t st =
      cudnnGetConvolutionForwardWorkspaceSize(dnn.get(), xd.get(), wd.get(), cd.get(), yd.get(), algo->second, &ws_bytes);
  if (st != CUDNN_STATUS_SUCCESS) {
    *why = fmt::format("cuDNN does not run {} for this convolution here: {}", algo->first, cudnnGetErrorString(st));
    return std::nullopt;
  }

  const std::shared_ptr<void> dx = copy_to_device(in[0]), dw = copy_to_device(in[1]);
  const std::shared_ptr<void> db = g->bias ? copy_to_device(in[2]) : nullptr;
  const std::shared_ptr<void> dy =
      device_buffer(static_cast<size_t>(on) * static_cast<size_t>(oc) * static_cast<size_t>(oh) *
                    static_cast<size_t>(ow) * sizeof(float));
  const std::shared_ptr<void> ws = device_buffer(ws_bytes);
  NativeCall call;
  call.run = [=, a = algo->second] {
    const float one = 1.0f, zero = 0.0f;
    check(cudnnConvolutionForward(dnn.get(), &one, xd.get(), dx.get(), wd.get(), dw.get(), cd.get(), a, ws.get(),
                                  ws_bytes, &zero, yd.get(), dy.get()),
          "cudnnConvolutionForward");
    if (db) check(cudnnAddTensor(dnn.get(), &one, bd.get(), db.get(), &one, yd.get(), dy.get()), "cudnnAddTensor");
  };
  call.result = read_back(dy, Shape{on, oc, oh, ow});
  call.implementation = fmt::format("cudnnConvolutionForward fwd={} ({} math, {} bytes of workspace{})", algo->first,
                                    tf32 ? "default" : "FMA", ws_bytes, g->bias ? ", cudnnAddTensor bias" : "");
  return call;
}

}  // namespace

std::optional<NativeCall> cuda_native_call(const Problem& p, const std::vector<Tensor>& inputs,
                                           const NativeMatch& match, std::string* why) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind != DeviceKind::cpu) {
      *why = fmt::format("inputs must be host tensors (one is on {}): the native side copies them itself",
                         t.device().to_string());
      return std::nullopt;
    }
  try {
    // Handles and buffers made after this belong to the operator's device.
    check(cudaSetDevice(match.device_index), "cudaSetDevice");
    if (p.spec.type == "Gemm") return gemm_call(p, inputs, why);
    if (p.spec.type == "Conv") return conv_call(p, inputs, match, why);
    *why = fmt::format("no native cuBLAS / cuDNN call for {}", p.spec.type);
  } catch (const Error& e) {
    *why = fmt::format("cannot set up cuBLAS / cuDNN on cuda:{}: {}", match.device_index, e.what());
  }
  return std::nullopt;
}

}  // namespace d5

#pragma GCC diagnostic pop
