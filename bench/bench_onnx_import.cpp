// ONNX import time of ResNet-50 (target: < 1 s). The model is the one given with --model, or
// torchvision's ResNet-50 (random weights, opset 17, batch 1 at 224 x 224) exported by
// python3-torch at bench time, as a model zoo file would be. Each run imports the file from
// scratch (read, protobuf parse, schema checks, network build, inference, parameter marking and
// constant folding); the protobuf parse alone is timed too, to show what the rest costs.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/onnx/onnx_import.h"
#include "deep500/onnx/onnx_io.h"
#include "deep500/op/op_registry.h"

namespace {

namespace fs = std::filesystem;
using namespace d5;
using namespace d5::bench;

// Exports ResNet-50 with python3-torch into `dir`; returns the model's path.
std::string export_resnet50(const std::string& python, const fs::path& dir) {
  const fs::path path = dir / "resnet50.onnx";
  const std::string script =
      "import torch, torchvision, warnings; warnings.simplefilter('ignore'); torch.manual_seed(0); "
      "m = torchvision.models.resnet50(weights=None).eval(); "
      "torch.onnx.export(m, torch.randn(1, 3, 224, 224), '" + path.string() + "', opset_version=17, "
      "input_names=['input'], output_names=['output'])";
  const std::string cmd = python + " -c \"" + script + "\"";
  std::cerr << "exporting ResNet-50 with " << python << " (python3-torch, python3-torchvision)...\n";
  D5_CHECK(std::system(cmd.c_str()) == 0 && fs::exists(path), IoError,
           "exporting ResNet-50 failed: '{}' needs torch and torchvision (Debian: python3-torch "
           "python3-torchvision); or give a model with --model FILE",
           python);
  return path.string();
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv, {{"model", ""}, {"runs", "21"}, {"python", "/usr/bin/python3"}});
  const int runs = args.integer("runs");
  D5_CHECK_ARG(runs >= 6, "--runs must be >= 6 for a 95% CI of the median, got {}", runs);
  register_builtin_operators();
  std::string model = args.str("model");
  const fs::path tmp = fs::temp_directory_path() / fmt::format("d5-bench-onnx-import-{}", ::getpid());
  if (model.empty()) {
    fs::create_directories(tmp);
    model = export_resnet50(args.str("python"), tmp);
  }

  const Network first = import_onnx_file(model);  // warms the file cache and the allocator
  // Interleaved, so that machine noise hits both alike.
  std::vector<double> parse, full;
  for (int r = 0; r < runs; ++r) {
    parse.push_back(hand_loop([&] { (void)onnx_io::load_model(model); }, 1)[0]);
    full.push_back(hand_loop([&] { (void)import_onnx_file(model); }, 1)[0]);
  }
  const double megabytes = static_cast<double>(fs::file_size(model)) / 1e6;
  fs::remove_all(tmp);

  std::cout << fmt::format("model: {} ({:.1f} MB)\n{}\n", model, megabytes, first.summary());
  std::cout << fmt::format("{} runs each, wall time of one call (steady_clock), median [95% CI]:\n", runs);
  std::cout << fmt::format("  read + protobuf parse   {} s\n", with_ci(parse, "{:.4f}"));
  std::cout << fmt::format("  import_onnx_file        {} s\n", with_ci(full, "{:.4f}"));
  const auto ci = median_ci(full);
  const double bound = ci.available ? ci.upper : median(full);
  std::cout << fmt::format("target: import < 1 s: {} (upper CI bound {:.3f} s)\n", bound < 1.0 ? "met" : "NOT met",
                           bound);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_onnx_import: " << e.what() << "\n";
  return 2;
}
