// Unit: the clips (src/lv2/speech/audio_clips.h) and the spoken-words set: classes, the split by
// voice variant, the WAV cache and its checksum, the features, and the options it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "../../../support/temp_dir.h"
#include "deep500/core/error.h"
#include "deep500/train/dataset.h"
#include "lv2/speech/audio_clips.h"
#include "lv2/speech/log_mel.h"
#include "lv2/speech/speech_synthesis.h"
#include "lv2/speech/wav_file.h"

namespace d5::speech {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClipSamples = 16000;  // spoken-words' one second

#define SKIP_WITHOUT_SPEECH()                                                                           \
  if (!speech_synthesis_built() || !wav_io_built() || !front_end_built())                               \
  GTEST_SKIP() << "this build lacks eSpeak NG, libsamplerate, libsndfile or FFTW (Debian: libespeak-ng-dev " \
                  "libsamplerate0-dev libsndfile1-dev libfftw3-dev), which spoken-words needs"

double rms(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s / static_cast<double>(x.size()));
}

// FNV-1a, 64 bits, from its definition: the split's oracle.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

TEST(AudioClips, NoiseHasUnitRmsAndItsColour) {
  for (const char* c : {"white", "pink", "brown"}) EXPECT_NEAR(rms(coloured_noise(c, 3, 16000)), 1.0, 1e-6) << c;
  // Colour as the correlation of neighbouring samples: ~0 for white, near 1 for brown.
  auto lag1 = [](const std::vector<float>& x) {
    double s = 0;
    for (size_t i = 1; i < x.size(); ++i) s += static_cast<double>(x[i]) * x[i - 1];
    return s / static_cast<double>(x.size() - 1);
  };
  EXPECT_LT(std::abs(lag1(coloured_noise("white", 3, 16000))), 0.03);
  EXPECT_GT(lag1(coloured_noise("pink", 3, 16000)), 0.5);
  EXPECT_GT(lag1(coloured_noise("brown", 3, 16000)), 0.95);
  EXPECT_EQ(coloured_noise("pink", 3, 100), coloured_noise("pink", 3, 100));
  EXPECT_NE(coloured_noise("pink", 3, 100), coloured_noise("pink", 4, 100));
  EXPECT_THROW(coloured_noise("green", 3, 10), InvalidArgument);
}

TEST(AudioClips, TrimsSilenceBelowOnePercentOfThePeak) {
  const std::vector<float> x = {0, 0.001f, 0.5f, -1, 0.2f, 0.009f, 0};
  const auto t = trim_silence(x);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], 0.5f);
  EXPECT_EQ(t[2], 0.2f);
  EXPECT_TRUE(trim_silence(std::vector<float>(5, 0.0f)).empty());
}

TEST(AudioClips, PlacesTheWordAtItsPeakAndAddsNoiseAtItsSnr) {
  SKIP_WITHOUT_SPEECH();
  ClipPlan p;
  p.text = "stop";
  p.voice = "en-us+m3";
  p.peak = 0.5;
  p.start = 0;
  std::vector<float> clean(kClipSamples), noisy(kClipSamples);
  render_clip(p, clean);
  float peak = 0;
  for (float v : clean) peak = std::max(peak, std::abs(v));
  EXPECT_NEAR(peak, 0.5, 1e-6);
  EXPECT_GE(std::abs(clean[0]), 0.005f);  // start 0: the trimmed word's first sample opens the clip
  const auto word = trim_silence(clean);
  p.noise = "white";
  p.snr_db = 10;
  p.noise_seed = 9;
  render_clip(p, noisy);
  std::vector<float> noise(kClipSamples);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = noisy[i] - clean[i];
  EXPECT_NEAR(20 * std::log10(rms(word) / rms(noise)), 10.0, 1e-3);
}

TEST(AudioClips, SqueezesAnUtteranceLongerThanTheClipIntoIt) {
  SKIP_WITHOUT_SPEECH();
  ClipPlan p;
  p.text = "seven seven seven seven seven";
  p.voice = "en+m3";
  p.rate = 80;  // about three seconds
  p.peak = 0.6;
  std::vector<float> clip(8000);
  render_clip(p, clip);
  float peak = 0;
  for (float v : clip) peak = std::max(peak, std::abs(v));
  EXPECT_NEAR(peak, 0.6, 1e-6);
  // Squeezed, not cut: the trimmed utterance's first and last samples (at or above 1% of its peak)
  // open and close the clip.
  EXPECT_GE(std::abs(clip.front()), 0.006f * 0.99f);
  EXPECT_GE(std::abs(clip.back()), 0.006f * 0.99f);
}

