// TFRecord framing, CRC-32C, and the tf.Example wire format (see include/lv2/images/tfrecord.h).
#include "lv2/images/tfrecord.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "deep500/core/error.h"

namespace d5 {

namespace {

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables make_tables() {
  CrcTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

const CrcTables& tables() {
  static const CrcTables t = make_tables();
  return t;
}

uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t le32(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24; }
void put_le(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Reads exactly n bytes at offset; returns how many were there (fewer at end of file).
size_t pread_all(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) D5_THROW(IoError, "reading '{}' at offset {} failed: {}", path, offset + done, std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// --- protobuf wire format ------------------------------------------------------------------------

struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  const std::string& what;

  bool done() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      D5_CHECK(p < end, FormatError, "tf.Example '{}': truncated varint", what);
      const uint8_t b = *p++;
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    D5_THROW(FormatError, "tf.Example '{}': varint longer than 10 bytes", what);
  }
  std::span<const uint8_t> bytes() {
    const uint64_t n = varint();
    D5_CHECK(n <= static_cast<uint64_t>(end - p), FormatError, "tf.Example '{}': field of {} bytes overruns its message",
             what, n);
    std::span<const uint8_t> s(p, static_cast<size_t>(n));
    p += n;
    return s;
  }
  uint32_t fixed32() {
    D5_CHECK(end - p >= 4, FormatError, "tf.Example '{}': truncated fixed32", what);
    const uint32_t v = le32(p);
    p += 4;
    return v;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1:
        D5_CHECK(end - p >= 8, FormatError, "tf.Example '{}': truncated fixed64", what);
        p += 8;
        return;
      case 2: bytes(); return;
      case 5: fixed32(); return;
      default: D5_THROW(FormatError, "tf.Example '{}': unsupported wire type {}", what, wire_type);
    }
  }
};

Wire sub(std::span<const uint8_t> s, const std::string& what) { return Wire{s.data(), s.data() + s.size(), what}; }

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TfFeature parse_feature(std::span<const uint8_t> data, const std::string& what) {
  TfFeature f;
  Wire w = sub(data, what);
  while (!w.done()) {
    const uint64_t tag = w.varint();
    const auto field = tag >> 3;
    const auto wt = static_cast<uint32_t>(tag & 7);
    if (wt != 2 || field < 1 || field > 3) {
      w.skip(wt);
      continue;
    }
    f.kind = field == 1 ? TfFeature::Kind::Bytes : field == 2 ? TfFeature::Kind::Float : TfFeature::Kind::Int64;
    Wire list = sub(w.bytes(), what);
    while (!list.done()) {
      const uint64_t t = list.varint();
      const auto lwt = static_cast<uint32_t>(t & 7);
      if ((t >> 3) != 1) {
        list.skip(lwt);
        continue;
      }
      if (field == 1 && lwt == 2) {
        const auto b = list.bytes();
        f.bytes.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
      } else if (field == 2 && lwt == 5) {
        f.floats.push_back(as_float(list.fixed32()));
      } else if (field == 2 && lwt == 2) {
        Wire packed = sub(list.bytes(), what);
        while (!packed.done()) f.floats.push_back(as_float(packed.fixed32()));
      } else if (field == 3 && lwt == 0) {
        f.ints.push_back(static_cast<int64_t>(list.varint()));
      } else if (field == 3 && lwt == 2) {
        Wire packed = sub(list.bytes(), what);
        while (!packed.done()) f.ints.push_back(static_cast<int64_t>(packed.varint()));
      } else {
        D5_THROW(FormatError, "tf.Example '{}': feature list value has wire type {}", what, lwt);
      }
    }
  }
  return f;
}

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}
void put_field(std::vector<uint8_t>& out, uint64_t field, std::span<const uint8_t> payload) {
  put_varint(out, field << 3 | 2);
  put_varint(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc) {
  const CrcTables& t = tables();
  const uint8_t* p = data.data();
  size_t n = data.size();
  crc = ~crc;
  while (n >= 8) {
    const uint32_t lo = crc ^ le32(p);
    const uint32_t hi = le32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^ t[3][hi & 0xff] ^
          t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

uint32_t tfrecord_masked_crc(std::span<const uint8_t> data) { return mask(crc32c(data)); }

std::vector<TfRecordLocation> scan_tfrecord_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) D5_THROW(IoError, "cannot open TFRecord file '{}': {}", path, std::strerror(errno));
  std::vector<TfRecordLocation> out;
  try {
    const off_t file_size = ::lseek(fd, 0, SEEK_END);
    D5_CHECK(file_size >= 0, IoError, "cannot seek in '{}'", path);
    const auto size = static_cast<uint64_t>(file_size);
    uint64_t offset = 0;
    while (offset < size) {
      uint8_t head[12];
      const size_t got = pread_all(fd, head, 12, offset, path);
      D5_CHECK(got == 12, FormatError, "TFRecord file '{}' is truncated: record header at offset {} has {} of 12 bytes",
               path, offset, got);
      const uint64_t length = le64(head);
      const bool crc_ok = le32(head + 8) == mask(crc32c({head, 8}));
      D5_CHECK(crc_ok || offset != 0 || head[0] != 0x1f || head[1] != 0x8b, FormatError,
               "TFRecord file '{}' is gzip-compressed (written with compression GZIP): gunzip it first", path);
      D5_CHECK(crc_ok, FormatError,
               "TFRecord file '{}': the length CRC of the record at offset {} does not match (corrupt file)", path,
               offset);
      D5_CHECK(length <= size - offset - 12 && size - offset - 12 - length >= 4, FormatError,
               "TFRecord file '{}' is truncated: the record at offset {} needs {} data bytes + 4 CRC bytes, {} remain",
               path, offset, length, size - offset - 12);
      out.push_back({offset, length});
      offset += 12 + length + 4;
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

std::vector<uint8_t> read_tfrecord(int fd, const std::string& path, const TfRecordLocation& where) {
  std::vector<uint8_t> buf(where.length + 4);
  const size_t got = pread_all(fd, buf.data(), buf.size(), where.offset + 12, path);
  D5_CHECK(got == buf.size(), FormatError, "TFRecord file '{}' is truncated: the record at offset {} ends early", path,
           where.offset);
  const uint32_t stored = le32(buf.data() + where.length);
  buf.resize(where.length);
  D5_CHECK(stored == mask(crc32c(buf)), FormatError,
           "TFRecord file '{}': the data CRC of the record at offset {} does not match (corrupt file)", path,
           where.offset);
  return buf;
}

TfRecordWriter::TfRecordWriter(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (!file_) D5_THROW(IoError, "cannot create TFRecord file '{}': {}", path, std::strerror(errno));
}

TfRecordWriter::~TfRecordWriter() {
  if (file_) std::fclose(static_cast<FILE*>(file_));
}

void TfRecordWriter::write(std::span<const uint8_t> record) {
  D5_CHECK_ARG(file_, "TFRecord file '{}' is closed", path_);
  uint8_t head[12];
  put_le(head, record.size(), 8);
  put_le(head + 8, mask(crc32c({head, 8})), 4);
  uint8_t tail[4];
  put_le(tail, mask(crc32c(record)), 4);
  auto* f = static_cast<FILE*>(file_);
  // An empty record has no data pointer, and fwrite's may not be null even for 0 bytes.
  const bool ok = std::fwrite(head, 1, 12, f) == 12 &&
                  (record.empty() || std::fwrite(record.data(), 1, record.size(), f) == record.size()) &&
                  std::fwrite(tail, 1, 4, f) == 4;
  if (!ok) D5_THROW(IoError, "writing TFRecord file '{}' failed: {}", path_, std::strerror(errno));
}

void TfRecordWriter::close() {
  if (!file_) return;
  const int rc = std::fclose(static_cast<FILE*>(file_));
  file_ = nullptr;
  if (rc != 0) D5_THROW(IoError, "closing TFRecord file '{}' failed: {}", path_, std::strerror(errno));
}

TfExample parse_tf_example(std::span<const uint8_t> data, const std::string& what) {
  TfExample ex;
  Wire w = sub(data, what);
  while (!w.done()) {
    const uint64_t tag = w.varint();
    if (tag != (1u << 3 | 2)) {  // Example.features
      w.skip(static_cast<uint32_t>(tag & 7));
      continue;
    }
    Wire features = sub(w.bytes(), what);
    while (!features.done()) {
      const uint64_t ftag = features.varint();
      if (ftag != (1u << 3 | 2)) {  // Features.feature (map entry)
        features.skip(static_cast<uint32_t>(ftag & 7));
        continue;
      }
      Wire entry = sub(features.bytes(), what);
      std::string key;
      TfFeature value;
      while (!entry.done()) {
        const uint64_t etag = entry.varint();
        if (etag == (1u << 3 | 2)) {
          const auto k = entry.bytes();
          key.assign(reinterpret_cast<const char*>(k.data()), k.size());
        } else if (etag == (2u << 3 | 2)) {
          value = parse_feature(entry.bytes(), what);
        } else {
          entry.skip(static_cast<uint32_t>(etag & 7));
        }
      }
      ex[key] = std::move(value);
    }
  }
  return ex;
}

std::vector<uint8_t> serialize_tf_example(const TfExample& example) {
  std::vector<uint8_t> features;
  for (const auto& [key, f] : example) {
    std::vector<uint8_t> list;
    if (f.kind == TfFeature::Kind::Bytes) {
      for (const auto& b : f.bytes) put_field(list, 1, {reinterpret_cast<const uint8_t*>(b.data()), b.size()});
    } else {
      std::vector<uint8_t> packed;
      if (f.kind == TfFeature::Kind::Float) {
        for (float v : f.floats) {
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          uint8_t b[4];
          put_le(b, bits, 4);
          packed.insert(packed.end(), b, b + 4);
        }
      } else {
        for (int64_t v : f.ints) put_varint(packed, static_cast<uint64_t>(v));
      }
      if (!packed.empty()) put_field(list, 1, packed);
    }
    std::vector<uint8_t> feature;
    put_field(feature, f.kind == TfFeature::Kind::Bytes ? 1 : f.kind == TfFeature::Kind::Float ? 2 : 3, list);
    std::vector<uint8_t> entry;
    put_field(entry, 1, {reinterpret_cast<const uint8_t*>(key.data()), key.size()});
    put_field(entry, 2, feature);
    put_field(features, 1, entry);
  }
  std::vector<uint8_t> out;
  put_field(out, 1, features);
  return out;
}

}  // namespace d5
