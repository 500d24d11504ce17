#include "deep500/core/rng.h"

#include <cmath>
#include <numbers>
#include <string>

namespace d5 {

PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

uint64_t stable_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Key = seed (64 bits); the stream name occupies the upper half of the 128-bit counter and the
// word position the lower half. Distinct (seed, name) pairs therefore never share a block.
RngStream::RngStream(uint64_t seed, std::string_view name)
    : seed_(seed),
      name_hash_(stable_hash(name)),
      key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}

RngStream RngStream::child(std::string_view name) const {
  RngStream c = *this;
  // Hash of "<parent hash>/<name>": children of different parents stay distinct.
  c.name_hash_ = stable_hash(std::to_string(name_hash_) + "/" + std::string(name));
  c.position_ = 0;
  c.cached_block_ = UINT64_MAX;
  return c;
}

uint32_t RngStream::u32_at(uint64_t i) const {
  const uint64_t block = i / 4;
  if (block == cached_block_) return cached_[i % 4];
  const PhiloxCounter ctr{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                          static_cast<uint32_t>(name_hash_), static_cast<uint32_t>(name_hash_ >> 32)};
  return philox4x32_10(ctr, key_)[i % 4];
}

uint32_t RngStream::next_u32() {
  const uint64_t block = position_ / 4;
  if (block != cached_block_) {
    const PhiloxCounter ctr{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                            static_cast<uint32_t>(name_hash_),
                            static_cast<uint32_t>(name_hash_ >> 32)};
    cached_ = philox4x32_10(ctr, key_);
    cached_block_ = block;
  }
  return cached_[position_++ % 4];
}

uint64_t RngStream::next_u64() {
  const uint64_t lo = next_u32();
  const uint64_t hi = next_u32();
  return (hi << 32) | lo;
}

double RngStream::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1p-53; }
float RngStream::uniform_float() { return static_cast<float>(next_u32() >> 8) * 0x1p-24f; }
double RngStream::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double RngStream::normal(double mean, double stddev) {
  // Box-Muller with u1 in (0, 1] so the log is finite. One normal per call keeps the stream's
  // position a simple function of the number of calls.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t RngStream::below(uint64_t n) {
  if (n <= 1) return 0;
  // Rejection sampling removes modulo bias: accept only below the largest multiple of n.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}


}  // namespace d5
