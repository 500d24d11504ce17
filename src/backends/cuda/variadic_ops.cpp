// The variadic element-wise operators Sum, Mean (f32, summed in double in input order), Max and
// Min (numeric dtypes; NaN wins; the first input attaining the extreme takes the gradient), with
// NumPy broadcasting and gradients summed back over broadcast axes; ArgMax / ArgMin; and CumSum.
// All on the backend's own kernels (dtype_kernels.cu) and the reference's semantics
// (reference/ops/variadic.cpp, selection.cpp, cumsum.cpp).
#include "cuda_dims.h"
#include "dtype_refusal.h"

namespace d5::cuda {

namespace {

enum class Variadic { sum, mean, max, min };

class VariadicOp : public CudaOp {
 public:
  VariadicOp(const OpSpec& s, Variadic kind) : CudaOp(s), kind_(kind) {
    const DType t = s.inputs[0].dtype;
    if (summing())
      refuse_dtype(t, {DType::f32}, "input 0");
    else
      refuse_dtype(t, {DType::f32, DType::f64, DType::i8, DType::i16, DType::i32, DType::i64, DType::u8}, "input 0");
    refuse_if(s.inputs.size() > 0x7fffffff, "{} inputs are too many", s.inputs.size());
    if (t != DType::f32) forward_only(fmt::format("gradients are computed for f32 only; the inputs are {}", to_string(t)));
    const Shape& out = sem_.outputs[0].shape;
    n_ = out.numel();
    for (const auto& d : s.inputs) {
      maps_.push_back(broadcast_map(d.shape, out));
      folds_.push_back(d.shape.numel() == n_ ? Reduction{} : fold_to(out, d.shape));
    }
    const auto count = static_cast<size_t>(n_);
    if (summing()) acc_ = DeviceBuffer(count * sizeof(double));
    if (t == DType::f32) {  // the gradient's scratch
      full_ = DeviceBuffer(count * sizeof(float));
      if (!summing()) {
        best_ = DeviceBuffer(count * sizeof(float));
        winner_ = DeviceBuffer(count * sizeof(int32_t));
      }
    }
  }

  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (summing()) {
      for (size_t k = 0; k < in.size(); ++k)
        accumulate_f32(fptr(in[k]), maps_[k], acc_.as<double>(), k == 0, n_, op_stream());
      const double divisor = kind_ == Variadic::mean ? static_cast<double>(in.size()) : 1.0;
      divide_f32(acc_.as<double>(), divisor, fptr(out[0]), n_, op_stream());
    } else {
      select_all(in, out[0].data(), nullptr);
    }
    check_launch(spec_.type.c_str());
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined() || n_ == 0) return zero_gradients(gx);
    float* full = full_.as<float>();
    if (summing()) {
      const double scale = kind_ == Variadic::mean ? 1.0 / static_cast<double>(in.size()) : 1.0;
      scale_f32(fptr(gy[0]), scale, full, n_, op_stream());
      check_launch("scale_f32");
    } else {
      select_all(in, best_.get(), winner_.as<int32_t>());
      check_launch(spec_.type.c_str());
    }
    for (size_t k = 0; k < gx.size(); ++k) {
      if (!gx[k].defined() || gx[k].numel() == 0) continue;
      const bool same = gx[k].numel() == n_;
      if (summing()) {
        if (same)
          copy_device(gx[k].data(), full, gx[k].bytes());
        else
          run_sum(full, fptr(gx[k]), folds_[k]);
        continue;
      }
      route_f32(fptr(gy[0]), winner_.as<int32_t>(), static_cast<int>(k), same ? fptr(gx[k]) : full, n_, op_stream());
      check_launch("route_f32");
      if (!same) run_sum(full, fptr(gx[k]), folds_[k]);
    }
  }

 private:
  bool summing() const { return kind_ == Variadic::sum || kind_ == Variadic::mean; }

  void select_all(std::span<const Tensor> in, void* best, int32_t* winner) const {
    for (size_t k = 0; k < in.size(); ++k)
      select_step(elem_of(in[k].dtype()), kind_ == Variadic::max, static_cast<int>(k), in[k].data(), maps_[k], best,
                  winner, n_, op_stream());
  }

  Variadic kind_;
  int64_t n_ = 0;
  std::vector<StridedMap> maps_;
  std::vector<Reduction> folds_;  // per input: summing the output's shape back to it (unused when equal)
  DeviceBuffer acc_, full_, best_, winner_;
};

