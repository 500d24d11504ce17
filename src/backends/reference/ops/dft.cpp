// DFT and STFT, ONNX's forms (opsets 17 and 20). A signal's last axis holds its values as 1
// (real) or 2 (real, imaginary) numbers; outputs are always complex (last axis 2). With N points
// and sigma = -1 (forward) or +1 (inverse, which also divides by N):
//   X[k] = c * sum over n < N of x[n] e^(sigma 2 pi i k n / N),   c = 1 or 1/N,  k < bins
// where bins = N, or N/2 + 1 when `onesided` keeps the non-redundant half of a real signal's
// spectrum. DFT: along `axis` (the attribute before opset 20, 1 = the first axis after the batch;
// input 2 from opset 20, -2 = the last signal axis: spi/shape_rules.h's dft_axis), N = dft_length
// (input 1; the signal is cut or zero-padded to it) or the axis' extent. STFT: signal
// [batch, length, 1|2], frames of frame_length points every frame_step points, each multiplied by
// `window` (input 2; its length is frame_length when both are given) and transformed, output
// [batch, frames, bins, 2].
// The transforms are computed directly (O(N^2) per lane, in double, angles reduced mod N), which
// makes the reference easy to check rather than fast.
// Gradients: both are linear in the signal, so d x is the adjoint transform of the output
// gradient (written out in dft_adjoint); STFT's window gradient is sum over frames of the
// signal times the adjoint of that frame.
#include <cmath>
#include <numbers>

#include "movement_common.h"

namespace d5::reference {

namespace {

// One transform: N points, `bins` outputs, forward or inverse; cos/sin of 2 pi m / N tabled.
class DftPlan {
 public:
  DftPlan(int64_t n, int64_t bins, bool inverse) : n_(n), bins_(bins), sigma_(inverse ? 1 : -1) {
    scale_ = inverse ? 1.0 / static_cast<double>(n) : 1.0;
    cos_.resize(static_cast<size_t>(n));
    sin_.resize(static_cast<size_t>(n));
    for (int64_t m = 0; m < n; ++m) {
      const double a = 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
      cos_[static_cast<size_t>(m)] = std::cos(a);
      sin_[static_cast<size_t>(m)] = sigma_ * std::sin(a);
    }
  }
  int64_t points() const { return n_; }
  int64_t bins() const { return bins_; }

  // X = transform of (re, im) [used <= N points; the rest are zeros]; out_re/out_im [bins].
  void forward(const double* re, const double* im, int64_t used, double* out_re, double* out_im) const {
    for (int64_t k = 0; k < bins_; ++k) {
      double sr = 0, si = 0;
      for (int64_t n = 0; n < used; ++n) {
        const size_t m = static_cast<size_t>((k * n) % n_);
        const double a = re[n], b = im ? im[n] : 0.0;
        sr += a * cos_[m] - b * sin_[m];
        si += a * sin_[m] + b * cos_[m];
      }
      out_re[k] = scale_ * sr;
      out_im[k] = scale_ * si;
    }
  }

  // The adjoint: d re[n], d im[n] (n < used) from d X (g_re, g_im [bins]).
  void adjoint(const double* g_re, const double* g_im, int64_t used, double* d_re, double* d_im) const {
    for (int64_t n = 0; n < used; ++n) {
      double sr = 0, si = 0;
      for (int64_t k = 0; k < bins_; ++k) {
        const size_t m = static_cast<size_t>((k * n) % n_);
        sr += g_re[k] * cos_[m] + g_im[k] * sin_[m];
        si += -g_re[k] * sin_[m] + g_im[k] * cos_[m];
      }
      d_re[n] = scale_ * sr;
      if (d_im) d_im[n] = scale_ * si;
    }
  }

  double flops_per_lane(bool complex_input) const {
    return static_cast<double>(bins_ * n_) * (complex_input ? 8 : 4);
  }

