// Conv on cuDNN, forward and backward (data, filter and bias gradients): 1-D (run as 2-D over a
// unit width), 2-D and 3-D, with groups, strides, dilations, pads and the optional bias B.
//
// The algorithm of each direction is chosen once, at creation, by timing the candidates on scratch
// buffers (cudnnFind...AlgorithmEx), within the spec's workspace limit; forward and backward then
// only bind pointers and call.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>

#include "cudnn_common.h"
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

// From cuDNN's results (fastest first): the first that ran, fits `limit` and keeps f32 math (unless
// `tf32`); with `prefer_deterministic`, the first deterministic one of those if there is one.
template <typename Perf>
const Perf* choose(const std::vector<Perf>& results, int count, size_t limit, bool tf32, bool prefer_deterministic) {
  auto usable = [&](const Perf& p) {
    const bool tensor_op = p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return p.status == CUDNN_STATUS_SUCCESS && p.memory <= limit && (tf32 || (!tensor_op && direct_sum(p.algo)));
  };
  const auto n = static_cast<size_t>(std::clamp(count, 0, static_cast<int>(results.size())));
  if (prefer_deterministic)
    for (size_t i = 0; i < n; ++i)
      if (usable(results[i]) && results[i].determinism == CUDNN_DETERMINISTIC) return &results[i];
  for (size_t i = 0; i < n; ++i)
    if (usable(results[i])) return &results[i];
  return nullptr;
}

// One convolution's cuDNN geometry: 1-D problems gain a trailing unit axis.
struct Geometry {
  std::vector<int> x, w, y;   // tensor and filter extents
  std::vector<int> y_planes;  // Y as [N, M, positions]: the bias's view of it
  std::vector<int> pads, strides, dilations;
  std::vector<int64_t> onnx_pads_begin, onnx_pads_end;  // for messages
  int group = 1;
};

Geometry geometry_of(const OpSpec& s, const Shape& y) {
  const ConvDims d = conv_dims(s, false);
  const Window win = sliding_window(s, parse_window_attrs(s, d.image.size(), d.kernel), d.image, false);
  const size_t r = d.image.size();
  refuse_if(r < 1 || r > 3, "a {}-D convolution: cuDNN runs 1-D, 2-D and 3-D ones here", r);
  Geometry g;
  g.group = static_cast<int>(d.group);
  g.x = to_int(s.inputs[0].shape.dims());
  g.w = to_int(s.inputs[1].shape.dims());
  g.y = to_int(y.dims());
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
  g.y_planes = {g.y[0], g.y[1], static_cast<int>(y.numel() / (y[0] * y[1]))};
  return g;
}

class ConvOp final : public CudaOp {
 public:
  explicit ConvOp(const OpSpec& s) : CudaOp(s) {
    for (size_t i = 0; i < 2; ++i) {
      refuse_empty(s.inputs[i].shape, i == 0 ? "X" : "W");
      refuse_beyond_int(s.inputs[i].shape, i == 0 ? "X" : "W");
    }
    refuse_empty(sem_.outputs[0].shape, "Y");
    refuse_beyond_int(sem_.outputs[0].shape, "Y");
    const Geometry g = geometry_of(s, sem_.outputs[0].shape);
    bias_ = s.has_input(2);
    tf32_ = allow_tf32();
    set_packed(x_, g.x);
    set_packed(y_, g.y);
    set_packed(y_planes_, g.y_planes);
    set_packed(b_, {1, g.y[1]});
    check_cudnn(cudnnSetFilterNdDescriptor(w_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(g.w.size()),
                                           g.w.data()),
                "cudnnSetFilterNdDescriptor");
    for (const CudnnConvolution* c : {&fwd_, &data_, &filter_}) set_convolution(*c, g);
    check_extents(g);
    choose_algorithms(static_cast<size_t>(s.workspace_limit >= 0 ? s.workspace_limit : kDefaultWorkspaceLimit));
  }

