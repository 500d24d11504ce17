#pragma once
// Temporary directories and synthetic images for the image dataset tests.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"
#include "lv2/images/jpeg.h"
#include "lv2/images/register_images.h"

#ifdef D5_HAVE_TURBOJPEG
#define D5_REQUIRE_JPEG() (void)0
#else
#define D5_REQUIRE_JPEG() GTEST_SKIP() << "built without TurboJPEG (D5_HAVE_TURBOJPEG off)"
#endif

#include "../../../support/temp_dir.h"

namespace d5::test {

// A smooth image (gradients per channel, shifted by `seed`): JPEG keeps it within a few levels.
inline RgbImage gradient_image(int w, int h, int seed = 0) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixels.data() + (static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)) * 3;
      p[0] = static_cast<uint8_t>((x * 255 / std::max(1, w - 1) + seed * 37) % 256);
      p[1] = static_cast<uint8_t>((y * 255 / std::max(1, h - 1) + seed * 11) % 256);
      p[2] = static_cast<uint8_t>(((x + y) * 127 / std::max(1, w + h - 2) + seed * 5) % 256);
    }
  }
  return img;
}

// A spec for format `name` over `dir`, with the image formats registered.
inline DatasetSpec dataset_spec(const std::string& name, const std::string& dir,
                                std::map<std::string, std::string> options = {}, const std::string& split = "train") {
  register_image_datasets();
  DatasetSpec s;
  s.name = name;
  s.data_dir = dir;
  s.split = split;
  s.options = std::move(options);
  return s;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// Expects a d5::FormatError whose message contains every one of `parts`.
#define D5_EXPECT_FORMAT_ERROR(stmt, ...)                                        \
  do {                                                                           \
    try {                                                                        \
      stmt;                                                                      \
      ADD_FAILURE() << "expected FormatError from " #stmt;                       \
    } catch (const ::d5::FormatError& d5_format_error_) {                                       \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__}) {    \
        EXPECT_NE(std::string(d5_format_error_.what()).find(part), std::string::npos)          \
            << "message lacks '" << part << "': " << d5_format_error_.what();                   \
      }                                                                          \
    }                                                                            \
  } while (0)

}  // namespace d5::test