TEST(WavFile, RoundTripsThroughSixteenBits) {
  SKIP_WITHOUT_SPEECH();
  test::TempDir dir("d5-wav");
  const std::vector<float> x = {0, 0.5f, -0.5f, 0.25f, -1, 0.999f};
  write_wav(dir.file("a.wav"), x, 16000);
  const WavAudio a = read_wav(dir.file("a.wav"));
  EXPECT_EQ(a.sample_rate, 16000);
  ASSERT_EQ(a.samples.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(a.samples[i], x[i], 1.0 / 32768) << i;
  std::ofstream(dir.file("b.wav")) << "not audio";
  EXPECT_THROW(read_wav(dir.file("b.wav")), FormatError);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

DatasetSpec words_spec(const std::string& dir, const std::string& split, int clips) {
  DatasetSpec s;
  s.name = "spoken-words";
  s.data_dir = dir;
  s.split = split;
  s.options["clips-per-class"] = std::to_string(clips);
  return s;
}

nlohmann::json manifest(const fs::path& dir, const std::string& split) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().filename().string().starts_with(split + "-"))
      return nlohmann::json::parse(std::ifstream(e.path()));
  return {};
}

TEST(SpokenWords, TwelveClassesInTurnWithMfccInputs) {
  SKIP_WITHOUT_SPEECH();
  register_builtin_datasets();
  test::TempDir dir("d5-spoken-words");
  const auto set = open_dataset(words_spec(dir.path.string(), "train", 2));
  EXPECT_EQ(set->size(), 24);
  EXPECT_EQ(set->classes(), 12);
  EXPECT_EQ(set->sample_descs().at(kDataInput).shape, (Shape{1, 49, 10}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(set->label(i), i % 12);
  const auto m = manifest(dir.path, "train");
  ASSERT_EQ(m.at("clips").size(), 24u);
  const std::vector<std::string> commands = {"yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"};
  for (size_t i = 0; i < 24; ++i) {
    const auto& c = m["clips"][i];
    if (i % 12 < 10) EXPECT_EQ(c.at("text"), commands[i % 12]);
    else if (i % 12 == 10) EXPECT_TRUE(c.at("text") != "" && std::find(commands.begin(), commands.end(), c.at("text").get<std::string>()) == commands.end());
    else EXPECT_TRUE(c.at("text") == "" && c.contains("noise"));
  }
  // The features are the front end's of the cached 16-bit clips.
  const fs::path wav = dir.path / m.at("wav").get<std::string>();
  const WavAudio audio = read_wav(wav.string());
  FrontEndOptions o;
  o.mfcc = 10;
  LogMelFrontEnd fe(o);
  std::vector<float> expected(490);
  fe.compute(std::span<const float>(audio.samples).subspan(5 * kClipSamples, kClipSamples), expected);
  const std::vector<int64_t> pick = {5};
  const Batch b = set->fetch(pick);
  for (size_t k = 0; k < 490; ++k) ASSERT_EQ(b.at(kDataInput).data_as<float>()[k], expected[k]) << k;
  EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[0], 5);
}

TEST(SpokenWords, TestVoicesAreVariantsTrainingNeverHears) {
  SKIP_WITHOUT_SPEECH();
  register_builtin_datasets();
  test::TempDir dir("d5-spoken-words");
  open_dataset(words_spec(dir.path.string(), "train", 8));
  open_dataset(words_spec(dir.path.string(), "test", 8));
  std::set<std::string> train_variants, test_variants;
  for (const char* split : {"train", "test"}) {
    const nlohmann::json m = manifest(dir.path, split);
    for (const auto& c : m.at("clips")) {
      if (!c.contains("voice")) continue;
      const std::string v = c["voice"].get<std::string>().substr(c["voice"].get<std::string>().find('+') + 1);
      EXPECT_EQ(static_cast<double>(fnv1a(v)) < 0.2 * 0x1p64, std::string(split) == "test") << v;
      (std::string(split) == "test" ? test_variants : train_variants).insert(v);
    }
  }
  EXPECT_GE(train_variants.size(), 20u);
  EXPECT_GE(test_variants.size(), 5u);
  for (const auto& v : test_variants) EXPECT_EQ(train_variants.count(v), 0u) << v;
}

TEST(SpokenWords, CacheIsReusedAndRegeneratedWhenItsChecksumFails) {
  SKIP_WITHOUT_SPEECH();
  register_builtin_datasets();
  test::TempDir dir("d5-spoken-words");
  auto spec = words_spec(dir.path.string(), "test", 1);
  spec.options["features"] = "waveform";
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const Batch first = open_dataset(spec)->fetch(all);
  const fs::path wav = dir.path / manifest(dir.path, "test").at("wav").get<std::string>();
  const auto written = fs::last_write_time(wav);
  EXPECT_TRUE(same_bytes(open_dataset(spec)->fetch(all).at(kDataInput), first.at(kDataInput)));
  EXPECT_EQ(fs::last_write_time(wav), written);  // read, not rewritten
  {
    std::fstream f(wav, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x55');
  }
  const Batch again = open_dataset(spec)->fetch(all);
  EXPECT_TRUE(same_bytes(again.at(kDataInput), first.at(kDataInput)));
  EXPECT_EQ(again.at(kDataInput).desc().shape, (Shape{12, 1, 16000}));
}

TEST(SpokenWords, FeaturesOptionsAndRefusals) {
  SKIP_WITHOUT_SPEECH();
  register_builtin_datasets();
  test::TempDir dir("d5-spoken-words");
  auto spec = words_spec(dir.path.string(), "test", 1);
  spec.options["features"] = "log-mel";
  spec.options["mel-bins"] = "32";
  EXPECT_EQ(open_dataset(spec)->sample_descs().at(kDataInput).shape, (Shape{1, 49, 32}));
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{{"features", "spectrum"},
                                                                           {"test-variants", "1"},
                                                                           {"noise-probability", "2"},
                                                                           {"snr-db", "30,5"},
                                                                           {"clips-per-class", "0"},
                                                                           {"colour", "red"}}) {
    auto bad = words_spec(dir.path.string(), "test", 1);
    bad.options[key] = value;
    EXPECT_THROW(open_dataset(bad), InvalidArgument) << key << "=" << value;
  }
  auto bad_split = words_spec(dir.path.string(), "validation", 1);
  EXPECT_THROW(open_dataset(bad_split), InvalidArgument);
}

TEST(SpokenDigits, LabelsAreTheSpokenDigitsPaddedForCtc) {
  SKIP_WITHOUT_SPEECH();
  register_builtin_datasets();
  test::TempDir dir("d5-spoken-digits");
  DatasetSpec spec;
  spec.name = "spoken-digits";
  spec.data_dir = dir.path.string();
  spec.split = "test";
  spec.options["clips"] = "12";
  const auto set = open_dataset(spec);
  EXPECT_EQ(set->classes(), 11);
  EXPECT_EQ(set->sample_descs().at(kDataInput).shape, (Shape{1, 149, 40}));
  EXPECT_EQ(set->sample_descs().at(kDataLabels).shape, (Shape{7}));
  const nlohmann::json m = manifest(dir.path, "test");
  const std::vector<std::string> words = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
  std::vector<int64_t> all(12);
  std::iota(all.begin(), all.end(), 0);
  const Batch b = set->fetch(all);
  const int64_t* y = b.at(kDataLabels).data_as<int64_t>();
  std::set<size_t> lengths;
  for (size_t i = 0; i < 12; ++i) {
    std::string spoken;
    size_t n = 0;
    for (; n < 7 && y[i * 7 + n] != -100; ++n) {
      ASSERT_GE(y[i * 7 + n], 1);
      ASSERT_LE(y[i * 7 + n], 10);
      spoken += (n ? " " : "") + words[static_cast<size_t>(y[i * 7 + n] - 1)];
    }
    for (size_t k = n; k < 7; ++k) EXPECT_EQ(y[i * 7 + k], -100);
    EXPECT_GE(n, 3u);
    lengths.insert(n);
    EXPECT_EQ(m["clips"][i]["text"], spoken) << i;
    EXPECT_EQ(set->label(static_cast<int64_t>(i)), y[i * 7]);
  }
  EXPECT_GE(lengths.size(), 3u);  // lengths vary over 3-7
  spec.options["min-digits"] = "5";
  spec.options["max-digits"] = "4";
  EXPECT_THROW(open_dataset(spec), InvalidArgument);
}

}  // namespace
}  // namespace d5::speech
