#include <gtest/gtest.h>

#include "data_test_util.h"
#include "deep500/md5.h"

namespace d5::test {

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
  Md5 h;
  for (size_t i = 0; i < data.size(); i += 37) h.update(std::string_view(data).substr(i, 37));
  EXPECT_EQ(h.hex_digest(), md5_hex(data));
}

// The shared MNIST files carry the MD5s their README (and torchvision) publish.
TEST(Md5, MnistTestFilesHaveTheirPublishedMd5) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  const auto images = read_bytes(kMnistDir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(md5_hex(std::string_view(reinterpret_cast<const char*>(images.data()), images.size())),
            "9fb629c4189551a2d022fa330f9573f3");
}

}  // namespace d5::test
