#include "subword_tokenizer.h"

#include <dlfcn.h>

#include "deep500/core/data_paths.h"
#include "deep500/core/error.h"
#include "sentencepiece_plugin.h"

namespace d5::text {

namespace {

#ifdef D5_HAVE_SENTENCEPIECE
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#define D5_SENTENCEPIECE_PLUGIN_BUILD_PATH ""
#define D5_SENTENCEPIECE_PLUGIN_INSTALLED ""
#endif

// The plugin's entry points, resolved once per process.
struct Plugin {
  decltype(&d5_spm_train) train;
  decltype(&d5_spm_load) load;
  decltype(&d5_spm_encode) encode;
  decltype(&d5_spm_pieces) pieces;
  decltype(&d5_spm_word_starts) word_starts;
  decltype(&d5_spm_unload) unload;
  decltype(&d5_spm_release) release;
};

template <typename F>
F symbol(void* handle, const char* name, const std::string& path) {
  void* s = dlsym(handle, name);
  D5_CHECK(s != nullptr, NotBuilt, "'{}' lacks {}: it is not the plugin of this d5; rebuild deep500", path, name);
  return reinterpret_cast<F>(s);
}

const Plugin& plugin() {
  D5_CHECK(kBuilt, NotBuilt,
           "this d5 was built without SentencePiece, which tokenizes the text datasets: install libsentencepiece-dev "
           "(scripts/install-deps.sh) and rebuild (sanitizer and fuzz builds leave it out: its protobuf copy needs "
           "RTLD_DEEPBIND, which AddressSanitizer cannot run)");
  static const Plugin p = [] {
    const std::string path = locate_data("D5_SENTENCEPIECE_PLUGIN", D5_SENTENCEPIECE_PLUGIN_BUILD_PATH,
                                         D5_SENTENCEPIECE_PLUGIN_INSTALLED);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    D5_CHECK(h != nullptr, NotBuilt, "cannot load the SentencePiece plugin '{}': {} (set D5_SENTENCEPIECE_PLUGIN to "
             "its path, or install libsentencepiece0 and rebuild)", path, dlerror());
    return Plugin{symbol<decltype(&d5_spm_train)>(h, "d5_spm_train", path),
                  symbol<decltype(&d5_spm_load)>(h, "d5_spm_load", path),
                  symbol<decltype(&d5_spm_encode)>(h, "d5_spm_encode", path),
                  symbol<decltype(&d5_spm_pieces)>(h, "d5_spm_pieces", path),
                  symbol<decltype(&d5_spm_word_starts)>(h, "d5_spm_word_starts", path),
                  symbol<decltype(&d5_spm_unload)>(h, "d5_spm_unload", path),
                  symbol<decltype(&d5_spm_release)>(h, "d5_spm_release", path)};
  }();
  return p;
}

// The plugin's message, freed.
std::string take(const Plugin& p, char* error) {
  std::string m = error ? error : "no reason given";
  p.release(error);
  return m;
}

}  // namespace

bool subword_tokenizer_built() { return kBuilt; }

std::string SubwordTokenizer::train(const std::vector<std::string>& sentences, int64_t vocabulary,
                                    bool split_digits) {
  D5_CHECK_ARG(vocabulary >= 8, "a subword vocabulary needs at least 8 pieces, got {}", vocabulary);
  D5_CHECK_ARG(!sentences.empty(), "a subword tokenizer needs sentences to train on");
  const Plugin& p = plugin();
  std::vector<const char*> text;
  std::vector<size_t> lengths;
  for (const auto& s : sentences) {
    text.push_back(s.data());
    lengths.push_back(s.size());
  }
  char *model = nullptr, *error = nullptr;
  size_t size = 0;
  D5_CHECK(p.train(text.data(), lengths.data(), text.size(), vocabulary, kPad, kUnknown, split_digits ? 1 : 0, &model,
                   &size, &error) == 0,
           InvalidArgument, "SentencePiece could not train a {}-piece model on {} sentences: {}", vocabulary,
           sentences.size(), take(p, error));
  std::string out(model, size);
  p.release(model);
  return out;
}

SubwordTokenizer::SubwordTokenizer(const std::string& serialized_model) {
  const Plugin& p = plugin();
  char* error = nullptr;
  D5_CHECK(p.load(serialized_model.data(), serialized_model.size(), &processor_, &error) == 0, FormatError,
           "not a SentencePiece model ({} bytes): {}", serialized_model.size(), take(p, error));
}

SubwordTokenizer::~SubwordTokenizer() {
  if (processor_) plugin().unload(processor_);
}

std::vector<int32_t> SubwordTokenizer::encode(std::string_view text) const {
  const Plugin& p = plugin();
  int32_t* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  D5_CHECK(p.encode(processor_, text.data(), text.size(), &ids, &n, &error) == 0, InvalidArgument,
           "SentencePiece could not encode '{}': {}", text, take(p, error));
  std::vector<int32_t> out(ids, ids + n);
  p.release(ids);
  return out;
}

int64_t SubwordTokenizer::vocabulary() const { return plugin().pieces(processor_); }

std::vector<bool> SubwordTokenizer::word_starts() const {
  const Plugin& p = plugin();
  std::vector<uint8_t> flags(static_cast<size_t>(vocabulary()));
  char* error = nullptr;
  D5_CHECK(p.word_starts(processor_, flags.data(), flags.size(), &error) == 0, Internal,
           "SentencePiece could not list its word-initial pieces: {}", take(p, error));
  return std::vector<bool>(flags.begin(), flags.end());
}

}  // namespace d5::text
