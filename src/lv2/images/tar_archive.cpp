// Tar reading and writing over zlib's gz* functions: they read plain files transparently, so one
// code path serves .tar and .tar.gz (a forward gzseek on a plain file is an lseek).
#include "lv2/images/tar_archive.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

#include <zlib.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

// An absolute path, or one with a ".." component.
bool leaves_the_tree(const std::string& path) {
  if (!path.empty() && path[0] == '/') return true;
  for (size_t begin = 0; begin <= path.size();) {
    const size_t end = std::min(path.find('/', begin), path.size());
    if (path.compare(begin, end - begin, "..") == 0 && end - begin == 2) return true;
    begin = end + 1;
  }
  return false;
}

constexpr uint64_t kBlock = 512;

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

bool all_zero(const uint8_t* b) {
  return std::all_of(b, b + kBlock, [](uint8_t c) { return c == 0; });
}

std::string field_string(const uint8_t* p, size_t n) {
  const auto* end = static_cast<const uint8_t*>(std::memchr(p, 0, n));
  return std::string(reinterpret_cast<const char*>(p), end ? static_cast<size_t>(end - p) : n);
}

// Octal (optionally space/NUL padded) or GNU base-256 (high bit of the first byte set).
bool parse_number(const uint8_t* p, size_t n, uint64_t& out) {
  out = 0;
  if (p[0] & 0x80) {
    if (p[0] & 0x40) return false;  // negative
    out = p[0] & 0x3f;
    for (size_t i = 1; i < n; ++i) {
      if (out >> 56) return false;
      out = (out << 8) | p[i];
    }
    return true;
  }
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (out >> 61) return false;
    out = out * 8 + static_cast<uint64_t>(p[i] - '0');
    any = true;
  }
  for (; i < n; ++i) {
    if (p[i] != ' ' && p[i] != 0) return false;
  }
  return any || p[0] == ' ' || p[0] == 0;  // an empty field reads as 0
}

// n - 1 zero-padded octal digits and a NUL; the value must fit.
void put_octal(uint8_t* p, size_t n, uint64_t v) {
  p[n - 1] = 0;
  for (size_t i = n - 1; i-- > 0;) {
    p[i] = static_cast<uint8_t>('0' + (v & 7));
    v >>= 3;
  }
}

}  // namespace

uint32_t tar_header_checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? uint32_t{' '} : h[i];
  return sum;
}

struct TarReader::Source {
  gzFile gz = nullptr;
  bool gzip = false;
  ~Source() {
    if (gz) gzclose_r(gz);
  }
};

TarReader::TarReader(const std::string& path) : path_(path), src_(std::make_unique<Source>()) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) D5_THROW(IoError, "cannot open tar archive '{}': {}", path, std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::fclose(f);
  src_->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  src_->gz = gzopen(path.c_str(), "rb");
  if (!src_->gz) D5_THROW(IoError, "cannot open tar archive '{}'", path);
  gzbuffer(src_->gz, 1 << 17);
}

TarReader::TarReader(const std::string& path, uint64_t offset, uint64_t length, const std::string& name)
    : TarReader(path) {
  D5_CHECK_ARG(!src_->gzip, "'{}': a nested tar can only be read from an uncompressed tar", path);
  path_ = path + ":" + name;
  if (gzseek(src_->gz, static_cast<z_off_t>(offset), SEEK_SET) < 0) {
    D5_THROW(FormatError, "tar archive '{}': cannot seek to offset {}", path_, offset);
  }
  pos_ = offset;
  limit_ = offset + length;
}

TarReader::~TarReader() = default;

bool TarReader::gzip() const { return src_->gzip; }

void TarReader::read_exact(void* dst, uint64_t n, const char* what) {
  D5_CHECK(n <= limit_ - pos_, FormatError, "tar archive '{}' is truncated: {} at offset {} runs past its end at {}",
           path_, what, pos_, limit_);
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
    const int got = gzread(src_->gz, out + done, chunk);
    if (got <= 0) {
      int code = 0;
      const char* msg = gzerror(src_->gz, &code);
      D5_THROW(FormatError, "tar archive '{}' is truncated or corrupt: {} at offset {} ends after {} of {} bytes{}",
               path_, what, pos_, done, n, code != Z_OK && msg ? fmt::format(" ({})", msg) : std::string());
    }
    done += static_cast<uint64_t>(got);
  }
  pos_ += n;
}

void TarReader::skip(uint64_t n, const char* what) {
  if (n == 0) return;
  if (!src_->gzip) {
    // A plain file: seek, then make sure the data really is there (a seek past the end succeeds).
    const z_off_t to = gzseek(src_->gz, static_cast<z_off_t>(n - 1), SEEK_CUR);
    if (to < 0) D5_THROW(FormatError, "tar archive '{}': cannot skip {} at offset {}", path_, what, pos_);
    pos_ += n - 1;
    uint8_t last = 0;
    read_exact(&last, 1, what);
    return;
  }
  uint8_t buf[1 << 15];
  while (n > 0) {
    const uint64_t chunk = std::min<uint64_t>(n, sizeof(buf));
    read_exact(buf, chunk, what);
    n -= chunk;
  }
}

