// IDX files (http://yann.lecun.com/exdb/mnist/, "file formats"): validated before any element is
// used, so a corrupt file is reported with its byte offset instead of yielding garbage samples.
#include <fmt/format.h>

#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {
uint32_t big_endian_u32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}
}  // namespace

IdxArray read_idx_file(const std::string& path, uint32_t expected_magic) {
  // Offsets in messages are in the decompressed data, which is the IDX file itself.
  return parse_idx(read_maybe_gzip_file(path), path, expected_magic);
}

IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& path, uint32_t expected_magic) {
  D5_CHECK(bytes.size() >= 4, FormatError, "'{}' is truncated: {} bytes, too short for the 4-byte IDX magic at offset 0",
           path, bytes.size());
  const uint32_t magic = big_endian_u32(bytes.data());
  D5_CHECK(magic == expected_magic, FormatError,
           "'{}': IDX magic 0x{:08x} at byte offset 0, expected 0x{:08x} ({}); is this the right file?", path, magic,
           expected_magic, expected_magic == kIdxImagesMagic ? "unsigned-byte images, 3 dimensions"
                           : expected_magic == kIdxLabelsMagic ? "unsigned-byte labels, 1 dimension"
                                                               : "unsigned-byte array");
  const size_t rank = magic & 0xff;
  const size_t header = 4 + 4 * rank;
  D5_CHECK(bytes.size() >= header, FormatError,
           "'{}' is truncated: the IDX header needs {} bytes for {} dimensions, the file ends at byte offset {}", path,
           header, rank, bytes.size());
  IdxArray a;
  uint64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint32_t d = big_endian_u32(bytes.data() + 4 + 4 * i);
    D5_CHECK(d > 0 && d <= (1u << 30), FormatError, "'{}': IDX dimension {} is {} (byte offset {})", path, i, d,
             4 + 4 * i);
    a.dims.push_back(d);
    count *= d;
    D5_CHECK(count <= (uint64_t{1} << 40), FormatError, "'{}': IDX dimensions at byte offset 4 describe {}+ elements",
             path, count);
  }
  const uint64_t expected = header + count;
  D5_CHECK(bytes.size() >= expected, FormatError,
           "'{}' is truncated: its IDX header promises {} bytes of data ({} in all), the data ends at byte offset {}",
           path, count, expected, bytes.size());
  D5_CHECK(bytes.size() == expected, FormatError,
           "'{}': {} bytes of unexpected trailing data after the IDX array, from byte offset {}", path,
           bytes.size() - expected, expected);
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

}  // namespace d5
