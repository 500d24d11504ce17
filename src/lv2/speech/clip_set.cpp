// What the speech sets share (clip_set.h).
#include "clip_set.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "../data/dataset_options.h"
#include "../images/image_common.h"
#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/metrics/atomic_file.h"
#include "speech_synthesis.h"
#include "wav_file.h"

namespace d5::speech {

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The cached WAV's samples when its manifest vouches for them, else nothing.
std::vector<float> read_cached(const fs::path& wav, const fs::path& manifest_path, size_t samples) {
  if (!fs::exists(wav) || !fs::exists(manifest_path)) return {};
  const auto manifest = nlohmann::json::parse(read_file(manifest_path), nullptr, false);
  if (manifest.is_discarded() || manifest.value("wav_sha256", "") != file_hex_digest(wav.string(), DigestKind::sha256))
    return {};
  WavAudio audio = read_wav(wav.string());
  return audio.samples.size() == samples ? std::move(audio.samples) : std::vector<float>{};
}

}  // namespace

std::vector<std::string> split_speakers(double test_variants, bool test) {
  std::vector<std::string> speakers;
  for (const auto& v : voice_variants())
    if ((static_cast<double>(stable_hash(v)) < test_variants * 18446744073709551616.0) == test)
      for (const auto& d : english_dialects()) speakers.push_back(d + "+" + v);
  return speakers;
}

std::vector<float> cached_clips(const ClipSet& set, const std::string& cache_dir) {
  nlohmann::json clips = nlohmann::json::array();
  for (const auto& p : set.plans) clips.push_back(describe_clip(p));
  const nlohmann::json identity = {{"set", set.name},
                                   {"split", set.split},
                                   {"options", set.options},
                                   {"clip_samples", set.clip_samples},
                                   {"synthesizer", synthesizer_identity()}};
  const std::string key = sha256_hex(identity.dump() + clips.dump()).substr(0, 16);
  const fs::path wav = fs::path(cache_dir) / fmt::format("{}-{}.wav", set.split, key);
  const fs::path manifest_path = fs::path(cache_dir) / fmt::format("{}-{}.json", set.split, key);
  const auto count = static_cast<int64_t>(set.plans.size());
  std::vector<float> cached = read_cached(wav, manifest_path, static_cast<size_t>(count * set.clip_samples));
  if (!cached.empty()) return cached;
  // Each clip is a function of its plan alone (eSpeak runs in a process per utterance), so the
  // threads' order does not matter.
  std::vector<float> samples(static_cast<size_t>(count * set.clip_samples));
  images::WorkerPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u)));
  pool.parallel_for(count, [&](int64_t i) {
    render_clip(set.plans[static_cast<size_t>(i)],
                std::span<float>(samples).subspan(static_cast<size_t>(i * set.clip_samples),
                                                  static_cast<size_t>(set.clip_samples)));
  });
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  D5_CHECK(!ec, IoError, "cannot create the data directory '{}': {}", cache_dir, ec.message());
  write_wav(wav.string(), samples, kSampleRate);
  // Read back: the features come from the 16-bit file whether it was just written or cached.
  WavAudio audio = read_wav(wav.string());
  nlohmann::json manifest = identity;
  manifest["wav"] = wav.filename().string();
  manifest["wav_sha256"] = file_hex_digest(wav.string(), DigestKind::sha256);
  manifest["clips"] = std::move(clips);
  atomic_write(manifest_path.string(), manifest.dump(1) + "\n");
  return std::move(audio.samples);
}

VoiceOptions read_voice_options(const data::DatasetOptions& opts, const std::string& set,
                                std::pair<double, double> default_snr) {
  VoiceOptions o;
  o.test_variants = opts.get_double("test-variants", 0.2);
  D5_CHECK_ARG(o.test_variants > 0 && o.test_variants < 1, "{}: test-variants must lie in (0, 1), got {}", set,
               o.test_variants);
  o.noise_probability = opts.get_double("noise-probability", 0.8);
  D5_CHECK_ARG(o.noise_probability >= 0 && o.noise_probability <= 1,
               "{}: noise-probability must lie in [0, 1], got {}", set, o.noise_probability);
  const std::vector<double> snr = opts.get_doubles("snr-db", {default_snr.first, default_snr.second});
  D5_CHECK_ARG(snr.size() == 2 && snr[0] <= snr[1], "{}: snr-db must be 'low,high' with low <= high", set);
  o.snr_low = snr[0];
  o.snr_high = snr[1];
  o.seed = static_cast<uint64_t>(opts.get_int("generation-seed", 1, 0));
  return o;
}

nlohmann::json VoiceOptions::to_json() const {
  return {{"test_variants", test_variants},
          {"noise_probability", noise_probability},
          {"snr_db", {snr_low, snr_high}},
          {"generation_seed", seed}};
}

FeatureOptions read_feature_options(const data::DatasetOptions& opts, const std::string& set,
                                    const std::string& default_kind) {
  FeatureOptions f;
  f.kind = opts.get_string("features", default_kind);
  D5_CHECK_ARG(f.kind == "mfcc" || f.kind == "log-mel" || f.kind == "waveform",
               "{}: features must be 'mfcc', 'log-mel' or 'waveform', got '{}'", set, f.kind);
  f.front_end.mel_bins = opts.get_int("mel-bins", 40, 1, 257);
  f.front_end.mfcc = f.kind == "mfcc" ? opts.get_int("mfcc", 10, 1, f.front_end.mel_bins) : 0;
  return f;
}

std::vector<float> clip_features(const std::vector<float>& audio, int64_t clip_samples, const FeatureOptions& f,
                                 std::vector<int64_t>& shape) {
  if (f.kind == "waveform") {
    shape = {1, clip_samples};
    return audio;
  }
  LogMelFrontEnd front(f.front_end);
  const int64_t frames = front.frames(clip_samples), coeffs = front.coefficients();
  shape = {1, frames, coeffs};
  const auto clips = audio.size() / static_cast<size_t>(clip_samples);
  const auto per = static_cast<size_t>(frames * coeffs);
  std::vector<float> out(clips * per);
  for (size_t i = 0; i < clips; ++i)
    front.compute(std::span<const float>(audio).subspan(i * static_cast<size_t>(clip_samples),
                                                        static_cast<size_t>(clip_samples)),
                  std::span<float>(out).subspan(i * per, per));
  return out;
}

void check_speech_built(const std::string& set, const FeatureOptions& f) {
  D5_CHECK(speech_synthesis_built() && (f.kind == "waveform" || front_end_built()), NotBuilt,
           "{} needs libsamplerate, libsndfile and FFTW, which this d5 was built without: install "
           "libsamplerate0-dev libsndfile1-dev libfftw3-dev (scripts/install-deps.sh) and rebuild",
           set);
}

}  // namespace d5::speech
