// TFRecord files and tf.Example records. Selector (low 2 bits):
//   0  the input is a TFRecord file: scan_tfrecord_file, then read_tfrecord and parse_tf_example
//      for every record it finds;
//   1  the input is one record's data: framed with the right length and CRCs (which mutations
//      would almost never get right), then scanned, read and parsed as in 0;
//   2  the input is a tf.Example: parse_tf_example;
//   3  as 1, then opened and read as the "tfrecord" dataset (labels, JPEG decoding), with
//      label_offset -1, 0 or 1 from selector bits 2-3.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "deep500/train/dataset.h"
#include "fuzz_common.h"
#include "lv2/images/tfrecord.h"

namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

std::vector<uint8_t> framed(std::span<const uint8_t> record) {
  std::vector<uint8_t> out;
  put_le(out, record.size(), 8);
  put_le(out, d5::tfrecord_masked_crc({out.data(), 8}), 4);
  out.insert(out.end(), record.begin(), record.end());
  put_le(out, d5::tfrecord_masked_crc(record), 4);
  return out;
}

void scan_read_parse(std::span<const uint8_t> file) {
  const std::string path = d5::fuzz::write_temp_file(file, "input.tfrecord");
  d5::fuzz::accepts([&] {
    const auto records = d5::scan_tfrecord_file(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    d5::fuzz::require(fd >= 0, "cannot reopen the input");
    try {
      for (const auto& r : records) {
        d5::fuzz::require(r.length <= file.size() && r.offset + 16 <= file.size() - r.length,
                          "TFRecord record past the end of the file");
        const std::vector<uint8_t> data = d5::read_tfrecord(fd, path, r);
        d5::fuzz::accepts([&] { d5::parse_tf_example(data, "fuzz record"); });
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  });
}

void dataset(std::span<const uint8_t> record, int label_offset) {
  static const bool registered = (d5::register_builtin_datasets(), true);
  (void)registered;
  const std::vector<uint8_t> file = framed(record);
  d5::DatasetSpec spec;
  spec.name = "tfrecord";
  spec.data_dir = d5::fuzz::write_temp_file(file, "input.tfrecord");
  spec.options = {{"threads", "1"}, {"resize", "8"}, {"crop", "8"}, {"label_offset", std::to_string(label_offset)}};
  d5::fuzz::accepts([&] {
    auto ds = d5::open_dataset(spec);
    const int64_t index[1] = {0};
    const int64_t label = ds->label(0);
    d5::fuzz::require(label >= 0 && label < ds->classes(), "tfrecord label outside [0, classes)");
    ds->fetch(index);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  switch (selector & 3) {
    case 0: scan_read_parse(rest); break;
    case 1: scan_read_parse(framed(rest)); break;
    case 2: d5::fuzz::accepts([&] { d5::parse_tf_example(rest, "fuzz example"); }); break;
    default: dataset(rest, (selector >> 2) % 3 - 1); break;
  }
  return 0;
}
