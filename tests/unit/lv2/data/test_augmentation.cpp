// Augmentation transforms: exact geometry, and randomness that depends only on (seed, epoch, index).
#include <gtest/gtest.h>

#include <set>

#include "deep500/train/augmentation.h"
#include "deep500/core/error.h"

namespace d5::test {

namespace {

// N images of C x H x W with distinct positive values (so zeros can only come from padding/cutout).
Batch images(int64_t n, int64_t c, int64_t h, int64_t w) {
  Tensor x(DType::f32, Shape{n, c, h, w});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 1.0 + static_cast<double>(i));
  return {{kDataInput, x}};
}

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

// Applies `t` to a deep copy of `b` (copies of a Tensor share their buffer).
Tensor applied(const BatchTransform& t, Batch b, const std::vector<int64_t>& indices, int64_t epoch) {
  b[kDataInput] = b.at(kDataInput).clone();
  t.apply(b, indices, epoch);
  return b.at(kDataInput);
}

// Image b of a batch as a new [1, C, H, W] tensor.
Tensor image(const Tensor& x, int64_t b) {
  const auto& d = x.shape().dims();
  Tensor out(DType::f32, Shape{1, d[1], d[2], d[3]});
  const int64_t per = out.numel();
  for (int64_t i = 0; i < per; ++i) out.set(i, x.get(b * per + i));
  return out;
}

}  // namespace

TEST(Augmentation, RandomChoicesDependOnlyOnSeedEpochAndIndex) {
  const RandomCrop crop(3, 11);
  const HorizontalFlip flip(11);
  const Cutout cutout(3, 11);
  for (const BatchTransform* t : std::initializer_list<const BatchTransform*>{&crop, &flip, &cutout}) {
    const Batch all = images(8, 2, 6, 6);
    const Tensor full = applied(*t, all, range(100, 108), 4);
    // The same samples in another batch, in another order, give the same results.
    Batch pair = images(2, 2, 6, 6);
    pair[kDataInput] = Tensor(DType::f32, Shape{2, 2, 6, 6});
    for (int64_t i = 0; i < 72; ++i) {
      pair[kDataInput].set(i, all.at(kDataInput).get(5 * 72 + i));
      pair[kDataInput].set(72 + i, all.at(kDataInput).get(2 * 72 + i));
    }
    const Tensor swapped = applied(*t, pair, {105, 102}, 4);
    EXPECT_TRUE(allclose(image(swapped, 0), image(full, 5), 0, 0)) << t->describe();
    EXPECT_TRUE(allclose(image(swapped, 1), image(full, 2), 0, 0)) << t->describe();
    // Repeating is exact; another epoch draws again.
    EXPECT_TRUE(allclose(applied(*t, all, range(100, 108), 4), full, 0, 0)) << t->describe();
    EXPECT_FALSE(allclose(applied(*t, all, range(100, 108), 5), full, 0, 0)) << t->describe();
  }
  // Another seed draws differently.
  const Batch all = images(8, 1, 6, 6);
  EXPECT_FALSE(allclose(applied(RandomCrop(3, 12), all, range(0, 8), 0), applied(crop, all, range(0, 8), 0), 0, 0));
}

TEST(Augmentation, FlipTwiceIsIdentityAndFlipsAboutHalf) {
  const HorizontalFlip flip(5);
  Batch b = images(200, 3, 4, 5);
  const Tensor original = b.at(kDataInput).clone();
  const auto idx = range(0, 200);
  flip.apply(b, idx, 2);
  int flipped = 0;
  for (int64_t s = 0; s < 200; ++s) {
    const bool was_flipped = b.at(kDataInput).at<float>({s, 0, 0, 0}) == original.at<float>({s, 0, 0, 4});
    flipped += was_flipped;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 4; ++y)
        for (int64_t x = 0; x < 5; ++x)
          ASSERT_EQ(b.at(kDataInput).at<float>({s, c, y, x}), original.at<float>({s, c, y, was_flipped ? 4 - x : x}));
  }
  // Binomial(200, 0.5): 100 +- 3.5 standard deviations.
  EXPECT_GT(flipped, 65);
  EXPECT_LT(flipped, 135);
  flip.apply(b, idx, 2);
  EXPECT_TRUE(allclose(b.at(kDataInput), original, 0, 0));
  Batch never = images(10, 1, 2, 2);
  HorizontalFlip(5, 0.0).apply(never, range(0, 10), 0);
  EXPECT_TRUE(allclose(never.at(kDataInput), images(10, 1, 2, 2).at(kDataInput), 0, 0));
}

TEST(Augmentation, CropWithoutPaddingIsIdentity) {
  const Batch b = images(6, 3, 7, 9);
  EXPECT_TRUE(allclose(applied(RandomCrop(0, 1), b, range(0, 6), 0), b.at(kDataInput), 0, 0));
}

