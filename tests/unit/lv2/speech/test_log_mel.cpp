// Unit: the speech front end (src/lv2/speech/log_mel.h) on a bin-centred cosine derived by hand,
// and against torchaudio's MelSpectrogram and MFCC on a chirp in noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>

#include "../../../support/temp_dir.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "lv2/speech/log_mel.h"

namespace d5::speech {
namespace {

#define SKIP_WITHOUT_FFTW()                                                                          \
  if (!front_end_built()) GTEST_SKIP() << "this build has no FFTW (Debian: libfftw3-dev), which the " \
                                          "speech front end needs"

// x(n) = A cos(2 pi k0 n / N) under a periodic Hann window of N = fft samples: the window is
// 1/2 - (e^{2 pi i n/N} + e^{-2 pi i n/N}) / 4, so X(k0) = A N / 4, X(k0 +- 1) = -A N / 8 and every
// other bin is 0. Each mel bin then holds F(k0-1,m) P/4 + F(k0,m) P + F(k0+1,m) P/4, P = (A N/4)^2.
TEST(LogMelFrontEnd, BinCentredCosineGivesTheHandDerivedMelEnergies) {
  SKIP_WITHOUT_FFTW();
  FrontEndOptions o;
  o.window = o.fft = 512;
  o.hop = 512;
  o.mel_bins = 40;
  LogMelFrontEnd fe(o);
  const double a = 0.25;
  const int k0 = 32;
  std::vector<float> x(1024);
  for (size_t n = 0; n < x.size(); ++n)
    x[n] = static_cast<float>(a * std::cos(2 * std::numbers::pi * k0 * static_cast<double>(n) / 512.0));
  ASSERT_EQ(fe.frames(1024), 2);
  std::vector<float> out(2 * 40);
  fe.compute(x, out);
  const double p = std::pow(a * 512 / 4, 2);
  const auto& f = fe.filter_bank();
  int lit = 0;
  for (int m = 0; m < 40; ++m) {
    const double mel = f[static_cast<size_t>((k0 - 1) * 40 + m)] * p / 4 + f[static_cast<size_t>(k0 * 40 + m)] * p +
                       f[static_cast<size_t>((k0 + 1) * 40 + m)] * p / 4;
    lit += mel > 1;
    for (int t = 0; t < 2; ++t) EXPECT_NEAR(out[static_cast<size_t>(t * 40 + m)], std::log(mel + 1e-6), 2e-4) << m;
  }
  EXPECT_GE(lit, 1);  // the cosine falls under at least one triangle
}

TEST(LogMelFrontEnd, CountsFramesAsStftWithoutCentring) {
  SKIP_WITHOUT_FFTW();
  LogMelFrontEnd fe({});
  EXPECT_EQ(fe.frames(16000), 49);  // 1 + (16000 - 512) / 320
  EXPECT_EQ(fe.frames(512), 1);
  EXPECT_EQ(fe.frames(511), 0);
  std::vector<float> x(16000), small(10);
  EXPECT_THROW(fe.compute(x, small), InvalidArgument);
}

TEST(LogMelFrontEnd, RefusesImpossibleOptions) {
  SKIP_WITHOUT_FFTW();
  auto with = [](auto change) {
    FrontEndOptions o;
    change(o);
    return o;
  };
  EXPECT_THROW(LogMelFrontEnd(with([](auto& o) { o.window = 600; })), InvalidArgument);
  EXPECT_THROW(LogMelFrontEnd(with([](auto& o) { o.fft = 511; })), InvalidArgument);
  EXPECT_THROW(LogMelFrontEnd(with([](auto& o) { o.mel_bins = 300; })), InvalidArgument);
  EXPECT_THROW(LogMelFrontEnd(with([](auto& o) { o.mfcc = 41; })), InvalidArgument);
  EXPECT_THROW(LogMelFrontEnd(with([](auto& o) { o.hop = 0; })), InvalidArgument);
}

// torchaudio 0.13 (Debian python3-torchaudio) as the oracle. Tolerances: both sides compute in
// float32 with different FFTs and summation orders (torchaudio's filter bank from float32
// linspaces); the measured largest differences were 3.0e-6 (filter bank), 7.4e-5 (log-mel) and
// 2.6e-5 (MFCC); the bounds are ten times those or more. Wrong definitions fail by far more:
// a symmetric Hann window instead of the periodic one moves log-mel by 0.053 and MFCCs by 0.027
// (and the hand-derived cosine case by 0.025).
TEST(LogMelFrontEnd, EqualsTorchaudio) {
  SKIP_WITHOUT_FFTW();
  const std::string python = D5_PYTHON_FOR_TESTS;
  if (std::system((python + " -c 'import torchaudio' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "torchaudio is the oracle: " << python << " cannot import it (Debian: python3-torchaudio)";
  test::TempDir dir("d5-log-mel");
  RngStream rng(5, "chirp");
  std::vector<float> x(16000);
  for (size_t n = 0; n < x.size(); ++n) {
    const double t = static_cast<double>(n) / 16000.0;
    x[n] = static_cast<float>(0.4 * std::sin(2 * std::numbers::pi * (100 * t + 3000 * t * t)) + 0.01 * rng.normal());
  }
  {
    std::ofstream out(dir.file("signal.f32"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  }
  const std::string cmd = python + " " + D5_SOURCE_DIR + "/tests/speech/front_end_torchaudio.py " +
                          dir.file("signal.f32") + " " + dir.file("oracle.f32");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<float> oracle(257 * 40 + 49 * 40 + 49 * 10);
  std::ifstream in(dir.file("oracle.f32"), std::ios::binary);
  in.read(reinterpret_cast<char*>(oracle.data()), static_cast<std::streamsize>(oracle.size() * sizeof(float)));
  ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(oracle.size() * sizeof(float)));

  LogMelFrontEnd log_mel({});
  FrontEndOptions mfcc_options;
  mfcc_options.mfcc = 10;
  LogMelFrontEnd mfcc(mfcc_options);
  std::vector<float> lm(49 * 40), cc(49 * 10);
  log_mel.compute(x, lm);
  mfcc.compute(x, cc);
  auto max_diff = [](const float* a, const float* b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
    return d;
  };
  const float* o = oracle.data();
  EXPECT_LT(max_diff(log_mel.filter_bank().data(), o, 257 * 40), 3e-5);
  EXPECT_LT(max_diff(lm.data(), o + 257 * 40, 49 * 40), 1e-3);
  EXPECT_LT(max_diff(cc.data(), o + 257 * 40 + 49 * 40, 49 * 10), 3e-4);
  std::printf("largest differences to torchaudio: filter bank %.2g, log-mel %.2g, MFCC %.2g\n",
              max_diff(log_mel.filter_bank().data(), o, 257 * 40), max_diff(lm.data(), o + 257 * 40, 49 * 40),
              max_diff(cc.data(), o + 257 * 40 + 49 * 40, 49 * 10));
}

}  // namespace
}  // namespace d5::speech
