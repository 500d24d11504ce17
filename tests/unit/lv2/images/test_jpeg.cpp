#include <gtest/gtest.h>

#include <cmath>

#include "deep500/core/error.h"
#include "lv2/images/jpeg.h"
#include "image_test_util.h"

namespace d5 {
namespace {

TEST(Jpeg, AvailabilityMatchesBuild) {
#ifdef D5_HAVE_TURBOJPEG
  EXPECT_TRUE(jpeg_available());
#else
  EXPECT_FALSE(jpeg_available());
  EXPECT_THROW(decode_jpeg(std::vector<uint8_t>{1, 2}, "x"), Unimplemented);
#endif
}

TEST(Jpeg, RoundTripStaysClose) {
  D5_REQUIRE_JPEG();
  const RgbImage img = test::gradient_image(64, 48, 3);
  const auto jpeg = encode_jpeg(img, 95);
  ASSERT_GT(jpeg.size(), 100u);
  EXPECT_EQ(jpeg[0], 0xFF);
  EXPECT_EQ(jpeg[1], 0xD8);
  const RgbImage back = decode_jpeg(jpeg, "roundtrip");
  ASSERT_EQ(back.width, 64);
  ASSERT_EQ(back.height, 48);
  double err = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) err += std::abs(int{img.pixels[i]} - int{back.pixels[i]});
  // Quality 95 on a smooth gradient: the mean error is about one level; 3 leaves room for
  // chroma subsampling at the wrap-around edges of the red channel.
  EXPECT_LT(err / static_cast<double>(img.pixels.size()), 3.0);
}

TEST(Jpeg, CorruptAndTruncatedDataAreFormatErrors) {
  D5_REQUIRE_JPEG();
  const auto jpeg = encode_jpeg(test::gradient_image(64, 64), 90);
  D5_EXPECT_FORMAT_ERROR(decode_jpeg(std::vector<uint8_t>(100, 7), "garbage.jpg"), "garbage.jpg");
  D5_EXPECT_FORMAT_ERROR(decode_jpeg(std::vector<uint8_t>{}, "empty.jpg"), "empty.jpg");
  const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 2 / 3));
  D5_EXPECT_FORMAT_ERROR(decode_jpeg(cut, "cut.jpg"), "cut.jpg", "corrupt");
}

// Found by fuzz_jpeg (fuzz/regressions/jpeg): 54 bytes whose header declared 13825x14335 pixels
// made decode_jpeg allocate and fill 594 MB before the missing scan was noticed (over a second).
// A header that declares more pixels than the bytes can hold is a FormatError before any of that.
TEST(Jpeg, HeaderDeclaringMorePixelsThanTheDataCanHoldIsFormatError) {
  D5_REQUIRE_JPEG();
  std::vector<uint8_t> jpeg = encode_jpeg(test::gradient_image(16, 16, 1), 90);
  size_t sof = 0;
  while (sof + 9 < jpeg.size() && !(jpeg[sof] == 0xff && jpeg[sof + 1] == 0xc0)) ++sof;
  ASSERT_LT(sof + 9, jpeg.size()) << "no SOF0 marker";
  jpeg[sof + 5] = 0x36;  // height 13825
  jpeg[sof + 6] = 0x01;
  jpeg[sof + 7] = 0x37;  // width 14335
  jpeg[sof + 8] = 0xff;
  D5_EXPECT_FORMAT_ERROR(decode_jpeg(jpeg, "big.jpg"), "big.jpg", "14335x13825", "truncated or corrupt");
  // The stored input starts with the harness's selector byte.
  const auto stored = test::read_bytes(D5_SOURCE_DIR "/fuzz/regressions/jpeg/declares-13825x14335-in-54-bytes");
  D5_EXPECT_FORMAT_ERROR(decode_jpeg(std::span(stored).subspan(1), "stored.jpg"), "stored.jpg", "13825x14335");
}

TEST(Jpeg, ValidImageDecodesAfterAFailureOnTheSameThread) {
  D5_REQUIRE_JPEG();
  const auto jpeg = encode_jpeg(test::gradient_image(40, 24), 90);
  auto wiped = jpeg;
  for (size_t k = wiped.size() / 3; k < wiped.size(); ++k) wiped[k] = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(decode_jpeg(wiped, "wiped.jpg"), FormatError);
    const RgbImage ok = decode_jpeg(jpeg, "ok.jpg");
    EXPECT_EQ(ok.width, 40);
    EXPECT_EQ(ok.height, 24);
  }
}

TEST(Preprocess, IdentityWhenSizesMatch) {
  const RgbImage img = test::gradient_image(8, 8, 1);
  std::vector<float> out(3 * 8 * 8);
  preprocess_image(img, ImagePreprocess{8, 8, false}, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        const float want = img.pixels[static_cast<size_t>((y * 8 + x) * 3 + c)] / 255.0f;
        EXPECT_FLOAT_EQ(out[static_cast<size_t>((c * 8 + y) * 8 + x)], want);
      }
    }
  }
}

TEST(Preprocess, BilinearHalvingAveragesPairsAndCropsCenter) {
  // Width 8 -> 4: with centers aligned, output x samples source 2x + 0.5, the mean of columns
  // 2x and 2x+1. Height 4 (shorter side) is the resize target, 2 keeps the aspect: 8x4 -> 4x2.
  RgbImage img;
  img.width = 8;
  img.height = 4;
  img.pixels.resize(8 * 4 * 3);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 8; ++x) {
      for (int c = 0; c < 3; ++c) img.pixels[static_cast<size_t>((y * 8 + x) * 3 + c)] = static_cast<uint8_t>(10 * x + 50 * y + c);
    }
  }
  std::vector<float> out(3 * 2 * 2);
  preprocess_image(img, ImagePreprocess{2, 2, false}, out.data());
  // Resized 4x2; crop 2x2 takes resized columns 1..2, rows 0..1.
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 2; ++x) {
        const double sx = 2.0 * (x + 1) + 0.5, sy = 2.0 * y + 0.5;
        const double want = (10 * sx + 50 * sy + c) / 255.0;
        EXPECT_NEAR(out[static_cast<size_t>((c * 2 + y) * 2 + x)], want, 1e-5);
      }
    }
  }
}

TEST(Preprocess, ImagenetNormalization) {
  RgbImage img;
  img.width = img.height = 4;
  img.pixels.assign(4 * 4 * 3, 128);
  std::vector<float> out(3 * 2 * 2);
  preprocess_image(img, ImagePreprocess{4, 2, true}, out.data());
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(out[static_cast<size_t>(c * 4)], (128 / 255.0f - mean[c]) / stdev[c], 1e-5);
}

TEST(Preprocess, RejectsCropLargerThanResize) {
  const RgbImage img = test::gradient_image(8, 8);
  std::vector<float> out(3 * 8 * 8);
  EXPECT_THROW(preprocess_image(img, ImagePreprocess{4, 8, false}, out.data()), InvalidArgument);
}

}  // namespace
}  // namespace d5
