#include "core/digest.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <vector>

#include "deep500/core/error.h"

namespace d5 {

namespace {

// OpenSSL's own text for the error it queued, so a failure (a FIPS provider refusing MD5, say)
// tells the user which library said no and why.
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "no error queued by OpenSSL";
  std::array<char, 256> text{};
  ERR_error_string_n(code, text.data(), text.size());
  return text.data();
}

const EVP_MD* algorithm(DigestKind k) { return k == DigestKind::md5 ? EVP_md5() : EVP_sha256(); }

}  // namespace

const char* to_string(DigestKind k) { return k == DigestKind::md5 ? "MD5" : "SHA-256"; }

struct Digest::Context {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Digest::Digest(DigestKind kind) : kind_(kind), ctx_(std::make_unique<Context>()) {
  D5_CHECK(ctx_->ctx != nullptr, Internal, "OpenSSL could not allocate a digest context: {}", openssl_error());
  D5_CHECK(EVP_DigestInit_ex(ctx_->ctx, algorithm(kind), nullptr) == 1, Unimplemented,
           "OpenSSL's libcrypto refuses {} here ({}); a FIPS-only configuration disables MD5",
           to_string(kind), openssl_error());
}

Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(const void* data, size_t size) {
  D5_CHECK_ARG(!finished_, "{} digest updated after hex_digest() finished it", to_string(kind_));
  D5_CHECK(EVP_DigestUpdate(ctx_->ctx, data, size) == 1, Internal, "OpenSSL {} update failed: {}",
           to_string(kind_), openssl_error());
}

std::string Digest::hex_digest() {
  D5_CHECK_ARG(!finished_, "{} digest finished twice", to_string(kind_));
  finished_ = true;
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int size = 0;
  D5_CHECK(EVP_DigestFinal_ex(ctx_->ctx, md.data(), &size) == 1, Internal, "OpenSSL {} finish failed: {}",
           to_string(kind_), openssl_error());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 0xf];
  }
  return hex;
}

std::string md5_hex(std::string_view data) {
  Digest d(DigestKind::md5);
  d.update(data);
  return d.hex_digest();
}

std::string sha256_hex(std::string_view data) {
  Digest d(DigestKind::sha256);
  d.update(data);
  return d.hex_digest();
}

std::string file_hex_digest(const std::string& path, DigestKind kind) {
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in, IoError, "cannot open '{}' to compute its {}", path, to_string(kind));
  Digest digest(kind);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    digest.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  D5_CHECK(in.eof(), IoError, "cannot read '{}' to compute its {}", path, to_string(kind));
  return digest.hex_digest();
}

}  // namespace d5
