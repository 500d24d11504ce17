#pragma once
// Internal: words spoken by eSpeak NG (Debian espeak-ng), as 16-kHz audio for the speech sets.
//
// The espeak-ng program speaks each utterance in a process of its own: its library keeps state
// from one utterance to the next (the same word in the same voice comes out a sample longer or
// shorter, with other values, the second time), and a fresh process is what makes a clip a
// function of its plan. Its 22,050-Hz 16-bit output is read with libsndfile and resampled to
// 16 kHz by libsamplerate's best sinc converter. Calls may run on several threads at once.
#include <string>
#include <vector>

namespace d5::speech {

struct Utterance {
  std::string text;
  std::string voice;  // "<dialect>+<variant>", e.g. "en-us+m3"
  int pitch = 50;     // eSpeak's 0-99 base pitch
  int rate = 175;     // words per minute, 80-450
};

// True when this d5 was built with libsamplerate and libsndfile; the espeak-ng program is looked
// for when a set first speaks (NotBuilt, naming the package, when it is missing).
bool speech_synthesis_built();
// eSpeak NG's version line, e.g. "eSpeak NG text-to-speech: 1.51  Data at: /usr/lib/.../espeak-ng-data".
std::string synthesizer_identity();
// The English dialects the sets speak with (eSpeak's own, not MBROLA's), by their voice file names
// ("en" is British English; "en-gb" names no file).
const std::vector<std::string>& english_dialects();
// The voice variants installed with eSpeak's data (voices/!v), sorted; names with characters
// other than letters and digits are left out (eSpeak's voice syntax cannot name them).
std::vector<std::string> voice_variants();
// The utterance at 16 kHz in [-1, 1]; eSpeak's leading and trailing silence included.
std::vector<float> synthesize(const Utterance& u);

}  // namespace d5::speech