  std::string implementation() const override {
    if (!backward_) return fmt::format("cuda:cudnn:conv fwd={}", algo_name(kFwdNames, fwd_algo_));
    return fmt::format("cuda:cudnn:conv fwd={} bwd_data={} bwd_filter={}", algo_name(kFwdNames, fwd_algo_),
                       algo_name(kDataNames, data_algo_), algo_name(kFilterNames, filter_algo_));
  }
  int64_t workspace_bytes() const override { return static_cast<int64_t>(fwd_bytes_); }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const cudnnHandle_t h = cudnn_handle();
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
    // CUDNN_DEFAULT_MATH lets Ampere and later GPUs round f32 operands to TF32; FMA math keeps f32.
    check_cudnn(cudnnSetConvolutionMathType(c.get(), tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                "cudnnSetConvolutionMathType");
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

  // Sets a direction's math type to the one its chosen algorithm was timed with (TF32 only).
  void use_math(const CudnnConvolution& c, cudnnMathType_t m) const {
    if (tf32_) check_cudnn(cudnnSetConvolutionMathType(c.get(), m), "cudnnSetConvolutionMathType");
  }

  CudnnTensor x_, y_, y_planes_, b_;  // b_: [1, M, 1, 1]
  CudnnFilter w_;
  CudnnConvolution fwd_, data_, filter_;  // one per direction: each keeps its algorithm's math type
  bool bias_ = false, tf32_ = false, backward_ = false;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t fwd_bytes_ = 0;
  DeviceBuffer workspace_;  // shared by the three directions: the largest of their needs
};

void ConvOp::choose_algorithms(size_t limit) {
  const cudnnHandle_t h = cudnn_handle();
  std::optional<cudnnConvolutionBwdDataAlgoPerf_t> data;
  std::optional<cudnnConvolutionBwdFilterAlgoPerf_t> filter;
  {
    // The search writes its outputs into these; they are freed before the workspace is allocated.
    DeviceBuffer x(spec_.inputs[0].bytes()), w(spec_.inputs[1].bytes()), y(sem_.outputs[0].bytes());
    DeviceBuffer scratch(search_workspace(limit));
    for (const DeviceBuffer* b : {&x, &w, &y}) check_cuda(cudaMemset(b->get(), 0, b->bytes()), "cudaMemset");
    int count = 0, found = 0;

    check_cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count), "cudnnGetConvolutionForwardAlgorithmMaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(std::max(count, 1)));
    cudnnStatus_t st =
        cudnnFindConvolutionForwardAlgorithmEx(h, x_.get(), x.get(), w_.get(), w.get(), fwd_.get(), y_.get(), y.get(),
                                               count, &found, fwd.data(), scratch.get(), scratch.bytes());
    const auto* f = st == CUDNN_STATUS_SUCCESS ? choose(fwd, found, limit, tf32_, false) : nullptr;
    refuse_if(
        f == nullptr, "no cuDNN forward algorithm runs this convolution within {} bytes of workspace{}", limit,
        st == CUDNN_STATUS_SUCCESS ? std::string() : fmt::format(" (the search failed: {})", cudnnGetErrorString(st)));
    fwd_algo_ = f->algo;
    fwd_bytes_ = f->memory;
    use_math(fwd_, f->mathType);

    // A backward search that fails leaves the operator forward-only rather than refused.
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count),
                "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> d(static_cast<size_t>(std::max(count, 1)));
    st = cudnnFindConvolutionBackwardDataAlgorithmEx(h, w_.get(), w.get(), y_.get(), y.get(), data_.get(), x_.get(),
                                                     x.get(), count, &found, d.data(), scratch.get(), scratch.bytes());
    if (st == CUDNN_STATUS_SUCCESS)
      if (const auto* p = choose(d, found, limit, tf32_, true)) data = *p;

    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count),
                "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> fl(static_cast<size_t>(std::max(count, 1)));
    st = cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x_.get(), x.get(), y_.get(), y.get(), filter_.get(), w_.get(),
                                                       w.get(), count, &found, fl.data(), scratch.get(),
                                                       scratch.bytes());
    if (st == CUDNN_STATUS_SUCCESS)
      if (const auto* p = choose(fl, found, limit, tf32_, true)) filter = *p;
  }
  backward_ = data && filter;
  if (backward_) {
    data_algo_ = data->algo;
    filter_algo_ = filter->algo;
    use_math(data_, data->mathType);
    use_math(filter_, filter->mathType);
  } else {
    forward_only(fmt::format("no cuDNN backward {} algorithm runs this convolution within {} bytes of workspace",
                             data ? "filter" : "data", limit));
  }
  workspace_ = DeviceBuffer(std::max({fwd_bytes_, backward_ ? data->memory : 0, backward_ ? filter->memory : 0}));
}

}  // namespace

std::unique_ptr<Operator> make_cudnn_conv(const OpSpec& s) { return std::make_unique<ConvOp>(s); }

}  // namespace d5::cuda

#pragma GCC diagnostic pop
