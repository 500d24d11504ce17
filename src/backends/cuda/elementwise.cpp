// Unary and broadcast binary element-wise operators on the backend's own kernels
// (elementwise_kernels.cu), forward and backward. A binary op's gradient for an input it
// broadcast is computed per output element and summed back over the broadcast axes.
#include <cmath>
#include <limits>

#include "cuda_common.h"
#include "deep500/spi/shape_rules.h"
#include "elementwise_kernels.h"

namespace d5::cuda {

namespace {

using kernels::Binary;
using kernels::Unary;
using kernels::UnaryParams;

struct UnaryDef {
  const char* type;
  Unary op;
  void (*parse)(const OpSpec&, UnaryParams&);
};

float attr_f(const OpSpec& s, const char* name, double def) { return static_cast<float>(s.attrs.get_float(name, def)); }

void no_params(const OpSpec&, UnaryParams&) {}

const UnaryDef kUnary[] = {
    {"Relu", Unary::Relu, no_params},
    {"LeakyRelu", Unary::LeakyRelu, [](const OpSpec& s, UnaryParams& p) { p.alpha = attr_f(s, "alpha", 0.01); }},
    {"Sigmoid", Unary::Sigmoid, no_params},
    {"Tanh", Unary::Tanh, no_params},
    {"Elu", Unary::Elu, [](const OpSpec& s, UnaryParams& p) { p.alpha = attr_f(s, "alpha", 1.0); }},
    {"Selu", Unary::Selu,
     [](const OpSpec& s, UnaryParams& p) {
       p.alpha = attr_f(s, "alpha", 1.67326319217681884);
       p.gamma = attr_f(s, "gamma", 1.05070102214050293);
     }},
    {"Gelu", Unary::Gelu, no_params},
    {"Softplus", Unary::Softplus, no_params},
    {"Erf", Unary::Erf, no_params},
    {"Mish", Unary::Mish, no_params},
    {"HardSigmoid", Unary::HardSigmoid,
     [](const OpSpec& s, UnaryParams& p) {
       p.alpha = attr_f(s, "alpha", 0.2);
       p.beta = attr_f(s, "beta", 0.5);
     }},
    {"HardSwish", Unary::HardSwish, no_params},
    {"Sqrt", Unary::Sqrt, no_params},
    {"Exp", Unary::Exp, no_params},
    {"Log", Unary::Log, no_params},
    {"Neg", Unary::Neg, no_params},
    {"Abs", Unary::Abs, no_params},
    {"Reciprocal", Unary::Reciprocal, no_params},
    {"Clip", Unary::Clip,
     [](const OpSpec& s, UnaryParams& p) {  // opset < 11: attributes; later: inputs 1 and 2
       p.lo = attr_f(s, "min", -std::numeric_limits<double>::infinity());
       p.hi = attr_f(s, "max", std::numeric_limits<double>::infinity());
     }},
};

class UnaryOp : public CudaOp {
 public:
  UnaryOp(const OpSpec& s, const UnaryDef& def) : CudaOp(s), def_(def) {
    def.parse(s, params_);
    op_ = def.op;
    if (op_ == Unary::Gelu && s.attrs.get_string("approximate", "none") == "tanh") op_ = Unary::GeluTanh;
  }

  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    kernels::unary_forward(op_, bounds(in), fptr(in[0]), fptr(out[0]), in[0].numel(), nullptr);
    check_launch(def_.type);
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) return zero_gradients(gx);
    kernels::unary_backward(op_, bounds(in), fptr(in[0]), fptr(out[0]), fptr(gy[0]), fptr(gx[0]), in[0].numel(),
                            nullptr);
    check_launch(def_.type);
  }