class ArgExtremeOp : public CudaOp {
 public:
  ArgExtremeOp(const OpSpec& s, bool max) : CudaOp(s), max_(max) {
    refuse_dtype(s.inputs[0].dtype, {DType::f32, DType::f64, DType::i8, DType::i16, DType::i32, DType::i64, DType::u8},
                 "input 0");
    const Shape& x = s.inputs[0].shape;
    const size_t axis = axis_index(s.attrs.get_int("axis", 0), x.rank());
    last_ = s.attrs.get_int("select_last_index", 0) != 0;
    for (size_t d = 0; d < x.rank(); ++d) (d < axis ? outer_ : d > axis ? inner_ : n_) *= x[d];
  }
  std::string implementation() const override { return "cuda:kernel"; }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (out[0].numel() == 0) return;
    arg_extreme(elem_of(in[0].dtype()), max_, last_, in[0].data(), static_cast<int64_t*>(out[0].data()), outer_, n_,
                inner_, op_stream());
    check_launch(spec_.type.c_str());
  }

 private:
  bool max_, last_ = false;
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
};

class CumSumOp : public CudaOp {
 public:
  explicit CumSumOp(const OpSpec& s) : CudaOp(s) {
    refuse_dtype(s.inputs[0].dtype, {DType::f32, DType::f64, DType::i32, DType::i64}, "x");
    exclusive_ = s.attrs.get_int("exclusive", 0) != 0;
    reverse_ = s.attrs.get_int("reverse", 0) != 0;
  }
  std::string implementation() const override { return "cuda:kernel"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    scan(in[0], out[0], axis_of(in[1]), reverse_);
  }

  // dx = the same scan of the upstream gradient run the other way.
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined()) return;
    if (!gy[0].defined()) return zero_tensor(gx[0]);
    scan(gy[0], gx[0], axis_of(in[1]), !reverse_);
  }

 private:
  // The axis input: from the spec when known at creation, else read from the device (a
  // synchronising copy of one value); InvalidArgument outside [-rank, rank), as the reference.
  int64_t axis_of(const Tensor& t) const {
    int64_t a = 0;
    if (const Tensor* known = spec_.value(1)) {
      a = static_cast<int64_t>(known->get(0));
    } else if (t.dtype() == DType::i64) {
      check_cuda(cudaMemcpy(&a, t.data(), sizeof a, cudaMemcpyDeviceToHost), "cudaMemcpy (CumSum axis)");
    } else {
      int32_t v = 0;
      check_cuda(cudaMemcpy(&v, t.data(), sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy (CumSum axis)");
      a = v;
    }
    const auto rank = static_cast<int64_t>(spec_.inputs[0].shape.rank());
    D5_CHECK_ARG(a >= -rank && a < rank, "{}: axis {} is out of range for rank {}", spec_.label(), a, rank);
    return a < 0 ? a + rank : a;
  }

  void scan(const Tensor& x, Tensor& y, int64_t axis, bool reverse) const {
    const Shape& s = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
    cumsum(elem_of(x.dtype()), x.data(), y.data(), outer, s[static_cast<size_t>(axis)], inner, exclusive_, reverse, op_stream());
    check_launch("CumSum");
  }

  bool exclusive_ = false, reverse_ = false;
};

}  // namespace

void register_variadic_ops(OpRegistry& r) {
  static constexpr std::pair<const char*, Variadic> kOps[] = {
      {"Sum", Variadic::sum}, {"Mean", Variadic::mean}, {"Max", Variadic::max}, {"Min", Variadic::min}};
  for (const auto& [type, kind] : kOps) {
    const bool summing = kind == Variadic::sum || kind == Variadic::mean;
    add_op(
        r, type, [kind](const OpSpec& s) { return std::make_unique<VariadicOp>(s, kind); },
        {.backward = true,
         .any_dtype = true,
         .notes = summing ? "f32, summed in double in input order; NumPy broadcasting up to rank 8; own kernel"
                          : "f32, f64, i8, i16, i32, i64, u8 (gradient f32); NumPy broadcasting up to rank 8; "
                            "own kernel"});
  }
  for (const bool max : {true, false})
    add_op(
        r, max ? "ArgMax" : "ArgMin", [max](const OpSpec& s) { return std::make_unique<ArgExtremeOp>(s, max); },
        {.any_dtype = true, .notes = "f32, f64, i8, i16, i32, i64, u8; one thread per output; own kernel"});
  add_op(
      r, "CumSum", [](const OpSpec& s) { return std::make_unique<CumSumOp>(s); },
      {.backward = true,
       .any_dtype = true,
       .notes = "f32, f64, i32, i64 (floats summed in double); an axis not known at creation is read from the "
                "device; one thread per line; own kernel"});
}

}  // namespace d5::cuda
