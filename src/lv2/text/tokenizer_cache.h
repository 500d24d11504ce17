#pragma once
// Internal: what the generated text sets share: the hash that splits them, and their tokenizer,
// trained once on the training split and cached in the data directory.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace d5::text {

// Whether an item belongs to the test split: the FNV-1a hash (64 bits) of its key, as a fraction
// of 2^64, is below test_fraction. A function of the item alone, the same on every machine and
// for every seed, so that the splits stay disjoint however the sets are sampled.
bool in_hashed_test_split(std::string_view key, double test_fraction);
// The same with the hash's bits mixed by splitmix64's finalizer before the comparison, for short
// keys. FNV-1a carries a key's last characters into its low bits only, so that the fraction
// hardly depends on them: "0".."9" would all fall into one split, and the numerals of one hundred
// ("4200".."4299") together into one.
bool in_mixed_hash_test_split(std::string_view key, double test_fraction);

// A tokenizer's cache entry: the model is stored as tokenizer-KEY.model beside a manifest,
// tokenizer-KEY.json, holding `sources`, `options`, `notes`' members, the number of training
// sentences and the model's SHA-256. KEY hashes `sources` and `options`, so any change to what
// the sentences are made from or to the options that shape them trains another model.
struct TokenizerCacheEntry {
  std::string cache_dir;
  int64_t vocabulary = 0;     // recorded in options as "vocabulary"
  bool split_digits = false;  // SubwordTokenizer::train's; recorded in options as "split_digits" when set
  nlohmann::json sources = nlohmann::json::object();  // e.g. the SHA-256 of every input file
  nlohmann::json options = nlohmann::json::object();  // a generator tag and the options
  nlohmann::json notes = nlohmann::json::object();    // more manifest members, outside the key
};

// The serialized SentencePiece model of `entry`: read from the cache when its checksum agrees
// with its manifest, else trained on sentences() (called only then) and stored.
std::string cached_tokenizer(TokenizerCacheEntry entry, const std::function<std::vector<std::string>()>& sentences);

}  // namespace d5::text
