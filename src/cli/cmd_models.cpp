// d5 models: the model zoo. `d5 models list` builds every model at batch 1 with its default input
// and prints its parameter count and the work of one forward pass; `d5 models export` writes one as
// an ONNX file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include <iostream>

#include "deep500/model_zoo.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx_export.h"
#endif
#include "deep500/op_registry.h"

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
  std::string text = fmt::format("{:<14}{:>13}  {:<12}{:>9}  {}\n", "model", "parameters", "input", "GFLOPs",
                                 "description");
  for (const auto& m : zoo_models()) {
    ModelOptions o;
    o.initialize = false;  // counting needs the shapes, not the values
    const Network net = build_model(m.name, o);
    const int64_t params = net.parameter_count();
    const double gflops = forward_flops(net) / 1e9;
    const std::string input = fmt::format("{}", fmt::join(m.default_input, "x"));
    text += fmt::format("{:<14}{:>13}  {:<12}{:>9.4g}  {}\n", m.name, with_separators(params), input, gflops,
                        m.description);
    models.push_back({{"name", m.name},
                      {"description", m.description},
                      {"parameters", params},
                      {"default_input", m.default_input},
                      {"default_classes", m.default_classes},
                      {"forward_gflops_batch1", gflops}});
  }
  text += "GFLOPs: one forward pass at batch 1 (a multiply-add counts 2), from the operators' flops()\n";
  emit_text(text, json{{"models", models}}, out);
  return kExitOk;
}

struct ModelExportOptions {
  std::string name, file;
  ModelOptions model;
};

int run_export(const ModelExportOptions& o) {
#ifdef D5_HAVE_ONNX
  register_builtin_operators();
  const Network net = build_model(o.name, o.model);
  export_onnx_file(net, o.file);
  std::cout << fmt::format("d5: wrote {} ({}, opset {})\n", o.file, net.summary(), net.opset());
  return kExitOk;
#else
  D5_THROW(Unimplemented, "this d5 was built without ONNX support: install libonnx-dev and libprotobuf-dev, then "
           "reconfigure (D5_WITH_ONNX=AUTO or ON)");
#endif
}

}  // namespace

Command register_models(CLI::App& app, const GlobalOptions& /*g*/) {
  auto* models = app.add_subcommand("models", "Level 1: the model zoo (list, export)");
  models->require_subcommand(1);
  auto* list = models->add_subcommand("list", "Every zoo model: parameters, default input, GFLOPs of one forward");
  auto out = std::make_shared<OutputOptions>();
  add_output_options(*list, *out);
  auto* exp = models->add_subcommand("export", "Write a zoo model as an ONNX file");
  auto eo = std::make_shared<ModelExportOptions>();
  exp->add_option("NAME", eo->name, "The zoo model ('d5 models list')")->required();
  exp->add_option("-o,--output", eo->file, "The ONNX file to write")->required();
  exp->add_option("--batch", eo->model.batch, "Batch size (the first dimension of the input)")
      ->check(CLI::PositiveNumber)
      ->default_val(1);
  exp->add_option("--classes", eo->model.classes, "Number of classes (default: the model's)")
      ->check(CLI::PositiveNumber);
  exp->add_option("--input-shape", eo->model.input_shape, "Per-sample input shape, e.g. 3,32,32 (default: the "
                  "model's)")->delimiter(',');
  exp->add_flag("--with-loss", eo->model.with_loss, "Append the loss node (inputs: the logits and 'labels')");
  exp->add_option("--seed", eo->model.seed, "Seed of the parameter initialization");
  return {models, [list, out, exp, eo]() -> int {
            if (list->parsed()) return run_list(*out);
            if (exp->parsed()) return run_export(*eo);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
