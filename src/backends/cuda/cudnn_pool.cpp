// MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool on cuDNN, forward and backward, over
// 1-D (run as 2-D over a unit width), 2-D and 3-D images.
//
// cuDNN pads both ends of an axis alike and sizes its output with floor division; ONNX allows
// unequal pads and ceil_mode. A spec runs here when cuDNN, padding both ends with the leading pad,
// produces the oracle's output extents: the windows are then the same (a window never reaches
// padding beyond the smaller of the two), so max and the exclude-padding average agree; the
// include-padding average also needs every window inside ONNX's padded image, since cuDNN divides
// by the whole window.
#include <fmt/ranges.h>

#include "cudnn_common.h"
#include "deep500/spi/shape_rules.h"

// See cudnn_common.h: the legacy API is deprecated in cuDNN 9 and used here on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5::cuda {

namespace {

// The window of a pool over the spatial axes of X.
Window pool_window(const OpSpec& s) {
  const Shape& x = s.inputs[0].shape;
  const std::vector<int64_t> image(x.dims().begin() + 2, x.dims().end());
  if (s.type.starts_with("Global")) {
    Window w;
    w.image = image;
    w.kernel = image;
    w.positions.assign(image.size(), 1);
    w.strides.assign(image.size(), 1);
    w.dilations.assign(image.size(), 1);
    w.pads_begin.assign(image.size(), 0);
    w.pads_end.assign(image.size(), 0);
    return w;
  }
  const bool ceil_mode = s.attrs.get_int("ceil_mode", 0) != 0;
  return sliding_window(s, parse_window_attrs(s, image.size(), {}), image, ceil_mode);
}

class PoolOp final : public CudaOp {
 public:
  explicit PoolOp(const OpSpec& s) : CudaOp(s) {
    refuse_if(sem_.outputs.size() > 1,
              "MaxPool's Indices output: cuDNN does not return the argmax (nodes asking for Y alone run here)");
    const Shape& x = s.inputs[0].shape;
    const Shape& y = sem_.outputs[0].shape;
    refuse_empty(x, "X");
    refuse_beyond_int(x, "X");
    refuse_empty(y, "Y");
    const Window w = pool_window(s);
    const size_t r = w.rank();
    refuse_if(r > 3, "{} spatial axes: cuDNN pools over at most 3", r);
    for (int64_t d : w.dilations)
      refuse_if(d != 1, "dilations {}: cuDNN pooling has none", fmt::join(w.dilations, ","));
    const bool max = s.type == "MaxPool" || s.type == "GlobalMaxPool";
    const bool include_pad = !max && s.attrs.get_int("count_include_pad", 0) != 0;
    if (include_pad)
      for (size_t d = 0; d < r; ++d)
        refuse_if((w.positions[d] - 1) * w.strides[d] - w.pads_begin[d] + w.kernel[d] > w.image[d] + w.pads_end[d],
                  "count_include_pad with a window past the end padding on axis {} (ceil_mode or pads {} / {}): "
                  "cuDNN divides by the whole window",
                  d, fmt::join(w.pads_begin, ","), fmt::join(w.pads_end, ","));

    // cuDNN pools over 2 or 3 spatial axes: fewer gain unit axes with a unit window.
    std::vector<int> window = to_int(w.kernel), pads = to_int(w.pads_begin), strides = to_int(w.strides);
    std::vector<int> xd = to_int(x.dims()), yd = to_int(y.dims());
    while (window.size() < 2) {
      window.push_back(1);
      pads.push_back(0);
      strides.push_back(1);
      xd.push_back(1);
      yd.push_back(1);
    }
    set_packed(x_, xd);
    set_packed(y_, yd);
    const cudnnPoolingMode_t mode = max           ? CUDNN_POOLING_MAX_DETERMINISTIC
                                    : include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    // NaN propagates through max, as in the reference (a NaN in the window wins).
    check_cudnn(cudnnSetPoolingNdDescriptor(pool_.get(), mode, CUDNN_PROPAGATE_NAN, static_cast<int>(window.size()),
                                            window.data(), pads.data(), strides.data()),
                "cudnnSetPoolingNdDescriptor");
    std::vector<int> dims(yd.size(), 0);
    const cudnnStatus_t st =
        cudnnGetPoolingNdForwardOutputDim(pool_.get(), x_.get(), static_cast<int>(dims.size()), dims.data());
    refuse_if(st != CUDNN_STATUS_SUCCESS || dims != yd,
              "pads {} (begin) / {} (end){}: cuDNN pads both ends alike and rounds the output extent down, giving {} "
              "rather than {}",
              fmt::join(w.pads_begin, ","), fmt::join(w.pads_end, ","),
              s.attrs.get_int("ceil_mode", 0) != 0 ? " with ceil_mode" : "", fmt::join(dims, "x"), fmt::join(yd, "x"));
  }

  std::string implementation() const override { return "cuda:cudnn:pool"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    check_cudnn(
        cudnnPoolingForward(cudnn_handle(), pool_.get(), &kOne, x_.get(), fptr(in[0]), &kZero, y_.get(), fptr(out[0])),
        "cudnnPoolingForward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    check_inputs(in);
    if (!gy[0].defined()) return zero_gradients(gx);
    if (!gx[0].defined()) return;
    check_cudnn(cudnnPoolingBackward(cudnn_handle(), pool_.get(), &kOne, y_.get(), fptr(out[0]), y_.get(), fptr(gy[0]),
                                     x_.get(), fptr(in[0]), &kZero, x_.get(), fptr(gx[0])),
                "cudnnPoolingBackward");
  }

 private:
  CudnnTensor x_, y_;
  CudnnPooling pool_;
};

}  // namespace

std::unique_ptr<Operator> make_cudnn_pool(const OpSpec& s) { return std::make_unique<PoolOp>(s); }

}  // namespace d5::cuda

#pragma GCC diagnostic pop
