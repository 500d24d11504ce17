// JPEG decoding (TurboJPEG) and the image preprocessing every image dataset applies: decode_jpeg,
// then preprocess_image with the resize/crop sizes from the selector byte (1..16 each), so odd
// image and crop shapes meet the bilinear resize.
#include <cstdint>
#include <vector>

#include "fuzz_common.h"
#include "lv2/images/jpeg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  d5::fuzz::accepts([&] {
    const d5::RgbImage image = d5::decode_jpeg(rest, "fuzz.jpg");
    d5::fuzz::require(image.width > 0 && image.height > 0 &&
                          image.pixels.size() == size_t(image.width) * size_t(image.height) * 3,
                      "decoded JPEG with a pixel count other than width x height x 3");
    d5::ImagePreprocess p;
    p.crop = 1 + (selector & 15);
    p.resize = p.crop + (selector >> 4);
    p.imagenet_normalize = selector & 1;
    std::vector<float> out(size_t(3) * size_t(p.crop) * size_t(p.crop));
    d5::preprocess_image(image, p, out.data());
  });
  return 0;
}
