#include <gtest/gtest.h>

#include "data_test_util.h"
#include "core/digest.h"

namespace d5::test {

// The shared MNIST files carry the MD5s their README (and torchvision) publish.
TEST(Md5, MnistTestFilesHaveTheirPublishedMd5) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  const auto images = read_bytes(kMnistDir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(md5_hex(std::string_view(reinterpret_cast<const char*>(images.data()), images.size())),
            "9fb629c4189551a2d022fa330f9573f3");
}

}  // namespace d5::test
