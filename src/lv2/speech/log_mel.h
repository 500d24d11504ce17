#pragma once
// Internal: the speech sets' front end, log-mel spectrograms and MFCCs of audio in [-1, 1],
// defined to equal torchaudio's transforms (checked against them in the tests):
//
//   frames  t = 0 .. 1 + (samples - fft) / hop - 1 (torch.stft with center=False)
//   X_t(k)  = sum_n w(n) x(t*hop + n) e^{-2 pi i k n / fft},  k = 0 .. fft/2
//             w: a periodic Hann window of `window` samples, zero-padded to `fft` on both sides
//             ((fft - window) / 2 on the left), as torch.stft pads a shorter window
//   P_t(k)  = |X_t(k)|^2
//   M_t(m)  = sum_k F(k, m) P_t(k)   F: HTK-scale triangles from 0 Hz to rate/2, no area norm
//             (torchaudio.functional.melscale_fbanks(norm=None, mel_scale="htk"))
//   logmel  = ln(M + 1e-6)           (torchaudio.transforms.MFCC(log_mels=True) before its DCT)
//   mfcc    = logmel . D             D: the orthonormal DCT-II (torchaudio create_dct(norm="ortho"))
//
// The FFT is FFTW's (single precision); a plan is made once per front end and is not shared
// between threads (FFTW plans execute thread-safely only on distinct arrays, which each front
// end's buffers are, but planning itself is not thread-safe: construction holds a lock).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace d5::speech {

struct FrontEndOptions {
  int64_t sample_rate = 16000;
  int64_t fft = 512;
  int64_t window = 480;  // 30 ms at 16 kHz
  int64_t hop = 320;     // 20 ms
  int64_t mel_bins = 40;
  int64_t mfcc = 0;  // 0: log-mel features; N: the first N cepstral coefficients
};

// True when this d5 was built with FFTW (libfftw3-dev); the front end refuses otherwise.
bool front_end_built();

class LogMelFrontEnd {
 public:
  explicit LogMelFrontEnd(FrontEndOptions options);
  ~LogMelFrontEnd();
  LogMelFrontEnd(const LogMelFrontEnd&) = delete;
  LogMelFrontEnd& operator=(const LogMelFrontEnd&) = delete;

  int64_t frames(int64_t samples) const;
  int64_t coefficients() const { return options_.mfcc > 0 ? options_.mfcc : options_.mel_bins; }
  // out: frames(audio.size()) rows of coefficients(), row-major.
  void compute(std::span<const float> audio, std::span<float> out);
  // The [fft/2 + 1, mel_bins] filter bank, row-major (for tests and docs).
  const std::vector<float>& filter_bank() const { return filters_; }

 private:
  struct Plan;
  FrontEndOptions options_;
  std::vector<float> window_;   // fft samples, the Hann window centred
  std::vector<float> filters_;  // [fft/2 + 1, mel_bins]
  std::vector<float> dct_;      // [mel_bins, mfcc]
  std::unique_ptr<Plan> plan_;
};

}  // namespace d5::speech
