// DFT, STFT and MelWeightMatrix on the reference backend: spectra worked out by hand (the DFT of
// [1, 2, 3, 4] is 10, -2+2i, -2, -2-2i), a forward/inverse round trip, finite-difference gradients
// of every mode, and the specs they refuse. ONNX's own cases (test_dft*, test_stft*,
// test_melweightmatrix) run in the conformance suite.
#include <cmath>

#include "op_test_util.h"

namespace d5::test {
namespace {

Tensor f64(const Shape& s, std::initializer_list<double> v) { return Tensor::from_values<double>(s, v); }
Tensor i64(int64_t v) { return Tensor::from_values<int64_t>(Shape{}, {v}); }

// An op whose inputs after the first (all of them with `all_known`) are constants known at
// creation (absent: undefined).
std::unique_ptr<Operator> op_with(const std::string& type, const std::vector<Tensor>& in, Attributes attrs = {},
                                  bool all_known = false, int opset = 17) {
  std::vector<TensorDesc> d;
  std::vector<std::optional<Tensor>> known;
  std::vector<bool> present;
  for (size_t i = 0; i < in.size(); ++i) {
    d.push_back(in[i].defined() ? in[i].desc() : TensorDesc{});
    known.push_back((all_known || i > 0) && in[i].defined() ? std::optional<Tensor>(in[i]) : std::nullopt);
    present.push_back(in[i].defined());
  }
  OpSpec s = spec_of(type, d, std::move(attrs), known);
  s.present = present;
  s.opset = opset;
  return make_op(s);
}
std::vector<double> run(const std::string& type, const std::vector<Tensor>& in, Attributes attrs = {}) {
  return values(op_with(type, in, std::move(attrs))->run_forward(in)[0]);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Dft, SpectraOfASmallSignal) {
  const Tensor x = f64({1, 4, 1}, {1, 2, 3, 4});
  expect_near_all(run("DFT", {x}), {10, 0, -2, 2, -2, 0, -2, -2});
  expect_near_all(run("DFT", {x}, {{"onesided", int64_t{1}}}), {10, 0, -2, 2, -2, 0});
  // dft_length cuts the signal to [1, 2] or pads it with zeros to 6 points.
  expect_near_all(run("DFT", {x, i64(2)}), {3, 0, -1, 0});
  const auto padded = run("DFT", {x, i64(6)});
  ASSERT_EQ(padded.size(), 12u);
  EXPECT_NEAR(padded[2], -3.5, 1e-12);  // X1 = -3.5 - 4.330127i
  EXPECT_NEAR(padded[3], -2.5 * std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(padded[6], -2, 1e-12);  // X3 = 1 - 2 + 3 - 4
  // The inverse (divided by N) of the spectrum is the signal again.
  expect_near_all(run("DFT", {f64({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2})}, {{"inverse", int64_t{1}}}),
                  {1, 0, 2, 0, 3, 0, 4, 0});
}

TEST(Dft, RoundTripAlongEitherAxisAndGradients) {
  const Tensor z = random_tensor(DType::f64, {2, 5, 3, 2}, "dft-z");
  for (int64_t axis : {1, 2}) {
    auto fwd = op_with("DFT", {z}, {{"axis", axis}});
    const Tensor spectrum = fwd->run_forward(std::vector<Tensor>{z})[0];
    auto inv = op_with("DFT", {spectrum}, {{"axis", axis}, {"inverse", int64_t{1}}});
    expect_near_all(values(inv->run_forward(std::vector<Tensor>{spectrum})[0]), values(z));
  }
  const Tensor real = random_tensor(DType::f64, {2, 6, 1}, "dft-r");
  SCOPED_TRACE("gradients");
  expect_gradient_ok(*op_with("DFT", {real}), {real});
  expect_gradient_ok(*op_with("DFT", {real}, {{"onesided", int64_t{1}}}), {real});
  expect_gradient_ok(*op_with("DFT", {real, i64(4)}), {real, i64(4)});
  expect_gradient_ok(*op_with("DFT", {real, i64(9)}, {{"onesided", int64_t{1}}}), {real, i64(9)});
  expect_gradient_ok(*op_with("DFT", {z}, {{"axis", int64_t{2}}, {"inverse", int64_t{1}}}), {z});
}

TEST(Dft, RefusesWhatOnnxDoesNotDefine) {
  const Tensor z = random_tensor(DType::f64, {1, 4, 2}, "dft-bad");
  EXPECT_THROW(op_with("DFT", {z}, {{"onesided", int64_t{1}}}), InvalidArgument);  // complex input
  EXPECT_THROW(op_with("DFT", {random_tensor(DType::f64, {1, 4, 1}, "r")}, {{"onesided", int64_t{1}}, {"inverse", int64_t{1}}}),
               InvalidArgument);
  EXPECT_THROW(op_with("DFT", {z}, {{"axis", int64_t{0}}}), InvalidArgument);  // the batch axis
  EXPECT_THROW(op_with("DFT", {z}, {{"axis", int64_t{2}}}), InvalidArgument);  // the real/imaginary axis
  EXPECT_THROW(op_with("DFT", {random_tensor(DType::f64, {1, 4, 3}, "r")}), InvalidArgument);
  EXPECT_THROW(op_with("DFT", {z, i64(0)}), InvalidArgument);
  EXPECT_THROW(make_op(spec_of("DFT", {z.desc(), i64(4).desc()})), InvalidArgument);  // dft_length unknown
  EXPECT_THROW(op_with("DFT", {random_tensor(DType::f64, {4, 1}, "r")}), InvalidArgument);
}

// Opset 20 moved axis to input 2 (default -2, the last signal axis) and allows the first axis.
TEST(Dft, Opset20TakesTheAxisAsAnInput) {
  const Tensor z = random_tensor(DType::f64, {2, 5, 3, 2}, "dft-z20");
  auto at20 = [&](const std::vector<Tensor>& in, Attributes attrs = {}) {
    return values(op_with("DFT", in, std::move(attrs), false, 20)->run_forward(in)[0]);
  };
  for (int64_t axis : {1, 2}) {
    SCOPED_TRACE(axis);
    const auto want = values(op_with("DFT", {z}, {{"axis", axis}})->run_forward(std::vector<Tensor>{z})[0]);
    expect_near_all(at20({z, Tensor(), i64(axis)}), want);
    expect_near_all(at20({z, Tensor(), i64(axis - 4)}), want);  // -3, -2
  }
  expect_near_all(at20({z}), at20({z, Tensor(), i64(2)}));  // default: -2
  // Axis 0 of a [4, 1] signal: the spectrum of 1, 2, 3, 4.
  expect_near_all(at20({f64({4, 1}, {1, 2, 3, 4}), Tensor(), i64(0)}), {10, 0, -2, 2, -2, 0, -2, -2});
  expect_near_all(at20({f64({4, 1}, {1, 2, 3, 4}), i64(2), i64(0)}), {3, 0, -1, 0});
  expect_gradient_ok(*op_with("DFT", {z, Tensor(), i64(1)}, {}, false, 20), {z, Tensor(), i64(1)});
  EXPECT_THROW(op_with("DFT", {z, Tensor(), i64(3)}, {}, false, 20), InvalidArgument);   // real/imaginary axis
  EXPECT_THROW(op_with("DFT", {z, Tensor(), i64(-1)}, {}, false, 20), InvalidArgument);  // the same
  EXPECT_THROW(op_with("DFT", {z}, {{"axis", int64_t{1}}}, false, 20), InvalidArgument);  // no attribute any more
  EXPECT_THROW(op_with("DFT", {z, Tensor(), i64(1)}), InvalidArgument);  // three inputs before opset 20
}

TEST(Stft, FramesWindowsAndOnesidedSpectra) {
  const Tensor x = f64({1, 8, 1}, {0, 1, 2, 3, 4, 5, 6, 7});
  // Frames [0..3], [2..5], [4..7]: X0 = their sums, X1 = -2+2i and X2 = -2 for each.
  const auto y = run("STFT", {x, i64(2), Tensor(), i64(4)});
  expect_near_all(y, {6, 0, -2, 2, -2, 0, 14, 0, -2, 2, -2, 0, 22, 0, -2, 2, -2, 0});
  // Window [0, 1, 1, 0]: frame 0 becomes [0, 1, 2, 0]: 3, -2-i, 1.
  const auto w = run("STFT", {x, i64(2), f64({4}, {0, 1, 1, 0})});
  expect_near_all(std::vector<double>(w.begin(), w.begin() + 6), {3, 0, -2, -1, 1, 0});
  // Two-sided: all 4 bins per frame.
  EXPECT_EQ(run("STFT", {x, i64(4), Tensor(), i64(4)}, {{"onesided", int64_t{0}}}).size(), 2u * 4 * 2);
}

TEST(Stft, GradientsOfSignalAndWindowAndRefusals) {
  const Tensor x = random_tensor(DType::f64, {2, 9, 1}, "stft-x");
  const Tensor win = random_tensor(DType::f64, {4}, "stft-w");
  expect_gradient_ok(*op_with("STFT", {x, i64(3), win}), {x, i64(3), win});
  expect_gradient_ok(*op_with("STFT", {x, i64(2), Tensor(), i64(5)}), {x, i64(2), Tensor(), i64(5)});
  const Tensor z = random_tensor(DType::f64, {1, 7, 2}, "stft-z");
  expect_gradient_ok(*op_with("STFT", {z, i64(2), win}, {{"onesided", int64_t{0}}}), {z, i64(2), win});
  EXPECT_THROW(op_with("STFT", {z, i64(2), win}), InvalidArgument);  // complex, onesided by default
  EXPECT_THROW(op_with("STFT", {x, i64(2)}), InvalidArgument);       // no frame length
  EXPECT_THROW(op_with("STFT", {x, i64(2), win, i64(5)}), InvalidArgument);
  EXPECT_THROW(op_with("STFT", {x, i64(2), Tensor(), i64(10)}), InvalidArgument);  // longer than the signal
  EXPECT_THROW(op_with("STFT", {x, i64(0), win}), InvalidArgument);
}

TEST(MelWeightMatrix, ATriangleWorkedOutByHand) {
  // One band, 8-point DFT at 8 kHz over [0, 4000] Hz: mel(4000) = 2146.06, step 715.35, edges at
  // 0, 620.8 and 1791.6 Hz, i.e. bins floor(9 f / 8000) = 0, 0, 2: a peak of 1 at bin 0 (empty
  // rising side) falling to 0.5 at bin 1.
  const auto i32 = [](int32_t v) { return Tensor::from_values<int32_t>(Shape{}, {v}); };
  const auto f32 = [](float v) { return Tensor::from_values<float>(Shape{}, {v}); };
  auto op = op_with("MelWeightMatrix", {i32(1), i32(8), i32(8000), f32(0), f32(4000)}, {}, true);
  EXPECT_EQ(op->output_descs()[0], (TensorDesc{DType::f32, Shape{5, 1}}));
  EXPECT_EQ(values(op->run_forward(std::vector<Tensor>{i32(1), i32(8), i32(8000), f32(0), f32(4000)})[0]),
            (std::vector<double>{1, 0.5, 0, 0, 0}));
  EXPECT_FALSE(op->has_gradient());
  const std::vector<Tensor> dbl = {i32(1), i32(8), i32(8000), f32(0), f32(4000)};
  EXPECT_EQ(op_with("MelWeightMatrix", dbl, {{"output_datatype", int64_t{11}}}, true)->output_descs()[0].dtype, DType::f64);
  // Past Nyquist, an empty band, a bad output type.
  EXPECT_THROW(op_with("MelWeightMatrix", {i32(4), i32(8), i32(8000), f32(0), f32(7000)}, {}, true), InvalidArgument);
  EXPECT_THROW(op_with("MelWeightMatrix", {i32(4), i32(8), i32(8000), f32(300), f32(300)}, {}, true),
               InvalidArgument);
  EXPECT_THROW(op_with("MelWeightMatrix", dbl, {{"output_datatype", int64_t{7}}}, true), InvalidArgument);
  EXPECT_THROW(op_with("MelWeightMatrix", dbl), InvalidArgument);  // num_mel_bins unknown
}

}  // namespace
}  // namespace d5::test
