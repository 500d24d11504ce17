#pragma once
// Internal: what the speech sets share — speakers split by voice variant, the WAV cache of a
// split's clips, and the features computed from them.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio_clips.h"
#include "log_mel.h"

namespace d5::data {
class DatasetOptions;
}

namespace d5::speech {

// eSpeak's English dialects, each with every voice variant of the split: a variant is a test
// variant when the FNV-1a hash of its name, as a fraction of 2^64, is below test_variants.
std::vector<std::string> split_speakers(double test_variants, bool test);

struct ClipSet {
  std::string name;          // "spoken-words": names the files and the messages
  std::string split;         // "train" or "test"
  nlohmann::json options;    // everything the clips depend on besides the plans' draws
  int64_t clip_samples = 0;  // every clip's length at 16 kHz
  std::vector<ClipPlan> plans;
};

// The split's clips one after another, from <cache_dir>/<split>-KEY.wav when its manifest
// (<split>-KEY.json) vouches for it by SHA-256, else spoken on every core and cached. KEY hashes
// the set's name, options, eSpeak's version line and the plans.
std::vector<float> cached_clips(const ClipSet& set, const std::string& cache_dir);

// The options every speech set has besides its own: who speaks and over what noise.
struct VoiceOptions {
  double test_variants = 0.2;      // test-variants
  double noise_probability = 0.8;  // noise-probability
  double snr_low = 0, snr_high = 0;  // snr-db
  uint64_t seed = 1;               // generation-seed
  nlohmann::json to_json() const;
};
VoiceOptions read_voice_options(const data::DatasetOptions& opts, const std::string& set,
                                std::pair<double, double> default_snr);

// The `features`, `mel-bins` and `mfcc` options of a speech set.
struct FeatureOptions {
  std::string kind;  // "mfcc", "log-mel" or "waveform"
  FrontEndOptions front_end;
};
FeatureOptions read_feature_options(const data::DatasetOptions& opts, const std::string& set,
                                    const std::string& default_kind);
// Features of each clip, row after row; `shape` receives one sample's: [1, frames, coefficients]
// or, for the waveform, [1, clip_samples].
std::vector<float> clip_features(const std::vector<float>& audio, int64_t clip_samples, const FeatureOptions& f,
                                 std::vector<int64_t>& shape);

// The NotBuilt refusal of a speech set whose libraries this d5 lacks.
void check_speech_built(const std::string& set, const FeatureOptions& f);

}  // namespace d5::speech
