#pragma once
// Problem suites: operator problem sizes kept as CSV data files, not code
// (suites/<family>/<kind>_<variant>.csv), turned into problems. A problem is a value: the OpSpec
// of one operator plus the seed and stream name its inputs are generated from, so any backend
// gets bit-identical inputs for it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/op/operator.h"

namespace d5 {

struct Problem {
  std::string suite;      // "deepbench-gemm-training"
  int64_t row = 0;        // 1-based data row (the order of the source list)
  int64_t line = 0;       // line of the row in its file
  std::string name;       // "#3 m1760n64k1760_NN": the row number and a benchdnn-style descriptor
  nlohmann::json params;  // the row's fields by column name, plus "row"
  OpSpec spec;            // f32, as DeepBench's default precision
  // Input i is filled from RngStream(seed, stream + "/input<i>") with uniform values in
  // [-input_scale[i], input_scale[i]).
  uint64_t seed = 0;
  std::string stream;     // "deepbench-gemm-training#3"
  std::vector<double> input_scale;
  // Length of the longest sum of products in the forward (backward) computation; tolerances for
  // comparing against the reference grow with it.
  int64_t forward_reduction = 1, backward_reduction = 1;
  // Bytes of every input and output, known from the sizes before anything is allocated.
  int64_t tensor_bytes = 0;
};

// The problem computed in `t` (f32, f16 or bf16): its f32 inputs become `t`, and tensor_bytes
// shrinks with them; params gain "dtype" when it is not f32. The inputs drawn are the f32 ones
// rounded to `t`. InvalidArgument for another dtype.
Problem in_dtype(Problem p, DType t);

// Generates the problem's inputs (deterministic in seed and stream).
std::vector<Tensor> generate_inputs(const Problem& p);
// A random upstream gradient for output k, uniform in [-1, 1), from stream + "/upstream<k>".
Tensor generate_upstream_gradient(const Problem& p, size_t k, const TensorDesc& desc);

struct SuiteInfo {
  std::string name;  // "deepbench-conv-training"
  std::string path;  // the CSV file
};

// The suites directory: $D5_SUITES_DIR when set, else the source tree's suites/ (baked in at
// build time).
std::string suites_directory();
// Every CSV file there and one level of subdirectories below, sorted by name. A file
// <family>/<kind>_<variant>.csv is the suite "<family>-<kind>-<variant>" with '_' read as '-'.
std::vector<SuiteInfo> available_suites();
// Loads a suite by name; InvalidArgument listing the available suites when it is unknown.
std::vector<Problem> load_suite(const std::string& name, uint64_t seed);
// Parses a suite file; its header line decides the kind (GEMM, convolution or RNN). Blank lines
// and lines starting with '#' are ignored. Malformed rows throw FormatError naming the file and
// line; a missing file throws IoError.
std::vector<Problem> load_suite_file(const std::string& path, const std::string& suite_name, uint64_t seed);
// The same for CSV text; `source` names it in error messages.
std::vector<Problem> parse_suite(std::string_view text, const std::string& source, const std::string& suite_name,
                                 uint64_t seed);

}  // namespace d5
