// read_maybe_gzip_file: whole files, gunzipped in memory with zlib so that an error can name the
// compressed offset where the stream broke.
#include <zlib.h>

#include <fstream>

#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  D5_CHECK(in, IoError, "cannot open '{}' for reading", path);
  const std::streamoff size = in.tellg();
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  D5_CHECK(in, IoError, "cannot read '{}' ({} bytes)", path, size);
  return bytes;
}

// Concatenated members (gzip allows them) are decoded one after the other.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& path) {
  std::vector<uint8_t> out;
  out.reserve(in.size() * 4);
  z_stream z{};
  D5_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, Internal, "zlib inflateInit2 failed");
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  uint8_t chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    z.next_out = chunk;
    z.avail_out = sizeof(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof(chunk) - z.avail_out));
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      const size_t at = in.size() - z.avail_in;
      if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
        inflateEnd(&z);
        D5_THROW(FormatError, "'{}': {} bytes of trailing data after the gzip stream at byte offset {}", path,
                 in.size() - at, at);
      }
      inflateReset(&z);
      continue;
    }
    if (rc == Z_OK) continue;
    const size_t at = in.size() - z.avail_in;
    const std::string msg = z.msg ? z.msg : "unexpected end of data";
    inflateEnd(&z);
    if (rc == Z_BUF_ERROR)
      D5_THROW(FormatError, "'{}' is truncated: the gzip stream ends at byte offset {} ({} bytes decompressed); "
               "download it again", path, at, out.size());
    D5_THROW(FormatError, "'{}' is corrupt: gzip error '{}' at byte offset {} ({} bytes decompressed)", path, msg,
             at, out.size());
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

std::vector<uint8_t> maybe_gunzip(std::vector<uint8_t> bytes, const std::string& what) {
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return gunzip(bytes, what);
  return bytes;
}

std::vector<uint8_t> read_maybe_gzip_file(const std::string& path) { return maybe_gunzip(read_file_bytes(path), path); }

}  // namespace d5
