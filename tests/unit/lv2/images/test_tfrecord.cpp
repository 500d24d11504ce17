#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "deep500/train/dataset.h"
#include "deep500/core/error.h"
#include "lv2/images/tfrecord.h"
#include "image_test_util.h"

namespace d5 {
namespace {

using test::TempDir;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST(Crc32c, KnownValues) {
  // The standard check value and the iSCSI test vectors of RFC 3720, B.4.
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c(std::vector<uint8_t>(32, 0)), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::vector<uint8_t>(32, 0xFF)), 0x62A8AB43u);
  std::vector<uint8_t> inc(32);
  for (size_t i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  // Incremental == whole, across the 8-byte slicing boundary.
  const auto s = bytes_of("The quick brown fox jumps over the lazy dog");
  EXPECT_EQ(crc32c(std::span(s).subspan(13), crc32c(std::span(s).first(13))), crc32c(s));
  EXPECT_EQ(crc32c({}), 0u);
}

TEST(TfRecord, MaskedCrcOfEmptyLengthMatchesTensorFlow) {
  // masked(crc32c(8 zero bytes)) as every TensorFlow writer emits for an empty record.
  const uint32_t crc = crc32c(std::vector<uint8_t>(8, 0));
  EXPECT_EQ(tfrecord_masked_crc(std::vector<uint8_t>(8, 0)), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TfExample, SerializeParseRoundTrip) {
  TfExample ex;
  ex["image/encoded"] = TfFeature{TfFeature::Kind::Bytes, {std::string("\xff\xd8\x00zz", 5)}, {}, {}};
  ex["image/class/label"] = TfFeature{TfFeature::Kind::Int64, {}, {}, {7, -3, int64_t{1} << 40}};
  ex["bbox"] = TfFeature{TfFeature::Kind::Float, {}, {0.25f, -1.5f}, {}};
  const auto bytes = serialize_tf_example(ex);
  const TfExample back = parse_tf_example(bytes, "mem");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("image/encoded").bytes.at(0), std::string("\xff\xd8\x00zz", 5));
  EXPECT_EQ(back.at("image/class/label").ints, (std::vector<int64_t>{7, -3, int64_t{1} << 40}));
  EXPECT_EQ(back.at("bbox").kind, TfFeature::Kind::Float);
  EXPECT_EQ(back.at("bbox").floats, (std::vector<float>{0.25f, -1.5f}));
}

TEST(TfExample, ParsesUnpackedListsAndSkipsUnknownFields) {
  // Hand-encoded: Example{features{feature{key:"l", value:{int64_list{value:5 (unpacked)}}}}}
  // with an unknown varint field 9 in the Example.
  const std::vector<uint8_t> int64_list = {0x08, 0x05};                        // value: 5
  std::vector<uint8_t> feature = {0x1a, static_cast<uint8_t>(int64_list.size())};  // Feature.int64_list
  feature.insert(feature.end(), int64_list.begin(), int64_list.end());
  std::vector<uint8_t> entry = {0x0a, 0x01, 'l', 0x12, static_cast<uint8_t>(feature.size())};
  entry.insert(entry.end(), feature.begin(), feature.end());
  std::vector<uint8_t> features = {0x0a, static_cast<uint8_t>(entry.size())};
  features.insert(features.end(), entry.begin(), entry.end());
  std::vector<uint8_t> ex = {0x48, 0x01, 0x0a, static_cast<uint8_t>(features.size())};
  ex.insert(ex.end(), features.begin(), features.end());
  const TfExample parsed = parse_tf_example(ex, "hand");
  EXPECT_EQ(parsed.at("l").kind, TfFeature::Kind::Int64);
  EXPECT_EQ(parsed.at("l").ints, std::vector<int64_t>{5});
  ex.pop_back();
  D5_EXPECT_FORMAT_ERROR(parse_tf_example(ex, "hand"), "hand");
}

TEST(TfRecord, FramingRoundTripAndCorruptionDetection) {
  TempDir dir;
  const std::string path = dir.file("a.tfrecord");
  {
    TfRecordWriter w(path);
    w.write(bytes_of("first"));
    w.write({});
    w.write(bytes_of(std::string(1000, 'q')));
    w.close();
  }
  const auto locs = scan_tfrecord_file(path);
  ASSERT_EQ(locs.size(), 3u);
  EXPECT_EQ(locs[1].offset, 12u + 5 + 4);
  EXPECT_EQ(locs[1].length, 0u);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(read_tfrecord(fd, path, locs[0]), bytes_of("first"));
  EXPECT_EQ(read_tfrecord(fd, path, locs[2]).size(), 1000u);
  ::close(fd);

  const auto raw = test::read_bytes(path);
  // A flipped bit in the third record's data: framing scans fine, reading it fails.
  auto bad = raw;
  bad[locs[2].offset + 12 + 500] ^= 0x08;
  test::write_bytes(dir.file("data.tfrecord"), bad);
  const auto bad_locs = scan_tfrecord_file(dir.file("data.tfrecord"));
  const int bfd = ::open(dir.file("data.tfrecord").c_str(), O_RDONLY);
  D5_EXPECT_FORMAT_ERROR(read_tfrecord(bfd, dir.file("data.tfrecord"), bad_locs[2]), "data.tfrecord",
                         "offset " + std::to_string(locs[2].offset), "data CRC");
  ::close(bfd);
  // A flipped bit in a length: the length CRC catches it at scan time.
  bad = raw;
  bad[locs[1].offset + 2] ^= 0x01;
  test::write_bytes(dir.file("len.tfrecord"), bad);
  D5_EXPECT_FORMAT_ERROR(scan_tfrecord_file(dir.file("len.tfrecord")), "len.tfrecord",
                         "offset " + std::to_string(locs[1].offset), "length CRC");
  // Truncation inside the last record.
  test::write_bytes(dir.file("cut.tfrecord"), std::vector<uint8_t>(raw.begin(), raw.end() - 3));
  D5_EXPECT_FORMAT_ERROR(scan_tfrecord_file(dir.file("cut.tfrecord")), "cut.tfrecord",
                         "offset " + std::to_string(locs[2].offset), "truncated");
  test::write_bytes(dir.file("cut2.tfrecord"), std::vector<uint8_t>(raw.begin(), raw.begin() + 5));
  D5_EXPECT_FORMAT_ERROR(scan_tfrecord_file(dir.file("cut2.tfrecord")), "cut2.tfrecord", "offset 0");
  // A compressed file is named as such, not as a CRC mismatch.
  std::vector<uint8_t> gz(64, 0x55);
  const uint8_t gzip_header[] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
  std::copy(std::begin(gzip_header), std::end(gzip_header), gz.begin());
  test::write_bytes(dir.file("z.tfrecord"), gz);
  D5_EXPECT_FORMAT_ERROR(scan_tfrecord_file(dir.file("z.tfrecord")), "z.tfrecord", "gzip");
}

// ImageNet-style records: labels 1..classes. Returns the JPEGs.
std::vector<std::vector<uint8_t>> write_examples(const std::string& path, int n, int first_label) {
  std::vector<std::vector<uint8_t>> jpegs;
  TfRecordWriter w(path);
  for (int i = 0; i < n; ++i) {
    jpegs.push_back(encode_jpeg(test::gradient_image(48, 36 + 4 * i, i), 90));
    TfExample ex;
    ex["image/encoded"].bytes = {std::string(jpegs.back().begin(), jpegs.back().end())};
    ex["image/class/label"] = TfFeature{TfFeature::Kind::Int64, {}, {}, {first_label + i % 4}};
    ex["image/format"].bytes = {"JPEG"};
    w.write(serialize_tf_example(ex));
  }
  w.close();
  return jpegs;
}

DatasetSpec spec(const std::string& dir, std::map<std::string, std::string> options, const std::string& split = "train") {
  return test::dataset_spec("tfrecord", dir, std::move(options), split);
}

TEST(TfRecordDataset, DecodesImagesWithLabelOffset) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  auto jpegs = write_examples(dir.file("train-00000-of-00002"), 5, 1);
  auto more = write_examples(dir.file("train-00001-of-00002"), 3, 1);
  write_examples(dir.file("validation-00000-of-00001"), 2, 1);
  jpegs.insert(jpegs.end(), more.begin(), more.end());
  auto ds = open_dataset(spec(dir.path.string(), {{"label_offset", "1"}, {"resize", "32"}, {"crop", "32"}}));
  EXPECT_EQ(ds->size(), 8);
  EXPECT_EQ(ds->classes(), 4);  // found by the label scan
  EXPECT_EQ(ds->label(6), 1);
  const std::vector<int64_t> idx = {7, 0, 6};
  const Batch b = ds->fetch(idx);
  std::vector<float> want(3 * 32 * 32);
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(b.at(kDataLabels).data_as<int64_t>()[i], (idx[i] < 5 ? idx[i] : idx[i] - 5) % 4);  // per file, 1 + i % 4
    decode_jpeg_into(jpegs[static_cast<size_t>(idx[i])], "ref", ImagePreprocess{32, 32, false}, want.data());
    EXPECT_EQ(std::memcmp(b.at(kDataInput).data_as<float>() + i * want.size(), want.data(), want.size() * 4), 0);
  }
  auto val = open_dataset(spec(dir.path.string(), {{"label_offset", "1"}, {"classes", "1000"}}, "test"));
  EXPECT_EQ(val->size(), 2);
  EXPECT_EQ(val->classes(), 1000);
  EXPECT_EQ(val->label(1), 1);
}

