// Checkpoint files: bitwise round trips for every dtype, atomic replacement, and typed errors
// naming the file and offset for every kind of damage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "deep500/train/checkpoint.h"
#include "deep500/core/rng.h"

namespace d5 {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("d5_ckpt_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// Random bytes, so every bit pattern of the dtype (NaN payloads, negative zero, subnormals) is
// exercised rather than only values that survive a conversion through double.
Tensor random_bytes(DType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  RngStream rng(seed, "checkpoint-test");
  auto* p = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<uint8_t>(rng.next_u32());
  if (dtype == DType::boolean) {
    for (size_t i = 0; i < t.bytes(); ++i) p[i] &= 1;
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.desc() == b.desc() && a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// CRC-32 (the zlib polynomial, reflected), bit by bit: an independent implementation for crafting
// files whose header checksum is right but whose content is not.
uint32_t crc32_bitwise(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A version-1 file with the given header text and `payload` zero bytes after the padding.
std::string craft_file(const std::string& header, uint64_t payload) {
  std::string out = "D5CKPT\r\n";
  const auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  put(1, 4);
  put(crc32_bitwise(header), 4);
  put(header.size(), 8);
  out += header;
  out.resize((out.size() + 63) / 64 * 64 + payload, '\0');
  return out;
}

nlohmann::json one_tensor_header(nlohmann::json shape, uint64_t offset, uint64_t bytes, uint64_t payload) {
  return {{"format", "deep500-checkpoint"}, {"version", 1}, {"byte_order", "little"}, {"payload_bytes", payload},
          {"tensors", {{{"name", "x"}, {"dtype", "f32"}, {"shape", shape}, {"layout", "any"}, {"offset", offset},
                        {"bytes", bytes}, {"crc32", 0}}}},
          {"meta", nlohmann::json::object()}};
}

std::string format_error_message(const std::string& path) {
  try {
    load_checkpoint(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_checkpoint('" << path << "') did not throw FormatError";
  return {};
}

TEST_F(CheckpointTest, EveryDTypeRoundTripsBitwise) {
  std::map<std::string, Tensor> tensors;
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    tensors.emplace(fmt::format("w.{}", to_string(dt)), random_bytes(dt, Shape{3, 5, 7}, seed++));
  }
  tensors.emplace("scalar", Tensor::from_values<double>(Shape{}, {-0.0}));
  tensors.emplace("empty", Tensor(DType::f32, Shape{0, 4}));
  Tensor nhwc(TensorDesc{DType::f32, Shape{1, 2, 2, 3}, Layout::nhwc});
  nhwc.fill(1.5);
  tensors.emplace("nhwc", nhwc);
  Tensor nan(DType::f32, Shape{2});
  const uint32_t payload_nan = 0x7fc01234u;
  std::memcpy(nan.data(), &payload_nan, 4);
  tensors.emplace("nan_payload", nan);

  const nlohmann::json meta = {{"step", 1234}, {"optimizer", {{"name", "adam"}, {"lr", 1e-3}}}};
  save_checkpoint(file("a.d5ckpt"), tensors, meta);
  const Checkpoint back = load_checkpoint(file("a.d5ckpt"));

  EXPECT_EQ(back.meta, meta);
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(back.tensors.count(name)) << name;
    const Tensor& b = back.tensors.at(name);
    EXPECT_TRUE(same_bits(b, t)) << name << ": " << b.desc().to_string() << " vs " << t.desc().to_string();
    EXPECT_TRUE(is_tensor_aligned(b.data())) << name;
    EXPECT_FALSE(b.is_view()) << name;
  }
}

TEST_F(CheckpointTest, TensorsLieAt64ByteAlignedFileOffsets) {
  std::map<std::string, Tensor> tensors = {{"a", random_bytes(DType::u8, Shape{3}, 1)},
                                           {"b", random_bytes(DType::f64, Shape{5}, 2)}};
  save_checkpoint(file("c"), tensors);
  const std::string bytes = read_all(file("c"));
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + 16, 8);
  const auto header = nlohmann::json::parse(bytes.substr(24, header_len));
  const uint64_t data_start = (24 + header_len + 63) / 64 * 64;
  ASSERT_EQ(header["tensors"].size(), 2u);
  for (const auto& e : header["tensors"]) {
    const uint64_t off = e["offset"].get<uint64_t>();
    EXPECT_EQ((data_start + off) % 64, 0u);
    const Tensor& t = tensors.at(e["name"].get<std::string>());
    EXPECT_EQ(std::memcmp(bytes.data() + data_start + off, t.data(), t.bytes()), 0);
  }
  EXPECT_EQ(bytes.size(), data_start + header["payload_bytes"].get<uint64_t>());
}

TEST_F(CheckpointTest, EmptyCheckpointRoundTrips) {
  save_checkpoint(file("e"), {}, nlohmann::json{{"k", "v"}});
  const Checkpoint back = load_checkpoint(file("e"));
  EXPECT_TRUE(back.tensors.empty());
  EXPECT_EQ(back.meta["k"], "v");
}

TEST_F(CheckpointTest, SaveReplacesAnExistingFileAndLeavesNoTemporaries) {
  save_checkpoint(file("r"), {{"x", Tensor::from_values<float>(Shape{1}, {1.f})}});
  save_checkpoint(file("r"), {{"x", Tensor::from_values<float>(Shape{1}, {2.f})}});
  EXPECT_EQ(load_checkpoint(file("r")).tensors.at("x").at<float>({0}), 2.f);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(CheckpointTest, RefusesUndefinedTensorsAndInvalidUtf8) {
  EXPECT_THROW(save_checkpoint(file("u"), {{"x", Tensor()}}), InvalidArgument);
  EXPECT_THROW(save_checkpoint(file("u"), {}, nlohmann::json{{"bad", std::string("\xff\xfe")}}), InvalidArgument);
  EXPECT_FALSE(fs::exists(file("u")));
}

TEST_F(CheckpointTest, MissingFileIsAnIoError) {
  EXPECT_THROW(load_checkpoint(file("does-not-exist")), IoError);
}

TEST_F(CheckpointTest, WrongMagicNamesFileAndOffsetZero) {
  write_all(file("m"), std::string(64, 'x'));
  const std::string msg = format_error_message(file("m"));
  EXPECT_NE(msg.find(file("m")), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 0"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, UnsupportedVersionIsReportedAtOffset8) {
  save_checkpoint(file("v"), {});
  std::string bytes = read_all(file("v"));
  bytes[8] = 7;
  write_all(file("v"), bytes);
  const std::string msg = format_error_message(file("v"));
  EXPECT_NE(msg.find("offset 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version 7"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, EveryTruncationIsAFormatErrorNamingTheFile) {
  save_checkpoint(file("t"), {{"a", random_bytes(DType::f32, Shape{40}, 3)}, {"b", random_bytes(DType::i16, Shape{9}, 4)}},
                  nlohmann::json{{"epoch", 3}});
  const std::string bytes = read_all(file("t"));
  // Every prefix, from empty to one byte short, must be refused with the file name in the message.
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_all(file("cut"), bytes.substr(0, n));
    const std::string msg = format_error_message(file("cut"));
    EXPECT_NE(msg.find(file("cut")), std::string::npos) << "prefix " << n << ": " << msg;
    EXPECT_NE(msg.find("offset"), std::string::npos) << "prefix " << n << ": " << msg;
  }
}

TEST_F(CheckpointTest, TrailingBytesAreRefused) {
  save_checkpoint(file("g"), {{"a", random_bytes(DType::u8, Shape{64}, 5)}});
  write_all(file("g"), read_all(file("g")) + "junk");
  EXPECT_NE(format_error_message(file("g")).find("unexpected bytes"), std::string::npos);
}

TEST_F(CheckpointTest, FlippedPayloadBitNamesTensorAndOffset) {
  save_checkpoint(file("p"), {{"a", random_bytes(DType::f32, Shape{16}, 6)}, {"b", random_bytes(DType::f32, Shape{16}, 7)}});
  std::string bytes = read_all(file("p"));
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + 16, 8);
  const auto header = nlohmann::json::parse(bytes.substr(24, header_len));
  const uint64_t data_start = (24 + header_len + 63) / 64 * 64;
  uint64_t b_offset = 0;
  for (const auto& e : header["tensors"]) {
    if (e["name"] == "b") b_offset = data_start + e["offset"].get<uint64_t>();
  }
  ASSERT_GT(b_offset, 0u);
  bytes[b_offset + 5] ^= 0x10;
  write_all(file("p"), bytes);
  const std::string msg = format_error_message(file("p"));
  EXPECT_NE(msg.find("tensor 'b'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("offset {}", b_offset)), std::string::npos) << msg;
}

TEST_F(CheckpointTest, EveryCorruptedHeaderByteIsDetected) {
  save_checkpoint(file("h"), {{"w", random_bytes(DType::f32, Shape{4}, 8)}}, nlohmann::json{{"s", 1}});
  const std::string bytes = read_all(file("h"));
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + 16, 8);
  for (uint64_t i = 0; i < 24 + header_len; ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    write_all(file("hd"), damaged);
    const std::string msg = format_error_message(file("hd"));
    EXPECT_NE(msg.find("offset"), std::string::npos) << "byte " << i << ": " << msg;
  }
}

TEST_F(CheckpointTest, CraftedHeadersWithValidChecksumsAreRefused) {
  struct Case {
    std::string header;
    uint64_t payload;
    const char* expected;
  };
  const uint64_t huge = uint64_t{1} << 40;
  nlohmann::json overlap = one_tensor_header({4}, 0, 16, 64);
  overlap["tensors"].push_back({{"name", "y"}, {"dtype", "f32"}, {"shape", {4}}, {"layout", "any"}, {"offset", 0},
                                {"bytes", 16}, {"crc32", 0}});
  nlohmann::json duplicate = overlap;
  duplicate["tensors"][1]["name"] = "x";
  const std::vector<Case> cases = {
      {one_tensor_header({huge, huge}, 0, 0, 64).dump(), 64, "more elements"},
      {one_tensor_header({huge, huge, huge}, 0, 0, 64).dump(), 64, "more elements"},
      {one_tensor_header({-3}, 0, 12, 64).dump(), 64, "negative extent"},
      {one_tensor_header({4}, 0, 12, 64).dump(), 64, "16"},            // byte count disagrees with the shape
      {one_tensor_header({4}, 8, 16, 64).dump(), 64, "aligned"},
      {one_tensor_header({4}, 64, 16, 64).dump(), 64, "outside"},
      {one_tensor_header({4}, 0, 16, uint64_t{1} << 62).dump(), 64, "truncated"},
      {overlap.dump(), 64, "overlap"},
      {duplicate.dump(), 64, "twice"},
      {R"({"tensors": [], "payload_bytes": 0, "byte_order": "big"})", 0, "byte order"},
      {R"({"tensors": {}, "payload_bytes": 0, "byte_order": "little"})", 0, "not an array"},
      {R"({"payload_bytes": 0})", 0, "lacks"},
      {R"({"tensors": [{"name": "x", "dtype": "f99"}], "payload_bytes": 0, "byte_order": "little"})", 0, "entry #0"},
  };
  for (const Case& c : cases) {
    write_all(file("x"), craft_file(c.header, c.payload));
    const std::string msg = format_error_message(file("x"));
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.header << "\n -> " << msg;
    EXPECT_NE(msg.find(file("x")), std::string::npos) << msg;
  }
}

// Found by fuzz_checkpoint (fuzz/regressions/checkpoint): header values of the wrong type or range
// escaped as nlohmann exceptions, were converted with undefined behaviour (1e300 to an extent or
// offset), or wrapped silently (a CRC of 2^32 read as 0). Each is a FormatError naming the file now.
TEST_F(CheckpointTest, HeaderValuesOfTheWrongTypeOrRangeAreRefused) {
  const auto tensor = [](const std::string& field, const std::string& value) {
    std::string t = R"({"name": "x", "dtype": "f32", "layout": "any", "shape": [1], "offset": 0, "bytes": 4, "crc32": 0})";
    const size_t at = t.find("\"" + field + "\": ") + field.size() + 4;
    t.replace(at, t.find_first_of(",}", at) - at, value);
    return R"({"tensors": [)" + t + R"(], "payload_bytes": 64, "byte_order": "little"})";
  };
  struct Case {
    std::string header;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {R"({"tensors": [], "payload_bytes": 0, "byte_order": 5})", "byte order 5"},
      {R"({"tensors": [], "payload_bytes": 1e400, "byte_order": "little"})", "not valid JSON"},
      {tensor("shape", "[1e300]"), "'shape' is 1e+300"},
      {tensor("shape", "7"), "'shape' is not a list"},
      {tensor("offset", "1e300"), "'offset' is 1e+300"},
      {tensor("bytes", "-4"), "'bytes' is -4"},
      {tensor("crc32", "4294967296"), "'crc32' is 4294967296"},
  };
  for (const Case& c : cases) {
    write_all(file("x"), craft_file(c.header, 64));
    const std::string msg = format_error_message(file("x"));
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.header << "\n -> " << msg;
  }
  const fs::path dir = fs::path(D5_SOURCE_DIR) / "fuzz" / "regressions" / "checkpoint";
  for (const auto& e : fs::directory_iterator(dir)) {
    // The stored inputs start with the harness's selector byte.
    const std::string bytes = read_all(e.path().string());
    write_all(file("r"), bytes.substr(1));
    EXPECT_THROW(load_checkpoint(file("r")), FormatError) << e.path();
  }
}

TEST_F(CheckpointTest, InvalidJsonIsReportedAtTheOffendingByte) {
  // The stray "]" is the header's byte 12 (0-based), file offset 24 + 12.
  write_all(file("j"), craft_file(R"({"tensors": ]})", 0));
  const std::string msg = format_error_message(file("j"));
  EXPECT_NE(msg.find("offset 36"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

}  // namespace
}  // namespace d5
