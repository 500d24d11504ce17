#pragma once
// Helpers for the data tests: scratch directories, file bytes, and the shared MNIST copy.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../../../support/expect_error.h"
#include "../../../support/temp_dir.h"

namespace d5::test {

inline const std::string kMnistDir = D5_SOURCE_DIR "/../shared/data/mnist";

inline bool have_mnist() {
  return std::filesystem::exists(kMnistDir + "/t10k-images-idx3-ubyte.gz") &&
         std::filesystem::exists(kMnistDir + "/t10k-labels-idx1-ubyte.gz");
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace d5::test