namespace {

// What GNU long-name and pax records say about the member whose header follows them.
struct PendingOverrides {
  std::optional<std::string> path;
  std::optional<uint64_t> size;
  bool any() const { return path || size; }
};

// Records are "<length> <key>=<value>\n"; the length counts the whole record. Returns false on a
// malformed record.
bool parse_pax_records(const std::string& data, PendingOverrides& o) {
  size_t p = 0;
  while (p < data.size()) {
    const size_t sp = data.find(' ', p);
    uint64_t len = 0;
    bool ok = sp != std::string::npos && sp > p;
    for (size_t i = p; ok && i < sp; ++i) {
      ok = data[i] >= '0' && data[i] <= '9';
      len = len * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    ok = ok && len > sp - p + 1 && p + len <= data.size() && data[p + len - 1] == '\n';
    const size_t eq = ok ? data.find('=', sp) : std::string::npos;
    if (!ok || eq == std::string::npos || eq >= p + len) return false;
    const std::string key = data.substr(sp + 1, eq - sp - 1);
    const std::string value = data.substr(eq + 1, p + len - 1 - (eq + 1));
    if (key == "path") o.path = value;
    if (key == "size") o.size = std::strtoull(value.c_str(), nullptr, 10);
    p += len;
  }
  return true;
}

}  // namespace

void TarReader::read_header(uint8_t* h, uint64_t& header_offset) {
  header_offset = pos_;
  const int first = pos_ < limit_ ? gzread(src_->gz, h, 1) : 0;
  if (first <= 0) {
    int code = Z_OK;
    const char* msg = first < 0 || src_->gzip ? gzerror(src_->gz, &code) : nullptr;
    D5_THROW(FormatError,
             "tar archive '{}' ends at offset {} without its end-of-archive marker (truncated download or copy?){}",
             path_, pos_, code != Z_OK && msg ? fmt::format(" ({})", msg) : std::string());
  }
  pos_ += 1;
  read_exact(h + 1, kBlock - 1, "header");
}

bool TarReader::next(TarMember& m) {
  if (ended_) return false;
  if (pending_data_ > 0) {
    skip(pending_data_, "member data");
    pending_data_ = 0;
  }
  PendingOverrides overrides;
  uint8_t h[kBlock];
  for (;;) {
    uint64_t header_offset = 0;
    read_header(h, header_offset);
    if (all_zero(h)) {
      if (overrides.any()) {
        D5_THROW(FormatError, "tar archive '{}': end-of-archive marker at offset {} follows a long-name record",
                 path_, header_offset);
      }
      ended_ = true;
      return false;
    }
    uint64_t stored = 0;
    if (!parse_number(h + 148, 8, stored) || stored != tar_header_checksum(h)) {
      D5_THROW(FormatError,
               "tar archive '{}': header at offset {} has a bad checksum (stored {}, computed {}); the archive is "
               "corrupt or not a tar file",
               path_, header_offset, stored, tar_header_checksum(h));
    }
    uint64_t size = 0, mtime = 0;
    if (!parse_number(h + 124, 12, size) || !parse_number(h + 136, 12, mtime)) {
      D5_THROW(FormatError, "tar archive '{}': header at offset {} has a malformed size or mtime field", path_,
               header_offset);
    }
    const char type = static_cast<char>(h[156]);
    if (type == 'L' || type == 'x') {
      std::string data(size, '\0');
      read_exact(data.data(), size, type == 'L' ? "GNU long name" : "pax header");
      skip(padded(size) - size, "padding");
      if (type == 'L') {
        overrides.path = field_string(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      } else if (!parse_pax_records(data, overrides)) {
        D5_THROW(FormatError, "tar archive '{}': malformed pax record in the header at offset {}", path_,
                 header_offset);
      }
      continue;
    }
    if (type == 'g' || type == 'K') {  // pax global header, GNU long link name: not needed for reading members
      skip(padded(size), "header data");
      continue;
    }
    m = TarMember{};
    if (overrides.path) {
      m.path = *overrides.path;
    } else {
      m.path = field_string(h, 100);
      const bool posix = std::memcmp(h + 257, "ustar\0", 6) == 0;
      const std::string prefix = posix ? field_string(h + 345, 155) : std::string();
      if (!prefix.empty()) m.path = prefix + "/" + m.path;
    }
    // deep500 never extracts members, but it names classes and index entries after their paths:
    // a path that climbs out of the archive's tree is a crafted archive, not a dataset.
    D5_CHECK(!leaves_the_tree(m.path), FormatError,
             "tar archive '{}': member '{}' (header at offset {}) has an absolute path or a '..' component; "
             "dataset archives hold relative paths inside their own tree",
             path_, m.path, header_offset);
    m.type = type;
    m.header_offset = header_offset;
    m.data_offset = pos_;
    m.size = overrides.size.value_or(size);
    m.mtime = static_cast<int64_t>(mtime);
    // Directories, links and devices carry no data even if a size is set (hard links in some tars).
    const bool has_data = m.regular_file() || type == 'S' || (type >= 'A' && type <= 'Z');
    if (!has_data) m.size = 0;
    current_size_ = m.size;
    pending_data_ = padded(m.size);
    data_read_ = false;
    return true;
  }
}

std::vector<uint8_t> TarReader::read_data() {
  D5_CHECK_ARG(!data_read_ && !ended_, "tar archive '{}': read_data() needs a current member whose data is unread",
               path_);
  std::vector<uint8_t> data(current_size_);
  read_exact(data.data(), current_size_, "member data");
  skip(pending_data_ - current_size_, "padding");
  pending_data_ = 0;
  data_read_ = true;
  return data;
}

std::vector<TarMember> list_tar(const std::string& path) {
  TarReader reader(path);
  std::vector<TarMember> out;
  TarMember m;
  while (reader.next(m)) out.push_back(m);
  return out;
}

// ---------------------------------------------------------------------------------------------

struct TarWriter::Sink {
  gzFile gz = nullptr;
};

TarWriter::TarWriter(const std::string& path, bool gzip, LongNames long_names)
    : path_(path), sink_(std::make_unique<Sink>()), long_names_(long_names) {
  sink_->gz = gzopen(path.c_str(), gzip ? "wb6" : "wbT");
  if (!sink_->gz) D5_THROW(IoError, "cannot create tar archive '{}': {}", path, std::strerror(errno));
}

TarWriter::~TarWriter() {
  if (finished_) return;
  try {
    finish();
  } catch (...) {  // a destructor must not throw; callers who care call finish()
  }
}

void TarWriter::write(const void* data, size_t n) {
  if (n == 0) return;
  if (gzwrite(sink_->gz, data, static_cast<unsigned>(n)) != static_cast<int>(n)) {
    int code = 0;
    D5_THROW(IoError, "writing tar archive '{}' failed: {}", path_, gzerror(sink_->gz, &code));
  }
}

void TarWriter::pad(uint64_t n) {
  static const uint8_t zeros[kBlock] = {};
  const uint64_t extra = padded(n) - n;
  write(zeros, extra);
}

void TarWriter::write_header(const std::string& name, char type, uint64_t size, int64_t mtime) {
  D5_CHECK_ARG(!finished_, "tar archive '{}' is already finished", path_);
  D5_CHECK_ARG(!name.empty(), "tar member names must not be empty");
  if (name.size() > 100) {
    std::string record;
    char record_type = 'L';
    if (long_names_ == LongNames::Gnu) {
      record = name + '\0';
    } else {
      record_type = 'x';
      // The length prefix counts itself: grow it until it is consistent.
      const std::string body = " path=" + name + "\n";
      size_t len = body.size() + 1;
      while (std::to_string(len).size() + body.size() != len) ++len;
      record = std::to_string(len) + body;
    }
    write_header(record_type == 'L' ? "././@LongLink" : "PaxHeader", record_type, record.size(), mtime);
    write(record.data(), record.size());
    pad(record.size());
  }
  uint8_t h[kBlock] = {};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  D5_CHECK_ARG(size < (uint64_t{1} << 33), "tar member '{}' is {} bytes; members of 8 GiB or more are not supported",
               name, size);
  put_octal(h + 100, 8, type == '5' ? 0755u : 0644u);
  put_octal(h + 108, 8, 0);
  put_octal(h + 116, 8, 0);
  put_octal(h + 124, 12, size);
  put_octal(h + 136, 12, static_cast<uint64_t>(std::clamp<int64_t>(mtime, 0, (int64_t{1} << 33) - 1)));
  h[156] = static_cast<uint8_t>(type);
  std::memcpy(h + 257, "ustar\0" "00", 8);
  put_octal(h + 148, 7, tar_header_checksum(h));  // 6 digits, NUL, then a space (as GNU tar)
  h[155] = ' ';
  write(h, kBlock);
}

void TarWriter::add_file(const std::string& name, std::span<const uint8_t> data, int64_t mtime) {
  write_header(name, '0', data.size(), mtime);
  write(data.data(), data.size());
  pad(data.size());
}

void TarWriter::add_directory(const std::string& name, int64_t mtime) {
  write_header(name.back() == '/' ? name : name + "/", '5', 0, mtime);
}

void TarWriter::finish() {
  if (finished_) return;
  finished_ = true;
  static const uint8_t zeros[2 * kBlock] = {};
  write(zeros, sizeof(zeros));
  const int rc = gzclose_w(sink_->gz);
  sink_->gz = nullptr;
  if (rc != Z_OK) D5_THROW(IoError, "closing tar archive '{}' failed (zlib error {})", path_, rc);
}

}  // namespace d5
