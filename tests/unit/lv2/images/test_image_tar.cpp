#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "deep500/train/dataset.h"
#include "deep500/core/error.h"
#include "deep500/train/image_datasets.h"
#include "lv2/images/tar_archive.h"
#include "image_test_util.h"

namespace d5 {
namespace {

using test::TempDir;

// Classes listed out of order so the test sees that labels follow sorted names.
const std::vector<std::string> kClasses = {"n02", "n01", "n03"};

// 3 classes x `per_class` JPEGs, plus members that are not samples.
std::vector<std::vector<uint8_t>> write_image_tar(const std::string& path, int per_class) {
  std::vector<std::vector<uint8_t>> jpegs;
  TarWriter w(path);
  w.add_file("README.txt", std::vector<uint8_t>{'h', 'i'});
  int seed = 0;
  for (const auto& c : kClasses) {
    w.add_directory("train/" + c);
    for (int i = 0; i < per_class; ++i) {
      jpegs.push_back(encode_jpeg(test::gradient_image(40 + 8 * i, 32, seed++), 90));
      w.add_file("train/" + c + "/" + c + "_" + std::to_string(i) + (i % 2 ? ".jpg" : ".JPEG"), jpegs.back());
    }
  }
  w.finish();
  return jpegs;
}

DatasetSpec spec(const std::string& path, std::map<std::string, std::string> options = {}) {
  return test::dataset_spec("image-tar", path, std::move(options));
}

TEST(ImageTar, IndexIsBuiltStoredAndReused) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const std::string tar = dir.file("train.tar");
  write_image_tar(tar, 2);
  bool rebuilt = false;
  const ImageTarIndex first = load_image_tar_index(tar, &rebuilt);
  EXPECT_TRUE(rebuilt);
  EXPECT_TRUE(std::filesystem::is_regular_file(image_tar_index_path(tar)));
  EXPECT_EQ(first.classes, (std::vector<std::string>{"n01", "n02", "n03"}));
  ASSERT_EQ(first.entries.size(), 6u);
  EXPECT_EQ(first.entries[0].path, "train/n02/n02_0.JPEG");
  EXPECT_EQ(first.entries[0].label, 1);
  EXPECT_EQ(first.entries[2].label, 0);
  const ImageTarIndex second = load_image_tar_index(tar, &rebuilt);
  EXPECT_FALSE(rebuilt);
  EXPECT_EQ(second.entries.size(), 6u);
  EXPECT_EQ(second.entries[5].offset, first.entries[5].offset);

  // A changed tar (size and mtime) makes the stored index stale.
  write_image_tar(tar, 3);
  const ImageTarIndex third = load_image_tar_index(tar, &rebuilt);
  EXPECT_TRUE(rebuilt);
  EXPECT_EQ(third.entries.size(), 9u);

  // A damaged index file is rebuilt, not trusted.
  auto raw = test::read_bytes(image_tar_index_path(tar));
  raw[raw.size() / 2] ^= 0x40;
  test::write_bytes(image_tar_index_path(tar), raw);
  D5_EXPECT_FORMAT_ERROR(parse_image_tar_index(std::string(raw.begin(), raw.end()), "idx"), "idx", "CRC");
  EXPECT_EQ(load_image_tar_index(tar, &rebuilt).entries.size(), 9u);
  EXPECT_TRUE(rebuilt);
}

TEST(ImageTar, FetchDecodesMembersByOffset) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const auto jpegs = write_image_tar(dir.file("train.tar"), 2);
  auto ds = open_dataset(spec(dir.path.string(), {{"resize", "32"}, {"crop", "24"}, {"threads", "3"}}));
  EXPECT_EQ(ds->size(), 6);
  EXPECT_EQ(ds->classes(), 3);
  EXPECT_EQ(ds->sample_descs().at(kDataInput).shape, (Shape{3, 24, 24}));
  const std::vector<int64_t> idx = {5, 0, 3, 2, 5};
  const Batch b = ds->fetch(idx);
  ASSERT_EQ(b.at(kDataInput).shape(), (Shape{5, 3, 24, 24}));
  const int64_t want_labels[] = {2, 1, 0, 0, 2};
  std::vector<float> want(3 * 24 * 24);
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[i], want_labels[i]);
    EXPECT_EQ(ds->label(idx[i]), want_labels[i]);
    decode_jpeg_into(jpegs[static_cast<size_t>(idx[i])], "ref", ImagePreprocess{32, 24, false}, want.data());
    const float* got = b.at(kDataInput).data_as<float>() + i * want.size();
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k]) << "sample " << i << " value " << k;
  }
}