 private:
  int64_t n_, bins_;
  double sigma_, scale_ = 1;
  std::vector<double> cos_, sin_;
};

void check_signal(const OpSpec& spec, size_t min_rank) {
  const TensorDesc& x = spec.inputs[0];
  dispatch_float(x.dtype, spec, []<typename T>() {});
  D5_CHECK_ARG(x.shape.rank() >= min_rank && (x.shape[x.shape.rank() - 1] == 1 || x.shape[x.shape.rank() - 1] == 2),
               "{}: the signal must be [batch, ..., 1 (real) or 2 (complex)] of rank >= {}, got {}", spec.label(),
               min_rank, x.shape.to_string());
}

// A known positive integer scalar input (dft_length, frame_step, frame_length).
int64_t positive_constant(const OpSpec& spec, size_t i, std::string_view what) {
  const std::vector<int64_t> v = int_values(constant_input(spec, i, what), spec, what);
  D5_CHECK_ARG(v.size() == 1 && v[0] >= 1, "{}: {} must be one positive integer, got {}", spec.label(), what,
               dims_str(v));
  return v[0];
}

bool onesided_of(const OpSpec& spec, int64_t default_value, bool complex_input, bool inverse) {
  const bool onesided = spec.attrs.get_int("onesided", default_value) != 0;
  D5_CHECK_ARG(!onesided || (!complex_input && !inverse),
               "{}: onesided=1 keeps half of a real signal's forward spectrum; this one is {}", spec.label(),
               inverse ? "an inverse transform" : "complex");
  return onesided;
}

class DftOp : public ReferenceOp {
 public:
  DftOp(const OpSpec& spec, size_t axis, DftPlan plan)
      : ReferenceOp(spec, outputs_of(spec, axis, plan.bins())), plan_(std::move(plan)) {
    const auto& d = spec.inputs[0].shape.dims();
    outer_ = product(d, 0, axis);
    extent_ = d[axis];
    inner_ = product(d, axis + 1, d.size() - 1);
    parts_ = d.back();
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* x = in[0].data_as<T>();
      T* y = out[0].data_as<T>();
      for_each_lane([&](int64_t o, int64_t i, std::vector<double>& a, std::vector<double>& b) {
        for (int64_t n = 0; n < used(); ++n) {
          const int64_t at = ((o * extent_ + n) * inner_ + i) * parts_;
          a[static_cast<size_t>(n)] = static_cast<double>(x[at]);
          b[static_cast<size_t>(n)] = parts_ == 2 ? static_cast<double>(x[at + 1]) : 0.0;
        }
        std::vector<double> re(static_cast<size_t>(plan_.bins())), im(re.size());
        plan_.forward(a.data(), b.data(), used(), re.data(), im.data());
        for (int64_t k = 0; k < plan_.bins(); ++k) {
          const int64_t at = ((o * plan_.bins() + k) * inner_ + i) * 2;
          y[at] = static_cast<T>(re[static_cast<size_t>(k)]);
          y[at + 1] = static_cast<T>(im[static_cast<size_t>(k)]);
        }
      });
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    std::vector<bool> m(spec_.inputs.size(), false);  // dft_length has none
    m[0] = true;
    return m;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    gx[0].fill(0);  // points past dft_length (cut off) get none
    if (!gy[0].defined()) return;
    dispatch_float(gy[0].dtype(), spec_, [&]<typename T>() {
      const T* g = gy[0].data_as<T>();
      T* d = gx[0].data_as<T>();
      for_each_lane([&](int64_t o, int64_t i, std::vector<double>& a, std::vector<double>& b) {
        std::vector<double> g_re(static_cast<size_t>(plan_.bins())), g_im(g_re.size());
        for (int64_t k = 0; k < plan_.bins(); ++k) {
          const int64_t at = ((o * plan_.bins() + k) * inner_ + i) * 2;
          g_re[static_cast<size_t>(k)] = static_cast<double>(g[at]);
          g_im[static_cast<size_t>(k)] = static_cast<double>(g[at + 1]);
        }
        plan_.adjoint(g_re.data(), g_im.data(), used(), a.data(), b.data());
        for (int64_t n = 0; n < used(); ++n) {
          const int64_t at = ((o * extent_ + n) * inner_ + i) * parts_;
          d[at] = static_cast<T>(a[static_cast<size_t>(n)]);
          if (parts_ == 2) d[at + 1] = static_cast<T>(b[static_cast<size_t>(n)]);
        }
      });
    });
  }

  double flops() const override { return static_cast<double>(outer_ * inner_) * plan_.flops_per_lane(parts_ == 2); }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& spec, size_t axis, int64_t bins) {
    std::vector<int64_t> d = spec.inputs[0].shape.dims();
    d[axis] = bins;
    d.back() = 2;
    return {TensorDesc{spec.inputs[0].dtype, Shape(d)}};
  }

