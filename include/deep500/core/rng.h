#pragma once
// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC11). A stream is identified by
// (seed, name): the name is hashed into the key, so adding a new named consumer never shifts the
// numbers any other consumer sees, and any element can be computed without generating the ones
// before it.
#include <array>
#include <cstdint>
#include <string_view>

namespace d5 {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The raw block function: 10 rounds of Philox-4x32.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// 64-bit FNV-1a, used to turn stream names into keys. Stable across platforms and releases.
uint64_t stable_hash(std::string_view s);

class RngStream {
 public:
  RngStream(uint64_t seed, std::string_view name);
  // A sub-stream: same seed, name "<parent>/<child>".
  RngStream child(std::string_view name) const;

  uint32_t next_u32();
  uint64_t next_u64();
  double uniform();                   // [0, 1), 53 random bits
  float uniform_float();              // [0, 1), 24 random bits
  double uniform(double lo, double hi);
  double normal(double mean = 0, double stddev = 1);  // Box-Muller
  uint64_t below(uint64_t n);         // uniform integer in [0, n), unbiased (rejection)

  // Random access: the i-th 32-bit word of this stream without advancing it.
  uint32_t u32_at(uint64_t i) const;

  uint64_t seed() const { return seed_; }
  uint64_t position() const { return position_; }  // words consumed so far
  void seek(uint64_t position) { position_ = position; }

 private:
  uint64_t seed_;
  uint64_t name_hash_;
  PhiloxKey key_;
  uint64_t position_ = 0;
  // The last generated block, cached so sequential draws cost one block per 4 words.
  uint64_t cached_block_ = UINT64_MAX;
  PhiloxCounter cached_{};
};

}  // namespace d5
