// "spoken-words": a keyword-spotting set after Speech Commands (Warden, 2018), spoken by eSpeak NG
// on the user's machine. Twelve classes: the ten command words yes, no, up, down, left, right, on,
// off, stop, go; "unknown" (one of fifteen other words of Speech Commands); "silence" (background
// noise alone). Clips are one second at 16 kHz, generated deterministically from generation-seed:
//
// - a speaker is an English dialect of eSpeak's (8) with one of its voice variants (voices/!v,
//   about 100); a variant belongs to the test split when the FNV-1a hash of its name, as a
//   fraction of 2^64, is below test-variants, so the test set is spoken by voices never trained on
//   (clip_set.h);
// - clip i of a split has class i mod 12 and draws from the Philox stream
//   "spoken-words/<split>/<i>": its speaker, pitch (20-80) and rate (120-220 words per minute), its
//   loudness (peak 0.05-0.8), where the word starts in the second, and with noise-probability
//   (always for silence) white, pink or brown noise at an SNR uniform in snr-db (silence: noise
//   RMS log-uniform in [0.001, 0.1]);
// - the clips are cached in the data directory as one 16-bit WAV per split (clip_set.h).
//
// Inputs are the clips' MFCCs (features=mfcc, the default: 10 of 40 mel bins), log-mel
// spectrograms (features=log-mel) or the waveform (features=waveform), as [1, frames, coefficients]
// (49 frames of 30 ms every 20 ms) or [1, 16000]; log_mel.h defines the front end.
#include <cmath>

#include <fmt/format.h>

#include "../data/dataset_options.h"
#include "clip_dataset.h"
#include "clip_set.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "speech_datasets.h"

namespace d5::speech {

namespace {

constexpr const char* kGenerator = "spoken-words/1";
constexpr int64_t kClipSamples = 16000;
const std::vector<std::string> kCommands = {"yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"};
const std::vector<std::string> kOtherWords = {"bed",   "bird",   "cat",    "dog",   "happy",
                                              "house", "marvin", "sheila", "tree",  "wow",
                                              "backward", "forward", "follow", "learn", "visual"};
const int64_t kUnknownClass = 10, kSilenceClass = 11, kClasses = 12;

struct WordsOptions {
  int64_t clips_per_class = 0;
  VoiceOptions voice;
};

ClipPlan plan_clip(const WordsOptions& o, const std::vector<std::string>& speakers, const std::string& split,
                   int64_t index) {
  RngStream rng(o.voice.seed, fmt::format("spoken-words/{}/{}", split, index));
  ClipPlan c;
  c.label = index % kClasses;
  c.voice = speakers[rng.below(speakers.size())];
  if (c.label < kUnknownClass) c.text = kCommands[static_cast<size_t>(c.label)];
  else if (c.label == kUnknownClass) c.text = kOtherWords[rng.below(kOtherWords.size())];
  c.pitch = 20 + static_cast<int>(rng.below(61));
  c.rate = 120 + static_cast<int>(rng.below(101));
  c.peak = rng.uniform(0.05, 0.8);
  c.start = rng.uniform();
  static const char* colours[] = {"white", "pink", "brown"};
  c.noise = c.label == kSilenceClass || rng.uniform() < o.voice.noise_probability ? colours[rng.below(3)] : "";
  c.snr_db = rng.uniform(o.voice.snr_low, o.voice.snr_high);
  c.noise_rms = std::exp(rng.uniform(std::log(0.001), std::log(0.1)));
  c.noise_seed = rng.next_u64();
  return c;
}

WordsOptions read_options(const data::DatasetOptions& opts, const std::string& split) {
  WordsOptions o;
  o.clips_per_class = opts.get_int("clips-per-class", split == "train" ? 250 : 60, 1, 1 << 20);
  o.voice = read_voice_options(opts, "spoken-words", {5, 30});
  return o;
}

}  // namespace

std::unique_ptr<Dataset> open_spoken_words(const DatasetSpec& spec) {
  data::DatasetOptions opts(spec, "spoken-words",
                            {"clips-per-class", "test-variants", "noise-probability", "snr-db", "generation-seed",
                             "features", "mel-bins", "mfcc"});
  D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "spoken-words: split must be 'train' or 'test', got '{}'",
               spec.split);
  const WordsOptions o = read_options(opts, spec.split);
  const FeatureOptions features = read_feature_options(opts, "spoken-words", "mfcc");
  opts.check_all_known();
  check_speech_built("spoken-words", features);  // before speaking anything
  ClipSet set{"spoken-words", spec.split, {}, kClipSamples, {}};
  set.options = o.voice.to_json();
  set.options["generator"] = kGenerator;
  const std::vector<std::string> speakers = split_speakers(o.voice.test_variants, spec.split == "test");
  D5_CHECK_ARG(!speakers.empty(), "spoken-words: no voice variant falls in the {} split with test-variants {}",
               spec.split, o.voice.test_variants);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < o.clips_per_class * kClasses; ++i) {
    set.plans.push_back(plan_clip(o, speakers, spec.split, i));
    labels.push_back(set.plans.back().label);
  }
  const std::vector<float> audio = cached_clips(set, data::data_dir_for(spec));
  std::vector<int64_t> shape;
  std::vector<float> inputs = clip_features(audio, kClipSamples, features, shape);
  return std::make_unique<ClipDataset>("spoken-words", kClasses, std::move(shape), std::move(inputs),
                                       std::vector<int64_t>{}, labels, labels);
}

}  // namespace d5::speech
