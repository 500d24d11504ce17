// Downloads of the catalog's entries (`d5 data download`): whatever a mirror serves for an entry's
// files, whatever a previous run left in the destination (a partial FILE.part to resume, a stale
// complete file). The download runs through the real libcurl against a file:// mirror in the
// process's temporary directory, then verification. Selector: the dataset (low bits), bit 6 a
// stale complete file in the destination, bit 7 a partial FILE.part holding the first half of the
// content. The content is not the publisher's file, so every download must end in a FormatError
// naming the checksum with the offending file deleted: accepting it, or keeping it, is a finding.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "deep500/train/downloader.h"
#include "fuzz_common.h"

namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& path, std::span<const uint8_t> data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool supported = [] {
    d5::fuzz::require(d5::download_supported(), "this fuzz build has no libcurl: install libcurl4-openssl-dev");
    return true;
  }();
  (void)supported;
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const auto& catalog = d5::download_catalog();
  const d5::DownloadableDataset& set = catalog[in.selector % catalog.size()];
  const fs::path mirror = fs::path(d5::fuzz::temp_dir()) / "mirror", dest = fs::path(d5::fuzz::temp_dir()) / "dest";
  fs::remove_all(dest);
  fs::create_directories(mirror);
  fs::create_directories(dest);
  for (const auto& f : set.files) {
    write_bytes(mirror / f.name, in.rest);
    if (in.selector & 0x40) write_bytes(dest / f.name, in.rest.subspan(in.rest.size() / 3));
    if (in.selector & 0x80) write_bytes(dest / (f.name + ".part"), in.rest.first(in.rest.size() / 2));
  }
  d5::DownloadOptions o;
  o.dir = dest.string();
  o.mirror = "file://" + mirror.string();
  const bool accepted = d5::fuzz::accepts([&] { d5::download_dataset(set.name, o); });
  d5::fuzz::require(!accepted, "content that is not the publisher's file passed verification");
  // The first file is the one that failed (the others were never reached).
  d5::fuzz::require(!fs::exists(dest / set.files.front().name), "a file that failed verification was kept");
  return 0;
}
