// eSpeak NG synthesis at 16 kHz (speech_synthesis.h).
#include "speech_synthesis.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>

#ifdef D5_HAVE_SPEECH_SYNTHESIS
#include <samplerate.h>
#endif

#include <fmt/format.h>

#include "core/subprocess.h"
#include "deep500/core/error.h"
#include "wav_file.h"

namespace d5::speech {

namespace fs = std::filesystem;

const std::vector<std::string>& english_dialects() {
  static const std::vector<std::string> d = {"en",             "en-us",      "en-gb-scotland", "en-gb-x-gbclan",
                                             "en-gb-x-gbcwmd", "en-gb-x-rp", "en-029",         "en-us-nyc"};
  return d;
}

#ifdef D5_HAVE_SPEECH_SYNTHESIS

namespace {

const std::string& espeak_program() {
  static const std::string path = find_on_path("espeak-ng");
  D5_CHECK(!path.empty(), NotBuilt,
           "the speech sets speak with eSpeak NG, whose program espeak-ng is not on PATH: install Debian's "
           "espeak-ng (scripts/install-deps.sh)");
  return path;
}

std::vector<float> resample_to_16k(std::vector<float> in, int64_t rate) {
  if (rate == 16000 || in.empty()) return in;
  const double ratio = 16000.0 / static_cast<double>(rate);
  std::vector<float> out(static_cast<size_t>(static_cast<double>(in.size()) * ratio) + 16);
  SRC_DATA d{};
  d.data_in = in.data();
  d.input_frames = static_cast<long>(in.size());
  d.data_out = out.data();
  d.output_frames = static_cast<long>(out.size());
  d.src_ratio = ratio;
  const int err = src_simple(&d, SRC_SINC_BEST_QUALITY, 1);
  D5_CHECK(err == 0, Internal, "libsamplerate: {}", src_strerror(err));
  out.resize(static_cast<size_t>(d.output_frames_gen));
  return out;
}

}  // namespace

bool speech_synthesis_built() { return wav_io_built(); }

std::string synthesizer_identity() {
  static const std::string identity = [] {
    const ProcessResult r = run_process({espeak_program(), "--version"});
    D5_CHECK(r.exit_code == 0, IoError, "'{} --version' failed: {}", espeak_program(), r.output);
    std::string line = r.output.substr(0, r.output.find('\n'));
    return line;
  }();
  return identity;
}

std::vector<std::string> voice_variants() {
  const std::string identity = synthesizer_identity();
  const size_t at = identity.find("Data at:");
  D5_CHECK(at != std::string::npos, IoError, "cannot find eSpeak NG's data directory in '{}'", identity);
  std::string data = identity.substr(at + 8);
  data.erase(0, data.find_first_not_of(' '));
  const fs::path dir = fs::path(data) / "voices" / "!v";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isalnum(c); }))
      names.push_back(n);
  }
  D5_CHECK(!names.empty(), IoError, "eSpeak NG's voice variants are missing from '{}': reinstall espeak-ng-data",
           dir.string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<float> synthesize(const Utterance& u) {
  static std::atomic<int64_t> counter{0};
  const fs::path wav = fs::temp_directory_path() / fmt::format("d5-espeak-{}-{}.wav", getpid(), counter++);
  const ProcessResult r =
      run_process({espeak_program(), "-v", u.voice, "-p", std::to_string(std::clamp(u.pitch, 0, 99)), "-s",
                   std::to_string(std::clamp(u.rate, 80, 450)), "-w", wav.string(), "--", u.text});
  struct Remove {
    fs::path p;
    ~Remove() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove{wav};
  D5_CHECK(r.exit_code == 0, IoError, "eSpeak NG could not speak '{}' with voice '{}' (exit {}): {}", u.text,
           u.voice, r.exit_code, r.output);
  WavAudio audio = read_wav(wav.string());
  return resample_to_16k(std::move(audio.samples), audio.sample_rate);
}

#else

namespace {
constexpr const char* kMissing =
    "the speech sets need libsamplerate and libsndfile, which this d5 was built without: install "
    "libsamplerate0-dev and libsndfile1-dev (scripts/install-deps.sh) and rebuild";
}

bool speech_synthesis_built() { return false; }
std::string synthesizer_identity() { D5_THROW(NotBuilt, "{}", kMissing); }
std::vector<std::string> voice_variants() { D5_THROW(NotBuilt, "{}", kMissing); }
std::vector<float> synthesize(const Utterance&) { D5_THROW(NotBuilt, "{}", kMissing); }

#endif

}  // namespace d5::speech