TEST(ImageTar, ThreadCountDoesNotChangeResults) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  write_image_tar(dir.file("train.tar"), 4);
  auto one = open_dataset(spec(dir.file("train.tar"), {{"threads", "1"}, {"normalize", "imagenet"}}));
  auto four = open_dataset(spec(dir.file("train.tar"), {{"threads", "4"}, {"normalize", "imagenet"}}));
  std::vector<int64_t> all(12);
  for (int64_t i = 0; i < 12; ++i) all[static_cast<size_t>(i)] = 11 - i;
  const Batch a = one->fetch(all), b = four->fetch(all);
  ASSERT_EQ(a.at(kDataInput).bytes(), b.at(kDataInput).bytes());
  EXPECT_EQ(std::memcmp(a.at(kDataInput).data(), b.at(kDataInput).data(), a.at(kDataInput).bytes()), 0);
  // Normalized values leave [0, 1].
  float lo = 1;
  for (float v : a.at(kDataInput).span<float>()) lo = std::min(lo, v);
  EXPECT_LT(lo, -0.5f);
}

TEST(ImageTar, CorruptJpegNamesTheMember) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const std::string tar = dir.file("train.tar");
  write_image_tar(tar, 2);
  const ImageTarIndex index = load_image_tar_index(tar);
  auto raw = test::read_bytes(tar);
  const auto& e = index.entries[3];
  for (uint64_t k = e.size / 3; k < e.size; ++k) raw[e.offset + k] = 0;  // wipe most of the scan; offsets stay
  test::write_bytes(tar, raw);
  auto ds = open_dataset(spec(tar, {{"threads", "2"}}));
  D5_EXPECT_FORMAT_ERROR(ds->fetch(std::vector<int64_t>{0, 1, 2, 3}), e.path);
  EXPECT_NO_THROW(ds->fetch(std::vector<int64_t>{0, 1, 2}));
}

TEST(ImageTar, RefusesBadArchives) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  {
    TarWriter w(dir.file("flat.tar"));
    w.add_file("a.JPEG", encode_jpeg(test::gradient_image(8, 8)));
  }
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec(dir.file("flat.tar"))), "a.JPEG", "class directory");
  {
    TarWriter w(dir.file("none.tar"));
    w.add_file("c/a.png", std::vector<uint8_t>{1});
  }
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec(dir.file("none.tar"))), "none.tar");
  {
    TarWriter w(dir.file("z.tar.gz"), true);
    w.add_file("c/a.JPEG", encode_jpeg(test::gradient_image(8, 8)));
  }
  EXPECT_THROW(open_dataset(spec(dir.file("z.tar.gz"))), InvalidArgument);
  EXPECT_THROW(open_dataset(spec(dir.path.string())), IoError);  // no train.tar
  EXPECT_THROW(open_dataset(spec(dir.file("flat.tar"), {{"crop", "300"}})), InvalidArgument);
  EXPECT_THROW(open_dataset(spec(dir.file("flat.tar"), {{"size", "3"}})), InvalidArgument);
}

TEST(ImageTar, TruncatedTarIsFormatError) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const std::string tar = dir.file("train.tar");
  write_image_tar(tar, 2);
  auto raw = test::read_bytes(tar);
  raw.resize(raw.size() - 2000);
  test::write_bytes(tar, raw);
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec(tar)), "train.tar", "offset");
}