 private:
  // Clip's bounds from opset 11 are inputs: taken from the spec when known at creation, else read
  // from the device (a synchronising copy of one scalar each).
  UnaryParams bounds(std::span<const Tensor> in) const {
    UnaryParams p = params_;
    if (op_ != Unary::Clip) return p;
    auto bound = [&](size_t i, float& v) {
      if (!spec_.has_input(i) || i >= in.size() || !in[i].defined()) return;
      D5_CHECK_ARG(in[i].numel() == 1, "{}: bound (input {}) must be a scalar, got shape {}", spec_.label(), i,
                   in[i].shape().to_string());
      if (const Tensor* known = spec_.value(i)) {
        v = static_cast<float>(known->get(0));
        return;
      }
      check_cuda(cudaMemcpy(&v, in[i].data(), sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy (Clip bound)");
    };
    bound(1, p.lo);
    bound(2, p.hi);
    return p;
  }

  const UnaryDef& def_;
  Unary op_;
  UnaryParams params_;
};

// The two inputs' element strides aligned to the output (0 along broadcast axes).
kernels::Broadcast broadcast_of(const Shape& out, const Shape& a, const Shape& b) {
  kernels::Broadcast bc;
  const int rank = static_cast<int>(out.rank());
  refuse_if(rank > kernels::kMaxRank, "rank {} is above the kernels' {}", rank, kernels::kMaxRank);
  bc.rank = rank;
  auto strides = [&](const Shape& s, int64_t* dst) {
    int64_t stride = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const int ks = k - (rank - static_cast<int>(s.rank()));
      const int64_t d = ks >= 0 ? s[ks] : 1;
      dst[k] = d == 1 ? 0 : stride;
      stride *= d;
    }
  };
  for (int k = 0; k < rank; ++k) bc.dims[k] = out[k];
  strides(a, bc.a_strides);
  strides(b, bc.b_strides);
  return bc;
}

// `s` with leading ones up to `rank`.
std::vector<int64_t> aligned_dims(const Shape& s, size_t rank) {
  std::vector<int64_t> d(rank, 1);
  for (size_t k = 0; k < s.rank(); ++k) d[rank - s.rank() + k] = s[k];
  return d;
}

class BinaryOp : public CudaOp {
 public:
  // The kernels index inputs through their effective shapes (binary_shapes: a legacy opset < 7 B
  // aligned at 'axis'), which hold the same elements in the same order as the real ones.
  BinaryOp(const OpSpec& s, Binary op) : CudaOp(s), op_(op), shapes_(binary_shapes(s, true)) {
    bc_ = broadcast_of(shapes_.out, shapes_.in[0], shapes_.in[1]);
    const int64_t n = shapes_.out.numel();
    // Per-element gradients go straight to an input of the output's shape, else through scratch.
    for (int i = 0; i < 2; ++i)
      if (shapes_.in[i] != shapes_.out && n > 0) scratch_[i] = DeviceBuffer(static_cast<size_t>(n) * sizeof(float));
  }

  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    kernels::binary_forward(op_, bc_, fptr(in[0]), fptr(in[1]), fptr(out[0]), out[0].numel(), op_stream());
    check_launch(spec_.type.c_str());
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    // No upstream gradient, or no output elements (a sum over nothing): zeros.
    if (!gy[0].defined() || out[0].numel() == 0) return zero_gradients(gx);
    float* full[2] = {nullptr, nullptr};
    for (int i = 0; i < 2; ++i)
      if (gx[i].defined()) full[i] = scratch_[i].get() ? scratch_[i].as<float>() : fptr(gx[i]);
    const int64_t n = out[0].numel();
    kernels::binary_backward(op_, bc_, fptr(in[0]), fptr(in[1]), fptr(out[0]), fptr(gy[0]), full[0], full[1], n, op_stream());
    check_launch(spec_.type.c_str());
    const size_t rank = out[0].shape().rank();
    const auto out_dims = aligned_dims(out[0].shape(), rank);
    for (int i = 0; i < 2; ++i) {
      if (!full[i] || !scratch_[i].get()) continue;
      const auto dims = aligned_dims(shapes_.in[i], rank);
      kernels::sum_to_shape(full[i], out_dims.data(), fptr(gx[i]), dims.data(), static_cast<int>(rank), nullptr);
      check_launch("sum_to_shape");
    }
  }

 private:
  Binary op_;
  BinaryShapes shapes_;
  kernels::Broadcast bc_;
  DeviceBuffer scratch_[2];
};

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  for (const auto& def : kUnary)
    add_op(
        r, def.type, [&def](const OpSpec& s) { return std::make_unique<UnaryOp>(s, def); },
        {.backward = true, .notes = "f32; own kernel"});
  const std::pair<const char*, Binary> binary[] = {
      {"Add", Binary::Add}, {"Sub", Binary::Sub}, {"Mul", Binary::Mul}, {"Div", Binary::Div}, {"Pow", Binary::Pow}};
  for (const auto& [type, op] : binary)
    add_op(
        r, type, [op](const OpSpec& s) { return std::make_unique<BinaryOp>(s, op); },
        {.backward = true, .notes = "f32, NumPy broadcasting up to rank 8; own kernel"});
}

}  // namespace d5::cuda
