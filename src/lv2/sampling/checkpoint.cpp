// Checkpoint file format (include/deep500/train/checkpoint.h, docs/checkpoints.md).
#include "deep500/train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "deep500/metrics/atomic_file.h"

namespace d5 {

namespace {

constexpr std::array<char, 8> kMagic = {'D', '5', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr uint64_t kFixedHeaderBytes = 24;
constexpr uint64_t kAlign = 64;
// A header longer than this is not a checkpoint we wrote (names and shapes of even very large
// models fit in a few MiB); refusing early keeps a corrupt length from allocating gigabytes.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;

uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  // zlib takes a uInt length; feed large tensors in pieces.
  constexpr size_t kChunk = size_t{1} << 30;
  while (size > 0) {
    const size_t n = std::min(size, kChunk);
    crc = ::crc32(crc, p, static_cast<uInt>(n));
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void put_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}
template <typename T>
T get_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

void require_little_endian_host(const char* what) {
  if constexpr (std::endian::native != std::endian::little) {
    D5_THROW(Unimplemented, "{} checkpoints needs a little-endian host (tensor bytes are stored little-endian)",
             what);
  }
}

struct Entry {
  std::string name;
  TensorDesc desc;
  uint64_t offset = 0;  // relative to the payload start
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

// Everything load_checkpoint needs to know about where it is, for error messages.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    D5_CHECK(!ec, IoError, "cannot open checkpoint '{}': {}", path_, ec.message());
    size_ = static_cast<uint64_t>(size);
    in_.open(path_, std::ios::binary);
    D5_CHECK(in_.good(), IoError, "cannot open checkpoint '{}' for reading: {}", path_, std::strerror(errno));
  }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  void read(uint64_t offset, void* out, uint64_t bytes, const char* what) {
    if (offset + bytes > size_) {
      D5_THROW(FormatError, "checkpoint '{}' is truncated: {} needs bytes [{}, {}) but the file ends at offset {}",
               path_, what, offset, offset + bytes, size_);
    }
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
    D5_CHECK(in_.good(), IoError, "reading {} of checkpoint '{}' at offset {} failed: {}", what, path_, offset,
             std::strerror(errno));
  }

  [[noreturn]] void fail(uint64_t offset, const std::string& message) const {
    D5_THROW(FormatError, "checkpoint '{}' at offset {}: {}", path_, offset, message);
  }

 private:
  std::string path_;
  uint64_t size_ = 0;
  std::ifstream in_;
};

// An integer field of the header, only when the JSON value is an integer that fits T: nlohmann's
// get<T>() would convert 1e300 with undefined behaviour, or wrap 4294967296 to a CRC of 0.
template <typename T>
T header_integer(const nlohmann::json& v, const char* field) {
  const bool fits = v.is_number_unsigned()  ? std::in_range<T>(v.get<uint64_t>())
                    : v.is_number_integer() ? std::in_range<T>(v.get<int64_t>())
                                            : false;
  if (!fits) throw InvalidArgument(fmt::format("'{}' is {}, not an integer of its range", field, v.dump()));
  return v.get<T>();
}

// The header's tensor list, validated against itself and the payload size it declares.
std::vector<Entry> parse_entries(const Reader& reader, const nlohmann::json& header, uint64_t payload_bytes) {
  const uint64_t at = kFixedHeaderBytes;  // header problems are reported at the header's offset
  const auto& tensors = header.at("tensors");
  if (!tensors.is_array()) reader.fail(at, "header field 'tensors' is not an array");
  std::vector<Entry> entries;
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const auto where = [&](const std::string& what) {
      reader.fail(at, fmt::format("header entry #{} ({}): {}", i, t.is_object() && t.contains("name") ? t["name"].dump() : "?", what));
    };
    if (!t.is_object()) where("not an object");
    Entry e;
    try {
      e.name = t.at("name").get<std::string>();
      e.desc.dtype = parse_dtype(t.at("dtype").get<std::string>());
      e.desc.layout = parse_layout(t.at("layout").get<std::string>());
      const auto& shape = t.at("shape");
      if (!shape.is_array()) where("'shape' is not a list");
      std::vector<int64_t> dims;
      for (const auto& d : shape) dims.push_back(header_integer<int64_t>(d, "shape"));
      for (int64_t d : dims) {
        if (d < 0) where(fmt::format("negative extent {} in the shape", d));
      }
      e.desc.shape = Shape(std::move(dims));
      e.offset = header_integer<uint64_t>(t.at("offset"), "offset");
      e.bytes = header_integer<uint64_t>(t.at("bytes"), "bytes");
      e.crc = header_integer<uint32_t>(t.at("crc32"), "crc32");
    } catch (const nlohmann::json::exception& ex) {
      where(fmt::format("malformed field ({})", ex.what()));
    } catch (const InvalidArgument& ex) {
      where(ex.what());
    }
    if (!names.insert(e.name).second) where("the name appears twice");
    // Checked before desc.bytes(), whose element count would overflow for absurd extents.
    const auto& dims = e.desc.shape.dims();
    if (std::find(dims.begin(), dims.end(), 0) == dims.end()) {
      uint64_t elements = 1;
      for (int64_t d : dims) {
        if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) || elements > payload_bytes) {
          where(fmt::format("shape {} holds more elements than the {}-byte payload has bytes", e.desc.shape.to_string(),
                            payload_bytes));
        }
      }
    }
    if (e.bytes != e.desc.bytes()) {
      where(fmt::format("{} bytes recorded but {} needs {}", e.bytes, e.desc.to_string(), e.desc.bytes()));
    }
    if (e.offset % kAlign != 0) where(fmt::format("payload offset {} is not {}-byte aligned", e.offset, kAlign));
    if (e.offset > payload_bytes || e.bytes > payload_bytes - e.offset) {
      where(fmt::format("bytes [{}, {}) lie outside the {}-byte payload", e.offset, e.offset + e.bytes, payload_bytes));
    }
    entries.push_back(std::move(e));
  }
  // Overlapping tensors would mean two names share bytes: not something save_checkpoint writes.
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& prev = *by_offset[i - 1];
    if (prev.offset + prev.bytes > by_offset[i]->offset) {
      reader.fail(at, fmt::format("tensors '{}' and '{}' overlap in the payload", prev.name, by_offset[i]->name));
    }
  }
  return entries;
}

}  // namespace

