#pragma once
// TFRecord files and tf.Example records (docs/image-datasets.md). A record is
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// (little-endian), with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. A tf.Example is parsed
// from the protobuf wire format directly: Example{Features features = 1}, Features{map<string,
// Feature> feature = 1}, Feature{oneof: BytesList = 1 | FloatList = 2 | Int64List = 3}.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace d5 {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78); crc32c("123456789") = 0xE3069283.
uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc = 0);
uint32_t tfrecord_masked_crc(std::span<const uint8_t> data);

struct TfRecordLocation {
  uint64_t offset = 0;  // of the record's length field
  uint64_t length = 0;  // of its data, which starts at offset + 12
};

// Every record of a file, checking the framing and each length's CRC (data CRCs are checked when
// the data is read: read_tfrecord). FormatError naming the file and offset.
std::vector<TfRecordLocation> scan_tfrecord_file(const std::string& path);
// Reads one record's data with pread on `fd`, verifying its CRC; FormatError naming `path`+offset.
std::vector<uint8_t> read_tfrecord(int fd, const std::string& path, const TfRecordLocation& where);

class TfRecordWriter {
 public:
  explicit TfRecordWriter(const std::string& path);  // IoError when it cannot be created
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;
  void write(std::span<const uint8_t> record);
  void close();  // IoError when flushing fails

 private:
  std::string path_;
  void* file_ = nullptr;  // FILE*
};

struct TfFeature {
  enum class Kind { Bytes, Float, Int64 };
  Kind kind = Kind::Bytes;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};
using TfExample = std::map<std::string, TfFeature>;

// FormatError (naming `what`) on malformed wire data; unknown fields are skipped.
TfExample parse_tf_example(std::span<const uint8_t> data, const std::string& what);
std::vector<uint8_t> serialize_tf_example(const TfExample& example);

}  // namespace d5
