// Tar archives (plain, gzip'd, GNU long names, pax records) through TarReader, reading every
// member's data, and the "image-tar" index builder (nested tars, class directories) on the same
// bytes. Selector bit 1: index (build_image_tar_index), else list and read every member.
#include <cstdint>

#include "deep500/train/image_datasets.h"
#include "fuzz_common.h"
#include "lv2/images/tar_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  const std::string path = d5::fuzz::write_temp_file(rest, "input.tar");
  if (selector & 1) {
    d5::fuzz::accepts([&] {
      const d5::ImageTarIndex index = d5::build_image_tar_index(path);
      for (const auto& e : index.entries) {
        d5::fuzz::require(e.size <= rest.size() && e.offset <= rest.size() - e.size, "image-tar entry outside the tar");
        d5::fuzz::require(e.label >= 0 && static_cast<size_t>(e.label) < index.classes.size(), "image-tar label");
      }
      // What load_image_tar_index stores must read back as the same index.
      const d5::ImageTarIndex back = d5::parse_image_tar_index(d5::serialize_image_tar_index(index), "round trip");
      d5::fuzz::require(back.entries.size() == index.entries.size(), "image-tar index round trip");
    });
    return 0;
  }
  d5::fuzz::accepts([&] {
    d5::TarReader reader(path);
    d5::TarMember m;
    int members = 0;
    while (reader.next(m)) {
      // Every other member is skipped without reading, so both paths over data are exercised.
      if (++members % 2 == 0) {
        const std::vector<uint8_t> bytes = reader.read_data();
        d5::fuzz::require(bytes.size() == m.size, "tar member data size differs from its header");
      }
      if (!reader.gzip() && members % 2 == 0) {
        d5::fuzz::require(m.size <= rest.size() && m.data_offset <= rest.size() - m.size, "tar member data past the file");
      }
    }
  });
  return 0;
}
