// LayerNormalization on the backend's own kernels (norm_kernels.cu): normalizes over axes
// [axis, rank) with f32 Mean and InvStdDev outputs (stash_type 1), and its gradients for X,
// Scale and B, including those that flow back through the Mean and InvStdDev outputs.
#include <algorithm>

#include "cuda_dims.h"
#include "movement_kernels.h"
#include "norm_kernels.h"

namespace d5::cuda {
inline namespace movement {

namespace {

// Scale or B: used in place when it already has one value per row position, else expanded
// (numpy broadcasting) before each use and its gradient folded back.
struct Param {
  bool full = true;
  StridedMap expand;
  Reduction fold;
  DeviceBuffer expanded, grad;  // inner floats each, only when !full

  void init(const Shape& shape, const Shape& norm) {
    full = shape.numel() == norm.numel();
    if (full) return;
    expand = broadcast_map(shape, norm);
    fold = fold_to(norm, shape);
    expanded = DeviceBuffer(static_cast<size_t>(norm.numel()) * sizeof(float));
    grad = DeviceBuffer(expanded.bytes());
  }
  const float* values(const Tensor& t) const {
    if (full) return fptr(t);
    strided_gather(t.data(), expanded.get(), numel(), expand, 4, nullptr);
    check_launch("strided_gather (parameter)");
    return expanded.as<float>();
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int k = 0; k < expand.rank; ++k) n *= expand.dims[k];
    return n;
  }
  // Where the kernel writes the per-position gradient: the output itself when full.
  float* grad_target(Tensor& g) const { return full ? fptr(g) : grad.as<float>(); }
  void finish(Tensor& g) const {
    if (!full) run_sum(grad.as<float>(), fptr(g), fold);
  }
};

class LayerNormOp : public CudaOp {
 public:
  explicit LayerNormOp(const OpSpec& s) : CudaOp(s) {
    refuse_if(s.attrs.get_int("stash_type", 1) != 1, "stash_type {} (double statistics) is not supported",
              s.attrs.get_int("stash_type", 1));
    const Shape& x = s.inputs[0].shape;
    const size_t axis = axis_index(s.attrs.get_int("axis", -1), x.rank());
    epsilon_ = s.attrs.get_float("epsilon", 1e-5);
    for (size_t k = 0; k < x.rank(); ++k) (k < axis ? rows_ : inner_) *= x[k];
    const Shape norm(std::vector<int64_t>(x.dims().begin() + static_cast<ptrdiff_t>(axis), x.dims().end()));
    scale_.init(s.inputs[1].shape, norm);
    if (has_bias()) bias_.init(s.inputs[2].shape, norm);
    const auto row_doubles = static_cast<size_t>(rows_) * sizeof(double);
    mean_ = DeviceBuffer(row_doubles);
    invstd_ = DeviceBuffer(row_doubles);
    chunks_ = std::min<int64_t>(rows_, 64);
    partial_ = DeviceBuffer(static_cast<size_t>(2 * std::max<int64_t>(chunks_, 1) * inner_) * sizeof(double));
    spare_ = DeviceBuffer(static_cast<size_t>(inner_) * sizeof(float));
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const float* scale = scale_.values(in[1]);
    const float* bias = has_bias() ? bias_.values(in[2]) : nullptr;
    layer_norm_forward(fptr(in[0]), scale, bias, fptr(out[0]), fptr(out[1]), fptr(out[2]), mean_.as<double>(),
                       invstd_.as<double>(), rows_, inner_, epsilon_, nullptr);
    check_launch("layer_norm_forward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    const float* dy = defined(gy, 0) ? fptr(gy[0]) : nullptr;
    if (defined(gx, 0)) {
      const float* dmean = defined(gy, 1) ? fptr(gy[1]) : nullptr;
      const float* dinv = defined(gy, 2) ? fptr(gy[2]) : nullptr;
      layer_norm_backward_x(fptr(in[0]), dy, scale_.values(in[1]), mean_.as<double>(), invstd_.as<double>(), dmean,
                            dinv, fptr(gx[0]), rows_, inner_, nullptr);
      check_launch("layer_norm_backward_x");
    }
    const bool want_scale = defined(gx, 1), want_bias = has_bias() && defined(gx, 2);
    if (!want_scale && !want_bias) return;
    if (!dy) {  // no upstream gradient of Y: the parameters get none
      for (size_t k = 1; k < 3; ++k)
        if (defined(gx, k)) zero_tensor(gx[k]);
      return;
    }
    float* dscale = want_scale ? scale_.grad_target(gx[1]) : nullptr;
    float* dbias = want_bias ? bias_.grad_target(gx[2]) : nullptr;
    // The kernel writes both sums; an unwanted one lands in scratch.
    if (!dscale) dscale = spare_.as<float>();
    if (!dbias) dbias = spare_.as<float>();
    layer_norm_backward_params(fptr(in[0]), dy, mean_.as<double>(), invstd_.as<double>(), partial_.as<double>(),
                               dscale, dbias, rows_, inner_, chunks_, nullptr);
    check_launch("layer_norm_backward_params");
    if (want_scale) scale_.finish(gx[1]);
    if (want_bias) bias_.finish(gx[2]);
  }

 private:
  bool has_bias() const { return spec_.has_input(2); }
  static bool defined(std::span<const Tensor> ts, size_t i) {
    return i < ts.size() && ts[i].defined() && ts[i].numel() > 0;
  }

  double epsilon_ = 1e-5;
  int64_t rows_ = 1, inner_ = 1, chunks_ = 0;
  Param scale_, bias_;
  DeviceBuffer mean_, invstd_, partial_, spare_;
};

}  // namespace

void register_layer_norm_op(OpRegistry& r) {
  add_op(
      r, "LayerNormalization",
      [](const OpSpec& s) -> std::unique_ptr<Operator> { return std::make_unique<LayerNormOp>(s); },
      {.backward = true,
       .notes = "f32, stash_type 1; statistics and sums in double; Scale and B may broadcast"});
}

}  // inline namespace movement
}  // namespace d5::cuda
