// d5 models: the model zoo. `d5 models list` builds every model at batch 1 with its default input
// and prints its parameter count and the work of one forward pass; `d5 models export` writes one
// model, built with the given options, as an ONNX file.
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx/onnx_export.h"
#endif

namespace d5::cli {

namespace {
using nlohmann::json;

// 11689512 -> "11,689,512"
std::string with_separators(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int run_list(const OutputOptions& out) {
  register_builtin_operators();  // shape inference and flops() come from the reference operators
  json models = json::array();
  std::string text =
      fmt::format("{:<21}{:>13}  {:<13}{:>9}  {}\n", "model", "parameters", "input", "GFLOPs", "description");
  for (const auto& m : zoo_models()) {
    ModelOptions o;
    o.initialize = false;  // counting needs the shapes, not the values
    const Network net = build_model(m.name, o);
    const int64_t params = net.parameter_count();
    const double gflops = forward_flops(net) / 1e9;
    // A translation model reads source ids and decoder ids: "9+12 ids".
    const std::string input = fmt::format(
        "{}{}{}", fmt::join(m.default_input, "x"),
        m.default_target_length > 0 ? fmt::format("+{}", m.default_target_length) : "",
        m.default_vocabulary > 0 ? " ids" : "");
    text += fmt::format("{:<21}{:>13}  {:<13}{:>9.4g}  {}\n", m.name, with_separators(params), input, gflops,
                        m.description);
    models.push_back({{"name", m.name},
                      {"description", m.description},
                      {"parameters", params},
                      {"default_input", m.default_input},
                      {"default_classes", m.default_classes},
                      {"default_vocabulary", m.default_vocabulary},
                      {"per_position", m.per_position},
                      {"loss", m.loss},
                      {"default_target_length", m.default_target_length},
                      {"forward_gflops_batch1", gflops}});
  }
  text += "GFLOPs: one forward pass at batch 1 (a multiply-add counts 2), from the operators' flops()\n";
  emit_text(text, json{{"models", models}}, out);
  return kExitOk;
}

struct ExportOpts {
  std::string model, output;
  ModelOptions options;
  bool external_data = false;
};

// Initializers of at least this size go to the external data file with --external-data; smaller
// ones (biases, shape constants) stay inline, where tools read them without a second file.
constexpr int64_t kExternalDataThreshold = 1024;

int run_export(const ExportOpts& e, const GlobalOptions& g) {
#ifdef D5_HAVE_ONNX
  register_builtin_operators();  // export infers the network through the reference operators
  ModelOptions o = e.options;
  o.seed = g.seed;
  const Network net = build_model(e.model, o);
  ExportOptions xo;
  if (e.external_data) xo.external_data_threshold = kExternalDataThreshold;
  export_onnx_file(net, e.output, xo);
  std::cout << fmt::format("{} -> {} (input {}, {} parameters)\n", e.model, e.output,
                           net.desc(kZooInput).shape.to_string(), with_separators(net.parameter_count()));
  return kExitOk;
#else
  (void)g;
  D5_THROW(NotBuilt,
           "'d5 models export {}': this d5 was built without ONNX (D5_WITH_ONNX), so it cannot "
           "write ONNX files",
           e.model);
#endif
}

}  // namespace

Command register_models(CLI::App& app, const GlobalOptions& g) {
  auto* models = app.add_subcommand("models", "Level 1: the model zoo (list, export)");
  models->require_subcommand(1);
  auto* list =
      models->add_subcommand("list", "Every zoo model: parameters, default input, GFLOPs of one forward");
  auto out = std::make_shared<OutputOptions>();
  add_output_options(*list, *out);

  auto* exp = models->add_subcommand("export", "Write a zoo model as an ONNX file (opset 17)");
  auto e = std::make_shared<ExportOpts>();
  exp->add_option("model", e->model, "Zoo model name (see 'd5 models list')")->required();
  exp->add_option("--batch", e->options.batch, "Batch size fixed in the graph input")
      ->check(CLI::PositiveNumber)
      ->default_val(1);
  exp->add_option("--classes", e->options.classes, "Classifier outputs (default: the model's)")
      ->check(CLI::PositiveNumber);
  exp->add_option(
         "--input-shape", e->options.input_shape,
         "Per-sample input shape, comma-separated: C,H,W, or STEPS,FEATURES for lstm and transformer")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  exp->add_option("--target-length", e->options.target_length,
                  "Decoder input length of a sequence-to-sequence model (default: the model's)")
      ->check(CLI::PositiveNumber);
  exp->add_flag("--with-loss", e->options.with_loss,
                "Append SoftmaxCrossEntropyLoss: input 'labels' (int64 [batch]), output 'loss'");
  exp->add_flag("--training", e->options.training,
                "Training mode: BatchNormalization on batch statistics, Dropout active");
  exp->add_flag("--external-data", e->external_data,
                "Write initializers of 1 KiB or more to FILE.data next to the model (ONNX external data)");
  exp->add_option("-o,--output", e->output, "The ONNX file to write")->required();

  return {models, [list, exp, out, e, &g]() -> int {
            if (list->parsed()) return run_list(*out);
            if (exp->parsed()) return run_export(*e, g);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
