#pragma once
// The message handling MD5 (RFC 1321, 3.1-3.2) and SHA-256 (FIPS 180-4, 5.1.1 and 6.2) share:
// the input is cut into 64-byte blocks for the compression function, and the last block is padded
// with a 1 bit, zeros up to 56 mod 64 bytes, and the message length in bits (little-endian for
// MD5, big-endian for SHA-256).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace d5::detail {

using HashBlock = std::array<uint8_t, 64>;

// Feeds `size` bytes through `compress(const uint8_t* block)`, keeping a partial block in `buffer`.
template <typename Compress>
void hash_absorb(HashBlock& buffer, size_t& buffered, uint64_t& total_bytes, const void* data, size_t size,
                 Compress&& compress) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_bytes += size;
  while (size > 0) {
    const size_t take = std::min(size, buffer.size() - buffered);
    std::memcpy(buffer.data() + buffered, p, take);
    buffered += take;
    p += take;
    size -= take;
    if (buffered == buffer.size()) {
      compress(buffer.data());
      buffered = 0;
    }
  }
}

enum class LengthOrder { little_endian, big_endian };

template <typename Compress>
void hash_pad(HashBlock& buffer, size_t& buffered, uint64_t& total_bytes, LengthOrder order, Compress&& compress) {
  const uint64_t bits = total_bytes * 8;
  const uint8_t one = 0x80, zero = 0;
  hash_absorb(buffer, buffered, total_bytes, &one, 1, compress);
  while (buffered != 56) hash_absorb(buffer, buffered, total_bytes, &zero, 1, compress);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(bits >> (order == LengthOrder::big_endian ? 56 - 8 * i : 8 * i));
  hash_absorb(buffer, buffered, total_bytes, length, 8, compress);
}

inline std::string lowercase_hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace d5::detail
