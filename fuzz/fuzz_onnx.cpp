// ONNX models and tensors: import_onnx_file (protobuf parsing, the schema check of every node,
// initializers including external data, shape inference and the graph checks), or with selector
// bit 1 read_tensor_file (a TensorProto, the .pb files of ONNX test cases). External data are
// read relative to the model's directory, which holds a 256-byte weights.bin the model may name;
// a file outside it (outside.bin) must never be read. Constant folding is off: it executes
// operators, which is not parsing (docs/fuzzing.md).
#include <cstdint>
#include <numeric>
#include <vector>

#include "deep500/onnx/onnx_import.h"
#include "deep500/onnx/onnx_io.h"
#include "fuzz_common.h"

namespace {

void write_data_files() {
  static const bool written = [] {
    std::vector<uint8_t> weights(256);
    std::iota(weights.begin(), weights.end(), uint8_t{0});
    d5::fuzz::write_temp_file(weights, "model/weights.bin");
    d5::fuzz::write_temp_file(weights, "outside.bin");
    return true;
  }();
  (void)written;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_data_files();
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  if (selector & 1) {
    const std::string path = d5::fuzz::write_temp_file(rest, "tensor.pb");
    d5::fuzz::accepts([&] { d5::onnx_io::read_tensor_file(path); });
    return 0;
  }
  const std::string path = d5::fuzz::write_temp_file(rest, "model/model.onnx");
  d5::ImportOptions options;
  options.fold_constants = false;
  options.batch = 2;
  d5::fuzz::accepts([&] { d5::import_onnx_file(path, options); });
  return 0;
}
