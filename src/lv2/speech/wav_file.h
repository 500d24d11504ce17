#pragma once
// Internal: mono WAV files through libsndfile (Debian libsndfile1-dev), 16-bit PCM on disk,
// floats in [-1, 1] in memory (libsndfile's scaling: x / 32768 on reading; clipped on writing).
#include <cstdint>
#include <string>
#include <vector>

namespace d5::speech {

struct WavAudio {
  int64_t sample_rate = 0;
  std::vector<float> samples;
};

bool wav_io_built();
// Written to a temporary file beside `path` and renamed, so a reader never sees half a file.
void write_wav(const std::string& path, const std::vector<float>& samples, int64_t sample_rate);
// FormatError for a file that is not mono audio libsndfile can read.
WavAudio read_wav(const std::string& path);

}  // namespace d5::speech
