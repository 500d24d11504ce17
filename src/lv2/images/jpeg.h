#pragma once
// JPEG decoding and encoding through TurboJPEG, and the preprocessing image datasets share:
// shorter side resized (bilinear), center crop, [0,1] scaling, optional ImageNet normalization
// (docs/image-datasets.md). Without TurboJPEG (D5_HAVE_TURBOJPEG off at build time) every call
// throws Unimplemented saying so.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace d5 {

bool jpeg_available();

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, row-major, RGB interleaved
};

// Grayscale and CMYK JPEGs come back as RGB. FormatError naming `what` (a file or member) for
// data that is not a valid JPEG, including truncated or damaged scans.
RgbImage decode_jpeg(std::span<const uint8_t> jpeg, const std::string& what);
// quality in [1, 100]; 4:2:0 chroma subsampling.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality = 90);

struct ImagePreprocess {
  int resize = 256;        // shorter side, before cropping
  int crop = 224;          // side of the square center crop; the sample is [3, crop, crop]
  bool imagenet_normalize = false;  // (x - mean) / std with the ImageNet channel statistics
};

// Resizes (bilinear, pixel centers aligned, as OpenCV's INTER_LINEAR) so the shorter side is
// `resize`, takes the center `crop` x `crop` square and writes it planar as float into
// out[3 * crop * crop]. Only the cropped pixels are computed.
void preprocess_image(const RgbImage& image, const ImagePreprocess& p, float* out);

// decode_jpeg + preprocess_image.
void decode_jpeg_into(std::span<const uint8_t> jpeg, const std::string& what, const ImagePreprocess& p, float* out);

}  // namespace d5