// Each crop is the image shifted by some (dy, dx) in [-p, p]^2 with zeros where the shift leaves
// the image, and over many samples most of the (2p+1)^2 shifts occur.
TEST(Augmentation, CropIsAShiftWithZeroPadding) {
  const int64_t p = 2, n = 300, h = 5, w = 6;
  const Batch b = images(n, 2, h, w);
  const Tensor out = applied(RandomCrop(p, 9), b, range(0, n), 1);
  std::set<std::pair<int64_t, int64_t>> shifts;
  for (int64_t s = 0; s < n; ++s) {
    bool matched = false;
    for (int64_t dy = -p; dy <= p && !matched; ++dy)
      for (int64_t dx = -p; dx <= p && !matched; ++dx) {
        bool ok = true;
        for (int64_t c = 0; c < 2 && ok; ++c)
          for (int64_t y = 0; y < h && ok; ++y)
            for (int64_t x = 0; x < w && ok; ++x) {
              const int64_t sy = y + dy, sx = x + dx;
              const float expect = sy >= 0 && sy < h && sx >= 0 && sx < w ? b.at(kDataInput).at<float>({s, c, sy, sx}) : 0.0f;
              ok = out.at<float>({s, c, y, x}) == expect;
            }
        if (ok) {
          matched = true;
          shifts.insert({dy, dx});
        }
      }
    ASSERT_TRUE(matched) << "sample " << s << " is not a padded shift";
  }
  EXPECT_GE(shifts.size(), 22u);  // of 25; each has probability 1/25 per sample, 300 samples
  // A smaller window: the output has the requested size.
  EXPECT_EQ(applied(RandomCrop(1, 9, 3, 4), b, range(0, n), 0).shape(), (Shape{n, 2, 3, 4}));
  EXPECT_THROW(applied(RandomCrop(0, 9, 6, 6), b, range(0, n), 0), InvalidArgument);
}

TEST(Augmentation, NormalizeUsesPerChannelMeanAndStd) {
  Batch b = images(2, 3, 1, 2);
  const Tensor x = b.at(kDataInput).clone();
  Normalize({1, 2, 3}, {2, 4, 0.5}).apply(b, range(0, 2), 0);
  const double mean[] = {1, 2, 3}, sd[] = {2, 4, 0.5};
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 2; ++i)
        EXPECT_FLOAT_EQ(b.at(kDataInput).at<float>({s, c, 0, i}),
                        static_cast<float>((x.at<float>({s, c, 0, i}) - mean[c]) / sd[c]));
  Batch one = images(1, 3, 1, 1);
  Normalize({0.5}, {0.25}).apply(one, range(0, 1), 0);
  EXPECT_FLOAT_EQ(one.at(kDataInput).get(2), (3.0f - 0.5f) / 0.25f);
  EXPECT_THROW(Normalize({1, 2}, {1, 1}).apply(one, range(0, 1), 0), InvalidArgument);
  EXPECT_THROW(Normalize({1}, {0}), InvalidArgument);
}

// Cutout zeroes one axis-aligned rectangle per image, the same in every channel: size x size
// where it fits, clipped at the border otherwise (at least (size/2)^2 pixels).
TEST(Augmentation, CutoutZeroesAClippedSquare) {
  const int64_t n = 200, h = 10, w = 10, size = 4;
  const Batch b = images(n, 2, h, w);
  const Tensor out = applied(Cutout(size, 3), b, range(0, n), 0);
  int full_squares = 0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t y0 = h, y1 = -1, x0 = w, x1 = -1, zeros = 0;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const bool cut = out.at<float>({s, 0, y, x}) == 0.0f;
        ASSERT_EQ(cut, out.at<float>({s, 1, y, x}) == 0.0f);
        if (!cut) {
          ASSERT_EQ(out.at<float>({s, 0, y, x}), b.at(kDataInput).at<float>({s, 0, y, x}));
          continue;
        }
        ++zeros;
        y0 = std::min(y0, y), y1 = std::max(y1, y), x0 = std::min(x0, x), x1 = std::max(x1, x);
      }
    const int64_t rect = (y1 - y0 + 1) * (x1 - x0 + 1);
    ASSERT_EQ(zeros, rect) << "sample " << s << ": the cut is not a rectangle";
    ASSERT_LE(y1 - y0 + 1, size);
    ASSERT_LE(x1 - x0 + 1, size);
    ASSERT_GE(zeros, (size / 2) * (size / 2));
    full_squares += zeros == size * size;
  }
  // The centre is uniform over 100 pixels; the square (rows cy-2 .. cy+1) is whole for centres in
  // [2, 8]^2: 49%, so 98 of 200 expected, standard deviation 7.
  EXPECT_GT(full_squares, 70);
  EXPECT_LT(full_squares, 126);
  EXPECT_TRUE(allclose(applied(Cutout(size, 3, 0.0), b, range(0, n), 0), b.at(kDataInput), 0, 0));
}

TEST(Augmentation, ParsesACommandLineSpec) {
  const auto seq = parse_augmentation("crop=4,flip,cutout=8:0.5,normalize=0.49/0.48/0.45:0.25/0.24/0.26", 1);
  EXPECT_EQ(seq->size(), 4u);
  EXPECT_NE(seq->describe().find("random crop with zero padding 4"), std::string::npos) << seq->describe();
  EXPECT_NE(seq->describe().find("cutout 8x8 (p=0.5)"), std::string::npos) << seq->describe();
  Batch b = images(3, 3, 32, 32);
  seq->apply(b, range(0, 3), 0);
  EXPECT_EQ(b.at(kDataInput).shape(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(parse_augmentation("crop=2:24x24", 1)->describe(), "random crop 24x24 with zero padding 2");
  for (const char* bad : {"rotate=3", "crop", "crop=x", "normalize=0.5", "cutout=", "flip=2", "crop=2:24"})
    EXPECT_THROW(parse_augmentation(bad, 1), InvalidArgument) << bad;
  Batch labels_only{{kDataLabels, Tensor(DType::i64, Shape{3})}};
  EXPECT_THROW(HorizontalFlip(1).apply(labels_only, range(0, 3), 0), InvalidArgument);
}

}  // namespace d5::test