void save_checkpoint(const std::string& path, const std::map<std::string, Tensor>& tensors,
                     const nlohmann::json& meta) {
  require_little_endian_host("writing");
  std::vector<Entry> entries;
  nlohmann::json list = nlohmann::json::array();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    D5_CHECK_ARG(t.defined(), "save_checkpoint '{}': tensor '{}' is undefined (an empty Tensor()); store only defined tensors",
                 path, name);
    D5_CHECK_ARG(t.device().kind == DeviceKind::cpu,
                 "save_checkpoint '{}': tensor '{}' is on {}; copy it to host memory first", path, name,
                 t.device().to_string());
    Entry e{name, t.desc(), offset, t.bytes(), crc32_of(t.data(), t.bytes())};
    list.push_back({{"name", e.name},
                    {"dtype", std::string(to_string(e.desc.dtype))},
                    {"shape", e.desc.shape.dims()},
                    {"layout", std::string(to_string(e.desc.layout))},
                    {"offset", e.offset},
                    {"bytes", e.bytes},
                    {"crc32", e.crc}});
    offset = align_up(offset + e.bytes);
    entries.push_back(std::move(e));
  }
  const uint64_t payload_bytes = offset;
  const nlohmann::json header = {{"format", "deep500-checkpoint"},
                                 {"version", kCheckpointVersion},
                                 {"byte_order", "little"},
                                 {"payload_bytes", payload_bytes},
                                 {"tensors", std::move(list)},
                                 {"meta", meta}};
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& ex) {
    D5_THROW(InvalidArgument, "save_checkpoint '{}': tensor names and metadata must be valid UTF-8 JSON ({})", path,
             ex.what());
  }

  std::string prefix(kMagic.begin(), kMagic.end());
  put_le<uint32_t>(prefix, kCheckpointVersion);
  put_le<uint32_t>(prefix, crc32_of(header_text.data(), header_text.size()));
  put_le<uint64_t>(prefix, header_text.size());
  prefix += header_text;
  prefix.resize(align_up(prefix.size()), '\0');

  atomic_write(path, [&](std::ostream& out) {
    out.write(prefix.data(), static_cast<std::streamsize>(prefix.size()));
    static constexpr char kZeros[kAlign] = {};
    uint64_t written = 0;
    for (const auto& e : entries) {
      out.write(kZeros, static_cast<std::streamsize>(e.offset - written));
      out.write(static_cast<const char*>(tensors.at(e.name).data()), static_cast<std::streamsize>(e.bytes));
      written = e.offset + e.bytes;
    }
    out.write(kZeros, static_cast<std::streamsize>(payload_bytes - written));
  });
}

