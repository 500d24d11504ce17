// MelWeightMatrix: the [dft_length / 2 + 1, num_mel_bins] matrix that maps a one-sided power
// spectrum to mel bands, ONNX's definition (opset 17, as its reference code computes it):
//   mel(f) = 2595 log10(1 + f / 700),  f(mel) = 700 (10^(mel / 2595) - 1)
//   step = (mel(upper_edge_hertz) - mel(lower_edge_hertz)) / (num_mel_bins + 2)
//   edge b = floor((dft_length + 1) f(mel(lower) + b step) / sample_rate)   for b = 0 .. num_mel_bins + 1
//   band i is a triangle over spectrogram bins from edge i up to edge i+1 (rising from 0 to 1) and
//   down to edge i+2 (falling), each side left out when its edges coincide (a single 1 at the peak
//   when the rising side is empty).
// ONNX divides the mel range into num_mel_bins + 2 steps where the textbook construction uses + 1;
// d5 follows ONNX (the edges in double; ONNX's code rounds the mel endpoints to float first). All inputs are scalars known when the operator is created (they decide the
// output shape); the output is float (output_datatype 1, the default) or double (11). No gradient.
#include <cmath>

#include "movement_common.h"

namespace d5::reference {

namespace {

double scalar_value(const OpSpec& spec, size_t i, std::string_view what) {
  const Tensor& t = constant_input(spec, i, what);
  D5_CHECK_ARG(t.numel() == 1, "{}: {} must be a scalar, got {}", spec.label(), what, t.desc().to_string());
  return t.get(0);
}

int64_t int_scalar(const OpSpec& spec, size_t i, std::string_view what) {
  const std::vector<int64_t> v = int_values(constant_input(spec, i, what), spec, what);
  D5_CHECK_ARG(v.size() == 1, "{}: {} must be a scalar, got {} values", spec.label(), what, v.size());
  return v[0];
}

class MelWeightMatrixOp : public ReferenceOp {
 public:
  MelWeightMatrixOp(const OpSpec& spec, DType out, int64_t bins, std::vector<double> weights)
      : ReferenceOp(spec, {TensorDesc{out, Shape{static_cast<int64_t>(weights.size()) / bins, bins}}}),
        weights_(std::move(weights)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    store_doubles(weights_, out[0]);
  }

  std::string no_gradient_reason() const override {
    return "MelWeightMatrix is built from integer sizes and constant frequencies";
  }

 private:
  std::vector<double> weights_;
};

std::unique_ptr<Operator> make_mel_weight_matrix(const OpSpec& spec) {
  check_input_count(spec, 5, 5);
  const int64_t mel_bins = int_scalar(spec, 0, "num_mel_bins");
  const int64_t dft_length = int_scalar(spec, 1, "dft_length");
  const int64_t sample_rate = int_scalar(spec, 2, "sample_rate");
  const double lower = scalar_value(spec, 3, "lower_edge_hertz"), upper = scalar_value(spec, 4, "upper_edge_hertz");
  D5_CHECK_ARG(mel_bins >= 1 && dft_length >= 1 && sample_rate >= 1,
               "{}: num_mel_bins, dft_length and sample_rate must be positive, got {}, {}, {}", spec.label(), mel_bins,
               dft_length, sample_rate);
  D5_CHECK_ARG(mel_bins <= (int64_t{1} << 20) && dft_length <= (int64_t{1} << 24),
               "{}: {} mel bins of a {}-point DFT is beyond what a weight matrix is for", spec.label(), mel_bins,
               dft_length);
  D5_CHECK_ARG(std::isfinite(lower) && std::isfinite(upper) && 0 <= lower && lower < upper,
               "{}: the band [{}, {}] Hz must satisfy 0 <= lower < upper", spec.label(), lower, upper);
  const int64_t out_code = spec.attrs.get_int("output_datatype", 1);
  D5_CHECK_ARG(out_code == 1 || out_code == 11, "{}: output_datatype {} is not float (1) or double (11)", spec.label(),
               out_code);

  const auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  const double low_mel = mel(lower), step = (mel(upper) - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (size_t b = 0; b < edge.size(); ++b) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(b) * step + low_mel) / 2595) - 1);
    edge[b] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  const int64_t spectrum = dft_length / 2 + 1;
  // An upper edge past the Nyquist frequency (sample_rate / 2) lands past the spectrum's last bin.
  for (int64_t e : edge)
    D5_CHECK_ARG(e >= 0 && e < spectrum, "{}: a band edge falls on bin {}, outside the {} bins of the spectrum",
                 spec.label(), e, spectrum);
  std::vector<double> w(static_cast<size_t>(spectrum * mel_bins), 0.0);
  const auto at = [&](int64_t j, int64_t i) -> double& { return w[static_cast<size_t>(j * mel_bins + i)]; };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t lo = edge[static_cast<size_t>(i)], mid = edge[static_cast<size_t>(i + 1)],
                  hi = edge[static_cast<size_t>(i + 2)];
    if (mid == lo)
      at(mid, i) = 1;
    else
      for (int64_t j = lo; j <= mid; ++j) at(j, i) = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    for (int64_t j = mid; j < hi; ++j) at(j, i) = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
  }
  return std::make_unique<MelWeightMatrixOp>(spec, out_code == 1 ? DType::f32 : DType::f64, mel_bins, std::move(w));
}

}  // namespace

void register_mel_weight_matrix_ops(OpRegistry& r) {
  add_op(r, "MelWeightMatrix", false,
         [](const OpSpec& s) -> OpCreateResult { return make_mel_weight_matrix(s); });
}

}  // namespace d5::reference
