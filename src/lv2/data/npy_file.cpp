// NPY headers (numpy.lib.format, versions 1.0-3.0): magic, version, header length, then a Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces and '\n'.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/metrics/atomic_file.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

int64_t item_size_of(const std::string& descr, const std::string& path) {
  D5_CHECK(descr.size() == 3, FormatError, "'{}': NPY dtype '{}' is not a simple numeric dtype", path, descr);
  const char order = descr[0], kind = descr[1], size = descr[2];
  static const std::string kSupported = "f4 f8 u1 i1 i2 u2 i4 i8";
  const std::string code{kind, size};
  D5_CHECK(kSupported.find(code) != std::string::npos, Unimplemented,
           "'{}': NPY dtype '{}' is not supported (supported: {}); convert the array, e.g. with "
           "array.astype('float32')",
           path, descr, kSupported);
  D5_CHECK(order == '<' || order == '|' || (order == '=' && size == '1'), Unimplemented,
           "'{}': NPY dtype '{}' is big-endian; save it little-endian (array.astype('<{}'))", path, descr, code);
  return size - '0';
}

// The value of 'key' in the header dict: the text from after "'key':" to the next top-level ',' or '}'.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path, int64_t offset) {
  const std::string quoted = "'" + key + "'";
  size_t at = header.find(quoted);
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  D5_CHECK(at != std::string::npos, FormatError, "'{}': the NPY header at byte offset {} has no '{}' entry: {}", path,
           offset, key, header);
  at = header.find(':', at + quoted.size());
  D5_CHECK(at != std::string::npos, FormatError, "'{}': malformed NPY header at byte offset {}: {}", path, offset,
           header);
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = header.substr(at, end - at);
  const size_t first = v.find_first_not_of(" \t");
  const size_t last = v.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  D5_CHECK(in, IoError, "cannot open '{}' for reading", path);
  const int64_t file_size = in.tellg();
  in.seekg(0);
  uint8_t prefix[12] = {};
  in.read(reinterpret_cast<char*>(prefix), std::min<int64_t>(file_size, 12));
  D5_CHECK(file_size >= 10, FormatError, "'{}' is truncated: {} bytes, too short for an NPY preamble (10 bytes)", path,
           file_size);
  D5_CHECK(std::equal(prefix, prefix + kMagicSize, reinterpret_cast<const uint8_t*>(kMagic)), FormatError,
           "'{}' is not an NPY file: no \\x93NUMPY magic at byte offset 0", path);
  const int major = prefix[6];
  D5_CHECK(major >= 1 && major <= 3, FormatError, "'{}': NPY version {}.{} at byte offset 6 (known: 1.0, 2.0, 3.0)",
           path, major, prefix[7]);
  int64_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = prefix[8] | prefix[9] << 8;
    header_start = 10;
  } else {
    D5_CHECK(file_size >= 12, FormatError, "'{}' is truncated: the NPY {}.0 preamble needs 12 bytes, the file has {}",
             path, major, file_size);
    header_len = int64_t{prefix[8]} | int64_t{prefix[9]} << 8 | int64_t{prefix[10]} << 16 | int64_t{prefix[11]} << 24;
    header_start = 12;
  }
  D5_CHECK(header_start + header_len <= file_size, FormatError,
           "'{}' is truncated: its NPY header of {} bytes starts at byte offset {}, the file ends at {}", path,
           header_len, header_start, file_size);
  std::string header(static_cast<size_t>(header_len), '\0');
  in.seekg(header_start);
  in.read(header.data(), header_len);
  D5_CHECK(in, IoError, "cannot read the NPY header of '{}'", path);

  NpyHeader h;
  std::string descr = dict_value(header, "descr", path, header_start);
  D5_CHECK(descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"'), Unimplemented,
           "'{}': NPY dtype {} is structured; only plain numeric arrays are supported", path, descr);
  h.descr = descr.substr(1, descr.size() - 2);
  h.item_size = item_size_of(h.descr, path);
  const std::string fortran = dict_value(header, "fortran_order", path, header_start);
  D5_CHECK(fortran == "False" || fortran == "True", FormatError,
           "'{}': NPY header at byte offset {}: fortran_order is '{}', expected True or False", path, header_start,
           fortran);
  D5_CHECK(fortran == "False", Unimplemented,
           "'{}' is stored in Fortran (column-major) order, which is not supported; save it in C order "
           "(numpy.save(path, numpy.ascontiguousarray(array)))",
           path);
  const std::string shape = dict_value(header, "shape", path, header_start);
  D5_CHECK(shape.size() >= 2 && shape.front() == '(' && shape.back() == ')', FormatError,
           "'{}': NPY header at byte offset {}: shape '{}' is not a tuple", path, header_start, shape);
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  std::string item;
  // The byte count is checked for overflow as it grows, extents after a zero included: a
  // (0, 2**40, 2**40) array holds no elements, but its sample shape would still overflow.
  int64_t count = 1, nonzero_bytes = h.item_size;
  while (std::getline(dims, item, ',')) {
    const size_t first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;  // the trailing comma of a 1-tuple
    const size_t last = item.find_last_not_of(" \t");
    const int64_t d = parse_int(std::string_view(item).substr(first, last - first + 1)).value_or(-1);
    D5_CHECK(d >= 0, FormatError, "'{}': NPY header at byte offset {}: shape entry '{}' is not a size", path,
             header_start, item);
    h.shape.push_back(d);
    D5_CHECK(!__builtin_mul_overflow(nonzero_bytes, std::max<int64_t>(d, 1), &nonzero_bytes), FormatError,
             "'{}': NPY header at byte offset {}: shape ({}) describes more than 2^63 bytes", path, header_start,
             shape.substr(1, shape.size() - 2));
    count *= d;  // count * item_size <= nonzero_bytes: no overflow
  }
  h.data_offset = header_start + header_len;
  const int64_t data_bytes = count * h.item_size;
  D5_CHECK(data_bytes <= file_size - h.data_offset, FormatError,
           "'{}' is truncated: shape ({}) of '{}' needs {} bytes of data from byte offset {}, the file ends at {}", path,
           fmt::join(h.shape, ", "), h.descr, data_bytes, h.data_offset, file_size);
  const int64_t expected = h.data_offset + data_bytes;
  D5_CHECK(file_size == expected, FormatError,
           "'{}': {} bytes of unexpected trailing data after the NPY array, from byte offset {}", path,
           file_size - expected, expected);
  return h;
}

void write_npy_file(const std::string& path, const Tensor& tensor) {
  std::string descr;
  switch (tensor.dtype()) {
    case DType::f32: descr = "<f4"; break;
    case DType::f64: descr = "<f8"; break;
    case DType::u8: descr = "|u1"; break;
    case DType::i8: descr = "|i1"; break;
    case DType::i32: descr = "<i4"; break;
    case DType::i64: descr = "<i8"; break;
    default:
      D5_THROW(Unimplemented, "write_npy_file('{}'): dtype {} has no NPY writer (f32 f64 u8 i8 i32 i64)", path,
               to_string(tensor.dtype()));
  }
  const auto& dims = tensor.shape().dims();
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i) shape += fmt::format("{}{}", dims[i], i + 1 < dims.size() || dims.size() == 1 ? ", " : "");
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // numpy pads the preamble plus header to a multiple of 64 bytes and ends it with '\n'.
  while ((kMagicSize + 4 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(tensor.data()), tensor.bytes());
  atomic_write(path, out);
}

}  // namespace d5