  int64_t used() const { return std::min(extent_, plan_.points()); }

  // f(outer index, inner index, scratch a, scratch b) for every transformed lane.
  template <typename F>
  void for_each_lane(F&& f) const {
    std::vector<double> a(static_cast<size_t>(plan_.points())), b(a.size());
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < inner_; ++i) f(o, i, a, b);
  }

  DftPlan plan_;
  int64_t outer_ = 0, extent_ = 0, inner_ = 0, parts_ = 1;
};

std::unique_ptr<Operator> make_dft(const OpSpec& spec) {
  check_input_count(spec, 1, spec.opset >= 20 ? 3 : 2);
  check_signal(spec, spec.opset >= 20 ? 2 : 3);
  const size_t rank = spec.inputs[0].shape.rank();
  const size_t axis = dft_axis(spec);
  const bool inverse = spec.attrs.get_int("inverse", 0) != 0;
  const bool onesided = onesided_of(spec, 0, spec.inputs[0].shape[rank - 1] == 2, inverse);
  const int64_t n =
      spec.has_input(1) ? positive_constant(spec, 1, "dft_length") : spec.inputs[0].shape[static_cast<size_t>(axis)];
  D5_CHECK_ARG(n >= 1, "{}: the signal has no points along axis {}", spec.label(), axis);
  return std::make_unique<DftOp>(spec, axis, DftPlan(n, onesided ? n / 2 + 1 : n, inverse));
}

class StftOp : public ReferenceOp {
 public:
  StftOp(const OpSpec& spec, int64_t step, int64_t frames, DftPlan plan)
      : ReferenceOp(spec, {TensorDesc{spec.inputs[0].dtype, Shape{spec.inputs[0].shape[0], frames, plan.bins(), 2}}}),
        step_(step), frames_(frames), plan_(std::move(plan)) {
    batch_ = spec.inputs[0].shape[0];
    length_ = spec.inputs[0].shape[1];
    parts_ = spec.inputs[0].shape[2];
    windowed_ = spec.has_input(2);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      T* y = out[0].data_as<T>();
      std::vector<double> re(static_cast<size_t>(plan_.bins())), im(re.size());
      for_each_frame<T>(in, [&](int64_t b, int64_t f, const std::vector<double>& a, const std::vector<double>& c,
                                const std::vector<double>&) {
        plan_.forward(a.data(), c.data(), plan_.points(), re.data(), im.data());
        for (int64_t k = 0; k < plan_.bins(); ++k) {
          const int64_t at = ((b * frames_ + f) * plan_.bins() + k) * 2;
          y[at] = static_cast<T>(re[static_cast<size_t>(k)]);
          y[at + 1] = static_cast<T>(im[static_cast<size_t>(k)]);
        }
      });
    });
  }

  std::vector<bool> differentiable_inputs() const override {
    std::vector<bool> m(spec_.inputs.size(), false);
    m[0] = true;
    if (windowed_) m[2] = true;
    return m;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    const int64_t n = plan_.points();
    std::vector<double> d_signal(static_cast<size_t>(in[0].numel()), 0.0), d_window(static_cast<size_t>(n), 0.0);
    if (gy[0].defined()) {
      dispatch_float(gy[0].dtype(), spec_, [&]<typename T>() {
        const T* g = gy[0].data_as<T>();
        std::vector<double> g_re(static_cast<size_t>(plan_.bins())), g_im(g_re.size()), d_re(static_cast<size_t>(n)),
            d_im(d_re.size());
        // a, c: the windowed frame; raw: the frame before the window (for the window's gradient).
        for_each_frame<T>(in, [&](int64_t b, int64_t f, const std::vector<double>&, const std::vector<double>&,
                                  const std::vector<double>& raw) {
          for (int64_t k = 0; k < plan_.bins(); ++k) {
            const int64_t at = ((b * frames_ + f) * plan_.bins() + k) * 2;
            g_re[static_cast<size_t>(k)] = static_cast<double>(g[at]);
            g_im[static_cast<size_t>(k)] = static_cast<double>(g[at + 1]);
          }
          plan_.adjoint(g_re.data(), g_im.data(), n, d_re.data(), d_im.data());
          for (int64_t j = 0; j < n; ++j) {
            const size_t u = static_cast<size_t>(j);
            const double w = window_[u];
            const int64_t at = (b * length_ + f * step_ + j) * parts_;
            d_signal[static_cast<size_t>(at)] += w * d_re[u];
            if (parts_ == 2) d_signal[static_cast<size_t>(at + 1)] += w * d_im[u];
            d_window[u] += d_re[u] * raw[2 * u] + d_im[u] * raw[2 * u + 1];
          }
        });
      });
    }
    store_doubles(d_signal, gx[0]);
    if (windowed_ && gx[2].defined()) store_doubles(d_window, gx[2]);
  }

  double flops() const override {
    return static_cast<double>(batch_ * frames_) * (plan_.flops_per_lane(parts_ == 2) + static_cast<double>(plan_.points()));
  }

 private:
  // f(batch, frame, windowed real parts, windowed imaginary parts, raw frame as re/im pairs) for
  // every frame; fills window_ (ones without a window input).
  template <typename T, typename F>
  void for_each_frame(std::span<const Tensor> in, F&& f) {
    const int64_t n = plan_.points();
    window_.assign(static_cast<size_t>(n), 1.0);
    if (windowed_) {
      const T* w = in[2].data_as<T>();
      for (int64_t j = 0; j < n; ++j) window_[static_cast<size_t>(j)] = static_cast<double>(w[j]);
    }
    const T* x = in[0].data_as<T>();
    std::vector<double> a(static_cast<size_t>(n)), c(a.size()), raw(2 * a.size());
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t fr = 0; fr < frames_; ++fr) {
        for (int64_t j = 0; j < n; ++j) {
          const size_t u = static_cast<size_t>(j);
          const int64_t at = (b * length_ + fr * step_ + j) * parts_;
          raw[2 * u] = static_cast<double>(x[at]);
          raw[2 * u + 1] = parts_ == 2 ? static_cast<double>(x[at + 1]) : 0.0;
          a[u] = raw[2 * u] * window_[u];
          c[u] = raw[2 * u + 1] * window_[u];
        }
        f(b, fr, a, c, raw);
      }
  }

  int64_t step_, frames_, batch_ = 0, length_ = 0, parts_ = 1;
  bool windowed_ = false;
  DftPlan plan_;
  std::vector<double> window_;
};

