// WAV files through libsndfile (wav_file.h).
#include "wav_file.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include <fmt/format.h>

#ifdef D5_HAVE_SNDFILE
#include <sndfile.h>
#endif

#include "deep500/core/error.h"

namespace d5::speech {

#ifdef D5_HAVE_SNDFILE

bool wav_io_built() { return true; }

void write_wav(const std::string& path, const std::vector<float>& samples, int64_t sample_rate) {
  // Unique per writer: two processes generating the same cached split write the same bytes, and
  // whichever renames last wins harmlessly.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.partial-{}-{}", path, getpid(), counter++);
  SF_INFO info{};
  info.samplerate = static_cast<int>(sample_rate);
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* f = sf_open(tmp.c_str(), SFM_WRITE, &info);
  D5_CHECK(f != nullptr, IoError, "cannot write '{}': {}", tmp, sf_strerror(nullptr));
  sf_command(f, SFC_SET_CLIPPING, nullptr, SF_TRUE);
  const sf_count_t n = static_cast<sf_count_t>(samples.size());
  const sf_count_t written = sf_writef_float(f, samples.data(), n);
  const int closed = sf_close(f);
  D5_CHECK(written == n && closed == 0, IoError, "cannot write '{}' ({} of {} samples): disk full?", tmp, written, n);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  D5_CHECK(!ec, IoError, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

WavAudio read_wav(const std::string& path) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  D5_CHECK(f != nullptr, FormatError, "cannot read '{}' as audio: {}", path, sf_strerror(nullptr));
  WavAudio out;
  out.sample_rate = info.samplerate;
  if (info.channels != 1) {
    sf_close(f);
    D5_THROW(FormatError, "'{}' has {} channels; the speech sets read mono audio", path, info.channels);
  }
  out.samples.resize(static_cast<size_t>(info.frames));
  const sf_count_t got = sf_readf_float(f, out.samples.data(), info.frames);
  sf_close(f);
  D5_CHECK(got == info.frames, FormatError, "'{}' is truncated: {} of {} samples", path, got, info.frames);
  return out;
}

#else

constexpr const char* kMissing =
    "WAV files need libsndfile, which this d5 was built without: install libsndfile1-dev "
    "(scripts/install-deps.sh) and rebuild";
bool wav_io_built() { return false; }
void write_wav(const std::string&, const std::vector<float>&, int64_t) { D5_THROW(NotBuilt, "{}", kMissing); }
WavAudio read_wav(const std::string&) { D5_THROW(NotBuilt, "{}", kMissing); }

#endif

}  // namespace d5::speech
