#include "tokenizer_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/metrics/atomic_file.h"
#include "subword_tokenizer.h"

namespace d5::text {

namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in.good(), IoError, "cannot read '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

bool in_hashed_test_split(std::string_view key, double test_fraction) {
  // stable_hash is FNV-1a, 64 bits.
  return static_cast<double>(stable_hash(key)) < test_fraction * 18446744073709551616.0;
}

bool in_mixed_hash_test_split(std::string_view key, double test_fraction) {
  uint64_t z = stable_hash(key);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z) < test_fraction * 18446744073709551616.0;
}

std::string cached_tokenizer(TokenizerCacheEntry entry, const std::function<std::vector<std::string>()>& sentences) {
  entry.options["vocabulary"] = entry.vocabulary;
  if (entry.split_digits) entry.options["split_digits"] = true;  // absent otherwise: older keys stay valid
  const std::string key = sha256_hex(entry.sources.dump() + entry.options.dump()).substr(0, 16);
  const fs::path model_path = fs::path(entry.cache_dir) / ("tokenizer-" + key + ".model");
  const fs::path manifest_path = fs::path(entry.cache_dir) / ("tokenizer-" + key + ".json");
  if (fs::exists(model_path) && fs::exists(manifest_path)) {
    std::string model = read_text(model_path.string());
    const auto manifest = nlohmann::json::parse(read_text(manifest_path.string()), nullptr, false);
    if (!manifest.is_discarded() && manifest.value("model_sha256", "") == sha256_hex(model)) return model;
  }
  const std::vector<std::string> train = sentences();
  std::string model = SubwordTokenizer::train(train, entry.vocabulary, entry.split_digits);
  std::error_code ec;
  fs::create_directories(entry.cache_dir, ec);
  D5_CHECK(!ec, IoError, "cannot create the data directory '{}': {}", entry.cache_dir, ec.message());
  atomic_write(model_path.string(), model);
  nlohmann::json manifest = entry.notes;
  manifest["sources"] = entry.sources;
  manifest["options"] = entry.options;
  manifest["training_sentences"] = train.size();
  manifest["model"] = model_path.filename().string();
  manifest["model_sha256"] = sha256_hex(model);
  atomic_write(manifest_path.string(), manifest.dump(2) + "\n");
  return model;
}

}  // namespace d5::text
