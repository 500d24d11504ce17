#pragma once
// MD5 (RFC 1321). Only for checking files against checksums that publishers list as MD5 (MNIST,
// CIFAR); it is not collision resistant, so deep500 prefers SHA-256 (sha256.h) wherever one is
// published.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace d5 {

class Md5 {
 public:
  Md5();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 16> digest();
  std::string hex_digest();  // 32 lowercase hex digits

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 4> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

std::string md5_hex(std::string_view data);

}  // namespace d5
