// IDX files (MNIST, Fashion-MNIST), raw or gzip'd: maybe_gunzip + parse_idx, the code path of
// read_idx_file without the file read. Each input is checked as images, as labels, and under the
// magic it declares itself (so every rank the format allows is exercised).
#include <cstdint>
#include <vector>

#include "deep500/train/dataset_formats.h"
#include "fuzz_common.h"

namespace {

void check(const std::vector<uint8_t>& bytes, uint32_t magic) {
  d5::fuzz::accepts([&] {
    const d5::IdxArray a = d5::parse_idx(bytes, "fuzz.idx", magic);
    uint64_t count = 1;
    for (int64_t d : a.dims) count *= static_cast<uint64_t>(d);
    d5::fuzz::require(a.dims.size() == (magic & 0xff), "IDX rank differs from the magic's");
    d5::fuzz::require(a.data.size() == count, "IDX data size differs from the product of its dimensions");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes;
  if (!d5::fuzz::accepts([&] { bytes = d5::maybe_gunzip(std::vector<uint8_t>(data, data + size), "fuzz.idx"); }))
    return 0;
  check(bytes, d5::kIdxImagesMagic);
  check(bytes, d5::kIdxLabelsMagic);
  if (bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[2] == 0x08)
    check(bytes, uint32_t{bytes[2]} << 8 | bytes[3]);
  return 0;
}
