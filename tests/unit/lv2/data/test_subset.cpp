// range=BEGIN:END on any format: a contiguous view of the base set.
#include <gtest/gtest.h>

#include "data_test_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_subset.h"
#include "deep500/core/error.h"

namespace d5::test {

TEST(Subset, ParsesRanges) {
  EXPECT_EQ(parse_index_range("0:8000", 10000).begin, 0);
  EXPECT_EQ(parse_index_range("0:8000", 10000).end, 8000);
  EXPECT_EQ(parse_index_range("8000:", 10000).end, 10000);
  EXPECT_EQ(parse_index_range(":5", 10000).begin, 0);
  for (const char* bad : {"5", "5:5", "6:5", "0:10001", "-1:4", "a:4", "1:4x"})
    EXPECT_THROW(parse_index_range(bad, 10000), InvalidArgument) << bad;
}

TEST(Subset, RangeOptionWorksForEveryFormatAndMapsIndices) {
  register_builtin_datasets();
  const DatasetSpec base_spec{"synthetic", "", "train", 1, {{"samples", "50"}, {"shape", "2x2"}}};
  auto sub_spec = base_spec;
  sub_spec.options["range"] = "10:30";
  const auto base = open_dataset(base_spec), sub = open_dataset(sub_spec);
  EXPECT_EQ(sub->size(), 20);
  EXPECT_EQ(sub->name(), "synthetic[10:30]");
  EXPECT_EQ(sub->classes(), base->classes());
  EXPECT_EQ(sub->sample_descs(), base->sample_descs());
  const int64_t in_sub[] = {0, 19}, in_base[] = {10, 29};
  EXPECT_TRUE(allclose(sub->fetch(in_sub).at(kDataInput), base->fetch(in_base).at(kDataInput), 0, 0));
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(sub->label(i), base->label(10 + i));
  const int64_t outside[] = {20};
  EXPECT_THROW(sub->fetch(outside), InvalidArgument);
  sub_spec.options["range"] = "40:60";
  EXPECT_THROW(open_dataset(sub_spec), InvalidArgument);
}

TEST(Subset, MnistTrainAndTestRangesPartitionTheTestSplit) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST test split not found at " << kMnistDir;
  register_builtin_datasets();
  const auto train = open_dataset(DatasetSpec{"mnist", kMnistDir, "test", 0, {{"range", "0:8000"}}});
  const auto test = open_dataset(DatasetSpec{"mnist", kMnistDir, "test", 0, {{"range", "8000:10000"}}});
  EXPECT_EQ(train->size(), 8000);
  EXPECT_EQ(test->size(), 2000);
  const auto all = open_dataset(DatasetSpec{"mnist", kMnistDir, "test", 0, {}});
  EXPECT_EQ(test->label(0), all->label(8000));
  EXPECT_EQ(test->label(1999), all->label(9999));
}

}  // namespace d5::test
