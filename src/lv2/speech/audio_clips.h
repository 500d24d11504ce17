#pragma once
// Internal: clips of the speech sets — an utterance placed in a fixed length of audio, at a
// loudness, over background noise — from a plan of random draws the set makes per clip.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace d5::speech {

inline constexpr int64_t kSampleRate = 16000;

struct ClipPlan {
  int64_t label = 0;
  std::string text;   // empty: noise alone
  std::string voice;  // eSpeak voice, "<dialect>+<variant>"
  int pitch = 50, rate = 175;
  double peak = 0.5;     // the utterance's largest magnitude
  double start = 0;      // where it starts, as a fraction of the room the clip leaves it
  std::string noise;     // "white", "pink", "brown" or empty
  double snr_db = 20;    // noise under an utterance: its RMS this far below the utterance's
  double noise_rms = 0;  // noise alone (no text): its RMS
  uint64_t noise_seed = 0;
};

// Renders the plan into `out`, the whole clip. An utterance longer than the clip is squeezed into
// it (linear interpolation: faster and higher), so no word of it is lost.
void render_clip(const ClipPlan& plan, std::span<float> out);
nlohmann::json describe_clip(const ClipPlan& plan);

// Noise of unit RMS: white (Gaussian), pink (Kellet's three-pole 1/f filter), brown (leaky
// integrated white noise).
std::vector<float> coloured_noise(const std::string& colour, uint64_t seed, int64_t samples);
// The span between the first and last samples at or above 1% of the peak (eSpeak pads words with
// silence).
std::span<const float> trim_silence(std::span<const float> audio);

}  // namespace d5::speech