TEST(TfRecordDataset, LabelRangeAndCorruptionAreFormatErrors) {
  D5_REQUIRE_JPEG();
  TempDir dir;
  const std::string path = dir.file("x.tfrecord");
  write_examples(path, 4, 1);
  // Labels 1..4 with classes=4 and no offset: label 4 is out of range.
  auto ds = open_dataset(spec(path, {{"classes", "4"}}));
  D5_EXPECT_FORMAT_ERROR(ds->label(3), "x.tfrecord", "label_offset");
  const auto locs = scan_tfrecord_file(path);
  auto raw = test::read_bytes(path);
  raw[locs[2].offset + 12 + locs[2].length / 2] ^= 0x10;
  test::write_bytes(path, raw);
  auto bad = open_dataset(spec(path, {{"classes", "4"}, {"label_offset", "1"}}));
  EXPECT_NO_THROW(bad->fetch(std::vector<int64_t>{0, 1}));
  D5_EXPECT_FORMAT_ERROR(bad->fetch(std::vector<int64_t>{1, 2}), "x.tfrecord",
                         "offset " + std::to_string(locs[2].offset));
  // Without classes=N the open scans every record and finds it at once.
  D5_EXPECT_FORMAT_ERROR(open_dataset(spec(path, {{"label_offset", "1"}})), "x.tfrecord");
  EXPECT_THROW(open_dataset(spec(dir.path.string(), {{"shuffle", "1"}})), InvalidArgument);
  EXPECT_THROW(open_dataset(spec(dir.file("nothing"), {})), IoError);
}