Checkpoint load_checkpoint(const std::string& path) {
  require_little_endian_host("reading");
  Reader reader(path);
  if (reader.size() < kFixedHeaderBytes) {
    D5_THROW(FormatError, "checkpoint '{}' is truncated: it has {} bytes, fewer than the {}-byte fixed header (offset {})",
             path, reader.size(), kFixedHeaderBytes, reader.size());
  }
  unsigned char fixed[kFixedHeaderBytes];
  reader.read(0, fixed, kFixedHeaderBytes, "the fixed header");
  if (std::memcmp(fixed, kMagic.data(), kMagic.size()) != 0) {
    reader.fail(0, "not a deep500 checkpoint (magic bytes differ from \"D5CKPT\\r\\n\")");
  }
  const auto version = get_le<uint32_t>(fixed + 8);
  if (version != static_cast<uint32_t>(kCheckpointVersion)) {
    reader.fail(8, fmt::format("format version {} is not supported (this build reads version {})", version,
                               kCheckpointVersion));
  }
  const auto header_crc = get_le<uint32_t>(fixed + 12);
  const auto header_bytes = get_le<uint64_t>(fixed + 16);
  if (header_bytes > kMaxHeaderBytes || header_bytes > reader.size() - kFixedHeaderBytes) {
    reader.fail(16, fmt::format("header length {} does not fit in the {}-byte file (truncated or corrupt)",
                                header_bytes, reader.size()));
  }
  std::string header_text(header_bytes, '\0');
  reader.read(kFixedHeaderBytes, header_text.data(), header_bytes, "the header");
  const uint32_t actual_header_crc = crc32_of(header_text.data(), header_text.size());
  if (actual_header_crc != header_crc) {
    reader.fail(kFixedHeaderBytes, fmt::format("header bytes [{}, {}) fail their CRC-32 check (stored {:08x}, computed {:08x})",
                                               kFixedHeaderBytes, kFixedHeaderBytes + header_bytes, header_crc,
                                               actual_header_crc));
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::parse_error& ex) {
    reader.fail(kFixedHeaderBytes + (ex.byte > 0 ? ex.byte - 1 : 0), fmt::format("header is not valid JSON ({})", ex.what()));
  } catch (const nlohmann::json::exception& ex) {  // out_of_range: a number like 1e400
    reader.fail(kFixedHeaderBytes, fmt::format("header is not valid JSON ({})", ex.what()));
  }
  if (!header.is_object() || !header.contains("tensors") || !header.contains("payload_bytes") ||
      !header["payload_bytes"].is_number_unsigned()) {
    reader.fail(kFixedHeaderBytes, "header lacks 'tensors' or 'payload_bytes'");
  }
  // find, not value(): value() throws json's own type_error when byte_order is not a string.
  const auto byte_order = header.find("byte_order");
  if (byte_order == header.end() || !byte_order->is_string() || *byte_order != "little") {
    reader.fail(kFixedHeaderBytes, fmt::format("byte order {} is not supported (only \"little\")",
                                               header.contains("byte_order") ? header["byte_order"].dump() : "(missing)"));
  }
  const auto payload_bytes = header["payload_bytes"].get<uint64_t>();
  const std::vector<Entry> entries = parse_entries(reader, header, payload_bytes);

  const uint64_t data_start = align_up(kFixedHeaderBytes + header_bytes);
  if (data_start > reader.size() || payload_bytes > reader.size() - data_start) {
    D5_THROW(FormatError,
             "checkpoint '{}' is truncated: the {}-byte payload starts at offset {} but the file ends at offset {}",
             path, payload_bytes, data_start, reader.size());
  }
  const uint64_t expected_size = data_start + payload_bytes;
  if (reader.size() > expected_size) {
    reader.fail(expected_size, fmt::format("{} unexpected bytes after the payload", reader.size() - expected_size));
  }

  Checkpoint ckpt;
  ckpt.meta = header.contains("meta") ? header["meta"] : nlohmann::json::object();
  for (const auto& e : entries) {
    Tensor t = Tensor::uninitialized(e.desc);
    const uint64_t at = data_start + e.offset;
    reader.read(at, t.data(), e.bytes, "a tensor");
    const uint32_t crc = crc32_of(t.data(), e.bytes);
    if (crc != e.crc) {
      reader.fail(at, fmt::format("tensor '{}' ({}) bytes [{}, {}) fail their CRC-32 check (stored {:08x}, computed {:08x})",
                                  e.name, e.desc.to_string(), at, at + e.bytes, e.crc, crc));
    }
    ckpt.tensors.emplace(e.name, std::move(t));
  }
  return ckpt;
}

}  // namespace d5
