#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "deep500/train/dataset.h"
#include "deep500/core/error.h"
#include "lv2/images/tar_archive.h"
#include "image_test_util.h"

namespace d5 {
namespace {

using test::TempDir;

// n records whose pixel k of record r is (r * 7 + k) % 256 and whose labels come from label_of(r).
std::vector<uint8_t> records(int n, int label_bytes, int first, const std::function<std::vector<uint8_t>(int)>& label_of) {
  std::vector<uint8_t> out;
  for (int r = first; r < first + n; ++r) {
    const auto labels = label_of(r);
    EXPECT_EQ(static_cast<int>(labels.size()), label_bytes);
    out.insert(out.end(), labels.begin(), labels.end());
    for (int k = 0; k < 3072; ++k) out.push_back(static_cast<uint8_t>((r * 7 + k) % 256));
  }
  return out;
}

std::vector<uint8_t> cifar10_labels(int r) { return {static_cast<uint8_t>(r % 10)}; }
std::vector<uint8_t> cifar100_labels(int r) { return {static_cast<uint8_t>(r % 20), static_cast<uint8_t>(r % 100)}; }

DatasetSpec spec(const std::string& name, const std::string& dir, const std::string& split = "train") {
  return test::dataset_spec(name, dir, {}, split);
}

// The official archive layout: cifar-10-batches-bin/data_batch_{1..5}.bin (3 records each here) + test_batch.bin.
void write_cifar10_archive(const std::string& path) {
  TarWriter w(path, true);
  w.add_directory("cifar-10-batches-bin");
  for (int b = 1; b <= 5; ++b) {
    w.add_file("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin", records(3, 1, (b - 1) * 3, cifar10_labels));
  }
  w.add_file("cifar-10-batches-bin/test_batch.bin", records(4, 1, 100, cifar10_labels));
  w.add_file("cifar-10-batches-bin/batches.meta.txt", std::vector<uint8_t>{'a', '\n'});
  w.finish();
}

void check_record(const Batch& b, int64_t row, int r) {
  const Tensor& x = b.at(kDataInput);
  const float* p = x.data_as<float>() + row * 3072;
  for (int k : {0, 1, 1023, 1024, 3071}) EXPECT_FLOAT_EQ(p[k], static_cast<float>((r * 7 + k) % 256) / 255.0f) << k;
}

TEST(Cifar10, ReadsTheOfficialArchive) {
  TempDir dir;
  write_cifar10_archive(dir.file("cifar-10-binary.tar.gz"));
  auto train = open_dataset(spec("cifar10", dir.path.string()));
  EXPECT_EQ(train->size(), 15);
  EXPECT_EQ(train->classes(), 10);
  EXPECT_EQ(train->sample_descs().at(kDataInput).shape, (Shape{3, 32, 32}));
  const int64_t idx[] = {0, 4, 14};
  const Batch b = train->fetch(idx);
  EXPECT_EQ(b.at(kDataInput).shape(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(b.at(kDataLabels).dtype(), DType::i64);
  for (int64_t i = 0; i < 3; ++i) {
    check_record(b, i, static_cast<int>(idx[i]));
    EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[i], idx[i] % 10);
    EXPECT_EQ(train->label(idx[i]), idx[i] % 10);
  }
  auto test = open_dataset(spec("cifar10", dir.path.string(), "test"));
  EXPECT_EQ(test->size(), 4);
  const int64_t t0[] = {1};
  check_record(test->fetch(t0), 0, 101);
  EXPECT_THROW(train->fetch(std::vector<int64_t>{15}), InvalidArgument);
}

TEST(Cifar10, ReadsExtractedBinFiles) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "cifar-10-batches-bin");
  for (int b = 1; b <= 5; ++b) {
    test::write_bytes(dir.file("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin"),
                      records(2, 1, (b - 1) * 2, cifar10_labels));
  }
  auto ds = open_dataset(spec("cifar10", dir.path.string()));
  EXPECT_EQ(ds->size(), 10);
  check_record(ds->fetch(std::vector<int64_t>{9}), 0, 9);
}

TEST(Cifar100, FineAndCoarseLabels) {
  TempDir dir;
  {
    TarWriter w(dir.file("cifar-100-binary.tar.gz"), true);
    w.add_file("cifar-100-binary/train.bin", records(30, 2, 0, cifar100_labels));
    w.add_file("cifar-100-binary/test.bin", records(5, 2, 0, cifar100_labels));
    w.finish();
  }
  auto fine = open_dataset(spec("cifar100", dir.path.string()));
  EXPECT_EQ(fine->size(), 30);
  EXPECT_EQ(fine->classes(), 100);
  EXPECT_EQ(fine->label(27), 27);
  auto s = spec("cifar100", dir.path.string());
  s.options["label"] = "coarse";
  auto coarse = open_dataset(s);
  EXPECT_EQ(coarse->classes(), 20);
  EXPECT_EQ(coarse->label(27), 7);
  check_record(coarse->fetch(std::vector<int64_t>{27}), 0, 27);
}

TEST(Cifar, CorruptDataIsFormatError) {
  TempDir dir;
  auto data = records(3, 1, 0, cifar10_labels);
  for (int b = 1; b <= 5; ++b) test::write_bytes(dir.file("data_batch_" + std::to_string(b) + ".bin"), data);
  data.resize(data.size() - 10);  // a partial last record
  test::write_bytes(dir.file("data_batch_3.bin"), data);
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec("cifar10", dir.path.string())), "data_batch_3.bin", "offset 6146");
  data = records(3, 1, 0, cifar10_labels);
  data[3073] = 10;  // label of record 1
  test::write_bytes(dir.file("data_batch_3.bin"), data);
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec("cifar10", dir.path.string())), "data_batch_3.bin", "offset 3073");
}

TEST(Cifar, RefusesBadArguments) {
  TempDir dir;
  EXPECT_THROW(open_dataset(spec("cifar10", dir.path.string())), IoError);  // nothing there
  auto s = spec("cifar10", dir.path.string());
  s.options["colour"] = "1";
  EXPECT_THROW(open_dataset(s), InvalidArgument);
  EXPECT_THROW(open_dataset(spec("cifar10", dir.path.string(), "validation")), InvalidArgument);
}

// Without a data directory the loader reads where `d5 data download cifar10` stores the archive:
// $D5_DATA_DIR/cifar10/cifar-10-binary.tar.gz.
TEST(Cifar10, WithoutADataDirReadsTheDownloadCache) {
  TempDir cache;
  const char* old = std::getenv("D5_DATA_DIR");
  const std::string saved = old ? old : "";
  setenv("D5_DATA_DIR", cache.path.c_str(), 1);
  try {
    open_dataset(spec("cifar10", ""));
    ADD_FAILURE() << "opened an empty cache";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((cache.path / "cifar10").string()), std::string::npos) << what;
    EXPECT_NE(what.find("d5 data download cifar10"), std::string::npos) << what;
  }
  std::filesystem::create_directories(cache.path / "cifar10");
  write_cifar10_archive(cache.file("cifar10/cifar-10-binary.tar.gz"));
  const auto test_set = open_dataset(spec("cifar10", "", "test"));
  if (old) {
    setenv("D5_DATA_DIR", saved.c_str(), 1);
  } else {
    unsetenv("D5_DATA_DIR");
  }
  EXPECT_EQ(test_set->size(), 4);
  const int64_t idx[] = {3};
  check_record(test_set->fetch(idx), 0, 103);
}

}  // namespace
}  // namespace d5
