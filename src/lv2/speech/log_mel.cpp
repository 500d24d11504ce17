// The log-mel / MFCC front end (log_mel.h has the formulas).
#include "log_mel.h"

#include <cmath>
#include <mutex>
#include <numbers>

#ifdef D5_HAVE_FFTW
#include <fftw3.h>
#endif

#include "deep500/core/error.h"

namespace d5::speech {

namespace {

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// torchaudio's melscale_fbanks: triangles between consecutive mel points, evaluated at the FFT's
// bin frequencies, the lower and upper slopes each normalised by their own width.
std::vector<float> mel_filter_bank(int64_t bins, int64_t mels, double sample_rate) {
  const double top = static_cast<double>(static_cast<int64_t>(sample_rate) / 2);
  std::vector<double> points(static_cast<size_t>(mels + 2));
  const double m_max = hz_to_mel(top);
  for (int64_t i = 0; i < mels + 2; ++i)
    points[static_cast<size_t>(i)] = mel_to_hz(m_max * static_cast<double>(i) / static_cast<double>(mels + 1));
  std::vector<float> fb(static_cast<size_t>(bins * mels));
  for (int64_t k = 0; k < bins; ++k) {
    const double f = top * static_cast<double>(k) / static_cast<double>(bins - 1);
    for (int64_t m = 0; m < mels; ++m) {
      const auto i = static_cast<size_t>(m);
      const double down = (f - points[i]) / (points[i + 1] - points[i]);
      const double up = (points[i + 2] - f) / (points[i + 2] - points[i + 1]);
      fb[static_cast<size_t>(k * mels + m)] = static_cast<float>(std::max(0.0, std::min(down, up)));
    }
  }
  return fb;
}

// Orthonormal DCT-II as a [mels, coefficients] matrix (torchaudio.functional.create_dct).
std::vector<float> dct_matrix(int64_t mels, int64_t coefficients) {
  std::vector<float> d(static_cast<size_t>(mels * coefficients));
  for (int64_t n = 0; n < mels; ++n)
    for (int64_t k = 0; k < coefficients; ++k) {
      double v = std::cos(std::numbers::pi / static_cast<double>(mels) * (static_cast<double>(n) + 0.5) *
                          static_cast<double>(k)) *
                 std::sqrt(2.0 / static_cast<double>(mels));
      if (k == 0) v /= std::sqrt(2.0);
      d[static_cast<size_t>(n * coefficients + k)] = static_cast<float>(v);
    }
  return d;
}

}  // namespace

#ifdef D5_HAVE_FFTW

bool front_end_built() { return true; }

// FFTW's planner keeps global state: one planner (or plan destruction) at a time in the process.
std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

struct LogMelFrontEnd::Plan {
  float* in = nullptr;
  fftwf_complex* out = nullptr;
  fftwf_plan plan = nullptr;
  explicit Plan(int64_t fft) {
    std::lock_guard lock(fftw_planner_mutex());
    in = fftwf_alloc_real(static_cast<size_t>(fft));
    out = fftwf_alloc_complex(static_cast<size_t>(fft / 2 + 1));
    D5_CHECK(in && out, Internal, "the speech front end could not allocate its FFT buffers");
    plan = fftwf_plan_dft_r2c_1d(static_cast<int>(fft), in, out, FFTW_ESTIMATE);
  }
  ~Plan() {
    std::lock_guard lock(fftw_planner_mutex());
    if (plan) fftwf_destroy_plan(plan);
    fftwf_free(in);
    fftwf_free(out);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

#else

bool front_end_built() { return false; }
// Never made (the constructor refuses first), but it must compile as the FFTW plan does.
struct LogMelFrontEnd::Plan {
  explicit Plan(int64_t) {}
};

#endif

LogMelFrontEnd::LogMelFrontEnd(FrontEndOptions o) : options_(o) {
  D5_CHECK(front_end_built(), NotBuilt,
           "the speech front end needs FFTW, which this d5 was built without: install libfftw3-dev "
           "(scripts/install-deps.sh) and rebuild");
  D5_CHECK_ARG(o.fft >= 2 && o.fft % 2 == 0, "speech front end: the FFT length must be even and at least 2, got {}",
               o.fft);
  D5_CHECK_ARG(o.window >= 1 && o.window <= o.fft, "speech front end: the window ({}) must lie in [1, fft = {}]",
               o.window, o.fft);
  D5_CHECK_ARG(o.hop >= 1, "speech front end: the hop must be at least 1, got {}", o.hop);
  D5_CHECK_ARG(o.mel_bins >= 1 && o.mel_bins <= o.fft / 2 + 1,
               "speech front end: mel bins must lie in [1, fft/2 + 1 = {}], got {}", o.fft / 2 + 1, o.mel_bins);
  D5_CHECK_ARG(o.mfcc >= 0 && o.mfcc <= o.mel_bins,
               "speech front end: MFCCs must lie in [0, mel bins = {}], got {}", o.mel_bins, o.mfcc);
  window_.assign(static_cast<size_t>(o.fft), 0.0f);
  const int64_t left = (o.fft - o.window) / 2;
  for (int64_t n = 0; n < o.window; ++n)
    window_[static_cast<size_t>(left + n)] = static_cast<float>(
        0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(n) / static_cast<double>(o.window)));
  filters_ = mel_filter_bank(o.fft / 2 + 1, o.mel_bins, static_cast<double>(o.sample_rate));
  if (o.mfcc > 0) dct_ = dct_matrix(o.mel_bins, o.mfcc);
  plan_ = std::make_unique<Plan>(o.fft);
}

LogMelFrontEnd::~LogMelFrontEnd() = default;

int64_t LogMelFrontEnd::frames(int64_t samples) const {
  return samples < options_.fft ? 0 : 1 + (samples - options_.fft) / options_.hop;
}

void LogMelFrontEnd::compute(std::span<const float> audio, std::span<float> out) {
  const int64_t t_count = frames(static_cast<int64_t>(audio.size()));
  const int64_t bins = options_.fft / 2 + 1, mels = options_.mel_bins, coeffs = coefficients();
  D5_CHECK_ARG(static_cast<int64_t>(out.size()) == t_count * coeffs,
               "speech front end: {} samples give {}x{} features, the output holds {}", audio.size(), t_count,
               coeffs, out.size());
#ifdef D5_HAVE_FFTW
  std::vector<double> power(static_cast<size_t>(bins)), logmel(static_cast<size_t>(mels));
  for (int64_t t = 0; t < t_count; ++t) {
    const float* frame = audio.data() + t * options_.hop;
    for (int64_t n = 0; n < options_.fft; ++n) plan_->in[n] = frame[n] * window_[static_cast<size_t>(n)];
    fftwf_execute(plan_->plan);
    for (int64_t k = 0; k < bins; ++k) {
      const double re = plan_->out[k][0], im = plan_->out[k][1];
      power[static_cast<size_t>(k)] = re * re + im * im;
    }
    for (int64_t m = 0; m < mels; ++m) {
      double s = 0;
      for (int64_t k = 0; k < bins; ++k) s += filters_[static_cast<size_t>(k * mels + m)] * power[static_cast<size_t>(k)];
      logmel[static_cast<size_t>(m)] = std::log(s + 1e-6);
    }
    float* row = out.data() + t * coeffs;
    if (options_.mfcc == 0) {
      for (int64_t m = 0; m < mels; ++m) row[m] = static_cast<float>(logmel[static_cast<size_t>(m)]);
      continue;
    }
    for (int64_t c = 0; c < coeffs; ++c) {
      double s = 0;
      for (int64_t m = 0; m < mels; ++m) s += logmel[static_cast<size_t>(m)] * dct_[static_cast<size_t>(m * coeffs + c)];
      row[c] = static_cast<float>(s);
    }
  }
#else
  (void)bins, (void)mels;
#endif
}

}  // namespace d5::speech
