// Photo-like JPEG sets in the two container formats (docs/data-bench.md).
#include "deep500/train/synthetic_images.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "lv2/images/jpeg.h"
#include "lv2/images/tar_archive.h"
#include "lv2/images/tfrecord.h"

namespace d5 {

namespace {

// Smooth gradients with pixel noise: compresses like a photograph (a few bits per pixel), unlike
// a flat image whose scan would be nearly empty, or noise that would not compress at all.
RgbImage photo_like(int side, uint64_t seed) {
  RgbImage img;
  img.width = img.height = side;
  img.pixels.resize(static_cast<size_t>(side) * static_cast<size_t>(side) * 3);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> noise(-24, 24);
  const int phase = static_cast<int>(seed % 97);
  for (int y = 0; y < side; ++y) {
    for (int x = 0; x < side; ++x) {
      uint8_t* p = img.pixels.data() + (static_cast<size_t>(y) * static_cast<size_t>(side) + static_cast<size_t>(x)) * 3;
      const int base[3] = {x + phase, y * 2 - phase, (x * y) / side + 3 * phase};
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::clamp(base[c] % 256 + noise(rng), 0, 255));
    }
  }
  return img;
}

void check(const SyntheticImagesOptions& o) {
  D5_CHECK_ARG(o.images >= 1 && o.images <= (int64_t{1} << 24), "synthetic images: images must be in [1, 2^24], got {}",
               o.images);
  D5_CHECK_ARG(o.side >= 8 && o.side <= 4096, "synthetic images: side must be in [8, 4096] pixels, got {}", o.side);
  D5_CHECK_ARG(o.quality >= 1 && o.quality <= 100, "synthetic images: quality must be in [1, 100], got {}", o.quality);
  D5_CHECK_ARG(o.classes >= 1 && o.classes <= 1000, "synthetic images: classes must be in [1, 1000], got {}", o.classes);
  D5_CHECK(jpeg_available(), NotBuilt,
           "synthetic images need TurboJPEG to encode: install libturbojpeg0-dev and rebuild deep500");
}

// Encodes every image in order and hands (index, class, bytes) to `add`.
uint64_t encode_all(const SyntheticImagesOptions& o,
                    const std::function<void(int64_t, int64_t, const std::vector<uint8_t>&)>& add) {
  uint64_t bytes = 0;
  for (int64_t i = 0; i < o.images; ++i) {
    const auto jpeg = encode_jpeg(photo_like(o.side, o.seed + static_cast<uint64_t>(i)), o.quality);
    bytes += jpeg.size();
    add(i, i % o.classes, jpeg);
  }
  return bytes;
}

}  // namespace

SyntheticImageFile write_synthetic_image_tar(const std::string& path, const SyntheticImagesOptions& options) {
  check(options);
  SyntheticImageFile out{path, options.images, 0, 0};
  TarWriter w(path);
  out.jpeg_bytes = encode_all(options, [&](int64_t i, int64_t c, const std::vector<uint8_t>& jpeg) {
    w.add_file(fmt::format("class{:03}/img{:06}.JPEG", c, i), jpeg);
  });
  w.finish();
  out.file_bytes = std::filesystem::file_size(path);
  return out;
}

SyntheticImageFile write_synthetic_image_tfrecord(const std::string& path, const SyntheticImagesOptions& options) {
  check(options);
  SyntheticImageFile out{path, options.images, 0, 0};
  TfRecordWriter w(path);
  out.jpeg_bytes = encode_all(options, [&](int64_t, int64_t c, const std::vector<uint8_t>& jpeg) {
    TfExample ex;
    ex["image/encoded"].kind = TfFeature::Kind::Bytes;
    ex["image/encoded"].bytes.emplace_back(jpeg.begin(), jpeg.end());
    ex["image/class/label"].kind = TfFeature::Kind::Int64;
    ex["image/class/label"].ints.push_back(c);
    w.write(serialize_tf_example(ex));
  });
  w.close();
  out.file_bytes = std::filesystem::file_size(path);
  return out;
}

}  // namespace d5
