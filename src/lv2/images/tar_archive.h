#pragma once
// Tar archives (docs/image-datasets.md): POSIX ustar with GNU long names ('L') and pax extended
// headers ('x'), read from a plain file or a gzip stream. Every header's checksum is verified; an
// archive that ends before its end-of-archive marker is a FormatError naming the file and offset.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace d5 {

struct TarMember {
  std::string path;            // after applying a preceding 'L' or pax 'path' record
  char type = '0';             // '0' regular file, '5' directory, ... (as in the header)
  uint64_t header_offset = 0;  // of the member's own header, in the uncompressed stream
  uint64_t data_offset = 0;    // of its first data byte, in the uncompressed stream
  uint64_t size = 0;
  int64_t mtime = 0;
  bool regular_file() const { return type == '0' || type == '\0' || type == '7'; }
};

// Sequential reader. Offsets are positions in the uncompressed stream, so for a plain tar they
// are file offsets a reader can pread from.
class TarReader {
 public:
  // Gzip is detected by its magic bytes. IoError when the file cannot be opened.
  explicit TarReader(const std::string& path);
  // A tar stored as a member of a plain (uncompressed) tar: the `length` bytes at `offset` of
  // `path`. Offsets stay those of the enclosing file; reading past the range is a FormatError.
  // `name` (the member's path) appears in messages.
  TarReader(const std::string& path, uint64_t offset, uint64_t length, const std::string& name);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  // Advances to the next member (any type; long-name and pax records are consumed, not
  // returned); false at the end-of-archive marker. FormatError on a bad checksum, a malformed
  // field, or an archive cut short.
  bool next(TarMember& member);
  // The current member's data; each member's data can be read once, before the next next().
  std::vector<uint8_t> read_data();
  bool gzip() const;
  const std::string& path() const { return path_; }  // as messages name it

 private:
  struct Source;
  void read_exact(void* dst, uint64_t n, const char* what);
  void skip(uint64_t n, const char* what);
  // The next 512-byte header, and where it starts; FormatError where the archive ends instead.
  void read_header(uint8_t* h, uint64_t& header_offset);

  std::string path_;
  std::unique_ptr<Source> src_;
  uint64_t pos_ = 0;              // current position in the uncompressed stream
  uint64_t limit_ = UINT64_MAX;   // end of the readable range (a nested tar's member)
  uint64_t pending_data_ = 0;     // unread data + padding bytes of the current member
  uint64_t current_size_ = 0;
  bool data_read_ = true;
  bool ended_ = false;
};

// Every member of an archive in order (a full scan; data is skipped, never read).
std::vector<TarMember> list_tar(const std::string& path);

// Writes ustar archives; names longer than 100 bytes go into a GNU 'L' record or a pax 'x'
// record. Used to pack image sets and by the tests and benchmarks that build archives.
class TarWriter {
 public:
  enum class LongNames { Gnu, Pax };
  // gzip: compress the archive (zlib gzwrite). IoError when the file cannot be created.
  explicit TarWriter(const std::string& path, bool gzip = false, LongNames long_names = LongNames::Gnu);
  ~TarWriter();  // finishes the archive if finish() was not called (errors are then lost)
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  void add_file(const std::string& name, std::span<const uint8_t> data, int64_t mtime = 0);
  void add_directory(const std::string& name, int64_t mtime = 0);
  // Writes the end-of-archive marker and closes the file; IoError on a failed write.
  void finish();

 private:
  struct Sink;
  void write_header(const std::string& name, char type, uint64_t size, int64_t mtime);
  void write(const void* data, size_t n);
  void pad(uint64_t n);

  std::string path_;
  std::unique_ptr<Sink> sink_;
  LongNames long_names_;
  bool finished_ = false;
};

// The 512-byte header checksum (the sum of all bytes with the checksum field read as spaces).
uint32_t tar_header_checksum(const uint8_t* header512);

}  // namespace d5
