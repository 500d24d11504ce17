// "synthetic" and "synthetic-learnable": determinism, random access, distributions, learnability.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "deep500/train/dataset.h"
#include "deep500/core/error.h"

namespace d5::test {

namespace {

std::unique_ptr<Dataset> open_synthetic(std::map<std::string, std::string> options, uint64_t seed = 7,
                                        const std::string& name = "synthetic", const std::string& split = "train") {
  register_builtin_datasets();
  return open_dataset(DatasetSpec{name, "", split, seed, std::move(options)});
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST(Synthetic, ShapeClassesAndSamplesFollowTheOptions) {
  const auto ds = open_synthetic({{"shape", "3x8x5"}, {"classes", "7"}, {"samples", "123"}});
  EXPECT_EQ(ds->size(), 123);
  EXPECT_EQ(ds->classes(), 7);
  EXPECT_EQ(ds->sample_descs().at(kDataInput), (TensorDesc{DType::f32, Shape{3, 8, 5}}));
  const int64_t idx[] = {0, 122};
  const Batch b = ds->fetch(idx);
  EXPECT_EQ(b.at(kDataInput).shape(), (Shape{2, 3, 8, 5}));
  for (float v : b.at(kDataInput).span<float>()) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
  }
  const auto defaults = open_synthetic({});
  EXPECT_EQ(defaults->size(), 10000);
  EXPECT_EQ(defaults->classes(), 10);
  EXPECT_EQ(defaults->sample_descs().at(kDataInput).shape, (Shape{1, 28, 28}));
}

TEST(Synthetic, EverySampleIsAPureFunctionOfSeedAndIndex) {
  const auto a = open_synthetic({{"samples", "100"}});
  const auto b = open_synthetic({{"samples", "100"}});
  const int64_t forward[] = {3, 50, 99}, reversed[] = {99, 50, 3}, single[] = {50};
  const Batch fa = a->fetch(forward), rb = b->fetch(reversed), sb = b->fetch(single);
  const int64_t per = 28 * 28;
  for (int64_t e = 0; e < per; ++e) {
    ASSERT_EQ(fa.at(kDataInput).get(e), rb.at(kDataInput).get(2 * per + e));
    ASSERT_EQ(fa.at(kDataInput).get(per + e), sb.at(kDataInput).get(e));
  }
  EXPECT_EQ(fa.at(kDataLabels).get(1), sb.at(kDataLabels).get(0));
  EXPECT_EQ(a->label(50), sb.at(kDataLabels).get(0));

  const auto other_seed = open_synthetic({{"samples", "100"}}, 8);
  EXPECT_FALSE(allclose(other_seed->fetch(single).at(kDataInput), sb.at(kDataInput)));
  const auto test_split = open_synthetic({{"samples", "100"}}, 7, "synthetic", "test");
  EXPECT_FALSE(allclose(test_split->fetch(single).at(kDataInput), sb.at(kDataInput)));
}

// Labels are uniform over the classes: chi-square of 20,000 labels over 10 classes stays below
// the 99.9% quantile of chi2(9) = 27.88, and the inputs have the mean and variance of U[0, 1).
TEST(Synthetic, LabelsAreUniformAndInputsUniformInUnitInterval) {
  const auto ds = open_synthetic({{"samples", "20000"}, {"shape", "4"}});
  std::vector<int64_t> counts(10);
  for (int64_t i = 0; i < ds->size(); ++i) ++counts[static_cast<size_t>(ds->label(i))];
  double chi2 = 0;
  for (int64_t c : counts) chi2 += (c - 2000.0) * (c - 2000.0) / 2000.0;
  EXPECT_LT(chi2, 27.88);
  const Batch b = ds->fetch(iota(ds->size()));
  double sum = 0, sq = 0;
  for (float v : b.at(kDataInput).span<float>()) {
    sum += v;
    sq += double{v} * v;
  }
  const double n = static_cast<double>(b.at(kDataInput).numel()), mean = sum / n;
  // 80,000 draws: the standard error of the mean is 0.289 / sqrt(80000) = 0.001.
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(sq / n - mean * mean, 1.0 / 12, 0.003);
}

// A nearest-class-mean classifier fitted on 2,000 train samples classifies 1,000 test samples
// almost perfectly: the classes are separable, so a network can learn them. (Prototypes differ by
// sqrt(784 / 6) = 11.4 in l2, so with unit noise the margin is 5.7 standard deviations.)
TEST(Synthetic, LearnableVariantIsSeparableAcrossSplits) {
  const std::map<std::string, std::string> options{{"samples", "2000"}, {"shape", "1x28x28"}};
  const auto train = open_synthetic(options, 3, "synthetic-learnable", "train");
  auto test_options = options;
  test_options["samples"] = "1000";
  const auto test = open_synthetic(test_options, 3, "synthetic-learnable", "test");
  const int64_t dim = 784;
  std::vector<double> means(10 * dim);
  std::vector<int64_t> counts(10);
  const Batch tb = train->fetch(iota(train->size()));
  for (int64_t i = 0; i < train->size(); ++i) {
    const int64_t y = static_cast<int64_t>(tb.at(kDataLabels).get(i));
    ++counts[static_cast<size_t>(y)];
    for (int64_t e = 0; e < dim; ++e) means[static_cast<size_t>(y * dim + e)] += tb.at(kDataInput).get(i * dim + e);
  }
  for (int64_t c = 0; c < 10; ++c)
    for (int64_t e = 0; e < dim; ++e) means[static_cast<size_t>(c * dim + e)] /= static_cast<double>(counts[static_cast<size_t>(c)]);
  const Batch sb = test->fetch(iota(test->size()));
  int64_t correct = 0;
  for (int64_t i = 0; i < test->size(); ++i) {
    int64_t best = -1;
    double best_d = 1e300;
    for (int64_t c = 0; c < 10; ++c) {
      double d = 0;
      for (int64_t e = 0; e < dim; ++e) {
        const double diff = sb.at(kDataInput).get(i * dim + e) - means[static_cast<size_t>(c * dim + e)];
        d += diff * diff;
      }
      if (d < best_d) {
        best_d = d;
        best = c;
      }
    }
    correct += best == static_cast<int64_t>(sb.at(kDataLabels).get(i));
  }
  EXPECT_GE(correct, 995) << "of 1000";
  // Raising the noise far above the prototypes' spread makes the task hard.
  test_options["noise"] = "50";
  const auto noisy = open_synthetic(test_options, 3, "synthetic-learnable", "test");
  const int64_t one[] = {0};
  const Tensor x = noisy->fetch(one).at(kDataInput);
  double sq = 0;
  for (float v : x.span<float>()) sq += double{v} * v;
  EXPECT_GT(std::sqrt(sq / dim), 25.0);
}

TEST(Synthetic, RefusesBadOptions) {
  EXPECT_THROW(open_synthetic({{"shape", "3x0"}}), InvalidArgument);
  EXPECT_THROW(open_synthetic({{"shape", "axb"}}), InvalidArgument);
  EXPECT_THROW(open_synthetic({{"classes", "0"}}), InvalidArgument);
  EXPECT_THROW(open_synthetic({{"samples", "-1"}}), InvalidArgument);
  EXPECT_THROW(open_synthetic({{"dtype", "f16"}}), InvalidArgument);
  EXPECT_THROW(open_synthetic({{"noise", "1"}}), InvalidArgument);  // only the learnable variant has noise
  EXPECT_THROW(open_synthetic({}, 7, "synthetic", "validation"), InvalidArgument);
  const auto ds = open_synthetic({{"samples", "5"}});
  EXPECT_THROW(ds->label(5), InvalidArgument);
  const int64_t bad[] = {-1};
  EXPECT_THROW(ds->fetch(bad), InvalidArgument);
}

}  // namespace d5::test
