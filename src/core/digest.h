#pragma once
// Internal: message digests from OpenSSL's libcrypto. SHA-256 names content-addressed caches
// (compiled custom operators) where a collision would silently load the wrong code; MD5 only
// checks files against the checksums their publishers list as MD5 (MNIST, CIFAR).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace d5 {

enum class DigestKind { md5, sha256 };
const char* to_string(DigestKind k);

// An incremental digest. hex_digest() finishes it; updating or finishing again afterwards is an
// InvalidArgument (a caller bug that would otherwise hash a truncated message).
class Digest {
 public:
  explicit Digest(DigestKind kind);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex_digest();  // lowercase hex: 32 digits for MD5, 64 for SHA-256
  DigestKind kind() const { return kind_; }

 private:
  struct Context;
  DigestKind kind_;
  std::unique_ptr<Context> ctx_;
  bool finished_ = false;
};

std::string md5_hex(std::string_view data);
std::string sha256_hex(std::string_view data);
// The digest of a file's bytes, read in blocks; IoError naming the file when it cannot be opened or
// read to its end.
std::string file_hex_digest(const std::string& path, DigestKind kind);

}  // namespace d5
