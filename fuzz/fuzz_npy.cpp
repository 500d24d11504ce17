// NPY arrays: read_npy_header on the input as a file, and (selector byte odd) the "npy" dataset
// over a directory whose inputs.npy and labels.npy are the two halves of the input, opened and
// read sample by sample: header checks, label conversion and the memory-mapped element reads.
#include <cstdint>
#include <cstring>
#include <vector>

#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "fuzz_common.h"

namespace {

void header_only(std::span<const uint8_t> bytes) {
  const std::string path = d5::fuzz::write_temp_file(bytes, "input.npy");
  d5::fuzz::accepts([&] {
    const d5::NpyHeader h = d5::read_npy_header(path);
    int64_t count = 1;
    for (int64_t d : h.shape) count *= d;  // the parser has checked that this fits in the file
    d5::fuzz::require(h.data_offset + count * h.item_size == static_cast<int64_t>(bytes.size()),
                      "NPY header accepted with a data size other than the file's");
  });
}

// rest = u16 split | inputs.npy | labels.npy
void dataset(std::span<const uint8_t> rest) {
  if (rest.size() < 2) return;
  size_t split = rest[0] | size_t{rest[1]} << 8;
  rest = rest.subspan(2);
  split = std::min(split, rest.size());
  d5::fuzz::write_temp_file(rest.first(split), "inputs.npy");
  d5::fuzz::write_temp_file(rest.subspan(split), "labels.npy");
  d5::fuzz::accepts([&] {
    static const bool registered = (d5::register_builtin_datasets(), true);
    (void)registered;
    d5::DatasetSpec spec;
    spec.name = "npy";
    spec.data_dir = d5::fuzz::temp_dir();
    auto ds = d5::open_dataset(spec);
    const int64_t n = std::min<int64_t>(ds->size(), 64);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index[1] = {i};
      const d5::Batch b = ds->fetch(index);
      d5::fuzz::require(ds->label(i) >= 0 && ds->label(i) < ds->classes(), "npy label outside [0, classes)");
      (void)b;
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  if (selector & 1) {
    dataset(rest);
  } else {
    header_only(rest);
  }
  return 0;
}
