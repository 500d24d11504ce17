#pragma once
// Photo-like JPEG sets written as an indexed tar ("image-tar") or a TFRecord file ("tfrecord") with
// the same encoded bytes in both (docs/data-bench.md), so that a comparison of the two formats
// measures the container, not the images. Needs TurboJPEG (NotBuilt without it).
#include <cstdint>
#include <string>

namespace d5 {

struct SyntheticImagesOptions {
  int64_t images = 512;
  int side = 256;      // pixels, square
  int quality = 90;    // JPEG quality 1..100
  int64_t classes = 8; // image i has class i % classes
  uint64_t seed = 0;   // image i is drawn from seed + i
};

struct SyntheticImageFile {
  std::string path;
  int64_t images = 0;
  uint64_t jpeg_bytes = 0;  // the encoded images alone
  uint64_t file_bytes = 0;  // the container
};

// A tar of class{:03}/img{:06}.JPEG members (what "image-tar" reads); InvalidArgument for bad
// options, IoError when the file cannot be written.
SyntheticImageFile write_synthetic_image_tar(const std::string& path, const SyntheticImagesOptions& options);
// One TFRecord file of tf.Examples with image/encoded and image/class/label (what "tfrecord" reads).
SyntheticImageFile write_synthetic_image_tfrecord(const std::string& path, const SyntheticImagesOptions& options);

}  // namespace d5
