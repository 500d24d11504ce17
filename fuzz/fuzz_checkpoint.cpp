// Checkpoint files (docs/checkpoints.md): load_checkpoint. The header's CRC-32 would stop almost
// every mutation of the JSON header, so with selector bit 1 the harness writes the right CRC for
// the header length the file declares (when that fits) and so fuzzes the header's fields and the
// tensor table behind it.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "deep500/train/checkpoint.h"
#include "fuzz_common.h"

namespace {

void fix_header_crc(std::vector<uint8_t>& file) {
  constexpr size_t kFixed = 24;  // magic, version, header CRC, header length
  if (file.size() < kFixed) return;
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | file[16 + static_cast<size_t>(i)];
  if (header_bytes > file.size() - kFixed) return;
  const auto crc = static_cast<uint32_t>(crc32(0L, file.data() + kFixed, static_cast<uInt>(header_bytes)));
  for (int i = 0; i < 4; ++i) file[12 + static_cast<size_t>(i)] = static_cast<uint8_t>(crc >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  std::vector<uint8_t> file(rest.begin(), rest.end());
  if (selector & 1) fix_header_crc(file);
  const std::string path = d5::fuzz::write_temp_file(file, "input.d5ckpt");
  d5::fuzz::accepts([&] {
    const d5::Checkpoint c = d5::load_checkpoint(path);
    uint64_t bytes = 0;
    for (const auto& [name, t] : c.tensors) bytes += t.bytes();
    d5::fuzz::require(bytes <= file.size(), "checkpoint tensors hold more bytes than the file");
  });
  return 0;
}