// Found by fuzz_tfrecord (fuzz/regressions/tfrecord): a stored label near the int64 limits
// overflowed when label_offset was subtracted, or when the class count (largest label + 1) was
// computed. Such labels are FormatErrors naming the file, and so is any label from 2^31 on, the
// most classes=N allows. (No JPEG is needed: labels are read before any image is decoded.)
TEST(TfRecordDataset, LabelsNearTheInt64LimitsAreFormatErrors) {
  TempDir dir;
  const std::string path = dir.file("x.tfrecord");
  const auto write_label = [&](int64_t label) {
    TfRecordWriter w(path);
    TfExample ex;
    ex["image/encoded"].bytes = {"not decoded"};
    ex["image/class/label"] = TfFeature{TfFeature::Kind::Int64, {}, {}, {label}};
    w.write(serialize_tf_example(ex));
    w.close();
  };
  const int64_t max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
  for (const auto& [label, offset] : std::vector<std::pair<int64_t, const char*>>{
           {max, "0"}, {max, "-1"}, {min, "1"}, {int64_t{1} << 31, "0"}}) {
    write_label(label);
    D5_EXPECT_FORMAT_ERROR(open_dataset(spec(path, {{"label_offset", offset}})), "x.tfrecord", std::to_string(label));
  }
  write_label((int64_t{1} << 31) - 1);  // the largest label there can be
  EXPECT_EQ(open_dataset(spec(path, {}))->classes(), int64_t{1} << 31);
}

}  // namespace
}  // namespace d5
