#include <gtest/gtest.h>

#include <string>

#include "core/digest.h"
#include "deep500/core/error.h"

namespace d5 {
namespace {

// FIPS 180-2, Appendix B: the three SHA-256 examples.
TEST(Sha256, Fips180_2OneBlock) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Fips180_2TwoBlocks) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Fips180_2MillionA) {
  Digest h(DigestKind::sha256);
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk);
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// Lengths around the padding boundary (55, 56, 63, 64 bytes) and any split into update() calls
// give the digest of the whole message.
TEST(Sha256, ChunkingDoesNotMatter) {
  for (size_t len : {55u, 56u, 63u, 64u, 65u, 200u}) {
    std::string msg;
    for (size_t i = 0; i < len; ++i) msg += static_cast<char>('a' + i % 26);
    const std::string whole = sha256_hex(msg);
    for (size_t split = 0; split <= len; split += 7) {
      Digest h(DigestKind::sha256);
      h.update(std::string_view(msg).substr(0, split));
      h.update(std::string_view(msg).substr(split));
      EXPECT_EQ(h.hex_digest(), whole) << "length " << len << " split " << split;
    }
  }
  // 56 bytes of 'a': the length no longer fits the first padded block (known digest).
  EXPECT_EQ(sha256_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

// The test suite of RFC 1321, appendix A.5.
TEST(Md5, MatchesRfc1321TestSuite) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_hex("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5, IncrementalUpdatesEqualOneShot) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Digest h(DigestKind::md5);
  for (size_t i = 0; i < data.size(); i += 37) h.update(std::string_view(data).substr(i, 37));
  EXPECT_EQ(h.hex_digest(), md5_hex(data));
}

// A finished digest cannot silently hash a truncated message.
TEST(Digest, UpdateOrFinishAfterFinishingIsRefused) {
  Digest h(DigestKind::sha256);
  h.update("abc");
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
  EXPECT_THROW(h.update("d"), InvalidArgument);
  EXPECT_THROW(h.hex_digest(), InvalidArgument);
  Digest moved(DigestKind::md5);
  moved.update("a");
  Digest into = std::move(moved);
  EXPECT_EQ(into.hex_digest(), "0cc175b9c0f1b6a831c399e269772661");
}

}  // namespace
}  // namespace d5
