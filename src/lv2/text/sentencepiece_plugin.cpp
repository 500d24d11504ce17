// libd5_sentencepiece.so: SentencePiece behind a C interface (sentencepiece_plugin.h says why).
#include "sentencepiece_plugin.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

class Sentences : public sentencepiece::SentenceIterator {
 public:
  Sentences(const char* const* s, const size_t* n, size_t count) : s_(s), n_(n), count_(count) { load(); }
  bool done() const override { return i_ >= count_; }
  void Next() override {
    ++i_;
    load();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (i_ < count_) current_.assign(s_[i_], n_[i_]);
  }
  const char* const* s_;
  const size_t* n_;
  size_t count_, i_ = 0;
  std::string current_;
};

char* copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

int fail(char** error, const std::string& message) {
  *error = copy(message);
  return 1;
}

}  // namespace

extern "C" {

int d5_spm_train(const char* const* sentences, const size_t* lengths, size_t count, int64_t vocabulary,
                 int32_t pad_id, int32_t unknown_id, int split_digits, char** model, size_t* model_size,
                 char** error) {
  try {
    Sentences it(sentences, lengths, count);
    std::string out;
    // One thread: the model is then a function of the sentences alone. hard_vocab_limit=false: a
    // small corpus yields fewer pieces instead of an error.
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        {{"model_type", "unigram"},
         {"vocab_size", std::to_string(vocabulary)},
         {"hard_vocab_limit", "false"},
         {"character_coverage", "1.0"},
         {"pad_id", std::to_string(pad_id)},
         {"unk_id", std::to_string(unknown_id)},
         {"bos_id", "-1"},
         {"eos_id", "-1"},
         {"split_digits", split_digits != 0 ? "true" : "false"},
         {"num_threads", "1"},
         {"minloglevel", "2"}},
        &it, &out);
    if (!status.ok()) return fail(error, status.ToString());
    *model = static_cast<char*>(std::malloc(out.size()));
    if (!*model) return fail(error, "out of memory for the model");
    std::memcpy(*model, out.data(), out.size());
    *model_size = out.size();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int d5_spm_load(const char* model, size_t model_size, void** processor, char** error) {
  try {
    auto* p = new sentencepiece::SentencePieceProcessor();
    const auto status = p->LoadFromSerializedProto(std::string_view(model, model_size));
    if (!status.ok()) {
      delete p;
      return fail(error, status.ToString());
    }
    *processor = p;
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int d5_spm_encode(const void* processor, const char* text, size_t length, int32_t** ids, size_t* count,
                  char** error) {
  try {
    std::vector<int> out;
    const auto status =
        static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->Encode(std::string_view(text, length), &out);
    if (!status.ok()) return fail(error, status.ToString());
    *ids = static_cast<int32_t*>(std::malloc(std::max<size_t>(1, out.size()) * sizeof(int32_t)));
    if (!*ids) return fail(error, "out of memory for the ids");
    for (size_t i = 0; i < out.size(); ++i) (*ids)[i] = out[i];
    *count = out.size();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int64_t d5_spm_pieces(const void* processor) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

int d5_spm_word_starts(const void* processor, uint8_t* starts, size_t count, char** error) {
  try {
    const auto* p = static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
    if (count > static_cast<size_t>(p->GetPieceSize())) return fail(error, "more ids asked for than the model has");
    static constexpr std::string_view kWordBoundary = "\xE2\x96\x81";  // U+2581, SentencePiece's space
    for (size_t id = 0; id < count; ++id) {
      const int i = static_cast<int>(id);
      const bool piece = !p->IsControl(i) && !p->IsUnknown(i) && !p->IsUnused(i);
      starts[id] = piece && p->IdToPiece(i).starts_with(kWordBoundary) ? 1 : 0;
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

void d5_spm_unload(void* processor) { delete static_cast<sentencepiece::SentencePieceProcessor*>(processor); }

void d5_spm_release(void* buffer) { std::free(buffer); }

}  // extern "C"
