// Clips of the speech sets (audio_clips.h).
#include "audio_clips.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "speech_synthesis.h"

namespace d5::speech {

namespace {

double rms(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return x.empty() ? 0.0 : std::sqrt(s / static_cast<double>(x.size()));
}

}  // namespace

std::vector<float> coloured_noise(const std::string& colour, uint64_t seed, int64_t samples) {
  RngStream rng(seed, "noise/" + colour);
  std::vector<float> out(static_cast<size_t>(samples));
  double b0 = 0, b1 = 0, b2 = 0, level = 0;
  for (auto& v : out) {
    const double w = rng.normal();
    if (colour == "white") {
      v = static_cast<float>(w);
    } else if (colour == "pink") {
      b0 = 0.99765 * b0 + w * 0.0990460;
      b1 = 0.96300 * b1 + w * 0.2965164;
      b2 = 0.57000 * b2 + w * 1.0526913;
      v = static_cast<float>(b0 + b1 + b2 + w * 0.1848);
    } else if (colour == "brown") {
      level = 0.995 * level + w;
      v = static_cast<float>(level);
    } else {
      D5_THROW(InvalidArgument, "noise colour must be white, pink or brown, got '{}'", colour);
    }
  }
  const double r = rms(out);
  if (r > 0)
    for (auto& v : out) v = static_cast<float>(v / r);
  return out;
}

std::span<const float> trim_silence(std::span<const float> audio) {
  float peak = 0;
  for (float v : audio) peak = std::max(peak, std::abs(v));
  if (peak == 0) return audio.subspan(0, 0);
  size_t first = 0, last = audio.size();
  while (std::abs(audio[first]) < 0.01f * peak) ++first;
  while (std::abs(audio[last - 1]) < 0.01f * peak) --last;
  return audio.subspan(first, last - first);
}

void render_clip(const ClipPlan& plan, std::span<float> out) {
  const auto length = static_cast<int64_t>(out.size());
  std::fill(out.begin(), out.end(), 0.0f);
  double speech_rms = 0;
  if (!plan.text.empty()) {
    const std::vector<float> spoken = synthesize({plan.text, plan.voice, plan.pitch, plan.rate});
    std::span<const float> word = trim_silence(spoken);
    // Every word counts (a digit sequence's label names each): a rare utterance longer than the
    // clip is squeezed into it by linear interpolation, faster and higher, never cut.
    std::vector<float> squeezed;
    if (static_cast<int64_t>(word.size()) > length) {
      squeezed.resize(out.size());
      const double step = static_cast<double>(word.size() - 1) / static_cast<double>(out.size() - 1);
      for (size_t i = 0; i < out.size(); ++i) {
        const double at = static_cast<double>(i) * step;
        const auto k = std::min(static_cast<size_t>(at), word.size() - 2);
        squeezed[i] = static_cast<float>(word[k] + (at - static_cast<double>(k)) * (word[k + 1] - word[k]));
      }
      word = squeezed;
    }
    float peak = 0;
    for (float v : word) peak = std::max(peak, std::abs(v));
    const double gain = peak > 0 ? plan.peak / peak : 0.0;
    const auto room = static_cast<double>(length - static_cast<int64_t>(word.size()));
    const auto at = static_cast<size_t>(std::floor(plan.start * room));
    for (size_t i = 0; i < word.size(); ++i) out[at + i] = static_cast<float>(word[i] * gain);
    speech_rms = rms(word) * gain;
  }
  if (plan.noise.empty()) return;
  const double level = plan.text.empty() ? plan.noise_rms : speech_rms / std::pow(10.0, plan.snr_db / 20.0);
  const std::vector<float> noise = coloured_noise(plan.noise, plan.noise_seed, length);
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::clamp(out[i] + static_cast<float>(level * noise[i]), -1.0f, 1.0f);
}

nlohmann::json describe_clip(const ClipPlan& p) {
  nlohmann::json j = {{"label", p.label}, {"text", p.text}};
  if (!p.text.empty()) {
    j["voice"] = p.voice;
    j["pitch"] = p.pitch;
    j["rate"] = p.rate;
    j["peak"] = p.peak;
  }
  if (!p.noise.empty()) {
    j["noise"] = p.noise;
    if (p.text.empty()) j["noise_rms"] = p.noise_rms;
    else j["snr_db"] = p.snr_db;
  }
  return j;
}

}  // namespace d5::speech
