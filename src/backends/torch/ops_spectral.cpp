// DFT and STFT on ATen's FFTs (at::fft_fft / fft_ifft / fft_rfft, at::stft). ONNX's signals keep
// real and imaginary parts in a last axis of 2 (or 1 for a real signal); ATen's are complex
// tensors, so kernels view one as the other (view_as_complex / view_as_real) and autograd carries
// the gradients through both views.
#include "deep500/spi/shape_rules.h"
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

// [..., 1] as a real tensor, [..., 2] as a complex one (the last axis dropped).
at::Tensor signal_of(const at::Tensor& x) {
  return x.size(-1) == 2 ? at::view_as_complex(x.contiguous()) : x.select(-1, 0);
}

Built build_dft(const OpSpec& s) {
  const auto axis = static_cast<int64_t>(dft_axis(s));  // the reference checked it
  const bool inverse = s.attrs.get_int("inverse", 0) != 0, onesided = s.attrs.get_int("onesided", 0) != 0;
  // dft_length is a constant (the reference checked it is known and positive).
  std::optional<int64_t> n;
  if (s.has_input(1)) n = s.value(1)->get(0);
  return OpDef{single([=](const TensorList& in) {
                 const at::Tensor x = signal_of(in[0]);
                 const c10::optional<int64_t> len = n ? c10::optional<int64_t>(*n) : c10::nullopt;
                 at::Tensor y = inverse ? at::fft_ifft(x, len, axis)
                                : onesided ? at::fft_rfft(x, len, axis)
                                           : at::fft_fft(x, len, axis);
                 return at::view_as_real(y);
               }),
               inverse ? "at::fft_ifft" : onesided ? "at::fft_rfft" : "at::fft_fft"};
}

Built build_stft(const OpSpec& s) {
  const int64_t step = s.value(1)->get(0);
  const bool onesided = s.attrs.get_int("onesided", 1) != 0;
  // The frame length: the window's, else frame_length's (the reference checked they agree).
  const int64_t n = s.has_input(2) ? s.inputs[2].shape[0] : static_cast<int64_t>(s.value(3)->get(0));
  return OpDef{single([=](const TensorList& in) {
                 const c10::optional<at::Tensor> window =
                     in.size() > 2 && in[2].defined() ? c10::optional<at::Tensor>(in[2]) : c10::nullopt;
                 // [batch, bins, frames] complex, without centering or normalization: ONNX's frames.
                 const at::Tensor y =
                     at::stft(signal_of(in[0]), n, step, n, window, /*normalized=*/false, onesided, /*return_complex=*/true);
                 return at::view_as_real(y.transpose(1, 2));
               }),
               "at::stft"};
}

}  // namespace

void register_spectral_ops(OpRegistry& r) {
  add_torch_op(
      r, "DFT", true, [](const OpSpec& s, const OpSemantics&) { return build_dft(s); },
      "f32, f64; forward, inverse and onesided along any signal axis, dft_length cutting or padding");
  add_torch_op(
      r, "STFT", true, [](const OpSpec& s, const OpSemantics&) { return build_stft(s); },
      "f32, f64; real or complex signals, with or without a window");
}

}  // namespace d5::torch_backend