std::unique_ptr<Operator> make_stft(const OpSpec& spec) {
  check_input_count(spec, 2, 4);
  check_signal(spec, 3);
  D5_CHECK_ARG(spec.inputs[0].shape.rank() == 3, "{}: the signal must be [batch, length, 1 or 2], got {}",
               spec.label(), spec.inputs[0].shape.to_string());
  const int64_t step = positive_constant(spec, 1, "frame_step");
  int64_t n = spec.has_input(3) ? positive_constant(spec, 3, "frame_length") : 0;
  if (spec.has_input(2)) {
    const TensorDesc& w = spec.inputs[2];
    D5_CHECK_ARG(w.shape.rank() == 1 && w.dtype == spec.inputs[0].dtype,
                 "{}: the window must be 1-D of the signal's dtype ({}), got {}", spec.label(),
                 to_string(spec.inputs[0].dtype), w.to_string());
    D5_CHECK_ARG(n == 0 || n == w.shape[0], "{}: frame_length {} differs from the window's length {}", spec.label(),
                 n, w.shape[0]);
    n = w.shape[0];
  }
  D5_CHECK_ARG(n >= 1, "{}: needs a window or a frame_length to know the frame's length", spec.label());
  const int64_t length = spec.inputs[0].shape[1];
  D5_CHECK_ARG(length >= n, "{}: the signal ({} points) is shorter than one frame ({})", spec.label(), length, n);
  const bool onesided = onesided_of(spec, 1, spec.inputs[0].shape[2] == 2, false);
  return std::make_unique<StftOp>(spec, step, (length - n) / step + 1, DftPlan(n, onesided ? n / 2 + 1 : n, false));
}

}  // namespace

void register_dft_ops(OpRegistry& r) {
  add_op(r, "DFT", true, [](const OpSpec& s) -> OpCreateResult { return make_dft(s); });
  add_op(r, "STFT", true, [](const OpSpec& s) -> OpCreateResult { return make_stft(s); });
}

}  // namespace d5::reference
