// The stored image-tar index (<tar>.d5index): parse_image_tar_index. Its CRC-32 trailer would stop
// almost every mutation at the first check, so with selector bit 1 the harness writes the right
// CRC over the body first and so fuzzes the fields behind it.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "deep500/train/image_datasets.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  std::string bytes(reinterpret_cast<const char*>(rest.data()), rest.size());
  if ((selector & 1) && bytes.size() >= 4) {
    const auto crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size() - 4)));
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  }
  d5::fuzz::accepts([&] {
    const d5::ImageTarIndex index = d5::parse_image_tar_index(bytes, "fuzz.d5index");
    for (const auto& e : index.entries) {
      d5::fuzz::require(e.size <= index.tar_size && e.offset <= index.tar_size - e.size,
                        "image-tar index entry outside the tar it indexes");
      d5::fuzz::require(e.label >= 0 && static_cast<size_t>(e.label) < index.classes.size(),
                        "image-tar index label outside its classes");
    }
  });
  return 0;
}
