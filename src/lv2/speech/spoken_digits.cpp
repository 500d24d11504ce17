// "spoken-digits": sequences of 3 to 7 digits spoken by eSpeak NG, for sequence recognition with
// CTC. Clips are three seconds at 16 kHz, generated deterministically from generation-seed, by
// the speakers of spoken-words (eSpeak's English dialects with its voice variants, the test
// split's variants never in the training split; clip_set.h):
//
// - clip i of a split draws from the Philox stream "spoken-digits/<split>/<i>": its length (uniform
//   in [min-digits, max-digits]) and digits, spoken as words ("three one four"), its speaker, pitch
//   (20-80) and rate (170-250 words per minute: seven digits fit in the clip), loudness (peak
//   0.05-0.8), where it starts, and with noise-probability white, pink or brown noise at an SNR
//   uniform in snr-db;
// - labels: the digits as classes 1-10 (digit d is class d + 1; class 0 is CTC's blank),
//   left-aligned in max-digits positions and padded with -100 (kDefaultIgnoreIndex, the padding
//   the ctc loss head and the cer measure skip).
//
// Inputs are log-mel spectrograms by default (features=log-mel, 40 bins: [1, 149, 40]), or MFCCs
// or the waveform, as spoken-words offers.
#include <cmath>

#include <fmt/format.h>

#include "../data/dataset_options.h"
#include "clip_dataset.h"
#include "clip_set.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/train/quality.h"
#include "speech_datasets.h"

namespace d5::speech {

namespace {

constexpr const char* kGenerator = "spoken-digits/1";
constexpr int64_t kClipSamples = 48000;
constexpr int64_t kClasses = 11;  // the blank and ten digits
const std::vector<std::string> kDigitWords = {"zero", "one", "two",   "three", "four",
                                              "five", "six", "seven", "eight", "nine"};

struct DigitsOptions {
  int64_t clips = 0, min_digits = 0, max_digits = 0;
  VoiceOptions voice;
};

ClipPlan plan_clip(const DigitsOptions& o, const std::vector<std::string>& speakers, const std::string& split,
                   int64_t index, std::vector<int64_t>& digits) {
  RngStream rng(o.voice.seed, fmt::format("spoken-digits/{}/{}", split, index));
  ClipPlan c;
  const auto count = o.min_digits + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_digits - o.min_digits + 1)));
  digits.clear();
  for (int64_t k = 0; k < count; ++k) {
    digits.push_back(static_cast<int64_t>(rng.below(10)));
    c.text += (k ? " " : "") + kDigitWords[static_cast<size_t>(digits.back())];
  }
  c.label = digits.front() + 1;
  c.voice = speakers[rng.below(speakers.size())];
  c.pitch = 20 + static_cast<int>(rng.below(61));
  c.rate = 170 + static_cast<int>(rng.below(81));
  c.peak = rng.uniform(0.05, 0.8);
  c.start = rng.uniform();
  static const char* colours[] = {"white", "pink", "brown"};
  c.noise = rng.uniform() < o.voice.noise_probability ? colours[rng.below(3)] : "";
  c.snr_db = rng.uniform(o.voice.snr_low, o.voice.snr_high);
  c.noise_seed = rng.next_u64();
  return c;
}

DigitsOptions read_options(const data::DatasetOptions& opts, const std::string& split) {
  DigitsOptions o;
  o.clips = opts.get_int("clips", split == "train" ? 3000 : 500, 1, 1 << 22);
  o.min_digits = opts.get_int("min-digits", 3, 1, 7);
  o.max_digits = opts.get_int("max-digits", 7, 1, 7);
  D5_CHECK_ARG(o.min_digits <= o.max_digits, "spoken-digits: min-digits ({}) exceeds max-digits ({})", o.min_digits,
               o.max_digits);
  o.voice = read_voice_options(opts, "spoken-digits", {10, 30});
  return o;
}

}  // namespace

std::unique_ptr<Dataset> open_spoken_digits(const DatasetSpec& spec) {
  data::DatasetOptions opts(spec, "spoken-digits",
                            {"clips", "min-digits", "max-digits", "test-variants", "noise-probability", "snr-db",
                             "generation-seed", "features", "mel-bins", "mfcc"});
  D5_CHECK_ARG(spec.split == "train" || spec.split == "test",
               "spoken-digits: split must be 'train' or 'test', got '{}'", spec.split);
  const DigitsOptions o = read_options(opts, spec.split);
  const FeatureOptions features = read_feature_options(opts, "spoken-digits", "log-mel");
  opts.check_all_known();
  check_speech_built("spoken-digits", features);  // before speaking anything
  ClipSet set{"spoken-digits", spec.split, {}, kClipSamples, {}};
  set.options = o.voice.to_json();
  set.options["generator"] = kGenerator;
  const std::vector<std::string> speakers = split_speakers(o.voice.test_variants, spec.split == "test");
  D5_CHECK_ARG(!speakers.empty(), "spoken-digits: no voice variant falls in the {} split with test-variants {}",
               spec.split, o.voice.test_variants);
  std::vector<int64_t> labels, first, digits;
  for (int64_t i = 0; i < o.clips; ++i) {
    set.plans.push_back(plan_clip(o, speakers, spec.split, i, digits));
    first.push_back(set.plans.back().label);
    for (int64_t k = 0; k < o.max_digits; ++k)
      labels.push_back(k < static_cast<int64_t>(digits.size()) ? digits[static_cast<size_t>(k)] + 1
                                                               : kDefaultIgnoreIndex);
  }
  const std::vector<float> audio = cached_clips(set, data::data_dir_for(spec));
  std::vector<int64_t> shape;
  std::vector<float> inputs = clip_features(audio, kClipSamples, features, shape);
  // label(i), for samplers that stratify: the class of the first digit.
  return std::make_unique<ClipDataset>("spoken-digits", kClasses, std::move(shape), std::move(inputs),
                                       std::vector<int64_t>{o.max_digits}, std::move(labels), std::move(first));
}

}  // namespace d5::speech
