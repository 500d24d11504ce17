// Conv on cuDNN, forward and backward (data, filter and bias gradients): 1-D (run as 2-D over a
// unit width), 2-D and 3-D, with groups, strides, dilations, pads and the optional bias B.
//
// ConvTranspose is the same operator with the roles of the directions swapped: it is the adjoint
// of the convolution from its output Y (cuDNN's x) to its input X (cuDNN's y) with the same W, so
// its forward is cuDNN's backward data, its dX a convolution forward of dY and its dW cuDNN's
// backward filter with dY as x and X as dy.
//
// Conv also runs in f16 and bf16: operands in the narrow type, products summed in f32 on tensor
// cores (the reference's widened result, reference/ops/widened.h), without bias for now.
//
// The algorithm of each direction is chosen once, at creation, by timing the candidates on scratch
// buffers (cudnnFind...AlgorithmEx), within the spec's workspace limit; forward and backward then
// only bind pointers and call.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>

#include "cudnn_common.h"
#include "deep500/core/math_mode.h"
#include "deep500/spi/selective_backward.h"
#include "deep500/spi/shape_rules.h"

// See cudnn_common.h: the legacy API is deprecated in cuDNN 9 and used here on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5::cuda {

namespace {

// Without a limit in the spec, the most workspace one call may take (as the reference's batched
// convolution, nn/conv.cpp).
constexpr int64_t kDefaultWorkspaceLimit = int64_t{256} << 20;

constexpr std::array<const char*, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> kFwdNames = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr std::array<const char*, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> kDataNames = {
    "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr std::array<const char*, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> kFilterNames = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};

template <size_t N>
const char* algo_name(const std::array<const char*, N>& names, int algo) {
  return algo >= 0 && static_cast<size_t>(algo) < N ? names[static_cast<size_t>(algo)] : "UNKNOWN";
}

// FFT and Winograd transform the operands, so their f32 rounding error scales with the whole
// tensor's magnitude rather than each sum's: with f32 math they can miss the reference's tolerance
// on outputs near zero. Without TF32 allowed, only the algorithms that sum products directly run.
bool direct_sum(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool direct_sum(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool direct_sum(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// What a chosen algorithm may do: round f32 operands to TF32 (and transform them, FFT/Winograd),
// transform f32 operands without rounding them to TF32 and sum in any order (any_f32: --math
// fast), or, for f16/bf16 operands, run on tensor cores while still summing products directly.
enum class ConvMath { strict_f32, tf32, any_f32, tensor_core };

// From cuDNN's results (fastest first): the first that ran, fits `limit` and keeps to `math`; with
// `prefer_deterministic` (every math but any_f32), the first deterministic one of those if there
// is one.
template <typename Perf>
const Perf* choose(const std::vector<Perf>& results, int count, size_t limit, ConvMath math, bool backward) {
  const bool prefer_deterministic = backward && math != ConvMath::any_f32;
  auto usable = [&](const Perf& p) {
    const bool tensor_op = p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    const bool allowed =
        math == ConvMath::tf32 || (math == ConvMath::any_f32 && !tensor_op) ||
        (direct_sum(p.algo) &&
         (math == ConvMath::tensor_core ? p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : !tensor_op));
    return p.status == CUDNN_STATUS_SUCCESS && p.memory <= limit && allowed;
  };
  const auto n = static_cast<size_t>(std::clamp(count, 0, static_cast<int>(results.size())));
  if (prefer_deterministic)
    for (size_t i = 0; i < n; ++i)
      if (usable(results[i]) && results[i].determinism == CUDNN_DETERMINISTIC) return &results[i];
  for (size_t i = 0; i < n; ++i)
    if (usable(results[i])) return &results[i];
  return nullptr;
}

// One convolution's cuDNN geometry: 1-D problems gain a trailing unit axis. For ConvTranspose
// x is its output Y and y its input X.
struct Geometry {
  std::vector<int> x, w, y;   // tensor and filter extents
  std::vector<int> y_planes;  // the ONNX output as [N, M, positions]: the bias's view of it
  std::vector<int> pads, strides, dilations;
  std::vector<int64_t> onnx_pads_begin, onnx_pads_end;  // for messages
  int group = 1;
};

// `y`: the ONNX output's shape.
Geometry geometry_of(const OpSpec& s, const Shape& y, bool transposed) {
  const ConvDims d = conv_dims(s, transposed);
  const Window win = transposed ? transposed_window(s, d)
                                : sliding_window(s, parse_window_attrs(s, d.image.size(), d.kernel), d.image, false);
  const size_t r = d.image.size();
  refuse_if(r < 1 || r > 3, "a {}-D convolution: cuDNN runs 1-D, 2-D and 3-D ones here", r);
  Geometry g;
  g.group = static_cast<int>(d.group);
  g.x = to_int(transposed ? y.dims() : s.inputs[0].shape.dims());
  g.w = to_int(s.inputs[1].shape.dims());
  g.y = to_int(transposed ? s.inputs[0].shape.dims() : y.dims());
  g.pads = to_int(win.pads_begin);
  g.strides = to_int(win.strides);
  g.dilations = to_int(win.dilations);
  g.onnx_pads_begin = win.pads_begin;
  g.onnx_pads_end = win.pads_end;
  // cuDNN pads both ends alike. Unequal ONNX pads give the same windows when the output extents
  // come out the same with the leading pad on both ends; checked against cuDNN's own extents.
  if (r == 1) {
    for (auto* v : {&g.x, &g.w, &g.y}) v->push_back(1);
    g.pads.push_back(0);
    g.strides.push_back(1);
    g.dilations.push_back(1);
  }
  // The bias broadcasts over every position: a 4-D view serves every rank, so adding it and its
  // gradient (a reduction) need nothing of cuDNN beyond 4-D tensors.
  g.y_planes = {static_cast<int>(y[0]), static_cast<int>(y[1]), static_cast<int>(y.numel() / (y[0] * y[1]))};
  return g;
}

// SelectiveBackward: a data gradient nobody needs (the first layer's) is not computed.
class ConvOp final : public CudaOp, public SelectiveBackward {
 public:
  ConvOp(const OpSpec& s, bool transposed) : CudaOp(s), transposed_(transposed) {
    dtype_ = s.inputs[0].dtype;
    refuse_if(dtype_ != DType::f32 && (transposed || !tensor_core_dtype(dtype_)),
              "{} in {}: runs in f32{}", s.type, to_string(dtype_), transposed ? "" : ", f16 or bf16");
    refuse_if(dtype_ != DType::f32 && s.has_input(2), "Conv in {} with a bias: not yet (f32 only)", to_string(dtype_));
    for (size_t i = 0; i < 2; ++i) {
      refuse_empty(s.inputs[i].shape, i == 0 ? "X" : "W");
      refuse_beyond_int(s.inputs[i].shape, i == 0 ? "X" : "W");
    }
    refuse_empty(sem_.outputs[0].shape, "Y");
    refuse_beyond_int(sem_.outputs[0].shape, "Y");
    const Geometry g = geometry_of(s, sem_.outputs[0].shape, transposed);
    bias_ = s.has_input(2);
    math_ = dtype_ != DType::f32               ? ConvMath::tensor_core
            : allow_tf32()                     ? ConvMath::tf32
            : f32_math() == F32Math::fast      ? ConvMath::any_f32
                                               : ConvMath::strict_f32;
    const cudnnDataType_t type = cudnn_type(dtype_);
    set_packed(x_, g.x, type);
    set_packed(y_, g.y, type);
    set_packed(y_planes_, g.y_planes, type);
    set_packed(b_, {1, g.y_planes[1]}, type);
    check_cudnn(cudnnSetFilterNdDescriptor(w_.get(), type, CUDNN_TENSOR_NCHW, static_cast<int>(g.w.size()),
                                           g.w.data()),
                "cudnnSetFilterNdDescriptor");
    for (const CudnnConvolution* c : {&fwd_, &data_, &filter_}) set_convolution(*c, g);
    check_extents(g);
    choose_algorithms(static_cast<size_t>(s.workspace_limit >= 0 ? s.workspace_limit : kDefaultWorkspaceLimit));
  }

  std::string implementation() const override {
    if (dtype_ != DType::f32) return fmt::format("{} [{} operands, f32 accumulate]", names(), to_string(dtype_));
    return names();
  }
  int64_t workspace_bytes() const override { return static_cast<int64_t>(fwd_bytes_); }

  // The algorithms chosen, by direction.
  std::string names() const {
    if (transposed_) {
      if (!backward_) return fmt::format("cuda:cudnn:conv_transpose fwd={}", algo_name(kDataNames, data_algo_));
      return fmt::format("cuda:cudnn:conv_transpose fwd={} bwd_data={} bwd_filter={}",
                         algo_name(kDataNames, data_algo_), algo_name(kFwdNames, fwd_algo_),
                         algo_name(kFilterNames, filter_algo_));
    }
    if (!backward_) return fmt::format("cuda:cudnn:conv fwd={}", algo_name(kFwdNames, fwd_algo_));
    return fmt::format("cuda:cudnn:conv fwd={} bwd_data={} bwd_filter={}", algo_name(kFwdNames, fwd_algo_),
                       algo_name(kDataNames, data_algo_), algo_name(kFilterNames, filter_algo_));
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const cudnnHandle_t h = cudnn_handle();
    if (transposed_) {
      check_cudnn(cudnnConvolutionBackwardData(h, &kOne, w_.get(), fptr(in[1]), y_.get(), fptr(in[0]), data_.get(),
                                               data_algo_, workspace_.get(), workspace_.bytes(), &kZero, x_.get(),
                                               fptr(out[0])),
                  "cudnnConvolutionBackwardData (ConvTranspose)");
      if (bias_)
        check_cudnn(cudnnAddTensor(h, &kOne, b_.get(), fptr(in[2]), &kOne, y_planes_.get(), fptr(out[0])),
                    "cudnnAddTensor");
      return;
    }
    check_cudnn(cudnnConvolutionForward(h, &kOne, x_.get(), fptr(in[0]), w_.get(), fptr(in[1]), fwd_.get(), fwd_algo_,
                                        workspace_.get(), workspace_.bytes(), &kZero, y_.get(), fptr(out[0])),
                "cudnnConvolutionForward");
    if (bias_)
      check_cudnn(cudnnAddTensor(h, &kOne, b_.get(), fptr(in[2]), &kOne, y_planes_.get(), fptr(out[0])),
                  "cudnnAddTensor");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (!gy[0].defined()) return zero_gradients(gx);
    const cudnnHandle_t h = cudnn_handle();
    const float* dy = fptr(gy[0]);
    auto wanted = [&](size_t i) { return i < gx.size() && gx[i].defined(); };
    if (transposed_) {
      if (wanted(0))
        check_cudnn(cudnnConvolutionForward(h, &kOne, x_.get(), dy, w_.get(), fptr(in[1]), fwd_.get(), fwd_algo_,
                                            workspace_.get(), workspace_.bytes(), &kZero, y_.get(), fptr(gx[0])),
                    "cudnnConvolutionForward (ConvTranspose backward)");
      if (wanted(1))
        check_cudnn(
            cudnnConvolutionBackwardFilter(h, &kOne, x_.get(), dy, y_.get(), fptr(in[0]), filter_.get(), filter_algo_,
                                           workspace_.get(), workspace_.bytes(), &kZero, w_.get(), fptr(gx[1])),
            "cudnnConvolutionBackwardFilter (ConvTranspose backward)");
      if (bias_ && wanted(2))
        check_cudnn(cudnnConvolutionBackwardBias(h, &kOne, y_planes_.get(), dy, &kZero, b_.get(), fptr(gx[2])),
                    "cudnnConvolutionBackwardBias");
      return;
    }
    if (wanted(0))
      check_cudnn(cudnnConvolutionBackwardData(h, &kOne, w_.get(), fptr(in[1]), y_.get(), dy, data_.get(), data_algo_,
                                               workspace_.get(), workspace_.bytes(), &kZero, x_.get(), fptr(gx[0])),
                  "cudnnConvolutionBackwardData");
    if (wanted(1))
      check_cudnn(
          cudnnConvolutionBackwardFilter(h, &kOne, x_.get(), fptr(in[0]), y_.get(), dy, filter_.get(), filter_algo_,
                                         workspace_.get(), workspace_.bytes(), &kZero, w_.get(), fptr(gx[1])),
          "cudnnConvolutionBackwardFilter");
    if (bias_ && wanted(2))
      check_cudnn(cudnnConvolutionBackwardBias(h, &kOne, y_planes_.get(), dy, &kZero, b_.get(), fptr(gx[2])),
                  "cudnnConvolutionBackwardBias");
  }

 private:
  void set_convolution(const CudnnConvolution& c, const Geometry& g) const {
    check_cudnn(
        cudnnSetConvolutionNdDescriptor(c.get(), static_cast<int>(g.pads.size()), g.pads.data(), g.strides.data(),
                                        g.dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolutionNdDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(c.get(), g.group), "cudnnSetConvolutionGroupCount");
    // CUDNN_DEFAULT_MATH lets Ampere and later GPUs round f32 operands to TF32; FMA math keeps f32;
    // tensor-op math is what f16 and bf16 operands run on.
    const cudnnMathType_t m = math_ == ConvMath::tensor_core ? CUDNN_TENSOR_OP_MATH
                              : math_ == ConvMath::tf32      ? CUDNN_DEFAULT_MATH
                                                             : CUDNN_FMA_MATH;
    check_cudnn(cudnnSetConvolutionMathType(c.get(), m), "cudnnSetConvolutionMathType");
  }

  // The output extents cuDNN computes must be the oracle's, else its windows differ (pads that
  // are not alike at both ends and change the output extent).
  void check_extents(const Geometry& g) const {
    std::vector<int> dims(g.y.size(), 0);
    const cudnnStatus_t st = cudnnGetConvolutionNdForwardOutputDim(fwd_.get(), x_.get(), w_.get(),
                                                                   static_cast<int>(dims.size()), dims.data());
    refuse_if(st != CUDNN_STATUS_SUCCESS || dims != g.y,
              "pads {} (begin) / {} (end): cuDNN pads both ends of an axis alike, and its output {} is not {}",
              fmt::join(g.onnx_pads_begin, ","), fmt::join(g.onnx_pads_end, ","), fmt::join(dims, "x"),
              fmt::join(g.y, "x"));
  }

  // Largest workspace any candidate of the three directions asks for within `limit`: the scratch
  // the timed search runs on.
  size_t search_workspace(size_t limit) const {
    const cudnnHandle_t h = cudnn_handle();
    size_t most = 0;
    auto take = [&](cudnnStatus_t st, size_t bytes) {
      if (st == CUDNN_STATUS_SUCCESS && bytes <= limit) most = std::max(most, bytes);
    };
    size_t b = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
      take(cudnnGetConvolutionForwardWorkspaceSize(h, x_.get(), w_.get(), fwd_.get(), y_.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(a), &b),
           b);
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a)
      take(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_.get(), y_.get(), data_.get(), x_.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &b),
           b);
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a)
      take(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_.get(), y_.get(), filter_.get(), w_.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), &b),
           b);
    return most;
  }

  void choose_algorithms(size_t limit);

  // Sets a direction's math type to the one its chosen algorithm was timed with (FMA math has
  // only the one it was set to).
  void use_math(const CudnnConvolution& c, cudnnMathType_t m) const {
    if (math_ == ConvMath::tf32 || math_ == ConvMath::tensor_core) check_cudnn(cudnnSetConvolutionMathType(c.get(), m), "cudnnSetConvolutionMathType");
  }

  CudnnTensor x_, y_, y_planes_, b_;  // b_: [1, M, 1, 1]
  CudnnFilter w_;
  CudnnConvolution fwd_, data_, filter_;  // one per direction: each keeps its algorithm's math type
  bool transposed_ = false;  // ConvTranspose: forward is backward data (see the top of the file)
  bool bias_ = false, backward_ = false;
  DType dtype_ = DType::f32;
  ConvMath math_ = ConvMath::strict_f32;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t fwd_bytes_ = 0;  // of the op's forward direction (backward data for ConvTranspose)
  DeviceBuffer workspace_;  // shared by the three directions: the largest of their needs
};

void ConvOp::choose_algorithms(size_t limit) {
  const cudnnHandle_t h = cudnn_handle();
  std::optional<cudnnConvolutionFwdAlgoPerf_t> conv;
  std::optional<cudnnConvolutionBwdDataAlgoPerf_t> data;
  std::optional<cudnnConvolutionBwdFilterAlgoPerf_t> filter;
  std::string search_failure;  // of the op's forward direction
  {
    // The search writes its outputs into these; they are freed before the workspace is allocated.
    const size_t x_bytes = transposed_ ? sem_.outputs[0].bytes() : spec_.inputs[0].bytes();
    const size_t y_bytes = transposed_ ? spec_.inputs[0].bytes() : sem_.outputs[0].bytes();
    DeviceBuffer x(x_bytes), w(spec_.inputs[1].bytes()), y(y_bytes);
    DeviceBuffer scratch(search_workspace(limit));
    for (const DeviceBuffer* b : {&x, &w, &y}) check_cuda(cudaMemset(b->get(), 0, b->bytes()), "cudaMemset");
    int count = 0, found = 0;

    check_cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count), "cudnnGetConvolutionForwardAlgorithmMaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(std::max(count, 1)));
    cudnnStatus_t st =
        cudnnFindConvolutionForwardAlgorithmEx(h, x_.get(), x.get(), w_.get(), w.get(), fwd_.get(), y_.get(), y.get(),
                                               count, &found, fwd.data(), scratch.get(), scratch.bytes());
    if (st == CUDNN_STATUS_SUCCESS) {
      if (const auto* p = choose(fwd, found, limit, math_, false)) conv = *p;
    } else if (!transposed_) {
      search_failure = fmt::format(" (the search failed: {})", cudnnGetErrorString(st));
    }

    // A backward search that fails leaves the operator forward-only rather than refused.
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count),
                "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> d(static_cast<size_t>(std::max(count, 1)));
    st = cudnnFindConvolutionBackwardDataAlgorithmEx(h, w_.get(), w.get(), y_.get(), y.get(), data_.get(), x_.get(),
                                                     x.get(), count, &found, d.data(), scratch.get(), scratch.bytes());
    if (st == CUDNN_STATUS_SUCCESS) {
      if (const auto* p = choose(d, found, limit, math_, true)) data = *p;
    } else if (transposed_) {
      search_failure = fmt::format(" (the search failed: {})", cudnnGetErrorString(st));
    }

    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count),
                "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> fl(static_cast<size_t>(std::max(count, 1)));
    st = cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x_.get(), x.get(), y_.get(), y.get(), filter_.get(), w_.get(),
                                                       w.get(), count, &found, fl.data(), scratch.get(),
                                                       scratch.bytes());
    if (st == CUDNN_STATUS_SUCCESS)
      if (const auto* p = choose(fl, found, limit, math_, true)) filter = *p;
  }
  // The op's forward direction must run; without the other two it is forward-only.
  if (transposed_) {
    refuse_if(!data, "no cuDNN backward data algorithm (ConvTranspose's forward) runs this convolution within {} "
              "bytes of workspace{}", limit, search_failure);
    data_algo_ = data->algo;
    fwd_bytes_ = data->memory;
    use_math(data_, data->mathType);
    backward_ = conv && filter;
  } else {
    refuse_if(!conv, "no cuDNN forward algorithm runs this convolution within {} bytes of workspace{}", limit,
              search_failure);
    fwd_algo_ = conv->algo;
    fwd_bytes_ = conv->memory;
    use_math(fwd_, conv->mathType);
    backward_ = data && filter;
  }
  size_t backward_bytes = 0;
  if (backward_) {
    filter_algo_ = filter->algo;
    use_math(filter_, filter->mathType);
    if (transposed_) {
      fwd_algo_ = conv->algo;
      use_math(fwd_, conv->mathType);
      backward_bytes = std::max(conv->memory, filter->memory);
    } else {
      data_algo_ = data->algo;
      use_math(data_, data->mathType);
      backward_bytes = std::max(data->memory, filter->memory);
    }
  } else if (transposed_) {
    forward_only(fmt::format("no cuDNN {} algorithm runs this convolution within {} bytes of workspace",
                             conv ? "backward filter" : "forward", limit));
  } else {
    forward_only(fmt::format("no cuDNN backward {} algorithm runs this convolution within {} bytes of workspace",
                             data ? "filter" : "data", limit));
  }
  workspace_ = DeviceBuffer(std::max(fwd_bytes_, backward_bytes));
}

}  // namespace

std::unique_ptr<Operator> make_cudnn_conv(const OpSpec& s) { return std::make_unique<ConvOp>(s, false); }
std::unique_ptr<Operator> make_cudnn_conv_transpose(const OpSpec& s) { return std::make_unique<ConvOp>(s, true); }

}  // namespace d5::cuda

#pragma GCC diagnostic pop