// ILSVRC2012_img_train.tar: an outer tar of per-class tars of JPEGs.
TEST(ImageTar, TarOfClassTars) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  std::vector<std::vector<uint8_t>> jpegs;
  {
    TarWriter outer(dir.file("train.tar"));
    int seed = 0;
    for (const std::string cls : {"n09", "n07"}) {
      {
        TarWriter inner(dir.file(cls + ".tar"));
        for (int i = 0; i < 3; ++i) {
          jpegs.push_back(encode_jpeg(test::gradient_image(30, 20 + i, seed++), 90));
          inner.add_file(cls + "_" + std::to_string(i) + ".JPEG", jpegs.back());
        }
      }
      outer.add_file(cls + ".tar", test::read_bytes(dir.file(cls + ".tar")));
    }
  }
  const ImageTarIndex index = build_image_tar_index(dir.file("train.tar"));
  EXPECT_EQ(index.classes, (std::vector<std::string>{"n07", "n09"}));
  ASSERT_EQ(index.entries.size(), 6u);
  EXPECT_EQ(index.entries[0].path, "n09.tar/n09_0.JPEG");
  EXPECT_EQ(index.entries[0].label, 1);
  EXPECT_EQ(index.entries[4].label, 0);
  const auto raw = test::read_bytes(dir.file("train.tar"));
  for (size_t i = 0; i < 6; ++i) {
    const auto& e = index.entries[i];
    EXPECT_EQ(std::vector<uint8_t>(raw.begin() + static_cast<long>(e.offset),
                                   raw.begin() + static_cast<long>(e.offset + e.size)),
              jpegs[i]);
  }
  auto ds = open_dataset(spec(dir.file("train.tar"), {{"resize", "20"}, {"crop", "16"}}));
  std::vector<float> want(3 * 16 * 16);
  decode_jpeg_into(jpegs[4], "ref", ImagePreprocess{20, 16, false}, want.data());
  const Batch b = ds->fetch(std::vector<int64_t>{4});
  EXPECT_EQ(std::memcmp(b.at(kDataInput).data(), want.data(), want.size() * sizeof(float)), 0);
  EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[0], 0);

  // A class tar cut short (no end-of-archive marker) is a FormatError naming it.
  auto inner = test::read_bytes(dir.file("n07.tar"));
  inner.resize(inner.size() - 1024);
  {
    TarWriter outer(dir.file("bad.tar"));
    outer.add_file("n07.tar", inner);
  }
  D5_EXPECT_FORMAT_ERROR(build_image_tar_index(dir.file("bad.tar")), "bad.tar:n07.tar", "offset");
}

TEST(ImageTar, IndexSerializationRoundTrip) {
  ImageTarIndex index;
  index.tar_size = 1 << 20;
  index.tar_mtime_ns = 1234567890123;
  index.classes = {"a", "b"};
  index.entries = {{512, 100, 1, "b/x.jpg"}, {2048, 7, 0, "a/y.jpg"}};
  const std::string bytes = serialize_image_tar_index(index);
  const ImageTarIndex back = parse_image_tar_index(bytes, "mem");
  EXPECT_EQ(back.tar_mtime_ns, index.tar_mtime_ns);
  EXPECT_EQ(back.classes, index.classes);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].offset, 2048u);
  EXPECT_EQ(back.entries[1].path, "a/y.jpg");
  D5_EXPECT_FORMAT_ERROR(parse_image_tar_index(bytes.substr(0, bytes.size() - 9), "mem"), "mem");
  D5_EXPECT_FORMAT_ERROR(parse_image_tar_index("not an index", "mem"), "mem", "offset 0");
}

// Found by fuzz_tar_index (fuzz/regressions/tar_index): an entry whose offset + size wraps around
// 2^64 passed the "inside the tar" check, so a sample would have been read from a bogus range.
TEST(ImageTar, IndexEntryWhoseRangeWrapsIsFormatError) {
  ImageTarIndex index;
  index.tar_size = 1 << 20;
  index.classes = {"a"};
  index.entries = {{4096, UINT64_MAX - 100, 0, "a/x.jpg"}};
  D5_EXPECT_FORMAT_ERROR(parse_image_tar_index(serialize_image_tar_index(index), "mem"), "mem", "entry 0");
  index.entries = {{(1 << 20) - 10, 11, 0, "a/x.jpg"}};  // one byte past the end, no wrap
  D5_EXPECT_FORMAT_ERROR(parse_image_tar_index(serialize_image_tar_index(index), "mem"), "mem", "entry 0");
  index.entries = {{(1 << 20) - 10, 10, 0, "a/x.jpg"}};  // ends exactly at the end
  EXPECT_EQ(parse_image_tar_index(serialize_image_tar_index(index), "mem").entries.size(), 1u);
}

}  // namespace
}  // namespace d5
