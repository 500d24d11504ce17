// CIFAR-10/100 binary batches through the registered datasets, as users open them: the input is
// either the extracted test batch (.bin) or the official archive (.tar.gz, any tar), and the
// dataset is opened and read. Selector bits: 1 cifar100 (else cifar10), 2 archive (else .bin),
// 4 coarse labels (cifar100).
#include <cstdint>

#include "deep500/train/dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = (d5::register_builtin_datasets(), true);
  (void)registered;
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  const bool cifar100 = selector & 1, archive = selector & 2;
  const std::string dir = d5::fuzz::temp_dir() + (archive ? "/archive" : "/bin");
  const std::string file = archive ? (cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz")
                                   : (cifar100 ? "test.bin" : "test_batch.bin");
  d5::fuzz::write_temp_file(rest, (archive ? "archive/" : "bin/") + file);
  d5::DatasetSpec spec;
  spec.name = cifar100 ? "cifar100" : "cifar10";
  spec.data_dir = dir;
  spec.split = "test";
  if (cifar100 && (selector & 4)) spec.options["label"] = "coarse";
  d5::fuzz::accepts([&] {
    auto ds = d5::open_dataset(spec);
    const int64_t n = std::min<int64_t>(ds->size(), 8);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index[1] = {i};
      const d5::Batch b = ds->fetch(index);
      const int64_t label = b.at(d5::kDataLabels).data_as<int64_t>()[0];
      d5::fuzz::require(label >= 0 && label < ds->classes(), "CIFAR label outside [0, classes)");
    }
  });
  return 0;
}
